/*
 * Unit tests of the config engine (daemon/common/config.c) and of the master service's
 * table (daemon/master/master_config.c): parsing of every type, bounds, the JSON file,
 * the environment, precedence, the command-line helper, the dump and the doc.
 *
 * They use a small test table (struct t_cfg) that has one key of every type, so the
 * engine is tested apart from any daemon's choices.
 */
#include <check.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/common/config.h"
#include "daemon/common/log.h"
#include "daemon/master/master_config.h"
#include "mc/mc_status.h"

struct t_cfg {
    bool flag;
    uint64_t count;
    uint64_t bytes;
    uint64_t wait_ms;
    double ratio;
    char *name;
    int mode;
    uint64_t big; /* unbounded, to reach 64 bits */
};

static const char *const t_modes[] = {"fast", "safe", NULL};

static const struct mc_config_entry t_table[] = {
    {.name = "flag",
     .type = MC_CFG_BOOL,
     .def = "false",
     .offset = offsetof(struct t_cfg, flag),
     .doc = "a flag"},
    {.name = "count",
     .type = MC_CFG_U64,
     .def = "10",
     .min = 1,
     .max = 1000,
     .offset = offsetof(struct t_cfg, count),
     .doc = "a count"},
    {.name = "bytes",
     .type = MC_CFG_SIZE,
     .def = "1M",
     .min = 0,
     .max = 1099511627776.0,
     .offset = offsetof(struct t_cfg, bytes),
     .doc = "a size"},
    {.name = "wait_ms",
     .type = MC_CFG_MS,
     .def = "30s",
     .offset = offsetof(struct t_cfg, wait_ms),
     .doc = "a duration"},
    {.name = "ratio",
     .type = MC_CFG_DOUBLE,
     .def = "0.25",
     .min = 0,
     .max = 1,
     .offset = offsetof(struct t_cfg, ratio),
     .doc = "a ratio | with a pipe"},
    {.name = "name",
     .type = MC_CFG_STRING,
     .def = "anon",
     .offset = offsetof(struct t_cfg, name),
     .doc = "a name"},
    {.name = "mode",
     .type = MC_CFG_ENUM,
     .def = "safe",
     .choices = t_modes,
     .offset = offsetof(struct t_cfg, mode),
     .doc = "a mode"},
    {.name = "big",
     .type = MC_CFG_U64,
     .def = "0",
     .offset = offsetof(struct t_cfg, big),
     .doc = "an unbounded integer"},
    {.name = NULL},
};

/* A daemon main's config: daemon knobs plus the master service's, through includes. */
struct t_main_cfg {
    struct mc_config_daemon daemon;
    struct mc_master_config master;
};

static const struct mc_config_entry t_main_table[] = {
    MC_CONFIG_INCLUDE(struct t_main_cfg, daemon, mc_config_daemon_table),
    MC_CONFIG_INCLUDE(struct t_main_cfg, master, mc_master_config_table),
    {.name = NULL},
};

static char t_err[512];

static void t_init(struct t_cfg *c)
{
    memset(c, 0, sizeof(*c));
    ck_assert_int_eq(mc_config_set_defaults(t_table, c), 0);
}

/* Set key=value on a fresh struct; returns the status, message in t_err. */
static int t_set(struct t_cfg *c, const char *key, const char *value)
{
    t_err[0] = '\0';
    return mc_config_set(t_table, c, key, value, t_err, sizeof(t_err));
}

static void t_expect_bad(struct t_cfg *c, const char *key, const char *value,
                         const char *needle)
{
    int rc = t_set(c, key, value);

    ck_assert_msg(rc == MC_ERR_INVALID, "%s=%s accepted (rc %d)", key, value, rc);
    ck_assert_msg(strstr(t_err, key) != NULL, "message '%s' does not name key %s", t_err, key);
    if (needle != NULL)
        ck_assert_msg(strstr(t_err, needle) != NULL, "message '%s' lacks '%s'", t_err, needle);
}

/* A temporary file holding `text`; the path is in a static buffer. */
static const char *t_write_file(const char *text)
{
    static char path[64];
    FILE *f;
    int fd;

    snprintf(path, sizeof(path), "/tmp/mc_test_config_XXXXXX");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

/* The output of a writer into a heap string (caller frees). */
static char *t_dump(const struct mc_config_entry *table, const void *base)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(mc_config_dump_json(table, base, f), 0);
    ck_assert_int_eq(fclose(f), 0);
    return buf;
}

/* A secret (the cluster token) is never printed by a dump, and a dump reloads to itself. */
START_TEST(test_config_dump_hides_secrets)
{
    struct {
        char *token;
        char *plain;
    } c = {0};
    const struct mc_config_entry table[] = {
        {.name = "token", .type = MC_CFG_STRING, .offset = 0, .doc = "x", .secret = true},
        {.name = "plain", .type = MC_CFG_STRING, .offset = sizeof(char *), .doc = "y"},
        {.name = NULL},
    };
    char err[256], *js;

    ck_assert_int_eq(mc_config_set_defaults(table, &c), 0);
    js = t_dump(table, &c);
    ck_assert_ptr_nonnull(strstr(js, "\"token\": null")); /* unset: says so */
    free(js);
    ck_assert_int_eq(mc_config_set_kv(table, &c, "token=hunter2-secret", err, sizeof(err)), 0);
    ck_assert_int_eq(mc_config_set_kv(table, &c, "plain=visible", err, sizeof(err)), 0);
    js = t_dump(table, &c);
    ck_assert_ptr_null(strstr(js, "hunter2"));
    ck_assert_ptr_nonnull(strstr(js, "(set)"));
    ck_assert_ptr_nonnull(strstr(js, "visible"));
    free(js);
    ck_assert_str_eq(c.token, "hunter2-secret"); /* only the dump hides it */
    mc_config_cleanup(table, &c);
}
END_TEST

