/* Unit tests of ucx_backend/saddr.c: a listener's address blob, packed and read back, and
 * every malformed blob refused (peers hand these out: a mount record, a bootstrap answer). */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "ucx_backend/saddr.h"

START_TEST(test_saddr_v4_roundtrip)
{
    struct sockaddr_storage ss, back;
    socklen_t len, blen;
    uint8_t blob[MC_SADDR_MAX];
    size_t n;

    ck_assert_int_eq(mc_saddr_from_ip("10.1.2.3", 4242, &ss, &len), 0);
    ck_assert_uint_eq(len, sizeof(struct sockaddr_in));
    n = mc_saddr_pack((const struct sockaddr *)&ss, blob, sizeof(blob));
    ck_assert_uint_eq(n, MC_SADDR_V4_LEN);
    ck_assert(mc_saddr_is(blob, n));
    ck_assert_int_eq(mc_saddr_unpack(blob, n, &back, &blen), 0);
    ck_assert_uint_eq(blen, len);
    ck_assert_int_eq(memcmp(&ss, &back, len), 0);
    ck_assert_uint_eq(ntohs(((struct sockaddr_in *)&back)->sin_port), 4242);
    ck_assert_uint_eq(mc_saddr_port(blob, n), 4242);
    ck_assert_uint_eq(mc_saddr_port(blob, n - 1), 0); /* not a listener's address */
}
END_TEST

START_TEST(test_saddr_v6_roundtrip)
{
    struct sockaddr_storage ss, back;
    socklen_t len, blen;
    uint8_t blob[MC_SADDR_MAX];
    size_t n;

    ck_assert_int_eq(mc_saddr_from_ip("fd00::17", 65535, &ss, &len), 0);
    n = mc_saddr_pack((const struct sockaddr *)&ss, blob, sizeof(blob));
    ck_assert_uint_eq(n, MC_SADDR_V6_LEN);
    ck_assert_int_eq(mc_saddr_unpack(blob, n, &back, &blen), 0);
    ck_assert_uint_eq(blen, sizeof(struct sockaddr_in6));
    ck_assert_int_eq(memcmp(&((struct sockaddr_in6 *)&ss)->sin6_addr,
                            &((struct sockaddr_in6 *)&back)->sin6_addr, 16), 0);
    ck_assert_uint_eq(ntohs(((struct sockaddr_in6 *)&back)->sin6_port), 65535);
}
END_TEST

START_TEST(test_saddr_refuses_malformed)
{
    struct sockaddr_storage ss;
    socklen_t len;
    uint8_t blob[MC_SADDR_MAX + 4], bad[MC_SADDR_MAX + 4];
    size_t n;

    ck_assert_int_eq(mc_saddr_from_ip("127.0.0.1", 7, &ss, &len), 0);
    n = mc_saddr_pack((const struct sockaddr *)&ss, blob, sizeof(blob));
    ck_assert_uint_eq(n, MC_SADDR_V4_LEN);
    /* every length but the two legal ones: a worker address, not ours */
    for (size_t k = 0; k <= sizeof(bad); k++) {
        if (k == MC_SADDR_V4_LEN || k == MC_SADDR_V6_LEN)
            continue;
        memset(bad, 0, sizeof(bad));
        memcpy(bad, blob, k < n ? k : n);
        ck_assert(!mc_saddr_is(bad, k));
        ck_assert_int_eq(mc_saddr_unpack(bad, k, &ss, &len), MC_ERR_INVALID);
    }
    ck_assert(!mc_saddr_is(NULL, n));
    memcpy(bad, blob, n);
    bad[0] ^= 1; /* magic */
    ck_assert_int_eq(mc_saddr_unpack(bad, n, &ss, &len), MC_ERR_INVALID);
    memcpy(bad, blob, n);
    bad[4] = 6; /* says IPv6 in 11 bytes */
    ck_assert_int_eq(mc_saddr_unpack(bad, n, &ss, &len), MC_ERR_INVALID);
    bad[4] = 5; /* no such family */
    ck_assert_int_eq(mc_saddr_unpack(bad, n, &ss, &len), MC_ERR_INVALID);
    memcpy(bad, blob, n);
    bad[5] = bad[6] = 0; /* port 0 */
    ck_assert_int_eq(mc_saddr_unpack(bad, n, &ss, &len), MC_ERR_INVALID);
    /* a 23-byte blob that says IPv4 */
    memset(bad, 0, sizeof(bad));
    memcpy(bad, blob, n);
    ck_assert_int_eq(mc_saddr_unpack(bad, MC_SADDR_V6_LEN, &ss, &len), MC_ERR_INVALID);
}
END_TEST

START_TEST(test_saddr_pack_and_ip_limits)
{
    struct sockaddr_storage ss;
    struct sockaddr_un_like {
        sa_family_t family;
        char path[20];
    } un = {AF_UNIX, "x"};
    socklen_t len;
    uint8_t blob[MC_SADDR_MAX];

    ck_assert_int_eq(mc_saddr_from_ip("127.0.0.1", 0, &ss, &len), 0);
    ck_assert_uint_eq(mc_saddr_pack((const struct sockaddr *)&ss, blob, sizeof(blob)), 0);
    ck_assert_int_eq(mc_saddr_from_ip("127.0.0.1", 80, &ss, &len), 0);
    ck_assert_uint_eq(mc_saddr_pack((const struct sockaddr *)&ss, blob, MC_SADDR_MAX - 1), 0);
    ck_assert_uint_eq(mc_saddr_pack((const struct sockaddr *)&un, blob, sizeof(blob)), 0);
    ck_assert_int_eq(mc_saddr_from_ip("localhost", 80, &ss, &len), MC_ERR_INVALID);
    ck_assert_int_eq(mc_saddr_from_ip("", 80, &ss, &len), MC_ERR_INVALID);
    ck_assert_int_eq(mc_saddr_from_ip("1.2.3.4.5", 80, &ss, &len), MC_ERR_INVALID);
    ck_assert_int_eq(mc_saddr_from_ip(NULL, 80, &ss, &len), MC_ERR_INVALID);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("saddr");
    TCase *tc = tcase_create("blob");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_saddr_v4_roundtrip);
    tcase_add_test(tc, test_saddr_v6_roundtrip);
    tcase_add_test(tc, test_saddr_refuses_malformed);
    tcase_add_test(tc, test_saddr_pack_and_ip_limits);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
