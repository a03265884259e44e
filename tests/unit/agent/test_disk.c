/*
 * Unit tests of the disk tier's store (daemon/agent/disk*.h): the record format, the scan's
 * rules, and record writes and reads through each I/O engine on a real file: ext4 (or
 * whatever holds the build folder) with O_DIRECT, the same file without it (the path of a
 * file system that refuses O_DIRECT), and tmpfs (/dev/shm), which refuses O_DIRECT before
 * Linux 6.6. An engine the host cannot give (io_uring denied)
 * is skipped inside the test, never failed.
 */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "daemon/agent/disk.h"

#define BLK MC_DISK_BLOCK
#define CHUNK (64u * 1024)

static uint8_t t_secret[MC_DISK_SECRET_LEN];

static void t_fill_secret(void)
{
    for (unsigned i = 0; i < MC_DISK_SECRET_LEN; i++)
        t_secret[i] = (uint8_t)(i * 7 + 3);
}

static void t_pattern(uint8_t *p, uint64_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;

    for (uint64_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

/* ---- format ---- */

START_TEST(test_disk_fmt_header_roundtrip_and_every_flip_fails)
{
    uint8_t block[BLK], copy[BLK];
    struct mc_disk_hdr h = {.seq = 9, .version = 77, .size = 5000, .flags = 3,
                            .expire_ms = 1234, .payload_xxh3 = 0xabcdef, .key_len = 5,
                            .key = (const uint8_t *)"hello"};
    struct mc_disk_hdr out;
    uint8_t other[MC_DISK_SECRET_LEN];

    t_fill_secret();
    h.alloc_len = mc_disk_rec_len(h.size);
    ck_assert_uint_eq(h.alloc_len, 3 * BLK);
    ck_assert_int_eq(mc_disk_hdr_encode(&h, t_secret, block), 0);
    ck_assert_int_eq(mc_disk_hdr_decode(block, BLK, t_secret, &out), 0);
    ck_assert_uint_eq(out.seq, 9);
    ck_assert_uint_eq(out.version, 77);
    ck_assert_uint_eq(out.size, 5000);
    ck_assert_uint_eq(out.flags, 3);
    ck_assert_uint_eq(out.expire_ms, 1234);
    ck_assert_uint_eq(out.payload_xxh3, 0xabcdef);
    ck_assert_uint_eq(out.key_len, 5);
    ck_assert_mem_eq(out.key, "hello", 5);
    /* every bit of the fixed part and the key matters */
    for (unsigned i = 0; i < MC_DISK_HDR_FIXED + 5; i++) {
        memcpy(copy, block, BLK);
        copy[i] ^= 0x10;
        ck_assert_int_eq(mc_disk_hdr_decode(copy, BLK, t_secret, &out), MC_ERR_CORRUPT);
    }
    /* marked removed: the same fields under a new MAC; a damaged block is not restated */
    memcpy(copy, block, BLK);
    ck_assert_int_eq(mc_disk_hdr_restate(copy, t_secret, MC_DISK_REC_REMOVED), 0);
    ck_assert_int_eq(mc_disk_hdr_decode(copy, BLK, t_secret, &out), 0);
    ck_assert_uint_eq(out.state, MC_DISK_REC_REMOVED);
    ck_assert_uint_eq(out.seq, 9);
    ck_assert_uint_eq(out.payload_xxh3, 0xabcdef);
    ck_assert_int_eq(mc_disk_hdr_restate(copy, t_secret, MC_DISK_REC_REMOVED + 1),
                     MC_ERR_CORRUPT);
    copy[MC_DISK_HDR_FIXED] ^= 1;
    ck_assert_int_eq(mc_disk_hdr_restate(copy, t_secret, MC_DISK_REC_COMMITTED),
                     MC_ERR_CORRUPT);
    /* another file's secret */
    memcpy(other, t_secret, sizeof(other));
    other[17] ^= 1;
    ck_assert_int_eq(mc_disk_hdr_decode(block, BLK, other, &out), MC_ERR_CORRUPT);
    ck_assert_int_eq(mc_disk_hdr_decode(block, BLK - 1, t_secret, &out), MC_ERR_CORRUPT);
    /* the encoder refuses what the decoder would */
    h.alloc_len += BLK;
    ck_assert_int_eq(mc_disk_hdr_encode(&h, t_secret, block), MC_ERR_INVALID);
    h.alloc_len = mc_disk_rec_len(h.size);
    h.key_len = MC_DISK_KEY_MAX + 1;
    ck_assert_int_eq(mc_disk_hdr_encode(&h, t_secret, block), MC_ERR_INVALID);
    h.key_len = 0;
    ck_assert_int_eq(mc_disk_hdr_encode(&h, t_secret, block), MC_ERR_INVALID);
    ck_assert_uint_eq(mc_disk_rec_len(0), BLK);
    ck_assert_uint_eq(mc_disk_rec_len(1), 2 * BLK);
    ck_assert_uint_eq(mc_disk_rec_len(BLK), 2 * BLK);
    ck_assert_uint_eq(mc_disk_rec_len(UINT64_MAX - 100), 0);
}
END_TEST

/* Format 2: the header block carries the object's checksum trailer after the key, under the
 * MAC; every byte up to the trailer's end matters, and the encoder refuses a trailer that is
 * not whole or does not fit. */
START_TEST(test_disk_fmt_trailer_header_roundtrip)
{
    uint8_t block[BLK], copy[BLK], payload[3 * 4096 + 7], tr[8 * 3];
    const uint64_t size = sizeof(payload);
    struct mc_disk_hdr h = {.seq = 4, .version = 8, .size = size, .key_len = 3,
                            .key = (const uint8_t *)"abc", .trailer = tr};
    struct mc_disk_hdr out;
    uint64_t tlen = mc_disk_trailer_len(size), end, last;

    t_fill_secret();
    t_pattern(payload, size, 5);
    ck_assert_uint_eq(tlen, 16); /* one chunk value, then the object value */
    mc_disk_trailer_make(payload, size, tr);
    ck_assert(mc_disk_trailer_check(payload, size, tr));
    ck_assert(mc_disk_trailer_whole(tr, size));
    h.alloc_len = mc_disk_rec_len(size);
    ck_assert_int_eq(mc_disk_hdr_encode(&h, t_secret, block), 0);
    ck_assert_int_eq(mc_disk_hdr_decode(block, BLK, t_secret, &out), 0);
    ck_assert_ptr_nonnull(out.trailer);
    ck_assert_mem_eq(out.trailer, tr, tlen);
    memcpy(&last, tr + 8, 8);
    ck_assert_uint_eq(out.payload_xxh3, last);
    ck_assert_mem_eq(out.key, "abc", 3);
    /* the key padded to 8, then the trailer: all of it under the MAC */
    end = MC_DISK_HDR_FIXED + 8 + tlen;
    ck_assert_mem_eq(block + MC_DISK_HDR_FIXED + 8, tr, tlen);
    for (unsigned i = 0; i < end; i++) {
        memcpy(copy, block, BLK);
        copy[i] ^= 0x01;
        ck_assert_msg(mc_disk_hdr_decode(copy, BLK, t_secret, &out) == MC_ERR_CORRUPT,
                      "byte %u", i);
    }
    /* a payload byte off: the trailer says so */
    payload[4096] ^= 1;
    ck_assert(!mc_disk_trailer_check(payload, size, tr));
    payload[4096] ^= 1;
    /* a trailer whose object value is not its chunks': refused */
    tr[0] ^= 1;
    ck_assert(!mc_disk_trailer_whole(tr, size));
    ck_assert_int_eq(mc_disk_hdr_encode(&h, t_secret, block), MC_ERR_INVALID);
    tr[0] ^= 1;
    /* what fits: 8-aligned key, then 8 bytes per MiB chunk and one */
    ck_assert(mc_disk_trailer_fits(0, MC_DISK_KEY_MAX - 8));
    ck_assert(!mc_disk_trailer_fits(0, MC_DISK_KEY_MAX - 7));
    /* key of 1: the trailer at 88, 4008 bytes left: 500 chunk values and the object's */
    ck_assert(mc_disk_trailer_fits((uint64_t)500 << 20, 1));
    ck_assert(!mc_disk_trailer_fits(((uint64_t)500 << 20) + 1, 1));
    ck_assert(!mc_disk_trailer_fits(UINT64_MAX - 5, 1));
    h.key_len = MC_DISK_KEY_MAX - 7;
    ck_assert_int_eq(mc_disk_hdr_encode(&h, t_secret, block), MC_ERR_INVALID);
}
END_TEST

START_TEST(test_disk_fmt_superblock_roundtrip_and_corrupt)
{
    struct mc_disk_sb sb = {.region = 1u << 20}, out;
    uint8_t block[BLK];

    t_fill_secret();
    memcpy(sb.secret, t_secret, sizeof(sb.secret));
    mc_disk_sb_encode(&sb, block);
    ck_assert_int_eq(mc_disk_sb_decode(block, BLK, &out), 0);
    ck_assert_uint_eq(out.region, 1u << 20);
    ck_assert_mem_eq(out.secret, t_secret, MC_DISK_SECRET_LEN);
    block[20] ^= 1;
    ck_assert_int_eq(mc_disk_sb_decode(block, BLK, &out), MC_ERR_CORRUPT);
    memset(block, 0, BLK);
    ck_assert_int_eq(mc_disk_sb_decode(block, BLK, &out), MC_ERR_CORRUPT);
}
END_TEST

/* a header for key k at off, size blocks of payload, sequence seq, fed to the scan */
static void t_scan_rec(struct mc_disk_scan *sc, uint64_t off, uint64_t size, uint64_t seq,
                       const char *k)
{
    uint8_t block[BLK];
    struct mc_disk_hdr h = {.seq = seq, .version = seq, .size = size,
                            .alloc_len = mc_disk_rec_len(size), .key_len = (uint32_t)strlen(k),
                            .key = (const uint8_t *)k};

    ck_assert_int_eq(mc_disk_hdr_encode(&h, t_secret, block), 0);
    ck_assert_int_eq(mc_disk_scan_block(sc, off, block), 0);
}

/* a header in another state than committed, key "-" */
static void t_scan_state(struct mc_disk_scan *sc, uint64_t off, uint64_t size, uint64_t seq,
                         uint32_t state)
{
    uint8_t block[BLK];
    struct mc_disk_hdr h = {.seq = seq, .size = size, .alloc_len = mc_disk_rec_len(size),
                            .state = state, .key_len = 1, .key = (const uint8_t *)"-"};

    ck_assert_int_eq(mc_disk_hdr_encode(&h, t_secret, block), 0);
    ck_assert_int_eq(mc_disk_scan_block(sc, off, block), 0);
}

START_TEST(test_disk_scan_drops_what_a_later_record_overwrote)
{
    struct mc_disk_scan sc;
    uint8_t zero[BLK] = {0}, junk[BLK];

    t_fill_secret();
    mc_disk_scan_init(&sc, t_secret, 64 * BLK);
    /* A: blocks [0, 10), written first; B (later) reused [2, 4) after A was freed; C (later
     * still) at [4, 6) also inside A; D: [20, 22), alone; E: a stale record at [30, 33)
     * under F (seq 9) at [31, 32): both overlap, E is older */
    t_scan_rec(&sc, 0, 9 * BLK, 1, "A");
    t_scan_rec(&sc, 2 * BLK, BLK, 2, "B");
    t_scan_rec(&sc, 4 * BLK, BLK, 3, "C");
    t_scan_rec(&sc, 20 * BLK, BLK, 4, "D");
    t_scan_rec(&sc, 30 * BLK, 2 * BLK, 5, "E");
    t_scan_rec(&sc, 31 * BLK, 0, 9, "F");
    /* G passes the region's end (a truncated file); H's sequence number is the highest
     * seen, so it counts for max_seq though it is dropped */
    t_scan_rec(&sc, 62 * BLK, 4 * BLK, 20, "G");
    ck_assert_int_eq(mc_disk_scan_block(&sc, 40 * BLK, zero), 0);
    memcpy(junk, "MCDISKRC", 8); /* the magic, nothing else */
    memset(junk + 8, 0x5a, BLK - 8);
    ck_assert_int_eq(mc_disk_scan_block(&sc, 41 * BLK, junk), 0);
    ck_assert_uint_eq(sc.out_of_range, 1);
    ck_assert_uint_eq(sc.bad_headers, 1);
    ck_assert_uint_eq(sc.max_seq, 20);
    ck_assert_int_eq(mc_disk_scan_resolve(&sc), 4);
    ck_assert_uint_eq(sc.n, 6);
    /* sorted by offset: A B C D E F */
    ck_assert(sc.recs[0].dropped && sc.recs[0].key[0] == 'A');
    ck_assert(!sc.recs[1].dropped && sc.recs[1].key[0] == 'B');
    ck_assert(!sc.recs[2].dropped && sc.recs[2].key[0] == 'C');
    ck_assert(!sc.recs[3].dropped && sc.recs[3].key[0] == 'D');
    ck_assert(sc.recs[4].dropped && sc.recs[4].key[0] == 'E');
    ck_assert(!sc.recs[5].dropped && sc.recs[5].key[0] == 'F');
    mc_disk_scan_cleanup(&sc);

    /* two records of one sequence number cannot both be ours: both go */
    mc_disk_scan_init(&sc, t_secret, 64 * BLK);
    t_scan_rec(&sc, 0, 2 * BLK, 7, "X");
    t_scan_rec(&sc, BLK, 2 * BLK, 7, "Y");
    ck_assert_int_eq(mc_disk_scan_resolve(&sc), 0);
    mc_disk_scan_cleanup(&sc);

    /* a pending header (a write cut short) and a tombstone are never records, yet each
     * drops the older record under it */
    mc_disk_scan_init(&sc, t_secret, 64 * BLK);
    t_scan_rec(&sc, 0, 4 * BLK, 1, "P");
    t_scan_rec(&sc, 10 * BLK, 4 * BLK, 2, "T");
    t_scan_state(&sc, 2 * BLK, BLK, 3, MC_DISK_REC_PENDING);
    t_scan_state(&sc, 12 * BLK, BLK, 4, MC_DISK_REC_ERASED);
    t_scan_rec(&sc, 20 * BLK, BLK, 5, "K");
    ck_assert_int_eq(mc_disk_scan_resolve(&sc), 1);
    ck_assert(!sc.recs[4].dropped && sc.recs[4].key[0] == 'K');
    mc_disk_scan_cleanup(&sc);
}
END_TEST

/* ---- the store on a real file ---- */

enum t_where { T_DIRECT, T_BUFFERED, T_TMPFS };

static char t_path[256];

static void t_make_path(enum t_where w)
{
    const char *dir = w == T_TMPFS ? "/dev/shm" : ".";

    snprintf(t_path, sizeof(t_path), "%s/mc-test-disk-%d.img", dir, (int)getpid());
    unlink(t_path);
}

static struct mc_disk_cfg t_cfg(enum t_where w, enum mc_disk_engine e, uint64_t size)
{
    return (struct mc_disk_cfg){.path = t_path, .size = size, .engine = e, .depth = 8,
                                .chunk = CHUNK, .threads = 2, .no_direct = w == T_BUFFERED};
}

/* open, or skip the test when the engine asked for cannot run here */
static struct mc_disk *t_open(enum t_where w, enum mc_disk_engine e, uint64_t size)
{
    struct mc_disk_cfg cfg = t_cfg(w, e, size);
    struct mc_disk *d = NULL;
    int err = mc_disk_open(&cfg, &d);

    ck_assert_msg(err == 0, "open %s: %d", t_path, err);
    return d;
}

struct t_op {
    struct mc_disk_op op;
    int res;
    bool ran;
};

static void t_done(struct mc_disk_op *op, int res)
{
    struct t_op *t = (struct t_op *)op;

    ck_assert(!t->ran);
    t->ran = true;
    t->res = res;
}

static int t_write(struct mc_disk *d, uint64_t off, const char *key, uint64_t version,
                   const void *src, uint64_t size)
{
    struct t_op t = {.op.done = t_done};
    int err = mc_disk_write(d, &t.op, off, key, (uint32_t)strlen(key), version, 0, 0, src,
                            size);

    if (err != 0)
        return err;
    mc_disk_drain(d);
    ck_assert(t.ran);
    return t.res;
}

static int t_read(struct mc_disk *d, uint64_t off, const char *key, uint64_t version,
                  void *dst, uint64_t size)
{
    struct t_op t = {.op.done = t_done};
    int err = mc_disk_read(d, &t.op, off, key, (uint32_t)strlen(key), version, dst, size);

    if (err != 0)
        return err;
    mc_disk_drain(d);
    ck_assert(t.ran);
    return t.res;
}

static const uint64_t t_sizes[] = {0, 1, 100, BLK - 1, BLK, BLK + 1, CHUNK, 3 * CHUNK + 5,
                                   20 * CHUNK + 4097};
#define T_NSIZES (sizeof(t_sizes) / sizeof(t_sizes[0]))

/* write every size at consecutive extents, all in flight together, then read all back
 * together; each byte checked */
static void t_roundtrip(enum t_where w, enum mc_disk_engine e, const char *engine)
{
    struct t_op ops[T_NSIZES], rops[T_NSIZES];
    uint8_t *src[T_NSIZES], *dst[T_NSIZES];
    uint64_t off[T_NSIZES], at = 0;
    char keys[T_NSIZES][16];
    struct mc_disk_stats st;
    struct mc_disk *d;

    t_make_path(w);
    d = t_open(w, e, 8u << 20);
    if (engine != NULL) {
        ck_assert_str_eq(mc_disk_engine(d), engine);
        ck_assert_int_eq(mc_disk_is_direct(d), w == T_DIRECT);
    }
    for (unsigned i = 0; i < T_NSIZES; i++) {
        src[i] = malloc(t_sizes[i] + 1);
        dst[i] = malloc(t_sizes[i] + 1);
        t_pattern(src[i], t_sizes[i], i);
        memset(dst[i], 0xee, t_sizes[i] + 1);
        snprintf(keys[i], sizeof(keys[i]), "key-%u", i);
        off[i] = at;
        at += mc_disk_rec_len(t_sizes[i]);
        ops[i] = (struct t_op){.op.done = t_done};
        ck_assert_int_eq(mc_disk_write(d, &ops[i].op, off[i], keys[i],
                                       (uint32_t)strlen(keys[i]), 100 + i, 0, 0, src[i],
                                       t_sizes[i]),
                         0);
    }
    ck_assert_uint_eq(mc_disk_pending(d), T_NSIZES);
    mc_disk_drain(d);
    for (unsigned i = 0; i < T_NSIZES; i++) {
        ck_assert(ops[i].ran);
        ck_assert_int_eq(ops[i].res, 0);
        rops[i] = (struct t_op){.op.done = t_done};
        ck_assert_int_eq(mc_disk_read(d, &rops[i].op, off[i], keys[i],
                                      (uint32_t)strlen(keys[i]), 100 + i, dst[i], t_sizes[i]),
                         0);
    }
    mc_disk_drain(d);
    for (unsigned i = 0; i < T_NSIZES; i++) {
        ck_assert(rops[i].ran);
        ck_assert_int_eq(rops[i].res, 0);
        ck_assert(memcmp(src[i], dst[i], t_sizes[i]) == 0);
        ck_assert_uint_eq(dst[i][t_sizes[i]], 0xee); /* nothing past size */
    }
    mc_disk_get_stats(d, &st);
    ck_assert_uint_eq(st.writes, T_NSIZES);
    ck_assert_uint_eq(st.reads, T_NSIZES);
    ck_assert_uint_eq(st.write_bytes, at + T_NSIZES * BLK); /* the pending headers too */
    ck_assert_uint_eq(st.read_bytes, at);
    mc_disk_close(d);

    /* reopened: the scan finds every record, with its fields */
    d = t_open(w, e, 0);
    {
        const struct mc_disk_rec *recs;
        size_t n = mc_disk_found(d, &recs);

        ck_assert_uint_eq(n, T_NSIZES);
        for (unsigned i = 0; i < T_NSIZES; i++) {
            ck_assert_uint_eq(recs[i].off, off[i]);
            ck_assert_uint_eq(recs[i].h.size, t_sizes[i]);
            ck_assert_uint_eq(recs[i].h.version, 100 + i);
            ck_assert_mem_eq(recs[i].key, keys[i], strlen(keys[i]));
        }
        ck_assert_int_eq(t_read(d, off[8], keys[8], 108, dst[8], t_sizes[8]), 0);
        ck_assert(memcmp(src[8], dst[8], t_sizes[8]) == 0);
    }
    mc_disk_close(d);
    for (unsigned i = 0; i < T_NSIZES; i++) {
        free(src[i]);
        free(dst[i]);
    }
    unlink(t_path);
}

/* Format 2 through the store: images written with their trailer and read back whole (payload,
 * zero padding, the very trailer), into block-aligned memory (whole blocks land there
 * directly: read_direct_bytes) and into unaligned memory (through the staging buffers);
 * a format-1 record read as an image gets its trailer computed; a payload-only read of a
 * format-2 record checks it too; a payload byte flipped on disk reads as MC_ERR_CORRUPT. */
START_TEST(test_disk_image_roundtrip_direct_and_staged)
{
    enum t_where w = (enum t_where)_i;
    /* the last is read in several direct I/Os (each at most 16 MiB) */
    static const uint64_t sizes[] = {0, 100, BLK, BLK + 1, CHUNK + 4096, (1u << 20) + 3,
                                     (5u << 20) / 2, (40u << 20) + 5};
    enum { N = sizeof(sizes) / sizeof(sizes[0]) };
    uint8_t *src[N], *want[N], *dst;
    uint64_t off[N], at = 0, direct = 0;
    char keys[N][16];
    struct mc_disk_stats st;
    struct mc_disk *d;
    size_t cap = (40u << 20) + 4 * BLK;

    t_make_path(w);
    d = t_open(w, MC_DISK_ENGINE_AUTO, 64u << 20);
    ck_assert_int_eq(posix_memalign((void **)&dst, BLK, cap), 0);
    for (unsigned i = 0; i < N; i++) {
        uint64_t img = mc_disk_trailer_len(sizes[i]) + ((sizes[i] + 7) & ~UINT64_C(7));
        struct t_op t = {.op.done = t_done};

        src[i] = malloc(sizes[i] + 1);
        want[i] = calloc(1, img);
        t_pattern(src[i], sizes[i], 40 + i);
        memcpy(want[i], src[i], sizes[i]);
        mc_disk_trailer_make(src[i], sizes[i], want[i] + ((sizes[i] + 7) & ~UINT64_C(7)));
        snprintf(keys[i], sizeof(keys[i]), "img-%u", i);
        off[i] = at;
        at += mc_disk_rec_len(sizes[i]);
        if (i == 1) { /* one format-1 record */
            ck_assert_int_eq(t_write(d, off[i], keys[i], 7, src[i], sizes[i]), 0);
            continue;
        }
        ck_assert_int_eq(mc_disk_write_image(d, &t.op, off[i], keys[i],
                                             (uint32_t)strlen(keys[i]), 7, 0, 0, src[i],
                                             sizes[i], want[i] + ((sizes[i] + 7) & ~UINT64_C(7))),
                         0);
        mc_disk_drain(d);
        ck_assert(t.ran);
        ck_assert_int_eq(t.res, 0);
    }
    for (int pass = 0; pass < 2; pass++) {
        uint8_t *to = dst + (pass == 0 ? 0 : 8); /* aligned, then not */

        for (unsigned i = 0; i < N; i++) {
            uint64_t img = mc_disk_trailer_len(sizes[i]) + ((sizes[i] + 7) & ~UINT64_C(7));
            struct t_op t = {.op.done = t_done};

            memset(dst, 0xee, cap);
            ck_assert_int_eq(mc_disk_read_image(d, &t.op, off[i], keys[i],
                                                (uint32_t)strlen(keys[i]), 7, to, sizes[i]),
                             0);
            mc_disk_drain(d);
            ck_assert(t.ran);
            ck_assert_msg(t.res == 0, "size %" PRIu64 ": %d", sizes[i], t.res);
            ck_assert_msg(memcmp(to, want[i], img) == 0, "image of %" PRIu64, sizes[i]);
            ck_assert_uint_eq(to[img], 0xee); /* nothing past the image */
            if (pass == 0)
                direct += sizes[i] & ~(uint64_t)(BLK - 1);
        }
        mc_disk_get_stats(d, &st);
        ck_assert_uint_eq(st.read_direct_bytes, direct); /* the unaligned pass adds none */
    }
    ck_assert_uint_gt(direct, 0);
    /* a payload-only read of a format-2 record: checked against its trailer all the same */
    memset(dst, 0, cap);
    ck_assert_int_eq(t_read(d, off[5], keys[5], 7, dst, sizes[5]), 0);
    ck_assert(memcmp(dst, src[5], sizes[5]) == 0);
    mc_disk_close(d);

    /* one payload byte flipped in the second MiB chunk of record 6: CORRUPT, whichever way
     * it is read; its neighbours read fine; the scan keeps every record (headers intact) */
    {
        int fd = open(t_path, O_RDWR);
        uint8_t b;
        off_t at6 = (off_t)(BLK + off[6] + BLK + (1u << 20) + 77);
        /* and one in record 7's second direct I/O */
        off_t at7 = (off_t)(BLK + off[7] + BLK + (20u << 20) + 77);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pread(fd, &b, 1, at6), 1);
        b ^= 0x40;
        ck_assert_int_eq(pwrite(fd, &b, 1, at6), 1);
        ck_assert_int_eq(pread(fd, &b, 1, at7), 1);
        b ^= 0x02;
        ck_assert_int_eq(pwrite(fd, &b, 1, at7), 1);
        close(fd);
    }
    d = t_open(w, MC_DISK_ENGINE_AUTO, 0);
    {
        const struct mc_disk_rec *recs;
        struct t_op t = {.op.done = t_done};

        ck_assert_uint_eq(mc_disk_found(d, &recs), N);
        ck_assert_int_eq(mc_disk_read_image(d, &t.op, off[6], keys[6],
                                            (uint32_t)strlen(keys[6]), 7, dst, sizes[6]),
                         0);
        mc_disk_drain(d);
        ck_assert_int_eq(t.res, MC_ERR_CORRUPT);
        ck_assert_int_eq(t_read(d, off[6], keys[6], 7, dst, sizes[6]), MC_ERR_CORRUPT);
        t = (struct t_op){.op.done = t_done};
        ck_assert_int_eq(mc_disk_read_image(d, &t.op, off[7], keys[7],
                                            (uint32_t)strlen(keys[7]), 7, dst, sizes[7]),
                         0);
        mc_disk_drain(d);
        ck_assert_int_eq(t.res, MC_ERR_CORRUPT);
        t = (struct t_op){.op.done = t_done};
        ck_assert_int_eq(mc_disk_read_image(d, &t.op, off[5], keys[5],
                                            (uint32_t)strlen(keys[5]), 7, dst, sizes[5]),
                         0);
        mc_disk_drain(d);
        ck_assert_int_eq(t.res, 0);
        ck_assert(memcmp(dst, want[5], mc_disk_trailer_len(sizes[5]) + sizes[5] + 5) == 0);
        mc_disk_get_stats(d, &st);
        ck_assert_uint_eq(st.read_corrupt, 3);
    }
    mc_disk_close(d);
    for (unsigned i = 0; i < N; i++) {
        free(src[i]);
        free(want[i]);
    }
    free(dst);
    unlink(t_path);
}
END_TEST

START_TEST(test_disk_roundtrip_io_uring_direct)
{
    struct mc_disk_cfg cfg;
    struct mc_disk *d;

    t_make_path(T_DIRECT);
    cfg = t_cfg(T_DIRECT, MC_DISK_ENGINE_AUTO, 1u << 20);
    ck_assert_int_eq(mc_disk_open(&cfg, &d), 0);
    if (!mc_disk_is_direct(d) || strcmp(mc_disk_engine(d), "io_uring") != 0) {
        fprintf(stderr, "SKIP io_uring with O_DIRECT: engine %s, direct %d, uring err %d\n",
                mc_disk_engine(d), mc_disk_is_direct(d), mc_disk_uring_err(d));
        mc_disk_close(d);
        unlink(t_path);
        return;
    }
    mc_disk_close(d);
    t_roundtrip(T_DIRECT, MC_DISK_ENGINE_URING, "io_uring");
}
END_TEST

START_TEST(test_disk_roundtrip_threads_direct)
{
    t_roundtrip(T_DIRECT, MC_DISK_ENGINE_THREADS, "threads");
}
END_TEST

START_TEST(test_disk_roundtrip_threads_buffered)
{
    t_roundtrip(T_BUFFERED, MC_DISK_ENGINE_AUTO, "threads");
}
END_TEST

START_TEST(test_disk_roundtrip_tmpfs_falls_back)
{
    struct stat st;

    if (stat("/dev/shm", &st) != 0) {
        fprintf(stderr, "SKIP: no /dev/shm\n");
        return;
    }
    /* tmpfs took O_DIRECT from Linux 6.6 on: either engine, as the file system allows */
    t_roundtrip(T_TMPFS, MC_DISK_ENGINE_AUTO, NULL);
}
END_TEST

START_TEST(test_disk_uring_refused_without_direct)
{
    struct mc_disk_cfg cfg;
    struct mc_disk *d = NULL;

    t_make_path(T_BUFFERED);
    cfg = t_cfg(T_BUFFERED, MC_DISK_ENGINE_URING, 1u << 20);
    ck_assert_int_eq(mc_disk_open(&cfg, &d), MC_ERR_INVALID);
    ck_assert_int_eq(access(t_path, F_OK), -1); /* the file it made is gone again */
}
END_TEST

static void t_poke(uint64_t file_off, uint8_t x)
{
    int fd = open(t_path, O_RDWR);
    uint8_t b;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, &b, 1, (off_t)file_off), 1);
    b ^= x;
    ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)file_off), 1);
    close(fd);
}

