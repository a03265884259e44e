/*
 * The master link's failure contract: a master stopped past the node TTL, a second agent
 * started under a live node's name, an agent stopped or cut off past the TTL. Real
 * mc-master and cluster-mode mc-agents (tests/cluster/t_cluster.h), SIGSTOP/SIGCONT, and
 * for the partition a veth pair between two network namespaces.
 *
 * Two meson tests run this binary:
 *   test_fault_master             every test but the partition;
 *   test_fault_master partition   the partition test; exits 77 (SKIP) without network
 *                                 namespaces (no ip(8), no CAP_NET_ADMIN).
 * test_fault_master [partition] TEST runs one test. After a failed test, main() prints
 * the tail of its daemons' logs and keeps its directory.
 */
#include <check.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc.h>

#include "tests/lib/t_fcluster.h"

#define T_FC_HB_MS   250u  /* agents' heartbeat_ms */
#define T_FC_KA_MS   250u  /* agents' keepalive_ms */
#define T_FM_OP_MS   MC_OP_TIMEOUT_MS_DEFAULT
/* master_timeout_ms is left at its default (1000 ms): a master-bound call during a stop
 * fails once it is known silent, so within that plus a heartbeat period and a tick; the
 * bound asserted leaves room for a loaded machine and stays far below the op deadline */
#define T_FM_FAST_MS 1500u

/* The id of node `name` in a cluster JSON when it is alive; -1 otherwise. */
static json_int_t t_fm_alive_id(json_t *j, const char *name)
{
    json_t *n = t_json_find_str(j, "nodes", "name", name);

    if (n == NULL || strcmp(t_json_str(n, "state"), "alive") != 0)
        return -1;
    return t_json_int(n, "id");
}

struct t_fm_obj {
    char key[48];
    size_t len;
    uint8_t *data;
};

static void t_fm_obj_make(struct t_fm_obj *o, const char *key, size_t len, uint64_t seed)
{
    snprintf(o->key, sizeof(o->key), "%s", key);
    o->len = len;
    o->data = malloc(len);
    ck_assert_ptr_nonnull(o->data);
    t_fill(o->data, len, seed);
}

static void t_fm_put(mc_client_t *c, const char *via, const struct t_fm_obj *o)
{
    int err = mc_put(c, o->key, o->data, o->len, NULL);

    ck_assert_msg(err == 0, "put %s through %s: %s", o->key, via, mc_strerror(err));
}

/* mc_get of o through c: the status; *exact when the bytes are o's. Never past the op
 * deadline. */
static int t_fm_get(mc_client_t *c, const char *via, const struct t_fm_obj *o, bool *exact,
                    uint64_t *ms)
{
    size_t cap = o->len + 64, got = 0;
    uint8_t *buf = malloc(cap);
    uint64_t t0 = t_now_ms();
    int err;

    ck_assert_ptr_nonnull(buf);
    err = mc_get(c, o->key, buf, cap, &got);
    *ms = t_now_ms() - t0;
    ck_assert_msg(*ms <= T_FM_OP_MS + 500, "get %s through %s took %llu ms: %s", o->key, via,
                  (unsigned long long)*ms, mc_strerror(err));
    *exact = err == 0 && got == o->len && memcmp(buf, o->data, o->len) == 0;
    free(buf);
    return err;
}

static void t_fm_get_exact(mc_client_t *c, const char *via, const struct t_fm_obj *o)
{
    uint64_t ms;
    bool exact;
    int err = t_fm_get(c, via, o, &exact, &ms);

    ck_assert_msg(err == 0, "get %s through %s: %s", o->key, via, mc_strerror(err));
    ck_assert_msg(exact, "get %s through %s: wrong bytes", o->key, via);
}

/* Wait (until deadline) for p to exit; its exit status, -1 on a signal, -2 when it runs. */
static int t_fm_exit_status(struct t_proc *p, uint64_t deadline_ms)
{
    if (!t_proc_reap(p, deadline_ms))
        return -2;
    return WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1;
}

/* --- the master stopped past the node TTL -------------------------------------------------- */

#define T1_TTL_MS 2000u
#define T1_STOP_MS (2 * T1_TTL_MS)
#define T1_N 40