START_TEST(test_config_defaults_applied)
{
    struct mc_master_config m;
    struct t_cfg c;

    t_init(&c);
    ck_assert(!c.flag);
    ck_assert_uint_eq(c.count, 10);
    ck_assert_uint_eq(c.bytes, 1 << 20);
    ck_assert_uint_eq(c.wait_ms, 30000);
    ck_assert_double_eq(c.ratio, 0.25);
    ck_assert_str_eq(c.name, "anon");
    ck_assert_int_eq(c.mode, 1);
    mc_config_cleanup(t_table, &c);
    ck_assert_ptr_null(c.name);
    mc_config_cleanup(t_table, NULL); /* accepts NULL */

    memset(&m, 0xff, sizeof(m));
    mc_master_config_defaults(&m);
    ck_assert_uint_eq(m.lease_ttl_ms, 10000);
    ck_assert_uint_eq(m.put_discard_ms, 30000);
    ck_assert_uint_eq(m.put_release_ms, 600000);
    ck_assert_uint_eq(m.node_ttl_ms, 10000);
    ck_assert_double_eq(m.high_watermark, 0.95);
    ck_assert_double_eq(m.low_watermark, 0.90);
    ck_assert_uint_eq(m.soft_pin_ttl_ms, 1800000);
    ck_assert_double_eq(m.hard_pin_max_ratio, 0.5);
    ck_assert_uint_eq(m.evict_max_scan, 4096);
    ck_assert_uint_eq(m.sweep_max_scan, 65536);
    ck_assert_uint_eq(m.alloc_granule, 64);
    ck_assert_uint_eq(m.directory_shards, 64);
    ck_assert_uint_eq(m.tick_ms, 100);
    ck_assert_int_eq(mc_master_config_validate(&m, t_err, sizeof(t_err)), 0);
}
END_TEST

START_TEST(test_config_tables_pass_check)
{
    static const struct mc_config_entry bad_default[] = {
        {.name = "x", .type = MC_CFG_U64, .def = "5000", .min = 1, .max = 10, .doc = "x"},
        {.name = NULL},
    };
    static const struct mc_config_entry dup[] = {
        {.name = "flag", .type = MC_CFG_BOOL, .def = "true", .doc = "again"},
        MC_CONFIG_INCLUDE(struct t_main_cfg, daemon, t_table),
        {.name = NULL},
    };
    static const struct mc_config_entry bad_name[] = {
        {.name = "Lease-TTL", .type = MC_CFG_BOOL, .def = "true", .doc = "x"},
        {.name = NULL},
    };
    struct t_cfg c;

    ck_assert_int_eq(mc_config_table_check(t_table, t_err, sizeof(t_err)), 0);
    ck_assert_int_eq(mc_config_table_check(mc_master_config_table, t_err, sizeof(t_err)), 0);
    ck_assert_int_eq(mc_config_table_check(mc_config_daemon_table, t_err, sizeof(t_err)), 0);
    ck_assert_int_eq(mc_config_table_check(t_main_table, t_err, sizeof(t_err)), 0);

    ck_assert_int_eq(mc_config_table_check(bad_default, t_err, sizeof(t_err)), MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "default of x"));
    ck_assert_int_eq(mc_config_set_defaults(bad_default, &c), MC_ERR_INTERNAL);
    ck_assert_int_eq(mc_config_table_check(dup, t_err, sizeof(t_err)), MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "flag: key defined twice"));
    ck_assert_int_eq(mc_config_table_check(bad_name, t_err, sizeof(t_err)), MC_ERR_INVALID);
}
END_TEST

