/*
 * Unit tests of the agent's event loop (daemon/agent/loop.h), each run over both backends
 * (io_uring, epoll): each completion runs the callback its request was armed with, once,
 * with the request's result; a canceled request completes with -ECANCELED; a futex wait
 * completes on a wake (skipped where the kernel lacks the futex ops); writes, multishot
 * accepts, and a futex wait and an fd event together.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/agent/loop.h"

/* _i of a loop test: the backend (enum mc_loop_kind) */
static void t_init(struct mc_loop *l, int kind)
{
    ck_assert_int_eq(mc_loop_init(l, 64, (enum mc_loop_kind)kind), 0);
    /* io_uring runs here (its fallback is what the epoll run tests) */
    ck_assert_int_eq(l->kind, kind);
    ck_assert_str_eq(mc_loop_name(l), kind == MC_LOOP_EPOLL ? "epoll" : "io_uring");
}

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

    t_init(&l, _i);
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

    t_init(&l, _i);
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

    t_init(&l, _i);
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

static int t_listener(char *path, size_t len)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    snprintf(path, len, "/tmp/mc-test-loop-%d.sock", (int)getpid());
    unlink(path);
    ck_assert_int_ge(fd, 0);
    strcpy(sa.sun_path, path);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(fd, 8), 0);
    return fd;
}

static int t_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    strcpy(sa.sun_path, path);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

START_TEST(test_loop_write_and_accept_multishot)
{
    struct mc_loop l;
    struct t_ev wr = {.ev.fn = t_cb}, ac = {.ev.fn = t_cb};
    char path[108], buf[8];
    int p[2], lfd, c1, c2, accepted1;

    t_init(&l, _i);
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(mc_loop_write(&l, p[1], "abc", 3, &wr.ev), 0);
    t_until(&l, &wr);
    ck_assert_int_eq(wr.calls, 1);
    ck_assert_int_eq(wr.res, 3);
    ck_assert_int_eq(read(p[0], buf, sizeof(buf)), 3);
    ck_assert_mem_eq(buf, "abc", 3);

    /* one completion per connection, each with MORE: the request stays armed */
    lfd = t_listener(path, sizeof(path));
    ck_assert_int_eq(mc_loop_accept(&l, lfd, &ac.ev), 0);
    mc_loop_submit(&l);
    c1 = t_connect(path);
    t_until(&l, &ac);
    ck_assert_int_eq(ac.calls, 1);
    ck_assert_int_ge(ac.res, 0);
    ck_assert(ac.flags & MC_LOOP_F_MORE);
    accepted1 = ac.res;
    ck_assert(fcntl(accepted1, F_GETFL) & O_NONBLOCK);
    ck_assert(fcntl(accepted1, F_GETFD) & FD_CLOEXEC);
    ac.calls = 0;
    c2 = t_connect(path);
    t_until(&l, &ac);
    ck_assert_int_eq(ac.calls, 1);
    ck_assert_int_ge(ac.res, 0);
    ck_assert_int_ne(ac.res, accepted1);
    close(ac.res);
    /* its cancel is its final completion */
    ac.calls = 0;
    ck_assert_int_eq(mc_loop_cancel(&l, &ac.ev), 0);
    for (int i = 0; i < 200 && (ac.calls == 0 || (ac.flags & MC_LOOP_F_MORE)); i++) {
        mc_loop_wait(&l, 10000000);
        mc_loop_dispatch(&l);
    }
    ck_assert_int_eq(ac.res, -ECANCELED);
    ck_assert_int_eq(ac.flags & MC_LOOP_F_MORE, 0);
    mc_loop_cleanup(&l);
    close(accepted1);
    close(c1);
    close(c2);
    close(lfd);
    unlink(path);
    close(p[0]);
    close(p[1]);
}
END_TEST

struct t_waker {
    uint32_t *word;
    int fd;
};

static void *t_wake_later(void *arg)
{
    struct t_waker *w = arg;

    usleep(20000);
    if (w->word != NULL) {
        __atomic_add_fetch(w->word, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, w->word, FUTEX_WAKE, 1, NULL, NULL, 0);
    } else {
        ck_assert_int_eq(write(w->fd, "y", 1), 1);
    }
    return NULL;
}

/* A loop asleep with a futex wait and a read armed wakes for either: the agent sleeps on
 * its clients' doorbells and its timer, signals and sockets at once. */
START_TEST(test_loop_futex_and_fd_wake_one_sleep)
{
    struct mc_loop l;
    struct t_ev fw = {.ev.fn = t_cb}, rd = {.ev.fn = t_cb};
    uint32_t *word = aligned_alloc(64, 64);
    struct t_waker w;
    pthread_t th;
    char buf[4];
    int p[2];

    t_init(&l, _i);
    if (!mc_loop_has_futex(&l)) {
        mc_loop_cleanup(&l);
        free(word);
        return;
    }
    ck_assert_int_eq(pipe(p), 0);
    *word = 1;
    ck_assert_int_eq(mc_loop_futex_wait(&l, word, 1, &fw.ev), 0);
    ck_assert_int_eq(mc_loop_read(&l, p[0], buf, sizeof(buf), &rd.ev), 0);
    /* the fd first: one wait (no timeout) returns for it */
    w = (struct t_waker){.word = NULL, .fd = p[1]};
    ck_assert_int_eq(pthread_create(&th, NULL, t_wake_later, &w), 0);
    while (rd.calls == 0) {
        mc_loop_wait(&l, -1);
        mc_loop_dispatch(&l);
    }
    pthread_join(th, NULL);
    ck_assert_int_eq(rd.res, 1);
    ck_assert_int_eq(fw.calls, 0);
    /* then the word, while the loop sleeps with no timeout */
    w = (struct t_waker){.word = word, .fd = -1};
    ck_assert_int_eq(pthread_create(&th, NULL, t_wake_later, &w), 0);
    while (fw.calls == 0) {
        mc_loop_wait(&l, -1);
        mc_loop_dispatch(&l);
    }
    pthread_join(th, NULL);
    ck_assert_int_eq(fw.res, 0);
    mc_loop_cleanup(&l);
    free(word);
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(test_loop_cancel_futex_wait)
{
    struct mc_loop l;
    struct t_ev fw = {.ev.fn = t_cb};
    uint32_t *word = aligned_alloc(64, 64);

    t_init(&l, _i);
    if (!mc_loop_has_futex(&l)) {
        mc_loop_cleanup(&l);
        free(word);
        return;
    }
    *word = 3;
    ck_assert_int_eq(mc_loop_futex_wait(&l, word, 3, &fw.ev), 0);
    mc_loop_submit(&l);
    ck_assert_int_eq(mc_loop_cancel(&l, &fw.ev), 0);
    t_until(&l, &fw);
    ck_assert_int_eq(fw.calls, 1);
    ck_assert_int_eq(fw.res, -ECANCELED);
    mc_loop_cleanup(&l);
    free(word);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("agent_loop");
    TCase *tc = tcase_create("core");

    /* every test over both backends: _i is the enum mc_loop_kind */
    tcase_add_loop_test(tc, test_loop_read_and_poll_run_their_callbacks, 0, 2);
    tcase_add_loop_test(tc, test_loop_cancel_completes_with_ecanceled, 0, 2);
    tcase_add_loop_test(tc, test_loop_futex_wait_completes_on_wake, 0, 2);
    tcase_add_loop_test(tc, test_loop_write_and_accept_multishot, 0, 2);
    tcase_add_loop_test(tc, test_loop_futex_and_fd_wake_one_sleep, 0, 2);
    tcase_add_loop_test(tc, test_loop_cancel_futex_wait, 0, 2);
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
