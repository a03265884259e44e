/*
 * Unit tests of the agent's memory-tier seam (daemon/agent/seg.h: the DRAM kind) and of
 * its fault-injection seam (daemon/agent/fault.h).
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "daemon/agent/fault.h"
#include "daemon/agent/seg.h"
#include "daemon/master/master.h"

START_TEST(test_seg_dram_span_bounds_and_copies)
{
    struct mc_seg *s = NULL;
    uint8_t in[100], out[100];

    ck_assert_int_eq(mc_seg_dram_create("t-seg", 1u << 20, false, true, &s), 0);
    ck_assert_uint_eq(s->kind, MC_SEG_DRAM);
    ck_assert_uint_eq(s->size, 1u << 20);
    ck_assert_ptr_nonnull(mc_seg_span(s, 0, 1u << 20));
    ck_assert_ptr_nonnull(mc_seg_span(s, (1u << 20) - 1, 1));
    ck_assert_ptr_null(mc_seg_span(s, (1u << 20) - 1, 2));    /* past the end */
    ck_assert_ptr_null(mc_seg_span(s, UINT64_MAX - 4, 8));     /* no wrap-around */
    ck_assert_ptr_null(mc_seg_span(NULL, 0, 1));
    for (int i = 0; i < 100; i++)
        in[i] = (uint8_t)i;
    ck_assert_int_eq(s->ops->write(s, 4096, in, sizeof(in)), 0);
    ck_assert_int_eq(s->ops->read(s, 4096, out, sizeof(out)), 0);
    ck_assert_mem_eq(in, out, sizeof(in));
    ck_assert_mem_eq(mc_seg_span(s, 4096, 100), in, sizeof(in));
    ck_assert_int_eq(s->ops->write(s, (1u << 20) - 50, in, sizeof(in)), MC_ERR_INVALID);
    mc_seg_destroy(s);
    mc_seg_destroy(NULL);
}
END_TEST

/* What readers get maps read-only, and nothing makes it writable. */
START_TEST(test_seg_dram_readers_cannot_write)
{
    struct mc_seg *s = NULL;
    void *p;

    ck_assert_int_eq(mc_seg_dram_create("t-seg-ro", 1u << 20, false, false, &s), 0);
    ck_assert_int_ge(s->ro_fd, 0);
    p = mmap(NULL, 1u << 20, PROT_READ | PROT_WRITE, MAP_SHARED, s->ro_fd, 0);
    ck_assert(p == MAP_FAILED);
    p = mmap(NULL, 1u << 20, PROT_READ, MAP_SHARED, s->ro_fd, 0);
    ck_assert(p != MAP_FAILED);
    ck_assert_int_ne(mprotect(p, 1u << 20, PROT_READ | PROT_WRITE), 0);
    munmap(p, 1u << 20);
    mc_seg_destroy(s);
}
END_TEST

static int t_ran[4], t_dropped[4];

static void t_run(void *ctx)
{
    t_ran[(intptr_t)ctx]++;
}

static void t_drop(void *ctx)
{
    t_dropped[(intptr_t)ctx]++;
}

