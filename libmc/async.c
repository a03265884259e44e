/*
 * Asynchronous ops and batches of <mc/mc.h>: mc_put_async, mc_get_async, mc_wait, mc_cancel,
 * mc_op_free, mc_client_eventfd, mc_batch_put/get/exist, mc_prefix_match, and the put of
 * caller memory that the agent reads itself (arenas, MC_SQE_F_USER) for mc_put too. Not the
 * ring mechanics (engine.c) and not the synchronous staging paths (ops.c).
 *
 * An op is a small state machine driven under c->mu: "pump" submits its next step(s) when
 * op and staging slots are free (without waiting: an op that finds none waits in the FIFO
 * c->aq_head, and is pumped again when a slot comes back), and the CQE hook (called by
 * whichever thread reaps) moves it to its next step. A batch is n internal ops queued under
 * one lock hold and pumped once: every SQE that fits is written, the SQ tail published once
 * and the doorbell rung once; the rest follow in waves as slots come back.
 *
 * A GET's bytes are copied and verified by the thread that reaped its CQE (or any thread
 * that waits next), without the lock: the op sits in c->copy_head meanwhile, then is
 * "copying", and nothing else finishes it. A put's staging copy is made under the lock, at
 * most one staging slot (1 MiB by default) at a time: simpler than handing slots out and
 * back, and bounded; a put that needs no copy (arena, user memory) makes none.
 *
 * Final means: the outcome is known and no transfer can touch the op's buffer any more.
 * An op whose SQE names the caller's memory is final only when the agent answered (or is
 * gone); others are given up MC_CLIENT_EXPIRE_GRACE_MS after their deadline if the agent
 * stays silent (their staging or lease is cleaned up by the engine's abandoned path).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "libmc/client.h"
#include "libmc/export.h"
#include "shm/doorbell.h"
#include "shm/sqe_check.h"

/* Async ops a client may hold (not freed) before mc_*_async answers MC_ERR_NOMEM. */
#define MC_CLIENT_ASYNC_MAX 65536u

enum mc_aop_kind { AOP_PUT, AOP_GET, AOP_EXIST };
enum mc_aop_src { SRC_STAGING, SRC_ARENA, SRC_USER };
enum mc_aop_step {
    STEP_NONE = 0,
    STEP_PUT,   /* the whole object in one PUT */
    STEP_START, /* PUT_START */
    STEP_DATA,  /* PUT_DATA pieces, up to MC_CLIENT_PUT_WINDOW in flight */
    STEP_END,   /* PUT_END */
    STEP_ABORT, /* PUT_ABORT, then final with op->err (or a restart from staging) */
    STEP_GET,
    STEP_EXIST,
};

enum pump_result { PUMP_IDLE, PUMP_BLOCKED, PUMP_GONE };

struct mc_op {
    struct mc_client *c;
    struct mc_op *all_prev, *all_next; /* c->all */
    struct mc_op *q_prev, *q_next;     /* c->aq_head, while queued */
    struct mc_op *cp_next;             /* c->copy_head, while waiting for its copy */
    uint8_t kind, src, next_step;
    bool queued, in_copy, copying;
    bool final, reported, detached, canceled, internal, fallback, linked;
    int status;
    int init_err; /* a put that cannot be placed at all (too many replicas): final at once */
    int err; /* a multi-step put: why it is being aborted */
    uint32_t inflight; /* SQEs of this op in flight */
    uint32_t waiters;  /* threads in mc_wait on it */
    uint32_t *batch_left; /* internal ops of a batch: decremented when final */
    uint64_t deadline_ns;
    size_t len_out;
    /* put */
    const uint8_t *src_buf;
    size_t len;
    uint32_t put_flags, replicas;
    uint64_t ttl_ms;
    uint64_t arena_ref; /* arena id << MC_SHM_ARENA_SHIFT | offset of src_buf */
    bool started;
    uint32_t handle;
    size_t sent; /* bytes submitted as pieces */
    /* get */
    uint8_t *dst;
    size_t cap;
    uint64_t skip; /* replicas whose bytes failed our checksum: the next GET skips them */
    struct mc_cqe gcqe;
    struct mc_arena_use use;
    uint16_t key_len;
    char key[MC_KEY_MAX];
};

/* --- lists -------------------------------------------------------------------------------- */

static void all_link_locked(struct mc_client *c, struct mc_op *op)
{
    op->linked = true;
    op->all_prev = NULL;
    op->all_next = c->all;
    if (c->all != NULL)
        c->all->all_prev = op;
    c->all = op;
}

static void all_unlink_locked(struct mc_client *c, struct mc_op *op)
{
    if (op->all_prev != NULL)
        op->all_prev->all_next = op->all_next;
    else
        c->all = op->all_next;
    if (op->all_next != NULL)
        op->all_next->all_prev = op->all_prev;
    op->all_prev = op->all_next = NULL;
    op->linked = false;
}

static void enqueue_locked(struct mc_client *c, struct mc_op *op)
{
    if (op->queued)
        return;
    op->queued = true;
    op->q_next = NULL;
    op->q_prev = c->aq_tail;
    if (c->aq_tail != NULL)
        c->aq_tail->q_next = op;
    else
        c->aq_head = op;
    c->aq_tail = op;
}

