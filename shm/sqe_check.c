/*
 * SQE validation (sqe_check.h). Table-driven by opcode so that a new op must say what it
 * uses. Not a decoder: the agent reads fields from its copy after this returns 0.
 */
#include <stdbool.h>

#include "mc/mc.h"
#include "mc/mc_status.h"
#include "shm/sqe_check.h"

static_assert(MC_PUT_FLAGS_ALL == 0x5Fu, "put_flags in the SQE are the six MC_PUT_* bits");
static_assert((MC_PUT_FLAGS_ALL & MC_CQE_F_TAIL_APART) == 0, "an answer's bit, never a put's");

enum {
    USES_KEY = 1 << 0,     /* key_len 1 .. MC_SHM_KEY_SLOT (else 0) */
    USES_STAGING = 1 << 1, /* [data_off, +data_len) inside staging, data_len > 0 */
    USES_PUT_OPTS = 1 << 2, /* put_flags, replicas */
    USES_PREFIX = 1 << 3,   /* key_len 0 .. MC_SHM_KEY_SLOT */
    USES_SOURCE = 1 << 4,   /* may take its bytes from an arena or the client's memory */
    USES_ARENA_DEST = 1 << 5 /* may name an arena span its answer's bytes may land in */
};

static const unsigned char op_uses[MC_OP__COUNT] = {
    [MC_OP_NOP] = 0,
    [MC_OP_PUT] = USES_KEY | USES_STAGING | USES_PUT_OPTS | USES_SOURCE,
    [MC_OP_PUT_START] = USES_KEY | USES_PUT_OPTS,
    [MC_OP_PUT_DATA] = USES_STAGING | USES_SOURCE,
    [MC_OP_PUT_END] = 0,
    [MC_OP_PUT_ABORT] = 0,
    [MC_OP_GET] = USES_KEY | USES_ARENA_DEST,
    [MC_OP_RELEASE] = 0,
    [MC_OP_EXIST] = USES_KEY,
    [MC_OP_REMOVE] = USES_KEY,
    [MC_OP_STAT] = USES_KEY,
    [MC_OP_STATS] = USES_STAGING,
    [MC_OP_LIST] = USES_PREFIX | USES_STAGING,
    [MC_OP_REMOVE_PREFIX] = USES_KEY,
    [MC_OP_DRAIN] = USES_KEY,
    [MC_OP_PIN] = USES_KEY,
    [MC_OP_UNPIN] = USES_PREFIX,
    [MC_OP_TOUCH] = USES_KEY,
};

static bool staging_range_ok(const struct mc_shm_layout *l, uint64_t off, uint64_t len)
{
    /* off <= size first, so size - off cannot wrap; no off + len, which could */
    return len > 0 && off <= l->staging_size && len <= l->staging_size - off;
}

int mc_shm_sqe_check(const struct mc_shm_layout *l, const struct mc_sqe *sqe)
{
    unsigned int uses;

    if (sqe->opcode >= MC_OP__COUNT)
        return MC_ERR_INVALID;
    uses = op_uses[sqe->opcode];

    if ((sqe->flags & ~(MC_SQE_F_NO_CQE | MC_SQE_F_ARENA | MC_SQE_F_USER | MC_SQE_F_DEV |
                        MC_SQE_F_TAIL_APART | MC_SQE_F_ARENA_DATA)) != 0)
        return MC_ERR_INVALID;
    if ((sqe->flags & MC_SQE_F_ARENA_DATA) != 0 &&
        (sqe->opcode != MC_OP_PUT_START || sqe->flags != MC_SQE_F_ARENA_DATA))
        return MC_ERR_INVALID;
    if ((sqe->flags & MC_SQE_F_TAIL_APART) != 0 &&
        (sqe->opcode != MC_OP_GET || (sqe->flags & MC_SQE_F_ARENA) == 0))
        return MC_ERR_INVALID;
    if (sqe->flags & MC_SQE_F_DEV) {
        /* the only source of its op; the offset is checked by the agent against the import */
        if (sqe->flags != MC_SQE_F_DEV || !(uses & USES_SOURCE) || sqe->data_len == 0 ||
            (sqe->data_off >> MC_SHM_ARENA_SHIFT) >= MC_SHM_MAX_DEVBUFS)
            return MC_ERR_INVALID;
    }
    if ((sqe->flags & MC_SQE_F_NO_CQE) != 0 && sqe->opcode != MC_OP_RELEASE)
        return MC_ERR_INVALID;
    if ((sqe->flags & MC_SQE_F_ARENA) != 0 && (uses & USES_ARENA_DEST) &&
        (sqe->flags & MC_SQE_F_USER) == 0) {
        /* a GET's destination: the span is checked against the arena by the agent */
    } else if ((sqe->flags & (MC_SQE_F_ARENA | MC_SQE_F_USER)) != 0 &&
        (!(uses & USES_SOURCE) ||
         (sqe->flags & (MC_SQE_F_ARENA | MC_SQE_F_USER)) == (MC_SQE_F_ARENA | MC_SQE_F_USER)))
        return MC_ERR_INVALID;

    if (uses & USES_KEY) {
        if (sqe->key_len == 0 || sqe->key_len > MC_SHM_KEY_SLOT)
            return MC_ERR_INVALID;
    } else if (uses & USES_PREFIX) {
        if (sqe->key_len > MC_SHM_KEY_SLOT)
            return MC_ERR_INVALID;
    } else if (sqe->key_len != 0) {
        return MC_ERR_INVALID;
    }

    if (sqe->flags & MC_SQE_F_ARENA) {
        /* the offset is checked against the arena's size by the agent, which knows it */
        if (sqe->data_len == 0 || (sqe->data_off >> MC_SHM_ARENA_SHIFT) >= MC_SHM_MAX_ARENAS)
            return MC_ERR_INVALID;
    } else if (sqe->flags & MC_SQE_F_USER) {
        /* an address in the client: process_vm_readv checks it against the client's map */
        if (sqe->data_len == 0 || sqe->data_off > UINT64_MAX - sqe->data_len)
            return MC_ERR_INVALID;
    } else if (sqe->flags & MC_SQE_F_DEV) {
        /* checked above */
    } else if (uses & USES_STAGING) {
        if (!staging_range_ok(l, sqe->data_off, sqe->data_len))
            return MC_ERR_INVALID;
        if (sqe->opcode == MC_OP_PUT_DATA && sqe->data_len > l->staging_slot_size)
            return MC_ERR_INVALID;
    }

    if (uses & USES_PUT_OPTS) {
        if ((sqe->put_flags & ~(uint32_t)MC_PUT_FLAGS_ALL) != 0)
            return MC_ERR_INVALID;
        if ((sqe->put_flags & (MC_PUT_PIN_SOFT | MC_PUT_PIN_HARD)) ==
            (MC_PUT_PIN_SOFT | MC_PUT_PIN_HARD))
            return MC_ERR_INVALID;
        if (sqe->replicas > MC_SHM_MAX_REPLICAS)
            return MC_ERR_INVALID;
    }
    return 0;
}
