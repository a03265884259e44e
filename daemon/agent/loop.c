/*
 * The event loop's front (loop.h): picks the backend at start and forwards every call to
 * its table (loop_int.h).
 */
#include "daemon/agent/loop.h"

#include <string.h>

#include <mc/mc_status.h>

#include "daemon/agent/loop_int.h"

int mc_loop_init(struct mc_loop *l, unsigned entries, enum mc_loop_kind want)
{
    int err;

    memset(l, 0, sizeof(*l));
    if (want == MC_LOOP_IO_URING) {
        /* any refusal falls back: EPERM (seccomp, io_uring_disabled), ENOSYS (not built
         * in), ENOMEM (locked-memory limits of older kernels) */
        err = mc_loop_uring_init(l, entries);
        if (err == 0) {
            l->kind = MC_LOOP_IO_URING;
            return 0;
        }
        memset(l, 0, sizeof(*l));
        l->uring_err = err;
    }
    err = mc_loop_epoll_init(l);
    if (err != 0) {
        l->ops = NULL;
        return err;
    }
    l->kind = MC_LOOP_EPOLL;
    return 0;
}

void mc_loop_cleanup(struct mc_loop *l)
{
    if (l->ops != NULL)
        l->ops->cleanup(l);
    l->ops = NULL;
}

bool mc_loop_has_futex(const struct mc_loop *l)
{
    return l->futex_ops;
}

const char *mc_loop_name(const struct mc_loop *l)
{
    return l->ops != NULL ? l->ops->name : "none";
}

int mc_loop_poll(struct mc_loop *l, int fd, unsigned events, struct mc_loop_ev *ev)
{
    return l->ops->poll(l, fd, events, ev);
}

int mc_loop_read(struct mc_loop *l, int fd, void *buf, unsigned len, struct mc_loop_ev *ev)
{
    return l->ops->read(l, fd, buf, len, ev);
}

int mc_loop_write(struct mc_loop *l, int fd, const void *buf, unsigned len,
                  struct mc_loop_ev *ev)
{
    return l->ops->write(l, fd, buf, len, ev);
}

int mc_loop_accept(struct mc_loop *l, int fd, struct mc_loop_ev *ev)
{
    return l->ops->accept(l, fd, ev);
}

int mc_loop_futex_wait(struct mc_loop *l, uint32_t *word, uint32_t val, struct mc_loop_ev *ev)
{
    if (!l->futex_ops)
        return MC_ERR_INVALID;
    return l->ops->futex_wait(l, word, val, ev);
}

int mc_loop_cancel(struct mc_loop *l, struct mc_loop_ev *ev)
{
    return l->ops->cancel(l, ev);
}

void mc_loop_submit(struct mc_loop *l)
{
    l->ops->submit(l);
}

void mc_loop_wait(struct mc_loop *l, int64_t timeout_ns)
{
    l->ops->wait(l, timeout_ns);
}

unsigned mc_loop_dispatch(struct mc_loop *l)
{
    return l->ops->dispatch(l);
}
