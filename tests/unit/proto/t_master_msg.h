/*
 * Test helpers shared by tests/unit/proto/test_master_proto.c and
 * tests/fuzz/fuzz_master_proto.c (test code only, static inline functions): one struct that
 * holds any master message with its item arrays, an encoder and a decoder that dispatch on the
 * wire type, and a generator of random valid messages.
 */
#ifndef MC_T_MASTER_MSG_H
#define MC_T_MASTER_MSG_H

#include <stdint.h>
#include <string.h>

#include "daemon/proto/master_proto.h"
#include "mc/mc_status.h"

#define T_POOL (256u << 10)

/* The master messages, requests and replies in type order: the rows of MC_PROTO_MASTER_RPCS
 * and MC_PROTO_OWNER_RPCS (daemon/proto/rpc.h), whose codecs are master_proto.h; the
 * agent-to-agent rows are peer_proto.h's. Tests walk t_type_at(0 .. T_NTYPES - 1). The fuzz
 * corpus names a message by this index: a new row re-maps the seeds after it (rewrite them
 * with `test_master_proto --write-corpus`). */
#define T_TYPE_PAIR(NAME, name, type, flags, items, req, rep)                                  \
    MC_WIRE_##NAME, MC_WIRE_##NAME##_REPLY,
#define T_NTYPES                                                                               \
    (sizeof((const unsigned int[]){MC_PROTO_MASTER_RPCS(T_TYPE_PAIR)                           \
                                       MC_PROTO_OWNER_RPCS(T_TYPE_PAIR)}) /                    \
     sizeof(unsigned int))
static inline unsigned int t_type_at(size_t i)
{
    static const unsigned int types[] = {MC_PROTO_MASTER_RPCS(T_TYPE_PAIR)
                                             MC_PROTO_OWNER_RPCS(T_TYPE_PAIR)};

    return types[i % T_NTYPES];
}

/* Any master message. Large (a few MiB): allocate it. */
struct t_msg {
    struct mc_proto_hello_req hello_req;
    struct mc_proto_hello_rep hello_rep;
    struct mc_proto_mount_req mount_req;
    struct mc_proto_mount_rep mount_rep;
    struct mc_proto_heartbeat_req heartbeat_req;
    struct mc_proto_status_rep status_rep;
    struct mc_proto_heartbeat_rep heartbeat_rep;
    struct mc_proto_put_start_req put_start_req;
    struct mc_proto_ref_req ref_req;
    struct mc_proto_keys_req keys_req;
    struct mc_proto_fence_req fence_req;
    struct mc_proto_batch_rep batch_rep;
    struct mc_proto_lease_release_rep lease_rep;
    struct mc_proto_info_req info_req;
    struct mc_proto_info_rep info_rep;
    struct mc_proto_list_req list_req;
    struct mc_proto_list_rep list_rep;
    struct mc_proto_drain_req drain_req;
    struct mc_proto_copy_req copy_req;
    struct mc_master_put_req put_reqs[MC_PROTO_BATCH_MAX];
    struct mc_master_ref refs[MC_PROTO_BATCH_MAX];
    struct mc_proto_key keys[MC_PROTO_BATCH_MAX];
    struct mc_proto_fence_item fences[MC_PROTO_BATCH_MAX];
    struct mc_master_restore_req restores[MC_PROTO_BATCH_MAX];
    uint32_t segs_done[MC_PROTO_BATCH_MAX];
    int results[MC_PROTO_BATCH_MAX];
    struct mc_master_put_grant grants[MC_PROTO_BATCH_MAX];
    struct mc_master_get_result gets[MC_PROTO_BATCH_MAX];
    struct mc_master_stat stats[MC_PROTO_BATCH_MAX];
    uint64_t counts[MC_PROTO_BATCH_MAX];
    struct mc_proto_seg_entry segs[MC_PROTO_SEG_PAGE_MAX];
    struct mc_proto_node_entry nodes[MC_PROTO_NODE_PAGE_MAX];
    uint8_t pool[T_POOL]; /* bytes the random keys, names and blobs point to */
    size_t pool_used;
};