/*
 * A master stopped (SIGSTOP) for twice the node TTL declares nobody dead when it resumes:
 * it sees it did not run and reads the heartbeats waiting for it. Meanwhile every
 * master-bound call through the agents fails fast with MC_ERR_UNAVAILABLE (not at the op
 * deadline); afterwards the same nodes (same ids) hold every object, the puts that failed
 * during the stop left nothing behind (their late grants were revoked: the keys can be
 * put again at once), and puts work again through the same clients.
 */
START_TEST(test_fault_master_paused_past_ttl_loses_nothing)
{
    struct t_proc a = {0}, b = {0}, c = {0};
    struct t_proc *nodes[3] = {&a, &b, &c};
    const char *const names[3] = {"A", "B", "C"};
    mc_client_t *cl[3];
    struct t_fm_obj objs[T1_N], late[3];
    json_int_t ids[3], nobj;
    uint64_t salt = t_fc_salt(), t_stop, t_cont, t0, ms, worst = 0;
    char key[48];
    uint8_t small[2048];
    struct t_fc fm;
    json_t *j;
    int i, k, err, calls = 0, npub = 0;
    bool exact, published[3];

    t_fc_init(&fm, __func__, T1_TTL_MS);
    t_fc_master_start(&fm, NULL, "127.0.0.1:0", "master");
    for (i = 0; i < 3; i++)
        t_fc_agent_spawn_as(&fm, nodes[i], NULL, "127.0.0.1", names[i], names[i], NULL, "64M", NULL);
    for (i = 0; i < 3; i++)
        t_fc_agent_wait(nodes[i]);
    for (i = 0; i < 3; i++)
        cl[i] = t_fc_conn(nodes[i]);
    for (i = 0; i < T1_N; i++) {
        snprintf(key, sizeof(key), "pause/%d", i);
        t_fm_obj_make(&objs[i], key, 16 * 1024 + (size_t)i * 997, salt + (uint64_t)i);
        t_fm_put(cl[i % 3], names[i % 3], &objs[i]);
    }
    j = t_fc_cluster(a.sock);
    for (i = 0; i < 3; i++)
        ids[i] = t_fm_alive_id(j, names[i]);
    nobj = t_json_int(j, "objects");
    json_decref(j);
    ck_assert_int_eq(nobj, T1_N);
    t_fill(small, sizeof(small), salt + 1000);

    t_stop = t_now_ms();
    ck_assert_int_eq(kill(fm.master.pid, SIGSTOP), 0);
    /* put and get through every agent while the master is stopped: each call fails with
     * MC_ERR_UNAVAILABLE, fast */
    for (k = 0; t_now_ms() - t_stop < T1_STOP_MS - T_FM_FAST_MS; k++) {
        i = k % 3;
        snprintf(key, sizeof(key), "pause/late/%d", k);
        t0 = t_now_ms();
        if (k % 2 == 0)
            err = mc_put(cl[i], key, small, sizeof(small), NULL);
        else
            err = t_fm_get(cl[i], names[i], &objs[k % T1_N], &exact, &ms);
        ms = t_now_ms() - t0;
        ck_assert_msg(err == MC_ERR_UNAVAILABLE,
                      "%s through %s %llu ms into the master's stop: %s (after %llu ms)",
                      k % 2 == 0 ? "put" : "get", names[i],
                      (unsigned long long)(t0 - t_stop), mc_strerror(err),
                      (unsigned long long)ms);
        ck_assert_msg(ms < T_FM_FAST_MS,
                      "%s through %s took %llu ms with the master stopped (at most %u)",
                      k % 2 == 0 ? "put" : "get", names[i], (unsigned long long)ms,
                      T_FM_FAST_MS);
        if (ms > worst)
            worst = ms;
        calls++;
    }
    while (t_now_ms() - t_stop < T1_STOP_MS)
        t_poll_pause();
    ck_assert_int_eq(kill(fm.master.pid, SIGCONT), 0);
    t_cont = t_now_ms();
    fprintf(stderr, "master_paused: %d calls during a %llu ms stop, the slowest %llu ms\n",
            calls, (unsigned long long)(t_cont - t_stop), (unsigned long long)worst);

    /* puts work again through the same clients, soon */
    for (i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "pause/after/%d", i);
        for (;;) {
            err = mc_put(cl[i], key, small, sizeof(small), NULL);
            if (err == 0)
                break;
            ck_assert_msg(err == MC_ERR_UNAVAILABLE, "put through %s after the stop: %s",
                          names[i], mc_strerror(err));
            ck_assert_msg(t_now_ms() - t_cont < 3000,
                          "put through %s still fails %llu ms after the master resumed",
                          names[i], (unsigned long long)(t_now_ms() - t_cont));
            t_fc_sleep_ms(20);
        }
    }
    /* the first put through each agent during the stop (keys 0, 2, 4) may have sent its
     * PUT_END just before the master stopped: the master may publish it on resuming (the
     * caller was told MC_ERR_UNAVAILABLE; a retry sees MC_ERR_EXISTS). Any later one was
     * refused before it asked the master for anything but PUT_START */
    for (i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "pause/late/%d", 2 * i);
        published[i] = mc_exist(cl[i], key) == 1;
        npub += published[i];
    }
    /* nobody was declared dead: same ids, every object readable through every node */
    ck_assert_int_eq(t_fc_stat(a.sock, "nodes_declared_dead"), 0);
    j = t_fc_cluster(b.sock);
    for (i = 0; i < 3; i++)
        ck_assert_msg(t_fm_alive_id(j, names[i]) == ids[i],
                      "node %s: id %lld alive before the stop, %lld after", names[i],
                      (long long)ids[i], (long long)t_fm_alive_id(j, names[i]));
    ck_assert_int_eq(t_json_int(j, "objects"), T1_N + 3 + npub);
    json_decref(j);
    for (i = 0; i < T1_N; i++)
        t_fm_get_exact(cl[(i + 1) % 3], names[(i + 1) % 3], &objs[i]);
    /* the puts that failed during the stop hold nothing: their keys take a put at once
     * (a grant the agent no longer wanted was revoked, else MC_ERR_BUSY) */
    for (i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "pause/late/%d", 2 * i);
        t_fm_obj_make(&late[i], key, 4096 + (size_t)i, salt + 2000 + (uint64_t)i);
        if (published[i])
            continue;
        t_fm_put(cl[i], names[i], &late[i]);
        t_fm_get_exact(cl[(i + 2) % 3], names[(i + 2) % 3], &late[i]);
    }

    for (i = 0; i < 3; i++)
        mc_close(cl[i]);
    for (i = 0; i < T1_N; i++)
        free(objs[i].data);
    for (i = 0; i < 3; i++)
        free(late[i].data);
    t_fc_finish(&fm);
}
END_TEST

