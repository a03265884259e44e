/* libFuzzer target: the disk tier's decoders and its scan (daemon/agent/disk_fmt.h), the
 * code that reads a disk file back after a crash, whatever the crash (or the device) left.
 *   1. The input's first block, as it is, goes through the superblock and header decoders;
 *      a header that decodes re-encodes byte-identical.
 *   2. The rest is a program of 8-byte records (offset, size, sequence number, a damage
 *      byte, a key byte): each becomes a header made by the real encoder (format 1, or
 *      format 2 with a checksum trailer), perhaps damaged,
 *      fed to the scan at its offset (a removed one marked as the store marks it:
 *      committed, then restated); the scan's verdicts are then checked against a
 *      brute-force model: a record is kept exactly when it is committed and no other
 *      collected record overlaps it with a sequence number >= its own, kept records never
 *      overlap, and every kept
 *      extent lies in the region. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/agent/disk_fmt.h"

#define BLK MC_DISK_BLOCK
#define REGION_BLOCKS 64u
#define MAX_RECS 256u

static uint8_t secret[MC_DISK_SECRET_LEN];

static void check_decoders(const uint8_t *data, size_t size)
{
    static uint8_t block[BLK], again[BLK];
    struct mc_disk_sb sb;
    struct mc_disk_hdr h;

    memset(block, 0, sizeof(block));
    memcpy(block, data, size < BLK ? size : BLK);
    (void)mc_disk_sb_decode(block, BLK, &sb);
    if (mc_disk_hdr_decode(block, BLK, secret, &h) == 0) {
        /* only reachable with a MAC the input computed with our secret: the re-encode
         * must agree, key and all */
        /* the whole header: the fixed part, the key and (format 2) the trailer after it */
        size_t n = h.trailer == NULL
                       ? MC_DISK_HDR_FIXED + h.key_len
                       : MC_DISK_HDR_FIXED + ((h.key_len + 7u) & ~7u) +
                             (size_t)mc_disk_trailer_len(h.size);

        if (n > BLK || mc_disk_hdr_encode(&h, secret, again) != 0 || memcmp(again, block, n) != 0)
            abort();
    }
    (void)mc_disk_hdr_decode(data, size, secret, &h);
}

static uint64_t end_of(const struct mc_disk_rec *r)
{
    return r->off + r->h.alloc_len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t block[BLK], zeros[16 * BLK], trailer[BLK];
    struct mc_disk_scan sc;
    size_t nprog, collected;
    long kept;

    for (unsigned i = 0; i < MC_DISK_SECRET_LEN; i++)
        secret[i] = (uint8_t)(i * 131 + 7);
    check_decoders(data, size);

    mc_disk_scan_init(&sc, secret, REGION_BLOCKS * BLK);
    nprog = size / 8;
    if (nprog > MAX_RECS)
        nprog = MAX_RECS;
    for (size_t i = 0; i < nprog; i++) {
        const uint8_t *p = data + 8 * i;
        uint8_t key[2] = {'k', p[7]};
        struct mc_disk_hdr h = {
            .seq = (uint64_t)(p[3] | p[4] << 8),
            .version = i,
            .size = (uint64_t)(p[1] % 16) * BLK + (p[2] & 0x3f) * 64u,
            .key_len = 1 + (p[7] & 1),
            .key = key,
            .state = (uint32_t)(p[5] >> 6), /* committed, pending, erased, removed */
        };
        uint64_t off = (uint64_t)(p[0] % (REGION_BLOCKS + 4)) * BLK; /* some past the end */

        h.alloc_len = mc_disk_rec_len(h.size);
        if (p[5] & 0x08) {
            /* a format-2 header: the checksum trailer of a zero payload of that size */
            mc_disk_trailer_make(zeros, h.size, trailer);
            h.trailer = trailer;
        }
        if (h.state == MC_DISK_REC_REMOVED) {
            /* as the store marks one: written committed, then restated */
            struct mc_disk_hdr back;

            h.state = MC_DISK_REC_COMMITTED;
            if (mc_disk_hdr_encode(&h, secret, block) != 0 ||
                mc_disk_hdr_restate(block, secret, MC_DISK_REC_REMOVED) != 0 ||
                mc_disk_hdr_decode(block, BLK, secret, &back) != 0 ||
                back.state != MC_DISK_REC_REMOVED || back.seq != h.seq)
                abort();
            h.state = MC_DISK_REC_REMOVED;
        } else if (mc_disk_hdr_encode(&h, secret, block) != 0) {
            abort();
        }
        switch (p[5] & 7) {
        case 1: /* a torn header: one byte of it flipped */
            block[p[6] % (MC_DISK_HDR_FIXED + h.key_len)] ^= (uint8_t)(1u << (p[6] & 7));
            break;
        case 2: /* never written: zeros */
            memset(block, 0, BLK);
            break;
        case 3: /* half a sector written */
            memset(block + 40, 0, BLK - 40);
            break;
        default:
            break;
        }
        if (mc_disk_scan_block(&sc, off, block) != 0)
            abort();
    }
    collected = sc.n;
    kept = mc_disk_scan_resolve(&sc);
    if (kept < 0 || (size_t)kept > collected || sc.n != collected)
        abort();
    for (size_t i = 0; i < sc.n; i++) {
        const struct mc_disk_rec *r = &sc.recs[i];
        bool beaten = false;

        if (end_of(r) > sc.region || r->off % BLK != 0)
            abort();
        if (i > 0 && sc.recs[i - 1].off > r->off)
            abort(); /* sorted by offset */
        for (size_t j = 0; j < sc.n; j++) {
            const struct mc_disk_rec *o = &sc.recs[j];

            if (j != i && o->off < end_of(r) && r->off < end_of(o) && o->h.seq >= r->h.seq)
                beaten = true;
        }
        if ((beaten || r->h.state != MC_DISK_REC_COMMITTED) != r->dropped)
            abort();
    }
    mc_disk_scan_cleanup(&sc);
    return 0;
}
