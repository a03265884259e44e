/*
 * The owner's side of the agent in cluster mode (cluster_int.h): what peers and the master
 * ask of us. Peers authenticate with the cluster token (HELLO) on every endpoint before any
 * READ or WRITE is served; a WRITE lands straight in our segment inside the block the
 * master granted and is answered once its bytes are in place; a READ is sent from our
 * segment straight into the reader's landing segment; FENCE, COPY (owner_copy.c), PUBLISH
 * and DROP come from the master only. A write torn midway leaves a fence we report, so the master may reuse the block.
 */
#include "daemon/agent/cluster_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/agent/client.h"
#include "daemon/agent/disk_fmt.h" /* MC_DISK_BLOCK */
#include "daemon/agent/disk_tier.h"
#include "daemon/agent/holdidx.h"
#include "daemon/common/log.h"
#include "daemon/proto/hold_proto.h"

/* --- the owner's side ----------------------------------------------------------------------- */

/* A frame with request id `id` on `ep` comes from an authenticated peer: ours (to the master,
 * to peers whose addresses the master gave us), or an accepted one that passed HELLO in the
 * session this frame carries (ucx.h: a new endpoint at a dead peer's address does not). */
static bool ep_authed(const struct cluster *cl, struct mc_ucx_ep *ep, uint64_t id)
{
    if (!mc_ucx_ep_is_accepted(ep))
        return true;
    return mc_ucx_ep_user(ep) == &cl->accepted_marker &&
           MC_UCX_SESSION_OF(id) == mc_ucx_ep_session(ep);
}

/* [off, off + len) of our segment seg (any tenant's: the master names it), or NULL. */
static uint8_t *seg_span(struct mc_agent *a, uint32_t seg, uint64_t off, uint64_t len)
{
    return mc_seg_span(agent_seg(a, seg), off, len);
}

static void fence_add(struct cluster *cl, uint32_t seg, uint32_t alloc, uint64_t version)
{
    struct fence *f = malloc(sizeof(*f));

    if (f == NULL)
        return; /* the master's put_release timeout frees it */
    f->item = (struct mc_proto_fence_item){.seg = seg, .alloc = alloc, .version = version};
    f->first_ms = mc_agent_now_ms();
    f->next = cl->fences;
    cl->fences = f;
}

/*
 * Bytes of a segment with no window in place (a GPU segment UCX does not move directly),
 * copied out into host memory for UCX to send: Debian's UCX moves host bytes only
 * (mc_ucx_has_cuda). A malloc'd buffer whose header is the send's context; freed once UCX
 * reads it no more.
 */
struct staged {
    struct cluster *cl;
    void *ctx;                          /* the unstaged send's */
    void (*done)(void *ctx, int status);
    uint8_t bytes[];
};

static struct staged *stage_out(struct cluster *cl, uint32_t seg, uint64_t off, uint64_t len)
{
    struct mc_seg *s = agent_seg(cl->a, seg);
    struct staged *st;

    if (s == NULL || len > s->size)
        return NULL;
    st = malloc(sizeof(*st) + len);
    if (st == NULL)
        return NULL;
    if (s->ops->read(s, off, st->bytes, len) != 0) {
        free(st);
        return NULL;
    }
    st->cl = cl;
    cl->st.staged_out++;
    return st;
}

static void staged_sent(void *ctx, int status)
{
    struct staged *st = ctx;

    st->done(st->ctx, status);
    free(st);
}

static void read_served(void *ctx, int status)
{
    struct cluster *cl = ctx;

    if (status != 0)
        mc_debug("a read served to a peer failed: %s", mc_strerror(status));
    else
        cl->st.reads_in++;
}

static void read_served_direct(void *ctx, int status)
{
    struct cluster *cl = ctx;

    if (status == 0)
        cl->st.direct_out++;
    read_served(cl, status);
}

/* Sends the image of one read (len bytes at src, in host memory) as the bulk READ_REPLY of
 * request id xfer: with head != 0 its bytes [0, head) as the data and the rest in the
 * header, so that a reader's buffer of exactly the object's size receives the data whole
 * (peer_proto.h); all of it as data when the header cannot hold the rest here. */
static int reply_bulk(struct mc_ucx_ep *ep, uint64_t xfer, const uint8_t *src, uint64_t len,
                      uint64_t head, mc_ucx_done_fn done, void *ctx)
{
    int err = MC_ERR_INVALID;

    if (head != 0 && head < len)
        err = mc_ucx_send_bulk(ep, MC_WIRE_READ_REPLY, xfer, src + head, (size_t)(len - head),
                               src, (size_t)head, done, ctx);
    if (err == MC_ERR_INVALID) /* nothing started: a header over this endpoint's limit */
        err = mc_ucx_send_bulk(ep, MC_WIRE_READ_REPLY, xfer, NULL, 0, src, (size_t)len, done,
                               ctx);
    return err;
}

/* Starts sending one read's bytes to the reader as a bulk READ_REPLY with request id
 * req->xfer: 0 once they are on their way (the send's end is read_served's), else why not. */
