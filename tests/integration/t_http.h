/*
 * Test helpers for the daemons' metrics pages: a plain-socket HTTP/1.1 client, the port
 * from a daemon's log ("metrics on HOST:PORT"), and a strict parser of the Prometheus text
 * format 0.0.4 that fails on anything the format does not allow.
 *
 * Header-only (static inline). Not thread-safe.
 */
#ifndef MC_T_HTTP_H
#define MC_T_HTTP_H

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A TCP socket connected (or, nonblocking, connecting) to 127.0.0.1:port, or -1. */
static inline int t_http_connect_flags(unsigned port, int flags)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline int t_http_connect(unsigned port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Send req (raw bytes) and read the whole answer (the server closes: Connection: close is
 * asked) into buf (NUL-ended). Returns the status code, 0 when the server closed without
 * a status line, -1 on a socket error or a 10 s timeout. *body_p points into buf. */
static inline int t_http_raw(unsigned port, const char *req, size_t req_len, char *buf,
                             size_t cap, const char **body_p)
{
    size_t got = 0, off = 0;
    int fd = t_http_connect(port), code = 0;

    if (fd < 0)
        return -1;
    while (off < req_len) {
        ssize_t n = send(fd, req + off, req_len - off, MSG_NOSIGNAL);

        if (n <= 0)
            break; /* the server may close on an oversized request: read what it said */
        off += (size_t)n;
    }
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&pfd, 1, 10000) <= 0) {
            close(fd);
            return -1;
        }
        if (got + 1 >= cap)
            break;
        n = recv(fd, buf + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1)
        code = 0;
    if (body_p != NULL) {
        char *b = strstr(buf, "\r\n\r\n");

        *body_p = b != NULL ? b + 4 : buf + got;
    }
    return code;
}

static inline int t_http(unsigned port, const char *method, const char *path, char *buf,
                         size_t cap, const char **body_p)
{
    char req[1024];
    int n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", method,
                     path);

    return t_http_raw(port, req, (size_t)n, buf, cap, body_p);
}

/* The port of "metrics on HOST:PORT" in a daemon's log, or 0. */
static inline unsigned t_metrics_port(const char *log)
{
    FILE *f = fopen(log, "r");
    char line[1024];
    unsigned port = 0;

    if (f == NULL)
        return 0;
    while (port == 0 && fgets(line, sizeof(line), f) != NULL) {
        char *p = strstr(line, "metrics on ");
        char *colon;

        if (p != NULL && (colon = strrchr(p, ':')) != NULL)
            port = (unsigned)strtoul(colon + 1, NULL, 10);
    }
    fclose(f);
    return port;
}

/* --- the strict parser --------------------------------------------------------------------- */

#define T_PROM_MAX 1024

struct t_prom_sample {
    char name[128];
    char labels[256]; /* as written between the braces, "" when none */
    double value;
};
struct t_prom_family {
    char name[128];
    char type[16];
    bool help;
};
struct t_prom {
    struct t_prom_sample s[T_PROM_MAX];
    size_t ns;
    struct t_prom_family f[T_PROM_MAX];
    size_t nf;
    char err[512];
};

static inline bool t_prom_name_ok(const char *s, size_t n)
{
    size_t i;

    if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == ':'))
            return false;
    }
    return true;
}

static inline struct t_prom_family *t_prom_family(struct t_prom *p, const char *name)
{
    for (size_t i = 0; i < p->nf; i++) {
        if (strcmp(p->f[i].name, name) == 0)
            return &p->f[i];
    }
    return NULL;
}

/* The family a sample belongs to: its own name, or a histogram's without the suffix. */
static inline struct t_prom_family *t_prom_family_of(struct t_prom *p, const char *name)
{
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    struct t_prom_family *f;
    char base[128];

    for (size_t k = 0; k < 3; k++) {
        size_t n = strlen(name), m = strlen(sfx[k]);

        if (n > m && strcmp(name + n - m, sfx[k]) == 0 && n - m < sizeof(base)) {
            memcpy(base, name, n - m);
            base[n - m] = '\0';
            f = t_prom_family(p, base);
            if (f != NULL && strcmp(f->type, "histogram") == 0)
                return f;
        }
    }
    f = t_prom_family(p, name);
    return f != NULL && strcmp(f->type, "histogram") != 0 ? f : NULL;
}