/* test_disk_torn_record_dropped at the store's level: a flipped payload byte reads as
 * CORRUPT, a flipped header byte and a truncated record are dropped by the scan; the
 * records around them are untouched */
START_TEST(test_disk_torn_record_dropped)
{
    enum t_where w = (enum t_where)_i;
    uint8_t a[3 * BLK], b[3 * BLK];
    const struct mc_disk_rec *recs;
    struct mc_disk_stats st;
    struct mc_disk *d;
    uint64_t rl = mc_disk_rec_len(sizeof(a));

    t_make_path(w);
    d = t_open(w, MC_DISK_ENGINE_AUTO, 64 * BLK);
    for (unsigned i = 0; i < 4; i++) {
        char k[8];

        snprintf(k, sizeof(k), "k%u", i);
        t_pattern(a, sizeof(a), i);
        ck_assert_int_eq(t_write(d, i * rl, k, 1, a, sizeof(a)), 0);
    }
    mc_disk_close(d);
    /* k1: a payload byte; k2: a header byte (its key); k3 ends past the truncated end */
    t_poke(BLK + 1 * rl + BLK + 5000, 0x01);
    t_poke(BLK + 2 * rl + MC_DISK_HDR_FIXED, 0x20);
    ck_assert_int_eq(truncate(t_path, (off_t)(BLK + 3 * rl + 2 * BLK)), 0);

    d = t_open(w, MC_DISK_ENGINE_AUTO, 0);
    ck_assert_uint_eq(mc_disk_region(d), 64 * BLK - BLK);
    ck_assert_uint_eq(mc_disk_found(d, &recs), 2);
    ck_assert_mem_eq(recs[0].key, "k0", 2);
    ck_assert_mem_eq(recs[1].key, "k1", 2);
    mc_disk_get_stats(d, &st);
    ck_assert_uint_eq(st.scan_found, 2);
    ck_assert_uint_eq(st.scan_dropped, 2);
    t_pattern(a, sizeof(a), 0);
    ck_assert_int_eq(t_read(d, 0, "k0", 1, b, sizeof(b)), 0);
    ck_assert(memcmp(a, b, sizeof(a)) == 0);
    ck_assert_int_eq(t_read(d, rl, "k1", 1, b, sizeof(b)), MC_ERR_CORRUPT);
    ck_assert_int_eq(t_read(d, 2 * rl, "k2", 1, b, sizeof(b)), MC_ERR_CORRUPT);
    /* the truncated tail grew back (zeros): its header is gone */
    ck_assert_int_eq(t_read(d, 3 * rl, "k3", 1, b, sizeof(b)), MC_ERR_CORRUPT);
    /* the space is usable again */
    t_pattern(a, sizeof(a), 9);
    ck_assert_int_eq(t_write(d, 3 * rl, "k3", 2, a, sizeof(a)), 0);
    ck_assert_int_eq(t_read(d, 3 * rl, "k3", 2, b, sizeof(b)), 0);
    ck_assert(memcmp(a, b, sizeof(a)) == 0);
    mc_disk_get_stats(d, &st);
    ck_assert_uint_eq(st.read_corrupt, 3);
    mc_disk_close(d);
    unlink(t_path);
}
END_TEST

