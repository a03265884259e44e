/*
 * The transfers an agent starts (cluster_int.h): the segment table (which node owns which
 * segment, from CLUSTER_INFO), the peers (one endpoint each, authenticated with HELLO), and
 * the writes and reads it runs on them: the UCX implementation of replica I/O (rio.h).
 *
 * Bytes move by active messages with rendezvous (docs/decisions.md "UCX connection method
 * and bulk path"): a writer sends each remote replica's image as a WRITE bulk that the
 * owner lands straight in its segment, inside the allocation the master granted; a reader
 * asks the owner with READ_BATCH (every read of a turn to that owner in one request) and
 * the owner sends each item's bytes from its segment straight into the reader's landing
 * segment; an item is over when its bytes are final, whatever its batch's answer. A transfer's memory is released only once UCX says the
 * transfer is final, and its submitter learns it through the callback it gave.
 */
#include "daemon/agent/cluster_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/agent/client.h"
#include "daemon/common/log.h"
#include "daemon/proto/hold_proto.h"
#include "shm/checksum.h"
#include "shm/ring.h"

/* a write's header: 32 bytes of fields, its key and its tail (two blobs, 4 + 4 bytes) */
_Static_assert(MC_RIO_TAIL_MAX <= MC_PEER_WRITE_TAIL_MAX &&
                   40 + MC_RIO_TAIL_MAX <= MC_UCX_BULK_HDR_MAX,
               "a write's key and tail fit its header");

static void xfer_start(struct cluster *cl, struct xfer *x);
static void xfer_end(struct cluster *cl, struct xfer *x, int status);
static void read_call_over(struct cluster *cl, struct xfer *x, int status);
static void info_refresh(struct cluster *cl);

/* The end of a read's turn from now: while other replicas are left, a share of the time
 * left (at least READ_ATTEMPT_MIN_MS), so an owner that does not start its bytes (an
 * unreachable, not yet dead one) gives its turn to the next; else its deadline. */
static uint64_t read_turn_ms(const struct xfer *x, uint64_t now)
{
    uint64_t left, t;

    if (x->rg->rep_next >= x->rg->g->nrep)
        return x->deadline_ms;
    left = x->deadline_ms > now ? x->deadline_ms - now : 0;
    t = now + (left / 4 > READ_ATTEMPT_MIN_MS ? left / 4 : READ_ATTEMPT_MIN_MS);
    return t < x->deadline_ms ? t : x->deadline_ms;
}


int cl_hello_encode(const struct cluster *cl, void *buf, size_t cap, size_t *len_p)
{
    const struct mc_agent *a = cl->a;
    struct mc_proto_hello_req req = {
        .token = {.p = (const uint8_t *)cl->token, .len = cl->token_len},
        .name = {.p = (const uint8_t *)cl->name, .len = strlen(cl->name)},
        .domain = {.p = (const uint8_t *)a->cfg.domain,
                   .len = a->cfg.domain != NULL ? strlen(a->cfg.domain) : 0},
        .incarnation = cl->incarnation,
        /* PUBLISHes not settled: carried over if this is a new master (segments_forget,
         * after the answer); said at once, before our first heartbeat (review H1) */
        .flags = cl->incarnation != 0 && cl->pubq.n > 0 ? MC_PROTO_HELLO_F_CARRYING : 0,
    };

    return mc_proto_hello_req_encode(&req, buf, cap, len_p);
}


/* --- the segment table ------------------------------------------------------------------ */

static const struct segrec *seg_find(const struct cluster *cl, uint32_t seg)
{
    return seg < cl->nsegtab && cl->segs[seg].valid ? &cl->segs[seg] : NULL;
}

static int seg_store(struct cluster *cl, const struct mc_proto_seg_entry *e)
{
    struct segrec *s;

    if (e->seg >= cl->nsegtab) {
        uint32_t n = e->seg + 1 > cl->nsegtab * 2 ? e->seg + 1 : cl->nsegtab * 2;
        struct segrec *t = realloc(cl->segs, n * sizeof(*t));

        if (t == NULL)
            return MC_ERR_NOMEM;
        memset(t + cl->nsegtab, 0, (n - cl->nsegtab) * sizeof(*t));
        cl->segs = t;
        cl->nsegtab = n;
    }
    s = &cl->segs[e->seg];
    if (s->valid && s->addr_len == e->worker_addr.len &&
        memcmp(s->addr, e->worker_addr.p, s->addr_len) == 0) {
        s->node = e->info.node;
        s->size = e->info.size;
        return 0;
    }
    free(s->addr);
    s->addr = malloc(e->worker_addr.len);
    if (s->addr == NULL) {
        s->valid = false;
        return MC_ERR_NOMEM;
    }
    memcpy(s->addr, e->worker_addr.p, e->worker_addr.len);
    s->addr_len = e->worker_addr.len;
    s->node = e->info.node;
    s->size = e->info.size;
    s->valid = true;
    return 0;
}

struct info_call {
    struct cluster *cl;
    uint32_t cursor;
};

static void info_page(struct cluster *cl, uint32_t cursor);

static void info_finish(struct cluster *cl)
{
    struct xfer *x = cl->info_wait;

    cl->info_busy = false;
    cl->info_wait = cl->info_wait_tail = NULL;
    while (x != NULL) {
        struct xfer *next = x->next;

        x->next = NULL;
        if (seg_find(cl, x->r.seg) == NULL)
            xfer_end(cl, x, MC_ERR_UNAVAILABLE); /* unmounted meanwhile: that replica is gone */
        else
            xfer_start(cl, x);
        x = next;
    }
}

static void info_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                      size_t len)
{
    struct info_call *ic = ctx;
    struct cluster *cl = ic->cl;
    struct mc_proto_seg_entry *segs = malloc(MC_PROTO_SEG_PAGE_MAX * sizeof(*segs));
    struct mc_proto_info_rep rep;
    uint32_t i;

    (void)hdr;
    free(ic);
    if (segs == NULL)
        status = MC_ERR_NOMEM;
    if (status == 0 && mc_proto_info_rep_decode(pl, len, MC_PROTO_SEG_PAGE_MAX, &rep, segs, 0,
                                                NULL) != 0)
        status = MC_ERR_PROTO;
    if (status == 0 && rep.status != 0)
        status = rep.status;
    if (status != 0) {
        mc_warn("segment table from the master: %s", mc_strerror(status));
        free(segs);
        info_finish(cl);
        return;
    }
    for (i = 0; i < rep.nseg; i++)
        seg_store(cl, &segs[i]);
    free(segs);
    if (rep.next_cursor != 0)
        info_page(cl, rep.next_cursor);
    else
        info_finish(cl);
}

