/*
 * Adaptive waiting, the agent's half (shm/node.h is the page it shares with its clients):
 * whether the agent polls its clients' rings after work, and clients their CQs, or every
 * round trip sleeps on a doorbell. Measured, not guessed: the loop counts the requests it
 * takes in windows of 10 ms and, from time to time, runs the other mode for a few windows
 * (a probe); the mode that took more requests per window stays (a probe taking under half
 * as many ends after one window). A probe that loses makes
 * the next one wait twice as long (up to 5 s), so a steady host pays about 1 % of its time
 * for the probes. Two hints from the host start a probe at once: in polling mode, a window
 * in which the loop waited for a CPU more than half the time (its run delay,
 * /proc/thread-self/schedstat: the host is oversubscribed) and took fewer than half the
 * requests of the mode's average (polling stopped paying); in sleeping mode, 8 windows in
 * a row that waited less than 5 % (the host went quiet). Without requests to compare, the
 * hints decide alone. It starts sleeping. Figures and the rule: docs/decisions.md,
 * "Adaptive waiting".
 */
#ifndef MC_AGENT_SPIN_H
#define MC_AGENT_SPIN_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/node.h"

struct agent_spin {
    struct mc_shm_node *node; /* the page clients map (NULL: none could be made) */
    int fd;                   /* its memfd, handed to each client (-1: none) */
    int stat_fd;              /* /proc/thread-self/schedstat of the loop thread (-1: none) */
    uint32_t cores;           /* online CPUs, as written in the page */
    uint64_t win_start_ns;    /* the window being measured: when it began, */
    uint64_t win_delay_ns;    /* the run delay then, */
    uint64_t win_ops;         /* and the requests taken then */
    uint64_t tally_ops;       /* requests in the current mode's windows so far */
    uint32_t tally_windows;
    uint32_t phase_windows;   /* windows since the mode last changed or was confirmed */
    uint32_t exploit_windows; /* ... before the next probe */
    uint32_t quiet_windows;   /* sleeping: low run delay windows in a row */
    bool probing;             /* the other mode is on trial */
    bool probe_settling;      /* its first window is not counted (the switch) */
    uint64_t probe_ops;
    uint32_t probe_windows;
    uint64_t probes, switches; /* for the stats */
};

/* Creates the page (cores: online CPUs) and, when adaptive, opens the run-delay counter on
 * the calling thread, which must be the loop's, and starts in sleeping mode. Not adaptive
 * (adaptive_wait=false), or when this fails, the node is never busy: everyone polls as
 * configured (without a page, clients count pollers in their own process); the error is
 * for a warning. */
int agent_spin_init(struct agent_spin *s, bool adaptive);
void agent_spin_cleanup(struct agent_spin *s);
/* Each loop turn, with the time and the requests taken so far: ends a window when one has
 * passed. */
void agent_spin_sample(struct agent_spin *s, uint64_t now_ns, uint64_t ops);
/* true: sleeping mode (the node page's busy). */
bool agent_spin_busy(const struct agent_spin *s);
/* The verdict of agent_spin_sample, given the time, the run delay and the requests so far
 * (the tests feed it). */
void agent_spin_window(struct agent_spin *s, uint64_t now_ns, uint64_t delay_ns, uint64_t ops);
/* A client's region goes: if it was polling (its CQ's consumer_spinning), its count in the
 * page goes too (a client killed while polling never takes it back). */
void agent_spin_client_gone(struct agent_spin *s, bool was_polling);
/* Each tick: polling clients right now (consumer_spinning) and clients; a count in the page
 * above every client is a leftover or a hostile write: set it to `polling`. The magic and
 * the core count are written again (any client may have scribbled them). */
void agent_spin_repair(struct agent_spin *s, uint32_t polling, uint32_t clients);

#endif /* MC_AGENT_SPIN_H */
