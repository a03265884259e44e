/*
 * Unit tests of SQE validation (shm/sqe_check.c): each rule on its own (opcode, flags, key
 * length per op, staging ranges and their overflow, PUT_DATA's slot bound, put_flags, pins,
 * replicas), and that good SQEs of every op pass and fields an op ignores are not checked.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "mc/mc.h"
#include "mc/mc_status.h"
#include "shm/region.h"
#include "shm/sqe_check.h"

static struct mc_shm_layout t_lay;

static void t_setup(void)
{
    /* staging: 4 slots of 2 MiB = 8 MiB */
    ck_assert_int_eq(mc_shm_layout_init(&t_lay, 16, 32, 2 * MC_SHM_CHUNK, 4, 16), 0);
}

/* A valid SQE of each op. */
static struct mc_sqe t_sqe(uint8_t op)
{
    struct mc_sqe s;

    memset(&s, 0, sizeof(s));
    s.opcode = op;
    s.user_data = 0xfeedu;
    switch (op) {
    case MC_OP_PUT:
        s.key_len = 10;
        s.data_off = MC_SHM_CHUNK;
        s.data_len = 3 * MC_SHM_CHUNK; /* spans slots: allowed */
        s.put_flags = MC_PUT_UPSERT | MC_PUT_PIN_SOFT;
        s.replicas = 2;
        break;
    case MC_OP_PUT_START:
        s.key_len = 512;
        s.arg0 = UINT64_C(1) << 40;
        s.replicas = 8;
        s.put_flags = MC_PUT_FLAGS_ALL & ~MC_PUT_PIN_SOFT;
        break;
    case MC_OP_PUT_DATA:
        s.arg0 = 3;
        s.data_off = 2 * MC_SHM_CHUNK;
        s.data_len = 2 * MC_SHM_CHUNK;
        break;
    case MC_OP_GET:
    case MC_OP_EXIST:
    case MC_OP_REMOVE:
    case MC_OP_STAT:
    case MC_OP_REMOVE_PREFIX:
    case MC_OP_DRAIN:
    case MC_OP_PIN:
    case MC_OP_TOUCH:
        s.key_len = 1;
        s.arg0 = 5;
        break;
    case MC_OP_UNPIN:
        s.key_len = 0; /* every pin under the id */
        s.arg0 = 5;
        break;
    case MC_OP_LIST:
        s.key_len = 0; /* every key */
        s.data_len = 4096;
        s.arg1 = 100;
        break;
    case MC_OP_STATS:
        s.data_off = 0;
        s.data_len = 4096;
        break;
    case MC_OP_RELEASE:
        s.arg0 = 77;
        s.flags = MC_SQE_F_NO_CQE;
        break;
    default:
        break;
    }
    return s;
}

static int t_check(const struct mc_sqe *s)
{
    return mc_shm_sqe_check(&t_lay, s);
}

START_TEST(test_sqe_check_accepts_good_sqes)
{
    uint8_t op;

    for (op = 0; op < MC_OP__COUNT; op++) {
        struct mc_sqe s = t_sqe(op);

        ck_assert_msg(t_check(&s) == 0, "op %u refused", op);
        /* fields no op checks: timeouts, ttl, user_data */
        s.deadline_ms = UINT32_MAX;
        s.ttl_ms = UINT64_MAX;
        s.user_data = UINT64_MAX;
        ck_assert_msg(t_check(&s) == 0, "op %u refused for an unchecked field", op);
    }
    {
        /* ops without put options ignore put_flags and replicas; RELEASE may want a CQE */
        struct mc_sqe s = t_sqe(MC_OP_GET);

        s.put_flags = UINT32_MAX;
        s.replicas = 100;
        s.data_off = UINT64_MAX;
        ck_assert_int_eq(t_check(&s), 0);
        s = t_sqe(MC_OP_RELEASE);
        s.flags = 0;
        ck_assert_int_eq(t_check(&s), 0);
    }
}
END_TEST

START_TEST(test_sqe_check_rejects_opcode)
{
    struct mc_sqe s = t_sqe(MC_OP_NOP);

    s.opcode = MC_OP__COUNT;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s.opcode = 255;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    /* a NOP carrying a key or flags is garbage */
    s = t_sqe(MC_OP_NOP);
    s.key_len = 3;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s = t_sqe(MC_OP_NOP);
    s.flags = MC_SQE_F_NO_CQE;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
}
END_TEST

