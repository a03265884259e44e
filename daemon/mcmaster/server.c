/*
 * The RPC front end of the master service (server.h): one poll() loop over the TCP
 * bootstrap listener, the UCX worker's event fd, a timerfd (the service tick) and a
 * signalfd (SIGTERM, SIGINT). Handlers run inside mc_ucx_progress and answer at once: the
 * service does no I/O, so nothing is deferred, but for one wait: a REMOVE that freed or
 * retired disk blocks is answered once their owners made it durable (diskdrops.h).
 *
 * Scratch arrays for one batch (requests, grants, results) and the reply buffer live in
 * the server struct, sized for MC_PROTO_BATCH_MAX items at start-up, so a request costs no
 * allocation beyond the reply copy UCX makes.
 */
#include "common/err.h"
#include "daemon/mcmaster/server.h"

#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "daemon/common/bootstrap.h"
#include "daemon/common/log.h"
#include "daemon/common/metrics.h"
#include "daemon/common/notify.h"
#include "daemon/master/exec.h"
#include "daemon/master/master.h"
#include "daemon/mcmaster/calls.h"
#include "daemon/mcmaster/diskdrops.h"
#include "daemon/mcmaster/elect.h"
#include "daemon/mcmaster/ha.h"
#include "daemon/mcmaster/mcmaster_metrics.h"
#include "daemon/proto/hold_proto.h"
#include "daemon/proto/master_proto.h"
#include "ucx_backend/ucx.h"
#include "ucx_backend/saddr.h"

#define MC_MCMASTER_LISTEN_BACKLOG 128
#define MC_MCMASTER_DRAIN_MS       200 /* at exit: time given to flush the last replies */

/* One accepted endpoint: whether it passed HELLO, and as which node. */
struct peer {
    struct mc_ucx_ep *ep;
    bool authed;
    uint64_t session; /* of the HELLO that authenticated it (ucx.h, sessions) */
    uint64_t incarnation; /* the agent process behind it, as its HELLO said */
    uint32_t node;
    bool silent;      /* a DROP to it went unanswered: no more until it speaks again */
    bool carrying; /* carries PUBLISHes over a master change (its last HELLO or HEARTBEAT) */
    struct peer *prev, *next;
};

/* What MOUNT brought along with a segment, for CLUSTER_INFO. */
struct seg_blobs {
    uint8_t *addr;
    size_t addr_len;
    uint8_t *rkey;
    size_t rkey_len;
};

struct mc_mcmaster_server {
    struct mc_master *m;
    struct mc_master_config mcfg;   /* to start a new directory with each reign */
    /* high availability (ha.h; ha.elect NULL: no etcd, this master serves alone) */
    struct mc_ha ha;
    uint64_t incarnation;           /* random per process (HELLO tells it): with the epoch,
                                       agents tell a rejoin to this directory from a new one */
    struct mc_ucx *u;
    int listen_fd, timer_fd, signal_fd;
    uint16_t port;
    char *token; /* NULL: every token is accepted (allow_no_token) */
    size_t token_len;
    uint64_t max_peers, npeers;
    uint32_t *carrying; /* carrying_nodes: the nodes of peers that carry PUBLISHes */
    size_t carrying_cap;
    struct peer *peers;
    struct seg_blobs *segs;
    size_t nsegs;
    bool stopping;
    /* metrics: the RPC counters live in mvals (counted whether served or not); the rest
     * is filled at each publication, at most every 10 ms */
    struct mc_metrics *metrics; /* NULL: metrics_listen unset */
    uint64_t metrics_pub_ms;
    uint64_t mvals[MM__COUNT];
    uint8_t mpresent[MM__COUNT];
    uint64_t last_turn_ms; /* when the loop last ran (stall detection) */
    uint64_t stall_ms;     /* a gap between two turns longer than this: we did not run */
    /* boot message: header + worker address */
    void *boot;
    size_t boot_len;
    /* per-request scratch */
    struct mc_master_put_req puts[MC_PROTO_BATCH_MAX];
    struct mc_master_put_grant grants[MC_PROTO_BATCH_MAX];
    struct mc_master_ref refs[MC_PROTO_BATCH_MAX];
    struct mc_proto_key keys[MC_PROTO_BATCH_MAX];
    struct mc_master_get_result gets[MC_PROTO_BATCH_MAX];
    struct mc_master_stat stats[MC_PROTO_BATCH_MAX];
    struct mc_proto_fence_item fences[MC_PROTO_BATCH_MAX];
    struct mc_master_restore_req restores[MC_PROTO_BATCH_MAX];
    uint32_t seg_ids[MC_PROTO_BATCH_MAX];
    struct mc_diskdrops drops; /* DROPs until answered, unanswered disk ones remembered */
    bool hold_reply;           /* the handler's reply waits for its disk DROPs' answers */
    struct mc_calls calls;     /* FENCEs and COPYs to owners */
    struct mc_proto_seg_entry seg_page[MC_PROTO_SEG_PAGE_MAX];
    struct mc_master_node_info node_info[MC_PROTO_NODE_PAGE_MAX];
    struct mc_proto_node_entry node_page[MC_PROTO_NODE_PAGE_MAX];
    int results[MC_PROTO_BATCH_MAX];
    uint64_t counts[MC_PROTO_BATCH_MAX];
    uint8_t out[MC_PROTO_PAYLOAD_MAX];
};

/* --- peers ------------------------------------------------------------------------------ */

static void peer_drop(struct mc_mcmaster_server *s, struct peer *p, bool force)
{
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        s->peers = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    s->npeers--;
    mc_diskdrops_forget_ep(&s->drops, p->ep); /* its held replies go unsent */
    mc_ucx_ep_set_user(p->ep, NULL);
    mc_ucx_ep_close(p->ep, force);
    free(p);
}

/* The endpoint's record, made on its first request; NULL when over max_peers (the endpoint
 * is then closed) or out of memory. */
static struct peer *peer_of(struct mc_mcmaster_server *s, struct mc_ucx_ep *ep)
{
    struct peer *p = mc_ucx_ep_user(ep);

    if (p != NULL)
        return p;
    if (s->npeers >= s->max_peers || (p = calloc(1, sizeof(*p))) == NULL) {
        mc_warn("refusing a new endpoint: %llu peers (max_peers)",
                (unsigned long long)s->npeers);
        mc_ucx_ep_close(ep, true);
        return NULL;
    }
    p->ep = ep;
    p->node = MC_MASTER_NODE_NONE;
    p->next = s->peers;
    if (s->peers != NULL)
        s->peers->prev = p;
    s->peers = p;
    s->npeers++;
    mc_ucx_ep_set_user(ep, p);
    return p;
}

static void on_ep_error(void *ctx, struct mc_ucx_ep *ep, int status)
{
    struct mc_mcmaster_server *s = ctx;
    struct peer *p = mc_ucx_ep_user(ep);

    if (p == NULL) {
        mc_ucx_ep_close(ep, true);
        return;
    }
    mc_info("endpoint of node %u failed: %s", p->node, mc_strerror(status));
    peer_drop(s, p, true);
}

/* --- request handlers: each decodes, calls the service and encodes the reply into s->out.
 * A non-zero return is sent as a status-only reply (every reply starts with the status
 * and carries nothing else when it is not 0). */

/* The master's answers to what this front end asked on its behalf (segment lookups for a
 * MOUNT and for fences, the fence and copy answers of owners) go through the executor too. */
static int seg_info(struct mc_mcmaster_server *s, uint32_t seg, struct mc_master_seg_info *info_p)
{
    struct mc_master_req x = {.op = MC_MASTER_OP_SEG_INFO, .u.seg_info.seg = seg};
    int rc = mc_master_exec(s->m, &x);

    if (rc == 0)
        *info_p = x.u.seg_info.info;
    return rc;
}