static void info_page(struct cluster *cl, uint32_t cursor)
{
    struct mc_proto_info_req req = {.flags = MC_PROTO_INFO_F_SEGMENTS, .cursor = cursor,
                                    .max = MC_PROTO_SEG_PAGE_MAX};
    struct info_call *ic = malloc(sizeof(*ic));
    uint8_t buf[64];
    size_t len;
    int err = ic == NULL ? MC_ERR_NOMEM : mc_proto_info_req_encode(&req, buf, sizeof(buf), &len);

    if (err == 0) {
        ic->cl = cl;
        ic->cursor = cursor;
        err = cl_master_call(cl, MC_WIRE_CLUSTER_INFO, buf, len,
                          mc_ucx_now_ms() + INFO_TIMEOUT_MS, info_done, ic);
    }
    if (err != 0) {
        free(ic);
        mc_warn("segment table from the master: %s", mc_strerror(err));
        info_finish(cl);
    }
}

/* Learn the segments' owners again (one refresh at a time). */
static void info_refresh(struct cluster *cl)
{
    if (cl->info_busy)
        return;
    cl->info_busy = true;
    info_page(cl, 0);
}

/* --- peers -------------------------------------------------------------------------------- */

static struct peer **peer_slot(struct cluster *cl, const uint8_t *addr, size_t len)
{
    struct peer **pp = &cl->peers[XXH3_64bits(addr, len) % PEER_HASH];

    while (*pp != NULL &&
           ((*pp)->addr_len != len || memcmp((*pp)->addr, addr, len) != 0))
        pp = &(*pp)->next;
    return pp;
}

/* Forget a peer: its waiting transfers fail with `status`; its endpoint is closed (the
 * transfers under way on it end through UCX, with an error). */
void cl_peer_drop(struct cluster *cl, struct peer *p, int status)
{
    struct peer **pp = peer_slot(cl, p->addr, p->addr_len);
    struct xfer *x = p->waitq;

    if (*pp == p)
        *pp = p->next;
    if (p->hello != NULL)
        p->hello->p = NULL; /* its HELLO ends later, without us */
    p->waitq = p->waitq_tail = NULL;
    if (p->rq_listed) {
        struct peer **lp = &cl->rq_peers;

        while (*lp != p)
            lp = &(*lp)->rq_next;
        *lp = p->rq_next;
        p->rq_listed = false;
    }
    /* reads queued for a READ_BATCH that will not go: never sent, they end now */
    while (p->rq != NULL) {
        struct xfer *r = p->rq;

        p->rq = r->bnext;
        r->bnext = NULL;
        r->peer = NULL;
        read_call_over(cl, r, status);
    }
    p->rq_tail = NULL;
    /* transfers UCX still holds on its endpoint end through their callbacks, which must
     * not find this peer any more */
    for (struct xfer *m = cl->moving; m != NULL; m = m->inext) {
        if (m->peer == p)
            m->peer = NULL;
    }
    if (cl->u != NULL) { /* else the worker, and every endpoint with it, is gone already */
        mc_ucx_ep_set_user(p->ep, NULL);
        cl_inwrites_forget_ep(cl, p->ep);
        mc_ucx_ep_close(p->ep, true);
    }
    while (x != NULL) {
        struct xfer *next = x->next;

        x->next = NULL;
        x->peer = NULL;
        xfer_end(cl, x, status);
        x = next;
    }
    free(p->addr);
    free(p);
}

/* HELLO's answer to a peer. Its context is the peer's `hello` handle, not the peer: a peer
 * dropped while its HELLO is pending (cl_peer_drop) is freed at once, and the call ends
 * later (canceled, from progress) with the handle's peer cleared. */
static void peer_hello_done(void *ctx, int status, const struct mc_wire_hdr *hdr,
                            const void *pl, size_t len)
{
    struct peer_hello *h = ctx;
    struct peer *p = h->p;
    struct cluster *cl;
    struct mc_proto_status_rep rep;
    struct xfer *x;

    free(h);
    if (p == NULL)
        return; /* dropped meanwhile */
    p->hello = NULL;
    cl = p->cl;
    (void)hdr;
    if (status == 0)
        status = mc_proto_status_rep_decode(pl, len, &rep) == 0 ? rep.status : MC_ERR_PROTO;
    if (status != 0) {
        mc_warn("peer node %u: HELLO failed: %s", p->node, mc_strerror(status));
        cl->st.peer_errors++;
        cl_peer_drop(cl, p, MC_ERR_UNAVAILABLE);
        return;
    }
    p->state = PEER_READY;
    x = p->waitq;
    p->waitq = p->waitq_tail = NULL;
    while (x != NULL) {
        struct xfer *next = x->next;

        x->next = NULL;
        xfer_start(cl, x);
        x = next;
    }
}

static struct peer *peer_get(struct cluster *cl, const struct segrec *sr)
{
    struct peer **pp = peer_slot(cl, sr->addr, sr->addr_len), *p;
    uint8_t buf[MC_PROTO_TOKEN_MAX + 2 * MC_PROTO_NAME_MAX + 64];
    size_t len;
    int err;

    if (*pp != NULL) {
        (*pp)->node = sr->node;
        return *pp;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL || (p->addr = malloc(sr->addr_len)) == NULL) {
        free(p);
        return NULL;
    }
    memcpy(p->addr, sr->addr, sr->addr_len);
    p->addr_len = sr->addr_len;
    p->cl = cl;
    p->node = sr->node;
    err = mc_ucx_ep_connect(cl->u, sr->addr, sr->addr_len, &p->ep);
    if (err == 0)
        err = cl_hello_encode(cl, buf, sizeof(buf), &len);
    if (err == 0 && (p->hello = malloc(sizeof(*p->hello))) == NULL)
        err = MC_ERR_NOMEM;
    if (err == 0) {
        p->hello->p = p;
        mc_ucx_ep_set_user(p->ep, p);
        err = mc_ucx_rpc_call(p->ep, MC_WIRE_HELLO, buf, len,
                              mc_ucx_now_ms() + HELLO_TIMEOUT_MS, peer_hello_done, p->hello,
                              NULL);
    }
    if (err != 0) {
        free(p->hello);
        mc_warn("peer node %u: %s", sr->node, mc_strerror(err));
        mc_ucx_ep_close(p->ep, true);
        free(p->addr);
        free(p);
        return NULL;
    }
    p->state = PEER_HELLO;
    *pp = p;
    return p;
}


/* --- transfers ------------------------------------------------------------------------------ */

static struct xfer **read_slot(struct cluster *cl, uint64_t id)
{
    struct xfer **pp = &cl->reads[id % READ_HASH];

    while (*pp != NULL && (*pp)->id != id)
        pp = &(*pp)->next;
    return pp;
}

static void read_unhash(struct cluster *cl, struct xfer *x)
{
    struct xfer **pp;

    if (!x->hashed)
        return;
    pp = read_slot(cl, x->id);
    if (*pp == x)
        *pp = x->next;
    x->next = NULL;
    x->hashed = false;
}

