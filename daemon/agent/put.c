/*
 * The put in the agent (put.h): the state machine, the copies, the image cache.
 */
#include "daemon/agent/put.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <mc/mc.h>
#include <mc/mc_status.h>

#include "daemon/agent/agent_int.h"
#include "daemon/agent/disk_tier.h"
#include "daemon/agent/client.h"
#include "daemon/agent/fault.h"
#include "daemon/agent/holdidx.h"
#include "daemon/agent/mlink.h"
#include "daemon/proto/master_proto.h"
#include "daemon/common/log.h"

/* Pipelining: the image's leading chunks that are copied (and summed) go out while the
 * rest is still being copied, PUT_PIECE bytes at a time. */
#define PUT_PIECE (4u << 20)

/* --- the state machine ------------------------------------------------------------------ */

static const char *const state_names[PUT__STATES] = {
    [PUT_FREE] = "free",           [PUT_EXPIRED] = "expired", [PUT_GRANTING] = "granting",
    [PUT_OPEN] = "open",           [PUT_FINISHING] = "finishing",
    [PUT_ENDING] = "ending",       [PUT_REVOKING] = "revoking",
};

const char *put_state_name(enum put_state s)
{
    return s < PUT__STATES ? state_names[s] : "?";
}

bool put_transition_is_legal(enum put_state from, enum put_state to)
{
    static const uint8_t legal[PUT__STATES] = {
        [PUT_FREE] = 1u << PUT_GRANTING,
        [PUT_EXPIRED] = 1u << PUT_GRANTING | 1u << PUT_FREE,
        [PUT_GRANTING] = 1u << PUT_OPEN | 1u << PUT_FREE,
        [PUT_OPEN] = 1u << PUT_FINISHING | 1u << PUT_REVOKING | 1u << PUT_FREE |
                     1u << PUT_EXPIRED,
        [PUT_FINISHING] = 1u << PUT_ENDING | 1u << PUT_REVOKING | 1u << PUT_FREE,
        [PUT_ENDING] = 1u << PUT_FREE,
        [PUT_REVOKING] = 1u << PUT_FREE | 1u << PUT_EXPIRED,
    };

    return from < PUT__STATES && to < PUT__STATES && (legal[from] >> to & 1) != 0;
}

static bool state_in_use(enum put_state s)
{
    return s != PUT_FREE && s != PUT_EXPIRED;
}

void put_set_state(struct put *p, enum put_state to)
{
    if (!put_transition_is_legal(p->state, to)) {
        mc_error("put of version %" PRIu64 ": illegal transition %s -> %s (a bug: please "
                 "report)", p->version, put_state_name(p->state), put_state_name(to));
        abort();
    }
    if (p->c != NULL && state_in_use(p->state) != state_in_use(to)) {
        if (state_in_use(to))
            p->c->nputs++;
        else
            p->c->nputs--;
    }
    p->state = to;
}

/* --- tables ----------------------------------------------------------------------------- */

int put_attach(struct client *c)
{
    c->puts = calloc(c->lay.max_inflight, sizeof(*c->puts));
    c->copies = calloc(c->lay.max_inflight, sizeof(*c->copies));
    return c->puts == NULL || c->copies == NULL ? MC_ERR_NOMEM : 0;
}

void put_detach(struct client *c)
{
    free(c->puts);
    free(c->copies);
    c->puts = NULL;
    c->copies = NULL;
}

bool put_client_busy(const struct client *c)
{
    return c->copy_count != 0;
}

uint64_t put_t0_ns(const struct client *c, uint64_t h)
{
    const struct put *p;

    if (h >= c->lay.max_inflight)
        return 0;
    p = &c->puts[h];
    return p->state == PUT_OPEN && !p->oneshot ? p->t0_ns : 0;
}

/* A free slot; one whose put was revoked for idleness only when no other is free (its
 * handle answers MC_ERR_TIMEOUT until then, not a newer put's pieces). */
static int put_alloc(struct client *c, uint32_t *h_p)
{
    uint32_t i, expired = UINT32_MAX;

    for (i = 0; i < c->lay.max_inflight; i++) {
        if (c->puts[i].state == PUT_FREE) {
            *h_p = i;
            return 0;
        }
        if (c->puts[i].state == PUT_EXPIRED && expired == UINT32_MAX)
            expired = i;
    }
    if (expired != UINT32_MAX) {
        *h_p = expired;
        return 0;
    }
    return MC_ERR_NOMEM; /* more open puts than this client's table (docs/protocol.md) */
}

/* --- images ----------------------------------------------------------------------------- */

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

