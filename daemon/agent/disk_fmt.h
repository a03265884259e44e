/*
 * The disk tier's on-disk format (pure code: no I/O, no clock, no allocation but the scan's
 * result array). A disk file is a superblock block followed by the data region the master
 * allocates from (segment offset 0 is file offset MC_DISK_BLOCK):
 *
 *   block 0             superblock: magic, format, block size, region size, a random
 *                       secret of MC_DISK_SECRET_LEN bytes, XXH3 of the rest
 *   region offset off   a record: one header block (magic, format, key length, sequence
 *                       number, object version, size, extent length, flags, expiry, the
 *                       payload's check, a MAC of the header, the key, and in format 2 the
 *                       object's checksum trailer), then the payload padded to the block:
 *                       alloc_len = MC_DISK_BLOCK + round_up(size, MC_DISK_BLOCK)
 *
 * Two record formats share one header layout and one superblock (MC_DISK_FORMAT):
 *   - format 1: the payload's check is XXH3 of the whole payload;
 *   - format 2 (MC_DISK_REC_FORMAT_TRAILER): the header block also carries the object's
 *     checksum trailer as the DRAM image has it (shm/ring.h: one XXH3 per MC_SHM_CHUNK of
 *     payload, then XXH3 of those values), 8-aligned after the key, covered by the MAC; the
 *     payload's check is the trailer's last value. A reader checks the payload against the
 *     trailer (one pass) and hands out the trailer as it is, so a client's checksum comes
 *     from the writer's bytes, never recomputed. Written where the trailer fits in the
 *     block beside the key (objects up to a few hundred MiB); format 1 elsewhere. An older
 *     build reads a format-2 header as a bad one: the scan drops it (never wrong bytes).
 *
 * A record becomes visible only when its header is durable: the writer first writes the
 * header marked pending, then the payload, then the header again marked committed, each
 * durable (O_DSYNC) before the next starts, each header in one block-sized write. A crash
 * leaves no header (the record never existed), a torn header (its MAC fails), a pending
 * one (dropped) or a complete record. The pending header is what keeps a crash from
 * serving an older record whose space the new one was reusing: its payload is being
 * overwritten, and the pending header, a higher sequence number over the same extent,
 * drops it at the scan. Freed space is erased the same way: a tombstone header, newer
 * than the record, over its extent (zeroing the header instead would bring back whatever
 * older record that header's sequence number was hiding). The header's MAC is XXH3 keyed with the file's secret, so an
 * object whose payload happens to (or is made to) contain header-shaped bytes never passes
 * for a record: a client never learns the secret.
 *
 * Space is reused without the old header being erased, so a scan can find stale headers; the
 * sequence number orders them: a record that overlaps any record with a higher sequence
 * number was overwritten (its space was freed and handed out again) and is dropped.
 * mc_disk_scan_resolve applies that rule. Freed space is erased (a tombstone) before the
 * removal is answered (disk_tier.h); a record whose erase was never written comes back.
 *
 * Integers are little-endian on disk.
 */
#ifndef MC_AGENT_DISK_FMT_H
#define MC_AGENT_DISK_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MC_DISK_BLOCK 4096u     /* alignment of every extent and I/O (O_DIRECT) */
#define MC_DISK_FORMAT 1u               /* the superblock's, and format-1 records' */
#define MC_DISK_REC_FORMAT_TRAILER 2u   /* a record that carries the checksum trailer */
#define MC_DISK_SECRET_LEN 192u /* >= XXH3_SECRET_SIZE_MIN (136) */
#define MC_DISK_HDR_FIXED 80u   /* header bytes before the key */
#define MC_DISK_KEY_MAX (MC_DISK_BLOCK - MC_DISK_HDR_FIXED)

struct mc_disk_sb {
    uint64_t region;                   /* bytes of the data region (a multiple of the block) */
    uint8_t secret[MC_DISK_SECRET_LEN];
};

/* A header's state. Pending, erased and removed headers are never records found by a scan,
 * but they take part in its overwrite rule as records would: each stands for a write that
 * reused (or freed) the space under it. A removed record is a committed one whose object
 * was removed while a reader held it (leased, pinned): it still reads back exactly, for
 * those readers, until its space is freed and erased; a restart never finds it. */
#define MC_DISK_REC_COMMITTED 0u
#define MC_DISK_REC_PENDING 1u /* written before the payload */
#define MC_DISK_REC_ERASED 2u  /* a tombstone: the space was freed */
#define MC_DISK_REC_REMOVED 3u /* committed, then marked removed (mc_disk_mark_removed) */

