/*
 * master_bench: the master service in-process, one core, at 1 M and 10 M objects.
 *
 * Measures put (put_start + put_end), get (get_replicas + lease_release), exist and remove
 * in ops/s, and the metadata bytes per object (RSS growth over the objects, keys included).
 * The reference in the same run is glibc's hsearch_r on the same keys (insert and find with
 * no lifecycle at all), so the ratio says what the store's rules cost over a bare table.
 *
 * usage: master_bench [--objects N[,N...]] [--key-bytes B] [--size BYTES] [--config FILE]
 *                     [--set k=v]... [--dump-config]
 * The last line is one JSON object with the figures of the largest scale.
 * MC_BENCH_NO_HUGEPAGES=1 keeps the heap on 4 KiB pages (see docs/decisions.md).
 */
#include <getopt.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "daemon/common/config.h"
#include "daemon/master/master.h"

struct scale_result {
    uint64_t objects;
    double put, get, exist, remove;
    double ref_insert, ref_find;
    double bytes_per_object, meta_per_object;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f == NULL)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Keys look like an engine's: a fixed prefix and a hex block hash, padded to key_bytes. */
static char *make_keys(uint64_t n, size_t key_bytes)
{
    char *keys = malloc(n * (key_bytes + 1));
    uint64_t i;

    if (keys == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        char *k = keys + i * (key_bytes + 1);
        uint64_t h = i * 0x9E3779B97F4A7C15ull;
        int w = snprintf(k, key_bytes + 1, "kv/%016llx%016llx", (unsigned long long)h,
                         (unsigned long long)i);

        for (size_t j = (size_t)w; j < key_bytes; j++)
            k[j] = (char)('a' + (i + j) % 26);
        k[key_bytes] = '\0';
    }
    return keys;
}

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int run_scale(const struct mc_master_config *cfg, uint64_t n, size_t key_bytes,
                     uint64_t obj_size, struct scale_result *res)
{
    struct mc_master *m;
    struct mc_master_seg_desc d;
    struct mc_master_stats st;
    struct hsearch_data ht;
    uint64_t i, rss0, rss1, ops = n < 2000000 ? n : 2000000;
    size_t stride = key_bytes + 1;
    char *keys = make_keys(n, key_bytes);
    uint32_t node, seg;
    double t;
    int err;

    if (keys == NULL)
        return MC_ERR_NOMEM;
    res->objects = n;

    /* the reference: a bare hash table over the same keys */
    memset(&ht, 0, sizeof(ht));
    if (hcreate_r((size_t)(n + n / 4), &ht) == 0) {
        free(keys);
        return MC_ERR_NOMEM;
    }
    t = now_s();
    for (i = 0; i < n; i++) {
        ENTRY e = {.key = keys + i * stride, .data = NULL}, *ep;

        hsearch_r(e, ENTER, &ep, &ht);
    }
    res->ref_insert = (double)n / (now_s() - t);
    t = now_s();
    for (i = 0; i < ops; i++) {
        ENTRY e = {.key = keys + (rnd() % n) * stride}, *ep;

        hsearch_r(e, FIND, &ep, &ht);
    }
    res->ref_find = (double)ops / (now_s() - t);
    hdestroy_r(&ht);

    rss0 = rss_bytes();
    err = mc_master_create(cfg, NULL, NULL, &m);
    if (err != 0)
        goto out;
    err = mc_master_node_register(m, "bench", "d1", &node);
    if (err != 0)
        goto out_destroy;
    /* room for every object: eviction is not what this measures */
    d = (struct mc_master_seg_desc){.node = node, .kind = MC_SEG_DRAM, .base = 0,
                                    .size = (n + n / 8 + 1024) * ((obj_size + 63) & ~63ull)};
    err = mc_master_segment_mount(m, &d, &seg);
    if (err != 0)
        goto out_destroy;

    t = now_s();
    for (i = 0; i < n; i++) {
        struct mc_master_put_req r = {.key = keys + i * stride, .key_len = key_bytes,
                                      .size = obj_size, .replicas = 1, .writer = node,
                                      .preferred = MC_MASTER_NODE_NONE};
        struct mc_master_put_grant g;
        struct mc_master_ref ref = {.key = r.key, .key_len = key_bytes, .node = node};

        err = mc_master_put_start(m, &r, &g);
        if (err != 0)
            goto out_destroy;
        ref.version = g.version;
        err = mc_master_put_end(m, &ref);
        if (err != 0)
            goto out_destroy;
    }
    res->put = (double)n / (now_s() - t);
    rss1 = rss_bytes();
    res->bytes_per_object = (double)(rss1 - rss0) / (double)n;
    mc_master_get_stats(m, &st);
    res->meta_per_object = (double)st.meta_bytes / (double)n;

    t = now_s();
    for (i = 0; i < ops; i++) {
        const char *k = keys + (rnd() % n) * stride;
        struct mc_master_get_result g;
        struct mc_master_ref ref = {.key = k, .key_len = key_bytes};

        err = mc_master_get_replicas(m, k, key_bytes, &g);
        if (err != 0)
            goto out_destroy;
        ref.version = g.lease.version;
        ref.epoch = g.lease.epoch;
        if (mc_master_lease_release(m, 1, &ref) != 1) {
            err = MC_ERR_INTERNAL;
            goto out_destroy;
        }
    }
    res->get = (double)ops / (now_s() - t);

    t = now_s();
    for (i = 0; i < ops; i++) {
        if (mc_master_exist(m, keys + (rnd() % n) * stride, key_bytes) != 1) {
            err = MC_ERR_INTERNAL;
            goto out_destroy;
        }
    }
    res->exist = (double)ops / (now_s() - t);

    t = now_s();
    for (i = 0; i < n; i++) {
        err = mc_master_remove(m, keys + i * stride, key_bytes);
        if (err != 0)
            goto out_destroy;
    }
    res->remove = (double)n / (now_s() - t);
    mc_master_get_stats(m, &st);
    if (st.objects != 0 || st.used_bytes != 0)
        err = MC_ERR_INTERNAL;

out_destroy:
    mc_master_destroy(m);
out:
    free(keys);
    return err;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: master_bench [--objects N[,N...]] [--key-bytes B] [--size BYTES]\n"
               "  --objects N,...    scales to measure (default 1000000,10000000)\n"
               "  --key-bytes B      key length, 24..512 (default 40)\n"
               "  --size BYTES       object size the allocator places (default 65536)\n"
               "%s", MC_CONFIG_USAGE);
}

