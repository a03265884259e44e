/*
 * Unit tests of descriptor passing (shm/fdpass.c) and of the socket path rule
 * (shm/sockpath.c): descriptors arrive and stay open, too many or truncated messages are
 * refused with every received descriptor closed, an empty nonblocking socket and a hung-up
 * peer are told apart, as a full socket for a nonblocking send; the path follows argument,
 * $MC_AGENT_SOCKET, $XDG_RUNTIME_DIR, the system path, and refuses what does not fit.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mc/mc_status.h"
#include "shm/fdpass.h"
#include "shm/sockpath.h"

static int t_sv[2];

static void t_setup(void)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, t_sv), 0);
}

static void t_teardown(void)
{
    close(t_sv[0]);
    close(t_sv[1]);
}

/* Descriptors this process has open. */
static int t_nfds_open(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own */
}

START_TEST(test_fdpass_sends_bytes_and_descriptors)
{
    int p[2], got[4], nfds = -1;
    char msg[] = "hello", buf[16];
    size_t len = 0;

    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(mc_shm_fd_send(t_sv[0], msg, sizeof(msg), 0, p, 2), 0);
    ck_assert_int_eq(mc_shm_fd_recv(t_sv[1], buf, sizeof(buf), 0, got, 4, &len, &nfds), 0);
    ck_assert_uint_eq(len, sizeof(msg));
    ck_assert_str_eq(buf, msg);
    ck_assert_int_eq(nfds, 2);
    /* the received write end feeds the sent read end: both are live descriptors */
    ck_assert_int_eq(write(got[1], "x", 1), 1);
    ck_assert_int_eq(read(p[0], buf, 1), 1);
    ck_assert_int_eq(fcntl(got[0], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    close(got[0]);
    close(got[1]);
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(test_fdpass_refuses_too_many_and_closes_them)
{
    int p[2], got[1], nfds = -1, before;
    char buf[16];
    size_t len = 0;

    ck_assert_int_eq(pipe(p), 0);
    before = t_nfds_open();
    ck_assert_int_eq(mc_shm_fd_send(t_sv[0], "m", 1, 0, p, 2), 0);
    ck_assert_int_eq(mc_shm_fd_recv(t_sv[1], buf, sizeof(buf), 0, got, 1, &len, &nfds),
                     MC_ERR_PROTO);
    ck_assert_int_eq(nfds, -1); /* outputs only on success */
    ck_assert_int_eq(t_nfds_open(), before);
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(test_fdpass_refuses_truncated_bytes)
{
    int p[2], got[2], nfds = -1, before;
    char big[64] = {0}, buf[8];
    size_t len = 0;

    ck_assert_int_eq(pipe(p), 0);
    before = t_nfds_open();
    ck_assert_int_eq(mc_shm_fd_send(t_sv[0], big, sizeof(big), 0, p, 1), 0);
    ck_assert_int_eq(mc_shm_fd_recv(t_sv[1], buf, sizeof(buf), 0, got, 2, &len, &nfds),
                     MC_ERR_PROTO);
    ck_assert_int_eq(t_nfds_open(), before);
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(test_fdpass_empty_and_hung_up)
{
    int got[1], nfds = -1;
    char buf[8];
    size_t len = 99;

    ck_assert_int_eq(mc_shm_fd_recv(t_sv[1], buf, sizeof(buf), 1, got, 1, &len, &nfds),
                     MC_ERR_TIMEOUT);
    close(t_sv[0]);
    t_sv[0] = -1;
    ck_assert_int_eq(mc_shm_fd_recv(t_sv[1], buf, sizeof(buf), 1, got, 1, &len, &nfds), 0);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(nfds, 0);
    ck_assert_int_eq(mc_shm_fd_send(t_sv[1], "m", 1, 0, NULL, 0), MC_ERR_UNAVAILABLE);
}
END_TEST

START_TEST(test_fdpass_nonblocking_send_on_a_full_socket)
{
    char chunk[1024] = {0};
    int err;

    /* nobody reads t_sv[1]: the socket fills, and a nonblocking send then says so */
    for (int i = 0; i < 100000; i++) {
        err = mc_shm_fd_send(t_sv[0], chunk, sizeof(chunk), 1, NULL, 0);
        if (err != 0)
            break;
    }
    ck_assert_int_eq(err, MC_ERR_TIMEOUT);
}
END_TEST

START_TEST(test_fdpass_checks_counts)
{
    int fd = 0, got[1], nfds;
    size_t len;
    char buf[1];

    ck_assert_int_eq(mc_shm_fd_send(t_sv[0], "m", 1, 0, &fd, -1), MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_fd_send(t_sv[0], "m", 1, 0, &fd, MC_SHM_FDPASS_MAX + 1),
                     MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_fd_send(t_sv[0], "m", 1, 0, NULL, 1), MC_ERR_INVALID);
    ck_assert_int_eq(
        mc_shm_fd_recv(t_sv[1], buf, 1, 1, got, MC_SHM_FDPASS_MAX + 1, &len, &nfds),
        MC_ERR_INVALID);
}
END_TEST

START_TEST(test_sockpath_rule)
{
    char buf[64];
    int rundir = -1;

    unsetenv("MC_AGENT_SOCKET");
    unsetenv("XDG_RUNTIME_DIR");
    ck_assert_int_eq(mc_shm_socket_path(NULL, buf, sizeof(buf), &rundir), 0);
    ck_assert_str_eq(buf, "/run/mc/agent.sock");
    ck_assert_int_eq(rundir, 0);
    setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
    ck_assert_int_eq(mc_shm_socket_path(NULL, buf, sizeof(buf), &rundir), 0);
    ck_assert_str_eq(buf, "/run/user/7/mc/agent.sock");
    ck_assert_int_eq(rundir, 1);
    setenv("MC_AGENT_SOCKET", "", 1); /* empty counts as unset */
    ck_assert_int_eq(mc_shm_socket_path(NULL, buf, sizeof(buf), NULL), 0);
    ck_assert_str_eq(buf, "/run/user/7/mc/agent.sock");
    setenv("MC_AGENT_SOCKET", "/tmp/a.sock", 1);
    ck_assert_int_eq(mc_shm_socket_path(NULL, buf, sizeof(buf), &rundir), 0);
    ck_assert_str_eq(buf, "/tmp/a.sock");
    ck_assert_int_eq(rundir, 0);
    ck_assert_int_eq(mc_shm_socket_path("/x/y.sock", buf, sizeof(buf), NULL), 0);
    ck_assert_str_eq(buf, "/x/y.sock");
    ck_assert_int_eq(mc_shm_socket_path("", buf, sizeof(buf), NULL), MC_ERR_INVALID);
    /* a path that fills the buffer leaves no room for its NUL */
    ck_assert_int_eq(mc_shm_socket_path("/01234567", buf, 9, NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_socket_path("/0123456", buf, 9, NULL), 0);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("fdpass");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, t_setup, t_teardown);
    tcase_add_test(tc, test_fdpass_sends_bytes_and_descriptors);
    tcase_add_test(tc, test_fdpass_refuses_too_many_and_closes_them);
    tcase_add_test(tc, test_fdpass_refuses_truncated_bytes);
    tcase_add_test(tc, test_fdpass_empty_and_hung_up);
    tcase_add_test(tc, test_fdpass_nonblocking_send_on_a_full_socket);
    tcase_add_test(tc, test_fdpass_checks_counts);
    tcase_add_test(tc, test_sockpath_rule);
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
