/*
 * The cluster suite: a real mc-master and three cluster-mode mc-agents on loopback, driven
 * through libmc and mcctl on every node (t_cluster.h starts them).
 *
 *   A  --dram 64M, domain "da"      data node
 *   B  --dram 0                     pure client node: holds nothing, still registers
 *   C  --dram 64M, domain "dc"      data node
 *
 * The four daemons are started once, in main(), with a random cluster token, before the
 * Check runner forks the tests; each test uses its own key prefix ("t1/", "t2/", ...). The
 * tests that need another layout (one domain only, a wrong token, an agent that leaves)
 * start their own short-lived processes. main() stops the shared daemons at the end and
 * fails the run unless each exited cleanly on SIGTERM (no crash, no leak under ASan).
 */
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/mman.h>

#include <mc/mc.h>

#include "t_cluster.h"

static struct {
    char dir[256];
    char token[40];
    struct t_proc master, a, b, c;
} fx;

/* --- helpers ------------------------------------------------------------------------------ */

static mc_client_t *t_conn(struct t_proc *p)
{
    mc_client_t *c = NULL;
    int err = mc_connect(p->sock, &c);

    if (err != 0)
        t_proc_dump_log(p, 8192);
    ck_assert_msg(err == 0, "mc_connect(%s): %s", p->name, mc_strerror(err));
    return c;
}

/* mc_get of key through c must return exactly want[0..len). */
static void t_get_exact(mc_client_t *c, const char *node, const char *key, const uint8_t *want,
                        size_t len)
{
    size_t cap = len + 64, got = 0;
    uint8_t *buf = malloc(cap);
    int err;

    ck_assert_ptr_nonnull(buf);
    err = mc_get(c, key, buf, cap, &got);
    ck_assert_msg(err == 0, "get %s through %s: %s", key, node, mc_strerror(err));
    ck_assert_msg(got == len, "get %s through %s: %zu bytes, want %zu", key, node, got, len);
    ck_assert_msg(memcmp(buf, want, len) == 0, "get %s through %s: bytes differ", key, node);
    free(buf);
}

static uint8_t *t_random_buf(size_t len)
{
    uint8_t *p = malloc(len);

    ck_assert_ptr_nonnull(p);
    t_fill_random(p, len);
    return p;
}

/* An integer of `mcctl stats` through the agent at sock. */
static json_int_t t_stat_of(const char *sock, const char *field)
{
    char *out = NULL;
    json_t *j;
    json_int_t v;

    ck_assert_int_eq(t_mcctl(sock, &out, "stats", NULL), 0);
    j = json_loads(out, 0, NULL);
    ck_assert_msg(j != NULL, "mcctl stats: bad JSON: %s", out);
    v = t_json_int(j, field);
    json_decref(j);
    free(out);
    return v;
}

static json_t *t_cluster_now(void)
{
    json_t *j = t_cluster_json(fx.b.sock);

    ck_assert_msg(j != NULL, "mcctl cluster through B failed");
    return j;
}

/* --- 1. put on A, get on B, C and A ------------------------------------------------------- */

START_TEST(test_cluster_put_a_get_b_c)
{
    const size_t sizes[] = {1, 4096, 3 * T_MIB, 17 * T_MIB + 12345};
    mc_client_t *ca = t_conn(&fx.a), *cb = t_conn(&fx.b), *cc = t_conn(&fx.c);
    mc_obj_info_t info;
    char key[64];
    size_t i, need = 0;
    int err;

    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint8_t *data = t_random_buf(sizes[i]);

        snprintf(key, sizeof(key), "t1/size-%zu", sizes[i]);
        err = mc_put(ca, key, data, sizes[i], NULL);
        ck_assert_msg(err == 0, "put %s through A: %s", key, mc_strerror(err));
        t_get_exact(cb, "B", key, data, sizes[i]);
        t_get_exact(cc, "C", key, data, sizes[i]);
        t_get_exact(ca, "A", key, data, sizes[i]);
        ck_assert_int_eq(mc_stat(cc, key, &info), 0);
        ck_assert_uint_eq(info.size, sizes[i]);
        ck_assert_uint_eq(info.replicas, 1);
        free(data);
    }
    /* a remote read into a buffer one byte short: MC_ERR_TOO_LARGE with the size, and the
     * bytes never cross (the GET names its capacity) */
    {
        uint8_t *small = malloc(17 * T_MIB + 12344);
        json_int_t moved = t_stat_of(fx.b.sock, "bytes_from_peers");

        ck_assert_ptr_nonnull(small);
        snprintf(key, sizeof(key), "t1/size-%zu", (size_t)(17 * T_MIB + 12345));
        err = mc_get(cb, key, small, 17 * T_MIB + 12344, &need);
        ck_assert_msg(err == MC_ERR_TOO_LARGE, "short get through B: %s", mc_strerror(err));
        ck_assert_uint_eq(need, 17 * T_MIB + 12345);
        ck_assert_int_eq(t_stat_of(fx.b.sock, "bytes_from_peers"), moved);
        free(small);
    }
    mc_close(ca);
    mc_close(cb);
    mc_close(cc);
}
END_TEST

/* --- 2. replicas=2 go to the two data nodes ----------------------------------------------- */

