/*
 * The submission engine of a client (client.h): op slots, staging slots, the SQ producer,
 * the CQ consumer (the reaper role) and the poisoned state. Not the handshake (connect.c)
 * and not the meaning of ops (ops.c).
 *
 * Why one lock and a reaper role rather than a reaping thread: libmc starts no threads
 * (the caller's process owns them), and a synchronous call is already a thread that waits;
 * letting one of the waiters sleep on the CQ for all costs no extra wake-up when a single
 * thread uses the client (the common case), and at most one cond-var wake-up otherwise.
 *
 * The region is shared with the agent, which is trusted less than nothing: the SQ tail and
 * CQ head are our own copies, never read back; the agent's SQ head and CQ tail are checked
 * against the ring sizes before use; every CQE is copied once and its user_data checked
 * against the op slots. A broken rule poisons the client with MC_ERR_PROTO.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "libmc/client.h"
#include "shm/doorbell.h"

uint64_t mc_client_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t mc_client_now_ms(void)
{
    return mc_client_now_ns() / 1000000u;
}

uint64_t mc_client_deadline(const struct mc_client *c)
{
    return mc_client_now_ns() + (uint64_t)c->op_timeout_ms * 1000000u;
}

/* A hint to the core that we are spinning (keeps the sibling hyper-thread fed). */
#if defined(__x86_64__) || defined(__i386__)
static inline void cpu_relax(void)
{
    __builtin_ia32_pause();
}
#elif defined(__aarch64__)
static inline void cpu_relax(void)
{
    __asm__ __volatile__("yield" ::: "memory");
}
#else
static inline void cpu_relax(void)
{
}
#endif

/*
 * Tell every waiter that something changed, mu held. The reaper sleeps on the CQ doorbell,
 * not on c->cv: when what changed is not a CQE (a slot given back by its owner, poison),
 * ring the CQ doorbell ourselves so it re-checks now rather than at its next liveness
 * slice. An extra bump of the futex word is harmless: it is a counter, and every waiter
 * re-checks. A lone thread is never its own reaper while it gives slots back, so the
 * single-threaded path pays nothing here.
 */
static void notify_locked(struct mc_client *c)
{
    pthread_cond_broadcast(&c->cv);
    if (c->reaping) {
        /* the reaper's ready() sees this, or mc_shm_doorbell_ring sees its need_wakeup
         * (the fence in mc_shm_doorbell_needed orders this store before that load) */
        atomic_fetch_add_explicit(&c->notify_seq, 1, memory_order_relaxed);
        mc_shm_doorbell_ring(c->region->cq);
    }
}

static void poison_locked(struct mc_client *c, int err)
{
    int expected = 0;

    if (atomic_compare_exchange_strong(&c->poison, &expected, err))
        notify_locked(c);
}

void mc_client_poison_locked(struct mc_client *c, int err)
{
    poison_locked(c, err);
}

void mc_client_poison(struct mc_client *c, int err)
{
    pthread_mutex_lock(&c->mu);
    poison_locked(c, err);
    pthread_mutex_unlock(&c->mu);
}

int mc_client_enter(struct mc_client *c)
{
    int err = atomic_load_explicit(&c->poison, memory_order_acquire);

    if (err != 0)
        return err;
    /* 1: the agent is closing (SIGTERM) and takes no new ops; ops already in flight still
     * complete, so only new calls check this. */
    if (atomic_load_explicit(&c->region->hdr->agent_state, memory_order_acquire) == 1) {
        mc_client_poison(c, MC_ERR_UNAVAILABLE);
        return atomic_load(&c->poison);
    }
    return 0;
}

/* Whether the agent closed its end of the socket (it never sends anything after the
 * welcome, so anything readable is a hang-up or a protocol breach). */
static int agent_liveness(const struct mc_client *c)
{
    struct pollfd p = {.fd = c->sock, .events = POLLIN | POLLRDHUP};
    char byte;
    ssize_t n;

    if (poll(&p, 1, 0) <= 0)
        return 0;
    if (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL))
        return MC_ERR_UNAVAILABLE;
    n = recv(c->sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        return MC_ERR_UNAVAILABLE;
    if (n > 0)
        return MC_ERR_PROTO;
    return (errno == EAGAIN || errno == EINTR) ? 0 : MC_ERR_UNAVAILABLE;
}

