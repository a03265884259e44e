/*
 * The versions of a leader's reign (daemon/mcmaster/elect.h, review finding M3): a new
 * reign starts above the end the reigns before stored in etcd, whatever its clock says;
 * the stored value is checked (etcd is another process); a further end is due once half a
 * reserve is used.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/common/etcd.h"
#include "daemon/master/master.h"
#include "daemon/mcmaster/elect.h"

#define R MC_ELECT_VERSIONS_RESERVE

START_TEST(test_versions_base_not_from_the_clock_alone)
{
    const uint64_t now_ns = UINT64_C(1764662400000000000); /* 2025-12-02 */

    /* a clock behind the versions an earlier leader handed out: the stored end wins */
    ck_assert_uint_eq(mc_elect_versions_base(now_ns + 5 * R, now_ns), now_ns + 5 * R);
    ck_assert_uint_eq(mc_elect_versions_base(now_ns + 1, 0), now_ns + 1);
    /* nothing stored yet (0), or an end below the clock: the clock (agents may hold
     * versions of a master that ran without etcd, floored at its clock) */
    ck_assert_uint_eq(mc_elect_versions_base(0, now_ns), now_ns);
    ck_assert_uint_eq(mc_elect_versions_base(now_ns - 1, now_ns), now_ns);
}
END_TEST

START_TEST(test_versions_parse)
{
    uint64_t v = 7;

    ck_assert_int_eq(mc_elect_versions_parse("0", &v), 0);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(mc_elect_versions_parse("1764662400000000000", &v), 0);
    ck_assert_uint_eq(v, UINT64_C(1764662400000000000));
    v = 7;
    ck_assert_int_eq(mc_elect_versions_parse("", &v), MC_ERR_PROTO);
    ck_assert_int_eq(mc_elect_versions_parse("-1", &v), MC_ERR_PROTO);
    ck_assert_int_eq(mc_elect_versions_parse("12x", &v), MC_ERR_PROTO);
    ck_assert_int_eq(mc_elect_versions_parse(" 12", &v), MC_ERR_PROTO);
    ck_assert_int_eq(mc_elect_versions_parse("18446744073709551615", &v), MC_ERR_PROTO);
    ck_assert_int_eq(mc_elect_versions_parse("99999999999999999999999", &v), MC_ERR_PROTO);
    ck_assert_uint_eq(v, 7); /* refused: unchanged */
    /* the highest accepted leaves room for a base and its reserves */
    {
        char buf[32];
        uint64_t max = UINT64_MAX - 4 * R;

        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)max);
        ck_assert_int_eq(mc_elect_versions_parse(buf, &v), 0);
        ck_assert_uint_eq(v, max);
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(max + 1));
        ck_assert_int_eq(mc_elect_versions_parse(buf, &v), MC_ERR_PROTO);
    }
}
END_TEST

START_TEST(test_versions_next_end)
{
    uint64_t base = UINT64_C(1) << 60, end = base + R;

    /* less than half used: nothing to store */
    ck_assert_uint_eq(mc_elect_versions_next_end(base, end), 0);
    ck_assert_uint_eq(mc_elect_versions_next_end(base + R / 2 - 1, end), 0);
    /* half used or more, or past the end (a restore raised the counter): a reserve above */
    ck_assert_uint_eq(mc_elect_versions_next_end(base + R / 2, end), base + R / 2 + R);
    ck_assert_uint_eq(mc_elect_versions_next_end(end, end), end + R);
    ck_assert_uint_eq(mc_elect_versions_next_end(end + 9, end), end + 9 + R);
    /* never an end no later leader could parse (review finding M1): capped, stored once */
    {
        uint64_t e2 = mc_elect_versions_next_end(UINT64_MAX - 1, end), v = 0;
        char buf[32];

        ck_assert_uint_eq(e2, MC_ELECT_VERSIONS_END_MAX);
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)e2);
        ck_assert_int_eq(mc_elect_versions_parse(buf, &v), 0);
        ck_assert_uint_eq(v, e2);
        ck_assert_uint_eq(mc_elect_versions_next_end(UINT64_MAX - 1, e2), 0);
        ck_assert_uint_eq(mc_elect_versions_next_end(e2 - R / 4, e2), 0);
        /* the highest version a master takes stays far below the cap */
        ck_assert_uint_lt(mc_elect_versions_next_end(MC_MASTER_VERSION_MAX, end),
                          MC_ELECT_VERSIONS_END_MAX);
    }
    /* the put gate's sum never wraps: a last at or past the end has no room */
    ck_assert(mc_elect_versions_room(10, 100, 89));
    ck_assert(!mc_elect_versions_room(10, 100, 90));
    ck_assert(!mc_elect_versions_room(100, 100, 1));
    ck_assert(!mc_elect_versions_room(UINT64_MAX - 5, 100, 64));
    ck_assert(!mc_elect_versions_room(UINT64_MAX - 5, UINT64_MAX - 10, 64));
}
END_TEST