static void dequeue_locked(struct mc_client *c, struct mc_op *op)
{
    if (!op->queued)
        return;
    if (op->q_prev != NULL)
        op->q_prev->q_next = op->q_next;
    else
        c->aq_head = op->q_next;
    if (op->q_next != NULL)
        op->q_next->q_prev = op->q_prev;
    else
        c->aq_tail = op->q_prev;
    op->q_prev = op->q_next = NULL;
    op->queued = false;
}

static void op_destroy_locked(struct mc_client *c, struct mc_op *op)
{
    mc_arena_unuse(c, &op->use);
    all_unlink_locked(c, op);
    free(op);
}

/* Wake the caller's event loop: the eventfd is ours too, so libmc may make it readable. */
static void efd_signal(struct mc_client *c)
{
    uint64_t one = 1;

    if (c->efd >= 0)
        (void)write(c->efd, &one, sizeof(one)); /* EAGAIN only at 2^64-2: already readable */
}

/*
 * The op is final with status. A detached op is freed here: the caller must not touch op
 * afterwards. Ops on the copy list or being copied are never finished by anyone but their
 * copier.
 */
static void finish_locked(struct mc_client *c, struct mc_op *op, int status)
{
    if (op->final)
        return;
    dequeue_locked(c, op);
    op->final = true;
    op->status = status;
    op->next_step = STEP_NONE;
    if (op->kind == AOP_PUT && status == 0)
        op->len_out = op->len;
    if (!op->internal)
        c->async_live--;
    if (op->batch_left != NULL)
        (*op->batch_left)--;
    pthread_cond_broadcast(&c->cv);
    if (op->detached) {
        op_destroy_locked(c, op);
        return;
    }
    /* nobody waits on it now: tell the owner's event loop (mc_client_eventfd) */
    if (!op->internal && op->waiters == 0)
        efd_signal(c);
}

/* A multi-step put failed (or was canceled) with err: abort it once nothing is in flight. */
static void put_fail_locked(struct mc_client *c, struct mc_op *op, int err)
{
    if (op->err == 0)
        op->err = err;
    op->next_step = STEP_NONE;
    if (op->inflight > 0)
        return; /* the last CQE comes back here */
    if (op->started) {
        op->next_step = STEP_ABORT;
        enqueue_locked(c, op);
        return;
    }
    finish_locked(c, op, op->err);
}

/* The first step of a put from op->src. */
static void put_begin(struct mc_client *c, struct mc_op *op)
{
    size_t one = op->src == SRC_STAGING ? c->slot_size : MC_CLIENT_DIRECT_ONE;

    op->started = false;
    op->sent = 0;
    op->err = 0;
    op->next_step = op->len <= one ? STEP_PUT : STEP_START;
}

/* The user-memory path was refused (MC_ERR_DENIED): this and later puts use staging. */
static void user_denied_locked(struct mc_client *c, struct mc_op *op)
{
    atomic_store(&c->user_ok, false);
    op->src = SRC_STAGING;
    op->fallback = false;
    put_begin(c, op);
    enqueue_locked(c, op);
}

static void sqe_put_init(struct mc_sqe *sqe, uint8_t opcode, const struct mc_op *op)
{
    memset(sqe, 0, sizeof(*sqe));
    sqe->opcode = opcode;
    sqe->put_flags = op->put_flags;
    sqe->replicas = op->replicas;
    sqe->ttl_ms = op->ttl_ms;
}

/* Fill the data source of a PUT / PUT_DATA of [off, off + n) of op's object; for staging,
 * take a slot and copy. False when no staging slot is free now. */
static bool put_source_locked(struct mc_client *c, struct mc_op *op, struct mc_sqe *sqe,
                              size_t off, size_t n, int32_t *staging_p)
{
    uint32_t slot;

    *staging_p = -1;
    sqe->data_len = n;
    switch (op->src) {
    case SRC_ARENA:
        sqe->flags = MC_SQE_F_ARENA;
        sqe->data_off = op->arena_ref + off;
        return true;
    case SRC_USER:
        sqe->flags = MC_SQE_F_USER;
        sqe->data_off = (uint64_t)(uintptr_t)(op->src_buf + off);
        return true;
    default:
        if (!mc_client_staging_try_get_locked(c, &slot))
            return false;
        memcpy(mc_client_staging_ptr(c, slot), op->src_buf + off, n);
        sqe->data_off = mc_client_staging_off(c, slot);
        *staging_p = (int32_t)slot;
        return true;
    }
}

/* Submit sqe for op, mu held. 0, MC_ERR_BUSY (try later; staging given back) or a poison
 * code (op finished: the caller returns PUMP_GONE). */
static int step_submit_locked(struct mc_client *c, struct mc_op *op, struct mc_sqe *sqe,
                              bool with_key, int32_t staging, uint8_t step, uint64_t deadline)
{
    uint32_t slot;
    int err;

    err = mc_client_submit_locked(c, sqe, with_key ? op->key : NULL, with_key ? op->key_len : 0,
                                  staging, op, step, deadline, &slot);
    if (err == 0) {
        op->inflight++;
        return 0;
    }
    if (staging >= 0)
        mc_client_staging_put_locked(c, (uint32_t)staging);
    if (err != MC_ERR_BUSY)
        finish_locked(c, op, err);
    return err;
}

