/*
 * libmc's client handle and its submission engine (internal; never installed).
 *
 * The engine moves ops through the client's region (shm/region.h): it owns the SQ tail,
 * the key slots, the op slots (one per op the agent may hold, indexed by user_data) and
 * the staging slots, and it reaps the CQ. It knows what an op is only as far as it must to
 * clean up after an abandoned one (a lease to release, a put handle to abort); the
 * meaning of each op is in ops.c.
 *
 * Threads: one mutex (c->mu) covers everything below marked "mu". Completions are reaped
 * by one thread at a time, the "reaper": whichever waiting thread finds the role free takes
 * it, sleeps on the CQ doorbell without the lock, then drains the CQ into the op slots
 * under the lock and wakes the others (c->cv). Every other waiter sleeps on c->cv. So at
 * most one thread per client spins or sleeps on the CQ, and no CQE is read twice.
 */
#ifndef MC_LIBMC_CLIENT_H
#define MC_LIBMC_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mc/mc.h>

#include "shm/region.h"
#include "shm/ring.h"

/* How long the reaper polls the CQ in memory before it sleeps on the doorbell. A sleeping
 * wake-up costs 30-40 us, a spinning one 0.1 us (DESIGN.md §4); spinning longer than an
 * agent's typical answer time only burns a core. Under measurement: change it here only. */
/* A waiter polls its CQ this long before it sleeps on the doorbell, yielding the CPU every
 * MC_CLIENT_YIELD_NS, and only while fewer threads of this process poll than there are
 * cores (docs/decisions.md, ring wake-up policy). MC_CLIENT_SPIN_US overrides it. */
#define MC_CLIENT_SPIN_NS 20000
#define MC_CLIENT_YIELD_NS 2000

/* A sleeping reaper wakes at least this often to check that the agent still lives, so a
 * killed agent poisons the client within this time instead of at the op's deadline. */
#define MC_CLIENT_LIVENESS_MS 100

/* The most PUT_DATA pieces one put keeps in flight (each holds a staging slot). */
#define MC_CLIENT_PUT_WINDOW 16

enum mc_op_state {
    MC_OP_STATE_FREE = 0,
    MC_OP_STATE_PENDING,   /* submitted; its owner will collect the CQE */
    MC_OP_STATE_DONE,      /* CQE arrived, in .cqe; the owner has not collected it yet */
    MC_OP_STATE_ABANDONED, /* its owner gave up (deadline, poison): the reaper cleans up */
};

struct mc_op_slot {
    uint32_t gen;      /* bumped on each use: the high half of user_data */
    uint8_t state;     /* enum mc_op_state */
    uint8_t opcode;    /* enum mc_shm_op */
    bool hold_staging; /* the owner reads staging after the CQE (STATS): keep the slot */
    int32_t staging;   /* staging slot the agent may read or write, or -1 */
    struct mc_cqe cqe; /* the completion, valid in MC_OP_STATE_DONE */
};

struct mc_client {
    int sock; /* tells only life: closed = agent gone */
    struct mc_shm_region *region;
    uint32_t nsegs;
    const uint8_t *seg[MC_SHM_MAX_SEGS]; /* read-only mappings of the node's segments */
    uint64_t seg_size[MC_SHM_MAX_SEGS];
    uint32_t op_timeout_ms;
    uint64_t spin_ns;   /* MC_CLIENT_SPIN_US, default MC_CLIENT_SPIN_NS */
    uint32_t slot_size; /* staging slot size, from the checked layout */
    uint32_t nslots;    /* staging slots */
    uint32_t nops;      /* op slots: max_inflight - 1 (engine.c says why) */

    _Atomic int poison; /* 0, or the code every later call fails with */

    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; broadcast when a slot frees or CQEs land */
    uint32_t sq_tail;  /* mu: our copy; the region's tail is never read back */
    uint32_t cq_head;  /* mu, and only the reaper advances it */
    bool reaping;      /* mu: a thread holds the reaper role */
    /* bumped (mu held) when a slot comes back other than by a CQE, so that a reaper
     * waiting for it on the CQ doorbell re-checks (engine.c, notify_locked) */
    _Atomic uint32_t notify_seq;
    struct mc_op_slot *ops; /* mu: nops slots */
    uint32_t *ops_free;     /* mu: stack of free op slot indices */
    uint32_t nops_free;
    uint32_t *stg_free; /* mu: stack of free staging slot indices */
    uint32_t nstg_free;
};

/* CLOCK_MONOTONIC in ns and in ms. */
uint64_t mc_client_now_ns(void);
uint64_t mc_client_now_ms(void);

