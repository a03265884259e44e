/*
 * The codecs of the object batches of the master RPCs (master_proto.h): PUT_START, PUT_END,
 * PUT_REVOKE, GET, LEASE_RELEASE, EXIST and REMOVE batches and their replies, and FENCE
 * (master -> owner) with its reply. The layouts are the rows of daemon/proto/rpc.h
 * (docs/protocol.md, "Message layouts"); the checks every decoder makes are at the top of
 * master_proto.h.
 */
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/proto/master_proto.h"
#include "daemon/proto/proto_int.h"

/* --- PUT_START_BATCH ---------------------------------------------------------------------- */

static bool put_req_ok(const struct mc_master_put_req *q)
{
    return key_ok(q->key, q->key_len) && q->size > 0 &&
           (q->alloc_len == 0 || q->alloc_len >= q->size) &&
           q->replicas <= MC_MASTER_MAX_REPLICAS && (q->flags & ~MC_MASTER_PUT_FLAGS_ALL) == 0;
}

int mc_proto_put_start_req_encode(const struct mc_proto_put_start_req *m,
                                  const struct mc_master_put_req *items, void *buf, size_t cap,
                                  size_t *len_p)
{
    struct mc_wire_writer w;

    if (m->writer == MC_MASTER_NODE_NONE || m->n > MC_PROTO_BATCH_MAX)
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, m->writer);
    mc_wire_put_u32(&w, m->n);
    for (uint32_t i = 0; i < m->n; i++) {
        const struct mc_master_put_req *q = &items[i];

        if (!put_req_ok(q))
            return MC_ERR_INVALID;
        mc_wire_put_blob(&w, q->key, q->key_len);
        mc_wire_put_u64(&w, q->size);
        mc_wire_put_u64(&w, q->alloc_len);
        mc_wire_put_u32(&w, q->replicas);
        mc_wire_put_u32(&w, q->flags);
        mc_wire_put_u64(&w, q->ttl_ms);
        mc_wire_put_u32(&w, q->preferred);
    }
    return encode_end(&w, buf, len_p);
}

int mc_proto_put_start_req_decode(const void *buf, size_t len, size_t cap,
                                  struct mc_proto_put_start_req *m_p,
                                  struct mc_master_put_req *items)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->writer = mc_wire_get_u32(&r);
    if (m_p->writer == MC_MASTER_NODE_NONE)
        fail(&r);
    m_p->n = get_count(&r, cap);
    for (uint32_t i = 0; i < m_p->n && !r.bad; i++) {
        struct mc_master_put_req *q = &items[i];

        get_key(&r, &q->key, &q->key_len);
        q->size = mc_wire_get_u64(&r);
        q->alloc_len = mc_wire_get_u64(&r);
        q->replicas = mc_wire_get_u32(&r);
        q->flags = mc_wire_get_u32(&r);
        q->ttl_ms = mc_wire_get_u64(&r);
        q->preferred = mc_wire_get_u32(&r);
        q->writer = m_p->writer;
        if (!r.bad && !put_req_ok(q))
            fail(&r);
    }
    return decode_end(&r);
}

static bool batch_rep_ok(const struct mc_proto_batch_rep *m)
{
    return mc_proto_status_is_valid(m->status, false) && m->n <= MC_PROTO_BATCH_MAX &&
           (m->status == 0 || m->n == 0);
}

/* The call status and, when it is 0, the count. */
static void put_batch_head(struct mc_wire_writer *w, const struct mc_proto_batch_rep *m)
{
    mc_wire_put_u32(w, u32_from_i32(m->status));
    if (m->status == 0)
        mc_wire_put_u32(w, m->n);
}

static bool get_batch_head(struct mc_wire_reader *r, size_t cap, struct mc_proto_batch_rep *m_p)
{
    m_p->flags = 0;
    m_p->n = 0;
    if (!get_call_status(r, &m_p->status))
        return false;
    m_p->n = get_count(r, cap);
    return !r->bad;
}