/* labels: k="v"(,k="v")* with k a name and v without quotes, backslashes or newlines. */
static inline bool t_prom_labels_ok(const char *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        size_t k = i;

        while (k < n && s[k] != '=')
            k++;
        if (k == n || !t_prom_name_ok(s + i, k - i) || k + 1 >= n || s[k + 1] != '"')
            return false;
        k += 2;
        while (k < n && s[k] != '"') {
            if (s[k] == '\\' || s[k] == '\n')
                return false;
            k++;
        }
        if (k == n)
            return false;
        k++;
        if (k < n && s[k] != ',')
            return false;
        i = k < n ? k + 1 : k;
    }
    return true;
}

/* Parses text; false with p->err set on the first violation. Also checks histograms:
 * buckets with increasing le, cumulative counts, ending with +Inf equal to _count. */
static inline bool t_prom_parse(const char *text, struct t_prom *p)
{
    const char *line = text;
    char hist_group[400] = "";
    double last_le = -1, last_cum = -1;
    bool in_hist = false;
    unsigned lineno = 0;

    p->ns = p->nf = 0;
    p->err[0] = '\0';
    if (*text == '\0') {
        snprintf(p->err, sizeof(p->err), "empty page");
        return false;
    }
    while (*line != '\0') {
        const char *end = strchr(line, '\n');
        size_t len;

        lineno++;
        if (end == NULL) {
            snprintf(p->err, sizeof(p->err), "line %u: no final newline", lineno);
            return false;
        }
        len = (size_t)(end - line);
        if (len > 0 && line[0] == '#') {
            char kw[8], name[128], rest[256];
            struct t_prom_family *f;
            int n = 0;

            if (sscanf(line, "# %7s %127s %n", kw, name, &n) != 2 || n == 0 ||
                (size_t)n > len || !t_prom_name_ok(name, strlen(name))) {
                snprintf(p->err, sizeof(p->err), "line %u: bad comment", lineno);
                return false;
            }
            snprintf(rest, sizeof(rest), "%.*s", (int)(len - (size_t)n), line + n);
            f = t_prom_family(p, name);
            if (f == NULL) {
                if (p->nf == T_PROM_MAX)
                    return false;
                f = &p->f[p->nf++];
                memset(f, 0, sizeof(*f));
                snprintf(f->name, sizeof(f->name), "%s", name);
            }
            if (strcmp(kw, "HELP") == 0) {
                if (f->help || rest[0] == '\0') {
                    snprintf(p->err, sizeof(p->err), "line %u: HELP twice or empty", lineno);
                    return false;
                }
                f->help = true;
            } else if (strcmp(kw, "TYPE") == 0) {
                if (f->type[0] != '\0' ||
                    (strcmp(rest, "counter") != 0 && strcmp(rest, "gauge") != 0 &&
                     strcmp(rest, "histogram") != 0)) {
                    snprintf(p->err, sizeof(p->err), "line %u: TYPE twice or unknown", lineno);
                    return false;
                }
                snprintf(f->type, sizeof(f->type), "%.15s", rest);
                if (strcmp(rest, "counter") == 0 &&
                    (strlen(name) < 6 || strcmp(name + strlen(name) - 6, "_total") != 0)) {
                    snprintf(p->err, sizeof(p->err), "line %u: counter %s without _total",
                             lineno, name);
                    return false;
                }
            } else {
                snprintf(p->err, sizeof(p->err), "line %u: comment is neither HELP nor TYPE",
                         lineno);
                return false;
            }
        } else {
            struct t_prom_sample *s;
            struct t_prom_family *f;
            size_t nl = 0;
            const char *v;
            char *vend;

            while (nl < len && line[nl] != '{' && line[nl] != ' ')
                nl++;
            if (!t_prom_name_ok(line, nl) || nl >= sizeof(s->name) || p->ns == T_PROM_MAX) {
                snprintf(p->err, sizeof(p->err), "line %u: bad sample name", lineno);
                return false;
            }
            s = &p->s[p->ns++];
            memcpy(s->name, line, nl);
            s->name[nl] = '\0';
            s->labels[0] = '\0';
            v = line + nl;
            if (*v == '{') {
                const char *close = memchr(v, '}', (size_t)(end - v));

                if (close == NULL || (size_t)(close - v - 1) >= sizeof(s->labels) ||
                    !t_prom_labels_ok(v + 1, (size_t)(close - v - 1))) {
                    snprintf(p->err, sizeof(p->err), "line %u: bad labels", lineno);
                    return false;
                }
                memcpy(s->labels, v + 1, (size_t)(close - v - 1));
                s->labels[close - v - 1] = '\0';
                v = close + 1;
            }
            if (*v != ' ' || v[1] == ' ' || v + 1 >= end) {
                snprintf(p->err, sizeof(p->err), "line %u: bad separator", lineno);
                return false;
            }
            s->value = strtod(v + 1, &vend);
            if (vend != end) {
                snprintf(p->err, sizeof(p->err), "line %u: bad value", lineno);
                return false;
            }
            f = t_prom_family_of(p, s->name);
            if (f == NULL || f->type[0] == '\0') {
                snprintf(p->err, sizeof(p->err), "line %u: %s has no TYPE", lineno, s->name);
                return false;
            }
            if (strcmp(f->type, "histogram") == 0) {
                size_t fl = strlen(f->name);
                const char *suffix = s->name + fl;
                char group[400], *le;

                snprintf(group, sizeof(group), "%s{%s}", f->name, s->labels);
                le = strstr(group, "le=\"");
                if (strcmp(suffix, "_bucket") == 0) {
                    double lev;

                    if (le == NULL) {
                        snprintf(p->err, sizeof(p->err), "line %u: bucket without le", lineno);
                        return false;
                    }
                    lev = strncmp(le + 4, "+Inf\"", 5) == 0 ? INFINITY : strtod(le + 4, NULL);
                    *le = '\0'; /* the group: the labels but le */
                    if (!in_hist || strcmp(group, hist_group) != 0) {
                        if (in_hist) {
                            snprintf(p->err, sizeof(p->err), "line %u: histogram %s ended "
                                     "without _count", lineno, hist_group);
                            return false;
                        }
                        in_hist = true;
                        snprintf(hist_group, sizeof(hist_group), "%s", group);
                        last_le = -1;
                        last_cum = -1;
                    }
                    if (!(lev > last_le) || s->value < last_cum) {
                        snprintf(p->err, sizeof(p->err), "line %u: buckets not increasing "
                                 "or not cumulative", lineno);
                        return false;
                    }
                    last_le = lev;
                    last_cum = s->value;
                } else if (strcmp(suffix, "_count") == 0) {
                    if (!in_hist || !isinf(last_le) || s->value != last_cum) {
                        snprintf(p->err, sizeof(p->err), "line %u: _count without a +Inf "
                                 "bucket equal to it", lineno);
                        return false;
                    }
                    in_hist = false;
                } else if (le != NULL) {
                    snprintf(p->err, sizeof(p->err), "line %u: le on _sum", lineno);
                    return false;
                }
            }
        }
        line = end + 1;
    }
    if (in_hist) {
        snprintf(p->err, sizeof(p->err), "histogram %s without _count", hist_group);
        return false;
    }
    return true;
}