static void moving_add(struct cluster *cl, struct xfer *x)
{
    x->moving = true;
    x->iprev = NULL;
    x->inext = cl->moving;
    if (x->inext != NULL)
        x->inext->iprev = x;
    cl->moving = x;
}

static void moving_del(struct cluster *cl, struct xfer *x)
{
    if (!x->moving)
        return;
    if (x->iprev != NULL)
        x->iprev->inext = x->inext;
    else
        cl->moving = x->inext;
    if (x->inext != NULL)
        x->inext->iprev = x->iprev;
    x->moving = false;
}

/* A write is over once the owner said its bytes are in place (or the call failed) and UCX
 * reads the image no more: only then may the put publish, or its image be reused. */
static void write_check(struct cluster *cl, struct xfer *x)
{
    if (x->data_done && x->reply_done)
        xfer_end(cl, x, x->status);
}

static void write_data_done(void *ctx, int status)
{
    struct xfer *x = ctx;

    x->data_done = true;
    if (status != 0 && x->status == 0)
        x->status = status;
    write_check(x->cl, x);
}

static void read_check(struct cluster *cl, struct xfer *x);

/* The owner answered a transfer's call (WRITE: the bytes are in place; READ: it sends them),
 * or the call failed. */
static void xfer_replied(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                         size_t len)
{
    struct xfer *x = ctx;
    struct mc_proto_status_rep rep;

    (void)hdr;
    if (status == 0)
        status = mc_proto_status_rep_decode(pl, len, &rep) == 0 ? rep.status : MC_ERR_PROTO;
    x->reply_done = true;
    if (status != 0 && x->status == 0)
        x->status = status;
    if (x->kind != X_READ) /* WRITE and COPY */
        write_check(x->cl, x);
    else
        read_check(x->cl, x);
}

static int write_send(struct cluster *cl, struct xfer *x)
{
    struct mc_peer_write_hdr h = {
        .seg = x->r.seg, .alloc = x->r.alloc, .offset = x->r.offset + x->from, .len = x->len,
        .version = x->version, .key = {(const uint8_t *)x->key, x->key_len},
        .tail = {x->tail, x->tail_len},
    };
    uint8_t buf[MC_PROTO_KEY_MAX + MC_PEER_WRITE_TAIL_MAX + 64];
    size_t len;
    int err = mc_peer_write_hdr_encode(&h, buf, sizeof(buf), &len);

    x->data_done = x->reply_done = false;
    x->status = 0;
    /* the owner answers once the bytes are in its segment: a put that returned is readable
     * through any node at once (the sender's completion only says the bytes left) */
    if (err == 0)
        err = mc_ucx_send_bulk_call(x->peer->ep, MC_WIRE_WRITE, buf, len, x->src, x->len,
                                    x->deadline_ms, xfer_replied, write_data_done, x);
    if (err == 0) {
        cl->st.writes_out++;
        cl->st.write_bytes_out += x->len + x->tail_len;
        if (x->tail_len != 0)
            cl->st.write_tails_hdr++;
        moving_add(cl, x);
    }
    return err;
}

static void read_check(struct cluster *cl, struct xfer *x)
{
    if (!x->reply_done)
        return; /* its call still names x: it ends (at the latest at attempt_ms) first */
    if (x->data_started && !x->data_done)
        return; /* the bytes are still moving into the landing segment: wait */
    if (x->status != 0) {
        read_unhash(cl, x);
        xfer_end(cl, x, x->status);
    } else if (x->data_done && x->reply_done) {
        read_unhash(cl, x);
        xfer_end(cl, x, 0);
    }
}

/* A read is ready to go to its owner: it gets its id (the owner's bulk will carry it) and
 * waits in the peer's queue for the turn's end, where cl_reads_flush sends every read
 * queued for that owner in one READ_BATCH. */
static int read_send(struct cluster *cl, struct xfer *x)
{
    struct peer *p = x->peer;

    x->id = ++cl->next_id;
    x->version = x->rg->g->lease.version; /* g may be gone by the flush (rg answered) */
    x->next = cl->reads[x->id % READ_HASH]; /* ids are new: push at the bucket's head */
    cl->reads[x->id % READ_HASH] = x;
    x->hashed = true;
    x->data_started = x->data_done = x->reply_done = x->tail_hdr = false;
    x->status = 0;
    x->rb = NULL;
    /* while other replicas are left, one that does not start its bytes within a share of the
     * time left (an unreachable, not yet dead, owner) gives its turn to the next */
    x->attempt_ms = read_turn_ms(x, mc_agent_now_ms());
    x->bnext = NULL;
    if (p->rq_tail != NULL)
        p->rq_tail->bnext = x;
    else
        p->rq = x;
    p->rq_tail = x;
    if (!p->rq_listed) {
        p->rq_listed = true;
        p->rq_next = cl->rq_peers;
        cl->rq_peers = p;
    }
    return 0;
}

/* One READ_BATCH call in flight: its reads, by item (NULL: that read left it, its own turn
 * having ended before the call did: cl_xfer_tick). */
struct rbatch {
    struct cluster *cl;
    uint32_t n;
    struct xfer *x[MC_PROTO_READ_BATCH_MAX];
};

/* A read's call is over (its batch was answered or failed, the read left the call at its
 * own turn's end, or it was never sent). */
static void read_call_over(struct cluster *cl, struct xfer *x, int status)
{
    x->rb = NULL;
    x->reply_done = true;
    if (status != 0 && x->status == 0)
        x->status = status;
    read_check(cl, x);
}

static void rbatch_replied(void *ctx, int status, const struct mc_wire_hdr *hdr,
                           const void *pl, size_t len)
{
    struct rbatch *rb = ctx;
    struct cluster *cl = rb->cl;
    int results[MC_PROTO_READ_BATCH_MAX];
    struct mc_proto_batch_rep rep;
    uint32_t i;

    (void)hdr;
    if (status == 0) {
        if (mc_proto_results_rep_decode(pl, len, rb->n, &rep, results) != 0)
            status = MC_ERR_PROTO;
        else if (rep.status != 0)
            status = rep.status;
        else if (rep.n != rb->n)
            status = MC_ERR_PROTO;
    }
    /* each read's own outcome (a status per item: 0, its bytes are on their way) */
    for (i = 0; i < rb->n; i++) {
        if (rb->x[i] != NULL)
            read_call_over(cl, rb->x[i], status != 0 ? status : results[i]);
    }
    free(rb);
}

/* Sends up to MC_PROTO_READ_BATCH_MAX of p's queued reads in one READ_BATCH. The call's
 * deadline is the latest turn among them; a read whose own turn ends first leaves the
 * call at the tick (cl_xfer_tick), as a READ of its own would have ended then. */
