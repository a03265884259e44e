/*
 * libmc's submission engine (internal; never installed): the lowest layer of the client.
 *
 * The engine moves SQEs and CQEs through the client's region (shm/region.h): it owns the
 * SQ tail, the key slots, the op slots (one per op the agent may hold, indexed by
 * user_data), the staging slots, the CQ head, the deadlines on the monotonic clock and the
 * poisoned state. It does not know what an op means: whoever submits an op gives the slot
 * a completion function (done, owner, tag; io_uring's user_data), and the engine calls it
 * once the CQE arrives, with a NULL owner when the owner gave up on the op meanwhile (so
 * the layer above undoes what the op left behind: a lease, a started put). An op submitted
 * without a completion function keeps its CQE in the slot for mc_engine_wait.
 *
 * Threads: one mutex (e->mu) covers everything below marked "mu". Completions are reaped
 * by one thread at a time, the "reaper": whichever waiting thread finds the role free takes
 * it, sleeps on the CQ doorbell without the lock, then drains the CQ into the op slots
 * under the lock and wakes the others (e->cv). Every other waiter sleeps on e->cv. So at
 * most one thread per client spins or sleeps on the CQ, and no CQE is read twice.
 */
#ifndef MC_LIBMC_ENGINE_H
#define MC_LIBMC_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mc/mc.h>

#include "shm/node.h"
#include "shm/region.h"
#include "shm/ring.h"

/* A waiter polls its CQ at most this long before it sleeps on the doorbell, yielding the
 * CPU every MC_CLIENT_YIELD_NS, and only while the node page (shm/node.h) admits it: the
 * host is quiet and fewer than cores - 1 clients of the node poll (docs/decisions.md,
 * "Adaptive waiting"). A sleeping wake-up costs 30-40 us, a spinning one 0.1 us.
 * MC_CLIENT_SPIN_US overrides it (0: never polls). */
#define MC_CLIENT_SPIN_NS  20000
#define MC_CLIENT_YIELD_NS 2000

/* A sleeping reaper wakes at least this often to check that the agent still lives, so a
 * killed agent poisons the client within this time instead of at the op's deadline. */
#define MC_CLIENT_LIVENESS_MS 100

enum mc_slot_state {
    MC_SLOT_FREE = 0,
    MC_SLOT_PENDING,   /* submitted; its owner will collect the CQE */
    MC_SLOT_DONE,      /* CQE arrived, in .cqe; the owner has not collected it yet */
    MC_SLOT_ABANDONED, /* its owner gave up (deadline, poison): the reaper cleans up */
};

struct mc_engine;

/*
 * An op's completion, called with mu held once its CQE arrived, after its op slot (and
 * staging slot) went back: owner and tag as given at submission, or owner NULL when the
 * owner gave up on the op (mc_engine_abandon_locked) and what the op left behind is to be
 * undone. May submit (mc_engine_submit_locked); the engine publishes afterwards.
 */
typedef void mc_engine_done_fn(struct mc_engine *e, void *owner, uint32_t tag,
                               const struct mc_cqe *cqe);

/* What the layer above asks the engine to call, mu held (both may release it meanwhile). */
struct mc_engine_hooks {
    /* an op slot or staging slot came back: submit what waited for one */
    void (*slots_back)(struct mc_engine *e);
    /* a wait round or poll ended (reaper: whether this thread reaped): finish the work the
     * completions left (copies), re-arm notifications */
    void (*settle)(struct mc_engine *e, bool reaper);
};

struct mc_slot {
    uint32_t gen;            /* bumped on each use: the high half of user_data */
    uint8_t state;           /* enum mc_slot_state */
    bool hold_staging;       /* the owner reads staging after the CQE (STATS): keep the slot */
    int32_t staging;         /* staging slot the agent may read or write, or -1 */
    struct mc_cqe cqe;       /* the completion, valid in MC_SLOT_DONE */
    mc_engine_done_fn *done; /* NULL: the CQE stays in the slot for mc_engine_wait */
    void *owner;             /* done's owner argument; NULL once abandoned */
    uint32_t tag;            /* done's tag argument */
    uint32_t sq_index;       /* the SQ ring index of its SQE (consumed once head passes) */
};

