/*
 * The codecs of the node and cluster messages of the master RPCs (master_proto.h): HELLO,
 * MOUNT, HEARTBEAT, CLUSTER_INFO, LIST, DRAIN, COPY and the status-only reply; the object
 * batches are master_batch.c. The layouts are the rows of daemon/proto/rpc.h
 * (docs/protocol.md shows them); the sizes below show that a full batch or page fits in one
 * frame.
 *
 * The lease's version is not sent: it is the result's version (a lease is granted on the
 * version returned), so the decoder sets it and the encoder refuses anything else.
 *
 * Each decoder reads with the sticky reader and marks it bad on the first field that fails
 * a check, so a message is refused by one test at the end (mc_wire_reader_done: no failed
 * read, no trailing byte). Loops are bounded by counts checked before the loop.
 */
#include "daemon/proto/master_proto.h"

#include <assert.h>
#include <string.h>

#include "mc/mc_status.h"

#include "daemon/proto/proto_int.h"

/* Worst-case encodings, to show that a full batch fits in one frame. */
#define MC_PROTO_SZ_BLOB(max) (4u + (max))
#define MC_PROTO_SZ_REPLICA   40u
#define MC_PROTO_SZ_PUT_START_ITEM                                                             \
    (MC_PROTO_SZ_BLOB(MC_PROTO_KEY_MAX) + 8u + 8u + 4u + 4u + 8u + 4u)
#define MC_PROTO_SZ_GET_REP_ITEM                                                               \
    (4u + 8u + 8u + 4u + 4u + MC_MASTER_MAX_REPLICAS * MC_PROTO_SZ_REPLICA + 4u + 8u)
#define MC_PROTO_SZ_PUT_START_REP_ITEM                                                         \
    (4u + 8u + 4u + MC_MASTER_MAX_REPLICAS * MC_PROTO_SZ_REPLICA)
#define MC_PROTO_SZ_REF_ITEM (MC_PROTO_SZ_BLOB(MC_PROTO_KEY_MAX) + 8u + 4u)
#define MC_PROTO_SZ_RESTORE_ITEM (MC_PROTO_SZ_BLOB(MC_PROTO_KEY_MAX) + 4u + 5u * 8u + 4u)
#define MC_PROTO_SZ_STAT     32u
#define MC_PROTO_SZ_SEG_ENTRY                                                                  \
    (4u + 4u + 4u + 7u * 8u + MC_PROTO_SZ_BLOB(MC_PROTO_ADDR_MAX) +                            \
     MC_PROTO_SZ_BLOB(MC_PROTO_RKEY_MAX) + MC_PROTO_SZ_BLOB(MC_TENANT_NAME_MAX) + 8u)
#define MC_PROTO_SZ_NODE_ENTRY                                                                 \
    (4u + 4u + 4u + 8u + 2u * MC_PROTO_SZ_BLOB(MC_PROTO_NAME_MAX) + 4u + 8u + 8u)
#define MC_PROTO_STATS_FIELDS  26u

static_assert(12u + MC_PROTO_BATCH_MAX * MC_PROTO_SZ_PUT_START_ITEM <= MC_WIRE_PAYLOAD_MAX,
              "put batch");
static_assert(8u + MC_PROTO_BATCH_MAX * MC_PROTO_SZ_PUT_START_REP_ITEM <= MC_WIRE_PAYLOAD_MAX,
              "grants");
static_assert(8u + MC_PROTO_BATCH_MAX * MC_PROTO_SZ_GET_REP_ITEM <= MC_WIRE_PAYLOAD_MAX,
              "get reply");
static_assert(8u + MC_PROTO_BATCH_MAX * MC_PROTO_SZ_RESTORE_ITEM <= MC_WIRE_PAYLOAD_MAX,
              "a full RESTORE_BATCH fits one frame");
static_assert(8u + MC_PROTO_BATCH_MAX * MC_PROTO_SZ_REF_ITEM <= MC_WIRE_PAYLOAD_MAX,
              "ref batch");
static_assert(12u + MC_PROTO_BATCH_MAX * (4u + MC_PROTO_SZ_STAT) <= MC_WIRE_PAYLOAD_MAX,
              "exist reply");
static_assert(24u + MC_PROTO_STATS_FIELDS * 8u + MC_PROTO_SEG_PAGE_MAX * MC_PROTO_SZ_SEG_ENTRY +
                      MC_PROTO_NODE_PAGE_MAX * MC_PROTO_SZ_NODE_ENTRY <=
                  MC_WIRE_PAYLOAD_MAX,
              "cluster info page");
