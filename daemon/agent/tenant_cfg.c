/*
 * The tenants of the configuration (tenant_cfg.h).
 */
#include "daemon/agent/tenant_cfg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <mc/mc_status.h>

static int bad(char *err, size_t errlen, const char *fmt, const char *name, const char *what)
{
    snprintf(err, errlen, fmt, name, what);
    return MC_ERR_INVALID;
}

/* An array of ids (uids or gids): integers 0..2^32-2, at most MC_AGENT_TENANT_IDS_MAX. */
static int ids_parse(const json_t *a, const char *name, const char *field, uint32_t **ids_p,
                     size_t *n_p, char *err, size_t errlen)
{
    size_t i, n;

    *ids_p = NULL;
    *n_p = 0;
    if (a == NULL)
        return 0;
    if (!json_is_array(a))
        return bad(err, errlen, "tenants: %s: %s must be an array of numbers", name, field);
    n = json_array_size(a);
    if (n > MC_AGENT_TENANT_IDS_MAX)
        return bad(err, errlen, "tenants: %s: %s lists more than 256 ids", name, field);
    if (n == 0)
        return 0;
    *ids_p = calloc(n, sizeof(**ids_p));
    if (*ids_p == NULL)
        return MC_ERR_NOMEM;
    for (i = 0; i < n; i++) {
        const json_t *v = json_array_get(a, i);

        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= (json_int_t)UINT32_MAX)
            return bad(err, errlen, "tenants: %s: %s holds a value that is not an id", name,
                       field);
        (*ids_p)[i] = (uint32_t)json_integer_value(v);
    }
    *n_p = n;
    return 0;
}

static bool ids_has(const uint32_t *ids, size_t n, uint32_t id)
{
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == id)
            return true;
    }
    return false;
}

static int size_field(const json_t *o, const char *name, const char *field, uint64_t *v_p,
                      char *err, size_t errlen)
{
    const json_t *v = json_object_get(o, field);

    if (v == NULL)
        return 1; /* absent */
    if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)MC_AGENT_TENANT_DRAM_MIN)
        return bad(err, errlen, "tenants: %s: %s must be a number of bytes, at least 1 MiB",
                   name, field);
    *v_p = (uint64_t)json_integer_value(v);
    return 0;
}

static int tenant_parse(const char *name, const json_t *o, uint64_t dram, struct tenant_cfg *t,
                        char *err, size_t errlen)
{
    const char *k;
    json_t *v;
    int rc;

    if (!mc_tenant_name_ok(name, strlen(name)))
        return bad(err, errlen, "tenants: \"%s\": %s", name,
                   "a name is 1 to 32 bytes of letters, digits, '_', '.' and '-'");
    if (!json_is_object(o))
        return bad(err, errlen, "tenants: %s: %s", name,
                   "expected an object of uids, gids, quota_bytes, dram_bytes");
    json_object_foreach((json_t *)o, k, v)
    {
        if (strcmp(k, "uids") != 0 && strcmp(k, "gids") != 0 && strcmp(k, "quota_bytes") != 0 &&
            strcmp(k, "dram_bytes") != 0)
            return bad(err, errlen, "tenants: %s: unknown field \"%s\"", name, k);
    }
    memcpy(t->name, name, strlen(name) + 1);
    rc = size_field(o, name, "quota_bytes", &t->quota, err, errlen);
    if (rc == 1)
        return bad(err, errlen, "tenants: %s: %s", name, "quota_bytes is required");
    if (rc != 0)
        return rc;
    t->dram = t->quota < dram ? t->quota : dram;
    rc = size_field(o, name, "dram_bytes", &t->dram, err, errlen);
    if (rc < 0)
        return rc;
    if (dram == 0)
        t->dram = 0; /* a node that holds no data holds none of a tenant's either */
    rc = ids_parse(json_object_get(o, "uids"), name, "uids", &t->uids, &t->nuids, err, errlen);
    if (rc == 0)
        rc = ids_parse(json_object_get(o, "gids"), name, "gids", &t->gids, &t->ngids, err,
                       errlen);
    if (rc == 0 && t->nuids == 0 && t->ngids == 0)
        return bad(err, errlen, "tenants: %s: %s", name, "no uids and no gids: nobody is in it");
    return rc;
}