/* rewrite the state of the header at region offset off, with the file's own secret */
static void t_set_state(uint64_t off, uint32_t state)
{
    uint8_t sbb[BLK], hb[BLK];
    struct mc_disk_sb sb;
    struct mc_disk_hdr h;
    uint8_t key[MC_DISK_KEY_MAX];
    int fd = open(t_path, O_RDWR);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, sbb, BLK, 0), BLK);
    ck_assert_int_eq(mc_disk_sb_decode(sbb, BLK, &sb), 0);
    ck_assert_int_eq(pread(fd, hb, BLK, (off_t)(BLK + off)), BLK);
    ck_assert_int_eq(mc_disk_hdr_decode(hb, BLK, sb.secret, &h), 0);
    memcpy(key, h.key, h.key_len);
    h.key = key;
    h.state = state;
    ck_assert_int_eq(mc_disk_hdr_encode(&h, sb.secret, hb), 0);
    ck_assert_int_eq(pwrite(fd, hb, BLK, (off_t)(BLK + off)), BLK);
    close(fd);
}

static int t_mark(struct mc_disk *d, uint64_t off, const char *key, uint64_t version,
                  uint64_t size)
{
    struct t_op t = {.op.done = t_done};
    int err = mc_disk_mark_removed(d, &t.op, off, key, (uint32_t)strlen(key), version, size);

    if (err != 0)
        return err;
    mc_disk_drain(d);
    ck_assert(t.ran);
    return t.res;
}

