/*
 * mc_mcmaster_server: the RPC front end of the master service (docs/master.md). It owns
 * one mc_master, one UCX worker, the TCP bootstrap listener (bootstrap.h), a timerfd for
 * the service tick and a signalfd for SIGTERM/SIGINT, and runs them in one poll() loop on
 * the calling thread.
 *
 * Every request is decoded with daemon/proto before use. A payload that fails to decode is
 * answered with a status-only reply MC_ERR_PROTO (the endpoint stays open: a decoding
 * failure is the peer's bug, and the reply tells it so). Until an endpoint has passed HELLO
 * with the cluster token, every other request is answered MC_ERR_DENIED; a request that
 * names a node other than the endpoint's own is MC_ERR_DENIED too.
 *
 * FENCE is an owner-to-master message here: an agent that sends FENCE says "no write can
 * land in these allocations any more" and each item becomes mc_master_fence_ack (only for
 * segments its node owns); master-initiated fencing is not implemented.
 *
 * Not thread-safe: one thread creates, runs and destroys a server.
 */
#ifndef MC_MCMASTER_SERVER_H
#define MC_MCMASTER_SERVER_H

#include <stdint.h>

#include "daemon/mcmaster/mcmaster_config.h"

struct mc_mcmaster_server;

/* Creates the service, the UCX worker and the listener; blocks SIGTERM and SIGINT (they
 * are read through a signalfd). cfg is read during the call only. Errors: MC_ERR_INVALID
 * (bad listen address), MC_ERR_IO (bind, UCX), MC_ERR_NOMEM. Logs the reason. */
int mc_mcmaster_server_create(const struct mc_mcmaster_config *cfg,
                              struct mc_mcmaster_server **s_p);
/* The TCP port actually bound (useful with port 0). */
uint16_t mc_mcmaster_server_port(const struct mc_mcmaster_server *s);
/* Runs until SIGTERM or SIGINT: returns 0, or MC_ERR_IO when the loop itself failed. */
int mc_mcmaster_server_run(struct mc_mcmaster_server *s);
/* Accepts NULL. */
void mc_mcmaster_server_destroy(struct mc_mcmaster_server *s);

#endif /* MC_MCMASTER_SERVER_H */
