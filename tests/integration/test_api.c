/*
 * Integration tests of libmc's synchronous API against the real mc-agent (standalone,
 * 64 MiB of DRAM): round trips small and in pieces, the error codes callers branch on,
 * threads sharing a client, processes sharing the store, eviction under pressure, deadlines
 * and a lost agent. Every test starts its own agent (t_agent.h) and runs forked (Check).
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mc/mc.h>

#include "t_agent.h"

#define MIB        (1024u * 1024u)
#define DRAM       "64M"
#define DRAM_BYTES (64u * MIB)

static struct t_agent g_agent;
static mc_client_t *g_c;

static void setup(void)
{
    int err;

    t_agent_start(&g_agent, DRAM, NULL);
    err = mc_connect(g_agent.sock, &g_c);
    if (err != 0)
        t_agent_dump_log(&g_agent);
    ck_assert_msg(err == 0, "mc_connect: %s", mc_strerror(err));
}

static void teardown(void)
{
    int rc;

    mc_close(g_c);
    g_c = NULL;
    rc = t_agent_stop(&g_agent);
    ck_assert_msg(rc == 0, "mc-agent did not exit cleanly on SIGTERM (%d)", rc);
}

/* Deterministic bytes: a seeded xorshift, so any byte tells which object it belongs to. */
static void fill(uint8_t *buf, size_t len, uint64_t seed)
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

static uint8_t *alloc_filled(size_t len, uint64_t seed)
{
    uint8_t *p = malloc(len);

    ck_assert_ptr_nonnull(p);
    fill(p, len, seed);
    return p;
}

/* put then get back and compare */
static void roundtrip(size_t len, uint64_t seed)
{
    uint8_t *in = alloc_filled(len, seed);
    uint8_t *out = malloc(len + 16);
    size_t got = 0;
    char key[64];
    int err;

    ck_assert_ptr_nonnull(out);
    snprintf(key, sizeof(key), "roundtrip/%zu/%llu", len, (unsigned long long)seed);
    err = mc_put(g_c, key, in, len, NULL);
    ck_assert_msg(err == 0, "put %zu bytes: %s", len, mc_strerror(err));
    memset(out, 0xaa, len + 16);
    err = mc_get(g_c, key, out, len + 16, &got);
    ck_assert_msg(err == 0, "get %zu bytes: %s", len, mc_strerror(err));
    ck_assert_uint_eq(got, len);
    ck_assert_msg(memcmp(in, out, len) == 0, "bytes differ after a %zu-byte round trip", len);
    ck_assert_uint_eq(out[len], 0xaa); /* nothing written past the object */
    free(in);
    free(out);
}

START_TEST(test_api_roundtrip_small)
{
    roundtrip(1, 1);
    roundtrip(100, 2);
    roundtrip(4096, 3);
    roundtrip(MIB, 4); /* exactly one staging slot (default slot size) */
}
END_TEST

START_TEST(test_api_roundtrip_3mib)
{
    roundtrip(3 * MIB, 5);
    roundtrip(3 * MIB + 12345, 6); /* a last piece shorter than a slot */
}
END_TEST

START_TEST(test_api_roundtrip_40mib)
{
    roundtrip(40 * MIB, 7);
}
END_TEST

START_TEST(test_api_get_missing_not_found)
{
    uint8_t buf[16];
    size_t len = 12345;

    ck_assert_int_eq(mc_get(g_c, "never-stored", buf, sizeof(buf), &len), MC_ERR_NOT_FOUND);
    ck_assert_uint_eq(len, 12345); /* untouched */
}
END_TEST

START_TEST(test_api_put_existing_exists)
{
    uint8_t a[100], b[200], out[256];
    size_t len = 0;

    fill(a, sizeof(a), 10);
    fill(b, sizeof(b), 11);
    ck_assert_int_eq(mc_put(g_c, "k", a, sizeof(a), NULL), 0);
    ck_assert_int_eq(mc_put(g_c, "k", b, sizeof(b), NULL), MC_ERR_EXISTS);
    ck_assert_int_eq(mc_get(g_c, "k", out, sizeof(out), &len), 0);
    ck_assert_uint_eq(len, sizeof(a));
    ck_assert(memcmp(out, a, sizeof(a)) == 0);
}
END_TEST

