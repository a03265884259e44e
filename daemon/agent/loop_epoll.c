/*
 * The event loop over epoll (loop.h), for hosts that deny io_uring: Docker's and
 * containerd's default seccomp profiles, kernel.io_uring_disabled.
 *
 * File descriptors. Each fd with a request armed is registered, level-triggered, for the
 * union of what its requests wait for, and taken out again when its last request ends (so
 * a hung-up fd nobody waits on wakes nothing). When epoll says the fd is ready, its
 * requests run their system call (read, write, accept4) once: readiness means it does not
 * block, and a spurious EAGAIN only leaves the request armed.
 *
 * Futex words. The loop thread sleeps in futex_waitv on every armed word plus `notify`, a
 * word of its own: a client's doorbell (the hot path) wakes it directly. A watcher thread
 * sleeps in poll(2) on the epoll fd; when that fd becomes readable it sets `fd_ready`,
 * rings `notify`, and waits until the loop thread has taken the events (epoll_wait with no
 * wait) and cleared `fd_ready`. It never touches anything else, so the loop needs no lock.
 * Without futex_waitv (before Linux 5.16, or denied) there are no futex ops and no
 * watcher: the loop waits in epoll_wait and the agent polls the rings (agent.c).
 *
 * Completions queue in arming order of their discovery and run in mc_loop_dispatch.
 */
#include "daemon/agent/loop.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "daemon/agent/loop_int.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449 /* the same number on every architecture */
#endif
#ifndef FUTEX_32
#define FUTEX_32 2 /* linux/futex.h: FUTEX2_SIZE_U32 */
#endif

#define HARVEST_MAX   64      /* epoll events taken per call; more stay ready for the next */
#define WAIT_SLICE_NS 1000000 /* more armed words than one futex_waitv takes: poll them */

enum req_op { RQ_POLL, RQ_READ, RQ_WRITE, RQ_ACCEPT, RQ_FUTEX };

struct req {
    struct req *next; /* in its fd's list, the futex list, the done queue or the free list */
    struct mc_loop_ev *ev;
    enum req_op op;
    int fd;
    uint32_t events; /* RQ_POLL: the POLL* bits asked for (the same bits as EPOLL*) */
    void *buf;       /* RQ_READ, RQ_WRITE */
    unsigned len;
    uint32_t *word; /* RQ_FUTEX */
    uint32_t val;
    int res; /* once done */
    uint32_t flags;
};

struct fdent {
    struct req *reqs;  /* armed on this fd */
    uint32_t interest; /* what epoll has been told (0: not registered) */
};

struct mc_loop_ep {
    int epfd;
    struct fdent *fds; /* indexed by fd */
    unsigned nfds;
    struct req *futexes; /* armed futex waits */
    unsigned nfutexes;
    struct req *done, **done_tail;
    struct req *free;
    struct futex_waitv waitv[FUTEX_WAITV_MAX];
    struct req *waitv_req[FUTEX_WAITV_MAX];
    /* the watcher thread */
    bool watching;
    pthread_t watcher;
    int stop_fd;
    _Atomic bool stop;
    _Atomic uint32_t notify;   /* bumped when fd_ready is set */
    _Atomic uint32_t fd_ready; /* 1: the epoll fd has events the loop has not taken */
};

