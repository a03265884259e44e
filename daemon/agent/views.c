/*
 * Ops a cluster agent answers from the master's view (views.h): STATS (the master's
 * figures, and the cluster's with MC_STATS_F_CLUSTER), LIST and DRAIN, each one call to
 * mc-master; the answer goes into the client's staging range.
 */
#include "daemon/agent/views.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc.h>

#include "daemon/agent/client.h"
#include "daemon/agent/cluster.h"
#include "daemon/agent/cluster_int.h"
#include "daemon/agent/info.h"

void views_list_one(const char *key, size_t len, void *ctx)
{
    struct list_out *o = ctx;
    uint16_t l;

    if ((o->skip_tagged && len > 0 && key[0] == '\0') || len <= o->tag_len)
        return; /* another tenant's */
    key += o->tag_len;
    len -= o->tag_len;
    l = (uint16_t)len;
    if (o->full || (size_t)(o->end - o->p) < sizeof(l) + len) {
        o->full = true;
        return;
    }
    memcpy(o->p, &l, sizeof(l));
    memcpy(o->p + sizeof(l), key, len);
    o->p += sizeof(l) + len;
    o->count++;
}

/* A client's op waiting for a CLUSTER_INFO or LIST answer. */
struct view_call {
    struct mc_agent *a;
    struct client *c;
    uint64_t user_data, data_off, data_len, arg0;
};

static struct view_call *view_call_new(struct mc_agent *a, struct client *c,
                                       const struct mc_sqe *s)
{
    struct view_call *v = malloc(sizeof(*v));

    if (v == NULL)
        return NULL;
    v->a = a;
    v->c = c;
    v->user_data = s->user_data;
    v->data_off = s->data_off;
    v->data_len = s->data_len;
    v->arg0 = s->arg0;
    client_get(c);
    return v;
}

static void view_call_end(struct view_call *v)
{
    client_put(v->c);
    free(v);
}

static void stats_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                       size_t len)
{
    struct view_call *v = ctx;
    struct mc_proto_seg_entry *segs = malloc(MC_PROTO_SEG_PAGE_MAX * sizeof(*segs));
    struct mc_proto_node_entry *nodes = malloc(MC_PROTO_NODE_PAGE_MAX * sizeof(*nodes));
    struct mc_proto_info_rep rep;

    (void)hdr;
    if (segs == NULL || nodes == NULL)
        status = MC_ERR_NOMEM;
    if (status == 0 && mc_proto_info_rep_decode(pl, len, MC_PROTO_SEG_PAGE_MAX, &rep, segs,
                                                MC_PROTO_NODE_PAGE_MAX, nodes) != 0)
        status = MC_ERR_PROTO;
    if (status == 0)
        status = rep.status;
    if (v->c->state != CL_ACTIVE) {
        /* the client left meanwhile */
    } else if (status != 0) {
        client_cqe_res(v->c, v->user_data, status);
    } else if (v->arg0 & MC_STATS_F_CLUSTER) {
        char *s = agent_cluster_json(&rep.stats, segs, rep.nseg, nodes, rep.nnode);
        json_t *o = s != NULL && v->a->cl != NULL && v->a->cl->leader != NULL
                        ? json_loads(s, 0, NULL)
                        : NULL;

        if (o != NULL) { /* with --etcd: who leads, at which epoch */
            cluster_leader_add(v->a, o);
            free(s);
            s = json_dumps(o, JSON_COMPACT);
            json_decref(o);
        }
        agent_answer_json(v->c, v->user_data, v->data_off, v->data_len, s);
    } else {
        agent_answer_json(v->c, v->user_data, v->data_off, v->data_len,
                          agent_stats_json(v->a, &rep.stats));
    }
    free(segs);
    free(nodes);
    view_call_end(v);
}

void views_op_stats(struct mc_agent *a, struct client *c, const struct mc_sqe *s)
{
    struct mc_proto_info_req req = {.flags = MC_PROTO_INFO_F_STATS};
    struct view_call *v = view_call_new(a, c, s);
    uint8_t buf[64];
    size_t len;
    int err;

    if (v == NULL) {
        client_cqe_res(c, s->user_data, MC_ERR_NOMEM);
        return;
    }
    if (s->arg0 & MC_STATS_F_CLUSTER) {
        /* the first page of each: a cluster beyond 256 nodes or segments shows that many */
        req.flags |= MC_PROTO_INFO_F_SEGMENTS | MC_PROTO_INFO_F_NODES;
        req.max = MC_PROTO_SEG_PAGE_MAX;
        req.node_max = MC_PROTO_NODE_PAGE_MAX;
    }
    err = mc_proto_info_req_encode(&req, buf, sizeof(buf), &len);
    if (err == 0)
        err = cl_master_call(a->cl, MC_WIRE_CLUSTER_INFO, buf, len,
                          mc_ucx_now_ms() + a->cfg.op_timeout_ms, stats_done, v);
    if (err != 0) {
        client_cqe_res(c, s->user_data, err);
        view_call_end(v);
    }
}