START_TEST(test_api_upsert_new_value)
{
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    uint8_t *a = alloc_filled(100, 12), *b = alloc_filled(2 * MIB + 1, 13);
    uint8_t *out = malloc(3 * MIB);
    mc_obj_info_t info;
    size_t len = 0;

    o.flags = MC_PUT_UPSERT;
    ck_assert_int_eq(mc_put(g_c, "u", a, 100, NULL), 0);
    ck_assert_int_eq(mc_put(g_c, "u", b, 2 * MIB + 1, &o), 0);
    ck_assert_int_eq(mc_get(g_c, "u", out, 3 * MIB, &len), 0);
    ck_assert_uint_eq(len, 2 * MIB + 1);
    ck_assert(memcmp(out, b, len) == 0);
    ck_assert_int_eq(mc_stat(g_c, "u", &info), 0);
    ck_assert_uint_eq(info.version, 2);
    ck_assert_uint_eq(info.size, 2 * MIB + 1);
    /* an upsert on an absent key is a plain first version */
    ck_assert_int_eq(mc_put(g_c, "u2", a, 100, &o), 0);
    ck_assert_int_eq(mc_get(g_c, "u2", out, 3 * MIB, &len), 0);
    ck_assert_uint_eq(len, 100);
    free(a);
    free(b);
    free(out);
}
END_TEST

START_TEST(test_api_key_invalid)
{
    char long_key[MC_KEY_MAX + 2], max_key[MC_KEY_MAX + 1];
    uint8_t buf[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    mc_obj_info_t info;
    size_t len;

    memset(long_key, 'x', MC_KEY_MAX + 1);
    long_key[MC_KEY_MAX + 1] = '\0'; /* 513 bytes */
    memset(max_key, 'y', MC_KEY_MAX);
    max_key[MC_KEY_MAX] = '\0'; /* 512 bytes: valid */
    const char *bad[] = {"", long_key, NULL};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(mc_put(g_c, bad[i], buf, sizeof(buf), NULL), MC_ERR_INVALID);
        ck_assert_int_eq(mc_get(g_c, bad[i], out, sizeof(out), &len), MC_ERR_INVALID);
        ck_assert_int_eq(mc_exist(g_c, bad[i]), MC_ERR_INVALID);
        ck_assert_int_eq(mc_remove(g_c, bad[i]), MC_ERR_INVALID);
        ck_assert_int_eq(mc_stat(g_c, bad[i], &info), MC_ERR_INVALID);
    }
    ck_assert_int_eq(mc_put(g_c, max_key, buf, sizeof(buf), NULL), 0);
    ck_assert_int_eq(mc_get(g_c, max_key, out, sizeof(out), &len), 0);
    ck_assert(memcmp(out, buf, sizeof(buf)) == 0);
    /* any byte but NUL may appear in a key */
    ck_assert_int_eq(mc_put(g_c, "\x01\xff key/with spaces", buf, sizeof(buf), NULL), 0);
    ck_assert_int_eq(mc_exist(g_c, "\x01\xff key/with spaces"), 1);
}
END_TEST

