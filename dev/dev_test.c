/*
 * The test device (dev.h, MC_DEV_TEST): GPU memory played by host memory, so every path
 * above the seam runs where there is no GPU. It behaves like a device where that matters:
 *   - device memory is a memfd per allocation, mapped in the allocating process; the memfd
 *     is named "mc-testdev:ORDINAL:FD" so any copy of this code in the process (libmc has its
 *     own) finds it in /proc/self/maps, as a driver finds its allocations, and checks the fd
 *     by inode before it trusts it;
 *   - copies are asynchronous: a worker thread per stream runs them in order, each after
 *     delay_us, and the nth copy (or every nth) can be made to fail, writing nothing;
 *   - export passes the memfd, which the importer maps (the IPC handle's part).
 * It is selected by configuration for tests; nothing detects it on its own.
 */
#include "dev/dev_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "common/err.h"

#define TESTDEV_PREFIX "/memfd:mc-testdev:"
#define TESTDEV_VMM_PREFIX "/memfd:mc-testdev-vmm:" /* not exportable (mc_dev_alloc_vmm) */

struct tdev_alloc {
    struct tdev_alloc *next;
    uint64_t base, size;
    int fd;
};

struct tdev {
    struct mc_dev pub;
    struct mc_dev_test_opts opts;
    atomic_uint copies;  /* numbered from 1, for fail_nth / fail_every */
    struct tdev_alloc *allocs;
};

enum top_kind { TOP_COPY, TOP_EVENT, TOP_STOP };

struct top {
    struct top *next;
    enum top_kind kind;
    uint8_t *dst;
    const uint8_t *src;
    uint64_t len;
    struct tevent *ev;
};

struct tstream {
    struct mc_dev_stream pub;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;  /* work queued, or the queue drained */
    struct top *head, *tail;
    uint64_t queued, ran; /* ops pushed and ops finished */
    int err_event;        /* a copy failed since the last event ran */
    int err_sync;         /* a copy failed since the last sync */
    struct top *stop;     /* the last message, allocated up front: destroy cannot fail */
};

struct tevent {
    struct mc_dev_event pub;
    _Atomic int state;  /* 1: pending; 0: complete */
    int status;         /* once complete: 0 or MC_ERR_IO */
};

static void sleep_us(uint32_t us)
{
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int tdev_probe(int *count_p, char *why, size_t why_len)
{
    (void)why;
    (void)why_len;
    *count_p = 1;
    return 0;
}

static int tdev_open(int ordinal, const struct mc_dev_test_opts *opts, struct mc_dev **d_p,
                     char *why, size_t why_len)
{
    struct tdev *t;

    if (ordinal != 0) {
        mc_dev_why(why, why_len, "no device: the test device has ordinal 0 only");
        return MC_ERR_UNAVAILABLE;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL)
        return MC_ERR_NOMEM;
    if (opts != NULL)
        t->opts = *opts;
    *d_p = &t->pub;
    return 0;
}

static void tdev_close(struct mc_dev *d)
{
    struct tdev *t = (struct tdev *)d;

    while (t->allocs != NULL)
        d->ops->free(d, t->allocs->base);
    free(t);
}

static int tdev_alloc_named(struct mc_dev *d, uint64_t size, bool vmm, uint64_t *ptr_p)
{
    struct tdev *t = (struct tdev *)d;
    struct tdev_alloc *a;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    char name[64];
    void *p;
    int fd, err;

    if (size > (UINT64_C(1) << 46))
        return MC_ERR_NOMEM;
    size = (size + page - 1) / page * page;
    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return MC_ERR_NOMEM;
    /* the fd goes into the name, which needs the fd: reserve a number with a placeholder
     * memfd first, then create the real one and move it onto that number */
    fd = memfd_create("mc-testdev", MFD_CLOEXEC);
    if (fd < 0) {
        err = mc_err_from_errno(errno);
        goto err_free;
    }
    snprintf(name, sizeof(name), "mc-testdev%s:%d:%d", vmm ? "-vmm" : "", d->ordinal, fd);
    {
        int real = memfd_create(name, MFD_CLOEXEC);

        if (real < 0 || dup3(real, fd, O_CLOEXEC) < 0) {
            err = mc_err_from_errno(errno);
            if (real >= 0)
                close(real);
            goto err_close;
        }
        close(real);
    }
    if (ftruncate(fd, (off_t)size) != 0) {
        err = mc_err_from_errno(errno);
        goto err_close;
    }
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        err = mc_err_from_errno(errno);
        goto err_close;
    }
    a->base = (uint64_t)(uintptr_t)p;
    a->size = size;
    a->fd = fd;
    a->next = t->allocs;
    t->allocs = a;
    *ptr_p = a->base;
    return 0;

err_close:
    close(fd);
err_free:
    free(a);
    return err == MC_ERR_IO || err == MC_ERR_INVALID ? MC_ERR_NOMEM : err;
}

