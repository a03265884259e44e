/*
 * The submission engine of a client (engine.h): op slots, staging slots, the SQ producer,
 * the CQ consumer (the reaper role) and the poisoned state. Not the handshake (connect.c)
 * and not the meaning of ops (op.c): a CQE goes to the completion function its submitter
 * stored in the op slot, and the layer above is called back only through e->hooks.
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

#include "common/clock.h"
#include "libmc/engine.h"
#include "shm/doorbell.h"

uint64_t mc_engine_now_ns(void)
{
    return mc_clock_ns();
}

uint64_t mc_engine_now_ms(void)
{
    return mc_engine_now_ns() / 1000000u;
}

uint64_t mc_engine_deadline(const struct mc_engine *e)
{
    return mc_engine_now_ns() + (uint64_t)e->op_timeout_ms * 1000000u;
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
 * not on e->cv: when what changed is not a CQE (a slot given back by its owner, poison),
 * ring the CQ doorbell ourselves so it re-checks now rather than at its next liveness
 * slice. An extra bump of the futex word is harmless: it is a counter, and every waiter
 * re-checks. A lone thread is never its own reaper while it gives slots back, so the
 * single-threaded path pays nothing here.
 */
static void notify_locked(struct mc_engine *e)
{
    pthread_cond_broadcast(&e->cv);
    if (e->reaping) {
        /* the reaper's ready() sees this, or mc_shm_doorbell_ring sees its need_wakeup
         * (the fence in mc_shm_doorbell_needed orders this store before that load) */
        atomic_fetch_add_explicit(&e->notify_seq, 1, memory_order_relaxed);
        mc_shm_doorbell_ring(e->region->cq);
    }
}

static void poison_locked(struct mc_engine *e, int err)
{
    int expected = 0;

    if (atomic_compare_exchange_strong(&e->poison, &expected, err))
        notify_locked(e);
}

void mc_engine_poison_locked(struct mc_engine *e, int err)
{
    poison_locked(e, err);
}

void mc_engine_poison(struct mc_engine *e, int err)
{
    pthread_mutex_lock(&e->mu);
    poison_locked(e, err);
    pthread_mutex_unlock(&e->mu);
}

int mc_engine_enter(struct mc_engine *e)
{
    int err = atomic_load_explicit(&e->poison, memory_order_acquire);

    if (err != 0)
        return err;
    /* 1: the agent is closing (SIGTERM) and takes no new ops; ops already in flight still
     * complete, so only new calls check this. */
    if (atomic_load_explicit(&e->region->hdr->agent_state, memory_order_acquire) == 1) {
        mc_engine_poison(e, MC_ERR_UNAVAILABLE);
        return atomic_load(&e->poison);
    }
    return 0;
}

/* Whether the agent closed its end of the socket (it never sends anything after the
 * welcome, so anything readable is a hang-up or a protocol breach). */
static int agent_liveness(const struct mc_engine *e)
{
    struct pollfd p = {.fd = e->sock, .events = POLLIN | POLLRDHUP};
    char byte;
    ssize_t n;

    if (poll(&p, 1, 0) <= 0)
        return 0;
    if (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL))
        return MC_ERR_UNAVAILABLE;
    n = recv(e->sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        return MC_ERR_UNAVAILABLE;
    if (n > 0)
        return MC_ERR_PROTO;
    return (errno == EAGAIN || errno == EINTR) ? 0 : MC_ERR_UNAVAILABLE;
}

int mc_engine_liveness(const struct mc_engine *e)
{
    return agent_liveness(e);
}

