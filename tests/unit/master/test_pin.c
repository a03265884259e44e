/*
 * The master's client pins and touches (mc_master_pin, mc_master_touch, and the executor's
 * MC_MASTER_EXEC_F_PIN / _F_TOUCH): a pin is a lease of pin_ttl_ms that eviction skips, a
 * read lease granted beside it never shortens it, a release or its TTL ends it; a touch marks
 * an object used like a read, without a lease.
 */
#include <stdlib.h>

#include "daemon/master/exec.h"
#include "t_master.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

struct t_one {
    struct mc_master *m;
    uint32_t node;
};

static struct t_one t_one_seg(uint64_t size, uint64_t pin_ttl_ms)
{
    struct mc_master_config cfg;
    struct t_one t;

    mc_master_config_defaults(&cfg);
    cfg.pin_ttl_ms = pin_ttl_ms;
    cfg.node_ttl_ms = 24 * 3600 * 1000; /* the clock jumps: the node must not die */
    t.m = t_master_cfg(&cfg);
    t.node = t_node(t.m, "n1", "d1");
    (void)t_seg(t.m, t.node, size);
    return t;
}

static int t_pin(struct mc_master *m, const char *key, struct mc_master_get_result *r)
{
    return mc_master_pin(m, key, strlen(key), r);
}