START_TEST(test_cluster_replicas_two_distinct_nodes)
{
    const size_t len = 3 * T_MIB + 7;
    mc_client_t *ca = t_conn(&fx.a), *cb = t_conn(&fx.b), *cc = t_conn(&fx.c);
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    uint8_t *data = t_random_buf(len);
    json_int_t a0, c0, a1, c1;
    json_t *j, *st;
    mc_obj_info_t info;
    char *out = NULL;
    int err, rc;

    j = t_cluster_now();
    a0 = t_node_seg_used(j, "A");
    c0 = t_node_seg_used(j, "C");
    json_decref(j);
    ck_assert(a0 >= 0 && c0 >= 0);

    o.replicas = 2;
    err = mc_put(cb, "t2/r2", data, len, &o);
    ck_assert_msg(err == 0, "put replicas=2 through B: %s", mc_strerror(err));

    /* every node sees two replicas */
    mc_client_t *all[3] = {ca, cb, cc};
    for (int i = 0; i < 3; i++) {
        memset(&info, 0, sizeof(info));
        err = mc_stat(all[i], "t2/r2", &info);
        ck_assert_msg(err == 0, "stat through %c: %s", "ABC"[i], mc_strerror(err));
        ck_assert_uint_eq(info.size, len);
        ck_assert_uint_eq(info.replicas, 2);
    }
    rc = t_mcctl(fx.c.sock, &out, "stat", "t2/r2", NULL);
    ck_assert_int_eq(rc, 0);
    st = json_loads(out, 0, NULL);
    ck_assert_msg(st != NULL, "mcctl stat: not JSON: %s", out);
    ck_assert_int_eq(t_json_int(st, "replicas"), 2);
    ck_assert_int_eq(t_json_int(st, "size"), (json_int_t)len);
    json_decref(st);
    free(out);

    /* both data segments hold a copy: each grew by at least the object */
    j = t_cluster_now();
    a1 = t_node_seg_used(j, "A");
    c1 = t_node_seg_used(j, "C");
    ck_assert_msg(a1 - a0 >= (json_int_t)len, "A's segment grew by %lld", (long long)(a1 - a0));
    ck_assert_msg(c1 - c0 >= (json_int_t)len, "C's segment grew by %lld", (long long)(c1 - c0));
    ck_assert_int_eq(t_node_seg_used(j, "B"), 0);
    json_decref(j);

    t_get_exact(ca, "A", "t2/r2", data, len);
    t_get_exact(cb, "B", "t2/r2", data, len);
    t_get_exact(cc, "C", "t2/r2", data, len);

    /* three replicas cannot go to three domains holding data (B's holds none) */
    o.replicas = 3;
    err = mc_put(ca, "t2/r3", data, 4096, &o);
    ck_assert_msg(err == MC_ERR_NO_SPACE, "put replicas=3: %s", mc_strerror(err));
    ck_assert_int_eq(mc_exist(cb, "t2/r3"), 0);

    free(data);
    mc_close(ca);
    mc_close(cb);
    mc_close(cc);
}
END_TEST

/* --- 3. one failure domain: replicas=2 needs MC_PUT_SAME_DOMAIN_OK ------------------------ */

START_TEST(test_cluster_same_domain_ok)
{
    char dir[256], token[40];
    struct t_proc m = {0}, x = {0}, y = {0};
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    const size_t len = 1 * T_MIB + 5;
    uint8_t *data = t_random_buf(len);
    mc_client_t *cx, *cy;
    mc_obj_info_t info;
    json_int_t xu, yu;
    json_t *j;
    int err;

    t_mkdtemp(dir, sizeof(dir));
    t_random_token(token, sizeof(token));
    t_master_start(&m, dir, token);
    t_agent_spawn(&x, dir, m.port, "X", "dsame", "32M", token, NULL);
    t_agent_spawn(&y, dir, m.port, "Y", "dsame", "32M", token, NULL);
    ck_assert_int_eq(t_proc_wait_ready(&x, T_READY_MS), 0);
    ck_assert_int_eq(t_proc_wait_ready(&y, T_READY_MS), 0);
    cx = t_conn(&x);
    cy = t_conn(&y);

    o.replicas = 2;
    err = mc_put(cx, "t3/k", data, len, &o);
    ck_assert_msg(err == MC_ERR_NO_SPACE, "replicas=2 in one domain: %s", mc_strerror(err));
    ck_assert_int_eq(mc_exist(cy, "t3/k"), 0);
    ck_assert_int_eq(mc_exist(cx, "t3/k"), 0);

    o.flags = MC_PUT_SAME_DOMAIN_OK;
    err = mc_put(cx, "t3/k", data, len, &o);
    ck_assert_msg(err == 0, "replicas=2, SAME_DOMAIN_OK: %s", mc_strerror(err));
    ck_assert_int_eq(mc_stat(cy, "t3/k", &info), 0);
    ck_assert_uint_eq(info.replicas, 2);
    ck_assert_uint_eq(info.size, len);
    t_get_exact(cy, "Y", "t3/k", data, len);
    t_get_exact(cx, "X", "t3/k", data, len);
    j = t_cluster_json(x.sock);
    ck_assert_ptr_nonnull(j);
    xu = t_node_seg_used(j, "X");
    yu = t_node_seg_used(j, "Y");
    ck_assert_msg(xu >= (json_int_t)len && yu >= (json_int_t)len, "used X %lld Y %lld",
                  (long long)xu, (long long)yu);
    json_decref(j);

    /* the flag relaxes domains, not the rule of one replica per node */
    o.replicas = 3;
    err = mc_put(cx, "t3/k3", data, 4096, &o);
    ck_assert_msg(err == MC_ERR_NO_SPACE, "replicas=3 on two nodes: %s", mc_strerror(err));

    mc_close(cx);
    mc_close(cy);
    free(data);
    /* the SIGTERM contract of agents has its own test (test_cluster_sigterm_agent_leaves) */
    t_proc_stop(&x);
    t_proc_stop(&y);
    ck_assert_int_eq(t_proc_stop(&m), 0);
    t_rmdir(dir);
}
END_TEST

