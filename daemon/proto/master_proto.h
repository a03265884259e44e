/*
 * mc_proto: the payload codecs of the master RPCs (docs/protocol.md), one encoder and one
 * decoder for the request and for the reply of each master message of the catalogue
 * (daemon/proto/rpc.h: HELLO .. CLUSTER_INFO, LIST, DRAIN, COPY). The frame header is not
 * here: the payload is what follows it. Agent-to-agent messages (WRITE, READ) are not here
 * either.
 *
 * Built on the bounded reader/writer of ucx_backend/wire.h: every integer is little-endian,
 * every byte string (key, name, token, address, rkey) is a uint32 length and the bytes.
 * The byte layouts are the rows of daemon/proto/rpc.h (and docs/protocol.md, generated).
 *
 * Decoders take hostile input. They check every field before the caller sees any of it:
 * counts (<= MC_PROTO_BATCH_MAX and <= the caller's capacity), key lengths
 * (1..MC_PROTO_KEY_MAX), names (1..MC_PROTO_NAME_MAX graphic ASCII bytes), blob lengths, enums,
 * flags (known bits only), status codes (0, 1 where the message allows it, or a known
 * MC_ERR_*), and that the payload ends exactly where the message does. A decoder that fails
 * returns MC_ERR_PROTO and leaves its outputs in an unspecified state (they may be partly
 * written); the caller drops the message (and, for a request, answers MC_ERR_PROTO or closes
 * the endpoint).
 *
 * Zero copy: decoded keys, names, tokens and blobs point INTO the decoded buffer and are not
 * NUL-terminated. They are valid while that buffer is (for an AM payload: until the handler
 * returns, unless the caller kept the data). Copy what must outlive it.
 *
 * Encoders refuse (MC_ERR_INVALID, nothing usable written) what the decoder would refuse,
 * so a peer never receives a payload this side would reject; a payload that does not fit in
 * `cap` is MC_ERR_TOO_LARGE (split the batch). On success *len_p is the payload length.
 * Every batch at MC_PROTO_BATCH_MAX items fits in MC_WIRE_PAYLOAD_MAX (static_asserts in
 * master_proto.c); MC_PROTO_PAYLOAD_MAX is a capacity that fits every message.
 *
 * Replies: every reply starts with an int32 call status. When it is not 0 the call failed
 * as a whole (unknown node, not authenticated, ...) and nothing follows it; the decoded
 * reply then has n = 0 and the caller's arrays are untouched. Batch replies carry one status
 * per item, in request order; pass `cap` = the number of items sent so that a reply with more
 * items is refused (the caller also checks n == items sent).
 *
 * Thread-safety: every function is pure or touches only the caller's storage. No function
 * allocates.
 */
#ifndef MC_PROTO_MASTER_PROTO_H
#define MC_PROTO_MASTER_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/master/master.h"
#include "daemon/proto/proto_base.h"
#include "daemon/proto/rpc.h"
#include "ucx_backend/wire.h"

/* HEARTBEAT flags */
#define MC_PROTO_HEARTBEAT_F_LEAVE 0x1u /* graceful exit: unregister the node (and unmount) */
/* the node carries PUBLISHes over a master change that are not settled yet: a new
 * master's recovery window stays open for their owners' late restores (docs/master.md) */
#define MC_PROTO_HEARTBEAT_F_CARRYING 0x2u
#define MC_PROTO_HEARTBEAT_F_KNOWN (MC_PROTO_HEARTBEAT_F_LEAVE | MC_PROTO_HEARTBEAT_F_CARRYING)
/* HELLO flags */
#define MC_PROTO_HELLO_F_CARRYING 0x1u /* as MC_PROTO_HEARTBEAT_F_CARRYING, from the start */
#define MC_PROTO_HELLO_F_KNOWN MC_PROTO_HELLO_F_CARRYING

/* EXIST_BATCH flags */
#define MC_PROTO_EXIST_F_STAT 0x1u /* reply with a stat record for each present key */
/* prefix match: items after the first absent key are answered 0 without a lookup */
#define MC_PROTO_EXIST_F_PREFIX 0x2u
/* mark each present key recently used (mc_touch); not with STAT */
#define MC_PROTO_EXIST_F_TOUCH 0x4u
#define MC_PROTO_EXIST_F_KNOWN                                                                 \
    (MC_PROTO_EXIST_F_STAT | MC_PROTO_EXIST_F_PREFIX | MC_PROTO_EXIST_F_TOUCH)

