/*
 * The disk tier's store: one file (or block device) of records in the format of disk_fmt.h,
 * written and read through an I/O engine of disk_io.h, never blocking the caller's thread
 * once open (the scan at open is the one synchronous pass, before anything is served).
 *
 * Space in the data region is the master's to hand out (alloc.c), as for every segment: a
 * writer is told the extent [off, off + mc_disk_rec_len(size)) and fills it. Headers, writes
 * and reads into unaligned memory go through the staging buffers (depth buffers of chunk
 * bytes, block-aligned, registered with io_uring): O_DIRECT accepts no other; a read into
 * block-aligned memory (a landing block) lands its whole blocks there directly, each such
 * I/O still taking one of the depth slots (the queue depth stays the knob). A write makes a pending header durable, then the payload, then the committed
 * header (O_DSYNC writes; disk_fmt.h says why three steps): the record is complete when its
 * done callback says 0. A read checks the header (key,
 * version, size) and the payload's XXH3: a mismatch is MC_ERR_CORRUPT and the bytes in dst
 * must not be served.
 *
 * What it is not: no index of its own (the master's directory is the index; the scan's
 * result is handed to it once), no eviction policy (the master's), no cache.
 *
 * One thread: the owner calls everything and runs the callbacks from mc_disk_reap.
 */
#ifndef MC_AGENT_DISK_H
#define MC_AGENT_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/agent/disk_fmt.h"
#include "daemon/agent/disk_io.h"

struct mc_disk_cfg {
    const char *path;          /* a file (created and preallocated when absent or empty)
                                * or a block device */
    uint64_t size;             /* bytes of a file to create; 0: the existing file's size */
    enum mc_disk_engine engine;
    unsigned depth;            /* staging buffers = I/Os in flight at most (>= 1) */
    uint32_t chunk;            /* bytes of one staging buffer: a multiple of MC_DISK_BLOCK */
    unsigned threads;          /* the threads engine's workers (>= 1) */
    bool no_direct;            /* do not try O_DIRECT (tests) */
};

struct mc_disk_stats {
    uint64_t region;           /* bytes the master may allocate */
    uint64_t writes, reads;    /* records written and read (completed, successfully) */
    uint64_t write_bytes, read_bytes; /* device bytes moved, headers and padding included */
    uint64_t read_direct_bytes; /* of read_bytes, landed straight in the reader's memory */
    uint64_t read_direct_fixed; /* of those reads, the I/Os into registered memory */
    uint64_t erases;           /* records erased */
    uint64_t marks;            /* records marked removed (mc_disk_mark_removed) */
    uint64_t write_errors, read_errors;
    uint64_t read_corrupt;     /* reads answered MC_ERR_CORRUPT */
    uint64_t scan_found;       /* records the last scan kept */
    uint64_t scan_dropped;     /* torn, corrupt, overwritten or out-of-range headers */
};

struct mc_disk;

/*
 * Open (or create) the store and scan it. Errors: MC_ERR_INVALID (bad cfg; a non-empty
 * file that is not a disk file of this format: it is never overwritten; a file smaller
 * than two blocks), MC_ERR_IO, MC_ERR_NO_SPACE (preallocation failed), MC_ERR_NOMEM,
 * MC_ERR_DENIED. The engine in use: mc_disk_engine (AUTO: io_uring with O_DIRECT, else
 * the threads).
 */
int mc_disk_open(const struct mc_disk_cfg *cfg, struct mc_disk **d_p);
/* Waits for I/O in flight (callbacks do not run). Accepts NULL. */
void mc_disk_close(struct mc_disk *d);