/* --- 4. batches across nodes -------------------------------------------------------------- */

#define T4_N      64
#define T4_ABSENT 16

static size_t t4_len(unsigned i)
{
    if (i % 16 == 0)
        return T_MIB + 3 * i + 1; /* a few over one checksum chunk */
    return (size_t)(i * 1021u) % 65536u + 1;
}

START_TEST(test_cluster_batches_span_nodes)
{
    static char keys[T4_N + T4_ABSENT][32];
    const char *kp[T4_N + T4_ABSENT];
    const void *bufs[T4_N];
    void *gbufs[T4_N];
    size_t lens[T4_N], caps[T4_N], glens[T4_N];
    int results[T4_N + T4_ABSENT], n, i, r;
    uint64_t salt;
    mc_client_t *ca = t_conn(&fx.a), *cb = t_conn(&fx.b), *cc = t_conn(&fx.c);

    t_fill_random((uint8_t *)&salt, sizeof(salt));
    for (i = 0; i < T4_N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "t4/k%02d", i);
        kp[i] = keys[i];
        lens[i] = t4_len((unsigned)i);
        bufs[i] = malloc(lens[i]);
        ck_assert_ptr_nonnull(bufs[i]);
        t_fill((uint8_t *)bufs[i], lens[i], salt + (uint64_t)i);
        caps[i] = lens[i] + 16;
        gbufs[i] = malloc(caps[i]);
        ck_assert_ptr_nonnull(gbufs[i]);
    }
    n = mc_batch_put(cc, T4_N, kp, bufs, lens, NULL, results);
    for (i = 0; i < T4_N; i++)
        ck_assert_msg(results[i] == 0, "batch put item %d: %s", i, mc_strerror(results[i]));
    ck_assert_int_eq(n, T4_N);

    mc_client_t *readers[2] = {cb, ca};
    for (r = 0; r < 2; r++) {
        for (i = 0; i < T4_N; i++) {
            memset(gbufs[i], 0, caps[i]);
            glens[i] = 0;
        }
        n = mc_batch_get(readers[r], T4_N, kp, gbufs, caps, glens, results);
        for (i = 0; i < T4_N; i++) {
            ck_assert_msg(results[i] == 0, "batch get through %c, item %d: %s", "BA"[r], i,
                          mc_strerror(results[i]));
            ck_assert_uint_eq(glens[i], lens[i]);
            ck_assert_msg(memcmp(gbufs[i], bufs[i], lens[i]) == 0,
                          "batch get through %c, item %d: bytes differ", "BA"[r], i);
        }
        ck_assert_int_eq(n, T4_N);
    }

    /* exist: every fourth key replaced by one never stored */
    for (i = 0; i < T4_N + T4_ABSENT; i++) {
        if (i % 5 == 4) {
            snprintf(keys[T4_N + i / 5], sizeof(keys[0]), "t4/absent%02d", i);
            kp[i] = keys[T4_N + i / 5];
        } else {
            kp[i] = keys[i - i / 5];
        }
    }
    mc_client_t *askers[3] = {ca, cb, cc};
    for (r = 0; r < 3; r++) {
        memset(results, 0x55, sizeof(results));
        n = mc_batch_exist(askers[r], T4_N + T4_ABSENT, kp, results);
        ck_assert_int_eq(n, T4_N + T4_ABSENT);
        for (i = 0; i < T4_N + T4_ABSENT; i++)
            ck_assert_msg(results[i] == (i % 5 == 4 ? 0 : 1),
                          "batch exist through %c, item %d (%s): %d", "ABC"[r], i, kp[i],
                          results[i]);
    }

    for (i = 0; i < T4_N; i++) {
        free((void *)bufs[i]);
        free(gbufs[i]);
    }
    mc_close(ca);
    mc_close(cb);
    mc_close(cc);
}
END_TEST

/* --- 5. the client node ------------------------------------------------------------------- */

START_TEST(test_cluster_client_node_reads_everything)
{
    enum { N = 6 };
    const size_t len = 200 * 1024 + 3, blen = T_MIB;
    mc_client_t *ca = t_conn(&fx.a), *cb = t_conn(&fx.b), *cc = t_conn(&fx.c);
    uint8_t *data[2 * N], *bdata = t_random_buf(blen);
    json_int_t a0, c0, a1, c1;
    json_t *j, *nb;
    mc_obj_info_t info;
    char key[64];
    int i, err;

    for (i = 0; i < 2 * N; i++) {
        data[i] = t_random_buf(len);
        snprintf(key, sizeof(key), "t5/%c%d", i < N ? 'a' : 'c', i);
        err = mc_put(i < N ? ca : cc, key, data[i], len, NULL);
        ck_assert_msg(err == 0, "put %s: %s", key, mc_strerror(err));
    }
    for (i = 0; i < 2 * N; i++) {
        snprintf(key, sizeof(key), "t5/%c%d", i < N ? 'a' : 'c', i);
        t_get_exact(cb, "B", key, data[i], len);
        free(data[i]);
    }

    /* B is a registered node without segments */
    j = t_cluster_now();
    ck_assert_str_eq(t_json_str(j, "state"), "ok");
    nb = t_json_find_str(j, "nodes", "name", "B");
    ck_assert_msg(nb != NULL, "B is not among the nodes");
    ck_assert_str_eq(t_json_str(nb, "state"), "alive");
    ck_assert_int_eq(t_json_int(nb, "segments"), 0);
    ck_assert_int_eq(t_json_int(nb, "capacity"), 0);
    ck_assert_int_eq(t_json_int(nb, "used"), 0);
    ck_assert_ptr_null(t_json_find_int(j, "segments", "node", t_json_int(nb, "id")));
    a0 = t_node_seg_used(j, "A");
    c0 = t_node_seg_used(j, "C");
    json_decref(j);

    /* B's own puts land on A or C */
    for (i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "t5/b%d", i);
        err = mc_put(cb, key, bdata, blen, NULL);
        ck_assert_msg(err == 0, "put %s through B: %s", key, mc_strerror(err));
        ck_assert_int_eq(mc_stat(ca, key, &info), 0);
        ck_assert_uint_eq(info.replicas, 1);
        ck_assert_uint_eq(info.size, blen);
        t_get_exact(cc, "C", key, bdata, blen);
        t_get_exact(cb, "B", key, bdata, blen);
    }
    j = t_cluster_now();
    a1 = t_node_seg_used(j, "A");
    c1 = t_node_seg_used(j, "C");
    ck_assert_msg((a1 - a0) + (c1 - c0) >= 4 * (json_int_t)blen, "A grew %lld, C grew %lld",
                  (long long)(a1 - a0), (long long)(c1 - c0));
    nb = t_json_find_str(j, "nodes", "name", "B");
    ck_assert_ptr_nonnull(nb);
    ck_assert_int_eq(t_json_int(nb, "used"), 0);
    ck_assert_int_eq(t_json_int(nb, "segments"), 0);
    json_decref(j);

    free(bdata);
    mc_close(ca);
    mc_close(cb);
    mc_close(cc);
}
END_TEST

