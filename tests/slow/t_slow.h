/*
 * Helpers of the slow suite, on top of tests/cluster/t_cluster.h (daemons, ready files,
 * mcctl JSON): a standalone mc-agent as a t_proc, the agent's statistics through libmc's
 * internal STATS call, self-describing object contents, the seed of a run (tests/lib/t_rng.h;
 * MC_SLOW_SEED replays a run), and /proc readings of a daemon (RSS, open fds,
 * its segment's mapping).
 *
 * Header-only (static inline, so a test that needs only part of it gets no warning).
 */
#ifndef MC_T_SLOW_H
#define MC_T_SLOW_H

#include <check.h>
#include <ctype.h>
#include <math.h>

#include <mc/mc.h>

#include "libmc/tool.h"
#include "tests/cluster/t_cluster.h"
#include "tests/lib/t_rng.h"

/* The run's seed (MC_SLOW_SEED replays it): tests/lib/t_rng.h. */
static inline uint64_t t_slow_seed(const char *test)
{
    return t_seed(test, "MC_SLOW_SEED");
}

/* --- self-describing contents ------------------------------------------------------------- */

/* Word j of the pattern of `seed`: depends on the seed and on the position, so bytes of
 * another object, or the right bytes at the wrong offset, never compare equal. */
static inline uint64_t t_pattern_word(uint64_t seed, uint64_t j)
{
    return t_splitmix(seed ^ (j * 0xd6e8feb86659fd93ull));
}

static inline void t_pattern_fill(uint8_t *buf, size_t len, uint64_t seed)
{
    size_t j, words = len / 8;
    uint64_t w;

    for (j = 0; j < words; j++) {
        w = t_pattern_word(seed, j);
        memcpy(buf + 8 * j, &w, 8);
    }
    if (len % 8 != 0) {
        w = t_pattern_word(seed, words);
        memcpy(buf + 8 * words, &w, len % 8);
    }
}

/* The first offset where buf differs from the pattern of seed, or len when it matches. */
static inline size_t t_pattern_mismatch(const uint8_t *buf, size_t len, uint64_t seed)
{
    size_t j, words = len / 8, i;
    uint64_t w, got;

    for (j = 0; j < words; j++) {
        w = t_pattern_word(seed, j);
        memcpy(&got, buf + 8 * j, 8);
        if (got != w) {
            for (i = 0; i < 8 && ((const uint8_t *)&w)[i] == buf[8 * j + i]; i++)
                ;
            return 8 * j + i;
        }
    }
    if (len % 8 != 0) {
        w = t_pattern_word(seed, words);
        for (i = 0; i < len % 8; i++)
            if (((const uint8_t *)&w)[i] != buf[8 * words + i])
                return 8 * words + i;
    }
    return len;
}

/* --- a standalone agent ------------------------------------------------------------------- */

/*
 * Start `mc-agent --standalone` named `name` with its socket, ready file and log in dir,
 * --dram dram and extra arguments (NULL-terminated, may be NULL), and wait until its ready
 * file (our pid) is there; exits the process on failure, after printing the agent's log.
 */
