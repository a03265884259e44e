/*
 * Master high availability (docs/master.md, "High availability"; docs/failure-contract.md,
 * "master restarts"): the directory comes back from what the agents hold. Real mc-master
 * and cluster-mode mc-agents on loopback (tests/lib/t_fcluster.h).
 *
 *   test_ha_directory_rebuilt_from_agents  kill -9 the master, start a new one on its
 *                                          address: every complete object is back, with
 *                                          its bytes; nothing removed, replaced or
 *                                          expired comes back; later puts win.
 *   test_ha_publish_drop_lost              owners lose the first PUBLISHes and DROPs: sent
 *                                          again until answered; a new master rebuilt from
 *                                          them loses nothing and brings nothing back.
 *   test_ha_etcd_client                    the etcd v3 client against a real etcd.
 *   test_ha_leader_killed_under_load       3 masters on etcd, clients putting and
 *                                          getting; kill -9 the leader: a standby leads
 *                                          and serves within 5 s, nothing complete is lost.
 *   test_ha_leader_sigstop                 a stopped leader loses the lead; resumed, it
 *                                          serves nobody.
 *   test_ha_etcd_member_lost               3 etcd members: one lost changes nothing;
 *                                          quorum lost: data ops fail fast, then return.
 *   test_ha_publish_carried_over           PUBLISHes undelivered at a master change are
 *                                          carried over: the new master learns the
 *                                          owners' replicas, nothing is lost.
 *   test_ha_publish_carried_over_pure_client   the same with a writer of dram 0 (it
 *                                          holds the new master's window open itself).
 *   test_ha_publish_carried_owner_lost     an owner killed with the leader: the writer's
 *                                          objects read back within 5 s all the same.
 *
 *   test_ha_rebuild_figure                 (by name only) a figure: T_HA_REBUILD_N small
 *                                          objects (1 M) rebuilt by a new master.
 *
 * The tests that need etcd exit 77 (SKIP) when its binary is missing (MC_ETCD_BIN, else
 * /usr/bin/etcd). T_HA_KILLS=N makes test_ha_leader_killed_under_load kill N leaders in a
 * row and print the failover times (docs/performance.md).
 *
 * test_ha [TEST] runs one test. After a failed test, main() prints the tail of its
 * daemons' logs and keeps its directory.
 */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc.h>

#include "tests/ha/t_ha.h"

#define T_HA_TTL_MS 2000u /* node TTL of the masters */
#define T_HA_REBUILD_MS 15000u

struct t_ha_obj {
    char key[48];
    size_t len;
    uint8_t *data;
};

static void t_ha_obj_make(struct t_ha_obj *o, const char *key, size_t len, uint64_t seed)
{
    if (key != o->key)
        snprintf(o->key, sizeof(o->key), "%s", key);
    o->len = len;
    free(o->data);
    o->data = malloc(len);
    ck_assert_ptr_nonnull(o->data);
    t_fill(o->data, len, seed);
}

static void t_ha_put(mc_client_t *c, const struct t_ha_obj *o, uint32_t replicas,
                     uint32_t flags, uint64_t ttl_ms)
{
    mc_put_opts_t opts = MC_PUT_OPTS_INIT;
    int err;

    opts.replicas = replicas;
    opts.flags = flags;
    opts.ttl_ms = ttl_ms;
    err = mc_put(c, o->key, o->data, o->len, &opts);
    ck_assert_msg(err == 0, "put %s: %s", o->key, mc_strerror(err));
}

/* mc_get of o through c: 0 with exactly o's bytes, else the status (MC_ERR_CORRUPT for
 * other bytes). */
static int t_ha_get(mc_client_t *c, const struct t_ha_obj *o)
{
    size_t cap = o->len + 64, got = 0;
    uint8_t *buf = malloc(cap);
    int err;

    ck_assert_ptr_nonnull(buf);
    err = mc_get(c, o->key, buf, cap, &got);
    if (err == 0 && (got != o->len || memcmp(buf, o->data, o->len) != 0))
        err = MC_ERR_CORRUPT;
    free(buf);
    return err;
}

/* The master's object count through agent sock, -1 when it does not answer. */
static json_int_t t_ha_objects(const char *sock)
{
    char *out = NULL;
    json_t *j;
    json_int_t n = -1;

    if (t_mcctl(sock, &out, "cluster", NULL) == 0 && out != NULL) {
        j = json_loads(out, 0, NULL);
        if (j != NULL && json_integer_value(json_object_get(j, "objects")) >= 0 &&
            json_object_get(j, "objects") != NULL)
            n = json_integer_value(json_object_get(j, "objects"));
        json_decref(j);
    }
    free(out);
    return n;
}

/* A figure of `mcctl stats` through agent sock, -1 when it does not answer (the agent
 * answers stats only while it has a master). */
static json_int_t t_ha_stat_try(const char *sock, const char *field)
{
    char *out = NULL;
    json_t *j;
    json_int_t n = -1;

    if (t_mcctl(sock, &out, "stats", NULL) == 0 && out != NULL) {
        j = json_loads(out, 0, NULL);
        if (j != NULL && json_is_integer(json_object_get(j, field)))
            n = json_integer_value(json_object_get(j, field));
        json_decref(j);
    }
    free(out);
    return n;
}

/* --- the directory rebuilt from the agents ----------------------------------------------- */

#define T1_N 120     /* objects kept */
#define T1_REMOVED 20
#define T1_UPSERTED 20
#define T1_TTL 10
#define T1_OBJ_TTL_MS 1500u

/*
 * Objects put through three agents (one or two replicas, some soft-pinned), some of them
 * removed, some replaced by an upsert, some with a short TTL. The master is killed (-9) and
 * a new one started on its address: as the agents rejoin and report what their segments
 * hold, it knows every complete object again (count and bytes, through every node); the
 * removed ones, the replaced versions and the expired ones stay gone; an upsert after the
 * rebuild wins over the restored version (the version counter moved past it), and a plain
 * put of a restored key is refused as for any complete object.
 */