/* --- 6. concurrent writers of one key ----------------------------------------------------- */

#define T6_WRITERS 4 /* two on A, two on C */
#define T6_READERS 2 /* on B and on A, during the upserts */
#define T6_ITER    24
#define T6_LEN     (T_MIB + 4099) /* two checksum chunks, the second partial */
#define T6_MAGIC   0x6d63636c75737472ull

/* A self-identifying value: header, body filled from (writer, seq), FNV-1a of the body. */
struct t6_hdr {
    uint64_t magic;
    uint32_t writer;
    uint32_t seq;
    uint64_t len;
    uint64_t sum;
};

struct t6_shared {
    int plain[T6_WRITERS][T6_ITER];
    int upsert[T6_WRITERS][T6_ITER];
    atomic_int writers_done;
    long reads[T6_READERS];
    char err[T6_WRITERS + T6_READERS][160];
};

static uint64_t t6_fnv(const uint8_t *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void t6_make(uint8_t *buf, uint32_t writer, uint32_t seq)
{
    struct t6_hdr h = {T6_MAGIC, writer, seq, T6_LEN, 0};

    t_fill(buf + sizeof(h), T6_LEN - sizeof(h), ((uint64_t)writer << 32 | seq) + 1);
    h.sum = t6_fnv(buf + sizeof(h), T6_LEN - sizeof(h));
    memcpy(buf, &h, sizeof(h));
}

/* Whether buf (len bytes) is one complete value; its writer and seq in *h. */
static bool t6_check(const uint8_t *buf, size_t len, uint8_t *scratch, struct t6_hdr *h)
{
    if (len != T6_LEN)
        return false;
    memcpy(h, buf, sizeof(*h));
    if (h->magic != T6_MAGIC || h->len != T6_LEN || h->writer >= T6_WRITERS ||
        h->seq >= T6_ITER)
        return false;
    if (t6_fnv(buf + sizeof(*h), T6_LEN - sizeof(*h)) != h->sum)
        return false;
    t6_make(scratch, h->writer, h->seq);
    return memcmp(scratch, buf, T6_LEN) == 0;
}

static void t6_writer(struct t6_shared *sh, int w, const char *sock, int gate, bool upsert)
{
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    uint8_t *buf = malloc(T6_LEN);
    mc_client_t *c = NULL;
    char one;
    int err, i;

    if (buf == NULL || (err = mc_connect(sock, &c)) != 0) {
        snprintf(sh->err[w], sizeof(sh->err[w]), "writer %d: connect failed", w);
        _exit(1);
    }
    (void)!read(gate, &one, 1); /* returns 0 once the parent closes the gate */
    o.flags = upsert ? MC_PUT_UPSERT : 0;
    for (i = 0; i < T6_ITER; i++) {
        t6_make(buf, (uint32_t)w, (uint32_t)i);
        err = mc_put(c, upsert ? "t6/upsert" : "t6/plain", buf, T6_LEN, &o);
        (upsert ? sh->upsert : sh->plain)[w][i] = err;
    }
    mc_close(c);
    free(buf);
    _exit(0);
}

static void t6_reader(struct t6_shared *sh, int r, const char *sock, int gate)
{
    uint8_t *buf = malloc(T6_LEN + 64), *scratch = malloc(T6_LEN);
    char *err_out = sh->err[T6_WRITERS + r];
    mc_client_t *c = NULL;
    struct t6_hdr h;
    bool seen = false;
    uint64_t deadline;
    size_t got;
    char one;
    int err;

    if (buf == NULL || scratch == NULL || mc_connect(sock, &c) != 0) {
        snprintf(err_out, 160, "reader %d: connect failed", r);
        _exit(1);
    }
    (void)!read(gate, &one, 1);
    deadline = t_now_ms() + 30000;
    while (atomic_load(&sh->writers_done) < T6_WRITERS) {
        if (t_now_ms() > deadline) {
            snprintf(err_out, 160, "reader %d: writers still running after 30 s", r);
            _exit(1);
        }
        got = 0;
        err = mc_get(c, "t6/upsert", buf, T6_LEN + 64, &got);
        if (err == MC_ERR_NOT_FOUND && !seen)
            continue; /* nothing published yet */
        if (err != 0) {
            snprintf(err_out, 160, "reader %d: get after %ld reads: %s", r, sh->reads[r],
                     mc_strerror(err));
            _exit(1);
        }
        if (!t6_check(buf, got, scratch, &h)) {
            snprintf(err_out, 160, "reader %d: read %zu bytes that are no written value", r,
                     got);
            _exit(1);
        }
        seen = true;
        sh->reads[r]++;
    }
    mc_close(c);
    free(buf);
    free(scratch);
    _exit(0);
}

/* Run T6_WRITERS writers (and, for upserts, T6_READERS readers) released at once. */
static void t6_round(struct t6_shared *sh, bool upsert)
{
    struct t_proc *wnode[T6_WRITERS] = {&fx.a, &fx.c, &fx.a, &fx.c};
    struct t_proc *rnode[T6_READERS] = {&fx.b, &fx.a};
    pid_t pids[T6_WRITERS + T6_READERS];
    int gate[2], np = 0, i, st;

    ck_assert_int_eq(pipe(gate), 0);
    atomic_store(&sh->writers_done, 0);
    fflush(NULL);
    for (i = 0; i < T6_WRITERS + (upsert ? T6_READERS : 0); i++) {
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed assertion above ends us too */
            close(gate[1]);
            if (i < T6_WRITERS)
                t6_writer(sh, i, wnode[i]->sock, gate[0], upsert);
            t6_reader(sh, i - T6_WRITERS, rnode[i - T6_WRITERS]->sock, gate[0]);
        }
        pids[np++] = pid;
    }
    close(gate[0]);
    close(gate[1]); /* go */
    for (i = 0; i < T6_WRITERS; i++) {
        ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", sh->err[i]);
        atomic_fetch_add(&sh->writers_done, 1);
    }
    for (; i < np; i++) {
        ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", sh->err[i]);
    }
}

