/*
 * The metrics and health pages of a daemon (metrics.h): the snapshot the loop publishes,
 * the Prometheus text format 0.0.4, and the libmicrohttpd server on its own thread.
 */
#include "daemon/common/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include <mc/mc_status.h>

#include "daemon/common/bootstrap.h"
#include "daemon/common/log.h"

/* Bounds of what one scrape may cost: the page is built in at most this many bytes (a
 * table ten times today's size fits), requests get this much memory each (a longer URL or
 * header is refused by the server with 414/431), at most this many connections at once,
 * each dropped after this many idle seconds. */
#define MC_METRICS_PAGE_MAX    (256u << 10)
#define MC_METRICS_REQ_MEM     (16u << 10)
#define MC_METRICS_CONN_MAX    64u
#define MC_METRICS_CONN_IDLE_S 10u

const uint64_t mc_histo_bounds_ns[MC_HISTO_BUCKETS] = {
    1000,      2500,      5000,      10000,     25000,     50000,     100000,
    250000,    500000,    1000000,   2500000,   5000000,   10000000,  25000000,
    50000000,  100000000, 250000000, 500000000, 1000000000,
};
const char *const mc_histo_bounds_text[MC_HISTO_BUCKETS] = {
    "1e-06", "2.5e-06", "5e-06", "1e-05", "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005",
    "0.001", "0.0025",  "0.005", "0.01",  "0.025",   "0.05",  "0.1",    "0.25",    "0.5",
    "1",
};

struct mc_metrics {
    const struct mc_metric_def *defs;
    size_t n;
    pthread_mutex_t lock; /* vals, present */
    uint64_t *vals;
    uint8_t *present;
    struct mc_histo *histos; /* one per table entry: simple indexing, a few KiB */
    _Atomic(const char *) health;
    atomic_bool ready;
    struct MHD_Daemon *mhd;
};

/* --- the table ---------------------------------------------------------------------------- */

static bool name_ok(const char *s)
{
    size_t i;

    if (s == NULL || s[0] == '\0' || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (i = 0; s[i] != '\0'; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == ':'))
            return false;
    }
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);

    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int mc_metrics_table_check(const struct mc_metric_def *defs, char *err, size_t errlen)
{
    size_t i, j;

    for (i = 0; defs[i].name != NULL; i++) {
        const struct mc_metric_def *d = &defs[i];

        if (!name_ok(d->name) || d->help == NULL || d->help[0] == '\0' ||
            strpbrk(d->help, "\n\\") != NULL) {
            snprintf(err, errlen, "entry %zu (%s): bad name or help", i, d->name);
            return MC_ERR_INVALID;
        }
        if ((d->type == MC_METRIC_COUNTER) != ends_with(d->name, "_total") ||
            (d->type == MC_METRIC_HISTOGRAM && !ends_with(d->name, "_seconds"))) {
            snprintf(err, errlen, "%s: counters, and only they, end in _total; histograms "
                                  "in _seconds", d->name);
            return MC_ERR_INVALID;
        }
        if (i > 0 && strcmp(defs[i - 1].name, d->name) == 0) {
            if (defs[i - 1].type != d->type) {
                snprintf(err, errlen, "%s: one family, two types", d->name);
                return MC_ERR_INVALID;
            }
            continue;
        }
        for (j = 0; j + 1 < i; j++) {
            if (strcmp(defs[j].name, d->name) == 0) {
                snprintf(err, errlen, "%s: its family's entries are not consecutive", d->name);
                return MC_ERR_INVALID;
            }
        }
    }
    return 0;
}

/* --- the page ----------------------------------------------------------------------------- */

struct out {
    char *p;
    size_t len, cap;
    bool full;
};

static void out_put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void out_put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (o->full)
        return;
    va_start(ap, fmt);
    n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= o->cap - o->len) {
        o->full = true;
        return;
    }
    o->len += (size_t)n;
}

static const char *type_name(enum mc_metric_type t)
{
    return t == MC_METRIC_COUNTER ? "counter" : t == MC_METRIC_GAUGE ? "gauge" : "histogram";
}

