/*
 * Helpers shared by the disk tier's tests through real agents (tests/disk): objects of a key
 * range put and read back byte for byte, seeded batches whose old and new bytes tell apart,
 * the wait until a key is on disk only, and (with tests/lib/t_fcluster.h) an agent's disk
 * stats, the cluster of an owner with a disk and a --dram 0 client node, and the suite
 * runner of the cluster tests. The includer includes the header of t_fill first
 * (tests/integration/t_util.h or tests/lib/t_fcluster.h).
 */
#ifndef MC_TEST_T_DISK_H
#define MC_TEST_T_DISK_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mc/mc.h>

/* The bytes of key prefix/i of len bytes (put_range, get_range). */
static inline uint64_t t_disk_seed(int i, size_t len)
{
    return (uint64_t)i * 104729u + len;
}

/* A put, retried while the pool is momentarily full of objects on their way to disk
 * (MC_ERR_NO_SPACE: docs/disk.md, "Offload"). */
static inline int put_retry(mc_client_t *c, const char *key, const void *buf, size_t len)
{
    int err, tries = 0;

    while ((err = mc_put(c, key, buf, len, NULL)) == MC_ERR_NO_SPACE && tries++ < 2000)
        usleep(2000);
    return err;
}

static inline void put_range(mc_client_t *c, const char *prefix, int from, int to, size_t len)
{
    uint8_t *buf = malloc(len);
    char key[64];

    ck_assert_ptr_nonnull(buf);
    for (int i = from; i < to; i++) {
        int err;

        snprintf(key, sizeof(key), "%s/%d", prefix, i);
        t_fill(buf, len, t_disk_seed(i, len));
        err = put_retry(c, key, buf, len);
        ck_assert_msg(err == 0, "put %s: %s", key, mc_strerror(err));
    }
    free(buf);
}

/* Gets every key of [from, to): returns how many were there, each checked byte for byte. */
static inline int get_range(mc_client_t *c, const char *prefix, int from, int to, size_t len)
{
    uint8_t *buf = malloc(len), *want = malloc(len);
    char key[64];
    int present = 0;

    ck_assert_ptr_nonnull(buf);
    ck_assert_ptr_nonnull(want);
    for (int i = from; i < to; i++) {
        size_t got = 0;
        int err;

        snprintf(key, sizeof(key), "%s/%d", prefix, i);
        err = mc_get(c, key, buf, len, &got);
        if (err == MC_ERR_NOT_FOUND)
            continue;
        ck_assert_msg(err == 0, "get %s: %s", key, mc_strerror(err));
        ck_assert_uint_eq(got, len);
        t_fill(want, len, t_disk_seed(i, len));
        ck_assert_msg(memcmp(want, buf, len) == 0, "bytes of %s", key);
        present++;
    }
    free(buf);
    free(want);
    return present;
}

/* Puts keys prefix/0..n-1 (n <= 64) of len bytes filled from seed + i, all in one batch,
 * replacing what they held. */
static inline void batch_put_seeded(mc_client_t *c, const char *prefix, int n, size_t len,
                                    uint64_t seed)
{
    char keys[64][64];
    const char *kp[64];
    const void *bp[64];
    size_t lens[64];
    int results[64], rc = -1;
    uint8_t *bufs = malloc((size_t)n * len);
    mc_put_opts_t o = MC_PUT_OPTS_INIT;

    o.flags = MC_PUT_UPSERT; /* a new version of a key that has one */
    ck_assert_ptr_nonnull(bufs);
    ck_assert_int_le(n, 64);
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof(keys[i]), "%s/%d", prefix, i);
        kp[i] = keys[i];
        t_fill(bufs + (size_t)i * len, len, seed + (uint64_t)i);
        bp[i] = bufs + (size_t)i * len;
        lens[i] = len;
    }
    for (int tries = 0; tries < 2000; tries++) {
        rc = mc_batch_put(c, (size_t)n, kp, bp, lens, &o, results);
        if (rc == n)
            break;
        for (int i = 0; i < n; i++)
            ck_assert_msg(results[i] == 0 || results[i] == MC_ERR_NO_SPACE, "batch put %s: %s",
                          keys[i], mc_strerror(results[i]));
        usleep(2000);
    }
    ck_assert_int_eq(rc, n);
    free(bufs);
}

/* 0: the key is absent; 1: it holds the bytes of seed; 2: of old_seed (never acceptable
 * where the callers use it: they fail on it). Other bytes fail here. */
static inline int get_seeded(mc_client_t *c, const char *key, size_t len, uint64_t seed,
                             uint64_t old_seed)
{
    uint8_t *buf = malloc(len), *want = malloc(len);
    size_t got = 0;
    int err, r;

    ck_assert_ptr_nonnull(buf);
    ck_assert_ptr_nonnull(want);
    err = mc_get(c, key, buf, len, &got);
    if (err == MC_ERR_NOT_FOUND) {
        free(buf);
        free(want);
        return 0;
    }
    ck_assert_msg(err == 0, "get %s: %s", key, mc_strerror(err));
    ck_assert_uint_eq(got, len);
    t_fill(want, len, seed);
    r = memcmp(want, buf, len) == 0 ? 1 : -1;
    t_fill(want, len, old_seed);
    if (r < 0 && memcmp(want, buf, len) == 0)
        r = 2;
    ck_assert_msg(r > 0, "wrong bytes of %s", key);
    free(buf);
    free(want);
    return r;
}

