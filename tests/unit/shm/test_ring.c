/*
 * Unit tests of the ring protocol (shm/ring.h) and the doorbells (shm/doorbell.c): a
 * single-producer single-consumer ring across two threads with the 32-bit indices wrapping,
 * the full and empty cases, and doorbell sleep/wake between threads and between processes
 * (the region is shared by fork), including the timeout path.
 *
 * Hot loops check with a plain `if` and report once: each ck_assert writes to the runner.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mc/mc_status.h"
#include "shm/doorbell.h"
#include "shm/region.h"
#include "shm/ring.h"

#define T_ENTRIES 8u
#define T_COUNT 10000000u
#define T_PINGS 5000u
#define T_WAIT_MS 5000

/* A ring of uint64 values with its ctrl, as a region would hold them. */
struct t_ring {
    struct mc_shm_ring_ctrl ctrl;
    uint64_t slot[T_ENTRIES];
};

static struct t_ring *t_ring_new(uint32_t start)
{
    struct t_ring *r = aligned_alloc(64, sizeof(*r));

    ck_assert_ptr_nonnull(r);
    memset(r, 0, sizeof(*r));
    atomic_store(&r->ctrl.head, start);
    atomic_store(&r->ctrl.tail, start);
    return r;
}

static bool t_ring_has_entries(void *arg)
{
    return mc_ring_ready(arg) > 0;
}

static uint64_t t_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void t_relax(unsigned int *spins)
{
    if (++*spins % 64 == 0)
        sched_yield(); /* two cores here, maybe fewer under a loaded runner */
}

/* --- two threads through an 8-entry ring ------------------------------------------------ */

static void *t_producer(void *arg)
{
    struct t_ring *r = arg;
    uint32_t tail = atomic_load_explicit(&r->ctrl.tail, memory_order_relaxed);
    uint64_t seq = 0;
    unsigned int spins = 0;

    while (seq < T_COUNT) {
        uint32_t space = mc_ring_space(&r->ctrl, T_ENTRIES);

        if (space == 0) {
            t_relax(&spins);
            continue;
        }
        while (space-- > 0 && seq < T_COUNT)
            r->slot[tail++ & (T_ENTRIES - 1)] = seq++;
        mc_ring_publish_tail(&r->ctrl, tail);
    }
    return NULL;
}

START_TEST(test_ring_spsc_wraps_in_order)
{
    /* start so that the free-running indices wrap a few hundred entries in */
    struct t_ring *r = t_ring_new(UINT32_MAX - 300);
    uint32_t head = atomic_load(&r->ctrl.head);
    uint64_t expect = 0, bad_at = UINT64_MAX, bad_val = 0;
    unsigned int spins = 0;
    pthread_t th;

    ck_assert_int_eq(pthread_create(&th, NULL, t_producer, r), 0);
    while (expect < T_COUNT) {
        uint32_t n = mc_ring_ready(&r->ctrl);

        if (n == 0) {
            t_relax(&spins);
            continue;
        }
        if (n > T_ENTRIES && bad_at == UINT64_MAX) {
            bad_at = expect;
            bad_val = n;
            break;
        }
        while (n-- > 0) {
            uint64_t v = r->slot[head++ & (T_ENTRIES - 1)];

            if (v != expect && bad_at == UINT64_MAX) {
                bad_at = expect;
                bad_val = v;
            }
            expect++;
        }
        mc_ring_publish_head(&r->ctrl, head);
        if (bad_at != UINT64_MAX)
            break;
    }
    if (bad_at != UINT64_MAX)
        ck_abort_msg("entry %llu: got %llu", (unsigned long long)bad_at,
                     (unsigned long long)bad_val);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    /* the indices wrapped past UINT32_MAX */
    ck_assert_uint_eq(atomic_load(&r->ctrl.tail), (uint32_t)(UINT32_MAX - 300 + T_COUNT));
    ck_assert_uint_lt(atomic_load(&r->ctrl.tail), UINT32_MAX - 300);
    ck_assert_uint_eq(mc_ring_ready(&r->ctrl), 0);
    free(r);
}
END_TEST

