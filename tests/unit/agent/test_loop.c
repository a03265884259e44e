/*
 * Unit tests of the agent's event loop (daemon/agent/loop.h): each completion runs the
 * callback its request was armed with, once, with the request's result; a canceled
 * request completes with -ECANCELED; a futex wait completes on a wake (skipped where the
 * kernel lacks the io_uring futex ops).
 */
#include <check.h>
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon/agent/loop.h"

struct t_ev {
    struct mc_loop_ev ev;
    int calls;
    int res;
    uint32_t flags;
};

static void t_cb(struct mc_loop_ev *ev, int res, uint32_t flags)
{
    struct t_ev *t = (struct t_ev *)ev;

    t->calls++;
    t->res = res;
    t->flags = flags;
}

/* Wait and dispatch until ev ran or 2 s passed. */
static void t_until(struct mc_loop *l, const struct t_ev *ev)
{
    for (int i = 0; i < 200 && ev->calls == 0; i++) {
        mc_loop_wait(l, 10000000);
        mc_loop_dispatch(l);
    }
}

START_TEST(test_loop_read_and_poll_run_their_callbacks)
{
    struct mc_loop l;
    struct t_ev rd = {.ev.fn = t_cb}, pl = {.ev.fn = t_cb};
    char buf[8];
    int p[2], q[2];

    ck_assert_int_eq(mc_loop_init(&l, 64), 0);
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(pipe(q), 0);
    ck_assert_int_eq(mc_loop_read(&l, p[0], buf, sizeof(buf), &rd.ev), 0);
    ck_assert_int_eq(mc_loop_poll(&l, q[0], POLLIN, &pl.ev), 0);
    mc_loop_submit(&l);
    ck_assert_int_eq(mc_loop_dispatch(&l), 0); /* nothing happened yet */
    ck_assert_int_eq(write(p[1], "hello", 5), 5);
    t_until(&l, &rd);
    ck_assert_int_eq(rd.calls, 1);
    ck_assert_int_eq(rd.res, 5);
    ck_assert_mem_eq(buf, "hello", 5);
    ck_assert_int_eq(pl.calls, 0); /* only the request that completed ran */
    ck_assert_int_eq(write(q[1], "x", 1), 1);
    t_until(&l, &pl);
    ck_assert_int_eq(pl.calls, 1);
    ck_assert(pl.res & POLLIN);
    ck_assert_int_eq(rd.calls, 1);
    mc_loop_cleanup(&l);
    close(p[0]);
    close(p[1]);
    close(q[0]);
    close(q[1]);
}
END_TEST

START_TEST(test_loop_cancel_completes_with_ecanceled)
{
    struct mc_loop l;
    struct t_ev pl = {.ev.fn = t_cb};
    int p[2];

    ck_assert_int_eq(mc_loop_init(&l, 64), 0);
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(mc_loop_poll(&l, p[0], POLLIN, &pl.ev), 0);
    mc_loop_submit(&l);
    ck_assert_int_eq(mc_loop_cancel(&l, &pl.ev), 0);
    t_until(&l, &pl);
    ck_assert_int_eq(pl.calls, 1);
    ck_assert_int_eq(pl.res, -ECANCELED);
    ck_assert_int_eq(pl.flags & MC_LOOP_F_MORE, 0);
    mc_loop_cleanup(&l);
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(test_loop_futex_wait_completes_on_wake)
{
    struct mc_loop l;
    struct t_ev fw = {.ev.fn = t_cb};
    uint32_t *word = aligned_alloc(64, 64);

    ck_assert_int_eq(mc_loop_init(&l, 64), 0);
    if (!mc_loop_has_futex(&l)) {
        mc_loop_cleanup(&l);
        free(word);
        return; /* the kernel lacks the ops: the agent polls instead (tested elsewhere) */
    }
    *word = 7;
    ck_assert_int_eq(mc_loop_futex_wait(&l, word, 7, &fw.ev), 0);
    mc_loop_submit(&l);
    mc_loop_dispatch(&l);
    ck_assert_int_eq(fw.calls, 0); /* the word still holds 7: it sleeps */
    __atomic_store_n(word, 8, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
    t_until(&l, &fw);
    ck_assert_int_eq(fw.calls, 1);
    ck_assert_int_eq(fw.res, 0);
    /* a stale value returns at once: a bump between reading and arming is never lost */
    fw.calls = 0;
    ck_assert_int_eq(mc_loop_futex_wait(&l, word, 7, &fw.ev), 0);
    t_until(&l, &fw);
    ck_assert_int_eq(fw.calls, 1);
    mc_loop_cleanup(&l);
    free(word);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("agent_loop");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_loop_read_and_poll_run_their_callbacks);
    tcase_add_test(tc, test_loop_cancel_completes_with_ecanceled);
    tcase_add_test(tc, test_loop_futex_wait_completes_on_wake);
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
