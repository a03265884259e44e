/*
 * The metrics, health and readiness pages of a standalone mc-agent (docs/metrics.md): the
 * exposition parses strictly, counters and histograms move by what a workload did, every
 * served name is documented, wrong methods and paths are refused, and hostile requests
 * neither crash the agent nor disturb its clients.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc.h>

#include "t_agent.h"
#include "t_http.h"


static struct t_agent g_agent;
static unsigned g_port;

static void setup(void)
{
    static const char *const extra[] = {"--metrics-listen", "127.0.0.1:0", NULL};

    t_agent_start(&g_agent, "64M", extra);
    g_port = t_metrics_port(g_agent.log);
    if (g_port == 0) {
        t_agent_dump_log(&g_agent);
        ck_abort_msg("no \"metrics on HOST:PORT\" in the agent's log");
    }
}

static void teardown(void)
{
    ck_assert_int_eq(t_agent_stop(&g_agent), 0);
}

START_TEST(test_metrics_counters_move_with_the_workload)
{
    struct t_prom *p0 = malloc(sizeof(*p0)), *p1 = malloc(sizeof(*p1));
    enum { N = 40, LEN = 1000 };
    uint8_t in[LEN], out[LEN];
    mc_client_t *c;
    uint64_t deadline;
    char key[32];
    size_t got;
    int i;

    ck_assert_ptr_nonnull(p0);
    ck_assert_ptr_nonnull(p1);
    t_prom_scrape(g_port, p0);
    ck_assert_int_eq(mc_connect(g_agent.sock, &c), 0);
    memset(in, 0x5a, sizeof(in));
    for (i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "m/%d", i);
        ck_assert_int_eq(mc_put(c, key, in, LEN, NULL), 0);
    }
    for (i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "m/%d", i);
        ck_assert_int_eq(mc_get(c, key, out, sizeof(out), &got), 0);
        ck_assert_uint_eq(got, LEN);
    }
    /* the counters are published by the loop every ~10 ms: wait for them */
    deadline = t_now_ms() + 5000;
    do {
        t_prom_scrape(g_port, p1);
        if (t_prom_val(p1, "mcstore_agent_gets_total", "") >=
            t_prom_val(p0, "mcstore_agent_gets_total", "") + N)
            break;
        t_poll_pause();
    } while (t_now_ms() < deadline);
    ck_assert_double_eq(t_prom_val(p1, "mcstore_agent_puts_total", ""),
                        t_prom_val(p0, "mcstore_agent_puts_total", "") + N);
    ck_assert_double_eq(t_prom_val(p1, "mcstore_agent_gets_total", ""),
                        t_prom_val(p0, "mcstore_agent_gets_total", "") + N);
    ck_assert_double_eq(t_prom_val(p1, "mcstore_agent_get_hits_total", ""),
                        t_prom_val(p0, "mcstore_agent_get_hits_total", "") + N);
    ck_assert_double_eq(t_prom_val(p1, "mcstore_agent_bytes_written_total", ""),
                        t_prom_val(p0, "mcstore_agent_bytes_written_total", "") + N * LEN);
    ck_assert(t_prom_val(p1, "mcstore_agent_ops_total", "") >=
              t_prom_val(p0, "mcstore_agent_ops_total", "") + 2 * N);
    ck_assert_double_eq(t_prom_val(p1, "mcstore_agent_put_latency_seconds_count", ""),
                        t_prom_val(p0, "mcstore_agent_put_latency_seconds_count", "") + N);
    ck_assert_double_eq(t_prom_val(p1, "mcstore_agent_get_latency_seconds_count", ""),
                        t_prom_val(p0, "mcstore_agent_get_latency_seconds_count", "") + N);
    ck_assert(t_prom_val(p1, "mcstore_agent_get_latency_seconds_sum", "") >
              t_prom_val(p0, "mcstore_agent_get_latency_seconds_sum", ""));
    ck_assert_double_eq(t_prom_val(p1, "mcstore_agent_objects", ""),
                        t_prom_val(p0, "mcstore_agent_objects", "") + N);
    ck_assert(t_prom_val(p1, "mcstore_agent_used_bytes", "tier=\"dram\"") >= N * LEN);
    ck_assert_double_eq(t_prom_val(p1, "mcstore_agent_capacity_bytes", "tier=\"dram\""), 64 << 20);
    ck_assert_double_eq(t_prom_val(p1, "mcstore_agent_clients", ""), 1);
    /* standalone: no cluster-only figures */
    ck_assert(isnan(t_prom_value(p1, "mcstore_agent_peer_reads_total", "")));
    mc_close(c);
    free(p0);
    free(p1);
}
END_TEST