static void list_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                      size_t len)
{
    struct view_call *v = ctx;
    struct mc_proto_key *keys = malloc(MC_PROTO_LIST_MAX * sizeof(*keys));
    struct mc_proto_list_rep rep;
    struct mc_cqe e;
    uint32_t i;

    (void)hdr;
    if (keys == NULL)
        status = MC_ERR_NOMEM;
    if (status == 0 && mc_proto_list_rep_decode(pl, len, MC_PROTO_LIST_MAX, &rep, keys) != 0)
        status = MC_ERR_PROTO;
    if (status == 0)
        status = rep.status;
    if (v->c->state == CL_ACTIVE && status != 0) {
        client_cqe_res(v->c, v->user_data, status);
    } else if (v->c->state == CL_ACTIVE) {
        struct list_out o = {.p = v->c->r->staging + v->data_off,
                             .end = v->c->r->staging + v->data_off + v->data_len,
                             .tag_len = client_tag_len(v->c),
                             .skip_tagged = v->c->tenant == 0};

        /* we asked for no more than the range holds */
        for (i = 0; i < rep.n && !o.full; i++)
            views_list_one(keys[i].key, keys[i].key_len, &o);
        memset(&e, 0, sizeof(e));
        e.user_data = v->user_data;
        e.res = o.full ? MC_ERR_INTERNAL : (int)o.count;
        e.version = rep.next_cursor;
        client_cqe_post(v->c, &e);
    }
    free(keys);
    view_call_end(v);
}

void views_op_list(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                   const char *key, size_t key_len)
{
    /* ask for as many keys as the range holds even if each is of the longest size, so no
     * key of the page is lost to a full range (the cursor names pages, not keys) */
    uint64_t fit = s->data_len / (sizeof(uint16_t) + MC_PROTO_KEY_MAX);
    struct mc_proto_list_req req = {.node = a->node, .cursor = s->arg0,
                                    .prefix = {.p = (const uint8_t *)key, .len = key_len}};
    struct view_call *v;
    uint8_t buf[MC_PROTO_KEY_MAX + 64];
    size_t len;
    int err;

    if (fit == 0) {
        client_cqe_res(c, s->user_data, MC_ERR_TOO_LARGE);
        return;
    }
    if (s->arg1 != 0 && s->arg1 < fit)
        fit = s->arg1;
    req.max = fit > MC_PROTO_LIST_MAX ? MC_PROTO_LIST_MAX : (uint32_t)fit;
    v = view_call_new(a, c, s);
    if (v == NULL) {
        client_cqe_res(c, s->user_data, MC_ERR_NOMEM);
        return;
    }
    err = mc_proto_list_req_encode(&req, buf, sizeof(buf), &len);
    if (err == 0)
        err = cl_master_call(a->cl, MC_WIRE_LIST, buf, len, mc_ucx_now_ms() + a->cfg.op_timeout_ms,
                          list_done, v);
    if (err != 0) {
        client_cqe_res(c, s->user_data, err);
        view_call_end(v);
    }
}

static void drain_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                       size_t len)
{
    struct view_call *v = ctx;
    struct mc_proto_status_rep rep;

    (void)hdr;
    if (status == 0)
        status = mc_proto_status_rep_decode(pl, len, &rep) == 0 ? rep.status : MC_ERR_PROTO;
    if (v->c->state == CL_ACTIVE)
        client_cqe_res(v->c, v->user_data, status);
    view_call_end(v);
}

void views_op_drain(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                      const char *key)
{
    struct mc_proto_drain_req req = {.on = s->arg0 != 0 ? 1u : 0u,
                                     .name = {(const uint8_t *)key, s->key_len}};
    struct view_call *v;
    uint8_t buf[MC_PROTO_NAME_MAX + 16];
    size_t len;
    int err = mc_proto_drain_req_encode(&req, buf, sizeof(buf), &len);

    if (err != 0) { /* not a node name (graphic ASCII) */
        client_cqe_res(c, s->user_data, err);
        return;
    }
    v = view_call_new(a, c, s);
    if (v == NULL) {
        client_cqe_res(c, s->user_data, MC_ERR_NOMEM);
        return;
    }
    err = cl_master_call(a->cl, MC_WIRE_DRAIN, buf, len, mc_ucx_now_ms() + a->cfg.op_timeout_ms,
                      drain_done, v);
    if (err != 0) {
        client_cqe_res(c, s->user_data, err);
        view_call_end(v);
    }
}