/* The deadline of an op submitted now: now + op_timeout_ms. */
uint64_t mc_client_deadline(const struct mc_client *c);

/* 0, or the code the client is poisoned with. Called at the start of every API call: a
 * closing agent (hdr->agent_state == 1) poisons the client with MC_ERR_UNAVAILABLE. */
int mc_client_enter(struct mc_client *c);

/* Set up / tear down the engine's state for a region that is attached (c->region set). */
int mc_client_engine_init(struct mc_client *c);
void mc_client_engine_cleanup(struct mc_client *c);

/* Take a staging slot, waiting (and reaping) until one is free or deadline_ns passes.
 * Returns 0, MC_ERR_TIMEOUT or the poison code. */
int mc_client_staging_get(struct mc_client *c, uint64_t deadline_ns, uint32_t *slot_p);
/* Take a staging slot if one is free now: true when *slot_p was set. */
bool mc_client_staging_try_get(struct mc_client *c, uint32_t *slot_p);
/* Give back a slot that no submitted op holds. */
void mc_client_staging_put(struct mc_client *c, uint32_t slot);
/* The slot's bytes and staging-relative offset. */
uint8_t *mc_client_staging_ptr(struct mc_client *c, uint32_t slot);
uint64_t mc_client_staging_off(const struct mc_client *c, uint32_t slot);

/*
 * Submit one op: wait for a free op slot (until deadline_ns; the caller must not hold
 * uncollected ops meanwhile, see mc_client_try_submit), write the SQE (sqe with
 * user_data and key_len filled in here) and its key (key_len bytes, 0 for none), publish
 * and ring the SQ doorbell. sqe->timeout_ms is set to the time left to deadline_ns.
 * staging: the staging slot the op uses, or -1; on success the op owns it (it is given
 * back when the CQE arrives, or by the owner for hold_staging ops), on failure the caller
 * still does.
 * Returns 0 with *op_p set, MC_ERR_TIMEOUT, or the poison code.
 */
int mc_client_submit(struct mc_client *c, struct mc_sqe *sqe, const char *key, size_t key_len,
                     int32_t staging, bool hold_staging, uint64_t deadline_ns, uint32_t *op_p);

/*
 * mc_client_submit without waiting for an op slot: MC_ERR_BUSY when none is free now. For
 * a caller that holds ops it has not collected yet: waiting for a slot that only its own
 * uncollected ops hold would deadlock until the deadline. Collect one, then retry.
 */
int mc_client_try_submit(struct mc_client *c, struct mc_sqe *sqe, const char *key,
                         size_t key_len, int32_t staging, uint64_t deadline_ns, uint32_t *op_p);

/*
 * Wait for an op's CQE until deadline_ns, reaping for every thread meanwhile. On success
 * copies the CQE into *cqe_p and frees the op slot. Otherwise the op is abandoned: its op
 * slot and staging slot stay taken until its CQE arrives (the agent may still read the
 * staging bytes), and the reaper then releases what the op left behind (a GET's lease, a
 * PUT_START's put handle).
 * Returns 0, MC_ERR_TIMEOUT, MC_ERR_UNAVAILABLE (the agent is gone) or the poison code.
 */
int mc_client_wait(struct mc_client *c, uint32_t op, uint64_t deadline_ns,
                   struct mc_cqe *cqe_p);

/* Give up on an op without waiting (as mc_client_wait does at its deadline). */
void mc_client_abandon(struct mc_client *c, uint32_t op);

/* Send an op whose outcome nobody waits for (PUT_ABORT after a failure): it takes an op
 * slot if one is free now, abandoned from the start. Best effort: the agent revokes what a
 * client leaves behind at its deadline or disconnection anyway. */
void mc_client_submit_detached(struct mc_client *c, struct mc_sqe *sqe);

/* RELEASE a lease with MC_SQE_F_NO_CQE (fire and forget; best effort, as above). */
void mc_client_release(struct mc_client *c, uint32_t lease_id);

/* Poison the client with err (MC_ERR_UNAVAILABLE or MC_ERR_PROTO) unless it already is. */
void mc_client_poison(struct mc_client *c, int err);

/*
 * The agent's statistics as JSON (the STATS op), for mcctl: *json_p is a malloc'ed,
 * NUL-terminated string the caller frees; *len_p its length. Internal to libmc and its
 * tools (not exported from libmc.so). Returns 0 or an MC_ERR_* code.
 */
int mc_client_stats_json(mc_client_t *c, char **json_p, size_t *len_p);

#endif /* MC_LIBMC_CLIENT_H */