/* Every family served is in docs/metrics.md (which is generated from the same table). */
START_TEST(test_metrics_every_name_documented)
{
    const char *md = getenv("MC_METRICS_MD");
    struct t_prom *p = malloc(sizeof(*p));
    char *doc, pat[160];
    FILE *f;
    long n;

    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(md);
    f = fopen(md, "r");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    doc = calloc(1, (size_t)n + 1);
    ck_assert_ptr_nonnull(doc);
    ck_assert_uint_eq(fread(doc, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    t_prom_scrape(g_port, p);
    ck_assert_uint_gt(p->nf, 20);
    for (size_t i = 0; i < p->nf; i++) {
        snprintf(pat, sizeof(pat), "| `%s` |", p->f[i].name);
        ck_assert_msg(strstr(doc, pat) != NULL, "%s is not in docs/metrics.md", p->f[i].name);
    }
    free(doc);
    free(p);
}
END_TEST

START_TEST(test_metrics_health_ready_and_refusals)
{
    static const char *const methods[] = {"POST", "PUT", "DELETE", "HEAD", "OPTIONS"};
    char buf[4096];
    const char *body;

    ck_assert_int_eq(t_http(g_port, "GET", "/health", buf, sizeof(buf), &body), 200);
    ck_assert_str_eq(body, "ok\n");
    ck_assert_int_eq(t_http(g_port, "GET", "/ready", buf, sizeof(buf), &body), 200);
    ck_assert_int_eq(t_http(g_port, "GET", "/", buf, sizeof(buf), &body), 404);
    ck_assert_int_eq(t_http(g_port, "GET", "/metrics/x", buf, sizeof(buf), &body), 404);
    ck_assert_int_eq(t_http(g_port, "GET", "/health?x=1", buf, sizeof(buf), &body), 200);
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        ck_assert_msg(t_http(g_port, methods[i], "/metrics", buf, sizeof(buf), &body) == 405,
                      "%s /metrics", methods[i]);
}
END_TEST

START_TEST(test_metrics_hostile_requests_do_not_disturb)
{
    enum { CONNS = 200, LONG = 256 * 1024 };
    char *req = malloc(LONG + 256), buf[4096];
    int fds[CONNS], code, i;
    uint8_t in[100] = {1}, out[100];
    const char *body;
    mc_client_t *c;
    size_t got;

    ck_assert_ptr_nonnull(req);
    ck_assert_int_eq(mc_connect(g_agent.sock, &c), 0);
    /* a URL far beyond the request memory: refused (414) or cut off, never served */
    memcpy(req, "GET /", 5);
    memset(req + 5, 'a', LONG);
    strcpy(req + 5 + LONG, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    code = t_http_raw(g_port, req, strlen(req), buf, sizeof(buf), &body);
    ck_assert_msg(code != 200, "a %d-byte URL was served", LONG);
    /* a header that never ends, garbage, a bare newline */
    code = t_http_raw(g_port, "\x01\x02garbage\r\n\r\n", 13, buf, sizeof(buf), &body);
    ck_assert_int_ne(code, 200);
    code = t_http_raw(g_port, "GET /metrics HTTP/9.9\r\n\r\n", 25, buf, sizeof(buf), &body);
    ck_assert_int_ne(code, 200);
    /* many idle connections at once, some with half a request */
    for (i = 0; i < CONNS; i++) {
        /* nonblocking: past the server's connection limit and backlog, a blocking
         * connect would wait out SYN retries */
        fds[i] = t_http_connect_flags(g_port, SOCK_NONBLOCK);
        if (fds[i] >= 0 && i % 2 == 0)
            (void)!send(fds[i], "GET /met", 8, MSG_NOSIGNAL);
    }
    /* the agent's clients are served meanwhile */
    for (i = 0; i < 50; i++) {
        char key[32];

        snprintf(key, sizeof(key), "h/%d", i);
        ck_assert_int_eq(mc_put(c, key, in, sizeof(in), NULL), 0);
        ck_assert_int_eq(mc_get(c, key, out, sizeof(out), &got), 0);
    }
    for (i = 0; i < CONNS; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
    }
    /* and the pages come back once the flood is gone */
    {
        uint64_t deadline = t_now_ms() + 10000;

        do {
            code = t_http(g_port, "GET", "/health", buf, sizeof(buf), &body);
            if (code == 200)
                break;
            t_poll_pause();
        } while (t_now_ms() < deadline);
    }
    ck_assert_int_eq(code, 200);
    ck_assert_int_eq(kill(g_agent.pid, 0), 0);
    mc_close(c);
    free(req);
}
END_TEST

/* SIGTERM with a GET held back (--test-fault get_delay_ms): /health says draining meanwhile. */
START_TEST(test_metrics_health_503_while_draining)
{
    static const char *const extra[] = {"--metrics-listen", "127.0.0.1:0", "--test-fault",
                                        "get_delay_ms=3000", NULL};
    struct t_agent a;
    mc_client_t *c;
    mc_op_t *op = NULL;
    size_t got;
    uint8_t in[10] = {0}, out[10];
    char buf[4096];
    const char *body;
    uint64_t deadline;
    unsigned port;
    int code = 0;

    t_agent_start(&a, "16M", extra);
    port = t_metrics_port(a.log);
    ck_assert_uint_ne(port, 0);
    ck_assert_int_eq(mc_connect(a.sock, &c), 0);
    ck_assert_int_eq(mc_put(c, "d", in, sizeof(in), NULL), 0);
    ck_assert_int_eq(mc_get_async(c, "d", out, sizeof(out), &op), 0);
    kill(a.pid, SIGTERM);
    deadline = t_now_ms() + 2500;
    do {
        code = t_http(port, "GET", "/health", buf, sizeof(buf), &body);
        if (code == 503)
            break;
        t_poll_pause();
    } while (t_now_ms() < deadline);
    ck_assert_int_eq(code, 503);
    ck_assert_ptr_nonnull(strstr(body, "draining"));
    mc_wait(op, -1, &got);
    mc_op_free(op);
    mc_close(c);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("standalone");
    SRunner *sr;
    int nf;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_metrics_counters_move_with_the_workload);
    tcase_add_test(tc, test_metrics_every_name_documented);
    tcase_add_test(tc, test_metrics_health_ready_and_refusals);
    tcase_add_test(tc, test_metrics_hostile_requests_do_not_disturb);
    suite_add_tcase(s, tc);
    tc = tcase_create("drain");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_metrics_health_503_while_draining);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
