/*
 * GPU segments (seg_gpu.h): the MC_SEG_GPU kind of the segment seam, over the device seam.
 */
#include "daemon/agent/seg_gpu.h"

#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/master/master.h"

struct gpu_seg {
    struct mc_seg pub;
    struct mc_dev *dev;
    uint64_t dptr;               /* the allocation */
    struct mc_dev_stream *stream;
};

uint64_t mc_seg_gpu_addr(struct mc_seg *s, uint64_t off, uint64_t len)
{
    struct gpu_seg *g = (struct gpu_seg *)s;

    return off <= s->size && len <= s->size - off ? g->dptr + off : 0;
}

static uint8_t *gpu_span(struct mc_seg *s, uint64_t off, uint64_t len)
{
    (void)s;
    (void)off;
    (void)len;
    return NULL; /* device memory: not for the host to touch */
}

/* A copy in or out, waited for: the segment ops are synchronous (the disk kind's are too). */
static int gpu_write(struct mc_seg *s, uint64_t off, const void *src, uint64_t len)
{
    struct gpu_seg *g = (struct gpu_seg *)s;
    uint64_t dst = mc_seg_gpu_addr(s, off, len);
    int err;

    if (dst == 0)
        return MC_ERR_INVALID;
    if (len == 0)
        return 0;
    err = mc_dev_copy_htod(g->stream, dst, src, len);
    if (err == 0)
        err = mc_dev_stream_sync(g->stream);
    return err == 0 ? 0 : MC_ERR_IO;
}

static int gpu_read(struct mc_seg *s, uint64_t off, void *dst, uint64_t len)
{
    struct gpu_seg *g = (struct gpu_seg *)s;
    uint64_t src = mc_seg_gpu_addr(s, off, len);
    int err;

    if (src == 0)
        return MC_ERR_INVALID;
    if (len == 0)
        return 0;
    err = mc_dev_copy_dtoh(g->stream, dst, src, len);
    if (err == 0)
        err = mc_dev_stream_sync(g->stream);
    return err == 0 ? 0 : MC_ERR_IO;
}

static void gpu_destroy(struct mc_seg *s)
{
    struct gpu_seg *g = (struct gpu_seg *)s;

    mc_dev_stream_destroy(g->stream); /* waits for what it had queued */
    mc_dev_free(g->dev, g->dptr);
    free(g);
}

static const struct mc_seg_ops gpu_ops = {
    .span = gpu_span,
    .write = gpu_write,
    .read = gpu_read,
    .destroy = gpu_destroy,
};

int mc_seg_gpu_create(struct mc_dev *dev, uint64_t size, struct mc_seg **s_p)
{
    struct gpu_seg *g = calloc(1, sizeof(*g));
    int err;

    if (g == NULL)
        return MC_ERR_NOMEM;
    err = mc_dev_alloc(dev, size, &g->dptr);
    if (err != 0)
        goto err_free;
    err = mc_dev_stream_create(dev, &g->stream);
    if (err != 0)
        goto err_dev_free;
    g->dev = dev;
    g->pub.ops = &gpu_ops;
    g->pub.kind = MC_SEG_GPU;
    g->pub.size = size;
    g->pub.ro_fd = -1;
    g->pub.fd = -1;
    *s_p = &g->pub;
    return 0;

err_dev_free:
    mc_dev_free(dev, g->dptr);
err_free:
    free(g);
    return err;
}
