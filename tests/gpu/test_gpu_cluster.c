/*
 * The GPU tier across nodes: nodes A and C have a GPU segment (the test device), node B
 * holds no data (--dram 0): a GET from B of an object in A's GPU memory, a put from B that
 * the master places in GPU memory, and a drain of A that moves its GPU-tier objects to C's
 * GPU segment. The cluster view shows the tier.
 *
 * Run twice (meson.build): "staged" (Debian's UCX moves host memory only, so the owners
 * stage the bytes of their GPU segments through host memory both ways) and "direct"
 * (gpu_test_ucx_direct: the agents treat the test device's memory as memory UCX moves, as
 * with a UCX that moves CUDA memory: no byte is staged, the gpu_staged_* counters stay 0).
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
    struct t_proc master, a, b, c;
    bool direct;
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

/* A counter of the GPU nodes A and C together. */
static json_int_t t_gpu_stat(const char *field)
{
    return t_stat_int(fx.a.sock, field) + t_stat_int(fx.c.sock, field);
}

/* What this run expects of the owners' counters since `st_r`, `st_w`, `di_r`, `di_w` (their
 * values before): reads and writes of GPU segments by peers went the run's way, never the
 * other. */
struct t_gpu_counts {
    json_int_t staged_r, staged_w, direct_r, direct_w;
};

static struct t_gpu_counts t_gpu_counts_now(void)
{
    return (struct t_gpu_counts){.staged_r = t_gpu_stat("gpu_staged_reads"),
                                 .staged_w = t_gpu_stat("gpu_staged_writes"),
                                 .direct_r = t_gpu_stat("gpu_direct_reads"),
                                 .direct_w = t_gpu_stat("gpu_direct_writes")};
}

static void t_gpu_counts_moved(const struct t_gpu_counts *before, int reads, int writes)
{
    struct t_gpu_counts now = t_gpu_counts_now();

    if (fx.direct) {
        ck_assert_int_eq(now.staged_r, 0);
        ck_assert_int_eq(now.staged_w, 0);
        ck_assert_int_ge(now.direct_r, before->direct_r + reads);
        ck_assert_int_ge(now.direct_w, before->direct_w + writes);
    } else {
        ck_assert_int_eq(now.direct_r, 0);
        ck_assert_int_eq(now.direct_w, 0);
        ck_assert_int_ge(now.staged_r, before->staged_r + reads);
        ck_assert_int_ge(now.staged_w, before->staged_w + writes);
    }
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
    ck_assert_int_eq(gpu, 2);
    json_decref(j);
}
END_TEST