/* diskdrops.h's is_disk */
static bool seg_is_disk(void *ctx, uint32_t seg)
{
    struct mc_master_seg_info info;

    return seg_info(ctx, seg, &info) == 0 && info.kind == MC_SEG_DISK;
}

/* dropq.h's silent: the owner of seg did not answer a DROP (it may have died, and UCX
 * may free the endpoint it connected with by itself: calling it again before its TTL
 * declares it dead would touch freed memory). Its DROPs wait until it speaks again. */
static void drops_silent(void *ctx, uint32_t seg)
{
    struct mc_mcmaster_server *s = ctx;
    struct mc_master_seg_info info;

    if (seg_info(s, seg, &info) != 0)
        return;
    for (struct peer *p = s->peers; p != NULL; p = p->next) {
        if (p->authed && p->node == info.node)
            p->silent = true;
    }
}

/* calls.h's ep_of: the endpoint of node's authenticated agent. */
static struct mc_ucx_ep *ep_of_node(void *ctx, uint32_t node)
{
    struct mc_mcmaster_server *s = ctx;

    for (struct peer *p = s->peers; p != NULL; p = p->next) {
        if (p->authed && p->node == node)
            return p->ep;
    }
    return NULL;
}

static int drop_route(void *ctx, uint32_t seg, struct mc_ucx_ep **ep_p);
static void drops_send(struct mc_mcmaster_server *s);
static void drops_hold(struct mc_mcmaster_server *s, int rc);
static void metrics_publish(struct mc_mcmaster_server *s);

static void seg_unmount(struct mc_mcmaster_server *s, uint32_t seg)
{
    struct mc_master_req x = {.op = MC_MASTER_OP_UNMOUNT, .u.seg = seg};

    (void)mc_master_exec(s->m, &x);
}

static void copy_name(char *dst, const struct mc_proto_bytes *b)
{
    memcpy(dst, b->p, b->len); /* len <= MC_PROTO_NAME_MAX, checked by the decoder */
    dst[b->len] = '\0';
}

static int h_hello(struct mc_mcmaster_server *s, struct peer *p, const void *pl, size_t len,
                   size_t *out_len)
{
    struct mc_proto_hello_req req;
    struct mc_proto_hello_rep rep = {0};
    char name[MC_PROTO_NAME_MAX + 1], domain[MC_PROTO_NAME_MAX + 1];
    const struct mc_master_config *mcfg = mc_master_config(s->m);
    struct mc_master_req x = {.op = MC_MASTER_OP_NODE_REGISTER, .node = MC_MASTER_NODE_NONE};
    struct peer *q, *next;
    uint32_t node;
    int rc;

    if (mc_proto_hello_req_decode(pl, len, &req) != 0)
        return MC_ERR_PROTO;
    if (!mc_proto_token_equal(s->token, s->token_len, &req.token)) {
        p->authed = false;
        p->node = MC_MASTER_NODE_NONE;
        mc_warn("HELLO with a wrong cluster token refused");
        return MC_ERR_DENIED;
    }
    copy_name(name, &req.name);
    copy_name(domain, &req.domain);
    /* A name is one agent's while that agent is live: it has an endpoint here that passed
     * HELLO, has not failed, and its node still heartbeats within node_ttl_ms. Only the
     * same process (its incarnation) may take it over then, when it reconnects; any other
     * is refused, so a second agent started under a live node's name cannot unmount the
     * first one's segment. A dead agent's endpoint fails (or its node is declared dead at
     * the TTL), and then a restart under its name is welcome. */
    if (mc_master_node_find(s->m, name, &node) == 0) {
        for (q = s->peers; q != NULL; q = q->next) {
            if (q != p && q->authed && q->node == node &&
                req.incarnation != 0 && q->incarnation != req.incarnation) {
                mc_warn("HELLO as %s refused: node %u of that name is live (another agent "
                        "process)",
                        name, node);
                return MC_ERR_EXISTS;
            }
        }
    }
    x.u.reg.name = name;
    x.u.reg.domain = domain[0] != '\0' ? domain : NULL;
    rc = mc_master_exec(s->m, &x);
    if (rc != 0)
        return rc;
    node = x.u.reg.node;
    if (!p->authed || p->node != node)
        mc_info("node %s (domain %s) joined as %u", name, domain[0] != '\0' ? domain : name,
                node);
    /* a node has one endpoint to the master: a reconnect replaces the old one, which
     * would otherwise linger (an accepted endpoint learns of nothing but protocol errors) */
    for (q = s->peers; q != NULL; q = next) {
        next = q->next;
        if (q != p && q->authed && q->node == node)
            peer_drop(s, q, true);
    }
    p->authed = true;
    p->node = node;
    p->incarnation = req.incarnation;
    p->carrying = (req.flags & MC_PROTO_HELLO_F_CARRYING) != 0;
    rep.node = node;
    rep.node_ttl_ms = mcfg->node_ttl_ms;
    rep.lease_ttl_ms = mcfg->lease_ttl_ms;
    rep.epoch = s->ha.epoch; /* agents refuse a master of an older epoch than they follow */
    rep.incarnation = s->incarnation;
    return mc_proto_hello_rep_encode(&rep, s->out, sizeof(s->out), out_len);
}

static void blobs_clear(struct seg_blobs *b)
{
    free(b->addr);
    free(b->rkey);
    memset(b, 0, sizeof(*b));
}

static int h_mount(struct mc_mcmaster_server *s, struct peer *p, const void *pl, size_t len,
                   size_t *out_len)
{
    struct mc_proto_mount_req req;
    struct mc_proto_mount_rep rep = {0};
    struct mc_master_req x = {.op = MC_MASTER_OP_MOUNT, .node = p->node};
    struct seg_blobs nb = {0}, *b;
    uint32_t seg;
    int rc;

    if (mc_proto_mount_req_decode(pl, len, &req) != 0)
        return MC_ERR_PROTO;
    if (req.seg.node != p->node)
        return MC_ERR_DENIED;
    nb.addr = malloc(req.worker_addr.len);
    nb.rkey = malloc(req.rkey.len + 1); /* +1: a 0-byte rkey still gets a pointer */
    if (nb.addr == NULL || nb.rkey == NULL) {
        blobs_clear(&nb);
        return MC_ERR_NOMEM;
    }
    memcpy(nb.addr, req.worker_addr.p, req.worker_addr.len);
    nb.addr_len = req.worker_addr.len;
    if (req.rkey.len > 0)
        memcpy(nb.rkey, req.rkey.p, req.rkey.len);
    nb.rkey_len = req.rkey.len;
    /* the node mounted this segment before: the same agent reconnecting (same worker
     * address) keeps it and everything in it; a new agent process under the node's name
     * (another address) has new memory, so what the old segment held is gone */
    for (seg = 0; seg < s->nsegs; seg++) {
        struct mc_master_seg_info info;

        if (s->segs[seg].addr == NULL || seg_info(s, seg, &info) != 0 ||
            info.node != p->node)
            continue;
        bool same_agent = s->segs[seg].addr_len == nb.addr_len &&
                          memcmp(s->segs[seg].addr, nb.addr, nb.addr_len) == 0;

        if (same_agent && info.base == req.seg.base && info.size == req.seg.size) {
            blobs_clear(&nb);
            mc_info("node %u remounted segment %u", p->node, seg);
            rep.seg = seg;
            return mc_proto_mount_rep_encode(&rep, s->out, sizeof(s->out), out_len);
        }
        if (!same_agent) {
            mc_info("node %u restarted: segment %u unmounted", p->node, seg);
            seg_unmount(s, seg);
            blobs_clear(&s->segs[seg]);
        }
    }
    x.u.mount.desc = &req.seg;
    rc = mc_master_exec(s->m, &x);
    seg = x.u.mount.seg;
    if (rc != 0) {
        blobs_clear(&nb);
        return rc;
    }
    if (seg >= s->nsegs) {
        size_t n = (size_t)seg + 1 > s->nsegs * 2 ? (size_t)seg + 1 : s->nsegs * 2;
        struct seg_blobs *t = realloc(s->segs, n * sizeof(*t));

        if (t == NULL) {
            seg_unmount(s, seg);
            blobs_clear(&nb);
            return MC_ERR_NOMEM;
        }
        memset(t + s->nsegs, 0, (n - s->nsegs) * sizeof(*t));
        s->segs = t;
        s->nsegs = n;
    }
    b = &s->segs[seg];
    blobs_clear(b); /* a reused id: the previous owner's blobs */
    *b = nb;
    mc_info("node %u mounted segment %u (kind %u, %llu bytes)", p->node, seg, req.seg.kind,
            (unsigned long long)req.seg.size);
    rep.seg = seg;
    return mc_proto_mount_rep_encode(&rep, s->out, sizeof(s->out), out_len);
}

