/*
 * mc-bench: the client API against a running local agent, as an engine would drive it.
 *
 * Each client is a process (fork, then its own mc_connect) that loops over its own slice of
 * the keys mcb/<size>/<i>, i < keys, one call per batch (mc_batch_* for --batch > 1, the
 * single-key call for --batch 1), timing every call. The parent makes the keys present
 * first when the op reads them (untimed; through --fill-socket if given), starts every
 * client at once, merges their samples and prints one JSON line. It is not a correctness
 * test: it counts hits, misses and errors and fails on a miss, but trusts libmc's checksum
 * for the bytes.
 *
 * usage: mc-bench --socket PATH --op put|get|exist|mixed --size BYTES --batch N
 *                 --clients N --seconds S [--keys K] [--registered]
 *                 [--fill-socket PATH]
 *        mc-bench --socket PATH --trace FILE [--block-size BYTES] [--batch N]
 *                 [--capacity BYTES] [--key-prefix P] [--registered] [--clients N]
 *
 *   put    stores the keys in order; once a client has wrapped around its slice it
 *          overwrites them with MC_PUT_UPSERT. Counts stored objects only (a plain put on
 *          a key some earlier run left is MC_ERR_EXISTS: not counted, reported on stderr).
 *   get    reads the keys; counts hits of exactly --size bytes; a miss is an error.
 *   exist  asks for the keys; counts answers.
 *   mixed  4 get batches, then 1 MC_PUT_UPSERT put batch, over and over (80% / 20%).
 *   --keys        default: half the pool's capacity in objects of --size bytes (from the
 *                 agent's statistics).
 *   --registered  the buffers come from mc_buf_alloc (zero-copy arenas), else malloc.
 *   --room        each get buffer has room for the object's checksum trailer after it
 *                 (mc_shm_alloc_len bytes): with --registered, a get an agent reads from
 *                 a peer may land straight in it (arena_reads, docs/config.md).
 *   --no-checksum the objects are put with MC_PUT_NO_CHECKSUM (prefill and puts): no
 *                 checksums made at the put nor verified at the get. What the integrity
 *                 check costs is the difference to the same run without it.
 *   --fill-socket the agent the parent makes the keys present through (get, exist, mixed),
 *                 instead of --socket: in a cluster, the objects are put through one node
 *                 and read through another (scripts/bench-cluster.sh).
 *
 *   --trace       replay a prefix-cache trace (JSON lines {"timestamp","input_length",
 *                 "output_length","hash_ids":[...]}) through one client: per request a
 *                 prefix match, a batch get of the leading hits, a batch put of the misses,
 *                 bytes verified, against an offline LRU of --capacity bytes (default: the
 *                 agent's pool); --block-size default 64 KiB, --batch default 32;
 *                 --clients N: N client threads take the requests in file order, N in
 *                 flight (default 1) (mc_bench_trace.c says what each figure means).
 *
 * gb_per_s is bytes moved (hits, stored objects) / 1e9 / s; ops_per_s counts items, not
 * calls; p50_us and p99_us are per call (per batch) over every client's calls. On a terminal
 * a progress line comes first; the last line is always the JSON object.
 * Exit status: 0, 1 on errors (a miss in get or mixed, a failed call, a client lost),
 * 2 on usage errors.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc.h>

#include "shm/ring.h"
#include "tests/bench/mc_bench_trace.h"

#define MCB_KEY_SLOT 48 /* "mcb/" + 2 x 20 digits + "/" + NUL fits */
#define MCB_BATCH_MAX 4096
#define MCB_CLIENTS_MAX 256
#define MCB_PUT_EVERY 5 /* mixed: every 5th batch is a put batch (20%) */

enum mcb_op { MCB_PUT, MCB_GET, MCB_EXIST, MCB_MIXED };

static const char *const mcb_op_names[] = {"put", "get", "exist", "mixed"};

