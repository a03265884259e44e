/*
 * Telling the master again what a segment holds (docs/master.md, "Restores"): after a
 * MOUNT, the agent walks the segment's holdings (seg.h) and sends each as a RESTORE through
 * the master link, a bounded number at a time; a holding the master refuses because it
 * knows better (a newer version, space it handed out since) is forgotten by the segment.
 * A walk that meets a lost master stops; the next MOUNT starts a new one. Reporting is
 * idempotent at the master, so a walk after a rejoin to a master that kept everything
 * changes nothing.
 *
 * One thread, like the agent.
 */
#ifndef MC_AGENT_REPORT_H
#define MC_AGENT_REPORT_H

#include <stdint.h>

struct mc_agent;
struct mlink;
struct mc_seg;

/* What a walk did, summed over the walks of one agent (stats). */
struct report_stats {
    uint64_t walks;      /* walks started */
    uint64_t restored;   /* holdings the master took */
    uint64_t forgotten;  /* holdings it refused, dropped by their segment */
    uint64_t failed;     /* holdings not answered (link lost): told again on the next walk */
};

/* Starts a walk of s (master id seg_id) through ml. A segment without holdings: nothing.
 * MC_ERR_NOMEM. The walk ends on its own; st (not owned) is updated as it goes and must
 * outlive it, as must s and ml (ml_destroy ends what is in flight). */
int report_seg(struct mlink *ml, struct mc_seg *s, uint32_t seg_id, struct report_stats *st);

/* Every segment of the agent (each tenant's) is walked: after its MOUNTs, at start and
 * after every rejoin. A segment that cannot start its walk is logged and skipped. */
void report_held(struct mc_agent *a);

#endif /* MC_AGENT_REPORT_H */
