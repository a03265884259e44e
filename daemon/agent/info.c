/*
 * What the agent tells about itself and its cluster: the JSON of MC_OP_STATS (mcctl stats)
 * and of MC_OP_STATS with MC_STATS_F_CLUSTER (mcctl cluster), in either mode.
 */
#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/agent/info.h"

#include "daemon/agent/agent_int.h"
#include "daemon/agent/client.h"
#include "daemon/agent/cluster.h"
#include "daemon/agent/disk_tier.h"
#include "daemon/proto/master_proto.h"

/* The landing segments' bytes, or their bytes in use (cluster mode). */
static uint64_t landing_bytes(const struct mc_agent *a, bool used)
{
    uint64_t n = 0;

    for (uint32_t t = 0; t < a->ntenants; t++) {
        if (a->ten[t].land != NULL)
            n += used ? mc_alloc_used_bytes(a->ten[t].land) : a->ten[t].land_seg->size;
    }
    return n;
}

/* Each tenant here: its clients and DRAM; with the in-process master, what it holds. */
static json_t *tenants_json(const struct mc_agent *a)
{
    struct mc_master_tenant_info mt[MC_AGENT_TENANTS_MAX + 1];
    size_t nmt = a->master != NULL ? mc_master_tenant_list(a->master, mt, MC_AGENT_TENANTS_MAX + 1)
                                   : 0;
    json_t *jt = json_array(), *t;
    const struct client *c;
    uint64_t clients;

    for (uint32_t i = 0; i < a->ntenants && jt != NULL; i++) {
        clients = 0;
        for (c = a->cs.list; c != NULL; c = c->next)
            clients += c->tenant == i && c->state != CL_CLOSING;
        t = json_pack("{s:s, s:b, s:I, s:I, s:I}", "name", a->tcfg[i].name, "default", i == 0,
                      "clients", (json_int_t)clients, "dram_bytes",
                      (json_int_t)(a->ten[i].seg != NULL ? a->ten[i].seg->size : 0),
                      "quota_bytes", (json_int_t)a->tcfg[i].quota);
        for (size_t k = 0; k < nmt && t != NULL; k++) {
            if (strcmp(mt[k].name, a->tcfg[i].name) != 0)
                continue;
            json_object_set_new(t, "used_bytes", json_integer((json_int_t)mt[k].used_bytes));
            json_object_set_new(t, "capacity_bytes",
                                json_integer((json_int_t)mt[k].capacity_bytes));
            json_object_set_new(t, "quota_refusals",
                                json_integer((json_int_t)mt[k].quota_refusals));
        }
        if (a->ten[i].land != NULL && t != NULL)
            json_object_set_new(t, "landing_used_bytes",
                                json_integer((json_int_t)mc_alloc_used_bytes(a->ten[i].land)));
        json_array_append_new(jt, t);
    }
    return jt;
}