/* A record marked removed (docs/disk.md, "Frees and erases": a remove of an object a
 * reader holds) still reads back exactly, format 1 and 2, while no scan finds it again and
 * it still hides what it overwrote; a mark naming another version, key or size, or a
 * record already marked, changes nothing; the header's restate keeps every other field
 * under a new MAC. Fails without the mark (the records are found at the reopen) and with
 * a mark that rewrites the payload or refuses removed headers to reads. */
START_TEST(test_disk_mark_removed_reads_but_is_not_found)
{
    enum t_where w = (enum t_where)_i;
    uint8_t a[5 * BLK + 9], b[5 * BLK + 9], tr[64], *img;
    uint64_t ia = 0, ib = 8 * BLK, ic = 16 * BLK, id = 24 * BLK;
    size_t img_len = ((sizeof(a) + 7) & ~(size_t)7) + mc_disk_trailer_len(sizeof(a));
    const struct mc_disk_rec *recs;
    struct mc_disk_stats st;
    struct mc_disk *d;

    ck_assert_uint_le(mc_disk_trailer_len(sizeof(a)), sizeof(tr));
    ck_assert_int_eq(posix_memalign((void **)&img, BLK, 8 * BLK), 0);
    t_make_path(w);
    d = t_open(w, MC_DISK_ENGINE_AUTO, 64 * BLK);
    t_pattern(a, sizeof(a), 3);
    mc_disk_trailer_make(a, sizeof(a), tr);
    ck_assert_int_eq(t_write(d, ia, "fmt1", 5, a, sizeof(a)), 0);
    {
        struct t_op t = {.op.done = t_done};

        ck_assert_int_eq(mc_disk_write_image(d, &t.op, ib, "fmt2", 4, 6, 0, 0, a, sizeof(a),
                                             tr),
                         0);
        mc_disk_drain(d);
        ck_assert(t.ran && t.res == 0);
    }
    ck_assert_int_eq(t_write(d, ic, "keep", 7, a, sizeof(a)), 0);
    /* in the old extent of an older record (seq 1 at id, overwritten by seq 5 below) */
    ck_assert_int_eq(t_write(d, id, "under", 8, a, BLK), 0);
    ck_assert_int_eq(t_write(d, id, "over", 9, a, sizeof(a)), 0);

    ck_assert_int_eq(t_mark(d, ia, "fmt1", 5, sizeof(a)), 0);
    ck_assert_int_eq(t_mark(d, ib, "fmt2", 6, sizeof(a)), 0);
    ck_assert_int_eq(t_mark(d, id, "over", 9, sizeof(a)), 0);
    mc_disk_get_stats(d, &st);
    ck_assert_uint_eq(st.marks, 3);
    /* not the record there: nothing marked */
    ck_assert_int_eq(t_mark(d, ic, "keep", 8, sizeof(a)), 0);
    ck_assert_int_eq(t_mark(d, ic, "kept", 7, sizeof(a)), 0);
    ck_assert_int_eq(t_mark(d, ic, "keep", 7, sizeof(a) - 1), 0);
    ck_assert_int_eq(t_mark(d, ia, "fmt1", 5, sizeof(a)), 0); /* marked already */
    ck_assert_int_eq(t_mark(d, mc_disk_region(d), "x", 1, 1), MC_ERR_INVALID);
    mc_disk_get_stats(d, &st);
    ck_assert_uint_eq(st.marks, 3);
    /* readers holding them still get their exact bytes */
    memset(b, 0, sizeof(b));
    ck_assert_int_eq(t_read(d, ia, "fmt1", 5, b, sizeof(b)), 0);
    ck_assert(memcmp(a, b, sizeof(a)) == 0);
    memset(b, 0, sizeof(b));
    ck_assert_int_eq(t_read(d, ib, "fmt2", 6, b, sizeof(b)), 0);
    ck_assert(memcmp(a, b, sizeof(a)) == 0);
    {
        struct t_op t = {.op.done = t_done};

        memset(img, 0xee, 8 * BLK);
        ck_assert_int_eq(mc_disk_read_image(d, &t.op, ib, "fmt2", 4, 6, img, sizeof(a)), 0);
        mc_disk_drain(d);
        ck_assert(t.ran && t.res == 0);
        ck_assert(memcmp(img, a, sizeof(a)) == 0);
        ck_assert(memcmp(img + img_len - mc_disk_trailer_len(sizeof(a)), tr,
                         mc_disk_trailer_len(sizeof(a))) == 0);
    }
    mc_disk_close(d);
    /* the scan finds only the unmarked; "under" stays hidden by the marked "over" */
    d = t_open(w, MC_DISK_ENGINE_AUTO, 0);
    ck_assert_uint_eq(mc_disk_found(d, &recs), 1);
    ck_assert_mem_eq(recs[0].key, "keep", 4);
    /* then erased over the mark, and the space written again: found */
    {
        struct t_op t = {.op.done = t_done};

        ck_assert_int_eq(mc_disk_erase(d, &t.op, ia, mc_disk_rec_len(sizeof(a))), 0);
        mc_disk_drain(d);
        ck_assert(t.ran && t.res == 0);
    }
    ck_assert_int_eq(t_write(d, ia, "again", 10, a, BLK), 0);
    mc_disk_close(d);
    d = t_open(w, MC_DISK_ENGINE_AUTO, 0);
    ck_assert_uint_eq(mc_disk_found(d, &recs), 2);
    mc_disk_close(d);
    free(img);
    unlink(t_path);
}
END_TEST