static int h_heartbeat(struct mc_mcmaster_server *s, struct peer *p, const void *pl, size_t len,
                       size_t *out_len)
{
    struct mc_proto_heartbeat_req req;
    struct mc_proto_heartbeat_rep rep = {0};
    struct mc_master_req x;
    int rc;

    if (mc_proto_heartbeat_req_decode(pl, len, &req) != 0)
        return MC_ERR_PROTO;
    if (req.node != p->node)
        return MC_ERR_DENIED;
    x = (struct mc_master_req){.node = req.node};
    if (req.flags & MC_PROTO_HEARTBEAT_F_LEAVE) {
        x.op = MC_MASTER_OP_NODE_LEAVE;
        rc = mc_master_exec(s->m, &x);
        if (rc == 0) {
            mc_info("node %u left", req.node);
            p->authed = false; /* a new HELLO is needed to come back */
            p->node = MC_MASTER_NODE_NONE;
        }
    } else {
        x.op = MC_MASTER_OP_HEARTBEAT;
        rc = mc_master_exec(s->m, &x);
        p->carrying = (req.flags & MC_PROTO_HEARTBEAT_F_CARRYING) != 0;
        rep.drain = rc == 0 ? x.u.hb.drain : 0;
    }
    if (rc != 0)
        return rc;
    return mc_proto_heartbeat_rep_encode(&rep, s->out, sizeof(s->out), out_len);
}

static int h_put_start(struct mc_mcmaster_server *s, struct peer *p, const void *pl, size_t len,
                       size_t *out_len)
{
    struct mc_proto_put_start_req req;
    struct mc_proto_batch_rep rep = {0};
    struct mc_master_req x;

    if (mc_proto_put_start_req_decode(pl, len, MC_PROTO_BATCH_MAX, &req, s->puts) != 0)
        return MC_ERR_PROTO;
    if (req.writer != p->node)
        return MC_ERR_DENIED;
    x = (struct mc_master_req){.op = MC_MASTER_OP_PUT_START, .node = p->node, .n = req.n,
                               .results = s->results, .in.put = s->puts,
                               .out.grant = s->grants};
    (void)mc_master_exec(s->m, &x); /* an item may be MC_PROTO_NO_SPACE_YET (put.h) */
    rep.n = req.n;
    return mc_proto_put_start_rep_encode(&rep, s->results, s->grants, s->out, sizeof(s->out),
                                         out_len);
}

static int put_end_or_revoke(struct mc_mcmaster_server *s, struct peer *p, const void *pl,
                             size_t len, size_t *out_len, bool revoke)
{
    struct mc_proto_ref_req req;
    struct mc_proto_batch_rep rep = {0};
    struct mc_master_req x;
    int rc = revoke ? mc_proto_put_revoke_req_decode(pl, len, MC_PROTO_BATCH_MAX, &req, s->refs)
                    : mc_proto_put_end_req_decode(pl, len, MC_PROTO_BATCH_MAX, &req, s->refs);

    if (rc != 0)
        return MC_ERR_PROTO;
    if (req.node != p->node)
        return MC_ERR_DENIED;
    x = (struct mc_master_req){.op = revoke ? MC_MASTER_OP_PUT_REVOKE : MC_MASTER_OP_PUT_END,
                               .node = p->node, .n = req.n, .results = s->results,
                               .in.ref = s->refs};
    if (!revoke)
        drops_send(s); /* others' first (drops_hold) */
    (void)mc_master_exec(s->m, &x);
    rep.n = req.n;
    rc = mc_proto_results_rep_encode(&rep, s->results, s->out, sizeof(s->out), out_len);
    /* a put that replaced a version on a disk freed its record: the answer waits for the
     * owner's tombstone, as a remove's does (a crash of the owner and of this master right
     * after the put returned would bring the old bytes back) */
    if (!revoke)
        drops_hold(s, rc);
    return rc;
}

static int h_put_end(struct mc_mcmaster_server *s, struct peer *p, const void *pl, size_t len,
                     size_t *out_len)
{
    return put_end_or_revoke(s, p, pl, len, out_len, false);
}

static int h_put_revoke(struct mc_mcmaster_server *s, struct peer *p, const void *pl,
                        size_t len, size_t *out_len)
{
    return put_end_or_revoke(s, p, pl, len, out_len, true);
}

static int h_get(struct mc_mcmaster_server *s, struct peer *p, const void *pl, size_t len,
                 size_t *out_len)
{
    struct mc_proto_keys_req req;
    struct mc_proto_batch_rep rep = {0};
    struct mc_master_req x;

    if (mc_proto_get_req_decode(pl, len, MC_PROTO_BATCH_MAX, &req, s->keys) != 0)
        return MC_ERR_PROTO;
    if (req.node != p->node)
        return MC_ERR_DENIED;
    x = (struct mc_master_req){.op = MC_MASTER_OP_GET, .node = p->node, .n = req.n,
                               .results = s->results, .in.key = s->keys, .out.get = s->gets};
    if (req.flags & MC_PROTO_GET_F_PIN)
        x.flags = MC_MASTER_EXEC_F_PIN;
    (void)mc_master_exec(s->m, &x);
    rep.n = req.n;
    return mc_proto_get_rep_encode(&rep, s->results, s->gets, s->out, sizeof(s->out), out_len);
}

static int h_lease_release(struct mc_mcmaster_server *s, struct peer *p, const void *pl,
                           size_t len, size_t *out_len)
{
    struct mc_proto_ref_req req;
    struct mc_proto_lease_release_rep rep = {0};
    struct mc_master_req x;

    if (mc_proto_lease_release_req_decode(pl, len, MC_PROTO_BATCH_MAX, &req, s->refs) != 0)
        return MC_ERR_PROTO;
    if (req.node != p->node)
        return MC_ERR_DENIED;
    x = (struct mc_master_req){.op = MC_MASTER_OP_LEASE_RELEASE, .node = p->node, .n = req.n,
                               .results = s->results, .in.ref = s->refs};
    (void)mc_master_exec(s->m, &x);
    rep.released = (uint32_t)x.u.released;
    return mc_proto_lease_release_rep_encode(&rep, s->out, sizeof(s->out), out_len);
}

static int h_exist(struct mc_mcmaster_server *s, struct peer *p, const void *pl, size_t len,
                   size_t *out_len)
{
    struct mc_proto_keys_req req;
    struct mc_proto_batch_rep rep = {0};
    struct mc_master_req x;

    if (mc_proto_exist_req_decode(pl, len, MC_PROTO_BATCH_MAX, &req, s->keys) != 0)
        return MC_ERR_PROTO;
    if (req.node != p->node)
        return MC_ERR_DENIED;
    x = (struct mc_master_req){
        .op = (req.flags & MC_PROTO_EXIST_F_STAT) ? MC_MASTER_OP_STAT : MC_MASTER_OP_EXIST,
        .node = p->node,
        .flags = ((req.flags & MC_PROTO_EXIST_F_PREFIX) ? MC_MASTER_EXEC_F_PREFIX : 0) |
                 ((req.flags & MC_PROTO_EXIST_F_TOUCH) ? MC_MASTER_EXEC_F_TOUCH : 0),
        .n = req.n,
        .results = s->results,
        .in.key = s->keys,
        .out.stat = s->stats,
    };
    (void)mc_master_exec(s->m, &x);
    rep.flags = req.flags;
    rep.n = req.n;
    return mc_proto_exist_rep_encode(&rep, s->results, s->stats, s->out, sizeof(s->out),
                                     out_len);
}