static void rbatch_send(struct cluster *cl, struct peer *p)
{
    struct mc_peer_read_req items[MC_PROTO_READ_BATCH_MAX];
    uint8_t buf[8 + MC_PROTO_READ_BATCH_MAX * 40];
    struct rbatch *rb = malloc(sizeof(*rb));
    uint64_t deadline = 0;
    struct xfer *x;
    uint32_t i;
    size_t len;
    int err;

    if (rb == NULL) {
        /* no memory for the call: these reads fail now (their readers try again) */
        while ((x = p->rq) != NULL) {
            p->rq = x->bnext;
            x->bnext = NULL;
            read_call_over(cl, x, MC_ERR_NOMEM);
        }
        p->rq_tail = NULL;
        return;
    }
    rb->cl = cl;
    rb->n = 0;
    while (rb->n < MC_PROTO_READ_BATCH_MAX && (x = p->rq) != NULL) {
        p->rq = x->bnext;
        x->bnext = NULL;
        if (x->rg->done == NULL) {
            /* its GET was answered meanwhile (a hedge's sibling landed): not sent (not
             * CANCELED, which would make us forget the owner's segment) */
            read_call_over(cl, x, MC_ERR_BUSY);
            continue;
        }
        items[rb->n] = (struct mc_peer_read_req){
            .xfer = x->id, .seg = x->r.seg, .alloc = x->r.alloc, .version = x->version,
            .offset = x->r.offset, .len = x->len,
            /* a tail apart comes in the reply's header: the object's bytes land whole
             * (a scattered receive makes UCX copy them through its buffers) */
            .head = x->head != 0 && x->len - x->head <= MC_PEER_READ_TAIL_MAX ? x->head : 0};
        if (x->attempt_ms > deadline)
            deadline = x->attempt_ms;
        x->rb = rb;
        x->rbi = rb->n;
        rb->x[rb->n++] = x;
    }
    if (p->rq == NULL)
        p->rq_tail = NULL;
    if (rb->n == 0) {
        free(rb);
        return;
    }
    err = mc_peer_read_batch_encode(items, rb->n, buf, sizeof(buf), &len);
    if (err == 0)
        err = mc_ucx_rpc_call(p->ep, MC_WIRE_READ_BATCH, buf, len, deadline, rbatch_replied, rb,
                              NULL);
    if (err != 0) {
        for (i = 0; i < rb->n; i++)
            read_call_over(cl, rb->x[i], err);
        free(rb);
        return;
    }
    for (i = 0; i < rb->n; i++) {
        cl->st.reads_out++;
        moving_add(cl, rb->x[i]);
    }
    cl->st.read_batches_out++;
}

bool cl_reads_flush(struct cluster *cl)
{
    bool sent = false;
    struct peer *p;

    while ((p = cl->rq_peers) != NULL) {
        cl->rq_peers = p->rq_next;
        p->rq_next = NULL;
        p->rq_listed = false;
        while (p->rq != NULL) {
            rbatch_send(cl, p);
            sent = true;
        }
    }
    return sent;
}

static void xfer_start(struct cluster *cl, struct xfer *x)
{
    const struct segrec *sr = seg_find(cl, x->r.seg);
    int err;

    if (cl->destroying || (x->kind == X_READ && x->rg->done == NULL)) {
        xfer_end(cl, x, MC_ERR_CANCELED); /* nothing new while the worker goes, nor for a
                                              GET another transfer answered */
        return;
    }
    if (sr == NULL) {
        /* whose segment is it? ask the master, then go on */
        x->next = NULL;
        if (cl->info_wait_tail != NULL)
            cl->info_wait_tail->next = x;
        else
            cl->info_wait = x;
        cl->info_wait_tail = x;
        info_refresh(cl);
        return;
    }
    x->peer = peer_get(cl, sr);
    if (x->peer == NULL) {
        xfer_end(cl, x, MC_ERR_UNAVAILABLE);
        return;
    }
    if (x->peer->state != PEER_READY) {
        if (x->kind == X_READ)
            x->attempt_ms = read_turn_ms(x, mc_agent_now_ms()); /* waiting counts */
        x->next = NULL;
        if (x->peer->waitq_tail != NULL)
            x->peer->waitq_tail->next = x;
        else
            x->peer->waitq = x;
        x->peer->waitq_tail = x;
        return;
    }
    err = x->kind == X_READ ? read_send(cl, x) : write_send(cl, x);
    if (err != 0)
        xfer_end(cl, x, err);
}

/* The next replica of rg's object that is not ours, from rg->rep_next on, or -1. */
static int next_remote(const struct cluster *cl, struct rget *rg)
{
    const struct mc_agent *a = cl->a;

    while (rg->rep_next < rg->g->nrep) {
        uint32_t i = rg->rep_next++;

        if (agent_seg(a, rg->g->rep[i].seg) == NULL && !(rg->skip >> i & 1))
            return (int)i;
    }
    return -1;
}

/* A new transfer of rg's object from replica i: the first into the reader's arena when it
 * gave one (with a small landing block for the image's tail when the arena span holds only
 * the object's bytes), any other into a landing block of its own. */
static int read_new(struct cluster *cl, struct rget *rg, int i, uint64_t len, uint64_t deadline)
{
    struct xfer *x = calloc(1, sizeof(*x));
    uint64_t size = rg->g->size;
    int err;

    if (x == NULL)
        return MC_ERR_NOMEM;
    if (rg->arena != NULL && !rg->arena_taken && rg->arena_room < len &&
        rg->arena_room >= size && size > 0 && size < len) {
        if ((err = mc_alloc_alloc(cl->a->ten[rg->tenant].land, len - size, &x->land_id)) != 0 ||
            (x->land_id & MC_RIO_ARENA_TAIL) != 0) {
            if (err == 0)
                mc_alloc_free(cl->a->ten[rg->tenant].land, x->land_id);
            free(x);
            return err != 0 ? err : MC_ERR_NO_SPACE;
        }
        rg->arena_taken = true;
        x->arena = rg->arena;
        x->head = size;
    } else if (rg->arena != NULL && !rg->arena_taken && rg->arena_room >= len) {
        rg->arena_taken = true;
        x->arena = rg->arena;
    } else if ((err = mc_alloc_alloc(cl->a->ten[rg->tenant].land, len, &x->land_id)) != 0) {
        free(x);
        return err;
    }
    x->what = OP_READ;
    x->kind = X_READ;
    x->cl = cl;
    x->r = rg->g->rep[i];
    x->ri = (uint32_t)i;
    x->rg = rg;
    x->len = len;
    x->deadline_ms = deadline;
    rg->running++;
    xfer_start(cl, x);
    return 0;
}