START_TEST(test_api_args_invalid)
{
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    uint8_t buf[8] = {0};
    size_t len;

    ck_assert_int_eq(mc_put(g_c, "k", buf, 0, NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_put(g_c, "k", NULL, 8, NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_put(NULL, "k", buf, 8, NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_get(g_c, "k", NULL, 8, &len), MC_ERR_INVALID);
    ck_assert_int_eq(mc_stat(g_c, "k", NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_exist(NULL, "k"), MC_ERR_INVALID);
    ck_assert_int_eq(mc_connect(NULL, NULL), MC_ERR_INVALID);
    o.flags = 1u << 20;
    ck_assert_int_eq(mc_put(g_c, "k", buf, 8, &o), MC_ERR_INVALID);
    o.flags = MC_PUT_PIN_SOFT | MC_PUT_PIN_HARD;
    ck_assert_int_eq(mc_put(g_c, "k", buf, 8, &o), MC_ERR_INVALID);
    o.flags = 0;
    o.reserved[3] = 1;
    ck_assert_int_eq(mc_put(g_c, "k", buf, 8, &o), MC_ERR_INVALID);
    ck_assert_int_eq(mc_exist(g_c, "k"), 0); /* none of them stored anything */
}
END_TEST

START_TEST(test_api_put_larger_than_segment_too_large)
{
    size_t len = DRAM_BYTES + 16 * MIB;
    uint8_t *buf = alloc_filled(len, 20);

    ck_assert_int_eq(mc_put(g_c, "huge", buf, len, NULL), MC_ERR_TOO_LARGE);
    ck_assert_int_eq(mc_exist(g_c, "huge"), 0);
    /* the client is still fine */
    ck_assert_int_eq(mc_put(g_c, "after-huge", buf, 1000, NULL), 0);
    free(buf);
}
END_TEST

START_TEST(test_api_get_small_buffer_too_large)
{
    uint8_t in[1000], out[999];
    size_t len = 0;

    fill(in, sizeof(in), 21);
    ck_assert_int_eq(mc_put(g_c, "k", in, sizeof(in), NULL), 0);
    memset(out, 0x5c, sizeof(out));
    ck_assert_int_eq(mc_get(g_c, "k", out, sizeof(out), &len), MC_ERR_TOO_LARGE);
    ck_assert_uint_eq(len, sizeof(in));
    for (size_t i = 0; i < sizeof(out); i++)
        ck_assert_uint_eq(out[i], 0x5c); /* buf is not written */
    /* the size query */
    len = 0;
    ck_assert_int_eq(mc_get(g_c, "k", NULL, 0, &len), MC_ERR_TOO_LARGE);
    ck_assert_uint_eq(len, sizeof(in));
    /* leases of refused gets were released: many more gets than lease slots succeed */
    for (int i = 0; i < 300; i++)
        ck_assert_int_eq(mc_get(g_c, "k", NULL, 0, &len), MC_ERR_TOO_LARGE);
    ck_assert_int_eq(mc_get(g_c, "k", in, sizeof(in), &len), 0);
}
END_TEST

START_TEST(test_api_wrong_socket_unavailable)
{
    char path[sizeof(g_agent.dir) + 16], long_path[300];
    mc_client_t *c = NULL;

    ck_assert_int_eq(mc_connect("/nonexistent-dir/a.sock", &c), MC_ERR_UNAVAILABLE);
    snprintf(path, sizeof(path), "%s/no-such.sock", g_agent.dir);
    ck_assert_int_eq(mc_connect(path, &c), MC_ERR_UNAVAILABLE);
    /* a file that is not a socket */
    ck_assert_int_eq(mc_connect(g_agent.ready, &c), MC_ERR_UNAVAILABLE);
    ck_assert_ptr_null(c);
    memset(long_path, 'a', sizeof(long_path) - 1);
    long_path[0] = '/';
    long_path[sizeof(long_path) - 1] = '\0';
    ck_assert_int_eq(mc_connect(long_path, &c), MC_ERR_INVALID);
    ck_assert_int_eq(mc_connect("", &c), MC_ERR_INVALID);
    /* the environment variable is the default */
    setenv("MC_AGENT_SOCKET", g_agent.sock, 1);
    ck_assert_int_eq(mc_connect(NULL, &c), 0);
    ck_assert_int_eq(mc_exist(c, "x"), 0);
    mc_close(c);
    mc_close(NULL);
}
END_TEST

START_TEST(test_api_exist_remove_stat)
{
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    uint8_t buf[3000];
    mc_obj_info_t info;

    fill(buf, sizeof(buf), 30);
    ck_assert_int_eq(mc_exist(g_c, "s"), 0);
    ck_assert_int_eq(mc_stat(g_c, "s", &info), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_remove(g_c, "s"), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_put(g_c, "s", buf, sizeof(buf), NULL), 0);
    ck_assert_int_eq(mc_exist(g_c, "s"), 1);
    memset(&info, 0xff, sizeof(info));
    ck_assert_int_eq(mc_stat(g_c, "s", &info), 0);
    ck_assert_uint_eq(info.size, sizeof(buf));
    ck_assert_uint_eq(info.version, 1);
    ck_assert_uint_eq(info.replicas, 1);
    ck_assert_uint_eq(info.flags, 0);
    ck_assert_uint_eq(info.ttl_remaining_ms, 0);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(info.reserved[i], 0);
    ck_assert_int_eq(mc_remove(g_c, "s"), 0);
    ck_assert_int_eq(mc_exist(g_c, "s"), 0);
    ck_assert_int_eq(mc_stat(g_c, "s", &info), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_remove(g_c, "s"), MC_ERR_NOT_FOUND);

    /* pins and TTL show in stat */
    o.flags = MC_PUT_PIN_SOFT;
    o.ttl_ms = 60000;
    ck_assert_int_eq(mc_put(g_c, "p", buf, sizeof(buf), &o), 0);
    ck_assert_int_eq(mc_stat(g_c, "p", &info), 0);
    ck_assert_uint_eq(info.flags, MC_PUT_PIN_SOFT);
    ck_assert_msg(info.ttl_remaining_ms > 0 && info.ttl_remaining_ms <= 60000,
                  "ttl_remaining_ms %llu", (unsigned long long)info.ttl_remaining_ms);
    o.flags = MC_PUT_PIN_HARD;
    o.ttl_ms = 0;
    ck_assert_int_eq(mc_put(g_c, "h", buf, sizeof(buf), &o), 0);
    ck_assert_int_eq(mc_stat(g_c, "h", &info), 0);
    ck_assert_uint_eq(info.flags, MC_PUT_PIN_HARD);
    /* remove works pinned or not */
    ck_assert_int_eq(mc_remove(g_c, "h"), 0);
    ck_assert_int_eq(mc_exist(g_c, "h"), 0);
}
END_TEST

START_TEST(test_api_no_checksum)
{
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    size_t len = 2 * MIB + 7, got = 0;
    uint8_t *in = alloc_filled(len, 40), *out = malloc(len);
    mc_obj_info_t info;

    o.flags = MC_PUT_NO_CHECKSUM;
    ck_assert_int_eq(mc_put(g_c, "nc", in, len, &o), 0);
    ck_assert_int_eq(mc_get(g_c, "nc", out, len, &got), 0);
    ck_assert_uint_eq(got, len);
    ck_assert(memcmp(in, out, len) == 0);
    ck_assert_int_eq(mc_stat(g_c, "nc", &info), 0);
    ck_assert_uint_eq(info.flags, MC_PUT_NO_CHECKSUM);
    ck_assert_int_eq(mc_put(g_c, "nc-small", in, 10, &o), 0);
    ck_assert_int_eq(mc_get(g_c, "nc-small", out, len, &got), 0);
    ck_assert_uint_eq(got, 10);
    ck_assert(memcmp(in, out, 10) == 0);
    free(in);
    free(out);
}
END_TEST

START_TEST(test_api_replicas_unplaceable_no_space)
{
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    uint8_t buf[100] = {1};

    /* one node, one failure domain: a second replica has nowhere to go */
    o.replicas = 2;
    ck_assert_int_eq(mc_put(g_c, "r2", buf, sizeof(buf), &o), MC_ERR_NO_SPACE);
    o.replicas = 9; /* more than the ring ABI carries: refused by libmc itself */
    ck_assert_int_eq(mc_put(g_c, "r9", buf, sizeof(buf), &o), MC_ERR_NO_SPACE);
    ck_assert_int_eq(mc_exist(g_c, "r2"), 0);
    o.replicas = 1;
    ck_assert_int_eq(mc_put(g_c, "r1", buf, sizeof(buf), &o), 0);
}
END_TEST

/* --- threads on one client ------------------------------------------------------------ */

#define NTHREADS 8
#define NITER    40

struct thr_arg {
    int id;
    char failure[200];
};

static void *thr_main(void *p)
{
    struct thr_arg *t = p;
    /* sizes mix single-slot puts and pieces */
    size_t sizes[] = {64, 5000, MIB, 2 * MIB + 3};
    uint8_t *in = malloc(3 * MIB), *out = malloc(3 * MIB);
    char key[64];
    size_t len;
    int err;

    if (in == NULL || out == NULL) {
        snprintf(t->failure, sizeof(t->failure), "malloc");
        goto out;
    }
    for (int i = 0; i < NITER; i++) {
        size_t sz = sizes[(i + t->id) % 4];

        snprintf(key, sizeof(key), "thr/%d/%d", t->id, i);
        fill(in, sz, (uint64_t)t->id * 1000 + (uint64_t)i);
        err = mc_put(g_c, key, in, sz, NULL);
        if (err != 0) {
            snprintf(t->failure, sizeof(t->failure), "put %s: %s", key, mc_strerror(err));
            goto out;
        }
        err = mc_get(g_c, key, out, 3 * MIB, &len);
        if (err != 0 || len != sz || memcmp(in, out, sz) != 0) {
            snprintf(t->failure, sizeof(t->failure), "get %s: %s (len %zu of %zu)", key,
                     mc_strerror(err), err == 0 ? len : 0, sz);
            goto out;
        }
        if ((err = mc_exist(g_c, key)) != 1) {
            snprintf(t->failure, sizeof(t->failure), "exist %s: %d (%s)", key, err,
                     mc_strerror(err));
            goto out;
        }
        err = mc_get(g_c, "shared", out, 3 * MIB, &len);
        if (err != 0 || len != 777) {
            snprintf(t->failure, sizeof(t->failure), "get shared: %s", mc_strerror(err));
            goto out;
        }
        /* removed at once: 8 threads keep at most ~20 MiB live in the 64 MiB pool, so
         * nothing is evicted ("shared" included) */
        if ((err = mc_remove(g_c, key)) != 0) {
            snprintf(t->failure, sizeof(t->failure), "remove %s: %s", key, mc_strerror(err));
            goto out;
        }
    }
out:
    free(in);
    free(out);
    return NULL;
}

START_TEST(test_api_threads_share_client)
{
    pthread_t th[NTHREADS];
    struct thr_arg args[NTHREADS];
    uint8_t shared[777];

    fill(shared, sizeof(shared), 99);
    ck_assert_int_eq(mc_put(g_c, "shared", shared, sizeof(shared), NULL), 0);
    for (int i = 0; i < NTHREADS; i++) {
        args[i].id = i;
        args[i].failure[0] = '\0';
        ck_assert_int_eq(pthread_create(&th[i], NULL, thr_main, &args[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NTHREADS; i++)
        ck_assert_msg(args[i].failure[0] == '\0', "thread %d: %s", i, args[i].failure);
}
END_TEST

/*
 * An agent that lets the client have one op slot (max_inflight 2: libmc keeps one back)
 * and two staging slots. A put in pieces then finds its own uncollected piece holding the
 * only op slot: it must collect it rather than wait for a slot (which deadlocked until the
 * deadline). Two threads, so ops also wait for slots freed by another thread's owner rather
 * than by a CQE. Not more threads: the agent has as many put handles and leases as
 * max_inflight, and answers MC_ERR_BUSY beyond them.
 */
#define NSCARCE 2

START_TEST(test_api_threads_scarce_slots)
{
    pthread_t th[NSCARCE];
    struct thr_arg args[NSCARCE];
    uint8_t shared[777];
    uint8_t *big = alloc_filled(3 * MIB, 98), *out = malloc(3 * MIB);
    size_t len;

    fill(shared, sizeof(shared), 99);
    ck_assert_int_eq(mc_put(g_c, "shared", shared, sizeof(shared), NULL), 0);
    /* one thread, three pieces, one op slot */
    ck_assert_int_eq(mc_put(g_c, "big", big, 3 * MIB, NULL), 0);
    ck_assert_int_eq(mc_get(g_c, "big", out, 3 * MIB, &len), 0);
    ck_assert(len == 3 * MIB && memcmp(big, out, len) == 0);
    for (int i = 0; i < NSCARCE; i++) {
        args[i].id = i;
        args[i].failure[0] = '\0';
        ck_assert_int_eq(pthread_create(&th[i], NULL, thr_main, &args[i]), 0);
    }
    for (int i = 0; i < NSCARCE; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NSCARCE; i++)
        ck_assert_msg(args[i].failure[0] == '\0', "thread %d: %s", i, args[i].failure);
    free(big);
    free(out);
}
END_TEST

static void setup_scarce(void)
{
    const char *extra[] = {"--set", "max_inflight=2", "--set", "staging_slots=2", NULL};
    int err;

    t_agent_start(&g_agent, DRAM, extra);
    err = mc_connect(g_agent.sock, &g_c);
    ck_assert_msg(err == 0, "mc_connect: %s", mc_strerror(err));
}

/* --- processes ------------------------------------------------------------------------- */

#define NPROCS        4
#define PROC_SAME_LEN (MIB + 100) /* in pieces, so a racing put may see MC_ERR_BUSY */

/* A child: its own client; distinct keys; then a race on one key. Exit code: 64 + id of the
 * value it read back when its own put of the shared key won, 32 + that id when it lost
 * (MC_ERR_EXISTS / MC_ERR_BUSY), 1 on any failure. */
static int proc_child(const char *sock, int id)
{
    uint8_t *in = malloc(PROC_SAME_LEN), *out = malloc(PROC_SAME_LEN);
    mc_client_t *c;
    uint64_t deadline;
    char key[64];
    size_t len;
    int err, won, seen = -1;

    if (in == NULL || out == NULL || mc_connect(sock, &c) != 0)
        return 1;
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "proc/%d/%d", id, i);
        fill(in, 4000 + (size_t)i, (uint64_t)id * 100 + (uint64_t)i);
        if (mc_put(c, key, in, 4000 + (size_t)i, NULL) != 0)
            return 1;
        if (mc_get(c, key, out, PROC_SAME_LEN, &len) != 0 || len != 4000 + (size_t)i ||
            memcmp(in, out, len) != 0)
            return 1;
    }
    fill(in, PROC_SAME_LEN, 5000 + (uint64_t)id);
    err = mc_put(c, "proc/same", in, PROC_SAME_LEN, NULL);
    if (err != 0 && err != MC_ERR_EXISTS && err != MC_ERR_BUSY)
        return 1;
    won = err == 0;
    /* a loser that saw BUSY reads once the winner has published */
    deadline = t_now_ms() + 5000;
    do {
        err = mc_get(c, "proc/same", out, PROC_SAME_LEN, &len);
    } while (err == MC_ERR_NOT_FOUND && t_now_ms() < deadline);
    if (err != 0 || len != PROC_SAME_LEN)
        return 1;
    for (int j = 0; j < NPROCS; j++) {
        fill(in, PROC_SAME_LEN, 5000 + (uint64_t)j);
        if (memcmp(in, out, PROC_SAME_LEN) == 0)
            seen = j;
    }
    if (seen < 0)
        return 1;
    mc_close(c);
    return (won ? 64 : 32) + seen;
}

START_TEST(test_api_processes_share_store)
{
    pid_t pids[NPROCS];
    int codes[NPROCS], winners = 0, winner = -1, status;

    for (int i = 0; i < NPROCS; i++) {
        fflush(NULL);
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0)
            _exit(proc_child(g_agent.sock, i));
    }
    for (int i = 0; i < NPROCS; i++) {
        ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
        ck_assert_msg(WIFEXITED(status), "child %d died", i);
        codes[i] = WEXITSTATUS(status);
        ck_assert_msg(codes[i] >= 32, "child %d failed (exit %d)", i, codes[i]);
        if (codes[i] >= 64) {
            winners++;
            winner = i;
        }
    }
    ck_assert_int_eq(winners, 1);
    for (int i = 0; i < NPROCS; i++)
        ck_assert_int_eq(codes[i] % 32, winner); /* everyone read the winner's bytes */
    /* and the parent's client sees every child's keys */
    ck_assert_int_eq(mc_exist(g_c, "proc/0/0"), 1);
    ck_assert_int_eq(mc_exist(g_c, "proc/3/19"), 1);
}
END_TEST

/* --- eviction -------------------------------------------------------------------------- */

START_TEST(test_api_eviction_under_pressure)
{
    const size_t obj = 4 * MIB;
    const int n = (int)(3 * DRAM_BYTES / obj); /* three times the segment */
    uint8_t *in = malloc(obj), *out = malloc(obj);
    int found = 0, missing = 0, err;
    char key[64];
    size_t len;

    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "evict/%d", i);
        fill(in, obj, 7000 + (uint64_t)i);
        err = mc_put(g_c, key, in, obj, NULL);
        ck_assert_msg(err == 0, "put %d of %d: %s", i, n, mc_strerror(err));
    }
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "evict/%d", i);
        err = mc_get(g_c, key, out, obj, &len);
        if (err == MC_ERR_NOT_FOUND) {
            missing++;
            continue;
        }
        ck_assert_msg(err == 0, "get %d: %s", i, mc_strerror(err));
        fill(in, obj, 7000 + (uint64_t)i);
        ck_assert_uint_eq(len, obj);
        ck_assert_msg(memcmp(in, out, obj) == 0, "object %d read back wrong", i);
        found++;
    }
    ck_assert_msg(missing >= n / 2, "only %d of %d evicted from a %u-byte pool", missing, n,
                  DRAM_BYTES);
    ck_assert_int_eq(mc_exist(g_c, "evict/0"), 0); /* the oldest went first */
    ck_assert_int_eq(mc_get(g_c, "evict/0", out, obj, &len), MC_ERR_NOT_FOUND);
    snprintf(key, sizeof(key), "evict/%d", n - 1);
    ck_assert_int_eq(mc_exist(g_c, key), 1); /* the newest is there */
    ck_assert_int_gt(found, 0);
    free(in);
    free(out);
}
END_TEST

