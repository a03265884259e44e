/*
 * The disk tier's on-disk format (pure code: no I/O, no clock, no allocation but the scan's
 * result array). A disk file is a superblock block followed by the data region the master
 * allocates from (segment offset 0 is file offset MC_DISK_BLOCK):
 *
 *   block 0             superblock: magic, format, block size, region size, a random
 *                       secret of MC_DISK_SECRET_LEN bytes, XXH3 of the rest
 *   region offset off   a record: one header block (magic, format, key length, sequence
 *                       number, object version, size, extent length, flags, expiry, XXH3 of
 *                       the payload, a MAC of the header, the key), then the payload padded
 *                       to the block: alloc_len = MC_DISK_BLOCK + round_up(size, MC_DISK_BLOCK)
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
#define MC_DISK_FORMAT 1u
#define MC_DISK_SECRET_LEN 192u /* >= XXH3_SECRET_SIZE_MIN (136) */
#define MC_DISK_HDR_FIXED 80u   /* header bytes before the key */
#define MC_DISK_KEY_MAX (MC_DISK_BLOCK - MC_DISK_HDR_FIXED)

struct mc_disk_sb {
    uint64_t region;                   /* bytes of the data region (a multiple of the block) */
    uint8_t secret[MC_DISK_SECRET_LEN];
};

/* A header's state. Pending and erased headers are never records, but they take part in the
 * scan's overwrite rule as records would: each stands for a write that reused (or freed) the
 * space under it. */
#define MC_DISK_REC_COMMITTED 0u
#define MC_DISK_REC_PENDING 1u /* written before the payload */
#define MC_DISK_REC_ERASED 2u  /* a tombstone: the space was freed */

struct mc_disk_hdr {
    uint64_t seq;        /* write order across the file, strictly increasing */
    uint64_t version;    /* the object's version (the master's) */
    uint64_t size;       /* payload bytes */
    uint64_t alloc_len;  /* bytes of the extent, header block included */
    uint32_t flags;      /* MC_MASTER_PUT_* as stored */
    uint64_t expire_ms;  /* wall-clock expiry (ms since the epoch), 0 = none */
    uint64_t payload_xxh3;
    uint32_t state;      /* MC_DISK_REC_*: only a committed record is complete */
    uint32_t key_len;
    const uint8_t *key;  /* decode: points into the block given */
};

/* The extent a record of size bytes needs. 0 when size is too large to express. */
uint64_t mc_disk_rec_len(uint64_t size);

/* block: MC_DISK_BLOCK bytes. */
void mc_disk_sb_encode(const struct mc_disk_sb *sb, uint8_t *block);
/* 0, or MC_ERR_CORRUPT (not a superblock of this format, bad checksum, bad region). */
int mc_disk_sb_decode(const uint8_t *block, size_t len, struct mc_disk_sb *sb_p);

/* Writes MC_DISK_BLOCK bytes (zero past the key). MC_ERR_INVALID: key_len 0 or above
 * MC_DISK_KEY_MAX, or alloc_len not mc_disk_rec_len(size). */
int mc_disk_hdr_encode(const struct mc_disk_hdr *h, const uint8_t *secret, uint8_t *block);
/* Checks magic, format, lengths and the MAC; h_p->key points into block. 0 or
 * MC_ERR_CORRUPT. */
int mc_disk_hdr_decode(const uint8_t *block, size_t len, const uint8_t *secret,
                       struct mc_disk_hdr *h_p);

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
