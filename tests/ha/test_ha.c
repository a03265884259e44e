/*
 * Master high availability (docs/master.md, "High availability"; docs/failure-contract.md,
 * "master restarts"): the directory comes back from what the agents hold. Real mc-master
 * and cluster-mode mc-agents on loopback (tests/lib/t_fcluster.h).
 *
 *   test_ha_directory_rebuilt_from_agents  kill -9 the master, start a new one on its
 *                                          address: every complete object is back, with
 *                                          its bytes; nothing removed, replaced or
 *                                          expired comes back; later puts win.
 *
 * test_ha [TEST] runs one test. After a failed test, main() prints the tail of its
 * daemons' logs and keeps its directory.
 */
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <mc/mc.h>

#include "tests/lib/t_fcluster.h"

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

/* --- main -------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    const TTest *const tests[] = {
        test_ha_directory_rebuilt_from_agents,
    };
    const char *only = argc > 1 ? argv[1] : NULL;
    SRunner *sr;
    Suite *s;
    TCase *tc;
    int failed;

    s = suite_create("ha");
    tc = tcase_create("ha");
    tcase_set_timeout(tc, 120);
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
        if (only == NULL || strcmp(only, tests[i]->name) == 0)
            tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    t_fc_records = mmap(NULL, T_FC_MAX_TESTS * sizeof(*t_fc_records), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (t_fc_records == MAP_FAILED)
        t_fc_records = NULL; /* the tests still run; a failure shows no logs */
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    t_fc_dump_failed();
    return failed == 0 ? 0 : 1;
}
