/*
 * The op rules (op.h): GET, PUT and EXIST as state machines under the engine's mu, for the
 * synchronous and the asynchronous calls alike. Not the ring mechanics (engine.c), not the
 * arenas (arena.c), not the argument checks of each public call (sync.c, async.c).
 *
 * A batch is n internal ops queued under one lock hold and pumped once: every SQE that
 * fits is written, the SQ tail published once and the doorbell rung once; the rest follow
 * in waves as slots come back.
 *
 * A GET's bytes are copied and verified by the thread that reaped its CQE (or any thread
 * that waits next), without the lock: the op sits in c->copy_head meanwhile, then is
 * "copying", and nothing else finishes it. Every location the agent names is checked
 * against the segment mapping first, since the agent is trusted less than nothing: a bad
 * one poisons the client (MC_ERR_PROTO), it never makes libmc read outside its mappings.
 * A replica whose bytes fail the checksum is skipped and the next one read: MC_ERR_CORRUPT
 * only when none is intact.
 *
 * A put's staging copy is made under the lock, at most one staging slot (1 MiB by default)
 * at a time: simpler than handing slots out and back, and bounded; a put that needs no copy
 * (arena, user memory) makes none.
 *
 * An op whose SQE names the caller's memory is final only when the agent answered (or is
 * gone); others are given up MC_CLIENT_EXPIRE_GRACE_MS after their deadline if the agent
 * stays silent (a synchronous call's at its deadline), and what their steps left behind
 * (a lease, a started put) is undone when the late CQE arrives (op_done with no owner).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libmc/op.h"
#include "shm/checksum.h"
#include "shm/sqe_check.h"

/* --- checks and GET bytes --------------------------------------------------------- */

enum op_src { SRC_STAGING, SRC_ARENA, SRC_USER, SRC_DEV };

/* The key's length if it is valid (1 .. MC_KEY_MAX bytes), else MC_ERR_INVALID. */
int mc_op_key_check(const char *key, size_t *len_p)
{
    size_t n;

    if (key == NULL)
        return MC_ERR_INVALID;
    n = strnlen(key, MC_KEY_MAX + 1);
    if (n == 0 || n > MC_KEY_MAX)
        return MC_ERR_INVALID;
    *len_p = n;
    return 0;
}

/* Put options: MC_ERR_INVALID for unknown flags, both pins or reserved fields set;
 * MC_ERR_NO_SPACE for more replicas than the ring ABI carries (mc.h: they cannot be
 * placed), answered here because the agent counts such an SQE as a protocol violation. */
int mc_op_opts_check(const mc_put_opts_t *o)
{
    if (o == NULL)
        return 0;
    if ((o->flags & ~(uint32_t)(MC_PUT_FLAGS_ALL | MC_PUT_EXISTS_OK)) != 0)
        return MC_ERR_INVALID;
    if ((o->flags & MC_PUT_PIN_SOFT) && (o->flags & MC_PUT_PIN_HARD))
        return MC_ERR_INVALID;
    for (size_t i = 0; i < sizeof(o->reserved) / sizeof(o->reserved[0]); i++) {
        if (o->reserved[i] != 0)
            return MC_ERR_INVALID;
    }
    if (o->ttl_ms > MC_TTL_MAX_MS)
        return MC_ERR_INVALID; /* refused rather than capped: the caller asked for more */
    if (o->replicas > MC_SHM_MAX_REPLICAS)
        return MC_ERR_NO_SPACE;
    return 0;
}

static uint64_t load_u64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v)); /* the trailer need not be 8-aligned in the segment */
    return v;
}

#define COPY_SLICE (256u << 10)

/*
 * Copy an object from its segment into buf, verifying each MC_SHM_CHUNK chunk right after
 * copying it (hashing our copy, hot in cache, rather than the segment twice), then the
 * object checksum over the stored chunk values. On a mismatch the bytes written so far are
 * zeroed, so the caller's buffer never holds bytes that failed verification.
 */
