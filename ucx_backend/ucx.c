/*
 * The transfer layer over UCX (ucx.h): context and worker, endpoints, AM RPC with request
 * ids and deadlines, rendezvous bulk transfers, memory registration and one-sided access.
 * With ucx_listen.c (the listener) and ucx_int.h (the structures both share), the only code
 * of mcstore that includes <ucp/api/ucp.h>.
 *
 * Every UCX request we start carries a `struct req` as user_data. UCX's completion callback
 * (or an immediate completion, when the nbx call returns NULL) only records the status and
 * queues the req on done_q; mc_ucx_progress runs the callers' callbacks from there. So no
 * caller callback runs inside the call that started the operation, and a buffer UCX may still
 * touch is released only by that completion. Endpoint failures are handled the same way:
 * UCX's error callback marks the endpoint and queues it on the work list, never frees it.
 *
 * Incoming messages name their endpoint through UCP_AM_SEND_FLAG_REPLY: every frame we send
 * carries it, and the receiver looks the ucp_ep_h up in a hash of its endpoints. A worker
 * that listens (params.listen_ip: the daemons, on a numeric --listen host) creates each
 * endpoint a peer opens itself, from the connection request (ucx_listen.c): an accepted
 * endpoint that is ours, with peer error handling, reported when it fails and closed for
 * real. Without a listener, a frame on an ep we did not create is the first message of a peer
 * that connected to our worker address: it becomes an accepted endpoint. Such an ep is UCX's
 * own (created by its wire-up, "not exposed to a user"): UCX 1.13 destroys it by itself when
 * its keepalive finds the peer gone, without telling anyone, so closing it later would touch
 * freed memory (it did: an assertion in ucp_ep_close_nbx when mc-master stopped after an
 * agent had left). So we never close an accepted ep: "closing" one only forgets our entry (a
 * frame arriving on it later makes a new, unauthenticated entry), and UCX frees it with the
 * worker at the latest; the one exception is a peer caught breaking the protocol, force-
 * closed at once. Replies go out on it only while its peer's request is being handled. Known
 * gap (docs/protocol.md): after UCX destroyed one silently, a new peer's ep may get the same
 * address while our entry for the old one is still there, and inherit it until its owner
 * drops it.
 */
#include "ucx_backend/ucx.h"

#include <stdlib.h>
#include <sys/random.h>
#include <string.h>
#include <time.h>

#include <ucp/api/ucp.h>

#include "common/clock.h"
#include "mc/mc_status.h"
#include "ucx_backend/saddr.h"

#include "ucx_backend/ucx_int.h"


uint64_t mc_ucx_now_ms(void)
{
    return mc_clock_ms();
}

/* UCX status -> MC_ERR_*. Anything that is not clearly local means the peer is out of
 * reach: the caller drops or probes the endpoint, it does not retry blindly. */
static int err_from_ucs(ucs_status_t st)
{
    switch (st) {
    case UCS_OK:
        return 0;
    case UCS_ERR_CANCELED:
    case UCS_ERR_REJECTED: /* the receiver refused a bulk transfer */
        return MC_ERR_CANCELED;
    case UCS_ERR_NO_MEMORY:
        return MC_ERR_NOMEM;
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_UNSUPPORTED:
        return MC_ERR_INVALID;
    case UCS_ERR_MESSAGE_TRUNCATED:
        return MC_ERR_TOO_LARGE;
    case UCS_ERR_TIMED_OUT:
        return MC_ERR_TIMEOUT;
    default:
        return MC_ERR_UNAVAILABLE;
    }
}

/* --- requests ----------------------------------------------------------------------------- */

static struct req *req_new(struct mc_ucx *u, enum req_kind kind, size_t frame_len)
{
    struct req *r = calloc(1, sizeof(*r) + frame_len);

    if (r == NULL)
        return NULL;
    r->u = u;
    r->kind = kind;
    r->frame = (uint8_t *)(r + 1);
    return r;
}

static void reqs_link(struct mc_ucx *u, struct req *r)
{
    r->in_ucx = true;
    r->prev = NULL;
    r->next = u->reqs;
    if (u->reqs != NULL)
        u->reqs->prev = r;
    u->reqs = r;
}

static void reqs_unlink(struct mc_ucx *u, struct req *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        u->reqs = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    r->in_ucx = false;
}

static void done_push(struct mc_ucx *u, struct req *r, int status)
{
    r->status = status;
    r->qnext = NULL;
    *u->done_tail = r;
    u->done_tail = &r->qnext;
}

static void ep_hash_remove(struct mc_ucx_ep *ep);
static void ep_queue_work(struct mc_ucx_ep *ep);

/* UCX is done with the request: record, queue. Also the path of immediate completions. */
static void req_complete(struct req *r, ucs_status_t st)
{
    struct mc_ucx *u = r->u;

    if (r->in_ucx)
        reqs_unlink(u, r);
    if (r->kind == RK_CLOSE) {
        /* UCX may reuse the ep's memory from now on: forget the pointer at once, so the
         * next message on a new ep at that address is not taken for this one */
        ep_hash_remove(r->ep);
        r->ep->close_done = true;
        ep_queue_work(r->ep);
        return;
    }
    done_push(u, r, err_from_ucs(st));
}

static void send_cb(void *request, ucs_status_t st, void *user_data)
{
    req_complete(user_data, st);
    ucp_request_free(request);
}

static void recv_cb(void *request, ucs_status_t st, size_t length, void *user_data)
{
    (void)length; /* rendezvous delivers exactly the length it announced */
    req_complete(user_data, st);
    ucp_request_free(request);
}

static ucs_memory_type_t ucs_mt(enum mc_ucx_mem_type mt)
{
    return mt == MC_UCX_MEM_CUDA ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
}

static void req_param(ucp_request_param_t *p, struct req *r, uint32_t flags)
{
    memset(p, 0, sizeof(*p));
    p->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p->cb.send = send_cb;
    p->user_data = r;
    if (flags != 0) {
        p->op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        p->flags = flags;
    }
}

/* The buffer's memory type, told to UCX rather than detected per op. */
static void req_param_mt(ucp_request_param_t *p, enum mc_ucx_mem_type mt)
{
    p->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p->memory_type = ucs_mt(mt);
}

/*
 * The outcome of an nbx call for `r` (linked into u->reqs before the call, in case UCX
 * ever completes it from inside). NULL: done now, queued like any completion. An error:
 * nothing was started, the caller frees r and returns the error.
 */
