/*
 * Soak (suite slow): mc-master and three data agents (t_cluster.h), 32 client processes
 * spread over the agents, a mixed workload on one shared key space of 2000 keys for
 * MC_SOAK_SECONDS (default 60, what CI runs; the 5-minute soak is MC_SOAK_SECONDS=300, run
 * with `meson test --suite slow -t 3` or the binary directly).
 *
 * Each client loops over: get, batch get (4 keys), exist, stat, plain put, upsert and remove,
 * on keys drawn half from a hot set of 200 (so clients race on the same keys all the time)
 * and half from all 2000; puts and upserts store 1 or 2 replicas; every ~2000 ops a client
 * closes its connection and connects again (client regions made and torn down all along).
 * Values describe themselves: a header (magic, key id, length, the writer's nonce, a header
 * checksum) and a body that is a pattern seeded by key and nonce, so every successful read
 * is verified whole: right key, right length, bytes of one writer's one version.
 *
 * Assertions:
 *   - no unexpected status: get/stat/remove may answer MC_ERR_NOT_FOUND (another client
 *     removed the key), a plain put MC_ERR_EXISTS or MC_ERR_BUSY (the key is there, or
 *     another put of it is in flight), a put or an upsert MC_ERR_CANCELED (a newer upsert
 *     superseded it while it was in flight: docs/master.md "a newer upsert supersedes an
 *     older PROCESSING one", which may be a plain put; mc.h lists MC_ERR_CANCELED for
 *     upserts only); everything else fails the test. The pool (3 x 256 MiB) is several
 *     times what the key space can hold at once (about 2000 x 90 KiB x 1.3 replicas), so
 *     MC_ERR_NO_SPACE is not expected either, and evictions are reported;
 *   - every successful read verifies; a put that returned 0 is read back at once through a
 *     client of the next agent (another node) and must verify (most of the time it is
 *     that put's own version; a racing upsert or remove may have replaced it); a third of
 *     the puts carry no checksum, so a torn read cannot hide behind MC_ERR_CORRUPT;
 *   - every client makes progress: at every sample, each has finished an op within the
 *     last 15 s (three op deadlines), and each ends when the run does;
 *   - after the first 20% of the run (warm-up), each daemon's VmRSS and its private part
 *     (RssAnon) grow by at most 8 MiB. The agents' segments are resident from the start
 *     (prefault: the DRAM segment and the landing segment), so what VmRSS can still gain is
 *     the heap and the client regions (about 1 MiB each, made and freed as clients
 *     reconnect). Measured on 2 cores: the 60 s run does about 1.5 M ops and 750
 *     reconnects, and VmRSS moves by under 2 MiB after the warm-up; a leak of 6 bytes per
 *     op, or of 10 KiB per reconnect, exceeds the bound. Open fds stay within 16 of the
 *     warm-up count (a few clients reconnecting at once), and once every client is gone
 *     they are at most the warm-up count (which had ~11 clients per agent connected);
 *   - at the end, quiescent: every key reads the same (absent, or the same writer's same
 *     version) through all three agents, STATS objects is the number of keys present,
 *     and after removing everything used_bytes returns to 0 (no space leaked by leases,
 *     superseded upserts or revoked puts);
 *   - every daemon exits 0 on SIGTERM.
 *
 * MC_SLOW_SEED replays the random choices (not the interleaving).
 */
#include <sys/mman.h>

#include "t_slow.h"

#define KIB ((size_t)1024)
#define MIB ((size_t)1024 * 1024)

#define SOAK_KEYS           2000
#define SOAK_HOT            200
#define SOAK_CLIENTS        32
#define SOAK_AGENTS         3
#define SOAK_MAX            (2 * MIB)
#define SOAK_BATCH          4
#define SOAK_MAGIC          0x4b414f5343534d21ull /* "!MSCSOAK" */
#define SOAK_SAMPLE_S       2
#define SOAK_RSS_ANON_BOUND (8 * MIB)
#define SOAK_RSS_BOUND      (8 * MIB)
#define SOAK_FD_BOUND       16
#define SOAK_STALL_MS       15000 /* three op deadlines */

enum { OP_GET, OP_BGET, OP_EXIST, OP_STAT, OP_PUT, OP_UPSERT, OP_REMOVE, OP_N };

static const char *const op_names[OP_N] = {"get", "batch_get", "exist", "stat",
                                           "put", "upsert",    "remove"};

