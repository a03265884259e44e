/*
 * Restores (mc_master_restore and the executor's RESTORE): a replica an agent reports is
 * readable again at exactly the extent it named; a second replica of the same version joins
 * it; a newer report displaces an older head; what the master knows better (a newer
 * version, a re-put in flight, a retired version) refuses the report; overlapping or bad
 * extents are refused; later puts get higher versions; a node restores only into its own
 * segments.
 */
#include <stdio.h>
#include <stdlib.h>

#include "daemon/master/exec.h"
#include "t_master.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

static struct mc_master_restore_req t_req(const char *key, uint32_t seg, uint64_t off,
                                          uint64_t len, uint64_t version)
{
    struct mc_master_restore_req r = {.key = key, .key_len = strlen(key), .seg = seg,
                                      .offset = off, .alloc_len = len, .size = len,
                                      .version = version};

    return r;
}

/* A segment mounted RESTORING: the only kind that takes replicas the master did not know. */
static uint32_t t_rseg(struct mc_master *m, uint32_t node, uint64_t size)
{
    struct mc_master_seg_desc d = {.node = node, .kind = MC_SEG_DRAM, .base = 0x10000000,
                                   .size = size, .flags = MC_MASTER_SEG_F_RESTORING};
    uint32_t seg;

    ck_assert_int_eq(mc_master_segment_mount(m, &d, &seg), 0);
    return seg;
}

static int t_restore(struct mc_master *m, const char *key, uint32_t seg, uint64_t off,
                     uint64_t len, uint64_t version)
{
    struct mc_master_restore_req r = t_req(key, seg, off, len, version);

    return mc_master_restore(m, &r);
}

START_TEST(test_restore_makes_object_readable_at_its_extent)
{
    struct mc_master *m = t_master();
    uint32_t n = t_node(m, "n1", "d1");
    uint32_t seg = t_rseg(m, n, 4 * MiB);
    struct mc_master_get_result g;
    struct mc_master_put_grant grant;

    ck_assert_int_eq(t_restore(m, "a", seg, 256 * KiB, 64 * KiB, 41), 0);
    ck_assert_int_eq(t_restore(m, "b", seg, 1 * MiB, 64 * KiB, 7), 0);
    ck_assert_int_eq(t_get(m, "a", &g), 0);
    ck_assert_uint_eq(g.version, 41);
    ck_assert_uint_eq(g.size, 64 * KiB);
    ck_assert_uint_eq(g.nrep, 1);
    ck_assert_uint_eq(g.rep[0].seg, seg);
    ck_assert_uint_eq(g.rep[0].offset, 256 * KiB);
    ck_assert_uint_eq(g.rep[0].node, n);
    t_release(m, "a", &g);
    ck_assert_int_eq(t_exist(m, "b"), 1);
    /* the report is over: the next put gets a version above every restored one */
    ck_assert_int_eq(mc_master_restore_done(m, seg), 0);
    ck_assert_int_eq(t_start(m, "c", 4 * KiB, 0, n, &grant), 0);
    ck_assert_uint_gt(grant.version, 41);
    ck_assert_uint_eq(t_stats(m).restores, 2);
    ck_assert_uint_eq(t_used(m), 128 * KiB + grant.rep[0].len);
    mc_master_destroy(m);
}
END_TEST

/* Review finding M1: a version near 2^64 from one report would push the version end past
 * what any later leader can read; above MC_MASTER_VERSION_MAX it is refused. */
