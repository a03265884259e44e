/*
 * Remote reads received straight into a client's arena (`arena_reads`, docs/decisions.md
 * "Remote reads land in the client's arena"): a client of a `--dram 0` node reads objects
 * held by another node into buffers from mc_buf_alloc, and the owner's bytes land in those
 * buffers, not in the reader's landing segment. The contract under test:
 *   - every size is exact, and the path was taken (reads_into_arena counts each item),
 *     also into a buffer of exactly the object's size (its checksum trailer then lands
 *     apart, and not one byte past the buffer is written); a plain buffer takes the
 *     landing path;
 *   - bytes corrupted at the owner are caught by the client's in-place check
 *     (MC_ERR_CORRUPT, never success);
 *   - an owner stopped (SIGSTOP) or killed (SIGKILL) mid-transfer: the get ends by its
 *     deadline with an allowed error, and once it returned the buffer is never written
 *     again (a pattern written afterwards survives the owner's resumption);
 *   - a client killed mid-get: the agent lives on, the arena's mapping is released once
 *     the transfers into it are final (arena_bytes back to 0), nothing stays in the
 *     landing segment.
 *   - a kill-point sweep of readers: child processes reading mixed sizes into arena buffers
 *     (exact or with the trailer's room) killed -9 at random moments: each time the agent
 *     ends up holding nothing of the dead reader (arena_bytes, landing_used_bytes back to
 *     0 by the op deadline) and serves the next reader exactly.
 * And puts the other way (docs/decisions.md "Remote puts are sent from the client's
 * arena"): a PUT from an arena buffer through the `--dram 0` node is sent from the arena
 * (puts_from_arena counts it), every size reads back exactly through the owner; a client
 * killed mid-put leaves nothing held and no object published with other bytes.
 *
 * The daemons are the real mc-master and mc-agents on loopback (tests/lib/t_fcluster.h).
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mc/mc.h>

#include "shm/ring.h"
#include "tests/lib/t_fcluster.h"
#include "tests/lib/t_rng.h"

#define T_FA_BATCH 32
#define T_FA_BIG (16u << 20)
#define T_FA_NBIG 8 /* 128 MiB a batch: tens of ms on loopback tcp */
#define T_FA_STREAMED ((80u << 20) + 12) /* over libmc's 64 MiB one-shot put: streamed */

static const char *const t_fa_reader_set[] = {"--set", "arena_reads=true", "--set",
                                              "landing=256M", NULL};

struct t_fa_obj {
    char key[48];
    size_t len;
    uint8_t *data;
};

static void t_fa_put_n(mc_client_t *c, struct t_fa_obj *o, const char *prefix, int i,
                       size_t len, uint64_t seed, unsigned replicas)
{
    mc_put_opts_t opt = MC_PUT_OPTS_INIT;
    int err;

    snprintf(o->key, sizeof(o->key), "%s/%d", prefix, i);
    o->len = len;
    o->data = malloc(len);
    ck_assert_ptr_nonnull(o->data);
    t_fill(o->data, len, seed);
    opt.replicas = replicas;
    err = mc_put(c, o->key, o->data, len, &opt);
    ck_assert_msg(err == 0, "put %s: %s", o->key, mc_strerror(err));
}

static void t_fa_put(mc_client_t *c, struct t_fa_obj *o, const char *prefix, int i, size_t len,
                     uint64_t seed)
{
    t_fa_put_n(c, o, prefix, i, len, seed, 1);
}

/* Room for an object and its checksum trailer (what the agent lands in an arena). */
static size_t t_fa_room(size_t len)
{
    return (size_t)mc_shm_alloc_len(len, true);
}