START_TEST(test_ha_directory_rebuilt_from_agents)
{
    struct t_proc a = {0}, b = {0}, c = {0};
    struct t_proc *nodes[3] = {&a, &b, &c};
    const char *const names[3] = {"A", "B", "C"};
    static struct t_ha_obj objs[T1_N + T1_REMOVED + T1_TTL];
    mc_client_t *cl[3];
    uint64_t salt = t_fc_salt(), t_kill, t_start, t_back = 0;
    char key[48], listen[64];
    struct t_fc fm;
    json_int_t n;
    int i, k, err;

    t_fc_init(&fm, __func__, T_HA_TTL_MS);
    t_fc_master_start(&fm, NULL, "127.0.0.1:0", "master");
    for (i = 0; i < 3; i++)
        t_fc_agent_spawn(&fm, nodes[i], NULL, "127.0.0.1", names[i], NULL, "64M", NULL);
    for (i = 0; i < 3; i++)
        t_fc_agent_wait(nodes[i]);
    for (i = 0; i < 3; i++)
        cl[i] = t_fc_conn(nodes[i]);
    for (i = 0; i < T1_N + T1_REMOVED + T1_TTL; i++) {
        snprintf(key, sizeof(key), "ha/%d", i);
        t_ha_obj_make(&objs[i], key, 3000 + (size_t)i * 1013, salt + (uint64_t)i);
        t_ha_put(cl[i % 3], &objs[i], 1 + (uint32_t)(i % 2),
                 i % 7 == 0 ? MC_PUT_PIN_SOFT : 0, i >= T1_N + T1_REMOVED ? T1_OBJ_TTL_MS : 0);
    }
    /* removed: must not come back */
    for (i = T1_N; i < T1_N + T1_REMOVED; i++)
        ck_assert_int_eq(mc_remove(cl[(i + 1) % 3], objs[i].key), 0);
    /* replaced by an upsert through another node: the new bytes must win */
    for (i = 0; i < T1_UPSERTED; i++) {
        t_ha_obj_make(&objs[i], objs[i].key, 5000 + (size_t)i * 77, salt + 10000 + (uint64_t)i);
        t_ha_put(cl[(i + 2) % 3], &objs[i], 1 + (uint32_t)((i + 1) % 2), MC_PUT_UPSERT, 0);
    }
    n = t_ha_objects(a.sock);
    ck_assert_int_eq(n, T1_N + T1_TTL);
    /* the owners hear of publications and frees right after the answers: let them land */
    t_fc_sleep_ms(300);

    t_kill = t_now_ms();
    ck_assert_int_eq(kill(fm.master.pid, SIGKILL), 0);
    ck_assert(t_proc_reap(&fm.master, t_now_ms() + 5000));
    fm.master.pid = 0;
    /* past the short TTLs before the new master starts */
    while (t_now_ms() - t_kill < T1_OBJ_TTL_MS + 200)
        t_poll_pause();
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", fm.master.port);
    t_fc_master_start(&fm, NULL, listen, "master2");
    t_start = t_now_ms();
    /* the agents rejoin (their backoff) and report: every kept object is known again */
    for (;;) {
        n = t_ha_objects(a.sock);
        if (n == T1_N) {
            t_back = t_now_ms();
            break;
        }
        ck_assert_msg(n < T1_N, "the new master knows %lld objects, only %d were kept",
                      (long long)n, T1_N);
        if (t_now_ms() - t_start >= T_HA_REBUILD_MS)
            for (i = 0; i < T1_N; i++)
                if (mc_exist(cl[0], objs[i].key) != 1)
                    fprintf(stderr, "missing: %s\n", objs[i].key);
        ck_assert_msg(t_now_ms() - t_start < T_HA_REBUILD_MS,
                      "%lld of %d objects known %u ms after the new master started",
                      (long long)n, T1_N, T_HA_REBUILD_MS);
        t_fc_sleep_ms(50);
    }
    fprintf(stderr, "ha_rebuilt: %d objects back %llu ms after the new master was ready\n",
            T1_N, (unsigned long long)(t_back - t_start));
    /* every kept object reads back exactly through every node (its newest bytes) */
    for (i = 0; i < T1_N; i++) {
        for (k = 0; k < 3; k++) {
            uint64_t t0 = t_now_ms();

            while ((err = t_ha_get(cl[k], &objs[i])) == MC_ERR_UNAVAILABLE &&
                   t_now_ms() - t0 < T_HA_REBUILD_MS)
                t_fc_sleep_ms(50);
            ck_assert_msg(err == 0, "get %s through %s after the rebuild: %s", objs[i].key,
                          names[k], mc_strerror(err));
        }
    }
    /* nothing removed or expired came back */
    for (i = T1_N; i < T1_N + T1_REMOVED + T1_TTL; i++)
        ck_assert_msg(mc_exist(cl[i % 3], objs[i].key) == 0, "%s came back (%s)", objs[i].key,
                      i < T1_N + T1_REMOVED ? "removed" : "expired");
    ck_assert_int_eq(t_ha_objects(b.sock), T1_N);
    /* puts after the rebuild: a plain one on a restored key is refused, an upsert wins */
    {
        mc_put_opts_t plain = MC_PUT_OPTS_INIT;

        ck_assert_int_eq(mc_put(cl[0], objs[50].key, objs[50].data, objs[50].len, &plain),
                         MC_ERR_EXISTS);
    }
    for (i = 40; i < 60; i++) {
        t_ha_obj_make(&objs[i], objs[i].key, 1234 + (size_t)i, salt + 20000 + (uint64_t)i);
        t_ha_put(cl[i % 3], &objs[i], 2, MC_PUT_UPSERT, 0);
        for (k = 0; k < 3; k++)
            ck_assert_int_eq(t_ha_get(cl[k], &objs[i]), 0);
    }
    snprintf(key, sizeof(key), "ha/after");
    t_ha_obj_make(&objs[T1_N], key, 4096, salt + 30000);
    t_ha_put(cl[1], &objs[T1_N], 1, 0, 0);
    ck_assert_int_eq(t_ha_get(cl[2], &objs[T1_N]), 0);

    for (i = 0; i < 3; i++)
        mc_close(cl[i]);
    for (i = 0; i < T1_N + T1_REMOVED + T1_TTL; i++) {
        free(objs[i].data);
        objs[i].data = NULL;
    }
    t_fc_finish(&fm);
}
END_TEST

#define T3_N 60
#define T3_DRAIN_MS 30000u

/*
 * A drain, then a new master (review finding H4): node C is drained (its objects copied to
 * A and B); the master is killed (-9) and a new one started: C's objects, known to the new
 * master only through the copies' owners' reports, all read back (C, drained, holds none
 * of them). Objects put through every node, one replica, some soft-pinned, some with a TTL.
 */
START_TEST(test_ha_drained_then_rebuilt)
{
    struct t_proc a = {0}, b = {0}, c = {0};
    struct t_proc *nodes[3] = {&a, &b, &c};
    const char *const names[3] = {"A", "B", "C"};
    static struct t_ha_obj objs[T3_N];
    mc_client_t *cl[3];
    uint64_t salt = t_fc_salt(), t0;
    char key[48], listen[64];
    struct t_fc fm;
    json_int_t n, on_c;
    json_t *j, *node;
    int i, k, err;

    t_fc_init(&fm, __func__, T_HA_TTL_MS);
    t_fc_master_start(&fm, NULL, "127.0.0.1:0", "master");
    for (i = 0; i < 3; i++)
        t_fc_agent_spawn(&fm, nodes[i], NULL, "127.0.0.1", names[i], NULL, "64M", NULL);
    for (i = 0; i < 3; i++)
        t_fc_agent_wait(nodes[i]);
    for (i = 0; i < 3; i++)
        cl[i] = t_fc_conn(nodes[i]);
    for (i = 0; i < T3_N; i++) {
        snprintf(key, sizeof(key), "drained/%d", i);
        t_ha_obj_make(&objs[i], key, 3000 + (size_t)i * 997, salt + (uint64_t)i);
        t_ha_put(cl[i % 3], &objs[i], 1, i % 5 == 0 ? MC_PUT_PIN_SOFT : 0,
                 i % 6 == 1 ? 600000u : 0);
    }
    j = t_fc_cluster(a.sock);
    node = t_json_find_str(j, "nodes", "name", "C");
    on_c = t_json_int(node, "used");
    json_decref(j);
    ck_assert_msg(on_c > 0, "nothing landed on C: the test would test nothing");

    ck_assert_int_eq(t_mcctl(a.sock, NULL, "drain", "C", NULL), 0);
    t0 = t_now_ms();
    for (;;) {
        const char *st;

        j = t_fc_cluster(a.sock);
        node = t_json_find_str(j, "nodes", "name", "C");
        st = json_object_get(node, "drain") != NULL ? t_json_str(node, "drain") : "";
        if (strcmp(st, "drained") == 0) {
            ck_assert_int_eq(t_json_int(node, "used"), 0);
            json_decref(j);
            break;
        }
        json_decref(j);
        ck_assert_msg(t_now_ms() - t0 < T3_DRAIN_MS, "C not drained in %u ms", T3_DRAIN_MS);
        t_fc_sleep_ms(50);
    }
    /* the owners hear of the copies right after they are written: let them land */
    t_fc_sleep_ms(300);

    ck_assert_int_eq(kill(fm.master.pid, SIGKILL), 0);
    ck_assert(t_proc_reap(&fm.master, t_now_ms() + 5000));
    fm.master.pid = 0;
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", fm.master.port);
    t_fc_master_start(&fm, NULL, listen, "master2");
    t0 = t_now_ms();
    while ((n = t_ha_objects(a.sock)) != T3_N) {
        ck_assert_msg(n < T3_N, "the new master knows %lld objects of %d", (long long)n, T3_N);
        if (t_now_ms() - t0 >= T_HA_REBUILD_MS)
            for (i = 0; i < T3_N; i++)
                if (mc_exist(cl[0], objs[i].key) != 1)
                    fprintf(stderr, "missing: %s (put through %s)\n", objs[i].key,
                            names[i % 3]);
        ck_assert_msg(t_now_ms() - t0 < T_HA_REBUILD_MS,
                      "%lld of %d objects known %u ms after the new master started (a drained "
                      "copy not reported?)",
                      (long long)n, T3_N, T_HA_REBUILD_MS);
        t_fc_sleep_ms(50);
    }
    for (i = 0; i < T3_N; i++) {
        for (k = 0; k < 3; k++) {
            t0 = t_now_ms();
            while ((err = t_ha_get(cl[k], &objs[i])) == MC_ERR_UNAVAILABLE &&
                   t_now_ms() - t0 < T_HA_REBUILD_MS)
                t_fc_sleep_ms(50);
            ck_assert_msg(err == 0, "get %s through %s after drain and rebuild: %s",
                          objs[i].key, names[k], mc_strerror(err));
        }
    }
    for (i = 0; i < 3; i++)
        mc_close(cl[i]);
    for (i = 0; i < T3_N; i++) {
        free(objs[i].data);
        objs[i].data = NULL;
    }
    t_fc_finish(&fm);
}
END_TEST

/* --- PUBLISH and DROP lost on the way ------------------------------------------------------ */

#define T4_N 24 /* objects kept */
#define T4_R 8  /* objects removed */
#define T4_WAIT_MS 20000u

/* A figure of `mcctl stats` summed over B and C. */
static json_int_t t_ha_stat_bc(const struct t_proc *b, const struct t_proc *c, const char *f)
{
    return t_fc_stat(b->sock, f) + t_fc_stat(c->sock, f);
}

