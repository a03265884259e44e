/*
 * The agent's cluster mode: its UCX worker, the join at mc-master (bootstrap, HELLO with
 * the cluster token, MOUNT, heartbeats), the peers it moves bytes with (as the replica I/O
 * of rio.h), and the owner's side of those transfers. See docs/architecture.md, "The
 * agent".
 *
 * Peers authenticate with the cluster token (HELLO) on every endpoint before any READ or
 * WRITE is served. Each peer is reached by the worker address its owner mounted with,
 * which the agent learns from CLUSTER_INFO.
 *
 * Called from the agent's loop only (one thread).
 */
#ifndef MC_AGENT_CLUSTER_H
#define MC_AGENT_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

struct mc_agent;

/* Start-up, blocking up to connect_timeout_ms: UCX, the bootstrap listener (--listen), the
 * master's address, HELLO, MOUNT of the DRAM segment when there is one, the master link
 * (a->ml) and the replica I/O (a->rio). Sets a->node and a->seg_id. fatal(a, status) runs
 * when the agent cannot go on (its name was taken while it was away). Errors: MC_ERR_DENIED
 * (the master refused us: token, name), MC_ERR_TIMEOUT / MC_ERR_UNAVAILABLE (no master),
 * MC_ERR_INVALID, MC_ERR_NOMEM, MC_ERR_IO. Logs why. */
int cluster_create(struct mc_agent *a, void (*fatal)(struct mc_agent *a, int status));
/* Ends every transfer (their callbacks run, so clients must still exist), then frees.
 * Accepts a->cl == NULL. */
void cluster_destroy(struct mc_agent *a);

unsigned cluster_listen_port(const struct mc_agent *a);

/* Loop hooks: progress UCX and flush the master link (true when anything happened); before
 * sleeping (false: events are pending, do not sleep); the periodic tick. */
bool cluster_turn(struct mc_agent *a);
bool cluster_arm(struct mc_agent *a);
void cluster_tick(struct mc_agent *a);

/* Graceful exit: tell the master we leave (bounded wait). */
void cluster_leave(struct mc_agent *a);

/* The agent's own counters of its transfers, for its stats JSON. */
void cluster_stats_add(const struct mc_agent *a, json_t *o);
/* With --etcd: the master this agent follows ("master": HOST:PORT, "epoch"), for the
 * cluster view (mcctl cluster). Nothing without etcd. */
void cluster_leader_add(const struct mc_agent *a, json_t *o);
/* Why the agent cannot serve master-bound ops now (rejoining, the master silent), or NULL */
const char *cluster_health(const struct mc_agent *a);
/* The peer figures into the metrics arrays (indexed by enum mc_agent_metric). */
void cluster_metrics_fill(const struct mc_agent *a, uint64_t *vals, uint8_t *present);

#endif /* MC_AGENT_CLUSTER_H */
