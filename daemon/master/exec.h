/*
 * mc_master_exec: the one way a request reaches the master service. Every kind of request
 * the master serves -- the object operations an agent batches (put start/end/revoke, get,
 * lease release, exist, stat, remove) and the node, segment and cluster ones (register,
 * heartbeat, mount, fence acknowledgements, restores, list, stats, drain, copies) -- is a row of one
 * table in exec.c and runs through mc_master_exec. Its two callers are the standalone
 * agent's in-process link (daemon/agent/mlink.c), which runs each request as a batch of
 * one, and mc-master's RPC handlers (daemon/mcmaster/server.c), which run each decoded
 * batch as one request: standalone is a cluster of one, the same path minus the wire.
 *
 * Not here: who may ask (the cluster token, a peer speaking for its own node) is the front
 * end's; the request carries the node it speaks for, already checked.
 *
 * A request is the caller's storage: the op, the asking node, and per kind either item
 * arrays (batch kinds: `n` items in, one status per item in results[], outputs beside) or
 * the fields of its union member. Item arrays, keys and names stay the caller's and are
 * read during the call only. Same threading as the master: callers serialise calls.
 */
#ifndef MC_MASTER_EXEC_H
#define MC_MASTER_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/master/master.h"

enum mc_master_op {
    MC_MASTER_OP_PUT_START,      /* batch: put[] -> grant[] */
    MC_MASTER_OP_PUT_END,        /* batch: ref[] */
    MC_MASTER_OP_PUT_REVOKE,     /* batch: ref[] */
    MC_MASTER_OP_GET,            /* batch: key[] -> get[] (a lease each; .._F_PIN) */
    MC_MASTER_OP_LEASE_RELEASE,  /* batch: ref[] -> released (no per-item status) */
    MC_MASTER_OP_EXIST,          /* batch: key[] -> results 1/0 (.._F_PREFIX, .._F_TOUCH) */
    MC_MASTER_OP_STAT,           /* batch: key[] -> results 1/0, stat[] (.._F_PREFIX) */
    MC_MASTER_OP_REMOVE,         /* batch: key[] -> count[] */
    MC_MASTER_OP_REMOVE_PREFIX,  /* batch: prefix[] -> count[] */
    MC_MASTER_OP_FENCE_ACK,      /* batch: fence[], each of a segment of `node` */
    MC_MASTER_OP_NODE_REGISTER,  /* u.reg */
    MC_MASTER_OP_HEARTBEAT,      /* u.hb, of `node` */
    MC_MASTER_OP_NODE_LEAVE,     /* `node` unregisters (its segments go with it) */
    MC_MASTER_OP_MOUNT,          /* u.mount */
    MC_MASTER_OP_UNMOUNT,        /* u.seg */
    MC_MASTER_OP_SEG_INFO,       /* u.seg_info */
    MC_MASTER_OP_NODE_LIST,      /* u.nodes */
    MC_MASTER_OP_STATS,          /* u.stats */
    MC_MASTER_OP_LIST,           /* u.list */
    MC_MASTER_OP_DRAIN,          /* u.drain */
    MC_MASTER_OP_COPY_DONE,      /* u.copy_done */
    MC_MASTER_OP_RESTORE,        /* batch: restore[], each into a segment of `node` */
    MC_MASTER_OP_RESTORE_DONE,   /* batch: seg[], segments of `node` whose reports are complete */
    MC_MASTER_OP__COUNT,
};

/* EXIST and STAT: prefix match, items after the first absent key are answered 0 unread */
#define MC_MASTER_EXEC_F_PREFIX 0x1u
/* GET: each lease is a client's pin (mc_master_pin), not a read's */
#define MC_MASTER_EXEC_F_PIN 0x2u
/* EXIST: each present key is marked recently used (mc_master_touch) */
#define MC_MASTER_EXEC_F_TOUCH 0x4u

struct mc_master_req {
    enum mc_master_op op;
    uint32_t node;  /* the node the request speaks for (MC_MASTER_NODE_NONE: none) */
    uint32_t flags; /* MC_MASTER_EXEC_F_* */
    uint32_t n;     /* batch kinds: items */
    int *results;   /* batch kinds: n statuses, 0 or MC_ERR_* (EXIST/STAT: 1 or 0 too) */
    union {
        const struct mc_master_put_req *put;
        const struct mc_master_ref *ref;
        const struct mc_master_key *key;
        const struct mc_master_fence *fence;
        const struct mc_master_restore_req *restore;
        const uint32_t *seg;
    } in;
    union {
        struct mc_master_put_grant *grant;
        struct mc_master_get_result *get;
        struct mc_master_stat *stat;
        uint64_t *count;
    } out;
    union {
        uint64_t released; /* LEASE_RELEASE: leases ended */
        struct {
            const char *name, *domain; /* NUL-terminated; domain NULL: the node's own */
            uint32_t node;             /* out */
        } reg;
        struct {
            uint32_t drain; /* out: MC_MASTER_DRAIN_* */
        } hb;
        struct {
            const struct mc_master_seg_desc *desc;
            uint32_t seg; /* out */
        } mount;
        uint32_t seg; /* UNMOUNT */
        struct {
            uint32_t seg;
            struct mc_master_seg_info info; /* out */
        } seg_info;
        struct {
            uint32_t cursor; /* in and out (mc_master_node_list) */
            struct mc_master_node_info *out;
            size_t max, n; /* n: out */
        } nodes;
        struct mc_master_stats *stats; /* STATS: filled (the caller's: keeps requests small) */
        struct {
            const char *prefix;
            size_t prefix_len;
            uint64_t cursor; /* in and out */
            size_t max;
            mc_master_list_fn fn;
            void *ctx;
            int n; /* out: keys listed */
        } list;
        struct {
            const char *name; /* NUL-terminated */
            bool on;
        } drain;
        struct {
            uint64_t id;
            int status;
        } copy_done;
    } u;
};

/*
 * Runs `req` on `m`. Returns the call's status: 0 (for a batch kind, each item's is in
 * results[]), or what the single request's master call returned (MC_ERR_NOT_FOUND,
 * MC_ERR_INVALID, ...). An unknown op is MC_ERR_INVALID.
 */
int mc_master_exec(struct mc_master *m, struct mc_master_req *req);

/* The kind's name for logs ("PUT_START", ...; "?" when unknown). */
const char *mc_master_op_name(enum mc_master_op op);

/* Whether the kind takes item arrays (n, results[]). */
bool mc_master_op_is_batch(enum mc_master_op op);

#endif /* MC_MASTER_EXEC_H */
