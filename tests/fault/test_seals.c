/*
 * test_seals_every_fd_sealed: every memfd the agent hands a client in its welcome (the
 * client's region, the DRAM segment's read-only fd and, on a cluster agent, the landing
 * segment's) carries F_SEAL_SEAL after its other seals, so a client cannot add seals of its
 * own under the agent (F_SEAL_WRITE, F_SEAL_FUTURE_WRITE on its region) or change them.
 * The handshake is done by hand, as a hostile client would, against a real master and a
 * cluster-mode agent.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "shm/ring.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* a shared helper header */
#include "tests/cluster/t_cluster.h"
#pragma GCC diagnostic pop

/* Connect to `path`, send a hello, take the welcome and its fds; returns how many. */
static int t_welcome_fds(const char *path, struct mc_shm_welcome *w, int *fds, int cap)
{
    struct mc_shm_hello hello = {.magic = MC_SHM_MAGIC, .abi = MC_SHM_ABI};
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    union {
        struct cmsghdr hdr;
        char buf[CMSG_SPACE(sizeof(int) * (MC_SHM_MAX_SEGS + 2))];
    } ctl;
    struct iovec iov = {.iov_base = w, .iov_len = sizeof(*w)};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *cm;
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), nfds;
    ssize_t n;

    ck_assert_int_ge(s, 0);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    ck_assert_int_eq(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(send(s, &hello, sizeof(hello), 0), sizeof(hello));
    do {
        n = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    ck_assert_int_eq(n, sizeof(*w));
    ck_assert_int_eq(w->status, 0);
    ck_assert(!(msg.msg_flags & MSG_CTRUNC));
    cm = CMSG_FIRSTHDR(&msg);
    ck_assert_ptr_nonnull(cm);
    ck_assert_int_eq(cm->cmsg_type, SCM_RIGHTS);
    nfds = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    ck_assert_int_le(nfds, cap);
    memcpy(fds, CMSG_DATA(cm), sizeof(int) * (size_t)nfds);
    close(s);
    return nfds;
}

START_TEST(test_seals_every_fd_sealed)
{
    struct t_proc master, agent;
    struct mc_shm_welcome w;
    int fds[MC_SHM_MAX_SEGS + 2], nfds, i;
    char dir[256], token[40];

    t_mkdtemp(dir, sizeof(dir));
    t_random_token(token, sizeof(token));
    t_master_start(&master, dir, token);
    t_agent_start(&agent, dir, master.port, "a", NULL, "64M", token, NULL);

    nfds = t_welcome_fds(agent.sock, &w, fds, MC_SHM_MAX_SEGS + 2);
    /* the region, the DRAM segment, the landing segment and the node page */
    ck_assert_int_eq(nfds, 2 + (int)w.nsegs);
    ck_assert_int_eq(w.nsegs, 2);
    for (i = 0; i < nfds; i++) {
        int seals = fcntl(fds[i], F_GET_SEALS);

        ck_assert_msg(seals >= 0, "fd %d of the welcome: F_GET_SEALS: %s", i, strerror(errno));
        ck_assert_msg(seals & F_SEAL_SEAL, "fd %d of the welcome: seals 0x%x lack F_SEAL_SEAL", i,
                      seals);
        errno = 0;
        ck_assert_msg(fcntl(fds[i], F_ADD_SEALS, F_SEAL_WRITE) == -1 && errno == EPERM,
                      "fd %d of the welcome: F_ADD_SEALS F_SEAL_WRITE: %s", i, strerror(errno));
        errno = 0;
        ck_assert_msg(fcntl(fds[i], F_ADD_SEALS, F_SEAL_FUTURE_WRITE) == -1 && errno == EPERM,
                      "fd %d of the welcome: F_ADD_SEALS F_SEAL_FUTURE_WRITE: %s", i,
                      strerror(errno));
        close(fds[i]);
    }
    /* the agent still serves the next client */
    nfds = t_welcome_fds(agent.sock, &w, fds, MC_SHM_MAX_SEGS + 2);
    for (i = 0; i < nfds; i++)
        close(fds[i]);

    ck_assert_int_eq(t_proc_stop(&agent), 0);
    ck_assert_int_eq(t_proc_stop(&master), 0);
    t_rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("seals");
    TCase *tc = tcase_create("seals");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_seals_every_fd_sealed);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
