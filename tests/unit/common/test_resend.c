/*
 * The resend queue (daemon/common/resend.h): tries, backoff, give-up, order, clearing.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/common/resend.h"

START_TEST(test_resend_backoff_and_give_up)
{
    struct mc_resend q;
    struct mc_resend_item *it;
    uint64_t now = 1000;

    mc_resend_init(&q, 8, 100, 400, 2000);
    it = mc_resend_new(&q, &q, 7, 9, 3, "abc", 3, NULL, now);
    ck_assert_ptr_nonnull(it);
    ck_assert(it->busy);
    ck_assert_uint_eq(it->tries, 1);
    ck_assert_uint_eq(it->len, 3);
    ck_assert_mem_eq(it->data, "abc", 3);
    ck_assert_uint_eq(it->dest, 7);
    ck_assert_uint_eq(it->aux, 9);
    ck_assert_uint_eq(it->tag, 3);
    ck_assert_ptr_eq(it->ctx, &q);
    /* busy: not handed out again */
    ck_assert_ptr_null(mc_resend_next(&q, now + 10000));
    /* 100, 200, 400, 400 ms between tries */
    ck_assert(mc_resend_failed(&q, it, now));
    ck_assert_ptr_null(mc_resend_next(&q, now + 99));
    ck_assert_ptr_eq(mc_resend_next(&q, now + 100), it);
    ck_assert_uint_eq(it->tries, 2);
    now += 100;
    ck_assert(mc_resend_failed(&q, it, now));
    ck_assert_ptr_null(mc_resend_next(&q, now + 199));
    ck_assert_ptr_eq(mc_resend_next(&q, now + 200), it);
    now += 200;
    ck_assert(mc_resend_failed(&q, it, now));
    ck_assert_ptr_null(mc_resend_next(&q, now + 399));
    ck_assert_ptr_eq(mc_resend_next(&q, now + 400), it);
    now += 400;
    ck_assert(mc_resend_failed(&q, it, now));
    ck_assert_ptr_null(mc_resend_next(&q, now + 399));
    ck_assert_ptr_eq(mc_resend_next(&q, now + 400), it);
    ck_assert_uint_eq(q.retried, 4);
    /* 2000 ms after the first try: a failed try gives it up */
    ck_assert(!mc_resend_failed(&q, it, 1000 + 2000));
    ck_assert_uint_eq(q.n, 0);
    ck_assert_uint_eq(q.given_up, 1);
    ck_assert_ptr_null(q.head);
    ck_assert_ptr_null(q.tail);
    mc_resend_clear(&q); /* the heap's array */
}
END_TEST

/* After a master change: every item is due at once, its backoff starts over, its give-up
 * (from its first try) stays; a busy one is left to its try's end. */
START_TEST(test_resend_hurry)
{
    struct mc_resend q;
    struct mc_resend_item *a, *b, *c;
    uint64_t now = 1000;

    mc_resend_init(&q, 8, 100, 1600, 20000);
    a = mc_resend_new(&q, &q, 1, 0, 0, "a", 1, NULL, now);
    b = mc_resend_new(&q, &q, 2, 0, 0, "b", 1, NULL, now);
    c = mc_resend_new(&q, &q, 3, 0, 0, "c", 1, NULL, now);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(c);
    /* a and b fail often: long waits; c stays busy */
    for (int k = 0; k < 4; k++) {
        ck_assert(mc_resend_failed(&q, a, now));
        ck_assert(mc_resend_failed(&q, b, now));
        now += 2000;
        ck_assert_ptr_nonnull(mc_resend_next(&q, now));
        ck_assert_ptr_nonnull(mc_resend_next(&q, now));
    }
    now = 1000 + 4 * 2000 + 10;
    ck_assert(mc_resend_failed(&q, a, now));
    ck_assert(mc_resend_failed(&q, b, now));
    ck_assert_ptr_null(mc_resend_next(&q, now + 1));
    mc_resend_hurry(&q, now + 1);
    ck_assert_uint_eq(c->tries, 0);
    ck_assert_ptr_eq(mc_resend_next(&q, now + 1), a); /* in order of making */
    ck_assert_ptr_eq(mc_resend_next(&q, now + 1), b);
    ck_assert_ptr_null(mc_resend_next(&q, now + 1)); /* c is busy */
    ck_assert_uint_eq(a->tries, 1);
    /* the backoff starts over: 100 ms */
    ck_assert(mc_resend_failed(&q, a, now + 1));
    ck_assert_ptr_null(mc_resend_next(&q, now + 100));
    ck_assert_ptr_eq(mc_resend_next(&q, now + 101), a);
    /* the give-up still counts from the first try: 20000 ms after 1000 */
    ck_assert(!mc_resend_failed(&q, a, 21000));
    ck_assert_uint_eq(q.n, 2);
    mc_resend_clear(&q);
}
END_TEST