/* Pins keys prefix/0..n-1 (all present): one pin. */
static inline mc_pin_t pin_range(mc_client_t *c, const char *prefix, int n)
{
    char keys[64][64];
    const char *kp[64];
    mc_pin_t pin = 0;

    ck_assert_int_le(n, 64);
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof(keys[i]), "%s/%d", prefix, i);
        kp[i] = keys[i];
    }
    ck_assert_int_eq(mc_prefix_pin(c, (size_t)n, kp, &pin), n);
    return pin;
}

/* Keys prefix/0..n-1 each have a disk replica (waiting up to 5 s for each). */
static inline void assert_on_disk(mc_client_t *c, const char *prefix, int n)
{
    for (int i = 0; i < n; i++) {
        char key[64];
        mc_obj_info_t info;

        snprintf(key, sizeof(key), "%s/%d", prefix, i);
        /* the master sends its copies as it makes them: give the last ones a moment */
        for (int tries = 0; tries < 100; tries++) {
            ck_assert_int_eq(mc_stat(c, key, &info), 0);
            if (MC_OBJ_DISK_REPLICAS(info.flags) >= 1)
                break;
            usleep(50000);
        }
        ck_assert_msg(MC_OBJ_DISK_REPLICAS(info.flags) >= 1, "%s not on disk yet", key);
    }
}

/* Puts filler (filler/N from *next on, 16 at a time, len bytes; *next moves past them: a
 * key put again would be EXISTS) through put_c until key, asked through stat_c, has only
 * disk replicas (its DRAM replica goes once the clock passes it again); settle(ctx) waits
 * for the offloads after each round. Fails after 40 rounds. */
static inline void until_disk_only(mc_client_t *stat_c, mc_client_t *put_c, const char *key,
                                   const char *filler, int *next, size_t len,
                                   void (*settle)(void *), void *ctx)
{
    mc_obj_info_t info;

    for (int more = 0; more < 40; more++) {
        ck_assert_int_eq(mc_stat(stat_c, key, &info), 0);
        if (MC_OBJ_DISK_REPLICAS(info.flags) == info.replicas)
            return;
        put_range(put_c, filler, *next, *next + 16, len);
        *next += 16;
        settle(ctx);
    }
    ck_assert_int_eq(mc_stat(stat_c, key, &info), 0);
    ck_assert_msg(MC_OBJ_DISK_REPLICAS(info.flags) == info.replicas, "%s not on disk only",
                  key);
}

#ifdef MC_T_FCLUSTER_H
/* A field of the `disk` stats object of the agent at sock (through mcctl stats). */
static inline json_int_t t_disk_stat(const char *sock, const char *name)
{
    json_t *j = t_fc_stats(sock);
    json_t *d = json_object_get(j, "disk");
    json_int_t v;

    ck_assert_msg(d != NULL, "no disk object in the stats of %s", sock);
    v = json_integer_value(json_object_get(d, name));
    json_decref(j);
    return v;
}

/* Waits (up to 5 s) until the disk of the agent at sock has no offload in flight. */
static inline void t_disk_settle(const char *sock)
{
    for (int i = 0; i < 500 && t_disk_stat(sock, "pending") != 0; i++)
        usleep(10000);
}

/*
 * The cluster of the disk tier's cluster tests: mc-master (with promote: disk_promote on,
 * MC_DISK_PROMOTE), an owner A with 16 MiB of DRAM and owner_flags (its --disk among them,
 * the file at path: fc->dir/A.disk, written into path, path_len bytes, before A starts) and,
 * unless c is NULL, a client node C with --dram 0 and client_flags (may be NULL) whose every
 * get is a remote read; all up when it returns.
 */
static inline void t_disk_cluster_start(struct t_fc *fc, const char *name, uint32_t ttl_ms,
                                        bool promote, char *path, size_t path_len,
                                        struct t_proc *a, const char *const *owner_flags,
                                        struct t_proc *c, const char *const *client_flags)
{
    memset(a, 0, sizeof(*a));
    if (c != NULL)
        memset(c, 0, sizeof(*c));
    t_fc_init(fc, name, ttl_ms);
    snprintf(path, path_len, "%s/A.disk", fc->dir);
    if (promote)
        setenv("MC_DISK_PROMOTE", "true", 1); /* mc-master's setting */
    t_fc_master_start(fc, NULL, "127.0.0.1:0", "master");
    if (promote)
        unsetenv("MC_DISK_PROMOTE");
    t_fc_agent_spawn(fc, a, NULL, "127.0.0.1", "A", NULL, "16M", owner_flags);
    if (c != NULL)
        t_fc_agent_spawn(fc, c, NULL, "127.0.0.1", "C", NULL, "0", client_flags);
    t_fc_agent_wait(a);
    if (c != NULL)
        t_fc_agent_wait(c);
}
#endif

#endif /* MC_TEST_T_DISK_H */