START_TEST(test_restore_refuses_version_above_max)
{
    struct mc_master *m = t_master();
    uint32_t n = t_node(m, "n1", "d1");
    uint32_t seg = t_rseg(m, n, 4 * MiB);

    ck_assert_int_eq(t_restore(m, "a", seg, 0, 64 * KiB, UINT64_MAX - (UINT64_C(5) << 40)),
                     MC_ERR_INVALID);
    ck_assert_int_eq(t_restore(m, "a", seg, 0, 64 * KiB, MC_MASTER_VERSION_MAX + 1),
                     MC_ERR_INVALID);
    ck_assert_int_eq(t_exist(m, "a"), 0);
    ck_assert_uint_lt(mc_master_version_last(m), MC_MASTER_VERSION_MAX);
    ck_assert_int_eq(t_restore(m, "a", seg, 0, 64 * KiB, MC_MASTER_VERSION_MAX), 0);
    ck_assert_uint_eq(mc_master_version_last(m), MC_MASTER_VERSION_MAX);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_restore_refuses_overlap_and_bad_extents)
{
    struct mc_master *m = t_master();
    uint32_t n = t_node(m, "n1", "d1");
    uint32_t seg = t_rseg(m, n, 4 * MiB);
    struct mc_master_restore_req r;

    ck_assert_int_eq(t_restore(m, "a", seg, 0, 64 * KiB, 3), 0);
    ck_assert_int_eq(t_restore(m, "b", seg, 32 * KiB, 64 * KiB, 4), MC_ERR_EXISTS);
    ck_assert_int_eq(t_exist(m, "b"), 0);
    ck_assert_int_eq(t_restore(m, "b", seg, 4 * MiB - 32 * KiB, 64 * KiB, 4), MC_ERR_INVALID);
    ck_assert_int_eq(t_restore(m, "b", seg + 1, 64 * KiB, 64 * KiB, 4), MC_ERR_INVALID);
    ck_assert_int_eq(t_restore(m, "b", seg, 64 * KiB, 64 * KiB, 0), MC_ERR_INVALID);
    r = t_req("b", seg, 64 * KiB, 64 * KiB, 4);
    r.size = 65 * KiB; /* larger than its extent */
    ck_assert_int_eq(mc_master_restore(m, &r), MC_ERR_INVALID);
    r = t_req("b", seg, 64 * KiB, 64 * KiB, 4);
    r.flags = MC_MASTER_PUT_PIN_SOFT | MC_MASTER_PUT_PIN_HARD;
    ck_assert_int_eq(mc_master_restore(m, &r), MC_ERR_INVALID);
    r = t_req("b", seg, 64 * KiB, 64 * KiB, 4);
    r.flags = MC_MASTER_PUT_UPSERT; /* not a stored flag */
    ck_assert_int_eq(mc_master_restore(m, &r), MC_ERR_INVALID);
    ck_assert_uint_eq(t_stats(m).restores_refused, 7);
    /* a refused restore left nothing behind */
    ck_assert_uint_eq(t_used(m), 64 * KiB);
    ck_assert_int_eq(t_exist(m, "b"), 0);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_restore_second_replica_and_newer_version)
{
    struct mc_master *m = t_master();
    uint32_t n1 = t_node(m, "n1", "d1"), n2 = t_node(m, "n2", "d2");
    uint32_t s1 = t_rseg(m, n1, 4 * MiB), s2 = t_rseg(m, n2, 4 * MiB);
    struct mc_master_get_result g;

    ck_assert_int_eq(t_restore(m, "k", s1, 0, 64 * KiB, 10), 0);
    ck_assert_int_eq(t_restore(m, "k", s2, 128 * KiB, 64 * KiB, 10), 0);
    /* the same replica again: known already, nothing changes */
    ck_assert_int_eq(t_restore(m, "k", s2, 128 * KiB, 64 * KiB, 10), 0);
    ck_assert_uint_eq(t_used(m), 128 * KiB);
    /* the same segment twice: one replica per segment */
    ck_assert_int_eq(t_restore(m, "k", s1, 512 * KiB, 64 * KiB, 10), MC_ERR_EXISTS);
    ck_assert_int_eq(t_get(m, "k", &g), 0);
    ck_assert_uint_eq(g.nrep, 2);
    t_release(m, "k", &g);
    /* same version, another size: the directory's word stands */
    ck_assert_int_eq(t_restore(m, "k", s2, 512 * KiB, 32 * KiB, 10), MC_ERR_CANCELED);
    /* an older one is refused; a newer one becomes the head, the old replicas go */
    ck_assert_int_eq(t_restore(m, "k", s2, 1 * MiB, 64 * KiB, 9), MC_ERR_CANCELED);
    ck_assert_int_eq(t_restore(m, "k", s2, 1 * MiB, 32 * KiB, 12), 0);
    ck_assert_int_eq(t_get(m, "k", &g), 0);
    ck_assert_uint_eq(g.version, 12);
    ck_assert_uint_eq(g.size, 32 * KiB);
    ck_assert_uint_eq(g.nrep, 1);
    ck_assert_uint_eq(g.rep[0].offset, 1 * MiB);
    t_release(m, "k", &g);
    mc_master_tick(m);
    ck_assert_uint_eq(t_used(m), 32 * KiB);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_restore_never_brings_back_what_master_let_go)
{
    struct mc_master *m = t_master();
    uint32_t n = t_node(m, "n1", "d1");
    uint32_t seg = t_seg(m, n, 4 * MiB);
    struct mc_master_put_grant grant;
    struct mc_master_get_result g;
    uint64_t v;

    /* a put in flight of a newer version: the report is older */
    (void)t_put(m, "x", 4 * KiB, 0, n);
    ck_assert_int_eq(t_start(m, "p", 64 * KiB, 0, n, &grant), 0);
    ck_assert_uint_ge(grant.version, 2);
    ck_assert_int_eq(t_restore(m, "p", seg, 2 * MiB, 64 * KiB, grant.version - 1),
                     MC_ERR_CANCELED);
    ck_assert_int_eq(t_end(m, "p", grant.version, n), 0);
    /* the visible version, reported again at its own extent: known; elsewhere: refused */
    ck_assert_int_eq(t_restore(m, "p", seg, grant.rep[0].offset, 64 * KiB, grant.version), 0);
    ck_assert_int_eq(t_restore(m, "p", seg, 3 * MiB + 512 * KiB, 64 * KiB, grant.version),
                     MC_ERR_EXISTS);
    /* retired (upserted over while leased): its version is not brought back */
    v = t_put(m, "r", 64 * KiB, 0, n);
    ck_assert_int_eq(t_get(m, "r", &g), 0);
    (void)t_put(m, "r", 64 * KiB, MC_MASTER_PUT_UPSERT, n);
    ck_assert_int_eq(t_restore(m, "r", seg, 3 * MiB, 64 * KiB, v), MC_ERR_CANCELED);
    t_release(m, "r", &g);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_restore_hard_pin_counts_and_ttl_restarts)
{
    struct mc_master *m = t_master();
    uint32_t n = t_node(m, "n1", "d1");
    uint32_t seg = t_rseg(m, n, 4 * MiB);
    struct mc_master_restore_req r = t_req("h", seg, 0, 64 * KiB, 5);
    struct mc_master_seg_info info;

    r.flags = MC_MASTER_PUT_PIN_HARD;
    ck_assert_int_eq(mc_master_restore(m, &r), 0);
    ck_assert_int_eq(mc_master_segment_info(m, seg, &info), 0);
    ck_assert_uint_eq(info.hard_pinned_bytes, 64 * KiB);
    r = t_req("t", seg, 64 * KiB, 64 * KiB, 6);
    r.ttl_ms = 500;
    ck_assert_int_eq(mc_master_restore(m, &r), 0);
    ck_assert_int_eq(t_exist(m, "t"), 1);
    t_advance(499);
    ck_assert_int_eq(t_exist(m, "t"), 1);
    t_advance(2);
    ck_assert_int_eq(t_exist(m, "t"), 0);
    ck_assert_int_eq(mc_master_remove(m, "h", 1), 0);
    mc_master_tick(m);
    ck_assert_int_eq(mc_master_segment_info(m, seg, &info), 0);
    ck_assert_uint_eq(info.hard_pinned_bytes, 0);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_exec_restore_only_into_own_segments)
{
    struct mc_master *m = t_master();
    uint32_t n1 = t_node(m, "n1", "d1"), n2 = t_node(m, "n2", "d2");
    uint32_t s1 = t_rseg(m, n1, 4 * MiB);
    struct mc_master_restore_req rq[2] = {t_req("a", s1, 0, 64 * KiB, 3),
                                          t_req("b", s1, 64 * KiB, 64 * KiB, 4)};
    int results[2];
    struct mc_master_req x = {.op = MC_MASTER_OP_RESTORE, .node = n2, .n = 2,
                              .results = results, .in.restore = rq};

    (void)t_rseg(m, n2, 4 * MiB);
    ck_assert_int_eq(mc_master_exec(m, &x), 0);
    ck_assert_int_eq(results[0], MC_ERR_DENIED);
    ck_assert_int_eq(results[1], MC_ERR_DENIED);
    x.node = n1;
    ck_assert_int_eq(mc_master_exec(m, &x), 0);
    ck_assert_int_eq(results[0], 0);
    ck_assert_int_eq(results[1], 0);
    ck_assert_int_eq(t_exist(m, "a"), 1);
    ck_assert_int_eq(t_exist(m, "b"), 1);
    mc_master_destroy(m);
}
END_TEST