static int read_serve(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_peer_read_req *req)
{
    struct mc_agent *a = cl->a;
    const uint8_t *src;
    int err;

    if ((src = seg_span(a, req->seg, req->offset, req->len)) == NULL) {
        enum mc_ucx_mem_type mt;
        const void *dsrc = cl_gpu_direct_span(cl, req->seg, req->offset, req->len, &mt);
        struct staged *st;

        if (dsrc != NULL) {
            /* straight from the GPU segment: UCX moves its memory (the lease holds it) */
            return mc_ucx_send_bulk_mem(ep, MC_WIRE_READ_REPLY, req->xfer, NULL, 0, dsrc,
                                        req->len, mt, read_served_direct, cl);
        }
        st = stage_out(cl, req->seg, req->offset, req->len);
        if (st == NULL)
            return MC_ERR_NOT_FOUND;
        st->done = read_served;
        st->ctx = cl;
        err = reply_bulk(ep, req->xfer, st->bytes, req->len, req->head, staged_sent, st);
        if (err != 0)
            free(st);
        return err;
    }
    /* straight from the segment: the reader's lease keeps the allocation ours to send */
    return reply_bulk(ep, req->xfer, src, req->len, req->head, read_served, cl);
}

/* --- reads of our disk records: asynchronous, answered when the record is read ------------ */

static void diskread_unlink(struct cluster *cl, struct diskread *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        cl->diskreads = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    r->next = r->prev = NULL;
}

/* Peers' disk reads that may wait for a place, per place (disk_peer_reads): beyond, one
 * more is answered MC_ERR_BUSY. */
#define DISKQ_PER_PLACE 16u

static void diskq_start(struct cluster *cl);

/* r's buffer for the record: aligned to the disk's block, so that the store reads the
 * record's whole blocks straight into it (disk.h) instead of through a staging buffer and a
 * copy. 0 or MC_ERR_NOMEM. */
static int diskread_buf(struct cluster *cl, struct diskread *r)
{
    size_t want = (r->len + 65535u) & ~(size_t)65535u;
    void *p = NULL;

    if (want == 0)
        want = 65536u;
    for (uint32_t i = 0; i < cl->ndbuf; i++) {
        if (cl->dbuf_cap[i] == want) { /* a kept one of this size: its pages are there */
            r->bytes = cl->dbuf[i];
            r->cap = want;
            cl->dbuf_bytes -= want;
            cl->ndbuf--;
            cl->dbuf[i] = cl->dbuf[cl->ndbuf];
            cl->dbuf_cap[i] = cl->dbuf_cap[cl->ndbuf];
            return 0;
        }
    }
    if (posix_memalign(&p, MC_DISK_BLOCK, want) != 0)
        return MC_ERR_NOMEM;
    r->bytes = p;
    r->cap = want;
    return 0;
}

/* Its buffer back to the cluster's keep (the oldest kept one goes when full), or freed
 * when the cluster is gone. Only at the read's final end: the store and UCX are done. */
static void diskread_buf_drop(struct cluster *cl, struct diskread *r)
{
    if (r->bytes == NULL)
        return;
    if (cl == NULL || cl->destroying || r->cap > CL_DBUF_KEEP_BYTES) {
        free(r->bytes);
    } else {
        while (cl->ndbuf == CL_DBUF_KEEP || cl->dbuf_bytes + r->cap > CL_DBUF_KEEP_BYTES) {
            free(cl->dbuf[0]); /* the oldest goes */
            cl->dbuf_bytes -= cl->dbuf_cap[0];
            cl->ndbuf--;
            memmove(cl->dbuf, cl->dbuf + 1, cl->ndbuf * sizeof(cl->dbuf[0]));
            memmove(cl->dbuf_cap, cl->dbuf_cap + 1, cl->ndbuf * sizeof(cl->dbuf_cap[0]));
        }
        cl->dbuf[cl->ndbuf] = r->bytes;
        cl->dbuf_cap[cl->ndbuf++] = r->cap;
        cl->dbuf_bytes += r->cap;
    }
    r->bytes = NULL;
}

static void diskread_free(struct diskread *r)
{
    diskread_buf_drop(r->cl, r);
    free(r);
}

static void diskread_sent(void *ctx, int status)
{
    struct diskread *r = ctx;

    if (r->cl != NULL)
        read_served(r->cl, status);
    diskread_free(r);
}

/* One answer for a READ_BATCH: a status per item. */
static void readbatch_reply(struct cluster *cl, struct mc_ucx_ep *ep, uint64_t request_id,
                            const int *results, uint32_t n)
{
    uint8_t out[16 + 4 * MC_PROTO_READ_BATCH_MAX];
    struct mc_proto_batch_rep rep = {.n = n};
    size_t len;
    int err;

    if (mc_proto_results_rep_encode(&rep, results, out, sizeof(out), &len) != 0) {
        cl_reply_status(ep,
                     &(struct mc_wire_hdr){.request_id = request_id, .type = MC_WIRE_READ_BATCH},
                     MC_ERR_INTERNAL);
    } else if ((err = mc_ucx_rpc_reply(ep, MC_WIRE_READ_BATCH_REPLY, request_id, out, len)) !=
               0) {
        /* the reader's items still end as their bytes land (or at their turns) */
        cl->st.peer_errors++;
        mc_debug("READ_BATCH answer not sent: %s", mc_strerror(err));
    }
}

static int wire_status(int status)
{
    /* the wire carries the statuses it knows */
    return mc_proto_status_is_valid(status, false) ? status : MC_ERR_UNAVAILABLE;
}

/* A hold on a batch goes: the last one answers it (while its endpoint and cluster are) and
 * frees it. */
static void readbatch_put(struct readbatch *b)
{
    if (--b->pending > 0)
        return;
    if (b->cl != NULL && b->ep != NULL && !b->cl->destroying)
        readbatch_reply(b->cl, b->ep, b->request_id, b->results, b->n);
    free(b);
}

