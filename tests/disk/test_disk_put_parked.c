/*
 * A cluster put parked in its writer's agent (docs/disk.md, "Offload", back-pressure): the
 * owner A has 16 MiB of DRAM and a disk whose offload writes start DELAY_MS late
 * (--test-fault disk_write_delay_ms), the writer C has --dram 0. park_fill puts through C
 * until DRAM is full of blocks waiting for their copies: mc-master answers "no room yet"
 * and C parks the put's PUT_START (put.c, put_parked_retry) until room comes or the put's
 * deadline. What happens to a parked put when
 *   (a) its deadline passes: MC_ERR_NO_SPACE (room could not be made), by the deadline;
 *   (b) its client is killed: the agent lets go of it (puts_parked, puts_open, clients_held
 *       in `mcctl stats` back to where they were) and serves on;
 *   (c) the writer agent gets SIGTERM: it exits 0 within its drain (op_timeout_ms);
 *   (d) mc-master is stopped (SIGSTOP): the puts end with an allowed error by their
 *       deadline, and puts work again after SIGCONT.
 * Every window is well inside DELAY_MS, before any copy ends and makes room.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <mc/mc.h>

#include "tests/lib/t_fcluster.h"
#include "tests/disk/t_disk.h"

#define KIB 1024u
#define LEN (64 * KIB)
#define TTL_MS 3000u    /* node_ttl_ms */
#define DELAY_MS 10000u /* the owner's offload writes start this late */
#define FILL_MS 800u    /* the deadline of park_fill's puts */
/* how late an answer may come after its deadline on a loaded 2-core host */
#define SLACK_MS 700u

struct park {
    struct t_fc fc;
    struct t_proc a, c;
    char path[300];
};

/* mc-master, the slow owner A and the writer C (c_extra: C's extra arguments, may be
 * NULL), all up. */
static void park_start(struct park *p, const char *name, unsigned ttl_ms,
                       const char *const *c_extra)
{
    char delay[64];
    const char *slow[] = {"--disk", p->path, "--disk-size", "128M", "--test-fault", delay,
                          NULL};

    memset(p, 0, sizeof(*p));
    snprintf(delay, sizeof(delay), "disk_write_delay_ms=%u", DELAY_MS);
    t_disk_cluster_start(&p->fc, name, ttl_ms, false, p->path, sizeof(p->path), &p->a, slow,
                         &p->c, c_extra);
}

/* A client of p whose ops have a deadline of ms (MC_OP_TIMEOUT_MS, read at connect). */
static mc_client_t *conn_ms(struct t_proc *p, unsigned ms)
{
    char v[32];
    mc_client_t *c;

    snprintf(v, sizeof(v), "%u", ms);
    setenv("MC_OP_TIMEOUT_MS", v, 1);
    c = t_fc_conn(p);
    unsetenv("MC_OP_TIMEOUT_MS");
    return c;
}

/* Puts pf/N through C (deadline FILL_MS) until one is refused MC_ERR_NO_SPACE after it
 * was parked: A's DRAM is then full of blocks whose copies wait DELAY_MS, and a put
 * through C parks. Every put before succeeds. No client of ours is left open (the tests
 * fork). */
static void park_fill(struct park *p)
{
    mc_client_t *c = conn_ms(&p->c, FILL_MS);
    uint8_t *buf = malloc(LEN);
    int i, err = 0;

    ck_assert_ptr_nonnull(buf);
    for (i = 0; i < 1024; i++) {
        char key[64];

        snprintf(key, sizeof(key), "pf/%d", i);
        t_fill(buf, LEN, t_disk_seed(i, LEN));
        err = mc_put(c, key, buf, LEN, NULL);
        if (err != 0)
            break;
    }
    ck_assert_msg(err == MC_ERR_NO_SPACE, "fill put %d: %s (MC_ERR_NO_SPACE expected once "
                  "A's DRAM is full)", i, mc_strerror(err));
    ck_assert_int_gt(i, 128);
    ck_assert_int_gt(t_fc_stat(p->c.sock, "put_waits"), 0); /* it was parked first */
    free(buf);
    mc_close(c);
}

/* Polls C's stats until field is want (cmp 0) or at least want (cmp 1), up to ms. */
static bool stat_until(const char *sock, const char *field, json_int_t want, int cmp,
                       unsigned ms, json_int_t *last)
{
    uint64_t end = t_now_ms() + ms;

    for (;;) {
        *last = t_fc_stat(sock, field);
        if (cmp == 0 ? *last == want : *last >= want)
            return true;
        if (t_now_ms() >= end)
            return false;
        t_fc_sleep_ms(20);
    }
}

