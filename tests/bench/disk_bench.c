/*
 * mc-disk-bench: the disk tier's store (daemon/agent/disk.h) on its own, against the device:
 * writes --count records of --size bytes into --file, then reads random batches of --batch
 * records for --seconds, every batch submitted at once and waited for as a whole, the way a
 * batch get of disk-resident objects reaches the store. Every read is checked (header and
 * XXH3 of the payload) as the agent's would be. scripts/bench-disk.sh runs fio on the same
 * file with the same block size and queue depth as the reference.
 *
 * Prints one JSON line:
 *   {"engine":…,"direct":…,"size":…,"count":…,"batch":…,"depth":…,"chunk":…,
 *    "write_gb_per_s":…,"read_gb_per_s":…,"reads":…,"corrupt":0}
 * (GB/s of payload bytes; 1 GB = 1e9 bytes.)
 *
 * usage: mc-disk-bench --file PATH [--size BYTES] [--count N] [--batch N] [--depth N]
 *                      [--chunk BYTES] [--engine auto|io_uring|threads] [--seconds S]
 *                      [--keep] [--no-write] [--removals N]
 * --keep leaves the file (and uses one that is there); --no-write reads the records an
 * earlier --keep run wrote (the same --size and --count). --removals N then removes N
 * records one at a time as a remove of a held object does (mark removed: a header read
 * and an O_DSYNC header write), then erases them one at a time as a freed extent is
 * (one header write), and adds the medians "mark_us" and "erase_us" to the line.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "daemon/agent/disk.h"

struct bop {
    struct mc_disk_op op;
    int res;
};

static void bop_done(struct mc_disk_op *op, int res)
{
    ((struct bop *)op)->res = res;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t parse_size(const char *s)
{
    char *end;
    uint64_t v = strtoull(s, &end, 0);

    switch (*end) {
    case 'k': case 'K': v <<= 10; break;
    case 'm': case 'M': v <<= 20; break;
    case 'g': case 'G': v <<= 30; break;
    default: break;
    }
    return v;
}

static void usage(void)
{
    fprintf(stderr, "usage: mc-disk-bench --file PATH [--size BYTES] [--count N] [--batch N] "
                    "[--depth N] [--chunk BYTES] [--engine auto|io_uring|threads] "
                    "[--seconds S] [--keep] [--no-write] [--removals N]\n");
    exit(2);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* One op on its own, drained: its latency in us, or < 0 when it failed. */
static double one_op(struct mc_disk *d, struct bop *b, int rc)
{
    double t0 = now_s();

    if (rc != 0)
        return -1;
    mc_disk_drain(d);
    return b->res == 0 ? (now_s() - t0) * 1e6 : -1;
}

/* Records 0..n-1 (key "k<i>", version 1) marked removed one at a time, then erased one at
 * a time: the median latency of each. */
