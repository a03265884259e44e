/*
 * A hostile peer against the real mc-master and cluster-mode mc-agents (docs/architecture.md: "an
 * unauthenticated endpoint gets no RPC, no data, no rkey"): a process with its own UCX
 * worker (peer error handling, as the daemons) fetches the daemons' worker addresses from
 * their TCP bootstrap ports and talks to them directly.
 *
 *   (no argument)  test_hostile_peer_malformed_messages: without HELLO, after a wrong-token
 *                  and an empty-token HELLO, every request type, well-formed and naming a
 *                  real node, segment and object, is refused with a bare MC_ERR_DENIED (no
 *                  segment, address or rkey in any reply), no READ data arrives, a WRITE
 *                  bulk over an agent's whole segment is refused; then garbage and truncated
 *                  payloads behind valid headers, and raw frames (every request truncated at
 *                  every length, random bytes, lying lengths up to UINT32_MAX, wrong flags,
 *                  types and versions), each on an endpoint of its own, to the master and an
 *                  agent, without and with a valid HELLO first. A sample of the bad frames is
 *                  followed by a request on the same endpoint, which must stay unanswered:
 *                  the frame reached the daemon and cut the endpoint off. Afterwards the
 *                  daemons are alive and serve (a put through one agent read through the
 *                  other, the object written before intact), the cluster lists the two agents
 *                  only (and the test's own token-holding identity, gone), and every daemon
 *                  exits 0 on SIGTERM.
 *   gaps           regression tests of two bugs found here (docs/decisions.md, "Accepted
 *                  endpoints"), registered as test_hostile_peer_gaps:
 *                  test_hostile_peer_inherits_no_authentication: once an agent is killed,
 *                  a token-less peer's new endpoints got the freed UCX endpoint's address and
 *                  inherited its authentication, at the master (CLUSTER_INFO with segments,
 *                  worker addresses, rkeys) and at an agent (READ of its segment); fixed by
 *                  binding authentication to the HELLO's session (ucx.h);
 *                  test_hostile_peer_cannot_fill_the_master: the records of endpoints a
 *                  token-less peer opened and closed were never freed, so max_peers of them
 *                  kept every new agent out; fixed by keeping nothing for such endpoints.
 */
#include <assert.h>
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mc/mc.h>
#include <mc/mc_status.h>

#include "daemon/common/bootstrap.h"
#include "daemon/proto/hold_proto.h"
#include "daemon/proto/master_proto.h"
#include "daemon/proto/peer_proto.h"
#include "ucx_backend/ucx.h"
#include "ucx_backend/wire.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* a shared helper header */
#include "tests/cluster/t_cluster.h"
#pragma GCC diagnostic pop

/* --- common ------------------------------------------------------------------------------- */

#include "tests/lib/t_rng.h"

static bool t_alive(pid_t pid)
{
    return pid > 0 && kill(pid, 0) == 0;
}

#define T_HP_CALL_MS     5000u /* a refused request is answered well within this */
#define T_HP_QUIET_MS    200u  /* how long we listen for bytes that must not come */
#define T_HP_RANDOM      48    /* random frames per target and phase */
#define T_HP_NAME        "hostile-peer"
#define T_HP_PROBE_EVERY 64   /* bad frames per check that the daemon did judge one */
#define T_HP_PROBE_MS    100u /* a request behind a bad frame stays unanswered this long */

/* One daemon as the hostile peer sees it: its worker address (bootstrap) and our endpoint. */
struct t_hp_target {
    char what[32];
    pid_t pid;
    uint8_t addr[MC_BOOT_ADDR_MAX];
    size_t addr_len;
    struct mc_ucx_ep *ep;
    bool master;
};

/* What the hostile peer knows of the cluster, to build requests that would do harm. */
struct t_hp_ctx {
    char token[40];
    uint32_t a1_node, a1_seg, own_node;
    uint64_t a1_seg_size;
    const char *victim;
};

static struct mc_ucx *t_hp_u;
static uint64_t t_hp_bulk_in, t_hp_requests_in;
static uint64_t t_hp_frames, t_hp_probes, t_hp_calls; /* for the summary line */

/* Anything arriving at us: counted, refused. Nothing should arrive at all. */
static void *t_hp_bulk_dest(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                            const void *hpl, size_t len, void **op_p)
{
    (void)ctx, (void)ep, (void)hdr, (void)hpl, (void)len, (void)op_p;
    t_hp_bulk_in++;
    return NULL;
}

static void t_hp_bulk_done(void *ctx, void *op, int status)
{
    (void)ctx, (void)op, (void)status;
}

static void t_hp_on_request(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                            const void *pl)
{
    (void)ctx, (void)ep, (void)hdr, (void)pl;
    t_hp_requests_in++;
}

static void t_hp_turn(int max_ms)
{
    struct pollfd pfd = {.fd = mc_ucx_efd(t_hp_u), .events = POLLIN};

    if (mc_ucx_progress(t_hp_u) || !mc_ucx_arm(t_hp_u))
        return;
    poll(&pfd, 1, max_ms);
}

static void t_hp_spin(unsigned ms)
{
    uint64_t end = t_now_ms() + ms;

    while (t_now_ms() < end)
        t_hp_turn(2);
}

struct t_hp_call {
    bool done;
    int status;
    size_t len;
    uint8_t reply[64];
};

static void t_hp_call_done(void *ctx, int status, const struct mc_wire_hdr *hdr,
                           const void *payload, size_t len)
{
    struct t_hp_call *c = ctx;

    (void)hdr;
    c->status = status;
    c->len = len;
    if (len > 0)
        memcpy(c->reply, payload, len < sizeof(c->reply) ? len : sizeof(c->reply));
    c->done = true;
}

/* One request; the transport status (the reply, its first 64 bytes, in c). */
static int t_hp_call(struct mc_ucx_ep *ep, uint16_t type, const void *pl, size_t len,
                     struct t_hp_call *c)
{
    int rc;

    memset(c, 0, sizeof(*c));
    t_hp_calls++;
    rc = mc_ucx_rpc_call(ep, type, pl, len, mc_ucx_now_ms() + T_HP_CALL_MS, t_hp_call_done, c,
                         NULL);
    if (rc != 0)
        return rc;
    while (!c->done)
        t_hp_turn(5);
    return c->status;
}

static int32_t t_le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* A fresh endpoint to t, not authenticated. The old one is closed without force: what we
 * sent on it is flushed, not dropped. */
static void t_hp_fresh(struct t_hp_target *t)
{
    if (t->ep != NULL)
        mc_ucx_ep_close(t->ep, false);
    t->ep = NULL;
    ck_assert_int_eq(mc_ucx_ep_connect(t_hp_u, t->addr, t->addr_len, &t->ep), 0);
}

static size_t t_hp_hello(const char *token, const char *name, uint8_t *buf, size_t cap)
{
    struct mc_proto_hello_req req = {
        .token = {(const uint8_t *)token, strlen(token)},
        .name = {(const uint8_t *)name, strlen(name)},
    };
    size_t len;

    ck_assert_int_eq(mc_proto_hello_req_encode(&req, buf, cap, &len), 0);
    return len;
}

/* HELLO with the cluster token on a fresh endpoint; the master's answer names our node. */
static void t_hp_auth(struct t_hp_target *t, struct t_hp_ctx *x)
{
    uint8_t buf[512];
    struct t_hp_call c;
    size_t len = t_hp_hello(x->token, T_HP_NAME, buf, sizeof(buf));

    t_hp_fresh(t);
    ck_assert_int_eq(t_hp_call(t->ep, MC_WIRE_HELLO, buf, len, &c), 0);
    ck_assert_msg(c.len >= 4 && t_le32(c.reply) == 0, "%s: HELLO with the token refused",
                  t->what);
    if (t->master) {
        struct mc_proto_hello_rep rep;

        ck_assert_int_le(c.len, sizeof(c.reply));
        ck_assert_int_eq(mc_proto_hello_rep_decode(c.reply, c.len, &rep), 0);
        x->own_node = rep.node;
    }
}

/*
 * A well-formed payload of request `type` that would do harm if it were served: it names
 * agent a1's node and segment, the victim object, our own worker address. Returns its
 * length in buf.
 */
