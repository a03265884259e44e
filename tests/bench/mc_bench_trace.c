/*
 * mc-bench --trace: replay a prefix-cache trace through one client, request by request in
 * file order (timestamps are not waited for: the trace is replayed as fast as the store
 * goes). Per request, with keys KEY_PREFIX/<hash_id>:
 *
 *   1. mc_prefix_match over its keys: h leading blocks present;
 *   2. mc_batch_get of those h (batches of --batch), every block's bytes checked against
 *      the content derived from its hash id (trace.h); the request's hits are the leading
 *      blocks read and verified;
 *   3. mc_batch_put (plain) of every block not read: a key found present (MC_ERR_EXISTS,
 *      e.g. a block present behind a miss) is fine, a block twice in one request is put
 *      once.
 *
 * The offline LRU of the same capacity (bytes / block size blocks) replays the same trace
 * with the same semantics (trace.h). Time counts the store calls only (filling and checking
 * the buffers is the bench's, not the store's): blocks_per_s and gb_per_s are blocks (bytes)
 * read plus written over that time; p50_ms / p99_ms are per request; match_s, get_s and
 * put_s split the store's time by step. The last line of
 * stdout is one JSON object; malformed trace lines are reported on stderr with their line
 * numbers and skipped. Exit status 1 on wrong bytes or failed calls.
 */
#include "tests/bench/mc_bench_trace.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc.h>

#include "libmc/tool.h" /* mc_client_stats_json: the pool's capacity */
#include "tests/bench/trace.h"

#define KEY_SLOT 96

struct replay {
    const struct mcb_trace_cfg *cfg;
    mc_client_t *c;
    char prefix[48];
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
    uint64_t *lat;

    uint64_t store_ns, hits, got, put, exists, get_misses, wrong, errors;
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
        t0 = now_ns() - t0;
        rp->store_ns += t0;
        rp->get_ns += t0;
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
        t0 = now_ns() - t0;
        rp->store_ns += t0;
        rp->put_ns += t0;
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
        rp->lat[reqno] = 0;
        return 0;
    }
    for (i = 0; i < r->nblocks; i++) {
        char *slot = rp->keytab + (size_t)i * KEY_SLOT;

        snprintf(slot, KEY_SLOT, "%s/%" PRIu64, rp->prefix, r->ids[i]);
        rp->keys[i] = slot;
        rp->ok[i] = 0;
    }
    s = now_ns();
    h = mc_prefix_match(rp->c, r->nblocks, rp->keys);
    s = now_ns() - s;
    rp->store_ns += s;
    rp->match_ns += s;
    if (h < 0) {
        count_error(rp, h);
        h = 0;
    }
    rp->hits += replay_gets(rp, r, (uint32_t)h);
    replay_puts(rp, r, reqno);
    rp->lat[reqno] = rp->store_ns - t0;
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
    rp->lat = calloc(t->nreqs > 0 ? t->nreqs : 1, sizeof(*rp->lat));
    if (rp->keytab == NULL || rp->keys == NULL || rp->ok == NULL || rp->stamp == NULL ||
        rp->pkeys == NULL || rp->pbufs == NULL || rp->gbufs == NULL || rp->lens == NULL ||
        rp->caps == NULL || rp->res == NULL || rp->lat == NULL)
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
    free(rp->lat);
}