static int copy_verified(uint8_t *buf, const uint8_t *obj, uint64_t size, bool checksum)
{
    const uint8_t *trailer = obj + mc_shm_trailer_off(size);
    uint64_t nchunks = mc_shm_nchunks(size);
    XXH3_state_t *xs = NULL;
    uint64_t off = 0, n;

    if (!checksum) {
        memcpy(buf, obj, (size_t)size);
        return 0;
    }
    if (nchunks > 1) {
        xs = XXH3_createState();
        if (xs == NULL)
            return MC_ERR_NOMEM;
    }
    for (uint64_t i = 0; i < nchunks; i++, off += n) {
        uint64_t h;

        n = size - off < MC_SHM_CHUNK ? size - off : MC_SHM_CHUNK;
        if (xs == NULL) {
            memcpy(buf + off, obj + off, (size_t)n);
            h = XXH3_64bits(buf + off, (size_t)n);
        } else {
            /* copy and hash a slice at a time, while the slice is still in L2: hashing a
             * whole 1 MiB chunk after copying it reads it back from L3 (docs/performance.md) */
            XXH3_64bits_reset(xs);
            for (uint64_t s = 0; s < n; s += COPY_SLICE) {
                size_t k = (size_t)(n - s < COPY_SLICE ? n - s : COPY_SLICE);

                memcpy(buf + off + s, obj + off + s, k);
                XXH3_64bits_update(xs, buf + off + s, k);
            }
            h = XXH3_64bits_digest(xs);
        }
        if (h != load_u64(trailer + 8 * i)) {
            XXH3_freeState(xs);
            memset(buf, 0, (size_t)(off + n));
            return MC_ERR_CORRUPT;
        }
    }
    XXH3_freeState(xs);
    if (XXH3_64bits(trailer, (size_t)(8 * nchunks)) != load_u64(trailer + 8 * nchunks)) {
        memset(buf, 0, (size_t)size);
        return MC_ERR_CORRUPT;
    }
    return 0;
}

/*
 * An object the agent received straight into our arena buffer: its checksum trailer after
 * it (MC_SHM_LOC_IN_PLACE), or in the landing block of the answer's lease
 * (MC_CQE_F_TAIL_APART): verified in place like a copy (copy_verified); on a mismatch the
 * object's bytes are zeroed, so the buffer never holds bytes that failed verification.
 */
static int verify_in_place(uint8_t *buf, uint64_t size, const uint8_t *trailer)
{
    if (trailer == NULL)
        return 0; /* stored without checksums */
    if (!mc_shm_verify(buf, size, trailer)) {
        memset(buf, 0, (size_t)size);
        return MC_ERR_CORRUPT;
    }
    return 0;
}

/* A GET's answer (in place, or a lease on a segment) goes to the copier thread: it copies or
 * verifies the bytes, then ends the op. c->mu held. */
static void copy_queue_locked(struct mc_client *c, struct mc_op *op, const struct mc_cqe *cqe)
{
    op->gcqe = *cqe;
    op->in_copy = true;
    op->cp_next = c->copy_head;
    c->copy_head = op;
    c->ncopies++;
}

/* Whether an in-place GET answer fits what op asked for (an agent that names more is
 * broken: its answer is not trusted). */
static bool in_place_ok(const struct mc_op *op, const struct mc_cqe *cqe, bool checksum)
{
    return op->src == SRC_ARENA && !op->dst_dev && cqe->size <= op->cap &&
           mc_shm_alloc_len(cqe->size, checksum) <= op->cap;
}

/* The rest of the image of a MC_CQE_F_TAIL_APART answer (from byte size on) inside our
 * mapping of its segment, or NULL if the answer cannot be ours: only an arena GET of an
 * object with checksums that fits the buffer is answered so. */
static const uint8_t *tail_location(const struct mc_client *c, const struct mc_op *op,
                                    const struct mc_cqe *cqe)
{
    uint64_t seg_size, tail;

    if (op->src != SRC_ARENA || op->dst_dev || (cqe->obj_flags & MC_PUT_NO_CHECKSUM) ||
        cqe->size == 0 || cqe->size > op->cap || cqe->loc_seg >= c->e.nsegs)
        return NULL;
    seg_size = c->e.seg_size[cqe->loc_seg];
    tail = mc_shm_alloc_len(cqe->size, true) - cqe->size; /* size <= cap: no overflow */
    if (tail > seg_size || cqe->loc_off > seg_size - tail)
        return NULL;
    return c->e.seg[cqe->loc_seg] + cqe->loc_off;
}

/* The object of a GET CQE inside our mapping of its segment, or NULL if the agent named a
 * place outside it. */