struct mcb_cfg {
    const char *socket;
    enum mcb_op op;
    size_t size;
    size_t batch;
    unsigned clients;
    double seconds;
    uint64_t keys; /* 0: from the agent's capacity */
    bool registered;
    bool room;               /* --room: buffers of mc_shm_alloc_len(size) bytes */
    bool no_checksum;        /* --no-checksum: puts with MC_PUT_NO_CHECKSUM */
    const char *fill_socket; /* NULL: prefill through socket */
    const char *keytab;      /* keys x MCB_KEY_SLOT bytes, made before the fork */
    struct mcb_trace_cfg trace; /* trace.path != NULL: --trace mode */
    bool have_batch;
};

/* What one client sends back through its pipe, followed by nlat call latencies (ns). */
struct mcb_result {
    uint64_t ops;    /* items that succeeded: hits, stored objects, answers */
    uint64_t bytes;  /* bytes of those items */
    uint64_t misses; /* get: MC_ERR_NOT_FOUND or a wrong size; exist: answered 0 */
    uint64_t exists; /* put: MC_ERR_EXISTS on a plain put (a key left from an earlier run) */
    uint64_t errors; /* items that failed otherwise */
    uint64_t elapsed_ns;
    uint64_t nlat;
    int32_t first_err; /* the first error code seen, for the message */
    int32_t setup_err; /* non-zero: the client never ran (connect, buffers) */
};