static int removal_latency(struct mc_disk *d, uint64_t n, uint64_t rl, uint64_t size,
                           double *mark_us, double *erase_us)
{
    double *m = calloc(n, sizeof(*m)), *e = calloc(n, sizeof(*e));
    struct bop b = {.op.done = bop_done};
    char key[32];

    if (m == NULL || e == NULL)
        return 1;
    for (uint64_t i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "k%" PRIu64, i);
        b.res = 1;
        m[i] = one_op(d, &b, mc_disk_mark_removed(d, &b.op, i * rl, key, (uint32_t)strlen(key),
                                                  1, size));
    }
    for (uint64_t i = 0; i < n; i++) {
        b.res = 1;
        e[i] = one_op(d, &b, mc_disk_erase(d, &b.op, i * rl, rl));
    }
    for (uint64_t i = 0; i < n; i++) {
        if (m[i] < 0 || e[i] < 0) {
            fprintf(stderr, "mc-disk-bench: a mark or erase failed\n");
            return 1;
        }
    }
    qsort(m, n, sizeof(*m), cmp_double);
    qsort(e, n, sizeof(*e), cmp_double);
    *mark_us = m[n / 2];
    *erase_us = e[n / 2];
    free(m);
    free(e);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"file", required_argument, NULL, 'f'},  {"size", required_argument, NULL, 's'},
        {"count", required_argument, NULL, 'n'}, {"batch", required_argument, NULL, 'b'},
        {"depth", required_argument, NULL, 'd'}, {"chunk", required_argument, NULL, 'c'},
        {"engine", required_argument, NULL, 'e'}, {"seconds", required_argument, NULL, 't'},
        {"keep", no_argument, NULL, 'k'},        {"no-write", no_argument, NULL, 'w'},
        {"removals", required_argument, NULL, 'r'}, {NULL, 0, NULL, 0},
    };
    struct mc_disk_cfg cfg = {.engine = MC_DISK_ENGINE_AUTO, .depth = 32, .chunk = 1u << 20,
                              .threads = 8};
    uint64_t size = 256u << 10, count = 1024, batch = 32, reads = 0, corrupt = 0, rl;
    uint64_t removals = 0;
    double mark_us = 0, erase_us = 0;
    double seconds = 5, t0, wt, rt;
    bool keep = false, no_write = false;
    struct mc_disk *d;
    struct bop *ops;
    uint8_t *src, **dst;
    char (*keys)[32];
    int c, err;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'f': cfg.path = optarg; break;
        case 's': size = parse_size(optarg); break;
        case 'n': count = strtoull(optarg, NULL, 0); break;
        case 'b': batch = strtoull(optarg, NULL, 0); break;
        case 'd': cfg.depth = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'c': cfg.chunk = (uint32_t)parse_size(optarg); break;
        case 't': seconds = strtod(optarg, NULL); break;
        case 'k': keep = true; break;
        case 'w': no_write = true; break;
        case 'r': removals = strtoull(optarg, NULL, 0); break;
        case 'e':
            if (strcmp(optarg, "io_uring") == 0)
                cfg.engine = MC_DISK_ENGINE_URING;
            else if (strcmp(optarg, "threads") == 0)
                cfg.engine = MC_DISK_ENGINE_THREADS;
            else if (strcmp(optarg, "auto") != 0)
                usage();
            break;
        default: usage();
        }
    }
    if (cfg.path == NULL || size == 0 || count == 0 || batch == 0 || batch > count ||
        removals > count)
        usage();
    cfg.threads = cfg.depth < 64 ? cfg.depth : 64; /* as many workers as I/Os in flight */
    rl = mc_disk_rec_len(size);
    cfg.size = MC_DISK_BLOCK + count * rl;
    if (no_write)
        keep = true; /* the records of an earlier --keep run are read */
    if (!keep)
        unlink(cfg.path);
    err = mc_disk_open(&cfg, &d);
    if (err != 0) {
        fprintf(stderr, "mc-disk-bench: open %s: %s\n", cfg.path, mc_strerror(err));
        return 1;
    }
    if (mc_disk_region(d) < count * rl) {
        fprintf(stderr, "mc-disk-bench: %s holds %" PRIu64 " bytes, not %" PRIu64 "\n",
                cfg.path, mc_disk_region(d), count * rl);
        return 1;
    }
    ops = calloc(batch, sizeof(*ops));
    dst = calloc(batch, sizeof(*dst));
    src = malloc(size);
    if (ops == NULL || dst == NULL || src == NULL)
        return 1;
    for (uint64_t i = 0; i < size; i++)
        src[i] = (uint8_t)(i * 131 + (i >> 12));
    for (uint64_t i = 0; i < batch; i++) {
        /* block-aligned, as the agent's landing blocks are: whole blocks land there
         * straight from the device (mc_disk_read), only a last partial one is copied */
        if (posix_memalign((void **)&dst[i], 4096, size != 0 ? size : 1) != 0)
            return 1;
        /* fault in before timing; not with zeros, which the compiler may turn (with the
         * malloc) into a calloc that leaves the pages untouched */
        memset(dst[i], 0x5a, size);
    }
    /* every record holds the same bytes under its own key: the reads check key and XXH3 */
    keys = calloc(batch, sizeof(*keys));
    if (keys == NULL)
        return 1;
    t0 = now_s();
    for (uint64_t i = 0; i < count && !no_write; i += batch) {
        uint64_t n = count - i < batch ? count - i : batch;

        for (uint64_t j = 0; j < n; j++) {
            snprintf(keys[j], sizeof(keys[j]), "k%" PRIu64, i + j);
            ops[j].op.done = bop_done;
            ops[j].res = 1;
            if (mc_disk_write(d, &ops[j].op, (i + j) * rl, keys[j], (uint32_t)strlen(keys[j]), 1,
                              0, 0, src, size) != 0)
                return 1;
        }
        mc_disk_drain(d);
        for (uint64_t j = 0; j < n; j++) {
            if (ops[j].res != 0) {
                fprintf(stderr, "mc-disk-bench: write: %s\n", mc_strerror(ops[j].res));
                return 1;
            }
        }
    }
    wt = now_s() - t0;

    srand(7);
    t0 = now_s();
    do {
        for (uint64_t j = 0; j < batch; j++) {
            uint64_t r = ((uint64_t)rand() << 16 ^ (uint64_t)rand()) % count;
            char *k = keys[j];

            snprintf(k, sizeof(keys[j]), "k%" PRIu64, r);
            ops[j].op.done = bop_done;
            ops[j].res = 1;
            if (mc_disk_read(d, &ops[j].op, r * rl, k, (uint32_t)strlen(k), 1, dst[j], size) !=
                0)
                return 1;
        }
        mc_disk_drain(d);
        for (uint64_t j = 0; j < batch; j++) {
            if (ops[j].res == MC_ERR_CORRUPT)
                corrupt++;
            else if (ops[j].res != 0) {
                fprintf(stderr, "mc-disk-bench: read: %s\n", mc_strerror(ops[j].res));
                return 1;
            }
        }
        reads += batch;
        rt = now_s() - t0;
    } while (rt < seconds);
    if (removals > 0 && (removal_latency(d, removals, rl, size, &mark_us, &erase_us) != 0))
        return 1;
    printf("{\"engine\":\"%s\",\"direct\":%s,\"size\":%" PRIu64 ",\"count\":%" PRIu64
           ",\"batch\":%" PRIu64 ",\"depth\":%u,\"chunk\":%u,\"write_gb_per_s\":%.3f,"
           "\"read_gb_per_s\":%.3f,\"reads\":%" PRIu64 ",\"corrupt\":%" PRIu64
           ",\"mark_us\":%.0f,\"erase_us\":%.0f}\n",
           mc_disk_engine(d), mc_disk_is_direct(d) ? "true" : "false", size, count, batch,
           cfg.depth, cfg.chunk, no_write ? 0.0 : (double)(count * size) / wt / 1e9,
           (double)(reads * size) / rt / 1e9, reads, corrupt, mark_us, erase_us);
    mc_disk_close(d);
    for (uint64_t i = 0; i < batch; i++)
        free(dst[i]);
    free(dst);
    free(keys);
    free(ops);
    free(src);
    if (!keep)
        unlink(cfg.path);
    return corrupt == 0 ? 0 : 1;
}