int mc_client_liveness(const struct mc_client *c)
{
    return agent_liveness(c);
}

int mc_client_engine_init(struct mc_client *c)
{
    const struct mc_shm_layout *l = &c->region->lay;
    pthread_condattr_t ca;
    uint32_t i;

    /* One op slot fewer than max_inflight: the agent counts every SQE it takes against
     * max_inflight before it looks at it, a RELEASE with MC_SQE_F_NO_CQE included (for an
     * instant), so a release sent while max_inflight ops wait would be a violation. */
    c->nops = l->max_inflight > 1 ? l->max_inflight - 1 : 1;
    c->nslots = l->staging_slots;
    c->slot_size = l->staging_slot_size;
    c->ops = calloc(c->nops, sizeof(*c->ops));
    c->ops_free = calloc(c->nops, sizeof(*c->ops_free));
    c->stg_free = calloc(c->nslots, sizeof(*c->stg_free));
    /* every lease the agent can hold for us (2 * max_inflight), and slack */
    c->rel_cap = 4 * l->max_inflight;
    c->rel_pending = calloc(c->rel_cap, sizeof(*c->rel_pending));
    if (c->ops == NULL || c->ops_free == NULL || c->stg_free == NULL || c->rel_pending == NULL)
        goto err_free;
    /* lowest indices on top of the stacks: nicer to read in a debugger, nothing more */
    for (i = 0; i < c->nops; i++) {
        c->ops[i].staging = -1;
        c->ops_free[i] = c->nops - 1 - i;
    }
    c->nops_free = c->nops;
    for (i = 0; i < c->nslots; i++)
        c->stg_free[i] = c->nslots - 1 - i;
    c->nstg_free = c->nslots;

    if (pthread_condattr_init(&ca) != 0)
        goto err_free;
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&c->cv, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        goto err_free;
    }
    pthread_condattr_destroy(&ca);
    if (pthread_mutex_init(&c->mu, NULL) != 0)
        goto err_cond;
    if (pthread_mutex_init(&c->arena_mu, NULL) != 0) {
        pthread_mutex_destroy(&c->mu);
        goto err_cond;
    }
    /* the agent zeroed the rings: both sides start at index 0 */
    c->sq_tail = 0;
    c->cq_head = 0;
    return 0;

err_cond:
    pthread_cond_destroy(&c->cv);
err_free:
    free(c->ops);
    free(c->ops_free);
    free(c->stg_free);
    free(c->rel_pending);
    c->rel_pending = NULL;
    c->ops = NULL;
    c->ops_free = NULL;
    c->stg_free = NULL;
    return MC_ERR_NOMEM;
}

void mc_client_engine_cleanup(struct mc_client *c)
{
    if (c->ops == NULL)
        return;
    pthread_mutex_destroy(&c->arena_mu);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->ops);
    free(c->ops_free);
    free(c->stg_free);
    free(c->rel_pending);
    c->ops = NULL;
}

/* --- staging slots ----------------------------------------------------------------------- */

uint8_t *mc_client_staging_ptr(struct mc_client *c, uint32_t slot)
{
    return c->region->staging + (size_t)slot * c->slot_size;
}

uint64_t mc_client_staging_off(const struct mc_client *c, uint32_t slot)
{
    return (uint64_t)slot * c->slot_size;
}

static void staging_put_locked(struct mc_client *c, uint32_t slot)
{
    c->stg_free[c->nstg_free++] = slot;
    notify_locked(c);
    if (c->aq_head != NULL)
        mc_async_kick_locked(c); /* queued async ops may take it (no-op when re-entered) */
}

void mc_client_staging_put_locked(struct mc_client *c, uint32_t slot)
{
    staging_put_locked(c, slot);
}

bool mc_client_staging_try_get_locked(struct mc_client *c, uint32_t *slot_p)
{
    if (c->nstg_free == 0)
        return false;
    *slot_p = c->stg_free[--c->nstg_free];
    return true;
}

