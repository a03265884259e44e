/*
 * Placement and eviction of the master service (master_int.h): where a put's (or a drain
 * copy's) blocks go -- distinct failure domains, the preferred node first, then segments
 * weighted by free bytes -- and the clock hand that frees room in a segment, inline when a
 * placement finds none and from the tick above the high watermark.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

#include <mc/mc_status.h>

#include "daemon/master/alloc.h"
#include "daemon/master/master_int.h"

/*
 * Examine the block under segment s's clock hand; evict its replica when it may go.
 * `force` takes it even with its reference bit set (leases, hard pins and versions not
 * complete still protect it). When the block would have gone but for its bit, which this
 * step clears, *spared_p is set to its id. Returns the bytes freed (0 when the block was
 * skipped or nothing is allocated).
 */
static uint64_t seg_evict_step(struct mc_master *m, struct seg *s, bool allow_soft, bool force,
                               uint32_t now, uint32_t *spared_p)
{
    uint32_t id = mc_alloc_clock_next(s->alloc);
    struct ver *v;
    struct obj *o;
    struct rep *reps;
    uint64_t len;
    uint32_t i;

    if (id == MC_ALLOC_NONE)
        return 0;
    v = mc_alloc_owner(s->alloc, id);
    if (v == NULL || v->ext || v->state != VS_COMPLETE)
        return 0; /* being written, lingering or stale: never an eviction candidate */
    o = ver_obj(v);
    if (obj_ttl_passed(m, o)) {
        /* expired: reclaim the whole version (leases still protect it) */
        len = mc_alloc_len(s->alloc, id);
        m->st.ttl_expiries++;
        mc_master__ver_retire(m, v, now);
        mc_master__obj_gc(m, o);
        return len;
    }
    if (ver_is_leased(m, v, now) || (o->flags & OF_PIN_HARD))
        return 0;
    /* the hand ages soft-pinned objects too, so that once they may go, the least
     * recently used of them goes first */
    if ((o->flags & OF_CLOCK) && !force) {
        o->flags &= (uint8_t)~OF_CLOCK; /* second chance */
        if (!(o->flags & OF_PIN_SOFT) || allow_soft)
            *spared_p = id;
        return 0;
    }
    if ((o->flags & OF_PIN_SOFT) && ct_reached(now, o->pin_exp))
        o->flags &= (uint8_t)~OF_PIN_SOFT;
    if ((o->flags & OF_PIN_SOFT) && !allow_soft)
        return 0;
    /* its node's disk may take it instead (drain.c): the block stays until its bytes are
     * there, and goes on a later pass, the disk replica staying */
    if (s->kind == MC_SEG_DRAM && m->offload != NULL && m->offload(m, s, v, now))
        return 0;
    reps = ver_reps(v);
    for (i = 0; i < v->nrep; i++) {
        if (reps[i].seg == (uint16_t)(s - m->segs) && reps[i].alloc == id)
            break;
    }
    assert(i < v->nrep);
    len = mc_alloc_len(s->alloc, id);
    mc_master__rep_release(m, &reps[i], false);
    mc_master__ver_drop_rep(v, i);
    s->evictions++;
    m->st.evictions++;
    m->st.evicted_bytes += len;
    if (!ver_has_live_rep(m, v)) {
        mc_master__ver_free_space(m, v);
        mc_master__obj_gc(m, o);
    }
    return len;
}

/*
 * Evict from s until `done` says so. The clock pass examines at most evict_max_scan blocks:
 * first unpinned objects only (two turns of the hand, so clock bits get their second
 * chance), then soft-pinned ones too. Returns true when `done` was reached.
 *
 * When that budget is spent and `force` is set (a put that needs the room now), the pass
 * must not give up while room can be made: right after a pool first fills every block
 * still carries the bit of its own put, and a segment may hold far more blocks than the
 * budget, so the clock pass alone can clear bits without finding a victim. The hand then
 * goes back to the first block whose bit this pass cleared (the oldest it saw, in clock
 * order) and walks again taking victims regardless of their bits: unpinned objects for one
 * lap of the segment, then soft-pinned ones for one more. The work stays bounded: one
 * victim per block of room needed when the blocks in reach may go; the two laps only when
 * nothing in reach may go (leased, hard-pinned, being written), which is when
 * MC_ERR_NO_SPACE is the answer (mc.h). Trimming to the watermarks on the tick does not
 * force: it stays within the budget and tries again on the next tick.
 */
