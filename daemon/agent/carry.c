/*
 * PUBLISHes carried over a master change, the owner's side (docs/master.md, "What an owner
 * holds"). A writer names the segment of a PUBLISH by the id the master of its reign gave
 * it, and keeps a PUBLISH not yet answered across a change of master (xfer.c). The owner
 * remembers, for the last REIGNS_KEPT masters it followed, which id each of its segments
 * had (cl_reign_remember, before a new master's MOUNTs change them), so that such a
 * PUBLISH still finds its segment. Its report to the new master may miss the object (the
 * walk under way or over, or the segment mounted as holding nothing, so not RESTORING,
 * where a report is refused), so the object is told to that master on its own once the
 * owner is joined (a RESTORE flagged MC_MASTER_RESTORE_LATE, taken while the new master's
 * recovery window is open), and the writer is answered MC_ERR_BUSY (tried again) until the
 * master answered that RESTORE.
 */
#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/agent/cluster_int.h"
#include "daemon/agent/mlink.h"
#include "daemon/agent/seg.h"
#include "daemon/common/log.h"

void cl_reign_remember(struct cluster *cl)
{
    struct reign_ids *r;
    uint32_t n = agent_nsegs(cl->a);

    if (cl->m_incarnation == 0)
        return; /* no master followed yet */
    r = &cl->reigns[cl->reign_next];
    cl->reign_next = (cl->reign_next + 1) % REIGNS_KEPT;
    r->m_epoch = cl->m_epoch;
    r->m_incarnation = cl->m_incarnation;
    r->n = n < REIGN_SEGS_MAX ? n : REIGN_SEGS_MAX;
    for (uint32_t i = 0; i < r->n; i++) {
        uint32_t *id;

        r->ids[i] = agent_seg_at(cl->a, i, NULL, &id) != NULL ? *id : UINT32_MAX;
    }
}

struct mc_seg *cl_publish_seg(struct cluster *cl, const struct mc_proto_publish_item *it,
                              uint32_t *local_p, bool *earlier_p)
{
    *earlier_p = false;
    if (it->m_epoch == cl->m_epoch && it->m_incarnation == cl->m_incarnation) {
        for (uint32_t i = 0; i < agent_nsegs(cl->a); i++) {
            uint32_t *id;
            struct mc_seg *s = agent_seg_at(cl->a, i, NULL, &id);

            if (s != NULL && *id == it->seg) {
                *local_p = i;
                return s;
            }
        }
        return NULL;
    }
    for (uint32_t k = 0; k < REIGNS_KEPT; k++) {
        const struct reign_ids *r = &cl->reigns[k];

        if (r->n == 0 || r->m_epoch != it->m_epoch || r->m_incarnation != it->m_incarnation)
            continue;
        for (uint32_t i = 0; i < r->n; i++) {
            if (r->ids[i] == it->seg && it->seg != UINT32_MAX) {
                *local_p = i;
                *earlier_p = true;
                return agent_seg_at(cl->a, i, NULL, NULL);
            }
        }
        return NULL;
    }
    return NULL; /* a reign we never followed (we restarted since), or a newer one */
}

static void late_unlink(struct cluster *cl, struct latepub *lp)
{
    struct latepub **pp = &cl->latepubs;

    while (*pp != lp)
        pp = &(*pp)->next;
    *pp = lp->next;
    cl->nlatepubs--;
}