/* The reader is answered once: the transfers still running end as orphans. */
static void rget_answer(struct rget *rg, int status, uint32_t land_id, uint32_t rep)
{
    mc_rio_read_fn done = rg->done;
    void *ctx = rg->ctx;

    rg->done = NULL;
    if (rg->running == 0)
        free(rg);
    done(ctx, status, land_id, rep);
}

/* A read transfer is final: the first to land answers its GET; the others, and failed
 * ones, give their landing blocks back (UCX touches them no more). */
static void read_end(struct cluster *cl, struct xfer *x, int status)
{
    struct mc_agent *a = cl->a;
    struct rget *rg = x->rg;
    bool no_room = false;
    int i;

    rg->running--;
    if (rg->done != NULL && status == 0) {
        uint32_t land_id = x->arena == NULL ? x->land_id
                           : x->head != 0   ? x->land_id | MC_RIO_ARENA_TAIL
                                            : MC_RIO_IN_ARENA,
                 ri = x->ri;

        cl->st.read_bytes_in += x->len;
        if (x->arena != NULL)
            cl->st.arena_reads++;
        if (x->tail_hdr)
            cl->st.arena_tails_hdr++;
        free(x);
        rget_answer(rg, 0, land_id, ri);
        return;
    }
    if (rg->done != NULL) {
        /* this replica failed: an unreachable node counts as absent; try the next one */
        bool live = mc_agent_now_ms() < x->deadline_ms && rg->wanted(rg->ctx);

        if (x->head != 0) {
            /* the tail's block goes with the arena: a retry lands whole, apart */
            mc_alloc_free(a->ten[rg->tenant].land, x->land_id);
            x->head = 0;
        }

        mc_debug("read from node %u (segment %u): %s", x->r.node, x->r.seg,
                 mc_strerror(status));
        /* a transport failure is not yet the replica's loss: an endpoint that died while
         * the link was cut may report it only on its first use after the link heals. Once,
         * the same replica again on a fresh endpoint (the failed peer was dropped); the
         * owner's own "not here" and a deadline are final */
        if (live && x->arena != NULL &&
            mc_alloc_alloc(a->ten[rg->tenant].land, x->len, &x->land_id) == 0) {
            /* it is final: but the arena takes one transfer only (a later one could be
             * mistaken for it), so whatever is tried next lands and is copied */
            x->arena = NULL;
        } else if (x->arena != NULL && live) {
            /* no landing block: nothing else is tried, and the object may well exist (a
             * link that healed, another replica): the reader hears MC_ERR_BUSY, as for a
             * read that found the landing segment full at its start, not NOT_FOUND */
            live = false;
            no_room = true;
        }
        if (live && !x->retried && status != MC_ERR_NOT_FOUND && status != MC_ERR_TIMEOUT) {
            x->retried = true;
            x->peer = NULL;
            x->hedged = false;
            rg->running++;
            xfer_start(cl, x);
            return;
        }
        i = live ? next_remote(cl, rg) : -1;
        if (i >= 0) {
            cl->st.failovers++;
            x->r = rg->g->rep[i];
            x->ri = (uint32_t)i;
            x->peer = NULL;
            x->hedged = false;
            rg->running++;
            xfer_start(cl, x);
            return;
        }
    }
    if (x->arena == NULL || x->head != 0)
        mc_alloc_free(a->ten[rg->tenant].land, x->land_id);
    free(x);
    if (rg->done != NULL && rg->running == 0)
        rget_answer(rg, status == MC_ERR_TIMEOUT ? MC_ERR_TIMEOUT
                        : no_room                ? MC_ERR_BUSY
                                                 : MC_ERR_NOT_FOUND,
                    0, 0);
    else if (rg->done == NULL && rg->running == 0)
        free(rg);
}

/* A transfer is final (no byte of its memory is touched by UCX any more). */
static void xfer_end(struct cluster *cl, struct xfer *x, int status)
{
    moving_del(cl, x);
    /* the owner does not hold that segment (any more): ask the master next time */
    if ((status == MC_ERR_NOT_FOUND || status == MC_ERR_CANCELED) && x->r.seg < cl->nsegtab)
        cl->segs[x->r.seg].valid = false;
    if (x->kind == X_WRITE) {
        mc_rio_write_fn done = x->wdone;
        void *ctx = x->wctx;

        if (status != 0)
            mc_debug("write to node %u (segment %u): %s", x->r.node, x->r.seg,
                     mc_strerror(status));
        free(x);
        done(ctx, status);
        return;
    }
    read_end(cl, x, status);
}


/* x's owner started sending and went silent past x's turn (a stopped process, a cut
 * link): the bytes already moving cannot be stopped, so read the next replica beside them
 * into a block of its own; whichever lands first answers. */
static void read_hedge(struct cluster *cl, struct xfer *x)
{
    struct rget *rg = x->rg;
    int i;

    x->hedged = true;
    if (!rg->wanted(rg->ctx) || (i = next_remote(cl, rg)) < 0)
        return;
    if (read_new(cl, rg, i, x->len, x->deadline_ms) == 0) {
        cl->st.failovers++;
        cl->st.hedged++;
        mc_debug("read from node %u stalled mid-transfer: replica %d read beside it",
                 x->r.node, i);
    } else {
        rg->rep_next--; /* no room to land it now: maybe at the next tick */
        x->hedged = false;
    }
}

static void publish_send(struct cluster *cl, struct mc_resend_item *it, uint64_t now);

/* A peer whose HELLO is still unanswered past the turn of a read waiting for it (one with
 * another replica left), or NULL. */
static struct peer *peer_hello_stalled(struct cluster *cl, uint64_t now)
{
    for (uint32_t i = 0; i < PEER_HASH; i++) {
        for (struct peer *p = cl->peers[i]; p != NULL; p = p->next) {
            if (p->state != PEER_HELLO)
                continue;
            for (struct xfer *x = p->waitq; x != NULL; x = x->next) {
                if (x->kind == X_READ && x->rg != NULL && x->rg->done != NULL &&
                    x->rg->rep_next < x->rg->g->nrep && now > x->attempt_ms)
                    return p;
            }
        }
    }
    return NULL;
}