int mc_engine_init(struct mc_engine *e, const struct mc_engine_hooks *hooks)
{
    const struct mc_shm_layout *l = &e->region->lay;
    pthread_condattr_t ca;
    uint32_t i;

    /* One op slot fewer than max_inflight: the agent counts every SQE it takes against
     * max_inflight before it looks at it, a RELEASE with MC_SQE_F_NO_CQE included (for an
     * instant), so a release sent while max_inflight ops wait would be a violation. */
    e->nops = l->max_inflight > 1 ? l->max_inflight - 1 : 1;
    e->nslots = l->staging_slots;
    e->slot_size = l->staging_slot_size;
    e->ops = calloc(e->nops, sizeof(*e->ops));
    e->ops_free = calloc(e->nops, sizeof(*e->ops_free));
    e->stg_free = calloc(e->nslots, sizeof(*e->stg_free));
    /* every lease the agent can hold for us (2 * max_inflight), and slack */
    e->rel_cap = 4 * l->max_inflight;
    e->rel_pending = calloc(e->rel_cap, sizeof(*e->rel_pending));
    if (e->ops == NULL || e->ops_free == NULL || e->stg_free == NULL || e->rel_pending == NULL)
        goto err_free;
    /* lowest indices on top of the stacks: nicer to read in a debugger, nothing more */
    for (i = 0; i < e->nops; i++) {
        e->ops[i].staging = -1;
        e->ops_free[i] = e->nops - 1 - i;
    }
    e->nops_free = e->nops;
    for (i = 0; i < e->nslots; i++)
        e->stg_free[i] = e->nslots - 1 - i;
    e->nstg_free = e->nslots;

    if (pthread_condattr_init(&ca) != 0)
        goto err_free;
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&e->cv, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        goto err_free;
    }
    pthread_condattr_destroy(&ca);
    if (pthread_mutex_init(&e->mu, NULL) != 0)
        goto err_cond;
    e->hooks = hooks;
    /* the agent zeroed the rings: both sides start at index 0 */
    e->sq_tail = 0;
    e->cq_head = 0;
    return 0;

err_cond:
    pthread_cond_destroy(&e->cv);
err_free:
    free(e->ops);
    free(e->ops_free);
    free(e->stg_free);
    free(e->rel_pending);
    e->rel_pending = NULL;
    e->ops = NULL;
    e->ops_free = NULL;
    e->stg_free = NULL;
    return MC_ERR_NOMEM;
}

void mc_engine_cleanup(struct mc_engine *e)
{
    if (e->ops == NULL)
        return;
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e->ops);
    free(e->ops_free);
    free(e->stg_free);
    free(e->rel_pending);
    e->ops = NULL;
}

/* --- staging slots ----------------------------------------------------------------------- */

uint8_t *mc_engine_staging_ptr(struct mc_engine *e, uint32_t slot)
{
    return e->region->staging + (size_t)slot * e->slot_size;
}

uint64_t mc_engine_staging_off(const struct mc_engine *e, uint32_t slot)
{
    return (uint64_t)slot * e->slot_size;
}

static void staging_put_locked(struct mc_engine *e, uint32_t slot)
{
    e->stg_free[e->nstg_free++] = slot;
    notify_locked(e);
    e->hooks->slots_back(e); /* ops queued above may take it */
}

void mc_engine_staging_put_locked(struct mc_engine *e, uint32_t slot)
{
    staging_put_locked(e, slot);
}

bool mc_engine_staging_try_get_locked(struct mc_engine *e, uint32_t *slot_p)
{
    if (e->nstg_free == 0)
        return false;
    *slot_p = e->stg_free[--e->nstg_free];
    return true;
}

void mc_engine_staging_put(struct mc_engine *e, uint32_t slot)
{
    pthread_mutex_lock(&e->mu);
    staging_put_locked(e, slot);
    pthread_mutex_unlock(&e->mu);
}

/* --- the CQ: reaping ------------------------------------------------------------------- */

/* What the reaper waits for: a CQE, or a notify_locked since it took the role. */
struct reap_arg {
    struct mc_engine *e;
    uint32_t seq; /* notify_seq when the role was taken */
};

static bool cq_ready(void *arg)
{
    struct reap_arg *ra = arg;
    struct mc_engine *e = ra->e;

    /* acquire pairs with the agent's release of the CQ tail (mc_ring_publish_tail) */
    return atomic_load_explicit(&e->region->cq->tail, memory_order_acquire) != e->cq_head ||
           atomic_load_explicit(&e->notify_seq, memory_order_relaxed) != ra->seq;
}

/* Write an SQE (and its key, if any) at our tail without publishing it; mu held. Returns
 * false when the SQ is full now. */
