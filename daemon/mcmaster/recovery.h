/*
 * When a new reign's recovery window may close before recovery_ms (docs/master.md, "High
 * availability"): once every agent registered in etcd when the reign began has rejoined
 * and reported what it holds, nobody is left to report, and data operations may go on.
 */
#ifndef MC_MCMASTER_RECOVERY_H
#define MC_MCMASTER_RECOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/master/master.h"
#include "daemon/mcmaster/elect.h"

/* Whether every agent of expect[0..n) (n > 0) is a live node of m with at least its nsegs
 * segments mounted, and no live node, listed or not, has a segment still RESTORING (its
 * report walk is not done) or is one of carrying[0..ncarrying) (nodes that said they carry
 * PUBLISHes over the master change not settled yet: their owners' late restores are still
 * to come; carrying may be NULL when ncarrying is 0). Segments looked at: ids
 * 0..nsegs_max-1. False as well without memory. *joined_p (may be NULL): whether every
 * listed agent is back with its segments (reports may still be under way). */
bool mc_recovery_all_reported(struct mc_master *m, uint32_t nsegs_max,
                              const struct mc_elect_agent *expect, size_t n,
                              const uint32_t *carrying, size_t ncarrying, bool *joined_p);

#endif /* MC_MCMASTER_RECOVERY_H */
