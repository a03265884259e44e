/*
 * Draining a node, with real processes: a mc-master, three data agents in three domains
 * and a client node (t_cluster.h starts them).
 *
 *   D1, D2, D3  --dram 64M, domains d1, d2, d3    data nodes
 *   K           --dram 0                          client node: every op goes through it
 *
 * D1 is drained while a child process keeps putting and reading through K; every object
 * must stay readable byte-exact throughout, D1 ends up holding nothing (and gets nothing
 * new), and after D1 leaves on SIGTERM every object still reads back exact.
 */
#include <check.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <mc/mc.h>

#include "t_cluster.h"

#define N_OBJ 40
#define LOAD_LEN (64u * 1024u)
#define DRAIN_MS 60000 /* the drain of ~60 MiB must end well within this */

static struct {
    char dir[256];
    char token[40];
    struct t_proc master, d1, d2, d3, k;
} fx;

static size_t t_len(int i)
{
    static const size_t sizes[] = {1024, 4096, 65536, 300 * 1024, T_MIB, 4 * T_MIB - 100};

    return sizes[i % 6];
}

static mc_client_t *t_conn(struct t_proc *p)
{
    mc_client_t *c = NULL;
    int err = mc_connect(p->sock, &c);

    ck_assert_msg(err == 0, "mc_connect(%s): %s", p->name, mc_strerror(err));
    return c;
}

/* Every object of the test reads back exact through c. */
static void t_check_all(mc_client_t *c, const char *via)
{
    uint8_t *want = malloc(4 * T_MIB), *buf = malloc(4 * T_MIB + 64);
    char key[32];
    int i;

    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_nonnull(buf);
    for (i = 0; i < N_OBJ; i++) {
        size_t len = t_len(i), got = 0;
        int err;

        snprintf(key, sizeof(key), "dr/%d", i);
        t_fill(want, len, (uint64_t)i + 1);
        err = mc_get(c, key, buf, 4 * T_MIB + 64, &got);
        ck_assert_msg(err == 0, "get %s through %s: %s", key, via, mc_strerror(err));
        ck_assert_msg(got == len && memcmp(buf, want, len) == 0,
                      "get %s through %s: %zu bytes, want %zu, or bytes differ", key, via, got,
                      len);
    }
    free(want);
    free(buf);
}

/* The node's entry in `mcctl cluster` through K (borrowed from *j_p, which the caller
 * frees). */
static json_t *t_node_now(const char *name, json_t **j_p)
{
    json_t *j = t_cluster_json(fx.k.sock), *n;

    ck_assert_msg(j != NULL, "mcctl cluster through K failed");
    n = t_json_find_str(j, "nodes", "name", name);
    ck_assert_msg(n != NULL, "node %s not listed", name);
    *j_p = j;
    return n;
}

/* Codes an op may fail with while a node drains, all of them "retry": a deadline passed, the
 * master was briefly out of reach. Anything else is a failure of the drain. */
static bool t_retryable(int err)
{
    return err == MC_ERR_TIMEOUT || err == MC_ERR_UNAVAILABLE || err == MC_ERR_BUSY;
}

struct t_load {
    atomic_int stop;
    atomic_int puts, gets, retried;
    char why[256];
};

/* The child: puts new objects and reads back its own and the test's until told to stop. */
static void t_load_run(struct t_load *ld)
{
    uint8_t *data = malloc(4 * T_MIB), *buf = malloc(4 * T_MIB + 64);
    mc_client_t *c = NULL;
    uint64_t x = 12345;
    int n = 0, err;

    if (data == NULL || buf == NULL || mc_connect(fx.k.sock, &c) != 0) {
        snprintf(ld->why, sizeof(ld->why), "load: no client");
        _exit(1);
    }
    while (!atomic_load(&ld->stop)) {
        char key[32];
        size_t got = 0, len;
        int i;

        snprintf(key, sizeof(key), "ld/%d", n);
        t_fill(data, LOAD_LEN, 1000000u + (uint64_t)n);
        err = mc_put(c, key, data, LOAD_LEN, NULL);
        if (err == 0) {
            n++;
            atomic_fetch_add(&ld->puts, 1);
        } else if (t_retryable(err) && mc_client_status(c) == 0) {
            atomic_fetch_add(&ld->retried, 1);
        } else {
            snprintf(ld->why, sizeof(ld->why), "load: put %s: %s", key, mc_strerror(err));
            _exit(1);
        }
        /* one of its own, one of the test's */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (n > 0) {
            i = (int)(x % (uint64_t)n);
            snprintf(key, sizeof(key), "ld/%d", i);
            err = mc_get(c, key, buf, 4 * T_MIB + 64, &got);
            t_fill(data, LOAD_LEN, 1000000u + (uint64_t)i);
            if (err == 0 && (got != LOAD_LEN || memcmp(buf, data, LOAD_LEN) != 0)) {
                snprintf(ld->why, sizeof(ld->why), "load: get %s: wrong bytes", key);
                _exit(1);
            }
            if (err != 0 && !(t_retryable(err) && mc_client_status(c) == 0)) {
                snprintf(ld->why, sizeof(ld->why), "load: get %s: %s", key, mc_strerror(err));
                _exit(1);
            }
            atomic_fetch_add(err == 0 ? &ld->gets : &ld->retried, 1);
        }
        i = (int)((x >> 32) % N_OBJ);
        len = t_len(i);
        snprintf(key, sizeof(key), "dr/%d", i);
        err = mc_get(c, key, buf, 4 * T_MIB + 64, &got);
        t_fill(data, len, (uint64_t)i + 1);
        if (err == 0 && (got != len || memcmp(buf, data, len) != 0)) {
            snprintf(ld->why, sizeof(ld->why), "load: get %s: wrong bytes", key);
            _exit(1);
        }
        if (err != 0 && !(t_retryable(err) && mc_client_status(c) == 0)) {
            snprintf(ld->why, sizeof(ld->why), "load: get %s: %s", key, mc_strerror(err));
            _exit(1);
        }
        atomic_fetch_add(err == 0 ? &ld->gets : &ld->retried, 1);
    }
    mc_close(c);
    free(data);
    free(buf);
    _exit(0);
}

