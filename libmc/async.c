/*
 * The asynchronous calls of <mc/mc.h>: mc_get_async, mc_put_async, mc_wait, mc_cancel,
 * mc_op_free, mc_client_eventfd, mc_client_poll, the batches mc_batch_put/get/exist and
 * mc_prefix_match, and the pins and touches (mc_prefix_pin, mc_unpin, mc_touch). Each checks its arguments and sets up ops; what an op does is in
 * op.c, the ring mechanics in engine.c.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "libmc/export.h"
#include "libmc/op.h"

static int async_new(struct mc_client *c, struct mc_op **op_p)
{
    struct mc_op *op;
    int err = mc_engine_enter(&c->e);

    if (err != 0)
        return err;
    op = calloc(1, sizeof(*op));
    if (op == NULL)
        return MC_ERR_NOMEM;
    *op_p = op;
    return 0;
}

MC_EXPORT int mc_get_async(mc_client_t *c, const char *key, void *buf, size_t cap,
                           mc_op_t **op_p)
{
    struct mc_op *op;
    size_t key_len;
    int err;

    if (c == NULL || op_p == NULL || (buf == NULL && cap > 0))
        return MC_ERR_INVALID;
    err = mc_op_key_check(key, &key_len);
    if (err != 0)
        return err;
    err = async_new(c, &op);
    if (err != 0)
        return err;
    mc_op_init_get(c, op, key, key_len, buf, cap, mc_engine_deadline(&c->e));
    err = mc_op_submit(c, op);
    if (err == 0)
        *op_p = op;
    return err;
}

MC_EXPORT int mc_put_async(mc_client_t *c, const char *key, const void *buf, size_t len,
                           const mc_put_opts_t *o, mc_op_t **op_p)
{
    struct mc_op *op;
    size_t key_len;
    int err;

    if (c == NULL || buf == NULL || len == 0 || op_p == NULL)
        return MC_ERR_INVALID;
    err = mc_op_key_check(key, &key_len);
    if (err != 0)
        return err;
    err = mc_op_opts_check(o);
    if (err != 0 && err != MC_ERR_NO_SPACE) /* NO_SPACE is the op's outcome */
        return err;
    err = async_new(c, &op);
    if (err != 0)
        return err;
    mc_op_init_put(c, op, key, key_len, buf, len, o, mc_engine_deadline(&c->e));
    err = mc_op_submit(c, op);
    if (err == 0)
        *op_p = op;
    return err;
}

MC_EXPORT int mc_wait(mc_op_t *op, int timeout_ms, size_t *len_out)
{
    if (op == NULL)
        return MC_ERR_INVALID;
    return mc_op_wait(op, timeout_ms, len_out);
}

MC_EXPORT int mc_cancel(mc_op_t *op)
{
    if (op == NULL)
        return MC_ERR_INVALID;
    mc_op_cancel(op);
    return 0;
}

MC_EXPORT void mc_op_free(mc_op_t *op)
{
    if (op != NULL)
        mc_op_free_async(op);
}

MC_EXPORT int mc_client_eventfd(mc_client_t *c)
{
    int err;

    if (c == NULL)
        return MC_ERR_INVALID;
    err = mc_engine_enter(&c->e);
    if (err != 0)
        return err;
    /* without an agent that writes it, the descriptor would never turn readable */
    if (c->e.efd < 0 || !c->e.efd_agent)
        return MC_ERR_IO;
    return c->e.efd;
}

MC_EXPORT int mc_client_poll(mc_client_t *c)
{
    if (c == NULL)
        return MC_ERR_INVALID;
    mc_op_reap(c);
    return atomic_load(&c->e.poison);
}

/* --- batches ---------------------------------------------------------------------------- */

/* Set up n internal ops with init(i) (which returns 0 or the item's own failure), queue the
 * good ones under one lock hold, submit them in one go, wait for all. results[i] gets each
 * status. Returns the number of items with status >= 0, or a whole-call failure. */
typedef int (*batch_init_fn)(struct mc_client *c, struct mc_op *op, size_t i, void *arg);

static int batch_run(struct mc_client *c, size_t n, batch_init_fn init, void *arg,
                     int results[], struct mc_op **ops_p)
{
    uint64_t deadline;
    struct mc_op *ops;
    int err, good;

    err = mc_engine_enter(&c->e);
    if (err != 0)
        return err;
    ops = calloc(n, sizeof(*ops));
    if (ops == NULL)
        return MC_ERR_NOMEM;
    deadline = mc_engine_deadline(&c->e);
    for (size_t i = 0; i < n; i++) {
        ops[i].deadline_ns = deadline;
        err = init(c, &ops[i], i, arg);
        if (err != 0) {
            ops[i].final = true;
            ops[i].status = err;
        }
    }
    good = mc_op_run_batch(c, ops, n, results);
    if (ops_p != NULL)
        *ops_p = ops;
    else
        free(ops);
    return good;
}