/* A segment mounted RESTORING takes no puts and is not trimmed until its owner says its
 * report is done (or the window passes): a put never lands on what is only not reported. */
START_TEST(test_restoring_segment_takes_no_new_data)
{
    struct mc_master *m = t_master();
    uint32_t n1 = t_node(m, "n1", "d1"), n2 = t_node(m, "n2", "d2");
    struct mc_master_seg_desc d = {.node = n1, .kind = MC_SEG_DRAM, .base = 0x10000000,
                                   .size = 4 * MiB, .flags = MC_MASTER_SEG_F_RESTORING};
    struct mc_master_seg_info info;
    struct mc_master_put_grant g;
    uint32_t s1, s2;
    int res;
    struct mc_master_req x = {.op = MC_MASTER_OP_RESTORE_DONE, .node = n2, .n = 1,
                              .results = &res, .in.seg = &s1};

    ck_assert_int_eq(mc_master_segment_mount(m, &d, &s1), 0);
    ck_assert_int_eq(mc_master_segment_info(m, s1, &info), 0);
    ck_assert(info.restoring);
    /* the only segment is restoring: no room anywhere */
    ck_assert_int_eq(t_start(m, "p", 64 * KiB, 0, n1, &g), MC_ERR_NO_SPACE);
    /* reports land; another node's segment takes the puts meanwhile */
    ck_assert_int_eq(t_restore(m, "r", s1, 0, 64 * KiB, 5), 0);
    s2 = t_seg(m, n2, 4 * MiB);
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(t_start(m, "p", 64 * KiB, MC_MASTER_PUT_UPSERT, n1, &g), 0);
        ck_assert_uint_eq(g.rep[0].seg, s2);
    }
    /* only the owner ends its restore */
    ck_assert_int_eq(mc_master_exec(m, &x), 0);
    ck_assert_int_eq(res, MC_ERR_DENIED);
    ck_assert_int_eq(mc_master_segment_info(m, s1, &info), 0);
    ck_assert(info.restoring);
    x.node = n1;
    ck_assert_int_eq(mc_master_exec(m, &x), 0);
    ck_assert_int_eq(res, 0);
    ck_assert_int_eq(mc_master_segment_info(m, s1, &info), 0);
    ck_assert(!info.restoring);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_restoring_window_ends_by_itself)
{
    struct mc_master_config cfg;
    struct mc_master *m;
    uint32_t n1;
    struct mc_master_seg_desc d = {.kind = MC_SEG_DRAM, .base = 0x10000000, .size = 4 * MiB,
                                   .flags = MC_MASTER_SEG_F_RESTORING};
    struct mc_master_put_grant g;
    uint32_t s1;

    mc_master_config_defaults(&cfg);
    cfg.restore_window_ms = 2000;
    cfg.node_ttl_ms = 60000;
    m = t_master_cfg(&cfg);
    n1 = t_node(m, "n1", "d1");
    d.node = n1;
    ck_assert_int_eq(mc_master_segment_mount(m, &d, &s1), 0);
    ck_assert_int_eq(t_start(m, "p", 64 * KiB, 0, n1, &g), MC_ERR_NO_SPACE);
    t_advance(1999);
    ck_assert_int_eq(t_start(m, "p", 64 * KiB, 0, n1, &g), MC_ERR_NO_SPACE);
    t_advance(1);
    ck_assert_int_eq(t_start(m, "p", 64 * KiB, 0, n1, &g), 0);
    ck_assert_uint_eq(g.rep[0].seg, s1);
    /* a bad flag is refused at mount */
    d.flags = 0x80;
    ck_assert_int_eq(mc_master_segment_mount(m, &d, &s1), MC_ERR_INVALID);
    mc_master_destroy(m);
}
END_TEST

