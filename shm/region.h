/*
 * The per-client region (ring.h, docs/protocol.md): its layout, creation by the agent and
 * attachment by the client. This module places and checks the sections; it does not move
 * entries through the rings (ring.h's inline helpers do) nor ring doorbells (doorbell.h).
 *
 * The agent creates a region, keeps its own copy of the layout (r->lay), and never reads the
 * header back: the client can write it. The client attaches to the fd it received and
 * trusts the header only after checking all of it.
 *
 * Thread-safety: a region handle is not locked; create/attach/destroy belong to one thread.
 */
#ifndef MC_SHM_REGION_H
#define MC_SHM_REGION_H

#include <stddef.h>
#include <stdint.h>

#include "shm/ring.h"

#define MC_SHM_ENTRIES_MAX 65536u               /* per ring */
#define MC_SHM_STAGING_MAX (UINT64_C(1) << 30) /* staging_slots * staging_slot_size */

/* The layout numbers, mirrored from (agent) or checked against (client) the header. */
struct mc_shm_layout {
    uint64_t region_size;
    uint32_t sq_entries;
    uint32_t cq_entries;
    uint64_t sq_ctrl_off;
    uint64_t sqes_off;
    uint64_t keys_off;
    uint64_t cq_ctrl_off;
    uint64_t cqes_off;
    uint64_t staging_off;
    uint64_t staging_size;
    uint32_t staging_slot_size;
    uint32_t staging_slots;
    uint32_t max_inflight;
    uint32_t client_id;
};

/*
 * Compute a layout: the header page, SQ ctrl, SQEs, keys, CQ ctrl, CQEs (each 64-byte
 * aligned), then staging (4096-aligned); region_size is a multiple of 4096.
 * sq_entries, cq_entries: powers of two, 1 .. MC_SHM_ENTRIES_MAX, cq_entries >= sq_entries.
 * staging_slot_size:      a non-zero multiple of MC_SHM_CHUNK.
 * staging_slots:          >= 1, slots * slot size <= MC_SHM_STAGING_MAX.
 * max_inflight:           1 .. cq_entries (so the CQ can never overflow).
 * l: written only on success; client_id is 0 (mc_shm_region_create sets it).
 * Returns 0 or MC_ERR_INVALID.
 */
int mc_shm_layout_init(struct mc_shm_layout *l, uint32_t sq_entries, uint32_t cq_entries,
                       uint32_t staging_slot_size, uint32_t staging_slots,
                       uint32_t max_inflight);

/*
 * Check a layout from an untrusted source: the limits of mc_shm_layout_init, every section
 * inside the region past the header page, aligned, and no two overlapping; it need not be
 * the layout mc_shm_layout_init would compute. Returns 0 or MC_ERR_INVALID.
 */
int mc_shm_layout_check(const struct mc_shm_layout *l);

struct mc_shm_region {
    int fd;
    uint8_t *base;
    size_t size;
    struct mc_shm_layout lay; /* the owner's copy: use this, not hdr, for every bound */
    struct mc_shm_hdr *hdr;
    struct mc_shm_ring_ctrl *sq, *cq;
    struct mc_sqe *sqes;
    uint8_t *keys;
    struct mc_cqe *cqes;
    uint8_t *staging;
};

/*
 * Agent side: create a region for `l` (from mc_shm_layout_init): a memfd named `name`
 * (MFD_CLOEXEC | MFD_ALLOW_SEALING) mapped shared read-write, the header written, the rings
 * zeroed, and the memfd sealed F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL. r->lay is `l` with
 * client_id set. The caller passes r->fd to the client (SCM_RIGHTS duplicates it) and owns
 * the region until mc_shm_region_destroy.
 * Returns 0, MC_ERR_INVALID (bad layout or name), MC_ERR_NOMEM, MC_ERR_IO.
 */
int mc_shm_region_create(const char *name, const struct mc_shm_layout *l, uint32_t client_id,
                         struct mc_shm_region **r_p);

/*
 * Client side: attach to the region fd received from the agent. Checks that the file is
 * `expected_size` bytes (the welcome's region_size) and sealed against shrinking and
 * growing, maps it shared read-write, checks the whole header (magic, ABI, sizes, every
 * section inside the region and apart) and copies it into r->lay.
 * On success the region owns `fd` (mc_shm_region_destroy closes it); on failure the caller
 * still owns it.
 * Returns 0, MC_ERR_PROTO (size, seals or header wrong: the agent broke the protocol),
 * MC_ERR_INVALID (fd not open), MC_ERR_NOMEM, MC_ERR_IO.
 */
int mc_shm_region_attach(int fd, uint64_t expected_size, struct mc_shm_region **r_p);

/* Unmap, close the fd and free. NULL is a no-op. */
void mc_shm_region_destroy(struct mc_shm_region *r);

/* The key slot (MC_SHM_KEY_SLOT bytes) of SQ ring index `index` (free-running: masked). */
uint8_t *mc_shm_key_slot(struct mc_shm_region *r, uint32_t index);

/* The SQE / CQE at free-running ring index `index` (masked with the ring size). */
static inline struct mc_sqe *mc_shm_sqe_at(struct mc_shm_region *r, uint32_t index)
{
    return &r->sqes[index & (r->lay.sq_entries - 1)];
}

static inline struct mc_cqe *mc_shm_cqe_at(struct mc_shm_region *r, uint32_t index)
{
    return &r->cqes[index & (r->lay.cq_entries - 1)];
}

#endif /* MC_SHM_REGION_H */
