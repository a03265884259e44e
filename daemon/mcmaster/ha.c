/*
 * The serving gate and the recovery window of a reign (ha.h).
 */
#include "daemon/mcmaster/ha.h"

#include <mc/mc_status.h>

#include "daemon/common/log.h"
#include "daemon/mcmaster/recovery.h"
#include "daemon/proto/master_proto.h"

/* Whether a request may be served now: nothing unless this master leads and its lease
 * cannot have lapsed (by its own clock: a leader that was stopped or cut off answers nothing
 * once it resumes); during the recovery window after a win, no data operation (the agents
 * are still reporting what they hold), while membership, restores, the ends of puts, fences
 * and the cluster view go on. 0, or the status to answer. */
int mc_ha_gate(const struct mc_ha *h, struct mc_master *m, uint16_t type)
{
    uint64_t now = mc_elect_now_ms();

    if (h->reign == 0 || !h->led || !mc_elect_serving_reign(h->elect, now, h->reign))
        return MC_ERR_UNAVAILABLE;
    /* no version at or past the end this reign stored in etcd (a batch takes up to
     * MC_PROTO_BATCH_MAX): the election thread stores a further end long before */
    if (type == MC_WIRE_PUT_START_BATCH || type == MC_WIRE_DRAIN) {
        if (!mc_elect_versions_room(mc_master_version_last(m), mc_elect_versions_end(h->elect),
                                    MC_PROTO_BATCH_MAX))
            return MC_ERR_UNAVAILABLE;
    }
    if (now >= h->recovery_until_ms)
        return 0;
    switch (type) {
    case MC_WIRE_PUT_START_BATCH:
    case MC_WIRE_GET_BATCH:
    case MC_WIRE_EXIST_BATCH:
    case MC_WIRE_REMOVE_BATCH:
    case MC_WIRE_LIST:
    case MC_WIRE_DRAIN:
        return MC_ERR_UNAVAILABLE;
    default:
        return 0;
    }
}

void mc_ha_window_sync(const struct mc_ha *h, struct mc_master *m)
{
    mc_master_recovering_set(m, h->elect != NULL && h->reign != 0 && h->led &&
                                    mc_elect_now_ms() < h->recovery_until_ms);
}

void mc_ha_recovery_check(struct mc_ha *h, struct mc_master *m, uint32_t nsegs,
                          const uint32_t *carrying, size_t ncarrying)
{
    uint64_t now = mc_elect_now_ms();
    uint64_t cap = h->reign_ms + mc_master_config(m)->restore_window_ms;
    uint64_t tick = mc_master_config(m)->tick_ms;
    bool joined = false;

    if (h->nexpect <= 0 || h->recovery_done)
        return;
    if (now >= h->recovery_until_ms) {
        h->recovery_done = true; /* ran out: not looked at again this reign */
        return;
    }
    if (mc_recovery_all_reported(m, nsegs, h->expect, (size_t)h->nexpect, carrying, ncarrying,
                                 &joined)) {
        mc_info("recovery over %llu ms into epoch %llu: all %d agents reported",
                (unsigned long long)(now - h->reign_ms), (unsigned long long)h->epoch,
                h->nexpect);
        h->recovery_until_ms = now;
        h->recovery_done = true;
    } else if (joined && now < cap && h->recovery_until_ms <= now + 2 * tick) {
        /* every listed agent is back and some live one is still reporting, or still carries
         * PUBLISHes over the change: wait for its report or its owners' late restores (up
         * to restore_window_ms), not only recovery_ms, rather than answer NOT_FOUND for
         * what it has not reported yet (review finding M2) */
        if (!h->recovery_longer)
            mc_info("epoch %llu: every listed agent is back, reports still under way: "
                    "recovery goes on (up to restore_window_ms)",
                    (unsigned long long)h->epoch);
        h->recovery_longer = true;
        h->recovery_until_ms = now + 2 * tick < cap ? now + 2 * tick : cap;
    }
}

bool mc_ha_tick_begin(struct mc_ha *h, struct mc_elect_view *v, bool *serving_p)
{
    *serving_p = mc_elect_serving(h->elect, mc_elect_now_ms());
    mc_elect_view(h->elect, v);
    return *serving_p && v->reign != h->reign;
}

void mc_ha_reign_begin(struct mc_ha *h, const struct mc_elect_view *v)
{
    h->reign = v->reign;
    h->epoch = v->epoch;
    h->reign_ms = mc_elect_now_ms();
    h->recovery_until_ms = h->reign_ms + h->recovery_ms;
    h->recovery_done = h->recovery_longer = false;
    h->nexpect = h->expect != NULL ? mc_elect_agents(h->elect, v->reign, h->expect) : -1;
    mc_info("leading at epoch %llu: an empty directory, data operations after %llu ms "
            "of recovery",
            (unsigned long long)v->epoch, (unsigned long long)h->recovery_ms);
}

void mc_ha_reign_failed(struct mc_ha *h)
{
    h->led = false;
}

bool mc_ha_tick_end(struct mc_ha *h, struct mc_master *m, uint32_t nsegs,
                    const uint32_t *carrying, size_t ncarrying, bool serving,
                    const struct mc_elect_view *v)
{
    bool stepped_down = h->led && !serving;

    if (serving && v->reign == h->reign) {
        mc_elect_versions_used(h->elect, mc_master_version_last(m));
        mc_ha_recovery_check(h, m, nsegs, carrying, ncarrying);
    }
    if (stepped_down)
        mc_warn("not leading any more (epoch %llu): every peer dropped",
                (unsigned long long)v->epoch);
    h->led = serving;
    mc_ha_window_sync(h, m);
    return stepped_down;
}
