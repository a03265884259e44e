/*
 * Unit tests of mc_alloc, the master's per-segment offset allocator: argument checks,
 * rounding, coalescing, the exact largest-free figure, the clock hand, and a long seeded
 * random run checked against a plain model of live intervals.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/master/alloc.h"

#define T_KIB (1ull << 10)
#define T_MIB (1ull << 20)
#define T_GIB (1ull << 30)

/*
 * ck_assert records a checkpoint (a write to the runner's channel) on every call, which
 * dominates a loop of millions of checks; the hot loops below check quietly and report
 * only a failure.
 */
#define T_CHECK(expr)                                                                          \
    do {                                                                                       \
        if (!(expr))                                                                           \
            ck_abort_msg("'%s' failed", #expr);                                                \
    } while (0)
#define T_CHECK_U(x, op, y)                                                                    \
    do {                                                                                       \
        uintmax_t t_x_ = (x), t_y_ = (y);                                                      \
        if (!(t_x_ op t_y_))                                                                   \
            ck_abort_msg("'%s %s %s' failed: %ju vs %ju", #x, #op, #y, t_x_, t_y_);            \
    } while (0)
#define T_CHECK_I(x, op, y)                                                                    \
    do {                                                                                       \
        intmax_t t_x_ = (x), t_y_ = (y);                                                       \
        if (!(t_x_ op t_y_))                                                                   \
            ck_abort_msg("'%s %s %s' failed: %jd vs %jd", #x, #op, #y, t_x_, t_y_);            \
    } while (0)

static struct mc_alloc *t_create(uint64_t size, uint64_t granule)
{
    struct mc_alloc *a = NULL;

    ck_assert_int_eq(mc_alloc_create(size, granule, &a), 0);
    ck_assert_ptr_nonnull(a);
    ck_assert(mc_alloc_check(a));
    return a;
}

static uint32_t t_alloc(struct mc_alloc *a, uint64_t len)
{
    uint32_t id = MC_ALLOC_NONE;

    ck_assert_int_eq(mc_alloc_alloc(a, len, &id), 0);
    ck_assert(mc_alloc_is_used(a, id));
    return id;
}

/* xorshift64*: small, seeded, the same sequence on every machine */
static uint64_t t_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static uint64_t t_rand_range(uint64_t *s, uint64_t lo, uint64_t hi) /* inclusive */
{
    return lo + t_rand(s) % (hi - lo + 1);
}

static void t_shuffle(uint32_t *v, uint32_t n, uint64_t *s)
{
    uint32_t i, j, tmp;

    for (i = n; i > 1; i--) {
        j = (uint32_t)(t_rand(s) % i);
        tmp = v[i - 1];
        v[i - 1] = v[j];
        v[j] = tmp;
    }
}

static void t_assert_empty(struct mc_alloc *a)
{
    ck_assert(mc_alloc_check(a));
    ck_assert_uint_eq(mc_alloc_used_blocks(a), 0);
    ck_assert_uint_eq(mc_alloc_free_bytes(a), mc_alloc_capacity(a));
    ck_assert_uint_eq(mc_alloc_used_bytes(a), 0);
    ck_assert_uint_eq(mc_alloc_largest_free(a), mc_alloc_capacity(a));
}

START_TEST(test_alloc_create_rejects_bad_args)
{
    struct mc_alloc *a = (struct mc_alloc *)&a; /* a sentinel: outputs only on success */
    struct mc_alloc *sentinel = a;

    ck_assert_int_eq(mc_alloc_create(T_MIB, 0, &a), MC_ERR_INVALID);
    ck_assert_int_eq(mc_alloc_create(T_MIB, 4, &a), MC_ERR_INVALID);
    ck_assert_int_eq(mc_alloc_create(T_MIB, 7, &a), MC_ERR_INVALID);
    ck_assert_int_eq(mc_alloc_create(T_MIB, 24, &a), MC_ERR_INVALID);
    ck_assert_int_eq(mc_alloc_create(T_MIB, 1ull << 63 | 8, &a), MC_ERR_INVALID);
    ck_assert_int_eq(mc_alloc_create(0, 64, &a), MC_ERR_INVALID);
    ck_assert_int_eq(mc_alloc_create(63, 64, &a), MC_ERR_INVALID);
    ck_assert_int_eq(mc_alloc_create(8ull << 32, 8, &a), MC_ERR_INVALID);
    ck_assert_ptr_eq(a, sentinel);

    /* the limits themselves are fine */
    ck_assert_int_eq(mc_alloc_create(8, 8, &a), 0);
    ck_assert_uint_eq(mc_alloc_capacity(a), 8);
    mc_alloc_destroy(a);
    ck_assert_int_eq(mc_alloc_create(8 * (uint64_t)MC_ALLOC_MAX_UNITS, 8, &a), 0);
    mc_alloc_destroy(a);
    mc_alloc_destroy(NULL);
}
END_TEST

START_TEST(test_alloc_basic_alloc_free_rounding)
{
    struct mc_alloc *a = t_create(1000, 64); /* usable size rounds down to 960 */
    uint32_t x, y, z;

    ck_assert_uint_eq(mc_alloc_capacity(a), 960);
    ck_assert_uint_eq(mc_alloc_granule(a), 64);
    t_assert_empty(a);

    x = t_alloc(a, 1);
    ck_assert_uint_eq(mc_alloc_offset(a, x), 0);
    ck_assert_uint_eq(mc_alloc_len(a, x), 64);
    y = t_alloc(a, 100);
    ck_assert_uint_eq(mc_alloc_offset(a, y), 64);
    ck_assert_uint_eq(mc_alloc_len(a, y), 128);
    z = t_alloc(a, 64);
    ck_assert_uint_eq(mc_alloc_offset(a, z), 192);
    ck_assert_uint_eq(mc_alloc_len(a, z), 64);
    ck_assert_uint_eq(mc_alloc_used_blocks(a), 3);
    ck_assert_uint_eq(mc_alloc_used_bytes(a), 256);
    ck_assert_uint_eq(mc_alloc_free_bytes(a), 960 - 256);
    ck_assert_uint_eq(mc_alloc_largest_free(a), 960 - 256);
    ck_assert(mc_alloc_check(a));

    mc_alloc_free(a, y);
    ck_assert(!mc_alloc_is_used(a, y));
    ck_assert_uint_eq(mc_alloc_used_blocks(a), 2);
    ck_assert_uint_eq(mc_alloc_free_bytes(a), 960 - 128);
    ck_assert(mc_alloc_check(a));

    /* the hole is reused by a request that fits it */
    y = t_alloc(a, 65);
    ck_assert_uint_eq(mc_alloc_offset(a, y), 64);
    ck_assert_uint_eq(mc_alloc_len(a, y), 128);

    mc_alloc_free(a, x);
    mc_alloc_free(a, y);
    mc_alloc_free(a, z);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

START_TEST(test_alloc_offsets_aligned_to_granule)
{
    struct mc_alloc *a = t_create(64 * T_MIB, 4096);
    uint64_t s = 42;
    uint32_t ids[512];
    uint32_t i, n = 0;

    for (i = 0; i < 512; i++) {
        uint64_t len = t_rand_range(&s, 1, 300 * T_KIB);

        if (mc_alloc_alloc(a, len, &ids[n]) != 0)
            continue;
        ck_assert_uint_eq(mc_alloc_offset(a, ids[n]) % 4096, 0);
        ck_assert_uint_eq(mc_alloc_len(a, ids[n]) % 4096, 0);
        ck_assert_uint_ge(mc_alloc_len(a, ids[n]), len);
        ck_assert_uint_lt(mc_alloc_len(a, ids[n]) - len, 4096);
        n++;
        if (t_rand(&s) % 3 == 0)
            mc_alloc_free(a, ids[--n]);
    }
    ck_assert(mc_alloc_check(a));
    while (n > 0)
        mc_alloc_free(a, ids[--n]);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

START_TEST(test_alloc_rejects_zero_and_too_large)
{
    struct mc_alloc *a = t_create(T_MIB, 64);
    uint32_t id = 12345;

    ck_assert_int_eq(mc_alloc_alloc(a, 0, &id), MC_ERR_INVALID);
    ck_assert_int_eq(mc_alloc_alloc(a, T_MIB + 1, &id), MC_ERR_TOO_LARGE);
    ck_assert_int_eq(mc_alloc_alloc(a, UINT64_MAX, &id), MC_ERR_TOO_LARGE);
    ck_assert_int_eq(mc_alloc_alloc(a, (uint64_t)1 << 63, &id), MC_ERR_TOO_LARGE);
    ck_assert_uint_eq(id, 12345);
    t_assert_empty(a);

    /* exactly the capacity fits; then even one byte is NO_SPACE, not TOO_LARGE */
    id = t_alloc(a, T_MIB);
    ck_assert_uint_eq(mc_alloc_offset(a, id), 0);
    ck_assert_uint_eq(mc_alloc_free_bytes(a), 0);
    ck_assert_uint_eq(mc_alloc_largest_free(a), 0);
    ck_assert_int_eq(mc_alloc_alloc(a, 1, &id), MC_ERR_NO_SPACE);
    ck_assert(mc_alloc_check(a));
    mc_alloc_free(a, id);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

START_TEST(test_alloc_no_space_when_full)
{
    enum { N = 256 };
    struct mc_alloc *a = t_create(N * 64, 64);
    uint32_t ids[N], id = 777;
    uint32_t i;

    for (i = 0; i < N; i++)
        ids[i] = t_alloc(a, 64);
    ck_assert_int_eq(mc_alloc_alloc(a, 1, &id), MC_ERR_NO_SPACE);
    ck_assert_uint_eq(id, 777);

    /* one hole: one granule fits, two do not */
    mc_alloc_free(a, ids[100]);
    ck_assert_int_eq(mc_alloc_alloc(a, 65, &id), MC_ERR_NO_SPACE);
    ids[100] = t_alloc(a, 64);
    ck_assert_uint_eq(mc_alloc_offset(a, ids[100]), 100 * 64);

    /* fragmented: half the space is free but no two granules are adjacent */
    for (i = 0; i < N; i += 2)
        mc_alloc_free(a, ids[i]);
    ck_assert_uint_eq(mc_alloc_free_bytes(a), N / 2 * 64);
    ck_assert_uint_eq(mc_alloc_largest_free(a), 64);
    ck_assert_int_eq(mc_alloc_alloc(a, 128, &id), MC_ERR_NO_SPACE);
    ck_assert(mc_alloc_check(a));

    for (i = 1; i < N; i += 2)
        mc_alloc_free(a, ids[i]);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

/* Fill the segment with blocks of assorted sizes, free them in `order`, expect one block. */
static void t_fill_and_free(struct mc_alloc *a, uint32_t *ids, uint32_t n,
                            const uint32_t *order)
{
    uint32_t i;

    for (i = 0; i < n; i++) {
        mc_alloc_free(a, ids[order[i]]);
        if (i % 97 == 0)
            ck_assert(mc_alloc_check(a));
    }
    t_assert_empty(a);
    /* the whole capacity is one block again: one request for all of it succeeds */
    ids[0] = t_alloc(a, mc_alloc_capacity(a));
    mc_alloc_free(a, ids[0]);
    t_assert_empty(a);
}

static uint32_t t_fill(struct mc_alloc *a, uint32_t *ids, uint32_t max)
{
    uint64_t left = mc_alloc_capacity(a), g = mc_alloc_granule(a);
    uint32_t n = 0;

    while (left > 0) {
        uint64_t len = (n % 7 + 1) * g - (n % 3); /* odd sizes too */

        ck_assert_uint_lt(n, max);
        if (len > left)
            len = left;
        ids[n] = t_alloc(a, len);
        left -= mc_alloc_len(a, ids[n]);
        n++;
    }
    ck_assert_uint_eq(mc_alloc_free_bytes(a), 0);
    ck_assert(mc_alloc_check(a));
    return n;
}

START_TEST(test_alloc_coalesces_in_any_order)
{
    enum { MAX = 4096 };
    static uint32_t ids[MAX], order[MAX];
    struct mc_alloc *a = t_create(2000 * 64 + 13, 64);
    uint64_t s = 7;
    uint32_t i, n, k;

    for (k = 0; k < 6; k++) {
        n = t_fill(a, ids, MAX);
        for (i = 0; i < n; i++) {
            switch (k) {
            case 0: /* ascending */
                order[i] = i;
                break;
            case 1: /* descending */
                order[i] = n - 1 - i;
                break;
            case 2: /* evens, then odds: every odd free merges both sides */
                order[i] = i < (n + 1) / 2 ? 2 * i : 2 * (i - (n + 1) / 2) + 1;
                break;
            case 3: /* from the middle outwards */
                order[i] = i % 2 == 0 ? n / 2 + i / 2 : n / 2 - 1 - i / 2;
                break;
            default: /* random */
                order[i] = i;
                break;
            }
        }
        if (k >= 4)
            t_shuffle(order, n, &s);
        t_fill_and_free(a, ids, n, order);
    }
    mc_alloc_destroy(a);
}
END_TEST

START_TEST(test_alloc_largest_free_is_exact)
{
    struct mc_alloc *a = t_create(1024 * 8, 8);
    uint32_t b36, b37, b10, sep1, sep2, sep3, rest;

    /* [36][1][37][1][10][1][rest], in granules of 8 bytes */
    b36 = t_alloc(a, 36 * 8);
    sep1 = t_alloc(a, 8);
    b37 = t_alloc(a, 37 * 8);
    sep2 = t_alloc(a, 8);
    b10 = t_alloc(a, 10 * 8);
    sep3 = t_alloc(a, 8);
    rest = t_alloc(a, (1024 - 36 - 37 - 10 - 3) * 8);
    ck_assert_uint_eq(mc_alloc_largest_free(a), 0);

    mc_alloc_free(a, b10);
    ck_assert_uint_eq(mc_alloc_largest_free(a), 10 * 8);
    /* 36 and 37 share a size class; the smaller is freed last so it heads the list */
    mc_alloc_free(a, b37);
    mc_alloc_free(a, b36);
    ck_assert_uint_eq(mc_alloc_largest_free(a), 37 * 8);
    ck_assert_uint_eq(mc_alloc_free_bytes(a), (36 + 37 + 10) * 8);
    ck_assert(mc_alloc_check(a));

    /* a separator freed between 37 and 10 merges them: 37 + 1 + 10 */
    mc_alloc_free(a, sep2);
    ck_assert_uint_eq(mc_alloc_largest_free(a), 48 * 8);
    mc_alloc_free(a, rest);
    ck_assert_uint_eq(mc_alloc_largest_free(a), (1024 - 36 - 37 - 10 - 3) * 8);
    mc_alloc_free(a, sep1);
    mc_alloc_free(a, sep3);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

START_TEST(test_alloc_fallback_scans_own_class)
{
    struct mc_alloc *a = t_create(1024 * 8, 8);
    uint32_t b36, b37, sep1, sep2, rest, id;

    /* the only free blocks are 36 and 37 granules, both in class [36, 38) */
    b36 = t_alloc(a, 36 * 8);
    sep1 = t_alloc(a, 8);
    b37 = t_alloc(a, 37 * 8);
    sep2 = t_alloc(a, 8);
    rest = t_alloc(a, (1024 - 36 - 37 - 2) * 8);
    mc_alloc_free(a, b37);
    mc_alloc_free(a, b36);

    /* good fit for 37 looks at classes >= 38, all empty; the own-class scan finds it */
    id = t_alloc(a, 37 * 8 - 3);
    ck_assert_uint_eq(mc_alloc_offset(a, id), (36 + 1) * 8);
    ck_assert_uint_eq(mc_alloc_len(a, id), 37 * 8);
    ck_assert_int_eq(mc_alloc_alloc(a, 37 * 8, &id), MC_ERR_NO_SPACE);
    ck_assert_uint_eq(mc_alloc_largest_free(a), 36 * 8);
    ck_assert(mc_alloc_check(a));

    mc_alloc_free(a, sep1);
    mc_alloc_free(a, sep2);
    mc_alloc_free(a, rest);
    ck_assert_uint_eq(mc_alloc_used_blocks(a), 1);
    mc_alloc_free(a, id);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

START_TEST(test_alloc_clock_walks_in_address_order)
{
    enum { N = 10 };
    struct mc_alloc *a = t_create(T_MIB, 64);
    uint32_t ids[N], i, id;

    ck_assert_uint_eq(mc_alloc_clock_next(a), MC_ALLOC_NONE);
    for (i = 0; i < N; i++)
        ids[i] = t_alloc(a, 64 * (i + 1));
    /* free a few so the walk has to skip free blocks */
    mc_alloc_free(a, ids[2]);
    mc_alloc_free(a, ids[5]);
    mc_alloc_free(a, ids[6]);

    for (int round = 0; round < 3; round++) {
        uint64_t last = 0;
        uint32_t seen = 0;

        for (i = 0; i < N; i++) {
            if (i == 2 || i == 5 || i == 6)
                continue;
            id = mc_alloc_clock_next(a);
            ck_assert_uint_eq(id, ids[i]);
            ck_assert(seen == 0 || mc_alloc_offset(a, id) > last);
            last = mc_alloc_offset(a, id);
            seen++;
        }
        ck_assert_uint_eq(seen, N - 3);
    }
    ck_assert(mc_alloc_check(a));

    /* a single block comes back every time */
    for (i = 0; i < N; i++) {
        if (i != 2 && i != 5 && i != 6 && i != 8)
            mc_alloc_free(a, ids[i]);
    }
    for (i = 0; i < 4; i++)
        ck_assert_uint_eq(mc_alloc_clock_next(a), ids[8]);
    mc_alloc_free(a, ids[8]);
    ck_assert_uint_eq(mc_alloc_clock_next(a), MC_ALLOC_NONE);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

/* Rewind: the next step of the hand returns the named block, whatever its neighbours are
 * (the first block, one after a free block, one after a used block), and frees around it
 * keep that promise. */
START_TEST(test_alloc_clock_rewind)
{
    enum { N = 8 };
    uint32_t ids[N], i;
    struct mc_alloc *a = t_create(N * 4096, 64);

    for (i = 0; i < N; i++)
        ids[i] = t_alloc(a, 4096);
    for (i = 0; i < 5; i++)
        (void)mc_alloc_clock_next(a);
    mc_alloc_clock_rewind(a, ids[0]);
    ck_assert_uint_eq(mc_alloc_clock_next(a), ids[0]);
    mc_alloc_clock_rewind(a, ids[4]);
    ck_assert_uint_eq(mc_alloc_clock_next(a), ids[4]);
    mc_alloc_free(a, ids[2]);
    mc_alloc_clock_rewind(a, ids[3]); /* hand on the free block before it */
    ck_assert_uint_eq(mc_alloc_clock_next(a), ids[3]);
    mc_alloc_clock_rewind(a, ids[4]); /* hand on ids[3]: freeing it merges it with [2] */
    mc_alloc_free(a, ids[3]);
    ck_assert(mc_alloc_check(a));
    ck_assert_uint_eq(mc_alloc_clock_next(a), ids[4]);
    mc_alloc_clock_rewind(a, ids[6]); /* hand on ids[5]: freed alone, then [6] after it */
    mc_alloc_free(a, ids[5]);
    ck_assert_uint_eq(mc_alloc_clock_next(a), ids[6]);
    ck_assert(mc_alloc_check(a));
    mc_alloc_destroy(a);
}
END_TEST

START_TEST(test_alloc_clock_survives_freeing_under_hand)
{
    enum { N = 3000 };
    static uint32_t ids[N];
    struct mc_alloc *a = t_create(64 * T_MIB, 64);
    uint64_t s = 99, last;
    uint32_t i, id = MC_ALLOC_NONE, freed, steps, wraps;

    /* evict while walking: free every block the hand returns; it must end */
    for (i = 0; i < N; i++)
        ids[i] = t_alloc(a, t_rand_range(&s, 1, 4 * T_KIB));
    for (i = 0; i < N; i += 3)
        mc_alloc_free(a, ids[i]); /* free gaps so frees merge on both sides */
    /* start mid-segment: the loop must go round once, wrapping exactly one time */
    for (i = 0; i < N / 3; i++)
        id = mc_alloc_clock_next(a);
    last = mc_alloc_offset(a, id);
    mc_alloc_free(a, id);
    freed = 1;
    wraps = 0;
    while ((id = mc_alloc_clock_next(a)) != MC_ALLOC_NONE) {
        if (mc_alloc_offset(a, id) <= last)
            ck_assert_uint_le(++wraps, 1);
        last = mc_alloc_offset(a, id);
        mc_alloc_free(a, id);
        ck_assert_uint_le(++freed, N);
        if (freed % 101 == 0)
            ck_assert(mc_alloc_check(a));
    }
    ck_assert_uint_eq(wraps, 1);
    ck_assert_uint_eq(freed, N - (N + 2) / 3);
    t_assert_empty(a);

    /* second chance: the owner marks "referenced"; the first visit clears it */
    for (i = 0; i < N; i++) {
        ids[i] = t_alloc(a, t_rand_range(&s, 1, 4 * T_KIB));
        mc_alloc_set_owner(a, ids[i], (void *)(uintptr_t)(i % 2));
    }
    steps = 0;
    freed = 0;
    while ((id = mc_alloc_clock_next(a)) != MC_ALLOC_NONE) {
        ck_assert_uint_le(++steps, 2 * N);
        if (mc_alloc_owner(a, id) != NULL) {
            mc_alloc_set_owner(a, id, NULL);
            continue;
        }
        mc_alloc_free(a, id);
        freed++;
    }
    ck_assert_uint_eq(freed, N);
    ck_assert_uint_eq(steps, N + N / 2);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

START_TEST(test_alloc_clock_hand_follows_merges)
{
    struct mc_alloc *a = t_create(T_MIB, 64);
    uint32_t b[6], i;

    for (i = 0; i < 6; i++)
        b[i] = t_alloc(a, 64 * (i + 1));

    /* the hand's block is freed and merges into its free predecessor */
    for (i = 0; i <= 2; i++)
        ck_assert_uint_eq(mc_alloc_clock_next(a), b[i]);
    mc_alloc_free(a, b[1]);
    mc_alloc_free(a, b[2]);
    ck_assert(mc_alloc_check(a));
    ck_assert_uint_eq(mc_alloc_clock_next(a), b[3]);

    /* the hand's block is freed alone (used on both sides), later a neighbour's free
     * merges the free run before it, the neighbour and the hand's block into one */
    ck_assert_uint_eq(mc_alloc_clock_next(a), b[4]);
    mc_alloc_free(a, b[4]);
    ck_assert(mc_alloc_check(a));
    mc_alloc_free(a, b[3]);
    ck_assert(mc_alloc_check(a));
    ck_assert_uint_eq(mc_alloc_clock_next(a), b[5]);

    /* the hand's block merges into one free block with the tail; an allocation then takes
     * the front of that block, right after b0 */
    mc_alloc_free(a, b[5]);
    ck_assert(mc_alloc_check(a));
    b[1] = t_alloc(a, 64);
    ck_assert_uint_eq(mc_alloc_offset(a, b[1]), 64);
    ck_assert_uint_eq(mc_alloc_clock_next(a), b[0]);
    ck_assert_uint_eq(mc_alloc_clock_next(a), b[1]);
    ck_assert_uint_eq(mc_alloc_clock_next(a), b[0]);
    mc_alloc_free(a, b[0]);
    mc_alloc_free(a, b[1]);
    ck_assert_uint_eq(mc_alloc_clock_next(a), MC_ALLOC_NONE);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

START_TEST(test_alloc_owner_roundtrip)
{
    struct mc_alloc *a = t_create(T_MIB, 64);
    int x, y;
    uint32_t id1, id2;

    id1 = t_alloc(a, 100);
    id2 = t_alloc(a, 100);
    ck_assert_ptr_null(mc_alloc_owner(a, id1));
    mc_alloc_set_owner(a, id1, &x);
    mc_alloc_set_owner(a, id2, &y);
    ck_assert_ptr_eq(mc_alloc_owner(a, id1), &x);
    ck_assert_ptr_eq(mc_alloc_owner(a, id2), &y);
    ck_assert(mc_alloc_check(a)); /* the owner shares storage with the free links */

    /* a reused id starts with no owner */
    mc_alloc_free(a, id1);
    id1 = t_alloc(a, 64);
    ck_assert_ptr_null(mc_alloc_owner(a, id1));
    ck_assert_ptr_eq(mc_alloc_owner(a, id2), &y);
    mc_alloc_free(a, id1);
    mc_alloc_free(a, id2);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

START_TEST(test_alloc_is_used_rejects_bad_ids)
{
    struct mc_alloc *a = t_create(T_MIB, 64);
    uint32_t id, id2;

    ck_assert(!mc_alloc_is_used(a, MC_ALLOC_NONE));
    ck_assert(!mc_alloc_is_used(a, 0)); /* the initial free block */
    ck_assert(!mc_alloc_is_used(a, 1u << 30));
    id = t_alloc(a, 64);
    id2 = t_alloc(a, 64);
    ck_assert(mc_alloc_is_used(a, id));
    mc_alloc_free(a, id2); /* merges with the free tail: a free block, not a used one */
    ck_assert(!mc_alloc_is_used(a, id2));
    mc_alloc_free(a, id);
    ck_assert(!mc_alloc_is_used(a, id));
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

START_TEST(test_alloc_huge_segment)
{
    /* 64 GiB in 64-byte granules: 2^30 units; nothing of the segment is ever touched */
    struct mc_alloc *a = t_create(64 * T_GIB, 64);
    uint32_t ids[64], id, i;

    ck_assert_uint_eq(mc_alloc_capacity(a), 64 * T_GIB);
    for (i = 0; i < 64; i++) {
        ids[i] = t_alloc(a, T_GIB - (i % 2) * 63); /* rounds up to 1 GiB */
        ck_assert_uint_eq(mc_alloc_offset(a, ids[i]), i * T_GIB);
    }
    ck_assert_int_eq(mc_alloc_alloc(a, 1, &id), MC_ERR_NO_SPACE);
    ck_assert(mc_alloc_check(a));
    for (i = 0; i < 64; i += 2)
        mc_alloc_free(a, ids[i]);
    ck_assert_uint_eq(mc_alloc_largest_free(a), T_GIB);
    ck_assert_int_eq(mc_alloc_alloc(a, T_GIB + 1, &id), MC_ERR_NO_SPACE);
    for (i = 1; i < 64; i += 2)
        mc_alloc_free(a, ids[i]);
    t_assert_empty(a);
    ck_assert_int_eq(mc_alloc_alloc(a, 64 * T_GIB + 1, &id), MC_ERR_TOO_LARGE);
    id = t_alloc(a, 64 * T_GIB);
    mc_alloc_free(a, id);
    t_assert_empty(a);
    mc_alloc_destroy(a);

    /* the largest segment: 2^32 - 1 granules, one block, past the last good-fit class */
    a = t_create(8 * (uint64_t)MC_ALLOC_MAX_UNITS, 8);
    ck_assert_uint_eq(mc_alloc_largest_free(a), 8 * (uint64_t)MC_ALLOC_MAX_UNITS);
    id = t_alloc(a, 8 * (uint64_t)MC_ALLOC_MAX_UNITS);
    ck_assert_uint_eq(mc_alloc_len(a, id), 8 * (uint64_t)MC_ALLOC_MAX_UNITS);
    mc_alloc_free(a, id);
    t_assert_empty(a);
    ids[0] = t_alloc(a, 8 * ((uint64_t)MC_ALLOC_MAX_UNITS - 1));
    ids[1] = t_alloc(a, 1);
    ck_assert_uint_eq(mc_alloc_offset(a, ids[1]), 8 * ((uint64_t)MC_ALLOC_MAX_UNITS - 1));
    mc_alloc_free(a, ids[0]);
    mc_alloc_free(a, ids[1]);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

START_TEST(test_alloc_meta_bytes_grows_with_blocks)
{
    enum { N = 10000 };
    static uint32_t ids[N];
    struct mc_alloc *a = t_create(T_GIB, 64);
    uint64_t before = mc_alloc_meta_bytes(a);
    uint32_t i;

    ck_assert_uint_gt(before, 0);
    for (i = 0; i < N; i++)
        ids[i] = t_alloc(a, 64);
    /* at least 24 bytes per node */
    ck_assert_uint_ge(mc_alloc_meta_bytes(a), before + (N - 4096) * 24ull);
    ck_assert_uint_le(mc_alloc_meta_bytes(a), before + 4 * N * 24ull);
    for (i = 0; i < N; i++)
        mc_alloc_free(a, ids[i]);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

/* ---- the randomized run against a model ---------------------------------------------- */

struct t_blk {
    uint32_t id;
    uint64_t off, len, req; /* bytes */
    uintptr_t tag;
};

struct t_model {
    struct t_blk *live;
    uint32_t n;
    uint8_t *map; /* one byte per granule: 1 when some live block covers it */
    uint64_t units, granule;
    uint64_t live_bytes;
    int64_t hand; /* granule where the allocator's hand node starts; -1: no hand yet */
};

static uint64_t t_model_largest_gap(const struct t_model *m)
{
    uint64_t u, run = 0, best = 0;

    for (u = 0; u < m->units; u++) {
        if (m->map[u] == 0) {
            if (++run > best)
                best = run;
        } else {
            run = 0;
        }
    }
    return best * m->granule;
}

/* The allocator's next clock block: the first live block past the hand, or the first one. */
static uint32_t t_model_clock_next(struct t_model *m)
{
    const struct t_blk *past = NULL, *lowest = NULL;
    uint32_t i;

    for (i = 0; i < m->n; i++) {
        const struct t_blk *b = &m->live[i];
        int64_t u = (int64_t)(b->off / m->granule);

        if (lowest == NULL || b->off < lowest->off)
            lowest = b;
        if (u > m->hand && (past == NULL || b->off < past->off))
            past = b;
    }
    if (past == NULL)
        past = lowest;
    if (past == NULL)
        return MC_ALLOC_NONE;
    m->hand = (int64_t)(past->off / m->granule);
    return past->id;
}

/* Frees live block i in both; true when the hand sat on the block or on its successor. */
static bool t_model_free(struct t_model *m, struct mc_alloc *a, uint32_t i)
{
    struct t_blk b = m->live[i];
    uint64_t u0 = b.off / m->granule, n = b.len / m->granule, u;

    T_CHECK_U(mc_alloc_offset(a, b.id), ==, b.off);
    T_CHECK_U(mc_alloc_len(a, b.id), ==, b.len);
    T_CHECK(mc_alloc_owner(a, b.id) == (void *)b.tag);
    mc_alloc_free(a, b.id);
    T_CHECK(!mc_alloc_is_used(a, b.id));
    for (u = u0; u < u0 + n; u++)
        m->map[u] = 0;
    m->live_bytes -= b.len;
    m->live[i] = m->live[--m->n];

    /*
     * A hand on this block, or on the free block just after it, ends on the node that
     * survives the merge: the start of the free run that now covers it.
     */
    if (m->hand >= (int64_t)u0 && m->hand <= (int64_t)(u0 + n) &&
        (uint64_t)m->hand < m->units && m->map[m->hand] == 0) {
        u = u0;
        while (u > 0 && m->map[u - 1] == 0)
            u--;
        m->hand = (int64_t)u;
        return true;
    }
    return false;
}

static uint64_t t_random_len(uint64_t *s, uint64_t granule, uint64_t cap)
{
    uint64_t r = t_rand(s) % 1000;

    if (r < 300)
        return t_rand_range(s, 1, granule); /* tiny */
    if (r < 550)
        return granule * t_rand_range(s, 1, 64); /* granule multiples */
    if (r < 850)
        return t_rand_range(s, 1, 16 * T_KIB); /* odd sizes */
    if (r < 970)
        return t_rand_range(s, 16 * T_KIB, 256 * T_KIB);
    if (r < 995)
        return t_rand_range(s, 256 * T_KIB, cap / 2); /* large */
    if (r < 998)
        return t_rand_range(s, cap - 4 * granule, cap);  /* near the whole segment */
    return t_rand_range(s, cap + 1, cap + 10 * granule); /* too large */
}

static void t_randomized(uint64_t size, uint64_t granule, uint32_t ops, uint64_t seed)
{
    struct mc_alloc *a = t_create(size, granule);
    uint64_t cap = mc_alloc_capacity(a), s = seed, rounded, len, u, u0;
    uint64_t no_space = 0, allocs = 0, frees = 0;
    struct t_model m = {0};
    uintptr_t next_tag = 1;
    uint32_t op, id;
    bool hand_moved;
    int err;

    T_CHECK_U(cap, ==, size / granule * granule);
    m.units = cap / granule;
    m.granule = granule;
    m.hand = -1;
    m.map = calloc(m.units, 1);
    m.live = calloc(m.units, sizeof(*m.live)); /* at most one block per granule */
    T_CHECK(m.map != NULL);
    T_CHECK(m.live != NULL);

    for (op = 1; op <= ops; op++) {
        uint64_t fill = m.live_bytes * 100 / cap;
        uint64_t p_alloc = fill < 50 ? 65 : fill < 85 ? 50 : 35;

        hand_moved = false;
        if (t_rand(&s) % 20000 == 0) {
            /* now and then drop everything: the segment must come back whole */
            while (m.n > 0)
                t_model_free(&m, a, (uint32_t)(t_rand(&s) % m.n));
            t_assert_empty(a);
        } else if (m.n == 0 || t_rand(&s) % 100 < p_alloc) {
            len = t_random_len(&s, granule, cap);
            rounded = (len + granule - 1) / granule * granule;
            id = MC_ALLOC_NONE;
            err = mc_alloc_alloc(a, len, &id);
            if (rounded > cap) {
                T_CHECK_I(err, ==, MC_ERR_TOO_LARGE);
                T_CHECK_U(id, ==, MC_ALLOC_NONE);
            } else if (err == MC_ERR_NO_SPACE) {
                uint64_t gap = t_model_largest_gap(&m);

                /* fails only when no gap fits, and both views of the largest gap agree */
                T_CHECK_U(id, ==, MC_ALLOC_NONE);
                T_CHECK_U(gap, <, rounded);
                T_CHECK_U(mc_alloc_largest_free(a), ==, gap);
                T_CHECK(mc_alloc_free_bytes(a) < rounded || gap < rounded);
                no_space++;
            } else {
                struct t_blk *b = &m.live[m.n];

                T_CHECK_I(err, ==, 0);
                b->id = id;
                b->off = mc_alloc_offset(a, id);
                b->len = mc_alloc_len(a, id);
                b->req = len;
                b->tag = next_tag++;
                T_CHECK_U(b->off % granule, ==, 0);
                T_CHECK_U(b->len, ==, rounded);
                T_CHECK_U(b->len, >=, b->req);
                T_CHECK_U(b->off + b->len, <=, cap);
                T_CHECK(mc_alloc_owner(a, id) == NULL);
                mc_alloc_set_owner(a, id, (void *)b->tag);
                u0 = b->off / granule;
                for (u = u0; u < u0 + b->len / granule; u++) {
                    T_CHECK(m.map[u] == 0); /* no overlap with a live block */
                    m.map[u] = 1;
                }
                m.live_bytes += b->len;
                m.n++;
                allocs++;
            }
        } else {
            hand_moved = t_model_free(&m, a, (uint32_t)(t_rand(&s) % m.n));
            frees++;
        }

        T_CHECK_U(mc_alloc_free_bytes(a), ==, cap - m.live_bytes);
        T_CHECK_U(mc_alloc_used_bytes(a), ==, m.live_bytes);
        T_CHECK_U(mc_alloc_used_blocks(a), ==, m.n);
        /* right after a merge moved the hand, before its lost node is handed out again */
        if (op % 41 == 0 || hand_moved)
            T_CHECK_U(mc_alloc_clock_next(a), ==, t_model_clock_next(&m));
        if (op % 1000 == 0) {
            ck_assert_msg(mc_alloc_check(a), "op %u: mc_alloc_check failed", op);
            T_CHECK_U(mc_alloc_largest_free(a), ==, t_model_largest_gap(&m));
        }
    }
    /* the run must have exercised both success and failure paths */
    T_CHECK_U(allocs, >, ops / 4);
    T_CHECK_U(frees, >, ops / 4);
    T_CHECK_U(no_space, >, 100);

    while (m.n > 0)
        t_model_free(&m, a, (uint32_t)(t_rand(&s) % m.n));
    t_assert_empty(a);
    free(m.live);
    free(m.map);
    mc_alloc_destroy(a);
}

START_TEST(test_alloc_randomized_against_model)
{
    /* a capacity that is not a power of two, and not a multiple of the granule */
    t_randomized(4 * T_MIB + 1000, 64, 200000, 0x9E3779B97F4A7C15ull);
}
END_TEST

START_TEST(test_alloc_randomized_small_granule)
{
    t_randomized(3 * T_MIB + 5, 8, 100000, 12345);
}
END_TEST

/* Claims of exact extents (restores after a restart): in order, out of order, overlapping,
 * misaligned, past the end; the allocator stays consistent and frees merge back. */
START_TEST(test_alloc_claim_exact_extents)
{
    struct mc_alloc *a = t_create(64 * T_KIB, 4 * T_KIB);
    uint32_t id[8], x;

    ck_assert_int_eq(mc_alloc_claim(a, 8 * T_KIB, 4 * T_KIB, &id[0]), 0);
    ck_assert_uint_eq(mc_alloc_offset(a, id[0]), 8 * T_KIB);
    ck_assert_uint_eq(mc_alloc_len(a, id[0]), 4 * T_KIB);
    ck_assert(mc_alloc_check(a));
    /* next in order: the hint path; rounded up to the granule */
    ck_assert_int_eq(mc_alloc_claim(a, 12 * T_KIB, 5 * T_KIB, &id[1]), 0);
    ck_assert_uint_eq(mc_alloc_len(a, id[1]), 8 * T_KIB);
    /* out of order: before both, and at offset 0 */
    ck_assert_int_eq(mc_alloc_claim(a, 0, 4 * T_KIB, &id[2]), 0);
    ck_assert_uint_eq(mc_alloc_offset(a, id[2]), 0);
    ck_assert(mc_alloc_check(a));
    /* overlaps: the start inside a used block, the tail into one */
    ck_assert_int_eq(mc_alloc_claim(a, 12 * T_KIB, 4 * T_KIB, &x), MC_ERR_EXISTS);
    ck_assert_int_eq(mc_alloc_claim(a, 4 * T_KIB, 8 * T_KIB, &x), MC_ERR_EXISTS);
    ck_assert_int_eq(mc_alloc_claim(a, 16 * T_KIB, 8 * T_KIB, &x), MC_ERR_EXISTS);
    /* bad arguments */
    ck_assert_int_eq(mc_alloc_claim(a, 4 * T_KIB + 8, 4 * T_KIB, &x), MC_ERR_INVALID);
    ck_assert_int_eq(mc_alloc_claim(a, 4 * T_KIB, 0, &x), MC_ERR_INVALID);
    ck_assert_int_eq(mc_alloc_claim(a, 64 * T_KIB, 4 * T_KIB, &x), MC_ERR_INVALID);
    ck_assert_int_eq(mc_alloc_claim(a, 60 * T_KIB, 8 * T_KIB, &x), MC_ERR_INVALID);
    ck_assert_int_eq(mc_alloc_claim(a, 0, UINT64_MAX, &x), MC_ERR_INVALID);
    /* the last granule exactly, then the gap left between claims */
    ck_assert_int_eq(mc_alloc_claim(a, 60 * T_KIB, 4 * T_KIB, &id[3]), 0);
    ck_assert_int_eq(mc_alloc_claim(a, 4 * T_KIB, 4 * T_KIB, &id[4]), 0);
    ck_assert(mc_alloc_check(a));
    ck_assert_uint_eq(mc_alloc_used_bytes(a), 24 * T_KIB);
    ck_assert_uint_eq(mc_alloc_largest_free(a), 40 * T_KIB);
    /* ordinary allocation still works around the claims */
    id[5] = t_alloc(a, 40 * T_KIB);
    ck_assert_uint_eq(mc_alloc_offset(a, id[5]), 20 * T_KIB);
    ck_assert_int_eq(mc_alloc_alloc(a, 4 * T_KIB, &x), MC_ERR_NO_SPACE);
    for (int i = 0; i < 6; i++)
        mc_alloc_free(a, id[i]);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

/* Many claims in ascending order (a segment's holdings) then random frees: consistent. */
START_TEST(test_alloc_claim_ascending_many)
{
    struct mc_alloc *a = t_create(64 * T_MIB, 4 * T_KIB);
    static uint32_t ids[4096];
    uint64_t s = 7, off = 0;
    uint32_t n = 0;

    while (n < 4096) {
        uint64_t len = t_rand_range(&s, 1, 3) * 4 * T_KIB;

        off += t_rand_range(&s, 0, 2) * 4 * T_KIB; /* holes between holdings */
        if (off + len > 64 * T_MIB)
            break;
        T_CHECK_I(mc_alloc_claim(a, off, len, &ids[n]), ==, 0);
        T_CHECK_U(mc_alloc_offset(a, ids[n]), ==, off);
        off += len;
        n++;
    }
    ck_assert(mc_alloc_check(a));
    t_shuffle(ids, n, &s);
    for (uint32_t i = 0; i < n; i++)
        mc_alloc_free(a, ids[i]);
    t_assert_empty(a);
    mc_alloc_destroy(a);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("core");
    TCase *slow = tcase_create("randomized");

    tcase_add_test(tc, test_alloc_create_rejects_bad_args);
    tcase_add_test(tc, test_alloc_claim_exact_extents);
    tcase_add_test(tc, test_alloc_claim_ascending_many);
    tcase_add_test(tc, test_alloc_basic_alloc_free_rounding);
    tcase_add_test(tc, test_alloc_offsets_aligned_to_granule);
    tcase_add_test(tc, test_alloc_rejects_zero_and_too_large);
    tcase_add_test(tc, test_alloc_no_space_when_full);
    tcase_add_test(tc, test_alloc_coalesces_in_any_order);
    tcase_add_test(tc, test_alloc_largest_free_is_exact);
    tcase_add_test(tc, test_alloc_fallback_scans_own_class);
    tcase_add_test(tc, test_alloc_clock_walks_in_address_order);
    tcase_add_test(tc, test_alloc_clock_survives_freeing_under_hand);
    tcase_add_test(tc, test_alloc_clock_hand_follows_merges);
    tcase_add_test(tc, test_alloc_owner_roundtrip);
    tcase_add_test(tc, test_alloc_is_used_rejects_bad_ids);
    tcase_add_test(tc, test_alloc_huge_segment);
    tcase_add_test(tc, test_alloc_meta_bytes_grows_with_blocks);
    tcase_add_test(tc, test_alloc_clock_rewind);
    suite_add_tcase(s, tc);

    /* sanitizer builds run these several times slower than the 4 s default allows */
    tcase_set_timeout(slow, 300);
    tcase_add_test(slow, test_alloc_randomized_against_model);
    tcase_add_test(slow, test_alloc_randomized_small_granule);
    suite_add_tcase(s, slow);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(t_suite());
    int failures;

    srunner_run_all(sr, CK_ENV);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failures ? 1 : 0;
}
