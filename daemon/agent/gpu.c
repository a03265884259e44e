/*
 * The agent's GPU segments (gpu.h).
 */
#include "daemon/agent/gpu.h"

#include <inttypes.h>
#include <stdio.h>

#include <mc/mc_status.h>

#include "daemon/agent/agent_int.h"
#include "daemon/common/log.h"
#include "shm/checksum.h"
#include "shm/ring.h"

int agent_gpus_create(struct mc_agent *a, const char *spec)
{
    struct mc_gpu_spec specs[MC_AGENT_GPU_MAX];
    struct mc_dev_test_opts topts = {
        .delay_us = (uint32_t)a->cfg.gpu_test_delay_us,
        .fail_nth = (uint32_t)a->cfg.gpu_test_fail_nth,
        .fail_every = (uint32_t)a->cfg.gpu_test_fail_every,
    };
    char err[256];
    size_t n;
    int rc;

    rc = mc_gpu_spec_parse(spec, specs, &n, err, sizeof(err));
    if (rc != 0) {
        mc_error("%s", rc == MC_ERR_INVALID ? err : mc_strerror(rc));
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        struct agent_gpu *g = &a->gpu[a->ngpu];
        const char *kname = mc_dev_kind_name(specs[i].kind);

        rc = mc_dev_open(specs[i].kind, specs[i].ordinal, &topts, &g->dev, err, sizeof(err));
        if (rc != 0) {
            mc_error("GPU segment on %s%d: %s", kname, specs[i].ordinal,
                     rc == MC_ERR_UNAVAILABLE || rc == MC_ERR_INVALID ? err : mc_strerror(rc));
            return rc;
        }
        rc = mc_seg_gpu_create(g->dev, specs[i].size, &g->seg);
        if (rc != 0) {
            mc_error("GPU segment of %" PRIu64 " bytes on %s%d: %s", specs[i].size, kname,
                     specs[i].ordinal, mc_strerror(rc));
            mc_dev_close(g->dev);
            g->dev = NULL;
            return rc;
        }
        g->seg_id = UINT32_MAX;
        a->ngpu++;
        mc_info("GPU segment: %" PRIu64 " bytes on %s%d%s", specs[i].size, kname,
                specs[i].ordinal, specs[i].kind == MC_DEV_TEST ? " (the test device)" : "");
    }
    return 0;
}

int agent_gpus_mount_local(struct mc_agent *a, struct mc_master *m)
{
    for (uint32_t i = 0; i < a->ngpu; i++) {
        struct mc_master_seg_desc d = {.node = a->node, .kind = MC_SEG_GPU,
                                       .base = mc_seg_gpu_addr(a->gpu[i].seg, 0, 0),
                                       .size = a->gpu[i].seg->size,
                                       .quota = a->tcfg[0].quota};
        int err;

        snprintf(d.tenant, sizeof(d.tenant), "%s", a->tcfg[0].name);
        err = mc_master_segment_mount(m, &d, &a->gpu[i].seg_id);
        if (err != 0) {
            mc_error("mounting GPU segment %u: %s", i, mc_strerror(err));
            return err;
        }
        if (d.size > a->put_size_max)
            a->put_size_max = d.size; /* one node: every replica is here */
    }
    return 0;
}

void agent_gpus_destroy(struct mc_agent *a)
{
    for (uint32_t i = 0; i < a->ngpu; i++) {
        mc_seg_destroy(a->gpu[i].seg);
        mc_dev_close(a->gpu[i].dev);
    }
    a->ngpu = 0;
}

/* Our replica r, when it is in a segment of ours with no window in place. */
static struct mc_seg *own_unmapped(struct mc_agent *a, const struct mc_master_replica *r)
{
    struct mc_seg *s = agent_seg(a, r->seg);

    return s != NULL && mc_seg_span(s, r->offset, 0) == NULL ? s : NULL;
}

