/*
 * Unit tests of the master RPC payload codecs (daemon/proto/master_proto.h): a round trip of
 * every message, truncation at every byte offset, a trailing byte, each bound of each
 * decoder (counts, key and name lengths, blobs, enums, flags, status codes), the encoders
 * refusing what the decoders refuse, and randomized round trips. Pure code: no UCX.
 *
 * `test_master_proto --write-corpus DIR` writes the fuzz seed corpus
 * (tests/fuzz/corpus/master_proto): one file per message type, the type's index as the
 * first byte (fuzz_master_proto.c), then a valid payload.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/proto/t_master_msg.h"

#define T_BUF (MC_PROTO_PAYLOAD_MAX)

static uint8_t t_buf[T_BUF];
static uint8_t t_buf2[T_BUF];

static struct t_msg *t_msg_new(void)
{
    struct t_msg *m = calloc(1, sizeof(*m));

    ck_assert_ptr_nonnull(m);
    return m;
}

static bool t_inside(const void *p, const void *buf, size_t len)
{
    const uint8_t *q = p, *b = buf;

    return q >= b && q < b + len;
}

/* Decode buf[0..len) from an allocation of exactly len bytes, so ASan sees any over-read. */
static int t_decode_exact(unsigned int type, const uint8_t *buf, size_t len, size_t cap,
                          struct t_msg *m)
{
    uint8_t *copy = len == 0 ? NULL : malloc(len);
    int rc;

    if (len != 0) {
        ck_assert_ptr_nonnull(copy);
        memcpy(copy, buf, len);
    }
    rc = t_decode(type, copy, len, cap, m);
    free(copy);
    return rc;
}

#define T_ACCEPT(type, buf, len, m)                                                            \
    ck_assert_int_eq(t_decode_exact(type, buf, len, MC_PROTO_BATCH_MAX, m), 0)
#define T_REFUSE(type, buf, len, m)                                                            \
    ck_assert_int_eq(t_decode_exact(type, buf, len, MC_PROTO_BATCH_MAX, m), MC_ERR_PROTO)

/* Raw payload builders for the bound tests (they bypass the encoders' checks). */
static struct mc_wire_writer t_w;
static uint8_t t_fill[MC_PROTO_ADDR_MAX + 16];

static void t_raw(void)
{
    mc_wire_writer_init(&t_w, t_buf, sizeof(t_buf));
    memset(t_fill, 'k', sizeof(t_fill));
}

static size_t t_raw_len(void)
{
    ck_assert(!t_w.bad);
    return (size_t)(t_w.p - t_buf);
}

static void t_blob(size_t len)
{
    mc_wire_put_blob(&t_w, t_fill, len);
}

/* --- status codes ------------------------------------------------------------------------ */

START_TEST(test_proto_status_is_valid)
{
    for (size_t i = 0; i < T_NCODES; i++) {
        ck_assert(mc_proto_status_is_valid(t_code_at(i), false));
        ck_assert(mc_proto_status_is_valid(t_code_at(i), true));
    }
    ck_assert(mc_proto_status_is_valid(0, false));
    ck_assert(!mc_proto_status_is_valid(1, false));
    ck_assert(mc_proto_status_is_valid(1, true));
    ck_assert(!mc_proto_status_is_valid(2, true));
    /* the gaps between the groups, and past the last code of each */
    ck_assert(!mc_proto_status_is_valid(MC_ERR_IO - 1, true));
    ck_assert(!mc_proto_status_is_valid(MC_ERR_PROTO + 1, true));
    ck_assert(!mc_proto_status_is_valid(MC_ERR_PROTO - 1, true));
    ck_assert(!mc_proto_status_is_valid(MC_ERR_UNAVAILABLE - 1, true));
    ck_assert(!mc_proto_status_is_valid(MC_ERR_INTERNAL - 1, true));
    /* a negated errno is no status */
    for (int e = 1; e <= 200; e++)
        ck_assert(!mc_proto_status_is_valid(-e, true));
    ck_assert(!mc_proto_status_is_valid(INT32_MIN, true));
    ck_assert(!mc_proto_status_is_valid(INT32_MAX, true));
}
END_TEST

/* --- round trips, one per message -------------------------------------------------------- */

START_TEST(test_proto_token_equal)
{
    const struct mc_proto_bytes same = {.p = (const uint8_t *)"s3cret", .len = 6},
                                other = {.p = (const uint8_t *)"s3creT", .len = 6},
                                prefix = {.p = (const uint8_t *)"s3cre", .len = 5},
                                longer = {.p = (const uint8_t *)"s3cret!", .len = 7},
                                none = {.p = NULL, .len = 0};

    ck_assert(mc_proto_token_equal("s3cret", 6, &same));
    ck_assert(!mc_proto_token_equal("s3cret", 6, &other));
    ck_assert(!mc_proto_token_equal("s3cret", 6, &prefix));
    ck_assert(!mc_proto_token_equal("s3cret", 6, &longer));
    ck_assert(!mc_proto_token_equal("s3cret", 6, &none));
    ck_assert(mc_proto_token_equal(NULL, 0, &other)); /* no token set: allow_no_token */
}
END_TEST