/* written on A into its GPU memory, read on B: A stages it out, or sends it directly */
START_TEST(test_gpu_cluster_remote_get_staged)
{
    mc_client_t *ca = t_conn(&fx.a), *cb = t_conn(&fx.b);
    uint8_t *in = malloc(OBJ), *out = malloc(OBJ);
    struct t_gpu_counts before = t_gpu_counts_now();
    mc_obj_info_t info;
    size_t len = 0;

    t_fill(in, OBJ, 11);
    ck_assert_int_eq(mc_put(ca, "rg/0", in, OBJ, &gpu_opts), 0);
    ck_assert_int_eq(mc_stat(cb, "rg/0", &info), 0);
    ck_assert(info.flags & MC_PUT_TIER_GPU);
    ck_assert_int_eq(mc_get(cb, "rg/0", out, OBJ, &len), 0);
    ck_assert_uint_eq(len, OBJ);
    ck_assert(memcmp(in, out, OBJ) == 0);
    t_gpu_counts_moved(&before, 1, 0);
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

/* written on B (no data of its own) into GPU memory: its owner stages it in, or UCX lands
 * it there directly */
START_TEST(test_gpu_cluster_remote_put_staged)
{
    mc_client_t *ca = t_conn(&fx.a), *cb = t_conn(&fx.b);
    uint8_t *in = malloc(OBJ), *out = malloc(OBJ);
    struct t_gpu_counts before = t_gpu_counts_now();
    size_t len = 0;

    t_fill(in, OBJ, 12);
    ck_assert_int_eq(mc_put(cb, "rp/0", in, OBJ, &gpu_opts), 0);
    t_gpu_counts_moved(&before, 0, 1);
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

/* Bytes of node `name`'s segments of `kind` in the cluster view through B. */
static json_int_t t_node_kind_used(json_t *j, const char *name, const char *kind)
{
    json_t *node = t_json_find_str(j, "nodes", "name", name), *segs, *s;
    json_int_t used = 0;
    size_t i;

    ck_assert_ptr_nonnull(node);
    segs = json_object_get(j, "segments");
    json_array_foreach(segs, i, s) {
        if (t_json_int(s, "node") == t_json_int(node, "id") &&
            strcmp(t_json_str(s, "kind"), kind) == 0)
            used += t_json_int(s, "used");
    }
    return used;
}

#define NDRAIN 6
#define DRAIN_MS 30000

/* A drains: its GPU-tier objects move to C's GPU segment (not to anyone's DRAM), every
 * byte intact, read through B; the copies are staged out of A's GPU memory or sent from it
 * directly, and land in C's staged or directly. */
START_TEST(test_gpu_cluster_drain_moves_gpu_objects)
{
    mc_client_t *ca = t_conn(&fx.a), *cb = t_conn(&fx.b);
    uint8_t *in = malloc(OBJ), *out = malloc(OBJ);
    struct t_gpu_counts before;
    json_int_t moved_before = t_stat_int(fx.a.sock, "drain_copies_out");
    json_t *j, *n;
    uint64_t deadline;
    size_t len = 0;
    char key[32];
    int i;

    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    for (i = 0; i < NDRAIN; i++) {
        snprintf(key, sizeof(key), "dr/%d", i);
        t_fill(in, OBJ - (size_t)i, 100 + (uint64_t)i);
        ck_assert_int_eq(mc_put(ca, key, in, OBJ - (size_t)i, &gpu_opts), 0);
    }
    j = t_cluster_json(fx.b.sock);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_ge(t_node_kind_used(j, "A", "gpu"), (json_int_t)OBJ); /* something to move */
    json_decref(j);
    before = t_gpu_counts_now();

    ck_assert_int_eq(t_mcctl(fx.b.sock, NULL, "drain", "A", NULL), 0);
    deadline = t_now_ms() + DRAIN_MS;
    for (;;) {
        j = t_cluster_json(fx.b.sock);
        ck_assert_ptr_nonnull(j);
        n = t_json_find_str(j, "nodes", "name", "A");
        ck_assert_ptr_nonnull(n);
        if (strcmp(t_json_str(n, "drain"), "drained") == 0) {
            ck_assert_int_eq(t_json_int(n, "drain_left_objects"), 0);
            ck_assert_int_eq(t_node_kind_used(j, "A", "gpu"), 0);
            ck_assert_int_ge(t_node_kind_used(j, "C", "gpu"), (json_int_t)NDRAIN * (OBJ - 8));
            json_decref(j);
            break;
        }
        json_decref(j);
        ck_assert_msg(t_now_ms() < deadline, "A not drained within %d ms", DRAIN_MS);
        t_poll_pause();
    }
    ck_assert_int_ge(t_stat_int(fx.a.sock, "drain_copies_out"), moved_before + NDRAIN);
    /* each copy left A's GPU memory and landed in C's, the run's way */
    t_gpu_counts_moved(&before, NDRAIN, NDRAIN);
    for (i = 0; i < NDRAIN; i++) {
        mc_obj_info_t info;

        snprintf(key, sizeof(key), "dr/%d", i);
        ck_assert_int_eq(mc_stat(cb, key, &info), 0);
        ck_assert(info.flags & MC_PUT_TIER_GPU);
        t_fill(in, OBJ - (size_t)i, 100 + (uint64_t)i);
        memset(out, 0, OBJ);
        ck_assert_int_eq(mc_get(cb, key, out, OBJ, &len), 0);
        ck_assert_uint_eq(len, OBJ - (size_t)i);
        ck_assert(memcmp(in, out, len) == 0);
    }
    /* and the earlier objects too: whatever A held is elsewhere now */
    t_fill(in, OBJ, 11);
    ck_assert_int_eq(mc_get(cb, "rg/0", out, OBJ, &len), 0);
    ck_assert(memcmp(in, out, OBJ) == 0);
    ck_assert_int_eq(t_mcctl(fx.b.sock, NULL, "undrain", "A", NULL), 0);
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
    tcase_add_test(tc, test_gpu_cluster_drain_moves_gpu_objects); /* last: it drains A */
    suite_add_tcase(s, tc);
    return s;
}

static bool t_fixture_stop(bool dump)
{
    struct t_proc *all[4] = {&fx.a, &fx.b, &fx.c, &fx.master};
    char st[48];
    bool clean = true;

    for (int i = 0; i < 4; i++) {
        if (t_proc_stop(all[i]) != 0) {
            fprintf(stderr, "test_gpu_cluster: %s did not exit cleanly on SIGTERM (%s)\n",
                    all[i]->name, t_status_str(all[i]->status, st, sizeof(st)));
            clean = false;
        }
        if (all[i]->pid == 0 && t_log_unexpected(all[i]->log, NULL) != 0)
            clean = false;
    }
    for (int i = 0; i < 4 && (dump || !clean); i++)
        t_proc_dump_log(all[i], 4096);
    return clean;
}

int main(int argc, char **argv)
{
    static const char *const gpu_staged[] = {"--gpu", "test:32M", "--set",
                                             "gpu_test_delay_us=500", NULL};
    static const char *const gpu_direct[] = {"--gpu", "test:32M", "--set",
                                             "gpu_test_delay_us=500", "--set",
                                             "gpu_test_ucx_direct=true", NULL};
    const char *const *gpu_a;
    SRunner *sr;
    int failed;
    bool clean;

    if (argc != 2 || (strcmp(argv[1], "staged") != 0 && strcmp(argv[1], "direct") != 0)) {
        fprintf(stderr, "usage: test_gpu_cluster staged|direct\n");
        return EXIT_FAILURE;
    }
    fx.direct = strcmp(argv[1], "direct") == 0;
    gpu_a = fx.direct ? gpu_direct : gpu_staged;

    t_mkdtemp(fx.dir, sizeof(fx.dir));
    t_random_token(fx.token, sizeof(fx.token));
    t_master_start(&fx.master, fx.dir, fx.token);
    t_agent_spawn(&fx.a, fx.dir, fx.master.port, "A", "da", "16M", fx.token, gpu_a);
    t_agent_spawn(&fx.b, fx.dir, fx.master.port, "B", NULL, "0", fx.token, NULL);
    t_agent_spawn(&fx.c, fx.dir, fx.master.port, "C", "dc", "16M", fx.token, gpu_a);
    if (t_proc_wait_ready(&fx.a, T_READY_MS) != 0 || t_proc_wait_ready(&fx.b, T_READY_MS) != 0 ||
        t_proc_wait_ready(&fx.c, T_READY_MS) != 0) {
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