int mc_proto_put_start_rep_encode(const struct mc_proto_batch_rep *m, const int *results,
                                  const struct mc_master_put_grant *grants, void *buf,
                                  size_t cap, size_t *len_p)
{
    struct mc_wire_writer w;

    if (!batch_rep_ok(m))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    put_batch_head(&w, m);
    for (uint32_t i = 0; i < m->n; i++) {
        const struct mc_master_put_grant *g = &grants[i];

        if (results[i] != MC_PROTO_NO_SPACE_YET && !mc_proto_status_is_valid(results[i], false))
            return MC_ERR_INVALID;
        mc_wire_put_u32(&w, u32_from_i32(results[i]));
        if (results[i] != 0)
            continue;
        if (!replicas_ok(g->nrep, g->rep))
            return MC_ERR_INVALID;
        mc_wire_put_u64(&w, g->version);
        mc_wire_put_u32(&w, g->nrep);
        for (uint32_t k = 0; k < g->nrep; k++)
            put_replica(&w, &g->rep[k]);
    }
    return encode_end(&w, buf, len_p);
}

int mc_proto_put_start_rep_decode(const void *buf, size_t len, size_t cap,
                                  struct mc_proto_batch_rep *m_p, int *results,
                                  struct mc_master_put_grant *grants)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    if (get_batch_head(&r, cap, m_p)) {
        for (uint32_t i = 0; i < m_p->n && !r.bad; i++) {
            struct mc_master_put_grant *g = &grants[i];

            memset(g, 0, sizeof(*g));
            results[i] = i32_from_u32(mc_wire_get_u32(&r));
            if (results[i] != MC_PROTO_NO_SPACE_YET &&
                !mc_proto_status_is_valid(results[i], false))
                fail(&r);
            if (r.bad || results[i] != 0)
                continue;
            g->version = mc_wire_get_u64(&r);
            g->nrep = get_nrep(&r);
            for (uint32_t k = 0; k < g->nrep && !r.bad; k++)
                get_replica(&r, &g->rep[k]);
        }
    }
    return decode_end(&r);
}

/* --- PUT_END_BATCH, PUT_REVOKE_BATCH, LEASE_RELEASE_BATCH -------------------------------- */

static int ref_req_encode(const struct mc_proto_ref_req *m, const struct mc_master_ref *items,
                          bool with_epoch, void *buf, size_t cap, size_t *len_p)
{
    struct mc_wire_writer w;

    if (m->node == MC_MASTER_NODE_NONE || m->n > MC_PROTO_BATCH_MAX)
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, m->node);
    mc_wire_put_u32(&w, m->n);
    for (uint32_t i = 0; i < m->n; i++) {
        if (!key_ok(items[i].key, items[i].key_len))
            return MC_ERR_INVALID;
        mc_wire_put_blob(&w, items[i].key, items[i].key_len);
        mc_wire_put_u64(&w, items[i].version);
        if (with_epoch)
            mc_wire_put_u32(&w, items[i].epoch);
    }
    return encode_end(&w, buf, len_p);
}

static int ref_req_decode(const void *buf, size_t len, size_t cap, bool with_epoch,
                          struct mc_proto_ref_req *m_p, struct mc_master_ref *items)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->node = mc_wire_get_u32(&r);
    if (m_p->node == MC_MASTER_NODE_NONE)
        fail(&r);
    m_p->n = get_count(&r, cap);
    for (uint32_t i = 0; i < m_p->n && !r.bad; i++) {
        get_key(&r, &items[i].key, &items[i].key_len);
        items[i].version = mc_wire_get_u64(&r);
        items[i].epoch = with_epoch ? mc_wire_get_u32(&r) : 0;
        items[i].node = m_p->node;
    }
    return decode_end(&r);
}

int mc_proto_put_end_req_encode(const struct mc_proto_ref_req *m,
                                const struct mc_master_ref *items, void *buf, size_t cap,
                                size_t *len_p)
{
    return ref_req_encode(m, items, false, buf, cap, len_p);
}

int mc_proto_put_end_req_decode(const void *buf, size_t len, size_t cap,
                                struct mc_proto_ref_req *m_p, struct mc_master_ref *items)
{
    return ref_req_decode(buf, len, cap, false, m_p, items);
}

int mc_proto_put_revoke_req_encode(const struct mc_proto_ref_req *m,
                                   const struct mc_master_ref *items, void *buf, size_t cap,
                                   size_t *len_p)
{
    return ref_req_encode(m, items, false, buf, cap, len_p);
}

int mc_proto_put_revoke_req_decode(const void *buf, size_t len, size_t cap,
                                   struct mc_proto_ref_req *m_p, struct mc_master_ref *items)
{
    return ref_req_decode(buf, len, cap, false, m_p, items);
}

int mc_proto_lease_release_req_encode(const struct mc_proto_ref_req *m,
                                      const struct mc_master_ref *items, void *buf, size_t cap,
                                      size_t *len_p)
{
    return ref_req_encode(m, items, true, buf, cap, len_p);
}

