/*
 * mcstore limits and put flags: the numbers that the client API (<mc/mc.h>), the ring ABI
 * between libmc and the agent (shm/ring.h) and the daemons all use, defined here once.
 * Included by <mc/mc.h>; may be included on its own.
 */
#ifndef MC_LIMITS_H
#define MC_LIMITS_H

#include <stdint.h>

/* The longest key, in bytes, not counting the terminating NUL. */
#define MC_KEY_MAX 512

/* The most replicas a put may ask for (mc_put_opts_t.replicas); more cannot be placed
 * (MC_ERR_NO_SPACE). */
#define MC_REPLICAS_MAX 8

/* The longest TTL (mc_put_opts_t.ttl_ms), in milliseconds: 200 days. A larger ttl_ms is
 * MC_ERR_INVALID. */
#define MC_TTL_MAX_MS (UINT64_C(200) * 24 * 3600 * 1000)

/*
 * Put flags (mc_put_opts_t.flags). Any bit not defined here is MC_ERR_INVALID.
 */
/* Write a new version even if the key has one. Readers keep the old version until the new
 * one is complete; an upsert of the same key supersedes any older put still in flight (an
 * upsert or a plain put), which then ends with MC_ERR_CANCELED. Without this flag, a put on a
 * key that has a readable version is MC_ERR_EXISTS and changes nothing. */
#define MC_PUT_UPSERT (1u << 0)
/* Soft pin: evicted only when nothing unpinned is left to evict. The pin lapses after its
 * own TTL (30 min by default, agent configuration); the object then stays, unpinned. */
#define MC_PUT_PIN_SOFT (1u << 1)
/* Hard pin: never evicted, only removed or expired (ttl_ms). Hard-pinned bytes are capped
 * per segment (hard_pin_max_ratio, 0.5 by default); a put over the cap is
 * MC_ERR_NO_SPACE. Pins are not persistence: a node's loss still loses its replicas.
 * MC_PUT_PIN_SOFT and MC_PUT_PIN_HARD together are MC_ERR_INVALID. */
#define MC_PUT_PIN_HARD (1u << 2)
/* Store no checksum: reads of this object are not verified (and never MC_ERR_CORRUPT). */
#define MC_PUT_NO_CHECKSUM (1u << 3)
/* Allow replicas in one failure domain when there are fewer domains than replicas;
 * without it such a put fails with MC_ERR_NO_SPACE. */
#define MC_PUT_SAME_DOMAIN_OK (1u << 4)
/* Place the replicas in GPU segments (agents started with --gpu, docs/gpu.md) instead of
 * DRAM: MC_ERR_NO_SPACE when the tenant has no GPU segment. Readers on the owner's node get
 * the bytes staged through host memory by the agent; so do readers elsewhere. */
#define MC_PUT_TIER_GPU (1u << 6)
/* Every flag a put carries to the agent. */
#define MC_PUT_FLAGS_ALL                                                                       \
    (MC_PUT_UPSERT | MC_PUT_PIN_SOFT | MC_PUT_PIN_HARD | MC_PUT_NO_CHECKSUM |                  \
     MC_PUT_SAME_DOMAIN_OK | MC_PUT_TIER_GPU)
/* Write-once, and content-addressed keys make "already stored" a success: a plain put on a
 * key that has a readable version ends with MC_PRESENT (2) instead of MC_ERR_EXISTS, and a
 * batch counts it among the stored items while results[i] still tells it apart (0: stored
 * now, MC_PRESENT: was there). Nothing is written either way. With MC_PUT_UPSERT it changes
 * nothing. libmc's own: it is not sent to the agent. */
#define MC_PUT_EXISTS_OK (1u << 5)

#endif /* MC_LIMITS_H */