static bool sq_write_locked(struct mc_engine *e, const struct mc_sqe *sqe, const char *key,
                            size_t key_len)
{
    struct mc_shm_region *r = e->region;
    uint32_t head, used;

    /* acquire pairs with the agent's release of the SQ head: it is done reading the slots */
    head = atomic_load_explicit(&r->sq->head, memory_order_acquire);
    used = e->sq_tail - head;
    if (used > r->lay.sq_entries) {
        poison_locked(e, MC_ERR_PROTO); /* a head ahead of our tail, or far behind it */
        return false;
    }
    if (used == r->lay.sq_entries)
        return false;
    if (key_len > 0)
        memcpy(mc_shm_key_slot(r, e->sq_tail), key, key_len);
    *mc_shm_sqe_at(r, e->sq_tail) = *sqe;
    e->sq_tail++;
    return true;
}

/* Write the RELEASEs that found the SQ full, oldest first, while there is room: a lease
 * left in the agent's table until its deadline would fill the table under a long batch. */
static void rel_flush_locked(struct mc_engine *e)
{
    struct mc_sqe sqe;
    uint32_t i = 0;

    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_RELEASE;
    sqe.flags = MC_SQE_F_NO_CQE;
    while (i < e->nrel_pending && atomic_load(&e->poison) == 0) {
        sqe.arg0 = e->rel_pending[i];
        if (!sq_write_locked(e, &sqe, NULL, 0))
            break;
        e->sq_unpublished = true;
        i++;
    }
    if (i > 0) {
        memmove(e->rel_pending, e->rel_pending + i, (e->nrel_pending - i) * sizeof(uint32_t));
        e->nrel_pending -= i;
    }
}

/* Push an SQE at our tail and publish it (with any written before it); mu held. Returns
 * false when the SQ is full now. */
static bool sq_push_locked(struct mc_engine *e, const struct mc_sqe *sqe, const char *key,
                           size_t key_len)
{
    rel_flush_locked(e);
    if (!sq_write_locked(e, sqe, key, key_len))
        return false;
    mc_ring_publish_tail(e->region->sq, e->sq_tail);
    e->sq_unpublished = false;
    return true;
}

void mc_engine_flush_locked(struct mc_engine *e)
{
    rel_flush_locked(e);
    if (!e->sq_unpublished)
        return;
    e->sq_unpublished = false;
    /* one release store for every SQE written since the last one, one doorbell */
    mc_ring_publish_tail(e->region->sq, e->sq_tail);
    mc_shm_doorbell_ring(e->region->sq);
}

void mc_engine_release_locked(struct mc_engine *e, uint32_t lease_id)
{
    struct mc_sqe sqe;

    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_RELEASE;
    sqe.flags = MC_SQE_F_NO_CQE;
    sqe.arg0 = lease_id;
    if (atomic_load(&e->poison) != 0)
        return; /* the agent is gone or broken: its leases end with it */
    rel_flush_locked(e);
    if (e->nrel_pending == 0 && sq_write_locked(e, &sqe, NULL, 0))
        e->sq_unpublished = true;
    else if (e->nrel_pending < e->rel_cap)
        e->rel_pending[e->nrel_pending++] = lease_id; /* sent with the next submission */
    /* else: more than the agent can hold for us; the lease ends at its deadline */
}

static void op_free_locked(struct mc_engine *e, uint32_t idx)
{
    struct mc_slot *o = &e->ops[idx];

    o->state = MC_SLOT_FREE;
    o->staging = -1;
    o->hold_staging = false;
    o->done = NULL;
    o->owner = NULL;
    e->ops_free[e->nops_free++] = idx;
    notify_locked(e);
    e->hooks->slots_back(e); /* ops queued above may take it */
}

/* An abandoned op's CQE arrived: free its slot, then let its submitter undo what the op
 * left behind (a lease, a started put: the engine does not know which). */
static void abandoned_done_locked(struct mc_engine *e, uint32_t idx, const struct mc_cqe *cqe)
{
    struct mc_slot *o = &e->ops[idx];
    mc_engine_done_fn *done = o->done;
    uint32_t tag = o->tag;

    op_free_locked(e, idx);
    if (done != NULL)
        done(e, NULL, tag, cqe);
}

