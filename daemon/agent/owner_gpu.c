/*
 * GPU segments in cluster mode (cluster_int.h): which of them UCX moves directly (registered
 * with their memory type), so that peers' reads and writes and the master's copies go
 * without staging through host memory; the others are staged by their callers.
 */
#include "daemon/agent/cluster_int.h"

#include <stdint.h>

#include "daemon/common/log.h"

/*
 * [off, off + len) of our GPU segment seg where UCX moves that segment's memory directly
 * (cl_owner_gpu_setup), with its memory type; NULL when seg is not such a segment or the
 * range is outside it (the caller stages, or refuses).
 */
void *cl_gpu_direct_span(struct cluster *cl, uint32_t seg, uint64_t off, uint64_t len,
                         enum mc_ucx_mem_type *mt_p)
{
    struct mc_agent *a = cl->a;

    for (uint32_t i = 0; i < a->ngpu; i++) {
        uint64_t addr;

        if (a->gpu[i].seg_id != seg || !cl->gpu[i].direct)
            continue;
        addr = mc_seg_gpu_addr(a->gpu[i].seg, off, len);
        if (addr == 0)
            return NULL;
        *mt_p = cl->gpu[i].mt;
        return (void *)(uintptr_t)addr;
    }
    return NULL;
}

void cl_owner_gpu_setup(struct cluster *cl)
{
    struct mc_agent *a = cl->a;
    bool cuda = a->ngpu > 0 && mc_ucx_has_cuda(cl->u);

    for (uint32_t i = 0; i < a->ngpu; i++) {
        enum mc_dev_kind kind = mc_dev_kind_of(a->gpu[i].dev);
        struct mc_seg *s = a->gpu[i].seg;
        const char *why;
        int err;

        cl->gpu[i].direct = false;
        if (kind == MC_DEV_CUDA && cuda) {
            cl->gpu[i].mt = MC_UCX_MEM_CUDA;
        } else if (kind == MC_DEV_TEST && a->cfg.gpu_test_ucx_direct) {
            cl->gpu[i].mt = MC_UCX_MEM_HOST; /* the test device's memory is host memory */
        } else {
            why = kind == MC_DEV_TEST ? "the test device without gpu_test_ucx_direct"
                                      : "this UCX has no CUDA transport";
            mc_info("GPU segment %u: peers' reads and writes are staged through host memory "
                    "(%s)", i, why);
            continue;
        }
        if (!mc_ucx_moves(cl->u, cl->gpu[i].mt)) {
            mc_info("GPU segment %u: staged (UCX does not move its memory type)", i);
            continue;
        }
        err = mc_ucx_mem_map_type(cl->u, (void *)(uintptr_t)mc_seg_gpu_addr(s, 0, s->size),
                                  s->size, cl->gpu[i].mt, &cl->gpu[i].mem);
        if (err != 0) {
            mc_warn("GPU segment %u: UCX could not register it (%s): staged through host "
                    "memory", i, mc_strerror(err));
            cl->gpu[i].mem = NULL;
            continue;
        }
        cl->gpu[i].direct = true;
        mc_info("GPU segment %u: registered with UCX, peers' reads and writes move directly "
                "(%s)", i, kind == MC_DEV_TEST ? "gpu_test_ucx_direct: the test device as host "
                                                 "memory"
                                               : "this UCX moves CUDA memory");
    }
}

void cl_owner_gpu_release(struct cluster *cl)
{
    for (uint32_t i = 0; i < MC_AGENT_GPU_MAX; i++) {
        mc_ucx_mem_unmap(cl->gpu[i].mem);
        cl->gpu[i].mem = NULL;
        cl->gpu[i].direct = false;
    }
}