/* A TTL ends to the ms (not at the master's next 10 ms tick), and TTLs above MC_TTL_MAX_MS
 * are refused (they used to be capped, or wrap to "no TTL" near 2^64). */
START_TEST(test_api_ttl_precise_and_bounded)
{
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    const char *keys[1] = {"t-huge"};
    const void *bufs[1];
    size_t lens[1] = {64};
    uint8_t buf[64];
    mc_obj_info_t info;
    mc_op_t *op;
    uint64_t t0;
    int res[1];

    fill(buf, sizeof(buf), 70);
    bufs[0] = buf;
    for (int i = 0; i < 5; i++) {
        char key[32];

        snprintf(key, sizeof(key), "t1/%d", i);
        o.ttl_ms = 1;
        ck_assert_int_eq(mc_put(g_c, key, buf, sizeof(buf), &o), 0);
        t0 = t_now_ms();
        while (t_now_ms() - t0 < 6) /* 5 ms after the put returned, at least */
            t_poll_pause();
        ck_assert_msg(mc_get(g_c, key, buf, sizeof(buf), NULL) == MC_ERR_NOT_FOUND,
                      "a 1 ms TTL object read %llu ms after its put",
                      (unsigned long long)(t_now_ms() - t0));
        ck_assert_int_eq(mc_exist(g_c, key), 0);
    }

    o.ttl_ms = MC_TTL_MAX_MS + 1;
    ck_assert_int_eq(mc_put(g_c, "t-huge", buf, sizeof(buf), &o), MC_ERR_INVALID);
    ck_assert_int_eq(mc_put_async(g_c, "t-huge", buf, sizeof(buf), &o, &op), MC_ERR_INVALID);
    ck_assert_int_eq(mc_batch_put(g_c, 1, keys, bufs, lens, &o, res), 0);
    ck_assert_int_eq(res[0], MC_ERR_INVALID);
    o.ttl_ms = UINT64_MAX;
    ck_assert_int_eq(mc_put(g_c, "t-huge", buf, sizeof(buf), &o), MC_ERR_INVALID);
    ck_assert_int_eq(mc_exist(g_c, "t-huge"), 0);
    o.ttl_ms = MC_TTL_MAX_MS;
    ck_assert_int_eq(mc_put(g_c, "t-huge", buf, sizeof(buf), &o), 0);
    ck_assert_int_eq(mc_stat(g_c, "t-huge", &info), 0);
    ck_assert_uint_le(info.ttl_remaining_ms, MC_TTL_MAX_MS);
    ck_assert_uint_gt(info.ttl_remaining_ms, MC_TTL_MAX_MS - 60000);
}
END_TEST

