/*
 * Integration tests of libmc's arenas against the real mc-agent: zero-copy puts from any
 * address inside an arena (odd offsets, objects in one PUT and in pieces), gets into arena
 * memory, growth by whole arenas, mc_buf_free's checks, and the failure-contract row
 * "buffer freed early" (test_fault_buf_free_while_in_use_busy), also for ops freed unfinished,
 * whose buffer mc_buf_free itself reaps free.
 */
#include <check.h>
#include <signal.h>
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
    t_agent_start(&g_agent, "512M", NULL);
    g_c = t_connect(&g_agent);
}

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

START_TEST(test_arena_odd_offsets_round_trip)
{
    const size_t offs[] = {0, 1, 7, 4097, MIB + 3, 5 * MIB + 63};
    const size_t lens[] = {1, 100, 3 * MIB + 5, 70 * MIB + 9};
    const size_t area = 80 * MIB;
    uint8_t *a, *out;
    size_t got;
    char key[64];
    uint64_t seed = 1;

    ck_assert_int_eq(mc_buf_alloc(g_c, area, (void **)&a), 0);
    ck_assert_int_eq((uintptr_t)a % 64, 0);
    out = malloc(area);
    for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
        for (size_t j = 0; j < sizeof(lens) / sizeof(lens[0]); j++, seed++) {
            if (offs[i] + lens[j] > area)
                continue;
            snprintf(key, sizeof(key), "arena/%zu/%zu", offs[i], lens[j]);
            t_fill(a + offs[i], lens[j], seed);
            ck_assert_msg(mc_put(g_c, key, a + offs[i], lens[j], NULL) == 0, "%s", key);
            ck_assert_int_eq(mc_get(g_c, key, out, area, &got), 0);
            ck_assert_uint_eq(got, lens[j]);
            ck_assert_msg(t_check_fill(out, lens[j], seed), "%s read back wrong", key);
            /* and into arena memory, at an odd offset too */
            memset(a + offs[i], 0, lens[j]);
            ck_assert_int_eq(mc_get(g_c, key, a + offs[i], lens[j], &got), 0);
            ck_assert_msg(t_check_fill(a + offs[i], lens[j], seed), "%s into arena", key);
        }
    }
    ck_assert_int_eq(mc_buf_free(g_c, a), 0);
    free(out);
}
END_TEST

START_TEST(test_arena_async_and_batch_puts)
{
    enum { N = 8 };
    uint8_t *a;
    const char *keys[N] = {"ab/0", "ab/1", "ab/2", "ab/3", "ab/4", "ab/5", "ab/6", "ab/7"};
    const void *bufs[N];
    void *outs[N];
    size_t lens[N], got[N];
    int res[N];
    mc_op_t *op;
    size_t off = 3;

    ck_assert_int_eq(mc_buf_alloc(g_c, 16 * MIB, (void **)&a), 0);
    for (int i = 0; i < N; i++) {
        lens[i] = (size_t)(i + 1) * 100000 + 1;
        t_fill(a + off, lens[i], 50 + (uint64_t)i);
        bufs[i] = a + off;
        outs[i] = malloc(lens[i]);
        off += lens[i] + 1;
    }
    ck_assert_int_eq(mc_batch_put(g_c, N, keys, bufs, lens, NULL, res), N);
    ck_assert_int_eq(mc_batch_get(g_c, N, keys, outs, lens, got, res), N);
    for (int i = 0; i < N; i++)
        ck_assert(t_check_fill(outs[i], lens[i], 50 + (uint64_t)i));
    ck_assert_int_eq(mc_put_async(g_c, "ab/async", a + 1, 2 * MIB, NULL, &op), 0);
    ck_assert_int_eq(mc_wait(op, -1, NULL), 0);
    mc_op_free(op);
    ck_assert_int_eq(mc_exist(g_c, "ab/async"), 1);
    for (int i = 0; i < N; i++)
        free(outs[i]);
    ck_assert_int_eq(mc_buf_free(g_c, a), 0);
}
END_TEST

