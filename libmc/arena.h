/*
 * Arenas (internal; never installed): zero-copy memory shared with the agent, the layer
 * above the engine (engine.h) and below the ops (op.h). arena.c allocates, registers and
 * frees arena buffers and tracks which ranges ops own; it does not know the ops.
 *
 * Locking: arena_mu guards blocks and uses; it is taken after the engine's mu, never before
 * it, and nothing is locked under it. Arena bases and sizes are published with the release
 * store of narenas, so lookups (mc_arena_find) take no lock.
 */
#ifndef MC_LIBMC_ARENA_H
#define MC_LIBMC_ARENA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libmc/engine.h"
#include "shm/ring.h"

/* Each arena is a sealed memfd of at least this many bytes; a larger request gets an arena
 * of its own size rounded up to MC_CLIENT_ARENA_ROUND. */
#define MC_CLIENT_ARENA_SIZE  (64u << 20)
#define MC_CLIENT_ARENA_ROUND (2u << 20)
#define MC_CLIENT_ARENA_ALIGN 64u

/* One arena: a sealed memfd mapped read-write here and by the agent. */
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

/* A client's arenas. */
struct mc_arenas {
    pthread_mutex_t arena_mu;
    struct mc_arena arenas[MC_SHM_MAX_ARENAS];
    _Atomic uint32_t narenas;  /* published with release once an arena is set up */
    struct mc_arena_use *uses; /* arena_mu: ranges owned by ops */
};

/* Set up / tear down (unmapping every arena: mc_close) a client's arenas. */
int mc_arena_init(struct mc_arenas *as);
void mc_arena_cleanup(struct mc_arenas *as);

/* The arena holding [p, p + len), as its id and offset: true when it lies wholly inside
 * one arena. Lock-free (arenas are only appended, never unmapped before mc_close). */
bool mc_arena_find(struct mc_arenas *as, const void *p, size_t len, uint32_t *id_p,
                   uint64_t *off_p);

/* Mark [p, p + len) owned by an op (u: the op's record) if it lies in an arena; no-op
 * otherwise. mc_arena_unuse undoes it (no-op when not marked). */
void mc_arena_use(struct mc_arenas *as, struct mc_arena_use *u, const void *p, size_t len);
void mc_arena_unuse(struct mc_arenas *as, struct mc_arena_use *u);

/* Allocate len bytes (len > 0) of arena memory, adding and registering an arena with the
 * agent on e's socket when none has room. 0 with *ptr_p set, MC_ERR_NOMEM, MC_ERR_IO or
 * MC_ERR_UNAVAILABLE (the client is poisoned). */
int mc_arena_alloc(struct mc_engine *e, struct mc_arenas *as, size_t len, void **ptr_p);

/* Free a buffer mc_arena_alloc returned: 0, MC_ERR_INVALID (not such a buffer) or
 * MC_ERR_BUSY (an op owns part of it). */
int mc_arena_free(struct mc_arenas *as, void *ptr);

#endif /* MC_LIBMC_ARENA_H */