/* --- deadlines and a lost agent --------------------------------------------------------- */

START_TEST(test_api_timeout_stopped_agent)
{
    const size_t big = 3 * MIB;
    uint8_t *buf = alloc_filled(big, 50);
    mc_client_t *c;
    size_t len;
    uint64_t t0;
    char key[32];
    int err;

    setenv("MC_OP_TIMEOUT_MS", "300", 1);
    ck_assert_int_eq(mc_connect(g_agent.sock, &c), 0);
    ck_assert_int_eq(mc_put(c, "before", buf, 100, NULL), 0);

    kill(g_agent.pid, SIGSTOP);
    t0 = t_now_ms();
    err = mc_put(c, "stopped", buf, 100, NULL);
    ck_assert_int_eq(err, MC_ERR_TIMEOUT);
    ck_assert_int_eq(mc_get(c, "before", buf, big, &len), MC_ERR_TIMEOUT);
    ck_assert_int_eq(mc_put(c, "stopped-big", buf, big, NULL), MC_ERR_TIMEOUT);
    ck_assert_msg(t_now_ms() - t0 < 3000, "three 300 ms deadlines took %llu ms",
                  (unsigned long long)(t_now_ms() - t0));
    kill(g_agent.pid, SIGCONT);

    /* not poisoned: the abandoned ops' slots come back as their CQEs arrive, so more
     * puts than there are staging slots succeed */
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "after/%d", i);
        err = mc_put(c, key, buf, i % 2 ? 100 : big, NULL);
        ck_assert_msg(err == 0, "put %d after SIGCONT: %s", i, mc_strerror(err));
    }
    ck_assert_int_eq(mc_get(c, "before", buf, big, &len), 0);
    ck_assert_uint_eq(len, 100);
    mc_close(c);
    free(buf);
}
END_TEST