/* --- a second agent claims a live node's name -------------------------------------------- */

#define T2_N 17

static const char *const t2_quick[] = {"--set", "connect_timeout_ms=2000", NULL};

static void t2_put_objs(mc_client_t *c, struct t_fm_obj *objs, uint64_t salt)
{
    char key[48];

    for (int i = 0; i < T2_N; i++) {
        snprintf(key, sizeof(key), "name/%d", i);
        t_fm_obj_make(&objs[i], key, 8192 + (size_t)i * 511, salt + (uint64_t)i);
        t_fm_put(c, "A", &objs[i]);
    }
}

/* A still holds and serves every object, under the id it had, and answers stats. */
static void t2_check_a(struct t_proc *a, struct t_proc *b, mc_client_t *ca, mc_client_t *cb,
                       const struct t_fm_obj *objs, json_int_t id)
{
    json_t *j;

    j = t_fc_cluster(b->sock);
    ck_assert_msg(t_fm_alive_id(j, "A") == id, "A: id %lld before, %lld now", (long long)id,
                  (long long)t_fm_alive_id(j, "A"));
    ck_assert_int_eq(t_json_int(t_json_find_str(j, "nodes", "name", "A"), "segments"), 1);
    ck_assert_int_eq(t_json_int(j, "objects"), T2_N);
    json_decref(j);
    ck_assert_int_ge(t_fc_stat(a->sock, "objects"), 0); /* stats answer: not DENIED */
    for (int i = 0; i < T2_N; i++) {
        t_fm_get_exact(cb, "B", &objs[i]);
        t_fm_get_exact(ca, "A", &objs[i]);
    }
}

/*
 * A second agent started under the name of a live node is refused: it exits 3 (after
 * asking until its connect_timeout_ms), and the live node keeps its id, its segment and
 * every object, and serves on.
 */
