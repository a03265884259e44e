/*
 * Tenants in the master service (master.h, "tenants") and their tagged keys
 * (daemon/common/tenant_key.h): a put lands only in its tenant's segments, a quota bounds
 * what a tenant holds across segments and evicts only its own objects, and an unknown
 * tenant has no room.
 */
#include <stdio.h>
#include <string.h>

#include <check.h>

#include "daemon/common/tenant_key.h"
#include "tests/unit/master/t_master.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

static uint32_t t_tseg(struct mc_master *m, uint32_t node, uint64_t size, const char *tenant,
                       uint64_t quota)
{
    struct mc_master_seg_desc d = {.node = node, .kind = MC_SEG_DRAM, .base = 0x10000000,
                                   .size = size, .quota = quota};
    uint32_t seg;

    snprintf(d.tenant, sizeof(d.tenant), "%s", tenant);
    ck_assert_int_eq(mc_master_segment_mount(m, &d, &seg), 0);
    return seg;
}

/* A directory key of tenant t. */
static size_t t_dkey(const char *t, const char *key, char *out)
{
    return mc_tenant_key_tag(t, key, strlen(key), out);
}

static int t_tstart(struct mc_master *m, const char *t, const char *key, uint64_t size,
                    uint32_t writer, struct mc_master_put_grant *g)
{
    char dk[MC_DIR_KEY_MAX];
    struct mc_master_put_req r = {.key = dk, .size = size, .replicas = 1, .writer = writer,
                                  .preferred = MC_MASTER_NODE_NONE};

    r.key_len = t_dkey(t, key, dk);
    return mc_master_put_start(m, &r, g);
}

static void t_tput(struct mc_master *m, const char *t, const char *key, uint64_t size,
                   uint32_t writer)
{
    char dk[MC_DIR_KEY_MAX];
    struct mc_master_put_grant g;
    struct mc_master_ref ref = {.key = dk, .node = writer};

    ck_assert_int_eq(t_tstart(m, t, key, size, writer, &g), 0);
    ref.key_len = t_dkey(t, key, dk);
    ref.version = g.version;
    ck_assert_int_eq(mc_master_put_end(m, &ref), 0);
}

static int t_texist(struct mc_master *m, const char *t, const char *key)
{
    char dk[MC_DIR_KEY_MAX];

    return mc_master_exist(m, dk, t_dkey(t, key, dk));
}

static struct mc_master_tenant_info t_tenant(struct mc_master *m, const char *name)
{
    struct mc_master_tenant_info ti[MC_MASTER_TENANTS_MAX];
    size_t n = mc_master_tenant_list(m, ti, MC_MASTER_TENANTS_MAX), i;

    for (i = 0; i < n; i++) {
        if (strcmp(ti[i].name, name) == 0)
            return ti[i];
    }
    ck_abort_msg("no tenant %s", name);
    return ti[0];
}

START_TEST(test_tenant_key_tag_and_split)
{
    char out[MC_DIR_KEY_MAX], longest[MC_KEY_MAX];
    const char *name, *key;
    size_t nl, kl, n;

    n = mc_tenant_key_tag("acme", "k/1", 3, out);
    ck_assert_uint_eq(n, 1 + 4 + 1 + 3);
    ck_assert_mem_eq(out, "\0acme\0k/1", n);
    ck_assert(mc_tenant_key_split(out, n, &name, &nl, &key, &kl));
    ck_assert_uint_eq(nl, 4);
    ck_assert_mem_eq(name, "acme", 4);
    ck_assert_uint_eq(kl, 3);
    ck_assert_mem_eq(key, "k/1", 3);
    /* the default tenant: the key as it is */
    n = mc_tenant_key_tag(NULL, "k", 1, out);
    ck_assert_uint_eq(n, 1);
    ck_assert(mc_tenant_key_split(out, n, &name, &nl, &key, &kl));
    ck_assert_uint_eq(nl, 0);
    ck_assert_uint_eq(kl, 1);
    ck_assert_uint_eq(mc_tenant_key_tag("", "k", 1, out), 1);
    /* the longest client key of the longest name fits MC_DIR_KEY_MAX */
    memset(longest, 'x', sizeof(longest));
    n = mc_tenant_key_tag("0123456789abcdef0123456789abcdef", longest, MC_KEY_MAX, out);
    ck_assert_uint_eq(n, MC_DIR_KEY_MAX);
    /* an empty prefix of a tenant: its tag alone */
    ck_assert_uint_eq(mc_tenant_key_tag("t", "", 0, out), 3);
    /* malformed tags, which no agent writes */
    ck_assert(!mc_tenant_key_split("\0abc", 4, &name, &nl, &key, &kl));
    ck_assert(!mc_tenant_key_split("\0\0k", 3, &name, &nl, &key, &kl));
    ck_assert(!mc_tenant_key_split("\0a b\0k", 6, &name, &nl, &key, &kl));
    /* names */
    ck_assert(mc_tenant_name_ok("a-b_c.9", 7));
    ck_assert(!mc_tenant_name_ok("", 0));
    ck_assert(!mc_tenant_name_ok("a/b", 3));
    ck_assert(!mc_tenant_name_ok("0123456789abcdef0123456789abcdefX", 33));
    /* client keys hold no NUL */
    ck_assert(mc_tenant_client_key_ok("k", 1));
    ck_assert(!mc_tenant_client_key_ok("k\0x", 3));
    ck_assert(!mc_tenant_client_key_ok("", 0));
}
END_TEST