START_TEST(test_api_agent_gone_unavailable)
{
    uint8_t buf[100];
    uint64_t t0;

    fill(buf, sizeof(buf), 60);
    ck_assert_int_eq(mc_put(g_c, "k", buf, sizeof(buf), NULL), 0);
    t_agent_kill(&g_agent);
    t0 = t_now_ms();
    ck_assert_int_eq(mc_exist(g_c, "k"), MC_ERR_UNAVAILABLE);
    ck_assert_msg(t_now_ms() - t0 < 2000, "noticed a dead agent after %llu ms",
                  (unsigned long long)(t_now_ms() - t0));
    /* poisoned: every later call says so at once */
    ck_assert_int_eq(mc_put(g_c, "k2", buf, sizeof(buf), NULL), MC_ERR_UNAVAILABLE);
    ck_assert_int_eq(mc_get(g_c, "k", buf, sizeof(buf), NULL), MC_ERR_UNAVAILABLE);
    mc_close(g_c);
    g_c = NULL;
    /* and no agent answers a new connect */
    ck_assert_int_eq(mc_connect(g_agent.sock, &g_c), MC_ERR_UNAVAILABLE);
    g_c = NULL;
}
END_TEST

/* mc_client_status tells "reconnect" (the agent is gone: non-zero) from "retry" (0). */
START_TEST(test_api_client_status_reconnect_or_retry)
{
    mc_client_t *idle;

    ck_assert_int_eq(mc_client_status(NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_client_status(g_c), 0);
    ck_assert_int_eq(mc_connect(g_agent.sock, &idle), 0);
    ck_assert_int_eq(mc_client_status(idle), 0);
    t_agent_kill(&g_agent);
    ck_assert_int_eq(mc_exist(g_c, "k"), MC_ERR_UNAVAILABLE);
    ck_assert_int_eq(mc_client_status(g_c), MC_ERR_UNAVAILABLE);
    /* a client that made no call since: the lost connection shows all the same */
    ck_assert_int_eq(mc_client_status(idle), MC_ERR_UNAVAILABLE);
    mc_close(idle);
    mc_close(g_c);
    /* reconnect, to a new agent: a fresh client is usable */
    t_agent_start(&g_agent, DRAM, NULL);
    ck_assert_int_eq(mc_connect(g_agent.sock, &g_c), 0);
    ck_assert_int_eq(mc_client_status(g_c), 0);
    ck_assert_int_eq(mc_exist(g_c, "k"), 0);
    ck_assert_int_eq(mc_client_status(g_c), 0);
}
END_TEST

/* The agent's ready file says "clients can connect": a clean stop (SIGTERM) removes it. */
START_TEST(test_api_agent_clean_exit_removes_ready_file)
{
    int status = -1;

    ck_assert_int_eq(access(g_agent.ready, F_OK), 0);
    mc_close(g_c);
    g_c = NULL;
    kill(g_agent.pid, SIGTERM);
    ck_assert(t_agent_reap(&g_agent, t_now_ms() + T_AGENT_STOP_MS, &status));
    g_agent.pid = 0;
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_msg(access(g_agent.ready, F_OK) != 0, "ready file %s left after a clean exit",
                  g_agent.ready);
}
END_TEST

/* Whether the file at path contains needle. */
static bool file_has(const char *path, const char *needle)
{
    char buf[16384];
    size_t n;
    FILE *f = fopen(path, "r");

    if (f == NULL)
        return false;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* A second agent on a live agent's socket fails at once, before it allocates (and
 * prefaults) its DRAM, with exit status 1; the first keeps serving. */
START_TEST(test_api_agent_socket_taken_fails_fast)
{
    const char *bin = getenv("MC_AGENT_BIN");
    char log[600];
    uint8_t buf[100];
    mc_client_t *c2;
    uint64_t t0, took;
    int status = -1, fd;
    pid_t pid;

    fill(buf, sizeof(buf), 61);
    ck_assert_int_eq(mc_put(g_c, "k", buf, sizeof(buf), NULL), 0);
    snprintf(log, sizeof(log), "%s/second.log", g_agent.dir);
    t0 = t_now_ms();
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0)
            dup2(fd, 2);
        execl(bin, bin, "--standalone", "--socket", g_agent.sock, "--dram", "4G",
              (char *)NULL);
        _exit(127);
    }
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (t_now_ms() - t0 > 20000) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            ck_abort_msg("the second agent still runs after 20 s");
        }
        t_poll_pause();
    }
    took = t_now_ms() - t0;
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "second agent: status %d",
                  status);
    ck_assert_msg(file_has(log, "another agent is listening"), "no 'socket taken' message");
    ck_assert_msg(!file_has(log, "prefaulted"), "the second agent allocated its DRAM first");
    ck_assert_msg(took < 1000, "the second agent took %llu ms to fail",
                  (unsigned long long)took);
    /* the first agent still serves, old clients and new */
    ck_assert_int_eq(mc_exist(g_c, "k"), 1);
    ck_assert_int_eq(mc_connect(g_agent.sock, &c2), 0);
    ck_assert_int_eq(mc_get(c2, "k", buf, sizeof(buf), NULL), 0);
    mc_close(c2);
}
END_TEST

