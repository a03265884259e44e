/*
 * The agent's master link: in-process calls, or batch RPCs to mc-master (mlink.h).
 */
#include "daemon/agent/mlink.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/common/log.h"
#include "daemon/master/exec.h"
#include "daemon/proto/master_proto.h"
#include "ucx_backend/ucx.h"

#define ML_BATCH_MAX MC_PROTO_BATCH_MAX
/* worst case of one item on the wire (a put: key + fixed fields) stays far below this, so
 * a full batch always fits one frame */
#define ML_FRAME_CAP (ML_BATCH_MAX * (MC_PROTO_KEY_MAX + 128u))

struct batch {
    struct batch *next;        /* free list */
    struct batch *iprev, *inext; /* in flight: UCX holds its call */
    bool inflight;
    struct mlink *ml;
    enum ml_kind kind;
    uint32_t n;
    struct ml_req *items[ML_BATCH_MAX];
};

struct mlink {
    struct mc_master *m;       /* in-process, or NULL */
    ml_local_hook_fn hook;     /* in-process: ml_set_local_hook */
    void *hook_ctx;
    struct mc_ucx_ep *ep;      /* remote */
    uint32_t node;
    uint64_t op_timeout_ms;
    struct ml_req *free_reqs;
    struct batch *free_batches;
    struct ml_req *head[ML__COUNT], *tail[ML__COUNT];
    uint32_t nqueued[ML__COUNT];
    uint64_t sent[ML__COUNT];  /* batches sent, per kind (ml_sent) */
    size_t pending;            /* queued + in flight */
    uint32_t inflight_batches;
    struct batch *inflight;
    bool held;                 /* the master does not answer (ml_hold) */
    int held_status;
    ml_event_fn ev;
    void *ev_ctx;
    uint8_t *frame;            /* ML_FRAME_CAP: encoding */
    /* decoding scratch: one reply is decoded at a time */
    int results[ML_BATCH_MAX];
    uint64_t counts[ML_BATCH_MAX];
    union {
        struct mc_master_put_grant grants[ML_BATCH_MAX];
        struct mc_master_get_result gets[ML_BATCH_MAX];
        struct mc_master_stat stats[ML_BATCH_MAX];
        struct mc_master_put_req puts[ML_BATCH_MAX];
        struct mc_master_ref refs[ML_BATCH_MAX];
        struct mc_proto_key keys[ML_BATCH_MAX];
        struct mc_master_restore_req restores[ML_BATCH_MAX];
        uint32_t segs[ML_BATCH_MAX];
    } u;
};

static struct mlink *ml_alloc(void)
{
    struct mlink *ml = calloc(1, sizeof(*ml));

    return ml;
}

int ml_create_local(struct mc_master *m, struct mlink **ml_p)
{
    struct mlink *ml = ml_alloc();

    if (ml == NULL)
        return MC_ERR_NOMEM;
    ml->m = m;
    *ml_p = ml;
    return 0;
}

int ml_create_remote(struct mc_ucx_ep *ep, uint32_t node, uint64_t op_timeout_ms,
                     struct mlink **ml_p)
{
    struct mlink *ml = ml_alloc();

    if (ml == NULL)
        return MC_ERR_NOMEM;
    ml->frame = malloc(ML_FRAME_CAP);
    if (ml->frame == NULL) {
        free(ml);
        return MC_ERR_NOMEM;
    }
    ml->ep = ep;
    ml->node = node;
    ml->op_timeout_ms = op_timeout_ms;
    *ml_p = ml;
    return 0;
}

struct ml_req *ml_req_new(struct mlink *ml, enum ml_kind kind, const char *key, size_t key_len,
                          ml_done_fn done, void *ctx)
{
    struct ml_req *r = ml->free_reqs;

    if (key_len > MC_DIR_KEY_MAX)
        return NULL;
    if (r != NULL)
        ml->free_reqs = r->next;
    else if ((r = malloc(sizeof(*r))) == NULL)
        return NULL;
    memset(r, 0, offsetof(struct ml_req, key));
    r->kind = kind;
    r->done = done;
    r->ctx = ctx;
    r->key_len = (uint32_t)key_len;
    if (key_len > 0)
        memcpy(r->key, key, key_len);
    return r;
}

void ml_req_free(struct mlink *ml, struct ml_req *r)
{
    r->next = ml->free_reqs;
    ml->free_reqs = r;
}

