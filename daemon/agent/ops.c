/*
 * The op dispatch (ops.h), and the ops that are one master call: EXIST, STAT, REMOVE,
 * REMOVE_PREFIX, and standalone STATS, LIST, DRAIN.
 */
#include "daemon/agent/ops.h"

#include <stdlib.h>
#include <string.h>

#include <mc/mc.h>
#include <mc/mc_status.h>

#include "daemon/agent/agent_int.h"
#include "daemon/agent/client.h"
#include "daemon/agent/info.h"
#include "daemon/agent/lease.h"
#include "daemon/agent/pin.h"
#include "daemon/agent/put.h"
#include "daemon/agent/views.h"

/* EXIST, STAT, REMOVE, REMOVE_PREFIX: one master call, one answer. */
static void simple_answered(void *ctx, struct ml_req *r)
{
    struct client *c = ctx;
    struct mc_agent *a = agent_of(c);
    struct mc_cqe e;

    if (c->state == CL_ACTIVE) {
        switch (r->kind) {
        case ML_EXIST:
        case ML_TOUCH:
            client_cqe_res(c, r->user_data, r->res < 0 ? r->res : (int)r->out.count);
            break;
        case ML_STAT:
            if (r->res != 0) {
                client_cqe_res(c, r->user_data, r->res);
                break;
            }
            memset(&e, 0, sizeof(e));
            e.user_data = r->user_data;
            e.size = r->out.stat.size;
            e.version = r->out.stat.version;
            e.replicas = r->out.stat.replicas;
            e.disk_replicas = r->out.stat.disk_replicas;
            e.obj_flags = r->out.stat.flags;
            e.deadline_ms = r->out.stat.ttl_remaining_ms;
            client_cqe_post(c, &e);
            break;
        case ML_REMOVE_PREFIX:
            client_cqe_res(c, r->user_data,
                           r->res < 0 ? r->res
                           : r->out.count > INT32_MAX ? INT32_MAX : (int)r->out.count);
            break;
        default:
            client_cqe_res(c, r->user_data, r->res);
            break;
        }
    }
    ml_req_free(a->ml, r);
    client_put(c);
}

static void op_simple(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                      const char *key, size_t key_len, enum ml_kind kind)
{
    struct ml_req *r = ml_req_new(a->ml, kind, key, key_len, simple_answered, c);

    if (r == NULL) {
        client_cqe_res(c, s->user_data, MC_ERR_NOMEM);
        return;
    }
    r->user_data = s->user_data;
    client_get(c);
    ml_submit(a->ml, r);
}

static void op_stats(struct mc_agent *a, struct client *c, const struct mc_sqe *s)
{
    struct mc_master_stats ms;

    if (a->master == NULL) {
        views_op_stats(a, c, s); /* the master's figures come over the network */
        return;
    }
    if (s->arg0 & MC_STATS_F_CLUSTER) {
        agent_answer_json(c, s->user_data, s->data_off, s->data_len,
                          agent_local_cluster_json(a));
        return;
    }
    mc_master_get_stats(a->master, &ms);
    agent_answer_json(c, s->user_data, s->data_off, s->data_len, agent_stats_json(a, &ms));
}

/* LIST: as many keys as fit the caller's staging range (a key that does not fit ends the
 * page before it, so the next page starts with it). */
static void op_list(struct mc_agent *a, struct client *c, const struct mc_sqe *s, const char *key,
                    size_t key_len)
{
    struct list_out o = {.p = c->r->staging + s->data_off,
                         .end = c->r->staging + s->data_off + s->data_len,
                         .tag_len = client_tag_len(c), .skip_tagged = c->tenant == 0};
    uint64_t cursor = s->arg0, before;
    size_t max = s->arg1 == 0 || s->arg1 > 65536 ? 65536 : (size_t)s->arg1;
    struct mc_cqe e;
    int n, total = 0;

    if (a->master == NULL) {
        views_op_list(a, c, s, key, key_len);
        return;
    }
    /* page by one key at a time near the end so a key that would not fit is not skipped */
    while ((size_t)total < max) {
        before = cursor;
        n = mc_master_list(a->master, key, key_len, &cursor, 1, views_list_one, &o);
        if (n < 0) {
            client_cqe_res(c, s->user_data, n);
            return;
        }
        if (o.full) {
            cursor = before; /* re-list that key on the next page */
            break;
        }
        total = (int)o.count; /* keys of other tenants are passed over */
        if (cursor == 0)
            break;
    }
    memset(&e, 0, sizeof(e));
    e.user_data = s->user_data;
    e.res = total;
    e.version = cursor;
    client_cqe_post(c, &e);
}

/* DRAIN: a cluster's master drains the node; a standalone agent is the only node there is,
 * with nowhere to move its objects, and its master answers by name like any other. */
static void op_drain(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                     const char *key)
{
    char name[MC_MASTER_NAME_MAX + 1];

    if (s->arg0 > 1 || s->key_len > MC_MASTER_NAME_MAX) {
        client_cqe_res(c, s->user_data, MC_ERR_INVALID);
        return;
    }
    if (c->tenant != 0) {
        /* a node is every tenant's: only the default tenant's clients (the operators) may
         * drain one (docs/tenants.md) */
        client_cqe_res(c, s->user_data, MC_ERR_DENIED);
        return;
    }
    if (a->master == NULL) {
        views_op_drain(a, c, s, key);
        return;
    }
    memcpy(name, key, s->key_len);
    name[s->key_len] = '\0';
    client_cqe_res(c, s->user_data, mc_master_node_drain(a->master, name, s->arg0 != 0));
}