/* GET_BATCH flags */
#define MC_PROTO_GET_F_PIN 0x1u /* each lease is a client's pin (pin_ttl_ms), not a read's */
#define MC_PROTO_GET_F_KNOWN MC_PROTO_GET_F_PIN

/* REMOVE_BATCH flags */
#define MC_PROTO_REMOVE_F_PREFIX 0x1u /* each key is a prefix: mc_master_remove_prefix */
#define MC_PROTO_REMOVE_F_KNOWN  MC_PROTO_REMOVE_F_PREFIX

/* CLUSTER_INFO flags */
#define MC_PROTO_INFO_F_STATS    0x1u /* the reply has struct mc_master_stats */
#define MC_PROTO_INFO_F_SEGMENTS 0x2u /* the reply has a page of segments */
#define MC_PROTO_INFO_F_NODES    0x4u /* the reply has a page of nodes */
#define MC_PROTO_INFO_F_KNOWN                                                                  \
    (MC_PROTO_INFO_F_STATS | MC_PROTO_INFO_F_SEGMENTS | MC_PROTO_INFO_F_NODES)

/* A key of a key-only batch (GET, EXIST, REMOVE) or of a LIST page: the master's own item
 * (struct mc_master_key, master.h), so that a decoded batch goes to mc_master_exec as it
 * is. The name mc_proto_key stays for the callers that use it. */
#define mc_proto_key mc_master_key

/* --- HELLO: authentication and node registration ------------------------------------------ */

struct mc_proto_hello_req {
    struct mc_proto_bytes token;  /* 0..MC_PROTO_TOKEN_MAX bytes; the master decides
                                     whether an empty token is acceptable */
    struct mc_proto_bytes name;   /* node name, 1..MC_PROTO_NAME_MAX graphic ASCII */
    struct mc_proto_bytes domain; /* failure domain, 0..MC_PROTO_NAME_MAX (0: the node's own) */
    uint64_t incarnation;         /* random per agent process, the same across its
                                     reconnects (0: not sent, a sender that predates it) */
    uint32_t flags;               /* MC_PROTO_HELLO_F_* (0: not sent; sent only after a
                                     non-zero incarnation) */
};

struct mc_proto_hello_rep {
    int32_t status;        /* 0, MC_ERR_DENIED (token), MC_ERR_EXISTS (the name is held by
                              another live agent), MC_ERR_INVALID, MC_ERR_NO_SPACE, ... */
    uint32_t node;         /* the node id (status 0) */
    uint64_t node_ttl_ms;  /* liveness TTL: heartbeat well within it (status 0, > 0) */
    uint64_t lease_ttl_ms; /* read lease lifetime (status 0, > 0) */
    uint64_t epoch;        /* the leader's epoch with --etcd (0: none) */
    uint64_t incarnation;  /* random per master process (0: not told): with the epoch, names
                              the directory whose segment ids the agent learns */
};

/* --- MOUNT: a segment --------------------------------------------------------------------- */

struct mc_proto_mount_req {
    struct mc_master_seg_desc seg;     /* node, kind (enum mc_seg_kind), base, size (> 0) */
    struct mc_proto_bytes worker_addr; /* 1..MC_PROTO_ADDR_MAX bytes */
    struct mc_proto_bytes rkey;        /* 0..MC_PROTO_RKEY_MAX bytes (0: no one-sided access) */
};

struct mc_proto_mount_rep {
    int32_t status;
    uint32_t seg; /* the segment id (status 0) */
};

/* --- HEARTBEAT ---------------------------------------------------------------------------- */

struct mc_proto_heartbeat_req {
    uint32_t node;
    uint32_t flags; /* MC_PROTO_HEARTBEAT_F_* */
};

struct mc_proto_status_rep { /* a reply that is only a status */
    int32_t status;
};