static int req_started(struct mc_ucx *u, struct req *r, ucs_status_ptr_t sp)
{
    if (UCS_PTR_IS_ERR(sp)) {
        if (r->in_ucx)
            reqs_unlink(u, r);
        return err_from_ucs(UCS_PTR_STATUS(sp));
    }
    if (sp == NULL && r->in_ucx)
        req_complete(r, UCS_OK);
    return 0;
}

/* --- calls -------------------------------------------------------------------------------- */

static struct call **call_bucket(struct mc_ucx *u, uint64_t id)
{
    return &u->call_hash[id & (CALL_BUCKETS - 1)];
}

static struct call *call_find(struct mc_ucx *u, uint64_t id)
{
    struct call *c;

    for (c = *call_bucket(u, id); c != NULL; c = c->hnext) {
        if (c->id == id)
            return c;
    }
    return NULL;
}

static void call_insert(struct mc_ucx *u, struct call *c)
{
    struct call **b = call_bucket(u, c->id);
    struct call *at;

    c->hnext = *b;
    *b = c;

    c->eprev = NULL;
    c->enext = c->ep->calls;
    if (c->ep->calls != NULL)
        c->ep->calls->eprev = c;
    c->ep->calls = c;

    if (c->deadline_ms == 0)
        return;
    /* from the tail: deadlines mostly arrive in order, so this is O(1) in practice */
    for (at = u->dl_tail; at != NULL && at->deadline_ms > c->deadline_ms; at = at->dprev)
        ;
    c->dprev = at;
    c->dnext = at != NULL ? at->dnext : u->dl_head;
    if (c->dnext != NULL)
        c->dnext->dprev = c;
    else
        u->dl_tail = c;
    if (at != NULL)
        at->dnext = c;
    else
        u->dl_head = c;
}

static void call_remove(struct mc_ucx *u, struct call *c)
{
    struct call **pp;

    for (pp = call_bucket(u, c->id); *pp != c; pp = &(*pp)->hnext)
        ;
    *pp = c->hnext;

    if (c->eprev != NULL)
        c->eprev->enext = c->enext;
    else
        c->ep->calls = c->enext;
    if (c->enext != NULL)
        c->enext->eprev = c->eprev;

    if (c->deadline_ms == 0)
        return;
    if (c->dprev != NULL)
        c->dprev->dnext = c->dnext;
    else
        u->dl_head = c->dnext;
    if (c->dnext != NULL)
        c->dnext->dprev = c->dprev;
    else
        u->dl_tail = c->dprev;
}

/* Ends a pending call: out of every index, then its callback, then freed unless UCX still
 * reads its frame (the send completion frees it then). */
static void call_end(struct mc_ucx *u, struct call *c, int status, const struct mc_wire_hdr *h,
                     const void *payload, size_t len)
{
    call_remove(u, c);
    c->ended = true;
    c->ep = NULL;
    c->cb(c->ctx, status, h, payload, len);
    if (!c->send_busy)
        free(c);
}

bool mc_ucx_expire(struct mc_ucx *u, uint64_t now_ms)
{
    bool any = false;

    while (u->dl_head != NULL && u->dl_head->deadline_ms <= now_ms) {
        u->st.calls_timed_out++;
        call_end(u, u->dl_head, MC_ERR_TIMEOUT, NULL, NULL, 0);
        any = true;
    }
    return any;
}

uint64_t mc_ucx_next_deadline_ms(const struct mc_ucx *u)
{
    return u->dl_head != NULL ? u->dl_head->deadline_ms : UINT64_MAX;
}

/* --- endpoints ---------------------------------------------------------------------------- */

static struct mc_ucx_ep **ep_bucket(struct mc_ucx *u, ucp_ep_h uep)
{
    uintptr_t h = (uintptr_t)uep;

    h ^= h >> 17;
    h *= UINT64_C(0x9e3779b97f4a7c15) & UINTPTR_MAX;
    return &u->ep_hash[(h >> 8) & (EP_BUCKETS - 1)];
}

static struct mc_ucx_ep *ep_find(struct mc_ucx *u, ucp_ep_h uep)
{
    struct mc_ucx_ep *ep;

    for (ep = *ep_bucket(u, uep); ep != NULL; ep = ep->hnext) {
        if (ep->uep == uep)
            return ep;
    }
    return NULL;
}

static void ep_hash_remove(struct mc_ucx_ep *ep)
{
    struct mc_ucx_ep **pp;

    if (!ep->in_hash)
        return;
    for (pp = ep_bucket(ep->u, ep->uep); *pp != ep; pp = &(*pp)->hnext)
        ;
    *pp = ep->hnext;
    ep->in_hash = false;
}

static void ucx_ep_hash_add(struct mc_ucx_ep *ep)
{
    struct mc_ucx_ep **b = ep_bucket(ep->u, ep->uep);

    ep->hnext = *b;
    *b = ep;
    ep->in_hash = true;
}

static struct mc_ucx_ep *ucx_ep_new(struct mc_ucx *u, ucp_ep_h uep, bool accepted)
{
    struct mc_ucx_ep *ep = calloc(1, sizeof(*ep));

    if (ep == NULL)
        return NULL;
    ep->u = u;
    ep->uep = uep;
    ep->accepted = accepted;
    ep->close_req.u = u;
    ep->close_req.kind = RK_CLOSE;
    ep->close_req.ep = ep;
    if (uep != NULL)
        ucx_ep_hash_add(ep);
    ep->next = u->eps;
    if (u->eps != NULL)
        u->eps->prev = ep;
    u->eps = ep;
    return ep;
}

static void ep_queue_work(struct mc_ucx_ep *ep)
{
    struct mc_ucx *u = ep->u;

    if (ep->on_work)
        return;
    ep->on_work = true;
    ep->wnext = NULL;
    *u->work_tail = ep;
    u->work_tail = &ep->wnext;
}

static void ucx_ep_free(struct mc_ucx_ep *ep)
{
    struct mc_ucx *u = ep->u;

    ep_hash_remove(ep);
    if (ep->prev != NULL)
        ep->prev->next = ep->next;
    else
        u->eps = ep->next;
    if (ep->next != NULL)
        ep->next->prev = ep->prev;
    free(ep);
}

/* The endpoint cannot be used any more: remember why (the first reason wins), and let
 * progress fail its calls and tell the owner. */
