/*
 * Corruption behind the store's back (suite slow): bytes of a stored object flipped in the
 * agent's DRAM segment, which is what a bad DIMM or a stray write would do. The test writes
 * through /proc/<agent pid>/mem into the writable mapping of the agent's "mc-dram" memfd:
 * the agent is not dumpable, so this needs CAP_SYS_PTRACE (root); where opening or writing
 * it is refused, the whole test exits 77 (SKIP) and says why.
 *
 * The object is found in the segment by its contents (its first bytes are random, so they
 * occur once), and the test checks the whole object lies there before it flips anything.
 * After each flip the byte is restored and the object must read back exactly again: the
 * detection is of the flip, not of something else.
 *
 *   test_slow_corruption_standalone        one agent, local reads: a flip in the first,
 *                                          a middle and the last chunk of the data and in
 *                                          the checksum trailer; mc_get, mc_batch_get and
 *                                          mc_get_async end with MC_ERR_CORRUPT and `mcctl
 *                                          get` fails writing nothing (never the bytes)
 *   test_slow_corruption_remote_single     cluster, one replica on A, read through B
 *                                          (--dram 0) and A: MC_ERR_CORRUPT
 *   test_slow_corruption_replica_failover  cluster, two replicas on A and C, A's copy
 *                                          corrupted: reads through A, B and C (mc_get,
 *                                          mc_batch_get) all return the exact bytes (the
 *                                          intact replica is served, docs/failure-contract.md "checksum
 *                                          mismatch: another replica is tried"); both copies
 *                                          corrupted: MC_ERR_CORRUPT
 *   test_slow_corruption_replica_failover_async
 *                                          the same with mc_get_async, whose final status
 *                                          is what mc_get would return (mc.h)
 */
#include "shm/ring.h"
#include "t_slow.h"

#define MIB     ((size_t)1024 * 1024)
#define OBJ_LEN (3 * MIB + 12345) /* four checksum chunks, the last one partial */
#define NEEDLE  256               /* leading bytes searched for in the segment */
#define READS   8                 /* reads through each node, so every replica gets picked */

/* --- the agent's segment through /proc/PID/mem -------------------------------------------- */

struct seg {
    pid_t pid;
    uint64_t start, len, pgoff;
    int fd; /* /proc/PID/mem, read-write */
};

static int seg_open(struct seg *s, pid_t pid, char *why, size_t cap)
{
    char path[64];

    s->pid = pid;
    s->fd = -1;
    if (t_proc_find_memfd_map(pid, "mc-dram", &s->start, &s->len, &s->pgoff) != 0) {
        snprintf(why, cap, "no writable mc-dram mapping in /proc/%d/maps", (int)pid);
        return -1;
    }
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    s->fd = open(path, O_RDWR | O_CLOEXEC);
    if (s->fd < 0) {
        snprintf(why, cap, "open %s for writing: %s (needs root / CAP_SYS_PTRACE)", path,
                 strerror(errno));
        return -1;
    }
    return 0;
}

