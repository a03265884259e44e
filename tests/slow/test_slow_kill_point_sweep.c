/*
 * Kill-point sweep (docs/failure-contract.md, "writer (client) crashes mid-put"), suite slow.
 *
 * Puts of log-uniform random sizes (1 KiB .. 64 MiB), each by its own child process that is
 * SIGKILLed at a random moment of its put: a delay drawn uniformly from 0 to the put's
 * expected duration (measured at the start of the run), counted from when the child is
 * connected and about to put. Small puts mostly finish first; large ones are mostly cut.
 * Half the writers put from malloc'd memory (the agent reads it with process_vm_readv, or
 * through the staging area when small), half from an arena buffer (mc_buf_alloc: the agent
 * copies from the shared arena, which outlives the writer until the agent unmaps it).
 * A quarter of the writers are spared (they put, read back and exit). After each kill or
 * exit, within one second:
 *   - the writer's client is gone from the agent (STATS clients back to the test's own);
 *   - the key is either present, its bytes exactly the writer's (they are a seeded pattern
 *     that depends on the key and the offset, so a partial object, another object's bytes
 *     or bytes at the wrong offset never pass), or absent (mc_get and mc_stat answer
 *     MC_ERR_NOT_FOUND);
 *   - STATS used_bytes is exactly the allocations of the objects present: each is the
 *     object with its checksum trailer (mc_shm_alloc_len) rounded up to the allocator's
 *     granule (64 bytes, alloc_granule's default), so an absent key's space is all back.
 * A put that returned 0 before the kill must be present, and the writer reads it back at
 * once through another client (of the other node, in the cluster) the instant its put
 * returned: every byte is there (a completed put is readable everywhere at once). Half the
 * puts carry no checksum (MC_PUT_NO_CHECKSUM), so a torn read cannot hide behind
 * MC_ERR_CORRUPT. Objects that finished are kept
 * (up to a budget well under the eviction watermark, so nothing is evicted behind the
 * accounting) and audited again at the end, when every absent key must still be absent.
 *
 *   test_slow_kill_point_sweep_standalone  200 puts to a standalone agent (--dram 1G)
 *   test_slow_kill_point_sweep_cluster     200 puts by a client of a --dram 0 node, placed
 *                                          on another node; read through both nodes
 *
 * MC_SWEEP_PUTS=N overrides the number of puts of both; MC_SLOW_SEED replays a run.
 */
#include <limits.h>
#include <poll.h>

#include "shm/ring.h"
#include "t_slow.h"

#define KIB             ((size_t)1024)
#define MIB             ((size_t)1024 * 1024)
#define SWEEP_MIN       KIB
#define SWEEP_MAX       (64 * MIB)
#define SWEEP_GRANULE   64u   /* alloc_granule's default; the segments here are small */
#define SWEEP_SETTLE_MS 1000u /* the contract: the space is back within a second */

struct sweep_obj {
    char key[48];
    size_t size;
    uint64_t seed;
    bool csum;
    bool present;
};

struct sweep {
    const char *label;
    const char *writer_sock; /* where the writer children connect */
    const char *at_once_sock; /* where they read their object back the instant it is put */
    mc_client_t *rd[2];      /* readers: every check reads through each */
    const char *rd_name[2];
    int nrd;
    mc_client_t *st;      /* STATS from the writer's agent */
    int64_t base_clients; /* clients of that agent that are the test's own */
    struct t_rng rng;
    uint8_t *wbuf, *rbuf; /* SWEEP_MAX (+ slack) bytes each */
    double ns_fixed, ns_per_byte;
    struct sweep_obj *objs;
    int nobjs;
    uint64_t used; /* the allocations of the objects present */
    uint64_t kept;
    uint64_t keep_budget;
    /* what happened */
    int finished, cut, published_after_kill, read_at_once;
    uint64_t settle_max_ms;
};

static uint64_t sweep_alloc(const struct sweep_obj *o)
{
    uint64_t len = mc_shm_alloc_len(o->size, o->csum);

    return (len + SWEEP_GRANULE - 1) & ~(uint64_t)(SWEEP_GRANULE - 1);
}