int mc_proto_lease_release_req_decode(const void *buf, size_t len, size_t cap,
                                      struct mc_proto_ref_req *m_p, struct mc_master_ref *items)
{
    return ref_req_decode(buf, len, cap, true, m_p, items);
}

int mc_proto_results_rep_encode(const struct mc_proto_batch_rep *m, const int *results,
                                void *buf, size_t cap, size_t *len_p)
{
    struct mc_wire_writer w;

    if (!batch_rep_ok(m))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    put_batch_head(&w, m);
    for (uint32_t i = 0; i < m->n; i++) {
        if (!mc_proto_status_is_valid(results[i], false))
            return MC_ERR_INVALID;
        mc_wire_put_u32(&w, u32_from_i32(results[i]));
    }
    return encode_end(&w, buf, len_p);
}

int mc_proto_results_rep_decode(const void *buf, size_t len, size_t cap,
                                struct mc_proto_batch_rep *m_p, int *results)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    if (get_batch_head(&r, cap, m_p)) {
        for (uint32_t i = 0; i < m_p->n && !r.bad; i++)
            results[i] = get_status(&r, false);
    }
    return decode_end(&r);
}

int mc_proto_lease_release_rep_encode(const struct mc_proto_lease_release_rep *m, void *buf,
                                      size_t cap, size_t *len_p)
{
    struct mc_wire_writer w;

    if (!mc_proto_status_is_valid(m->status, false) || m->released > MC_PROTO_BATCH_MAX)
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, u32_from_i32(m->status));
    if (m->status == 0)
        mc_wire_put_u32(&w, m->released);
    return encode_end(&w, buf, len_p);
}

int mc_proto_lease_release_rep_decode(const void *buf, size_t len,
                                      struct mc_proto_lease_release_rep *m_p)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->released = 0;
    if (get_call_status(&r, &m_p->status)) {
        m_p->released = mc_wire_get_u32(&r);
        if (m_p->released > MC_PROTO_BATCH_MAX)
            fail(&r);
    }
    return decode_end(&r);
}

/* --- GET_BATCH, EXIST_BATCH, REMOVE_BATCH requests ---------------------------------------- */

static int keys_req_encode(const struct mc_proto_keys_req *m, uint32_t known_flags,
                           const struct mc_proto_key *items, void *buf, size_t cap,
                           size_t *len_p)
{
    struct mc_wire_writer w;

    if (m->node == MC_MASTER_NODE_NONE || (m->flags & ~known_flags) != 0 ||
        m->n > MC_PROTO_BATCH_MAX)
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, m->node);
    mc_wire_put_u32(&w, m->flags);
    mc_wire_put_u32(&w, m->n);
    for (uint32_t i = 0; i < m->n; i++) {
        if (!key_ok(items[i].key, items[i].key_len))
            return MC_ERR_INVALID;
        mc_wire_put_blob(&w, items[i].key, items[i].key_len);
    }
    return encode_end(&w, buf, len_p);
}

static int keys_req_decode(const void *buf, size_t len, size_t cap, uint32_t known_flags,
                           struct mc_proto_keys_req *m_p, struct mc_proto_key *items)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->node = mc_wire_get_u32(&r);
    m_p->flags = mc_wire_get_u32(&r);
    if (m_p->node == MC_MASTER_NODE_NONE || (m_p->flags & ~known_flags) != 0)
        fail(&r);
    m_p->n = get_count(&r, cap);
    for (uint32_t i = 0; i < m_p->n && !r.bad; i++)
        get_key(&r, &items[i].key, &items[i].key_len);
    return decode_end(&r);
}

int mc_proto_get_req_encode(const struct mc_proto_keys_req *m, const struct mc_proto_key *items,
                            void *buf, size_t cap, size_t *len_p)
{
    return keys_req_encode(m, MC_PROTO_GET_F_KNOWN, items, buf, cap, len_p);
}

int mc_proto_get_req_decode(const void *buf, size_t len, size_t cap,
                            struct mc_proto_keys_req *m_p, struct mc_proto_key *items)
{
    return keys_req_decode(buf, len, cap, MC_PROTO_GET_F_KNOWN, m_p, items);
}

int mc_proto_exist_req_encode(const struct mc_proto_keys_req *m,
                              const struct mc_proto_key *items, void *buf, size_t cap,
                              size_t *len_p)
{
    return keys_req_encode(m, MC_PROTO_EXIST_F_KNOWN, items, buf, cap, len_p);
}

