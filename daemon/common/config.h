/*
 * mc_config: the table-driven config engine of the daemons.
 *
 * A daemon describes each knob once, in a table of struct mc_config_entry (name, type,
 * default, bounds, field offset, doc), and the engine derives everything else from it:
 * defaults, `--set key=value`, the JSON config file, MC_* environment overrides, the
 * effective config dump (`--dump-config`) and the markdown of docs/config.md. No option
 * lives outside a table.
 *
 * It is not a registry: there is no global state, every call names its table and the
 * struct the table describes (`base`). It does not log: errors are returned as negative
 * MC_ERR_* codes with a one-line message in the caller's `err` buffer (which may be NULL
 * when `errlen` is 0), and the caller decides where the message goes. It is not
 * thread-safe for one struct: load the config before starting threads, then treat it as
 * read-only.
 *
 * Precedence, lowest to highest (mc_config_load and mc_config_parse_args implement it):
 *   table defaults < JSON file (--config) < environment (MC_<KEY>) < --set key=value.
 *
 * Value syntax (the same for --set, the environment and JSON strings):
 *   MC_CFG_BOOL    true/false, yes/no, on/off, 1/0 (any case)
 *   MC_CFG_U64     decimal digits only: no sign, no spaces, no hex, no fraction
 *   MC_CFG_SIZE    bytes: digits plus an optional unit B, K, M, G, T or KiB, MiB, GiB, TiB
 *                  (any case), all powers of 1024: "512M", "4GiB", "65536"
 *   MC_CFG_MS      milliseconds: digits plus an optional unit ms, s, m, h: "250", "30s", "10m"
 *   MC_CFG_DOUBLE  a finite decimal number ("0.95", "1e-3"); NaN and infinities are refused
 *   MC_CFG_STRING  any text; stored as a heap copy (char *) owned by the struct
 *   MC_CFG_ENUM    one of the entry's `choices` (any case); stored as the int index
 * Integers overflowing 64 bits and values outside the entry's bounds are refused with a
 * message naming the key, the value and the allowed range.
 *
 * Included tables: an MC_CFG_TABLE entry (see MC_CONFIG_INCLUDE) splices another table,
 * describing a struct embedded at `offset`, into this one. Keys stay flat: a daemon's
 * table is its own knobs plus the tables it includes (e.g. mc_config_daemon_table for
 * log_level plus mc_master_config_table), and all keys of the result must be unique.
 */
#ifndef MC_COMMON_CONFIG_H
#define MC_COMMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum mc_config_type {
    MC_CFG_BOOL,   /* bool */
    MC_CFG_U64,    /* uint64_t, a plain count */
    MC_CFG_SIZE,   /* uint64_t bytes, accepts K/M/G/T suffixes (powers of 1024) */
    MC_CFG_MS,     /* uint64_t milliseconds, accepts ms/s/m/h suffixes */
    MC_CFG_DOUBLE, /* double, finite */
    MC_CFG_STRING, /* char *, heap copy owned by the struct, NULL when unset */
    MC_CFG_ENUM,   /* int, index into `choices` */
    MC_CFG_TABLE,  /* not a key: splices `sub` (a struct embedded at `offset`) in here */
};

/*
 * One knob. A table is an array of these ended by an entry whose `name` is NULL.
 *
 * name     the key: lower case letters, digits and '_' (also the JSON key; the environment
 *          variable is the prefix plus the key in upper case)
 * def      the default, in the value syntax above; NULL only for MC_CFG_STRING (unset)
 * min, max inclusive bounds for U64, SIZE, MS (in bytes / ms) and DOUBLE; they apply only
 *          when min < max (leave both 0 for "the type's whole range"); ignored otherwise
 * offset   offsetof() the field in the struct the table describes
 * doc      one or two sentences for docs/config.md (no newlines)
 * choices  MC_CFG_ENUM only: the value names, ended by NULL
 * sub      MC_CFG_TABLE only: the included table (`name` is then just a label)
 */
struct mc_config_entry {
    const char *name;
    enum mc_config_type type;
    const char *def;
    double min, max;
    size_t offset;
    const char *doc;
    const char *const *choices;
    const struct mc_config_entry *sub;
    bool secret; /* MC_CFG_STRING: dumps show "(set)" instead of the value */
    bool json;   /* MC_CFG_STRING holding JSON text: a config file may give the object or
                    array itself, which is stored as its compact text */
};

