/*
 * The config engine's inside, shared by its two files: config.c turns text, JSON and the
 * environment into values, stores them and dumps them as JSON; config_out.c says what a
 * table holds (the markdown reference, the table's self-check) and calls into config.c,
 * never the reverse. Nothing outside
 * daemon/common/config*.c includes this.
 */
#ifndef MC_DAEMON_COMMON_CONFIG_INT_H
#define MC_DAEMON_COMMON_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/common/config.h"

#define CFG_NAME_MAX   64 /* longest key, so environment names fit a stack buffer */
#define CFG_SHOW_MAX   80 /* longest value quoted back in a message */
#define CFG_PREFIX_MAX 512

union cfg_val {
    bool b;
    uint64_t u;
    double d;
    const char *s; /* MC_CFG_STRING: borrowed until stored (copied then) */
    int e;
};

/* Iteration over a table and the tables it includes, flattened. */
struct cfg_iter {
    int depth;
    const struct mc_config_entry *pos[MC_CONFIG_MAX_DEPTH];
    size_t base[MC_CONFIG_MAX_DEPTH];
};

struct cfg_unit {
    const char *name;
    uint64_t mult;
};

void cfg_iter_init(struct cfg_iter *it, const struct mc_config_entry *table);
/* The next key entry, its field's offset from the outermost struct in *off_p; NULL at
 * the end. */
const struct mc_config_entry *cfg_iter_next(struct cfg_iter *it, size_t *off_p);

/* The message into err (when there is room), and code back. */
int cfg_err(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A formatted prefix in front of the message already in err (cutting its end). */
void cfg_err_prefix(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Text -> value, without (parse_text) and with (parse_checked) the entry's bounds. */
int cfg_parse_text(const struct mc_config_entry *e, const char *text, union cfg_val *v,
                   char *err, size_t errlen);
int cfg_parse_checked(const struct mc_config_entry *e, const char *text, union cfg_val *v,
                      char *err, size_t errlen);

const char *cfg_type_name(enum mc_config_type type);
void cfg_choices_list(const struct mc_config_entry *e, char *buf, size_t len);
bool cfg_has_bounds(const struct mc_config_entry *e);
int cfg_double_digits(double d);
void cfg_fmt_double(char *buf, size_t len, double d);
void cfg_fmt_bound(const struct mc_config_entry *e, double b, char *buf, size_t len);
/* PREFIXKEY in capitals: the environment variable of a key. */
void cfg_env_name(const char *prefix, const char *key, char *buf, size_t len);

#endif