START_TEST(test_config_bool_values)
{
    static const char *const yes[] = {"true", "TRUE", "yes", "on", "1", "On"};
    static const char *const no[] = {"false", "No", "off", "0"};
    struct t_cfg c;
    size_t i;

    t_init(&c);
    for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        c.flag = false;
        ck_assert_int_eq(t_set(&c, "flag", yes[i]), 0);
        ck_assert(c.flag);
    }
    for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        c.flag = true;
        ck_assert_int_eq(t_set(&c, "flag", no[i]), 0);
        ck_assert(!c.flag);
    }
    t_expect_bad(&c, "flag", "", NULL);
    t_expect_bad(&c, "flag", "2", "'2'");
    t_expect_bad(&c, "flag", "truex", "'truex'");
    t_expect_bad(&c, "flag", " true", NULL);
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_u64_values)
{
    struct t_cfg c;

    t_init(&c);
    ck_assert_int_eq(t_set(&c, "count", "1"), 0);
    ck_assert_uint_eq(c.count, 1);
    ck_assert_int_eq(t_set(&c, "count", "1000"), 0);
    ck_assert_uint_eq(c.count, 1000);
    ck_assert_int_eq(t_set(&c, "count", "0007"), 0);
    ck_assert_uint_eq(c.count, 7);
    ck_assert_int_eq(t_set(&c, "big", "18446744073709551615"), 0);
    ck_assert_uint_eq(c.big, UINT64_MAX);

    t_expect_bad(&c, "count", "", "empty");
    t_expect_bad(&c, "count", "-1", "negative");
    t_expect_bad(&c, "count", "+5", "'+5'");
    t_expect_bad(&c, "count", " 5", NULL);
    t_expect_bad(&c, "count", "5 ", "trailing");
    t_expect_bad(&c, "count", "5x", "trailing characters 'x'");
    t_expect_bad(&c, "count", "1.5", "trailing");
    t_expect_bad(&c, "count", "0x10", "trailing");
    t_expect_bad(&c, "count", "abc", "'abc'");
    t_expect_bad(&c, "big", "18446744073709551616", "64 bits");
    t_expect_bad(&c, "big", "99999999999999999999999", "64 bits");
    ck_assert_uint_eq(c.count, 7); /* failed sets left it alone */
    ck_assert_uint_eq(c.big, UINT64_MAX);
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_size_suffixes)
{
    static const struct {
        const char *text;
        uint64_t v;
    } good[] = {
        {"0", 0},
        {"65536", 65536},
        {"64B", 64},
        {"1K", 1024},
        {"1k", 1024},
        {"1KiB", 1024},
        {"512M", 512ULL << 20},
        {"512MiB", 512ULL << 20},
        {"512mib", 512ULL << 20},
        {"4G", 4ULL << 30},
        {"4GiB", 4ULL << 30},
        {"1T", 1ULL << 40},
        {"1TiB", 1ULL << 40},
    };
    struct t_cfg c;
    size_t i;

    t_init(&c);
    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        ck_assert_msg(t_set(&c, "bytes", good[i].text) == 0, "%s: %s", good[i].text, t_err);
        ck_assert_uint_eq(c.bytes, good[i].v);
    }
    t_expect_bad(&c, "bytes", "4X", "unknown unit 'X'");
    t_expect_bad(&c, "bytes", "4 G", "unknown unit");
    t_expect_bad(&c, "bytes", "4GB", "unknown unit");
    t_expect_bad(&c, "bytes", "1.5G", "unknown unit");
    t_expect_bad(&c, "bytes", "-4G", "negative");
    t_expect_bad(&c, "bytes", "G", "'G'");
    t_expect_bad(&c, "bytes", "2T", "out of range [0, 1099511627776] bytes");
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_duration_suffixes)
{
    static const struct {
        const char *text;
        uint64_t v;
    } good[] = {
        {"0", 0},        {"250", 250},    {"250ms", 250}, {"30s", 30000},
        {"10m", 600000}, {"1h", 3600000}, {"0s", 0},
    };
    struct t_cfg c;
    size_t i;

    t_init(&c);
    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        ck_assert_msg(t_set(&c, "wait_ms", good[i].text) == 0, "%s: %s", good[i].text, t_err);
        ck_assert_uint_eq(c.wait_ms, good[i].v);
    }
    t_expect_bad(&c, "wait_ms", "30S", "unknown unit 'S'");
    t_expect_bad(&c, "wait_ms", "10d", "use ms, s, m or h");
    t_expect_bad(&c, "wait_ms", "1.5s", "unknown unit");
    t_expect_bad(&c, "wait_ms", "-1s", "negative");
    t_expect_bad(&c, "wait_ms", "s", NULL);
    t_expect_bad(&c, "wait_ms", "6000000000000000h", "64 bits");
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_double_values)
{
    struct t_cfg c;

    t_init(&c);
    ck_assert_int_eq(t_set(&c, "ratio", "0.5"), 0);
    ck_assert_double_eq(c.ratio, 0.5);
    ck_assert_int_eq(t_set(&c, "ratio", "1"), 0);
    ck_assert_double_eq(c.ratio, 1.0);
    ck_assert_int_eq(t_set(&c, "ratio", "1e-3"), 0);
    ck_assert_double_eq(c.ratio, 1e-3);
    ck_assert_int_eq(t_set(&c, "ratio", "0"), 0);

    t_expect_bad(&c, "ratio", "", "empty");
    t_expect_bad(&c, "ratio", "nan", "not finite");
    t_expect_bad(&c, "ratio", "NaN", "not finite");
    t_expect_bad(&c, "ratio", "inf", "not finite");
    t_expect_bad(&c, "ratio", "-infinity", "not finite");
    t_expect_bad(&c, "ratio", "1e999", "too large");
    t_expect_bad(&c, "ratio", "0.5x", "trailing characters 'x'");
    t_expect_bad(&c, "ratio", " 0.5", NULL);
    t_expect_bad(&c, "ratio", "abc", "'abc'");
    t_expect_bad(&c, "ratio", "1.5", "1.5 is out of range [0, 1]");
    t_expect_bad(&c, "ratio", "-0.1", "out of range");
    ck_assert_double_eq(c.ratio, 0);
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_string_and_enum_values)
{
    struct t_cfg c;

    t_init(&c);
    ck_assert_int_eq(t_set(&c, "name", "node-7"), 0);
    ck_assert_str_eq(c.name, "node-7");
    ck_assert_int_eq(t_set(&c, "name", ""), 0);
    ck_assert_str_eq(c.name, "");
    ck_assert_int_eq(t_set(&c, "mode", "fast"), 0);
    ck_assert_int_eq(c.mode, 0);
    ck_assert_int_eq(t_set(&c, "mode", "SAFE"), 0);
    ck_assert_int_eq(c.mode, 1);
    t_expect_bad(&c, "mode", "slow", "one of: fast, safe");
    ck_assert_int_eq(c.mode, 1);
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_bounds)
{
    struct mc_master_config m;
    struct t_cfg c;

    t_init(&c);
    t_expect_bad(&c, "count", "0", "0 is out of range [1, 1000]");
    t_expect_bad(&c, "count", "1001", "1001 is out of range [1, 1000]");
    ck_assert_uint_eq(c.count, 10);
    mc_config_cleanup(t_table, &c);

    mc_master_config_defaults(&m);
    t_err[0] = '\0';
    ck_assert_int_eq(mc_config_set(mc_master_config_table, &m, "directory_shards", "8192",
                                   t_err, sizeof(t_err)),
                     MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "directory_shards: 8192 is out of range [1, 4096]"));
    ck_assert_int_eq(
        mc_config_set(mc_master_config_table, &m, "lease_ttl_ms", "0", t_err, sizeof(t_err)),
        MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "ms"));
    ck_assert_int_eq(
        mc_config_set(mc_master_config_table, &m, "alloc_granule", "4", t_err, sizeof(t_err)),
        MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "bytes"));
    ck_assert_uint_eq(m.directory_shards, 64);
}
END_TEST

