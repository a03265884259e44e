/*
 * The agent's cluster mode: join, peers, remote bytes (cluster.h).
 */
#include "daemon/agent/cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "daemon/agent/agent_int.h"
#include "daemon/common/bootstrap.h"
#include "daemon/common/log.h"
#include "daemon/proto/master_proto.h"
#include "daemon/proto/peer_proto.h"
#include "shm/ring.h"
#include "ucx_backend/ucx.h"

#define PEER_HASH 64u
#define READ_HASH 256u
#define HELLO_TIMEOUT_MS 3000u /* a peer that does not answer HELLO in time is unreachable */
#define INFO_TIMEOUT_MS 3000u
#define FENCE_RETRY_MS 1000u
#define READ_ATTEMPT_MIN_MS 250u /* the shortest turn a replica gets while others are left */
#define BOOT_BACKLOG 128

/* What a bulk completion's `op` points at: the first field of both. */
enum op_what { OP_READ = 1, OP_INWRITE = 2 };

enum peer_state { PEER_HELLO, PEER_READY };

/* Our link to the master: up, or being rejoined after it was lost (DESIGN.md §6). */
enum master_state { M_UP, M_DOWN, M_FETCH, M_HELLO, M_MOUNT };

struct xfer;

/* Another agent we send to or read from: one endpoint, authenticated once. */
struct peer {
    struct peer *next;
    struct cluster *cl;
    uint32_t node;             /* as the master last named it (logs) */
    uint8_t *addr;             /* its worker address: what identifies it (node ids do not
                                  survive a master restart) */
    size_t addr_len;
    struct mc_ucx_ep *ep;
    enum peer_state state;
    struct xfer *waitq, *waitq_tail; /* transfers waiting for HELLO's answer */
};

/* A segment of the cluster as CLUSTER_INFO showed it. */
struct segrec {
    bool valid;
    uint32_t node;
    uint64_t size;
    size_t addr_len;
    uint8_t *addr; /* the owner's worker address */
};

enum xfer_kind { X_WRITE, X_READ, X_COPY };

/* One GET's remote read: one transfer at a time, or more while an owner that stalled
 * mid-transfer still holds the first (a second replica is read meanwhile: a stalled owner
 * counts as absent, like a dead one). The first transfer to land answers; the others end on their
 * own and give their landing blocks back. */
struct rget {
    struct lease *l;  /* NULL once answered: the transfers still running are orphans */
    uint32_t running; /* transfers of it not final yet */
};

/* One transfer we started: a put's image to a replica, or a read into the landing segment. */
struct xfer {
    enum op_what what;         /* OP_READ (reads only: bulk completions name it) */
    enum xfer_kind kind;
    struct xfer *next;         /* a wait queue, or the read hash chain */
    struct cluster *cl;
    struct mc_master_replica r;
    struct put *p;             /* X_WRITE */
    struct copyjob *cj;        /* X_COPY */
    uint64_t from;             /* X_WRITE: bytes [from, from + len) of the image */
    struct rget *rg;           /* X_READ */
    uint32_t land_id;          /* X_READ: its own block of the landing segment */
    uint32_t ri;               /* X_READ: which replica of the object it reads */
    bool hedged;               /* X_READ: stalled mid-transfer, another replica was started */
    struct peer *peer;
    uint64_t id;               /* X_READ: the request id the owner's bulk carries */
    uint64_t len;
    uint64_t deadline_ms;
    uint64_t attempt_ms;       /* X_READ: this replica's turn ends (the next one is tried) */
    bool hashed;               /* X_READ: findable by id */
    bool moving;               /* on the in-flight list: UCX has it */
    struct xfer *iprev, *inext;
    bool data_started, data_done, reply_done;
    int status;
};

/* A copy the master asked of us (a node being drained): our segment's bytes written to a
 * block of another node, answered to the master once that owner answered the write. */
struct copyjob {
    struct mc_ucx_ep *master; /* the endpoint it came on: answered only if still ours */
    uint64_t request_id;
    uint64_t id;              /* the write's version: the target's fences name it */
    uint64_t src_offset;
    size_t key_len;
    char key[MC_PROTO_KEY_MAX];
};

/* A write landing in our segment now: the owner's index of what may still change. */
struct inwrite {
    enum op_what what;         /* OP_INWRITE */
    struct inwrite *next, *prev;
    struct cluster *cl;
    struct mc_ucx_ep *ep;      /* NULL once it failed: nobody to answer */
    uint64_t request_id;       /* the writer's call, answered when the bytes are in place */
    uint32_t seg, alloc;
    uint64_t version, offset, len;
};

/* An allocation a failed write touched: the master may reuse it once we say no write can
 * land there any more (FENCE), which is true as soon as the failed transfer is final. */
struct fence {
    struct fence *next;
    struct mc_proto_fence_item item;
    uint64_t first_ms;
};

/* A block the master asked us to fence: no write of that put may land any more. */
struct fenced {
    struct fenced *next;
    uint32_t alloc;
    uint64_t version;
    uint64_t until_ms; /* past any write of it that could still arrive */
};

#define FENCED_HASH 256u

struct cluster {
    struct mc_agent *a;
    struct mc_ucx *u;
    struct mc_ucx_ep *master;
    enum master_state mstate;
    uint64_t rejoin_ms, backoff_ms, fetch_deadline_ms;
    struct mc_boot_fetch bf;
    uint32_t node;
    uint64_t node_ttl_ms, lease_ttl_ms;
    char *token;
    size_t token_len;
    char name[MC_MASTER_NAME_MAX + 1];
    int listen_fd;
    uint16_t port;
    void *boot;
    size_t boot_len;
    bool efd_polled, listen_polled;
    int accepted_marker;          /* the user pointer of authenticated accepted endpoints */
    struct segrec *segs;
    uint32_t nsegtab;
    bool info_busy;
    struct xfer *info_wait, *info_wait_tail; /* transfers waiting for a segment's owner */
    struct peer *peers[PEER_HASH];
    struct xfer *reads[READ_HASH];
    uint64_t next_id;
    struct inwrite *inwrites;
    struct xfer *moving;          /* transfers UCX holds, for the peer hard deadline */
    struct fence *fences;
    bool fence_busy;
    struct fenced *fenced[FENCED_HASH];
    uint64_t next_hb_ms, next_fence_ms;
    bool hb_busy;
    uint32_t drain;               /* our node's drain state, as the last heartbeat said */
    uint64_t incarnation;         /* this process, in every HELLO (the master tells a
                                     reconnect of ours from another agent by it) */
    uint64_t m_silent_since;      /* the first call the master owes since its last answer
                                     was sent then (0: it owes none) */
    bool m_unresp;                /* it owed one past master_timeout_ms: ops fail fast */
    bool m_refused;               /* it refused a batch of ours: join again */
    bool leaving;
    bool destroying;              /* cluster_destroy runs: start no transfer, no endpoint */
    struct {
        uint64_t writes_out, write_bytes_out, reads_out, read_bytes_in;
        uint64_t writes_in, write_bytes_in, reads_in, refused, peer_errors, failovers;
        uint64_t hedged, copies_out;
    } st;
};

static void xfer_start(struct cluster *cl, struct xfer *x);
static void xfer_end(struct cluster *cl, struct xfer *x, int status);
static void info_refresh(struct cluster *cl);
static void inwrites_forget_ep(struct cluster *cl, const struct mc_ucx_ep *ep);

/* --- small helpers ---------------------------------------------------------------------- */

static int hello_encode(const struct cluster *cl, void *buf, size_t cap, size_t *len_p)
{
    const struct mc_agent *a = cl->a;
    struct mc_proto_hello_req req = {
        .token = {.p = (const uint8_t *)cl->token, .len = cl->token_len},
        .name = {.p = (const uint8_t *)cl->name, .len = strlen(cl->name)},
        .domain = {.p = (const uint8_t *)a->cfg.domain,
                   .len = a->cfg.domain != NULL ? strlen(a->cfg.domain) : 0},
        .incarnation = cl->incarnation,
    };

    return mc_proto_hello_req_encode(&req, buf, cap, len_p);
}

static void reply_status(struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr, int status)
{
    struct mc_proto_status_rep rep = {.status = status};
    uint8_t buf[8];
    size_t len;

    if (mc_proto_status_rep_encode(&rep, buf, sizeof(buf), &len) == 0)
        mc_ucx_rpc_reply(ep, (uint16_t)(hdr->type + 1), hdr->request_id, buf, len);
}

/* A call to the master, or MC_ERR_UNAVAILABLE while we have none (it is being rejoined) or
 * it does not answer (only heartbeats ask it then). */
static int master_call(struct cluster *cl, uint16_t type, const void *pl, size_t len,
                       uint64_t deadline_ms, mc_ucx_rpc_done_fn done, void *ctx)
{
    if (cl->master == NULL || cl->mstate != M_UP || cl->m_unresp)
        return MC_ERR_UNAVAILABLE;
    return mc_ucx_rpc_call(cl->master, type, pl, len, deadline_ms, done, ctx, NULL);
}

/* --- blocking calls at start-up --------------------------------------------------------- */

struct sync_call {
    bool done;
    int status;
    uint8_t *reply;
    size_t len;
};

static void sync_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                      size_t len)
{
    struct sync_call *sc = ctx;

    (void)hdr;
    sc->done = true;
    sc->status = status;
    if (status == 0 && (sc->reply = malloc(len > 0 ? len : 1)) != NULL) {
        memcpy(sc->reply, pl, len);
        sc->len = len;
    } else if (status == 0) {
        sc->status = MC_ERR_NOMEM;
    }
}

/* Sends one request and progresses the worker until its answer (start-up and exit only:
 * nothing else runs meanwhile). The caller frees sc->reply. */
static int sync_call(struct cluster *cl, struct mc_ucx_ep *ep, uint16_t type, const void *pl,
                     size_t len, uint64_t deadline_ms, struct sync_call *sc)
{
    int err;

    memset(sc, 0, sizeof(*sc));
    err = mc_ucx_rpc_call(ep, type, pl, len, deadline_ms, sync_done, sc, NULL);
    if (err != 0)
        return err;
    while (!sc->done) {
        if (!mc_ucx_progress(cl->u))
            poll(NULL, 0, 1);
    }
    return sc->status;
}

/* --- the segment table ------------------------------------------------------------------ */

static const struct segrec *seg_find(const struct cluster *cl, uint32_t seg)
{
    return seg < cl->nsegtab && cl->segs[seg].valid ? &cl->segs[seg] : NULL;
}

