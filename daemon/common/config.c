/*
 * mc_config: the table-driven config engine (see config.h for the contract and the value
 * syntax).
 *
 * Every source (defaults, --set, environment, JSON) funnels into one path: text or a JSON
 * value -> a typed value (cfg_val) -> bounds check -> store. The loaders that apply many
 * keys at once (JSON, environment) run that path twice, checking everything first and
 * storing second, so a bad file leaves the struct untouched instead of half applied; a
 * copy of the struct would do the same but the engine does not know its size.
 *
 * Included tables (MC_CFG_TABLE) are flattened by one iterator, so every other function
 * sees a plain list of (entry, field offset) pairs.
 */
#include "daemon/common/config.h"
#include "daemon/common/config_int.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "daemon/common/log.h"
#include "mc/mc_status.h"

const struct mc_config_entry mc_config_daemon_table[] = {
    {
        .name = "log_level",
        .type = MC_CFG_ENUM,
        .def = "info",
        .offset = offsetof(struct mc_config_daemon, log_level),
        .choices = mc_log_level_names,
        .doc = "Least severe messages written to stderr: error, warn, info (start-up, "
               "membership), debug (per request) or trace (everything).",
    },
    {.name = NULL},
};

/* ---- messages ------------------------------------------------------------------------ */

int cfg_err(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Put a formatted prefix in front of the message already in `err` (cutting its end). */
void cfg_err_prefix(char *err, size_t errlen, const char *fmt, ...)
{
    char pre[CFG_PREFIX_MAX];
    size_t plen, keep;
    va_list ap;
    int n;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    n = vsnprintf(pre, sizeof(pre), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    plen = (size_t)n < sizeof(pre) ? (size_t)n : sizeof(pre) - 1;
    if (plen >= errlen - 1) {
        memcpy(err, pre, errlen - 1);
        err[errlen - 1] = '\0';
        return;
    }
    keep = strnlen(err, errlen - 1);
    if (keep > errlen - 1 - plen)
        keep = errlen - 1 - plen;
    memmove(err + plen, err, keep);
    memcpy(err, pre, plen);
    err[plen + keep] = '\0';
}

/* The few codes this module returns, in words: mc_strerror lives in a library the daemon
 * helpers do not link (daemon/common depends on jansson and libm only). */
static const char *cfg_rc_text(int rc)
{
    switch (rc) {
    case MC_ERR_NOMEM:
        return "out of memory";
    case MC_ERR_IO:
        return "I/O error";
    case MC_ERR_INTERNAL:
        return "a default in the table does not parse";
    default:
        return "invalid";
    }
}

/* ---- iteration over a table and the tables it includes ------------------------------ */

void cfg_iter_init(struct cfg_iter *it, const struct mc_config_entry *table)
{
    it->depth = 0;
    it->pos[0] = table;
    it->base[0] = 0;
}

/* The next key entry, its field's offset from the outermost struct in *off_p; NULL at
 * the end. Included tables too deep or without `sub` are skipped (table_check flags
 * them). */
const struct mc_config_entry *cfg_iter_next(struct cfg_iter *it, size_t *off_p)
{
    const struct mc_config_entry *e;

    while (it->depth >= 0) {
        e = it->pos[it->depth];
        if (e->name == NULL) {
            it->depth--;
            continue;
        }
        it->pos[it->depth] = e + 1;
        if (e->type == MC_CFG_TABLE) {
            if (e->sub != NULL && it->depth + 1 < MC_CONFIG_MAX_DEPTH) {
                it->depth++;
                it->pos[it->depth] = e->sub;
                it->base[it->depth] = it->base[it->depth - 1] + e->offset;
            }
            continue;
        }
        *off_p = it->base[it->depth] + e->offset;
        return e;
    }
    return NULL;
}

static const struct mc_config_entry *cfg_find(const struct mc_config_entry *table,
                                              const char *key, size_t *off_p)
{
    const struct mc_config_entry *e;
    struct cfg_iter it;
    size_t off;

    cfg_iter_init(&it, table);
    while ((e = cfg_iter_next(&it, &off)) != NULL) {
        if (strcmp(e->name, key) == 0) {
            *off_p = off;
            return e;
        }
    }
    return NULL;
}

/* Edit distance ignoring case, for "did you mean"; SIZE_MAX when a word is too long. */
static size_t cfg_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), i, j;
    size_t prev[CFG_NAME_MAX + 1], cur[CFG_NAME_MAX + 1];

    if (la > CFG_NAME_MAX || lb > CFG_NAME_MAX)
        return SIZE_MAX;
    for (j = 0; j <= lb; j++)
        prev[j] = j;
    for (i = 1; i <= la; i++) {
        cur[0] = i;
        for (j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] +
                         (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;

            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof(prev[0]));
    }
    return prev[lb];
}