static void req_end(struct mlink *ml, struct ml_req *r)
{
    if (r->done != NULL)
        r->done(r->ctx, r);
    else
        ml_req_free(ml, r);
}

void ml_req_end(struct mlink *ml, struct ml_req *r)
{
    req_end(ml, r);
}

void ml_set_local_hook(struct mlink *ml, ml_local_hook_fn hook, void *ctx)
{
    ml->hook = hook;
    ml->hook_ctx = ctx;
}

/* --- in-process ------------------------------------------------------------------------ */

/* Each request is a batch of one through the master's executor, the path mc-master's RPC
 * handlers take for a decoded batch. */
static const enum mc_master_op local_op[ML__COUNT] = {
    [ML_PUT_START] = MC_MASTER_OP_PUT_START,   [ML_PUT_END] = MC_MASTER_OP_PUT_END,
    [ML_PUT_REVOKE] = MC_MASTER_OP_PUT_REVOKE, [ML_GET] = MC_MASTER_OP_GET,
    [ML_LEASE_RELEASE] = MC_MASTER_OP_LEASE_RELEASE, [ML_EXIST] = MC_MASTER_OP_EXIST,
    [ML_STAT] = MC_MASTER_OP_STAT, [ML_REMOVE] = MC_MASTER_OP_REMOVE,
    [ML_REMOVE_PREFIX] = MC_MASTER_OP_REMOVE_PREFIX, [ML_PIN] = MC_MASTER_OP_GET,
    [ML_TOUCH] = MC_MASTER_OP_EXIST,        [ML_RESTORE] = MC_MASTER_OP_RESTORE,
    [ML_RESTORE_DONE] = MC_MASTER_OP_RESTORE_DONE,
};

static void run_local(struct mlink *ml, struct ml_req *r)
{
    struct mc_master_key key = {r->key, r->key_len};
    struct mc_master_req req = {.node = MC_MASTER_NODE_NONE, .n = 1};
    uint64_t count = 0;
    int res = 0;

    if ((unsigned)r->kind >= ML__COUNT) {
        r->res = MC_ERR_INVALID;
        req_end(ml, r);
        return;
    }
    req.op = local_op[r->kind];
    req.results = &res;
    req.in.key = &key;
    switch (r->kind) {
    case ML_PUT_START:
        r->in.put.key = r->key;
        r->in.put.key_len = r->key_len;
        req.in.put = &r->in.put;
        req.out.grant = &r->out.grant;
        break;
    case ML_PUT_END:
    case ML_PUT_REVOKE:
    case ML_LEASE_RELEASE:
        r->in.ref.key = r->key;
        r->in.ref.key_len = r->key_len;
        req.in.ref = &r->in.ref;
        break;
    case ML_RESTORE:
        r->in.restore.key = r->key;
        r->in.restore.key_len = r->key_len;
        req.in.restore = &r->in.restore;
        break;
    case ML_RESTORE_DONE:
        req.in.seg = &r->in.seg;
        break;
    case ML_GET:
        req.out.get = &r->out.get;
        break;
    case ML_PIN:
        req.flags = MC_MASTER_EXEC_F_PIN;
        req.out.get = &r->out.get;
        break;
    case ML_TOUCH:
        req.flags = MC_MASTER_EXEC_F_TOUCH;
        req.out.count = &count;
        break;
    case ML_STAT:
        req.out.stat = &r->out.stat;
        break;
    default: /* EXIST, REMOVE, REMOVE_PREFIX */
        req.out.count = &count;
        break;
    }
    r->res = mc_master_exec(ml->m, &req);
    if (r->res == 0)
        r->res = res;
    switch (r->kind) {
    case ML_LEASE_RELEASE:
        r->res = 0;
        break;
    case ML_EXIST:
    case ML_TOUCH:
        r->out.count = r->res > 0 ? 1 : 0;
        if (r->res > 0)
            r->res = 0;
        break;
    case ML_STAT:
        r->res = r->res == 1 ? 0 : r->res == 0 ? MC_ERR_NOT_FOUND : r->res;
        break;
    case ML_REMOVE_PREFIX:
        r->out.count = (int64_t)count;
        break;
    default:
        break;
    }
    if (ml->hook != NULL && ml->hook(ml->hook_ctx, r))
        return;
    req_end(ml, r);
}

/* --- remote ---------------------------------------------------------------------------- */

