/*
 * Agent-to-agent payload codecs (peer_proto.h), on the bounded reader/writer of wire.h.
 */
#include "daemon/proto/peer_proto.h"

#include "mc/mc_status.h"

static int end_write(struct mc_wire_writer *w, const void *buf, size_t *len_p)
{
    if (w->bad)
        return MC_ERR_TOO_LARGE;
    *len_p = (size_t)(w->p - (const uint8_t *)buf);
    return 0;
}

static int end_read(struct mc_wire_reader *r)
{
    return mc_wire_reader_done(r) ? 0 : MC_ERR_PROTO;
}

static bool span_ok(uint64_t offset, uint64_t len)
{
    return len > 0 && len <= MC_PEER_XFER_MAX && offset <= UINT64_MAX - len;
}

int mc_peer_write_hdr_encode(const struct mc_peer_write_hdr *m, void *buf, size_t cap,
                             size_t *len_p)
{
    struct mc_wire_writer w;

    if (!span_ok(m->offset, m->len) || m->key.len == 0 || m->key.len > MC_PROTO_KEY_MAX ||
        m->tail.len > MC_PEER_WRITE_TAIL_MAX || (m->tail.len != 0 && m->tail.p == NULL) ||
        !span_ok(m->offset, m->len + m->tail.len))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, m->seg);
    mc_wire_put_u32(&w, m->alloc);
    mc_wire_put_u64(&w, m->version);
    mc_wire_put_u64(&w, m->offset);
    mc_wire_put_u64(&w, m->len);
    mc_wire_put_blob(&w, m->key.p, m->key.len);
    if (m->tail.len != 0)
        mc_wire_put_blob(&w, m->tail.p, m->tail.len);
    return end_write(&w, buf, len_p);
}

int mc_peer_write_hdr_decode(const void *buf, size_t len, struct mc_peer_write_hdr *m_p)
{
    struct mc_wire_reader r;
    size_t klen = 0;

    mc_wire_reader_init(&r, buf, len);
    m_p->seg = mc_wire_get_u32(&r);
    m_p->alloc = mc_wire_get_u32(&r);
    m_p->version = mc_wire_get_u64(&r);
    m_p->offset = mc_wire_get_u64(&r);
    m_p->len = mc_wire_get_u64(&r);
    m_p->key.p = mc_wire_get_blob(&r, MC_PROTO_KEY_MAX, &klen);
    m_p->key.len = klen;
    m_p->tail.p = NULL;
    m_p->tail.len = 0;
    if (!r.bad && !mc_wire_reader_done(&r)) {
        size_t tlen = 0;

        /* optional: present, it is not empty */
        m_p->tail.p = mc_wire_get_blob(&r, MC_PEER_WRITE_TAIL_MAX, &tlen);
        m_p->tail.len = tlen;
        if (tlen == 0)
            r.bad = true;
    }
    if (klen == 0 || !span_ok(m_p->offset, m_p->len) ||
        !span_ok(m_p->offset, m_p->len + m_p->tail.len))
        r.bad = true;
    return end_read(&r);
}

static bool head_ok(uint64_t head, uint64_t len)
{
    return head == 0 || (head < len && len - head <= MC_PEER_READ_TAIL_MAX);
}

int mc_peer_read_req_encode(const struct mc_peer_read_req *m, void *buf, size_t cap,
                            size_t *len_p)
{
    struct mc_wire_writer w;

    if (!span_ok(m->offset, m->len) || !head_ok(m->head, m->len))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u64(&w, m->xfer);
    mc_wire_put_u32(&w, m->seg);
    mc_wire_put_u32(&w, m->alloc);
    mc_wire_put_u64(&w, m->version);
    mc_wire_put_u64(&w, m->offset);
    mc_wire_put_u64(&w, m->len);
    if (m->head != 0)
        mc_wire_put_u64(&w, m->head);
    return end_write(&w, buf, len_p);
}

int mc_peer_read_req_decode(const void *buf, size_t len, struct mc_peer_read_req *m_p)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->xfer = mc_wire_get_u64(&r);
    m_p->seg = mc_wire_get_u32(&r);
    m_p->alloc = mc_wire_get_u32(&r);
    m_p->version = mc_wire_get_u64(&r);
    m_p->offset = mc_wire_get_u64(&r);
    m_p->len = mc_wire_get_u64(&r);
    m_p->head = 0;
    if (!r.bad && !mc_wire_reader_done(&r)) {
        m_p->head = mc_wire_get_u64(&r); /* optional: present, it is not 0 */
        if (m_p->head == 0)
            r.bad = true;
    }
    if (!span_ok(m_p->offset, m_p->len) || !head_ok(m_p->head, m_p->len))
        r.bad = true;
    return end_read(&r);
}

int mc_peer_read_batch_encode(const struct mc_peer_read_req *items, uint32_t n, void *buf,
                              size_t cap, size_t *len_p)
{
    struct mc_wire_writer w;
    uint32_t i;

    if (n == 0 || n > MC_PROTO_READ_BATCH_MAX)
        return MC_ERR_INVALID;
    bool heads = false;

    for (i = 0; i < n; i++) {
        if (!span_ok(items[i].offset, items[i].len) || !head_ok(items[i].head, items[i].len))
            return MC_ERR_INVALID;
        heads = heads || items[i].head != 0;
    }
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, n);
    for (i = 0; i < n; i++) {
        mc_wire_put_u64(&w, items[i].xfer);
        mc_wire_put_u32(&w, items[i].seg);
        mc_wire_put_u32(&w, items[i].alloc);
        mc_wire_put_u64(&w, items[i].version);
        mc_wire_put_u64(&w, items[i].offset);
        mc_wire_put_u64(&w, items[i].len);
    }
    for (i = 0; heads && i < n; i++)
        mc_wire_put_u64(&w, items[i].head);
    return end_write(&w, buf, len_p);
}

int mc_peer_read_batch_decode(const void *buf, size_t len, uint32_t cap,
                              struct mc_peer_read_req *items, uint32_t *n_p)
{
    struct mc_wire_reader r;
    uint32_t n, i;

    mc_wire_reader_init(&r, buf, len);
    n = mc_wire_get_u32(&r);
    if (r.bad || n == 0 || n > MC_PROTO_READ_BATCH_MAX || n > cap)
        return MC_ERR_PROTO;
    for (i = 0; i < n && !r.bad; i++) {
        struct mc_peer_read_req *m = &items[i];

        m->xfer = mc_wire_get_u64(&r);
        m->seg = mc_wire_get_u32(&r);
        m->alloc = mc_wire_get_u32(&r);
        m->version = mc_wire_get_u64(&r);
        m->offset = mc_wire_get_u64(&r);
        m->len = mc_wire_get_u64(&r);
        m->head = 0;
        if (!span_ok(m->offset, m->len))
            r.bad = true;
    }
    if (!r.bad && !mc_wire_reader_done(&r)) {
        /* the optional heads: present, one of them is not 0 */
        bool some = false;

        for (i = 0; i < n && !r.bad; i++) {
            items[i].head = mc_wire_get_u64(&r);
            some = some || items[i].head != 0;
            if (!head_ok(items[i].head, items[i].len))
                r.bad = true;
        }
        if (!some)
            r.bad = true;
    }
    if (end_read(&r) != 0)
        return MC_ERR_PROTO;
    *n_p = n;
    return 0;
}
