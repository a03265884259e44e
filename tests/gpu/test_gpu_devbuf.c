/*
 * libmc with device buffers, through the test device (MC_DEVICE=test): device memory is a
 * memfd this process maps, exported to the agent, which copies put slices straight from
 * it. Every size class, sub-allocated pointers, the batch and async forms, both tiers; a
 * device copy failure is an error and nothing is stored; a cancel or a client killed while
 * a device copy runs leaves no write after the final status and no import behind.
 */
#include <check.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc.h>

#include "dev/dev.h"
#include "tests/integration/t_agent.h"
#include "tests/integration/t_util.h"

#define MIB (1024u * 1024u)
#define POOL (48u * MIB)

static struct t_agent g_agent;
static mc_client_t *g_c;
static struct mc_dev *g_dev;
static uint8_t *g_pool; /* one device allocation, sub-allocated like an engine's pool */

static void start(const char *const *extra)
{
    uint64_t p;

    setenv("MC_DEVICE", "test", 1);
    t_agent_start(&g_agent, "128M", extra);
    g_c = t_connect(&g_agent);
    ck_assert_int_eq(mc_dev_open(MC_DEV_TEST, 0, NULL, &g_dev, NULL, 0), 0);
    ck_assert_int_eq(mc_dev_alloc(g_dev, POOL, &p), 0);
    g_pool = (uint8_t *)(uintptr_t)p;
}

static void stop(void)
{
    int rc;

    mc_close(g_c);
    g_c = NULL;
    mc_dev_close(g_dev);
    rc = t_agent_stop(&g_agent);
    ck_assert_msg(rc == 0, "mc-agent did not exit cleanly on SIGTERM (%d)", rc);
    ck_assert_msg(g_agent.log_unexpected == 0, "mc-agent logged %d unexpected error line(s)",
                  g_agent.log_unexpected);
}

static json_int_t t_stat(mc_client_t *c, const char *field)
{
    char buf[16384];
    size_t len = 0;
    json_t *j;
    json_int_t v;

    ck_assert_int_eq(mc_stats(c, buf, sizeof(buf) - 1, &len), 0);
    buf[len] = '\0';
    j = json_loads(buf, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_msg(json_is_integer(json_object_get(j, field)), "no %s in stats", field);
    v = json_integer_value(json_object_get(j, field));
    json_decref(j);
    return v;
}

static const char *const plain[] = {"--gpu", "test:64M", "--set", "landing=64M", NULL};

/* put from and get into sub-allocated device pointers, every size class, both tiers */
START_TEST(test_devbuf_put_get_sizes)
{
    static const size_t sizes[] = {1, 4000, MIB + 1, 5 * MIB + 17};
    static const mc_put_opts_t tiers[2] = {{.flags = 0}, {.flags = MC_PUT_TIER_GPU}};
    json_int_t copies0;

    start(plain);
    copies0 = t_stat(g_c, "dev_copies");
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            uint8_t *src = g_pool + 4096 * (i + 1) + 13 * i; /* odd offsets in the pool */
            uint8_t *dst = g_pool + 24 * MIB + 8192 * i + 7;
            uint8_t *host = malloc(sizes[i]);
            size_t len = 0;
            char key[32];

            t_fill(src, sizes[i], 500 + i + 10 * (size_t)t);
            memset(dst, 0xee, sizes[i]);
            snprintf(key, sizeof(key), "d/%d/%zu", t, i);
            ck_assert_int_eq(mc_put(g_c, key, src, sizes[i], &tiers[t]), 0);
            ck_assert_int_eq(mc_get(g_c, key, dst, sizes[i], &len), 0); /* into the device */
            ck_assert_uint_eq(len, sizes[i]);
            ck_assert(memcmp(src, dst, sizes[i]) == 0);
            ck_assert_int_eq(mc_get(g_c, key, host, sizes[i], &len), 0); /* into the host */
            ck_assert(memcmp(src, host, sizes[i]) == 0);
            free(host);
        }
    }
    /* the agent copied from the device buffer itself, from one import of the pool */
    ck_assert_int_gt(t_stat(g_c, "dev_copies"), copies0);
    ck_assert_int_eq(t_stat(g_c, "dev_buffers_open"), 1);
    ck_assert_int_eq(t_stat(g_c, "dev_buffers_imported"), 1);
    stop();
}
END_TEST