/* One item of a READ_BATCH has its status. */
static void readbatch_item_done(struct readbatch *b, uint32_t idx, int status)
{
    b->results[idx] = wire_status(status);
    readbatch_put(b);
}

/* The record is read (or not): its bytes go to the reader, and the READ (or the batch item)
 * is answered. A record that fails its checksum is MC_ERR_CORRUPT to the reader, never
 * bytes. */
static void diskread_done(void *ctx, int status)
{
    struct diskread *r = ctx;
    struct cluster *cl = r->cl;
    struct readbatch *b = r->batch;
    struct mc_wire_hdr hdr = {.request_id = r->request_id, .type = MC_WIRE_READ};
    int err = status;
    bool sending = false;

    if (cl != NULL)
        diskread_unlink(cl, r);
    if (r->answered) {
        diskread_free(r); /* answered MC_ERR_TIMEOUT at its deadline: the disk let go now */
        if (cl != NULL && !cl->destroying)
            diskq_start(cl); /* a place is free */
        return;
    }
    if (cl == NULL || r->ep == NULL || cl->destroying) {
        err = MC_ERR_UNAVAILABLE; /* nobody to send to, or the cluster went meanwhile */
    } else if (err == 0) {
        err = reply_bulk(r->ep, r->xfer, r->bytes, r->len, r->head, diskread_sent, r);
        sending = err == 0; /* diskread_sent frees r at the send's final completion */
    }
    if (b != NULL)
        readbatch_item_done(b, r->idx, err);
    else if (cl != NULL && r->ep != NULL && !cl->destroying)
        cl_reply_status(r->ep, &hdr, err);
    if (!sending)
        diskread_free(r);
    if (cl != NULL && !cl->destroying)
        diskq_start(cl);
}

/* A queued read's end before it started (its deadline, an error, the cluster going). */
static void diskq_end(struct cluster *cl, struct diskread *r, int status)
{
    struct mc_wire_hdr hdr = {.request_id = r->request_id, .type = MC_WIRE_READ};

    if (r->batch != NULL)
        readbatch_item_done(r->batch, r->idx, status);
    else if (r->ep != NULL && cl != NULL && !cl->destroying)
        cl_reply_status(r->ep, &hdr, status);
    diskread_free(r);
}

/* Start the reads waiting for a place (disk_peer_reads), oldest first, while the disk
 * tier takes them. */
static void diskq_start(struct cluster *cl)
{
    while (cl->diskq != NULL) {
        struct diskread *r = cl->diskq;
        int err;

        if (diskread_buf(cl, r) != 0)
            return; /* later (another read's end, or its deadline) */
        cl->diskq = r->qnext;
        if (cl->diskq == NULL)
            cl->diskq_tail = NULL;
        cl->ndiskq--;
        r->qnext = NULL;
        r->prev = NULL;
        r->next = cl->diskreads;
        if (r->next != NULL)
            r->next->prev = r;
        cl->diskreads = r;
        err = agent_disk_read_image(cl->a, r->offset, r->version, r->bytes, r->len,
                                    diskread_done, r);
        if (err == 0)
            continue;
        diskread_unlink(cl, r);
        if (err == MC_ERR_BUSY) {
            diskread_buf_drop(cl, r); /* queued without its buffer again */
            r->qnext = cl->diskq; /* still no place: first in line again */
            cl->diskq = r;
            if (cl->diskq_tail == NULL)
                cl->diskq_tail = r;
            cl->ndiskq++;
            return;
        }
        diskq_end(cl, r, err);
    }
}

/* A read of a record in our disk segment started: 0, and its end is diskread_done's (which
 * answers the READ, or the batch's item when b != NULL); else why not (nothing started). */
static int read_disk(struct cluster *cl, struct mc_ucx_ep *ep, uint64_t request_id,
                     const struct mc_peer_read_req *req, struct readbatch *b, uint32_t idx)
{
    struct diskread *r;
    int err;

    if (req->len > cl->a->disk_seg->size)
        return MC_ERR_INVALID; /* no record is larger than the disk: refuse before malloc */
    r = malloc(sizeof(*r));
    if (r == NULL)
        return MC_ERR_NOMEM;
    *r = (struct diskread){.cl = cl, .ep = ep, .request_id = request_id, .xfer = req->xfer,
                           .len = req->len, .batch = b, .idx = idx,
                           /* the request names no deadline, and the reader's began
                            * earlier: half of ours leaves it time to try another replica
                            * (review D6) */
                           .deadline_ms = mc_agent_now_ms() + cl->a->cfg.op_timeout_ms / 2,
                           .offset = req->offset, .version = req->version,
                           .head = req->head};
    if (diskread_buf(cl, r) != 0) {
        free(r);
        return MC_ERR_NOMEM;
    }
    r->next = cl->diskreads;
    if (r->next != NULL)
        r->next->prev = r;
    cl->diskreads = r;
    err = agent_disk_read_image(cl->a, req->offset, req->version, r->bytes, req->len,
                                diskread_done, r);
    if (err != 0)
        diskread_unlink(cl, r);
    if (err == MC_ERR_BUSY && cl->ndiskq < DISKQ_PER_PLACE * cl->a->cfg.disk_peer_reads) {
        /* disk_peer_reads under way: it waits for one to end, without its buffer (its
         * deadline runs: diskreads_expire) */
        diskread_buf_drop(cl, r);
        r->next = r->prev = NULL;
        r->qnext = NULL;
        if (cl->diskq_tail != NULL)
            cl->diskq_tail->qnext = r;
        else
            cl->diskq = r;
        cl->diskq_tail = r;
        cl->ndiskq++;
        return 0;
    }
    if (err != 0)
        diskread_free(r);
    return err;
}

