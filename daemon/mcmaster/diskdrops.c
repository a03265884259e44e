/*
 * DROPs to the owners and the memory of unanswered disk DROPs (diskdrops.h).
 */
#include "daemon/mcmaster/diskdrops.h"

#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

static void held_send(struct mc_diskdrops_held *h)
{
    mc_ucx_rpc_reply(h->ep, h->type, h->id, h->reply, h->len);
}

static void held_free(struct mc_diskdrops_held *h)
{
    free(h->wait);
    free(h->reply);
    free(h);
}

/* The held replies waiting for one of items: those answered; a reply with nothing left
 * to wait for is sent. */
static void held_acked(struct mc_diskdrops *d, const struct mc_proto_drop_item *items, size_t n)
{
    struct mc_diskdrops_held **pp = &d->held;

    while (*pp != NULL) {
        struct mc_diskdrops_held *h = *pp;

        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j < h->nwait; j++) {
                if (h->wait[j].seg == items[i].seg && h->wait[j].offset == items[i].offset &&
                    h->wait[j].version == items[i].version) {
                    h->wait[j--] = h->wait[--h->nwait];
                }
            }
        }
        if (h->nwait == 0) {
            *pp = h->next;
            d->held_answered++;
            held_send(h);
            held_free(h);
        } else {
            pp = &h->next;
        }
    }
}

/* dropq.h's acked: an owner's answer to a DROP of a disk block says its erase is durable.
 * Only disk blocks count: a version freed from memory and from a disk at once must stay
 * remembered until the disk's owner answered, whatever the memory's owner answered first
 * (a DROP of a segment gone meanwhile keeps its version remembered: it only refuses). */
static void acked(void *ctx, const struct mc_proto_drop_item *items, size_t n)
{
    struct mc_diskdrops *d = ctx;

    for (size_t i = 0; i < n; i++) {
        /* a retired DROP's answer says the record is marked removed, not freed: its
         * version stays until the FREED DROP made when the block is freed is answered */
        if ((items[i].flags & MC_PROTO_DROP_F_RETIRED) == 0 && d->is_disk(d->ctx, items[i].seg))
            mc_dropmemo_del(d->memo, items[i].version);
    }
    if (d->held != NULL)
        held_acked(d, items, n);
}

static void silent(void *ctx, uint32_t seg)
{
    struct mc_diskdrops *d = ctx;

    d->silent(d->ctx, seg);
}

static int route(void *ctx, uint32_t seg, struct mc_ucx_ep **ep_p)
{
    struct mc_diskdrops *d = ctx;

    return d->route(d->ctx, seg, ep_p);
}

int mc_diskdrops_init(struct mc_diskdrops *d, mc_dropq_route_fn route_fn,
                      mc_dropq_silent_fn silent_fn, mc_diskdrops_is_disk_fn is_disk, void *ctx)
{
    int err;

    memset(d, 0, sizeof(*d));
    d->is_disk = is_disk;
    d->route = route_fn;
    d->silent = silent_fn;
    d->ctx = ctx;
    /* the queue calls back with d: the answers are ours, the route and silence the server's */
    err = mc_dropq_create(route, d, &d->q);
    if (err != 0)
        return err;
    mc_dropq_on_acked(d->q, acked, silent);
    err = mc_dropmemo_create(&d->memo);
    if (err != 0) {
        mc_dropq_destroy(d->q);
        d->q = NULL;
    }
    return err;
}

void mc_diskdrops_fini(struct mc_diskdrops *d)
{
    while (d->held != NULL) {
        struct mc_diskdrops_held *h = d->held;

        d->held = h->next;
        held_free(h); /* the endpoints are gone with the worker */
    }
    if (d->q != NULL)
        mc_dropq_destroy(d->q);
    mc_dropmemo_destroy(d->memo);
    d->q = NULL;
    d->memo = NULL;
}

