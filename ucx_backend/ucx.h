/*
 * The transfer layer over UCX (docs/architecture.md "Layers"): one UCP context and one
 * worker per event-loop thread, endpoints to peers by worker address with peer error
 * handling, RPC over active messages (requests and replies matched by id, deadlines), bulk
 * transfers received straight into the owner's memory, and memory registration for
 * one-sided paths. It moves bytes and reports completion; it knows nothing of objects, keys
 * or the master (wire.h frames its messages, their payloads belong to the callers).
 *
 * How bytes move is a choice behind this API (a measurement decides it, docs/decisions.md):
 * today endpoints are created from worker addresses with UCP_ERR_HANDLING_MODE_PEER, RPC
 * frames go as eager AMs and bulk data as AMs with rendezvous (UCP_AM_SEND_FLAG_RNDV), which
 * the receiver lands with ucp_am_recv_data_nbx at the address it chooses.
 *
 * Endpoints. A worker sees two kinds: the ones it connected (mc_ucx_ep_connect) and the
 * ones its peers connected to it ("accepted": they appear, as the `ep` argument of a
 * handler, on the first message a peer sends). Both are answered and closed the same way.
 * A connected endpoint learns of a dead peer from UCX (peer error handling), and so does an
 * accepted one of a worker that listens (params.listen_ip: it creates them itself); an
 * accepted worker-address endpoint only when the peer breaks the protocol, and UCX may free
 * it by itself once its peer is gone: send on one only while handling its peer's request.
 * Servers judge liveness by heartbeat either way (docs/failure-contract.md). A failed endpoint (peer error, protocol violation) fails its pending
 * calls, drops everything it receives after, is reported once through params.ep_error, and
 * stays allocated until its owner closes it.
 *
 * Callbacks. Every callback runs inside mc_ucx_progress (or mc_ucx_expire / destroy), never
 * inside the call that started the operation, so a callback may start new operations and
 * close endpoints; it must not call mc_ucx_progress, mc_ucx_arm or mc_ucx_destroy.
 *
 * Errors: 0, or a negative MC_ERR_* (include/mc/mc_status.h): MC_ERR_INVALID (arguments),
 * MC_ERR_NOMEM, MC_ERR_TIMEOUT (a call's deadline passed), MC_ERR_CANCELED (the endpoint
 * was closed by its owner), MC_ERR_PROTO (the peer broke the protocol: drop the endpoint),
 * MC_ERR_UNAVAILABLE (the peer cannot be reached: UCX reported a transport error), MC_ERR_IO
 * (UCX failed locally: context, worker, memory registration).
 *
 * Thread-safety: none. A struct mc_ucx and everything made from it belong to one thread
 * (the worker is UCS_THREAD_MODE_SINGLE). The data path allocates per request with malloc
 * for now (pools come with the agent's integration).
 */
#ifndef MC_UCX_UCX_H
#define MC_UCX_UCX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ucx_backend/wire.h"

struct mc_ucx;
struct mc_ucx_ep;
struct mc_ucx_mem;
struct mc_ucx_rkey;

#define MC_UCX_BULK_HDR_MAX 1024u /* caller bytes that ride in a bulk transfer's header */

/* An endpoint failed with `status` (MC_ERR_UNAVAILABLE or MC_ERR_PROTO). Called once per
 * endpoint, after its pending calls have failed; the owner should mc_ucx_ep_close it. */
typedef void (*mc_ucx_ep_error_fn)(void *ctx, struct mc_ucx_ep *ep, int status);

