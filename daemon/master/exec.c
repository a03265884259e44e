/*
 * The master's request executor (exec.h): one row per kind of request, one function that
 * runs them. A row is the kind's name, whether it takes item arrays, and its runner, which
 * calls the service (master.h) and nothing else: the rules stay in master.c and drain.c,
 * this file only says how a request of each kind maps onto them, once, for both callers.
 *
 * Adding a kind: an enum value in exec.h, a runner here and its row.
 */
#include "daemon/master/exec.h"

#include <string.h>

#include <mc/mc_status.h>

typedef int (*exec_fn)(struct mc_master *m, struct mc_master_req *r);

static int x_put_start(struct mc_master *m, struct mc_master_req *r)
{
    mc_master_put_start_batch(m, r->n, r->in.put, r->out.grant, r->results);
    return 0;
}

static int x_put_end(struct mc_master *m, struct mc_master_req *r)
{
    mc_master_put_end_batch(m, r->n, r->in.ref, r->results);
    return 0;
}

static int x_put_revoke(struct mc_master *m, struct mc_master_req *r)
{
    mc_master_put_revoke_batch(m, r->n, r->in.ref, r->results);
    return 0;
}

static int x_get(struct mc_master *m, struct mc_master_req *r)
{
    uint32_t i;

    for (i = 0; i < r->n; i++) {
        memset(&r->out.get[i], 0, sizeof(r->out.get[i]));
        r->results[i] =
            (r->flags & MC_MASTER_EXEC_F_PIN)
                ? mc_master_pin(m, r->in.key[i].key, r->in.key[i].key_len, &r->out.get[i])
                : mc_master_get_for(m, r->node, r->in.key[i].key, r->in.key[i].key_len,
                                    &r->out.get[i]);
    }
    return 0;
}

static int x_lease_release(struct mc_master *m, struct mc_master_req *r)
{
    r->u.released = mc_master_lease_release(m, r->n, r->in.ref);
    return 0;
}

/* EXIST and STAT: 1 present, 0 absent (or not looked up after an absent one with
 * MC_MASTER_EXEC_F_PREFIX), or an error. */
static int exist_or_stat(struct mc_master *m, struct mc_master_req *r, bool stat)
{
    bool absent_seen = false;
    uint32_t i;

    for (i = 0; i < r->n; i++) {
        const struct mc_master_key *k = &r->in.key[i];
        int res;

        if (stat)
            memset(&r->out.stat[i], 0, sizeof(r->out.stat[i]));
        if (absent_seen) {
            res = 0; /* prefix match: not looked up */
        } else if (stat) {
            res = mc_master_stat(m, k->key, k->key_len, &r->out.stat[i]);
            res = res == 0 ? 1 : res == MC_ERR_NOT_FOUND ? 0 : res;
        } else if (r->flags & MC_MASTER_EXEC_F_TOUCH) {
            res = mc_master_touch(m, k->key, k->key_len);
        } else {
            res = mc_master_exist(m, k->key, k->key_len);
        }
        if (res != 1 && (r->flags & MC_MASTER_EXEC_F_PREFIX))
            absent_seen = true;
        r->results[i] = res;
    }
    return 0;
}

static int x_exist(struct mc_master *m, struct mc_master_req *r)
{
    return exist_or_stat(m, r, false);
}

static int x_stat(struct mc_master *m, struct mc_master_req *r)
{
    return exist_or_stat(m, r, true);
}

static int x_remove(struct mc_master *m, struct mc_master_req *r)
{
    uint32_t i;

    for (i = 0; i < r->n; i++) {
        r->results[i] = mc_master_remove(m, r->in.key[i].key, r->in.key[i].key_len);
        r->out.count[i] = r->results[i] == 0 ? 1 : 0;
    }
    return 0;
}

static int x_remove_prefix(struct mc_master *m, struct mc_master_req *r)
{
    uint32_t i;

    for (i = 0; i < r->n; i++) {
        int64_t res = mc_master_remove_prefix(m, r->in.key[i].key, r->in.key[i].key_len);

        r->results[i] = res < 0 ? (int)res : 0;
        r->out.count[i] = res < 0 ? 0 : (uint64_t)res;
    }
    return 0;
}

static int x_fence_ack(struct mc_master *m, struct mc_master_req *r)
{
    uint32_t i;

    for (i = 0; i < r->n; i++) {
        const struct mc_master_fence *f = &r->in.fence[i];
        struct mc_master_seg_info info;
        int res = mc_master_segment_info(m, f->seg, &info);

        if (res == 0 && info.node != r->node)
            res = MC_ERR_DENIED; /* only the owner may say its segment is fenced */
        if (res == 0)
            res = mc_master_fence_ack(m, f->seg, f->alloc, f->version);
        r->results[i] = res;
    }
    return 0;
}

static int x_restore(struct mc_master *m, struct mc_master_req *r)
{
    uint32_t i;

    for (i = 0; i < r->n; i++) {
        const struct mc_master_restore_req *q = &r->in.restore[i];
        struct mc_master_seg_info info;
        int res = mc_master_segment_info(m, q->seg, &info);

        if (res == 0 && r->node != MC_MASTER_NODE_NONE && info.node != r->node)
            res = MC_ERR_DENIED; /* a node reports only what its own segments hold */
        if (res != 0)
            res = res == MC_ERR_DENIED ? res : MC_ERR_INVALID;
        else
            res = mc_master_restore(m, q);
        r->results[i] = res;
    }
    return 0;
}