static int tdev_alloc(struct mc_dev *d, uint64_t size, uint64_t *ptr_p)
{
    return tdev_alloc_named(d, size, false, ptr_p);
}

static int tdev_alloc_vmm(struct mc_dev *d, uint64_t size, uint64_t *ptr_p)
{
    return tdev_alloc_named(d, size, true, ptr_p);
}

static void tdev_free(struct mc_dev *d, uint64_t ptr)
{
    struct tdev *t = (struct tdev *)d;
    struct tdev_alloc **pp, *a;

    for (pp = &t->allocs; (a = *pp) != NULL; pp = &a->next) {
        if (a->base == ptr) {
            *pp = a->next;
            munmap((void *)(uintptr_t)a->base, a->size);
            close(a->fd);
            free(a);
            return;
        }
    }
}

static void *tstream_worker(void *arg)
{
    struct tstream *s = arg;
    struct tdev *t = (struct tdev *)s->pub.dev;
    struct top *op;
    bool stop = false;

    while (!stop) {
        pthread_mutex_lock(&s->lock);
        while (s->head == NULL)
            pthread_cond_wait(&s->cond, &s->lock);
        op = s->head;
        pthread_mutex_unlock(&s->lock);

        switch (op->kind) {
        case TOP_COPY: {
            unsigned n = atomic_fetch_add(&t->copies, 1) + 1;
            bool fail = (t->opts.fail_nth != 0 && n == t->opts.fail_nth) ||
                        (t->opts.fail_every != 0 && n % t->opts.fail_every == 0);

            if (t->opts.delay_us != 0)
                sleep_us(t->opts.delay_us);
            if (!fail)
                memmove(op->dst, op->src, op->len);
            pthread_mutex_lock(&s->lock);
            if (fail)
                s->err_event = s->err_sync = MC_ERR_IO;
            pthread_mutex_unlock(&s->lock);
            break;
        }
        case TOP_EVENT:
            pthread_mutex_lock(&s->lock);
            op->ev->status = s->err_event;
            s->err_event = 0;
            pthread_mutex_unlock(&s->lock);
            /* pairs with the acquire load in tevent_query: the copies' bytes and the status
             * are visible to whoever sees the event complete */
            atomic_store_explicit(&op->ev->state, 0, memory_order_release);
            break;
        case TOP_STOP:
            stop = true;
            break;
        }
        pthread_mutex_lock(&s->lock);
        s->head = op->next;
        if (s->head == NULL)
            s->tail = NULL;
        s->ran++;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        free(op);
    }
    return NULL;
}

