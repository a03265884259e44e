/*
 * The master service: directory, versions, leases, pins, eviction, placement, liveness.
 *
 * Record layout (the memory budget of docs/master.md "Memory layout" is <= 64 B + key per
 * record): a record
 * holds the key inline and one version inline (the "head": the readable version, or the only
 * one). Anything else a key has at the same moment -- an upsert being written, an old version
 * still leased, a displaced put whose writes may still land -- lives in a short chain of
 * separately allocated versions, which is empty for almost every key. Times are 32-bit counts
 * of 10 ms ticks compared with serial arithmetic; the sweep renews anything that could age
 * past half the wrap (about 248 days). Recency is one clock bit per record; the eviction
 * hand of a segment walks that segment's allocated blocks in address order (the allocator
 * keeps, per block, a pointer back to the version that owns it), so no list links objects.
 *
 * Freeing space: a version's blocks are returned only when no reader can still be reading
 * them (its last lease ended or expired) and no writer can still be writing them (the writer
 * said its transfers are final, the owner fenced the block, or the release timeout passed).
 */
#include "daemon/master/master.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mc/mc_status.h>

#include "common/clock.h"
#include "daemon/master/alloc.h"
#include "daemon/master/directory.h"
#include "daemon/master/drain.h"
#include "daemon/master/master_int.h"

/* ---------------------------------------------------------------------------------------- */
/* time */

static uint64_t clock_monotonic_ms(void *ctx)
{
    (void)ctx;
    return mc_clock_ms();
}

/* ---------------------------------------------------------------------------------------- */
/* nodes and segments */

bool mc_master_node_is_alive(const struct mc_master *m, uint32_t id)
{
    const struct node *n = node_get(m, id);

    return n != NULL && n->state == NODE_ALIVE;
}

/* ---------------------------------------------------------------------------------------- */
/* puts */

static uint8_t put_flags_to_of(uint32_t flags)
{
    uint8_t of = 0;

    if (flags & MC_MASTER_PUT_PIN_SOFT)
        of |= OF_PIN_SOFT;
    if (flags & MC_MASTER_PUT_PIN_HARD)
        of |= OF_PIN_HARD;
    if (flags & MC_MASTER_PUT_NO_CHECKSUM)
        of |= OF_NO_CSUM;
    if (flags & MC_MASTER_PUT_TIER_GPU)
        of |= OF_TIER_GPU;
    return of;
}

static uint32_t of_to_put_flags(uint8_t of)
{
    uint32_t f = 0;

    if (of & OF_PIN_SOFT)
        f |= MC_MASTER_PUT_PIN_SOFT;
    if (of & OF_PIN_HARD)
        f |= MC_MASTER_PUT_PIN_HARD;
    if (of & OF_NO_CSUM)
        f |= MC_MASTER_PUT_NO_CHECKSUM;
    if (of & OF_TIER_GPU)
        f |= MC_MASTER_PUT_TIER_GPU;
    return f;
}

/* Checks that may refuse the put, before anything is allocated or changed. */
static int put_admit(struct mc_master *m, const struct mc_master_put_req *req, uint32_t now)
{
    struct obj *o = lookup(m, req->key, req->key_len);
    struct ver *p;

    if (o == NULL || (req->flags & MC_MASTER_PUT_UPSERT))
        return 0;
    if (obj_is_visible(m, o))
        return MC_ERR_EXISTS;
    p = mc_master__obj_pending(o);
    if (p != NULL && !ct_reached(now, p->t_start + m->discard_ct) &&
        mc_master_node_is_alive(m, p->writer))
        return MC_ERR_BUSY;
    return 0;
}

static void ver_init(struct ver *v, uint64_t id, const struct mc_master_put_req *req,
                     uint32_t nrep, const struct rep *reps, uint32_t now)
{
    memset(v, 0, sizeof(*v));
    v->id = id;
    v->size = req->size;
    v->state = VS_PROCESSING;
    v->t_start = now;
    v->writer = req->writer;
    v->nrep = nrep;
    if (nrep == 1)
        v->r.one = reps[0];
}

int mc_master_put_start(struct mc_master *m, const struct mc_master_put_req *req,
                        struct mc_master_put_grant *grant_p)
{
    struct rep reps[MC_MASTER_MAX_REPLICAS];
    struct rep *many = NULL;
    uint32_t nrep, now, i;
    uint64_t hash;
    struct obj *o;
    struct ver *v, *p;
    int err;

    if (req == NULL || grant_p == NULL || check_key(req->key, req->key_len) != 0 ||
        req->size == 0 || (req->flags & ~MC_MASTER_PUT_FLAGS_ALL) != 0 ||
        ((req->flags & MC_MASTER_PUT_PIN_SOFT) && (req->flags & MC_MASTER_PUT_PIN_HARD)) ||
        req->replicas > MC_MASTER_MAX_REPLICAS || req->ttl_ms > MC_MASTER_TTL_MAX_MS)
        return MC_ERR_INVALID;
    if (req->alloc_len != 0 && req->alloc_len < req->size)
        return MC_ERR_INVALID;
    if (req->size > SIZE_MAX_OBJ || req->alloc_len > SIZE_MAX_OBJ)
        return MC_ERR_TOO_LARGE;
    if (!mc_master_node_is_alive(m, req->writer))
        return MC_ERR_NOT_FOUND;
    nrep = req->replicas == 0 ? 1 : req->replicas;
    now = now_ct(m);

