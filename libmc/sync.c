/*
 * The synchronous calls of <mc/mc.h>: mc_put, mc_get, mc_exist, mc_remove, mc_stat, and
 * the calls libmc's tools use (tool.h: STATS, LIST, DRAIN, REMOVE_PREFIX) with the public
 * forms of two of them (mc_remove_prefix, mc_stats). Each checks its
 * arguments, submits one op and waits for it with its deadline: a put, a get and an exist
 * run the op rules of op.c, exactly as their asynchronous forms do (sync = async + wait);
 * the rest are one SQE and one CQE through the engine (engine.c). Not the ring mechanics,
 * not the handshake.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libmc/export.h"
#include "libmc/op.h"
#include "libmc/tool.h"

/* A CQE result for an op that answers 0 or an error: a positive one breaks the protocol. */
static int res_status(struct mc_client *c, int32_t res)
{
    if (res > 0) {
        mc_engine_poison(&c->e, MC_ERR_PROTO);
        return MC_ERR_PROTO;
    }
    return res;
}

/* Submit one op without staging and wait for it. */
static int run_op(struct mc_client *c, struct mc_sqe *sqe, const char *key, size_t key_len,
                  uint64_t deadline, struct mc_cqe *cqe)
{
    uint32_t op;
    int err;

    err = mc_engine_submit(&c->e, sqe, key, key_len, -1, false, deadline, &op);
    if (err != 0)
        return err;
    return mc_engine_wait(&c->e, op, deadline, cqe);
}

/* --- put, get, exist: one op of op.c, waited for ----------------------------------------- */

/* The start of every keyed call: a client, a valid key (its length in *key_len_p), and a
 * client that may submit (not poisoned, its agent not stopping). */
static int keyed_enter(mc_client_t *c, const char *key, size_t *key_len_p)
{
    int err;

    if (c == NULL)
        return MC_ERR_INVALID;
    err = mc_op_key_check(key, key_len_p);
    if (err != 0)
        return err;
    return mc_engine_enter(&c->e);
}

MC_EXPORT int mc_put(mc_client_t *c, const char *key, const void *buf, size_t len,
                     const mc_put_opts_t *o)
{
    struct mc_op op;
    size_t key_len;
    int err;

    if (c == NULL || buf == NULL || len == 0)
        return MC_ERR_INVALID;
    err = mc_op_key_check(key, &key_len);
    if (err != 0)
        return err;
    err = mc_op_opts_check(o);
    if (err != 0)
        return err;
    err = mc_engine_enter(&c->e);
    if (err != 0)
        return err;
    memset(&op, 0, sizeof(op));
    mc_op_init_put(c, &op, key, key_len, buf, len, o, mc_engine_deadline(&c->e));
    return mc_op_run(c, &op);
}

MC_EXPORT int mc_get(mc_client_t *c, const char *key, void *buf, size_t cap, size_t *len_out)
{
    struct mc_op op;
    size_t key_len;
    int err;

    if (buf == NULL && cap > 0)
        return MC_ERR_INVALID;
    err = keyed_enter(c, key, &key_len);
    if (err != 0)
        return err;
    memset(&op, 0, sizeof(op));
    /* an arena buffer is busy for mc_buf_free while this call may write it */
    mc_op_init_get(c, &op, key, key_len, buf, cap, mc_engine_deadline(&c->e));
    err = mc_op_run(c, &op);
    if (len_out != NULL && (err == 0 || err == MC_ERR_TOO_LARGE))
        *len_out = op.len_out;
    return err;
}

MC_EXPORT int mc_exist(mc_client_t *c, const char *key)
{
    struct mc_op op;
    size_t key_len;
    int err;

    err = keyed_enter(c, key, &key_len);
    if (err != 0)
        return err;
    memset(&op, 0, sizeof(op));
    mc_op_init_exist(c, &op, key, key_len, mc_engine_deadline(&c->e));
    return mc_op_run(c, &op);
}

/* --- lookups ---------------------------------------------------------------------------- */

/* A keyed op with no data: validation, submission, the CQE. */
static int key_op(mc_client_t *c, uint8_t opcode, const char *key, struct mc_cqe *cqe)
{
    struct mc_sqe sqe;
    size_t key_len;
    int err;

    err = keyed_enter(c, key, &key_len);
    if (err != 0)
        return err;
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = opcode;
    return run_op(c, &sqe, key, key_len, mc_engine_deadline(&c->e), cqe);
}

MC_EXPORT int mc_remove(mc_client_t *c, const char *key)
{
    struct mc_cqe cqe;
    int err;

    err = key_op(c, MC_OP_REMOVE, key, &cqe);
    if (err != 0)
        return err;
    return res_status(c, cqe.res);
}