char *agent_stats_json(struct mc_agent *a, const struct mc_master_stats *ms)
{
    json_t *o;
    char *s;

    o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}",
                  "objects", (json_int_t)ms->objects, "used_bytes", (json_int_t)ms->used_bytes,
                  "capacity_bytes", (json_int_t)ms->capacity_bytes, "evictions",
                  (json_int_t)ms->evictions, "clients", (json_int_t)a->cs.n, "puts",
                  (json_int_t)ms->puts_completed, "gets", (json_int_t)ms->gets, "get_misses",
                  (json_int_t)ms->get_misses, "lease_expiries", (json_int_t)ms->lease_expiries,
                  "ttl_expiries", (json_int_t)ms->ttl_expiries, "removes",
                  (json_int_t)ms->removes, "bytes_written", (json_int_t)a->st.bytes_in,
                  "clients_disconnected", (json_int_t)a->cs.st.disconnects, "hugepages",
                  agent_huge(a));
    if (o == NULL)
        return NULL;
    if (a->st.delayed_answers != 0)
        json_object_set_new(o, "test_delayed_answers",
                            json_integer((json_int_t)a->st.delayed_answers));
    json_object_set_new(o, "clients_refused", json_integer((json_int_t)a->cs.st.refused));
    json_object_set_new(o, "clients_refused_denied",
                        json_integer((json_int_t)a->cs.st.refused_denied));
    json_object_set_new(o, "clients_refused_busy", json_integer((json_int_t)a->cs.st.refused_busy));
    json_object_set_new(o, "arena_bytes", json_integer((json_int_t)a->cs.arena_bytes));
    json_object_set_new(o, "arenas_refused", json_integer((json_int_t)a->cs.st.arenas_refused));
    json_object_set_new(o, "puts_refused_open_bytes",
                        json_integer((json_int_t)a->st.puts_refused));
    json_object_set_new(o, "puts_idle_revoked",
                        json_integer((json_int_t)a->st.puts_idle_revoked));
    json_object_set_new(o, "put_waits", json_integer((json_int_t)a->st.put_waits));
    json_object_set_new(o, "puts_from_arena", json_integer((json_int_t)a->st.puts_from_arena));
    {
        /* what is held now, for a leak to show: puts parked for room (put.c), the puts
         * every client holds (a PUT, or a PUT_START not ended or aborted) and the clients
         * not freed yet (gone ones included, until their last reference ends) */
        json_int_t parked = 0, open = 0, held = 0;

        for (const struct ml_req *r = a->put_parked; r != NULL; r = r->next)
            parked++;
        for (const struct client *c = a->cs.list; c != NULL; c = c->next) {
            open += c->nputs;
            held++;
        }
        json_object_set_new(o, "puts_parked", json_integer(parked));
        json_object_set_new(o, "puts_open", json_integer(open));
        json_object_set_new(o, "clients_held", json_integer(held));
    }
    json_object_set_new(o, "puts_revoked", json_integer((json_int_t)ms->puts_revoked));
    json_object_set_new(o, "stale_freed_by_fence",
                        json_integer((json_int_t)ms->stale_freed_by_fence));
    json_object_set_new(o, "stale_freed_by_timeout",
                        json_integer((json_int_t)ms->stale_freed_by_timeout));
    json_object_set_new(o, "nodes_declared_dead",
                        json_integer((json_int_t)ms->nodes_declared_dead));
    json_object_set_new(o, "mode", json_string(a->cl != NULL ? "cluster" : "standalone"));
    json_object_set_new(o, "loop", json_string(mc_loop_name(&a->loop)));
    json_object_set_new(o, "host_busy", json_boolean(agent_spin_busy(&a->spin)));
    json_object_set_new(o, "wait_probes", json_integer((json_int_t)a->spin.probes));
    json_object_set_new(o, "wait_switches", json_integer((json_int_t)a->spin.switches));
    json_object_set_new(o, "dram_bytes", json_integer((json_int_t)agent_dram_bytes(a)));
    json_object_set_new(o, "gpu_bytes", json_integer((json_int_t)agent_gpu_bytes(a)));
    json_object_set_new(o, "dev_buffers_open", json_integer((json_int_t)a->cs.devs.open));
    json_object_set_new(o, "dev_buffers_imported", json_integer((json_int_t)a->cs.devs.imports));
    json_object_set_new(o, "dev_buffers_refused", json_integer((json_int_t)a->cs.devs.refused));
    json_object_set_new(o, "dev_copies", json_integer((json_int_t)a->st.dev_copies));
    json_object_set_new(o, "dev_copy_errors", json_integer((json_int_t)a->st.dev_copy_errors));
    if (a->ten[0].land != NULL) {
        json_object_set_new(o, "landing_bytes", json_integer((json_int_t)landing_bytes(a, false)));
        json_object_set_new(o, "landing_used_bytes",
                            json_integer((json_int_t)landing_bytes(a, true)));
    }
    json_object_set_new(o, "tenants", tenants_json(a));
    if (a->disk != NULL)
        json_object_set_new(o, "disk", agent_disk_stats_json(a));
    cluster_stats_add(a, o);
    s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

static const char *kind_name(uint32_t kind)
{
    static const char *const names[] = {"dram", "gpu", "disk"};

    return kind < 3 ? names[kind] : "unknown";
}