START_TEST(test_devbuf_batch_and_async)
{
    enum { N = 5 };
    const char *keys[N] = {"b/0", "b/1", "b/2", "b/3", "b/4"};
    const void *bufs[N];
    void *outs[N];
    size_t lens[N], caps[N], got[N], len;
    int res[N];
    mc_op_t *op;

    start(plain);
    for (int i = 0; i < N; i++) {
        lens[i] = caps[i] = (size_t)(i + 1) * 700001;
        bufs[i] = g_pool + (size_t)i * 4 * MIB;
        outs[i] = g_pool + 24 * MIB + (size_t)i * 4 * MIB + 64;
        t_fill((uint8_t *)bufs[i], lens[i], 40 + (uint64_t)i);
    }
    ck_assert_int_eq(mc_batch_put(g_c, N, keys, bufs, lens, NULL, res), N);
    ck_assert_int_eq(mc_batch_get(g_c, N, keys, outs, caps, got, res), N);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(res[i], 0);
        ck_assert_uint_eq(got[i], lens[i]);
        ck_assert(memcmp(bufs[i], outs[i], lens[i]) == 0);
    }
    ck_assert_int_eq(mc_put_async(g_c, "a/0", bufs[4], lens[4], NULL, &op), 0);
    ck_assert_int_eq(mc_wait(op, -1, &len), 0);
    mc_op_free(op);
    memset(outs[3], 0, caps[4]);
    ck_assert_int_eq(mc_get_async(g_c, "a/0", outs[3], caps[4], &op), 0);
    ck_assert_int_eq(mc_wait(op, -1, &len), 0);
    ck_assert_uint_eq(len, lens[4]);
    ck_assert(memcmp(bufs[4], outs[3], lens[4]) == 0);
    mc_op_free(op);
    stop();
}
END_TEST

/* the device's first copy fails: that put is an error and stores nothing; the next works */
START_TEST(test_devbuf_copy_failure)
{
    static const char *const failing[] = {"--set", "gpu_test_fail_nth=1", NULL};
    size_t len;

    start(failing);
    t_fill(g_pool, 2 * MIB, 3);
    ck_assert_int_eq(mc_put(g_c, "f/0", g_pool, 2 * MIB, NULL), MC_ERR_IO);
    ck_assert_int_eq(mc_exist(g_c, "f/0"), 0);
    ck_assert_int_eq(t_stat(g_c, "dev_copy_errors"), 1);
    ck_assert_int_eq(mc_put(g_c, "f/0", g_pool, 2 * MIB, NULL), 0);
    ck_assert_int_eq(mc_get(g_c, "f/0", g_pool + 8 * MIB, 2 * MIB, &len), 0);
    ck_assert(memcmp(g_pool, g_pool + 8 * MIB, 2 * MIB) == 0);
    stop();
}
END_TEST

/* a put canceled while its device copies run (each waits 200 ms on the device): final
 * as canceled (or done, if it won the race), and then never stored half */
START_TEST(test_devbuf_cancel_put_in_flight)
{
    static const char *const slow[] = {"--set", "gpu_test_delay_us=200000", NULL};
    mc_op_t *op;
    int st;

    start(slow);
    t_fill(g_pool, 4 * MIB, 8);
    ck_assert_int_eq(mc_put_async(g_c, "c/0", g_pool, 4 * MIB, NULL, &op), 0);
    usleep(300000); /* the first slice is on the device */
    ck_assert_int_eq(mc_cancel(op), 0);
    st = mc_wait(op, -1, NULL);
    ck_assert_msg(st == MC_ERR_CANCELED || st == 0, "status %d", st);
    if (st == MC_ERR_CANCELED)
        ck_assert_int_eq(mc_exist(g_c, "c/0"), 0);
    mc_op_free(op);
    ck_assert_int_eq(mc_put(g_c, "c/1", g_pool, MIB, NULL), 0); /* the agent goes on */
    stop();
}
END_TEST

