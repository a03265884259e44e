/*
 * The GPU tier end to end on one node, through the test device (--gpu test:SIZE): puts
 * that name the tier land in the agent's GPU segment, the master reports the tier, GETs
 * come back through the landing segment; sync, batch and async forms and every size class;
 * a device copy that fails is an error, never a stored object; a tier with no segment is
 * no room; an agent told to use a CUDA device where there is none does not start.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc.h>

#include "tests/integration/t_agent.h"
#include "tests/integration/t_util.h"

#define MIB (1024u * 1024u)

static struct t_agent g_agent;
static mc_client_t *g_c;

static void start(const char *const *extra)
{
    t_agent_start(&g_agent, "64M", extra);
    g_c = t_connect(&g_agent);
}

static void stop(void)
{
    int rc;

    mc_close(g_c);
    g_c = NULL;
    rc = t_agent_stop(&g_agent);
    ck_assert_msg(rc == 0, "mc-agent did not exit cleanly on SIGTERM (%d)", rc);
    ck_assert_msg(g_agent.log_unexpected == 0, "mc-agent logged %d unexpected error line(s)",
                  g_agent.log_unexpected);
}

/* every copy of the test device waits 2 ms: copies are really asynchronous */
static const char *const slow[] = {"--gpu", "test:64M", "--set", "landing=64M", "--set",
                                   "gpu_test_delay_us=2000", NULL};

static const mc_put_opts_t gpu_opts = {.flags = MC_PUT_TIER_GPU};

START_TEST(test_gpu_tier_sizes)
{
    /* one byte, under a page, one chunk and one byte, several chunks */
    static const size_t sizes[] = {1, 4000, MIB + 1, 5 * MIB + 17};
    mc_obj_info_t info;

    start(slow);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint8_t *in = t_alloc_filled(sizes[i], 1000 + i), *out = malloc(sizes[i] + 1);
        size_t len = 0;
        char key[32];

        snprintf(key, sizeof(key), "g/%zu", i);
        ck_assert_int_eq(mc_put(g_c, key, in, sizes[i], &gpu_opts), 0);
        ck_assert_int_eq(mc_stat(g_c, key, &info), 0);
        ck_assert_uint_eq(info.size, sizes[i]);
        ck_assert_msg(info.flags & MC_PUT_TIER_GPU, "flags %u", info.flags);
        ck_assert_int_eq(mc_get(g_c, key, out, sizes[i] + 1, &len), 0);
        ck_assert_uint_eq(len, sizes[i]);
        ck_assert(memcmp(in, out, len) == 0);
        /* a second read, after the first released its landing block */
        memset(out, 0, sizes[i]);
        ck_assert_int_eq(mc_get(g_c, key, out, sizes[i], &len), 0);
        ck_assert(memcmp(in, out, len) == 0);
        free(in);
        free(out);
    }
    /* a DRAM put beside them stays in DRAM */
    ck_assert_int_eq(mc_put(g_c, "d/0", "dram", 4, NULL), 0);
    ck_assert_int_eq(mc_stat(g_c, "d/0", &info), 0);
    ck_assert_uint_eq(info.flags & MC_PUT_TIER_GPU, 0);
    stop();
}
END_TEST

START_TEST(test_gpu_tier_batch_and_async)
{
    enum { N = 6 };
    const char *keys[N] = {"b/0", "b/1", "b/2", "b/3", "b/4", "b/5"};
    const void *bufs[N];
    void *outs[N];
    size_t lens[N], caps[N], got[N];
    int res[N];
    uint8_t *in[N];
    mc_op_t *op;
    size_t len;

    start(slow);
    for (int i = 0; i < N; i++) {
        lens[i] = caps[i] = (size_t)(i + 1) * 300000;
        in[i] = t_alloc_filled(lens[i], 77 + (uint64_t)i);
        bufs[i] = in[i];
        outs[i] = malloc(caps[i]);
    }
    ck_assert_int_eq(mc_batch_put(g_c, N, keys, bufs, lens, &gpu_opts, res), N);
    ck_assert_int_eq(mc_batch_get(g_c, N, keys, outs, caps, got, res), N);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(res[i], 0);
        ck_assert_uint_eq(got[i], lens[i]);
        ck_assert(memcmp(in[i], outs[i], lens[i]) == 0);
    }
    ck_assert_int_eq(mc_put_async(g_c, "a/0", in[5], lens[5], &gpu_opts, &op), 0);
    ck_assert_int_eq(mc_wait(op, -1, &len), 0);
    ck_assert_uint_eq(len, lens[5]);
    mc_op_free(op);
    ck_assert_int_eq(mc_get_async(g_c, "a/0", outs[5], caps[5], &op), 0);
    ck_assert_int_eq(mc_wait(op, -1, &len), 0);
    ck_assert_uint_eq(len, lens[5]);
    ck_assert(memcmp(in[5], outs[5], lens[5]) == 0);
    mc_op_free(op);
    for (int i = 0; i < N; i++) {
        free(in[i]);
        free(outs[i]);
    }
    stop();
}
END_TEST