void cl_xfer_tick(struct cluster *cl, uint64_t now)
{
    struct mc_resend_item *it;
    uint32_t i;

    /* PUBLISHes whose last try went unanswered */
    while (!cl->destroying && (it = mc_resend_next(&cl->pubq, now)) != NULL)
        publish_send(cl, it, now);

    /* a peer that kept a transfer past its deadline by peer_hard_deadline_ms is judged
     * unresponsive: its endpoint is closed with force, UCX ends what it held (with an
     * error), and only then is that memory reused (docs/architecture.md) */
    for (struct xfer *x = cl->moving; x != NULL; x = x->inext) {
        if (x->peer != NULL && now > x->deadline_ms + cl->a->cfg.peer_hard_deadline_ms) {
            mc_warn("peer node %u unresponsive past its hard deadline: endpoint closed",
                    x->peer->node);
            cl->st.peer_errors++;
            cl_peer_drop(cl, x->peer, MC_ERR_UNAVAILABLE);
            break; /* the list changed; the rest waits for the next tick */
        }
    }
    /* reads whose owner accepted the call but never started the bytes */
    for (i = 0; i < READ_HASH; i++) {
        struct xfer *x = cl->reads[i], *next;

        for (; x != NULL; x = next) {
            next = x->next;
            /* only once the call is over: while it is pending, its own deadline (the
             * attempt's) ends it, and its callback still names x */
            if (x->reply_done && !x->data_started && now > x->attempt_ms) {
                if (x->status == 0)
                    x->status = MC_ERR_TIMEOUT;
                read_check(cl, x);
            } else if (x->rb != NULL && !x->data_started && now > x->attempt_ms) {
                /* its turn ended before its batch's call did (a batch-mate has a later
                 * one): it leaves the call, as a call of its own would have timed out */
                x->rb->x[x->rbi] = NULL;
                read_call_over(cl, x, MC_ERR_TIMEOUT);
            } else if (x->data_started && !x->data_done && !x->hedged && now > x->attempt_ms &&
                       x->rg->done != NULL && x->arena == NULL) {
                /* never beside a transfer into an arena: its GET may be answered only
                 * once that one is final (it is cut instead, below) */
                read_hedge(cl, x);
            }
        }
    }
    /* a read still waiting for its owner's HELLO at its turn's end: that owner is stalled
     * (stopped, cut off) as surely as one whose bytes stopped. It is dropped with
     * MC_ERR_TIMEOUT, so its waiting reads go on to their next replicas at once, not at the
     * HELLO's deadline (a reconnect to an owner stopped again, test_fault_arena's
     * owner_stopped_other_replica under load) */
    {
        struct peer *p = peer_hello_stalled(cl, now);

        if (p != NULL) {
            mc_warn("peer node %u: no answer to HELLO within a read's turn: endpoint closed",
                    p->node);
            cl->st.peer_errors++;
            cl_peer_drop(cl, p, MC_ERR_TIMEOUT);
            return; /* the lists changed; the rest waits for the next tick */
        }
    }
    /* a transfer into a client's arena still moving at its turn's end: never read beside
     * (its GET may be answered only once it is final), it is cut. The owner's endpoint is
     * closed with force: UCX ends every request on it with an error at once (the bytes in
     * flight are dropped), and the read goes on from that completion: to the next replica,
     * into the landing segment, while one is left (its turn ended before the deadline),
     * else the GET answers MC_ERR_TIMEOUT by its deadline (docs/decisions.md, "Remote
     * reads land in the client's arena") */
    for (struct xfer *x = cl->moving; x != NULL; x = x->inext) {
        if (x->kind == X_READ && x->arena != NULL && x->peer != NULL && x->data_started &&
            !x->data_done && now > x->attempt_ms) {
            mc_warn("peer node %u: a read into a client's arena stalled past its turn: "
                    "endpoint closed", x->peer->node);
            cl->st.arena_cuts++;
            cl->st.peer_errors++;
            /* the owner is stalled: its other reads end as timed out too (read from the
             * next replica at once, not tried again on a fresh endpoint to the same
             * stalled owner), not as that replica's loss */
            for (struct xfer *m = cl->moving; m != NULL; m = m->inext) {
                if (m->kind == X_READ && m->peer == x->peer && m->status == 0)
                    m->status = MC_ERR_TIMEOUT;
            }
            x->status = MC_ERR_TIMEOUT;
            cl_peer_drop(cl, x->peer, MC_ERR_TIMEOUT);
            break; /* the lists changed; the rest waits for the next tick */
        }
    }
}

/* --- replica I/O (rio.h) ---------------------------------------------------------------- */

int cl_write(struct cluster *cl, const struct mc_rio_write *w, mc_rio_write_fn done, void *ctx)
{
    struct xfer *x = calloc(1, sizeof(*x));

    if (x == NULL)
        return MC_ERR_NOMEM;
    x->kind = X_WRITE;
    x->cl = cl;
    x->r = *w->r;
    x->src = w->src;
    x->from = w->from;
    x->len = w->len;
    x->tail = w->tail;
    x->tail_len = w->tail_len;
    x->version = w->version;
    x->key = w->key;
    x->key_len = w->key_len;
    x->deadline_ms = w->deadline_ms;
    x->wdone = done;
    x->wctx = ctx;
    xfer_start(cl, x); /* it may end (done runs) inside */
    return 0;
}

static int ucx_write(void *impl, const struct mc_rio_write *w, mc_rio_write_fn done, void *ctx)
{
    return cl_write(impl, w, done, ctx);
}

static int ucx_read(void *impl, const struct mc_master_get_result *g, uint32_t skip,
                    uint32_t tenant, uint64_t deadline_ms, uint8_t *arena,
                    uint64_t arena_room, mc_rio_read_fn done, mc_rio_wanted_fn wanted,
                    void *ctx)
{
    struct cluster *cl = impl;
    bool csum = (g->flags & MC_MASTER_PUT_NO_CHECKSUM) == 0;
    uint64_t len = mc_shm_alloc_len(g->size, csum);
    struct rget *rg = calloc(1, sizeof(*rg));
    int i, err;

    if (rg == NULL)
        return MC_ERR_BUSY;
    rg->g = g;
    rg->skip = skip;
    rg->tenant = tenant;
    rg->done = done;
    rg->wanted = wanted;
    rg->ctx = ctx;
    rg->arena = arena;
    rg->arena_room = arena_room;
    i = next_remote(cl, rg);
    /* a read that fails at once answers inside (done runs, rg is gone): do not touch rg */
    err = i < 0 ? MC_ERR_NOT_FOUND : read_new(cl, rg, i, len, deadline_ms);
    if (err != 0) {
        free(rg); /* nothing started */
        /* a full landing segment is transient: readers retry */
        return err == MC_ERR_NO_SPACE || err == MC_ERR_NOMEM ? MC_ERR_BUSY : err;
    }
    return 0;
}

static uint64_t ucx_lease_ttl_ms(void *impl)
{
    struct cluster *cl = impl;

    return cl->lease_ttl_ms;
}

/* Which owner a segment record names (its worker address): a PUBLISH is sent again only
 * to the owner it was meant for, never to another that took the segment's id since. */
static uint32_t owner_hash(const struct segrec *sr)
{
    uint32_t h = 2166136261u; /* FNV-1a */

    for (size_t i = 0; i < sr->addr_len; i++)
        h = (h ^ sr->addr[i]) * 16777619u;
    return h;
}

/* A queued PUBLISH's data: a header, the request's payload, then the owner's worker
 * address (a PUBLISH carried over a master change is sent by it: the segment table of
 * the old reign is gone). */
