/*
 * Telling a service manager how a daemon is doing (systemd's notify protocol): READY=1 once
 * the daemon serves, at the moment it writes its ready file, and STOPPING=1 once it starts
 * shutting down (a signal, or a fatal error). A unit of Type=notify then knows when the
 * daemon is up, and that a stop is under way rather than a hang.
 *
 * Both calls do nothing when the daemon was not started with NOTIFY_SOCKET in its
 * environment, and in a build without libsystemd (meson option systemd=disabled, or the
 * library absent: notify_none.c). They never fail the daemon: a message that cannot be
 * sent is logged once as a warning. Not thread-safe: call them from the main loop only.
 */
#ifndef MC_COMMON_NOTIFY_H
#define MC_COMMON_NOTIFY_H

/* READY=1, with STATUS=<status> when status is not NULL. */
void mc_notify_ready(const char *status);

/* STOPPING=1; later calls send nothing (a signal and then the exit path both ask). */
void mc_notify_stopping(void);

#endif /* MC_COMMON_NOTIFY_H */