static void ep_fail(struct mc_ucx_ep *ep, int status)
{
    if (ep->status != 0)
        return;
    ep->status = status;
    ep->u->st.eps_failed++;
    ep_queue_work(ep);
}

static void ucx_ep_err_cb(void *arg, ucp_ep_h uep, ucs_status_t st)
{
    (void)uep;
    (void)st; /* whatever UCX saw, for us the peer is out of reach */
    ep_fail(arg, MC_ERR_UNAVAILABLE);
}

static bool run_work(struct mc_ucx *u)
{
    struct mc_ucx_ep *ep;
    bool any = false;

    while ((ep = u->work) != NULL) {
        u->work = ep->wnext;
        if (u->work == NULL)
            u->work_tail = &u->work;
        ep->on_work = false;
        any = true;
        /* a callback may close ep (queueing it again) but never frees it: that is here */
        while (ep->calls != NULL)
            call_end(u, ep->calls, ep->status, NULL, NULL, 0);
        if (!ep->closing && !ep->reported && ep->status != 0) {
            ep->reported = true;
            if (u->ep_error != NULL)
                u->ep_error(u->ep_error_ctx, ep, ep->status);
        }
        if (ep->close_done && !ep->on_work && ep->calls == NULL)
            ucx_ep_free(ep);
    }
    return any;
}

int mc_ucx_ep_connect(struct mc_ucx *u, const void *addr, size_t len, struct mc_ucx_ep **ep_p)
{
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    ucp_ep_params_t p;
    struct mc_ucx_ep *ep;
    ucs_status_t st;

    if (u == NULL || addr == NULL || len == 0 || ep_p == NULL)
        return MC_ERR_INVALID;
    ep = ucx_ep_new(u, NULL, false);
    if (ep == NULL)
        return MC_ERR_NOMEM;
    /* a session no one can guess: our request ids carry it (ucx.h) */
    if (getrandom(&ep->session, sizeof(ep->session), 0) != (ssize_t)sizeof(ep->session))
        ep->session = (uint64_t)(uintptr_t)ep ^ mc_ucx_now_ms() * UINT64_C(0x9e3779b97f4a7c15);
    ep->session = (ep->session & MC_UCX_SESSION_MAX) | 1;

    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    if (mc_saddr_is(addr, len)) {
        /* a listener (saddr.h): through UCX's connection manager */
        if (mc_saddr_unpack(addr, len, &ss, &sslen) != 0) {
            ucx_ep_free(ep);
            return MC_ERR_UNAVAILABLE;
        }
        p.field_mask |= UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_FLAGS;
        p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
        p.sockaddr.addr = (const struct sockaddr *)&ss;
        p.sockaddr.addrlen = sslen;
    } else {
        p.field_mask |= UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        p.address = addr;
    }
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = ucx_ep_err_cb;
    p.err_handler.arg = ep;
    st = ucp_ep_create(u->worker, &p, &ep->uep);
    if (st != UCS_OK) {
        ucx_ep_free(ep);
        return st == UCS_ERR_NO_MEMORY ? MC_ERR_NOMEM : MC_ERR_UNAVAILABLE;
    }
    ucx_ep_hash_add(ep);
    *ep_p = ep;
    return 0;
}

void mc_ucx_ep_close(struct mc_ucx_ep *ep, bool force)
{
    struct mc_ucx *u;
    ucp_request_param_t p;
    ucs_status_ptr_t sp;
    bool violator;

    if (ep == NULL || ep->closing)
        return;
    u = ep->u;
    ep->closing = true;
    violator = ep->status == MC_ERR_PROTO;
    /* a failed endpoint has nothing to flush */
    if (ep->status != 0)
        force = true;
    else
        ep->status = MC_ERR_CANCELED;
    ep_queue_work(ep); /* fails the pending calls from progress */
    if (ep->accepted && !ep->created && !(force && violator)) {
        /* UCX's own ep, possibly destroyed already: forget it, never close it (above).
         * Only a peer caught breaking the protocol (alive: it just sent us a frame) is cut
         * off by a force close, from the progress call that caught it. */
        ep_hash_remove(ep);
        ep->close_done = true;
        return;
    }

    req_param(&p, &ep->close_req, force ? UCP_EP_CLOSE_FLAG_FORCE : 0);
    reqs_link(u, &ep->close_req);
    sp = ucp_ep_close_nbx(ep->uep, &p);
    if (UCS_PTR_IS_ERR(sp) || sp == NULL) {
        /* done or failed at once: either way UCX released the ep */
        if (ep->close_req.in_ucx)
            req_complete(&ep->close_req, UCS_OK);
    }
}

uint64_t mc_ucx_ep_session(const struct mc_ucx_ep *ep)
{
    return ep->session;
}

void mc_ucx_ep_set_session(struct mc_ucx_ep *ep, uint64_t session)
{
    ep->session = session & MC_UCX_SESSION_MAX;
}

void mc_ucx_ep_set_user(struct mc_ucx_ep *ep, void *user)
{
    ep->user = user;
}

void *mc_ucx_ep_user(const struct mc_ucx_ep *ep)
{
    return ep->user;
}

int mc_ucx_ep_status(const struct mc_ucx_ep *ep)
{
    return ep->status;
}

bool mc_ucx_ep_is_accepted(const struct mc_ucx_ep *ep)
{
    return ep->accepted;
}

/* --- receiving ---------------------------------------------------------------------------- */

/* The endpoint a message came on, accepting a new peer; NULL: drop the message. */
static struct mc_ucx_ep *ep_of_msg(struct mc_ucx *u, const ucp_am_recv_param_t *param)
{
    struct mc_ucx_ep *ep;

    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) || param->reply_ep == NULL) {
        u->st.frames_unattributed++;
        return NULL;
    }
    ep = ep_find(u, param->reply_ep);
    if (ep == NULL) {
        ep = ucx_ep_new(u, param->reply_ep, true);
        if (ep != NULL)
            u->st.eps_accepted++;
    }
    return ep;
}

static void on_reply(struct mc_ucx *u, struct mc_ucx_ep *ep, const struct mc_wire_hdr *h,
                     const uint8_t *payload)
{
    struct call *c = call_find(u, h->request_id);

    if (c == NULL || c->ep != ep) {
        u->st.replies_dropped++; /* expired, or never ours: not a protocol error */
        return;
    }
    if (h->type != c->type + 1) {
        u->st.frames_bad++;
        ep_fail(ep, MC_ERR_PROTO); /* fails this call too, from progress */
        return;
    }
    u->st.replies_received++;
    call_end(u, c, 0, h, payload, h->payload_len);
}

