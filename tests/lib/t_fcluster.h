/*
 * A cluster for the fault tests, on top of tests/cluster/t_cluster.h: one test's mc-master
 * and cluster-mode mc-agents, each optionally inside a network namespace (for partitions),
 * with a short heartbeat and keepalive; a record per test in memory shared with main(), so
 * that a test a failed assertion ends at once still has its daemons' logs shown; the veth
 * pair between two namespaces that the partition tests cut and heal.
 *
 * Header-only (static inline, so a test that needs only part of it gets no warning).
 */
#ifndef MC_T_FCLUSTER_H
#define MC_T_FCLUSTER_H

#include <check.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <mc/mc.h>

#include "tests/cluster/t_cluster.h"

#define T_FC_HB_MS  250u  /* agents' heartbeat_ms: eight beats per TTL */
#define T_FC_KA_MS  250u  /* agents' keepalive_ms (UCX keepalive of their endpoints) */
#define T_FC_OP_MS  MC_OP_TIMEOUT_MS_DEFAULT /* every op's deadline (libmc's default) */
/* "At once": a failover read, a lookup after a clean leave. A reader's agent learns that a
 * killed peer is gone from UCX: on one host (shared-memory lanes) only by the keepalive, so
 * a read that meets a dead replica may wait one keepalive interval before it fails over;
 * four intervals leave room for a loaded machine and stay well under the TTL. */
#define T_FC_AT_ONCE_MS (4u * T_FC_KA_MS)
#define T_FC_MAX_NODES  8

#define T_FC_MAX_TESTS 16

/* One test's daemons. */
struct t_fc {
    char dir[256];
    char token[40];
    char master_host[64];
    unsigned ttl_ms;
    struct t_proc master;
    struct t_proc *nodes[T_FC_MAX_NODES]; /* agents */
    int nnodes;
    struct t_fc_record *rec;
};

/*
 * What main() needs to show a failed test's logs: Check runs each test in a forked process
 * that a failed assertion or a timeout ends at once (no atexit, no teardown), so each test
 * notes its directory and logs in memory shared with main() (MAP_SHARED, made before the
 * runner forks) and marks itself passed at the very end.
 */
struct t_fc_record {
    bool used, passed;
    char test[64];
    char dir[256];
    int nlogs;
    struct {
        char name[32];
        char path[300];
    } logs[T_FC_MAX_NODES + 2];
};

static struct t_fc_record *t_fc_records; /* T_FC_MAX_TESTS of them (main() maps them) */

/* The two namespaces of the partition test (main() creates them). */
static char t_fc_ns_a[32], t_fc_ns_p[32];

static inline void t_fc_note_log(struct t_fc *fc, const struct t_proc *p)
{
    struct t_fc_record *r = fc->rec;

    if (r == NULL || r->nlogs >= T_FC_MAX_NODES + 2)
        return;
    snprintf(r->logs[r->nlogs].name, sizeof(r->logs[0].name), "%s", p->name);
    snprintf(r->logs[r->nlogs].path, sizeof(r->logs[0].path), "%s", p->log);
    r->nlogs++;
}

static inline void t_fc_init(struct t_fc *fc, const char *test, unsigned ttl_ms)
{
    int i;

    memset(fc, 0, sizeof(*fc));
    t_mkdtemp(fc->dir, sizeof(fc->dir));
    t_random_token(fc->token, sizeof(fc->token));
    fc->ttl_ms = ttl_ms;
    for (i = 0; t_fc_records != NULL && i < T_FC_MAX_TESTS; i++) {
        if (!t_fc_records[i].used) {
            fc->rec = &t_fc_records[i];
            fc->rec->used = true;
            snprintf(fc->rec->test, sizeof(fc->rec->test), "%s", test);
            snprintf(fc->rec->dir, sizeof(fc->rec->dir), "%s", fc->dir);
            break;
        }
    }
}

static inline const char *t_fc_ip_bin(void)
{
    static const char *const paths[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};
    size_t i;

    for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    return NULL;
}

/* argv[argc..] = "ip netns exec NS" when netns is not NULL: ip(8) execs the daemon without
 * forking, so the pid we hold (and the one in its ready file) is the daemon's. */