/* the wrong key, version or size at an offset is CORRUPT, never bytes; space reused by a
 * smaller record hides the old one after a reopen; sequence numbers go on above the
 * highest on disk; an erased record is gone */
START_TEST(test_disk_reuse_and_mismatch)
{
    uint8_t a[10 * BLK], b[10 * BLK];
    const struct mc_disk_rec *recs;
    struct mc_disk *d;

    t_make_path(T_DIRECT);
    d = t_open(T_DIRECT, MC_DISK_ENGINE_AUTO, 64 * BLK);
    t_pattern(a, sizeof(a), 1);
    ck_assert_int_eq(t_write(d, 0, "big", 5, a, sizeof(a)), 0);
    ck_assert_int_eq(t_read(d, 0, "bog", 5, b, sizeof(a)), MC_ERR_CORRUPT);
    ck_assert_int_eq(t_read(d, 0, "big", 6, b, sizeof(a)), MC_ERR_CORRUPT);
    ck_assert_int_eq(t_read(d, 0, "big", 5, b, sizeof(a) - 1), MC_ERR_CORRUPT);
    ck_assert_int_eq(t_read(d, 0, "big", 5, b, sizeof(a)), 0);
    /* the same header marked pending (a write in flight or cut short): never bytes */
    t_set_state(0, MC_DISK_REC_PENDING);
    ck_assert_int_eq(t_read(d, 0, "big", 5, b, sizeof(a)), MC_ERR_CORRUPT);
    t_set_state(0, MC_DISK_REC_COMMITTED);
    ck_assert_int_eq(t_read(d, 0, "big", 5, b, sizeof(a)), 0);
    /* freed by the master, half of it handed out again */
    ck_assert_int_eq(t_write(d, 4 * BLK, "small", 1, a, BLK), 0);
    mc_disk_close(d);
    d = t_open(T_DIRECT, MC_DISK_ENGINE_AUTO, 0);
    ck_assert_uint_eq(mc_disk_found(d, &recs), 1);
    ck_assert_mem_eq(recs[0].key, "small", 5);
    ck_assert_uint_eq(recs[0].h.seq, 2);
    /* a write after the reopen sorts above both: reopening keeps it over "small" */
    ck_assert_int_eq(t_write(d, 3 * BLK, "third", 1, a, BLK), 0);
    mc_disk_forget(d, 4 * BLK);
    mc_disk_close(d);
    d = t_open(T_DIRECT, MC_DISK_ENGINE_AUTO, 0);
    ck_assert_uint_eq(mc_disk_found(d, &recs), 1);
    ck_assert_mem_eq(recs[0].key, "third", 5);
    ck_assert_uint_eq(recs[0].h.seq, 3);
    /* erased: gone at the next scan, and so are the older records it was hiding ("big",
     * whose header survives at 0 with half its payload overwritten); reads are CORRUPT */
    {
        struct t_op t = {.op.done = t_done};
        struct mc_disk_stats st;

        ck_assert_int_eq(mc_disk_erase(d, &t.op, 3 * BLK, 2 * BLK), 0);
        mc_disk_drain(d);
        ck_assert(t.ran && t.res == 0);
        ck_assert_int_eq(t_read(d, 3 * BLK, "third", 1, b, BLK), MC_ERR_CORRUPT);
        ck_assert_int_eq(mc_disk_erase(d, &t.op, 3 * BLK + 1, 2 * BLK), MC_ERR_INVALID);
        ck_assert_int_eq(mc_disk_erase(d, &t.op, 3 * BLK, BLK + 1), MC_ERR_INVALID);
        ck_assert_int_eq(mc_disk_erase(d, &t.op, mc_disk_region(d), BLK), MC_ERR_INVALID);
        mc_disk_get_stats(d, &st);
        ck_assert_uint_eq(st.erases, 1);
        mc_disk_close(d);
        d = t_open(T_DIRECT, MC_DISK_ENGINE_AUTO, 0);
        ck_assert_uint_eq(mc_disk_found(d, &recs), 0);
        ck_assert_int_eq(t_write(d, 3 * BLK, "third", 1, a, BLK), 0);
    }
    /* out of the region, a misaligned offset, a key too long: refused at once */
    ck_assert_int_eq(t_write(d, mc_disk_region(d) - BLK, "x", 1, a, 1), MC_ERR_INVALID);
    ck_assert_int_eq(t_write(d, 100, "x", 1, a, 1), MC_ERR_INVALID);
    ck_assert_int_eq(t_read(d, mc_disk_region(d), "x", 1, b, 0), MC_ERR_INVALID);
    ck_assert_int_eq(mc_disk_pending(d), 0);
    mc_disk_close(d);
    unlink(t_path);
}
END_TEST

