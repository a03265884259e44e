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
 *
 * Replies held for disk DROPs: a REMOVE, or a PUT_END replacing a version, whose DROPs name
 * disk blocks is answered only once their owners answered them (each tombstone or removed mark durable), or after
 * MC_DISKDROPS_HOLD_MS: so that a crash of the owner and of mc-master right after the
 * remove returned cannot bring the object back (mc-master's memo dies with it).
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
#define MC_DISKDROPS_HOLD_MS 1000u /* the longest a reply waits for its disk DROPs */

/* A reply held until the disk DROPs it waits for are answered (mc_diskdrops_hold). */
struct mc_diskdrops_held {
    struct mc_diskdrops_held *next;
    struct mc_ucx_ep *ep;
    uint16_t type;
    uint64_t id;
    uint64_t until_ms;
    size_t nwait, len;
    struct mc_proto_drop_item *wait; /* the blocks not answered yet */
    uint8_t *reply;                  /* len bytes: the payload to send */
};

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
    struct mc_proto_drop_item sent_disk[MC_DISKDROPS_BATCH]; /* disk blocks the last
                                                                 mc_diskdrops_send sent */
    size_t nsent_disk;
    struct mc_diskdrops_held *held;
    uint64_t held_answered, held_expired; /* replies sent once answered / at their bound */
};

/* route, silent and is_disk are called with ctx. 0 or MC_ERR_NO_MEMORY. */
int mc_diskdrops_init(struct mc_diskdrops *d, mc_dropq_route_fn route,
                      mc_dropq_silent_fn silent, mc_diskdrops_is_disk_fn is_disk, void *ctx);
/* Every DROP try still out must have ended (the UCX worker destroyed) before. Accepts a
 * zeroed struct. */
void mc_diskdrops_fini(struct mc_diskdrops *d);

/* Every block the directory m freed is sent to its owner (disk blocks remembered first),
 * then the tries due are sent again, and held replies past their bound are sent. */
void mc_diskdrops_send(struct mc_diskdrops *d, struct mc_master *m, uint64_t now_ms);

/* Whether the last mc_diskdrops_send sent DROPs of disk blocks (a reply made with them
 * may be held for their answers). */
bool mc_diskdrops_sent_disk(const struct mc_diskdrops *d);
/* The reply (type, request id, payload of len bytes, copied) to ep is sent once every disk
 * block of the last mc_diskdrops_send was answered, or at now_ms + MC_DISKDROPS_HOLD_MS,
 * whichever comes first. 0, or MC_ERR_NOMEM (nothing held: send it now). */
int mc_diskdrops_hold(struct mc_diskdrops *d, struct mc_ucx_ep *ep, uint16_t type, uint64_t id,
                      const void *reply, size_t len, uint64_t now_ms);
/* ep is closing: its held replies are dropped unsent. */
void mc_diskdrops_forget_ep(struct mc_diskdrops *d, struct mc_ucx_ep *ep);

/* A RESTORE batch of n items: the disk records of remembered versions are taken out (the
 * others moved to the front, in order); returns how many remain for the directory. Then
 * mc_diskdrops_restore_merge puts the directory's results (results[0..remaining)) back in
 * the batch's order, the refused ones MC_ERR_CANCELED. */
uint32_t mc_diskdrops_restore_filter(struct mc_diskdrops *d, struct mc_master_restore_req *reqs,
                                     uint32_t n);
void mc_diskdrops_restore_merge(const struct mc_diskdrops *d, int *results, uint32_t n);

#endif /* MC_MCMASTER_DISKDROPS_H */
