/*
 * Integration tests of pins and touches (mc_prefix_pin, mc_unpin, mc_touch) and of batch
 * puts' per-key reports (MC_PUT_EXISTS_OK) against the real mc-agent: a pin counts leading
 * hits like mc_prefix_match, keeps its objects from eviction while everything else goes, and
 * ends with mc_unpin, with the connection (mc_close, or kill -9 of the pinning process: the
 * "fault" case, run in the fault suite) and at pin_ttl_ms. Also the public forms of mcctl's
 * calls that the Python package needs (mc_list, mc_remove_prefix, mc_stats).
 *
 * The pool is small (16 MiB) and objects 1 MiB, so a few dozen puts force eviction.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mc/mc.h>

#include "../lib/t_time.h"
#include "t_agent.h"
#include "t_util.h"

#define OBJ (1u << 20)
#define NPIN 4

static struct t_agent g_agent;
static mc_client_t *g_c;
static uint8_t *g_buf;

static void start(const char *const *extra)
{
    t_agent_start(&g_agent, "16M", extra);
    g_c = t_connect(&g_agent);
    g_buf = t_alloc_filled(OBJ, 7);
}

static void setup(void)
{
    start(NULL);
}

static void setup_short_ttl(void)
{
    static const char *const extra[] = {"--set", "pin_ttl_ms=300", NULL};

    start(extra);
}

static void teardown(void)
{
    t_client_and_agent_stop(&g_agent, &g_c);
    free(g_buf);
}

static void put_named(mc_client_t *c, const char *prefix, int i)
{
    char key[64];
    int rc;

    snprintf(key, sizeof(key), "%s/%d", prefix, i);
    rc = mc_put(c, key, g_buf, OBJ, NULL);
    ck_assert_msg(rc == 0 || rc == MC_ERR_EXISTS, "put %s: %s", key, mc_strerror(rc));
}

/* The pinned set: p/0 .. p/NPIN-1. */
static void pinned_keys(char names[NPIN][16], const char *keys[NPIN])
{
    for (int i = 0; i < NPIN; i++) {
        snprintf(names[i], 16, "p/%d", i);
        keys[i] = names[i];
    }
}

/* Puts `n` fresh 1 MiB objects: far more than the pool holds, so every unpinned object
 * written before is evicted. */
static void churn(mc_client_t *c, int n)
{
    static int next;

    for (int i = 0; i < n; i++)
        put_named(c, "churn", next++);
}

static int present(mc_client_t *c, const char *const keys[NPIN])
{
    int res[NPIN], n = 0;

    ck_assert_int_eq(mc_batch_exist(c, NPIN, keys, res), NPIN);
    for (int i = 0; i < NPIN; i++)
        n += res[i];
    return n;
}

START_TEST(test_pin_counts_leading_hits)
{
    const char *keys[5] = {"l/0", "l/1", "l/2", "l/3", "l/4"};
    mc_pin_t pin = 0, pin2 = 0;

    for (int i = 0; i < 5; i++) {
        if (i != 2)
            ck_assert_int_eq(mc_put(g_c, keys[i], g_buf, 100, NULL), 0);
    }
    ck_assert_int_eq(mc_prefix_match(g_c, 5, keys), 2);
    ck_assert_int_eq(mc_prefix_pin(g_c, 5, keys, &pin), 2);
    ck_assert(pin != 0);
    /* a second pin of the same keys is a pin of its own */
    ck_assert_int_eq(mc_prefix_pin(g_c, 2, keys, &pin2), 2);
    ck_assert(pin2 != pin);
    /* the keys past the miss were given back at once: only the two leading ones held */
    ck_assert_int_eq(mc_unpin(g_c, pin), 2);
    ck_assert_int_eq(mc_unpin(g_c, pin), 0); /* released already */
    ck_assert_int_eq(mc_unpin(g_c, pin2), 2);
    /* lookups stay free of side effects */
    ck_assert_int_eq(mc_prefix_match(g_c, 5, keys), 2);
    ck_assert_int_eq(mc_prefix_match(g_c, 5, keys), 2);
    /* nothing present: k = 0, still a pin to unpin */
    {
        const char *none[2] = {"none/0", "none/1"};

        ck_assert_int_eq(mc_prefix_pin(g_c, 2, none, &pin), 0);
        ck_assert_int_eq(mc_unpin(g_c, pin), 0);
        ck_assert_int_eq(mc_prefix_pin(g_c, 0, NULL, &pin), 0);
        ck_assert_int_eq(mc_unpin(g_c, pin), 0);
    }
}
END_TEST