struct batch_put_arg {
    const char *const *keys;
    const void *const *bufs;
    const size_t *lens;
    const mc_put_opts_t *o;
    int opts_err;
};

static int batch_put_init(struct mc_client *c, struct mc_op *op, size_t i, void *arg)
{
    struct batch_put_arg *a = arg;
    size_t key_len;
    int err;

    if (a->bufs[i] == NULL || a->lens[i] == 0)
        return MC_ERR_INVALID;
    err = mc_op_key_check(a->keys[i], &key_len);
    if (err != 0)
        return err;
    if (a->opts_err != 0 && a->opts_err != MC_ERR_NO_SPACE)
        return a->opts_err;
    mc_op_init_put(c, op, a->keys[i], key_len, a->bufs[i], a->lens[i], a->o, op->deadline_ns);
    return 0;
}

MC_EXPORT int mc_batch_put(mc_client_t *c, size_t n, const char *const keys[],
                           const void *const bufs[], const size_t lens[],
                           const mc_put_opts_t *o, int results[])
{
    struct batch_put_arg a = {keys, bufs, lens, o, 0};

    if (c == NULL ||
        (n > 0 && (keys == NULL || bufs == NULL || lens == NULL || results == NULL)))
        return MC_ERR_INVALID;
    if (n > INT_MAX)
        return MC_ERR_INVALID;
    if (n == 0)
        return 0;
    a.opts_err = mc_op_opts_check(o);
    return batch_run(c, n, batch_put_init, &a, results, NULL);
}

struct batch_get_arg {
    const char *const *keys;
    void *const *bufs;
    const size_t *caps;
};

static int batch_get_init(struct mc_client *c, struct mc_op *op, size_t i, void *arg)
{
    struct batch_get_arg *a = arg;
    size_t key_len;
    int err;

    if (a->bufs[i] == NULL && a->caps[i] > 0)
        return MC_ERR_INVALID;
    err = mc_op_key_check(a->keys[i], &key_len);
    if (err != 0)
        return err;
    mc_op_init_get(c, op, a->keys[i], key_len, a->bufs[i], a->caps[i], op->deadline_ns);
    return 0;
}

MC_EXPORT int mc_batch_get(mc_client_t *c, size_t n, const char *const keys[],
                           void *const bufs[], const size_t caps[], size_t lens[],
                           int results[])
{
    struct batch_get_arg a = {keys, bufs, caps};
    struct mc_op *ops = NULL;
    int good;

    if (c == NULL ||
        (n > 0 && (keys == NULL || bufs == NULL || caps == NULL || results == NULL)))
        return MC_ERR_INVALID;
    if (n > INT_MAX)
        return MC_ERR_INVALID;
    if (n == 0)
        return 0;
    good = batch_run(c, n, batch_get_init, &a, results, &ops);
    if (good < 0)
        return good;
    if (lens != NULL) {
        for (size_t i = 0; i < n; i++) {
            if (results[i] == 0 || results[i] == MC_ERR_TOO_LARGE)
                lens[i] = ops[i].len_out;
        }
    }
    free(ops);
    return good;
}

static int batch_exist_init(struct mc_client *c, struct mc_op *op, size_t i, void *arg)
{
    const char *const *keys = arg;
    size_t key_len;
    int err;

    err = mc_op_key_check(keys[i], &key_len);
    if (err != 0)
        return err;
    mc_op_init_exist(c, op, keys[i], key_len, op->deadline_ns);
    return 0;
}

MC_EXPORT int mc_batch_exist(mc_client_t *c, size_t n, const char *const keys[], int results[])
{
    if (c == NULL || (n > 0 && (keys == NULL || results == NULL)))
        return MC_ERR_INVALID;
    if (n > INT_MAX)
        return MC_ERR_INVALID;
    if (n == 0)
        return 0;
    return batch_run(c, n, batch_exist_init, (void *)keys, results, NULL);
}

MC_EXPORT int mc_prefix_match(mc_client_t *c, size_t n, const char *const keys[])
{
    size_t key_len, k;
    int *results;
    int err;

    if (c == NULL || (n > 0 && keys == NULL) || n > INT_MAX)
        return MC_ERR_INVALID;
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (mc_op_key_check(keys[i], &key_len) != 0)
            return MC_ERR_INVALID;
    }
    results = malloc(n * sizeof(*results));
    if (results == NULL)
        return MC_ERR_NOMEM;
    /* one batch: the round trip is what costs, not the lookups past the first miss */
    err = mc_batch_exist(c, n, keys, results);
    if (err >= 0) {
        for (k = 0; k < n && results[k] == 1; k++)
            ;
        /* a failed lookup before the first miss leaves the count unknown: report it */
        err = k < n && results[k] < 0 ? results[k] : (int)k;
    }
    free(results);
    return err;
}

/* --- pins and touches ------------------------------------------------------------------- */

