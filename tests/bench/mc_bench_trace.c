/*
 * mc-bench --trace: replay a prefix-cache trace through --clients clients (default one),
 * request by request in file order (timestamps are not waited for: the trace is replayed as
 * fast as the store goes). With N clients, N threads of one process, each with its own
 * connection and buffers, take the requests in file order: up to N requests are in flight,
 * as an engine serving several at once has them (a request may then miss a block that one
 * before it is still putting). Per request, with keys KEY_PREFIX/<hash_id>:
 *
 *   1. mc_prefix_match over its keys: h leading blocks present;
 *   2. mc_batch_get of those h (batches of --batch), every block's bytes checked against
 *      the content derived from its hash id (trace.h); the request's hits are the leading
 *      blocks read and verified;
 *   3. mc_batch_put (plain) of every block not read: a key found present (MC_ERR_EXISTS,
 *      e.g. a block present behind a miss) or being put by another client's request
 *      (MC_ERR_BUSY) is fine, a block twice in one request is put once.
 *
 * The offline LRU of the same capacity (bytes / block size blocks) replays the same trace
 * with the same semantics (trace.h). Time counts the store calls only (filling and checking
 * the buffers is the bench's, not the store's): with several clients, the time during
 * which at least one store call was in flight (busy_s; store_s sums every call's time).
 * blocks_per_s and gb_per_s are blocks (bytes) read plus written over busy_s; p50_ms /
 * p99_ms are per request (the sum of its calls); match_s, get_s and put_s split store_s by
 * step. The last line of
 * stdout is one JSON object; malformed trace lines are reported on stderr with their line
 * numbers and skipped. Exit status 1 on wrong bytes or failed calls.
 */
#include "tests/bench/mc_bench_trace.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc.h>

#include "libmc/tool.h" /* mc_client_stats_json: the pool's capacity */
#include "tests/bench/trace.h"

#define KEY_SLOT 96

/* A store call's start and end (ns): the replay's busy time is their union. */
struct span {
    uint64_t s, e;
};

/* What the clients share: the trace, the next request to take, each request's latency. */
struct shared {
    const struct mcb_trace_cfg *cfg;
    const struct mct_trace *t;
    const char *prefix;
    uint32_t maxb;
    atomic_size_t next;
    uint64_t *lat; /* per request: written by the client that took it */
};

struct replay {
    const struct mcb_trace_cfg *cfg;
    struct shared *sh;
    mc_client_t *c;
    pthread_t th;
    int conn_err;
    struct span *spans;
    size_t nspans, spans_cap;
    char *keytab;       /* max_blocks x KEY_SLOT */
    const char **keys;  /* max_blocks pointers */
    unsigned char *ok;  /* per block of the request: read and verified */
    uint64_t *stamp;    /* per distinct block: the last request (+1) that put it */
    const char **pkeys; /* one batch */
    const void **pbufs;
    void **gbufs;
    size_t *lens, *caps;
    int *res;
    void *arena; /* batch x block_size */

