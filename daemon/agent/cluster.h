/*
 * The agent's cluster mode (DESIGN.md §5): its UCX worker, the join at mc-master (bootstrap,
 * HELLO with the cluster token, MOUNT, heartbeats), the peers it moves bytes with, and the
 * owner's side of those transfers.
 *
 * Bytes move by active messages with rendezvous (docs/decisions.md "UCX connection method
 * and bulk path"): a writer sends each remote replica's image as a WRITE bulk that the
 * owner lands straight in its segment, inside the allocation the master granted; a reader
 * asks the owner with READ and the owner sends the bytes from its segment straight into
 * the reader's landing segment, which local clients map read-only (libmc then copies and
 * verifies as for a local replica). A transfer's memory is released only once UCX says the
 * transfer is final.
 *
 * Peers authenticate with the cluster token (HELLO) on every endpoint before any READ or
 * WRITE is served. Each peer is reached by the worker address its owner mounted with,
 * which the agent learns from CLUSTER_INFO.
 *
 * Functions here are called from agent.c's loop only (one thread).
 */
#ifndef MC_AGENT_CLUSTER_H
#define MC_AGENT_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

struct mc_agent;
struct put;
struct lease;
struct client;
struct mc_sqe;
struct mc_master_get_result;

/* Start-up, blocking up to connect_timeout_ms: UCX, the bootstrap listener (--listen), the
 * master's address, HELLO, MOUNT of the DRAM segment when there is one, the master link
 * (a->ml). Sets a->node and a->seg_id. Errors: MC_ERR_DENIED (the master refused us: token,
 * name), MC_ERR_TIMEOUT / MC_ERR_UNAVAILABLE (no master), MC_ERR_INVALID, MC_ERR_NOMEM,
 * MC_ERR_IO. Logs why. */
int cluster_create(struct mc_agent *a);
/* Ends every transfer (their callbacks run, so clients must still exist), then frees.
 * Accepts a->cl == NULL. */
void cluster_destroy(struct mc_agent *a);

unsigned cluster_listen_port(const struct mc_agent *a);
uint64_t cluster_lease_ttl_ms(const struct mc_agent *a);

/* Sends bytes [from, to) of p's image to every replica that is not ours (p->sends counts
 * them; agent_put_writes_final runs when the count drops to 0). cluster_put_progress sends
 * what is copied of the image so far, in whole pieces, while the rest is copied. */
void cluster_put_send(struct mc_agent *a, struct put *p, uint64_t from, uint64_t to);
void cluster_put_progress(struct mc_agent *a, struct put *p);
/* Reads a replica of `g` from a peer into the landing segment; agent_get_landed runs when
 * it is final. Returns 0, or an error with nothing started. */
int cluster_get_remote(struct mc_agent *a, struct lease *l, const struct mc_master_get_result *g);

/* Loop hooks: progress UCX and flush the master link (true when anything happened); before
 * sleeping (false: events are pending, do not sleep); an io_uring completion tagged
 * UD_UCX with `p` its pointer part; the periodic tick. */
bool cluster_turn(struct mc_agent *a);
bool cluster_arm(struct mc_agent *a);
void cluster_on_cqe(struct mc_agent *a, void *p, int res);
void cluster_tick(struct mc_agent *a);

/* STATS and STATS with MC_STATS_CLUSTER: asks the master, answers with JSON in the
 * client's staging range (agent_stats_fill). */
void cluster_op_stats(struct mc_agent *a, struct client *c, const struct mc_sqe *s);
/* LIST through the master. */
void cluster_op_list(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                     const char *key);

/* DRAIN through the master: key = the node's name (1..MC_MASTER_NAME_MAX bytes), arg0 = 1
 * drain / 0 undrain; answers the status. */
void cluster_op_drain(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                      const char *key);

/* Graceful exit: tell the master we leave (bounded wait). */
void cluster_leave(struct mc_agent *a);

/* The agent's own counters of its transfers, for its stats JSON. */
void cluster_stats_add(const struct mc_agent *a, json_t *o);

#endif /* MC_AGENT_CLUSTER_H */