static int validate(const void *cfg, char *err, size_t errlen)
{
    return mc_master_config_validate(cfg, err, errlen);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"objects", required_argument, NULL, 'n'},
        {"key-bytes", required_argument, NULL, 'k'},
        {"size", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct mc_master_config cfg;
    struct scale_result res = {0};
    uint64_t scales[8] = {1000000, 10000000};
    size_t nscales = 2, key_bytes = 40, s;
    uint64_t obj_size = 64 * 1024;
    char err[512];
    int c, rc;

    /* Records are small mallocs spread over gigabytes: with 4 KiB pages nearly every lookup
     * at 10 M objects also misses the TLB. glibc backs its heap with transparent huge pages
     * when told so by a tunable read at start-up, hence the re-exec (docs/decisions.md). */
    if (getenv("MC_BENCH_NO_HUGEPAGES") == NULL && getenv("GLIBC_TUNABLES") == NULL) {
        setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1);
        execv("/proc/self/exe", argv);
        unsetenv("GLIBC_TUNABLES"); /* exec failed: run with 4 KiB pages */
    }
    rc = mc_config_parse_args(mc_master_config_table, &cfg, MC_CONFIG_ENV_PREFIX, validate,
                              &argc, argv, stdout, err, sizeof(err));
    if (rc == MC_CONFIG_EXIT)
        return 0;
    if (rc != 0) {
        fprintf(stderr, "master_bench: %s\n", err);
        usage(stderr);
        return 2;
    }
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'n': {
            char *p = optarg, *end;

            nscales = 0;
            while (*p != '\0' && nscales < 8) {
                unsigned long long v = strtoull(p, &end, 10);

                if (end == p || v == 0 || v > 100000000ull || (*end != ',' && *end != '\0')) {
                    fprintf(stderr, "master_bench: --objects: bad count in '%s'\n", optarg);
                    return 2;
                }
                scales[nscales++] = v;
                p = *end == ',' ? end + 1 : end;
            }
            break;
        }
        case 'k': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);

            if (*end != '\0' || v < 24 || v > 512) {
                fprintf(stderr, "master_bench: --key-bytes must be 24..512\n");
                return 2;
            }
            key_bytes = v;
            break;
        }
        case 's': {
            char *end;
            unsigned long long v = strtoull(optarg, &end, 10);

            if (*end != '\0' || v == 0 || v > (1ull << 30)) {
                fprintf(stderr, "master_bench: --size must be 1..1073741824\n");
                return 2;
            }
            obj_size = v;
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }

    printf("master_bench: one core, in-process; keys of %zu bytes, objects of %llu bytes; "
           "heap %s\n",
           key_bytes, (unsigned long long)obj_size,
           getenv("GLIBC_TUNABLES") != NULL ? "on transparent huge pages" : "on 4 KiB pages");
    printf("%10s %12s %12s %12s %12s %14s %14s %10s %10s\n", "objects", "put/s", "get/s",
           "exist/s", "remove/s", "ref insert/s", "ref find/s", "B/object", "meta B/obj");
    for (s = 0; s < nscales; s++) {
        rc = run_scale(&cfg, scales[s], key_bytes, obj_size, &res);
        if (rc != 0) {
            fprintf(stderr, "master_bench: %llu objects: %s\n",
                    (unsigned long long)scales[s], mc_strerror(rc));
            return 1;
        }
        printf("%10llu %12.0f %12.0f %12.0f %12.0f %14.0f %14.0f %10.1f %10.1f\n",
               (unsigned long long)res.objects, res.put, res.get, res.exist, res.remove,
               res.ref_insert, res.ref_find, res.bytes_per_object, res.meta_per_object);
        printf("%10s ratios vs hsearch_r: put/insert %.2f, get/find %.2f, exist/find %.2f\n",
               "", res.put / res.ref_insert, res.get / res.ref_find,
               res.exist / res.ref_find);
        fflush(stdout);
    }
    printf("{\"put_ops_per_s\":%.0f,\"get_ops_per_s\":%.0f,\"exist_ops_per_s\":%.0f,"
           "\"remove_ops_per_s\":%.0f,\"objects\":%llu,\"key_bytes\":%zu,"
           "\"bytes_per_object\":%.1f,\"bytes_per_object_excl_key\":%.1f,"
           "\"ref_insert_ops_per_s\":%.0f,\"ref_find_ops_per_s\":%.0f,"
           "\"put_vs_ref\":%.2f,\"get_vs_ref\":%.2f,\"exist_vs_ref\":%.2f}\n",
           res.put, res.get, res.exist, res.remove, (unsigned long long)res.objects, key_bytes,
           res.bytes_per_object, res.bytes_per_object - (double)key_bytes, res.ref_insert,
           res.ref_find, res.put / res.ref_insert, res.get / res.ref_find,
           res.exist / res.ref_find);
    return 0;
}
