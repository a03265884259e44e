/*
 * The disk tier's I/O engines (disk_io.h): io_uring and a pread/pwrite thread pool.
 */
#include "daemon/agent/disk_io.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <liburing.h>

#include <mc/mc_status.h>

#include "common/err.h"
#include "daemon/common/log.h"

struct mc_disk_io {
    bool uring;
    int fd;
    int efd;
    unsigned queued;   /* requests submitted and not yet completed (all states) */
    /* the owner's queue of requests not yet handed on */
    struct mc_disk_io_req *q_head, *q_tail;

    /* io_uring */
    struct io_uring ring;
    bool ring_up, bufs_registered;
    unsigned depth, inflight;

    /* threads */
    pthread_t *workers;
    unsigned nworkers;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    unsigned busy; /* requests the workers hold */
    struct mc_disk_io_req *w_head, *w_tail;   /* handed to the workers */
    struct mc_disk_io_req *d_head, *d_tail;   /* finished, for the owner */
};

static void list_push(struct mc_disk_io_req **h, struct mc_disk_io_req **t,
                      struct mc_disk_io_req *r)
{
    r->next = NULL;
    if (*t != NULL)
        (*t)->next = r;
    else
        *h = r;
    *t = r;
}

static struct mc_disk_io_req *list_pop(struct mc_disk_io_req **h, struct mc_disk_io_req **t)
{
    struct mc_disk_io_req *r = *h;

    if (r != NULL) {
        *h = r->next;
        if (*h == NULL)
            *t = NULL;
        r->next = NULL;
    }
    return r;
}

/* errno of a failed read/write as the contract's codes */
static int io_err(int e)
{
    if (e == ENOSPC || e == EDQUOT)
        return MC_ERR_NO_SPACE;
    if (e == EIO)
        return MC_ERR_IO;
    return mc_err_from_errno(e);
}