static int cfg_err_unknown(const struct mc_config_entry *table, const char *key, char *err,
                           size_t errlen)
{
    const struct mc_config_entry *e, *best = NULL;
    size_t off, d, best_d = SIZE_MAX, limit;
    struct cfg_iter it;

    cfg_iter_init(&it, table);
    while ((e = cfg_iter_next(&it, &off)) != NULL) {
        d = cfg_distance(key, e->name);
        if (key[0] != '\0' && strncmp(e->name, key, strlen(key)) == 0)
            d = 1; /* a cut-off key ("tick" for tick_ms) is as good as a typo */
        if (d < best_d) {
            best_d = d;
            best = e;
        }
    }
    limit = strlen(key) / 3 > 2 ? strlen(key) / 3 : 2;
    if (best != NULL && best_d <= limit)
        return cfg_err(err, errlen, MC_ERR_INVALID, "unknown key '%.*s' (did you mean '%s'?)",
                       CFG_SHOW_MAX, key, best->name);
    return cfg_err(err, errlen, MC_ERR_INVALID, "unknown key '%.*s'", CFG_SHOW_MAX, key);
}

/* ---- text -> value ------------------------------------------------------------------- */

static const struct cfg_unit cfg_size_units[] = {
    {"", 1},           {"B", 1},
    {"K", 1ULL << 10}, {"KiB", 1ULL << 10},
    {"M", 1ULL << 20}, {"MiB", 1ULL << 20},
    {"G", 1ULL << 30}, {"GiB", 1ULL << 30},
    {"T", 1ULL << 40}, {"TiB", 1ULL << 40},
    {NULL, 0},
};

static const struct cfg_unit cfg_ms_units[] = {
    {"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60 * 1000}, {"h", 60 * 60 * 1000}, {NULL, 0},
};

static const char *cfg_expected(enum mc_config_type type)
{
    switch (type) {
    case MC_CFG_BOOL:
        return "a boolean (true/false, yes/no, on/off, 1/0)";
    case MC_CFG_U64:
        return "an unsigned decimal integer";
    case MC_CFG_SIZE:
        return "a size in bytes such as 65536, 512K, 64M, 4G or 4GiB";
    case MC_CFG_MS:
        return "a duration in ms such as 250, 250ms, 30s, 10m or 1h";
    case MC_CFG_DOUBLE:
        return "a finite number such as 0.95";
    case MC_CFG_STRING:
        return "a string";
    case MC_CFG_ENUM:
        return "one of the listed values";
    case MC_CFG_TABLE:
        break;
    }
    return "a value";
}

const char *cfg_type_name(enum mc_config_type type)
{
    switch (type) {
    case MC_CFG_BOOL:
        return "bool";
    case MC_CFG_U64:
        return "integer";
    case MC_CFG_SIZE:
        return "size (bytes)";
    case MC_CFG_MS:
        return "duration (ms)";
    case MC_CFG_DOUBLE:
        return "number";
    case MC_CFG_STRING:
        return "string";
    case MC_CFG_ENUM:
        return "enum";
    case MC_CFG_TABLE:
        break;
    }
    return "?";
}

/* Leading decimal digits of s: 0, -1 (none) or -2 (more than 64 bits). */
static int cfg_parse_digits(const char *s, uint64_t *v_p, const char **end_p)
{
    uint64_t v = 0;
    const char *p;

    for (p = s; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');

        if (v > (UINT64_MAX - d) / 10)
            return -2;
        v = v * 10 + d;
    }
    if (p == s)
        return -1;
    *v_p = v;
    *end_p = p;
    return 0;
}

static int cfg_parse_uint(const struct mc_config_entry *e, const char *text, union cfg_val *v,
                          char *err, size_t errlen)
{
    const struct cfg_unit *units = NULL, *u;
    const char *end;
    uint64_t n;
    int rc;

    if (text[0] == '\0')
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: empty value; expected %s", e->name,
                       cfg_expected(e->type));
    if (text[0] == '-')
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: '%.*s' is negative; expected %s",
                       e->name, CFG_SHOW_MAX, text, cfg_expected(e->type));
    rc = cfg_parse_digits(text, &n, &end);
    if (rc == -2)
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: '%.*s' does not fit in 64 bits",
                       e->name, CFG_SHOW_MAX, text);
    if (rc < 0)
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: '%.*s' is not %s", e->name,
                       CFG_SHOW_MAX, text, cfg_expected(e->type));

    if (e->type == MC_CFG_SIZE)
        units = cfg_size_units;
    else if (e->type == MC_CFG_MS)
        units = cfg_ms_units;
    if (units == NULL) {
        if (*end != '\0')
            return cfg_err(err, errlen, MC_ERR_INVALID,
                           "%s: '%.*s' has trailing characters '%.*s'; expected %s", e->name,
                           CFG_SHOW_MAX, text, CFG_SHOW_MAX, end, cfg_expected(e->type));
        v->u = n;
        return 0;
    }
    for (u = units; u->name != NULL; u++) {
        /* sizes take any case (4g, 4gib); durations do not, so "m" is never mega */
        if (units == cfg_size_units ? strcasecmp(end, u->name) == 0 : strcmp(end, u->name) == 0)
            break;
    }
    if (u->name == NULL)
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: '%.*s' has an unknown unit '%.*s'; %s",
                       e->name, CFG_SHOW_MAX, text, CFG_SHOW_MAX, end,
                       units == cfg_size_units ? "use B, K, M, G, T or KiB, MiB, GiB, TiB"
                                               : "use ms, s, m or h");
    if (n > UINT64_MAX / u->mult)
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: '%.*s' does not fit in 64 bits",
                       e->name, CFG_SHOW_MAX, text);
    v->u = n * u->mult;
    return 0;
}

