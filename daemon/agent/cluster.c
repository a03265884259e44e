/*
 * The agent's cluster mode (cluster.h): the UCX worker, the join at mc-master (bootstrap,
 * HELLO with the cluster token, MOUNT, heartbeats), watching that the master answers, and
 * rejoining it when it is lost. The transfers are xfer.c's, the owner's side owner.c's.
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

#include "daemon/agent/client.h"
#include "daemon/agent/cluster_int.h"
#include "daemon/agent/leader.h"
#include "daemon/common/log.h"
#include "ucx_backend/saddr.h"

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

/* --- losing and rejoining the master ------------------------------------------------------- */

#define REJOIN_FIRST_MS 100u
#define REJOIN_MAX_MS 2000u /* docs/failure-contract.md: reconnect with backoff capped at 2 s */
#define REJOIN_LEADER_MS 25u /* after a new leader: its first refusal (it is still setting
                                up its reign) costs 50 ms, not 200 */
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
        cl->m_silent_since = mc_agent_now_ms();
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

    if (ev == ML_EV_SENT) {
        cl->st.master_requests++;
        master_asked(cl);
    }
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
    cl->rejoin_ms = mc_agent_now_ms() + cl->backoff_ms;
    cl->hb_busy = false;
    master_heard(cl); /* while it is rejoined, master_call fails fast all the same */
    cl->m_refused = false;
    if (cl->a->ml != NULL) /* NULL while the agent starts or stops without a link */
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
    cl->rejoin_ms = mc_agent_now_ms() + cl->backoff_ms;
}

static void segments_forget(struct cluster *cl);

static void rejoined(struct cluster *cl)
{
    struct mc_agent *a = cl->a;

    cl->mstate = M_UP;
    cl->backoff_ms = 0;
    master_heard(cl);
    cl->m_refused = false;
    /* what was queued while we rejoined was asked as the node we were: it fails as every
     * master-bound call during the rejoin does (retryable), never as an empty success,
     * which a GET reads as "no replica" (MC_ERR_NOT_FOUND) */
    ml_reset(a->ml, cl->master, MC_ERR_UNAVAILABLE);
    ml_set_node(a->ml, cl->node);
    cl->next_hb_ms = 0;
    /* a master that forgot us learns again what our segments hold, at once (also with
     * PUBLISHes carried over: what keeps the window open for their owners' late RESTOREs
     * is our "carrying" flag, in HELLO and HEARTBEAT, not our report: review M1, M2) */
    report_held(a);
    mc_info("rejoined the master as node %u%s", cl->node,
            agent_dram_bytes(a) != 0 ? ", DRAM segments mounted" : "");
}

static int mount_encode(struct cluster *cl, uint32_t t, uint8_t **buf_p, size_t *len_p);
static void rejoin_mounted(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                           size_t len);

/* Rejoining: MOUNT the segment of tenant t, or the next tenant's that has one; rejoined
 * after the last. */
static void rejoin_mount_from(struct cluster *cl, uint32_t t)
{
    uint8_t *buf;
    size_t blen;
    int status;

    while (t < agent_nsegs(cl->a) && agent_seg_at(cl->a, t, NULL, NULL) == NULL)
        t++;
    if (t == agent_nsegs(cl->a)) {
        rejoined(cl);
        return;
    }
    cl->mount_next = t;
    status = mount_encode(cl, t, &buf, &blen);
    if (status == 0) {
        cl->mstate = M_MOUNT;
        status = mc_ucx_rpc_call(cl->master, MC_WIRE_MOUNT, buf, blen,
                                 mc_ucx_now_ms() + REJOIN_STEP_MS, rejoin_mounted, cl, NULL);
        free(buf);
    }
    if (status != 0)
        rejoin_failed(cl, "MOUNT", status);
}

static void rejoin_mounted(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                           size_t len)
{
    struct cluster *cl = ctx;
    struct mc_proto_mount_rep rep;
    uint32_t *seg_id;

    (void)hdr;
    if (cl->mstate != M_MOUNT)
        return; /* lost meanwhile */
    if (status == 0)
        status = mc_proto_mount_rep_decode(pl, len, &rep) == 0 ? rep.status : MC_ERR_PROTO;
    if (status != 0) {
        rejoin_failed(cl, "MOUNT", status);
        return;
    }
    agent_seg_at(cl->a, cl->mount_next, NULL, &seg_id);
    if (rep.seg != *seg_id) {
        mc_info("our segment is %u now (was %u): the master forgot what it held", rep.seg,
                *seg_id);
        *seg_id = rep.seg;
    }
    rejoin_mount_from(cl, cl->mount_next + 1);
}