START_TEST(test_disk_refuses_a_foreign_file)
{
    char junk[3 * BLK];
    struct mc_disk_cfg cfg;
    struct mc_disk *d = NULL;
    struct stat st;
    FILE *f;

    t_make_path(T_DIRECT);
    memset(junk, 'x', sizeof(junk));
    f = fopen(t_path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(junk, 1, sizeof(junk), f), sizeof(junk));
    fclose(f);
    cfg = t_cfg(T_DIRECT, MC_DISK_ENGINE_AUTO, 1u << 20);
    ck_assert_int_eq(mc_disk_open(&cfg, &d), MC_ERR_INVALID);
    ck_assert_int_eq(stat(t_path, &st), 0);
    ck_assert_int_eq(st.st_size, sizeof(junk)); /* untouched */
    unlink(t_path);
    /* too small to hold a record */
    cfg = t_cfg(T_DIRECT, MC_DISK_ENGINE_AUTO, BLK);
    ck_assert_int_eq(mc_disk_open(&cfg, &d), MC_ERR_INVALID);
    ck_assert_int_eq(access(t_path, F_OK), -1);
    cfg = t_cfg(T_DIRECT, MC_DISK_ENGINE_AUTO, 1u << 20);
    cfg.chunk = 1000;
    ck_assert_int_eq(mc_disk_open(&cfg, &d), MC_ERR_INVALID);
}
END_TEST

/* more ops than staging buffers, mixed sizes, on the threads engine and io_uring: the
 * queue of ops waiting for buffers drains in order and every op completes once */
START_TEST(test_disk_many_ops_queue_for_buffers)
{
    enum mc_disk_engine e = _i == 0 ? MC_DISK_ENGINE_AUTO : MC_DISK_ENGINE_THREADS;
    enum { N = 200 };
    static struct t_op ops[N];
    static uint8_t src[N][2 * CHUNK], dst[N][2 * CHUNK];
    uint64_t rl = mc_disk_rec_len(2 * CHUNK);
    struct mc_disk *d;
    char keys[N][8];

    t_make_path(T_DIRECT);
    d = t_open(T_DIRECT, e, BLK + N * rl);
    for (unsigned i = 0; i < N; i++) {
        uint64_t sz = 1 + (i * 7919u) % (2 * CHUNK);

        snprintf(keys[i], sizeof(keys[i]), "m%u", i);
        t_pattern(src[i], sz, i);
        ops[i] = (struct t_op){.op.done = t_done};
        ck_assert_int_eq(mc_disk_write(d, &ops[i].op, i * rl, keys[i], (uint32_t)strlen(keys[i]),
                                       1, 0, 0, src[i], sz),
                         0);
    }
    mc_disk_drain(d);
    for (unsigned i = 0; i < N; i++) {
        uint64_t sz = 1 + (i * 7919u) % (2 * CHUNK);

        ck_assert(ops[i].ran && ops[i].res == 0);
        ops[i] = (struct t_op){.op.done = t_done};
        ck_assert_int_eq(mc_disk_read(d, &ops[i].op, i * rl, keys[i], (uint32_t)strlen(keys[i]),
                                      1, dst[i], sz),
                         0);
    }
    mc_disk_drain(d);
    for (unsigned i = 0; i < N; i++) {
        uint64_t sz = 1 + (i * 7919u) % (2 * CHUNK);

        ck_assert(ops[i].ran && ops[i].res == 0);
        ck_assert(memcmp(src[i], dst[i], sz) == 0);
    }
    mc_disk_close(d);
    unlink(t_path);
}
END_TEST