static int h_remove(struct mc_mcmaster_server *s, struct peer *p, const void *pl, size_t len,
                    size_t *out_len)
{
    struct mc_proto_keys_req req;
    struct mc_proto_batch_rep rep = {0};
    struct mc_master_req x;
    int err;

    if (mc_proto_remove_req_decode(pl, len, MC_PROTO_BATCH_MAX, &req, s->keys) != 0)
        return MC_ERR_PROTO;
    if (req.node != p->node)
        return MC_ERR_DENIED;
    drops_send(s); /* others' first (drops_hold) */
    x = (struct mc_master_req){.op = (req.flags & MC_PROTO_REMOVE_F_PREFIX)
                                         ? MC_MASTER_OP_REMOVE_PREFIX
                                         : MC_MASTER_OP_REMOVE,
                               .node = p->node, .n = req.n, .results = s->results,
                               .in.key = s->keys, .out.count = s->counts};
    (void)mc_master_exec(s->m, &x);
    rep.n = req.n;
    err = mc_proto_remove_rep_encode(&rep, s->results, s->counts, s->out, sizeof(s->out),
                                     out_len);
    /* if its DROPs free or retire disk records, the answer waits for their owners' answers
     * (their tombstones or marks durable: a crash of that owner and of this master cannot
     * bring the objects back after the answer) */
    drops_hold(s, err);
    return err;
}

static int h_fence(struct mc_mcmaster_server *s, struct peer *p, const void *pl, size_t len,
                   size_t *out_len)
{
    struct mc_proto_fence_req req;
    struct mc_proto_batch_rep rep = {0};
    struct mc_master_req x;

    if (mc_proto_fence_req_decode(pl, len, MC_PROTO_BATCH_MAX, &req, s->fences) != 0)
        return MC_ERR_PROTO;
    /* only the owner may say its segment is fenced: the executor checks p->node owns it */
    x = (struct mc_master_req){.op = MC_MASTER_OP_FENCE_ACK, .node = p->node, .n = req.n,
                               .results = s->results, .in.fence = s->fences};
    (void)mc_master_exec(s->m, &x);
    rep.n = req.n;
    return mc_proto_results_rep_encode(&rep, s->results, s->out, sizeof(s->out), out_len);
}

/* RESTORE_BATCH: what a node's segments hold, after it (re)joined. A node speaks for its own
 * node only, and the executor refuses an item naming another node's segment. A late item
 * (MC_MASTER_RESTORE_LATE) is taken into a reported segment only inside the recovery
 * window (mc_ha_window_sync). */
static int h_restore(struct mc_mcmaster_server *s, struct peer *p, const void *pl, size_t len,
                     size_t *out_len)
{
    struct mc_proto_ref_req req;
    struct mc_proto_batch_rep rep = {0};
    struct mc_master_req x;
    uint32_t ok = 0;

    if (mc_proto_restore_req_decode(pl, len, MC_PROTO_BATCH_MAX, &req, s->restores) != 0)
        return MC_ERR_PROTO;
    if (req.node != p->node)
        return MC_ERR_DENIED;
    mc_ha_window_sync(&s->ha, s->m);
    x = (struct mc_master_req){.op = MC_MASTER_OP_RESTORE, .node = p->node, .n = req.n,
                               .results = s->results, .in.restore = s->restores};
    /* a disk record whose DROP was never answered: refused, the others go on (dropmemo.h) */
    x.n = mc_diskdrops_restore_filter(&s->drops, s->restores, req.n);
    if (x.n > 0)
        (void)mc_master_exec(s->m, &x);
    mc_diskdrops_restore_merge(&s->drops, s->results, req.n);
    for (uint32_t i = 0; i < req.n; i++)
        ok += s->results[i] == 0;
    mc_debug("node %u: %u of %u replicas restored", p->node, ok, req.n);
    rep.n = req.n;
    return mc_proto_results_rep_encode(&rep, s->results, s->out, sizeof(s->out), out_len);
}

/* RESTORE_DONE: the node's walk of those segments ended; placement may use them. */
static int h_restore_done(struct mc_mcmaster_server *s, struct peer *p, const void *pl,
                          size_t len, size_t *out_len)
{
    struct mc_proto_ref_req req;
    struct mc_proto_batch_rep rep = {0};
    struct mc_master_req x;

    if (mc_proto_restore_done_req_decode(pl, len, MC_PROTO_BATCH_MAX, &req, s->seg_ids) != 0)
        return MC_ERR_PROTO;
    if (req.node != p->node)
        return MC_ERR_DENIED;
    x = (struct mc_master_req){.op = MC_MASTER_OP_RESTORE_DONE, .node = p->node, .n = req.n,
                               .results = s->results, .in.seg = s->seg_ids};
    (void)mc_master_exec(s->m, &x);
    rep.n = req.n;
    return mc_proto_results_rep_encode(&rep, s->results, s->out, sizeof(s->out), out_len);
}

/* DRAIN: any authenticated agent may drain or undrain any node (mcctl runs on any). */
static int h_drain(struct mc_mcmaster_server *s, struct peer *p, const void *pl, size_t len,
                   size_t *out_len)
{
    struct mc_proto_drain_req req;
    struct mc_proto_status_rep rep = {0};
    struct mc_master_req x = {.op = MC_MASTER_OP_DRAIN, .node = p->node};
    char name[MC_MASTER_NAME_MAX + 1];

    if (mc_proto_drain_req_decode(pl, len, &req) != 0)
        return MC_ERR_PROTO;
    copy_name(name, &req.name);
    x.u.drain.name = name;
    x.u.drain.on = req.on != 0;
    rep.status = mc_master_exec(s->m, &x);
    if (rep.status != 0)
        return rep.status;
    mc_info("node %s %s (asked by node %u)", name, req.on ? "draining" : "undrained", p->node);
    return mc_proto_status_rep_encode(&rep, s->out, sizeof(s->out), out_len);
}

/* The node page of CLUSTER_INFO. Entries point into s->node_info, alive until the reply is
 * encoded. */
static void info_nodes(struct mc_mcmaster_server *s, const struct mc_proto_info_req *req,
                       struct mc_proto_info_rep *rep)
{
    struct mc_master_req x = {.op = MC_MASTER_OP_NODE_LIST};
    size_t i, n;

    x.u.nodes.cursor = req->node_cursor;
    x.u.nodes.out = s->node_info;
    x.u.nodes.max = req->node_max;
    (void)mc_master_exec(s->m, &x);
    n = x.u.nodes.n;

    for (i = 0; i < n; i++) {
        const struct mc_master_node_info *ni = &s->node_info[i];

        s->node_page[i] = (struct mc_proto_node_entry){
            .id = ni->id,
            .alive = ni->alive ? 1 : 0,
            .segments = ni->segments,
            .idle_ms = ni->idle_ms,
            .name = {(const uint8_t *)ni->name, strlen(ni->name)},
            .domain = {(const uint8_t *)ni->domain, strlen(ni->domain)},
            .drain = ni->drain,
            .drain_blocks = ni->drain_blocks,
            .drain_bytes = ni->drain_bytes,
        };
    }
    rep->nnode = (uint32_t)n;
    rep->next_node_cursor = x.u.nodes.cursor;
}

