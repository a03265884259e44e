/*
 * Test processes: spawn a daemon of this tree (its binary from an environment variable
 * meson sets; without it the test exits 77, SKIP) with its output in a log file, wait for
 * its ready file with a deadline, stop it (SIGTERM, then SIGKILL after a grace), kill it as
 * a crash would, and check its log for errors nobody expected. Every daemon gets
 * PR_SET_PDEATHSIG(SIGKILL), so a test that fails half-way leaves nothing behind.
 *
 * Header-only (static inline, so a test that needs only part of it gets no warning).
 */
#ifndef MC_T_PROC_H
#define MC_T_PROC_H

#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
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
#include <unistd.h>

#include "tests/lib/t_time.h"

#define T_READY_MS 15000 /* start-up deadline (ASan builds start slowly) */
#define T_STOP_MS  10000 /* SIGTERM grace before SIGKILL */

/*
 * Runs fn(ctx) in a child process under uid (its gid the same, no supplementary groups):
 * another local user of the node. Returns the child's exit status; 100 when it could not
 * become uid, 200 + the signal when one killed it, -1 when fork failed.
 */
static inline int t_fork_as(unsigned uid, int (*fn)(void *ctx), void *ctx)
{
    int status;
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
            setresuid(uid, uid, uid) != 0)
            _exit(100);
        _exit(fn(ctx));
    }
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status)
                             : 200 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* One daemon: its pid, files and (once ready) the port from its ready file. */
struct t_proc {
    pid_t pid;
    char name[32];
    char sock[300];  /* agents: the unix socket for local clients */
    char ready[300]; /* "PID PORT", written by rename */
    char log[300];   /* stdout and stderr */
    unsigned port;
    int status; /* the wait status once reaped */
};

static inline const char *t_env_bin(const char *var)
{
    const char *bin = getenv(var);

    if (bin == NULL || bin[0] == '\0') {
        fprintf(stderr, "t_proc: %s is not set: skipping\n", var);
        exit(77);
    }
    return bin;
}

/* A fresh temporary directory under $TMPDIR (or /tmp); exits on failure. */
static inline void t_mkdtemp(char *dir, size_t cap)
{
    const char *tmp = getenv("TMPDIR");

    snprintf(dir, cap, "%s/mc-ctest-XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "t_proc: mkdtemp %s: %s\n", dir, strerror(errno));
        exit(1);
    }
}

/* Remove a flat directory and what is in it. */
static inline void t_rmdir(const char *dir)
{
    char path[600];
    struct dirent *e;
    DIR *d = opendir(dir);

    if (d != NULL) {
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* A random cluster token (32 hex digits). */
static inline void t_random_token(char *out, size_t cap)
{
    uint8_t raw[16] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    size_t i;

    if (fd < 0 || read(fd, raw, sizeof(raw)) != (ssize_t)sizeof(raw)) {
        fprintf(stderr, "t_proc: /dev/urandom: %s\n", strerror(errno));
        exit(1);
    }
    close(fd);
    for (i = 0; i < sizeof(raw) && 2 * i + 2 < cap; i++)
        snprintf(out + 2 * i, cap - 2 * i, "%02x", raw[i]);
}

/* Print the last `tail` bytes of a daemon's log to stderr (when something went wrong). */
static inline void t_proc_dump_log(const struct t_proc *p, long tail)
{
    char buf[4096];
    size_t n;
    FILE *f = fopen(p->log, "r");

    if (f == NULL)
        return;
    if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > tail)
        fseek(f, -tail, SEEK_END);
    else
        fseek(f, 0, SEEK_SET);
    fprintf(stderr, "--- %s log (%s) ---\n", p->name, p->log);
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, stderr);
    fprintf(stderr, "--- end of %s log ---\n", p->name);
    fclose(f);
}

/*
 * Fork and exec argv (NULL-terminated) as daemon `name`, with its output in dir/NAME.log
 * and MC_CLUSTER_TOKEN=token in its environment (unset when token is NULL). Does not wait.
 */