static void t_fa_cluster_with(struct t_fc *fc, const char *name, unsigned ttl_ms,
                              struct t_proc *a, struct t_proc *b, const char *dram_a,
                              const char *const *reader_set)
{
    t_fc_init(fc, name, ttl_ms);
    t_fc_master_start(fc, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn(fc, a, NULL, "127.0.0.1", "A", "dA", dram_a, NULL);
    t_fc_agent_spawn(fc, b, NULL, "127.0.0.1", "B", NULL, "0", reader_set);
    t_fc_agent_wait(a);
    t_fc_agent_wait(b);
}

static void t_fa_cluster(struct t_fc *fc, const char *name, unsigned ttl_ms, struct t_proc *a,
                         struct t_proc *b, const char *dram_a)
{
    t_fa_cluster_with(fc, name, ttl_ms, a, b, dram_a, t_fa_reader_set);
}

/* landing_used_bytes and arena_bytes of sock reach 0 within ms. */
static void t_fa_settled(const char *sock, const char *field, uint64_t ms)
{
    uint64_t deadline = t_now_ms() + ms;
    json_int_t v;

    while ((v = t_fc_stat(sock, field)) != 0) {
        ck_assert_msg(t_now_ms() < deadline, "%s still %lld after %llu ms", field, (long long)v,
                      (unsigned long long)ms);
        t_fc_sleep_ms(50);
    }
}

/* --- 1. sizes, batches, and which path each buffer takes ---------------------------------- */

START_TEST(test_fault_arena_get_sizes)
{
    static const size_t sizes[] = {1, 4096, 65536, 1u << 20, T_FA_BIG};
    enum { NS = sizeof(sizes) / sizeof(sizes[0]) };
    struct t_proc a = {0}, b = {0};
    struct t_fa_obj objs[NS], batch[T_FA_BATCH];
    uint64_t salt = t_fc_salt();
    json_int_t n0, n1, h0, h1;
    mc_client_t *ca, *cb;
    struct t_fc fc;
    uint8_t *buf, *plain;
    size_t len;
    int i, err;

    t_fa_cluster(&fc, "arena_sizes", 20000, &a, &b, "256M");
    ca = t_fc_conn(&a);
    for (i = 0; i < NS; i++)
        t_fa_put(ca, &objs[i], "as", i, sizes[i], salt + (uint64_t)i);
    for (i = 0; i < T_FA_BATCH; i++)
        t_fa_put(ca, &batch[i], "ab", i, 65536 + (size_t)i * 8, salt + 100u + (uint64_t)i);
    /* an object of 0 bytes cannot be stored: nothing to read */
    {
        uint8_t one = 1;

        ck_assert_int_eq(mc_put(ca, "as/empty", &one, 0, NULL), MC_ERR_INVALID);
    }
    mc_close(ca);

    cb = t_fc_conn(&b);
    ck_assert_int_eq(mc_buf_alloc(cb, t_fa_room(T_FA_BIG), (void **)&buf), 0);
    for (i = 0; i < NS; i++) {
        n0 = t_fc_stat(b.sock, "reads_into_arena");
        memset(buf, 0xa5, t_fa_room(sizes[i]));
        len = 0;
        err = mc_get(cb, objs[i].key, buf, t_fa_room(sizes[i]), &len);
        ck_assert_msg(err == 0, "%zu bytes: %s", sizes[i], mc_strerror(err));
        ck_assert_uint_eq(len, sizes[i]);
        ck_assert_msg(memcmp(buf, objs[i].data, sizes[i]) == 0, "%zu bytes: wrong bytes",
                      sizes[i]);
        n1 = t_fc_stat(b.sock, "reads_into_arena");
        ck_assert_msg(n1 == n0 + 1, "%zu bytes: reads_into_arena %lld -> %lld (landing path?)",
                      sizes[i], (long long)n0, (long long)n1);
    }
    /* capacity 0: nothing moves, the size is told */
    n0 = t_fc_stat(b.sock, "reads_into_arena");
    len = 0;
    ck_assert_int_eq(mc_get(cb, objs[1].key, buf, 0, &len), MC_ERR_TOO_LARGE);
    ck_assert_uint_eq(len, sizes[1]);
    /* exactly the object's size: no room for the trailer, which lands apart (the client
     * verifies the bytes in place against it); nothing past the buffer is written */
    for (i = 0; i < NS; i++) {
        n0 = t_fc_stat(b.sock, "reads_into_arena");
        h0 = t_fc_stat(b.sock, "arena_tails_in_header");
        memset(buf, 0xa5, sizes[i] + 64);
        len = 0;
        err = mc_get(cb, objs[i].key, buf, sizes[i], &len);
        ck_assert_msg(err == 0, "%zu bytes, exact buffer: %s", sizes[i], mc_strerror(err));
        ck_assert_uint_eq(len, sizes[i]);
        ck_assert_msg(memcmp(buf, objs[i].data, sizes[i]) == 0,
                      "%zu bytes, exact buffer: wrong bytes", sizes[i]);
        for (size_t k = sizes[i]; k < sizes[i] + 64; k++)
            ck_assert_msg(buf[k] == 0xa5, "%zu bytes, exact buffer: byte %zu past it written",
                          sizes[i], k - sizes[i]);
        n1 = t_fc_stat(b.sock, "reads_into_arena");
        ck_assert_msg(n1 == n0 + 1,
                      "%zu bytes, exact buffer: reads_into_arena %lld -> %lld (landing path?)",
                      sizes[i], (long long)n0, (long long)n1);
        /* the trailer came in the reply's header: the bytes were received whole */
        h1 = t_fc_stat(b.sock, "arena_tails_in_header");
        ck_assert_msg(h1 == h0 + 1, "%zu bytes, exact buffer: arena_tails_in_header %lld -> %lld",
                      sizes[i], (long long)h0, (long long)h1);
    }
    n0 = t_fc_stat(b.sock, "reads_into_arena");
    /* a plain buffer: the landing path, as before */
    plain = malloc(t_fa_room(65536));
    ck_assert_ptr_nonnull(plain);
    ck_assert_int_eq(mc_get(cb, objs[2].key, plain, t_fa_room(65536), &len), 0);
    ck_assert(memcmp(plain, objs[2].data, 65536) == 0);
    free(plain);
    ck_assert_int_eq(t_fc_stat(b.sock, "reads_into_arena"), n0);

    /* a batch of 32 into one arena allocation, each item with its trailer's room */
    {
        const char *keys[T_FA_BATCH];
        void *bufs[T_FA_BATCH];
        size_t caps[T_FA_BATCH], lens[T_FA_BATCH], stride = t_fa_room(65536 + 8 * T_FA_BATCH);
        int results[T_FA_BATCH], got;
        uint8_t *all;

        ck_assert_int_eq(mc_buf_alloc(cb, stride * T_FA_BATCH, (void **)&all), 0);
        /* rounds 0-2 with the trailer's room, round 3 into buffers of exactly each
         * object's size (the trailers land apart) */
        for (int round = 0; round < 4; round++) {
            memset(all, 0x3c, stride * T_FA_BATCH);
            for (i = 0; i < T_FA_BATCH; i++) {
                keys[i] = batch[i].key;
                bufs[i] = all + (size_t)i * stride;
                caps[i] = round < 3 ? stride : batch[i].len;
            }
            n0 = t_fc_stat(b.sock, "reads_into_arena");
            h0 = t_fc_stat(b.sock, "arena_tails_in_header");
            got = mc_batch_get(cb, T_FA_BATCH, keys, bufs, caps, lens, results);
            ck_assert_int_eq(got, T_FA_BATCH);
            for (i = 0; i < T_FA_BATCH; i++) {
                ck_assert_msg(results[i] == 0, "%s: %s", keys[i], mc_strerror(results[i]));
                ck_assert_uint_eq(lens[i], batch[i].len);
                ck_assert_msg(memcmp(bufs[i], batch[i].data, batch[i].len) == 0,
                              "%s: wrong bytes", keys[i]);
                if (round == 3)
                    ck_assert_msg(((uint8_t *)bufs[i])[batch[i].len] == 0x3c,
                                  "%s: the byte past its exact buffer written", keys[i]);
            }
            n1 = t_fc_stat(b.sock, "reads_into_arena");
            ck_assert_int_eq(n1 - n0, T_FA_BATCH);
            ck_assert_int_eq(t_fc_stat(b.sock, "arena_tails_in_header") - h0,
                             round == 3 ? T_FA_BATCH : 0);
        }
        ck_assert_int_eq(mc_buf_free(cb, all), 0);
    }
    fprintf(stderr, "arena_sizes: %lld reads into arenas, %lld from peers, %lld requests\n",
            (long long)t_fc_stat(b.sock, "reads_into_arena"),
            (long long)t_fc_stat(b.sock, "reads_from_peers"),
            (long long)t_fc_stat(b.sock, "read_requests_to_peers"));
    t_fa_settled(b.sock, "landing_used_bytes", 3000);
    ck_assert_int_eq(mc_buf_free(cb, buf), 0);
    mc_close(cb);
    t_fa_settled(b.sock, "arena_bytes", 3000);
    for (i = 0; i < NS; i++)
        free(objs[i].data);
    for (i = 0; i < T_FA_BATCH; i++)
        free(batch[i].data);
    t_fc_finish(&fc);
}
END_TEST

/* --- 1b. bytes corrupted at the owner: the in-place verification catches them ---------- */

/* The address range of pid's writable mapping of its DRAM segment (memfd "mc-dram"). */
static bool t_fa_dram_map(pid_t pid, uint64_t *start, uint64_t *end)
{
    char path[64], line[512];
    bool found = false;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return false;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        unsigned long long a, b;
        char perms[8];

        if (strstr(line, "mc-dram") != NULL &&
            sscanf(line, "%llx-%llx %7s", &a, &b, perms) == 3 && perms[1] == 'w') {
            *start = a;
            *end = b;
            found = true;
        }
    }
    fclose(f);
    return found;
}

/*
 * One byte of the object flipped in its owner's segment (through /proc/PID/mem, as
 * test_slow_corruption does): the arena get still lands in place, the client's in-place
 * check finds it, asks again without that replica, and with none left answers
 * MC_ERR_CORRUPT -- never success, and the buffer does not keep the bad bytes. The byte
 * put back, the same get is exact.
 */
START_TEST(test_fault_arena_corrupt_replica)
{
    struct t_proc a = {0}, b = {0};
    struct t_fa_obj o;
    uint64_t start = 0, end = 0, hit = 0, room = t_fa_room(1u << 20);
    uint8_t *seg, *buf, orig, bad;
    json_int_t n0;
    mc_client_t *ca, *cb;
    struct t_fc fc;
    size_t len;
    int fd, err;

    t_fa_cluster(&fc, "arena_corrupt", 20000, &a, &b, "64M");
    ca = t_fc_conn(&a);
    t_fa_put(ca, &o, "acx", 0, 1u << 20, t_fc_salt());
    mc_close(ca);
    ck_assert_msg(t_fa_dram_map(a.pid, &start, &end), "no mc-dram mapping in A");
    {
        char path[64];

        snprintf(path, sizeof(path), "/proc/%d/mem", (int)a.pid);
        fd = open(path, O_RDWR | O_CLOEXEC);
    }
    if (fd < 0) {
        fprintf(stderr, "arena_corrupt: /proc/%d/mem not writable here: not run\n", (int)a.pid);
        free(o.data);
        t_fc_finish(&fc);
        return;
    }
    seg = malloc(end - start);
    ck_assert_ptr_nonnull(seg);
    ck_assert_int_eq(pread(fd, seg, end - start, (off_t)start), (ssize_t)(end - start));
    {
        uint8_t *p = memmem(seg, end - start, o.data, 4096);

        ck_assert_ptr_nonnull(p);
        ck_assert(memcmp(p, o.data, o.len) == 0);
        hit = start + (uint64_t)(p - seg) + o.len / 2;
    }
    free(seg);
    ck_assert_int_eq(pread(fd, &orig, 1, (off_t)hit), 1);
    bad = (uint8_t)(orig ^ 0xff);
    ck_assert_int_eq(pwrite(fd, &bad, 1, (off_t)hit), 1);

    cb = t_fc_conn(&b);
    ck_assert_int_eq(mc_buf_alloc(cb, room, (void **)&buf), 0);
    n0 = t_fc_stat(b.sock, "reads_into_arena");
    len = 0;
    err = mc_get(cb, o.key, buf, room, &len);
    ck_assert_msg(err == MC_ERR_CORRUPT, "a flipped byte: %s", mc_strerror(err));
    ck_assert_int_ge(t_fc_stat(b.sock, "reads_into_arena"), n0 + 1); /* it landed in place */
    ck_assert_msg(memcmp(buf + o.len / 2 - 16, o.data + o.len / 2 - 16, 32) != 0,
                  "the buffer kept the object's bytes after MC_ERR_CORRUPT");
    /* a buffer of exactly its size: the trailer lands apart, the check is the same */
    memcpy(buf, o.data, o.len);
    n0 = t_fc_stat(b.sock, "reads_into_arena");
    err = mc_get(cb, o.key, buf, o.len, &len);
    ck_assert_msg(err == MC_ERR_CORRUPT, "a flipped byte, exact buffer: %s", mc_strerror(err));
    ck_assert_int_ge(t_fc_stat(b.sock, "reads_into_arena"), n0 + 1);
    ck_assert_msg(memcmp(buf + o.len / 2 - 16, o.data + o.len / 2 - 16, 32) != 0,
                  "the exact buffer kept the object's bytes after MC_ERR_CORRUPT");
    t_fa_settled(b.sock, "landing_used_bytes", 3000); /* the trailers' blocks released */

    ck_assert_int_eq(pwrite(fd, &orig, 1, (off_t)hit), 1);
    close(fd);
    ck_assert_int_eq(mc_get(cb, o.key, buf, room, &len), 0);
    ck_assert_uint_eq(len, o.len);
    ck_assert(memcmp(buf, o.data, o.len) == 0);
    memset(buf, 0, room);
    ck_assert_int_eq(mc_get(cb, o.key, buf, o.len, &len), 0);
    ck_assert_uint_eq(len, o.len);
    ck_assert(memcmp(buf, o.data, o.len) == 0);
    ck_assert_int_eq(mc_buf_free(cb, buf), 0);
    mc_close(cb);
    free(o.data);
    t_fc_finish(&fc);
}
END_TEST

