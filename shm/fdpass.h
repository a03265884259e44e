/*
 * Passing descriptors over the agent's unix socket (SCM_RIGHTS): the hello with its
 * eventfd, the welcome with the region and segment memfds, an arena registration with its
 * memfd (docs/protocol.md, "Connecting" and "Extensions"). One message each way per call;
 * both sides (libmc and the agent) use these two functions. Not the messages' meaning.
 */
#ifndef MC_SHM_FDPASS_H
#define MC_SHM_FDPASS_H

#include <stddef.h>

/* The most descriptors one message carries: the region, every segment, the node page. */
#define MC_SHM_FDPASS_MAX 18 /* 2 + MC_SHM_MAX_SEGS, checked in fdpass.c */

/*
 * Send one message of len bytes with nfds descriptors attached (0 .. MC_SHM_FDPASS_MAX;
 * fds may be NULL when nfds is 0), retrying EINTR and never raising SIGPIPE; nonblock:
 * MSG_DONTWAIT (an event loop's). The descriptors stay the caller's. Returns 0 when the
 * whole message went, MC_ERR_TIMEOUT (nonblock and the socket is full: EAGAIN),
 * MC_ERR_INVALID (nfds out of range), MC_ERR_UNAVAILABLE (the peer hung up),
 * MC_ERR_NOMEM, MC_ERR_IO (a short send among others), or another code of
 * mc_err_from_errno.
 */
int mc_shm_fd_send(int sock, const void *buf, size_t len, int nonblock, const int *fds,
                   int nfds);

/*
 * Receive one message of at most len bytes and at most max_fds descriptors
 * (0 .. MC_SHM_FDPASS_MAX), MSG_CMSG_CLOEXEC, retrying EINTR; nonblock: MSG_DONTWAIT.
 * On 0: *len_p is the message's length (0: the peer hung up), *nfds_p the number of
 * descriptors now in fds, which the caller owns and closes. On any error no descriptor is
 * left open. Returns 0, MC_ERR_TIMEOUT (nonblock and nothing to read: EAGAIN),
 * MC_ERR_PROTO (the bytes or the descriptors did not fit, or a control message other than
 * SCM_RIGHTS came), MC_ERR_UNAVAILABLE (ECONNRESET: the peer closed with our data unread;
 * a message it sent before may still be queued), or another code of mc_err_from_errno.
 */
int mc_shm_fd_recv(int sock, void *buf, size_t len, int nonblock, int *fds, int max_fds,
                   size_t *len_p, int *nfds_p);

#endif /* MC_SHM_FDPASS_H */
