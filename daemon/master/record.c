/*
 * Records, versions and replicas of the master service (master_int.h): the moves a version
 * makes through its life (retire, make stale, free its space), the record's chain of further
 * versions, publication, and the queue of blocks whose owners are asked to fence them. No
 * policy here: which version to publish, when to evict or where to place is master.c's,
 * restore.c's and place.c's.
 */
#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/master/alloc.h"
#include "daemon/master/directory.h"
#include "daemon/master/master_int.h"

void mc_master__ver_repoint(struct mc_master *m, struct ver *v)
{
    struct rep *reps = ver_reps(v);
    uint32_t i;

    for (i = 0; i < v->nrep; i++) {
        struct seg *s = seg_of_rep(m, &reps[i]);

        if (s != NULL)
            mc_alloc_set_owner(s->alloc, reps[i].alloc, v);
    }
}

void mc_master__drop_push(struct mc_master *m, uint32_t seg, uint64_t offset, uint64_t version)
{
    struct mc_master_drop d = {.seg = seg, .offset = offset, .version = version};

    mc_master__drop_push_kind(m, &d);
}

void mc_master__drop_push_kind(struct mc_master *m, const struct mc_master_drop *drop)
{
    if (m->drop_count == m->drop_cap) {
        size_t cap = m->drop_cap != 0 ? 2 * m->drop_cap : 1024, i;
        struct mc_master_drop *d;

        if (cap > MC_MASTER_DROP_QUEUE_MAX || (d = malloc(cap * sizeof(*d))) == NULL)
            return; /* nobody takes them, or no memory: the owner keeps it (master.h) */
        for (i = 0; i < m->drop_count; i++)
            d[i] = m->drops[(m->drop_head + i) % m->drop_cap];
        free(m->drops);
        m->drops = d;
        m->drop_cap = cap;
        m->drop_head = 0;
    }
    m->drops[(m->drop_head + m->drop_count++) % m->drop_cap] = *drop;
}

/* Return one replica's block to its segment (if the segment is still there). A block of a
 * published version is told to its owner (drops), whose index forgets it. */
void mc_master__rep_release(struct mc_master *m, const struct rep *r, bool hard)
{
    struct seg *s = seg_of_rep(m, r);
    const struct ver *v;

    if (s == NULL)
        return;
    if (hard)
        s->hard_pinned -= mc_alloc_len(s->alloc, r->alloc);
    v = mc_alloc_owner(s->alloc, r->alloc);
    if (m->drops_on && v != NULL && (v->state == VS_COMPLETE || v->state == VS_RETIRED)) {
        struct mc_master_drop d = {.seg = seg_id(m, s),
                                   .offset = mc_alloc_offset(s->alloc, r->alloc),
                                   .version = v->id,
                                   .kind = MC_MASTER_DROP_FREED,
                                   .after_retire = v->state == VS_RETIRED};

        mc_master__drop_push_kind(m, &d);
    }
    mc_alloc_free(s->alloc, r->alloc);
}

void mc_master_drops_enable(struct mc_master *m, bool on)
{
    m->drops_on = on;
    if (!on)
        m->drop_count = 0;
}

size_t mc_master_drops_take(struct mc_master *m, struct mc_master_drop *out, size_t max)
{
    size_t n = 0;

    while (n < max && m->drop_count > 0) {
        out[n++] = m->drops[m->drop_head];
        m->drop_head = (m->drop_head + 1) % m->drop_cap;
        m->drop_count--;
    }
    return n;
}

/* Remove replica i from v (without freeing its block). */
void mc_master__ver_drop_rep(struct ver *v, uint32_t i)
{
    struct rep *reps = ver_reps(v);

    reps[i] = reps[v->nrep - 1];
    if (v->nrep == 2) {
        struct rep keep = reps[0];

        free(v->r.many);
        v->r.one = keep;
    }
    v->nrep--;
}

/* Drop the replicas whose segment is gone. */
void mc_master__ver_drop_dead_reps(struct mc_master *m, struct ver *v)
{
    uint32_t i = 0;

    while (i < v->nrep) {
        if (seg_of_rep(m, &ver_reps(v)[i]) == NULL)
            mc_master__ver_drop_rep(v, i);
        else
            i++;
    }
}

