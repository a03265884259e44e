/*
 * The DROP delivery of dropq.h: every try is a resend item holding the blocks it carries
 * (struct mc_proto_drop_item[]); a failed try waits, and its blocks are routed afresh when
 * it is due (their owner may have a new endpoint by then).
 */
#include "daemon/mcmaster/dropq.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/common/log.h"
#include "daemon/common/resend.h"
#include "daemon/proto/master_proto.h"
#include "daemon/proto/proto_base.h"
#include "daemon/proto/rpc.h"

struct mc_dropq {
    struct mc_resend rq;
    mc_dropq_route_fn route;
    mc_dropq_acked_fn acked;
    mc_dropq_silent_fn silent;
    void *ctx;
    uint64_t gen;     /* bumped by a reset: tries of an older one are settled */
    bool closing;
    uint64_t sent;
    uint64_t lost;    /* blocks not held: the queue was full */
    struct mc_ucx_ep *eps[MC_PROTO_BATCH_MAX];
    int st[MC_PROTO_BATCH_MAX];
    struct mc_proto_drop_item group[MC_PROTO_BATCH_MAX];
    struct mc_proto_drop_item again[MC_PROTO_BATCH_MAX];
    uint8_t out[MC_PROTO_PAYLOAD_MAX];
};

int mc_dropq_create(mc_dropq_route_fn route, void *ctx, struct mc_dropq **q_p)
{
    struct mc_dropq *q = calloc(1, sizeof(*q));

    if (q == NULL)
        return MC_ERR_NOMEM;
    mc_resend_init(&q->rq, DROPQ_MAX, DROPQ_BACKOFF_MIN_MS, DROPQ_BACKOFF_MAX_MS,
                   DROPQ_GIVE_UP_MS);
    q->route = route;
    q->ctx = ctx;
    *q_p = q;
    return 0;
}

void mc_dropq_on_acked(struct mc_dropq *q, mc_dropq_acked_fn acked, mc_dropq_silent_fn silent)
{
    q->acked = acked;
    q->silent = silent;
}

void mc_dropq_destroy(struct mc_dropq *q)
{
    if (q == NULL)
        return;
    mc_resend_clear(&q->rq);
    free(q);
}

static void drop_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                      size_t len)
{
    struct mc_resend_item *it = ctx;
    struct mc_dropq *q = it->ctx;
    struct mc_proto_batch_rep rep;
    bool answered = status == 0; /* else the try brought no answer (the transport's) */

    (void)hdr;
    /* one status per block: what the owner said of each settles it (a segment not its own
     * is not its to drop); only a try that brought no answer is made again */
    if (status == 0) {
        if (mc_proto_results_rep_decode(pl, len, MC_PROTO_BATCH_MAX, &rep, q->st) != 0)
            status = MC_ERR_PROTO;
        else
            status = rep.status;
    }
    if (status == 0 && q->acked != NULL)
        q->acked(q->ctx, (const struct mc_proto_drop_item *)it->data,
                 it->len / sizeof(struct mc_proto_drop_item));
    if (!answered && q->silent != NULL &&
        it->len >= sizeof(struct mc_proto_drop_item) && it->tag == q->gen && !q->closing)
        q->silent(q->ctx, ((const struct mc_proto_drop_item *)it->data)->seg);
    if (status == 0 || status == MC_ERR_PROTO || status == MC_ERR_INVALID || q->closing ||
        it->tag != q->gen) {
        mc_resend_done(&q->rq, it);
        return;
    }
    mc_debug("DROP of %zu blocks, try %u: %s", it->len / sizeof(struct mc_proto_drop_item),
             it->tries, mc_strerror(status));
    if (!mc_resend_failed(&q->rq, it, mc_ucx_now_ms()))
        mc_warn("DROP of %zu blocks given up after %u tries",
                it->len / sizeof(struct mc_proto_drop_item), it->tries);
}

/* The end of a DROP tried once, unqueued (the queue was full). */
static void drop_once_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                           size_t len)
{
    (void)ctx;
    (void)hdr;
    (void)pl;
    (void)len;
    if (status != 0)
        mc_debug("DROP to an owner (unqueued): %s", mc_strerror(status));
}