void ml_submit(struct mlink *ml, struct ml_req *r)
{
    if (ml->m != NULL) {
        run_local(ml, r);
        return;
    }
    if (ml->held && r->done != NULL) {
        r->res = ml->held_status; /* fail fast: nobody waits on a master that is silent */
        req_end(ml, r);
        return;
    }
    r->next = NULL;
    if (ml->tail[r->kind] != NULL)
        ml->tail[r->kind]->next = r;
    else
        ml->head[r->kind] = r;
    ml->tail[r->kind] = r;
    ml->nqueued[r->kind]++;
    ml->pending++;
}

static void batch_free(struct mlink *ml, struct batch *b)
{
    if (b->inflight) {
        if (b->iprev != NULL)
            b->iprev->inext = b->inext;
        else
            ml->inflight = b->inext;
        if (b->inext != NULL)
            b->inext->iprev = b->iprev;
        b->inflight = false;
    }
    b->next = ml->free_batches;
    ml->free_batches = b;
    ml->inflight_batches--;
}

/* Ends every item of `b` with `status` (the whole call failed). */
static void batch_fail(struct mlink *ml, struct batch *b, int status)
{
    uint32_t i;

    for (i = 0; i < b->n; i++) {
        b->items[i]->res = status;
        ml->pending--;
        req_end(ml, b->items[i]);
    }
    batch_free(ml, b);
}

static int decode_reply(struct mlink *ml, struct batch *b, const void *pl, size_t len)
{
    struct mc_proto_batch_rep rep;
    struct mc_proto_lease_release_rep lr;
    uint32_t i;
    int rc;

    switch (b->kind) {
    case ML_PUT_START:
        rc = mc_proto_put_start_rep_decode(pl, len, b->n, &rep, ml->results, ml->u.grants);
        break;
    case ML_PUT_END:
    case ML_PUT_REVOKE:
    case ML_RESTORE:
    case ML_RESTORE_DONE:
        rc = mc_proto_results_rep_decode(pl, len, b->n, &rep, ml->results);
        break;
    case ML_GET:
    case ML_PIN:
        rc = mc_proto_get_rep_decode(pl, len, b->n, &rep, ml->results, ml->u.gets);
        break;
    case ML_LEASE_RELEASE:
        rc = mc_proto_lease_release_rep_decode(pl, len, &lr);
        if (rc == 0) {
            rep.status = lr.status;
            rep.n = b->n;
            for (i = 0; i < b->n; i++)
                ml->results[i] = 0;
        }
        break;
    case ML_EXIST:
    case ML_TOUCH:
    case ML_STAT:
        rc = mc_proto_exist_rep_decode(pl, len, b->n, &rep, ml->results, ml->u.stats);
        break;
    case ML_REMOVE:
    case ML_REMOVE_PREFIX:
        rc = mc_proto_remove_rep_decode(pl, len, b->n, &rep, ml->results, ml->counts);
        break;
    default:
        rc = MC_ERR_PROTO;
        break;
    }
    if (rc != 0)
        return MC_ERR_PROTO;
    if (rep.status != 0)
        return rep.status;
    if (rep.n != b->n)
        return MC_ERR_PROTO;
    for (i = 0; i < b->n; i++) {
        struct ml_req *r = b->items[i];
        int res = ml->results[i];

        r->res = res;
        switch (b->kind) {
        case ML_PUT_START:
            if (res == 0)
                r->out.grant = ml->u.grants[i];
            break;
        case ML_GET:
        case ML_PIN:
            if (res == 0)
                r->out.get = ml->u.gets[i];
            break;
        case ML_EXIST:
        case ML_TOUCH:
            r->out.count = res == 1;
            r->res = res < 0 ? res : 0;
            break;
        case ML_STAT:
            if (res == 1)
                r->out.stat = ml->u.stats[i];
            r->res = res < 0 ? res : res == 1 ? 0 : MC_ERR_NOT_FOUND;
            break;
        case ML_REMOVE:
        case ML_REMOVE_PREFIX:
            r->out.count = (int64_t)ml->counts[i];
            break;
        default:
            break;
        }
    }
    return 0;
}

static void event(struct mlink *ml, enum ml_event ev)
{
    if (ml->ev != NULL)
        ml->ev(ml->ev_ctx, ev);
}

/* A request whose caller was told it failed (ml_hold) came back granted: undo the grant,
 * fire-and-forget. true when r went out again as that. */