/* a full LIST page of the longest keys always fits: the server never has to cut one short */
static_assert(16u + MC_PROTO_LIST_MAX * MC_PROTO_SZ_BLOB(MC_PROTO_KEY_MAX) <=
                  MC_WIRE_PAYLOAD_MAX,
              "list reply");
static_assert(MC_PROTO_KEY_MAX == MC_KEY_MAX + MC_TENANT_TAG_MAX, "a tagged MC_KEY_MAX");
static_assert(MC_PROTO_NAME_MAX == MC_MASTER_NAME_MAX, "names");
static_assert(MC_PROTO_BATCH_MAX <= UINT32_MAX, "counts are u32");
static_assert(MC_PROTO_LIST_MAX <= MC_PROTO_BATCH_MAX, "get_count clamps to the batch max");
static_assert(MC_PROTO_NODE_PAGE_MAX <= MC_PROTO_BATCH_MAX,
              "get_count clamps to the batch max");

/* The stats travel as MC_PROTO_STATS_FIELDS u64s in this order. A field added to struct
 * mc_master_stats breaks the size assertion below until it is added here (and the frame
 * version bumped). */
#define MC_PROTO_STAT_FIELD(f) offsetof(struct mc_master_stats, f)
static const size_t stats_fields[MC_PROTO_STATS_FIELDS] = {
    MC_PROTO_STAT_FIELD(objects),
    MC_PROTO_STAT_FIELD(nodes_alive),
    MC_PROTO_STAT_FIELD(segments),
    MC_PROTO_STAT_FIELD(capacity_bytes),
    MC_PROTO_STAT_FIELD(used_bytes),
    MC_PROTO_STAT_FIELD(puts_started),
    MC_PROTO_STAT_FIELD(puts_completed),
    MC_PROTO_STAT_FIELD(puts_revoked),
    MC_PROTO_STAT_FIELD(puts_canceled),
    MC_PROTO_STAT_FIELD(puts_displaced),
    MC_PROTO_STAT_FIELD(gets),
    MC_PROTO_STAT_FIELD(get_misses),
    MC_PROTO_STAT_FIELD(lease_grants),
    MC_PROTO_STAT_FIELD(lease_releases),
    MC_PROTO_STAT_FIELD(lease_expiries),
    MC_PROTO_STAT_FIELD(evictions),
    MC_PROTO_STAT_FIELD(evicted_bytes),
    MC_PROTO_STAT_FIELD(ttl_expiries),
    MC_PROTO_STAT_FIELD(removes),
    MC_PROTO_STAT_FIELD(stale_freed_by_writer),
    MC_PROTO_STAT_FIELD(stale_freed_by_fence),
    MC_PROTO_STAT_FIELD(stale_freed_by_timeout),
    MC_PROTO_STAT_FIELD(nodes_declared_dead),
    MC_PROTO_STAT_FIELD(meta_bytes),
    MC_PROTO_STAT_FIELD(restores),
    MC_PROTO_STAT_FIELD(restores_refused),
};
static_assert(sizeof(struct mc_master_stats) == MC_PROTO_STATS_FIELDS * sizeof(uint64_t),
              "every field of struct mc_master_stats is in stats_fields");

/* --- HELLO -------------------------------------------------------------------------------- */

int mc_proto_hello_req_encode(const struct mc_proto_hello_req *m, void *buf, size_t cap,
                              size_t *len_p)
{
    struct mc_wire_writer w;

    if (!bytes_ok(m->token.p, m->token.len, 0, MC_PROTO_TOKEN_MAX) || !name_ok(&m->name, 1) ||
        !name_ok(&m->domain, 0) || (m->flags & ~MC_PROTO_HELLO_F_KNOWN) != 0 ||
        (m->flags != 0 && m->incarnation == 0))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_blob(&w, m->token.p, m->token.len);
    mc_wire_put_blob(&w, m->name.p, m->name.len);
    mc_wire_put_blob(&w, m->domain.p, m->domain.len);
    if (m->incarnation != 0)
        mc_wire_put_u64(&w, m->incarnation);
    if (m->flags != 0)
        mc_wire_put_u32(&w, m->flags);
    return encode_end(&w, buf, len_p);
}

