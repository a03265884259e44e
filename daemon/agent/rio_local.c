/*
 * Replica I/O of a standalone agent (rio.h): every replica is in its own segment, so there
 * is never anything to move; asking is a bug of the caller.
 */
#include "daemon/agent/rio.h"

#include <mc/mc_status.h>

static int local_write(void *impl, const struct mc_rio_write *w, mc_rio_write_fn done, void *ctx)
{
    (void)impl;
    (void)w;
    (void)done;
    (void)ctx;
    return MC_ERR_INTERNAL; /* the image is the replica: put.c writes no replica of its own */
}

static int local_read(void *impl, const struct mc_master_get_result *g, uint32_t skip,
                      uint32_t tenant, uint64_t deadline_ms, uint8_t *arena, uint64_t arena_room,
                      mc_rio_read_fn done, mc_rio_wanted_fn wanted, void *ctx)
{
    (void)impl;
    (void)arena;
    (void)arena_room;
    (void)g;
    (void)skip;
    (void)tenant;
    (void)deadline_ms;
    (void)done;
    (void)wanted;
    (void)ctx;
    return MC_ERR_NOT_FOUND; /* no replica elsewhere: nothing is readable */
}

static uint64_t local_lease_ttl_ms(void *impl)
{
    (void)impl;
    return 0; /* the in-process master's clock is ours: its expiry is exact */
}

const struct mc_rio_ops mc_rio_local_ops = {
    .write = local_write,
    .read = local_read,
    .lease_ttl_ms = local_lease_ttl_ms,
};
