/*
 * The agent's state, shared by its rooms (docs/architecture.md, "The agent"): data only.
 * Who changes what: client.c the client set (cs), put.c the puts and the image cache,
 * lease.c the leases, cluster.c / xfer.c / owner.c the cluster (cl), agent.c the rest.
 * Not an API.
 */
#ifndef MC_AGENT_INT_H
#define MC_AGENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "daemon/agent/agent.h"
#include "daemon/agent/agent_metrics.h"
#include "daemon/agent/client.h"
#include "daemon/agent/fault.h"
#include "daemon/agent/loop.h"
#include "daemon/agent/mlink.h"
#include "daemon/agent/report.h"
#include "daemon/agent/rio.h"
#include "daemon/agent/seg.h"
#include "daemon/agent/seg_gpu.h"
#include "daemon/agent/spin.h"
#include "daemon/master/alloc.h"
#include "daemon/master/master.h"

/* Image buffers kept for the next put with no local replica: huge-page backed anonymous
 * memory, faulted in once (a fresh mapping of tens of MiB costs a fault per page per put). */
#define IMAGE_CACHE 8
#define IMAGE_CACHE_BYTES (UINT64_C(1) << 30)

struct cluster;
struct agent_mode;

/* A tenant's memory on this agent (docs/tenants.md), index as in a->tcfg; 0 is the default
 * tenant. Only its clients map its segments. */
struct agent_tenant {
    struct mc_seg *seg;       /* its DRAM segment (NULL: none here) */
    uint32_t seg_id;          /* the segment's id at the master (UINT32_MAX: not mounted) */
    struct mc_seg *land_seg;  /* cluster: reads from peers for its clients land here */
    struct mc_alloc *land;    /* its allocator */
    uint32_t land_idx;        /* the landing segment's index for its clients */
};

/* A GPU segment of this agent (--gpu), the default tenant's (gpu.c). */
struct agent_gpu {
    struct mc_dev *dev;
    struct mc_seg *seg;
    uint32_t seg_id;          /* at the master (UINT32_MAX: not mounted) */
};

struct mc_agent {
    struct mc_agent_config cfg;
    char *socket_path;
    struct mc_master *master;     /* standalone: in-process; cluster: NULL */
    struct mlink *ml;             /* the way to the master, either kind */
    struct mc_rio rio;            /* replicas elsewhere: none (standalone) or the peers */
    struct mc_rio rio_below;      /* with GPU segments: what rio wraps (gpu.c) */
    struct cluster *cl;           /* cluster mode: UCX, peers, the owner's side */
    const struct agent_mode *mode; /* standalone or cluster: what the loop does (agent.c) */
    struct tenant_cfg *tcfg;      /* ntenants: the tenants as configured, the default first */
    struct agent_tenant *ten;     /* ntenants: their segments here */
    uint32_t ntenants;
    struct agent_gpu gpu[MC_AGENT_GPU_MAX]; /* ngpu: its GPU segments */
    uint32_t ngpu;
    struct agent_disk *disk;      /* --disk: the disk tier (disk_tier.c), or NULL */
    struct mc_seg *disk_seg;      /* its segment (seg_disk.h), the default tenant's */
    uint32_t disk_seg_id;         /* at the master (UINT32_MAX: not mounted) */
    struct mc_rio disk_below;     /* with a disk: what rio wraps (disk_tier.c) */
    uint32_t node;
    uint64_t put_size_max;        /* the largest alloc_len a put may have */
    uint64_t open_put_limit;      /* open_put_bytes_per_client, its default resolved */
    struct mc_loop loop;
    struct agent_spin spin;   /* adaptive waiting: the node page, busy or quiet */
    int timer_fd, signal_fd;
    struct mc_loop_ev timer_ev, signal_ev;
    uint64_t timer_buf, signal_buf[16];
    bool draining;            /* SIGTERM: no new clients, finish what is under way */
    uint64_t drain_deadline_ms;
    bool stopping;
    bool dev_polling;         /* a put waits on a device copy: poll, do not sleep (put.c) */
    struct ml_req *put_parked; /* PUT_STARTs waiting for offloads to make room (put.c) */
    int exit_status;          /* what mc_agent_run returns: 0, or why it had to stop */
    uint64_t last_active_ns;
    struct mc_clients cs;
    struct mc_fault fault;
    struct image_buf {
        uint8_t *p;
        uint64_t cap;
    } images[IMAGE_CACHE];
    uint64_t image_cache_bytes;
    struct report_stats reports;  /* what the master was told again after a MOUNT */
    struct stats {
        uint64_t ops, puts, gets, hits, bytes_in;
        uint64_t puts_refused, puts_idle_revoked;
        uint64_t put_waits;   /* tries of puts parked for room (put_parked) */
        uint64_t puts_from_arena; /* PUTs summed and sent from the client's arena (put.c) */
        uint64_t delayed_answers;
        uint64_t corrupt_reads, checksum_retries;
        uint64_t dev_copies, dev_copy_errors; /* slices copied from clients' device buffers */
    } st;
    /* metrics (NULL: metrics_listen unset, and nothing is timed) */
    struct mc_metrics *metrics;
    uint64_t metrics_pub_ns;      /* the last publication */
    uint64_t op_t0_ns;            /* when the op being run was taken */
    uint64_t mvals[AM__COUNT];
    uint8_t mpresent[AM__COUNT];
};

