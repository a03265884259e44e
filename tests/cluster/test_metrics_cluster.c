/*
 * Metrics and health in cluster mode: mc-master's /metrics (strictly parsed) counts the
 * puts and RPCs an agent's workload caused; an agent's /health turns 503 with a reason
 * while its master is stopped (SIGSTOP, past master_timeout_ms), 200 again after SIGCONT,
 * and 503 again while its node is drained ("draining", then "drained") until undrained.
 */
#include <check.h>
#include <math.h>

#include <mc/mc.h>

#include "../integration/t_http.h"
#include "t_cluster.h"


/* Poll /health until it answers `want`; returns the last code, body in buf. */
static int health_until(unsigned port, int want, char *buf, size_t cap, const char **body,
                        unsigned ms)
{
    uint64_t deadline = t_now_ms() + ms;
    int code;

    do {
        code = t_http(port, "GET", "/health", buf, cap, body);
        if (code == want)
            break;
        t_poll_pause();
    } while (t_now_ms() < deadline);
    return code;
}

START_TEST(test_metrics_cluster_master_counts_and_agent_health)
{
    struct t_proc master, agent;
    struct t_prom *m0 = malloc(sizeof(*m0)), *m1 = malloc(sizeof(*m1));
    const char *margv[8], *body;
    static const char *const extra[] = {"--metrics-listen", "127.0.0.1:0", NULL};
    char dir[256], token[65], buf[4096], key[32];
    unsigned mport, aport;
    uint8_t in[512] = {7};
    uint64_t deadline;
    mc_client_t *c;
    enum { N = 30 };
    int i;

    ck_assert_ptr_nonnull(m0);
    ck_assert_ptr_nonnull(m1);
    t_mkdtemp(dir, sizeof(dir));
    t_random_token(token, sizeof(token));
    snprintf(master.ready, sizeof(master.ready), "%s/master.ready", dir);
    margv[0] = t_env_bin("MC_MASTER_BIN");
    margv[1] = "--listen";
    margv[2] = "127.0.0.1:0";
    margv[3] = "--ready-file";
    margv[4] = master.ready;
    margv[5] = "--metrics-listen";
    margv[6] = "127.0.0.1:0";
    margv[7] = NULL;
    t_proc_spawn(&master, dir, "master", token, margv);
    ck_assert_int_eq(t_proc_wait_ready(&master, T_READY_MS), 0);
    mport = t_metrics_port(master.log);
    ck_assert_uint_ne(mport, 0);
    t_agent_start(&agent, dir, master.port, "a", NULL, "32M", token, extra);
    aport = t_metrics_port(agent.log);
    ck_assert_uint_ne(aport, 0);

    ck_assert_int_eq(t_http(mport, "GET", "/ready", buf, sizeof(buf), &body), 200);
    ck_assert_int_eq(t_http(aport, "GET", "/ready", buf, sizeof(buf), &body), 200);
    ck_assert_int_eq(health_until(aport, 200, buf, sizeof(buf), &body, 5000), 200);
    ck_assert_int_eq(t_http(mport, "GET", "/health", buf, sizeof(buf), &body), 200);
    ck_assert_int_eq(t_http(mport, "POST", "/metrics", buf, sizeof(buf), &body), 405);

    t_prom_scrape(mport, m0);
    ck_assert_int_eq(mc_connect(agent.sock, &c), 0);
    for (i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "cm/%d", i);
        ck_assert_int_eq(mc_put(c, key, in, sizeof(in), NULL), 0);
    }
    deadline = t_now_ms() + 5000;
    do {
        t_prom_scrape(mport, m1);
        if (t_prom_val(m1, "mcstore_master_puts_completed_total", "") >=
            t_prom_val(m0, "mcstore_master_puts_completed_total", "") + N)
            break;
        t_poll_pause();
    } while (t_now_ms() < deadline);
    ck_assert_double_eq(t_prom_val(m1, "mcstore_master_puts_completed_total", ""),
                        t_prom_val(m0, "mcstore_master_puts_completed_total", "") + N);
    ck_assert_double_eq(t_prom_val(m1, "mcstore_master_objects", ""),
                        t_prom_val(m0, "mcstore_master_objects", "") + N);
    ck_assert(t_prom_val(m1, "mcstore_master_rpcs_total", "kind=\"put_start\"") >
              t_prom_val(m0, "mcstore_master_rpcs_total", "kind=\"put_start\""));
    ck_assert(t_prom_val(m1, "mcstore_master_rpcs_total", "kind=\"put_end\"") >
              t_prom_val(m0, "mcstore_master_rpcs_total", "kind=\"put_end\""));
    ck_assert(t_prom_val(m1, "mcstore_master_rpcs_total", "kind=\"hello\"") >= 1);
    ck_assert(t_prom_val(m1, "mcstore_master_nodes_alive", "") >= 1);
    ck_assert(t_prom_val(m1, "mcstore_master_capacity_bytes", "tier=\"dram\"") >= 32 << 20);

    /* the agent's page: cluster figures, not the standalone master's (published every
     * ~10 ms while it works, every tick_ms while it sleeps: wait for them) */
    deadline = t_now_ms() + 5000;
    do {
        t_prom_scrape(aport, m0);
        if (t_prom_val(m0, "mcstore_agent_puts_total", "") >= N)
            break;
        t_poll_pause();
    } while (t_now_ms() < deadline);
    ck_assert_double_eq(t_prom_val(m0, "mcstore_agent_master_reachable", ""), 1);
    ck_assert_double_eq(t_prom_val(m0, "mcstore_agent_puts_total", ""), N);
    ck_assert(!isnan(t_prom_value(m0, "mcstore_agent_read_failovers_total", "")));
    ck_assert(isnan(t_prom_value(m0, "mcstore_agent_objects", "")));

    /* a stopped master: the agent says so within master_timeout_ms plus a heartbeat */
    ck_assert_int_eq(kill(master.pid, SIGSTOP), 0);
    ck_assert_int_eq(health_until(aport, 503, buf, sizeof(buf), &body, 10000), 503);
    ck_assert_msg(strstr(body, "master") != NULL, "reason: %s", body);
    t_prom_scrape(aport, m0);
    ck_assert_double_eq(t_prom_val(m0, "mcstore_agent_master_reachable", ""), 0);
    ck_assert_int_eq(kill(master.pid, SIGCONT), 0);
    ck_assert_int_eq(health_until(aport, 200, buf, sizeof(buf), &body, 10000), 200);
    ck_assert_str_eq(body, "ok\n");

    /* a drain: a holds the only copies and there is nowhere to move them (503 "draining"),
     * b joins and takes them (503 "drained": a may leave), undrain (200) */
    {
        struct t_proc b;
        char *out = NULL;

        ck_assert_int_eq(t_mcctl(agent.sock, &out, "drain", "a", NULL), 0);
        free(out);
        ck_assert_int_eq(health_until(aport, 503, buf, sizeof(buf), &body, 10000), 503);
        ck_assert_msg(strncmp(body, "draining", 8) == 0, "reason: %s", body);
        t_agent_start(&b, dir, master.port, "b", NULL, "32M", token, NULL);
        deadline = t_now_ms() + 15000;
        do {
            (void)t_http(aport, "GET", "/health", buf, sizeof(buf), &body);
            if (strncmp(body, "drained", 7) == 0)
                break;
            t_poll_pause();
        } while (t_now_ms() < deadline);
        ck_assert_msg(strncmp(body, "drained", 7) == 0, "reason: %s", body);
        out = NULL;
        ck_assert_int_eq(t_mcctl(agent.sock, &out, "undrain", "a", NULL), 0);
        free(out);
        ck_assert_int_eq(health_until(aport, 200, buf, sizeof(buf), &body, 10000), 200);
        for (i = 0; i < N; i++) {
            uint8_t back[sizeof(in)];
            size_t got = 0;

            snprintf(key, sizeof(key), "cm/%d", i);
            ck_assert_int_eq(mc_get(c, key, back, sizeof(back), &got), 0);
            ck_assert(got == sizeof(in) && memcmp(back, in, sizeof(in)) == 0);
        }
        ck_assert_int_eq(t_proc_stop(&b), 0);
    }

    mc_close(c);
    ck_assert_int_eq(t_proc_stop(&agent), 0);
    ck_assert_int_eq(t_proc_stop(&master), 0);
    t_rmdir(dir);
    free(m0);
    free(m1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics_cluster");
    TCase *tc = tcase_create("cluster");
    SRunner *sr;
    int nf;

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_metrics_cluster_master_counts_and_agent_health);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
