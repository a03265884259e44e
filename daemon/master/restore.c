/*
 * Restores (master.h, mc_master_restore): the master learns again of a replica an agent
 * holds, the way the agents' truth gets back into a directory that lost it (a restarted
 * standalone agent's disk scan, a new master's rebuild). It sits beside master.c and
 * drain.c above record.c: it claims the exact extent the agent names, then either adds
 * a replica to the version the master knows or publishes the reported version.
 *
 * What it must never do is bring back what the master has since let go of: a version it
 * knows in any other state (being re-put, retired, displaced), or any newer version, wins
 * over the report, which the agent then forgets. And only a segment mounted RESTORING takes
 * new replicas: in a segment the master has known all along (an agent rejoining the master
 * that kept it), what the master does not know was freed, and the report of it is refused.
 */
#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/master/alloc.h"
#include "daemon/master/directory.h"
#include "daemon/master/master_int.h"

#define RESTORE_FLAGS                                                                         \
    (MC_MASTER_PUT_PIN_SOFT | MC_MASTER_PUT_PIN_HARD | MC_MASTER_PUT_NO_CHECKSUM)
#define RESTORE_REQ_FLAGS (RESTORE_FLAGS | MC_MASTER_RESTORE_LATE)

static int restore_check(const struct mc_master *m, const struct mc_master_restore_req *r,
                         struct seg **s_p)
{
    struct seg *s;
    uint32_t tenant;

    if (r == NULL || check_key(r->key, r->key_len) != 0 || r->size == 0 || r->version == 0 ||
        r->version > MC_MASTER_VERSION_MAX || r->alloc_len < r->size || r->alloc_len > SIZE_MAX_OBJ ||
        (r->flags & ~RESTORE_REQ_FLAGS) != 0 ||
        ((r->flags & MC_MASTER_PUT_PIN_SOFT) && (r->flags & MC_MASTER_PUT_PIN_HARD)) ||
        r->ttl_ms > MC_MASTER_TTL_MAX_MS)
        return MC_ERR_INVALID;
    s = seg_get(m, r->seg);
    if (s == NULL || !mc_master__tenant_of_key(m, r->key, r->key_len, &tenant) ||
        tenant != s->tenant)
        return MC_ERR_INVALID;
    *s_p = s;
    return 0;
}

/*
 * Whether the master knows something that wins over version `id`: a newer version in any
 * state, or `id` itself in any state but the visible head's. *same_p: the visible head is
 * version `id` (the report is one more replica of it).
 */
static bool known_better(const struct mc_master *m, struct obj *o, uint64_t id, bool *same_p)
{
    const struct ver_ext *e;

    *same_p = false;
    if (o->v.state != VS_EMPTY) {
        if (o->v.id > id)
            return true;
        if (o->v.id == id) {
            if (!obj_is_visible(m, o))
                return true;
            *same_p = true;
        }
    }
    for (e = o->more; e != NULL; e = e->next) {
        if (e->v.state != VS_EMPTY && e->v.id >= id)
            return true;
    }
    return false;
}

/* Whether the visible head already has a replica in s: 1 at exactly `offset` (the report is
 * known already), MC_ERR_EXISTS elsewhere (one replica per segment), 0 none. */
static int restore_known(const struct mc_master *m, struct obj *o, const struct seg *s,
                         uint64_t offset)
{
    struct rep *reps = ver_reps(&o->v);
    uint32_t i;

    for (i = 0; i < o->v.nrep; i++) {
        if (seg_of_rep(m, &reps[i]) == s)
            return mc_alloc_offset(s->alloc, reps[i].alloc) == offset ? 1 : MC_ERR_EXISTS;
    }
    return 0;
}