/*
 * Owners that lose the first PUBLISHes and DROPs they are sent (--test-fault publish_lose=3
 * drop_lose=1 on B and C: never answered, as if lost on the wire; review finding M4), and
 * answer the next two PUBLISHes MC_ERR_NOMEM for the whole batch (publish_nomem=2: tried
 * again, not settled -- review finding M4 of the HA review). Objects
 * put through A with two replicas (A's own and one on B or C); some removed. The lost ones
 * are sent again until answered: B's and C's indexes hear of every object and of every
 * removal. Then A and the master are killed (-9) and a new master started: B and C alone
 * report, and every kept object is back with its bytes (none lost because its PUBLISH was),
 * no removed one (none brought back because its DROP was).
 */
START_TEST(test_ha_publish_drop_lost)
{
    struct t_proc a = {0}, b = {0}, c = {0};
    static const char *const lossy[] = {"--test-fault", "publish_lose=3", "--test-fault",
                                        "drop_lose=1", "--test-fault", "publish_nomem=2",
                                        NULL};
    static struct t_ha_obj objs[T4_N + T4_R];
    mc_client_t *ca, *cb, *cc;
    uint64_t salt = t_fc_salt(), t0;
    char key[48], listen[64];
    json_int_t n;
    struct t_fc fm;
    int i, err;

    t_fc_init(&fm, __func__, T_HA_TTL_MS);
    t_fc_master_start(&fm, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn(&fm, &a, NULL, "127.0.0.1", "A", NULL, "64M", NULL);
    t_fc_agent_spawn(&fm, &b, NULL, "127.0.0.1", "B", NULL, "64M", lossy);
    t_fc_agent_spawn(&fm, &c, NULL, "127.0.0.1", "C", NULL, "64M", lossy);
    t_fc_agent_wait(&a);
    t_fc_agent_wait(&b);
    t_fc_agent_wait(&c);
    ca = t_fc_conn(&a);
    cb = t_fc_conn(&b);
    cc = t_fc_conn(&c);
    for (i = 0; i < T4_N + T4_R; i++) {
        snprintf(key, sizeof(key), "lost/%d", i);
        t_ha_obj_make(&objs[i], key, 2000 + (size_t)i * 911, salt + (uint64_t)i);
        t_ha_put(ca, &objs[i], 2, 0, 0);
    }
    /* every remote replica indexed at last: the lost PUBLISHes were sent again */
    t0 = t_now_ms();
    while ((n = t_ha_stat_bc(&b, &c, "published_in")) < T4_N + T4_R) {
        ck_assert_msg(t_now_ms() - t0 < T4_WAIT_MS,
                      "B and C indexed %lld of %d objects in %u ms: a lost PUBLISH was not "
                      "sent again",
                      (long long)n, T4_N + T4_R, T4_WAIT_MS);
        t_fc_sleep_ms(100);
    }
    ck_assert_int_eq(n, T4_N + T4_R);
    ck_assert_int_ge(t_fc_stat(a.sock, "publish_retries"), 3); /* the losses happened */
    for (i = T4_N; i < T4_N + T4_R; i++)
        ck_assert_int_eq(mc_remove(ca, objs[i].key), 0);
    t0 = t_now_ms();
    while ((n = t_ha_stat_bc(&b, &c, "drops_in")) < T4_R) {
        ck_assert_msg(t_now_ms() - t0 < T4_WAIT_MS,
                      "B and C heard of %lld of %d removals in %u ms: a lost DROP was not "
                      "sent again",
                      (long long)n, T4_R, T4_WAIT_MS);
        t_fc_sleep_ms(100);
    }

    /* A and the master go: B's and C's reports are all a new master learns */
    ck_assert_int_eq(kill(a.pid, SIGKILL), 0);
    ck_assert(t_proc_reap(&a, t_now_ms() + 5000));
    a.pid = 0;
    mc_close(ca);
    ck_assert_int_eq(kill(fm.master.pid, SIGKILL), 0);
    ck_assert(t_proc_reap(&fm.master, t_now_ms() + 5000));
    fm.master.pid = 0;
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", fm.master.port);
    t_fc_master_start(&fm, NULL, listen, "master2");
    t0 = t_now_ms();
    while ((n = t_ha_objects(b.sock)) != T4_N) {
        ck_assert_msg(n < T4_N, "the new master knows %lld objects, %d were kept (a removed "
                      "one came back)", (long long)n, T4_N);
        if (t_now_ms() - t0 >= T_HA_REBUILD_MS)
            for (i = 0; i < T4_N; i++)
                if (mc_exist(cb, objs[i].key) != 1)
                    fprintf(stderr, "missing: %s\n", objs[i].key);
        ck_assert_msg(t_now_ms() - t0 < T_HA_REBUILD_MS,
                      "%lld of %d objects known %u ms after the new master started",
                      (long long)n, T4_N, T_HA_REBUILD_MS);
        t_fc_sleep_ms(50);
    }
    for (i = 0; i < T4_N; i++) {
        t0 = t_now_ms();
        while ((err = t_ha_get(i % 2 ? cb : cc, &objs[i])) == MC_ERR_UNAVAILABLE &&
               t_now_ms() - t0 < T_HA_REBUILD_MS)
            t_fc_sleep_ms(50);
        ck_assert_msg(err == 0, "get %s after the rebuild: %s", objs[i].key, mc_strerror(err));
    }
    for (i = T4_N; i < T4_N + T4_R; i++)
        ck_assert_msg(mc_exist(cb, objs[i].key) == 0, "%s (removed) came back", objs[i].key);
    ck_assert_int_eq(t_ha_objects(c.sock), T4_N);
    mc_close(cb);
    mc_close(cc);
    for (i = 0; i < T4_N + T4_R; i++) {
        free(objs[i].data);
        objs[i].data = NULL;
    }
    t_fc_finish(&fm);
}
END_TEST

/* --- a figure: the rebuild of a large directory ------------------------------------------- */

#define T5_BATCH 256
#define T5_SIZE 64

/*
 * Not part of the suite (run by name, T_HA_REBUILD_N objects, 1 M by default): small
 * objects put through three agents in batches, the master killed (-9) and a new one
 * started on its address; prints how long until it knows every object again (through an
 * agent's `mcctl cluster`), and checks a sample of them byte for byte.
 */
START_TEST(test_ha_rebuild_figure)
{
    struct t_proc a = {0}, b = {0}, c = {0};
    struct t_proc *nodes[3] = {&a, &b, &c};
    const char *const names[3] = {"A", "B", "C"};
    const char *env = getenv("T_HA_REBUILD_N");
    long total = env != NULL && atol(env) > 0 ? atol(env) : 1000000;
    static char keys[T5_BATCH][24];
    static uint8_t data[T5_BATCH][T5_SIZE];
    const char *kp[T5_BATCH];
    const void *bp[T5_BATCH];
    size_t lens[T5_BATCH];
    int results[T5_BATCH];
    mc_client_t *cl[3];
    uint64_t salt = t_fc_salt(), t0, t_put, t_start;
    char listen[64];
    struct t_fc fm;
    json_int_t n = 0;
    long i, j;

    t_fc_init(&fm, __func__, 10000);
    t_fc_master_start(&fm, NULL, "127.0.0.1:0", "master");
    for (i = 0; i < 3; i++)
        t_fc_agent_spawn(&fm, nodes[i], NULL, "127.0.0.1", names[i], NULL, "256M", NULL);
    for (i = 0; i < 3; i++)
        t_fc_agent_wait(nodes[i]);
    for (i = 0; i < 3; i++)
        cl[i] = t_fc_conn(nodes[i]);
    t0 = t_now_ms();
    for (i = 0; i < total; i += T5_BATCH) {
        size_t k = (size_t)(total - i < T5_BATCH ? total - i : T5_BATCH);
        int got;

        for (j = 0; j < (long)k; j++) {
            snprintf(keys[j], sizeof(keys[j]), "m/%ld", i + j);
            t_fill(data[j], T5_SIZE, salt + (uint64_t)(i + j));
            kp[j] = keys[j];
            bp[j] = data[j];
            lens[j] = T5_SIZE;
        }
        got = mc_batch_put(cl[(i / T5_BATCH) % 3], k, kp, bp, lens, NULL, results);
        ck_assert_msg(got == (int)k, "batch at %ld: %d of %zu stored (first status %s)", i, got,
                      k, mc_strerror(results[0]));
    }
    t_put = t_now_ms() - t0;
    ck_assert_int_eq(t_ha_objects(a.sock), total);
    t_fc_sleep_ms(1000); /* the owners' indexes hear of the last publications */
    ck_assert_int_eq(kill(fm.master.pid, SIGKILL), 0);
    ck_assert(t_proc_reap(&fm.master, t_now_ms() + 5000));
    fm.master.pid = 0;
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", fm.master.port);
    t_fc_master_start(&fm, NULL, listen, "master2");
    t_start = t_now_ms();
    while ((n = t_ha_objects(a.sock)) != total) {
        ck_assert_msg(n <= total, "%lld objects known, %ld put", (long long)n, total);
        ck_assert_msg(t_now_ms() - t_start < 600000, "%lld of %ld objects known after 600 s",
                      (long long)n, total);
        t_fc_sleep_ms(20);
    }
    fprintf(stderr, "ha_rebuild: %ld objects of %d bytes over 3 agents (put in %llu ms): all "
            "known again %llu ms after the new master was ready\n", total, T5_SIZE,
            (unsigned long long)t_put, (unsigned long long)(t_now_ms() - t_start));
    for (i = 0; i < 1000; i++) {
        long x = (long)((salt + (uint64_t)i * 7919u) % (uint64_t)total);
        uint8_t want[T5_SIZE], got[T5_SIZE];
        size_t len = 0;
        char key[24];

        snprintf(key, sizeof(key), "m/%ld", x);
        t_fill(want, T5_SIZE, salt + (uint64_t)x);
        ck_assert_int_eq(mc_get(cl[i % 3], key, got, sizeof(got), &len), 0);
        ck_assert(len == T5_SIZE && memcmp(got, want, T5_SIZE) == 0);
    }
    for (i = 0; i < 3; i++)
        mc_close(cl[i]);
    t_fc_finish(&fm);
}
END_TEST

/* --- the etcd client --------------------------------------------------------------------- */

/* test_ha_etcd_client's prefix walk: the values seen, in order (at most 4) */
static void t_ha_seen_value(void *ctx, const struct mc_etcd_kv *kv)
{
    struct seen {
        int n;
        char v[4][32];
    } *sn = ctx;

    if (sn->n < 4)
        snprintf(sn->v[sn->n], sizeof(sn->v[0]), "%.31s", kv->value);
    sn->n++;
}

START_TEST(test_ha_etcd_client)
{
    struct t_ha_etcd e;
    struct mc_etcd *c;
    struct mc_etcd_kv *kv = malloc(sizeof(*kv));
    char dir[256], b64[16], raw[8];
    int64_t lease = 0, lease2 = 0, ttl = 0;
    bool created = false, deleted = false;
    int64_t rev;

    ck_assert_ptr_nonnull(kv);
    /* base64 as etcd speaks it */
    mc_etcd_b64_encode("ab", 2, b64);
    ck_assert_str_eq(b64, "YWI=");
    ck_assert_int_eq(mc_etcd_b64_decode("YWJj", raw, sizeof(raw)), 3);
    ck_assert_int_eq(mc_etcd_b64_decode("YWI", raw, sizeof(raw)), -1);
    ck_assert_int_eq(mc_etcd_b64_decode("Y=JI", raw, sizeof(raw)), -1);
    ck_assert_int_eq(mc_etcd_create("ftp://x", 100, &c), MC_ERR_INVALID);
    ck_assert_int_eq(mc_etcd_create("", 100, &c), MC_ERR_INVALID);

    t_mkdtemp(dir, sizeof(dir));
    t_ha_etcd_start(&e, dir, 1);
    /* the first endpoint is dead: the second answers */
    {
        char urls[300];

        snprintf(urls, sizeof(urls), "http://127.0.0.1:%u,%s", t_ha_free_port(), e.urls);
        ck_assert_int_eq(mc_etcd_create(urls, 1000, &c), 0);
    }
    ck_assert_int_eq(mc_etcd_get(c, "/t/k", kv), 0);
    ck_assert(!kv->found);
    ck_assert_int_eq(mc_etcd_lease_grant(c, 2, &lease), 0);
    ck_assert_int_ne(lease, 0);
    ck_assert_int_eq(mc_etcd_lease_keepalive(c, lease, &ttl), 0);
    ck_assert_int_ge(ttl, 1);
    ck_assert_int_eq(mc_etcd_create_if_absent(c, "/t/k", "127.0.0.1:1", lease, &created, kv), 0);
    ck_assert(created);
    rev = kv->create_rev;
    ck_assert_int_gt(rev, 0);
    /* a second candidate finds it taken and learns who holds it */
    ck_assert_int_eq(mc_etcd_lease_grant(c, 2, &lease2), 0);
    ck_assert_int_eq(mc_etcd_create_if_absent(c, "/t/k", "127.0.0.1:2", lease2, &created, kv), 0);
    ck_assert(!created);
    ck_assert_int_eq(kv->create_rev, rev);
    ck_assert_str_eq(kv->value, "127.0.0.1:1");
    ck_assert_int_eq(kv->lease, lease);
    ck_assert_int_eq(mc_etcd_get(c, "/t/k", kv), 0);
    ck_assert(kv->found);
    ck_assert_str_eq(kv->value, "127.0.0.1:1");
    /* a guarded delete of another incarnation does nothing */
    ck_assert_int_eq(mc_etcd_delete_if(c, "/t/k", rev + 100, &deleted), 0);
    ck_assert(!deleted);
    /* the lease revoked: the key goes with it, keep-alives say so */
    ck_assert_int_eq(mc_etcd_lease_revoke(c, lease), 0);
    ck_assert_int_eq(mc_etcd_lease_keepalive(c, lease, &ttl), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_etcd_get(c, "/t/k", kv), 0);
    ck_assert(!kv->found);
    ck_assert_int_eq(mc_etcd_create_if_absent(c, "/t/k", "127.0.0.1:2", lease2, &created, kv), 0);
    ck_assert(created);
    ck_assert_int_gt(kv->create_rev, rev); /* epochs grow */
    /* a put guarded by the leader key (the reign's version end): only in its reign */
    {
        bool done = false;

        ck_assert_int_eq(mc_etcd_put_if(c, "/t/v", "123", "/t/k", kv->create_rev, &done), 0);
        ck_assert(done);
        ck_assert_int_eq(mc_etcd_put_if(c, "/t/v", "456", "/t/k", rev, &done), 0);
        ck_assert(!done);
        ck_assert_int_eq(mc_etcd_get(c, "/t/v", kv), 0);
        ck_assert(kv->found);
        ck_assert_str_eq(kv->value, "123");
        ck_assert_int_eq(kv->lease, 0); /* outlives the lease */
        ck_assert_int_eq(mc_etcd_get(c, "/t/k", kv), 0);
    }
    ck_assert_int_eq(mc_etcd_delete_if(c, "/t/k", kv->create_rev, &deleted), 0);
    ck_assert(deleted);
    /* put, and a prefix read (the masters' member keys): every key under the prefix, in
     * key order, none outside it, at most `limit` */
    {
        struct seen {
            int n;
            char v[4][32];
        } sn = {0};
        void (*fn)(void *, const struct mc_etcd_kv *) = t_ha_seen_value;

        ck_assert_int_eq(mc_etcd_put(c, "/t/m/b", "127.0.0.1:2", 0), 0);
        ck_assert_int_eq(mc_etcd_put(c, "/t/m/a", "127.0.0.1:1", 0), 0);
        ck_assert_int_eq(mc_etcd_put(c, "/t/m/a", "127.0.0.1:3", 0), 0); /* replaced */
        ck_assert_int_eq(mc_etcd_put(c, "/t/n", "outside", 0), 0);
        ck_assert_int_eq(mc_etcd_put(c, "/t/m", "outside too", 0), 0);
        ck_assert_int_eq(mc_etcd_get_prefix(c, "/t/m/", 8, fn, &sn), 0);
        ck_assert_int_eq(sn.n, 2);
        ck_assert_str_eq(sn.v[0], "127.0.0.1:3");
        ck_assert_str_eq(sn.v[1], "127.0.0.1:2");
        sn.n = 0;
        ck_assert_int_eq(mc_etcd_get_prefix(c, "/t/m/", 1, fn, &sn), 0);
        ck_assert_int_eq(sn.n, 1);
        sn.n = 0;
        ck_assert_int_eq(mc_etcd_get_prefix(c, "/t/none/", 8, fn, &sn), 0);
        ck_assert_int_eq(sn.n, 0);
        ck_assert_int_eq(mc_etcd_get_prefix(c, "", 8, fn, &sn), MC_ERR_INVALID);
        ck_assert_int_eq(mc_etcd_get_prefix(c, "/t/m/", 0, fn, &sn), MC_ERR_INVALID);
        /* a key under a lease goes with it */
        ck_assert_int_eq(mc_etcd_lease_grant(c, 2, &lease), 0);
        ck_assert_int_eq(mc_etcd_put(c, "/t/m/c", "127.0.0.1:4", lease), 0);
        ck_assert_int_eq(mc_etcd_get_prefix(c, "/t/m/", 8, fn, &sn), 0);
        ck_assert_int_eq(sn.n, 3);
        ck_assert_int_eq(mc_etcd_lease_revoke(c, lease), 0);
        sn.n = 0;
        ck_assert_int_eq(mc_etcd_get_prefix(c, "/t/m/", 8, fn, &sn), 0);
        ck_assert_int_eq(sn.n, 2);
    }
    /* an expired lease (not kept alive) */
    ck_assert_int_eq(mc_etcd_lease_grant(c, 1, &lease), 0);
    t_fc_sleep_ms(3500);
    ck_assert_int_eq(mc_etcd_lease_keepalive(c, lease, &ttl), MC_ERR_NOT_FOUND);
    /* etcd gone: unavailable, within the timeout */
    t_ha_etcd_stop(&e);
    {
        uint64_t t0 = t_now_ms();
        int err = mc_etcd_get(c, "/t/k", kv);

        ck_assert_msg(err == MC_ERR_UNAVAILABLE || err == MC_ERR_TIMEOUT, "%s",
                      mc_strerror(err));
        ck_assert_uint_lt(t_now_ms() - t0, 3000);
    }
    mc_etcd_destroy(c);
    free(kv);
    t_rmdir(dir);
}
END_TEST

/* --- failover -------------------------------------------------------------------------------- */

#define T_HA_AGENTS 3

struct t_ha_cl {
    struct t_fc fm;
    struct t_ha_etcd etcd;
    struct t_ha_masters ms;
    struct t_proc agents[T_HA_AGENTS];
    mc_client_t *cl[T_HA_AGENTS];
};

static const char *const t_ha_names[T_HA_AGENTS] = {"A", "B", "C"};
static const char *t_ha_a_dram = "64M"; /* agent A's DRAM ("0": a pure client node) */

/* etcd (members), three masters, three agents that follow the leader, a client on each;
 * more[i] (may be NULL): agent i's further flags, NULL-terminated (at most 4). */
static void t_ha_cluster_start_with(struct t_ha_cl *h, const char *test, int members,
                                    const char *const *const more[T_HA_AGENTS])
{
    const char *extra[12];

    t_fc_init(&h->fm, test, T_HA_TTL_MS);
    t_ha_etcd_start(&h->etcd, h->fm.dir, members);
    t_ha_masters_start(&h->fm, &h->ms, 3, h->etcd.urls);
    ck_assert_msg(t_ha_wait_leader(&h->ms, -1, 10000) >= 0, "no master leads");
    extra[0] = "--etcd";
    extra[1] = h->etcd.urls;
    extra[2] = "--cluster-id";
    extra[3] = h->ms.cluster;
    extra[4] = "--set";
    extra[5] = "connect_timeout_ms=20000";
    for (int i = 0; i < T_HA_AGENTS; i++) {
        int k = 6;

        for (int j = 0; more != NULL && more[i] != NULL && more[i][j] != NULL && j < 4; j++)
            extra[k++] = more[i][j];
        extra[k] = NULL;
        t_fc_agent_spawn(&h->fm, &h->agents[i], NULL, "127.0.0.1", t_ha_names[i], NULL,
                         i == 0 ? t_ha_a_dram : "64M", extra);
    }
    for (int i = 0; i < T_HA_AGENTS; i++)
        t_fc_agent_wait(&h->agents[i]);
    for (int i = 0; i < T_HA_AGENTS; i++)
        h->cl[i] = t_fc_conn(&h->agents[i]);
}

static void t_ha_cluster_start(struct t_ha_cl *h, const char *test, int members)
{
    t_ha_cluster_start_with(h, test, members, NULL);
}

static void t_ha_cluster_finish(struct t_ha_cl *h)
{
    for (int i = 0; i < T_HA_AGENTS; i++)
        mc_close(h->cl[i]);
    h->fm.master.pid = 0; /* the masters are ours */
    t_ha_masters_stop(&h->ms);
    t_fc_finish(&h->fm);
    t_ha_etcd_stop(&h->etcd);
}

/* Put o through c until it succeeds (UNAVAILABLE while no master serves); the ms it took,
 * every attempt within the op deadline. Fails the test past limit_ms. */
static uint64_t t_ha_put_until(mc_client_t *c, const struct t_ha_obj *o, uint32_t flags,
                               uint64_t limit_ms)
{
    mc_put_opts_t opts = MC_PUT_OPTS_INIT;
    uint64_t t0 = t_now_ms();
    int err;

    opts.flags = flags;
    for (;;) {
        uint64_t a0 = t_now_ms();

        err = mc_put(c, o->key, o->data, o->len, &opts);
        ck_assert_msg(t_now_ms() - a0 <= MC_OP_TIMEOUT_MS_DEFAULT + 500,
                      "a put took %llu ms", (unsigned long long)(t_now_ms() - a0));
        if (err == 0)
            return t_now_ms() - t0;
        ck_assert_msg(err == MC_ERR_UNAVAILABLE || err == MC_ERR_TIMEOUT ||
                          err == MC_ERR_BUSY || err == MC_ERR_CANCELED,
                      "put %s: %s", o->key, mc_strerror(err));
        ck_assert_msg(t_now_ms() - t0 < limit_ms, "put %s still failing after %llu ms: %s",
                      o->key, (unsigned long long)(t_now_ms() - t0), mc_strerror(err));
        t_fc_sleep_ms(10);
    }
}

static int t_ha_get_until(mc_client_t *c, const struct t_ha_obj *o, uint64_t limit_ms)
{
    uint64_t t0 = t_now_ms();
    int err;

    while ((err = t_ha_get(c, o)) == MC_ERR_UNAVAILABLE && t_now_ms() - t0 < limit_ms)
        t_fc_sleep_ms(20);
    return err;
}

#define T2_N 60

static int t_ha_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* --- writers putting while the leader is killed ------------------------------------------- */

#define T_HA_W 3          /* writers, one per agent */
#define T_HA_W_OK 4096    /* puts answered OK kept per writer and kill */

struct t_ha_writer {
    pthread_t th;
    mc_client_t *c;
    int t, kill;
    uint64_t salt;
    _Atomic bool *stop;
    _Atomic uint64_t *t_kill; /* 0 until the kill */
    uint32_t ok[T_HA_W_OK];   /* sequence numbers of the puts answered 0 */
    uint32_t nok, seq;
    uint64_t worst_ms;        /* the longest put */
    uint32_t across;          /* puts under way at the kill (begun before, ended after) */
    uint32_t across_ok;       /* ... of them answered 0 */
    int bad;                  /* a status no put may end with (0: none) */
};

static void t_ha_w_obj(const struct t_ha_writer *w, uint32_t seq, struct t_ha_obj *o)
{
    char key[48];

    snprintf(key, sizeof(key), "w/%d/%d/%u", w->kill, w->t, seq);
    t_ha_obj_make(o, key, 700 + (size_t)(seq % 13) * 97,
                  w->salt ^ (uint64_t)w->kill << 40 ^ (uint64_t)w->t << 32 ^ seq);
}

/* Puts fresh keys back to back until told to stop; no ck_assert here (not the test's
 * thread): what it saw is checked after the join. */
static void *t_ha_writer_main(void *arg)
{
    struct t_ha_writer *w = arg;
    struct t_ha_obj o = {0};

    while (!atomic_load(w->stop) && w->nok < T_HA_W_OK) {
        mc_put_opts_t opts = MC_PUT_OPTS_INIT;
        uint64_t a0 = t_now_ms(), a1, tk;
        int err;

        t_ha_w_obj(w, w->seq, &o);
        err = mc_put(w->c, o.key, o.data, o.len, &opts);
        a1 = t_now_ms();
        tk = atomic_load(w->t_kill);
        if (a1 - a0 > w->worst_ms)
            w->worst_ms = a1 - a0;
        if (tk != 0 && a0 <= tk && a1 >= tk) {
            w->across++;
            w->across_ok += err == 0;
        }
        if (err == 0)
            w->ok[w->nok++] = w->seq;
        else if (err != MC_ERR_UNAVAILABLE && err != MC_ERR_TIMEOUT && err != MC_ERR_BUSY &&
                 err != MC_ERR_CANCELED && w->bad == 0)
            w->bad = err;
        w->seq++;
        if (err != 0)
            t_fc_sleep_ms(5);
    }
    free(o.data);
    return NULL;
}

static void t_ha_writers_start(struct t_ha_cl *h, struct t_ha_writer *w, int kill,
                               uint64_t salt, _Atomic bool *stop, _Atomic uint64_t *t_kill)
{
    atomic_store(stop, false);
    atomic_store(t_kill, 0);
    for (int t = 0; t < T_HA_W; t++) {
        w[t] = (struct t_ha_writer){.c = t_fc_conn(&h->agents[t]), .t = t, .kill = kill,
                                    .salt = salt, .stop = stop, .t_kill = t_kill};
        ck_assert_int_eq(pthread_create(&w[t].th, NULL, t_ha_writer_main, &w[t]), 0);
    }
}

/* Stops and joins the writers; every put they saw answered 0 reads back with its bytes
 * through another node, no put outlived its deadline, puts were under way at the kill.
 * Their keys are removed after (the segments stay roomy over many kills). */
static void t_ha_writers_check(struct t_ha_cl *h, struct t_ha_writer *w, _Atomic bool *stop)
{
    struct t_ha_obj o = {0};
    uint32_t across = 0, across_ok = 0, oks = 0;

    atomic_store(stop, true);
    for (int t = 0; t < T_HA_W; t++)
        ck_assert_int_eq(pthread_join(w[t].th, NULL), 0);
    for (int t = 0; t < T_HA_W; t++) {
        ck_assert_msg(w[t].bad == 0, "writer %d: a put ended %s", t, mc_strerror(w[t].bad));
        ck_assert_msg(w[t].worst_ms <= MC_OP_TIMEOUT_MS_DEFAULT + 500,
                      "writer %d: a put took %llu ms (deadline %d ms)", t,
                      (unsigned long long)w[t].worst_ms, MC_OP_TIMEOUT_MS_DEFAULT);
        across += w[t].across;
        across_ok += w[t].across_ok;
        oks += w[t].nok;
        for (uint32_t i = 0; i < w[t].nok; i++) {
            int err;

            t_ha_w_obj(&w[t], w[t].ok[i], &o);
            err = t_ha_get_until(h->cl[(t + 1) % T_HA_AGENTS], &o, 5000);
            ck_assert_msg(err == 0, "%s: answered OK by a put, then %s", o.key,
                          mc_strerror(err));
            (void)mc_remove(h->cl[t], o.key);
        }
        mc_close(w[t].c);
    }
    ck_assert_msg(across > 0, "no put was under way at the kill: the test tested nothing");
    fprintf(stderr, "ha_writers: kill %d: %u puts answered OK, %u under way at the kill "
            "(%u of them OK), all read back\n", w[0].kill, oks, across, across_ok);
    free(o.data);
}

/*
 * Three masters on etcd, three agents following the leader, objects put through every
 * agent; kill -9 the leader while a writer per agent puts fresh keys back to back: a
 * standby leads, the first put through another master succeeds within 5 s of the kill (no
 * op waits past its deadline meanwhile), every object put before the kill reads back with
 * its bytes through every node, and so does every writer's put that was answered OK
 * (puts under way at the kill among them; none outlived its deadline). T_HA_KILLS=N repeats the
 * kill N times (a killed master is started again as a standby) and prints the median and
 * the worst failover.
 */
START_TEST(test_ha_leader_killed_under_load)
{
    static struct t_ha_cl h;
    static struct t_ha_obj objs[T2_N + 64];
    const char *kills_env = getenv("T_HA_KILLS");
    int kills = kills_env != NULL && atoi(kills_env) > 0 ? atoi(kills_env) : 1;
    uint64_t salt = t_fc_salt(), took[64];
    int n = 0, leader, k, i;
    char key[48];

    if (t_ha_etcd_bin() == NULL)
        return;
    if (kills > 64)
        kills = 64;
    t_ha_cluster_start(&h, __func__, 1);
    for (i = 0; i < T2_N; i++) {
        snprintf(key, sizeof(key), "load/%d", i);
        t_ha_obj_make(&objs[i], key, 2048 + (size_t)i * 331, salt + (uint64_t)i);
        (void)t_ha_put_until(h.cl[i % 3], &objs[i], 0, 10000);
        n++;
    }
    {
        /* mcctl cluster lists the two masters that do not lead as standbys (their member
         * keys; the agent reads them every second) */
        uint64_t t0 = t_now_ms();
        bool ok = false;

        while (!ok && t_now_ms() - t0 < 5000) {
            json_t *j = t_fc_cluster(h.agents[0].sock), *sb = json_object_get(j, "standbys");
            const char *lead = t_json_str(j, "leader");
            size_t i2;

            ok = json_is_array(sb) && json_array_size(sb) == 2;
            for (i2 = 0; ok && i2 < 2; i2++)
                ok = json_is_string(json_array_get(sb, i2)) &&
                     strcmp(json_string_value(json_array_get(sb, i2)), lead) != 0;
            json_decref(j);
            if (!ok)
                t_fc_sleep_ms(100);
        }
        ck_assert_msg(ok, "mcctl cluster: not two standbys within 5 s");
    }
    for (k = 0; k < kills; k++) {
        static struct t_ha_writer w[T_HA_W];
        static _Atomic bool stop;
        static _Atomic uint64_t t_kill_at;
        uint64_t t_kill;

        leader = t_ha_leader(&h.ms, NULL);
        ck_assert_int_ge(leader, 0);
        /* writers putting through every agent, across the kill */
        t_ha_writers_start(&h, w, k, salt, &stop, &t_kill_at);
        /* puts and gets going on up to the kill */
        for (i = 0; i < 10; i++)
            ck_assert_int_eq(t_ha_get(h.cl[i % 3], &objs[(k * 7 + i) % n]), 0);
        t_fc_sleep_ms(200);
        t_kill = t_now_ms();
        atomic_store(&t_kill_at, t_kill);
        ck_assert_int_eq(kill(h.ms.p[leader].pid, SIGKILL), 0);
        snprintf(key, sizeof(key), "load/after/%d", k);
        t_ha_obj_make(&objs[T2_N + k], key, 4096, salt + 1000 + (uint64_t)k);
        (void)t_ha_put_until(h.cl[k % 3], &objs[T2_N + k], 0, 5000);
        took[k] = t_now_ms() - t_kill;
        ck_assert_msg(took[k] < 5000, "failover %d took %llu ms", k,
                      (unsigned long long)took[k]);
        t_fc_sleep_ms(300); /* the writers' puts through the new leader */
        t_ha_writers_check(&h, w, &stop);
        {
            /* mcctl cluster through an agent shows the new leader and its epoch */
            uint64_t epoch = 0;
            int now = t_ha_leader(&h.ms, &epoch);
            char addr[64];
            json_t *j;

            ck_assert_int_ne(now, leader);
            ck_assert_int_ge(now, 0);
            snprintf(addr, sizeof(addr), "127.0.0.1:%u", h.ms.p[now].port);
            j = t_fc_cluster(h.agents[k % 3].sock);
            ck_assert_str_eq(t_json_str(j, "leader"), addr);
            ck_assert_int_eq(t_json_int(j, "epoch"), (json_int_t)epoch);
            json_decref(j);
        }
        (void)t_proc_reap(&h.ms.p[leader], t_now_ms() + 5000);
        /* every object put before (and since) reads back through every node */
        for (i = 0; i < n; i++)
            ck_assert_msg(t_ha_get_until(h.cl[(i + k) % 3], &objs[i], 5000) == 0,
                          "%s after kill %d: lost", objs[i].key, k);
        ck_assert_int_eq(t_ha_get_until(h.cl[(k + 1) % 3], &objs[T2_N + k], 5000), 0);
        /* the killed master comes back as a standby */
        if (k + 1 < kills)
            t_ha_master_spawn(&h.fm, &h.ms, leader);
    }
    qsort(took, (size_t)kills, sizeof(took[0]), t_ha_u64_cmp);
    fprintf(stderr, "ha_failover: %d kills, median %llu ms, max %llu ms\n", kills,
            (unsigned long long)took[kills / 2], (unsigned long long)took[kills - 1]);
    for (i = 0; i < T2_N + kills; i++) {
        free(objs[i].data);
        objs[i].data = NULL;
    }
    t_ha_cluster_finish(&h);
}
END_TEST

/* Waits (up to 5 s) until every thread of pid is stopped (SIGSTOP is delivered
 * asynchronously: kill() returns before a many-threaded process has stopped). */
static bool t_ha_wait_stopped(pid_t pid)
{
    uint64_t t0 = t_now_ms();
    char path[64];

    while (t_now_ms() - t0 < 5000) {
        DIR *d;
        struct dirent *de;
        bool all = true;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        if ((d = opendir(path)) == NULL)
            return false;
        while (all && (de = readdir(d)) != NULL) {
            char stat[320], buf[256], *rp;
            FILE *f;

            if (de->d_name[0] == '.')
                continue;
            snprintf(stat, sizeof(stat), "/proc/%d/task/%s/stat", (int)pid, de->d_name);
            if ((f = fopen(stat, "r")) == NULL)
                continue; /* a thread that just went */
            rp = fgets(buf, sizeof(buf), f) != NULL ? strrchr(buf, ')') : NULL;
            all = rp != NULL && (rp[2] == 'T' || rp[2] == 't');
            fclose(f);
        }
        closedir(d);
        if (all)
            return true;
        t_fc_sleep_ms(5);
    }
    return false;
}

/* Whether the file at path has a line containing needle. */
static bool t_ha_log_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    bool hit = false;

    if (f == NULL)
        return false;
    while (!hit && fgets(line, sizeof(line), f) != NULL)
        hit = strstr(line, needle) != NULL;
    fclose(f);
    return hit;
}

