/*
 * What the agent tells about itself and its cluster: the JSON of MC_OP_STATS (mcctl stats)
 * and of MC_OP_STATS with MC_STATS_F_CLUSTER (mcctl cluster), in either mode, and the
 * figures of its metrics page.
 */
#ifndef MC_AGENT_INFO_H
#define MC_AGENT_INFO_H

#include <stddef.h>
#include <stdint.h>

struct mc_agent;
struct client;
struct mc_master_stats;
struct mc_proto_seg_entry;
struct mc_proto_node_entry;

/* The JSON of STATS (the agent's and the master's figures), malloc'd (NULL: no memory). */
char *agent_stats_json(struct mc_agent *a, const struct mc_master_stats *ms);
/* The cluster view (mcctl cluster) from the master's answer, or of a standalone agent. */
char *agent_cluster_json(const struct mc_master_stats *ms, const struct mc_proto_seg_entry *segs,
                         size_t nseg, const struct mc_proto_node_entry *nodes, size_t nnode);
char *agent_local_cluster_json(struct mc_agent *a);
/* Writes js into the client's staging range [data_off, +data_len) and answers its length
 * (MC_ERR_TOO_LARGE when it does not fit; js NULL: MC_ERR_NOMEM). Frees js. */
void agent_answer_json(struct client *c, uint64_t user_data, uint64_t data_off,
                       uint64_t data_len, char *js);
/* The figures of the metrics page, published from the loop (about every 10 ms). */
void agent_metrics_publish(struct mc_agent *a);

#endif /* MC_AGENT_INFO_H */