typedef bool (*evict_done_fn)(struct mc_master *m, struct seg *s, uint64_t arg);

static bool seg_evict(struct mc_master *m, struct seg *s, evict_done_fn done, uint64_t arg,
                      bool force, uint32_t now)
{
    uint64_t budget = m->cfg.evict_max_scan;
    uint64_t phase1 = 2 * (uint64_t)mc_alloc_used_blocks(s->alloc) + 1;
    uint32_t spared = MC_ALLOC_NONE, first = MC_ALLOC_NONE;
    void *first_owner = NULL;
    uint64_t n, lap;
    int pass;

    /* on a segment with more blocks than the budget covers, half of it still goes to
     * soft-pinned candidates: a soft pin must never act as an uncapped hard one */
    if (phase1 > budget / 2)
        phase1 = budget / 2;
    for (n = 0; n < budget; n++) {
        if (done(m, s, arg))
            return true;
        if (mc_alloc_used_blocks(s->alloc) == 0)
            break;
        seg_evict_step(m, s, n >= phase1, false, now, &spared);
        if (first == MC_ALLOC_NONE && spared != MC_ALLOC_NONE) {
            first = spared;
            first_owner = mc_alloc_owner(s->alloc, first);
        }
    }
    if (done(m, s, arg) || !force)
        return done(m, s, arg);
    /* the block may have gone since (a TTL expiry further on): then the hand stays put */
    if (first != MC_ALLOC_NONE && mc_alloc_is_used(s->alloc, first) &&
        mc_alloc_owner(s->alloc, first) == first_owner)
        mc_alloc_clock_rewind(s->alloc, first);
    for (pass = 0; pass < 2; pass++) {
        lap = (uint64_t)mc_alloc_used_blocks(s->alloc) + 1;
        for (n = 0; n < lap; n++) {
            if (done(m, s, arg))
                return true;
            if (mc_alloc_used_blocks(s->alloc) == 0)
                break;
            seg_evict_step(m, s, pass == 1, true, now, &spared);
        }
    }
    return done(m, s, arg);
}

/* What a block must find in a segment: room, and under its tenant's quota. */
struct fit {
    uint64_t need;
    uint64_t quota;  /* the tenant's (0: none) */
    uint64_t others; /* with a quota: the tenant's bytes in its other segments, which
                        evicting in this one does not change (seg_alloc_evicting sets it) */
};

/* O(1) per eviction step: only s's own used bytes move while it evicts. */
static bool done_fits(struct mc_master *m, struct seg *s, uint64_t arg)
{
    const struct fit *f = (const struct fit *)(uintptr_t)arg;

    (void)m;
    if (mc_alloc_largest_free(s->alloc) < f->need)
        return false;
    return f->quota == 0 || f->others + mc_alloc_used_bytes(s->alloc) + f->need <= f->quota;
}

static bool done_low_watermark(struct mc_master *m, struct seg *s, uint64_t unused)
{
    (void)unused;
    return (double)mc_alloc_used_bytes(s->alloc) <=
           m->cfg.low_watermark * (double)mc_alloc_capacity(s->alloc);
}

/* Allocate f->need bytes in s, evicting inline (the tenant's own objects: s is its) until
 * the largest free block fits and the tenant is under its quota. */
static int seg_alloc_evicting(struct mc_master *m, struct seg *s, const struct fit *want,
                              uint32_t now, uint32_t *alloc_p)
{
    struct fit fit = *want, *f = &fit;
    int err;

    if (f->quota != 0)
        f->others = mc_master__tenant_used(m, s->tenant) - mc_alloc_used_bytes(s->alloc);
    if (done_fits(m, s, (uintptr_t)f)) {
        err = mc_alloc_alloc(s->alloc, f->need, alloc_p);
        if (err != MC_ERR_NO_SPACE)
            return err;
    }
    if (!seg_evict(m, s, done_fits, (uintptr_t)f, true, now))
        return MC_ERR_NO_SPACE;
    return mc_alloc_alloc(s->alloc, f->need, alloc_p);
}

