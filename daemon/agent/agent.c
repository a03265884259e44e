/*
 * The agent: segment, embedded master, clients and the io_uring loop.
 *
 * The loop turn: drain every client's SQ (copying each SQE and key out of the region once,
 * then validating the copy), run what can run at once (master calls), advance the copy work
 * of puts by at most copy_slice bytes in total (so one large object never stalls the other
 * clients, the timer or the socket), post CQEs and queue wake-ups for sleeping clients, then
 * either poll again (a client was active within agent_spin_us) or sleep in io_uring on
 * every client's SQ doorbell (IORING_OP_FUTEX_WAIT), the listening socket, the clients'
 * sockets (closed = gone), a timerfd (master tick) and a signalfd (SIGTERM).
 *
 * What a client can touch is its own region: the agent reads SQEs, keys and staging data
 * from it and writes CQEs into it, and checks every index, offset and length against its
 * own copy of the layout. Segment memory is written only here; clients map it read-only.
 */
#include "daemon/agent/agent_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <linux/capability.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <liburing.h>
#include "shm/checksum.h"

#include <mc/mc.h>
#include <mc/mc_status.h>

#include "daemon/agent/cluster.h"
#include "daemon/common/log.h"
#include "daemon/common/notify.h"
#include "daemon/master/master.h"
#include "shm/memfd.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/sqe_check.h"

/* The agent hands a client's ttl_ms to the master as is: both must refuse the same TTLs. */
_Static_assert(MC_MASTER_TTL_MAX_MS == MC_TTL_MAX_MS, "the master's TTL bound is mc.h's");

/* ---------------------------------------------------------------------------------------- */

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t agent_now_ms(void)
{
    return now_ns() / 1000000u;
}


static inline uint64_t ud_make(void *p, enum ud_tag tag)
{
    return (uint64_t)(uintptr_t)p | (uint64_t)tag;
}

struct io_uring_sqe *agent_get_sqe(struct mc_agent *a)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&a->ring);

    if (sqe == NULL) {
        io_uring_submit(&a->ring); /* make room: the ring is full of unsubmitted entries */
        sqe = io_uring_get_sqe(&a->ring);
    }
    return sqe;
}

/* ---------------------------------------------------------------------------------------- */
/* completions to clients */

/* --- op latency (metrics on) -------------------------------------------------------------
 * Each timed op has an entry keyed by its user_data from the moment its SQE is taken to the
 * moment its CQE is posted, in a per-client table sized at connection: no allocation and
 * no syscall beyond the clock read on the data path. Linear probing with backward-shift
 * deletion keeps lookups short without tombstones. */