/* HEARTBEAT_REPLY: the status, then (status 0, and only when not 0) the node's drain state,
 * MC_MASTER_DRAIN_*: the agent shows it on its health page. */
struct mc_proto_heartbeat_rep {
    int32_t status;
    uint32_t drain;
};

/* --- batches ------------------------------------------------------------------------------ */

/* PUT_START_BATCH: items are struct mc_master_put_req; the batch names the writer once. */
struct mc_proto_put_start_req {
    uint32_t writer; /* node id of the writing agent; decoding copies it into every item */
    uint32_t n;
};

/* PUT_END_BATCH, PUT_REVOKE_BATCH, LEASE_RELEASE_BATCH: items are struct mc_master_ref
 * (key, version; epoch only for LEASE_RELEASE). The batch names the node once. */
struct mc_proto_ref_req {
    uint32_t node; /* writer (put end/revoke) or reader (lease release) */
    uint32_t n;
};

/* GET_BATCH, EXIST_BATCH, REMOVE_BATCH: items are struct mc_proto_key. */
struct mc_proto_keys_req {
    uint32_t node;  /* the asking agent */
    uint32_t flags; /* EXIST: MC_PROTO_EXIST_F_*, REMOVE: MC_PROTO_REMOVE_F_*, GET: 0 */
    uint32_t n;
};

/* FENCE (master -> owner agent): no write may land in these allocations any more. An item
 * is the master's own (struct mc_master_fence: seg, alloc, version), as for keys above. */
#define mc_proto_fence_item mc_master_fence

struct mc_proto_fence_req {
    uint32_t n;
};

/* A batch reply: the call status and the item count; item arrays are the caller's. */
struct mc_proto_batch_rep {
    int32_t status;
    uint32_t flags; /* EXIST: the request's flags, echoed; other messages: 0 */
    uint32_t n;     /* items (0 when status != 0) */
};

/* LEASE_RELEASE_BATCH reply: how many leases were ended. */
struct mc_proto_lease_release_rep {
    int32_t status;
    uint32_t released; /* <= MC_PROTO_BATCH_MAX */
};

/* --- CLUSTER_INFO ------------------------------------------------------------------------- */

struct mc_proto_info_req {
    uint32_t flags;  /* MC_PROTO_INFO_F_* */
    uint32_t cursor; /* first segment id of the page (0: from the start) */
    uint32_t max;    /* segments wanted, 1..MC_PROTO_SEG_PAGE_MAX (with F_SEGMENTS; else 0) */
    uint32_t node_cursor; /* where the node page starts (0: from the start; with F_NODES,
                             else 0): a next_node_cursor of an earlier reply */
    uint32_t node_max;    /* nodes wanted, 1..MC_PROTO_NODE_PAGE_MAX (with F_NODES; else 0) */
};

struct mc_proto_seg_entry {
    uint32_t seg;
    struct mc_master_seg_info info;    /* kind in range, node, base, size, free, ... */
    struct mc_proto_bytes worker_addr; /* the owner's, as mounted: 1..MC_PROTO_ADDR_MAX */
    struct mc_proto_bytes rkey;        /* 0..MC_PROTO_RKEY_MAX */
};

/* A registered node (mc_master_node_list), live or dead. */
struct mc_proto_node_entry {
    uint32_t id;
    uint32_t alive;               /* 0 or 1 */
    uint32_t segments;            /* segments it has mounted */
    uint64_t idle_ms;             /* since its last heartbeat, master clock */
    struct mc_proto_bytes name;   /* 1..MC_PROTO_NAME_MAX graphic ASCII */
    struct mc_proto_bytes domain; /* 1..MC_PROTO_NAME_MAX graphic ASCII */
    uint32_t drain;               /* MC_MASTER_DRAIN_*: 0 none, 1 draining, 2 drained */
    uint64_t drain_blocks;        /* blocks left in its segments while it drains */
    uint64_t drain_bytes;         /* bytes of them */
};

struct mc_proto_info_rep {
    int32_t status;
    uint32_t flags;               /* the sections present: MC_PROTO_INFO_F_* */
    struct mc_master_stats stats; /* with F_STATS */
    uint32_t nseg;                /* with F_SEGMENTS: entries in the page */
    uint32_t next_cursor;         /* with F_SEGMENTS: where the next page starts, 0 = done */
    uint32_t nnode;               /* with F_NODES: entries in the node page */
    uint32_t next_node_cursor;    /* with F_NODES: where the next node page starts, 0 = done */
};