static void late_answered(void *ctx, struct ml_req *r)
{
    struct latepub *lp = ctx;
    struct cluster *cl = lp->cl;
    int res = r->res;

    ml_req_free(lp->ml, r);
    if (cl == NULL) { /* orphaned by cl_late_destroy */
        free(lp);
        return;
    }
    if (res == 0) {
        lp->result = 0;
        cl->st.late_restored++;
    } else if (res == MC_ERR_CANCELED || res == MC_ERR_EXISTS || res == MC_ERR_INVALID ||
               res == MC_ERR_NOT_FOUND) {
        /* the master knows better, or its window closed: never served or told again */
        struct mc_seg *s = agent_seg_at(cl->a, lp->local, NULL, NULL);

        mc_warn("a PUBLISH carried over the master change (version %llu) refused by the "
                "master: %s",
                (unsigned long long)lp->version, mc_strerror(res));
        if (s != NULL && s->ops->forget != NULL)
            s->ops->forget(s, lp->offset, lp->version);
        lp->result = 1;
        cl->st.late_refused++;
    } else {
        /* the master went away: our next report (after the rejoin) tells it */
        late_unlink(cl, lp);
        free(lp);
        return;
    }
    lp->pending = false;
    lp->until_ms = mc_agent_now_ms() + LATE_KEEP_MS;
}

int cl_publish_late_busy(const struct cluster *cl, uint32_t local,
                         const struct mc_proto_publish_item *it)
{
    for (const struct latepub *lp = cl->latepubs; lp != NULL; lp = lp->next) {
        if (lp->local == local && lp->offset == it->offset && lp->version == it->version)
            return 0; /* under way or answered: cl_publish_late says which */
    }
    if (cl->mstate != M_UP || cl->nlatepubs >= LATE_MAX || cl->a->ml == NULL)
        return MC_ERR_BUSY; /* rejoining (review H2), or too many under way (L2) */
    return 0;
}

int cl_publish_late(struct cluster *cl, uint32_t local, const struct mc_proto_publish_item *it)
{
    struct latepub *lp;
    struct ml_req *r;
    uint32_t *id;

    for (lp = cl->latepubs; lp != NULL; lp = lp->next) {
        if (lp->local == local && lp->offset == it->offset && lp->version == it->version)
            return lp->pending ? MC_ERR_BUSY : lp->result;
    }
    if (cl->mstate != M_UP)
        return MC_ERR_BUSY; /* rejoining: told once joined (the writer asks again) */
    if (agent_seg_at(cl->a, local, NULL, &id) == NULL || cl->nlatepubs >= LATE_MAX ||
        cl->a->ml == NULL || (lp = calloc(1, sizeof(*lp))) == NULL)
        return MC_ERR_BUSY; /* asked again later */
    r = ml_req_new(cl->a->ml, ML_RESTORE, (const char *)it->key.p, it->key.len, late_answered,
                   lp);
    if (r == NULL) {
        free(lp);
        return MC_ERR_BUSY;
    }
    lp->cl = cl;
    lp->ml = cl->a->ml;
    lp->local = local;
    lp->offset = it->offset;
    lp->version = it->version;
    lp->pending = true;
    lp->next = cl->latepubs;
    cl->latepubs = lp;
    cl->nlatepubs++;
    r->in.restore = (struct mc_master_restore_req){
        .seg = *id, .offset = it->offset, .alloc_len = it->alloc_len, .size = it->size,
        .version = it->version,
        .flags = (it->flags & (MC_MASTER_PUT_PIN_SOFT | MC_MASTER_PUT_PIN_HARD |
                               MC_MASTER_PUT_NO_CHECKSUM)) |
                 MC_MASTER_RESTORE_LATE,
        .ttl_ms = it->ttl_ms};
    ml_submit(cl->a->ml, r); /* may answer inside */
    return MC_ERR_BUSY;
}

void cl_late_tick(struct cluster *cl, uint64_t now)
{
    struct latepub **pp = &cl->latepubs;

    while (*pp != NULL) {
        struct latepub *lp = *pp;

        if (!lp->pending && now >= lp->until_ms) {
            *pp = lp->next;
            cl->nlatepubs--;
            free(lp);
        } else {
            pp = &lp->next;
        }
    }
}

void cl_late_destroy(struct cluster *cl)
{
    while (cl->latepubs != NULL) {
        struct latepub *lp = cl->latepubs;

        cl->latepubs = lp->next;
        if (lp->pending)
            lp->cl = NULL; /* its RESTORE ends later (ml_destroy): freed then */
        else
            free(lp);
    }
    cl->nlatepubs = 0;
}
