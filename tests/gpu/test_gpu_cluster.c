/*
 * The GPU tier across nodes: node A has a GPU segment (the test device), node B holds no
 * data (--dram 0). Debian's UCX moves host memory only, so A stages the bytes of its GPU
 * segment through host memory both ways: a GET from B of an object in A's GPU memory, and
 * a put from B that the master places there. The cluster view shows the tier.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc.h>

#include "tests/cluster/t_cluster.h"

#define OBJ (3u * T_MIB + 5)

static struct {
    char dir[256];
    char token[40];
    struct t_proc master, a, b;
} fx;

static const mc_put_opts_t gpu_opts = {.flags = MC_PUT_TIER_GPU};

static mc_client_t *t_conn(struct t_proc *p)
{
    mc_client_t *c = NULL;
    int err = mc_connect(p->sock, &c);

    if (err != 0)
        t_proc_dump_log(p, 8192);
    ck_assert_msg(err == 0, "mc_connect(%s): %s", p->name, mc_strerror(err));
    return c;
}

/* An integer of `mcctl stats` through the agent at sock. */
static json_int_t t_stat_int(const char *sock, const char *field)
{
    char *out = NULL;
    json_t *j;
    json_int_t v;

    ck_assert_int_eq(t_mcctl(sock, &out, "stats", NULL), 0);
    j = json_loads(out, 0, NULL);
    ck_assert_msg(j != NULL, "mcctl stats: bad JSON: %s", out);
    v = t_json_int(j, field);
    json_decref(j);
    free(out);
    return v;
}

/* the cluster view through the client node shows A's GPU segment */
START_TEST(test_gpu_cluster_view_shows_tier)
{
    json_t *j = t_cluster_json(fx.b.sock), *segs, *s;
    size_t i;
    int gpu = 0;

    ck_assert_ptr_nonnull(j);
    segs = json_object_get(j, "segments");
    json_array_foreach(segs, i, s) {
        if (strcmp(t_json_str(s, "kind"), "gpu") == 0) {
            gpu++;
            ck_assert_int_eq(t_json_int(s, "capacity"), 32 * T_MIB);
        }
    }
    ck_assert_int_eq(gpu, 1);
    json_decref(j);
}
END_TEST

/* written on A into its GPU memory, read on B: A stages it out */
START_TEST(test_gpu_cluster_remote_get_staged)
{
    mc_client_t *ca = t_conn(&fx.a), *cb = t_conn(&fx.b);
    uint8_t *in = malloc(OBJ), *out = malloc(OBJ);
    json_int_t before = t_stat_int(fx.a.sock, "gpu_staged_reads");
    mc_obj_info_t info;
    size_t len = 0;

    t_fill(in, OBJ, 11);
    ck_assert_int_eq(mc_put(ca, "rg/0", in, OBJ, &gpu_opts), 0);
    ck_assert_int_eq(mc_stat(cb, "rg/0", &info), 0);
    ck_assert(info.flags & MC_PUT_TIER_GPU);
    ck_assert_int_eq(mc_get(cb, "rg/0", out, OBJ, &len), 0);
    ck_assert_uint_eq(len, OBJ);
    ck_assert(memcmp(in, out, OBJ) == 0);
    ck_assert_int_ge(t_stat_int(fx.a.sock, "gpu_staged_reads"), before + 1);
    /* and on A itself, through its landing segment */
    memset(out, 0, OBJ);
    ck_assert_int_eq(mc_get(ca, "rg/0", out, OBJ, &len), 0);
    ck_assert(memcmp(in, out, OBJ) == 0);
    mc_close(ca);
    mc_close(cb);
    free(in);
    free(out);
}
END_TEST

/* written on B (no data of its own) into A's GPU memory: A stages it in */
START_TEST(test_gpu_cluster_remote_put_staged)
{
    mc_client_t *ca = t_conn(&fx.a), *cb = t_conn(&fx.b);
    uint8_t *in = malloc(OBJ), *out = malloc(OBJ);
    json_int_t before = t_stat_int(fx.a.sock, "gpu_staged_writes");
    size_t len = 0;

    t_fill(in, OBJ, 12);
    ck_assert_int_eq(mc_put(cb, "rp/0", in, OBJ, &gpu_opts), 0);
    ck_assert_int_ge(t_stat_int(fx.a.sock, "gpu_staged_writes"), before + 1);
    ck_assert_int_eq(mc_get(ca, "rp/0", out, OBJ, &len), 0);
    ck_assert(memcmp(in, out, OBJ) == 0);
    memset(out, 0, OBJ);
    ck_assert_int_eq(mc_get(cb, "rp/0", out, OBJ, &len), 0);
    ck_assert(memcmp(in, out, OBJ) == 0);
    mc_close(ca);
    mc_close(cb);
    free(in);
    free(out);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("gpu_cluster");
    TCase *tc = tcase_create("gpu_cluster");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_gpu_cluster_view_shows_tier);
    tcase_add_test(tc, test_gpu_cluster_remote_get_staged);
    tcase_add_test(tc, test_gpu_cluster_remote_put_staged);
    suite_add_tcase(s, tc);
    return s;
}

static bool t_fixture_stop(bool dump)
{
    struct t_proc *all[3] = {&fx.a, &fx.b, &fx.master};
    char st[48];
    bool clean = true;

    for (int i = 0; i < 3; i++) {
        if (t_proc_stop(all[i]) != 0) {
            fprintf(stderr, "test_gpu_cluster: %s did not exit cleanly on SIGTERM (%s)\n",
                    all[i]->name, t_status_str(all[i]->status, st, sizeof(st)));
            clean = false;
        }
        if (all[i]->pid == 0 && t_log_unexpected(all[i]->log, NULL) != 0)
            clean = false;
    }
    for (int i = 0; i < 3 && (dump || !clean); i++)
        t_proc_dump_log(all[i], 4096);
    return clean;
}

int main(void)
{
    static const char *const gpu_a[] = {"--gpu", "test:32M", "--set", "gpu_test_delay_us=500",
                                        NULL};
    SRunner *sr;
    int failed;
    bool clean;

    t_mkdtemp(fx.dir, sizeof(fx.dir));
    t_random_token(fx.token, sizeof(fx.token));
    t_master_start(&fx.master, fx.dir, fx.token);
    t_agent_spawn(&fx.a, fx.dir, fx.master.port, "A", "da", "16M", fx.token, gpu_a);
    t_agent_spawn(&fx.b, fx.dir, fx.master.port, "B", NULL, "0", fx.token, NULL);
    if (t_proc_wait_ready(&fx.a, T_READY_MS) != 0 || t_proc_wait_ready(&fx.b, T_READY_MS) != 0) {
        fprintf(stderr, "test_gpu_cluster: an agent did not get ready\n");
        t_fixture_stop(true);
        return EXIT_FAILURE;
    }
    sr = srunner_create(t_suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    clean = t_fixture_stop(failed != 0);
    if (clean)
        t_rmdir(fx.dir);
    return failed == 0 && clean ? EXIT_SUCCESS : EXIT_FAILURE;
}