static long futex_op(_Atomic uint32_t *word, int op, uint32_t val)
{
    return syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

/* --- requests ----------------------------------------------------------------------------- */

static struct req *req_new(struct mc_loop_ep *ep, enum req_op op, int fd, struct mc_loop_ev *ev)
{
    struct req *r = ep->free;

    if (r != NULL)
        ep->free = r->next;
    else if ((r = malloc(sizeof(*r))) == NULL)
        return NULL;
    memset(r, 0, sizeof(*r));
    r->op = op;
    r->fd = fd;
    r->ev = ev;
    return r;
}

static void done_push(struct mc_loop_ep *ep, struct req *r, int res, uint32_t flags)
{
    r->res = res;
    r->flags = flags;
    r->next = NULL;
    *ep->done_tail = r;
    ep->done_tail = &r->next;
}

static void req_list_free(struct req *r)
{
    while (r != NULL) {
        struct req *next = r->next;

        free(r);
        r = next;
    }
}

static uint32_t req_events(const struct req *r)
{
    switch (r->op) {
    case RQ_POLL:
        return r->events;
    case RQ_WRITE:
        return EPOLLOUT;
    default:
        return EPOLLIN;
    }
}

/* Run r's system call now that its fd reported `revents`. True: r is done (r->res set, or
 * it was queued already); false: it stays armed. */
static bool req_step(struct mc_loop_ep *ep, struct req *r, uint32_t revents)
{
    const uint32_t fail = EPOLLERR | EPOLLHUP;
    ssize_t n;

    switch (r->op) {
    case RQ_POLL:
        r->res = (int)(revents & (r->events | fail));
        return r->res != 0;
    case RQ_READ:
        if (!(revents & (EPOLLIN | EPOLLRDHUP | fail)))
            return false;
        n = read(r->fd, r->buf, r->len);
        break;
    case RQ_WRITE:
        if (!(revents & (EPOLLOUT | fail)))
            return false;
        n = write(r->fd, r->buf, r->len);
        break;
    case RQ_ACCEPT: {
        struct req *c;
        int fd;

        if (!(revents & (EPOLLIN | fail)))
            return false;
        fd = accept4(r->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
            c = req_new(ep, RQ_ACCEPT, r->fd, r->ev);
            if (c == NULL) {
                close(fd); /* the peer sees a reset; the listener stays armed */
                return false;
            }
            done_push(ep, c, fd, MC_LOOP_F_MORE);
            return false;
        }
        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
            return false;
        r->res = -errno; /* like io_uring's multishot accept: an error ends it */
        return true;
    }
    default:
        return false;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return false;
    r->res = n < 0 ? -errno : (int)n;
    return true;
}

/* --- file descriptors ------------------------------------------------------------------- */

/* Tell epoll what fd's requests wait for now. 0 or a negative errno. */
static int fd_sync(struct mc_loop_ep *ep, int fd)
{
    struct fdent *e = &ep->fds[fd];
    struct epoll_event ee = {.data.fd = fd};
    uint32_t want = 0;
    int op;

    for (const struct req *r = e->reqs; r != NULL; r = r->next)
        want |= req_events(r);
    if (want == e->interest)
        return 0;
    if (want == 0) {
        (void)epoll_ctl(ep->epfd, EPOLL_CTL_DEL, fd, NULL); /* EBADF: closed already */
        e->interest = 0;
        return 0;
    }
    ee.events = want;
    op = e->interest != 0 ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(ep->epfd, op, fd, &ee) != 0) {
        /* the fd was closed and its number reused behind our back: register afresh */
        if (errno != ENOENT && errno != EEXIST)
            return -errno;
        op = op == EPOLL_CTL_MOD ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
        if (epoll_ctl(ep->epfd, op, fd, &ee) != 0)
            return -errno;
    }
    e->interest = want;
    return 0;
}

/* Run the requests of fd after epoll reported `revents`; queue those that end. */
static void fd_run(struct mc_loop_ep *ep, int fd, uint32_t revents)
{
    struct req **pp, *r;

    if (fd < 0 || (unsigned)fd >= ep->nfds)
        return;
    pp = &ep->fds[fd].reqs;
    while ((r = *pp) != NULL) {
        if (req_step(ep, r, revents)) {
            *pp = r->next;
            done_push(ep, r, r->res, 0);
        } else {
            pp = &r->next;
        }
    }
    (void)fd_sync(ep, fd);
}

static int arm_fd(struct mc_loop *l, struct req *r)
{
    struct mc_loop_ep *ep = l->ep;
    struct fdent *e;
    int err;

    if (r->fd < 0) {
        done_push(ep, r, -EBADF, 0);
        return 0;
    }
    if ((unsigned)r->fd >= ep->nfds) {
        unsigned n = ep->nfds * 2 > (unsigned)r->fd + 1 ? ep->nfds * 2 : (unsigned)r->fd + 1;
        struct fdent *fds = realloc(ep->fds, n * sizeof(*fds));

        if (fds == NULL) {
            r->next = ep->free;
            ep->free = r;
            return MC_ERR_NOMEM;
        }
        memset(fds + ep->nfds, 0, (n - ep->nfds) * sizeof(*fds));
        ep->fds = fds;
        ep->nfds = n;
    }
    e = &ep->fds[r->fd];
    r->next = e->reqs;
    e->reqs = r;
    err = fd_sync(ep, r->fd);
    if (err == 0)
        return 0;
    e->reqs = r->next;
    /* a regular file (EPERM: epoll does not take it) is always ready, as io_uring says */
    if (err != -EPERM || !req_step(ep, r, EPOLLIN | EPOLLOUT))
        r->res = err;
    done_push(ep, r, r->res, 0);
    return 0;
}

static int arm(struct mc_loop *l, enum req_op op, int fd, struct mc_loop_ev *ev,
               struct req **r_p)
{
    *r_p = req_new(l->ep, op, fd, ev);
    return *r_p != NULL ? 0 : MC_ERR_NOMEM;
}

static int ep_poll(struct mc_loop *l, int fd, unsigned events, struct mc_loop_ev *ev)
{
    struct req *r;

    if (arm(l, RQ_POLL, fd, ev, &r) != 0)
        return MC_ERR_NOMEM;
    r->events = events;
    return arm_fd(l, r);
}

static int ep_read(struct mc_loop *l, int fd, void *buf, unsigned len, struct mc_loop_ev *ev)
{
    struct req *r;

    if (arm(l, RQ_READ, fd, ev, &r) != 0)
        return MC_ERR_NOMEM;
    r->buf = buf;
    r->len = len;
    return arm_fd(l, r);
}

static int ep_write(struct mc_loop *l, int fd, const void *buf, unsigned len,
                    struct mc_loop_ev *ev)
{
    struct req *r;

    if (arm(l, RQ_WRITE, fd, ev, &r) != 0)
        return MC_ERR_NOMEM;
    r->buf = (void *)buf; /* only written from */
    r->len = len;
    return arm_fd(l, r);
}

static int ep_accept(struct mc_loop *l, int fd, struct mc_loop_ev *ev)
{
    struct req *r;

    if (arm(l, RQ_ACCEPT, fd, ev, &r) != 0)
        return MC_ERR_NOMEM;
    return arm_fd(l, r);
}

/* --- futex words ------------------------------------------------------------------------ */

static int ep_futex_wait(struct mc_loop *l, uint32_t *word, uint32_t val, struct mc_loop_ev *ev)
{
    struct mc_loop_ep *ep = l->ep;
    struct req *r;

    if (arm(l, RQ_FUTEX, -1, ev, &r) != 0)
        return MC_ERR_NOMEM;
    r->word = word;
    r->val = val;
    r->next = ep->futexes;
    ep->futexes = r;
    ep->nfutexes++;
    return 0;
}

/* Queue the futex waits whose word moved (or `woken`, the one a wake named). */
static void futex_check(struct mc_loop_ep *ep, const struct req *woken)
{
    struct req **pp = &ep->futexes, *r;

    while ((r = *pp) != NULL) {
        if (r == woken || __atomic_load_n(r->word, __ATOMIC_ACQUIRE) != r->val) {
            *pp = r->next;
            ep->nfutexes--;
            done_push(ep, r, 0, 0);
        } else {
            pp = &r->next;
        }
    }
}

/* --- the watcher ------------------------------------------------------------------------ */

static void *watch(void *arg)
{
    struct mc_loop_ep *ep = arg;
    struct pollfd p[2] = {{.fd = ep->epfd, .events = POLLIN},
                          {.fd = ep->stop_fd, .events = POLLIN}};

    while (!atomic_load(&ep->stop)) {
        if (poll(p, 2, -1) < 0 || !(p[0].revents & POLLIN))
            continue; /* EINTR, or the stop */
        /* seq_cst: the loop reads notify, then fd_ready (ep_wait) */
        atomic_store(&ep->fd_ready, 1);
        atomic_fetch_add(&ep->notify, 1);
        futex_op(&ep->notify, FUTEX_WAKE_PRIVATE, 1);
        while (atomic_load(&ep->fd_ready) != 0 && !atomic_load(&ep->stop))
            futex_op(&ep->fd_ready, FUTEX_WAIT_PRIVATE, 1);
    }
    return NULL;
}

static int watcher_start(struct mc_loop_ep *ep)
{
    sigset_t all, old;
    int err;

    ep->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ep->stop_fd < 0)
        return MC_ERR_IO;
    /* the watcher takes no signal: the agent reads them from its signalfd */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_create(&ep->watcher, NULL, watch, ep);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0)
        return MC_ERR_NOMEM;
    ep->watching = true;
    return 0;
}

