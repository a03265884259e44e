/*
 * mcstore status codes: one set for the whole project, public and stable.
 *
 * 0 is success, MC_INPROGRESS (1) means "not final yet" (mc_wait), MC_PRESENT (2) is the
 * success of a put that found its key stored already (MC_PUT_EXISTS_OK), every failure is a
 * negative MC_ERR_* value. Codes are grouped by how much breaks:
 *   -1001 .. -1019  plain failures of one operation; the connection is fine;
 *   -1020 .. -1029  connection failures: the peer broke the protocol, drop this connection;
 *   -1030 .. -1039  service failures: the agent or master cannot be reached;
 *   -1040           a bug in mcstore itself.
 * The codes lie outside the range of negated errno values (-1 .. -133 on Linux), so that
 * neither is ever mistaken for the other where an int may carry both; compare against the
 * names, never against numbers. While the ABI is 0.x, values may still move (they did in
 * 0.2, from -1 .. -40); from 1.0 on they never change, and new codes take new numbers.
 */
#ifndef MC_STATUS_H
#define MC_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#define MC_OK 0
#define MC_INPROGRESS 1 /* the operation is not final yet */
#define MC_PRESENT 2    /* a put with MC_PUT_EXISTS_OK found the key stored already */

/* plain failures */
#define MC_ERR_INVALID -1001    /* an argument is invalid (NULL, empty or long key, bad flags) */
#define MC_ERR_NOMEM -1002      /* out of memory in this process or the agent */
#define MC_ERR_NOT_FOUND -1003  /* no readable version of the key (absent, expired, lost) */
#define MC_ERR_EXISTS -1004     /* a plain put on a key that has a COMPLETE version */
#define MC_ERR_NO_SPACE -1005   /* room could not be made (everything leased or pinned) */
#define MC_ERR_TOO_LARGE -1006  /* larger than any segment, or a get buffer too small */
#define MC_ERR_BUSY -1007       /* the key or buffer is in use (young in-flight put, op) */
#define MC_ERR_TIMEOUT -1008    /* the operation's deadline passed */
#define MC_ERR_CANCELED -1009   /* canceled by the caller, or superseded by a newer upsert */
#define MC_ERR_LEASE_EXPIRED -1010/* a read completed after its lease ended; bytes discarded */
#define MC_ERR_CORRUPT -1011    /* checksum mismatch; the bytes were discarded */
#define MC_ERR_DENIED -1012     /* credentials or cluster token refused */
#define MC_ERR_IO -1013         /* an I/O error (disk tier, socket, memory mapping) */

/* connection failures */
#define MC_ERR_PROTO -1020      /* the peer broke the protocol (bad frame, ABI mismatch) */

/* service failures */
#define MC_ERR_UNAVAILABLE -1030/* the agent or the master cannot be reached */

/* bugs */
#define MC_ERR_INTERNAL -1040   /* an internal invariant failed; please report it */

/*
 * A short English description of `err` (any int). Never NULL; unknown values give
 * "unknown error". The string is static: do not free it. Thread-safe.
 */
const char *mc_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* MC_STATUS_H */
