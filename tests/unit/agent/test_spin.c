/*
 * Unit tests of adaptive waiting: the agent's busy/quiet verdict from its run delay
 * (daemon/agent/spin.h), the node page's admission of pollers (shm/node.h), and the repair
 * of a count a killed client left behind.
 */
#include <check.h>
#include <stdlib.h>

#include "daemon/agent/spin.h"

#define MS 1000000ull

/* Feed windows of 10 ms, each with `pct` percent run delay; returns the time reached. */
static uint64_t t_windows(struct agent_spin *s, uint64_t t, uint64_t *delay, int n, int pct)
{
    for (int i = 0; i < n; i++) {
        t += 10 * MS;
        *delay += 10 * MS * (uint64_t)pct / 100;
        agent_spin_window(s, t, *delay);
    }
    return t;
}

START_TEST(test_spin_busy_when_run_delay_high_quiet_after_a_run)
{
    struct agent_spin s;
    uint64_t t = 1000 * MS, delay = 0;

    ck_assert_int_eq(agent_spin_init(&s), 0);
    ck_assert_uint_ge(atomic_load(&s.node->cores), 1);
    ck_assert(s.node->magic == MC_SHM_NODE_MAGIC);
    agent_spin_window(&s, t, delay); /* the first sample starts a window */
    t = t_windows(&s, t, &delay, 20, 10);
    ck_assert(!agent_spin_busy(&s)); /* 10 %: waiting a little is not busy */
    t = t_windows(&s, t, &delay, 1, 60);
    ck_assert(agent_spin_busy(&s)); /* one window over a quarter: busy at once */
    t = t_windows(&s, t, &delay, 7, 1);
    ck_assert(agent_spin_busy(&s)); /* 70 ms quiet is not enough */
    t = t_windows(&s, t, &delay, 1, 10);
    t = t_windows(&s, t, &delay, 7, 1);
    ck_assert(agent_spin_busy(&s)); /* a window in between starts the run again */
    t = t_windows(&s, t, &delay, 1, 1);
    ck_assert(!agent_spin_busy(&s)); /* 8 quiet windows in a row */
    /* busy again at once after quiet: the run needed doubles */
    t = t_windows(&s, t, &delay, 1, 80);
    ck_assert(agent_spin_busy(&s));
    t = t_windows(&s, t, &delay, 8, 0);
    ck_assert(agent_spin_busy(&s));
    t = t_windows(&s, t, &delay, 8, 0);
    ck_assert(!agent_spin_busy(&s));
    /* a counter that went back (another task's numbers) restarts the window, no verdict */
    agent_spin_window(&s, t + 10 * MS, 0);
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
}
END_TEST

START_TEST(test_spin_repair_of_counts_left_behind)
{
    struct agent_spin s;

    ck_assert_int_eq(agent_spin_init(&s), 0);
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
    agent_spin_cleanup(&s);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("agent_spin");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_spin_busy_when_run_delay_high_quiet_after_a_run);
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
