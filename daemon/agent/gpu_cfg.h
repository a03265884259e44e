/*
 * The `gpu` setting of mc-agent ("DEV:SIZE[,DEV:SIZE]...", what --gpu adds to): its parser.
 * Pure: config validation and docgen use it without any device.
 */
#ifndef MC_AGENT_GPU_CFG_H
#define MC_AGENT_GPU_CFG_H

#include <stddef.h>
#include <stdint.h>

#define MC_AGENT_GPU_MAX 16 /* GPU segments one agent may have */

struct mc_gpu_spec {
    int kind;        /* enum mc_dev_kind */
    int ordinal;
    uint64_t size;
};

/*
 * Parse the `gpu` setting: comma-separated DEV:SIZE, DEV one of "test" (the test device,
 * for tests), "cuda" (device 0) or "cudaN"; SIZE as the config's sizes (at least 1 MiB).
 * NULL or "" is no GPU segment. specs: room for MC_AGENT_GPU_MAX. n_p: how many.
 * Returns 0, or MC_ERR_INVALID with the reason in err.
 */
int mc_gpu_spec_parse(const char *s, struct mc_gpu_spec specs[], size_t *n_p, char *err,
                      size_t errlen);

#endif /* MC_AGENT_GPU_CFG_H */