static uint64_t t_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void t_sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int env_int(const char *name, int dflt)
{
    const char *s = getenv(name);

    return s != NULL && s[0] != '\0' ? atoi(s) : dflt;
}

/* Read key through every reader: exactly the pattern of o (present), or MC_ERR_NOT_FOUND. */
static void sweep_check_obj(struct sweep *sw, const struct sweep_obj *o)
{
    mc_obj_info_t info;
    size_t len, bad;
    int i, err;

    for (i = 0; i < sw->nrd; i++) {
        len = 0;
        err = mc_get(sw->rd[i], o->key, sw->rbuf, SWEEP_MAX + 4096, &len);
        if (!o->present) {
            ck_assert_msg(err == MC_ERR_NOT_FOUND,
                          "%s: %s (%zu bytes) should be absent; get through %s: %s", sw->label,
                          o->key, o->size, sw->rd_name[i], mc_strerror(err));
            err = mc_stat(sw->rd[i], o->key, &info);
            ck_assert_msg(err == MC_ERR_NOT_FOUND, "%s: %s: stat of an absent key: %s",
                          sw->label, o->key, mc_strerror(err));
            continue;
        }
        ck_assert_msg(err == 0, "%s: get %s (%zu bytes) through %s: %s", sw->label, o->key,
                      o->size, sw->rd_name[i], mc_strerror(err));
        ck_assert_msg(len == o->size, "%s: get %s through %s: %zu bytes, the writer put %zu",
                      sw->label, o->key, sw->rd_name[i], len, o->size);
        bad = t_pattern_mismatch(sw->rbuf, len, o->seed);
        ck_assert_msg(bad == len,
                      "%s: get %s (%zu bytes) through %s: byte %zu is not the writer's",
                      sw->label, o->key, o->size, sw->rd_name[i], bad);
        ck_assert_int_eq(mc_stat(sw->rd[i], o->key, &info), 0);
        ck_assert_uint_eq(info.size, o->size);
    }
}

/* Wait until used_bytes is sw->used (after a remove: the reader's lease may still hold it). */
static void sweep_wait_used(struct sweep *sw, const char *why)
{
    uint64_t deadline = t_now_ms() + 5000;
    int64_t used;

    while ((used = t_stat_int(sw->st, "used_bytes")) != (int64_t)sw->used &&
           t_now_ms() < deadline)
        t_poll_pause();
    ck_assert_msg(used == (int64_t)sw->used,
                  "%s: %s: used_bytes %" PRId64 ", expected %" PRIu64, sw->label, why, used,
                  sw->used);
}

/* The expected duration of a put of size bytes from a fresh client: a fixed cost plus a
 * per-byte one, measured with the test's own client on the writers' agent. */
static void sweep_calibrate(struct sweep *sw, mc_client_t *c)
{
    const size_t big = 16 * MIB, small = KIB;
    uint64_t t0, best_big = UINT64_MAX, best_small = UINT64_MAX;
    int i;

    t_pattern_fill(sw->wbuf, big, 1);
    for (i = 0; i < 3; i++) {
        t0 = t_now_ns();
        ck_assert_int_eq(mc_put(c, "calibrate-big", sw->wbuf, big, NULL), 0);
        t0 = t_now_ns() - t0;
        best_big = t0 < best_big ? t0 : best_big;
        ck_assert_int_eq(mc_remove(c, "calibrate-big"), 0);
    }
    for (i = 0; i < 5; i++) {
        t0 = t_now_ns();
        ck_assert_int_eq(mc_put(c, "calibrate-small", sw->wbuf, small, NULL), 0);
        t0 = t_now_ns() - t0;
        best_small = t0 < best_small ? t0 : best_small;
        ck_assert_int_eq(mc_remove(c, "calibrate-small"), 0);
    }
    sw->ns_fixed = (double)best_small;
    sw->ns_per_byte = best_big > best_small ? (double)(best_big - best_small) / (double)big : 0;
    fprintf(stderr, "%s: a put takes about %.0f us + %.3f ns/byte (64 MiB: %.1f ms)\n",
            sw->label, sw->ns_fixed / 1000, sw->ns_per_byte,
            (sw->ns_fixed + sw->ns_per_byte * (double)SWEEP_MAX) / 1e6);
    sweep_wait_used(sw, "after calibration");
}