static json_t *domain_of(json_t *domains, const char *name)
{
    size_t i;
    json_t *d;

    json_array_foreach(domains, i, d) {
        if (strcmp(json_string_value(json_object_get(d, "name")), name) == 0)
            return d;
    }
    d = json_pack("{s:s, s:I, s:I, s:I}", "name", name, "nodes", (json_int_t)0, "capacity",
                  (json_int_t)0, "used", (json_int_t)0);
    json_array_append_new(domains, d);
    return d;
}

static void add_to(json_t *o, const char *key, uint64_t v)
{
    json_object_set_new(o, key, json_integer(json_integer_value(json_object_get(o, key)) +
                                             (json_int_t)v));
}

/* The cluster's use per tenant, from its segments (each names its tenant and the quota). */
static json_t *cluster_tenants_json(const struct mc_proto_seg_entry *segs, size_t nseg)
{
    json_t *jt = json_array(), *t;
    size_t i, k;

    for (i = 0; i < nseg && jt != NULL; i++) {
        const struct mc_master_seg_info *si = &segs[i].info;

        t = NULL;
        json_array_foreach(jt, k, t) {
            if (strcmp(json_string_value(json_object_get(t, "name")), si->tenant) == 0)
                break;
            t = NULL;
        }
        if (t == NULL) {
            t = json_pack("{s:s, s:b, s:I, s:I, s:I, s:I}", "name", si->tenant, "default",
                          si->tenant[0] == '\0', "quota_bytes", (json_int_t)si->quota,
                          "segments", (json_int_t)0, "capacity", (json_int_t)0, "used",
                          (json_int_t)0);
            json_array_append_new(jt, t);
        }
        add_to(t, "segments", 1);
        add_to(t, "capacity", si->size);
        add_to(t, "used", si->size - si->free_bytes);
    }
    return jt;
}

