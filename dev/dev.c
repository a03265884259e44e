/*
 * The device seam (dev.h): the dispatch to an implementation's ops table by kind. Holds no
 * state of its own.
 */
#include "dev/dev_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <mc/mc_status.h>

void mc_dev_why(char *why, size_t why_len, const char *fmt, ...)
{
    va_list ap;

    if (why == NULL || why_len == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
}

static const struct mc_dev_ops *ops_of(int kind)
{
    switch (kind) {
    case MC_DEV_TEST:
        return &mc_dev_test_ops;
    case MC_DEV_CUDA:
        return &mc_dev_cuda_ops;
    default:
        return NULL;
    }
}

const char *mc_dev_kind_name(enum mc_dev_kind kind)
{
    switch (kind) {
    case MC_DEV_TEST:
        return "test";
    case MC_DEV_CUDA:
        return "cuda";
    default:
        return "?";
    }
}

int mc_dev_kind_parse(const char *name)
{
    if (name == NULL)
        return -1;
    if (strcmp(name, "test") == 0)
        return MC_DEV_TEST;
    if (strcmp(name, "cuda") == 0)
        return MC_DEV_CUDA;
    return -1;
}

int mc_dev_probe(enum mc_dev_kind kind, int *count_p, char *why, size_t why_len)
{
    const struct mc_dev_ops *ops = ops_of(kind);

    if (ops == NULL || count_p == NULL) {
        mc_dev_why(why, why_len, "unknown device kind %d", (int)kind);
        return MC_ERR_INVALID;
    }
    return ops->probe(count_p, why, why_len);
}

int mc_dev_open(enum mc_dev_kind kind, int ordinal, const struct mc_dev_test_opts *opts,
                struct mc_dev **d_p, char *why, size_t why_len)
{
    const struct mc_dev_ops *ops = ops_of(kind);
    struct mc_dev *d;
    int err;

    if (ops == NULL || d_p == NULL || ordinal < 0) {
        mc_dev_why(why, why_len, "unknown device kind %d or ordinal %d", (int)kind, ordinal);
        return MC_ERR_INVALID;
    }
    err = ops->open(ordinal, opts, &d, why, why_len);
    if (err != 0)
        return err;
    d->ops = ops;
    d->kind = kind;
    d->ordinal = ordinal;
    *d_p = d;
    return 0;
}

void mc_dev_close(struct mc_dev *d)
{
    if (d != NULL)
        d->ops->close(d);
}

enum mc_dev_kind mc_dev_kind_of(const struct mc_dev *d)
{
    return d->kind;
}

int mc_dev_alloc(struct mc_dev *d, uint64_t size, uint64_t *ptr_p)
{
    if (size == 0 || ptr_p == NULL)
        return MC_ERR_INVALID;
    return d->ops->alloc(d, size, ptr_p);
}

int mc_dev_alloc_vmm(struct mc_dev *d, uint64_t size, uint64_t *ptr_p)
{
    if (size == 0 || ptr_p == NULL)
        return MC_ERR_INVALID;
    return d->ops->alloc_vmm(d, size, ptr_p);
}

void mc_dev_free(struct mc_dev *d, uint64_t ptr)
{
    if (ptr != 0)
        d->ops->free(d, ptr);
}

int mc_dev_stream_create(struct mc_dev *d, struct mc_dev_stream **s_p)
{
    return d->ops->stream_create(d, s_p);
}

void mc_dev_stream_destroy(struct mc_dev_stream *s)
{
    if (s != NULL)
        s->dev->ops->stream_destroy(s);
}

int mc_dev_stream_sync(struct mc_dev_stream *s)
{
    return s->dev->ops->stream_sync(s);
}

int mc_dev_copy_htod(struct mc_dev_stream *s, uint64_t dst, const void *src, uint64_t len)
{
    if (len == 0 || dst == 0 || src == NULL)
        return MC_ERR_INVALID;
    return s->dev->ops->copy_htod(s, dst, src, len);
}

int mc_dev_copy_dtoh(struct mc_dev_stream *s, void *dst, uint64_t src, uint64_t len)
{
    if (len == 0 || dst == NULL || src == 0)
        return MC_ERR_INVALID;
    return s->dev->ops->copy_dtoh(s, dst, src, len);
}

int mc_dev_copy_dtod(struct mc_dev_stream *s, uint64_t dst, uint64_t src, uint64_t len)
{
    if (len == 0 || dst == 0 || src == 0)
        return MC_ERR_INVALID;
    return s->dev->ops->copy_dtod(s, dst, src, len);
}

int mc_dev_event_create(struct mc_dev *d, struct mc_dev_event **e_p)
{
    return d->ops->event_create(d, e_p);
}

void mc_dev_event_destroy(struct mc_dev_event *e)
{
    if (e != NULL)
        e->dev->ops->event_destroy(e);
}

int mc_dev_event_record(struct mc_dev_event *e, struct mc_dev_stream *s)
{
    if (e->dev != s->dev)
        return MC_ERR_INVALID;
    return s->dev->ops->event_record(e, s);
}

int mc_dev_event_query(struct mc_dev_event *e)
{
    return e->dev->ops->event_query(e);
}

int mc_dev_ptr_query(enum mc_dev_kind kind, uint64_t ptr, struct mc_dev_ptr_info *info)
{
    const struct mc_dev_ops *ops = ops_of(kind);

    if (ops == NULL || info == NULL)
        return MC_ERR_INVALID;
    memset(info, 0, sizeof(*info));
    if (ptr == 0)
        return 0;
    return ops->ptr_query(ptr, info);
}

int mc_dev_export(enum mc_dev_kind kind, uint64_t ptr, struct mc_dev_export *x, int *fd_p)
{
    const struct mc_dev_ops *ops = ops_of(kind);

    if (ops == NULL || x == NULL || fd_p == NULL || ptr == 0)
        return MC_ERR_INVALID;
    *fd_p = -1;
    memset(x, 0, sizeof(*x));
    return ops->export_buf(ptr, x, fd_p);
}

int mc_dev_import(struct mc_dev *d, const struct mc_dev_export *x, int fd, uint64_t *base_p)
{
    return d->ops->import(d, x, fd, base_p);
}

void mc_dev_unimport(struct mc_dev *d, uint64_t base, uint64_t size)
{
    if (base != 0)
        d->ops->unimport(d, base, size);
}