static uint32_t optime_slot(uint64_t user_data, uint32_t mask)
{
    return (uint32_t)((user_data * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & mask;
}

static void optime_add(struct client *c, uint64_t user_data, uint64_t t0_ns, uint8_t kind)
{
    uint32_t i;

    if (c->times == NULL || c->ntimes >= c->times_mask)
        return; /* cannot happen while entries <= ops in flight; never loop for ever */
    for (i = optime_slot(user_data, c->times_mask); c->times[i].kind != OT_NONE;
         i = (i + 1) & c->times_mask) {
        if (c->times[i].user_data == user_data)
            return; /* a client reusing a user_data in flight: the first keeps its time */
    }
    c->times[i] = (struct optime){.user_data = user_data, .t0_ns = t0_ns, .kind = kind};
    c->ntimes++;
}

static void optime_end(struct client *c, uint64_t user_data)
{
    uint32_t m = c->times_mask, i = optime_slot(user_data, m), j, k;
    struct optime *t = c->times;
    uint64_t dt;

    while (t[i].kind != OT_NONE && t[i].user_data != user_data)
        i = (i + 1) & m;
    if (t[i].kind == OT_NONE)
        return;
    dt = now_ns() - t[i].t0_ns;
    mc_histo_observe(t[i].kind == OT_PUT ? c->a->h_put : c->a->h_get, dt);
    /* close the gap: move up every later entry of the run whose home slot is not in (i, j] */
    for (j = i;;) {
        j = (j + 1) & m;
        if (t[j].kind == OT_NONE)
            break;
        k = optime_slot(t[j].user_data, m);
        if ((i <= j) ? (k <= i || k > j) : (k <= i && k > j)) {
            t[i] = t[j];
            i = j;
        }
    }
    t[i].kind = OT_NONE;
    c->ntimes--;
}

/* Before op_run dispatches s: start its clock if it is timed. */
static void optime_start(struct mc_agent *a, struct client *c, const struct mc_sqe *s)
{
    const struct put *p;

    switch (s->opcode) {
    case MC_OP_PUT:
        a->op_t0_ns = now_ns();
        optime_add(c, s->user_data, a->op_t0_ns, OT_PUT);
        break;
    case MC_OP_PUT_START:
        a->op_t0_ns = now_ns(); /* put_begin keeps it: PUT_END's answer ends the clock */
        break;
    case MC_OP_PUT_END:
        if (s->arg0 < c->lay.max_inflight && (p = &c->puts[s->arg0])->used && !p->oneshot)
            optime_add(c, s->user_data, p->t0_ns, OT_PUT);
        break;
    case MC_OP_GET:
        optime_add(c, s->user_data, now_ns(), OT_GET);
        break;
    default:
        break;
    }
}

void agent_cqe_post(struct client *c, const struct mc_cqe *src)
{
    struct mc_shm_ring_ctrl *cq = c->r->cq;

    if (c->ntimes != 0)
        optime_end(c, src->user_data);
    c->inflight--;
    if (mc_ring_used_at(cq, c->cq_tail) >= c->lay.cq_entries) {
        /* full: it cannot happen while the client keeps to max_inflight <= cq_entries; above
         * full: the client moved its head past our tail */
        c->violations = VIOLATIONS_MAX;
        c->violation = "its completion ring is full (or its head is forged)";
        return;
    }
    *mc_shm_cqe_at(c->r, c->cq_tail) = *src;
    c->cq_tail++;
    mc_ring_publish_tail(cq, c->cq_tail);
    c->cq_dirty = true;
}

void agent_cqe_res(struct client *c, uint64_t user_data, int res)
{
    struct mc_cqe e;

    memset(&e, 0, sizeof(e));
    e.user_data = user_data;
    e.res = res;
    agent_cqe_post(c, &e);
}


/* Wake a client sleeping on its CQ: one futex syscall, at once. Queuing the wake as an
 * io_uring FUTEX_WAKE would batch it, but it then waits for the next io_uring_enter, after
 * every other ring was served: worse tails at 8 clients (docs/decisions.md). The client's
 * eventfd is written through io_uring: the client owns its blocking mode and its counter,
 * so a synchronous write could block the agent for ever. */
static void client_wake(struct mc_agent *a, struct client *c)
{
    struct mc_shm_ring_ctrl *cq = c->r->cq;

    c->cq_dirty = false;
    atomic_thread_fence(memory_order_seq_cst); /* pairs with the client's fence after it
                                                  set need_wakeup and before it re-checks */
    if (atomic_load_explicit(&cq->need_wakeup, memory_order_relaxed) == 0)
        return;
    atomic_fetch_add_explicit(&cq->futex, 1, memory_order_seq_cst);
    syscall(SYS_futex, &cq->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    if (c->efd >= 0 && !c->efd_busy) {
        struct io_uring_sqe *sqe = agent_get_sqe(a);

        if (sqe == NULL)
            return;
        c->efd_one = 1;
        io_uring_prep_write(sqe, c->efd, &c->efd_one, sizeof(c->efd_one), 0);
        io_uring_sqe_set_data64(sqe, ud_make(c, UD_EFD));
        c->efd_busy = true;
        c->refs++;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* puts and copies */

/* A free slot; one whose put was revoked for idleness only when no other is free (its
 * handle answers MC_ERR_TIMEOUT until then, not a newer put's pieces). */
static int put_alloc(struct client *c, uint32_t *h_p)
{
    uint32_t i, expired = UINT32_MAX;

    for (i = 0; i < c->lay.max_inflight; i++) {
        if (!c->puts[i].used && !c->puts[i].expired) {
            *h_p = i;
            return 0;
        }
        if (!c->puts[i].used && expired == UINT32_MAX)
            expired = i;
    }
    if (expired != UINT32_MAX) {
        *h_p = expired;
        return 0;
    }
    return MC_ERR_NOMEM; /* more open puts than this client's table (docs/protocol.md) */
}

/* An image buffer of at least len bytes: the smallest cached one that fits, else a new
 * mapping (2 MiB multiples, huge pages where the kernel has them). */
static uint8_t *image_get(struct mc_agent *a, uint64_t len, uint64_t *cap_p)
{
    uint64_t cap = (len + (UINT64_C(2) << 20) - 1) & ~((UINT64_C(2) << 20) - 1);
    int best = -1, i;
    void *m;

    for (i = 0; i < IMAGE_CACHE; i++) {
        if (a->images[i].p != NULL && a->images[i].cap >= cap &&
            (best < 0 || a->images[i].cap < a->images[best].cap))
            best = i;
    }
    if (best >= 0) {
        uint8_t *p = a->images[best].p;

        *cap_p = a->images[best].cap;
        a->image_cache_bytes -= *cap_p;
        a->images[best].p = NULL;
        return p;
    }
    m = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    madvise(m, cap, MADV_HUGEPAGE);
    *cap_p = cap;
    return m;
}

/* Keep a released image for the next put, within IMAGE_CACHE_BYTES; else unmap it. */
static void image_put(struct mc_agent *a, uint8_t *p, uint64_t cap)
{
    int i;

    for (i = 0; i < IMAGE_CACHE && a->image_cache_bytes + cap <= IMAGE_CACHE_BYTES; i++) {
        if (a->images[i].p == NULL) {
            a->images[i].p = p;
            a->images[i].cap = cap;
            a->image_cache_bytes += cap;
            return;
        }
    }
    munmap(p, cap);
}

/* Only once no transfer reads the image any more (every send to a peer is final). */
static void put_forget(struct put *p)
{
    p->c->open_put_bytes -= p->open_bytes;
    p->open_bytes = 0;
    free(p->seen);
    p->seen = NULL;
    if (p->image != NULL)
        image_put(p->c->a, p->image, p->image_cap);
    p->image = NULL;
    if (p->used)
        p->c->nputs--;
    p->used = false;
    p->waiting = false;
}

static struct put *put_get(struct client *c, uint64_t h)
{
    /* a one-shot PUT's slot is internal: PUT_DATA/END/ABORT naming it would race its copy;
     * a put whose master call or peer writes are under way is not the client's either, nor
     * one revoked while its writes drain */
    if (h >= c->lay.max_inflight || !c->puts[h].used || c->puts[h].oneshot ||
        c->puts[h].waiting || c->puts[h].revoke_pending)
        return NULL;
    return &c->puts[h];
}

/* Was handle h revoked for idleness (put_idle_ms)? END and ABORT end that: the handle is
 * free for new puts again. */
static bool put_expired(struct client *c, uint64_t h, bool end)
{
    if (h >= c->lay.max_inflight || !c->puts[h].expired || c->puts[h].used)
        return false;
    if (end)
        c->puts[h].expired = false;
    return true;
}

/* Abandon at the master (fire-and-forget: the writer's transfers are final) and forget.
 * With writes to peers still reading the image, that waits until they are final: the
 * master frees the blocks at once on a revoke, so no byte of ours may land there later. */
static void put_revoke(struct mc_agent *a, struct put *p)
{
    struct ml_req *r;

    if (p->sends != 0) {
        if (!p->revoke_pending) {
            p->revoke_pending = true;
            p->failed = true;
            p->c->refs++;
        }
        return;
    }
    r = ml_req_new(a->ml, ML_PUT_REVOKE, p->key, p->key_len, NULL, NULL);

    if (r != NULL) {
        r->in.ref.version = p->version;
        r->in.ref.node = a->node;
        ml_submit(a->ml, r);
    } else {
        mc_warn("out of memory: put of version %" PRIu64 " left to the master's timeout",
                p->version);
    }
    put_forget(p);
}

/* Where the bytes go while they arrive: our replica when we hold one, else a buffer that
 * the writes to the peers are sent from. */
static int put_image(struct mc_agent *a, struct put *p)
{
    uint64_t len = mc_shm_alloc_len(p->size, p->csum);
    uint32_t i;

    for (i = 0; i < p->nrep; i++) {
        if (a->seg_size != 0 && p->rep[i].seg == a->seg_id &&
            p->rep[i].offset <= a->seg_size && len <= a->seg_size - p->rep[i].offset) {
            p->dst = a->seg + p->rep[i].offset;
            p->nremote = p->nrep - 1;
            return 0;
        }
    }
    if (a->cl == NULL || p->nrep == 0) {
        mc_error("put of version %" PRIu64 ": granted %u replica(s), none of them ours in "
                 "standalone mode (a bug: please report)", p->version, p->nrep);
        return MC_ERR_INTERNAL; /* one node: every replica is ours */
    }
    p->nremote = p->nrep;
    p->image = image_get(a, len, &p->image_cap);
    if (p->image == NULL)
        return MC_ERR_NOMEM;
    p->dst = p->image;
    return 0;
}

static int copy_queue(struct client *c, uint32_t h, uint8_t opcode, uint64_t user_data,
                      uint64_t obj_off, uint64_t len, const uint8_t *src, uint64_t uaddr,
                      uint64_t deadline_ms)
{
    struct copy *cp;

    if (c->copy_count == c->lay.max_inflight)
        return MC_ERR_BUSY;
    cp = &c->copies[(c->copy_head + c->copy_count) % c->lay.max_inflight];
    memset(cp, 0, sizeof(*cp));
    cp->xs = XXH3_createState();
    if (cp->xs == NULL)
        return MC_ERR_NOMEM;
    XXH3_64bits_reset(cp->xs);
    cp->user_data = user_data;
    cp->deadline_ms = deadline_ms;
    cp->put = h;
    cp->opcode = opcode;
    cp->src = src;
    cp->uaddr = uaddr;
    cp->obj_off = obj_off;
    cp->len = len;
    c->puts[h].busy++;
    c->copy_count++;
    return 0;
}

static void put_granted(void *ctx, struct ml_req *r)
{
    struct put *p = ctx;
    struct client *c = p->c;
    struct mc_agent *a = c->a;
    uint32_t h = (uint32_t)(p - c->puts);
    int err = r->res;

    p->waiting = false;
    /* the master takes us for no live writer: it declared us dead and our heartbeat has
     * not told us yet (we join again then). Retryable, not "not found" */
    if (a->cl != NULL && (err == MC_ERR_NOT_FOUND || err == MC_ERR_DENIED))
        err = MC_ERR_UNAVAILABLE;
    if (err == 0) {
        p->active_ms = agent_now_ms();
        p->version = r->out.grant.version;
        p->nrep = r->out.grant.nrep;
        memcpy(p->rep, r->out.grant.rep, p->nrep * sizeof(p->rep[0]));
        err = c->state == CL_ACTIVE ? put_image(a, p) : MC_ERR_CANCELED;
        if (err == 0 && p->oneshot) {
            err = copy_queue(c, h, MC_OP_PUT, p->user_data, 0, p->size, p->src, p->uaddr,
                             p->deadline_ms);
        }
        if (err != 0)
            put_revoke(a, p);
    } else {
        put_forget(p);
    }
    ml_req_free(a->ml, r);
    if (c->state == CL_ACTIVE && err != 0) {
        agent_cqe_res(c, p->user_data, err);
    } else if (c->state == CL_ACTIVE && !p->oneshot) {
        struct mc_cqe e;

        memset(&e, 0, sizeof(e));
        e.user_data = p->user_data;
        e.lease_id = h;
        e.version = p->version;
        agent_cqe_post(c, &e);
    }
    agent_client_put_ref(a, c);
}

/* PUT and PUT_START: ask the master for the replicas; the op goes on in put_granted. */
static int put_begin(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                     const char *key, uint64_t size, const uint8_t *src, uint64_t deadline_ms)
{
    bool csum = (s->put_flags & MC_PUT_NO_CHECKSUM) == 0;
    struct ml_req *r;
    struct put *p;
    uint32_t h;
    int err;

    if (size == 0)
        return MC_ERR_INVALID;
    if (a->cl == NULL && mc_shm_alloc_len(size, csum) > a->seg_size)
        return MC_ERR_TOO_LARGE;
    /* space reserved by puts not finished is the client's to use or lose: a client that
     * starts puts and sends nothing would hold the pool and evict everyone else's objects.
     * One put alone is always allowed, so any object that fits can be put. */
    if (c->open_put_bytes != 0 &&
        (c->open_put_bytes >= a->open_put_limit ||
         mc_shm_alloc_len(size, csum) > a->open_put_limit - c->open_put_bytes)) {
        a->st.puts_refused++;
        return MC_ERR_NO_SPACE;
    }
    err = put_alloc(c, &h);
    if (err != 0)
        return err;
    p = &c->puts[h];
    memset(p, 0, sizeof(*p));
    p->seen = calloc(mc_shm_nchunks(size), 1);
    r = ml_req_new(a->ml, ML_PUT_START, key, s->key_len, put_granted, p);
    if (p->seen == NULL || r == NULL) {
        free(p->seen);
        p->seen = NULL;
        if (r != NULL)
            ml_req_free(a->ml, r);
        return MC_ERR_NOMEM;
    }
    r->in.put = (struct mc_master_put_req){
        .size = size, .alloc_len = mc_shm_alloc_len(size, csum), .replicas = s->replicas,
        .flags = s->put_flags, .ttl_ms = s->ttl_ms, .writer = a->node,
        .preferred = MC_MASTER_NODE_NONE,
    };
    p->c = c;
    p->used = true;
    c->nputs++;
    p->waiting = true;
    p->oneshot = s->opcode == MC_OP_PUT;
    p->csum = csum;
    p->key_len = s->key_len;
    memcpy(p->key, key, s->key_len);
    p->size = size;
    p->user_data = s->user_data;
    p->deadline_ms = deadline_ms;
    p->t0_ns = a->op_t0_ns;
    p->src = src;
    p->uaddr = s->data_off;
    p->open_bytes = mc_shm_alloc_len(size, csum);
    c->open_put_bytes += p->open_bytes;
    c->refs++;
    ml_submit(a->ml, r);
    return 0;
}

static void put_ended(void *ctx, struct ml_req *r)
{
    struct put *p = ctx;
    struct client *c = p->c;
    struct mc_agent *a = c->a;
    int res = r->res;

    ml_req_free(a->ml, r);
    /* the master does not know this put (any more) as ours: it declared us dead meanwhile
     * and revoked it, or it restarted, and we joined again (maybe under another node id).
     * The caller did nothing wrong and may retry: not "not found", not "denied" */
    if (a->cl != NULL && (res == MC_ERR_NOT_FOUND || res == MC_ERR_DENIED))
        res = MC_ERR_UNAVAILABLE;
    if (res == 0)
        a->st.puts++;
    put_forget(p);
    if (c->state == CL_ACTIVE)
        agent_cqe_res(c, p->user_data, res);
    agent_client_put_ref(a, c);
}

static void put_end_submit(struct mc_agent *a, struct put *p);

static void put_sent(struct mc_agent *a, struct put *p)
{
    struct delayed *d;

    if (a->cfg.test_put_end_delay_ms != 0 && p->send_err == 0 &&
        (d = calloc(1, sizeof(*d))) != NULL) {
        /* test only: the bytes are in place, the publication waits (a window to kill in) */
        d->c = p->c;
        d->p = p;
        d->due_ms = agent_now_ms() + a->cfg.test_put_end_delay_ms;
        d->next = a->delayed;
        a->delayed = d;
        return;
    }
    put_end_submit(a, p);
}

static void put_end_submit(struct mc_agent *a, struct put *p)
{
    struct client *c = p->c;
    struct ml_req *r = NULL;
    int err = p->send_err;

    if (err == 0 && c->state != CL_ACTIVE)
        err = MC_ERR_CANCELED; /* its writer went away before it was published */
    if (err == 0 && (p->answered || agent_now_ms() > p->deadline_ms))
        err = MC_ERR_TIMEOUT; /* too late: the caller has, or will have, given up on it */
    if (err == 0) {
        r = ml_req_new(a->ml, ML_PUT_END, p->key, p->key_len, put_ended, p);
        if (r == NULL)
            err = MC_ERR_NOMEM;
    }
    if (err != 0) {
        bool answered = p->answered;

        put_revoke(a, p);
        if (c->state == CL_ACTIVE && !answered)
            agent_cqe_res(c, p->user_data, err);
        agent_client_put_ref(a, c);
        return;
    }
    r->in.ref.version = p->version;
    r->in.ref.node = a->node;
    ml_submit(a->ml, r);
}

/* Publish: the object checksum over the chunk values, the writes to peers holding other
 * replicas, then put_end. Answers p->user_data when it is over. */
static void put_finish(struct mc_agent *a, struct put *p)
{
    struct client *c = p->c;

    if (p->failed || p->received != p->size) {
        int res = p->failed ? MC_ERR_TIMEOUT : MC_ERR_INVALID;

        put_revoke(a, p);
        agent_cqe_res(c, p->user_data, res);
        return;
    }
    if (p->csum) {
        uint64_t n = mc_shm_nchunks(p->size);
        uint64_t *tr = (uint64_t *)(p->dst + mc_shm_trailer_off(p->size));

        tr[n] = XXH3_64bits(tr, n * sizeof(uint64_t));
    }
    p->waiting = true;
    p->finishing = true;
    c->refs++;
    if (a->cl != NULL && p->nremote > 0) {
        /* the rest of the image, checksums included; pieces may still be on their way */
        p->sends++;
        cluster_put_send(a, p, p->sent_upto, mc_shm_alloc_len(p->size, p->csum));
        if (--p->sends > 0)
            return; /* agent_put_writes_final when the last write is final */
    }
    put_sent(a, p);
}

void agent_put_writes_final(struct mc_agent *a, struct put *p)
{
    struct client *c = p->c;

    if (p->revoke_pending) {
        p->revoke_pending = false;
        put_revoke(a, p);
        agent_client_put_ref(a, c);
    } else if (p->finishing) {
        put_sent(a, p);
    }
}

/* The copy at the head of c's FIFO is over: answer it. */
static void copy_done(struct mc_agent *a, struct client *c, int res)
{
    struct copy *cp = &c->copies[c->copy_head];
    struct put *p = &c->puts[cp->put];
    uint64_t user_data = cp->user_data;

    XXH3_freeState(cp->xs);
    c->copy_head = (c->copy_head + 1) % c->lay.max_inflight;
    c->copy_count--;
    p->busy--;
    if (res != 0)
        p->failed = true;
    if (cp->opcode == MC_OP_PUT && p->busy == 0) {
        if (res == 0) {
            put_finish(a, p); /* it answers */
            return;
        }
        put_revoke(a, p);
    } else if (p->abort_pending && p->busy == 0) {
        put_revoke(a, p); /* the abort waited for this last piece */
    }
    agent_cqe_res(c, user_data, res);
}

/* Copy up to `budget` bytes of c's head copy; returns the bytes copied. */
static uint64_t copy_step(struct mc_agent *a, struct client *c, uint64_t budget, uint64_t now)
{
    struct copy *cp = &c->copies[c->copy_head];
    struct put *p = &c->puts[cp->put];
    uint64_t n, pos, chunk_end;

    if (now > cp->deadline_ms) {
        copy_done(a, c, MC_ERR_TIMEOUT); /* nothing is in flight: memcpy is synchronous */
        return 0;
    }
    pos = cp->obj_off + cp->done;
    n = cp->len - cp->done;
    if (n > budget)
        n = budget;
    /* never cross a checksum chunk inside one step */
    chunk_end = (pos / MC_SHM_CHUNK + 1) * MC_SHM_CHUNK;
    if (pos + n > chunk_end)
        n = chunk_end - pos;
    if (cp->src != NULL) {
        memcpy(p->dst + pos, cp->src + cp->done, n);
    } else {
        /* the client's own memory (it allowed us with PR_SET_PTRACER) */
        struct iovec local = {.iov_base = p->dst + pos, .iov_len = n};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)(cp->uaddr + cp->done),
                               .iov_len = n};
        ssize_t got = process_vm_readv(c->pid, &local, 1, &remote, 1, 0);

        if (got <= 0) {
            int e = errno;

            copy_done(a, c, got == 0 || e == EFAULT ? MC_ERR_INVALID : MC_ERR_DENIED);
            return 0;
        }
        n = (uint64_t)got; /* a short read: the rest comes next turn */
    }
    if (p->csum)
        XXH3_64bits_update(cp->xs, p->dst + pos, n);
    cp->done += n;
    pos += n;
    if (pos == chunk_end || pos == p->size) {
        uint64_t idx = (pos - 1) / MC_SHM_CHUNK;

        if (p->csum) {
            uint64_t *tr = (uint64_t *)(p->dst + mc_shm_trailer_off(p->size));

            tr[idx] = XXH3_64bits_digest(cp->xs);
            XXH3_64bits_reset(cp->xs);
        }
        if (!p->seen[idx]) {
            p->seen[idx] = 1;
            p->received += pos - idx * MC_SHM_CHUNK;
        }
        if (p->nremote != 0)
            cluster_put_progress(a, p); /* whole pieces go out while the rest is copied */
    }
    a->st.bytes_in += n;
    p->active_ms = now;
    if (cp->done == cp->len)
        copy_done(a, c, 0);
    return n;
}

/* ---------------------------------------------------------------------------------------- */
/* ops */

static void lease_slot_free(struct client *c, struct lease *l)
{
    l->used = false;
    l->waiting = false;
    c->lease_free[c->nlease_free++] = (uint32_t)(l - c->leases);
}

/* The read is over: end the lease at the master (fire-and-forget) and free the slot. */
static void lease_end(struct mc_agent *a, struct client *c, uint32_t i)
{
    struct lease *l = &c->leases[i];
    struct ml_req *r = ml_req_new(a->ml, ML_LEASE_RELEASE, l->key, l->key_len, NULL, NULL);

    if (r != NULL) {
        r->in.ref.version = l->version;
        r->in.ref.epoch = l->epoch;
        ml_submit(a->ml, r); /* else the master's lease TTL ends it */
    }
    if (l->landed) {
        mc_alloc_free(a->land, l->land_id); /* its bytes were in place before we answered */
        l->landed = false;
    }
    lease_slot_free(c, l);
}

/* Answer a GET whose bytes are readable at segment `seg_idx`, offset `off`. */
static void get_answer(struct mc_agent *a, struct client *c, struct lease *l,
                       const struct mc_master_get_result *g, uint32_t rep, uint32_t seg_idx,
                       uint64_t off)
{
    struct mc_cqe e;

    memset(&e, 0, sizeof(e));
    e.user_data = l->user_data;
    e.size = g->size;
    e.version = g->version;
    e.obj_flags = g->flags;
    e.loc_seg = seg_idx;
    e.loc_off = off;
    e.replicas = rep + 1; /* which one: the reader skips it if its checksum fails */
    e.lease_id = (uint32_t)(l - c->leases);
    e.deadline_ms = l->deadline_ms;
    a->st.hits++;
    if (a->cfg.test_get_delay_ms != 0) {
        struct delayed *d = calloc(1, sizeof(*d));

        if (d != NULL) {
            d->c = c;
            d->cqe = e;
            d->due_ms = agent_now_ms() + a->cfg.test_get_delay_ms;
            d->next = a->delayed;
            a->delayed = d;
            c->refs++;
            return;
        }
    }
    agent_cqe_post(c, &e);
}

static void get_answered(void *ctx, struct ml_req *r)
{
    struct lease *l = ctx;
    struct client *c = l->c;
    struct mc_agent *a = c->a;
    struct mc_master_get_result *g = &r->out.get;
    uint32_t i, j;
    int err = r->res;

    i = (uint32_t)(l - c->leases);
    if (err != 0) {
        lease_slot_free(c, l);
        if (c->state == CL_ACTIVE)
            agent_cqe_res(c, l->user_data, err);
        goto out;
    }
    l->waiting = false;
    l->version = g->lease.version;
    l->epoch = g->lease.epoch;
    if (a->master != NULL) {
        l->deadline_ms = g->lease.expires_ms > a->cfg.lease_margin_ms
                             ? g->lease.expires_ms - a->cfg.lease_margin_ms
                             : 0;
    } else {
        /* the master's clock is not ours: its lease began after we asked (l->deadline_ms
         * holds when we asked, plus the lease TTL) */
        l->deadline_ms = l->deadline_ms > a->cfg.lease_margin_ms
                             ? l->deadline_ms - a->cfg.lease_margin_ms
                             : 0;
    }
    if (c->state != CL_ACTIVE) {
        lease_end(a, c, i);
        goto out;
    }
    for (j = 0; j < g->nrep; j++) {
        if (a->seg_size != 0 && g->rep[j].seg == a->seg_id && !(l->skip >> j & 1)) {
            get_answer(a, c, l, g, j, 0, g->rep[j].offset); /* the reader maps it: no copy */
            goto out;
        }
    }
    for (j = 0; j < g->nrep && (l->skip >> j & 1); j++)
        ;
    /* no replica at all is not a checksum verdict: every segment that held one is gone
     * (its node was declared dead; the sweep has not dropped the version yet) */
    if (g->nrep == 0) {
        lease_end(a, c, i);
        agent_cqe_res(c, l->user_data, MC_ERR_NOT_FOUND);
        goto out;
    }
    if (j == g->nrep) {
        /* every replica failed the reader's checksum: nothing intact is left */
        lease_end(a, c, i);
        a->st.corrupt_reads++;
        agent_cqe_res(c, l->user_data, MC_ERR_CORRUPT);
        goto out;
    }
    if (a->cl != NULL && g->nrep > 0 && l->cap_plus1 != 0 && g->size > l->cap_plus1 - 1) {
        struct mc_cqe e;

        /* it cannot fit the reader's buffer: tell its size, move nothing */
        lease_end(a, c, i);
        memset(&e, 0, sizeof(e));
        e.user_data = l->user_data;
        e.res = MC_ERR_TOO_LARGE;
        e.size = g->size;
        e.version = g->version;
        agent_cqe_post(c, &e);
        goto out;
    } else if (a->cl != NULL && g->nrep > 0) {
        l->waiting = true;
        err = cluster_get_remote(a, l, g); /* agent_get_landed answers */
        if (err == 0)
            goto out;
        l->waiting = false;
    } else {
        err = MC_ERR_NOT_FOUND;
    }
    lease_end(a, c, i);
    agent_cqe_res(c, l->user_data, err);
out:
    ml_req_free(a->ml, r);
    agent_client_put_ref(a, c);
}

void agent_get_landed(struct mc_agent *a, struct lease *l, int res)
{
    struct client *c = l->c;
    struct mc_master_get_result *g = l->g;

    l->g = NULL;
    l->waiting = false;
    if (res == 0)
        l->landed = true;
    if (res == 0 && c->state == CL_ACTIVE) {
        get_answer(a, c, l, g, l->rep_used, a->land_idx, mc_alloc_offset(a->land, l->land_id));
    } else {
        lease_end(a, c, (uint32_t)(l - c->leases));
        if (c->state == CL_ACTIVE)
            agent_cqe_res(c, l->user_data, res);
    }
    free(g);
    agent_client_put_ref(a, c);
}

static void op_get(struct mc_agent *a, struct client *c, const struct mc_sqe *s, const char *key,
                   uint64_t deadline_ms)
{
    struct ml_req *r;
    struct lease *l;

    a->st.gets++;
    if (s->arg0 != 0)
        a->st.checksum_retries++; /* the reader found a replica corrupt and asks again */
    if (c->nlease_free == 0) {
        agent_cqe_res(c, s->user_data, MC_ERR_NOMEM); /* reads holding leases: docs/protocol.md */
        return;
    }
    l = &c->leases[c->lease_free[c->nlease_free - 1]];
    r = ml_req_new(a->ml, ML_GET, key, s->key_len, get_answered, l);
    if (r == NULL) {
        agent_cqe_res(c, s->user_data, MC_ERR_NOMEM);
        return;
    }
    c->nlease_free--;
    memset(l, 0, sizeof(*l));
    l->used = true;
    l->waiting = true;
    l->c = c;
    l->user_data = s->user_data;
    l->op_deadline_ms = deadline_ms;
    l->cap_plus1 = s->arg1;
    l->skip = (uint32_t)(s->arg0 & ((1u << MC_MASTER_MAX_REPLICAS) - 1));
    l->key_len = s->key_len;
    memcpy(l->key, key, s->key_len);
    if (a->cl != NULL)
        l->deadline_ms = agent_now_ms() + cluster_lease_ttl_ms(a);
    c->refs++;
    ml_submit(a->ml, r);
}

/* EXIST, STAT, REMOVE, REMOVE_PREFIX: one master call, one answer. */
static void simple_answered(void *ctx, struct ml_req *r)
{
    struct client *c = ctx;
    struct mc_agent *a = c->a;
    struct mc_cqe e;

    if (c->state == CL_ACTIVE) {
        switch (r->kind) {
        case ML_EXIST:
            agent_cqe_res(c, r->user_data, r->res < 0 ? r->res : (int)r->out.count);
            break;
        case ML_STAT:
            if (r->res != 0) {
                agent_cqe_res(c, r->user_data, r->res);
                break;
            }
            memset(&e, 0, sizeof(e));
            e.user_data = r->user_data;
            e.size = r->out.stat.size;
            e.version = r->out.stat.version;
            e.replicas = r->out.stat.replicas;
            e.obj_flags = r->out.stat.flags;
            e.deadline_ms = r->out.stat.ttl_remaining_ms;
            agent_cqe_post(c, &e);
            break;
        case ML_REMOVE_PREFIX:
            agent_cqe_res(c, r->user_data,
                          r->res < 0 ? r->res
                          : r->out.count > INT32_MAX ? INT32_MAX : (int)r->out.count);
            break;
        default:
            agent_cqe_res(c, r->user_data, r->res);
            break;
        }
    }
    ml_req_free(a->ml, r);
    agent_client_put_ref(a, c);
}

static void op_simple(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                      const char *key, enum ml_kind kind)
{
    struct ml_req *r = ml_req_new(a->ml, kind, key, s->key_len, simple_answered, c);

    if (r == NULL) {
        agent_cqe_res(c, s->user_data, MC_ERR_NOMEM);
        return;
    }
    r->user_data = s->user_data;
    c->refs++;
    ml_submit(a->ml, r);
}


static void op_stats(struct mc_agent *a, struct client *c, const struct mc_sqe *s)
{
    struct mc_master_stats ms;

    if (a->cl != NULL) {
        cluster_op_stats(a, c, s); /* the master's figures come over the network */
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

static void client_read_socket(struct mc_agent *a, struct client *c);

/* Where a PUT / PUT_DATA takes its bytes from: staging, an arena, or (NULL) the client's
 * own memory through process_vm_readv. */
static int data_source(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                       const uint8_t **src_p)
{
    if (s->flags & MC_SQE_F_USER) {
        /* Reads of a client's memory carry the agent's rights, not the client's: a
         * privileged agent could be pointed at whatever later holds the client's pid, or
         * at a setuid image the client exec'd. So only a client of the agent's own uid
         * (which could read that memory itself) gets them; others use staging. */
        if (c->uid != geteuid())
            return MC_ERR_DENIED;
        *src_p = NULL;
        return 0;
    }
    if (s->flags & MC_SQE_F_ARENA) {
        uint32_t id = (uint32_t)(s->data_off >> MC_SHM_ARENA_SHIFT);
        uint64_t off = s->data_off & ((UINT64_C(1) << MC_SHM_ARENA_SHIFT) - 1);
        struct arena *ar = &c->arenas[id];

        if (ar->base == NULL)
            client_read_socket(a, c); /* its registration may still be in the socket */
        if (c->state == CL_ACTIVE && ar->refused != 0)
            return ar->refused; /* over an arena limit: it was never mapped */
        if (c->state != CL_ACTIVE || ar->base == NULL || off > ar->size ||
            s->data_len > ar->size - off)
            return MC_ERR_INVALID;
        *src_p = ar->base + off;
        return 0;
    }
    *src_p = c->r->staging + s->data_off;
    return 0;
}

void agent_list_one(const char *key, size_t len, void *ctx)
{
    struct list_out *o = ctx;
    uint16_t l = (uint16_t)len;

    if (o->full || (size_t)(o->end - o->p) < sizeof(l) + len) {
        o->full = true;
        return;
    }
    memcpy(o->p, &l, sizeof(l));
    memcpy(o->p + sizeof(l), key, len);
    o->p += sizeof(l) + len;
}

/* LIST: as many keys as fit the caller's staging range (a key that does not fit ends the
 * page before it, so the next page starts with it). */
static void op_list(struct mc_agent *a, struct client *c, const struct mc_sqe *s, const char *key)
{
    struct list_out o = {.p = c->r->staging + s->data_off,
                         .end = c->r->staging + s->data_off + s->data_len};
    uint64_t cursor = s->arg0, before;
    size_t max = s->arg1 == 0 || s->arg1 > 65536 ? 65536 : (size_t)s->arg1;
    struct mc_cqe e;
    int n, total = 0;

    if (a->cl != NULL) {
        cluster_op_list(a, c, s, key);
        return;
    }
    /* page by one key at a time near the end so a key that would not fit is not skipped */
    while ((size_t)total < max) {
        before = cursor;
        n = mc_master_list(a->master, key, s->key_len, &cursor, 1, agent_list_one, &o);
        if (n < 0) {
            agent_cqe_res(c, s->user_data, n);
            return;
        }
        if (o.full) {
            cursor = before; /* re-list that key on the next page */
            break;
        }
        total += n;
        if (cursor == 0)
            break;
    }
    memset(&e, 0, sizeof(e));
    e.user_data = s->user_data;
    e.res = total;
    e.version = cursor;
    agent_cqe_post(c, &e);
}

/* DRAIN: a cluster's master drains the node; a standalone agent is the only node there is,
 * with nowhere to move its objects, and its master answers by name like any other. */
static void op_drain(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                     const char *key)
{
    char name[MC_MASTER_NAME_MAX + 1];

    if (s->arg0 > 1 || s->key_len > MC_MASTER_NAME_MAX) {
        agent_cqe_res(c, s->user_data, MC_ERR_INVALID);
        return;
    }
    if (a->cl != NULL) {
        cluster_op_drain(a, c, s, key);
        return;
    }
    memcpy(name, key, s->key_len);
    name[s->key_len] = '\0';
    agent_cqe_res(c, s->user_data, mc_master_node_drain(a->master, name, s->arg0 != 0));
}

static void op_run(struct mc_agent *a, struct client *c, const struct mc_sqe *s, const char *key)
{
    uint64_t now = agent_now_ms(), deadline;
    const uint8_t *src = NULL;
    struct put *p;
    int err;

    /* the client's absolute deadline, from its low 32 bits (same host, same clock) */
    if (s->deadline_ms != 0) {
        int64_t left = (int32_t)(s->deadline_ms - (uint32_t)now);

        if (left <= 0 && s->opcode != MC_OP_RELEASE && s->opcode != MC_OP_PUT_ABORT) {
            /* it waited in the ring past its deadline: dropped unstarted, and the
             * caller's memory is never read after the caller was told it is over */
            if (!(s->flags & MC_SQE_F_NO_CQE))
                agent_cqe_res(c, s->user_data, MC_ERR_TIMEOUT);
            return;
        }
        deadline = now + (uint64_t)(left > 0 ? left : 0);
    } else {
        deadline = now + a->cfg.op_timeout_ms;
    }

    a->st.ops++;
    if (a->metrics != NULL)
        optime_start(a, c, s);
    switch (s->opcode) {
    case MC_OP_NOP:
        agent_cqe_res(c, s->user_data, 0);
        return;
    case MC_OP_PUT:
        err = data_source(a, c, s, &src);
        if (err == 0)
            err = put_begin(a, c, s, key, s->data_len, src, deadline); /* it answers */
        if (err != 0)
            agent_cqe_res(c, s->user_data, err);
        return;
    case MC_OP_PUT_START:
        err = put_begin(a, c, s, key, s->arg0, NULL, deadline); /* it answers */
        if (err != 0)
            agent_cqe_res(c, s->user_data, err);
        return;
    case MC_OP_PUT_DATA:
        if (put_expired(c, s->arg0, false)) {
            agent_cqe_res(c, s->user_data, MC_ERR_TIMEOUT);
            return;
        }
        p = put_get(c, s->arg0);
        /* pieces start on a chunk and end on one or at the object's end, so each chunk's
         * checksum is computed from one piece */
        if (p == NULL || s->arg1 % MC_SHM_CHUNK != 0 || s->arg1 >= p->size ||
            s->data_len > p->size - s->arg1 ||
            (s->data_len % MC_SHM_CHUNK != 0 && s->arg1 + s->data_len != p->size)) {
            agent_cqe_res(c, s->user_data, MC_ERR_INVALID);
            return;
        }
        err = data_source(a, c, s, &src);
        if (err == 0)
            err = copy_queue(c, (uint32_t)s->arg0, s->opcode, s->user_data, s->arg1,
                             s->data_len, src, s->data_off, deadline);
        if (err != 0)
            agent_cqe_res(c, s->user_data, err);
        return;
    case MC_OP_PUT_END:
    case MC_OP_PUT_ABORT:
        if (put_expired(c, s->arg0, true)) {
            agent_cqe_res(c, s->user_data, MC_ERR_TIMEOUT);
            return;
        }
        p = put_get(c, s->arg0);
        if (p == NULL || p->abort_pending) {
            agent_cqe_res(c, s->user_data, MC_ERR_NOT_FOUND);
            return;
        }
        if (s->opcode == MC_OP_PUT_ABORT) {
            /* pieces still being copied: revoked when the last one is done */
            if (p->busy != 0)
                p->abort_pending = p->failed = true;
            else
                put_revoke(a, p);
            agent_cqe_res(c, s->user_data, 0);
        } else if (p->busy != 0) {
            agent_cqe_res(c, s->user_data, MC_ERR_BUSY); /* END before its pieces completed */
        } else {
            p->user_data = s->user_data;
            put_finish(a, p); /* it answers */
        }
        return;
    case MC_OP_GET:
        op_get(a, c, s, key, deadline);
        return;
    case MC_OP_RELEASE:
        if (s->arg0 < c->nleases && c->leases[s->arg0].used && !c->leases[s->arg0].waiting) {
            lease_end(a, c, (uint32_t)s->arg0);
            err = 0;
        } else {
            err = MC_ERR_NOT_FOUND;
        }
        if (s->flags & MC_SQE_F_NO_CQE)
            c->inflight--;
        else
            agent_cqe_res(c, s->user_data, err);
        return;
    case MC_OP_EXIST:
        op_simple(a, c, s, key, ML_EXIST);
        return;
    case MC_OP_REMOVE:
        op_simple(a, c, s, key, ML_REMOVE);
        return;
    case MC_OP_STAT:
        op_simple(a, c, s, key, ML_STAT);
        return;
    case MC_OP_STATS:
        op_stats(a, c, s);
        return;
    case MC_OP_LIST:
        op_list(a, c, s, key);
        return;
    case MC_OP_REMOVE_PREFIX:
        op_simple(a, c, s, key, ML_REMOVE_PREFIX);
        return;
    case MC_OP_DRAIN:
        op_drain(a, c, s, key);
        return;
    default:
        agent_cqe_res(c, s->user_data, MC_ERR_INVALID);
        return;
    }
}

/* Take what the client submitted: each SQE and key copied once, then checked. */
static bool client_drain_sq(struct mc_agent *a, struct client *c)
{
    struct mc_shm_ring_ctrl *sq = c->r->sq;
    uint32_t ready = mc_ring_ready_at(sq, c->sq_head), n; /* our head, not the client's */
    char key[MC_SHM_KEY_SLOT];
    struct mc_sqe s;

    if (ready > c->lay.sq_entries) {
        c->violations = VIOLATIONS_MAX; /* a tail no producer could have written */
        c->violation = "its submission tail is out of range";
        return false;
    }
    if (ready > SQES_PER_TURN)
        ready = SQES_PER_TURN;
    for (n = 0; n < ready; n++) {
        memcpy(&s, mc_shm_sqe_at(c->r, c->sq_head), sizeof(s));
        if (s.key_len <= MC_SHM_KEY_SLOT)
            memcpy(key, mc_shm_key_slot(c->r, c->sq_head), s.key_len);
        c->sq_head++;
        /* a RELEASE that wants no answer takes no CQ room: it does not count */
        if (c->inflight >= c->lay.max_inflight &&
            !(s.opcode == MC_OP_RELEASE && (s.flags & MC_SQE_F_NO_CQE))) {
            c->violations = VIOLATIONS_MAX; /* more outstanding than the CQ can answer */
            c->violation = "more ops in flight than max_inflight";
            break;
        }
        c->inflight++;
        if (mc_shm_sqe_check(&c->lay, &s) != 0) {
            c->violations++;
            c->violation = "invalid submissions";
            a->st.violations++;
            if (s.opcode == MC_OP_RELEASE && (s.flags & MC_SQE_F_NO_CQE))
                c->inflight--;
            else
                agent_cqe_res(c, s.user_data, MC_ERR_INVALID);
            continue;
        }
        op_run(a, c, &s, key);
        if (c->state != CL_ACTIVE)
            return true;
    }
    /* release pairs with the client's acquire of head: it may reuse those slots */
    mc_ring_publish_head(sq, c->sq_head);
    return ready > 0;
}

/* ---------------------------------------------------------------------------------------- */
/* clients */


/* Answers held back by test_get_delay_ms whose time has come. */
static void post_delayed(struct mc_agent *a)
{
    struct delayed **pp = &a->delayed, *d;
    uint64_t now = agent_now_ms();

    while ((d = *pp) != NULL) {
        if (d->due_ms > now) {
            pp = &d->next;
            continue;
        }
        *pp = d->next;
        if (d->p != NULL) {
            put_end_submit(a, d->p); /* the put holds its client */
            free(d);
            continue;
        }
        if (d->c->state == CL_ACTIVE) {
            agent_cqe_post(d->c, &d->cqe);
            a->st.delayed_answers++;
        }
        agent_client_put_ref(a, d->c);
        free(d);
    }
}

static void client_close(struct mc_agent *a, struct client *c, const char *why)
{
    struct io_uring_sqe *sqe;
    uint32_t i;

    if (c->state == CL_CLOSING)
        return;
    mc_debug("client %u (pid %d): %s", c->id, (int)c->pid, why);
    if (c->state == CL_ACTIVE) {
        /* our copies are synchronous memcpy: none is in flight, so revoke at once */
        while (c->copy_count > 0) {
            struct copy *cp = &c->copies[c->copy_head];

            XXH3_freeState(cp->xs);
            c->puts[cp->put].busy--;
            c->copy_head = (c->copy_head + 1) % c->lay.max_inflight;
            c->copy_count--;
        }
        /* puts and reads waiting for the master or a peer end themselves, on their
         * answer (they hold references to c) */
        for (i = 0; i < c->lay.max_inflight; i++) {
            if (c->puts[i].used && !c->puts[i].waiting)
                put_revoke(a, &c->puts[i]);
        }
        for (i = 0; i < c->nleases; i++) {
            if (c->leases[i].used && !c->leases[i].waiting)
                lease_end(a, c, i);
        }
    }
    c->state = CL_CLOSING;
    a->st.disconnects++;
    a->nclients--;
    /* cancel what io_uring holds on the client; free when every request is back */
    sqe = agent_get_sqe(a);
    if (sqe != NULL) {
        io_uring_prep_cancel64(sqe, ud_make(c, UD_SOCK), 0);
        io_uring_sqe_set_data64(sqe, ud_make(NULL, UD_CANCEL));
    }
    if (c->futex_armed && (sqe = agent_get_sqe(a)) != NULL) {
        io_uring_prep_cancel64(sqe, ud_make(c, UD_FUTEX), 0);
        io_uring_sqe_set_data64(sqe, ud_make(NULL, UD_CANCEL));
    }
    if (c->efd_busy && (sqe = agent_get_sqe(a)) != NULL) {
        io_uring_prep_cancel64(sqe, ud_make(c, UD_EFD), 0);
        io_uring_sqe_set_data64(sqe, ud_make(NULL, UD_CANCEL));
    }
    agent_client_put_ref(a, c);
}

static void client_free(struct mc_agent *a, struct client *c)
{
    struct client **pp;

    for (pp = &a->clients; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    if (c->sock >= 0)
        close(c->sock);
    if (c->efd >= 0)
        close(c->efd);
    if (c->arenas != NULL) {
        for (uint32_t i = 0; i < MC_SHM_MAX_ARENAS; i++) {
            if (c->arenas[i].base != NULL) {
                munmap(c->arenas[i].base, c->arenas[i].size);
                a->arena_bytes -= c->arenas[i].size;
            }
        }
        free(c->arenas);
    }
    mc_shm_region_destroy(c->r);
    free(c->puts);
    free(c->times);
    free(c->leases);
    free(c->lease_free);
    free(c->copies);
    free(c);
}

/* Drop one reference; the creation reference is dropped by client_close. */
void agent_client_put_ref(struct mc_agent *a, struct client *c)
{
    if (--c->refs == 0)
        client_free(a, c);
}

static void arm_sock_poll(struct mc_agent *a, struct client *c)
{
    struct io_uring_sqe *sqe = agent_get_sqe(a);

    if (sqe == NULL) {
        client_close(a, c, "io_uring full");
        return;
    }
    io_uring_prep_poll_add(sqe, c->sock, POLLIN | POLLRDHUP | POLLHUP | POLLERR);
    io_uring_sqe_set_data64(sqe, ud_make(c, UD_SOCK));
    c->refs++;
}

/* true when `id` is one of the list's comma-separated decimal ids; an entry with anything
 * else in it ("10x", "-1", " ") matches nothing */
static bool uid_listed(const char *list, unsigned long id)
{
    const char *p = list;

    while (p != NULL && *p != '\0') {
        char *end;
        unsigned long v;

        if (*p >= '0' && *p <= '9') {
            v = strtoul(p, &end, 10);
            if (v == id && (*end == ',' || *end == '\0'))
                return true;
        }
        p = strchr(p, ',');
        if (p != NULL)
            p++;
    }
    return false;
}

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59 /* Linux >= 4.13 */
#endif

/* The kernel caps a process's supplementary groups at NGROUPS_MAX (65536): a longer answer
 * is not believed. */
#define MC_AGENT_PEER_GROUPS_MAX 65536u

/*
 * true when one of the peer's supplementary groups (SO_PEERGROUPS, the groups it had at
 * connect) is on allow_gids. The first try uses a stack buffer that holds the usual few
 * groups; ERANGE says how much is needed, and one larger buffer is tried, bounded. A kernel
 * without SO_PEERGROUPS, or any other failure, admits nobody by this path.
 */
static bool peer_group_listed(const char *list, int sock)
{
    gid_t small[64], *g = small;
    socklen_t len = sizeof(small), cap = sizeof(small);
    bool found = false;

    if (getsockopt(sock, SOL_SOCKET, SO_PEERGROUPS, g, &len) != 0) {
        if (errno != ERANGE || len <= sizeof(small) ||
            len > MC_AGENT_PEER_GROUPS_MAX * sizeof(gid_t))
            return false;
        cap = len;
        g = malloc(cap);
        if (g == NULL)
            return false;
        if (getsockopt(sock, SOL_SOCKET, SO_PEERGROUPS, g, &len) != 0) {
            free(g);
            return false;
        }
    }
    if (len > cap) /* never read past the buffer, whatever the kernel said */
        len = cap;
    for (size_t i = 0; i < len / sizeof(gid_t) && !found; i++)
        found = uid_listed(list, g[i]);
    if (g != small)
        free(g);
    return found;
}

/*
 * Who may connect: root and the agent's own uid always; then any uid on allow_uids, and any
 * peer whose primary or supplementary group is on allow_gids. The lists add to the
 * default, they never narrow it.
 */
static bool cred_allowed(const struct mc_agent *a, int sock, const struct ucred *cr)
{
    if (cr->uid == 0 || cr->uid == getuid())
        return true;
    if (a->cfg.allow_uids != NULL && uid_listed(a->cfg.allow_uids, cr->uid))
        return true;
    if (a->cfg.allow_gids == NULL)
        return false;
    return uid_listed(a->cfg.allow_gids, cr->gid) || peer_group_listed(a->cfg.allow_gids, sock);
}

static void send_welcome(int sock, const struct mc_shm_welcome *w, const int *fds, int nfds)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * (MC_SHM_MAX_SEGS + 1))];
    } ctl;
    struct iovec iov = {.iov_base = (void *)w, .iov_len = sizeof(*w)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

    if (nfds > 0) {
        struct cmsghdr *cm;

        memset(&ctl, 0, sizeof(ctl));
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    }
    (void)sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void refuse(int sock, int status)
{
    struct mc_shm_welcome w;

    memset(&w, 0, sizeof(w));
    w.magic = MC_SHM_MAGIC;
    w.abi = MC_SHM_ABI;
    w.status = status;
    send_welcome(sock, &w, NULL, 0);
}

static void refused_log_flush(struct mc_agent *a, uint64_t now)
{
    mc_warn("refused %" PRIu64 " more connections in the last %" PRIu64 " ms (not on the "
            "allow-list), last uid %u", a->refused_unlogged, now - a->refused_log_ms,
            a->refused_last_uid);
    a->refused_unlogged = 0;
}

/* A refused uid may connect in a loop: one line a second at most, with the count of those
 * not logged (the stats count every one). */
static void refused_log(struct mc_agent *a, const struct ucred *cr, bool have_cred)
{
    uint64_t now = agent_now_ms();

    a->refused_last_uid = have_cred ? (unsigned)cr->uid : UINT_MAX;
    if (a->refused_log_ms != 0 && now - a->refused_log_ms < 1000) {
        a->refused_unlogged++;
        return;
    }
    if (a->refused_unlogged != 0)
        refused_log_flush(a, now);
    if (have_cred)
        mc_warn("client pid %d uid %u refused: not on the allow-list", (int)cr->pid,
                (unsigned)cr->uid);
    else
        mc_warn("a client refused: its credentials cannot be read");
    a->refused_log_ms = now;
}

/* Connections of one uid that are not closing. */
static uint64_t uid_clients(const struct mc_agent *a, uid_t uid)
{
    const struct client *c;
    uint64_t n = 0;

    for (c = a->clients; c != NULL; c = c->next) {
        if (c->uid == uid && c->state != CL_CLOSING)
            n++;
    }
    return n;
}

static void on_accept(struct mc_agent *a, int fd)
{
    struct ucred cr = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    socklen_t len = sizeof(cr);
    struct client *c;
    bool have_cred = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0;

    if (!have_cred || !cred_allowed(a, fd, &cr)) {
        refused_log(a, &cr, have_cred);
        refuse(fd, MC_ERR_DENIED);
        close(fd);
        a->st.refused++;
        a->st.refused_denied++;
        return;
    }
    /* the per-uid cap keeps one client (or one user's runaway pool of them) from taking
     * every slot of max_clients; root and the agent's own uid get no exemption, since the
     * default allow-list is exactly those two */
    if (a->nclients >= a->cfg.max_clients || a->draining ||
        uid_clients(a, cr.uid) >= a->max_per_uid) {
        if (!a->draining && a->nclients < a->cfg.max_clients)
            mc_debug("client pid %d uid %u refused: it holds max_clients_per_uid (%" PRIu64
                     ") connections", (int)cr.pid, (unsigned)cr.uid, a->max_per_uid);
        refuse(fd, a->draining ? MC_ERR_UNAVAILABLE : MC_ERR_BUSY);
        close(fd);
        a->st.refused++;
        if (!a->draining)
            a->st.refused_busy++;
        return;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        refuse(fd, MC_ERR_NOMEM);
        close(fd);
        return;
    }
    c->a = a;
    c->sock = fd;
    c->uid = cr.uid;
    c->pid = cr.pid;
    c->id = ++a->next_client_id;
    c->state = CL_HANDSHAKE;
    c->efd = -1;
    c->accepted_ms = agent_now_ms();
    c->refs = 1;
    c->next = a->clients;
    a->clients = c;
    a->nclients++;
    arm_sock_poll(a, c);
}

/* One message and at most one fd (more fds, or a truncated message: all closed, -1). */
static ssize_t recv_with_fd(int sock, void *buf, size_t len, int *fd_p)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * 4)];
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *cm;
    ssize_t n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    int nfds = 0, fds[4];

    *fd_p = -1;
    for (cm = CMSG_FIRSTHDR(&msg); n >= 0 && cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

            memcpy(fds, CMSG_DATA(cm), sizeof(int) * (size_t)k);
            nfds = k;
        }
    }
    if (nfds == 1 && !(msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC))) {
        *fd_p = fds[0];
        return n;
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    return nfds > 1 || (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) ? -2 : n;
}