/* Every node reads the same complete value; returns its header. */
static struct t6_hdr t6_read_all(const char *key)
{
    struct t_proc *nodes[3] = {&fx.a, &fx.b, &fx.c};
    uint8_t *buf = malloc(T6_LEN + 64), *scratch = malloc(T6_LEN);
    struct t6_hdr h, first = {0};
    size_t got;
    int i, err;

    ck_assert(buf != NULL && scratch != NULL);
    for (i = 0; i < 3; i++) {
        mc_client_t *c = t_conn(nodes[i]);

        got = 0;
        err = mc_get(c, key, buf, T6_LEN + 64, &got);
        ck_assert_msg(err == 0, "get %s through %s: %s", key, nodes[i]->name, mc_strerror(err));
        ck_assert_msg(t6_check(buf, got, scratch, &h),
                      "get %s through %s: %zu bytes that are no written value", key,
                      nodes[i]->name, got);
        if (i == 0)
            first = h;
        ck_assert_msg(h.writer == first.writer && h.seq == first.seq,
                      "%s: %s reads writer %u seq %u, A reads writer %u seq %u", key,
                      nodes[i]->name, h.writer, h.seq, first.writer, first.seq);
        mc_close(c);
    }
    free(buf);
    free(scratch);
    return first;
}

START_TEST(test_cluster_concurrent_writers_same_key)
{
    struct t6_shared *sh =
        mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int w, i, ok = 0, canceled = 0, win_w = -1, win_i = -1;
    struct t6_hdr h;
    long reads;

    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset(sh, 0, sizeof(*sh));

    /* plain puts: exactly one wins, the others see EXISTS (or BUSY while it is in flight) */
    t6_round(sh, false);
    for (w = 0; w < T6_WRITERS; w++) {
        for (i = 0; i < T6_ITER; i++) {
            int e = sh->plain[w][i];

            ck_assert_msg(e == 0 || e == MC_ERR_EXISTS || e == MC_ERR_BUSY,
                          "plain put, writer %d seq %d: %s", w, i, mc_strerror(e));
            if (e == 0) {
                ok++;
                win_w = w;
                win_i = i;
            }
        }
    }
    ck_assert_msg(ok == 1, "%d plain puts of one key succeeded", ok);
    h = t6_read_all("t6/plain");
    ck_assert_msg((int)h.writer == win_w && (int)h.seq == win_i,
                  "t6/plain holds writer %u seq %u, the put that succeeded was %d/%d", h.writer,
                  h.seq, win_w, win_i);

    /* upserts, read meanwhile: every put succeeds (or, per mc.h, is superseded by a newer
     * one in flight: MC_ERR_CANCELED); readers only ever see whole values */
    t6_round(sh, true);
    ok = 0;
    for (w = 0; w < T6_WRITERS; w++) {
        for (i = 0; i < T6_ITER; i++) {
            int e = sh->upsert[w][i];

            ck_assert_msg(e == 0 || e == MC_ERR_CANCELED, "upsert, writer %d seq %d: %s", w, i,
                          mc_strerror(e));
            ok += e == 0;
            canceled += e == MC_ERR_CANCELED;
        }
    }
    ck_assert_int_gt(ok, 0);
    h = t6_read_all("t6/upsert");
    ck_assert_msg(sh->upsert[h.writer][h.seq] == 0,
                  "t6/upsert holds writer %u seq %u, whose upsert failed: %s", h.writer, h.seq,
                  mc_strerror(sh->upsert[h.writer][h.seq]));
    /* the last upsert of each writer was published after all its earlier ones; the one
     * readable now is the last successful upsert of its writer */
    for (i = T6_ITER - 1; i >= 0 && sh->upsert[h.writer][i] != 0; i--)
        ;
    ck_assert_msg((int)h.seq == i, "t6/upsert holds writer %u seq %u, not its last one (%d)",
                  h.writer, h.seq, i);
    reads = sh->reads[0] + sh->reads[1];
    fprintf(stderr, "concurrent upserts: %d ok, %d canceled, %ld concurrent reads checked\n",
            ok, canceled, reads);
    munmap(sh, sizeof(*sh));
}
END_TEST