uint64_t mc_disk_region(const struct mc_disk *d);
const char *mc_disk_engine(const struct mc_disk *d);
bool mc_disk_is_direct(const struct mc_disk *d);
/*
 * Registers [base, base + len) (block-aligned; mapped until mc_disk_close) with the io_uring
 * engine: reads landing there use fixed buffers, whose pages the kernel pinned once, instead
 * of pinning (and dirtying) them per read. Only while nothing is in flight (after open,
 * before the loop runs). Returns 0 (also with the threads engine, which needs none),
 * MC_ERR_INVALID, MC_ERR_BUSY (I/O in flight), MC_ERR_TOO_LARGE (over 64 GiB in all), or
 * MC_ERR_NOMEM (the kernel refused to pin them: RLIMIT_MEMLOCK); on an error nothing
 * changes and reads there pin pages per read, as before.
 */
int mc_disk_register_region(struct mc_disk *d, void *base, size_t len);
int mc_disk_uring_err(const struct mc_disk *d); /* why io_uring is not used, or 0 */
void mc_disk_get_stats(const struct mc_disk *d, struct mc_disk_stats *st_p);

/* The records the scan at open kept, by offset; forget drops one (the master refused it,
 * or it expired). The array lives until close. */
size_t mc_disk_found(const struct mc_disk *d, const struct mc_disk_rec **recs_p);
void mc_disk_forget(struct mc_disk *d, uint64_t off);

/* Completion: readable fd for the owner's loop, and the reap that runs the callbacks. */
int mc_disk_fd(const struct mc_disk *d);
unsigned mc_disk_reap(struct mc_disk *d);
/* Block until a completion waits, then reap (start-up, tests, tools; never the loop). */
void mc_disk_wait(struct mc_disk *d);
/* Block until every op submitted has completed, running callbacks (start-up, tests). */
void mc_disk_drain(struct mc_disk *d);
unsigned mc_disk_pending(const struct mc_disk *d); /* ops not yet completed */

struct mc_disk_op;
typedef void (*mc_disk_op_fn)(struct mc_disk_op *op, int res);

/* Caller-owned; valid until its callback ran. Fields after "internal" are the store's. */
struct mc_disk_op {
    mc_disk_op_fn done;
    /* internal */
    struct mc_disk *d;
    struct mc_disk_op *next;
    bool write, queued, header_done;
    int phase; /* writes: the pending header, the payload, the committed header */
    uint64_t off, size, issued;
    unsigned inflight;
    int err;
    struct mc_disk_hdr h;
    const uint8_t *key;
    const uint8_t *src;
    uint8_t *dst;
    uint64_t version;
    bool image;           /* a read of the object's image (mc_disk_read_image) */
    uint8_t *trailer;     /* a read of a format-2 record: its trailer, kept for the check */
    bool trailer_owned;   /* ... in memory of the store's (a payload-only read) */
};

/*
 * Write a record of key (key_len bytes) version, size bytes from src, at region offset off
 * (its extent: mc_disk_rec_len(size), which the caller allocated). src and key stay valid
 * and unchanged until done runs. done(op, 0): complete and durable; else MC_ERR_NO_SPACE,
 * MC_ERR_IO (the record is not there: its header was never written). Returns 0 (done will
 * run from a later reap) or MC_ERR_INVALID (extent out of the region, key too long):
 * then done never runs.
 */
int mc_disk_write(struct mc_disk *d, struct mc_disk_op *op, uint64_t off, const void *key,
                  uint32_t key_len, uint64_t version, uint32_t flags, uint64_t expire_ms,
                  const void *src, uint64_t size);
/* mc_disk_write with the payload's XXH3 (mc_disk_payload_hash) taken by the caller when it
 * read src: a write that waits before it starts (an erase under its extent) must vouch for
 * the bytes as they were then: a source reused meanwhile then yields a record that fails
 * its XXH3 (read as MC_ERR_CORRUPT, never served as another object's bytes). */
int mc_disk_write_hashed(struct mc_disk *d, struct mc_disk_op *op, uint64_t off,
                         const void *key, uint32_t key_len, uint64_t version, uint32_t flags,
                         uint64_t expire_ms, const void *src, uint64_t size,
                         uint64_t payload_xxh3);