static inline void t_standalone_start(struct t_proc *p, const char *dir, const char *name,
                                      const char *dram, const char *const *extra)
{
    const char *argv[40];
    uint64_t deadline;
    int argc = 0, i, pid_in_file;
    char st[48];
    FILE *f;

    snprintf(p->sock, sizeof(p->sock), "%s/%s.sock", dir, name);
    snprintf(p->ready, sizeof(p->ready), "%s/%s.ready", dir, name);
    argv[argc++] = t_env_bin("MC_AGENT_BIN");
    argv[argc++] = "--standalone";
    argv[argc++] = "--socket";
    argv[argc++] = p->sock;
    argv[argc++] = "--dram";
    argv[argc++] = dram;
    argv[argc++] = "--ready-file";
    argv[argc++] = p->ready;
    for (i = 0; extra != NULL && extra[i] != NULL && argc < 39; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    t_proc_spawn(p, dir, name, NULL, argv);
    deadline = t_now_ms() + T_READY_MS;
    for (;;) {
        f = fopen(p->ready, "r");
        if (f != NULL) {
            int n = fscanf(f, "%d", &pid_in_file);

            fclose(f);
            if (n == 1 && pid_in_file == (int)p->pid)
                return;
            fprintf(stderr, "t_slow: %s: bad ready file\n", name);
            break;
        }
        if (waitpid(p->pid, &p->status, WNOHANG) == p->pid) {
            p->pid = 0;
            fprintf(stderr, "t_slow: %s exited before it was ready (%s)\n", name,
                    t_status_str(p->status, st, sizeof(st)));
            t_proc_dump_log(p, 8192);
            exit(1);
        }
        if (t_now_ms() >= deadline) {
            fprintf(stderr, "t_slow: %s not ready after %d ms\n", name, T_READY_MS);
            break;
        }
        t_poll_pause();
    }
    t_proc_dump_log(p, 8192);
    t_proc_kill(p);
    exit(1);
}

/* --- statistics --------------------------------------------------------------------------- */

/* The agent's STATS (what `mcctl stats` prints), parsed; NULL when the call failed. */
static inline json_t *t_stats(mc_client_t *c)
{
    char *js = NULL;
    size_t len = 0;
    json_t *o;

    if (mc_client_stats_json(c, &js, &len) != 0)
        return NULL;
    o = json_loadb(js, len, 0, NULL);
    free(js);
    return o;
}

/* One integer of the agent's STATS; fails the test when the call fails or it is missing. */
static inline int64_t t_stat_int(mc_client_t *c, const char *field)
{
    json_t *o = t_stats(c), *v;
    int64_t x;

    ck_assert_msg(o != NULL, "STATS failed");
    v = json_object_get(o, field);
    ck_assert_msg(json_is_integer(v), "STATS has no integer \"%s\"", field);
    x = (int64_t)json_integer_value(v);
    json_decref(o);
    return x;
}

/* --- /proc readings of a daemon ----------------------------------------------------------- */

/* A "Name:   N kB" field of /proc/PID/status, in bytes; -1 when unreadable. */
static inline int64_t t_proc_status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t flen = strlen(field);
    int64_t v = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, field, flen) == 0 && line[flen] == ':') {
            v = strtoll(line + flen + 1, NULL, 10) * 1024;
            break;
        }
    }
    fclose(f);
    return v;
}

/* The number of open file descriptors of pid; -1 when unreadable. */
static inline int t_proc_nfds(pid_t pid)
{
    char path[64];
    struct dirent *e;
    int n = 0;
    DIR *d;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    d = opendir(path);
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/*
 * The writable mapping of the memfd named `name` (e.g. "mc-dram") in pid's address space:
 * its start address, length and file offset. Returns 0, or -1 when there is none.
 */
static inline int t_proc_find_memfd_map(pid_t pid, const char *name, uint64_t *start_p,
                                        uint64_t *len_p, uint64_t *pgoff_p)
{
    char path[64], line[512], want[128], perms[8], dev[16], file[300];
    unsigned long long lo, hi, off, ino;
    int found = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    snprintf(want, sizeof(want), "/memfd:%s", name);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        file[0] = '\0';
        if (sscanf(line, "%llx-%llx %7s %llx %15s %llu %299[^\n]", &lo, &hi, perms, &off, dev,
                   &ino, file) < 6)
            continue;
        /* "/memfd:mc-dram (deleted)": the name, then nothing or a space */
        if (strncmp(file, want, strlen(want)) != 0 ||
            (file[strlen(want)] != '\0' && file[strlen(want)] != ' '))
            continue;
        if (perms[1] != 'w')
            continue;
        *start_p = lo;
        *len_p = hi - lo;
        *pgoff_p = off;
        found = 0;
        break;
    }
    fclose(f);
    return found;
}

#endif /* MC_T_SLOW_H */
