/*
 * FENCE and COPY calls to owners (calls.h). Every answer is decoded strictly: a malformed
 * one counts as MC_ERR_PROTO (the fence is asked again by the release timeout, the copy is
 * reported failed).
 */
#include "daemon/mcmaster/calls.h"

#include <stdbool.h>
#include <stdlib.h>

#include <mc/mc_status.h>

#include "daemon/common/log.h"
#include "daemon/master/exec.h"

#define FENCE_BATCH 256u
#define FENCE_TIMEOUT_MS 3000u
#define COPY_BATCH 16u
/* The owner's own write ends by op_timeout_ms (and a stalled target is cut off after the
 * peer hard deadline): past this, the copy counts as failed and its target gets fenced. */
#define COPY_TIMEOUT_MS 30000u

void mc_calls_init(struct mc_calls *c, struct mc_master *const *m, mc_calls_ep_fn ep_of,
                   void *ctx)
{
    c->m = m;
    c->ep_of = ep_of;
    c->ctx = ctx;
    c->nfence_retry = 0;
}

void mc_calls_reset(struct mc_calls *c)
{
    c->nfence_retry = 0;
}

/* The node that owns segment seg now; -1 when it is gone. Through the executor, as every
 * question this front end asks on the directory's behalf. */
static int64_t seg_node(struct mc_calls *c, uint32_t seg)
{
    struct mc_master_req x = {.op = MC_MASTER_OP_SEG_INFO, .u.seg_info.seg = seg};

    if (mc_master_exec(*c->m, &x) != 0)
        return -1;
    return x.u.seg_info.info.node;
}

static void copy_report(struct mc_calls *c, uint64_t id, int status)
{
    struct mc_master_req x = {.op = MC_MASTER_OP_COPY_DONE,
                              .u.copy_done = {.id = id, .status = status}};

    (void)mc_master_exec(*c->m, &x);
}

/* --- fencing the blocks of dead writers -------------------------------------------------- */

/* One FENCE call to an owner: the blocks it names. */
struct fence_call {
    struct mc_calls *c;
    uint32_t n;
    struct mc_master_fence items[FENCE_BATCH];
};

static void fence_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                       size_t len)
{
    struct fence_call *fc = ctx;
    struct mc_calls *c = fc->c;
    struct mc_proto_batch_rep rep;
    int results[FENCE_BATCH];
    uint32_t i;

    (void)hdr;
    if (status == 0 && (mc_proto_results_rep_decode(pl, len, fc->n, &rep, results) != 0 ||
                        rep.status != 0 || rep.n != fc->n))
        status = MC_ERR_PROTO;
    for (i = 0; i < fc->n && status == 0; i++) {
        const struct mc_master_fence *f = &fc->items[i];

        if (results[i] == 0)
            (void)mc_master_fence_ack(*c->m, f->seg, f->alloc, f->version);
        else if (results[i] == MC_ERR_BUSY && c->nfence_retry < MC_MASTER_FENCE_QUEUE)
            c->fence_retry[c->nfence_retry++] = *f; /* a write still landing: ask again */
    }
    /* otherwise (owner unreachable, ...) the release timeout frees them */
    free(fc);
}

void mc_calls_fences_send(struct mc_calls *c)
{
    struct mc_master_fence f[FENCE_BATCH];
    struct mc_proto_fence_item items[FENCE_BATCH];
    int64_t node[FENCE_BATCH];
    bool sent[FENCE_BATCH] = {false};
    size_t n = 0, i, j;

    while (n < FENCE_BATCH && c->nfence_retry > 0)
        f[n++] = c->fence_retry[--c->nfence_retry];
    n += mc_master_fences_take(*c->m, f + n, FENCE_BATCH - n);
    for (i = 0; i < n; i++)
        node[i] = seg_node(c, f[i].seg);
    /* one call per owner, naming every block of its segments */
    for (i = 0; i < n; i++) {
        struct mc_proto_fence_req req = {0};
        struct mc_ucx_ep *ep;
        struct fence_call *fc;
        size_t len;

        if (sent[i] || node[i] < 0)
            continue;
        ep = c->ep_of(c->ctx, (uint32_t)node[i]);
        if (ep == NULL)
            continue; /* no endpoint: the owner is gone, and its segment with it */
        fc = malloc(sizeof(*fc));
        if (fc == NULL)
            return;
        fc->c = c;
        fc->n = 0;
        for (j = i; j < n; j++) {
            if (sent[j] || node[j] != node[i])
                continue;
            sent[j] = true;
            fc->items[fc->n] = f[j];
            items[fc->n] = (struct mc_proto_fence_item){
                .seg = f[j].seg, .alloc = f[j].alloc, .version = f[j].version};
            fc->n++;
        }
        req.n = fc->n;
        if (mc_proto_fence_req_encode(&req, items, c->out, sizeof(c->out), &len) != 0 ||
            mc_ucx_rpc_call(ep, MC_WIRE_FENCE, c->out, len, mc_ucx_now_ms() + FENCE_TIMEOUT_MS,
                            fence_done, fc, NULL) != 0)
            free(fc);
    }
}

/* --- copies: the source's owner writes the bytes to the target --------------------------- */

struct copy_call {
    struct mc_calls *c;
    uint64_t id;
};

static void copy_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                      size_t len)
{
    struct copy_call *cc = ctx;
    struct mc_proto_status_rep rep;

    (void)hdr;
    if (status == 0)
        status = mc_proto_status_rep_decode(pl, len, &rep) == 0 ? rep.status : MC_ERR_PROTO;
    if (status != 0)
        mc_debug("copy %llu failed: %s", (unsigned long long)cc->id, mc_strerror(status));
    copy_report(cc->c, cc->id, status);
    free(cc);
}

void mc_calls_copies_send(struct mc_calls *c)
{
    struct mc_master_copy cp[COPY_BATCH];
    size_t n = mc_master_copies_take(*c->m, cp, COPY_BATCH), i;

    for (i = 0; i < n; i++) {
        struct mc_proto_copy_req req = {
            .id = cp[i].id, .version = cp[i].version,
            .src_seg = cp[i].src.seg, .src_alloc = cp[i].src.alloc,
            .src_offset = cp[i].src.offset, .len = cp[i].len,
            .dst_node = cp[i].dst.node, .dst_seg = cp[i].dst.seg,
            .dst_alloc = cp[i].dst.alloc, .dst_offset = cp[i].dst.offset,
            .key = {(const uint8_t *)cp[i].key, cp[i].key_len}};
        struct mc_ucx_ep *ep = c->ep_of(c->ctx, cp[i].src.node);
        struct copy_call *cc = malloc(sizeof(*cc));
        size_t len;

        if (ep == NULL || cc == NULL ||
            mc_proto_copy_req_encode(&req, c->out, sizeof(c->out), &len) != 0) {
            free(cc);
            copy_report(c, cp[i].id, MC_ERR_UNAVAILABLE);
            continue;
        }
        cc->c = c;
        cc->id = cp[i].id;
        if (mc_ucx_rpc_call(ep, MC_WIRE_COPY, c->out, len, mc_ucx_now_ms() + COPY_TIMEOUT_MS,
                            copy_done, cc, NULL) != 0) {
            free(cc);
            copy_report(c, cp[i].id, MC_ERR_UNAVAILABLE);
        }
    }
}