static bool is_disk_read(const struct cluster *cl, const struct mc_peer_read_req *req)
{
    return cl->a->disk_seg != NULL && req->seg == cl->a->disk_seg_id;
}

static void h_read(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                   const void *pl)
{
    struct mc_peer_read_req req;
    int err;

    if (mc_peer_read_req_decode(pl, hdr->payload_len, &req) != 0) {
        cl_reply_status(ep, hdr, MC_ERR_PROTO);
        return;
    }
    if (is_disk_read(cl, &req)) {
        err = read_disk(cl, ep, hdr->request_id, &req, NULL, 0);
        if (err != 0)
            cl_reply_status(ep, hdr, err);
        return;
    }
    cl_reply_status(ep, hdr, read_serve(cl, ep, &req));
}

/* READ_BATCH: every item's bytes are started (UCX queues and pipelines the sends), then one
 * answer carries a status per item -- at once, or, when some items are records of our disk,
 * once the last of those is read and its bytes are on their way. */
static void h_read_batch(struct cluster *cl, struct mc_ucx_ep *ep,
                         const struct mc_wire_hdr *hdr, const void *pl)
{
    struct mc_peer_read_req items[MC_PROTO_READ_BATCH_MAX];
    int results[MC_PROTO_READ_BATCH_MAX];
    struct readbatch *b = NULL;
    uint32_t n, i, ndisk = 0;
    int err;

    if (mc_peer_read_batch_decode(pl, hdr->payload_len, MC_PROTO_READ_BATCH_MAX, items, &n) != 0) {
        cl_reply_status(ep, hdr, MC_ERR_PROTO);
        return;
    }
    for (i = 0; i < n; i++)
        ndisk += is_disk_read(cl, &items[i]);
    if (ndisk > 0) {
        b = calloc(1, sizeof(*b) + n * sizeof(b->results[0]));
        if (b == NULL) {
            cl_reply_status(ep, hdr, MC_ERR_NOMEM);
            return;
        }
        b->cl = cl;
        b->ep = ep;
        b->request_id = hdr->request_id;
        b->n = n;
        b->pending = 1; /* ours, until every item is started */
    }
    for (i = 0; i < n; i++) {
        if (b != NULL && is_disk_read(cl, &items[i])) {
            b->pending++;
            err = read_disk(cl, ep, hdr->request_id, &items[i], b, i);
            if (err == 0)
                continue; /* its status comes from diskread_done */
            b->pending--;
        } else {
            err = read_serve(cl, ep, &items[i]);
        }
        results[i] = wire_status(err);
        if (b != NULL)
            b->results[i] = results[i];
    }
    if (b != NULL)
        readbatch_put(b);
    else
        readbatch_reply(cl, ep, hdr->request_id, results, n);
}

static void h_fence(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                    const void *pl);

/* --- the index of complete objects (holdidx.h) ------------------------------------------ */

static void reply_results(struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr, uint32_t n,
                          const int *results)
{
    struct mc_proto_batch_rep rep = {.n = n};
    size_t cap = (size_t)n * 4 + 64, len;
    uint8_t *out = malloc(cap);

    if (out == NULL) {
        cl_reply_status(ep, hdr, MC_ERR_NOMEM);
        return;
    }
    if (mc_proto_results_rep_encode(&rep, results, out, cap, &len) == 0)
        mc_ucx_rpc_reply(ep, (uint16_t)(hdr->type + 1), hdr->request_id, out, len);
    free(out);
}

/* PUBLISH from a writer: objects it published with a replica in our segments. An item
 * names our segment by the id of the reign it was made in (carry.c maps an earlier one's);
 * one carried over a change of master is told to the master we follow now before it is
 * answered (cl_publish_late: MC_ERR_BUSY meanwhile). */
static void h_publish(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                      const void *pl)
{
    struct mc_proto_publish_item *items = malloc(MC_PROTO_BATCH_MAX * sizeof(*items));
    int *results = malloc(MC_PROTO_BATCH_MAX * sizeof(*results));
    uint64_t now = mc_agent_now_ms();
    uint32_t n, i;

    if (items == NULL || results == NULL) {
        cl_reply_status(ep, hdr, MC_ERR_NOMEM);
        goto out;
    }
    if (mc_proto_publish_req_decode(pl, hdr->payload_len, MC_PROTO_BATCH_MAX, &n, items) != 0) {
        cl_reply_status(ep, hdr, MC_ERR_PROTO);
        goto out;
    }
    for (i = 0; i < n; i++) {
        const struct mc_proto_publish_item *it = &items[i];
        uint32_t local = 0;
        bool earlier = false;
        int busy;
        struct mc_seg *s = cl_publish_seg(cl, it, &local, &earlier);
        struct mc_holdidx_entry e = {
            .key = (const char *)it->key.p, .key_len = it->key.len, .offset = it->offset,
            .alloc_len = it->alloc_len, .size = it->size, .version = it->version,
            .flags = it->flags, .ttl_ms = it->ttl_ms};

        if (s == NULL) {
            results[i] = MC_ERR_NOT_FOUND;
        } else if (s->held == NULL || it->offset > s->size ||
                   it->alloc_len > s->size - it->offset) {
            results[i] = MC_ERR_INVALID;
        } else if (earlier && (busy = cl_publish_late_busy(cl, local, it)) != 0) {
            /* of an earlier reign, and we cannot tell the master we follow now yet (still
             * rejoining it, or too many under way): not indexed, so that nothing of it is
             * left here (our report refused, a tombstone) when the writer asks again */
            results[i] = busy;
        } else {
            uint64_t before = mc_holdidx_added(s->held);

            results[i] = mc_holdidx_add(s->held, &e, now);
            /* entries indexed, not tries: a repeat (a resent try) is not counted */
            cl->st.published_in += mc_holdidx_added(s->held) - before;
            /* of an earlier reign: our report to the master we follow now may miss it
             * (under way or over, or the segment already mounted as holding nothing, hence
             * not RESTORING): told on its own, once we are joined */
            if (results[i] == 0 && earlier)
                results[i] = cl_publish_late(cl, local, it);
        }
        results[i] = mc_proto_publish_result_wire(results[i]); /* 1: review M0 */
    }
    reply_results(ep, hdr, n, results);
out:
    free(items);
    free(results);
}