static inline int t_fc_argv_netns(const char **argv, int argc, const char *netns)
{
    if (netns != NULL) {
        argv[argc++] = t_fc_ip_bin();
        argv[argc++] = "netns";
        argv[argc++] = "exec";
        argv[argc++] = netns;
    }
    return argc;
}

static inline int t_fc_argv_log_level(const char **argv, int argc, char *buf, size_t cap)
{
    const char *lvl = getenv("MC_TEST_LOG_LEVEL");

    if (lvl != NULL && lvl[0] != '\0') {
        snprintf(buf, cap, "log_level=%s", lvl);
        argv[argc++] = "--set";
        argv[argc++] = buf;
    }
    return argc;
}

/*
 * Start mc-master (log NAME.log) in netns (NULL: ours) listening on `listen` ("HOST:PORT",
 * port 0 for any) with the test's TTL, and wait until it is ready.
 */
static inline void t_fc_master_start(struct t_fc *fc, const char *netns, const char *listen,
                              const char *name)
{
    char ttl[48], lvl[64], st[48];
    const char *argv[24];
    int argc = 0, r;
    const char *colon = strrchr(listen, ':');

    snprintf(fc->master_host, sizeof(fc->master_host), "%.*s", (int)(colon - listen), listen);
    snprintf(fc->master.ready, sizeof(fc->master.ready), "%s/%s.ready", fc->dir, name);
    unlink(fc->master.ready);
    snprintf(ttl, sizeof(ttl), "node_ttl_ms=%u", fc->ttl_ms);
    argc = t_fc_argv_netns(argv, argc, netns);
    argv[argc++] = t_env_bin("MC_MASTER_BIN");
    argv[argc++] = "--listen";
    argv[argc++] = listen;
    argv[argc++] = "--ready-file";
    argv[argc++] = fc->master.ready;
    argv[argc++] = "--set";
    argv[argc++] = ttl;
    argc = t_fc_argv_log_level(argv, argc, lvl, sizeof(lvl));
    argv[argc] = NULL;
    t_proc_spawn(&fc->master, fc->dir, name, fc->token, argv);
    t_fc_note_log(fc, &fc->master);
    r = t_proc_wait_ready(&fc->master, T_READY_MS);
    if (r != 0) {
        t_proc_dump_log(&fc->master, 8192);
        ck_abort_msg("mc-master not ready (%s)",
                     r > 0 ? t_status_str(fc->master.status, st, sizeof(st)) : "timeout");
    }
}

/*
 * Spawn agent `name` (its files named after `label`: two agents may claim one name) in
 * netns (NULL: ours), listening on host:0, joining the test's master,
 * with --dram dram in `domain` (NULL: its own), small start-up settings, a heartbeat of
 * T_FC_HB_MS, a keepalive of T_FC_KA_MS and `extra` arguments (NULL-terminated, may be NULL;
 * later --set win). Does not wait.
 */