MC_EXPORT int mc_stat(mc_client_t *c, const char *key, mc_obj_info_t *info)
{
    struct mc_cqe cqe;
    int err;

    if (info == NULL)
        return MC_ERR_INVALID;
    err = key_op(c, MC_OP_STAT, key, &cqe);
    if (err != 0)
        return err;
    err = res_status(c, cqe.res);
    if (err != 0)
        return err;
    memset(info, 0, sizeof(*info));
    info->size = cqe.size;
    info->replicas = cqe.replicas;
    /* the header promises only these bits */
    info->flags = cqe.obj_flags & (MC_PUT_PIN_SOFT | MC_PUT_PIN_HARD | MC_PUT_NO_CHECKSUM |
                                   MC_PUT_TIER_GPU);
    if (cqe.disk_replicas <= cqe.replicas && cqe.disk_replicas <= 0xFu)
        info->flags |= cqe.disk_replicas << 16;
    info->version = cqe.version;
    info->ttl_remaining_ms = cqe.deadline_ms;
    return 0;
}

/* --- agent statistics (mcctl) ---------------------------------------------------------- */

/*
 * Run an op whose answer the agent writes into a staging slot (STATS, LIST): the slot is
 * held past the CQE (hold_staging) until the caller has read it. On 0, *slot_p is the
 * caller's to give back with mc_client_staging_put; on an error nothing is left to undo
 * (an abandoned op's slot goes back when its CQE arrives).
 */
static int staging_answer_op(struct mc_client *c, struct mc_sqe *sqe, const char *key,
                             size_t key_len, uint32_t *slot_p, struct mc_cqe *cqe_p)
{
    uint64_t deadline = mc_engine_deadline(&c->e);
    uint32_t slot, op;
    int err;

    err = mc_engine_staging_get(&c->e, deadline, &slot);
    if (err != 0)
        return err;
    sqe->data_off = mc_engine_staging_off(&c->e, slot);
    sqe->data_len = c->e.slot_size;
    err = mc_engine_submit(&c->e, sqe, key, key_len, (int32_t)slot, true, deadline, &op);
    if (err != 0) {
        mc_engine_staging_put(&c->e, slot);
        return err;
    }
    err = mc_engine_wait(&c->e, op, deadline, cqe_p);
    if (err != 0)
        return err;
    *slot_p = slot;
    return 0;
}

static int stats_json(mc_client_t *c, uint64_t flags, char **json_p, size_t *len_p)
{
    struct mc_sqe sqe;
    struct mc_cqe cqe;
    uint32_t slot;
    char *json;
    int err;

    if (c == NULL || json_p == NULL || len_p == NULL)
        return MC_ERR_INVALID;
    err = mc_engine_enter(&c->e);
    if (err != 0)
        return err;
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_STATS;
    sqe.arg0 = flags;
    err = staging_answer_op(c, &sqe, NULL, 0, &slot, &cqe);
    if (err != 0)
        return err;
    if (cqe.res < 0) {
        err = cqe.res;
        goto out_put;
    }
    if ((uint64_t)cqe.res > c->e.slot_size) {
        mc_engine_poison(&c->e, MC_ERR_PROTO);
        err = MC_ERR_PROTO;
        goto out_put;
    }
    {
        /* this client's own counts lead the agent's object: {"dev_staged_puts": N, ...} */
        const char *src = (const char *)mc_engine_staging_ptr(&c->e, slot);
        size_t n = (size_t)cqe.res, pre = 0;
        char own[64];

        if (flags == 0 && n >= 2 && src[0] == '{')
            pre = (size_t)snprintf(own, sizeof(own), "{\"dev_staged_puts\": %" PRIu64 "%s",
                                   (uint64_t)atomic_load(&c->d.staged),
                                   src[1] == '}' ? "" : ", ");
        json = malloc(pre + n + 1);
        if (json == NULL) {
            err = MC_ERR_NOMEM;
            goto out_put;
        }
        if (pre > 0) {
            memcpy(json, own, pre);
            memcpy(json + pre, src + 1, n - 1);
            n = pre + n - 1;
        } else {
            memcpy(json, src, n);
        }
        json[n] = '\0';
        *json_p = json;
        *len_p = n;
    }
    err = 0;
out_put:
    mc_engine_staging_put(&c->e, slot);
    return err;
}

int mc_client_stats_json(mc_client_t *c, char **json_p, size_t *len_p)
{
    return stats_json(c, 0, json_p, len_p);
}

int mc_client_cluster_json(mc_client_t *c, char **json_p, size_t *len_p)
{
    return stats_json(c, MC_STATS_F_CLUSTER, json_p, len_p);
}

/* --- listing and removal by prefix (mcctl) ---------------------------------------------- */

