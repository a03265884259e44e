/*
 * The disk tier's on-disk format (disk_fmt.h): encoding, decoding and the scan's rules.
 */
#include "daemon/agent/disk_fmt.h"

#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>
/* payloads are hashed like objects: through libxxhash's AVX2 / AVX-512 dispatcher (the same
 * values as the SSE2 entry points, at about twice their speed: shm/checksum.h) */
#include "shm/checksum.h"
#include "shm/ring.h" /* the checksum trailer's layout */

#include <mc/mc_status.h>

_Static_assert(MC_DISK_SECRET_LEN >= XXH3_SECRET_SIZE_MIN, "secret too short for XXH3");
_Static_assert(MC_DISK_HDR_FIXED + MC_DISK_KEY_MAX == MC_DISK_BLOCK, "header block");

static const uint8_t sb_magic[8] = {'M', 'C', 'D', 'I', 'S', 'K', 'S', 'B'};
static const uint8_t rec_magic[8] = {'M', 'C', 'D', 'I', 'S', 'K', 'R', 'C'};

/* superblock layout */
#define SB_FORMAT 8    /* u32 */
#define SB_BLOCK 12    /* u32 */
#define SB_REGION 16   /* u64 */
#define SB_SECRET 24   /* MC_DISK_SECRET_LEN bytes */
#define SB_SUM (SB_SECRET + MC_DISK_SECRET_LEN) /* u64: XXH3 of [0, SB_SUM) */

/* header layout */
#define H_FORMAT 8
#define H_KEYLEN 12
#define H_SEQ 16
#define H_VERSION 24
#define H_SIZE 32
#define H_ALLOC 40
#define H_FLAGS 48
#define H_STATE 52 /* MC_DISK_REC_* */
#define H_EXPIRE 56
#define H_PAYLOAD 64
#define H_MAC 72 /* XXH3 with the secret of [0, H_MAC) and the key */
_Static_assert(H_MAC + 8 == MC_DISK_HDR_FIXED, "header layout");

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;

    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

uint64_t mc_disk_rec_len(uint64_t size)
{
    if (size > UINT64_MAX - 2 * (uint64_t)MC_DISK_BLOCK)
        return 0;
    return MC_DISK_BLOCK + ((size + MC_DISK_BLOCK - 1) & ~(uint64_t)(MC_DISK_BLOCK - 1));
}

void mc_disk_sb_encode(const struct mc_disk_sb *sb, uint8_t *block)
{
    memset(block, 0, MC_DISK_BLOCK);
    memcpy(block, sb_magic, sizeof(sb_magic));
    put32(block + SB_FORMAT, MC_DISK_FORMAT);
    put32(block + SB_BLOCK, MC_DISK_BLOCK);
    put64(block + SB_REGION, sb->region);
    memcpy(block + SB_SECRET, sb->secret, MC_DISK_SECRET_LEN);
    put64(block + SB_SUM, XXH3_64bits(block, SB_SUM));
}

int mc_disk_sb_decode(const uint8_t *block, size_t len, struct mc_disk_sb *sb_p)
{
    uint64_t region;

    if (len < MC_DISK_BLOCK || memcmp(block, sb_magic, sizeof(sb_magic)) != 0 ||
        get32(block + SB_FORMAT) != MC_DISK_FORMAT || get32(block + SB_BLOCK) != MC_DISK_BLOCK ||
        get64(block + SB_SUM) != XXH3_64bits(block, SB_SUM))
        return MC_ERR_CORRUPT;
    region = get64(block + SB_REGION);
    if (region == 0 || region % MC_DISK_BLOCK != 0 || region > UINT64_MAX / 2)
        return MC_ERR_CORRUPT;
    sb_p->region = region;
    memcpy(sb_p->secret, block + SB_SECRET, MC_DISK_SECRET_LEN);
    return 0;
}