static bool fd_is_eventfd(int fd)
{
    char path[64], link[64];
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, link, sizeof(link) - 1);
    if (n <= 0)
        return false;
    link[n] = '\0';
    return strcmp(link, "anon_inode:[eventfd]") == 0;
}

/* Map an arena the client registered: its own sealed memfd, exactly the size it says.
 * Registrations are not answered, so an arena over the client's or the agent's arena limit
 * is remembered as refused (not mapped: a sparse memfd costs the client nothing, but each
 * mapping takes the agent's address space, and enough of them leave it none for new
 * clients) and the ops naming it fail; the connection stays usable. */
static int arena_add(struct mc_agent *a, struct client *c, const struct mc_shm_arena_msg *m,
                     int fd)
{
    struct arena *ar;
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    void *p;

    if (m->magic != MC_SHM_MAGIC || m->type != MC_SHM_ARENA_ADD || m->reserved != 0 ||
        m->arena_id >= MC_SHM_MAX_ARENAS || c->arenas[m->arena_id].base != NULL ||
        c->arenas[m->arena_id].refused != 0 || m->size == 0 || seals < 0 ||
        (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW) ||
        fstat(fd, &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size != m->size)
        return MC_ERR_PROTO;
    ar = &c->arenas[m->arena_id];
    /* checked before the mapping, each sum without overflow (m->size is the client's) */
    if (m->size > a->cfg.arena_bytes_per_client - c->arena_bytes ||
        m->size > a->cfg.arena_bytes_total - a->arena_bytes) {
        ar->refused = MC_ERR_NO_SPACE;
        a->st.arenas_refused++;
        mc_warn("client %u (pid %d uid %u): arena of %" PRIu64 " bytes refused: %s arena "
                "limit (%" PRIu64 " bytes mapped of %" PRIu64 ")", c->id, (int)c->pid,
                (unsigned)c->uid, m->size,
                m->size > a->cfg.arena_bytes_per_client - c->arena_bytes ? "over the client's"
                                                                          : "over the agent's",
                m->size > a->cfg.arena_bytes_per_client - c->arena_bytes ? c->arena_bytes
                                                                          : a->arena_bytes,
                m->size > a->cfg.arena_bytes_per_client - c->arena_bytes
                    ? a->cfg.arena_bytes_per_client
                    : a->cfg.arena_bytes_total);
        return 0;
    }
    p = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        ar->refused = MC_ERR_NOMEM;
        a->st.arenas_refused++;
        mc_warn("client %u (pid %d): arena of %" PRIu64 " bytes not mapped: %s", c->id,
                (int)c->pid, m->size, strerror(errno));
        return 0;
    }
    ar->base = p;
    ar->size = m->size;
    c->arena_bytes += m->size;
    a->arena_bytes += m->size;
    return 0;
}

