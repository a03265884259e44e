/*
 * Unit tests of the RPC frame codec (ucx_backend/wire.h): header round trip and byte layout,
 * every field check of the decoder, truncated frames, and the bounded reader/writer failing
 * stickily on overrun. Pure code: no UCX, no processes.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mc/mc_status.h"
#include "daemon/proto/rpc.h" /* type names: the frames carry any */
#include "ucx_backend/wire.h"

/* A valid frame of `payload_len` bytes of payload: header then 0xab bytes. */
static size_t t_frame(uint8_t *buf, size_t cap, uint16_t type, uint64_t id, uint32_t payload_len,
                      uint32_t flags)
{
    struct mc_wire_hdr h;

    mc_wire_hdr_init(&h, type, id, payload_len, flags);
    ck_assert_int_eq(mc_wire_hdr_encode(&h, buf, cap), 0);
    memset(buf + MC_WIRE_HDR_SIZE, 0xab, payload_len);
    return MC_WIRE_HDR_SIZE + payload_len;
}

static void t_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

START_TEST(test_wire_hdr_round_trip)
{
    uint8_t buf[64];
    struct mc_wire_hdr h;
    size_t n = t_frame(buf, sizeof(buf), MC_WIRE_GET_BATCH, UINT64_C(0x0123456789abcdef), 10, 0);

    ck_assert_int_eq(mc_wire_hdr_decode(buf, n, &h), 0);
    ck_assert_uint_eq(h.magic, MC_WIRE_MAGIC);
    ck_assert_uint_eq(h.version, MC_WIRE_VERSION);
    ck_assert_uint_eq(h.type, MC_WIRE_GET_BATCH);
    ck_assert_uint_eq(h.request_id, UINT64_C(0x0123456789abcdef));
    ck_assert_uint_eq(h.payload_len, 10);
    ck_assert_uint_eq(h.flags, 0);

    n = t_frame(buf, sizeof(buf), MC_WIRE_READ_REPLY, 7, 0, MC_WIRE_F_REPLY | MC_WIRE_F_BULK);
    ck_assert_int_eq(mc_wire_hdr_decode(buf, n, &h), 0);
    ck_assert_uint_eq(h.type, MC_WIRE_READ_REPLY);
    ck_assert_uint_eq(h.flags, MC_WIRE_F_REPLY | MC_WIRE_F_BULK);
}
END_TEST

START_TEST(test_wire_hdr_layout_little_endian)
{
    static const uint8_t want[MC_WIRE_HDR_SIZE] = {
        0x6d, 0x63, 0x77, 0x31,                         /* "mcw1" */
        0x01, 0x00,                                     /* version */
        0x05, 0x00,                                     /* HEARTBEAT */
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* request id */
        0x03, 0x00, 0x00, 0x00,                         /* payload_len */
        0x00, 0x00, 0x00, 0x00,                         /* flags */
    };
    uint8_t buf[MC_WIRE_HDR_SIZE + 3];

    t_frame(buf, sizeof(buf), MC_WIRE_HEARTBEAT, UINT64_C(0x0102030405060708), 3, 0);
    ck_assert_mem_eq(buf, want, MC_WIRE_HDR_SIZE);
}
END_TEST

