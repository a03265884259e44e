/*
 * The agent's socket path (sockpath.h). Reads the environment, nothing else.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mc/mc_status.h"

#include "shm/sockpath.h"

int mc_shm_socket_path(const char *arg, char *buf, size_t cap, int *in_rundir_p)
{
    const char *env;
    int rundir = 0;
    int n;

    if (arg != NULL) {
        if (arg[0] == '\0')
            return MC_ERR_INVALID;
        n = snprintf(buf, cap, "%s", arg);
    } else if ((env = getenv(MC_SHM_SOCKET_ENV)) != NULL && env[0] != '\0') {
        n = snprintf(buf, cap, "%s", env);
    } else if ((env = getenv(MC_SHM_SOCKET_RUNDIR)) != NULL && env[0] != '\0') {
        n = snprintf(buf, cap, "%s" MC_SHM_SOCKET_SUBDIR MC_SHM_SOCKET_NAME, env);
        rundir = 1;
    } else {
        n = snprintf(buf, cap, "%s", MC_SHM_SOCKET_SYSTEM);
    }
    /* the buffer keeps its NUL: a path that fills it is too long */
    if (n < 0 || (size_t)n >= cap)
        return MC_ERR_INVALID;
    if (in_rundir_p != NULL)
        *in_rundir_p = rundir;
    return 0;
}