START_TEST(test_fault_parse)
{
    struct mc_fault f;

    memset(&f, 0, sizeof(f));
    ck_assert_int_eq(mc_fault_parse(&f, "get_delay_ms=400"), 0);
    ck_assert_uint_eq(f.delay_ms[MC_FAULT_GET_ANSWER], 400);
    ck_assert_int_eq(mc_fault_parse(&f, "put_end_delay_ms=60000"), 0);
    ck_assert_uint_eq(f.delay_ms[MC_FAULT_PUT_END], 60000);
    ck_assert_int_eq(mc_fault_parse(&f, "put_end_delay_ms=60001"), MC_ERR_INVALID);
    ck_assert_int_eq(mc_fault_parse(&f, "get_delay_ms="), MC_ERR_INVALID);
    ck_assert_int_eq(mc_fault_parse(&f, "get_delay_ms=-1"), MC_ERR_INVALID);
    ck_assert_int_eq(mc_fault_parse(&f, "get_delay_ms=5x"), MC_ERR_INVALID);
    ck_assert_int_eq(mc_fault_parse(&f, "delay=5"), MC_ERR_INVALID);
    ck_assert_int_eq(mc_fault_parse(&f, ""), MC_ERR_INVALID);
    ck_assert_uint_eq(f.delay_ms[MC_FAULT_GET_ANSWER], 400); /* refused specs change nothing */
    /* losses: counted down, one request each */
    ck_assert(!mc_fault_lose(&f, MC_FAULT_LOSE_PUBLISH));
    ck_assert_int_eq(mc_fault_parse(&f, "publish_lose=2"), 0);
    ck_assert_int_eq(mc_fault_parse(&f, "drop_lose=1"), 0);
    ck_assert_int_eq(mc_fault_parse(&f, "drop_lose=x"), MC_ERR_INVALID);
    ck_assert_int_eq(mc_fault_parse(&f, "publish_lose=60001"), MC_ERR_INVALID);
    ck_assert(mc_fault_lose(&f, MC_FAULT_LOSE_PUBLISH));
    ck_assert(mc_fault_lose(&f, MC_FAULT_LOSE_PUBLISH));
    ck_assert(!mc_fault_lose(&f, MC_FAULT_LOSE_PUBLISH));
    ck_assert(mc_fault_lose(&f, MC_FAULT_LOSE_DROP));
    ck_assert(!mc_fault_lose(&f, MC_FAULT_LOSE_DROP));
    ck_assert(!mc_fault_lose(&f, MC_FAULT_LOSE__KINDS));
    ck_assert_int_eq(mc_fault_parse(&f, "publish_nomem=1"), 0);
    ck_assert(mc_fault_lose(&f, MC_FAULT_NOMEM_PUBLISH));
    ck_assert(!mc_fault_lose(&f, MC_FAULT_NOMEM_PUBLISH));
    /* every PUBLISH until the agent followed N more masters */
    ck_assert_int_eq(mc_fault_parse(&f, "publish_lose_masters=x"), MC_ERR_INVALID);
    ck_assert_int_eq(mc_fault_parse(&f, "publish_lose_masters=60001"), MC_ERR_INVALID);
    ck_assert_int_eq(mc_fault_parse(&f, "publish_lose_masters=2"), 0);
    for (int i = 0; i < 100; i++)
        ck_assert(mc_fault_lose(&f, MC_FAULT_LOSE_PUBLISH));
    ck_assert(!mc_fault_lose(&f, MC_FAULT_LOSE_DROP));
    mc_fault_master_changed(&f);
    ck_assert(mc_fault_lose(&f, MC_FAULT_LOSE_PUBLISH));
    mc_fault_master_changed(&f);
    ck_assert(!mc_fault_lose(&f, MC_FAULT_LOSE_PUBLISH));
    mc_fault_master_changed(&f); /* stays at 0 */
    ck_assert(!mc_fault_lose(&f, MC_FAULT_LOSE_PUBLISH));
}
END_TEST

START_TEST(test_fault_defer_runs_when_due_and_drops_at_cleanup)
{
    struct mc_fault f;

    memset(&f, 0, sizeof(f));
    memset(t_ran, 0, sizeof(t_ran));
    memset(t_dropped, 0, sizeof(t_dropped));
    /* unarmed: nothing is deferred */
    ck_assert(!mc_fault_defer(&f, MC_FAULT_GET_ANSWER, t_run, t_drop, (void *)0));
    ck_assert(!mc_fault_pending(&f));
    f.delay_ms[MC_FAULT_GET_ANSWER] = 1000;
    ck_assert(mc_fault_defer(&f, MC_FAULT_GET_ANSWER, t_run, t_drop, (void *)1));
    ck_assert(mc_fault_defer(&f, MC_FAULT_GET_ANSWER, t_run, t_drop, (void *)2));
    ck_assert(mc_fault_pending(&f));
    ck_assert(mc_fault_run_due(&f, 0)); /* not due: still pending */
    ck_assert_int_eq(t_ran[1] + t_ran[2], 0);
    ck_assert(!mc_fault_run_due(&f, UINT64_MAX)); /* both due: run, none left */
    ck_assert_int_eq(t_ran[1], 1);
    ck_assert_int_eq(t_ran[2], 1);
    ck_assert(mc_fault_defer(&f, MC_FAULT_GET_ANSWER, t_run, t_drop, (void *)3));
    mc_fault_cleanup(&f);
    ck_assert_int_eq(t_ran[3], 0);
    ck_assert_int_eq(t_dropped[3], 1);
    ck_assert(!mc_fault_pending(&f));
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("agent_seg_fault");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_seg_dram_span_bounds_and_copies);
    tcase_add_test(tc, test_seg_dram_readers_cannot_write);
    tcase_add_test(tc, test_fault_parse);
    tcase_add_test(tc, test_fault_defer_runs_when_due_and_drops_at_cleanup);
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
