/*
 * Cluster-test helpers, on top of tests/lib/t_proc.h: start the real mc-master and
 * mc-agents (cluster mode) on loopback, each with its own log and ready file in one
 * temporary directory, run mcctl and parse its JSON (jansson).
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

#include "tests/lib/t_proc.h"

#define T_MIB      (1024u * 1024u)

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
/*
 * The arguments of a cluster-mode mc-agent from argv[argc] on: joining `master`, listening
 * on `listen`, node `name` in `domain` (NULL: none given), its socket and ready file in
 * p->sock and p->ready, --dram dram and small start-up settings (landing 32M, no prefault).
 * Returns the new argc; the caller adds its own and the NULL.
 */
static inline int t_agent_argv(const char **argv, int argc, const struct t_proc *p,
                               const char *master, const char *listen, const char *name,
                               const char *domain, const char *dram)
{
    argv[argc++] = t_env_bin("MC_AGENT_BIN");
    argv[argc++] = "--master";
    argv[argc++] = master;
    argv[argc++] = "--listen";
    argv[argc++] = listen;
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
    return argc;
}

static inline void t_agent_spawn(struct t_proc *p, const char *dir, unsigned master_port,
                                 const char *name, const char *domain, const char *dram,
                                 const char *token, const char *const *extra)
{
    char master[64];
    const char *argv[48];
    int argc, i;

    snprintf(master, sizeof(master), "127.0.0.1:%u", master_port);
    snprintf(p->sock, sizeof(p->sock), "%s/%s.sock", dir, name);
    snprintf(p->ready, sizeof(p->ready), "%s/%s.ready", dir, name);
    argc = t_agent_argv(argv, 0, p, master, "127.0.0.1:0", name, domain, dram);
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
