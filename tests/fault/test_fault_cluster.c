/*
 * Cluster fault tests (docs/failure-contract.md): the real mc-master and cluster-mode mc-agents
 * (started by tests/cluster/t_cluster.h), killed with SIGKILL, stopped with SIGTERM,
 * restarted or cut off the network while clients read and write through libmc on other
 * nodes. Each test names the row of docs/failure-contract.md it proves.
 *
 * Every test starts its own master and agents in a fresh directory, since it kills some of
 * them, with a short liveness TTL (node_ttl_ms) so that waiting it out stays cheap, and
 * agents that heartbeat often enough (T_FC_HB_MS) that a loaded machine never misses a
 * whole TTL. Times are measured on the monotonic clock around each call: no call may take
 * longer than the op deadline (nothing hangs), and the bounds asserted are derived from the
 * daemons' settings, each with its reason.
 *
 * Two meson tests run this binary:
 *   test_fault_cluster             the tcase "cluster": every test but the partition;
 *   test_fault_cluster partition   the tcase "partition": main() first builds two network
 *                                  namespaces joined by a veth pair, and exits 77 (SKIP)
 *                                  when it cannot (no ip(8), no CAP_NET_ADMIN, ...). Check
 *                                  has no way to skip one test of a tcase, hence the split.
 *
 * MC_TEST_LOG_LEVEL=debug (or any level) starts every daemon with --set log_level=LEVEL.
 * After a failed test (an assertion, a crash or a timeout), main() prints the tail of each
 * of its daemons' logs and keeps its directory.
 */
#include <check.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <mc/mc.h>

#include "tests/lib/t_fcluster.h"

#define T_FC_TTL_MS 2000u /* node_ttl_ms of the tests that wait for a verdict */

/* One object of a test: its key, bytes and placement. */
struct t_fc_obj {
    char key[48];
    size_t len;
    uint32_t replicas;
    const char *first; /* the node of the first replica: the one it is put through */
    uint8_t *data;
};

static void t_fc_obj_make(struct t_fc_obj *o, const char *key, size_t len, uint32_t replicas,
                          const char *first, uint64_t seed)
{
    snprintf(o->key, sizeof(o->key), "%s", key);
    o->len = len;
    o->replicas = replicas;
    o->first = first;
    o->data = malloc(len);
    ck_assert_ptr_nonnull(o->data);
    t_fill(o->data, len, seed);
}

/* Put o through c: the client of the node named o->first, since the first replica goes to
 * the writer's node when it has room (libmc drops preferred_node, a hint, for now; it is
 * passed all the same). */
static void t_fc_put(mc_client_t *c, const struct t_fc_obj *o)
{
    mc_put_opts_t opt = MC_PUT_OPTS_INIT;
    int err;

    opt.replicas = o->replicas;
    opt.preferred_node = o->first;
    err = mc_put(c, o->key, o->data, o->len, &opt);
    ck_assert_msg(err == 0, "put %s (%zu bytes, replicas %u, first on %s): %s", o->key, o->len,
                  o->replicas, o->first != NULL ? o->first : "any", mc_strerror(err));
}

/*
 * mc_get of key through c, timed: returns the status, the call's duration in *ms and (on
 * success) whether the bytes are exactly want[0..want_len) in *exact. No call may outlast
 * the op deadline: nothing hangs.
 */
static int t_fc_get(mc_client_t *c, const char *via, const char *key, const uint8_t *want,
                    size_t want_len, uint64_t *ms, bool *exact)
{
    size_t cap = want_len + 64, got = 0;
    uint8_t *buf = malloc(cap);
    uint64_t t0;
    int err;

    ck_assert_ptr_nonnull(buf);
    t0 = t_now_ms();
    err = mc_get(c, key, buf, cap, &got);
    *ms = t_now_ms() - t0;
    ck_assert_msg(*ms <= T_FC_OP_MS, "get %s through %s took %llu ms (op deadline %u ms): %s",
                  key, via, (unsigned long long)*ms, T_FC_OP_MS, mc_strerror(err));
    *exact = err == 0 && got == want_len && memcmp(buf, want, want_len) == 0;
    free(buf);
    return err;
}

/* The object must read back byte-exact through c within max_ms; the time it took. */
static uint64_t t_fc_get_exact(mc_client_t *c, const char *via, const struct t_fc_obj *o,
                               uint64_t max_ms)
{
    uint64_t ms;
    bool exact;
    int err = t_fc_get(c, via, o->key, o->data, o->len, &ms, &exact);

    ck_assert_msg(err == 0, "get %s through %s: %s (after %llu ms)", o->key, via,
                  mc_strerror(err), (unsigned long long)ms);
    ck_assert_msg(exact, "get %s through %s: wrong bytes", o->key, via);
    ck_assert_msg(ms <= max_ms, "get %s through %s took %llu ms (at most %llu)", o->key, via,
                  (unsigned long long)ms, (unsigned long long)max_ms);
    return ms;
}

/* mc_exist, timed like t_fc_get. */
static int t_fc_exist(mc_client_t *c, const char *via, const char *key, uint64_t *ms)
{
    uint64_t t0 = t_now_ms();
    int r = mc_exist(c, key);

    *ms = t_now_ms() - t0;
    ck_assert_msg(*ms <= T_FC_OP_MS, "exist %s through %s took %llu ms: %d", key, via,
                  (unsigned long long)*ms, r);
    return r;
}

/* Every node named in names[] holds at least the bytes of the objects whose first replica
 * was meant for it (they were put through it): the test knows which replica is where. */
static void t_fc_check_placement(const char *sock, const struct t_fc_obj *objs, int n,
                                 const char *const *names, int nnames)
{
    json_t *j = t_fc_cluster(sock);
    int i, k;

    for (k = 0; k < nnames; k++) {
        json_int_t want = 0, used = t_node_seg_used(j, names[k]);

        for (i = 0; i < n; i++)
            if (objs[i].first != NULL && strcmp(objs[i].first, names[k]) == 0)
                want += (json_int_t)objs[i].len;
        ck_assert_msg(used >= want, "node %s holds %lld bytes, less than the %lld put there",
                      names[k], (long long)used, (long long)want);
    }
    json_decref(j);
}

static void t_fc_objs_free(struct t_fc_obj *objs, int n)
{
    for (int i = 0; i < n; i++)
        free(objs[i].data);
}

/* --- 1. a data node is killed ------------------------------------------------------------ */

/*
 * docs/failure-contract.md, row "node exits (SIGTERM) or is killed", killed: the master detects it at
 * the TTL and drops its replicas; objects with another replica are still served (the
 * reader's agent fails over at once, row "replica reclaimed or node lost during a read"),
 * the others are not found; nothing hangs.
 */
