/*
 * Arena buffers of <mc/mc.h>: mc_buf_alloc and mc_buf_free. The allocator and the busy
 * tracking are arena.c's; this file adds the public checks and, for a busy buffer, the
 * reaping that may free it.
 */
#include <stdint.h>

#include "libmc/export.h"
#include "libmc/op.h"

MC_EXPORT int mc_buf_alloc(mc_client_t *c, size_t len, void **ptr)
{
    int err;

    if (c == NULL || ptr == NULL || len == 0)
        return MC_ERR_INVALID;
    if (len > SIZE_MAX - MC_CLIENT_ARENA_ROUND)
        return MC_ERR_NOMEM;
    err = mc_engine_enter(&c->e);
    if (err != 0)
        return err;
    return mc_arena_alloc(&c->e, &c->a, len, ptr);
}

MC_EXPORT int mc_buf_free(mc_client_t *c, void *ptr)
{
    int err;

    if (c == NULL)
        return MC_ERR_INVALID;
    if (ptr == NULL)
        return 0;
    err = mc_arena_free(&c->a, ptr);
    if (err != MC_ERR_BUSY)
        return err;
    /* An op freed unfinished (mc_op_free) has no owner left to reap its completion or to
     * give it up at its deadline: do it here, so that its buffer comes free once its answer
     * arrived (or its deadline and grace passed) without waiting for some other call.
     * The engine's mu comes before arena_mu, hence the second look. */
    mc_op_reap(c);
    return mc_arena_free(&c->a, ptr);
}
