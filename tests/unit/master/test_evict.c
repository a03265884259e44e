/*
 * Unit tests of the master's eviction (docs/master.md, "Eviction"): a put never fails with
 * MC_ERR_NO_SPACE while room can be made, even when the segment holds far more blocks than
 * one eviction step's scan budget and every one of them still has its reference bit; it
 * does when everything in reach is leased or hard-pinned. Fake clock, small budgets.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/unit/master/t_master.h"

#define KiB 1024u

struct t_one {
    struct mc_master *m;
    uint32_t node;
    uint32_t seg;
};

/* One node, one DRAM segment of nblocks 4 KiB blocks, eviction budget `scan`. */
static struct t_one t_one_small_budget(uint32_t nblocks, uint64_t scan)
{
    struct mc_master_config cfg;
    struct t_one t;

    mc_master_config_defaults(&cfg);
    cfg.evict_max_scan = scan;
    t.m = t_master_cfg(&cfg);
    t.node = t_node(t.m, "n1", "d1");
    t.seg = t_seg(t.m, t.node, (uint64_t)nblocks * 4 * KiB);
    return t;
}

static void t_key(char *buf, size_t cap, const char *prefix, int i)
{
    snprintf(buf, cap, "%s%d", prefix, i);
}

static int t_count(struct mc_master *m, const char *prefix, int from, int to)
{
    char key[32];
    int i, n = 0;

    for (i = from; i < to; i++) {
        t_key(key, sizeof(key), prefix, i);
        n += t_exist(m, key);
    }
    return n;
}

/* The bug: 1000 blocks, a budget of 64, three fills of distinct 4 KiB objects. Every put
 * succeeds and the oldest go first: exactly the last 1000 are left. */
START_TEST(test_first_fill_beyond_scan_budget_never_no_space)
{
    struct t_one t = t_one_small_budget(1000, 64);
    struct mc_master_seg_info info;
    char key[32];
    int i;

    for (i = 0; i < 3000; i++) {
        t_key(key, sizeof(key), "k", i);
        t_put(t.m, key, 4 * KiB, 0, t.node);
    }
    ck_assert_int_eq(t_count(t.m, "k", 0, 2000), 0);
    ck_assert_int_eq(t_count(t.m, "k", 2000, 3000), 1000);
    ck_assert_int_eq(mc_master_segment_info(t.m, t.seg, &info), 0);
    ck_assert_uint_eq(info.evictions, 2000);
    mc_master_destroy(t.m);
}
END_TEST

/* The clock bit still buys a turn while the budget suffices: a block read since its put
 * survives a wave of new puts that evicts its unread neighbours. */
START_TEST(test_reference_bit_still_protects_within_budget)
{
    struct t_one t = t_one_small_budget(100, 4096);
    struct mc_master_get_result r;
    char key[32];
    int i;

    for (i = 0; i < 100; i++) {
        t_key(key, sizeof(key), "k", i);
        t_put(t.m, key, 4 * KiB, 0, t.node);
    }
    /* the first lap clears every bit (the budget covers it); then k5 is read again */
    t_put(t.m, "x0", 4 * KiB, 0, t.node);
    ck_assert_int_eq(t_get(t.m, "k5", &r), 0);
    ck_assert_uint_eq(t_release(t.m, "k5", &r), 1);
    for (i = 1; i < 20; i++) {
        t_key(key, sizeof(key), "x", i);
        t_put(t.m, key, 4 * KiB, 0, t.node);
    }
    ck_assert_int_eq(t_exist(t.m, "k5"), 1);
    ck_assert_int_eq(t_count(t.m, "k", 0, 5), 0);
    mc_master_destroy(t.m);
}
END_TEST

/* Mixed sizes: a pool full of 4 KiB objects takes 64 KiB ones (16 neighbours must go
 * together), then 4 KiB ones again, all beyond the budget. */
START_TEST(test_large_put_into_pool_of_small_objects)
{
    struct t_one t = t_one_small_budget(1024, 32);
    char key[32];
    int i;

    for (i = 0; i < 1024; i++) {
        t_key(key, sizeof(key), "s", i);
        t_put(t.m, key, 4 * KiB, 0, t.node);
    }
    for (i = 0; i < 40; i++) {
        t_key(key, sizeof(key), "L", i);
        t_put(t.m, key, 64 * KiB, 0, t.node);
    }
    ck_assert_int_eq(t_count(t.m, "L", 0, 40), 40);
    /* 40 x 16 blocks went, oldest (lowest addresses) first: the newest small ones stay */
    ck_assert_int_eq(t_count(t.m, "s", 1024 - 384, 1024), 384);
    for (i = 0; i < 2048; i++) {
        t_key(key, sizeof(key), "t", i);
        t_put(t.m, key, 4 * KiB, 0, t.node);
    }
    for (i = 0; i < 32; i++) { /* half the segment */
        t_key(key, sizeof(key), "M", i);
        t_put(t.m, key, 64 * KiB, 0, t.node);
    }
    ck_assert_int_eq(t_count(t.m, "M", 0, 32), 32);
    mc_master_destroy(t.m);
}
END_TEST

/* Leased blocks are never taken, however far the walk must go past them; when everything
 * is leased the put is MC_ERR_NO_SPACE, and one release makes room again. */