START_TEST(test_sqe_check_rejects_flags)
{
    uint8_t op;

    for (op = 0; op < MC_OP__COUNT; op++) {
        struct mc_sqe s = t_sqe(op);

        s.flags = 0x40;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took unknown flag", op);
        if (op != MC_OP_PUT_START) {
            s.flags = MC_SQE_F_ARENA_DATA; /* a streamed arena put's start only */
            ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took arena data", op);
        }
        s.flags = MC_SQE_F_TAIL_APART; /* only beside a GET's arena */
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took a tail apart alone", op);
        if (op != MC_OP_GET) {
            s.flags = MC_SQE_F_TAIL_APART | MC_SQE_F_ARENA;
            ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took a tail apart", op);
        }
        s.flags = MC_SQE_F_ARENA | MC_SQE_F_USER;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took two data sources", op);
        s.flags = MC_SQE_F_DEV | MC_SQE_F_ARENA;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took a device and an arena", op);
        s.flags = MC_SQE_F_DEV | MC_SQE_F_USER;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took a device and user memory", op);
        if (op != MC_OP_PUT && op != MC_OP_PUT_DATA) {
            s.flags = MC_SQE_F_DEV;
            ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took a device buffer", op);
            s.flags = MC_SQE_F_ARENA;
            s.data_len = op == MC_OP_GET ? 0 : s.data_len; /* a GET's needs bytes */
            ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took an arena", op);
            s.flags = MC_SQE_F_USER;
            ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took user memory", op);
        }
        s.flags = MC_SQE_F_NO_CQE | 0x80;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took unknown flag", op);
        if (op == MC_OP_RELEASE)
            continue;
        s.flags = MC_SQE_F_NO_CQE;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took NO_CQE", op);
    }
}
END_TEST

/* PUT / PUT_DATA from an arena or the client's memory: the staging bounds do not apply,
 * the arena id and the address range do. LIST takes an empty prefix, REMOVE_PREFIX not. */
START_TEST(test_sqe_check_data_sources_and_prefixes)
{
    struct mc_sqe s = t_sqe(MC_OP_PUT);

    /* a device buffer: its id below MC_SHM_MAX_DEVBUFS, the offset checked by the agent */
    s.flags = MC_SQE_F_DEV;
    s.data_off = (UINT64_C(255) << MC_SHM_ARENA_SHIFT) | (UINT64_C(1) << 40);
    s.data_len = UINT64_C(1) << 33;
    ck_assert_int_eq(t_check(&s), 0);
    s.data_off = (uint64_t)MC_SHM_MAX_DEVBUFS << MC_SHM_ARENA_SHIFT;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s.data_off = 0;
    s.data_len = 0;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s = t_sqe(MC_OP_PUT);

    s.flags = MC_SQE_F_ARENA;
    s.data_off = (UINT64_C(3) << MC_SHM_ARENA_SHIFT) | (UINT64_C(1) << 40);
    s.data_len = UINT64_C(1) << 33; /* far beyond staging: the agent checks the arena */
    ck_assert_int_eq(t_check(&s), 0);
    s.data_off = (uint64_t)MC_SHM_MAX_ARENAS << MC_SHM_ARENA_SHIFT;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s.data_off = 0;
    s.data_len = 0;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s.flags = MC_SQE_F_USER;
    s.data_off = 0x7f0000001000ull;
    s.data_len = 64u << 20;
    ck_assert_int_eq(t_check(&s), 0);
    s.data_off = UINT64_MAX - 10;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s = t_sqe(MC_OP_PUT_DATA);
    s.flags = MC_SQE_F_USER;
    s.data_off = 0x7f0000001000ull;
    s.data_len = 64u << 20; /* larger than a staging slot: fine from user memory */
    ck_assert_int_eq(t_check(&s), 0);

    /* a GET's destination in an arena (arena_reads): id and length checked here, the span
     * by the agent; never with another source flag */
    s = t_sqe(MC_OP_GET);
    s.flags = MC_SQE_F_ARENA;
    s.data_off = (UINT64_C(7) << MC_SHM_ARENA_SHIFT) | 4096;
    s.data_len = UINT64_C(16) << 20;
    ck_assert_int_eq(t_check(&s), 0);
    s.flags = MC_SQE_F_ARENA | MC_SQE_F_TAIL_APART; /* the trailer may land apart */
    ck_assert_int_eq(t_check(&s), 0);
    s.flags = MC_SQE_F_ARENA;
    s.data_len = 0;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s.data_len = 4096;
    s.data_off = (uint64_t)MC_SHM_MAX_ARENAS << MC_SHM_ARENA_SHIFT;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s.data_off = 0;
    s.flags = MC_SQE_F_ARENA | MC_SQE_F_USER;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s.flags = MC_SQE_F_ARENA | MC_SQE_F_DEV;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s.flags = MC_SQE_F_USER;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    /* a streamed arena put: MC_SQE_F_ARENA_DATA on its PUT_START, never beside another */
    s = t_sqe(MC_OP_PUT_START);
    s.flags = MC_SQE_F_ARENA_DATA;
    ck_assert_int_eq(t_check(&s), 0);
    s.flags = MC_SQE_F_ARENA_DATA | MC_SQE_F_ARENA;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s.flags = MC_SQE_F_ARENA_DATA | MC_SQE_F_USER;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s.flags = MC_SQE_F_ARENA_DATA | MC_SQE_F_DEV;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s.flags = MC_SQE_F_ARENA_DATA | MC_SQE_F_NO_CQE;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s = t_sqe(MC_OP_EXIST);
    s.flags = MC_SQE_F_ARENA;
    s.data_len = 4096;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID); /* only a GET has a destination */

    s = t_sqe(MC_OP_LIST);
    ck_assert_int_eq(t_check(&s), 0);
    s.key_len = 513;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    s = t_sqe(MC_OP_REMOVE_PREFIX);
    s.key_len = 0;
    ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
}
END_TEST