/* --- 7. the cluster token ----------------------------------------------------------------- */

START_TEST(test_cluster_token_required)
{
    struct t_proc bad = {0}, none = {0};
    char wrong[48], st[48];
    uint8_t *data = t_random_buf(64 * 1024);
    mc_client_t *ca, *cc;
    uint64_t t0 = t_now_ms();
    json_t *j;
    int r;

    snprintf(wrong, sizeof(wrong), "%.20s-not", fx.token);
    t_agent_spawn(&bad, fx.dir, fx.master.port, "bad", "dbad", "32M", wrong, NULL);
    t_agent_spawn(&none, fx.dir, fx.master.port, "none", "dbad", "32M", NULL, NULL);
    r = t_proc_wait_ready(&bad, 5000);
    if (r != 1)
        t_proc_dump_log(&bad, 4096);
    ck_assert_msg(r == 1, "agent with a wrong token: %s", r == 0 ? "ready" : "still running");
    ck_assert_msg(WIFEXITED(bad.status) && WEXITSTATUS(bad.status) == 3,
                  "agent with a wrong token: %s (want exit 3)",
                  t_status_str(bad.status, st, sizeof(st)));
    r = t_proc_wait_ready(&none, 5000);
    ck_assert_msg(r == 1, "agent without a token: %s", r == 0 ? "ready" : "still running");
    ck_assert_msg(WIFEXITED(none.status) && WEXITSTATUS(none.status) == 3,
                  "agent without a token: %s (want exit 3)",
                  t_status_str(none.status, st, sizeof(st)));
    ck_assert_msg(t_now_ms() - t0 < 5000, "refusals took %llu ms",
                  (unsigned long long)(t_now_ms() - t0));
    ck_assert_int_ne(access(bad.ready, F_OK), 0);
    ck_assert_int_ne(access(none.ready, F_OK), 0);

    /* the master stays up, knows nothing of them, and the good agents keep serving */
    j = t_cluster_now();
    ck_assert_str_eq(t_json_str(j, "state"), "ok");
    ck_assert_ptr_null(t_json_find_str(j, "nodes", "name", "bad"));
    ck_assert_ptr_null(t_json_find_str(j, "nodes", "name", "none"));
    ck_assert_ptr_null(t_json_find_str(j, "domains", "name", "dbad"));
    ck_assert_str_eq(t_json_str(t_json_find_str(j, "nodes", "name", "A"), "state"), "alive");
    ck_assert_str_eq(t_json_str(t_json_find_str(j, "nodes", "name", "C"), "state"), "alive");
    json_decref(j);
    ca = t_conn(&fx.a);
    cc = t_conn(&fx.c);
    ck_assert_int_eq(mc_put(ca, "t7/after", data, 64 * 1024, NULL), 0);
    t_get_exact(cc, "C", "t7/after", data, 64 * 1024);
    mc_close(ca);
    mc_close(cc);
    free(data);
    unlink(bad.log);
    unlink(none.log);
}
END_TEST

/* --- 8. exist, remove and ls through different nodes -------------------------------------- */

