/*
 * The resend queue (resend.h): a doubly linked list in the order items were made; the next
 * due item is found by a walk (a queue holds what a peer has not answered yet: few items,
 * bounded by max).
 */
#include "daemon/common/resend.h"

#include <stdlib.h>
#include <string.h>

void mc_resend_init(struct mc_resend *q, size_t max, uint64_t backoff_min_ms,
                    uint64_t backoff_max_ms, uint64_t give_up_ms)
{
    *q = (struct mc_resend){.max = max,
                            .backoff_min_ms = backoff_min_ms > 0 ? backoff_min_ms : 1,
                            .backoff_max_ms = backoff_max_ms,
                            .give_up_ms = give_up_ms};
    if (q->backoff_max_ms < q->backoff_min_ms)
        q->backoff_max_ms = q->backoff_min_ms;
}

struct mc_resend_item *mc_resend_new(struct mc_resend *q, void *ctx, uint32_t dest,
                                     uint32_t aux, uint64_t tag, const void *data, size_t len,
                                     const struct mc_resend_item *from, uint64_t now_ms)
{
    struct mc_resend_item *it;

    if (q->n >= q->max) {
        q->full++;
        return NULL;
    }
    if ((it = malloc(sizeof(*it) + len)) == NULL)
        return NULL;
    *it = (struct mc_resend_item){.ctx = ctx, .first_ms = from != NULL ? from->first_ms : now_ms,
                                  .due_ms = now_ms, .tries = from != NULL ? from->tries : 1,
                                  .dest = dest, .aux = aux, .tag = tag, .busy = true, .len = len};
    if (len > 0)
        memcpy(it->data, data, len);
    it->prev = q->tail;
    if (q->tail != NULL)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    q->n++;
    return it;
}

struct mc_resend_item *mc_resend_next(struct mc_resend *q, uint64_t now_ms)
{
    for (struct mc_resend_item *it = q->head; it != NULL; it = it->next) {
        if (!it->busy && it->due_ms <= now_ms) {
            it->busy = true;
            it->tries++;
            q->retried++;
            return it;
        }
    }
    return NULL;
}

bool mc_resend_failed(struct mc_resend *q, struct mc_resend_item *it, uint64_t now_ms)
{
    uint64_t wait = q->backoff_min_ms;

    if (now_ms - it->first_ms >= q->give_up_ms) {
        q->given_up++;
        mc_resend_done(q, it);
        return false;
    }
    for (uint32_t k = 1; k < it->tries && wait < q->backoff_max_ms; k++)
        wait *= 2;
    if (wait > q->backoff_max_ms)
        wait = q->backoff_max_ms;
    it->busy = false;
    it->due_ms = now_ms + wait;
    return true;
}

void mc_resend_done(struct mc_resend *q, struct mc_resend_item *it)
{
    if (it->prev != NULL)
        it->prev->next = it->next;
    else
        q->head = it->next;
    if (it->next != NULL)
        it->next->prev = it->prev;
    else
        q->tail = it->prev;
    q->n--;
    free(it);
}

void mc_resend_clear_waiting(struct mc_resend *q)
{
    struct mc_resend_item *it = q->head, *next;

    for (; it != NULL; it = next) {
        next = it->next;
        if (!it->busy)
            mc_resend_done(q, it);
    }
}

void mc_resend_clear(struct mc_resend *q)
{
    while (q->head != NULL)
        mc_resend_done(q, q->head);
}
