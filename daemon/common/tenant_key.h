/*
 * Tenant names and the directory's key namespace (docs/tenants.md).
 *
 * A client's key is a NUL-free string of 1..MC_KEY_MAX bytes (include/mc/mc.h). The agent
 * stores the key of a client of tenant T under the directory key "\0" T "\0" key; the
 * default tenant's keys are stored as they are. No client key holds a NUL, so no key of one
 * tenant can name a key of another, and the master learns a put's tenant from its key.
 * Pure functions: no state, no I/O.
 */
#ifndef MC_TENANT_KEY_H
#define MC_TENANT_KEY_H

#include <stdbool.h>
#include <stddef.h>

#include <mc/mc_limits.h>

#define MC_TENANT_NAME_MAX 32u /* bytes of a tenant's name */
#define MC_TENANT_TAG_MAX (MC_TENANT_NAME_MAX + 2u)
/* The longest key the directory, the master link and the wire carry. */
#define MC_DIR_KEY_MAX (MC_KEY_MAX + MC_TENANT_TAG_MAX)

/* 1..MC_TENANT_NAME_MAX bytes of [A-Za-z0-9_.-]. */
bool mc_tenant_name_ok(const char *name, size_t len);

/* A client key: 1..MC_KEY_MAX bytes, no NUL. */
bool mc_tenant_client_key_ok(const char *key, size_t len);

/*
 * The directory key of `key` (key_len 0..MC_KEY_MAX: 0 for an empty prefix) for tenant
 * `tenant` (NULL or "" = the default tenant) into out (room for MC_DIR_KEY_MAX bytes).
 * Returns its length.
 */
size_t mc_tenant_key_tag(const char *tenant, const char *key, size_t key_len, char *out);

/*
 * Split a directory key: name_p and name_len_p receive the tenant's name (length 0: the
 * default tenant), key_p and key_len_p the client's key. Returns false for a key that is tagged but
 * malformed (no closing NUL, a bad name), which no agent writes.
 */
bool mc_tenant_key_split(const char *dkey, size_t dlen, const char **name_p, size_t *name_len_p,
                         const char **key_p, size_t *key_len_p);

#endif /* MC_TENANT_KEY_H */