    err = put_admit(m, req, now);
    if (err != 0)
        return err;
    if (nrep >= 2) {
        many = malloc(nrep * sizeof(*many));
        if (many == NULL)
            return MC_ERR_NOMEM;
    }
    /* allocation may evict, and eviction may delete records: look the key up after it */
    err = mc_master__place(m, req, nrep, now, reps);
    if (err != 0)
        goto err_free_many;

    hash = mc_dir_hash(req->key, req->key_len);
    o = mc_dir_find(m->dir, hash, req->key, req->key_len);
    if (o != NULL) {
        /* an in-flight put of this key gives way: displaced (plain put, old or orphaned)
         * or superseded (upsert); its blocks wait until no write can land in them */
        p = mc_master__obj_pending(o);
        if (p != NULL) {
            mc_master__ver_make_stale(m, p);
            m->st.puts_displaced++;
        }
        if (o->v.state == VS_COMPLETE && !obj_is_visible(m, o))
            mc_master__ver_retire(m, &o->v, now); /* expired or lost: make room for the new head */
    }
    if (o == NULL) {
        o = malloc(sizeof(*o) + req->key_len);
        if (o == NULL) {
            err = MC_ERR_NOMEM;
            goto err_release;
        }
        memset(o, 0, sizeof(*o));
        o->key_len = (uint16_t)req->key_len;
        memcpy(o->key, req->key, req->key_len);
        err = mc_dir_insert(m->dir, hash, o);
        if (err != 0) {
            free(o);
            goto err_release;
        }
    }
    if (o->v.state == VS_EMPTY && o->more == NULL) {
        v = &o->v;
        o->flags = put_flags_to_of(req->flags);
        /* the length until publication, split as the expiry is (ttl_ms is bounded) */
        o->ttl_exp = (uint32_t)(req->ttl_ms / CT_MS);
        o->ttl_sub = (uint8_t)(req->ttl_ms % CT_MS);
    } else {
        struct ver_ext *e = calloc(1, sizeof(*e));

        if (e == NULL) {
            err = MC_ERR_NOMEM;
            mc_master__obj_gc(m, o);
            goto err_release;
        }
        e->obj = o;
        e->flags = put_flags_to_of(req->flags);
        e->ttl_ms = req->ttl_ms;
        e->next = o->more;
        o->more = e;
        v = &e->v;
    }
    ver_init(v, ++m->next_version, req, nrep, reps, now);
    v->ext = v != &o->v;
    if (nrep >= 2) {
        memcpy(many, reps, nrep * sizeof(*many));
        v->r.many = many;
    }
    mc_master__ver_repoint(m, v);

    grant_p->version = v->id;
    grant_p->nrep = nrep;
    for (i = 0; i < nrep; i++)
        mc_master__fill_replica(m, &reps[i], &grant_p->rep[i]);
    m->st.puts_started++;
    return 0;

err_release:
    for (i = 0; i < nrep; i++)
        mc_master__rep_release(m, &reps[i], (req->flags & MC_MASTER_PUT_PIN_HARD) != 0);
err_free_many:
    free(many);
    return err;
}

static int ref_find(struct mc_master *m, const struct mc_master_ref *ref, struct obj **o_p,
                    struct ver **v_p)
{
    struct obj *o;
    struct ver *v;

    if (ref == NULL || check_key(ref->key, ref->key_len) != 0)
        return MC_ERR_INVALID;
    o = lookup(m, ref->key, ref->key_len);
    if (o == NULL)
        return MC_ERR_NOT_FOUND;
    v = mc_master__obj_find_ver(o, ref->version);
    if (v == NULL)
        return MC_ERR_NOT_FOUND;
    *o_p = o;
    *v_p = v;
    return 0;
}

int mc_master_put_end(struct mc_master *m, const struct mc_master_ref *ref)
{
    struct obj *o;
    struct ver *v;
    uint32_t now = now_ct(m);
    int err = ref_find(m, ref, &o, &v);

    if (err != 0)
        return err;
    if (v->writer != ref->node)
        return MC_ERR_DENIED;
    if (v->state == VS_PROCESSING && !mc_master_node_is_alive(m, v->writer))
        v->state = VS_STALE; /* its writer was declared dead or left: the put is revoked */
    switch (v->state) {
    case VS_COMPLETE:
        return v == &o->v ? 0 : MC_ERR_CANCELED; /* a repeated put_end is answered again */
    case VS_STALE:
        /* displaced or superseded: the writer's transfers are final, so free now */
        mc_master__ver_free_space(m, v);
        m->st.stale_freed_by_writer++;
        m->st.puts_canceled++;
        mc_master__obj_gc(m, o);
        return MC_ERR_CANCELED;
    case VS_PROCESSING:
        break;
    default:
        return MC_ERR_CANCELED;
    }
    mc_master__ver_drop_dead_reps(m, v);
    if (v->nrep == 0) {
        /* every target segment went away while it was written */
        mc_master__ver_free_space(m, v);
        m->st.puts_canceled++;
        mc_master__obj_gc(m, o);
        return MC_ERR_CANCELED;
    }
    mc_master__publish(m, o, v, now);
    m->st.puts_completed++;
    mc_master__obj_gc(m, o);
    return 0;
}