/* A segment the master has known all along (an agent rejoining the master that kept it):
 * its report brings back nothing the master freed meanwhile, and what it knows is 0. */
START_TEST(test_restore_into_known_segment_brings_back_nothing)
{
    struct mc_master *m = t_master();
    uint32_t n = t_node(m, "n1", "d1");
    uint32_t seg = t_seg(m, n, 4 * MiB);
    struct mc_master_put_grant g;
    uint64_t va, vb;

    ck_assert_int_eq(t_start(m, "a", 64 * KiB, 0, n, &g), 0);
    va = g.version;
    ck_assert_int_eq(t_end(m, "a", va, n), 0);
    ck_assert_int_eq(t_start(m, "b", 64 * KiB, 0, n, &g), 0);
    vb = g.version;
    ck_assert_int_eq(t_end(m, "b", vb, n), 0);
    ck_assert_int_eq(mc_master_remove(m, "b", 1), 0);
    mc_master_tick(m);
    /* "a" is known at its extent: 0; "b" was removed: refused, not brought back */
    ck_assert_int_eq(t_restore(m, "a", seg, g.rep[0].offset - 64 * KiB, 64 * KiB, va), 0);
    ck_assert_int_eq(t_restore(m, "b", seg, g.rep[0].offset, 64 * KiB, vb), MC_ERR_CANCELED);
    ck_assert_int_eq(t_exist(m, "b"), 0);
    /* nor a key it never had */
    ck_assert_int_eq(t_restore(m, "z", seg, 2 * MiB, 64 * KiB, 99), MC_ERR_CANCELED);
    ck_assert_int_eq(t_exist(m, "z"), 0);
    mc_master_destroy(m);
}
END_TEST