static void dispatch(struct mc_dropq *q, struct mc_ucx_ep *ep, uint32_t k,
                     const struct mc_resend_item *from, uint64_t now)
{
    struct mc_resend_item *it;
    size_t len;

    if (mc_proto_drop_req_encode(k, q->group, q->out, sizeof(q->out), &len) != 0) {
        mc_warn("DROP of %u blocks cannot be encoded", k);
        return;
    }
    q->sent++;
    it = mc_resend_new(&q->rq, q, 0, 0, q->gen, q->group, k * sizeof(q->group[0]), from, now);
    if (it == NULL) {
        q->lost += k;
        if (mc_ucx_rpc_call(ep, MC_WIRE_DROP, q->out, len, now + DROPQ_TIMEOUT_MS,
                            drop_once_done, q, NULL) != 0)
            mc_warn("DROP of %u blocks not sent", k);
        return;
    }
    if (mc_ucx_rpc_call(ep, MC_WIRE_DROP, q->out, len, now + DROPQ_TIMEOUT_MS, drop_done, it,
                        NULL) != 0)
        (void)mc_resend_failed(&q->rq, it, now);
}

static void send_from(struct mc_dropq *q, const struct mc_proto_drop_item *items, size_t n,
                      const struct mc_resend_item *from, uint64_t now)
{
    struct mc_resend_item *it;
    uint32_t k;
    size_t i, j;

    if (n > MC_PROTO_BATCH_MAX)
        n = MC_PROTO_BATCH_MAX;
    for (i = 0; i < n; i++) {
        q->eps[i] = NULL;
        q->st[i] = q->route(q->ctx, items[i].seg, &q->eps[i]);
    }
    /* one DROP per owner and kind (a retired DROP's flags are the message's) */
    for (i = 0; i < n; i++) {
        struct mc_ucx_ep *ep = q->eps[i];

        if (q->st[i] != 0 || ep == NULL)
            continue;
        for (j = i, k = 0; j < n; j++) {
            if (q->st[j] == 0 && q->eps[j] == ep && items[j].flags == items[i].flags) {
                q->group[k++] = items[j];
                q->eps[j] = NULL;
            }
        }
        dispatch(q, ep, k, from, now);
    }
    /* owners alive without an endpoint now: later */
    for (i = 0, k = 0; i < n; i++)
        if (q->st[i] == 1)
            q->group[k++] = items[i];
    if (k > 0) {
        it = mc_resend_new(&q->rq, q, 0, 0, q->gen, q->group, k * sizeof(q->group[0]), from,
                           now);
        if (it == NULL)
            q->lost += k;
        else
            (void)mc_resend_failed(&q->rq, it, now);
    }
}

void mc_dropq_send(struct mc_dropq *q, const struct mc_proto_drop_item *items, size_t n,
                   uint64_t now_ms)
{
    send_from(q, items, n, NULL, now_ms);
}

void mc_dropq_tick(struct mc_dropq *q, uint64_t now_ms)
{
    struct mc_resend_item *it;

    while (!q->closing && (it = mc_resend_next(&q->rq, now_ms)) != NULL) {
        struct mc_resend_item from = *it; /* the first try's time and the count go on */
        size_t n = it->len / sizeof(q->again[0]);

        memcpy(q->again, it->data, n * sizeof(q->again[0]));
        mc_resend_done(&q->rq, it);
        send_from(q, q->again, n, &from, now_ms);
    }
}

void mc_dropq_reset(struct mc_dropq *q)
{
    q->gen++;
    mc_resend_clear_waiting(&q->rq);
}

void mc_dropq_closing(struct mc_dropq *q)
{
    q->closing = true;
}

void mc_dropq_stats(const struct mc_dropq *q, struct mc_dropq_stats *st)
{
    *st = (struct mc_dropq_stats){.sent = q->sent, .retried = q->rq.retried,
                                  .given_up = q->rq.given_up + q->rq.full,
                                  .queued = q->rq.n, .lost = q->lost};
}