int mc_master__seg_alloc(struct mc_master *m, struct seg *s, uint64_t need, uint32_t now,
                         uint32_t *alloc_p)
{
    struct fit f = {.need = need};

    return seg_alloc_evicting(m, s, &f, now, alloc_p);
}

static uint64_t rng_next(struct mc_master *m)
{
    uint64_t x = m->rng;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    m->rng = x;
    return x;
}

struct cand {
    struct seg *s;
    uint32_t domain;
    bool tried;
};

static bool domain_taken(const uint32_t *doms, uint32_t n, uint32_t d)
{
    uint32_t i;

    for (i = 0; i < n; i++) {
        if (doms[i] == d)
            return true;
    }
    return false;
}

/*
 * Where to evict when no candidate has room. The first replica evicts on the preferred node,
 * where it would have gone with room (so each node's writes age its own objects); the others
 * in the emptiest segment, ties broken at random: a fixed order would make one segment take
 * every eviction while the objects of the others never age out.
 */
static struct cand *evict_target(struct mc_master *m, struct cand *cand, uint32_t ncand,
                                 const uint32_t *doms, uint32_t got, bool same_ok, uint32_t pref)
{
    struct cand *best = NULL;
    uint64_t bf = 0, f;
    uint32_t ties = 0, i;

    for (i = 0; i < ncand; i++) {
        struct cand *c = &cand[i];

        if (c->tried || (!same_ok && domain_taken(doms, got, c->domain)))
            continue;
        if (got == 0 && c->s->node == pref)
            return c;
        f = mc_alloc_free_bytes(c->s->alloc);
        if (best == NULL || f > bf) {
            best = c;
            bf = f;
            ties = 1;
        } else if (f == bf && rng_next(m) % ++ties == 0) {
            best = c;
        }
    }
    return best;
}

/*
 * Choose and allocate req->replicas blocks on distinct failure domains (or distinct
 * segments with SAME_DOMAIN_OK): the preferred node first when it has room, then segments
 * with room weighted by free bytes, then the emptiest segment with inline eviction.
 */