static void render_histo(struct out *o, const struct mc_metric_def *d, const struct mc_histo *h)
{
    const char *lab = d->labels != NULL ? d->labels : "";
    const char *sep = d->labels != NULL ? "," : "";
    uint64_t cum = 0, sum_ns;
    unsigned b;

    for (b = 0; b <= MC_HISTO_BUCKETS; b++) {
        cum += atomic_load_explicit(&h->bucket[b], memory_order_relaxed);
        out_put(o, "%s_bucket{%s%sle=\"%s\"} %llu\n", d->name, lab, sep,
            b < MC_HISTO_BUCKETS ? mc_histo_bounds_text[b] : "+Inf", (unsigned long long)cum);
    }
    sum_ns = atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
    /* _count is the +Inf bucket by construction, so a scrape never shows them apart */
    if (d->labels != NULL) {
        out_put(o, "%s_sum{%s} %llu.%09llu\n", d->name, lab, (unsigned long long)(sum_ns / 1000000000u),
            (unsigned long long)(sum_ns % 1000000000u));
        out_put(o, "%s_count{%s} %llu\n", d->name, lab, (unsigned long long)cum);
    } else {
        out_put(o, "%s_sum %llu.%09llu\n", d->name, (unsigned long long)(sum_ns / 1000000000u),
            (unsigned long long)(sum_ns % 1000000000u));
        out_put(o, "%s_count %llu\n", d->name, (unsigned long long)cum);
    }
}

size_t mc_metrics_render(struct mc_metrics *m, char *buf, size_t cap)
{
    struct out o = {.p = buf, .cap = cap};
    uint64_t *vals;
    uint8_t *present;
    size_t i, j;

    if (cap == 0)
        return 0;
    vals = malloc(m->n * sizeof(*vals) + m->n);
    if (vals == NULL)
        return 0;
    present = (uint8_t *)(vals + m->n);
    pthread_mutex_lock(&m->lock);
    memcpy(vals, m->vals, m->n * sizeof(*vals));
    memcpy(present, m->present, m->n);
    pthread_mutex_unlock(&m->lock);

    for (i = 0; i < m->n; i = j) {
        const struct mc_metric_def *d = &m->defs[i];
        bool any = false;

        for (j = i; j < m->n && strcmp(m->defs[j].name, d->name) == 0; j++)
            any |= d->type == MC_METRIC_HISTOGRAM || present[j] != 0;
        if (!any)
            continue; /* no sample of this family in this mode: no HELP, no TYPE */
        out_put(&o, "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help, d->name, type_name(d->type));
        for (size_t k = i; k < j; k++) {
            const struct mc_metric_def *e = &m->defs[k];

            if (e->type == MC_METRIC_HISTOGRAM)
                render_histo(&o, e, &m->histos[k]);
            else if (present[k] && e->labels != NULL)
                out_put(&o, "%s{%s} %llu\n", e->name, e->labels, (unsigned long long)vals[k]);
            else if (present[k])
                out_put(&o, "%s %llu\n", e->name, (unsigned long long)vals[k]);
        }
    }
    free(vals);
    if (o.full)
        return 0;
    return o.len;
}

/* --- the server --------------------------------------------------------------------------- */

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned code, const char *type,
                              void *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    enum MHD_Result ret;

    if (r == NULL) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO; /* out of memory: the connection is closed */
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET");
    ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result answer_text(struct MHD_Connection *conn, unsigned code,
                                   const char *text)
{
    return answer(conn, code, "text/plain; charset=utf-8", (void *)text, strlen(text),
                  MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct mc_metrics *m = cls;
    const char *reason;
    char *page, line[160];
    size_t n;

    (void)version;
    (void)upload_data;
    (void)con_cls;
    /* answered at the first call, before any body: a body sent anyway is read and
     * dropped by the server, within its memory limit */
    *upload_data_size = 0;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0)
        return answer_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    if (strcmp(url, "/metrics") == 0) {
        page = malloc(MC_METRICS_PAGE_MAX);
        if (page == NULL)
            return answer_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
        n = mc_metrics_render(m, page, MC_METRICS_PAGE_MAX);
        if (n == 0) {
            free(page);
            return answer_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "page too large\n");
        }
        return answer(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", page, n,
                      MHD_RESPMEM_MUST_FREE);
    }
    if (strcmp(url, "/health") == 0) {
        reason = atomic_load_explicit(&m->health, memory_order_acquire);
        if (reason == NULL)
            return answer_text(conn, MHD_HTTP_OK, "ok\n");
        snprintf(line, sizeof(line), "%s\n", reason);
        page = strdup(line);
        if (page == NULL)
            return answer_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
        return answer(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", page,
                      strlen(page), MHD_RESPMEM_MUST_FREE);
    }
    if (strcmp(url, "/ready") == 0) {
        if (atomic_load_explicit(&m->ready, memory_order_acquire))
            return answer_text(conn, MHD_HTTP_OK, "ready\n");
        return answer_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "not ready\n");
    }
    return answer_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
}