START_TEST(test_pin_args)
{
    const char *keys[2] = {"a/0", ""};
    mc_pin_t pin = 0;

    ck_assert_int_eq(mc_prefix_pin(NULL, 1, keys, &pin), MC_ERR_INVALID);
    ck_assert_int_eq(mc_prefix_pin(g_c, 1, keys, NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_prefix_pin(g_c, 1, NULL, &pin), MC_ERR_INVALID);
    ck_assert_int_eq(mc_prefix_pin(g_c, 2, keys, &pin), MC_ERR_INVALID);
    ck_assert(pin == 0); /* untouched */
    ck_assert_int_eq(mc_unpin(NULL, 1), MC_ERR_INVALID);
    ck_assert_int_eq(mc_unpin(g_c, 0), MC_ERR_INVALID);
    ck_assert_int_eq(mc_unpin(g_c, 12345), 0); /* never taken: nothing to release */
    ck_assert_int_eq(mc_touch(NULL, 1, keys), MC_ERR_INVALID);
    ck_assert_int_eq(mc_touch(g_c, 2, keys), MC_ERR_INVALID);
    ck_assert_int_eq(mc_touch(g_c, 0, NULL), 0);
}
END_TEST

START_TEST(test_pin_survives_eviction_until_unpin)
{
    char names[NPIN][16];
    const char *keys[NPIN];
    mc_pin_t pin;

    pinned_keys(names, keys);
    for (int i = 0; i < NPIN; i++)
        put_named(g_c, "p", i);
    ck_assert_int_eq(mc_prefix_pin(g_c, NPIN, keys, &pin), NPIN);
    churn(g_c, 48);
    ck_assert_int_eq(present(g_c, keys), NPIN);
    /* pinned objects read as usual */
    {
        uint8_t *out = malloc(OBJ);
        size_t len = 0;

        ck_assert_int_eq(mc_get(g_c, keys[0], out, OBJ, &len), 0);
        ck_assert_uint_eq(len, OBJ);
        ck_assert(t_check_fill(out, OBJ, 7));
        free(out);
    }
    ck_assert_int_eq(mc_unpin(g_c, pin), NPIN);
    churn(g_c, 48);
    ck_assert_int_eq(present(g_c, keys), 0);
}
END_TEST

/* With all but one block pinned, a put that needs two finds no victim. */
START_TEST(test_pin_everything_pinned_is_no_space)
{
    enum { N = 15 };
    char names[N][16];
    const char *keys[N];
    mc_pin_t pin;
    int held, rc;

    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "f/%d", i);
        keys[i] = names[i];
    }
    for (int i = 0; i < N; i++) {
        rc = mc_put(g_c, keys[i], g_buf, OBJ, NULL);
        if (rc != 0)
            break; /* the pool is full of pinned and unpinned objects */
    }
    held = mc_prefix_pin(g_c, N, keys, &pin);
    ck_assert_int_gt(held, 8);
    {
        uint8_t *big = t_alloc_filled(8 * OBJ, 9);

        ck_assert_int_eq(mc_put(g_c, "big", big, 8 * OBJ, NULL), MC_ERR_NO_SPACE);
        ck_assert_int_eq(mc_unpin(g_c, pin), held);
        ck_assert_int_eq(mc_put(g_c, "big", big, 8 * OBJ, NULL), 0);
        free(big);
    }
}
END_TEST

START_TEST(test_pin_ends_with_close)
{
    char names[NPIN][16];
    const char *keys[NPIN];
    mc_client_t *c2 = t_connect(&g_agent);
    mc_pin_t pin;

    pinned_keys(names, keys);
    for (int i = 0; i < NPIN; i++)
        put_named(g_c, "p", i);
    ck_assert_int_eq(mc_prefix_pin(c2, NPIN, keys, &pin), NPIN);
    churn(g_c, 48);
    ck_assert_int_eq(present(g_c, keys), NPIN);
    mc_close(c2); /* the pins go with the connection */
    churn(g_c, 48);
    ck_assert_int_eq(present(g_c, keys), 0);
}
END_TEST