/* One put by a child killed at a random moment of it; then the checks. */
static void sweep_one(struct sweep *sw, int i)
{
    struct sweep_obj *o = &sw->objs[sw->nobjs];
    uint64_t expect_ns, delay_ns, t_kill, settled_ms, deadline;
    int64_t used = -1, clients = -1;
    int pfd[2], status, ex = -1, put_rc = 1, read_rc = 0;
    bool use_arena, spare;
    struct pollfd pf;
    char go;
    ssize_t n;
    pid_t pid;

    o->size = t_rng_log_size(&sw->rng, SWEEP_MIN, SWEEP_MAX);
    o->seed = t_rng_next(&sw->rng);
    snprintf(o->key, sizeof(o->key), "sweep/%s/%d/%zu", sw->label, i, o->size);
    t_pattern_fill(sw->wbuf, o->size, o->seed);
    expect_ns = (uint64_t)(sw->ns_fixed + sw->ns_per_byte * (double)o->size);
    delay_ns = t_rng_below(&sw->rng, expect_ns + 1);
    use_arena = t_rng_below(&sw->rng, 2) == 0;
    o->csum = t_rng_below(&sw->rng, 2) == 0;
    spare = t_rng_below(&sw->rng, 4) == 0; /* not killed: it puts, reads back and exits */

    ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        mc_client_t *w = NULL, *r = NULL;
        mc_put_opts_t opt = MC_PUT_OPTS_INIT;
        void *src = sw->wbuf;
        int rc;

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(pfd[0]);
        if ((rc = mc_connect(sw->writer_sock, &w)) != 0 ||
            (rc = mc_connect(sw->at_once_sock, &r)) != 0) {
            fprintf(stderr, "sweep writer: mc_connect: %s\n", mc_strerror(rc));
            _exit(2);
        }
        if (!o->csum)
            opt.flags = MC_PUT_NO_CHECKSUM;
        if (use_arena) {
            if ((rc = mc_buf_alloc(w, o->size, &src)) != 0) {
                fprintf(stderr, "sweep writer: mc_buf_alloc(%zu): %s\n", o->size,
                        mc_strerror(rc));
                _exit(2);
            }
            memcpy(src, sw->wbuf, o->size);
        }
        go = 'r';
        if (write(pfd[1], &go, 1) != 1)
            _exit(2);
        rc = mc_put(w, o->key, src, o->size, &opt);
        if (write(pfd[1], &rc, sizeof(rc)) != (ssize_t)sizeof(rc))
            _exit(2);
        if (rc == 0) {
            /* the instant it returned: every byte, through the other client */
            size_t len = 0;

            rc = mc_get(r, o->key, sw->rbuf, SWEEP_MAX + 4096, &len);
            if (rc == 0 && (len != o->size || t_pattern_mismatch(sw->rbuf, len, o->seed) != len))
                rc = INT_MIN; /* wrong bytes */
            if (write(pfd[1], &rc, sizeof(rc)) != (ssize_t)sizeof(rc))
                _exit(2);
        }
        _exit(0); /* abandons the client: its socket closes as the process ends */
    }
    close(pfd[1]);
    pf.fd = pfd[0];
    pf.events = POLLIN;
    ck_assert_msg(poll(&pf, 1, 10000) == 1 && read(pfd[0], &go, 1) == 1 && go == 'r',
                  "%s: put %d: the writer did not connect", sw->label, i);
    if (!spare) {
        t_sleep_ns(delay_ns);
        kill(pid, SIGKILL);
    }
    t_kill = t_now_ms();
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    if (spare)
        t_kill = t_now_ms(); /* its exit closes its clients: the settle counts from here */
    n = read(pfd[0], &put_rc, sizeof(put_rc));
    if (n == (ssize_t)sizeof(put_rc)) {
        /* the put returned before the kill: it must have succeeded (a fresh key, room) */
        ck_assert_msg(put_rc == 0, "%s: put %s (%zu bytes): %s", sw->label, o->key, o->size,
                      mc_strerror(put_rc));
        sw->finished++;
        if (read(pfd[0], &read_rc, sizeof(read_rc)) == (ssize_t)sizeof(read_rc)) {
            ck_assert_msg(read_rc == 0, "%s: %s (%zu bytes%s) read through %s the instant "
                          "its put returned: %s", sw->label, o->key, o->size,
                          o->csum ? "" : ", no checksum", sw->at_once_sock,
                          read_rc == INT_MIN ? "wrong bytes" : mc_strerror(read_rc));
            sw->read_at_once++;
        }
    } else {
        ck_assert_msg(WIFSIGNALED(status), "%s: put %d: the writer exited (status 0x%x)",
                      sw->label, i, status);
        put_rc = 1; /* unknown */
    }
    close(pfd[0]);

    /* within a second: the writer is gone from its agent, and the key is complete with its
     * space counted, or absent with its space back */
    deadline = t_kill + SWEEP_SETTLE_MS;
    for (;;) {
        clients = t_stat_int(sw->st, "clients");
        ex = mc_exist(sw->rd[0], o->key);
        ck_assert_msg(ex == 0 || ex == 1, "%s: exist %s: %s", sw->label, o->key,
                      mc_strerror(ex));
        used = t_stat_int(sw->st, "used_bytes");
        if (clients == sw->base_clients &&
            ((ex == 1 && used == (int64_t)(sw->used + sweep_alloc(o))) ||
             (ex == 0 && used == (int64_t)sw->used)))
            break;
        if (t_now_ms() >= deadline)
            ck_abort_msg("%s: %s (%zu bytes, killed %.3f ms into a put expected to take "
                         "%.3f ms): %" PRIu64 " ms after the kill the agent has %" PRId64
                         " clients (want %" PRId64 "), exist=%d, used_bytes %" PRId64
                         " (%" PRIu64 " without it, %" PRIu64 " with it)",
                         sw->label, o->key, o->size, (double)delay_ns / 1e6,
                         (double)expect_ns / 1e6, t_now_ms() - t_kill, clients,
                         sw->base_clients, ex, used, sw->used, sw->used + sweep_alloc(o));
        t_poll_pause();
    }
    settled_ms = t_now_ms() - t_kill;
    if (settled_ms > sw->settle_max_ms)
        sw->settle_max_ms = settled_ms;
    o->present = ex == 1;
    ck_assert_msg(o->present || put_rc != 0,
                  "%s: %s: the put returned 0, but the key is absent", sw->label, o->key);
    if (!o->present)
        sw->cut++;
    else if (put_rc != 0)
        sw->published_after_kill++;
    sweep_check_obj(sw, o);

    if (o->present) {
        if (sw->kept + sweep_alloc(o) <= sw->keep_budget) {
            sw->kept += sweep_alloc(o);
            sw->used += sweep_alloc(o);
        } else {
            ck_assert_int_eq(mc_remove(sw->rd[0], o->key), 0);
            o->present = false;
            sweep_wait_used(sw, "after a remove");
        }
    }
    sw->nobjs++;
}