#define SOAK_MSGS 6

/* One client's tallies, in memory shared with the test process. */
struct soak_tally {
    uint64_t ops[OP_N], ok[OP_N];
    uint64_t not_found, exists, busy, canceled, canceled_plain;
    uint64_t verified, verify_failed, unexpected;
    uint64_t after_put_reads, after_put_own; /* reads through another node the instant a put
                                                returned; of them, that put's own version */
    uint64_t reconnects;
    uint64_t last_op_ms; /* progress: when the last op finished */
    int nmsgs;
    char msgs[SOAK_MSGS][200];
};

struct soak_hdr {
    uint64_t magic;
    uint32_t key_id;
    uint32_t len;
    uint64_t nonce;
    uint64_t sum;
};

_Static_assert(sizeof(struct soak_hdr) == 32, "soak header");

static struct {
    char dir[256];
    char token[40];
    struct t_proc master, ag[SOAK_AGENTS];
    struct soak_tally *tally; /* SOAK_CLIENTS, MAP_SHARED */
    uint64_t seed;
    uint64_t end_ms;
} fx;

static uint64_t hdr_sum(const struct soak_hdr *h)
{
    return t_splitmix(h->magic ^ ((uint64_t)h->key_id << 32 | h->len) ^ t_splitmix(h->nonce));
}

static uint64_t body_seed(uint32_t key_id, uint64_t nonce)
{
    return t_splitmix(((uint64_t)key_id << 40) ^ nonce);
}

static void key_name(char *out, size_t cap, uint32_t key_id)
{
    snprintf(out, cap, "soak/%u", key_id);
}

static void value_fill(uint8_t *buf, uint32_t len, uint32_t key_id, uint64_t nonce)
{
    struct soak_hdr h = {.magic = SOAK_MAGIC, .key_id = key_id, .len = len, .nonce = nonce};

    h.sum = hdr_sum(&h);
    memcpy(buf, &h, sizeof(h));
    t_pattern_fill(buf + sizeof(h), len - sizeof(h), body_seed(key_id, nonce));
}

/* NULL when buf[0..len) is a whole value of key_id (its nonce in *nonce_p), else why not. */
static const char *value_check(const uint8_t *buf, size_t len, uint32_t key_id,
                               uint64_t *nonce_p, char *why, size_t cap)
{
    struct soak_hdr h;
    size_t bad;

    if (len < sizeof(h)) {
        snprintf(why, cap, "%zu bytes, shorter than the header", len);
        return why;
    }
    memcpy(&h, buf, sizeof(h));
    if (h.magic != SOAK_MAGIC || h.sum != hdr_sum(&h)) {
        snprintf(why, cap, "bad header (magic %016" PRIx64 ")", h.magic);
        return why;
    }
    if (h.key_id != key_id) {
        snprintf(why, cap, "the value of key %u", h.key_id);
        return why;
    }
    if (h.len != len) {
        snprintf(why, cap, "%zu bytes of a %u-byte value", len, h.len);
        return why;
    }
    bad = t_pattern_mismatch(buf + sizeof(h), len - sizeof(h), body_seed(key_id, h.nonce));
    if (bad != len - sizeof(h)) {
        snprintf(why, cap, "byte %zu of %zu differs", bad + sizeof(h), len);
        return why;
    }
    if (nonce_p != NULL)
        *nonce_p = h.nonce;
    return NULL;
}

/* --- a client process --------------------------------------------------------------------- */

static void tally_msg(struct soak_tally *t, const char *fmt, ...)
{
    va_list ap;

    if (t->nmsgs >= SOAK_MSGS)
        return;
    va_start(ap, fmt);
    vsnprintf(t->msgs[t->nmsgs], sizeof(t->msgs[0]), fmt, ap);
    va_end(ap);
    t->nmsgs++;
}

static void unexpected(struct soak_tally *t, int op, const char *key, int rc)
{
    t->unexpected++;
    tally_msg(t, "%s %s: %s (%d)", op_names[op], key, mc_strerror(rc), rc);
}

/* A read came back: verify it, or count the miss. */
static void read_result(struct soak_tally *t, int op, const char *key, uint32_t key_id, int rc,
                        const uint8_t *buf, size_t len)
{
    char why[120];

    if (rc == 0) {
        if (value_check(buf, len, key_id, NULL, why, sizeof(why)) == NULL) {
            t->verified++;
        } else {
            t->verify_failed++;
            tally_msg(t, "%s %s: read does not verify: %s", op_names[op], key, why);
        }
    } else if (rc == MC_ERR_NOT_FOUND) {
        t->not_found++;
    } else {
        unexpected(t, op, key, rc);
    }
}

