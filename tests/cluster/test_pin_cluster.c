/*
 * Pins across nodes: a real mc-master and two cluster-mode mc-agents on loopback,
 *
 *   A  --dram 16M   data node, where every object lives
 *   B  --dram 0     pure client node: its clients' pins go to the master over UCX
 *
 * A client on B pins objects held on A; puts from A then churn A's segment, and the pinned
 * objects stay until the pin ends: mc_unpin, the pinning process killed with SIGKILL (B sees
 * its connection end and releases the pins at the master), or the master's pin_ttl_ms
 * (shortened here to 2 s on the master, while B keeps its default 60 s: the master's ends
 * it). Touch and the batch put's per-key reports cross the wire too.
 */
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mc/mc.h>

#include "t_cluster.h"

#define OBJ (1u << 20)
#define NPIN 4

static struct {
    char dir[256];
    char token[40];
    struct t_proc master, a, b;
} fx;

static uint8_t *g_buf;

static mc_client_t *t_conn(struct t_proc *p)
{
    mc_client_t *c = NULL;
    int err = mc_connect(p->sock, &c);

    if (err != 0)
        t_proc_dump_log(p, 8192);
    ck_assert_msg(err == 0, "mc_connect(%s): %s", p->name, mc_strerror(err));
    return c;
}

static void t_keys(const char *prefix, char names[NPIN][32], const char *keys[NPIN])
{
    for (int i = 0; i < NPIN; i++) {
        snprintf(names[i], 32, "%s/%d", prefix, i);
        keys[i] = names[i];
    }
}

static void t_put_all(mc_client_t *c, const char *const keys[NPIN])
{
    for (int i = 0; i < NPIN; i++) {
        int rc = mc_put(c, keys[i], g_buf, OBJ, NULL);

        ck_assert_msg(rc == 0, "put %s: %s", keys[i], mc_strerror(rc));
    }
}

/* n fresh 1 MiB objects from A: more than A's 16 MiB, so every unpinned object goes. */
static void t_churn(mc_client_t *ca, const char *tag, int n)
{
    static int next;
    char key[64];

    for (int i = 0; i < n; i++) {
        int rc;

        snprintf(key, sizeof(key), "churn/%s/%d", tag, next++);
        rc = mc_put(ca, key, g_buf, OBJ, NULL);
        ck_assert_msg(rc == 0, "churn put %s: %s", key, mc_strerror(rc));
    }
}

static int t_present(mc_client_t *c, const char *const keys[NPIN])
{
    int res[NPIN], n = 0;

    ck_assert_int_eq(mc_batch_exist(c, NPIN, keys, res), NPIN);
    for (int i = 0; i < NPIN; i++)
        n += res[i];
    return n;
}

START_TEST(test_pin_cluster_held_until_unpin)
{
    mc_client_t *ca = t_conn(&fx.a), *cb = t_conn(&fx.b);
    char names[NPIN][32];
    const char *keys[NPIN], *more[NPIN + 1];
    mc_pin_t pin;

    t_keys("u", names, keys);
    t_put_all(ca, keys);
    for (int i = 0; i < NPIN; i++)
        more[i] = keys[i];
    more[NPIN] = "u/missing";
    ck_assert_int_eq(mc_prefix_match(cb, NPIN + 1, more), NPIN);
    ck_assert_int_eq(mc_prefix_pin(cb, NPIN + 1, more, &pin), NPIN);
    t_churn(ca, "u", 40);
    ck_assert_int_eq(t_present(cb, keys), NPIN);
    ck_assert_int_eq(mc_touch(cb, NPIN + 1, more), NPIN);
    ck_assert_int_eq(mc_unpin(cb, pin), NPIN);
    t_churn(ca, "u", 40);
    ck_assert_int_eq(t_present(cb, keys), 0);
    mc_close(ca);
    mc_close(cb);
}
END_TEST