struct mc_ucx_params {
    const char *name;            /* worker name in UCX's logs; NULL: "mc" */
    const char *const *config;   /* NULL or a NULL-terminated list of "NAME=VALUE" UCX
                                    settings without the UCX_ prefix (e.g. "TLS=tcp"),
                                    applied over the environment (ucp_config_modify) */
    mc_ucx_ep_error_fn ep_error; /* NULL: failures are only visible through the calls */
    void *ep_error_ctx;
    const char *listen_ip;       /* NULL: peers connect by worker address. Else a numeric
                                    IPv4/IPv6 address: the worker listens there (a free
                                    port) through UCX's connection manager, and
                                    mc_ucx_address names that listener (saddr.h); every
                                    endpoint a peer opens this way is created by us, so UCX
                                    reports its peer's failure (ep_error) and never frees
                                    it by itself, as it does an accepted worker-address
                                    endpoint. */
    size_t bulk_eager_max;       /* bulk transfers (mc_ucx_send_bulk_mem) of host memory up
                                    to this many bytes go eagerly: one message, copied out
                                    of UCX's buffers on arrival; larger ones, and device
                                    memory, by rendezvous (the receiver pulls them into
                                    place). 0: always rendezvous */
};

/*
 * Creates the UCP context (features AM, RMA, WAKEUP) and its single-threaded worker.
 * `params` may be NULL. Returns 0 and *u_p, MC_ERR_INVALID (a bad config setting),
 * MC_ERR_NOMEM, or MC_ERR_IO (UCX could not start: no transport, ...).
 */
int mc_ucx_create(const struct mc_ucx_params *params, struct mc_ucx **u_p);

/*
 * Closes every endpoint with force, fails pending calls with MC_ERR_CANCELED, completes
 * outstanding transfers with an error (their callbacks run), and frees everything. Blocks at
 * most about a second for UCX to release its requests. Memory mapped with mc_ucx_mem_map
 * must be unmapped first. Accepts NULL.
 */
void mc_ucx_destroy(struct mc_ucx *u);

/*
 * The worker's event fd: readable when mc_ucx_progress has work. Poll it for POLLIN only
 * after mc_ucx_arm returned true; it stays owned by the worker (do not close it).
 */
int mc_ucx_efd(struct mc_ucx *u);

/*
 * Memory types of the buffers bulk transfers and registrations take. A buffer's type is
 * told to UCX (UCP_OP_ATTR_FIELD_MEMORY_TYPE, UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE), never
 * detected per op.
 */
enum mc_ucx_mem_type {
    MC_UCX_MEM_HOST = 0,
    MC_UCX_MEM_CUDA = 1, /* CUDA device memory (a CUdeviceptr) */
};

/* Whether this UCX moves memory of type `mt` (ucp_context_query: UCP_ATTR_FIELD_MEMORY_TYPES). */
bool mc_ucx_moves(const struct mc_ucx *u, enum mc_ucx_mem_type mt);

/*
 * Whether this UCX moves CUDA device memory itself (mc_ucx_moves MC_UCX_MEM_CUDA). Debian's
 * UCX 1.13 has no CUDA transport: false there, and bytes of GPU segments travel staged
 * through host memory by their owner (docs/gpu.md).
 */
bool mc_ucx_has_cuda(const struct mc_ucx *u);

/*
 * Progresses the worker until it is idle, runs the callbacks that became due and expires
 * calls whose deadline passed (CLOCK_MONOTONIC). Returns whether anything happened. Never
 * blocks and never logs.
 */
bool mc_ucx_progress(struct mc_ucx *u);

/*
 * Prepares the event fd for sleeping. true: nothing is pending, the caller may sleep on
 * mc_ucx_efd (bounded by mc_ucx_next_deadline_ms). false: events arrived meanwhile (UCX
 * said UCS_ERR_BUSY, or callbacks are queued): call mc_ucx_progress again, then arm again.
 */
bool mc_ucx_arm(struct mc_ucx *u);

/* CLOCK_MONOTONIC in milliseconds: the clock of every deadline in this API. */
uint64_t mc_ucx_now_ms(void);

/* Fails every call whose deadline is <= now_ms with MC_ERR_TIMEOUT (callbacks run here).
 * Returns whether any expired. mc_ucx_progress does this itself with the real clock. */
bool mc_ucx_expire(struct mc_ucx *u, uint64_t now_ms);

/* The earliest pending call deadline, or UINT64_MAX: the longest a loop may sleep. */
uint64_t mc_ucx_next_deadline_ms(const struct mc_ucx *u);