int mc_proto_hello_req_decode(const void *buf, size_t len, struct mc_proto_hello_req *m_p)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    get_bytes(&r, 0, MC_PROTO_TOKEN_MAX, &m_p->token);
    get_name(&r, 1, &m_p->name);
    get_name(&r, 0, &m_p->domain);
    /* optional: a HELLO without it is from a sender that predates it. One that is there is
     * never 0: 0 means "none" and is sent as nothing (one encoding per message) */
    m_p->incarnation = 0;
    if (!r.bad && mc_wire_reader_left(&r) > 0) {
        m_p->incarnation = mc_wire_get_u64(&r);
        if (m_p->incarnation == 0)
            fail(&r);
    }
    /* optional as well, after the incarnation; never 0 when there */
    m_p->flags = 0;
    if (!r.bad && mc_wire_reader_left(&r) > 0) {
        m_p->flags = mc_wire_get_u32(&r);
        if (m_p->flags == 0 || (m_p->flags & ~MC_PROTO_HELLO_F_KNOWN) != 0)
            fail(&r);
    }
    return decode_end(&r);
}

int mc_proto_hello_rep_encode(const struct mc_proto_hello_rep *m, void *buf, size_t cap,
                              size_t *len_p)
{
    struct mc_wire_writer w;

    if (!mc_proto_status_is_valid(m->status, false))
        return MC_ERR_INVALID;
    if (m->status == 0 &&
        (m->node == MC_MASTER_NODE_NONE || m->node_ttl_ms == 0 || m->lease_ttl_ms == 0))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, u32_from_i32(m->status));
    if (m->status == 0) {
        mc_wire_put_u32(&w, m->node);
        mc_wire_put_u64(&w, m->node_ttl_ms);
        mc_wire_put_u64(&w, m->lease_ttl_ms);
        if (m->epoch != 0 || m->incarnation != 0)
            mc_wire_put_u64(&w, m->epoch);
        if (m->incarnation != 0)
            mc_wire_put_u64(&w, m->incarnation);
    }
    return encode_end(&w, buf, len_p);
}

int mc_proto_hello_rep_decode(const void *buf, size_t len, struct mc_proto_hello_rep *m_p)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    memset(m_p, 0, sizeof(*m_p));
    m_p->node = MC_MASTER_NODE_NONE;
    if (get_call_status(&r, &m_p->status)) {
        m_p->node = mc_wire_get_u32(&r);
        m_p->node_ttl_ms = mc_wire_get_u64(&r);
        m_p->lease_ttl_ms = mc_wire_get_u64(&r);
        if (m_p->node == MC_MASTER_NODE_NONE || m_p->node_ttl_ms == 0 || m_p->lease_ttl_ms == 0)
            fail(&r);
        if (!r.bad && mc_wire_reader_left(&r) > 0) {
            m_p->epoch = mc_wire_get_u64(&r);
            if (!r.bad && mc_wire_reader_left(&r) > 0) {
                m_p->incarnation = mc_wire_get_u64(&r);
                if (m_p->incarnation == 0)
                    fail(&r);
            } else if (m_p->epoch == 0) {
                fail(&r);
            }
        }
    }
    return decode_end(&r);
}

/* --- MOUNT -------------------------------------------------------------------------------- */

/* A tenant's name: a blob of 0 (the default tenant) to MC_TENANT_NAME_MAX bytes. */
static bool tenant_ok(const char *name)
{
    size_t n = strnlen(name, MC_TENANT_NAME_MAX + 1);

    return n == 0 || mc_tenant_name_ok(name, n);
}

static void put_tenant(struct mc_wire_writer *w, const char *name)
{
    mc_wire_put_blob(w, name, strnlen(name, MC_TENANT_NAME_MAX));
}

static void get_tenant(struct mc_wire_reader *r, char out[MC_TENANT_NAME_MAX + 1])
{
    struct mc_proto_bytes b;

    get_bytes(r, 0, MC_TENANT_NAME_MAX, &b);
    memset(out, 0, MC_TENANT_NAME_MAX + 1);
    if (r->bad)
        return;
    if (b.len > 0 && !mc_tenant_name_ok((const char *)b.p, b.len)) {
        fail(r);
        return;
    }
    memcpy(out, b.p, b.len);
}