/* a get into device memory canceled while its answer is held back: final, and the buffer
 * is not written after that */
START_TEST(test_devbuf_cancel_get_no_late_write)
{
    static const char *const held[] = {"--test-fault", "get_delay_ms=300", NULL};
    uint8_t *dst, snap[4096];
    mc_op_t *op;
    int st;

    start(held);
    dst = g_pool + 16 * MIB;
    t_fill(g_pool, 2 * MIB, 21);
    ck_assert_int_eq(mc_put(g_c, "g/0", g_pool, 2 * MIB, NULL), 0);
    memset(dst, 0xaa, 2 * MIB);
    ck_assert_int_eq(mc_get_async(g_c, "g/0", dst, 2 * MIB, &op), 0);
    ck_assert_int_eq(mc_cancel(op), 0);
    st = mc_wait(op, -1, NULL);
    ck_assert_msg(st == MC_ERR_CANCELED || st == 0, "status %d", st);
    memcpy(snap, dst, sizeof(snap));
    usleep(600000); /* past the held answer */
    mc_client_poll(g_c);
    ck_assert(memcmp(snap, dst, sizeof(snap)) == 0);
    mc_op_free(op);
    stop();
}
END_TEST

/* device memory legacy IPC cannot export (CUDA VMM, PyTorch's expandable segments): puts
 * are staged by libmc through a host copy and each is counted in the client's stats
 * (dev_staged_puts), never silently slow; nothing is exported; gets into it work as ever */
START_TEST(test_devbuf_vmm_staged)
{
    static const size_t sizes[] = {1, 4000, MIB + 1, 5 * MIB + 17};
    static const mc_put_opts_t tiers[2] = {{.flags = 0}, {.flags = MC_PUT_TIER_GPU}};
    const char *keys[3] = {"vb/0", "vb/1", "vb/2"};
    const void *bufs[3];
    size_t lens[3], len;
    json_int_t staged = 0;
    uint8_t *vmm, *host;
    uint64_t v;
    int res[3];
    mc_op_t *op;

    start(plain);
    ck_assert_int_eq(t_stat(g_c, "dev_staged_puts"), 0);
    ck_assert_int_eq(mc_dev_alloc_vmm(g_dev, 16 * MIB, &v), 0);
    vmm = (uint8_t *)(uintptr_t)v;
    host = malloc(8 * MIB);
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            uint8_t *src = vmm + 4096 * i + 11; /* sub-allocated */
            uint8_t *dst = g_pool + 24 * MIB + 3;
            char key[32];

            t_fill(src, sizes[i], 900 + i + 10 * (size_t)t);
            snprintf(key, sizeof(key), "v/%d/%zu", t, i);
            ck_assert_int_eq(mc_put(g_c, key, src, sizes[i], &tiers[t]), 0);
            ck_assert_int_eq(t_stat(g_c, "dev_staged_puts"), ++staged);
            memset(dst, 0xee, sizes[i]);
            ck_assert_int_eq(mc_get(g_c, key, dst, sizes[i], &len), 0);
            ck_assert_uint_eq(len, sizes[i]);
            ck_assert(memcmp(src, dst, sizes[i]) == 0);
            /* and into the VMM memory itself */
            ck_assert_int_eq(mc_get(g_c, key, vmm + 8 * MIB + 5, sizes[i], &len), 0);
            ck_assert(memcmp(src, vmm + 8 * MIB + 5, sizes[i]) == 0);
            ck_assert_int_eq(mc_get(g_c, key, host, sizes[i], &len), 0);
            ck_assert(memcmp(src, host, sizes[i]) == 0);
        }
    }
    /* batch and async forms */
    for (int i = 0; i < 3; i++) {
        lens[i] = (size_t)(i + 1) * 300007;
        bufs[i] = vmm + (size_t)i * 2 * MIB;
        t_fill((uint8_t *)bufs[i], lens[i], 70 + (uint64_t)i);
    }
    ck_assert_int_eq(mc_batch_put(g_c, 3, keys, bufs, lens, NULL, res), 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(res[i], 0);
        ck_assert_int_eq(mc_get(g_c, keys[i], host, lens[i], &len), 0);
        ck_assert(memcmp(bufs[i], host, lens[i]) == 0);
    }
    staged += 3;
    ck_assert_int_eq(mc_put_async(g_c, "va/0", bufs[2], lens[2], NULL, &op), 0);
    ck_assert_int_eq(mc_wait(op, -1, &len), 0);
    mc_op_free(op);
    ck_assert_int_eq(mc_get(g_c, "va/0", host, lens[2], &len), 0);
    ck_assert(memcmp(bufs[2], host, lens[2]) == 0);
    ck_assert_int_eq(t_stat(g_c, "dev_staged_puts"), staged + 1);
    /* none of it went to the agent as a device buffer */
    ck_assert_int_eq(t_stat(g_c, "dev_buffers_imported"), 0);
    ck_assert_int_eq(t_stat(g_c, "dev_buffers_refused"), 0);
    free(host);
    mc_dev_free(g_dev, v);
    stop();
}
END_TEST