/* A DROP's reply held until the erases it started are durable: a reply is the master's
 * word that the record will never be reported again (docs/disk.md, "Frees and erases"). */
struct drop_reply {
    struct cluster *cl;
    struct mc_ucx_ep *ep;
    struct mc_wire_hdr hdr;
    uint32_t n;
    int results[];
};

static void drop_erased(void *ctx, int status)
{
    struct drop_reply *d = ctx;

    /* the master endpoint it came on, still ours: else the master sends the DROP again */
    if (status == 0 && !d->cl->destroying && d->cl->master == d->ep)
        reply_results(d->ep, &d->hdr, d->n, d->results);
    free(d);
}

/* DROP from the master: blocks of published objects it freed; or (retired) disk records
 * of versions it unpublished while a reader or a write still held them, which are marked
 * removed. Either is answered once what it wrote is durable. */
static void h_drop(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                   const void *pl)
{
    struct mc_proto_drop_item *items = malloc(MC_PROTO_BATCH_MAX * sizeof(*items));
    int *results = malloc(MC_PROTO_BATCH_MAX * sizeof(*results));
    uint64_t now = mc_agent_now_ms();
    uint32_t n, i;
    bool disk = false;

    if (items == NULL || results == NULL) {
        cl_reply_status(ep, hdr, MC_ERR_NOMEM);
        goto out;
    }
    if (mc_proto_drop_req_decode(pl, hdr->payload_len, MC_PROTO_BATCH_MAX, &n, items) != 0) {
        cl_reply_status(ep, hdr, MC_ERR_PROTO);
        goto out;
    }
    for (i = 0; i < n; i++) {
        struct mc_seg *s = agent_seg(cl->a, items[i].seg);

        results[i] = s == NULL ? MC_ERR_NOT_FOUND : 0;
        if ((items[i].flags & MC_PROTO_DROP_F_RETIRED) != 0) {
            /* a version unpublished while read or written: its record is marked removed,
             * kept and readable, as standalone (agent.c's local_drops); its later plain
             * DROP erases it. Only a disk's record is ever told so */
            if (s != NULL && s->kind == MC_SEG_DISK) {
                agent_disk_mark_removed(cl->a, items[i].offset, items[i].version);
                disk = true; /* counted as removed_marks (drops_in: entries removed) */
            }
        } else if (s != NULL && s->kind == MC_SEG_DISK) {
            agent_disk_drop(cl->a, items[i].offset, items[i].version); /* erased, too */
            cl->st.drops_in++;
            disk = true;
        } else if (s != NULL && s->held != NULL) {
            /* entries removed, not tries: a repeat finds nothing left to remove */
            if (mc_holdidx_drop(s->held, items[i].offset, items[i].version, now))
                cl->st.drops_in++;
        }
    }
    /* also when this try erased nothing itself: an earlier try's erase may still run */
    if (disk) {
        struct drop_reply *d = malloc(sizeof(*d) + n * sizeof(d->results[0]));

        if (d != NULL) {
            *d = (struct drop_reply){.cl = cl, .ep = ep, .hdr = *hdr, .n = n};
            memcpy(d->results, results, n * sizeof(d->results[0]));
            if (agent_disk_after_erases(cl->a, agent_disk_erase_mark(cl->a), drop_erased, d))
                goto out;
            free(d);
        }
        /* no memory: answered now, the window of a crash open for these records */
    }
    reply_results(ep, hdr, n, results);
out:
    free(items);
    free(results);
}