/* After the handshake the socket carries arena registrations only; anything else, or a
 * closed socket, ends the client. */
static void client_read_socket(struct mc_agent *a, struct client *c)
{
    struct mc_shm_arena_msg m;

    while (c->state == CL_ACTIVE) {
        int fd = -1, err;
        ssize_t n = recv_with_fd(c->sock, &m, sizeof(m), &fd);

        if (n < 0 && n != -2 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n == 0) {
            client_close(a, c, "socket closed");
            return;
        }
        err = n == (ssize_t)sizeof(m) && fd >= 0 ? arena_add(a, c, &m, fd) : MC_ERR_PROTO;
        if (fd >= 0)
            close(fd); /* the mapping keeps the arena */
        if (err != 0) {
            mc_warn("client %u (pid %d): bad arena registration: %s", c->id, (int)c->pid,
                    mc_strerror(err));
            client_close(a, c, "bad socket message");
            return;
        }
    }
}

/* The hello arrived (or the socket closed): answer with the region and the segment. */
static void client_handshake(struct mc_agent *a, struct client *c)
{
    struct mc_shm_hello h;
    struct mc_shm_welcome w;
    struct mc_shm_layout lay;
    char name[32];
    int err, fds[1 + MC_SHM_MAX_SEGS], rfd = -1;
    ssize_t n = recv_with_fd(c->sock, &h, sizeof(h), &rfd);

    if (n != (ssize_t)sizeof(h) || h.magic != MC_SHM_MAGIC || h.abi != MC_SHM_ABI ||
        (h.flags & ~MC_SHM_HELLO_F_EVENTFD) != 0 ||
        ((h.flags & MC_SHM_HELLO_F_EVENTFD) != 0) != (rfd >= 0) ||
        (rfd >= 0 && !fd_is_eventfd(rfd))) {
        if (rfd >= 0)
            close(rfd);
        if (n > 0)
            refuse(c->sock, MC_ERR_PROTO);
        client_close(a, c, n <= 0 ? "closed before hello" : "bad hello");
        return;
    }
    c->efd = rfd;
    err = mc_shm_layout_init(&lay, (uint32_t)a->cfg.sq_entries, (uint32_t)a->cfg.sq_entries,
                             (uint32_t)a->cfg.staging_slot_size, (uint32_t)a->cfg.staging_slots,
                             (uint32_t)a->cfg.max_inflight);
    snprintf(name, sizeof(name), "mc-client-%u", c->id);
    if (err == 0)
        err = mc_shm_region_create(name, &lay, c->id, &c->r);
    if (err == 0) {
        c->lay = c->r->lay;
        c->puts = calloc(c->lay.max_inflight, sizeof(*c->puts));
        c->nleases = 2 * c->lay.max_inflight;
        c->leases = calloc(c->nleases, sizeof(*c->leases));
        c->lease_free = calloc(c->nleases, sizeof(*c->lease_free));
        for (uint32_t k = 0; c->lease_free != NULL && k < c->nleases; k++)
            c->lease_free[k] = c->nleases - 1 - k;
        c->nlease_free = c->lease_free != NULL ? c->nleases : 0;
        c->copies = calloc(c->lay.max_inflight, sizeof(*c->copies));
        c->arenas = calloc(MC_SHM_MAX_ARENAS, sizeof(*c->arenas));
        if (a->metrics != NULL) {
            c->times_mask = 1;
            while (c->times_mask + 1 < 2 * c->lay.max_inflight + 2)
                c->times_mask = c->times_mask * 2 + 1;
            c->times = calloc((size_t)c->times_mask + 1, sizeof(*c->times));
            if (c->times == NULL)
                err = MC_ERR_NOMEM;
        }
        if (c->puts == NULL || c->leases == NULL || c->copies == NULL || c->arenas == NULL)
            err = MC_ERR_NOMEM;
    }
    if (err != 0) {
        mc_warn("client %u: cannot set up its region: %s", c->id, mc_strerror(err));
        refuse(c->sock, err);
        client_close(a, c, "no region");
        return;
    }
    memset(&w, 0, sizeof(w));
    w.magic = MC_SHM_MAGIC;
    w.abi = MC_SHM_ABI;
    w.client_id = c->id;
    w.region_size = c->lay.region_size;
    fds[0] = c->r->fd;
    if (a->seg_size != 0) {
        w.seg_size[w.nsegs] = a->seg_size;
        fds[1 + w.nsegs++] = a->seg_ro_fd;
    }
    if (a->land_ro_fd >= 0) { /* at a->land_idx: reads from peers land there */
        w.seg_size[w.nsegs] = a->land_size;
        fds[1 + w.nsegs++] = a->land_ro_fd;
    }
    send_welcome(c->sock, &w, fds, 1 + (int)w.nsegs);
    c->state = CL_ACTIVE;
    mc_debug("client %u: pid %d uid %u connected", c->id, (int)c->pid, (unsigned)c->uid);
    arm_sock_poll(a, c); /* from now on the socket only tells life */
}