START_TEST(test_wire_hdr_rejects_each_field)
{
    uint8_t good[MC_WIRE_HDR_SIZE + 4];
    uint8_t buf[sizeof(good)];
    struct mc_wire_hdr h, keep;
    size_t n = t_frame(good, sizeof(good), MC_WIRE_MOUNT, 1, 4, 0);

    memset(&keep, 0x5a, sizeof(keep));
#define T_BAD(mutate)                                                  \
    do {                                                               \
        memcpy(buf, good, n);                                          \
        mutate;                                                        \
        h = keep;                                                      \
        ck_assert_int_eq(mc_wire_hdr_decode(buf, n, &h), MC_ERR_PROTO); \
        ck_assert_mem_eq(&h, &keep, sizeof(h)); /* untouched */        \
    } while (0)

    T_BAD(buf[0] ^= 1);                     /* magic */
    T_BAD(buf[3] = 0);                      /* magic */
    T_BAD(buf[4] = 2);                      /* version */
    T_BAD(buf[5] = 1);                      /* version 257 */
    T_BAD(buf[4] = 0);                      /* version 0 */
    T_BAD(buf[6] = 0);                      /* type 0 */
    T_BAD(buf[6] = MC_WIRE__COUNT);         /* type past the last */
    T_BAD((buf[6] = 0xff, buf[7] = 0xff));  /* type 65535 */
    T_BAD(buf[20] = 0x4);                   /* unknown flag */
    T_BAD(buf[23] = 0x80);                  /* unknown flag, top bit */
    T_BAD(buf[20] = MC_WIRE_F_REPLY);       /* reply flag on a request type */
    T_BAD(buf[6] = MC_WIRE_MOUNT_REPLY);    /* reply type without the flag */
    T_BAD(t_put32(buf + 16, 5));            /* says more than received */
    T_BAD(t_put32(buf + 16, 3));            /* says less than received */
    T_BAD(t_put32(buf + 16, UINT32_MAX));   /* overflow bait */
    T_BAD(t_put32(buf + 16, MC_WIRE_PAYLOAD_MAX + 1));
#undef T_BAD
    ck_assert_int_eq(mc_wire_hdr_decode(good, n, &h), 0);
}
END_TEST

START_TEST(test_wire_hdr_payload_max)
{
    size_t n = MC_WIRE_HDR_SIZE + MC_WIRE_PAYLOAD_MAX;
    uint8_t *buf = calloc(1, n + 1);
    struct mc_wire_hdr h;

    ck_assert_ptr_nonnull(buf);
    t_frame(buf, n, MC_WIRE_WRITE, 1, MC_WIRE_PAYLOAD_MAX, 0);
    ck_assert_int_eq(mc_wire_hdr_decode(buf, n, &h), 0);
    ck_assert_uint_eq(h.payload_len, MC_WIRE_PAYLOAD_MAX);
    /* one more byte received than the header says */
    ck_assert_int_eq(mc_wire_hdr_decode(buf, n + 1, &h), MC_ERR_PROTO);
    mc_wire_hdr_init(&h, MC_WIRE_WRITE, 1, MC_WIRE_PAYLOAD_MAX + 1, 0);
    ck_assert_int_eq(mc_wire_hdr_encode(&h, buf, n), MC_ERR_INVALID);
    free(buf);
}
END_TEST

START_TEST(test_wire_hdr_truncated)
{
    uint8_t buf[MC_WIRE_HDR_SIZE];
    struct mc_wire_hdr h;

    t_frame(buf, sizeof(buf), MC_WIRE_FENCE, 9, 0, 0);
    for (size_t len = 0; len < MC_WIRE_HDR_SIZE; len++)
        ck_assert_int_eq(mc_wire_hdr_decode(buf, len, &h), MC_ERR_PROTO);
    ck_assert_int_eq(mc_wire_hdr_decode(NULL, 0, &h), MC_ERR_PROTO);
    ck_assert_int_eq(mc_wire_hdr_decode(buf, MC_WIRE_HDR_SIZE, &h), 0);
}
END_TEST

