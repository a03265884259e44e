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
 */
#include <inttypes.h>
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