void put_images_release(struct mc_agent *a)
{
    for (int i = 0; i < IMAGE_CACHE; i++) {
        if (a->images[i].p != NULL)
            munmap(a->images[i].p, a->images[i].cap);
        a->images[i].p = NULL;
    }
    a->image_cache_bytes = 0;
}

/* --- the life of a put ------------------------------------------------------------------ */

/* Only once no transfer reads the image any more (every send to a peer is final). */
static void put_forget(struct put *p, bool expire)
{
    struct client *c = p->c;

    c->open_put_bytes -= p->open_bytes;
    p->open_bytes = 0;
    free(p->seen);
    p->seen = NULL;
    free(p->trailer);
    p->trailer = NULL;
    free(p->tailhdr);
    p->tailhdr = NULL;
    p->arena = NULL;
    if (p->image != NULL)
        image_put(agent_of(c), p->image, p->image_cap);
    p->image = NULL;
    put_set_state(p, expire ? PUT_EXPIRED : PUT_FREE);
}

/* The put the client names by handle h: one it may send pieces to, end or abort. A
 * one-shot PUT's slot is internal (PUT_DATA/END/ABORT naming it would race its copy); one
 * whose master call or peer writes are under way is not the client's either. */
static struct put *put_get(struct client *c, uint64_t h)
{
    if (h >= c->lay.max_inflight || c->puts[h].state != PUT_OPEN || c->puts[h].oneshot)
        return NULL;
    return &c->puts[h];
}

/* Was handle h revoked for idleness (put_idle_ms)? END and ABORT end that: the handle is
 * free for new puts again. */
static bool put_expired(struct client *c, uint64_t h, bool end)
{
    if (h >= c->lay.max_inflight || c->puts[h].state != PUT_EXPIRED)
        return false;
    if (end)
        put_set_state(&c->puts[h], PUT_FREE);
    return true;
}

/* Abandon at the master (fire-and-forget: the writer's transfers are final) and forget.
 * With writes to peers still reading the image, that waits until they are final: the
 * master frees the blocks at once on a revoke, so no byte of ours may land there later.
 * expire: the handle stays reserved (EXPIRED) afterwards. */
static void put_revoke(struct mc_agent *a, struct put *p, bool expire)
{
    struct ml_req *r;

    if (p->sends != 0) {
        if (p->state != PUT_REVOKING) {
            put_set_state(p, PUT_REVOKING);
            p->failed = true;
            client_get(p->c);
        }
        p->expiring = p->expiring || expire;
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
    put_forget(p, expire || p->expiring);
}

/* Where the bytes go while they arrive: our replica when we hold one, else a buffer that
 * the writes to the replicas are sent from. A PUT from an arena span with no replica here
 * needs no such buffer: its bytes are summed and sent where they lie, only the checksums
 * need a place of their own. */
static int put_image(struct mc_agent *a, struct put *p)
{
    uint64_t len = mc_shm_alloc_len(p->size, p->csum);
    uint8_t *span;
    uint32_t i;

    for (i = 0; i < p->nrep; i++) {
        struct mc_seg *s = agent_seg(a, p->rep[i].seg);

        if ((span = mc_seg_span(s, p->rep[i].offset, len)) != NULL) {
            /* the block was freed and handed to us: what the index had there is gone */
            if (s->held != NULL)
                (void)mc_holdidx_overwrite(s->held, p->rep[i].offset, p->rep[i].len,
                                           p->version);
            p->dst = span;
            p->nremote = p->nrep - 1;
            return 0;
        }
    }
    if (p->nrep == 0) {
        mc_error("put of version %" PRIu64 ": granted no replica (a bug: please report)",
                 p->version);
        return MC_ERR_INTERNAL;
    }
    p->nremote = p->nrep;
    if ((p->oneshot && p->src_arena) || p->data_arena) {
        if (p->csum) {
            p->trailer = malloc(len - mc_shm_trailer_off(p->size));
            if (p->trailer == NULL)
                return MC_ERR_NOMEM;
        }
        if (p->oneshot)
            p->arena = p->src;
        else
            p->stream_arena = true; /* each PUT_DATA's span is its own */
        a->st.puts_from_arena++;
        return 0;
    }
    p->image = image_get(a, len, &p->image_cap);
    if (p->image == NULL)
        return MC_ERR_NOMEM;
    p->dst = p->image;
    return 0;
}

static int copy_queue(struct client *c, uint32_t h, uint8_t opcode, uint64_t user_data,
                      uint64_t obj_off, uint64_t len, const uint8_t *src, uint64_t uaddr,
                      struct devbuf *dev, uint64_t deadline_ms)
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
    cp->dev = dev;
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
    struct mc_agent *a = agent_of(c);
    uint32_t h = (uint32_t)(p - c->puts);
    int err = r->res;

    /* no room only because DRAM waits for offloads to a disk to finish: room comes as they
     * do; the put waits for it within its deadline instead of failing at once (put.h) */
    if (err == MC_PROTO_NO_SPACE_YET) {
        if (c->state == CL_ACTIVE && !a->stopping && mc_agent_now_ms() < p->deadline_ms) {
            a->st.put_waits++;
            r->next = a->put_parked;
            a->put_parked = r;
            return; /* put_granted runs again with the master's next answer */
        }
        err = MC_ERR_NO_SPACE;
    }

    /* the master takes us for no live writer: it declared us dead and our heartbeat has
     * not told us yet (we join again then). Retryable, not "not found" */
    if (err == MC_ERR_NOT_FOUND || err == MC_ERR_DENIED)
        err = MC_ERR_UNAVAILABLE;
    if (err == 0) {
        p->active_ms = mc_agent_now_ms();
        p->version = r->out.grant.version;
        p->nrep = r->out.grant.nrep;
        memcpy(p->rep, r->out.grant.rep, p->nrep * sizeof(p->rep[0]));
        put_set_state(p, PUT_OPEN);
        err = c->state == CL_ACTIVE ? put_image(a, p) : MC_ERR_CANCELED;
        if (err == 0 && p->oneshot) {
            err = copy_queue(c, h, MC_OP_PUT, p->user_data, 0, p->size, p->src, p->uaddr,
                             p->dev, p->deadline_ms);
        }
        if (err != 0)
            put_revoke(a, p, false);
    } else {
        put_forget(p, false);
    }
    ml_req_free(a->ml, r);
    if (c->state == CL_ACTIVE && err != 0) {
        client_cqe_res(c, p->user_data, err);
    } else if (c->state == CL_ACTIVE && !p->oneshot) {
        struct mc_cqe e;

        memset(&e, 0, sizeof(e));
        e.user_data = p->user_data;
        e.lease_id = h;
        e.version = p->version;
        client_cqe_post(c, &e);
    }
    client_put(c);
}

