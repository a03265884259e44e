/*
 * Unit tests of adaptive waiting: the agent's choice between polling and sleeping from the
 * requests each mode takes and its run delay (daemon/agent/spin.h), the node page's
 * admission of pollers (shm/node.h), and the repair of a count a killed client left behind.
 */
#include <check.h>
#include <stdlib.h>

#include "daemon/agent/spin.h"

#define MS 1000000ull

struct t_host {
    uint64_t t, delay, ops;
};

/* Feed n windows of 10 ms, each with `pct` percent run delay and `busy_ops` requests
 * taken when the agent is in sleeping mode, `poll_ops` in polling mode. */
static void t_windows(struct agent_spin *s, struct t_host *h, int n, int pct, int poll_ops,
                      int busy_ops)
{
    for (int i = 0; i < n; i++) {
        h->t += 10 * MS;
        h->delay += 10 * MS * (uint64_t)pct / 100;
        h->ops += (uint64_t)(agent_spin_busy(s) ? busy_ops : poll_ops);
        agent_spin_window(s, h->t, h->delay, h->ops);
    }
}

START_TEST(test_spin_probes_keep_the_mode_that_takes_more_requests)
{
    struct agent_spin s;
    struct t_host h = {.t = 1000 * MS};

    ck_assert_int_eq(agent_spin_init(&s, true), 0);
    ck_assert_uint_ge(atomic_load(&s.node->cores), 1);
    ck_assert(s.node->magic == MC_SHM_NODE_MAGIC);
    agent_spin_window(&s, h.t, h.delay, h.ops); /* the first sample starts a window */
    ck_assert(agent_spin_busy(&s)); /* it starts sleeping */
    /* a quiet host: 8 windows with little run delay start a probe of polling, which wins */
    t_windows(&s, &h, 8, 1, 1000, 300);
    ck_assert(!agent_spin_busy(&s));
    t_windows(&s, &h, 5, 1, 1000, 300);
    ck_assert(!agent_spin_busy(&s));
    ck_assert_uint_eq(s.probes, 1);
    ck_assert_uint_eq(s.switches, 1);
    s.probes = s.switches = 0;
    /* quiet, polling pays: the probe of sleeping loses, polling stays */
    t_windows(&s, &h, 29, 10, 1000, 300);
    ck_assert(!agent_spin_busy(&s));
    ck_assert_uint_eq(s.probes, 0);
    t_windows(&s, &h, 1, 10, 1000, 300);
    ck_assert(agent_spin_busy(&s)); /* after 0.3 s: sleeping on trial */
    t_windows(&s, &h, 5, 10, 1000, 300);
    ck_assert(!agent_spin_busy(&s)); /* it took fewer: back */
    ck_assert_uint_eq(s.probes, 1);
    ck_assert_uint_eq(s.switches, 0);
    ck_assert_uint_eq(s.exploit_windows, 60); /* the next probe waits twice as long */
    /* hogs arrive: polling collapses, the run delay says so, a probe starts at once */
    t_windows(&s, &h, 5, 10, 1000, 300);
    ck_assert(!agent_spin_busy(&s));
    t_windows(&s, &h, 1, 70, 30, 120);
    ck_assert(agent_spin_busy(&s));
    t_windows(&s, &h, 5, 70, 30, 120);
    ck_assert(agent_spin_busy(&s)); /* sleeping took more: it stays */
    ck_assert_uint_eq(s.switches, 1);
    /* the hogs stay: probes of polling lose, each waiting longer */
    t_windows(&s, &h, 30 + 5, 40, 30, 120);
    ck_assert(agent_spin_busy(&s));
    ck_assert_uint_eq(s.probes, 3);
    ck_assert_uint_eq(s.exploit_windows, 60);
    /* they go: 8 quiet windows start a probe of polling, which wins */
    t_windows(&s, &h, 8, 1, 1000, 300);
    ck_assert(!agent_spin_busy(&s));
    t_windows(&s, &h, 5, 1, 1000, 300);
    ck_assert(!agent_spin_busy(&s));
    ck_assert_uint_eq(s.switches, 2);
    agent_spin_cleanup(&s);
}
END_TEST

