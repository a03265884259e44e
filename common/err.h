/*
 * Status helpers below every component (shm, libmc, the daemons): the one mapping from
 * errno values to the MC_ERR_* codes of <mc/mc_status.h>. Internal header; never
 * installed. mc_strerror() itself is public (mc_status.h) and lives in common/status.c,
 * linked by libmc and by the daemons alike, neither through the other.
 */
#ifndef MC_COMMON_ERR_H
#define MC_COMMON_ERR_H

/*
 * The MC_ERR_* code for errno value e, captured right after the failed call (no errno
 * crosses a module boundary: convert at once). Never 0: e == 0 (a caller that lost errno)
 * gives MC_ERR_INTERNAL. The groups:
 *   ENOMEM ENOBUFS EMFILE ENFILE ENOSPC ETOOMANYREFS  -> MC_ERR_NOMEM
 *   EINVAL EBADF EOVERFLOW EFBIG                       -> MC_ERR_INVALID
 *   EACCES EPERM                                       -> MC_ERR_DENIED
 *   ETIMEDOUT                                          -> MC_ERR_TIMEOUT
 *   EBUSY                                              -> MC_ERR_BUSY
 *   ECONNREFUSED ECONNRESET EPIPE ENOTCONN             -> MC_ERR_UNAVAILABLE (the peer)
 *   anything else                                      -> MC_ERR_IO
 * A caller whose errno means more in its context (ENOENT on connect: no agent there)
 * decides that case itself and passes the rest here.
 */
int mc_err_from_errno(int e);

#endif /* MC_COMMON_ERR_H */
