/*
 * Status codes as text (mc_strerror) and the library version (mc_version). Neither needs
 * a client, allocates or touches errno: both return static strings. Linked whole into
 * libmc.so, which exports both (hence the visibility), and as it is into the daemons.
 */
#include <mc/mc.h>

#define MC_STATUS_EXPORT __attribute__((visibility("default")))

/* Built from the header's macros so the two cannot disagree. */
#define MC_STR_(x) #x
#define MC_STR(x)  MC_STR_(x)
#define MC_VERSION_STRING                                                                      \
    MC_STR(MC_VERSION_MAJOR) "." MC_STR(MC_VERSION_MINOR) "." MC_STR(MC_VERSION_PATCH)

MC_STATUS_EXPORT const char *mc_strerror(int err)
{
    /* A switch rather than a table indexed by -err: the codes are sparse (grouped by
     * tens), and any int must map safely, INT_MIN included. */
    switch (err) {
    case MC_OK:
        return "success";
    case MC_INPROGRESS:
        return "operation in progress";
    case MC_PRESENT:
        return "object already present";
    case MC_ERR_INVALID:
        return "invalid argument";
    case MC_ERR_NOMEM:
        return "out of memory";
    case MC_ERR_NOT_FOUND:
        return "object not found";
    case MC_ERR_EXISTS:
        return "object already exists";
    case MC_ERR_NO_SPACE:
        return "no space left in the store";
    case MC_ERR_TOO_LARGE:
        return "object or buffer size too large";
    case MC_ERR_BUSY:
        return "key or buffer busy";
    case MC_ERR_TIMEOUT:
        return "operation timed out";
    case MC_ERR_CANCELED:
        return "operation canceled";
    case MC_ERR_LEASE_EXPIRED:
        return "read lease expired";
    case MC_ERR_CORRUPT:
        return "checksum mismatch";
    case MC_ERR_DENIED:
        return "permission denied";
    case MC_ERR_IO:
        return "I/O error";
    case MC_ERR_PROTO:
        return "protocol error";
    case MC_ERR_UNAVAILABLE:
        return "service unavailable";
    case MC_ERR_INTERNAL:
        return "internal error";
    default:
        return "unknown error";
    }
}

MC_STATUS_EXPORT const char *mc_version(void)
{
    return MC_VERSION_STRING;
}