/*
 * This worker's address, an opaque blob to hand to peers out of band (a mount record, a
 * pipe): its listener's (saddr.h) when it listens, else its UCX worker address. Owned by
 * `u`, valid until mc_ucx_destroy.
 */
void mc_ucx_address(const struct mc_ucx *u, const void **addr_p, size_t *len_p);

/* --- endpoints -------------------------------------------------------------------------- */

/*
 * Creates an endpoint to the worker whose address is `addr` (from mc_ucx_address: a
 * listener's, connected by socket address, or a worker address), with peer error handling. Non-blocking: the connection is made as messages flow. The
 * endpoint is owned by the caller until mc_ucx_ep_close. Keep one per peer (a cache keyed
 * by peer id belongs to the caller). Returns 0 and *ep_p, MC_ERR_INVALID (empty address),
 * MC_ERR_NOMEM, or MC_ERR_UNAVAILABLE (UCX refused the address: unreachable or corrupt).
 */
int mc_ucx_ep_connect(struct mc_ucx *u, const void *addr, size_t len,
                      struct mc_ucx_ep **ep_p);

/*
 * Closes `ep` without blocking: pending calls fail with MC_ERR_CANCELED (from progress),
 * later use of `ep` is invalid, and the memory is freed once UCX is done with it (through
 * mc_ucx_progress). force: outstanding sends complete with an error at once and the peer
 * sees an error (a verdict on an unresponsive peer, docs/failure-contract.md); otherwise
 * outstanding sends are flushed first. Closing twice is a no-op; NULL is accepted.
 *
 * An accepted endpoint is UCX's own, which UCX destroys by itself once its peer is found
 * gone: closing one only forgets it (a later frame on it starts a new accepted endpoint),
 * except when it failed with MC_ERR_PROTO and is closed with force from the ep_error
 * callback, which cuts the misbehaving (and so, alive) peer off.
 */
void mc_ucx_ep_close(struct mc_ucx_ep *ep, bool force);

/*
 * Sessions. An accepted endpoint is identified by UCX's own ep pointer, and UCX frees such an
 * ep by itself when its peer dies: a new peer's ep may later get the same address, and with
 * it our record of the dead peer (and its authentication). So authentication is bound to a
 * session instead: an endpoint we connect draws a random 40-bit session that the top bits of
 * every request id we send on it carry (MC_UCX_SESSION_OF(id)); a server that accepts a
 * peer's HELLO records that frame's session on the accepted endpoint (mc_ucx_ep_set_session)
 * and takes later frames for that peer's only while their session matches. A bulk transfer's
 * request id is the caller's: senders of bulk requests put their session there too.
 * mc_ucx_ep_session: the session of an endpoint we connected, or what was recorded on an
 * accepted one (0 until then).
 */
#define MC_UCX_SESSION_SHIFT 24
#define MC_UCX_SEQ_MASK ((UINT64_C(1) << MC_UCX_SESSION_SHIFT) - 1)
#define MC_UCX_SESSION_MAX ((UINT64_C(1) << (64 - MC_UCX_SESSION_SHIFT)) - 1)
#define MC_UCX_SESSION_OF(id) ((uint64_t)(id) >> MC_UCX_SESSION_SHIFT)
uint64_t mc_ucx_ep_session(const struct mc_ucx_ep *ep);
void mc_ucx_ep_set_session(struct mc_ucx_ep *ep, uint64_t session);

/* The owner's pointer for this endpoint (NULL until set), e.g. its peer record. */
void mc_ucx_ep_set_user(struct mc_ucx_ep *ep, void *user);
void *mc_ucx_ep_user(const struct mc_ucx_ep *ep);

/* 0 while the endpoint is usable, else why it is not (MC_ERR_PROTO, MC_ERR_UNAVAILABLE,
 * MC_ERR_CANCELED once closed). */
int mc_ucx_ep_status(const struct mc_ucx_ep *ep);

/* Whether the peer connected to us (the endpoint came with its first message). */
bool mc_ucx_ep_is_accepted(const struct mc_ucx_ep *ep);

/* --- RPC over active messages ----------------------------------------------------------- */