static int cfg_parse_double(const struct mc_config_entry *e, const char *text, union cfg_val *v,
                            char *err, size_t errlen)
{
    char *end;
    double d;

    if (text[0] == '\0')
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: empty value; expected %s", e->name,
                       cfg_expected(e->type));
    errno = 0;
    d = strtod(text, &end);
    /* strtod skips leading spaces; the other types refuse them, so this does too */
    if (end == text || isspace((unsigned char)text[0]))
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: '%.*s' is not %s", e->name,
                       CFG_SHOW_MAX, text, cfg_expected(e->type));
    if (*end != '\0')
        return cfg_err(err, errlen, MC_ERR_INVALID,
                       "%s: '%.*s' has trailing characters '%.*s'; expected %s", e->name,
                       CFG_SHOW_MAX, text, CFG_SHOW_MAX, end, cfg_expected(e->type));
    if (!isfinite(d))
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: '%.*s' is %s; expected %s", e->name,
                       CFG_SHOW_MAX, text, errno == ERANGE ? "too large" : "not finite",
                       cfg_expected(e->type));
    v->d = d; /* an underflow to 0 or a subnormal is accepted as the nearest value */
    return 0;
}

/* "a, b, c" into buf (cut to fit). */
void cfg_choices_list(const struct mc_config_entry *e, char *buf, size_t len)
{
    size_t n = 0;
    int i, m;

    buf[0] = '\0';
    for (i = 0; e->choices != NULL && e->choices[i] != NULL; i++) {
        m = snprintf(buf + n, len - n, "%s%s", i > 0 ? ", " : "", e->choices[i]);
        if (m < 0 || (size_t)m >= len - n)
            return;
        n += (size_t)m;
    }
}

int cfg_parse_text(const struct mc_config_entry *e, const char *text, union cfg_val *v,
                   char *err, size_t errlen)
{
    static const char *const yes[] = {"true", "yes", "on", "1", NULL};
    static const char *const no[] = {"false", "no", "off", "0", NULL};
    char list[256];
    int i;

    switch (e->type) {
    case MC_CFG_BOOL:
        for (i = 0; yes[i] != NULL; i++) {
            if (strcasecmp(text, yes[i]) == 0) {
                v->b = true;
                return 0;
            }
            if (strcasecmp(text, no[i]) == 0) {
                v->b = false;
                return 0;
            }
        }
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: '%.*s' is not %s", e->name,
                       CFG_SHOW_MAX, text, cfg_expected(e->type));
    case MC_CFG_U64:
    case MC_CFG_SIZE:
    case MC_CFG_MS:
        return cfg_parse_uint(e, text, v, err, errlen);
    case MC_CFG_DOUBLE:
        return cfg_parse_double(e, text, v, err, errlen);
    case MC_CFG_STRING:
        v->s = text;
        return 0;
    case MC_CFG_ENUM:
        for (i = 0; e->choices != NULL && e->choices[i] != NULL; i++) {
            if (strcasecmp(text, e->choices[i]) == 0) {
                v->e = i;
                return 0;
            }
        }
        cfg_choices_list(e, list, sizeof(list));
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: '%.*s' is not one of: %s", e->name,
                       CFG_SHOW_MAX, text, list);
    case MC_CFG_TABLE:
        break;
    }
    return cfg_err(err, errlen, MC_ERR_INTERNAL, "%s: not a key", e->name);
}

/* ---- bounds, formatting -------------------------------------------------------------- */

bool cfg_has_bounds(const struct mc_config_entry *e)
{
    return e->min < e->max;
}

/* The fewest significant digits (1..17) with which `d` reads back unchanged. */
int cfg_double_digits(double d)
{
    char buf[64];
    int p;

    for (p = 1; p < 17; p++) {
        snprintf(buf, sizeof(buf), "%.*g", p, d);
        if (strtod(buf, NULL) == d)
            return p;
    }
    return 17;
}

