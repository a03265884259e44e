/*
 * The per-client region: layout arithmetic, creation (agent) and checked attachment
 * (client). Not the ring protocol (ring.h) and not the doorbells (doorbell.c). Never logs:
 * libmc links it; callers log the MC_ERR_* code where they decide what it means.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mc/mc_status.h"

#include "common/err.h"
#include "shm/memfd.h"
#include "shm/region.h"

#define REGION_PAGE 4096u
#define REGION_ALIGN 64u
/* The largest region a valid layout can need: header page, both rings at the entry limit
 * with their keys, the staging limit, and alignment slack. A bound for untrusted sizes. */
#define REGION_MAX                                                                         \
    (MC_SHM_STAGING_MAX + MC_SHM_HDR_SIZE +                                                 \
     (uint64_t)MC_SHM_ENTRIES_MAX * (2 * sizeof(struct mc_sqe) + MC_SHM_KEY_SLOT) +         \
     4 * REGION_PAGE)

static_assert(MC_SHM_HDR_SIZE % REGION_PAGE == 0, "staging stays page aligned");

static bool is_pow2(uint32_t v)
{
    return v != 0 && (v & (v - 1)) == 0;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

/* The limits on the numbers a layout is made of (shared by init and check). */
static bool layout_params_ok(uint32_t sq_entries, uint32_t cq_entries,
                             uint32_t staging_slot_size, uint32_t staging_slots,
                             uint32_t max_inflight)
{
    if (!is_pow2(sq_entries) || !is_pow2(cq_entries) || sq_entries > MC_SHM_ENTRIES_MAX ||
        cq_entries > MC_SHM_ENTRIES_MAX || cq_entries < sq_entries)
        return false;
    if (staging_slot_size == 0 || staging_slot_size % MC_SHM_CHUNK != 0 || staging_slots == 0)
        return false;
    /* both factors are < 2^32: the product cannot overflow 64 bits */
    if ((uint64_t)staging_slot_size * staging_slots > MC_SHM_STAGING_MAX)
        return false;
    return max_inflight >= 1 && max_inflight <= cq_entries;
}

int mc_shm_layout_init(struct mc_shm_layout *l, uint32_t sq_entries, uint32_t cq_entries,
                       uint32_t staging_slot_size, uint32_t staging_slots,
                       uint32_t max_inflight)
{
    struct mc_shm_layout n = {0};
    uint64_t off;

    if (l == NULL ||
        !layout_params_ok(sq_entries, cq_entries, staging_slot_size, staging_slots,
                          max_inflight))
        return MC_ERR_INVALID;

    n.sq_entries = sq_entries;
    n.cq_entries = cq_entries;
    n.staging_slot_size = staging_slot_size;
    n.staging_slots = staging_slots;
    n.staging_size = (uint64_t)staging_slot_size * staging_slots;
    n.max_inflight = max_inflight;

    /* The bounds above keep every sum far below 2^64. */
    off = MC_SHM_HDR_SIZE;
    n.sq_ctrl_off = off;
    off = align_up(off + sizeof(struct mc_shm_ring_ctrl), REGION_ALIGN);
    n.sqes_off = off;
    off = align_up(off + (uint64_t)sq_entries * sizeof(struct mc_sqe), REGION_ALIGN);
    n.keys_off = off;
    off = align_up(off + (uint64_t)sq_entries * MC_SHM_KEY_SLOT, REGION_ALIGN);
    n.cq_ctrl_off = off;
    off = align_up(off + sizeof(struct mc_shm_ring_ctrl), REGION_ALIGN);
    n.cqes_off = off;
    off = align_up(off + (uint64_t)cq_entries * sizeof(struct mc_cqe), REGION_PAGE);
    n.staging_off = off;
    n.region_size = align_up(off + n.staging_size, REGION_PAGE);

    *l = n;
    return 0;
}

struct section {
    uint64_t off;
    uint64_t len;
    uint64_t align;
};

int mc_shm_layout_check(const struct mc_shm_layout *l)
{
    struct section s[6];
    size_t i, j;

    if (l == NULL ||
        !layout_params_ok(l->sq_entries, l->cq_entries, l->staging_slot_size,
                          l->staging_slots, l->max_inflight))
        return MC_ERR_INVALID;
    if (l->staging_size != (uint64_t)l->staging_slot_size * l->staging_slots)
        return MC_ERR_INVALID;
    if (l->region_size < MC_SHM_HDR_SIZE || l->region_size > REGION_MAX ||
        l->region_size % REGION_PAGE != 0)
        return MC_ERR_INVALID;

    s[0] = (struct section){l->sq_ctrl_off, sizeof(struct mc_shm_ring_ctrl), REGION_ALIGN};
    s[1] = (struct section){l->sqes_off, (uint64_t)l->sq_entries * sizeof(struct mc_sqe),
                            REGION_ALIGN};
    s[2] = (struct section){l->keys_off, (uint64_t)l->sq_entries * MC_SHM_KEY_SLOT,
                            REGION_ALIGN};
    s[3] = (struct section){l->cq_ctrl_off, sizeof(struct mc_shm_ring_ctrl), REGION_ALIGN};
    s[4] = (struct section){l->cqes_off, (uint64_t)l->cq_entries * sizeof(struct mc_cqe),
                            REGION_ALIGN};
    s[5] = (struct section){l->staging_off, l->staging_size, REGION_PAGE};

    for (i = 0; i < 6; i++) {
        /* off <= size is checked first so that size - off cannot wrap */
        if (s[i].off < MC_SHM_HDR_SIZE || s[i].off % s[i].align != 0 ||
            s[i].off > l->region_size || s[i].len > l->region_size - s[i].off)
            return MC_ERR_INVALID;
    }
    /* every section is inside the region now, so off + len cannot overflow */
    for (i = 0; i < 6; i++) {
        for (j = i + 1; j < 6; j++) {
            if (s[i].off < s[j].off + s[j].len && s[j].off < s[i].off + s[i].len)
                return MC_ERR_INVALID;
        }
    }
    return 0;
}

/* Point the section pointers of r at base, from r->lay (checked). */
static void region_set_pointers(struct mc_shm_region *r)
{
    r->hdr = (struct mc_shm_hdr *)r->base;
    r->sq = (struct mc_shm_ring_ctrl *)(r->base + r->lay.sq_ctrl_off);
    r->sqes = (struct mc_sqe *)(r->base + r->lay.sqes_off);
    r->keys = r->base + r->lay.keys_off;
    r->cq = (struct mc_shm_ring_ctrl *)(r->base + r->lay.cq_ctrl_off);
    r->cqes = (struct mc_cqe *)(r->base + r->lay.cqes_off);
    r->staging = r->base + r->lay.staging_off;
}

static void region_write_hdr(struct mc_shm_hdr *h, const struct mc_shm_layout *l)
{
    h->magic = MC_SHM_MAGIC;
    h->abi = MC_SHM_ABI;
    h->hdr_size = MC_SHM_HDR_SIZE;
    h->region_size = l->region_size;
    h->sq_entries = l->sq_entries;
    h->cq_entries = l->cq_entries;
    h->sq_ctrl_off = l->sq_ctrl_off;
    h->sqes_off = l->sqes_off;
    h->keys_off = l->keys_off;
    h->cq_ctrl_off = l->cq_ctrl_off;
    h->cqes_off = l->cqes_off;
    h->staging_off = l->staging_off;
    h->staging_size = l->staging_size;
    h->staging_slot_size = l->staging_slot_size;
    h->staging_slots = l->staging_slots;
    h->client_id = l->client_id;
    h->max_inflight = l->max_inflight;
    h->chunk_size = MC_SHM_CHUNK;
    atomic_store_explicit(&h->agent_state, 0, memory_order_relaxed);
    h->features = 0;
}

int mc_shm_region_create(const char *name, const struct mc_shm_layout *l, uint32_t client_id,
                         struct mc_shm_region **r_p)
{
    struct mc_shm_region *r;
    void *base;
    int err;

    if (name == NULL || r_p == NULL || mc_shm_layout_check(l) != 0)
        return MC_ERR_INVALID;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return MC_ERR_NOMEM;
    r->lay = *l;
    r->lay.client_id = client_id;
    r->size = (size_t)r->lay.region_size;

    err = mc_shm_memfd_create(name, r->lay.region_size, false, &r->fd, NULL);
    if (err != 0)
        goto err_free;
    err = mc_shm_map(r->fd, r->lay.region_size, true, &base);
    if (err != 0)
        goto err_close_fd;
    r->base = base;

    /* The memfd is zero-filled, so head, tail, futex and need_wakeup start at 0. */
    region_write_hdr((struct mc_shm_hdr *)r->base, &r->lay);
    if (fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        err = mc_err_from_errno(errno);
        goto err_unmap;
    }
    region_set_pointers(r);
    *r_p = r;
    return 0;

err_unmap:
    munmap(r->base, r->size);
err_close_fd:
    close(r->fd);
err_free:
    free(r);
    return err;
}

/* Copy the header into l (one read of each field); 0 or MC_ERR_PROTO. */
static int region_read_hdr(const struct mc_shm_hdr *h, uint64_t size, struct mc_shm_layout *l)
{
    if (h->magic != MC_SHM_MAGIC || h->abi != MC_SHM_ABI || h->hdr_size != MC_SHM_HDR_SIZE ||
        h->chunk_size != MC_SHM_CHUNK)
        return MC_ERR_PROTO;
    l->region_size = h->region_size;
    l->sq_entries = h->sq_entries;
    l->cq_entries = h->cq_entries;
    l->sq_ctrl_off = h->sq_ctrl_off;
    l->sqes_off = h->sqes_off;
    l->keys_off = h->keys_off;
    l->cq_ctrl_off = h->cq_ctrl_off;
    l->cqes_off = h->cqes_off;
    l->staging_off = h->staging_off;
    l->staging_size = h->staging_size;
    l->staging_slot_size = h->staging_slot_size;
    l->staging_slots = h->staging_slots;
    l->client_id = h->client_id;
    l->max_inflight = h->max_inflight;
    if (l->region_size != size || mc_shm_layout_check(l) != 0)
        return MC_ERR_PROTO;
    return 0;
}

int mc_shm_region_attach(int fd, uint64_t expected_size, struct mc_shm_region **r_p)
{
    const int need_seals = F_SEAL_SHRINK | F_SEAL_GROW;
    struct mc_shm_region *r;
    struct stat st;
    void *base;
    int seals;
    int err;

    if (fd < 0 || r_p == NULL)
        return MC_ERR_INVALID;
    if (fstat(fd, &st) < 0)
        return mc_err_from_errno(errno);
    if (expected_size < MC_SHM_HDR_SIZE || expected_size > REGION_MAX ||
        st.st_size < 0 || (uint64_t)st.st_size != expected_size)
        return MC_ERR_PROTO;
    /* Without these seals the agent could shrink the file under our mapping (SIGBUS). */
    seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0)
        return errno == EINVAL ? MC_ERR_PROTO : mc_err_from_errno(errno);
    if ((seals & need_seals) != need_seals)
        return MC_ERR_PROTO;

    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return MC_ERR_NOMEM;
    r->size = (size_t)expected_size;
    err = mc_shm_map(fd, expected_size, true, &base);
    if (err != 0)
        goto err_free;
    r->base = base;
    err = region_read_hdr((const struct mc_shm_hdr *)r->base, expected_size, &r->lay);
    if (err != 0)
        goto err_unmap;
    r->fd = fd;
    region_set_pointers(r);
    *r_p = r;
    return 0;

err_unmap:
    munmap(r->base, r->size);
err_free:
    free(r);
    return err;
}

void mc_shm_region_destroy(struct mc_shm_region *r)
{
    if (r == NULL)
        return;
    munmap(r->base, r->size);
    close(r->fd);
    free(r);
}

uint8_t *mc_shm_key_slot(struct mc_shm_region *r, uint32_t index)
{
    return r->keys + (size_t)(index & (r->lay.sq_entries - 1)) * MC_SHM_KEY_SLOT;
}