/* Move every CQE that is ready into its op slot; only the reaper calls this, mu held. */
static void drain_locked(struct mc_engine *e)
{
    struct mc_shm_region *r = e->region;
    uint32_t tail, head = e->cq_head;
    struct mc_slot *o;
    struct mc_cqe cqe;
    uint32_t idx;

    /* acquire pairs with the agent's release of the CQ tail: the CQEs are written */
    tail = atomic_load_explicit(&r->cq->tail, memory_order_acquire);
    if (tail - head > r->lay.cq_entries) {
        poison_locked(e, MC_ERR_PROTO);
        return;
    }
    while (head != tail) {
        memcpy(&cqe, mc_shm_cqe_at(r, head), sizeof(cqe)); /* read once */
        head++;
        /* give the slot back before handling the CQE: handling it may free an op slot and
         * submit the next op, whose answer needs CQ room (release pairs with the agent's
         * acquire of the CQ head) */
        e->cq_head = head;
        mc_ring_publish_head(r->cq, head);
        idx = (uint32_t)cqe.user_data;
        o = idx < e->nops ? &e->ops[idx] : NULL;
        if (o == NULL || o->gen != (uint32_t)(cqe.user_data >> 32) ||
            (o->state != MC_SLOT_PENDING && o->state != MC_SLOT_ABANDONED)) {
            poison_locked(e, MC_ERR_PROTO); /* a CQE for no op of ours */
            break;
        }
        if (o->staging >= 0 && !(o->hold_staging && o->state == MC_SLOT_PENDING)) {
            staging_put_locked(e, (uint32_t)o->staging);
            o->staging = -1;
        }
        if (o->state == MC_SLOT_ABANDONED) {
            abandoned_done_locked(e, idx, &cqe);
        } else if (o->done != NULL) {
            /* the slot is free again before its owner moves on */
            mc_engine_done_fn *done = o->done;
            void *owner = o->owner;
            uint32_t tag = o->tag;

            op_free_locked(e, idx);
            done(e, owner, tag, &cqe);
        } else {
            o->cqe = cqe;
            o->state = MC_SLOT_DONE;
        }
    }
    e->hooks->slots_back(e);
    mc_engine_flush_locked(e); /* what the completions and releases above submitted */
    pthread_cond_broadcast(&e->cv);
}

/* Empty the eventfd (it only says "look at the CQ", which the caller is about to do). */
static void efd_drain(struct mc_engine *e)
{
    uint64_t v;

    if (e->efd >= 0)
        (void)read(e->efd, &v, sizeof(v)); /* non-blocking: EAGAIN when already empty */
}

/* Polls in a row that end with nothing before a reaper stops polling for a while, and how
 * many waits it then sleeps at once: polling that does not pay only takes a CPU. */
#define SPIN_MISSES_MAX 8u
#define SPIN_SKIP_WAITS 64u

/* Without the agent's node page (an agent from before it): this process's own count. */
static struct mc_shm_node g_local_node;

static struct mc_shm_node *spin_node(struct mc_engine *e)
{
    if (e->node != NULL)
        return e->node;
    if (atomic_load_explicit(&g_local_node.cores, memory_order_relaxed) == 0) {
        long v = sysconf(_SC_NPROCESSORS_ONLN);

        atomic_store_explicit(&g_local_node.cores, v > 0 ? (uint32_t)v : 1,
                              memory_order_relaxed);
    }
    return &g_local_node;
}

/* Whether this wait polls first: spinning allowed, no recent run of empty polls, and the
 * node admits one more poller (shm/node.h). */
static bool spin_begin(struct mc_engine *e)
{
    if (e->spin_ns == 0)
        return false;
    if (e->spin_skip > 0) {
        e->spin_skip--;
        return false;
    }
    return mc_shm_node_spin_begin(spin_node(e));
}