START_TEST(test_drain_node_under_load_loses_nothing)
{
    struct t_load *ld = mmap(NULL, sizeof(*ld), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    uint8_t *data = malloc(4 * T_MIB);
    mc_client_t *ck = t_conn(&fx.k), *c2;
    json_t *j, *n;
    uint64_t deadline, t0;
    int i, err, status, puts_at_drained;
    pid_t pid;

    ck_assert_ptr_ne(ld, MAP_FAILED);
    ck_assert_ptr_nonnull(data);
    memset(ld, 0, sizeof(*ld));
    for (i = 0; i < N_OBJ; i++) {
        mc_put_opts_t o = {.replicas = 1 + (uint32_t)(i % 2)};
        char key[32];

        snprintf(key, sizeof(key), "dr/%d", i);
        t_fill(data, t_len(i), (uint64_t)i + 1);
        err = mc_put(ck, key, data, t_len(i), &o);
        ck_assert_msg(err == 0, "put %s: %s", key, mc_strerror(err));
    }
    j = NULL;
    n = t_node_now("D1", &j);
    ck_assert_ptr_null(json_object_get(n, "drain"));
    ck_assert_int_gt(t_node_seg_used(j, "D1"), 0); /* something to move */
    json_decref(j);

    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        t_load_run(ld);
    while (atomic_load(&ld->puts) < 5) { /* the load runs before the drain starts */
        ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0, "the load ended: %s", ld->why);
        t_poll_pause();
    }

    ck_assert_int_ne(t_mcctl(fx.k.sock, NULL, "drain", "nosuch", NULL), 0);
    ck_assert_int_eq(t_mcctl(fx.k.sock, NULL, "drain", "D1", NULL), 0);
    t0 = t_now_ms();
    deadline = t0 + DRAIN_MS;
    for (;;) {
        n = t_node_now("D1", &j);
        ck_assert_msg(json_object_get(n, "drain") != NULL, "D1 shows no drain state");
        if (strcmp(t_json_str(n, "drain"), "drained") == 0) {
            ck_assert_int_eq(t_json_int(n, "drain_left_objects"), 0);
            ck_assert_int_eq(t_json_int(n, "drain_left_bytes"), 0);
            ck_assert_int_eq(t_node_seg_used(j, "D1"), 0);
            json_decref(j);
            break;
        }
        ck_assert_str_eq(t_json_str(n, "drain"), "draining");
        ck_assert_int_ge(t_json_int(n, "drain_left_objects"), 0);
        json_decref(j);
        ck_assert_msg(t_now_ms() < deadline, "D1 not drained within %d ms", DRAIN_MS);
        t_poll_pause();
    }
    fprintf(stderr, "test_drain_cluster: D1 drained in %llu ms under load\n",
            (unsigned long long)(t_now_ms() - t0));
    /* the load goes on: none of its new objects lands on D1 */
    puts_at_drained = atomic_load(&ld->puts);
    deadline = t_now_ms() + 10000;
    while (atomic_load(&ld->puts) < puts_at_drained + 20 && t_now_ms() < deadline)
        t_poll_pause();
    atomic_store(&ld->stop, 1);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the load failed: %s",
                  ld->why);
    ck_assert_int_ge(atomic_load(&ld->puts), puts_at_drained + 20);
    fprintf(stderr, "test_drain_cluster: load: %d puts, %d gets, %d retried\n",
            atomic_load(&ld->puts), atomic_load(&ld->gets), atomic_load(&ld->retried));
    n = t_node_now("D1", &j);
    ck_assert_str_eq(t_json_str(n, "drain"), "drained");
    ck_assert_int_eq(t_node_seg_used(j, "D1"), 0);
    json_decref(j);
    t_check_all(ck, "K");

    /* D1 leaves: nothing is lost */
    ck_assert_int_eq(t_proc_stop(&fx.d1), 0);
    deadline = t_now_ms() + 5000;
    for (;;) {
        j = t_cluster_json(fx.k.sock);
        ck_assert_ptr_nonnull(j);
        n = t_json_find_str(j, "nodes", "name", "D1");
        if (n == NULL || strcmp(t_json_str(n, "state"), "dead") == 0)
            break;
        json_decref(j);
        ck_assert_msg(t_now_ms() < deadline, "D1 still listed alive after its exit");
        t_poll_pause();
    }
    json_decref(j);
    t_check_all(ck, "K");
    c2 = t_conn(&fx.d2);
    t_check_all(c2, "D2");
    mc_close(c2);

    /* undrain works on another node: draining, then back to none; puts keep working */
    ck_assert_int_eq(t_mcctl(fx.k.sock, NULL, "drain", "D2", NULL), 0);
    n = t_node_now("D2", &j);
    ck_assert_msg(strcmp(t_json_str(n, "drain"), "draining") == 0 ||
                      strcmp(t_json_str(n, "drain"), "drained") == 0,
                  "D2: drain state '%s'", t_json_str(n, "drain"));
    json_decref(j);
    ck_assert_int_eq(t_mcctl(fx.k.sock, NULL, "undrain", "D2", NULL), 0);
    n = t_node_now("D2", &j);
    ck_assert_ptr_null(json_object_get(n, "drain"));
    json_decref(j);
    t_fill(data, 4096, 777);
    ck_assert_int_eq(mc_put(ck, "dr/after", data, 4096, NULL), 0);
    t_check_all(ck, "K");
    mc_close(ck);
    free(data);
    munmap(ld, sizeof(*ld));
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("drain_cluster");
    TCase *tc = tcase_create("drain");

    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, test_drain_node_under_load_loses_nothing);
    suite_add_tcase(s, tc);
    return s;
}