static size_t t_hp_payload(const struct t_hp_ctx *x, uint16_t type, uint8_t *buf, size_t cap)
{
    struct mc_proto_key key = {x->victim, strlen(x->victim)};
    struct mc_proto_key prefix = {x->victim, 1};
    struct mc_master_ref ref = {
        .key = x->victim, .key_len = strlen(x->victim), .version = 1, .node = x->a1_node};
    struct mc_master_put_req put = {.key = "hostile/put",
                                    .key_len = 11,
                                    .size = 4096,
                                    .replicas = 1,
                                    .writer = x->a1_node,
                                    .preferred = MC_MASTER_NODE_NONE};
    size_t len = 0;
    int rc = MC_ERR_INVALID;

    switch (type) {
    case MC_WIRE_HELLO: /* a wrong token */
        return t_hp_hello("not-the-token", T_HP_NAME, buf, cap);
    case MC_WIRE_MOUNT: {
        const void *addr;
        size_t alen;
        struct mc_proto_mount_req m = {
            .seg = {.node = x->a1_node, .kind = 0, .base = 4096, .size = 64u << 20}};

        mc_ucx_address(t_hp_u, &addr, &alen);
        m.worker_addr = (struct mc_proto_bytes){addr, alen};
        rc = mc_proto_mount_req_encode(&m, buf, cap, &len);
        break;
    }
    case MC_WIRE_HEARTBEAT: {
        struct mc_proto_heartbeat_req m = {x->a1_node, MC_PROTO_HEARTBEAT_F_LEAVE};

        rc = mc_proto_heartbeat_req_encode(&m, buf, cap, &len);
        break;
    }
    case MC_WIRE_PUT_START_BATCH: {
        struct mc_proto_put_start_req m = {x->a1_node, 1};

        rc = mc_proto_put_start_req_encode(&m, &put, buf, cap, &len);
        break;
    }
    case MC_WIRE_PUT_END_BATCH:
    case MC_WIRE_PUT_REVOKE_BATCH: {
        struct mc_proto_ref_req m = {x->a1_node, 1};

        rc = type == MC_WIRE_PUT_END_BATCH
                 ? mc_proto_put_end_req_encode(&m, &ref, buf, cap, &len)
                 : mc_proto_put_revoke_req_encode(&m, &ref, buf, cap, &len);
        break;
    }
    case MC_WIRE_GET_BATCH: {
        struct mc_proto_keys_req m = {x->a1_node, 0, 1};

        rc = mc_proto_get_req_encode(&m, &key, buf, cap, &len);
        break;
    }
    case MC_WIRE_LEASE_RELEASE_BATCH: {
        struct mc_proto_ref_req m = {x->a1_node, 1};

        rc = mc_proto_lease_release_req_encode(&m, &ref, buf, cap, &len);
        break;
    }
    case MC_WIRE_EXIST_BATCH: {
        struct mc_proto_keys_req m = {x->a1_node, MC_PROTO_EXIST_F_STAT, 1};

        rc = mc_proto_exist_req_encode(&m, &key, buf, cap, &len);
        break;
    }
    case MC_WIRE_REMOVE_BATCH: { /* every key starting like the victim's */
        struct mc_proto_keys_req m = {x->a1_node, MC_PROTO_REMOVE_F_PREFIX, 1};

        rc = mc_proto_remove_req_encode(&m, &prefix, buf, cap, &len);
        break;
    }
    case MC_WIRE_FENCE: {
        struct mc_proto_fence_req m = {1};
        struct mc_proto_fence_item it = {x->a1_seg, 0, 1};

        rc = mc_proto_fence_req_encode(&m, &it, buf, cap, &len);
        break;
    }
    case MC_WIRE_CLUSTER_INFO: { /* everything: segments (addresses, rkeys), nodes, stats */
        struct mc_proto_info_req m = {MC_PROTO_INFO_F_KNOWN, 0, MC_PROTO_SEG_PAGE_MAX, 0,
                                      MC_PROTO_NODE_PAGE_MAX};

        rc = mc_proto_info_req_encode(&m, buf, cap, &len);
        break;
    }
    case MC_WIRE_WRITE: { /* a bulk header sent as an RPC */
        struct mc_peer_write_hdr m = {x->a1_seg, 0, 1, 0, 4096, {(const uint8_t *)"k", 1},
                                      {NULL, 0}};

        rc = mc_peer_write_hdr_encode(&m, buf, cap, &len);
        break;
    }
    case MC_WIRE_READ: { /* the start of a1's segment */
        struct mc_peer_read_req m = {77, x->a1_seg, 0, 1, 0, 1u << 20, 0};

        rc = mc_peer_read_req_encode(&m, buf, cap, &len);
        break;
    }
    case MC_WIRE_READ_BATCH: { /* the start of a1's segment, twice */
        struct mc_peer_read_req m[2] = {{78, x->a1_seg, 0, 1, 0, 1u << 20, 0},
                                        {79, x->a1_seg, 0, 1, 1u << 20, 4096, 0}};

        rc = mc_peer_read_batch_encode(m, 2, buf, cap, &len);
        break;
    }
    case MC_WIRE_LIST: {
        struct mc_proto_list_req m = {x->a1_node, MC_PROTO_LIST_MAX, 0, {NULL, 0}};

        rc = mc_proto_list_req_encode(&m, buf, cap, &len);
        break;
    }
    case MC_WIRE_DRAIN: { /* draining a node without the token */
        struct mc_proto_drain_req m = {1, {(const uint8_t *)"a1", 2}};

        rc = mc_proto_drain_req_encode(&m, buf, cap, &len);
        break;
    }
    case MC_WIRE_RESTORE_BATCH: { /* a forged newer version of the victim in a1's segment */
        struct mc_proto_ref_req m = {x->a1_node, 1};
        struct mc_master_restore_req it = {.key = x->victim, .key_len = strlen(x->victim),
                                           .seg = x->a1_seg, .offset = x->a1_seg_size - 4096,
                                           .alloc_len = 4096, .size = 4096,
                                           .version = UINT64_MAX / 2};

        rc = mc_proto_restore_req_encode(&m, &it, buf, cap, &len);
        break;
    }
    case MC_WIRE_RESTORE_DONE: { /* ending a1's restore for it */
        struct mc_proto_ref_req m = {x->a1_node, 1};

        rc = mc_proto_restore_done_req_encode(&m, &x->a1_seg, buf, cap, &len);
        break;
    }
    case MC_WIRE_COPY: { /* a forged copy: never from the master's endpoint */
        struct mc_proto_copy_req m = {.id = 1, .version = 1, .len = 4096, .dst_node = 1,
                                      .key = {(const uint8_t *)x->victim, strlen(x->victim)}};

        rc = mc_proto_copy_req_encode(&m, buf, cap, &len);
        break;
    }
    case MC_WIRE_PUBLISH: { /* a forged publication: the owner would report it */
        struct mc_proto_publish_item it = {.seg = x->a1_seg, .alloc_len = 4096, .size = 1,
                                           .version = 1,
                                           .key = {(const uint8_t *)x->victim,
                                                   strlen(x->victim)}};

        rc = mc_proto_publish_req_encode(1, &it, buf, cap, &len);
        break;
    }
    case MC_WIRE_DROP: { /* a forged drop: never from the master's endpoint */
        struct mc_proto_drop_item it = {.seg = x->a1_seg, .offset = 0, .version = 1};

        rc = mc_proto_drop_req_encode(1, &it, buf, cap, &len);
        break;
    }
    default:
        break;
    }
    ck_assert_msg(rc == 0, "encoding request %u: %s", type, mc_strerror(rc));
    return len;
}

/* A frame on the wire: header + payload, with the header's fields as given. */
static size_t t_hp_frame(uint16_t type, uint64_t id, uint32_t payload_len, uint32_t flags,
                         const void *pl, size_t len, uint8_t *buf, size_t cap)
{
    struct mc_wire_hdr h;

    ck_assert_uint_le(MC_WIRE_HDR_SIZE + len, cap);
    mc_wire_hdr_init(&h, type, id, payload_len, flags);
    /* the encoder refuses what the decoder would: write the fields by hand */
    buf[0] = (uint8_t)h.magic, buf[1] = (uint8_t)(h.magic >> 8);
    buf[2] = (uint8_t)(h.magic >> 16), buf[3] = (uint8_t)(h.magic >> 24);
    buf[4] = (uint8_t)h.version, buf[5] = (uint8_t)(h.version >> 8);
    buf[6] = (uint8_t)type, buf[7] = (uint8_t)(type >> 8);
    for (int i = 0; i < 8; i++)
        buf[8 + i] = (uint8_t)(id >> (8 * i));
    for (int i = 0; i < 4; i++) {
        buf[16 + i] = (uint8_t)(payload_len >> (8 * i));
        buf[20 + i] = (uint8_t)(flags >> (8 * i));
    }
    if (len > 0)
        memcpy(buf + MC_WIRE_HDR_SIZE, pl, len);
    return MC_WIRE_HDR_SIZE + len;
}

