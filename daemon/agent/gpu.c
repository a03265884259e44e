/*
 * The agent's GPU segments (gpu.h).
 */
#include "daemon/agent/gpu.h"

#include <inttypes.h>
#include <stdio.h>

#include <mc/mc_status.h>

#include "daemon/agent/agent_int.h"
#include "daemon/common/log.h"

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