START_TEST(test_pin_lapses_at_ttl)
{
    char names[NPIN][16];
    const char *keys[NPIN];
    uint64_t deadline, t0;
    mc_pin_t pin;

    pinned_keys(names, keys);
    for (int i = 0; i < NPIN; i++)
        put_named(g_c, "p", i);
    t0 = t_now_ms();
    ck_assert_int_eq(mc_prefix_pin(g_c, NPIN, keys, &pin), NPIN);
    churn(g_c, 32);
    ck_assert_int_eq(present(g_c, keys), NPIN); /* well within 300 ms on any host */
    /* past the TTL, churn evicts them; poll with a deadline rather than sleep */
    deadline = t_now_ms() + 10000;
    while (present(g_c, keys) > 0 && t_now_ms() < deadline)
        churn(g_c, 4);
    ck_assert_int_eq(present(g_c, keys), 0);
    /* the master ends a pin on its 10 ms tick, the agent's record at the ms: once both are
     * surely past, the pin holds nothing */
    while (t_now_ms() < t0 + 300 + 30)
        t_poll_pause();
    ck_assert_int_eq(mc_unpin(g_c, pin), 0); /* lapsed: nothing left to release */
}
END_TEST

START_TEST(test_pin_released_when_process_killed)
{
    char names[NPIN][16];
    const char *keys[NPIN];
    int fds[2], status;
    char ok = 0;
    pid_t pid;

    pinned_keys(names, keys);
    for (int i = 0; i < NPIN; i++)
        put_named(g_c, "p", i);
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        mc_client_t *c;
        mc_pin_t pin;
        char one = 1;

        close(fds[0]);
        if (mc_connect(g_agent.sock, &c) != 0 || mc_prefix_pin(c, NPIN, keys, &pin) != NPIN)
            _exit(1);
        if (write(fds[1], &one, 1) != 1)
            _exit(1);
        for (;;)
            pause(); /* holds its pins until killed */
    }
    close(fds[1]);
    ck_assert_int_eq(read(fds[0], &ok, 1), 1);
    close(fds[0]);
    churn(g_c, 48);
    ck_assert_int_eq(present(g_c, keys), NPIN);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    /* the agent sees the connection end and releases the pins; poll for it */
    {
        uint64_t deadline = t_now_ms() + 10000;

        do
            churn(g_c, 8);
        while (present(g_c, keys) > 0 && t_now_ms() < deadline);
    }
    ck_assert_int_eq(present(g_c, keys), 0);
}
END_TEST

START_TEST(test_touch_counts_present)
{
    const char *keys[3] = {"t/0", "t/missing", "t/2"};

    ck_assert_int_eq(mc_put(g_c, keys[0], g_buf, 10, NULL), 0);
    ck_assert_int_eq(mc_put(g_c, keys[2], g_buf, 10, NULL), 0);
    ck_assert_int_eq(mc_touch(g_c, 3, keys), 2);
    ck_assert_int_eq(mc_touch(g_c, 1, keys + 1), 0);
}
END_TEST

START_TEST(test_batch_put_reports_each_key)
{
    const char *keys[3] = {"r/0", "r/1", ""};
    const void *bufs[3] = {g_buf, g_buf, g_buf};
    size_t lens[3] = {100, 100, 100};
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    int res[3];

    ck_assert_int_eq(mc_put(g_c, keys[0], g_buf, 100, NULL), 0);
    /* plain: present is MC_ERR_EXISTS and not counted */
    ck_assert_int_eq(mc_batch_put(g_c, 3, keys, bufs, lens, NULL, res), 1);
    ck_assert_int_eq(res[0], MC_ERR_EXISTS);
    ck_assert_int_eq(res[1], 0);
    ck_assert_int_eq(res[2], MC_ERR_INVALID);
    /* asked so: present is MC_PRESENT and counted */
    o.flags = MC_PUT_EXISTS_OK;
    ck_assert_int_eq(mc_batch_put(g_c, 3, keys, bufs, lens, &o, res), 2);
    ck_assert_int_eq(res[0], MC_PRESENT);
    ck_assert_int_eq(res[1], MC_PRESENT);
    ck_assert_int_eq(res[2], MC_ERR_INVALID);
    ck_assert_int_eq(mc_put(g_c, keys[0], g_buf, 100, &o), MC_PRESENT);
    ck_assert_int_eq(mc_put(g_c, "r/new", g_buf, 100, &o), 0);
    ck_assert_str_eq(mc_strerror(MC_PRESENT), "object already present");
    /* with no room: MC_ERR_NO_SPACE for that key */
    {
        uint8_t *big = t_alloc_filled(32 * OBJ, 3);
        const char *bk[2] = {"r/big", "r/small"};
        const void *bb[2] = {big, g_buf};
        size_t bl[2] = {32 * OBJ, 100};

        ck_assert_int_eq(mc_batch_put(g_c, 2, bk, bb, bl, &o, res), 1);
        ck_assert(res[0] == MC_ERR_NO_SPACE || res[0] == MC_ERR_TOO_LARGE);
        ck_assert_int_eq(res[1], 0);
        free(big);
    }
}
END_TEST