/*
 * SIGSTOP the leader past its lease: a standby takes over and serves. Then etcd itself is
 * stopped (SIGSTOP) before the old leader resumes (SIGCONT): nothing can tell the old
 * leader that it lost, so it refuses by its own clock alone -- an agent that asks it
 * directly cannot join it (HELLO refused), and its log says it stopped leading (its loop's
 * lease deadline passed), never that etcd said the lease or the key was gone.
 * Once etcd runs again, some master leads and the objects read back.
 */
START_TEST(test_ha_leader_sigstop)
{
    static struct t_ha_cl h;
    struct t_ha_obj o = {0}, o2 = {0};
    struct t_proc direct = {0};
    const char *extra[] = {"--set", "connect_timeout_ms=3000", NULL};
    uint64_t salt = t_fc_salt(), t_stop;
    int old, now_leader;
    char st[48];

    if (t_ha_etcd_bin() == NULL)
        return;
    t_ha_cluster_start(&h, __func__, 1);
    t_ha_obj_make(&o, "stop/before", 10000, salt);
    (void)t_ha_put_until(h.cl[0], &o, 0, 10000);
    old = t_ha_leader(&h.ms, NULL);
    ck_assert_int_ge(old, 0);
    t_stop = t_now_ms();
    ck_assert_int_eq(kill(h.ms.p[old].pid, SIGSTOP), 0);
    now_leader = t_ha_wait_leader(&h.ms, old, 10000);
    ck_assert_msg(now_leader >= 0, "no standby took over");
    t_ha_obj_make(&o2, "stop/during", 5000, salt + 1);
    (void)t_ha_put_until(h.cl[1], &o2, 0, 5000);
    ck_assert_int_eq(t_ha_get_until(h.cl[2], &o, 5000), 0);
    fprintf(stderr, "ha_sigstop: a standby served %llu ms after the stop\n",
            (unsigned long long)(t_now_ms() - t_stop));
    /* etcd goes silent first: whatever the old leader does now, it hears nothing */
    ck_assert_int_eq(kill(h.etcd.p[0].pid, SIGSTOP), 0);
    ck_assert_msg(t_ha_wait_stopped(h.etcd.p[0].pid), "etcd did not stop");
    ck_assert_int_eq(kill(h.ms.p[old].pid, SIGCONT), 0);
    /* the old leader, asked directly, is no leader: a plain agent cannot join it */
    h.fm.master.port = h.ms.p[old].port;
    t_fc_agent_spawn(&h.fm, &direct, NULL, "127.0.0.1", "D", NULL, "16M", extra);
    ck_assert_msg(t_proc_wait_ready(&direct, 8000) == 1,
                  "an agent joined the stepped-down leader directly");
    ck_assert_msg(WIFEXITED(direct.status) && WEXITSTATUS(direct.status) != 0, "agent D: %s",
                  t_status_str(direct.status, st, sizeof(st)));
    /* by its own clock: etcd never answered it since it resumed (the loop's gate, which
     * reads only the lease deadline, dropped every peer) */
    ck_assert_msg(t_ha_log_has(h.ms.p[old].log, "not leading any more"),
                  "the old leader did not step down by its own clock (log %s)",
                  h.ms.p[old].log);
    ck_assert_msg(!t_ha_log_has(h.ms.p[old].log, "the lease lapsed at etcd") &&
                      !t_ha_log_has(h.ms.p[old].log, "the leader key is not ours"),
                  "the old leader heard from etcd while etcd was stopped?");
    ck_assert_int_eq(kill(h.etcd.p[0].pid, SIGCONT), 0);
    /* the cluster serves on once etcd does (a new reign, rebuilt from the agents, if the
     * new leader's lease lapsed meanwhile) */
    ck_assert_msg(t_ha_wait_leader(&h.ms, -1, 15000) >= 0, "no leader after etcd returned");
    ck_assert_int_eq(t_ha_get_until(h.cl[0], &o2, 15000), 0);
    ck_assert_int_eq(t_ha_get_until(h.cl[1], &o, 15000), 0);
    free(o.data);
    free(o2.data);
    t_ha_cluster_finish(&h);
}
END_TEST