static const uint8_t *get_location(struct mc_client *c, const struct mc_cqe *cqe, bool checksum)
{
    uint64_t seg_size, alloc;

    if (cqe->loc_seg >= c->e.nsegs)
        return NULL;
    seg_size = c->e.seg_size[cqe->loc_seg];
    /* size <= seg_size first, so that mc_shm_alloc_len cannot overflow */
    if (cqe->size == 0 || cqe->size > seg_size || cqe->loc_off > seg_size)
        return NULL;
    alloc = mc_shm_alloc_len(cqe->size, checksum);
    if (alloc > seg_size - cqe->loc_off)
        return NULL;
    return c->e.seg[cqe->loc_seg] + cqe->loc_off;
}

/*
 * Copy an object from its segment into a device buffer: the stored checksums are verified
 * over the segment's bytes first (device memory is not for the host to hash), then one
 * host-to-device copy, waited for, so the op is final only once no copy touches buf.
 */
static int copy_to_device(struct mc_client *c, uint8_t *buf, const uint8_t *obj,
                          uint64_t size, bool checksum)
{
    if (checksum) {
        const uint8_t *trailer = obj + mc_shm_trailer_off(size);
        uint64_t nchunks = mc_shm_nchunks(size), off = 0;

        for (uint64_t i = 0; i < nchunks; i++) {
            uint64_t n = size - off < MC_SHM_CHUNK ? size - off : MC_SHM_CHUNK;

            if (XXH3_64bits(obj + off, (size_t)n) != load_u64(trailer + 8 * i))
                return MC_ERR_CORRUPT;
            off += n;
        }
    }
    return mc_devbuf_copy_in(&c->d, buf, obj, (size_t)size);
}

enum op_step {
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

static void kick_locked(struct mc_client *c);
static void expire_locked(struct mc_client *c, struct mc_op *op, uint64_t now);
static mc_engine_done_fn op_done;

/* The client an engine belongs to: the engine is its first member. */
static struct mc_client *client_of(struct mc_engine *e)
{
    return (struct mc_client *)(void *)e;
}

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
    mc_arena_unuse(&c->a, &op->use);
    all_unlink_locked(c, op);
    free(op->bounce); /* NULL once final; an op destroyed otherwise may still hold it */
    free(op);
}

/* Wake the caller's event loop: the eventfd is ours too, so libmc may make it readable. */
static void efd_signal(struct mc_client *c)
{
    uint64_t one = 1;

    if (c->e.efd >= 0)
        (void)write(c->e.efd, &one, sizeof(one)); /* EAGAIN only at 2^64-2: already readable */
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
    if (op->kind == MC_OP_KIND_PUT && status == 0)
        op->len_out = op->len;
    if (op->kind == MC_OP_KIND_PUT && status == MC_ERR_EXISTS && op->exists_ok)
        op->status = MC_PRESENT; /* the caller asked: already there counts as stored */
    if (!op->internal)
        c->async_live--;
    free(op->bounce); /* final: nothing reads it any more */
    op->bounce = NULL;
    if (op->batch_left != NULL)
        (*op->batch_left)--;
    pthread_cond_broadcast(&c->e.cv);
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
    size_t one = op->src == SRC_STAGING ? c->e.slot_size : MC_CLIENT_DIRECT_ONE;

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
    case SRC_DEV:
        sqe->flags = MC_SQE_F_DEV;
        sqe->data_off = op->arena_ref + off; /* a device buffer id in place of an arena's */
        return true;
    default:
        if (!mc_engine_staging_try_get_locked(&c->e, &slot))
            return false;
        memcpy(mc_engine_staging_ptr(&c->e, slot), op->src_buf + off, n);
        sqe->data_off = mc_engine_staging_off(&c->e, slot);
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

    err = mc_engine_submit_locked(&c->e, sqe, with_key ? op->key : NULL,
                                  with_key ? op->key_len : 0, staging, op_done, op, step,
                                  deadline, &slot);
    if (err == 0) {
        op->inflight++;
        return 0;
    }
    if (staging >= 0)
        mc_engine_staging_put_locked(&c->e, (uint32_t)staging);
    if (err != MC_ERR_BUSY)
        finish_locked(c, op, err);
    return err;
}

/* Submit what op can submit now; see enum pump_result. mu held, c->kicking set. */
static enum pump_result pump_locked(struct mc_client *c, struct mc_op *op)
{
    uint64_t now = mc_engine_now_ns();
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