/* format 2: where the trailer starts in the header block (8-aligned after the key) */
static uint64_t trailer_at(uint32_t key_len)
{
    return MC_DISK_HDR_FIXED + (((uint64_t)key_len + 7) & ~UINT64_C(7));
}

uint64_t mc_disk_trailer_len(uint64_t size)
{
    return 8 * (mc_shm_nchunks(size) + 1);
}

bool mc_disk_trailer_fits(uint64_t size, uint32_t key_len)
{
    return key_len <= MC_DISK_KEY_MAX && size <= UINT64_MAX / 2 &&
           mc_shm_nchunks(size) < MC_DISK_BLOCK / 8 &&
           trailer_at(key_len) + mc_disk_trailer_len(size) <= MC_DISK_BLOCK;
}

void mc_disk_trailer_make(const uint8_t *payload, uint64_t size, uint8_t *trailer)
{
    uint64_t n = mc_shm_nchunks(size), v;

    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = i + 1 < n ? MC_SHM_CHUNK : size - i * MC_SHM_CHUNK;

        v = XXH3_64bits(payload + i * MC_SHM_CHUNK, len);
        memcpy(trailer + 8 * i, &v, 8);
    }
    v = XXH3_64bits(trailer, n * 8);
    memcpy(trailer + 8 * n, &v, 8);
}

static bool trailer_whole(const uint8_t *trailer, uint64_t n)
{
    uint64_t v;

    memcpy(&v, trailer + 8 * n, 8);
    return XXH3_64bits(trailer, n * 8) == v;
}

bool mc_disk_trailer_whole(const uint8_t *trailer, uint64_t size)
{
    return trailer_whole(trailer, mc_shm_nchunks(size));
}

bool mc_disk_trailer_check(const uint8_t *payload, uint64_t size, const uint8_t *trailer)
{
    uint64_t n = mc_shm_nchunks(size), v;

    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = i + 1 < n ? MC_SHM_CHUNK : size - i * MC_SHM_CHUNK;

        memcpy(&v, trailer + 8 * i, 8);
        if (XXH3_64bits(payload + i * MC_SHM_CHUNK, len) != v)
            return false;
    }
    return trailer_whole(trailer, n);
}

/* The MAC: keyed XXH3 of the fixed part before the MAC, then the key, which follows the MAC
 * (the MAC's 8 bytes left out), then in format 2 the key's padding and the trailer. */
static uint64_t hdr_mac(const uint8_t *block, uint32_t key_len, uint64_t tail,
                        const uint8_t *secret)
{
    XXH3_state_t st;

    XXH3_64bits_reset_withSecret(&st, secret, MC_DISK_SECRET_LEN);
    XXH3_64bits_update(&st, block, H_MAC);
    XXH3_64bits_update(&st, block + MC_DISK_HDR_FIXED, key_len + tail);
    return XXH3_64bits_digest(&st);
}

int mc_disk_hdr_encode(const struct mc_disk_hdr *h, const uint8_t *secret, uint8_t *block)
{
    uint64_t tail = 0, payload = h->payload_xxh3;

    if (h->key_len == 0 || h->key_len > MC_DISK_KEY_MAX || h->key == NULL ||
        h->state > MC_DISK_REC_REMOVED ||
        h->alloc_len == 0 || h->alloc_len != mc_disk_rec_len(h->size))
        return MC_ERR_INVALID;
    if (h->trailer != NULL) {
        uint64_t n = mc_shm_nchunks(h->size);

        if (!mc_disk_trailer_fits(h->size, h->key_len) || !trailer_whole(h->trailer, n))
            return MC_ERR_INVALID;
        memcpy(&payload, h->trailer + 8 * n, 8);
        tail = trailer_at(h->key_len) - MC_DISK_HDR_FIXED - h->key_len +
               mc_disk_trailer_len(h->size);
    }
    memset(block, 0, MC_DISK_BLOCK);
    memcpy(block, rec_magic, sizeof(rec_magic));
    put32(block + H_FORMAT, h->trailer != NULL ? MC_DISK_REC_FORMAT_TRAILER : MC_DISK_FORMAT);
    put32(block + H_KEYLEN, h->key_len);
    put64(block + H_SEQ, h->seq);
    put64(block + H_VERSION, h->version);
    put64(block + H_SIZE, h->size);
    put64(block + H_ALLOC, h->alloc_len);
    put32(block + H_FLAGS, h->flags);
    put32(block + H_STATE, h->state);
    put64(block + H_EXPIRE, h->expire_ms);
    put64(block + H_PAYLOAD, payload);
    memcpy(block + MC_DISK_HDR_FIXED, h->key, h->key_len);
    if (h->trailer != NULL)
        memcpy(block + trailer_at(h->key_len), h->trailer, mc_disk_trailer_len(h->size));
    put64(block + H_MAC, hdr_mac(block, h->key_len, tail, secret));
    return 0;
}

