/*
 * Tenants against a real agent (docs/tenants.md), clients under other uids (the tests need
 * root to switch uid and exit 77 without it):
 *  test_tenant_cross_tenant_isolated: a client of tenant B cannot read, overwrite or remove
 *    tenant A's keys (nor list, match or pin them, nor through mcctl), and the same key is
 *    two objects;
 *  test_tenant_segments_not_mapped: B's client maps only B's segments, never A's bytes;
 *  test_tenant_quota_own_eviction_only: a tenant over its quota evicts its own objects only,
 *    and never holds more than its quota;
 *  test_tenant_quota_kill_sweep: writers of a tenant killed at random points leave no charge
 *    behind: once their keys are removed the tenant uses nothing.
 */
#include <check.h>
#include <grp.h>
#include <signal.h>
#include <sys/wait.h>

#include <jansson.h>

#include <mc/mc.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* a shared helper header */
#include "tests/integration/t_agent.h"
#pragma GCC diagnostic pop
#include "libmc/tool.h"
#include "tests/lib/t_rng.h"

#define UID_A 2001u
#define UID_B 2002u
#define MiB (1024u * 1024u)

static const char *const t_tenants[] = {
    "--set",
    "tenants={\"a\":{\"uids\":[2001],\"quota_bytes\":8388608},"
    "\"b\":{\"uids\":[2002],\"quota_bytes\":8388608}}",
    NULL};

static void t_need_root(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "test_tenant: needs root to run clients as other uids: skipping\n");
        exit(77);
    }
}

static void t_start(struct t_agent *a, const char *dram)
{
    t_need_root();
    t_agent_start(a, dram, t_tenants);
    ck_assert_int_eq(chmod(a->dir, 0755), 0);
}

/* Run fn(sock) in a child as uid (gid the same, no supplementary groups); its exit status. */
struct t_as_call {
    const char *sock;
    int (*fn)(const char *sock);
};

static int t_as_run(void *ctx)
{
    const struct t_as_call *c = ctx;

    return c->fn(c->sock);
}

/* fn(sock) as user uid (tests/lib/t_proc.h); its exit status */
static int t_as(unsigned uid, const char *sock, int (*fn)(const char *sock))
{
    struct t_as_call c = {sock, fn};

    return t_fork_as(uid, t_as_run, &c);
}

static mc_client_t *t_conn(const char *sock)
{
    mc_client_t *c = NULL;

    if (mc_connect(sock, &c) != 0)
        _exit(101);
    return c;
}

/* What the agent says of tenant `name` ("" the default): field `f` of stats' tenants. */
static int64_t t_tenant_stat(const char *sock, const char *name, const char *f)
{
    mc_client_t *c;
    json_t *root, *t;
    char *js;
    size_t len, i;
    int64_t v = -1;

    ck_assert_int_eq(mc_connect(sock, &c), 0);
    ck_assert_int_eq(mc_client_stats_json(c, &js, &len), 0);
    root = json_loadb(js, len, 0, NULL);
    ck_assert_ptr_nonnull(root);
    json_array_foreach(json_object_get(root, "tenants"), i, t) {
        if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
            v = json_integer_value(json_object_get(t, f));
    }
    json_decref(root);
    free(js);
    mc_close(c);
    return v;
}

/* --- cross-tenant ------------------------------------------------------------------------- */

static int a_puts(const char *sock)
{
    mc_client_t *c = t_conn(sock);

    if (mc_put(c, "shared/k", "AAAA", 4, NULL) != 0 || mc_put(c, "a/only", "aaaa", 4, NULL) != 0)
        return 1;
    mc_close(c);
    return 0;
}

static int count_key(void *arg, const char *key, size_t len)
{
    (void)key;
    (void)len;
    (*(int *)arg)++;
    return 0;
}

