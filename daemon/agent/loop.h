/*
 * The agent's event loop: one thread waits on file descriptors, futex words and a timer
 * through one interface, and each completion runs the callback its request was armed with
 * (the io_uring user_data idea: the loop never knows what a request is for).
 *
 * The backend today is io_uring (futex waits included where the kernel has
 * IORING_OP_FUTEX_WAIT); a second backend only has to keep this contract:
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

struct mc_loop {
    struct io_uring ring;
    bool ready;
    bool futex_ops; /* the kernel waits on futex words for us */
};

/* entries: the submission queue's size. Errors: MC_ERR_IO (no io_uring here), MC_ERR_NOMEM. */
int mc_loop_init(struct mc_loop *l, unsigned entries);
/* Accepts a loop that was never initialised (zeroed). */
void mc_loop_cleanup(struct mc_loop *l);
bool mc_loop_has_futex(const struct mc_loop *l);

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