/* This test kills the agent itself: teardown only cleans up. */
static void teardown_killed(void)
{
    mc_close(g_c);
    g_c = NULL;
    t_agent_stop(&g_agent);
}

static Suite *api_suite(void)
{
    Suite *s = suite_create("integration");
    TCase *tc = tcase_create("api");
    TCase *tk = tcase_create("agent_gone");
    TCase *ts = tcase_create("scarce_slots");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_api_roundtrip_small);
    tcase_add_test(tc, test_api_roundtrip_3mib);
    tcase_add_test(tc, test_api_roundtrip_40mib);
    tcase_add_test(tc, test_api_get_missing_not_found);
    tcase_add_test(tc, test_api_put_existing_exists);
    tcase_add_test(tc, test_api_upsert_new_value);
    tcase_add_test(tc, test_api_key_invalid);
    tcase_add_test(tc, test_api_args_invalid);
    tcase_add_test(tc, test_api_put_larger_than_segment_too_large);
    tcase_add_test(tc, test_api_get_small_buffer_too_large);
    tcase_add_test(tc, test_api_wrong_socket_unavailable);
    tcase_add_test(tc, test_api_exist_remove_stat);
    tcase_add_test(tc, test_api_no_checksum);
    tcase_add_test(tc, test_api_replicas_unplaceable_no_space);
    tcase_add_test(tc, test_api_threads_share_client);
    tcase_add_test(tc, test_api_processes_share_store);
    tcase_add_test(tc, test_api_eviction_under_pressure);
    tcase_add_test(tc, test_api_timeout_stopped_agent);
    tcase_add_test(tc, test_api_ttl_precise_and_bounded);
    tcase_add_test(tc, test_api_agent_socket_taken_fails_fast);
    suite_add_tcase(s, tc);

    tcase_add_checked_fixture(ts, setup_scarce, teardown);
    tcase_set_timeout(ts, 60);
    tcase_add_test(ts, test_api_threads_scarce_slots);
    suite_add_tcase(s, ts);

    tcase_add_checked_fixture(tk, setup, teardown_killed);
    tcase_set_timeout(tk, 60);
    tcase_add_test(tk, test_api_agent_gone_unavailable);
    tcase_add_test(tk, test_api_client_status_reconnect_or_retry);
    tcase_add_test(tk, test_api_agent_clean_exit_removes_ready_file);
    suite_add_tcase(s, tk);
    return s;
}

int main(void)
{
    SRunner *sr;
    int failed;

    if (getenv("MC_AGENT_BIN") == NULL || getenv("MC_AGENT_BIN")[0] == '\0') {
        fprintf(stderr, "MC_AGENT_BIN is not set: skipping\n");
        return 77;
    }
    sr = srunner_create(api_suite());

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