void cfg_fmt_double(char *buf, size_t len, double d)
{
    snprintf(buf, len, "%.*g", cfg_double_digits(d), d);
}

/* A bound or value of an entry in its own unit: "4096", "0.95". */
void cfg_fmt_bound(const struct mc_config_entry *e, double b, char *buf, size_t len)
{
    if (e->type == MC_CFG_DOUBLE)
        cfg_fmt_double(buf, len, b);
    else
        snprintf(buf, len, "%.0f", b);
}

static const char *cfg_unit_word(const struct mc_config_entry *e)
{
    if (e->type == MC_CFG_SIZE)
        return " bytes";
    if (e->type == MC_CFG_MS)
        return " ms";
    return "";
}

static int cfg_check_bounds(const struct mc_config_entry *e, const union cfg_val *v, char *err,
                            size_t errlen)
{
    char val[64], lo[64], hi[64];
    double d;

    if (!cfg_has_bounds(e))
        return 0;
    switch (e->type) {
    case MC_CFG_U64:
    case MC_CFG_SIZE:
    case MC_CFG_MS:
        d = (double)v->u;
        snprintf(val, sizeof(val), "%" PRIu64, v->u);
        break;
    case MC_CFG_DOUBLE:
        d = v->d;
        cfg_fmt_double(val, sizeof(val), v->d);
        break;
    default:
        return 0;
    }
    if (d >= e->min && d <= e->max)
        return 0;
    cfg_fmt_bound(e, e->min, lo, sizeof(lo));
    cfg_fmt_bound(e, e->max, hi, sizeof(hi));
    return cfg_err(err, errlen, MC_ERR_INVALID, "%s: %s is out of range [%s, %s]%s", e->name,
                   val, lo, hi, cfg_unit_word(e));
}

int cfg_parse_checked(const struct mc_config_entry *e, const char *text, union cfg_val *v,
                      char *err, size_t errlen)
{
    int rc = cfg_parse_text(e, text, v, err, errlen);

    return rc != 0 ? rc : cfg_check_bounds(e, v, err, errlen);
}

static int cfg_store(const struct mc_config_entry *e, void *base, size_t off,
                     const union cfg_val *v)
{
    char *field = (char *)base + off;
    char *copy = NULL;

    switch (e->type) {
    case MC_CFG_BOOL:
        *(bool *)field = v->b;
        break;
    case MC_CFG_U64:
    case MC_CFG_SIZE:
    case MC_CFG_MS:
        *(uint64_t *)field = v->u;
        break;
    case MC_CFG_DOUBLE:
        *(double *)field = v->d;
        break;
    case MC_CFG_STRING:
        if (v->s != NULL) {
            copy = strdup(v->s);
            if (copy == NULL)
                return MC_ERR_NOMEM;
        }
        free(*(char **)field);
        *(char **)field = copy;
        break;
    case MC_CFG_ENUM:
        *(int *)field = v->e;
        break;
    case MC_CFG_TABLE:
        return MC_ERR_INTERNAL;
    }
    return 0;
}