static ucs_status_t rpc_am_cb(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param)
{
    struct mc_ucx *u = arg;
    bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    struct mc_ucx_ep *ep = ep_of_msg(u, param);
    struct mc_wire_hdr h;

    (void)header;
    if (ep == NULL || ep->status != 0) {
        if (ep != NULL)
            u->st.requests_dropped++;
        return rndv ? UCS_ERR_CANCELED : UCS_OK;
    }
    /* our frames are eager and headerless: anything else is not from mcstore */
    if (rndv || header_length != 0 || mc_wire_hdr_decode(data, length, &h) != 0 ||
        (h.flags & MC_WIRE_F_BULK) != 0) {
        u->st.frames_bad++;
        ep_fail(ep, MC_ERR_PROTO);
        return rndv ? UCS_ERR_CANCELED : UCS_OK;
    }
    if (h.flags & MC_WIRE_F_REPLY) {
        on_reply(u, ep, &h, (const uint8_t *)data + MC_WIRE_HDR_SIZE);
        return UCS_OK;
    }
    u->st.requests_received++;
    if (u->rpc_handler == NULL) {
        u->st.requests_dropped++;
        return UCS_OK;
    }
    u->rpc_handler(u->rpc_ctx, ep, &h, (const uint8_t *)data + MC_WIRE_HDR_SIZE);
    return UCS_OK;
}

static ucs_status_t bulk_am_cb(void *arg, const void *header, size_t header_length, void *data,
                               size_t length, const ucp_am_recv_param_t *param)
{
    struct mc_ucx *u = arg;
    bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    /* refusing a rendezvous needs an error status: UCS_OK would tell the sender "done" */
    ucs_status_t refuse = rndv ? UCS_ERR_REJECTED : UCS_OK;
    struct mc_ucx_ep *ep = ep_of_msg(u, param);
    ucp_request_param_t p;
    struct mc_wire_hdr h;
    struct req *r;
    void *op = NULL;
    void *dst;

    if (ep == NULL || ep->status != 0) {
        u->st.bulk_refused++;
        return refuse;
    }
    if (mc_wire_hdr_decode(header, header_length, &h) != 0 || !(h.flags & MC_WIRE_F_BULK)) {
        u->st.frames_bad++;
        ep_fail(ep, MC_ERR_PROTO);
        return refuse;
    }
    u->dest_mt = MC_UCX_MEM_HOST;
    u->dest_eager = !rndv;
    u->dest_tail = NULL;
    dst = u->bulk_dest == NULL ? NULL
                               : u->bulk_dest(u->bulk_ctx, ep, &h,
                                              (const uint8_t *)header + MC_WIRE_HDR_SIZE, length,
                                              &op);
    if (dst != NULL && u->dest_tail != NULL &&
        (u->dest_mt != MC_UCX_MEM_HOST || u->dest_head == 0 || u->dest_head >= length)) {
        /* a split is of host memory, with bytes on both sides of it */
        u->bulk_done(u->bulk_ctx, op, MC_ERR_INVALID);
        dst = NULL;
    }
    if (dst != NULL && !rndv && u->dest_mt != MC_UCX_MEM_HOST) {
        /* eager bytes are copied here by the CPU: a dest fn gives host memory for those
         * (mc_ucx_bulk_eager); one that did not gets its done call with an error */
        u->bulk_done(u->bulk_ctx, op, MC_ERR_INVALID);
        dst = NULL;
    }
    if (dst == NULL) {
        u->st.bulk_refused++;
        return refuse;
    }
    u->st.bulk_received++;
    r = req_new(u, RK_BULK_RECV, 0);
    if (r == NULL) {
        /* the caller was promised one done call for its buffer: make it now */
        u->bulk_done(u->bulk_ctx, op, MC_ERR_NOMEM);
        return rndv ? UCS_ERR_NO_MEMORY : UCS_OK;
    }
    r->bdone = u->bulk_done;
    r->ctx = u->bulk_ctx;
    r->op = op;
    if (!rndv) {
        /* sent eagerly (bulk_eager_max), or small enough to come so despite the flag: the
         * bytes are here already */
        u->st.bulk_received_eager++;
        if (u->dest_tail != NULL) {
            memcpy(dst, data, u->dest_head);
            memcpy(u->dest_tail, (const uint8_t *)data + u->dest_head, length - u->dest_head);
        } else {
            memcpy(dst, data, length);
        }
        done_push(u, r, 0);
        return UCS_OK;
    }
    memset(&p, 0, sizeof(p));
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = recv_cb;
    p.user_data = r;
    req_param_mt(&p, u->dest_mt);
    if (u->dest_tail != NULL) {
        /* two pieces: UCX scatters the bytes (r->iov lives as long as the request) */
        r->iov[0].buffer = dst;
        r->iov[0].length = u->dest_head;
        r->iov[1].buffer = u->dest_tail;
        r->iov[1].length = length - u->dest_head;
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        p.datatype = ucp_dt_make_iov();
        dst = r->iov;
    }
    reqs_link(u, r);
    {
        ucs_status_ptr_t sp = ucp_am_recv_data_nbx(u->worker, data, dst,
                                                   u->dest_tail != NULL ? 2 : length, &p);
        int err = req_started(u, r, sp);

        if (err != 0)
            done_push(u, r, err); /* UCX owns the descriptor either way */
    }
    return UCS_INPROGRESS;
}

/* --- sending ------------------------------------------------------------------------------ */

