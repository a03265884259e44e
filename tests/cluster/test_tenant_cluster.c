/*
 * Tenants in a cluster (docs/tenants.md): a real mc-master, a data agent and a client node
 * (--dram 0), both configured with tenants t1 (uid 2001) and t2 (uid 2002); clients run
 * under those uids (the test needs root, and exits 77 without it).
 *  test_tenant_cluster_remote_read_isolated: t1's object, put through the client node, is
 *    read by t1's clients on both nodes (remotely through t1's own landing segment) and by
 *    nobody else: t2 and the default tenant get MC_ERR_NOT_FOUND; `mcctl cluster` shows
 *    each tenant's use.
 *  test_tenant_cluster_quota: t1 puts 3x its quota through the client node; every put
 *    succeeds by evicting t1's own objects, the master's figure for t1 never passes the
 *    quota, and the default tenant's objects all stay.
 */
#include <check.h>
#include <grp.h>
#include <sys/wait.h>

#include <mc/mc.h>

#include "t_cluster.h"

#define UID_T1 2001u
#define UID_T2 2002u
#define MIB (1024u * 1024u)

static const char *const t_extra[] = {
    "--set",
    "tenants={\"t1\":{\"uids\":[2001],\"quota_bytes\":8388608},"
    "\"t2\":{\"uids\":[2002],\"quota_bytes\":8388608}}",
    NULL};

static struct t_proc master, data, client;
static char dir[256];

static void setup(void)
{
    char token[65];

    if (geteuid() != 0) {
        fprintf(stderr, "test_tenant_cluster: needs root to run clients as other uids\n");
        exit(77);
    }
    t_mkdtemp(dir, sizeof(dir));
    ck_assert_int_eq(chmod(dir, 0755), 0);
    t_random_token(token, sizeof(token));
    t_master_start(&master, dir, token);
    t_agent_start(&data, dir, master.port, "data", NULL, "48M", token, t_extra);
    t_agent_start(&client, dir, master.port, "client", NULL, "0", token, t_extra);
}

static void teardown(void)
{
    t_proc_kill(&client);
    t_proc_kill(&data);
    t_proc_kill(&master);
}

/* Run fn(sock, arg) in a child as uid; its exit status (0: every step held). */
struct t_as_call {
    const char *sock;
    int (*fn)(const char *sock, int arg);
    int arg;
};

static int t_as_run(void *ctx)
{
    const struct t_as_call *c = ctx;

    return c->fn(c->sock, c->arg);
}

/* fn(sock, arg) as user uid (tests/lib/t_proc.h); its exit status */
static int t_as(unsigned uid, const char *sock, int (*fn)(const char *sock, int arg), int arg)
{
    struct t_as_call c = {sock, fn, arg};

    return t_fork_as(uid, t_as_run, &c);
}

static uint8_t t_byte(size_t i, int seed)
{
    return (uint8_t)(i * 31u + (size_t)seed * 7u + (i >> 9));
}

static int put_k(const char *sock, int seed)
{
    static uint8_t buf[3 * MIB];
    mc_client_t *c;

    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = t_byte(i, seed);
    if (mc_connect(sock, &c) != 0)
        return 101;
    if (mc_put(c, "tk", buf, sizeof(buf), NULL) != 0)
        return 2;
    mc_close(c);
    return 0;
}

/* Reads "tk": arg 1 wants t1's bytes, 0 wants MC_ERR_NOT_FOUND. */
static int get_k(const char *sock, int want)
{
    static uint8_t buf[3 * MIB];
    mc_client_t *c;
    size_t len = 0;
    int err;

    if (mc_connect(sock, &c) != 0)
        return 101;
    err = mc_get(c, "tk", buf, sizeof(buf), &len);
    if (want == 0)
        return err == MC_ERR_NOT_FOUND ? 0 : 2;
    if (err != 0 || len != sizeof(buf))
        return 3;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != t_byte(i, 1))
            return 4;
    }
    mc_close(c);
    return 0;
}

START_TEST(test_tenant_cluster_remote_read_isolated)
{
    json_t *j, *t1, *def;

    ck_assert_int_eq(t_as(UID_T1, client.sock, put_k, 1), 0);
    ck_assert_int_eq(t_as(UID_T1, client.sock, get_k, 1), 0); /* remote, landing of t1 */
    ck_assert_int_eq(t_as(UID_T1, data.sock, get_k, 1), 0);   /* local, t1's segment */
    ck_assert_int_eq(t_as(UID_T2, client.sock, get_k, 0), 0);
    ck_assert_int_eq(t_as(UID_T2, data.sock, get_k, 0), 0);
    ck_assert_int_eq(t_as(0, client.sock, get_k, 0), 0);      /* root: the default tenant */
    /* t2's own "tk" is another object */
    ck_assert_int_eq(t_as(UID_T2, client.sock, put_k, 2), 0);
    ck_assert_int_eq(t_as(UID_T1, data.sock, get_k, 1), 0);

    j = t_cluster_json(client.sock);
    ck_assert_ptr_nonnull(j);
    t1 = t_json_find_str(j, "tenants", "name", "t1");
    def = t_json_find_str(j, "tenants", "name", "");
    ck_assert_ptr_nonnull(t1);
    ck_assert_ptr_nonnull(def);
    ck_assert_int_eq(t_json_int(t1, "quota_bytes"), 8 * MIB);
    ck_assert_int_eq(t_json_int(t1, "capacity"), 8 * MIB);
    ck_assert_int_ge(t_json_int(t1, "used"), 3 * MIB);
    ck_assert_int_eq(t_json_int(def, "used"), 0);
    json_decref(j);
}
END_TEST

static int fill(const char *sock, int n)
{
    static uint8_t buf[MIB];
    char key[32];
    mc_client_t *c;

    memset(buf, 0x5a, sizeof(buf));
    if (mc_connect(sock, &c) != 0)
        return 101;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "q/%d", i);
        if (mc_put(c, key, buf, sizeof(buf) - 64, NULL) != 0)
            return 2;
    }
    mc_close(c);
    return 0;
}

START_TEST(test_tenant_cluster_quota)
{
    static uint8_t buf[MIB];
    char key[32];
    mc_client_t *root;
    json_t *j, *t1;
    int i;

    ck_assert_int_eq(mc_connect(client.sock, &root), 0);
    memset(buf, 0x11, sizeof(buf));
    for (i = 0; i < 16; i++) {
        snprintf(key, sizeof(key), "r/%d", i);
        ck_assert_int_eq(mc_put(root, key, buf, sizeof(buf) - 64, NULL), 0);
    }
    ck_assert_int_eq(t_as(UID_T1, client.sock, fill, 24), 0);
    j = t_cluster_json(client.sock);
    ck_assert_ptr_nonnull(j);
    t1 = t_json_find_str(j, "tenants", "name", "t1");
    ck_assert_ptr_nonnull(t1);
    ck_assert_int_gt(t_json_int(t1, "used"), 0);
    ck_assert_int_le(t_json_int(t1, "used"), 8 * MIB);
    json_decref(j);
    for (i = 0; i < 16; i++) {
        snprintf(key, sizeof(key), "r/%d", i);
        ck_assert_int_eq(mc_exist(root, key), 1);
    }
    mc_close(root);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tenant_cluster");
    TCase *tc = tcase_create("tenant_cluster");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_tenant_cluster_remote_read_isolated);
    tcase_add_test(tc, test_tenant_cluster_quota);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