START_TEST(test_fault_node_killed)
{
    static const char *const data_nodes[] = {"A", "C", "D"};
    enum { PER_NODE = 4, N = 3 * PER_NODE };
    const size_t sizes[PER_NODE] = {T_MIB + 17, 200 * 1024 + 3, 3 * T_MIB + 5, 64 * 1024 + 1};
    const uint32_t reps[PER_NODE] = {1, 1, 2, 2};
    struct t_proc a = {0}, b = {0}, c = {0}, d = {0};
    struct t_fc_obj objs[N];
    struct t_fc fc;
    mc_client_t *cb, *cw[3];
    uint64_t salt = t_fc_salt(), t_kill, t_pass, t_dead = 0, ms, max_ms = 0;
    json_int_t a_id;
    json_t *j;
    char key[48];
    int i, err;
    bool exact;

    t_fc_init(&fc, "node_killed", T_FC_TTL_MS);
    t_fc_master_start(&fc, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn(&fc, &a, NULL, "127.0.0.1", "A", "dA", "64M", NULL);
    t_fc_agent_spawn(&fc, &c, NULL, "127.0.0.1", "C", "dC", "64M", NULL);
    t_fc_agent_spawn(&fc, &d, NULL, "127.0.0.1", "D", "dD", "64M", NULL);
    t_fc_agent_spawn(&fc, &b, NULL, "127.0.0.1", "B", NULL, "0", NULL);
    t_fc_agent_wait(&a);
    t_fc_agent_wait(&c);
    t_fc_agent_wait(&d);
    t_fc_agent_wait(&b);
    cb = t_fc_conn(&b);
    cw[0] = t_fc_conn(&a);
    cw[1] = t_fc_conn(&c);
    cw[2] = t_fc_conn(&d);

    for (i = 0; i < N; i++) {
        const char *first = data_nodes[i / PER_NODE];

        snprintf(key, sizeof(key), "k/%s/r%u/%d", first, reps[i % PER_NODE], i);
        t_fc_obj_make(&objs[i], key, sizes[i % PER_NODE], reps[i % PER_NODE], first,
                      salt + (uint64_t)i);
        t_fc_put(cw[i / PER_NODE], &objs[i]);
    }
    for (i = 0; i < 3; i++)
        mc_close(cw[i]); /* A's client must not outlive A in this process */
    for (i = 0; i < N; i++)
        t_fc_get_exact(cb, "B", &objs[i], T_FC_OP_MS);
    t_fc_check_placement(b.sock, objs, N, data_nodes, 3);
    j = t_fc_cluster(b.sock);
    a_id = t_json_int(t_json_find_str(j, "nodes", "name", "A"), "id");
    json_decref(j);
    ck_assert_int_ge(a_id, 0);

    t_kill = t_now_ms();
    t_proc_kill(&a);

    /* every object with a replica elsewhere reads back at once: the reader's agent fails
     * over; the master has not dropped A's replicas yet (the TTL has not passed) */
    for (i = 0; i < N; i++) {
        if (objs[i].replicas == 1 && strcmp(objs[i].first, "A") == 0)
            continue;
        ms = t_fc_get_exact(cb, "B", &objs[i], T_FC_AT_ONCE_MS);
        max_ms = ms > max_ms ? ms : max_ms;
    }
    t_pass = t_now_ms();
    ck_assert_msg(t_pass - t_kill < T_FC_TTL_MS,
                  "the surviving objects took %llu ms to read after the kill (TTL %u ms)",
                  (unsigned long long)(t_pass - t_kill), T_FC_TTL_MS);
    fprintf(stderr,
            "node_killed: surviving objects read %llu ms after the kill (slowest "
            "%llu ms)\n",
            (unsigned long long)(t_pass - t_kill), (unsigned long long)max_ms);

    /* the objects only A held: not found within TTL + op deadline; until then each read
     * ends within the op deadline with NOT_FOUND or MC_ERR_TIMEOUT, never wrong bytes */
    for (i = 0; i < N; i++) {
        uint64_t deadline = t_kill + T_FC_TTL_MS + T_FC_OP_MS;

        if (!(objs[i].replicas == 1 && strcmp(objs[i].first, "A") == 0))
            continue;
        for (;;) {
            err = t_fc_get(cb, "B", objs[i].key, objs[i].data, objs[i].len, &ms, &exact);
            ck_assert_msg(err == MC_ERR_NOT_FOUND || err == MC_ERR_TIMEOUT ||
                              (err == 0 && exact),
                          "get %s (only on the killed A) through B: %s%s", objs[i].key,
                          mc_strerror(err), err == 0 ? " with wrong bytes" : "");
            if (err == MC_ERR_NOT_FOUND)
                break;
            ck_assert_msg(t_now_ms() < deadline,
                          "get %s (only on the killed A): still %s %llu ms after the kill",
                          objs[i].key, mc_strerror(err),
                          (unsigned long long)(t_now_ms() - t_kill));
            t_poll_pause();
        }
        fprintf(stderr, "node_killed: %s not found %llu ms after the kill (%llu ms call)\n",
                objs[i].key, (unsigned long long)(t_now_ms() - t_kill), (unsigned long long)ms);
    }

    /* the verdict comes from the TTL, not from the first transport error: A is alive in
     * every answer given within half a TTL of the kill, dead by TTL + 2 s (a tick, a
     * heartbeat period and a loaded machine's slack) */
    for (;;) {
        const char *st;
        uint64_t now;

        j = t_fc_cluster(b.sock);
        now = t_now_ms();
        st = t_fc_node_state(j, "A");
        if (strcmp(st, "dead") == 0 || st[0] == '\0') {
            ck_assert_msg(now - t_kill >= T_FC_TTL_MS / 2,
                          "A declared dead %llu ms after the kill (TTL %u ms)",
                          (unsigned long long)(now - t_kill), T_FC_TTL_MS);
            ck_assert_msg(strcmp(st, "dead") == 0, "A is no longer listed");
            ck_assert_str_eq(t_json_str(j, "state"), "degraded");
            ck_assert_ptr_null(t_json_find_int(j, "segments", "node", a_id));
            t_dead = now;
            json_decref(j);
            break;
        }
        json_decref(j);
        ck_assert_msg(now - t_kill < T_FC_TTL_MS + 2000, "A still %s %llu ms after the kill",
                      st, (unsigned long long)(now - t_kill));
        t_poll_pause();
    }
    fprintf(stderr, "node_killed: A dead in `mcctl cluster` %llu ms after the kill\n",
            (unsigned long long)(t_dead - t_kill));
    ck_assert_int_eq(t_fc_stat(b.sock, "nodes_declared_dead"), 1);

    /* after the verdict: A's replicas are dropped, the rest still reads byte-exact */
    for (i = 0; i < N; i++) {
        mc_obj_info_t info;

        if (objs[i].replicas == 1 && strcmp(objs[i].first, "A") == 0) {
            ck_assert_int_eq(t_fc_exist(cb, "B", objs[i].key, &ms), 0);
            continue;
        }
        t_fc_get_exact(cb, "B", &objs[i], T_FC_AT_ONCE_MS);
        err = mc_stat(cb, objs[i].key, &info);
        ck_assert_msg(err == 0, "stat %s: %s", objs[i].key, mc_strerror(err));
        if (strcmp(objs[i].first, "A") == 0)
            ck_assert_msg(info.replicas == 1, "%s: %u replicas after A died", objs[i].key,
                          info.replicas);
    }

    mc_close(cb);
    t_fc_objs_free(objs, N);
    t_fc_finish(&fc);
}
END_TEST

/* --- 2. a data node stops (SIGTERM) ------------------------------------------------------ */

/*
 * docs/failure-contract.md, row "node exits (SIGTERM) or is killed", SIGTERM: the agent finishes, tells
 * the master it leaves and exits 0; its segment is unmounted at once, objects with another
 * replica are still served, the others are not found at once (the TTL, 10 s here, plays no
 * part).
 */
START_TEST(test_fault_node_sigterm)
{
    enum { N = 5 };
    struct t_proc a = {0}, b = {0}, c = {0}, d = {0};
    struct t_fc_obj objs[N];
    struct t_fc fc;
    mc_client_t *cb;
    uint64_t salt = t_fc_salt(), t_exit, ms;
    json_int_t a_id;
    json_t *j;
    char st[48];
    int i, rc, err;
    bool exact;

    t_fc_init(&fc, "node_sigterm", 10000);
    t_fc_master_start(&fc, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn(&fc, &a, NULL, "127.0.0.1", "A", "dA", "64M", NULL);
    t_fc_agent_spawn(&fc, &c, NULL, "127.0.0.1", "C", "dC", "64M", NULL);
    t_fc_agent_spawn(&fc, &d, NULL, "127.0.0.1", "D", "dD", "64M", NULL);
    t_fc_agent_spawn(&fc, &b, NULL, "127.0.0.1", "B", NULL, "0", NULL);
    t_fc_agent_wait(&a);
    t_fc_agent_wait(&c);
    t_fc_agent_wait(&d);
    t_fc_agent_wait(&b);
    cb = t_fc_conn(&b);

    t_fc_obj_make(&objs[0], "s/A/r1/0", 2 * T_MIB + 1, 1, "A", salt + 0);
    t_fc_obj_make(&objs[1], "s/A/r1/1", 4096, 1, "A", salt + 1);
    t_fc_obj_make(&objs[2], "s/A/r2/2", 3 * T_MIB + 3, 2, "A", salt + 2);
    t_fc_obj_make(&objs[3], "s/A/r2/3", 100 * 1024, 2, "A", salt + 3);
    t_fc_obj_make(&objs[4], "s/C/r1/4", T_MIB, 1, "C", salt + 4);
    {
        mc_client_t *ca = t_fc_conn(&a), *cc = t_fc_conn(&c);

        for (i = 0; i < N; i++)
            t_fc_put(strcmp(objs[i].first, "A") == 0 ? ca : cc, &objs[i]);
        mc_close(ca);
        mc_close(cc);
    }
    {
        static const char *const names[] = {"A", "C"};

        t_fc_check_placement(b.sock, objs, N, names, 2);
    }
    j = t_fc_cluster(b.sock);
    a_id = t_json_int(t_json_find_str(j, "nodes", "name", "A"), "id");
    ck_assert_int_eq(t_json_int(t_json_find_str(j, "nodes", "name", "A"), "segments"), 1);
    json_decref(j);

    rc = t_proc_stop(&a);
    t_exit = t_now_ms();
    ck_assert_msg(rc == 0, "mc-agent A on SIGTERM: %s (want exit 0)",
                  t_status_str(a.status, st, sizeof(st)));

    /* its unreplicated objects: not found at once */
    for (i = 0; i < 2; i++) {
        for (;;) {
            int r = t_fc_exist(cb, "B", objs[i].key, &ms);

            ck_assert_msg(r == 0 || r == 1, "exist %s: %s", objs[i].key, mc_strerror(r));
            if (r == 0)
                break;
            ck_assert_msg(t_now_ms() - t_exit < T_FC_AT_ONCE_MS,
                          "%s (only on A) still present %llu ms after A exited", objs[i].key,
                          (unsigned long long)(t_now_ms() - t_exit));
            t_poll_pause();
        }
        err = t_fc_get(cb, "B", objs[i].key, objs[i].data, objs[i].len, &ms, &exact);
        ck_assert_msg(err == MC_ERR_NOT_FOUND, "get %s (only on A) after A left: %s",
                      objs[i].key, mc_strerror(err));
        ck_assert_msg(ms < T_FC_AT_ONCE_MS, "get %s took %llu ms", objs[i].key,
                      (unsigned long long)ms);
    }
    fprintf(stderr, "node_sigterm: A's objects not found %llu ms after it exited\n",
            (unsigned long long)(t_now_ms() - t_exit));

    /* its segment is gone from the cluster at once */
    for (;;) {
        const char *state;

        j = t_fc_cluster(b.sock);
        state = t_fc_node_state(j, "A");
        if (t_json_find_int(j, "segments", "node", a_id) == NULL) {
            ck_assert_msg(state[0] == '\0' || strcmp(state, "dead") == 0,
                          "A left but is listed %s", state);
            json_decref(j);
            break;
        }
        json_decref(j);
        ck_assert_msg(t_now_ms() - t_exit < T_FC_AT_ONCE_MS,
                      "A's segment still listed %llu ms after it exited",
                      (unsigned long long)(t_now_ms() - t_exit));
        t_poll_pause();
    }

    /* the rest still reads byte-exact; A's copies no longer count */
    for (i = 2; i < N; i++) {
        mc_obj_info_t info;

        t_fc_get_exact(cb, "B", &objs[i], T_FC_AT_ONCE_MS);
        ck_assert_int_eq(mc_stat(cb, objs[i].key, &info), 0);
        ck_assert_msg(info.replicas == 1, "%s: %u replicas after A left", objs[i].key,
                      info.replicas);
    }
    /* a clean leave is not a death: nobody waited for the TTL */
    ck_assert_int_eq(t_fc_stat(b.sock, "nodes_declared_dead"), 0);

    mc_close(cb);
    t_fc_objs_free(objs, N);
    t_fc_finish(&fc);
}
END_TEST

/* --- 3. the writer's agent dies mid-put -------------------------------------------------- */

/*
 * docs/failure-contract.md, row "writer's agent dies mid-put": the master detects it at the TTL,
 * revokes its PROCESSING put, the owner fences the allocation; the key stays absent (never
 * partial) and a later put succeeds.
 */
START_TEST(test_fault_writer_agent_killed_mid_put)
{
    static const char *const w_extra[] = {"--test-fault", "put_end_delay_ms=3000", NULL};
    const size_t len = 8 * T_MIB + 123;
    struct t_proc o = {0}, w = {0};
    struct t_fc_obj obj, again;
    struct t_fc fc;
    mc_client_t *co;
    json_int_t used0, fenced0, revoked0;
    uint64_t salt = t_fc_salt(), t_kill, t_fenced, deadline, ms;
    int status, err, r;
    bool exact;
    pid_t pid;

    t_fc_init(&fc, "writer_agent_killed_mid_put", T_FC_TTL_MS);
    t_fc_master_start(&fc, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn(&fc, &o, NULL, "127.0.0.1", "O", "dO", "64M", NULL);
    t_fc_agent_spawn(&fc, &w, NULL, "127.0.0.1", "W", NULL, "0", w_extra);
    t_fc_agent_wait(&o);
    t_fc_agent_wait(&w);
    co = t_fc_conn(&o);
    t_fc_obj_make(&obj, "w/victim", len, 1, NULL, salt);
    used0 = t_fc_stat(o.sock, "used_bytes");
    fenced0 = t_fc_stat(o.sock, "stale_freed_by_fence");
    revoked0 = t_fc_stat(o.sock, "puts_revoked");

    /* a client of W puts the key: its bytes go to O, then W holds the publication back */
    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        mc_client_t *cw = NULL;

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (mc_connect(w.sock, &cw) != 0)
            _exit(2);
        err = mc_put(cw, obj.key, obj.data, obj.len, NULL);
        _exit(err == 0 ? 0 : 3);
    }
    /* wait until every byte is in place at O: W counts a write when it posts it, O when it
     * has landed; all posted and as many landed, W holds the publication back */
    deadline = t_now_ms() + 10000;
    for (;;) {
        json_t *ws = t_fc_stats(w.sock), *os = t_fc_stats(o.sock);
        bool in_place = t_json_int(ws, "bytes_to_peers") >= (json_int_t)len &&
                        t_json_int(os, "writes_served") == t_json_int(ws, "writes_to_peers");

        json_decref(ws);
        json_decref(os);
        if (in_place)
            break;
        ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0, "the writer ended before its bytes "
                                                           "were in place at O");
        ck_assert_msg(t_now_ms() < deadline, "the %zu bytes not in place at O after 10 s", len);
        t_poll_pause();
    }
    ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0, "the put returned within the delay");

    /* the writer's agent dies, then the writer; the put never returned success */
    t_kill = t_now_ms();
    t_proc_kill(&w);
    kill(pid, SIGKILL);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(!(WIFEXITED(status) && WEXITSTATUS(status) == 0),
                  "the put through the killed W succeeded");

    /* the key stays absent, never partial, until and after the owner fenced the block */
    deadline = t_kill + T_FC_TTL_MS + 3000;
    for (;;) {
        r = t_fc_exist(co, "O", obj.key, &ms);
        ck_assert_msg(r == 0, "exist %s through O after W died: %d", obj.key, r);
        err = t_fc_get(co, "O", obj.key, obj.data, obj.len, &ms, &exact);
        ck_assert_msg(err == MC_ERR_NOT_FOUND, "get %s through O after W died: %s%s", obj.key,
                      mc_strerror(err), err == 0 ? (exact ? " (whole)" : " (partial)") : "");
        if (t_fc_stat(o.sock, "stale_freed_by_fence") > fenced0)
            break;
        if (t_now_ms() >= deadline) {
            json_t *jst = t_fc_stats(o.sock), *jcl = t_fc_cluster(o.sock);
            char *dump = json_dumps(jst, JSON_COMPACT);

            fprintf(stderr, "O's stats: %s\n", dump != NULL ? dump : "?");
            free(dump);
            ck_abort_msg("O fenced nothing %llu ms after W was killed (TTL %u ms): "
                         "nodes_declared_dead %lld, puts_revoked %lld, stale_freed_by_timeout "
                         "%lld, used_bytes %lld (%lld before), W %s",
                         (unsigned long long)(t_now_ms() - t_kill), T_FC_TTL_MS,
                         (long long)t_json_int(jst, "nodes_declared_dead"),
                         (long long)t_json_int(jst, "puts_revoked"),
                         (long long)t_json_int(jst, "stale_freed_by_timeout"),
                         (long long)t_json_int(jst, "used_bytes"), (long long)used0,
                         t_fc_node_state(jcl, "W"));
        }
        t_poll_pause();
    }
    t_fenced = t_now_ms();
    ck_assert_msg(t_fenced - t_kill >= T_FC_TTL_MS / 2,
                  "the block was fenced %llu ms after W died, before its TTL (%u ms)",
                  (unsigned long long)(t_fenced - t_kill), T_FC_TTL_MS);
    ck_assert_int_ge(t_fc_stat(o.sock, "nodes_declared_dead"), 1);
    ck_assert_int_gt(t_fc_stat(o.sock, "puts_revoked"), revoked0);
    fprintf(stderr, "writer_agent_killed_mid_put: fenced %llu ms after the kill\n",
            (unsigned long long)(t_fenced - t_kill));

    /* the space is back */
    for (;;) {
        json_int_t used = t_fc_stat(o.sock, "used_bytes");

        if (used == used0)
            break;
        ck_assert_msg(t_now_ms() < deadline, "used_bytes %lld, %lld before the put",
                      (long long)used, (long long)used0);
        t_poll_pause();
    }
    ck_assert_int_eq(t_fc_exist(co, "O", obj.key, &ms), 0);

    /* the key is free: a later put of it through O succeeds and reads back */
    t_fc_obj_make(&again, "w/victim", len, 1, NULL, salt + 1);
    t_fc_put(co, &again);
    t_fc_get_exact(co, "O", &again, T_FC_OP_MS);

    mc_close(co);
    free(obj.data);
    free(again.data);
    t_fc_finish(&fc);
}
END_TEST