static int h_info(struct mc_mcmaster_server *s, struct peer *p, const void *pl, size_t len,
                  size_t *out_len)
{
    struct mc_proto_info_req req;
    struct mc_proto_info_rep rep = {0};
    struct mc_master_req x = {.node = p->node};
    size_t seg;

    if (mc_proto_info_req_decode(pl, len, &req) != 0)
        return MC_ERR_PROTO;
    rep.flags = req.flags;
    if (req.flags & MC_PROTO_INFO_F_STATS) {
        x.op = MC_MASTER_OP_STATS;
        x.u.stats = &rep.stats;
        (void)mc_master_exec(s->m, &x);
    }
    if (req.flags & MC_PROTO_INFO_F_SEGMENTS) {
        for (seg = req.cursor; seg < s->nsegs; seg++) {
            struct mc_proto_seg_entry *e = &s->seg_page[rep.nseg];

            if (rep.nseg == req.max) {
                rep.next_cursor = (uint32_t)seg; /* > 0: the page holds at least one */
                break;
            }
            if (s->segs[seg].addr == NULL)
                continue; /* never mounted */
            x.op = MC_MASTER_OP_SEG_INFO;
            x.u.seg_info.seg = (uint32_t)seg;
            if (mc_master_exec(s->m, &x) != 0)
                continue; /* unmounted since */
            e->info = x.u.seg_info.info;
            e->seg = (uint32_t)seg;
            e->worker_addr = (struct mc_proto_bytes){s->segs[seg].addr, s->segs[seg].addr_len};
            e->rkey = (struct mc_proto_bytes){s->segs[seg].rkey, s->segs[seg].rkey_len};
            rep.nseg++;
        }
    }
    if (req.flags & MC_PROTO_INFO_F_NODES)
        info_nodes(s, &req, &rep);
    return mc_proto_info_rep_encode(&rep, s->seg_page, s->node_page, s->out, sizeof(s->out),
                                    out_len);
}

/* mc_master_list hands each key over as it walks; the keys point into the directory, which
 * nothing changes before the reply is encoded. */
struct list_ctx {
    struct mc_proto_key *keys;
    uint32_t n;
};

static void list_add(const char *key, size_t key_len, void *ctx)
{
    struct list_ctx *lc = ctx;

    lc->keys[lc->n++] = (struct mc_proto_key){key, key_len};
}

/* A full page of the longest keys fits in the reply buffer (also asserted in master_proto.c
 * against the frame), so a page is never cut short: a key mc_master_list has handed over is
 * past the cursor and could not be sent later. */
static_assert(16u + MC_PROTO_LIST_MAX * (4u + MC_PROTO_KEY_MAX) <= MC_PROTO_PAYLOAD_MAX,
              "a LIST page fits in the reply buffer");
static_assert(MC_PROTO_LIST_MAX <= MC_PROTO_BATCH_MAX, "LIST keys fit in s->keys");

static int h_list(struct mc_mcmaster_server *s, struct peer *p, const void *pl, size_t len,
                  size_t *out_len)
{
    struct mc_proto_list_req req;
    struct mc_proto_list_rep rep = {0};
    struct list_ctx lc = {s->keys, 0};
    struct mc_master_req x = {.op = MC_MASTER_OP_LIST};
    int rc;

    if (mc_proto_list_req_decode(pl, len, &req) != 0)
        return MC_ERR_PROTO;
    if (req.node != p->node)
        return MC_ERR_DENIED;
    x.node = p->node;
    /* an empty prefix may decode as NULL: give the service a real pointer */
    x.u.list.prefix = req.prefix.len > 0 ? (const char *)req.prefix.p : "";
    x.u.list.prefix_len = req.prefix.len;
    x.u.list.cursor = req.cursor;
    x.u.list.max = req.max;
    x.u.list.fn = list_add;
    x.u.list.ctx = &lc;
    rc = mc_master_exec(s->m, &x);
    if (rc < 0)
        return rc;
    rep.n = lc.n;
    rep.next_cursor = x.u.list.cursor;
    return mc_proto_list_rep_encode(&rep, s->keys, s->out, sizeof(s->out), out_len);
}

static void reply_status(struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr, int status)
{
    struct mc_proto_status_rep rep = {.status = status};
    uint8_t buf[8];
    size_t len;

    if (mc_proto_status_rep_encode(&rep, buf, sizeof(buf), &len) == 0)
        mc_ucx_rpc_reply(ep, (uint16_t)(hdr->type + 1), hdr->request_id, buf, len);
}

/* mc-master's dispatch: a handler per row of MC_PROTO_MASTER_RPCS (daemon/proto/rpc.h),
 * h_<name>; a row without its handler does not compile. A handler decodes the payload,
 * checks that the peer speaks for its own node, runs the request through mc_master_exec and
 * encodes the reply into s->out; it returns 0 (reply s->out) or the status to answer. */
typedef int (*rpc_handler_fn)(struct mc_mcmaster_server *s, struct peer *p, const void *pl,
                              size_t len, size_t *out_len);