/* Submit what op can submit now; see enum pump_result. mu held, c->kicking set. */
static enum pump_result pump_locked(struct mc_client *c, struct mc_op *op)
{
    uint64_t now = mc_client_now_ns();
    struct mc_sqe sqe;
    int32_t staging;
    size_t piece, psize;
    int err;

    if (op->final)
        return PUMP_GONE;
    if (op->next_step == STEP_NONE)
        return PUMP_IDLE;
    if (op->next_step != STEP_ABORT && (now >= op->deadline_ns || op->canceled)) {
        int why = op->canceled ? MC_ERR_CANCELED : MC_ERR_TIMEOUT;

        if (op->kind == AOP_PUT && op->inflight + (op->started ? 1u : 0u) > 0) {
            put_fail_locked(c, op, why);
            if (op->next_step != STEP_ABORT)
                return PUMP_IDLE;
        } else if (op->inflight == 0) {
            finish_locked(c, op, why);
            return PUMP_GONE;
        } else {
            op->next_step = STEP_NONE;
            return PUMP_IDLE;
        }
    }

    memset(&sqe, 0, sizeof(sqe));
    switch (op->next_step) {
    case STEP_GET:
    case STEP_EXIST:
        /* every answered GET holds a lease at the agent until its copy is done and it is
         * released; the agent keeps 2 * max_inflight of them for us, so GETs in flight
         * plus copies waiting stay within the op slots */
        if (op->next_step == STEP_GET && c->ncopies + (c->nops - c->nops_free) >= c->nops)
            return PUMP_BLOCKED;
        sqe.opcode = op->next_step == STEP_GET ? MC_OP_GET : MC_OP_EXIST;
        if (op->next_step == STEP_GET) {
            sqe.arg0 = op->skip;
            sqe.arg1 = (uint64_t)op->cap + 1; /* a remote object that cannot fit stays */
        }
        err = step_submit_locked(c, op, &sqe, true, -1, op->next_step, op->deadline_ns);
        break;
    case STEP_PUT:
        sqe_put_init(&sqe, MC_OP_PUT, op);
        if (!put_source_locked(c, op, &sqe, 0, op->len, &staging))
            return PUMP_BLOCKED;
        err = step_submit_locked(c, op, &sqe, true, staging, STEP_PUT, op->deadline_ns);
        break;
    case STEP_START:
        sqe_put_init(&sqe, MC_OP_PUT_START, op);
        sqe.arg0 = op->len;
        err = step_submit_locked(c, op, &sqe, true, -1, STEP_START, op->deadline_ns);
        break;
    case STEP_DATA:
        psize = op->src == SRC_STAGING ? c->slot_size : MC_CLIENT_DIRECT_PIECE;
        while (op->sent < op->len && op->inflight < MC_CLIENT_PUT_WINDOW) {
            piece = op->len - op->sent < psize ? op->len - op->sent : psize;
            memset(&sqe, 0, sizeof(sqe));
            sqe.opcode = MC_OP_PUT_DATA;
            sqe.arg0 = op->handle;
            sqe.arg1 = op->sent;
            if (!put_source_locked(c, op, &sqe, op->sent, piece, &staging))
                return PUMP_BLOCKED;
            err = step_submit_locked(c, op, &sqe, false, staging, STEP_DATA, op->deadline_ns);
            if (err == MC_ERR_BUSY)
                return PUMP_BLOCKED;
            if (err != 0)
                return PUMP_GONE;
            op->sent += piece;
        }
        /* all sent, or the window is full: the CQE hook goes on */
        op->next_step = STEP_NONE;
        return PUMP_IDLE;
    case STEP_END:
        sqe.opcode = MC_OP_PUT_END;
        sqe.arg0 = op->handle;
        err = step_submit_locked(c, op, &sqe, false, -1, STEP_END, op->deadline_ns);
        break;
    case STEP_ABORT:
        /* cleanup gets a deadline of its own: the op's may be what failed it */
        sqe.opcode = MC_OP_PUT_ABORT;
        sqe.arg0 = op->handle;
        err = step_submit_locked(c, op, &sqe, false, -1, STEP_ABORT, mc_client_deadline(c));
        break;
    default:
        return PUMP_IDLE;
    }
    if (err == MC_ERR_BUSY)
        return PUMP_BLOCKED;
    if (err != 0)
        return PUMP_GONE;
    op->next_step = STEP_NONE;
    return PUMP_IDLE;
}

/* Fail every op not final with the poison code (their slots are abandoned). mu held. */
static void poison_all_locked(struct mc_client *c)
{
    int err = atomic_load(&c->poison);
    struct mc_op *op, *next;

    if (err == 0)
        return;
    /* GETs waiting for their copy: the lease is not worth a release on a dead client */
    while ((op = c->copy_head) != NULL) {
        c->copy_head = op->cp_next;
        c->ncopies--;
        op->in_copy = false;
        finish_locked(c, op, err);
    }
    for (op = c->all; op != NULL; op = next) {
        next = op->all_next;
        if (op->final || op->in_copy || op->copying)
            continue;
        for (uint32_t i = 0; i < c->nops; i++) {
            if (c->ops[i].aop == op)
                mc_client_abandon_locked(c, i);
        }
        op->inflight = 0;
        finish_locked(c, op, err);
    }
}

