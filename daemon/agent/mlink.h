/*
 * The agent's way to the master service (docs/architecture.md "The agent"): one interface
 * over the in-process master of a standalone agent and mc-master over UCX RPC in cluster
 * mode.
 *
 * A caller takes a request (ml_req_new), fills its inputs, and submits it; its done
 * callback runs once with r->res and the outputs set, then the caller frees the request
 * (ml_req_free). In-process, done runs inside ml_submit (unless the local hook holds it back:
 * REMOVE and PUT_END of a standalone agent with a disk); remote, requests wait in one queue
 * per kind and go out as one batch RPC per kind at the end of the loop turn (ml_flush),
 * several batches in flight, and done runs from the UCX progress that brought the reply.
 * A request with done == NULL is fire-and-forget (lease releases, revokes): the link frees
 * it itself.
 *
 * Remote failures map onto results: a call that timed out is MC_ERR_TIMEOUT, a lost master
 * MC_ERR_UNAVAILABLE (docs/failure-contract.md: master-bound ops fail fast).
 *
 * Requests come from a free list that grows and never shrinks: no allocation per op once
 * warm. One thread.
 */
#ifndef MC_AGENT_MLINK_H
#define MC_AGENT_MLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mc/mc.h>

#include "daemon/master/master.h"

struct mlink;
struct mc_ucx_ep;

enum ml_kind {
    ML_PUT_START,
    ML_PUT_END,
    ML_PUT_REVOKE,
    ML_GET,
    ML_LEASE_RELEASE,
    ML_EXIST,         /* out.count: 1 or 0 */
    ML_STAT,          /* out.stat; MC_ERR_NOT_FOUND when absent */
    ML_REMOVE,
    ML_REMOVE_PREFIX, /* out.count: objects removed */
    ML_PIN,           /* a GET whose lease is a client's pin: out.get (lease) */
    ML_TOUCH,         /* out.count: 1 or 0 (present keys are marked recently used) */
    ML_RESTORE,       /* in.restore (key fields set by the link): a replica we hold */
    ML_RESTORE_DONE,  /* in.seg (no key): that segment's report is complete */
    ML__COUNT,
};

struct ml_req;
typedef void (*ml_done_fn)(void *ctx, struct ml_req *r);

struct ml_req {
    struct ml_req *next;       /* the link's queues */
    enum ml_kind kind;
    ml_done_fn done;
    void *ctx;
    uint64_t user_data;        /* the caller's */
    uint64_t tag;              /* the caller's too (PIN: the client's pin id) */
    int res;                   /* 0 or a negative MC_ERR_* (EXIST: 1/0 in out.count) */
    uint32_t key_len;
    union {
        struct mc_master_put_req put; /* PUT_START: key fields are set by the link */
        struct mc_master_ref ref;     /* PUT_END/REVOKE, LEASE_RELEASE: version, epoch */
        struct mc_master_restore_req restore; /* RESTORE */
        uint32_t seg;                          /* RESTORE_DONE */
    } in;
    union {
        struct mc_master_put_grant grant;
        struct mc_master_get_result get;
        struct mc_master_stat stat;
        int64_t count;
    } out;
    char key[MC_DIR_KEY_MAX];
};

/* What the link tells its owner about the master (remote only), for its liveness. */
enum ml_event {
    ML_EV_SENT,     /* a batch went out */
    ML_EV_ANSWERED, /* the master answered a batch (whatever it said) */
    ML_EV_REFUSED,  /* ... refusing the whole batch: it does not know us (any more) */
};
typedef void (*ml_event_fn)(void *ctx, enum ml_event ev);
/* Batches of kind k sent to a remote master so far. */
uint64_t ml_sent(const struct mlink *ml, enum ml_kind k);

/* In-process: every call goes to `m` (not owned). */
int ml_create_local(struct mc_master *m, struct mlink **ml_p);
/* In-process only: after each master call, before its done runs, hook(ctx, r) may take the
 * request over (true): it then ends it later with ml_req_end (done runs then: the answer
 * waits, e.g. for the disk erases the call caused). */
typedef bool (*ml_local_hook_fn)(void *ctx, struct ml_req *r);
void ml_set_local_hook(struct mlink *ml, ml_local_hook_fn hook, void *ctx);
/* Runs r's done (or frees it): a request a local hook took over. */
void ml_req_end(struct mlink *ml, struct ml_req *r);
/* Remote: calls go to mc-master on `ep` (not owned) as node `node`; op_timeout_ms bounds
 * each batch. */
int ml_create_remote(struct mc_ucx_ep *ep, uint32_t node, uint64_t op_timeout_ms,
                     struct mlink **ml_p);
/* Every queued and in-flight request ends with MC_ERR_CANCELED (done runs). Accepts NULL. */
void ml_destroy(struct mlink *ml);

/* A new request with its key copied (key_len 1..MC_KEY_MAX; 0 for none). NULL: no memory. */
struct ml_req *ml_req_new(struct mlink *ml, enum ml_kind kind, const char *key, size_t key_len,
                          ml_done_fn done, void *ctx);
void ml_req_free(struct mlink *ml, struct ml_req *r);
void ml_submit(struct mlink *ml, struct ml_req *r);

/* End of a loop turn: send what is queued. Returns whether anything went out. */
bool ml_flush(struct mlink *ml);
/* The master knows us under another node id now (it restarted, or declared us dead). */
void ml_set_node(struct mlink *ml, uint32_t node);
/* Requests queued or in flight. */
size_t ml_pending(const struct mlink *ml);
/* The master endpoint failed or was replaced: fail everything in flight or queued with
 * `status` and, for `ep` != NULL, continue on it. */
void ml_reset(struct mlink *ml, struct mc_ucx_ep *ep, int status);
/* Events (remote): fn(ctx, ev) runs from ml_flush and from the UCX progress that brought a
 * reply, after the requests concerned ended. */
void ml_set_events(struct mlink *ml, ml_event_fn fn, void *ctx);
/*
 * hold true: the master does not answer. Every request someone waits for ends now with
 * `status`, queued or in flight, and so does every new one, inside ml_submit; fire-and-forget
 * requests (revokes, lease releases) still go out, for when it answers. An in-flight request
 * that was ended this way stays in its batch under a copy of its own: a late grant of a put
 * is revoked and a late lease released, so nothing stays allocated or leased for a caller
 * that was told the call failed (a late PUT_END may still publish: the caller's retry then
 * meets MC_ERR_EXISTS). hold false: back to normal.
 */
void ml_hold(struct mlink *ml, bool hold, int status);

#endif /* MC_AGENT_MLINK_H */