void put_parked_retry(struct mc_agent *a, int res)
{
    struct ml_req *r = a->put_parked, *fifo = NULL;
    uint64_t now = mc_agent_now_ms();

    /* the list is taken first (each may park again), oldest first: it was pushed LIFO */
    a->put_parked = NULL;
    while (r != NULL) {
        struct ml_req *next = r->next;

        r->next = fifo;
        fifo = r;
        r = next;
    }
    for (r = fifo; r != NULL; r = fifo) {
        const struct put *p = r->ctx;

        fifo = r->next;
        r->next = NULL;
        /* a put whose deadline comes before the next tick's try ends now, so that its
         * client hears MC_ERR_NO_SPACE before it gives up on its own (MC_ERR_TIMEOUT);
         * one whose client left asks the master for nothing more */
        if (res == 0 && p->c->state != CL_ACTIVE)
            r->res = MC_ERR_CANCELED;
        else if (res == 0 && now + a->cfg.master.tick_ms >= p->deadline_ms)
            r->res = MC_ERR_NO_SPACE;
        else
            r->res = res;
        if (r->res != 0)
            ml_req_end(a->ml, r);
        else
            ml_submit(a->ml, r);
    }
}

/* PUT and PUT_START: ask the master for the replicas; the op goes on in put_granted. */
static int put_begin(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                     const char *key, size_t key_len, uint64_t size, const uint8_t *src,
                     struct devbuf *dev, uint64_t dptr, uint64_t deadline_ms)
{
    bool csum = (s->put_flags & MC_PUT_NO_CHECKSUM) == 0;
    struct ml_req *r;
    struct put *p;
    uint32_t h;
    int err;