START_TEST(test_ring_full_and_empty_across_wrap)
{
    struct t_ring *r = t_ring_new(UINT32_MAX - 3);
    uint32_t tail = atomic_load(&r->ctrl.tail);
    uint32_t head = tail;
    uint32_t i;

    ck_assert_uint_eq(mc_ring_ready(&r->ctrl), 0);
    ck_assert_uint_eq(mc_ring_space(&r->ctrl, T_ENTRIES), T_ENTRIES);
    for (i = 0; i < T_ENTRIES; i++)
        r->slot[tail++ & (T_ENTRIES - 1)] = 100 + i;
    mc_ring_publish_tail(&r->ctrl, tail);
    ck_assert_uint_eq(mc_ring_space(&r->ctrl, T_ENTRIES), 0); /* full */
    ck_assert_uint_eq(mc_ring_ready(&r->ctrl), T_ENTRIES);

    /* one out, one space */
    ck_assert_uint_eq(r->slot[head++ & (T_ENTRIES - 1)], 100);
    mc_ring_publish_head(&r->ctrl, head);
    ck_assert_uint_eq(mc_ring_space(&r->ctrl, T_ENTRIES), 1);
    ck_assert_uint_eq(mc_ring_ready(&r->ctrl), T_ENTRIES - 1);

    for (i = 1; i < T_ENTRIES; i++)
        ck_assert_uint_eq(r->slot[head++ & (T_ENTRIES - 1)], 100 + i);
    mc_ring_publish_head(&r->ctrl, head);
    ck_assert_uint_eq(mc_ring_ready(&r->ctrl), 0); /* empty */
    ck_assert_uint_eq(mc_ring_space(&r->ctrl, T_ENTRIES), T_ENTRIES);
    ck_assert_uint_eq(head, (uint32_t)(UINT32_MAX - 3 + T_ENTRIES)); /* wrapped */
    free(r);
}
END_TEST

/* --- doorbells between threads ---------------------------------------------------------- */

/* Two rings, one each way; each side sleeps in mc_shm_doorbell_wait whenever its ring is
 * empty, so a lost wake-up shows as a timeout. */
struct t_pingpong {
    struct t_ring *to_echo;
    struct t_ring *to_main;
    int err;       /* echo side: first failure */
};

/* Wait until r has an entry; 0 or the doorbell's error. */
static int t_wait_entry(struct t_ring *r)
{
    int err;

    while (mc_ring_ready(&r->ctrl) == 0) {
        err = mc_shm_doorbell_wait(&r->ctrl, t_ring_has_entries, &r->ctrl, T_WAIT_MS);
        if (err != 0)
            return err;
    }
    return 0;
}

static uint64_t t_pop(struct t_ring *r)
{
    uint32_t head = atomic_load_explicit(&r->ctrl.head, memory_order_relaxed);
    uint64_t v = r->slot[head & (T_ENTRIES - 1)];

    mc_ring_publish_head(&r->ctrl, head + 1);
    return v;
}

static void t_push_ring(struct t_ring *r, uint64_t v)
{
    uint32_t tail = atomic_load_explicit(&r->ctrl.tail, memory_order_relaxed);

    /* callers keep one entry in flight: there is always space */
    r->slot[tail & (T_ENTRIES - 1)] = v;
    mc_ring_publish_tail(&r->ctrl, tail + 1);
    mc_shm_doorbell_ring(&r->ctrl);
}

/* Echo every value back, plus one, until UINT64_MAX. Returns 0 or the first error. */
static int t_echo(struct t_ring *in, struct t_ring *out)
{
    for (;;) {
        uint64_t v;
        int err = t_wait_entry(in);

        if (err != 0)
            return err;
        v = t_pop(in);
        if (v == UINT64_MAX)
            return 0;
        t_push_ring(out, v + 1);
    }
}

static void *t_echo_thread(void *arg)
{
    struct t_pingpong *pp = arg;

    pp->err = t_echo(pp->to_echo, pp->to_main);
    return NULL;
}

/* Send T_PINGS values through the echo; returns the number of wrong or missing answers
 * and the first wait error in *err_p. */