/* ---------------------------------------------------------------------------------------- */
/* the loop */

static int arm_read(struct mc_agent *a, int fd, void *buf, unsigned len, enum ud_tag tag)
{
    struct io_uring_sqe *sqe = agent_get_sqe(a);

    if (sqe == NULL)
        return MC_ERR_NOMEM;
    io_uring_prep_read(sqe, fd, buf, len, 0);
    io_uring_sqe_set_data64(sqe, ud_make(NULL, tag));
    return 0;
}

static int arm_accept(struct mc_agent *a)
{
    struct io_uring_sqe *sqe = agent_get_sqe(a);

    if (sqe == NULL)
        return MC_ERR_NOMEM;
    io_uring_prep_multishot_accept(sqe, a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    io_uring_sqe_set_data64(sqe, ud_make(NULL, UD_ACCEPT));
    return 0;
}

static void on_tick(struct mc_agent *a)
{
    uint64_t now = agent_now_ms();
    struct client *c, *next;
    uint32_t i;

    if (a->master != NULL) {
        mc_master_node_heartbeat(a->master, a->node);
        mc_master_tick(a->master);
    } else {
        cluster_tick(a);
    }
    if (a->refused_unlogged != 0 && now - a->refused_log_ms >= 1000) {
        refused_log_flush(a, now);
        a->refused_log_ms = now;
    }
    for (c = a->clients; c != NULL; c = next) {
        next = c->next;
        if (c->state == CL_HANDSHAKE && now - c->accepted_ms > HANDSHAKE_MS) {
            client_close(a, c, "no hello in time");
            continue;
        }
        if (c->state != CL_ACTIVE)
            continue;
        /* a put whose writes to peers outlive its deadline (a stalled owner) is answered
         * now: MC_ERR_TIMEOUT, it will not be published; its image stays ours until UCX
         * reads it no more, then the put is revoked */
        for (i = 0; c->nputs != 0 && i < c->lay.max_inflight; i++) {
            struct put *p = &c->puts[i];

            if (p->used && p->finishing && !p->answered && p->sends > 0 &&
                now > p->deadline_ms) {
                p->answered = true;
                agent_cqe_res(c, p->user_data, MC_ERR_TIMEOUT);
            }
            /* a started put the client feeds no data: its reserved space goes back to
             * the pool (the client learns it when it names the handle again) */
            if (p->used && !p->oneshot && !p->waiting && !p->finishing &&
                !p->revoke_pending && !p->abort_pending && p->busy == 0 &&
                now - p->active_ms > a->cfg.put_idle_ms) {
                mc_debug("client %u: put of version %" PRIu64 " idle for %" PRIu64
                         " ms: revoked", c->id, p->version, now - p->active_ms);
                a->st.puts_idle_revoked++;
                put_revoke(a, p);
                p->expired = true;
            }
        }
        /* leases the client never released end at their deadline (the master ends them
         * too, at its own, later one) */
        for (i = 0; i < c->nleases; i++) {
            if (c->leases[i].used && !c->leases[i].waiting &&
                now > c->leases[i].deadline_ms + a->cfg.lease_margin_ms)
                lease_end(a, c, i);
        }
        if (now - c->idle_window_ms >= 1000) {
            if (c->idle_wakes > a->cfg.idle_wakeups_max) {
                c->violations = VIOLATIONS_MAX;
                c->violation = "too many empty doorbells";
            }
            c->idle_wakes = 0;
            c->idle_window_ms = now;
        }
    }
}

/* No new clients and no new ops; stop once what is under way is answered (or after the
 * op deadline). */
static void drain_start(struct mc_agent *a)
{
    struct client *c;

    a->draining = true;
    a->drain_deadline_ms = agent_now_ms() + a->cfg.op_timeout_ms;
    for (c = a->clients; c != NULL; c = c->next) {
        if (c->state == CL_ACTIVE) /* libmc fails new calls with UNAVAILABLE */
            atomic_store_explicit(&c->r->hdr->agent_state, 1, memory_order_release);
    }
}

void agent_fatal(struct mc_agent *a, int status)
{
    if (a->exit_status == 0)
        a->exit_status = status;
    if (!a->draining)
        drain_start(a);
}

static void handle_cqe(struct mc_agent *a, struct io_uring_cqe *cqe)
{
    uint64_t ud = io_uring_cqe_get_data64(cqe);
    enum ud_tag tag = (enum ud_tag)(ud & 7);
    struct client *c = (struct client *)(uintptr_t)(ud & ~UINT64_C(7));

    switch (tag) {
    case UD_UCX:
        cluster_on_cqe(a, c, cqe->res);
        break;
    case UD_ACCEPT:
        if (cqe->res >= 0)
            on_accept(a, cqe->res);
        if (!(cqe->flags & IORING_CQE_F_MORE) && !a->stopping)
            arm_accept(a);
        break;
    case UD_SOCK:
        /* the poll's reference keeps c alive through the close */
        if (c->state == CL_HANDSHAKE && cqe->res > 0 && (cqe->res & POLLIN)) {
            client_handshake(a, c);
        } else if (c->state == CL_ACTIVE && cqe->res > 0 && (cqe->res & POLLIN)) {
            client_read_socket(a, c); /* arenas; a hang-up reads as 0 bytes */
            if (c->state == CL_ACTIVE && (cqe->res & (POLLHUP | POLLRDHUP | POLLERR)))
                client_close(a, c, "socket closed");
            if (c->state == CL_ACTIVE)
                arm_sock_poll(a, c);
        } else if (c->state != CL_CLOSING) {
            client_close(a, c, "socket closed");
        }
        agent_client_put_ref(a, c);
        break;
    case UD_EFD:
        c->efd_busy = false;
        agent_client_put_ref(a, c);
        break;
    case UD_FUTEX:
        c->futex_armed = false;
        if (c->state == CL_ACTIVE && cqe->res == 0 && mc_ring_ready(c->r->sq) == 0)
            c->idle_wakes++; /* woken with nothing to do */
        agent_client_put_ref(a, c);
        break;
    case UD_TIMER:
        on_tick(a);
        if (!a->stopping)
            arm_read(a, a->timer_fd, &a->timer_buf, sizeof(a->timer_buf), UD_TIMER);
        break;
    case UD_SIGNAL:
        if (cqe->res > 0 && !a->draining) {
            mc_info("signal received: finishing in-flight operations, then stopping");
            mc_notify_stopping();
            drain_start(a);
        } else if (cqe->res > 0) {
            a->stopping = true; /* a second signal: stop now */
        }
        if (!a->stopping)
            arm_read(a, a->signal_fd, a->signal_buf, sizeof(a->signal_buf), UD_SIGNAL);
        break;
    default:
        break;
    }
}

/* Going to sleep: ask every client to ring, re-check, and wait on their doorbells. */
static bool arm_doorbells(struct mc_agent *a)
{
    struct client *c;

    for (c = a->clients; c != NULL; c = c->next) {
        if (c->state == CL_ACTIVE)
            atomic_store_explicit(&c->r->sq->need_wakeup, 1, memory_order_seq_cst);
    }
    atomic_thread_fence(memory_order_seq_cst); /* pairs with the client's fence between
                                                  publishing its tail and reading the flag */
    for (c = a->clients; c != NULL; c = c->next) {
        struct io_uring_sqe *sqe;
        uint32_t val;

        if (c->state != CL_ACTIVE)
            continue;
        val = atomic_load_explicit(&c->r->sq->futex, memory_order_seq_cst);
        if (mc_ring_ready(c->r->sq) != 0 || c->copy_count != 0)
            return false; /* work arrived: do not sleep */
        if (!a->futex_ops || c->futex_armed || (sqe = agent_get_sqe(a)) == NULL)
            continue;
        /* a bump after `val` was read makes the wait return at once: nothing is lost */
        io_uring_prep_rw(OP_FUTEX_WAIT, sqe, FUTEX2_U32, &c->r->sq->futex, 0, val);
        sqe->addr3 = FUTEX_BITSET_MATCH_ANY;
        io_uring_sqe_set_data64(sqe, ud_make(c, UD_FUTEX));
        c->futex_armed = true;
        c->refs++;
    }
    return true;
}

static void clear_doorbells(struct mc_agent *a)
{
    struct client *c;

    for (c = a->clients; c != NULL; c = c->next) {
        if (c->state == CL_ACTIVE)
            atomic_store_explicit(&c->r->sq->need_wakeup, 0, memory_order_relaxed);
    }
}

/* Nothing under way for any client: no copy queued, every op answered. */
static bool clients_idle(const struct mc_agent *a)
{
    const struct client *c;

    if (a->delayed != NULL)
        return false;
    for (c = a->clients; c != NULL; c = c->next) {
        if (c->state == CL_ACTIVE && (c->copy_count != 0 || c->inflight != 0))
            return false;
    }
    return true;
}

/* One pass over the clients: take submissions, move bytes, answer. True when any work. */
static bool serve_clients(struct mc_agent *a)
{
    uint64_t budget = a->cfg.copy_slice, now = agent_now_ms();
    struct client *c, *next;
    bool work = false;

    if (a->delayed != NULL) {
        post_delayed(a);
        work = true; /* keep polling until they are all out */
    }
    for (c = a->clients; c != NULL; c = c->next) {
        if (c->state == CL_ACTIVE && client_drain_sq(a, c))
            work = true;
    }
    /* copies: one round over the clients per turn, copy_slice bytes in all, so timers,
     * sockets and the other rings get their turn between slices */
    for (c = a->clients; c != NULL && budget > 0; c = c->next) {
        if (c->state != CL_ACTIVE || c->copy_count == 0)
            continue;
        budget -= copy_step(a, c, budget, now);
        work = true;
    }
    for (c = a->clients; c != NULL; c = next) {
        next = c->next;
        if (c->state != CL_ACTIVE)
            continue;
        if (c->cq_dirty)
            client_wake(a, c);
        if (c->violations >= VIOLATIONS_MAX) {
            mc_warn("client %u (pid %d) broke the protocol (%s): disconnected", c->id,
                    (int)c->pid, c->violation != NULL ? c->violation : "?");
            client_close(a, c, "protocol violations");
        }
    }
    return work;
}

int mc_agent_run(struct mc_agent *a)
{
    struct io_uring_cqe *cqe;
    unsigned head, n;
    int err;

    err = arm_accept(a);
    if (err == 0)
        err = arm_read(a, a->timer_fd, &a->timer_buf, sizeof(a->timer_buf), UD_TIMER);
    if (err == 0)
        err = arm_read(a, a->signal_fd, a->signal_buf, sizeof(a->signal_buf), UD_SIGNAL);
    if (err != 0)
        return err;
    a->last_active_ns = now_ns();
    if (a->metrics != NULL) {
        agent_metrics_publish(a);
        mc_metrics_set_ready(a->metrics, true); /* the ready file is written: we serve */
    }
    while (!a->stopping) {
        bool work = serve_clients(a);
        uint64_t t;

        if (a->cl != NULL && cluster_turn(a))
            work = true;
        t = now_ns();
        /* the metrics page reads a copy at most ~10 ms old (and the timer wakes an idle
         * loop every tick_ms) */
        if (a->metrics != NULL && t - a->metrics_pub_ns >= 10000000u) {
            a->metrics_pub_ns = t;
            agent_metrics_publish(a);
        }

        if (a->draining && (clients_idle(a) || t / 1000000u >= a->drain_deadline_ms))
            break; /* every op answered (or the grace ran out): now stop */

        if (work)
            a->last_active_ns = t;
        if (work || t - a->last_active_ns < a->cfg.agent_spin_us * 1000u ||
            !arm_doorbells(a) || (a->cl != NULL && !cluster_arm(a))) {
            io_uring_submit(&a->ring); /* spinning: no waiting */
            /* an idle spin yields the CPU: on a small machine the client we wait for may
             * be queued behind us on this very core (docs/decisions.md) */
            if (!work)
                sched_yield();
        } else {
            /* without the futex opcodes, poll the rings every millisecond instead */
            struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};

            if (a->futex_ops && !a->draining)
                io_uring_submit_and_wait(&a->ring, 1);
            else
                io_uring_submit_and_wait_timeout(&a->ring, &cqe, 1, &ts, NULL);
            clear_doorbells(a);
        }
        n = 0;
        io_uring_for_each_cqe(&a->ring, head, cqe)
        {
            handle_cqe(a, cqe);
            n++;
        }
        io_uring_cq_advance(&a->ring, n);
    }
    if (a->metrics != NULL)
        mc_metrics_set_health(a->metrics, "stopping");
    return a->exit_status;
}

