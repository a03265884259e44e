/*
 * Device buffers (devbuf.h).
 */
#include "libmc/devbuf.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "shm/fdpass.h"

int mc_devbuf_init(struct mc_devbufs *d)
{
    const char *want = getenv("MC_DEVICE");

    memset(d, 0, sizeof(*d));
    if (pthread_mutex_init(&d->mu, NULL) != 0)
        return MC_ERR_NOMEM;
    if (want != NULL && want[0] != '\0') {
        int k = mc_dev_kind_parse(want);

        d->kind = k > 0 ? k : 0; /* "none", or anything unknown: off */
    } else {
        /* an engine has loaded the driver already: asking it costs nothing more */
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

        if (h != NULL) {
            d->kind = MC_DEV_CUDA;
            dlclose(h);
        }
    }
    return 0;
}

void mc_devbuf_cleanup(struct mc_devbufs *d)
{
    mc_dev_stream_destroy(d->stream);
    mc_dev_close(d->dev);
    pthread_mutex_destroy(&d->mu);
}

bool mc_devbuf_is_device(struct mc_devbufs *d, const void *p, size_t len)
{
    struct mc_dev_ptr_info info;
    uint64_t a = (uint64_t)(uintptr_t)p;

    if (d->kind == 0 || p == NULL || len == 0)
        return false;
    if (mc_dev_ptr_query((enum mc_dev_kind)d->kind, a, &info) != 0 || !info.is_device)
        return false;
    return true;
}

static int devbuf_register(struct mc_devbufs *d, int sock, uint32_t id,
                           const struct mc_dev_export *x, int fd)
{
    struct mc_shm_devbuf_msg m = {.magic = MC_SHM_MAGIC, .type = MC_SHM_DEVBUF_ADD,
                                  .devbuf_id = id, .dev_kind = (uint32_t)d->kind,
                                  .export_kind = x->kind, .ordinal = x->ordinal,
                                  .size = x->size, .buffer_id = x->buffer_id};

    memcpy(m.handle, x->handle, sizeof(m.handle));
    return mc_shm_fd_send(sock, &m, sizeof(m), 0, &fd, fd >= 0 ? 1 : 0);
}

int mc_devbuf_ref(struct mc_devbufs *d, int sock, const void *p, size_t len, uint64_t *ref_p)
{
    struct mc_dev_ptr_info info;
    struct mc_dev_export x;
    uint64_t a = (uint64_t)(uintptr_t)p;
    uint32_t i;
    int fd = -1, err;

    err = mc_dev_ptr_query((enum mc_dev_kind)d->kind, a, &info);
    if (err != 0)
        return err;
    if (!info.is_device || a - info.base > info.size || len > info.size - (a - info.base))
        return MC_ERR_INVALID; /* not device memory, or runs past its allocation */
    pthread_mutex_lock(&d->mu);
    for (i = 0; i < d->n; i++) {
        const struct mc_devbuf_ent *e = &d->ent[i];

        /* the same allocation still: a freed and reallocated base has a new buffer id */
        if (e->base == info.base && e->buffer_id == info.buffer_id &&
            e->ordinal == info.ordinal && e->size == info.size)
            break;
    }
    if (i == d->n) {
        if (d->n == MC_SHM_MAX_DEVBUFS) {
            err = MC_ERR_NOMEM;
            goto out;
        }
        err = mc_dev_export((enum mc_dev_kind)d->kind, a, &x, &fd);
        if (err != 0)
            goto out;
        err = devbuf_register(d, sock, i, &x, fd);
        if (fd >= 0)
            close(fd);
        if (err != 0)
            goto out;
        d->ent[i] = (struct mc_devbuf_ent){.kind = (uint32_t)d->kind, .ordinal = info.ordinal,
                                           .base = info.base, .size = info.size,
                                           .buffer_id = info.buffer_id};
        d->n++;
    }
    *ref_p = (uint64_t)i << MC_SHM_ARENA_SHIFT | (a - info.base);
out:
    pthread_mutex_unlock(&d->mu);
    return err;
}

/* The stream of libmc's own copies, opened on first use on the device of ptr; mu held. */
static int stream_locked(struct mc_devbufs *d, const void *ptr)
{
    int err = 0;

    if (d->stream == NULL) {
        struct mc_dev_ptr_info info;

        err = mc_dev_ptr_query((enum mc_dev_kind)d->kind, (uint64_t)(uintptr_t)ptr, &info);
        if (err == 0 && !info.is_device)
            err = MC_ERR_INVALID;
        if (err == 0)
            err = mc_dev_open((enum mc_dev_kind)d->kind, (int)info.ordinal, NULL, &d->dev, NULL,
                              0);
        if (err == 0)
            err = mc_dev_stream_create(d->dev, &d->stream);
    }
    return err;
}

int mc_devbuf_stage_out(struct mc_devbufs *d, const void *p, size_t len, uint8_t **copy_p)
{
    uint8_t *copy = malloc(len);
    int err;

    if (copy == NULL)
        return MC_ERR_NOMEM;
    pthread_mutex_lock(&d->mu);
    err = stream_locked(d, p);
    if (err == 0)
        err = mc_dev_copy_dtoh(d->stream, copy, (uint64_t)(uintptr_t)p, len);
    if (err == 0)
        err = mc_dev_stream_sync(d->stream);
    pthread_mutex_unlock(&d->mu);
    if (err != 0) {
        free(copy);
        return MC_ERR_IO;
    }
    atomic_fetch_add(&d->staged, 1);
    *copy_p = copy;
    return 0;
}

int mc_devbuf_copy_in(struct mc_devbufs *d, void *dst, const void *src, size_t len)
{
    int err;

    pthread_mutex_lock(&d->mu);
    err = stream_locked(d, dst);
    if (err == 0)
        err = mc_dev_copy_htod(d->stream, (uint64_t)(uintptr_t)dst, src, len);
    if (err == 0)
        err = mc_dev_stream_sync(d->stream);
    pthread_mutex_unlock(&d->mu);
    return err == 0 ? 0 : MC_ERR_IO;
}