/* The public forms of mcctl's ls, rm --prefix and stats. */
START_TEST(test_remove_prefix_and_stats)
{
    uint64_t removed = 99;
    char small[4], *json;
    size_t len = 0;

    ck_assert_int_eq(mc_put(g_c, "rp/a", g_buf, 10, NULL), 0);
    ck_assert_int_eq(mc_put(g_c, "rp/b", g_buf, 10, NULL), 0);
    ck_assert_int_eq(mc_put(g_c, "other", g_buf, 10, NULL), 0);
    {
        static char page[2 * (MC_KEY_MAX + 1)]; /* two keys a page: three pages for 5 */
        const char *ks[5] = {"ls/0", "ls/1", "ls/2", "ls/3", "ls/4"};
        uint64_t cursor = 0;
        int n, total = 0, pages = 0;

        for (int i = 0; i < 5; i++)
            ck_assert_int_eq(mc_put(g_c, ks[i], g_buf, 10, NULL), 0);
        do {
            n = mc_list(g_c, "ls/", &cursor, page, sizeof(page));
            ck_assert_int_ge(n, 0);
            ck_assert_int_le(n, 2);
            for (const char *p = page; p < page + sizeof(page) && n-- > 0; p += strlen(p) + 1) {
                ck_assert(strncmp(p, "ls/", 3) == 0);
                total++;
            }
            pages++;
        } while (cursor != 0 && pages < 10);
        ck_assert_int_eq(total, 5);
        ck_assert_int_eq(mc_list(g_c, NULL, &cursor, page, MC_KEY_MAX), MC_ERR_INVALID);
        ck_assert_int_eq(mc_list(g_c, NULL, NULL, page, sizeof(page)), MC_ERR_INVALID);
    }
    ck_assert_int_eq(mc_remove_prefix(g_c, "rp/", &removed), 0);
    ck_assert_uint_eq(removed, 2);
    ck_assert_int_eq(mc_exist(g_c, "other"), 1);
    ck_assert_int_eq(mc_remove_prefix(g_c, "rp/", &removed), 0);
    ck_assert_uint_eq(removed, 0);
    ck_assert_int_eq(mc_remove_prefix(g_c, "", &removed), MC_ERR_INVALID);
    ck_assert_int_eq(mc_remove_prefix(g_c, "rp/", NULL), MC_ERR_INVALID);

    ck_assert_int_eq(mc_stats(g_c, NULL, 0, &len), MC_ERR_TOO_LARGE);
    ck_assert_uint_gt(len, 2);
    ck_assert_int_eq(mc_stats(g_c, small, sizeof(small), NULL), MC_ERR_TOO_LARGE);
    ck_assert_int_eq(mc_stats(g_c, NULL, 5, NULL), MC_ERR_INVALID);
    json = malloc(len + 4096); /* it may grow between the two calls */
    ck_assert_int_eq(mc_stats(g_c, json, len + 4096, &len), 0);
    ck_assert_uint_eq(strlen(json), len);
    ck_assert(json[0] == '{' && json[len - 1] == '}');
    free(json);
}
END_TEST

static Suite *pin_suite(void)
{
    Suite *s = suite_create("pin");
    TCase *tc = tcase_create("pin");
    TCase *ttl = tcase_create("ttl");
    TCase *fault = tcase_create("fault");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pin_counts_leading_hits);
    tcase_add_test(tc, test_pin_args);
    tcase_add_test(tc, test_pin_survives_eviction_until_unpin);
    tcase_add_test(tc, test_pin_everything_pinned_is_no_space);
    tcase_add_test(tc, test_pin_ends_with_close);
    tcase_add_test(tc, test_touch_counts_present);
    tcase_add_test(tc, test_batch_put_reports_each_key);
    tcase_add_test(tc, test_remove_prefix_and_stats);
    suite_add_tcase(s, tc);
    tcase_add_checked_fixture(ttl, setup_short_ttl, teardown);
    tcase_set_timeout(ttl, 60);
    tcase_add_test(ttl, test_pin_lapses_at_ttl);
    suite_add_tcase(s, ttl);
    tcase_add_checked_fixture(fault, setup, teardown);
    tcase_set_timeout(fault, 60);
    tcase_add_test(fault, test_pin_released_when_process_killed);
    suite_add_tcase(s, fault);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pin_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
