/* notify.h through libsystemd's sd_notify (the build has the library). */
#include "daemon/common/notify.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "daemon/common/log.h"

static bool stopping_sent;
static bool warned;

/* sd_notify returns 0 when NOTIFY_SOCKET is unset (nothing to do), > 0 once sent */
static void notify_send(const char *msg)
{
    int rc = sd_notify(0, msg);

    if (rc < 0 && !warned) {
        warned = true;
        mc_warn("cannot notify the service manager: %s", strerror(-rc));
    }
}

void mc_notify_ready(const char *status)
{
    char msg[512];

    if (status == NULL) {
        notify_send("READY=1");
        return;
    }
    snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", status);
    notify_send(msg);
}

void mc_notify_stopping(void)
{
    if (stopping_sent)
        return;
    stopping_sent = true;
    notify_send("STOPPING=1");
}