static void sweep_run(struct sweep *sw, mc_client_t *cal, int nputs, uint64_t keep_budget)
{
    uint64_t t0 = t_now_ms();
    int i;

    sw->rng.s = t_slow_seed(sw->label);
    sw->keep_budget = keep_budget;
    sw->wbuf = malloc(SWEEP_MAX + 4096);
    sw->rbuf = malloc(SWEEP_MAX + 4096);
    sw->objs = calloc((size_t)nputs, sizeof(*sw->objs));
    ck_assert(sw->wbuf != NULL && sw->rbuf != NULL && sw->objs != NULL);
    sw->base_clients = t_stat_int(sw->st, "clients");
    sw->used = (uint64_t)t_stat_int(sw->st, "used_bytes");
    ck_assert_msg(sw->used == 0, "%s: the store is not empty at the start", sw->label);
    sweep_calibrate(sw, cal);

    for (i = 0; i < nputs; i++)
        sweep_one(sw, i);

    /* the final audit: what was present is still exact, what was cut is still absent (no
     * late publication of a killed writer's put), and the accounting still holds */
    for (i = 0; i < sw->nobjs; i++)
        sweep_check_obj(sw, &sw->objs[i]);
    sweep_wait_used(sw, "at the end");
    for (i = 0; i < sw->nobjs; i++)
        if (sw->objs[i].present) {
            ck_assert_int_eq(mc_remove(sw->rd[0], sw->objs[i].key), 0);
            sw->used -= sweep_alloc(&sw->objs[i]);
            sw->objs[i].present = false;
        }
    sweep_wait_used(sw, "after removing everything");
    fprintf(stderr,
            "%s: %d puts in %.1f s: %d finished before the kill, %d cut (absent, space back), "
            "%d published although killed; %d read back whole at once through %s; slowest "
            "settle %" PRIu64 " ms\n",
            sw->label, nputs, (double)(t_now_ms() - t0) / 1000, sw->finished, sw->cut,
            sw->published_after_kill, sw->read_at_once, sw->at_once_sock, sw->settle_max_ms);
    /* else the sweep tested nothing: the kill point never fell inside a put, or always did */
    ck_assert_int_gt(sw->cut, 0);
    ck_assert_int_gt(sw->finished + sw->published_after_kill, 0);
    ck_assert_int_gt(sw->read_at_once, 0);
    free(sw->wbuf);
    free(sw->rbuf);
    free(sw->objs);
}

