/*
 * Replica I/O: how the put and the GET move an object's bytes to and from replicas that are
 * not in this agent's own segment. The op rooms call through this table and never know
 * whether a cluster is behind it: standalone, the agent is a cluster of one, every replica
 * is its own, and the local implementation (rio_local.c) has nothing to move; in cluster
 * mode the UCX implementation (xfer.c) writes to and reads from the peers.
 *
 * Completions come through the callback given at submission, exactly once, when the
 * transfer is final: no byte of `src` (write) or of the landing block (read) is touched
 * any more. A submission that returns an error started nothing and calls nothing.
 */
#ifndef MC_AGENT_RIO_H
#define MC_AGENT_RIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/master/master.h"

/* A write: status 0 once the owner said the bytes are in place. */
typedef void (*mc_rio_write_fn)(void *ctx, int status);
/* A read: status 0 with the bytes in landing block land_id (of the reader's tenant's landing
 * segment), or land_id MC_RIO_IN_ARENA: in the reader's arena span given to read, or
 * land_id | MC_RIO_ARENA_TAIL: the object's bytes in the arena span, the rest of its image
 * (from byte `size` on: padding and checksum trailer) at the start of landing block
 * land_id & ~MC_RIO_ARENA_TAIL; read from replica rep. */
#define MC_RIO_IN_ARENA UINT32_MAX
#define MC_RIO_ARENA_TAIL 0x80000000u
typedef void (*mc_rio_read_fn)(void *ctx, int status, uint32_t land_id, uint32_t rep);
/* Does the reader still want the bytes (its client is still there)? */
typedef bool (*mc_rio_wanted_fn)(void *ctx);

/* A write's tail and key together stay within this (both ride in its header) */
#define MC_RIO_TAIL_MAX 960u

struct mc_rio_write {
    const struct mc_master_replica *r;
    uint64_t version;
    const char *key;
    size_t key_len;
    const uint8_t *src;  /* the image's bytes [from, from + len) */
    uint64_t from, len;  /* at offset r->offset + from of the replica */
    const uint8_t *tail; /* NULL, or the image's next tail_len bytes (from + len on), sent in
                            the write's header (tail_len + key_len <= MC_RIO_TAIL_MAX);
                            valid until done */
    size_t tail_len;
    uint64_t deadline_ms;
};

/* A published object, told to the owner of replica r (its index of complete objects). */
struct mc_rio_publish {
    const struct mc_master_replica *r;
    const char *key;
    size_t key_len;
    uint64_t version, size;
    uint32_t flags;
    uint64_t ttl_ms;
};

struct mc_rio_ops {
    int (*write)(void *impl, const struct mc_rio_write *w, mc_rio_write_fn done, void *ctx);
    /* the first replica of g not in skip (a bit per replica) and not ours that lands
     * answers; replicas that fail are passed over in turn, a stalled one is read beside.
     * arena (NULL: none): the reader's memory, arena_room bytes (at least the object's
     * size; if less than its mc_shm_alloc_len image, the rest of the image lands apart:
     * MC_RIO_ARENA_TAIL), that at most ONE transfer may be received into (the first; any
     * other lands in the landing segment), and never past its completion: done runs only
     * once that transfer is final, by deadline_ms (cut then if still moving), so that the
     * caller may be answered and its buffer reused. An implementation that cannot honour
     * it ignores it. */
    int (*read)(void *impl, const struct mc_master_get_result *g, uint32_t skip,
                uint32_t tenant, uint64_t deadline_ms, uint8_t *arena, uint64_t arena_room,
                mc_rio_read_fn done, mc_rio_wanted_fn wanted, void *ctx);
    /* how long a lease the master grants lasts, counted from when it was asked for */
    uint64_t (*lease_ttl_ms)(void *impl);
    /* optional: tell the owner of a replica not ours that its object is published (sent
     * and forgotten: an owner that misses it does not report that replica to a new master) */
    void (*publish)(void *impl, const struct mc_rio_publish *p);
};

struct mc_rio {
    const struct mc_rio_ops *ops;
    void *impl;
};

/* The cluster of one: no replica is anyone else's. */
extern const struct mc_rio_ops mc_rio_local_ops;

#endif /* MC_AGENT_RIO_H */