START_TEST(test_sqe_check_rejects_key_len)
{
    static const uint8_t key_ops[] = {MC_OP_PUT, MC_OP_PUT_START, MC_OP_GET,
                                      MC_OP_EXIST, MC_OP_REMOVE, MC_OP_STAT};
    static const uint8_t keyless_ops[] = {MC_OP_NOP, MC_OP_PUT_DATA, MC_OP_PUT_END,
                                          MC_OP_PUT_ABORT, MC_OP_RELEASE, MC_OP_STATS};
    size_t i;

    for (i = 0; i < sizeof(key_ops); i++) {
        struct mc_sqe s = t_sqe(key_ops[i]);

        s.key_len = 0;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took key_len 0", key_ops[i]);
        s.key_len = MC_SHM_KEY_SLOT + 1;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took key_len 513", key_ops[i]);
        s.key_len = UINT16_MAX;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took key_len 65535", key_ops[i]);
        s.key_len = MC_SHM_KEY_SLOT;
        ck_assert_msg(t_check(&s) == 0, "op %u refused key_len 512", key_ops[i]);
    }
    for (i = 0; i < sizeof(keyless_ops); i++) {
        struct mc_sqe s = t_sqe(keyless_ops[i]);

        s.key_len = 1;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u took a key", keyless_ops[i]);
    }
}
END_TEST

START_TEST(test_sqe_check_rejects_staging_range)
{
    static const uint8_t ops[] = {MC_OP_PUT, MC_OP_PUT_DATA, MC_OP_STATS};
    const uint64_t size = t_lay.staging_size;
    size_t i;

    for (i = 0; i < sizeof(ops); i++) {
        struct mc_sqe s = t_sqe(ops[i]);

        s.data_off = 0;
        s.data_len = 0;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u: empty range", ops[i]);
        s.data_off = size - 4096;
        s.data_len = 4096; /* ends exactly at the end */
        ck_assert_msg(t_check(&s) == 0, "op %u: last page refused", ops[i]);
        s.data_len = 4097;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u: one byte over", ops[i]);
        s.data_off = size;
        s.data_len = 1;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u: starts at the end", ops[i]);
        /* off + len wraps to a small number */
        s.data_off = UINT64_MAX - 100;
        s.data_len = 200;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u: wrapping range", ops[i]);
        s.data_off = 4096;
        s.data_len = UINT64_MAX;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u: huge length", ops[i]);
    }
    {
        /* PUT may cover the whole staging area; PUT_DATA at most one slot */
        struct mc_sqe s = t_sqe(MC_OP_PUT);

        s.data_off = 0;
        s.data_len = size;
        ck_assert_int_eq(t_check(&s), 0);
        s = t_sqe(MC_OP_PUT_DATA);
        s.data_off = 0;
        s.data_len = t_lay.staging_slot_size;
        ck_assert_int_eq(t_check(&s), 0);
        s.data_len = t_lay.staging_slot_size + 1;
        ck_assert_int_eq(t_check(&s), MC_ERR_INVALID);
    }
}
END_TEST

START_TEST(test_sqe_check_rejects_put_options)
{
    static const uint8_t ops[] = {MC_OP_PUT, MC_OP_PUT_START};
    size_t i;

    for (i = 0; i < sizeof(ops); i++) {
        struct mc_sqe s = t_sqe(ops[i]);

        s.put_flags = MC_PUT_PIN_SOFT | MC_PUT_PIN_HARD;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u: both pins", ops[i]);
        s.put_flags = 1u << 5;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u: unknown bit 5", ops[i]);
        s.put_flags = 1u << 31;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u: unknown bit 31", ops[i]);
        s.put_flags = MC_PUT_PIN_HARD | MC_PUT_NO_CHECKSUM | MC_PUT_SAME_DOMAIN_OK;
        ck_assert_msg(t_check(&s) == 0, "op %u: known bits refused", ops[i]);
        s.replicas = MC_SHM_MAX_REPLICAS + 1;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u: 9 replicas", ops[i]);
        s.replicas = UINT32_MAX;
        ck_assert_msg(t_check(&s) == MC_ERR_INVALID, "op %u: huge replicas", ops[i]);
        s.replicas = 0; /* means 1 */
        ck_assert_msg(t_check(&s) == 0, "op %u: 0 replicas refused", ops[i]);
    }
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("sqe_check");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, t_setup, NULL);
    tcase_add_test(tc, test_sqe_check_accepts_good_sqes);
    tcase_add_test(tc, test_sqe_check_rejects_opcode);
    tcase_add_test(tc, test_sqe_check_rejects_flags);
    tcase_add_test(tc, test_sqe_check_rejects_key_len);
    tcase_add_test(tc, test_sqe_check_data_sources_and_prefixes);
    tcase_add_test(tc, test_sqe_check_rejects_staging_range);
    tcase_add_test(tc, test_sqe_check_rejects_put_options);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(t_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
