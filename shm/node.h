/*
 * The node page: one page the agent creates at start and hands to every client with its
 * welcome (the fd after the segments' fds), mapped read-write by all of them. It holds what
 * decides whether a waiter may poll (spin) instead of sleeping on its doorbell, node-wide
 * rather than per process (docs/decisions.md, "Adaptive waiting"):
 *
 *   - spinners: the clients polling a CQ right now. A client polls only when it is admitted
 *     as one of at most cores - 1 (the agent has the remaining core): more pollers than
 *     cores only delay the agent they wait for.
 *   - busy: written by the agent, 1 while the host is oversubscribed (its own run delay,
 *     /proc/thread-self/schedstat, says it waits for a CPU): then nobody polls, the agent
 *     included, and every round trip sleeps on its doorbell; 0 again once the host is quiet.
 *
 * Every party may write it, so it is a hint and never trusted: a wrong value costs speed,
 * not correctness (the doorbells work whatever it says). The agent repairs a count that a
 * client killed while polling left behind.
 */
#ifndef MC_SHM_NODE_H
#define MC_SHM_NODE_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define MC_SHM_NODE_MAGIC UINT64_C(0x65646f6e2d636d) /* "mc-node" */
#define MC_SHM_NODE_SIZE 4096u

struct mc_shm_node {
    uint64_t magic;            /* MC_SHM_NODE_MAGIC */
    _Atomic uint32_t cores;    /* agent: online CPUs */
    _Atomic uint32_t busy;     /* agent: 1 while the host is oversubscribed */
    _Alignas(64) _Atomic uint32_t spinners; /* clients polling a CQ now */
};

static_assert(sizeof(struct mc_shm_node) <= MC_SHM_NODE_SIZE, "node page");

/* A client about to poll: true when it may (then call mc_shm_node_spin_end after); false
 * when the host is busy or cores - 1 clients poll already. */
static inline bool mc_shm_node_spin_begin(struct mc_shm_node *n)
{
    uint32_t cores = atomic_load_explicit(&n->cores, memory_order_relaxed);

    if (atomic_load_explicit(&n->busy, memory_order_relaxed) != 0 || cores < 2)
        return false;
    if (atomic_fetch_add_explicit(&n->spinners, 1, memory_order_relaxed) < cores - 1)
        return true;
    atomic_fetch_sub_explicit(&n->spinners, 1, memory_order_relaxed);
    return false;
}

/* Never below 0: the agent may have taken this count back already (it cut the client off
 * while it polled). */
static inline void mc_shm_node_spin_end(struct mc_shm_node *n)
{
    uint32_t v = atomic_load_explicit(&n->spinners, memory_order_relaxed);

    while (v > 0 && !atomic_compare_exchange_weak_explicit(&n->spinners, &v, v - 1,
                                                           memory_order_relaxed,
                                                           memory_order_relaxed))
        ;
}

#endif /* MC_SHM_NODE_H */
