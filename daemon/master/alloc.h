/*
 * mc_alloc: the per-segment offset allocator of the master.
 *
 * It hands out [offset, offset + len) ranges of a segment it never touches (the bytes live
 * in an agent's memory): a two-level segregated-fit allocator (TLSF style) with O(1)
 * alloc and free, immediate coalescing of physical neighbours, and one fixed alignment per
 * allocator (the granule). It is not thread-safe: the master serialises calls per segment.
 *
 * Each allocated block carries an owner pointer (the master's version record) so the
 * eviction clock can walk the blocks of a segment in address order without any per-object
 * list. Block ids are stable until the block is freed.
 *
 * Memory: one 24-byte node per block (free or used), in chunked arrays that never move.
 */
#ifndef MC_MASTER_ALLOC_H
#define MC_MASTER_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

struct mc_alloc;

#define MC_ALLOC_NONE UINT32_MAX /* "no block" id */

/* Largest granule-unit count a block may have: offsets and lengths are kept as uint32_t
 * counts of granules, so a segment holds at most granule * (2^32 - 1) bytes. */
#define MC_ALLOC_MAX_UNITS 0xFFFFFFFFu

/*
 * Create an allocator for a segment of `size` bytes. `granule` is a power of two >= 8;
 * every offset and every length handed out is a multiple of it. The usable size is `size`
 * rounded down to the granule. Errors: MC_ERR_INVALID (granule not a power of two,
 * size smaller than one granule, or size / granule > MC_ALLOC_MAX_UNITS), MC_ERR_NOMEM.
 */
int mc_alloc_create(uint64_t size, uint64_t granule, struct mc_alloc **a_p);
void mc_alloc_destroy(struct mc_alloc *a); /* accepts NULL; forgets every block */

/*
 * Allocate `len` bytes (rounded up to the granule). On success *id_p names the block and
 * its owner pointer is NULL. Errors: MC_ERR_INVALID (len 0), MC_ERR_TOO_LARGE (len larger
 * than the whole segment), MC_ERR_NO_SPACE (no free block can hold it right now),
 * MC_ERR_NOMEM (node storage could not grow). Never fails while a free block >= the
 * rounded length exists (after the O(1) good-fit search misses, it scans the request's
 * own size class).
 */
int mc_alloc_alloc(struct mc_alloc *a, uint64_t len, uint32_t *id_p);

/*
 * Allocate exactly the bytes [off, off + len) (len rounded up to the granule): a block an
 * agent reports holding after a restart. Errors: MC_ERR_INVALID (len 0, off not on the
 * granule, or past the segment), MC_ERR_EXISTS (part of it is allocated already),
 * MC_ERR_NOMEM. Claims in ascending offset order cost O(1); others walk the blocks.
 */
int mc_alloc_claim(struct mc_alloc *a, uint64_t off, uint64_t len, uint32_t *id_p);

/* Free an allocated block; merges it with free physical neighbours. `id` must be a live
 * allocated block (an assertion guards it: the master never passes outside input here). */
void mc_alloc_free(struct mc_alloc *a, uint32_t id);

bool mc_alloc_is_used(const struct mc_alloc *a, uint32_t id); /* false for bad/free ids */
uint64_t mc_alloc_offset(const struct mc_alloc *a, uint32_t id); /* bytes */
uint64_t mc_alloc_len(const struct mc_alloc *a, uint32_t id);    /* bytes, rounded */
void *mc_alloc_owner(const struct mc_alloc *a, uint32_t id);
void mc_alloc_set_owner(struct mc_alloc *a, uint32_t id, void *owner);

uint64_t mc_alloc_capacity(const struct mc_alloc *a);   /* usable bytes */
uint64_t mc_alloc_free_bytes(const struct mc_alloc *a); /* sum of free blocks */
uint64_t mc_alloc_used_bytes(const struct mc_alloc *a); /* capacity - free */
uint64_t mc_alloc_largest_free(const struct mc_alloc *a); /* exact, bytes */
uint64_t mc_alloc_granule(const struct mc_alloc *a);
uint32_t mc_alloc_used_blocks(const struct mc_alloc *a);

/*
 * The clock hand: returns the next *allocated* block after the hand in address order,
 * wrapping around at the end of the segment, and moves the hand onto it; MC_ALLOC_NONE
 * when nothing is allocated. Freeing the block under the hand is allowed at any time (the
 * allocator moves the hand back to a surviving neighbour), so an eviction loop may free
 * what it was just handed.
 */
uint32_t mc_alloc_clock_next(struct mc_alloc *a);

/*
 * Move the hand back so that the next mc_alloc_clock_next returns `id` (a live allocated
 * block): an eviction loop that cleared reference bits ahead of it and found no victim
 * walks the same blocks again, oldest first, instead of going on past them.
 */
void mc_alloc_clock_rewind(struct mc_alloc *a, uint32_t id);

/* Bytes of metadata the allocator holds (node chunks + struct), for the budget figures. */
uint64_t mc_alloc_meta_bytes(const struct mc_alloc *a);

/* Internal consistency check for tests: free lists, bitmaps, physical chain, counters.
 * Returns true when everything agrees. O(blocks). */
bool mc_alloc_check(const struct mc_alloc *a);

#endif /* MC_MASTER_ALLOC_H */