static inline int t_encode(unsigned int type, const struct t_msg *m, void *buf, size_t cap,
                           size_t *len_p)
{
    switch (type) {
    case MC_WIRE_HELLO:
        return mc_proto_hello_req_encode(&m->hello_req, buf, cap, len_p);
    case MC_WIRE_HELLO_REPLY:
        return mc_proto_hello_rep_encode(&m->hello_rep, buf, cap, len_p);
    case MC_WIRE_MOUNT:
        return mc_proto_mount_req_encode(&m->mount_req, buf, cap, len_p);
    case MC_WIRE_MOUNT_REPLY:
        return mc_proto_mount_rep_encode(&m->mount_rep, buf, cap, len_p);
    case MC_WIRE_HEARTBEAT:
        return mc_proto_heartbeat_req_encode(&m->heartbeat_req, buf, cap, len_p);
    case MC_WIRE_HEARTBEAT_REPLY:
        return mc_proto_heartbeat_rep_encode(&m->heartbeat_rep, buf, cap, len_p);
    case MC_WIRE_PUT_START_BATCH:
        return mc_proto_put_start_req_encode(&m->put_start_req, m->put_reqs, buf, cap, len_p);
    case MC_WIRE_PUT_START_BATCH_REPLY:
        return mc_proto_put_start_rep_encode(&m->batch_rep, m->results, m->grants, buf, cap,
                                             len_p);
    case MC_WIRE_PUT_END_BATCH:
        return mc_proto_put_end_req_encode(&m->ref_req, m->refs, buf, cap, len_p);
    case MC_WIRE_PUT_REVOKE_BATCH:
        return mc_proto_put_revoke_req_encode(&m->ref_req, m->refs, buf, cap, len_p);
    case MC_WIRE_RESTORE_BATCH:
        return mc_proto_restore_req_encode(&m->ref_req, m->restores, buf, cap, len_p);
    case MC_WIRE_RESTORE_DONE:
        return mc_proto_restore_done_req_encode(&m->ref_req, m->segs_done, buf, cap, len_p);
    case MC_WIRE_PUT_END_BATCH_REPLY:
    case MC_WIRE_PUT_REVOKE_BATCH_REPLY:
    case MC_WIRE_RESTORE_BATCH_REPLY:
    case MC_WIRE_RESTORE_DONE_REPLY:
    case MC_WIRE_FENCE_REPLY:
        return mc_proto_results_rep_encode(&m->batch_rep, m->results, buf, cap, len_p);
    case MC_WIRE_GET_BATCH:
        return mc_proto_get_req_encode(&m->keys_req, m->keys, buf, cap, len_p);
    case MC_WIRE_GET_BATCH_REPLY:
        return mc_proto_get_rep_encode(&m->batch_rep, m->results, m->gets, buf, cap, len_p);
    case MC_WIRE_LEASE_RELEASE_BATCH:
        return mc_proto_lease_release_req_encode(&m->ref_req, m->refs, buf, cap, len_p);
    case MC_WIRE_LEASE_RELEASE_BATCH_REPLY:
        return mc_proto_lease_release_rep_encode(&m->lease_rep, buf, cap, len_p);
    case MC_WIRE_EXIST_BATCH:
        return mc_proto_exist_req_encode(&m->keys_req, m->keys, buf, cap, len_p);
    case MC_WIRE_EXIST_BATCH_REPLY:
        return mc_proto_exist_rep_encode(&m->batch_rep, m->results, m->stats, buf, cap, len_p);
    case MC_WIRE_REMOVE_BATCH:
        return mc_proto_remove_req_encode(&m->keys_req, m->keys, buf, cap, len_p);
    case MC_WIRE_REMOVE_BATCH_REPLY:
        return mc_proto_remove_rep_encode(&m->batch_rep, m->results, m->counts, buf, cap,
                                          len_p);
    case MC_WIRE_FENCE:
        return mc_proto_fence_req_encode(&m->fence_req, m->fences, buf, cap, len_p);
    case MC_WIRE_CLUSTER_INFO:
        return mc_proto_info_req_encode(&m->info_req, buf, cap, len_p);
    case MC_WIRE_CLUSTER_INFO_REPLY:
        return mc_proto_info_rep_encode(&m->info_rep, m->segs, m->nodes, buf, cap, len_p);
    case MC_WIRE_LIST:
        return mc_proto_list_req_encode(&m->list_req, buf, cap, len_p);
    case MC_WIRE_LIST_REPLY:
        return mc_proto_list_rep_encode(&m->list_rep, m->keys, buf, cap, len_p);
    case MC_WIRE_DRAIN:
        return mc_proto_drain_req_encode(&m->drain_req, buf, cap, len_p);
    case MC_WIRE_COPY:
        return mc_proto_copy_req_encode(&m->copy_req, buf, cap, len_p);
    case MC_WIRE_DRAIN_REPLY:
    case MC_WIRE_COPY_REPLY:
        return mc_proto_status_rep_encode(&m->status_rep, buf, cap, len_p);
    default:
        return MC_ERR_INVALID;
    }
}

