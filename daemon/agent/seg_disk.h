/*
 * The disk segment of the agent (seg.h, kind MC_SEG_DISK): the data region of the disk
 * tier's record store (disk.h), which the master allocates from like any segment. Not
 * addressable: span answers NULL, and the synchronous read and write of the seam refuse
 * (MC_ERR_INVALID): bytes move only through the store's asynchronous ops (disk_tier.c), so
 * no disk I/O ever blocks the agent's loop. Local readers cannot map it (ro_fd is -1).
 *
 * Its index of complete records (s->held, holdidx.h) starts as what the store's scan kept
 * at open (TTLs from the records' wall-clock expiry) and follows what the agent writes and
 * erases: holdings and forget report from it after every MOUNT, as for DRAM.
 *
 * One thread, like the agent.
 */
#ifndef MC_AGENT_SEG_DISK_H
#define MC_AGENT_SEG_DISK_H

#include "daemon/agent/disk.h"
#include "daemon/agent/seg.h"

/* A segment over d's region (d must outlive it). Errors: MC_ERR_NOMEM. */
int mc_seg_disk_create(struct mc_disk *d, struct mc_seg **s_p);
/* What forget (a record the master refused at a restore) calls with the record's extent,
 * after it left the index: the tier erases it, so that no later restart finds it (the
 * master that refused it may be gone by then). Unset: the record is only forgotten. */
typedef void (*mc_seg_disk_forget_fn)(void *ctx, uint64_t off, uint64_t alloc_len);
void mc_seg_disk_on_forget(struct mc_seg *s, mc_seg_disk_forget_fn fn, void *ctx);
/* The store of a disk segment. */
struct mc_disk *mc_seg_disk_store(struct mc_seg *s);
/* Wall-clock milliseconds (record expiry is kept in it: it survives restarts). */
uint64_t mc_seg_disk_wall_ms(void);
/* Monotonic milliseconds, the index's clock. */
uint64_t mc_seg_disk_now_ms(void);

#endif /* MC_AGENT_SEG_DISK_H */
