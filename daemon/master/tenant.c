/*
 * The master's tenant table (master.h, "tenants"): names learnt from segment mounts, their
 * quotas, and what they use -- counted from their segments' allocators when asked, so the
 * allocators stay the one home of what is allocated.
 */
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/master/alloc.h"
#include "daemon/master/master_int.h"

static bool tenant_find(const struct mc_master *m, const char *name, size_t len, uint32_t *idx_p)
{
    uint32_t i;

    for (i = 0; i < m->ntenants; i++) {
        if (strlen(m->tenants[i].name) == len && memcmp(m->tenants[i].name, name, len) == 0) {
            *idx_p = i;
            return true;
        }
    }
    return false;
}

int mc_master__tenant_mount(struct mc_master *m, const char *name, uint64_t quota,
                            uint32_t *idx_p)
{
    size_t len = strnlen(name, sizeof(m->tenants[0].name));
    struct tenant *t;
    uint32_t idx;

    if (len == sizeof(m->tenants[0].name) || (len > 0 && !mc_tenant_name_ok(name, len)))
        return MC_ERR_INVALID;
    if (!tenant_find(m, name, len, &idx)) {
        if (m->ntenants == MC_MASTER_TENANTS_MAX)
            return MC_ERR_NO_SPACE;
        idx = m->ntenants++;
        memset(&m->tenants[idx], 0, sizeof(m->tenants[idx]));
        memcpy(m->tenants[idx].name, name, len);
    }
    t = &m->tenants[idx];
    if (quota != 0)
        t->quota = quota; /* the latest mount that names one: a new quota rolls out with
                             the agents' configuration */
    *idx_p = idx;
    return 0;
}

bool mc_master__tenant_of_key(const struct mc_master *m, const char *key, size_t len,
                              uint32_t *idx_p)
{
    const char *name, *rest;
    size_t name_len, rest_len;

    if (!mc_tenant_key_split(key, len, &name, &name_len, &rest, &rest_len))
        return false;
    return tenant_find(m, name, name_len, idx_p);
}

uint64_t mc_master__tenant_used(const struct mc_master *m, uint32_t idx)
{
    uint64_t used = 0;
    uint32_t i;

    for (i = 0; i < m->nsegs; i++) {
        const struct seg *s = &m->segs[i];

        /* a quota bounds memory: disk segments do not count */
        if (s->state == SEG_MOUNTED && s->tenant == idx && s->kind != MC_SEG_DISK)
            used += mc_alloc_used_bytes(s->alloc);
    }
    return used;
}

size_t mc_master_tenant_list(const struct mc_master *m, struct mc_master_tenant_info *out,
                             size_t max)
{
    uint32_t i, j;

    for (i = 0; i < m->ntenants && i < max; i++) {
        struct mc_master_tenant_info *o = &out[i];

        memset(o, 0, sizeof(*o));
        memcpy(o->name, m->tenants[i].name, sizeof(o->name));
        o->quota_bytes = m->tenants[i].quota;
        o->quota_refusals = m->tenants[i].refusals;
        for (j = 0; j < m->nsegs; j++) {
            const struct seg *s = &m->segs[j];

            if (s->state != SEG_MOUNTED || s->tenant != i)
                continue;
            o->segments++;
            o->capacity_bytes += mc_alloc_capacity(s->alloc);
            o->used_bytes += mc_alloc_used_bytes(s->alloc);
        }
    }
    return i;
}