/* --- 4. the master restarts -------------------------------------------------------------- */

#define T4_LOSS_MS 2000u /* agents see the master's loss by then (2 x keepalive_ms) */
#define T4_FAST_MS 500u  /* a master-bound op fails this fast once the loss is known */

/*
 * docs/failure-contract.md, row "master restarts": agents see the connection lost; master-bound ops
 * fail fast with MC_ERR_UNAVAILABLE meanwhile, never hang; agents reconnect with backoff
 * (capped at 2 s) and remount; the directory restarts empty.
 *
 * The bound on seeing the loss: the agents' UCX keepalive (keepalive_ms=1000, set here)
 * probes the master's endpoint every interval, so an agent knows within one interval plus a
 * loop turn; twice the interval covers a loaded machine. On loopback the endpoint error
 * usually comes at once.
 */
START_TEST(test_fault_master_restart)
{
    static const char *const ka[] = {"--set", "keepalive_ms=1000", NULL};
    struct t_proc a = {0}, b = {0}, c = {0};
    struct t_proc *nodes[3] = {&a, &b, &c};
    const char *const names[3] = {"A", "B", "C"};
    mc_client_t *cl[3];
    struct t_fc_obj old, objs[3];
    struct t_fc fc;
    char listen[64], key[48];
    uint64_t salt = t_fc_salt(), t_kill, t_ready, t_start, ms, seen[3] = {0, 0, 0};
    uint8_t small[4096];
    int i, k, err, round;
    bool exact;
    json_t *j;

    t_fc_init(&fc, "master_restart", T_FC_TTL_MS);
    t_fc_master_start(&fc, NULL, "127.0.0.1:0", "master");
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", fc.master.port);
    t_fc_agent_spawn(&fc, &a, NULL, "127.0.0.1", "A", "dA", "64M", ka);
    t_fc_agent_spawn(&fc, &b, NULL, "127.0.0.1", "B", NULL, "0", ka);
    t_fc_agent_spawn(&fc, &c, NULL, "127.0.0.1", "C", "dC", "64M", ka);
    for (i = 0; i < 3; i++)
        t_fc_agent_wait(nodes[i]);
    for (i = 0; i < 3; i++)
        cl[i] = t_fc_conn(nodes[i]);

    /* working: an object on A and C, read through every node */
    t_fc_obj_make(&old, "m/old", 2 * T_MIB + 9, 2, "A", salt);
    t_fc_put(cl[0], &old);
    for (i = 0; i < 3; i++)
        t_fc_get_exact(cl[i], names[i], &old, T_FC_OP_MS);
    t_fill(small, sizeof(small), salt + 100);

    t_kill = t_now_ms();
    t_proc_kill(&fc.master);

    /* put, get and exist through every agent, for a second at least: MC_ERR_UNAVAILABLE
     * each time, never a hang; within T4_LOSS_MS of the kill the agent knows, and from its
     * first MC_ERR_UNAVAILABLE on, each call fails within T4_FAST_MS */
    for (round = 0; round < 3 || t_now_ms() - t_kill < 1000; round++) {
        for (i = 0; i < 3; i++) {
            for (k = 0; k < 3; k++) {
                const char *op = k == 0 ? "put" : k == 1 ? "get" : "exist";
                uint64_t t0 = t_now_ms();

                snprintf(key, sizeof(key), "m/down/%d/%d", round, i);
                if (k == 0)
                    err = mc_put(cl[i], key, small, sizeof(small), NULL);
                else if (k == 1)
                    err = mc_get(cl[i], old.key, NULL, 0, NULL); /* master-bound lookup */
                else
                    err = mc_exist(cl[i], old.key);
                ms = t_now_ms() - t0;
                ck_assert_msg(err == MC_ERR_UNAVAILABLE,
                              "%s through %s %llu ms after the master died: %s (%d)", op,
                              names[i], (unsigned long long)(t0 - t_kill), mc_strerror(err),
                              err);
                if (seen[i] == 0) {
                    seen[i] = t_now_ms();
                    ck_assert_msg(seen[i] - t_kill <= T4_LOSS_MS,
                                  "%s saw the master's loss %llu ms after the kill (at most "
                                  "%u)",
                                  names[i], (unsigned long long)(seen[i] - t_kill), T4_LOSS_MS);
                } else {
                    ck_assert_msg(ms <= T4_FAST_MS,
                                  "%s through %s took %llu ms with the master gone (at most "
                                  "%u)",
                                  op, names[i], (unsigned long long)ms, T4_FAST_MS);
                }
            }
        }
        /* a pause between rounds: the agents meanwhile try to rejoin, with backoff */
        for (uint64_t until = t_now_ms() + 100; t_now_ms() < until;)
            t_poll_pause();
    }
    fprintf(stderr, "master_restart: the loss was seen after %llu, %llu, %llu ms\n",
            (unsigned long long)(seen[0] - t_kill), (unsigned long long)(seen[1] - t_kill),
            (unsigned long long)(seen[2] - t_kill));

    /* the master comes back on its port: every agent rejoins within the backoff cap (2 s)
     * plus the time to join and mount (2 s on a loaded machine) */
    t_fc_master_start(&fc, NULL, listen, "master2");
    t_ready = t_now_ms();
    for (i = 0; i < 3; i++) {
        for (;;) {
            err = mc_exist(cl[i], "m/probe");
            if (err == 0)
                break;
            ck_assert_msg(err == MC_ERR_UNAVAILABLE, "exist through %s after the restart: %s",
                          names[i], mc_strerror(err));
            ck_assert_msg(t_now_ms() - t_ready < 4000,
                          "%s has not rejoined %llu ms after the master restarted", names[i],
                          (unsigned long long)(t_now_ms() - t_ready));
            t_poll_pause();
        }
    }
    t_start = t_now_ms();
    for (;;) {
        bool all = true;

        j = t_fc_cluster(b.sock);
        for (i = 0; i < 3; i++)
            all = all && strcmp(t_fc_node_state(j, names[i]), "alive") == 0;
        all = all && json_array_size(json_object_get(j, "segments")) == 2;
        if (all) {
            ck_assert_str_eq(t_json_str(j, "state"), "ok");
            json_decref(j);
            break;
        }
        json_decref(j);
        ck_assert_msg(t_now_ms() - t_ready < 4000,
                      "not every node alive and mounted %llu ms after the restart",
                      (unsigned long long)(t_now_ms() - t_ready));
        t_poll_pause();
    }
    fprintf(stderr, "master_restart: all agents back %llu ms after the master restarted\n",
            (unsigned long long)(t_start - t_ready));

    /* new puts and gets across nodes work, through the clients connected all along */
    t_fc_obj_make(&objs[0], "m/new/0", 3 * T_MIB + 1, 1, "A", salt + 1);
    t_fc_obj_make(&objs[1], "m/new/1", T_MIB + 7, 2, NULL, salt + 2);
    t_fc_obj_make(&objs[2], "m/new/2", 70 * 1024, 1, "C", salt + 3);
    t_fc_put(cl[0], &objs[0]);
    t_fc_put(cl[1], &objs[1]);
    t_fc_put(cl[2], &objs[2]);
    for (i = 0; i < 3; i++)
        for (k = 0; k < 3; k++)
            t_fc_get_exact(cl[k], names[k], &objs[i], T_FC_OP_MS);
    /* the directory restarted empty: the old object is not found (or, once agents re-report
     * what they hold, read whole); never wrong bytes */
    err = t_fc_get(cl[1], "B", old.key, old.data, old.len, &ms, &exact);
    ck_assert_msg(err == MC_ERR_NOT_FOUND || (err == 0 && exact),
                  "get %s after the restart: %s%s", old.key, mc_strerror(err),
                  err == 0 ? " with wrong bytes" : "");

    for (i = 0; i < 3; i++)
        mc_close(cl[i]);
    free(old.data);
    t_fc_objs_free(objs, 3);
    t_fc_finish(&fc);
}
END_TEST