START_TEST(test_spin_without_requests_the_hints_decide)
{
    struct agent_spin s;
    struct t_host h = {.t = 1000 * MS};

    ck_assert_int_eq(agent_spin_init(&s, true), 0);
    agent_spin_window(&s, h.t, h.delay, h.ops);
    atomic_store(&s.node->busy, 0);
    t_windows(&s, &h, 2, 90, 0, 0);
    ck_assert(!agent_spin_busy(&s)); /* fewer windows than a tally needs */
    t_windows(&s, &h, 1, 90, 0, 0);
    ck_assert(agent_spin_busy(&s)); /* oversubscribed, nothing to compare: sleep */
    ck_assert_uint_eq(s.probes, 0);
    t_windows(&s, &h, 7, 2, 0, 0);
    ck_assert(agent_spin_busy(&s));
    t_windows(&s, &h, 1, 20, 0, 0);
    t_windows(&s, &h, 7, 2, 0, 0);
    ck_assert(agent_spin_busy(&s)); /* a busier window in between starts the run again */
    t_windows(&s, &h, 1, 2, 0, 0);
    ck_assert(!agent_spin_busy(&s)); /* 8 quiet windows in a row */
    /* counters that went back (another task's numbers) restart the window, no verdict */
    agent_spin_window(&s, h.t + 10 * MS, 0, 0);
    ck_assert(!agent_spin_busy(&s));
    agent_spin_cleanup(&s);
}
END_TEST

START_TEST(test_spin_node_admits_at_most_cores_minus_one)
{
    struct mc_shm_node n = {.magic = MC_SHM_NODE_MAGIC};

    atomic_store(&n.cores, 4);
    ck_assert(mc_shm_node_spin_begin(&n));
    ck_assert(mc_shm_node_spin_begin(&n));
    ck_assert(mc_shm_node_spin_begin(&n));
    ck_assert(!mc_shm_node_spin_begin(&n)); /* the fourth core is the agent's */
    ck_assert_uint_eq(atomic_load(&n.spinners), 3);
    mc_shm_node_spin_end(&n);
    ck_assert(mc_shm_node_spin_begin(&n));
    atomic_store(&n.busy, 1);
    mc_shm_node_spin_end(&n);
    ck_assert(!mc_shm_node_spin_begin(&n)); /* busy: nobody polls */
    ck_assert_uint_eq(atomic_load(&n.spinners), 2);
    atomic_store(&n.busy, 0);
    atomic_store(&n.cores, 1);
    atomic_store(&n.spinners, 0);
    ck_assert(!mc_shm_node_spin_begin(&n)); /* one core: polling never pays */
    ck_assert_uint_eq(atomic_load(&n.spinners), 0);
    mc_shm_node_spin_end(&n); /* the agent took it back already: never below 0 */
    ck_assert_uint_eq(atomic_load(&n.spinners), 0);
}
END_TEST

START_TEST(test_spin_repair_of_counts_left_behind)
{
    struct agent_spin s;

    ck_assert_int_eq(agent_spin_init(&s, false), 0);
    ck_assert(!agent_spin_busy(&s)); /* not adaptive: never busy */
    atomic_store(&s.node->spinners, 2);
    agent_spin_client_gone(&s, true); /* killed while polling */
    ck_assert_uint_eq(atomic_load(&s.node->spinners), 1);
    agent_spin_client_gone(&s, false);
    ck_assert_uint_eq(atomic_load(&s.node->spinners), 1);
    atomic_store(&s.node->spinners, 0);
    agent_spin_client_gone(&s, true); /* never below 0 */
    ck_assert_uint_eq(atomic_load(&s.node->spinners), 0);
    /* more than there are clients: a leftover or a hostile write */
    atomic_store(&s.node->spinners, 0xfffffff0u);
    agent_spin_repair(&s, 1, 3);
    ck_assert_uint_eq(atomic_load(&s.node->spinners), 1);
    agent_spin_repair(&s, 0, 3); /* within bounds: left to the clients */
    ck_assert_uint_eq(atomic_load(&s.node->spinners), 1);
    /* a scribbled magic and core count are restored */
    s.node->magic = 0;
    atomic_store(&s.node->cores, 1000000);
    agent_spin_repair(&s, 0, 3);
    ck_assert(s.node->magic == MC_SHM_NODE_MAGIC);
    ck_assert_uint_eq(atomic_load(&s.node->cores), s.cores);
    agent_spin_cleanup(&s);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("agent_spin");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_spin_probes_keep_the_mode_that_takes_more_requests);
    tcase_add_test(tc, test_spin_without_requests_the_hints_decide);
    tcase_add_test(tc, test_spin_node_admits_at_most_cores_minus_one);
    tcase_add_test(tc, test_spin_repair_of_counts_left_behind);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(t_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
