/*
 * Messages sent again until they are answered: a queue of payloads, each out (its answer
 * pending) or waiting for its next try, with a backoff per try and a time past which it is
 * given up. Pure bookkeeping: the caller sends, and says how each try ended. Used for the
 * messages that keep the owners' indexes exact (PUBLISH from a writer agent, DROP from the
 * master: daemon/proto/hold_proto.h), which a peer briefly unreachable would otherwise lose.
 * Not thread-safe: one event loop owns a queue.
 */
#ifndef MC_COMMON_RESEND_H
#define MC_COMMON_RESEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mc_resend_item {
    struct mc_resend_item *next, *prev;
    void *ctx;             /* the queue owner's, as given to mc_resend_new */
    uint64_t first_ms;     /* when its first try was sent */
    uint64_t due_ms;       /* waiting: when it may be tried again */
    uint32_t tries;        /* tries sent so far */
    uint32_t dest, aux;    /* where it goes, as the caller names it */
    uint64_t tag;          /* the caller's (e.g. which reign the item belongs to) */
    bool busy;             /* a try is out: its end (answer or failure) is pending */
    size_t hidx;           /* waiting: its place in the queue's heap */
    uint64_t seq;          /* made in this order: ties of due_ms go by it */
    size_t len;
    _Alignas(8) uint8_t data[];
};

struct mc_resend {
    struct mc_resend_item *head, *tail;
    struct mc_resend_item **heap; /* the waiting items, a min-heap by due_ms: the next due
                                     is found without a walk (review finding H3) */
    size_t hn, hcap;
    uint64_t seq;
    size_t n, max;          /* items held (out or waiting), at most max */
    uint64_t backoff_min_ms, backoff_max_ms, give_up_ms;
    uint64_t retried, given_up, full; /* counters: tries after the first, items given up
                                          on, items refused because the queue was full */
};

/* An empty queue of at most max items; try k + 1 waits backoff_min_ms << (k - 1) after try
 * k failed (at most backoff_max_ms); an item whose try fails give_up_ms or more after its
 * first is given up. */
void mc_resend_init(struct mc_resend *q, size_t max, uint64_t backoff_min_ms,
                    uint64_t backoff_max_ms, uint64_t give_up_ms);

/* A new item holding a copy of data[0..len), its first try about to be sent (busy, tries
 * 1). from (may be NULL): an item this one continues (its first try time and count are
 * kept, so that the backoff and the give-up go on). NULL when the queue is full (counted)
 * or without memory: the caller sends once, unqueued. */
struct mc_resend_item *mc_resend_new(struct mc_resend *q, void *ctx, uint32_t dest,
                                     uint32_t aux, uint64_t tag, const void *data, size_t len,
                                     const struct mc_resend_item *from, uint64_t now_ms);

/* A waiting item whose time has come (the earliest due), now busy with its next try
 * (counted), or NULL. O(log n): a caller may drain every due item in one tick. */
struct mc_resend_item *mc_resend_next(struct mc_resend *q, uint64_t now_ms);

/* The try of busy item it ended without an answer that settles it: it waits for its next
 * try, or is given up (freed; returns false) once give_up_ms passed since its first (or,
 * without memory to keep it waiting, at once: counted as given up). */
bool mc_resend_failed(struct mc_resend *q, struct mc_resend_item *it, uint64_t now_ms);

/* The item is settled (answered, or pointless now): freed. */
void mc_resend_done(struct mc_resend *q, struct mc_resend_item *it);

/* Every item's backoff starts over (its tries count from 0 again; its first try's time,
 * hence its give-up, stays), and every waiting one is due at now_ms: after a change that
 * may let them through at once (a master change: tried at their owners' now). */
void mc_resend_hurry(struct mc_resend *q, uint64_t now_ms);
/* Frees every waiting item (none busy: their tries' ends still name them). */
void mc_resend_clear_waiting(struct mc_resend *q);
/* Frees every item (and the heap). Only once no try is out any more (their ends would name
 * freed items). */
void mc_resend_clear(struct mc_resend *q);

#endif /* MC_COMMON_RESEND_H */