/* --- 5. a partition shorter than the TTL ------------------------------------------------- */

#define T5_TTL_MS 6000u
#define T5_CUT_MS 2500u

static void t_fc_ip(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    int rc;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    rc = system(cmd);
    ck_assert_msg(rc == 0, "`%s`: status %d", cmd, rc);
}

/*
 * docs/architecture.md: "an agent that reconnects before the TTL loses nothing"; docs/failure-contract.md, row "node exits
 * or is killed": a node cut off for less than the TTL is neither, so nothing is dropped.
 *
 * Network: namespace A holds the master, data node Q and client node R; namespace P holds
 * data node P; one veth pair (mc0 on both sides, 10.77.0.1 and .2) joins them, and every
 * daemon speaks tcp only (UCX_TLS=tcp,self, UCX_NET_DEVICES=mc0: shared memory would
 * bypass the cut). The cut is P's mc0 set down for T5_CUT_MS, well under the TTL.
 */
START_TEST(test_fault_partition_shorter_than_ttl_loses_nothing)
{
    enum { N = 4 };
    static const char *const pname[] = {"P"};
    struct t_proc p = {0}, q = {0}, r = {0};
    struct t_fc_obj objs[N], fresh[2];
    struct t_fc fc;
    mc_client_t *cp, *cq, *cr;
    uint64_t salt = t_fc_salt(), t_down, t_up, t_back, deadline, ms;
    struct timespec cut = {T5_CUT_MS / 1000, (long)(T5_CUT_MS % 1000) * 1000000L};
    json_int_t idle;
    json_t *j;
    int i, v, err;
    bool exact;

    setenv("UCX_TLS", "tcp,self", 1);
    setenv("UCX_NET_DEVICES", "mc0", 1);
    t_fc_init(&fc, "partition_shorter_than_ttl_loses_nothing", T5_TTL_MS);
    t_fc_master_start(&fc, t_fc_ns_a, "10.77.0.1:0", "master");
    t_fc_agent_spawn(&fc, &q, t_fc_ns_a, "10.77.0.1", "Q", "dQ", "64M", NULL);
    t_fc_agent_spawn(&fc, &r, t_fc_ns_a, "10.77.0.1", "R", NULL, "0", NULL);
    t_fc_agent_spawn(&fc, &p, t_fc_ns_p, "10.77.0.2", "P", "dP", "64M", NULL);
    t_fc_agent_wait(&q);
    t_fc_agent_wait(&r);
    t_fc_agent_wait(&p);
    cp = t_fc_conn(&p);
    cq = t_fc_conn(&q);
    cr = t_fc_conn(&r);

    t_fc_obj_make(&objs[0], "p/r1/0", 4 * T_MIB + 1, 1, "P", salt + 0);
    t_fc_obj_make(&objs[1], "p/r1/1", T_MIB, 1, "P", salt + 1);
    t_fc_obj_make(&objs[2], "p/r1/2", 100 * 1024 + 7, 1, "P", salt + 2);
    t_fc_obj_make(&objs[3], "p/r2/3", 2 * T_MIB + 3, 2, "P", salt + 3);
    for (i = 0; i < N; i++)
        t_fc_put(cp, &objs[i]);
    t_fc_check_placement(q.sock, objs, N, pname, 1);
    for (i = 0; i < N; i++) {
        t_fc_get_exact(cr, "R", &objs[i], T_FC_OP_MS);
        t_fc_get_exact(cq, "Q", &objs[i], T_FC_OP_MS);
    }
    ck_assert_int_gt(t_fc_stat(r.sock, "bytes_from_peers"), 0); /* over tcp, to P */

    t_down = t_now_ms();
    t_fc_ip("%s -n %s link set mc0 down", t_fc_ip_bin(), t_fc_ns_p);
    /* docs/failure-contract.md, "a replica on an unreachable node counts as absent": during the cut, an
     * object held by P and Q reads from Q through R, well within the op deadline (P is
     * unreachable, not dead: its turn ends after a share of the deadline) */
    ms = t_fc_get_exact(cr, "R", &objs[3], T_FC_OP_MS / 2);
    fprintf(stderr, "partition: a 2-replica read during the cut took %llu ms\n",
            (unsigned long long)ms);
    ck_assert_msg(t_now_ms() - t_down < T5_CUT_MS, "the read outlasted the cut");
    {
        uint64_t left = t_down + T5_CUT_MS - t_now_ms();

        cut.tv_sec = (time_t)(left / 1000);
        cut.tv_nsec = (long)(left % 1000) * 1000000L;
    }
    while (nanosleep(&cut, &cut) != 0 && errno == EINTR)
        ;
    /* the cut is real (nothing bypasses it): the master has not heard from P since */
    j = t_fc_cluster(q.sock);
    idle = t_json_int(t_json_find_str(j, "nodes", "name", "P"), "idle_ms");
    json_decref(j);
    t_fc_ip("%s -n %s link set mc0 up", t_fc_ip_bin(), t_fc_ns_p);
    ck_assert_msg(idle >= (json_int_t)(T5_CUT_MS / 2),
                  "P idle %lld ms at the end of a %u ms cut", (long long)idle, T5_CUT_MS);
    t_up = t_now_ms();
    ck_assert_msg(t_up - t_down < T5_TTL_MS - 1000, "the cut lasted %llu ms (TTL %u ms)",
                  (unsigned long long)(t_up - t_down), T5_TTL_MS);

    /* every object P held reads back byte-exact through R and Q once P's connections are
     * back (a few seconds); meanwhile a read may miss, never return wrong bytes */
    deadline = t_up + 5000;
    for (i = 0; i < N; i++) {
        for (v = 0; v < 2; v++) {
            mc_client_t *cv = v == 0 ? cr : cq;
            const char *via = v == 0 ? "R" : "Q";

            for (;;) {
                err = t_fc_get(cv, via, objs[i].key, objs[i].data, objs[i].len, &ms, &exact);
                if (err == 0 && exact)
                    break;
                ck_assert_msg(err == MC_ERR_NOT_FOUND || err == MC_ERR_TIMEOUT,
                              "get %s through %s after the cut: %s%s", objs[i].key, via,
                              mc_strerror(err), err == 0 ? " with wrong bytes" : "");
                ck_assert_msg(t_now_ms() < deadline,
                              "get %s through %s: still %s %llu ms after the link came back",
                              objs[i].key, via, mc_strerror(err),
                              (unsigned long long)(t_now_ms() - t_up));
                t_poll_pause();
            }
        }
    }
    t_back = t_now_ms();
    fprintf(stderr,
            "partition: cut %llu ms (P idle %lld ms at the master); everything read back "
            "%llu ms after the link came back\n",
            (unsigned long long)(t_up - t_down), (long long)idle,
            (unsigned long long)(t_back - t_up));

    /* wait out the TTL counted from the cut (plus a second: ticks, a loaded machine): the
     * master must not have declared P dead; nothing else could show it */
    while (t_now_ms() < t_down + T5_TTL_MS + 1000)
        t_poll_pause();
    ck_assert_int_eq(t_fc_stat(q.sock, "nodes_declared_dead"), 0);
    j = t_fc_cluster(r.sock);
    ck_assert_str_eq(t_fc_node_state(j, "P"), "alive");
    ck_assert_str_eq(t_json_str(j, "state"), "ok");
    ck_assert_int_eq(t_json_int(t_json_find_str(j, "nodes", "name", "P"), "segments"), 1);
    json_decref(j);
    t_fc_check_placement(q.sock, objs, N, pname, 1);
    for (i = 0; i < N; i++) {
        t_fc_get_exact(cr, "R", &objs[i], T_FC_AT_ONCE_MS);
        t_fc_get_exact(cq, "Q", &objs[i], T_FC_AT_ONCE_MS);
    }

    /* P serves new puts: its own, and those placed on it by others */
    t_fc_obj_make(&fresh[0], "p/new/0", 3 * T_MIB + 11, 1, "P", salt + 10);
    t_fc_obj_make(&fresh[1], "p/new/1", 512 * 1024 + 1, 2, NULL, salt + 11);
    t_fc_put(cp, &fresh[0]);
    t_fc_put(cr, &fresh[1]); /* two replicas: on P and on Q, the only data nodes */
    for (i = 0; i < 2; i++) {
        t_fc_get_exact(cr, "R", &fresh[i], T_FC_OP_MS);
        t_fc_get_exact(cq, "Q", &fresh[i], T_FC_OP_MS);
        t_fc_get_exact(cp, "P", &fresh[i], T_FC_OP_MS);
    }
    t_fc_check_placement(q.sock, fresh, 2, pname, 1);
    ck_assert_int_eq(t_fc_stat(q.sock, "nodes_declared_dead"), 0);

    mc_close(cp);
    mc_close(cq);
    mc_close(cr);
    t_fc_objs_free(objs, N);
    t_fc_objs_free(fresh, 2);
    t_fc_finish(&fc);
}
END_TEST

