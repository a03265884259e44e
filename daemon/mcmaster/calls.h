/*
 * The calls mc-master makes to owners on the directory's behalf: FENCE (the blocks of dead
 * writers, docs/failure-contract.md) and COPY (a drain's copies, offloads to a node's disk,
 * promotions back to DRAM: docs/disk.md). Each asks the directory what is due
 * (mc_master_fences_take, mc_master_copies_take), sends it to the owner's endpoint and
 * reports the answer back (mc_master_fence_ack, MC_MASTER_OP_COPY_DONE).
 *
 * The server (server.c) owns the peers and the directory: it says which endpoint reaches a
 * node (the ep_of callback) and calls here from its tick. Calls go one way: server.c to
 * here, never back except through ep_of. The directory is read through the server's own
 * pointer, since a new reign replaces it (ha.h); mc_calls_reset forgets the old reign's
 * retries.
 */
#ifndef MC_MCMASTER_CALLS_H
#define MC_MCMASTER_CALLS_H

#include <stdint.h>

#include "daemon/master/master.h"
#include "daemon/proto/master_proto.h"
#include "ucx_backend/ucx.h"

/* The endpoint of the authenticated agent of node now, or NULL. */
typedef struct mc_ucx_ep *(*mc_calls_ep_fn)(void *ctx, uint32_t node);

struct mc_calls {
    struct mc_master *const *m; /* the server's directory of the current reign */
    mc_calls_ep_fn ep_of;
    void *ctx;
    struct mc_master_fence fence_retry[MC_MASTER_FENCE_QUEUE]; /* owners said BUSY */
    uint32_t nfence_retry;
    uint8_t out[MC_PROTO_PAYLOAD_MAX];
};

void mc_calls_init(struct mc_calls *c, struct mc_master *const *m, mc_calls_ep_fn ep_of,
                   void *ctx);
/* A new reign: the fences still to be asked again belong to the old directory. */
void mc_calls_reset(struct mc_calls *c);

/* Ask each owner to fence the blocks of dead writers in its segments (and again those it
 * answered BUSY). A block whose owner has no endpoint is left: its segment goes with it. */
void mc_calls_fences_send(struct mc_calls *c);
/* Ask the owners to make the copies the directory decided on; one that cannot be sent is
 * reported failed at once. */
void mc_calls_copies_send(struct mc_calls *c);

#endif /* MC_MCMASTER_CALLS_H */
