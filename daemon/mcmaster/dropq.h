/*
 * DROPs (daemon/proto/hold_proto.h) delivered until their owner answers: the master tells
 * each owner which blocks of published objects it freed, so that the owner's index never
 * reports them to a later master. A DROP lost on the way (the owner briefly unreachable,
 * its link being rejoined, an answer that never came) is sent again, to whoever owns the
 * segment then, with a backoff (daemon/common/resend.h), until it is answered, the segment
 * is gone (its owner died: nothing of it will be reported) or DROPQ_GIVE_UP_MS passed.
 * Repeats are harmless: an owner drops a block only of the version named.
 */
#ifndef MC_MCMASTER_DROPQ_H
#define MC_MCMASTER_DROPQ_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/proto/hold_proto.h"
#include "ucx_backend/ucx.h"

#define DROPQ_TIMEOUT_MS 3000u     /* a try without an answer by then has failed */
#define DROPQ_BACKOFF_MIN_MS 200u
#define DROPQ_BACKOFF_MAX_MS 2000u
#define DROPQ_GIVE_UP_MS 120000u   /* past node_ttl_ms: an owner that long silent is dead */
#define DROPQ_MAX 1024u            /* batches held (each up to MC_PROTO_BATCH_MAX blocks) */

/* Where segment seg's owner is now: 0 and *ep_p, its authenticated endpoint; 1: the
 * owner lives but has no endpoint now (rejoining): kept for later; anything else: the
 * segment is gone, its drops are forgotten. */
typedef int (*mc_dropq_route_fn)(void *ctx, uint32_t seg, struct mc_ucx_ep **ep_p);

struct mc_dropq;

struct mc_dropq_stats {
    uint64_t sent;      /* tries sent (batches) */
    uint64_t retried;   /* of them, tries after the first */
    uint64_t given_up;  /* batches given up on (DROPQ_GIVE_UP_MS), or not held (full) */
    uint64_t queued;    /* batches held now */
    uint64_t lost;      /* blocks whose DROP could not be held (sent once, unqueued) */
};

int mc_dropq_create(mc_dropq_route_fn route, void *ctx, struct mc_dropq **q_p);
/* Told (with the route's ctx) the blocks of every try its owner answered: an owner
 * answers a DROP of a disk block once its erase is durable. */
typedef void (*mc_dropq_acked_fn)(void *ctx, const struct mc_proto_drop_item *items, size_t n);
/* Told the segment of a try that brought no answer (timed out, or its endpoint failed). */
typedef void (*mc_dropq_silent_fn)(void *ctx, uint32_t seg);
void mc_dropq_on_acked(struct mc_dropq *q, mc_dropq_acked_fn acked, mc_dropq_silent_fn silent);
/* Every try still out must have ended (the UCX worker destroyed) before. */
void mc_dropq_destroy(struct mc_dropq *q);

/* n (<= MC_PROTO_BATCH_MAX) freed blocks: each owner is sent its own, at once. */
void mc_dropq_send(struct mc_dropq *q, const struct mc_proto_drop_item *items, size_t n,
                   uint64_t now_ms);
/* From the tick: the batches whose next try is due. */
void mc_dropq_tick(struct mc_dropq *q, uint64_t now_ms);
/* A new directory (a new reign): what is queued names segments of the old one: forgotten,
 * and tries still out are settled whatever their end. */
void mc_dropq_reset(struct mc_dropq *q);
/* From now on tries that end are not sent again (the server is going). */
void mc_dropq_closing(struct mc_dropq *q);
void mc_dropq_stats(const struct mc_dropq *q, struct mc_dropq_stats *st);

#endif /* MC_MCMASTER_DROPQ_H */
