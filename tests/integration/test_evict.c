/*
 * Integration tests of eviction against the real mc-agent (standalone): a put never fails
 * with MC_ERR_NO_SPACE while room can be made, neither at the moment the pool first fills
 * (every block still carries the reference bit of its put, more blocks than one eviction
 * step may examine) nor when a large object needs a hole among many small ones.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc.h>

#include "t_agent.h"
#include "t_util.h"

#define KIB 1024u

/* Put n objects of len bytes, keys "<prefix>/<i>", in batches of 32; every item must
 * succeed. Content: seed base + i. */
static void put_all(mc_client_t *c, const char *prefix, int n, size_t len, uint64_t base)
{
    enum { B = 32 };
    static char names[B][48];
    const char *keys[B];
    const void *bufs[B];
    size_t lens[B];
    int res[B], i, k, nb, ok;
    uint8_t *data = malloc((size_t)B * len);

    ck_assert_ptr_nonnull(data);
    for (i = 0; i < n; i += nb) {
        nb = n - i < B ? n - i : B;
        for (k = 0; k < nb; k++) {
            snprintf(names[k], sizeof(names[k]), "%s/%d", prefix, i + k);
            keys[k] = names[k];
            t_fill(data + (size_t)k * len, len, base + (uint64_t)(i + k));
            bufs[k] = data + (size_t)k * len;
            lens[k] = len;
        }
        ok = mc_batch_put(c, (size_t)nb, keys, bufs, lens, NULL, res);
        for (k = 0; k < nb && ok != nb; k++)
            if (res[k] != 0)
                ck_abort_msg("put %s (item %d of the run): %s", keys[k], i + k,
                             mc_strerror(res[k]));
        ck_assert_int_eq(ok, nb);
    }
    free(data);
}

/* Get "<prefix>/<i>" for i in [from, to); returns how many were present, and checks the
 * bytes of each. */
static int get_check(mc_client_t *c, const char *prefix, int from, int to, size_t len,
                     uint64_t base)
{
    char key[48];
    uint8_t *buf = malloc(len);
    size_t got;
    int i, err, present = 0;

    ck_assert_ptr_nonnull(buf);
    for (i = from; i < to; i++) {
        snprintf(key, sizeof(key), "%s/%d", prefix, i);
        got = 0;
        err = mc_get(c, key, buf, len, &got);
        if (err == MC_ERR_NOT_FOUND)
            continue;
        ck_assert_msg(err == 0, "get %s: %s", key, mc_strerror(err));
        ck_assert_uint_eq(got, len);
        ck_assert_msg(t_check_fill(buf, len, base + (uint64_t)i), "bytes of %s", key);
        present++;
    }
    free(buf);
    return present;
}

/* The reproduction of the bug: a 64 MiB pool, 60 000 distinct 4 KiB keys in batches of 32
 * (about 3.7 pool fills). The first fill leaves ~16 k blocks with their put's reference bit
 * set, more than the default evict_max_scan (4096) examines. */
START_TEST(test_evict_first_fill_never_no_space)
{
    enum { N = 60000 };
    struct t_agent a;
    mc_client_t *c;
    int recent;

    t_agent_start(&a, "64M", NULL);
    c = t_connect(&a);
    put_all(c, "f", N, 4 * KIB, 1000);
    /* the most recent objects are still there (eviction goes oldest-first) */
    recent = get_check(c, "f", N - 1000, N, 4 * KIB, 1000);
    ck_assert_int_eq(recent, 1000);
    t_client_and_agent_stop(&a, &c);
}
END_TEST

/* Mixed sizes: a pool full of 4 KiB objects, then 64 KiB puts (each needs 16 neighbours
 * evicted together), then 4 KiB ones again into a pool full of 64 KiB objects. */
START_TEST(test_evict_mixed_sizes)
{
    struct t_agent a;
    mc_client_t *c;

    t_agent_start(&a, "64M", NULL);
    c = t_connect(&a);
    put_all(c, "s", 20000, 4 * KIB, 1);
    put_all(c, "l", 1500, 64 * KIB, 50000);
    ck_assert_int_eq(get_check(c, "l", 1500 - 200, 1500, 64 * KIB, 50000), 200);
    put_all(c, "t", 20000, 4 * KIB, 90000);
    ck_assert_int_eq(get_check(c, "t", 20000 - 1000, 20000, 4 * KIB, 90000), 1000);
    put_all(c, "m", 600, 64 * KIB, 200000);
    ck_assert_int_eq(get_check(c, "m", 600 - 100, 600, 64 * KIB, 200000), 100);
    t_client_and_agent_stop(&a, &c);
}
END_TEST

static Suite *evict_suite(void)
{
    Suite *s = suite_create("integration");
    TCase *tc = tcase_create("evict");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_evict_first_fill_never_no_space);
    tcase_add_test(tc, test_evict_mixed_sizes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(evict_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
