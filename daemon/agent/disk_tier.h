/*
 * The agent's disk tier (--disk PATH, docs/disk.md): the record store (disk.h) opened at
 * start (its scan), its disk segment (seg_disk.h) mounted at the master like the DRAM one
 * (MC_SEG_DISK, RESTORING while it holds records, so the restore seam re-reports them after
 * every MOUNT), and the ways bytes move, none blocking the loop:
 *
 *   - offload: a copy the master asks for (an object it evicts from DRAM, drain.c), from
 *     our DRAM segment into an extent of the disk segment it allocated; the record is
 *     written, then indexed, then the copy answered;
 *   - reads: a GET whose replica is in our disk segment and in no memory reads the record
 *     into the reader's landing block (as a peer's read lands), as the object's image: the
 *     payload straight from the device, checked against the checksum trailer the record
 *     stores (format 2; a format-1 record: its XXH3, then the trailer computed): a record
 *     that fails is MC_ERR_CORRUPT, never bytes;
 *   - drain copies: a record read (checked) into a buffer for a COPY whose target is
 *     another node's block (our node drains; owner_copy.c sends it with the remote write);
 *   - erases: a disk block the master freed (a DROP: evicted from disk, removed, expired)
 *     gets a tombstone, so that a restart does not find it again; a write to an extent
 *     waits for the erase under way there.
 *
 * Completions come from the store's eventfd, polled by the loop (mc_loop_poll, so both
 * loop backends) and reaped on every loop turn while ops are in flight.
 */
#ifndef MC_AGENT_DISK_TIER_H
#define MC_AGENT_DISK_TIER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

struct mc_agent;
struct mc_master;
struct mc_seg;

struct agent_disk_stats {
    uint64_t offloads;        /* records written for the master's copies */
    uint64_t offload_errors;  /* copies refused or failed (the DRAM block is evicted as
                                 without a disk) */
    uint64_t disk_hits;       /* GETs served from a record */
    uint64_t read_corrupt;    /* ... answered MC_ERR_CORRUPT */
    uint64_t erases;          /* tombstones written for blocks the master freed */
    uint64_t removed_marks;   /* records marked removed while a reader held them */
    uint64_t erase_errors;    /* tries of a tombstone or mark that failed (tried again) */
    uint64_t promotions;      /* records read back into a DRAM block of ours (disk_promote) */
    uint64_t drain_records_read; /* records read (and checked) for a drain's copies to
                                    another node (agent_disk_drain_read) */
    uint64_t peer_reads_busy; /* peers' reads refused MC_ERR_BUSY (disk_peer_reads): the
                                 owner queues them (owner.c) */
    uint64_t read_timeouts;   /* reads answered MC_ERR_TIMEOUT at their deadline, the I/O
                                 still under way (GETs here; peers' reads: owner.c) */
};

/* Open the store of cfg.disk (if set) and make its segment: a->disk, a->disk_seg. Errors:
 * the store's (logged), MC_ERR_NOMEM. */
int agent_disk_create(struct mc_agent *a);
/* Standalone: mount the disk segment at the in-process master. */
int agent_disk_mount_local(struct mc_agent *a, struct mc_master *m);
/* Once the mode made a->rio (and the GPU wrap): our disk replicas' reads in front of it; a
 * standalone agent gets landing segments here. Errors: MC_ERR_NOMEM. */
int agent_disk_rio_wrap(struct mc_agent *a);
/* Arm the loop's poll of the store's completions (after mc_loop_init). */
int agent_disk_loop_start(struct mc_agent *a);
/* Every loop turn: run completed ops. True when any ran. */
bool agent_disk_turn(struct mc_agent *a);
/* On the tick: GETs of our disk records past their deadline are answered MC_ERR_TIMEOUT
 * (the read goes on; its landing block is freed when it ends). */
void agent_disk_tick(struct mc_agent *a, uint64_t now);
/* Standalone, on the tick: run the copies the in-process master made. */
void agent_disk_local_copies(struct mc_agent *a);
/* The master freed the block at `offset` of our disk segment that held `version` (0: any):
 * it leaves the index, and is erased, when the index holds exactly that version there; a
 * drop naming another version (a record written there since) is ignored. */
void agent_disk_drop(struct mc_agent *a, uint64_t offset, uint64_t version);
/* Standalone: the master unpublished `version`, whose record at `offset` a reader still
 * holds (MC_MASTER_DROP_RETIRED): the record's header is marked removed (durably, before
 * answers that wait with agent_disk_after_erases), so that a restart does not find it; it
 * stays indexed and readable until its drop. */
void agent_disk_mark_removed(struct mc_agent *a, uint64_t offset, uint64_t version);
/*
 * Durable erases before answers (docs/disk.md, "Frees and erases"): an answer that tells
 * someone a disk record is gone (a client's remove or replacing put standalone, a DROP's
 * reply in a cluster) waits until the tombstones of the erases started so far are durable,
 * so that a kill -9 after the answer never brings the record back. mark: the number of the
 * last erase started (agent_disk_erase_mark, read after starting them); after_erases:
 * false when none numbered up to mark is still running (answer now), else fn(ctx, 0) runs
 * once they all have ended (an erase that failed with an I/O error is logged), or
 * fn(ctx, MC_ERR_CANCELED) from agent_disk_cancel_waiters (the agent is stopping: free,
 * do not answer).
 */