/* The agent a client belongs to. */
static inline struct mc_agent *agent_of(const struct client *c)
{
    return (struct mc_agent *)((char *)c->cs - offsetof(struct mc_agent, cs));
}

/* The tenant a client belongs to. */
static inline struct agent_tenant *tenant_of(const struct client *c)
{
    return &agent_of(c)->ten[c->tenant];
}

/* The bytes of the tag the client's tenant puts before its keys (0: the default tenant). */
static inline size_t client_tag_len(const struct client *c)
{
    size_t n = strlen(agent_of(c)->tcfg[c->tenant].name);

    return n > 0 ? n + 2 : 0;
}

/* Our segment whose id at the master is seg_id, or NULL (not ours). */
static inline struct mc_seg *agent_seg(const struct mc_agent *a, uint32_t seg_id)
{
    for (uint32_t i = 0; i < a->ntenants; i++) {
        if (a->ten[i].seg != NULL && a->ten[i].seg_id == seg_id)
            return a->ten[i].seg;
    }
    for (uint32_t i = 0; i < a->ngpu; i++) {
        if (a->gpu[i].seg_id == seg_id)
            return a->gpu[i].seg;
    }
    if (a->disk_seg != NULL && a->disk_seg_id == seg_id)
        return a->disk_seg;
    return NULL;
}

/* The segments we mount, in order: each tenant's DRAM one (maybe none), the GPU ones, the
 * disk one. */
static inline uint32_t agent_nsegs(const struct mc_agent *a)
{
    return a->ntenants + a->ngpu + (a->disk_seg != NULL ? 1u : 0u);
}

/* Our segment i in the order we mount them (agent_nsegs: each tenant's DRAM segment, NULL
 * when that tenant has none here, then the GPU ones, the default tenant's, then the disk
 * one, the default tenant's); *tenant_p
 * (may be NULL): its tenant (0 for a GPU or the disk one); *id_p (may be NULL): where its
 * id at the master is kept. */
static inline struct mc_seg *agent_seg_at(struct mc_agent *a, uint32_t i, uint32_t *tenant_p,
                                          uint32_t **id_p)
{
    uint32_t t = i < a->ntenants ? i : 0;

    if (tenant_p != NULL)
        *tenant_p = t;
    if (i == a->ntenants + a->ngpu) {
        if (id_p != NULL)
            *id_p = &a->disk_seg_id;
        return a->disk_seg;
    }
    if (id_p != NULL)
        *id_p = i < a->ntenants ? &a->ten[i].seg_id : &a->gpu[i - a->ntenants].seg_id;
    return i < a->ntenants ? a->ten[i].seg : a->gpu[i - a->ntenants].seg;
}

static inline uint64_t agent_dram_bytes(const struct mc_agent *a)
{
    uint64_t n = 0;

    for (uint32_t i = 0; i < a->ntenants; i++)
        n += a->ten[i].seg != NULL ? a->ten[i].seg->size : 0;
    return n;
}

static inline uint64_t agent_gpu_bytes(const struct mc_agent *a)
{
    uint64_t n = 0;

    for (uint32_t i = 0; i < a->ngpu; i++)
        n += a->gpu[i].seg->size;
    return n;
}

/* Whether any of our segments uses huge pages. */
static inline bool agent_huge(const struct mc_agent *a)
{
    for (uint32_t i = 0; i < a->ntenants; i++) {
        if (a->ten[i].seg != NULL && a->ten[i].seg->huge)
            return true;
    }
    return false;
}

#endif /* MC_AGENT_INT_H */
