/*
 * The RPC frame codec (wire.h): header encode/decode and the bounded reader/writer. Byte
 * order is fixed little-endian and written byte by byte, so the code needs no alignment and
 * no byte-swap intrinsics, and reads the same on any host.
 */
#include "ucx_backend/wire.h"

#include <string.h>

#include "mc/mc_status.h"

static inline void le16_store(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void le32_store(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void le64_store(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t le16_load(const uint8_t *p)
{
    return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static inline uint32_t le32_load(const uint8_t *p)
{
    uint32_t v = 0;

    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline uint64_t le64_load(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

bool mc_wire_type_is_valid(unsigned int type)
{
    return type >= 1 && type < MC_WIRE_TYPE_END;
}

bool mc_wire_type_is_reply(unsigned int type)
{
    return mc_wire_type_is_valid(type) && type % 2 == 0;
}

/* The checks both directions share; len is the frame's received length (decode) or the
 * length the frame will have (encode). */
static bool hdr_is_valid(const struct mc_wire_hdr *h, size_t len)
{
    if (h->magic != MC_WIRE_MAGIC || h->version != MC_WIRE_VERSION)
        return false;
    if (!mc_wire_type_is_valid(h->type))
        return false;
    if ((h->flags & ~MC_WIRE_F_KNOWN) != 0)
        return false;
    if (((h->flags & MC_WIRE_F_REPLY) != 0) != mc_wire_type_is_reply(h->type))
        return false;
    if (h->payload_len > MC_WIRE_PAYLOAD_MAX)
        return false;
    return len >= MC_WIRE_HDR_SIZE && h->payload_len == len - MC_WIRE_HDR_SIZE;
}

void mc_wire_hdr_init(struct mc_wire_hdr *h, uint16_t type, uint64_t request_id,
                      uint32_t payload_len, uint32_t flags)
{
    h->magic = MC_WIRE_MAGIC;
    h->version = MC_WIRE_VERSION;
    h->type = type;
    h->request_id = request_id;
    h->payload_len = payload_len;
    h->flags = flags;
}

int mc_wire_hdr_encode(const struct mc_wire_hdr *h, void *buf, size_t cap)
{
    uint8_t *p = buf;

    if (cap < MC_WIRE_HDR_SIZE || !hdr_is_valid(h, MC_WIRE_HDR_SIZE + (size_t)h->payload_len))
        return MC_ERR_INVALID;
    le32_store(p + 0, h->magic);
    le16_store(p + 4, h->version);
    le16_store(p + 6, h->type);
    le64_store(p + 8, h->request_id);
    le32_store(p + 16, h->payload_len);
    le32_store(p + 20, h->flags);
    return 0;
}

int mc_wire_hdr_decode(const void *buf, size_t len, struct mc_wire_hdr *hdr_p)
{
    const uint8_t *p = buf;
    struct mc_wire_hdr h;

    if (buf == NULL || len < MC_WIRE_HDR_SIZE)
        return MC_ERR_PROTO;
    h.magic = le32_load(p + 0);
    h.version = le16_load(p + 4);
    h.type = le16_load(p + 6);
    h.request_id = le64_load(p + 8);
    h.payload_len = le32_load(p + 16);
    h.flags = le32_load(p + 20);
    if (!hdr_is_valid(&h, len))
        return MC_ERR_PROTO;
    *hdr_p = h;
    return 0;
}

/* --- reader ------------------------------------------------------------------------------ */

void mc_wire_reader_init(struct mc_wire_reader *r, const void *buf, size_t len)
{
    r->p = buf;
    r->end = buf == NULL ? r->p : r->p + len; /* NULL + 0 is undefined */
    r->bad = buf == NULL && len != 0;
}

/* The next n bytes, or NULL once bad. Compares against the space left, never computes
 * p + n first: that pointer could overflow. */
static const uint8_t *take(struct mc_wire_reader *r, size_t n)
{
    const uint8_t *q;

    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        return NULL;
    }
    q = r->p;
    r->p += n;
    return q;
}

uint8_t mc_wire_get_u8(struct mc_wire_reader *r)
{
    const uint8_t *q = take(r, 1);

    return q == NULL ? 0 : q[0];
}

uint16_t mc_wire_get_u16(struct mc_wire_reader *r)
{
    const uint8_t *q = take(r, 2);

    return q == NULL ? 0 : le16_load(q);
}

uint32_t mc_wire_get_u32(struct mc_wire_reader *r)
{
    const uint8_t *q = take(r, 4);

    return q == NULL ? 0 : le32_load(q);
}

uint64_t mc_wire_get_u64(struct mc_wire_reader *r)
{
    const uint8_t *q = take(r, 8);

    return q == NULL ? 0 : le64_load(q);
}

const uint8_t *mc_wire_get_bytes(struct mc_wire_reader *r, size_t len)
{
    return take(r, len);
}

const uint8_t *mc_wire_get_blob(struct mc_wire_reader *r, size_t max, size_t *len_p)
{
    uint32_t n = mc_wire_get_u32(r);
    const uint8_t *q;

    *len_p = 0;
    if (!r->bad && n > max)
        r->bad = true;
    q = take(r, n);
    if (q != NULL)
        *len_p = n;
    return q;
}

size_t mc_wire_reader_left(const struct mc_wire_reader *r)
{
    return r->bad ? 0 : (size_t)(r->end - r->p);
}

bool mc_wire_reader_done(const struct mc_wire_reader *r)
{
    return !r->bad && r->p == r->end;
}

/* --- writer ------------------------------------------------------------------------------ */

void mc_wire_writer_init(struct mc_wire_writer *w, void *buf, size_t cap)
{
    w->p = buf;
    w->end = buf == NULL ? w->p : w->p + cap;
    w->bad = buf == NULL && cap != 0;
}

static uint8_t *reserve(struct mc_wire_writer *w, size_t n)
{
    uint8_t *q;

    if (w->bad || (size_t)(w->end - w->p) < n) {
        w->bad = true;
        return NULL;
    }
    q = w->p;
    w->p += n;
    return q;
}

void mc_wire_put_u8(struct mc_wire_writer *w, uint8_t v)
{
    uint8_t *q = reserve(w, 1);

    if (q != NULL)
        q[0] = v;
}

void mc_wire_put_u16(struct mc_wire_writer *w, uint16_t v)
{
    uint8_t *q = reserve(w, 2);

    if (q != NULL)
        le16_store(q, v);
}

void mc_wire_put_u32(struct mc_wire_writer *w, uint32_t v)
{
    uint8_t *q = reserve(w, 4);

    if (q != NULL)
        le32_store(q, v);
}

void mc_wire_put_u64(struct mc_wire_writer *w, uint64_t v)
{
    uint8_t *q = reserve(w, 8);

    if (q != NULL)
        le64_store(q, v);
}

void mc_wire_put_bytes(struct mc_wire_writer *w, const void *src, size_t len)
{
    uint8_t *q = reserve(w, len);

    if (q != NULL && len != 0) /* memcpy from NULL is undefined even for 0 bytes */
        memcpy(q, src, len);
}

void mc_wire_put_blob(struct mc_wire_writer *w, const void *src, size_t len)
{
    /* check the whole record first, so a blob that does not fit writes no prefix either */
    size_t room = w->bad ? 0 : (size_t)(w->end - w->p);

    if (len > UINT32_MAX || room < 4 || room - 4 < len)
        w->bad = true;
    mc_wire_put_u32(w, (uint32_t)len);
    mc_wire_put_bytes(w, src, len);
}
