/*
 * mc-gpu-bench: put and get bandwidth from and into device buffers against the device's
 * own copies of the same size in the same run (scripts/gpu-check.sh, docs/gpu.md).
 *
 *   MC_DEVICE=cuda|test mc-gpu-bench SOCKET [SIZE_MIB [ROUNDS]]
 *
 * Puts ROUNDS objects of SIZE from a device buffer (the agent copies device to host into
 * its segment), gets each back into a device buffer (checked in the segment, copied host to
 * device), and times a device-to-host plus a host-to-device copy of SIZE through the device
 * seam (cuMemcpyDtoHAsync / HtoDAsync, waited for: what cudaMemcpy does). Prints GB/s and
 * the ratios. Exit 77 when the device is not there.
 *
 * Before timing, a check of the paths an engine's memory takes, each byte verified through
 * the device's own copies: puts from and gets into a whole allocation (cuMemAlloc), a
 * sub-allocated pointer (base + offset, as engines' pools hand out), and VMM memory legacy
 * IPC cannot export (cuMemCreate + cuMemMap, as PyTorch's expandable segments): its puts
 * must be staged and counted (dev_staged_puts), in the DRAM tier and, when the agent has a
 * GPU segment (MC_BENCH_TIER_GPU=1), in the GPU tier. A failed check exits 1.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mc/mc.h>

#include "dev/dev.h"

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* this client's dev_staged_puts (mc_stats), or -1 */
static long long staged_puts(mc_client_t *c)
{
    static char buf[65536];
    const char *f;
    size_t len = 0;

    if (mc_stats(c, buf, sizeof(buf), &len) != 0)
        return -1;
    f = strstr(buf, "\"dev_staged_puts\": ");
    return f == NULL ? -1 : strtoll(f + strlen("\"dev_staged_puts\": "), NULL, 10);
}

/* put len bytes at device src (filled here), get them back into device dst, compare */
static int round_trip(mc_client_t *c, struct mc_dev_stream *s, const char *what, uint64_t src,
                      uint64_t dst, size_t len, uint32_t flags, uint8_t *host, uint8_t *back)
{
    mc_put_opts_t o = {.flags = flags};
    char key[96];
    size_t got = 0;
    int err;

    for (size_t i = 0; i < len; i++)
        host[i] = (uint8_t)(i * 29 + len + strlen(what));
    memset(back, 0, len);
    snprintf(key, sizeof(key), "gpu-check/%s/%zu/%u", what, len, flags);
    if (mc_dev_copy_htod(s, src, host, len) != 0 || mc_dev_stream_sync(s) != 0 ||
        mc_dev_copy_htod(s, dst, back, len) != 0 || mc_dev_stream_sync(s) != 0) {
        fprintf(stderr, "gpu-check: %s: device copy failed\n", what);
        return -1;
    }
    err = mc_put(c, key, (const void *)(uintptr_t)src, len, &o);
    if (err == 0)
        err = mc_get(c, key, (void *)(uintptr_t)dst, len, &got);
    if (err != 0 || got != len) {
        fprintf(stderr, "gpu-check: %s %zu bytes%s: %s\n", what, len,
                flags != 0 ? " (GPU tier)" : "", mc_strerror(err));
        return -1;
    }
    if (mc_dev_copy_dtoh(s, back, dst, len) != 0 || mc_dev_stream_sync(s) != 0 ||
        memcmp(host, back, len) != 0) {
        fprintf(stderr, "gpu-check: %s %zu bytes: the bytes got differ\n", what, len);
        return -1;
    }
    mc_remove(c, key);
    return 0;
}