static void seg_close(struct seg *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

static uint64_t seg_addr(const struct seg *s, uint64_t off)
{
    ck_assert_uint_ge(off, s->pgoff);
    ck_assert_uint_le(off - s->pgoff, s->len);
    return s->start + (off - s->pgoff);
}

static void seg_read(struct seg *s, uint64_t off, void *buf, size_t len)
{
    ssize_t n = pread(s->fd, buf, len, (off_t)seg_addr(s, off));

    ck_assert_msg(n == (ssize_t)len, "read %zu bytes of the segment at %" PRIu64 ": %s", len,
                  off, n < 0 ? strerror(errno) : "short");
}

static void seg_write(struct seg *s, uint64_t off, const void *buf, size_t len)
{
    ssize_t n = pwrite(s->fd, buf, len, (off_t)seg_addr(s, off));

    ck_assert_msg(n == (ssize_t)len, "write %zu bytes of the segment at %" PRIu64 ": %s", len,
                  off, n < 0 ? strerror(errno) : "short");
}

/* The segment offset of the object whose contents are want[0..len): found by its first
 * NEEDLE bytes, then checked whole. */
static uint64_t seg_find(struct seg *s, const uint8_t *want, size_t len)
{
    const size_t step = 4 * MIB;
    uint8_t *buf = malloc(step + NEEDLE), *hit, *whole;
    uint64_t off, found = UINT64_MAX;

    ck_assert_ptr_nonnull(buf);
    for (off = s->pgoff; off < s->pgoff + s->len && found == UINT64_MAX; off += step) {
        size_t n =
            s->pgoff + s->len - off < step + NEEDLE ? s->pgoff + s->len - off : step + NEEDLE;

        seg_read(s, off, buf, n);
        hit = memmem(buf, n, want, NEEDLE);
        if (hit != NULL)
            found = off + (uint64_t)(hit - buf);
    }
    free(buf);
    ck_assert_msg(found != UINT64_MAX, "the object is not in the segment of pid %d",
                  (int)s->pid);
    whole = malloc(len);
    ck_assert_ptr_nonnull(whole);
    seg_read(s, found, whole, len);
    ck_assert_msg(memcmp(whole, want, len) == 0, "the segment at %" PRIu64 " is not the object",
                  found);
    free(whole);
    return found;
}

/* Flip (xor 0xff) the byte at off; returns the original. */
static uint8_t seg_flip(struct seg *s, uint64_t off)
{
    uint8_t orig, bad;

    seg_read(s, off, &orig, 1);
    bad = (uint8_t)(orig ^ 0xff);
    seg_write(s, off, &bad, 1);
    return orig;
}

static void seg_restore(struct seg *s, uint64_t off, uint8_t orig)
{
    seg_write(s, off, &orig, 1);
}

/* --- reads -------------------------------------------------------------------------------- */

static mc_client_t *t_conn(struct t_proc *p)
{
    mc_client_t *c = NULL;
    int err = mc_connect(p->sock, &c);

    if (err != 0)
        t_proc_dump_log(p, 8192);
    ck_assert_msg(err == 0, "mc_connect(%s): %s", p->name, mc_strerror(err));
    return c;
}

/* A get through c that must return exactly want (len bytes). */
static void get_exact(mc_client_t *c, const char *node, const char *key, const uint8_t *want,
                      size_t len, const char *when)
{
    size_t cap = len + 4096, got = 0;
    uint8_t *buf = malloc(cap);
    int err;

    ck_assert_ptr_nonnull(buf);
    err = mc_get(c, key, buf, cap, &got);
    ck_assert_msg(err == 0, "%s: get %s through %s: %s", when, key, node, mc_strerror(err));
    ck_assert_msg(got == len && memcmp(buf, want, len) == 0,
                  "%s: get %s through %s: %zu bytes, not the object's %zu", when, key, node,
                  got, len);
    free(buf);
}

/* Every way of reading key through c must end with MC_ERR_CORRUPT. */
static void get_corrupt(mc_client_t *c, const char *node, const char *key, const char *when,
                        const char *sock)
{
    size_t cap = OBJ_LEN + 4096, got = 0, lens[1] = {0}, caps[1] = {cap};
    uint8_t *buf = malloc(cap);
    const char *keys[1] = {key};
    void *bufs[1] = {buf};
    int err, res[1] = {0};
    mc_op_t *op = NULL;

    ck_assert_ptr_nonnull(buf);
    err = mc_get(c, key, buf, cap, &got);
    ck_assert_msg(err == MC_ERR_CORRUPT, "%s: get %s through %s: %s, want MC_ERR_CORRUPT", when,
                  key, node, err == 0 ? "success (the corrupted bytes)" : mc_strerror(err));
    err = mc_batch_get(c, 1, keys, bufs, caps, lens, res);
    ck_assert_msg(err == 0 && res[0] == MC_ERR_CORRUPT,
                  "%s: batch get %s through %s: %d, item %s, want MC_ERR_CORRUPT", when, key,
                  node, err,
                  res[0] == 0 ? "success (the corrupted bytes)" : mc_strerror(res[0]));
    ck_assert_int_eq(mc_get_async(c, key, buf, cap, &op), 0);
    err = mc_wait(op, -1, &got);
    mc_op_free(op);
    ck_assert_msg(err == MC_ERR_CORRUPT, "%s: async get %s through %s: %s, want MC_ERR_CORRUPT",
                  when, key, node,
                  err == 0 ? "success (the corrupted bytes)" : mc_strerror(err));
    if (sock != NULL) {
        /* mcctl: a failure (exit 3), and not one byte of the object in its output file */
        char out[300];
        struct stat st;
        int rc;

        snprintf(out, sizeof(out), "%s.out", sock);
        unlink(out);
        rc = t_mcctl(sock, NULL, "get", key, out, NULL);
        ck_assert_msg(rc == 3, "%s: mcctl get %s through %s: exit %d, want 3", when, key, node,
                      rc);
        ck_assert_msg(stat(out, &st) != 0 || st.st_size == 0,
                      "%s: mcctl get %s wrote %lld bytes of a corrupt object", when, key,
                      (long long)st.st_size);
        unlink(out);
    }
    free(buf);
}

static uint8_t *new_object(size_t len)
{
    uint8_t *v = malloc(len);

    ck_assert_ptr_nonnull(v);
    t_fill_random(v, len);
    return v;
}

/* --- (a) standalone ----------------------------------------------------------------------- */

START_TEST(test_slow_corruption_standalone)
{
    /* the data: first chunk, a middle chunk, the last (partial) chunk's last byte; the
     * trailer: chunk 1's checksum and the object checksum (shm/ring.h) */
    const uint64_t trailer = mc_shm_trailer_off(OBJ_LEN);
    const struct {
        const char *what;
        uint64_t at;
    } flips[] = {
        {"the first byte", 0},
        {"a byte of the third chunk", 2 * MIB + 4321},
        {"the last byte", OBJ_LEN - 1},
        {"chunk 1's checksum", trailer + 8 * 1 + 3},
        {"the object checksum", trailer + 8 * mc_shm_nchunks(OBJ_LEN)},
    };
    struct t_proc agent = {0};
    char dir[256], why[300], when[128];
    uint8_t *v = new_object(OBJ_LEN), orig;
    uint64_t off;
    struct seg s;
    mc_client_t *c;
    size_t i;

    t_mkdtemp(dir, sizeof(dir));
    t_standalone_start(&agent, dir, "agent", "64M", NULL);
    c = t_conn(&agent);
    ck_assert_int_eq(mc_put(c, "victim", v, OBJ_LEN, NULL), 0);
    ck_assert_msg(seg_open(&s, agent.pid, why, sizeof(why)) == 0, "%s", why);
    off = seg_find(&s, v, OBJ_LEN);
    fprintf(stderr, "standalone: the object is at offset %" PRIu64 " of the segment\n", off);
    for (i = 0; i < sizeof(flips) / sizeof(flips[0]); i++) {
        snprintf(when, sizeof(when), "%s flipped", flips[i].what);
        orig = seg_flip(&s, off + flips[i].at);
        get_corrupt(c, "the agent", "victim", when, agent.sock);
        seg_restore(&s, off + flips[i].at, orig);
        snprintf(when, sizeof(when), "%s restored", flips[i].what);
        get_exact(c, "the agent", "victim", v, OBJ_LEN, when);
    }
    seg_close(&s);
    mc_close(c);
    ck_assert_int_eq(t_proc_stop(&agent), 0);
    t_rmdir(dir);
    free(v);
}
END_TEST

/* --- (b), (c) cluster --------------------------------------------------------------------- */

struct cl {
    char dir[256], token[40];
    struct t_proc master, a, b, c;
};

static void cl_start(struct cl *k, bool with_c)
{
    t_mkdtemp(k->dir, sizeof(k->dir));
    t_random_token(k->token, sizeof(k->token));
    t_master_start(&k->master, k->dir, k->token);
    t_agent_start(&k->a, k->dir, k->master.port, "A", "da", "64M", k->token, NULL);
    t_agent_start(&k->b, k->dir, k->master.port, "B", "db", "0", k->token, NULL);
    if (with_c)
        t_agent_start(&k->c, k->dir, k->master.port, "C", "dc", "64M", k->token, NULL);
}

static void cl_stop(struct cl *k)
{
    ck_assert_int_eq(t_proc_stop(&k->b), 0);
    if (k->c.pid > 0)
        ck_assert_int_eq(t_proc_stop(&k->c), 0);
    ck_assert_int_eq(t_proc_stop(&k->a), 0);
    ck_assert_int_eq(t_proc_stop(&k->master), 0);
    t_rmdir(k->dir);
}

START_TEST(test_slow_corruption_remote_single)
{
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    uint8_t *v = new_object(OBJ_LEN), orig;
    mc_client_t *ca, *cb;
    mc_obj_info_t info;
    char why[300];
    uint64_t off;
    struct seg s;
    struct cl k = {0};

    cl_start(&k, false);
    ca = t_conn(&k.a);
    cb = t_conn(&k.b);
    o.replicas = 1;
    o.preferred_node = "A";
    ck_assert_int_eq(mc_put(cb, "solo", v, OBJ_LEN, &o), 0);
    ck_assert_int_eq(mc_stat(cb, "solo", &info), 0);
    ck_assert_uint_eq(info.replicas, 1);
    get_exact(cb, "B", "solo", v, OBJ_LEN, "before");
    ck_assert_msg(seg_open(&s, k.a.pid, why, sizeof(why)) == 0, "%s", why);
    off = seg_find(&s, v, OBJ_LEN);

    orig = seg_flip(&s, off + OBJ_LEN / 2);
    get_corrupt(cb, "B (remote)", "solo", "a data byte of A's only copy flipped", k.b.sock);
    get_corrupt(ca, "A (local)", "solo", "a data byte of A's only copy flipped", NULL);
    seg_restore(&s, off + OBJ_LEN / 2, orig);
    get_exact(cb, "B", "solo", v, OBJ_LEN, "restored");
    get_exact(ca, "A", "solo", v, OBJ_LEN, "restored");

    orig = seg_flip(&s, off + mc_shm_trailer_off(OBJ_LEN));
    get_corrupt(cb, "B (remote)", "solo", "chunk 0's checksum flipped", NULL);
    seg_restore(&s, off + mc_shm_trailer_off(OBJ_LEN), orig);
    get_exact(cb, "B", "solo", v, OBJ_LEN, "restored");

    seg_close(&s);
    mc_close(ca);
    mc_close(cb);
    cl_stop(&k);
    free(v);
}
END_TEST

static const char *const dup_names[3] = {"A (corrupt copy, local)", "B (--dram 0)",
                                         "C (intact copy, local)"};

/* (c)'s layout: "dup" with two replicas, one on A and one on C (found in both segments),
 * clients on A, B and C. */
struct dup {
    struct cl k;
    mc_client_t *cl[3];
    uint8_t *v;
    struct seg sa, sc;
    uint64_t off_a, off_c;
};

static void dup_start(struct dup *d)
{
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    mc_obj_info_t info;
    char why[300];

    memset(d, 0, sizeof(*d));
    d->v = new_object(OBJ_LEN);
    cl_start(&d->k, true);
    d->cl[0] = t_conn(&d->k.a);
    d->cl[1] = t_conn(&d->k.b);
    d->cl[2] = t_conn(&d->k.c);
    o.replicas = 2;
    ck_assert_int_eq(mc_put(d->cl[1], "dup", d->v, OBJ_LEN, &o), 0);
    ck_assert_int_eq(mc_stat(d->cl[1], "dup", &info), 0);
    ck_assert_uint_eq(info.replicas, 2);
    ck_assert_msg(seg_open(&d->sa, d->k.a.pid, why, sizeof(why)) == 0, "%s", why);
    ck_assert_msg(seg_open(&d->sc, d->k.c.pid, why, sizeof(why)) == 0, "%s", why);
    d->off_a = seg_find(&d->sa, d->v, OBJ_LEN);
    d->off_c = seg_find(&d->sc, d->v, OBJ_LEN);
}

static void dup_stop(struct dup *d)
{
    int n;

    seg_close(&d->sa);
    seg_close(&d->sc);
    for (n = 0; n < 3; n++)
        mc_close(d->cl[n]);
    cl_stop(&d->k);
    free(d->v);
}

START_TEST(test_slow_corruption_replica_failover)
{
    const char *const *names = dup_names;
    uint8_t orig_a, orig_c, *v;
    uint64_t off_a, off_c;
    mc_client_t **cl;
    struct seg *sa, *sc;
    struct dup d;
    int n, r;

    dup_start(&d);
    v = d.v;
    cl = d.cl;
    sa = &d.sa;
    sc = &d.sc;
    off_a = d.off_a;
    off_c = d.off_c;

    orig_a = seg_flip(sa, off_a + OBJ_LEN / 3);
    for (r = 0; r < READS; r++)
        for (n = 0; n < 3; n++)
            get_exact(cl[n], names[n], "dup", v, OBJ_LEN, "A's copy corrupted, C's intact");
    for (n = 0; n < 3; n++) {
        size_t cap = OBJ_LEN + 4096, lens[1] = {0}, caps[1] = {cap};
        uint8_t *buf = malloc(cap);
        const char *keys[1] = {"dup"};
        void *bufs[1] = {buf};
        int res[1] = {0}, err;

        ck_assert_ptr_nonnull(buf);
        for (r = 0; r < READS; r++) {
            err = mc_batch_get(cl[n], 1, keys, bufs, caps, lens, res);
            ck_assert_msg(err == 1 && res[0] == 0 && lens[0] == OBJ_LEN &&
                              memcmp(buf, v, OBJ_LEN) == 0,
                          "A's copy corrupted: batch get through %s: %d, item %s", names[n],
                          err, mc_strerror(res[0]));
        }
        free(buf);
    }

    /* both copies bad: every replica tried failed its checksum */
    orig_c = seg_flip(sc, off_c + OBJ_LEN / 3);
    for (n = 0; n < 3; n++)
        get_corrupt(cl[n], names[n], "dup", "both copies corrupted", NULL);
    seg_restore(sa, off_a + OBJ_LEN / 3, orig_a);
    seg_restore(sc, off_c + OBJ_LEN / 3, orig_c);
    for (n = 0; n < 3; n++)
        get_exact(cl[n], names[n], "dup", v, OBJ_LEN, "both restored");
    dup_stop(&d);
}
END_TEST

/* The same with mc_get_async: its final status is what mc_get() would return (mc.h), so it
 * too is served the intact replica. Every node is tried before the verdict, which names
 * the nodes whose async reads failed. */
START_TEST(test_slow_corruption_replica_failover_async)
{
    size_t cap = OBJ_LEN + 4096, got;
    uint8_t *buf = malloc(cap), orig_a;
    char report[300] = "";
    int n, r, err, bad[3] = {0}, first[3] = {0};
    struct dup d;

    ck_assert_ptr_nonnull(buf);
    dup_start(&d);
    orig_a = seg_flip(&d.sa, d.off_a + OBJ_LEN / 3);
    for (n = 0; n < 3; n++) {
        for (r = 0; r < READS; r++) {
            mc_op_t *op = NULL;

            got = 0;
            ck_assert_int_eq(mc_get_async(d.cl[n], "dup", buf, cap, &op), 0);
            err = mc_wait(op, -1, &got);
            mc_op_free(op);
            if (err != 0 || got != OBJ_LEN || memcmp(buf, d.v, OBJ_LEN) != 0) {
                if (bad[n]++ == 0)
                    first[n] = err;
            }
        }
        if (bad[n] > 0)
            snprintf(report + strlen(report), sizeof(report) - strlen(report),
                     " through %s: %d of %d failed (%s);", dup_names[n], bad[n], READS,
                     mc_strerror(first[n]));
    }
    ck_assert_msg(bad[0] + bad[1] + bad[2] == 0, "A's copy corrupted, C's intact: async gets%s",
                  report);
    seg_restore(&d.sa, d.off_a + OBJ_LEN / 3, orig_a);
    dup_stop(&d);
    free(buf);
}
END_TEST

/*
 * Whether this process may write into a non-dumpable agent's segment: a standalone agent is
 * started, its mc-dram mapping opened through /proc/PID/mem and one byte written back
 * unchanged. 0 when it may; otherwise the reason, and the suite is skipped.
 */
static int can_write_agent_memory(char *why, size_t cap)
{
    struct t_proc agent = {0};
    char dir[256];
    struct seg s;
    uint8_t b;
    int ok = -1;

    t_mkdtemp(dir, sizeof(dir));
    t_standalone_start(&agent, dir, "probe", "16M", NULL);
    if (seg_open(&s, agent.pid, why, cap) == 0) {
        uint64_t addr = s.start;

        if (pread(s.fd, &b, 1, (off_t)addr) != 1)
            snprintf(why, cap, "read /proc/%d/mem: %s", (int)agent.pid, strerror(errno));
        else if (pwrite(s.fd, &b, 1, (off_t)addr) != 1)
            snprintf(why, cap, "write /proc/%d/mem: %s", (int)agent.pid, strerror(errno));
        else
            ok = 0;
        seg_close(&s);
    }
    t_proc_stop(&agent);
    t_rmdir(dir);
    return ok;
}

int main(void)
{
    Suite *s = suite_create("slow");
    TCase *tc = tcase_create("corruption");
    SRunner *sr;
    char why[300];
    int failed;

    if (can_write_agent_memory(why, sizeof(why)) != 0) {
        fprintf(stderr,
                "test_slow_corruption: cannot write into the agent's segment (%s): "
                "skipping\n",
                why);
        return 77;
    }
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_slow_corruption_standalone);
    tcase_add_test(tc, test_slow_corruption_remote_single);
    tcase_add_test(tc, test_slow_corruption_replica_failover);
    tcase_add_test(tc, test_slow_corruption_replica_failover_async);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