static int seg_store(struct cluster *cl, const struct mc_proto_seg_entry *e)
{
    struct segrec *s;

    if (e->seg >= cl->nsegtab) {
        uint32_t n = e->seg + 1 > cl->nsegtab * 2 ? e->seg + 1 : cl->nsegtab * 2;
        struct segrec *t = realloc(cl->segs, n * sizeof(*t));

        if (t == NULL)
            return MC_ERR_NOMEM;
        memset(t + cl->nsegtab, 0, (n - cl->nsegtab) * sizeof(*t));
        cl->segs = t;
        cl->nsegtab = n;
    }
    s = &cl->segs[e->seg];
    if (s->valid && s->addr_len == e->worker_addr.len &&
        memcmp(s->addr, e->worker_addr.p, s->addr_len) == 0) {
        s->node = e->info.node;
        s->size = e->info.size;
        return 0;
    }
    free(s->addr);
    s->addr = malloc(e->worker_addr.len);
    if (s->addr == NULL) {
        s->valid = false;
        return MC_ERR_NOMEM;
    }
    memcpy(s->addr, e->worker_addr.p, e->worker_addr.len);
    s->addr_len = e->worker_addr.len;
    s->node = e->info.node;
    s->size = e->info.size;
    s->valid = true;
    return 0;
}

struct info_call {
    struct cluster *cl;
    uint32_t cursor;
};

static void info_page(struct cluster *cl, uint32_t cursor);

static void info_finish(struct cluster *cl)
{
    struct xfer *x = cl->info_wait;

    cl->info_busy = false;
    cl->info_wait = cl->info_wait_tail = NULL;
    while (x != NULL) {
        struct xfer *next = x->next;

        x->next = NULL;
        if (seg_find(cl, x->r.seg) == NULL)
            xfer_end(cl, x, MC_ERR_UNAVAILABLE); /* unmounted meanwhile: that replica is gone */
        else
            xfer_start(cl, x);
        x = next;
    }
}

static void info_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                      size_t len)
{
    struct info_call *ic = ctx;
    struct cluster *cl = ic->cl;
    struct mc_proto_seg_entry *segs = malloc(MC_PROTO_SEG_PAGE_MAX * sizeof(*segs));
    struct mc_proto_info_rep rep;
    uint32_t i;

    (void)hdr;
    free(ic);
    if (segs == NULL)
        status = MC_ERR_NOMEM;
    if (status == 0 && mc_proto_info_rep_decode(pl, len, MC_PROTO_SEG_PAGE_MAX, &rep, segs, 0,
                                                NULL) != 0)
        status = MC_ERR_PROTO;
    if (status == 0 && rep.status != 0)
        status = rep.status;
    if (status != 0) {
        mc_warn("segment table from the master: %s", mc_strerror(status));
        free(segs);
        info_finish(cl);
        return;
    }
    for (i = 0; i < rep.nseg; i++)
        seg_store(cl, &segs[i]);
    free(segs);
    if (rep.next_cursor != 0)
        info_page(cl, rep.next_cursor);
    else
        info_finish(cl);
}

static void info_page(struct cluster *cl, uint32_t cursor)
{
    struct mc_proto_info_req req = {.flags = MC_PROTO_INFO_F_SEGMENTS, .cursor = cursor,
                                    .max = MC_PROTO_SEG_PAGE_MAX};
    struct info_call *ic = malloc(sizeof(*ic));
    uint8_t buf[64];
    size_t len;
    int err = ic == NULL ? MC_ERR_NOMEM : mc_proto_info_req_encode(&req, buf, sizeof(buf), &len);

    if (err == 0) {
        ic->cl = cl;
        ic->cursor = cursor;
        err = master_call(cl, MC_WIRE_CLUSTER_INFO, buf, len,
                          mc_ucx_now_ms() + INFO_TIMEOUT_MS, info_done, ic);
    }
    if (err != 0) {
        free(ic);
        mc_warn("segment table from the master: %s", mc_strerror(err));
        info_finish(cl);
    }
}

/* Learn the segments' owners again (one refresh at a time). */
static void info_refresh(struct cluster *cl)
{
    if (cl->info_busy)
        return;
    cl->info_busy = true;
    info_page(cl, 0);
}

/* --- peers -------------------------------------------------------------------------------- */

static struct peer **peer_slot(struct cluster *cl, const uint8_t *addr, size_t len)
{
    struct peer **pp = &cl->peers[XXH3_64bits(addr, len) % PEER_HASH];

    while (*pp != NULL &&
           ((*pp)->addr_len != len || memcmp((*pp)->addr, addr, len) != 0))
        pp = &(*pp)->next;
    return pp;
}

/* Forget a peer: its waiting transfers fail with `status`; its endpoint is closed (the
 * transfers under way on it end through UCX, with an error). */
static void peer_drop(struct cluster *cl, struct peer *p, int status)
{
    struct peer **pp = peer_slot(cl, p->addr, p->addr_len);
    struct xfer *x = p->waitq;

    if (*pp == p)
        *pp = p->next;
    p->waitq = p->waitq_tail = NULL;
    /* transfers UCX still holds on its endpoint end through their callbacks, which must
     * not find this peer any more */
    for (struct xfer *m = cl->moving; m != NULL; m = m->inext) {
        if (m->peer == p)
            m->peer = NULL;
    }
    if (cl->u != NULL) { /* else the worker, and every endpoint with it, is gone already */
        mc_ucx_ep_set_user(p->ep, NULL);
        inwrites_forget_ep(cl, p->ep);
        mc_ucx_ep_close(p->ep, true);
    }
    while (x != NULL) {
        struct xfer *next = x->next;

        x->next = NULL;
        x->peer = NULL;
        xfer_end(cl, x, status);
        x = next;
    }
    free(p->addr);
    free(p);
}

static void peer_hello_done(void *ctx, int status, const struct mc_wire_hdr *hdr,
                            const void *pl, size_t len)
{
    struct peer *p = ctx;
    struct cluster *cl = p->cl;
    struct mc_proto_status_rep rep;
    struct xfer *x;

    (void)hdr;
    if (status == 0)
        status = mc_proto_status_rep_decode(pl, len, &rep) == 0 ? rep.status : MC_ERR_PROTO;
    if (status != 0) {
        mc_warn("peer node %u: HELLO failed: %s", p->node, mc_strerror(status));
        cl->st.peer_errors++;
        peer_drop(cl, p, MC_ERR_UNAVAILABLE);
        return;
    }
    p->state = PEER_READY;
    x = p->waitq;
    p->waitq = p->waitq_tail = NULL;
    while (x != NULL) {
        struct xfer *next = x->next;

        x->next = NULL;
        xfer_start(cl, x);
        x = next;
    }
}

static struct peer *peer_get(struct cluster *cl, const struct segrec *sr)
{
    struct peer **pp = peer_slot(cl, sr->addr, sr->addr_len), *p;
    uint8_t buf[MC_PROTO_TOKEN_MAX + 2 * MC_PROTO_NAME_MAX + 64];
    size_t len;
    int err;

    if (*pp != NULL) {
        (*pp)->node = sr->node;
        return *pp;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL || (p->addr = malloc(sr->addr_len)) == NULL) {
        free(p);
        return NULL;
    }
    memcpy(p->addr, sr->addr, sr->addr_len);
    p->addr_len = sr->addr_len;
    p->cl = cl;
    p->node = sr->node;
    err = mc_ucx_ep_connect(cl->u, sr->addr, sr->addr_len, &p->ep);
    if (err == 0)
        err = hello_encode(cl, buf, sizeof(buf), &len);
    if (err == 0) {
        mc_ucx_ep_set_user(p->ep, p);
        err = mc_ucx_rpc_call(p->ep, MC_WIRE_HELLO, buf, len,
                              mc_ucx_now_ms() + HELLO_TIMEOUT_MS, peer_hello_done, p, NULL);
    }
    if (err != 0) {
        mc_warn("peer node %u: %s", sr->node, mc_strerror(err));
        mc_ucx_ep_close(p->ep, true);
        free(p->addr);
        free(p);
        return NULL;
    }
    p->state = PEER_HELLO;
    *pp = p;
    return p;
}

/* --- losing and rejoining the master ------------------------------------------------------- */

#define REJOIN_FIRST_MS 100u
#define REJOIN_MAX_MS 2000u /* DESIGN.md §6: reconnect with backoff capped at 2 s */
#define REJOIN_STEP_MS 2000u /* each step of a rejoin (bootstrap, HELLO, MOUNT) */

/* --- is the master answering? --------------------------------------------------------------- */

/*
 * A master that is stopped or stalled (or cut off in a way UCX does not see at once) loses
 * no connection: our calls just wait, each to its own deadline. So we watch the answers:
 * once a call we sent has gone unanswered for master_timeout_ms with nothing heard from the
 * master since, it counts as unreachable, and master-bound ops fail fast with
 * MC_ERR_UNAVAILABLE (ml_hold) until it answers anything again. Heartbeats keep asking.
 */
static void master_asked(struct cluster *cl)
{
    if (cl->m_silent_since == 0)
        cl->m_silent_since = agent_now_ms();
}

static void master_heard(struct cluster *cl)
{
    cl->m_silent_since = 0;
    if (!cl->m_unresp)
        return;
    cl->m_unresp = false;
    ml_hold(cl->a->ml, false, 0);
    if (cl->mstate == M_UP)
        mc_info("the master answers again: master-bound calls resume");
}

static void master_silence_check(struct cluster *cl, uint64_t now)
{
    if (cl->mstate != M_UP || cl->m_unresp || cl->m_silent_since == 0 ||
        now - cl->m_silent_since <= cl->a->cfg.master_timeout_ms)
        return;
    mc_warn("the master has not answered for %llu ms: master-bound calls fail "
            "(MC_ERR_UNAVAILABLE) until it does",
            (unsigned long long)(now - cl->m_silent_since));
    cl->m_unresp = true;
    ml_hold(cl->a->ml, true, MC_ERR_UNAVAILABLE);
}

static void ml_event_cb(void *ctx, enum ml_event ev)
{
    struct cluster *cl = ctx;

    if (ev == ML_EV_SENT)
        master_asked(cl);
    else if (ev == ML_EV_ANSWERED)
        master_heard(cl);
    else if (ev == ML_EV_REFUSED)
        cl->m_refused = true; /* from the tick: not inside the batch's callback */
}