int mc_ucx_rpc_call(struct mc_ucx_ep *ep, uint16_t type, const void *payload, size_t len,
                    uint64_t deadline_ms, mc_ucx_rpc_done_fn done_cb, void *ctx, uint64_t *id_p)
{
    struct mc_ucx *u;
    struct mc_wire_hdr h;
    ucp_request_param_t p;
    struct call *c;
    struct req *r;
    int err;

    if (ep == NULL || done_cb == NULL || (len != 0 && payload == NULL))
        return MC_ERR_INVALID;
    if (ep->status != 0)
        return ep->status;
    if (!mc_wire_type_is_valid(type) || mc_wire_type_is_reply(type) || len > MC_WIRE_PAYLOAD_MAX)
        return MC_ERR_INVALID;
    u = ep->u;
    c = calloc(1, sizeof(*c) + MC_WIRE_HDR_SIZE + len);
    r = req_new(u, RK_CALL, 0);
    if (c == NULL || r == NULL) {
        free(c);
        free(r);
        return MC_ERR_NOMEM;
    }
    c->frame = (uint8_t *)(c + 1);
    c->frame_len = MC_WIRE_HDR_SIZE + len;
    c->id = ep->session << MC_UCX_SESSION_SHIFT | (++u->next_id & MC_UCX_SEQ_MASK);
    c->type = type;
    c->ep = ep;
    c->deadline_ms = deadline_ms;
    c->cb = done_cb;
    c->ctx = ctx;
    mc_wire_hdr_init(&h, type, c->id, (uint32_t)len, 0);
    (void)mc_wire_hdr_encode(&h, c->frame, c->frame_len); /* checked above */
    if (len != 0)
        memcpy(c->frame + MC_WIRE_HDR_SIZE, payload, len);

    r->call = c;
    c->send_busy = true;
    req_param(&p, r, UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER);
    reqs_link(u, r);
    err = req_started(u, r, ucp_am_send_nbx(ep->uep, AM_RPC, NULL, 0, c->frame, c->frame_len, &p));
    if (err != 0) {
        free(r);
        free(c);
        return err;
    }
    call_insert(u, c);
    u->st.calls_sent++;
    if (id_p != NULL)
        *id_p = c->id;
    return 0;
}

/* Sends `len` bytes built by the caller into the frame of a new req (RK_FRAME). */
static int send_frame(struct mc_ucx_ep *ep, struct req *r, size_t len)
{
    ucp_request_param_t p;
    int err;

    req_param(&p, r, UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER);
    reqs_link(ep->u, r);
    err = req_started(ep->u, r, ucp_am_send_nbx(ep->uep, AM_RPC, NULL, 0, r->frame, len, &p));
    if (err != 0)
        free(r);
    return err;
}

int mc_ucx_rpc_reply(struct mc_ucx_ep *ep, uint16_t type, uint64_t request_id,
                     const void *payload, size_t len)
{
    struct mc_wire_hdr h;
    struct req *r;

    if (ep == NULL || (len != 0 && payload == NULL))
        return MC_ERR_INVALID;
    if (ep->status != 0)
        return ep->status;
    if (!mc_wire_type_is_reply(type) || len > MC_WIRE_PAYLOAD_MAX)
        return MC_ERR_INVALID;
    r = req_new(ep->u, RK_FRAME, MC_WIRE_HDR_SIZE + len);
    if (r == NULL)
        return MC_ERR_NOMEM;
    mc_wire_hdr_init(&h, type, request_id, (uint32_t)len, MC_WIRE_F_REPLY);
    (void)mc_wire_hdr_encode(&h, r->frame, MC_WIRE_HDR_SIZE + len);
    if (len != 0)
        memcpy(r->frame + MC_WIRE_HDR_SIZE, payload, len);
    return send_frame(ep, r, MC_WIRE_HDR_SIZE + len);
}

int mc_ucx_send_raw_frame(struct mc_ucx_ep *ep, const void *frame, size_t len)
{
    struct req *r;

    if (ep == NULL || (len != 0 && frame == NULL))
        return MC_ERR_INVALID;
    if (ep->status != 0)
        return ep->status;
    r = req_new(ep->u, RK_FRAME, len);
    if (r == NULL)
        return MC_ERR_NOMEM;
    if (len != 0)
        memcpy(r->frame, frame, len);
    return send_frame(ep, r, len);
}

/* The checks both bulk sends share; 0 or why not. */
static int bulk_check(const struct mc_ucx_ep *ep, uint16_t type, const void *hdr, size_t hdr_len,
                      const void *data, size_t len)
{
    if (ep == NULL || (hdr_len != 0 && hdr == NULL) || (len != 0 && data == NULL))
        return MC_ERR_INVALID;
    if (ep->status != 0)
        return ep->status;
    if (!mc_wire_type_is_valid(type) || hdr_len > MC_UCX_BULK_HDR_MAX ||
        MC_WIRE_HDR_SIZE + hdr_len > ep->u->max_am_header)
        return MC_ERR_INVALID;
    return 0;
}

/* Sends r (RK_BULK_SEND, done and ctx set) with its header frame built from the arguments;
 * on an error nothing was started and r is the caller's to free. */
static int bulk_start(struct mc_ucx_ep *ep, struct req *r, uint16_t type, uint64_t request_id,
                      const void *hdr, size_t hdr_len, const void *data, size_t len,
                      enum mc_ucx_mem_type mt)
{
    struct mc_wire_hdr h;
    ucp_request_param_t p;
    uint32_t flags = MC_WIRE_F_BULK;

    if (mc_wire_type_is_reply(type))
        flags |= MC_WIRE_F_REPLY;
    mc_wire_hdr_init(&h, type, request_id, (uint32_t)hdr_len, flags);
    (void)mc_wire_hdr_encode(&h, r->frame, MC_WIRE_HDR_SIZE + hdr_len);
    if (hdr_len != 0)
        memcpy(r->frame + MC_WIRE_HDR_SIZE, hdr, hdr_len);
    /* UCX 1.13 reads the AM header until the send completes (no COPY_HEADER flag yet), so
     * it lives in r, freed by the completion */
    req_param(&p, r,
              UCP_AM_SEND_FLAG_REPLY |
                  (mt == MC_UCX_MEM_HOST && len <= ep->u->bulk_eager_max ? UCP_AM_SEND_FLAG_EAGER
                                                                         : UCP_AM_SEND_FLAG_RNDV));
    req_param_mt(&p, mt);
    reqs_link(ep->u, r);
    return req_started(ep->u, r, ucp_am_send_nbx(ep->uep, AM_BULK, r->frame,
                                                 MC_WIRE_HDR_SIZE + hdr_len, data, len, &p));
}

int mc_ucx_send_bulk(struct mc_ucx_ep *ep, uint16_t type, uint64_t request_id, const void *hdr,
                     size_t hdr_len, const void *data, size_t len, mc_ucx_done_fn done_cb,
                     void *ctx)
{
    return mc_ucx_send_bulk_mem(ep, type, request_id, hdr, hdr_len, data, len, MC_UCX_MEM_HOST,
                                done_cb, ctx);
}

