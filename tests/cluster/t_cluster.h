/*
 * Cluster-test helpers: start the real mc-master and mc-agents (cluster mode) on loopback,
 * each with its own log and ready file in one temporary directory, wait for their ready
 * files with deadlines, stop them, run mcctl and parse its JSON (jansson).
 *
 * The binaries come from $MC_MASTER_BIN, $MC_AGENT_BIN and $MCCTL (meson sets them); a test
 * process without them exits 77 (SKIP). Every daemon gets PR_SET_PDEATHSIG(SIGKILL), so a
 * test that fails half-way leaves nothing behind; passing tests stop what they started and
 * check that it exited cleanly (status 0 on SIGTERM: no leak under LeakSanitizer).
 *
 * Not an atexit-based cleanup like tests/integration/t_agent.h: Check forks each test from
 * the process that started the suite's daemons, and an atexit handler would run in every
 * forked test and stop the shared daemons.
 *
 * Header-only (static inline, so a test that needs only part of it gets no warning).
 */
#ifndef MC_T_CLUSTER_H
#define MC_T_CLUSTER_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
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

#define T_READY_MS 15000 /* start-up deadline (ASan builds start slowly) */
#define T_STOP_MS  10000 /* SIGTERM grace before SIGKILL */
#define T_MIB      (1024u * 1024u)

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

static inline uint64_t t_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A short pause between two polls of a condition that has its own deadline. */
static inline void t_poll_pause(void)
{
    struct timespec ts = {0, 2 * 1000 * 1000};

    nanosleep(&ts, NULL);
}