/* Master-bound ops fail fast from now on (MC_ERR_UNAVAILABLE); rejoin from the tick. */
static void master_lost(struct cluster *cl, int status)
{
    if (cl->master == NULL)
        return;
    if (cl->mstate == M_UP)
        mc_warn("lost the master: %s; rejoining", mc_strerror(status));
    mc_ucx_ep_set_user(cl->master, NULL);
    mc_ucx_ep_close(cl->master, true); /* its calls end (CANCELED: read as UNAVAILABLE) */
    cl->master = NULL;
    if (cl->mstate == M_UP || cl->backoff_ms == 0)
        cl->backoff_ms = REJOIN_FIRST_MS;
    else if ((cl->backoff_ms *= 2) > REJOIN_MAX_MS)
        cl->backoff_ms = REJOIN_MAX_MS;
    cl->mstate = M_DOWN;
    cl->rejoin_ms = agent_now_ms() + cl->backoff_ms;
    cl->hb_busy = false;
    master_heard(cl); /* while it is rejoined, master_call fails fast all the same */
    cl->m_refused = false;
    ml_reset(cl->a->ml, NULL, MC_ERR_UNAVAILABLE);
}

static void rejoin_failed(struct cluster *cl, const char *what, int status)
{
    mc_debug("rejoining the master: %s: %s", what, mc_strerror(status));
    if (cl->master != NULL) {
        master_lost(cl, status);
        return;
    }
    if ((cl->backoff_ms *= 2) > REJOIN_MAX_MS)
        cl->backoff_ms = REJOIN_MAX_MS;
    cl->mstate = M_DOWN;
    cl->rejoin_ms = agent_now_ms() + cl->backoff_ms;
}

static void segments_forget(struct cluster *cl);

static void rejoined(struct cluster *cl)
{
    struct mc_agent *a = cl->a;

    cl->mstate = M_UP;
    cl->backoff_ms = 0;
    master_heard(cl);
    cl->m_refused = false;
    ml_reset(a->ml, cl->master, 0);
    ml_set_node(a->ml, cl->node);
    cl->next_hb_ms = 0;
    mc_info("rejoined the master as node %u%s", cl->node,
            a->seg_size != 0 ? ", DRAM segment mounted" : "");
}

static void rejoin_mounted(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                           size_t len)
{
    struct cluster *cl = ctx;
    struct mc_proto_mount_rep rep;

    (void)hdr;
    if (cl->mstate != M_MOUNT)
        return; /* lost meanwhile */
    if (status == 0)
        status = mc_proto_mount_rep_decode(pl, len, &rep) == 0 ? rep.status : MC_ERR_PROTO;
    if (status != 0) {
        rejoin_failed(cl, "MOUNT", status);
        return;
    }
    if (rep.seg != cl->a->seg_id) {
        mc_info("our segment is %u now (was %u): the master forgot what it held", rep.seg,
                cl->a->seg_id);
        cl->a->seg_id = rep.seg;
    }
    rejoined(cl);
}

static int mount_encode(struct cluster *cl, uint8_t **buf_p, size_t *len_p);

static void rejoin_helloed(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                           size_t len)
{
    struct cluster *cl = ctx;
    struct mc_proto_hello_rep rep;
    uint8_t *buf;
    size_t blen;

    (void)hdr;
    if (cl->mstate != M_HELLO)
        return;
    if (status == 0)
        status = mc_proto_hello_rep_decode(pl, len, &rep) == 0 ? rep.status : MC_ERR_PROTO;
    if (status == MC_ERR_EXISTS) {
        /* we lost our registration (declared dead) and another agent process has joined
         * under our name since: the name is its own now, and our segment is not in the
         * directory any more. Serving on under another name is not ours to decide */
        mc_error("rejoining the master: node name %s is held by another live agent now; "
                 "exiting",
                 cl->name);
        rejoin_failed(cl, "HELLO", status);
        agent_fatal(cl->a, MC_ERR_DENIED);
        return;
    }
    if (status != 0) {
        rejoin_failed(cl, "HELLO", status);
        return;
    }
    if (rep.node != cl->node)
        mc_info("the master knows us as node %u now (was %u)", rep.node, cl->node);
    cl->node = rep.node;
    cl->a->node = rep.node;
    /* the master may be a new one (ids are handed out afresh: the same number may name
     * another segment now): learn the segments again */
    segments_forget(cl);
    cl->lease_ttl_ms = rep.lease_ttl_ms;
    cl->node_ttl_ms = rep.node_ttl_ms;
    if (cl->a->seg_size == 0) {
        rejoined(cl);
        return;
    }
    status = mount_encode(cl, &buf, &blen);
    if (status == 0) {
        cl->mstate = M_MOUNT;
        status = mc_ucx_rpc_call(cl->master, MC_WIRE_MOUNT, buf, blen,
                                 mc_ucx_now_ms() + REJOIN_STEP_MS, rejoin_mounted, cl, NULL);
        free(buf);
    }
    if (status != 0)
        rejoin_failed(cl, "MOUNT", status);
}

static int hello_encode(const struct cluster *cl, void *buf, size_t cap, size_t *len_p);

/* One step of the rejoin, from the tick. */
static void rejoin_step(struct cluster *cl)
{
    uint8_t addr[MC_BOOT_ADDR_MAX], buf[MC_PROTO_TOKEN_MAX + 2 * MC_PROTO_NAME_MAX + 64];
    uint64_t now = agent_now_ms();
    size_t alen, len;
    int err;

    if (cl->mstate == M_DOWN && now >= cl->rejoin_ms) {
        err = mc_boot_fetch_start(&cl->bf, cl->a->cfg.master_addr);
        if (err != 0) {
            rejoin_failed(cl, "bootstrap", err);
            return;
        }
        cl->mstate = M_FETCH;
        cl->fetch_deadline_ms = now + REJOIN_STEP_MS;
    }
    if (cl->mstate != M_FETCH)
        return;
    err = mc_boot_fetch_poll(&cl->bf, addr, sizeof(addr), &alen);
    if (err == MC_INPROGRESS && now < cl->fetch_deadline_ms)
        return;
    if (err == MC_INPROGRESS) {
        mc_boot_fetch_cancel(&cl->bf);
        err = MC_ERR_TIMEOUT;
    }
    if (err == 0)
        err = mc_ucx_ep_connect(cl->u, addr, alen, &cl->master);
    if (err != 0) {
        cl->master = NULL;
        rejoin_failed(cl, "bootstrap", err);
        return;
    }
    err = hello_encode(cl, buf, sizeof(buf), &len);
    if (err == 0) {
        cl->mstate = M_HELLO;
        err = mc_ucx_rpc_call(cl->master, MC_WIRE_HELLO, buf, len, now + REJOIN_STEP_MS,
                              rejoin_helloed, cl, NULL);
    }
    if (err != 0)
        rejoin_failed(cl, "HELLO", err);
}

/* Writes landing from ep end through their bulk completions, unanswered: ep goes. */
static void inwrites_forget_ep(struct cluster *cl, const struct mc_ucx_ep *ep)
{
    struct inwrite *w;

    for (w = cl->inwrites; w != NULL; w = w->next) {
        if (w->ep == ep)
            w->ep = NULL;
    }
}

static void on_ep_error(void *ctx, struct mc_ucx_ep *ep, int status)
{
    struct cluster *cl = ctx;
    void *user = mc_ucx_ep_user(ep);

    cl->st.peer_errors++;
    if (ep == cl->master) {
        master_lost(cl, status);
        return;
    }
    inwrites_forget_ep(cl, ep);
    if (user != NULL && user != &cl->accepted_marker) {
        struct peer *p = user;

        mc_info("peer node %u: %s", p->node, mc_strerror(status));
        peer_drop(cl, p, MC_ERR_UNAVAILABLE);
        return;
    }
    mc_ucx_ep_close(ep, true);
}

/* --- transfers ------------------------------------------------------------------------------ */

static struct xfer **read_slot(struct cluster *cl, uint64_t id)
{
    struct xfer **pp = &cl->reads[id % READ_HASH];

    while (*pp != NULL && (*pp)->id != id)
        pp = &(*pp)->next;
    return pp;
}

static void read_unhash(struct cluster *cl, struct xfer *x)
{
    struct xfer **pp;

    if (!x->hashed)
        return;
    pp = read_slot(cl, x->id);
    if (*pp == x)
        *pp = x->next;
    x->next = NULL;
    x->hashed = false;
}

static void moving_add(struct cluster *cl, struct xfer *x)
{
    x->moving = true;
    x->iprev = NULL;
    x->inext = cl->moving;
    if (x->inext != NULL)
        x->inext->iprev = x;
    cl->moving = x;
}

static void moving_del(struct cluster *cl, struct xfer *x)
{
    if (!x->moving)
        return;
    if (x->iprev != NULL)
        x->iprev->inext = x->inext;
    else
        cl->moving = x->inext;
    if (x->inext != NULL)
        x->inext->iprev = x->iprev;
    x->moving = false;
}

/* A write is over once the owner said its bytes are in place (or the call failed) and UCX
 * reads the image no more: only then may the put publish, or its image be reused. */
static void write_check(struct cluster *cl, struct xfer *x)
{
    if (x->data_done && x->reply_done)
        xfer_end(cl, x, x->status);
}

static void write_data_done(void *ctx, int status)
{
    struct xfer *x = ctx;

    x->data_done = true;
    if (status != 0 && x->status == 0)
        x->status = status;
    write_check(x->cl, x);
}

static void read_check(struct cluster *cl, struct xfer *x);

/* The owner answered a transfer's call (WRITE: the bytes are in place; READ: it sends them),
 * or the call failed. */
static void xfer_replied(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                         size_t len)
{
    struct xfer *x = ctx;
    struct mc_proto_status_rep rep;

    (void)hdr;
    if (status == 0)
        status = mc_proto_status_rep_decode(pl, len, &rep) == 0 ? rep.status : MC_ERR_PROTO;
    x->reply_done = true;
    if (status != 0 && x->status == 0)
        x->status = status;
    if (x->kind != X_READ) /* WRITE and COPY */
        write_check(x->cl, x);
    else
        read_check(x->cl, x);
}