static void watcher_stop(struct mc_loop_ep *ep)
{
    uint64_t one = 1;

    if (ep->watching) {
        atomic_store(&ep->stop, true);
        (void)write(ep->stop_fd, &one, sizeof(one));
        atomic_store(&ep->fd_ready, 0);
        futex_op(&ep->fd_ready, FUTEX_WAKE_PRIVATE, 1);
        pthread_join(ep->watcher, NULL);
        ep->watching = false;
    }
}

/* --- waiting and dispatching ------------------------------------------------------------ */

/* Take up to HARVEST_MAX ready fds, waiting at most timeout_ms (0: not at all). */
static void harvest_fds(struct mc_loop_ep *ep, int timeout_ms)
{
    struct epoll_event evs[HARVEST_MAX];
    int n = epoll_wait(ep->epfd, evs, HARVEST_MAX, timeout_ms);

    for (int i = 0; i < n; i++)
        fd_run(ep, evs[i].data.fd, evs[i].events);
}

static void harvest(struct mc_loop *l)
{
    struct mc_loop_ep *ep = l->ep;

    if (!ep->watching) {
        harvest_fds(ep, 0);
    } else if (atomic_load(&ep->fd_ready) != 0) {
        harvest_fds(ep, 0);
        atomic_store(&ep->fd_ready, 0); /* the watcher polls again */
        futex_op(&ep->fd_ready, FUTEX_WAKE_PRIVATE, 1);
    }
    if (ep->futexes != NULL)
        futex_check(ep, NULL);
}