        if (op->kind == MC_OP_KIND_PUT && op->inflight + (op->started ? 1u : 0u) > 0) {
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
        if (op->next_step == STEP_GET && c->ncopies + (c->e.nops - c->e.nops_free) >= c->e.nops)
            return PUMP_BLOCKED;
        sqe.opcode = op->next_step == STEP_GET ? MC_OP_GET
                     : op->key_opcode != 0        ? op->key_opcode
                                                  : MC_OP_EXIST;
        if (op->next_step == STEP_GET) {
            sqe.arg0 = op->skip;
            sqe.arg1 = (uint64_t)op->cap + 1; /* a remote object that cannot fit stays */
            if (op->src == SRC_ARENA) {
                /* the agent may receive a peer's bytes straight into it (arena_reads),
                 * the checksum trailer apart when the buffer has no room for it */
                sqe.flags = MC_SQE_F_ARENA | MC_SQE_F_TAIL_APART;
                sqe.data_off = op->arena_ref;
                sqe.data_len = op->cap;
            }
        } else {
            sqe.arg0 = op->key_arg;
            sqe.arg1 = op->key_arg1;
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
        if (op->src == SRC_ARENA)
            sqe.flags = MC_SQE_F_ARENA_DATA; /* every piece from the arena: sent from there */
        err = step_submit_locked(c, op, &sqe, true, -1, STEP_START, op->deadline_ns);
        break;
    case STEP_DATA:
        psize = op->src == SRC_STAGING ? c->e.slot_size : MC_CLIENT_DIRECT_PIECE;
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
        err = step_submit_locked(c, op, &sqe, false, -1, STEP_ABORT, mc_engine_deadline(&c->e));
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
    int err = atomic_load(&c->e.poison);
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
        for (uint32_t i = 0; i < c->e.nops; i++) {
            if (c->e.ops[i].owner == op)
                mc_engine_abandon_locked(&c->e, i);
        }
        op->inflight = 0;
        finish_locked(c, op, err);
    }
}

static void kick_locked(struct mc_client *c)
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
    mc_engine_flush_locked(&c->e);
}

/* --- completions ----------------------------------------------------------------------- */

static int proto_locked(struct mc_client *c)
{
    mc_engine_poison_locked(&c->e, MC_ERR_PROTO);
    return MC_ERR_PROTO;
}

/*
 * The step of an op without an owner came back: the owner gave it up (its deadline, the
 * poison) while it was in flight. Undo what the step left at the agent: a GET's lease, a
 * started put (best effort: the agent revokes both at their deadline anyway).
 */
static void orphan_done_locked(struct mc_client *c, uint32_t tag, const struct mc_cqe *cqe)
{
    struct mc_sqe sqe;

    if (cqe->res != 0)
        return;
    if (tag == STEP_GET) {
        if (cqe->loc_seg != MC_SHM_LOC_IN_PLACE) /* in place: no lease to release */
            mc_engine_release_locked(&c->e, cqe->lease_id);
    } else if (tag == STEP_START) {
        memset(&sqe, 0, sizeof(sqe));
        sqe.opcode = MC_OP_PUT_ABORT;
        sqe.arg0 = cqe->lease_id;
        mc_engine_submit_detached_locked(&c->e, &sqe);
    }
}