    if (size == 0)
        return MC_ERR_INVALID;
    if (mc_shm_alloc_len(size, csum) > a->put_size_max)
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
    {
        enum put_state was = p->state;

        memset(p, 0, sizeof(*p));
        p->state = was;
    }
    p->seen = calloc(mc_shm_nchunks(size), 1);
    r = ml_req_new(a->ml, ML_PUT_START, key, key_len, put_granted, p);
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
    put_set_state(p, PUT_GRANTING);
    p->oneshot = s->opcode == MC_OP_PUT;
    p->src_arena = p->oneshot && (s->flags & MC_SQE_F_ARENA) != 0;
    p->data_arena = !p->oneshot && (s->flags & MC_SQE_F_ARENA_DATA) != 0;
    p->csum = csum;
    p->key_len = (uint16_t)key_len;
    memcpy(p->key, key, key_len);
    p->size = size;
    /* as stored: what a restore names (the others are the put's, not the object's) */
    p->flags = s->put_flags & (MC_MASTER_PUT_PIN_SOFT | MC_MASTER_PUT_PIN_HARD |
                               MC_MASTER_PUT_NO_CHECKSUM);
    p->ttl_ms = s->ttl_ms;
    p->user_data = s->user_data;
    p->deadline_ms = deadline_ms;
    p->t0_ns = a->op_t0_ns;
    p->src = src;
    p->dev = dev;
    p->uaddr = dev != NULL ? dptr : s->data_off;
    p->open_bytes = mc_shm_alloc_len(size, csum);
    c->open_put_bytes += p->open_bytes;
    client_get(c);
    ml_submit(a->ml, r);
    return 0;
}

/* The put is published: each replica's owner indexes it (holdidx.h), ours here, the
 * others through the replica I/O (PUBLISH), so that a new master can learn it from them. */
static void put_published(struct mc_agent *a, const struct put *p)
{
    uint32_t i;

    for (i = 0; i < p->nrep; i++) {
        struct mc_seg *s = agent_seg(a, p->rep[i].seg);
        struct mc_rio_publish pub = {.r = &p->rep[i], .key = p->key, .key_len = p->key_len,
                                     .version = p->version, .size = p->size,
                                     .flags = p->flags, .ttl_ms = p->ttl_ms};

        if (s != NULL && s->held != NULL) {
            struct mc_holdidx_entry e = {
                .key = p->key, .key_len = p->key_len, .offset = p->rep[i].offset,
                .alloc_len = p->rep[i].len, .size = p->size, .version = p->version,
                .flags = p->flags, .ttl_ms = p->ttl_ms};

            (void)mc_holdidx_add(s->held, &e, mc_agent_now_ms());
        } else if (s == NULL && a->rio.ops->publish != NULL) {
            a->rio.ops->publish(a->rio.impl, &pub);
        }
    }
}

static void put_ended(void *ctx, struct ml_req *r)
{
    struct put *p = ctx;
    struct client *c = p->c;
    struct mc_agent *a = agent_of(c);
    int res = r->res;

    ml_req_free(a->ml, r);
    /* the master does not know this put (any more) as ours: it declared us dead meanwhile
     * and revoked it, or it restarted, and we joined again (maybe under another node id).
     * The caller did nothing wrong and may retry: not "not found", not "denied" */
    if (res == MC_ERR_NOT_FOUND || res == MC_ERR_DENIED)
        res = MC_ERR_UNAVAILABLE;
    if (res == 0) {
        a->st.puts++;
        put_published(a, p);
    }
    put_forget(p, false);
    if (c->state == CL_ACTIVE)
        client_cqe_res(c, p->user_data, res);
    client_put(c);
}

static void put_end_submit(struct mc_agent *a, struct put *p)
{
    struct client *c = p->c;
    struct ml_req *r = NULL;
    int err = p->send_err;

    if (err == 0 && c->state != CL_ACTIVE)
        err = MC_ERR_CANCELED; /* its writer went away before it was published */
    if (err == 0 && (p->answered || mc_agent_now_ms() > p->deadline_ms))
        err = MC_ERR_TIMEOUT; /* too late: the caller has, or will have, given up on it */
    if (err == 0) {
        r = ml_req_new(a->ml, ML_PUT_END, p->key, p->key_len, put_ended, p);
        if (r == NULL)
            err = MC_ERR_NOMEM;
    }
    if (err != 0) {
        bool answered = p->answered;

        put_revoke(a, p, false);
        if (c->state == CL_ACTIVE && !answered)
            client_cqe_res(c, p->user_data, err);
        client_put(c);
        return;
    }
    put_set_state(p, PUT_ENDING);
    r->in.ref.version = p->version;
    r->in.ref.node = a->node;
    ml_submit(a->ml, r);
}

void put_end_due(void *ctx)
{
    struct put *p = ctx;

    put_end_submit(agent_of(p->c), p); /* the put holds its client */
}

/* Every write is final and the put is finishing: publish (maybe held back by the fault
 * seam: the bytes are in place, the publication waits, a window to kill in). */
static void put_sent(struct mc_agent *a, struct put *p)
{
    if (p->send_err == 0 && mc_fault_defer(&a->fault, MC_FAULT_PUT_END, put_end_due, NULL, p))
        return;
    put_end_submit(a, p);
}