int tenant_cfg_parse(const char *json, uint64_t dram, struct tenant_cfg **tenants_p,
                     size_t *n_p, char *err, size_t errlen)
{
    struct tenant_cfg *t;
    json_error_t je;
    json_t *root = NULL, *v;
    const char *name;
    uint64_t named = 0;
    size_t n = 1, i, j, k;
    int rc = 0;

    if (json != NULL) {
        root = json_loads(json, JSON_REJECT_DUPLICATES, &je);
        if (root == NULL) {
            snprintf(err, errlen, "tenants: not JSON: %s", je.text);
            return MC_ERR_INVALID;
        }
        if (!json_is_object(root)) {
            json_decref(root);
            snprintf(err, errlen, "tenants: expected an object of name: {uids, gids, "
                                  "quota_bytes}");
            return MC_ERR_INVALID;
        }
        if (json_object_size(root) > MC_AGENT_TENANTS_MAX) {
            json_decref(root);
            snprintf(err, errlen, "tenants: at most %u tenants", MC_AGENT_TENANTS_MAX);
            return MC_ERR_INVALID;
        }
        n += json_object_size(root);
    }
    t = calloc(n, sizeof(*t));
    if (t == NULL) {
        json_decref(root);
        return MC_ERR_NOMEM;
    }
    i = 1;
    if (root != NULL) {
        json_object_foreach(root, name, v)
        {
            rc = tenant_parse(name, v, dram, &t[i], err, errlen);
            i++; /* counted even on failure: tenant_cfg_free frees what it got */
            if (rc != 0)
                break;
            named += t[i - 1].dram;
        }
    }
    json_decref(root);
    for (j = 1; rc == 0 && j < n; j++) {
        for (k = 1; rc == 0 && k < j; k++) {
            for (size_t u = 0; rc == 0 && u < t[j].nuids; u++) {
                if (ids_has(t[k].uids, t[k].nuids, t[j].uids[u])) {
                    snprintf(err, errlen, "tenants: uid %" PRIu32 " is in %s and %s",
                             t[j].uids[u], t[k].name, t[j].name);
                    rc = MC_ERR_INVALID;
                }
            }
            for (size_t g = 0; rc == 0 && g < t[j].ngids; g++) {
                if (ids_has(t[k].gids, t[k].ngids, t[j].gids[g])) {
                    snprintf(err, errlen, "tenants: gid %" PRIu32 " is in %s and %s",
                             t[j].gids[g], t[k].name, t[j].name);
                    rc = MC_ERR_INVALID;
                }
            }
        }
    }
    if (rc == 0 && named > dram) {
        snprintf(err, errlen,
                 "tenants: their DRAM here (%" PRIu64 " bytes) is more than dram (%" PRIu64
                 "): set dram_bytes, or a larger dram",
                 named, dram);
        rc = MC_ERR_INVALID;
    }
    if (rc != 0) {
        tenant_cfg_free(t, n);
        return rc;
    }
    t[0].dram = dram - named >= MC_AGENT_TENANT_DRAM_MIN ? dram - named : 0;
    *tenants_p = t;
    *n_p = n;
    return 0;
}

void tenant_cfg_free(struct tenant_cfg *t, size_t n)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        free(t[i].uids);
        free(t[i].gids);
    }
    free(t);
}

size_t tenant_cfg_match(const struct tenant_cfg *t, size_t n, uid_t uid, gid_t gid,
                        const gid_t *groups, size_t ngroups)
{
    for (size_t i = 1; i < n; i++) {
        if (ids_has(t[i].uids, t[i].nuids, (uint32_t)uid) ||
            ids_has(t[i].gids, t[i].ngids, (uint32_t)gid))
            return i;
        for (size_t g = 0; g < ngroups; g++) {
            if (ids_has(t[i].gids, t[i].ngids, (uint32_t)groups[g]))
                return i;
        }
    }
    return 0;
}