/* UNPIN pin id: every key under it, or only `key`, or (from > 0) those pinned as item
 * from - 1 or later of their prefix. The pins released, or a failure. */
static int unpin_run(struct mc_client *c, uint64_t id, const char *key, size_t key_len,
                     uint64_t from)
{
    uint64_t deadline = mc_engine_deadline(&c->e);
    struct mc_sqe sqe;
    struct mc_cqe cqe;
    uint32_t op;
    int err;

    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_UNPIN;
    sqe.arg0 = id;
    sqe.arg1 = from;
    err = mc_engine_submit(&c->e, &sqe, key, key_len, -1, false, deadline, &op);
    if (err != 0)
        return err;
    err = mc_engine_wait(&c->e, op, deadline, &cqe);
    if (err != 0)
        return err;
    return cqe.res;
}

struct key_op_arg {
    const char *const *keys;
    uint8_t opcode;
    uint64_t arg0;
};

static int key_op_init(struct mc_client *c, struct mc_op *op, size_t i, void *arg)
{
    struct key_op_arg *a = arg;
    size_t key_len;
    int err;

    err = mc_op_key_check(a->keys[i], &key_len);
    if (err != 0)
        return err;
    mc_op_init_key_op(c, op, a->opcode, a->arg0, a->keys[i], key_len, op->deadline_ns);
    op->key_arg1 = i + 1; /* PIN: the item's place, for UNPIN to select by */
    return 0;
}

/* n keyed ops of one opcode in one batch; the keys are checked first (any invalid one fails
 * the call). Returns what batch_run returns; results[] as it writes them. */
static int key_op_batch(struct mc_client *c, size_t n, const char *const keys[], uint8_t opcode,
                        uint64_t arg0, int results[])
{
    struct key_op_arg a = {keys, opcode, arg0};
    size_t key_len;

    for (size_t i = 0; i < n; i++) {
        if (mc_op_key_check(keys[i], &key_len) != 0)
            return MC_ERR_INVALID;
    }
    return batch_run(c, n, key_op_init, &a, results, NULL);
}

MC_EXPORT int mc_prefix_pin(mc_client_t *c, size_t n, const char *const keys[], mc_pin_t *pin)
{
    uint64_t id;
    size_t k;
    int *results;
    int err;

    if (c == NULL || pin == NULL || (n > 0 && keys == NULL) || n > INT_MAX)
        return MC_ERR_INVALID;
    err = mc_engine_enter(&c->e);
    if (err != 0)
        return err;
    id = atomic_fetch_add(&c->next_pin, 1) + 1; /* never 0: the agent refuses 0 */
    if (n == 0) {
        *pin = id; /* holds nothing; mc_unpin of it releases nothing */
        return 0;
    }
    results = malloc(n * sizeof(*results));
    if (results == NULL)
        return MC_ERR_NOMEM;
    /* one batch, as mc_prefix_match: the round trip costs, not the pins past a miss */
    err = key_op_batch(c, n, keys, MC_OP_PIN, id, results);
    if (err < 0)
        goto err_unpin;
    for (k = 0; k < n && results[k] == 1; k++)
        ;
    if (k < n && results[k] < 0) {
        err = results[k]; /* a failed pin before the first miss: the count is unknown */
        goto err_unpin;
    }
    /* pins past the first miss are not the caller's: give them back now, in one UNPIN of
     * the items after k (marked k + 2 and up) */
    for (size_t i = k + 1; i < n; i++) {
        if (results[i] != 1)
            continue;
        err = unpin_run(c, id, NULL, 0, (uint64_t)k + 2);
        if (err < 0)
            goto err_unpin;
        break;
    }
    free(results);
    *pin = id;
    return (int)k;

err_unpin:
    /* best effort: what is left ends with the connection or at pin_ttl_ms */
    if (err != MC_ERR_INVALID)
        (void)unpin_run(c, id, NULL, 0, 0);
    free(results);
    return err;
}

MC_EXPORT int mc_unpin(mc_client_t *c, mc_pin_t pin)
{
    int err;

    if (c == NULL || pin == 0)
        return MC_ERR_INVALID;
    err = mc_engine_enter(&c->e);
    if (err != 0)
        return err;
    return unpin_run(c, pin, NULL, 0, 0);
}

MC_EXPORT int mc_touch(mc_client_t *c, size_t n, const char *const keys[])
{
    int *results;
    int err, present = 0;

    if (c == NULL || (n > 0 && keys == NULL) || n > INT_MAX)
        return MC_ERR_INVALID;
    if (n == 0)
        return 0;
    results = malloc(n * sizeof(*results));
    if (results == NULL)
        return MC_ERR_NOMEM;
    err = key_op_batch(c, n, keys, MC_OP_TOUCH, 0, results);
    for (size_t i = 0; err >= 0 && i < n; i++) {
        if (results[i] < 0)
            err = results[i];
        else
            present += results[i];
    }
    free(results);
    return err < 0 ? err : present;
}
