/*
 * The token and status checks of daemon/proto (proto_base.h).
 */
#include "daemon/proto/proto_base.h"

#include <mc/mc_status.h>

bool mc_proto_token_equal(const char *token, size_t token_len, const struct mc_proto_bytes *t)
{
    volatile unsigned char diff; /* the compiler may not cut the loop short */
    unsigned char d = 0;
    size_t i;

    if (token == NULL)
        return true;
    d |= (unsigned char)(t->len != token_len);
    for (i = 0; i < token_len; i++) {
        unsigned char b = i < t->len ? t->p[i] : 0;

        d |= (unsigned char)((unsigned char)token[i] ^ b);
    }
    diff = d;
    return diff == 0;
}

bool mc_proto_status_is_valid(int64_t status, bool allow_one)
{
    if (status == 0)
        return true;
    if (status == 1)
        return allow_one;
    if (status >= MC_ERR_IO && status <= MC_ERR_INVALID) /* the plain failures */
        return true;
    return status == MC_ERR_PROTO || status == MC_ERR_UNAVAILABLE || status == MC_ERR_INTERNAL;
}