START_TEST(test_versions_key)
{
    char buf[128];

    ck_assert_int_eq(mc_elect_versions_key("c1", buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/mcstore/c1/versions");
    ck_assert_int_eq(mc_elect_versions_key("a/b", buf, sizeof(buf)), MC_ERR_INVALID);
    ck_assert_int_eq(mc_elect_versions_key("c1", buf, 10), MC_ERR_INVALID);
}
END_TEST

/* One home for the key layout: the masters' keys and the agents' are built the same way,
 * and a cluster id that could leave /mcstore/<id>/ is refused everywhere. */
START_TEST(test_cluster_key_layout)
{
    char buf[128], big[70];

    ck_assert_int_eq(mc_elect_key("c-1.x_Y", buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/mcstore/c-1.x_Y/leader");
    ck_assert_int_eq(mc_elect_members_prefix("c1", buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/mcstore/c1/members/");
    ck_assert_int_eq(mc_elect_agents_prefix("c1", buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/mcstore/c1/agents/");
    ck_assert_int_eq(mc_etcd_cluster_key("c1", "agents/n1", buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/mcstore/c1/agents/n1");
    ck_assert_int_eq(mc_etcd_cluster_key("", "leader", buf, sizeof(buf)), MC_ERR_INVALID);
    ck_assert_int_eq(mc_etcd_cluster_key(NULL, "leader", buf, sizeof(buf)), MC_ERR_INVALID);
    ck_assert_int_eq(mc_etcd_cluster_key("..", "leader", buf, sizeof(buf)), 0); /* a name */
    ck_assert_int_eq(mc_etcd_cluster_key("a b", "leader", buf, sizeof(buf)), MC_ERR_INVALID);
    ck_assert_int_eq(mc_etcd_cluster_key("a\n", "leader", buf, sizeof(buf)), MC_ERR_INVALID);
    memset(big, 'a', 64);
    big[64] = '\0';
    ck_assert_int_eq(mc_etcd_cluster_key(big, "leader", buf, sizeof(buf)), MC_ERR_INVALID);
    big[63] = '\0';
    ck_assert_int_eq(mc_etcd_cluster_key(big, "leader", buf, sizeof(buf)), 0);
    ck_assert_int_eq(mc_elect_key("c1", buf, 16), MC_ERR_INVALID);
}
END_TEST

/* The renewal schedule: late, for a short failover (a killed leader's lease lapses TTL
 * after its last renewal), yet two whole etcd calls and 50 ms between them always fit
 * before the leader must stop serving. */
START_TEST(test_renew_schedule)
{
    for (uint64_t ttl = 1000; ttl <= 60000; ttl += 500) {
        uint64_t every = mc_elect_renew_every_ms(ttl);
        uint64_t margin = ttl / 8 < 250 ? 250 : ttl / 8;
        uint64_t call = ttl / 4 < 250 ? ttl / 4 : 250;

        ck_assert_uint_ge(every, 100);
        ck_assert_uint_le(every + 2 * call + 50, ttl - margin);
    }
    /* the 2 s default: a renewal every 1150 ms, so a kill leaves 1.4-2 s to the lapse */
    ck_assert_uint_eq(mc_elect_renew_every_ms(2000), 1150);
    ck_assert_uint_eq(mc_elect_renew_every_ms(1000), 150);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("elect_versions");
    TCase *tc = tcase_create("versions");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_versions_base_not_from_the_clock_alone);
    tcase_add_test(tc, test_versions_parse);
    tcase_add_test(tc, test_versions_next_end);
    tcase_add_test(tc, test_versions_key);
    tcase_add_test(tc, test_cluster_key_layout);
    tcase_add_test(tc, test_renew_schedule);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
