/* notify.h in a build without libsystemd: the daemons run, nobody is told. */
#include "daemon/common/notify.h"

void mc_notify_ready(const char *status)
{
    (void)status;
}

void mc_notify_stopping(void)
{
}
