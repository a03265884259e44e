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

/* Puts whose bytes the agent reads straight from the caller's memory (an arena, or any
 * address through process_vm_readv): up to MC_CLIENT_DIRECT_ONE bytes go as one PUT, larger
 * ones as PUT_START + PUT_DATA pieces of MC_CLIENT_DIRECT_PIECE bytes (a multiple of the
 * checksum chunk, as the protocol wants for every piece but the last), so the agent can
 * checksum and copy pieces in parallel and a failure costs one piece, not the object. */
#define MC_CLIENT_DIRECT_ONE   (64u << 20)
#define MC_CLIENT_DIRECT_PIECE (16u << 20)

/* Arenas (arena.c): each is a sealed memfd of at least this many bytes; a larger request
 * gets an arena of its own size rounded up to MC_CLIENT_ARENA_ROUND. */
#define MC_CLIENT_ARENA_SIZE  (64u << 20)
#define MC_CLIENT_ARENA_ROUND (2u << 20)
#define MC_CLIENT_ARENA_ALIGN 64u

/* An op whose deadline passed this long ago without the agent's own MC_ERR_TIMEOUT answer
 * is given up by libmc (the agent carries the same deadline in sqe.deadline_ms, so this is
 * only for an agent that stopped answering). Never for an op whose SQE names the caller's
 * memory (an arena or MC_SQE_F_USER): that one waits for its CQE or the agent's death. */
#define MC_CLIENT_EXPIRE_GRACE_MS MC_DEADLINE_GRACE_MS /* public: mc.h, "Deadlines" */

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
    struct mc_op *aop; /* the async op this slot serves (its CQE goes to async.c), or NULL */
    uint32_t tag;      /* the async op's step (enum mc_aop_step in async.c) */
    uint32_t sq_index; /* async: the SQ ring index of its SQE (consumed once head passes) */
};

/* One arena: a sealed memfd mapped read-write here and by the agent (arena.c). */
struct mc_arena_blk;
struct mc_arena {
    uint8_t *base;
    size_t size;
    struct mc_arena_blk *blocks; /* arena_mu: every block, by address, free or not */
};

/* A range of arena memory that an op owns (mc_buf_free is MC_ERR_BUSY while one overlaps
 * the buffer). Lives in the op (sync calls: on their stack); arena_mu. */
struct mc_arena_use {
    uintptr_t lo, hi;
    struct mc_arena_use *prev, *next;
    bool linked;
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
    uint32_t *rel_pending; /* mu: lease ids whose RELEASE found the SQ full: sent first */
    uint32_t nrel_pending, rel_cap;
    uint32_t *stg_free; /* mu: stack of free staging slot indices */
    uint32_t nstg_free;

    /* async ops (async.c), all mu */
    struct mc_op *all;                /* every op not freed, and detached ones not final */
    struct mc_op *aq_head, *aq_tail;  /* ops waiting for an op or staging slot, FIFO */
    struct mc_op *copy_head;          /* GETs whose CQE arrived: copy, verify, release */
    uint32_t ncopies;                 /* on copy_head or being copied: each holds a lease */
    uint32_t async_live;              /* async ops not final */
    bool kicking;                     /* async_kick_locked is running (no re-entry) */
    bool sq_unpublished;              /* SQEs written past the published SQ tail */
    int efd;                          /* the eventfd (mc_client_eventfd), -1 if none */
    bool efd_agent;                   /* the agent took it (hello flag accepted) */
    _Atomic bool user_ok;             /* MC_SQE_F_USER allowed: not disabled, not DENIED */

    /* arenas (arena.c) */
    pthread_mutex_t arena_mu;         /* after mu in the lock order; nothing below it */
    struct mc_arena arenas[MC_SHM_MAX_ARENAS];
    _Atomic uint32_t narenas;         /* published with release once an arena is set up */
    struct mc_arena_use *uses;        /* arena_mu: ranges owned by ops */
};

/* Argument checks shared by the sync and async entry points (ops.c). */
int mc_client_key_check(const char *key, size_t *len_p);
int mc_client_opts_check(const mc_put_opts_t *o);