static uint32_t pick_key(struct t_rng *r)
{
    return t_rng_below(r, 2) == 0 ? (uint32_t)t_rng_below(r, SOAK_HOT)
                                  : (uint32_t)t_rng_below(r, SOAK_KEYS);
}

static uint32_t pick_size(struct t_rng *r)
{
    if (t_rng_below(r, 100) < 85)
        return (uint32_t)t_rng_log_size(r, 64, 64 * KIB);
    return (uint32_t)t_rng_log_size(r, 64 * KIB, SOAK_MAX);
}

static void client_main(int idx)
{
    struct soak_tally *t = &fx.tally[idx];
    const char *sock = fx.ag[idx % SOAK_AGENTS].sock;
    const char *sock2 = fx.ag[(idx + 1) % SOAK_AGENTS].sock; /* reads right after a put */
    struct t_rng rng = {t_splitmix(fx.seed + 0x1000u * (uint64_t)(idx + 1))};
    uint8_t *wbuf = malloc(SOAK_MAX), *rbuf = malloc((size_t)SOAK_BATCH * SOAK_MAX);
    char keys[SOAK_BATCH][32];
    uint64_t counter = 0;
    mc_client_t *c = NULL, *c2 = NULL;
    int rc;

    if (wbuf == NULL || rbuf == NULL || mc_connect(sock, &c) != 0 ||
        mc_connect(sock2, &c2) != 0) {
        tally_msg(t, "client %d: no start", idx);
        t->unexpected++;
        _exit(1);
    }
    while (t_now_ms() < fx.end_ms) {
        uint32_t kid = pick_key(&rng), len;
        unsigned what = (unsigned)t_rng_below(&rng, 100);
        mc_put_opts_t o = MC_PUT_OPTS_INIT;
        mc_obj_info_t info;
        size_t got;
        int op;

        if (t_rng_below(&rng, 2000) == 0) {
            mc_close(c);
            c = NULL;
            rc = mc_connect(sock, &c);
            if (rc != 0) {
                unexpected(t, OP_GET, "(reconnect)", rc);
                _exit(1);
            }
            t->reconnects++;
        }
        key_name(keys[0], sizeof(keys[0]), kid);
        if (what < 30) {
            op = OP_GET;
            got = 0;
            rc = mc_get(c, keys[0], rbuf, SOAK_MAX, &got);
            t->ok[op] += rc == 0;
            read_result(t, op, keys[0], kid, rc, rbuf, got);
        } else if (what < 40) {
            const char *kp[SOAK_BATCH];
            void *bufs[SOAK_BATCH];
            size_t caps[SOAK_BATCH], lens[SOAK_BATCH];
            uint32_t kids[SOAK_BATCH];
            int res[SOAK_BATCH], i;

            op = OP_BGET;
            for (i = 0; i < SOAK_BATCH; i++) {
                kids[i] = i == 0 ? kid : pick_key(&rng);
                key_name(keys[i], sizeof(keys[i]), kids[i]);
                kp[i] = keys[i];
                bufs[i] = rbuf + (size_t)i * SOAK_MAX;
                caps[i] = SOAK_MAX;
                lens[i] = 0;
            }
            rc = mc_batch_get(c, SOAK_BATCH, kp, bufs, caps, lens, res);
            if (rc < 0) {
                unexpected(t, op, keys[0], rc);
            } else {
                t->ok[op]++; /* the call; its items are verified or counted as misses */
                for (i = 0; i < SOAK_BATCH; i++)
                    read_result(t, op, keys[i], kids[i], res[i], bufs[i], lens[i]);
            }
        } else if (what < 50) {
            op = OP_EXIST;
            rc = mc_exist(c, keys[0]);
            if (rc == 0 || rc == 1)
                t->ok[op]++;
            else
                unexpected(t, op, keys[0], rc);
        } else if (what < 55) {
            op = OP_STAT;
            rc = mc_stat(c, keys[0], &info);
            if (rc == 0) {
                t->ok[op]++;
                if (info.size < sizeof(struct soak_hdr) || info.size > SOAK_MAX ||
                    info.replicas < 1 || info.replicas > 2 || info.version == 0) {
                    t->verify_failed++;
                    tally_msg(t, "stat %s: size %" PRIu64 ", %u replicas, version %" PRIu64,
                              keys[0], info.size, info.replicas, info.version);
                }
            } else if (rc == MC_ERR_NOT_FOUND) {
                t->not_found++;
            } else {
                unexpected(t, op, keys[0], rc);
            }
        } else if (what < 88) {
            op = what < 70 ? OP_PUT : OP_UPSERT;
            len = pick_size(&rng);
            value_fill(wbuf, len, kid, ((uint64_t)idx << 48) | ++counter);
            o.replicas = t_rng_below(&rng, 10) < 3 ? 2 : 1;
            o.flags = op == OP_UPSERT ? MC_PUT_UPSERT : 0;
            if (t_rng_below(&rng, 3) == 0)
                o.flags |= MC_PUT_NO_CHECKSUM;
            rc = mc_put(c, keys[0], wbuf, len, &o);
            if (rc == 0) {
                uint64_t nonce = 0;
                char why[120];

                t->ok[op]++;
                /* the instant it returned, through another node */
                got = 0;
                rc = mc_get(c2, keys[0], rbuf, SOAK_MAX, &got);
                t->after_put_reads++;
                if (rc == 0 && value_check(rbuf, got, kid, &nonce, why, sizeof(why)) == NULL &&
                    nonce == (((uint64_t)idx << 48) | counter))
                    t->after_put_own++;
                read_result(t, OP_GET, keys[0], kid, rc, rbuf, got);
                rc = 0;
            } else if (op == OP_PUT && rc == MC_ERR_EXISTS) {
                t->exists++;
            } else if (op == OP_PUT && rc == MC_ERR_BUSY) {
                t->busy++;
            } else if (rc == MC_ERR_CANCELED) {
                t->canceled++; /* superseded by a newer upsert (docs/master.md), plain or not */
                t->canceled_plain += op == OP_PUT;
            } else {
                unexpected(t, op, keys[0], rc);
            }
        } else {
            op = OP_REMOVE;
            rc = mc_remove(c, keys[0]);
            if (rc == 0)
                t->ok[op]++;
            else if (rc == MC_ERR_NOT_FOUND)
                t->not_found++;
            else
                unexpected(t, op, keys[0], rc);
        }
        t->ops[op]++;
        t->last_op_ms = t_now_ms();
    }
    mc_close(c);
    mc_close(c2);
    free(wbuf);
    free(rbuf);
    _exit(0);
}