/* Tenant B tries everything on A's keys; each step that gets through is its exit code. */
static int b_attacks(const char *sock)
{
    mc_client_t *c = t_conn(sock);
    mc_put_opts_t up = MC_PUT_OPTS_INIT;
    char buf[16];
    uint64_t removed = 0, cursor = 0;
    const char *const pin_keys[] = {"a/only"};
    mc_pin_t pin = 0;
    size_t len = 0;
    int listed = 0;

    up.flags = MC_PUT_UPSERT;
    if (mc_get(c, "shared/k", buf, sizeof(buf), &len) != MC_ERR_NOT_FOUND)
        return 2; /* read A's */
    if (mc_exist(c, "a/only") != 0)
        return 3;
    if (mc_remove(c, "a/only") != MC_ERR_NOT_FOUND)
        return 4;
    if (mc_client_remove_prefix(c, "a/", &removed) < 0 || removed != 0)
        return 5;
    if (mc_prefix_pin(c, 1, pin_keys, &pin) != 0 || mc_prefix_match(c, 1, pin_keys) != 0)
        return 10; /* A's key is not there to pin or match */
    (void)mc_unpin(c, pin);
    /* the same key is B's own object */
    if (mc_put(c, "shared/k", "BBBB", 4, NULL) != 0 || mc_put(c, "shared/k", "BBBB", 4, &up) != 0)
        return 6;
    if (mc_get(c, "shared/k", buf, sizeof(buf), &len) != 0 || len != 4 || memcmp(buf, "BBBB", 4))
        return 7;
    if (mc_client_list(c, "", 0, &cursor, 1000, count_key, &listed) < 0 || listed != 1)
        return 8; /* only its own key */
    if (mc_remove(c, "shared/k") != 0)
        return 9;
    mc_close(c);
    return 0;
}

static int a_checks(const char *sock)
{
    mc_client_t *c = t_conn(sock);
    char buf[16];
    size_t len = 0;

    if (mc_get(c, "shared/k", buf, sizeof(buf), &len) != 0 || len != 4 || memcmp(buf, "AAAA", 4))
        return 2;
    if (mc_exist(c, "a/only") != 1)
        return 3;
    mc_close(c);
    return 0;
}

START_TEST(test_tenant_cross_tenant_isolated)
{
    struct t_agent a;
    const char *mcctl = getenv("MC_MCCTL_BIN");
    char cmd[4096];
    mc_client_t *root;
    char buf[16];

    t_start(&a, "64M");
    ck_assert_int_eq(t_as(UID_A, a.sock, a_puts), 0);
    ck_assert_int_eq(t_as(UID_B, a.sock, b_attacks), 0);
    /* and through mcctl, as B: rm of A's key does not reach it */
    if (mcctl != NULL) {
        snprintf(cmd, sizeof(cmd),
                 "cp '%s' '%s/mcctl' && chmod 0755 '%s/mcctl' && setpriv --reuid=%u "
                 "--regid=%u --clear-groups '%s/mcctl' --socket '%s' rm a/only >/dev/null 2>&1",
                 mcctl, a.dir, a.dir, UID_B, UID_B, a.dir, a.sock);
        ck_assert_int_ne(system(cmd), 0); /* not found */
    }
    ck_assert_int_eq(t_as(UID_A, a.sock, a_checks), 0);
    /* root is in no tenant: the default one, which sees neither */
    ck_assert_int_eq(mc_connect(a.sock, &root), 0);
    ck_assert_int_eq(mc_get(root, "shared/k", buf, sizeof(buf), NULL), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_put(root, "shared/k", "RRRR", 4, NULL), 0);
    mc_close(root);
    ck_assert_int_eq(t_as(UID_A, a.sock, a_checks), 0);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

/* --- what a tenant's client maps ------------------------------------------------------------ */

/* 0 when this process maps a memfd named `name` exactly, 1 when it does not. */
static int maps_memfd(const char *name)
{
    char line[512], want[128];
    FILE *f = fopen("/proc/self/maps", "r");
    int found = 0;

    snprintf(want, sizeof(want), "/memfd:%s ", name);
    if (f == NULL)
        return 2;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, want) != NULL)
            found = 1;
    }
    fclose(f);
    return found ? 0 : 1;
}

static int b_maps(const char *sock)
{
    mc_client_t *c = t_conn(sock);
    char buf[8];

    (void)mc_get(c, "x", buf, sizeof(buf), NULL); /* maps lazily or not: either way */
    if (maps_memfd("mc-dram-b") != 0)
        return 2; /* its own segment */
    if (maps_memfd("mc-dram-a") != 1 || maps_memfd("mc-dram") != 1)
        return 3; /* A's, or the default tenant's */
    mc_close(c);
    return 0;
}