/* `cap`: the item capacity the decoder is told (MC_PROTO_BATCH_MAX for any). */
static inline int t_decode(unsigned int type, const void *buf, size_t len, size_t cap,
                           struct t_msg *m)
{
    size_t segcap = cap < MC_PROTO_SEG_PAGE_MAX ? cap : MC_PROTO_SEG_PAGE_MAX;
    size_t nodecap = cap < MC_PROTO_NODE_PAGE_MAX ? cap : MC_PROTO_NODE_PAGE_MAX;

    switch (type) {
    case MC_WIRE_HELLO:
        return mc_proto_hello_req_decode(buf, len, &m->hello_req);
    case MC_WIRE_HELLO_REPLY:
        return mc_proto_hello_rep_decode(buf, len, &m->hello_rep);
    case MC_WIRE_MOUNT:
        return mc_proto_mount_req_decode(buf, len, &m->mount_req);
    case MC_WIRE_MOUNT_REPLY:
        return mc_proto_mount_rep_decode(buf, len, &m->mount_rep);
    case MC_WIRE_HEARTBEAT:
        return mc_proto_heartbeat_req_decode(buf, len, &m->heartbeat_req);
    case MC_WIRE_HEARTBEAT_REPLY:
        return mc_proto_heartbeat_rep_decode(buf, len, &m->heartbeat_rep);
    case MC_WIRE_PUT_START_BATCH:
        return mc_proto_put_start_req_decode(buf, len, cap, &m->put_start_req, m->put_reqs);
    case MC_WIRE_PUT_START_BATCH_REPLY:
        return mc_proto_put_start_rep_decode(buf, len, cap, &m->batch_rep, m->results,
                                             m->grants);
    case MC_WIRE_PUT_END_BATCH:
        return mc_proto_put_end_req_decode(buf, len, cap, &m->ref_req, m->refs);
    case MC_WIRE_PUT_REVOKE_BATCH:
        return mc_proto_put_revoke_req_decode(buf, len, cap, &m->ref_req, m->refs);
    case MC_WIRE_RESTORE_BATCH:
        return mc_proto_restore_req_decode(buf, len, cap, &m->ref_req, m->restores);
    case MC_WIRE_RESTORE_DONE:
        return mc_proto_restore_done_req_decode(buf, len, cap, &m->ref_req, m->segs_done);
    case MC_WIRE_PUT_END_BATCH_REPLY:
    case MC_WIRE_PUT_REVOKE_BATCH_REPLY:
    case MC_WIRE_RESTORE_BATCH_REPLY:
    case MC_WIRE_RESTORE_DONE_REPLY:
    case MC_WIRE_FENCE_REPLY:
        return mc_proto_results_rep_decode(buf, len, cap, &m->batch_rep, m->results);
    case MC_WIRE_GET_BATCH:
        return mc_proto_get_req_decode(buf, len, cap, &m->keys_req, m->keys);
    case MC_WIRE_GET_BATCH_REPLY:
        return mc_proto_get_rep_decode(buf, len, cap, &m->batch_rep, m->results, m->gets);
    case MC_WIRE_LEASE_RELEASE_BATCH:
        return mc_proto_lease_release_req_decode(buf, len, cap, &m->ref_req, m->refs);
    case MC_WIRE_LEASE_RELEASE_BATCH_REPLY:
        return mc_proto_lease_release_rep_decode(buf, len, &m->lease_rep);
    case MC_WIRE_EXIST_BATCH:
        return mc_proto_exist_req_decode(buf, len, cap, &m->keys_req, m->keys);
    case MC_WIRE_EXIST_BATCH_REPLY:
        return mc_proto_exist_rep_decode(buf, len, cap, &m->batch_rep, m->results, m->stats);
    case MC_WIRE_REMOVE_BATCH:
        return mc_proto_remove_req_decode(buf, len, cap, &m->keys_req, m->keys);
    case MC_WIRE_REMOVE_BATCH_REPLY:
        return mc_proto_remove_rep_decode(buf, len, cap, &m->batch_rep, m->results, m->counts);
    case MC_WIRE_FENCE:
        return mc_proto_fence_req_decode(buf, len, cap, &m->fence_req, m->fences);
    case MC_WIRE_CLUSTER_INFO:
        return mc_proto_info_req_decode(buf, len, &m->info_req);
    case MC_WIRE_CLUSTER_INFO_REPLY:
        return mc_proto_info_rep_decode(buf, len, segcap, &m->info_rep, m->segs, nodecap,
                                        m->nodes);
    case MC_WIRE_LIST:
        return mc_proto_list_req_decode(buf, len, &m->list_req);
    case MC_WIRE_LIST_REPLY:
        return mc_proto_list_rep_decode(buf, len, cap, &m->list_rep, m->keys);
    case MC_WIRE_DRAIN:
        return mc_proto_drain_req_decode(buf, len, &m->drain_req);
    case MC_WIRE_COPY:
        return mc_proto_copy_req_decode(buf, len, &m->copy_req);
    case MC_WIRE_DRAIN_REPLY:
    case MC_WIRE_COPY_REPLY:
        return mc_proto_status_rep_decode(buf, len, &m->status_rep);
    default:
        return MC_ERR_PROTO;
    }
}