static void ep_submit(struct mc_loop *l)
{
    (void)l; /* arming told epoll already */
}

static void ep_wait(struct mc_loop *l, int64_t timeout_ns)
{
    struct mc_loop_ep *ep = l->ep;
    struct timespec ts;
    unsigned n = 1;
    uint32_t nv;
    long rc;

    if (ep->done != NULL)
        return;
    if (!l->futex_ops) {
        harvest_fds(ep, timeout_ns < 0 ? -1 : (int)((timeout_ns + 999999) / 1000000));
        return;
    }
    nv = atomic_load(&ep->notify);
    if (atomic_load(&ep->fd_ready) != 0)
        return; /* events to take (a later watcher ring moves notify past nv) */
    ep->waitv[0] = (struct futex_waitv){
        .val = nv, .uaddr = (uintptr_t)&ep->notify, .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG};
    for (struct req *r = ep->futexes; r != NULL && n < FUTEX_WAITV_MAX; r = r->next) {
        ep->waitv[n] =
            (struct futex_waitv){.val = r->val, .uaddr = (uintptr_t)r->word, .flags = FUTEX_32};
        ep->waitv_req[n++] = r;
    }
    if (ep->nfutexes >= FUTEX_WAITV_MAX && (timeout_ns < 0 || timeout_ns > WAIT_SLICE_NS))
        timeout_ns = WAIT_SLICE_NS; /* the words left out are looked at every slice */
    if (timeout_ns >= 0) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += timeout_ns / 1000000000;
        ts.tv_nsec += timeout_ns % 1000000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
    }
    /* EAGAIN (a word had moved), ETIMEDOUT, EINTR: the dispatch looks at every word */
    rc = syscall(SYS_futex_waitv, ep->waitv, n, 0, timeout_ns >= 0 ? &ts : NULL,
                 CLOCK_MONOTONIC);
    if (rc >= 1 && (unsigned long)rc < n)
        futex_check(ep, ep->waitv_req[rc]);
}

