/*
 * The agent's event loop: one thread waits on file descriptors, futex words and a timer
 * through one interface, and each completion runs the callback its request was armed with
 * (the io_uring user_data idea: the loop never knows what a request is for).
 *
 * Two backends keep one contract: io_uring (loop_uring.c; futex waits where the kernel has
 * IORING_OP_FUTEX_WAIT), the default, and epoll (loop_epoll.c; futex waits through
 * futex_waitv), used where io_uring is denied (a seccomp profile, kernel.io_uring_disabled)
 * or asked for. The contract:
 *   - a request is armed with a struct mc_loop_ev owned by the caller, which must stay
 *     valid until its final completion ran (the callback is told by the absence of
 *     MC_LOOP_F_MORE);
 *   - callbacks run from mc_loop_dispatch only, never inside an arming call;
 *   - res is the request's result: >= 0 (poll: the events; read/write: bytes; accept: the
 *     new fd; futex: 0) or a negative errno, -ECANCELED after mc_loop_cancel.
 * Not thread-safe: one thread owns a loop.
 */
#ifndef MC_AGENT_LOOP_H
#define MC_AGENT_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include <liburing.h>

#define MC_LOOP_F_MORE 1u /* a multishot request: more completions of it follow */

struct mc_loop_ev;
typedef void (*mc_loop_fn)(struct mc_loop_ev *ev, int res, uint32_t flags);

struct mc_loop_ev {
    mc_loop_fn fn;
};

enum mc_loop_kind {
    MC_LOOP_IO_URING, /* io_uring, or epoll when io_uring_setup fails */
    MC_LOOP_EPOLL,    /* epoll only */
};

struct mc_loop_ops;
struct mc_loop_ep;

struct mc_loop {
    const struct mc_loop_ops *ops; /* the backend in use; NULL: not initialised */
    enum mc_loop_kind kind;        /* the backend in use */
    int uring_err;                 /* why io_uring was not used (negative errno), or 0 */
    bool futex_ops;                /* the backend waits on futex words for us */
    struct io_uring ring;          /* the io_uring backend's ring */
    struct mc_loop_ep *ep;         /* the epoll backend's state */
};

/* entries: the submission queue's size (io_uring). want: MC_LOOP_IO_URING tries io_uring
 * and falls back to epoll when io_uring cannot be set up (then l->uring_err says why);
 * MC_LOOP_EPOLL uses epoll. Errors: MC_ERR_IO (neither backend), MC_ERR_NOMEM. */
int mc_loop_init(struct mc_loop *l, unsigned entries, enum mc_loop_kind want);
/* Accepts a loop that was never initialised (zeroed). */
void mc_loop_cleanup(struct mc_loop *l);
bool mc_loop_has_futex(const struct mc_loop *l);
/* "io_uring" or "epoll": the backend in use (the `loop` config key's values). */
const char *mc_loop_name(const struct mc_loop *l);

/* Arming: 0, or MC_ERR_NOMEM when the submission queue stays full. */
int mc_loop_poll(struct mc_loop *l, int fd, unsigned events, struct mc_loop_ev *ev);
int mc_loop_read(struct mc_loop *l, int fd, void *buf, unsigned len, struct mc_loop_ev *ev);
int mc_loop_write(struct mc_loop *l, int fd, const void *buf, unsigned len,
                  struct mc_loop_ev *ev);
/* Multishot: one completion per accepted connection (res: its fd, nonblocking, cloexec). */
int mc_loop_accept(struct mc_loop *l, int fd, struct mc_loop_ev *ev);
/* Completes once *word != val or after a wake (FUTEX2 u32, shared). Needs the futex ops. */
int mc_loop_futex_wait(struct mc_loop *l, uint32_t *word, uint32_t val, struct mc_loop_ev *ev);
/* Every request armed with ev completes soon, -ECANCELED unless it had completed already. */
int mc_loop_cancel(struct mc_loop *l, struct mc_loop_ev *ev);

/* Hand what is armed to the kernel, without waiting. */
void mc_loop_submit(struct mc_loop *l);
/* Submit, and wait for at least one completion, at most timeout_ns (< 0: no limit). */
void mc_loop_wait(struct mc_loop *l, int64_t timeout_ns);
/* Run the callbacks of every completion there is; returns how many ran. */
unsigned mc_loop_dispatch(struct mc_loop *l);

#endif /* MC_AGENT_LOOP_H */