/* --- LIST: keys by prefix ----------------------------------------------------------------- */

struct mc_proto_list_req {
    uint32_t node;                /* the asking agent */
    uint32_t max;                 /* 1..MC_PROTO_LIST_MAX keys */
    uint64_t cursor;              /* 0: start; else a next_cursor of an earlier reply */
    struct mc_proto_bytes prefix; /* 0..MC_PROTO_KEY_MAX bytes (0: every key) */
};

struct mc_proto_list_rep {
    int32_t status;
    uint32_t n;           /* keys in the reply (0 when status != 0) */
    uint64_t next_cursor; /* 0 = done */
};

/* --- DRAIN (agent -> master) and COPY (master -> owner) -------------------------------- */

struct mc_proto_drain_req {
    uint32_t on;                /* 1: drain, 0: undrain */
    struct mc_proto_bytes name; /* the node's name, 1..MC_PROTO_NAME_MAX graphic ASCII */
};

struct mc_proto_copy_req {
    uint64_t id;         /* the copy; the write to the target carries it as its version */
    uint64_t version;    /* the object's version (logs) */
    uint32_t src_seg, src_alloc;
    uint64_t src_offset;
    uint64_t len;        /* > 0 */
    uint32_t dst_node, dst_seg, dst_alloc;
    uint64_t dst_offset;
    struct mc_proto_bytes key; /* 1..MC_PROTO_KEY_MAX */
};

/* The token and status checks (mc_proto_token_equal, mc_proto_status_is_valid), the bounds
 * (MC_PROTO_*_MAX) and struct mc_proto_bytes are proto_base.h's, included above. */

/* --- codecs ----------------------------------------------------------------------------------
 *
 * Encoders: (message, item arrays, buf, cap, len_p). Returns 0 and *len_p, MC_ERR_INVALID (a
 * field the decoder would refuse), or MC_ERR_TOO_LARGE (does not fit in cap).
 * Decoders: (buf, len, [cap,] outputs). Returns 0 or MC_ERR_PROTO. Item arrays have room
 * for `cap` items; cap above MC_PROTO_BATCH_MAX is treated as MC_PROTO_BATCH_MAX.
 * Decoded pointers point into buf (see the top of this file).
 */

int mc_proto_hello_req_encode(const struct mc_proto_hello_req *m, void *buf, size_t cap,
                              size_t *len_p);
int mc_proto_hello_req_decode(const void *buf, size_t len, struct mc_proto_hello_req *m_p);
int mc_proto_hello_rep_encode(const struct mc_proto_hello_rep *m, void *buf, size_t cap,
                              size_t *len_p);
int mc_proto_hello_rep_decode(const void *buf, size_t len, struct mc_proto_hello_rep *m_p);

int mc_proto_mount_req_encode(const struct mc_proto_mount_req *m, void *buf, size_t cap,
                              size_t *len_p);
int mc_proto_mount_req_decode(const void *buf, size_t len, struct mc_proto_mount_req *m_p);
int mc_proto_mount_rep_encode(const struct mc_proto_mount_rep *m, void *buf, size_t cap,
                              size_t *len_p);
int mc_proto_mount_rep_decode(const void *buf, size_t len, struct mc_proto_mount_rep *m_p);

int mc_proto_heartbeat_req_encode(const struct mc_proto_heartbeat_req *m, void *buf, size_t cap,
                                  size_t *len_p);
int mc_proto_heartbeat_req_decode(const void *buf, size_t len,
                                  struct mc_proto_heartbeat_req *m_p);
/* A status-only reply (HEARTBEAT_REPLY): status 0 or a known MC_ERR_*. */
int mc_proto_heartbeat_rep_encode(const struct mc_proto_heartbeat_rep *m, void *buf, size_t cap,
                                  size_t *len_p);