static bool seg_desc_ok(const struct mc_master_seg_desc *d)
{
    return d->node != MC_MASTER_NODE_NONE && kind_ok(d->kind) && d->size > 0 &&
           d->size <= UINT64_MAX - d->base && tenant_ok(d->tenant) &&
           (d->flags & ~MC_MASTER_SEG_F_ALL) == 0;
}

int mc_proto_mount_req_encode(const struct mc_proto_mount_req *m, void *buf, size_t cap,
                              size_t *len_p)
{
    struct mc_wire_writer w;

    if (!seg_desc_ok(&m->seg) ||
        !bytes_ok(m->worker_addr.p, m->worker_addr.len, 1, MC_PROTO_ADDR_MAX) ||
        !bytes_ok(m->rkey.p, m->rkey.len, 0, MC_PROTO_RKEY_MAX))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, m->seg.node);
    mc_wire_put_u32(&w, m->seg.kind);
    mc_wire_put_u64(&w, m->seg.base);
    mc_wire_put_u64(&w, m->seg.size);
    mc_wire_put_blob(&w, m->worker_addr.p, m->worker_addr.len);
    mc_wire_put_blob(&w, m->rkey.p, m->rkey.len);
    put_tenant(&w, m->seg.tenant);
    mc_wire_put_u64(&w, m->seg.quota);
    mc_wire_put_u32(&w, m->seg.flags);
    return encode_end(&w, buf, len_p);
}

int mc_proto_mount_req_decode(const void *buf, size_t len, struct mc_proto_mount_req *m_p)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    memset(&m_p->seg, 0, sizeof(m_p->seg));
    m_p->seg.node = mc_wire_get_u32(&r);
    m_p->seg.kind = mc_wire_get_u32(&r);
    m_p->seg.base = mc_wire_get_u64(&r);
    m_p->seg.size = mc_wire_get_u64(&r);
    get_bytes(&r, 1, MC_PROTO_ADDR_MAX, &m_p->worker_addr);
    get_bytes(&r, 0, MC_PROTO_RKEY_MAX, &m_p->rkey);
    get_tenant(&r, m_p->seg.tenant);
    m_p->seg.quota = mc_wire_get_u64(&r);
    m_p->seg.flags = mc_wire_get_u32(&r);
    if (!seg_desc_ok(&m_p->seg))
        fail(&r);
    return decode_end(&r);
}

int mc_proto_mount_rep_encode(const struct mc_proto_mount_rep *m, void *buf, size_t cap,
                              size_t *len_p)
{
    struct mc_wire_writer w;

    if (!mc_proto_status_is_valid(m->status, false))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, u32_from_i32(m->status));
    if (m->status == 0)
        mc_wire_put_u32(&w, m->seg);
    return encode_end(&w, buf, len_p);
}

int mc_proto_mount_rep_decode(const void *buf, size_t len, struct mc_proto_mount_rep *m_p)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->seg = 0;
    if (get_call_status(&r, &m_p->status))
        m_p->seg = mc_wire_get_u32(&r);
    return decode_end(&r);
}

/* --- HEARTBEAT ---------------------------------------------------------------------------- */

int mc_proto_heartbeat_req_encode(const struct mc_proto_heartbeat_req *m, void *buf, size_t cap,
                                  size_t *len_p)
{
    struct mc_wire_writer w;

    if (m->node == MC_MASTER_NODE_NONE || (m->flags & ~MC_PROTO_HEARTBEAT_F_KNOWN) != 0)
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, m->node);
    mc_wire_put_u32(&w, m->flags);
    return encode_end(&w, buf, len_p);
}

int mc_proto_heartbeat_req_decode(const void *buf, size_t len,
                                  struct mc_proto_heartbeat_req *m_p)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->node = mc_wire_get_u32(&r);
    m_p->flags = mc_wire_get_u32(&r);
    if (m_p->node == MC_MASTER_NODE_NONE || (m_p->flags & ~MC_PROTO_HEARTBEAT_F_KNOWN) != 0)
        fail(&r);
    return decode_end(&r);
}

int mc_proto_status_rep_encode(const struct mc_proto_status_rep *m, void *buf, size_t cap,
                               size_t *len_p)
{
    struct mc_wire_writer w;

    if (!mc_proto_status_is_valid(m->status, false))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, u32_from_i32(m->status));
    return encode_end(&w, buf, len_p);
}

int mc_proto_status_rep_decode(const void *buf, size_t len, struct mc_proto_status_rep *m_p)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->status = get_status(&r, false);
    return decode_end(&r);
}

