/*
 * mc_dir: the master's key -> record table.
 *
 * Open addressing with linear probing and backward-shift deletion (no tombstones), sharded
 * by key hash so that shards can later get a lock each. A slot is one pointer whose top 16
 * bits carry a tag of the hash, so a probe compares keys only on a tag match. The table does
 * not own records: it only stores them and finds them by key (through the key_of callback).
 *
 * It is not thread-safe; callers serialise per shard (mc_dir_shard_of).
 */
#ifndef MC_MASTER_DIRECTORY_H
#define MC_MASTER_DIRECTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mc_dir;

/* Returns the key of a record stored in the table. */
typedef const char *(*mc_dir_key_fn)(const void *rec, size_t *len_p);

struct mc_dir_cursor {
    uint32_t shard;
    uint64_t slot;
};

/* shards: a power of two in [1, 4096]. Errors: MC_ERR_INVALID, MC_ERR_NOMEM. */
int mc_dir_create(uint32_t shards, mc_dir_key_fn key_of, struct mc_dir **dir_p);
void mc_dir_destroy(struct mc_dir *dir); /* accepts NULL; records are not touched */

uint64_t mc_dir_hash(const char *key, size_t len);
uint32_t mc_dir_shard_of(const struct mc_dir *dir, uint64_t hash);

void *mc_dir_find(const struct mc_dir *dir, uint64_t hash, const char *key, size_t len);

/* Insert a record whose key is not in the table yet (the caller looked it up first).
 * Errors: MC_ERR_NOMEM when the shard had to grow and could not. */
int mc_dir_insert(struct mc_dir *dir, uint64_t hash, void *rec);

/* Remove `rec` (found by its key). Returns false when it was not in the table. */
bool mc_dir_remove(struct mc_dir *dir, uint64_t hash, const void *rec);

/* Replace the stored pointer for `old` (same key) with `rec`. */
bool mc_dir_replace(struct mc_dir *dir, uint64_t hash, const void *old, void *rec);

uint64_t mc_dir_count(const struct mc_dir *dir);
uint64_t mc_dir_meta_bytes(const struct mc_dir *dir); /* slot arrays + shard headers */

/*
 * Incremental walk for the master's sweep. Returns the next record after the cursor, or
 * NULL once a whole pass is done (the cursor is then back at the start). A record deleted
 * through mc_dir_cursor_remove() is followed by whatever shifted into its slot, so the
 * walk does not skip it. Deletions made in between by other calls may make one pass miss
 * a record that moved backwards across the cursor; the next pass sees it.
 */
void mc_dir_cursor_init(struct mc_dir_cursor *c);
void *mc_dir_cursor_next(const struct mc_dir *dir, struct mc_dir_cursor *c);
/* Remove the record the cursor returned last. */
void mc_dir_cursor_remove(struct mc_dir *dir, struct mc_dir_cursor *c);

#endif /* MC_MASTER_DIRECTORY_H */