/* the device's 1st copy (the put's) fails: the put fails and nothing is stored; the 2nd
 * (a new put) works, the 3rd (its GET) fails as an I/O error, the 4th (the GET again)
 * works */
START_TEST(test_gpu_tier_copy_failure)
{
    static const char *const failing[] = {"--gpu", "test:64M", "--set", "landing=64M",
                                          "--set", "gpu_test_fail_every=0", "--set",
                                          "gpu_test_fail_nth=1", NULL};
    static const char *const fail3[] = {"--gpu", "test:64M", "--set", "landing=64M", "--set",
                                        "gpu_test_fail_nth=3", NULL};
    uint8_t *in = t_alloc_filled(2 * MIB, 5), *out = malloc(2 * MIB);
    size_t len;

    start(failing);
    ck_assert_int_eq(mc_put(g_c, "f/0", in, 2 * MIB, &gpu_opts), MC_ERR_IO);
    ck_assert_int_eq(mc_exist(g_c, "f/0"), 0);
    ck_assert_int_eq(mc_get(g_c, "f/0", out, 2 * MIB, &len), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_put(g_c, "f/1", in, 2 * MIB, &gpu_opts), 0); /* copy 2 */
    ck_assert_int_eq(mc_get(g_c, "f/1", out, 2 * MIB, &len), 0);     /* copy 3 */
    ck_assert(memcmp(in, out, 2 * MIB) == 0);
    stop();

    start(fail3);
    ck_assert_int_eq(mc_put(g_c, "f/0", in, 2 * MIB, &gpu_opts), 0);       /* copy 1 */
    ck_assert_int_eq(mc_put(g_c, "f/1", in, MIB, &gpu_opts), 0);           /* copy 2 */
    ck_assert_int_eq(mc_get(g_c, "f/0", out, 2 * MIB, &len), MC_ERR_IO);   /* copy 3 */
    ck_assert_int_eq(mc_get(g_c, "f/0", out, 2 * MIB, &len), 0);           /* copy 4 */
    ck_assert(memcmp(in, out, 2 * MIB) == 0);
    stop();
    free(in);
    free(out);
}
END_TEST

/* an agent with no GPU segment has no room in that tier */
START_TEST(test_gpu_tier_without_segment)
{
    start(NULL);
    ck_assert_int_eq(mc_put(g_c, "n/0", "x", 1, &gpu_opts), MC_ERR_NO_SPACE);
    ck_assert_int_eq(mc_put(g_c, "n/0", "x", 1, NULL), 0);
    stop();
}
END_TEST

/* a GPU segment fills and evicts like DRAM: in its own tier only */
START_TEST(test_gpu_tier_evicts_in_its_tier)
{
    static const char *const small[] = {"--gpu", "test:8M", "--set", "landing=16M", NULL};
    uint8_t *in = t_alloc_filled(3 * MIB, 9);
    mc_obj_info_t info;
    int present = 0;
    char key[32];

    start(small);
    ck_assert_int_eq(mc_put(g_c, "d/keep", in, 3 * MIB, NULL), 0);
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof(key), "e/%d", i);
        ck_assert_int_eq(mc_put(g_c, key, in, 3 * MIB, &gpu_opts), 0);
    }
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof(key), "e/%d", i);
        present += mc_exist(g_c, key) == 1;
    }
    ck_assert_int_le(present, 2); /* 8 MiB hold two of them */
    ck_assert_int_ge(present, 1);
    ck_assert_int_eq(mc_stat(g_c, "d/keep", &info), 0); /* DRAM untouched */
    ck_assert_int_eq(mc_put(g_c, "e/big", in, 3 * MIB, &gpu_opts), 0);
    free(in);
    stop();
}
END_TEST

/* --gpu cuda where no CUDA driver or device is: the agent refuses to start, says why */
START_TEST(test_gpu_cuda_absent_agent_refuses)
{
    const char *bin = getenv("MC_AGENT_BIN");
    char cmd[1024], line[512];
    bool said = false;
    FILE *f;
    int st;

    if (bin == NULL)
        return;
    snprintf(cmd, sizeof(cmd),
             "MC_LIBCUDA=libcuda-not-here.so.1 %s --standalone --socket /tmp/mc-gpu-absent-%d.sock "
             "--dram 16M --gpu cuda0:64M 2>&1",
             bin, (int)getpid());
    f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f) != NULL)
        said = said || strstr(line, "no device") != NULL;
    st = pclose(f);
    ck_assert(WIFEXITED(st));
    ck_assert_int_ne(WEXITSTATUS(st), 0);
    ck_assert_msg(said, "the agent did not say \"no device\"");
}
END_TEST

int main(void)
{
    Suite *su = suite_create("gpu_tier");
    TCase *tc = tcase_create("gpu_tier");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gpu_tier_sizes);
    tcase_add_test(tc, test_gpu_tier_batch_and_async);
    tcase_add_test(tc, test_gpu_tier_copy_failure);
    tcase_add_test(tc, test_gpu_tier_without_segment);
    tcase_add_test(tc, test_gpu_tier_evicts_in_its_tier);
    tcase_add_test(tc, test_gpu_cuda_absent_agent_refuses);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