/* Free every block of v now: the caller knows nothing reads or writes them any more. */
void mc_master__ver_free_space(struct mc_master *m, struct ver *v)
{
    bool hard = (ver_flags(v) & OF_PIN_HARD) != 0;
    struct rep *reps = ver_reps(v);
    uint32_t i;

    for (i = 0; i < v->nrep; i++)
        mc_master__rep_release(m, &reps[i], hard);
    if (v->nrep >= 2)
        free(v->r.many);
    v->nrep = 0;
    v->state = VS_EMPTY;
    v->lease_cnt = 0;
}

/* Unpublish v: freed now when unleased, else when its last lease ends. Then its disk
 * blocks are told (RETIRED drops): a record its owner's restart found would otherwise
 * publish the object again, and the answer of the remove does not wait for the lease. So
 * are the targets of its offload copies still being written (drain.c). */
void mc_master__ver_retire(struct mc_master *m, struct ver *v, uint32_t now)
{
    struct rep *reps;
    uint32_t i;

    if (m->unpublished != NULL && (v->state == VS_COMPLETE || v->state == VS_RETIRED))
        m->unpublished(m, v);
    if (!ver_is_leased(m, v, now)) {
        mc_master__ver_free_space(m, v);
        return;
    }
    v->state = VS_RETIRED;
    reps = ver_reps(v);
    for (i = 0; m->drops_on && i < v->nrep; i++) {
        struct seg *s = seg_of_rep(m, &reps[i]);
        struct mc_master_drop d;

        if (s == NULL || s->kind != MC_SEG_DISK)
            continue;
        d = (struct mc_master_drop){.seg = seg_id(m, s),
                                    .offset = mc_alloc_offset(s->alloc, reps[i].alloc),
                                    .version = v->id,
                                    .kind = MC_MASTER_DROP_RETIRED};
        mc_master__drop_push_kind(m, &d);
    }
}

/* Ask the owners of v's blocks to fence them (mc_master_fences_take). */
void mc_master__fence_queue(struct mc_master *m, struct ver *v)
{
    struct rep *reps;
    uint32_t i;

    if (v->state != VS_STALE)
        return;
    reps = ver_reps(v);
    for (i = 0; i < v->nrep; i++) {
        /* = seg_id() */
        if (!mc_master__fence_push(m, (uint32_t)reps[i].gen << 16 | reps[i].seg, reps[i].alloc,
                                   v->id))
            break;
    }
}

/* A put whose writes may still land: keep its blocks until the writer reports its
 * transfers final, the owners fence the blocks, or the release timeout passes. */
void mc_master__ver_make_stale(struct mc_master *m, struct ver *v)
{
    mc_master__ver_drop_dead_reps(m, v);
    if (v->nrep == 0) {
        v->state = VS_EMPTY;
        return;
    }
    v->state = VS_STALE;
}

const char *mc_master__obj_key(const void *rec, size_t *len_p)
{
    const struct obj *o = rec;

    *len_p = o->key_len;
    return o->key;
}

/* Unlink empty chain entries; true when the record holds nothing and must go. */
bool mc_master__obj_is_empty(struct obj *o)
{
    struct ver_ext **pp = &o->more;

    while (*pp != NULL) {
        struct ver_ext *e = *pp;

        if (e->v.state == VS_EMPTY) {
            *pp = e->next;
            free(e);
        } else {
            pp = &e->next;
        }
    }
    return o->v.state == VS_EMPTY && o->more == NULL;
}

void mc_master__obj_free(struct obj *o)
{
    struct ver_ext *e, *next;

    for (e = o->more; e != NULL; e = next) {
        next = e->next;
        if (e->v.nrep >= 2)
            free(e->v.r.many);
        free(e);
    }
    if (o->v.nrep >= 2)
        free(o->v.r.many);
    free(o);
}

/* Delete the record when nothing is left in it. */
void mc_master__obj_gc(struct mc_master *m, struct obj *o)
{
    if (!mc_master__obj_is_empty(o))
        return;
    mc_dir_remove(m->dir, mc_dir_hash(o->key, o->key_len), o);
    mc_master__obj_free(o);
}