/* --- random valid messages ---------------------------------------------------------------- */

static inline uint64_t t_rnd(uint64_t *s)
{
    /* xorshift64*: deterministic per seed, so a failure reproduces */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

static inline uint64_t t_below(uint64_t *s, uint64_t n)
{
    return n == 0 ? 0 : t_rnd(s) % n;
}

/* A value that is often at an edge. */
static inline uint64_t t_u64(uint64_t *s)
{
    switch (t_below(s, 4)) {
    case 0:
        return t_below(s, 3);
    case 1:
        return UINT64_MAX - t_below(s, 3);
    default:
        return t_rnd(s);
    }
}

static inline uint32_t t_u32(uint64_t *s)
{
    return (uint32_t)t_u64(s);
}

/* Every MC_ERR_* code: i in 0 .. T_NCODES - 1. */
#define T_NCODES 16u
static inline int t_code_at(size_t i)
{
    static const int codes[T_NCODES] = {
        MC_ERR_INVALID,  MC_ERR_NOMEM,         MC_ERR_NOT_FOUND,   MC_ERR_EXISTS,
        MC_ERR_NO_SPACE, MC_ERR_TOO_LARGE,     MC_ERR_BUSY,        MC_ERR_TIMEOUT,
        MC_ERR_CANCELED, MC_ERR_LEASE_EXPIRED, MC_ERR_CORRUPT,     MC_ERR_DENIED,
        MC_ERR_IO,       MC_ERR_PROTO,         MC_ERR_UNAVAILABLE, MC_ERR_INTERNAL,
    };

    return codes[i % T_NCODES];
}

static inline int t_code(uint64_t *s)
{
    return t_code_at(t_below(s, T_NCODES));
}

/* An item status: mostly 0. */
static inline int t_status(uint64_t *s, int permille_ok)
{
    return (int)t_below(s, 1000) < permille_ok ? 0 : t_code(s);
}

static inline struct mc_proto_bytes t_bytes(struct t_msg *m, uint64_t *s, size_t min,
                                            size_t max, bool graphic)
{
    size_t len = min + (size_t)t_below(s, max - min + 1);
    struct mc_proto_bytes b = {NULL, len};

    if (len == 0)
        return b; /* an empty string may be NULL */
    if (m->pool_used + len > T_POOL)
        m->pool_used = 0; /* reuse: the content does not matter, only the bounds */
    b.p = m->pool + m->pool_used;
    for (size_t i = 0; i < len; i++)
        m->pool[m->pool_used + i] =
            graphic ? (uint8_t)(0x21 + t_below(s, 0x7e - 0x21 + 1)) : (uint8_t)t_rnd(s);
    m->pool_used += len;
    return b;
}

static inline void t_key(struct t_msg *m, uint64_t *s, const char **key_p, size_t *len_p)
{
    /* mostly short keys, sometimes at the bounds */
    size_t max = t_below(s, 8) == 0 ? MC_PROTO_KEY_MAX : 40;
    struct mc_proto_bytes b = t_bytes(m, s, t_below(s, 8) == 0 ? max : 1, max, false);

    *key_p = (const char *)b.p;
    *len_p = b.len;
}

static inline void t_replicas(uint64_t *s, uint32_t *nrep_p, struct mc_master_replica rep[])
{
    *nrep_p = 1 + (uint32_t)t_below(s, MC_MASTER_MAX_REPLICAS);
    memset(rep, 0, sizeof(rep[0]) * MC_MASTER_MAX_REPLICAS);
    for (uint32_t k = 0; k < *nrep_p; k++) {
        rep[k].seg = t_u32(s);
        rep[k].node = t_u32(s);
        rep[k].alloc = t_u32(s);
        rep[k].kind = (uint32_t)t_below(s, 3);
        rep[k].offset = t_u64(s);
        rep[k].addr = t_u64(s);
        rep[k].len = 1 + t_below(s, UINT64_MAX);
    }
}

static inline uint32_t t_node(uint64_t *s)
{
    uint32_t n = t_u32(s);

    return n == MC_MASTER_NODE_NONE ? 0 : n;
}

/* Fill the fields of `type` in `m` with a random valid message of at most `nmax` items. */
static inline void t_random(unsigned int type, uint64_t *s, size_t nmax, struct t_msg *m)
{
    uint32_t n = (uint32_t)t_below(s, nmax + 1);
    int call = t_below(s, 8) == 0 ? t_code(s) : 0;

    if (call != 0)
        n = 0;
    m->batch_rep = (struct mc_proto_batch_rep){call, 0, n};
    switch (type) {
    case MC_WIRE_HELLO:
        m->hello_req.token = t_bytes(m, s, 0, MC_PROTO_TOKEN_MAX, false);
        m->hello_req.name = t_bytes(m, s, 1, MC_PROTO_NAME_MAX, true);
        m->hello_req.domain = t_bytes(m, s, 0, MC_PROTO_NAME_MAX, true);
        break;
    case MC_WIRE_HELLO_REPLY:
        m->hello_rep = (struct mc_proto_hello_rep){call, MC_MASTER_NODE_NONE, 0, 0, 0, 0};
        if (call == 0) {
            m->hello_rep.node = t_node(s);
            m->hello_rep.node_ttl_ms = 1 + t_below(s, UINT64_MAX);
            m->hello_rep.lease_ttl_ms = 1 + t_below(s, UINT64_MAX);
        }
        break;
    case MC_WIRE_MOUNT:
        m->mount_req.seg.node = t_node(s);
        m->mount_req.seg.kind = (uint32_t)t_below(s, 3);
        m->mount_req.seg.base = t_u64(s) & ~UINT64_C(1); /* room for size >= 1 */
        m->mount_req.seg.size = 1 + t_below(s, UINT64_MAX - m->mount_req.seg.base);
        m->mount_req.worker_addr =
            t_bytes(m, s, 1, t_below(s, 4) ? 300 : MC_PROTO_ADDR_MAX, false);
        m->mount_req.rkey = t_bytes(m, s, 0, t_below(s, 4) ? 300 : MC_PROTO_RKEY_MAX, false);
        m->mount_req.seg.flags = (uint32_t)t_below(s, MC_MASTER_SEG_F_ALL + 1);
        break;
    case MC_WIRE_MOUNT_REPLY:
        m->mount_rep = (struct mc_proto_mount_rep){call, call == 0 ? t_u32(s) : 0};
        break;
    case MC_WIRE_HEARTBEAT:
        m->heartbeat_req = (struct mc_proto_heartbeat_req){t_node(s), (uint32_t)t_below(s, 2)};
        break;
    case MC_WIRE_HEARTBEAT_REPLY:
        m->heartbeat_rep.status = call;
        m->heartbeat_rep.drain = call == 0 ? (uint32_t)t_below(s, 3) : 0;
        break;
    case MC_WIRE_PUT_START_BATCH:
        m->put_start_req = (struct mc_proto_put_start_req){t_node(s), n};
        for (uint32_t i = 0; i < n; i++) {
            struct mc_master_put_req *q = &m->put_reqs[i];

            t_key(m, s, &q->key, &q->key_len);
            q->size = 1 + t_below(s, UINT64_MAX);
            q->alloc_len = t_below(s, 2) ? 0 : q->size + t_below(s, UINT64_MAX - q->size + 1);
            q->replicas = (uint32_t)t_below(s, MC_MASTER_MAX_REPLICAS + 1);
            q->flags = (uint32_t)t_below(s, MC_MASTER_PUT_FLAGS_ALL + 1) &
                       MC_MASTER_PUT_FLAGS_ALL; /* the bits are not contiguous */
            q->ttl_ms = t_u64(s);
            q->writer = m->put_start_req.writer;
            q->preferred = t_u32(s);
        }
        break;
    case MC_WIRE_PUT_START_BATCH_REPLY:
        for (uint32_t i = 0; i < n; i++) {
            memset(&m->grants[i], 0, sizeof(m->grants[i]));
            m->results[i] = t_status(s, 800);
            if (m->results[i] == 0) {
                m->grants[i].version = t_u64(s);
                t_replicas(s, &m->grants[i].nrep, m->grants[i].rep);
            }
        }
        break;
    case MC_WIRE_PUT_END_BATCH:
    case MC_WIRE_PUT_REVOKE_BATCH:
    case MC_WIRE_LEASE_RELEASE_BATCH:
        m->ref_req = (struct mc_proto_ref_req){t_node(s), n};
        for (uint32_t i = 0; i < n; i++) {
            t_key(m, s, &m->refs[i].key, &m->refs[i].key_len);
            m->refs[i].version = t_u64(s);
            m->refs[i].node = m->ref_req.node;
            m->refs[i].epoch = type == MC_WIRE_LEASE_RELEASE_BATCH ? t_u32(s) : 0;
        }
        break;
    case MC_WIRE_RESTORE_DONE:
        m->ref_req = (struct mc_proto_ref_req){t_node(s), n};
        for (uint32_t i = 0; i < n; i++)
            m->segs_done[i] = t_u32(s);
        break;
    case MC_WIRE_RESTORE_BATCH:
        m->ref_req = (struct mc_proto_ref_req){t_node(s), n};
        for (uint32_t i = 0; i < n; i++) {
            struct mc_master_restore_req *q = &m->restores[i];

            t_key(m, s, &q->key, &q->key_len);
            q->seg = t_u32(s);
            q->offset = t_u64(s);
            q->size = 1 + t_below(s, UINT64_MAX - 1);
            q->alloc_len = q->size + t_below(s, UINT64_MAX - q->size + 1);
            q->version = 1 + t_below(s, UINT64_MAX - 1);
            q->flags = (t_below(s, 2) ? MC_MASTER_PUT_NO_CHECKSUM : 0) |
                       (uint32_t)(t_below(s, 3) * MC_MASTER_PUT_PIN_SOFT); /* 0, soft, hard */
            q->ttl_ms = t_u64(s);
        }
        break;
    case MC_WIRE_PUT_END_BATCH_REPLY:
    case MC_WIRE_PUT_REVOKE_BATCH_REPLY:
    case MC_WIRE_RESTORE_BATCH_REPLY:
    case MC_WIRE_RESTORE_DONE_REPLY:
    case MC_WIRE_FENCE_REPLY:
        for (uint32_t i = 0; i < n; i++)
            m->results[i] = t_status(s, 700);
        break;
    case MC_WIRE_GET_BATCH:
    case MC_WIRE_EXIST_BATCH:
    case MC_WIRE_REMOVE_BATCH:
        m->keys_req = (struct mc_proto_keys_req){t_node(s), 0, n};
        if (type == MC_WIRE_EXIST_BATCH)
            m->keys_req.flags = (uint32_t)t_below(s, MC_PROTO_EXIST_F_KNOWN + 1);
        else if (type == MC_WIRE_REMOVE_BATCH)
            m->keys_req.flags = (uint32_t)t_below(s, MC_PROTO_REMOVE_F_KNOWN + 1);
        for (uint32_t i = 0; i < n; i++)
            t_key(m, s, &m->keys[i].key, &m->keys[i].key_len);
        break;
    case MC_WIRE_GET_BATCH_REPLY:
        for (uint32_t i = 0; i < n; i++) {
            struct mc_master_get_result *g = &m->gets[i];

            memset(g, 0, sizeof(*g));
            m->results[i] = t_status(s, 800);
            if (m->results[i] != 0)
                continue;
            g->version = t_u64(s);
            g->size = t_u64(s);
            g->flags = (uint32_t)t_below(s, MC_MASTER_PUT_FLAGS_ALL + 1) &
                       MC_MASTER_PUT_FLAGS_ALL; /* the bits are not contiguous */
            t_replicas(s, &g->nrep, g->rep);
            g->lease.version = g->version;
            g->lease.epoch = t_u32(s);
            g->lease.expires_ms = t_u64(s);
        }
        break;
    case MC_WIRE_LEASE_RELEASE_BATCH_REPLY:
        m->lease_rep = (struct mc_proto_lease_release_rep){
            call, call == 0 ? (uint32_t)t_below(s, MC_PROTO_BATCH_MAX + 1) : 0};
        break;
    case MC_WIRE_EXIST_BATCH_REPLY:
        if (call == 0)
            m->batch_rep.flags = (uint32_t)t_below(s, MC_PROTO_EXIST_F_KNOWN + 1);
        for (uint32_t i = 0; i < n; i++) {
            struct mc_master_stat *st = &m->stats[i];

            memset(st, 0, sizeof(*st));
            m->results[i] = t_below(s, 3) == 0 ? 0 : t_below(s, 4) ? 1 : t_code(s);
            if (m->results[i] != 1 || !(m->batch_rep.flags & MC_PROTO_EXIST_F_STAT))
                continue;
            st->size = 1 + t_below(s, UINT64_MAX);
            st->version = t_u64(s);
            st->replicas = (uint32_t)t_below(s, MC_MASTER_MAX_REPLICAS + 1);
            st->flags = (uint32_t)t_below(s, MC_MASTER_PUT_FLAGS_ALL + 1) &
                       MC_MASTER_PUT_FLAGS_ALL; /* the bits are not contiguous */
            st->ttl_remaining_ms = t_u64(s);
        }
        break;
    case MC_WIRE_REMOVE_BATCH_REPLY:
        for (uint32_t i = 0; i < n; i++) {
            m->results[i] = t_status(s, 700);
            m->counts[i] = m->results[i] == 0 ? t_u64(s) : 0;
        }
        break;
    case MC_WIRE_FENCE:
        m->fence_req.n = n;
        for (uint32_t i = 0; i < n; i++)
            m->fences[i] = (struct mc_proto_fence_item){t_u32(s), t_u32(s), t_u64(s)};
        break;
    case MC_WIRE_CLUSTER_INFO:
        m->info_req = (struct mc_proto_info_req){
            (uint32_t)t_below(s, MC_PROTO_INFO_F_KNOWN + 1), 0, 0, 0, 0};
        if (m->info_req.flags & MC_PROTO_INFO_F_SEGMENTS) {
            m->info_req.cursor = t_u32(s);
            m->info_req.max = 1 + (uint32_t)t_below(s, MC_PROTO_SEG_PAGE_MAX);
        }
        if (m->info_req.flags & MC_PROTO_INFO_F_NODES) {
            m->info_req.node_cursor = t_u32(s);
            m->info_req.node_max = 1 + (uint32_t)t_below(s, MC_PROTO_NODE_PAGE_MAX);
        }
        break;
    case MC_WIRE_CLUSTER_INFO_REPLY: {
        struct mc_proto_info_rep *r = &m->info_rep;
        uint32_t nseg = (uint32_t)t_below(s, (nmax < 8 ? nmax : 8) + 1);

        memset(r, 0, sizeof(*r));
        r->status = call;
        if (call != 0)
            break;
        r->flags = (uint32_t)t_below(s, MC_PROTO_INFO_F_KNOWN + 1);
        if (r->flags & MC_PROTO_INFO_F_STATS) {
            uint64_t *f = (uint64_t *)(void *)&r->stats; /* 24 uint64_t fields */

            for (size_t i = 0; i < sizeof(r->stats) / sizeof(uint64_t); i++)
                f[i] = t_u64(s);
        }
        if (r->flags & MC_PROTO_INFO_F_NODES) {
            r->nnode = (uint32_t)t_below(s, (nmax < 8 ? nmax : 8) + 1);
            r->next_node_cursor = t_u32(s);
            for (uint32_t i = 0; i < r->nnode; i++) {
                struct mc_proto_node_entry *e = &m->nodes[i];

                e->id = t_u32(s);
                e->alive = (uint32_t)t_below(s, 2);
                e->segments = t_u32(s);
                e->idle_ms = t_u64(s);
                e->name = t_bytes(m, s, 1, MC_PROTO_NAME_MAX, true);
                e->domain = t_bytes(m, s, 1, MC_PROTO_NAME_MAX, true);
                e->drain = (uint32_t)t_below(s, 3);
                e->drain_blocks = t_u64(s);
                e->drain_bytes = t_u64(s);
            }
        }
        if (!(r->flags & MC_PROTO_INFO_F_SEGMENTS))
            break;
        r->nseg = nseg;
        r->next_cursor = t_u32(s);
        for (uint32_t i = 0; i < nseg; i++) {
            struct mc_proto_seg_entry *e = &m->segs[i];

            memset(e, 0, sizeof(*e));
            e->seg = t_u32(s);
            e->info.node = t_u32(s);
            e->info.kind = (uint32_t)t_below(s, 3);
            e->info.base = t_u64(s);
            e->info.size = t_u64(s);
            e->info.free_bytes = t_below(s, e->info.size);
            e->info.largest_free = t_below(s, e->info.free_bytes);
            e->info.hard_pinned_bytes = t_below(s, e->info.size);
            e->info.blocks = t_u64(s);
            e->info.evictions = t_u64(s);
            e->worker_addr = t_bytes(m, s, 1, t_below(s, 4) ? 200 : MC_PROTO_ADDR_MAX, false);
            e->rkey = t_bytes(m, s, 0, t_below(s, 4) ? 200 : MC_PROTO_RKEY_MAX, false);
        }
        break;
    }
    case MC_WIRE_LIST:
        m->list_req = (struct mc_proto_list_req){
            t_node(s), 1 + (uint32_t)t_below(s, MC_PROTO_LIST_MAX), t_u64(s),
            t_bytes(m, s, 0, t_below(s, 8) == 0 ? MC_PROTO_KEY_MAX : 16, false)};
        break;
    case MC_WIRE_LIST_REPLY:
        m->list_rep = (struct mc_proto_list_rep){call, n, call == 0 ? t_u64(s) : 0};
        for (uint32_t i = 0; i < n; i++)
            t_key(m, s, &m->keys[i].key, &m->keys[i].key_len);
        break;
    case MC_WIRE_DRAIN:
        m->drain_req = (struct mc_proto_drain_req){(uint32_t)t_below(s, 2),
                                                   t_bytes(m, s, 1, MC_PROTO_NAME_MAX, true)};
        break;
    case MC_WIRE_COPY:
        m->copy_req = (struct mc_proto_copy_req){
            .id = 1 + t_below(s, UINT64_MAX), .version = t_u64(s), .src_seg = t_u32(s),
            .src_alloc = t_u32(s), .src_offset = t_u64(s), .len = 1 + t_below(s, UINT64_MAX),
            .dst_node = t_node(s), .dst_seg = t_u32(s), .dst_alloc = t_u32(s),
            .dst_offset = t_u64(s)};
        {
            const char *k;
            size_t kl;

            t_key(m, s, &k, &kl);
            m->copy_req.key = (struct mc_proto_bytes){(const uint8_t *)k, kl};
        }
        break;
    case MC_WIRE_DRAIN_REPLY:
    case MC_WIRE_COPY_REPLY:
        m->status_rep.status = call;
        break;
    default:
        break;
    }
}

#endif /* MC_T_MASTER_MSG_H */