void mc_client_staging_put(struct mc_client *c, uint32_t slot)
{
    pthread_mutex_lock(&c->mu);
    staging_put_locked(c, slot);
    pthread_mutex_unlock(&c->mu);
}

bool mc_client_staging_try_get(struct mc_client *c, uint32_t *slot_p)
{
    bool got = false;

    pthread_mutex_lock(&c->mu);
    if (c->nstg_free > 0) {
        *slot_p = c->stg_free[--c->nstg_free];
        got = true;
    }
    pthread_mutex_unlock(&c->mu);
    return got;
}

/* --- the CQ: reaping ------------------------------------------------------------------- */

/* What the reaper waits for: a CQE, or a notify_locked since it took the role. */
struct reap_arg {
    struct mc_client *c;
    uint32_t seq; /* notify_seq when the role was taken */
};

static bool cq_ready(void *arg)
{
    struct reap_arg *ra = arg;
    struct mc_client *c = ra->c;

    /* acquire pairs with the agent's release of the CQ tail (mc_ring_publish_tail) */
    return atomic_load_explicit(&c->region->cq->tail, memory_order_acquire) != c->cq_head ||
           atomic_load_explicit(&c->notify_seq, memory_order_relaxed) != ra->seq;
}

/* Write an SQE (and its key, if any) at our tail without publishing it; mu held. Returns
 * false when the SQ is full now. */
static bool sq_write_locked(struct mc_client *c, const struct mc_sqe *sqe, const char *key,
                            size_t key_len)
{
    struct mc_shm_region *r = c->region;
    uint32_t head, used;

    /* acquire pairs with the agent's release of the SQ head: it is done reading the slots */
    head = atomic_load_explicit(&r->sq->head, memory_order_acquire);
    used = c->sq_tail - head;
    if (used > r->lay.sq_entries) {
        poison_locked(c, MC_ERR_PROTO); /* a head ahead of our tail, or far behind it */
        return false;
    }
    if (used == r->lay.sq_entries)
        return false;
    if (key_len > 0)
        memcpy(mc_shm_key_slot(r, c->sq_tail), key, key_len);
    *mc_shm_sqe_at(r, c->sq_tail) = *sqe;
    c->sq_tail++;
    return true;
}

/* Write the RELEASEs that found the SQ full, oldest first, while there is room: a lease
 * left in the agent's table until its deadline would fill the table under a long batch. */
static void rel_flush_locked(struct mc_client *c)
{
    struct mc_sqe sqe;
    uint32_t i = 0;

    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_RELEASE;
    sqe.flags = MC_SQE_F_NO_CQE;
    while (i < c->nrel_pending && atomic_load(&c->poison) == 0) {
        sqe.arg0 = c->rel_pending[i];
        if (!sq_write_locked(c, &sqe, NULL, 0))
            break;
        c->sq_unpublished = true;
        i++;
    }
    if (i > 0) {
        memmove(c->rel_pending, c->rel_pending + i, (c->nrel_pending - i) * sizeof(uint32_t));
        c->nrel_pending -= i;
    }
}

/* Push an SQE at our tail and publish it (with any written before it); mu held. Returns
 * false when the SQ is full now. */
static bool sq_push_locked(struct mc_client *c, const struct mc_sqe *sqe, const char *key,
                           size_t key_len)
{
    rel_flush_locked(c);
    if (!sq_write_locked(c, sqe, key, key_len))
        return false;
    mc_ring_publish_tail(c->region->sq, c->sq_tail);
    c->sq_unpublished = false;
    return true;
}

void mc_client_flush_locked(struct mc_client *c)
{
    rel_flush_locked(c);
    if (!c->sq_unpublished)
        return;
    c->sq_unpublished = false;
    /* one release store for every SQE written since the last one, one doorbell */
    mc_ring_publish_tail(c->region->sq, c->sq_tail);
    mc_shm_doorbell_ring(c->region->sq);
}