static int write_send(struct cluster *cl, struct xfer *x)
{
    struct put *p = x->p;
    struct copyjob *cj = x->cj;
    struct mc_peer_write_hdr h = {
        .seg = x->r.seg, .alloc = x->r.alloc, .offset = x->r.offset + x->from, .len = x->len,
    };
    const uint8_t *src;
    uint8_t buf[MC_PROTO_KEY_MAX + 64];
    size_t len;
    int err;

    if (x->kind == X_COPY) {
        /* the master keeps the source block allocated while the copy runs */
        h.version = cj->id;
        h.key = (struct mc_proto_bytes){(const uint8_t *)cj->key, cj->key_len};
        src = cl->a->seg + cj->src_offset;
    } else {
        h.version = p->version;
        h.key = (struct mc_proto_bytes){(const uint8_t *)p->key, p->key_len};
        src = p->dst + x->from;
    }
    err = mc_peer_write_hdr_encode(&h, buf, sizeof(buf), &len);

    x->data_done = x->reply_done = false;
    x->status = 0;
    /* the owner answers once the bytes are in its segment: a put that returned is readable
     * through any node at once (the sender's completion only says the bytes left) */
    if (err == 0)
        err = mc_ucx_send_bulk_call(x->peer->ep, MC_WIRE_WRITE, buf, len, src, x->len,
                                    x->deadline_ms, xfer_replied, write_data_done, x);
    if (err == 0) {
        cl->st.writes_out++;
        cl->st.write_bytes_out += x->len;
        moving_add(cl, x);
    }
    return err;
}

static void read_check(struct cluster *cl, struct xfer *x)
{
    if (!x->reply_done)
        return; /* its call still names x: it ends (at the latest at attempt_ms) first */
    if (x->data_started && !x->data_done)
        return; /* the bytes are still moving into the landing segment: wait */
    if (x->status != 0) {
        read_unhash(cl, x);
        xfer_end(cl, x, x->status);
    } else if (x->data_done && x->reply_done) {
        read_unhash(cl, x);
        xfer_end(cl, x, 0);
    }
}

static int read_send(struct cluster *cl, struct xfer *x)
{
    struct mc_peer_read_req req = {
        .seg = x->r.seg, .alloc = x->r.alloc, .version = x->rg->l->version,
        .offset = x->r.offset,
        .len = x->len,
    };
    uint8_t buf[64];
    size_t len;
    int err;

    x->id = ++cl->next_id;
    req.xfer = x->id;
    err = mc_peer_read_req_encode(&req, buf, sizeof(buf), &len);
    if (err != 0)
        return err;
    x->next = cl->reads[x->id % READ_HASH]; /* ids are new: push at the bucket's head */
    cl->reads[x->id % READ_HASH] = x;
    x->hashed = true;
    x->data_started = x->data_done = x->reply_done = false;
    x->status = 0;
    /* while other replicas are left, one that does not start its bytes within a share of the
     * time left (an unreachable, not yet dead, owner) gives its turn to the next */
    x->attempt_ms = x->deadline_ms;
    if (x->rg->l->rep_next < x->rg->l->g->nrep) {
        uint64_t now = agent_now_ms(), left = x->deadline_ms > now ? x->deadline_ms - now : 0;

        x->attempt_ms = now + (left / 4 > READ_ATTEMPT_MIN_MS ? left / 4 : READ_ATTEMPT_MIN_MS);
        if (x->attempt_ms > x->deadline_ms)
            x->attempt_ms = x->deadline_ms;
    }
    err = mc_ucx_rpc_call(x->peer->ep, MC_WIRE_READ, buf, len, x->attempt_ms, xfer_replied, x,
                          NULL);
    if (err != 0) {
        read_unhash(cl, x);
        return err;
    }
    cl->st.reads_out++;
    moving_add(cl, x);
    return 0;
}

static void xfer_start(struct cluster *cl, struct xfer *x)
{
    const struct segrec *sr = seg_find(cl, x->r.seg);
    int err;

    if (cl->destroying || (x->kind == X_READ && x->rg->l == NULL)) {
        xfer_end(cl, x, MC_ERR_CANCELED); /* nothing new while the worker goes, nor for a
                                              GET another transfer answered */
        return;
    }
    if (sr == NULL) {
        /* whose segment is it? ask the master, then go on */
        x->next = NULL;
        if (cl->info_wait_tail != NULL)
            cl->info_wait_tail->next = x;
        else
            cl->info_wait = x;
        cl->info_wait_tail = x;
        info_refresh(cl);
        return;
    }
    x->peer = peer_get(cl, sr);
    if (x->peer == NULL) {
        xfer_end(cl, x, MC_ERR_UNAVAILABLE);
        return;
    }
    if (x->peer->state != PEER_READY) {
        x->next = NULL;
        if (x->peer->waitq_tail != NULL)
            x->peer->waitq_tail->next = x;
        else
            x->peer->waitq = x;
        x->peer->waitq_tail = x;
        return;
    }
    err = x->kind == X_READ ? read_send(cl, x) : write_send(cl, x);
    if (err != 0)
        xfer_end(cl, x, err);
}

/* The next replica of l's object that is not ours, from l->rep_next on, or -1. */
static int next_remote(const struct mc_agent *a, struct lease *l)
{
    while (l->rep_next < l->g->nrep) {
        uint32_t i = l->rep_next++;

        if ((a->seg_size == 0 || l->g->rep[i].seg != a->seg_id) && !(l->skip >> i & 1))
            return (int)i;
    }
    return -1;
}

/* A new transfer of rg's object from replica i into a landing block of its own. */
static int read_new(struct cluster *cl, struct rget *rg, int i, uint64_t len, uint64_t deadline)
{
    struct xfer *x = calloc(1, sizeof(*x));
    int err;

    if (x == NULL)
        return MC_ERR_NOMEM;
    err = mc_alloc_alloc(cl->a->land, len, &x->land_id);
    if (err != 0) {
        free(x);
        return err;
    }
    x->what = OP_READ;
    x->kind = X_READ;
    x->cl = cl;
    x->r = rg->l->g->rep[i];
    x->ri = (uint32_t)i;
    x->rg = rg;
    x->len = len;
    x->deadline_ms = deadline;
    rg->running++;
    xfer_start(cl, x);
    return 0;
}

/* A read transfer is final: the first to land answers its GET; the others, and failed
 * ones, give their landing blocks back (UCX touches them no more). */
static void read_end(struct cluster *cl, struct xfer *x, int status)
{
    struct mc_agent *a = cl->a;
    struct rget *rg = x->rg;
    struct lease *l = rg->l;
    int i;

    rg->running--;
    if (l != NULL && status == 0) {
        cl->st.read_bytes_in += x->len;
        l->land_id = x->land_id;
        l->rep_used = x->ri;
        rg->l = NULL;
        free(x);
        if (rg->running == 0)
            free(rg);
        agent_get_landed(a, l, 0);
        return;
    }
    if (l != NULL) {
        /* this replica failed: an unreachable node counts as absent; try the next one */
        mc_debug("read from node %u (segment %u): %s", x->r.node, x->r.seg,
                 mc_strerror(status));
        i = agent_now_ms() < x->deadline_ms && l->c->state == CL_ACTIVE ? next_remote(a, l)
                                                                        : -1;
        if (i >= 0) {
            cl->st.failovers++;
            x->r = l->g->rep[i];
            x->ri = (uint32_t)i;
            x->peer = NULL;
            x->hedged = false;
            rg->running++;
            xfer_start(cl, x);
            return;
        }
    }
    mc_alloc_free(a->land, x->land_id);
    free(x);
    if (l != NULL && rg->running == 0) {
        rg->l = NULL;
        free(rg);
        agent_get_landed(a, l, status == MC_ERR_TIMEOUT ? MC_ERR_TIMEOUT : MC_ERR_NOT_FOUND);
    } else if (l == NULL && rg->running == 0) {
        free(rg);
    }
}

/* A transfer is final (no byte of its memory is touched by UCX any more). */
static void xfer_end(struct cluster *cl, struct xfer *x, int status)
{
    struct mc_agent *a = cl->a;

    moving_del(cl, x);
    /* the owner does not hold that segment (any more): ask the master next time */
    if ((status == MC_ERR_NOT_FOUND || status == MC_ERR_CANCELED) && x->r.seg < cl->nsegtab)
        cl->segs[x->r.seg].valid = false;

    if (x->kind == X_COPY) {
        struct copyjob *cj = x->cj;

        if (status != 0)
            mc_debug("copy %llu to node %u (segment %u): %s", (unsigned long long)cj->id,
                     x->r.node, x->r.seg, mc_strerror(status));
        else
            cl->st.copies_out++;
        /* the master that asked is still ours: tell it (a new one knows nothing of it) */
        if (!cl->destroying && cj->master == cl->master && cl->master != NULL)
            reply_status(cj->master, &(struct mc_wire_hdr){.request_id = cj->request_id,
                                                           .type = MC_WIRE_COPY},
                         status);
        free(cj);
        free(x);
        return;
    }
    if (x->kind == X_WRITE) {
        struct put *p = x->p;

        if (status != 0) {
            mc_debug("write to node %u (segment %u): %s", x->r.node, x->r.seg,
                     mc_strerror(status));
            if (p->send_err == 0)
                p->send_err = status == MC_ERR_CANCELED ? MC_ERR_UNAVAILABLE : status;
        }
        free(x);
        if (--p->sends == 0)
            agent_put_writes_final(a, p);
        return;
    }
    read_end(cl, x, status);
}

void cluster_put_send(struct mc_agent *a, struct put *p, uint64_t from, uint64_t to)
{
    struct cluster *cl = a->cl;
    uint32_t i;

    if (from >= to)
        return;
    p->sends++; /* held while they start, so none ends the put under our feet */
    for (i = 0; i < p->nrep; i++) {
        struct xfer *x;

        if (a->seg_size != 0 && p->rep[i].seg == a->seg_id && p->dst != p->image)
            continue; /* the image is that replica */
        x = calloc(1, sizeof(*x));
        if (x == NULL) {
            p->send_err = MC_ERR_NOMEM;
            break;
        }
        x->kind = X_WRITE;
        x->cl = cl;
        x->r = p->rep[i];
        x->p = p;
        x->from = from;
        x->len = to - from;
        x->deadline_ms = p->deadline_ms;
        p->sends++;
        xfer_start(cl, x);
    }
    p->sent_upto = to;
    if (--p->sends == 0)
        agent_put_writes_final(a, p);
}

/* Pipelining: the image's leading chunks that are copied (and summed) go out while the
 * rest is still being copied, PUT_PIECE bytes at a time. */
#define PUT_PIECE (4u << 20)