/* A new version (PROCESSING, replica r) in o, published at once. */
static int restore_publish(struct mc_master *m, struct obj *o, uint64_t hash, bool fresh,
                           const struct mc_master_restore_req *req, struct seg *s,
                           const struct rep *r, uint32_t now)
{
    struct ver *v;

    if (fresh) {
        int err = mc_dir_insert(m->dir, hash, o);

        if (err != 0)
            return err;
    }
    if (o->v.state == VS_COMPLETE && !obj_is_visible(m, o))
        mc_master__ver_retire(m, &o->v, now); /* expired or lost: make room for the new head */
    if (o->v.state == VS_EMPTY && o->more == NULL) {
        v = &o->v;
        o->flags = (uint8_t)(((req->flags & MC_MASTER_PUT_PIN_SOFT) ? OF_PIN_SOFT : 0) |
                             ((req->flags & MC_MASTER_PUT_PIN_HARD) ? OF_PIN_HARD : 0) |
                             ((req->flags & MC_MASTER_PUT_NO_CHECKSUM) ? OF_NO_CSUM : 0));
        o->ttl_exp = (uint32_t)(req->ttl_ms / CT_MS);
        o->ttl_sub = (uint8_t)(req->ttl_ms % CT_MS);
    } else {
        struct ver_ext *e = calloc(1, sizeof(*e));

        if (e == NULL)
            return MC_ERR_NOMEM;
        e->obj = o;
        e->flags = (uint8_t)(((req->flags & MC_MASTER_PUT_PIN_SOFT) ? OF_PIN_SOFT : 0) |
                             ((req->flags & MC_MASTER_PUT_PIN_HARD) ? OF_PIN_HARD : 0) |
                             ((req->flags & MC_MASTER_PUT_NO_CHECKSUM) ? OF_NO_CSUM : 0));
        e->ttl_ms = req->ttl_ms;
        e->next = o->more;
        o->more = e;
        v = &e->v;
    }
    memset(v, 0, sizeof(*v));
    v->id = req->version;
    v->size = req->size;
    v->state = VS_PROCESSING;
    v->t_start = now;
    v->writer = s->node;
    v->nrep = 1;
    v->r.one = *r;
    v->ext = v != &o->v;
    mc_master__ver_repoint(m, v);
    mc_master__publish(m, o, v, now);
    mc_master__obj_gc(m, o);
    return 0;
}

int mc_master_restore_done(struct mc_master *m, uint32_t seg)
{
    struct seg *s = seg_get(m, seg);

    if (s == NULL)
        return MC_ERR_NOT_FOUND;
    s->restoring = false;
    return 0;
}

void mc_master_recovering_set(struct mc_master *m, bool on)
{
    m->recovering = on;
}

int mc_master_restore(struct mc_master *m, const struct mc_master_restore_req *in)
{
    struct mc_master_restore_req rq = *in, *req = &rq;
    bool late = (in->flags & MC_MASTER_RESTORE_LATE) != 0;
    struct seg *s = NULL;
    struct obj *o;
    struct rep r;
    uint64_t hash, len;
    uint32_t now;
    bool same, hard, fresh = false;
    int err;

    err = restore_check(m, req, &s);
    if (err != 0)
        goto out;
    rq.flags &= ~(uint32_t)MC_MASTER_RESTORE_LATE;
    now = now_ct(m);
    hash = mc_dir_hash(req->key, req->key_len);
    o = mc_dir_find(m->dir, hash, req->key, req->key_len);
    same = false;
    if (o != NULL && known_better(m, o, req->version, &same)) {
        err = MC_ERR_CANCELED;
        goto out;
    }
    if (same && o->v.size != req->size) {
        err = MC_ERR_CANCELED; /* one version, two sizes: the directory's word stands */
        goto out;
    }
    if (same) {
        err = restore_known(m, o, s, req->offset);
        if (err == 1)
            return 0; /* reported again (a rejoin to a master that kept it): nothing to do */
        if (err != 0)
            goto out;
    }
    if (!seg_restoring(m, s) && !(late && m->recovering)) {
        /* a segment this master has known all along (or whose report window is over): what
         * it does not know there, it freed -- the report must not bring it back. Except a
         * late one while the master recovers: nothing was placed or freed since the reign
         * began */
        err = MC_ERR_CANCELED;
        goto out;
    }
    if (o == NULL) {
        o = malloc(sizeof(*o) + req->key_len);
        if (o == NULL) {
            err = MC_ERR_NOMEM;
            goto out;
        }
        memset(o, 0, sizeof(*o));
        o->key_len = (uint16_t)req->key_len;
        memcpy(o->key, req->key, req->key_len);
        fresh = true;
    }

    r.seg = (uint16_t)(s - m->segs);
    r.gen = s->gen;
    err = mc_alloc_claim(s->alloc, req->offset, req->alloc_len, &r.alloc);
    if (err != 0)
        goto out_free;
    len = mc_alloc_len(s->alloc, r.alloc);
    hard = same ? (ver_flags(&o->v) & OF_PIN_HARD) != 0 : (req->flags & MC_MASTER_PUT_PIN_HARD);
    if (same)
        err = mc_master__ver_add_rep(m, &o->v, &r);
    else
        err = restore_publish(m, o, hash, fresh, req, s, &r, now);
    if (err != 0) {
        mc_alloc_free(s->alloc, r.alloc);
        goto out_free;
    }
    if (hard)
        s->hard_pinned += len;
    if (m->next_version < req->version)
        m->next_version = req->version;
    m->st.restores++;
    return 0;

out_free:
    if (fresh)
        free(o);
out:
    m->st.restores_refused++;
    return err;
}