void mc_client_release_locked(struct mc_client *c, uint32_t lease_id)
{
    struct mc_sqe sqe;

    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_RELEASE;
    sqe.flags = MC_SQE_F_NO_CQE;
    sqe.arg0 = lease_id;
    if (atomic_load(&c->poison) != 0)
        return; /* the agent is gone or broken: its leases end with it */
    rel_flush_locked(c);
    if (c->nrel_pending == 0 && sq_write_locked(c, &sqe, NULL, 0))
        c->sq_unpublished = true;
    else if (c->nrel_pending < c->rel_cap)
        c->rel_pending[c->nrel_pending++] = lease_id; /* sent with the next submission */
    /* else: more than the agent can hold for us; the lease ends at its deadline */
}

static void op_free_locked(struct mc_client *c, uint32_t idx)
{
    struct mc_op_slot *o = &c->ops[idx];

    o->state = MC_OP_STATE_FREE;
    o->staging = -1;
    o->hold_staging = false;
    o->aop = NULL;
    c->ops_free[c->nops_free++] = idx;
    notify_locked(c);
    if (c->aq_head != NULL)
        mc_async_kick_locked(c); /* queued async ops may take it (no-op when re-entered) */
}

/* An abandoned op's CQE arrived: undo what the op left behind, then free its slot. */
static void abandoned_done_locked(struct mc_client *c, uint32_t idx, const struct mc_cqe *cqe)
{
    struct mc_op_slot *o = &c->ops[idx];
    struct mc_sqe sqe;

    if (o->opcode == MC_OP_GET && cqe->res == 0) {
        mc_client_release_locked(c, cqe->lease_id);
        mc_client_flush_locked(c);
    } else if (o->opcode == MC_OP_PUT_START && cqe->res == 0) {
        /* the put was started for an owner who gave up: abort it, reusing this slot (its
         * CQE will be dropped like this one) */
        memset(&sqe, 0, sizeof(sqe));
        sqe.opcode = MC_OP_PUT_ABORT;
        sqe.arg0 = cqe->lease_id;
        o->gen++;
        o->opcode = MC_OP_PUT_ABORT;
        sqe.user_data = ((uint64_t)o->gen << 32) | idx;
        if (sq_push_locked(c, &sqe, NULL, 0)) {
            mc_shm_doorbell_ring(c->region->sq);
            return;
        }
    }
    op_free_locked(c, idx);
}

/* Move every CQE that is ready into its op slot; only the reaper calls this, mu held. */
static void drain_locked(struct mc_client *c)
{
    struct mc_shm_region *r = c->region;
    uint32_t tail, head = c->cq_head;
    struct mc_op_slot *o;
    struct mc_cqe cqe;
    uint32_t idx;

    /* acquire pairs with the agent's release of the CQ tail: the CQEs are written */
    tail = atomic_load_explicit(&r->cq->tail, memory_order_acquire);
    if (tail - head > r->lay.cq_entries) {
        poison_locked(c, MC_ERR_PROTO);
        return;
    }
    while (head != tail) {
        memcpy(&cqe, mc_shm_cqe_at(r, head), sizeof(cqe)); /* read once */
        head++;
        /* give the slot back before handling the CQE: handling it may free an op slot and
         * submit the next op, whose answer needs CQ room (release pairs with the agent's
         * acquire of the CQ head) */
        c->cq_head = head;
        mc_ring_publish_head(r->cq, head);
        idx = (uint32_t)cqe.user_data;
        o = idx < c->nops ? &c->ops[idx] : NULL;
        if (o == NULL || o->gen != (uint32_t)(cqe.user_data >> 32) ||
            (o->state != MC_OP_STATE_PENDING && o->state != MC_OP_STATE_ABANDONED)) {
            poison_locked(c, MC_ERR_PROTO); /* a CQE for no op of ours */
            break;
        }
        if (o->staging >= 0 && !(o->hold_staging && o->state == MC_OP_STATE_PENDING)) {
            staging_put_locked(c, (uint32_t)o->staging);
            o->staging = -1;
        }
        if (o->state == MC_OP_STATE_ABANDONED) {
            abandoned_done_locked(c, idx, &cqe);
        } else if (o->aop != NULL) {
            /* an async op's step: the slot is free again before its owner moves on */
            struct mc_op *aop = o->aop;
            uint32_t tag = o->tag;

            op_free_locked(c, idx);
            mc_async_cqe_locked(c, aop, tag, &cqe);
        } else {
            o->cqe = cqe;
            o->state = MC_OP_STATE_DONE;
        }
    }
    if (c->aq_head != NULL)
        mc_async_kick_locked(c);
    mc_client_flush_locked(c); /* what the async steps and releases above submitted */
    pthread_cond_broadcast(&c->cv);
}

