/*
 * The owner's index of a segment (docs/master.md, "What an owner holds"): the complete
 * objects whose bytes lie in one of our segments, with what a new master needs to know them
 * again (key, version, size, flags, TTL, extent). A new leader rebuilds its directory from
 * these (mc_master_restore), so the index must be exact in both directions:
 *
 *   - an entry is added only for a published object: the writer tells each owner once its
 *     put_end was answered 0 (PUBLISH), the standalone agent when its embedded master
 *     published;
 *   - an entry goes when the master frees the block (DROP from the master: removed,
 *     evicted, retired, TTL), when a newer write lands on any byte of its extent (the
 *     block was freed and handed out again), when its TTL passes (by our clock), and when
 *     a master refused it on restore (forget).
 *
 * Entries never overlap: adding one removes every entry its extent touches. Ordered by
 * offset (a treap), so both the overlap test and the paged walk are O(log n) per step.
 * Pure logic, one thread; time is passed in.
 */
#ifndef MC_AGENT_HOLDIDX_H
#define MC_AGENT_HOLDIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mc_holdidx;

struct mc_holdidx_entry {
    const char *key;
    size_t key_len;     /* 1..MC_DIR_KEY_MAX */
    uint64_t offset;    /* the extent [offset, offset + alloc_len) in the segment */
    uint64_t alloc_len; /* > 0 */
    uint64_t size;      /* the object's size (<= alloc_len) */
    uint64_t version;   /* > 0 */
    uint32_t flags;     /* MC_MASTER_PUT_PIN_* | NO_CHECKSUM as stored */
    uint64_t ttl_ms;    /* add: TTL left from now (0 none); walk: TTL left at `now` */
};

/* Errors: MC_ERR_NOMEM. */
int mc_holdidx_create(struct mc_holdidx **h_p);
/* Accepts NULL. */
void mc_holdidx_destroy(struct mc_holdidx *h);

/*
 * A published object. Entries overlapping its extent go, except that an entry at the same
 * extent with a newer version stays and this one is ignored (a late PUBLISH of an older
 * put never displaces a newer one). Returns 0, 1 (ignored: older), MC_ERR_INVALID (bad
 * fields) or MC_ERR_NOMEM. The key is copied.
 */
int mc_holdidx_add(struct mc_holdidx *h, const struct mc_holdidx_entry *e, uint64_t now_ms);
/* How many adds made a new entry (a repeat, refreshing one, is not counted). */
uint64_t mc_holdidx_added(const struct mc_holdidx *h);

/* How long a drop is remembered: a PUBLISH of the dropped version (or an older one) may
 * still come (a writer gives a PUBLISH up well before). */
#define MC_HOLDIDX_TOMB_MS 60000u

/* The master freed the block at `offset` that held `version` (0: whatever version is
 * there). An entry of that version goes; one of a newer version stays (an old drop). In
 * every other case the drop is remembered (a tombstone) for MC_HOLDIDX_TOMB_MS, so that a
 * PUBLISH of that version or an older one arriving after it adds nothing: the writer and
 * the master are not ordered, and a writer's try that timed out may still be delivered
 * after the drop, a repeat of one indexed before it. Returns whether an entry went. */
bool mc_holdidx_drop(struct mc_holdidx *h, uint64_t offset, uint64_t version, uint64_t now_ms);
/* Forget the tombstones older than MC_HOLDIDX_TOMB_MS. */
void mc_holdidx_expire(struct mc_holdidx *h, uint64_t now_ms);

/* A write lands on [offset, offset + len): entries and tombstones touching it go (their
 * bytes are being overwritten), except one of exactly `version` (its own bytes: a repeat).
 * Returns how many went. (The tombstones must go: a drained copy writes an older version
 * there and then publishes it. So a late PUBLISH of an object dropped from this block,
 * arriving after another put's write landed and before that put's own PUBLISH, is not
 * refused here: open, see docs/master.md.) */
size_t mc_holdidx_overwrite(struct mc_holdidx *h, uint64_t offset, uint64_t len,
                            uint64_t version);

/*
 * Up to max entries from *cursor_p on (0: from the start), in offset order, leaving
 * *cursor_p where the next page starts; returns how many were written (0: done). Entries
 * whose TTL has passed at now_ms go instead of being listed. out[i].key points into the
 * index: valid until the entry goes.
 */
int mc_holdidx_walk(struct mc_holdidx *h, uint64_t *cursor_p, struct mc_holdidx_entry *out,
                    int max, uint64_t now_ms);

/* The entry at `offset`, or false. out->key as for walk. */
bool mc_holdidx_find(const struct mc_holdidx *h, uint64_t offset, struct mc_holdidx_entry *out);

size_t mc_holdidx_count(const struct mc_holdidx *h);
uint64_t mc_holdidx_bytes(const struct mc_holdidx *h); /* sum of alloc_len */

#endif /* MC_AGENT_HOLDIDX_H */