void mc_diskdrops_send(struct mc_diskdrops *d, struct mc_master *m, uint64_t now_ms)
{
    struct mc_diskdrops_held **pp = &d->held;
    size_t n, i;

    d->nsent_disk = 0;
    while ((n = mc_master_drops_take(m, d->taken, MC_DISKDROPS_BATCH)) > 0) {
        size_t k = 0;

        for (i = 0; i < n; i++) {
            const struct mc_master_drop *t = &d->taken[i];

            /* a disk block of a version removed while a reader held it (or while its
             * offload copy was written) is remembered from then on, its owner told at once
             * to mark the record removed on its disk (so that neither its restart nor ours
             * publishes it again), and sent again once freed */
            if (!mc_dropmemo_note(d->memo, t, d->is_disk(d->ctx, t->seg)))
                continue;
            d->items[k++] = (struct mc_proto_drop_item){
                .seg = t->seg, .offset = t->offset, .version = t->version,
                .flags = t->kind == MC_MASTER_DROP_RETIRED ? MC_PROTO_DROP_F_RETIRED : 0};
            /* a reply may wait for these (the first MC_DISKDROPS_BATCH of them) */
            if (d->is_disk(d->ctx, t->seg) && d->nsent_disk < MC_DISKDROPS_BATCH)
                d->sent_disk[d->nsent_disk++] = d->items[k - 1];
        }
        if (k > 0)
            mc_dropq_send(d->q, d->items, k, now_ms);
    }
    mc_dropq_tick(d->q, now_ms);
    /* past their bound: sent without the answers (the owner is slow, silent or gone) */
    while (*pp != NULL) {
        struct mc_diskdrops_held *h = *pp;

        if (now_ms >= h->until_ms) {
            *pp = h->next;
            d->held_expired++;
            held_send(h);
            held_free(h);
        } else {
            pp = &h->next;
        }
    }
}

bool mc_diskdrops_sent_disk(const struct mc_diskdrops *d)
{
    return d->nsent_disk > 0;
}

int mc_diskdrops_hold(struct mc_diskdrops *d, struct mc_ucx_ep *ep, uint16_t type, uint64_t id,
                      const void *reply, size_t len, uint64_t now_ms)
{
    struct mc_diskdrops_held *h = calloc(1, sizeof(*h));

    if (h == NULL || d->nsent_disk == 0)
        goto fail;
    h->wait = malloc(d->nsent_disk * sizeof(*h->wait));
    h->reply = malloc(len > 0 ? len : 1);
    if (h->wait == NULL || h->reply == NULL)
        goto fail;
    memcpy(h->wait, d->sent_disk, d->nsent_disk * sizeof(*h->wait));
    h->nwait = d->nsent_disk;
    memcpy(h->reply, reply, len);
    h->len = len;
    h->ep = ep;
    h->type = type;
    h->id = id;
    h->until_ms = now_ms + MC_DISKDROPS_HOLD_MS;
    h->next = d->held;
    d->held = h;
    return 0;
fail:
    if (h != NULL)
        held_free(h);
    return MC_ERR_NOMEM;
}

void mc_diskdrops_forget_ep(struct mc_diskdrops *d, struct mc_ucx_ep *ep)
{
    struct mc_diskdrops_held **pp = &d->held;

    while (*pp != NULL) {
        struct mc_diskdrops_held *h = *pp;

        if (h->ep == ep) {
            *pp = h->next;
            held_free(h);
        } else {
            pp = &h->next;
        }
    }
}

uint32_t mc_diskdrops_restore_filter(struct mc_diskdrops *d, struct mc_master_restore_req *reqs,
                                     uint32_t n)
{
    return mc_dropmemo_filter(d->memo, reqs, n, d->is_disk, d->ctx, d->refused);
}

void mc_diskdrops_restore_merge(const struct mc_diskdrops *d, int *results, uint32_t n)
{
    mc_dropmemo_merge(results, n, d->refused, MC_ERR_CANCELED);
}