int mc_proto_heartbeat_rep_decode(const void *buf, size_t len, struct mc_proto_heartbeat_rep *m_p);
int mc_proto_status_rep_encode(const struct mc_proto_status_rep *m, void *buf, size_t cap,
                               size_t *len_p);
int mc_proto_status_rep_decode(const void *buf, size_t len, struct mc_proto_status_rep *m_p);

/* PUT_START_BATCH. Items: key 1..512 bytes, size > 0, alloc_len 0 or >= size, replicas
 * 0..MC_MASTER_MAX_REPLICAS, flags MC_MASTER_PUT_FLAGS_ALL bits. `writer` of the items is
 * not sent (the batch's is); decoding sets it. */
int mc_proto_put_start_req_encode(const struct mc_proto_put_start_req *m,
                                  const struct mc_master_put_req *items, void *buf, size_t cap,
                                  size_t *len_p);
int mc_proto_put_start_req_decode(const void *buf, size_t len, size_t cap,
                                  struct mc_proto_put_start_req *m_p,
                                  struct mc_master_put_req *items);
/* A PUT_START_BATCH_REPLY item status that never reaches a client: no room now, but the
 * master has offload copies under way whose end frees DRAM (docs/disk.md, "Back-pressure").
 * The writer's agent asks again within the put's deadline, and past it answers
 * MC_ERR_NO_SPACE. */
#define MC_PROTO_NO_SPACE_YET MC_MASTER_NO_SPACE_YET

/* PUT_START_BATCH_REPLY: results[i] 0 (grants[i] holds 1..MC_MASTER_MAX_REPLICAS replicas,
 * kinds in range, len > 0), a known MC_ERR_* or MC_PROTO_NO_SPACE_YET (grants[i] is not
 * sent; decoding zeroes it). */
int mc_proto_put_start_rep_encode(const struct mc_proto_batch_rep *m, const int *results,
                                  const struct mc_master_put_grant *grants, void *buf,
                                  size_t cap, size_t *len_p);
int mc_proto_put_start_rep_decode(const void *buf, size_t len, size_t cap,
                                  struct mc_proto_batch_rep *m_p, int *results,
                                  struct mc_master_put_grant *grants);

/* PUT_END_BATCH and PUT_REVOKE_BATCH (same layout): items key + version; decoding sets
 * node = the batch's node and epoch = 0. */
int mc_proto_put_end_req_encode(const struct mc_proto_ref_req *m,
                                const struct mc_master_ref *items, void *buf, size_t cap,
                                size_t *len_p);
int mc_proto_put_end_req_decode(const void *buf, size_t len, size_t cap,
                                struct mc_proto_ref_req *m_p, struct mc_master_ref *items);
int mc_proto_put_revoke_req_encode(const struct mc_proto_ref_req *m,
                                   const struct mc_master_ref *items, void *buf, size_t cap,
                                   size_t *len_p);
int mc_proto_put_revoke_req_decode(const void *buf, size_t len, size_t cap,
                                   struct mc_proto_ref_req *m_p, struct mc_master_ref *items);

/* RESTORE_BATCH: the replicas a node holds (items are struct mc_master_restore_req); the
 * batch names the node once (m->node of struct mc_proto_ref_req; no epoch). Encoding
 * refuses what the master would (bad key, size 0 or above alloc_len, version 0, flags
 * beyond the stored ones). The reply is mc_proto_results_rep. */
int mc_proto_restore_req_encode(const struct mc_proto_ref_req *m,
                                const struct mc_master_restore_req *items, void *buf,
                                size_t cap, size_t *len_p);
int mc_proto_restore_req_decode(const void *buf, size_t len, size_t cap,
                                struct mc_proto_ref_req *m_p,
                                struct mc_master_restore_req *items);

/* RESTORE_DONE: segments (of the batch's node) whose reports are complete; the reply is
 * mc_proto_results_rep. */
int mc_proto_restore_done_req_encode(const struct mc_proto_ref_req *m, const uint32_t *segs,
                                     void *buf, size_t cap, size_t *len_p);
int mc_proto_restore_done_req_decode(const void *buf, size_t len, size_t cap,
                                     struct mc_proto_ref_req *m_p, uint32_t *segs);