/* An entry splicing `table`, which describes the member `member` of `struct_type`. */
#define MC_CONFIG_INCLUDE(struct_type, member, table)                                          \
    {                                                                                          \
        .name = #member, .type = MC_CFG_TABLE, .offset = offsetof(struct_type, member),        \
        .sub = (table), .doc = ""                                                              \
    }

/* Included tables nest at most this deep (a table including a table including ...). */
#define MC_CONFIG_MAX_DEPTH 4

/* The environment prefix every mcstore daemon uses: lease_ttl_ms <-> MC_LEASE_TTL_MS. */
#define MC_CONFIG_ENV_PREFIX "MC_"

/*
 * Daemon-level knobs shared by every daemon main (not by the services they host): embed
 * struct mc_config_daemon in the main's config struct and include mc_config_daemon_table
 * with MC_CONFIG_INCLUDE. After loading, the main applies them itself:
 * mc_log_set_level(cfg.daemon.log_level).
 */
struct mc_config_daemon {
    int log_level; /* an MC_LOG_* level (log.h); key log_level, default "info" */
};
extern const struct mc_config_entry mc_config_daemon_table[];

/* Validation hook for the cross-field rules of a daemon (e.g. low <= high watermark):
 * returns 0, or MC_ERR_INVALID with a message in `err`. */
typedef int (*mc_config_validate_fn)(const void *base, char *err, size_t errlen);

/*
 * Check a table itself: keys well formed and unique (across included tables), docs
 * present, every default parses and lies within its bounds, enum choices and included
 * tables present, nesting within MC_CONFIG_MAX_DEPTH. For unit tests and debug builds;
 * the other calls assume a table that passes. Returns 0 or MC_ERR_INVALID (+ message).
 */
int mc_config_table_check(const struct mc_config_entry *table, char *err, size_t errlen);

/*
 * Check the values of a filled struct against the table: numbers within bounds, doubles
 * finite, enum indexes valid. Values set through this module always pass; this is for
 * structs filled or changed by code, and the first step of a daemon's validate hook.
 * Returns 0 or MC_ERR_INVALID with "<key>: <problem>" in `err`.
 */
int mc_config_check_values(const struct mc_config_entry *table, const void *base, char *err,
                           size_t errlen);

/*
 * Initialise every field of `base` to its default. It does not read the previous contents
 * (it is an init, not a reset: call mc_config_cleanup first to reuse a struct that holds
 * strings). String fields are NULL before any allocation, so mc_config_cleanup is safe
 * after any return. Errors: MC_ERR_NOMEM (a string default could not be copied),
 * MC_ERR_INTERNAL (a default does not parse: the table fails mc_config_table_check).
 */
int mc_config_set_defaults(const struct mc_config_entry *table, void *base);

/* Free the MC_CFG_STRING fields of `base` and set them to NULL. Accepts a NULL base. */
void mc_config_cleanup(const struct mc_config_entry *table, void *base);

/*
 * Set one key from its text form. On success the field is replaced (a previous string is
 * freed); on failure `base` is unchanged. Errors: MC_ERR_INVALID (unknown key, with the
 * closest known key suggested; bad value; out of bounds), MC_ERR_NOMEM.
 */
int mc_config_set(const struct mc_config_entry *table, void *base, const char *key,
                  const char *value, char *err, size_t errlen);

/* mc_config_set for one "key=value" argument (split at the first '='); what --set takes.
 * An argument without '=' or with an empty key is MC_ERR_INVALID. */
int mc_config_set_kv(const struct mc_config_entry *table, void *base, const char *kv, char *err,
                     size_t errlen);

/*
 * Apply a flat JSON object: each member sets one key. Numbers, strings in the value
 * syntax ("512M", "30s") and booleans are accepted where the type allows (a JSON integer
 * for U64/SIZE/MS, any number for DOUBLE, true/false for BOOL, a string for every type,
 * null for an unset STRING). Unknown keys, duplicate keys, nested values, a non-object
 * top level and syntax errors are refused. All members are checked before any is applied,
 * so on MC_ERR_INVALID `base` is unchanged (on MC_ERR_NOMEM it may be partly updated but
 * stays valid for mc_config_cleanup).
 * Messages: "<path>:<line>:<column>: <jansson's text>" for syntax errors,
 * "<path>: <key>: <problem>" otherwise.
 * Errors: MC_ERR_INVALID, MC_ERR_IO (the file cannot be opened or read), MC_ERR_NOMEM.
 */
int mc_config_load_json_file(const struct mc_config_entry *table, void *base, const char *path,
                             char *err, size_t errlen);