static void print_json(const struct replay *rp, const struct mct_trace *t, uint64_t cap,
                       uint64_t lru_hits, double wall_s)
{
    const struct mcb_trace_cfg *cfg = rp->cfg;
    double secs = rp->store_ns > 0 ? (double)rp->store_ns / 1e9 : 1;
    double hr = t->nblocks > 0 ? (double)rp->hits / (double)t->nblocks : 0;
    double lr = t->nblocks > 0 ? (double)lru_hits / (double)t->nblocks : 0;
    uint64_t moved = rp->got + rp->put;

    printf("{\"op\":\"trace\",\"block_size\":%zu,\"batch\":%zu,\"requests\":%zu,"
           "\"blocks\":%" PRIu64 ",\"distinct_blocks\":%u,\"capacity_bytes\":%" PRIu64
           ",\"hit_blocks\":%" PRIu64 ",\"hit_ratio\":%.4f,\"lru_hit_ratio\":%.4f,"
           "\"hit_vs_lru\":%.3f,\"blocks_read\":%" PRIu64 ",\"blocks_written\":%" PRIu64
           ",\"blocks_per_s\":%.1f,\"gb_per_s\":%.4f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
           "\"store_s\":%.3f,\"wall_s\":%.3f,\"get_misses\":%" PRIu64 ",\"put_exists\":%" PRIu64
           ",\"wrong_bytes\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"malformed_lines\":%" PRIu64
           ",\"put_waits\":%" PRIu64 ",\"match_s\":%.3f,\"get_s\":%.3f,\"put_s\":%.3f}\n",
           cfg->block_size, cfg->batch, t->nreqs, t->nblocks, t->ndistinct, cap, rp->hits, hr,
           lr, lr > 0 ? hr / lr : 0, rp->got, rp->put, (double)moved / secs,
           (double)moved * (double)cfg->block_size / 1e9 / secs,
           pct_ms(rp->lat, t->nreqs, 0.50), pct_ms(rp->lat, t->nreqs, 0.99), secs, wall_s,
           rp->get_misses, rp->exists, rp->wrong, rp->errors, t->malformed, rp->put_waits,
           (double)rp->match_ns / 1e9, (double)rp->get_ns / 1e9, (double)rp->put_ns / 1e9);
    fflush(stdout);
}

int mcb_trace_run(const struct mcb_trace_cfg *cfg)
{
    struct replay rp;
    struct mct_trace t;
    FILE *f = strcmp(cfg->path, "-") == 0 ? stdin : fopen(cfg->path, "r");
    uint64_t cap = cfg->capacity, lru_hits, w0;
    uint32_t maxb = 0;
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
    for (i = 0; i < t.nreqs; i++)
        maxb = t.reqs[i].nblocks > maxb ? t.reqs[i].nblocks : maxb;

    memset(&rp, 0, sizeof(rp));
    rp.cfg = cfg;
    if (cfg->key_prefix != NULL)
        snprintf(rp.prefix, sizeof(rp.prefix), "%s", cfg->key_prefix);
    else
        snprintf(rp.prefix, sizeof(rp.prefix), "mct/%ld.%" PRIu64, (long)getpid(),
                 now_ns() % 1000000000u);
    err = mc_connect(cfg->socket, &rp.c);
    if (err != 0) {
        fprintf(stderr, "mc-bench: connect %s: %s\n", cfg->socket, mc_strerror(err));
        mct_trace_free(&t);
        return 1;
    }
    if (cap == 0)
        cap = mcb_pool_capacity(rp.c);
    if (cap == 0) {
        fprintf(stderr, "mc-bench: the agent's capacity is unknown (a --dram 0 node?): give "
                        "--capacity\n");
        rc = 2;
        goto out;
    }
    lru_hits = mct_lru_hits(&t, cap / cfg->block_size);
    err = replay_alloc(&rp, &t, maxb);
    if (lru_hits == UINT64_MAX || err != 0) {
        fprintf(stderr, "mc-bench: out of memory for the replay: %s\n",
                mc_strerror(err != 0 ? err : MC_ERR_NOMEM));
        goto out;
    }
    w0 = now_ns();
    for (i = 0; i < t.nreqs; i++)
        replay_one(&rp, &t.reqs[i], i);
    qsort(rp.lat, t.nreqs, sizeof(*rp.lat), cmp_u64);
    if (rp.errors > 0)
        fprintf(stderr, "mc-bench: %" PRIu64 " failed items or calls (first: %s)\n", rp.errors,
                mc_strerror(rp.first_err));
    if (rp.wrong > 0)
        fprintf(stderr, "mc-bench: %" PRIu64 " blocks read with wrong bytes\n", rp.wrong);
    print_json(&rp, &t, cap, lru_hits, (double)(now_ns() - w0) / 1e9);
    rc = rp.errors > 0 || rp.wrong > 0 ? 1 : 0;
out:
    replay_free(&rp);
    mc_close(rp.c);
    mct_trace_free(&t);
    return rc;
}