/* --- the test ----------------------------------------------------------------------------- */

struct sample {
    uint64_t t_ms;
    int64_t rss[SOAK_AGENTS + 1], anon[SOAK_AGENTS + 1], shmem[SOAK_AGENTS + 1];
    int fds[SOAK_AGENTS + 1];
};

static struct t_proc *daemon_of(int d)
{
    return d == 0 ? &fx.master : &fx.ag[d - 1];
}

static void take_sample(struct sample *s, uint64_t t0)
{
    int d;

    s->t_ms = t_now_ms() - t0;
    for (d = 0; d <= SOAK_AGENTS; d++) {
        pid_t pid = daemon_of(d)->pid;

        s->rss[d] = t_proc_status_kb(pid, "VmRSS");
        s->anon[d] = t_proc_status_kb(pid, "RssAnon");
        s->shmem[d] = t_proc_status_kb(pid, "RssShmem");
        s->fds[d] = t_proc_nfds(pid);
    }
}

/* The end: quiescent, every key reads the same through every agent. Returns how many keys
 * are present. */
static int final_consistency(mc_client_t *c[SOAK_AGENTS])
{
    uint8_t *buf = malloc(SOAK_MAX);
    int present = 0, k, a, rc;
    char key[32], why[120];

    ck_assert_ptr_nonnull(buf);
    for (k = 0; k < SOAK_KEYS; k++) {
        uint64_t nonce0 = 0, nonce;
        int rc0 = 0;

        key_name(key, sizeof(key), (uint32_t)k);
        for (a = 0; a < SOAK_AGENTS; a++) {
            size_t got = 0;

            nonce = 0;
            rc = mc_get(c[a], key, buf, SOAK_MAX, &got);
            ck_assert_msg(rc == 0 || rc == MC_ERR_NOT_FOUND, "final get %s through %s: %s", key,
                          fx.ag[a].name, mc_strerror(rc));
            if (rc == 0)
                ck_assert_msg(value_check(buf, got, (uint32_t)k, &nonce, why, sizeof(why)) ==
                                  NULL,
                              "final get %s through %s: %s", key, fx.ag[a].name, why);
            if (a == 0) {
                rc0 = rc;
                nonce0 = nonce;
                present += rc == 0;
            } else {
                ck_assert_msg(rc == rc0 && nonce == nonce0,
                              "%s reads differently through %s (%s, writer nonce %" PRIx64
                              ") and %s (%s, writer nonce %" PRIx64 ")",
                              key, fx.ag[0].name, mc_strerror(rc0), nonce0, fx.ag[a].name,
                              mc_strerror(rc), nonce);
            }
        }
    }
    free(buf);
    return present;
}