void mc_agent_stop(struct mc_agent *a)
{
    a->stopping = true;
}

unsigned mc_agent_listen_port(const struct mc_agent *a)
{
    return cluster_listen_port(a);
}

/* ---------------------------------------------------------------------------------------- */

/* Whether a live agent accepts connections at path (a socket file left by an agent that
 * died refuses them). */
static bool socket_is_live(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    bool live;
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path))
        return false; /* listen_on reports it */
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return live;
}

static int listen_on(const char *path, int *fd_p)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd, err;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        mc_error("socket path too long: %s", path);
        return MC_ERR_INVALID;
    }
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return MC_ERR_IO;
    /* a socket file left by an agent that died is replaced; a live agent is not */
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        mc_error("another agent is listening on %s", path);
        close(fd);
        return MC_ERR_EXISTS;
    }
    unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 128) != 0) {
        err = errno;
        mc_error("cannot listen on %s: %s", path, strerror(err));
        close(fd);
        return err == EACCES ? MC_ERR_DENIED : MC_ERR_IO;
    }
    chmod(path, 0666); /* access is decided by SO_PEERCRED and the allow-list */
    *fd_p = fd;
    return 0;
}

/* Fault the whole segment in now: a first write to a shmem page costs an allocation, a
 * zeroing and a fault, which would otherwise land on the put that touches it. */