static bool orphan_undo(struct mlink *ml, struct ml_req *r)
{
    struct mc_master_ref ref = {.node = ml->node};

    if (r->done != NULL || r->res != 0)
        return false;
    if (r->kind == ML_PUT_START) {
        ref.version = r->out.grant.version;
        r->kind = ML_PUT_REVOKE;
    } else if (r->kind == ML_GET || r->kind == ML_PIN) {
        ref.version = r->out.get.lease.version;
        ref.epoch = r->out.get.lease.epoch;
        r->kind = ML_LEASE_RELEASE;
    } else {
        return false;
    }
    r->in.ref = ref;
    ml_submit(ml, r);
    return true;
}

static void batch_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                       size_t len)
{
    struct batch *b = ctx;
    struct mlink *ml = b->ml;
    bool answered = status == 0, refused = false;
    uint32_t i;

    (void)hdr;
    if (status == MC_ERR_CANCELED)
        status = MC_ERR_UNAVAILABLE; /* we closed the endpoint: the master was lost */
    if (status == 0)
        status = decode_reply(ml, b, pl, len);
    if (answered && status == MC_ERR_DENIED) {
        /* the whole batch refused: the master does not take us for the node we say we are
         * (it declared us dead, or another endpoint holds our name). Not the callers' fault
         * and not for good: they may retry once the owner has joined again */
        refused = true;
        status = MC_ERR_UNAVAILABLE;
    }
    if (status != 0) {
        batch_fail(ml, b, status);
    } else {
        for (i = 0; i < b->n; i++) {
            ml->pending--;
            if (!orphan_undo(ml, b->items[i]))
                req_end(ml, b->items[i]);
        }
        batch_free(ml, b);
    }
    if (answered)
        event(ml, ML_EV_ANSWERED);
    if (refused)
        event(ml, ML_EV_REFUSED);
}

static uint16_t wire_type(enum ml_kind k)
{
    static const uint16_t t[ML__COUNT] = {
        [ML_PUT_START] = MC_WIRE_PUT_START_BATCH, [ML_PUT_END] = MC_WIRE_PUT_END_BATCH,
        [ML_PUT_REVOKE] = MC_WIRE_PUT_REVOKE_BATCH, [ML_GET] = MC_WIRE_GET_BATCH,
        [ML_LEASE_RELEASE] = MC_WIRE_LEASE_RELEASE_BATCH, [ML_EXIST] = MC_WIRE_EXIST_BATCH,
        [ML_STAT] = MC_WIRE_EXIST_BATCH, [ML_REMOVE] = MC_WIRE_REMOVE_BATCH,
        [ML_REMOVE_PREFIX] = MC_WIRE_REMOVE_BATCH, [ML_PIN] = MC_WIRE_GET_BATCH,
        [ML_TOUCH] = MC_WIRE_EXIST_BATCH, [ML_RESTORE] = MC_WIRE_RESTORE_BATCH,
        [ML_RESTORE_DONE] = MC_WIRE_RESTORE_DONE,
    };

    return t[k];
}