char *agent_cluster_json(const struct mc_master_stats *ms, const struct mc_proto_seg_entry *segs,
                         size_t nseg, const struct mc_proto_node_entry *nodes, size_t nnode)
{
    json_t *o = json_object(), *jn = json_array(), *jd = json_array(), *js = json_array();
    uint64_t cap = 0, used = 0;
    size_t i, j, dead = 0;
    char *s;

    if (o == NULL || jn == NULL || jd == NULL || js == NULL) {
        json_decref(o);
        json_decref(jn);
        json_decref(jd);
        json_decref(js);
        return NULL;
    }
    for (i = 0; i < nseg; i++) {
        const struct mc_master_seg_info *si = &segs[i].info;

        json_array_append_new(js, json_pack("{s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:s, s:s}",
                                            "id", (json_int_t)segs[i].seg, "node",
                                            (json_int_t)si->node, "kind", kind_name(si->kind),
                                            "capacity", (json_int_t)si->size, "used",
                                            (json_int_t)(si->size - si->free_bytes),
                                            "largest_free", (json_int_t)si->largest_free,
                                            "objects", (json_int_t)si->blocks, "state",
                                            "mounted", "tenant", si->tenant));
        cap += si->size;
        used += si->size - si->free_bytes;
    }
    for (i = 0; i < nnode; i++) {
        const struct mc_proto_node_entry *n = &nodes[i];
        char name[MC_PROTO_NAME_MAX + 1], dom[MC_PROTO_NAME_MAX + 1];
        uint64_t ncap = 0, nused = 0;
        json_t *d, *jnode;

        memcpy(name, n->name.p, n->name.len);
        name[n->name.len] = '\0';
        memcpy(dom, n->domain.p, n->domain.len);
        dom[n->domain.len] = '\0';
        for (j = 0; j < nseg; j++) {
            if (segs[j].info.node == n->id) {
                ncap += segs[j].info.size;
                nused += segs[j].info.size - segs[j].info.free_bytes;
            }
        }
        dead += !n->alive;
        jnode = json_pack("{s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "id", (json_int_t)n->id,
                          "name", name, "domain", dom, "state", n->alive ? "alive" : "dead",
                          "segments", (json_int_t)n->segments, "capacity", (json_int_t)ncap,
                          "used", (json_int_t)nused, "idle_ms", (json_int_t)n->idle_ms);
        if (jnode != NULL && n->drain != MC_MASTER_DRAIN_NONE) {
            /* what is left to move off it: every block still allocated there */
            json_object_set_new(jnode, "drain",
                                json_string(n->drain == MC_MASTER_DRAIN_DRAINED ? "drained"
                                                                                : "draining"));
            json_object_set_new(jnode, "drain_left_objects",
                                json_integer((json_int_t)n->drain_blocks));
            json_object_set_new(jnode, "drain_left_bytes",
                                json_integer((json_int_t)n->drain_bytes));
        }
        json_array_append_new(jn, jnode);
        if (!n->alive)
            continue;
        d = domain_of(jd, dom);
        add_to(d, "nodes", 1);
        add_to(d, "capacity", ncap);
        add_to(d, "used", nused);
    }
    json_object_set_new(o, "state", json_string(dead != 0 ? "degraded" : "ok"));
    json_object_set_new(o, "capacity", json_integer((json_int_t)cap));
    json_object_set_new(o, "used", json_integer((json_int_t)used));
    json_object_set_new(o, "objects", json_integer((json_int_t)ms->objects));
    json_object_set_new(o, "nodes", jn);
    json_object_set_new(o, "domains", jd);
    json_object_set_new(o, "segments", js);
    json_object_set_new(o, "tenants", cluster_tenants_json(segs, nseg));
    s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* The one-node view of a standalone agent, from its in-process master. */
char *agent_local_cluster_json(struct mc_agent *a)
{
    struct mc_master_node_info ni[16];
    struct mc_proto_node_entry ne[16];
    struct mc_proto_seg_entry se[MC_AGENT_TENANTS_MAX + MC_AGENT_GPU_MAX + 2];
    struct mc_master_stats ms;
    uint32_t cursor = 0, t, nse = 0;
    size_t n, i;

    mc_master_get_stats(a->master, &ms);
    memset(se, 0, sizeof(se));
    for (t = 0; t < a->ntenants; t++) {
        if (a->ten[t].seg == NULL)
            continue;
        se[nse].seg = a->ten[t].seg_id;
        mc_master_segment_info(a->master, a->ten[t].seg_id, &se[nse].info);
        nse++;
    }
    for (t = 0; t < a->ngpu; t++) {
        se[nse].seg = a->gpu[t].seg_id;
        mc_master_segment_info(a->master, a->gpu[t].seg_id, &se[nse].info);
        nse++;
    }
    if (a->disk_seg != NULL && a->disk_seg_id != UINT32_MAX) {
        se[nse].seg = a->disk_seg_id;
        mc_master_segment_info(a->master, a->disk_seg_id, &se[nse].info);
        nse++;
    }
    n = mc_master_node_list(a->master, &cursor, ni, 16);
    for (i = 0; i < n; i++) {
        ne[i] = (struct mc_proto_node_entry){
            .id = ni[i].id, .alive = ni[i].alive, .segments = ni[i].segments,
            .idle_ms = ni[i].idle_ms,
            .name = {.p = (const uint8_t *)ni[i].name, .len = strlen(ni[i].name)},
            .domain = {.p = (const uint8_t *)ni[i].domain, .len = strlen(ni[i].domain)},
        };
    }
    return agent_cluster_json(&ms, se, nse, ne, n);
}

void agent_answer_json(struct client *c, uint64_t user_data, uint64_t data_off,
                       uint64_t data_len, char *js)
{
    size_t n;

    if (js == NULL) {
        client_cqe_res(c, user_data, MC_ERR_NOMEM);
        return;
    }
    n = strlen(js);
    if (n > data_len) {
        free(js);
        client_cqe_res(c, user_data, MC_ERR_TOO_LARGE);
        return;
    }
    memcpy(c->r->staging + data_off, js, n);
    free(js);
    client_cqe_res(c, user_data, (int)n);
}

/* --- the metrics page ------------------------------------------------------------------------ */

static void mset(struct mc_agent *a, enum mc_agent_metric i, uint64_t v)
{
    a->mvals[i] = v;
    a->mpresent[i] = 1;
}

void agent_metrics_publish(struct mc_agent *a)
{
    const char *health = NULL;

    memset(a->mpresent, 0, sizeof(a->mpresent));
    mset(a, AM_OPS, a->st.ops);
    mset(a, AM_PUTS, a->st.puts);
    mset(a, AM_GETS, a->st.gets);
    mset(a, AM_GET_HITS, a->st.hits);
    mset(a, AM_CORRUPT_READS, a->st.corrupt_reads);
    mset(a, AM_CHECKSUM_RETRIES, a->st.checksum_retries);
    mset(a, AM_BYTES_WRITTEN, a->st.bytes_in);
    mset(a, AM_CLIENTS, a->cs.n);
    mset(a, AM_CLIENTS_DISCONNECTED, a->cs.st.disconnects);
    mset(a, AM_CLIENTS_REFUSED, a->cs.st.refused);
    mset(a, AM_CLIENTS_REFUSED_DENIED, a->cs.st.refused_denied);
    mset(a, AM_CLIENTS_REFUSED_BUSY, a->cs.st.refused_busy);
    mset(a, AM_ARENA_BYTES, a->cs.arena_bytes);
    mset(a, AM_ARENAS_REFUSED, a->cs.st.arenas_refused);
    mset(a, AM_PUTS_REFUSED_OPEN, a->st.puts_refused);
    mset(a, AM_PUTS_IDLE_REVOKED, a->st.puts_idle_revoked);
    mset(a, AM_PUT_WAITS, a->st.put_waits);
    mset(a, AM_PUTS_FROM_ARENA, a->st.puts_from_arena);
    mset(a, AM_VIOLATIONS, a->cs.st.violations);
    mset(a, AM_DELAYED, a->st.delayed_answers);
    mset(a, AM_HUGEPAGES, agent_huge(a));
    mset(a, AM_DRAINING, a->draining);
    mset(a, AM_CAPACITY_DRAM, agent_dram_bytes(a));
    if (a->master != NULL) {
        /* standalone: the in-process master's figures cost a few loads per segment */
        struct mc_master_seg_info si;
        struct mc_master_stats ms;
        uint64_t pinned = 0;

        mc_master_get_stats(a->master, &ms);
        for (uint32_t t = 0; t < a->ntenants; t++) {
            memset(&si, 0, sizeof(si));
            if (a->ten[t].seg != NULL &&
                mc_master_segment_info(a->master, a->ten[t].seg_id, &si) == 0)
                pinned += si.hard_pinned_bytes;
        }
        mset(a, AM_USED_DRAM, ms.used_bytes);
        mset(a, AM_PINNED_DRAM, pinned);
        mset(a, AM_OBJECTS, ms.objects);
        mset(a, AM_STORE_CAPACITY, ms.capacity_bytes);
        mset(a, AM_PUTS_STARTED, ms.puts_started);
        mset(a, AM_PUTS_REVOKED, ms.puts_revoked);
        mset(a, AM_GET_MISSES, ms.get_misses);
        mset(a, AM_LEASE_GRANTS, ms.lease_grants);
        mset(a, AM_LEASE_RELEASES, ms.lease_releases);
        mset(a, AM_LEASE_EXPIRIES, ms.lease_expiries);
        mset(a, AM_EVICTIONS, ms.evictions);
        mset(a, AM_EVICTED_BYTES, ms.evicted_bytes);
        mset(a, AM_TTL_EXPIRIES, ms.ttl_expiries);
        mset(a, AM_REMOVES, ms.removes);
        mset(a, AM_STALE_FENCE, ms.stale_freed_by_fence);
        mset(a, AM_STALE_TIMEOUT, ms.stale_freed_by_timeout);
        mset(a, AM_NODES_DEAD, ms.nodes_declared_dead);
    }
    if (a->ten[0].land != NULL) {
        mset(a, AM_LANDING, landing_bytes(a, false));
        mset(a, AM_LANDING_USED, landing_bytes(a, true));
    }
    if (a->cl != NULL) {
        health = cluster_health(a);
        mset(a, AM_MASTER_REACHABLE, health == NULL);
        cluster_metrics_fill(a, a->mvals, a->mpresent);
    }
    mc_metrics_publish(a->metrics, a->mvals, a->mpresent);
    if (a->stopping)
        health = "stopping";
    else if (a->draining)
        health = "draining: stopping once the operations under way are answered";
    mc_metrics_set_health(a->metrics, health);
}