/* The same for JSON text held in memory (messages say "<string>" for the path). */
int mc_config_load_json_string(const struct mc_config_entry *table, void *base,
                               const char *json, char *err, size_t errlen);

/*
 * Apply environment overrides: for each key, the variable `prefix` + KEY in upper case
 * (prefix "MC_": lease_ttl_ms <-> MC_LEASE_TTL_MS), read with getenv(); unset variables
 * are skipped, set ones (even empty) must parse. Variables that match no key are ignored
 * (the MC_ namespace is shared with libmc). All variables are checked before any is
 * applied, as for JSON. Errors: MC_ERR_INVALID ("MC_X: <key>: <problem>"), MC_ERR_NOMEM.
 */
int mc_config_load_env(const struct mc_config_entry *table, void *base, const char *prefix,
                       char *err, size_t errlen);

/*
 * The precedence helper: mc_config_set_defaults, then the JSON file `path` (skipped when
 * NULL), then the environment with `env_prefix` (skipped when NULL), then each of the
 * `nsets` "key=value" strings in order (later ones win). It initialises `base` like
 * mc_config_set_defaults: call mc_config_cleanup afterwards whatever it returns. It does
 * not run any cross-field validation. Errors: those of the steps; the message says which.
 */
int mc_config_load(const struct mc_config_entry *table, void *base, const char *path,
                   const char *env_prefix, const char *const *sets, size_t nsets, char *err,
                   size_t errlen);

/*
 * Write the effective config as one pretty JSON object, keys in table order, followed by
 * a newline. Values are in their natural unit as JSON numbers (sizes in bytes, durations
 * in ms; an integer above INT64_MAX becomes a decimal string), booleans as true/false,
 * enums and strings as strings (an unset string as null). Doubles are written with the
 * fewest digits that read back to the same value, so loading the dump with
 * mc_config_load_json_* reproduces the struct exactly.
 * Errors: MC_ERR_NOMEM, MC_ERR_IO (writing `out` failed).
 */
int mc_config_dump_json(const struct mc_config_entry *table, const void *base, FILE *out);

/*
 * Write the markdown documentation of a table: the line `title` (e.g. "## Master
 * service") unless NULL, a blank line, then a table with the columns key, type, default,
 * bounds, environment variable (with `env_prefix`), description. Deterministic output.
 * Errors: MC_ERR_IO.
 */
int mc_config_doc_markdown(const struct mc_config_entry *table, const char *title,
                           const char *env_prefix, FILE *out);

/* mc_config_parse_args returned: the effective config was printed, exit 0. */
#define MC_CONFIG_EXIT 1

/* The lines a daemon's --help shows for the options mc_config_parse_args handles. */
#define MC_CONFIG_USAGE                                                                        \
    "  --config FILE      load settings from a JSON file (a flat object of key: value)\n"      \
    "  --set KEY=VALUE    set one setting; repeatable; wins over the file and MC_* env\n"      \
    "  --dump-config      print the effective configuration as JSON and exit\n"

/*
 * The config half of a daemon main's command line, run before getopt_long. It takes out
 * of argv, up to a "--" argument:
 *   --config FILE | --config=FILE    the JSON file (at most once)
 *   --set K=V | --set=K=V            one override (repeatable, applied in order)
 *   --dump-config                    print the effective config to `dump_out` (stdout
 *                                    when NULL) and return MC_CONFIG_EXIT
 * then loads `base` with the precedence above (env_prefix, e.g. MC_CONFIG_ENV_PREFIX, or
 * NULL for no environment), and runs `validate` (when not NULL) on the result.
 *
 * argv is compacted in place: argv[0] and every argument it does not take keep their
 * order, *argc_p is updated and argv[*argc_p] is set to NULL, ready for getopt_long.
 * Limitation: it cannot know the arity of the main's own options, so a value that is
 * literally "--set" etc. must be written as --opt=value.
 *
 * `base` is initialised by this call: call mc_config_cleanup whatever it returns.
 * Returns 0 (go on), MC_CONFIG_EXIT (config dumped: exit 0), or an error with a message
 * (print it and the usage, exit 2): MC_ERR_INVALID (bad option, value or validation),
 * MC_ERR_IO (the file cannot be read, or the dump could not be written), MC_ERR_NOMEM.
 */
int mc_config_parse_args(const struct mc_config_entry *table, void *base,
                         const char *env_prefix, mc_config_validate_fn validate, int *argc_p,
                         char **argv, FILE *dump_out, char *err, size_t errlen);

#endif /* MC_COMMON_CONFIG_H */