/*
 * A 3-member etcd cluster. One member lost (a follower of etcd's raft: losing its raft
 * leader costs an etcd election first, which the 2 s lease does not always outlast; see
 * docs/operations.md): puts and gets go on as before. Quorum lost: the leader steps down
 * within its lease, data ops fail fast with MC_ERR_UNAVAILABLE; the members back: service
 * returns and nothing complete was lost.
 */
START_TEST(test_ha_etcd_member_lost)
{
    static struct t_ha_cl h;
    static struct t_ha_obj objs[40];
    uint64_t salt = t_fc_salt(), t0;
    int i, err, fast = 0, raft, lost1, lost2;
    char key[48];

    if (t_ha_etcd_bin() == NULL)
        return;
    t_ha_cluster_start(&h, __func__, 3);
    raft = t_ha_etcd_raft_leader(&h.etcd, 5000);
    ck_assert_msg(raft >= 0, "no etcd member says it leads");
    lost1 = (raft + 1) % 3;
    lost2 = (raft + 2) % 3;
    for (i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "member/%d", i);
        t_ha_obj_make(&objs[i], key, 3000 + (size_t)i, salt + (uint64_t)i);
        (void)t_ha_put_until(h.cl[i % 3], &objs[i], 0, 10000);
    }
    /* one member lost: nothing changes (every op succeeds at once) */
    t_proc_kill(&h.etcd.p[lost1]);
    t0 = t_now_ms();
    for (i = 20; t_now_ms() - t0 < 3 * T_HA_TTL_MS; i = i < 39 ? i + 1 : 20) {
        snprintf(key, sizeof(key), "member/%d", i);
        t_ha_obj_make(&objs[i], key, 2000 + (size_t)i, salt + 100 + (uint64_t)i);
        err = mc_put(h.cl[i % 3], objs[i].key, objs[i].data, objs[i].len,
                     &(mc_put_opts_t){.flags = MC_PUT_UPSERT});
        ck_assert_msg(err == 0, "put with one etcd member lost: %s", mc_strerror(err));
        ck_assert_int_eq(t_ha_get(h.cl[(i + 1) % 3], &objs[i % 20]), 0);
    }
    /* quorum lost: within the lease the leader stops; data ops fail fast */
    t_proc_kill(&h.etcd.p[lost2]);
    t_fc_sleep_ms(T_HA_TTL_MS + 500);
    t0 = t_now_ms();
    while (t_now_ms() - t0 < 2000) {
        uint64_t a0 = t_now_ms();

        err = mc_put(h.cl[0], "member/noquorum", objs[0].data, 100, NULL);
        ck_assert_msg(err == MC_ERR_UNAVAILABLE, "put without etcd quorum: %s",
                      mc_strerror(err));
        ck_assert_msg(t_now_ms() - a0 < 1500, "a put without quorum took %llu ms",
                      (unsigned long long)(t_now_ms() - a0));
        fast++;
        t_fc_sleep_ms(50);
    }
    /* quorum back: service returns, nothing complete was lost */
    t_ha_etcd_member_start(&h.etcd, lost1);
    t_ha_etcd_member_start(&h.etcd, lost2);
    ck_assert(t_ha_etcd_serving(h.etcd.urls, 20000));
    t_ha_obj_make(&objs[39], "member/back", 7000, salt + 999);
    t0 = t_now_ms();
    (void)t_ha_put_until(h.cl[1], &objs[39], MC_PUT_UPSERT, 20000);
    fprintf(stderr, "ha_member_lost: %d fast refusals without quorum; served again %llu ms "
                    "after quorum returned\n", fast, (unsigned long long)(t_now_ms() - t0));
    for (i = 0; i < 39; i++)
        ck_assert_msg(t_ha_get_until(h.cl[i % 3], &objs[i], 10000) == 0, "%s lost",
                      objs[i].key);
    for (i = 0; i < 40; i++) {
        free(objs[i].data);
        objs[i].data = NULL;
    }
    t_ha_cluster_finish(&h);
}
END_TEST