/* A reply of one status per item, 0 or a known MC_ERR_*: the reply of PUT_END_BATCH,
 * PUT_REVOKE_BATCH, RESTORE_BATCH and FENCE (m->flags is not sent; decoding sets it to 0). */
int mc_proto_results_rep_encode(const struct mc_proto_batch_rep *m, const int *results,
                                void *buf, size_t cap, size_t *len_p);
int mc_proto_results_rep_decode(const void *buf, size_t len, size_t cap,
                                struct mc_proto_batch_rep *m_p, int *results);

/* GET_BATCH: keys, flags MC_PROTO_GET_F_*. */
int mc_proto_get_req_encode(const struct mc_proto_keys_req *m, const struct mc_proto_key *items,
                            void *buf, size_t cap, size_t *len_p);
int mc_proto_get_req_decode(const void *buf, size_t len, size_t cap,
                            struct mc_proto_keys_req *m_p, struct mc_proto_key *items);
/* GET_BATCH_REPLY: results[i] 0 (res[i]: version, size, flags (MC_MASTER_PUT_FLAGS_ALL
 * bits), 1..MC_MASTER_MAX_REPLICAS replicas, lease with lease.version == version) or a
 * known MC_ERR_* (res[i] zeroed). */
int mc_proto_get_rep_encode(const struct mc_proto_batch_rep *m, const int *results,
                            const struct mc_master_get_result *res, void *buf, size_t cap,
                            size_t *len_p);
int mc_proto_get_rep_decode(const void *buf, size_t len, size_t cap,
                            struct mc_proto_batch_rep *m_p, int *results,
                            struct mc_master_get_result *res);

/* LEASE_RELEASE_BATCH: items key + version + epoch; decoding sets node = the batch's. */
int mc_proto_lease_release_req_encode(const struct mc_proto_ref_req *m,
                                      const struct mc_master_ref *items, void *buf, size_t cap,
                                      size_t *len_p);
int mc_proto_lease_release_req_decode(const void *buf, size_t len, size_t cap,
                                      struct mc_proto_ref_req *m_p,
                                      struct mc_master_ref *items);
int mc_proto_lease_release_rep_encode(const struct mc_proto_lease_release_rep *m, void *buf,
                                      size_t cap, size_t *len_p);
int mc_proto_lease_release_rep_decode(const void *buf, size_t len,
                                      struct mc_proto_lease_release_rep *m_p);

/* EXIST_BATCH: keys, flags MC_PROTO_EXIST_F_*. */
int mc_proto_exist_req_encode(const struct mc_proto_keys_req *m,
                              const struct mc_proto_key *items, void *buf, size_t cap,
                              size_t *len_p);
int mc_proto_exist_req_decode(const void *buf, size_t len, size_t cap,
                              struct mc_proto_keys_req *m_p, struct mc_proto_key *items);
/* EXIST_BATCH_REPLY: m->flags echoes the request's; results[i] 1, 0 or a known MC_ERR_*;
 * with MC_PROTO_EXIST_F_STAT, stats[i] for each result 1 (flags MC_MASTER_PUT_FLAGS_ALL
 * bits). Encoding reads stats only then; decoding zeroes the others. `stats` may be NULL
 * when decoding: stat records are then checked and skipped. */
int mc_proto_exist_rep_encode(const struct mc_proto_batch_rep *m, const int *results,
                              const struct mc_master_stat *stats, void *buf, size_t cap,
                              size_t *len_p);
int mc_proto_exist_rep_decode(const void *buf, size_t len, size_t cap,
                              struct mc_proto_batch_rep *m_p, int *results,
                              struct mc_master_stat *stats);

/* REMOVE_BATCH: keys (prefixes with MC_PROTO_REMOVE_F_PREFIX), flags MC_PROTO_REMOVE_F_*. */
int mc_proto_remove_req_encode(const struct mc_proto_keys_req *m,
                               const struct mc_proto_key *items, void *buf, size_t cap,
                               size_t *len_p);
int mc_proto_remove_req_decode(const void *buf, size_t len, size_t cap,
                               struct mc_proto_keys_req *m_p, struct mc_proto_key *items);