static int check(mc_client_t *c, struct mc_dev *d, struct mc_dev_stream *s, uint64_t src,
                 uint64_t dst, size_t size)
{
    static const size_t lens[] = {1, 4000, (1u << 20) + 1};
    bool gpu_tier = getenv("MC_BENCH_TIER_GPU") != NULL;
    size_t max = lens[2] + 8192;
    uint8_t *host = malloc(max), *back = malloc(max);
    long long staged0 = staged_puts(c), staged;
    int n_vmm = 0, bad = 0;
    uint64_t vmm = 0;
    int err;

    if (host == NULL || back == NULL || size < 2 * max || staged0 < 0) {
        fprintf(stderr, "gpu-check: needs SIZE >= 3 MiB and dev_staged_puts in stats\n");
        return -1;
    }
    err = mc_dev_alloc_vmm(d, 2 * max, &vmm);
    if (err != 0)
        fprintf(stderr, "gpu-check: no VMM allocation here (%s): that path is not checked\n",
                mc_strerror(err));
    for (int t = 0; t < (gpu_tier ? 2 : 1); t++) {
        uint32_t fl = t == 1 ? MC_PUT_TIER_GPU : 0;

        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
            bad |= round_trip(c, s, "whole", src, dst, lens[i], fl, host, back);
            bad |= round_trip(c, s, "sub-allocated", src + 4096 * 3 + 17, dst + 8192 + 5,
                              lens[i], fl, host, back);
            if (vmm != 0) {
                bad |= round_trip(c, s, "vmm", vmm + 33, vmm + max + 7, lens[i], fl, host,
                                  back);
                n_vmm++;
            }
        }
    }
    staged = staged_puts(c);
    if (staged - staged0 != n_vmm) {
        fprintf(stderr, "gpu-check: %d VMM puts but dev_staged_puts went %lld -> %lld\n",
                n_vmm, staged0, staged);
        bad = -1;
    }
    printf("check: whole allocation, sub-allocated pointer%s, %s: %s (%d staged puts)\n",
           vmm != 0 ? ", VMM buffer" : " (no VMM)", gpu_tier ? "DRAM and GPU tiers" : "DRAM tier",
           bad == 0 ? "ok" : "FAILED", n_vmm);
    mc_dev_free(d, vmm);
    free(host);
    free(back);
    return bad;
}

