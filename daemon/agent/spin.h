/*
 * Adaptive waiting, the agent's half (shm/node.h is the page it shares with its clients):
 * the agent polls its clients' rings after work, and clients poll their CQs, only while the
 * host is quiet. Every SPIN_WINDOW of the loop the agent reads its own run delay (the time
 * it was runnable but waited for a CPU, /proc/thread-self/schedstat); a window in which it
 * waited more than a quarter of the time marks the node busy: from then on nobody polls
 * and every round trip sleeps on a doorbell. The node is quiet again after a run of windows
 * that waited less than 5 %; the run needed doubles each time busy comes back soon after
 * (up to 1.3 s), so a loaded host does not flap between the two. Figures and the rule:
 * docs/decisions.md, "Adaptive waiting".
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
    uint64_t win_start_ns;    /* the window being measured */
    uint64_t win_delay_ns;    /* the run delay at its start */
    uint64_t busy_since_ns;   /* the last quiet -> busy */
    uint64_t quiet_since_ns;  /* the last busy -> quiet */
    uint32_t quiet_windows;   /* quiet windows in a row while busy */
    uint32_t quiet_needed;    /* ... before it is quiet again */
    uint64_t flips;           /* quiet <-> busy changes, for the stats */
};

/* Creates the page (cores: online CPUs) and opens the run-delay counter on the calling
 * thread, which must be the loop's. Failing either leaves the agent without adaptive
 * waiting (never busy, clients fall back to their own count): returns the error for a
 * warning. */
int agent_spin_init(struct agent_spin *s);
void agent_spin_cleanup(struct agent_spin *s);
/* Each loop turn, with the time: ends a window when one has passed. */
void agent_spin_sample(struct agent_spin *s, uint64_t now_ns);
bool agent_spin_busy(const struct agent_spin *s);
/* The verdict of agent_spin_sample, given the time and the run delay so far (for tests). */
void agent_spin_window(struct agent_spin *s, uint64_t now_ns, uint64_t delay_ns);
/* A client's region goes: if it was polling (its CQ's consumer_spinning), its count in the
 * page goes too (a client killed while polling never takes it back). */
void agent_spin_client_gone(struct agent_spin *s, bool was_polling);
/* Each tick: polling clients right now (consumer_spinning) and clients; a count in the page
 * above every client is a leftover or a hostile write: set it to `polling`. */
void agent_spin_repair(struct agent_spin *s, uint32_t polling, uint32_t clients);

#endif /* MC_AGENT_SPIN_H */