struct mc_disk_hdr {
    uint64_t seq;        /* write order across the file, strictly increasing */
    uint64_t version;    /* the object's version (the master's) */
    uint64_t size;       /* payload bytes */
    uint64_t alloc_len;  /* bytes of the extent, header block included */
    uint32_t flags;      /* MC_MASTER_PUT_* as stored */
    uint64_t expire_ms;  /* wall-clock expiry (ms since the epoch), 0 = none */
    uint64_t payload_xxh3; /* format 1: XXH3 of the payload; format 2: the trailer's
                            * object value (the encoder takes it from the trailer) */
    uint32_t state;      /* MC_DISK_REC_*: only a committed record is complete */
    uint32_t key_len;
    const uint8_t *key;  /* decode: points into the block given */
    const uint8_t *trailer; /* NULL: format 1; else mc_disk_trailer_len(size) bytes, the
                             * object's checksum trailer (format 2; decode: into the block) */
};

/* Bytes of the checksum trailer of an object of size bytes (shm/ring.h's layout). */
uint64_t mc_disk_trailer_len(uint64_t size);
/* Whether a format-2 header of this key and size fits in a block. */
bool mc_disk_trailer_fits(uint64_t size, uint32_t key_len);
/* The trailer of payload[0, size) into trailer (mc_disk_trailer_len(size) bytes). */
void mc_disk_trailer_make(const uint8_t *payload, uint64_t size, uint8_t *trailer);
/* Whether the trailer's object value is that of its chunk values. */
bool mc_disk_trailer_whole(const uint8_t *trailer, uint64_t size);
/* Whether payload[0, size) matches trailer: every chunk's value and the object value. */
bool mc_disk_trailer_check(const uint8_t *payload, uint64_t size, const uint8_t *trailer);

/* The extent a record of size bytes needs. 0 when size is too large to express. */
uint64_t mc_disk_rec_len(uint64_t size);

/* block: MC_DISK_BLOCK bytes. */
void mc_disk_sb_encode(const struct mc_disk_sb *sb, uint8_t *block);
/* 0, or MC_ERR_CORRUPT (not a superblock of this format, bad checksum, bad region). */
int mc_disk_sb_decode(const uint8_t *block, size_t len, struct mc_disk_sb *sb_p);

/* Writes MC_DISK_BLOCK bytes (zero past the key, or the trailer). MC_ERR_INVALID: key_len 0
 * or above MC_DISK_KEY_MAX, alloc_len not mc_disk_rec_len(size), a trailer that does not
 * fit (mc_disk_trailer_fits) or whose object value is not that of its chunk values. */
int mc_disk_hdr_encode(const struct mc_disk_hdr *h, const uint8_t *secret, uint8_t *block);
/* Checks magic, format, lengths, the MAC and (format 2) the trailer's object value; h_p->key
 * and h_p->trailer point into block. 0 or MC_ERR_CORRUPT. */
int mc_disk_hdr_decode(const uint8_t *block, size_t len, const uint8_t *secret,
                       struct mc_disk_hdr *h_p);

/* The header in block (decoded: 0) gets state `state`, its MAC made anew; nothing else of
 * the block changes. 0, or MC_ERR_CORRUPT (block does not decode; it is left as it was). */
int mc_disk_hdr_restate(uint8_t *block, const uint8_t *secret, uint32_t state);

/* XXH3 of a payload (the writer stores it, the reader checks with it). */
uint64_t mc_disk_payload_hash(const void *p, size_t len);

/* A record found by a scan: header fields, its region offset, its key copied. */
struct mc_disk_rec {
    uint64_t off;
    struct mc_disk_hdr h;
    uint8_t key[MC_DISK_KEY_MAX];
    bool dropped;
};

/*
 * The scan's collector: feed it every block of the region in order (mc_disk_scan_block),
 * then resolve. Records whose extent passes the region's end (a truncated file) are not
 * collected. max_seq is the highest sequence number of any valid header seen (kept or
 * not): a writer continues above it.
 */
struct mc_disk_scan {
    const uint8_t *secret;
    uint64_t region;
    struct mc_disk_rec *recs;
    size_t n, cap;
    uint64_t max_seq;
    uint64_t bad_headers;  /* header-shaped blocks (the magic) that failed to decode */
    uint64_t out_of_range; /* valid headers whose extent passes the region's end */
};

void mc_disk_scan_init(struct mc_disk_scan *sc, const uint8_t *secret, uint64_t region);
void mc_disk_scan_cleanup(struct mc_disk_scan *sc);
/* One block at region offset off (a multiple of MC_DISK_BLOCK). 0 or MC_ERR_NOMEM. */
int mc_disk_scan_block(struct mc_disk_scan *sc, uint64_t off, const uint8_t *block);
/* Marks dropped every record that overlaps a record of a higher sequence number (and every
 * record whose sequence number another record shares: the file is not ours to trust), sorts
 * recs by offset. Returns how many were kept, or MC_ERR_NOMEM. */
long mc_disk_scan_resolve(struct mc_disk_scan *sc);

#endif /* MC_AGENT_DISK_FMT_H */