int mc_config_check_values(const struct mc_config_entry *table, const void *base, char *err,
                           size_t errlen)
{
    const struct mc_config_entry *e;
    struct cfg_iter it;
    union cfg_val v;
    const char *field;
    size_t off;
    int i, rc;

    cfg_iter_init(&it, table);
    while ((e = cfg_iter_next(&it, &off)) != NULL) {
        field = (const char *)base + off;
        switch (e->type) {
        case MC_CFG_U64:
        case MC_CFG_SIZE:
        case MC_CFG_MS:
            v.u = *(const uint64_t *)field;
            break;
        case MC_CFG_DOUBLE:
            v.d = *(const double *)field;
            if (!isfinite(v.d))
                return cfg_err(err, errlen, MC_ERR_INVALID, "%s: %g is not finite", e->name,
                               v.d);
            break;
        case MC_CFG_ENUM:
            v.e = *(const int *)field;
            for (i = 0; e->choices != NULL && e->choices[i] != NULL && i < v.e; i++)
                ;
            if (v.e < 0 || e->choices == NULL || e->choices[i] == NULL)
                return cfg_err(err, errlen, MC_ERR_INVALID, "%s: %d is not a valid choice",
                               e->name, v.e);
            continue;
        default:
            continue;
        }
        rc = cfg_check_bounds(e, &v, err, errlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- defaults, cleanup, set ---------------------------------------------------------- */

int mc_config_set_defaults(const struct mc_config_entry *table, void *base)
{
    const struct mc_config_entry *e;
    struct cfg_iter it;
    union cfg_val v;
    size_t off;
    int rc;

    /* strings first, so that a failure below leaves nothing cleanup would misread */
    cfg_iter_init(&it, table);
    while ((e = cfg_iter_next(&it, &off)) != NULL) {
        if (e->type == MC_CFG_STRING)
            *(char **)((char *)base + off) = NULL;
    }
    cfg_iter_init(&it, table);
    while ((e = cfg_iter_next(&it, &off)) != NULL) {
        memset(&v, 0, sizeof(v));
        if (e->def != NULL && cfg_parse_checked(e, e->def, &v, NULL, 0) != 0)
            return MC_ERR_INTERNAL;
        rc = cfg_store(e, base, off, &v);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void mc_config_cleanup(const struct mc_config_entry *table, void *base)
{
    const struct mc_config_entry *e;
    struct cfg_iter it;
    size_t off;

    if (base == NULL)
        return;
    cfg_iter_init(&it, table);
    while ((e = cfg_iter_next(&it, &off)) != NULL) {
        if (e->type == MC_CFG_STRING) {
            char **s = (char **)((char *)base + off);

            free(*s);
            *s = NULL;
        }
    }
}

int mc_config_set(const struct mc_config_entry *table, void *base, const char *key,
                  const char *value, char *err, size_t errlen)
{
    const struct mc_config_entry *e;
    union cfg_val v;
    size_t off;
    int rc;

    if (key == NULL || value == NULL)
        return cfg_err(err, errlen, MC_ERR_INVALID, "missing key or value");
    e = cfg_find(table, key, &off);
    if (e == NULL)
        return cfg_err_unknown(table, key, err, errlen);
    rc = cfg_parse_checked(e, value, &v, err, errlen);
    if (rc != 0)
        return rc;
    rc = cfg_store(e, base, off, &v);
    if (rc != 0)
        return cfg_err(err, errlen, rc, "%s: out of memory", e->name);
    return 0;
}

int mc_config_set_kv(const struct mc_config_entry *table, void *base, const char *kv, char *err,
                     size_t errlen)
{
    char key[CFG_NAME_MAX + 1];
    const char *eq;
    size_t klen;

    if (kv == NULL)
        return cfg_err(err, errlen, MC_ERR_INVALID, "missing KEY=VALUE");
    eq = strchr(kv, '=');
    if (eq == NULL || eq == kv)
        return cfg_err(err, errlen, MC_ERR_INVALID, "'%.*s' is not KEY=VALUE", CFG_SHOW_MAX,
                       kv);
    klen = (size_t)(eq - kv);
    if (klen > CFG_NAME_MAX)
        return cfg_err(err, errlen, MC_ERR_INVALID, "unknown key '%.*s'", CFG_SHOW_MAX, kv);
    memcpy(key, kv, klen);
    key[klen] = '\0';
    return mc_config_set(table, base, key, eq + 1, err, errlen);
}

/* ---- JSON ---------------------------------------------------------------------------- */

static const char *cfg_json_type_name(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

static int cfg_json_value(const struct mc_config_entry *e, const json_t *j, union cfg_val *v,
                          char *err, size_t errlen)
{
    json_int_t n;

    switch (e->type) {
    case MC_CFG_BOOL:
        if (json_is_boolean(j)) {
            v->b = json_is_true(j);
            return 0;
        }
        break;
    case MC_CFG_U64:
    case MC_CFG_SIZE:
    case MC_CFG_MS:
        if (json_is_integer(j)) {
            n = json_integer_value(j);
            if (n < 0)
                return cfg_err(err, errlen, MC_ERR_INVALID,
                               "%s: %" JSON_INTEGER_FORMAT " is negative; expected %s", e->name,
                               n, cfg_expected(e->type));
            v->u = (uint64_t)n;
            return cfg_check_bounds(e, v, err, errlen);
        }
        break;
    case MC_CFG_DOUBLE:
        if (json_is_number(j)) {
            v->d = json_number_value(j); /* jansson refuses NaN and inf in its input */
            return cfg_check_bounds(e, v, err, errlen);
        }
        break;
    case MC_CFG_STRING:
        if (json_is_null(j)) {
            v->s = NULL;
            return 0;
        }
        break;
    case MC_CFG_ENUM:
    case MC_CFG_TABLE:
        break;
    }
    if (json_is_string(j)) {
        if (strlen(json_string_value(j)) != json_string_length(j))
            return cfg_err(err, errlen, MC_ERR_INVALID, "%s: the string contains a NUL byte",
                           e->name);
        return cfg_parse_checked(e, json_string_value(j), v, err, errlen);
    }
    return cfg_err(err, errlen, MC_ERR_INVALID, "%s: expected %s, got %s", e->name,
                   cfg_expected(e->type), cfg_json_type_name(j));
}

/* Check every member of `root` (pass 0), then store them all (pass 1). */
static int cfg_json_apply(const struct mc_config_entry *table, void *base, json_t *root,
                          const char *src, char *err, size_t errlen)
{
    const struct mc_config_entry *e;
    const char *key;
    union cfg_val v;
    json_t *val;
    char *dump;
    size_t off;
    int pass, rc;

    if (!json_is_object(root))
        return cfg_err(err, errlen, MC_ERR_INVALID,
                       "%s: the top level must be a JSON object of key: value, not %s", src,
                       cfg_json_type_name(root));
    for (pass = 0; pass < 2; pass++) {
        json_object_foreach(root, key, val)
        {
            e = cfg_find(table, key, &off);
            if (e == NULL) {
                rc = cfg_err_unknown(table, key, err, errlen);
                cfg_err_prefix(err, errlen, "%s: ", src);
                return rc;
            }
            dump = NULL;
            if (e->type == MC_CFG_STRING && e->json &&
                (json_is_object(val) || json_is_array(val))) {
                dump = json_dumps(val, JSON_COMPACT | JSON_ENSURE_ASCII);
                if (dump == NULL)
                    return cfg_err(err, errlen, MC_ERR_NOMEM, "%s: %s: out of memory", src,
                                   e->name);
                rc = cfg_parse_checked(e, dump, &v, err, errlen);
            } else {
                rc = cfg_json_value(e, val, &v, err, errlen);
            }
            if (rc == 0 && pass == 1) {
                rc = cfg_store(e, base, off, &v);
                if (rc != 0)
                    rc = cfg_err(err, errlen, rc, "%s: %s: out of memory", src, e->name);
            } else if (rc != 0) {
                cfg_err_prefix(err, errlen, "%s: ", src);
            }
            free(dump);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

static int cfg_json_load_error(const json_error_t *je, const char *src, char *err,
                               size_t errlen)
{
    switch (json_error_code(je)) {
    case json_error_cannot_open_file:
        return cfg_err(err, errlen, MC_ERR_IO, "%s", je->text); /* names the path */
    case json_error_out_of_memory:
        return cfg_err(err, errlen, MC_ERR_NOMEM, "%s: out of memory", src);
    default:
        break;
    }
    if (je->line < 0)
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: %s", src, je->text);
    return cfg_err(err, errlen, MC_ERR_INVALID, "%s:%d:%d: %s", src, je->line, je->column,
                   je->text);
}

/* Duplicate keys would silently keep one value; DECODE_ANY lets a scalar top level reach
 * cfg_json_apply, whose message is clearer than the parser's. */
#define CFG_JSON_FLAGS (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY)

int mc_config_load_json_file(const struct mc_config_entry *table, void *base, const char *path,
                             char *err, size_t errlen)
{
    json_error_t je;
    json_t *root;
    int rc;

    if (path == NULL)
        return cfg_err(err, errlen, MC_ERR_INVALID, "no config file name");
    root = json_load_file(path, CFG_JSON_FLAGS, &je);
    if (root == NULL)
        return cfg_json_load_error(&je, path, err, errlen);
    rc = cfg_json_apply(table, base, root, path, err, errlen);
    json_decref(root);
    return rc;
}

int mc_config_load_json_string(const struct mc_config_entry *table, void *base,
                               const char *json, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root;
    int rc;

    if (json == NULL)
        return cfg_err(err, errlen, MC_ERR_INVALID, "no JSON text");
    root = json_loads(json, CFG_JSON_FLAGS, &je);
    if (root == NULL)
        return cfg_json_load_error(&je, "<string>", err, errlen);
    rc = cfg_json_apply(table, base, root, "<string>", err, errlen);
    json_decref(root);
    return rc;
}

/* ---- environment --------------------------------------------------------------------- */

void cfg_env_name(const char *prefix, const char *key, char *buf, size_t len)
{
    size_t n;

    snprintf(buf, len, "%s%s", prefix != NULL ? prefix : "", key);
    for (n = prefix != NULL ? strlen(prefix) : 0; n < len && buf[n] != '\0'; n++)
        buf[n] = (char)toupper((unsigned char)buf[n]);
}

int mc_config_load_env(const struct mc_config_entry *table, void *base, const char *prefix,
                       char *err, size_t errlen)
{
    char name[CFG_PREFIX_MAX];
    const struct mc_config_entry *e;
    struct cfg_iter it;
    const char *text;
    union cfg_val v;
    size_t off;
    int pass, rc;

    for (pass = 0; pass < 2; pass++) {
        cfg_iter_init(&it, table);
        while ((e = cfg_iter_next(&it, &off)) != NULL) {
            cfg_env_name(prefix, e->name, name, sizeof(name));
            text = getenv(name);
            if (text == NULL)
                continue;
            rc = cfg_parse_checked(e, text, &v, err, errlen);
            if (rc != 0) {
                cfg_err_prefix(err, errlen, "%s: ", name);
                return rc;
            }
            if (pass == 1) {
                rc = cfg_store(e, base, off, &v);
                if (rc != 0)
                    return cfg_err(err, errlen, rc, "%s: out of memory", name);
            }
        }
    }
    return 0;
}

/* ---- precedence ---------------------------------------------------------------------- */

/* Everything after the defaults, in precedence order. */
static int cfg_load_sources(const struct mc_config_entry *table, void *base, const char *path,
                            const char *env_prefix, const char *const *sets, size_t nsets,
                            char *err, size_t errlen)
{
    size_t i;
    int rc;

    if (path != NULL) {
        rc = mc_config_load_json_file(table, base, path, err, errlen);
        if (rc != 0)
            return rc;
    }
    if (env_prefix != NULL) {
        rc = mc_config_load_env(table, base, env_prefix, err, errlen);
        if (rc != 0) {
            cfg_err_prefix(err, errlen, "environment: ");
            return rc;
        }
    }
    for (i = 0; i < nsets; i++) {
        rc = mc_config_set_kv(table, base, sets[i], err, errlen);
        if (rc != 0) {
            cfg_err_prefix(err, errlen, "--set: ");
            return rc;
        }
    }
    return 0;
}

int mc_config_load(const struct mc_config_entry *table, void *base, const char *path,
                   const char *env_prefix, const char *const *sets, size_t nsets, char *err,
                   size_t errlen)
{
    int rc = mc_config_set_defaults(table, base);

    if (rc != 0)
        return cfg_err(err, errlen, rc, "cannot apply the defaults (%s)", cfg_rc_text(rc));
    return cfg_load_sources(table, base, path, env_prefix, sets, nsets, err, errlen);
}

/* ---- dump ---------------------------------------------------------------------------- */

static json_t *cfg_json_of(const struct mc_config_entry *e, const void *base, size_t off,
                           int *digits_p)
{
    const char *field = (const char *)base + off;
    char buf[32];
    uint64_t u;
    double d;
    int i, k;

    switch (e->type) {
    case MC_CFG_BOOL:
        return json_boolean(*(const bool *)field);
    case MC_CFG_U64:
    case MC_CFG_SIZE:
    case MC_CFG_MS:
        u = *(const uint64_t *)field;
        if (u > (uint64_t)INT64_MAX) { /* json_int_t is signed: keep the exact digits */
            snprintf(buf, sizeof(buf), "%" PRIu64, u);
            return json_string(buf);
        }
        return json_integer((json_int_t)u);
    case MC_CFG_DOUBLE:
        d = *(const double *)field;
        k = cfg_double_digits(d);
        if (k > *digits_p)
            *digits_p = k;
        return json_real(d);
    case MC_CFG_STRING:
        if (*(char *const *)field == NULL)
            return json_null();
        if (e->secret)
            return json_string("(set)"); /* a dump is for reading: never the secret */
        return json_string(*(char *const *)field);
    case MC_CFG_ENUM:
        i = *(const int *)field;
        for (k = 0; e->choices != NULL && e->choices[k] != NULL; k++) {
            if (k == i)
                return json_string(e->choices[k]);
        }
        return json_integer(i); /* not a choice: loading it back says so */
    case MC_CFG_TABLE:
        break;
    }
    return NULL;
}

int mc_config_dump_json(const struct mc_config_entry *table, const void *base, FILE *out)
{
    const struct mc_config_entry *e;
    struct cfg_iter it;
    json_t *root, *val;
    int digits = 1, rc = 0;
    size_t off;

    root = json_object();
    if (root == NULL)
        return MC_ERR_NOMEM;
    cfg_iter_init(&it, table);
    while ((e = cfg_iter_next(&it, &off)) != NULL) {
        val = cfg_json_of(e, base, off, &digits);
        if (val == NULL || json_object_set_new(root, e->name, val) != 0) {
            rc = MC_ERR_NOMEM; /* json_object_set_new released val */
            goto err_decref;
        }
    }
    /* One precision for every real in the dump: the largest any of them needs, so that
     * each reads back exactly and 0.95 still prints as 0.95. */
    if (json_dumpf(root, out,
                   JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(digits)) != 0 ||
        fputc('\n', out) == EOF || fflush(out) == EOF)
        rc = MC_ERR_IO;
err_decref:
    json_decref(root);
    return rc;
}

/* ---- command line -------------------------------------------------------------------- */

enum cfg_arg {
    CFG_ARG_OTHER,  /* not ours: stays in argv */
    CFG_ARG_END,    /* "--": stop looking */
    CFG_ARG_CONFIG, /* --config FILE */
    CFG_ARG_SET,    /* --set K=V */
    CFG_ARG_DUMP,   /* --dump-config */
};

/* "--name" (value in the next argument) or "--name=value". */
static bool cfg_arg_is(const char *a, const char *name, const char **val_p)
{
    size_t n = strlen(name);

    if (strncmp(a, name, n) != 0)
        return false;
    if (a[n] == '\0') {
        *val_p = NULL;
        return true;
    }
    if (a[n] == '=') {
        *val_p = a + n + 1;
        return true;
    }
    return false;
}

/* Classify argv[*i]; for options with a value, put it in *val_p and advance *i past a
 * separate value argument. */
static int cfg_arg_classify(int argc, char **argv, int *i, enum cfg_arg *kind_p,
                            const char **val_p, char *err, size_t errlen)
{
    const char *a = argv[*i], *val = NULL;
    enum cfg_arg kind;

    if (strcmp(a, "--") == 0) {
        *kind_p = CFG_ARG_END;
        return 0;
    }
    if (cfg_arg_is(a, "--dump-config", &val)) {
        if (val != NULL)
            return cfg_err(err, errlen, MC_ERR_INVALID, "--dump-config takes no value");
        *kind_p = CFG_ARG_DUMP;
        return 0;
    }
    if (cfg_arg_is(a, "--config", &val))
        kind = CFG_ARG_CONFIG;
    else if (cfg_arg_is(a, "--set", &val))
        kind = CFG_ARG_SET;
    else {
        *kind_p = CFG_ARG_OTHER;
        return 0;
    }
    if (val == NULL) {
        if (*i + 1 >= argc)
            return cfg_err(err, errlen, MC_ERR_INVALID, "%s needs %s", a,
                           kind == CFG_ARG_CONFIG ? "a file name" : "KEY=VALUE");
        val = argv[++*i];
    }
    *kind_p = kind;
    *val_p = val;
    return 0;
}

int mc_config_parse_args(const struct mc_config_entry *table, void *base,
                         const char *env_prefix, mc_config_validate_fn validate, int *argc_p,
                         char **argv, FILE *dump_out, char *err, size_t errlen)
{
    int argc = *argc_p, i, out, rc;
    const char *path = NULL, *val = NULL;
    const char **sets;
    enum cfg_arg kind;
    size_t nsets = 0;
    bool dump = false;

    rc = mc_config_set_defaults(table, base); /* first: cleanup is safe from here on */
    if (rc != 0)
        return cfg_err(err, errlen, rc, "cannot apply the defaults (%s)", cfg_rc_text(rc));
    sets = calloc(argc > 0 ? (size_t)argc : 1, sizeof(*sets));
    if (sets == NULL)
        return cfg_err(err, errlen, MC_ERR_NOMEM, "out of memory");

    /* pass 1: collect, leaving argv alone until everything is known to be good */
    for (i = 1; i < argc; i++) {
        rc = cfg_arg_classify(argc, argv, &i, &kind, &val, err, errlen);
        if (rc != 0)
            goto out_free;
        if (kind == CFG_ARG_END)
            break;
        if (kind == CFG_ARG_CONFIG) {
            if (path != NULL) {
                rc = cfg_err(err, errlen, MC_ERR_INVALID, "--config given twice ('%s', '%s')",
                             path, val);
                goto out_free;
            }
            path = val;
        } else if (kind == CFG_ARG_SET) {
            sets[nsets++] = val;
        } else if (kind == CFG_ARG_DUMP) {
            dump = true;
        }
    }

    rc = cfg_load_sources(table, base, path, env_prefix, sets, nsets, err, errlen);
    if (rc != 0)
        goto out_free;
    if (dump) {
        /* what is in effect, even when it would not pass the cross-field rules (they are
         * still checked below, and fail the run: the dump shows what to fix) */
        rc = mc_config_dump_json(table, base, dump_out != NULL ? dump_out : stdout);
        if (rc != 0) {
            cfg_err(err, errlen, rc, "--dump-config: cannot write the config (%s)",
                    cfg_rc_text(rc));
            goto out_free;
        }
    }
    if (validate != NULL) {
        rc = validate(base, err, errlen);
        if (rc != 0) {
            rc = rc < 0 ? rc : MC_ERR_INVALID;
            goto out_free;
        }
    }
    if (dump) {
        rc = MC_CONFIG_EXIT;
        goto out_free;
    }

    /* pass 2: compact argv, keeping what is not ours ("--" and all after it included) */
    out = argc > 0 ? 1 : 0; /* argv[0] stays; an empty argv stays empty */
    for (i = 1; i < argc; i++) {
        int first = i;

        cfg_arg_classify(argc, argv, &i, &kind, &val, NULL, 0); /* succeeded in pass 1 */
        if (kind == CFG_ARG_END) {
            while (i < argc)
                argv[out++] = argv[i++];
            break;
        }
        if (kind == CFG_ARG_OTHER)
            argv[out++] = argv[first];
    }
    argv[out] = NULL;
    *argc_p = out;
    rc = 0;
out_free:
    free(sets);
    return rc;
}