START_TEST(test_config_unknown_key_suggests)
{
    struct mc_master_config m;
    struct t_cfg c;

    t_init(&c);
    ck_assert_int_eq(t_set(&c, "cuont", "5"), MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "unknown key 'cuont' (did you mean 'count'?)"));
    ck_assert_int_eq(t_set(&c, "zzzzzzzzzz", "5"), MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "unknown key 'zzzzzzzzzz'"));
    ck_assert_ptr_null(strstr(t_err, "did you mean"));
    mc_config_cleanup(t_table, &c);

    mc_master_config_defaults(&m);
    ck_assert_int_eq(
        mc_config_set(mc_master_config_table, &m, "LEASE_TTL_MS", "5", t_err, sizeof(t_err)),
        MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "did you mean 'lease_ttl_ms'"));
}
END_TEST

START_TEST(test_config_set_kv)
{
    struct t_cfg c;
    char small[8];

    t_init(&c);
    ck_assert_int_eq(mc_config_set_kv(t_table, &c, "count=42", t_err, sizeof(t_err)), 0);
    ck_assert_uint_eq(c.count, 42);
    ck_assert_int_eq(mc_config_set_kv(t_table, &c, "name=a=b", t_err, sizeof(t_err)), 0);
    ck_assert_str_eq(c.name, "a=b");
    ck_assert_int_eq(mc_config_set_kv(t_table, &c, "count", t_err, sizeof(t_err)),
                     MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "KEY=VALUE"));
    ck_assert_int_eq(mc_config_set_kv(t_table, &c, "=5", t_err, sizeof(t_err)), MC_ERR_INVALID);
    ck_assert_int_eq(mc_config_set_kv(t_table, &c, "count=", t_err, sizeof(t_err)),
                     MC_ERR_INVALID);
    /* a tiny or absent message buffer is cut, never overrun */
    ck_assert_int_eq(mc_config_set_kv(t_table, &c, "count=abc", small, sizeof(small)),
                     MC_ERR_INVALID);
    ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
    ck_assert_int_eq(mc_config_set_kv(t_table, &c, "count=abc", NULL, 0), MC_ERR_INVALID);
    ck_assert_uint_eq(c.count, 42);
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_json_values)
{
    const char *path;
    struct t_cfg c;

    t_init(&c);
    path = t_write_file("{\n"
                        "  \"flag\": true,\n"
                        "  \"count\": 99,\n"
                        "  \"bytes\": \"512M\",\n"
                        "  \"wait_ms\": \"10m\",\n"
                        "  \"ratio\": 1,\n"
                        "  \"name\": \"x\",\n"
                        "  \"mode\": \"fast\",\n"
                        "  \"big\": \"18446744073709551615\"\n"
                        "}\n");
    ck_assert_msg(mc_config_load_json_file(t_table, &c, path, t_err, sizeof(t_err)) == 0, "%s",
                  t_err);
    ck_assert(c.flag);
    ck_assert_uint_eq(c.count, 99);
    ck_assert_uint_eq(c.bytes, 512ULL << 20);
    ck_assert_uint_eq(c.wait_ms, 600000);
    ck_assert_double_eq(c.ratio, 1.0);
    ck_assert_str_eq(c.name, "x");
    ck_assert_int_eq(c.mode, 0);
    ck_assert_uint_eq(c.big, UINT64_MAX);
    unlink(path);

    ck_assert_int_eq(mc_config_load_json_string(t_table, &c,
                                                "{\"bytes\": 4096, \"wait_ms\": 250, "
                                                "\"ratio\": 0.75, \"flag\": \"off\", "
                                                "\"name\": null, \"count\": \"7\"}",
                                                t_err, sizeof(t_err)),
                     0);
    ck_assert_uint_eq(c.bytes, 4096);
    ck_assert_uint_eq(c.wait_ms, 250);
    ck_assert_double_eq(c.ratio, 0.75);
    ck_assert(!c.flag);
    ck_assert_ptr_null(c.name);
    ck_assert_uint_eq(c.count, 7);
    ck_assert_int_eq(mc_config_load_json_string(t_table, &c, "{}", t_err, sizeof(t_err)), 0);
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_json_syntax_error_has_line)
{
    const char *path;
    char needle[128];
    struct t_cfg c;

    t_init(&c);
    path = t_write_file("{\n  \"count\": 5,\n  \"flag\": tru\n}\n");
    ck_assert_int_eq(mc_config_load_json_file(t_table, &c, path, t_err, sizeof(t_err)),
                     MC_ERR_INVALID);
    snprintf(needle, sizeof(needle), "%s:3:", path);
    ck_assert_msg(strstr(t_err, needle) != NULL, "'%s' lacks '%s'", t_err, needle);
    ck_assert_uint_eq(c.count, 10);
    unlink(path);

    ck_assert_int_eq(
        mc_config_load_json_string(t_table, &c, "{\"count\": 5,}", t_err, sizeof(t_err)),
        MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "<string>:1:"));
    ck_assert_int_eq(mc_config_load_json_string(t_table, &c, "", t_err, sizeof(t_err)),
                     MC_ERR_INVALID);
    ck_assert_int_eq(
        mc_config_load_json_string(t_table, &c, "{\"count\": 5} x", t_err, sizeof(t_err)),
        MC_ERR_INVALID);
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_json_unknown_key)
{
    const char *path;
    struct t_cfg c;

    t_init(&c);
    path = t_write_file("{\"count\": 5, \"ratoi\": 0.5}");
    ck_assert_int_eq(mc_config_load_json_file(t_table, &c, path, t_err, sizeof(t_err)),
                     MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, path));
    ck_assert_ptr_nonnull(strstr(t_err, "unknown key 'ratoi' (did you mean 'ratio'?)"));
    ck_assert_uint_eq(c.count, 10); /* nothing applied: the good key came first */
    unlink(path);
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_json_wrong_type)
{
    static const struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"count\": 1.5}", "count: expected an unsigned decimal integer, got a real"},
        {"{\"count\": -3}", "count: -3 is negative"},
        {"{\"count\": true}", "count: expected"},
        {"{\"count\": 5000}", "count: 5000 is out of range [1, 1000]"},
        {"{\"count\": \"5x\"}", "count: '5x' has trailing characters"},
        {"{\"flag\": 1}", "flag: expected a boolean"},
        {"{\"ratio\": \"nan\"}", "ratio: 'nan' is not finite"},
        {"{\"ratio\": [0.5]}", "ratio: expected a finite number such as 0.95, got an array"},
        {"{\"name\": 5}", "name: expected a string, got an integer"},
        {"{\"mode\": 0}", "mode: expected"},
        {"{\"bytes\": {\"v\": 1}}", "bytes: expected a size"},
        {"{\"name\": \"a\\u0000b\"}", "NUL"},
        {"{\"count\": 5, \"count\": 6}", "duplicate"},
    };
    struct t_cfg c;
    size_t i;

    t_init(&c);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        t_err[0] = '\0';
        ck_assert_int_eq(
            mc_config_load_json_string(t_table, &c, bad[i].json, t_err, sizeof(t_err)),
            MC_ERR_INVALID);
        ck_assert_msg(strstr(t_err, bad[i].needle) != NULL, "%s: '%s' lacks '%s'", bad[i].json,
                      t_err, bad[i].needle);
    }
    ck_assert_uint_eq(c.count, 10);
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_json_non_object)
{
    static const char *const bad[] = {"[1, 2]", "42", "\"count=5\"", "null", "true"};
    const char *path;
    struct t_cfg c;
    size_t i;

    t_init(&c);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(mc_config_load_json_string(t_table, &c, bad[i], t_err, sizeof(t_err)),
                         MC_ERR_INVALID);
        ck_assert_msg(strstr(t_err, "must be a JSON object") != NULL, "%s: %s", bad[i], t_err);
    }
    path = t_write_file("[]\n");
    ck_assert_int_eq(mc_config_load_json_file(t_table, &c, path, t_err, sizeof(t_err)),
                     MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "must be a JSON object"));
    unlink(path);
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_json_missing_file)
{
    struct t_cfg c;

    t_init(&c);
    ck_assert_int_eq(
        mc_config_load_json_file(t_table, &c, "/nonexistent/mc.json", t_err, sizeof(t_err)),
        MC_ERR_IO);
    ck_assert_ptr_nonnull(strstr(t_err, "/nonexistent/mc.json"));
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_env_override)
{
    struct t_cfg c;

    t_init(&c);
    setenv("T_COUNT", "77", 1);
    setenv("T_WAIT_MS", "2s", 1);
    setenv("T_NAME", "from-env", 1);
    setenv("T_UNRELATED", "x", 1); /* matches no key: ignored */
    ck_assert_msg(mc_config_load_env(t_table, &c, "T_", t_err, sizeof(t_err)) == 0, "%s",
                  t_err);
    ck_assert_uint_eq(c.count, 77);
    ck_assert_uint_eq(c.wait_ms, 2000);
    ck_assert_str_eq(c.name, "from-env");
    ck_assert_uint_eq(c.bytes, 1 << 20); /* unset: untouched */

    /* a bad value names the variable and the key, and nothing is applied */
    setenv("T_COUNT", "78", 1);
    setenv("T_RATIO", "2", 1);
    ck_assert_int_eq(mc_config_load_env(t_table, &c, "T_", t_err, sizeof(t_err)),
                     MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "T_RATIO: ratio: 2 is out of range [0, 1]"));
    ck_assert_uint_eq(c.count, 77);
    unsetenv("T_RATIO");
    setenv("T_COUNT", "", 1); /* set but empty is an error, not "unset" */
    ck_assert_int_eq(mc_config_load_env(t_table, &c, "T_", t_err, sizeof(t_err)),
                     MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "T_COUNT: count: empty"));
    unsetenv("T_COUNT");
    unsetenv("T_WAIT_MS");
    unsetenv("T_NAME");
    unsetenv("T_UNRELATED");
    mc_config_cleanup(t_table, &c);
}
END_TEST

