/*
 * The agent's tenants as configured (config key `tenants`, docs/tenants.md): a JSON object
 * from tenant name to {"uids": [...], "gids": [...], "quota_bytes": N, "dram_bytes": N}.
 * Parsing and the credential match are pure (jansson only), so the config check, the fuzz
 * target and the unit tests run them as the agent does.
 */
#ifndef MC_AGENT_TENANT_CFG_H
#define MC_AGENT_TENANT_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/common/tenant_key.h"

#define MC_AGENT_TENANTS_MAX 16u  /* named tenants of one agent, the default not counted */
#define MC_AGENT_TENANT_IDS_MAX 256u /* uids, and gids, one tenant may list */
#define MC_AGENT_TENANT_DRAM_MIN (UINT64_C(1) << 20)

struct tenant_cfg {
    char name[MC_TENANT_NAME_MAX + 1]; /* "": the default tenant (index 0) */
    uint64_t quota;  /* bytes across the cluster (0: none; the default tenant has none) */
    uint64_t dram;   /* bytes of its DRAM segment on this agent (0: none here) */
    uint32_t *uids, *gids;
    size_t nuids, ngids;
};

/*
 * Parse `json` (NULL: no tenants) against the agent's `dram` bytes: *tenants_p gets 1 + the
 * named tenants, the default first, whose DRAM is what the named ones leave (0 when under
 * 1 MiB). A named tenant needs quota_bytes (>= 1 MiB); its DRAM here is dram_bytes, by
 * default min(quota_bytes, dram) on an agent with DRAM, and the named tenants' DRAM must fit
 * in `dram`. A uid or gid may belong to one tenant only. Errors: MC_ERR_INVALID with the
 * reason in err, MC_ERR_NOMEM.
 */
int tenant_cfg_parse(const char *json, uint64_t dram, struct tenant_cfg **tenants_p,
                     size_t *n_p, char *err, size_t errlen);
void tenant_cfg_free(struct tenant_cfg *t, size_t n);

/* The tenant of a peer: the first named tenant that lists its uid, its primary gid or one
 * of its supplementary groups; else 0, the default tenant. */
size_t tenant_cfg_match(const struct tenant_cfg *t, size_t n, uid_t uid, gid_t gid,
                        const gid_t *groups, size_t ngroups);

#endif /* MC_AGENT_TENANT_CFG_H */
