/*
 * libmc's op rules (internal; never installed): what a GET, a PUT and an EXIST do, written
 * once, above the engine (engine.h) and the arenas (arena.h) and below the public calls.
 * Both the synchronous calls (sync.c: submit an op, wait for it with its deadline) and the
 * asynchronous ones (async.c) run these ops; op.c drives them.
 *
 * An op is a small state machine driven under the engine's mu: "pump" submits its next
 * step(s) when op and staging slots are free (without waiting: an op that finds none waits
 * in the FIFO c->aq_head, and is pumped again when a slot comes back), and its completion
 * function (called by whichever thread reaps) moves it to its next step. Final means: the
 * outcome is known and no transfer can touch the op's buffer any more.
 *
 * This header also defines the client handle, struct mc_client: the engine, the arenas
 * and the op lists, the whole of what mc_connect creates.
 */
#ifndef MC_LIBMC_OP_H
#define MC_LIBMC_OP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mc/mc.h>

#include "libmc/arena.h"
#include "libmc/devbuf.h"
#include "libmc/engine.h"

/* The most PUT_DATA pieces one put keeps in flight (each holds a staging slot). */
#define MC_CLIENT_PUT_WINDOW 16

/* Puts whose bytes the agent reads straight from the caller's memory (an arena, or any
 * address through process_vm_readv): up to MC_CLIENT_DIRECT_ONE bytes go as one PUT, larger
 * ones as PUT_START + PUT_DATA pieces of MC_CLIENT_DIRECT_PIECE bytes (a multiple of the
 * checksum chunk, as the protocol wants for every piece but the last), so the agent can
 * checksum and copy pieces in parallel and a failure costs one piece, not the object. */
#define MC_CLIENT_DIRECT_ONE   (64u << 20)
#define MC_CLIENT_DIRECT_PIECE (16u << 20)

/* An op whose deadline passed this long ago without the agent's own MC_ERR_TIMEOUT answer
 * is given up by libmc (the agent carries the same deadline in sqe.deadline_ms, so this is
 * only for an agent that stopped answering). Never for an op whose SQE names the caller's
 * memory (an arena or MC_SQE_F_USER): that one waits for its CQE or the agent's death. A
 * synchronous call that does not name the caller's memory is given up at its deadline. */
#define MC_CLIENT_EXPIRE_GRACE_MS MC_DEADLINE_GRACE_MS /* public: mc.h, "Deadlines" */

/* Async ops a client may hold (not freed) before mc_*_async answers MC_ERR_NOMEM. */
#define MC_CLIENT_ASYNC_MAX 65536u

struct mc_client {
    struct mc_engine e; /* first: the engine's hooks find the client from it */
    struct mc_arenas a;
    struct mc_devbufs d;  /* engines' device buffers (devbuf.h) */
    _Atomic bool user_ok; /* MC_SQE_F_USER allowed: not disabled, not DENIED */

    /* ops, all under e.mu */
    struct mc_op *all;               /* every op not freed, and detached ones not final */
    struct mc_op *aq_head, *aq_tail; /* ops waiting for an op or staging slot, FIFO */
    struct mc_op *copy_head;         /* GETs whose CQE arrived: copy, verify, release */
    uint32_t ncopies;                /* on copy_head or being copied: each holds a lease */
    uint32_t async_live;             /* async ops not final */
    bool kicking;                    /* kick_locked is running (no re-entry) */
    _Atomic uint64_t next_pin;       /* the last pin id handed out (mc_prefix_pin) */
};

enum mc_op_kind { MC_OP_KIND_PUT, MC_OP_KIND_GET, MC_OP_KIND_EXIST };