#define MC_MCMASTER_RPC_HANDLER(NAME, name, type, flags, items, req, rep)                      \
    [MC_WIRE_##NAME] = h_##name,
static const rpc_handler_fn rpc_handlers[MC_WIRE__COUNT] = {
    MC_PROTO_MASTER_RPCS(MC_MCMASTER_RPC_HANDLER)};
#undef MC_MCMASTER_RPC_HANDLER

static enum mc_mcmaster_metric rpc_metric(uint16_t type)
{
    switch (type) {
    case MC_WIRE_HELLO: return MM_RPC_HELLO;
    case MC_WIRE_MOUNT: return MM_RPC_MOUNT;
    case MC_WIRE_HEARTBEAT: return MM_RPC_HEARTBEAT;
    case MC_WIRE_PUT_START_BATCH: return MM_RPC_PUT_START;
    case MC_WIRE_PUT_END_BATCH: return MM_RPC_PUT_END;
    case MC_WIRE_PUT_REVOKE_BATCH: return MM_RPC_PUT_REVOKE;
    case MC_WIRE_GET_BATCH: return MM_RPC_GET;
    case MC_WIRE_LEASE_RELEASE_BATCH: return MM_RPC_LEASE_RELEASE;
    case MC_WIRE_EXIST_BATCH: return MM_RPC_EXIST;
    case MC_WIRE_REMOVE_BATCH: return MM_RPC_REMOVE;
    case MC_WIRE_FENCE: return MM_RPC_FENCE;
    case MC_WIRE_CLUSTER_INFO: return MM_RPC_CLUSTER_INFO;
    case MC_WIRE_LIST: return MM_RPC_LIST;
    default: return MM_RPC_OTHER;
    }
}

/* --- high availability (ha.h) ------------------------------------------------------------- */

/* Drop every peer and start an empty directory: a new reign learns everything again from
 * the agents (they rejoin and report), and a master that stepped down keeps nobody. */
static int ha_reset(struct mc_mcmaster_server *s, const struct mc_elect_view *v)
{
    struct mc_master *m;
    int err;

    while (s->peers != NULL)
        peer_drop(s, s->peers, true);
    for (size_t i = 0; i < s->nsegs; i++)
        blobs_clear(&s->segs[i]);
    mc_calls_reset(&s->calls);
    err = mc_master_create(&s->mcfg, NULL, NULL, &m);
    if (err != 0)
        return err;
    mc_master_destroy(s->m);
    s->m = m;
    mc_dropq_reset(s->drops.q); /* the old directory's segments */
    mc_master_drops_enable(s->m, true);
    /* versions above any an earlier leader handed out: the end they stored in etcd (not
     * the clock alone: elect.h); every restore raises the counter further */
    mc_master_version_floor(s->m, v->version_base);
    return 0;
}

/* From the tick: follow what the election thread decided (ha.h). */
/* The nodes of the peers that said they carry PUBLISHes over a master change (HELLO,
 * HEARTBEAT), in s->carrying; how many. */
static size_t carrying_nodes(struct mc_mcmaster_server *s)
{
    size_t n = 0;

    for (struct peer *p = s->peers; p != NULL; p = p->next) {
        if (!p->authed || !p->carrying)
            continue;
        if (n == s->carrying_cap) {
            size_t cap = s->carrying_cap != 0 ? 2 * s->carrying_cap : 16;
            uint32_t *t = realloc(s->carrying, cap * sizeof(*t));

            if (t == NULL)
                break; /* the rest wait for the next call */
            s->carrying = t;
            s->carrying_cap = cap;
        }
        s->carrying[n++] = p->node;
    }
    return n;
}

static void ha_tick(struct mc_mcmaster_server *s)
{
    struct mc_elect_view v;
    bool serving;
    size_t ncarrying;

    if (mc_ha_tick_begin(&s->ha, &v, &serving)) {
        if (v.version_base == 0 || ha_reset(s, &v) != 0) {
            mc_error("a new directory for epoch %llu: out of memory",
                     (unsigned long long)v.epoch);
            mc_ha_reign_failed(&s->ha); /* the old directory must not serve the new reign */
            return;
        }
        mc_ha_reign_begin(&s->ha, &v);
    }
    ncarrying = carrying_nodes(s);
    if (mc_ha_tick_end(&s->ha, s->m, (uint32_t)s->nsegs, s->carrying, ncarrying, serving,
                       &v)) {
        while (s->peers != NULL)
            peer_drop(s, s->peers, true);
    }
}

static void on_request(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                       const void *pl)
{
    struct mc_mcmaster_server *s = ctx;
    size_t len = hdr->payload_len, out_len = 0;
    rpc_handler_fn fn;
    struct peer *p;
    int rc;

    s->mvals[rpc_metric(hdr->type)]++;
    if (s->stopping) {
        s->mvals[MM_RPCS_FAILED]++;
        reply_status(ep, hdr, MC_ERR_UNAVAILABLE);
        return;
    }
    if (s->ha.elect != NULL && (rc = mc_ha_gate(&s->ha, s->m, hdr->type)) != 0) {
        s->mvals[MM_RPCS_FAILED]++;
        reply_status(ep, hdr, rc);
        return;
    }
    p = peer_of(s, ep);
    if (p == NULL)
        return;
    if (p->authed && hdr->type != MC_WIRE_HELLO &&
        MC_UCX_SESSION_OF(hdr->request_id) != p->session) {
        /* not the peer that said HELLO here: a new endpoint UCX put at a dead peer's
         * address. It gets nothing, and the dead peer's record goes */
        mc_warn("node %u's endpoint used by another peer (session mismatch): dropped",
                p->node);
        p->authed = false;
    }
    if (hdr->type != MC_WIRE_HELLO && !p->authed) {
        s->mvals[MM_RPCS_FAILED]++;
        reply_status(ep, hdr, MC_ERR_DENIED);
        peer_drop(s, p, false); /* keep nothing for a peer without the token */
        return;
    }
    p->silent = false;
    s->hold_reply = false;
    fn = hdr->type < MC_WIRE__COUNT ? rpc_handlers[hdr->type] : NULL;
    rc = fn != NULL ? fn(s, p, pl, len, &out_len) : MC_ERR_PROTO; /* WRITE, READ: peers' */
    if (rc == MC_ERR_PROTO)
        mc_debug("node %u: malformed request type %u (%zu bytes)", p->node, hdr->type, len);
    if (rc != 0)
        s->mvals[MM_RPCS_FAILED]++;
    if (rc != 0)
        reply_status(ep, hdr, rc);
    else if (!s->hold_reply ||
             mc_diskdrops_hold(&s->drops, ep, (uint16_t)(hdr->type + 1), hdr->request_id,
                               s->out, out_len, mc_ucx_now_ms()) != 0)
        mc_ucx_rpc_reply(ep, (uint16_t)(hdr->type + 1), hdr->request_id, s->out, out_len);
    /* a refused HELLO: no record stays for it (else endpoints without the token would pile
     * up to max_peers and lock the agents out) */
    if (hdr->type == MC_WIRE_HELLO && !p->authed)
        peer_drop(s, p, false);
    else if (hdr->type == MC_WIRE_HELLO)
        p->session = MC_UCX_SESSION_OF(hdr->request_id);
    else if ((hdr->type == MC_WIRE_RESTORE_DONE || hdr->type == MC_WIRE_HEARTBEAT) &&
             s->ha.elect != NULL) {
        size_t ncarrying = carrying_nodes(s);

        mc_ha_recovery_check(&s->ha, s->m, (uint32_t)s->nsegs, s->carrying, ncarrying);
    }
}

/* --- bootstrap listener ----------------------------------------------------------------- */

/* --- life cycle ------------------------------------------------------------------------- */

/* What the leader key says agents should bootstrap from: advertise, else the listen host
 * (the host name when it listens on any address) with the port we got. */
static int ha_advertise(const struct mc_mcmaster_config *cfg, uint16_t port, char *buf,
                        size_t cap)
{
    char host[64];
    const char *p;

    if (cfg->advertise != NULL)
        return (size_t)snprintf(buf, cap, "%s", cfg->advertise) < cap ? 0 : MC_ERR_INVALID;
    if (mc_boot_split(cfg->listen, host, sizeof(host), &p) != 0)
        return MC_ERR_INVALID;
    if (host[0] == '\0' || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0) {
        if (gethostname(host, sizeof(host)) != 0)
            return MC_ERR_INVALID;
        host[sizeof(host) - 1] = '\0';
    }
    return (size_t)snprintf(buf, cap, strchr(host, ':') != NULL ? "[%s]:%u" : "%s:%u", host,
                            (unsigned)port) < cap
               ? 0
               : MC_ERR_INVALID;
}

int mc_mcmaster_server_create(const struct mc_mcmaster_config *cfg,
                              struct mc_mcmaster_server **s_p)
{
    char keepalive[64], listen_ip[64];
    const char *ucx_cfg[] = {"MM_ERROR_HANDLING=y", keepalive, NULL};
    struct mc_ucx_params up = {.name = "mc-master", .config = ucx_cfg, .ep_error = on_ep_error};
    struct itimerspec its = {0};
    struct mc_mcmaster_server *s;
    const void *addr;
    size_t addr_len;
    sigset_t sigs;
    int err;

    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return MC_ERR_NOMEM;
    s->listen_fd = s->timer_fd = s->signal_fd = -1;
    if (getrandom(&s->incarnation, sizeof(s->incarnation), 0) != (ssize_t)sizeof(s->incarnation))
        s->incarnation = (uint64_t)getpid() << 32 ^ mc_elect_now_ms(); /* unique enough */
    if (s->incarnation == 0)
        s->incarnation = 1;
    s->max_peers = cfg->max_peers;
    /* half the TTL: a stall that long would have let a node's heartbeats lapse; never
     * below two ticks, the gap an idle loop itself may leave */
    s->stall_ms = cfg->master.node_ttl_ms / 2;
    if (s->stall_ms < 2 * cfg->master.tick_ms)
        s->stall_ms = 2 * cfg->master.tick_ms;
    if (cfg->cluster_token != NULL && cfg->cluster_token[0] != '\0') {
        s->token = strdup(cfg->cluster_token);
        if (s->token == NULL) {
            err = MC_ERR_NOMEM;
            goto err_destroy;
        }
        s->token_len = strlen(s->token);
    } else {
        mc_warn("no cluster_token: every HELLO is accepted (allow_no_token)");
    }
    /* block before UCX starts its threads, so they inherit the mask and the signals reach
     * only the signalfd */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    if (sigprocmask(SIG_BLOCK, &sigs, NULL) != 0) {
        err = MC_ERR_IO;
        goto err_destroy;
    }
    /* after the mask: the HTTP thread inherits it */
    if (cfg->metrics_listen != NULL) {
        err = mc_metrics_create(mc_mcmaster_metrics_table, cfg->metrics_listen, &s->metrics,
                                NULL);
        if (err != 0)
            goto err_destroy;
    }
    s->signal_fd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    s->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (s->signal_fd < 0 || s->timer_fd < 0) {
        err = mc_err_from_errno(errno);
        mc_error("signalfd/timerfd: %s", strerror(errno));
        goto err_destroy;
    }
    its.it_interval.tv_sec = (time_t)(cfg->master.tick_ms / 1000);
    its.it_interval.tv_nsec = (long)(cfg->master.tick_ms % 1000) * 1000000L;
    its.it_value = its.it_interval;
    if (timerfd_settime(s->timer_fd, 0, &its, NULL) != 0) {
        err = MC_ERR_IO;
        goto err_destroy;
    }
    s->mcfg = cfg->master;
    mc_calls_init(&s->calls, &s->m, ep_of_node, s);
    err = mc_diskdrops_init(&s->drops, drop_route, drops_silent, seg_is_disk, s);
    if (err == 0)
        err = mc_master_create(&cfg->master, NULL, NULL, &s->m);
    if (err == 0) {
        struct timespec ts;

        mc_master_drops_enable(s->m, true);
        /* versions above any a master before us handed out: the agents may hold them */
        clock_gettime(CLOCK_REALTIME, &ts);
        mc_master_version_floor(s->m, (uint64_t)ts.tv_sec * 1000000000u +
                                          (uint64_t)ts.tv_nsec);
    }
    if (err != 0) {
        mc_error("master service: %s", mc_strerror(err));
        goto err_destroy;
    }
    snprintf(keepalive, sizeof(keepalive), "KEEPALIVE_INTERVAL=%llums",
             (unsigned long long)cfg->keepalive_ms);
    up.ep_error_ctx = s;
    if (!cfg->ucx_shm)
        setenv("UCX_TLS", "^mm", 0); /* as the agents' (ucx_shm, docs/decisions.md) */
    /* agents connect to a listener on our address: the endpoints we send DROPs, fences,
     * copies and held answers on are then ours, and UCX reports a dead agent's instead of
     * freeing it under us (ucx.h, listen_ip) */
    if (mc_boot_listen_ip(cfg->listen, listen_ip, sizeof(listen_ip)) == 0)
        up.listen_ip = listen_ip;
    err = mc_ucx_create(&up, &s->u);
    if (err != 0) {
        mc_error("UCX: %s", mc_strerror(err));
        goto err_destroy;
    }
    mc_ucx_rpc_register(s->u, on_request, s);
    mc_ucx_address(s->u, &addr, &addr_len);
    err = mc_boot_msg(addr, addr_len, &s->boot, &s->boot_len);
    if (err != 0) {
        mc_error("UCX worker address of %zu bytes does not fit the bootstrap message",
                 addr_len);
        goto err_destroy;
    }
    err = mc_boot_listen(cfg->listen, MC_MCMASTER_LISTEN_BACKLOG, &s->listen_fd, &s->port);
    if (err != 0)
        goto err_destroy;
    if (mc_saddr_is(addr, addr_len))
        mc_info("listening on %s (port %u), UCX listener on port %u", cfg->listen,
                (unsigned)s->port, (unsigned)mc_saddr_port(addr, addr_len));
    else
        mc_info("listening on %s (port %u), worker address %zu bytes", cfg->listen,
                (unsigned)s->port, addr_len);
    if (cfg->etcd != NULL) {
        char adv[128];
        struct mc_elect_config ec = {.endpoints = cfg->etcd, .cluster_id = cfg->cluster_id,
                                     .advertise = adv, .ttl_ms = cfg->etcd_ttl_ms,
                                     .poll_ms = cfg->etcd_poll_ms};

        err = ha_advertise(cfg, s->port, adv, sizeof(adv));
        if (err == 0 && (s->ha.expect = calloc(MC_ELECT_AGENTS_MAX, sizeof(*s->ha.expect))) == NULL)
            err = MC_ERR_NOMEM;
        if (err == 0)
            err = mc_elect_start(&ec, &s->ha.elect);
        if (err != 0) {
            mc_error("etcd election at %s: %s", cfg->etcd, mc_strerror(err));
            goto err_destroy;
        }
        s->ha.recovery_ms = cfg->recovery_ms;
        mc_info("standing for leader of cluster %s in etcd at %s as %s", cfg->cluster_id,
                cfg->etcd, adv);
    }
    /* listening: /ready says so before the ready file is written (main.c), so that whoever
     * saw the file never sees 503 (peers wait in the backlog until the loop runs); the page
     * and /health hold the figures before that, not the empty "starting" page */
    if (s->metrics != NULL) {
        metrics_publish(s);
        mc_metrics_set_ready(s->metrics, true);
    }
    *s_p = s;
    return 0;

err_destroy:
    mc_mcmaster_server_destroy(s);
    return err;
}

uint16_t mc_mcmaster_server_port(const struct mc_mcmaster_server *s)
{
    return s->port;
}

static void on_signal(struct mc_mcmaster_server *s)
{
    struct signalfd_siginfo si;

    while (read(s->signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        mc_info("signal %u: stopping", si.ssi_signo);
        mc_notify_stopping();
        s->stopping = true;
    }
}

/* --- drops: the owners' indexes of complete objects forget what was freed ------------------- */

/* dropq.h's route: the endpoint of the owner of seg now. */
static int drop_route(void *ctx, uint32_t seg, struct mc_ucx_ep **ep_p)
{
    struct mc_mcmaster_server *s = ctx;
    struct mc_master_seg_info info;

    if (seg_info(s, seg, &info) != 0)
        return -1; /* gone, and its owner's holdings with it */
    for (struct peer *p = s->peers; p != NULL; p = p->next) {
        if (p->authed && p->node == info.node) {
            if (p->silent)
                return 1; /* maybe dead, its endpoint gone inside UCX: later */
            *ep_p = p->ep;
            return 0;
        }
    }
    return 1;
}

/* Tell each owner which blocks of published objects were freed in its segments
 * (mc_master_drops_take): its index must not report them to a later master. Delivered
 * until answered (dropq.h). */
static void drops_send(struct mc_mcmaster_server *s)
{
    mc_diskdrops_send(&s->drops, s->m, mc_ucx_now_ms());
}

/* After a handler whose request freed or retired blocks (a REMOVE, a PUT_END replacing a
 * version): its DROPs go out now, and its answer (rc 0) is held for their owners' answers
 * when some name disk blocks (diskdrops.h). The handler sent what others freed before its
 * request (drops_send), so only its own DROPs hold it. */
static void drops_hold(struct mc_mcmaster_server *s, int rc)
{
    drops_send(s);
    s->hold_reply = rc == 0 && mc_diskdrops_sent_disk(&s->drops);
}

static void on_timer(struct mc_mcmaster_server *s)
{
    uint64_t ticks;

    if (read(s->timer_fd, &ticks, sizeof(ticks)) != (ssize_t)sizeof(ticks))
        return;
    /* read what the agents sent first: their heartbeats may wait in the worker (after a
     * stall, all of them), and liveness must be judged on what arrived, not on what we
     * have not looked at yet. Bounded: a flood of requests cannot hold the tick off. */
    for (int i = 0; i < 1024 && mc_ucx_progress(s->u); i++)
        ;
    if (s->ha.elect != NULL)
        ha_tick(s);
    {
        struct mc_master_stats before, after;

        mc_master_get_stats(s->m, &before);
        mc_master_tick(s->m);
        mc_master_get_stats(s->m, &after);
        if (after.nodes_declared_dead != before.nodes_declared_dead)
            mc_warn("%llu node(s) declared dead (no heartbeat within node_ttl_ms): their "
                    "segments are unmounted, their puts revoked",
                    (unsigned long long)(after.nodes_declared_dead -
                                         before.nodes_declared_dead));
    }
    /* a DROP of an extent goes out before any COPY into it (the owner erases the old
     * record first; it also ignores a DROP that does not name the record it holds) */
    drops_send(s);
    mc_calls_copies_send(&s->calls);
    mc_calls_fences_send(&s->calls);
    mc_ucx_expire(s->u, mc_ucx_now_ms());
}

static void metrics_publish(struct mc_mcmaster_server *s)
{
    struct mc_master_stats ms;
    size_t i;

    mc_master_get_stats(s->m, &ms);
    s->mvals[MM_OBJECTS] = ms.objects;
    s->mvals[MM_NODES_ALIVE] = ms.nodes_alive;
    s->mvals[MM_SEGMENTS] = ms.segments;
    s->mvals[MM_PEERS] = s->npeers;
    s->mvals[MM_CAPACITY_DRAM] = ms.capacity_bytes; /* every segment is DRAM today */
    s->mvals[MM_USED_DRAM] = ms.used_bytes;
    s->mvals[MM_META_BYTES] = ms.meta_bytes;
    s->mvals[MM_PUTS_STARTED] = ms.puts_started;
    s->mvals[MM_PUTS_COMPLETED] = ms.puts_completed;
    s->mvals[MM_PUTS_REVOKED] = ms.puts_revoked;
    s->mvals[MM_PUTS_CANCELED] = ms.puts_canceled;
    s->mvals[MM_PUTS_DISPLACED] = ms.puts_displaced;
    s->mvals[MM_GETS] = ms.gets;
    s->mvals[MM_GET_MISSES] = ms.get_misses;
    s->mvals[MM_LEASE_GRANTS] = ms.lease_grants;
    s->mvals[MM_LEASE_RELEASES] = ms.lease_releases;
    s->mvals[MM_LEASE_EXPIRIES] = ms.lease_expiries;
    s->mvals[MM_EVICTIONS] = ms.evictions;
    s->mvals[MM_EVICTED_BYTES] = ms.evicted_bytes;
    s->mvals[MM_TTL_EXPIRIES] = ms.ttl_expiries;
    s->mvals[MM_REMOVES] = ms.removes;
    s->mvals[MM_STALE_WRITER] = ms.stale_freed_by_writer;
    s->mvals[MM_STALE_FENCE] = ms.stale_freed_by_fence;
    s->mvals[MM_STALE_TIMEOUT] = ms.stale_freed_by_timeout;
    s->mvals[MM_NODES_DEAD] = ms.nodes_declared_dead;
    s->mvals[MM_DISK_LOST] = mc_master_disk_replicas_lost(s->m);
    {
        struct mc_dropq_stats ds;

        mc_dropq_stats(s->drops.q, &ds);
        s->mvals[MM_DROPS_SENT] = ds.sent;
        s->mvals[MM_DROPS_RETRIED] = ds.retried;
        s->mvals[MM_DROPS_GIVEN_UP] = ds.given_up;
        s->mvals[MM_DROPS_LOST] = ds.lost;
        s->mvals[MM_DROPS_QUEUED] = ds.queued;
        s->mvals[MM_REMOVES_HELD] = s->drops.held_answered;
        s->mvals[MM_REMOVES_HELD_EXPIRED] = s->drops.held_expired;
    }
    for (i = 0; i < MM__COUNT; i++)
        s->mpresent[i] = 1;
    mc_metrics_publish(s->metrics, s->mvals, s->mpresent);
    mc_metrics_set_health(s->metrics, s->stopping ? "stopping" : NULL);
}

int mc_mcmaster_server_run(struct mc_mcmaster_server *s)
{
    uint64_t drain_end;

    if (s->metrics != NULL)
        metrics_publish(s);
    while (!s->stopping) {
        struct pollfd pfd[5] = {
            {.fd = s->signal_fd, .events = POLLIN},
            {.fd = s->timer_fd, .events = POLLIN},
            {.fd = s->listen_fd, .events = POLLIN},
            {.fd = mc_ucx_efd(s->u), .events = POLLIN},
            {.fd = s->ha.elect != NULL ? mc_elect_fd(s->ha.elect) : -1, .events = POLLIN},
        };
        /* sleep only when UCX says it is safe; otherwise just look at the other fds */
        int timeout = (mc_ucx_progress(s->u) || !mc_ucx_arm(s->u)) ? 0 : 1000;

        uint64_t now;

        if (poll(pfd, 5, timeout) < 0) {
            if (errno == EINTR)
                continue;
            mc_error("poll: %s", strerror(errno));
            return MC_ERR_IO;
        }
        /* the timer wakes us every tick_ms: a much longer gap means this process did not
         * run (SIGSTOP, a stalled VM), and the nodes' silence meanwhile is ours, not
         * theirs. Every node gets a fresh TTL before the tick may judge any. */
        now = mc_ucx_now_ms();
        if (s->last_turn_ms != 0 && now - s->last_turn_ms > s->stall_ms)
            mc_warn("the master did not run for %llu ms (stopped or stalled): %u node(s) "
                    "get a fresh node_ttl_ms",
                    (unsigned long long)(now - s->last_turn_ms),
                    mc_master_nodes_refresh(s->m));
        s->last_turn_ms = now;
        if (pfd[0].revents & POLLIN)
            on_signal(s);
        if (pfd[1].revents & POLLIN)
            on_timer(s);
        /* a put's eviction may have made copies (to its node's disk, docs/disk.md): they
         * go out now, not on the next tick, since the DRAM they hold is what puts need */
        if (mc_master_copies_pending(s->m)) {
            drops_send(s); /* the eviction that made the copy may have freed its extent */
            mc_calls_copies_send(&s->calls);
        }
        if (pfd[2].revents & POLLIN)
            mc_boot_serve(s->listen_fd, s->boot, s->boot_len);
        if (pfd[4].revents & POLLIN) { /* won or lost the lead: act now */
            uint64_t n;

            (void)!read(pfd[4].fd, &n, sizeof(n));
            ha_tick(s);
        }
        if (s->metrics != NULL && now - s->metrics_pub_ms >= 10) {
            s->metrics_pub_ms = now;
            metrics_publish(s);
        }
    }
    if (s->metrics != NULL)
        metrics_publish(s); /* says "stopping" */
    /* refuse new work (on_request answers MC_ERR_UNAVAILABLE) and let the replies already
     * queued go out before the endpoints are closed */
    drain_end = mc_ucx_now_ms() + MC_MCMASTER_DRAIN_MS;
    while (s->peers != NULL)
        peer_drop(s, s->peers, false);
    while (mc_ucx_now_ms() < drain_end) {
        if (!mc_ucx_progress(s->u))
            poll(NULL, 0, 5);
    }
    return 0;
}

void mc_mcmaster_server_destroy(struct mc_mcmaster_server *s)
{
    size_t i;

    if (s == NULL)
        return;
    mc_elect_stop(s->ha.elect); /* a leader hands over at once: it deletes its key */
    mc_metrics_destroy(s->metrics);
    if (s->drops.q != NULL)
        mc_dropq_closing(s->drops.q);
    while (s->peers != NULL)
        peer_drop(s, s->peers, true);
    mc_ucx_destroy(s->u);
    mc_diskdrops_fini(&s->drops); /* every try has ended with the worker */
    free(s->ha.expect);
    mc_master_destroy(s->m);
    for (i = 0; i < s->nsegs; i++)
        blobs_clear(&s->segs[i]);
    free(s->segs);
    free(s->carrying);
    free(s->boot);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->timer_fd >= 0)
        close(s->timer_fd);
    if (s->signal_fd >= 0)
        close(s->signal_fd);
    if (s->token != NULL) {
        memset(s->token, 0, s->token_len);
        free(s->token);
    }
    free(s);
}
