/*
 * The transfer layer's insides, shared by its files (ucx.h is the API): ucx.c (workers,
 * endpoints, RPC, bulk, memory) and ucx_listen.c (the listener: endpoints peers open by
 * socket address, created by us). Nothing outside ucx_backend/ includes this.
 */
#ifndef MC_UCX_UCX_INT_H
#define MC_UCX_UCX_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#include "ucx_backend/saddr.h"
#include "ucx_backend/ucx.h"

#define AM_RPC 17u  /* eager frames: header + payload in the AM's data */
#define AM_BULK 18u /* frame in the AM header, bulk data by rendezvous */
#define CALL_BUCKETS 1024u
#define EP_BUCKETS 256u
#define PROGRESS_TURNS 64 /* per mc_ucx_progress: a flood cannot starve the caller's loop */
#define DESTROY_WAIT_MS 1000

enum req_kind {
    RK_CALL,      /* the send of a call's frame */
    RK_FRAME,     /* a reply or raw frame: its bytes live in the req */
    RK_BULK_SEND, /* a bulk send: its header frame lives in the req */
    RK_BULK_RECV, /* a rendezvous receive into the caller's buffer */
    RK_CLOSE,     /* an endpoint close (embedded in the endpoint) */
    RK_USER,      /* put, get, flush: the caller's done callback */
};

struct req {
    struct req *prev, *next; /* u->reqs while UCX holds the request */
    struct req *qnext;       /* u->done_q */
    struct mc_ucx *u;
    enum req_kind kind;
    bool in_ucx;
    int status;
    struct call *call;       /* RK_CALL; RK_BULK_SEND of mc_ucx_send_bulk_call */
    struct mc_ucx_ep *ep;    /* RK_CLOSE */
    mc_ucx_done_fn done;     /* RK_BULK_SEND, RK_USER */
    mc_ucx_bulk_done_fn bdone; /* RK_BULK_RECV */
    void *ctx;
    void *op;                /* RK_BULK_RECV */
    uint8_t *frame;          /* RK_FRAME, RK_BULK_SEND: points just past the struct */
    ucp_dt_iov_t iov[2];     /* RK_BULK_RECV of a split destination (mc_ucx_bulk_dest_split) */
};

struct call {
    struct call *hnext;        /* id hash chain */
    struct call *dprev, *dnext; /* deadline list, ascending (only deadline != 0) */
    struct call *eprev, *enext; /* its endpoint's pending calls */
    struct mc_ucx_ep *ep;      /* valid while !ended */
    uint64_t id;
    uint64_t deadline_ms;
    uint16_t type;
    bool ended;                /* done_cb ran */
    bool send_busy;            /* UCX may still read frame */
    mc_ucx_rpc_done_fn cb;
    void *ctx;
    size_t frame_len;
    uint8_t *frame;            /* just past the struct */
};

struct mc_ucx_ep {
    struct mc_ucx *u;
    ucp_ep_h uep;
    struct mc_ucx_ep *hnext;       /* u->ep_hash chain, while in_hash */
    struct mc_ucx_ep *wnext;       /* u->work, while on_work */
    struct mc_ucx_ep *prev, *next; /* u->eps */
    struct call *calls;            /* pending calls */
    void *user;
    uint64_t session;              /* see mc_ucx_ep_session */
    int status;                    /* 0 usable; else failed or closed */
    bool accepted;
    bool created;                  /* accepted from our listener: our ep, closed for real */
    bool in_hash, on_work, reported, closing, close_done;
    struct req close_req;
};

struct mc_ucx_mem {
    struct mc_ucx *u;
    ucp_mem_h memh;
};

struct mc_ucx_rkey {
    ucp_rkey_h rkey;
};

struct mc_ucx {
    ucp_context_h ctx;
    ucp_worker_h worker;
    int efd;
    ucp_address_t *addr;
    size_t addr_len;
    ucp_listener_h listener;       /* NULL: peers connect by worker address */
    uint8_t saddr[MC_SADDR_MAX];   /* the listener's address (saddr.h) */
    size_t saddr_len;
    size_t max_am_header;
    size_t bulk_eager_max;          /* mc_ucx_params */
    uint64_t next_id;
    mc_ucx_ep_error_fn ep_error;
    void *ep_error_ctx;
    mc_ucx_rpc_handler_fn rpc_handler;
    void *rpc_ctx;
    mc_ucx_bulk_dest_fn bulk_dest;
    mc_ucx_bulk_done_fn bulk_done;
    void *bulk_ctx;
    /* during a bulk dest call only: the memory type of the buffer it returns
     * (mc_ucx_bulk_dest_mem), and whether the bytes came eagerly */
    enum mc_ucx_mem_type dest_mt;
    bool dest_eager;
    uint8_t *dest_tail;        /* mc_ucx_bulk_dest_split: where the bytes past dest_head go */
    size_t dest_head;
    struct req *reqs;               /* in flight inside UCX */
    struct req *done_q, **done_tail; /* completed, callbacks not run yet */
    struct mc_ucx_ep *work, **work_tail;
    struct mc_ucx_ep *eps;
    struct call *dl_head, *dl_tail;
    struct call *call_hash[CALL_BUCKETS];
    struct mc_ucx_ep *ep_hash[EP_BUCKETS];
    struct mc_ucx_stats st;
};

/* The listener on ip (a free port), whose connection requests go to conn_cb (arg u), and
 * u->saddr naming it (ucx_listen.c). 0, MC_ERR_INVALID (not a numeric address) or
 * MC_ERR_IO. */
int ucx_listen_on(struct mc_ucx *u, const char *ip, ucp_listener_conn_callback_t conn_cb);

#endif /* MC_UCX_UCX_INT_H */