START_TEST(test_slow_soak)
{
    const char *extra[] = {"--set", "prefault=true", "--set", "landing=128M", NULL};
    const char *s_env = getenv("MC_SOAK_SECONDS");
    int seconds = s_env != NULL && s_env[0] != '\0' ? atoi(s_env) : 60;
    pid_t pids[SOAK_CLIENTS];
    struct sample *smp, pre;
    int nsmp = 0, maxsmp, i, d, w, present, status, fds_end[SOAK_AGENTS + 1];
    uint64_t t0, next, deadline, sum[OP_N] = {0}, oks[OP_N] = {0}, verified = 0,
                                 verify_failed = 0, unexp = 0, nf = 0, ex = 0, busy = 0,
                                 canc = 0, canc_plain = 0, reconn = 0, total = 0,
                                 ap_reads = 0, ap_own = 0;
    mc_client_t *c[SOAK_AGENTS];
    int64_t objects, used, evictions;
    char name[16];
    uint64_t removed = 0;

    ck_assert_int_gt(seconds, 0);
    fx.seed = t_slow_seed("soak");
    t_mkdtemp(fx.dir, sizeof(fx.dir));
    t_random_token(fx.token, sizeof(fx.token));
    t_master_start(&fx.master, fx.dir, fx.token);
    for (i = 0; i < SOAK_AGENTS; i++) {
        snprintf(name, sizeof(name), "ag%d", i + 1);
        t_agent_start(&fx.ag[i], fx.dir, fx.master.port, name, name, "256M", fx.token, extra);
    }
    fx.tally = mmap(NULL, sizeof(*fx.tally) * SOAK_CLIENTS, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(fx.tally, MAP_FAILED);
    maxsmp = seconds / SOAK_SAMPLE_S + 8;
    smp = calloc((size_t)maxsmp, sizeof(*smp));
    ck_assert_ptr_nonnull(smp);

    take_sample(&pre, t_now_ms()); /* the daemons before any client */
    t0 = t_now_ms();
    fx.end_ms = t0 + (uint64_t)seconds * 1000;
    for (i = 0; i < SOAK_CLIENTS; i++) {
        fflush(NULL);
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            client_main(i);
        }
    }
    /* sample the daemons every SOAK_SAMPLE_S s while the clients run; the clients' progress
     * is checked at each sample too */
    next = t0;
    while (t_now_ms() < fx.end_ms && nsmp < maxsmp) {
        while (t_now_ms() < next)
            t_poll_pause();
        take_sample(&smp[nsmp++], t0);
        for (d = 0; d <= SOAK_AGENTS; d++)
            ck_assert_msg(smp[nsmp - 1].rss[d] > 0, "%s is gone", daemon_of(d)->name);
        /* a client whose op has not returned for 3 deadlines (5 s each) is stuck */
        for (i = 0; i < SOAK_CLIENTS && t_now_ms() > t0 + SOAK_STALL_MS; i++) {
            uint64_t last = fx.tally[i].last_op_ms;

            ck_assert_msg(last + SOAK_STALL_MS > t_now_ms(),
                          "client %d (on %s) stalled: no op finished for %" PRIu64 " ms", i,
                          fx.ag[i % SOAK_AGENTS].name, t_now_ms() - last);
        }
        next += SOAK_SAMPLE_S * 1000;
    }
    deadline = fx.end_ms + 30000;
    for (i = 0; i < SOAK_CLIENTS; i++) {
        pid_t r;

        while ((r = waitpid(pids[i], &status, WNOHANG)) == 0 && t_now_ms() < deadline)
            t_poll_pause();
        if (r != pids[i]) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], &status, 0);
            ck_abort_msg("client %d did not finish within 30 s of the end (its last op "
                         "finished %" PRId64 " ms before the end)",
                         i, (int64_t)fx.end_ms - (int64_t)fx.tally[i].last_op_ms);
        }
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "client %d ended with status 0x%x", i, status);
    }
    take_sample(&smp[nsmp < maxsmp ? nsmp++ : nsmp - 1], t0);

    /* tallies */
    for (i = 0; i < SOAK_CLIENTS; i++) {
        struct soak_tally *t = &fx.tally[i];
        uint64_t n = 0;

        for (int op = 0; op < OP_N; op++) {
            sum[op] += t->ops[op];
            oks[op] += t->ok[op];
            n += t->ops[op];
        }
        total += n;
        verified += t->verified;
        verify_failed += t->verify_failed;
        unexp += t->unexpected;
        nf += t->not_found;
        ex += t->exists;
        busy += t->busy;
        canc += t->canceled;
        canc_plain += t->canceled_plain;
        reconn += t->reconnects;
        ap_reads += t->after_put_reads;
        ap_own += t->after_put_own;
        for (int m = 0; m < t->nmsgs; m++)
            fprintf(stderr, "soak: client %d: %s\n", i, t->msgs[m]);
        /* progress: each client did ops, the last one near the end */
        ck_assert_msg(n >= 10, "client %d did only %" PRIu64 " ops", i, n);
        ck_assert_msg(t->last_op_ms + SOAK_STALL_MS >= fx.end_ms,
                      "client %d stalled: its last op finished %" PRId64 " ms before the end",
                      i, (int64_t)fx.end_ms - (int64_t)t->last_op_ms);
    }
    fprintf(stderr,
            "soak: %d s, %d clients, %" PRIu64 " ops (%.0f/s), %" PRIu64
            " reconnects; reads verified %" PRIu64 "\n",
            seconds, SOAK_CLIENTS, total, (double)total / seconds, reconn, verified);
    fprintf(stderr,
            "soak: %" PRIu64 " reads through another node the instant a put returned, %" PRIu64
            " of them that put's own version\n",
            ap_reads, ap_own);
    /* else nothing read a fresh put through another node */
    ck_assert_msg(ap_own > ap_reads / 2, "%" PRIu64 " of %" PRIu64 " reads after a put saw it",
                  ap_own, ap_reads);
    for (int op = 0; op < OP_N; op++)
        fprintf(stderr, "soak:   %-9s %9" PRIu64 " calls, %9" PRIu64 " ok\n", op_names[op],
                sum[op], oks[op]);
    fprintf(stderr,
            "soak:   expected misses: not found %" PRIu64 ", exists %" PRIu64 ", busy %" PRIu64
            ", canceled %" PRIu64 " (of them plain puts %" PRIu64 ")\n",
            nf, ex, busy, canc, canc_plain);
    ck_assert_msg(unexp == 0, "%" PRIu64 " unexpected statuses (see above)", unexp);
    ck_assert_msg(verify_failed == 0, "%" PRIu64 " reads did not verify (see above)",
                  verify_failed);
    ck_assert_msg(oks[OP_GET] > 0 && oks[OP_PUT] + oks[OP_UPSERT] > 0 && oks[OP_REMOVE] > 0,
                  "the mix did not happen");

    /* memory and fds: flat after the warm-up */
    for (w = 0; w < nsmp && smp[w].t_ms < (uint64_t)seconds * 200; w++)
        ;
    ck_assert_msg(w < nsmp - 1, "too few samples after the warm-up");
    for (d = 0; d <= SOAK_AGENTS; d++) {
        int64_t max_rss = 0, max_anon = 0;
        int max_fds = 0;

        for (i = w; i < nsmp; i++) {
            max_rss = smp[i].rss[d] > max_rss ? smp[i].rss[d] : max_rss;
            max_anon = smp[i].anon[d] > max_anon ? smp[i].anon[d] : max_anon;
            max_fds = smp[i].fds[d] > max_fds ? smp[i].fds[d] : max_fds;
        }
        fprintf(
            stderr,
            "soak: %-6s VmRSS %6.1f -> %6.1f MiB at warm-up (%3" PRIu64
            " s), max %6.1f after; RssAnon %6.1f -> %6.1f, max %6.1f; fds %d -> %d, max %d\n",
            daemon_of(d)->name, (double)smp[0].rss[d] / MIB, (double)smp[w].rss[d] / MIB,
            smp[w].t_ms / 1000, (double)max_rss / MIB, (double)smp[0].anon[d] / MIB,
            (double)smp[w].anon[d] / MIB, (double)max_anon / MIB, smp[0].fds[d], smp[w].fds[d],
            max_fds);
        fprintf(stderr,
                "soak: %-6s RssShmem %6.1f -> %6.1f -> %6.1f MiB (start, warm-up, end)\n",
                daemon_of(d)->name, (double)smp[0].shmem[d] / MIB,
                (double)smp[w].shmem[d] / MIB, (double)smp[nsmp - 1].shmem[d] / MIB);
        ck_assert_msg(max_anon - smp[w].anon[d] <= (int64_t)SOAK_RSS_ANON_BOUND,
                      "%s: RssAnon grew by %.1f MiB after the warm-up", daemon_of(d)->name,
                      (double)(max_anon - smp[w].anon[d]) / MIB);
        ck_assert_msg(max_rss - smp[w].rss[d] <= (int64_t)SOAK_RSS_BOUND,
                      "%s: VmRSS grew by %.1f MiB after the warm-up", daemon_of(d)->name,
                      (double)(max_rss - smp[w].rss[d]) / MIB);
        ck_assert_msg(max_fds - smp[w].fds[d] <= SOAK_FD_BOUND,
                      "%s: %d fds open after the warm-up, %d at its end", daemon_of(d)->name,
                      max_fds, smp[w].fds[d]);
    }

    /* quiescent: the same answers through every agent; then everything goes, all space
     * comes back */
    for (i = 0; i < SOAK_AGENTS; i++)
        ck_assert_int_eq(mc_connect(fx.ag[i].sock, &c[i]), 0);
    present = final_consistency(c);
    objects = t_stat_int(c[0], "objects");
    evictions = t_stat_int(c[0], "evictions");
    fprintf(stderr,
            "soak: at the end %d keys present, STATS objects %" PRId64 ", used_bytes %" PRId64
            ", evictions %" PRId64 "\n",
            present, objects, t_stat_int(c[0], "used_bytes"), evictions);
    ck_assert_msg(objects == present, "STATS objects %" PRId64 ", but %d keys are present",
                  objects, present);
    ck_assert_int_eq(mc_client_remove_prefix(c[0], "soak/", &removed), 0);
    ck_assert_uint_eq(removed, (uint64_t)present);
    deadline = t_now_ms() + 5000;
    while ((used = t_stat_int(c[0], "used_bytes")) != 0 && t_now_ms() < deadline)
        t_poll_pause();
    ck_assert_msg(used == 0, "%" PRId64 " bytes still used after removing every key", used);
    for (i = 0; i < SOAK_AGENTS; i++)
        mc_close(c[i]);

    /* fds once every client is gone: at most what the warm-up sample had (with its ~11
     * clients per agent connected), so nothing a client or a reconnect opened is left */
    deadline = t_now_ms() + 5000;
    for (d = 0; d <= SOAK_AGENTS; d++) {
        while ((fds_end[d] = t_proc_nfds(daemon_of(d)->pid)) > smp[w].fds[d] &&
               t_now_ms() < deadline)
            t_poll_pause();
        fprintf(stderr, "soak: %-6s %d fds with no client (%d before the first)\n",
                daemon_of(d)->name, fds_end[d], pre.fds[d]);
        ck_assert_msg(fds_end[d] <= smp[w].fds[d],
                      "%s: %d fds open with no client, %d at the warm-up", daemon_of(d)->name,
                      fds_end[d], smp[w].fds[d]);
    }

    for (i = 0; i < SOAK_AGENTS; i++)
        ck_assert_msg(t_proc_stop(&fx.ag[i]) == 0, "%s did not exit cleanly", fx.ag[i].name);
    ck_assert_msg(t_proc_stop(&fx.master) == 0, "mc-master did not exit cleanly");
    t_rmdir(fx.dir);
    free(smp);
}
END_TEST

int main(void)
{
    const char *s_env = getenv("MC_SOAK_SECONDS");
    int seconds = s_env != NULL && s_env[0] != '\0' ? atoi(s_env) : 60;
    Suite *s = suite_create("slow");
    TCase *tc = tcase_create("soak");
    SRunner *sr;
    int failed;

    /* the run, the clients' last ops, the final checks and the daemons' stop */
    tcase_set_timeout(tc, seconds + 120);
    tcase_add_test(tc, test_slow_soak);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
