/*
 * The metrics table of mc-master (mcmaster_metrics.h).
 */
#include "daemon/mcmaster/mcmaster_metrics.h"

#include <stddef.h>

const struct mc_metric_def mc_mcmaster_metrics_table[] = {
#define MC_MCMASTER_METRIC_ROW(id, n, t, l, h, w, s)                                           \
    [MM_##id] = {.name = n, .type = MC_METRIC_##t, .labels = l, .help = h, .when = w, .stats = s},
    MC_MCMASTER_METRICS(MC_MCMASTER_METRIC_ROW)
#undef MC_MCMASTER_METRIC_ROW
    [MM__COUNT] = {.name = NULL},
};
