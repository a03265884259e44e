/*
 * Draining a node: the part of the master service that empties a node before it leaves.
 * master.c calls in here from its tick, its fence acknowledgement and its node listing;
 * drain.c owns the copies in flight and its own walk of the directory. No I/O: the copies
 * are handed to the front end (mc_master_copies_take) and their answers come back through
 * mc_master_copy_done.
 */
#ifndef MC_MASTER_DRAIN_H
#define MC_MASTER_DRAIN_H

#include <stdbool.h>
#include <stdint.h>

struct mc_master;
struct mc_drain;

/* Errors: MC_ERR_NOMEM. */
int mc_drain_create(uint32_t copies_max, struct mc_drain **d_p);
/* Frees the copy records; their blocks go with the allocators. Accepts NULL. */
void mc_drain_destroy(struct mc_drain *d);
/* Bounded work: drops replicas that have another home, starts copies of those that do not,
 * retries fences of failed copies. Does nothing while no node drains and no copy is open. */
void mc_drain_tick(struct mc_master *m);
/* The master's offload question (struct mc_master's `offload`, master_int.h): copies of
 * DRAM victims to their node's disk segment share the drain's copy records. */
struct seg;
struct ver;
bool mc_drain_offload(struct mc_master *m, struct seg *s, struct ver *v, uint32_t now);
/* How many times mc_drain_offload kept a block (for its offload copy, queued then or before,
 * or its failed copy's fence): a put whose eviction moved it found room that will come. */
uint64_t mc_drain_kept(const struct mc_drain *d);
/* A GET was granted on v, o's readable version: with disk_promote on and v on disk only, a
 * copy back into DRAM on the disk's node is queued (bounded; docs/disk.md, Promotion). */
struct obj;
void mc_drain_promote(struct mc_master *m, struct obj *o, struct ver *v, uint32_t now,
                      uint32_t reader);
/* v is being unpublished (removed, replaced): an offload copy of it still under way will
 * free its target when answered, but its record may be committed before that and a kill
 * -9 of the owner between the two would bring the object back. So the target is told now,
 * a RETIRED drop (master.h): the owner marks the record removed once written, mc-master
 * remembers the version. The FREED drop made when the copy is answered says after_retire. */
void mc_drain_unpublished(struct mc_master *m, const struct ver *v);
/* A fence acknowledgement for a failed copy's target block: frees it and returns true.
 * False when (seg, alloc, version) names no copy (the caller handles it as a put's). */
bool mc_drain_fence_ack(struct mc_master *m, uint32_t seg, uint32_t alloc, uint64_t version);

#endif /* MC_MASTER_DRAIN_H */