struct mc_engine {
    int sock; /* tells only life: closed = agent gone */
    struct mc_shm_region *region;
    uint32_t nsegs;
    const uint8_t *seg[MC_SHM_MAX_SEGS]; /* read-only mappings of the node's segments */
    uint64_t seg_size[MC_SHM_MAX_SEGS];
    uint32_t op_timeout_ms;
    uint64_t spin_ns;   /* MC_CLIENT_SPIN_US, default MC_CLIENT_SPIN_NS: the most polling */
    struct mc_shm_node *node; /* the agent's node page; NULL: none (an older agent) */
    uint32_t spin_misses;     /* polls in a row that ended with nothing to reap */
    uint32_t spin_skip;       /* waits left that sleep at once after those misses */
    uint32_t slot_size; /* staging slot size, from the checked layout */
    uint32_t nslots;    /* staging slots */
    uint32_t nops;      /* op slots: max_inflight - 1 (engine.c says why) */
    const struct mc_engine_hooks *hooks;

    _Atomic int poison; /* 0, or the code every later call fails with */

    pthread_mutex_t mu;
    pthread_cond_t cv;   /* CLOCK_MONOTONIC; broadcast when a slot frees or CQEs land */
    uint32_t sq_tail;    /* mu: our copy; the region's tail is never read back */
    uint32_t cq_head;    /* mu, and only the reaper advances it */
    bool reaping;        /* mu: a thread holds the reaper role */
    bool sq_unpublished; /* mu: SQEs written past the published SQ tail */
    /* bumped (mu held) when a slot comes back other than by a CQE, so that a reaper
     * waiting for it on the CQ doorbell re-checks (engine.c, notify_locked) */
    _Atomic uint32_t notify_seq;
    struct mc_slot *ops; /* mu: nops slots */
    uint32_t *ops_free;  /* mu: stack of free op slot indices */
    uint32_t nops_free;
    uint32_t *rel_pending; /* mu: lease ids whose RELEASE found the SQ full: sent first */
    uint32_t nrel_pending, rel_cap;
    uint32_t *stg_free; /* mu: stack of free staging slot indices */
    uint32_t nstg_free;
    int efd;        /* the eventfd (mc_client_eventfd), -1 if none */
    bool efd_agent; /* the agent took it (hello flag accepted) */
};

/* CLOCK_MONOTONIC in ns and in ms. */
uint64_t mc_engine_now_ns(void);
uint64_t mc_engine_now_ms(void);

/* The deadline of an op submitted now: now + op_timeout_ms. */
uint64_t mc_engine_deadline(const struct mc_engine *e);

/* 0, or the code the client is poisoned with. Called at the start of every API call: a
 * closing agent (hdr->agent_state == 1) poisons the client with MC_ERR_UNAVAILABLE. */
int mc_engine_enter(struct mc_engine *e);

/* Whether the agent still holds its end of the socket, without waiting: 0, or
 * MC_ERR_UNAVAILABLE (hung up) or MC_ERR_PROTO (it sent something). Poisons nothing. */
int mc_engine_liveness(const struct mc_engine *e);

/* Set up / tear down the engine's state for a region that is attached (e->region set);
 * hooks: the layer above's (static storage). */
int mc_engine_init(struct mc_engine *e, const struct mc_engine_hooks *hooks);
void mc_engine_cleanup(struct mc_engine *e);

/* Poison the client with err (MC_ERR_UNAVAILABLE or MC_ERR_PROTO) unless it already is. */
void mc_engine_poison(struct mc_engine *e, int err);
void mc_engine_poison_locked(struct mc_engine *e, int err);

/* --- staging slots --------------------------------------------------------------------- */

/* Take a staging slot, waiting (and reaping) until one is free or deadline_ns passes.
 * Returns 0, MC_ERR_TIMEOUT or the poison code. */
int mc_engine_staging_get(struct mc_engine *e, uint64_t deadline_ns, uint32_t *slot_p);
/* Take a free staging slot now, mu held: true when *slot_p was set. */
bool mc_engine_staging_try_get_locked(struct mc_engine *e, uint32_t *slot_p);
/* Give back a slot that no submitted op holds. */
void mc_engine_staging_put(struct mc_engine *e, uint32_t slot);
void mc_engine_staging_put_locked(struct mc_engine *e, uint32_t slot);
/* The slot's bytes and staging-relative offset. */
uint8_t *mc_engine_staging_ptr(struct mc_engine *e, uint32_t slot);
uint64_t mc_engine_staging_off(const struct mc_engine *e, uint32_t slot);