int mc_master__place(struct mc_master *m, const struct mc_master_put_req *req, uint32_t nrep,
                 uint32_t now, struct rep *reps)
{
    uint64_t need = req->alloc_len != 0 ? req->alloc_len : req->size;
    bool hard = (req->flags & MC_MASTER_PUT_PIN_HARD) != 0;
    bool same_ok = (req->flags & MC_MASTER_PUT_SAME_DOMAIN_OK) != 0;
    uint32_t kind = (req->flags & MC_MASTER_PUT_TIER_GPU) ? MC_SEG_GPU : MC_SEG_DRAM;
    uint32_t pref = req->preferred != MC_MASTER_NODE_NONE ? req->preferred : req->writer;
    struct cand *cand;
    uint32_t ncand = 0, i, k, ndom = 0, got = 0;
    uint32_t doms[MC_MASTER_MAX_REPLICAS];
    uint32_t alldoms[MC_MASTER_MAX_REPLICAS];
    bool fits_any = false, any_seg = false;
    struct fit fit = {.need = need};
    uint32_t tenant;
    int err = MC_ERR_NO_SPACE;

    /* only the key's tenant's segments: a tenant no agent has mounted has no room */
    if (!mc_master__tenant_of_key(m, req->key, req->key_len, &tenant))
        return MC_ERR_NO_SPACE;
    fit.quota = m->tenants[tenant].quota;
    cand = calloc(m->nsegs + 1, sizeof(*cand));
    if (cand == NULL)
        return MC_ERR_NOMEM;
    for (i = 0; i < m->nsegs; i++) {
        struct seg *s = &m->segs[i];
        uint64_t cap;

        if (s->state != SEG_MOUNTED || s->kind != kind || s->tenant != tenant ||
            seg_restoring(m, s))
            continue; /* a restoring segment's free space may hold what is not reported yet */
        if (node_get(m, s->node)->draining)
            continue; /* being emptied: as if it were not there */
        any_seg = true;
        cap = mc_alloc_capacity(s->alloc);
        if (cap < need)
            continue;
        fits_any = true;
        if (hard && (double)(s->hard_pinned + need) > m->cfg.hard_pin_max_ratio * (double)cap)
            continue; /* the hard-pin cap: "no room" for this put */
        cand[ncand].s = s;
        cand[ncand].domain = node_get(m, s->node)->domain_id;
        if (!domain_taken(alldoms, ndom, cand[ncand].domain) && ndom < nrep)
            alldoms[ndom++] = cand[ncand].domain;
        ncand++;
    }
    if (!fits_any) {
        err = any_seg ? MC_ERR_TOO_LARGE : MC_ERR_NO_SPACE;
        goto out;
    }
    if (ncand < nrep || (!same_ok && ndom < nrep))
        goto out; /* too few segments or failure domains */

    for (k = 0; k < nrep; k++) {
        for (;;) {
            struct cand *best = NULL;
            uint64_t total = 0, pick;
            bool pref_room = false;

            /* pass 1: preferred node with room (first replica only) */
            for (i = 0; k == 0 && i < ncand; i++) {
                struct cand *c = &cand[i];

                if (c->tried || c->s->node != pref ||
                    mc_alloc_largest_free(c->s->alloc) < need)
                    continue;
                if (best == NULL || mc_alloc_free_bytes(c->s->alloc) >
                                        mc_alloc_free_bytes(best->s->alloc))
                    best = c;
                pref_room = true;
            }
            /* pass 2: with room, weighted by free bytes */
            if (!pref_room) {
                for (i = 0; i < ncand; i++) {
                    struct cand *c = &cand[i];

                    if (c->tried || (!same_ok && domain_taken(doms, got, c->domain)) ||
                        mc_alloc_largest_free(c->s->alloc) < need)
                        continue;
                    total += mc_alloc_free_bytes(c->s->alloc);
                }
                if (total > 0) {
                    pick = rng_next(m) % total;
                    for (i = 0; i < ncand; i++) {
                        struct cand *c = &cand[i];
                        uint64_t f;

                        if (c->tried || (!same_ok && domain_taken(doms, got, c->domain)) ||
                            mc_alloc_largest_free(c->s->alloc) < need)
                            continue;
                        f = mc_alloc_free_bytes(c->s->alloc);
                        if (pick < f) {
                            best = c;
                            break;
                        }
                        pick -= f;
                    }
                }
            }
            /* pass 3: no room anywhere: evict */
            if (best == NULL)
                best = evict_target(m, cand, ncand, doms, got, same_ok, pref);
            if (best == NULL) {
                err = MC_ERR_NO_SPACE;
                goto err_undo;
            }
            best->tried = true;
            err = seg_alloc_evicting(m, best->s, &fit, now, &reps[got].alloc);
            if (err == MC_ERR_NOMEM)
                goto err_undo;
            if (err != 0)
                continue;
            reps[got].seg = (uint16_t)(best->s - m->segs);
            reps[got].gen = best->s->gen;
            if (hard)
                best->s->hard_pinned += mc_alloc_len(best->s->alloc, reps[got].alloc);
            doms[got] = best->domain;
            got++;
            break;
        }
    }
    free(cand);
    return 0;

err_undo:
    if (err == MC_ERR_NO_SPACE && fit.quota != 0 &&
        mc_master__tenant_used(m, tenant) + need > fit.quota)
        m->tenants[tenant].refusals++;
    for (i = 0; i < got; i++)
        mc_master__rep_release(m, &reps[i], hard);
out:
    free(cand);
    return err;
}

void mc_master__seg_trim(struct mc_master *m, struct seg *s, uint32_t now)
{
    (void)seg_evict(m, s, done_low_watermark, 0, false, now);
}