int mc_proto_heartbeat_rep_encode(const struct mc_proto_heartbeat_rep *m, void *buf, size_t cap,
                                  size_t *len_p)
{
    struct mc_wire_writer w;

    if (!mc_proto_status_is_valid(m->status, false) || m->drain > MC_MASTER_DRAIN_DRAINED ||
        (m->status != 0 && m->drain != 0))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, u32_from_i32(m->status));
    if (m->drain != 0)
        mc_wire_put_u32(&w, m->drain);
    return encode_end(&w, buf, len_p);
}

int mc_proto_heartbeat_rep_decode(const void *buf, size_t len, struct mc_proto_heartbeat_rep *m_p)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->status = get_status(&r, false);
    m_p->drain = 0;
    /* optional, and never 0 when there (0 is sent as nothing): one encoding per message */
    if (!r.bad && m_p->status == 0 && mc_wire_reader_left(&r) > 0) {
        m_p->drain = mc_wire_get_u32(&r);
        if (m_p->drain == 0 || m_p->drain > MC_MASTER_DRAIN_DRAINED)
            fail(&r);
    }
    return decode_end(&r);
}

/* --- CLUSTER_INFO ------------------------------------------------------------------------- */

static bool info_req_ok(const struct mc_proto_info_req *m)
{
    if ((m->flags & ~MC_PROTO_INFO_F_KNOWN) != 0)
        return false;
    if (m->flags & MC_PROTO_INFO_F_SEGMENTS) {
        if (m->max < 1 || m->max > MC_PROTO_SEG_PAGE_MAX)
            return false;
    } else if (m->max != 0 || m->cursor != 0) {
        return false;
    }
    if (m->flags & MC_PROTO_INFO_F_NODES)
        return m->node_max >= 1 && m->node_max <= MC_PROTO_NODE_PAGE_MAX;
    return m->node_max == 0 && m->node_cursor == 0;
}

int mc_proto_info_req_encode(const struct mc_proto_info_req *m, void *buf, size_t cap,
                             size_t *len_p)
{
    struct mc_wire_writer w;

    if (!info_req_ok(m))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, m->flags);
    mc_wire_put_u32(&w, m->cursor);
    mc_wire_put_u32(&w, m->max);
    mc_wire_put_u32(&w, m->node_cursor);
    mc_wire_put_u32(&w, m->node_max);
    return encode_end(&w, buf, len_p);
}

int mc_proto_info_req_decode(const void *buf, size_t len, struct mc_proto_info_req *m_p)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->flags = mc_wire_get_u32(&r);
    m_p->cursor = mc_wire_get_u32(&r);
    m_p->max = mc_wire_get_u32(&r);
    m_p->node_cursor = mc_wire_get_u32(&r);
    m_p->node_max = mc_wire_get_u32(&r);
    if (!info_req_ok(m_p))
        fail(&r);
    return decode_end(&r);
}

static bool seg_info_ok(const struct mc_master_seg_info *s)
{
    return kind_ok(s->kind) && s->free_bytes <= s->size && s->largest_free <= s->free_bytes &&
           s->hard_pinned_bytes <= s->size && tenant_ok(s->tenant);
}

static bool seg_entry_ok(const struct mc_proto_seg_entry *e)
{
    return seg_info_ok(&e->info) &&
           bytes_ok(e->worker_addr.p, e->worker_addr.len, 1, MC_PROTO_ADDR_MAX) &&
           bytes_ok(e->rkey.p, e->rkey.len, 0, MC_PROTO_RKEY_MAX);
}

static bool node_entry_ok(const struct mc_proto_node_entry *e)
{
    return e->alive <= 1 && name_ok(&e->name, 1) && name_ok(&e->domain, 1) &&
           e->drain <= MC_MASTER_DRAIN_DRAINED;
}

static bool info_rep_ok(const struct mc_proto_info_rep *m)
{
    bool with_segs = (m->flags & MC_PROTO_INFO_F_SEGMENTS) != 0;
    bool with_nodes = (m->flags & MC_PROTO_INFO_F_NODES) != 0;

    if (!mc_proto_status_is_valid(m->status, false) || (m->flags & ~MC_PROTO_INFO_F_KNOWN) != 0)
        return false;
    if (with_segs ? m->nseg > MC_PROTO_SEG_PAGE_MAX : m->nseg != 0 || m->next_cursor != 0)
        return false;
    return with_nodes ? m->nnode <= MC_PROTO_NODE_PAGE_MAX
                      : m->nnode == 0 && m->next_node_cursor == 0;
}