/* Empty the eventfd (it only says "look at the CQ", which the caller is about to do). */
static void efd_drain(struct mc_client *c)
{
    uint64_t v;

    if (c->efd >= 0)
        (void)read(c->efd, &v, sizeof(v)); /* non-blocking: EAGAIN when already empty */
}

/*
 * The reaper's wait, without mu: spin MC_CLIENT_SPIN_NS, then sleep on the CQ doorbell for
 * at most MC_CLIENT_LIVENESS_MS, then check that the agent lives. Returns 0 when the
 * caller should re-check (CQEs may be ready, a slot was given back, or a slice passed),
 * MC_ERR_TIMEOUT at the deadline, or the agent's liveness error.
 */
static _Atomic uint32_t g_spinners; /* threads of this process polling a CQ */

static uint32_t spin_cores(void)
{
    static _Atomic uint32_t cores;
    uint32_t n = atomic_load_explicit(&cores, memory_order_relaxed);

    if (n == 0) {
        long v = sysconf(_SC_NPROCESSORS_ONLN);

        n = v > 0 ? (uint32_t)v : 1;
        atomic_store_explicit(&cores, n, memory_order_relaxed);
    }
    return n;
}

static int reap_wait(struct mc_client *c, struct reap_arg *ra, uint64_t deadline_ns)
{
    struct mc_shm_ring_ctrl *cq = c->region->cq;
    uint64_t now = mc_client_now_ns();
    uint64_t spin_end = now + c->spin_ns, next_yield = now + MC_CLIENT_YIELD_NS;
    uint64_t left_ms;
    int err;

    /* poll only while fewer of us poll than there are cores: on a full machine a spinner
     * only delays the agent it waits for (all-spin collapses at 8 clients on 2 cores) */
    if (c->spin_ns > 0 && atomic_fetch_add(&g_spinners, 1) < spin_cores()) {
        atomic_store_explicit(&cq->consumer_spinning, 1, memory_order_relaxed);
        while (now < spin_end && now < deadline_ns && !cq_ready(ra)) {
            cpu_relax();
            now = mc_client_now_ns();
            if (now >= next_yield) {
                sched_yield(); /* the agent may be queued behind us on this core */
                next_yield = now + MC_CLIENT_YIELD_NS;
            }
        }
        atomic_store_explicit(&cq->consumer_spinning, 0, memory_order_relaxed);
        atomic_fetch_sub(&g_spinners, 1);
        if (cq_ready(ra))
            return 0;
    } else if (c->spin_ns > 0) {
        atomic_fetch_sub(&g_spinners, 1);
    }

    if (now >= deadline_ns)
        return cq_ready(ra) ? 0 : MC_ERR_TIMEOUT;
    left_ms = (deadline_ns - now + 999999u) / 1000000u;
    if (left_ms > MC_CLIENT_LIVENESS_MS)
        left_ms = MC_CLIENT_LIVENESS_MS;
    err = mc_shm_doorbell_wait(cq, cq_ready, ra, (int)left_ms);
    if (err == 0)
        return 0; /* rung, ready, or interrupted */
    /* MC_ERR_TIMEOUT: a slice passed with nothing to reap. MC_ERR_INTERNAL (the futex
     * refused the word) cannot happen with a mapped, aligned word; were it to, the caller
     * re-checks and comes back, bounded by its deadline. */
    return agent_liveness(c);
}

static void ns_to_timespec(uint64_t ns, struct timespec *ts)
{
    ts->tv_sec = (time_t)(ns / 1000000000u);
    ts->tv_nsec = (long)(ns % 1000000000u);
}