int main(int argc, char **argv)
{
    const char *kname = getenv("MC_DEVICE");
    int kind = mc_dev_kind_parse(kname != NULL ? kname : "cuda");
    size_t size = (argc > 2 ? strtoull(argv[2], NULL, 10) : 16) << 20;
    int rounds = argc > 3 ? atoi(argv[3]) : 20;
    char why[MC_DEV_WHY_LEN] = "", key[64];
    struct mc_dev *d;
    struct mc_dev_stream *s;
    mc_client_t *c;
    uint64_t src, dst;
    uint8_t *host;
    double t0, t_put, t_get, t_d2h, t_h2d, t_hput, t_hget;
    size_t len;
    int err;

    if (argc < 2 || kind < 0 || size == 0 || rounds <= 0) {
        fprintf(stderr, "usage: MC_DEVICE=cuda|test %s SOCKET [SIZE_MIB [ROUNDS]]\n", argv[0]);
        return 2;
    }
    if (mc_dev_open((enum mc_dev_kind)kind, 0, NULL, &d, why, sizeof(why)) != 0) {
        fprintf(stderr, "mc-gpu-bench: %s\n", why);
        return 77;
    }
    setenv("MC_DEVICE", mc_dev_kind_name((enum mc_dev_kind)kind), 1); /* libmc's too */
    host = malloc(size);
    if (host == NULL || mc_dev_alloc(d, size, &src) != 0 || mc_dev_alloc(d, size, &dst) != 0 ||
        mc_dev_stream_create(d, &s) != 0) {
        fprintf(stderr, "mc-gpu-bench: no memory for two buffers of %zu bytes\n", size);
        return 1;
    }
    for (size_t i = 0; i < size; i++)
        host[i] = (uint8_t)(i * 131 + 7);
    if (mc_dev_copy_htod(s, src, host, size) != 0 || mc_dev_stream_sync(s) != 0)
        return 1;
    err = mc_connect(argv[1], &c);
    if (err != 0) {
        fprintf(stderr, "mc-gpu-bench: connect %s: %s\n", argv[1], mc_strerror(err));
        return 1;
    }
    if (check(c, d, s, src, dst, size) != 0)
        return 1;
    for (size_t i = 0; i < size; i++) /* the check used src: the pattern again */
        host[i] = (uint8_t)(i * 131 + 7);
    if (mc_dev_copy_htod(s, src, host, size) != 0 || mc_dev_stream_sync(s) != 0)
        return 1;

    t0 = now_s();
    for (int r = 0; r < rounds; r++) {
        snprintf(key, sizeof(key), "gpu-bench/%d", r);
        err = mc_put(c, key, (const void *)(uintptr_t)src, size, NULL);
        if (err != 0) {
            fprintf(stderr, "mc-gpu-bench: put: %s\n", mc_strerror(err));
            return 1;
        }
    }
    t_put = now_s() - t0;
    /* untimed: fault this client's view of the objects' segment pages in, as the host gets
     * below find them (they reuse the space); else the device gets alone pay first touch */
    for (int r = 0; r < rounds; r++) {
        snprintf(key, sizeof(key), "gpu-bench/%d", r);
        if (mc_get(c, key, host, size, &len) != 0)
            return 1;
    }
    t0 = now_s();
    for (int r = 0; r < rounds; r++) {
        snprintf(key, sizeof(key), "gpu-bench/%d", r);
        err = mc_get(c, key, (void *)(uintptr_t)dst, size, &len);
        if (err != 0 || len != size) {
            fprintf(stderr, "mc-gpu-bench: get: %s\n", mc_strerror(err));
            return 1;
        }
    }
    t_get = now_s() - t0;
    memset(host, 0, size);
    if (mc_dev_copy_dtoh(s, host, dst, size) != 0 || mc_dev_stream_sync(s) != 0)
        return 1;
    for (size_t i = 0; i < size; i++) {
        if (host[i] != (uint8_t)(i * 131 + 7)) {
            fprintf(stderr, "mc-gpu-bench: byte %zu differs after the round trip\n", i);
            return 1;
        }
    }
    t0 = now_s();
    for (int r = 0; r < rounds; r++) {
        if (mc_dev_copy_dtoh(s, host, src, size) != 0 || mc_dev_stream_sync(s) != 0)
            return 1;
    }
    t_d2h = now_s() - t0;
    t0 = now_s();
    for (int r = 0; r < rounds; r++) {
        if (mc_dev_copy_htod(s, dst, host, size) != 0 || mc_dev_stream_sync(s) != 0)
            return 1;
    }
    t_h2d = now_s() - t0;
    {
        uint64_t removed;

        mc_remove_prefix(c, "gpu-bench/", &removed);
    }
    /* the same from and into host memory, for the cost of the device path itself */
    t0 = now_s();
    for (int r = 0; r < rounds; r++) {
        snprintf(key, sizeof(key), "gpu-bench/%d", r);
        if (mc_put(c, key, host, size, NULL) != 0)
            return 1;
    }
    t_hput = now_s() - t0;
    t0 = now_s();
    for (int r = 0; r < rounds; r++) {
        snprintf(key, sizeof(key), "gpu-bench/%d", r);
        if (mc_get(c, key, host, size, &len) != 0)
            return 1;
    }
    t_hget = now_s() - t0;
    {
        uint64_t removed;

        mc_remove_prefix(c, "gpu-bench/", &removed);
    }
    {
        double gb = (double)size * rounds / 1e9;

        printf("device %s, %zu MiB x %d\n", mc_dev_kind_name((enum mc_dev_kind)kind),
               size >> 20, rounds);
        printf("put from device buffer: %.2f GB/s   device-to-host copy: %.2f GB/s   "
               "ratio %.2f\n", gb / t_put, gb / t_d2h, t_d2h / t_put);
        printf("get into device buffer: %.2f GB/s   host-to-device copy: %.2f GB/s   "
               "ratio %.2f\n", gb / t_get, gb / t_h2d, t_h2d / t_get);
        printf("host buffers, same run: put %.2f GB/s, get %.2f GB/s\n", gb / t_hput,
               gb / t_hget);
    }
    mc_close(c);
    mc_dev_stream_destroy(s);
    mc_dev_close(d);
    free(host);
    return 0;
}