START_TEST(test_pin_cluster_released_when_pinner_killed)
{
    mc_client_t *ca = t_conn(&fx.a), *cb;
    char names[NPIN][32];
    const char *keys[NPIN];
    int fds[2], status;
    uint64_t deadline;
    char ok;
    pid_t pid;

    t_keys("k", names, keys);
    t_put_all(ca, keys);
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        mc_client_t *c;
        mc_pin_t pin;
        char one = 1;

        close(fds[0]);
        if (mc_connect(fx.b.sock, &c) != 0 || mc_prefix_pin(c, NPIN, keys, &pin) != NPIN)
            _exit(1);
        if (write(fds[1], &one, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(fds[1]);
    ck_assert_int_eq(read(fds[0], &ok, 1), 1);
    close(fds[0]);
    t_churn(ca, "k", 40);
    cb = t_conn(&fx.b);
    ck_assert_int_eq(t_present(cb, keys), NPIN);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    deadline = t_now_ms() + 20000;
    do
        t_churn(ca, "k", 8);
    while (t_present(cb, keys) > 0 && t_now_ms() < deadline);
    ck_assert_int_eq(t_present(cb, keys), 0);
    mc_close(ca);
    mc_close(cb);
}
END_TEST

START_TEST(test_pin_cluster_lapses_at_master_ttl)
{
    mc_client_t *ca = t_conn(&fx.a), *cb = t_conn(&fx.b);
    char names[NPIN][32];
    const char *keys[NPIN];
    uint64_t deadline;
    mc_pin_t pin;

    t_keys("t", names, keys);
    t_put_all(ca, keys);
    ck_assert_int_eq(mc_prefix_pin(cb, NPIN, keys, &pin), NPIN);
    t_churn(ca, "t", 24);
    ck_assert_int_eq(t_present(cb, keys), NPIN); /* well within 2 s */
    deadline = t_now_ms() + 20000;
    while (t_present(cb, keys) > 0 && t_now_ms() < deadline)
        t_churn(ca, "t", 4);
    ck_assert_int_eq(t_present(cb, keys), 0);
    mc_close(ca); /* B still holds its record: released with the connection, harmlessly */
    mc_close(cb);
}
END_TEST

START_TEST(test_pin_cluster_batch_put_reports)
{
    mc_client_t *cb = t_conn(&fx.b);
    const char *keys[2] = {"r/0", "r/1"};
    const void *bufs[2] = {g_buf, g_buf};
    size_t lens[2] = {1000, 1000};
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    int res[2];

    ck_assert_int_eq(mc_put(cb, keys[0], g_buf, 1000, NULL), 0);
    ck_assert_int_eq(mc_batch_put(cb, 2, keys, bufs, lens, NULL, res), 1);
    ck_assert_int_eq(res[0], MC_ERR_EXISTS);
    ck_assert_int_eq(res[1], 0);
    o.flags = MC_PUT_EXISTS_OK;
    ck_assert_int_eq(mc_batch_put(cb, 2, keys, bufs, lens, &o, res), 2);
    ck_assert_int_eq(res[0], MC_PRESENT);
    ck_assert_int_eq(res[1], MC_PRESENT);
    mc_close(cb);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("pin_cluster");
    TCase *tc = tcase_create("pin_cluster");

    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, test_pin_cluster_held_until_unpin);
    tcase_add_test(tc, test_pin_cluster_released_when_pinner_killed);
    tcase_add_test(tc, test_pin_cluster_lapses_at_master_ttl);
    tcase_add_test(tc, test_pin_cluster_batch_put_reports);
    suite_add_tcase(s, tc);
    return s;
}

static bool t_fixture_stop(bool dump)
{
    struct t_proc *all[3] = {&fx.a, &fx.b, &fx.master};
    bool clean = true;
    char st[48];

    for (int i = 0; i < 3; i++) {
        if (t_proc_stop(all[i]) != 0) {
            fprintf(stderr, "test_pin_cluster: %s did not exit cleanly on SIGTERM (%s)\n",
                    all[i]->name, t_status_str(all[i]->status, st, sizeof(st)));
            clean = false;
        }
    }
    for (int i = 0; i < 3 && (dump || !clean); i++)
        t_proc_dump_log(all[i], 4096);
    return clean;
}

int main(void)
{
    SRunner *sr;
    int failed;
    bool clean;

    g_buf = malloc(OBJ);
    if (g_buf == NULL)
        return EXIT_FAILURE;
    t_fill(g_buf, OBJ, 5);
    t_mkdtemp(fx.dir, sizeof(fx.dir));
    t_random_token(fx.token, sizeof(fx.token));
    setenv("MC_PIN_TTL_MS", "2000", 1); /* the master's; unset again before the agents */
    t_master_start(&fx.master, fx.dir, fx.token);
    unsetenv("MC_PIN_TTL_MS");
    t_agent_spawn(&fx.a, fx.dir, fx.master.port, "A", "da", "16M", fx.token, NULL);
    t_agent_spawn(&fx.b, fx.dir, fx.master.port, "B", NULL, "0", fx.token, NULL);
    if (t_proc_wait_ready(&fx.a, T_READY_MS) != 0 || t_proc_wait_ready(&fx.b, T_READY_MS) != 0) {
        fprintf(stderr, "test_pin_cluster: an agent did not get ready\n");
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
    free(g_buf);
    return failed == 0 && clean ? EXIT_SUCCESS : EXIT_FAILURE;
}