/*
 * One round of waiting for anything to change, mu held (released meanwhile): as the
 * reaper if the role is free, else on the cond var. Returns 0 (re-check your condition),
 * MC_ERR_TIMEOUT (deadline_ns passed; re-check once more) or the poison code.
 */
static int wait_round_locked(struct mc_client *c, uint64_t deadline_ns)
{
    struct timespec ts;
    int err;

    err = atomic_load(&c->poison);
    if (err != 0)
        return err;
    if (mc_client_now_ns() >= deadline_ns)
        return MC_ERR_TIMEOUT;
    if (!c->reaping) {
        struct reap_arg ra = {.c = c, .seq = atomic_load(&c->notify_seq)};

        bool drain_efd = c->efd >= 0;

        c->reaping = true;
        /* need_wakeup may be armed for the eventfd (mc_async_arm_locked): a reaper reaps
         * for everyone, so the agent need not write it while we poll; the doorbell wait
         * sets it again before we sleep */
        atomic_store_explicit(&c->region->cq->need_wakeup, 0, memory_order_relaxed);
        pthread_mutex_unlock(&c->mu);
        err = reap_wait(c, &ra, deadline_ns);
        /* the agent writes the eventfd whenever need_wakeup is set (a sleeping reaper's
         * too): empty it before reading the CQ, so a write after this read is for CQEs we
         * may not see now, and leaves it readable */
        if (drain_efd)
            efd_drain(c);
        pthread_mutex_lock(&c->mu);
        c->reaping = false;
        drain_locked(c); /* also broadcasts: the next waiter may take the role */
        if (err != 0 && err != MC_ERR_TIMEOUT)
            poison_locked(c, err);
        if (c->copy_head != NULL)
            mc_async_run_copies_locked(c);
        mc_async_arm_locked(c);
    } else {
        ns_to_timespec(deadline_ns, &ts);
        err = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        err = err == ETIMEDOUT ? MC_ERR_TIMEOUT : 0;
    }
    if (c->copy_head != NULL)
        mc_async_run_copies_locked(c); /* reaped by another thread, not copied yet */
    if (atomic_load(&c->poison) != 0)
        return atomic_load(&c->poison);
    return err;
}

int mc_client_wait_round_locked(struct mc_client *c, uint64_t deadline_ns)
{
    return wait_round_locked(c, deadline_ns);
}

void mc_client_poll_locked(struct mc_client *c)
{
    int err;

    if (!c->reaping) {
        if (c->efd >= 0)
            efd_drain(c);
        drain_locked(c);
        /* an agent that died leaves nothing in the CQ: a poll must notice it too */
        err = agent_liveness(c);
        if (err != 0)
            poison_locked(c, err);
        mc_async_arm_locked(c);
    }
    if (c->copy_head != NULL)
        mc_async_run_copies_locked(c);
}

int mc_client_staging_get(struct mc_client *c, uint64_t deadline_ns, uint32_t *slot_p)
{
    int err = 0;

    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->nstg_free > 0) {
            *slot_p = c->stg_free[--c->nstg_free];
            err = 0;
            break;
        }
        if (err == MC_ERR_TIMEOUT)
            break;
        err = wait_round_locked(c, deadline_ns);
        if (err != 0 && err != MC_ERR_TIMEOUT)
            break;
    }
    pthread_mutex_unlock(&c->mu);
    return err;
}

/* --- submission ------------------------------------------------------------------------ */

/* The SQE carries the absolute deadline (low 32 bits of CLOCK_MONOTONIC ms), so an SQE
 * that waited in the ring is not given a fresh deadline when the agent takes it. */
static uint32_t deadline_low32(uint64_t deadline_ns)
{
    uint32_t ms = (uint32_t)((deadline_ns + 999999u) / 1000000u);

    return ms == 0 ? 1 : ms; /* 0 means "the agent's default" */
}