/* An op's step came back (the engine's completion function, mu held). */
static void op_done(struct mc_engine *e, void *owner, uint32_t tag, const struct mc_cqe *cqe)
{
    struct mc_client *c = client_of(e);
    struct mc_op *op = owner;
    int32_t res = cqe->res;

    if (op == NULL) {
        orphan_done_locked(c, tag, cqe);
        return;
    }
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
        if (cqe->obj_flags & MC_CQE_F_TAIL_APART) {
            /* the bytes are in our buffer already, their trailer under a lease */
            if (tail_location(c, op, cqe) == NULL) {
                finish_locked(c, op, proto_locked(c)); /* a lease we cannot trust */
                return;
            }
            if (op->canceled) {
                mc_engine_release_locked(&c->e, cqe->lease_id);
                finish_locked(c, op, MC_ERR_CANCELED);
                return;
            }
            copy_queue_locked(c, op, cqe);
            return;
        }
        if (cqe->loc_seg == MC_SHM_LOC_IN_PLACE) {
            /* the bytes are in our buffer already, no lease: verified by the copier */
            if (!in_place_ok(op, cqe, checksum)) {
                finish_locked(c, op, proto_locked(c));
                return;
            }
            if (op->canceled) {
                finish_locked(c, op, MC_ERR_CANCELED);
                return;
            }
            copy_queue_locked(c, op, cqe);
            return;
        }
        if (get_location(c, cqe, checksum) == NULL) {
            finish_locked(c, op, proto_locked(c)); /* a lease we cannot trust: not released */
            return;
        }
        if (op->canceled) {
            mc_engine_release_locked(&c->e, cqe->lease_id);
            finish_locked(c, op, MC_ERR_CANCELED);
            return;
        }
        if (cqe->size > op->cap) {
            mc_engine_release_locked(&c->e, cqe->lease_id);
            op->len_out = (size_t)cqe->size;
            finish_locked(c, op, MC_ERR_TOO_LARGE);
            return;
        }
        copy_queue_locked(c, op, cqe);
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
        if (op->fallback && atomic_load(&c->e.poison) == 0) {
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

static void run_copies_locked(struct mc_client *c)
{
    struct mc_op *op;
    struct mc_cqe cqe;
    const uint8_t *obj;
    bool checksum, expired, in_place, tail_apart;
    int err;

    while ((op = c->copy_head) != NULL) {
        c->copy_head = op->cp_next;
        op->in_copy = false;
        cqe = op->gcqe;
        checksum = !(cqe.obj_flags & MC_PUT_NO_CHECKSUM);
        tail_apart = (cqe.obj_flags & MC_CQE_F_TAIL_APART) != 0;
        in_place = !tail_apart && cqe.loc_seg == MC_SHM_LOC_IN_PLACE;
        if (op->canceled) {
            c->ncopies--;
            if (!in_place)
                mc_engine_release_locked(&c->e, cqe.lease_id);
            finish_locked(c, op, MC_ERR_CANCELED);
            continue;
        }
        /* checked by the CQE hook */
        obj = in_place     ? NULL
              : tail_apart ? tail_location(c, op, &cqe)
                           : get_location(c, &cqe, checksum);
        op->copying = true;
        pthread_mutex_unlock(&c->e.mu);
        /* an expired lease is not released: the agent ended it, its id may be reused */
        expired = !in_place && mc_engine_now_ms() > cqe.deadline_ms;
        if (in_place) /* no lease: nothing expires */
            err = verify_in_place(op->dst, cqe.size,
                                  checksum ? (const uint8_t *)op->dst +
                                                 mc_shm_trailer_off(cqe.size)
                                           : NULL);
        else if (expired)
            err = MC_ERR_LEASE_EXPIRED;
        else if (tail_apart) /* the trailer in the lease's block, a copy's deadline after */
            err = verify_in_place(op->dst, cqe.size,
                                  obj + (mc_shm_trailer_off(cqe.size) - cqe.size));
        else if (op->dst_dev)
            err = copy_to_device(c, op->dst, obj, cqe.size, checksum);
        else
            err = copy_verified(op->dst, obj, cqe.size, checksum);
        if (!in_place && !expired && err == 0 && mc_engine_now_ms() > cqe.deadline_ms) {
            /* the space may have been reused: host bytes are zeroed, device bytes are
             * unspecified (as after a cancel) */
            if (!op->dst_dev)
                memset(op->dst, 0, (size_t)cqe.size);
            expired = true;
            err = MC_ERR_LEASE_EXPIRED;
        }
        pthread_mutex_lock(&c->e.mu);
        op->copying = false;
        c->ncopies--;
        if (!expired && !in_place)
            mc_engine_release_locked(&c->e, cqe.lease_id);
        if (err == MC_ERR_CORRUPT && !op->canceled && cqe.replicas != 0 &&
            cqe.replicas <= MC_SHM_MAX_REPLICAS && !(op->skip >> (cqe.replicas - 1) & 1)) {
            /* that replica's bytes are bad: read another one (docs/failure-contract.md) */
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
        kick_locked(c); /* GETs held back while copies held their leases */
    mc_engine_flush_locked(&c->e);
}

static void arm_locked(struct mc_client *c)
{
    struct mc_shm_ring_ctrl *cq = c->e.region->cq;

    if (c->e.reaping || c->e.efd < 0 || !c->e.efd_agent)
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
    if (atomic_load_explicit(&cq->tail, memory_order_acquire) != c->e.cq_head)
        efd_signal(c); /* CQEs landed before the flag: nobody else will say so */
}

/* --- expiry and waiting ---------------------------------------------------------------- */

/* How long past its deadline op waits for a silent agent: a synchronous call that does
 * not name the caller's memory returns at its deadline (mc.h, "Deadlines"): what its steps
 * leave behind is undone when their answers come (orphan_done_locked). */
static uint64_t grace_ns(const struct mc_op *op)
{
    if (op->sync && op->src == SRC_STAGING)
        return 0;
    return (uint64_t)MC_CLIENT_EXPIRE_GRACE_MS * 1000000u;
}

/* Whether op has an SQE in flight that names the caller's memory: a put's source the agent
 * reads, or a GET's arena buffer it may receive a peer's bytes into. */
static bool reads_caller_memory(const struct mc_op *op)
{
    return op->src != SRC_STAGING && op->inflight > 0 &&
           (op->kind == MC_OP_KIND_PUT || (op->kind == MC_OP_KIND_GET && op->src == SRC_ARENA));
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
    if (now < op->deadline_ns + grace_ns(op))
        return;
    /* An SQE that reads the caller's memory and that the agent took is a transfer under
     * way: wait for it (or the agent's death). One still in the SQ means the agent stopped
     * taking work (stopped, hung): give up, as for any op. The SQE carries the absolute
     * deadline (sqe.deadline_ms), so an agent that wakes up later answers it with
     * MC_ERR_TIMEOUT without reading the buffer. */
    if (reads_caller_memory(op)) {
        for (uint32_t i = 0; i < c->e.nops; i++) {
            if (c->e.ops[i].owner == op && mc_engine_sqe_consumed_locked(&c->e, i))
                return;
        }
    }
    for (uint32_t i = 0; i < c->e.nops; i++) {
        if (c->e.ops[i].owner == op)
            mc_engine_abandon_locked(&c->e, i);
    }
    op->inflight = 0;
    if (op->started) {
        struct mc_sqe sqe;

        memset(&sqe, 0, sizeof(sqe));
        sqe.opcode = MC_OP_PUT_ABORT;
        sqe.arg0 = op->handle;
        /* best effort: the agent revokes it at its deadline anyway */
        mc_engine_submit_detached_locked(&c->e, &sqe);
        mc_engine_flush_locked(&c->e);
    }
    op->gave_up = true;
    finish_locked(c, op, MC_ERR_TIMEOUT);
}

/* The next moment something must be checked for op: its deadline (+ grace). */
static uint64_t next_check_ns(const struct mc_op *op, uint64_t now)
{
    uint64_t t = op->deadline_ns;

    if (now >= t)
        t = op->deadline_ns + grace_ns(op);
    if (now >= t)
        t = now + (uint64_t)MC_CLIENT_LIVENESS_MS * 1000000u;
    return t;
}

/* Wait until *left is 0 (a batch's or one op's count of ops not final), mu held. */
static void wait_ops_locked(struct mc_client *c, struct mc_op *ops, size_t n, uint32_t *left)
{
    uint64_t now, until;

    kick_locked(c);
    while (*left > 0) {
        poison_all_locked(c);
        if (*left == 0)
            break;
        now = mc_engine_now_ns();
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
        (void)mc_engine_wait_round_locked(&c->e, until);
        kick_locked(c);
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
        op->put_flags = o->flags & MC_PUT_FLAGS_ALL; /* EXISTS_OK is ours, not the agent's */
        op->exists_ok = (o->flags & MC_PUT_EXISTS_OK) != 0;
        op->replicas = o->replicas;
        op->ttl_ms = o->ttl_ms;
        if (o->replicas > MC_SHM_MAX_REPLICAS)
            op->init_err = MC_ERR_NO_SPACE; /* as mc_put: cannot be placed */
    }
    if (mc_devbuf_is_device(&c->d, buf, len)) {
        /* the agent copies from it: exported and registered once per allocation */
        int err = mc_devbuf_ref(&c->d, c->e.sock, buf, len, &op->arena_ref);

        if (err == MC_ERR_DENIED) {
            /* not exportable (VMM): a host copy of it goes the host way, counted */
            err = mc_devbuf_stage_out(&c->d, buf, len, &op->bounce);
            if (err == 0)
                buf = op->src_buf = op->bounce;
        } else {
            op->src = SRC_DEV;
        }
        if (err != 0 && op->init_err == 0)
            op->init_err = err;
    }
    if (op->src == SRC_DEV || op->init_err != 0) {
        /* set */
    } else if (mc_arena_find(&c->a, buf, len, &id, &off)) {
        op->src = SRC_ARENA;
        op->arena_ref = ((uint64_t)id << MC_SHM_ARENA_SHIFT) | off;
    } else if (len > c->e.slot_size && atomic_load(&c->user_ok)) {
        op->src = SRC_USER;
    } else {
        op->src = SRC_STAGING;
    }
    put_begin(c, op);
    mc_arena_use(&c->a, &op->use, buf, len);
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
    mc_arena_unuse(&c->a, &op->use);
    all_unlink_locked(c, op);
    return op->status;
}

/* --- the engine's hooks --------------------------------------------------------------- */

static void hook_slots_back(struct mc_engine *e)
{
    struct mc_client *c = client_of(e);

    if (c->aq_head != NULL)
        kick_locked(c); /* queued ops may take it (no-op when re-entered) */
}

static void hook_settle(struct mc_engine *e, bool reaper)
{
    struct mc_client *c = client_of(e);

    if (c->copy_head != NULL)
        run_copies_locked(c); /* reaped by this thread or another, not copied yet */
    if (reaper)
        arm_locked(c);
}

const struct mc_engine_hooks mc_op_hooks = {
    .slots_back = hook_slots_back,
    .settle = hook_settle,
};

/* --- set-up and running ------------------------------------------------------------------ */

void mc_op_init_get(struct mc_client *c, struct mc_op *op, const char *key, size_t key_len,
                    void *buf, size_t cap, uint64_t deadline_ns)
{
    uint32_t id;
    uint64_t off;

    op_init(c, op, MC_OP_KIND_GET, key, key_len, deadline_ns);
    op->dst = buf;
    op->cap = cap;
    op->dst_dev = cap > 0 && mc_devbuf_is_device(&c->d, buf, cap);
    if (cap > 0 && !op->dst_dev &&
        (c->e.region->hdr->features & MC_SHM_F_ARENA_GETS) != 0 &&
        mc_arena_find(&c->a, buf, cap, &id, &off)) {
        /* the agent may land a peer's bytes straight in it (it said so in the header):
         * the op is then final only when the agent answers (expire_locked) */
        op->src = SRC_ARENA;
        op->arena_ref = ((uint64_t)id << MC_SHM_ARENA_SHIFT) | off;
    }
    op->next_step = STEP_GET;
    if (cap > 0)
        mc_arena_use(&c->a, &op->use, buf, cap);
}

void mc_op_init_put(struct mc_client *c, struct mc_op *op, const char *key, size_t key_len,
                    const void *buf, size_t len, const mc_put_opts_t *o, uint64_t deadline_ns)
{
    op_init(c, op, MC_OP_KIND_PUT, key, key_len, deadline_ns);
    put_init(c, op, buf, len, o);
}

void mc_op_init_exist(struct mc_client *c, struct mc_op *op, const char *key, size_t key_len,
                      uint64_t deadline_ns)
{
    op_init(c, op, MC_OP_KIND_EXIST, key, key_len, deadline_ns);
    op->next_step = STEP_EXIST;
}

void mc_op_init_key_op(struct mc_client *c, struct mc_op *op, uint8_t opcode, uint64_t arg0,
                       const char *key, size_t key_len, uint64_t deadline_ns)
{
    mc_op_init_exist(c, op, key, key_len, deadline_ns);
    op->key_opcode = opcode;
    op->key_arg = arg0;
}

int mc_op_run(struct mc_client *c, struct mc_op *op)
{
    uint32_t left = 1;
    int err, live;

    op->internal = true;
    op->sync = true;
    op->batch_left = &left;
    pthread_mutex_lock(&c->e.mu);
    op_start_locked(c, op);
    wait_ops_locked(c, op, 1, &left);
    err = op_collect_locked(c, op);
    if (op->gave_up) {
        /* the agent may have died without a reaper noticing yet (no reaper ran) */
        live = mc_engine_liveness(&c->e);
        if (live != 0) {
            mc_engine_poison_locked(&c->e, live);
            err = live;
        }
    }
    pthread_mutex_unlock(&c->e.mu);
    return err;
}

int mc_op_run_batch(struct mc_client *c, struct mc_op *ops, size_t n, int results[])
{
    uint32_t left = 0;
    int good = 0;

    pthread_mutex_lock(&c->e.mu);
    for (size_t i = 0; i < n; i++) {
        if (!ops[i].final) {
            ops[i].internal = true;
            ops[i].batch_left = &left;
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
    pthread_mutex_unlock(&c->e.mu);
    return good;
}

int mc_op_submit(struct mc_client *c, struct mc_op *op)
{
    int err;

    pthread_mutex_lock(&c->e.mu);
    err = atomic_load(&c->e.poison);
    if (err == 0 && c->async_live >= MC_CLIENT_ASYNC_MAX)
        err = MC_ERR_NOMEM;
    if (err != 0) {
        pthread_mutex_unlock(&c->e.mu);
        mc_arena_unuse(&c->a, &op->use);
        free(op->bounce);
        free(op);
        return err;
    }
    op_start_locked(c, op);
    kick_locked(c);
    arm_locked(c);
    pthread_mutex_unlock(&c->e.mu);
    return 0;
}

/* --- waiting, canceling, reaping (the async API) -------------------------------------- */

int mc_op_wait(struct mc_op *op, int timeout_ms, size_t *len_out)
{
    struct mc_client *c;
    uint64_t now, until, check;
    int status;

    c = op->c;
    pthread_mutex_lock(&c->e.mu);
    op->waiters++;
    now = mc_engine_now_ns();
    until = timeout_ms < 0 ? UINT64_MAX : now + (uint64_t)timeout_ms * 1000000u;
    if (timeout_ms == 0) {
        /* only checks: reap what is there without sleeping. Also when op is final already:
         * this is the call an event loop makes when the eventfd is readable, and reaping
         * is what empties the eventfd (another thread may have finished op and left the
         * descriptor readable for it). */
        mc_engine_poll_locked(&c->e);
        kick_locked(c);
    }
    for (;;) {
        poison_all_locked(c);
        if (op->final)
            break;
        now = mc_engine_now_ns();
        expire_locked(c, op, now);
        if (op->final || timeout_ms == 0)
            break;
        if (now >= until)
            break;
        check = next_check_ns(op, now);
        (void)mc_engine_wait_round_locked(&c->e, check < until ? check : until);
        kick_locked(c);
    }
    op->waiters--;
    if (!op->final) {
        arm_locked(c);
        pthread_mutex_unlock(&c->e.mu);
        return MC_INPROGRESS;
    }
    status = op->status;
    /* reported final: the buffer is the caller's again (mc_buf_free may free it) */
    op->reported = true;
    mc_arena_unuse(&c->a, &op->use);
    if (len_out != NULL &&
        (status == 0 || (op->kind == MC_OP_KIND_GET && status == MC_ERR_TOO_LARGE)))
        *len_out = op->len_out;
    arm_locked(c);
    pthread_mutex_unlock(&c->e.mu);
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
        if (op->kind == MC_OP_KIND_PUT && op->started)
            put_fail_locked(c, op, MC_ERR_CANCELED);
        else
            finish_locked(c, op, MC_ERR_CANCELED);
        kick_locked(c);
    }
    /* else: its steps in flight complete, then the CQE hook sees the flag */
    pthread_cond_broadcast(&c->e.cv);
}

void mc_op_cancel(struct mc_op *op)
{
    struct mc_client *c = op->c;

    pthread_mutex_lock(&c->e.mu);
    cancel_locked(c, op);
    pthread_mutex_unlock(&c->e.mu);
}

void mc_op_free_async(struct mc_op *op)
{
    struct mc_client *c = op->c;

    pthread_mutex_lock(&c->e.mu);
    if (op->final) {
        op_destroy_locked(c, op);
    } else {
        op->detached = true; /* before the cancel: it may finish (and free) the op */
        cancel_locked(c, op);
    }
    pthread_mutex_unlock(&c->e.mu);
}

void mc_op_reap(struct mc_client *c)
{
    struct mc_op *op, *next;
    uint64_t now;

    pthread_mutex_lock(&c->e.mu);
    poison_all_locked(c);
    mc_engine_poll_locked(&c->e);
    kick_locked(c);
    /* ops freed unfinished have no mc_wait left to give them up at their deadline */
    now = mc_engine_now_ns();
    for (op = c->all; op != NULL; op = next) {
        next = op->all_next; /* expire_locked may free op (detached), nothing else */
        expire_locked(c, op, now);
    }
    poison_all_locked(c); /* the poll may have found the agent gone */
    arm_locked(c);
    pthread_mutex_unlock(&c->e.mu);
}

void mc_op_close_all(struct mc_client *c)
{
    struct mc_op *op, *next;
    uint32_t left;

    pthread_mutex_lock(&c->e.mu);
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
                expire_locked(c, op, mc_engine_now_ns());
                left += !op->final;
            }
        }
        if (left == 0)
            break;
        (void)mc_engine_wait_round_locked(
            &c->e, mc_engine_now_ns() + (uint64_t)MC_CLIENT_LIVENESS_MS * 1000000u);
        kick_locked(c);
    }
    while ((op = c->all) != NULL)
        op_destroy_locked(c, op);
    pthread_mutex_unlock(&c->e.mu);
}