START_TEST(test_config_env_master_names)
{
    struct mc_master_config m;

    mc_master_config_defaults(&m);
    setenv("MC_LEASE_TTL_MS", "5s", 1);
    setenv("MC_HIGH_WATERMARK", "0.97", 1);
    ck_assert_int_eq(mc_config_load_env(mc_master_config_table, &m, MC_CONFIG_ENV_PREFIX, t_err,
                                        sizeof(t_err)),
                     0);
    ck_assert_uint_eq(m.lease_ttl_ms, 5000);
    ck_assert_double_eq(m.high_watermark, 0.97);
    unsetenv("MC_LEASE_TTL_MS");
    unsetenv("MC_HIGH_WATERMARK");
}
END_TEST

START_TEST(test_config_precedence)
{
    const char *sets[] = {"wait_ms=3s", "count=300", "wait_ms=4s"};
    const char *path;
    struct t_cfg c;

    path = t_write_file("{\"count\": 100, \"wait_ms\": 1000, \"ratio\": 0.5, \"name\": \"f\"}");
    setenv("T_COUNT", "200", 1);
    setenv("T_WAIT_MS", "2000", 1);
    memset(&c, 0, sizeof(c));
    ck_assert_msg(mc_config_load(t_table, &c, path, "T_", sets, 3, t_err, sizeof(t_err)) == 0,
                  "%s", t_err);
    ck_assert_uint_eq(c.bytes, 1 << 20); /* default: nobody set it */
    ck_assert_double_eq(c.ratio, 0.5);   /* file beats default */
    ck_assert_str_eq(c.name, "f");
    ck_assert_uint_eq(c.count, 300);    /* --set beats env and file */
    ck_assert_uint_eq(c.wait_ms, 4000); /* the last --set wins */
    mc_config_cleanup(t_table, &c);

    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(mc_config_load(t_table, &c, path, "T_", NULL, 0, t_err, sizeof(t_err)), 0);
    ck_assert_uint_eq(c.count, 200); /* env beats file */
    ck_assert_uint_eq(c.wait_ms, 2000);
    mc_config_cleanup(t_table, &c);

    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(mc_config_load(t_table, &c, path, NULL, NULL, 0, t_err, sizeof(t_err)), 0);
    ck_assert_uint_eq(c.count, 100); /* no env prefix: the environment is not read */
    mc_config_cleanup(t_table, &c);

    /* errors say which source failed */
    sets[1] = "count=0";
    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(mc_config_load(t_table, &c, path, "T_", sets, 3, t_err, sizeof(t_err)),
                     MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "--set: count: 0 is out of range"));
    mc_config_cleanup(t_table, &c);
    setenv("T_COUNT", "x", 1);
    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(mc_config_load(t_table, &c, path, "T_", NULL, 0, t_err, sizeof(t_err)),
                     MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "environment: T_COUNT: count:"));
    mc_config_cleanup(t_table, &c);
    unsetenv("T_COUNT");
    unsetenv("T_WAIT_MS");
    unlink(path);
}
END_TEST

