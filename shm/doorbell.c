/*
 * Futex doorbells: the sleep/wake handshake of doorbell.h. Not a ring (ring.h) and not an
 * event loop: the agent's io_uring waits on the same words with IORING_OP_FUTEX_WAIT.
 *
 * The handshake is the store-buffer pattern: the consumer stores need_wakeup then loads the
 * tail; the producer stores the tail then loads need_wakeup. A full fence on each side
 * guarantees at least one of them sees the other's store. The futex word closes the last
 * gap: the consumer reads it before its re-check, and the kernel compares it again under the
 * hash-bucket lock, so a bump between the re-check and the sleep makes FUTEX_WAIT return.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mc/mc_status.h"
#include "shm/doorbell.h"

static long futex_call(_Atomic uint32_t *word, int op, uint32_t val,
                       const struct timespec *ts)
{
    return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

int mc_shm_doorbell_wait(struct mc_shm_ring_ctrl *c, bool (*ready)(void *), void *arg,
                         int timeout_ms)
{
    struct timespec ts;
    uint32_t word;
    long rc;
    int err = 0;

    atomic_store_explicit(&c->need_wakeup, 1, memory_order_seq_cst);
    /* pairs with the fence in mc_shm_doorbell_needed: our need_wakeup store, or their tail
     * store, is seen by the other side's load (a seq_cst store alone does not order a
     * later acquire load in C11) */
    atomic_thread_fence(memory_order_seq_cst);
    /* acquire pairs with the release of mc_shm_doorbell_bump: if we read the bumped value,
     * the entries published before the bump are visible to ready() below */
    word = atomic_load_explicit(&c->futex, memory_order_acquire);
    if (ready(arg))
        goto out;

    if (timeout_ms >= 0) {
        ts.tv_sec = timeout_ms / 1000;
        ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
    }
    rc = futex_call(&c->futex, FUTEX_WAIT, word, timeout_ms >= 0 ? &ts : NULL);
    if (rc < 0) {
        switch (errno) {
        case ETIMEDOUT:
            err = MC_ERR_TIMEOUT;
            break;
        case EINTR:  /* a signal: the caller re-checks */
        case EAGAIN: /* the word moved before we slept: rung */
            break;
        default:
            err = MC_ERR_INTERNAL;
            break;
        }
    }
out:
    atomic_store_explicit(&c->need_wakeup, 0, memory_order_relaxed);
    return err;
}

bool mc_shm_doorbell_needed(struct mc_shm_ring_ctrl *c)
{
    /* pairs with the fence in mc_shm_doorbell_wait: orders our tail store before this
     * load of need_wakeup */
    atomic_thread_fence(memory_order_seq_cst);
    return atomic_load_explicit(&c->need_wakeup, memory_order_relaxed) != 0;
}

void mc_shm_doorbell_bump(struct mc_shm_ring_ctrl *c)
{
    /* release pairs with the acquire load of the word in mc_shm_doorbell_wait */
    atomic_fetch_add_explicit(&c->futex, 1, memory_order_release);
}

void mc_shm_doorbell_wake(struct mc_shm_ring_ctrl *c)
{
    /* shared futex: the waiter is in another process. A failure here (EFAULT on an unmapped
     * word) would be a bug of ours, and the waiter's timeout covers it anyway. */
    (void)futex_call(&c->futex, FUTEX_WAKE, INT_MAX, NULL);
}

void mc_shm_doorbell_ring(struct mc_shm_ring_ctrl *c)
{
    if (!mc_shm_doorbell_needed(c))
        return;
    mc_shm_doorbell_bump(c);
    mc_shm_doorbell_wake(c);
}