typedef void (*agent_disk_erased_fn)(void *ctx, int status);
uint64_t agent_disk_erase_mark(const struct mc_agent *a);
bool agent_disk_after_erases(struct mc_agent *a, uint64_t mark, agent_disk_erased_fn fn,
                             void *ctx);
void agent_disk_cancel_waiters(struct mc_agent *a);
/* Whatever record is at [offset, +len) of our disk segment leaves the index and is erased
 * (a copy that must not stand: fenced, or refused by the index). */
void agent_disk_erase_extent(struct mc_agent *a, uint64_t offset, uint64_t len);

/* A copy from our DRAM segment to our disk segment (a COPY naming it as the target). */
struct agent_disk_copy {
    uint32_t src_seg;
    uint64_t src_offset;
    uint64_t dst_offset, dst_len; /* dst_len 0: the record's extent (mc_disk_rec_len) */
    uint64_t version;       /* the object's */
    const char *key;        /* the stored key */
    size_t key_len;
};
typedef void (*agent_disk_copy_fn)(void *ctx, int status);
/* 0: done runs once the record is durable and indexed (0), or failed (maybe before this
 * returns). Else (done never runs): MC_ERR_INVALID (not a block of ours of that object,
 * or the extent does not fit it), MC_ERR_CORRUPT (the DRAM bytes fail their checksum),
 * MC_ERR_NOMEM. */
int agent_disk_copy(struct mc_agent *a, const struct agent_disk_copy *cp,
                    agent_disk_copy_fn done, void *ctx);

/*
 * A promotion (disk_promote, docs/disk.md): the master copies a disk-only object back to
 * DRAM, a COPY whose source is our disk segment and whose target a block of our own DRAM
 * segment. The record at src_offset (of `version`, named `key`) is read, checked, into
 * the block as a reader lands it (bytes, then the checksum trailer), then indexed there.
 * done runs exactly once: 0 (indexed), MC_ERR_CORRUPT (the block holds nothing to serve),
 * MC_ERR_IO, MC_ERR_CANCELED (the agent is stopping). Until then the block may be written.
 * Returns 0, or (done never runs) MC_ERR_NOT_FOUND (no such record), MC_ERR_INVALID (the
 * target is not a DRAM block of ours that fits the image), MC_ERR_NOMEM.
 */
struct agent_disk_promote {
    uint64_t src_offset;
    uint32_t dst_seg;
    uint64_t dst_offset, dst_len;
    uint64_t version;
    const char *key;
    size_t key_len;
};
int agent_disk_promote(struct mc_agent *a, const struct agent_disk_promote *p,
                       agent_disk_copy_fn done, void *ctx);
/* A promotion answered 0 that must not stand (its copy was fenced meanwhile): the DRAM
 * block's index entry goes. */
void agent_disk_unpromote(struct mc_agent *a, uint32_t dst_seg, uint64_t dst_offset,
                          uint64_t version);

/*
 * A peer's READ of the record at `offset` of our disk segment, of `version`: the object's
 * image as a reader lands it (its bytes, then its checksum trailer unless it has none: len
 * bytes) into dst, which stays valid until done ran. done runs exactly once: 0,
 * MC_ERR_CORRUPT (dst must not be sent), MC_ERR_IO, MC_ERR_CANCELED (the agent is
 * stopping). Returns 0, or (done never runs) MC_ERR_NOT_FOUND (no such record here),
 * MC_ERR_INVALID (len is not the image's), MC_ERR_NOMEM, MC_ERR_BUSY (disk_peer_reads of
 * them are under way already: try again when one ended).
 */
typedef void (*agent_disk_read_fn)(void *ctx, int status);
int agent_disk_read_image(struct mc_agent *a, uint64_t offset, uint64_t version, void *dst,
                          uint64_t len, agent_disk_read_fn done, void *ctx);

/*
 * A drain's copy of one of our records (docs/disk.md, "Draining a node with a disk"): a COPY
 * whose source is our disk segment and whose target another node's block. The record at
 * offset, of version, named key, is read and checked as a disk hit's is, into a buffer of
 * its own (block-aligned; *buf_p, *len_p set before this returns 0): the object's image,
 * its bytes then its checksum trailer unless it has none. done runs exactly once: 0,
 * MC_ERR_CORRUPT (the buffer must not be sent), MC_ERR_IO, MC_ERR_CANCELED (the agent is
 * stopping); the buffer is the caller's to free, once done ran and never before. Not
 * bounded by disk_peer_reads: the master bounds drain copies (drain_copies_max). Returns 0,
 * or (done never runs, nothing to free) MC_ERR_NOT_FOUND (no such record here, or its TTL
 * passed), MC_ERR_TOO_LARGE (the image is longer than max_len: the target's block),
 * MC_ERR_NOMEM.
 */
struct agent_disk_drain {
    uint64_t offset;
    uint64_t version;
    const char *key;
    size_t key_len;
    uint64_t max_len;
};
int agent_disk_drain_read(struct mc_agent *a, const struct agent_disk_drain *dr,
                          uint8_t **buf_p, uint64_t *len_p, agent_disk_read_fn done, void *ctx);

/* The `disk` object of mcctl stats (NULL without a disk). */
json_t *agent_disk_stats_json(struct mc_agent *a);
/* Waits for the store's I/O in flight, then frees it all. */
void agent_disk_destroy(struct mc_agent *a);

#endif /* MC_AGENT_DISK_TIER_H */