struct pub_head {
    uint32_t plen;  /* the payload's bytes */
    uint32_t node;  /* the owner's node id in the reign it was made in (logs) */
    bool gone;      /* its last try could not reach the owner (no endpoint, or it failed:
                       the process is gone): not waited for by cl_pubs_carried */
};

static const uint8_t *pub_payload(const struct mc_resend_item *it, size_t *len_p)
{
    const struct pub_head *h = (const void *)it->data;

    *len_p = h->plen;
    return it->data + sizeof(*h);
}

static const uint8_t *pub_addr(const struct mc_resend_item *it, size_t *len_p)
{
    const struct pub_head *h = (const void *)it->data;

    *len_p = it->len - sizeof(*h) - h->plen;
    return it->data + sizeof(*h) + h->plen;
}

/* A PUBLISH's try ended. Settled: the owner indexed it (0), already knew better
 * (MC_ERR_EXISTS: a newer object or its drop, or the master refused it), or refused it for good (not its segment, not a reign it mounted in,
 * out of range, a codec it does not know). Anything else (no answer in time, the endpoint
 * lost, the owner short of memory or still telling its master: MC_ERR_NOMEM, MC_ERR_BUSY,
 * for the whole batch or the item) is tried again (resend.h) while PUBLISH_GIVE_UP_MS has
 * not passed and, in the reign it was made in, the segment stays the owner's. */
static void publish_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                         size_t len)
{
    struct mc_resend_item *it = ctx;
    struct cluster *cl = it->ctx;
    struct mc_proto_batch_rep rep;
    int result = 0;

    (void)hdr;
    if (status == 0) {
        if (mc_proto_results_rep_decode(pl, len, 1, &rep, &result) != 0)
            status = MC_ERR_PROTO;
        else if (rep.status != 0)
            status = rep.status; /* the batch refused whole (review M4: NOMEM is not final) */
        else if (rep.n != 1)
            status = MC_ERR_PROTO;
        else
            status = result;
    }
    ((struct pub_head *)(void *)it->data)->gone =
        status != 0 && status != MC_ERR_TIMEOUT && status != MC_ERR_BUSY &&
        status != MC_ERR_NOMEM && !mc_proto_publish_result_settled(status);
    if (mc_proto_publish_result_settled(status)) {
        cl->st.published_out++;
    } else if (!cl->destroying && status != MC_ERR_INVALID && status != MC_ERR_NOT_FOUND &&
               status != MC_ERR_PROTO) {
        mc_debug("PUBLISH of segment %u, try %u: %s", it->dest, it->tries, mc_strerror(status));
        if (!mc_resend_failed(&cl->pubq, it, mc_ucx_now_ms()))
            mc_warn("PUBLISH to the owner of segment %u given up after %u tries", it->dest,
                    it->tries);
        return;
    } else if (!cl->destroying) {
        mc_debug("PUBLISH to an owner: %s", mc_strerror(status));
    }
    mc_resend_done(&cl->pubq, it);
}

/* The end of a PUBLISH tried once, unqueued (the queue was full). */
static void publish_once_done(void *ctx, int status, const struct mc_wire_hdr *hdr,
                              const void *pl, size_t len)
{
    (void)ctx;
    (void)hdr;
    (void)pl;
    (void)len;
    if (status != 0)
        mc_debug("PUBLISH to an owner (unqueued): %s", mc_strerror(status));
}

/* The payload of a try, with the item's TTL counted from now: it is the TTL left when the
 * put was published, and sent as is later it would give the object a fresh TTL at the owner
 * (and at a new master, by a late RESTORE: review finding M3). NULL: the TTL has passed
 * since, the object is absent for every lookup and nothing is left to publish. tmp: room
 * for one item. */
static const uint8_t *publish_payload_now(const struct mc_resend_item *it, uint64_t now,
                                          uint8_t *tmp, size_t cap, size_t *len_p)
{
    struct mc_proto_publish_item pi;
    uint64_t gone = now > it->first_ms ? now - it->first_ms : 0;
    const uint8_t *pl = pub_payload(it, len_p);
    size_t plen = *len_p;
    uint32_t n = 0;

    if (gone == 0 || mc_proto_publish_req_decode(pl, plen, 1, &n, &pi) != 0 || n != 1 ||
        pi.ttl_ms == 0)
        return pl; /* no TTL (0: none), or the item as it was made */
    if (pi.ttl_ms <= gone)
        return NULL;
    pi.ttl_ms -= gone;
    if (mc_proto_publish_req_encode(1, &pi, tmp, cap, len_p) != 0) {
        *len_p = plen;
        return pl;
    }
    return tmp;
}

static void publish_send(struct cluster *cl, struct mc_resend_item *it, uint64_t now)
{
    const struct pub_head *h = (const void *)it->data;
    const struct segrec *sr = seg_find(cl, it->dest);
    _Alignas(8) uint8_t tmp[MC_PROTO_KEY_MAX + 128];
    struct segrec carried;
    const uint8_t *pl;
    struct peer *peer;
    size_t plen;

    if (it->tag + 1 < cl->seg_gen) {
        /* carried over one master change already and not delivered in that reign: the
         * master of that reign may have freed the object since (a remove it answered, with
         * a DROP to the owners it knew), and a later master would take it back (review L1).
         * Given up */
        mc_warn("PUBLISH to node %u given up: carried over two master changes", h->node);
        cl->pubq.given_up++;
        mc_resend_done(&cl->pubq, it);
        return;
    }
    if (it->tag != cl->seg_gen) {
        /* made in an earlier reign of the master: its id of the segment means nothing to
         * this one, but the owner maps it to its own segment (owner.c, h_publish). Sent to
         * the owner by its address; an owner that restarted since knows no such reign and
         * refuses it (MC_ERR_NOT_FOUND: given up) */
        carried = (struct segrec){.valid = true, .node = h->node};
        carried.addr = (uint8_t *)pub_addr(it, &carried.addr_len);
        sr = &carried;
    } else if (sr == NULL || owner_hash(sr) != it->aux) {
        /* the segment is gone, or another owner took its id */
        mc_resend_done(&cl->pubq, it);
        return;
    }
    if ((pl = publish_payload_now(it, now, tmp, sizeof(tmp), &plen)) == NULL) {
        mc_debug("PUBLISH to the owner of segment %u: its TTL passed, settled", it->dest);
        mc_resend_done(&cl->pubq, it);
        return;
    }
    if ((peer = peer_get(cl, sr)) == NULL ||
        mc_ucx_rpc_call(peer->ep, MC_WIRE_PUBLISH, pl, plen, now + PUBLISH_TIMEOUT_MS,
                        publish_done, it, NULL) != 0) {
        ((struct pub_head *)(void *)it->data)->gone = true;
        (void)mc_resend_failed(&cl->pubq, it, now);
    }
}

