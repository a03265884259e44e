/*
 * The `gpu` setting (gpu_cfg.h).
 */
#include "daemon/agent/gpu_cfg.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/common/config.h"
#include "dev/dev.h"

/* SIZE in the config's syntax, through a table of one entry: one parser for sizes */
static const struct mc_config_entry size_table[] = {
    {.name = "size", .type = MC_CFG_SIZE, .def = "1M", .min = 1 << 20, .max = 1ull << 44,
     .offset = 0, .doc = "a GPU segment's bytes"},
    {.name = NULL},
};

int mc_gpu_spec_parse(const char *s, struct mc_gpu_spec specs[], size_t *n_p, char *err,
                      size_t errlen)
{
    size_t n = 0;
    char *copy, *save = NULL, *item;
    int rc = 0;

    *n_p = 0;
    if (s == NULL || s[0] == '\0')
        return 0;
    copy = strdup(s);
    if (copy == NULL)
        return MC_ERR_NOMEM;
    for (item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        struct mc_gpu_spec sp = {0};
        char cfg_err[160];

        if (n == MC_AGENT_GPU_MAX) {
            snprintf(err, errlen, "gpu: at most %d GPU segments", MC_AGENT_GPU_MAX);
            rc = MC_ERR_INVALID;
            break;
        }
        if (colon == NULL) {
            snprintf(err, errlen, "gpu: \"%s\": expected DEV:SIZE (test:64M, cuda0:8G)", item);
            rc = MC_ERR_INVALID;
            break;
        }
        *colon = '\0';
        if (strcmp(item, "test") == 0) {
            sp.kind = MC_DEV_TEST;
        } else if (strncmp(item, "cuda", 4) == 0) {
            const char *d = item + 4;
            char *end;
            unsigned long v = 0;

            sp.kind = MC_DEV_CUDA;
            if (*d != '\0') {
                errno = 0;
                v = isdigit((unsigned char)*d) ? strtoul(d, &end, 10) : 0;
                if (!isdigit((unsigned char)*d) || *end != '\0' || errno != 0 || v > 255) {
                    snprintf(err, errlen, "gpu: \"%s\": device ordinal 0..255 expected",
                             item);
                    rc = MC_ERR_INVALID;
                    break;
                }
            }
            sp.ordinal = (int)v;
        } else {
            snprintf(err, errlen, "gpu: \"%s\": the device is test, cuda or cudaN", item);
            rc = MC_ERR_INVALID;
            break;
        }
        if (mc_config_set(size_table, &sp.size, "size", colon + 1, cfg_err,
                          sizeof(cfg_err)) != 0) {
            snprintf(err, errlen, "gpu: %s:%s: %s", item, colon + 1, cfg_err);
            rc = MC_ERR_INVALID;
            break;
        }
        for (size_t i = 0; i < n; i++) {
            if (specs[i].kind == sp.kind && specs[i].ordinal == sp.ordinal) {
                snprintf(err, errlen, "gpu: device %s%d named twice", item, sp.ordinal);
                rc = MC_ERR_INVALID;
                break;
            }
        }
        if (rc != 0)
            break;
        specs[n++] = sp;
    }
    free(copy);
    if (rc == 0)
        *n_p = n;
    return rc;
}