/* mc_client_submit and mc_client_try_submit; wait: whether to wait for an op slot. */
static int submit(struct mc_client *c, struct mc_sqe *sqe, const char *key, size_t key_len,
                  int32_t staging, bool hold_staging, uint64_t deadline_ns, bool wait,
                  uint32_t *op_p)
{
    struct timespec pause = {0, 50000};
    struct mc_op_slot *o;
    uint32_t idx;
    int err = 0;

    pthread_mutex_lock(&c->mu);
    for (;;) {
        err = atomic_load(&c->poison);
        if (err != 0)
            goto out_unlock;
        if (c->nops_free > 0)
            break;
        if (!wait) {
            err = MC_ERR_BUSY;
            goto out_unlock;
        }
        err = wait_round_locked(c, deadline_ns);
        if (err != 0 && !(err == MC_ERR_TIMEOUT && c->nops_free > 0))
            goto out_unlock;
    }
    idx = c->ops_free[--c->nops_free];
    o = &c->ops[idx];
    o->gen++;
    o->opcode = sqe->opcode;
    o->staging = staging;
    o->hold_staging = hold_staging;
    o->aop = NULL;
    o->state = MC_OP_STATE_PENDING;
    sqe->user_data = ((uint64_t)o->gen << 32) | idx;
    sqe->key_len = (uint16_t)key_len;
    sqe->deadline_ms = deadline_low32(deadline_ns);

    /* The agent empties the SQ every loop turn, and op slots bound what it holds, so a
     * full SQ is short-lived (or there are more op slots than SQ entries): wait it out
     * politely, without the lock, which the agent does not need to advance the head. */
    while (!sq_push_locked(c, sqe, key, key_len)) {
        err = atomic_load(&c->poison);
        if (err == 0 && mc_client_now_ns() >= deadline_ns)
            err = MC_ERR_TIMEOUT;
        if (err != 0) {
            o->staging = -1; /* not submitted: the caller keeps its staging slot */
            op_free_locked(c, idx);
            goto out_unlock;
        }
        pthread_mutex_unlock(&c->mu);
        nanosleep(&pause, NULL);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    mc_shm_doorbell_ring(c->region->sq);
    *op_p = idx;
    return 0;

out_unlock:
    pthread_mutex_unlock(&c->mu);
    return err;
}

int mc_client_submit(struct mc_client *c, struct mc_sqe *sqe, const char *key, size_t key_len,
                     int32_t staging, bool hold_staging, uint64_t deadline_ns, uint32_t *op_p)
{
    return submit(c, sqe, key, key_len, staging, hold_staging, deadline_ns, true, op_p);
}

int mc_client_try_submit(struct mc_client *c, struct mc_sqe *sqe, const char *key,
                         size_t key_len, int32_t staging, uint64_t deadline_ns, uint32_t *op_p)
{
    return submit(c, sqe, key, key_len, staging, false, deadline_ns, false, op_p);
}

int mc_client_submit_locked(struct mc_client *c, struct mc_sqe *sqe, const char *key,
                            size_t key_len, int32_t staging, struct mc_op *aop, uint32_t tag,
                            uint64_t deadline_ns, uint32_t *op_p)
{
    struct mc_op_slot *o;
    uint32_t idx;
    int err = atomic_load(&c->poison);

    if (err != 0)
        return err;
    if (c->nops_free == 0)
        return MC_ERR_BUSY;
    idx = c->ops_free[c->nops_free - 1];
    o = &c->ops[idx];
    sqe->user_data = ((uint64_t)(o->gen + 1) << 32) | idx;
    sqe->key_len = (uint16_t)key_len;
    sqe->deadline_ms = deadline_low32(deadline_ns);
    o->sq_index = c->sq_tail;
    if (!sq_write_locked(c, sqe, key, key_len)) {
        err = atomic_load(&c->poison);
        return err != 0 ? err : MC_ERR_BUSY; /* full SQ: the agent empties it each turn */
    }
    c->nops_free--;
    o->gen++;
    o->opcode = sqe->opcode;
    o->staging = staging;
    o->hold_staging = false;
    o->aop = aop;
    o->tag = tag;
    o->state = MC_OP_STATE_PENDING;
    c->sq_unpublished = true;
    *op_p = idx;
    return 0;
}

void mc_client_submit_detached_locked(struct mc_client *c, struct mc_sqe *sqe)
{
    struct mc_op_slot *o;
    uint32_t idx;

    if (atomic_load(&c->poison) != 0 || c->nops_free == 0)
        return;
    idx = c->ops_free[c->nops_free - 1];
    o = &c->ops[idx];
    sqe->user_data = ((uint64_t)(o->gen + 1) << 32) | idx;
    sqe->key_len = 0;
    if (!sq_write_locked(c, sqe, NULL, 0))
        return;
    c->nops_free--;
    o->gen++;
    o->opcode = sqe->opcode;
    o->staging = -1;
    o->hold_staging = false;
    o->aop = NULL;
    o->state = MC_OP_STATE_ABANDONED;
    c->sq_unpublished = true;
}

void mc_client_submit_detached(struct mc_client *c, struct mc_sqe *sqe)
{
    pthread_mutex_lock(&c->mu);
    mc_client_submit_detached_locked(c, sqe);
    mc_client_flush_locked(c);
    pthread_mutex_unlock(&c->mu);
}

void mc_client_release(struct mc_client *c, uint32_t lease_id)
{
    struct mc_sqe sqe;
    bool pushed;

    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_RELEASE;
    sqe.flags = MC_SQE_F_NO_CQE;
    sqe.arg0 = lease_id;
    pthread_mutex_lock(&c->mu);
    pushed = atomic_load(&c->poison) == 0 && sq_push_locked(c, &sqe, NULL, 0);
    pthread_mutex_unlock(&c->mu);
    if (pushed)
        mc_shm_doorbell_ring(c->region->sq);
}

/* --- completion ----------------------------------------------------------------------- */

static void abandon_locked(struct mc_client *c, uint32_t idx)
{
    struct mc_op_slot *o = &c->ops[idx];

    o->aop = NULL;
    if (o->state == MC_OP_STATE_DONE) {
        /* it finished after all: clean up as the reaper would have */
        struct mc_cqe cqe = o->cqe;

        if (o->staging >= 0) {
            staging_put_locked(c, (uint32_t)o->staging);
            o->staging = -1;
        }
        o->state = MC_OP_STATE_ABANDONED;
        abandoned_done_locked(c, idx, &cqe);
    } else if (o->state == MC_OP_STATE_PENDING) {
        o->state = MC_OP_STATE_ABANDONED;
    }
}

bool mc_client_sqe_consumed_locked(struct mc_client *c, uint32_t idx)
{
    /* acquire pairs with the agent's release of the SQ head: it has copied the SQE */
    uint32_t head = atomic_load_explicit(&c->region->sq->head, memory_order_acquire);

    return (int32_t)(head - c->ops[idx].sq_index) > 0;
}

void mc_client_abandon_locked(struct mc_client *c, uint32_t op)
{
    abandon_locked(c, op);
}

void mc_client_abandon(struct mc_client *c, uint32_t op)
{
    pthread_mutex_lock(&c->mu);
    abandon_locked(c, op);
    pthread_mutex_unlock(&c->mu);
}

int mc_client_wait(struct mc_client *c, uint32_t op, uint64_t deadline_ns, struct mc_cqe *cqe_p)
{
    struct mc_op_slot *o = &c->ops[op];
    int err;

    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (o->state == MC_OP_STATE_DONE) {
            *cqe_p = o->cqe;
            /* a hold_staging op's slot goes back to its owner, who gives it back after
             * reading it: op_free_locked forgets it */
            op_free_locked(c, op);
            err = 0;
            break;
        }
        err = wait_round_locked(c, deadline_ns);
        if (err == MC_ERR_TIMEOUT && o->state != MC_OP_STATE_DONE) {
            /* the agent may have died without the reaper noticing yet (no reaper ran) */
            int live = agent_liveness(c);

            if (live != 0) {
                poison_locked(c, live);
                err = live;
            }
            abandon_locked(c, op);
            break;
        }
        if (err != 0 && err != MC_ERR_TIMEOUT) {
            if (o->state == MC_OP_STATE_DONE)
                continue; /* its outcome arrived before the poison: report it */
            abandon_locked(c, op);
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return err;
}