/* REMOVE_BATCH_REPLY: results[i] 0 or a known MC_ERR_*, counts[i] objects removed (1 for a
 * plain remove that succeeded, the count for a prefix, 0 on error). `counts` may be NULL
 * when decoding. */
int mc_proto_remove_rep_encode(const struct mc_proto_batch_rep *m, const int *results,
                               const uint64_t *counts, void *buf, size_t cap, size_t *len_p);
int mc_proto_remove_rep_decode(const void *buf, size_t len, size_t cap,
                               struct mc_proto_batch_rep *m_p, int *results, uint64_t *counts);

/* FENCE: (seg, alloc, version) items; the reply is mc_proto_results_rep_* (one status
 * each: 0 = fenced, the master then calls mc_master_fence_ack). */
int mc_proto_fence_req_encode(const struct mc_proto_fence_req *m,
                              const struct mc_proto_fence_item *items, void *buf, size_t cap,
                              size_t *len_p);
int mc_proto_fence_req_decode(const void *buf, size_t len, size_t cap,
                              struct mc_proto_fence_req *m_p,
                              struct mc_proto_fence_item *items);

/* CLUSTER_INFO: which sections, the page of segments and the page of nodes. */
int mc_proto_info_req_encode(const struct mc_proto_info_req *m, void *buf, size_t cap,
                             size_t *len_p);
int mc_proto_info_req_decode(const void *buf, size_t len, struct mc_proto_info_req *m_p);
/* CLUSTER_INFO_REPLY: stats with F_STATS; with F_SEGMENTS nseg (<= cap, <=
 * MC_PROTO_SEG_PAGE_MAX) entries, each with its worker address and rkey; with F_NODES nnode
 * (<= node_cap, <= MC_PROTO_NODE_PAGE_MAX) node entries, each with its name and domain.
 * `segs` / `nodes` are read or written only when their section is present and not empty:
 * NULL is fine when encoding a reply without that section, and when decoding with its cap 0
 * (segs: cap, nodes: node_cap), which refuses a reply carrying any entry there. */
int mc_proto_info_rep_encode(const struct mc_proto_info_rep *m,
                             const struct mc_proto_seg_entry *segs,
                             const struct mc_proto_node_entry *nodes, void *buf, size_t cap,
                             size_t *len_p);
int mc_proto_info_rep_decode(const void *buf, size_t len, size_t cap,
                             struct mc_proto_info_rep *m_p, struct mc_proto_seg_entry *segs,
                             size_t node_cap, struct mc_proto_node_entry *nodes);

/* LIST: a page of at most `max` readable keys starting with `prefix`, from `cursor`. */
int mc_proto_list_req_encode(const struct mc_proto_list_req *m, void *buf, size_t cap,
                             size_t *len_p);
int mc_proto_list_req_decode(const void *buf, size_t len, struct mc_proto_list_req *m_p);
/* LIST_REPLY: n (<= cap, <= MC_PROTO_LIST_MAX) keys of 1..MC_PROTO_KEY_MAX bytes and where
 * the next page starts (0 = done). A failed call carries neither (next_cursor decodes as 0).
 * A full page of the longest keys fits in MC_PROTO_PAYLOAD_MAX (static_assert). */
int mc_proto_list_rep_encode(const struct mc_proto_list_rep *m, const struct mc_proto_key *keys,
                             void *buf, size_t cap, size_t *len_p);
int mc_proto_list_rep_decode(const void *buf, size_t len, size_t cap,
                             struct mc_proto_list_rep *m_p, struct mc_proto_key *keys);

/* DRAIN: answered with a status only (mc_proto_status_rep). */
int mc_proto_drain_req_encode(const struct mc_proto_drain_req *m, void *buf, size_t cap,
                              size_t *len_p);
int mc_proto_drain_req_decode(const void *buf, size_t len, struct mc_proto_drain_req *m_p);
/* COPY: answered with a status only, once the target's owner answered the write. */
int mc_proto_copy_req_encode(const struct mc_proto_copy_req *m, void *buf, size_t cap,
                             size_t *len_p);
int mc_proto_copy_req_decode(const void *buf, size_t len, struct mc_proto_copy_req *m_p);

#endif /* MC_PROTO_MASTER_PROTO_H */
