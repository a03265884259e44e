/*
 * Integration tests of libmc's async ops against the real mc-agent: wait (blocking, polling,
 * a final status returned again), cancel, op_free of an unfinished op, eventfd readiness
 * (poll()) and its draining after an op freed unfinished (mc_client_poll), large puts from
 * plain memory (the user-memory path and the staging fallback, MC_CLIENT_NO_USER_COPY=1),
 * and threads sharing a client through batches and async ops.
 * Slow answers come from the agent's test-only --test-fault get_delay_ms.
 */
#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc.h>

#include "t_agent.h"
#include "t_util.h"

static struct t_agent g_agent;
static mc_client_t *g_c;

static void setup(void)
{
    t_agent_start(&g_agent, "256M", NULL);
    g_c = t_connect(&g_agent);
}

/* GET answers held back 300 ms: ops stay in flight long enough to look at them. */
static void setup_slow(void)
{
    static const char *const extra[] = {"--test-fault", "get_delay_ms=300", NULL};

    t_agent_start(&g_agent, "256M", extra);
    g_c = t_connect(&g_agent);
}

static void teardown(void)
{
    t_client_and_agent_stop(&g_agent, &g_c);
}

START_TEST(test_async_put_get_wait)
{
    const size_t sizes[3] = {100, 3 * MIB + 1, 20 * MIB};
    mc_op_t *op;
    size_t len;

    for (int i = 0; i < 3; i++) {
        uint8_t *in = t_alloc_filled(sizes[i], 300 + (uint64_t)i);
        uint8_t *out = malloc(sizes[i]);
        char key[32];

        snprintf(key, sizeof(key), "a/%d", i);
        ck_assert_int_eq(mc_put_async(g_c, key, in, sizes[i], NULL, &op), 0);
        len = 0;
        ck_assert_int_eq(mc_wait(op, -1, &len), 0);
        ck_assert_uint_eq(len, sizes[i]);
        /* final: the same status again, at once */
        len = 0;
        ck_assert_int_eq(mc_wait(op, 0, &len), 0);
        ck_assert_uint_eq(len, sizes[i]);
        mc_op_free(op);

        ck_assert_int_eq(mc_get_async(g_c, key, out, sizes[i], &op), 0);
        ck_assert_int_eq(mc_wait(op, 10000, &len), 0);
        ck_assert_uint_eq(len, sizes[i]);
        ck_assert(memcmp(in, out, sizes[i]) == 0);
        mc_op_free(op);
        free(in);
        free(out);
    }
    /* errors come from mc_wait */
    ck_assert_int_eq(mc_get_async(g_c, "nope", NULL, 0, &op), 0);
    ck_assert_int_eq(mc_wait(op, -1, NULL), MC_ERR_NOT_FOUND);
    mc_op_free(op);
    ck_assert_int_eq(mc_get_async(g_c, "a/0", NULL, 0, &op), 0);
    ck_assert_int_eq(mc_wait(op, -1, &len), MC_ERR_TOO_LARGE);
    ck_assert_uint_eq(len, 100);
    mc_op_free(op);
    /* argument errors at submission */
    ck_assert_int_eq(mc_get_async(g_c, "", NULL, 0, &op), MC_ERR_INVALID);
    ck_assert_int_eq(mc_put_async(g_c, "k", NULL, 1, NULL, &op), MC_ERR_INVALID);
    ck_assert_int_eq(mc_wait(NULL, 0, NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_cancel(NULL), MC_ERR_INVALID);
    mc_op_free(NULL);
}
END_TEST

START_TEST(test_async_wait_inprogress_then_cancel)
{
    uint8_t in[1000], out[1000];
    mc_op_t *op;
    size_t len = 7;

    t_fill(in, sizeof(in), 5);
    ck_assert_int_eq(mc_put(g_c, "slow", in, sizeof(in), NULL), 0);
    ck_assert_int_eq(mc_get_async(g_c, "slow", out, sizeof(out), &op), 0);
    ck_assert_int_eq(mc_wait(op, 0, &len), MC_INPROGRESS);
    ck_assert_int_eq(mc_wait(op, 50, &len), MC_INPROGRESS);
    ck_assert_uint_eq(len, 7); /* untouched while not final */
    ck_assert_int_eq(mc_cancel(op), 0);
    ck_assert_int_eq(mc_cancel(op), 0); /* twice changes nothing */
    ck_assert_int_eq(mc_wait(op, -1, &len), MC_ERR_CANCELED);
    ck_assert_int_eq(mc_wait(op, 0, &len), MC_ERR_CANCELED);
    ck_assert_uint_eq(len, 7);
    mc_op_free(op);

    /* an op that finished first keeps its status */
    ck_assert_int_eq(mc_get_async(g_c, "slow", out, sizeof(out), &op), 0);
    ck_assert_int_eq(mc_wait(op, -1, &len), 0);
    ck_assert_int_eq(mc_cancel(op), 0);
    ck_assert_int_eq(mc_wait(op, 0, &len), 0);
    ck_assert(memcmp(in, out, sizeof(in)) == 0);
    mc_op_free(op);
    /* the client is still fine */
    ck_assert_int_eq(mc_exist(g_c, "slow"), 1);
}
END_TEST

START_TEST(test_async_op_free_unfinished)
{
    uint8_t in[5000];
    uint8_t *out = malloc(sizeof(in));
    mc_op_t *ops[20];

    t_fill(in, sizeof(in), 6);
    ck_assert_int_eq(mc_put(g_c, "f", in, sizeof(in), NULL), 0);
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(mc_get_async(g_c, "f", out, sizeof(in), &ops[i]), 0);
        mc_op_free(ops[i]); /* canceled and detached */
    }
    /* the detached ops end in libmc; later ops work */
    ck_assert_int_eq(mc_get(g_c, "f", out, sizeof(in), NULL), 0);
    ck_assert(memcmp(in, out, sizeof(in)) == 0);
    /* and one freed while mc_close waits for it */
    ck_assert_int_eq(mc_get_async(g_c, "f", out, sizeof(in), &ops[0]), 0);
    mc_op_free(ops[0]);
    mc_close(g_c);
    g_c = NULL;
    free(out);
}
END_TEST