int mc_master_put_revoke(struct mc_master *m, const struct mc_master_ref *ref)
{
    struct obj *o;
    struct ver *v;
    int err = ref_find(m, ref, &o, &v);

    if (err != 0)
        return err;
    if (v->writer != ref->node)
        return MC_ERR_DENIED;
    if (v->state != VS_PROCESSING && v->state != VS_STALE)
        return MC_ERR_NOT_FOUND; /* no put in progress under this version */
    if (v->state == VS_STALE)
        m->st.stale_freed_by_writer++;
    mc_master__ver_free_space(m, v);
    m->st.puts_revoked++;
    mc_master__obj_gc(m, o);
    return 0;
}

size_t mc_master_put_start_batch(struct mc_master *m, size_t n,
                                 const struct mc_master_put_req reqs[],
                                 struct mc_master_put_grant grants[], int results[])
{
    size_t i, ok = 0;

    for (i = 0; i < n; i++) {
        uint64_t kept = mc_drain_kept(m->drain);

        results[i] = mc_master_put_start(m, &reqs[i], &grants[i]);
        if (results[i] == MC_ERR_NO_SPACE && mc_drain_kept(m->drain) != kept)
            results[i] = MC_MASTER_NO_SPACE_YET;
        ok += results[i] == 0;
    }
    return ok;
}

size_t mc_master_put_end_batch(struct mc_master *m, size_t n, const struct mc_master_ref refs[],
                               int results[])
{
    size_t i, ok = 0;

    for (i = 0; i < n; i++) {
        results[i] = mc_master_put_end(m, &refs[i]);
        ok += results[i] == 0;
    }
    return ok;
}

size_t mc_master_put_revoke_batch(struct mc_master *m, size_t n,
                                  const struct mc_master_ref refs[], int results[])
{
    size_t i, ok = 0;

    for (i = 0; i < n; i++) {
        results[i] = mc_master_put_revoke(m, &refs[i]);
        ok += results[i] == 0;
    }
    return ok;
}

/* ---------------------------------------------------------------------------------------- */
/* reads */

/*
 * A lease of `ct` ticks on the readable version of key: a read's (lease_ct) or a client's
 * pin (pin_ct). The epoch's leases all end at its latest expiry, so a pin keeps the reads
 * granted beside it alive too (they are released by their readers anyway) and a read never
 * shortens a pin.
 */
static int lease_grant(struct mc_master *m, const char *key, size_t key_len, uint32_t ct,
                       bool pin, uint32_t reader, struct mc_master_get_result *res_p)
{
    uint32_t now = now_ct(m);
    struct obj *o;
    struct ver *v;
    struct rep *reps;
    uint32_t i, n = 0;

    if (check_key(key, key_len) != 0 || res_p == NULL)
        return MC_ERR_INVALID;
    if (!pin)
        m->st.gets++;
    o = lookup(m, key, key_len);
    if (o == NULL || !obj_is_visible(m, o)) {
        if (!pin)
            m->st.get_misses++;
        return MC_ERR_NOT_FOUND;
    }
    v = &o->v;
    (void)ver_is_leased(m, v, now); /* ends an expired epoch before granting in a new one */
    if (v->lease_cnt == UINT32_MAX)
        return MC_ERR_BUSY;
    if (v->lease_cnt == 0 || !ct_reached(v->lease_exp, now + ct))
        v->lease_exp = now + ct; /* the latest expiry of the epoch's leases */
    v->lease_cnt++;
    o->flags |= OF_CLOCK;
    if (!pin)
        o->flags |= OF_HIT;
    m->st.lease_grants++;

    /* memory first, disk replicas last: readers take the first that works */
    reps = ver_reps(v);
    for (int disk = 0; disk < 2; disk++) {
        for (i = 0; i < v->nrep; i++) {
            const struct seg *s = seg_of_rep(m, &reps[i]);

            if (s != NULL && (s->kind == MC_SEG_DISK) == (disk == 1))
                mc_master__fill_replica(m, &reps[i], &res_p->rep[n++]);
        }
    }
    res_p->nrep = n;
    res_p->version = v->id;
    res_p->size = v->size;
    res_p->flags = of_to_put_flags(o->flags);
    res_p->lease.version = v->id;
    res_p->lease.epoch = v->epoch;
    /* from the 64-bit clock: the 32-bit tick count may have wrapped since t0 */
    res_p->lease.expires_ms = now_ms(m) + (uint64_t)(uint32_t)(v->lease_exp - now) * CT_MS;
    if (!pin)
        mc_drain_promote(m, o, v, now, reader); /* after res_p: it may evict (not v's) */
    return 0;
}

int mc_master_get_replicas(struct mc_master *m, const char *key, size_t key_len,
                           struct mc_master_get_result *res_p)
{
    return lease_grant(m, key, key_len, m->lease_ct, false, MC_MASTER_NODE_NONE, res_p);
}

int mc_master_get_for(struct mc_master *m, uint32_t reader, const char *key, size_t key_len,
                      struct mc_master_get_result *res_p)
{
    return lease_grant(m, key, key_len, m->lease_ct, false, reader, res_p);
}

int mc_master_pin(struct mc_master *m, const char *key, size_t key_len,
                  struct mc_master_get_result *res_p)
{
    return lease_grant(m, key, key_len, m->pin_ct, true, MC_MASTER_NODE_NONE, res_p);
}

int mc_master_touch(struct mc_master *m, const char *key, size_t key_len)
{
    struct obj *o;

    if (check_key(key, key_len) != 0)
        return MC_ERR_INVALID;
    o = lookup(m, key, key_len);
    if (o == NULL || !obj_is_visible(m, o))
        return 0;
    o->flags |= OF_CLOCK; /* what a read does to the eviction order, without the read */
    return 1;
}

