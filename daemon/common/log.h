/*
 * mc_log: leveled logging of the daemons to stderr.
 *
 * Each line is "<UTC time> <LEVEL> [<ident>: ]<message>\n", for example
 *   2024-05-01T12:34:56.789Z WARN  mc-master: node 3 silent for 10000 ms, declared dead
 * written with a single write(2) of at most MC_LOG_LINE_MAX bytes (<= PIPE_BUF), so lines
 * from different threads never interleave; a longer message is cut and ends in "[...]".
 * The macros test the level before evaluating their arguments, so a disabled
 * mc_debug(...) costs one relaxed atomic load.
 *
 * It is not for libmc (which never prints, it hands lines to a callback) nor for the hot
 * path (ring push/pop, UCX progress), which counts and returns. It has no file output,
 * no rotation and no syslog: the daemons' supervisor owns stderr.
 *
 * Thread safety: every call may be made from any thread, except mc_log_set_ident, which
 * is meant for start-up, before other threads log.
 */
#ifndef MC_COMMON_LOG_H
#define MC_COMMON_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

enum mc_log_level {
    MC_LOG_ERROR = 0, /* an operation or the daemon failed */
    MC_LOG_WARN,      /* something unexpected that the daemon survives */
    MC_LOG_INFO,      /* start-up, shutdown, membership changes (the default level) */
    MC_LOG_DEBUG,     /* per-request detail, for debugging */
    MC_LOG_TRACE,     /* everything, very verbose */
};

/* The longest line written, newline included; longer messages are truncated. */
#define MC_LOG_LINE_MAX 2048

/* The level names in order ("error", "warn", "info", "debug", "trace"), ended by NULL.
 * Static strings; also the choices of the log_level config key. */
extern const char *const mc_log_level_names[];

/* The current level; read it through mc_log_is_enabled. */
extern _Atomic int mc_log_cur_level;

/* Is a message at `level` written? */
static inline bool mc_log_is_enabled(int level)
{
    return level <= atomic_load_explicit(&mc_log_cur_level, memory_order_relaxed);
}

/* Write messages at `level` and below (more severe); MC_LOG_INFO until called. A level
 * below MC_LOG_ERROR still lets errors through. */
void mc_log_set_level(int level);
int mc_log_get_level(void);

/* Parse a level name (any case: "error", "warn", "info", "debug", "trace") into
 * *level_p. Returns 0, or MC_ERR_INVALID (s NULL or unknown; *level_p untouched). */
int mc_log_level_parse(const char *s, int *level_p);

/* The name of `level` ("?" for an unknown one). Static string. */
const char *mc_log_level_name(int level);

/* Put `ident` (e.g. "mc-master"; copied, cut at 63 bytes) before every message; NULL or
 * "" removes it. Call at start-up, before other threads log. */
void mc_log_set_ident(const char *ident);

#if defined(__GNUC__)
#define MC_LOG_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define MC_LOG_PRINTF(fmt_idx, arg_idx)
#endif

/* Write one line at `level` if it is enabled (prefer the macros below). errno is
 * preserved, so `mc_error("open %s: %s", p, strerror(errno))` style calls stay safe. */
void mc_log_printf(int level, const char *fmt, ...) MC_LOG_PRINTF(2, 3);
void mc_log_vprintf(int level, const char *fmt, va_list ap) MC_LOG_PRINTF(2, 0);

/* Log at a level; the arguments are evaluated only when the level is enabled. */
#define mc_log(level, ...)                                                                     \
    do {                                                                                       \
        if (mc_log_is_enabled(level))                                                          \
            mc_log_printf((level), __VA_ARGS__);                                               \
    } while (0)

#define mc_error(...) mc_log(MC_LOG_ERROR, __VA_ARGS__)
#define mc_warn(...)  mc_log(MC_LOG_WARN, __VA_ARGS__)
#define mc_info(...)  mc_log(MC_LOG_INFO, __VA_ARGS__)
#define mc_debug(...) mc_log(MC_LOG_DEBUG, __VA_ARGS__)
#define mc_trace(...) mc_log(MC_LOG_TRACE, __VA_ARGS__)

#endif /* MC_COMMON_LOG_H */