START_TEST(test_async_eventfd_readiness)
{
    uint8_t in[2000], out[2000];
    struct pollfd p;
    mc_op_t *op;
    size_t len;
    int fd, rc, st = MC_INPROGRESS;
    uint64_t t0;

    fd = mc_client_eventfd(g_c);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(mc_client_eventfd(g_c), fd); /* the same one */
    ck_assert_int_eq(mc_client_eventfd(NULL), MC_ERR_INVALID);
    t_fill(in, sizeof(in), 8);
    ck_assert_int_eq(mc_put(g_c, "e", in, sizeof(in), NULL), 0);

    ck_assert_int_eq(mc_get_async(g_c, "e", out, sizeof(out), &op), 0);
    /* an event loop: poll the fd, then check the op without waiting */
    t0 = t_now_ms();
    while (st == MC_INPROGRESS) {
        ck_assert_msg(t_now_ms() - t0 < 5000, "no completion after 5 s");
        p.fd = fd;
        p.events = POLLIN;
        p.revents = 0;
        rc = poll(&p, 1, 5000);
        ck_assert_int_eq(rc, 1);
        ck_assert(p.revents & POLLIN);
        st = mc_wait(op, 0, &len);
    }
    ck_assert_int_eq(st, 0);
    ck_assert_uint_ge(t_now_ms() - t0, 200); /* the agent held the answer 300 ms */
    ck_assert(memcmp(in, out, sizeof(in)) == 0);
    mc_op_free(op);
    /* nothing outstanding: drained once a check reaped what was there */
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    rc = poll(&p, 1, 0);
    ck_assert_msg(rc == 0, "eventfd still readable with nothing to reap");
}
END_TEST

/* An op freed unfinished makes the eventfd readable when its answer lands, with no op
 * left to mc_wait on: one mc_client_poll reaps it and empties the descriptor, so an event
 * loop on it does not spin. */
START_TEST(test_async_eventfd_freed_op_drained)
{
    uint8_t out[64];
    struct pollfd p;
    mc_op_t *op;
    int fd;

    fd = mc_client_eventfd(g_c);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(mc_get_async(g_c, "absent", out, sizeof(out), &op), 0);
    mc_op_free(op);
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    ck_assert_int_eq(poll(&p, 1, 5000), 1); /* its answer landed */
    ck_assert_int_eq(mc_client_poll(g_c), 0);
    p.revents = 0;
    ck_assert_msg(poll(&p, 1, 200) == 0, "eventfd still readable after mc_client_poll");
    ck_assert_int_eq(mc_client_poll(NULL), MC_ERR_INVALID);
    /* the client is fine */
    ck_assert_int_eq(mc_exist(g_c, "absent"), 0);
}
END_TEST

/* A put larger than a staging slot from plain memory: the agent reads it itself. */
START_TEST(test_async_large_put_user_memory)
{
    const size_t len = 24 * MIB + 3;
    uint8_t *in = t_alloc_filled(len, 9);
    uint8_t *out = malloc(len);
    size_t got;

    ck_assert_int_eq(mc_put(g_c, "user/big", in, len, NULL), 0);
    ck_assert_int_eq(mc_get(g_c, "user/big", out, len, &got), 0);
    ck_assert_uint_eq(got, len);
    ck_assert(memcmp(in, out, len) == 0);
    free(in);
    free(out);
}
END_TEST

