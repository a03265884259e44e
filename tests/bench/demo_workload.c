/*
 * demo_workload: what `scripts/launch.sh demo` runs against a local agent. An engine-like
 * pattern: store the KV blocks of a few "prompts" (4 KiB to 1 MiB blocks), then look the
 * prompts up again as later requests would (prefix hits), plus some prompts never stored
 * (misses), verifying every byte read. Prints a hit/miss summary and rates.
 *
 * usage: demo_workload [--socket PATH] [--prompts N] [--blocks N] [--block-size BYTES]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mc/mc.h>

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Each block's bytes: a fixed pattern (made once) stamped with the block's id at both ends,
 * so a wrong or torn block is caught without costing the timed loop a pass over it. */
static void pattern(unsigned char *b, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        b[i] = (unsigned char)(i * 7u + (i >> 9));
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    memcpy(b, &seed, n < sizeof(seed) ? n : sizeof(seed));
    if (n >= 2 * sizeof(seed))
        memcpy(b + n - sizeof(seed), &seed, sizeof(seed));
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"prompts", required_argument, NULL, 'p'},
        {"blocks", required_argument, NULL, 'b'},
        {"block-size", required_argument, NULL, 'z'},
        {NULL, 0, NULL, 0},
    };
    const char *sock = NULL;
    unsigned prompts = 16, blocks = 32, p, b;
    size_t bsz = 64 * 1024, len;
    unsigned long hits = 0, misses = 0, bad = 0, stored = 0, exists = 0;
    unsigned char *buf, *want;
    mc_client_t *c;
    char key[128];
    double t0, t_put, t_get;
    int o, err;

    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's':
            sock = optarg;
            break;
        case 'p':
            prompts = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'b':
            blocks = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'z':
            bsz = strtoul(optarg, NULL, 10);
            break;
        default:
            fprintf(stderr, "usage: demo_workload [--socket PATH] [--prompts N] [--blocks N] "
                            "[--block-size BYTES]\n");
            return 2;
        }
    }
    if (prompts == 0 || blocks == 0 || bsz == 0 || bsz > (64u << 20)) {
        fprintf(stderr, "demo_workload: counts must be > 0 and block size <= 64 MiB\n");
        return 2;
    }
    err = mc_connect(sock, &c);
    if (err != 0) {
        fprintf(stderr, "demo_workload: connect: %s\n", mc_strerror(err));
        return 1;
    }
    buf = malloc(bsz);
    want = malloc(bsz);
    if (buf == NULL || want == NULL)
        return 1;
    pattern(want, bsz);

    /* prefill: every prompt's blocks, as the engine that prefilled them would */
    t0 = now_s();
    for (p = 0; p < prompts; p++) {
        for (b = 0; b < blocks; b++) {
            snprintf(key, sizeof(key), "demo/model-7b/bs%zu/prompt%04u/block%04u", bsz, p, b);
            fill(want, bsz, p * 10007u + b);
            err = mc_put(c, key, want, bsz, NULL);
            if (err == 0)
                stored++;
            else if (err == MC_ERR_EXISTS)
                exists++;
            else
                fprintf(stderr, "put %s: %s\n", key, mc_strerror(err));
        }
    }
    t_put = now_s() - t0;

    /* later requests: the stored prompts again, and as many never seen */
    t0 = now_s();
    for (p = 0; p < 2 * prompts; p++) {
        for (b = 0; b < blocks; b++) {
            snprintf(key, sizeof(key), "demo/model-7b/bs%zu/prompt%04u/block%04u", bsz, p, b);
            err = mc_get(c, key, buf, bsz, &len);
            if (err == 0) {
                fill(want, bsz, p * 10007u + b);
                if (len != bsz || memcmp(buf, want, bsz) != 0)
                    bad++;
                else
                    hits++;
            } else if (err == MC_ERR_NOT_FOUND) {
                misses++;
            } else {
                fprintf(stderr, "get %s: %s\n", key, mc_strerror(err));
                bad++;
            }
        }
    }
    t_get = now_s() - t0;

    printf("demo: %u prompts x %u blocks of %zu bytes\n", prompts, blocks, bsz);
    printf("  put: %lu stored, %lu already there, %.0f puts/s, %.2f GB/s\n", stored, exists,
           (double)(prompts * blocks) / t_put, (double)(prompts * blocks) * (double)bsz / t_put / 1e9);
    printf("  get: %lu hits, %lu misses, %lu wrong, %.0f gets/s, %.2f GB/s of hits\n", hits,
           misses, bad, (double)(2 * prompts * blocks) / t_get,
           (double)hits * (double)bsz / t_get / 1e9);
    mc_close(c);
    free(buf);
    free(want);
    return bad == 0 ? 0 : 1;
}