START_TEST(test_no_space_only_when_everything_is_leased)
{
    enum { N = 200 };
    struct t_one t = t_one_small_budget(N, 16);
    static struct mc_master_get_result r[N + 1];
    struct mc_master_put_grant g;
    char key[32];
    int i;

    for (i = 0; i < N; i++) {
        t_key(key, sizeof(key), "k", i);
        t_put(t.m, key, 4 * KiB, 0, t.node);
    }
    for (i = 0; i < 150; i++) { /* the first 150 (in clock order) leased */
        t_key(key, sizeof(key), "k", i);
        ck_assert_int_eq(t_get(t.m, key, &r[i]), 0);
    }
    t_put(t.m, "new", 4 * KiB, 0, t.node);
    ck_assert_int_eq(t_count(t.m, "k", 0, 150), 150);
    /* the walk went past the 150 leased ones and took the oldest unleased one */
    ck_assert_int_eq(t_exist(t.m, "k150"), 0);
    ck_assert_int_eq(t_count(t.m, "k", 151, N), N - 151);
    /* lease every object left */
    for (i = 150; i < N; i++) {
        t_key(key, sizeof(key), "k", i);
        if (t_exist(t.m, key))
            ck_assert_int_eq(t_get(t.m, key, &r[i]), 0);
    }
    ck_assert_int_eq(t_get(t.m, "new", &r[N]), 0);
    ck_assert_int_eq(t_start(t.m, "late", 4 * KiB, 0, t.node, &g), MC_ERR_NO_SPACE);
    ck_assert_uint_eq(t_release(t.m, "k7", &r[7]), 1);
    ck_assert_int_eq(t_start(t.m, "late", 4 * KiB, 0, t.node, &g), 0);
    ck_assert_int_eq(t_end(t.m, "late", g.version, t.node), 0);
    ck_assert_int_eq(t_exist(t.m, "k7"), 0);
    mc_master_destroy(t.m);
}
END_TEST

/* Hard pins every other block: no 64 KiB hole can be made among them, but one can past
 * them, however far beyond the budget; the pinned objects all stay. */
START_TEST(test_large_put_finds_room_past_hard_pins)
{
    struct t_one t = t_one_small_budget(1024, 16);
    char key[32];
    int i;

    for (i = 0; i < 512; i++) {
        t_key(key, sizeof(key), "p", i);
        t_put(t.m, key, 4 * KiB, (i % 2) == 0 ? MC_MASTER_PUT_PIN_HARD : 0, t.node);
    }
    for (i = 0; i < 512; i++) {
        t_key(key, sizeof(key), "u", i);
        t_put(t.m, key, 4 * KiB, 0, t.node);
    }
    t_put(t.m, "big", 64 * KiB, 0, t.node);
    for (i = 0; i < 512; i += 2) {
        t_key(key, sizeof(key), "p", i);
        ck_assert_int_eq(t_exist(t.m, key), 1);
    }
    ck_assert_int_eq(t_exist(t.m, "big"), 1);
    /* the hole was made at the first unpinned run: the newest small objects stay */
    ck_assert_int_ge(t_count(t.m, "u", 0, 512), 512 - 16);
    mc_master_destroy(t.m);
}
END_TEST

/* With every segment full, a node's own writes evict on that node, and writes from a node
 * with no segment spread their evictions: no segment takes every eviction while the
 * objects of another never age out. */
START_TEST(test_full_pool_evictions_where_the_writer_is_and_spread)
{
    struct mc_master *m = t_master();
    uint32_t a = t_node(m, "a", "da"), b = t_node(m, "b", "db"), c = t_node(m, "c", "dc");
    uint32_t sa = t_seg(m, a, 64 * 4 * KiB), sb = t_seg(m, b, 64 * 4 * KiB);
    struct mc_master_seg_info ia, ib;
    uint64_t ea, eb;
    char key[32];
    int i;

    for (i = 0; i < 64; i++) { /* fill both */
        t_key(key, sizeof(key), "a", i);
        (void)t_put(m, key, 4 * KiB, 0, a);
        t_key(key, sizeof(key), "b", i);
        (void)t_put(m, key, 4 * KiB, 0, b);
    }
    ck_assert_int_eq(mc_master_segment_info(m, sa, &ia), 0);
    ck_assert_int_eq(mc_master_segment_info(m, sb, &ib), 0);
    ea = ia.evictions;
    eb = ib.evictions;
    for (i = 0; i < 100; i++) { /* B's writes: B's segment makes the room */
        t_key(key, sizeof(key), "nb", i);
        (void)t_put(m, key, 4 * KiB, 0, b);
    }
    ck_assert_int_eq(mc_master_segment_info(m, sa, &ia), 0);
    ck_assert_int_eq(mc_master_segment_info(m, sb, &ib), 0);
    ck_assert_uint_eq(ia.evictions, ea);
    ck_assert_uint_ge(ib.evictions - eb, 100);
    ea = ia.evictions;
    eb = ib.evictions;
    for (i = 0; i < 200; i++) { /* a client node's writes: both segments age */
        t_key(key, sizeof(key), "nc", i);
        (void)t_put(m, key, 4 * KiB, 0, c);
    }
    ck_assert_int_eq(mc_master_segment_info(m, sa, &ia), 0);
    ck_assert_int_eq(mc_master_segment_info(m, sb, &ib), 0);
    ck_assert_uint_ge(ia.evictions - ea, 40);
    ck_assert_uint_ge(ib.evictions - eb, 40);
    mc_master_destroy(m);
}
END_TEST

static Suite *evict_suite(void)
{
    Suite *s = suite_create("master_evict");
    TCase *tc = tcase_create("evict");

    tcase_add_test(tc, test_first_fill_beyond_scan_budget_never_no_space);
    tcase_add_test(tc, test_reference_bit_still_protects_within_budget);
    tcase_add_test(tc, test_large_put_into_pool_of_small_objects);
    tcase_add_test(tc, test_no_space_only_when_everything_is_leased);
    tcase_add_test(tc, test_large_put_finds_room_past_hard_pins);
    tcase_add_test(tc, test_full_pool_evictions_where_the_writer_is_and_spread);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(evict_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