int mc_client_list(mc_client_t *c, const char *prefix, size_t prefix_len, uint64_t *cursor_p,
                   uint32_t max, int (*fn)(void *arg, const char *key, size_t key_len),
                   void *arg)
{
    char key[MC_KEY_MAX + 1];
    struct mc_sqe sqe;
    struct mc_cqe cqe;
    uint32_t slot;
    const uint8_t *p, *end;
    uint16_t klen;
    int err, n = 0;

    if (c == NULL || cursor_p == NULL || fn == NULL || prefix_len > MC_KEY_MAX ||
        (prefix == NULL && prefix_len > 0) || max == 0)
        return MC_ERR_INVALID;
    err = mc_engine_enter(&c->e);
    if (err != 0)
        return err;
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_LIST;
    sqe.arg0 = *cursor_p;
    sqe.arg1 = max;
    err = staging_answer_op(c, &sqe, prefix, prefix_len, &slot, &cqe);
    if (err != 0)
        return err;
    if (cqe.res < 0) {
        err = cqe.res;
        goto out_put;
    }
    if ((uint32_t)cqe.res > max) {
        err = MC_ERR_PROTO;
        goto out_proto;
    }
    /* the records are the agent's: check each against the slot and the key rules */
    p = mc_engine_staging_ptr(&c->e, slot);
    end = p + c->e.slot_size;
    for (int32_t i = 0; i < cqe.res; i++) {
        if ((size_t)(end - p) < sizeof(klen)) {
            err = MC_ERR_PROTO;
            goto out_proto;
        }
        memcpy(&klen, p, sizeof(klen));
        p += sizeof(klen);
        if (klen == 0 || klen > MC_KEY_MAX || (size_t)(end - p) < klen || klen < prefix_len ||
            (prefix_len > 0 && memcmp(p, prefix, prefix_len) != 0)) {
            err = MC_ERR_PROTO;
            goto out_proto;
        }
        memcpy(key, p, klen);
        key[klen] = '\0';
        p += klen;
        err = fn(arg, key, klen);
        if (err != 0)
            goto out_put;
        n++;
    }
    *cursor_p = cqe.version;
    err = n;
    goto out_put;

out_proto:
    mc_engine_poison(&c->e, MC_ERR_PROTO);
out_put:
    mc_engine_staging_put(&c->e, slot);
    return err;
}

int mc_client_drain(mc_client_t *c, const char *node, bool on)
{
    struct mc_sqe sqe;
    struct mc_cqe cqe;
    size_t len;
    int err;

    if (c == NULL || node == NULL)
        return MC_ERR_INVALID;
    len = strnlen(node, MC_CLIENT_NODE_NAME_MAX + 1);
    if (len == 0 || len > MC_CLIENT_NODE_NAME_MAX)
        return MC_ERR_INVALID;
    err = mc_engine_enter(&c->e);
    if (err != 0)
        return err;
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_DRAIN;
    sqe.arg0 = on ? 1 : 0;
    err = run_op(c, &sqe, node, len, mc_engine_deadline(&c->e), &cqe);
    if (err != 0)
        return err;
    return cqe.res < 0 ? cqe.res : 0;
}

int mc_client_remove_prefix(mc_client_t *c, const char *prefix, uint64_t *removed_p)
{
    struct mc_sqe sqe;
    struct mc_cqe cqe;
    size_t len;
    int err;

    if (removed_p == NULL)
        return MC_ERR_INVALID;
    err = keyed_enter(c, prefix, &len);
    if (err != 0)
        return err;
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_REMOVE_PREFIX;
    err = run_op(c, &sqe, prefix, len, mc_engine_deadline(&c->e), &cqe);
    if (err != 0)
        return err;
    if (cqe.res < 0)
        return cqe.res;
    *removed_p = (uint64_t)cqe.res;
    return 0;
}

/* --- the public forms of the tools' calls ------------------------------------------------ */

MC_EXPORT int mc_remove_prefix(mc_client_t *c, const char *prefix, uint64_t *removed)
{
    uint64_t n = 0;
    int err;

    if (removed == NULL)
        return MC_ERR_INVALID;
    err = mc_client_remove_prefix(c, prefix, &n);
    if (err == 0)
        *removed = n;
    return err;
}

MC_EXPORT int mc_stats(mc_client_t *c, char *buf, size_t cap, size_t *len_out)
{
    char *json = NULL;
    size_t len = 0;
    int err;

    if (buf == NULL && cap > 0)
        return MC_ERR_INVALID;
    err = mc_client_stats_json(c, &json, &len);
    if (err != 0)
        return err;
    if (len_out != NULL)
        *len_out = len;
    if (len + 1 > cap) {
        err = MC_ERR_TOO_LARGE;
    } else {
        memcpy(buf, json, len + 1);
        err = 0;
    }
    free(json);
    return err;
}

struct list_out_buf {
    char *p, *end;
};

static int list_into_buf(void *arg, const char *key, size_t key_len)
{
    struct list_out_buf *o = arg;

    if ((size_t)(o->end - o->p) < key_len + 1)
        return MC_ERR_INTERNAL; /* cannot happen: at most cap / (MC_KEY_MAX + 1) keys */
    memcpy(o->p, key, key_len);
    o->p[key_len] = '\0';
    o->p += key_len + 1;
    return 0;
}

MC_EXPORT int mc_list(mc_client_t *c, const char *prefix, uint64_t *cursor, char *buf,
                      size_t cap)
{
    struct list_out_buf o = {buf, buf + cap};
    size_t max = cap / (MC_KEY_MAX + 1);

    if (buf == NULL || max == 0)
        return MC_ERR_INVALID;
    if (max > MC_LIST_MAX)
        max = MC_LIST_MAX;
    if (prefix == NULL)
        prefix = "";
    return mc_client_list(c, prefix, strnlen(prefix, MC_KEY_MAX + 1), cursor, (uint32_t)max,
                          list_into_buf, &o);
}