/* --- a PUBLISH carried over a change of master -------------------------------------------- */

#define T6_N 24

/*
 * B and C lose every PUBLISH until they follow another master (--test-fault
 * publish_lose_masters=1). Objects put through A with two replicas (A's own and one on B or
 * C; with a_dram "0", A a pure client node, both on B and C): A's PUBLISHes to B and C go
 * unanswered. The leader is killed (-9): a standby leads. A carries its PUBLISHes over the
 * change and B and C index them, telling the new master (late RESTOREs, inside its recovery
 * window, which A holds open by saying it carries PUBLISHes: HELLO, HEARTBEAT). Then A is
 * killed too: every object reads back, byte-exact, through B and C from their replicas
 * alone -- none lost because its PUBLISH was undelivered at the master change. Before the
 * fix, A gave up its PUBLISHes at the change, and the new master never learnt of B's and
 * C's replicas; with a_dram "0", before the window was held per node, every late RESTORE
 * came after the window had closed and was refused (review H1: 24 of 24 lost).
 */
static void t_ha_carried(const char *test, const char *a_dram, bool kill_owner)
{
    static struct t_ha_cl h;
    static struct t_ha_obj objs[T6_N];
    static const char *const lossy[] = {"--test-fault", "publish_lose_masters=1", NULL};
    const char *const *const more[T_HA_AGENTS] = {NULL, lossy, lossy};
    int remote = strcmp(a_dram, "0") == 0 ? 2 : 1; /* replicas of an object on B and C */
    uint64_t salt = t_fc_salt(), t0, t_kill, t1;
    json_int_t n;
    char key[48];
    int old, now, i, k, err;

    if (t_ha_etcd_bin() == NULL)
        return;
    t_ha_a_dram = a_dram;
    t_ha_cluster_start_with(&h, test, 1, more);
    for (i = 0; i < T6_N; i++) {
        snprintf(key, sizeof(key), "carry/%d", i);
        t_ha_obj_make(&objs[i], key, 3000 + (size_t)i * 733, salt + (uint64_t)i);
        t0 = t_now_ms();
        for (;;) {
            mc_put_opts_t opts = MC_PUT_OPTS_INIT;

            opts.replicas = 2;
            err = mc_put(h.cl[0], objs[i].key, objs[i].data, objs[i].len, &opts);
            if (err != MC_ERR_UNAVAILABLE || t_now_ms() - t0 > 10000)
                break;
            t_fc_sleep_ms(50);
        }
        ck_assert_msg(err == 0, "put %s: %s", objs[i].key, mc_strerror(err));
    }
    /* the PUBLISHes to B and C are lost and tried again */
    t0 = t_now_ms();
    while (t_fc_stat(h.agents[0].sock, "publish_retries") < T6_N * remote &&
           t_now_ms() - t0 < 10000)
        t_fc_sleep_ms(100);
    ck_assert_int_ge(t_fc_stat(h.agents[0].sock, "publish_retries"), T6_N * remote);
    ck_assert_int_eq(t_fc_stat(h.agents[1].sock, "published_in") +
                         t_fc_stat(h.agents[2].sock, "published_in"),
                     0);
    ck_assert_int_eq(t_fc_stat(h.agents[0].sock, "publish_queued"), T6_N * remote);

    old = t_ha_leader(&h.ms, NULL);
    ck_assert_int_ge(old, 0);
    t_kill = t_now_ms();
    ck_assert_int_eq(kill(h.ms.p[old].pid, SIGKILL), 0);
    if (kill_owner) {
        ck_assert_int_eq(kill(h.agents[1].pid, SIGKILL), 0);
        ck_assert(t_proc_reap(&h.agents[1], t_now_ms() + 5000));
        h.agents[1].pid = 0;
    }
    now = t_ha_wait_leader(&h.ms, old, 10000);
    ck_assert_msg(now >= 0, "no standby took over");
    (void)t_proc_reap(&h.ms.p[old], t_now_ms() + 5000);
    if (kill_owner) {
        /* B went with the leader (one host): A's PUBLISHes to B never settle. A's own
         * replicas are reported at once all the same: every object reads back within 5 s
         * of the new leader, not after A's bound on its carried PUBLISHes (review M1) */
        t1 = t_now_ms();
        for (i = 0; i < T6_N; i++)
            ck_assert_msg(t_ha_get_until(h.cl[0], &objs[i], 5000) == 0,
                          "%s through A, B killed with the leader", objs[i].key);
        fprintf(stderr, "ha_carried (B killed too): every object read back %llu ms after "
                "the new leader, %llu ms after the kill\n",
                (unsigned long long)(t_now_ms() - t1),
                (unsigned long long)(t_now_ms() - t_kill));
        ck_assert_int_lt(t_now_ms() - t1, 5000);
        for (i = 0; i < T6_N; i++) {
            free(objs[i].data);
            objs[i].data = NULL;
        }
        t_ha_cluster_finish(&h);
        return;
    }

    /* B and C index every object at last: A kept the PUBLISHes across the change */
    t0 = t_now_ms();
    while ((n = t_ha_stat_try(h.agents[1].sock, "published_in") +
                t_ha_stat_try(h.agents[2].sock, "published_in")) < T6_N * remote) {
        ck_assert_msg(t_now_ms() - t0 < 20000,
                      "B and C indexed %lld of %d objects 20 s after the master change: the "
                      "PUBLISHes were given up",
                      (long long)n, T6_N * remote);
        t_fc_sleep_ms(100);
    }
    t1 = t_now_ms() - t_kill;
    for (i = 0; i < T6_N; i++)
        for (k = 0; k < T_HA_AGENTS; k++)
            ck_assert_msg(t_ha_get_until(h.cl[k], &objs[i], 15000) == 0,
                          "%s through %s after the master change", objs[i].key,
                          t_ha_names[k]);
    fprintf(stderr,
            "ha_carried (A's dram %s): %d PUBLISHes indexed %llu ms after the kill, %lld of "
            "them told the new master late, %lld refused; all read back %llu ms after the "
            "kill\n",
            a_dram, T6_N * remote, (unsigned long long)t1,
            (long long)(t_fc_stat(h.agents[1].sock, "late_restored") +
                        t_fc_stat(h.agents[2].sock, "late_restored")),
            (long long)(t_fc_stat(h.agents[1].sock, "late_refused") +
                        t_fc_stat(h.agents[2].sock, "late_refused")),
            (unsigned long long)(t_now_ms() - t_kill));
    /* A's carried PUBLISHes all settled (none left to its 30 s give-up) */
    t0 = t_now_ms();
    while (t_ha_stat_try(h.agents[0].sock, "publish_queued") != 0 && t_now_ms() - t0 < 10000)
        t_fc_sleep_ms(100);
    ck_assert_int_eq(t_fc_stat(h.agents[0].sock, "publish_queued"), 0);
    ck_assert_int_eq(t_fc_stat(h.agents[0].sock, "publish_given_up"), 0);
    /* A goes: B's and C's replicas are all that is left, and the new master knows them */
    ck_assert_int_eq(kill(h.agents[0].pid, SIGKILL), 0);
    ck_assert(t_proc_reap(&h.agents[0], t_now_ms() + 5000));
    h.agents[0].pid = 0;
    for (i = 0; i < T6_N; i++)
        for (k = 1; k < T_HA_AGENTS; k++) {
            t0 = t_now_ms();
            do {
                err = t_ha_get(h.cl[k], &objs[i]);
                if (err != 0)
                    t_fc_sleep_ms(50);
            } while (err != 0 && err != MC_ERR_NOT_FOUND && t_now_ms() - t0 < 15000);
            ck_assert_msg(err == 0, "%s through %s with A gone: %s (its replica on B or C "
                          "unknown to the new master?)",
                          objs[i].key, t_ha_names[k], mc_strerror(err));
        }
    for (i = 0; i < T6_N; i++) {
        free(objs[i].data);
        objs[i].data = NULL;
    }
    t_ha_cluster_finish(&h);
}