/* The daemon answers this request with a status-only reply: `want`, or (want 0) an error. */
static void t_hp_refused(struct t_hp_target *t, uint16_t type, const void *pl, size_t len,
                         int want, const char *what)
{
    struct t_hp_call c;
    int rc = t_hp_call(t->ep, type, pl, len, &c), st;

    ck_assert_msg(rc == 0, "%s: %s (type %u, %zu bytes): the call failed: %s", t->what, what,
                  type, len, mc_strerror(rc));
    ck_assert_msg(c.len == 4, "%s: %s (type %u, %zu bytes): a reply of %zu bytes", t->what,
                  what, type, len, c.len);
    st = t_le32(c.reply);
    if (want != 0)
        ck_assert_msg(st == want, "%s: %s (type %u, %zu bytes): status %d (%s), not %s",
                      t->what, what, type, len, st, mc_strerror(st), mc_strerror(want));
    else
        ck_assert_msg(st < 0 && mc_proto_status_is_valid(st, false),
                      "%s: %s (type %u, %zu bytes): status %d", t->what, what, type, len, st);
}

/* The daemon closed t's endpoint after refusing it: a call on it fails (within the
 * wait: the close reaches us a moment after the answer), never succeeds. */
static void t_hp_closed(struct t_hp_target *t)
{
    uint64_t deadline = mc_ucx_now_ms() + T_HP_CALL_MS;
    struct t_hp_call c;
    int rc;

    do {
        rc = t_hp_call(t->ep, MC_WIRE_HEARTBEAT, "", 0, &c);
    } while (rc == 0 && mc_ucx_now_ms() < deadline);
    ck_assert_msg(rc != 0, "%s: a refused endpoint stayed open", t->what);
}

/*
 * The daemon is alive and answers a new endpoint: an unauthenticated one (MC_ERR_DENIED),
 * or, once the phase with the token began, one that passes HELLO first (a heartbeat for
 * nobody's node: refused). Not an unauthenticated endpoint after we held authenticated ones
 * there: it may get the address of one UCX dropped and inherit its entry
 * (test_hostile_peer_inherits_no_authentication).
 */
static void t_hp_serving(struct t_hp_target *t, struct t_hp_ctx *x, bool auth)
{
    struct mc_proto_heartbeat_req hb = {UINT32_MAX - 1, 0};
    uint8_t buf[256];
    size_t len;

    ck_assert_msg(t_alive(t->pid), "%s died", t->what);
    if (auth) {
        t_hp_auth(t, x);
        ck_assert_int_eq(mc_proto_heartbeat_req_encode(&hb, buf, sizeof(buf), &len), 0);
        t_hp_refused(t, MC_WIRE_HEARTBEAT, buf, len, 0, "liveness");
        return;
    }
    len = t_hp_payload(x, MC_WIRE_CLUSTER_INFO, buf, sizeof(buf));
    t_hp_fresh(t);
    t_hp_refused(t, MC_WIRE_CLUSTER_INFO, buf, len, MC_ERR_DENIED, "liveness");
}

struct t_hp_bulk {
    bool done;
    int status;
};

static void t_hp_bulk_sent(void *ctx, int status)
{
    struct t_hp_bulk *b = ctx;

    b->status = status;
    b->done = true;
}

struct t_hp_bcall {
    bool replied, data_done;
    int status;
};

static void t_hp_bcall_replied(void *ctx, int status, const struct mc_wire_hdr *h,
                               const void *pl, size_t len)
{
    struct t_hp_bcall *b = ctx;
    struct mc_proto_status_rep rep;

    (void)h;
    if (status == 0)
        status = mc_proto_status_rep_decode(pl, len, &rep) == 0 ? rep.status : MC_ERR_PROTO;
    b->status = status;
    b->replied = true;
}

static void t_hp_bcall_data(void *ctx, int status)
{
    struct t_hp_bcall *b = ctx;

    (void)status;
    b->data_done = true;
}

/* A bulk transfer the receiver must refuse. A WRITE goes as the daemons send it, a call
 * the receiver answers: refused, it ends with an error, whether its bytes went by rendezvous
 * (the send fails) or eagerly (they left with the header: the answer says so). Other types
 * are plain sends, by rendezvous here: the send ends with an error. */
static void t_hp_bulk_refused(struct t_hp_target *t, uint16_t type, uint64_t id,
                              const void *hdr, size_t hdr_len, const void *data, size_t len,
                              const char *what)
{
    uint64_t deadline = t_now_ms() + T_HP_CALL_MS;

    if (type == MC_WIRE_WRITE) {
        struct t_hp_bcall b = {0};
        int rc = mc_ucx_send_bulk_call(t->ep, type, hdr, hdr_len, data, len,
                                       mc_ucx_now_ms() + T_HP_CALL_MS, t_hp_bcall_replied,
                                       t_hp_bcall_data, &b);

        (void)id;
        if (rc != 0)
            return; /* refused before it left: fine */
        while (!(b.replied && b.data_done) && t_now_ms() < deadline + 1000)
            t_hp_turn(5);
        ck_assert_msg(b.replied && b.data_done, "%s: %s: the WRITE call never ended", t->what,
                      what);
        ck_assert_msg(b.status != 0 && b.status != MC_ERR_TIMEOUT,
                      "%s: %s: a WRITE of %zu bytes was %s", t->what, what, len,
                      b.status == 0 ? "taken" : "never answered");
    } else {
        struct t_hp_bulk b = {0};
        int rc = mc_ucx_send_bulk(t->ep, type, id, hdr, hdr_len, data, len, t_hp_bulk_sent, &b);

        if (rc != 0)
            return; /* refused before it left: fine */
        while (!b.done && t_now_ms() < deadline)
            t_hp_turn(5);
        ck_assert_msg(b.done, "%s: %s: the bulk send never ended", t->what, what);
        ck_assert_msg(b.status != 0, "%s: %s: a bulk transfer of %zu bytes was taken", t->what,
                      what, len);
    }
}

/* every request type of wire.h: the master's, the agents' (WRITE as an RPC, READ,
 * READ_BATCH) */
static const uint16_t t_hp_types[] = {
    MC_WIRE_HELLO,         MC_WIRE_MOUNT,
    MC_WIRE_HEARTBEAT,     MC_WIRE_PUT_START_BATCH,
    MC_WIRE_PUT_END_BATCH, MC_WIRE_PUT_REVOKE_BATCH,
    MC_WIRE_GET_BATCH,     MC_WIRE_LEASE_RELEASE_BATCH,
    MC_WIRE_EXIST_BATCH,   MC_WIRE_REMOVE_BATCH,
    MC_WIRE_FENCE,         MC_WIRE_CLUSTER_INFO,
    MC_WIRE_WRITE,         MC_WIRE_READ,
    MC_WIRE_LIST,          MC_WIRE_DRAIN,
    MC_WIRE_COPY,          MC_WIRE_RESTORE_BATCH,
    MC_WIRE_PUBLISH,       MC_WIRE_DROP,
    MC_WIRE_RESTORE_DONE,  MC_WIRE_READ_BATCH,
};
#define T_HP_NTYPES (sizeof(t_hp_types) / sizeof(t_hp_types[0]))
static_assert(T_HP_NTYPES == (MC_WIRE__COUNT - 1) / 2, "a request type is missing here");

/* Every request type, well-formed, on an endpoint without (valid) HELLO: MC_ERR_DENIED, a
 * status and nothing else (no segment, address or rkey); no READ data arrives. A daemon
 * closes an endpoint it refused (one it accepted through its listener), so each goes on a
 * new one. */
