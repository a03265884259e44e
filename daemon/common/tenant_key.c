/*
 * Tenant names and directory keys (tenant_key.h).
 */
#include "daemon/common/tenant_key.h"

#include <string.h>

_Static_assert(MC_DIR_KEY_MAX < 65536, "directory keys fit a u16 length");

bool mc_tenant_name_ok(const char *name, size_t len)
{
    size_t i;

    if (name == NULL || len == 0 || len > MC_TENANT_NAME_MAX)
        return false;
    for (i = 0; i < len; i++) {
        char ch = name[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == '-'))
            return false;
    }
    return true;
}

bool mc_tenant_client_key_ok(const char *key, size_t len)
{
    return key != NULL && len >= 1 && len <= MC_KEY_MAX && memchr(key, '\0', len) == NULL;
}

size_t mc_tenant_key_tag(const char *tenant, const char *key, size_t key_len, char *out)
{
    size_t n = tenant != NULL ? strnlen(tenant, MC_TENANT_NAME_MAX) : 0, at = 0;

    if (key_len > MC_KEY_MAX)
        key_len = MC_KEY_MAX;
    if (n > 0) {
        out[at++] = '\0';
        memcpy(out + at, tenant, n);
        at += n;
        out[at++] = '\0';
    }
    if (key_len > 0)
        memcpy(out + at, key, key_len);
    return at + key_len;
}

bool mc_tenant_key_split(const char *dkey, size_t dlen, const char **name_p, size_t *name_len_p,
                         const char **key_p, size_t *key_len_p)
{
    const char *end;

    if (dlen == 0 || dkey[0] != '\0') {
        *name_p = dkey;
        *name_len_p = 0;
        *key_p = dkey;
        *key_len_p = dlen;
        return true;
    }
    end = memchr(dkey + 1, '\0', dlen - 1);
    if (end == NULL || !mc_tenant_name_ok(dkey + 1, (size_t)(end - dkey - 1)))
        return false;
    *name_p = dkey + 1;
    *name_len_p = (size_t)(end - dkey - 1);
    *key_p = end + 1;
    *key_len_p = dlen - (size_t)(end + 1 - dkey);
    return true;
}