/* One client's state in its own process. */
struct mcb_worker {
    const struct mcb_cfg *cfg;
    mc_client_t *c;
    uint64_t first, count; /* its slice of the keys */
    uint64_t pos;          /* next key, relative to first */
    bool wrapped;          /* went round its slice at least once */
    uint64_t nbatch;       /* calls made, for mixed */
    const char **keys;     /* batch pointers into cfg->keytab */
    void **bufs;
    size_t *caps, *lens;
    int *results;
    void *arena; /* one buffer of batch x size: mc_buf_alloc'ed or malloc'ed */
    uint64_t *lat;
    size_t nlat, lat_cap;
    struct mcb_result r;
    _Atomic uint64_t *progress; /* shared with the parent: this client's ops so far */
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int usage(const char *why)
{
    if (why != NULL)
        fprintf(stderr, "mc-bench: %s\n", why);
    fprintf(stderr, "usage: mc-bench --socket PATH --op put|get|exist|mixed --size BYTES "
                    "--batch N --clients N --seconds S [--keys K] [--registered] "
                    "[--room] [--no-checksum] [--fill-socket PATH]\n"
                    "       mc-bench --socket PATH --trace FILE [--block-size BYTES] "
                    "[--batch N] [--capacity BYTES] [--key-prefix P] [--registered] "
                    "[--clients N]\n");
    return 2;
}

/* A count with an optional K, M or G (powers of 1024) suffix; false if malformed. */
static bool parse_u64(const char *s, uint64_t *v_p)
{
    unsigned long long v;
    char *end;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || s[0] == '-')
        return false;
    switch (*end) {
    case 'K':
    case 'k':
        v <<= 10;
        end++;
        break;
    case 'M':
    case 'm':
        v <<= 20;
        end++;
        break;
    case 'G':
    case 'g':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0')
        return false;
    *v_p = v;
    return true;
}

static const char *key_at(const struct mcb_cfg *cfg, uint64_t i)
{
    return cfg->keytab + i * MCB_KEY_SLOT;
}

static char *make_keys(size_t size, uint64_t n)
{
    char *tab = malloc(n * MCB_KEY_SLOT);
    uint64_t i;

    if (tab == NULL)
        return NULL;
    for (i = 0; i < n; i++)
        snprintf(tab + i * MCB_KEY_SLOT, MCB_KEY_SLOT, "mcb/%zu/%" PRIu64, size, i);
    return tab;
}

/* Fill a buffer with a pattern that is not all zeroes (so no page stays shared). */
static void pattern(unsigned char *b, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        b[i] = (unsigned char)(i * 131u + (i >> 12));
}

/* Make keys [0, n) present with plain puts, batch at a time (untimed). A key already
 * present (MC_ERR_EXISTS) counts as present. */
static int prefill(const struct mcb_cfg *cfg, mc_client_t *c, uint64_t n)
{
    size_t b = cfg->batch, i;
    const char **keys = calloc(b, sizeof(*keys));
    const void **bufs = calloc(b, sizeof(*bufs));
    size_t *lens = calloc(b, sizeof(*lens));
    int *res = calloc(b, sizeof(*res));
    unsigned char *data = malloc(cfg->size);
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    uint64_t at, bad = 0;
    int err = 0, first = 0;

    o.flags = cfg->no_checksum ? MC_PUT_NO_CHECKSUM : 0;

    if (keys == NULL || bufs == NULL || lens == NULL || res == NULL || data == NULL) {
        err = MC_ERR_NOMEM;
        goto out;
    }
    pattern(data, cfg->size);
    for (i = 0; i < b; i++) {
        bufs[i] = data;
        lens[i] = cfg->size;
    }
    for (at = 0; at < n; at += b) {
        size_t k = n - at < b ? (size_t)(n - at) : b;
        int got;

        for (i = 0; i < k; i++)
            keys[i] = key_at(cfg, at + i);
        got = mc_batch_put(c, k, keys, bufs, lens, &o, res);
        if (got < 0) {
            err = got;
            goto out;
        }
        for (i = 0; i < k; i++) {
            /* a pool whose victims are on their way to disk (docs/disk.md) makes room in a
             * moment: wait for it, as a writer would */
            for (int tries = 0; res[i] == MC_ERR_NO_SPACE && tries < 5000; tries++) {
                usleep(1000);
                res[i] = mc_put(c, keys[i], bufs[i], lens[i], &o);
            }
            if (res[i] != 0 && res[i] != MC_ERR_EXISTS) {
                if (bad++ == 0)
                    first = res[i];
            }
        }
    }
    if (bad > 0) {
        fprintf(stderr, "mc-bench: prefill: %" PRIu64 " of %" PRIu64 " puts failed (first: %s)\n",
                bad, n, mc_strerror(first));
        err = first;
    }
out:
    free(data);
    free(res);
    free(lens);
    free(bufs);
    free(keys);
    return err;
}

static int worker_init(struct mcb_worker *w, const struct mcb_cfg *cfg, unsigned idx)
{
    size_t b = cfg->batch, i, stride;
    int err;

    w->cfg = cfg;
    /* contiguous slices, so that no two clients ever write the same key */
    w->first = cfg->keys * idx / cfg->clients;
    w->count = cfg->keys * (idx + 1) / cfg->clients - w->first;
    w->keys = calloc(b, sizeof(*w->keys));
    w->bufs = calloc(b, sizeof(*w->bufs));
    w->caps = calloc(b, sizeof(*w->caps));
    w->lens = calloc(b, sizeof(*w->lens));
    w->results = calloc(b, sizeof(*w->results));
    w->lat_cap = 1u << 16;
    w->lat = malloc(w->lat_cap * sizeof(*w->lat));
    if (w->keys == NULL || w->bufs == NULL || w->caps == NULL || w->lens == NULL ||
        w->results == NULL || w->lat == NULL)
        return MC_ERR_NOMEM;

    err = mc_connect(cfg->socket, &w->c);
    if (err != 0) {
        fprintf(stderr, "mc-bench: client %u: connect: %s\n", idx, mc_strerror(err));
        return err;
    }
    /* --room: the trailer's room after each buffer, 64-byte aligned */
    stride = cfg->room ? ((size_t)mc_shm_alloc_len(cfg->size, true) + 63) & ~(size_t)63
                       : cfg->size;
    if (cfg->registered) {
        err = mc_buf_alloc(w->c, b * stride, &w->arena);
        if (err != 0) {
            fprintf(stderr, "mc-bench: client %u: mc_buf_alloc %zu bytes: %s\n", idx,
                    b * stride, mc_strerror(err));
            return err;
        }
    } else {
        w->arena = aligned_alloc(4096, (b * stride + 4095) & ~(size_t)4095);
        if (w->arena == NULL)
            return MC_ERR_NOMEM;
    }
    /* touch every page now: faults belong to neither side's timed path */
    pattern(w->arena, b * stride);
    for (i = 0; i < b; i++) {
        w->bufs[i] = (unsigned char *)w->arena + i * stride;
        w->caps[i] = stride;
    }
    return 0;
}

static void count_error(struct mcb_worker *w, int err)
{
    if (w->r.errors++ == 0)
        w->r.first_err = err;
}

static void record_latency(struct mcb_worker *w, uint64_t ns)
{
    if (w->nlat == w->lat_cap) {
        uint64_t *n = realloc(w->lat, 2 * w->lat_cap * sizeof(*n));

        if (n == NULL)
            return; /* keep the samples we have; the figures stay valid, only thinner */
        w->lat = n;
        w->lat_cap *= 2;
    }
    w->lat[w->nlat++] = ns;
}

/* One get call over the current batch; tallies its items. */
static void call_get(struct mcb_worker *w, size_t n)
{
    size_t i, size = w->cfg->size;
    int got;

    if (n == 1) {
        w->results[0] = mc_get(w->c, w->keys[0], w->bufs[0], w->caps[0], &w->lens[0]);
        got = 0;
    } else {
        got = mc_batch_get(w->c, n, w->keys, w->bufs, w->caps, w->lens, w->results);
    }
    if (got < 0) {
        w->r.errors += n - 1;
        count_error(w, got);
        return;
    }
    for (i = 0; i < n; i++) {
        if (w->results[i] == 0 && w->lens[i] == size) {
            w->r.ops++;
            w->r.bytes += size;
        } else if (w->results[i] == 0 || w->results[i] == MC_ERR_NOT_FOUND) {
            w->r.misses++;
        } else {
            count_error(w, w->results[i]);
        }
    }
}

static void call_put(struct mcb_worker *w, size_t n, bool upsert)
{
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    size_t i, size = w->cfg->size;
    int got;

    o.flags = (upsert ? MC_PUT_UPSERT : 0) | (w->cfg->no_checksum ? MC_PUT_NO_CHECKSUM : 0);
    if (n == 1) {
        w->results[0] = mc_put(w->c, w->keys[0], w->bufs[0], size, &o);
        got = 0;
    } else {
        got = mc_batch_put(w->c, n, w->keys, (const void *const *)w->bufs, w->caps, &o,
                           w->results);
    }
    if (got < 0) {
        w->r.errors += n - 1;
        count_error(w, got);
        return;
    }
    for (i = 0; i < n; i++) {
        if (w->results[i] == 0) {
            w->r.ops++;
            w->r.bytes += size;
        } else if (w->results[i] == MC_ERR_EXISTS && !upsert) {
            w->r.exists++;
        } else {
            count_error(w, w->results[i]);
        }
    }
}

static void call_exist(struct mcb_worker *w, size_t n)
{
    size_t i;
    int got;

    if (n == 1) {
        w->results[0] = mc_exist(w->c, w->keys[0]);
        got = 0;
    } else {
        got = mc_batch_exist(w->c, n, w->keys, w->results);
    }
    if (got < 0) {
        w->r.errors += n - 1;
        count_error(w, got);
        return;
    }
    for (i = 0; i < n; i++) {
        if (w->results[i] == 1) {
            w->r.ops++;
        } else if (w->results[i] == 0) {
            w->r.ops++;
            w->r.misses++;
        } else {
            count_error(w, w->results[i]);
        }
    }
}

/* One timed call: the next batch of keys of this client's slice. */
static void worker_step(struct mcb_worker *w)
{
    const struct mcb_cfg *cfg = w->cfg;
    size_t n = cfg->batch, i;
    bool wraps = w->pos + n > w->count;
    uint64_t t0;

    for (i = 0; i < n; i++)
        w->keys[i] = key_at(cfg, w->first + (w->pos + i) % w->count);

    t0 = now_ns();
    switch (cfg->op) {
    case MCB_PUT:
        /* a batch that wraps already rewrites keys of this pass: upsert it */
        call_put(w, n, w->wrapped || wraps);
        break;
    case MCB_GET:
        call_get(w, n);
        break;
    case MCB_EXIST:
        call_exist(w, n);
        break;
    case MCB_MIXED:
        if (w->nbatch % MCB_PUT_EVERY == MCB_PUT_EVERY - 1)
            call_put(w, n, true);
        else
            call_get(w, n);
        break;
    }
    record_latency(w, now_ns() - t0);

    w->nbatch++;
    w->pos += n;
    if (w->pos >= w->count) {
        w->pos %= w->count;
        w->wrapped = true;
    }
    atomic_store_explicit(w->progress, w->r.ops, memory_order_relaxed);
}

static bool write_all(int fd, const void *p, size_t n)
{
    const char *b = p;

    while (n > 0) {
        ssize_t k = write(fd, b, n);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        b += k;
        n -= (size_t)k;
    }
    return true;
}

static bool read_all(int fd, void *p, size_t n)
{
    char *b = p;

    while (n > 0) {
        ssize_t k = read(fd, b, n);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        b += k;
        n -= (size_t)k;
    }
    return true;
}

/* The child: connect, report ready, wait for the start, run, send the results. Never
 * returns. */
static void child_main(const struct mcb_cfg *cfg, unsigned idx, int ready_fd, int go_fd,
                       int out_fd, _Atomic uint64_t *progress)
{
    struct mcb_worker w;
    uint64_t t0, end;
    char ch;
    int err;

    memset(&w, 0, sizeof(w));
    w.progress = progress;
    err = worker_init(&w, cfg, idx);
    ch = err == 0 ? 'R' : 'E';
    if (!write_all(ready_fd, &ch, 1))
        _exit(1);
    close(ready_fd);
    /* the parent closes its end of the go pipe to start everyone at once */
    while (read(go_fd, &ch, 1) < 0 && errno == EINTR)
        ;
    close(go_fd);

    if (err == 0) {
        t0 = now_ns();
        end = t0 + (uint64_t)(cfg->seconds * 1e9);
        do {
            worker_step(&w);
        } while (now_ns() < end);
        w.r.elapsed_ns = now_ns() - t0;
        w.r.nlat = w.nlat;
    } else {
        w.r.setup_err = err;
    }
    if (!write_all(out_fd, &w.r, sizeof(w.r)) ||
        !write_all(out_fd, w.lat, w.nlat * sizeof(*w.lat)))
        _exit(1);
    close(out_fd);
    /* mc_close waits for every op to be final; arena buffers go with it */
    mc_close(w.c);
    _exit(0);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array, in microseconds. */
static double percentile_us(const uint64_t *s, size_t n, double p)
{
    size_t k;

    if (n == 0)
        return 0;
    k = (size_t)(p * (double)n + 0.999999);
    if (k == 0)
        k = 1;
    if (k > n)
        k = n;
    return (double)s[k - 1] / 1e3;
}

static void progress_line(const struct mcb_cfg *cfg, _Atomic uint64_t *ctr, uint64_t t0)
{
    double el = (double)(now_ns() - t0) / 1e9;
    uint64_t ops = 0;
    unsigned i;

    for (i = 0; i < cfg->clients; i++)
        ops += atomic_load_explicit(&ctr[i], memory_order_relaxed);
    printf("\r\033[Kmc-bench: %s %zu B x%zu, %u client%s: %.1f/%.0f s, %.0f ops/s",
           mcb_op_names[cfg->op], cfg->size, cfg->batch, cfg->clients,
           cfg->clients == 1 ? "" : "s", el, cfg->seconds, el > 0 ? (double)ops / el : 0.0);
    fflush(stdout);
}

static int parse_args(int argc, char **argv, struct mcb_cfg *cfg)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},  {"op", required_argument, NULL, 'o'},
        {"size", required_argument, NULL, 'z'},    {"batch", required_argument, NULL, 'b'},
        {"clients", required_argument, NULL, 'c'}, {"seconds", required_argument, NULL, 't'},
        {"keys", required_argument, NULL, 'k'},    {"registered", no_argument, NULL, 'r'},
        {"room", no_argument, NULL, 'R'},         {"no-checksum", no_argument, NULL, 'N'},
        {"fill-socket", required_argument, NULL, 'f'},
        {"trace", required_argument, NULL, 'T'},   {"block-size", required_argument, NULL, 'B'},
        {"capacity", required_argument, NULL, 'C'}, {"key-prefix", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool have_op = false, have_size = false;
    uint64_t v;
    char *end;
    int o, i;

    cfg->batch = 1;
    cfg->clients = 1;
    cfg->seconds = 5;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's':
            cfg->socket = optarg;
            break;
        case 'o':
            for (i = 0; i < 4 && strcmp(optarg, mcb_op_names[i]) != 0; i++)
                ;
            if (i == 4)
                return usage("--op is put, get, exist or mixed");
            cfg->op = (enum mcb_op)i;
            have_op = true;
            break;
        case 'z':
            if (!parse_u64(optarg, &v) || v == 0 || v > (1ull << 32))
                return usage("--size is 1 byte to 4 GiB");
            cfg->size = (size_t)v;
            have_size = true;
            break;
        case 'b':
            if (!parse_u64(optarg, &v) || v == 0 || v > MCB_BATCH_MAX)
                return usage("--batch is 1 to 4096");
            cfg->batch = (size_t)v;
            cfg->have_batch = true;
            break;
        case 'c':
            if (!parse_u64(optarg, &v) || v == 0 || v > MCB_CLIENTS_MAX)
                return usage("--clients is 1 to 256");
            cfg->clients = (unsigned)v;
            break;
        case 't':
            errno = 0;
            cfg->seconds = strtod(optarg, &end);
            if (errno != 0 || *end != '\0' || !(cfg->seconds > 0 && cfg->seconds <= 3600))
                return usage("--seconds is more than 0, at most 3600");
            break;
        case 'k':
            if (!parse_u64(optarg, &v) || v == 0 || v > (1ull << 32))
                return usage("--keys is 1 to 2^32");
            cfg->keys = v;
            break;
        case 'r':
            cfg->registered = true;
            break;
        case 'R':
            cfg->room = true;
            break;
        case 'N':
            cfg->no_checksum = true;
            break;
        case 'f':
            cfg->fill_socket = optarg;
            break;
        case 'T':
            cfg->trace.path = optarg;
            break;
        case 'B':
            if (!parse_u64(optarg, &v) || v == 0 || v > (1ull << 30))
                return usage("--block-size is 1 byte to 1 GiB");
            cfg->trace.block_size = (size_t)v;
            break;
        case 'C':
            if (!parse_u64(optarg, &v) || v == 0)
                return usage("--capacity is a positive byte count");
            cfg->trace.capacity = v;
            break;
        case 'P':
            if (strlen(optarg) == 0 || strlen(optarg) > 40)
                return usage("--key-prefix is 1 to 40 bytes");
            cfg->trace.key_prefix = optarg;
            break;
        default:
            return usage(NULL);
        }
    }
    if (optind != argc)
        return usage("unexpected argument");
    if (cfg->trace.path != NULL) {
        if (cfg->socket == NULL || have_op || have_size)
            return usage("--trace needs --socket and takes --block-size, not --op or --size");
        if (cfg->no_checksum)
            return usage("--no-checksum does not go with --trace");
        cfg->trace.socket = cfg->socket;
        cfg->trace.registered = cfg->registered;
        cfg->trace.clients = cfg->clients;
        cfg->trace.batch = cfg->have_batch ? cfg->batch : 32;
        if (cfg->trace.block_size == 0)
            cfg->trace.block_size = 64 * 1024;
        if (cfg->trace.batch * cfg->trace.block_size > (16ull << 30))
            return usage("--batch x --block-size is at most 16 GiB");
        return 0;
    }
    if (cfg->trace.block_size != 0 || cfg->trace.capacity != 0 || cfg->trace.key_prefix != NULL)
        return usage("--block-size, --capacity and --key-prefix go with --trace");
    if (cfg->socket == NULL || !have_op || !have_size)
        return usage("--socket, --op and --size are required");
    if (cfg->batch * cfg->size / cfg->batch != cfg->size ||
        cfg->batch * cfg->size > (16ull << 30))
        return usage("--batch x --size is at most 16 GiB per client");
    return 0;
}