START_TEST(test_cluster_exist_remove_ls)
{
    mc_client_t *ca = t_conn(&fx.a), *cb = t_conn(&fx.b), *cc = t_conn(&fx.c);
    uint8_t *data = t_random_buf(300 * 1024);
    mc_obj_info_t info;
    char key[64], *out = NULL, *line, *save = NULL;
    int i, err, rc, seen = 0;

    ck_assert_int_eq(mc_put(ca, "t8/x", data, 300 * 1024, NULL), 0);
    ck_assert_int_eq(mc_exist(ca, "t8/x"), 1);
    ck_assert_int_eq(mc_exist(cb, "t8/x"), 1);
    ck_assert_int_eq(mc_exist(cc, "t8/x"), 1);
    ck_assert_int_eq(mc_exist(cc, "t8/never"), 0);

    err = mc_remove(cb, "t8/x");
    ck_assert_msg(err == 0, "remove through B: %s", mc_strerror(err));
    err = mc_get(cc, "t8/x", data, 300 * 1024, NULL);
    ck_assert_msg(err == MC_ERR_NOT_FOUND, "get through C after remove: %s", mc_strerror(err));
    ck_assert_int_eq(mc_exist(ca, "t8/x"), 0);
    ck_assert_int_eq(mc_exist(cb, "t8/x"), 0);
    ck_assert_int_eq(mc_stat(ca, "t8/x", &info), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_remove(cc, "t8/x"), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_remove(ca, "t8/never"), MC_ERR_NOT_FOUND);
    /* the key is free again: a plain put through another node succeeds */
    t_fill_random(data, 1000);
    ck_assert_int_eq(mc_put(cc, "t8/x", data, 1000, NULL), 0);
    t_get_exact(cb, "B", "t8/x", data, 1000);

    /* ls through B lists what A and C stored */
    for (i = 0; i < 6; i++) {
        snprintf(key, sizeof(key), "t8/ls/%c%d", i < 3 ? 'a' : 'c', i);
        ck_assert_int_eq(mc_put(i < 3 ? ca : cc, key, data, 100 + (size_t)i, NULL), 0);
    }
    rc = t_mcctl(fx.b.sock, &out, "ls", "--prefix", "t8/ls/", NULL);
    ck_assert_int_eq(rc, 0);
    for (line = strtok_r(out, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        bool known = false;

        for (i = 0; i < 6; i++) {
            snprintf(key, sizeof(key), "t8/ls/%c%d", i < 3 ? 'a' : 'c', i);
            if (strcmp(line, key) == 0) {
                ck_assert_msg(!(seen & (1 << i)), "ls lists %s twice", key);
                seen |= 1 << i;
                known = true;
            }
        }
        ck_assert_msg(known, "ls --prefix t8/ls/ lists '%s'", line);
    }
    ck_assert_msg(seen == 0x3f, "ls through B missed keys (seen mask 0x%x)", seen);
    free(out);

    free(data);
    mc_close(ca);
    mc_close(cb);
    mc_close(cc);
}
END_TEST

/* --- 9. an agent stopped with SIGTERM leaves the cluster (docs/failure-contract.md) ------------------- */

/* More remote reads in flight at one agent than its read table has buckets (256): four
 * clients of B each read 128 keys held by A in one batch, at once. A bucket used to keep only
 * its newest read: the others never completed (their gets timed out). */
#define T10_CLIENTS 4
#define T10_N 128

START_TEST(test_cluster_many_remote_reads_in_flight)
{
    static char keys[T10_CLIENTS * T10_N][32];
    const char *kp[T10_CLIENTS * T10_N];
    const void *bufs[T10_CLIENTS * T10_N];
    size_t lens[T10_CLIENTS * T10_N];
    int results[T10_CLIENTS * T10_N], i, k, st;
    uint8_t *data = t_random_buf(4096 * (size_t)T10_CLIENTS * T10_N);
    mc_client_t *ca = t_conn(&fx.a);
    pid_t kids[T10_CLIENTS];

    for (i = 0; i < T10_CLIENTS * T10_N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "t10/k%04d", i);
        kp[i] = keys[i];
        bufs[i] = data + 4096 * (size_t)i;
        lens[i] = 4096;
    }
    ck_assert_int_eq(mc_batch_put(ca, T10_CLIENTS * T10_N, kp, bufs, lens, NULL, results),
                     T10_CLIENTS * T10_N);
    mc_close(ca);
    for (k = 0; k < T10_CLIENTS; k++) {
        kids[k] = fork();
        ck_assert_int_ge(kids[k], 0);
        if (kids[k] == 0) {
            mc_client_t *cb = NULL;
            void *gb[T10_N];
            size_t caps[T10_N], got[T10_N];
            int r[T10_N], round, j, bad = 0;

            if (mc_connect(fx.b.sock, &cb) != 0)
                _exit(2);
            for (j = 0; j < T10_N; j++) {
                gb[j] = malloc(4096);
                caps[j] = 4096;
                if (gb[j] == NULL)
                    _exit(3);
            }
            for (round = 0; round < 4 && bad == 0; round++) {
                if (mc_batch_get(cb, T10_N, kp + k * T10_N, gb, caps, got, r) != T10_N)
                    bad = 4;
                for (j = 0; j < T10_N && bad == 0; j++) {
                    if (r[j] != 0 || got[j] != 4096 ||
                        memcmp(gb[j], bufs[k * T10_N + j], 4096) != 0)
                        bad = 5;
                }
            }
            mc_close(cb);
            _exit(bad);
        }
    }
    for (k = 0; k < T10_CLIENTS; k++) {
        ck_assert_int_eq(waitpid(kids[k], &st, 0), kids[k]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "reader %d through B: status %d (4: a batch failed, 5: wrong bytes)", k,
                      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    free(data);
}
END_TEST

START_TEST(test_cluster_sigterm_agent_leaves)
{
    struct t_proc t = {0};
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    uint8_t *data = t_random_buf(256 * 1024);
    mc_client_t *ct, *cb;
    json_t *j, *nt;
    json_int_t id;
    uint64_t deadline;
    int rc;

    t_agent_start(&t, fx.dir, fx.master.port, "T", "dt", "32M", fx.token, NULL);
    ct = t_conn(&t);
    ck_assert_int_eq(mc_put(ct, "t9/only-on-t", data, 256 * 1024, NULL), 0);
    o.replicas = 2;
    ck_assert_int_eq(mc_put(ct, "t9/two", data, 256 * 1024, &o), 0);
    mc_close(ct);
    j = t_cluster_now();
    nt = t_json_find_str(j, "nodes", "name", "T");
    ck_assert_ptr_nonnull(nt);
    ck_assert_int_eq(t_json_int(nt, "segments"), 1);
    ck_assert_int_ge(t_node_seg_used(j, "T"), 256 * 1024);
    id = t_json_int(nt, "id");
    json_decref(j);

    rc = t_proc_stop(&t);
    if (rc != 0) {
        char st[48];

        t_proc_dump_log(&t, 4096);
        ck_abort_msg("mc-agent T on SIGTERM: %s (want exit 0)",
                     t_status_str(t.status, st, sizeof(st)));
    }
    /* it unmounted itself: no need to wait for the liveness TTL */
    deadline = t_now_ms() + 3000;
    for (;;) {
        j = t_cluster_now();
        nt = t_json_find_str(j, "nodes", "name", "T");
        if ((nt == NULL || strcmp(t_json_str(nt, "state"), "dead") == 0) &&
            t_json_find_int(j, "segments", "node", id) == NULL)
            break;
        json_decref(j);
        ck_assert_msg(t_now_ms() < deadline, "T still listed 3 s after its clean exit");
        t_poll_pause();
    }
    json_decref(j);
    cb = t_conn(&fx.b);
    ck_assert_int_eq(mc_exist(cb, "t9/only-on-t"), 0);
    t_get_exact(cb, "B", "t9/two", data, 256 * 1024);
    mc_close(cb);
    free(data);
    unlink(t.log);
}
END_TEST

/* --- a completed put is read through another node at once ---------------------------------- */

/* A put through the client node B returns once every owner holds all its bytes: a get
 * through A and through C issued the instant mc_put returned sees every byte (the owner's
 * bytes used to arrive after the writer's send completed: wrong bytes, or MC_ERR_CORRUPT
 * with checksums). With and without checksums: without them a torn read is not caught.
 * Each object is removed once read: 240 MiB through 2 x 64 MiB fills the pool, and then
 * the master's trim on its tick may evict the object just put before it is read (every
 * block's clock bit set by its reads: a full lap, then any victim). That is eviction, not
 * the torn read this test is about. A CI run under stress-ng once saw NOT_FOUND through A
 * and C for one key; eviction is the likely cause, not a proven one (10 reruns under
 * stress-ng did not repeat it). A put that was never published still fails here: the reads
 * come before the remove. */
START_TEST(test_cluster_put_then_read_elsewhere_at_once)
{
    enum { N = 120 };
    const size_t len = T_MIB;
    mc_client_t *ca = t_conn(&fx.a), *cb = t_conn(&fx.b), *cc = t_conn(&fx.c);
    uint8_t *data = t_random_buf(len), *buf = malloc(len + 64);
    int i, bad = 0, err;

    ck_assert_ptr_nonnull(buf);
    for (i = 0; i < 2 * N; i++) {
        mc_put_opts_t o = {.replicas = 1, .flags = i < N ? MC_PUT_NO_CHECKSUM : 0};
        mc_client_t *rd[2] = {ca, cc};
        char key[64];

        snprintf(key, sizeof(key), "t11/%d", i);
        memcpy(data, &i, sizeof(i)); /* distinct objects */
        data[len / 2] = (uint8_t)i;
        err = mc_put(cb, key, data, len, &o);
        ck_assert_msg(err == 0, "put %s through B: %s", key, mc_strerror(err));
        for (int r = 0; r < 2; r++) {
            size_t got = 0;

            memset(buf, 0xa5, len);
            err = mc_get(rd[r], key, buf, len + 64, &got);
            if (err != 0 || got != len || memcmp(buf, data, len) != 0) {
                if (bad++ < 5)
                    fprintf(stderr, "get %s through %s right after the put: %s, %zu bytes%s\n",
                            key, r == 0 ? "A" : "C", mc_strerror(err), got,
                            err == 0 && got == len ? ", wrong bytes" : "");
            }
        }
        err = mc_remove(cb, key);
        ck_assert_msg(err == 0, "remove %s after its reads: %s", key, mc_strerror(err));
    }
    ck_assert_msg(bad == 0, "%d of %d reads right after a put were wrong", bad, 4 * N);
    free(data);
    free(buf);
    mc_close(ca);
    mc_close(cb);
    mc_close(cc);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("cluster");
    TCase *tc = tcase_create("three_nodes");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_cluster_put_a_get_b_c);
    tcase_add_test(tc, test_cluster_replicas_two_distinct_nodes);
    tcase_add_test(tc, test_cluster_same_domain_ok);
    tcase_add_test(tc, test_cluster_batches_span_nodes);
    tcase_add_test(tc, test_cluster_client_node_reads_everything);
    tcase_add_test(tc, test_cluster_concurrent_writers_same_key);
    tcase_add_test(tc, test_cluster_token_required);
    tcase_add_test(tc, test_cluster_exist_remove_ls);
    tcase_add_test(tc, test_cluster_many_remote_reads_in_flight);
    tcase_add_test(tc, test_cluster_sigterm_agent_leaves);
    tcase_add_test(tc, test_cluster_put_then_read_elsewhere_at_once);
    suite_add_tcase(s, tc);
    return s;
}

/* Stop the shared daemons, agents first; false unless each exited cleanly. */
static bool t_fixture_stop(bool dump)
{
    struct t_proc *all[4] = {&fx.a, &fx.b, &fx.c, &fx.master};
    bool clean = true;
    char st[48];
    int i;

    for (i = 0; i < 4; i++) {
        if (t_proc_stop(all[i]) != 0) {
            fprintf(stderr, "test_cluster: %s did not exit cleanly on SIGTERM (%s)\n",
                    all[i]->name, t_status_str(all[i]->status, st, sizeof(st)));
            clean = false;
        }
    }
    for (i = 0; i < 4 && (dump || !clean); i++)
        t_proc_dump_log(all[i], 4096);
    return clean;
}

int main(void)
{
    SRunner *sr;
    int failed;
    bool clean;

    t_mkdtemp(fx.dir, sizeof(fx.dir));
    t_random_token(fx.token, sizeof(fx.token));
    t_master_start(&fx.master, fx.dir, fx.token);
    /* start the three together: they join in parallel */
    t_agent_spawn(&fx.a, fx.dir, fx.master.port, "A", "da", "64M", fx.token, NULL);
    t_agent_spawn(&fx.b, fx.dir, fx.master.port, "B", NULL, "0", fx.token, NULL);
    t_agent_spawn(&fx.c, fx.dir, fx.master.port, "C", "dc", "64M", fx.token, NULL);
    struct t_proc *agents[3] = {&fx.a, &fx.b, &fx.c};
    for (int i = 0; i < 3; i++) {
        if (t_proc_wait_ready(agents[i], T_READY_MS) != 0) {
            fprintf(stderr, "test_cluster: mc-agent %s did not get ready\n", agents[i]->name);
            t_fixture_stop(true);
            return EXIT_FAILURE;
        }
    }

    sr = srunner_create(t_suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    clean = t_fixture_stop(failed != 0);
    if (clean)
        t_rmdir(fx.dir);
    return failed == 0 && clean ? EXIT_SUCCESS : EXIT_FAILURE;
}
