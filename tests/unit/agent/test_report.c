/*
 * The report walk (daemon/agent/report.h) against a real in-process master through the
 * master link: every holding of a segment is restored, in chunks and past the in-flight
 * bound; holdings the master refuses (a newer version it knows, an overlap, a bad extent)
 * are forgotten by the segment and only they; a second walk changes nothing; a segment
 * without holdings sends nothing.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/agent/mlink.h"
#include "daemon/agent/report.h"
#include "daemon/agent/seg.h"
#include "daemon/master/master.h"

#define KiB 1024u
#define MiB (1024u * 1024u)
#define T_MAX 10000

/* A segment kind of the test's own: its holdings are an array, forgets are recorded. */
struct t_seg {
    struct mc_seg s;
    uint32_t n;
    struct t_hold {
        char key[32];
        uint64_t off, len, version;
        bool forgotten;
    } h[T_MAX];
    uint32_t forgets;
};

static int t_holdings(struct mc_seg *s, uint64_t *cursor, struct mc_seg_holding *out, int max)
{
    struct t_seg *t = (struct t_seg *)s;
    int n = 0;

    while (n < max && *cursor < t->n) {
        const struct t_hold *h = &t->h[(*cursor)++];

        if (h->forgotten)
            continue;
        out[n++] = (struct mc_seg_holding){.key = h->key, .key_len = strlen(h->key),
                                           .offset = h->off, .alloc_len = h->len,
                                           .size = h->len, .version = h->version};
    }
    return n;
}

static void t_forget(struct mc_seg *s, uint64_t offset, uint64_t version)
{
    struct t_seg *t = (struct t_seg *)s;

    for (uint32_t i = 0; i < t->n; i++) {
        if (t->h[i].off == offset && t->h[i].version == version) {
            ck_assert(!t->h[i].forgotten);
            t->h[i].forgotten = true;
            t->forgets++;
            return;
        }
    }
    ck_abort_msg("forget of a holding never reported: %llu v%llu", (unsigned long long)offset,
                 (unsigned long long)version);
}

static const struct mc_seg_ops t_ops = {.holdings = t_holdings, .forget = t_forget};

static struct t_seg *t_seg_new(uint32_t n)
{
    struct t_seg *t = calloc(1, sizeof(*t));

    ck_assert_ptr_nonnull(t);
    t->s.ops = &t_ops;
    t->s.size = 256 * MiB;
    t->n = n;
    for (uint32_t i = 0; i < n; i++) {
        snprintf(t->h[i].key, sizeof(t->h[i].key), "obj-%u", i);
        t->h[i].off = (uint64_t)i * 16 * KiB;
        t->h[i].len = 16 * KiB;
        t->h[i].version = 100 + i;
    }
    return t;
}

struct t_env {
    struct mc_master *m;
    struct mlink *ml;
    uint32_t node, seg;
};

static struct t_env t_env_new(void)
{
    struct mc_master_config cfg;
    struct mc_master_seg_desc d = {.kind = MC_SEG_DRAM, .base = 0x10000000, .size = 256 * MiB,
                                   .flags = MC_MASTER_SEG_F_RESTORING};
    struct t_env e;

    mc_master_config_defaults(&cfg);
    ck_assert_int_eq(mc_master_create(&cfg, NULL, NULL, &e.m), 0);
    ck_assert_int_eq(mc_master_node_register(e.m, "n1", "d1", &e.node), 0);
    d.node = e.node;
    ck_assert_int_eq(mc_master_segment_mount(e.m, &d, &e.seg), 0);
    ck_assert_int_eq(ml_create_local(e.m, &e.ml), 0);
    return e;
}

static void t_env_free(struct t_env *e)
{
    ml_destroy(e->ml);
    mc_master_destroy(e->m);
}

START_TEST(test_report_restores_every_holding)
{
    struct t_env e = t_env_new();
    struct t_seg *t = t_seg_new(T_MAX); /* more than one in-flight window */
    struct report_stats st = {0};
    struct mc_master_stats ms;
    struct mc_master_stat stat;

    ck_assert_int_eq(report_seg(e.ml, &t->s, e.seg, &st), 0);
    ck_assert_uint_eq(st.walks, 1);
    ck_assert_uint_eq(st.restored, T_MAX);
    /* the walk said it was done: the segment takes puts again */
    {
        struct mc_master_seg_info info;

        ck_assert_int_eq(mc_master_segment_info(e.m, e.seg, &info), 0);
        ck_assert(!info.restoring);
    }
    ck_assert_uint_eq(st.forgotten, 0);
    ck_assert_uint_eq(st.failed, 0);
    mc_master_get_stats(e.m, &ms);
    ck_assert_uint_eq(ms.objects, T_MAX);
    ck_assert_uint_eq(ms.used_bytes, (uint64_t)T_MAX * 16 * KiB);
    ck_assert_int_eq(mc_master_stat(e.m, "obj-9999", 8, &stat), 0);
    ck_assert_uint_eq(stat.version, 100 + 9999);
    /* again: the master knew every one, nothing forgotten, nothing new */
    ck_assert_int_eq(report_seg(e.ml, &t->s, e.seg, &st), 0);
    ck_assert_uint_eq(st.restored, 2 * T_MAX);
    ck_assert_uint_eq(t->forgets, 0);
    mc_master_get_stats(e.m, &ms);
    ck_assert_uint_eq(ms.used_bytes, (uint64_t)T_MAX * 16 * KiB);
    free(t);
    t_env_free(&e);
}
END_TEST