/*
 * An incoming request on `ep`: `hdr` has been decoded and checked (type is a request type,
 * payload_len bytes at `payload`). `hdr` and `payload` are valid only during the call: copy
 * what outlives it. Answer with mc_ucx_rpc_reply, now or later, or not at all (the caller's
 * deadline will fire).
 */
typedef void (*mc_ucx_rpc_handler_fn)(void *ctx, struct mc_ucx_ep *ep,
                                      const struct mc_wire_hdr *hdr, const void *payload);

/* Sets the handler for incoming requests (NULL: requests are dropped and counted). */
void mc_ucx_rpc_register(struct mc_ucx *u, mc_ucx_rpc_handler_fn handler, void *ctx);

/*
 * How a call ended: status 0 with the reply's payload (valid only during the callback), or
 * MC_ERR_TIMEOUT, MC_ERR_UNAVAILABLE (the endpoint failed or the send did), MC_ERR_PROTO
 * (the peer answered with a malformed reply), MC_ERR_CANCELED (closed), MC_ERR_NOMEM with
 * payload NULL, len 0.
 */
typedef void (*mc_ucx_rpc_done_fn)(void *ctx, int status, const struct mc_wire_hdr *hdr,
                                   const void *payload, size_t len);

/*
 * Sends request `type` (a request type of wire.h) with `len` bytes of `payload` (copied:
 * the caller's buffer is free at return) on `ep`, and calls done_cb exactly once: with
 * the reply (a frame of type + 1 with the same request id from the same endpoint) or with
 * an error. deadline_ms: CLOCK_MONOTONIC ms after which the call fails with MC_ERR_TIMEOUT
 * (0: none). A reply that comes after its call ended is dropped and counted
 * (stats.replies_dropped). *id_p (may be NULL) gets the request id.
 *
 * Returns 0 (done_cb will run), or an error with done_cb never called: MC_ERR_INVALID
 * (type, len > MC_WIRE_PAYLOAD_MAX), MC_ERR_NOMEM, the endpoint's status if it failed,
 * MC_ERR_UNAVAILABLE (UCX refused the send).
 */
int mc_ucx_rpc_call(struct mc_ucx_ep *ep, uint16_t type, const void *payload, size_t len,
                    uint64_t deadline_ms, mc_ucx_rpc_done_fn done_cb, void *ctx,
                    uint64_t *id_p);

/*
 * Answers request `request_id` with reply `type` (a reply type) and `len` bytes of
 * `payload` (copied). Fire-and-forget: a failure to deliver shows on the endpoint.
 * Returns 0, MC_ERR_INVALID, MC_ERR_NOMEM, the endpoint's status, or MC_ERR_UNAVAILABLE.
 */
int mc_ucx_rpc_reply(struct mc_ucx_ep *ep, uint16_t type, uint64_t request_id,
                     const void *payload, size_t len);

/*
 * Fault injection for tests of hostile peers: sends `len` raw bytes as an RPC frame,
 * unchecked. Never used by the daemons.
 */
int mc_ucx_send_raw_frame(struct mc_ucx_ep *ep, const void *frame, size_t len);

/* --- bulk transfers --------------------------------------------------------------------- */

/* A send or a one-sided operation ended: 0, MC_ERR_CANCELED (the receiver refused a bulk
 * transfer, or the endpoint was closed), MC_ERR_UNAVAILABLE (the endpoint failed). */
typedef void (*mc_ucx_done_fn)(void *ctx, int status);

/*
 * Sends `len` bytes at `data` to the peer's bulk handler, with a frame header of `type`
 * (MC_WIRE_F_BULK, MC_WIRE_F_REPLY for reply types), `request_id` (the caller's, echoed as
 * is) and `hdr_len` <= MC_UCX_BULK_HDR_MAX caller bytes at `hdr` (copied). The data goes by
 * rendezvous: the receiver pulls it into its own buffer. `data` must stay untouched and
 * allocated until done_cb runs, which is when UCX no longer reads it, whatever the status.
 *
 * Returns 0 (done_cb will run exactly once), or an error with done_cb never called:
 * MC_ERR_INVALID, MC_ERR_NOMEM, the endpoint's status, MC_ERR_UNAVAILABLE.
 */