/* ---- kill -9 in the middle of writes ---- */

enum { K_SLOTS = 24, K_SIZE = 3 * CHUNK + 1000, K_INFLIGHT = 6 };
#define K_ISSUED 0x80000000u /* a pipe message: record i was issued (else: completed) */

struct k_op {
    struct mc_disk_op op;
    uint32_t i;
    int fd;
    char key[16];
};

static uint8_t k_buf[K_INFLIGHT][K_SIZE];
static bool k_busy[K_SLOTS]; /* a slot's record is in flight: its space is not reused yet */

static void k_done(struct mc_disk_op *op, int res)
{
    struct k_op *k = (struct k_op *)op;

    if (res != 0)
        _exit(3);
    /* told only after the record is complete */
    if (write(k->fd, &k->i, sizeof(k->i)) != (ssize_t)sizeof(k->i))
        _exit(4);
    k_busy[k->i % K_SLOTS] = false;
    k->op.d = NULL;
}

/* the child: records i = 0, 1, ... at slot i % K_SLOTS (space reused over and over, as
 * the master would hand it out again), version i, K_INFLIGHT in flight, forever */
static void k_writer(int fd)
{
    struct mc_disk_cfg cfg = t_cfg(T_DIRECT, MC_DISK_ENGINE_AUTO, 0);
    static struct k_op ops[K_INFLIGHT];
    uint64_t rl = mc_disk_rec_len(K_SIZE);
    struct mc_disk *d;
    uint32_t i = 0;

    if (mc_disk_open(&cfg, &d) != 0)
        _exit(2);
    for (;;) {
        for (unsigned j = 0; j < K_INFLIGHT; j++) {
            struct k_op *k = &ops[j];

            if (k->op.d != NULL || k_busy[i % K_SLOTS])
                continue; /* in flight */
            k->i = i;
            k->fd = fd;
            k->op.done = k_done;
            snprintf(k->key, sizeof(k->key), "r%u", i % K_SLOTS);
            t_pattern(k_buf[j], K_SIZE, i);
            /* told before the write starts: the parent knows of every record that may have
             * reached the disk */
            {
                uint32_t msg = i | K_ISSUED;

                if (write(fd, &msg, sizeof(msg)) != (ssize_t)sizeof(msg))
                    _exit(4);
            }
            if (mc_disk_write(d, &k->op, (i % K_SLOTS) * rl, k->key, (uint32_t)strlen(k->key),
                              i, 0, 0, k_buf[j], K_SIZE) != 0)
                _exit(5);
            k_busy[i % K_SLOTS] = true;
            i++;
        }
        mc_disk_wait(d);
    }
}

/* test_disk_restart_keeps_objects at the store's level: a writer killed with SIGKILL at
 * random moments, four times over the same file. Reopened: a record whose write completed
 * and whose space no later write was given is there; a slot a later write was reusing holds
 * that record, the older one or nothing, never anything older than the last completed one;
 * every record found reads back exactly. */