    uint64_t store_ns, hits, got, put, exists, busy, get_misses, wrong, errors;
    uint64_t match_ns, get_ns, put_ns; /* store_ns by step: where a request's time goes */
    uint64_t put_waits; /* puts retried after MC_ERR_NO_SPACE, 1 ms apart (untimed) */
    int first_err;
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void count_error(struct replay *rp, int err)
{
    if (rp->errors++ == 0)
        rp->first_err = err;
}

/* A store call that ran from s to now: its time into store_ns and *step_ns, its span into
 * the list (MC_ERR_NOMEM when the list cannot grow: counted as an error, the figures would
 * be wrong). */
static void timed(struct replay *rp, uint64_t s, uint64_t *step_ns)
{
    uint64_t e = now_ns();

    rp->store_ns += e - s;
    *step_ns += e - s;
    if (rp->nspans == rp->spans_cap) {
        size_t cap = rp->spans_cap > 0 ? 2 * rp->spans_cap : 4096;
        struct span *n = realloc(rp->spans, cap * sizeof(*n));

        if (n == NULL) {
            count_error(rp, MC_ERR_NOMEM);
            return;
        }
        rp->spans = n;
        rp->spans_cap = cap;
    }
    rp->spans[rp->nspans++] = (struct span){s, e};
}

uint64_t mcb_pool_capacity(mc_client_t *c)
{
    static const char field[] = "\"capacity_bytes\":";
    unsigned long long v = 0;
    const char *p;
    char *json;
    size_t len;

    if (mc_client_stats_json(c, &json, &len) != 0)
        return 0;
    p = strstr(json, field);
    if (p != NULL)
        v = strtoull(p + sizeof(field) - 1, NULL, 10);
    free(json);
    return v;
}

/* Steps 2: read blocks [0, h) of r in batches; marks rp->ok. Returns the leading hits. */
static uint64_t replay_gets(struct replay *rp, const struct mct_req *r, uint32_t h)
{
    size_t bs = rp->cfg->block_size, b = rp->cfg->batch, k, j;
    uint64_t t0, lead = 0;
    bool leading = true;
    uint32_t at;
    int n;

    for (at = 0; at < h; at += (uint32_t)k) {
        k = h - at < b ? h - at : b;
        for (j = 0; j < k; j++) {
            rp->gbufs[j] = (unsigned char *)rp->arena + j * bs;
            rp->caps[j] = bs;
            rp->lens[j] = 0;
        }
        t0 = now_ns();
        n = mc_batch_get(rp->c, k, rp->keys + at, rp->gbufs, rp->caps, rp->lens, rp->res);
        timed(rp, t0, &rp->get_ns);
        if (n < 0) {
            count_error(rp, n);
            for (j = 0; j < k; j++)
                rp->res[j] = n;
        }
        for (j = 0; j < k; j++) {
            bool good = false;

            if (rp->res[j] == 0) {
                rp->got++;
                good = rp->lens[j] == bs && mct_check(rp->gbufs[j], bs, r->ids[at + j]);
                if (!good && rp->wrong++ == 0)
                    fprintf(stderr, "mc-bench: %s: wrong bytes\n", rp->keys[at + j]);
            } else if (rp->res[j] == MC_ERR_NOT_FOUND) {
                rp->get_misses++; /* evicted since the prefix match */
            } else if (n >= 0) {
                count_error(rp, rp->res[j]);
            }
            rp->ok[at + j] = good;
            leading = leading && good;
            lead += leading;
        }
    }
    return lead;
}

/* Step 3: put every block of r not read (once per request), in batches. */
static void replay_puts(struct replay *rp, const struct mct_req *r, uint64_t reqno)
{
    size_t bs = rp->cfg->block_size, b = rp->cfg->batch, k = 0, j;
    uint32_t i;
    uint64_t t0;
    int n;

    for (i = 0; i <= r->nblocks; i++) {
        if (i < r->nblocks) {
            if (rp->ok[i] || rp->stamp[r->idx[i]] == reqno + 1)
                continue;
            rp->stamp[r->idx[i]] = reqno + 1;
            mct_fill((unsigned char *)rp->arena + k * bs, bs, r->ids[i]);
            rp->pkeys[k] = rp->keys[i];
            rp->pbufs[k] = (unsigned char *)rp->arena + k * bs;
            rp->lens[k] = bs;
            k++;
            if (k < b)
                continue;
        }
        if (k == 0)
            break;
        t0 = now_ns();
        n = mc_batch_put(rp->c, k, rp->pkeys, rp->pbufs, rp->lens, NULL, rp->res);
        timed(rp, t0, &rp->put_ns);
        if (n < 0) {
            count_error(rp, n);
        } else {
            for (j = 0; j < k; j++) {
                /* victims on their way to disk (docs/disk.md): room comes in a moment */
                for (int tries = 0; rp->res[j] == MC_ERR_NO_SPACE && tries < 5000; tries++) {
                    usleep(1000);
                    rp->res[j] = mc_put(rp->c, rp->pkeys[j], rp->pbufs[j], rp->lens[j], NULL);
                    rp->put_waits++;
                }
                if (rp->res[j] == 0)
                    rp->put++;
                else if (rp->res[j] == MC_ERR_EXISTS)
                    rp->exists++;
                else if (rp->res[j] == MC_ERR_BUSY)
                    rp->busy++; /* another client's request is putting it */
                else
                    count_error(rp, rp->res[j]);
            }
        }
        k = 0;
    }
}

static int replay_one(struct replay *rp, const struct mct_req *r, uint64_t reqno)
{
    uint64_t t0 = rp->store_ns, s;
    uint32_t i;
    int h;

    if (r->nblocks == 0) {
        rp->sh->lat[reqno] = 0;
        return 0;
    }
    for (i = 0; i < r->nblocks; i++) {
        char *slot = rp->keytab + (size_t)i * KEY_SLOT;

        snprintf(slot, KEY_SLOT, "%s/%" PRIu64, rp->sh->prefix, r->ids[i]);
        rp->keys[i] = slot;
        rp->ok[i] = 0;
    }
    s = now_ns();
    h = mc_prefix_match(rp->c, r->nblocks, rp->keys);
    timed(rp, s, &rp->match_ns);
    if (h < 0) {
        count_error(rp, h);
        h = 0;
    }
    rp->hits += replay_gets(rp, r, (uint32_t)h);
    replay_puts(rp, r, reqno);
    rp->sh->lat[reqno] = rp->store_ns - t0;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static double pct_ms(const uint64_t *s, size_t n, double p)
{
    size_t i;

    if (n == 0)
        return 0;
    i = (size_t)(p * (double)(n - 1) + 0.5);
    return (double)s[i] / 1e6;
}

static int replay_alloc(struct replay *rp, const struct mct_trace *t, uint32_t maxb)
{
    const struct mcb_trace_cfg *cfg = rp->cfg;
    size_t b = cfg->batch, m = maxb > 0 ? maxb : 1;

    rp->keytab = malloc(m * KEY_SLOT);
    rp->keys = calloc(m, sizeof(*rp->keys));
    rp->ok = calloc(m, 1);
    rp->stamp = calloc(t->ndistinct > 0 ? t->ndistinct : 1, sizeof(*rp->stamp));
    rp->pkeys = calloc(b, sizeof(*rp->pkeys));
    rp->pbufs = calloc(b, sizeof(*rp->pbufs));
    rp->gbufs = calloc(b, sizeof(*rp->gbufs));
    rp->lens = calloc(b, sizeof(*rp->lens));
    rp->caps = calloc(b, sizeof(*rp->caps));
    rp->res = calloc(b, sizeof(*rp->res));
    if (rp->keytab == NULL || rp->keys == NULL || rp->ok == NULL || rp->stamp == NULL ||
        rp->pkeys == NULL || rp->pbufs == NULL || rp->gbufs == NULL || rp->lens == NULL ||
        rp->caps == NULL || rp->res == NULL)
        return MC_ERR_NOMEM;
    if (cfg->registered)
        return mc_buf_alloc(rp->c, b * cfg->block_size, &rp->arena);
    rp->arena = malloc(b * cfg->block_size);
    return rp->arena != NULL ? 0 : MC_ERR_NOMEM;
}

static void replay_free(struct replay *rp)
{
    if (rp->arena != NULL) {
        if (rp->cfg->registered)
            mc_buf_free(rp->c, rp->arena);
        else
            free(rp->arena);
    }
    free(rp->keytab);
    free(rp->keys);
    free(rp->ok);
    free(rp->stamp);
    free(rp->pkeys);
    free(rp->pbufs);
    free(rp->gbufs);
    free(rp->lens);
    free(rp->caps);
    free(rp->res);
    free(rp->spans);
    mc_close(rp->c);
}

/* One client: connect, take the requests in file order until none is left. */
static void *replay_thread(void *arg)
{
    struct replay *rp = arg;
    struct shared *sh = rp->sh;
    size_t i;

    rp->conn_err = mc_connect(rp->cfg->socket, &rp->c);
    if (rp->conn_err == 0)
        rp->conn_err = replay_alloc(rp, sh->t, sh->maxb);
    if (rp->conn_err != 0) {
        count_error(rp, rp->conn_err);
        return NULL;
    }
    while ((i = atomic_fetch_add(&sh->next, 1)) < sh->t->nreqs)
        replay_one(rp, &sh->t->reqs[i], i);
    return NULL;
}

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;

    return x->s < y->s ? -1 : x->s > y->s;
}

/* The union of every client's spans, in ns (the spans are sorted in place). */
static uint64_t busy_ns(struct span *sp, size_t n)
{
    uint64_t total = 0, s = 0, e = 0;
    size_t i;

    qsort(sp, n, sizeof(*sp), cmp_span);
    for (i = 0; i < n; i++) {
        if (i == 0 || sp[i].s > e) {
            total += e - s;
            s = sp[i].s;
            e = sp[i].e;
        } else if (sp[i].e > e) {
            e = sp[i].e;
        }
    }
    return total + (e - s);
}

static void print_json(const struct replay *tot, const struct shared *sh, uint64_t cap,
                       uint64_t lru_hits, uint64_t busy, double wall_s)
{
    const struct mcb_trace_cfg *cfg = sh->cfg;
    const struct mct_trace *t = sh->t;
    double secs = busy > 0 ? (double)busy / 1e9 : 1;
    double hr = t->nblocks > 0 ? (double)tot->hits / (double)t->nblocks : 0;
    double lr = t->nblocks > 0 ? (double)lru_hits / (double)t->nblocks : 0;
    uint64_t moved = tot->got + tot->put;

    printf("{\"op\":\"trace\",\"block_size\":%zu,\"batch\":%zu,\"clients\":%u,"
           "\"requests\":%zu,\"blocks\":%" PRIu64 ",\"distinct_blocks\":%u,"
           "\"capacity_bytes\":%" PRIu64 ",\"hit_blocks\":%" PRIu64 ",\"hit_ratio\":%.4f,"
           "\"lru_hit_ratio\":%.4f,\"hit_vs_lru\":%.3f,\"blocks_read\":%" PRIu64
           ",\"blocks_written\":%" PRIu64 ",\"blocks_per_s\":%.1f,\"gb_per_s\":%.4f,"
           "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"store_s\":%.3f,\"busy_s\":%.3f,"
           "\"wall_s\":%.3f,\"get_misses\":%" PRIu64 ",\"put_exists\":%" PRIu64
           ",\"put_busy\":%" PRIu64 ",\"wrong_bytes\":%" PRIu64 ",\"errors\":%" PRIu64
           ",\"malformed_lines\":%" PRIu64 ",\"put_waits\":%" PRIu64
           ",\"match_s\":%.3f,\"get_s\":%.3f,\"put_s\":%.3f}\n",
           cfg->block_size, cfg->batch, cfg->clients, t->nreqs, t->nblocks, t->ndistinct, cap,
           tot->hits, hr, lr, lr > 0 ? hr / lr : 0, tot->got, tot->put,
           (double)moved / secs, (double)moved * (double)cfg->block_size / 1e9 / secs,
           pct_ms(sh->lat, t->nreqs, 0.50), pct_ms(sh->lat, t->nreqs, 0.99),
           (double)tot->store_ns / 1e9, secs, wall_s, tot->get_misses, tot->exists, tot->busy,
           tot->wrong, tot->errors, t->malformed, tot->put_waits, (double)tot->match_ns / 1e9,
           (double)tot->get_ns / 1e9, (double)tot->put_ns / 1e9);
    fflush(stdout);
}

/* Adds a client's counters and spans into tot (tot->spans holds them all). */
static int replay_sum(struct replay *tot, const struct replay *rp)
{
    struct span *n;

    tot->store_ns += rp->store_ns;
    tot->hits += rp->hits;
    tot->got += rp->got;
    tot->put += rp->put;
    tot->exists += rp->exists;
    tot->busy += rp->busy;
    tot->get_misses += rp->get_misses;
    tot->wrong += rp->wrong;
    tot->match_ns += rp->match_ns;
    tot->get_ns += rp->get_ns;
    tot->put_ns += rp->put_ns;
    tot->put_waits += rp->put_waits;
    if (rp->errors > 0 && tot->errors == 0)
        tot->first_err = rp->first_err;
    tot->errors += rp->errors;
    if (rp->nspans == 0)
        return 0;
    n = realloc(tot->spans, (tot->nspans + rp->nspans) * sizeof(*n));
    if (n == NULL)
        return MC_ERR_NOMEM;
    memcpy(n + tot->nspans, rp->spans, rp->nspans * sizeof(*n));
    tot->spans = n;
    tot->nspans += rp->nspans;
    return 0;
}

int mcb_trace_run(const struct mcb_trace_cfg *cfg)
{
    unsigned nc = cfg->clients > 0 ? cfg->clients : 1, started = 0, k;
    struct replay *rps = NULL, tot;
    struct shared sh;
    struct mct_trace t;
    FILE *f = strcmp(cfg->path, "-") == 0 ? stdin : fopen(cfg->path, "r");
    uint64_t cap = cfg->capacity, lru_hits, w0;
    char prefix[48];
    mc_client_t *c = NULL;
    size_t i;
    int err, rc = 1;

    if (f == NULL) {
        fprintf(stderr, "mc-bench: %s: cannot open\n", cfg->path);
        return 1;
    }
    err = mct_trace_load(f, cfg->path, stderr, &t);
    if (f != stdin)
        fclose(f);
    if (err != 0)
        return 1;
    if (t.malformed > 0)
        fprintf(stderr, "mc-bench: %s: %" PRIu64 " malformed line(s) skipped\n", cfg->path,
                t.malformed);

    memset(&sh, 0, sizeof(sh));
    memset(&tot, 0, sizeof(tot));
    sh.cfg = cfg;
    sh.t = &t;
    sh.prefix = prefix;
    atomic_init(&sh.next, 0);
    for (i = 0; i < t.nreqs; i++)
        sh.maxb = t.reqs[i].nblocks > sh.maxb ? t.reqs[i].nblocks : sh.maxb;
    if (cfg->key_prefix != NULL)
        snprintf(prefix, sizeof(prefix), "%s", cfg->key_prefix);
    else
        snprintf(prefix, sizeof(prefix), "mct/%ld.%" PRIu64, (long)getpid(),
                 now_ns() % 1000000000u);
    if (cap == 0) {
        err = mc_connect(cfg->socket, &c);
        if (err != 0) {
            fprintf(stderr, "mc-bench: connect %s: %s\n", cfg->socket, mc_strerror(err));
            goto out;
        }
        cap = mcb_pool_capacity(c);
        mc_close(c);
    }
    if (cap == 0) {
        fprintf(stderr, "mc-bench: the agent's capacity is unknown (a --dram 0 node?): give "
                        "--capacity\n");
        rc = 2;
        goto out;
    }
    lru_hits = mct_lru_hits(&t, cap / cfg->block_size);
    sh.lat = calloc(t.nreqs > 0 ? t.nreqs : 1, sizeof(*sh.lat));
    rps = calloc(nc, sizeof(*rps));
    if (lru_hits == UINT64_MAX || sh.lat == NULL || rps == NULL) {
        fprintf(stderr, "mc-bench: out of memory for the replay\n");
        goto out;
    }
    w0 = now_ns();
    for (k = 0; k < nc; k++) {
        rps[k].cfg = cfg;
        rps[k].sh = &sh;
        if (pthread_create(&rps[k].th, NULL, replay_thread, &rps[k]) != 0) {
            fprintf(stderr, "mc-bench: cannot start client thread %u\n", k);
            break;
        }
        started++;
    }
    for (k = 0; k < started; k++)
        pthread_join(rps[k].th, NULL);
    for (k = 0; k < started; k++) {
        if (rps[k].conn_err != 0)
            fprintf(stderr, "mc-bench: client %u: %s\n", k, mc_strerror(rps[k].conn_err));
        if (replay_sum(&tot, &rps[k]) != 0)
            count_error(&tot, MC_ERR_NOMEM);
    }
    if (started < nc)
        count_error(&tot, MC_ERR_NOMEM);
    qsort(sh.lat, t.nreqs, sizeof(*sh.lat), cmp_u64);
    if (tot.errors > 0)
        fprintf(stderr, "mc-bench: %" PRIu64 " failed items or calls (first: %s)\n", tot.errors,
                mc_strerror(tot.first_err));
    if (tot.wrong > 0)
        fprintf(stderr, "mc-bench: %" PRIu64 " blocks read with wrong bytes\n", tot.wrong);
    print_json(&tot, &sh, cap, lru_hits, busy_ns(tot.spans, tot.nspans),
               (double)(now_ns() - w0) / 1e9);
    rc = tot.errors > 0 || tot.wrong > 0 ? 1 : 0;
out:
    for (k = 0; rps != NULL && k < started; k++)
        replay_free(&rps[k]);
    free(rps);
    free(tot.spans);
    free(sh.lat);
    mct_trace_free(&t);
    return rc;
}
