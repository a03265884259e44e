/*
 * errno -> MC_ERR_* (err.h). Pure: no errno read here, no allocation.
 */
#include <errno.h>

#include <mc/mc_status.h>

#include "common/err.h"

int mc_err_from_errno(int e)
{
    switch (e) {
    case 0:
        return MC_ERR_INTERNAL; /* a caller that lost errno: never report success */
    case ENOMEM:
    case ENOBUFS:
    case EMFILE:
    case ENFILE:
    case ENOSPC:
    case ETOOMANYREFS:
        return MC_ERR_NOMEM;
    case EINVAL:
    case EBADF:
    case EOVERFLOW:
    case EFBIG:
        return MC_ERR_INVALID;
    case EACCES:
    case EPERM:
        return MC_ERR_DENIED;
    case ETIMEDOUT:
        return MC_ERR_TIMEOUT;
    case EBUSY:
        return MC_ERR_BUSY;
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case ENOTCONN:
        return MC_ERR_UNAVAILABLE;
    default:
        return MC_ERR_IO;
    }
}