int mc_proto_exist_req_decode(const void *buf, size_t len, size_t cap,
                              struct mc_proto_keys_req *m_p, struct mc_proto_key *items)
{
    return keys_req_decode(buf, len, cap, MC_PROTO_EXIST_F_KNOWN, m_p, items);
}

int mc_proto_remove_req_encode(const struct mc_proto_keys_req *m,
                               const struct mc_proto_key *items, void *buf, size_t cap,
                               size_t *len_p)
{
    return keys_req_encode(m, MC_PROTO_REMOVE_F_KNOWN, items, buf, cap, len_p);
}

int mc_proto_remove_req_decode(const void *buf, size_t len, size_t cap,
                               struct mc_proto_keys_req *m_p, struct mc_proto_key *items)
{
    return keys_req_decode(buf, len, cap, MC_PROTO_REMOVE_F_KNOWN, m_p, items);
}

/* --- GET_BATCH_REPLY ---------------------------------------------------------------------- */

static bool get_result_ok(const struct mc_master_get_result *g)
{
    return (g->flags & ~MC_MASTER_PUT_FLAGS_ALL) == 0 && replicas_ok(g->nrep, g->rep) &&
           g->lease.version == g->version;
}

int mc_proto_get_rep_encode(const struct mc_proto_batch_rep *m, const int *results,
                            const struct mc_master_get_result *res, void *buf, size_t cap,
                            size_t *len_p)
{
    struct mc_wire_writer w;

    if (!batch_rep_ok(m))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    put_batch_head(&w, m);
    for (uint32_t i = 0; i < m->n; i++) {
        const struct mc_master_get_result *g = &res[i];

        if (!mc_proto_status_is_valid(results[i], false))
            return MC_ERR_INVALID;
        mc_wire_put_u32(&w, u32_from_i32(results[i]));
        if (results[i] != 0)
            continue;
        if (!get_result_ok(g))
            return MC_ERR_INVALID;
        mc_wire_put_u64(&w, g->version);
        mc_wire_put_u64(&w, g->size);
        mc_wire_put_u32(&w, g->flags);
        mc_wire_put_u32(&w, g->nrep);
        for (uint32_t k = 0; k < g->nrep; k++)
            put_replica(&w, &g->rep[k]);
        mc_wire_put_u32(&w, g->lease.epoch);
        mc_wire_put_u64(&w, g->lease.expires_ms);
    }
    return encode_end(&w, buf, len_p);
}

int mc_proto_get_rep_decode(const void *buf, size_t len, size_t cap,
                            struct mc_proto_batch_rep *m_p, int *results,
                            struct mc_master_get_result *res)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    if (get_batch_head(&r, cap, m_p)) {
        for (uint32_t i = 0; i < m_p->n && !r.bad; i++) {
            struct mc_master_get_result *g = &res[i];

            memset(g, 0, sizeof(*g));
            results[i] = get_status(&r, false);
            if (r.bad || results[i] != 0)
                continue;
            g->version = mc_wire_get_u64(&r);
            g->size = mc_wire_get_u64(&r);
            g->flags = mc_wire_get_u32(&r);
            if ((g->flags & ~MC_MASTER_PUT_FLAGS_ALL) != 0)
                fail(&r);
            g->nrep = get_nrep(&r);
            for (uint32_t k = 0; k < g->nrep && !r.bad; k++)
                get_replica(&r, &g->rep[k]);
            g->lease.version = g->version;
            g->lease.epoch = mc_wire_get_u32(&r);
            g->lease.expires_ms = mc_wire_get_u64(&r);
        }
    }
    return decode_end(&r);
}

/* --- EXIST_BATCH_REPLY -------------------------------------------------------------------- */

static bool stat_ok(const struct mc_master_stat *st)
{
    return st->size > 0 && st->replicas <= MC_MASTER_MAX_REPLICAS &&
           st->disk_replicas <= st->replicas && (st->flags & ~MC_MASTER_PUT_FLAGS_ALL) == 0;
}

