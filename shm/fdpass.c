/*
 * SCM_RIGHTS send and receive (fdpass.h). Every descriptor received is either handed to
 * the caller or closed, on every path.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mc/mc_status.h"

#include "common/err.h"
#include "shm/fdpass.h"
#include "shm/ring.h"

static_assert(MC_SHM_FDPASS_MAX == 2 + MC_SHM_MAX_SEGS,
              "a welcome's descriptors fit one message");

int mc_shm_fd_send(int sock, const void *buf, size_t len, int nonblock, const int *fds,
                   int nfds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * MC_SHM_FDPASS_MAX)];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr msg = {0};
    struct cmsghdr *cm;
    ssize_t n;

    if (nfds < 0 || nfds > MC_SHM_FDPASS_MAX || (nfds > 0 && fds == NULL))
        return MC_ERR_INVALID;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (nfds > 0) {
        memset(&ctl, 0, sizeof(ctl));
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    }
    do {
        n = sendmsg(sock, &msg, MSG_NOSIGNAL | (nonblock ? MSG_DONTWAIT : 0));
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return MC_ERR_TIMEOUT;
    if (n < 0)
        return mc_err_from_errno(errno);
    return (size_t)n == len ? 0 : MC_ERR_IO;
}

static void close_all(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

int mc_shm_fd_recv(int sock, void *buf, size_t len, int nonblock, int *fds, int max_fds,
                   size_t *len_p, int *nfds_p)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * MC_SHM_FDPASS_MAX)];
        struct cmsghdr align;
    } ctl;
    int got[MC_SHM_FDPASS_MAX];
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr msg = {0};
    struct cmsghdr *cm;
    int ngot = 0, err = 0;
    ssize_t n;

    if (max_fds < 0 || max_fds > MC_SHM_FDPASS_MAX || (max_fds > 0 && fds == NULL))
        return MC_ERR_INVALID;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof(ctl.buf);
    do {
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | (nonblock ? MSG_DONTWAIT : 0));
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return MC_ERR_TIMEOUT;
        return mc_err_from_errno(errno); /* nothing was received: no descriptor either */
    }

    /* collect every descriptor first, so that each error path can close them all */
    for (cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
        size_t cnt;

        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
            cm->cmsg_len < CMSG_LEN(0)) {
            err = MC_ERR_PROTO;
            continue;
        }
        cnt = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < cnt; i++) {
            int fd;

            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (ngot < MC_SHM_FDPASS_MAX) {
                got[ngot++] = fd;
            } else {
                close(fd); /* cannot happen with our buffer size, but never leak */
                err = MC_ERR_PROTO;
            }
        }
    }
    if (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC))
        err = MC_ERR_PROTO; /* descriptors or bytes were dropped */
    else if (ngot > max_fds)
        err = MC_ERR_PROTO;
    if (err != 0) {
        close_all(got, ngot);
        return err;
    }
    if (ngot > 0)
        memcpy(fds, got, sizeof(int) * (size_t)ngot);
    *len_p = (size_t)n;
    *nfds_p = ngot;
    return 0;
}
