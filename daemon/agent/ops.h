/*
 * The agent's op dispatch: one checked submission of a client in, the room that serves it
 * called (put.c, lease.c, views.c, the master link), the deadline it runs under computed,
 * and its latency clock started when metrics are on.
 */
#ifndef MC_AGENT_OPS_H
#define MC_AGENT_OPS_H

struct mc_agent;
struct client;
struct mc_sqe;

/* A client hook (client.h run): ctx is the agent. */
void ops_run(void *ctx, struct client *c, const struct mc_sqe *s, const char *key);

#endif /* MC_AGENT_OPS_H */
