/*
 * mc_log: leveled logging to stderr, one write(2) per line (see log.h).
 *
 * Not buffered through stdio on purpose: stdio would take a lock per FILE and could split
 * a long line into several writes; formatting into a stack buffer and writing it at once
 * keeps lines whole (writes of <= PIPE_BUF bytes to a pipe are atomic) without a lock.
 */
#include "daemon/common/log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "mc/mc_status.h"

_Static_assert(MC_LOG_LINE_MAX <= PIPE_BUF, "a log line must reach a pipe in one write");

#define MC_LOG_IDENT_MAX 64
#define MC_LOG_CUT_MARK  "[...]"

const char *const mc_log_level_names[] = {"error", "warn", "info", "debug", "trace", NULL};

/* Upper case and padded to one width so messages line up. */
static const char *const mc_log_level_tags[] = {"ERROR", "WARN ", "INFO ", "DEBUG", "TRACE"};

_Atomic int mc_log_cur_level = MC_LOG_INFO;

static char mc_log_ident[MC_LOG_IDENT_MAX];

void mc_log_set_level(int level)
{
    if (level < MC_LOG_ERROR)
        level = MC_LOG_ERROR;
    if (level > MC_LOG_TRACE)
        level = MC_LOG_TRACE;
    atomic_store_explicit(&mc_log_cur_level, level, memory_order_relaxed);
}

int mc_log_get_level(void)
{
    return atomic_load_explicit(&mc_log_cur_level, memory_order_relaxed);
}

int mc_log_level_parse(const char *s, int *level_p)
{
    int i;

    if (s == NULL)
        return MC_ERR_INVALID;
    for (i = MC_LOG_ERROR; i <= MC_LOG_TRACE; i++) {
        if (strcasecmp(s, mc_log_level_names[i]) == 0) {
            *level_p = i;
            return 0;
        }
    }
    return MC_ERR_INVALID;
}

const char *mc_log_level_name(int level)
{
    if (level < MC_LOG_ERROR || level > MC_LOG_TRACE)
        return "?";
    return mc_log_level_names[level];
}

void mc_log_set_ident(const char *ident)
{
    if (ident == NULL)
        ident = "";
    snprintf(mc_log_ident, sizeof(mc_log_ident), "%s", ident);
}

/* Write "<time> <LEVEL> [ident: ]" at buf; returns its length (< len). */
static size_t mc_log_format_prefix(char *buf, size_t len, int level)
{
    struct timespec ts;
    struct tm tm;
    const char *tag = "?    ";
    size_t n;
    int m;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm); /* 0 only if it did not fit */
    if (level >= MC_LOG_ERROR && level <= MC_LOG_TRACE)
        tag = mc_log_level_tags[level];
    if (mc_log_ident[0] != '\0')
        m = snprintf(buf + n, len - n, ".%03ldZ %s %s: ", ts.tv_nsec / 1000000L, tag,
                     mc_log_ident);
    else
        m = snprintf(buf + n, len - n, ".%03ldZ %s ", ts.tv_nsec / 1000000L, tag);
    if (m < 0)
        return n;
    n += (size_t)m;
    return n < len ? n : len - 1;
}

void mc_log_vprintf(int level, const char *fmt, va_list ap)
{
    char buf[MC_LOG_LINE_MAX];
    size_t room, len;
    ssize_t w;
    int saved_errno = errno; /* callers log errno-based messages, then read errno again */
    int m;

    if (!mc_log_is_enabled(level))
        return;

    len = mc_log_format_prefix(buf, sizeof(buf), level);
    room = sizeof(buf) - 1 - len; /* keep one byte for the newline */
    m = vsnprintf(buf + len, room + 1, fmt, ap);
    if (m < 0) {
        m = snprintf(buf + len, room + 1, "(bad log format \"%s\")", fmt);
        if (m < 0)
            m = 0;
    }
    if ((size_t)m > room) {
        /* vsnprintf kept room bytes plus a NUL: replace the tail with the cut mark */
        len = sizeof(buf) - 1;
        memcpy(buf + len - strlen(MC_LOG_CUT_MARK), MC_LOG_CUT_MARK, strlen(MC_LOG_CUT_MARK));
    } else {
        len += (size_t)m;
        if (len > 0 && buf[len - 1] == '\n') /* a message that brings its own newline */
            len--;
    }
    buf[len++] = '\n';

    /* A short write cannot happen for <= PIPE_BUF bytes to a pipe; to a file or tty it
     * can only mean an error we have no one to report to. */
    do {
        w = write(STDERR_FILENO, buf, len);
    } while (w < 0 && errno == EINTR);
    errno = saved_errno;
}

void mc_log_printf(int level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    mc_log_vprintf(level, fmt, ap);
    va_end(ap);
}
