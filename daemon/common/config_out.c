/*
 * What the config engine says about a table itself (config_int.h): the markdown reference
 * of its keys (docs/config.md is generated from it) and the table's self-check that tests
 * run over every table the daemons use. It calls into config.c, never the other way.
 */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "daemon/common/config.h"
#include "daemon/common/config_int.h"
#include "mc/mc_status.h"

/* ---- markdown ------------------------------------------------------------------------ */

/* "10s", "250ms", "4GiB": the largest unit that divides v exactly. */
static void cfg_fmt_human(const struct mc_config_entry *e, uint64_t v, char *buf, size_t len)
{
    static const struct cfg_unit ms[] = {
        {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}, {NULL, 0}};
    static const struct cfg_unit size[] = {{"TiB", 1ULL << 40},
                                           {"GiB", 1ULL << 30},
                                           {"MiB", 1ULL << 20},
                                           {"KiB", 1ULL << 10},
                                           {"B", 1},
                                           {NULL, 0}};
    const struct cfg_unit *u = e->type == MC_CFG_MS ? ms : size;

    for (; u->name != NULL; u++) {
        if (v != 0 && v % u->mult == 0)
            break;
    }
    if (u->name == NULL)
        u = e->type == MC_CFG_MS ? &ms[3] : &size[4];
    snprintf(buf, len, "%" PRIu64 "%s", v / u->mult, u->name);
}

/* A number with its human form when that says more: "10000 (10s)", "64", "0.95". */
static void cfg_fmt_doc_value(const struct mc_config_entry *e, double d, char *buf, size_t len)
{
    char num[48], human[32];

    cfg_fmt_bound(e, d, num, sizeof(num));
    if (e->type != MC_CFG_MS && e->type != MC_CFG_SIZE) {
        snprintf(buf, len, "%s", num);
        return;
    }
    cfg_fmt_human(e, (uint64_t)d, human, sizeof(human));
    if ((uint64_t)d < (e->type == MC_CFG_SIZE ? 1024 : 1000)) /* "64 (64B)" says nothing */
        snprintf(buf, len, "%s", num);
    else
        snprintf(buf, len, "%s (%s)", num, human);
}

/* Markdown table cell text: '|' escaped, newlines flattened. */
static int cfg_put_cell(const char *s, FILE *out)
{
    for (; *s != '\0'; s++) {
        if (*s == '|' && fputc('\\', out) == EOF)
            return MC_ERR_IO;
        if (fputc(*s == '\n' ? ' ' : *s, out) == EOF)
            return MC_ERR_IO;
    }
    return 0;
}

static void cfg_doc_default(const struct mc_config_entry *e, char *buf, size_t len)
{
    union cfg_val v;

    if (e->def == NULL) {
        snprintf(buf, len, "(unset)");
        return;
    }
    if (cfg_parse_text(e, e->def, &v, NULL, 0) != 0) {
        snprintf(buf, len, "%s", e->def);
        return;
    }
    switch (e->type) {
    case MC_CFG_BOOL:
        snprintf(buf, len, "%s", v.b ? "true" : "false");
        break;
    case MC_CFG_U64:
    case MC_CFG_SIZE:
    case MC_CFG_MS:
        if (e->type == MC_CFG_U64 || v.u > (1ULL << 53))
            snprintf(buf, len, "%" PRIu64, v.u);
        else
            cfg_fmt_doc_value(e, (double)v.u, buf, len);
        break;
    case MC_CFG_DOUBLE:
        cfg_fmt_double(buf, len, v.d);
        break;
    case MC_CFG_STRING:
        snprintf(buf, len, "\"%s\"", e->def);
        break;
    case MC_CFG_ENUM:
    case MC_CFG_TABLE:
        snprintf(buf, len, "%s", e->def);
        break;
    }
}

static void cfg_doc_bounds(const struct mc_config_entry *e, char *buf, size_t len)
{
    char lo[64], hi[64];

    switch (e->type) {
    case MC_CFG_BOOL:
        snprintf(buf, len, "true, false");
        return;
    case MC_CFG_ENUM:
        cfg_choices_list(e, buf, len);
        return;
    case MC_CFG_STRING:
    case MC_CFG_TABLE:
        snprintf(buf, len, "any");
        return;
    default:
        break;
    }
    if (!cfg_has_bounds(e)) {
        snprintf(buf, len, "any");
        return;
    }
    cfg_fmt_doc_value(e, e->min, lo, sizeof(lo));
    cfg_fmt_doc_value(e, e->max, hi, sizeof(hi));
    snprintf(buf, len, "%s .. %s", lo, hi);
}

