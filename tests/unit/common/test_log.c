/*
 * Unit tests of the daemons' logging (daemon/common/log.c): level filtering, the line
 * format, truncation of long messages, and that lines are written whole.
 *
 * Each test points stderr (fd 2) at a temporary file with dup2 and reads it back; Check
 * runs each test in its own forked child, and t_capture_end restores fd 2 anyway.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/common/log.h"
#include "mc/mc_status.h"

/* "2024-05-01T12:34:56.789Z ERROR ": the prefix of a line without ident */
#define T_PREFIX_LEN 31

static int t_saved_fd = -1;
static FILE *t_tmp;

static void t_capture_begin(void)
{
    t_tmp = tmpfile();
    ck_assert_ptr_nonnull(t_tmp);
    t_saved_fd = dup(STDERR_FILENO);
    ck_assert_int_ge(t_saved_fd, 0);
    ck_assert_int_eq(dup2(fileno(t_tmp), STDERR_FILENO), STDERR_FILENO);
}

/* Restore stderr and return everything logged meanwhile (caller frees). */
static char *t_capture_end(void)
{
    char *buf;
    long len;

    ck_assert_int_eq(dup2(t_saved_fd, STDERR_FILENO), STDERR_FILENO);
    close(t_saved_fd);
    len = lseek(fileno(t_tmp), 0, SEEK_END);
    ck_assert_int_ge(len, 0);
    buf = calloc(1, (size_t)len + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(pread(fileno(t_tmp), buf, (size_t)len, 0), len);
    fclose(t_tmp);
    return buf;
}

static size_t t_count(const char *s, const char *needle)
{
    size_t n = 0;

    while ((s = strstr(s, needle)) != NULL) {
        n++;
        s += strlen(needle);
    }
    return n;
}

static int t_evaluated;

static int t_side_effect(void)
{
    return ++t_evaluated;
}

START_TEST(test_log_level_filtering)
{
    char *out;

    mc_log_set_ident(NULL);
    mc_log_set_level(MC_LOG_WARN);
    ck_assert_int_eq(mc_log_get_level(), MC_LOG_WARN);
    ck_assert(mc_log_is_enabled(MC_LOG_ERROR));
    ck_assert(mc_log_is_enabled(MC_LOG_WARN));
    ck_assert(!mc_log_is_enabled(MC_LOG_INFO));

    t_capture_begin();
    mc_error("e-%d", 1);
    mc_warn("w-%d", 2);
    mc_info("i-%d", 3);
    mc_debug("d-%d", t_side_effect()); /* off: arguments are not evaluated */
    mc_trace("t-%d", t_side_effect());
    mc_log_set_level(MC_LOG_TRACE);
    mc_debug("d-%d", 4);
    mc_trace("t-%d", 5);
    mc_log_set_level(MC_LOG_ERROR);
    mc_warn("w-%d", 6);
    mc_error("e-%d", 7);
    out = t_capture_end();

    ck_assert_int_eq(t_evaluated, 0);
    ck_assert_ptr_nonnull(strstr(out, "ERROR e-1\n"));
    ck_assert_ptr_nonnull(strstr(out, "WARN  w-2\n"));
    ck_assert_ptr_null(strstr(out, "i-3"));
    ck_assert_ptr_nonnull(strstr(out, "DEBUG d-4\n"));
    ck_assert_ptr_nonnull(strstr(out, "TRACE t-5\n"));
    ck_assert_ptr_null(strstr(out, "w-6"));
    ck_assert_ptr_nonnull(strstr(out, "ERROR e-7\n"));
    ck_assert_uint_eq(t_count(out, "\n"), 5);
    free(out);

    /* out-of-range levels clamp: errors always get through */
    mc_log_set_level(-5);
    ck_assert_int_eq(mc_log_get_level(), MC_LOG_ERROR);
    mc_log_set_level(99);
    ck_assert_int_eq(mc_log_get_level(), MC_LOG_TRACE);
}
END_TEST

START_TEST(test_log_level_parse)
{
    int level = -1;

    ck_assert_int_eq(mc_log_level_parse("error", &level), 0);
    ck_assert_int_eq(level, MC_LOG_ERROR);
    ck_assert_int_eq(mc_log_level_parse("WARN", &level), 0);
    ck_assert_int_eq(level, MC_LOG_WARN);
    ck_assert_int_eq(mc_log_level_parse("Info", &level), 0);
    ck_assert_int_eq(level, MC_LOG_INFO);
    ck_assert_int_eq(mc_log_level_parse("debug", &level), 0);
    ck_assert_int_eq(level, MC_LOG_DEBUG);
    ck_assert_int_eq(mc_log_level_parse("trace", &level), 0);
    ck_assert_int_eq(level, MC_LOG_TRACE);
    level = 42;
    ck_assert_int_eq(mc_log_level_parse("verbose", &level), MC_ERR_INVALID);
    ck_assert_int_eq(mc_log_level_parse("", &level), MC_ERR_INVALID);
    ck_assert_int_eq(mc_log_level_parse("info ", &level), MC_ERR_INVALID);
    ck_assert_int_eq(mc_log_level_parse(NULL, &level), MC_ERR_INVALID);
    ck_assert_int_eq(level, 42); /* untouched on failure */

    ck_assert_str_eq(mc_log_level_name(MC_LOG_DEBUG), "debug");
    ck_assert_str_eq(mc_log_level_name(17), "?");
    ck_assert_str_eq(mc_log_level_names[MC_LOG_TRACE], "trace");
    ck_assert_ptr_null(mc_log_level_names[MC_LOG_TRACE + 1]);
}
END_TEST

START_TEST(test_log_format)
{
    regex_t re;
    char *out;
    int rc;

    mc_log_set_level(MC_LOG_INFO);
    mc_log_set_ident("mc-test");
    t_capture_begin();
    errno = EAGAIN;
    mc_warn("node %d silent for %s", 3, "10 s");
    ck_assert_int_eq(errno, EAGAIN); /* logging keeps errno */
    mc_info("brings its own newline\n");
    mc_log_set_ident("");
    mc_info("no ident");
    out = t_capture_end();

    rc = regcomp(&re,
                 "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
                 "WARN  mc-test: node 3 silent for 10 s\n"
                 "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
                 "INFO  mc-test: brings its own newline\n"
                 "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
                 "INFO  no ident\n$",
                 REG_EXTENDED);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(regexec(&re, out, 0, NULL, 0) == 0, "unexpected log output:\n%s", out);
    regfree(&re);
    free(out);
}
END_TEST

START_TEST(test_log_long_message_truncated)
{
    static char big[3 * MC_LOG_LINE_MAX];
    char long_ident[200];
    char *out;
    size_t len;

    memset(big, 'x', sizeof(big) - 1);
    memset(long_ident, 'i', sizeof(long_ident) - 1);
    long_ident[sizeof(long_ident) - 1] = '\0';
    mc_log_set_level(MC_LOG_INFO);
    mc_log_set_ident(long_ident); /* cut at 63 bytes */
    t_capture_begin();
    mc_error("%s", big);
    mc_error("after %s", "it");
    out = t_capture_end();

    len = strcspn(out, "\n") + 1;
    ck_assert_uint_eq(len, MC_LOG_LINE_MAX);
    ck_assert_int_eq(memcmp(out + len - 6, "[...]\n", 6), 0);
    ck_assert_ptr_nonnull(strstr(out, " ERROR "
                                      "iiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiii"
                                      "iiiiiiiiiiiii: xxx"));
    ck_assert_ptr_null(
        strstr(out, "iiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiii"));
    ck_assert_ptr_nonnull(strstr(out + len, "after it\n"));
    ck_assert_uint_eq(t_count(out, "\n"), 2);
    free(out);

    /* a message that exactly fills the line is whole; one byte more is cut */
    mc_log_set_ident(NULL);
    t_capture_begin();
    mc_error("%.*s", (int)(MC_LOG_LINE_MAX - 1 - T_PREFIX_LEN), big);
    mc_error("%.*s", (int)(MC_LOG_LINE_MAX - T_PREFIX_LEN), big);
    out = t_capture_end();
    ck_assert_uint_eq(strlen(out), 2 * MC_LOG_LINE_MAX);
    ck_assert_int_eq(memcmp(out + MC_LOG_LINE_MAX - 2, "x\n", 2), 0);
    ck_assert_int_eq(memcmp(out + 2 * MC_LOG_LINE_MAX - 6, "[...]\n", 6), 0);
    ck_assert_uint_eq(t_count(out, "[...]"), 1);
    free(out);
}
END_TEST

#define T_THREADS 8
#define T_LINES   500

static void *t_log_thread(void *arg)
{
    int id = (int)(long)arg, i;

    for (i = 0; i < T_LINES; i++)
        mc_info("thread %d line %d %s", id, i,
                "padding padding padding padding padding padding padding padding");
    return NULL;
}

START_TEST(test_log_threads_lines_whole)
{
    pthread_t th[T_THREADS];
    char *out, *line, *save = NULL;
    size_t n = 0;
    long i;

    mc_log_set_level(MC_LOG_INFO);
    mc_log_set_ident(NULL);
    t_capture_begin();
    for (i = 0; i < T_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, t_log_thread, (void *)i), 0);
    for (i = 0; i < T_THREADS; i++)
        pthread_join(th[i], NULL);
    out = t_capture_end();

    for (line = strtok_r(out, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        ck_assert_msg(strstr(line, " INFO  thread ") != NULL, "mangled line: %s", line);
        ck_assert_msg(t_count(line, "padding") == 8, "mangled line: %s", line);
        n++;
    }
    ck_assert_uint_eq(n, T_THREADS * T_LINES);
    free(out);
}
END_TEST

static Suite *t_log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");

    tcase_add_test(tc, test_log_level_filtering);
    tcase_add_test(tc, test_log_level_parse);
    tcase_add_test(tc, test_log_format);
    tcase_add_test(tc, test_log_long_message_truncated);
    tcase_add_test(tc, test_log_threads_lines_whole);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(t_log_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
