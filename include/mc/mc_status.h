/*
 * mcstore status codes: one set for the whole project, public and stable.
 *
 * 0 is success, MC_INPROGRESS (1) means "not final yet" (mc_wait), every failure is a
 * negative MC_ERR_* value. Codes are grouped by how much breaks:
 *   -1  .. -19  plain failures of one operation; the connection is fine;
 *   -20 .. -29  connection failures: the peer broke the protocol, drop this connection;
 *   -30 .. -39  service failures: the agent or master cannot be reached;
 *   -40         a bug in mcstore itself.
 * Values never change once released; new codes take new numbers.
 */
#ifndef MC_STATUS_H
#define MC_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#define MC_OK 0
#define MC_INPROGRESS 1 /* the operation is not final yet */

/* plain failures */
#define MC_ERR_INVALID -1        /* an argument is invalid (NULL, empty or long key, bad flags) */
#define MC_ERR_NOMEM -2          /* out of memory in this process or the agent */
#define MC_ERR_NOT_FOUND -3      /* no readable version of the key (absent, expired, lost) */
#define MC_ERR_EXISTS -4         /* a plain put on a key that has a COMPLETE version */
#define MC_ERR_NO_SPACE -5       /* room could not be made (everything leased or pinned) */
#define MC_ERR_TOO_LARGE -6      /* larger than any segment, or a get buffer too small */
#define MC_ERR_BUSY -7           /* the key or buffer is in use (young in-flight put, op) */
#define MC_ERR_TIMEOUT -8        /* the operation's deadline passed */
#define MC_ERR_CANCELED -9       /* canceled by the caller, or superseded by a newer upsert */
#define MC_ERR_LEASE_EXPIRED -10 /* a read completed after its lease ended; bytes discarded */
#define MC_ERR_CORRUPT -11       /* checksum mismatch; the bytes were discarded */
#define MC_ERR_DENIED -12        /* credentials or cluster token refused */
#define MC_ERR_IO -13            /* an I/O error (disk tier, socket, memory mapping) */

/* connection failures */
#define MC_ERR_PROTO -20 /* the peer broke the protocol (bad frame, ABI mismatch) */

/* service failures */
#define MC_ERR_UNAVAILABLE -30 /* the agent or the master cannot be reached */

/* bugs */
#define MC_ERR_INTERNAL -40 /* an internal invariant failed; please report it */

/*
 * A short English description of `err` (any int). Never NULL; unknown values give
 * "unknown error". The string is static: do not free it. Thread-safe.
 */
const char *mc_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* MC_STATUS_H */