static inline void t_fc_agent_spawn_as(struct t_fc *fc, struct t_proc *p, const char *netns,
                                       const char *host, const char *label, const char *name,
                                       const char *domain, const char *dram,
                                       const char *const *extra)
{
    char master[96], listen[96], hb[48], ka[48], lvl[64];
    const char *argv[64];
    int argc = 0, i;

    ck_assert_int_lt(fc->nnodes, T_FC_MAX_NODES);
    fc->nodes[fc->nnodes++] = p;
    snprintf(master, sizeof(master), "%s:%u", fc->master_host, fc->master.port);
    snprintf(listen, sizeof(listen), "%s:0", host);
    snprintf(hb, sizeof(hb), "heartbeat_ms=%u", T_FC_HB_MS);
    snprintf(ka, sizeof(ka), "keepalive_ms=%u", T_FC_KA_MS);
    snprintf(p->sock, sizeof(p->sock), "%s/%s.sock", fc->dir, label);
    snprintf(p->ready, sizeof(p->ready), "%s/%s.ready", fc->dir, label);
    argc = t_fc_argv_netns(argv, argc, netns);
    argc = t_agent_argv(argv, argc, p, master, listen, name, domain, dram);
    argv[argc++] = "--set";
    argv[argc++] = hb;
    argv[argc++] = "--set";
    argv[argc++] = ka;
    argc = t_fc_argv_log_level(argv, argc, lvl, sizeof(lvl));
    for (i = 0; extra != NULL && extra[i] != NULL && argc < 63; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    t_proc_spawn(p, fc->dir, label, fc->token, argv);
    t_fc_note_log(fc, p);
}

/* t_fc_agent_spawn_as with the files named after the node. */
static inline void t_fc_agent_spawn(struct t_fc *fc, struct t_proc *p, const char *netns,
                                    const char *host, const char *name, const char *domain,
                                    const char *dram, const char *const *extra)
{
    t_fc_agent_spawn_as(fc, p, netns, host, name, name, domain, dram, extra);
}

static inline void t_fc_agent_wait(struct t_proc *p)
{
    char st[48];
    int r = t_proc_wait_ready(p, T_READY_MS);

    if (r != 0) {
        t_proc_dump_log(p, 8192);
        ck_abort_msg("mc-agent %s not ready (%s)", p->name,
                     r > 0 ? t_status_str(p->status, st, sizeof(st)) : "timeout");
    }
}

/* Stop every daemon still running, agents first: each must exit 0 on SIGTERM. Then the
 * test has passed: its directory goes. */
static inline void t_fc_finish(struct t_fc *fc)
{
    char st[48];
    int i;

    for (i = 0; i < fc->nnodes; i++) {
        struct t_proc *p = fc->nodes[i];

        if (p->pid > 0 && t_proc_stop(p) != 0)
            ck_abort_msg("mc-agent %s did not exit cleanly on SIGTERM (%s)", p->name,
                         t_status_str(p->status, st, sizeof(st)));
    }
    if (fc->master.pid > 0 && t_proc_stop(&fc->master) != 0)
        ck_abort_msg("mc-master did not exit cleanly on SIGTERM (%s)",
                     t_status_str(fc->master.status, st, sizeof(st)));
    if (fc->rec != NULL)
        fc->rec->passed = true;
    t_rmdir(fc->dir);
}

static inline mc_client_t *t_fc_conn(struct t_proc *p)
{
    mc_client_t *c = NULL;
    int err = mc_connect(p->sock, &c);

    ck_assert_msg(err == 0, "mc_connect(%s): %s", p->name, mc_strerror(err));
    return c;
}

/* `mcctl stats` through sock, parsed (the caller json_decrefs it). */
static inline json_t *t_fc_stats(const char *sock)
{
    char *out = NULL;
    json_t *j;
    int rc = t_mcctl(sock, &out, "stats", NULL);

    ck_assert_msg(rc == 0, "mcctl stats through %s: exit %d", sock, rc);
    j = json_loads(out, 0, NULL);
    ck_assert_msg(j != NULL, "mcctl stats: not JSON: %s", out);
    free(out);
    return j;
}

/* One integer figure of `mcctl stats` through sock; the figure must be there. */
static inline json_int_t t_fc_stat(const char *sock, const char *field)
{
    json_t *j = t_fc_stats(sock);
    json_t *v = json_object_get(j, field);
    json_int_t x;

    ck_assert_msg(json_is_integer(v), "mcctl stats has no integer %s", field);
    x = json_integer_value(v);
    json_decref(j);
    return x;
}

static inline json_t *t_fc_cluster(const char *sock)
{
    json_t *j = t_cluster_json(sock);

    ck_assert_msg(j != NULL, "mcctl cluster through %s failed", sock);
    return j;
}

/* The state ("alive", "dead") of node `name` in a cluster JSON; "" when it is not listed. */
static inline const char *t_fc_node_state(json_t *j, const char *name)
{
    return t_json_str(t_json_find_str(j, "nodes", "name", name), "state");
}

/* A random salt for t_fill seeds: each run stores other bytes. */
static inline uint64_t t_fc_salt(void)
{
    uint64_t s;

    t_fill_random((uint8_t *)&s, sizeof(s));
    return s;
}

static inline bool t_fc_sh(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd) == 0;
}

static inline void t_fc_netns_teardown(void)
{
    const char *ip = t_fc_ip_bin();

    if (ip == NULL)
        return;
    if (t_fc_ns_a[0] != '\0')
        (void)t_fc_sh("%s netns del %s 2>/dev/null", ip, t_fc_ns_a);
    if (t_fc_ns_p[0] != '\0')
        (void)t_fc_sh("%s netns del %s 2>/dev/null", ip, t_fc_ns_p);
}

