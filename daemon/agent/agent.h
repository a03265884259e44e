/*
 * mc-agent: the node agent. It owns this node's DRAM segment, hosts the master service
 * in-process (--standalone) or joins mc-master (cluster mode: the agent moves bytes to and
 * from its peers over UCX), and serves local clients through per-client shared-memory rings
 * driven by one event loop (docs/architecture.md, "The agent"; docs/protocol.md).
 *
 * One thread: the loop. Nothing here is thread-safe, and nothing needs to be.
 */
#ifndef MC_AGENT_H
#define MC_AGENT_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/agent/agent_config.h"

struct mc_agent;

/*
 * Create an agent: the DRAM segment, the embedded master, the listening socket at
 * `socket_path` (a stale socket file there is replaced), the io_uring. `cfg` is copied
 * (its strings too). Errors: MC_ERR_INVALID, MC_ERR_NOMEM, MC_ERR_IO, MC_ERR_EXISTS (another
 * agent answers on the socket).
 */
int mc_agent_create(const struct mc_agent_config *cfg, const char *socket_path,
                    struct mc_agent **a_p);

/* Run the loop until SIGTERM/SIGINT (blocked and read through a signalfd) or
 * mc_agent_stop. Returns 0 on a clean stop; MC_ERR_DENIED when the master refused us on a
 * rejoin (our node name is held by another live agent now). */
int mc_agent_run(struct mc_agent *a);

void mc_agent_stop(struct mc_agent *a);

/* Test only: arm the fault seam (daemon/agent/fault.h) with "get_delay_ms=MS" or
 * "put_end_delay_ms=MS" before mc_agent_run. MC_ERR_INVALID on anything else. */
int mc_agent_test_fault(struct mc_agent *a, const char *spec);

/* Cluster mode: the TCP port of the bootstrap listener (--listen); 0 standalone. */
unsigned mc_agent_listen_port(const struct mc_agent *a);

/* Frees everything: clients are disconnected, their puts revoked. Accepts NULL. */
void mc_agent_destroy(struct mc_agent *a);

#endif /* MC_AGENT_H */