/* A late restore (a PUBLISH carried over a change of master, MC_MASTER_RESTORE_LATE): into a
 * segment whose report is over, taken only while the master recovers; its flag is not
 * stored; a plain report there is refused as before, and the flag refuses nothing else. */
START_TEST(test_restore_late_only_while_recovering)
{
    struct mc_master *m = t_master();
    uint32_t n = t_node(m, "n1", "d1");
    uint32_t seg = t_seg(m, n, 4 * MiB); /* not RESTORING: its report is over */
    struct mc_master_restore_req r = t_req("late", seg, 0, 64 * KiB, 7);
    struct mc_master_get_result res;

    r.flags = MC_MASTER_RESTORE_LATE;
    ck_assert_int_eq(mc_master_restore(m, &r), MC_ERR_CANCELED); /* not recovering */
    ck_assert_int_eq(t_exist(m, "late"), 0);
    mc_master_recovering_set(m, true);
    r.flags = 0;
    ck_assert_int_eq(mc_master_restore(m, &r), MC_ERR_CANCELED); /* not late */
    r.flags = MC_MASTER_RESTORE_LATE | MC_MASTER_PUT_PIN_SOFT;
    ck_assert_int_eq(mc_master_restore(m, &r), 0);
    ck_assert_int_eq(t_exist(m, "late"), 1);
    ck_assert_int_eq(t_get(m, "late", &res), 0);
    ck_assert_uint_eq(res.version, 7);
    ck_assert_uint_eq(res.flags, MC_MASTER_PUT_PIN_SOFT); /* LATE not stored */
    ck_assert_uint_eq(t_release(m, "late", &res), 1);
    /* a repeat is one more report of the same replica: 0, nothing added */
    ck_assert_int_eq(mc_master_restore(m, &r), 0);
    ck_assert_uint_eq(t_stats(m).objects, 1);
    /* the window over: refused again */
    mc_master_recovering_set(m, false);
    r = t_req("late2", seg, 1 * MiB, 64 * KiB, 8);
    r.flags = MC_MASTER_RESTORE_LATE;
    ck_assert_int_eq(mc_master_restore(m, &r), MC_ERR_CANCELED);
    mc_master_destroy(m);
}
END_TEST

/* Many holdings in ascending order: the rebuild of a segment, claims O(1) each. */
START_TEST(test_restore_many_in_order)
{
    struct mc_master *m = t_master();
    uint32_t n = t_node(m, "n1", "d1");
    uint32_t seg = t_rseg(m, n, 256 * MiB);
    char key[32];
    uint32_t i;

    for (i = 0; i < 50000; i++) {
        snprintf(key, sizeof(key), "k%u", i);
        if (t_restore(m, key, seg, (uint64_t)i * 4 * KiB, 4 * KiB, i + 1) != 0)
            ck_abort_msg("restore %u failed", i);
    }
    ck_assert_uint_eq(t_stats(m).objects, 50000);
    ck_assert_uint_eq(t_used(m), 50000ull * 4 * KiB);
    ck_assert_int_eq(t_exist(m, "k49999"), 1);
    mc_master_destroy(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("master_restore");
    TCase *tc = tcase_create("restore");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_restore_makes_object_readable_at_its_extent);
    tcase_add_test(tc, test_restore_refuses_overlap_and_bad_extents);
    tcase_add_test(tc, test_restore_refuses_version_above_max);
    tcase_add_test(tc, test_restore_second_replica_and_newer_version);
    tcase_add_test(tc, test_restore_never_brings_back_what_master_let_go);
    tcase_add_test(tc, test_restore_hard_pin_counts_and_ttl_restarts);
    tcase_add_test(tc, test_exec_restore_only_into_own_segments);
    tcase_add_test(tc, test_restore_many_in_order);
    tcase_add_test(tc, test_restoring_segment_takes_no_new_data);
    tcase_add_test(tc, test_restoring_window_ends_by_itself);
    tcase_add_test(tc, test_restore_into_known_segment_brings_back_nothing);
    tcase_add_test(tc, test_restore_late_only_while_recovering);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