static int encode(struct mlink *ml, struct batch *b, size_t *len_p)
{
    struct mc_proto_put_start_req ps = {.writer = ml->node, .n = b->n};
    struct mc_proto_ref_req rr = {.node = ml->node, .n = b->n};
    struct mc_proto_keys_req kr = {.node = ml->node, .n = b->n};
    uint32_t i;

    for (i = 0; i < b->n; i++) {
        struct ml_req *r = b->items[i];

        switch (b->kind) {
        case ML_PUT_START:
            ml->u.puts[i] = r->in.put;
            ml->u.puts[i].key = r->key;
            ml->u.puts[i].key_len = r->key_len;
            ml->u.puts[i].writer = ml->node;
            break;
        case ML_PUT_END:
        case ML_PUT_REVOKE:
        case ML_LEASE_RELEASE:
            ml->u.refs[i] = r->in.ref;
            ml->u.refs[i].key = r->key;
            ml->u.refs[i].key_len = r->key_len;
            ml->u.refs[i].node = ml->node;
            break;
        case ML_RESTORE:
            ml->u.restores[i] = r->in.restore;
            ml->u.restores[i].key = r->key;
            ml->u.restores[i].key_len = r->key_len;
            break;
        case ML_RESTORE_DONE:
            ml->u.segs[i] = r->in.seg;
            break;
        default:
            ml->u.keys[i].key = r->key;
            ml->u.keys[i].key_len = r->key_len;
            break;
        }
    }
    switch (b->kind) {
    case ML_PUT_START:
        return mc_proto_put_start_req_encode(&ps, ml->u.puts, ml->frame, ML_FRAME_CAP, len_p);
    case ML_PUT_END:
        return mc_proto_put_end_req_encode(&rr, ml->u.refs, ml->frame, ML_FRAME_CAP, len_p);
    case ML_PUT_REVOKE:
        return mc_proto_put_revoke_req_encode(&rr, ml->u.refs, ml->frame, ML_FRAME_CAP, len_p);
    case ML_RESTORE:
        return mc_proto_restore_req_encode(&rr, ml->u.restores, ml->frame, ML_FRAME_CAP, len_p);
    case ML_RESTORE_DONE:
        return mc_proto_restore_done_req_encode(&rr, ml->u.segs, ml->frame, ML_FRAME_CAP,
                                                len_p);
    case ML_LEASE_RELEASE:
        return mc_proto_lease_release_req_encode(&rr, ml->u.refs, ml->frame, ML_FRAME_CAP,
                                                 len_p);
    case ML_GET:
        return mc_proto_get_req_encode(&kr, ml->u.keys, ml->frame, ML_FRAME_CAP, len_p);
    case ML_PIN:
        kr.flags = MC_PROTO_GET_F_PIN;
        return mc_proto_get_req_encode(&kr, ml->u.keys, ml->frame, ML_FRAME_CAP, len_p);
    case ML_TOUCH:
        kr.flags = MC_PROTO_EXIST_F_TOUCH;
        return mc_proto_exist_req_encode(&kr, ml->u.keys, ml->frame, ML_FRAME_CAP, len_p);
    case ML_EXIST:
        return mc_proto_exist_req_encode(&kr, ml->u.keys, ml->frame, ML_FRAME_CAP, len_p);
    case ML_STAT:
        kr.flags = MC_PROTO_EXIST_F_STAT;
        return mc_proto_exist_req_encode(&kr, ml->u.keys, ml->frame, ML_FRAME_CAP, len_p);
    case ML_REMOVE:
        return mc_proto_remove_req_encode(&kr, ml->u.keys, ml->frame, ML_FRAME_CAP, len_p);
    case ML_REMOVE_PREFIX:
        kr.flags = MC_PROTO_REMOVE_F_PREFIX;
        return mc_proto_remove_req_encode(&kr, ml->u.keys, ml->frame, ML_FRAME_CAP, len_p);
    default:
        return MC_ERR_INVALID;
    }
}

/* The request kind's name, as the master's executor calls it (logs). */
static const char *kind_name(enum ml_kind k)
{
    return (unsigned)k < ML__COUNT ? mc_master_op_name(local_op[k]) : "?";
}

static void send_one(struct mlink *ml, enum ml_kind k)
{
    struct batch *b = ml->free_batches;
    size_t len;
    int rc;

    if (b != NULL)
        ml->free_batches = b->next;
    else if ((b = malloc(sizeof(*b))) == NULL)
        return; /* stays queued: next turn */
    b->ml = ml;
    b->kind = k;
    b->n = 0;
    b->inflight = false; /* not on the in-flight list until its call is out */
    ml->inflight_batches++;
    while (b->n < ML_BATCH_MAX && ml->head[k] != NULL) {
        struct ml_req *r = ml->head[k];

        ml->head[k] = r->next;
        b->items[b->n++] = r;
        ml->nqueued[k]--;
    }
    if (ml->head[k] == NULL)
        ml->tail[k] = NULL;
    rc = ml->ep == NULL ? MC_ERR_UNAVAILABLE : encode(ml, b, &len);
    if (rc != 0 && rc != MC_ERR_UNAVAILABLE) {
        /* our own requests did not encode: a bug, not the caller's fault nor the master's */
        mc_error("a batch of %u %s request(s) did not encode: %s (a bug: please report)",
                 b->n, kind_name(k), mc_strerror(rc));
        rc = MC_ERR_INTERNAL;
    } else if (rc == 0) {
        rc = mc_ucx_rpc_call(ml->ep, wire_type(k), ml->frame, len,
                             mc_ucx_now_ms() + ml->op_timeout_ms, batch_done, b, NULL);
        if (rc != 0 && rc != MC_ERR_NOMEM) {
            /* the transport refused the send (an endpoint being torn down or not up yet
             * says so in several ways, MC_ERR_INVALID among them): the master cannot be
             * reached through it right now, which callers may retry */
            mc_debug("a batch of %u %s request(s) not sent: %s", b->n, kind_name(k),
                     mc_strerror(rc));
            rc = MC_ERR_UNAVAILABLE;
        }
    }
    if (rc != 0) {
        batch_fail(ml, b, rc);
        return;
    }
    b->inflight = true;
    b->iprev = NULL;
    b->inext = ml->inflight;
    if (ml->inflight != NULL)
        ml->inflight->iprev = b;
    ml->inflight = b;
    ml->sent[k]++;
    event(ml, ML_EV_SENT);
}