START_TEST(test_arena_alloc_free_rules)
{
    void *p, *q, *r, *big;

    ck_assert_int_eq(mc_buf_alloc(g_c, 0, &p), MC_ERR_INVALID);
    ck_assert_int_eq(mc_buf_alloc(NULL, 10, &p), MC_ERR_INVALID);
    ck_assert_int_eq(mc_buf_alloc(g_c, 10, NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_buf_alloc(g_c, 10, &p), 0);
    ck_assert_int_eq(mc_buf_alloc(g_c, 1000, &q), 0);
    ck_assert_ptr_ne(p, q);
    ck_assert_int_eq((uintptr_t)q % 64, 0);
    ck_assert_int_eq(mc_buf_free(g_c, (uint8_t *)q + 1), MC_ERR_INVALID); /* inside */
    ck_assert_int_eq(mc_buf_free(g_c, q), 0);
    ck_assert_int_eq(mc_buf_free(g_c, q), MC_ERR_INVALID); /* twice */
    ck_assert_int_eq(mc_buf_free(g_c, NULL), 0);
    ck_assert_int_eq(mc_buf_free(g_c, &r), MC_ERR_INVALID); /* not arena memory */
    /* larger than an arena: one of its own; and it works */
    ck_assert_int_eq(mc_buf_alloc(g_c, 100 * MIB, &big), 0);
    t_fill(big, 100 * MIB, 77);
    ck_assert_int_eq(mc_put(g_c, "huge", big, 100 * MIB, NULL), 0);
    ck_assert_int_eq(mc_buf_free(g_c, big), 0);
    ck_assert_int_eq(mc_buf_alloc(g_c, 1000, &r), 0); /* reuses freed space */
    ck_assert_int_eq(mc_buf_free(g_c, r), 0);
    ck_assert_int_eq(mc_buf_free(g_c, p), 0);
}
END_TEST

/* docs/failure-contract.md "buffer freed early": MC_ERR_BUSY until mc_wait reported the op final. */
START_TEST(test_fault_buf_free_while_in_use_busy)
{
    const size_t len = 8 * MIB;
    uint8_t *a;
    mc_op_t *op;

    ck_assert_int_eq(mc_buf_alloc(g_c, len, (void **)&a), 0);
    t_fill(a, len, 90);
    ck_assert_int_eq(mc_put_async(g_c, "busy", a + 5, len - 5, NULL, &op), 0);
    ck_assert_int_eq(mc_buf_free(g_c, a), MC_ERR_BUSY);
    /* final inside libmc or not: busy until mc_wait has said so */
    while (mc_wait(op, 0, NULL) == MC_INPROGRESS)
        ck_assert_int_eq(mc_buf_free(g_c, a), MC_ERR_BUSY);
    ck_assert_int_eq(mc_wait(op, -1, NULL), 0);
    ck_assert_int_eq(mc_buf_free(g_c, a), 0);
    mc_op_free(op);
}
END_TEST

/* A get into arena memory: busy until final; freed unfinished, busy until it ends. */
START_TEST(test_fault_buf_free_get_in_flight_busy)
{
    uint8_t in[4096];
    uint8_t *a;
    mc_op_t *op;
    uint64_t t0;

    t_fill(in, sizeof(in), 91);
    ck_assert_int_eq(mc_put(g_c, "g", in, sizeof(in), NULL), 0);
    ck_assert_int_eq(mc_buf_alloc(g_c, sizeof(in), (void **)&a), 0);
    ck_assert_int_eq(mc_get_async(g_c, "g", a, sizeof(in), &op), 0);
    ck_assert_int_eq(mc_buf_free(g_c, a), MC_ERR_BUSY);
    ck_assert_int_eq(mc_wait(op, -1, NULL), 0);
    ck_assert(memcmp(a, in, sizeof(in)) == 0);
    ck_assert_int_eq(mc_get_async(g_c, "g", a, sizeof(in), &op), 0);
    mc_op_free(op); /* detached: the agent holds the answer 300 ms */
    ck_assert_int_eq(mc_buf_free(g_c, a), MC_ERR_BUSY);
    t0 = t_now_ms();
    while (mc_buf_free(g_c, a) == MC_ERR_BUSY) {
        ck_assert_msg(t_now_ms() - t0 < 5000, "still busy after 5 s");
        /* somebody must reap: a sync call does, for every thread */
        (void)mc_exist(g_c, "g");
        t_poll_pause();
    }
}
END_TEST

/* An op freed unfinished: mc_buf_free alone reaps its completion (no other call on the
 * client), for a get into the buffer and for a put from it. */
START_TEST(test_fault_buf_free_reaps_freed_ops)
{
    const size_t len = 16 * MIB;
    uint8_t *a, *b;
    mc_op_t *op;
    uint64_t t0;
    int err;

    ck_assert_int_eq(mc_buf_alloc(g_c, len, (void **)&a), 0);
    ck_assert_int_eq(mc_buf_alloc(g_c, len, (void **)&b), 0);
    t_fill(b, len, 92);
    ck_assert_int_eq(mc_put(g_c, "big", b, len, NULL), 0);

    ck_assert_int_eq(mc_get_async(g_c, "big", a, len, &op), 0);
    mc_op_free(op); /* detached: the agent holds the answer 300 ms */
    ck_assert_int_eq(mc_buf_free(g_c, a), MC_ERR_BUSY);
    t0 = t_now_ms();
    while ((err = mc_buf_free(g_c, a)) == MC_ERR_BUSY) {
        ck_assert_msg(t_now_ms() - t0 < 3000, "freed get: buffer still busy after 3 s");
        t_poll_pause();
    }
    ck_assert_int_eq(err, 0);

    ck_assert_int_eq(mc_put_async(g_c, "big2", b, len, NULL, &op), 0);
    mc_op_free(op);
    t0 = t_now_ms();
    while ((err = mc_buf_free(g_c, b)) == MC_ERR_BUSY) {
        ck_assert_msg(t_now_ms() - t0 < 3000, "freed put: buffer still busy after 3 s");
        t_poll_pause();
    }
    ck_assert_int_eq(err, 0);
}
END_TEST

/* A frozen agent never answers a freed get: its buffer stays busy while the answer may
 * still come, and comes free through mc_buf_free alone once the deadline and
 * MC_DEADLINE_GRACE_MS passed. */
START_TEST(test_fault_buf_free_frozen_agent_after_grace)
{
    const size_t len = 16 * MIB;
    mc_client_t *c;
    mc_op_t *op;
    uint8_t *a;
    uint64_t t0, took;
    int err;

    setenv("MC_OP_TIMEOUT_MS", "300", 1);
    ck_assert_int_eq(mc_connect(g_agent.sock, &c), 0);
    unsetenv("MC_OP_TIMEOUT_MS");
    ck_assert_int_eq(mc_buf_alloc(c, len, (void **)&a), 0);
    kill(g_agent.pid, SIGSTOP);
    t0 = t_now_ms();
    ck_assert_int_eq(mc_get_async(c, "frozen", a, len, &op), 0);
    mc_op_free(op);
    ck_assert_int_eq(mc_buf_free(c, a), MC_ERR_BUSY);
    while ((err = mc_buf_free(c, a)) == MC_ERR_BUSY) {
        if (t_now_ms() - t0 > 300 + MC_DEADLINE_GRACE_MS + 2000) {
            kill(g_agent.pid, SIGCONT);
            ck_abort_msg("buffer still busy %d ms after the deadline and grace", 2000);
        }
        t_poll_pause();
    }
    took = t_now_ms() - t0;
    kill(g_agent.pid, SIGCONT);
    ck_assert_int_eq(err, 0);
    ck_assert_msg(took >= 300 + MC_DEADLINE_GRACE_MS - 50, "freed after %llu ms only",
                  (unsigned long long)took);
    mc_close(c);
}
END_TEST

static Suite *arena_suite(void)
{
    Suite *s = suite_create("integration");
    TCase *tc = tcase_create("arena");
    TCase *ts = tcase_create("arena_slow");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_arena_odd_offsets_round_trip);
    tcase_add_test(tc, test_arena_async_and_batch_puts);
    tcase_add_test(tc, test_arena_alloc_free_rules);
    tcase_add_test(tc, test_fault_buf_free_while_in_use_busy);
    suite_add_tcase(s, tc);

    tcase_add_checked_fixture(ts, setup_slow, teardown);
    tcase_set_timeout(ts, 60);
    tcase_add_test(ts, test_fault_buf_free_get_in_flight_busy);
    tcase_add_test(ts, test_fault_buf_free_reaps_freed_ops);
    tcase_add_test(ts, test_fault_buf_free_frozen_agent_after_grace);
    suite_add_tcase(s, ts);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(arena_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