static void put_seg_entry(struct mc_wire_writer *w, const struct mc_proto_seg_entry *e)
{
    mc_wire_put_u32(w, e->seg);
    mc_wire_put_u32(w, e->info.node);
    mc_wire_put_u32(w, e->info.kind);
    mc_wire_put_u64(w, e->info.base);
    mc_wire_put_u64(w, e->info.size);
    mc_wire_put_u64(w, e->info.free_bytes);
    mc_wire_put_u64(w, e->info.largest_free);
    mc_wire_put_u64(w, e->info.hard_pinned_bytes);
    mc_wire_put_u64(w, e->info.blocks);
    mc_wire_put_u64(w, e->info.evictions);
    mc_wire_put_blob(w, e->worker_addr.p, e->worker_addr.len);
    mc_wire_put_blob(w, e->rkey.p, e->rkey.len);
    put_tenant(w, e->info.tenant);
    mc_wire_put_u64(w, e->info.quota);
}

static void get_seg_entry(struct mc_wire_reader *r, struct mc_proto_seg_entry *e)
{
    memset(e, 0, sizeof(*e));
    e->seg = mc_wire_get_u32(r);
    e->info.node = mc_wire_get_u32(r);
    e->info.kind = mc_wire_get_u32(r);
    e->info.base = mc_wire_get_u64(r);
    e->info.size = mc_wire_get_u64(r);
    e->info.free_bytes = mc_wire_get_u64(r);
    e->info.largest_free = mc_wire_get_u64(r);
    e->info.hard_pinned_bytes = mc_wire_get_u64(r);
    e->info.blocks = mc_wire_get_u64(r);
    e->info.evictions = mc_wire_get_u64(r);
    get_bytes(r, 1, MC_PROTO_ADDR_MAX, &e->worker_addr);
    get_bytes(r, 0, MC_PROTO_RKEY_MAX, &e->rkey);
    get_tenant(r, e->info.tenant);
    e->info.quota = mc_wire_get_u64(r);
    if (!seg_info_ok(&e->info))
        fail(r);
}

static void put_node_entry(struct mc_wire_writer *w, const struct mc_proto_node_entry *e)
{
    mc_wire_put_u32(w, e->id);
    mc_wire_put_u32(w, e->alive);
    mc_wire_put_u32(w, e->segments);
    mc_wire_put_u64(w, e->idle_ms);
    mc_wire_put_blob(w, e->name.p, e->name.len);
    mc_wire_put_blob(w, e->domain.p, e->domain.len);
    mc_wire_put_u32(w, e->drain);
    mc_wire_put_u64(w, e->drain_blocks);
    mc_wire_put_u64(w, e->drain_bytes);
}

static void get_node_entry(struct mc_wire_reader *r, struct mc_proto_node_entry *e)
{
    memset(e, 0, sizeof(*e));
    e->id = mc_wire_get_u32(r);
    e->alive = mc_wire_get_u32(r);
    if (e->alive > 1)
        fail(r);
    e->segments = mc_wire_get_u32(r);
    e->idle_ms = mc_wire_get_u64(r);
    get_name(r, 1, &e->name);
    get_name(r, 1, &e->domain);
    e->drain = mc_wire_get_u32(r);
    if (e->drain > MC_MASTER_DRAIN_DRAINED)
        fail(r);
    e->drain_blocks = mc_wire_get_u64(r);
    e->drain_bytes = mc_wire_get_u64(r);
}