void cluster_put_progress(struct mc_agent *a, struct put *p)
{
    uint64_t end = p->sent_upto;

    if (p->nremote == 0 || p->send_err != 0)
        return;
    while (end < p->size && p->seen[end / MC_SHM_CHUNK])
        end = (end / MC_SHM_CHUNK + 1) * MC_SHM_CHUNK;
    if (end > p->size)
        end = p->size;
    /* whole pieces only: the tail goes with the checksums when the put finishes */
    end = p->sent_upto + (end - p->sent_upto) / PUT_PIECE * PUT_PIECE;
    if (end > p->sent_upto)
        cluster_put_send(a, p, p->sent_upto, end);
}

int cluster_get_remote(struct mc_agent *a, struct lease *l, const struct mc_master_get_result *g)
{
    struct cluster *cl = a->cl;
    bool csum = (g->flags & MC_MASTER_PUT_NO_CHECKSUM) == 0;
    uint64_t len = mc_shm_alloc_len(g->size, csum);
    struct rget *rg;
    int i, err;

    l->g = malloc(sizeof(*l->g));
    rg = calloc(1, sizeof(*rg));
    if (l->g == NULL || rg == NULL) {
        free(l->g);
        l->g = NULL;
        free(rg);
        return MC_ERR_NOMEM;
    }
    *l->g = *g;
    l->rep_next = 0;
    rg->l = l;
    l->c->refs++; /* agent_get_landed puts it, maybe from inside read_new */
    i = next_remote(a, l);
    err = i < 0 ? MC_ERR_NOT_FOUND : read_new(cl, rg, i, len, l->op_deadline_ms);
    if (err != 0) {
        l->c->refs--; /* nothing started: the caller still holds its own */
        free(l->g);
        l->g = NULL;
        free(rg);
        /* a full landing segment is transient: readers retry */
        return err == MC_ERR_NO_SPACE || err == MC_ERR_NOMEM ? MC_ERR_BUSY : err;
    }
    return 0;
}

/* --- the owner's side ----------------------------------------------------------------------- */

/* A frame with request id `id` on `ep` comes from an authenticated peer: ours (to the master,
 * to peers whose addresses the master gave us), or an accepted one that passed HELLO in the
 * session this frame carries (ucx.h: a new endpoint at a dead peer's address does not). */
static bool ep_authed(const struct cluster *cl, struct mc_ucx_ep *ep, uint64_t id)
{
    if (!mc_ucx_ep_is_accepted(ep))
        return true;
    return mc_ucx_ep_user(ep) == &cl->accepted_marker &&
           MC_UCX_SESSION_OF(id) == mc_ucx_ep_session(ep);
}

static bool span_in_seg(const struct mc_agent *a, uint64_t off, uint64_t len)
{
    return a->seg_size != 0 && off <= a->seg_size && len <= a->seg_size - off;
}

static void fence_add(struct cluster *cl, uint32_t seg, uint32_t alloc, uint64_t version)
{
    struct fence *f = malloc(sizeof(*f));

    if (f == NULL)
        return; /* the master's put_release timeout frees it */
    f->item = (struct mc_proto_fence_item){.seg = seg, .alloc = alloc, .version = version};
    f->first_ms = agent_now_ms();
    f->next = cl->fences;
    cl->fences = f;
}

static void read_served(void *ctx, int status)
{
    struct cluster *cl = ctx;

    if (status != 0)
        mc_debug("a read served to a peer failed: %s", mc_strerror(status));
    else
        cl->st.reads_in++;
}

static void h_read(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                   const void *pl)
{
    struct mc_agent *a = cl->a;
    struct mc_peer_read_req req;
    int err;

    if (mc_peer_read_req_decode(pl, hdr->payload_len, &req) != 0) {
        reply_status(ep, hdr, MC_ERR_PROTO);
        return;
    }
    if (req.seg != a->seg_id || !span_in_seg(a, req.offset, req.len)) {
        reply_status(ep, hdr, MC_ERR_NOT_FOUND);
        return;
    }
    /* straight from the segment: the reader's lease keeps the allocation ours to send */
    err = mc_ucx_send_bulk(ep, MC_WIRE_READ_REPLY, req.xfer, NULL, 0, a->seg + req.offset,
                           req.len, read_served, cl);
    reply_status(ep, hdr, err);
}

static void h_fence(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                    const void *pl);

/* COPY from the master (our node drains): write [src_offset, +len) of our segment into
 * another node's block with the ordinary remote write; answered when that write is. */
static void h_copy(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                   const void *pl)
{
    struct mc_agent *a = cl->a;
    struct mc_proto_copy_req req;
    struct copyjob *cj;
    struct xfer *x;

    if (mc_proto_copy_req_decode(pl, hdr->payload_len, &req) != 0) {
        reply_status(ep, hdr, MC_ERR_PROTO);
        return;
    }
    if (req.src_seg != a->seg_id || !span_in_seg(a, req.src_offset, req.len)) {
        reply_status(ep, hdr, MC_ERR_NOT_FOUND);
        return;
    }
    if (req.dst_seg == a->seg_id || cl->destroying || cl->leaving) {
        reply_status(ep, hdr, MC_ERR_INVALID);
        return;
    }
    cj = malloc(sizeof(*cj));
    x = calloc(1, sizeof(*x));
    if (cj == NULL || x == NULL) {
        free(cj);
        free(x);
        reply_status(ep, hdr, MC_ERR_NOMEM);
        return;
    }
    cj->master = ep;
    cj->request_id = hdr->request_id;
    cj->id = req.id;
    cj->src_offset = req.src_offset;
    cj->key_len = req.key.len;
    memcpy(cj->key, req.key.p, req.key.len);
    x->kind = X_COPY;
    x->cl = cl;
    x->cj = cj;
    x->r = (struct mc_master_replica){.seg = req.dst_seg, .node = req.dst_node,
                                      .alloc = req.dst_alloc, .offset = req.dst_offset,
                                      .len = req.len};
    x->from = 0;
    x->len = req.len;
    x->deadline_ms = agent_now_ms() + a->cfg.op_timeout_ms;
    xfer_start(cl, x);
}

static void on_request(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                       const void *pl)
{
    struct cluster *cl = ctx;

    if (hdr->type == MC_WIRE_HELLO) {
        struct mc_proto_hello_req req;

        if (mc_proto_hello_req_decode(pl, hdr->payload_len, &req) != 0) {
            reply_status(ep, hdr, MC_ERR_PROTO);
        } else if (!mc_proto_token_equal(cl->token, cl->token_len, &req.token)) {
            mc_warn("a peer's HELLO with a wrong cluster token refused");
            cl->st.refused++;
            reply_status(ep, hdr, MC_ERR_DENIED);
            if (mc_ucx_ep_is_accepted(ep)) {
                mc_ucx_ep_set_user(ep, NULL); /* it loses what an earlier HELLO gave it */
                inwrites_forget_ep(cl, ep);
                mc_ucx_ep_close(ep, false);   /* and we keep nothing for it */
            }
        } else {
            if (mc_ucx_ep_is_accepted(ep)) {
                mc_ucx_ep_set_user(ep, &cl->accepted_marker);
                mc_ucx_ep_set_session(ep, MC_UCX_SESSION_OF(hdr->request_id));
            }
            reply_status(ep, hdr, 0);
        }
        return;
    }
    if (!ep_authed(cl, ep, hdr->request_id)) {
        cl->st.refused++;
        reply_status(ep, hdr, MC_ERR_DENIED);
        mc_ucx_ep_set_user(ep, NULL);
        inwrites_forget_ep(cl, ep);
        mc_ucx_ep_close(ep, false); /* an accepted one: forgotten, nothing kept for it */
        return;
    }
    if (hdr->type == MC_WIRE_READ)
        h_read(cl, ep, hdr, pl);
    else if (hdr->type == MC_WIRE_FENCE && ep == cl->master)
        h_fence(cl, ep, hdr, pl);
    else if (hdr->type == MC_WIRE_COPY && ep == cl->master)
        h_copy(cl, ep, hdr, pl);
    else
        reply_status(ep, hdr, MC_ERR_PROTO);
}

static bool is_fenced(const struct cluster *cl, uint32_t alloc, uint64_t version)
{
    const struct fenced *f;

    for (f = cl->fenced[alloc % FENCED_HASH]; f != NULL; f = f->next) {
        if (f->alloc == alloc && f->version == version)
            return true;
    }
    return false;
}

/* FENCE from the master: the writer of these blocks was declared dead. A block with a write
 * landing now is BUSY (asked again later); any other is fenced from now on: a write of that
 * put arriving later is refused, so the master may reuse the block once we said 0. */
static void h_fence(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                    const void *pl)
{
    struct mc_agent *a = cl->a;
    struct mc_proto_fence_item *items = malloc(MC_PROTO_BATCH_MAX * sizeof(*items));
    int *results = malloc(MC_PROTO_BATCH_MAX * sizeof(*results));
    struct mc_proto_batch_rep rep = {0};
    struct mc_proto_fence_req req;
    uint8_t *out = NULL;
    size_t len;
    uint32_t i;

    if (items == NULL || results == NULL ||
        (out = malloc(MC_PROTO_BATCH_MAX * 8 + 64)) == NULL) {
        reply_status(ep, hdr, MC_ERR_NOMEM);
        goto out;
    }
    if (mc_proto_fence_req_decode(pl, hdr->payload_len, MC_PROTO_BATCH_MAX, &req, items) != 0) {
        reply_status(ep, hdr, MC_ERR_PROTO);
        goto out;
    }
    for (i = 0; i < req.n; i++) {
        const struct mc_proto_fence_item *it = &items[i];
        struct inwrite *w;
        struct fenced *f;

        results[i] = 0;
        if (it->seg != a->seg_id || a->seg_size == 0) {
            results[i] = MC_ERR_NOT_FOUND;
            continue;
        }
        for (w = cl->inwrites; w != NULL; w = w->next) {
            if (w->alloc == it->alloc && w->version == it->version)
                results[i] = MC_ERR_BUSY;
        }
        if (results[i] != 0 || is_fenced(cl, it->alloc, it->version))
            continue;
        f = malloc(sizeof(*f));
        if (f == NULL) {
            results[i] = MC_ERR_NOMEM;
            continue;
        }
        f->alloc = it->alloc;
        f->version = it->version;
        /* a write of a dead writer cannot start later than its op deadline, nor run past
         * the hard deadline on top of it */
        f->until_ms = agent_now_ms() + 2 * (a->cfg.op_timeout_ms + a->cfg.peer_hard_deadline_ms);
        f->next = cl->fenced[it->alloc % FENCED_HASH];
        cl->fenced[it->alloc % FENCED_HASH] = f;
    }
    rep.n = req.n;
    if (mc_proto_results_rep_encode(&rep, results, out, MC_PROTO_BATCH_MAX * 8 + 64, &len) == 0)
        mc_ucx_rpc_reply(ep, MC_WIRE_FENCE_REPLY, hdr->request_id, out, len);
out:
    free(items);
    free(results);
    free(out);
}