static void rejoin_helloed(void *ctx, int status, const struct mc_wire_hdr *hdr, const void *pl,
                           size_t len)
{
    struct cluster *cl = ctx;
    struct mc_proto_hello_rep rep;

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
        cl->fatal(cl->a, MC_ERR_DENIED);
        return;
    }
    if (status == 0 && cl->leader != NULL && rep.epoch < cl->epoch) {
        /* a master of an older reign (it lost the lead): never follow it */
        mc_warn("the master at %s is of epoch %llu, we follow %llu: refused",
                cl->a->cfg.master_addr, (unsigned long long)rep.epoch,
                (unsigned long long)cl->epoch);
        status = MC_ERR_UNAVAILABLE;
    }
    if (status != 0) {
        rejoin_failed(cl, "HELLO", status);
        return;
    }
    if (rep.node != cl->node)
        mc_info("the master knows us as node %u now (was %u)", rep.node, cl->node);
    cl->node = rep.node;
    cl->a->node = rep.node;
    /* a new master (another process, or a new reign: ids are handed out afresh, the same
     * number may name another segment now): learn the segments again, and give up the
     * PUBLISHes naming them (the owners re-report to the new master). The same master
     * (same incarnation and epoch) keeps its ids: what we knew stays true, and the
     * PUBLISHes still due are sent on (H2: the blip that cut us off from the master may be
     * the one that kept them from their owner) */
    if (rep.incarnation == 0 || rep.incarnation != cl->m_incarnation ||
        rep.epoch != cl->m_epoch) {
        segments_forget(cl);
    } else {
        cl_fences_forget(cl);
        mc_info("rejoined the same master (epoch %llu): %zu PUBLISHes kept",
                (unsigned long long)rep.epoch, cl->pubq.n);
    }
    cl->m_epoch = rep.epoch;
    cl->m_incarnation = rep.incarnation;
    cl->lease_ttl_ms = rep.lease_ttl_ms;
    cl->node_ttl_ms = rep.node_ttl_ms;
    rejoin_mount_from(cl, 0);
}