static uint32_t t_ping(struct t_ring *to_echo, struct t_ring *to_main, int *err_p)
{
    uint32_t i, bad = 0;

    *err_p = 0;
    for (i = 0; i < T_PINGS; i++) {
        int err;

        t_push_ring(to_echo, i);
        err = t_wait_entry(to_main);
        if (err != 0) {
            *err_p = err;
            return T_PINGS - i;
        }
        if (t_pop(to_main) != (uint64_t)i + 1)
            bad++;
    }
    t_push_ring(to_echo, UINT64_MAX);
    return bad;
}

START_TEST(test_doorbell_threads_no_lost_wakeup)
{
    struct t_pingpong pp = {t_ring_new(UINT32_MAX - 5), t_ring_new(0), 0};
    pthread_t th;
    uint32_t bad;
    int err;

    ck_assert_int_eq(pthread_create(&th, NULL, t_echo_thread, &pp), 0);
    bad = t_ping(pp.to_echo, pp.to_main, &err);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_msg(err == 0, "main side wait: %d", err);
    ck_assert_msg(pp.err == 0, "echo side wait: %d", pp.err);
    ck_assert_uint_eq(bad, 0);
    /* each side slept at least once, or the test did not test the doorbell */
    ck_assert_uint_gt(atomic_load(&pp.to_echo->ctrl.futex), 0);
    ck_assert_uint_gt(atomic_load(&pp.to_main->ctrl.futex), 0);
    free(pp.to_echo);
    free(pp.to_main);
}
END_TEST

START_TEST(test_doorbell_wait_times_out)
{
    struct t_ring *r = t_ring_new(7);
    uint64_t t0 = t_now_ms();

    ck_assert_int_eq(mc_shm_doorbell_wait(&r->ctrl, t_ring_has_entries, &r->ctrl, 30),
                     MC_ERR_TIMEOUT);
    ck_assert_uint_ge(t_now_ms() - t0, 25);
    ck_assert_uint_eq(atomic_load(&r->ctrl.need_wakeup), 0); /* cleared on the way out */
    ck_assert_int_eq(mc_shm_doorbell_wait(&r->ctrl, t_ring_has_entries, &r->ctrl, 0),
                     MC_ERR_TIMEOUT);
    free(r);
}
END_TEST

START_TEST(test_doorbell_wait_ready_returns_at_once)
{
    struct t_ring *r = t_ring_new(UINT32_MAX);

    r->slot[UINT32_MAX & (T_ENTRIES - 1)] = 1;
    mc_ring_publish_tail(&r->ctrl, 0); /* UINT32_MAX + 1 */
    ck_assert_uint_eq(mc_ring_ready(&r->ctrl), 1);
    /* no timeout: it would hang if it slept */
    ck_assert_int_eq(mc_shm_doorbell_wait(&r->ctrl, t_ring_has_entries, &r->ctrl, -1), 0);
    ck_assert_uint_eq(atomic_load(&r->ctrl.need_wakeup), 0);
    free(r);
}
END_TEST

START_TEST(test_doorbell_ring_quiet_without_waiter)
{
    struct t_ring *r = t_ring_new(0);

    ck_assert(!mc_shm_doorbell_needed(&r->ctrl));
    mc_shm_doorbell_ring(&r->ctrl);
    ck_assert_uint_eq(atomic_load(&r->ctrl.futex), 0); /* not bumped: no syscall either */

    atomic_store(&r->ctrl.need_wakeup, 1);
    ck_assert(mc_shm_doorbell_needed(&r->ctrl));
    mc_shm_doorbell_bump(&r->ctrl);
    mc_shm_doorbell_wake(&r->ctrl); /* nobody waits: harmless */
    ck_assert_uint_eq(atomic_load(&r->ctrl.futex), 1);
    mc_shm_doorbell_ring(&r->ctrl);
    ck_assert_uint_eq(atomic_load(&r->ctrl.futex), 2);
    free(r);
}
END_TEST

/* --- doorbells between processes -------------------------------------------------------- */

/* Two rings in a MAP_SHARED mapping, inherited by a forked echo child: the futex words are
 * shared across address spaces, as in a client's region. */