static void seg_prefault(uint8_t *base, uint64_t size)
{
    uint64_t t0 = now_ns(), off;
    long page = sysconf(_SC_PAGESIZE);

    if (madvise(base, size, MADV_POPULATE_WRITE) != 0) {
        /* kernels before 5.14: touch each page ourselves */
        for (off = 0; off < size; off += (uint64_t)page)
            ((volatile uint8_t *)base)[off] = 0;
    }
    mc_info("prefaulted %" PRIu64 " bytes in %" PRIu64 " ms", size, (now_ns() - t0) / 1000000u);
}

/* A segment clients map read-only: a memfd sealed for size, future writes and seals, our
 * writable map, a read-only fd. */
static int seg_create(struct mc_agent *a, const char *name, uint64_t size, bool hugepages,
                      int *fd_p, int *ro_fd_p, uint8_t **map_p, bool *huge_p)
{
    int err = mc_shm_memfd_create(name, size, hugepages, fd_p, huge_p);

    (void)a;
    if (err == 0)
        err = mc_shm_memfd_seal_size(*fd_p);
    if (err == 0)
        err = mc_shm_map(*fd_p, size, true, (void **)map_p);
    /* after our writable mapping exists, no one may map it writable again: clients get a
     * read-only fd, but could reopen it read-write through /proc/self/fd */
    if (err == 0)
        err = mc_shm_memfd_seal_future_write(*fd_p);
    /* last: a client holding the read-only fd could otherwise add seals of its own */
    if (err == 0)
        err = mc_shm_memfd_seal_seals(*fd_p);
    if (err == 0)
        err = mc_shm_fd_reopen_ro(*fd_p, ro_fd_p);
    return err;
}