/* Swap the head with chain entry e (publishing e); fixes owners and flags of both. */
void mc_master__obj_swap_head(struct mc_master *m, struct obj *o, struct ver_ext *e)
{
    struct ver tmp = o->v;
    uint8_t head_flags = o->flags & (OF_PIN_SOFT | OF_PIN_HARD | OF_NO_CSUM);

    o->v = e->v;
    o->v.ext = 0;
    e->v = tmp;
    e->v.ext = 1;
    o->flags = (uint8_t)((o->flags & ~(OF_PIN_SOFT | OF_PIN_HARD | OF_NO_CSUM)) | e->flags);
    e->flags = head_flags;
    mc_master__ver_repoint(m, &o->v);
    mc_master__ver_repoint(m, &e->v);
}

bool mc_master__fence_push(struct mc_master *m, uint32_t seg, uint32_t alloc, uint64_t version)
{
    struct mc_master_fence *f;

    if (m->fence_count >= MC_MASTER_FENCE_QUEUE)
        return false;
    f = &m->fences[(m->fence_head + m->fence_count) % MC_MASTER_FENCE_QUEUE];
    f->seg = seg;
    f->alloc = alloc;
    f->version = version;
    m->fence_count++;
    return true;
}

size_t mc_master_fences_take(struct mc_master *m, struct mc_master_fence *out, size_t max)
{
    size_t n = 0;

    while (n < max && m->fence_count > 0) {
        out[n++] = m->fences[m->fence_head];
        m->fence_head = (m->fence_head + 1) % MC_MASTER_FENCE_QUEUE;
        m->fence_count--;
    }
    return n;
}

int mc_master__ver_add_rep(struct mc_master *m, struct ver *v, const struct rep *r)
{
    struct seg *s = seg_of_rep(m, r);
    struct rep *many;

    if (v->nrep >= MC_MASTER_MAX_REPLICAS || s == NULL)
        return MC_ERR_NO_SPACE;
    if (v->nrep == 0) {
        v->r.one = *r;
    } else if (v->nrep == 1) {
        many = malloc(2 * sizeof(*many));
        if (many == NULL)
            return MC_ERR_NOMEM;
        many[0] = v->r.one;
        many[1] = *r;
        v->r.many = many;
    } else {
        many = realloc(v->r.many, (v->nrep + 1u) * sizeof(*many));
        if (many == NULL)
            return MC_ERR_NOMEM;
        many[v->nrep] = *r;
        v->r.many = many;
    }
    v->nrep++;
    mc_alloc_set_owner(s->alloc, r->alloc, v);
    return 0;
}

/* Make v (PROCESSING, all replicas live) the readable head of o. */
void mc_master__publish(struct mc_master *m, struct obj *o, struct ver *v, uint32_t now)
{
    uint64_t ttl_ms;

    if (v->ext) {
        struct ver_ext *e = (struct ver_ext *)v;

        ttl_ms = e->ttl_ms;
        mc_master__obj_swap_head(m, o, e);
        /* the version it replaces: readers keep it till done */
        if (e->v.state == VS_COMPLETE)
            mc_master__ver_retire(m, &e->v, now);
        /* RETIRED/STALE stay as they are; EMPTY is unlinked by the caller's gc */
    } else {
        ttl_ms = (uint64_t)o->ttl_exp * CT_MS + o->ttl_sub;
    }
    o->v.state = VS_COMPLETE;
    o->v.lease_cnt = 0;
    if (ttl_ms != 0) {
        /* the ms (since t0) the object expires at; no overflow: ttl_ms <= the maximum */
        uint64_t at = now_ms(m) - m->t0_ms + ttl_ms;

        o->ttl_exp = (uint32_t)(at / CT_MS);
        o->ttl_sub = (uint8_t)(at % CT_MS);
        o->flags |= OF_TTL;
    } else {
        o->ttl_exp = 0;
        o->ttl_sub = 0;
        o->flags &= (uint8_t)~OF_TTL;
    }
    if (o->flags & OF_PIN_SOFT)
        o->pin_exp = now + m->soft_pin_ct;
    o->flags |= OF_CLOCK; /* a new object gets one turn of the hand before it may go */
}
