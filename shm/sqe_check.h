/*
 * Validation of one SQE copied out of a client's region (ring.h): the agent's first line
 * against hostile input. Checks each field an op uses against the agent's own layout copy;
 * fields an op ignores are not checked. It does not check state (put handles, leases,
 * max_inflight): the agent does, as it has it. Pure logic, no side effects.
 */
#ifndef MC_SHM_SQE_CHECK_H
#define MC_SHM_SQE_CHECK_H

#include "shm/region.h"
#include "shm/ring.h"

/* replicas a put may ask for (0 means 1): MC_REPLICAS_MAX; the GET's skip mask (arg0) has a
 * bit for each, so at most 64 */
#define MC_SHM_MAX_REPLICAS ((uint32_t)MC_REPLICAS_MAX)
static_assert(MC_SHM_MAX_REPLICAS <= 64, "a GET's skip mask has 64 bits");

/*
 * Check `sqe`, the agent's private copy (never the region's entry: a client could change
 * it between check and use), against the layout `l` (the agent's copy, never the header):
 *   - opcode < MC_OP__COUNT; flags: MC_SQE_F_NO_CQE only on RELEASE; MC_SQE_F_ARENA or
 *     MC_SQE_F_USER (not both) only on PUT and PUT_DATA, and MC_SQE_F_ARENA alone on GET
 *     (its destination), with MC_SQE_F_TAIL_APART there only; MC_SQE_F_ARENA_DATA alone,
 *     on PUT_START only;
 *   - PUT, PUT_START, GET, EXIST, REMOVE, STAT, REMOVE_PREFIX: key_len 1 .. MC_SHM_KEY_SLOT;
 *     LIST: 0 .. MC_SHM_KEY_SLOT (a prefix); other ops 0;
 *   - PUT, PUT_DATA, STATS, LIST: data_len > 0 and [data_off, data_off + data_len) inside
 *     staging (a PUT may span consecutive slots; with ARENA/USER data_off names the arena
 *     or the client's address instead, checked when used); PUT_DATA: data_len <=
 *     staging_slot_size;
 *   - PUT, PUT_START: put_flags only MC_PUT_FLAGS_ALL bits, not both pins; replicas <=
 *     MC_SHM_MAX_REPLICAS.
 * Returns 0 or MC_ERR_INVALID.
 */
int mc_shm_sqe_check(const struct mc_shm_layout *l, const struct mc_sqe *sqe);

#endif /* MC_SHM_SQE_CHECK_H */