/* Before the op runs: start its clock if it is timed. */
static void time_start(struct mc_agent *a, struct client *c, const struct mc_sqe *s)
{
    uint64_t t0;

    switch (s->opcode) {
    case MC_OP_PUT:
        a->op_t0_ns = mc_agent_now_ns();
        client_time_start(c, s->user_data, a->op_t0_ns, OT_PUT);
        break;
    case MC_OP_PUT_START:
        a->op_t0_ns = mc_agent_now_ns(); /* the put keeps it: PUT_END's answer ends it */
        break;
    case MC_OP_PUT_END:
        if ((t0 = put_t0_ns(c, s->arg0)) != 0)
            client_time_start(c, s->user_data, t0, OT_PUT);
        break;
    case MC_OP_GET:
        client_time_start(c, s->user_data, mc_agent_now_ns(), OT_GET);
        break;
    default:
        break;
    }
}

/* Ops whose key (or prefix) names objects: it is the client's, tagged with its tenant. */
static bool op_names_objects(uint8_t opcode)
{
    switch (opcode) {
    case MC_OP_PUT:
    case MC_OP_PUT_START:
    case MC_OP_GET:
    case MC_OP_EXIST:
    case MC_OP_REMOVE:
    case MC_OP_STAT:
    case MC_OP_LIST:
    case MC_OP_REMOVE_PREFIX:
    case MC_OP_PIN:
    case MC_OP_UNPIN:
    case MC_OP_TOUCH:
        return true;
    default:
        return false;
    }
}

void ops_run(void *ctx, struct client *c, const struct mc_sqe *s, const char *key)
{
    struct mc_agent *a = ctx;
    uint64_t now = mc_agent_now_ms(), deadline;
    char dkey[MC_DIR_KEY_MAX];
    size_t dlen = s->key_len;

    /* the client's absolute deadline, from its low 32 bits (same host, same clock) */
    if (s->deadline_ms != 0) {
        int64_t left = (int32_t)(s->deadline_ms - (uint32_t)now);

        if (left <= 0 && s->opcode != MC_OP_RELEASE && s->opcode != MC_OP_PUT_ABORT) {
            /* it waited in the ring past its deadline: dropped unstarted, and the
             * caller's memory is never read after the caller was told it is over */
            if (!(s->flags & MC_SQE_F_NO_CQE))
                client_cqe_res(c, s->user_data, MC_ERR_TIMEOUT);
            return;
        }
        deadline = now + (uint64_t)(left > 0 ? left : 0);
    } else {
        deadline = now + a->cfg.op_timeout_ms;
    }

    a->st.ops++;
    /* (an UNPIN without a key names every pin of the client: it stays without one) */
    if (op_names_objects(s->opcode) && !(s->opcode == MC_OP_UNPIN && s->key_len == 0)) {
        /* a key is a C string (mc.h): a NUL in it would reach into other tenants' keys */
        if (s->key_len > 0 && memchr(key, '\0', s->key_len) != NULL) {
            if (!(s->flags & MC_SQE_F_NO_CQE))
                client_cqe_res(c, s->user_data, MC_ERR_INVALID);
            return;
        }
        dlen = mc_tenant_key_tag(a->tcfg[c->tenant].name, key, s->key_len, dkey);
        key = dkey;
    }
    if (a->metrics != NULL)
        time_start(a, c, s);
    switch (s->opcode) {
    case MC_OP_NOP:
        client_cqe_res(c, s->user_data, 0);
        return;
    case MC_OP_PUT:
    case MC_OP_PUT_START:
    case MC_OP_PUT_DATA:
    case MC_OP_PUT_END:
    case MC_OP_PUT_ABORT:
        put_op(a, c, s, key, dlen, deadline);
        return;
    case MC_OP_GET:
        lease_op_get(a, c, s, key, dlen, deadline);
        return;
    case MC_OP_RELEASE:
        lease_op_release(a, c, s);
        return;
    case MC_OP_EXIST:
        op_simple(a, c, s, key, dlen, ML_EXIST);
        return;
    case MC_OP_REMOVE:
        op_simple(a, c, s, key, dlen, ML_REMOVE);
        return;
    case MC_OP_STAT:
        op_simple(a, c, s, key, dlen, ML_STAT);
        return;
    case MC_OP_STATS:
        op_stats(a, c, s);
        return;
    case MC_OP_LIST:
        op_list(a, c, s, key, dlen);
        return;
    case MC_OP_REMOVE_PREFIX:
        op_simple(a, c, s, key, dlen, ML_REMOVE_PREFIX);
        return;
    case MC_OP_DRAIN:
        op_drain(a, c, s, key);
        return;
    case MC_OP_PIN:
        pin_op_pin(a, c, s, key, dlen);
        return;
    case MC_OP_UNPIN:
        pin_op_unpin(a, c, s, key, dlen);
        return;
    case MC_OP_TOUCH:
        op_simple(a, c, s, key, dlen, ML_TOUCH);
        return;
    default:
        client_cqe_res(c, s->user_data, MC_ERR_INVALID);
        return;
    }
}