/* CLOCK_MONOTONIC in ns and in ms. */
uint64_t mc_client_now_ns(void);
uint64_t mc_client_now_ms(void);

/* The deadline of an op submitted now: now + op_timeout_ms. */
uint64_t mc_client_deadline(const struct mc_client *c);

/* 0, or the code the client is poisoned with. Called at the start of every API call: a
 * closing agent (hdr->agent_state == 1) poisons the client with MC_ERR_UNAVAILABLE. */
int mc_client_enter(struct mc_client *c);

/* Whether the agent still holds its end of the socket, without waiting: 0, or
 * MC_ERR_UNAVAILABLE (hung up) or MC_ERR_PROTO (it sent something). Poisons nothing. */
int mc_client_liveness(const struct mc_client *c);

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
 * and ring the SQ doorbell. sqe->deadline_ms carries deadline_ns (absolute).
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

/* --- async engine hooks (engine.c <-> async.c) ------------------------------------------ */

/*
 * Submit one SQE for async op aop (tag: its step) without waiting and without publishing
 * the SQ tail, mu held: takes a free op slot, writes the SQE and key. staging: as for
 * mc_client_submit (owned by the slot on success). The tail is published (and the doorbell
 * rung) by mc_client_flush_locked, which the caller calls before it lets go of mu.
 * Returns 0 with *op_p set, MC_ERR_BUSY (no op slot, or the SQ is full, now) or the poison
 * code.
 */
int mc_client_submit_locked(struct mc_client *c, struct mc_sqe *sqe, const char *key,
                            size_t key_len, int32_t staging, struct mc_op *aop, uint32_t tag,
                            uint64_t deadline_ns, uint32_t *op_p);
/* Publish SQEs written by mc_client_submit_locked, and ring the doorbell once; mu held. */
void mc_client_flush_locked(struct mc_client *c);
/* Take a free staging slot now, mu held: true when *slot_p was set. */
bool mc_client_staging_try_get_locked(struct mc_client *c, uint32_t *slot_p);
void mc_client_staging_put_locked(struct mc_client *c, uint32_t slot);
/* Whether the agent has taken op slot idx's SQE off the SQ (its head passed it). */
bool mc_client_sqe_consumed_locked(struct mc_client *c, uint32_t idx);
/* Give up an async op's slot (deadline): its CQE then goes to the abandoned path. */
void mc_client_abandon_locked(struct mc_client *c, uint32_t op);
/* mc_client_submit_detached with mu held; published by mc_client_flush_locked. */
void mc_client_submit_detached_locked(struct mc_client *c, struct mc_sqe *sqe);
/* mc_client_poison with mu held. */
void mc_client_poison_locked(struct mc_client *c, int err);
/* Push RELEASE of a lease (no CQE) under mu; published by mc_client_flush_locked. */
void mc_client_release_locked(struct mc_client *c, uint32_t lease_id);

/*
 * One round of waiting for anything to change, mu held (released meanwhile), as
 * engine.c's waiters do: reaps for every thread, runs async copies. Returns 0, MC_ERR_TIMEOUT
 * or the poison code.
 */
int mc_client_wait_round_locked(struct mc_client *c, uint64_t deadline_ns);
/* Reap what is ready now without sleeping (no other thread reaping), mu held. */
void mc_client_poll_locked(struct mc_client *c);

/* async.c, called by engine.c with mu held: */
/* a CQE for aop's slot arrived (the slot is already free) */
void mc_async_cqe_locked(struct mc_client *c, struct mc_op *aop, uint32_t tag,
                         const struct mc_cqe *cqe);
/* op slots or staging slots came back: submit what waits for them */
void mc_async_kick_locked(struct mc_client *c);
/* copy, verify and release the GETs whose CQE arrived (releases mu meanwhile) */
void mc_async_run_copies_locked(struct mc_client *c);
/* after a reap: re-arm cq.need_wakeup while async ops are outstanding and nobody waits */
void mc_async_arm_locked(struct mc_client *c);

/* The GET CQE's object inside our segment mapping, or NULL when the agent named a place
 * outside it (ops.c). */