/* What a child's put (child_put) came to. */
struct child_res {
    int rc;          /* mc_batch_put's (< 0: the whole call failed), or 1000: no connection */
    int results[4];
    uint64_t ms;     /* the call's time */
};

/*
 * A child process (no client of the parent is open when it forks) that connects to sock
 * with deadline ms and puts keys prefix/0..n-1 (n <= 4) in one batch, then writes what it
 * got into the pipe *fd_p and exits. Returns its pid.
 */
static pid_t child_put(const char *sock, const char *prefix, int n, unsigned ms, int *fd_p)
{
    int fds[2];
    pid_t pid;

    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct child_res res = {.rc = 1000};
        static uint8_t buf[4][LEN];
        char keys[4][64], v[32];
        const char *kp[4];
        const void *bp[4];
        size_t lens[4];
        mc_client_t *c = NULL;
        uint64_t t0;

        close(fds[0]);
        snprintf(v, sizeof(v), "%u", ms);
        setenv("MC_OP_TIMEOUT_MS", v, 1);
        for (int i = 0; i < n; i++) {
            snprintf(keys[i], sizeof(keys[i]), "%s/%d", prefix, i);
            kp[i] = keys[i];
            t_fill(buf[i], LEN, t_disk_seed(i, LEN));
            bp[i] = buf[i];
            lens[i] = LEN;
        }
        if (mc_connect(sock, &c) == 0) {
            t0 = t_now_ms();
            res.rc = mc_batch_put(c, (size_t)n, kp, bp, lens, NULL, res.results);
            res.ms = t_now_ms() - t0;
        }
        if (write(fds[1], &res, sizeof(res)) != (ssize_t)sizeof(res))
            _exit(2);
        _exit(0); /* the client is left to the exit, as a crash would */
    }
    close(fds[1]);
    *fd_p = fds[0];
    return pid;
}

/* The child's report, waiting up to ms for it: false when none came (the child hangs). */
static bool child_wait(pid_t pid, int fd, unsigned ms, struct child_res *res)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    bool got = false;
    int st;

    if (poll(&pfd, 1, (int)ms) == 1)
        got = read(fd, res, sizeof(*res)) == (ssize_t)sizeof(*res);
    close(fd);
    if (!got)
        kill(pid, SIGKILL);
    (void)waitpid(pid, &st, 0);
    return got;
}

static bool allowed_error(int err)
{
    return err == MC_ERR_NO_SPACE || err == MC_ERR_TIMEOUT || err == MC_ERR_UNAVAILABLE;
}

/*
 * (a) A parked put whose deadline passes ends MC_ERR_NO_SPACE (mc.h: room could not be
 * made), not MC_ERR_TIMEOUT, and not later than its deadline plus SLACK_MS; it was parked
 * meanwhile (put_waits grew, and it took most of its deadline). Nothing of it stays open.
 */
START_TEST(test_disk_cluster_parked_put_deadline_is_no_space)
{
    const unsigned dl = 1500;
    struct park p;
    mc_client_t *c;
    uint8_t *buf = malloc(LEN);
    json_int_t waits, last;
    uint64_t t0, ms;
    int err;

    ck_assert_ptr_nonnull(buf);
    park_start(&p, "parked_deadline", TTL_MS, NULL);
    park_fill(&p);
    waits = t_fc_stat(p.c.sock, "put_waits");
    c = conn_ms(&p.c, dl);
    t_fill(buf, LEN, 7);
    t0 = t_now_ms();
    err = mc_put(c, "pd/0", buf, LEN, NULL);
    ms = t_now_ms() - t0;
    fprintf(stderr, "parked_put_deadline: %s after %llu ms (deadline %u)\n", mc_strerror(err),
            (unsigned long long)ms, dl);
    ck_assert_msg(err == MC_ERR_NO_SPACE, "a parked put at its deadline: %s (%d)",
                  mc_strerror(err), err);
    ck_assert_msg(ms <= dl + SLACK_MS, "answered %llu ms after the put (deadline %u)",
                  (unsigned long long)ms, dl);
    ck_assert_msg(ms >= dl / 2, "answered after %llu ms: refused, not parked",
                  (unsigned long long)ms);
    ck_assert_int_gt(t_fc_stat(p.c.sock, "put_waits"), waits);
    ck_assert_int_eq(mc_exist(c, "pd/0"), 0);
    ck_assert_msg(stat_until(p.c.sock, "puts_parked", 0, 0, 1000, &last), "%lld parked",
                  (long long)last);
    ck_assert_msg(stat_until(p.c.sock, "puts_open", 0, 0, 1000, &last), "%lld open",
                  (long long)last);
    free(buf);
    mc_close(c);
    t_fc_finish(&p.fc);
}
END_TEST

