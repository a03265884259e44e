/*
 * Integration-test helper: start the real mc-agent (standalone, its own socket in a fresh
 * temporary directory), wait for its ready file with a deadline, and stop it at the end.
 *
 * The binary comes from $MC_AGENT_BIN (meson sets it to the built mc-agent); without it
 * the test exits 77 (SKIP). The agent gets PR_SET_PDEATHSIG(SIGKILL), and an atexit
 * handler stops it, so a test that fails half-way (Check exits its forked child) leaves no
 * agent behind.
 *
 * Header-only (static inline, so a test that needs only part of it gets no warning).
 */
#ifndef MC_T_AGENT_H
#define MC_T_AGENT_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/t_proc.h"
#include "tests/lib/t_time.h"

#define T_AGENT_READY_MS 10000 /* start-up deadline */
#define T_AGENT_STOP_MS  5000  /* SIGTERM grace before SIGKILL */

struct t_agent {
    pid_t pid;
    char dir[256];
    char sock[300];
    char ready[300];
    char log[300];
    int log_unexpected; /* t_agent_stop: ERROR lines in its log (tests/lib/t_proc.h) */
};

static struct t_agent *t_agent_current;

/* Print the agent's log to stderr (when something went wrong). */
static inline void t_agent_dump_log(const struct t_agent *a)
{
    char buf[4096];
    size_t n;
    FILE *f = fopen(a->log, "r");

    if (f == NULL)
        return;
    fprintf(stderr, "--- mc-agent log (%s) ---\n", a->log);
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, stderr);
    fprintf(stderr, "--- end of log ---\n");
    fclose(f);
}

/* Remove the temporary directory and what the agent left in it (flat). */
static inline void t_agent_rmdir(struct t_agent *a)
{
    if (a->dir[0] == '\0')
        return;
    t_rmdir(a->dir);
    a->dir[0] = '\0';
}

/* Wait for the agent to exit until deadline_ms; true when it was reaped. */
static inline bool t_agent_reap(struct t_agent *a, uint64_t deadline_ms, int *status_p)
{
    pid_t r;

    for (;;) {
        r = waitpid(a->pid, status_p, WNOHANG);
        if (r == a->pid || (r < 0 && errno == ECHILD))
            return true;
        if (t_now_ms() >= deadline_ms)
            return false;
        t_poll_pause();
    }
}

/* Stop the agent: SIGTERM, wait up to T_AGENT_STOP_MS, then SIGKILL. Returns the exit
 * status of a clean stop (0 expected), or -1 if it had to be killed. Idempotent. */
static inline int t_agent_stop(struct t_agent *a)
{
    int status = 0, ret = -1;

    if (a->pid > 0) {
        kill(a->pid, SIGTERM);
        if (t_agent_reap(a, t_now_ms() + T_AGENT_STOP_MS, &status)) {
            ret = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        } else {
            fprintf(stderr, "t_agent: mc-agent %d ignored SIGTERM; killing it\n", (int)a->pid);
            kill(a->pid, SIGKILL);
            (void)t_agent_reap(a, t_now_ms() + T_AGENT_STOP_MS, &status);
        }
        a->pid = 0;
    }
    if (a->dir[0] != '\0')
        a->log_unexpected = t_log_unexpected(a->log, NULL);
    t_agent_rmdir(a);
    if (t_agent_current == a)
        t_agent_current = NULL;
    return ret;
}

/* Kill the agent at once (SIGKILL), as a crash would. */
static inline void t_agent_kill(struct t_agent *a)
{
    int status;

    if (a->pid <= 0)
        return;
    kill(a->pid, SIGKILL);
    (void)t_agent_reap(a, t_now_ms() + T_AGENT_STOP_MS, &status);
    a->pid = 0;
}

static inline void t_agent_atexit(void)
{
    if (t_agent_current != NULL)
        t_agent_stop(t_agent_current);
}

/*
 * Start mc-agent --standalone --socket DIR/a.sock --dram DRAM --ready-file DIR/ready, plus
 * extra (NULL-terminated, may be NULL), and wait until the ready file exists. On failure
 * prints why (and the agent's log) and exits the process: 77 when MC_AGENT_BIN is unset,
 * 1 otherwise.
 */
static inline void t_agent_start(struct t_agent *a, const char *dram, const char *const *extra)
{
    const char *bin = getenv("MC_AGENT_BIN");
    const char *tmp = getenv("TMPDIR");
    const char *argv[32];
    uint64_t deadline;
    int argc = 0, status, fd;
    pid_t pid;

    memset(a, 0, sizeof(*a));
    if (bin == NULL || bin[0] == '\0') {
        fprintf(stderr, "t_agent: MC_AGENT_BIN is not set: skipping\n");
        exit(77);
    }
    snprintf(a->dir, sizeof(a->dir), "%s/mc-itest-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(a->dir) == NULL) {
        fprintf(stderr, "t_agent: mkdtemp %s: %s\n", a->dir, strerror(errno));
        exit(1);
    }
    snprintf(a->sock, sizeof(a->sock), "%s/a.sock", a->dir);
    snprintf(a->ready, sizeof(a->ready), "%s/ready", a->dir);
    snprintf(a->log, sizeof(a->log), "%s/agent.log", a->dir);

    argv[argc++] = bin;
    argv[argc++] = "--standalone";
    argv[argc++] = "--socket";
    argv[argc++] = a->sock;
    argv[argc++] = "--dram";
    argv[argc++] = dram;
    argv[argc++] = "--ready-file";
    argv[argc++] = a->ready;
    for (int i = 0; extra != NULL && extra[i] != NULL && argc < 31; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;

    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "t_agent: fork: %s\n", strerror(errno));
        exit(1);
    }
    if (pid == 0) {
        /* the agent dies with the test process, however that ends */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        fd = open(a->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        execv(bin, (char *const *)argv);
        fprintf(stderr, "t_agent: exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    a->pid = pid;
    t_agent_current = a;
    {
        static bool registered;

        if (!registered) {
            atexit(t_agent_atexit);
            registered = true;
        }
    }

    deadline = t_now_ms() + T_AGENT_READY_MS;
    for (;;) {
        if (access(a->ready, F_OK) == 0)
            return;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            a->pid = 0;
            fprintf(stderr, "t_agent: mc-agent exited before it was ready (status 0x%x)\n",
                    status);
            t_agent_dump_log(a);
            t_agent_rmdir(a);
            exit(1);
        }
        if (t_now_ms() >= deadline) {
            fprintf(stderr, "t_agent: mc-agent not ready after %d ms\n", T_AGENT_READY_MS);
            t_agent_dump_log(a);
            t_agent_stop(a);
            exit(1);
        }
        t_poll_pause();
    }
}

#endif /* MC_T_AGENT_H */