/* --- submission ------------------------------------------------------------------------ */

/*
 * Submit one op whose CQE the caller collects with mc_engine_wait: wait for a free op slot
 * (until deadline_ns), write the SQE (user_data, key_len and deadline_ms filled in here)
 * and its key (key_len bytes, 0 for none), publish and ring the SQ doorbell.
 * staging: the staging slot the op uses, or -1; on success the op owns it (it is given
 * back when the CQE arrives, or by the owner for hold_staging ops), on failure the caller
 * still does. Returns 0 with *op_p set, MC_ERR_TIMEOUT, or the poison code.
 */
int mc_engine_submit(struct mc_engine *e, struct mc_sqe *sqe, const char *key, size_t key_len,
                     int32_t staging, bool hold_staging, uint64_t deadline_ns, uint32_t *op_p);

/*
 * Wait for an op's CQE until deadline_ns, reaping for every thread meanwhile. On success
 * copies the CQE into *cqe_p and frees the op slot. Otherwise the op is abandoned: its op
 * slot and staging slot stay taken until its CQE arrives (the agent may still read the
 * staging bytes). Returns 0, MC_ERR_TIMEOUT, MC_ERR_UNAVAILABLE (the agent is gone) or
 * the poison code.
 */
int mc_engine_wait(struct mc_engine *e, uint32_t op, uint64_t deadline_ns,
                   struct mc_cqe *cqe_p);

/*
 * Submit one SQE without waiting and without publishing the SQ tail, mu held: takes a free
 * op slot, writes the SQE and key; done(e, owner, tag, cqe) is called when its CQE arrives.
 * staging: as for mc_engine_submit. The tail is published (and the doorbell rung) by
 * mc_engine_flush_locked, which the caller calls before it lets go of mu.
 * Returns 0 with *op_p set, MC_ERR_BUSY (no op slot, or the SQ is full, now) or the poison
 * code.
 */
int mc_engine_submit_locked(struct mc_engine *e, struct mc_sqe *sqe, const char *key,
                            size_t key_len, int32_t staging, mc_engine_done_fn *done,
                            void *owner, uint32_t tag, uint64_t deadline_ns, uint32_t *op_p);
/* Publish SQEs written by mc_engine_submit_locked, and ring the doorbell once; mu held. */
void mc_engine_flush_locked(struct mc_engine *e);

/* Send an op whose outcome nobody waits for (PUT_ABORT after a failure), mu held: it takes
 * an op slot if one is free now, abandoned from the start; published by
 * mc_engine_flush_locked. Best effort: the agent revokes what a client leaves behind at
 * its deadline or disconnection anyway. */
void mc_engine_submit_detached_locked(struct mc_engine *e, struct mc_sqe *sqe);

/* RELEASE a lease with MC_SQE_F_NO_CQE (fire and forget; best effort, as above), mu held;
 * published by mc_engine_flush_locked. */
void mc_engine_release_locked(struct mc_engine *e, uint32_t lease_id);

/* Whether the agent has taken op slot idx's SQE off the SQ (its head passed it); mu held. */
bool mc_engine_sqe_consumed_locked(struct mc_engine *e, uint32_t idx);

/* Give up on an op (deadline, poison), mu held: its slot goes back once its CQE arrives,
 * and then its done function is called with a NULL owner. */
void mc_engine_abandon_locked(struct mc_engine *e, uint32_t op);

/* --- waiting --------------------------------------------------------------------------- */

/*
 * One round of waiting for anything to change, mu held (released meanwhile): as the
 * reaper if the role is free, else on the cond var; then the settle hook. Returns 0
 * (re-check your condition), MC_ERR_TIMEOUT (deadline_ns passed; re-check once more) or
 * the poison code.
 */
int mc_engine_wait_round_locked(struct mc_engine *e, uint64_t deadline_ns);

/* Reap what is ready now without sleeping (when no other thread is reaping), check the
 * agent's liveness, then the settle hook; mu held. Empties the eventfd. */
void mc_engine_poll_locked(struct mc_engine *e);

#endif /* MC_LIBMC_ENGINE_H */