/*
 * (b) The client of a parked put is killed (-9): the agent ends the put without asking the
 * master again, frees what the client held (puts_parked, puts_open 0; clients_held back to
 * what it was: the client itself freed, no reference left behind) and serves on: a new
 * client reads a fill object exactly, and the dead client's key was never published.
 */
START_TEST(test_disk_cluster_parked_put_client_killed)
{
    struct park p;
    struct child_res res;
    json_int_t held, last;
    mc_client_t *c;
    pid_t pid;
    int fd;

    park_start(&p, "parked_killed", TTL_MS, NULL);
    park_fill(&p);
    held = t_fc_stat(p.c.sock, "clients_held"); /* mcctl's own connection counts */
    pid = child_put(p.c.sock, "pk", 1, 8000, &fd);
    ck_assert_msg(stat_until(p.c.sock, "puts_parked", 1, 1, 4000, &last),
                  "the child's put was not parked (%lld)", (long long)last);
    kill(pid, SIGKILL);
    ck_assert(!child_wait(pid, fd, 1000, &res)); /* killed before it heard anything */
    ck_assert_msg(stat_until(p.c.sock, "puts_parked", 0, 0, 2000, &last),
                  "%lld puts still parked after their client died", (long long)last);
    ck_assert_msg(stat_until(p.c.sock, "puts_open", 0, 0, 2000, &last),
                  "%lld puts still open after their client died", (long long)last);
    ck_assert_msg(stat_until(p.c.sock, "clients_held", held, 0, 2000, &last),
                  "%lld clients held after the child died (%lld before it)", (long long)last,
                  (long long)held);
    c = conn_ms(&p.c, 5000);
    ck_assert_int_eq(get_range(c, "pf", 0, 1, LEN), 1);
    ck_assert_int_eq(mc_exist(c, "pk/0"), 0);
    mc_close(c);
    t_fc_finish(&p.fc);
}
END_TEST

/*
 * (c) SIGTERM to the writer agent while a put is parked (its client's deadline 8 s, the
 * agent's op_timeout_ms 2 s): the agent drains and exits 0 within its op_timeout_ms plus
 * SLACK_MS, not after the put's deadline or never; the client hears an error at once
 * (the put is not published: A still answers exist 0).
 */
START_TEST(test_disk_cluster_parked_put_writer_sigterm)
{
    static const char *const c_extra[] = {"--set", "op_timeout_ms=2000", NULL};
    struct park p;
    struct child_res res;
    json_int_t last;
    mc_client_t *ca;
    uint64_t t0, ms;
    pid_t pid;
    int fd, rc;
    char st[48];

    park_start(&p, "parked_sigterm", TTL_MS, c_extra);
    park_fill(&p);
    pid = child_put(p.c.sock, "pt", 1, 8000, &fd);
    ck_assert_msg(stat_until(p.c.sock, "puts_parked", 1, 1, 4000, &last),
                  "the child's put was not parked (%lld)", (long long)last);
    t0 = t_now_ms();
    rc = t_proc_stop(&p.c);
    ms = t_now_ms() - t0;
    fprintf(stderr, "parked_put_writer_sigterm: exit after %llu ms\n", (unsigned long long)ms);
    ck_assert_msg(rc == 0, "C on SIGTERM with a put parked: %s",
                  t_status_str(p.c.status, st, sizeof(st)));
    ck_assert_msg(ms <= 2000 + SLACK_MS, "C took %llu ms to stop (op_timeout_ms 2000)",
                  (unsigned long long)ms);
    ck_assert_msg(child_wait(pid, fd, 2000, &res), "the client hangs after C stopped");
    /* an error of the item or of the whole call (the agent gone), never stored */
    ck_assert_msg(res.rc < 0 || (res.rc == 0 && res.results[0] < 0), "the parked put: rc %d, %s",
                  res.rc, mc_strerror(res.results[0]));
    ca = conn_ms(&p.a, 5000);
    ck_assert_int_eq(mc_exist(ca, "pt/0"), 0);
    mc_close(ca);
    t_fc_finish(&p.fc);
}
END_TEST