static void on_request(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                       const void *pl)
{
    struct cluster *cl = ctx;

    if (hdr->type == MC_WIRE_HELLO) {
        struct mc_proto_hello_req req;

        if (mc_proto_hello_req_decode(pl, hdr->payload_len, &req) != 0) {
            cl_reply_status(ep, hdr, MC_ERR_PROTO);
        } else if (!mc_proto_token_equal(cl->token, cl->token_len, &req.token)) {
            mc_warn("a peer's HELLO with a wrong cluster token refused");
            cl->st.refused++;
            cl_reply_status(ep, hdr, MC_ERR_DENIED);
            if (mc_ucx_ep_is_accepted(ep)) {
                mc_ucx_ep_set_user(ep, NULL); /* it loses what an earlier HELLO gave it */
                cl_inwrites_forget_ep(cl, ep);
                mc_ucx_ep_close(ep, false);   /* and we keep nothing for it */
            }
        } else {
            if (mc_ucx_ep_is_accepted(ep)) {
                mc_ucx_ep_set_user(ep, &cl->accepted_marker);
                mc_ucx_ep_set_session(ep, MC_UCX_SESSION_OF(hdr->request_id));
            }
            cl_reply_status(ep, hdr, 0);
        }
        return;
    }
    if (!ep_authed(cl, ep, hdr->request_id)) {
        cl->st.refused++;
        cl_reply_status(ep, hdr, MC_ERR_DENIED);
        mc_ucx_ep_set_user(ep, NULL);
        cl_inwrites_forget_ep(cl, ep);
        mc_ucx_ep_close(ep, false); /* an accepted one: forgotten, nothing kept for it */
        return;
    }
    if (hdr->type == MC_WIRE_READ_BATCH)
        h_read_batch(cl, ep, hdr, pl);
    else if (hdr->type == MC_WIRE_READ)
        h_read(cl, ep, hdr, pl);
    else if (hdr->type == MC_WIRE_FENCE && ep == cl->master)
        h_fence(cl, ep, hdr, pl);
    else if (hdr->type == MC_WIRE_COPY && ep == cl->master)
        cl_copy_handle(cl, ep, hdr, pl);
    else if (hdr->type == MC_WIRE_DROP && ep == cl->master) {
        if (!mc_fault_lose(&cl->a->fault, MC_FAULT_LOSE_DROP)) /* tests: lost on the way */
            h_drop(cl, ep, hdr, pl);
    } else if (hdr->type == MC_WIRE_PUBLISH) {
        if (mc_fault_lose(&cl->a->fault, MC_FAULT_NOMEM_PUBLISH))
            cl_reply_status(ep, hdr, MC_ERR_NOMEM); /* tests: as if short of memory */
        else if (!mc_fault_lose(&cl->a->fault, MC_FAULT_LOSE_PUBLISH))
            h_publish(cl, ep, hdr, pl);
    }
    else
        cl_reply_status(ep, hdr, MC_ERR_PROTO);
}

static bool is_fenced(const struct cluster *cl, uint32_t seg, uint32_t alloc, uint64_t version)
{
    const struct fenced *f;

    for (f = cl->fenced[alloc % FENCED_HASH]; f != NULL; f = f->next) {
        if (f->seg == seg && f->alloc == alloc && f->version == version)
            return true;
    }
    return false;
}

/* FENCE from the master: the writer of these blocks was declared dead. A block with a write
 * landing now is BUSY (asked again later); any other is fenced from now on: a write of that
 * put arriving later is refused, so the master may reuse the block once we said 0. */
static void h_fence(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                    const void *pl)
{
    struct mc_agent *a = cl->a;
    struct mc_proto_fence_item *items = malloc(MC_PROTO_BATCH_MAX * sizeof(*items));
    int *results = malloc(MC_PROTO_BATCH_MAX * sizeof(*results));
    struct mc_proto_batch_rep rep = {0};
    struct mc_proto_fence_req req;
    uint8_t *out = NULL;
    size_t len;
    uint32_t i;

    if (items == NULL || results == NULL ||
        (out = malloc(MC_PROTO_BATCH_MAX * 8 + 64)) == NULL) {
        cl_reply_status(ep, hdr, MC_ERR_NOMEM);
        goto out;
    }
    if (mc_proto_fence_req_decode(pl, hdr->payload_len, MC_PROTO_BATCH_MAX, &req, items) != 0) {
        cl_reply_status(ep, hdr, MC_ERR_PROTO);
        goto out;
    }
    for (i = 0; i < req.n; i++) {
        const struct mc_proto_fence_item *it = &items[i];
        struct inwrite *w;
        struct fenced *f;

        results[i] = 0;
        if (agent_seg(a, it->seg) == NULL) {
            results[i] = MC_ERR_NOT_FOUND;
            continue;
        }
        for (w = cl->inwrites; w != NULL; w = w->next) {
            if (w->seg == it->seg && w->alloc == it->alloc && w->version == it->version)
                results[i] = MC_ERR_BUSY;
        }
        if (cl_copy_disk_busy(cl, it))
            results[i] = MC_ERR_BUSY; /* a disk write of that copy still reads its source */
        if (results[i] != 0 || is_fenced(cl, it->seg, it->alloc, it->version))
            continue;
        f = malloc(sizeof(*f));
        if (f == NULL) {
            results[i] = MC_ERR_NOMEM;
            continue;
        }
        f->seg = it->seg;
        f->alloc = it->alloc;
        f->version = it->version;
        /* a write of a dead writer cannot start later than its op deadline, nor run past
         * the hard deadline on top of it */
        f->until_ms = mc_agent_now_ms() + 2 * (a->cfg.op_timeout_ms + a->cfg.peer_hard_deadline_ms);
        f->next = cl->fenced[it->alloc % FENCED_HASH];
        cl->fenced[it->alloc % FENCED_HASH] = f;
    }
    rep.n = req.n;
    if (mc_proto_results_rep_encode(&rep, results, out, MC_PROTO_BATCH_MAX * 8 + 64, &len) == 0)
        mc_ucx_rpc_reply(ep, MC_WIRE_FENCE_REPLY, hdr->request_id, out, len);
out:
    free(items);
    free(results);
    free(out);
}

static void fenced_expire(struct cluster *cl, uint64_t now)
{
    uint32_t i;

    for (i = 0; i < FENCED_HASH; i++) {
        struct fenced **pp = &cl->fenced[i], *f;

        while ((f = *pp) != NULL) {
            if (now >= f->until_ms) {
                *pp = f->next;
                free(f);
            } else {
                pp = &f->next;
            }
        }
    }
}