static void fenced_expire(struct cluster *cl, uint64_t now)
{
    uint32_t i;

    for (i = 0; i < FENCED_HASH; i++) {
        struct fenced **pp = &cl->fenced[i], *f;

        while ((f = *pp) != NULL) {
            if (now >= f->until_ms) {
                *pp = f->next;
                free(f);
            } else {
                pp = &f->next;
            }
        }
    }
}

static void *bulk_dest(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                       const void *hpl, size_t len, void **op_p)
{
    struct cluster *cl = ctx;
    struct mc_agent *a = cl->a;

    if (hdr->type == MC_WIRE_READ_REPLY) {
        struct xfer *x = *read_slot(cl, hdr->request_id);

        if (x == NULL || x->peer == NULL || x->peer->ep != ep || x->data_started ||
            len != x->len)
            return NULL; /* not a read of ours (late, or forged): refused */
        x->data_started = true;
        *op_p = x;
        return a->land_base + mc_alloc_offset(a->land, x->land_id);
    }
    if (hdr->type == MC_WIRE_WRITE && ep_authed(cl, ep, hdr->request_id)) {
        struct mc_peer_write_hdr h;
        struct inwrite *w;

        if (mc_peer_write_hdr_decode(hpl, hdr->payload_len, &h) != 0 || h.len != len ||
            h.seg != a->seg_id || !span_in_seg(a, h.offset, h.len) ||
            is_fenced(cl, h.alloc, h.version)) {
            cl->st.refused++;
            return NULL;
        }
        w = calloc(1, sizeof(*w));
        if (w == NULL)
            return NULL;
        w->what = OP_INWRITE;
        w->cl = cl;
        w->ep = ep;
        w->request_id = hdr->request_id;
        w->seg = h.seg;
        w->alloc = h.alloc;
        w->version = h.version;
        w->offset = h.offset;
        w->len = h.len;
        w->next = cl->inwrites;
        if (w->next != NULL)
            w->next->prev = w;
        cl->inwrites = w;
        *op_p = w;
        return a->seg + h.offset;
    }
    cl->st.refused++;
    return NULL;
}

static void bulk_done(void *ctx, void *op, int status)
{
    struct cluster *cl = ctx;

    if (*(enum op_what *)op == OP_READ) {
        struct xfer *x = op;

        x->data_done = true;
        if (status != 0 && x->status == 0)
            x->status = status;
        read_check(cl, x);
        return;
    }
    {
        struct inwrite *w = op;

        if (w->prev != NULL)
            w->prev->next = w->next;
        else
            cl->inwrites = w->next;
        if (w->next != NULL)
            w->next->prev = w->prev;
        if (w->ep != NULL)
            reply_status(w->ep, &(struct mc_wire_hdr){.request_id = w->request_id,
                                                      .type = MC_WIRE_WRITE},
                         status);
        if (status == 0) {
            cl->st.writes_in++;
            cl->st.write_bytes_in += w->len;
        } else {
            /* a torn write: the writer will revoke (or be declared dead); no byte of it
             * moves any more, so the master may reuse the block once told */
            fence_add(cl, w->seg, w->alloc, w->version);
        }
        free(w);
    }
}

/* --- fences and heartbeats ------------------------------------------------------------------ */

struct fence_call {
    struct cluster *cl;
    uint32_t n;
    struct fence *items[64];
};

static void fence_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                       size_t len)
{
    struct fence_call *fc = ctx;
    struct cluster *cl = fc->cl;
    struct mc_proto_batch_rep rep;
    int results[64];
    uint32_t i;

    (void)hdr;
    cl->fence_busy = false;
    if (status == 0 && (mc_proto_results_rep_decode(pl, len, fc->n, &rep, results) != 0 ||
                        rep.status != 0 || rep.n != fc->n))
        status = MC_ERR_PROTO;
    for (i = 0; i < fc->n; i++) {
        struct fence *f = fc->items[i];

        /* a put still live (BUSY) is asked again later: its writer may still revoke it */
        if (status == 0 && results[i] != MC_ERR_BUSY) {
            free(f);
            continue;
        }
        if (agent_now_ms() - f->first_ms > 15u * 60u * 1000u) {
            free(f); /* past the master's put_release timeout: it freed the block itself */
            continue;
        }
        f->next = cl->fences;
        cl->fences = f;
    }
    free(fc);
}

static void fence_send(struct cluster *cl)
{
    struct mc_proto_fence_item items[64];
    struct fence_call *fc;
    struct mc_proto_fence_req req;
    uint8_t buf[64 * 24 + 16];
    size_t len;

    if (cl->fences == NULL || cl->fence_busy || (fc = malloc(sizeof(*fc))) == NULL)
        return;
    fc->cl = cl;
    fc->n = 0;
    while (cl->fences != NULL && fc->n < 64) {
        fc->items[fc->n] = cl->fences;
        items[fc->n] = cl->fences->item;
        cl->fences = cl->fences->next;
        fc->n++;
    }
    req.n = fc->n;
    if (mc_proto_fence_req_encode(&req, items, buf, sizeof(buf), &len) == 0 &&
        master_call(cl, MC_WIRE_FENCE, buf, len, mc_ucx_now_ms() + INFO_TIMEOUT_MS,
                    fence_done, fc) == 0) {
        cl->fence_busy = true;
        return;
    }
    fence_done(fc, MC_ERR_UNAVAILABLE, NULL, NULL, 0);
}

static void hb_done(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                    size_t len)
{
    struct cluster *cl = ctx;
    struct mc_proto_heartbeat_rep rep;

    (void)hdr;
    cl->hb_busy = false;
    if (status == 0) {
        master_heard(cl);
        status = mc_proto_heartbeat_rep_decode(pl, len, &rep) == 0 ? rep.status : MC_ERR_PROTO;
        if (status == 0)
            cl->drain = rep.drain;
    }
    if ((status == MC_ERR_NOT_FOUND || status == MC_ERR_DENIED) && cl->mstate == M_UP) {
        /* the master declared us dead (a partition or a stop longer than its TTL), or this
         * endpoint is not the one it knows us by any more: join again (retrying on it
         * would be refused forever) */
        mc_warn("the master does not know us any more (%s): rejoining", mc_strerror(status));
        master_lost(cl, status);
    } else if (status != 0 && !(status == MC_ERR_TIMEOUT && cl->m_unresp)) {
        mc_warn("heartbeat: %s", mc_strerror(status));
    }
}

/* x's owner started sending and went silent past x's turn (a stopped process, a cut
 * link): the bytes already moving cannot be stopped, so read the next replica beside them
 * into a block of its own; whichever lands first answers. */
static void read_hedge(struct cluster *cl, struct xfer *x)
{
    struct lease *l = x->rg->l;
    int i;

    x->hedged = true;
    if (l->c->state != CL_ACTIVE || (i = next_remote(cl->a, l)) < 0)
        return;
    if (read_new(cl, x->rg, i, x->len, x->deadline_ms) == 0) {
        cl->st.failovers++;
        cl->st.hedged++;
        mc_debug("read from node %u stalled mid-transfer: replica %d read beside it",
                 x->r.node, i);
    } else {
        l->rep_next--; /* no room to land it now: maybe at the next tick */
        x->hedged = false;
    }
}

void cluster_tick(struct mc_agent *a)
{
    struct cluster *cl = a->cl;
    uint64_t now = agent_now_ms();
    uint32_t i;

    if (cl->m_refused && cl->mstate == M_UP) {
        mc_warn("the master refused our calls as node %u: rejoining", cl->node);
        master_lost(cl, MC_ERR_DENIED);
    }
    if (cl->mstate != M_UP)
        rejoin_step(cl);
    master_silence_check(cl, now);

    if (!cl->hb_busy && now >= cl->next_hb_ms && !cl->leaving && cl->master != NULL &&
        cl->mstate == M_UP) {
        struct mc_proto_heartbeat_req req = {.node = cl->node};
        uint8_t buf[16];
        size_t len;

        /* not master_call: heartbeats go out also while the master is silent, as the
         * probe that tells when it answers again */
        cl->next_hb_ms = now + a->cfg.heartbeat_ms;
        if (mc_proto_heartbeat_req_encode(&req, buf, sizeof(buf), &len) == 0 &&
            mc_ucx_rpc_call(cl->master, MC_WIRE_HEARTBEAT, buf, len,
                            now + a->cfg.heartbeat_ms * 2, hb_done, cl, NULL) == 0) {
            cl->hb_busy = true;
            master_asked(cl);
        }
    }
    if (now >= cl->next_fence_ms) {
        cl->next_fence_ms = now + FENCE_RETRY_MS;
        fence_send(cl);
        fenced_expire(cl, now);
    }
    /* a peer that kept a transfer past its deadline by peer_hard_deadline_ms is judged
     * unresponsive: its endpoint is closed with force, UCX ends what it held (with an
     * error), and only then is that memory reused (DESIGN.md §5) */
    for (struct xfer *x = cl->moving; x != NULL; x = x->inext) {
        if (x->peer != NULL && now > x->deadline_ms + a->cfg.peer_hard_deadline_ms) {
            mc_warn("peer node %u unresponsive past its hard deadline: endpoint closed",
                    x->peer->node);
            cl->st.peer_errors++;
            peer_drop(cl, x->peer, MC_ERR_UNAVAILABLE);
            break; /* the list changed; the rest waits for the next tick */
        }
    }
    /* reads whose owner accepted the call but never started the bytes */
    for (i = 0; i < READ_HASH; i++) {
        struct xfer *x = cl->reads[i], *next;

        for (; x != NULL; x = next) {
            next = x->next;
            /* only once the call is over: while it is pending, its own deadline (the
             * attempt's) ends it, and its callback still names x */
            if (x->reply_done && !x->data_started && now > x->attempt_ms) {
                if (x->status == 0)
                    x->status = MC_ERR_TIMEOUT;
                read_check(cl, x);
            } else if (x->data_started && !x->data_done && !x->hedged && now > x->attempt_ms &&
                       x->rg->l != NULL) {
                read_hedge(cl, x);
            }
        }
    }
}

/* --- loop hooks ----------------------------------------------------------------------------- */