static void t_hp_every_request_denied(struct t_hp_target *t, const struct t_hp_ctx *x)
{
    uint8_t buf[8192];

    for (size_t i = 0; i < T_HP_NTYPES; i++) {
        size_t len = t_hp_payload(x, t_hp_types[i], buf, sizeof(buf));

        if (i > 0)
            t_hp_fresh(t);
        t_hp_refused(t, t_hp_types[i], buf, len, MC_ERR_DENIED, "unauthenticated request");
    }
    t_hp_spin(T_HP_QUIET_MS);
    ck_assert_msg(t_hp_bulk_in == 0, "%s: bytes reached an unauthenticated peer", t->what);
}

/* t_hp_refused, on a new endpoint when `fresh` (a daemon closes an endpoint it refused
 * before HELLO, so each such request needs its own). */
static void t_hp_refused_on(struct t_hp_target *t, bool fresh, uint16_t type, const void *pl,
                            size_t len, int want, const char *what)
{
    if (fresh)
        t_hp_fresh(t);
    t_hp_refused(t, type, pl, len, want, what);
}

/* Valid headers with garbage payloads and with every truncation of a valid payload; then a
 * payload of the largest size a frame may have. All answered with a status only: `want` (0:
 * any error) except HELLO, which is MC_ERR_PROTO until it decodes. */
static void t_hp_bad_payloads(struct t_hp_target *t, const struct t_hp_ctx *x, struct t_rng *r,
                              int want)
{
    uint8_t buf[8192], junk[600];
    const bool unauth = want == MC_ERR_DENIED; /* each refusal closes the endpoint */

    for (size_t i = 0; i < T_HP_NTYPES; i++) {
        uint16_t type = t_hp_types[i];
        size_t len = t_hp_payload(x, type, buf, sizeof(buf));
        int w = type == MC_WIRE_HELLO ? MC_ERR_PROTO : want;

        for (size_t cut = 0; cut < len; cut++)
            t_hp_refused_on(t, unauth, type, buf, cut, w, "truncated payload");
        for (int k = 0; k < 8; k++) {
            size_t n = (size_t)t_rng_below(r, sizeof(junk));

            t_rng_bytes(r, junk, n);
            t_hp_refused_on(t, unauth, type, junk, n, w, "garbage payload");
        }
        /* the right shape with a huge count or blob length where the first one is (only
         * without HELLO: for a token holder some of these are valid requests) */
        memcpy(junk, buf, len < sizeof(junk) ? len : sizeof(junk));
        if (want != 0 && len >= 8 && len <= sizeof(junk)) {
            /* (a HELLO's second word is token bytes: refused, by the token or the shape) */
            memset(junk + 4, 0xff, 4);
            t_hp_refused_on(t, unauth, type, junk, len, type == MC_WIRE_HELLO ? 0 : want, "huge count");
            memcpy(junk, buf, len);
            memset(junk, 0xff, 4);
            t_hp_refused_on(t, unauth, type, junk, len, w, "huge first field");
        }
    }
    {
        uint8_t *big = malloc(MC_WIRE_PAYLOAD_MAX);

        ck_assert_ptr_nonnull(big);
        t_rng_bytes(r, big, MC_WIRE_PAYLOAD_MAX);
        t_hp_refused_on(t, unauth, MC_WIRE_GET_BATCH, big, MC_WIRE_PAYLOAD_MAX, want, "4 MiB of garbage");
        free(big);
    }
}

/* Raw frames, each on an endpoint of its own (the receiver cuts a peer off at its first bad
 * frame, so a second one on the same endpoint would test nothing). */
struct t_hp_sender {
    struct t_hp_target *t;
    struct t_hp_ctx *x;
    bool auth; /* each endpoint passes HELLO first */
    unsigned sent;
};

/*
 * Sends one frame on a new endpoint: after a HELLO (auth), or as the endpoint's very first
 * message (half of the others right after a refused request on an endpoint of its own,
 * which the daemon closed). Every T_HP_PROBE_EVERY-th frame that the wire decoder must
 * refuse (fatal), and every one it must let through, is followed by a request on the same
 * endpoint: behind a refused frame it is never answered (the endpoint failed: it "drops
 * everything it receives after", ucx.h), so the frame did reach the daemon and was judged;
 * behind a harmless one it is answered (refused) as usual.
 */
static void t_hp_send_frame(struct t_hp_sender *s, const void *frame, size_t n, bool fatal)
{
    struct mc_proto_heartbeat_req hb = {UINT32_MAX - 1, 0}; /* nobody's node: refused */
    struct t_hp_target *t = s->t;
    struct t_hp_call c;
    uint8_t pb[64];
    size_t plen;
    int rc;

    ck_assert_int_eq(mc_proto_heartbeat_req_encode(&hb, pb, sizeof(pb), &plen), 0);
    s->sent++;
    t_hp_frames++;
    if (s->auth) {
        t_hp_auth(t, s->x);
    } else {
        t_hp_fresh(t);
        if (s->sent % 2 == 0) {
            t_hp_refused(t, MC_WIRE_HEARTBEAT, pb, plen, MC_ERR_DENIED, "before a bad frame");
            t_hp_fresh(t); /* the daemon closed the endpoint it refused */
        }
    }
    rc = mc_ucx_send_raw_frame(t->ep, frame, n);
    ck_assert_msg(rc == 0, "%s: sending a raw frame: %s", t->what, mc_strerror(rc));
    if (!fatal) {
        t_hp_refused(t, MC_WIRE_HEARTBEAT, pb, plen, 0, "behind a harmless frame");
    } else if (s->sent % T_HP_PROBE_EVERY == 0) {
        t_hp_probes++;
        memset(&c, 0, sizeof(c));
        rc = mc_ucx_rpc_call(t->ep, MC_WIRE_HEARTBEAT, pb, plen,
                             mc_ucx_now_ms() + T_HP_PROBE_MS, t_hp_call_done, &c, NULL);
        while (rc == 0 && !c.done)
            t_hp_turn(5);
        ck_assert_msg(rc != 0 || c.status != 0,
                      "%s: a request behind a bad frame (%zu bytes: %02x %02x %02x %02x ...) "
                      "was answered",
                      t->what, n, n > 0 ? ((const uint8_t *)frame)[0] : 0,
                      n > 1 ? ((const uint8_t *)frame)[1] : 0,
                      n > 2 ? ((const uint8_t *)frame)[2] : 0,
                      n > 3 ? ((const uint8_t *)frame)[3] : 0);
    } else if (s->sent % 32 == 0) {
        t_hp_spin(1);
    }
}

/*
 * Frames the wire decoder must refuse: every request's valid frame truncated at every
 * length (in the middle of long ones every 17th), random bytes, random bytes behind a valid
 * magic and version, reply, bulk and unknown flags, unknown types and versions, length
 * fields that lie (up to UINT32_MAX); and one it lets through, a reply nobody asked for.
 * With `auth`, each endpoint passes HELLO first.
 */