static bool t_fixture_stop(bool dump)
{
    struct t_proc *all[5] = {&fx.d1, &fx.d2, &fx.d3, &fx.k, &fx.master};
    bool clean = true;
    char st[48];
    int i;

    for (i = 0; i < 5; i++) {
        if (all[i]->pid > 0 && t_proc_stop(all[i]) != 0) {
            fprintf(stderr, "test_drain_cluster: %s did not exit cleanly on SIGTERM (%s)\n",
                    all[i]->name, t_status_str(all[i]->status, st, sizeof(st)));
            clean = false;
        }
    }
    for (i = 0; i < 5 && (dump || !clean); i++)
        t_proc_dump_log(all[i], 4096);
    return clean;
}

int main(void)
{
    struct t_proc *agents[4] = {&fx.d1, &fx.d2, &fx.d3, &fx.k};
    SRunner *sr;
    int failed, i;
    bool clean;

    t_mkdtemp(fx.dir, sizeof(fx.dir));
    t_random_token(fx.token, sizeof(fx.token));
    t_master_start(&fx.master, fx.dir, fx.token);
    t_agent_spawn(&fx.d1, fx.dir, fx.master.port, "D1", "d1", "64M", fx.token, NULL);
    t_agent_spawn(&fx.d2, fx.dir, fx.master.port, "D2", "d2", "64M", fx.token, NULL);
    t_agent_spawn(&fx.d3, fx.dir, fx.master.port, "D3", "d3", "64M", fx.token, NULL);
    t_agent_spawn(&fx.k, fx.dir, fx.master.port, "K", NULL, "0", fx.token, NULL);
    for (i = 0; i < 4; i++) {
        if (t_proc_wait_ready(agents[i], T_READY_MS) != 0) {
            fprintf(stderr, "test_drain_cluster: mc-agent %s did not get ready\n",
                    agents[i]->name);
            t_fixture_stop(true);
            return EXIT_FAILURE;
        }
    }
    sr = srunner_create(t_suite());
    /* no fork: the test stops D1, which the fixture must then know */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    clean = t_fixture_stop(failed != 0);
    if (clean)
        t_rmdir(fx.dir);
    return failed == 0 && clean ? EXIT_SUCCESS : EXIT_FAILURE;
}