/* Where a peer's WRITE lands, or NULL: refused. */
static void *write_dest(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                        const void *hpl, size_t len, void **op_p)
{
    struct mc_agent *a = cl->a;

    if (ep_authed(cl, ep, hdr->request_id)) {
        struct mc_peer_write_hdr h;
        struct inwrite *w;
        uint8_t *dst;

        struct mc_seg *s;
        uint8_t *staged = NULL;
        uint64_t total; /* the bytes and the tail the header carries (peer_proto.h) */

        if (mc_peer_write_hdr_decode(hpl, hdr->payload_len, &h) != 0 || h.len != len ||
            (s = agent_seg(a, h.seg)) == NULL || h.offset > s->size ||
            (total = h.len + h.tail.len) > s->size - h.offset ||
            is_fenced(cl, h.seg, h.alloc, h.version)) {
            cl->st.refused++;
            return NULL;
        }
        if ((dst = seg_span(a, h.seg, h.offset, total)) != NULL) {
            if (h.tail.len != 0)
                memcpy(dst + h.len, h.tail.p, h.tail.len);
        } else {
            enum mc_ucx_mem_type mt = MC_UCX_MEM_HOST;

            /* a GPU segment UCX moves: straight into it, unless the bytes came eagerly
             * (copied by the CPU: host memory only) */
            dst = cl_gpu_direct_span(cl, h.seg, h.offset, h.len, &mt);
            if (dst != NULL && mt != MC_UCX_MEM_HOST && mc_ucx_bulk_eager(cl->u))
                dst = NULL;
            if (dst != NULL) {
                mc_ucx_bulk_dest_mem(cl->u, mt);
            } else {
                /* no window (GPU): land in host memory, copy in when complete (bulk_done) */
                dst = staged = malloc(h.len != 0 ? h.len : 1);
                if (staged == NULL)
                    return NULL;
            }
            if (h.tail.len != 0 &&
                s->ops->write(s, h.offset + h.len, h.tail.p, h.tail.len) != 0) {
                free(staged);
                cl->st.refused++;
                return NULL;
            }
        }
        w = calloc(1, sizeof(*w));
        if (w == NULL) {
            free(staged);
            return NULL;
        }
        w->staged = staged;
        w->direct = staged == NULL && s->kind == MC_SEG_GPU;
        /* a block freed and handed out again: what the index had there is gone */
        if (s->held != NULL)
            (void)mc_holdidx_overwrite(s->held, h.offset, total, h.version);
        w->what = OP_INWRITE;
        w->cl = cl;
        w->ep = ep;
        w->request_id = hdr->request_id;
        w->seg = h.seg;
        w->alloc = h.alloc;
        w->version = h.version;
        w->offset = h.offset;
        w->len = h.len;
        w->next = cl->inwrites;
        if (w->next != NULL)
            w->next->prev = w;
        cl->inwrites = w;
        *op_p = w;
        return dst;
    }
    cl->st.refused++;
    return NULL;
}

static void *bulk_dest(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                       const void *hpl, size_t len, void **op_p)
{
    struct cluster *cl = ctx;
    void *dst;

    if (hdr->type == MC_WIRE_READ_REPLY)
        return cl_read_landing(cl, ep, hdr->request_id, hpl, hdr->payload_len, len,
                               op_p); /* a read of ours */
    if (hdr->type != MC_WIRE_WRITE) {
        cl->st.refused++;
        return NULL;
    }
    dst = write_dest(cl, ep, hdr, hpl, len, op_p);
    /* a refused rendezvous fails the writer's send; bytes that came eagerly have left it
     * for good, so the writer learns the refusal from the answer it waits for */
    if (dst == NULL && mc_ucx_bulk_eager(cl->u))
        cl_reply_status(ep, hdr, MC_ERR_CANCELED);
    return dst;
}

static void bulk_done(void *ctx, void *op, int status)
{
    struct cluster *cl = ctx;

    if (*(enum op_what *)op == OP_READ) {
        cl_read_landed(cl, op, status);
        return;
    }
    {
        struct inwrite *w = op;

        if (w->prev != NULL)
            w->prev->next = w->next;
        else
            cl->inwrites = w->next;
        if (w->next != NULL)
            w->next->prev = w->prev;
        if (w->staged != NULL) {
            struct mc_seg *s = agent_seg(cl->a, w->seg);

            /* complete in host memory: now into the segment, before the writer hears */
            if (status == 0 && (s == NULL || s->ops->write(s, w->offset, w->staged, w->len) != 0))
                status = MC_ERR_IO;
            if (status == 0)
                cl->st.staged_in++;
            free(w->staged);
        } else if (w->direct && status == 0) {
            cl->st.direct_in++;
        }
        if (w->ep != NULL)
            cl_reply_status(w->ep, &(struct mc_wire_hdr){.request_id = w->request_id,
                                                      .type = MC_WIRE_WRITE},
                         status);
        if (status == 0) {
            cl->st.writes_in++;
            cl->st.write_bytes_in += w->len;
        } else {
            /* a torn write: the writer will revoke (or be declared dead); no byte of it
             * moves any more, so the master may reuse the block once told */
            fence_add(cl, w->seg, w->alloc, w->version);
        }
        free(w);
    }
}

struct fence_call {
    struct cluster *cl;
    uint32_t n;
    struct fence *items[64];
};