/* --- 6. a replica is lost during a read -------------------------------------------------- */

#define T6_READERS 3
#define T6_N       3
#define T6_LEN     (16 * T_MIB)
#define T6_LOG     4096

struct t6_read {
    uint64_t start, end;
    int err;
};

struct t6_shared {
    atomic_bool stop;
    atomic_int bad;
    atomic_int nreads[T6_READERS];
    _Atomic uint64_t in_read[T6_READERS]; /* when the read under way began; 0: none */
    char why[T6_READERS][200];
    struct t6_read log[T6_READERS][T6_LOG];
};

/* A reader process: gets the T6_N objects through sock in turn until told to stop; each
 * read must return the exact bytes or MC_ERR_NOT_FOUND, within the op deadline. */
static void t6_reader(struct t6_shared *sh, int r, const char *sock,
                      const struct t_fc_obj *objs)
{
    uint8_t *buf = malloc(T6_LEN + 64);
    mc_client_t *c = NULL;
    unsigned i = (unsigned)r;
    size_t got;
    int err, n;

    if (buf == NULL || mc_connect(sock, &c) != 0) {
        snprintf(sh->why[r], sizeof(sh->why[r]), "reader %d: cannot connect", r);
        atomic_store(&sh->bad, 1);
        _exit(1);
    }
    while (!atomic_load(&sh->stop)) {
        const struct t_fc_obj *o = &objs[i++ % T6_N];
        uint64_t t0 = t_now_ms(), t1;

        got = 0;
        atomic_store(&sh->in_read[r], t0);
        err = mc_get(c, o->key, buf, T6_LEN + 64, &got);
        t1 = t_now_ms();
        atomic_store(&sh->in_read[r], 0);
        n = atomic_load(&sh->nreads[r]);
        if (n < T6_LOG)
            sh->log[r][n] = (struct t6_read){t0, t1, err};
        atomic_store(&sh->nreads[r], n + 1);
        if (t1 - t0 > T_FC_OP_MS)
            snprintf(sh->why[r], sizeof(sh->why[r]), "reader %d: get %s took %llu ms (%s)", r,
                     o->key, (unsigned long long)(t1 - t0), mc_strerror(err));
        else if (err == 0 && (got != o->len || memcmp(buf, o->data, o->len) != 0))
            snprintf(sh->why[r], sizeof(sh->why[r]), "reader %d: get %s: wrong bytes (%zu)", r,
                     o->key, got);
        else if (err != 0 && err != MC_ERR_NOT_FOUND)
            snprintf(sh->why[r], sizeof(sh->why[r]), "reader %d: get %s: %s", r, o->key,
                     mc_strerror(err));
        else
            continue;
        atomic_store(&sh->bad, 1);
        _exit(1);
    }
    mc_close(c);
    free(buf);
    _exit(0);
}