/* --- 2. the owner stopped or killed mid-transfer ---------------------------------------- */

struct t_fa_call {
    mc_client_t *c;
    const struct t_fa_obj *objs;
    uint8_t *all;   /* T_FA_NBIG buffers of t_fa_room(T_FA_BIG), in one arena allocation */
    int results[T_FA_NBIG];
    bool exact[T_FA_NBIG];
    bool exact_caps; /* each buffer's capacity is its object's size: the trailers land apart */
    uint64_t ms;
};

static void *t_fa_call_run(void *arg)
{
    struct t_fa_call *k = arg;
    const char *keys[T_FA_NBIG];
    void *bufs[T_FA_NBIG];
    size_t caps[T_FA_NBIG], lens[T_FA_NBIG], room = t_fa_room(T_FA_BIG);
    uint64_t t0 = t_now_ms();
    int i, got;

    for (i = 0; i < T_FA_NBIG; i++) {
        keys[i] = k->objs[i].key;
        bufs[i] = k->all + (size_t)i * room;
        caps[i] = k->exact_caps ? k->objs[i].len : room;
        lens[i] = 0;
    }
    got = mc_batch_get(k->c, T_FA_NBIG, keys, bufs, caps, lens, k->results);
    k->ms = t_now_ms() - t0;
    ck_assert_msg(got >= 0, "batch get: %s", mc_strerror(got));
    for (i = 0; i < T_FA_NBIG; i++)
        k->exact[i] = k->results[i] == 0 && lens[i] == k->objs[i].len &&
                      memcmp(bufs[i], k->objs[i].data, k->objs[i].len) == 0;
    return NULL;
}

/* Every item exact or an allowed error, within the op deadline (and libmc's grace). */
static void t_fa_check_call(const struct t_fa_call *k, const char *what)
{
    for (int i = 0; i < T_FA_NBIG; i++) {
        int e = k->results[i];

        ck_assert_msg(e != 0 || k->exact[i], "%s: %s: wrong bytes reported as success", what,
                      k->objs[i].key);
        ck_assert_msg(e == 0 || e == MC_ERR_TIMEOUT || e == MC_ERR_UNAVAILABLE ||
                          e == MC_ERR_NOT_FOUND,
                      "%s: %s: %s", what, k->objs[i].key, mc_strerror(e));
    }
    ck_assert_msg(k->ms <= T_FC_OP_MS + 1500, "%s: the batch took %llu ms (deadline %u ms)",
                  what, (unsigned long long)k->ms, T_FC_OP_MS);
}

/* k reads objs through reader b into one arena allocation: once, every item exact (warm:
 * endpoints up, every item whole). */
static void t_fa_reader_warm(struct t_fa_call *k, struct t_proc *b,
                             const struct t_fa_obj *objs)
{
    k->c = t_fc_conn(b);
    k->objs = objs;
    ck_assert_int_eq(mc_buf_alloc(k->c, t_fa_room(T_FA_BIG) * T_FA_NBIG, (void **)&k->all), 0);
    t_fa_call_run(k);
    for (int i = 0; i < T_FA_NBIG; i++)
        ck_assert_msg(k->exact[i], "warm: %s: %s", objs[i].key, mc_strerror(k->results[i]));
}

/* k's batch runs while pid gets sig, delay_us after the batch began. */
static void t_fa_call_signalled(struct t_fa_call *k, unsigned delay_us, pid_t pid, int sig)
{
    struct timespec ts = {0, (long)delay_us * 1000};
    pthread_t th;

    ck_assert_int_eq(pthread_create(&th, NULL, t_fa_call_run, k), 0);
    nanosleep(&ts, NULL);
    kill(pid, sig);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
}

/* The end of a reader's test: no landing block and no arena mapping left behind. */
static void t_fa_reader_done(struct t_fa_call *k, const struct t_proc *b, struct t_fa_obj *objs,
                             struct t_fc *fc)
{
    t_fa_settled(b->sock, "landing_used_bytes", 3000);
    ck_assert_int_eq(mc_buf_free(k->c, k->all), 0);
    mc_close(k->c);
    t_fa_settled(b->sock, "arena_bytes", 3000);
    for (int i = 0; i < T_FA_NBIG; i++)
        free(objs[i].data);
    t_fc_finish(fc);
}

/* After the call returned, the test owns the buffers: nothing may write them again. A
 * pattern (a byte per 4 KiB page) is written, or checked. */
static void t_fa_pattern(uint8_t *all, size_t len, bool check, const char *what)
{
    uint8_t page[4096];

    for (size_t i = 0; i < len; i += sizeof(page)) {
        size_t n = len - i < sizeof(page) ? len - i : sizeof(page);

        memset(page, (uint8_t)(0x5a ^ (i >> 12)), n);
        if (!check) {
            memcpy(all + i, page, n);
        } else if (memcmp(all + i, page, n) != 0) {
            size_t j = 0;

            while (all[i + j] == page[j])
                j++;
            ck_abort_msg("%s: byte %zu of the arena written after the get returned (0x%02x)",
                         what, i + j, all[i + j]);
        }
    }
}

START_TEST(test_fault_arena_owner_stopped_mid_transfer)
{
    static const unsigned delays_us[] = {2000, 8000, 20000};
    struct t_proc a = {0}, b = {0};
    struct t_fa_obj objs[T_FA_NBIG];
    struct t_fa_call k = {0};
    size_t all_len = t_fa_room(T_FA_BIG) * T_FA_NBIG;
    uint64_t salt = t_fc_salt();
    mc_client_t *ca;
    struct t_fc fc;
    int i;

    t_fa_cluster(&fc, "arena_owner_stopped", 30000, &a, &b, "256M");
    ca = t_fc_conn(&a);
    for (i = 0; i < T_FA_NBIG; i++)
        t_fa_put(ca, &objs[i], "ao", i, T_FA_BIG - (size_t)i * 8, salt + (uint64_t)i);
    mc_close(ca);
    t_fa_reader_warm(&k, &b, objs); /* straight into the arena */
    ck_assert_int_ge(t_fc_stat(b.sock, "reads_into_arena"), T_FA_NBIG);
    for (unsigned d = 0; d < sizeof(delays_us) / sizeof(delays_us[0]); d++) {
        char what[64];

        /* the second round into buffers of exactly the objects' sizes */
        k.exact_caps = d == 1;
        snprintf(what, sizeof(what), "A stopped after %u us%s", delays_us[d],
                 k.exact_caps ? " (exact buffers)" : "");
        memset(k.all, 0, all_len);
        t_fa_call_signalled(&k, delays_us[d], a.pid, SIGSTOP);
        t_fa_check_call(&k, what);
        /* the get returned: the buffers are ours. Then A resumes and sends what it had
         * left: none of it may land here */
        t_fa_pattern(k.all, all_len, false, what);
        kill(a.pid, SIGCONT);
        t_fc_sleep_ms(1500);
        t_fa_pattern(k.all, all_len, true, what);
        fprintf(stderr, "arena_owner_stopped: %s: batch in %llu ms, results", what,
                (unsigned long long)k.ms);
        for (i = 0; i < T_FA_NBIG; i++)
            fprintf(stderr, " %d", k.results[i]);
        fprintf(stderr, "; %lld cut at the deadline\n",
                (long long)t_fc_stat(b.sock, "arena_reads_cut"));
        /* A serves again */
        t_fa_call_run(&k);
        for (i = 0; i < T_FA_NBIG; i++)
            ck_assert_msg(k.exact[i], "%s, resumed: %s: %s", what, objs[i].key,
                          mc_strerror(k.results[i]));
    }
    /* a transfer caught mid-way was cut at its deadline (A stopped after 20 ms: 3 of 8
     * items whole, the fourth under way, in every run so far) */
    ck_assert_int_ge(t_fc_stat(b.sock, "arena_reads_cut"), 1);
    t_fa_reader_done(&k, &b, objs, &fc);
}
END_TEST