static int tstream_push(struct tstream *s, struct top *op)
{
    pthread_mutex_lock(&s->lock);
    op->next = NULL;
    if (s->tail != NULL)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    s->queued++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static int tstream_create(struct mc_dev *d, struct mc_dev_stream **s_p)
{
    struct tstream *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return MC_ERR_NOMEM;
    s->stop = calloc(1, sizeof(*s->stop));
    if (s->stop == NULL) {
        free(s);
        return MC_ERR_NOMEM;
    }
    s->stop->kind = TOP_STOP;
    s->pub.dev = d;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    if (pthread_create(&s->thread, NULL, tstream_worker, s) != 0) {
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        free(s->stop);
        free(s);
        return MC_ERR_NOMEM;
    }
    *s_p = &s->pub;
    return 0;
}

static int tstream_sync(struct mc_dev_stream *ps)
{
    struct tstream *s = (struct tstream *)ps;
    int err;

    pthread_mutex_lock(&s->lock);
    while (s->ran != s->queued)
        pthread_cond_wait(&s->cond, &s->lock);
    err = s->err_sync;
    s->err_sync = 0;
    pthread_mutex_unlock(&s->lock);
    return err;
}

static void tstream_destroy(struct mc_dev_stream *ps)
{
    struct tstream *s = (struct tstream *)ps;

    tstream_push(s, s->stop); /* after what is queued: the worker runs that first */
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static int tstream_copy(struct mc_dev_stream *ps, void *dst, const void *src, uint64_t len)
{
    struct top *op = calloc(1, sizeof(*op));

    if (op == NULL)
        return MC_ERR_NOMEM;
    op->kind = TOP_COPY;
    op->dst = dst;
    op->src = src;
    op->len = len;
    return tstream_push((struct tstream *)ps, op);
}

static int tcopy_htod(struct mc_dev_stream *s, uint64_t dst, const void *src, uint64_t len)
{
    return tstream_copy(s, (void *)(uintptr_t)dst, src, len);
}

static int tcopy_dtoh(struct mc_dev_stream *s, void *dst, uint64_t src, uint64_t len)
{
    return tstream_copy(s, dst, (const void *)(uintptr_t)src, len);
}

static int tcopy_dtod(struct mc_dev_stream *s, uint64_t dst, uint64_t src, uint64_t len)
{
    return tstream_copy(s, (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, len);
}

static int tevent_create(struct mc_dev *d, struct mc_dev_event **e_p)
{
    struct tevent *e = calloc(1, sizeof(*e));

    if (e == NULL)
        return MC_ERR_NOMEM;
    e->pub.dev = d;
    atomic_init(&e->state, 0);
    *e_p = &e->pub;
    return 0;
}

static void tevent_destroy(struct mc_dev_event *e)
{
    free(e);
}

static int tevent_record(struct mc_dev_event *pe, struct mc_dev_stream *s)
{
    struct tevent *e = (struct tevent *)pe;
    struct top *op = calloc(1, sizeof(*op));

    if (op == NULL)
        return MC_ERR_NOMEM;
    if (atomic_load_explicit(&e->state, memory_order_acquire) != 0) {
        free(op);
        return MC_ERR_BUSY;
    }
    atomic_store_explicit(&e->state, 1, memory_order_relaxed);
    op->kind = TOP_EVENT;
    op->ev = e;
    return tstream_push((struct tstream *)s, op);
}

static int tevent_query(struct mc_dev_event *pe)
{
    struct tevent *e = (struct tevent *)pe;

    /* pairs with the release store of the worker */
    if (atomic_load_explicit(&e->state, memory_order_acquire) != 0)
        return MC_ERR_BUSY;
    return e->status;
}

/*
 * Find ptr in /proc/self/maps among the test device's memfds whose fd (from the name) is
 * still that memfd (same inode) in this process. fd_p: that fd, or -1 (may be NULL).
 */
static int tdev_lookup(uint64_t ptr, struct mc_dev_ptr_info *info, int *fd_p)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];

    if (f == NULL)
        return MC_ERR_IO;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long long start, end, ino;
        char path[256];
        unsigned ordinal;
        int fd, n = 0;
        struct stat st;

        path[0] = '\0';
        if (sscanf(line, "%llx-%llx %*s %*s %*s %llu %255s%n", &start, &end, &ino, path, &n) <
            4)
            continue;
        if (ptr < start || ptr >= end)
            continue;
        bool vmm = strncmp(path, TESTDEV_VMM_PREFIX, strlen(TESTDEV_VMM_PREFIX)) == 0;
        const char *rest = vmm ? path + strlen(TESTDEV_VMM_PREFIX)
                               : path + strlen(TESTDEV_PREFIX);

        if ((!vmm && strncmp(path, TESTDEV_PREFIX, strlen(TESTDEV_PREFIX)) != 0) ||
            sscanf(rest, "%u:%d", &ordinal, &fd) != 2)
            break;
        if (fstat(fd, &st) != 0 || (unsigned long long)st.st_ino != ino)
            break; /* an import of another process's buffer, or a stale name */
        info->is_device = true;
        info->exportable = !vmm;
        info->kind = MC_DEV_TEST;
        info->ordinal = ordinal;
        info->base = start;
        info->size = end - start;
        info->buffer_id = ino;
        if (fd_p != NULL)
            *fd_p = fd;
        fclose(f);
        return 0;
    }
    fclose(f);
    return 0;
}