struct mc_op {
    struct mc_client *c;
    struct mc_op *all_prev, *all_next; /* c->all */
    struct mc_op *q_prev, *q_next;     /* c->aq_head, while queued */
    struct mc_op *cp_next;             /* c->copy_head, while waiting for its copy */
    uint8_t kind, src, next_step;
    bool queued, in_copy, copying;
    bool final, reported, detached, canceled, internal, fallback, linked;
    bool sync;    /* a synchronous call's: given up at its deadline (no grace) */
    bool gave_up; /* libmc gave it up at its deadline (no answer from the agent) */
    int status;
    int init_err; /* a put that cannot be placed at all (too many replicas): final at once */
    int err;      /* a multi-step put: why it is being aborted */
    uint32_t inflight;    /* SQEs of this op in flight */
    uint32_t waiters;     /* threads in mc_wait on it */
    uint32_t *batch_left; /* internal ops of a batch: decremented when final */
    uint64_t deadline_ns;
    size_t len_out;
    /* a keyed op with no data (kind EXIST): its opcode (0: MC_OP_EXIST) and arg0 */
    uint8_t key_opcode;
    uint64_t key_arg, key_arg1;
    /* put */
    bool exists_ok; /* MC_PUT_EXISTS_OK: MC_ERR_EXISTS ends it as MC_PRESENT */
    const uint8_t *src_buf;
    size_t len;
    uint32_t put_flags, replicas;
    uint64_t ttl_ms;
    uint64_t arena_ref; /* arena id << MC_SHM_ARENA_SHIFT | offset of src_buf */
    uint8_t *bounce;    /* a put from device memory that cannot be exported: the host copy
                           src_buf points to, freed when the op is final (devbuf.h) */
    bool started;
    uint32_t handle;
    size_t sent; /* bytes submitted as pieces */
    /* get */
    uint8_t *dst;
    size_t cap;
    bool dst_dev;  /* dst is device memory: copied in by mc_devbuf_copy_in */
    uint64_t skip; /* replicas whose bytes failed our checksum: the next GET skips them */
    struct mc_cqe gcqe;
    struct mc_arena_use use;
    uint16_t key_len;
    char key[MC_KEY_MAX];
};

/* The engine hooks of every client (mc_engine_init). */
extern const struct mc_engine_hooks mc_op_hooks;

/* Argument checks shared by the sync and async entry points. The key's length if it is
 * valid (1 .. MC_KEY_MAX bytes), else MC_ERR_INVALID; put options: MC_ERR_INVALID for
 * unknown flags, both pins or reserved fields set, MC_ERR_NO_SPACE for more replicas than
 * the ring ABI carries. */
int mc_op_key_check(const char *key, size_t *len_p);
int mc_op_opts_check(const mc_put_opts_t *o);

/* Set up a zeroed op of client c (the key already checked). A get's and a put's buffer is
 * marked owned (mc_arena_use) until the op is collected or destroyed. */
void mc_op_init_get(struct mc_client *c, struct mc_op *op, const char *key, size_t key_len,
                    void *buf, size_t cap, uint64_t deadline_ns);
void mc_op_init_put(struct mc_client *c, struct mc_op *op, const char *key, size_t key_len,
                    const void *buf, size_t len, const mc_put_opts_t *o, uint64_t deadline_ns);
void mc_op_init_exist(struct mc_client *c, struct mc_op *op, const char *key, size_t key_len,
                      uint64_t deadline_ns);

/* Set up a zeroed keyed op with no data that answers 1 / 0 like an EXIST: opcode
 * MC_OP_EXIST, MC_OP_PIN (arg0: the pin id) or MC_OP_TOUCH. */
void mc_op_init_key_op(struct mc_client *c, struct mc_op *op, uint8_t opcode, uint64_t arg0,
                       const char *key, size_t key_len, uint64_t deadline_ns);

/* Run one set-up op to its end for a synchronous call: submit it, wait for it with its
 * deadline, collect it. Returns its status (a get's length: op->len_out). */
int mc_op_run(struct mc_client *c, struct mc_op *op);

/* Run n set-up internal ops (a batch; those already final are skipped) in one go: queued
 * under one lock hold, one publish and one doorbell for every SQE that fits, then waited
 * for. results[i] gets each status. Returns the number with status >= 0. */
int mc_op_run_batch(struct mc_client *c, struct mc_op *ops, size_t n, int results[]);

/* Queue an async op (set up, not internal) and submit what can be now: 0, the poison code
 * or MC_ERR_NOMEM (too many async ops); on failure op is freed. */
int mc_op_submit(struct mc_client *c, struct mc_op *op);

/* mc_wait, mc_cancel and mc_op_free of <mc/mc.h> (op not NULL). */
int mc_op_wait(struct mc_op *op, int timeout_ms, size_t *len_out);
void mc_op_cancel(struct mc_op *op);
void mc_op_free_async(struct mc_op *op);

/* Reap what is ready now without sleeping (when no other thread is reaping), and give up
 * the ops whose deadline and grace passed, detached ones included; empties the eventfd. */
void mc_op_reap(struct mc_client *c);

/* Close-time: cancel every op, wait until all are final, free them. */
void mc_op_close_all(struct mc_client *c);

#endif /* MC_LIBMC_OP_H */