/* The writes of p are all final: publish (after put_finish) or revoke (revoked meanwhile). */
static void writes_final(struct mc_agent *a, struct put *p)
{
    struct client *c = p->c;

    if (p->state == PUT_REVOKING) {
        put_revoke(a, p, false);
        client_put(c);
    } else if (p->state == PUT_FINISHING) {
        put_sent(a, p);
    }
}

static void write_done(void *ctx, int status)
{
    struct put *p = ctx;

    if (status != 0) {
        mc_debug("put of version %" PRIu64 ": a write to a replica: %s", p->version,
                 mc_strerror(status));
        if (p->send_err == 0)
            p->send_err = status == MC_ERR_CANCELED ? MC_ERR_UNAVAILABLE : status;
    }
    if (--p->sends == 0)
        writes_final(agent_of(p->c), p);
}

/* A write that reads the client's arena is final: the reference it held on the client
 * (and so on the mapping of the arena) goes, after the put had its say. */
static void write_done_arena(void *ctx, int status)
{
    struct client *c = ((struct put *)ctx)->c;

    write_done(ctx, status);
    client_put(c);
}

/* Sends len bytes read from src, at offset `from` of the object's allocation, to every
 * replica that is not the image itself. A write that reads the client's arena holds the
 * client until it is final: the arena is unmapped only when the client is freed, and a
 * client killed mid-put must not take the bytes away from under a transfer. The caller
 * holds p->sends (and the client). */
static void send_range(struct mc_agent *a, struct put *p, const uint8_t *src, uint64_t from,
                       uint64_t len, bool arena, const uint8_t *tail, size_t tail_len)
{
    uint32_t i;

    for (i = 0; i < p->nrep; i++) {
        struct mc_rio_write w = {
            .r = &p->rep[i], .version = p->version, .key = p->key, .key_len = p->key_len,
            .src = src, .from = from, .len = len, .deadline_ms = p->deadline_ms,
            .tail = tail, .tail_len = tail_len,
        };
        int err;

        if (p->image == NULL && p->arena == NULL && !p->stream_arena &&
            agent_seg(a, p->rep[i].seg) != NULL)
            continue; /* the image is that replica */
        p->sends++;
        if (arena)
            client_get(p->c);
        err = a->rio.ops->write(a->rio.impl, &w, arena ? write_done_arena : write_done, p);
        if (err != 0) {
            p->sends--;
            if (arena)
                client_put(p->c); /* never the last: the caller holds the client */
            if (p->send_err == 0)
                p->send_err = err;
            break;
        }
    }
}

/* Sends bytes [from, to) of p's allocation to every replica that is not the image itself:
 * from the image, or from the arena (the payload) and the trailer buffer (the checksums,
 * at mc_shm_trailer_off(size); the padding before them is not the object's). */
static void put_send(struct mc_agent *a, struct put *p, uint64_t from, uint64_t to)
{
    if (from >= to)
        return;
    p->sends++; /* held while they start, so none ends the put under our feet */
    if (p->stream_arena) {
        /* the payload went piece by piece (copy_step): the checksums only */
        uint64_t toff = mc_shm_trailer_off(p->size);
        uint64_t tfrom = from > toff ? from : toff;

        if (p->trailer != NULL && to > tfrom && p->send_err == 0)
            send_range(a, p, p->trailer + (tfrom - toff), tfrom, to - tfrom, false, NULL, 0);
    } else if (p->arena == NULL) {
        send_range(a, p, p->dst + from, from, to - from, false, NULL, 0);
    } else {
        uint64_t pay_end = to < p->size ? to : p->size;
        uint64_t toff = mc_shm_trailer_off(p->size);
        uint64_t tfrom = from > toff ? from : toff;

        if (from < pay_end && pay_end == p->size && to > toff && p->trailer != NULL &&
            to - p->size + p->key_len <= MC_RIO_TAIL_MAX && p->tailhdr == NULL &&
            (p->tailhdr = calloc(1, to - p->size)) != NULL) {
            /* the last bytes and the checksums in one write per replica: the padding
             * (zeros) and the trailer ride in its header */
            memcpy(p->tailhdr + (toff - p->size), p->trailer, to - toff);
            send_range(a, p, p->arena + from, from, pay_end - from, true, p->tailhdr,
                       (size_t)(to - p->size));
        } else {
            if (from < pay_end)
                send_range(a, p, p->arena + from, from, pay_end - from, true, NULL, 0);
            if (p->trailer != NULL && to > tfrom && p->send_err == 0)
                send_range(a, p, p->trailer + (tfrom - toff), tfrom, to - tfrom, false, NULL,
                           0);
        }
    }
    p->sent_upto = to;
    if (--p->sends == 0)
        writes_final(a, p);
}