int mc_metrics_create(const struct mc_metric_def *defs, const char *listen,
                      struct mc_metrics **m_p, uint16_t *port_p)
{
    struct mc_metrics *m;
    char err[256];
    uint16_t port = 0;
    int fd = -1, rc;
    size_t n;

    if (mc_metrics_table_check(defs, err, sizeof(err)) != 0) {
        mc_error("metrics table: %s", err);
        return MC_ERR_INVALID;
    }
    for (n = 0; defs[n].name != NULL; n++)
        ;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return MC_ERR_NOMEM;
    m->defs = defs;
    m->n = n;
    m->vals = calloc(n, sizeof(*m->vals));
    m->present = calloc(n, 1);
    m->histos = calloc(n, sizeof(*m->histos));
    if (m->vals == NULL || m->present == NULL || m->histos == NULL) {
        rc = MC_ERR_NOMEM;
        goto err_free;
    }
    pthread_mutex_init(&m->lock, NULL);
    atomic_init(&m->health, "starting");
    atomic_init(&m->ready, false);
    if (listen != NULL) {
        rc = mc_boot_listen(listen, 64, &fd, &port); /* logs why it failed */
        if (rc != 0)
            goto err_mutex;
        /* poll(), not select(): no FD_SETSIZE ceiling on the daemon's descriptors */
        m->mhd = MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD, 0, NULL, NULL, on_request, m,
                                  MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
                                  (unsigned)MC_METRICS_CONN_MAX, MHD_OPTION_CONNECTION_TIMEOUT,
                                  (unsigned)MC_METRICS_CONN_IDLE_S,
                                  MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                  (size_t)MC_METRICS_REQ_MEM, MHD_OPTION_END);
        if (m->mhd == NULL) {
            mc_error("metrics: cannot start the HTTP server on %s", listen);
            close(fd);
            rc = MC_ERR_IO;
            goto err_mutex;
        }
    }
    if (listen != NULL) {
        char host[256];
        const char *ignored;

        if (mc_boot_split(listen, host, sizeof(host), &ignored) != 0)
            snprintf(host, sizeof(host), "?");
        mc_info(strchr(host, ':') != NULL ? "metrics on [%s]:%u" : "metrics on %s:%u", host,
                (unsigned)port);
    }
    *m_p = m;
    if (port_p != NULL)
        *port_p = port;
    return 0;

err_mutex:
    pthread_mutex_destroy(&m->lock);
err_free:
    free(m->vals);
    free(m->present);
    free(m->histos);
    free(m);
    return rc;
}

void mc_metrics_destroy(struct mc_metrics *m)
{
    if (m == NULL)
        return;
    if (m->mhd != NULL)
        MHD_stop_daemon(m->mhd); /* joins its thread and closes the listening socket */
    pthread_mutex_destroy(&m->lock);
    free(m->vals);
    free(m->present);
    free(m->histos);
    free(m);
}

size_t mc_metrics_count(const struct mc_metrics *m)
{
    return m->n;
}

struct mc_histo *mc_metrics_histo(struct mc_metrics *m, size_t idx)
{
    return &m->histos[idx];
}

void mc_metrics_publish(struct mc_metrics *m, const uint64_t *vals, const uint8_t *present)
{
    pthread_mutex_lock(&m->lock);
    memcpy(m->vals, vals, m->n * sizeof(*vals));
    memcpy(m->present, present, m->n);
    pthread_mutex_unlock(&m->lock);
}

void mc_metrics_set_health(struct mc_metrics *m, const char *reason)
{
    atomic_store_explicit(&m->health, reason, memory_order_release);
}

void mc_metrics_set_ready(struct mc_metrics *m, bool ready)
{
    atomic_store_explicit(&m->ready, ready, memory_order_release);
}