void mc_async_kick_locked(struct mc_client *c)
{
    struct mc_op *op, *next;
    enum pump_result r;

    if (c->kicking)
        return; /* a pump gave a slot back: the running kick goes on */
    c->kicking = true;
    poison_all_locked(c);
    /* a pump touches only its own op (a slot it gives back re-enters this function,
     * which returns at once), so the next op read before it stays valid */
    for (op = c->aq_head; op != NULL; op = next) {
        next = op->q_next;
        r = pump_locked(c, op);
        if (r == PUMP_BLOCKED)
            break; /* FIFO: the ops behind it wait for the same slots */
        if (r == PUMP_IDLE && op->next_step == STEP_NONE)
            dequeue_locked(c, op);
    }
    c->kicking = false;
    mc_client_flush_locked(c);
}

/* --- completions ----------------------------------------------------------------------- */

static int proto_locked(struct mc_client *c)
{
    mc_client_poison_locked(c, MC_ERR_PROTO);
    return MC_ERR_PROTO;
}

void mc_async_cqe_locked(struct mc_client *c, struct mc_op *op, uint32_t tag,
                         const struct mc_cqe *cqe)
{
    int32_t res = cqe->res;

    if (op->inflight > 0)
        op->inflight--;
    if (op->final)
        return;
    switch (tag) {
    case STEP_EXIST:
        if (res > 1)
            res = proto_locked(c);
        finish_locked(c, op, res);
        return;
    case STEP_GET: {
        bool checksum = !(cqe->obj_flags & MC_PUT_NO_CHECKSUM);

        if (res > 0) {
            finish_locked(c, op, proto_locked(c));
            return;
        }
        if (res < 0) {
            if (res == MC_ERR_TOO_LARGE)
                op->len_out = (size_t)cqe->size;
            finish_locked(c, op, op->canceled ? MC_ERR_CANCELED : res);
            return;
        }
        if (mc_client_get_location(c, cqe, checksum) == NULL) {
            finish_locked(c, op, proto_locked(c)); /* a lease we cannot trust: not released */
            return;
        }
        if (op->canceled) {
            mc_client_release_locked(c, cqe->lease_id);
            finish_locked(c, op, MC_ERR_CANCELED);
            return;
        }
        if (cqe->size > op->cap) {
            mc_client_release_locked(c, cqe->lease_id);
            op->len_out = (size_t)cqe->size;
            finish_locked(c, op, MC_ERR_TOO_LARGE);
            return;
        }
        op->gcqe = *cqe;
        op->in_copy = true;
        op->cp_next = c->copy_head;
        c->copy_head = op;
        c->ncopies++;
        return;
    }
    case STEP_PUT:
        if (res == MC_ERR_DENIED && op->src == SRC_USER) {
            user_denied_locked(c, op);
            return;
        }
        finish_locked(c, op, res > 0 ? proto_locked(c) : res);
        return;
    case STEP_START:
        if (res > 0) {
            finish_locked(c, op, proto_locked(c));
        } else if (res < 0) {
            finish_locked(c, op, op->canceled ? MC_ERR_CANCELED : res);
        } else {
            op->started = true;
            op->handle = cqe->lease_id;
            if (op->canceled) {
                put_fail_locked(c, op, MC_ERR_CANCELED);
            } else {
                op->next_step = STEP_DATA;
                enqueue_locked(c, op);
            }
        }
        return;
    case STEP_DATA:
        if (res > 0) {
            put_fail_locked(c, op, proto_locked(c));
            return;
        }
        if (res == MC_ERR_DENIED && op->src == SRC_USER)
            op->fallback = true;
        if (res < 0 || op->canceled || op->err != 0) {
            put_fail_locked(c, op, res < 0 ? res : op->canceled ? MC_ERR_CANCELED : op->err);
            return;
        }
        if (op->sent < op->len) {
            op->next_step = STEP_DATA;
            enqueue_locked(c, op);
        } else if (op->inflight == 0) {
            op->next_step = STEP_END;
            enqueue_locked(c, op);
        }
        return;
    case STEP_END:
        finish_locked(c, op, res > 0 ? proto_locked(c) : res);
        return;
    case STEP_ABORT:
        op->started = false;
        if (op->fallback && atomic_load(&c->poison) == 0) {
            user_denied_locked(c, op); /* start over from staging */
            return;
        }
        finish_locked(c, op, op->err != 0 ? op->err : MC_ERR_CANCELED);
        return;
    default:
        finish_locked(c, op, proto_locked(c));
        return;
    }
}

