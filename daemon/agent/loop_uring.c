/*
 * The event loop over io_uring (loop.h). Requests carry their struct mc_loop_ev pointer as
 * user_data; 0 names a request nobody waits for (the cancels themselves).
 */
#include "daemon/agent/loop.h"

#include <errno.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/socket.h>

#include <mc/mc_status.h>

#include "daemon/agent/loop_int.h"

#define OP_FUTEX_WAIT 51   /* IORING_OP_FUTEX_WAIT: liburing 2.3 has neither name nor helper */
#define OP_FUTEX_WAKE 52   /* probed with WAIT: the kernel has both or neither */
#define FUTEX2_U32    0x02 /* FUTEX2_SIZE_U32; not FUTEX2_PRIVATE: the word is shared */

static const struct mc_loop_ops uring_ops;

int mc_loop_uring_init(struct mc_loop *l, unsigned entries)
{
    struct io_uring_probe *probe;
    int err;

    err = io_uring_queue_init(entries, &l->ring, 0);
    if (err < 0)
        return err;
    l->ops = &uring_ops;
    probe = io_uring_get_probe_ring(&l->ring);
    l->futex_ops = probe != NULL && io_uring_opcode_supported(probe, OP_FUTEX_WAIT) &&
                   io_uring_opcode_supported(probe, OP_FUTEX_WAKE);
    io_uring_free_probe(probe);
    return 0;
}

static void uring_cleanup(struct mc_loop *l)
{
    io_uring_queue_exit(&l->ring);
}

static struct io_uring_sqe *sqe_get(struct mc_loop *l)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);

    if (sqe == NULL) {
        io_uring_submit(&l->ring); /* make room: the ring is full of unsubmitted entries */
        sqe = io_uring_get_sqe(&l->ring);
    }
    return sqe;
}

static int uring_poll(struct mc_loop *l, int fd, unsigned events, struct mc_loop_ev *ev)
{
    struct io_uring_sqe *sqe = sqe_get(l);

    if (sqe == NULL)
        return MC_ERR_NOMEM;
    io_uring_prep_poll_add(sqe, fd, events);
    io_uring_sqe_set_data(sqe, ev);
    return 0;
}

static int uring_read(struct mc_loop *l, int fd, void *buf, unsigned len, struct mc_loop_ev *ev)
{
    struct io_uring_sqe *sqe = sqe_get(l);

    if (sqe == NULL)
        return MC_ERR_NOMEM;
    io_uring_prep_read(sqe, fd, buf, len, 0);
    io_uring_sqe_set_data(sqe, ev);
    return 0;
}

static int uring_write(struct mc_loop *l, int fd, const void *buf, unsigned len,
                       struct mc_loop_ev *ev)
{
    struct io_uring_sqe *sqe = sqe_get(l);

    if (sqe == NULL)
        return MC_ERR_NOMEM;
    io_uring_prep_write(sqe, fd, buf, len, 0);
    io_uring_sqe_set_data(sqe, ev);
    return 0;
}

static int uring_accept(struct mc_loop *l, int fd, struct mc_loop_ev *ev)
{
    struct io_uring_sqe *sqe = sqe_get(l);

    if (sqe == NULL)
        return MC_ERR_NOMEM;
    io_uring_prep_multishot_accept(sqe, fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    io_uring_sqe_set_data(sqe, ev);
    return 0;
}

static int uring_futex_wait(struct mc_loop *l, uint32_t *word, uint32_t val,
                            struct mc_loop_ev *ev)
{
    struct io_uring_sqe *sqe = sqe_get(l);

    if (sqe == NULL)
        return MC_ERR_NOMEM;
    /* a bump after `val` was read makes the wait return at once: nothing is lost */
    io_uring_prep_rw(OP_FUTEX_WAIT, sqe, FUTEX2_U32, word, 0, val);
    sqe->addr3 = FUTEX_BITSET_MATCH_ANY;
    io_uring_sqe_set_data(sqe, ev);
    return 0;
}

static int uring_cancel(struct mc_loop *l, struct mc_loop_ev *ev)
{
    struct io_uring_sqe *sqe = sqe_get(l);

    if (sqe == NULL)
        return MC_ERR_NOMEM;
    io_uring_prep_cancel(sqe, ev, IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data(sqe, NULL);
    return 0;
}

static void uring_submit(struct mc_loop *l)
{
    io_uring_submit(&l->ring);
}

static void uring_wait(struct mc_loop *l, int64_t timeout_ns)
{
    struct io_uring_cqe *cqe;

    if (timeout_ns < 0) {
        io_uring_submit_and_wait(&l->ring, 1);
    } else {
        struct __kernel_timespec ts = {.tv_sec = timeout_ns / 1000000000,
                                       .tv_nsec = timeout_ns % 1000000000};

        io_uring_submit_and_wait_timeout(&l->ring, &cqe, 1, &ts, NULL);
    }
}

static unsigned uring_dispatch(struct mc_loop *l)
{
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;

    io_uring_for_each_cqe(&l->ring, head, cqe)
    {
        struct mc_loop_ev *ev = io_uring_cqe_get_data(cqe);

        /* seen before the callback: it may arm requests, and they must not be lost */
        n++;
        if (ev != NULL)
            ev->fn(ev, cqe->res, (cqe->flags & IORING_CQE_F_MORE) ? MC_LOOP_F_MORE : 0);
    }
    io_uring_cq_advance(&l->ring, n);
    return n;
}

static const struct mc_loop_ops uring_ops = {
    .name = "io_uring",
    .cleanup = uring_cleanup,
    .poll = uring_poll,
    .read = uring_read,
    .write = uring_write,
    .accept = uring_accept,
    .futex_wait = uring_futex_wait,
    .cancel = uring_cancel,
    .submit = uring_submit,
    .wait = uring_wait,
    .dispatch = uring_dispatch,
};
