/*
 * mc-master's DROPs and what it remembers of the disk records they free (docs/disk.md,
 * "Frees and erases"): the blocks the directory freed (mc_master_drops_take) go to their
 * owners through the DROP queue (dropq.h), and the version of every disk block among them
 * is remembered (dropmemo.h) until its owner answers the DROP (its tombstone is durable).
 * A RESTORE of a disk record of a remembered version is refused. The server (server.c)
 * owns the peers and the directory: it routes DROPs (the route and silent callbacks of
 * dropq.h) and tells which segments are disks; it calls here from its tick, its DROP
 * sends and its RESTORE handler. Calls go one way: server.c to here, never back except
 * through those callbacks.
 */
#ifndef MC_MCMASTER_DISKDROPS_H
#define MC_MCMASTER_DISKDROPS_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/master/master.h"
#include "daemon/mcmaster/dropmemo.h"
#include "daemon/mcmaster/dropq.h"
#include "daemon/proto/master_proto.h"

#define MC_DISKDROPS_BATCH 1024u /* blocks taken from the directory at a time */

/* Whether segment seg of the directory now is a disk segment. */
typedef bool (*mc_diskdrops_is_disk_fn)(void *ctx, uint32_t seg);

struct mc_diskdrops {
    struct mc_dropq *q;       /* DROPs until answered */
    struct mc_dropmemo *memo; /* disk records freed, their DROP not answered yet */
    mc_diskdrops_is_disk_fn is_disk;
    mc_dropq_route_fn route;
    mc_dropq_silent_fn silent;
    void *ctx;
    struct mc_master_drop taken[MC_DISKDROPS_BATCH];
    struct mc_proto_drop_item items[MC_DISKDROPS_BATCH];
    bool refused[MC_PROTO_BATCH_MAX]; /* a RESTORE batch's refusals */
};

/* route, silent and is_disk are called with ctx. 0 or MC_ERR_NO_MEMORY. */
int mc_diskdrops_init(struct mc_diskdrops *d, mc_dropq_route_fn route,
                      mc_dropq_silent_fn silent, mc_diskdrops_is_disk_fn is_disk, void *ctx);
/* Every DROP try still out must have ended (the UCX worker destroyed) before. Accepts a
 * zeroed struct. */
void mc_diskdrops_fini(struct mc_diskdrops *d);

/* Every block the directory m freed is sent to its owner (disk blocks remembered first),
 * then the tries due are sent again. */
void mc_diskdrops_send(struct mc_diskdrops *d, struct mc_master *m, uint64_t now_ms);

/* A RESTORE batch of n items: the disk records of remembered versions are taken out (the
 * others moved to the front, in order); returns how many remain for the directory. Then
 * mc_diskdrops_restore_merge puts the directory's results (results[0..remaining)) back in
 * the batch's order, the refused ones MC_ERR_CANCELED. */
uint32_t mc_diskdrops_restore_filter(struct mc_diskdrops *d, struct mc_master_restore_req *reqs,
                                     uint32_t n);
void mc_diskdrops_restore_merge(const struct mc_diskdrops *d, int *results, uint32_t n);

#endif /* MC_MCMASTER_DISKDROPS_H */
