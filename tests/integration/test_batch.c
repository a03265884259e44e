/*
 * Integration tests of libmc's batches and prefix_match against the real mc-agent: per-item
 * results (a missing key in the middle, invalid items, a small buffer), batches larger than
 * the op and staging slots (waves), large items, and prefix_match's leading count.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc.h>

#include "t_agent.h"
#include "t_util.h"

static struct t_agent g_agent;
static mc_client_t *g_c;

static void setup(void)
{
    t_agent_start(&g_agent, "256M", NULL);
    g_c = t_connect(&g_agent);
}

static void teardown(void)
{
    t_client_and_agent_stop(&g_agent, &g_c);
}

START_TEST(test_batch_missing_key_in_the_middle)
{
    enum { N = 5 };
    char names[N][32];
    const char *keys[N];
    const void *bufs[N];
    void *outs[N];
    size_t lens[N], caps[N], got[N];
    int res[N];

    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "b/%d", i);
        keys[i] = names[i];
        lens[i] = 1000 + 100 * (size_t)i;
        bufs[i] = t_alloc_filled(lens[i], 10 + (uint64_t)i);
        outs[i] = malloc(4096);
        caps[i] = 4096;
        got[i] = 0;
    }
    /* store all but the middle one: a batch of 4 */
    {
        const char *k4[4] = {keys[0], keys[1], keys[3], keys[4]};
        const void *b4[4] = {bufs[0], bufs[1], bufs[3], bufs[4]};
        size_t l4[4] = {lens[0], lens[1], lens[3], lens[4]};
        int r4[4];

        ck_assert_int_eq(mc_batch_put(g_c, 4, k4, b4, l4, NULL, r4), 4);
        for (int i = 0; i < 4; i++)
            ck_assert_int_eq(r4[i], 0);
    }
    ck_assert_int_eq(mc_batch_get(g_c, N, keys, outs, caps, got, res), N - 1);
    for (int i = 0; i < N; i++) {
        if (i == 2) {
            ck_assert_int_eq(res[i], MC_ERR_NOT_FOUND);
            ck_assert_uint_eq(got[i], 0); /* untouched */
            continue;
        }
        ck_assert_int_eq(res[i], 0);
        ck_assert_uint_eq(got[i], lens[i]);
        ck_assert(t_check_fill(outs[i], lens[i], 10 + (uint64_t)i));
    }
    ck_assert_int_eq(mc_batch_exist(g_c, N, keys, res), N);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(res[i], i == 2 ? 0 : 1);
    /* the same put again: every item exists */
    ck_assert_int_eq(mc_batch_put(g_c, N, keys, bufs, lens, NULL, res), 1);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(res[i], i == 2 ? 0 : MC_ERR_EXISTS);
    for (int i = 0; i < N; i++) {
        free((void *)bufs[i]);
        free(outs[i]);
    }
}
END_TEST

START_TEST(test_batch_item_errors)
{
    char big[MC_KEY_MAX + 2];
    const char *keys[4] = {"ok/0", "", big, "ok/1"};
    uint8_t data[64], small[8], out[64];
    const void *bufs[4] = {data, data, data, NULL};
    size_t lens[4] = {sizeof(data), sizeof(data), sizeof(data), sizeof(data)};
    void *outs[4] = {small, out, out, out};
    size_t caps[4] = {sizeof(small), sizeof(out), sizeof(out), sizeof(out)};
    size_t got[4] = {0, 0, 0, 0};
    int res[4];
    mc_put_opts_t bad = MC_PUT_OPTS_INIT;

    memset(big, 'k', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    t_fill(data, sizeof(data), 3);
    ck_assert_int_eq(mc_batch_put(g_c, 4, keys, bufs, lens, NULL, res), 1);
    ck_assert_int_eq(res[0], 0);
    ck_assert_int_eq(res[1], MC_ERR_INVALID);
    ck_assert_int_eq(res[2], MC_ERR_INVALID);
    ck_assert_int_eq(res[3], MC_ERR_INVALID); /* NULL buffer */
    /* a buffer too small: MC_ERR_TOO_LARGE with the size */
    ck_assert_int_eq(mc_batch_get(g_c, 2, keys, outs, caps, got, res), 0);
    ck_assert_int_eq(res[0], MC_ERR_TOO_LARGE);
    ck_assert_uint_eq(got[0], sizeof(data));
    ck_assert_int_eq(res[1], MC_ERR_INVALID);
    /* bad options fail every item, not the call */
    bad.flags = 1u << 30;
    ck_assert_int_eq(mc_batch_put(g_c, 1, keys, bufs, lens, &bad, res), 0);
    ck_assert_int_eq(res[0], MC_ERR_INVALID);
    /* whole-call failures */
    ck_assert_int_eq(mc_batch_put(NULL, 1, keys, bufs, lens, NULL, res), MC_ERR_INVALID);
    ck_assert_int_eq(mc_batch_exist(g_c, 1, NULL, res), MC_ERR_INVALID);
    ck_assert_int_eq(mc_batch_exist(g_c, 0, NULL, NULL), 0);
}
END_TEST

/* More items than op slots (max_inflight 128) and staging slots (8): they go in waves. */
START_TEST(test_batch_waves)
{
    enum { N = 600 };
    static char names[N][32];
    static const char *keys[N];
    static const void *bufs[N];
    static void *outs[N];
    static size_t lens[N], caps[N], got[N];
    static int res[N];

    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "w/%d", i);
        keys[i] = names[i];
        lens[i] = 3000 + (size_t)i;
        bufs[i] = t_alloc_filled(lens[i], 100 + (uint64_t)i);
        outs[i] = malloc(lens[i]);
        caps[i] = lens[i];
    }
    ck_assert_int_eq(mc_batch_put(g_c, N, keys, bufs, lens, NULL, res), N);
    ck_assert_int_eq(mc_batch_get(g_c, N, keys, outs, caps, got, res), N);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(res[i], 0);
        ck_assert_uint_eq(got[i], lens[i]);
        ck_assert_msg(t_check_fill(outs[i], lens[i], 100 + (uint64_t)i), "item %d", i);
    }
    ck_assert_int_eq(mc_prefix_match(g_c, N, keys), N);
    for (int i = 0; i < N; i++) {
        free((void *)bufs[i]);
        free(outs[i]);
    }
}
END_TEST

