/*
 * The metrics table of mc-agent (agent_metrics.h).
 */
#include "daemon/agent/agent_metrics.h"

#include <stddef.h>

const struct mc_metric_def mc_agent_metrics_table[] = {
#define MC_AGENT_METRIC_ROW(id, n, t, l, h, w, s)                                              \
    [AM_##id] = {.name = n, .type = MC_METRIC_##t, .labels = l, .help = h, .when = w, .stats = s},
    MC_AGENT_METRICS(MC_AGENT_METRIC_ROW)
#undef MC_AGENT_METRIC_ROW
    [AM__COUNT] = {.name = NULL},
};