uint64_t ml_sent(const struct mlink *ml, enum ml_kind k)
{
    return k < ML__COUNT ? ml->sent[k] : 0;
}

bool ml_flush(struct mlink *ml)
{
    bool sent = false;
    int k;

    if (ml->m != NULL)
        return false;
    for (k = 0; k < ML__COUNT; k++) {
        while (ml->head[k] != NULL) {
            send_one(ml, (enum ml_kind)k);
            sent = true;
        }
    }
    return sent;
}

void ml_set_node(struct mlink *ml, uint32_t node)
{
    ml->node = node;
}

size_t ml_pending(const struct mlink *ml)
{
    return ml->pending;
}

void ml_reset(struct mlink *ml, struct mc_ucx_ep *ep, int status)
{
    int k;

    assert(status < 0); /* a request never ends as a success with no answer */

    /* in-flight batches fail through their calls when the old endpoint is closed; what
     * is queued fails here */
    for (k = 0; k < ML__COUNT; k++) {
        while (ml->head[k] != NULL) {
            struct ml_req *r = ml->head[k];

            ml->head[k] = r->next;
            ml->nqueued[k]--;
            ml->pending--;
            r->res = status;
            req_end(ml, r);
        }
        ml->tail[k] = NULL;
    }
    ml->ep = ep;
}

void ml_set_events(struct mlink *ml, ml_event_fn fn, void *ctx)
{
    ml->ev = fn;
    ml->ev_ctx = ctx;
}

void ml_hold(struct mlink *ml, bool hold, int status)
{
    struct ml_req *fail = NULL, **tail = &fail, *r, *prev;
    struct batch *b;
    uint32_t i;
    int k;

    ml->held = hold;
    ml->held_status = status;
    if (!hold || ml->m != NULL)
        return;
    /* collect first, end after: a done callback may submit again */
    for (k = 0; k < ML__COUNT; k++) {
        prev = NULL;
        for (r = ml->head[k]; r != NULL;) {
            struct ml_req *next = r->next;

            if (r->done == NULL) {
                prev = r;
                r = next;
                continue;
            }
            if (prev != NULL)
                prev->next = next;
            else
                ml->head[k] = next;
            if (ml->tail[k] == r)
                ml->tail[k] = prev;
            ml->nqueued[k]--;
            ml->pending--;
            r->next = NULL;
            *tail = r;
            tail = &r->next;
            r = next;
        }
    }
    /* in flight: the caller's request ends now; a copy takes its place in the batch, to
     * take care of the answer if one still comes (orphan_undo). Without memory for the
     * copy, the request stays and ends with its call. */
    for (b = ml->inflight; b != NULL; b = b->inext) {
        for (i = 0; i < b->n; i++) {
            struct ml_req *o;

            r = b->items[i];
            if (r->done == NULL)
                continue;
            o = ml_req_new(ml, r->kind, r->key, r->key_len, NULL, NULL);
            if (o == NULL)
                continue;
            o->in = r->in;
            o->user_data = r->user_data;
            b->items[i] = o;
            r->next = NULL;
            *tail = r;
            tail = &r->next;
        }
    }
    while ((r = fail) != NULL) {
        fail = r->next;
        r->res = status;
        req_end(ml, r);
    }
}

void ml_destroy(struct mlink *ml)
{
    struct ml_req *r;
    struct batch *b;

    if (ml == NULL)
        return;
    /* UNAVAILABLE, not CANCELED: a request ended here got no answer, and CANCELED is the
     * master's own refusal (a RESTORE refused: the walk forgets, the disk tier erases) */
    ml_reset(ml, NULL, MC_ERR_UNAVAILABLE);
    while ((r = ml->free_reqs) != NULL) {
        ml->free_reqs = r->next;
        free(r);
    }
    while ((b = ml->free_batches) != NULL) {
        ml->free_batches = b->next;
        free(b);
    }
    free(ml->frame);
    free(ml);
}
