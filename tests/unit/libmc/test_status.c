/*
 * Unit tests for the public constants and types of <mc/mc.h> and <mc/mc_status.h>, and
 * for mc_strerror() and mc_version() (common/status.c) and mc_err_from_errno()
 * (common/err.c).
 */
#include <mc/mc.h>

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

/* Every failure code of mc_status.h. A new code must be added here. */
static const int t_err_codes[] = {
    MC_ERR_INVALID,  MC_ERR_NOMEM,         MC_ERR_NOT_FOUND,   MC_ERR_EXISTS,
    MC_ERR_NO_SPACE, MC_ERR_TOO_LARGE,     MC_ERR_BUSY,        MC_ERR_TIMEOUT,
    MC_ERR_CANCELED, MC_ERR_LEASE_EXPIRED, MC_ERR_CORRUPT,     MC_ERR_DENIED,
    MC_ERR_IO,       MC_ERR_PROTO,         MC_ERR_UNAVAILABLE, MC_ERR_INTERNAL,
};
#define T_NCODES (sizeof(t_err_codes) / sizeof(t_err_codes[0]))

static int t_is_code(int v)
{
    for (size_t i = 0; i < T_NCODES; i++) {
        if (t_err_codes[i] == v)
            return 1;
    }
    return 0;
}

START_TEST(test_status_codes_negative_distinct)
{
    ck_assert_int_eq(MC_OK, 0);
    for (size_t i = 0; i < T_NCODES; i++) {
        ck_assert_int_lt(t_err_codes[i], 0);
        for (size_t j = i + 1; j < T_NCODES; j++)
            ck_assert_int_ne(t_err_codes[i], t_err_codes[j]);
    }
}
END_TEST

START_TEST(test_status_constants)
{
    ck_assert_int_eq(MC_INPROGRESS, 1);
    ck_assert_int_eq(MC_KEY_MAX, 512);
    ck_assert_int_eq(MC_OP_TIMEOUT_MS_DEFAULT, 5000);
}
END_TEST

START_TEST(test_status_strerror_every_code)
{
    for (size_t i = 0; i < T_NCODES; i++) {
        const char *m = mc_strerror(t_err_codes[i]);

        ck_assert_ptr_nonnull(m);
        ck_assert_uint_gt(strlen(m), 0);
        ck_assert_str_ne(m, "unknown error");
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(m, mc_strerror(t_err_codes[j]));
    }
}
END_TEST

START_TEST(test_status_strerror_ok_inprogress)
{
    ck_assert_str_eq(mc_strerror(MC_OK), "success");
    ck_assert_str_eq(mc_strerror(MC_INPROGRESS), "operation in progress");
    for (size_t i = 0; i < T_NCODES; i++) {
        ck_assert_str_ne(mc_strerror(t_err_codes[i]), "success");
        ck_assert_str_ne(mc_strerror(t_err_codes[i]), "operation in progress");
    }
}
END_TEST

START_TEST(test_status_strerror_unknown)
{
    static const int unknown[] = {-1000,          77,
                                  INT_MIN,        INT_MAX,
                                  3,              -1,
                                  -8,             -30,
                                  MC_ERR_IO - 1,  MC_ERR_PROTO + 1,
                                  MC_ERR_PROTO - 1, MC_ERR_INTERNAL - 1};

    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        const char *m = mc_strerror(unknown[i]);

        ck_assert_ptr_nonnull(m);
        ck_assert_str_eq(m, "unknown error");
    }
}
END_TEST

/* The switch knows exactly the codes of the list: no stale or untested entry. */
START_TEST(test_status_strerror_only_known_codes)
{
    for (int v = -1128; v <= 128; v++) {
        const char *m = mc_strerror(v);

        ck_assert_ptr_nonnull(m);
        if (v == MC_OK || v == MC_INPROGRESS || v == MC_PRESENT || t_is_code(v))
            ck_assert_str_ne(m, "unknown error");
        else
            ck_assert_str_eq(m, "unknown error");
    }
}
END_TEST

/* errno values pass through the same ints as status codes in places (a CQE's res, a
 * function that returns either): no code may be mistaken for a negated errno. */
START_TEST(test_status_codes_outside_errno_range)
{
    for (size_t i = 0; i < T_NCODES; i++)
        ck_assert_int_lt(t_err_codes[i], -1000); /* errno values stay far below 1000 */
    for (int e = 1; e <= 1000; e++)
        ck_assert_int_eq(t_is_code(-e), 0);
}
END_TEST

START_TEST(test_status_err_from_errno)
{
    static const struct {
        int e, want;
    } map[] = {
        {ENOMEM, MC_ERR_NOMEM},        {ENOBUFS, MC_ERR_NOMEM},     {EMFILE, MC_ERR_NOMEM},
        {ENFILE, MC_ERR_NOMEM},        {ENOSPC, MC_ERR_NOMEM},      {ETOOMANYREFS, MC_ERR_NOMEM},
        {EINVAL, MC_ERR_INVALID},      {EBADF, MC_ERR_INVALID},     {EOVERFLOW, MC_ERR_INVALID},
        {EFBIG, MC_ERR_INVALID},       {EACCES, MC_ERR_DENIED},     {EPERM, MC_ERR_DENIED},
        {ETIMEDOUT, MC_ERR_TIMEOUT},   {EBUSY, MC_ERR_BUSY},        {EPIPE, MC_ERR_UNAVAILABLE},
        {ECONNRESET, MC_ERR_UNAVAILABLE}, {ECONNREFUSED, MC_ERR_UNAVAILABLE},
        {ENOTCONN, MC_ERR_UNAVAILABLE}, {EIO, MC_ERR_IO},           {ENOENT, MC_ERR_IO},
        {0, MC_ERR_INTERNAL},
    };

    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        ck_assert_int_eq(mc_err_from_errno(map[i].e), map[i].want);
    /* every errno gives one of the codes, never success and never an errno */
    for (int e = 0; e < 4096; e++)
        ck_assert_int_eq(t_is_code(mc_err_from_errno(e)), 1);
}
END_TEST

