/*
 * Futex doorbells on a ring ctrl (ring.h): the consumer sleeps on ctrl->futex after setting
 * need_wakeup; the producer, after publishing entries, wakes it only when need_wakeup is set.
 * The futex is shared (not FUTEX_PRIVATE_FLAG): the word lives in a MAP_SHARED region seen
 * by two processes. This module does not move ring entries and does not know what "ready"
 * means: the caller's predicate says.
 *
 * One consumer per ring may wait; any thread may ring. Nothing here allocates or logs.
 */
#ifndef MC_SHM_DOORBELL_H
#define MC_SHM_DOORBELL_H

#include <stdbool.h>

#include "shm/ring.h"

/*
 * Consumer: sleep until the producer rings, `timeout_ms` passes (< 0: no timeout), or a
 * signal arrives. Sets need_wakeup, reads the futex word, then calls ready(arg): when it
 * is true, returns 0 without sleeping. Entries published before the producer's ring are
 * therefore never missed: either ready() sees them, or the futex word has moved and the wait
 * returns at once, or the producer sees need_wakeup and wakes us. Clears need_wakeup before
 * returning.
 * ready: e.g. "mc_ring_ready(c) > 0", called once, on this thread.
 * Returns 0 (woken, ready, interrupted or spurious: the caller re-checks the ring),
 * MC_ERR_TIMEOUT, or MC_ERR_INTERNAL (the futex call refused the word: a bug).
 */
int mc_shm_doorbell_wait(struct mc_shm_ring_ctrl *c, bool (*ready)(void *), void *arg,
                         int timeout_ms);

/* Producer, after mc_ring_publish_tail: full barrier, then wake the consumer if it asked
 * (bump + FUTEX_WAKE of every waiter). No system call while the consumer is awake. */
void mc_shm_doorbell_ring(struct mc_shm_ring_ctrl *c);

/* The two halves of mc_shm_doorbell_ring for a producer that wakes through io_uring
 * (IORING_OP_FUTEX_WAKE on &c->futex) instead of a system call: if
 * mc_shm_doorbell_needed(c), call mc_shm_doorbell_bump(c), then wake the word. */
bool mc_shm_doorbell_needed(struct mc_shm_ring_ctrl *c);
void mc_shm_doorbell_bump(struct mc_shm_ring_ctrl *c);

/* FUTEX_WAKE every waiter on c->futex (the syscall half of mc_shm_doorbell_ring). */
void mc_shm_doorbell_wake(struct mc_shm_ring_ctrl *c);

#endif /* MC_SHM_DOORBELL_H */