/*
 * docs/failure-contract.md, row "replica reclaimed or node lost during a read": the reader's agent sees
 * the transfer error and tries another replica; the caller gets the exact bytes (or
 * MC_ERR_NOT_FOUND), never wrong bytes, never a hang.
 *
 * First a read right after the first replica's node was killed, then a node killed while
 * three processes read 16 MiB objects through B back to back (reads in flight at the kill).
 */
START_TEST(test_fault_replica_lost_during_read)
{
    static const char *const big_landing[] = {"--set", "landing=64M", NULL};
    static const char *const dname[] = {"D"};
    struct t_proc a = {0}, b = {0}, c = {0}, d = {0};
    struct t_fc_obj k1, objs[T6_N];
    struct t6_shared *sh;
    struct t_fc fc;
    mc_client_t *cb;
    uint64_t salt = t_fc_salt(), t_kill, t_k0, t_k1, ms, deadline;
    pid_t pids[T6_READERS];
    int i, n, status, spanning = 0, ok_after = 0, missing = 0, total = 0;
    uint64_t read_ms = 0;
    char key[48], st[48];
    json_t *j;

    t_fc_init(&fc, "replica_lost_during_read", T_FC_TTL_MS);
    t_fc_master_start(&fc, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn(&fc, &a, NULL, "127.0.0.1", "A", "dA", "64M", NULL);
    t_fc_agent_spawn(&fc, &c, NULL, "127.0.0.1", "C", "dC", "64M", NULL);
    t_fc_agent_spawn(&fc, &b, NULL, "127.0.0.1", "B", NULL, "0", big_landing);
    t_fc_agent_wait(&a);
    t_fc_agent_wait(&c);
    t_fc_agent_wait(&b);
    cb = t_fc_conn(&b);

    /* an object on A (its first replica: the one a reader tries first) and C; A dies; B
     * reads it at once */
    t_fc_obj_make(&k1, "l/k1", 4 * T_MIB + 3, 2, "A", salt);
    {
        mc_client_t *ca = t_fc_conn(&a);

        t_fc_put(ca, &k1);
        mc_close(ca);
    }
    j = t_fc_cluster(b.sock);
    ck_assert_int_ge(t_node_seg_used(j, "A"), (json_int_t)k1.len);
    ck_assert_int_ge(t_node_seg_used(j, "C"), (json_int_t)k1.len);
    json_decref(j);
    t_fc_get_exact(cb, "B", &k1, T_FC_OP_MS);
    t_kill = t_now_ms();
    t_proc_kill(&a);
    ms = t_fc_get_exact(cb, "B", &k1, T_FC_OP_MS);
    ck_assert_msg(t_now_ms() - t_kill < T_FC_TTL_MS,
                  "the read ended %llu ms after the kill: past the TTL, it proves no failover",
                  (unsigned long long)(t_now_ms() - t_kill));
    fprintf(stderr,
            "replica_lost_during_read: read from C %llu ms after A was killed (call "
            "%llu ms, %lld failovers)\n",
            (unsigned long long)(t_now_ms() - t_kill), (unsigned long long)ms,
            (long long)t_fc_stat(b.sock, "read_failovers"));
    for (i = 0; i < 3; i++)
        t_fc_get_exact(cb, "B", &k1, T_FC_AT_ONCE_MS);

    /* the next round needs two live data domains: D joins once A is dead */
    deadline = t_kill + T_FC_TTL_MS + 2000;
    for (;;) {
        bool dead;

        j = t_fc_cluster(b.sock);
        dead = strcmp(t_fc_node_state(j, "A"), "dead") == 0;
        json_decref(j);
        if (dead)
            break;
        ck_assert_msg(t_now_ms() < deadline, "A not dead %llu ms after the kill",
                      (unsigned long long)(t_now_ms() - t_kill));
        t_poll_pause();
    }
    t_fc_agent_spawn(&fc, &d, NULL, "127.0.0.1", "D", "dD", "64M", NULL);
    t_fc_agent_wait(&d);
    {
        mc_client_t *cd = t_fc_conn(&d);

        for (i = 0; i < T6_N; i++) {
            snprintf(key, sizeof(key), "l/big/%d", i);
            t_fc_obj_make(&objs[i], key, T6_LEN, 2, "D", salt + 1 + (uint64_t)i);
            t_fc_put(cd, &objs[i]);
        }
        mc_close(cd);
    }
    t_fc_check_placement(b.sock, objs, T6_N, dname, 1);

    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    fflush(NULL);
    for (i = 0; i < T6_READERS; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            t6_reader(sh, i, b.sock, objs);
        }
    }
    /* reads are under way in every reader: kill D, the first replica of every object */
    deadline = t_now_ms() + 10000;
    for (i = 0; i < T6_READERS; i++) {
        while (atomic_load(&sh->nreads[i]) < 3 && !atomic_load(&sh->bad)) {
            ck_assert_msg(t_now_ms() < deadline, "reader %d made %d reads in 10 s", i,
                          atomic_load(&sh->nreads[i]));
            t_poll_pause();
        }
    }
    /* kill D while reads are under way: once a reader has just begun one (a read of 16 MiB
     * through B lasts 10 ms or more, far longer than the kill takes) */
    for (;;) {
        int busy = 0;

        t_k0 = t_now_ms();
        for (i = 0; i < T6_READERS; i++) {
            uint64_t since = atomic_load(&sh->in_read[i]);

            busy += since != 0 && t_k0 - since <= 2;
        }
        if (busy >= 1)
            break;
        ck_assert_msg(!atomic_load(&sh->bad), "a reader failed before the kill");
        ck_assert_msg(t_k0 < deadline, "the readers were never busy together");
        sched_yield(); /* no sleep: the moment lasts a few ms */
    }
    kill(d.pid, SIGKILL);
    t_k1 = t_now_ms();
    t_proc_kill(&d); /* reaps it */
    /* let every reader finish a few reads that start after the kill */
    deadline = t_k1 + 3000;
    for (;;) {
        int done = 0;

        for (i = 0; i < T6_READERS; i++) {
            int nr = atomic_load(&sh->nreads[i]), after = 0;

            for (n = 0; n < nr && n < T6_LOG; n++)
                after += sh->log[i][n].start > t_k1;
            done += after >= 3;
        }
        if (done == T6_READERS || atomic_load(&sh->bad) || t_now_ms() > deadline)
            break;
        t_poll_pause();
    }
    atomic_store(&sh->stop, true);
    for (i = 0; i < T6_READERS; i++) {
        ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reader %d: %s: %s", i,
                      t_status_str(status, st, sizeof(st)), sh->why[i]);
    }
    ck_assert_msg(!atomic_load(&sh->bad), "a reader failed");

    for (i = 0; i < T6_READERS; i++) {
        int nr = atomic_load(&sh->nreads[i]);

        for (n = 0; n < nr && n < T6_LOG; n++) {
            const struct t6_read *rd = &sh->log[i][n];

            total++;
            read_ms += rd->end - rd->start;
            missing += rd->err == MC_ERR_NOT_FOUND;
            if (rd->start <= t_k0 && rd->end > t_k1)
                spanning++;
            if (rd->start > t_k1) {
                /* C still holds a replica: a read begun after the kill finds it */
                ck_assert_msg(rd->err == 0,
                              "reader %d: a read begun %llu ms after D's kill: "
                              "%s",
                              i, (unsigned long long)(rd->start - t_k1), mc_strerror(rd->err));
                ok_after++;
            }
        }
    }
    fprintf(stderr,
            "replica_lost_during_read: %d reads (%llu ms on average), %d in flight at "
            "the kill, %d not found, %d begun after it (all whole)\n",
            total, (unsigned long long)(total > 0 ? read_ms / (uint64_t)total : 0), spanning,
            missing, ok_after);
    ck_assert_msg(spanning >= 1, "no read was in flight when D was killed");
    ck_assert_int_ge(ok_after, T6_READERS);
    munmap(sh, sizeof(*sh));

    /* afterwards every object reads whole from C */
    for (i = 0; i < T6_N; i++)
        t_fc_get_exact(cb, "B", &objs[i], T_FC_AT_ONCE_MS);
    t_fc_get_exact(cb, "B", &k1, T_FC_AT_ONCE_MS);

    mc_close(cb);
    free(k1.data);
    t_fc_objs_free(objs, T6_N);
    t_fc_finish(&fc);
}
END_TEST