/*
 * (d) mc-master stopped (SIGSTOP) while a batch of puts is parked: every put ends with an
 * allowed error (NO_SPACE, TIMEOUT, UNAVAILABLE) by its deadline plus libmc's grace for a
 * silent agent (MC_DEADLINE_GRACE_MS) and SLACK_MS, never a hang or a success; after
 * SIGCONT a put succeeds again (once the copies made room) and reads back, and nothing of
 * the batch stays open at the writer. The node TTL is longer than the stop.
 */
START_TEST(test_disk_cluster_parked_put_master_stopped)
{
    const unsigned dl = 2000;
    struct park p;
    struct child_res res;
    json_int_t last;
    mc_client_t *c;
    uint8_t *buf = malloc(LEN);
    uint64_t t0;
    pid_t pid;
    int fd, err = -1;
    bool got;

    ck_assert_ptr_nonnull(buf);
    park_start(&p, "parked_master_stopped", 8000, NULL);
    park_fill(&p);
    pid = child_put(p.c.sock, "ps", 4, dl, &fd);
    ck_assert_msg(stat_until(p.c.sock, "puts_parked", 1, 1, 1500, &last),
                  "the child's puts were not parked (%lld)", (long long)last);
    ck_assert_int_eq(kill(p.fc.master.pid, SIGSTOP), 0);
    got = child_wait(pid, fd, dl + MC_DEADLINE_GRACE_MS + 2000, &res);
    ck_assert_int_eq(kill(p.fc.master.pid, SIGCONT), 0);
    ck_assert_msg(got, "the batch put hangs with mc-master stopped");
    fprintf(stderr, "parked_put_master_stopped: batch rc %d after %llu ms: %s %s %s %s\n",
            res.rc, (unsigned long long)res.ms, mc_strerror(res.results[0]),
            mc_strerror(res.results[1]), mc_strerror(res.results[2]),
            mc_strerror(res.results[3]));
    ck_assert_msg(res.rc == 0, "the batch put with mc-master stopped: %d (%s)", res.rc,
                  res.rc < 0 ? mc_strerror(res.rc) : "items stored");
    for (int i = 0; i < 4; i++)
        ck_assert_msg(allowed_error(res.results[i]), "ps/%d with mc-master stopped: %s (%d)",
                      i, mc_strerror(res.results[i]), res.results[i]);
    ck_assert_msg(res.ms <= dl + MC_DEADLINE_GRACE_MS + SLACK_MS,
                  "the batch ended %llu ms after it began (deadline %u)",
                  (unsigned long long)res.ms, dl);
    /* mc-master back: a put succeeds once the copies (DELAY_MS late) made room */
    c = conn_ms(&p.c, 5000);
    t_fill(buf, LEN, t_disk_seed(0, LEN));
    t0 = t_now_ms();
    while (t_now_ms() - t0 < DELAY_MS + 15000) {
        err = mc_put(c, "ps/after", buf, LEN, NULL);
        if (!allowed_error(err))
            break;
        t_fc_sleep_ms(100);
    }
    ck_assert_msg(err == 0, "put after SIGCONT: %s", mc_strerror(err));
    {
        size_t got_len = 0;
        uint8_t *back = malloc(LEN);

        ck_assert_ptr_nonnull(back);
        ck_assert_int_eq(mc_get(c, "ps/after", back, LEN, &got_len), 0);
        ck_assert_uint_eq(got_len, LEN);
        ck_assert(memcmp(back, buf, LEN) == 0);
        free(back);
    }
    ck_assert_msg(stat_until(p.c.sock, "puts_open", 0, 0, 2000, &last), "%lld open",
                  (long long)last);
    ck_assert_msg(stat_until(p.c.sock, "puts_parked", 0, 0, 2000, &last), "%lld parked",
                  (long long)last);
    free(buf);
    mc_close(c);
    t_fc_finish(&p.fc);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("disk_put_parked");
    TCase *tc = tcase_create("cluster");

    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_disk_cluster_parked_put_deadline_is_no_space);
    tcase_add_test(tc, test_disk_cluster_parked_put_client_killed);
    tcase_add_test(tc, test_disk_cluster_parked_put_writer_sigterm);
    tcase_add_test(tc, test_disk_cluster_parked_put_master_stopped);
    suite_add_tcase(s, tc);
    return t_fc_run(s, NULL);
}