static void fence_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                       size_t len)
{
    struct fence_call *fc = ctx;
    struct cluster *cl = fc->cl;
    struct mc_proto_batch_rep rep;
    int results[64];
    uint32_t i;

    (void)hdr;
    cl->fence_busy = false;
    if (status == 0 && (mc_proto_results_rep_decode(pl, len, fc->n, &rep, results) != 0 ||
                        rep.status != 0 || rep.n != fc->n))
        status = MC_ERR_PROTO;
    for (i = 0; i < fc->n; i++) {
        struct fence *f = fc->items[i];

        /* a put still live (BUSY) is asked again later: its writer may still revoke it */
        if (status == 0 && results[i] != MC_ERR_BUSY) {
            free(f);
            continue;
        }
        if (mc_agent_now_ms() - f->first_ms > 15u * 60u * 1000u) {
            free(f); /* past the master's put_release timeout: it freed the block itself */
            continue;
        }
        f->next = cl->fences;
        cl->fences = f;
    }
    free(fc);
}

static void fence_send(struct cluster *cl)
{
    struct mc_proto_fence_item items[64];
    struct fence_call *fc;
    struct mc_proto_fence_req req;
    uint8_t buf[64 * 24 + 16];
    size_t len;

    if (cl->fences == NULL || cl->fence_busy || (fc = malloc(sizeof(*fc))) == NULL)
        return;
    fc->cl = cl;
    fc->n = 0;
    while (cl->fences != NULL && fc->n < 64) {
        fc->items[fc->n] = cl->fences;
        items[fc->n] = cl->fences->item;
        cl->fences = cl->fences->next;
        fc->n++;
    }
    req.n = fc->n;
    if (mc_proto_fence_req_encode(&req, items, buf, sizeof(buf), &len) == 0 &&
        cl_master_call(cl, MC_WIRE_FENCE, buf, len, mc_ucx_now_ms() + INFO_TIMEOUT_MS,
                    fence_done, fc) == 0) {
        cl->fence_busy = true;
        return;
    }
    fence_done(fc, MC_ERR_UNAVAILABLE, NULL, NULL, 0);
}


/* A peer's read of our disk past its deadline (a slow disk): answered MC_ERR_TIMEOUT now
 * (the READ, or its batch item: the batch's other items are not held hostage), as a slow
 * owner's read times out at the reader; the reader tries another replica. The read itself
 * goes on: its buffer is the store's destination until diskread_done frees it. */
static void diskreads_expire(struct cluster *cl, uint64_t now)
{
    struct diskread **pp = &cl->diskq, *last = NULL;

    while (*pp != NULL) {
        struct diskread *r = *pp;

        if (now < r->deadline_ms) {
            last = r;
            pp = &r->qnext;
            continue;
        }
        *pp = r->qnext;
        cl->ndiskq--;
        cl->st.disk_read_timeouts++;
        diskq_end(cl, r, MC_ERR_TIMEOUT); /* never started: nothing holds its memory */
    }
    cl->diskq_tail = last;
    for (struct diskread *r = cl->diskreads; r != NULL; r = r->next) {
        struct mc_wire_hdr hdr = {.request_id = r->request_id, .type = MC_WIRE_READ};
        struct readbatch *b = r->batch;

        if (r->answered || now < r->deadline_ms)
            continue;
        r->answered = true;
        r->batch = NULL;
        cl->st.disk_read_timeouts++;
        if (b != NULL)
            readbatch_item_done(b, r->idx, MC_ERR_TIMEOUT);
        else if (r->ep != NULL && !cl->destroying)
            cl_reply_status(r->ep, &hdr, MC_ERR_TIMEOUT);
    }
}

void cl_owner_tick(struct cluster *cl, uint64_t now)
{
    diskreads_expire(cl, now);
    if (now >= cl->next_fence_ms) {
        cl->next_fence_ms = now + FENCE_RETRY_MS;
        fence_send(cl);
        fenced_expire(cl, now);
        cl_late_tick(cl, now);
        for (uint32_t i = 0; i < cl->a->ntenants; i++) {
            if (cl->a->ten[i].seg != NULL && cl->a->ten[i].seg->held != NULL)
                mc_holdidx_expire(cl->a->ten[i].seg->held, now);
        }
    }
}

void cl_fences_forget(struct cluster *cl)
{
    while (cl->fences != NULL) {
        struct fence *f = cl->fences;

        cl->fences = f->next;
        free(f);
    }
}

void cl_owner_register(struct cluster *cl)
{
    mc_ucx_rpc_register(cl->u, on_request, cl);
    mc_ucx_bulk_register(cl->u, bulk_dest, bulk_done, cl);
}

void cl_owner_destroy(struct cluster *cl)
{
    /* queued reads never started: ended unanswered (the cluster goes) */
    while (cl->diskq != NULL) {
        struct diskread *r = cl->diskq;

        cl->diskq = r->qnext;
        diskq_end(cl, r, MC_ERR_UNAVAILABLE);
    }
    cl->diskq_tail = NULL;
    cl->ndiskq = 0;
    /* reads of the disk still under way end later (agent_disk_destroy): orphaned here */
    while (cl->diskreads != NULL) {
        struct diskread *r = cl->diskreads;

        diskread_unlink(cl, r);
        r->cl = NULL;
        if (r->batch != NULL)
            r->batch->cl = NULL;
    }
    while (cl->ndbuf > 0)
        free(cl->dbuf[--cl->ndbuf]);
    cl->dbuf_bytes = 0;
    cl_copy_destroy(cl);
    cl_fences_forget(cl);
    fenced_expire(cl, UINT64_MAX);
    cl_late_destroy(cl);
}
