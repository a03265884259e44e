/*
 * mc-master's side of high availability (docs/master.md, "High availability"), apart from
 * the election itself (elect.h): whether a request may be served in this reign, and the
 * recovery window after a win, in which no data operation is served while the agents
 * rejoin and report what they hold. The server (server.c) owns the peers and the
 * directory: it starts a new directory when mc_ha_tick_begin says a reign began and drops
 * every peer when mc_ha_tick_end says this master stopped leading. Calls go one way:
 * server.c to here, never back.
 */
#ifndef MC_MCMASTER_HA_H
#define MC_MCMASTER_HA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/master/master.h"
#include "daemon/mcmaster/elect.h"

struct mc_ha {
    struct mc_elect *elect; /* NULL: no etcd, the master serves alone */
    uint64_t reign;         /* the reign the directory belongs to (0: none yet) */
    uint64_t epoch;         /* its epoch (HELLO tells it) */
    bool led;               /* served as leader at the last tick */
    uint64_t recovery_ms, recovery_until_ms;
    bool recovery_done, recovery_longer; /* this reign's window: closed early; lengthened */
    uint64_t reign_ms;                   /* when this reign's directory began */
    struct mc_elect_agent *expect;       /* the agents whose reports end the window early */
    int nexpect;                         /* how many (-1: not known: the window runs out) */
};

/* Whether a request of wire type `type` may be served now (m: the directory): 0, or the
 * status to answer. With etcd only. */
int mc_ha_gate(const struct mc_ha *h, struct mc_master *m, uint16_t type);

/* Tells the directory whether the recovery window is open (late restores are taken only
 * then: master.h, mc_master_recovering_set). Never open without etcd. */
void mc_ha_window_sync(const struct mc_ha *h, struct mc_master *m);

/* Every agent registered in etcd when the reign began has reported: the window closes
 * (from the tick, after each RESTORE_DONE and HEARTBEAT). nsegs: segment ids to look at;
 * carrying[0..ncarrying): the nodes that said they carry PUBLISHes over the master change
 * (recovery.h). */
void mc_ha_recovery_check(struct mc_ha *h, struct mc_master *m, uint32_t nsegs,
                          const uint32_t *carrying, size_t ncarrying);

/* The tick, first half: what the election thread decided (*v, *serving_p). True: a reign
 * began that this master leads, and the server must start an empty directory for it, then
 * call mc_ha_reign_begin (or mc_ha_reign_failed without one). */
bool mc_ha_tick_begin(struct mc_ha *h, struct mc_elect_view *v, bool *serving_p);
void mc_ha_reign_begin(struct mc_ha *h, const struct mc_elect_view *v);
void mc_ha_reign_failed(struct mc_ha *h);
/* The second half, with the directory of this reign: true when this master stopped
 * leading (the server drops every peer). */
bool mc_ha_tick_end(struct mc_ha *h, struct mc_master *m, uint32_t nsegs,
                    const uint32_t *carrying, size_t ncarrying, bool serving,
                    const struct mc_elect_view *v);

#endif /* MC_MCMASTER_HA_H */