void mc_async_run_copies_locked(struct mc_client *c)
{
    struct mc_op *op;
    struct mc_cqe cqe;
    const uint8_t *obj;
    bool checksum, expired;
    int err;

    while ((op = c->copy_head) != NULL) {
        c->copy_head = op->cp_next;
        op->in_copy = false;
        cqe = op->gcqe;
        checksum = !(cqe.obj_flags & MC_PUT_NO_CHECKSUM);
        if (op->canceled) {
            c->ncopies--;
            mc_client_release_locked(c, cqe.lease_id);
            finish_locked(c, op, MC_ERR_CANCELED);
            continue;
        }
        obj = mc_client_get_location(c, &cqe, checksum); /* checked by the CQE hook */
        op->copying = true;
        pthread_mutex_unlock(&c->mu);
        /* an expired lease is not released: the agent ended it, its id may be reused */
        expired = mc_client_now_ms() > cqe.deadline_ms;
        err = expired ? MC_ERR_LEASE_EXPIRED : mc_client_copy_verified(op->dst, obj, cqe.size,
                                                                        checksum);
        if (!expired && err == 0 && mc_client_now_ms() > cqe.deadline_ms) {
            memset(op->dst, 0, (size_t)cqe.size); /* the space may have been reused */
            expired = true;
            err = MC_ERR_LEASE_EXPIRED;
        }
        pthread_mutex_lock(&c->mu);
        op->copying = false;
        c->ncopies--;
        if (!expired)
            mc_client_release_locked(c, cqe.lease_id);
        if (err == MC_ERR_CORRUPT && !op->canceled && cqe.replicas != 0 &&
            cqe.replicas <= MC_SHM_MAX_REPLICAS && !(op->skip >> (cqe.replicas - 1) & 1)) {
            /* that replica's bytes are bad: read another one (DESIGN.md §6) */
            op->skip |= UINT64_C(1) << (cqe.replicas - 1);
            op->next_step = STEP_GET;
            enqueue_locked(c, op);
            continue;
        }
        if (err == 0)
            op->len_out = (size_t)cqe.size;
        finish_locked(c, op, err);
    }
    if (c->aq_head != NULL)
        mc_async_kick_locked(c); /* GETs held back while copies held their leases */
    mc_client_flush_locked(c);
}

void mc_async_arm_locked(struct mc_client *c)
{
    struct mc_shm_ring_ctrl *cq = c->region->cq;

    if (c->reaping || c->efd < 0 || !c->efd_agent)
        return;
    if (c->async_live == 0) {
        /* nobody sleeps on the CQ (no reaper): the agent need not wake anyone */
        atomic_store_explicit(&cq->need_wakeup, 0, memory_order_relaxed);
        return;
    }
    atomic_store_explicit(&cq->need_wakeup, 1, memory_order_seq_cst);
    /* pairs with the agent's fence between its CQ tail store and its need_wakeup load
     * (mc_shm_doorbell_needed): it sees our flag, or we see its CQEs here */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&cq->tail, memory_order_acquire) != c->cq_head)
        efd_signal(c); /* CQEs landed before the flag: nobody else will say so */
}

/* --- expiry and waiting ---------------------------------------------------------------- */

/* Whether op has an SQE in flight that reads the caller's memory. */
static bool reads_caller_memory(const struct mc_op *op)
{
    return op->kind == AOP_PUT && op->src != SRC_STAGING && op->inflight > 0;
}

/* Give op up if the agent stayed silent MC_CLIENT_EXPIRE_GRACE_MS past its deadline, or if
 * it waits in the queue past its deadline. mu held; may free a detached op. */
static void expire_locked(struct mc_client *c, struct mc_op *op, uint64_t now)
{
    if (op->final || op->in_copy || op->copying || now < op->deadline_ns)
        return;
    if (op->inflight == 0) {
        if (op->next_step != STEP_ABORT && op->next_step != STEP_NONE) {
            if (op->started)
                put_fail_locked(c, op, MC_ERR_TIMEOUT);
            else
                finish_locked(c, op, MC_ERR_TIMEOUT);
        }
        return;
    }
    if (now < op->deadline_ns + (uint64_t)MC_CLIENT_EXPIRE_GRACE_MS * 1000000u)
        return;
    /* An SQE that reads the caller's memory and that the agent took is a transfer under
     * way: wait for it (or the agent's death). One still in the SQ means the agent stopped
     * taking work (stopped, hung): give up, as for any op. The SQE carries the absolute
     * deadline (sqe.deadline_ms), so an agent that wakes up later answers it with
     * MC_ERR_TIMEOUT without reading the buffer. */
    if (reads_caller_memory(op)) {
        for (uint32_t i = 0; i < c->nops; i++) {
            if (c->ops[i].aop == op && mc_client_sqe_consumed_locked(c, i))
                return;
        }
    }
    for (uint32_t i = 0; i < c->nops; i++) {
        if (c->ops[i].aop == op)
            mc_client_abandon_locked(c, i);
    }
    op->inflight = 0;
    if (op->started) {
        struct mc_sqe sqe;

        memset(&sqe, 0, sizeof(sqe));
        sqe.opcode = MC_OP_PUT_ABORT;
        sqe.arg0 = op->handle;
        /* best effort: the agent revokes it at its deadline anyway */
        mc_client_submit_detached_locked(c, &sqe);
        mc_client_flush_locked(c);
    }
    finish_locked(c, op, MC_ERR_TIMEOUT);
}