int mc_disk_hdr_restate(uint8_t *block, const uint8_t *secret, uint32_t state)
{
    struct mc_disk_hdr h;
    uint64_t tail = 0;

    if (state > MC_DISK_REC_REMOVED ||
        mc_disk_hdr_decode(block, MC_DISK_BLOCK, secret, &h) != 0)
        return MC_ERR_CORRUPT;
    if (h.trailer != NULL)
        tail = trailer_at(h.key_len) - MC_DISK_HDR_FIXED - h.key_len +
               mc_disk_trailer_len(h.size);
    put32(block + H_STATE, state);
    put64(block + H_MAC, hdr_mac(block, h.key_len, tail, secret));
    return 0;
}

static bool is_rec_magic(const uint8_t *block)
{
    return memcmp(block, rec_magic, sizeof(rec_magic)) == 0;
}

int mc_disk_hdr_decode(const uint8_t *block, size_t len, const uint8_t *secret,
                       struct mc_disk_hdr *h_p)
{
    struct mc_disk_hdr h;
    uint32_t format;
    uint64_t tail = 0;

    if (len < MC_DISK_BLOCK || !is_rec_magic(block))
        return MC_ERR_CORRUPT;
    format = get32(block + H_FORMAT);
    if ((format != MC_DISK_FORMAT && format != MC_DISK_REC_FORMAT_TRAILER) ||
        get32(block + H_STATE) > MC_DISK_REC_REMOVED)
        return MC_ERR_CORRUPT;
    h.key_len = get32(block + H_KEYLEN);
    if (h.key_len == 0 || h.key_len > MC_DISK_KEY_MAX)
        return MC_ERR_CORRUPT;
    h.size = get64(block + H_SIZE);
    h.trailer = NULL;
    if (format == MC_DISK_REC_FORMAT_TRAILER) {
        /* the size places the trailer: checked before the MAC reads that far */
        if (!mc_disk_trailer_fits(h.size, h.key_len))
            return MC_ERR_CORRUPT;
        tail = trailer_at(h.key_len) - MC_DISK_HDR_FIXED - h.key_len +
               mc_disk_trailer_len(h.size);
        h.trailer = block + trailer_at(h.key_len);
    }
    if (get64(block + H_MAC) != hdr_mac(block, h.key_len, tail, secret))
        return MC_ERR_CORRUPT;
    h.seq = get64(block + H_SEQ);
    h.version = get64(block + H_VERSION);
    h.alloc_len = get64(block + H_ALLOC);
    h.flags = get32(block + H_FLAGS);
    h.expire_ms = get64(block + H_EXPIRE);
    h.payload_xxh3 = get64(block + H_PAYLOAD);
    h.state = get32(block + H_STATE);
    h.key = block + MC_DISK_HDR_FIXED;
    /* a MAC'd header came from us, but the lengths are checked all the same: the file may
     * have been written by another build */
    if (h.alloc_len == 0 || h.alloc_len != mc_disk_rec_len(h.size))
        return MC_ERR_CORRUPT;
    if (h.trailer != NULL) {
        uint64_t n = mc_shm_nchunks(h.size), v;

        memcpy(&v, h.trailer + 8 * n, 8);
        if (v != h.payload_xxh3 || !trailer_whole(h.trailer, n))
            return MC_ERR_CORRUPT;
    }
    *h_p = h;
    return 0;
}