START_TEST(test_proto_hello_round_trip)
{
    struct mc_proto_hello_req q = {{(const uint8_t *)"s3cret", 6},
                                   {(const uint8_t *)"node-a", 6},
                                   {(const uint8_t *)"rack1", 5}, 0, 0};
    struct mc_proto_hello_req dq;
    struct mc_proto_hello_rep p = {0, 7, 10000, 9000, 0, 0}, dp;
    size_t len;

    ck_assert_int_eq(mc_proto_hello_req_encode(&q, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 4 + 6 + 4 + 6 + 4 + 5);
    ck_assert_int_eq(mc_proto_hello_req_decode(t_buf, len, &dq), 0);
    ck_assert_uint_eq(dq.token.len, 6);
    ck_assert_mem_eq(dq.token.p, "s3cret", 6);
    ck_assert_mem_eq(dq.name.p, "node-a", 6);
    ck_assert_uint_eq(dq.domain.len, 5);
    ck_assert(t_inside(dq.name.p, t_buf, len)); /* zero copy */

    q.token.len = 0; /* empty token and domain are allowed */
    q.domain.len = 0;
    ck_assert_int_eq(mc_proto_hello_req_encode(&q, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(mc_proto_hello_req_decode(t_buf, len, &dq), 0);
    ck_assert_uint_eq(dq.token.len + dq.domain.len, 0);
    ck_assert_uint_eq(dq.incarnation, 0); /* none sent: 0 */

    q.incarnation = UINT64_C(0x0123456789abcdef); /* sent only when not 0 */
    ck_assert_int_eq(mc_proto_hello_req_encode(&q, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 4 + 0 + 4 + 6 + 4 + 0 + 8);
    ck_assert_int_eq(mc_proto_hello_req_decode(t_buf, len, &dq), 0);
    ck_assert_uint_eq(dq.incarnation, UINT64_C(0x0123456789abcdef));
    ck_assert_int_eq(mc_proto_hello_req_decode(t_buf, len - 1, &dq), MC_ERR_PROTO);
    /* an incarnation that is there is never 0 (0 is sent as nothing): one encoding per
     * message, so decode + encode gives back the same bytes (found by fuzz_master_proto) */
    memset(t_buf + len - 8, 0, 8);
    ck_assert_int_eq(mc_proto_hello_req_decode(t_buf, len, &dq), MC_ERR_PROTO);
    /* flags ("carrying" PUBLISHes over a master change), after the incarnation, sent only
     * when not 0, and only with an incarnation */
    q.incarnation = 5;
    ck_assert_int_eq(mc_proto_hello_req_encode(&q, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(mc_proto_hello_req_decode(t_buf, len, &dq), 0);
    ck_assert_uint_eq(dq.flags, 0);
    q.flags = MC_PROTO_HELLO_F_CARRYING;
    ck_assert_int_eq(mc_proto_hello_req_encode(&q, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 4 + 0 + 4 + 6 + 4 + 0 + 8 + 4);
    ck_assert_int_eq(mc_proto_hello_req_decode(t_buf, len, &dq), 0);
    ck_assert_uint_eq(dq.incarnation, 5);
    ck_assert_uint_eq(dq.flags, MC_PROTO_HELLO_F_CARRYING);
    memset(t_buf + len - 4, 0, 4); /* there, but 0: one encoding per message */
    ck_assert_int_eq(mc_proto_hello_req_decode(t_buf, len, &dq), MC_ERR_PROTO);
    t_buf[len - 4] = 0x80; /* an unknown flag */
    ck_assert_int_eq(mc_proto_hello_req_decode(t_buf, len, &dq), MC_ERR_PROTO);
    q.flags = 0x80;
    ck_assert_int_eq(mc_proto_hello_req_encode(&q, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    q.flags = MC_PROTO_HELLO_F_CARRYING;
    q.incarnation = 0; /* flags without an incarnation cannot be told apart from one */
    ck_assert_int_eq(mc_proto_hello_req_encode(&q, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    q.flags = 0;

    ck_assert_int_eq(mc_proto_hello_rep_encode(&p, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 24);
    ck_assert_int_eq(mc_proto_hello_rep_decode(t_buf, len, &dp), 0);
    ck_assert_int_eq(dp.status, 0);
    ck_assert_uint_eq(dp.node, 7);
    ck_assert_uint_eq(dp.node_ttl_ms, 10000);
    ck_assert_uint_eq(dp.lease_ttl_ms, 9000);
    ck_assert_uint_eq(dp.epoch, 0); /* no --etcd: none sent */
    p.epoch = 12345; /* the leader's epoch, sent only when not 0 */
    ck_assert_int_eq(mc_proto_hello_rep_encode(&p, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 32);
    ck_assert_int_eq(mc_proto_hello_rep_decode(t_buf, len, &dp), 0);
    ck_assert_uint_eq(dp.epoch, 12345);
    ck_assert_int_eq(mc_proto_hello_rep_decode(t_buf, len - 1, &dp), MC_ERR_PROTO);
    memset(t_buf + len - 8, 0, 8); /* one encoding per message: a 0 that is there is bad */
    ck_assert_int_eq(mc_proto_hello_rep_decode(t_buf, len, &dp), MC_ERR_PROTO);
    p.epoch = 0;
    p.incarnation = 0xfeed; /* the master process's: sent when not 0, after an epoch of 0 */
    ck_assert_int_eq(mc_proto_hello_rep_encode(&p, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(mc_proto_hello_rep_decode(t_buf, len, &dp), 0);
    ck_assert_uint_eq(dp.epoch, 0);
    ck_assert_uint_eq(dp.incarnation, 0xfeed);
    memset(t_buf + len - 8, 0, 8);
    ck_assert_int_eq(mc_proto_hello_rep_decode(t_buf, len, &dp), MC_ERR_PROTO);
    p.incarnation = 0;

    p.status = MC_ERR_DENIED; /* a failed call is the status alone */
    ck_assert_int_eq(mc_proto_hello_rep_encode(&p, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 4);
    ck_assert_int_eq(mc_proto_hello_rep_decode(t_buf, len, &dp), 0);
    ck_assert_int_eq(dp.status, MC_ERR_DENIED);
    ck_assert_uint_eq(dp.node, MC_MASTER_NODE_NONE);
}
END_TEST

START_TEST(test_proto_mount_round_trip)
{
    uint8_t addr[300], rkey[40];
    struct mc_proto_mount_req q = {{3, MC_SEG_GPU, 0x7f0000000000, 1u << 30, "tenant-A.1", 1u << 29,
                                     MC_MASTER_SEG_F_RESTORING},
                                   {addr, sizeof(addr)},
                                   {rkey, sizeof(rkey)}};
    struct mc_proto_mount_req dq;
    struct mc_proto_mount_rep p = {0, 42}, dp;
    size_t len;

    memset(addr, 0xa5, sizeof(addr));
    memset(rkey, 0x5a, sizeof(rkey));
    ck_assert_int_eq(mc_proto_mount_req_encode(&q, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(mc_proto_mount_req_decode(t_buf, len, &dq), 0);
    ck_assert_uint_eq(dq.seg.node, 3);
    ck_assert_uint_eq(dq.seg.kind, MC_SEG_GPU);
    ck_assert_uint_eq(dq.seg.base, 0x7f0000000000);
    ck_assert_uint_eq(dq.seg.size, 1u << 30);
    ck_assert_uint_eq(dq.seg.flags, MC_MASTER_SEG_F_RESTORING);
    ck_assert_uint_eq(dq.worker_addr.len, sizeof(addr));
    ck_assert_mem_eq(dq.worker_addr.p, addr, sizeof(addr));
    ck_assert_mem_eq(dq.rkey.p, rkey, sizeof(rkey));
    ck_assert(t_inside(dq.rkey.p, t_buf, len));
    ck_assert_str_eq(dq.seg.tenant, "tenant-A.1");
    ck_assert_uint_eq(dq.seg.quota, 1u << 29);

    /* a tenant's name is checked both ways: no NUL, no space, at most 32 bytes */
    strcpy(q.seg.tenant, "a b");
    ck_assert_int_eq(mc_proto_mount_req_encode(&q, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    strcpy(q.seg.tenant, "");
    ck_assert_int_eq(mc_proto_mount_req_encode(&q, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(mc_proto_mount_req_decode(t_buf, len, &dq), 0);
    ck_assert_str_eq(dq.seg.tenant, "");
    t_buf[len - 16] = 1;          /* the tenant blob's length (0) becomes 1 ... */
    ck_assert_int_eq(mc_proto_mount_req_decode(t_buf, len, &dq), MC_ERR_PROTO);
    strcpy(q.seg.tenant, "t");
    ck_assert_int_eq(mc_proto_mount_req_encode(&q, t_buf, sizeof(t_buf), &len), 0);
    t_buf[len - 13] = '/';        /* ... and a name byte outside the set */
    ck_assert_int_eq(mc_proto_mount_req_decode(t_buf, len, &dq), MC_ERR_PROTO);
    strcpy(q.seg.tenant, "tenant-A.1");

    q.rkey.len = 0; /* no rkey: AM path only */
    ck_assert_int_eq(mc_proto_mount_req_encode(&q, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(mc_proto_mount_req_decode(t_buf, len, &dq), 0);
    ck_assert_uint_eq(dq.rkey.len, 0);

    ck_assert_int_eq(mc_proto_mount_rep_encode(&p, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(mc_proto_mount_rep_decode(t_buf, len, &dp), 0);
    ck_assert_int_eq(dp.status, 0);
    ck_assert_uint_eq(dp.seg, 42);
}
END_TEST

START_TEST(test_proto_heartbeat_round_trip)
{
    struct mc_proto_heartbeat_req q = {9, MC_PROTO_HEARTBEAT_F_LEAVE}, dq;
    struct mc_proto_status_rep p = {MC_ERR_NOT_FOUND}, dp;
    size_t len;

    ck_assert_int_eq(mc_proto_heartbeat_req_encode(&q, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 8);
    ck_assert_int_eq(mc_proto_heartbeat_req_decode(t_buf, len, &dq), 0);
    ck_assert_uint_eq(dq.node, 9);
    ck_assert_uint_eq(dq.flags, MC_PROTO_HEARTBEAT_F_LEAVE);
    q.flags = MC_PROTO_HEARTBEAT_F_CARRYING;
    ck_assert_int_eq(mc_proto_heartbeat_req_encode(&q, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(mc_proto_heartbeat_req_decode(t_buf, len, &dq), 0);
    ck_assert_uint_eq(dq.flags, MC_PROTO_HEARTBEAT_F_CARRYING);
    ck_assert_int_eq(mc_proto_status_rep_encode(&p, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 4);
    ck_assert_mem_eq(t_buf, "\x15\xfc\xff\xff", 4); /* -1003, little-endian two's complement */
    ck_assert_int_eq(mc_proto_status_rep_decode(t_buf, len, &dp), 0);
    ck_assert_int_eq(dp.status, MC_ERR_NOT_FOUND);
}
END_TEST

START_TEST(test_proto_put_start_round_trip)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    size_t len;

    m->put_start_req = (struct mc_proto_put_start_req){5, 2};
    m->put_reqs[0] = (struct mc_master_put_req){
        "k0", 2, 100, 164, 2, MC_MASTER_PUT_UPSERT, 0, 5, MC_MASTER_NODE_NONE};
    m->put_reqs[1] =
        (struct mc_master_put_req){"key-1", 5, 1, 0, 0, MC_MASTER_PUT_FLAGS_ALL, 60000, 5, 3};
    ck_assert_int_eq(t_encode(MC_WIRE_PUT_START_BATCH, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_PUT_START_BATCH, t_buf, len, 2, d), 0);
    ck_assert_uint_eq(d->put_start_req.writer, 5);
    ck_assert_uint_eq(d->put_start_req.n, 2);
    for (int i = 0; i < 2; i++) {
        const struct mc_master_put_req *a = &m->put_reqs[i], *b = &d->put_reqs[i];

        ck_assert_uint_eq(a->key_len, b->key_len);
        ck_assert_mem_eq(a->key, b->key, a->key_len);
        ck_assert(t_inside(b->key, t_buf, len));
        ck_assert_uint_eq(a->size, b->size);
        ck_assert_uint_eq(a->alloc_len, b->alloc_len);
        ck_assert_uint_eq(a->replicas, b->replicas);
        ck_assert_uint_eq(a->flags, b->flags);
        ck_assert_uint_eq(a->ttl_ms, b->ttl_ms);
        ck_assert_uint_eq(b->writer, 5);
        ck_assert_uint_eq(a->preferred, b->preferred);
    }
    /* a capacity below the count is refused */
    ck_assert_int_eq(t_decode(MC_WIRE_PUT_START_BATCH, t_buf, len, 1, d), MC_ERR_PROTO);

    m->batch_rep = (struct mc_proto_batch_rep){0, 0, 3};
    m->results[0] = 0;
    m->grants[0].version = 11;
    m->grants[0].nrep = 2;
    m->grants[0].rep[0] =
        (struct mc_master_replica){1, 2, 3, MC_SEG_DRAM, 4096, 0x10001000, 128};
    m->grants[0].rep[1] = (struct mc_master_replica){7, 8, 9, MC_SEG_DISK, 0, 0, 64};
    m->results[1] = MC_ERR_NO_SPACE;
    m->results[2] = MC_ERR_EXISTS;
    ck_assert_int_eq(t_encode(MC_WIRE_PUT_START_BATCH_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_PUT_START_BATCH_REPLY, t_buf, len, 3, d), 0);
    ck_assert_int_eq(d->batch_rep.status, 0);
    ck_assert_uint_eq(d->batch_rep.n, 3);
    ck_assert_int_eq(d->results[0], 0);
    ck_assert_int_eq(d->results[1], MC_ERR_NO_SPACE);
    ck_assert_int_eq(d->results[2], MC_ERR_EXISTS);
    ck_assert_uint_eq(d->grants[0].version, 11);
    ck_assert_uint_eq(d->grants[0].nrep, 2);
    ck_assert_mem_eq(d->grants[0].rep, m->grants[0].rep, 2 * sizeof(struct mc_master_replica));
    ck_assert_uint_eq(d->grants[1].nrep, 0);

    /* "no room yet" (offloads under way) is an item status of this reply alone: it passes
     * here, and a results reply (PUT_END's) refuses it as any unknown status */
    m->results[2] = MC_PROTO_NO_SPACE_YET;
    ck_assert_int_eq(t_encode(MC_WIRE_PUT_START_BATCH_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_PUT_START_BATCH_REPLY, t_buf, len, 3, d), 0);
    ck_assert_int_eq(d->results[2], MC_PROTO_NO_SPACE_YET);
    ck_assert_uint_eq(d->grants[2].nrep, 0);
    ck_assert_int_eq(t_encode(MC_WIRE_PUT_END_BATCH_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    /* the decoder: any other unknown code in its place is refused (item 2's status is
     * the reply's last 4 bytes) */
    ck_assert_int_eq(t_encode(MC_WIRE_PUT_START_BATCH_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    {
        int32_t bad = MC_PROTO_NO_SPACE_YET - 1;

        memcpy(t_buf + len - 4, &bad, 4); /* little-endian host, as the wire */
    }
    ck_assert_int_eq(t_decode(MC_WIRE_PUT_START_BATCH_REPLY, t_buf, len, 3, d), MC_ERR_PROTO);
    m->results[2] = MC_PROTO_NO_SPACE_YET - 1; /* and the encoder */
    ck_assert_int_eq(t_encode(MC_WIRE_PUT_START_BATCH_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);

    /* a failed call carries no items */
    m->batch_rep = (struct mc_proto_batch_rep){MC_ERR_UNAVAILABLE, 0, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_PUT_START_BATCH_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 4);
    ck_assert_int_eq(t_decode(MC_WIRE_PUT_START_BATCH_REPLY, t_buf, len, 3, d), 0);
    ck_assert_int_eq(d->batch_rep.status, MC_ERR_UNAVAILABLE);
    ck_assert_uint_eq(d->batch_rep.n, 0);
    free(m);
    free(d);
}
END_TEST

START_TEST(test_proto_put_end_revoke_round_trip)
{
    static const unsigned int types[] = {MC_WIRE_PUT_END_BATCH, MC_WIRE_PUT_REVOKE_BATCH};
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    size_t len;

    for (int t = 0; t < 2; t++) {
        m->ref_req = (struct mc_proto_ref_req){4, 2};
        m->refs[0] = (struct mc_master_ref){"a", 1, 17, 4, 0};
        m->refs[1] = (struct mc_master_ref){"bb", 2, UINT64_MAX, 4, 0};
        ck_assert_int_eq(t_encode(types[t], m, t_buf, sizeof(t_buf), &len), 0);
        ck_assert_uint_eq(len, 8 + (4 + 1 + 8) + (4 + 2 + 8));
        ck_assert_int_eq(t_decode(types[t], t_buf, len, 2, d), 0);
        ck_assert_uint_eq(d->ref_req.node, 4);
        ck_assert_uint_eq(d->refs[1].version, UINT64_MAX);
        ck_assert_uint_eq(d->refs[1].node, 4);
        ck_assert_mem_eq(d->refs[1].key, "bb", 2);

        m->batch_rep = (struct mc_proto_batch_rep){0, 0, 2};
        m->results[0] = 0;
        m->results[1] = MC_ERR_CANCELED;
        ck_assert_int_eq(t_encode(types[t] + 1, m, t_buf, sizeof(t_buf), &len), 0);
        ck_assert_int_eq(t_decode(types[t] + 1, t_buf, len, 2, d), 0);
        ck_assert_int_eq(d->results[1], MC_ERR_CANCELED);
        ck_assert_uint_eq(d->batch_rep.n, 2);
    }
    free(m);
    free(d);
}
END_TEST

START_TEST(test_proto_get_round_trip)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    struct mc_master_get_result *g = &m->gets[1];
    size_t len;

    m->keys_req = (struct mc_proto_keys_req){2, 0, 2};
    m->keys[0] = (struct mc_proto_key){"missing", 7};
    m->keys[1] = (struct mc_proto_key){"hit", 3};
    ck_assert_int_eq(t_encode(MC_WIRE_GET_BATCH, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_GET_BATCH, t_buf, len, 2, d), 0);
    ck_assert_uint_eq(d->keys_req.node, 2);
    ck_assert_uint_eq(d->keys[0].key_len, 7);
    ck_assert_mem_eq(d->keys[1].key, "hit", 3);
    ck_assert(t_inside(d->keys[1].key, t_buf, len));

    m->batch_rep = (struct mc_proto_batch_rep){0, 0, 2};
    m->results[0] = MC_ERR_NOT_FOUND;
    m->results[1] = 0;
    g->version = 3;
    g->size = 1 << 20;
    g->flags = MC_MASTER_PUT_PIN_SOFT;
    g->nrep = 1;
    g->rep[0] = (struct mc_master_replica){5, 6, 7, MC_SEG_DRAM, 64, 0x1040, (1 << 20) + 64};
    g->lease = (struct mc_master_lease){3, 99, 123456};
    ck_assert_int_eq(t_encode(MC_WIRE_GET_BATCH_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    {
        /* "no room yet" is PUT_START's alone: in a GET reply (item 0's status at byte 8)
         * it is refused like any unknown code, never handed to a client */
        uint8_t saved[4];
        int32_t yet = MC_PROTO_NO_SPACE_YET;

        memcpy(saved, t_buf + 8, 4);
        memcpy(t_buf + 8, &yet, 4);
        ck_assert_int_eq(t_decode(MC_WIRE_GET_BATCH_REPLY, t_buf, len, 2, d), MC_ERR_PROTO);
        memcpy(t_buf + 8, saved, 4);
    }
    ck_assert_int_eq(t_decode(MC_WIRE_GET_BATCH_REPLY, t_buf, len, 2, d), 0);
    ck_assert_int_eq(d->results[0], MC_ERR_NOT_FOUND);
    ck_assert_int_eq(d->results[1], 0);
    ck_assert_uint_eq(d->gets[1].version, 3);
    ck_assert_uint_eq(d->gets[1].size, 1 << 20);
    ck_assert_uint_eq(d->gets[1].flags, MC_MASTER_PUT_PIN_SOFT);
    ck_assert_uint_eq(d->gets[1].nrep, 1);
    ck_assert_mem_eq(&d->gets[1].rep[0], &g->rep[0], sizeof(g->rep[0]));
    ck_assert_uint_eq(d->gets[1].lease.version, 3);
    ck_assert_uint_eq(d->gets[1].lease.epoch, 99);
    ck_assert_uint_eq(d->gets[1].lease.expires_ms, 123456);
    free(m);
    free(d);
}
END_TEST

START_TEST(test_proto_lease_release_round_trip)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    size_t len;

    m->ref_req = (struct mc_proto_ref_req){8, 1};
    m->refs[0] = (struct mc_master_ref){"leased", 6, 12, 8, 77};
    ck_assert_int_eq(t_encode(MC_WIRE_LEASE_RELEASE_BATCH, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_LEASE_RELEASE_BATCH, t_buf, len, 1, d), 0);
    ck_assert_uint_eq(d->refs[0].version, 12);
    ck_assert_uint_eq(d->refs[0].epoch, 77);
    ck_assert_mem_eq(d->refs[0].key, "leased", 6);

    m->lease_rep = (struct mc_proto_lease_release_rep){0, 1};
    ck_assert_int_eq(t_encode(MC_WIRE_LEASE_RELEASE_BATCH_REPLY, m, t_buf, sizeof(t_buf), &len),
                     0);
    ck_assert_int_eq(t_decode(MC_WIRE_LEASE_RELEASE_BATCH_REPLY, t_buf, len, 1, d), 0);
    ck_assert_uint_eq(d->lease_rep.released, 1);
    free(m);
    free(d);
}
END_TEST

START_TEST(test_proto_exist_round_trip)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    struct mc_proto_batch_rep rep;
    int res[3];
    size_t len;

    m->keys_req =
        (struct mc_proto_keys_req){1, MC_PROTO_EXIST_F_PREFIX | MC_PROTO_EXIST_F_STAT, 3};
    m->keys[0] = (struct mc_proto_key){"p0", 2};
    m->keys[1] = (struct mc_proto_key){"p1", 2};
    m->keys[2] = (struct mc_proto_key){"p2", 2};
    ck_assert_int_eq(t_encode(MC_WIRE_EXIST_BATCH, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_EXIST_BATCH, t_buf, len, 3, d), 0);
    ck_assert_uint_eq(d->keys_req.flags, MC_PROTO_EXIST_F_PREFIX | MC_PROTO_EXIST_F_STAT);
    ck_assert_uint_eq(d->keys_req.n, 3);

    m->batch_rep = (struct mc_proto_batch_rep){0, MC_PROTO_EXIST_F_STAT, 3};
    m->results[0] = 1;
    m->results[1] = 0;
    m->results[2] = MC_ERR_INVALID;
    m->stats[0] = (struct mc_master_stat){4096, 2, 2, MC_MASTER_PUT_PIN_HARD, 5000, 1};
    ck_assert_int_eq(t_encode(MC_WIRE_EXIST_BATCH_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 12 + 4 + 36 + 4 + 4); /* a stat record: 36 bytes */
    ck_assert_int_eq(t_decode(MC_WIRE_EXIST_BATCH_REPLY, t_buf, len, 3, d), 0);
    ck_assert_uint_eq(d->batch_rep.flags, MC_PROTO_EXIST_F_STAT);
    ck_assert_int_eq(d->results[0], 1);
    ck_assert_int_eq(d->results[1], 0);
    ck_assert_int_eq(d->results[2], MC_ERR_INVALID);
    ck_assert_mem_eq(&d->stats[0], &m->stats[0], sizeof(m->stats[0]));
    ck_assert_uint_eq(d->stats[1].size, 0);
    /* stats may be NULL when decoding: records are checked and skipped */
    ck_assert_int_eq(mc_proto_exist_rep_decode(t_buf, len, 3, &rep, res, NULL), 0);
    ck_assert_int_eq(res[2], MC_ERR_INVALID);

    m->batch_rep.flags = 0; /* no stat records: 1 status per key */
    ck_assert_int_eq(t_encode(MC_WIRE_EXIST_BATCH_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 12 + 3 * 4);
    ck_assert_int_eq(t_decode(MC_WIRE_EXIST_BATCH_REPLY, t_buf, len, 3, d), 0);
    ck_assert_int_eq(d->results[0], 1);
    free(m);
    free(d);
}
END_TEST

START_TEST(test_proto_remove_round_trip)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    struct mc_proto_batch_rep rep;
    int res[2];
    size_t len;

    m->keys_req = (struct mc_proto_keys_req){1, MC_PROTO_REMOVE_F_PREFIX, 2};
    m->keys[0] = (struct mc_proto_key){"model/a/", 8};
    m->keys[1] = (struct mc_proto_key){"model/b/", 8};
    ck_assert_int_eq(t_encode(MC_WIRE_REMOVE_BATCH, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_REMOVE_BATCH, t_buf, len, 2, d), 0);
    ck_assert_uint_eq(d->keys_req.flags, MC_PROTO_REMOVE_F_PREFIX);
    ck_assert_mem_eq(d->keys[1].key, "model/b/", 8);

    m->batch_rep = (struct mc_proto_batch_rep){0, 0, 2};
    m->results[0] = 0;
    m->counts[0] = 1234;
    m->results[1] = MC_ERR_NOT_FOUND;
    m->counts[1] = 0;
    ck_assert_int_eq(t_encode(MC_WIRE_REMOVE_BATCH_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_REMOVE_BATCH_REPLY, t_buf, len, 2, d), 0);
    ck_assert_uint_eq(d->counts[0], 1234);
    ck_assert_int_eq(d->results[1], MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_proto_remove_rep_decode(t_buf, len, 2, &rep, res, NULL), 0);
    free(m);
    free(d);
}
END_TEST

START_TEST(test_proto_fence_round_trip)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    size_t len;

    m->fence_req.n = 2;
    m->fences[0] = (struct mc_proto_fence_item){1, 2, 3};
    m->fences[1] = (struct mc_proto_fence_item){UINT32_MAX, 0, UINT64_MAX};
    ck_assert_int_eq(t_encode(MC_WIRE_FENCE, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 4 + 2 * 16);
    ck_assert_int_eq(t_decode(MC_WIRE_FENCE, t_buf, len, 2, d), 0);
    ck_assert_mem_eq(d->fences, m->fences, 2 * sizeof(m->fences[0]));

    m->batch_rep = (struct mc_proto_batch_rep){0, 0, 2};
    m->results[0] = 0;
    m->results[1] = MC_ERR_BUSY;
    ck_assert_int_eq(t_encode(MC_WIRE_FENCE_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_FENCE_REPLY, t_buf, len, 2, d), 0);
    ck_assert_int_eq(d->results[1], MC_ERR_BUSY);
    free(m);
    free(d);
}
END_TEST

START_TEST(test_proto_cluster_info_round_trip)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    struct mc_proto_info_rep *r = &m->info_rep;
    size_t len;

    m->info_req = (struct mc_proto_info_req){MC_PROTO_INFO_F_STATS | MC_PROTO_INFO_F_SEGMENTS,
                                             10, 64, 0, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_CLUSTER_INFO, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_CLUSTER_INFO, t_buf, len, 0, d), 0);
    ck_assert_mem_eq(&d->info_req, &m->info_req, sizeof(m->info_req));

    r->status = 0;
    r->flags = MC_PROTO_INFO_F_STATS | MC_PROTO_INFO_F_SEGMENTS;
    r->stats.objects = 1;
    r->stats.meta_bytes = 24;     /* the last field */
    r->stats.lease_expiries = 15; /* one in the middle */
    r->nseg = 2;
    r->next_cursor = 12;
    m->segs[0] =
        (struct mc_proto_seg_entry){10,
                                    {1, MC_SEG_DRAM, 0x1000, 1 << 20, 4096, 4096, 0, 3, 0, "t1", 123, false},
                                    {(const uint8_t *)"worker-address", 14},
                                    {NULL, 0}};
    m->segs[1] = (struct mc_proto_seg_entry){
        11,
        {2, MC_SEG_GPU, 0x2000, 1 << 20, 1 << 20, 1 << 19, 1 << 10, 0, 5, "", 0, false},
        {(const uint8_t *)"w2", 2},
        {(const uint8_t *)"rk", 2}};
    ck_assert_int_eq(t_encode(MC_WIRE_CLUSTER_INFO_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, len, 2, d), 0);
    ck_assert_mem_eq(&d->info_rep.stats, &r->stats, sizeof(r->stats));
    ck_assert_uint_eq(d->info_rep.nseg, 2);
    ck_assert_uint_eq(d->info_rep.next_cursor, 12);
    ck_assert_uint_eq(d->segs[0].seg, 10);
    ck_assert_mem_eq(&d->segs[1].info, &m->segs[1].info, sizeof(m->segs[1].info));
    ck_assert_mem_eq(d->segs[0].worker_addr.p, "worker-address", 14);
    ck_assert(t_inside(d->segs[0].worker_addr.p, t_buf, len));
    ck_assert_uint_eq(d->segs[0].rkey.len, 0);
    ck_assert_mem_eq(d->segs[1].rkey.p, "rk", 2);
    /* a page larger than the caller's array is refused */
    ck_assert_int_eq(t_decode(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, len, 1, d), MC_ERR_PROTO);
    free(m);
    free(d);
}
END_TEST

START_TEST(test_proto_cluster_info_nodes_round_trip)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    struct mc_proto_info_rep *r = &m->info_rep;
    struct mc_proto_info_rep dr;
    struct mc_proto_node_entry nodes[2];
    size_t len;

    m->info_req = (struct mc_proto_info_req){MC_PROTO_INFO_F_NODES, 0, 0, 3, 100};
    ck_assert_int_eq(t_encode(MC_WIRE_CLUSTER_INFO, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 20);
    ck_assert_int_eq(t_decode(MC_WIRE_CLUSTER_INFO, t_buf, len, 0, d), 0);
    ck_assert_mem_eq(&d->info_req, &m->info_req, sizeof(m->info_req));

    /* all three sections: stats, then segments, then nodes */
    memset(r, 0, sizeof(*r));
    r->flags = MC_PROTO_INFO_F_KNOWN;
    r->stats.nodes_alive = 1;
    r->nseg = 1;
    r->next_cursor = 0;
    m->segs[0] = (struct mc_proto_seg_entry){4,
                                             {1, MC_SEG_DRAM, 0, 4096, 4096, 4096, 0, 0, 0, "", 0, false},
                                             {(const uint8_t *)"w", 1},
                                             {NULL, 0}};
    r->nnode = 2;
    r->next_node_cursor = 9;
    m->nodes[0] = (struct mc_proto_node_entry){
        1, 1, 1, 20, {(const uint8_t *)"node-a", 6}, {(const uint8_t *)"rack1", 5}, 1, 3, 4096};
    m->nodes[1] = (struct mc_proto_node_entry){0x10002,
                                               0,
                                               0,
                                               UINT64_MAX,
                                               {(const uint8_t *)"client-b", 8},
                                               {(const uint8_t *)"client-b", 8},
                                               0,
                                               0,
                                               0};
    ck_assert_int_eq(t_encode(MC_WIRE_CLUSTER_INFO_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, len, 2, d), 0);
    ck_assert_uint_eq(d->info_rep.flags, MC_PROTO_INFO_F_KNOWN);
    ck_assert_uint_eq(d->info_rep.stats.nodes_alive, 1);
    ck_assert_uint_eq(d->info_rep.nseg, 1);
    ck_assert_uint_eq(d->segs[0].seg, 4);
    ck_assert_uint_eq(d->info_rep.nnode, 2);
    ck_assert_uint_eq(d->info_rep.next_node_cursor, 9);
    ck_assert_uint_eq(d->nodes[0].id, 1);
    ck_assert_uint_eq(d->nodes[0].alive, 1);
    ck_assert_uint_eq(d->nodes[0].segments, 1);
    ck_assert_uint_eq(d->nodes[0].idle_ms, 20);
    ck_assert_uint_eq(d->nodes[0].name.len, 6);
    ck_assert_mem_eq(d->nodes[0].name.p, "node-a", 6);
    ck_assert_mem_eq(d->nodes[0].domain.p, "rack1", 5);
    ck_assert_uint_eq(d->nodes[0].drain, MC_MASTER_DRAIN_DRAINING);
    ck_assert_uint_eq(d->nodes[0].drain_blocks, 3);
    ck_assert_uint_eq(d->nodes[0].drain_bytes, 4096);
    ck_assert(t_inside(d->nodes[0].name.p, t_buf, len));
    ck_assert_uint_eq(d->nodes[1].id, 0x10002);
    ck_assert_uint_eq(d->nodes[1].alive, 0);
    ck_assert_uint_eq(d->nodes[1].idle_ms, UINT64_MAX);
    ck_assert_mem_eq(d->nodes[1].domain.p, "client-b", 8);
    /* a node page larger than the caller's array is refused */
    ck_assert_int_eq(mc_proto_info_rep_decode(t_buf, len, 2, &dr, d->segs, 1, nodes),
                     MC_ERR_PROTO);
    ck_assert_int_eq(mc_proto_info_rep_decode(t_buf, len, 2, &dr, d->segs, 2, nodes), 0);

    /* nodes alone: no stats, no segment section, and no segment array needed */
    r->flags = MC_PROTO_INFO_F_NODES;
    r->nseg = 0;
    r->nnode = 1;
    r->next_node_cursor = 0;
    ck_assert_int_eq(mc_proto_info_rep_encode(r, NULL, m->nodes, t_buf, sizeof(t_buf), &len),
                     0);
    ck_assert_uint_eq(len, 4 + 4 + 8 + (20 + 4 + 6 + 4 + 5 + 20));
    ck_assert_int_eq(mc_proto_info_rep_decode(t_buf, len, 0, &dr, NULL, 2, nodes), 0);
    ck_assert_uint_eq(dr.nnode, 1);
    ck_assert_uint_eq(dr.nseg, 0);
    ck_assert_mem_eq(nodes[0].name.p, "node-a", 6);
    free(m);
    free(d);
}
END_TEST

START_TEST(test_proto_list_round_trip)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    size_t len;

    m->list_req = (struct mc_proto_list_req){
        7, 2, UINT64_C(0x123456789a), {(const uint8_t *)"model/", 6}};
    ck_assert_int_eq(t_encode(MC_WIRE_LIST, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 4 + 4 + 8 + 4 + 6);
    ck_assert_int_eq(t_decode(MC_WIRE_LIST, t_buf, len, 0, d), 0);
    ck_assert_uint_eq(d->list_req.node, 7);
    ck_assert_uint_eq(d->list_req.max, 2);
    ck_assert_uint_eq(d->list_req.cursor, UINT64_C(0x123456789a));
    ck_assert_uint_eq(d->list_req.prefix.len, 6);
    ck_assert_mem_eq(d->list_req.prefix.p, "model/", 6);
    ck_assert(t_inside(d->list_req.prefix.p, t_buf, len));
    m->list_req.prefix = (struct mc_proto_bytes){NULL, 0}; /* every key */
    ck_assert_int_eq(t_encode(MC_WIRE_LIST, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_LIST, t_buf, len, 0, d), 0);
    ck_assert_uint_eq(d->list_req.prefix.len, 0);

    m->list_rep = (struct mc_proto_list_rep){0, 3, 42};
    m->keys[0] = (struct mc_proto_key){"model/a", 7};
    m->keys[1] = (struct mc_proto_key){"model/b", 7};
    m->keys[2] = (struct mc_proto_key){"model/ccc", 9};
    ck_assert_int_eq(t_encode(MC_WIRE_LIST_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 4 + 4 + 8 + (4 + 7) * 2 + 4 + 9);
    ck_assert_int_eq(t_decode(MC_WIRE_LIST_REPLY, t_buf, len, 3, d), 0);
    ck_assert_int_eq(d->list_rep.status, 0);
    ck_assert_uint_eq(d->list_rep.n, 3);
    ck_assert_uint_eq(d->list_rep.next_cursor, 42);
    ck_assert_uint_eq(d->keys[2].key_len, 9);
    ck_assert_mem_eq(d->keys[2].key, "model/ccc", 9);
    ck_assert(t_inside(d->keys[0].key, t_buf, len));
    /* more keys than the caller's array */
    ck_assert_int_eq(t_decode(MC_WIRE_LIST_REPLY, t_buf, len, 2, d), MC_ERR_PROTO);

    /* the last page: no keys, cursor 0; a failed call: the status alone */
    m->list_rep = (struct mc_proto_list_rep){0, 0, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_LIST_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 16);
    m->list_rep = (struct mc_proto_list_rep){MC_ERR_DENIED, 0, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_LIST_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 4);
    ck_assert_int_eq(t_decode(MC_WIRE_LIST_REPLY, t_buf, len, 3, d), 0);
    ck_assert_int_eq(d->list_rep.status, MC_ERR_DENIED);
    ck_assert_uint_eq(d->list_rep.n, 0);
    free(m);
    free(d);
}
END_TEST

/* --- every message: truncation, trailing bytes, random round trips ------------------------ */

START_TEST(test_proto_truncated_every_offset)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    uint64_t seed = 0x1234567u;

    for (size_t ti = 0; ti < T_NTYPES; ti++) {
        unsigned int type = t_type_at(ti);

        for (int round = 0; round < 4; round++) {
            size_t len;

            t_random(type, &seed, 6, m);
            ck_assert_int_eq(t_encode(type, m, t_buf, sizeof(t_buf), &len), 0);
            T_ACCEPT(type, t_buf, len, d);
            for (size_t k = 0; k < len; k++) {
                static uint8_t again[sizeof(t_buf)];
                size_t alen;
                int rc = t_decode_exact(type, t_buf, k, MC_PROTO_BATCH_MAX, d);

                if (rc == MC_ERR_PROTO)
                    continue;
                /* a prefix may decode only as a message of its own, the one it encodes: a
                 * reply whose optional tail is left out when 0 (HEARTBEAT_REPLY's drain) */
                if (rc != 0 || t_encode(type, d, again, sizeof(again), &alen) != 0 ||
                    alen != k || memcmp(again, t_buf, k) != 0)
                    ck_abort_msg("type %u: a prefix of %zu of %zu bytes decoded", type, k, len);
            }
        }
    }
    free(m);
    free(d);
}
END_TEST

START_TEST(test_proto_trailing_byte_refused)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    uint64_t seed = 77;

    for (size_t ti = 0; ti < T_NTYPES; ti++) {
        unsigned int type = t_type_at(ti);

        for (int round = 0; round < 8; round++) {
            size_t len;

            t_random(type, &seed, 4, m);
            ck_assert_int_eq(t_encode(type, m, t_buf, sizeof(t_buf), &len), 0);
            t_buf[len] = 0;
            T_REFUSE(type, t_buf, len + 1, d);
        }
    }
    free(m);
    free(d);
}
END_TEST

START_TEST(test_proto_random_round_trip)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    uint64_t seed = 0x9e3779b97f4a7c15u;

    for (int i = 0; i < 3000; i++) {
        unsigned int type = t_type_at(t_below(&seed, T_NTYPES));
        size_t nmax = t_below(&seed, 16) == 0 ? 200 : 8;
        size_t len, len2;

        t_random(type, &seed, nmax, m);
        ck_assert_int_eq(t_encode(type, m, t_buf, sizeof(t_buf), &len), 0);
        ck_assert_int_eq(t_decode(type, t_buf, len, MC_PROTO_BATCH_MAX, d), 0);
        /* what decoded re-encodes to the same bytes: every field was carried */
        ck_assert_int_eq(t_encode(type, d, t_buf2, sizeof(t_buf2), &len2), 0);
        ck_assert_uint_eq(len, len2);
        if (memcmp(t_buf, t_buf2, len) != 0)
            ck_abort_msg("type %u: re-encoding differs (iteration %d)", type, i);
        /* an encoder given one byte too few says so */
        if (len > 0)
            ck_assert_int_eq(t_encode(type, m, t_buf2, len - 1, &len2), MC_ERR_TOO_LARGE);
    }
    free(m);
    free(d);
}
END_TEST

/* --- bounds ------------------------------------------------------------------------------- */

static size_t t_raw_keys(unsigned int type, uint32_t flags, uint32_t n, size_t key_len)
{
    t_raw();
    if (type == MC_WIRE_PUT_END_BATCH || type == MC_WIRE_LEASE_RELEASE_BATCH ||
        type == MC_WIRE_PUT_START_BATCH) {
        mc_wire_put_u32(&t_w, 1);
    } else {
        mc_wire_put_u32(&t_w, 1);
        mc_wire_put_u32(&t_w, flags);
    }
    mc_wire_put_u32(&t_w, n);
    for (uint32_t i = 0; i < n && i <= MC_PROTO_BATCH_MAX; i++) { /* a lying count: fewer */
        t_blob(key_len);
        if (type == MC_WIRE_PUT_START_BATCH) {
            mc_wire_put_u64(&t_w, 10); /* size */
            mc_wire_put_u64(&t_w, 0);  /* alloc_len */
            mc_wire_put_u32(&t_w, 1);  /* replicas */
            mc_wire_put_u32(&t_w, flags);
            mc_wire_put_u64(&t_w, 0); /* ttl */
            mc_wire_put_u32(&t_w, MC_MASTER_NODE_NONE);
        } else if (type == MC_WIRE_PUT_END_BATCH) {
            mc_wire_put_u64(&t_w, 1);
        } else if (type == MC_WIRE_LEASE_RELEASE_BATCH) {
            mc_wire_put_u64(&t_w, 1);
            mc_wire_put_u32(&t_w, 1);
        }
    }
    return t_raw_len();
}

START_TEST(test_proto_count_and_key_bounds)
{
    static const unsigned int types[] = {MC_WIRE_PUT_START_BATCH,     MC_WIRE_PUT_END_BATCH,
                                         MC_WIRE_LEASE_RELEASE_BATCH, MC_WIRE_GET_BATCH,
                                         MC_WIRE_EXIST_BATCH,         MC_WIRE_REMOVE_BATCH};
    struct t_msg *d = t_msg_new();

    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        unsigned int type = types[t];
        size_t len;

        len = t_raw_keys(type, 0, MC_PROTO_BATCH_MAX, MC_PROTO_KEY_MAX); /* the largest */
        T_ACCEPT(type, t_buf, len, d);
        ck_assert_uint_le(len, MC_PROTO_PAYLOAD_MAX);
        len = t_raw_keys(type, 0, MC_PROTO_BATCH_MAX + 1, 1);
        T_REFUSE(type, t_buf, len, d);
        len = t_raw_keys(type, 0, 3, 1);
        ck_assert_int_eq(t_decode_exact(type, t_buf, len, 2, d), MC_ERR_PROTO); /* > cap */
        ck_assert_int_eq(t_decode_exact(type, t_buf, len, 3, d), 0);
        len = t_raw_keys(type, 0, 0, 1); /* an empty batch is fine */
        T_ACCEPT(type, t_buf, len, d);
        len = t_raw_keys(type, 0, 2, 0);
        T_REFUSE(type, t_buf, len, d);
        len = t_raw_keys(type, 0, 2, MC_PROTO_KEY_MAX + 1);
        T_REFUSE(type, t_buf, len, d);
        len = t_raw_keys(type, 0, UINT32_MAX, 1);
        T_REFUSE(type, t_buf, len, d);
    }
    free(d);
}
END_TEST

/* bad_byte < 0: none */
static size_t t_raw_hello(size_t token, size_t name, size_t domain, int bad_byte)
{
    t_raw();
    t_blob(token);
    if (bad_byte >= 0)
        t_fill[name / 2] = (uint8_t)bad_byte;
    t_blob(name);
    t_fill[name / 2] = 'k';
    t_blob(domain);
    return t_raw_len();
}

START_TEST(test_proto_name_and_token_bounds)
{
    struct t_msg *d = t_msg_new();

    T_ACCEPT(MC_WIRE_HELLO, t_buf, t_raw_hello(MC_PROTO_TOKEN_MAX, 63, 63, -1), d);
    T_ACCEPT(MC_WIRE_HELLO, t_buf, t_raw_hello(0, 1, 0, -1), d);
    T_REFUSE(MC_WIRE_HELLO, t_buf, t_raw_hello(MC_PROTO_TOKEN_MAX + 1, 8, 0, -1), d);
    T_REFUSE(MC_WIRE_HELLO, t_buf, t_raw_hello(0, 64, 0, -1), d);
    T_REFUSE(MC_WIRE_HELLO, t_buf, t_raw_hello(0, 0, 0, -1), d);
    T_REFUSE(MC_WIRE_HELLO, t_buf, t_raw_hello(0, 8, 64, -1), d);
    T_REFUSE(MC_WIRE_HELLO, t_buf, t_raw_hello(0, 8, 0, ' '), d);
    T_REFUSE(MC_WIRE_HELLO, t_buf, t_raw_hello(0, 8, 0, '\0'), d);
    T_REFUSE(MC_WIRE_HELLO, t_buf, t_raw_hello(0, 8, 0, 0x80), d);
    T_REFUSE(MC_WIRE_HELLO, t_buf, t_raw_hello(0, 8, 0, '\n'), d);
    free(d);
}
END_TEST

/* The tenant name the raw MOUNT and segment entries carry: t_tenant_len bytes of t_fill. */
static size_t t_tenant_len;

static uint32_t t_mount_flags; /* what t_raw_mount sends as the flags */

static size_t t_raw_mount(uint32_t node, uint32_t kind, uint64_t base, uint64_t size,
                          size_t addr, size_t rkey)
{
    t_raw();
    mc_wire_put_u32(&t_w, node);
    mc_wire_put_u32(&t_w, kind);
    mc_wire_put_u64(&t_w, base);
    mc_wire_put_u64(&t_w, size);
    t_blob(addr);
    t_blob(rkey);
    t_blob(t_tenant_len);
    mc_wire_put_u64(&t_w, 1u << 20); /* quota */
    mc_wire_put_u32(&t_w, t_mount_flags);
    return t_raw_len();
}

START_TEST(test_proto_mount_bounds)
{
    struct t_msg *d = t_msg_new();

    T_ACCEPT(MC_WIRE_MOUNT, t_buf,
             t_raw_mount(1, MC_SEG_DISK, 0, 1, MC_PROTO_ADDR_MAX, MC_PROTO_RKEY_MAX), d);
    T_ACCEPT(MC_WIRE_MOUNT, t_buf, t_raw_mount(1, MC_SEG_DRAM, UINT64_MAX - 1, 1, 1, 0), d);
    t_tenant_len = MC_TENANT_NAME_MAX; /* the longest tenant name, then one byte more */
    T_ACCEPT(MC_WIRE_MOUNT, t_buf, t_raw_mount(1, MC_SEG_DRAM, 0, 1, 1, 0), d);
    t_tenant_len = MC_TENANT_NAME_MAX + 1;
    T_REFUSE(MC_WIRE_MOUNT, t_buf, t_raw_mount(1, MC_SEG_DRAM, 0, 1, 1, 0), d);
    t_tenant_len = 0;
    T_REFUSE(MC_WIRE_MOUNT, t_buf, t_raw_mount(1, 3, 0, 1, 8, 0), d);
    T_REFUSE(MC_WIRE_MOUNT, t_buf, t_raw_mount(1, UINT32_MAX, 0, 1, 8, 0), d);
    T_REFUSE(MC_WIRE_MOUNT, t_buf, t_raw_mount(MC_MASTER_NODE_NONE, 0, 0, 1, 8, 0), d);
    t_mount_flags = MC_MASTER_SEG_F_RESTORING;
    T_ACCEPT(MC_WIRE_MOUNT, t_buf, t_raw_mount(1, MC_SEG_DRAM, 0, 1, 1, 0), d);
    t_mount_flags = MC_MASTER_SEG_F_ALL + 1; /* an unknown flag */
    T_REFUSE(MC_WIRE_MOUNT, t_buf, t_raw_mount(1, MC_SEG_DRAM, 0, 1, 1, 0), d);
    t_mount_flags = 0;
    T_REFUSE(MC_WIRE_MOUNT, t_buf, t_raw_mount(1, 0, 0, 0, 8, 0), d);
    T_REFUSE(MC_WIRE_MOUNT, t_buf, t_raw_mount(1, 0, UINT64_MAX, 1, 8, 0), d);
    T_REFUSE(MC_WIRE_MOUNT, t_buf, t_raw_mount(1, 0, 0, 1, 0, 0), d);
    T_REFUSE(MC_WIRE_MOUNT, t_buf, t_raw_mount(1, 0, 0, 1, MC_PROTO_ADDR_MAX + 1, 0), d);
    T_REFUSE(MC_WIRE_MOUNT, t_buf, t_raw_mount(1, 0, 0, 1, 8, MC_PROTO_RKEY_MAX + 1), d);
    free(d);
}
END_TEST

static size_t t_raw_u32s(int n, const uint32_t v[])
{
    t_raw();
    for (int i = 0; i < n; i++)
        mc_wire_put_u32(&t_w, v[i]);
    return t_raw_len();
}

static size_t t_raw_put_start_item(uint64_t size, uint64_t alloc_len, uint32_t replicas,
                                   uint32_t flags)
{
    t_raw();
    mc_wire_put_u32(&t_w, 1);
    mc_wire_put_u32(&t_w, 1);
    t_blob(3);
    mc_wire_put_u64(&t_w, size);
    mc_wire_put_u64(&t_w, alloc_len);
    mc_wire_put_u32(&t_w, replicas);
    mc_wire_put_u32(&t_w, flags);
    mc_wire_put_u64(&t_w, 0);
    mc_wire_put_u32(&t_w, 0);
    return t_raw_len();
}

START_TEST(test_proto_enum_and_flag_bounds)
{
    struct t_msg *d = t_msg_new();
    uint32_t v[5];

    /* heartbeat flags */
    v[0] = 1, v[1] = MC_PROTO_HEARTBEAT_F_LEAVE;
    T_ACCEPT(MC_WIRE_HEARTBEAT, t_buf, t_raw_u32s(2, v), d);
    v[1] = MC_PROTO_HEARTBEAT_F_CARRYING;
    T_ACCEPT(MC_WIRE_HEARTBEAT, t_buf, t_raw_u32s(2, v), d);
    v[1] = 4;
    T_REFUSE(MC_WIRE_HEARTBEAT, t_buf, t_raw_u32s(2, v), d);
    v[0] = MC_MASTER_NODE_NONE, v[1] = 0;
    T_REFUSE(MC_WIRE_HEARTBEAT, t_buf, t_raw_u32s(2, v), d);

    /* keys-request flags: GET one bit (pin), EXIST three bits, REMOVE one */
    v[0] = 1, v[1] = MC_PROTO_GET_F_PIN, v[2] = 0;
    T_ACCEPT(MC_WIRE_GET_BATCH, t_buf, t_raw_u32s(3, v), d);
    v[1] = MC_PROTO_GET_F_PIN << 1;
    T_REFUSE(MC_WIRE_GET_BATCH, t_buf, t_raw_u32s(3, v), d);
    v[1] = MC_PROTO_EXIST_F_KNOWN;
    T_ACCEPT(MC_WIRE_EXIST_BATCH, t_buf, t_raw_u32s(3, v), d);
    v[1] = MC_PROTO_EXIST_F_KNOWN + 1;
    T_REFUSE(MC_WIRE_EXIST_BATCH, t_buf, t_raw_u32s(3, v), d);
    v[1] = MC_PROTO_REMOVE_F_PREFIX;
    T_ACCEPT(MC_WIRE_REMOVE_BATCH, t_buf, t_raw_u32s(3, v), d);
    v[1] = 2;
    T_REFUSE(MC_WIRE_REMOVE_BATCH, t_buf, t_raw_u32s(3, v), d);

    /* cluster info request: flags, segment cursor and page, node cursor and page */
    v[0] = MC_PROTO_INFO_F_SEGMENTS, v[1] = 5, v[2] = MC_PROTO_SEG_PAGE_MAX, v[3] = 0, v[4] = 0;
    T_ACCEPT(MC_WIRE_CLUSTER_INFO, t_buf, t_raw_u32s(5, v), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO, t_buf, t_raw_u32s(3, v), d); /* the old, shorter form */
    v[2] = MC_PROTO_SEG_PAGE_MAX + 1;
    T_REFUSE(MC_WIRE_CLUSTER_INFO, t_buf, t_raw_u32s(5, v), d);
    v[2] = 0;
    T_REFUSE(MC_WIRE_CLUSTER_INFO, t_buf, t_raw_u32s(5, v), d);
    v[0] = MC_PROTO_INFO_F_STATS, v[1] = 0, v[2] = 0;
    T_ACCEPT(MC_WIRE_CLUSTER_INFO, t_buf, t_raw_u32s(5, v), d);
    v[2] = 1; /* a page size without F_SEGMENTS */
    T_REFUSE(MC_WIRE_CLUSTER_INFO, t_buf, t_raw_u32s(5, v), d);
    v[0] = 8, v[2] = 0; /* an unknown section */
    T_REFUSE(MC_WIRE_CLUSTER_INFO, t_buf, t_raw_u32s(5, v), d);
    v[0] = MC_PROTO_INFO_F_NODES, v[3] = 7, v[4] = MC_PROTO_NODE_PAGE_MAX;
    T_ACCEPT(MC_WIRE_CLUSTER_INFO, t_buf, t_raw_u32s(5, v), d);
    v[4] = MC_PROTO_NODE_PAGE_MAX + 1;
    T_REFUSE(MC_WIRE_CLUSTER_INFO, t_buf, t_raw_u32s(5, v), d);
    v[4] = 0;
    T_REFUSE(MC_WIRE_CLUSTER_INFO, t_buf, t_raw_u32s(5, v), d);
    v[0] = MC_PROTO_INFO_F_STATS, v[3] = 0, v[4] = 1; /* a node page without F_NODES */
    T_REFUSE(MC_WIRE_CLUSTER_INFO, t_buf, t_raw_u32s(5, v), d);
    v[3] = 1, v[4] = 0; /* a node cursor without F_NODES */
    T_REFUSE(MC_WIRE_CLUSTER_INFO, t_buf, t_raw_u32s(5, v), d);

    /* put items: size, alloc_len, replicas, flags */
    T_ACCEPT(MC_WIRE_PUT_START_BATCH, t_buf,
             t_raw_put_start_item(10, 10, MC_MASTER_MAX_REPLICAS, MC_MASTER_PUT_FLAGS_ALL), d);
    T_REFUSE(MC_WIRE_PUT_START_BATCH, t_buf, t_raw_put_start_item(0, 0, 1, 0), d);
    T_REFUSE(MC_WIRE_PUT_START_BATCH, t_buf, t_raw_put_start_item(10, 9, 1, 0), d);
    T_REFUSE(MC_WIRE_PUT_START_BATCH, t_buf,
             t_raw_put_start_item(10, 0, MC_MASTER_MAX_REPLICAS + 1, 0), d);
    T_REFUSE(MC_WIRE_PUT_START_BATCH, t_buf,
             t_raw_put_start_item(10, 0, 1, MC_MASTER_PUT_FLAGS_ALL + 1), d);
    free(d);
}
END_TEST

/* A GET_BATCH_REPLY (or PUT_START_BATCH_REPLY) of one item with these fields. */
static size_t t_raw_grant(bool get, uint32_t status, uint32_t flags, uint32_t nrep,
                          uint32_t kind, uint64_t rep_len)
{
    t_raw();
    mc_wire_put_u32(&t_w, 0);
    mc_wire_put_u32(&t_w, 1);
    mc_wire_put_u32(&t_w, status);
    if (status != 0)
        return t_raw_len();
    mc_wire_put_u64(&t_w, 1); /* version */
    if (get) {
        mc_wire_put_u64(&t_w, 100); /* size */
        mc_wire_put_u32(&t_w, flags);
    }
    mc_wire_put_u32(&t_w, nrep);
    for (uint32_t k = 0; k < nrep && k < 16; k++) {
        mc_wire_put_u32(&t_w, 1);
        mc_wire_put_u32(&t_w, 2);
        mc_wire_put_u32(&t_w, 3);
        mc_wire_put_u32(&t_w, kind);
        mc_wire_put_u64(&t_w, 0);
        mc_wire_put_u64(&t_w, 0);
        mc_wire_put_u64(&t_w, rep_len);
    }
    if (get) {
        mc_wire_put_u32(&t_w, 1);
        mc_wire_put_u64(&t_w, 1000);
    }
    return t_raw_len();
}

START_TEST(test_proto_reply_bounds)
{
    struct t_msg *d = t_msg_new();
    uint32_t v[5];

    for (int get = 0; get < 2; get++) {
        unsigned int type = get ? MC_WIRE_GET_BATCH_REPLY : MC_WIRE_PUT_START_BATCH_REPLY;

        T_ACCEPT(type, t_buf, t_raw_grant(get, 0, 0, MC_MASTER_MAX_REPLICAS, MC_SEG_DISK, 1),
                 d);
        T_ACCEPT(type, t_buf, t_raw_grant(get, (uint32_t)MC_ERR_NO_SPACE, 0, 0, 0, 0), d);
        T_REFUSE(type, t_buf, t_raw_grant(get, 1, 0, 1, 0, 1), d); /* not for puts/gets */
        T_REFUSE(type, t_buf, t_raw_grant(get, (uint32_t)-14, 0, 1, 0, 1), d);
        T_REFUSE(type, t_buf, t_raw_grant(get, 0x80000000u, 0, 1, 0, 1), d);
        T_REFUSE(type, t_buf, t_raw_grant(get, 0, 0, 0, 0, 1), d); /* no replica */
        T_REFUSE(type, t_buf, t_raw_grant(get, 0, 0, MC_MASTER_MAX_REPLICAS + 1, 0, 1), d);
        T_REFUSE(type, t_buf, t_raw_grant(get, 0, 0, 1, 3, 1), d); /* kind */
        T_REFUSE(type, t_buf, t_raw_grant(get, 0, 0, 1, 0, 0), d); /* empty replica */
    }
    T_REFUSE(MC_WIRE_GET_BATCH_REPLY, t_buf,
             t_raw_grant(true, 0, MC_MASTER_PUT_FLAGS_ALL + 1, 1, 0, 1), d);

    /* per-item status replies; the call status; a failed call followed by bytes */
    v[0] = 0, v[1] = 2, v[2] = 0, v[3] = (uint32_t)MC_ERR_INTERNAL;
    T_ACCEPT(MC_WIRE_PUT_END_BATCH_REPLY, t_buf, t_raw_u32s(4, v), d);
    v[3] = 1;
    T_REFUSE(MC_WIRE_FENCE_REPLY, t_buf, t_raw_u32s(4, v), d);
    v[3] = (uint32_t)-20, v[0] = (uint32_t)-21;
    T_REFUSE(MC_WIRE_PUT_REVOKE_BATCH_REPLY, t_buf, t_raw_u32s(4, v), d);
    v[0] = (uint32_t)MC_ERR_DENIED;
    T_ACCEPT(MC_WIRE_PUT_END_BATCH_REPLY, t_buf, t_raw_u32s(1, v), d);
    T_REFUSE(MC_WIRE_PUT_END_BATCH_REPLY, t_buf, t_raw_u32s(2, v), d);
    v[0] = 0, v[1] = MC_PROTO_BATCH_MAX + 1;
    T_REFUSE(MC_WIRE_PUT_END_BATCH_REPLY, t_buf, t_raw_u32s(2, v), d);

    /* EXIST reply: 1 allowed, 2 not; flags known */
    v[0] = 0, v[1] = 0, v[2] = 2, v[3] = 1, v[4] = 0;
    T_ACCEPT(MC_WIRE_EXIST_BATCH_REPLY, t_buf, t_raw_u32s(5, v), d);
    v[4] = 2;
    T_REFUSE(MC_WIRE_EXIST_BATCH_REPLY, t_buf, t_raw_u32s(5, v), d);
    v[1] = MC_PROTO_EXIST_F_KNOWN + 1, v[4] = 0;
    T_REFUSE(MC_WIRE_EXIST_BATCH_REPLY, t_buf, t_raw_u32s(5, v), d);

    /* REMOVE reply: a failed item removed nothing */
    t_raw();
    mc_wire_put_u32(&t_w, 0);
    mc_wire_put_u32(&t_w, 1);
    mc_wire_put_u32(&t_w, (uint32_t)MC_ERR_NOT_FOUND);
    mc_wire_put_u64(&t_w, 1);
    T_REFUSE(MC_WIRE_REMOVE_BATCH_REPLY, t_buf, t_raw_len(), d);

    /* LEASE_RELEASE reply: released <= batch max */
    v[0] = 0, v[1] = MC_PROTO_BATCH_MAX;
    T_ACCEPT(MC_WIRE_LEASE_RELEASE_BATCH_REPLY, t_buf, t_raw_u32s(2, v), d);
    v[1] = MC_PROTO_BATCH_MAX + 1;
    T_REFUSE(MC_WIRE_LEASE_RELEASE_BATCH_REPLY, t_buf, t_raw_u32s(2, v), d);

    /* HELLO reply: a node id and both TTLs */
    t_raw();
    mc_wire_put_u32(&t_w, 0);
    mc_wire_put_u32(&t_w, 1);
    mc_wire_put_u64(&t_w, 0); /* node_ttl_ms 0 */
    mc_wire_put_u64(&t_w, 1);
    T_REFUSE(MC_WIRE_HELLO_REPLY, t_buf, t_raw_len(), d);
    free(d);
}
END_TEST

static size_t t_raw_info_rep(uint32_t kind, uint64_t size, uint64_t free_bytes,
                             uint64_t largest, size_t addr, size_t rkey)
{
    t_raw();
    mc_wire_put_u32(&t_w, 0);
    mc_wire_put_u32(&t_w, MC_PROTO_INFO_F_SEGMENTS);
    mc_wire_put_u32(&t_w, 1); /* nseg */
    mc_wire_put_u32(&t_w, 0); /* next cursor */
    mc_wire_put_u32(&t_w, 1);
    mc_wire_put_u32(&t_w, 2);
    mc_wire_put_u32(&t_w, kind);
    mc_wire_put_u64(&t_w, 0);
    mc_wire_put_u64(&t_w, size);
    mc_wire_put_u64(&t_w, free_bytes);
    mc_wire_put_u64(&t_w, largest);
    mc_wire_put_u64(&t_w, 0);
    mc_wire_put_u64(&t_w, 0);
    mc_wire_put_u64(&t_w, 0);
    t_blob(addr);
    t_blob(rkey);
    t_blob(t_tenant_len);
    mc_wire_put_u64(&t_w, 0); /* quota */
    return t_raw_len();
}

START_TEST(test_proto_cluster_info_bounds)
{
    struct t_msg *d = t_msg_new();
    uint32_t v[4] = {0, MC_PROTO_INFO_F_SEGMENTS, MC_PROTO_SEG_PAGE_MAX + 1, 0};

    T_ACCEPT(MC_WIRE_CLUSTER_INFO_REPLY, t_buf,
             t_raw_info_rep(MC_SEG_DISK, 100, 100, 100, MC_PROTO_ADDR_MAX, MC_PROTO_RKEY_MAX),
             d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_info_rep(3, 100, 10, 10, 8, 0), d);
    t_tenant_len = MC_TENANT_NAME_MAX + 1;
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_info_rep(0, 100, 10, 10, 8, 0), d);
    t_tenant_len = 0;
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_info_rep(0, 100, 101, 10, 8, 0), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_info_rep(0, 100, 10, 11, 8, 0), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_info_rep(0, 100, 10, 10, 0, 0), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf,
             t_raw_info_rep(0, 100, 10, 10, MC_PROTO_ADDR_MAX + 1, 0), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf,
             t_raw_info_rep(0, 100, 10, 10, 8, MC_PROTO_RKEY_MAX + 1), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_u32s(4, v), d); /* page > max */
    v[1] = 8;                                                         /* unknown section */
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_u32s(2, v), d);
    free(d);
}
END_TEST

/* A CLUSTER_INFO_REPLY with one node entry; bad_byte < 0: none, else put into the name. */
static uint32_t t_raw_drain; /* the drain state t_raw_node_rep writes */

static size_t t_raw_node_rep(uint32_t nnode, uint32_t alive, size_t name, size_t domain,
                             int bad_byte)
{
    t_raw();
    mc_wire_put_u32(&t_w, 0);
    mc_wire_put_u32(&t_w, MC_PROTO_INFO_F_NODES);
    mc_wire_put_u32(&t_w, nnode);
    mc_wire_put_u32(&t_w, 0); /* next node cursor */
    mc_wire_put_u32(&t_w, 1); /* id */
    mc_wire_put_u32(&t_w, alive);
    mc_wire_put_u32(&t_w, 0);  /* segments */
    mc_wire_put_u64(&t_w, 10); /* idle_ms */
    if (bad_byte >= 0)
        t_fill[name / 2] = (uint8_t)bad_byte;
    t_blob(name);
    t_fill[name / 2] = 'k';
    t_blob(domain);
    mc_wire_put_u32(&t_w, t_raw_drain);
    mc_wire_put_u64(&t_w, 7);    /* drain_blocks */
    mc_wire_put_u64(&t_w, 4096); /* drain_bytes */
    return t_raw_len();
}

START_TEST(test_proto_cluster_info_node_bounds)
{
    struct t_msg *d = t_msg_new();
    uint32_t v[4] = {0, MC_PROTO_INFO_F_NODES, MC_PROTO_NODE_PAGE_MAX + 1, 0};
    size_t len;

    T_ACCEPT(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_node_rep(1, 1, 63, 63, -1), d);
    T_ACCEPT(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_node_rep(1, 0, 1, 1, -1), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_node_rep(1, 2, 8, 8, -1), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_node_rep(1, 1, 0, 8, -1), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_node_rep(1, 1, 8, 0, -1), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_node_rep(1, 1, 64, 8, -1), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_node_rep(1, 1, 8, 64, -1), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_node_rep(1, 1, 8, 8, ' '), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_node_rep(1, 1, 8, 8, '\0'), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_node_rep(1, 1, 8, 8, 0x7f), d);
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_node_rep(2, 1, 8, 8, -1), d); /* lying */
    len = t_raw_node_rep(1, 1, 8, 8, -1);
    ck_assert_int_eq(t_decode_exact(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, len, 0, d),
                     MC_ERR_PROTO);                                   /* > the caller's cap */
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_u32s(4, v), d); /* page > max */
    t_raw_drain = MC_MASTER_DRAIN_DRAINED;
    T_ACCEPT(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_node_rep(1, 1, 8, 8, -1), d);
    ck_assert_uint_eq(d->nodes[0].drain, MC_MASTER_DRAIN_DRAINED);
    ck_assert_uint_eq(d->nodes[0].drain_blocks, 7);
    t_raw_drain = MC_MASTER_DRAIN_DRAINED + 1; /* no such state */
    T_REFUSE(MC_WIRE_CLUSTER_INFO_REPLY, t_buf, t_raw_node_rep(1, 1, 8, 8, -1), d);
    t_raw_drain = 0;
    free(d);
}
END_TEST

START_TEST(test_proto_drain_and_copy_bounds)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    size_t len;

    /* DRAIN: on is 0 or 1, the name graphic ASCII of 1..63 bytes */
    m->drain_req = (struct mc_proto_drain_req){1, {(const uint8_t *)"node-a", 6}};
    ck_assert_int_eq(t_encode(MC_WIRE_DRAIN, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 4 + 4 + 6);
    ck_assert_int_eq(t_decode(MC_WIRE_DRAIN, t_buf, len, 1, d), 0);
    ck_assert_uint_eq(d->drain_req.on, 1);
    ck_assert_mem_eq(d->drain_req.name.p, "node-a", 6);
    t_buf[0] = 2;
    ck_assert_int_eq(t_decode(MC_WIRE_DRAIN, t_buf, len, 1, d), MC_ERR_PROTO);
    t_buf[0] = 0;
    t_buf[9] = ' ';
    ck_assert_int_eq(t_decode(MC_WIRE_DRAIN, t_buf, len, 1, d), MC_ERR_PROTO);
    m->drain_req.name.len = 0;
    ck_assert_int_eq(t_encode(MC_WIRE_DRAIN, m, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    m->drain_req = (struct mc_proto_drain_req){2, {(const uint8_t *)"a", 1}};
    ck_assert_int_eq(t_encode(MC_WIRE_DRAIN, m, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);

    /* COPY: an id, a length and a target node; a key of 1..512 bytes */
    m->copy_req = (struct mc_proto_copy_req){.id = 9, .version = 3, .src_seg = 1,
                                             .src_alloc = 2, .src_offset = 4096, .len = 100,
                                             .dst_node = 5, .dst_seg = 6, .dst_alloc = 7,
                                             .dst_offset = 8192,
                                             .key = {(const uint8_t *)"key", 3}};
    ck_assert_int_eq(t_encode(MC_WIRE_COPY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 8 * 5 + 4 * 5 + 4 + 3);
    ck_assert_int_eq(t_decode(MC_WIRE_COPY, t_buf, len, 1, d), 0);
    ck_assert_uint_eq(d->copy_req.id, 9);
    ck_assert_uint_eq(d->copy_req.src_offset, 4096);
    ck_assert_uint_eq(d->copy_req.len, 100);
    ck_assert_uint_eq(d->copy_req.dst_node, 5);
    ck_assert_uint_eq(d->copy_req.dst_alloc, 7);
    ck_assert_uint_eq(d->copy_req.dst_offset, 8192);
    ck_assert_mem_eq(d->copy_req.key.p, "key", 3);
    ck_assert_int_eq(t_decode(MC_WIRE_COPY, t_buf, len - 1, 1, d), MC_ERR_PROTO);
    memset(t_buf, 0, 8); /* id 0 */
    ck_assert_int_eq(t_decode(MC_WIRE_COPY, t_buf, len, 1, d), MC_ERR_PROTO);
    m->copy_req.len = 0;
    ck_assert_int_eq(t_encode(MC_WIRE_COPY, m, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    m->copy_req.len = 1;
    m->copy_req.key.len = 0;
    ck_assert_int_eq(t_encode(MC_WIRE_COPY, m, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    free(m);
    free(d);
}
END_TEST

static size_t t_raw_list_req(uint32_t node, uint32_t max, size_t prefix)
{
    t_raw();
    mc_wire_put_u32(&t_w, node);
    mc_wire_put_u32(&t_w, max);
    mc_wire_put_u64(&t_w, UINT64_MAX); /* any cursor: the service checks it */
    t_blob(prefix);
    return t_raw_len();
}

/* A LIST_REPLY claiming n keys and carrying min(n, 4) of key_len bytes. */
static size_t t_raw_list_rep(uint32_t status, uint32_t n, size_t key_len)
{
    t_raw();
    mc_wire_put_u32(&t_w, status);
    mc_wire_put_u32(&t_w, n);
    mc_wire_put_u64(&t_w, 5);
    for (uint32_t i = 0; i < n && i < 4; i++)
        t_blob(key_len);
    return t_raw_len();
}

START_TEST(test_proto_list_bounds)
{
    struct t_msg *d = t_msg_new();
    size_t len;

    T_ACCEPT(MC_WIRE_LIST, t_buf, t_raw_list_req(1, 1, 0), d);
    T_ACCEPT(MC_WIRE_LIST, t_buf, t_raw_list_req(1, MC_PROTO_LIST_MAX, MC_PROTO_KEY_MAX), d);
    T_REFUSE(MC_WIRE_LIST, t_buf, t_raw_list_req(MC_MASTER_NODE_NONE, 1, 0), d);
    T_REFUSE(MC_WIRE_LIST, t_buf, t_raw_list_req(1, 0, 0), d);
    T_REFUSE(MC_WIRE_LIST, t_buf, t_raw_list_req(1, MC_PROTO_LIST_MAX + 1, 0), d);
    T_REFUSE(MC_WIRE_LIST, t_buf, t_raw_list_req(1, 1, MC_PROTO_KEY_MAX + 1), d);

    T_ACCEPT(MC_WIRE_LIST_REPLY, t_buf, t_raw_list_rep(0, 4, MC_PROTO_KEY_MAX), d);
    T_ACCEPT(MC_WIRE_LIST_REPLY, t_buf, t_raw_list_rep(0, 0, 1), d);
    T_REFUSE(MC_WIRE_LIST_REPLY, t_buf, t_raw_list_rep(0, 4, 0), d);
    T_REFUSE(MC_WIRE_LIST_REPLY, t_buf, t_raw_list_rep(0, 4, MC_PROTO_KEY_MAX + 1), d);
    T_REFUSE(MC_WIRE_LIST_REPLY, t_buf, t_raw_list_rep(0, 5, 1), d); /* a lying count */
    T_REFUSE(MC_WIRE_LIST_REPLY, t_buf, t_raw_list_rep(0, MC_PROTO_LIST_MAX + 1, 1), d);
    T_REFUSE(MC_WIRE_LIST_REPLY, t_buf, t_raw_list_rep(0, UINT32_MAX, 1), d);
    T_REFUSE(MC_WIRE_LIST_REPLY, t_buf, t_raw_list_rep(1, 0, 1), d); /* status 1 */
    /* a failed call carries nothing after its status */
    T_REFUSE(MC_WIRE_LIST_REPLY, t_buf, t_raw_list_rep((uint32_t)MC_ERR_DENIED, 0, 1), d);
    len = t_raw_list_rep(0, 3, 1);
    ck_assert_int_eq(t_decode_exact(MC_WIRE_LIST_REPLY, t_buf, len, 2, d), MC_ERR_PROTO);
    ck_assert_int_eq(t_decode_exact(MC_WIRE_LIST_REPLY, t_buf, len, 3, d), 0);
    free(d);
}
END_TEST

START_TEST(test_proto_encoders_refuse_invalid)
{
    struct t_msg *m = t_msg_new();
    size_t len = 12345;
    uint8_t big[MC_PROTO_KEY_MAX + 1] = {0};

    /* each encoder refuses what its decoder would refuse, and leaves *len_p alone */
    m->hello_req =
        (struct mc_proto_hello_req){{NULL, 0}, {(const uint8_t *)"a b", 3}, {NULL, 0}, 0, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_HELLO, m, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    m->hello_req.name = (struct mc_proto_bytes){big, MC_PROTO_NAME_MAX + 1};
    ck_assert_int_eq(t_encode(MC_WIRE_HELLO, m, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    m->hello_req.name = (struct mc_proto_bytes){(const uint8_t *)"n", 1};
    m->hello_req.token = (struct mc_proto_bytes){NULL, 4}; /* NULL with a length */
    ck_assert_int_eq(t_encode(MC_WIRE_HELLO, m, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    m->hello_rep = (struct mc_proto_hello_rep){0, MC_MASTER_NODE_NONE, 1, 1, 0, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_HELLO_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->mount_req = (struct mc_proto_mount_req){{1, 3, 0, 1, "", 0, 0}, {big, 1}, {NULL, 0}};
    ck_assert_int_eq(t_encode(MC_WIRE_MOUNT, m, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    m->heartbeat_req = (struct mc_proto_heartbeat_req){1, 0x100};
    ck_assert_int_eq(t_encode(MC_WIRE_HEARTBEAT, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->heartbeat_rep = (struct mc_proto_heartbeat_rep){5, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_HEARTBEAT_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->heartbeat_rep = (struct mc_proto_heartbeat_rep){0, MC_MASTER_DRAIN_DRAINED + 1};
    ck_assert_int_eq(t_encode(MC_WIRE_HEARTBEAT_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->heartbeat_rep = (struct mc_proto_heartbeat_rep){MC_ERR_NOT_FOUND, 1};
    ck_assert_int_eq(t_encode(MC_WIRE_HEARTBEAT_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    /* the drain state rides only when not 0: a plain status still decodes (LEAVE's answer),
     * and an explicit 0 is refused (one encoding per message) */
    m->heartbeat_rep = (struct mc_proto_heartbeat_rep){0, MC_MASTER_DRAIN_DRAINING};
    ck_assert_int_eq(t_encode(MC_WIRE_HEARTBEAT_REPLY, m, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_uint_eq(len, 8);
    {
        struct mc_proto_heartbeat_rep hr;

        ck_assert_int_eq(mc_proto_heartbeat_rep_decode(t_buf, len, &hr), 0);
        ck_assert_uint_eq(hr.drain, MC_MASTER_DRAIN_DRAINING);
        ck_assert_int_eq(mc_proto_heartbeat_rep_decode(t_buf, 4, &hr), 0);
        ck_assert_uint_eq(hr.drain, 0);
        memset(t_buf + 4, 0, 4);
        ck_assert_int_eq(mc_proto_heartbeat_rep_decode(t_buf, len, &hr), MC_ERR_PROTO);
        len = 12345; /* what the refusals below must leave alone */
    }
    m->put_start_req = (struct mc_proto_put_start_req){1, 1};
    m->put_reqs[0] = (struct mc_master_put_req){
        (const char *)big, MC_PROTO_KEY_MAX + 1, 1, 0, 0, 0, 0, 1, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_PUT_START_BATCH, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->put_start_req.n = MC_PROTO_BATCH_MAX + 1;
    ck_assert_int_eq(t_encode(MC_WIRE_PUT_START_BATCH, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->keys_req = (struct mc_proto_keys_req){1, 0, 1};
    m->keys[0] = (struct mc_proto_key){"", 0};
    ck_assert_int_eq(t_encode(MC_WIRE_GET_BATCH, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->keys[0] = (struct mc_proto_key){"k", 1};
    m->keys_req.flags = MC_PROTO_GET_F_PIN << 1;
    ck_assert_int_eq(t_encode(MC_WIRE_GET_BATCH, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->batch_rep = (struct mc_proto_batch_rep){0, 0, 1};
    m->results[0] = 0;
    memset(&m->gets[0], 0, sizeof(m->gets[0]));
    m->gets[0].version = 2;
    m->gets[0].nrep = 1;
    m->gets[0].rep[0].len = 1;
    m->gets[0].lease.version = 1; /* not the version returned */
    ck_assert_int_eq(t_encode(MC_WIRE_GET_BATCH_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->batch_rep = (struct mc_proto_batch_rep){MC_ERR_DENIED, 0, 1}; /* items after a failure */
    ck_assert_int_eq(t_encode(MC_WIRE_FENCE_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->batch_rep = (struct mc_proto_batch_rep){0, 0, 1};
    m->results[0] = 1;
    ck_assert_int_eq(t_encode(MC_WIRE_PUT_END_BATCH_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->info_req = (struct mc_proto_info_req){MC_PROTO_INFO_F_SEGMENTS, 0, 0, 0, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_CLUSTER_INFO, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->info_req = (struct mc_proto_info_req){MC_PROTO_INFO_F_NODES, 0, 0, 0, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_CLUSTER_INFO, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->info_req = (struct mc_proto_info_req){MC_PROTO_INFO_F_STATS, 0, 0, 0, 1};
    ck_assert_int_eq(t_encode(MC_WIRE_CLUSTER_INFO, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    memset(&m->info_rep, 0, sizeof(m->info_rep));
    m->info_rep.flags = MC_PROTO_INFO_F_NODES;
    m->info_rep.nnode = 1;
    m->nodes[0] = (struct mc_proto_node_entry){
        1, 1, 0, 0, {(const uint8_t *)"a b", 3}, {(const uint8_t *)"d", 1}, 0, 0, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_CLUSTER_INFO_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->nodes[0].name.len = 1;
    m->nodes[0].alive = 2;
    ck_assert_int_eq(t_encode(MC_WIRE_CLUSTER_INFO_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->nodes[0].alive = 1;
    m->nodes[0].domain.len = 0;
    ck_assert_int_eq(t_encode(MC_WIRE_CLUSTER_INFO_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->info_rep.flags = MC_PROTO_INFO_F_STATS; /* a node page without its section */
    ck_assert_int_eq(t_encode(MC_WIRE_CLUSTER_INFO_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->info_rep.flags = MC_PROTO_INFO_F_NODES;
    m->info_rep.nnode = MC_PROTO_NODE_PAGE_MAX + 1;
    ck_assert_int_eq(t_encode(MC_WIRE_CLUSTER_INFO_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->list_req = (struct mc_proto_list_req){1, 0, 0, {NULL, 0}};
    ck_assert_int_eq(t_encode(MC_WIRE_LIST, m, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    m->list_req = (struct mc_proto_list_req){1, MC_PROTO_LIST_MAX + 1, 0, {NULL, 0}};
    ck_assert_int_eq(t_encode(MC_WIRE_LIST, m, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    m->list_req = (struct mc_proto_list_req){MC_MASTER_NODE_NONE, 1, 0, {NULL, 0}};
    ck_assert_int_eq(t_encode(MC_WIRE_LIST, m, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    m->list_req = (struct mc_proto_list_req){1, 1, 0, {big, MC_PROTO_KEY_MAX + 1}};
    ck_assert_int_eq(t_encode(MC_WIRE_LIST, m, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    m->list_req = (struct mc_proto_list_req){1, 1, 0, {NULL, 3}};
    ck_assert_int_eq(t_encode(MC_WIRE_LIST, m, t_buf, sizeof(t_buf), &len), MC_ERR_INVALID);
    m->list_rep = (struct mc_proto_list_rep){0, 1, 0};
    m->keys[0] = (struct mc_proto_key){"", 0};
    ck_assert_int_eq(t_encode(MC_WIRE_LIST_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->keys[0] = (struct mc_proto_key){"k", 1};
    m->list_rep = (struct mc_proto_list_rep){0, MC_PROTO_LIST_MAX + 1, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_LIST_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->list_rep = (struct mc_proto_list_rep){MC_ERR_DENIED, 1, 0}; /* keys after a failure */
    ck_assert_int_eq(t_encode(MC_WIRE_LIST_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    m->list_rep = (struct mc_proto_list_rep){1, 0, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_LIST_REPLY, m, t_buf, sizeof(t_buf), &len),
                     MC_ERR_INVALID);
    ck_assert_uint_eq(len, 12345);

    /* a buffer too small: MC_ERR_TOO_LARGE, also with no buffer at all */
    m->heartbeat_req = (struct mc_proto_heartbeat_req){1, 0};
    ck_assert_int_eq(t_encode(MC_WIRE_HEARTBEAT, m, t_buf, 7, &len), MC_ERR_TOO_LARGE);
    ck_assert_int_eq(t_encode(MC_WIRE_HEARTBEAT, m, NULL, 0, &len), MC_ERR_TOO_LARGE);
    ck_assert_uint_eq(len, 12345);
    free(m);
}
END_TEST

/* A full batch of the largest items encodes within one frame. */
START_TEST(test_proto_full_batches_fit)
{
    struct t_msg *m = t_msg_new(), *d = t_msg_new();
    static char key[MC_PROTO_KEY_MAX];
    size_t len;

    memset(key, 'x', sizeof(key));
    m->put_start_req = (struct mc_proto_put_start_req){1, MC_PROTO_BATCH_MAX};
    m->batch_rep = (struct mc_proto_batch_rep){0, 0, MC_PROTO_BATCH_MAX};
    for (uint32_t i = 0; i < MC_PROTO_BATCH_MAX; i++) {
        m->put_reqs[i] = (struct mc_master_put_req){key, sizeof(key), 1, 0, 8, 0, 0, 1, 0};
        m->results[i] = 0;
        m->gets[i].version = 1;
        m->gets[i].nrep = MC_MASTER_MAX_REPLICAS;
        for (int k = 0; k < MC_MASTER_MAX_REPLICAS; k++)
            m->gets[i].rep[k].len = 1;
        m->gets[i].lease.version = 1;
    }
    ck_assert_int_eq(t_encode(MC_WIRE_PUT_START_BATCH, m, t_buf, MC_PROTO_PAYLOAD_MAX, &len),
                     0);
    ck_assert_int_eq(t_decode(MC_WIRE_PUT_START_BATCH, t_buf, len, MC_PROTO_BATCH_MAX, d), 0);
    ck_assert_int_eq(t_encode(MC_WIRE_GET_BATCH_REPLY, m, t_buf, MC_PROTO_PAYLOAD_MAX, &len),
                     0);
    ck_assert_int_eq(t_decode(MC_WIRE_GET_BATCH_REPLY, t_buf, len, MC_PROTO_BATCH_MAX, d), 0);
    ck_assert_uint_eq(d->gets[MC_PROTO_BATCH_MAX - 1].nrep, MC_MASTER_MAX_REPLICAS);
    /* a full LIST page of the longest keys */
    m->list_rep = (struct mc_proto_list_rep){0, MC_PROTO_LIST_MAX, 1};
    for (uint32_t i = 0; i < MC_PROTO_LIST_MAX; i++)
        m->keys[i] = (struct mc_proto_key){key, sizeof(key)};
    ck_assert_int_eq(t_encode(MC_WIRE_LIST_REPLY, m, t_buf, MC_PROTO_PAYLOAD_MAX, &len), 0);
    ck_assert_int_eq(t_decode(MC_WIRE_LIST_REPLY, t_buf, len, MC_PROTO_LIST_MAX, d), 0);
    ck_assert_uint_eq(d->list_rep.n, MC_PROTO_LIST_MAX);
    free(m);
    free(d);
}
END_TEST

/* --- the fuzz corpus ---------------------------------------------------------------------- */

static int t_write_corpus(const char *dir)
{
    struct t_msg *m = calloc(1, sizeof(*m));
    uint64_t seed = 42;
    char path[4096];

    if (m == NULL)
        return 1;
    for (size_t ti = 0; ti < T_NTYPES; ti++) {
        unsigned int type = t_type_at(ti);
        size_t len;
        FILE *f;

        do { /* a successful call with items, where the message has them, and every
                section of CLUSTER_INFO */
            t_random(type, &seed, 3, m);
        } while (m->batch_rep.status != 0 || m->batch_rep.n == 0 ||
                 (type == MC_WIRE_CLUSTER_INFO && m->info_req.flags != MC_PROTO_INFO_F_KNOWN) ||
                 (type == MC_WIRE_CLUSTER_INFO_REPLY &&
                  (m->info_rep.flags != MC_PROTO_INFO_F_KNOWN || m->info_rep.nnode == 0 ||
                   m->info_rep.nseg == 0)));
        if (t_encode(type, m, t_buf + 1, sizeof(t_buf) - 1, &len) != 0)
            return 1;
        t_buf[0] = (uint8_t)ti;
        snprintf(path, sizeof(path), "%s/type%02u", dir, type);
        f = fopen(path, "wb");
        if (f == NULL || fwrite(t_buf, 1, len + 1, f) != len + 1 || fclose(f) != 0)
            return 1;
    }
    free(m);
    return 0;
}

static Suite *proto_suite(void)
{
    Suite *s = suite_create("proto");
    TCase *tc = tcase_create("master");

    tcase_add_test(tc, test_proto_status_is_valid);
    tcase_add_test(tc, test_proto_token_equal);
    tcase_add_test(tc, test_proto_hello_round_trip);
    tcase_add_test(tc, test_proto_mount_round_trip);
    tcase_add_test(tc, test_proto_heartbeat_round_trip);
    tcase_add_test(tc, test_proto_put_start_round_trip);
    tcase_add_test(tc, test_proto_put_end_revoke_round_trip);
    tcase_add_test(tc, test_proto_get_round_trip);
    tcase_add_test(tc, test_proto_lease_release_round_trip);
    tcase_add_test(tc, test_proto_exist_round_trip);
    tcase_add_test(tc, test_proto_remove_round_trip);
    tcase_add_test(tc, test_proto_fence_round_trip);
    tcase_add_test(tc, test_proto_cluster_info_round_trip);
    tcase_add_test(tc, test_proto_cluster_info_nodes_round_trip);
    tcase_add_test(tc, test_proto_list_round_trip);
    tcase_add_test(tc, test_proto_truncated_every_offset);
    tcase_add_test(tc, test_proto_trailing_byte_refused);
    tcase_add_test(tc, test_proto_random_round_trip);
    tcase_add_test(tc, test_proto_count_and_key_bounds);
    tcase_add_test(tc, test_proto_name_and_token_bounds);
    tcase_add_test(tc, test_proto_mount_bounds);
    tcase_add_test(tc, test_proto_enum_and_flag_bounds);
    tcase_add_test(tc, test_proto_reply_bounds);
    tcase_add_test(tc, test_proto_cluster_info_bounds);
    tcase_add_test(tc, test_proto_cluster_info_node_bounds);
    tcase_add_test(tc, test_proto_drain_and_copy_bounds);
    tcase_add_test(tc, test_proto_list_bounds);
    tcase_add_test(tc, test_proto_encoders_refuse_invalid);
    tcase_add_test(tc, test_proto_full_batches_fit);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    SRunner *sr;
    int failed;

    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0)
        return t_write_corpus(argv[2]);
    sr = srunner_create(proto_suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