int mc_ucx_send_bulk(struct mc_ucx_ep *ep, uint16_t type, uint64_t request_id,
                     const void *hdr, size_t hdr_len, const void *data, size_t len,
                     mc_ucx_done_fn done_cb, void *ctx);

/* mc_ucx_send_bulk of a buffer of memory type `mt` (device memory UCX moves itself:
 * check mc_ucx_moves first). */
int mc_ucx_send_bulk_mem(struct mc_ucx_ep *ep, uint16_t type, uint64_t request_id,
                         const void *hdr, size_t hdr_len, const void *data, size_t len,
                         enum mc_ucx_mem_type mt, mc_ucx_done_fn done_cb, void *ctx);

/*
 * A bulk transfer that the receiver answers (a write whose sender must know that the bytes
 * are in place, not only that they left): sends `len` bytes at `data` like mc_ucx_send_bulk,
 * as request `type` (a request type) with a fresh request id carrying the endpoint's session,
 * and waits for the receiver's reply (type + 1, same id; the receiver answers with
 * mc_ucx_rpc_reply once its bulk done callback ran). Two callbacks, each exactly once, in
 * either order: reply_cb with the reply or an error (MC_ERR_TIMEOUT at deadline_ms, 0: none;
 * MC_ERR_UNAVAILABLE / MC_ERR_CANCELED when the send or the endpoint failed), and data_cb
 * when UCX reads `data` no more (which may come after a timed-out reply_cb: keep `data`
 * until then). Returns 0 (both will run) or an error (neither will): as mc_ucx_send_bulk.
 */
int mc_ucx_send_bulk_call(struct mc_ucx_ep *ep, uint16_t type, const void *hdr, size_t hdr_len,
                          const void *data, size_t len, uint64_t deadline_ms,
                          mc_ucx_rpc_done_fn reply_cb, mc_ucx_done_fn data_cb, void *ctx);
/*
 * An incoming bulk transfer of `len` bytes on `ep`, described by `hdr` (checked; the
 * caller's header bytes are at `hdr_payload`, hdr->payload_len of them, valid during the
 * call). Returns where to put the `len` bytes, or NULL to refuse them (the sender's done_cb
 * then gets an error; nothing more happens here). When it returns a buffer it may set *op_p
 * to a pointer of its own, and the bulk done callback will run exactly once with it; the
 * buffer must stay allocated and unread until then.
 */
typedef void *(*mc_ucx_bulk_dest_fn)(void *ctx, struct mc_ucx_ep *ep,
                                     const struct mc_wire_hdr *hdr, const void *hdr_payload,
                                     size_t len, void **op_p);

/* The bytes of a bulk transfer are in place (status 0) or will never be complete
 * (MC_ERR_UNAVAILABLE: the transfer failed; the buffer content is undefined). */
typedef void (*mc_ucx_bulk_done_fn)(void *ctx, void *op, int status);

/*
 * For a bulk dest fn only, during its call: the buffer it is about to return has memory
 * type `mt` (unset: MC_UCX_MEM_HOST), and UCX lands the bytes there itself. Bytes that came
 * eagerly (mc_ucx_bulk_eager: true) are copied by the CPU, so for those the dest fn must
 * return host memory: a non-host buffer for eager bytes is refused, its done call made with
 * MC_ERR_INVALID.
 */
void mc_ucx_bulk_dest_mem(struct mc_ucx *u, enum mc_ucx_mem_type mt);
/*
 * For a bulk dest fn only, during its call: only the first `head` bytes go to the buffer it
 * is about to return, the rest to `tail` (host memory, both; 0 < head < len, or the
 * transfer is refused and its done call made with MC_ERR_INVALID). Both stay the caller's
 * to keep, as the buffer, until the done call.
 */
void mc_ucx_bulk_dest_split(struct mc_ucx *u, size_t head, void *tail);
bool mc_ucx_bulk_eager(const struct mc_ucx *u);

