/*
 * The resend queue (resend.h): every item on a doubly linked list in the order items were
 * made; the waiting ones also in a binary min-heap by due time, so that the next due item
 * costs O(log n), not a walk from the head (with 65 536 items failed in one burst, a walk
 * per item was about n^2/2 steps in one tick: review finding H3).
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
                                  .dest = dest, .aux = aux, .tag = tag, .busy = true, .len = len,
                                  .seq = q->seq++};
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

/* Whether a is due before b (the older first at the same time). */
static bool before(const struct mc_resend_item *a, const struct mc_resend_item *b)
{
    return a->due_ms < b->due_ms || (a->due_ms == b->due_ms && a->seq < b->seq);
}

static void heap_set(struct mc_resend *q, size_t i, struct mc_resend_item *it)
{
    q->heap[i] = it;
    it->hidx = i;
}

static void heap_up(struct mc_resend *q, size_t i)
{
    struct mc_resend_item *it = q->heap[i];

    while (i > 0 && before(it, q->heap[(i - 1) / 2])) {
        heap_set(q, i, q->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(q, i, it);
}

static void heap_down(struct mc_resend *q, size_t i)
{
    struct mc_resend_item *it = q->heap[i];

    for (;;) {
        size_t c = 2 * i + 1;

        if (c >= q->hn)
            break;
        if (c + 1 < q->hn && before(q->heap[c + 1], q->heap[c]))
            c++;
        if (!before(q->heap[c], it))
            break;
        heap_set(q, i, q->heap[c]);
        i = c;
    }
    heap_set(q, i, it);
}

static bool heap_push(struct mc_resend *q, struct mc_resend_item *it)
{
    if (q->hn == q->hcap) {
        size_t cap = q->hcap != 0 ? 2 * q->hcap : 64;
        struct mc_resend_item **h = realloc(q->heap, cap * sizeof(*h));

        if (h == NULL)
            return false;
        q->heap = h;
        q->hcap = cap;
    }
    heap_set(q, q->hn++, it);
    heap_up(q, q->hn - 1);
    return true;
}

static void heap_remove(struct mc_resend *q, struct mc_resend_item *it)
{
    struct mc_resend_item *moved;
    size_t i = it->hidx;

    if (--q->hn == i)
        return;
    moved = q->heap[q->hn];
    heap_set(q, i, moved);
    heap_down(q, i);
    heap_up(q, moved->hidx);
}

struct mc_resend_item *mc_resend_next(struct mc_resend *q, uint64_t now_ms)
{
    struct mc_resend_item *it;

    if (q->hn == 0 || q->heap[0]->due_ms > now_ms)
        return NULL;
    it = q->heap[0];
    heap_remove(q, it);
    it->busy = true;
    it->tries++;
    q->retried++;
    return it;
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
    it->due_ms = now_ms + wait;
    if (!heap_push(q, it)) {
        q->given_up++; /* no memory to keep it waiting */
        mc_resend_done(q, it);
        return false;
    }
    it->busy = false;
    return true;
}

void mc_resend_done(struct mc_resend *q, struct mc_resend_item *it)
{
    if (!it->busy)
        heap_remove(q, it);
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

void mc_resend_hurry(struct mc_resend *q, uint64_t now_ms)
{
    for (struct mc_resend_item *it = q->head; it != NULL; it = it->next) {
        it->tries = 0;
        if (!it->busy && it->due_ms > now_ms)
            it->due_ms = now_ms;
    }
    /* due times only went down: the heap's order is rebuilt from the bottom up */
    for (size_t i = q->hn / 2; i-- > 0;)
        heap_down(q, i);
}

void mc_resend_clear_waiting(struct mc_resend *q)
{
    while (q->hn > 0)
        mc_resend_done(q, q->heap[q->hn - 1]);
}

void mc_resend_clear(struct mc_resend *q)
{
    while (q->head != NULL)
        mc_resend_done(q, q->head);
    free(q->heap);
    q->heap = NULL;
    q->hn = q->hcap = 0;
}