/* The image's leading whole pieces that are copied go out while the rest is copied. */
static void put_progress(struct mc_agent *a, struct put *p)
{
    uint64_t end = p->sent_upto;

    if (p->nremote == 0 || p->send_err != 0 || p->stream_arena)
        return; /* a streamed arena put sends each piece once it is summed */
    if (p->sent_upto >= p->size)
        return; /* the final write is out: nothing is left to send early */
    while (end < p->size && p->seen[end / MC_SHM_CHUNK])
        end = (end / MC_SHM_CHUNK + 1) * MC_SHM_CHUNK;
    if (end >= p->size)
        end = p->size - 1; /* the last byte's piece goes with the checksums: one write */
    /* whole pieces only: the tail goes with the checksums when the put finishes */
    end = p->sent_upto + (end - p->sent_upto) / PUT_PIECE * PUT_PIECE;
    if (end > p->sent_upto)
        put_send(a, p, p->sent_upto, end);
}

/* The chunk checksums and the object checksum: in the image, or in the trailer buffer of
 * a put sent from the arena. */
static uint64_t *put_trailer(struct put *p)
{
    if (p->arena != NULL || p->stream_arena)
        return (uint64_t *)(void *)p->trailer;
    return (uint64_t *)(void *)(p->dst + mc_shm_trailer_off(p->size));
}

/* Publish: the object checksum over the chunk values, the writes to the replicas that are
 * not the image, then put_end. Answers p->user_data when it is over. */
static void put_finish(struct mc_agent *a, struct put *p)
{
    struct client *c = p->c;

    if (p->failed || p->received != p->size) {
        int res = p->failed ? MC_ERR_TIMEOUT : MC_ERR_INVALID;

        put_revoke(a, p, false);
        client_cqe_res(c, p->user_data, res);
        return;
    }
    if (p->csum) {
        uint64_t n = mc_shm_nchunks(p->size);
        uint64_t *tr = put_trailer(p);

        tr[n] = XXH3_64bits(tr, n * sizeof(uint64_t));
    }
    put_set_state(p, PUT_FINISHING);
    client_get(c);
    if (p->nremote > 0) {
        /* the rest of the image, checksums included; pieces may still be on their way */
        p->sends++;
        put_send(a, p, p->sent_upto, mc_shm_alloc_len(p->size, p->csum));
        if (--p->sends > 0)
            return; /* writes_final when the last write is final */
    }
    put_sent(a, p);
}

/* --- copies ----------------------------------------------------------------------------- */

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
        put_revoke(a, p, false);
    } else if (p->abort_pending && p->busy == 0) {
        put_revoke(a, p, false); /* the abort waited for this last piece */
    }
    client_cqe_res(c, user_data, res);
}