START_TEST(test_report_forgets_only_what_master_refuses)
{
    struct t_env e = t_env_new();
    struct t_seg *t = t_seg_new(8);
    struct report_stats st = {0};
    struct mc_master_put_req put = {.key = "obj-2", .key_len = 5, .size = 4 * KiB,
                                    .replicas = 1, .preferred = MC_MASTER_NODE_NONE};
    struct mc_master_put_grant g;
    struct mc_master_ref ref = {.key = "obj-2", .key_len = 5};

    struct mc_master_seg_desc other = {.node = e.node, .kind = MC_SEG_DRAM, .base = 0x90000000,
                                       .size = 4 * MiB};
    uint32_t other_seg;

    /* the master has a newer obj-2 (a put after the report's version, into a segment that
     * is not restoring) ... */
    ck_assert_int_eq(mc_master_segment_mount(e.m, &other, &other_seg), 0);
    put.writer = e.node;
    t->h[2].version = 1; /* older than anything the master hands out below */
    ck_assert_int_eq(mc_master_put_start(e.m, &put, &g), 0);
    ref.version = g.version;
    ref.node = e.node;
    ck_assert_int_eq(mc_master_put_end(e.m, &ref), 0);
    /* ... and obj-5's extent overlaps obj-4's; obj-6 names a size past its extent */
    t->h[5].off = t->h[4].off + 4 * KiB;
    t->h[6].version = 0;
    ck_assert_int_eq(report_seg(e.ml, &t->s, e.seg, &st), 0);
    ck_assert_uint_eq(st.restored, 5);
    ck_assert_uint_eq(st.forgotten, 3);
    ck_assert(t->h[2].forgotten);
    ck_assert(t->h[5].forgotten);
    ck_assert(t->h[6].forgotten);
    ck_assert_int_eq(mc_master_exist(e.m, "obj-4", 5), 1);
    ck_assert_int_eq(mc_master_exist(e.m, "obj-5", 5), 0);
    ck_assert_int_eq(mc_master_exist(e.m, "obj-7", 5), 1);
    free(t);
    t_env_free(&e);
}
END_TEST

/* The link goes away (the agent stops) with RESTOREs still queued: they end without the
 * master's word, and nothing is forgotten (a disk segment erases what it forgets: a
 * graceful stop during a walk must not erase valid records; review D2). */
START_TEST(test_report_link_gone_forgets_nothing)
{
    struct t_seg *t = t_seg_new(100);
    struct report_stats st = {0};
    struct mlink *ml;

    /* a remote link that never sends: every RESTORE stays queued */
    ck_assert_int_eq(ml_create_remote(NULL, 1, 1000, &ml), 0);
    ck_assert_int_eq(report_seg(ml, &t->s, 7, &st), 0);
    ck_assert_uint_eq(st.restored, 0);
    ml_destroy(ml);
    ck_assert_uint_eq(t->forgets, 0);
    ck_assert_uint_eq(st.forgotten, 0);
    ck_assert_uint_gt(st.failed, 0);
    free(t);
}
END_TEST

START_TEST(test_report_segment_without_holdings)
{
    struct t_env e = t_env_new();
    static const struct mc_seg_ops none = {0};
    struct mc_seg s = {.ops = &none};
    struct report_stats st = {0};
    struct mc_master_stats ms;

    ck_assert_int_eq(report_seg(e.ml, &s, e.seg, &st), 0);
    ck_assert_uint_eq(st.walks, 0);
    mc_master_get_stats(e.m, &ms);
    ck_assert_uint_eq(ms.restores + ms.restores_refused, 0);
    t_env_free(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("agent_report");
    TCase *tc = tcase_create("report");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_report_restores_every_holding);
    tcase_add_test(tc, test_report_forgets_only_what_master_refuses);
    tcase_add_test(tc, test_report_segment_without_holdings);
    tcase_add_test(tc, test_report_link_gone_forgets_nothing);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