static void t_hp_bad_frames(struct t_hp_target *t, struct t_hp_ctx *x, struct t_rng *r,
                            bool auth)
{
    uint8_t pl[8192], frame[8192 + MC_WIRE_HDR_SIZE];
    struct t_hp_sender snd = {t, x, auth, 0};

#define T_HP_SEND(buf, n) t_hp_send_frame(&snd, (buf), (n), true)

    for (size_t i = 0; i < T_HP_NTYPES; i++) {
        size_t len = t_hp_payload(x, t_hp_types[i], pl, sizeof(pl));
        size_t flen =
            t_hp_frame(t_hp_types[i], 1 + i, (uint32_t)len, 0, pl, len, frame, sizeof(frame));

        /* every length below the whole frame: short headers, lying payload lengths */
        for (size_t cut = 0; cut < flen; cut++) {
            if (cut > 96 && cut + 96 < flen && cut % 17 != 0)
                continue; /* long frames (MOUNT carries an address): every 17th in the middle */
            T_HP_SEND(frame, cut);
        }
        /* the header's length lies: too long, the maximum plus one, UINT32_MAX */
        flen =
            t_hp_frame(t_hp_types[i], 1, (uint32_t)len + 1, 0, pl, len, frame, sizeof(frame));
        T_HP_SEND(frame, flen);
        flen = t_hp_frame(t_hp_types[i], 1, MC_WIRE_PAYLOAD_MAX + 1, 0, pl, len, frame,
                          sizeof(frame));
        T_HP_SEND(frame, flen);
        flen = t_hp_frame(t_hp_types[i], 1, UINT32_MAX, 0, pl, len, frame, sizeof(frame));
        T_HP_SEND(frame, flen);
        /* flags: a request marked as a reply, a bulk header on the RPC path, unknown bits */
        flen = t_hp_frame(t_hp_types[i], 1, (uint32_t)len, MC_WIRE_F_REPLY, pl, len, frame,
                          sizeof(frame));
        T_HP_SEND(frame, flen);
        flen = t_hp_frame(t_hp_types[i], 1, (uint32_t)len, MC_WIRE_F_BULK, pl, len, frame,
                          sizeof(frame));
        T_HP_SEND(frame, flen);
        flen = t_hp_frame(t_hp_types[i], 1, (uint32_t)len, 0x80000000u, pl, len, frame,
                          sizeof(frame));
        T_HP_SEND(frame, flen);
        /* its reply type, as if answering a call the daemon never made: dropped */
        flen = t_hp_frame((uint16_t)(t_hp_types[i] + 1), t_rng_next(r), (uint32_t)len,
                          MC_WIRE_F_REPLY, pl, len, frame, sizeof(frame));
        t_hp_send_frame(&snd, frame, flen, false);
    }
    /* unknown types, a wrong version */
    for (uint32_t type = MC_WIRE__COUNT; type < MC_WIRE__COUNT + 4; type++) {
        size_t flen = t_hp_frame((uint16_t)type, 1, 0, 0, NULL, 0, frame, sizeof(frame));

        T_HP_SEND(frame, flen);
    }
    {
        size_t flen = t_hp_frame(0, 1, 0, 0, NULL, 0, frame, sizeof(frame));

        T_HP_SEND(frame, flen);
        flen = t_hp_frame(0xffff, 1, 0, 0, NULL, 0, frame, sizeof(frame));
        T_HP_SEND(frame, flen);
        flen = t_hp_frame(MC_WIRE_HEARTBEAT, 1, 0, 0, NULL, 0, frame, sizeof(frame));
        frame[4] = MC_WIRE_VERSION + 1;
        T_HP_SEND(frame, flen);
    }
    /* random bytes, and random bytes behind a valid magic and version */
    for (int k = 0; k < T_HP_RANDOM; k++) {
        size_t n = (size_t)t_rng_below(r, 2048);

        t_rng_bytes(r, frame, n);
        if (k % 2 == 1 && n >= 8) {
            t_hp_frame(MC_WIRE_HEARTBEAT, 0, 0, 0, NULL, 0, pl, sizeof(pl));
            memcpy(frame, pl, 6);
        }
        T_HP_SEND(frame, n);
    }
#undef T_HP_SEND
    t_hp_spin(T_HP_QUIET_MS);
}

/* A page of the cluster as seen through agent a1 (mcctl cluster). */
static json_t *t_hp_cluster(const char *sock)
{
    json_t *j = t_cluster_json(sock);

    ck_assert_ptr_nonnull(j);
    return j;
}

/* The cluster lists agents a1 and a2, alive, with one segment each and no other segment;
 * any other node is our token-holding identity, gone (state dead, no segment). */
static void t_hp_only_agents(const char *sock, bool allow_self)
{
    json_t *j = t_hp_cluster(sock), *nodes = json_object_get(j, "nodes");
    json_t *segs = json_object_get(j, "segments");
    int live = 0;

    for (size_t i = 0; i < json_array_size(nodes); i++) {
        json_t *n = json_array_get(nodes, i);
        const char *name = t_json_str(n, "name");

        if (strcmp(name, "a1") == 0 || strcmp(name, "a2") == 0) {
            ck_assert_str_eq(t_json_str(n, "state"), "alive");
            ck_assert_int_eq(t_json_int(n, "segments"), 1);
            live++;
            continue;
        }
        ck_assert_msg(allow_self && strcmp(name, T_HP_NAME) == 0,
                      "the cluster lists a node named '%s'", name);
        ck_assert_str_eq(t_json_str(n, "state"), "dead");
        ck_assert_int_eq(t_json_int(n, "segments"), 0);
    }
    ck_assert_int_eq(live, 2);
    ck_assert_int_eq(json_array_size(segs), 2);
    for (size_t i = 0; i < json_array_size(segs); i++) {
        json_int_t node = t_json_int(json_array_get(segs, i), "node");

        ck_assert(t_json_find_int(j, "nodes", "id", node) != NULL);
        ck_assert(strcmp(t_json_str(t_json_find_int(j, "nodes", "id", node), "name"),
                         T_HP_NAME) != 0);
    }
    json_decref(j);
}

static void t_hp_get_check(const char *sock, const char *key, const uint8_t *want, size_t len)
{
    mc_client_t *c;
    uint8_t *out = malloc(len + 1);
    size_t got = 0;
    int err;

    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(mc_connect(sock, &c), 0);
    err = mc_get(c, key, out, len + 1, &got);
    ck_assert_msg(err == 0, "get %s through %s: %s", key, sock, mc_strerror(err));
    ck_assert_uint_eq(got, len);
    ck_assert_msg(memcmp(out, want, len) == 0, "%s changed", key);
    mc_close(c);
    free(out);
}

static void t_hp_target_init(struct t_hp_target *t, const char *what, const struct t_proc *p,
                             bool master)
{
    char hostport[64];
    int rc;

    memset(t, 0, sizeof(*t));
    snprintf(t->what, sizeof(t->what), "%s", what);
    t->pid = p->pid;
    t->master = master;
    snprintf(hostport, sizeof(hostport), "127.0.0.1:%u", p->port);
    rc = mc_boot_fetch(hostport, T_HP_CALL_MS, t->addr, sizeof(t->addr), &t->addr_len);
    ck_assert_msg(rc == 0, "bootstrap of %s at %s: %s", what, hostport, mc_strerror(rc));
}