/* The same with the user-memory path disabled (as after the agent's MC_ERR_DENIED). */
START_TEST(test_async_large_put_staging_fallback)
{
    const size_t len = 5 * MIB + 11;
    uint8_t *in = t_alloc_filled(len, 10);
    uint8_t *out = malloc(len);
    mc_client_t *c;
    mc_op_t *op;
    size_t got;

    setenv("MC_CLIENT_NO_USER_COPY", "1", 1);
    c = t_connect(&g_agent);
    unsetenv("MC_CLIENT_NO_USER_COPY");
    ck_assert_int_eq(mc_put(c, "stg/big", in, len, NULL), 0);
    ck_assert_int_eq(mc_put_async(c, "stg/big2", in, len, NULL, &op), 0);
    ck_assert_int_eq(mc_wait(op, -1, NULL), 0);
    mc_op_free(op);
    ck_assert_int_eq(mc_get(c, "stg/big", out, len, &got), 0);
    ck_assert(memcmp(in, out, len) == 0);
    ck_assert_int_eq(mc_get(c, "stg/big2", out, len, &got), 0);
    ck_assert(memcmp(in, out, len) == 0);
    mc_close(c);
    free(in);
    free(out);
}
END_TEST

/* --- threads sharing one client --------------------------------------------------------- */

#define T_THREADS 6
#define T_ITEMS   40

static void *mixed_worker(void *arg)
{
    long t = (long)arg;
    char names[T_ITEMS][32];
    const char *keys[T_ITEMS];
    const void *bufs[T_ITEMS];
    void *outs[T_ITEMS];
    size_t lens[T_ITEMS], got[T_ITEMS];
    int res[T_ITEMS];
    mc_op_t *ops[T_ITEMS];
    long bad = 0;

    for (int i = 0; i < T_ITEMS; i++) {
        snprintf(names[i], sizeof(names[i]), "t%ld/%d", t, i);
        keys[i] = names[i];
        lens[i] = (i % 7 == 0) ? 2 * MIB + (size_t)i : 500 + 37 * (size_t)i;
        bufs[i] = t_alloc_filled(lens[i], (uint64_t)(t * 1000 + i));
        outs[i] = malloc(lens[i]);
    }
    /* half by batch, half async */
    if (mc_batch_put(g_c, T_ITEMS / 2, keys, bufs, lens, NULL, res) != T_ITEMS / 2)
        bad++;
    for (int i = T_ITEMS / 2; i < T_ITEMS; i++) {
        if (mc_put_async(g_c, keys[i], bufs[i], lens[i], NULL, &ops[i]) != 0)
            bad++;
    }
    for (int i = T_ITEMS / 2; i < T_ITEMS; i++) {
        if (mc_wait(ops[i], -1, NULL) != 0)
            bad++;
        mc_op_free(ops[i]);
    }
    for (int i = 0; i < T_ITEMS / 2; i++) {
        if (mc_get_async(g_c, keys[i], outs[i], lens[i], &ops[i]) != 0)
            bad++;
    }
    if (mc_batch_get(g_c, T_ITEMS / 2, keys + T_ITEMS / 2, outs + T_ITEMS / 2,
                     lens + T_ITEMS / 2, got + T_ITEMS / 2, res) != T_ITEMS / 2)
        bad++;
    for (int i = 0; i < T_ITEMS / 2; i++) {
        if (mc_wait(ops[i], -1, NULL) != 0)
            bad++;
        mc_op_free(ops[i]);
    }
    for (int i = 0; i < T_ITEMS; i++) {
        if (!t_check_fill(outs[i], lens[i], (uint64_t)(t * 1000 + i)))
            bad++;
        free((void *)bufs[i]);
        free(outs[i]);
    }
    return (void *)bad;
}

START_TEST(test_async_threads_batch_and_async)
{
    pthread_t th[T_THREADS];
    void *bad;

    for (long t = 0; t < T_THREADS; t++)
        ck_assert_int_eq(pthread_create(&th[t], NULL, mixed_worker, (void *)t), 0);
    for (int t = 0; t < T_THREADS; t++) {
        ck_assert_int_eq(pthread_join(th[t], &bad), 0);
        ck_assert_msg(bad == NULL, "thread %d: %ld failures", t, (long)bad);
    }
}
END_TEST

static Suite *async_suite(void)
{
    Suite *s = suite_create("integration");
    TCase *tc = tcase_create("async");
    TCase *ts = tcase_create("async_slow");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_async_put_get_wait);
    tcase_add_test(tc, test_async_large_put_user_memory);
    tcase_add_test(tc, test_async_large_put_staging_fallback);
    tcase_add_test(tc, test_async_threads_batch_and_async);
    suite_add_tcase(s, tc);

    tcase_add_checked_fixture(ts, setup_slow, teardown);
    tcase_set_timeout(ts, 60);
    tcase_add_test(ts, test_async_wait_inprogress_then_cancel);
    tcase_add_test(ts, test_async_op_free_unfinished);
    tcase_add_test(ts, test_async_eventfd_readiness);
    tcase_add_test(ts, test_async_eventfd_freed_op_drained);
    suite_add_tcase(s, ts);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(async_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