static int t_validate_count_even(const void *base, char *err, size_t errlen)
{
    const struct t_cfg *c = base;

    if (c->count % 2 != 0) {
        snprintf(err, errlen, "count must be even");
        return MC_ERR_INVALID;
    }
    return 0;
}

START_TEST(test_config_parse_args)
{
    const char *path = t_write_file("{\"count\": 100, \"flag\": true}");
    char cfg_arg[96];
    char *argv[16];
    int argc = 0;
    struct t_cfg c;

    snprintf(cfg_arg, sizeof(cfg_arg), "--config=%s", path);
    argv[argc++] = "mc-test";
    argv[argc++] = "-v";
    argv[argc++] = "--set";
    argv[argc++] = "count=8";
    argv[argc++] = cfg_arg;
    argv[argc++] = "--port";
    argv[argc++] = "77";
    argv[argc++] = "--set=wait_ms=1s";
    argv[argc++] = "--";
    argv[argc++] = "--set";
    argv[argc] = NULL;

    memset(&c, 0xab, sizeof(c)); /* the call initialises the struct itself */
    ck_assert_msg(mc_config_parse_args(t_table, &c, NULL, t_validate_count_even, &argc, argv,
                                       NULL, t_err, sizeof(t_err)) == 0,
                  "%s", t_err);
    ck_assert_uint_eq(c.count, 8);
    ck_assert(c.flag);
    ck_assert_uint_eq(c.wait_ms, 1000);
    ck_assert_int_eq(argc, 6);
    ck_assert_str_eq(argv[0], "mc-test");
    ck_assert_str_eq(argv[1], "-v");
    ck_assert_str_eq(argv[2], "--port");
    ck_assert_str_eq(argv[3], "77");
    ck_assert_str_eq(argv[4], "--");
    ck_assert_str_eq(argv[5], "--set"); /* after "--": not ours */
    ck_assert_ptr_null(argv[6]);
    mc_config_cleanup(t_table, &c);
    unlink(path);
}
END_TEST

START_TEST(test_config_parse_args_errors)
{
    static const struct {
        const char *args[4];
        const char *needle;
        int rc;
    } cases[] = {
        {{"--config", NULL}, "--config needs a file name", MC_ERR_INVALID},
        {{"--set", NULL}, "--set needs KEY=VALUE", MC_ERR_INVALID},
        {{"--config=a", "--config=b", NULL}, "--config given twice", MC_ERR_INVALID},
        {{"--dump-config=yes", NULL}, "takes no value", MC_ERR_INVALID},
        {{"--set", "count", NULL}, "KEY=VALUE", MC_ERR_INVALID},
        {{"--set", "count=7", NULL}, "count must be even", MC_ERR_INVALID},
        {{"--set", "nope=1", NULL}, "unknown key 'nope'", MC_ERR_INVALID},
        {{"--config", "/nonexistent/x.json", NULL}, "/nonexistent/x.json", MC_ERR_IO},
    };
    char *argv[8];
    struct t_cfg c;
    size_t i, j;
    int argc;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        argc = 0;
        argv[argc++] = "mc-test";
        for (j = 0; cases[i].args[j] != NULL; j++)
            argv[argc++] = (char *)cases[i].args[j];
        argv[argc] = NULL;
        t_err[0] = '\0';
        ck_assert_int_eq(mc_config_parse_args(t_table, &c, NULL, t_validate_count_even, &argc,
                                              argv, NULL, t_err, sizeof(t_err)),
                         cases[i].rc);
        ck_assert_msg(strstr(t_err, cases[i].needle) != NULL, "case %zu: '%s' lacks '%s'", i,
                      t_err, cases[i].needle);
        mc_config_cleanup(t_table, &c);
    }
}
END_TEST

