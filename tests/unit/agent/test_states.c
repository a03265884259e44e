/*
 * Unit tests of the agent's two state machines (daemon/agent/put.h, lease.h): the legal
 * transitions are exactly the documented ones, and the setter aborts on any other (the
 * test runs forked: the abort is the expected signal).
 */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/agent/lease.h"
#include "daemon/agent/put.h"

/* The transitions put.h documents, and no other. */
static const int t_put_legal[][2] = {
    {PUT_FREE, PUT_GRANTING},     {PUT_EXPIRED, PUT_GRANTING}, {PUT_EXPIRED, PUT_FREE},
    {PUT_GRANTING, PUT_OPEN},     {PUT_GRANTING, PUT_FREE},    {PUT_OPEN, PUT_FINISHING},
    {PUT_OPEN, PUT_REVOKING},     {PUT_OPEN, PUT_FREE},        {PUT_OPEN, PUT_EXPIRED},
    {PUT_FINISHING, PUT_ENDING},  {PUT_FINISHING, PUT_REVOKING},
    {PUT_FINISHING, PUT_FREE},    {PUT_ENDING, PUT_FREE},      {PUT_REVOKING, PUT_FREE},
    {PUT_REVOKING, PUT_EXPIRED},
};

static const int t_lease_legal[][2] = {
    {LEASE_FREE, LEASE_ASKING},   {LEASE_ASKING, LEASE_HELD}, {LEASE_ASKING, LEASE_READING},
    {LEASE_ASKING, LEASE_FREE},   {LEASE_READING, LEASE_HELD}, {LEASE_READING, LEASE_FREE},
    {LEASE_HELD, LEASE_FREE},
};

static bool t_listed(const int (*list)[2], size_t n, int from, int to)
{
    for (size_t i = 0; i < n; i++) {
        if (list[i][0] == from && list[i][1] == to)
            return true;
    }
    return false;
}

START_TEST(test_put_transitions_are_the_documented_ones)
{
    size_t n = sizeof(t_put_legal) / sizeof(t_put_legal[0]);

    for (int from = 0; from < PUT__STATES; from++) {
        for (int to = 0; to < PUT__STATES; to++) {
            ck_assert_msg(put_transition_is_legal(from, to) == t_listed(t_put_legal, n, from, to),
                          "put %s -> %s", put_state_name(from), put_state_name(to));
        }
    }
    ck_assert(!put_transition_is_legal(PUT__STATES, PUT_FREE));
    ck_assert(!put_transition_is_legal(PUT_FREE, PUT__STATES));
}
END_TEST

START_TEST(test_lease_transitions_are_the_documented_ones)
{
    size_t n = sizeof(t_lease_legal) / sizeof(t_lease_legal[0]);

    for (int from = 0; from < LEASE__STATES; from++) {
        for (int to = 0; to < LEASE__STATES; to++) {
            ck_assert_msg(lease_transition_is_legal(from, to) ==
                              t_listed(t_lease_legal, n, from, to),
                          "lease %d -> %d", from, to);
        }
    }
}
END_TEST

/* A whole put's life through the setter: every step is legal. */
START_TEST(test_put_lives)
{
    static const enum put_state oneshot[] = {PUT_GRANTING, PUT_OPEN, PUT_FINISHING, PUT_ENDING,
                                             PUT_FREE};
    static const enum put_state revoked[] = {PUT_GRANTING, PUT_OPEN, PUT_REVOKING, PUT_EXPIRED,
                                             PUT_GRANTING, PUT_FREE};
    struct put p;

    memset(&p, 0, sizeof(p));
    for (size_t i = 0; i < sizeof(oneshot) / sizeof(oneshot[0]); i++)
        put_set_state(&p, oneshot[i]);
    ck_assert_int_eq(p.state, PUT_FREE);
    for (size_t i = 0; i < sizeof(revoked) / sizeof(revoked[0]); i++)
        put_set_state(&p, revoked[i]);
    ck_assert_int_eq(p.state, PUT_FREE);
}
END_TEST

/* Publishing a put that was never granted is a bug: the setter stops the process. */
START_TEST(test_put_illegal_transition_aborts)
{
    struct put p;

    memset(&p, 0, sizeof(p));
    put_set_state(&p, PUT_ENDING);
}
END_TEST

START_TEST(test_lease_illegal_transition_aborts)
{
    struct lease l;

    memset(&l, 0, sizeof(l));
    lease_set_state(&l, LEASE_ASKING);
    lease_set_state(&l, LEASE_HELD);
    lease_set_state(&l, LEASE_READING); /* a held lease never reads again */
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("agent_states");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_put_transitions_are_the_documented_ones);
    tcase_add_test(tc, test_lease_transitions_are_the_documented_ones);
    tcase_add_test(tc, test_put_lives);
    tcase_add_test_raise_signal(tc, test_put_illegal_transition_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_lease_illegal_transition_aborts, SIGABRT);
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