/* a client killed while the agent copies from its device buffer: the agent waits the copy
 * out, closes the import, revokes the put and gives the space back */
START_TEST(test_devbuf_client_killed_mid_copy)
{
    static const char *const slow[] = {"--set", "gpu_test_delay_us=100000", NULL};
    json_int_t used = -1;
    pid_t pid;
    int st;

    start(slow);
    pid = fork();
    ck_assert_int_ne(pid, -1);
    if (pid == 0) {
        mc_client_t *c;
        mc_op_t *op;

        if (mc_connect(g_agent.sock, &c) != 0)
            _exit(2);
        t_fill(g_pool, 8 * MIB, 4);
        if (mc_put_async(c, "k/0", g_pool, 8 * MIB, NULL, &op) != 0)
            _exit(3);
        pause(); /* killed here, with device copies under way */
        _exit(4);
    }
    /* wait until the child's buffer is imported and a copy ran, then kill it */
    for (int i = 0; i < 200 && t_stat(g_c, "dev_copies") == 0; i++)
        usleep(20000);
    ck_assert_int_gt(t_stat(g_c, "dev_copies"), 0);
    kill(pid, SIGKILL);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    for (int i = 0; i < 250; i++) {
        used = t_stat(g_c, "used_bytes");
        if (used == 0 && t_stat(g_c, "dev_buffers_open") == 0)
            break;
        usleep(20000);
    }
    ck_assert_int_eq(t_stat(g_c, "dev_buffers_open"), 0);
    ck_assert_int_eq(used, 0);
    ck_assert_int_eq(mc_exist(g_c, "k/0"), 0);
    stop();
}
END_TEST

int main(void)
{
    Suite *su = suite_create("gpu_devbuf");
    TCase *tc = tcase_create("gpu_devbuf");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_devbuf_put_get_sizes);
    tcase_add_test(tc, test_devbuf_batch_and_async);
    tcase_add_test(tc, test_devbuf_copy_failure);
    tcase_add_test(tc, test_devbuf_cancel_put_in_flight);
    tcase_add_test(tc, test_devbuf_cancel_get_no_late_write);
    tcase_add_test(tc, test_devbuf_client_killed_mid_copy);
    tcase_add_test(tc, test_devbuf_vmm_staged);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
