/*
 * The pieces the master RPC codecs share (master_proto.c, master_batch.c): status and count
 * checks, the sticky-reader helpers for keys, names and replicas, and the ends of a decode
 * and of an encode. Inline: every item of every batch goes through them. Nothing outside
 * daemon/proto includes this file.
 */
#ifndef MC_PROTO_PROTO_INT_H
#define MC_PROTO_PROTO_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mc/mc_status.h>

#include "daemon/master/master.h"
#include "daemon/proto/proto_base.h"
#include "ucx_backend/wire.h"

static inline size_t clamp_cap(size_t cap)
{
    return cap < MC_PROTO_BATCH_MAX ? cap : MC_PROTO_BATCH_MAX;
}

/* Two's complement without implementation-defined conversions. */
static inline int32_t i32_from_u32(uint32_t v)
{
    if (v <= (uint32_t)INT32_MAX)
        return (int32_t)v;
    return (int32_t)(v - UINT32_C(0x80000000)) - INT32_MAX - 1;
}

static inline uint32_t u32_from_i32(int32_t v)
{
    return (uint32_t)v; /* well defined: modulo 2^32 */
}

static inline void fail(struct mc_wire_reader *r)
{
    r->bad = true;
}

static inline int32_t get_status(struct mc_wire_reader *r, bool allow_one)
{
    int32_t s = i32_from_u32(mc_wire_get_u32(r));

    if (!mc_proto_status_is_valid(s, allow_one))
        fail(r);
    return s;
}

static inline int decode_end(const struct mc_wire_reader *r)
{
    return mc_wire_reader_done(r) ? 0 : MC_ERR_PROTO;
}

static inline int encode_end(const struct mc_wire_writer *w, const void *buf, size_t *len_p)
{
    if (w->bad)
        return MC_ERR_TOO_LARGE;
    *len_p = (size_t)(w->p - (const uint8_t *)buf);
    return 0;
}

static inline bool bytes_ok(const uint8_t *p, size_t len, size_t min, size_t max)
{
    return len >= min && len <= max && (len == 0 || p != NULL);
}

static inline bool key_ok(const char *key, size_t len)
{
    return bytes_ok((const uint8_t *)key, len, 1, MC_PROTO_KEY_MAX);
}

/* Names go into logs and node tables: graphic ASCII only, no NUL, no spaces. */
static inline bool name_ok(const struct mc_proto_bytes *b, size_t min)
{
    if (!bytes_ok(b->p, b->len, min, MC_PROTO_NAME_MAX))
        return false;
    for (size_t i = 0; i < b->len; i++) {
        if (b->p[i] < 0x21 || b->p[i] > 0x7e)
            return false;
    }
    return true;
}

static inline void get_bytes(struct mc_wire_reader *r, size_t min, size_t max,
                      struct mc_proto_bytes *b)
{
    b->p = mc_wire_get_blob(r, max, &b->len);
    if (!r->bad && b->len < min)
        fail(r);
}

static inline void get_name(struct mc_wire_reader *r, size_t min, struct mc_proto_bytes *b)
{
    get_bytes(r, min, MC_PROTO_NAME_MAX, b);
    if (!r->bad && !name_ok(b, min))
        fail(r);
}

static inline void get_key(struct mc_wire_reader *r, const char **key_p, size_t *len_p)
{
    struct mc_proto_bytes b;

    get_bytes(r, 1, MC_PROTO_KEY_MAX, &b);
    *key_p = (const char *)b.p;
    *len_p = b.len;
}

/* A count of items for a caller's array of `cap`: u32, at most min(cap, batch max). */
static inline uint32_t get_count(struct mc_wire_reader *r, size_t cap)
{
    uint32_t n = mc_wire_get_u32(r);

    if (n > clamp_cap(cap))
        fail(r);
    return r->bad ? 0 : n;
}

static inline bool kind_ok(uint32_t kind)
{
    return kind <= MC_SEG_DISK;
}

static inline bool replica_ok(const struct mc_master_replica *rep)
{
    return kind_ok(rep->kind) && rep->len > 0;
}

static inline void put_replica(struct mc_wire_writer *w, const struct mc_master_replica *rep)
{
    mc_wire_put_u32(w, rep->seg);
    mc_wire_put_u32(w, rep->node);
    mc_wire_put_u32(w, rep->alloc);
    mc_wire_put_u32(w, rep->kind);
    mc_wire_put_u64(w, rep->offset);
    mc_wire_put_u64(w, rep->addr);
    mc_wire_put_u64(w, rep->len);
}

static inline void get_replica(struct mc_wire_reader *r, struct mc_master_replica *rep)
{
    rep->seg = mc_wire_get_u32(r);
    rep->node = mc_wire_get_u32(r);
    rep->alloc = mc_wire_get_u32(r);
    rep->kind = mc_wire_get_u32(r);
    rep->offset = mc_wire_get_u64(r);
    rep->addr = mc_wire_get_u64(r);
    rep->len = mc_wire_get_u64(r);
    if (!replica_ok(rep))
        fail(r);
}

static inline bool replicas_ok(uint32_t nrep, const struct mc_master_replica *rep)
{
    if (nrep < 1 || nrep > MC_MASTER_MAX_REPLICAS)
        return false;
    for (uint32_t i = 0; i < nrep; i++) {
        if (!replica_ok(&rep[i]))
            return false;
    }
    return true;
}

static inline uint32_t get_nrep(struct mc_wire_reader *r)
{
    uint32_t nrep = mc_wire_get_u32(r);

    if (nrep < 1 || nrep > MC_MASTER_MAX_REPLICAS)
        fail(r);
    return r->bad ? 0 : nrep;
}

/* The call status of a reply; on a failure nothing may follow it. Returns true when the
 * body follows (status 0). */
static inline bool get_call_status(struct mc_wire_reader *r, int32_t *status_p)
{
    *status_p = get_status(r, false);
    return !r->bad && *status_p == 0;
}

#endif /* MC_PROTO_PROTO_INT_H */
