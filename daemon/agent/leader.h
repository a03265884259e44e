/*
 * Following the leader master through etcd (docs/master.md, "High availability"): a thread
 * that reads /mcstore/<cluster-id>/leader every poll_ms and keeps the newest leader it has
 * seen: its bootstrap HOST:PORT and its epoch (the revision that created the key). The
 * agent's loop only reads it (cluster.c rejoins when the epoch grows); a lower epoch than
 * one already seen is never taken (a stale read, a leader that lost its lease).
 *
 * The thread also keeps /mcstore/<cluster-id>/agents/<name> (value "NSEGS NAME": how many
 * segments the agent mounts, and its name) under a lease of its own (LEADER_AGENT_TTL_S, renewed every
 * LEADER_AGENT_EVERY polls): a new leader reads the prefix to know whose reports to wait
 * for (docs/master.md, "High availability"); the key goes when the agent does.
 */
#ifndef MC_AGENT_LEADER_H
#define MC_AGENT_LEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct agent_leader;

#define LEADER_AGENT_TTL_S 2
#define LEADER_AGENT_EVERY 4u

/* name: the agent's node name (1..MC_MASTER_NAME_MAX of the node name alphabet); nsegs:
 * the segments it mounts. Errors: MC_ERR_INVALID (endpoints, cluster id, name),
 * MC_ERR_NOMEM, MC_ERR_IO (thread). */
int leader_start(const char *endpoints, const char *cluster_id, const char *name,
                 uint32_t nsegs, uint64_t poll_ms, struct agent_leader **l_p);
/* Accepts NULL. */
void leader_stop(struct agent_leader *l);
/* An eventfd (nonblocking) that becomes readable when a newer leader is seen: the loop
 * polls it to follow at once, not at its next tick. Read it (8 bytes) to re-arm. */
int leader_fd(const struct agent_leader *l);
/* The newest leader seen: true with its address and epoch, false when none yet. */
bool leader_get(struct agent_leader *l, char *addr, size_t cap, uint64_t *epoch_p);
/* Whether etcd answered the last read (for the health page). */
bool leader_etcd_ok(struct agent_leader *l);
/* The masters that stand for leader (each one's member key, /mcstore/<id>/members/), as
 * last read (every 10 polls): their HOST:PORT comma-separated into list (cap >= 1; at most
 * LEADER_MEMBERS_MAX, the leader among them). False (and list "") until read once, and
 * while the last read failed. */
#define LEADER_MEMBERS_MAX 16
bool leader_members(struct agent_leader *l, char *list, size_t cap);

#endif /* MC_AGENT_LEADER_H */