static inline void t_proc_spawn(struct t_proc *p, const char *dir, const char *name,
                                const char *token, const char *const *argv)
{
    int fd;

    snprintf(p->name, sizeof(p->name), "%s", name);
    snprintf(p->log, sizeof(p->log), "%s/%s.log", dir, name);
    p->port = 0;
    p->status = 0;
    fflush(NULL);
    p->pid = fork();
    if (p->pid < 0) {
        fprintf(stderr, "t_proc: fork: %s\n", strerror(errno));
        exit(1);
    }
    if (p->pid == 0) {
        /* the daemon dies with the process that started it, however that ends */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        if (token != NULL)
            setenv("MC_CLUSTER_TOKEN", token, 1);
        else
            unsetenv("MC_CLUSTER_TOKEN");
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "t_proc: exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
}

/* Wait until deadline_ms for the daemon to exit; true when it was reaped (p->status). */
static inline bool t_proc_reap(struct t_proc *p, uint64_t deadline_ms)
{
    pid_t r;

    if (p->pid <= 0)
        return true;
    for (;;) {
        r = waitpid(p->pid, &p->status, WNOHANG);
        if (r == p->pid || (r < 0 && errno == ECHILD)) {
            p->pid = 0;
            return true;
        }
        if (t_now_ms() >= deadline_ms)
            return false;
        t_poll_pause();
    }
}

/*
 * Wait for the ready file ("PID PORT") until ms from now. Returns 0 when ready (p->port
 * set), 1 when the daemon exited first (p->status holds its wait status), -1 on timeout.
 */
static inline int t_proc_wait_ready(struct t_proc *p, unsigned ms)
{
    uint64_t deadline = t_now_ms() + ms;
    int pid_in_file = 0;
    FILE *f;

    for (;;) {
        f = fopen(p->ready, "r");
        if (f != NULL) {
            int n = fscanf(f, "%d %u", &pid_in_file, &p->port);

            fclose(f);
            if (n == 2 && pid_in_file == (int)p->pid && p->port > 0 && p->port < 65536)
                return 0;
            fprintf(stderr, "t_proc: %s: bad ready file (%d fields)\n", p->name, n);
            return -1;
        }
        if (waitpid(p->pid, &p->status, WNOHANG) == p->pid) {
            p->pid = 0;
            return 1;
        }
        if (t_now_ms() >= deadline)
            return -1;
        t_poll_pause();
    }
}

/* Stop a daemon: SIGTERM, wait up to T_STOP_MS, then SIGKILL. Returns its exit status
 * after a clean stop (0 expected), or -1 when it died of a signal or had to be killed.
 * Idempotent (a reaped daemon returns its recorded status). */
static inline int t_proc_stop(struct t_proc *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGTERM);
        if (!t_proc_reap(p, t_now_ms() + T_STOP_MS)) {
            fprintf(stderr, "t_proc: %s (%d) ignored SIGTERM; killing it\n", p->name,
                    (int)p->pid);
            kill(p->pid, SIGKILL);
            (void)t_proc_reap(p, t_now_ms() + T_STOP_MS);
            return -1;
        }
    }
    if (WIFEXITED(p->status))
        return WEXITSTATUS(p->status);
    return -1;
}

/* Kill a daemon at once (SIGKILL), as a crash would. */
static inline void t_proc_kill(struct t_proc *p)
{
    if (p->pid <= 0)
        return;
    kill(p->pid, SIGKILL);
    (void)t_proc_reap(p, t_now_ms() + T_STOP_MS);
}

/* Describe a wait status for messages. */
static inline const char *t_status_str(int status, char *buf, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(buf, cap, "exit %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, cap, "status 0x%x", status);
    return buf;
}


/*
 * The expected-log guard: the lines of a daemon's log that say ERROR (or that a sanitizer
 * reported) and contain none of the `expected` substrings (NULL-terminated, may be NULL)
 * are printed to stderr and counted. A test that provoked no error asserts 0.
 */
static inline int t_log_unexpected(const char *log, const char *const *expected)
{
    char line[2048];
    int bad = 0;
    FILE *f = fopen(log, "r");

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        bool hit = strstr(line, " ERROR ") != NULL || strstr(line, "Sanitizer") != NULL ||
                   strstr(line, "runtime error:") != NULL;

        for (int i = 0; hit && expected != NULL && expected[i] != NULL; i++) {
            if (strstr(line, expected[i]) != NULL)
                hit = false;
        }
        if (hit) {
            fprintf(stderr, "unexpected in %s: %s", log, line);
            bad++;
        }
    }
    fclose(f);
    return bad;
}

#endif /* MC_T_PROC_H */