static char *dup_or_null(const char *s)
{
    return s == NULL ? NULL : strdup(s);
}

int mc_agent_create(const struct mc_agent_config *cfg, const char *socket_path,
                    struct mc_agent **a_p)
{
    struct mc_master_seg_desc d;
    struct io_uring_probe *probe;
    struct itimerspec its;
    char host[64];
    sigset_t sigs;
    struct mc_agent *a;
    int err;

    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return MC_ERR_NOMEM;
    a->cfg = *cfg;
    a->max_per_uid = cfg->max_clients_per_uid;
    if (a->max_per_uid == 0)
        a->max_per_uid = cfg->max_clients - cfg->max_clients / 4; /* >= 1: max_clients >= 1 */
    a->open_put_limit = cfg->open_put_bytes_per_client;
    if (a->open_put_limit == 0)
        a->open_put_limit = cfg->master_addr == NULL && cfg->dram / 4 < (UINT64_C(1) << 30)
                                ? cfg->dram / 4
                                : UINT64_C(1) << 30;
    a->cfg.socket = NULL;
    a->cfg.node_name = dup_or_null(cfg->node_name);
    a->cfg.master_addr = dup_or_null(cfg->master_addr);
    a->cfg.listen = dup_or_null(cfg->listen);
    a->cfg.domain = dup_or_null(cfg->domain);
    a->cfg.cluster_token = dup_or_null(cfg->cluster_token);
    a->cfg.allow_uids = dup_or_null(cfg->allow_uids);
    a->cfg.allow_gids = dup_or_null(cfg->allow_gids);
    a->cfg.metrics_listen = NULL; /* read in this call only */
    a->socket_path = strdup(socket_path);
    a->seg_fd = a->seg_ro_fd = a->listen_fd = a->timer_fd = a->signal_fd = -1;
    a->land_fd = a->land_ro_fd = -1;
    if (a->socket_path == NULL) {
        err = MC_ERR_NOMEM;
        goto err_destroy;
    }
    /* before the segments: allocating (and prefaulting) gigabytes only to find the socket
     * taken would make a second agent slow to fail and squeeze the live one meanwhile;
     * listen_on checks again, for an agent that started in between */
    if (socket_is_live(a->socket_path)) {
        mc_error("another agent is listening on %s", a->socket_path);
        err = MC_ERR_EXISTS;
        goto err_destroy;
    }
    /* clients of the same uid must not reach our memory through /proc/<pid>/fd or mem */
    prctl(PR_SET_DUMPABLE, 0);
    /* block before UCX starts its threads (cluster mode), so they inherit the mask and
     * SIGTERM reaches only our signalfd */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* the metrics thread starts after the mask (it inherits it) and before the cluster
     * join, so /ready says 503 while the agent joins */
    if (cfg->metrics_listen != NULL) {
        err = mc_metrics_create(mc_agent_metrics_table, cfg->metrics_listen, &a->metrics,
                                NULL);
        if (err != 0)
            goto err_destroy;
        a->h_put = mc_metrics_histo(a->metrics, AM_PUT_LATENCY);
        a->h_get = mc_metrics_histo(a->metrics, AM_GET_LATENCY);
    }

    a->seg_size = cfg->dram;
    if (a->seg_size != 0) {
        err = seg_create(a, "mc-dram", a->seg_size, cfg->hugepages, &a->seg_fd, &a->seg_ro_fd,
                         &a->seg, &a->seg_huge);
        if (err != 0) {
            mc_error("DRAM segment of %" PRIu64 " bytes: %s", a->seg_size, mc_strerror(err));
            goto err_destroy;
        }
        if (cfg->prefault)
            seg_prefault(a->seg, a->seg_size);
        if (cfg->hugepages && !a->seg_huge)
            mc_warn("no huge pages available: the DRAM segment uses normal pages");
    }

    if (cfg->master_addr != NULL) {
        /* cluster mode: reads from peers land in a segment of their own, which clients map
         * read-only like the DRAM segment */
        bool huge = false;

        a->land_size = cfg->landing;
        err = seg_create(a, "mc-landing", a->land_size, false, &a->land_fd, &a->land_ro_fd,
                         &a->land_base, &huge);
        if (err == 0)
            err = mc_alloc_create(a->land_size, MC_SHM_CHUNK / 16, &a->land);
        if (err != 0) {
            mc_error("landing segment of %" PRIu64 " bytes: %s", a->land_size,
                     mc_strerror(err));
            goto err_destroy;
        }
        if (cfg->prefault)
            seg_prefault(a->land_base, a->land_size);
        a->land_idx = a->seg_size != 0 ? 1 : 0;
        a->seg_id = UINT32_MAX;
        err = cluster_create(a);
        if (err != 0)
            goto err_destroy;
    } else {
        err = mc_master_create(&cfg->master, NULL, NULL, &a->master);
        if (err != 0)
            goto err_destroy;
        if (cfg->node_name == NULL && gethostname(host, sizeof(host)) != 0)
            strcpy(host, "local");
        host[sizeof(host) - 1] = '\0';
        err = mc_master_node_register(a->master, cfg->node_name ? cfg->node_name : host, NULL,
                                      &a->node);
        if (err != 0)
            goto err_destroy;
        d = (struct mc_master_seg_desc){.node = a->node, .kind = MC_SEG_DRAM,
                                        .base = (uint64_t)(uintptr_t)a->seg,
                                        .size = a->seg_size};
        err = mc_master_segment_mount(a->master, &d, &a->seg_id);
        if (err == 0)
            err = ml_create_local(a->master, &a->ml);
        if (err != 0)
            goto err_destroy;
    }

    err = io_uring_queue_init(UR_ENTRIES, &a->ring, 0);
    if (err < 0) {
        mc_error("io_uring_queue_init: %s", strerror(-err));
        err = MC_ERR_IO;
        goto err_destroy;
    }
    probe = io_uring_get_probe_ring(&a->ring);
    a->futex_ops = probe != NULL && io_uring_opcode_supported(probe, OP_FUTEX_WAIT) &&
                   io_uring_opcode_supported(probe, OP_FUTEX_WAKE);
    io_uring_free_probe(probe);
    if (!a->futex_ops)
        mc_warn("kernel without io_uring futex ops: polling client rings every 1 ms");

    a->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    its.it_interval.tv_sec = (time_t)(cfg->master.tick_ms / 1000);
    its.it_interval.tv_nsec = (long)(cfg->master.tick_ms % 1000) * 1000000L;
    its.it_value = its.it_interval;
    a->signal_fd = signalfd(-1, &sigs, SFD_CLOEXEC);
    if (a->timer_fd < 0 || a->signal_fd < 0 || timerfd_settime(a->timer_fd, 0, &its, NULL) != 0) {
        err = MC_ERR_IO;
        goto err_destroy;
    }
    err = listen_on(a->socket_path, &a->listen_fd);
    if (err != 0)
        goto err_destroy;
    mc_info("agent up (%s): socket %s, DRAM %" PRIu64 " bytes%s, io_uring futex %s",
            a->cl != NULL ? "cluster" : "standalone", a->socket_path, a->seg_size,
            a->seg_huge ? " (huge pages)" : "", a->futex_ops ? "yes" : "no");
    *a_p = a;
    return 0;

err_destroy:
    mc_agent_destroy(a);
    return err;
}

void mc_agent_destroy(struct mc_agent *a)
{
    struct client *c;

    if (a == NULL)
        return;
    while (a->delayed != NULL) {
        struct delayed *d = a->delayed;

        a->delayed = d->next;
        if (d->p == NULL)
            d->c->refs--; /* the client goes below anyway */
        free(d);
    }
    for (c = a->clients; c != NULL;) {
        struct client *next = c->next;

        if (c->state != CL_CLOSING)
            client_close(a, c, "agent stopping"); /* may free it */
        c = next;
    }
    /* transfers and master calls under way end now (their callbacks see closing clients),
     * before the clients they hold go */
    if (a->cl != NULL)
        cluster_leave(a);
    cluster_destroy(a);
    ml_destroy(a->ml);
    a->ml = NULL;
    while ((c = a->clients) != NULL) {
        a->clients = c->next; /* io_uring is torn down below: drop the rest now */
        c->next = NULL;
        c->refs = 1;
        agent_client_put_ref(a, c);
    }
    if (a->ring.ring_fd > 0)
        io_uring_queue_exit(&a->ring);
    if (a->listen_fd >= 0) {
        close(a->listen_fd);
        unlink(a->socket_path);
    }
    if (a->timer_fd >= 0)
        close(a->timer_fd);
    if (a->signal_fd >= 0)
        close(a->signal_fd);
    mc_master_destroy(a->master);
    for (int i = 0; i < IMAGE_CACHE; i++) {
        if (a->images[i].p != NULL)
            munmap(a->images[i].p, a->images[i].cap);
    }
    mc_alloc_destroy(a->land);
    if (a->land_base != NULL)
        munmap(a->land_base, a->land_size);
    if (a->land_ro_fd >= 0)
        close(a->land_ro_fd);
    if (a->land_fd >= 0)
        close(a->land_fd);
    if (a->seg != NULL)
        munmap(a->seg, a->seg_size);
    if (a->seg_ro_fd >= 0)
        close(a->seg_ro_fd);
    if (a->seg_fd >= 0)
        close(a->seg_fd);
    mc_metrics_destroy(a->metrics); /* its thread reads nothing of ours: any order */
    free(a->cfg.allow_uids);
    free(a->cfg.allow_gids);
    free(a->cfg.node_name);
    free(a->cfg.master_addr);
    free(a->cfg.listen);
    free(a->cfg.domain);
    if (a->cfg.cluster_token != NULL) {
        memset(a->cfg.cluster_token, 0, strlen(a->cfg.cluster_token));
        free(a->cfg.cluster_token);
    }
    free(a->socket_path);
    free(a);
}
