/*
 * Between the event loop's front (loop.c) and its backends (loop_uring.c, loop_epoll.c):
 * each backend fills one table of the calls loop.h forwards. Nothing else includes this.
 */
#ifndef MC_AGENT_LOOP_INT_H
#define MC_AGENT_LOOP_INT_H

#include "daemon/agent/loop.h"

struct mc_loop_ops {
    const char *name;
    void (*cleanup)(struct mc_loop *l);
    int (*poll)(struct mc_loop *l, int fd, unsigned events, struct mc_loop_ev *ev);
    int (*read)(struct mc_loop *l, int fd, void *buf, unsigned len, struct mc_loop_ev *ev);
    int (*write)(struct mc_loop *l, int fd, const void *buf, unsigned len,
                 struct mc_loop_ev *ev);
    int (*accept)(struct mc_loop *l, int fd, struct mc_loop_ev *ev);
    int (*futex_wait)(struct mc_loop *l, uint32_t *word, uint32_t val, struct mc_loop_ev *ev);
    int (*cancel)(struct mc_loop *l, struct mc_loop_ev *ev);
    void (*submit)(struct mc_loop *l);
    void (*wait)(struct mc_loop *l, int64_t timeout_ns);
    unsigned (*dispatch)(struct mc_loop *l);
};

/* Each sets l->ops and l->futex_ops on success. The io_uring one returns io_uring_setup's
 * negative errno; the epoll one an MC_ERR code. */
int mc_loop_uring_init(struct mc_loop *l, unsigned entries);
int mc_loop_epoll_init(struct mc_loop *l);

#endif /* MC_AGENT_LOOP_INT_H */