int mc_proto_info_rep_encode(const struct mc_proto_info_rep *m,
                             const struct mc_proto_seg_entry *segs,
                             const struct mc_proto_node_entry *nodes, void *buf, size_t cap,
                             size_t *len_p)
{
    struct mc_wire_writer w;

    if (!info_rep_ok(m))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, u32_from_i32(m->status));
    if (m->status != 0)
        return encode_end(&w, buf, len_p);
    mc_wire_put_u32(&w, m->flags);
    if (m->flags & MC_PROTO_INFO_F_STATS) {
        for (size_t i = 0; i < MC_PROTO_STATS_FIELDS; i++) {
            uint64_t v;

            memcpy(&v, (const char *)&m->stats + stats_fields[i], sizeof(v));
            mc_wire_put_u64(&w, v);
        }
    }
    if (m->flags & MC_PROTO_INFO_F_SEGMENTS) {
        mc_wire_put_u32(&w, m->nseg);
        mc_wire_put_u32(&w, m->next_cursor);
        for (uint32_t i = 0; i < m->nseg; i++) {
            if (!seg_entry_ok(&segs[i]))
                return MC_ERR_INVALID;
            put_seg_entry(&w, &segs[i]);
        }
    }
    if (m->flags & MC_PROTO_INFO_F_NODES) {
        mc_wire_put_u32(&w, m->nnode);
        mc_wire_put_u32(&w, m->next_node_cursor);
        for (uint32_t i = 0; i < m->nnode; i++) {
            if (!node_entry_ok(&nodes[i]))
                return MC_ERR_INVALID;
            put_node_entry(&w, &nodes[i]);
        }
    }
    return encode_end(&w, buf, len_p);
}

int mc_proto_info_rep_decode(const void *buf, size_t len, size_t cap,
                             struct mc_proto_info_rep *m_p, struct mc_proto_seg_entry *segs,
                             size_t node_cap, struct mc_proto_node_entry *nodes)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    memset(m_p, 0, sizeof(*m_p));
    if (!get_call_status(&r, &m_p->status))
        return decode_end(&r);
    m_p->flags = mc_wire_get_u32(&r);
    if ((m_p->flags & ~MC_PROTO_INFO_F_KNOWN) != 0)
        fail(&r);
    if (!r.bad && (m_p->flags & MC_PROTO_INFO_F_STATS) != 0) {
        for (size_t i = 0; i < MC_PROTO_STATS_FIELDS; i++) {
            uint64_t v = mc_wire_get_u64(&r);

            memcpy((char *)&m_p->stats + stats_fields[i], &v, sizeof(v));
        }
    }
    if (!r.bad && (m_p->flags & MC_PROTO_INFO_F_SEGMENTS) != 0) {
        m_p->nseg = get_count(&r, cap < MC_PROTO_SEG_PAGE_MAX ? cap : MC_PROTO_SEG_PAGE_MAX);
        m_p->next_cursor = mc_wire_get_u32(&r);
        for (uint32_t i = 0; i < m_p->nseg && !r.bad; i++)
            get_seg_entry(&r, &segs[i]);
    }
    if (!r.bad && (m_p->flags & MC_PROTO_INFO_F_NODES) != 0) {
        m_p->nnode = get_count(&r, node_cap < MC_PROTO_NODE_PAGE_MAX ? node_cap
                                                                     : MC_PROTO_NODE_PAGE_MAX);
        m_p->next_node_cursor = mc_wire_get_u32(&r);
        for (uint32_t i = 0; i < m_p->nnode && !r.bad; i++)
            get_node_entry(&r, &nodes[i]);
    }
    return decode_end(&r);
}

/* --- LIST --------------------------------------------------------------------------------- */

static bool list_req_ok(const struct mc_proto_list_req *m)
{
    return m->node != MC_MASTER_NODE_NONE && m->max >= 1 && m->max <= MC_PROTO_LIST_MAX &&
           bytes_ok(m->prefix.p, m->prefix.len, 0, MC_PROTO_KEY_MAX);
}

int mc_proto_list_req_encode(const struct mc_proto_list_req *m, void *buf, size_t cap,
                             size_t *len_p)
{
    struct mc_wire_writer w;

    if (!list_req_ok(m))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, m->node);
    mc_wire_put_u32(&w, m->max);
    mc_wire_put_u64(&w, m->cursor);
    mc_wire_put_blob(&w, m->prefix.p, m->prefix.len);
    return encode_end(&w, buf, len_p);
}

int mc_proto_list_req_decode(const void *buf, size_t len, struct mc_proto_list_req *m_p)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->node = mc_wire_get_u32(&r);
    m_p->max = mc_wire_get_u32(&r);
    m_p->cursor = mc_wire_get_u64(&r);
    if (m_p->node == MC_MASTER_NODE_NONE || m_p->max < 1 || m_p->max > MC_PROTO_LIST_MAX)
        fail(&r);
    get_bytes(&r, 0, MC_PROTO_KEY_MAX, &m_p->prefix);
    return decode_end(&r);
}

