/*
 * memcpy-ref: the copy a local get cannot beat, measured in the same run as mc-bench.
 *
 * One thread copies 4 KiB and 16 MiB pieces, in order, out of a source working set larger
 * than the last-level cache (256 MiB by default) into a small destination reused over and
 * over (32 x 4 KiB for the 4 KiB copies, as a batch of 32 gets lands; one 16 MiB buffer for
 * 16 MiB), which is what mc-bench's gets do with the pool's bytes. The source is touched
 * before timing so that no page fault is counted. Prints one JSON line:
 *   {"working_set_mib":…,"threads":1,"copy_4k_gb_per_s":…,"copy_16m_gb_per_s":…}
 *
 * usage: memcpy-ref [--working-set MIB] [--seconds S]     (S per size, default 1)
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* GB/s copying `piece` bytes at a time from src (ws bytes) into dst (dst_len bytes). */
static double copy_rate(const unsigned char *src, size_t ws, unsigned char *dst, size_t dst_len,
                        size_t piece, double seconds)
{
    size_t s = 0, d = 0;
    uint64_t bytes = 0;
    double t0 = now_s(), el;

    do {
        int i;

        /* 16 copies between clock reads: the clock costs nothing next to them */
        for (i = 0; i < 16; i++) {
            memcpy(dst + d, src + s, piece);
            /* the compiler must not drop or merge copies it could prove unused */
            __asm__ __volatile__("" : : "r"(dst) : "memory");
            s += piece;
            if (s + piece > ws)
                s = 0;
            d += piece;
            if (d + piece > dst_len)
                d = 0;
            bytes += piece;
        }
        el = now_s() - t0;
    } while (el < seconds);
    return (double)bytes / 1e9 / el;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"working-set", required_argument, NULL, 'w'},
        {"seconds", required_argument, NULL, 't'},
        {NULL, 0, NULL, 0},
    };
    size_t ws_mib = 256, ws, dst_len = 16u << 20;
    double seconds = 1, r4k, r16m;
    unsigned char *src, *dst;
    int o;

    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'w':
            ws_mib = strtoul(optarg, NULL, 10);
            break;
        case 't':
            seconds = strtod(optarg, NULL);
            break;
        default:
            fprintf(stderr, "usage: memcpy-ref [--working-set MIB] [--seconds S]\n");
            return 2;
        }
    }
    if (ws_mib < 32 || ws_mib > (1u << 20) || !(seconds > 0 && seconds <= 600)) {
        fprintf(stderr, "memcpy-ref: --working-set is 32 MiB or more, --seconds in (0, 600]\n");
        return 2;
    }
    ws = ws_mib << 20;
    src = aligned_alloc(4096, ws);
    dst = aligned_alloc(4096, dst_len);
    if (src == NULL || dst == NULL) {
        fprintf(stderr, "memcpy-ref: no memory for %zu MiB\n", ws_mib);
        return 1;
    }
    memset(src, 0x5a, ws);
    memset(dst, 0xa5, dst_len);

    r4k = copy_rate(src, ws, dst, 32 * 4096, 4096, seconds);
    r16m = copy_rate(src, ws, dst, dst_len, 16u << 20, seconds);
    printf("{\"working_set_mib\":%zu,\"threads\":1,\"copy_4k_gb_per_s\":%.3f,"
           "\"copy_16m_gb_per_s\":%.3f}\n",
           ws_mib, r4k, r16m);
    free(dst);
    free(src);
    return 0;
}
