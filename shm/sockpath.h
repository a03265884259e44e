/*
 * Where the agent's unix socket is (docs/protocol.md, "Connecting"): one rule for libmc
 * (mc_connect with a NULL path), the agent (its default --socket) and the tools.
 */
#ifndef MC_SHM_SOCKPATH_H
#define MC_SHM_SOCKPATH_H

#include <stddef.h>

#define MC_SHM_SOCKET_ENV    "MC_AGENT_SOCKET" /* overrides the two below */
#define MC_SHM_SOCKET_RUNDIR "XDG_RUNTIME_DIR" /* $XDG_RUNTIME_DIR/mc/agent.sock */
#define MC_SHM_SOCKET_SUBDIR "/mc"
#define MC_SHM_SOCKET_NAME   "/agent.sock"
#define MC_SHM_SOCKET_SYSTEM "/run/mc/agent.sock"

/*
 * The socket path into buf (cap bytes, NUL-terminated): arg when not NULL, else
 * $MC_AGENT_SOCKET, else $XDG_RUNTIME_DIR/mc/agent.sock, else /run/mc/agent.sock; an
 * empty environment variable counts as unset. *in_rundir_p (if not NULL) is set when the
 * path is the one under $XDG_RUNTIME_DIR, whose mc/ folder the agent creates (0700).
 * Returns 0, or MC_ERR_INVALID (arg is empty, or the path does not fit cap).
 */
int mc_shm_socket_path(const char *arg, char *buf, size_t cap, int *in_rundir_p);

#endif /* MC_SHM_SOCKPATH_H */