static int tier_write(void *impl, const struct mc_rio_write *w, mc_rio_write_fn done, void *ctx)
{
    struct mc_agent *a = impl;
    struct mc_seg *s = own_unmapped(a, w->r);
    int err;

    if (s == NULL)
        return a->rio_below.ops->write(a->rio_below.impl, w, done, ctx);
    if (w->from > w->r->len || w->len > w->r->len - w->from)
        return MC_ERR_INTERNAL; /* past the block the master granted: a bug of the caller */
    err = s->ops->write(s, w->r->offset + w->from, w->src, w->len);
    if (err != 0)
        mc_warn("GPU segment: writing %" PRIu64 " bytes: %s", w->len, mc_strerror(err));
    done(ctx, err == 0 ? 0 : MC_ERR_IO); /* final: the copy was waited for */
    return 0;
}

static int tier_read(void *impl, const struct mc_master_get_result *g, uint32_t skip,
                     uint32_t tenant, uint64_t deadline_ms, uint8_t *arena, uint64_t arena_room,
                     mc_rio_read_fn done, mc_rio_wanted_fn wanted, void *ctx)
{
    struct mc_agent *a = impl;
    struct agent_tenant *t = &a->ten[tenant];
    bool csum = (g->flags & MC_MASTER_PUT_NO_CHECKSUM) == 0;
    uint64_t len = mc_shm_alloc_len(g->size, csum);
    uint32_t j, land_id;
    bool failed = false;
    int err;

    for (j = 0; j < g->nrep; j++) {
        struct mc_seg *s = own_unmapped(a, &g->rep[j]);

        if (s == NULL || (skip >> j & 1))
            continue;
        if (t->land == NULL || len > g->rep[j].len)
            return MC_ERR_INTERNAL;
        if (mc_alloc_alloc(t->land, len, &land_id) != 0)
            return MC_ERR_BUSY; /* the landing segment is full of reads not yet released */
        err = s->ops->read(s, g->rep[j].offset,
                           t->land_seg->base + mc_alloc_offset(t->land, land_id), len);
        if (err == 0) {
            done(ctx, 0, land_id, j);
            return 0;
        }
        mc_alloc_free(t->land, land_id);
        mc_warn("GPU segment: reading %" PRIu64 " bytes: %s", len, mc_strerror(err));
        skip |= 1u << j; /* another replica, maybe */
        failed = true;
    }
    err = a->rio_below.ops->read(a->rio_below.impl, g, skip, tenant, deadline_ms, arena, arena_room, done,
                                 wanted, ctx);
    /* no other replica: the reader hears that the copy failed, not that nothing is there */
    return err == MC_ERR_NOT_FOUND && failed ? MC_ERR_IO : err;
}

static uint64_t tier_lease_ttl_ms(void *impl)
{
    struct mc_agent *a = impl;

    return a->rio_below.ops->lease_ttl_ms(a->rio_below.impl);
}

static const struct mc_rio_ops tier_ops = {
    .write = tier_write,
    .read = tier_read,
    .lease_ttl_ms = tier_lease_ttl_ms,
};

int agent_gpus_rio_wrap(struct mc_agent *a)
{
    if (a->ngpu == 0)
        return 0;
    for (uint32_t t = 0; t < a->ntenants; t++) {
        struct agent_tenant *ten = &a->ten[t];
        int err;

        if (ten->land_seg != NULL)
            continue;
        /* standalone: GET answers of GPU-resident objects land here, as a cluster's
         * remote reads do */
        err = mc_seg_dram_create("mc-landing", a->cfg.landing, false, a->cfg.prefault,
                                 &ten->land_seg);
        if (err == 0)
            err = mc_alloc_create(a->cfg.landing, MC_SHM_CHUNK / 16, &ten->land);
        if (err != 0) {
            mc_error("landing segment of %" PRIu64 " bytes: %s", a->cfg.landing,
                     mc_strerror(err));
            return err;
        }
        ten->land_idx = ten->seg != NULL ? 1 : 0;
    }
    a->rio_below = a->rio;
    a->rio = (struct mc_rio){.ops = &tier_ops, .impl = a};
    return 0;
}