START_TEST(test_slow_kill_point_sweep_standalone)
{
    const char *extra[] = {"--set", "prefault=true", NULL};
    struct sweep sw = {.label = "standalone"};
    struct t_proc agent = {0};
    char dir[256];
    mc_client_t *c;

    t_mkdtemp(dir, sizeof(dir));
    t_standalone_start(&agent, dir, "agent", "1G", extra);
    ck_assert_int_eq(mc_connect(agent.sock, &c), 0);
    sw.writer_sock = agent.sock;
    sw.at_once_sock = agent.sock; /* one node: another client of it */
    sw.rd[0] = c;
    sw.rd_name[0] = "the agent";
    sw.nrd = 1;
    sw.st = c;
    /* 256 MiB kept + one 64 MiB put in flight: far under the 0.95 high watermark of 1 GiB */
    sweep_run(&sw, c, env_int("MC_SWEEP_PUTS", 200), 256 * MIB);
    mc_close(c);
    ck_assert_int_eq(t_proc_stop(&agent), 0);
    t_rmdir(dir);
}
END_TEST

START_TEST(test_slow_kill_point_sweep_cluster)
{
    /* the client node reads whole objects into its landing segment: room for the largest */
    const char *cli_extra[] = {"--set", "landing=128M", NULL};
    struct sweep sw = {.label = "cluster"};
    struct t_proc master = {0}, own = {0}, cli = {0};
    char dir[256], token[40];
    mc_client_t *c_cli, *c_own;

    t_mkdtemp(dir, sizeof(dir));
    t_random_token(token, sizeof(token));
    t_master_start(&master, dir, token);
    t_agent_start(&own, dir, master.port, "own", "down", "512M", token, NULL);
    t_agent_start(&cli, dir, master.port, "cli", "dcli", "0", token, cli_extra);
    ck_assert_int_eq(mc_connect(cli.sock, &c_cli), 0);
    ck_assert_int_eq(mc_connect(own.sock, &c_own), 0);
    sw.writer_sock = cli.sock;
    sw.at_once_sock = own.sock; /* the owner's node: the bytes came from cli over UCX */
    sw.rd[0] = c_cli;
    sw.rd_name[0] = "cli (remote read)";
    sw.rd[1] = c_own;
    sw.rd_name[1] = "own (local read)";
    sw.nrd = 2;
    sw.st = c_cli; /* cluster mode: used_bytes is the master's, clients cli's */
    sweep_run(&sw, c_cli, env_int("MC_SWEEP_PUTS", 200), 128 * MIB);
    mc_close(c_cli);
    mc_close(c_own);
    ck_assert_int_eq(t_proc_stop(&cli), 0);
    ck_assert_int_eq(t_proc_stop(&own), 0);
    ck_assert_int_eq(t_proc_stop(&master), 0);
    t_rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("slow");
    TCase *tc = tcase_create("kill_point_sweep");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_slow_kill_point_sweep_standalone);
    tcase_add_test(tc, test_slow_kill_point_sweep_cluster);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