bool cluster_turn(struct mc_agent *a)
{
    struct cluster *cl = a->cl;
    bool work = mc_ucx_progress(cl->u);

    if (ml_flush(a->ml)) {
        mc_ucx_progress(cl->u);
        work = true;
    }
    return work;
}

bool cluster_arm(struct mc_agent *a)
{
    struct cluster *cl = a->cl;
    struct io_uring_sqe *sqe;

    if (!mc_ucx_arm(cl->u))
        return false;
    if (!cl->efd_polled && (sqe = agent_get_sqe(a)) != NULL) {
        io_uring_prep_poll_add(sqe, mc_ucx_efd(cl->u), POLLIN);
        io_uring_sqe_set_data64(sqe, (uint64_t)UD_UCX);
        cl->efd_polled = true;
    }
    if (!cl->listen_polled && cl->listen_fd >= 0 && (sqe = agent_get_sqe(a)) != NULL) {
        io_uring_prep_poll_add(sqe, cl->listen_fd, POLLIN);
        io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)cl | UD_UCX);
        cl->listen_polled = true;
    }
    return true;
}

void cluster_on_cqe(struct mc_agent *a, void *p, int res)
{
    struct cluster *cl = a->cl;

    (void)res;
    if (cl == NULL)
        return;
    if (p == NULL) {
        cl->efd_polled = false; /* the next turn progresses */
    } else {
        cl->listen_polled = false;
        mc_boot_serve(cl->listen_fd, cl->boot, cl->boot_len);
    }
}

unsigned cluster_listen_port(const struct mc_agent *a)
{
    return a->cl != NULL ? a->cl->port : 0;
}

uint64_t cluster_lease_ttl_ms(const struct mc_agent *a)
{
    return a->cl->lease_ttl_ms;
}

/* --- start-up and exit ---------------------------------------------------------------------- */

/* MOUNT of our DRAM segment with our worker address, in a malloc'd buffer. */
static int mount_encode(struct cluster *cl, uint8_t **buf_p, size_t *len_p)
{
    struct mc_agent *a = cl->a;
    struct mc_proto_mount_req req = {
        .seg = {.node = cl->node, .kind = MC_SEG_DRAM, .base = (uint64_t)(uintptr_t)a->seg,
                .size = a->seg_size},
    };
    const void *waddr;
    size_t wlen;
    int err;

    mc_ucx_address(cl->u, &waddr, &wlen);
    req.worker_addr.p = waddr;
    req.worker_addr.len = wlen;
    *buf_p = malloc(wlen + 256);
    if (*buf_p == NULL)
        return MC_ERR_NOMEM;
    err = mc_proto_mount_req_encode(&req, *buf_p, wlen + 256, len_p);
    if (err != 0)
        free(*buf_p);
    return err;
}

/* Forget what we knew of the segments (and the fences we owed the master): after a master
 * restart their ids name other segments. Peers stay: they are known by worker address, and
 * their endpoints are as good as before. */
static void segments_forget(struct cluster *cl)
{
    uint32_t i;

    for (i = 0; i < cl->nsegtab; i++) {
        free(cl->segs[i].addr);
        cl->segs[i].addr = NULL;
        cl->segs[i].valid = false;
    }
    while (cl->fences != NULL) {
        struct fence *f = cl->fences;

        cl->fences = f->next;
        free(f);
    }
}

#define JOIN_RETRY_MS 200u /* between two HELLOs while our name is held by a live agent */

static int join(struct cluster *cl, uint64_t deadline)
{
    struct mc_agent *a = cl->a;
    uint8_t addr[MC_BOOT_ADDR_MAX], buf[MC_PROTO_TOKEN_MAX + 2 * MC_PROTO_NAME_MAX + 64];
    struct mc_proto_hello_rep hrep;
    struct sync_call sc;
    size_t alen, len;
    bool name_waited = false;
    uint64_t now;
    int err;

    /* the master may come up after us: retry its bootstrap until the deadline */
    for (;;) {
        now = agent_now_ms();
        err = mc_boot_fetch(a->cfg.master_addr, deadline > now ? deadline - now : 0, addr,
                            sizeof(addr), &alen);
        if (err != MC_ERR_UNAVAILABLE || agent_now_ms() + 100 >= deadline)
            break;
        poll(NULL, 0, 100);
    }
    if (err != 0) {
        mc_error("master %s: %s", a->cfg.master_addr, mc_strerror(err));
        return err;
    }
    /* a name held by a live agent is refused (MC_ERR_EXISTS). That agent may be one that
     * just died, whose endpoint the master has not seen fail yet (or whose heartbeats it
     * has not yet seen stop for node_ttl_ms): ask again until the deadline */
    for (;;) {
        err = mc_ucx_ep_connect(cl->u, addr, alen, &cl->master);
        if (err == 0)
            err = hello_encode(cl, buf, sizeof(buf), &len);
        if (err == 0)
            err = sync_call(cl, cl->master, MC_WIRE_HELLO, buf, len, deadline, &sc);
        if (err == 0) {
            err = mc_proto_hello_rep_decode(sc.reply, sc.len, &hrep) == 0 ? hrep.status
                                                                            : MC_ERR_PROTO;
            free(sc.reply);
        }
        if (err != MC_ERR_EXISTS || agent_now_ms() + JOIN_RETRY_MS >= deadline)
            break;
        if (!name_waited)
            mc_warn("node name %s is held by a live agent: asking again until "
                    "connect_timeout_ms",
                    cl->name);
        name_waited = true;
        mc_ucx_ep_close(cl->master, true);
        cl->master = NULL;
        poll(NULL, 0, JOIN_RETRY_MS);
    }
    if (err == MC_ERR_EXISTS) {
        mc_error("joining the master at %s: node name %s is in use by another live agent",
                 a->cfg.master_addr, cl->name);
        return MC_ERR_DENIED; /* refused: exit status 3 */
    }
    if (err != 0) {
        mc_error("joining the master at %s: %s", a->cfg.master_addr,
                 err == MC_ERR_DENIED ? "refused (wrong cluster token?)" : mc_strerror(err));
        return err;
    }
    cl->node = hrep.node;
    cl->node_ttl_ms = hrep.node_ttl_ms;
    cl->lease_ttl_ms = hrep.lease_ttl_ms;
    a->node = hrep.node;
    if (a->seg_size != 0) {
        struct mc_proto_mount_rep mrep;
        uint8_t *mbuf;

        err = mount_encode(cl, &mbuf, &len);
        if (err == 0) {
            err = sync_call(cl, cl->master, MC_WIRE_MOUNT, mbuf, len, deadline, &sc);
            free(mbuf);
        }
        if (err == 0) {
            err = mc_proto_mount_rep_decode(sc.reply, sc.len, &mrep) == 0 ? mrep.status
                                                                            : MC_ERR_PROTO;
            free(sc.reply);
        }
        if (err != 0) {
            mc_error("mounting the DRAM segment at the master: %s", mc_strerror(err));
            return err;
        }
        a->seg_id = mrep.seg;
    }
    mc_info("joined the master at %s as node %u (%s)%s", a->cfg.master_addr, cl->node,
            cl->name, a->seg_size != 0 ? ", DRAM segment mounted" : ", holding no data");
    return 0;
}

int cluster_create(struct mc_agent *a)
{
    char keepalive[64];
    const char *ucx_cfg[] = {"MM_ERROR_HANDLING=y", keepalive, NULL};
    struct mc_ucx_params up = {.name = "mc-agent", .config = ucx_cfg, .ep_error = on_ep_error};
    uint64_t deadline = agent_now_ms() + a->cfg.connect_timeout_ms;
    struct cluster *cl;
    const void *addr;
    size_t alen;
    int err;

    cl = calloc(1, sizeof(*cl));
    if (cl == NULL)
        return MC_ERR_NOMEM;
    a->cl = cl;
    cl->a = a;
    cl->listen_fd = -1;
    if (getrandom(&cl->incarnation, sizeof(cl->incarnation), 0) !=
        (ssize_t)sizeof(cl->incarnation)) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts); /* unique enough: pid and nanoseconds */
        cl->incarnation = (uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_nsec ^
                          (uint64_t)ts.tv_sec << 20;
    }
    if (cl->incarnation == 0)
        cl->incarnation = 1; /* 0 means "none sent" */
    if (a->cfg.node_name != NULL) {
        snprintf(cl->name, sizeof(cl->name), "%s", a->cfg.node_name);
    } else if (gethostname(cl->name, sizeof(cl->name)) != 0) {
        strcpy(cl->name, "node");
    }
    cl->name[sizeof(cl->name) - 1] = '\0';
    if (a->cfg.cluster_token != NULL && a->cfg.cluster_token[0] != '\0') {
        cl->token = strdup(a->cfg.cluster_token);
        if (cl->token == NULL)
            return MC_ERR_NOMEM;
        cl->token_len = strlen(cl->token);
    } else {
        mc_warn("no cluster_token: joining a master that accepts any (allow_no_token)");
    }
    snprintf(keepalive, sizeof(keepalive), "KEEPALIVE_INTERVAL=%llums",
             (unsigned long long)a->cfg.keepalive_ms);
    /* We are not dumpable (PR_SET_DUMPABLE 0), so a peer that is not root could not open
     * our shared-memory segments through /proc/<pid>/fd: named ones work for everyone. An
     * md setting, which ucp_config_modify does not reach: the environment does (unless the
     * operator set it). */
    setenv("UCX_POSIX_USE_PROC_LINK", "n", 0);
    /* shared memory between daemons: a sender killed mid-message can block the receiver's
     * queue for good (ucx_shm, docs/decisions.md); tcp (and self) otherwise */
    if (!a->cfg.ucx_shm)
        setenv("UCX_TLS", "^mm", 0);
    up.ep_error_ctx = cl;
    err = mc_ucx_create(&up, &cl->u);
    if (err != 0) {
        mc_error("UCX: %s", mc_strerror(err));
        return err;
    }
    mc_ucx_rpc_register(cl->u, on_request, cl);
    mc_ucx_bulk_register(cl->u, bulk_dest, bulk_done, cl);
    mc_ucx_address(cl->u, &addr, &alen);
    err = mc_boot_msg(addr, alen, &cl->boot, &cl->boot_len);
    if (err == 0)
        err = mc_boot_listen(a->cfg.listen, BOOT_BACKLOG, &cl->listen_fd, &cl->port);
    if (err != 0)
        return err;
    err = join(cl, deadline);
    if (err != 0)
        return err;
    cl->mstate = M_UP;
    err = ml_create_remote(cl->master, cl->node, a->cfg.op_timeout_ms, &a->ml);
    if (err == 0)
        ml_set_events(a->ml, ml_event_cb, cl);
    return err;
}