static inline const char *t_env_bin(const char *var)
{
    const char *bin = getenv(var);

    if (bin == NULL || bin[0] == '\0') {
        fprintf(stderr, "t_cluster: %s is not set: skipping\n", var);
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
        fprintf(stderr, "t_cluster: mkdtemp %s: %s\n", dir, strerror(errno));
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
        fprintf(stderr, "t_cluster: /dev/urandom: %s\n", strerror(errno));
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
        fprintf(stderr, "t_cluster: fork: %s\n", strerror(errno));
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
        fprintf(stderr, "t_cluster: exec %s: %s\n", argv[0], strerror(errno));
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
            fprintf(stderr, "t_cluster: %s: bad ready file (%d fields)\n", p->name, n);
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
            fprintf(stderr, "t_cluster: %s (%d) ignored SIGTERM; killing it\n", p->name,
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

/* Start mc-master on 127.0.0.1:0 with the token and wait until it is ready; exits the
 * process on failure (after printing its log). */
static inline void t_master_start(struct t_proc *p, const char *dir, const char *token)
{
    const char *argv[6];
    char st[48];
    int r;

    snprintf(p->ready, sizeof(p->ready), "%s/master.ready", dir);
    argv[0] = t_env_bin("MC_MASTER_BIN");
    argv[1] = "--listen";
    argv[2] = "127.0.0.1:0";
    argv[3] = "--ready-file";
    argv[4] = p->ready;
    argv[5] = NULL;
    t_proc_spawn(p, dir, "master", token, argv);
    r = t_proc_wait_ready(p, T_READY_MS);
    if (r != 0) {
        fprintf(stderr, "t_cluster: mc-master not ready (%s)\n",
                r > 0 ? t_status_str(p->status, st, sizeof(st)) : "timeout");
        t_proc_dump_log(p, 8192);
        t_proc_kill(p);
        exit(1);
    }
}

/*
 * Spawn a cluster-mode mc-agent named `name` joining the master on master_port with
 * --dram dram, in domain `domain` (NULL: none given), with MC_CLUSTER_TOKEN=token (NULL:
 * unset), small start-up settings (landing 32M, no prefault) and `extra` arguments
 * (NULL-terminated, may be NULL). Its socket is dir/NAME.sock. Does not wait.
 */
static inline void t_agent_spawn(struct t_proc *p, const char *dir, unsigned master_port,
                                 const char *name, const char *domain, const char *dram,
                                 const char *token, const char *const *extra)
{
    char master[64];
    const char *argv[48];
    int argc = 0, i;

    snprintf(master, sizeof(master), "127.0.0.1:%u", master_port);
    snprintf(p->sock, sizeof(p->sock), "%s/%s.sock", dir, name);
    snprintf(p->ready, sizeof(p->ready), "%s/%s.ready", dir, name);
    argv[argc++] = t_env_bin("MC_AGENT_BIN");
    argv[argc++] = "--master";
    argv[argc++] = master;
    argv[argc++] = "--listen";
    argv[argc++] = "127.0.0.1:0";
    argv[argc++] = "--node";
    argv[argc++] = name;
    if (domain != NULL) {
        argv[argc++] = "--domain";
        argv[argc++] = domain;
    }
    argv[argc++] = "--socket";
    argv[argc++] = p->sock;
    argv[argc++] = "--dram";
    argv[argc++] = dram;
    argv[argc++] = "--ready-file";
    argv[argc++] = p->ready;
    argv[argc++] = "--set";
    argv[argc++] = "landing=32M";
    argv[argc++] = "--set";
    argv[argc++] = "prefault=false";
    for (i = 0; extra != NULL && extra[i] != NULL && argc < 47; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    t_proc_spawn(p, dir, name, token, argv);
}

/* t_agent_spawn, then wait until it is ready; exits the process on failure. */
static inline void t_agent_start(struct t_proc *p, const char *dir, unsigned master_port,
                                 const char *name, const char *domain, const char *dram,
                                 const char *token, const char *const *extra)
{
    char st[48];
    int r;

    t_agent_spawn(p, dir, master_port, name, domain, dram, token, extra);
    r = t_proc_wait_ready(p, T_READY_MS);
    if (r != 0) {
        fprintf(stderr, "t_cluster: mc-agent %s not ready (%s)\n", name,
                r > 0 ? t_status_str(p->status, st, sizeof(st)) : "timeout");
        t_proc_dump_log(p, 8192);
        t_proc_kill(p);
        exit(1);
    }
}

/*
 * Run `$MCCTL --socket sock ARGS...` (NULL-terminated varargs); its stdout, NUL-terminated,
 * in *out_p (malloc'd, the caller frees; may be NULL when not wanted), stderr goes to ours.
 * Returns mcctl's exit status, or -1 when it did not exit normally.
 */
static inline int t_mcctl(const char *sock, char **out_p, ...)
{
    const char *argv[32];
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int argc = 0, pfd[2], status;
    const char *arg;
    ssize_t n;
    va_list ap;
    pid_t pid;

    argv[argc++] = t_env_bin("MCCTL");
    argv[argc++] = "--socket";
    argv[argc++] = sock;
    va_start(ap, out_p);
    while ((arg = va_arg(ap, const char *)) != NULL && argc < 31)
        argv[argc++] = arg;
    va_end(ap);
    argv[argc] = NULL;

    if (pipe2(pfd, O_CLOEXEC) != 0) {
        fprintf(stderr, "t_cluster: pipe: %s\n", strerror(errno));
        exit(1);
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "t_cluster: fork: %s\n", strerror(errno));
        exit(1);
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(pfd[1], STDOUT_FILENO);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    for (;;) {
        if (cap - len < 4096) {
            cap = cap == 0 ? 65536 : cap * 2;
            buf = realloc(buf, cap);
            if (buf == NULL)
                exit(1);
        }
        n = read(pfd[0], buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(pfd[0]);
    buf[len] = '\0';
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (out_p != NULL)
        *out_p = buf;
    else
        free(buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* `mcctl cluster` through sock, parsed; NULL (after printing why) on failure. The caller
 * frees it with json_decref. */
static inline json_t *t_cluster_json(const char *sock)
{
    json_error_t jerr;
    char *out = NULL;
    json_t *j = NULL;
    int rc = t_mcctl(sock, &out, "cluster", NULL);

    if (rc != 0)
        fprintf(stderr, "t_cluster: mcctl cluster: exit %d\n", rc);
    else if ((j = json_loads(out, 0, &jerr)) == NULL)
        fprintf(stderr, "t_cluster: mcctl cluster: bad JSON (%s): %s\n", jerr.text, out);
    free(out);
    return j;
}

/* The element of array `arr` (a member of j) whose member `field` is the string `value`;
 * NULL when none (borrowed reference). */
static inline json_t *t_json_find_str(json_t *j, const char *arr, const char *field,
                                      const char *value)
{
    json_t *a = json_object_get(j, arr);
    size_t i;

    for (i = 0; i < json_array_size(a); i++) {
        json_t *e = json_array_get(a, i);
        const char *s = json_string_value(json_object_get(e, field));

        if (s != NULL && strcmp(s, value) == 0)
            return e;
    }
    return NULL;
}

/* The element of array `arr` whose integer member `field` equals value; NULL when none. */
static inline json_t *t_json_find_int(json_t *j, const char *arr, const char *field,
                                      json_int_t value)
{
    json_t *a = json_object_get(j, arr);
    size_t i;

    for (i = 0; i < json_array_size(a); i++) {
        json_t *e = json_array_get(a, i);
        json_t *v = json_object_get(e, field);

        if (json_is_integer(v) && json_integer_value(v) == value)
            return e;
    }
    return NULL;
}

/* An integer member; -1 when absent or not an integer. */
static inline json_int_t t_json_int(json_t *obj, const char *field)
{
    json_t *v = json_object_get(obj, field);

    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* A string member; "" when absent. */
static inline const char *t_json_str(json_t *obj, const char *field)
{
    const char *s = json_string_value(json_object_get(obj, field));

    return s != NULL ? s : "";
}

/* Bytes used by the data segment(s) of node `name` in a cluster JSON; -1 when the node is
 * not there. */
static inline json_int_t t_node_seg_used(json_t *j, const char *name)
{
    json_t *node = t_json_find_str(j, "nodes", "name", name), *a;
    json_int_t id, used = 0;
    size_t i;

    if (node == NULL)
        return -1;
    id = t_json_int(node, "id");
    a = json_object_get(j, "segments");
    for (i = 0; i < json_array_size(a); i++) {
        json_t *e = json_array_get(a, i);

        if (t_json_int(e, "node") == id)
            used += t_json_int(e, "used");
    }
    return used;
}

/* Deterministic bytes: a seeded xorshift, so any byte tells which object it belongs to. */
static inline void t_fill(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

    for (size_t i = 0; i < len; i++) {
        if (i % 8 == 0) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        buf[i] = (uint8_t)(x >> (8 * (i % 8)));
    }
}

/* Random bytes from /dev/urandom (a different object each run). */
static inline void t_fill_random(uint8_t *buf, size_t len)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    size_t got = 0;
    ssize_t n;

    if (fd < 0)
        exit(1);
    while (got < len) {
        n = read(fd, buf + got, len - got);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            exit(1);
        }
        got += (size_t)n;
    }
    close(fd);
}

#endif /* MC_T_CLUSTER_H */