int mc_ucx_send_bulk_mem(struct mc_ucx_ep *ep, uint16_t type, uint64_t request_id,
                         const void *hdr, size_t hdr_len, const void *data, size_t len,
                         enum mc_ucx_mem_type mt, mc_ucx_done_fn done_cb, void *ctx)
{
    struct req *r;
    int err = done_cb == NULL ? MC_ERR_INVALID : bulk_check(ep, type, hdr, hdr_len, data, len);

    if (err != 0)
        return err;
    r = req_new(ep->u, RK_BULK_SEND, MC_WIRE_HDR_SIZE + hdr_len);
    if (r == NULL)
        return MC_ERR_NOMEM;
    r->done = done_cb;
    r->ctx = ctx;
    err = bulk_start(ep, r, type, request_id, hdr, hdr_len, data, len, mt);
    if (err != 0)
        free(r);
    return err;
}

int mc_ucx_send_bulk_call(struct mc_ucx_ep *ep, uint16_t type, const void *hdr, size_t hdr_len,
                          const void *data, size_t len, uint64_t deadline_ms,
                          mc_ucx_rpc_done_fn reply_cb, mc_ucx_done_fn data_cb, void *ctx)
{
    struct mc_ucx *u;
    struct call *c;
    struct req *r;
    int err = reply_cb == NULL || data_cb == NULL ? MC_ERR_INVALID
                                                  : bulk_check(ep, type, hdr, hdr_len, data, len);

    if (err == 0 && mc_wire_type_is_reply(type))
        err = MC_ERR_INVALID; /* a call is a request */
    if (err != 0)
        return err;
    u = ep->u;
    c = calloc(1, sizeof(*c));
    r = req_new(u, RK_BULK_SEND, MC_WIRE_HDR_SIZE + hdr_len);
    if (c == NULL || r == NULL) {
        free(c);
        free(r);
        return MC_ERR_NOMEM;
    }
    c->id = ep->session << MC_UCX_SESSION_SHIFT | (++u->next_id & MC_UCX_SEQ_MASK);
    c->type = type;
    c->ep = ep;
    c->deadline_ms = deadline_ms;
    c->cb = reply_cb;
    c->ctx = ctx;
    c->send_busy = true;
    r->done = data_cb;
    r->ctx = ctx;
    r->call = c;
    err = bulk_start(ep, r, type, c->id, hdr, hdr_len, data, len, MC_UCX_MEM_HOST);
    if (err != 0) {
        free(r);
        free(c);
        return err;
    }
    call_insert(u, c);
    u->st.calls_sent++;
    return 0;
}

void mc_ucx_rpc_register(struct mc_ucx *u, mc_ucx_rpc_handler_fn handler, void *ctx)
{
    u->rpc_handler = handler;
    u->rpc_ctx = ctx;
}

void mc_ucx_bulk_register(struct mc_ucx *u, mc_ucx_bulk_dest_fn dest, mc_ucx_bulk_done_fn done,
                          void *ctx)
{
    u->bulk_dest = done == NULL ? NULL : dest; /* a buffer handed out needs its done call */
    u->bulk_done = done;
    u->bulk_ctx = ctx;
}

/* --- completions and progress ------------------------------------------------------------- */

static void req_finish(struct mc_ucx *u, struct req *r)
{
    struct call *c;

    switch (r->kind) {
    case RK_CALL:
        c = r->call;
        c->send_busy = false;
        if (c->ended) {
            free(c);
        } else if (r->status != 0) {
            int err = c->ep->status != 0 ? c->ep->status : MC_ERR_UNAVAILABLE;

            call_end(u, c, err, NULL, NULL, 0);
        }
        break;
    case RK_BULK_SEND:
        /* UCX reads the data no more: the caller hears it first, then, when the send
         * failed, the call it started waits for no answer */
        r->done(r->ctx, r->status);
        if ((c = r->call) != NULL) {
            c->send_busy = false;
            if (c->ended) {
                free(c);
            } else if (r->status != 0) {
                int err = c->ep->status != 0 ? c->ep->status : MC_ERR_UNAVAILABLE;

                call_end(u, c, err, NULL, NULL, 0);
            }
        }
        break;
    case RK_USER:
        r->done(r->ctx, r->status);
        break;
    case RK_BULK_RECV:
        r->bdone(r->ctx, r->op, r->status);
        break;
    case RK_FRAME:
    case RK_CLOSE: /* never queued */
        break;
    }
    free(r);
}

static bool run_done(struct mc_ucx *u)
{
    struct req *r;
    bool any = false;

    while ((r = u->done_q) != NULL) {
        u->done_q = r->qnext;
        if (u->done_q == NULL)
            u->done_tail = &u->done_q;
        req_finish(u, r);
        any = true;
    }
    return any;
}

bool mc_ucx_moves(const struct mc_ucx *u, enum mc_ucx_mem_type mt)
{
    ucp_context_attr_t attr = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};

    if (ucp_context_query(u->ctx, &attr) != UCS_OK)
        return false;
    return (attr.memory_types & UCS_BIT(ucs_mt(mt))) != 0;
}

bool mc_ucx_has_cuda(const struct mc_ucx *u)
{
    return mc_ucx_moves(u, MC_UCX_MEM_CUDA);
}

void mc_ucx_bulk_dest_mem(struct mc_ucx *u, enum mc_ucx_mem_type mt)
{
    u->dest_mt = mt;
}

void mc_ucx_bulk_dest_split(struct mc_ucx *u, size_t head, void *tail)
{
    u->dest_head = head;
    u->dest_tail = tail;
}

bool mc_ucx_bulk_eager(const struct mc_ucx *u)
{
    return u->dest_eager;
}

bool mc_ucx_progress(struct mc_ucx *u)
{
    bool any = false;

    for (int turn = 0; turn < PROGRESS_TURNS; turn++) {
        bool did = false;

        while (ucp_worker_progress(u->worker) != 0)
            did = true;
        did |= run_work(u);
        did |= run_done(u);
        if (!did)
            break;
        any = true;
    }
    any |= mc_ucx_expire(u, mc_ucx_now_ms());
    return any;
}