void cluster_leave(struct mc_agent *a)
{
    struct cluster *cl = a->cl;
    struct mc_proto_heartbeat_req req = {.flags = MC_PROTO_HEARTBEAT_F_LEAVE};
    struct sync_call sc;
    uint8_t buf[16];
    size_t len;

    if (cl == NULL || cl->master == NULL || cl->mstate != M_UP || cl->leaving)
        return;
    cl->leaving = true;
    req.node = cl->node;
    if (mc_proto_heartbeat_req_encode(&req, buf, sizeof(buf), &len) == 0 &&
        sync_call(cl, cl->master, MC_WIRE_HEARTBEAT, buf, len, agent_now_ms() + 1000, &sc) ==
            0) {
        free(sc.reply);
        mc_info("left the cluster");
    }
}

void cluster_destroy(struct mc_agent *a)
{
    struct cluster *cl = a->cl;
    uint32_t i;

    if (cl == NULL)
        return;
    if (cl->mstate == M_FETCH)
        mc_boot_fetch_cancel(&cl->bf);
    /* what is still under way fails through its callbacks (a peer's pending HELLO drops it
     * there); nothing new starts meanwhile */
    cl->destroying = true;
    mc_ucx_destroy(cl->u);
    cl->u = NULL;
    for (i = 0; i < PEER_HASH; i++) {
        while (cl->peers[i] != NULL)
            peer_drop(cl, cl->peers[i], MC_ERR_CANCELED);
    }
    while (cl->info_wait != NULL) {
        struct xfer *x = cl->info_wait;

        cl->info_wait = x->next;
        xfer_end(cl, x, MC_ERR_CANCELED);
    }
    while (cl->fences != NULL) {
        struct fence *f = cl->fences;

        cl->fences = f->next;
        free(f);
    }
    fenced_expire(cl, UINT64_MAX);
    for (i = 0; i < cl->nsegtab; i++)
        free(cl->segs[i].addr);
    free(cl->segs);
    if (cl->listen_fd >= 0)
        close(cl->listen_fd);
    free(cl->boot);
    if (cl->token != NULL) {
        memset(cl->token, 0, cl->token_len);
        free(cl->token);
    }
    free(cl);
    a->cl = NULL;
}

void cluster_stats_add(const struct mc_agent *a, json_t *o)
{
    const struct cluster *cl = a->cl;

    if (cl == NULL)
        return;
    json_object_set_new(o, "node", json_integer(cl->node));
    json_object_set_new(o, "node_name", json_string(cl->name));
    json_object_set_new(o, "writes_to_peers", json_integer((json_int_t)cl->st.writes_out));
    json_object_set_new(o, "bytes_to_peers", json_integer((json_int_t)cl->st.write_bytes_out));
    json_object_set_new(o, "reads_from_peers", json_integer((json_int_t)cl->st.reads_out));
    json_object_set_new(o, "bytes_from_peers", json_integer((json_int_t)cl->st.read_bytes_in));
    json_object_set_new(o, "writes_served", json_integer((json_int_t)cl->st.writes_in));
    json_object_set_new(o, "reads_served", json_integer((json_int_t)cl->st.reads_in));
    json_object_set_new(o, "peer_refused", json_integer((json_int_t)cl->st.refused));
    json_object_set_new(o, "peer_errors", json_integer((json_int_t)cl->st.peer_errors));
    json_object_set_new(o, "read_failovers", json_integer((json_int_t)cl->st.failovers));
    json_object_set_new(o, "reads_hedged", json_integer((json_int_t)cl->st.hedged));
    json_object_set_new(o, "drain_copies_out", json_integer((json_int_t)cl->st.copies_out));
}

const char *cluster_health(const struct mc_agent *a)
{
    const struct cluster *cl = a->cl;

    if (cl == NULL)
        return NULL;
    if (cl->mstate != M_UP)
        return "no master: rejoining the cluster";
    if (cl->m_unresp)
        return "the master does not answer: master-bound operations fail";
    if (cl->drain == MC_MASTER_DRAIN_DRAINING)
        return "draining: the master moves this node's objects to other nodes";
    if (cl->drain == MC_MASTER_DRAIN_DRAINED)
        return "drained: this node holds nothing and may leave";
    return NULL;
}

void cluster_metrics_fill(const struct mc_agent *a, uint64_t *v, uint8_t *present)
{
    const struct cluster *cl = a->cl;
    static const enum mc_agent_metric ids[] = {
        AM_WRITES_TO_PEERS, AM_BYTES_TO_PEERS, AM_READS_FROM_PEERS, AM_BYTES_FROM_PEERS,
        AM_WRITES_SERVED, AM_WRITE_BYTES_SERVED, AM_READS_SERVED, AM_PEER_REFUSED,
        AM_PEER_ERRORS, AM_READ_FAILOVERS, AM_READS_HEDGED,
    };
    size_t i;

    if (cl == NULL)
        return;
    v[AM_WRITES_TO_PEERS] = cl->st.writes_out;
    v[AM_BYTES_TO_PEERS] = cl->st.write_bytes_out;
    v[AM_READS_FROM_PEERS] = cl->st.reads_out;
    v[AM_BYTES_FROM_PEERS] = cl->st.read_bytes_in;
    v[AM_WRITES_SERVED] = cl->st.writes_in;
    v[AM_WRITE_BYTES_SERVED] = cl->st.write_bytes_in;
    v[AM_READS_SERVED] = cl->st.reads_in;
    v[AM_PEER_REFUSED] = cl->st.refused;
    v[AM_PEER_ERRORS] = cl->st.peer_errors;
    v[AM_READ_FAILOVERS] = cl->st.failovers;
    v[AM_READS_HEDGED] = cl->st.hedged;
    for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        present[ids[i]] = 1;
}

/* --- ops answered from the master's view ---------------------------------------------------- */

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
    c->refs++;
    return v;
}

static void view_call_end(struct view_call *v)
{
    agent_client_put_ref(v->a, v->c);
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
        agent_cqe_res(v->c, v->user_data, status);
    } else if (v->arg0 & MC_STATS_F_CLUSTER) {
        agent_answer_json(v->c, v->user_data, v->data_off, v->data_len,
                          agent_cluster_json(&rep.stats, segs, rep.nseg, nodes, rep.nnode));
    } else {
        agent_answer_json(v->c, v->user_data, v->data_off, v->data_len,
                          agent_stats_json(v->a, &rep.stats));
    }
    free(segs);
    free(nodes);
    view_call_end(v);
}

void cluster_op_stats(struct mc_agent *a, struct client *c, const struct mc_sqe *s)
{
    struct mc_proto_info_req req = {.flags = MC_PROTO_INFO_F_STATS};
    struct view_call *v = view_call_new(a, c, s);
    uint8_t buf[64];
    size_t len;
    int err;

    if (v == NULL) {
        agent_cqe_res(c, s->user_data, MC_ERR_NOMEM);
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
        err = master_call(a->cl, MC_WIRE_CLUSTER_INFO, buf, len,
                          mc_ucx_now_ms() + a->cfg.op_timeout_ms, stats_done, v);
    if (err != 0) {
        agent_cqe_res(c, s->user_data, err);
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
        agent_cqe_res(v->c, v->user_data, status);
    } else if (v->c->state == CL_ACTIVE) {
        struct list_out o = {.p = v->c->r->staging + v->data_off,
                             .end = v->c->r->staging + v->data_off + v->data_len};

        /* we asked for no more than the range holds */
        for (i = 0; i < rep.n && !o.full; i++)
            agent_list_one(keys[i].key, keys[i].key_len, &o);
        memset(&e, 0, sizeof(e));
        e.user_data = v->user_data;
        e.res = o.full ? MC_ERR_INTERNAL : (int)rep.n;
        e.version = rep.next_cursor;
        agent_cqe_post(v->c, &e);
    }
    free(keys);
    view_call_end(v);
}

void cluster_op_list(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                     const char *key)
{
    /* ask for as many keys as the range holds even if each is of the longest size, so no
     * key of the page is lost to a full range (the cursor names pages, not keys) */
    uint64_t fit = s->data_len / (sizeof(uint16_t) + MC_PROTO_KEY_MAX);
    struct mc_proto_list_req req = {.node = a->node, .cursor = s->arg0,
                                    .prefix = {.p = (const uint8_t *)key, .len = s->key_len}};
    struct view_call *v;
    uint8_t buf[MC_PROTO_KEY_MAX + 64];
    size_t len;
    int err;

    if (fit == 0) {
        agent_cqe_res(c, s->user_data, MC_ERR_TOO_LARGE);
        return;
    }
    if (s->arg1 != 0 && s->arg1 < fit)
        fit = s->arg1;
    req.max = fit > MC_PROTO_LIST_MAX ? MC_PROTO_LIST_MAX : (uint32_t)fit;
    v = view_call_new(a, c, s);
    if (v == NULL) {
        agent_cqe_res(c, s->user_data, MC_ERR_NOMEM);
        return;
    }
    err = mc_proto_list_req_encode(&req, buf, sizeof(buf), &len);
    if (err == 0)
        err = master_call(a->cl, MC_WIRE_LIST, buf, len, mc_ucx_now_ms() + a->cfg.op_timeout_ms,
                          list_done, v);
    if (err != 0) {
        agent_cqe_res(c, s->user_data, err);
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
        agent_cqe_res(v->c, v->user_data, status);
    view_call_end(v);
}

void cluster_op_drain(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                      const char *key)
{
    struct mc_proto_drain_req req = {.on = s->arg0 != 0 ? 1u : 0u,
                                     .name = {(const uint8_t *)key, s->key_len}};
    struct view_call *v;
    uint8_t buf[MC_PROTO_NAME_MAX + 16];
    size_t len;
    int err = mc_proto_drain_req_encode(&req, buf, sizeof(buf), &len);

    if (err != 0) { /* not a node name (graphic ASCII) */
        agent_cqe_res(c, s->user_data, err);
        return;
    }
    v = view_call_new(a, c, s);
    if (v == NULL) {
        agent_cqe_res(c, s->user_data, MC_ERR_NOMEM);
        return;
    }
    err = master_call(a->cl, MC_WIRE_DRAIN, buf, len, mc_ucx_now_ms() + a->cfg.op_timeout_ms,
                      drain_done, v);
    if (err != 0) {
        agent_cqe_res(c, s->user_data, err);
        view_call_end(v);
    }
}