START_TEST(test_status_version_matches_macros)
{
    char want[64];
    const char *v = mc_version();

    ck_assert_ptr_nonnull(v);
    snprintf(want, sizeof(want), "%d.%d.%d", MC_VERSION_MAJOR, MC_VERSION_MINOR,
             MC_VERSION_PATCH);
    ck_assert_str_eq(v, want);
    ck_assert_ptr_eq(mc_version(), v); /* static, not rebuilt per call */
}
END_TEST

START_TEST(test_status_put_opts_layout)
{
    mc_put_opts_t o;

    ck_assert_uint_eq(sizeof(o.replicas), 4);
    ck_assert_uint_eq(sizeof(o.flags), 4);
    ck_assert_uint_eq(sizeof(o.ttl_ms), 8);
    ck_assert_uint_eq(sizeof(o.preferred_node), sizeof(const char *));
    ck_assert_uint_eq(sizeof(o.reserved) / sizeof(o.reserved[0]), 4);
    ck_assert_uint_eq(sizeof(o.reserved[0]), 8);

    ck_assert_uint_eq(offsetof(mc_put_opts_t, replicas), 0);
    ck_assert_uint_eq(offsetof(mc_put_opts_t, flags), 4);
    ck_assert_uint_eq(offsetof(mc_put_opts_t, ttl_ms), 8);
    ck_assert_uint_eq(offsetof(mc_put_opts_t, preferred_node), 16);
    ck_assert_uint_ge(offsetof(mc_put_opts_t, reserved),
                      offsetof(mc_put_opts_t, preferred_node) + sizeof(const char *));
    ck_assert_uint_eq(sizeof(mc_put_opts_t),
                      offsetof(mc_put_opts_t, reserved) + sizeof(o.reserved));
}
END_TEST

START_TEST(test_status_put_opts_init_zero)
{
    mc_put_opts_t o = MC_PUT_OPTS_INIT;

    ck_assert_uint_eq(o.replicas, 0);
    ck_assert_uint_eq(o.flags, 0);
    ck_assert_uint_eq(o.ttl_ms, 0);
    ck_assert_ptr_null(o.preferred_node);
    for (size_t i = 0; i < sizeof(o.reserved) / sizeof(o.reserved[0]); i++)
        ck_assert_uint_eq(o.reserved[i], 0);
}
END_TEST

START_TEST(test_status_put_flags_distinct_bits)
{
    static const unsigned flags[] = {MC_PUT_UPSERT, MC_PUT_PIN_SOFT, MC_PUT_PIN_HARD,
                                     MC_PUT_NO_CHECKSUM, MC_PUT_SAME_DOMAIN_OK,
                                     MC_PUT_TIER_GPU};
    unsigned all = 0;

    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        ck_assert_uint_ne(flags[i], 0);
        ck_assert_uint_eq(flags[i] & (flags[i] - 1), 0); /* one bit each */
        ck_assert_uint_eq(all & flags[i], 0);
        all |= flags[i];
    }
    ck_assert_uint_eq(all, MC_PUT_FLAGS_ALL);
}
END_TEST

/* Fixed-width fields in an order with no padding: the same layout on every ABI. */
START_TEST(test_status_obj_info_layout)
{
    mc_obj_info_t info;

    ck_assert_uint_eq(sizeof(info.size), 8);
    ck_assert_uint_eq(sizeof(info.replicas), 4);
    ck_assert_uint_eq(sizeof(info.flags), 4);
    ck_assert_uint_eq(sizeof(info.version), 8);
    ck_assert_uint_eq(sizeof(info.ttl_remaining_ms), 8);
    ck_assert_uint_eq(sizeof(info.reserved) / sizeof(info.reserved[0]), 4);

    ck_assert_uint_eq(offsetof(mc_obj_info_t, size), 0);
    ck_assert_uint_eq(offsetof(mc_obj_info_t, replicas), 8);
    ck_assert_uint_eq(offsetof(mc_obj_info_t, flags), 12);
    ck_assert_uint_eq(offsetof(mc_obj_info_t, version), 16);
    ck_assert_uint_eq(offsetof(mc_obj_info_t, ttl_remaining_ms), 24);
    ck_assert_uint_eq(offsetof(mc_obj_info_t, reserved), 32);
    ck_assert_uint_eq(sizeof(mc_obj_info_t), 64);
}
END_TEST

static Suite *t_status_suite(void)
{
    Suite *s = suite_create("status");
    TCase *tc = tcase_create("status");

    tcase_add_test(tc, test_status_codes_negative_distinct);
    tcase_add_test(tc, test_status_constants);
    tcase_add_test(tc, test_status_strerror_every_code);
    tcase_add_test(tc, test_status_strerror_ok_inprogress);
    tcase_add_test(tc, test_status_strerror_unknown);
    tcase_add_test(tc, test_status_strerror_only_known_codes);
    tcase_add_test(tc, test_status_codes_outside_errno_range);
    tcase_add_test(tc, test_status_err_from_errno);
    tcase_add_test(tc, test_status_version_matches_macros);
    tcase_add_test(tc, test_status_put_opts_layout);
    tcase_add_test(tc, test_status_put_opts_init_zero);
    tcase_add_test(tc, test_status_put_flags_distinct_bits);
    tcase_add_test(tc, test_status_obj_info_layout);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(t_status_suite());
    int failures;

    srunner_run_all(sr, CK_ENV);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failures != 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