START_TEST(test_doorbell_processes_no_lost_wakeup)
{
    struct t_ring *rings;
    uint32_t bad;
    pid_t pid;
    int err, status;

    rings = mmap(NULL, 2 * sizeof(*rings), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(rings, MAP_FAILED);
    atomic_store(&rings[0].ctrl.head, UINT32_MAX - 2);
    atomic_store(&rings[0].ctrl.tail, UINT32_MAX - 2);

    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(t_echo(&rings[0], &rings[1]) == 0 ? 0 : 1);

    bad = t_ping(&rings[0], &rings[1], &err);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(err == 0, "parent wait: %d", err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "echo child failed: %d",
                  status);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_gt(atomic_load(&rings[0].ctrl.futex), 0);
    ck_assert_uint_gt(atomic_load(&rings[1].ctrl.futex), 0);
    munmap(rings, 2 * sizeof(*rings));
}
END_TEST

/* The same through a real region's SQ and CQ: the child (the "agent") answers each SQE with
 * a CQE; then the parent times out waiting for a CQE that never comes, and the child times
 * out waiting for an SQE that never comes. */
START_TEST(test_doorbell_region_fork_and_timeout)
{
    struct mc_shm_layout lay;
    struct mc_shm_region *r;
    uint32_t i, bad = 0;
    pid_t pid;
    int err = 0, status;

    ck_assert_int_eq(mc_shm_layout_init(&lay, 4, 8, MC_SHM_CHUNK, 1, 4), 0);
    ck_assert_int_eq(mc_shm_region_create("t_ring", &lay, 9, &r), 0);

    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        uint32_t head = 0, ctail = 0, n;

        for (n = 0; n < 1000; n++) {
            struct mc_sqe sqe;
            struct mc_cqe *cqe;

            while (mc_ring_ready(r->sq) == 0) {
                if (mc_shm_doorbell_wait(r->sq, t_ring_has_entries, r->sq, T_WAIT_MS) != 0)
                    _exit(2);
            }
            sqe = *mc_shm_sqe_at(r, head);
            mc_ring_publish_head(r->sq, ++head);
            cqe = mc_shm_cqe_at(r, ctail);
            memset(cqe, 0, sizeof(*cqe));
            cqe->user_data = sqe.user_data;
            cqe->res = (int32_t)sqe.arg0;
            mc_ring_publish_tail(r->cq, ++ctail);
            mc_shm_doorbell_ring(r->cq);
        }
        /* nothing more comes: the agent-side wait times out */
        _exit(mc_shm_doorbell_wait(r->sq, t_ring_has_entries, r->sq, 50) == MC_ERR_TIMEOUT
                  ? 0
                  : 3);
    }

    for (i = 0; i < 1000; i++) {
        struct mc_sqe *sqe = mc_shm_sqe_at(r, i);
        struct mc_cqe cqe;

        memset(sqe, 0, sizeof(*sqe));
        sqe->user_data = 1000 + i;
        sqe->arg0 = i;
        mc_ring_publish_tail(r->sq, i + 1);
        mc_shm_doorbell_ring(r->sq);
        while (mc_ring_ready(r->cq) == 0 && err == 0)
            err = mc_shm_doorbell_wait(r->cq, t_ring_has_entries, r->cq, T_WAIT_MS);
        if (err != 0)
            break;
        cqe = *mc_shm_cqe_at(r, i);
        mc_ring_publish_head(r->cq, i + 1);
        if (cqe.user_data != 1000 + i || cqe.res != (int32_t)i)
            bad++;
    }
    ck_assert_msg(err == 0, "parent wait %d at %u", err, i);
    ck_assert_uint_eq(bad, 0);
    ck_assert_int_eq(mc_shm_doorbell_wait(r->cq, t_ring_has_entries, r->cq, 50),
                     MC_ERR_TIMEOUT);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    mc_shm_region_destroy(r);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("ring");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_ring_spsc_wraps_in_order);
    tcase_add_test(tc, test_ring_full_and_empty_across_wrap);
    tcase_add_test(tc, test_doorbell_threads_no_lost_wakeup);
    tcase_add_test(tc, test_doorbell_wait_times_out);
    tcase_add_test(tc, test_doorbell_wait_ready_returns_at_once);
    tcase_add_test(tc, test_doorbell_ring_quiet_without_waiter);
    tcase_add_test(tc, test_doorbell_processes_no_lost_wakeup);
    tcase_add_test(tc, test_doorbell_region_fork_and_timeout);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(t_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