bool mc_ucx_arm(struct mc_ucx *u)
{
    ucs_status_t st;

    if (u->done_q != NULL || u->work != NULL)
        return false;
    st = ucp_worker_arm(u->worker);
    if (st == UCS_OK)
        return true;
    if (st != UCS_ERR_BUSY)
        u->st.arm_errors++;
    return false;
}

int mc_ucx_efd(struct mc_ucx *u)
{
    return u->efd;
}

void mc_ucx_address(const struct mc_ucx *u, const void **addr_p, size_t *len_p)
{
    if (u->listener != NULL) {
        *addr_p = u->saddr;
        *len_p = u->saddr_len;
        return;
    }
    *addr_p = u->addr;
    *len_p = u->addr_len;
}

void mc_ucx_get_stats(const struct mc_ucx *u, struct mc_ucx_stats *stats_p)
{
    *stats_p = u->st;
}

/* --- create / destroy --------------------------------------------------------------------- */

static int apply_config(ucp_config_t *cfg, const char *const *settings)
{
    for (; settings != NULL && *settings != NULL; settings++) {
        const char *eq = strchr(*settings, '=');
        char name[128];
        size_t n;

        if (eq == NULL || (n = (size_t)(eq - *settings)) == 0 || n >= sizeof(name))
            return MC_ERR_INVALID;
        memcpy(name, *settings, n);
        name[n] = '\0';
        if (ucp_config_modify(cfg, name, eq + 1) != UCS_OK)
            return MC_ERR_INVALID;
    }
    return 0;
}

static int set_am_handler(struct mc_ucx *u, unsigned id, ucp_am_recv_callback_t cb)
{
    ucp_am_handler_param_t p;

    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                   UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    p.id = id;
    p.flags = UCP_AM_FLAG_WHOLE_MSG;
    p.cb = cb;
    p.arg = u;
    return ucp_worker_set_am_recv_handler(u->worker, &p) == UCS_OK ? 0 : MC_ERR_IO;
}

/* A peer connects to our listener (from progress): the endpoint is created here, by us, with
 * peer error handling, so UCX reports its failure and leaves freeing it to us (ucx.h,
 * listen_ip). It is an accepted endpoint in every other respect: unauthenticated, no
 * session until its HELLO. */
static void listener_conn_cb(ucp_conn_request_h req, void *arg)
{
    struct mc_ucx *u = arg;
    struct mc_ucx_ep *ep = ucx_ep_new(u, NULL, true);
    ucp_ep_params_t p;

    if (ep == NULL) {
        u->st.conns_refused++;
        (void)ucp_listener_reject(u->listener, req);
        return;
    }
    ep->created = true;
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                   UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.conn_request = req;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = ucx_ep_err_cb;
    p.err_handler.arg = ep;
    if (ucp_ep_create(u->worker, &p, &ep->uep) != UCS_OK) {
        u->st.conns_refused++; /* UCX consumed the request either way */
        ucx_ep_free(ep);
        return;
    }
    ucx_ep_hash_add(ep);
    u->st.eps_accepted++;
}

int mc_ucx_create(const struct mc_ucx_params *params, struct mc_ucx **u_p)
{
    static const struct mc_ucx_params no_params;
    ucp_worker_attr_t wattr;
    ucp_worker_params_t wp;
    ucp_config_t *cfg;
    ucp_params_t cp;
    struct mc_ucx *u;
    int err;

    if (u_p == NULL)
        return MC_ERR_INVALID;
    if (params == NULL)
        params = &no_params;
    u = calloc(1, sizeof(*u));
    if (u == NULL)
        return MC_ERR_NOMEM;
    u->done_tail = &u->done_q;
    u->work_tail = &u->work;
    u->ep_error = params->ep_error;
    u->ep_error_ctx = params->ep_error_ctx;
    u->bulk_eager_max = params->bulk_eager_max;

    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK) {
        err = MC_ERR_IO;
        goto err_free;
    }
    err = apply_config(cfg, params->config);
    if (err != 0) {
        ucp_config_release(cfg);
        goto err_free;
    }
    memset(&cp, 0, sizeof(cp));
    cp.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
    cp.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
    cp.name = params->name != NULL ? params->name : "mc";
    if (ucp_init(&cp, cfg, &u->ctx) != UCS_OK) {
        ucp_config_release(cfg);
        err = MC_ERR_IO;
        goto err_free;
    }
    ucp_config_release(cfg);

    memset(&wp, 0, sizeof(wp));
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_NAME;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    wp.name = cp.name;
    if (ucp_worker_create(u->ctx, &wp, &u->worker) != UCS_OK) {
        err = MC_ERR_IO;
        goto err_cleanup;
    }
    memset(&wattr, 0, sizeof(wattr));
    wattr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
    if (ucp_worker_query(u->worker, &wattr) != UCS_OK ||
        wattr.max_am_header < MC_WIRE_HDR_SIZE + MC_UCX_BULK_HDR_MAX) {
        err = MC_ERR_IO;
        goto err_worker;
    }
    u->max_am_header = wattr.max_am_header;
    if (ucp_worker_get_efd(u->worker, &u->efd) != UCS_OK ||
        ucp_worker_get_address(u->worker, &u->addr, &u->addr_len) != UCS_OK) {
        err = MC_ERR_IO;
        goto err_worker;
    }
    err = set_am_handler(u, AM_RPC, rpc_am_cb);
    if (err == 0)
        err = set_am_handler(u, AM_BULK, bulk_am_cb);
    if (err == 0 && params->listen_ip != NULL)
        err = ucx_listen_on(u, params->listen_ip, listener_conn_cb);
    if (err != 0)
        goto err_address;
    *u_p = u;
    return 0;

err_address:
    ucp_worker_release_address(u->worker, u->addr);
err_worker:
    ucp_worker_destroy(u->worker);
err_cleanup:
    ucp_cleanup(u->ctx);
err_free:
    free(u);
    return err;
}

