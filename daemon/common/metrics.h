/*
 * mc_metrics: a daemon's metrics and health over HTTP (GET /metrics, /health, /ready).
 *
 * A daemon describes every metric once, in a table of struct mc_metric_def (name, type,
 * labels, help); the same table drives the Prometheus page and docs/metrics.md
 * (mc-metrics-doc). It is not a registry of globals: each daemon owns one mc_metrics.
 *
 * Threads. The HTTP server (libmicrohttpd) runs on its own thread and never touches the
 * daemon's data structures. The daemon's loop hands it figures three ways:
 *   - counters and gauges: the loop fills an array (one uint64_t per table entry, plus a
 *     presence byte) and calls mc_metrics_publish, which copies it under a mutex; the
 *     HTTP thread renders from its own copy, taken under the same mutex;
 *   - histograms: arrays of atomic counters the loop bumps (mc_histo_observe: relaxed
 *     stores, one writer) and the HTTP thread loads;
 *   - health and readiness: an atomic pointer to a static reason string, an atomic flag.
 * Every answer is built in a buffer of bounded size; a request is never blocked on the
 * loop, so a stalled loop shows stale figures, not a hung scrape.
 *
 * Requests are hostile: only GET is served (405 otherwise), unknown paths are 404, request
 * memory and connections are bounded, and no page carries a key name or a token.
 */
#ifndef MC_COMMON_METRICS_H
#define MC_COMMON_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum mc_metric_type { MC_METRIC_COUNTER, MC_METRIC_GAUGE, MC_METRIC_HISTOGRAM };

/*
 * One sample (counters, gauges) or one histogram. A table is an array of these ended by
 * an entry whose name is NULL. Entries of one family (same name, different labels) are
 * consecutive; the first one's help is the family's.
 *
 * name   the full name, [a-zA-Z_:][a-zA-Z0-9_:]*; counters end in _total, histograms
 *        measure seconds and end in _seconds
 * labels constant labels of this sample, e.g. `tier="dram"`, or NULL
 * help   one line (no newline, no backslash)
 * when   for the docs: when the sample is present ("cluster mode"), NULL: always
 * stats  for the docs: the `mcctl stats` field it mirrors, or NULL
 */
struct mc_metric_def {
    const char *name;
    enum mc_metric_type type;
    const char *labels;
    const char *help;
    const char *when;
    const char *stats;
};

/* Histogram bucket upper bounds: 1 µs to 1 s, 1-2.5-5 per decade, then +Inf. */
#define MC_HISTO_BUCKETS 19
extern const uint64_t mc_histo_bounds_ns[MC_HISTO_BUCKETS];
extern const char *const mc_histo_bounds_text[MC_HISTO_BUCKETS];

struct mc_histo {
    _Atomic uint64_t bucket[MC_HISTO_BUCKETS + 1]; /* not cumulative; the last is +Inf */
    _Atomic uint64_t sum_ns;
};

/*
 * Count one observation of ns nanoseconds. One writer per histogram (the daemon's loop):
 * plain relaxed load and store, no read-modify-write, so it costs the hot path a compare
 * chain and two stores. Readers may see the count and the sum of one observation apart.
 */
static inline void mc_histo_observe(struct mc_histo *h, uint64_t ns)
{
    unsigned i = 0;

    while (i < MC_HISTO_BUCKETS && ns > mc_histo_bounds_ns[i])
        i++;
    atomic_store_explicit(&h->bucket[i],
                          atomic_load_explicit(&h->bucket[i], memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&h->sum_ns,
                          atomic_load_explicit(&h->sum_ns, memory_order_relaxed) + ns,
                          memory_order_relaxed);
}

struct mc_metrics;

/* Checks a table: names well formed, counters end in _total, families consecutive, help
 * present. Returns 0 or MC_ERR_INVALID with a message in err. */
int mc_metrics_table_check(const struct mc_metric_def *defs, char *err, size_t errlen);

/*
 * Creates the metrics of a table (which must outlive them) and, when listen is not NULL,
 * serves them on HOST:PORT (port 0: any free one; *port_p gets the port bound, and the log
 * says "metrics on HOST:PORT" with it). Start it after the daemon blocked its signals: the HTTP thread inherits the
 * mask. Health starts as 503 "starting", readiness as 503. Errors: MC_ERR_INVALID (table,
 * address), MC_ERR_IO (bind, thread), MC_ERR_NOMEM; the reason is logged.
 */
int mc_metrics_create(const struct mc_metric_def *defs, const char *listen,
                      struct mc_metrics **m_p, uint16_t *port_p);
/* Stops the HTTP thread (waits for it), then frees. Accepts NULL. */
void mc_metrics_destroy(struct mc_metrics *m);

/* Entries in the table (the length of the arrays mc_metrics_publish takes). */
size_t mc_metrics_count(const struct mc_metrics *m);
/* The histogram of table entry idx (an MC_METRIC_HISTOGRAM), for the loop to observe. */
struct mc_histo *mc_metrics_histo(struct mc_metrics *m, size_t idx);

/* The loop's figures: vals[i] for entry i, shown when present[i] != 0 (histogram entries
 * are ignored). Copied under the snapshot mutex; the HTTP thread holds it only to copy. */
void mc_metrics_publish(struct mc_metrics *m, const uint64_t *vals, const uint8_t *present);
/* NULL: healthy (200 "ok"); else 503 with this one-line reason, a string literal. */
void mc_metrics_set_health(struct mc_metrics *m, const char *reason);
void mc_metrics_set_ready(struct mc_metrics *m, bool ready);

/* The /metrics page from the last published figures into buf (at most cap bytes, NUL
 * ended): returns its length, or 0 when it did not fit. For tests and the HTTP thread. */
size_t mc_metrics_render(struct mc_metrics *m, char *buf, size_t cap);

#endif /* MC_COMMON_METRICS_H */