int mc_config_doc_markdown(const struct mc_config_entry *table, const char *title,
                           const char *env_prefix, FILE *out)
{
    char def[128], bounds[256], env[CFG_PREFIX_MAX];
    const struct mc_config_entry *e;
    struct cfg_iter it;
    size_t off;

    if (title != NULL && fprintf(out, "%s\n\n", title) < 0)
        return MC_ERR_IO;
    if (fprintf(out, "| Key | Type | Default | Bounds | Environment | Description |\n"
                     "|-----|------|---------|--------|-------------|-------------|\n") < 0)
        return MC_ERR_IO;
    cfg_iter_init(&it, table);
    while ((e = cfg_iter_next(&it, &off)) != NULL) {
        cfg_doc_default(e, def, sizeof(def));
        cfg_doc_bounds(e, bounds, sizeof(bounds));
        cfg_env_name(env_prefix, e->name, env, sizeof(env));
        if (fprintf(out, "| `%s` | %s | ", e->name, cfg_type_name(e->type)) < 0 ||
            cfg_put_cell(def, out) != 0 || fputs(" | ", out) == EOF ||
            cfg_put_cell(bounds, out) != 0 || fprintf(out, " | `%s` | ", env) < 0 ||
            cfg_put_cell(e->doc != NULL ? e->doc : "", out) != 0 || fputs(" |\n", out) == EOF)
            return MC_ERR_IO;
    }
    if (fflush(out) == EOF)
        return MC_ERR_IO;
    return 0;
}

/* ---- table check --------------------------------------------------------------------- */

static int cfg_check_structure(const struct mc_config_entry *table, int depth, char *err,
                               size_t errlen)
{
    const struct mc_config_entry *e;
    int rc;

    if (depth >= MC_CONFIG_MAX_DEPTH)
        return cfg_err(err, errlen, MC_ERR_INVALID,
                       "included tables nest deeper than MC_CONFIG_MAX_DEPTH (%d)",
                       MC_CONFIG_MAX_DEPTH);
    for (e = table; e->name != NULL; e++) {
        if (e->type == MC_CFG_TABLE) {
            if (e->sub == NULL)
                return cfg_err(err, errlen, MC_ERR_INVALID, "%s: included table is NULL",
                               e->name);
            rc = cfg_check_structure(e->sub, depth + 1, err, errlen);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

static int cfg_check_entry(const struct mc_config_entry *e, char *err, size_t errlen)
{
    union cfg_val v;
    const char *p;
    int rc;

    if (e->name[0] == '\0' || strlen(e->name) > CFG_NAME_MAX ||
        !islower((unsigned char)e->name[0]))
        return cfg_err(err, errlen, MC_ERR_INVALID,
                       "'%s': a key starts with a-z and has at "
                       "most %d characters",
                       e->name, CFG_NAME_MAX);
    for (p = e->name; *p != '\0'; p++) {
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_'))
            return cfg_err(err, errlen, MC_ERR_INVALID, "'%s': a key has only a-z, 0-9, _",
                           e->name);
    }
    if (e->doc == NULL || e->doc[0] == '\0' || strchr(e->doc, '\n') != NULL)
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: needs a one-line doc", e->name);
    if (e->type == MC_CFG_ENUM && (e->choices == NULL || e->choices[0] == NULL))
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: enum without choices", e->name);
    if (e->min > e->max || (e->min == e->max && e->min != 0))
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: bounds need min < max (or both 0)",
                       e->name);
    if (e->type != MC_CFG_DOUBLE && cfg_has_bounds(e) && e->min < 0)
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: unsigned with a negative bound",
                       e->name);
    if (e->def == NULL) {
        if (e->type == MC_CFG_STRING)
            return 0;
        return cfg_err(err, errlen, MC_ERR_INVALID, "%s: needs a default", e->name);
    }
    rc = cfg_parse_checked(e, e->def, &v, err, errlen);
    if (rc != 0)
        cfg_err_prefix(err, errlen, "default of ");
    return rc;
}

int mc_config_table_check(const struct mc_config_entry *table, char *err, size_t errlen)
{
    const struct mc_config_entry *e, *f;
    struct cfg_iter it, it2;
    size_t off, off2;
    int rc;

    if (table == NULL)
        return cfg_err(err, errlen, MC_ERR_INVALID, "no table");
    rc = cfg_check_structure(table, 0, err, errlen);
    if (rc != 0)
        return rc;
    cfg_iter_init(&it, table);
    while ((e = cfg_iter_next(&it, &off)) != NULL) {
        rc = cfg_check_entry(e, err, errlen);
        if (rc != 0)
            return rc;
        /* quadratic, but tables are tens of keys and this runs in tests */
        it2 = it;
        while ((f = cfg_iter_next(&it2, &off2)) != NULL) {
            if (strcmp(e->name, f->name) == 0)
                return cfg_err(err, errlen, MC_ERR_INVALID, "%s: key defined twice", e->name);
        }
    }
    return 0;
}
