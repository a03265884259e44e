/*
 * The tenants setting (daemon/agent/tenant_cfg.h): what it accepts, what it refuses with a
 * reason, how DRAM is split, and which tenant a peer's credentials put it in.
 */
#include <string.h>

#include <check.h>

#include <mc/mc_status.h>

#include "daemon/agent/tenant_cfg.h"

#define MiB (UINT64_C(1) << 20)

static int t_parse(const char *json, uint64_t dram, struct tenant_cfg **t, size_t *n, char *err)
{
    return tenant_cfg_parse(json, dram, t, n, err, 256);
}

START_TEST(test_tenant_cfg_none_is_one_default)
{
    struct tenant_cfg *t;
    char err[256];
    size_t n;

    ck_assert_int_eq(t_parse(NULL, 64 * MiB, &t, &n, err), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(t[0].name, "");
    ck_assert_uint_eq(t[0].dram, 64 * MiB);
    ck_assert_uint_eq(tenant_cfg_match(t, n, 1000, 1000, NULL, 0), 0);
    tenant_cfg_free(t, n);
}
END_TEST

START_TEST(test_tenant_cfg_split_and_match)
{
    struct tenant_cfg *t;
    char err[256];
    size_t n;
    gid_t groups[] = {5, 3000};

    ck_assert_int_eq(t_parse("{\"a\":{\"uids\":[1001,1002],\"quota_bytes\":8388608},"
                             "\"b\":{\"gids\":[3000],\"quota_bytes\":67108864,"
                             "\"dram_bytes\":4194304}}",
                             64 * MiB, &t, &n, err),
                     0);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(t[1].name, "a");
    ck_assert_uint_eq(t[1].quota, 8 * MiB);
    ck_assert_uint_eq(t[1].dram, 8 * MiB);  /* the quota by default */
    ck_assert_uint_eq(t[2].dram, 4 * MiB);  /* dram_bytes */
    ck_assert_uint_eq(t[0].dram, 52 * MiB); /* what is left */
    ck_assert_uint_eq(tenant_cfg_match(t, n, 1002, 100, NULL, 0), 1);
    ck_assert_uint_eq(tenant_cfg_match(t, n, 7, 3000, NULL, 0), 2);     /* primary gid */
    ck_assert_uint_eq(tenant_cfg_match(t, n, 7, 100, groups, 2), 2);    /* supplementary */
    ck_assert_uint_eq(tenant_cfg_match(t, n, 7, 100, groups, 1), 0);    /* nobody's */
    ck_assert_uint_eq(tenant_cfg_match(t, n, 0, 0, NULL, 0), 0);        /* root: default */
    tenant_cfg_free(t, n);
    /* a client node: nobody's data here */
    ck_assert_int_eq(t_parse("{\"a\":{\"uids\":[1],\"quota_bytes\":8388608}}", 0, &t, &n, err),
                     0);
    ck_assert_uint_eq(t[1].dram, 0);
    ck_assert_uint_eq(t[0].dram, 0);
    tenant_cfg_free(t, n);
}
END_TEST

START_TEST(test_tenant_cfg_refusals_say_why)
{
    static const struct {
        const char *json, *why;
    } bad[] = {
        {"[1]", "expected an object"},
        {"{\"a\":1", "not JSON"},
        {"{\"a b\":{\"uids\":[1],\"quota_bytes\":8388608}}", "a name is"},
        {"{\"0123456789abcdef0123456789abcdefX\":{\"uids\":[1],\"quota_bytes\":8388608}}",
         "a name is"},
        {"{\"a\":{\"uids\":[1]}}", "quota_bytes is required"},
        {"{\"a\":{\"uids\":[1],\"quota_bytes\":1024}}", "at least 1 MiB"},
        {"{\"a\":{\"uids\":[1],\"quota_bytes\":\"8M\"}}", "number of bytes"},
        {"{\"a\":{\"quota_bytes\":8388608}}", "nobody is in it"},
        {"{\"a\":{\"uids\":[-1],\"quota_bytes\":8388608}}", "not an id"},
        {"{\"a\":{\"uids\":\"1\",\"quota_bytes\":8388608}}", "array"},
        {"{\"a\":{\"uids\":[1],\"quota_bytes\":8388608,\"extra\":1}}", "unknown field"},
        {"{\"a\":{\"uids\":[1],\"quota_bytes\":8388608},\"b\":{\"uids\":[1],"
         "\"quota_bytes\":8388608}}",
         "uid 1 is in a and b"},
        {"{\"a\":{\"uids\":[1],\"quota_bytes\":8388608,\"dram_bytes\":134217728}}",
         "more than dram"},
        {"{\"a\":{\"uids\":[1],\"quota_bytes\":8388608},\"a\":{\"uids\":[2],"
         "\"quota_bytes\":8388608}}",
         "not JSON"},
    };
    struct tenant_cfg *t = NULL;
    char err[256];
    size_t n = 0;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        ck_assert_int_eq(t_parse(bad[i].json, 64 * MiB, &t, &n, err), MC_ERR_INVALID);
        ck_assert_msg(strstr(err, bad[i].why) != NULL, "%s: got \"%s\"", bad[i].json, err);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tenant_cfg");
    TCase *tc = tcase_create("tenant_cfg");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_tenant_cfg_none_is_one_default);
    tcase_add_test(tc, test_tenant_cfg_split_and_match);
    tcase_add_test(tc, test_tenant_cfg_refusals_say_why);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