START_TEST(test_tenant_put_lands_in_own_segment)
{
    struct mc_master *m = t_master();
    uint32_t n = t_node(m, "n1", NULL);
    uint32_t sd = t_seg(m, n, MiB), sa = t_tseg(m, n, MiB, "a", 0);
    struct mc_master_put_grant g;

    ck_assert_int_eq(t_tstart(m, "a", "k", 1000, n, &g), 0);
    ck_assert_uint_eq(g.rep[0].seg, sa);
    ck_assert_int_eq(t_tstart(m, NULL, "k", 1000, n, &g), 0);
    ck_assert_uint_eq(g.rep[0].seg, sd);
    /* the same client key in two tenants: two objects */
    ck_assert_int_eq(t_texist(m, "a", "k"), 0);
    /* no agent mounted a segment of tenant b: no room for it */
    ck_assert_int_eq(t_tstart(m, "b", "k", 1000, n, &g), MC_ERR_NO_SPACE);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_tenant_quota_evicts_own_objects_only)
{
    struct mc_master *m = t_master();
    uint32_t n1 = t_node(m, "n1", NULL), n2 = t_node(m, "n2", NULL);
    struct mc_master_tenant_info ti;
    char key[32];
    int i, present = 0;

    (void)t_seg(m, n1, MiB);
    (void)t_tseg(m, n1, MiB, "q", 256 * KiB);
    (void)t_tseg(m, n2, MiB, "q", 0); /* a mount without a quota keeps the tenant's */
    for (i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "d%d", i);
        t_put(m, key, 64 * KiB, 0, n1);
    }
    /* 2 MiB of segments, a quota of 256 KiB: 20 puts of 64 KiB each succeed, by evicting
     * the tenant's older objects; it never holds more than its quota */
    for (i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "q%d", i);
        t_tput(m, "q", key, 64 * KiB, n1);
        ti = t_tenant(m, "q");
        ck_assert_uint_le(ti.used_bytes, 256 * KiB);
    }
    for (i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "q%d", i);
        present += t_texist(m, "q", key);
    }
    ck_assert_int_eq(present, 4);
    ti = t_tenant(m, "q");
    ck_assert_uint_eq(ti.quota_bytes, 256 * KiB);
    ck_assert_uint_eq(ti.segments, 2);
    ck_assert_uint_eq(ti.capacity_bytes, 2 * MiB);
    ck_assert_uint_eq(ti.quota_refusals, 0);
    /* the default tenant lost nothing */
    for (i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "d%d", i);
        ck_assert_int_eq(t_exist(m, key), 1);
    }
    ti = t_tenant(m, "");
    ck_assert_uint_eq(ti.used_bytes, 4 * 64 * KiB);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_tenant_quota_no_space_when_nothing_may_go)
{
    struct mc_master *m = t_master();
    uint32_t n = t_node(m, "n1", NULL);
    struct mc_master_get_result res[4];
    struct mc_master_put_grant g;
    char key[32], dk[MC_DIR_KEY_MAX];
    int i;

    (void)t_tseg(m, n, MiB, "q", 256 * KiB);
    for (i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "q%d", i);
        t_tput(m, "q", key, 64 * KiB, n);
        /* a reader holds each: none may be evicted */
        ck_assert_int_eq(mc_master_get_replicas(m, dk, t_dkey("q", key, dk), &res[i]), 0);
    }
    ck_assert_int_eq(t_tstart(m, "q", "more", 64 * KiB, n, &g), MC_ERR_NO_SPACE);
    ck_assert_uint_eq(t_tenant(m, "q").quota_refusals, 1);
    /* puts in flight count: a started put holds its bytes against the quota */
    for (i = 0; i < 4; i++) {
        struct mc_master_ref ref = {.key = dk, .version = res[i].lease.version,
                                    .epoch = res[i].lease.epoch};

        snprintf(key, sizeof(key), "q%d", i);
        ref.key_len = t_dkey("q", key, dk);
        ck_assert_uint_eq(mc_master_lease_release(m, 1, &ref), 1);
    }
    ck_assert_int_eq(t_tstart(m, "q", "more", 64 * KiB, n, &g), 0);
    ck_assert_uint_le(t_tenant(m, "q").used_bytes, 256 * KiB);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_tenant_mount_checks_name_and_table)
{
    struct mc_master *m = t_master();
    uint32_t n = t_node(m, "n1", NULL), seg;
    struct mc_master_seg_desc d = {.node = n, .kind = MC_SEG_DRAM, .base = 0, .size = MiB};
    struct mc_master_seg_info info;
    int i;

    strcpy(d.tenant, "bad name");
    ck_assert_int_eq(mc_master_segment_mount(m, &d, &seg), MC_ERR_INVALID);
    for (i = 1; i < (int)MC_MASTER_TENANTS_MAX; i++) {
        snprintf(d.tenant, sizeof(d.tenant), "t%d", i);
        ck_assert_int_eq(mc_master_segment_mount(m, &d, &seg), 0);
    }
    ck_assert_int_eq(mc_master_segment_info(m, seg, &info), 0);
    ck_assert_str_eq(info.tenant, "t63");
    strcpy(d.tenant, "one-too-many");
    ck_assert_int_eq(mc_master_segment_mount(m, &d, &seg), MC_ERR_NO_SPACE);
    /* a known name still mounts */
    strcpy(d.tenant, "t1");
    ck_assert_int_eq(mc_master_segment_mount(m, &d, &seg), 0);
    mc_master_destroy(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tenant");
    TCase *tc = tcase_create("tenant");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_tenant_key_tag_and_split);
    tcase_add_test(tc, test_tenant_put_lands_in_own_segment);
    tcase_add_test(tc, test_tenant_quota_evicts_own_objects_only);
    tcase_add_test(tc, test_tenant_quota_no_space_when_nothing_may_go);
    tcase_add_test(tc, test_tenant_mount_checks_name_and_table);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