int mc_proto_exist_rep_encode(const struct mc_proto_batch_rep *m, const int *results,
                              const struct mc_master_stat *stats, void *buf, size_t cap,
                              size_t *len_p)
{
    struct mc_wire_writer w;
    bool with_stat = (m->flags & MC_PROTO_EXIST_F_STAT) != 0;

    if (!batch_rep_ok(m) || (m->flags & ~MC_PROTO_EXIST_F_KNOWN) != 0 ||
        (with_stat && m->n > 0 && stats == NULL))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, u32_from_i32(m->status));
    if (m->status == 0) {
        mc_wire_put_u32(&w, m->flags);
        mc_wire_put_u32(&w, m->n);
    }
    for (uint32_t i = 0; i < m->n; i++) {
        const struct mc_master_stat *st = with_stat ? &stats[i] : NULL;

        if (!mc_proto_status_is_valid(results[i], true))
            return MC_ERR_INVALID;
        mc_wire_put_u32(&w, u32_from_i32(results[i]));
        if (results[i] != 1 || st == NULL)
            continue;
        if (!stat_ok(st))
            return MC_ERR_INVALID;
        mc_wire_put_u64(&w, st->size);
        mc_wire_put_u64(&w, st->version);
        mc_wire_put_u32(&w, st->replicas);
        mc_wire_put_u32(&w, st->flags);
        mc_wire_put_u64(&w, st->ttl_remaining_ms);
        mc_wire_put_u32(&w, st->disk_replicas);
    }
    return encode_end(&w, buf, len_p);
}

int mc_proto_exist_rep_decode(const void *buf, size_t len, size_t cap,
                              struct mc_proto_batch_rep *m_p, int *results,
                              struct mc_master_stat *stats)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->flags = 0;
    m_p->n = 0;
    if (get_call_status(&r, &m_p->status)) {
        m_p->flags = mc_wire_get_u32(&r);
        if ((m_p->flags & ~MC_PROTO_EXIST_F_KNOWN) != 0)
            fail(&r);
        m_p->n = get_count(&r, cap);
    }
    for (uint32_t i = 0; i < m_p->n && !r.bad; i++) {
        struct mc_master_stat st = {0};

        results[i] = get_status(&r, true);
        if (!r.bad && results[i] == 1 && (m_p->flags & MC_PROTO_EXIST_F_STAT) != 0) {
            st.size = mc_wire_get_u64(&r);
            st.version = mc_wire_get_u64(&r);
            st.replicas = mc_wire_get_u32(&r);
            st.flags = mc_wire_get_u32(&r);
            st.ttl_remaining_ms = mc_wire_get_u64(&r);
            st.disk_replicas = mc_wire_get_u32(&r);
            if (!r.bad && !stat_ok(&st))
                fail(&r);
        }
        if (stats != NULL)
            stats[i] = st;
    }
    return decode_end(&r);
}

/* --- REMOVE_BATCH_REPLY ------------------------------------------------------------------- */

int mc_proto_remove_rep_encode(const struct mc_proto_batch_rep *m, const int *results,
                               const uint64_t *counts, void *buf, size_t cap, size_t *len_p)
{
    struct mc_wire_writer w;

    if (!batch_rep_ok(m))
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    put_batch_head(&w, m);
    for (uint32_t i = 0; i < m->n; i++) {
        if (!mc_proto_status_is_valid(results[i], false) || (results[i] != 0 && counts[i] != 0))
            return MC_ERR_INVALID;
        mc_wire_put_u32(&w, u32_from_i32(results[i]));
        mc_wire_put_u64(&w, counts[i]);
    }
    return encode_end(&w, buf, len_p);
}

int mc_proto_remove_rep_decode(const void *buf, size_t len, size_t cap,
                               struct mc_proto_batch_rep *m_p, int *results, uint64_t *counts)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    if (get_batch_head(&r, cap, m_p)) {
        for (uint32_t i = 0; i < m_p->n && !r.bad; i++) {
            uint64_t count;

            results[i] = get_status(&r, false);
            count = mc_wire_get_u64(&r);
            if (results[i] != 0 && count != 0)
                fail(&r);
            if (counts != NULL)
                counts[i] = count;
        }
    }
    return decode_end(&r);
}

/* --- FENCE -------------------------------------------------------------------------------- */

int mc_proto_fence_req_encode(const struct mc_proto_fence_req *m,
                              const struct mc_proto_fence_item *items, void *buf, size_t cap,
                              size_t *len_p)
{
    struct mc_wire_writer w;

    if (m->n > MC_PROTO_BATCH_MAX)
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, m->n);
    for (uint32_t i = 0; i < m->n; i++) {
        mc_wire_put_u32(&w, items[i].seg);
        mc_wire_put_u32(&w, items[i].alloc);
        mc_wire_put_u64(&w, items[i].version);
    }
    return encode_end(&w, buf, len_p);
}