/* Items larger than a staging slot (user memory, pieces) next to small ones. */
START_TEST(test_batch_large_items)
{
    enum { N = 4 };
    const char *keys[N] = {"L/0", "L/1", "L/2", "L/3"};
    size_t lens[N] = {3 * MIB + 17, 100, 9 * MIB, 1 * MIB};
    const void *bufs[N];
    void *outs[N];
    size_t got[N];
    int res[N];

    for (int i = 0; i < N; i++) {
        bufs[i] = t_alloc_filled(lens[i], 200 + (uint64_t)i);
        outs[i] = malloc(lens[i]);
    }
    ck_assert_int_eq(mc_batch_put(g_c, N, keys, bufs, lens, NULL, res), N);
    ck_assert_int_eq(mc_batch_get(g_c, N, keys, outs, lens, got, res), N);
    for (int i = 0; i < N; i++) {
        ck_assert_uint_eq(got[i], lens[i]);
        ck_assert(t_check_fill(outs[i], lens[i], 200 + (uint64_t)i));
        free((void *)bufs[i]);
        free(outs[i]);
    }
}
END_TEST

START_TEST(test_prefix_match_leading_hits)
{
    const char *keys[6] = {"p/0", "p/1", "p/2", "p/3", "p/4", "p/5"};
    const char *bad[2] = {"p/0", ""};
    uint8_t v[10];

    t_fill(v, sizeof(v), 1);
    ck_assert_int_eq(mc_prefix_match(g_c, 6, keys), 0);
    ck_assert_int_eq(mc_put(g_c, "p/0", v, sizeof(v), NULL), 0);
    ck_assert_int_eq(mc_put(g_c, "p/1", v, sizeof(v), NULL), 0);
    ck_assert_int_eq(mc_put(g_c, "p/3", v, sizeof(v), NULL), 0); /* after the gap */
    ck_assert_int_eq(mc_prefix_match(g_c, 6, keys), 2);
    ck_assert_int_eq(mc_prefix_match(g_c, 1, keys), 1);
    ck_assert_int_eq(mc_prefix_match(g_c, 0, keys), 0);
    ck_assert_int_eq(mc_put(g_c, "p/2", v, sizeof(v), NULL), 0);
    ck_assert_int_eq(mc_prefix_match(g_c, 6, keys), 4);
    ck_assert_int_eq(mc_prefix_match(g_c, 2, bad), MC_ERR_INVALID);
    ck_assert_int_eq(mc_prefix_match(NULL, 2, keys), MC_ERR_INVALID);
}
END_TEST

/* Tiny rings (8 SQEs, 8 in flight, so 16 leases at the agent) and a long batch get: the
 * RELEASE of each copied item must reach the agent even when it finds the SQ full, or the
 * agent's lease table fills and later items fail with MC_ERR_NOMEM. */
START_TEST(test_batch_get_small_rings_releases_not_lost)
{
    enum { N = 400 };
    const char *extra[] = {"--set", "sq_entries=8", "--set", "max_inflight=8", NULL};
    static char names[N][32];
    static const char *keys[N];
    static const void *bufs[N];
    static void *outs[N];
    static size_t lens[N], caps[N], got[N];
    static int res[N];
    struct t_agent a;
    mc_client_t *c;
    int ok, round;

    t_agent_start(&a, "64M", extra);
    c = t_connect(&a);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "r/%d", i);
        keys[i] = names[i];
        lens[i] = 1000 + (size_t)i;
        bufs[i] = t_alloc_filled(lens[i], 7 + (uint64_t)i);
        outs[i] = malloc(lens[i]);
        caps[i] = lens[i];
    }
    ok = mc_batch_put(c, N, keys, bufs, lens, NULL, res);
    for (int i = 0; i < N && ok != N; i++)
        if (res[i] != 0)
            ck_abort_msg("put item %d: %s", i, mc_strerror(res[i]));
    for (round = 0; round < 3; round++) {
        ok = mc_batch_get(c, N, keys, outs, caps, got, res);
        for (int i = 0; i < N && ok != N; i++)
            if (res[i] != 0)
                ck_abort_msg("round %d item %d: %s", round, i, mc_strerror(res[i]));
        ck_assert_int_eq(ok, N);
    }
    for (int i = 0; i < N; i++)
        ck_assert_msg(t_check_fill(outs[i], lens[i], 7 + (uint64_t)i), "item %d", i);
    for (int i = 0; i < N; i++) {
        free((void *)bufs[i]);
        free(outs[i]);
    }
    mc_close(c);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

static Suite *batch_suite(void)
{
    Suite *s = suite_create("integration");
    TCase *tc = tcase_create("batch");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_batch_missing_key_in_the_middle);
    tcase_add_test(tc, test_batch_item_errors);
    tcase_add_test(tc, test_batch_waves);
    tcase_add_test(tc, test_batch_large_items);
    tcase_add_test(tc, test_prefix_match_leading_hits);
    suite_add_tcase(s, tc);
    tc = tcase_create("batch_small_rings");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_batch_get_small_rings_releases_not_lost);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(batch_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