/* Sets the receiver of bulk transfers (dest NULL: every transfer is refused and counted). */
void mc_ucx_bulk_register(struct mc_ucx *u, mc_ucx_bulk_dest_fn dest,
                          mc_ucx_bulk_done_fn done, void *ctx);

/* --- memory registration and one-sided access (RMA paths) ------------------------------- */

/*
 * Registers [ptr, ptr + len) with UCX for remote access. The memory stays the caller's;
 * unmap only after the last transfer touching it completed. Returns 0 and *mem_p,
 * MC_ERR_INVALID, MC_ERR_NOMEM or MC_ERR_IO.
 */
int mc_ucx_mem_map(struct mc_ucx *u, void *ptr, size_t len, struct mc_ucx_mem **mem_p);
/* The same for memory of type `mt` (a GPU segment UCX moves directly). */
int mc_ucx_mem_map_type(struct mc_ucx *u, void *ptr, size_t len, enum mc_ucx_mem_type mt,
                        struct mc_ucx_mem **mem_p);
void mc_ucx_mem_unmap(struct mc_ucx_mem *mem); /* accepts NULL */

/*
 * Packs the remote key of `mem` for a peer: *rkey_p is a malloc'd blob (free() it) of
 * *len_p bytes. Returns 0, MC_ERR_NOMEM or MC_ERR_IO.
 */
int mc_ucx_mem_pack_rkey(const struct mc_ucx_mem *mem, void **rkey_p, size_t *len_p);

/*
 * Unpacks a peer's packed rkey for use on `ep` only. Destroy it before closing `ep`.
 * Returns 0 and *rkey_p, MC_ERR_NOMEM, MC_ERR_PROTO (the blob is not an rkey).
 */
int mc_ucx_rkey_unpack(struct mc_ucx_ep *ep, const void *buf, size_t len,
                       struct mc_ucx_rkey **rkey_p);
void mc_ucx_rkey_destroy(struct mc_ucx_rkey *rkey); /* accepts NULL */

/*
 * One-sided write / read of `len` bytes between local `buf` and the peer's `raddr` (inside
 * memory the peer registered and whose rkey is `rkey`). done_cb runs when the local buffer
 * may be reused (put) or holds the data (get); remote completion of puts needs
 * mc_ucx_ep_flush. On Debian's transports these are emulated over AM and need the target
 * to progress. Returns 0 (done_cb will run) or an error (it will not).
 */
int mc_ucx_put(struct mc_ucx_ep *ep, const void *buf, size_t len, uint64_t raddr,
               struct mc_ucx_rkey *rkey, mc_ucx_done_fn done_cb, void *ctx);
int mc_ucx_get(struct mc_ucx_ep *ep, void *buf, size_t len, uint64_t raddr,
               struct mc_ucx_rkey *rkey, mc_ucx_done_fn done_cb, void *ctx);

/* Every operation issued on `ep` before it is complete at the peer when done_cb runs. */
int mc_ucx_ep_flush(struct mc_ucx_ep *ep, mc_ucx_done_fn done_cb, void *ctx);

/* --- counters ----------------------------------------------------------------------------- */

struct mc_ucx_stats {
    uint64_t calls_sent;
    uint64_t calls_timed_out;
    uint64_t requests_received;
    uint64_t requests_dropped;   /* no handler, or from a failed/closing endpoint */
    uint64_t replies_received;
    uint64_t replies_dropped;    /* unknown or expired id, or from the wrong endpoint */
    uint64_t frames_bad;         /* failed decoding: each failed its endpoint */
    uint64_t frames_unattributed; /* no reply endpoint: cannot be answered, dropped */
    uint64_t bulk_received;
    uint64_t bulk_received_eager; /* of those: sent eagerly (mc_ucx_params bulk_eager_max) */
    uint64_t bulk_refused;
    uint64_t eps_accepted;
    uint64_t conns_refused;      /* listener: connection requests we could not take */
    uint64_t eps_failed;
    uint64_t arm_errors;
};

void mc_ucx_get_stats(const struct mc_ucx *u, struct mc_ucx_stats *stats_p);

#endif /* MC_UCX_UCX_H */