/* Fork the clients, start them together, collect and merge. Returns the exit status. */
static int run_clients(const struct mcb_cfg *cfg)
{
    unsigned n = cfg->clients, i, started = 0, ready = 0;
    int ready_pipe[2], go_pipe[2], *out = calloc(n, sizeof(*out));
    pid_t *pids = calloc(n, sizeof(*pids));
    _Atomic uint64_t *ctr;
    struct mcb_result tot;
    uint64_t *lat = NULL, nlat = 0, t0, max_ns = 0;
    bool tty = isatty(STDOUT_FILENO), failed = false;
    double secs, p50, p99;
    int rc = 1;
    char ch;

    memset(&tot, 0, sizeof(tot));
    ctr = mmap(NULL, n * sizeof(*ctr), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
               0);
    if (out == NULL || pids == NULL || ctr == MAP_FAILED || pipe(ready_pipe) < 0 ||
        pipe(go_pipe) < 0) {
        fprintf(stderr, "mc-bench: out of resources for %u clients\n", n);
        return 1;
    }
    fflush(stdout);
    for (i = 0; i < n; i++) {
        int p[2];

        if (pipe(p) < 0)
            break;
        pids[i] = fork();
        if (pids[i] < 0) {
            close(p[0]);
            close(p[1]);
            break;
        }
        if (pids[i] == 0) {
            close(ready_pipe[0]);
            close(go_pipe[1]);
            close(p[0]);
            child_main(cfg, i, ready_pipe[1], go_pipe[0], p[1], &ctr[i]);
        }
        close(p[1]);
        out[i] = p[0];
        started++;
    }
    close(ready_pipe[1]);
    close(go_pipe[0]);
    while (ready < started && read_all(ready_pipe[0], &ch, 1)) {
        ready++;
        failed |= ch != 'R';
    }
    close(ready_pipe[0]);
    t0 = now_ns();
    close(go_pipe[1]); /* go */
    if (started < n || ready < started) {
        fprintf(stderr, "mc-bench: only %u of %u clients started\n", ready, n);
        failed = true;
    }

    while (tty && !failed && now_ns() - t0 < (uint64_t)(cfg->seconds * 1e9)) {
        struct timespec ts = {0, 250000000};

        nanosleep(&ts, NULL);
        progress_line(cfg, ctr, t0);
    }

    for (i = 0; i < started; i++) {
        struct mcb_result r;
        uint64_t *grown;

        if (!read_all(out[i], &r, sizeof(r))) {
            fprintf(stderr, "mc-bench: client %u died\n", i);
            failed = true;
            continue;
        }
        if (r.setup_err != 0) {
            failed = true;
            continue;
        }
        grown = realloc(lat, (nlat + r.nlat) * sizeof(*lat) + 1);
        if (grown == NULL || !read_all(out[i], grown + nlat, r.nlat * sizeof(*lat))) {
            fprintf(stderr, "mc-bench: client %u: lost its samples\n", i);
            failed = true;
            lat = grown != NULL ? grown : lat;
            continue;
        }
        lat = grown;
        nlat += r.nlat;
        tot.ops += r.ops;
        tot.bytes += r.bytes;
        tot.misses += r.misses;
        tot.exists += r.exists;
        if (r.errors > 0 && tot.errors == 0)
            tot.first_err = r.first_err;
        tot.errors += r.errors;
        if (r.elapsed_ns > max_ns)
            max_ns = r.elapsed_ns;
    }
    for (i = 0; i < started; i++) {
        int st;

        close(out[i]);
        if (waitpid(pids[i], &st, 0) == pids[i] && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
            failed = true;
    }
    if (tty)
        printf("\r\033[K");

    qsort(lat, nlat, sizeof(*lat), cmp_u64);
    secs = max_ns > 0 ? (double)max_ns / 1e9 : 1;
    p50 = percentile_us(lat, nlat, 0.50);
    p99 = percentile_us(lat, nlat, 0.99);
    if (tot.misses > 0)
        fprintf(stderr, "mc-bench: %" PRIu64 " misses\n", tot.misses);
    if (tot.exists > 0)
        fprintf(stderr,
                "mc-bench: %" PRIu64 " plain puts found the key present (MC_ERR_EXISTS, "
                "not counted): keys left by an earlier run\n",
                tot.exists);
    if (tot.errors > 0)
        fprintf(stderr, "mc-bench: %" PRIu64 " items failed (first: %s)\n", tot.errors,
                mc_strerror(tot.first_err));
    printf("{\"op\":\"%s\",\"size\":%zu,\"batch\":%zu,\"clients\":%u,\"keys\":%" PRIu64
           ",\"ops_per_s\":%.1f,\"gb_per_s\":%.4f,\"p50_us\":%.2f,\"p99_us\":%.2f}\n",
           mcb_op_names[cfg->op], cfg->size, cfg->batch, cfg->clients, cfg->keys,
           (double)tot.ops / secs, (double)tot.bytes / 1e9 / secs, p50, p99);
    fflush(stdout);

    rc = failed || tot.errors > 0 ? 1 : 0;
    if (tot.misses > 0 && (cfg->op == MCB_GET || cfg->op == MCB_MIXED))
        rc = 1;
    free(lat);
    munmap(ctr, n * sizeof(*ctr));
    free(pids);
    free(out);
    return rc;
}

int main(int argc, char **argv)
{
    struct mcb_cfg cfg;
    mc_client_t *c;
    char *keytab;
    int rc, err;

    memset(&cfg, 0, sizeof(cfg));
    rc = parse_args(argc, argv, &cfg);
    if (rc != 0)
        return rc;
    if (cfg.trace.path != NULL)
        return mcb_trace_run(&cfg.trace);

    err = mc_connect(cfg.socket, &c);
    if (err != 0) {
        fprintf(stderr, "mc-bench: connect %s: %s\n", cfg.socket, mc_strerror(err));
        return 1;
    }
    if (cfg.keys == 0) {
        uint64_t cap = mcb_pool_capacity(c);

        if (cap == 0) {
            mc_close(c);
            return usage("the agent's capacity is unknown: give --keys");
        }
        cfg.keys = cap / 2 / cfg.size;
    }
    if (cfg.keys < (uint64_t)cfg.batch * cfg.clients) {
        mc_close(c);
        return usage("--keys must be at least --batch x --clients (each client its own "
                     "batch of distinct keys)");
    }
    keytab = make_keys(cfg.size, cfg.keys);
    if (keytab == NULL) {
        mc_close(c);
        fprintf(stderr, "mc-bench: no memory for %" PRIu64 " keys\n", cfg.keys);
        return 1;
    }
    cfg.keytab = keytab;

    if (cfg.op != MCB_PUT) {
        mc_client_t *fc = c;

        if (cfg.fill_socket != NULL) {
            err = mc_connect(cfg.fill_socket, &fc);
            if (err != 0) {
                fprintf(stderr, "mc-bench: connect %s: %s\n", cfg.fill_socket,
                        mc_strerror(err));
                mc_close(c);
                free(keytab);
                return 1;
            }
        }
        err = prefill(&cfg, fc, cfg.keys);
        if (fc != c)
            mc_close(fc);
        if (err != 0) {
            fprintf(stderr, "mc-bench: making %" PRIu64 " keys present: %s\n", cfg.keys,
                    mc_strerror(err));
            mc_close(c);
            free(keytab);
            return 1;
        }
    }
    /* the children connect on their own (docs/protocol.md: libmc after fork) */
    mc_close(c);

    rc = run_clients(&cfg);
    free(keytab);
    return rc;
}