size_t mc_master_lease_release(struct mc_master *m, size_t n, const struct mc_master_ref refs[])
{
    uint32_t now = now_ct(m);
    size_t i, ended = 0;

    for (i = 0; i < n; i++) {
        struct obj *o;
        struct ver *v;

        if (ref_find(m, &refs[i], &o, &v) != 0)
            continue;
        if (!ver_is_leased(m, v, now) || v->epoch != (uint16_t)refs[i].epoch)
            continue; /* expired (already ended) or from an older epoch */
        v->lease_cnt--;
        ended++;
        m->st.lease_releases++;
        if (v->lease_cnt == 0 && v->state == VS_RETIRED) {
            mc_master__ver_free_space(m, v);
            mc_master__obj_gc(m, o);
        }
    }
    return ended;
}

int mc_master_exist(struct mc_master *m, const char *key, size_t key_len)
{
    struct obj *o;

    if (check_key(key, key_len) != 0)
        return MC_ERR_INVALID;
    o = lookup(m, key, key_len);
    return o != NULL && obj_is_visible(m, o);
}

int mc_master_stat(struct mc_master *m, const char *key, size_t key_len,
                   struct mc_master_stat *st_p)
{
    uint32_t now = now_ct(m), i, live = 0;
    struct obj *o;
    struct rep *reps;

    if (check_key(key, key_len) != 0 || st_p == NULL)
        return MC_ERR_INVALID;
    o = lookup(m, key, key_len);
    if (o == NULL || !obj_is_visible(m, o))
        return MC_ERR_NOT_FOUND;
    reps = ver_reps(&o->v);
    st_p->disk_replicas = 0;
    for (i = 0; i < o->v.nrep; i++) {
        const struct seg *s = seg_of_rep(m, &reps[i]);

        live += s != NULL;
        st_p->disk_replicas += s != NULL && s->kind == MC_SEG_DISK;
    }
    st_p->size = o->v.size;
    st_p->version = o->v.id;
    st_p->replicas = live;
    st_p->flags = of_to_put_flags(o->flags);
    if ((o->flags & OF_PIN_SOFT) && ct_reached(now, o->pin_exp))
        st_p->flags &= ~MC_MASTER_PUT_PIN_SOFT;
    st_p->ttl_remaining_ms = 0;
    if (o->flags & OF_TTL) {
        uint32_t sub, cur = now_ct_sub(m, &sub);

        /* visible, so not passed: at least 1 */
        st_p->ttl_remaining_ms = (uint64_t)(uint32_t)(o->ttl_exp - cur) * CT_MS + o->ttl_sub - sub;
    }
    return 0;
}

size_t mc_master_prefix_match(struct mc_master *m, size_t n, const char *const keys[],
                              const size_t lens[])
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (mc_master_exist(m, keys[i], lens[i]) != 1)
            break;
    }
    return i;
}

int mc_master_remove(struct mc_master *m, const char *key, size_t key_len)
{
    uint32_t now = now_ct(m);
    struct obj *o;

    if (check_key(key, key_len) != 0)
        return MC_ERR_INVALID;
    o = lookup(m, key, key_len);
    if (o == NULL || !obj_is_visible(m, o))
        return MC_ERR_NOT_FOUND;
    mc_master__ver_retire(m, &o->v, now);
    m->st.removes++;
    mc_master__obj_gc(m, o);
    return 0;
}

static bool has_prefix(const struct obj *o, const char *prefix, size_t len)
{
    return o->key_len >= len && memcmp(o->key, prefix, len) == 0;
}

/* A listing cursor is the directory position plus one (0 means "from the start"). */
int mc_master_list(struct mc_master *m, const char *prefix, size_t prefix_len,
                   uint64_t *cursor_p, size_t max, mc_master_list_fn fn, void *ctx)
{
    struct mc_dir_cursor c;
    struct obj *o;
    size_t n = 0;

    if ((prefix == NULL && prefix_len != 0) || prefix_len > KEY_MAX || cursor_p == NULL ||
        fn == NULL)
        return MC_ERR_INVALID;
    mc_dir_cursor_init(&c);
    if (*cursor_p != 0) {
        c.shard = (uint32_t)((*cursor_p - 1) >> 40);
        c.slot = (*cursor_p - 1) & ((UINT64_C(1) << 40) - 1);
    }
    while (n < max && (o = mc_dir_cursor_next(m->dir, &c)) != NULL) {
        if (has_prefix(o, prefix, prefix_len) && obj_is_visible(m, o)) {
            fn(o->key, o->key_len, ctx);
            n++;
        }
    }
    /* a cursor back at the start after the last record means the pass is complete */
    *cursor_p = (c.shard == 0 && c.slot == 0) ? 0 : ((uint64_t)c.shard << 40 | c.slot) + 1;
    return (int)n;
}

struct key_vec {
    char **keys;
    size_t *lens;
    size_t n, cap;
    bool nomem;
};

static void key_vec_add(const char *key, size_t len, void *ctx)
{
    struct key_vec *kv = ctx;

    if (kv->nomem)
        return;
    if (kv->n == kv->cap) {
        size_t cap = kv->cap ? kv->cap * 2 : 256;
        char **k = realloc(kv->keys, cap * sizeof(*k));
        size_t *l = k == NULL ? NULL : realloc(kv->lens, cap * sizeof(*l));

        if (k != NULL)
            kv->keys = k;
        if (k == NULL || l == NULL) {
            kv->nomem = true;
            return;
        }
        kv->lens = l;
        kv->cap = cap;
    }
    kv->keys[kv->n] = malloc(len);
    if (kv->keys[kv->n] == NULL) {
        kv->nomem = true;
        return;
    }
    memcpy(kv->keys[kv->n], key, len);
    kv->lens[kv->n++] = len;
}