void mc_ucx_destroy(struct mc_ucx *u)
{
    uint64_t deadline;
    struct mc_ucx_ep *ep;
    struct req *r;

    if (u == NULL)
        return;
    if (u->listener != NULL)
        ucp_listener_destroy(u->listener); /* no new endpoint from here on */
    for (ep = u->eps; ep != NULL; ep = ep->next)
        mc_ucx_ep_close(ep, true);
    deadline = mc_ucx_now_ms() + DESTROY_WAIT_MS;
    while ((u->eps != NULL || u->reqs != NULL || u->done_q != NULL) &&
           mc_ucx_now_ms() < deadline)
        mc_ucx_progress(u);

    ucp_worker_release_address(u->worker, u->addr);
    ucp_worker_destroy(u->worker);
    /* What UCX never completed: it is gone now, so nothing reads or writes those buffers
     * any more; finish them as canceled. */
    while ((r = u->reqs) != NULL) {
        reqs_unlink(u, r);
        if (r->kind == RK_CLOSE) {
            ep_hash_remove(r->ep);
            r->ep->close_done = true;
            ep_queue_work(r->ep);
        } else {
            done_push(u, r, MC_ERR_CANCELED);
        }
    }
    run_work(u);
    run_done(u);
    while ((ep = u->eps) != NULL) { /* close requests lost with the worker */
        while (ep->calls != NULL)
            call_end(u, ep->calls, MC_ERR_CANCELED, NULL, NULL, 0);
        ucx_ep_free(ep);
    }
    ucp_cleanup(u->ctx);
    free(u);
}

/* --- memory registration and one-sided access --------------------------------------------- */

int mc_ucx_mem_map(struct mc_ucx *u, void *ptr, size_t len, struct mc_ucx_mem **mem_p)
{
    return mc_ucx_mem_map_type(u, ptr, len, MC_UCX_MEM_HOST, mem_p);
}

int mc_ucx_mem_map_type(struct mc_ucx *u, void *ptr, size_t len, enum mc_ucx_mem_type mt,
                        struct mc_ucx_mem **mem_p)
{
    ucp_mem_map_params_t p;
    struct mc_ucx_mem *m;
    ucs_status_t st;

    if (u == NULL || ptr == NULL || len == 0 || mem_p == NULL)
        return MC_ERR_INVALID;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return MC_ERR_NOMEM;
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                   UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    p.address = ptr;
    p.length = len;
    p.memory_type = ucs_mt(mt);
    st = ucp_mem_map(u->ctx, &p, &m->memh);
    if (st != UCS_OK) {
        free(m);
        return st == UCS_ERR_NO_MEMORY ? MC_ERR_NOMEM : MC_ERR_IO;
    }
    m->u = u;
    *mem_p = m;
    return 0;
}

void mc_ucx_mem_unmap(struct mc_ucx_mem *mem)
{
    if (mem == NULL)
        return;
    (void)ucp_mem_unmap(mem->u->ctx, mem->memh);
    free(mem);
}

int mc_ucx_mem_pack_rkey(const struct mc_ucx_mem *mem, void **rkey_p, size_t *len_p)
{
    void *buf;
    size_t len;
    void *copy;

    if (mem == NULL || rkey_p == NULL || len_p == NULL)
        return MC_ERR_INVALID;
    if (ucp_rkey_pack(mem->u->ctx, mem->memh, &buf, &len) != UCS_OK)
        return MC_ERR_IO;
    copy = malloc(len);
    if (copy != NULL)
        memcpy(copy, buf, len);
    ucp_rkey_buffer_release(buf);
    if (copy == NULL)
        return MC_ERR_NOMEM;
    *rkey_p = copy;
    *len_p = len;
    return 0;
}

int mc_ucx_rkey_unpack(struct mc_ucx_ep *ep, const void *buf, size_t len,
                       struct mc_ucx_rkey **rkey_p)
{
    struct mc_ucx_rkey *k;

    /* ucp_ep_rkey_unpack takes no length: a blob from a peer must come from a frame whose
     * length was checked, and an empty one is refused here */
    if (ep == NULL || buf == NULL || len == 0 || rkey_p == NULL)
        return MC_ERR_INVALID;
    if (ep->status != 0)
        return ep->status;
    k = calloc(1, sizeof(*k));
    if (k == NULL)
        return MC_ERR_NOMEM;
    if (ucp_ep_rkey_unpack(ep->uep, buf, &k->rkey) != UCS_OK) {
        free(k);
        return MC_ERR_PROTO;
    }
    *rkey_p = k;
    return 0;
}

void mc_ucx_rkey_destroy(struct mc_ucx_rkey *rkey)
{
    if (rkey == NULL)
        return;
    ucp_rkey_destroy(rkey->rkey);
    free(rkey);
}

enum rma_op { RMA_PUT, RMA_GET, RMA_FLUSH };

static int rma(struct mc_ucx_ep *ep, enum rma_op op, void *buf, size_t len, uint64_t raddr,
               struct mc_ucx_rkey *rkey, mc_ucx_done_fn done_cb, void *ctx)
{
    ucp_request_param_t p;
    ucs_status_ptr_t sp;
    struct req *r;
    int err;

    if (ep == NULL || done_cb == NULL || (op != RMA_FLUSH && (buf == NULL || rkey == NULL)))
        return MC_ERR_INVALID;
    if (ep->status != 0)
        return ep->status;
    r = req_new(ep->u, RK_USER, 0);
    if (r == NULL)
        return MC_ERR_NOMEM;
    r->done = done_cb;
    r->ctx = ctx;
    req_param(&p, r, 0);
    reqs_link(ep->u, r);
    if (op == RMA_PUT)
        sp = ucp_put_nbx(ep->uep, buf, len, raddr, rkey->rkey, &p);
    else if (op == RMA_GET)
        sp = ucp_get_nbx(ep->uep, buf, len, raddr, rkey->rkey, &p);
    else
        sp = ucp_ep_flush_nbx(ep->uep, &p);
    err = req_started(ep->u, r, sp);
    if (err != 0)
        free(r);
    return err;
}

int mc_ucx_put(struct mc_ucx_ep *ep, const void *buf, size_t len, uint64_t raddr,
               struct mc_ucx_rkey *rkey, mc_ucx_done_fn done_cb, void *ctx)
{
    return rma(ep, RMA_PUT, (void *)(uintptr_t)buf, len, raddr, rkey, done_cb, ctx);
}

int mc_ucx_get(struct mc_ucx_ep *ep, void *buf, size_t len, uint64_t raddr,
               struct mc_ucx_rkey *rkey, mc_ucx_done_fn done_cb, void *ctx)
{
    return rma(ep, RMA_GET, buf, len, raddr, rkey, done_cb, ctx);
}

int mc_ucx_ep_flush(struct mc_ucx_ep *ep, mc_ucx_done_fn done_cb, void *ctx)
{
    return rma(ep, RMA_FLUSH, NULL, 0, 0, NULL, done_cb, ctx);
}