/* The owner of replica p->r indexes the published object (PUBLISH, hold_proto.h). Sent
 * after put_end was answered and not waited for: the put's caller does not pay for it; a
 * try left unanswered is made again from the tick (cl->pubq), also after the master
 * changed (the item names the reign it was made in). */
static void ucx_publish(void *impl, const struct mc_rio_publish *p)
{
    struct cluster *cl = impl;
    const struct segrec *sr = seg_find(cl, p->r->seg);
    struct mc_proto_publish_item it = {
        .m_epoch = cl->m_epoch, .m_incarnation = cl->m_incarnation,
        .seg = p->r->seg, .flags = p->flags, .offset = p->r->offset, .alloc_len = p->r->len,
        .size = p->size, .version = p->version, .ttl_ms = p->ttl_ms,
        .key = {(const uint8_t *)p->key, p->key_len}};
    _Alignas(8) uint8_t buf[sizeof(struct pub_head) + MC_PROTO_KEY_MAX + 128 + MC_BOOT_ADDR_MAX];
    struct pub_head *h = (void *)buf;
    struct mc_resend_item *ri;
    struct peer *peer;
    uint64_t now = mc_ucx_now_ms();
    size_t len;

    if (sr == NULL || cl->destroying || sr->addr_len > MC_BOOT_ADDR_MAX ||
        mc_proto_publish_req_encode(1, &it, buf + sizeof(*h), MC_PROTO_KEY_MAX + 128,
                                    &len) != 0) {
        mc_debug("PUBLISH of version %" PRIu64 " to segment %u not sent", p->version,
                 p->r->seg);
        return;
    }
    h->plen = (uint32_t)len;
    h->node = sr->node;
    h->gone = false;
    memcpy(buf + sizeof(*h) + len, sr->addr, sr->addr_len);
    ri = mc_resend_new(&cl->pubq, cl, p->r->seg, owner_hash(sr), cl->seg_gen, buf,
                       sizeof(*h) + len + sr->addr_len, NULL, now);
    if (ri != NULL) {
        publish_send(cl, ri, now);
        return;
    }
    /* the queue is full (or no memory): one try, unqueued */
    if ((peer = peer_get(cl, sr)) == NULL ||
        mc_ucx_rpc_call(peer->ep, MC_WIRE_PUBLISH, buf + sizeof(*h), len,
                        now + PUBLISH_TIMEOUT_MS, publish_once_done, cl, NULL) != 0)
        mc_debug("PUBLISH of version %" PRIu64 " to segment %u not sent", p->version,
                 p->r->seg);
}

const struct mc_rio_ops mc_rio_ucx_ops = {
    .write = ucx_write,
    .read = ucx_read,
    .lease_ttl_ms = ucx_lease_ttl_ms,
    .publish = ucx_publish,
};

/* --- start-over and exit ------------------------------------------------------------------ */

void cl_segments_forget(struct cluster *cl)
{
    /* segment ids name other segments under a new master. The PUBLISHes still due are
     * kept: they name their reign, go to their owner by its address and are tried at once
     * (their backoff starts over); cl_pubs_carried counts them until they are settled */
    cl->seg_gen++;
    mc_resend_hurry(&cl->pubq, mc_ucx_now_ms());
    for (uint32_t i = 0; i < cl->nsegtab; i++) {
        free(cl->segs[i].addr);
        cl->segs[i].addr = NULL;
        cl->segs[i].valid = false;
    }
}

size_t cl_pubs_carried(const struct cluster *cl)
{
    size_t n = 0;

    /* an owner we cannot reach (its process gone: a restarted one has another address)
     * is not waited for: the window would be held for nothing (review M1) */
    for (const struct mc_resend_item *it = cl->pubq.head; it != NULL; it = it->next)
        n += it->tag != cl->seg_gen && !((const struct pub_head *)(const void *)it->data)->gone;
    return n;
}

void cl_xfer_destroy(struct cluster *cl)
{
    uint32_t i;

    for (i = 0; i < PEER_HASH; i++) {
        while (cl->peers[i] != NULL)
            cl_peer_drop(cl, cl->peers[i], MC_ERR_CANCELED);
    }
    /* the worker is gone (cluster_destroy): every try out has ended */
    mc_resend_clear(&cl->pubq);
    while (cl->info_wait != NULL) {
        struct xfer *x = cl->info_wait;

        cl->info_wait = x->next;
        xfer_end(cl, x, MC_ERR_CANCELED);
    }
    for (i = 0; i < cl->nsegtab; i++)
        free(cl->segs[i].addr);
    free(cl->segs);
    cl->segs = NULL;
    cl->nsegtab = 0;
}

/* --- the bytes of our reads arriving (owner.c dispatches every bulk) ---------------------- */

/* Where read x's own landing block is (its image, or its image's tail). */
static uint8_t *read_block(struct cluster *cl, const struct xfer *x)
{
    const struct agent_tenant *t = &cl->a->ten[x->rg->tenant];

    return t->land_seg->base + mc_alloc_offset(t->land, x->land_id);
}

void *cl_read_landing(struct cluster *cl, struct mc_ucx_ep *ep, uint64_t id, const void *hpl,
                      size_t hpl_len, size_t len, void **op_p)
{
    struct xfer *x = *read_slot(cl, id);

    if (x == NULL || x->peer == NULL || x->peer->ep != ep || x->data_started)
        return NULL; /* not a read of ours (late, or forged): refused */
    if (x->arena != NULL && x->head != 0 && len == x->head && hpl_len == x->len - x->head) {
        /* the image's tail came in the header (peer_proto.h): into our block; the
         * object's bytes into the reader's arena span, whole */
        memcpy(read_block(cl, x), hpl, hpl_len);
        x->tail_hdr = true;
        x->data_started = true;
        *op_p = x;
        return x->arena;
    }
    if (len != x->len || hpl_len != 0)
        return NULL; /* not what was asked: refused */
    x->data_started = true;
    *op_p = x;
    if (x->arena != NULL && x->head != 0) {
        /* the object's bytes into the reader's arena span, the rest into our block */
        mc_ucx_bulk_dest_split(cl->u, x->head, read_block(cl, x));
        return x->arena;
    }
    if (x->arena != NULL)
        return x->arena; /* the reader's arena span, of x->len bytes at least (lease.c) */
    return read_block(cl, x);
}

void cl_read_landed(struct cluster *cl, void *op, int status)
{
    struct xfer *x = op;

    x->data_done = true;
    if (x->rb != NULL) {
        /* the item is over once its bytes are final: it does not wait for the batch's
         * answer (which may come only at a batch-mate's later turn, or never) */
        x->rb->x[x->rbi] = NULL;
        read_call_over(cl, x, status);
        return;
    }
    if (status != 0 && x->status == 0)
        x->status = status;
    read_check(cl, x);
}