/* One step of the rejoin, from the tick. */
static void rejoin_step(struct cluster *cl)
{
    uint8_t addr[MC_BOOT_ADDR_MAX], buf[MC_PROTO_TOKEN_MAX + 2 * MC_PROTO_NAME_MAX + 64];
    uint64_t now = mc_agent_now_ms();
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
    err = cl_hello_encode(cl, buf, sizeof(buf), &len);
    if (err == 0) {
        cl->mstate = M_HELLO;
        err = mc_ucx_rpc_call(cl->master, MC_WIRE_HELLO, buf, len, now + REJOIN_STEP_MS,
                              rejoin_helloed, cl, NULL);
    }
    if (err != 0)
        rejoin_failed(cl, "HELLO", err);
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
    cl_inwrites_forget_ep(cl, ep);
    if (user != NULL && user != &cl->accepted_marker) {
        struct peer *p = user;

        mc_info("peer node %u: %s", p->node, mc_strerror(status));
        cl_peer_drop(cl, p, MC_ERR_UNAVAILABLE);
        return;
    }
    mc_ucx_ep_close(ep, true);
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

/* --- following the leader (--etcd) ------------------------------------------------------- */

#define LEADER_POLL_MS 100u

/* The leader etcd names now, if newer than the one we follow: our master from now on. A
 * lower epoch is never followed. Returns whether it changed. */
static bool leader_follow(struct cluster *cl)
{
    struct mc_agent *a = cl->a;
    char addr[128], *dup;
    uint64_t epoch;

    if (cl->leader == NULL || !leader_get(cl->leader, addr, sizeof(addr), &epoch) ||
        epoch <= cl->epoch)
        return false;
    if (strcmp(addr, a->cfg.master_addr) != 0) {
        if ((dup = strdup(addr)) == NULL)
            return false; /* the next tick tries again */
        free(a->cfg.master_addr);
        a->cfg.master_addr = dup;
    }
    if (cl->epoch != 0)
        mc_info("following the leader %s at epoch %llu (was epoch %llu)", addr,
                (unsigned long long)epoch, (unsigned long long)cl->epoch);
    cl->epoch = epoch;
    return true;
}

/* A new leader: leave the old master now and join the new one at once (no backoff). */
static void leader_tick(struct cluster *cl)
{
    if (!leader_follow(cl))
        return;
    if (cl->mstate == M_FETCH)
        mc_boot_fetch_cancel(&cl->bf);
    if (cl->master != NULL)
        master_lost(cl, MC_ERR_UNAVAILABLE);
    cl->mstate = M_DOWN;
    cl->backoff_ms = REJOIN_LEADER_MS;
    cl->rejoin_ms = mc_agent_now_ms();
}

/* Ticks drain the worker before judging anything by the clock: a loop thread that was
 * off its CPU longer than master_timeout_ms (an oversubscribed host) would otherwise find
 * the master "silent" or a transfer past its turn while their answers wait unread in the
 * worker, and fail reads with MC_ERR_UNAVAILABLE although every party is alive. */
#define TICK_DRAIN_MAX 64

void cluster_tick(struct mc_agent *a)
{
    struct cluster *cl = a->cl;
    uint64_t now;

    for (int i = 0; i < TICK_DRAIN_MAX && mc_ucx_progress(cl->u); i++)
        ;
    now = mc_agent_now_ms();

    leader_tick(cl);
    if (cl->m_refused && cl->mstate == M_UP) {
        mc_warn("the master refused our calls as node %u: rejoining", cl->node);
        master_lost(cl, MC_ERR_DENIED);
    }
    if (cl->mstate != M_UP)
        rejoin_step(cl);
    master_silence_check(cl, now);

    if (!cl->hb_busy && now >= cl->next_hb_ms && !cl->leaving && cl->master != NULL &&
        cl->mstate == M_UP) {
        struct mc_proto_heartbeat_req req = {
            .node = cl->node,
            .flags = cl->carry_until_ms != 0 ? MC_PROTO_HEARTBEAT_F_CARRYING : 0};
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
    if (cl->carry_until_ms != 0 && (now >= cl->carry_until_ms || cl_pubs_carried(cl) == 0)) {
        if (now >= cl->carry_until_ms)
            mc_warn("%zu carried-over PUBLISHes not settled in %u ms: the master's "
                    "recovery window is not held for them any more",
                    cl_pubs_carried(cl), PUBLISH_CARRY_MS);
        cl->carry_until_ms = 0;
        cl->next_hb_ms = 0; /* the master learns at once that we carry nothing more */
    }
    cl_owner_tick(cl, now);
    cl_xfer_tick(cl, now);
}

/* --- loop hooks ----------------------------------------------------------------------------- */

bool cluster_turn(struct mc_agent *a)
{
    struct cluster *cl = a->cl;
    bool work = mc_ucx_progress(cl->u), sent;

    /* the reads this turn made ready go out together, one request per owner */
    sent = cl_reads_flush(cl);
    if (ml_flush(a->ml))
        sent = true;
    if (sent) {
        mc_ucx_progress(cl->u);
        work = true;
    }
    return work;
}

static void efd_ready(struct mc_loop_ev *ev, int res, uint32_t flags)
{
    struct cluster *cl = (struct cluster *)((char *)ev - offsetof(struct cluster, efd_ev));

    (void)res;
    (void)flags;
    cl->efd_polled = false; /* the next turn progresses */
}

static void boot_ready(struct mc_loop_ev *ev, int res, uint32_t flags)
{
    struct cluster *cl = (struct cluster *)((char *)ev - offsetof(struct cluster, listen_ev));

    (void)res;
    (void)flags;
    cl->listen_polled = false;
    mc_boot_serve(cl->listen_fd, cl->boot, cl->boot_len);
}

/* A newer leader seen by the leader thread: follow it, and start the rejoin, now. */
static void leader_ready(struct mc_loop_ev *ev, int res, uint32_t flags)
{
    struct cluster *cl = (struct cluster *)((char *)ev - offsetof(struct cluster, leader_ev));

    (void)res;
    (void)flags;
    cl->leader_polled = false;
    (void)!read(leader_fd(cl->leader), &cl->leader_buf, sizeof(cl->leader_buf));
    if (cl->destroying)
        return;
    leader_tick(cl);
    if (cl->mstate != M_UP)
        rejoin_step(cl);
}

/* The bootstrap fetch of a rejoin can go on (the master's address came, or the connect
 * failed). */
static void fetch_ready(struct mc_loop_ev *ev, int res, uint32_t flags)
{
    struct cluster *cl = (struct cluster *)((char *)ev - offsetof(struct cluster, fetch_ev));

    (void)flags;
    cl->fetch_polled = false;
    cl->fetch_cancelling = false;
    if (res != -ECANCELED && !cl->destroying && cl->mstate == M_FETCH &&
        cl->bf.fd == cl->fetch_armed_fd)
        rejoin_step(cl);
}

bool cluster_arm(struct mc_agent *a)
{
    struct cluster *cl = a->cl;

    if (cl_reads_queued(cl) || !mc_ucx_arm(cl->u))
        return false;
    if (cl->leader != NULL && !cl->leader_polled &&
        mc_loop_poll(&a->loop, leader_fd(cl->leader), POLLIN, &cl->leader_ev) == 0)
        cl->leader_polled = true;
    if (cl->fetch_polled && !cl->fetch_cancelling &&
        (cl->mstate != M_FETCH || cl->bf.fd != cl->fetch_armed_fd) &&
        mc_loop_cancel(&a->loop, &cl->fetch_ev) == 0)
        cl->fetch_cancelling = true; /* that fetch is over: its poll ends (-ECANCELED) */
    if (!cl->fetch_polled && cl->mstate == M_FETCH && cl->bf.fd >= 0 &&
        mc_loop_poll(&a->loop, cl->bf.fd, POLLIN, &cl->fetch_ev) == 0) {
        cl->fetch_polled = true;
        cl->fetch_armed_fd = cl->bf.fd;
    }
    if (!cl->efd_polled && mc_loop_poll(&a->loop, mc_ucx_efd(cl->u), POLLIN, &cl->efd_ev) == 0)
        cl->efd_polled = true;
    if (!cl->listen_polled && cl->listen_fd >= 0 &&
        mc_loop_poll(&a->loop, cl->listen_fd, POLLIN, &cl->listen_ev) == 0)
        cl->listen_polled = true;
    return true;
}

unsigned cluster_listen_port(const struct mc_agent *a)
{
    return a->cl != NULL ? a->cl->port : 0;
}

/* --- start-up and exit ---------------------------------------------------------------------- */

/* MOUNT of segment i (agent_seg_at's order: each tenant's DRAM segment, the GPU ones,
 * the disk one) with our worker address, in a malloc'd buffer. */
static int mount_encode(struct cluster *cl, uint32_t i, uint8_t **buf_p, size_t *len_p)
{
    struct mc_agent *a = cl->a;
    uint32_t t;
    struct mc_seg *s = agent_seg_at(a, i, &t, NULL);
    struct mc_proto_mount_req req = {
        .seg = {.node = cl->node, .kind = s->kind, .base = (uint64_t)(uintptr_t)s->base,
                .size = s->size, .quota = a->tcfg[t].quota,
                /* we report what it holds after the MOUNT (report.h): until we say we are
                 * done, the master places nothing in it */
                .flags = mc_seg_holds_any(s) ? MC_MASTER_SEG_F_RESTORING : 0},
    };
    const void *waddr;
    size_t wlen;
    int err;

    snprintf(req.seg.tenant, sizeof(req.seg.tenant), "%s", a->tcfg[t].name);
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
    cl_reign_remember(cl); /* a PUBLISH carried over the change names the old ids */
    cl_segments_forget(cl);
    cl_fences_forget(cl);
    mc_fault_master_changed(&cl->a->fault);
    if (cl_pubs_carried(cl) > 0) {
        cl->carry_until_ms = mc_agent_now_ms() + PUBLISH_CARRY_MS;
        mc_info("%zu PUBLISHes carried over the master change", cl_pubs_carried(cl));
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
        now = mc_agent_now_ms();
        err = mc_boot_fetch(a->cfg.master_addr, deadline > now ? deadline - now : 0, addr,
                            sizeof(addr), &alen);
        if (err != MC_ERR_UNAVAILABLE || mc_agent_now_ms() + 100 >= deadline)
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
            err = cl_hello_encode(cl, buf, sizeof(buf), &len);
        if (err == 0)
            err = sync_call(cl, cl->master, MC_WIRE_HELLO, buf, len, deadline, &sc);
        if (err == 0) {
            err = mc_proto_hello_rep_decode(sc.reply, sc.len, &hrep) == 0 ? hrep.status
                                                                            : MC_ERR_PROTO;
            free(sc.reply);
        }
        if (err != MC_ERR_EXISTS || mc_agent_now_ms() + JOIN_RETRY_MS >= deadline)
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
    if (cl->leader != NULL && hrep.epoch < cl->epoch) {
        mc_error("joining the master at %s: it is of epoch %llu, the leader's is %llu",
                 a->cfg.master_addr, (unsigned long long)hrep.epoch,
                 (unsigned long long)cl->epoch);
        return MC_ERR_UNAVAILABLE;
    }
    cl->node = hrep.node;
    cl->m_epoch = hrep.epoch;
    cl->m_incarnation = hrep.incarnation;
    cl->node_ttl_ms = hrep.node_ttl_ms;
    cl->lease_ttl_ms = hrep.lease_ttl_ms;
    a->node = hrep.node;
    for (uint32_t i = 0; i < agent_nsegs(a); i++) {
        struct mc_proto_mount_rep mrep;
        uint32_t t, *seg_id;
        uint8_t *mbuf;

        if (agent_seg_at(a, i, &t, &seg_id) == NULL)
            continue;
        err = mount_encode(cl, i, &mbuf, &len);
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
            mc_error("mounting the %s segment of tenant \"%s\" at the master: %s",
                     i < a->ntenants ? "DRAM" : "GPU", a->tcfg[t].name, mc_strerror(err));
            return err;
        }
        *seg_id = mrep.seg;
    }
    mc_info("joined the master at %s as node %u (%s)%s", a->cfg.master_addr, cl->node,
            cl->name, agent_dram_bytes(a) != 0 ? ", DRAM segments mounted" : ", holding no data");
    return 0;
}

int cluster_create(struct mc_agent *a, void (*fatal)(struct mc_agent *a, int status))
{
    char keepalive[64], listen_ip[64];
    const char *ucx_cfg[] = {"MM_ERROR_HANDLING=y", keepalive, NULL};
    struct mc_ucx_params up = {.name = "mc-agent", .config = ucx_cfg, .ep_error = on_ep_error};
    uint64_t deadline = mc_agent_now_ms() + a->cfg.connect_timeout_ms;
    struct cluster *cl;
    const void *addr;
    size_t alen;
    int err;

    cl = calloc(1, sizeof(*cl));
    if (cl == NULL)
        return MC_ERR_NOMEM;
    a->cl = cl;
    cl->a = a;
    cl->fatal = fatal;
    cl->listen_fd = -1;
    cl->efd_ev.fn = efd_ready;
    cl->listen_ev.fn = boot_ready;
    cl->leader_ev.fn = leader_ready;
    cl->fetch_ev.fn = fetch_ready;
    cl->fetch_armed_fd = -1;
    mc_resend_init(&cl->pubq, PUBLISH_QUEUE_MAX, PUBLISH_BACKOFF_MIN_MS, PUBLISH_BACKOFF_MAX_MS,
                   PUBLISH_GIVE_UP_MS);
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
    /* tcp receive segments of 256 KiB instead of 64: a 64 KiB transfer (an eager WRITE or
     * READ_REPLY, bulk_eager_max) then arrives in one segment, not two; gets of 64 KiB at
     * batch 32 moved 15-25 % more (docs/decisions.md). The environment wins */
    setenv("UCX_TCP_RX_SEG_SIZE", "256K", 0);
    up.ep_error_ctx = cl;
    up.bulk_eager_max = (size_t)a->cfg.bulk_eager_max;
    /* peers (and the master's answers) reach us through a listener on our own address, so
     * that every endpoint we send on is one UCX tells us about (ucx.h, listen_ip) */
    if (mc_boot_listen_ip(a->cfg.listen, listen_ip, sizeof(listen_ip)) == 0)
        up.listen_ip = listen_ip;
    err = mc_ucx_create(&up, &cl->u);
    if (err != 0) {
        mc_error("UCX: %s", mc_strerror(err));
        return err;
    }
    cl_owner_gpu_setup(cl);
    cl_owner_register(cl);
    mc_ucx_address(cl->u, &addr, &alen);
    if (mc_saddr_is(addr, alen))
        mc_info("UCX listener for peers on %s port %u", listen_ip,
                (unsigned)mc_saddr_port(addr, alen));
    err = mc_boot_msg(addr, alen, &cl->boot, &cl->boot_len);
    if (err == 0)
        err = mc_boot_listen(a->cfg.listen, BOOT_BACKLOG, &cl->listen_fd, &cl->port);
    if (err != 0)
        return err;
    if (a->cfg.etcd != NULL) {
        /* the leader etcd names: wait for one until the deadline */
        uint32_t nsegs = 0;

        for (uint32_t i = 0; i < a->ntenants + a->ngpu; i++)
            nsegs += agent_seg_at(a, i, NULL, NULL) != NULL;
        err = leader_start(a->cfg.etcd, a->cfg.cluster_id, cl->name, nsegs, LEADER_POLL_MS,
                           &cl->leader);
        if (err != 0) {
            mc_error("etcd at %s: %s", a->cfg.etcd, mc_strerror(err));
            return err;
        }
        while (!leader_follow(cl) && mc_agent_now_ms() < deadline)
            poll(NULL, 0, 20);
        if (cl->epoch == 0) {
            mc_error("no leader of cluster %s in etcd at %s within connect_timeout_ms",
                     a->cfg.cluster_id, a->cfg.etcd);
            return MC_ERR_UNAVAILABLE;
        }
        mc_info("the leader of cluster %s is %s (epoch %llu)", a->cfg.cluster_id,
                a->cfg.master_addr, (unsigned long long)cl->epoch);
    }
    err = join(cl, deadline);
    if (err != 0)
        return err;
    cl->mstate = M_UP;
    err = ml_create_remote(cl->master, cl->node, a->cfg.op_timeout_ms, &a->ml);
    if (err == 0) {
        ml_set_events(a->ml, ml_event_cb, cl);
        report_held(a); /* queued: goes out with the loop's first turn */
    }
    a->rio = (struct mc_rio){.ops = &mc_rio_ucx_ops, .impl = cl};
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
        sync_call(cl, cl->master, MC_WIRE_HEARTBEAT, buf, len, mc_agent_now_ms() + 1000, &sc) ==
            0) {
        free(sc.reply);
        mc_info("left the cluster");
    }
}

void cluster_destroy(struct mc_agent *a)
{
    struct cluster *cl = a->cl;
    if (cl == NULL)
        return;
    if (cl->mstate == M_FETCH)
        mc_boot_fetch_cancel(&cl->bf);
    /* what is still under way fails through its callbacks (a peer's pending HELLO drops it
     * there); nothing new starts meanwhile */
    cl->destroying = true;
    leader_stop(cl->leader);
    cl_owner_gpu_release(cl);
    mc_ucx_destroy(cl->u);
    cl->u = NULL;
    cl_xfer_destroy(cl);
    cl_owner_destroy(cl);
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

void cluster_leader_add(const struct mc_agent *a, json_t *o)
{
    const struct cluster *cl = a->cl;

    if (cl == NULL || cl->leader == NULL)
        return;
    json_object_set_new(o, "leader", json_string(a->cfg.master_addr));
    json_object_set_new(o, "epoch", json_integer((json_int_t)cl->epoch));
    json_object_set_new(o, "etcd", json_boolean(leader_etcd_ok(cl->leader)));
    {
        /* the masters standing by: the members etcd lists, but the one we follow */
        char list[LEADER_MEMBERS_MAX * 128];
        json_t *sb = json_array();
        char *save = NULL, *tok;

        if (sb != NULL && leader_members(cl->leader, list, sizeof(list))) {
            for (tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save))
                if (a->cfg.master_addr == NULL || strcmp(tok, a->cfg.master_addr) != 0)
                    json_array_append_new(sb, json_string(tok));
            json_object_set_new(o, "standbys", sb);
        } else {
            json_decref(sb);
            json_object_set_new(o, "standbys", json_null());
        }
    }
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
    json_object_set_new(o, "read_requests_to_peers",
                        json_integer((json_int_t)cl->st.read_batches_out));
    json_object_set_new(o, "master_requests",
                        json_integer((json_int_t)cl->st.master_requests));
    json_object_set_new(o, "master_get_requests",
                        json_integer((json_int_t)ml_sent(a->ml, ML_GET)));
    json_object_set_new(o, "master_put_end_requests",
                        json_integer((json_int_t)ml_sent(a->ml, ML_PUT_END)));
    json_object_set_new(o, "master_lease_release_requests",
                        json_integer((json_int_t)ml_sent(a->ml, ML_LEASE_RELEASE)));
    json_object_set_new(o, "bytes_from_peers", json_integer((json_int_t)cl->st.read_bytes_in));
    json_object_set_new(o, "writes_served", json_integer((json_int_t)cl->st.writes_in));
    json_object_set_new(o, "reads_served", json_integer((json_int_t)cl->st.reads_in));
    json_object_set_new(o, "gpu_staged_reads", json_integer((json_int_t)cl->st.staged_out));
    json_object_set_new(o, "gpu_staged_writes", json_integer((json_int_t)cl->st.staged_in));
    json_object_set_new(o, "gpu_direct_reads", json_integer((json_int_t)cl->st.direct_out));
    json_object_set_new(o, "gpu_direct_writes", json_integer((json_int_t)cl->st.direct_in));
    json_object_set_new(o, "peer_refused", json_integer((json_int_t)cl->st.refused));
    json_object_set_new(o, "peer_errors", json_integer((json_int_t)cl->st.peer_errors));
    json_object_set_new(o, "read_failovers", json_integer((json_int_t)cl->st.failovers));
    json_object_set_new(o, "reads_hedged", json_integer((json_int_t)cl->st.hedged));
    json_object_set_new(o, "reads_into_arena", json_integer((json_int_t)cl->st.arena_reads));
    json_object_set_new(o, "arena_reads_cut", json_integer((json_int_t)cl->st.arena_cuts));
    json_object_set_new(o, "arena_tails_in_header",
                        json_integer((json_int_t)cl->st.arena_tails_hdr));
    json_object_set_new(o, "write_tails_in_header",
                        json_integer((json_int_t)cl->st.write_tails_hdr));
    json_object_set_new(o, "drain_copies_out", json_integer((json_int_t)cl->st.copies_out));
    json_object_set_new(o, "drain_copies_late", json_integer((json_int_t)cl->st.copies_late));
    json_object_set_new(o, "published_out", json_integer((json_int_t)cl->st.published_out));
    json_object_set_new(o, "publish_retries", json_integer((json_int_t)cl->pubq.retried));
    json_object_set_new(o, "publish_given_up", json_integer((json_int_t)cl->pubq.given_up));
    json_object_set_new(o, "publish_queued", json_integer((json_int_t)cl->pubq.n));
    json_object_set_new(o, "published_in", json_integer((json_int_t)cl->st.published_in));
    json_object_set_new(o, "late_restored", json_integer((json_int_t)cl->st.late_restored));
    json_object_set_new(o, "late_refused", json_integer((json_int_t)cl->st.late_refused));
    json_object_set_new(o, "drops_in", json_integer((json_int_t)cl->st.drops_in));
    json_object_set_new(o, "disk_read_timeouts",
                        json_integer((json_int_t)cl->st.disk_read_timeouts));
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
        AM_PEER_ERRORS, AM_READ_FAILOVERS, AM_READS_HEDGED, AM_READS_INTO_ARENA,
        AM_ARENA_READS_CUT, AM_ARENA_TAILS_IN_HEADER, AM_WRITE_TAILS_IN_HEADER,
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
    v[AM_READS_INTO_ARENA] = cl->st.arena_reads;
    v[AM_ARENA_READS_CUT] = cl->st.arena_cuts;
    v[AM_ARENA_TAILS_IN_HEADER] = cl->st.arena_tails_hdr;
    v[AM_WRITE_TAILS_IN_HEADER] = cl->st.write_tails_hdr;
    for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        present[ids[i]] = 1;
}