START_TEST(test_wire_hdr_encode_refuses_invalid)
{
    uint8_t buf[MC_WIRE_HDR_SIZE];
    struct mc_wire_hdr h;

    memset(buf, 0xee, sizeof(buf));
    mc_wire_hdr_init(&h, 0, 1, 0, 0);
    ck_assert_int_eq(mc_wire_hdr_encode(&h, buf, sizeof(buf)), MC_ERR_INVALID);
    mc_wire_hdr_init(&h, MC_WIRE__COUNT, 1, 0, 0);
    ck_assert_int_eq(mc_wire_hdr_encode(&h, buf, sizeof(buf)), MC_ERR_INVALID);
    mc_wire_hdr_init(&h, MC_WIRE_HELLO_REPLY, 1, 0, 0); /* reply without the flag */
    ck_assert_int_eq(mc_wire_hdr_encode(&h, buf, sizeof(buf)), MC_ERR_INVALID);
    mc_wire_hdr_init(&h, MC_WIRE_HELLO, 1, 0, 0x100);
    ck_assert_int_eq(mc_wire_hdr_encode(&h, buf, sizeof(buf)), MC_ERR_INVALID);
    mc_wire_hdr_init(&h, MC_WIRE_HELLO, 1, 0, 0);
    ck_assert_int_eq(mc_wire_hdr_encode(&h, buf, sizeof(buf) - 1), MC_ERR_INVALID);
    h.version = 2;
    ck_assert_int_eq(mc_wire_hdr_encode(&h, buf, sizeof(buf)), MC_ERR_INVALID);
    for (size_t i = 0; i < sizeof(buf); i++)
        ck_assert_uint_eq(buf[i], 0xee); /* nothing written */
    ck_assert(mc_wire_type_is_reply(MC_WIRE_READ_REPLY));
    ck_assert(!mc_wire_type_is_reply(MC_WIRE_READ));
    ck_assert(!mc_wire_type_is_reply(0));
    ck_assert(!mc_wire_type_is_valid(MC_WIRE__COUNT));
}
END_TEST

START_TEST(test_wire_reader_fields)
{
    uint8_t buf[64];
    struct mc_wire_writer w;
    struct mc_wire_reader r;
    const uint8_t *b;
    size_t len;

    mc_wire_writer_init(&w, buf, sizeof(buf));
    mc_wire_put_u8(&w, 0xfe);
    mc_wire_put_u16(&w, 0xbeef);
    mc_wire_put_u32(&w, 0xdeadbeef);
    mc_wire_put_u64(&w, UINT64_C(0x1122334455667788));
    mc_wire_put_blob(&w, "key", 3);
    mc_wire_put_bytes(&w, "xy", 2);
    mc_wire_put_blob(&w, NULL, 0);
    ck_assert(!w.bad);
    ck_assert_uint_eq((size_t)(w.p - buf), 1 + 2 + 4 + 8 + 4 + 3 + 2 + 4);
    ck_assert_uint_eq(buf[1], 0xef); /* little-endian */
    ck_assert_uint_eq(buf[2], 0xbe);

    mc_wire_reader_init(&r, buf, (size_t)(w.p - buf));
    ck_assert_uint_eq(mc_wire_get_u8(&r), 0xfe);
    ck_assert_uint_eq(mc_wire_get_u16(&r), 0xbeef);
    ck_assert_uint_eq(mc_wire_get_u32(&r), 0xdeadbeef);
    ck_assert_uint_eq(mc_wire_get_u64(&r), UINT64_C(0x1122334455667788));
    b = mc_wire_get_blob(&r, 16, &len);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(len, 3);
    ck_assert_mem_eq(b, "key", 3);
    b = mc_wire_get_bytes(&r, 2);
    ck_assert_mem_eq(b, "xy", 2);
    ck_assert(!mc_wire_reader_done(&r)); /* the empty blob's prefix is left */
    (void)mc_wire_get_blob(&r, 0, &len);
    ck_assert_uint_eq(len, 0);
    ck_assert(mc_wire_reader_done(&r));
    ck_assert_uint_eq(mc_wire_reader_left(&r), 0);
}
END_TEST