/* The value of sample name{labels} (labels "" for none), or NAN. */
static inline double t_prom_value(const struct t_prom *p, const char *name, const char *labels)
{
    for (size_t i = 0; i < p->ns; i++) {
        if (strcmp(p->s[i].name, name) == 0 && strcmp(p->s[i].labels, labels) == 0)
            return p->s[i].value;
    }
    return NAN;
}

/* Check-based helpers for the tests that scrape a daemon (they include <check.h> first). */
#ifdef CHECK_MAJOR_VERSION
#define T_PROM_PAGE_CAP (1u << 20)

/* GET /metrics on port, parsed strictly into *p (any violation fails the test). */
static inline void t_prom_scrape(unsigned port, struct t_prom *p)
{
    char *buf = malloc(T_PROM_PAGE_CAP);
    const char *body;

    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(t_http(port, "GET", "/metrics", buf, T_PROM_PAGE_CAP, &body), 200);
    ck_assert_ptr_nonnull(strstr(buf, "text/plain; version=0.0.4"));
    ck_assert_msg(t_prom_parse(body, p), "exposition: %s", p->err);
    free(buf);
}

/* The value of sample name{labels}, which must be there. */
static inline double t_prom_val(const struct t_prom *p, const char *name, const char *labels)
{
    double v = t_prom_value(p, name, labels);

    ck_assert_msg(!isnan(v), "no sample %s{%s}", name, labels);
    return v;
}
#endif

#endif /* MC_T_HTTP_H */