START_TEST(test_fault_master_live_name_refused)
{
    struct t_proc a = {0}, b = {0}, a2 = {0};
    struct t_fm_obj objs[T2_N];
    mc_client_t *ca, *cb;
    struct t_fc fm;
    json_int_t id;
    json_t *j;
    int st;

    t_fc_init(&fm, __func__, 4000);
    t_fc_master_start(&fm, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn_as(&fm, &a, NULL, "127.0.0.1", "A", "A", NULL, "64M", NULL);
    t_fc_agent_spawn_as(&fm, &b, NULL, "127.0.0.1", "B", "B", NULL, "0", NULL);
    t_fc_agent_wait(&a);
    t_fc_agent_wait(&b);
    ca = t_fc_conn(&a);
    cb = t_fc_conn(&b);
    t2_put_objs(ca, objs, t_fc_salt());
    j = t_fc_cluster(b.sock);
    id = t_fm_alive_id(j, "A");
    json_decref(j);

    t_fc_agent_spawn_as(&fm, &a2, NULL, "127.0.0.1", "A2", "A", NULL, "64M", t2_quick);
    st = t_fm_exit_status(&a2, t_now_ms() + T_READY_MS);
    if (st != 3)
        t_proc_dump_log(&a2, 4096);
    ck_assert_msg(st == 3, "the second agent named A: exit status %d (want 3)", st);
    ck_assert_msg(access(a2.ready, F_OK) != 0, "the refused agent wrote its ready file");
    t2_check_a(&a, &b, ca, cb, objs, id);

    mc_close(ca);
    mc_close(cb);
    for (int i = 0; i < T2_N; i++)
        free(objs[i].data);
    t_fc_finish(&fm);
}
END_TEST

/*
 * The first agent is stopped (SIGSTOP, 3 s, within the TTL) while a second starts under
 * its name: the master still counts the first as live, so the newcomer exits 3; the first
 * resumes with everything it held.
 */
START_TEST(test_fault_master_stopped_agent_keeps_its_name)
{
    struct t_proc a = {0}, b = {0}, a2 = {0};
    struct t_fm_obj objs[T2_N];
    mc_client_t *ca, *cb;
    struct t_fc fm;
    json_int_t id;
    uint64_t t_stop;
    json_t *j;
    int st;

    t_fc_init(&fm, __func__, 8000);
    t_fc_master_start(&fm, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn_as(&fm, &a, NULL, "127.0.0.1", "A", "A", NULL, "64M", NULL);
    t_fc_agent_spawn_as(&fm, &b, NULL, "127.0.0.1", "B", "B", NULL, "0", NULL);
    t_fc_agent_wait(&a);
    t_fc_agent_wait(&b);
    ca = t_fc_conn(&a);
    cb = t_fc_conn(&b);
    t2_put_objs(ca, objs, t_fc_salt());
    j = t_fc_cluster(b.sock);
    id = t_fm_alive_id(j, "A");
    json_decref(j);

    t_stop = t_now_ms();
    ck_assert_int_eq(kill(a.pid, SIGSTOP), 0);
    t_fc_agent_spawn_as(&fm, &a2, NULL, "127.0.0.1", "A2", "A", NULL, "64M", t2_quick);
    st = t_fm_exit_status(&a2, t_stop + T_READY_MS);
    while (t_now_ms() - t_stop < 3000)
        t_poll_pause();
    ck_assert_int_eq(kill(a.pid, SIGCONT), 0);
    if (st != 3)
        t_proc_dump_log(&a2, 4096);
    ck_assert_msg(st == 3, "the second agent named A (A stopped): exit status %d (want 3)", st);
    t2_check_a(&a, &b, ca, cb, objs, id);

    mc_close(ca);
    mc_close(cb);
    for (int i = 0; i < T2_N; i++)
        free(objs[i].data);
    t_fc_finish(&fm);
}
END_TEST

/*
 * The first agent is stopped past the TTL: the master declares it dead, and a second agent
 * gets the name. When the first resumes, its registration is gone and the name is the
 * newcomer's: it exits 3 within a few seconds (it never stays up answering DENIED), and the
 * newcomer serves. Without a newcomer, an agent that lost its registration joins again and
 * serves within a few seconds.
 */
START_TEST(test_fault_master_registration_lost_rejoins_or_exits)
{
    struct t_proc a = {0}, b = {0}, a2 = {0}, c = {0};
    struct t_fm_obj o1, o2, o3;
    mc_client_t *cb, *ca2, *cc;
    uint64_t salt = t_fc_salt(), t_cont;
    struct t_fc fm;
    int st, err;

    t_fc_init(&fm, __func__, 1500);
    t_fc_master_start(&fm, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn_as(&fm, &a, NULL, "127.0.0.1", "A", "A", NULL, "64M", NULL);
    t_fc_agent_spawn_as(&fm, &b, NULL, "127.0.0.1", "B", "B", NULL, "0", NULL);
    t_fc_agent_spawn_as(&fm, &c, NULL, "127.0.0.1", "C", "C", NULL, "64M", NULL);
    t_fc_agent_wait(&a);
    t_fc_agent_wait(&b);
    t_fc_agent_wait(&c);
    cb = t_fc_conn(&b);
    cc = t_fc_conn(&c);

    /* A stopped past the TTL; a newcomer takes the free name */
    ck_assert_int_eq(kill(a.pid, SIGSTOP), 0);
    for (uint64_t until = t_now_ms() + 6000;;) {
        if (t_fc_stat(b.sock, "nodes_declared_dead") >= 1)
            break;
        ck_assert_msg(t_now_ms() < until, "A not declared dead 6 s into its stop");
        t_fc_sleep_ms(50);
    }
    t_fc_agent_spawn_as(&fm, &a2, NULL, "127.0.0.1", "A2", "A", NULL, "64M", NULL);
    t_fc_agent_wait(&a2);
    ck_assert_int_eq(kill(a.pid, SIGCONT), 0);
    t_cont = t_now_ms();
    st = t_fm_exit_status(&a, t_cont + 8000);
    if (st != 3)
        t_proc_dump_log(&a, 4096);
    ck_assert_msg(st == 3, "A, whose name is the newcomer's now: exit status %d (want 3)", st);
    fprintf(stderr, "registration_lost: A exited %llu ms after it resumed\n",
            (unsigned long long)(t_now_ms() - t_cont));
    ca2 = t_fc_conn(&a2);
    t_fm_obj_make(&o1, "reg/1", 70000, salt + 1);
    t_fm_put(ca2, "A2", &o1);
    t_fm_get_exact(cb, "B", &o1);

    /* C stopped past the TTL, nobody takes its name: it joins again and serves */
    ck_assert_int_eq(kill(c.pid, SIGSTOP), 0);
    for (uint64_t until = t_now_ms() + 6000;;) {
        if (t_fc_stat(b.sock, "nodes_declared_dead") >= 2)
            break;
        ck_assert_msg(t_now_ms() < until, "C not declared dead 6 s into its stop");
        t_fc_sleep_ms(50);
    }
    ck_assert_int_eq(kill(c.pid, SIGCONT), 0);
    t_cont = t_now_ms();
    t_fm_obj_make(&o2, "reg/2", 50000, salt + 2);
    for (;;) {
        err = mc_put(cc, o2.key, o2.data, o2.len, NULL);
        if (err == 0)
            break;
        ck_assert_msg(err == MC_ERR_UNAVAILABLE || err == MC_ERR_TIMEOUT,
                      "put through C after its registration was lost: %s", mc_strerror(err));
        ck_assert_msg(t_now_ms() - t_cont < 8000, "C does not serve 8 s after it resumed");
        t_fc_sleep_ms(50);
    }
    fprintf(stderr, "registration_lost: C served again %llu ms after it resumed\n",
            (unsigned long long)(t_now_ms() - t_cont));
    t_fm_get_exact(cb, "B", &o2);
    t_fm_obj_make(&o3, "reg/3", 9000, salt + 3);
    t_fm_put(cb, "B", &o3);
    t_fm_get_exact(cc, "C", &o3);
    ck_assert_int_ge(t_fc_stat(c.sock, "objects"), 0);

    mc_close(cb);
    mc_close(cc);
    mc_close(ca2);
    free(o1.data);
    free(o2.data);
    free(o3.data);
    t_fc_finish(&fm);
}
END_TEST

/* --- a partition longer than the TTL ----------------------------------------------------- */

#define T5_TTL_MS 4000u
#define T5_CUT_MS 8000u
#define T5_N      6

/* A status a call may end with around a partition: success, or a retryable failure. */
static bool t5_ok(int err, bool absent_ok)
{
    return err == 0 || err == MC_ERR_UNAVAILABLE || err == MC_ERR_TIMEOUT ||
           (absent_ok && err == MC_ERR_NOT_FOUND);
}

/*
 * Node P is cut off (its link down) for twice the TTL: the master declares it dead. During
 * the cut P's master-bound calls fail fast with MC_ERR_UNAVAILABLE. After the link is back,
 * P joins again; every call through P or Q then succeeds or fails with a retryable code
 * (UNAVAILABLE, TIMEOUT, NOT_FOUND for what the cut lost), never INTERNAL, DENIED or
 * CORRUPT, and within a few seconds puts through P work and what Q holds reads back exact
 * through P.
 *
 * Network as in test_fault_cluster's partition test: master, Q and R in namespace A, P in
 * namespace P, one veth pair, tcp only.
 */
START_TEST(test_fault_master_partition_longer_than_ttl)
{
    struct t_proc p = {0}, q = {0}, r = {0};
    struct t_fm_obj onq[T5_N], onp[T5_N], fresh;
    mc_client_t *cp, *cq, *cr;
    uint64_t salt = t_fc_salt(), t_down, t_up, t0, ms, worst = 0;
    char key[48];
    uint8_t small[4096];
    struct t_fc fm;
    int i, k, err, calls = 0;
    bool exact;

    setenv("UCX_TLS", "tcp,self", 1);
    setenv("UCX_NET_DEVICES", "mc0", 1);
    t_fc_init(&fm, __func__, T5_TTL_MS);
    t_fc_master_start(&fm, t_fc_ns_a, "10.77.0.1:0", "master");
    t_fc_agent_spawn_as(&fm, &q, t_fc_ns_a, "10.77.0.1", "Q", "Q", NULL, "64M", NULL);
    t_fc_agent_spawn_as(&fm, &r, t_fc_ns_a, "10.77.0.1", "R", "R", NULL, "0", NULL);
    t_fc_agent_spawn_as(&fm, &p, t_fc_ns_p, "10.77.0.2", "P", "P", NULL, "64M", NULL);
    t_fc_agent_wait(&q);
    t_fc_agent_wait(&r);
    t_fc_agent_wait(&p);
    cp = t_fc_conn(&p);
    cq = t_fc_conn(&q);
    cr = t_fc_conn(&r);
    for (i = 0; i < T5_N; i++) {
        snprintf(key, sizeof(key), "cut/q/%d", i);
        t_fm_obj_make(&onq[i], key, 100 * 1024 + (size_t)i, salt + (uint64_t)i);
        t_fm_put(cq, "Q", &onq[i]);
        snprintf(key, sizeof(key), "cut/p/%d", i);
        t_fm_obj_make(&onp[i], key, 60 * 1024 + (size_t)i, salt + 100 + (uint64_t)i);
        t_fm_put(cp, "P", &onp[i]);
    }
    for (i = 0; i < T5_N; i++)
        t_fm_get_exact(cp, "P", &onq[i]);
    t_fill(small, sizeof(small), salt + 1000);

    t_down = t_now_ms();
    ck_assert_msg(t_fc_sh("%s -n %s link set mc0 down", t_fc_ip_bin(), t_fc_ns_p),
                  "link down");
    /* during the cut: P's master-bound calls fail fast */
    for (k = 0; t_now_ms() - t_down < T5_CUT_MS - T_FM_FAST_MS; k++) {
        snprintf(key, sizeof(key), "cut/during/%d", k);
        t0 = t_now_ms();
        if (k % 2 == 0)
            err = mc_put(cp, key, small, sizeof(small), NULL);
        else
            err = mc_exist(cp, onq[k % T5_N].key);
        ms = t_now_ms() - t0;
        ck_assert_msg(err == MC_ERR_UNAVAILABLE,
                      "%s through P %llu ms into the cut: %s (%d) after %llu ms",
                      k % 2 == 0 ? "put" : "exist", (unsigned long long)(t0 - t_down),
                      mc_strerror(err), err, (unsigned long long)ms);
        ck_assert_msg(ms < T_FM_FAST_MS, "%s through P took %llu ms during the cut",
                      k % 2 == 0 ? "put" : "exist", (unsigned long long)ms);
        if (ms > worst)
            worst = ms;
        calls++;
        t_fc_sleep_ms(50);
    }
    while (t_now_ms() - t_down < T5_CUT_MS)
        t_poll_pause();
    ck_assert_msg(t_fc_sh("%s -n %s link set mc0 up", t_fc_ip_bin(), t_fc_ns_p), "link up");
    t_up = t_now_ms();
    fprintf(stderr, "partition: %d calls through P during the %llu ms cut, the slowest %llu "
                    "ms\n",
            calls, (unsigned long long)(t_up - t_down), (unsigned long long)worst);
    ck_assert_int_ge(t_fc_stat(q.sock, "nodes_declared_dead"), 1);

    /* after the heal: puts and gets through P, and gets through Q and R, until puts
     * through P succeed and Q's objects read back through P; every status is retryable */
    for (k = 0;; k++) {
        bool put_ok, all_q = true;

        snprintf(key, sizeof(key), "cut/after/%d", k);
        err = mc_put(cp, key, small, sizeof(small), NULL);
        ck_assert_msg(t5_ok(err, false), "put through P %llu ms after the heal: %s (%d)",
                      (unsigned long long)(t_now_ms() - t_up), mc_strerror(err), err);
        put_ok = err == 0;
        for (i = 0; i < T5_N; i++) {
            err = t_fm_get(cp, "P", &onq[i], &exact, &ms);
            ck_assert_msg(t5_ok(err, false) && (err != 0 || exact),
                          "get %s (on Q) through P after the heal: %s (%d)%s", onq[i].key,
                          mc_strerror(err), err, err == 0 && !exact ? " wrong bytes" : "");
            all_q = all_q && err == 0;
            /* P's own objects may be lost with its registration: absent, never corrupt */
            err = t_fm_get(cp, "P", &onp[i], &exact, &ms);
            ck_assert_msg(t5_ok(err, true) && (err != 0 || exact),
                          "get %s (on P) through P after the heal: %s (%d)%s", onp[i].key,
                          mc_strerror(err), err, err == 0 && !exact ? " wrong bytes" : "");
            err = t_fm_get(cr, "R", &onp[i], &exact, &ms);
            ck_assert_msg(t5_ok(err, true) && (err != 0 || exact),
                          "get %s (on P) through R after the heal: %s (%d)%s", onp[i].key,
                          mc_strerror(err), err, err == 0 && !exact ? " wrong bytes" : "");
        }
        if (put_ok && all_q)
            break;
        ck_assert_msg(t_now_ms() - t_up < 10000,
                      "P does not serve %llu ms after the heal (put %s, Q's objects %s)",
                      (unsigned long long)(t_now_ms() - t_up), put_ok ? "ok" : "failing",
                      all_q ? "ok" : "failing");
        t_fc_sleep_ms(100);
    }
    fprintf(stderr, "partition: P served again %llu ms after the heal\n",
            (unsigned long long)(t_now_ms() - t_up));
    t_fm_obj_make(&fresh, "cut/fresh", 200 * 1024 + 3, salt + 5000);
    t_fm_put(cp, "P", &fresh);
    t_fm_get_exact(cr, "R", &fresh);
    t_fm_get_exact(cq, "Q", &fresh);

    mc_close(cp);
    mc_close(cq);
    mc_close(cr);
    for (i = 0; i < T5_N; i++) {
        free(onq[i].data);
        free(onp[i].data);
    }
    free(fresh.data);
    t_fc_finish(&fm);
}
END_TEST

/* --- main -------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    const TTest *const tests[] = {
        test_fault_master_paused_past_ttl_loses_nothing,
        test_fault_master_live_name_refused,
        test_fault_master_stopped_agent_keeps_its_name,
        test_fault_master_registration_lost_rejoins_or_exits,
    };
    const TTest *const partition_test = test_fault_master_partition_longer_than_ttl;
    bool partition = false;
    const char *only = NULL;
    Suite *s;
    TCase *tc;
    int failed;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "partition") == 0)
            partition = true;
        else
            only = argv[i];
    }
    if (only != NULL && strcmp(only, partition_test->name) == 0)
        partition = true;
    if (partition && !t_fc_netns_setup("mcfm")) {
        fprintf(stderr, "test_fault_master: cannot build network namespaces: skipping\n");
        return 77;
    }
    s = suite_create("fault_master");
    tc = tcase_create(partition ? "partition" : "master");
    tcase_set_timeout(tc, 90);
    if (partition) {
        tcase_add_test(tc, partition_test);
    } else {
        for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
            if (only == NULL || strcmp(only, tests[i]->name) == 0)
                tcase_add_test(tc, tests[i]);
    }
    suite_add_tcase(s, tc);
    failed = t_fc_run(s, NULL);
    if (partition)
        t_fc_netns_teardown();
    return failed;
}