/* The next moment something must be checked for op: its deadline (+ grace). */
static uint64_t next_check_ns(const struct mc_op *op, uint64_t now)
{
    uint64_t t = op->deadline_ns;

    if (now >= t)
        t = op->deadline_ns + (uint64_t)MC_CLIENT_EXPIRE_GRACE_MS * 1000000u;
    if (now >= t)
        t = now + (uint64_t)MC_CLIENT_LIVENESS_MS * 1000000u;
    return t;
}

/* Wait until *left is 0 (a batch's or one op's count of ops not final), mu held. */
static void wait_ops_locked(struct mc_client *c, struct mc_op *ops, size_t n, uint32_t *left)
{
    uint64_t now, until;

    mc_async_kick_locked(c);
    while (*left > 0) {
        poison_all_locked(c);
        if (*left == 0)
            break;
        now = mc_client_now_ns();
        until = UINT64_MAX;
        for (size_t i = 0; i < n; i++) {
            if (ops[i].final)
                continue;
            expire_locked(c, &ops[i], now);
            if (!ops[i].final && next_check_ns(&ops[i], now) < until)
                until = next_check_ns(&ops[i], now);
        }
        if (*left == 0)
            break;
        (void)mc_client_wait_round_locked(c, until);
        mc_async_kick_locked(c);
    }
}

/* --- op set-up --------------------------------------------------------------------------- */

static void op_init(struct mc_client *c, struct mc_op *op, uint8_t kind, const char *key,
                    size_t key_len, uint64_t deadline)
{
    op->c = c;
    op->kind = kind;
    op->deadline_ns = deadline;
    op->key_len = (uint16_t)key_len;
    memcpy(op->key, key, key_len);
}

static void put_init(struct mc_client *c, struct mc_op *op, const void *buf, size_t len,
                     const mc_put_opts_t *o)
{
    uint32_t id;
    uint64_t off;

    op->src_buf = buf;
    op->len = len;
    if (o != NULL) {
        op->put_flags = o->flags;
        op->replicas = o->replicas;
        op->ttl_ms = o->ttl_ms;
        if (o->replicas > MC_SHM_MAX_REPLICAS)
            op->init_err = MC_ERR_NO_SPACE; /* as mc_put: cannot be placed */
    }
    if (mc_arena_find(c, buf, len, &id, &off)) {
        op->src = SRC_ARENA;
        op->arena_ref = ((uint64_t)id << MC_SHM_ARENA_SHIFT) | off;
    } else if (len > c->slot_size && atomic_load(&c->user_ok)) {
        op->src = SRC_USER;
    } else {
        op->src = SRC_STAGING;
    }
    put_begin(c, op);
    mc_arena_use(c, &op->use, buf, len);
}

/* Queue a set-up op, mu held (the caller kicks). */
static void op_start_locked(struct mc_client *c, struct mc_op *op)
{
    all_link_locked(c, op);
    if (!op->internal)
        c->async_live++;
    if (op->init_err != 0)
        finish_locked(c, op, op->init_err);
    else
        enqueue_locked(c, op);
}

/* Collect a finished internal op: its status, and take it off the lists. mu held. */
static int op_collect_locked(struct mc_client *c, struct mc_op *op)
{
    mc_arena_unuse(c, &op->use);
    all_unlink_locked(c, op);
    return op->status;
}

/* --- synchronous put of caller memory (ops.c's mc_put for arena and user-memory data) --- */

bool mc_client_put_is_direct(struct mc_client *c, const void *buf, size_t len)
{
    return mc_arena_find(c, buf, len, NULL, NULL) ||
           (len > c->slot_size && atomic_load(&c->user_ok));
}

int mc_client_put_direct(struct mc_client *c, const char *key, size_t key_len, const void *buf,
                         size_t len, const mc_put_opts_t *o, uint64_t deadline)
{
    struct mc_op *op = calloc(1, sizeof(*op));
    uint32_t left = 1;
    int err;

    if (op == NULL)
        return MC_ERR_NOMEM;
    op_init(c, op, AOP_PUT, key, key_len, deadline);
    op->internal = true;
    op->batch_left = &left;
    put_init(c, op, buf, len, o);
    pthread_mutex_lock(&c->mu);
    op_start_locked(c, op);
    wait_ops_locked(c, op, 1, &left);
    err = op_collect_locked(c, op);
    pthread_mutex_unlock(&c->mu);
    free(op);
    return err;
}

/* --- async API --------------------------------------------------------------------------- */

static int async_new(struct mc_client *c, struct mc_op **op_p)
{
    struct mc_op *op;
    int err = mc_client_enter(c);

    if (err != 0)
        return err;
    op = calloc(1, sizeof(*op));
    if (op == NULL)
        return MC_ERR_NOMEM;
    *op_p = op;
    return 0;
}