START_TEST(test_hostile_peer_malformed_messages)
{
    static const char *const mm_cfg[] = {"MM_ERROR_HANDLING=y", NULL};
    /* transfers up to 128 KiB go eagerly, as the daemons send them: the bytes arrive with
     * the header, before anyone looked at it */
    struct mc_ucx_params up = {.name = "t-hostile-peer", .config = mm_cfg,
                               .bulk_eager_max = 128u << 10};
    const size_t vlen = 256u << 10;
    struct t_proc master = {0}, a1 = {0}, a2 = {0};
    struct t_hp_target tm, ta;
    struct t_hp_ctx x = {.victim = "victim/object"};
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    uint8_t *victim = malloc(vlen), *after = malloc(1u << 20), buf[4096];
    struct t_rng rng;
    uint64_t t0 = t_now_ms(), seed;
    char dir[256];
    mc_client_t *c;
    json_t *j, *n, *s;
    int rc;

    t_fill_random((uint8_t *)&seed, sizeof(seed));
    t_rng_seed(&rng, seed);
    t_mkdtemp(dir, sizeof(dir));
    t_random_token(x.token, sizeof(x.token));
    t_master_start(&master, dir, x.token);
    t_agent_start(&a1, dir, master.port, "a1", NULL, "64M", x.token, NULL);
    t_agent_start(&a2, dir, master.port, "a2", NULL, "64M", x.token, NULL);

    /* both agents mounted; a victim object with a replica on each */
    for (uint64_t deadline = t_now_ms() + T_READY_MS;; t_poll_pause()) {
        j = t_hp_cluster(a1.sock);
        if (json_array_size(json_object_get(j, "segments")) == 2)
            break;
        json_decref(j);
        ck_assert_msg(t_now_ms() < deadline, "the agents never both mounted");
    }
    n = t_json_find_str(j, "nodes", "name", "a1");
    ck_assert_ptr_nonnull(n);
    x.a1_node = (uint32_t)t_json_int(n, "id");
    s = t_json_find_int(j, "segments", "node", x.a1_node);
    ck_assert_ptr_nonnull(s);
    x.a1_seg = (uint32_t)t_json_int(s, "id");
    x.a1_seg_size = (uint64_t)t_json_int(s, "capacity");
    json_decref(j);
    t_hp_only_agents(a1.sock, false);
    ck_assert_ptr_nonnull(victim);
    ck_assert_ptr_nonnull(after);
    t_fill_random(victim, vlen);
    o.replicas = 2;
    ck_assert_int_eq(mc_connect(a1.sock, &c), 0);
    ck_assert_int_eq(mc_put(c, x.victim, victim, vlen, &o), 0);
    mc_close(c);

    /* the hostile peer: its own worker, addresses from the bootstrap ports */
    ck_assert_int_eq(mc_ucx_create(&up, &t_hp_u), 0);
    mc_ucx_bulk_register(t_hp_u, t_hp_bulk_dest, t_hp_bulk_done, NULL);
    mc_ucx_rpc_register(t_hp_u, t_hp_on_request, NULL);
    t_hp_target_init(&tm, "mc-master", &master, true);
    t_hp_target_init(&ta, "mc-agent a1", &a1, false);

    /* 1: without HELLO, after a wrong-token and an empty-token HELLO: every request is
     * refused with a bare MC_ERR_DENIED */
    for (int i = 0; i < 2; i++) {
        struct t_hp_target *t = i == 0 ? &tm : &ta;
        size_t len;

        t_hp_fresh(t);
        t_hp_every_request_denied(t, &x);
        /* a refused HELLO closes its endpoint (each refusal does): what follows goes on a
         * new one, and is refused all the same */
        t_hp_fresh(t);
        len = t_hp_hello("not-the-token", T_HP_NAME, buf, sizeof(buf));
        t_hp_refused(t, MC_WIRE_HELLO, buf, len, MC_ERR_DENIED, "wrong token");
        t_hp_closed(t);
        t_hp_fresh(t);
        t_hp_every_request_denied(t, &x);
        t_hp_fresh(t);
        len = t_hp_hello("", T_HP_NAME, buf, sizeof(buf));
        t_hp_refused(t, MC_WIRE_HELLO, buf, len, MC_ERR_DENIED, "empty token");
        t_hp_closed(t);
        t_hp_fresh(t);
        t_hp_every_request_denied(t, &x);
        t_hp_fresh(t);
        len = t_hp_hello(x.token, T_HP_NAME, buf, sizeof(buf));
        len -= 1; /* the right token but one byte short of a whole HELLO */
        t_hp_refused(t, MC_WIRE_HELLO, buf, len, MC_ERR_PROTO, "truncated HELLO");
        t_hp_fresh(t);
        t_hp_every_request_denied(t, &x);
    }

    /* 2: bulk transfers from nobody: a WRITE over a1's whole segment, a READ_REPLY for a
     * read never asked, WRITEs to the master; all refused, the victim untouched */
    {
        struct mc_peer_write_hdr wh = {
            x.a1_seg, 0, 1, 0, x.a1_seg_size, {(const uint8_t *)x.victim, strlen(x.victim)},
            {NULL, 0}};
        uint8_t *junk = malloc(x.a1_seg_size);
        size_t hlen;

        ck_assert_ptr_nonnull(junk);
        memset(junk, 0xa5, x.a1_seg_size);
        ck_assert_int_eq(mc_peer_write_hdr_encode(&wh, buf, sizeof(buf), &hlen), 0);
        t_hp_fresh(&ta);
        t_hp_bulk_refused(&ta, MC_WIRE_WRITE, 0, buf, hlen, junk, x.a1_seg_size,
                          "unauthenticated WRITE of the whole segment");
        t_hp_bulk_refused(&ta, MC_WIRE_WRITE, 0, buf, hlen, junk, x.a1_seg_size,
                          "unauthenticated WRITE, again");
        t_hp_bulk_refused(&ta, MC_WIRE_READ_REPLY, t_rng_next(&rng), NULL, 0, junk, 1u << 20,
                          "READ_REPLY never asked for");
        t_hp_fresh(&tm);
        t_hp_bulk_refused(&tm, MC_WIRE_WRITE, 0, buf, hlen, junk, 1u << 20,
                          "WRITE to the master");
        /* eagerly, the bytes with the header: refused all the same, nothing lands */
        for (uint64_t off = 0; off < x.a1_seg_size && off < (1u << 20); off += 64u << 10) {
            wh.offset = off;
            wh.len = 64u << 10;
            ck_assert_int_eq(mc_peer_write_hdr_encode(&wh, buf, sizeof(buf), &hlen), 0);
            t_hp_fresh(&ta);
            t_hp_bulk_refused(&ta, MC_WIRE_WRITE, 0, buf, hlen, junk, 64u << 10,
                              "unauthenticated WRITE of 64 KiB, eagerly");
        }
        free(junk);
        t_hp_get_check(a1.sock, x.victim, victim, vlen);
        t_hp_get_check(a2.sock, x.victim, victim, vlen);
    }

    /* 3: malformed payloads and frames without HELLO */
    for (int i = 0; i < 2; i++) {
        struct t_hp_target *t = i == 0 ? &tm : &ta;

        t_hp_fresh(t);
        t_hp_bad_payloads(t, &x, &rng, MC_ERR_DENIED);
        t_hp_serving(t, &x, false);
        t_hp_bad_frames(t, &x, &rng, false);
        t_hp_serving(t, &x, false);
    }
    t_hp_only_agents(a1.sock, false); /* nobody without the token got in */
    ck_assert(t_alive(a2.pid));

    /* 4: the same with a valid HELLO first (a token holder is trusted, but its malformed
     * messages must still be refused, not crash anything). The agent: */
    t_hp_auth(&ta, &x);
    t_hp_bad_payloads(&ta, &x, &rng, 0);
    {
        /* reads outside the segment, writes that do not fit it: refused, no byte moves */
        struct mc_peer_read_req rr[] = {
            {78, x.a1_seg + 1, 0, 1, 0, 4096, 0},
            {79, x.a1_seg, 0, 1, x.a1_seg_size, 1, 0},
            {80, x.a1_seg, 0, 1, x.a1_seg_size - 10, 11, 0},
            {81, x.a1_seg, 0, 1, UINT64_MAX - 10, 4096, 0},
            {82, x.a1_seg, 0, 1, 4096, MC_PEER_XFER_MAX, 0},
            {83, x.a1_seg, 0, 1, 0, 0, 0},
        };
        static const uint8_t tail64[64];
        struct mc_peer_write_hdr wh[] = {
            {x.a1_seg + 1, 0, 1, 0, 4096, {(const uint8_t *)"k", 1}, {NULL, 0}},
            {x.a1_seg, 0, 1, x.a1_seg_size - 100, 4096, {(const uint8_t *)"k", 1}, {NULL, 0}},
            {x.a1_seg, 0, 1, UINT64_MAX - 100, 4096, {(const uint8_t *)"k", 1}, {NULL, 0}},
            {x.a1_seg, 0, 1, 0, 8192, {(const uint8_t *)"k", 1}, {NULL, 0}}, /* len: not the bulk's */
            {x.a1_seg, 0, 1, 0, 4096, {NULL, 0}, {NULL, 0}},                 /* no key */
            /* the bytes fit the segment's end, the tail after them does not */
            {x.a1_seg, 0, 1, x.a1_seg_size - 4096, 4096, {(const uint8_t *)"k", 1}, {tail64, 64}},
        };
        uint8_t *junk = calloc(1, 8192);
        size_t len;

        ck_assert_ptr_nonnull(junk);
        /* by hand: the encoders refuse spans that wrap or exceed MC_PEER_XFER_MAX */
        for (size_t i = 0; i < sizeof(rr) / sizeof(rr[0]); i++) {
            struct mc_wire_writer w;

            mc_wire_writer_init(&w, buf, sizeof(buf));
            mc_wire_put_u64(&w, rr[i].xfer);
            mc_wire_put_u32(&w, rr[i].seg);
            mc_wire_put_u32(&w, rr[i].alloc);
            mc_wire_put_u64(&w, rr[i].version);
            mc_wire_put_u64(&w, rr[i].offset);
            mc_wire_put_u64(&w, rr[i].len);
            t_hp_refused(&ta, MC_WIRE_READ, buf, (size_t)(w.p - buf), 0,
                         "READ outside the segment");
        }
        {
            /* the same as one READ_BATCH: spans that do not wrap each get their own refusal
             * in a well-formed answer; one item that wraps refuses the whole request */
            struct mc_wire_writer w;
            struct t_hp_call c;
            size_t blen;

            ck_assert_int_eq(mc_peer_read_batch_encode(rr, 3, buf, sizeof(buf), &blen), 0);
            ck_assert_int_eq(t_hp_call(ta.ep, MC_WIRE_READ_BATCH, buf, blen, &c), 0);
            ck_assert_uint_eq(c.len, 8 + 3 * 4);
            ck_assert_int_eq(t_le32(c.reply), 0);
            ck_assert_int_eq(t_le32(c.reply + 4), 3);
            for (int i = 0; i < 3; i++)
                ck_assert_int_eq(t_le32(c.reply + 8 + 4 * i), MC_ERR_NOT_FOUND);
            mc_wire_writer_init(&w, buf, sizeof(buf));
            mc_wire_put_u32(&w, sizeof(rr) / sizeof(rr[0]));
            for (size_t i = 0; i < sizeof(rr) / sizeof(rr[0]); i++) {
                mc_wire_put_u64(&w, rr[i].xfer);
                mc_wire_put_u32(&w, rr[i].seg);
                mc_wire_put_u32(&w, rr[i].alloc);
                mc_wire_put_u64(&w, rr[i].version);
                mc_wire_put_u64(&w, rr[i].offset);
                mc_wire_put_u64(&w, rr[i].len);
            }
            t_hp_refused(&ta, MC_WIRE_READ_BATCH, buf, (size_t)(w.p - buf), MC_ERR_PROTO,
                         "READ_BATCH with a wrapping span");
        }
        for (size_t i = 0; i < sizeof(wh) / sizeof(wh[0]); i++) {
            struct mc_wire_writer w;

            mc_wire_writer_init(&w, buf, sizeof(buf));
            mc_wire_put_u32(&w, wh[i].seg);
            mc_wire_put_u32(&w, wh[i].alloc);
            mc_wire_put_u64(&w, wh[i].version);
            mc_wire_put_u64(&w, wh[i].offset);
            mc_wire_put_u64(&w, wh[i].len);
            mc_wire_put_blob(&w, wh[i].key.p, wh[i].key.len);
            if (wh[i].tail.len != 0)
                mc_wire_put_blob(&w, wh[i].tail.p, wh[i].tail.len);
            t_hp_bulk_refused(&ta, MC_WIRE_WRITE, 0, buf, (size_t)(w.p - buf), junk, 4096,
                              "WRITE outside the segment");
        }
        for (int k = 0; k < 16; k++) {
            len = (size_t)t_rng_below(&rng, 200);
            t_rng_bytes(&rng, buf, len);
            t_hp_bulk_refused(&ta, MC_WIRE_WRITE, 0, buf, len, junk, 4096, "garbage WRITE");
        }
        free(junk);
        /* FENCE is the master's: from a peer it does nothing */
        len = t_hp_payload(&x, MC_WIRE_FENCE, buf, sizeof(buf));
        t_hp_refused(&ta, MC_WIRE_FENCE, buf, len, MC_ERR_PROTO, "FENCE from a peer");
        t_hp_spin(T_HP_QUIET_MS);
        ck_assert_msg(t_hp_bulk_in == 0, "a READ outside the segment sent bytes");
    }
    t_hp_serving(&ta, &x, true);
    t_hp_bad_frames(&ta, &x, &rng, true);
    t_hp_serving(&ta, &x, true);
    /* ... and the master (we are a node now: T_HP_NAME) */
    t_hp_auth(&tm, &x);
    t_hp_bad_payloads(&tm, &x, &rng, 0);
    t_hp_serving(&tm, &x, true);
    t_hp_bad_frames(&tm, &x, &rng, true);
    t_hp_serving(&tm, &x, true);
    {
        struct mc_proto_heartbeat_req hb = {0, MC_PROTO_HEARTBEAT_F_LEAVE};
        struct t_hp_call call;
        size_t len;

        t_hp_auth(&tm, &x); /* the same name: the same node */
        hb.node = x.own_node;
        ck_assert_int_eq(mc_proto_heartbeat_req_encode(&hb, buf, sizeof(buf), &len), 0);
        ck_assert_int_eq(t_hp_call(tm.ep, MC_WIRE_HEARTBEAT, buf, len, &call), 0);
        ck_assert_int_eq(t_le32(call.reply), 0);
    }
    ck_assert_uint_eq(t_hp_bulk_in, 0);
    ck_assert_uint_eq(t_hp_requests_in, 0);
    mc_ucx_ep_close(tm.ep, true);
    mc_ucx_ep_close(ta.ep, true);
    mc_ucx_destroy(t_hp_u);
    t_hp_u = NULL;

    /* 5: everything still serves: a put through a1 read through a2, the victim intact, the
     * cluster the two agents (and our own identity, gone) */
    ck_assert(t_alive(master.pid) && t_alive(a1.pid) && t_alive(a2.pid));
    t_fill_random(after, 1u << 20);
    ck_assert_int_eq(mc_connect(a1.sock, &c), 0);
    rc = mc_put(c, "after/hostile", after, 1u << 20, NULL);
    ck_assert_msg(rc == 0, "put after the hostile peer: %s", mc_strerror(rc));
    mc_close(c);
    t_hp_get_check(a2.sock, "after/hostile", after, 1u << 20);
    t_hp_get_check(a1.sock, x.victim, victim, vlen);
    t_hp_get_check(a2.sock, x.victim, victim, vlen);
    t_hp_only_agents(a1.sock, true);
    fprintf(stderr,
            "test_hostile_peer: %" PRIu64 " requests answered with a refusal, %" PRIu64
            " raw frames each on its own endpoint (%" PRIu64 " of them checked for a cut-off), "
            "%" PRIu64 " ms\n",
            t_hp_calls, t_hp_frames, t_hp_probes, t_now_ms() - t0);

    rc = t_proc_stop(&a1);
    if (rc != 0)
        t_proc_dump_log(&a1, 8192);
    ck_assert_msg(rc == 0, "mc-agent a1 did not exit cleanly on SIGTERM (%d)", rc);
    rc = t_proc_stop(&a2);
    if (rc != 0)
        t_proc_dump_log(&a2, 8192);
    ck_assert_msg(rc == 0, "mc-agent a2 did not exit cleanly on SIGTERM (%d)", rc);
    rc = t_proc_stop(&master);
    if (rc != 0)
        t_proc_dump_log(&master, 8192);
    ck_assert_msg(rc == 0, "mc-master did not exit cleanly on SIGTERM (%d)", rc);
    free(victim);
    free(after);
    t_rmdir(dir);
}
END_TEST