/* Copy up to `budget` bytes of c's head copy; returns the bytes copied. */
static uint64_t copy_step(struct mc_agent *a, struct client *c, uint64_t budget, uint64_t now)
{
    struct copy *cp = &c->copies[c->copy_head];
    struct put *p = &c->puts[cp->put];
    uint64_t n, pos, chunk_end;
    const uint8_t *at;

    if (cp->dev_inflight) {
        /* a device copy runs: the destination is the device's until it completed, deadline
         * or not */
        int st = mc_dev_event_query(cp->dev->ev);

        if (st == MC_ERR_BUSY) {
            a->dev_polling = true;
            return 0;
        }
        cp->dev_inflight = false;
        if (st != 0) {
            a->st.dev_copy_errors++;
            copy_done(a, c, MC_ERR_IO); /* never stored: the put is revoked */
            return 0;
        }
        cp->dev_avail = cp->dev_n; /* in place: summed below, a budget at a time */
    }
    if (now > cp->deadline_ms) {
        copy_done(a, c, MC_ERR_TIMEOUT); /* nothing is in flight */
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
    if (cp->dev != NULL && cp->dev_avail == 0) {
        /* straight from the engine's device buffer: all that is left in one copy (the
         * device works, not this thread), polled the next turns */
        uint64_t left = cp->len - cp->done;
        int err = mc_dev_copy_dtoh(cp->dev->stream, p->dst + pos, cp->uaddr + cp->done, left);

        if (err == 0)
            err = mc_dev_event_record(cp->dev->ev, cp->dev->stream);
        if (err != 0) {
            /* a copy queued before a failed record still runs: wait it out */
            mc_dev_stream_sync(cp->dev->stream);
            a->st.dev_copy_errors++;
            copy_done(a, c, MC_ERR_IO);
            return 0;
        }
        cp->dev_inflight = true;
        cp->dev_n = left;
        a->st.dev_copies++;
        a->dev_polling = true;
        return 0;
    }
    /* no image (a put sent from the arena): nothing to offset, the arena is read below */
    at = p->dst != NULL ? p->dst + pos : NULL;
    if (cp->dev != NULL) {
        if (n > cp->dev_avail)
            n = cp->dev_avail;
        cp->dev_avail -= n; /* already in place: only summed and counted */
    } else if (p->arena != NULL) {
        /* no image: the bytes are summed where they lie, and sent from there (a PUT
         * starts at 0: pos is the offset in the arena span too) */
        at = p->arena + pos;
    } else if (p->stream_arena) {
        at = cp->src + cp->done; /* this piece's own span (PUT_DATA checked it is one) */
    } else if (cp->src != NULL) {
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
        XXH3_64bits_update(cp->xs, at, n);
    cp->done += n;
    pos += n;
    if (pos == chunk_end || pos == p->size) {
        uint64_t idx = (pos - 1) / MC_SHM_CHUNK;

        if (p->csum) {
            uint64_t *tr = put_trailer(p);

            tr[idx] = XXH3_64bits_digest(cp->xs);
            XXH3_64bits_reset(cp->xs);
        }
        if (!p->seen[idx]) {
            p->seen[idx] = 1;
            p->received += pos - idx * MC_SHM_CHUNK;
        }
        if (p->nremote != 0)
            put_progress(a, p); /* whole pieces go out while the rest is copied */
    }
    a->st.bytes_in += n;
    p->active_ms = now;
    if (cp->done == cp->len && p->stream_arena && p->send_err == 0 && !p->failed) {
        /* the piece is summed: its bytes go to the replicas from its span (each write
         * holds the client, and with it the arena's mapping, until final) */
        p->sends++;
        send_range(a, p, cp->src, cp->obj_off, cp->len, true, NULL, 0);
        if (--p->sends == 0)
            writes_final(a, p);
    }
    if (cp->done == cp->len)
        copy_done(a, c, 0);
    return n;
}

bool put_copy_round(struct mc_agent *a, uint64_t budget, uint64_t now)
{
    struct client *c;
    bool work = false;

    /* one round over the clients per turn, budget bytes in all, so timers, sockets and
     * the other rings get their turn between slices */
    a->dev_polling = false;
    for (c = a->cs.list; c != NULL && budget > 0; c = c->next) {
        bool polled;

        if (c->state != CL_ACTIVE || c->copy_count == 0)
            continue;
        polled = c->copies[c->copy_head].dev_inflight;
        budget -= copy_step(a, c, budget, now);
        /* only waiting on a device copy is not work: the loop polls, yielding the CPU */
        if (!(polled && c->copy_count > 0 && c->copies[c->copy_head].dev_inflight))
            work = true;
    }
    return work;
}

/* --- ops, tick, close ------------------------------------------------------------------- */

/* Where a PUT / PUT_DATA takes its bytes from: staging, an arena, or (NULL) the client's
 * own memory through process_vm_readv, or (NULL, *dev_p) a device buffer it registered. */
static int data_source(struct client *c, const struct mc_sqe *s, const uint8_t **src_p,
                       struct devbuf **dev_p, uint64_t *dptr_p)
{
    *dev_p = NULL;
    if (s->flags & MC_SQE_F_DEV) {
        *src_p = NULL;
        return client_devbuf_span(c, (uint32_t)(s->data_off >> MC_SHM_ARENA_SHIFT),
                                  s->data_off & ((UINT64_C(1) << MC_SHM_ARENA_SHIFT) - 1),
                                  s->data_len, dev_p, dptr_p);
    }
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
    if (s->flags & MC_SQE_F_ARENA)
        return client_arena_span(c, (uint32_t)(s->data_off >> MC_SHM_ARENA_SHIFT),
                                 s->data_off & ((UINT64_C(1) << MC_SHM_ARENA_SHIFT) - 1),
                                 s->data_len, src_p);
    *src_p = c->r->staging + s->data_off;
    return 0;
}

void put_op(struct mc_agent *a, struct client *c, const struct mc_sqe *s, const char *key,
            size_t key_len, uint64_t deadline)
{
    const uint8_t *src = NULL;
    struct devbuf *dev = NULL;
    uint64_t dptr = 0;
    struct put *p;
    int err;

    switch (s->opcode) {
    case MC_OP_PUT:
        err = data_source(c, s, &src, &dev, &dptr);
        if (err == 0) /* it answers */
            err = put_begin(a, c, s, key, key_len, s->data_len, src, dev, dptr, deadline);
        break;
    case MC_OP_PUT_START:
        err = put_begin(a, c, s, key, key_len, s->arg0, NULL, NULL, 0, deadline); /* answers */
        break;
    case MC_OP_PUT_DATA:
        if (put_expired(c, s->arg0, false)) {
            err = MC_ERR_TIMEOUT;
            break;
        }
        p = put_get(c, s->arg0);
        /* pieces start on a chunk and end on one or at the object's end, so each chunk's
         * checksum is computed from one piece */
        if (p == NULL || s->arg1 % MC_SHM_CHUNK != 0 || s->arg1 >= p->size ||
            s->data_len > p->size - s->arg1 ||
            (s->data_len % MC_SHM_CHUNK != 0 && s->arg1 + s->data_len != p->size)) {
            err = MC_ERR_INVALID;
            break;
        }
        /* a put that promised arena pieces takes only those (nothing else has a place to
         * be summed and sent from when there is no image) */
        if (p->data_arena && !(s->flags & MC_SQE_F_ARENA)) {
            err = MC_ERR_INVALID;
            break;
        }
        err = data_source(c, s, &src, &dev, &dptr);
        if (err == 0)
            err = copy_queue(c, (uint32_t)s->arg0, s->opcode, s->user_data, s->arg1,
                             s->data_len, src, dev != NULL ? dptr : s->data_off, dev, deadline);
        break;
    case MC_OP_PUT_END:
    case MC_OP_PUT_ABORT:
        if (put_expired(c, s->arg0, true)) {
            err = MC_ERR_TIMEOUT;
            break;
        }
        p = put_get(c, s->arg0);
        if (p == NULL || p->abort_pending) {
            err = MC_ERR_NOT_FOUND;
            break;
        }
        if (s->opcode == MC_OP_PUT_ABORT) {
            /* pieces still being copied: revoked when the last one is done */
            if (p->busy != 0)
                p->abort_pending = p->failed = true;
            else
                put_revoke(a, p, false);
            client_cqe_res(c, s->user_data, 0);
            return;
        }
        if (p->busy != 0) {
            err = MC_ERR_BUSY; /* END before its pieces completed */
            break;
        }
        p->user_data = s->user_data;
        put_finish(a, p); /* it answers */
        return;
    default:
        err = MC_ERR_INVALID;
        break;
    }
    if (err != 0)
        client_cqe_res(c, s->user_data, err);
}

void put_tick(struct mc_agent *a, struct client *c, uint64_t now)
{
    uint32_t i;

    for (i = 0; c->nputs != 0 && i < c->lay.max_inflight; i++) {
        struct put *p = &c->puts[i];

        /* a put whose writes to peers outlive its deadline (a stalled owner) is answered
         * now: MC_ERR_TIMEOUT, it will not be published; its image stays ours until the
         * writes are final, then the put is revoked */
        if (p->state == PUT_FINISHING && !p->answered && p->sends > 0 &&
            now > p->deadline_ms) {
            p->answered = true;
            client_cqe_res(c, p->user_data, MC_ERR_TIMEOUT);
        }
        /* a started put the client feeds no data: its reserved space goes back to
         * the pool (the client learns it when it names the handle again) */
        if (p->state == PUT_OPEN && !p->oneshot && !p->abort_pending && p->busy == 0 &&
            now - p->active_ms > a->cfg.put_idle_ms) {
            mc_debug("client %u: put of version %" PRIu64 " idle for %" PRIu64 " ms: revoked",
                     c->id, p->version, now - p->active_ms);
            a->st.puts_idle_revoked++;
            put_revoke(a, p, true);
        }
    }
}

void put_client_closing(struct mc_agent *a, struct client *c)
{
    uint32_t i;

    /* only the head copy can be in flight, and only from a device buffer: wait for it (one
     * slice) before its destination may be freed; the rest are synchronous memcpy */
    if (c->copy_count > 0 && c->copies[c->copy_head].dev_inflight) {
        struct copy *cp = &c->copies[c->copy_head];

        mc_dev_stream_sync(cp->dev->stream);
        cp->dev_inflight = false;
    }
    while (c->copy_count > 0) {
        struct copy *cp = &c->copies[c->copy_head];

        XXH3_freeState(cp->xs);
        c->puts[cp->put].busy--;
        c->copy_head = (c->copy_head + 1) % c->lay.max_inflight;
        c->copy_count--;
    }
    /* puts waiting for the master or a peer end themselves, on their answer (they hold
     * references to c) */
    for (i = 0; i < c->lay.max_inflight; i++) {
        if (c->puts[i].state == PUT_OPEN)
            put_revoke(a, &c->puts[i], false);
    }
}