START_TEST(test_ha_publish_carried_over)
{
    t_ha_carried(__func__, "64M", false);
}
END_TEST

/* The same with A a pure client node (dram 0): it mounts no segment, so only its "carrying"
 * flag keeps the new master's window open for B's and C's late RESTOREs (review H1). */
START_TEST(test_ha_publish_carried_over_pure_client)
{
    t_ha_carried(__func__, "0", false);
}
END_TEST

/* B killed with the leader while A's PUBLISHes to it are undelivered (review M1). */
START_TEST(test_ha_publish_carried_owner_lost)
{
    t_ha_carried(__func__, "64M", true);
}
END_TEST

/* --- main -------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    const TTest *const tests[] = {
        test_ha_directory_rebuilt_from_agents,
        test_ha_drained_then_rebuilt,
        test_ha_publish_drop_lost,
        test_ha_etcd_client,
        test_ha_leader_killed_under_load,
        test_ha_leader_sigstop,
        test_ha_etcd_member_lost,
        test_ha_publish_carried_over,
        test_ha_publish_carried_over_pure_client,
        test_ha_publish_carried_owner_lost,
        test_ha_rebuild_figure, /* by name only: a figure, not a test of the suite */
    };
    const char *only = argc > 1 ? argv[1] : NULL;
    bool etcd_only = only != NULL && strcmp(only, "etcd") == 0;
    bool need_etcd = false;
    Suite *s;
    TCase *tc;

    s = suite_create("ha");
    tc = tcase_create("ha");
    tcase_set_timeout(tc, 300);
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        bool etcd = tests[i] != test_ha_directory_rebuilt_from_agents &&
                    tests[i] != test_ha_drained_then_rebuilt &&
                    tests[i] != test_ha_publish_drop_lost &&
                    tests[i] != test_ha_rebuild_figure;

        if (tests[i] == test_ha_rebuild_figure &&
            (only == NULL || strcmp(only, tests[i]->name) != 0))
            continue;

        if (only == NULL || (etcd_only && etcd) || strcmp(only, tests[i]->name) == 0) {
            tcase_add_test(tc, tests[i]);
            need_etcd |= etcd;
        }
    }
    if (need_etcd && t_ha_etcd_bin() == NULL) {
        fprintf(stderr, "test_ha: no etcd binary (MC_ETCD_BIN, /usr/bin/etcd): skipping\n");
        return 77;
    }
    suite_add_tcase(s, tc);
    return t_fc_run(s, NULL);
}