/* mc-master on 127.0.0.1:0 with --set arguments; waits until ready (t_master_start takes
 * none). */
static void t_hp_master_start(struct t_proc *p, const char *dir, const char *token,
                              const char *const *sets)
{
    const char *argv[24];
    char st[48];
    int argc = 0, r;

    snprintf(p->ready, sizeof(p->ready), "%s/master.ready", dir);
    argv[argc++] = t_env_bin("MC_MASTER_BIN");
    argv[argc++] = "--listen";
    argv[argc++] = "127.0.0.1:0";
    argv[argc++] = "--ready-file";
    argv[argc++] = p->ready;
    for (int i = 0; sets != NULL && sets[i] != NULL && argc < 21; i++) {
        argv[argc++] = "--set";
        argv[argc++] = sets[i];
    }
    argv[argc] = NULL;
    t_proc_spawn(p, dir, "master", token, argv);
    r = t_proc_wait_ready(p, T_READY_MS);
    if (r != 0)
        t_proc_dump_log(p, 8192);
    ck_assert_msg(r == 0, "mc-master not ready (%s)",
                  r > 0 ? t_status_str(p->status, st, sizeof(st)) : "timeout");
}

static void t_hp_wait_segments(const char *sock, size_t n)
{
    for (uint64_t deadline = t_now_ms() + T_READY_MS;; t_poll_pause()) {
        json_t *j = t_hp_cluster(sock);
        size_t got = json_array_size(json_object_get(j, "segments"));

        json_decref(j);
        if (got == n)
            return;
        ck_assert_msg(t_now_ms() < deadline, "%zu segments mounted, not %zu", got, n);
    }
}

/*
 * An agent is killed; UCX on the master destroys the endpoint it had accepted from it (its
 * keepalive finds the peer gone) without telling mc-master, whose entry for that endpoint,
 * authenticated, stays. Endpoints of a peer without the token, opened one after another
 * meanwhile, must never be taken for it: every CLUSTER_INFO they send is refused with a
 * bare MC_ERR_DENIED (docs/decisions.md, "Accepted endpoints": a new peer's endpoint may get
 * the freed address and inherit the entry).
 */