START_TEST(test_resend_full_order_continue_clear)
{
    struct mc_resend q;
    struct mc_resend_item *it[3], *cont;
    uint32_t x;

    mc_resend_init(&q, 3, 50, 50, 100000);
    for (x = 0; x < 3; x++) {
        it[x] = mc_resend_new(&q, NULL, x, 0, 0, &x, sizeof(x), NULL, 10);
        ck_assert_ptr_nonnull(it[x]);
    }
    ck_assert_ptr_null(mc_resend_new(&q, NULL, 3, 0, 0, &x, sizeof(x), NULL, 10));
    ck_assert_uint_eq(q.full, 1);
    /* the middle one answered; the others wait, handed out in the order they were made */
    mc_resend_done(&q, it[1]);
    ck_assert(mc_resend_failed(&q, it[2], 10));
    ck_assert(mc_resend_failed(&q, it[0], 10));
    ck_assert_ptr_eq(mc_resend_next(&q, 60), it[0]);
    ck_assert_ptr_eq(mc_resend_next(&q, 60), it[2]);
    ck_assert_ptr_null(mc_resend_next(&q, 60));
    /* a continuation keeps the first try's time and the count */
    cont = mc_resend_new(&q, NULL, 0, 0, 0, NULL, 0, it[0], 500);
    ck_assert_ptr_nonnull(cont);
    ck_assert_uint_eq(cont->first_ms, 10);
    ck_assert_uint_eq(cont->tries, 2);
    ck_assert_uint_eq(cont->len, 0);
    mc_resend_done(&q, it[0]);
    /* only the waiting ones go; busy ones stay until their end */
    ck_assert(mc_resend_failed(&q, cont, 500));
    mc_resend_clear_waiting(&q);
    ck_assert_uint_eq(q.n, 1);
    ck_assert_ptr_eq(q.head, it[2]);
    mc_resend_clear(&q);
    ck_assert_uint_eq(q.n, 0);
    ck_assert_ptr_null(q.head);
}
END_TEST

/* Review finding H3: 65 536 items failed in one burst all come due in the same tick; the
 * drain of them all in that tick must not walk the queue per item (n^2 / 2, about 2 * 10^9
 * steps, seconds), and hands them out earliest first. Some are settled while waiting (out
 * of the middle of the heap). */
START_TEST(test_resend_large_burst_drains_fast)
{
    enum { N = 65536 };
    struct mc_resend q;
    struct mc_resend_item **it = malloc(N * sizeof(*it)), *x;
    struct timespec t0, t1;
    uint64_t prev = 0, seen = 0;
    double ms;
    uint32_t i;

    ck_assert_ptr_nonnull(it);
    mc_resend_init(&q, N, 200, 2000, 30000);
    for (i = 0; i < N; i++) {
        it[i] = mc_resend_new(&q, NULL, i, 0, 0, &i, sizeof(i), NULL, 1000);
        ck_assert_ptr_nonnull(it[i]);
    }
    for (i = 0; i < N; i++) /* the endpoint failed: every try ends in one burst */
        ck_assert(mc_resend_failed(&q, it[i], 1000 + (i * 7919u) % 13));
    for (i = 0; i < N; i += 97) /* answered late, while waiting */
        mc_resend_done(&q, it[i]);
    ck_assert_uint_eq(q.n, N - (N + 96) / 97);
    ck_assert_ptr_null(mc_resend_next(&q, 1000 + 199));
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0); /* CPU time: a busy host does not count */
    while ((x = mc_resend_next(&q, 1000 + 200 + 13)) != NULL) {
        ck_assert_uint_ge(x->due_ms, prev);
        prev = x->due_ms;
        seen++;
        ck_assert(mc_resend_failed(&q, x, 5000)); /* the next try waits: not this tick */
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    ck_assert_uint_eq(seen, q.n);
    ck_assert_msg(ms < 1000.0, "draining %llu due items took %.1f ms of CPU",
                  (unsigned long long)seen, ms);
    printf("drained %llu due items in %.1f ms of CPU\n", (unsigned long long)seen, ms);
    /* all wait again (due 5400): the next tick gets them, none before */
    ck_assert_ptr_null(mc_resend_next(&q, 5399));
    mc_resend_clear_waiting(&q);
    ck_assert_uint_eq(q.n, 0);
    mc_resend_clear(&q);
    free(it);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("resend");
    TCase *tc = tcase_create("resend");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_resend_backoff_and_give_up);
    tcase_add_test(tc, test_resend_full_order_continue_clear);
    tcase_add_test(tc, test_resend_hurry);
    tcase_add_test(tc, test_resend_large_burst_drains_fast);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