static unsigned ep_dispatch(struct mc_loop *l)
{
    struct mc_loop_ep *ep = l->ep;
    struct req *r, *list;
    unsigned n = 0;

    harvest(l);
    /* what callbacks queue (cancels) runs in the next dispatch */
    list = ep->done;
    ep->done = NULL;
    ep->done_tail = &ep->done;
    while ((r = list) != NULL) {
        struct mc_loop_ev *ev = r->ev;
        int res = r->res;
        uint32_t flags = r->flags;

        list = r->next;
        r->next = ep->free;
        ep->free = r;
        n++;
        ev->fn(ev, res, flags);
    }
    return n;
}

static int ep_cancel(struct mc_loop *l, struct mc_loop_ev *ev)
{
    struct mc_loop_ep *ep = l->ep;
    struct req **pp, *r;

    for (unsigned fd = 0; fd < ep->nfds; fd++) {
        bool hit = false;

        for (pp = &ep->fds[fd].reqs; (r = *pp) != NULL;) {
            if (r->ev == ev) {
                *pp = r->next;
                done_push(ep, r, -ECANCELED, 0);
                hit = true;
            } else {
                pp = &r->next;
            }
        }
        if (hit)
            (void)fd_sync(ep, (int)fd);
    }
    for (pp = &ep->futexes; (r = *pp) != NULL;) {
        if (r->ev == ev) {
            *pp = r->next;
            ep->nfutexes--;
            done_push(ep, r, -ECANCELED, 0);
        } else {
            pp = &r->next;
        }
    }
    return 0;
}

/* --- start and end ---------------------------------------------------------------------- */

static void ep_cleanup(struct mc_loop *l)
{
    struct mc_loop_ep *ep = l->ep;

    if (ep == NULL)
        return;
    watcher_stop(ep);
    if (ep->epfd >= 0)
        close(ep->epfd);
    if (ep->stop_fd >= 0)
        close(ep->stop_fd);
    for (unsigned fd = 0; fd < ep->nfds; fd++)
        req_list_free(ep->fds[fd].reqs);
    free(ep->fds);
    req_list_free(ep->futexes);
    req_list_free(ep->done);
    req_list_free(ep->free);
    free(ep);
    l->ep = NULL;
}

static const struct mc_loop_ops epoll_ops = {
    .name = "epoll",
    .cleanup = ep_cleanup,
    .poll = ep_poll,
    .read = ep_read,
    .write = ep_write,
    .accept = ep_accept,
    .futex_wait = ep_futex_wait,
    .cancel = ep_cancel,
    .submit = ep_submit,
    .wait = ep_wait,
    .dispatch = ep_dispatch,
};

int mc_loop_epoll_init(struct mc_loop *l)
{
    struct mc_loop_ep *ep = calloc(1, sizeof(*ep));
    int err;

    if (ep == NULL)
        return MC_ERR_NOMEM;
    l->ep = ep;
    l->ops = &epoll_ops;
    ep->stop_fd = -1;
    ep->done_tail = &ep->done;
    ep->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (ep->epfd < 0) {
        ep_cleanup(l);
        return MC_ERR_IO;
    }
    /* futex_waitv exists when it refuses an empty vector (EINVAL); ENOSYS before Linux
     * 5.16, EPERM where a seccomp profile denies it */
    if (syscall(SYS_futex_waitv, NULL, 0, 0, NULL, 0) < 0 && errno == EINVAL) {
        err = watcher_start(ep);
        if (err != 0) {
            ep_cleanup(l);
            return err;
        }
        l->futex_ops = true;
    }
    return 0;
}