int mc_proto_fence_req_decode(const void *buf, size_t len, size_t cap,
                              struct mc_proto_fence_req *m_p, struct mc_proto_fence_item *items)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->n = get_count(&r, cap);
    for (uint32_t i = 0; i < m_p->n && !r.bad; i++) {
        items[i].seg = mc_wire_get_u32(&r);
        items[i].alloc = mc_wire_get_u32(&r);
        items[i].version = mc_wire_get_u64(&r);
    }
    return decode_end(&r);
}

/* --- RESTORE_BATCH --------------------------------------------------------------------------- */

static bool restore_item_ok(const struct mc_master_restore_req *q)
{
    return key_ok(q->key, q->key_len) && q->size > 0 && q->alloc_len >= q->size &&
           q->version > 0 &&
           (q->flags & ~(uint32_t)(MC_MASTER_PUT_PIN_SOFT | MC_MASTER_PUT_PIN_HARD |
                                   MC_MASTER_PUT_NO_CHECKSUM | MC_MASTER_RESTORE_LATE)) == 0;
}

int mc_proto_restore_req_encode(const struct mc_proto_ref_req *m,
                                const struct mc_master_restore_req *items, void *buf,
                                size_t cap, size_t *len_p)
{
    struct mc_wire_writer w;

    if (m->node == MC_MASTER_NODE_NONE || m->n > MC_PROTO_BATCH_MAX)
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, m->node);
    mc_wire_put_u32(&w, m->n);
    for (uint32_t i = 0; i < m->n; i++) {
        const struct mc_master_restore_req *q = &items[i];

        if (!restore_item_ok(q))
            return MC_ERR_INVALID;
        mc_wire_put_blob(&w, q->key, q->key_len);
        mc_wire_put_u32(&w, q->seg);
        mc_wire_put_u64(&w, q->offset);
        mc_wire_put_u64(&w, q->alloc_len);
        mc_wire_put_u64(&w, q->size);
        mc_wire_put_u64(&w, q->version);
        mc_wire_put_u32(&w, q->flags);
        mc_wire_put_u64(&w, q->ttl_ms);
    }
    return encode_end(&w, buf, len_p);
}

int mc_proto_restore_req_decode(const void *buf, size_t len, size_t cap,
                                struct mc_proto_ref_req *m_p,
                                struct mc_master_restore_req *items)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->node = mc_wire_get_u32(&r);
    if (m_p->node == MC_MASTER_NODE_NONE)
        fail(&r);
    m_p->n = get_count(&r, cap);
    for (uint32_t i = 0; i < m_p->n && !r.bad; i++) {
        struct mc_master_restore_req *q = &items[i];

        get_key(&r, &q->key, &q->key_len);
        q->seg = mc_wire_get_u32(&r);
        q->offset = mc_wire_get_u64(&r);
        q->alloc_len = mc_wire_get_u64(&r);
        q->size = mc_wire_get_u64(&r);
        q->version = mc_wire_get_u64(&r);
        q->flags = mc_wire_get_u32(&r);
        q->ttl_ms = mc_wire_get_u64(&r);
        if (!r.bad && !restore_item_ok(q))
            fail(&r);
    }
    return decode_end(&r);
}

/* --- RESTORE_DONE ------------------------------------------------------------------------------ */

int mc_proto_restore_done_req_encode(const struct mc_proto_ref_req *m, const uint32_t *segs,
                                     void *buf, size_t cap, size_t *len_p)
{
    struct mc_wire_writer w;

    if (m->node == MC_MASTER_NODE_NONE || m->n > MC_PROTO_BATCH_MAX)
        return MC_ERR_INVALID;
    mc_wire_writer_init(&w, buf, cap);
    mc_wire_put_u32(&w, m->node);
    mc_wire_put_u32(&w, m->n);
    for (uint32_t i = 0; i < m->n; i++)
        mc_wire_put_u32(&w, segs[i]);
    return encode_end(&w, buf, len_p);
}

int mc_proto_restore_done_req_decode(const void *buf, size_t len, size_t cap,
                                     struct mc_proto_ref_req *m_p, uint32_t *segs)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, buf, len);
    m_p->node = mc_wire_get_u32(&r);
    if (m_p->node == MC_MASTER_NODE_NONE)
        fail(&r);
    m_p->n = get_count(&r, cap);
    for (uint32_t i = 0; i < m_p->n && !r.bad; i++)
        segs[i] = mc_wire_get_u32(&r);
    return decode_end(&r);
}