static void efd_signal(int efd)
{
    uint64_t one = 1;

    /* a full counter (never, at 2^64 - 1) or EINTR: the owner reaps on its next wake */
    while (write(efd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
}

static void efd_drain(int efd)
{
    uint64_t v;

    while (read(efd, &v, sizeof(v)) < 0 && errno == EINTR)
        ;
}

/* ---- threads ---- */

/* the whole request, retrying short transfers: 0 or an MC_ERR code */
static int do_rw(int fd, struct mc_disk_io_req *r)
{
    while (r->moved < r->len) {
        ssize_t n;

        if (r->write)
            n = pwrite(fd, r->buf + r->moved, r->len - r->moved, (off_t)(r->off + r->moved));
        else
            n = pread(fd, r->buf + r->moved, r->len - r->moved, (off_t)(r->off + r->moved));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return io_err(errno);
        }
        if (n == 0)
            return r->write ? MC_ERR_NO_SPACE : MC_ERR_IO; /* the file ended */
        r->moved += (uint32_t)n;
    }
    return 0;
}

static void *worker_main(void *arg)
{
    struct mc_disk_io *io = arg;

    pthread_mutex_lock(&io->mu);
    for (;;) {
        struct mc_disk_io_req *r;

        while (!io->stop && io->w_head == NULL)
            pthread_cond_wait(&io->cv, &io->mu);
        if (io->stop)
            break;
        r = list_pop(&io->w_head, &io->w_tail);
        io->busy++;
        pthread_mutex_unlock(&io->mu);
        r->res = do_rw(io->fd, r);
        pthread_mutex_lock(&io->mu);
        io->busy--;
        list_push(&io->d_head, &io->d_tail, r);
        efd_signal(io->efd);
        if (io->busy == 0)
            pthread_cond_broadcast(&io->cv); /* destroy may wait for busy to reach 0 */
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

static void threads_flush(struct mc_disk_io *io)
{
    struct mc_disk_io_req *r;
    unsigned n = 0;

    if (io->q_head == NULL)
        return;
    pthread_mutex_lock(&io->mu);
    while ((r = list_pop(&io->q_head, &io->q_tail)) != NULL) {
        list_push(&io->w_head, &io->w_tail, r);
        n++;
    }
    /* one wake per request (a worker that finds the list empty sleeps again), not a
     * broadcast that wakes every worker for one request */
    if (n >= io->nworkers)
        pthread_cond_broadcast(&io->cv);
    else
        while (n-- > 0)
            pthread_cond_signal(&io->cv);
    pthread_mutex_unlock(&io->mu);
}

static unsigned threads_reap(struct mc_disk_io *io)
{
    struct mc_disk_io_req *list, *r;
    unsigned n = 0;

    pthread_mutex_lock(&io->mu);
    list = io->d_head;
    io->d_head = io->d_tail = NULL;
    pthread_mutex_unlock(&io->mu);
    while ((r = list) != NULL) {
        list = r->next;
        r->next = NULL;
        io->queued--;
        r->done(r, r->res);
        n++;
    }
    return n;
}

static int threads_start(struct mc_disk_io *io, unsigned n)
{
    int err;

    if (pthread_mutex_init(&io->mu, NULL) != 0)
        return MC_ERR_NOMEM;
    if (pthread_cond_init(&io->cv, NULL) != 0) {
        pthread_mutex_destroy(&io->mu);
        return MC_ERR_NOMEM;
    }
    io->workers = calloc(n, sizeof(*io->workers));
    if (io->workers == NULL)
        return MC_ERR_NOMEM;
    for (unsigned i = 0; i < n; i++) {
        err = pthread_create(&io->workers[i], NULL, worker_main, io);
        if (err != 0) {
            mc_error("disk: worker thread: %s", strerror(err));
            return MC_ERR_NOMEM;
        }
        io->nworkers++;
    }
    return 0;
}

static void threads_stop(struct mc_disk_io *io)
{
    if (io->workers == NULL)
        return;
    pthread_mutex_lock(&io->mu);
    /* the requests a worker holds finish (their buffers are the caller's until then) */
    while (io->busy > 0)
        pthread_cond_wait(&io->cv, &io->mu);
    io->stop = true;
    pthread_cond_broadcast(&io->cv);
    pthread_mutex_unlock(&io->mu);
    for (unsigned i = 0; i < io->nworkers; i++)
        pthread_join(io->workers[i], NULL);
    free(io->workers);
    io->workers = NULL;
    pthread_cond_destroy(&io->cv);
    pthread_mutex_destroy(&io->mu);
}

/* ---- io_uring ---- */

static void uring_prep(struct mc_disk_io *io, struct io_uring_sqe *sqe, struct mc_disk_io_req *r)
{
    uint8_t *buf = r->buf + r->moved;
    unsigned len = r->len - r->moved;
    uint64_t off = r->off + r->moved;

    if (r->buf_index >= 0 && io->bufs_registered) {
        if (r->write)
            io_uring_prep_write_fixed(sqe, io->fd, buf, len, off, r->buf_index);
        else
            io_uring_prep_read_fixed(sqe, io->fd, buf, len, off, r->buf_index);
    } else if (r->write) {
        io_uring_prep_write(sqe, io->fd, buf, len, off);
    } else {
        io_uring_prep_read(sqe, io->fd, buf, len, off);
    }
    io_uring_sqe_set_data(sqe, r);
}

static void uring_flush(struct mc_disk_io *io)
{
    bool any = false;

    while (io->inflight < io->depth && io->q_head != NULL) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);

        if (sqe == NULL)
            break;
        uring_prep(io, sqe, list_pop(&io->q_head, &io->q_tail));
        io->inflight++;
        any = true;
    }
    if (any) {
        int rc;

        /* -EAGAIN/-EBUSY: the kernel is short of resources right now; the SQEs stay in the
         * ring and go with the next submit (every reap submits) */
        do
            rc = io_uring_submit(&io->ring);
        while (rc == -EINTR);
        if (rc < 0 && rc != -EAGAIN && rc != -EBUSY)
            mc_warn("disk: io_uring_submit: %s", strerror(-rc));
    }
}

static unsigned uring_reap(struct mc_disk_io *io)
{
    struct io_uring_cqe *cqe;
    unsigned n = 0;

    /* drained before the CQ is read: a completion posted after this read signals again */
    efd_drain(io->efd);
    while (io_uring_peek_cqe(&io->ring, &cqe) == 0) {
        struct mc_disk_io_req *r = io_uring_cqe_get_data(cqe);
        int res = cqe->res;

        io_uring_cqe_seen(&io->ring, cqe);
        io->inflight--;
        if (res == -EAGAIN || res == -EINTR) {
            list_push(&io->q_head, &io->q_tail, r); /* again, as it was */
            continue;
        }
        if (res < 0) {
            r->res = io_err(-res);
        } else if (res == 0) {
            r->res = r->write ? MC_ERR_NO_SPACE : MC_ERR_IO;
        } else {
            r->moved += (uint32_t)res;
            if (r->moved < r->len) {
                list_push(&io->q_head, &io->q_tail, r); /* a short transfer: the rest */
                continue;
            }
            r->res = 0;
        }
        io->queued--;
        r->done(r, r->res);
        n++;
    }
    return n;
}

static int uring_start(struct mc_disk_io *io, const struct mc_disk_io_cfg *cfg)
{
    unsigned entries = cfg->depth < 8 ? 8 : cfg->depth;
    int rc;

    rc = io_uring_queue_init(entries, &io->ring, 0);
    if (rc < 0)
        return rc;
    io->ring_up = true;
    io->depth = cfg->depth;
    rc = io_uring_register_eventfd(&io->ring, io->efd);
    if (rc < 0)
        return rc;
    if (cfg->nbufs > 0) {
        /* registered buffers save the per-I/O page pinning; refused (RLIMIT_MEMLOCK on old
         * kernels): plain reads and writes of the same buffers */
        rc = io_uring_register_buffers(&io->ring, cfg->bufs, cfg->nbufs);
        if (rc == 0)
            io->bufs_registered = true;
        else
            mc_warn("disk: io_uring_register_buffers: %s; unregistered buffers",
                    strerror(-rc));
    }
    return 0;
}

/* ---- the contract ---- */

int mc_disk_io_create(const struct mc_disk_io_cfg *cfg, struct mc_disk_io **io_p,
                      int *uring_err_p)
{
    struct mc_disk_io *io;
    bool try_uring;
    int err, uerr = 0;

    if (cfg->depth == 0 || cfg->threads == 0 ||
        (cfg->want == MC_DISK_ENGINE_URING && !cfg->direct))
        return MC_ERR_INVALID;
    io = calloc(1, sizeof(*io));
    if (io == NULL)
        return MC_ERR_NOMEM;
    io->fd = cfg->fd;
    io->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (io->efd < 0) {
        err = mc_err_from_errno(errno);
        free(io);
        return err;
    }
    try_uring = cfg->want == MC_DISK_ENGINE_URING ||
                (cfg->want == MC_DISK_ENGINE_AUTO && cfg->direct);
    if (try_uring) {
        uerr = uring_start(io, cfg);
        if (uerr == 0) {
            io->uring = true;
        } else {
            if (io->ring_up)
                io_uring_queue_exit(&io->ring);
            io->ring_up = false;
            if (cfg->want == MC_DISK_ENGINE_URING) {
                mc_error("disk: io_uring: %s", strerror(-uerr));
                err = MC_ERR_IO;
                goto err_close;
            }
            mc_info("disk: io_uring unavailable (%s): pread/pwrite workers", strerror(-uerr));
        }
    }
    if (!io->uring) {
        err = threads_start(io, cfg->threads);
        if (err != 0)
            goto err_threads;
    }
    if (uring_err_p != NULL)
        *uring_err_p = uerr;
    *io_p = io;
    return 0;

err_threads:
    threads_stop(io);
err_close:
    close(io->efd);
    free(io);
    if (uring_err_p != NULL)
        *uring_err_p = uerr;
    return err;
}

void mc_disk_io_destroy(struct mc_disk_io *io)
{
    if (io == NULL)
        return;
    if (io->uring) {
        /* memory the kernel may still write is not freed under it */
        while (io->inflight > 0) {
            struct io_uring_cqe *cqe;

            if (io_uring_wait_cqe(&io->ring, &cqe) < 0)
                break;
            io_uring_cqe_seen(&io->ring, cqe);
            io->inflight--;
        }
        io_uring_queue_exit(&io->ring);
    } else {
        threads_stop(io);
    }
    close(io->efd);
    free(io);
}

int mc_disk_io_register(struct mc_disk_io *io, const struct iovec *bufs, unsigned nbufs)
{
    int rc;

    if (!io->uring)
        return 0;
    if (io->inflight > 0 || io->q_head != NULL)
        return MC_ERR_INVALID;
    if (io->bufs_registered) {
        rc = io_uring_unregister_buffers(&io->ring);
        if (rc < 0)
            return MC_ERR_INVALID;
        io->bufs_registered = false;
    }
    if (nbufs == 0)
        return 0;
    rc = io_uring_register_buffers(&io->ring, bufs, nbufs);
    if (rc < 0)
        return rc == -ENOMEM || rc == -EFAULT ? MC_ERR_NOMEM : MC_ERR_INVALID;
    io->bufs_registered = true;
    return 0;
}

bool mc_disk_io_fixed(const struct mc_disk_io *io)
{
    return io->uring && io->bufs_registered;
}

const char *mc_disk_io_engine(const struct mc_disk_io *io)
{
    return io->uring ? "io_uring" : "threads";
}

void mc_disk_io_submit(struct mc_disk_io *io, struct mc_disk_io_req *r)
{
    r->moved = 0;
    r->res = 0;
    io->queued++;
    list_push(&io->q_head, &io->q_tail, r);
}

void mc_disk_io_flush(struct mc_disk_io *io)
{
    if (io->uring)
        uring_flush(io);
    else
        threads_flush(io);
}

int mc_disk_io_fd(const struct mc_disk_io *io)
{
    return io->efd;
}

unsigned mc_disk_io_reap(struct mc_disk_io *io)
{
    unsigned n;

    if (io->uring) {
        n = uring_reap(io);
    } else {
        efd_drain(io->efd);
        n = threads_reap(io);
    }
    mc_disk_io_flush(io);
    return n;
}

void mc_disk_io_wait(struct mc_disk_io *io)
{
    struct pollfd p = {.fd = io->efd, .events = POLLIN};

    mc_disk_io_flush(io);
    while (poll(&p, 1, -1) < 0 && errno == EINTR)
        ;
}

unsigned mc_disk_io_pending(const struct mc_disk_io *io)
{
    return io->queued;
}