START_TEST(test_tenant_segments_not_mapped)
{
    struct t_agent a;

    t_start(&a, "64M");
    ck_assert_int_eq(t_as(UID_A, a.sock, a_puts), 0);
    ck_assert_int_eq(t_as(UID_B, a.sock, b_maps), 0);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

/* --- quotas --------------------------------------------------------------------------------- */

static int a_fills(const char *sock)
{
    mc_client_t *c = t_conn(sock);
    static char blob[MiB];
    char key[32];
    int i;

    memset(blob, 'a', sizeof(blob));
    for (i = 0; i < 40; i++) { /* 40 MiB through an 8 MiB quota */
        snprintf(key, sizeof(key), "a/%d", i);
        if (mc_put(c, key, blob, sizeof(blob) - 64, NULL) != 0)
            return 2;
    }
    mc_close(c);
    return 0;
}

START_TEST(test_tenant_quota_own_eviction_only)
{
    struct t_agent a;
    mc_client_t *root;
    static char blob[MiB];
    char key[32];
    int i;

    t_start(&a, "64M");
    ck_assert_int_eq(mc_connect(a.sock, &root), 0);
    memset(blob, 'r', sizeof(blob));
    for (i = 0; i < 16; i++) {
        snprintf(key, sizeof(key), "r/%d", i);
        ck_assert_int_eq(mc_put(root, key, blob, sizeof(blob) - 64, NULL), 0);
    }
    ck_assert_int_eq(t_as(UID_A, a.sock, a_fills), 0);
    ck_assert_int_le(t_tenant_stat(a.sock, "a", "used_bytes"), 8 * MiB);
    ck_assert_int_gt(t_tenant_stat(a.sock, "a", "used_bytes"), 0);
    ck_assert_int_eq(t_tenant_stat(a.sock, "a", "quota_bytes"), 8 * MiB);
    /* the default tenant lost nothing to A */
    for (i = 0; i < 16; i++) {
        snprintf(key, sizeof(key), "r/%d", i);
        ck_assert_int_eq(mc_exist(root, key), 1);
    }
    mc_close(root);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

static int a_writes_forever(const char *sock)
{
    mc_client_t *c = t_conn(sock);
    static char blob[2 * MiB];
    char key[32];

    memset(blob, 'w', sizeof(blob));
    for (unsigned i = 0;; i++) {
        snprintf(key, sizeof(key), "w/%u/%u", (unsigned)getpid(), i);
        (void)mc_put(c, key, blob, sizeof(blob) - (i % 7) * 4096, NULL);
    }
    return 0;
}

static int a_removes_all(const char *sock)
{
    mc_client_t *c = t_conn(sock);
    uint64_t removed = 0;

    if (mc_client_remove_prefix(c, "w/", &removed) < 0)
        return 2;
    mc_close(c);
    return 0;
}

START_TEST(test_tenant_quota_kill_sweep)
{
    struct t_agent a;
    struct t_rng rng;
    int64_t used = -1;
    uint64_t deadline;
    int round;

    t_rng_seed(&rng, 0);
    t_start(&a, "64M");
    for (round = 0; round < 12; round++) {
        pid_t w[2];

        for (int k = 0; k < 2; k++) {
            fflush(NULL);
            w[k] = fork();
            ck_assert_int_ge(w[k], 0);
            if (w[k] == 0) {
                if (setgroups(0, NULL) != 0 || setresgid(UID_A, UID_A, UID_A) != 0 ||
                    setresuid(UID_A, UID_A, UID_A) != 0)
                    _exit(100);
                _exit(a_writes_forever(a.sock));
            }
        }
        usleep((useconds_t)(30000 + t_rng_below(&rng, 220000)));
        for (int k = 0; k < 2; k++) {
            kill(w[k], SIGKILL);
            ck_assert_int_eq(waitpid(w[k], NULL, 0), w[k]);
        }
    }
    /* what completed is held (and charged) until removed */
    ck_assert_int_gt(t_tenant_stat(a.sock, "a", "used_bytes"), 0);
    ck_assert_int_eq(t_as(UID_A, a.sock, a_removes_all), 0);
    /* every charge of a killed writer is refunded once the agent sees it go */
    deadline = t_now_ms() + 10000;
    while (t_now_ms() < deadline && (used = t_tenant_stat(a.sock, "a", "used_bytes")) != 0)
        usleep(50000);
    ck_assert_int_eq(used, 0);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tenant");
    TCase *tc = tcase_create("tenant");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_tenant_cross_tenant_isolated);
    tcase_add_test(tc, test_tenant_segments_not_mapped);
    tcase_add_test(tc, test_tenant_quota_own_eviction_only);
    tcase_add_test(tc, test_tenant_quota_kill_sweep);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