START_TEST(test_disk_kill9_keeps_completed_records)
{
    uint64_t rl = mc_disk_rec_len(K_SIZE);
    static uint8_t want[K_SIZE], got[K_SIZE];
    int64_t done_at[K_SLOTS], issued_at[K_SLOTS];
    struct mc_disk *d;
    uint32_t completed = 0, kept_exact = 0;

    t_make_path(T_DIRECT);
    d = t_open(T_DIRECT, MC_DISK_ENGINE_AUTO, BLK + K_SLOTS * rl);
    mc_disk_close(d);
    for (int round = 0; round < 4; round++) {
        const struct mc_disk_rec *recs;
        int p[2], status;
        uint32_t msg, n = 0, kill_after = 20 + (uint32_t)round * 17;
        pid_t pid;
        size_t nf;

        /* each round's writer counts from 0 again: the slots are judged per round (the
         * scan orders records by sequence number, which goes on across rounds) */
        for (unsigned s = 0; s < K_SLOTS; s++)
            done_at[s] = issued_at[s] = -1;
        ck_assert_int_eq(pipe(p), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(p[0]);
            k_writer(p[1]);
        }
        close(p[1]);
        while (read(p[0], &msg, sizeof(msg)) == (ssize_t)sizeof(msg)) {
            uint32_t i = msg & ~K_ISSUED;

            if (msg & K_ISSUED) {
                issued_at[i % K_SLOTS] = i;
                continue;
            }
            if ((int64_t)i > done_at[i % K_SLOTS])
                done_at[i % K_SLOTS] = i;
            if (++n == kill_after)
                kill(pid, SIGKILL);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        close(p[0]);
        completed += n;

        d = t_open(T_DIRECT, MC_DISK_ENGINE_AUTO, 0);
        nf = mc_disk_found(d, &recs);
        for (unsigned s = 0; s < K_SLOTS; s++) {
            const struct mc_disk_rec *r = NULL;

            for (size_t j = 0; j < nf; j++)
                if (recs[j].off == s * rl)
                    r = &recs[j];
            if (done_at[s] < 0)
                continue;
            if (issued_at[s] == done_at[s]) {
                ck_assert_msg(r != NULL && r->h.version == (uint64_t)done_at[s],
                              "round %d slot %u: record %" PRId64 " lost", round, s,
                              done_at[s]);
                kept_exact++;
            } else if (r != NULL) {
                ck_assert_uint_ge(r->h.version, (uint64_t)done_at[s]);
                ck_assert_uint_le(r->h.version, (uint64_t)issued_at[s]);
            }
        }
        for (size_t j = 0; j < nf; j++) {
            char key[16];

            snprintf(key, sizeof(key), "%.*s", (int)recs[j].h.key_len, recs[j].key);
            t_pattern(want, K_SIZE, (uint32_t)recs[j].h.version);
            ck_assert_int_eq(t_read(d, recs[j].off, key, recs[j].h.version, got, K_SIZE), 0);
            ck_assert(memcmp(want, got, K_SIZE) == 0);
        }
        mc_disk_close(d);
    }
    ck_assert_uint_gt(completed, 0);
    ck_assert_uint_gt(kept_exact, 0);
    unlink(t_path);
}
END_TEST

/* ---- the engines alone ---- */

struct t_req {
    struct mc_disk_io_req r;
    int res;
    bool ran;
};

static void t_req_done(struct mc_disk_io_req *r, int res)
{
    struct t_req *t = (struct t_req *)r;

    ck_assert(!t->ran);
    t->ran = true;
    t->res = res;
}

/* a read that passes the file's end is MC_ERR_IO (not a short success), on either engine;
 * a read within it returns the bytes; a write past the end grows a regular file */
START_TEST(test_disk_io_past_the_end)
{
    enum mc_disk_engine e = _i == 0 ? MC_DISK_ENGINE_THREADS : MC_DISK_ENGINE_URING;
    struct mc_disk_io_cfg cfg = {.want = e, .depth = 4, .threads = 2};
    struct t_req a = {.r = {.done = t_req_done, .buf_index = -1}};
    struct t_req b = {.r = {.done = t_req_done, .buf_index = -1}};
    struct mc_disk_io *io;
    uint8_t *buf;
    int fd, uerr = 0, err;

    t_make_path(T_DIRECT);
    fd = open(t_path, O_RDWR | O_CREAT | O_DIRECT, 0600);
    if (fd < 0) {
        fprintf(stderr, "SKIP: no O_DIRECT here\n");
        return;
    }
    ck_assert_int_eq(ftruncate(fd, 2 * BLK), 0);
    ck_assert_int_eq(posix_memalign((void **)&buf, BLK, 4 * BLK), 0);
    memset(buf, 7, 4 * BLK);
    cfg.fd = fd;
    cfg.direct = true;
    err = mc_disk_io_create(&cfg, &io, &uerr);
    if (e == MC_DISK_ENGINE_URING && err == MC_ERR_IO) {
        fprintf(stderr, "SKIP io_uring: %d\n", uerr);
        free(buf);
        close(fd);
        unlink(t_path);
        return;
    }
    ck_assert_int_eq(err, 0);
    a.r.off = BLK; /* one block there, one past the end */
    a.r.buf = buf;
    a.r.len = 2 * BLK;
    b.r.off = 0;
    b.r.buf = buf + 2 * BLK;
    b.r.len = BLK;
    mc_disk_io_submit(io, &a.r);
    mc_disk_io_submit(io, &b.r);
    ck_assert_uint_eq(mc_disk_io_pending(io), 2);
    while (mc_disk_io_pending(io) > 0) {
        mc_disk_io_wait(io);
        mc_disk_io_reap(io);
    }
    ck_assert(a.ran && b.ran);
    ck_assert_int_eq(a.res, MC_ERR_IO);
    ck_assert_int_eq(b.res, 0);
    ck_assert_uint_eq(buf[2 * BLK], 0); /* the file's zeros */
    /* a write past the end grows the file */
    a = (struct t_req){.r = {.done = t_req_done, .buf_index = -1, .off = 3 * BLK, .buf = buf,
                             .len = BLK, .write = true}};
    mc_disk_io_submit(io, &a.r);
    while (mc_disk_io_pending(io) > 0) {
        mc_disk_io_wait(io);
        mc_disk_io_reap(io);
    }
    ck_assert_int_eq(a.res, 0);
    ck_assert_int_eq(lseek(fd, 0, SEEK_END), 4 * BLK);
    mc_disk_io_destroy(io);
    free(buf);
    close(fd);
    unlink(t_path);
}
END_TEST

/* Reads into a region registered with the io_uring engine (mc_disk_register_region, what
 * the agent does with its landing segments) use its fixed buffers: read_direct_fixed counts
 * each such I/O, the bytes are right, a read into aligned memory outside the region is direct
 * but not fixed, and so are reads that straddle its end; an unaligned region is refused and
 * changes nothing. With the threads engine there is nothing to register: 0, none fixed. */
START_TEST(test_disk_reads_into_a_registered_region_use_fixed_buffers)
{
    bool uring = _i == 0;
    enum { SZ = 3 * CHUNK + BLK }; /* whole blocks: the payload is one direct read */
    size_t cap = 4 * (size_t)SZ;
    uint8_t *src = malloc(SZ), *reg, *other;
    struct mc_disk_stats st;
    struct mc_disk_cfg cfg;
    struct mc_disk *d;
    uint64_t fixed0;

    ck_assert_ptr_nonnull(src);
    ck_assert_int_eq(posix_memalign((void **)&reg, BLK, cap), 0);
    ck_assert_int_eq(posix_memalign((void **)&other, BLK, cap), 0);
    t_pattern(src, SZ, 91);
    t_make_path(T_DIRECT);
    cfg = t_cfg(T_DIRECT, uring ? MC_DISK_ENGINE_AUTO : MC_DISK_ENGINE_THREADS, 8u << 20);
    ck_assert_int_eq(mc_disk_open(&cfg, &d), 0);
    if (uring && (!mc_disk_is_direct(d) || strcmp(mc_disk_engine(d), "io_uring") != 0)) {
        fprintf(stderr, "SKIP fixed buffers: engine %s, direct %d, uring err %d\n",
                mc_disk_engine(d), mc_disk_is_direct(d), mc_disk_uring_err(d));
        uring = false; /* the threads engine's half of the test still holds */
    }
    ck_assert_int_eq(t_write(d, 0, "fx", 3, src, SZ), 0);
    ck_assert_int_eq(mc_disk_register_region(d, reg + 8, cap - BLK), uring ? MC_ERR_INVALID : 0);
    ck_assert_int_eq(mc_disk_register_region(d, reg, cap / 2), 0);

    /* inside the region: every direct I/O fixed */
    memset(reg, 0xee, cap);
    ck_assert_int_eq(t_read(d, 0, "fx", 3, reg, SZ), 0);
    ck_assert(memcmp(reg, src, SZ) == 0);
    mc_disk_get_stats(d, &st);
    ck_assert_uint_gt(st.read_direct_bytes, 0);
    if (uring)
        ck_assert_uint_eq(st.read_direct_fixed, 1); /* the payload's one read */
    else
        ck_assert_uint_eq(st.read_direct_fixed, 0);
    fixed0 = st.read_direct_fixed;

    /* aligned memory elsewhere: direct, not fixed */
    memset(other, 0xee, cap);
    ck_assert_int_eq(t_read(d, 0, "fx", 3, other, SZ), 0);
    ck_assert(memcmp(other, src, SZ) == 0);
    mc_disk_get_stats(d, &st);
    ck_assert_uint_eq(st.read_direct_fixed, fixed0);

    /* straddling the region's end (cap / 2): the read that crosses it is not fixed, the
     * bytes are right all the same; one ending exactly at the end is */
    memset(reg, 0xee, cap);
    ck_assert_int_eq(t_read(d, 0, "fx", 3, reg + cap / 2 - 2 * CHUNK, SZ), 0);
    ck_assert(memcmp(reg + cap / 2 - 2 * CHUNK, src, SZ) == 0);
    mc_disk_get_stats(d, &st);
    ck_assert_uint_eq(st.read_direct_fixed, fixed0);
    ck_assert_int_eq(t_read(d, 0, "fx", 3, reg + cap / 2 - SZ, SZ), 0);
    ck_assert(memcmp(reg + cap / 2 - SZ, src, SZ) == 0);
    mc_disk_get_stats(d, &st);
    ck_assert_uint_eq(st.read_direct_fixed, fixed0 + uring);
    mc_disk_close(d);
    unlink(t_path);
    free(src);
    free(reg);
    free(other);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("agent_disk");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_disk_fmt_header_roundtrip_and_every_flip_fails);
    tcase_add_test(tc, test_disk_fmt_trailer_header_roundtrip);
    tcase_add_test(tc, test_disk_fmt_superblock_roundtrip_and_corrupt);
    tcase_add_test(tc, test_disk_scan_drops_what_a_later_record_overwrote);
    tcase_add_test(tc, test_disk_roundtrip_io_uring_direct);
    tcase_add_test(tc, test_disk_roundtrip_threads_direct);
    tcase_add_test(tc, test_disk_roundtrip_threads_buffered);
    tcase_add_test(tc, test_disk_roundtrip_tmpfs_falls_back);
    tcase_add_test(tc, test_disk_uring_refused_without_direct);
    tcase_add_loop_test(tc, test_disk_image_roundtrip_direct_and_staged, T_DIRECT, T_TMPFS + 1);
    tcase_add_loop_test(tc, test_disk_torn_record_dropped, T_DIRECT, T_TMPFS + 1);
    tcase_add_test(tc, test_disk_reuse_and_mismatch);
    tcase_add_loop_test(tc, test_disk_mark_removed_reads_but_is_not_found, T_DIRECT,
                        T_TMPFS + 1);
    tcase_add_test(tc, test_disk_refuses_a_foreign_file);
    tcase_add_loop_test(tc, test_disk_many_ops_queue_for_buffers, 0, 2);
    tcase_add_test(tc, test_disk_kill9_keeps_completed_records);
    tcase_add_loop_test(tc, test_disk_io_past_the_end, 0, 2);
    tcase_add_loop_test(tc, test_disk_reads_into_a_registered_region_use_fixed_buffers, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(t_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
