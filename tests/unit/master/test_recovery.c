/*
 * The early end of a recovery window (daemon/mcmaster/recovery.c): it waits for every
 * listed agent to rejoin with its segments, and for every live node's report to be done,
 * listed or not (review finding M2).
 */
#include <stdio.h>
#include <stdlib.h>

#include "daemon/mcmaster/recovery.h"
#include "t_master.h"

#define MiB (1024u * 1024u)

static uint32_t t_rseg(struct mc_master *m, uint32_t node, uint64_t base, bool restoring)
{
    struct mc_master_seg_desc d = {.node = node, .kind = MC_SEG_DRAM, .base = base,
                                   .size = 4 * MiB,
                                   .flags = restoring ? MC_MASTER_SEG_F_RESTORING : 0};
    uint32_t seg;

    ck_assert_int_eq(mc_master_segment_mount(m, &d, &seg), 0);
    return seg;
}

START_TEST(test_recovery_waits_for_unlisted_reporting_agent)
{
    struct mc_master *m = t_master();
    struct mc_elect_agent expect[2] = {{.name = "n1", .nsegs = 1}, {.name = "n2", .nsegs = 1}};
    uint32_t n1 = t_node(m, "n1", "d1"), n2, n3, s1, s2, s3;

    /* n1 listed, reporting */
    s1 = t_rseg(m, n1, 0x10000000, true);
    ck_assert(!mc_recovery_all_reported(m, 8, expect, 1, NULL, 0, NULL));
    ck_assert_int_eq(mc_master_restore_done(m, s1), 0);
    ck_assert(mc_recovery_all_reported(m, 8, expect, 1, NULL, 0, NULL));
    /* a listed agent not rejoined yet */
    ck_assert(!mc_recovery_all_reported(m, 8, expect, 2, NULL, 0, NULL));
    n2 = t_node(m, "n2", "d2");
    s2 = t_rseg(m, n2, 0x20000000, false);
    (void)s2;
    ck_assert(mc_recovery_all_reported(m, 8, expect, 2, NULL, 0, NULL));
    /* n3 is not on the list (its key lapsed) but has rejoined and is reporting: the window
     * stays open until its report is done */
    n3 = t_node(m, "n3", "d3");
    s3 = t_rseg(m, n3, 0x30000000, true);
    {
        bool joined = false;

        ck_assert(!mc_recovery_all_reported(m, 8, expect, 2, NULL, 0, &joined));
        ck_assert(joined); /* the listed ones are back: the window may be lengthened */
    }
    ck_assert_int_eq(mc_master_restore_done(m, s3), 0);
    ck_assert(mc_recovery_all_reported(m, 8, expect, 2, NULL, 0, NULL));
    mc_master_destroy(m);
}
END_TEST

/* A node with no segment (dram 0) that carries PUBLISHes over the master change holds the
 * window open until it says it is done (review H1); a dead one does not. */
START_TEST(test_recovery_waits_for_carrying_node)
{
    struct mc_master *m = t_master();
    struct mc_elect_agent expect[2] = {{.name = "a", .nsegs = 0}, {.name = "b", .nsegs = 1}};
    uint32_t a = t_node(m, "a", "da"), b = t_node(m, "b", "db"), gone = 4242;
    bool joined = false;

    (void)t_rseg(m, b, 0x10000000, false);
    ck_assert(mc_recovery_all_reported(m, 8, expect, 2, NULL, 0, NULL));
    ck_assert(!mc_recovery_all_reported(m, 8, expect, 2, &a, 1, &joined));
    ck_assert(joined); /* everyone back: the window may be lengthened for it */
    /* a node id that is no live node does not hold it */
    ck_assert(mc_recovery_all_reported(m, 8, expect, 2, &gone, 1, NULL));
    mc_master_destroy(m);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("mcmaster_recovery");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_recovery_waits_for_unlisted_reporting_agent);
    tcase_add_test(tc, test_recovery_waits_for_carrying_node);
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