int mc_proto_list_rep_encode(const struct mc_proto_list_rep *m, const struct mc_proto_key *keys,
                             void *buf, size_t cap, size_t *len_p)
{
    struct mc_wire_writer w;

    if (!mc_proto_status_is_valid(m->status, false) || m->n > MC_PROTO_LIST_MAX ||
        (m->status != 0 && (m->n != 0 || m->next_cursor != 0)))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, u32_from_i32(m->status));
    if (m->status != 0)
        return encode_end(&w, buf, len_p);
    mc_wire_put_u32(&w, m->n);
    mc_wire_put_u64(&w, m->next_cursor);
    for (uint32_t i = 0; i < m->n; i++) {
        if (!key_ok(keys[i].key, keys[i].key_len))
            return MC_ERR_INVALID;
        mc_wire_put_blob(&w, keys[i].key, keys[i].key_len);
    }
    return encode_end(&w, buf, len_p);
}

int mc_proto_list_rep_decode(const void *buf, size_t len, size_t cap,
                             struct mc_proto_list_rep *m_p, struct mc_proto_key *keys)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    memset(m_p, 0, sizeof(*m_p));
    if (get_call_status(&r, &m_p->status)) {
        m_p->n = get_count(&r, cap < MC_PROTO_LIST_MAX ? cap : MC_PROTO_LIST_MAX);
        m_p->next_cursor = mc_wire_get_u64(&r);
        for (uint32_t i = 0; i < m_p->n && !r.bad; i++)
            get_key(&r, &keys[i].key, &keys[i].key_len);
    }
    return decode_end(&r);
}

static bool drain_req_ok(const struct mc_proto_drain_req *m)
{
    return m->on <= 1 && name_ok(&m->name, 1);
}

int mc_proto_drain_req_encode(const struct mc_proto_drain_req *m, void *buf, size_t cap,
                              size_t *len_p)
{
    struct mc_wire_writer w;

    if (!drain_req_ok(m))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, m->on);
    mc_wire_put_blob(&w, m->name.p, m->name.len);
    return encode_end(&w, buf, len_p);
}

int mc_proto_drain_req_decode(const void *buf, size_t len, struct mc_proto_drain_req *m_p)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->on = mc_wire_get_u32(&r);
    if (m_p->on > 1)
        fail(&r);
    get_name(&r, 1, &m_p->name);
    return decode_end(&r);
}

static bool copy_req_ok(const struct mc_proto_copy_req *m)
{
    return m->len > 0 && m->id != 0 && m->dst_node != MC_MASTER_NODE_NONE &&
           bytes_ok(m->key.p, m->key.len, 1, MC_PROTO_KEY_MAX);
}

int mc_proto_copy_req_encode(const struct mc_proto_copy_req *m, void *buf, size_t cap,
                             size_t *len_p)
{
    struct mc_wire_writer w;

    if (!copy_req_ok(m))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u64(&w, m->id);
    mc_wire_put_u64(&w, m->version);
    mc_wire_put_u32(&w, m->src_seg);
    mc_wire_put_u32(&w, m->src_alloc);
    mc_wire_put_u64(&w, m->src_offset);
    mc_wire_put_u64(&w, m->len);
    mc_wire_put_u32(&w, m->dst_node);
    mc_wire_put_u32(&w, m->dst_seg);
    mc_wire_put_u32(&w, m->dst_alloc);
    mc_wire_put_u64(&w, m->dst_offset);
    mc_wire_put_blob(&w, m->key.p, m->key.len);
    return encode_end(&w, buf, len_p);
}

int mc_proto_copy_req_decode(const void *buf, size_t len, struct mc_proto_copy_req *m_p)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->id = mc_wire_get_u64(&r);
    m_p->version = mc_wire_get_u64(&r);
    m_p->src_seg = mc_wire_get_u32(&r);
    m_p->src_alloc = mc_wire_get_u32(&r);
    m_p->src_offset = mc_wire_get_u64(&r);
    m_p->len = mc_wire_get_u64(&r);
    m_p->dst_node = mc_wire_get_u32(&r);
    m_p->dst_seg = mc_wire_get_u32(&r);
    m_p->dst_alloc = mc_wire_get_u32(&r);
    m_p->dst_offset = mc_wire_get_u64(&r);
    get_bytes(&r, 1, MC_PROTO_KEY_MAX, &m_p->key);
    if (!r.bad && !copy_req_ok(m_p))
        fail(&r);
    return decode_end(&r);
}