START_TEST(test_pin_blocks_eviction_until_release)
{
    struct t_one t = t_one_seg(MiB, 60000);
    struct mc_master_put_grant g;
    struct mc_master_get_result r;

    t_put(t.m, "a", 768 * KiB, 0, t.node);
    ck_assert_int_eq(t_pin(t.m, "a", &r), 0);
    ck_assert_uint_eq(r.lease.expires_ms, t_now_ms + 60000);
    ck_assert_int_eq(t_start(t.m, "b", 512 * KiB, 0, t.node, &g), MC_ERR_NO_SPACE);
    t_advance(30000); /* past a read lease's 10 s, within the pin's 60 s */
    mc_master_tick(t.m);
    ck_assert_int_eq(t_start(t.m, "b", 512 * KiB, 0, t.node, &g), MC_ERR_NO_SPACE);
    ck_assert_uint_eq(t_release(t.m, "a", &r), 1);
    ck_assert_int_eq(t_start(t.m, "b", 512 * KiB, 0, t.node, &g), 0);
    ck_assert_int_eq(t_exist(t.m, "a"), 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_pin_lapses_at_its_ttl)
{
    struct t_one t = t_one_seg(MiB, 20000);
    struct mc_master_put_grant g;
    struct mc_master_get_result r;

    t_put(t.m, "a", 768 * KiB, 0, t.node);
    ck_assert_int_eq(t_pin(t.m, "a", &r), 0);
    t_advance(19990);
    ck_assert_int_eq(t_start(t.m, "b", 512 * KiB, 0, t.node, &g), MC_ERR_NO_SPACE);
    t_advance(10);
    ck_assert_int_eq(t_start(t.m, "b", 512 * KiB, 0, t.node, &g), 0);
    ck_assert_uint_eq(t_release(t.m, "a", &r), 0); /* lapsed: nothing to end */
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_read_lease_does_not_shorten_pin)
{
    struct t_one t = t_one_seg(MiB, 60000);
    struct mc_master_put_grant g;
    struct mc_master_get_result pin, rd;

    t_put(t.m, "a", 768 * KiB, 0, t.node);
    ck_assert_int_eq(t_pin(t.m, "a", &pin), 0);
    t_advance(1000);
    ck_assert_int_eq(t_get(t.m, "a", &rd), 0);
    ck_assert_uint_eq(t_release(t.m, "a", &rd), 1);
    t_advance(20000); /* the read's lease would be over; the pin is not */
    ck_assert_int_eq(t_start(t.m, "b", 512 * KiB, 0, t.node, &g), MC_ERR_NO_SPACE);
    ck_assert_uint_eq(t_release(t.m, "a", &pin), 1);
    ck_assert_int_eq(t_start(t.m, "b", 512 * KiB, 0, t.node, &g), 0);
    mc_master_destroy(t.m);
}
END_TEST

/* A remove unpublishes a pinned object at once; its space waits for the pin. */
START_TEST(test_pinned_space_kept_after_remove)
{
    struct t_one t = t_one_seg(MiB, 60000);
    struct mc_master_get_result r;

    t_put(t.m, "a", 4096, 0, t.node);
    ck_assert_int_eq(t_pin(t.m, "a", &r), 0);
    ck_assert_int_eq(mc_master_remove(t.m, "a", 1), 0);
    ck_assert_int_eq(t_exist(t.m, "a"), 0);
    ck_assert_uint_eq(t_used(t.m), 4096);
    ck_assert_uint_eq(t_release(t.m, "a", &r), 1);
    ck_assert_uint_eq(t_used(t.m), 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_pin_absent_and_invalid)
{
    struct t_one t = t_one_seg(MiB, 60000);
    struct mc_master_get_result r;
    struct mc_master_stats before = t_stats(t.m);

    ck_assert_int_eq(t_pin(t.m, "none", &r), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_master_pin(t.m, "", 0, &r), MC_ERR_INVALID);
    ck_assert_int_eq(mc_master_pin(t.m, "a", 1, NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_master_touch(t.m, "none", 4), 0);
    ck_assert_int_eq(mc_master_touch(t.m, NULL, 4), MC_ERR_INVALID);
    /* pins are not gets */
    ck_assert_uint_eq(t_stats(t.m).gets, before.gets);
    ck_assert_uint_eq(t_stats(t.m).get_misses, before.get_misses);
    mc_master_destroy(t.m);
}
END_TEST

/* A touched object gets the second chance a read gives it (test_master.c shows an EXIST does
 * not). */
START_TEST(test_touch_changes_eviction_order)
{
    struct t_one t = t_one_seg(3 * 64 * KiB, 60000);

    t_put(t.m, "a", 64 * KiB, 0, t.node);
    t_put(t.m, "b", 64 * KiB, 0, t.node);
    t_put(t.m, "c", 64 * KiB, 0, t.node);
    t_put(t.m, "d", 64 * KiB, 0, t.node); /* one full turn of the hand; "a" goes */
    ck_assert_int_eq(t_exist(t.m, "a"), 0);
    ck_assert_int_eq(mc_master_touch(t.m, "b", 1), 1);
    t_put(t.m, "e", 64 * KiB, 0, t.node);
    ck_assert_int_eq(t_exist(t.m, "b"), 1); /* touched: kept */
    ck_assert_int_eq(t_exist(t.m, "c"), 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_exec_pin_and_touch_flags)
{
    struct t_one t = t_one_seg(MiB, 60000);
    struct mc_master_key keys[3] = {{"a", 1}, {"missing", 7}, {"b", 1}};
    struct mc_master_get_result gets[3];
    int results[3];
    struct mc_master_req x = {.op = MC_MASTER_OP_GET, .node = t.node, .n = 3,
                              .flags = MC_MASTER_EXEC_F_PIN, .results = results,
                              .in.key = keys, .out.get = gets};
    struct mc_master_put_grant g;

    t_put(t.m, "a", 512 * KiB, 0, t.node);
    t_put(t.m, "b", 256 * KiB, 0, t.node);
    ck_assert_int_eq(mc_master_exec(t.m, &x), 0);
    ck_assert_int_eq(results[0], 0);
    ck_assert_int_eq(results[1], MC_ERR_NOT_FOUND);
    ck_assert_int_eq(results[2], 0);
    ck_assert_uint_eq(gets[0].lease.expires_ms, t_now_ms + 60000);
    t_advance(15000);
    ck_assert_int_eq(t_start(t.m, "c", 512 * KiB, 0, t.node, &g), MC_ERR_NO_SPACE);
    x = (struct mc_master_req){.op = MC_MASTER_OP_EXIST, .node = t.node, .n = 3,
                               .flags = MC_MASTER_EXEC_F_TOUCH, .results = results,
                               .in.key = keys};
    ck_assert_int_eq(mc_master_exec(t.m, &x), 0);
    ck_assert_int_eq(results[0], 1);
    ck_assert_int_eq(results[1], 0);
    ck_assert_int_eq(results[2], 1);
    mc_master_destroy(t.m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("master_pin");
    TCase *tc = tcase_create("pin");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_pin_blocks_eviction_until_release);
    tcase_add_test(tc, test_pin_lapses_at_its_ttl);
    tcase_add_test(tc, test_read_lease_does_not_shorten_pin);
    tcase_add_test(tc, test_pinned_space_kept_after_remove);
    tcase_add_test(tc, test_pin_absent_and_invalid);
    tcase_add_test(tc, test_touch_changes_eviction_order);
    tcase_add_test(tc, test_exec_pin_and_touch_flags);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