/* --- main -------------------------------------------------------------------------------- */

/* Run a command through the shell; true when it exits 0. */
/* --- an owner stalls (SIGSTOP) mid-transfer ---------------------------------------------- */

/*
 * Row "replica reclaimed or node lost during a read", with an owner that is alive but
 * silent: A (first replica) is stopped while it sends a 24 MiB object to B; the read must
 * not wait for A (its bytes cannot be taken back) but read C's replica beside it, well
 * before the op deadline. Stopped at several moments, so the stop falls before and during
 * the transfer; reads_hedged proves at least one fell mid-transfer.
 */
START_TEST(test_fault_owner_stalled_mid_read_other_replica_serves)
{
    static const char *const big_landing[] = {"--set", "landing=96M", NULL};
    static const unsigned delays_us[] = {0, 1000, 2000, 4000, 7000, 12000};
    struct t_proc a = {0}, b = {0}, c = {0};
    struct t_fc_obj k;
    struct t_fc fc;
    mc_client_t *cb;
    size_t cap;
    uint8_t *buf;
    unsigned i;

    t_fc_init(&fc, "owner_stalled_mid_read", 20000); /* nobody is declared dead here */
    t_fc_master_start(&fc, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn(&fc, &a, NULL, "127.0.0.1", "A", "dA", "64M", NULL);
    t_fc_agent_spawn(&fc, &c, NULL, "127.0.0.1", "C", "dC", "64M", NULL);
    t_fc_agent_spawn(&fc, &b, NULL, "127.0.0.1", "B", NULL, "0", big_landing);
    t_fc_agent_wait(&a);
    t_fc_agent_wait(&c);
    t_fc_agent_wait(&b);
    cb = t_fc_conn(&b);
    t_fc_obj_make(&k, "s/k", 24 * T_MIB + 5, 2, "A", t_fc_salt());
    {
        mc_client_t *ca = t_fc_conn(&a);

        t_fc_put(ca, &k);
        mc_close(ca);
    }
    cap = k.len + 64;
    buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    t_fc_get_exact(cb, "B", &k, T_FC_OP_MS);
    for (i = 0; i < sizeof(delays_us) / sizeof(delays_us[0]); i++) {
        struct timespec ts = {0, (long)delays_us[i] * 1000};
        mc_op_t *op = NULL;
        uint64_t t0 = t_now_ms(), ms;
        size_t got = 0;
        int err;

        memset(buf, 0, cap);
        ck_assert_int_eq(mc_get_async(cb, k.key, buf, cap, &op), 0);
        nanosleep(&ts, NULL);
        kill(a.pid, SIGSTOP);
        err = mc_wait(op, -1, &got);
        ms = t_now_ms() - t0;
        mc_op_free(op);
        kill(a.pid, SIGCONT);
        fprintf(stderr, "owner_stalled_mid_read: A stopped after %u us: %s in %llu ms\n",
                delays_us[i], mc_strerror(err), (unsigned long long)ms);
        ck_assert_msg(err == 0, "get with A stopped after %u us: %s (%llu ms)", delays_us[i],
                      mc_strerror(err), (unsigned long long)ms);
        ck_assert_msg(got == k.len && memcmp(buf, k.data, k.len) == 0,
                      "get with A stopped after %u us: wrong bytes", delays_us[i]);
        ck_assert_msg(ms < T_FC_OP_MS / 2, "get with A stopped after %u us took %llu ms",
                      delays_us[i], (unsigned long long)ms);
        /* A serves again (its stalled send finishes into B's orphaned block) */
        t_fc_get_exact(cb, "B", &k, T_FC_OP_MS);
    }
    fprintf(stderr, "owner_stalled_mid_read: %lld reads hedged, %lld failovers\n",
            (long long)t_fc_stat(b.sock, "reads_hedged"),
            (long long)t_fc_stat(b.sock, "read_failovers"));
    ck_assert_int_ge(t_fc_stat(b.sock, "reads_hedged"), 1);
    free(buf);
    mc_close(cb);
    t_fc_objs_free(&k, 1);
    t_fc_finish(&fc);
}
END_TEST

/*
 * Row "op deadline passes (read or write)" for a put whose owner stalls: the put through the
 * client node B ends with MC_ERR_TIMEOUT at its deadline (not 0 after it, not
 * MC_ERR_UNAVAILABLE, which would tell the caller to reconnect), is never published, and
 * the key reads as before (absent; the old version for an upsert).
 */
START_TEST(test_fault_owner_stalled_put_times_out_at_deadline)
{
    struct t_proc a = {0}, b = {0};
    struct t_fc_obj k, k2;
    struct t_fc fc;
    mc_client_t *cb;
    uint64_t salt = t_fc_salt();
    int round;

    t_fc_init(&fc, "owner_stalled_put", 30000);
    t_fc_master_start(&fc, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn(&fc, &a, NULL, "127.0.0.1", "A", "dA", "128M", NULL);
    t_fc_agent_spawn(&fc, &b, NULL, "127.0.0.1", "B", NULL, "0", NULL);
    t_fc_agent_wait(&a);
    t_fc_agent_wait(&b);
    cb = t_fc_conn(&b);
    t_fc_obj_make(&k, "sp/k", 16 * T_MIB + 7, 1, NULL, salt);
    t_fc_obj_make(&k2, "sp/k", 16 * T_MIB + 7, 1, NULL, salt + 1);
    t_fc_put(cb, &k);
    t_fc_get_exact(cb, "B", &k, T_FC_OP_MS);
    /* round 0: A stopped before the put; round 1: stopped while the bytes move */
    for (round = 0; round < 2; round++) {
        mc_put_opts_t o = MC_PUT_OPTS_INIT;
        mc_op_t *op = NULL;
        uint64_t t0, ms;
        int err;

        o.flags = MC_PUT_UPSERT;
        if (round == 0)
            kill(a.pid, SIGSTOP);
        t0 = t_now_ms();
        ck_assert_int_eq(mc_put_async(cb, k2.key, k2.data, k2.len, &o, &op), 0);
        if (round == 1) {
            struct timespec ts = {0, 2 * 1000 * 1000};

            nanosleep(&ts, NULL);
            kill(a.pid, SIGSTOP);
        }
        err = mc_wait(op, -1, NULL);
        ms = t_now_ms() - t0;
        mc_op_free(op);
        fprintf(stderr, "owner_stalled_put: round %d: %s after %llu ms\n", round,
                mc_strerror(err), (unsigned long long)ms);
        if (round == 1 && err == 0) {
            /* the bytes were in A before it stopped: then the put is whole */
            kill(a.pid, SIGCONT);
            t_fc_get_exact(cb, "B", &k2, T_FC_OP_MS);
            continue;
        }
        ck_assert_msg(err == MC_ERR_TIMEOUT, "round %d: put with its owner stopped: %s", round,
                      mc_strerror(err));
        ck_assert_msg(ms >= T_FC_OP_MS - 50 && ms < T_FC_OP_MS + 700,
                      "round %d: the put ended after %llu ms (deadline %u ms)", round,
                      (unsigned long long)ms, T_FC_OP_MS);
        /* the owner wakes past the deadline: the old version still reads, whole */
        sleep(2);
        kill(a.pid, SIGCONT);
        t_fc_get_exact(cb, "B", &k, T_FC_OP_MS);
        ck_assert_int_eq(mc_client_status(cb), 0); /* a timeout: retry, not reconnect */
    }
    /* and a later upsert lands */
    {
        mc_put_opts_t o = MC_PUT_OPTS_INIT;
        int err;

        o.flags = MC_PUT_UPSERT;
        err = mc_put(cb, k2.key, k2.data, k2.len, &o);
        ck_assert_msg(err == 0, "upsert after the owner woke: %s", mc_strerror(err));
        t_fc_get_exact(cb, "B", &k2, T_FC_OP_MS);
    }
    mc_close(cb);
    t_fc_objs_free(&k, 1);
    t_fc_objs_free(&k2, 1);
    t_fc_finish(&fc);
}
END_TEST

/*
 * test_fault_cluster [partition] [TEST]: the tcase "cluster", or with "partition" the
 * partition test; TEST (a test's function name) runs that test alone.
 */
int main(int argc, char **argv)
{
    const TTest *const cluster_tests[] = {
        test_fault_node_killed,
        test_fault_node_sigterm,
        test_fault_writer_agent_killed_mid_put,
        test_fault_master_restart,
        test_fault_replica_lost_during_read,
        test_fault_owner_stalled_mid_read_other_replica_serves,
        test_fault_owner_stalled_put_times_out_at_deadline,
    };
    const TTest *const partition_test = test_fault_partition_shorter_than_ttl_loses_nothing;
    bool partition = false;
    const char *only = NULL;
    Suite *s;
    TCase *tc, *tp;
    size_t i;
    int failed;

    for (i = 1; i < (size_t)argc; i++) {
        if (strcmp(argv[i], "partition") == 0)
            partition = true;
        else
            only = argv[i];
    }
    if (only != NULL && strcmp(only, partition_test->name) == 0)
        partition = true;

    if (partition && !t_fc_netns_setup("mcfc")) {
        fprintf(stderr, "test_fault_cluster: cannot build network namespaces: skipping\n");
        return 77;
    }
    s = suite_create("fault_cluster");
    tc = tcase_create("cluster");
    tp = tcase_create("partition");
    tcase_set_timeout(tc, 120); /* a loaded host (an ASan run beside others) */
    for (i = 0; i < sizeof(cluster_tests) / sizeof(cluster_tests[0]); i++)
        if (only == NULL || strcmp(only, cluster_tests[i]->name) == 0)
            tcase_add_test(tc, cluster_tests[i]);
    suite_add_tcase(s, tc);
    tcase_set_timeout(tp, 60);
    tcase_add_test(tp, partition_test);
    suite_add_tcase(s, tp);

    failed = t_fc_run(s, partition ? "partition" : "cluster");
    if (partition)
        t_fc_netns_teardown();
    return failed;
}