/* Collect first, then remove: removing while walking the table would shift records past
 * the walk (backward-shift deletion). */
int64_t mc_master_remove_prefix(struct mc_master *m, const char *prefix, size_t prefix_len)
{
    struct key_vec kv = {0};
    uint64_t cursor = 0;
    int64_t removed = 0;
    size_t i;
    int n;

    if (prefix == NULL || prefix_len == 0 || prefix_len > KEY_MAX)
        return MC_ERR_INVALID;
    do {
        n = mc_master_list(m, prefix, prefix_len, &cursor, SIZE_MAX, key_vec_add, &kv);
    } while (n >= 0 && cursor != 0 && !kv.nomem);
    for (i = 0; i < kv.n; i++) {
        if (!kv.nomem && mc_master_remove(m, kv.keys[i], kv.lens[i]) == 0)
            removed++;
        free(kv.keys[i]);
    }
    free(kv.keys);
    free(kv.lens);
    return kv.nomem ? MC_ERR_NOMEM : removed;
}

int mc_master_fence_ack(struct mc_master *m, uint32_t seg, uint32_t alloc, uint64_t version)
{
    struct seg *s = seg_get(m, seg);
    struct ver *v;
    struct obj *o;
    struct rep *reps;
    uint32_t i;

    if (s == NULL || !mc_alloc_is_used(s->alloc, alloc))
        return MC_ERR_NOT_FOUND;
    if (mc_drain_fence_ack(m, seg, alloc, version))
        return 0; /* the block of a failed copy */
    v = mc_alloc_owner(s->alloc, alloc);
    if (v == NULL || v->id != version)
        return MC_ERR_NOT_FOUND; /* block ids are reused: a late ack names an older put */
    if (v->state != VS_STALE)
        return MC_ERR_BUSY;
    reps = ver_reps(v);
    for (i = 0; i < v->nrep; i++) {
        if (reps[i].seg == (uint16_t)(s - m->segs) && reps[i].alloc == alloc)
            break;
    }
    assert(i < v->nrep);
    mc_master__rep_release(m, &reps[i], (ver_flags(v) & OF_PIN_HARD) != 0);
    mc_master__ver_drop_rep(v, i);
    if (v->nrep == 0) {
        v->state = VS_EMPTY;
        m->st.stale_freed_by_fence++;
        o = ver_obj(v);
        mc_master__obj_gc(m, o);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* nodes, segments */

static uint32_t domain_intern(struct mc_master *m, const char *domain)
{
    uint32_t i;

    for (i = 0; i < m->nnodes; i++) {
        if (m->nodes[i].state == NODE_ALIVE && strcmp(m->nodes[i].domain, domain) == 0)
            return m->nodes[i].domain_id;
    }
    return ++m->next_domain_id;
}

static bool name_ok(const char *s, size_t max)
{
    size_t n = s == NULL ? 0 : strnlen(s, max + 1);

    return n >= 1 && n <= max;
}

int mc_master_node_register(struct mc_master *m, const char *name, const char *domain,
                            uint32_t *node_p)
{
    struct node *n = NULL;
    uint32_t i, slot = UINT32_MAX;

    if (!name_ok(name, MC_MASTER_NAME_MAX) || node_p == NULL)
        return MC_ERR_INVALID;
    if (domain == NULL || domain[0] == '\0')
        domain = name;
    if (!name_ok(domain, MC_MASTER_NAME_MAX))
        return MC_ERR_INVALID;
    for (i = 0; i < m->nnodes; i++) {
        if (m->nodes[i].state == NODE_ALIVE && strcmp(m->nodes[i].name, name) == 0) {
            m->nodes[i].last_hb_ms = now_ms(m);
            *node_p = m->nodes[i].id;
            return 0;
        }
        if (m->nodes[i].state != NODE_ALIVE && slot == UINT32_MAX)
            slot = i;
    }
    if (slot == UINT32_MAX) {
        if (m->nnodes > SLOT_MAX)
            return MC_ERR_NO_SPACE;
        if (m->nnodes == m->cap_nodes) {
            uint32_t cap = m->cap_nodes ? m->cap_nodes * 2 : 16;
            struct node *nn = realloc(m->nodes, cap * sizeof(*nn));

            if (nn == NULL)
                return MC_ERR_NOMEM;
            memset(nn + m->cap_nodes, 0, (cap - m->cap_nodes) * sizeof(*nn));
            m->nodes = nn;
            m->cap_nodes = cap;
        }
        slot = m->nnodes++;
    }
    n = &m->nodes[slot];
    n->domain_id = domain_intern(m, domain);
    /* a new incarnation: the generation in the id's top half makes old ids stale */
    n->id = (((n->id >> 16) + 1) & 0xFFFFu) << 16 | slot;
    n->state = NODE_ALIVE;
    n->draining = false;
    n->last_hb_ms = now_ms(m);
    strcpy(n->name, name);
    strcpy(n->domain, domain);
    *node_p = n->id;
    m->st.nodes_alive++;
    return 0;
}

int mc_master_node_find(const struct mc_master *m, const char *name, uint32_t *node_p)
{
    uint32_t i;

    for (i = 0; i < m->nnodes; i++) {
        if (m->nodes[i].state == NODE_ALIVE && strcmp(m->nodes[i].name, name) == 0) {
            *node_p = m->nodes[i].id;
            return 0;
        }
    }
    return MC_ERR_NOT_FOUND;
}

/* Marks the node; drain.c's tick does the emptying (placement skips it meanwhile). */
int mc_master_node_drain(struct mc_master *m, const char *name, bool on)
{
    uint32_t id;
    struct node *n;

    if (m == NULL || name == NULL)
        return MC_ERR_INVALID;
    if (mc_master_node_find(m, name, &id) != 0)
        return MC_ERR_NOT_FOUND;
    n = node_get(m, id);
    n->draining = on;
    return 0;
}

uint32_t mc_master_nodes_refresh(struct mc_master *m)
{
    uint64_t ms = now_ms(m);
    uint32_t i, n = 0;

    for (i = 0; i < m->nnodes; i++) {
        if (m->nodes[i].state == NODE_ALIVE) {
            m->nodes[i].last_hb_ms = ms;
            n++;
        }
    }
    return n;
}

int mc_master_node_heartbeat(struct mc_master *m, uint32_t node)
{
    struct node *n = node_get(m, node);

    if (n == NULL || n->state != NODE_ALIVE)
        return MC_ERR_NOT_FOUND;
    n->last_hb_ms = now_ms(m);
    return 0;
}

static void seg_unmount(struct mc_master *m, struct seg *s)
{
    /* replicas there become invalid through the generation; the sweep drops them */
    mc_alloc_destroy(s->alloc);
    s->alloc = NULL;
    s->state = SEG_FREE;
    s->gen++;
    m->st.segments--;
}

static void node_down(struct mc_master *m, struct node *n)
{
    uint32_t i;

    for (i = 0; i < m->nsegs; i++) {
        if (m->segs[i].state == SEG_MOUNTED && m->segs[i].node == n->id)
            seg_unmount(m, &m->segs[i]);
    }
    /* its PROCESSING puts are revoked lazily: invisible already, displaced by the next put
     * of the key at once (the writer is dead) and turned stale by the sweep */
    n->state = NODE_DEAD;
    m->st.nodes_alive--;
}

int mc_master_node_unregister(struct mc_master *m, uint32_t node)
{
    struct node *n = node_get(m, node);

    if (n == NULL || n->state != NODE_ALIVE)
        return MC_ERR_NOT_FOUND;
    node_down(m, n);
    return 0;
}

static uint32_t node_segments(const struct mc_master *m, uint32_t node)
{
    uint32_t i, n = 0;

    for (i = 0; i < m->nsegs; i++) {
        if (m->segs[i].state == SEG_MOUNTED && m->segs[i].node == node)
            n++;
    }
    return n;
}

/* A draining node's state and what is left in its segments (every allocated block: a
 * replica, a put being written, a block waiting for a lease or a fence). */
static void node_drain_info(const struct mc_master *m, const struct node *nd,
                            struct mc_master_node_info *o)
{
    uint32_t i;

    o->drain = MC_MASTER_DRAIN_NONE;
    o->drain_blocks = o->drain_bytes = 0;
    if (nd->state != NODE_ALIVE || !nd->draining)
        return;
    for (i = 0; i < m->nsegs; i++) {
        const struct seg *s = &m->segs[i];

        if (s->state == SEG_MOUNTED && s->node == nd->id) {
            o->drain_blocks += mc_alloc_used_blocks(s->alloc);
            o->drain_bytes += mc_alloc_used_bytes(s->alloc);
        }
    }
    o->drain = o->drain_blocks == 0 ? MC_MASTER_DRAIN_DRAINED : MC_MASTER_DRAIN_DRAINING;
}

uint32_t mc_master_node_drain_state(const struct mc_master *m, uint32_t node)
{
    const struct node *nd = node_get(m, node);
    struct mc_master_node_info o;

    if (nd == NULL)
        return MC_MASTER_DRAIN_NONE;
    node_drain_info(m, nd, &o);
    return o.drain;
}

/* The cursor is a slot index. A page always holds at least one node when there is one, so
 * a next page never starts at slot 0 and 0 can mean "done". Counting segments walks the
 * segment table per node: a page costs max * nsegs, fine for a monitoring call. */
size_t mc_master_node_list(const struct mc_master *m, uint32_t *cursor_p,
                           struct mc_master_node_info *out, size_t max)
{
    uint64_t ms = now_ms(m);
    uint32_t slot;
    size_t n = 0;

    if (max == 0)
        return 0;
    for (slot = *cursor_p; slot < m->nnodes; slot++) {
        const struct node *nd = &m->nodes[slot];
        struct mc_master_node_info *o;

        if (nd->state == NODE_FREE)
            continue;
        if (n == max) {
            *cursor_p = slot;
            return n;
        }
        o = &out[n++];
        o->id = nd->id;
        o->alive = nd->state == NODE_ALIVE;
        o->segments = o->alive ? node_segments(m, nd->id) : 0;
        o->idle_ms = ms >= nd->last_hb_ms ? ms - nd->last_hb_ms : 0;
        memcpy(o->name, nd->name, sizeof(o->name));
        memcpy(o->domain, nd->domain, sizeof(o->domain));
        node_drain_info(m, nd, o);
    }
    *cursor_p = 0;
    return n;
}

int mc_master_segment_mount(struct mc_master *m, const struct mc_master_seg_desc *d,
                            uint32_t *seg_p)
{
    uint64_t granule = m->cfg.alloc_granule;
    uint32_t slot, tenant;
    struct seg *s;
    int err;

    if (d == NULL || seg_p == NULL || !mc_master_node_is_alive(m, d->node) ||
        d->kind > MC_SEG_DISK || (d->flags & ~MC_MASTER_SEG_F_ALL) != 0)
        return MC_ERR_INVALID;
    err = mc_master__tenant_mount(m, d->tenant, d->quota, &tenant);
    if (err != 0)
        return err;
    /* a disk segment's extents are whole device blocks (O_DIRECT) */
    if (d->kind == MC_SEG_DISK && granule < MC_MASTER_DISK_BLOCK)
        granule = MC_MASTER_DISK_BLOCK;
    /* a bigger granule for huge segments: the allocator counts granules in 32 bits */
    while (d->size / granule > MC_ALLOC_MAX_UNITS)
        granule *= 2;
    for (slot = 0; slot < m->nsegs; slot++) {
        if (m->segs[slot].state == SEG_FREE)
            break;
    }
    if (slot == m->nsegs) {
        if (m->nsegs > SLOT_MAX)
            return MC_ERR_NO_SPACE;
        if (m->nsegs == m->cap_segs) {
            uint32_t cap = m->cap_segs ? m->cap_segs * 2 : 16;
            struct seg *ns = realloc(m->segs, cap * sizeof(*ns));

            if (ns == NULL)
                return MC_ERR_NOMEM;
            memset(ns + m->cap_segs, 0, (cap - m->cap_segs) * sizeof(*ns));
            m->segs = ns;
            m->cap_segs = cap;
        }
        m->nsegs++;
    }
    s = &m->segs[slot];
    err = mc_alloc_create(d->size, granule, &s->alloc);
    if (err != 0)
        return err;
    s->state = SEG_MOUNTED;
    s->kind = d->kind;
    s->node = d->node;
    s->base = d->base;
    s->hard_pinned = 0;
    s->evictions = 0;
    s->tenant = tenant;
    s->restoring = (d->flags & MC_MASTER_SEG_F_RESTORING) != 0;
    s->restore_until_ms = now_ms(m) + m->cfg.restore_window_ms;
    m->st.segments++;
    *seg_p = seg_id(m, s);
    return 0;
}

int mc_master_segment_unmount(struct mc_master *m, uint32_t seg)
{
    struct seg *s = seg_get(m, seg);

    if (s == NULL)
        return MC_ERR_NOT_FOUND;
    seg_unmount(m, s);
    return 0;
}

int mc_master_segment_info(const struct mc_master *m, uint32_t seg,
                           struct mc_master_seg_info *info_p)
{
    const struct seg *s = seg_get(m, seg);

    if (s == NULL || info_p == NULL)
        return MC_ERR_NOT_FOUND;
    info_p->node = s->node;
    info_p->kind = s->kind;
    info_p->base = s->base;
    info_p->size = mc_alloc_capacity(s->alloc);
    info_p->free_bytes = mc_alloc_free_bytes(s->alloc);
    info_p->largest_free = mc_alloc_largest_free(s->alloc);
    info_p->hard_pinned_bytes = s->hard_pinned;
    info_p->blocks = mc_alloc_used_blocks(s->alloc);
    info_p->evictions = s->evictions;
    memcpy(info_p->tenant, m->tenants[s->tenant].name, sizeof(info_p->tenant));
    info_p->quota = m->tenants[s->tenant].quota;
    info_p->restoring = s->restoring;
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* the tick */

/* Timers of one version: lost replicas, lease end, stale release, orphaned puts. */
static void ver_sweep(struct mc_master *m, struct ver *v, uint32_t now)
{
    if (v->state == VS_EMPTY)
        return;
    mc_master__ver_drop_dead_reps(m, v);
    if (v->nrep == 0) {
        v->state = VS_EMPTY;
        return;
    }
    (void)ver_is_leased(m, v, now); /* also renews an old lease_exp before it could wrap */
    switch (v->state) {
    case VS_RETIRED:
        if (v->lease_cnt == 0)
            mc_master__ver_free_space(m, v);
        break;
    case VS_PROCESSING:
        if (!mc_master_node_is_alive(m, v->writer)) {
            mc_master__ver_make_stale(m, v); /* the writer died: revoke; owners fence */
            mc_master__fence_queue(m, v);
            m->st.puts_revoked++;
        } else if (ct_reached(now, v->t_start + m->release_ct)) {
            /* a live writer that never ended nor revoked it: abandoned; no write of it can
             * still be in flight, so it must not pin the space (or the key) for ever */
            v->state = VS_STALE;
            m->st.puts_revoked++;
        }
        break;
    default:
        break;
    }
    if (v->state == VS_STALE && ct_reached(now, v->t_start + m->release_ct)) {
        mc_master__ver_free_space(m, v); /* no write can be in flight this long after it began */
        m->st.stale_freed_by_timeout++;
    }
}

static bool obj_sweep(struct mc_master *m, struct obj *o, uint32_t now)
{
    struct ver_ext *e;

    if (o->v.state == VS_COMPLETE && obj_ttl_passed(m, o)) {
        mc_master__ver_retire(m, &o->v, now);
        o->flags &= (uint8_t)~OF_TTL;
        m->st.ttl_expiries++;
    }
    /* pin_exp is armed at publish: a head still being written keeps its pin request */
    if (o->v.state == VS_COMPLETE && (o->flags & OF_PIN_SOFT) && ct_reached(now, o->pin_exp))
        o->flags &= (uint8_t)~OF_PIN_SOFT;
    ver_sweep(m, &o->v, now);
    for (e = o->more; e != NULL; e = e->next)
        ver_sweep(m, &e->v, now);
    return mc_master__obj_is_empty(o);
}

void mc_master_tick(struct mc_master *m)
{
    uint64_t ms = now_ms(m);
    uint32_t now = now_ct(m), i;
    uint64_t n;

    for (i = 0; i < m->nnodes; i++) {
        struct node *nd = &m->nodes[i];

        if (nd->state == NODE_ALIVE && ms - nd->last_hb_ms > m->cfg.node_ttl_ms) {
            node_down(m, nd);
            m->st.nodes_declared_dead++;
        }
    }
    for (n = 0; n < m->cfg.sweep_max_scan; n++) {
        struct obj *o = mc_dir_cursor_next(m->dir, &m->sweep);

        if (o == NULL)
            break; /* a pass is done; the next tick starts the next one */
        if (obj_sweep(m, o, now)) {
            mc_dir_cursor_remove(m->dir, &m->sweep);
            mc_master__obj_free(o);
        }
    }
    for (i = 0; i < m->nsegs; i++) {
        struct seg *s = &m->segs[i];

        if (s->state == SEG_MOUNTED && !seg_restoring(m, s) &&
            (double)mc_alloc_used_bytes(s->alloc) >
                m->cfg.high_watermark * (double)mc_alloc_capacity(s->alloc))
            mc_master__seg_trim(m, s, now);
    }
    mc_drain_tick(m);
}

/* ---------------------------------------------------------------------------------------- */

int mc_master_create(const struct mc_master_config *cfg, mc_master_clock_fn clock,
                     void *clock_ctx, struct mc_master **m_p)
{
    struct mc_master *m;
    int err;

    if (cfg == NULL || m_p == NULL || cfg->low_watermark > cfg->high_watermark ||
        cfg->alloc_granule < 8 || (cfg->alloc_granule & (cfg->alloc_granule - 1)) != 0)
        return MC_ERR_INVALID;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return MC_ERR_NOMEM;
    m->cfg = *cfg;
    m->clock = clock != NULL ? clock : clock_monotonic_ms;
    m->clock_ctx = clock_ctx;
    m->t0_ms = now_ms(m);
    m->rng = 0x9E3779B97F4A7C15ull;
    m->lease_ct = ms_to_ct(cfg->lease_ttl_ms);
    m->discard_ct = ms_to_ct(cfg->put_discard_ms);
    m->release_ct = ms_to_ct(cfg->put_release_ms);
    m->soft_pin_ct = ms_to_ct(cfg->soft_pin_ttl_ms);
    m->ntenants = 1; /* the default tenant, "" */
    m->pin_ct = ms_to_ct(cfg->pin_ttl_ms != 0 ? cfg->pin_ttl_ms : MC_MASTER_PIN_TTL_DEFAULT_MS);
    err = mc_dir_create((uint32_t)cfg->directory_shards, mc_master__obj_key, &m->dir);
    if (err != 0) {
        free(m);
        return err;
    }
    mc_dir_cursor_init(&m->sweep);
    err = mc_drain_create((uint32_t)cfg->drain_copies_max, &m->drain);
    if (err != 0) {
        mc_dir_destroy(m->dir);
        free(m);
        return err;
    }
    m->offload = mc_drain_offload;
    m->unpublished = mc_drain_unpublished;
    *m_p = m;
    return 0;
}

void mc_master_destroy(struct mc_master *m)
{
    struct obj *o;
    struct mc_dir_cursor c;
    uint32_t i;

    if (m == NULL)
        return;
    /* free records without touching allocators one block at a time */
    mc_dir_cursor_init(&c);
    while ((o = mc_dir_cursor_next(m->dir, &c)) != NULL) {
        mc_dir_cursor_remove(m->dir, &c);
        mc_master__obj_free(o);
    }
    mc_dir_destroy(m->dir);
    mc_drain_destroy(m->drain);
    for (i = 0; i < m->nsegs; i++)
        mc_alloc_destroy(m->segs[i].alloc);
    free(m->segs);
    free(m->nodes);
    free(m->drops);
    free(m);
}

void mc_master_version_floor(struct mc_master *m, uint64_t floor)
{
    if (m->next_version < floor)
        m->next_version = floor;
}

uint64_t mc_master_version_last(const struct mc_master *m)
{
    return m->next_version;
}

void mc_master_get_stats(const struct mc_master *m, struct mc_master_stats *st_p)
{
    uint32_t i;

    *st_p = m->st;
    st_p->objects = mc_dir_count(m->dir);
    st_p->capacity_bytes = 0;
    st_p->used_bytes = 0;
    st_p->meta_bytes = mc_dir_meta_bytes(m->dir);
    for (i = 0; i < m->nsegs; i++) {
        const struct seg *s = &m->segs[i];

        if (s->state != SEG_MOUNTED)
            continue;
        st_p->capacity_bytes += mc_alloc_capacity(s->alloc);
        st_p->used_bytes += mc_alloc_used_bytes(s->alloc);
        st_p->meta_bytes += mc_alloc_meta_bytes(s->alloc);
    }
}

const struct mc_master_config *mc_master_config(const struct mc_master *m)
{
    return &m->cfg;
}