START_TEST(test_hostile_peer_inherits_no_authentication)
{
    static const char *const mm_cfg[] = {"MM_ERROR_HANDLING=y", NULL};
    static const char *const sets[] = {"keepalive_ms=200", NULL};
    struct mc_ucx_params up = {.name = "t-hostile-peer", .config = mm_cfg};
    struct t_proc master = {0}, a1 = {0}, a3 = {0};
    struct t_hp_ctx x = {.victim = "victim/object"};
    struct t_hp_target tm, ta;
    char dir[256];
    unsigned tries = 0, agent_at = 0, master_at = 0, bulk_at = 0;
    size_t master_len = 0;
    int rc;

    t_mkdtemp(dir, sizeof(dir));
    t_random_token(x.token, sizeof(x.token));
    t_hp_master_start(&master, dir, x.token, sets);
    {
        static const char *const ka[] = {"--set", "keepalive_ms=200", NULL};

        t_agent_start(&a1, dir, master.port, "a1", NULL, "64M", x.token, ka);
        t_agent_start(&a3, dir, master.port, "a3", NULL, "64M", x.token, ka);
    }
    t_hp_wait_segments(a1.sock, 2);
    {
        /* a3 writes a replica into a1: a1 now holds an endpoint a3 authenticated */
        mc_put_opts_t o = MC_PUT_OPTS_INIT;
        static uint8_t obj[64 << 10];
        mc_client_t *c;
        json_t *j = t_hp_cluster(a1.sock);
        json_t *n = t_json_find_str(j, "nodes", "name", "a1");

        x.a1_node = (uint32_t)t_json_int(n, "id");
        x.a1_seg =
            (uint32_t)t_json_int(t_json_find_int(j, "segments", "node", x.a1_node), "id");
        json_decref(j);
        o.replicas = 2;
        t_fill_random(obj, sizeof(obj));
        ck_assert_int_eq(mc_connect(a3.sock, &c), 0);
        ck_assert_int_eq(mc_put(c, x.victim, obj, sizeof(obj), &o), 0);
        mc_close(c);
    }
    ck_assert_int_eq(mc_ucx_create(&up, &t_hp_u), 0);
    mc_ucx_bulk_register(t_hp_u, t_hp_bulk_dest, t_hp_bulk_done, NULL);
    t_hp_target_init(&tm, "mc-master", &master, true);
    t_hp_target_init(&ta, "mc-agent a1", &a1, false);

    t_proc_kill(&a3);
    /* well past the keepalives (and short of the liveness TTL, though the entries outlive
     * that too): new endpoints every few milliseconds, to a1 and to the master */
    for (uint64_t end = t_now_ms() + 4000; t_now_ms() < end; tries++) {
        uint8_t buf[256];
        size_t len = t_hp_payload(&x, MC_WIRE_READ, buf, sizeof(buf));
        uint64_t bulk = t_hp_bulk_in;
        struct t_hp_call c;

        t_hp_fresh(&ta);
        rc = t_hp_call(ta.ep, MC_WIRE_READ, buf, len, &c);
        ck_assert_msg(rc == 0, "READ: the call failed: %s", mc_strerror(rc));
        if ((c.len != 4 || t_le32(c.reply) != MC_ERR_DENIED) && agent_at == 0)
            agent_at = tries + 1;
        len = t_hp_payload(&x, MC_WIRE_CLUSTER_INFO, buf, sizeof(buf));
        t_hp_fresh(&tm);
        rc = t_hp_call(tm.ep, MC_WIRE_CLUSTER_INFO, buf, len, &c);
        ck_assert_msg(rc == 0, "CLUSTER_INFO: the call failed: %s", mc_strerror(rc));
        if ((c.len != 4 || t_le32(c.reply) != MC_ERR_DENIED) && master_at == 0) {
            master_at = tries + 1;
            master_len = c.len;
        }
        t_hp_spin(5);
        if (t_hp_bulk_in != bulk && bulk_at == 0)
            bulk_at = tries + 1;
        if (agent_at != 0 && master_at != 0)
            break;
    }
    ck_assert_msg(agent_at == 0 && master_at == 0 && bulk_at == 0,
                  "endpoints of a peer without the token, opened one after another once agent "
                  "a3 was killed, were taken for a3's: agent a1 answered READ of its segment "
                  "on endpoint %u (bytes sent: endpoint %u), mc-master answered CLUSTER_INFO "
                  "(%zu bytes: segments, worker addresses, rkeys) on endpoint %u (0: never)",
                  agent_at, bulk_at, master_len, master_at);
    fprintf(stderr, "test_hostile_peer_inherit: %u endpoints refused\n", tries);
    mc_ucx_ep_close(tm.ep, true);
    mc_ucx_ep_close(ta.ep, true);
    mc_ucx_destroy(t_hp_u);
    t_hp_u = NULL;
    ck_assert_int_eq(t_proc_stop(&a1), 0);
    ck_assert_int_eq(t_proc_stop(&master), 0);
    t_rmdir(dir);
}
END_TEST

/*
 * A peer without the token opens endpoints, is refused once on each, and closes them: as
 * many as max_peers, one after another. Then it is gone: an agent starting afterwards still
 * joins (the master's table of endpoints is not left full of records nobody will use again).
 */
START_TEST(test_hostile_peer_cannot_fill_the_master)
{
    static const char *const mm_cfg[] = {"MM_ERROR_HANDLING=y", NULL};
    static const char *const sets[] = {"max_peers=100", "keepalive_ms=200", NULL};
    struct mc_ucx_params up = {.name = "t-hostile-peer", .config = mm_cfg};
    struct t_proc master = {0}, a1 = {0};
    struct t_hp_ctx x = {.victim = "victim/object"};
    struct t_hp_target tm;
    char dir[256], st[48];
    int r;

    t_mkdtemp(dir, sizeof(dir));
    t_random_token(x.token, sizeof(x.token));
    t_hp_master_start(&master, dir, x.token, sets);
    ck_assert_int_eq(mc_ucx_create(&up, &t_hp_u), 0);
    t_hp_target_init(&tm, "mc-master", &master, true);
    for (int i = 0; i < 100; i++) {
        uint8_t buf[256];
        size_t len = t_hp_payload(&x, MC_WIRE_HEARTBEAT, buf, sizeof(buf));
        struct t_hp_call c;
        int rc;

        t_hp_fresh(&tm);
        rc = t_hp_call(tm.ep, MC_WIRE_HEARTBEAT, buf, len, &c);
        ck_assert_msg(rc == 0 && c.len == 4 && t_le32(c.reply) == MC_ERR_DENIED,
                      "endpoint %d: %s", i, mc_strerror(rc));
    }
    mc_ucx_ep_close(tm.ep, false);
    mc_ucx_destroy(t_hp_u);
    t_hp_u = NULL;
    t_hp_spin(0);
    poll(NULL, 0, 2000); /* ten keepalive intervals: the master may learn they are gone */

    t_agent_spawn(&a1, dir, master.port, "a1", NULL, "64M", x.token, NULL);
    r = t_proc_wait_ready(&a1, T_READY_MS);
    if (r != 0) {
        t_proc_dump_log(&master, 4096);
        t_proc_dump_log(&a1, 4096);
    }
    ck_assert_msg(r == 0,
                  "an agent could not join after a token-less peer opened and closed "
                  "100 endpoints (max_peers 100): %s",
                  r > 0 ? t_status_str(a1.status, st, sizeof(st)) : "not ready in time");
    ck_assert_int_eq(t_proc_stop(&a1), 0);
    ck_assert_int_eq(t_proc_stop(&master), 0);
    t_rmdir(dir);
}
END_TEST

int main(int argc, char **argv)
{
    bool gaps = argc > 1 && strcmp(argv[1], "gaps") == 0;
    Suite *s = suite_create("hostile_peer");
    TCase *tc = tcase_create(gaps ? "gaps" : "peer");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 240);
    if (gaps) {
        tcase_add_test(tc, test_hostile_peer_inherits_no_authentication);
        tcase_add_test(tc, test_hostile_peer_cannot_fill_the_master);
    } else {
        tcase_add_test(tc, test_hostile_peer_malformed_messages);
    }
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