START_TEST(test_config_dump_round_trip)
{
    struct mc_master_config a, b;
    struct t_cfg c, d;
    char *text;

    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    mc_master_config_defaults(&a);
    a.high_watermark = 0.1 + 0.2; /* needs 17 digits to read back */
    a.low_watermark = 0.1;
    a.lease_ttl_ms = 12345;
    mc_master_config_defaults(&b);
    text = t_dump(mc_master_config_table, &a);
    ck_assert_ptr_nonnull(strstr(text, "\"lease_ttl_ms\": 12345"));
    ck_assert_msg(
        mc_config_load_json_string(mc_master_config_table, &b, text, t_err, sizeof(t_err)) == 0,
        "%s\n%s", t_err, text);
    ck_assert_mem_eq(&a, &b, sizeof(a));
    free(text);

    /* the defaults dump short, human-readable reals */
    mc_master_config_defaults(&a);
    text = t_dump(mc_master_config_table, &a);
    ck_assert_ptr_nonnull(strstr(text, "\"high_watermark\": 0.95,"));
    ck_assert_ptr_nonnull(strstr(text, "\"hard_pin_max_ratio\": 0.5,"));
    free(text);

    /* every type, a string, an unset string, an integer above INT64_MAX */
    t_init(&c);
    t_init(&d);
    c.flag = true;
    c.big = UINT64_MAX;
    c.mode = 0;
    ck_assert_int_eq(t_set(&c, "name", "quote\" and \\ and é"), 0);
    text = t_dump(t_table, &c);
    ck_assert_int_eq(mc_config_load_json_string(t_table, &d, text, t_err, sizeof(t_err)), 0);
    ck_assert(d.flag);
    ck_assert_uint_eq(d.big, UINT64_MAX);
    ck_assert_uint_eq(d.count, c.count);
    ck_assert_uint_eq(d.bytes, c.bytes);
    ck_assert_uint_eq(d.wait_ms, c.wait_ms);
    ck_assert_double_eq(d.ratio, c.ratio);
    ck_assert_int_eq(d.mode, 0);
    ck_assert_str_eq(d.name, c.name);
    free(text);
    ck_assert_int_eq(t_set(&c, "name", "x"), 0);
    mc_config_cleanup(t_table, &c); /* name NULL now: dumps as null, loads back as NULL */
    text = t_dump(t_table, &c);
    ck_assert_ptr_nonnull(strstr(text, "\"name\": null"));
    ck_assert_int_eq(mc_config_load_json_string(t_table, &d, text, t_err, sizeof(t_err)), 0);
    ck_assert_ptr_null(d.name);
    free(text);
    mc_config_cleanup(t_table, &d);
}
END_TEST

START_TEST(test_config_dump_config_exits)
{
    char *argv[] = {"mc-test",         "--set", "lease_ttl_ms=2s", "--dump-config", "--set",
                    "log_level=debug", NULL};
    int argc = 6;
    struct t_main_cfg a, b;
    char *buf = NULL;
    size_t len = 0;
    FILE *f;

    memset(&a, 0, sizeof(a)); /* compared bytewise below: no stray padding bytes */
    f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(mc_config_parse_args(t_main_table, &a, NULL, NULL, &argc, argv, f, t_err,
                                          sizeof(t_err)),
                     MC_CONFIG_EXIT);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(a.daemon.log_level, MC_LOG_DEBUG);
    ck_assert_ptr_nonnull(strstr(buf, "\"log_level\": \"debug\""));
    ck_assert_ptr_nonnull(strstr(buf, "\"lease_ttl_ms\": 2000"));

    memset(&b, 0, sizeof(b));
    ck_assert_int_eq(mc_config_set_defaults(t_main_table, &b), 0);
    ck_assert_int_eq(mc_config_load_json_string(t_main_table, &b, buf, t_err, sizeof(t_err)),
                     0);
    ck_assert_int_eq(b.daemon.log_level, MC_LOG_DEBUG);
    ck_assert_uint_eq(b.master.lease_ttl_ms, 2000);
    ck_assert_mem_eq(&a.master, &b.master, sizeof(a.master));
    free(buf);
}
END_TEST

START_TEST(test_config_include_table)
{
    struct t_main_cfg m;

    memset(&m, 0, sizeof(m));
    ck_assert_int_eq(mc_config_set_defaults(t_main_table, &m), 0);
    ck_assert_int_eq(m.daemon.log_level, MC_LOG_INFO);
    ck_assert_uint_eq(m.master.tick_ms, 100);
    ck_assert_int_eq(mc_config_set(t_main_table, &m, "tick_ms", "50", t_err, sizeof(t_err)), 0);
    ck_assert_uint_eq(m.master.tick_ms, 50);
    ck_assert_int_eq(
        mc_config_set(t_main_table, &m, "log_level", "TRACE", t_err, sizeof(t_err)), 0);
    ck_assert_int_eq(m.daemon.log_level, MC_LOG_TRACE);
    ck_assert_int_eq(mc_config_set(t_main_table, &m, "log_level", "loud", t_err, sizeof(t_err)),
                     MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "one of: error, warn, info, debug, trace"));
}
END_TEST