static int tdev_ptr_query(uint64_t ptr, struct mc_dev_ptr_info *info)
{
    return tdev_lookup(ptr, info, NULL);
}

static int tdev_export(uint64_t ptr, struct mc_dev_export *x, int *fd_p)
{
    struct mc_dev_ptr_info info = {0};
    int fd = -1, err, dup_fd;

    err = tdev_lookup(ptr, &info, &fd);
    if (err != 0)
        return err;
    if (!info.is_device)
        return MC_ERR_INVALID;
    if (!info.exportable)
        return MC_ERR_DENIED;
    dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0)
        return mc_err_from_errno(errno);
    x->kind = MC_DEV_EXPORT_FD;
    x->ordinal = info.ordinal;
    x->size = info.size;
    x->buffer_id = info.buffer_id;
    *fd_p = dup_fd;
    return 0;
}

static int tdev_import(struct mc_dev *d, const struct mc_dev_export *x, int fd,
                       uint64_t *base_p)
{
    struct stat st;
    void *p;
    int err;

    (void)d;
    if (x == NULL || x->kind != MC_DEV_EXPORT_FD || fd < 0 || x->size == 0 ||
        x->size > (UINT64_C(1) << 46)) {
        err = MC_ERR_INVALID;
        goto err_close;
    }
    /* the exporter is not trusted: the fd must be the memfd it says, at least as large */
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != x->buffer_id ||
        (uint64_t)st.st_size < x->size) {
        err = MC_ERR_INVALID;
        goto err_close;
    }
    p = mmap(NULL, x->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        err = mc_err_from_errno(errno);
        goto err_close;
    }
    close(fd); /* the mapping keeps the memfd */
    *base_p = (uint64_t)(uintptr_t)p;
    return 0;

err_close:
    if (fd >= 0)
        close(fd);
    return err;
}

static void tdev_unimport(struct mc_dev *d, uint64_t base, uint64_t size)
{
    (void)d;
    munmap((void *)(uintptr_t)base, size);
}

const struct mc_dev_ops mc_dev_test_ops = {
    .probe = tdev_probe,
    .open = tdev_open,
    .close = tdev_close,
    .alloc = tdev_alloc,
    .alloc_vmm = tdev_alloc_vmm,
    .free = tdev_free,
    .stream_create = tstream_create,
    .stream_destroy = tstream_destroy,
    .stream_sync = tstream_sync,
    .copy_htod = tcopy_htod,
    .copy_dtoh = tcopy_dtoh,
    .copy_dtod = tcopy_dtod,
    .event_create = tevent_create,
    .event_destroy = tevent_destroy,
    .event_record = tevent_record,
    .event_query = tevent_query,
    .ptr_query = tdev_ptr_query,
    .export_buf = tdev_export,
    .import = tdev_import,
    .unimport = tdev_unimport,
};