START_TEST(test_wire_reader_overrun_sticky)
{
    uint8_t buf[7] = {1, 2, 3, 4, 5, 6, 7};
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, sizeof(buf));
    ck_assert_uint_eq(mc_wire_get_u32(&r), 0x04030201);
    ck_assert_uint_eq(mc_wire_get_u64(&r), 0); /* 3 bytes left: fails, reads nothing */
    ck_assert(r.bad);
    ck_assert_uint_eq(mc_wire_get_u8(&r), 0);  /* would fit, but the reader is bad */
    ck_assert_uint_eq(mc_wire_get_u16(&r), 0);
    ck_assert_ptr_null(mc_wire_get_bytes(&r, 0));
    ck_assert_uint_eq(mc_wire_reader_left(&r), 0);
    ck_assert(!mc_wire_reader_done(&r));

    mc_wire_reader_init(&r, buf, sizeof(buf));
    ck_assert_ptr_null(mc_wire_get_bytes(&r, SIZE_MAX)); /* no pointer overflow */
    ck_assert(r.bad);

    mc_wire_reader_init(&r, NULL, 0);
    ck_assert(mc_wire_reader_done(&r));
    (void)mc_wire_get_u8(&r);
    ck_assert(r.bad);
}
END_TEST

START_TEST(test_wire_reader_blob_limits)
{
    uint8_t buf[16];
    struct mc_wire_reader r;
    size_t len = 99;

    t_put32(buf, 8);
    memset(buf + 4, 'k', 8);
    mc_wire_reader_init(&r, buf, 12);
    ck_assert_ptr_null(mc_wire_get_blob(&r, 7, &len)); /* over the caller's max */
    ck_assert_uint_eq(len, 0);
    ck_assert(r.bad);

    mc_wire_reader_init(&r, buf, 11); /* one byte short */
    ck_assert_ptr_null(mc_wire_get_blob(&r, 64, &len));
    ck_assert(r.bad);

    t_put32(buf, UINT32_MAX); /* a length that would wrap a 32-bit pointer */
    mc_wire_reader_init(&r, buf, sizeof(buf));
    ck_assert_ptr_null(mc_wire_get_blob(&r, SIZE_MAX, &len));
    ck_assert(r.bad);

    t_put32(buf, 8);
    mc_wire_reader_init(&r, buf, 12);
    ck_assert_ptr_nonnull(mc_wire_get_blob(&r, 8, &len));
    ck_assert_uint_eq(len, 8);
    ck_assert(mc_wire_reader_done(&r));
}
END_TEST

START_TEST(test_wire_writer_overflow_sticky)
{
    uint8_t buf[8];
    struct mc_wire_writer w;

    memset(buf, 0, sizeof(buf));
    mc_wire_writer_init(&w, buf, sizeof(buf));
    mc_wire_put_u32(&w, 0x01020304);
    mc_wire_put_u64(&w, UINT64_MAX); /* does not fit: nothing written */
    ck_assert(w.bad);
    ck_assert_uint_eq(buf[4], 0);
    mc_wire_put_u8(&w, 9); /* would fit, but sticky */
    ck_assert_uint_eq(buf[4], 0);
    ck_assert_ptr_eq(w.p, buf + 4);

    /* a blob whose bytes do not fit writes no prefix either */
    mc_wire_writer_init(&w, buf, sizeof(buf));
    memset(buf, 0, sizeof(buf));
    mc_wire_put_blob(&w, "12345", 5);
    ck_assert(w.bad);
    ck_assert_uint_eq(buf[0], 0);

    mc_wire_writer_init(&w, buf, sizeof(buf));
    mc_wire_put_blob(&w, "1234", 4);
    ck_assert(!w.bad);
    ck_assert_ptr_eq(w.p, buf + 8);
}
END_TEST

static Suite *wire_suite(void)
{
    Suite *s = suite_create("ucx");
    TCase *tc = tcase_create("wire");

    tcase_add_test(tc, test_wire_hdr_round_trip);
    tcase_add_test(tc, test_wire_hdr_layout_little_endian);
    tcase_add_test(tc, test_wire_hdr_rejects_each_field);
    tcase_add_test(tc, test_wire_hdr_payload_max);
    tcase_add_test(tc, test_wire_hdr_truncated);
    tcase_add_test(tc, test_wire_hdr_encode_refuses_invalid);
    tcase_add_test(tc, test_wire_reader_fields);
    tcase_add_test(tc, test_wire_reader_overrun_sticky);
    tcase_add_test(tc, test_wire_reader_blob_limits);
    tcase_add_test(tc, test_wire_writer_overflow_sticky);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(wire_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