/* The partition test's network: namespaces A and P, named after our pid, joined by a veth
 * pair. false (after undoing what was done) when this machine cannot. */
static inline bool t_fc_netns_setup(const char *prefix)
{
    const char *ip = t_fc_ip_bin();
    const char *a = t_fc_ns_a, *p = t_fc_ns_p;

    if (ip == NULL) {
        fprintf(stderr, "%s: no ip(8)\n", prefix);
        return false;
    }
    snprintf(t_fc_ns_a, sizeof(t_fc_ns_a), "%s-a-%d", prefix, (int)getpid());
    snprintf(t_fc_ns_p, sizeof(t_fc_ns_p), "%s-p-%d", prefix, (int)getpid());
    if (!t_fc_sh("%s netns add %s", ip, a) || !t_fc_sh("%s netns add %s", ip, p) ||
        !t_fc_sh("%s -n %s link add mc0 type veth peer name mc0 netns %s", ip, a, p) ||
        !t_fc_sh("%s -n %s addr add 10.77.0.1/24 dev mc0", ip, a) ||
        !t_fc_sh("%s -n %s addr add 10.77.0.2/24 dev mc0", ip, p) ||
        !t_fc_sh("%s -n %s link set lo up", ip, a) ||
        !t_fc_sh("%s -n %s link set lo up", ip, p) ||
        !t_fc_sh("%s -n %s link set mc0 up", ip, a) ||
        !t_fc_sh("%s -n %s link set mc0 up", ip, p)) {
        t_fc_netns_teardown();
        return false;
    }
    /* UCX uses only devices that are up and running: wait for the carrier on both ends */
    for (uint64_t deadline = t_now_ms() + 5000;;) {
        if (t_fc_sh("%s -n %s link show mc0 | grep -q LOWER_UP", ip, a) &&
            t_fc_sh("%s -n %s link show mc0 | grep -q LOWER_UP", ip, p))
            return true;
        if (t_now_ms() >= deadline) {
            fprintf(stderr, "%s: the veth pair has no carrier after 5 s\n", prefix);
            t_fc_netns_teardown();
            return false;
        }
        t_poll_pause();
    }
}

/* The logs of every test that did not reach its end; their directories stay. */
static inline void t_fc_dump_failed(void)
{
    struct t_proc p;
    int i, k;

    for (i = 0; t_fc_records != NULL && i < T_FC_MAX_TESTS; i++) {
        const struct t_fc_record *r = &t_fc_records[i];

        if (!r->used || r->passed)
            continue;
        fprintf(stderr, "%s failed; its daemons' logs are in %s\n", r->test, r->dir);
        for (k = 0; k < r->nlogs; k++) {
            memset(&p, 0, sizeof(p));
            snprintf(p.name, sizeof(p.name), "%s", r->logs[k].name);
            snprintf(p.log, sizeof(p.log), "%s", r->logs[k].path);
            t_proc_dump_log(&p, 6000);
        }
    }
    if (t_fc_records != NULL)
        munmap(t_fc_records, T_FC_MAX_TESTS * sizeof(*t_fc_records));
}


/* A short wait with nothing to poll (a clock step the test needs to pass). */
static inline void t_fc_sleep_ms(unsigned ms)
{
    for (uint64_t until = t_now_ms() + ms; t_now_ms() < until;)
        t_poll_pause();
}

/* Runs suite s (only its tcase `tcase` when not NULL), each test in a child process, with
 * the records of the tests' clusters mapped shared so that the daemons' logs of a test that
 * failed are printed after the run. The exit status of main(): 0 when every test passed. */
static inline int t_fc_run(Suite *s, const char *tcase)
{
    SRunner *sr;
    int failed;

    t_fc_records = mmap(NULL, T_FC_MAX_TESTS * sizeof(*t_fc_records), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (t_fc_records == MAP_FAILED)
        t_fc_records = NULL; /* the tests still run; a failure shows no logs */
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run(sr, NULL, tcase, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    t_fc_dump_failed();
    return failed == 0 ? 0 : 1;
}

#endif /* MC_T_FCLUSTER_H */