/* A cluster of two owners in their own domains (A, C) and a reader B (--dram 0, arena
 * reads), with T_FA_NBIG objects put through A in 2 replicas each: A's own first, C's
 * second. */
static void t_fa_two_owners(struct t_fc *fc, const char *name, const char *prefix,
                            struct t_proc *a, struct t_proc *c, struct t_proc *b,
                            struct t_fa_obj *objs, uint64_t salt)
{
    mc_client_t *ca;

    t_fc_init(fc, name, 30000);
    t_fc_master_start(fc, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn(fc, a, NULL, "127.0.0.1", "A", "dA", "256M", NULL);
    t_fc_agent_spawn(fc, c, NULL, "127.0.0.1", "C", "dC", "256M", NULL);
    t_fc_agent_spawn(fc, b, NULL, "127.0.0.1", "B", NULL, "0", t_fa_reader_set);
    t_fc_agent_wait(a);
    t_fc_agent_wait(c);
    t_fc_agent_wait(b);
    ca = t_fc_conn(a);
    for (int i = 0; i < T_FA_NBIG; i++)
        t_fa_put_n(ca, &objs[i], prefix, i, T_FA_BIG - (size_t)i * 8, salt + (uint64_t)i, 2);
    mc_close(ca);
}

/*
 * The same with a second replica on C: a transfer into the arena stalled past its turn is
 * not read beside (two transfers would then target one buffer) but cut, and the item is
 * read from C into the landing segment and copied. The batch is whole well before the
 * deadline, and A's late bytes, once it resumes, land nowhere.
 */
START_TEST(test_fault_arena_owner_stopped_other_replica)
{
    static const unsigned delays_us[] = {3000, 15000};
    struct t_proc a = {0}, b = {0}, c = {0};
    struct t_fa_obj objs[T_FA_NBIG];
    struct t_fa_call k = {0};
    size_t all_len = t_fa_room(T_FA_BIG) * T_FA_NBIG;
    uint64_t salt = t_fc_salt();
    json_int_t cut0, fo0;
    uint64_t bound;
    struct t_fc fc;
    int i;

    t_fa_two_owners(&fc, "arena_other_replica", "ar", &a, &c, &b, objs, salt);
    t_fa_reader_warm(&k, &b, objs);
    /* the failover comes at the first replica's turn (a quarter of what is left), not at the
     * deadline: the batch takes at most that turn and a few healthy batches' time (on a
     * busy host a healthy batch of 128 MiB alone takes hundreds of ms) */
    bound = T_FC_OP_MS / 4 + 3 * k.ms + 500;
    if (bound > T_FC_OP_MS)
        bound = T_FC_OP_MS;
    cut0 = t_fc_stat(b.sock, "arena_reads_cut");
    fo0 = t_fc_stat(b.sock, "read_failovers");
    for (unsigned d = 0; d < sizeof(delays_us) / sizeof(delays_us[0]); d++) {
        char what[64];

        snprintf(what, sizeof(what), "A stopped after %u us (C holds a replica)", delays_us[d]);
        memset(k.all, 0, all_len);
        t_fa_call_signalled(&k, delays_us[d], a.pid, SIGSTOP);
        fprintf(stderr, "arena_other_replica: %s: batch in %llu ms (bound %llu ms)\n", what,
                (unsigned long long)k.ms, (unsigned long long)bound);
        for (i = 0; i < T_FA_NBIG; i++)
            ck_assert_msg(k.exact[i], "%s: %s: %s", what, objs[i].key,
                          mc_strerror(k.results[i]));
        ck_assert_msg(k.ms < bound, "%s: the batch took %llu ms (bound %llu ms)", what,
                      (unsigned long long)k.ms, (unsigned long long)bound);
        t_fa_pattern(k.all, all_len, false, what);
        kill(a.pid, SIGCONT);
        t_fc_sleep_ms(1500);
        t_fa_pattern(k.all, all_len, true, what);
    }
    fprintf(stderr, "arena_other_replica: %lld cut, %lld failovers, %lld hedged\n",
            (long long)(t_fc_stat(b.sock, "arena_reads_cut") - cut0),
            (long long)(t_fc_stat(b.sock, "read_failovers") - fo0),
            (long long)t_fc_stat(b.sock, "reads_hedged"));
    ck_assert_int_ge(t_fc_stat(b.sock, "arena_reads_cut") - cut0, 1);
    ck_assert_int_eq(t_fc_stat(b.sock, "reads_hedged"), 0); /* never beside an arena read */
    t_fa_reader_done(&k, &b, objs, &fc);
}
END_TEST

/*
 * The owner stops before the reader ever reached it: B's HELLO to A (first contact, through
 * A's listener) is never answered. The reads waiting for it get their turn all the same (a
 * quarter of the time left): at its end A is dropped and every item is read from C, well
 * before the deadline. Before, they waited out the HELLO's 5 s and ended at the deadline.
 */
START_TEST(test_fault_arena_owner_stopped_before_hello)
{
    struct t_proc a = {0}, b = {0}, c = {0};
    struct t_fa_obj objs[T_FA_NBIG];
    struct t_fa_call k = {0};
    uint64_t salt = t_fc_salt();
    struct t_fc fc;
    int i;

    t_fa_two_owners(&fc, "arena_before_hello", "ah", &a, &c, &b, objs, salt);
    k.c = t_fc_conn(&b);
    k.objs = objs;
    ck_assert_int_eq(mc_buf_alloc(k.c, t_fa_room(T_FA_BIG) * T_FA_NBIG, (void **)&k.all), 0);
    kill(a.pid, SIGSTOP); /* B has not talked to A yet */
    (void)t_fa_call_run(&k);
    fprintf(stderr, "arena_before_hello: batch in %llu ms (deadline %u ms)\n",
            (unsigned long long)k.ms, T_FC_OP_MS);
    for (i = 0; i < T_FA_NBIG; i++)
        ck_assert_msg(k.exact[i], "A stopped before HELLO: %s: %s", objs[i].key,
                      mc_strerror(k.results[i]));
    ck_assert_msg(k.ms < T_FC_OP_MS, "the batch took %llu ms (deadline %u ms)",
                  (unsigned long long)k.ms, T_FC_OP_MS);
    kill(a.pid, SIGCONT);
    t_fa_reader_done(&k, &b, objs, &fc);
}
END_TEST

START_TEST(test_fault_arena_owner_killed_mid_transfer)
{
    struct t_proc a = {0}, b = {0};
    struct t_fa_obj objs[T_FA_NBIG];
    struct t_fa_call k = {0};
    size_t all_len = t_fa_room(T_FA_BIG) * T_FA_NBIG;
    uint64_t salt = t_fc_salt();
    mc_client_t *ca;
    struct t_fc fc;
    int i;

    t_fa_cluster(&fc, "arena_owner_killed", 2000, &a, &b, "256M");
    ca = t_fc_conn(&a);
    for (i = 0; i < T_FA_NBIG; i++)
        t_fa_put(ca, &objs[i], "ak", i, T_FA_BIG - (size_t)i * 8, salt + (uint64_t)i);
    mc_close(ca);
    t_fa_reader_warm(&k, &b, objs);
    k.exact_caps = true; /* the trailers land apart: their blocks are released too */
    t_fa_call_signalled(&k, 5000, a.pid, SIGKILL);
    t_proc_kill(&a); /* reaps it */
    t_fa_check_call(&k, "A killed");
    fprintf(stderr, "arena_owner_killed: batch in %llu ms, results", (unsigned long long)k.ms);
    for (i = 0; i < T_FA_NBIG; i++)
        fprintf(stderr, " %d", k.results[i]);
    fprintf(stderr, "\n");
    t_fa_pattern(k.all, all_len, false, "A killed");
    t_fc_sleep_ms(500);
    t_fa_pattern(k.all, all_len, true, "A killed");
    t_fa_reader_done(&k, &b, objs, &fc);
}
END_TEST

/* The owner killed mid-transfer on a reader whose landing segment cannot take the object
 * (16 MiB of landing, 16 MiB objects and their trailers): the failed arena transfer has
 * nowhere to be tried again, and the GET says so with MC_ERR_BUSY (transient: the object
 * may well be there, on a link that heals or another replica), never NOT_FOUND. */
START_TEST(test_fault_arena_owner_killed_landing_full)
{
    static const char *const small_landing[] = {"--set", "arena_reads=true", "--set",
                                                 "landing=16M", NULL};
    struct t_proc a = {0}, b = {0};
    struct t_fa_obj objs[T_FA_NBIG];
    struct t_fa_call k = {0};
    uint64_t salt = t_fc_salt();
    mc_client_t *ca;
    struct t_fc fc;
    int i, busy = 0;

    t_fa_cluster_with(&fc, "arena_landing_full", 2000, &a, &b, "256M", small_landing);
    ca = t_fc_conn(&a);
    for (i = 0; i < T_FA_NBIG; i++)
        t_fa_put(ca, &objs[i], "lf", i, T_FA_BIG, salt + (uint64_t)i);
    mc_close(ca);
    t_fa_reader_warm(&k, &b, objs); /* into the arena: the landing segment is not needed */
    t_fa_call_signalled(&k, 2000, a.pid, SIGKILL);
    t_proc_kill(&a); /* reaps it */
    fprintf(stderr, "arena_landing_full: batch in %llu ms, results", (unsigned long long)k.ms);
    for (i = 0; i < T_FA_NBIG; i++) {
        int e = k.results[i];

        fprintf(stderr, " %d", e);
        ck_assert_msg(e != 0 || k.exact[i], "%s: wrong bytes reported as success", objs[i].key);
        ck_assert_msg(e == 0 || e == MC_ERR_BUSY || e == MC_ERR_TIMEOUT, "%s: %s (the object "
                      "may exist: only BUSY or TIMEOUT may say it was not read)", objs[i].key,
                      mc_strerror(e));
        busy += e == MC_ERR_BUSY;
    }
    fprintf(stderr, "\n");
    ck_assert_msg(busy > 0, "no read was cut by the kill (every item: 0 or TIMEOUT)");
    t_fa_reader_done(&k, &b, objs, &fc);
}
END_TEST

/* --- 3. the client killed mid-get ------------------------------------------------------- */

/* The child: gets the objects into an arena over and over until killed (no check calls:
 * it is not the test's process). */
static void t_fa_child(const char *sock, const struct t_fa_obj *objs)
{
    const char *keys[T_FA_NBIG];
    void *bufs[T_FA_NBIG];
    size_t caps[T_FA_NBIG], lens[T_FA_NBIG], room = t_fa_room(T_FA_BIG);
    int results[T_FA_NBIG], got;
    mc_client_t *c;
    uint8_t *all;

    if (mc_connect(sock, &c) != 0 || mc_buf_alloc(c, room * T_FA_NBIG, (void **)&all) != 0)
        _exit(2);
    for (int i = 0; i < T_FA_NBIG; i++) {
        keys[i] = objs[i].key;
        bufs[i] = all + (size_t)i * room;
        caps[i] = room;
    }
    for (int n = 0;; n++) {
        got = mc_batch_get(c, T_FA_NBIG, keys, bufs, caps, lens, results);
        fprintf(stderr, "arena_client_killed: child batch %d: %d (%d)\n", n, got, results[0]);
    }
}

START_TEST(test_fault_arena_client_killed_mid_get)
{
    struct t_proc a = {0}, b = {0};
    struct t_fa_obj objs[T_FA_NBIG];
    struct t_fa_call k = {0};
    uint64_t salt = t_fc_salt(), deadline;
    json_int_t held;
    mc_client_t *ca;
    struct t_fc fc;
    int i, st;
    pid_t pid;

    t_fa_cluster(&fc, "arena_client_killed", 30000, &a, &b, "256M");
    ca = t_fc_conn(&a);
    for (i = 0; i < T_FA_NBIG; i++)
        t_fa_put(ca, &objs[i], "ac", i, T_FA_BIG - (size_t)i * 8, salt + (uint64_t)i);
    mc_close(ca);
    for (int round = 0; round < 2; round++) {
        json_int_t n0 = t_fc_stat(b.sock, "reads_into_arena");
        json_int_t r0 = t_fc_stat(b.sock, "reads_from_peers");

        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
            t_fa_child(b.sock, objs);
        /* its gets are under way (round 1: its first batch landed) */
        deadline = t_now_ms() + 20000;
        while (t_fc_stat(b.sock, "reads_into_arena") < n0 + (round == 0 ? 2 : T_FA_NBIG)) {
            ck_assert_msg(t_now_ms() < deadline, "the child's gets never landed in its arena");
            t_fc_sleep_ms(5);
        }
        if (round == 1) {
            /* its next batch stalls (A stopped): those reads hold the mapping */
            kill(a.pid, SIGSTOP);
            /* ... once they are asked of A: on a busy host the child may take longer than
             * any fixed sleep to check its first batch and send the next */
            deadline = t_now_ms() + 20000;
            while (t_fc_stat(b.sock, "reads_from_peers") < r0 + 2 * T_FA_NBIG) {
                ck_assert_msg(t_now_ms() < deadline, "the child's second batch never left B");
                t_fc_sleep_ms(5);
            }
            t_fc_sleep_ms(100);
        }
        kill(pid, SIGKILL);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        t_fc_sleep_ms(300);
        held = t_fc_stat(b.sock, "arena_bytes");
        fprintf(stderr, "arena_client_killed: round %d: %lld arena bytes still mapped 300 ms "
                "after the kill (%lld reads from peers, %lld into arenas, %lld gets)\n", round,
                (long long)held, (long long)t_fc_stat(b.sock, "reads_from_peers"),
                (long long)t_fc_stat(b.sock, "reads_into_arena"),
                (long long)t_fc_stat(b.sock, "gets"));
        if (round == 1)
            ck_assert_msg(held > 0, "the dead client's arena was unmapped while reads into it "
                          "were under way");
        /* every transfer into the dead client's arena ends (at the latest at its deadline,
         * cut: A stays stopped meanwhile), and only then is the mapping gone */
        t_fa_settled(b.sock, "arena_bytes", T_FC_OP_MS + 5000);
        if (round == 1)
            kill(a.pid, SIGCONT);
        t_fa_settled(b.sock, "landing_used_bytes", 3000);
    }
    /* B serves a new client as before */
    k.c = t_fc_conn(&b);
    k.objs = objs;
    ck_assert_int_eq(mc_buf_alloc(k.c, t_fa_room(T_FA_BIG) * T_FA_NBIG, (void **)&k.all), 0);
    t_fa_call_run(&k);
    for (i = 0; i < T_FA_NBIG; i++)
        ck_assert_msg(k.exact[i], "after: %s: %s", objs[i].key, mc_strerror(k.results[i]));
    ck_assert_int_eq(mc_buf_free(k.c, k.all), 0);
    mc_close(k.c);
    ck_assert_int_le(t_fc_stat(b.sock, "clients"), 1); /* the stats call's own */
    for (i = 0; i < T_FA_NBIG; i++)
        free(objs[i].data);
    t_fc_finish(&fc);
}
END_TEST

/* --- 4. puts sent from the client's arena (puts_from_arena) ------------------------------ */

/* Objects of every size put through B (--dram 0: every replica is A's) from arena buffers
 * are sent from the arena, not copied into an image: each read back through A is exact,
 * and puts_from_arena counts each put; a plain buffer's put takes the image path. */
START_TEST(test_fault_arena_put_sizes)
{
    static const size_t sizes[] = {1, 4096, 65536, 1u << 20, T_FA_BIG};
    enum { NS = sizeof(sizes) / sizeof(sizes[0]) };
    struct t_proc a = {0}, b = {0};
    struct t_fa_obj objs[NS], batch[T_FA_BATCH], plain, streamed;
    const char *keys[T_FA_BATCH];
    const void *bufs[T_FA_BATCH];
    size_t lens[T_FA_BATCH];
    int results[T_FA_BATCH];
    uint64_t salt = t_fc_salt();
    json_int_t n0, n1, h0, h1;
    mc_client_t *ca, *cb;
    struct t_fc fc;
    uint8_t *buf, *all, *back;
    size_t len;
    int i, err;

    t_fa_cluster(&fc, "arena_put_sizes", 20000, &a, &b, "256M");
    cb = t_fc_conn(&b);
    ck_assert_int_eq(mc_buf_alloc(cb, T_FA_BIG, (void **)&buf), 0);
    for (i = 0; i < NS; i++) {
        snprintf(objs[i].key, sizeof(objs[i].key), "aps/%d", i);
        objs[i].len = sizes[i];
        objs[i].data = malloc(sizes[i]);
        ck_assert_ptr_nonnull(objs[i].data);
        t_fill(objs[i].data, sizes[i], salt + (uint64_t)i);
        memcpy(buf, objs[i].data, sizes[i]);
        n0 = t_fc_stat(b.sock, "puts_from_arena");
        h0 = t_fc_stat(b.sock, "write_tails_in_header");
        err = mc_put(cb, objs[i].key, buf, sizes[i], NULL);
        ck_assert_msg(err == 0, "%zu bytes: %s", sizes[i], mc_strerror(err));
        n1 = t_fc_stat(b.sock, "puts_from_arena");
        ck_assert_msg(n1 == n0 + 1, "%zu bytes: puts_from_arena %lld -> %lld (image path?)",
                      sizes[i], (long long)n0, (long long)n1);
        /* the last bytes and the checksum trailer went in one write to the owner */
        h1 = t_fc_stat(b.sock, "write_tails_in_header");
        ck_assert_msg(h1 == h0 + 1, "%zu bytes: write_tails_in_header %lld -> %lld", sizes[i],
                      (long long)h0, (long long)h1);
    }
    /* a batch of 32 from one arena allocation, an object after the other */
    ck_assert_int_eq(mc_buf_alloc(cb, (size_t)T_FA_BATCH * 65536, (void **)&all), 0);
    for (i = 0; i < T_FA_BATCH; i++) {
        snprintf(batch[i].key, sizeof(batch[i].key), "apb/%d", i);
        batch[i].len = 65536;
        batch[i].data = malloc(65536);
        ck_assert_ptr_nonnull(batch[i].data);
        t_fill(batch[i].data, 65536, salt + 100u + (uint64_t)i);
        memcpy(all + (size_t)i * 65536, batch[i].data, 65536);
        keys[i] = batch[i].key;
        bufs[i] = all + (size_t)i * 65536;
        lens[i] = 65536;
    }
    n0 = t_fc_stat(b.sock, "puts_from_arena");
    h0 = t_fc_stat(b.sock, "write_tails_in_header");
    ck_assert_int_eq(mc_batch_put(cb, T_FA_BATCH, keys, bufs, lens, NULL, results), T_FA_BATCH);
    for (i = 0; i < T_FA_BATCH; i++)
        ck_assert_msg(results[i] == 0, "%s: %s", keys[i], mc_strerror(results[i]));
    ck_assert_int_eq(t_fc_stat(b.sock, "puts_from_arena"), n0 + T_FA_BATCH);
    ck_assert_int_eq(t_fc_stat(b.sock, "write_tails_in_header"), h0 + T_FA_BATCH);
    /* a plain buffer: the image path, as before */
    n0 = t_fc_stat(b.sock, "puts_from_arena");
    t_fa_put(cb, &plain, "apl", 0, 65536, salt + 200u);
    ck_assert_int_eq(t_fc_stat(b.sock, "puts_from_arena"), n0);
    /* over 64 MiB: a streamed put (PUT_START, 16 MiB PUT_DATA pieces, PUT_END), each piece
     * sent from its arena span once summed, the checksums last */
    {
        uint8_t *big;

        snprintf(streamed.key, sizeof(streamed.key), "aps/streamed");
        streamed.len = T_FA_STREAMED;
        streamed.data = malloc(T_FA_STREAMED);
        ck_assert_ptr_nonnull(streamed.data);
        t_fill(streamed.data, T_FA_STREAMED, salt + 300u);
        ck_assert_int_eq(mc_buf_alloc(cb, T_FA_STREAMED, (void **)&big), 0);
        memcpy(big, streamed.data, T_FA_STREAMED);
        n0 = t_fc_stat(b.sock, "puts_from_arena");
        err = mc_put(cb, streamed.key, big, T_FA_STREAMED, NULL);
        ck_assert_msg(err == 0, "streamed put: %s", mc_strerror(err));
        ck_assert_int_eq(t_fc_stat(b.sock, "puts_from_arena"), n0 + 1);
        memset(big, 0xee, T_FA_STREAMED);
        ck_assert_int_eq(mc_buf_free(cb, big), 0);
    }
    /* the buffers are the client's again: what it writes there now is not the objects' */
    memset(buf, 0xee, T_FA_BIG);
    memset(all, 0xee, (size_t)T_FA_BATCH * 65536);
    ck_assert_int_eq(mc_buf_free(cb, all), 0);
    ck_assert_int_eq(mc_buf_free(cb, buf), 0);
    mc_close(cb);
    t_fa_settled(b.sock, "arena_bytes", 3000);

    /* every object reads back exactly through A (the owner), checksum verified */
    ca = t_fc_conn(&a);
    back = malloc(T_FA_STREAMED);
    ck_assert_ptr_nonnull(back);
    for (i = 0; i < NS + T_FA_BATCH + 2; i++) {
        const struct t_fa_obj *o = i < NS                ? &objs[i]
                                   : i < NS + T_FA_BATCH ? &batch[i - NS]
                                   : i == NS + T_FA_BATCH ? &plain
                                                          : &streamed;

        len = 0;
        err = mc_get(ca, o->key, back, T_FA_STREAMED, &len);
        ck_assert_msg(err == 0, "%s: %s", o->key, mc_strerror(err));
        ck_assert_uint_eq(len, o->len);
        ck_assert_msg(memcmp(back, o->data, o->len) == 0, "%s: wrong bytes", o->key);
    }
    free(back);
    mc_close(ca);
    ck_assert_int_eq(t_fc_stat(b.sock, "puts_open"), 0);
    for (i = 0; i < NS; i++)
        free(objs[i].data);
    for (i = 0; i < T_FA_BATCH; i++)
        free(batch[i].data);
    free(plain.data);
    free(streamed.data);
    t_fc_finish(&fc);
}
END_TEST

/* The bytes of the child's object i of batch n (the parent checks what was published). */
static void t_fa_put_fill(uint8_t *p, size_t len, uint64_t salt, int n, int i)
{
    t_fill(p, len, salt + (uint64_t)n * T_FA_NBIG + (uint64_t)i);
}


/* A counter a forked writer and the test share (zeroed). */
static volatile int *t_fa_shared_int(void)
{
    volatile int *v = mmap(NULL, sizeof(*v), PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    ck_assert_ptr_ne((void *)v, MAP_FAILED);
    *v = 0;
    return v;
}

/* The stopped owner a resumes; then every write from the dead writer's arena ends (the owner
 * answers, or the deadline cuts it) and B holds nothing of it: no open put, no arena
 * mapped, no client but the stats call's own. */
static void t_fa_resume_nothing_held(const struct t_proc *a, const struct t_proc *b)
{
    kill(a->pid, SIGCONT);
    t_fa_settled(b->sock, "puts_open", T_FC_OP_MS + 5000);
    t_fa_settled(b->sock, "arena_bytes", 3000);
    ck_assert_int_le(t_fc_stat(b->sock, "clients_held"), 1);
    ck_assert_int_le(t_fc_stat(b->sock, "clients"), 1);
}

/* The child: puts batches of T_FA_NBIG objects of T_FA_BIG from one arena allocation until
 * killed; *batches counts the batches it started (shared with the parent). */
static void t_fa_put_child(const char *sock, uint64_t salt, volatile int *batches)
{
    const char *keys[T_FA_NBIG];
    const void *bufs[T_FA_NBIG];
    size_t lens[T_FA_NBIG];
    char names[T_FA_NBIG][48];
    int results[T_FA_NBIG];
    mc_client_t *c;
    uint8_t *all;

    if (mc_connect(sock, &c) != 0 || mc_buf_alloc(c, (size_t)T_FA_BIG * T_FA_NBIG,
                                                  (void **)&all) != 0)
        _exit(2);
    for (int n = 0;; n++) {
        for (int i = 0; i < T_FA_NBIG; i++) {
            snprintf(names[i], sizeof(names[i]), "apk/%d/%d", n, i);
            keys[i] = names[i];
            bufs[i] = all + (size_t)i * T_FA_BIG;
            lens[i] = T_FA_BIG;
            t_fa_put_fill(all + (size_t)i * T_FA_BIG, T_FA_BIG, salt, n, i);
        }
        *batches = n + 1;
        (void)mc_batch_put(c, T_FA_NBIG, keys, bufs, lens, NULL, results);
    }
}

/* The client killed -9 while its puts from the arena are on their way to a stopped owner:
 * B lives on, the dead client and its puts are released once their writes are final
 * (nothing leaks), and no object is published with bytes other than the ones put. */
START_TEST(test_fault_arena_put_client_killed)
{
    struct t_proc a = {0}, b = {0};
    uint64_t salt = t_fc_salt(), deadline;
    volatile int *batches;
    json_int_t n0, open_at_kill;
    mc_client_t *ca, *cb;
    struct t_fc fc;
    uint8_t *want, *back;
    int st, n, i, found = 0, missing = 0;
    pid_t pid;

    batches = t_fa_shared_int();
    t_fa_cluster(&fc, "arena_put_killed", 30000, &a, &b, "1G");
    n0 = t_fc_stat(b.sock, "puts_from_arena");
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        t_fa_put_child(b.sock, salt, batches);
    /* its first batch is published (the path taken), its second under way */
    deadline = t_now_ms() + 30000;
    while (t_fc_stat(b.sock, "puts_from_arena") < n0 + T_FA_NBIG + 2) {
        ck_assert_msg(t_now_ms() < deadline, "the child's puts never took the arena path");
        t_fc_sleep_ms(5);
    }
    /* the owner stalls: the writes from the arena stay in flight over the kill (the child
     * may be filling its next batch: wait for its puts, not a fixed time) */
    kill(a.pid, SIGSTOP);
    deadline = t_now_ms() + 20000;
    while (t_fc_stat(b.sock, "puts_open") == 0) {
        ck_assert_msg(t_now_ms() < deadline, "the child's next batch never started");
        t_fc_sleep_ms(5);
    }
    t_fc_sleep_ms(50);
    open_at_kill = t_fc_stat(b.sock, "puts_open");
    kill(pid, SIGKILL);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    t_fc_sleep_ms(300);
    fprintf(stderr, "arena_put_killed: %d batches started, %lld puts open at the kill, %lld "
            "open and %lld clients held 300 ms after, %lld arena bytes mapped\n", *batches,
            (long long)open_at_kill, (long long)t_fc_stat(b.sock, "puts_open"),
            (long long)t_fc_stat(b.sock, "clients_held"),
            (long long)t_fc_stat(b.sock, "arena_bytes"));
    ck_assert_msg(open_at_kill > 0, "no put was in flight at the kill");
    t_fa_resume_nothing_held(&a, &b);

    /* what was published is exactly what was put; the rest is not found */
    want = malloc(T_FA_BIG);
    back = malloc(T_FA_BIG);
    ck_assert(want != NULL && back != NULL);
    ca = t_fc_conn(&a);
    for (n = 0; n < *batches; n++) {
        for (i = 0; i < T_FA_NBIG; i++) {
            char key[48];
            size_t len = 0;
            int err;

            snprintf(key, sizeof(key), "apk/%d/%d", n, i);
            err = mc_get(ca, key, back, T_FA_BIG, &len);
            ck_assert_msg(err == 0 || err == MC_ERR_NOT_FOUND, "%s: %s", key, mc_strerror(err));
            if (err != 0) {
                missing++;
                continue;
            }
            found++;
            t_fa_put_fill(want, T_FA_BIG, salt, n, i);
            ck_assert_uint_eq(len, T_FA_BIG);
            ck_assert_msg(memcmp(back, want, T_FA_BIG) == 0, "%s: published with wrong bytes",
                          key);
        }
    }
    fprintf(stderr, "arena_put_killed: %d objects published exact, %d not found\n", found,
            missing);
    ck_assert_int_ge(found, T_FA_NBIG);
    mc_close(ca);
    /* B serves puts from a new client's arena as before */
    cb = t_fc_conn(&b);
    {
        struct t_fa_obj o;
        uint8_t *buf;

        ck_assert_int_eq(mc_buf_alloc(cb, 65536, (void **)&buf), 0);
        snprintf(o.key, sizeof(o.key), "apk/after");
        t_fill(buf, 65536, salt + 7u);
        n0 = t_fc_stat(b.sock, "puts_from_arena");
        ck_assert_int_eq(mc_put(cb, o.key, buf, 65536, NULL), 0);
        ck_assert_int_eq(t_fc_stat(b.sock, "puts_from_arena"), n0 + 1);
        ck_assert_int_eq(mc_get(cb, o.key, back, T_FA_BIG, NULL), 0);
        ck_assert(memcmp(back, buf, 65536) == 0);
        ck_assert_int_eq(mc_buf_free(cb, buf), 0);
    }
    mc_close(cb);
    free(want);
    free(back);
    munmap((void *)batches, sizeof(*batches));
    t_fc_finish(&fc);
}
END_TEST

/* A writer of streamed puts from its arena through sock, forever: key aks/N, 80 MiB + 12
 * of the pattern of salt + N; *done counts the puts that returned 0. */
static void t_fa_stream_child(const char *sock, uint64_t salt, volatile int *done)
{
    mc_client_t *c;
    uint8_t *big;

    if (mc_connect(sock, &c) != 0 || mc_buf_alloc(c, T_FA_STREAMED, (void **)&big) != 0)
        _exit(2);
    for (int n = 0;; n++) {
        char key[48];

        snprintf(key, sizeof(key), "aks/%d", n);
        t_fill(big, T_FA_STREAMED, salt + (uint64_t)n);
        if (mc_put(c, key, big, T_FA_STREAMED, NULL) == 0)
            (*done)++;
    }
}

/*
 * A streamed put from an arena (over 64 MiB: PUT_DATA pieces sent from their spans), its
 * writer killed -9 while the owner is stopped and writes from the arena are in flight:
 * once the owner resumes, nothing of the dead writer is held (puts_open, arena_bytes,
 * clients back to 0), and every key it put is exact or NOT_FOUND, never other bytes.
 */
START_TEST(test_fault_arena_streamed_put_client_killed)
{
    struct t_proc a = {0}, b = {0};
    uint64_t salt = t_fc_salt(), deadline;
    volatile int *done;
    json_int_t n0, open_at_kill;
    mc_client_t *ca;
    struct t_fc fc;
    uint8_t *want, *back;
    int st, n, found = 0;
    pid_t pid;

    done = t_fa_shared_int();
    t_fa_cluster(&fc, "arena_streamed_killed", 30000, &a, &b, "1G");
    n0 = t_fc_stat(b.sock, "puts_from_arena");
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        t_fa_stream_child(b.sock, salt, done);
    /* its first put published through the arena path, its second under way */
    deadline = t_now_ms() + 30000;
    while (*done < 1 || t_fc_stat(b.sock, "puts_from_arena") < n0 + 2) {
        ck_assert_msg(t_now_ms() < deadline, "the child's streamed puts never took the arena "
                      "path (%d done)", *done);
        t_fc_sleep_ms(5);
    }
    kill(a.pid, SIGSTOP);
    t_fc_sleep_ms(50);
    open_at_kill = t_fc_stat(b.sock, "puts_open");
    kill(pid, SIGKILL);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    t_fc_sleep_ms(300);
    fprintf(stderr, "arena_streamed_killed: %d puts done, %lld open at the kill, %lld arena "
            "bytes mapped 300 ms after\n", *done, (long long)open_at_kill,
            (long long)t_fc_stat(b.sock, "arena_bytes"));
    t_fa_resume_nothing_held(&a, &b);
    want = malloc(T_FA_STREAMED);
    back = malloc(T_FA_STREAMED);
    ck_assert(want != NULL && back != NULL);
    ca = t_fc_conn(&a);
    for (n = 0; n <= *done + 1; n++) {
        char key[48];
        size_t len = 0;
        int err;

        snprintf(key, sizeof(key), "aks/%d", n);
        err = mc_get(ca, key, back, T_FA_STREAMED, &len);
        ck_assert_msg(err == 0 || err == MC_ERR_NOT_FOUND, "%s: %s", key, mc_strerror(err));
        if (err != 0)
            continue;
        found++;
        t_fill(want, T_FA_STREAMED, salt + (uint64_t)n);
        ck_assert_uint_eq(len, T_FA_STREAMED);
        ck_assert_msg(memcmp(back, want, T_FA_STREAMED) == 0, "%s: published with wrong bytes",
                      key);
    }
    ck_assert_int_ge(found, *done);
    mc_close(ca);
    free(want);
    free(back);
    munmap((void *)done, sizeof(*done));
    t_fc_finish(&fc);
}
END_TEST

/* --- 4. a kill-point sweep of readers into arenas ------------------------------------------ */

#define T_SW_N 8

static const size_t t_sw_sizes[T_SW_N] = {4096,      65536,     65536 + 8, 262144,
                                          1u << 20,  (4u << 20) - 8, 8u << 20, T_FA_BIG};

/* A reader of objs through sock, forever: batches of all T_SW_N into one arena allocation,
 * each buffer exactly its object's size (exact) or with the trailer's room. */
static void t_sw_child(const char *sock, const struct t_fa_obj *objs, bool exact)
{
    const char *keys[T_SW_N];
    void *bufs[T_SW_N];
    size_t caps[T_SW_N], lens[T_SW_N], off = 0;
    int results[T_SW_N];
    mc_client_t *c;
    uint8_t *all;

    for (int i = 0; i < T_SW_N; i++)
        off += t_fa_room(objs[i].len);
    if (mc_connect(sock, &c) != 0 || mc_buf_alloc(c, off, (void **)&all) != 0)
        _exit(2);
    off = 0;
    for (int i = 0; i < T_SW_N; i++) {
        keys[i] = objs[i].key;
        bufs[i] = all + off;
        caps[i] = exact ? objs[i].len : t_fa_room(objs[i].len);
        off += t_fa_room(objs[i].len);
    }
    for (;;) {
        if (mc_batch_get(c, T_SW_N, keys, bufs, caps, lens, results) != T_SW_N)
            _exit(3);
        for (int i = 0; i < T_SW_N; i++)
            if (results[i] != 0 || lens[i] != objs[i].len ||
                memcmp(bufs[i], objs[i].data, objs[i].len) != 0)
                _exit(4); /* wrong bytes reported as success: the parent sees the status */
    }
}

/*
 * Readers killed at random points of their gets (T_SW_ROUNDS, MC_SWEEP_GETS overrides): a
 * child connects to B (--dram 0), reads T_SW_N objects of A of mixed sizes (4 KiB .. 16 MiB)
 * into its arena, exact buffers or with the trailer's room (alternately), checking every
 * byte, and is killed -9 after 0..80 ms (connecting, mid-batch, between batches). Each
 * time: the child never saw wrong bytes (it exits 4 if it did), B holds nothing of it by the
 * op deadline (arena_bytes and landing_used_bytes back to 0: no transfer into the dead
 * arena is left, no trailer's block), and every 8 rounds B serves the test's own reader
 * exactly. The path was taken: reads_into_arena grew.
 */
START_TEST(test_fault_arena_reader_kill_sweep)
{
    struct t_proc a = {0}, b = {0};
    struct t_fa_obj objs[T_SW_N];
    uint64_t salt = t_fc_salt();
    const char *env = getenv("MC_SWEEP_GETS");
    int rounds = env != NULL && atoi(env) > 0 ? atoi(env) : 40, killed_mid = 0;
    json_int_t n0;
    mc_client_t *ca, *cb;
    struct t_rng rng;
    struct t_fc fc;
    int i, st;
    pid_t pid;

    t_rng_seed(&rng, salt);
    t_fa_cluster(&fc, "arena_reader_sweep", 30000, &a, &b, "256M");
    ca = t_fc_conn(&a);
    for (i = 0; i < T_SW_N; i++)
        t_fa_put(ca, &objs[i], "sw", i, t_sw_sizes[i], salt + (uint64_t)i);
    mc_close(ca);
    n0 = t_fc_stat(b.sock, "reads_into_arena");
    for (int round = 0; round < rounds; round++) {
        unsigned delay_ms = (unsigned)t_rng_below(&rng, 81);
        json_int_t before = t_fc_stat(b.sock, "reads_into_arena");

        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
            t_sw_child(b.sock, objs, round % 2 == 0);
        t_fc_sleep_ms(delay_ms);
        kill(pid, SIGKILL);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFSIGNALED(st), "round %d: the reader exited %d before the kill "
                      "(2: no connection, 3: a batch failed, 4: wrong bytes)", round,
                      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        killed_mid += t_fc_stat(b.sock, "reads_into_arena") > before;
        t_fa_settled(b.sock, "arena_bytes", T_FC_OP_MS + 3000);
        t_fa_settled(b.sock, "landing_used_bytes", 3000);
        if (round % 8 == 7) {
            cb = t_fc_conn(&b);
            for (i = 0; i < T_SW_N; i++) {
                uint8_t *buf = malloc(objs[i].len);
                size_t len = 0;

                ck_assert_ptr_nonnull(buf);
                ck_assert_int_eq(mc_get(cb, objs[i].key, buf, objs[i].len, &len), 0);
                ck_assert_uint_eq(len, objs[i].len);
                ck_assert(memcmp(buf, objs[i].data, len) == 0);
                free(buf);
            }
            mc_close(cb);
        }
    }
    fprintf(stderr, "arena_reader_sweep: %d rounds, %d with reads into the arena, %lld reads "
            "into arenas, %lld cut\n", rounds, killed_mid,
            (long long)(t_fc_stat(b.sock, "reads_into_arena") - n0),
            (long long)t_fc_stat(b.sock, "arena_reads_cut"));
    ck_assert_int_gt(t_fc_stat(b.sock, "reads_into_arena"), n0);
    ck_assert_int_le(t_fc_stat(b.sock, "clients"), 1); /* the stats call's own */
    for (i = 0; i < T_SW_N; i++)
        free(objs[i].data);
    t_fc_finish(&fc);
}
END_TEST

int main(int argc, char **argv)
{
    const TTest *const tests[] = {
        test_fault_arena_get_sizes,
        test_fault_arena_corrupt_replica,
        test_fault_arena_owner_stopped_mid_transfer,
        test_fault_arena_owner_stopped_other_replica,
        test_fault_arena_owner_stopped_before_hello,
        test_fault_arena_owner_killed_mid_transfer,
        test_fault_arena_owner_killed_landing_full,
        test_fault_arena_client_killed_mid_get,
        test_fault_arena_reader_kill_sweep,
        test_fault_arena_put_sizes,
        test_fault_arena_put_client_killed,
        test_fault_arena_streamed_put_client_killed,
    };
    const char *only = argc > 1 ? argv[1] : NULL;
    Suite *s = suite_create("fault_arena");
    TCase *tc = tcase_create("arena");
    size_t i;

    tcase_set_timeout(tc, 120);
    for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
        if (only == NULL || strcmp(only, tests[i]->name) == 0)
            tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return t_fc_run(s, NULL);
}