const uint8_t *mc_client_get_location(struct mc_client *c, const struct mc_cqe *cqe,
                                      bool checksum);
/* Copy and verify an object (ops.c): 0 or MC_ERR_CORRUPT (buf zeroed). */
int mc_client_copy_verified(uint8_t *buf, const uint8_t *obj, uint64_t size, bool checksum);

/* Whether mc_put of buf should go through mc_client_put_direct: an arena buffer, or one
 * larger than a staging slot while the user-memory path is allowed (async.c). */
bool mc_client_put_is_direct(struct mc_client *c, const void *buf, size_t len);
/* mc_put of memory the agent reads itself (arena or MC_SQE_F_USER, falling back to staging
 * when the agent answers MC_ERR_DENIED): returns the put's status. Waits past the deadline
 * while the agent may still read buf (async.c). */
int mc_client_put_direct(struct mc_client *c, const char *key, size_t key_len, const void *buf,
                         size_t len, const mc_put_opts_t *o, uint64_t deadline);

/* Reap what is ready now without sleeping (when no other thread is reaping), and give up
 * the ops whose deadline and grace passed, detached ones included; empties the eventfd.
 * Takes mu (async.c: mc_client_poll, mc_buf_free). */
void mc_async_reap(struct mc_client *c);

/* Close-time: cancel every async op, wait until all are final, free them (async.c). */
void mc_async_close(struct mc_client *c);

/* --- arenas (arena.c) ------------------------------------------------------------------ */

/* The arena holding [p, p + len), as its id and offset: true when it lies wholly inside
 * one arena. Lock-free (arenas are only appended, never unmapped before mc_close). */
bool mc_arena_find(struct mc_client *c, const void *p, size_t len, uint32_t *id_p,
                   uint64_t *off_p);
/* Mark [p, p + len) owned by an op (u: the op's record) if it lies in an arena; no-op
 * otherwise. mc_arena_unuse undoes it (no-op when not marked). */
void mc_arena_use(struct mc_client *c, struct mc_arena_use *u, const void *p, size_t len);
void mc_arena_unuse(struct mc_client *c, struct mc_arena_use *u);
/* Unmap every arena (mc_close). */
void mc_arena_cleanup(struct mc_client *c);

/* --- internal sync helpers for mcctl ---------------------------------------------------- */

/*
 * One page of LIST (mcctl ls): up to max keys starting with prefix (prefix_len 0..512
 * bytes), from *cursor_p (0 = the start). Calls fn(arg, key, key_len) for each key in
 * order; *cursor_p becomes the next cursor (0 = done). Returns the number of keys listed,
 * or an MC_ERR_* code (fn's non-zero return stops the page and is returned as is).
 */
int mc_client_list(mc_client_t *c, const char *prefix, size_t prefix_len, uint64_t *cursor_p,
                   uint32_t max, int (*fn)(void *arg, const char *key, size_t key_len),
                   void *arg);

/* DRAIN (mcctl drain / undrain): the master drains (on) or undrains the node named `node`
 * (1..63 graphic ASCII bytes). Returns 0 or an MC_ERR_* code (MC_ERR_NOT_FOUND: no live node
 * of that name). */
int mc_client_drain(mc_client_t *c, const char *node, bool on);

/* REMOVE_PREFIX (mcctl rm --prefix): the number of objects removed, or an MC_ERR_* code.
 * prefix: 1 .. 512 bytes. */
int mc_client_remove_prefix(mc_client_t *c, const char *prefix, uint64_t *removed_p);

/*
 * The agent's statistics as JSON (the STATS op), for mcctl: *json_p is a malloc'ed,
 * NUL-terminated string the caller frees; *len_p its length. Internal to libmc and its
 * tools (not exported from libmc.so). Returns 0 or an MC_ERR_* code.
 */
int mc_client_stats_json(mc_client_t *c, char **json_p, size_t *len_p);
/* The same with MC_STATS_F_CLUSTER: the cluster's nodes, domains and segments (mcctl cluster). */
int mc_client_cluster_json(mc_client_t *c, char **json_p, size_t *len_p);

#endif /* MC_LIBMC_CLIENT_H */