/*
 * The reaper's wait, without mu: poll at most spin_ns when admitted (spin_begin), then
 * sleep on the CQ doorbell for at most MC_CLIENT_LIVENESS_MS, then check that the agent
 * lives. Returns 0 when the caller should re-check (CQEs may be ready, a slot was given
 * back, or a slice passed), MC_ERR_TIMEOUT at the deadline, or the agent's liveness error.
 * One reaper per engine at a time: spin_misses and spin_skip need no lock.
 */
static int reap_wait(struct mc_engine *e, struct reap_arg *ra, uint64_t deadline_ns)
{
    struct mc_shm_ring_ctrl *cq = e->region->cq;
    uint64_t now = mc_engine_now_ns();
    uint64_t spin_end = now + e->spin_ns, next_yield = now + MC_CLIENT_YIELD_NS;
    uint64_t left_ms;
    int err;

    /* poll only while it pays: on a full machine a poller only delays the agent it waits
     * for (all-spin collapses at 8 clients on 2 cores, and under CPU hogs at 1) */
    if (spin_begin(e)) {
        /* set after the admission, cleared before the release: the agent takes back the
         * count of a client killed in between (daemon/agent/spin.h) */
        atomic_store_explicit(&cq->consumer_spinning, 1, memory_order_relaxed);
        while (now < spin_end && now < deadline_ns && !cq_ready(ra)) {
            cpu_relax();
            now = mc_engine_now_ns();
            if (now >= next_yield) {
                sched_yield(); /* the agent may be queued behind us on this core */
                next_yield = now + MC_CLIENT_YIELD_NS;
            }
        }
        atomic_store_explicit(&cq->consumer_spinning, 0, memory_order_relaxed);
        mc_shm_node_spin_end(spin_node(e));
        if (cq_ready(ra)) {
            e->spin_misses = 0;
            return 0;
        }
        if (++e->spin_misses >= SPIN_MISSES_MAX) {
            e->spin_misses = 0;
            e->spin_skip = SPIN_SKIP_WAITS;
        }
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
    return agent_liveness(e);
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
static int wait_round_locked(struct mc_engine *e, uint64_t deadline_ns)
{
    struct timespec ts;
    int err;

    err = atomic_load(&e->poison);
    if (err != 0)
        return err;
    if (mc_engine_now_ns() >= deadline_ns)
        return MC_ERR_TIMEOUT;
    if (!e->reaping) {
        struct reap_arg ra = {.e = e, .seq = atomic_load(&e->notify_seq)};

        bool drain_efd = e->efd >= 0;

        e->reaping = true;
        /* need_wakeup may be armed for the eventfd (op.c, arm_locked): a reaper reaps
         * for everyone, so the agent need not write it while we poll; the doorbell wait
         * sets it again before we sleep */
        atomic_store_explicit(&e->region->cq->need_wakeup, 0, memory_order_relaxed);
        pthread_mutex_unlock(&e->mu);
        err = reap_wait(e, &ra, deadline_ns);
        /* the agent writes the eventfd whenever need_wakeup is set (a sleeping reaper's
         * too): empty it before reading the CQ, so a write after this read is for CQEs we
         * may not see now, and leaves it readable */
        if (drain_efd)
            efd_drain(e);
        pthread_mutex_lock(&e->mu);
        e->reaping = false;
        drain_locked(e); /* also broadcasts: the next waiter may take the role */
        if (err != 0 && err != MC_ERR_TIMEOUT)
            poison_locked(e, err);
        e->hooks->settle(e, true);
    } else {
        ns_to_timespec(deadline_ns, &ts);
        err = pthread_cond_timedwait(&e->cv, &e->mu, &ts);
        err = err == ETIMEDOUT ? MC_ERR_TIMEOUT : 0;
        e->hooks->settle(e, false); /* reaped by another thread, not finished yet */
    }
    if (atomic_load(&e->poison) != 0)
        return atomic_load(&e->poison);
    return err;
}

int mc_engine_wait_round_locked(struct mc_engine *e, uint64_t deadline_ns)
{
    return wait_round_locked(e, deadline_ns);
}

void mc_engine_poll_locked(struct mc_engine *e)
{
    int err;

    if (!e->reaping) {
        if (e->efd >= 0)
            efd_drain(e);
        drain_locked(e);
        /* an agent that died leaves nothing in the CQ: a poll must notice it too */
        err = agent_liveness(e);
        if (err != 0)
            poison_locked(e, err);
    }
    e->hooks->settle(e, !e->reaping);
}

int mc_engine_staging_get(struct mc_engine *e, uint64_t deadline_ns, uint32_t *slot_p)
{
    int err = 0;

    pthread_mutex_lock(&e->mu);
    for (;;) {
        if (e->nstg_free > 0) {
            *slot_p = e->stg_free[--e->nstg_free];
            err = 0;
            break;
        }
        if (err == MC_ERR_TIMEOUT)
            break;
        err = wait_round_locked(e, deadline_ns);
        if (err != 0 && err != MC_ERR_TIMEOUT)
            break;
    }
    pthread_mutex_unlock(&e->mu);
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

/* Take a free op slot for sqe, mu held: fills in user_data, key_len and deadline_ms. */
static struct mc_slot *slot_take_locked(struct mc_engine *e, struct mc_sqe *sqe, size_t key_len,
                                        uint64_t deadline_ns, uint32_t *idx_p)
{
    uint32_t idx = e->ops_free[e->nops_free - 1];
    struct mc_slot *o = &e->ops[idx];

    sqe->user_data = ((uint64_t)(o->gen + 1) << 32) | idx;
    sqe->key_len = (uint16_t)key_len;
    sqe->deadline_ms = deadline_low32(deadline_ns);
    *idx_p = idx;
    return o;
}

/* Mark a slot taken by slot_take_locked as used, once its SQE is written; mu held. */
static void slot_use_locked(struct mc_engine *e, struct mc_slot *o, uint8_t state,
                            int32_t staging, mc_engine_done_fn *done, void *owner, uint32_t tag)
{
    e->nops_free--;
    o->gen++;
    o->staging = staging;
    o->hold_staging = false;
    o->done = done;
    o->owner = owner;
    o->tag = tag;
    o->state = state;
}

int mc_engine_submit(struct mc_engine *e, struct mc_sqe *sqe, const char *key, size_t key_len,
                     int32_t staging, bool hold_staging, uint64_t deadline_ns, uint32_t *op_p)
{
    struct timespec pause = {0, 50000};
    struct mc_slot *o;
    uint32_t idx;
    int err = 0;

    pthread_mutex_lock(&e->mu);
    for (;;) {
        err = atomic_load(&e->poison);
        if (err != 0)
            goto out_unlock;
        if (e->nops_free > 0)
            break;
        err = wait_round_locked(e, deadline_ns);
        if (err != 0 && !(err == MC_ERR_TIMEOUT && e->nops_free > 0))
            goto out_unlock;
    }
    o = slot_take_locked(e, sqe, key_len, deadline_ns, &idx);
    slot_use_locked(e, o, MC_SLOT_PENDING, staging, NULL, NULL, 0);
    o->hold_staging = hold_staging;

    /* The agent empties the SQ every loop turn, and op slots bound what it holds, so a
     * full SQ is short-lived (or there are more op slots than SQ entries): wait it out
     * politely, without the lock, which the agent does not need to advance the head. */
    while (!sq_push_locked(e, sqe, key, key_len)) {
        err = atomic_load(&e->poison);
        if (err == 0 && mc_engine_now_ns() >= deadline_ns)
            err = MC_ERR_TIMEOUT;
        if (err != 0) {
            o->staging = -1; /* not submitted: the caller keeps its staging slot */
            op_free_locked(e, idx);
            goto out_unlock;
        }
        pthread_mutex_unlock(&e->mu);
        nanosleep(&pause, NULL);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    mc_shm_doorbell_ring(e->region->sq);
    *op_p = idx;
    return 0;

out_unlock:
    pthread_mutex_unlock(&e->mu);
    return err;
}

int mc_engine_submit_locked(struct mc_engine *e, struct mc_sqe *sqe, const char *key,
                            size_t key_len, int32_t staging, mc_engine_done_fn *done,
                            void *owner, uint32_t tag, uint64_t deadline_ns, uint32_t *op_p)
{
    struct mc_slot *o;
    uint32_t idx, at;
    int err = atomic_load(&e->poison);

    if (err != 0)
        return err;
    if (e->nops_free == 0)
        return MC_ERR_BUSY;
    /* the RELEASEs that found the SQ full go first: an op written past them (a GET) would
     * reach the agent while its lease table still holds the leases they end */
    rel_flush_locked(e);
    if (e->nrel_pending > 0)
        return MC_ERR_BUSY; /* full SQ: the agent empties it each turn */
    at = e->sq_tail;
    o = slot_take_locked(e, sqe, key_len, deadline_ns, &idx);
    if (!sq_write_locked(e, sqe, key, key_len)) {
        err = atomic_load(&e->poison);
        return err != 0 ? err : MC_ERR_BUSY; /* full SQ: the agent empties it each turn */
    }
    slot_use_locked(e, o, MC_SLOT_PENDING, staging, done, owner, tag);
    o->sq_index = at;
    e->sq_unpublished = true;
    *op_p = idx;
    return 0;
}

void mc_engine_submit_detached_locked(struct mc_engine *e, struct mc_sqe *sqe)
{
    struct mc_slot *o;
    uint32_t idx, dl;

    if (atomic_load(&e->poison) != 0 || e->nops_free == 0)
        return;
    rel_flush_locked(e); /* the RELEASEs waiting go first, as for every submission */
    dl = sqe->deadline_ms; /* as given: 0 is the agent's default deadline */
    o = slot_take_locked(e, sqe, 0, 0, &idx);
    sqe->deadline_ms = dl;
    if (!sq_write_locked(e, sqe, NULL, 0))
        return;
    slot_use_locked(e, o, MC_SLOT_ABANDONED, -1, NULL, NULL, 0);
    e->sq_unpublished = true;
}

/* --- completion ----------------------------------------------------------------------- */

bool mc_engine_sqe_consumed_locked(struct mc_engine *e, uint32_t idx)
{
    /* acquire pairs with the agent's release of the SQ head: it has copied the SQE */
    uint32_t head = atomic_load_explicit(&e->region->sq->head, memory_order_acquire);

    return (int32_t)(head - e->ops[idx].sq_index) > 0;
}

void mc_engine_abandon_locked(struct mc_engine *e, uint32_t idx)
{
    struct mc_slot *o = &e->ops[idx];

    o->owner = NULL;
    if (o->state == MC_SLOT_DONE) {
        /* it finished after all: clean up as the reaper would have */
        struct mc_cqe cqe = o->cqe;

        if (o->staging >= 0) {
            staging_put_locked(e, (uint32_t)o->staging);
            o->staging = -1;
        }
        o->state = MC_SLOT_ABANDONED;
        abandoned_done_locked(e, idx, &cqe);
    } else if (o->state == MC_SLOT_PENDING) {
        o->state = MC_SLOT_ABANDONED;
    }
}

int mc_engine_wait(struct mc_engine *e, uint32_t op, uint64_t deadline_ns, struct mc_cqe *cqe_p)
{
    struct mc_slot *o = &e->ops[op];
    int err;

    pthread_mutex_lock(&e->mu);
    for (;;) {
        if (o->state == MC_SLOT_DONE) {
            *cqe_p = o->cqe;
            /* a hold_staging op's slot goes back to its owner, who gives it back after
             * reading it: op_free_locked forgets it */
            op_free_locked(e, op);
            err = 0;
            break;
        }
        err = wait_round_locked(e, deadline_ns);
        if (err == MC_ERR_TIMEOUT && o->state != MC_SLOT_DONE) {
            /* the agent may have died without the reaper noticing yet (no reaper ran) */
            int live = agent_liveness(e);

            if (live != 0) {
                poison_locked(e, live);
                err = live;
            }
            mc_engine_abandon_locked(e, op);
            break;
        }
        if (err != 0 && err != MC_ERR_TIMEOUT) {
            if (o->state == MC_SLOT_DONE)
                continue; /* its outcome arrived before the poison: report it */
            mc_engine_abandon_locked(e, op);
            break;
        }
    }
    pthread_mutex_unlock(&e->mu);
    return err;
}