START_TEST(test_config_doc_contains_every_key)
{
    const struct mc_config_entry *e;
    char *buf = NULL, needle[128];
    size_t len = 0;
    FILE *f;

    f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(mc_config_doc_markdown(t_main_table, "## All", "MC_", f), 0);
    ck_assert_int_eq(mc_config_doc_markdown(t_table, NULL, "T_", f), 0);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_ptr_nonnull(strstr(buf, "## All\n\n| Key | Type | Default | Bounds |"));
    for (e = mc_master_config_table; e->name != NULL; e++) {
        snprintf(needle, sizeof(needle), "| `%s` |", e->name);
        ck_assert_msg(strstr(buf, needle) != NULL, "doc lacks %s", e->name);
        ck_assert_ptr_nonnull(strstr(buf, e->doc));
    }
    ck_assert_ptr_nonnull(strstr(buf, "| `log_level` | enum | info |"));
    ck_assert_ptr_nonnull(strstr(buf, "`MC_LEASE_TTL_MS`"));
    ck_assert_ptr_nonnull(strstr(buf, "| 10000 (10s) | 1 .. 86400000 (24h) |"));
    ck_assert_ptr_nonnull(strstr(buf, "| 0.95 | 0 .. 1 |"));
    ck_assert_ptr_nonnull(strstr(buf, "a ratio \\| with a pipe"));
    ck_assert_ptr_nonnull(strstr(buf, "| 1048576 (1MiB) |"));
    free(buf);
}
END_TEST

START_TEST(test_config_master_validate_watermarks)
{
    struct mc_master_config m;

    mc_master_config_defaults(&m);
    ck_assert_int_eq(mc_config_set(mc_master_config_table, &m, "low_watermark", "0.96", t_err,
                                   sizeof(t_err)),
                     0); /* each bound alone is fine */
    ck_assert_int_eq(mc_master_config_validate(&m, t_err, sizeof(t_err)), MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "low_watermark"));
    ck_assert_ptr_nonnull(strstr(t_err, "high_watermark"));
    m.high_watermark = 0.96; /* equal is allowed */
    ck_assert_int_eq(mc_master_config_validate(&m, t_err, sizeof(t_err)), 0);
    ck_assert_int_eq(mc_master_config_validate(&m, NULL, 0), 0);
}
END_TEST

START_TEST(test_config_master_validate_pow2)
{
    struct mc_master_config m;

    mc_master_config_defaults(&m);
    ck_assert_int_eq(
        mc_config_set(mc_master_config_table, &m, "alloc_granule", "96", t_err, sizeof(t_err)),
        0);
    ck_assert_int_eq(mc_master_config_validate(&m, t_err, sizeof(t_err)), MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "alloc_granule: 96 is not a power of two"));
    ck_assert_int_eq(mc_master_config_validate(&m, NULL, 0), MC_ERR_INVALID);
    m.alloc_granule = 4096;
    ck_assert_int_eq(mc_master_config_validate(&m, t_err, sizeof(t_err)), 0);
    ck_assert_int_eq(
        mc_config_set(mc_master_config_table, &m, "alloc_granule", "1K", t_err, sizeof(t_err)),
        0);
    ck_assert_int_eq(mc_master_config_validate(&m, t_err, sizeof(t_err)), 0);

    m.directory_shards = 48;
    ck_assert_int_eq(mc_master_config_validate(&m, t_err, sizeof(t_err)), MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "directory_shards: 48 is not a power of two"));
    m.directory_shards = 1;
    ck_assert_int_eq(mc_master_config_validate(&m, t_err, sizeof(t_err)), 0);
}
END_TEST

START_TEST(test_config_master_validate_values_set_by_code)
{
    struct mc_master_config m;

    mc_master_config_defaults(&m);
    m.directory_shards = 8192; /* a power of two, but beyond the table's bound */
    ck_assert_int_eq(mc_master_config_validate(&m, t_err, sizeof(t_err)), MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "directory_shards: 8192 is out of range [1, 4096]"));
    mc_master_config_defaults(&m);
    m.high_watermark = NAN;
    ck_assert_int_eq(mc_master_config_validate(&m, t_err, sizeof(t_err)), MC_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(t_err, "high_watermark"));
}
END_TEST

static Suite *t_config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");

    tcase_add_test(tc, test_config_defaults_applied);
    tcase_add_test(tc, test_config_dump_hides_secrets);
    tcase_add_test(tc, test_config_tables_pass_check);
    tcase_add_test(tc, test_config_bool_values);
    tcase_add_test(tc, test_config_u64_values);
    tcase_add_test(tc, test_config_size_suffixes);
    tcase_add_test(tc, test_config_duration_suffixes);
    tcase_add_test(tc, test_config_double_values);
    tcase_add_test(tc, test_config_string_and_enum_values);
    tcase_add_test(tc, test_config_bounds);
    tcase_add_test(tc, test_config_unknown_key_suggests);
    tcase_add_test(tc, test_config_set_kv);
    tcase_add_test(tc, test_config_json_values);
    tcase_add_test(tc, test_config_json_syntax_error_has_line);
    tcase_add_test(tc, test_config_json_unknown_key);
    tcase_add_test(tc, test_config_json_wrong_type);
    tcase_add_test(tc, test_config_json_non_object);
    tcase_add_test(tc, test_config_json_missing_file);
    tcase_add_test(tc, test_config_env_override);
    tcase_add_test(tc, test_config_env_master_names);
    tcase_add_test(tc, test_config_precedence);
    tcase_add_test(tc, test_config_parse_args);
    tcase_add_test(tc, test_config_parse_args_errors);
    tcase_add_test(tc, test_config_dump_round_trip);
    tcase_add_test(tc, test_config_dump_config_exits);
    tcase_add_test(tc, test_config_include_table);
    tcase_add_test(tc, test_config_doc_contains_every_key);
    tcase_add_test(tc, test_config_master_validate_watermarks);
    tcase_add_test(tc, test_config_master_validate_pow2);
    tcase_add_test(tc, test_config_master_validate_values_set_by_code);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(t_config_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
