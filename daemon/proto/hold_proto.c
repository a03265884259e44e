/*
 * PUBLISH and DROP payloads (hold_proto.h).
 */
#include "daemon/proto/hold_proto.h"

#include "daemon/proto/proto_int.h"

static bool publish_ok(const struct mc_proto_publish_item *it)
{
    return key_ok((const char *)it->key.p, it->key.len) && it->alloc_len > 0 &&
           it->size > 0 && it->size <= it->alloc_len && it->version > 0 &&
           it->offset <= UINT64_MAX - it->alloc_len &&
           (it->flags & ~MC_MASTER_PUT_FLAGS_ALL) == 0 && it->ttl_ms <= MC_MASTER_TTL_MAX_MS;
}

int mc_proto_publish_req_encode(uint32_t n, const struct mc_proto_publish_item *items,
                                void *buf, size_t cap, size_t *len_p)
{
    struct mc_wire_writer w;

    if (n == 0 || n > MC_PROTO_BATCH_MAX)
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, n);
    for (uint32_t i = 0; i < n; i++) {
        if (!publish_ok(&items[i]))
            return MC_ERR_INVALID;
        mc_wire_put_u64(&w, items[i].m_epoch);
        mc_wire_put_u64(&w, items[i].m_incarnation);
        mc_wire_put_u32(&w, items[i].seg);
        mc_wire_put_u32(&w, items[i].flags);
        mc_wire_put_u64(&w, items[i].offset);
        mc_wire_put_u64(&w, items[i].alloc_len);
        mc_wire_put_u64(&w, items[i].size);
        mc_wire_put_u64(&w, items[i].version);
        mc_wire_put_u64(&w, items[i].ttl_ms);
        mc_wire_put_blob(&w, items[i].key.p, items[i].key.len);
    }
    return encode_end(&w, buf, len_p);
}

int mc_proto_publish_req_decode(const void *buf, size_t len, size_t cap, uint32_t *n_p,
                                struct mc_proto_publish_item *items)
{
    struct mc_wire_reader r;
    uint32_t n;

    mc_wire_reader_init(&r, buf, len);
    n = get_count(&r, cap);
    if (n == 0)
        r.bad = true;
    for (uint32_t i = 0; i < n && !r.bad; i++) {
        struct mc_proto_publish_item *it = &items[i];
        size_t klen = 0;

        it->m_epoch = mc_wire_get_u64(&r);
        it->m_incarnation = mc_wire_get_u64(&r);
        it->seg = mc_wire_get_u32(&r);
        it->flags = mc_wire_get_u32(&r);
        it->offset = mc_wire_get_u64(&r);
        it->alloc_len = mc_wire_get_u64(&r);
        it->size = mc_wire_get_u64(&r);
        it->version = mc_wire_get_u64(&r);
        it->ttl_ms = mc_wire_get_u64(&r);
        it->key.p = mc_wire_get_blob(&r, MC_PROTO_KEY_MAX, &klen);
        it->key.len = klen;
        if (!r.bad && !publish_ok(it))
            r.bad = true;
    }
    *n_p = r.bad ? 0 : n;
    return decode_end(&r);
}

int mc_proto_drop_req_encode(uint32_t n, const struct mc_proto_drop_item *items, void *buf,
                             size_t cap, size_t *len_p)
{
    struct mc_wire_writer w;

    if (n == 0 || n > MC_PROTO_BATCH_MAX || (items[0].flags & ~MC_PROTO_DROP_F_KNOWN) != 0)
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, n);
    for (uint32_t i = 0; i < n; i++) {
        if (items[i].version == 0 || items[i].flags != items[0].flags)
            return MC_ERR_INVALID;
        mc_wire_put_u32(&w, items[i].seg);
        mc_wire_put_u64(&w, items[i].offset);
        mc_wire_put_u64(&w, items[i].version);
    }
    /* one encoding per message: no flags is nothing */
    if (items[0].flags != 0)
        mc_wire_put_u32(&w, items[0].flags);
    return encode_end(&w, buf, len_p);
}

int mc_proto_drop_req_decode(const void *buf, size_t len, size_t cap, uint32_t *n_p,
                             struct mc_proto_drop_item *items)
{
    struct mc_wire_reader r;
    uint32_t n, flags = 0;

    mc_wire_reader_init(&r, buf, len);
    n = get_count(&r, cap);
    if (n == 0)
        r.bad = true;
    for (uint32_t i = 0; i < n && !r.bad; i++) {
        items[i].seg = mc_wire_get_u32(&r);
        items[i].offset = mc_wire_get_u64(&r);
        items[i].version = mc_wire_get_u64(&r);
        if (items[i].version == 0)
            r.bad = true;
    }
    /* optional, after the items; never 0 when there, no unknown bit */
    if (!r.bad && mc_wire_reader_left(&r) > 0) {
        flags = mc_wire_get_u32(&r);
        if (flags == 0 || (flags & ~MC_PROTO_DROP_F_KNOWN) != 0)
            r.bad = true;
    }
    for (uint32_t i = 0; i < n && !r.bad; i++)
        items[i].flags = flags;
    *n_p = r.bad ? 0 : n;
    return decode_end(&r);
}