uint64_t mc_disk_payload_hash(const void *p, size_t len)
{
    return XXH3_64bits(p, len);
}

void mc_disk_scan_init(struct mc_disk_scan *sc, const uint8_t *secret, uint64_t region)
{
    memset(sc, 0, sizeof(*sc));
    sc->secret = secret;
    sc->region = region;
}

void mc_disk_scan_cleanup(struct mc_disk_scan *sc)
{
    free(sc->recs);
    sc->recs = NULL;
    sc->n = sc->cap = 0;
}

int mc_disk_scan_block(struct mc_disk_scan *sc, uint64_t off, const uint8_t *block)
{
    struct mc_disk_hdr h;
    struct mc_disk_rec *r;

    if (!is_rec_magic(block))
        return 0;
    if (mc_disk_hdr_decode(block, MC_DISK_BLOCK, sc->secret, &h) != 0) {
        sc->bad_headers++;
        return 0;
    }
    if (h.seq > sc->max_seq)
        sc->max_seq = h.seq;
    if (off > sc->region || h.alloc_len > sc->region - off) {
        sc->out_of_range++;
        return 0;
    }
    if (sc->n == sc->cap) {
        size_t cap = sc->cap != 0 ? sc->cap * 2 : 64;
        struct mc_disk_rec *n = realloc(sc->recs, cap * sizeof(*n));

        if (n == NULL)
            return MC_ERR_NOMEM;
        sc->recs = n;
        sc->cap = cap;
    }
    r = &sc->recs[sc->n++];
    r->off = off;
    r->h = h;
    memcpy(r->key, h.key, h.key_len);
    r->h.key = NULL; /* the block is the caller's: r->key holds the key */
    r->h.trailer = NULL; /* (a reader takes it from the header it reads) */
    r->dropped = false;
    return 0;
}

static int cmp_off(const void *a, const void *b)
{
    const struct mc_disk_rec *x = a, *y = b;

    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return x->h.seq < y->h.seq ? -1 : x->h.seq > y->h.seq;
}

/* x and y overlap: the one written earlier (lower seq) was overwritten; equal sequence
 * numbers cannot both be ours, so both go. */
static void overlap(struct mc_disk_rec *x, struct mc_disk_rec *y)
{
    if (x->h.seq <= y->h.seq)
        x->dropped = true;
    if (y->h.seq <= x->h.seq)
        y->dropped = true;
}

long mc_disk_scan_resolve(struct mc_disk_scan *sc)
{
    size_t kept = 0, *active, na = 0;

    if (sc->n == 0)
        return 0;
    active = malloc(sc->n * sizeof(*active));
    if (active == NULL)
        return MC_ERR_NOMEM;
    qsort(sc->recs, sc->n, sizeof(*sc->recs), cmp_off);
    /* sweep by start: the active set holds the records whose extent reaches past the
     * current start (a record nests in few others, so it stays small); every overlapping
     * pair meets there once */
    for (size_t i = 0; i < sc->n; i++) {
        struct mc_disk_rec *r = &sc->recs[i];
        size_t w = 0;

        for (size_t k = 0; k < na; k++) {
            struct mc_disk_rec *a = &sc->recs[active[k]];

            if (a->off + a->h.alloc_len <= r->off)
                continue; /* ended before r: leaves the set */
            overlap(a, r);
            active[w++] = active[k];
        }
        na = w;
        active[na++] = i;
    }
    free(active);
    for (size_t i = 0; i < sc->n; i++) {
        if (sc->recs[i].h.state != MC_DISK_REC_COMMITTED)
            sc->recs[i].dropped = true; /* half-written, or freed */
        kept += !sc->recs[i].dropped;
    }
    return (long)kept;
}