/* mc_disk_write of an object with checksums, storing its checksum trailer (trailer:
 * mc_disk_trailer_len(size) bytes, valid and unchanged until done runs) in the record
 * (format 2, disk_fmt.h): no pass over the payload here, and a reader hands out this very
 * trailer. The caller checked src against trailer when it read src (the bytes written are
 * then the ones it vouched for, or a record that fails its check: MC_ERR_CORRUPT on read).
 * MC_ERR_INVALID also when the trailer does not fit beside the key (mc_disk_trailer_fits)
 * or is not whole. */
int mc_disk_write_image(struct mc_disk *d, struct mc_disk_op *op, uint64_t off,
                        const void *key, uint32_t key_len, uint64_t version, uint32_t flags,
                        uint64_t expire_ms, const void *src, uint64_t size,
                        const uint8_t *trailer);
/*
 * Erase the record whose extent is [off, off + alloc_len): a tombstone header (newer than
 * anything there) is written durably at off, so no scan finds the record again, nor any
 * older one under it. For space the master freed (a remove, an eviction from disk): without
 * it the record would come back after a restart until its space is written again. Nothing
 * may be writing or reading that extent meanwhile. done(op, 0) or MC_ERR_IO. Returns 0 or
 * MC_ERR_INVALID (the extent out of the region or not block-aligned).
 */
int mc_disk_erase(struct mc_disk *d, struct mc_disk_op *op, uint64_t off, uint64_t alloc_len);
/*
 * Mark the record of key/version of size bytes at region offset off removed: its header is
 * read and, when it is that record's and committed, written back durably in state removed
 * (MC_DISK_REC_REMOVED; same sequence number, the MAC made anew). The payload is not
 * touched: reads of the record (a reader that holds a lease) still get its exact bytes,
 * while no scan finds it again. A torn write of the header fails its MAC: the record is
 * dropped by the scan, as marked. Nothing may write that extent meanwhile (the caller
 * orders its writes and erases there after the mark). done(op, 0) (marked, or nothing to
 * mark: the header is not that committed record's), or MC_ERR_IO. Returns 0 or
 * MC_ERR_INVALID (out of the region, bad key length).
 */
int mc_disk_mark_removed(struct mc_disk *d, struct mc_disk_op *op, uint64_t off,
                         const void *key, uint32_t key_len, uint64_t version, uint64_t size);
/*
 * Read the record of key/version of size bytes at region offset off into dst (size
 * bytes; no alignment asked). done(op, 0): dst holds exactly the bytes written; else
 * MC_ERR_CORRUPT (the header is not that record's or the payload's checksum fails: dst's
 * bytes must be discarded), MC_ERR_IO. Returns 0 or MC_ERR_INVALID (out of the region).
 */
int mc_disk_read(struct mc_disk *d, struct mc_disk_op *op, uint64_t off, const void *key,
                 uint32_t key_len, uint64_t version, void *dst, uint64_t size);
/*
 * mc_disk_read of the object's image as a DRAM segment holds it (shm/ring.h): dst has room
 * for mc_shm_alloc_len(size, true) bytes, and done(op, 0) means dst holds the payload, zero
 * padding and the checksum trailer. A format-2 record's payload is checked against its
 * stored trailer, which is handed out as it is (one pass over the payload); a format-1
 * record's against its XXH3, and the trailer then computed (two).
 *
 * Both reads land the payload's whole blocks straight in dst where dst is block-aligned
 * (no staging copy; only a last partial block goes through a staging buffer), so dst must
 * stay the caller's, untouched by anyone else, until done ran, whatever the outcome.
 */
int mc_disk_read_image(struct mc_disk *d, struct mc_disk_op *op, uint64_t off,
                       const void *key, uint32_t key_len, uint64_t version, void *dst,
                       uint64_t size);

#endif /* MC_AGENT_DISK_H */