static int x_restore_done(struct mc_master *m, struct mc_master_req *r)
{
    uint32_t i;

    for (i = 0; i < r->n; i++) {
        struct mc_master_seg_info info;
        int res = mc_master_segment_info(m, r->in.seg[i], &info);

        if (res == 0 && r->node != MC_MASTER_NODE_NONE && info.node != r->node)
            res = MC_ERR_DENIED; /* only its owner says what a segment holds */
        if (res == 0)
            res = mc_master_restore_done(m, r->in.seg[i]);
        r->results[i] = res;
    }
    return 0;
}

static int x_node_register(struct mc_master *m, struct mc_master_req *r)
{
    return mc_master_node_register(m, r->u.reg.name, r->u.reg.domain, &r->u.reg.node);
}

static int x_heartbeat(struct mc_master *m, struct mc_master_req *r)
{
    int rc = mc_master_node_heartbeat(m, r->node);

    r->u.hb.drain = rc == 0 ? mc_master_node_drain_state(m, r->node) : 0;
    return rc;
}

static int x_node_leave(struct mc_master *m, struct mc_master_req *r)
{
    return mc_master_node_unregister(m, r->node);
}

static int x_mount(struct mc_master *m, struct mc_master_req *r)
{
    return mc_master_segment_mount(m, r->u.mount.desc, &r->u.mount.seg);
}

static int x_unmount(struct mc_master *m, struct mc_master_req *r)
{
    return mc_master_segment_unmount(m, r->u.seg);
}

static int x_seg_info(struct mc_master *m, struct mc_master_req *r)
{
    return mc_master_segment_info(m, r->u.seg_info.seg, &r->u.seg_info.info);
}

static int x_node_list(struct mc_master *m, struct mc_master_req *r)
{
    r->u.nodes.n = mc_master_node_list(m, &r->u.nodes.cursor, r->u.nodes.out, r->u.nodes.max);
    return 0;
}

static int x_stats(struct mc_master *m, struct mc_master_req *r)
{
    mc_master_get_stats(m, r->u.stats);
    return 0;
}

static int x_list(struct mc_master *m, struct mc_master_req *r)
{
    int rc = mc_master_list(m, r->u.list.prefix, r->u.list.prefix_len, &r->u.list.cursor,
                            r->u.list.max, r->u.list.fn, r->u.list.ctx);

    r->u.list.n = rc < 0 ? 0 : rc;
    return rc < 0 ? rc : 0;
}

static int x_drain(struct mc_master *m, struct mc_master_req *r)
{
    return mc_master_node_drain(m, r->u.drain.name, r->u.drain.on);
}

static int x_copy_done(struct mc_master *m, struct mc_master_req *r)
{
    mc_master_copy_done(m, r->u.copy_done.id, r->u.copy_done.status);
    return 0;
}

static const struct exec_kind {
    const char *name;
    bool batch;
    exec_fn run;
} kinds[MC_MASTER_OP__COUNT] = {
    [MC_MASTER_OP_PUT_START] = {"PUT_START", true, x_put_start},
    [MC_MASTER_OP_PUT_END] = {"PUT_END", true, x_put_end},
    [MC_MASTER_OP_PUT_REVOKE] = {"PUT_REVOKE", true, x_put_revoke},
    [MC_MASTER_OP_GET] = {"GET", true, x_get},
    [MC_MASTER_OP_LEASE_RELEASE] = {"LEASE_RELEASE", true, x_lease_release},
    [MC_MASTER_OP_EXIST] = {"EXIST", true, x_exist},
    [MC_MASTER_OP_STAT] = {"STAT", true, x_stat},
    [MC_MASTER_OP_REMOVE] = {"REMOVE", true, x_remove},
    [MC_MASTER_OP_REMOVE_PREFIX] = {"REMOVE_PREFIX", true, x_remove_prefix},
    [MC_MASTER_OP_FENCE_ACK] = {"FENCE_ACK", true, x_fence_ack},
    [MC_MASTER_OP_NODE_REGISTER] = {"NODE_REGISTER", false, x_node_register},
    [MC_MASTER_OP_HEARTBEAT] = {"HEARTBEAT", false, x_heartbeat},
    [MC_MASTER_OP_NODE_LEAVE] = {"NODE_LEAVE", false, x_node_leave},
    [MC_MASTER_OP_MOUNT] = {"MOUNT", false, x_mount},
    [MC_MASTER_OP_UNMOUNT] = {"UNMOUNT", false, x_unmount},
    [MC_MASTER_OP_SEG_INFO] = {"SEG_INFO", false, x_seg_info},
    [MC_MASTER_OP_NODE_LIST] = {"NODE_LIST", false, x_node_list},
    [MC_MASTER_OP_STATS] = {"STATS", false, x_stats},
    [MC_MASTER_OP_LIST] = {"LIST", false, x_list},
    [MC_MASTER_OP_DRAIN] = {"DRAIN", false, x_drain},
    [MC_MASTER_OP_COPY_DONE] = {"COPY_DONE", false, x_copy_done},
    [MC_MASTER_OP_RESTORE] = {"RESTORE", true, x_restore},
    [MC_MASTER_OP_RESTORE_DONE] = {"RESTORE_DONE", true, x_restore_done},
};

int mc_master_exec(struct mc_master *m, struct mc_master_req *req)
{
    if ((unsigned)req->op >= MC_MASTER_OP__COUNT || kinds[req->op].run == NULL)
        return MC_ERR_INVALID;
    return kinds[req->op].run(m, req);
}

const char *mc_master_op_name(enum mc_master_op op)
{
    return (unsigned)op < MC_MASTER_OP__COUNT && kinds[op].name != NULL ? kinds[op].name : "?";
}

bool mc_master_op_is_batch(enum mc_master_op op)
{
    return (unsigned)op < MC_MASTER_OP__COUNT && kinds[op].batch;
}