/* Queue op and submit what can be now; mu taken here. */
static int async_submit(struct mc_client *c, struct mc_op *op)
{
    int err;

    pthread_mutex_lock(&c->mu);
    err = atomic_load(&c->poison);
    if (err == 0 && c->async_live >= MC_CLIENT_ASYNC_MAX)
        err = MC_ERR_NOMEM;
    if (err != 0) {
        pthread_mutex_unlock(&c->mu);
        mc_arena_unuse(c, &op->use);
        free(op);
        return err;
    }
    op_start_locked(c, op);
    mc_async_kick_locked(c);
    mc_async_arm_locked(c);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

MC_EXPORT int mc_get_async(mc_client_t *c, const char *key, void *buf, size_t cap, mc_op_t **op_p)
{
    struct mc_op *op;
    size_t key_len;
    int err;

    if (c == NULL || op_p == NULL || (buf == NULL && cap > 0))
        return MC_ERR_INVALID;
    err = mc_client_key_check(key, &key_len);
    if (err != 0)
        return err;
    err = async_new(c, &op);
    if (err != 0)
        return err;
    op_init(c, op, AOP_GET, key, key_len, mc_client_deadline(c));
    op->dst = buf;
    op->cap = cap;
    op->next_step = STEP_GET;
    if (cap > 0)
        mc_arena_use(c, &op->use, buf, cap);
    err = async_submit(c, op);
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
    err = mc_client_key_check(key, &key_len);
    if (err != 0)
        return err;
    err = mc_client_opts_check(o);
    if (err != 0 && err != MC_ERR_NO_SPACE) /* NO_SPACE is the op's outcome (put_init) */
        return err;
    err = async_new(c, &op);
    if (err != 0)
        return err;
    op_init(c, op, AOP_PUT, key, key_len, mc_client_deadline(c));
    put_init(c, op, buf, len, o);
    err = async_submit(c, op);
    if (err == 0)
        *op_p = op;
    return err;
}

MC_EXPORT int mc_wait(mc_op_t *op, int timeout_ms, size_t *len_out)
{
    struct mc_client *c;
    uint64_t now, until, check;
    int status;

    if (op == NULL)
        return MC_ERR_INVALID;
    c = op->c;
    pthread_mutex_lock(&c->mu);
    op->waiters++;
    now = mc_client_now_ns();
    until = timeout_ms < 0 ? UINT64_MAX : now + (uint64_t)timeout_ms * 1000000u;
    if (timeout_ms == 0) {
        /* only checks: reap what is there without sleeping. Also when op is final already:
         * this is the call an event loop makes when the eventfd is readable, and reaping
         * is what empties the eventfd (another thread may have finished op and left the
         * descriptor readable for it). */
        mc_client_poll_locked(c);
        mc_async_kick_locked(c);
    }
    for (;;) {
        poison_all_locked(c);
        if (op->final)
            break;
        now = mc_client_now_ns();
        expire_locked(c, op, now);
        if (op->final || timeout_ms == 0)
            break;
        if (now >= until)
            break;
        check = next_check_ns(op, now);
        (void)mc_client_wait_round_locked(c, check < until ? check : until);
        mc_async_kick_locked(c);
    }
    op->waiters--;
    if (!op->final) {
        mc_async_arm_locked(c);
        pthread_mutex_unlock(&c->mu);
        return MC_INPROGRESS;
    }
    status = op->status;
    /* reported final: the buffer is the caller's again (mc_buf_free may free it) */
    op->reported = true;
    mc_arena_unuse(c, &op->use);
    if (len_out != NULL &&
        (status == 0 || (op->kind == AOP_GET && status == MC_ERR_TOO_LARGE)))
        *len_out = op->len_out;
    mc_async_arm_locked(c);
    pthread_mutex_unlock(&c->mu);
    return status;
}

/* Cancel op, mu held (mc_cancel, mc_op_free). */
static void cancel_locked(struct mc_client *c, struct mc_op *op)
{
    if (op->final || op->canceled)
        return;
    op->canceled = true;
    if (op->in_copy || op->copying)
        return; /* the copier decides: canceled before the copy, or finished first */
    if (op->inflight == 0) {
        /* not submitted (or between steps): dropped now, or aborted if started */
        if (op->kind == AOP_PUT && op->started)
            put_fail_locked(c, op, MC_ERR_CANCELED);
        else
            finish_locked(c, op, MC_ERR_CANCELED);
        mc_async_kick_locked(c);
    }
    /* else: its steps in flight complete, then the CQE hook sees the flag */
    pthread_cond_broadcast(&c->cv);
}

MC_EXPORT int mc_cancel(mc_op_t *op)
{
    struct mc_client *c;

    if (op == NULL)
        return MC_ERR_INVALID;
    c = op->c;
    pthread_mutex_lock(&c->mu);
    cancel_locked(c, op);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

MC_EXPORT void mc_op_free(mc_op_t *op)
{
    struct mc_client *c;

    if (op == NULL)
        return;
    c = op->c;
    pthread_mutex_lock(&c->mu);
    if (op->final) {
        op_destroy_locked(c, op);
    } else {
        op->detached = true; /* before the cancel: it may finish (and free) the op */
        cancel_locked(c, op);
    }
    pthread_mutex_unlock(&c->mu);
}

MC_EXPORT int mc_client_eventfd(mc_client_t *c)
{
    int err;

    if (c == NULL)
        return MC_ERR_INVALID;
    err = mc_client_enter(c);
    if (err != 0)
        return err;
    /* without an agent that writes it, the descriptor would never turn readable */
    if (c->efd < 0 || !c->efd_agent)
        return MC_ERR_IO;
    return c->efd;
}

void mc_async_reap(struct mc_client *c)
{
    struct mc_op *op, *next;
    uint64_t now;

    pthread_mutex_lock(&c->mu);
    poison_all_locked(c);
    mc_client_poll_locked(c);
    mc_async_kick_locked(c);
    /* ops freed unfinished have no mc_wait left to give them up at their deadline */
    now = mc_client_now_ns();
    for (op = c->all; op != NULL; op = next) {
        next = op->all_next; /* expire_locked may free op (detached), nothing else */
        expire_locked(c, op, now);
    }
    poison_all_locked(c); /* the poll may have found the agent gone */
    mc_async_arm_locked(c);
    pthread_mutex_unlock(&c->mu);
}

MC_EXPORT int mc_client_poll(mc_client_t *c)
{
    if (c == NULL)
        return MC_ERR_INVALID;
    mc_async_reap(c);
    return atomic_load(&c->poison);
}

void mc_async_close(struct mc_client *c)
{
    struct mc_op *op, *next;
    uint32_t left;

    pthread_mutex_lock(&c->mu);
    for (op = c->all; op != NULL; op = next) {
        next = op->all_next;
        cancel_locked(c, op);
    }
    /* wait until every op is final: transfers under way may still read caller memory */
    for (;;) {
        poison_all_locked(c);
        left = 0;
        for (op = c->all; op != NULL; op = next) {
            next = op->all_next;
            if (!op->final) {
                expire_locked(c, op, mc_client_now_ns());
                left += !op->final;
            }
        }
        if (left == 0)
            break;
        (void)mc_client_wait_round_locked(
            c, mc_client_now_ns() + (uint64_t)MC_CLIENT_LIVENESS_MS * 1000000u);
        mc_async_kick_locked(c);
    }
    while ((op = c->all) != NULL)
        op_destroy_locked(c, op);
    pthread_mutex_unlock(&c->mu);
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
    uint32_t left = 0;
    int err, good = 0;

    err = mc_client_enter(c);
    if (err != 0)
        return err;
    ops = calloc(n, sizeof(*ops));
    if (ops == NULL)
        return MC_ERR_NOMEM;
    deadline = mc_client_deadline(c);
    for (size_t i = 0; i < n; i++) {
        ops[i].c = c;
        ops[i].internal = true;
        ops[i].deadline_ns = deadline;
        ops[i].batch_left = &left;
        err = init(c, &ops[i], i, arg);
        if (err != 0) {
            ops[i].final = true;
            ops[i].status = err;
            ops[i].batch_left = NULL;
        }
    }
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < n; i++) {
        if (!ops[i].final) {
            left++;
            op_start_locked(c, &ops[i]);
        }
    }
    wait_ops_locked(c, ops, n, &left); /* kicks first: one publish, one doorbell */
    for (size_t i = 0; i < n; i++) {
        if (ops[i].linked)
            results[i] = op_collect_locked(c, &ops[i]);
        else
            results[i] = ops[i].status;
        good += results[i] >= 0;
    }
    pthread_mutex_unlock(&c->mu);
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
    err = mc_client_key_check(a->keys[i], &key_len);
    if (err != 0)
        return err;
    if (a->opts_err != 0 && a->opts_err != MC_ERR_NO_SPACE)
        return a->opts_err;
    op_init(c, op, AOP_PUT, a->keys[i], key_len, op->deadline_ns);
    put_init(c, op, a->bufs[i], a->lens[i], a->o);
    return 0;
}

MC_EXPORT int mc_batch_put(mc_client_t *c, size_t n, const char *const keys[],
                           const void *const bufs[], const size_t lens[], const mc_put_opts_t *o,
                           int results[])
{
    struct batch_put_arg a = {keys, bufs, lens, o, 0};

    if (c == NULL || (n > 0 && (keys == NULL || bufs == NULL || lens == NULL || results == NULL)))
        return MC_ERR_INVALID;
    if (n > INT_MAX)
        return MC_ERR_INVALID;
    if (n == 0)
        return 0;
    a.opts_err = mc_client_opts_check(o);
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
    err = mc_client_key_check(a->keys[i], &key_len);
    if (err != 0)
        return err;
    op_init(c, op, AOP_GET, a->keys[i], key_len, op->deadline_ns);
    op->dst = a->bufs[i];
    op->cap = a->caps[i];
    op->next_step = STEP_GET;
    if (op->cap > 0)
        mc_arena_use(c, &op->use, op->dst, op->cap);
    return 0;
}

MC_EXPORT int mc_batch_get(mc_client_t *c, size_t n, const char *const keys[],
                           void *const bufs[], const size_t caps[], size_t lens[], int results[])
{
    struct batch_get_arg a = {keys, bufs, caps};
    struct mc_op *ops;
    int good;

    if (c == NULL || (n > 0 && (keys == NULL || bufs == NULL || caps == NULL || results == NULL)))
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

    err = mc_client_key_check(keys[i], &key_len);
    if (err != 0)
        return err;
    op_init(c, op, AOP_EXIST, keys[i], key_len, op->deadline_ns);
    op->next_step = STEP_EXIST;
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
        if (mc_client_key_check(keys[i], &key_len) != 0)
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
