/*
 * The agent (agent.h): its segments, its master link, its clients and its loop. This file
 * builds the rooms and runs the loop turn; what happens inside a turn is theirs
 * (docs/architecture.md, "The agent").
 *
 * The loop turn: take every client's submissions (client.c; each op goes to ops.c), move
 * at most copy_slice bytes of put copies in total (put.c: one large object never stalls
 * the other clients, the timer or the socket), progress the cluster (UCX, the master
 * link), answer and wake the clients, then either poll again (a client was active within
 * agent_spin_us) or sleep in the loop on every client's doorbell, the sockets, a timer
 * (the tick) and a signalfd (SIGTERM).
 */
#include "daemon/agent/agent_int.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc.h>
#include <mc/mc_status.h>

#include "daemon/agent/cluster.h"
#include "daemon/agent/disk_tier.h"
#include "daemon/agent/gpu.h"
#include "daemon/agent/holdidx.h"
#include "daemon/agent/info.h"
#include "daemon/agent/lease.h"
#include "daemon/agent/ops.h"
#include "daemon/agent/pin.h"
#include "daemon/agent/put.h"
#include "daemon/common/log.h"
#include "daemon/common/metrics.h"
#include "daemon/common/notify.h"

#define LOOP_ENTRIES 1024

/* The agent hands a client's ttl_ms to the master as is: both must refuse the same TTLs. */
_Static_assert(MC_MASTER_TTL_MAX_MS == MC_TTL_MAX_MS, "the master's TTL bound is mc.h's");

/* --- the client hooks ------------------------------------------------------------------- */

static int hook_attach(void *ctx, struct client *c)
{
    (void)ctx;
    if (put_attach(c) != 0 || lease_attach(c) != 0)
        return MC_ERR_NOMEM; /* hook_detach frees what was made */
    return 0;
}

static void hook_detach(void *ctx, struct client *c)
{
    struct mc_agent *a = ctx;

    agent_spin_client_gone(&a->spin, c->r != NULL &&
                                         atomic_load(&c->r->cq->consumer_spinning) != 0);
    put_detach(c);
    lease_detach(c);
    pin_detach(c);
}

static void hook_closing(void *ctx, struct client *c)
{
    put_client_closing(ctx, c);
    lease_client_closing(ctx, c);
    pin_client_closing(ctx, c);
}

/* --- stopping --------------------------------------------------------------------------- */

/* No new clients and no new ops; stop once what is under way is answered (or after the
 * op deadline). */
static void drain_start(struct mc_agent *a)
{
    a->draining = true;
    a->drain_deadline_ms = mc_agent_now_ms() + a->cfg.op_timeout_ms;
    clients_drain(&a->cs);
}

/* The agent cannot go on (status says why, e.g. MC_ERR_DENIED): it drains as on SIGTERM
 * and mc_agent_run then returns status. */
static void agent_fatal(struct mc_agent *a, int status)
{
    if (a->exit_status == 0)
        a->exit_status = status;
    if (!a->draining)
        drain_start(a);
}

/* --- the mode: what the loop does for the master link ------------------------------------ */

/* A standalone agent is a cluster of one: its master is in-process, so the tick drives it
 * and there is nothing to progress, to wait on or to leave. A cluster agent's are
 * cluster.c's. The loop calls through this table and never asks which mode it is in. */
struct agent_mode {
    const char *name;
    void (*tick)(struct mc_agent *a);
    bool (*turn)(struct mc_agent *a);  /* progress: true when anything happened */
    bool (*arm)(struct mc_agent *a);   /* before sleeping: false when events are pending */
    void (*leave)(struct mc_agent *a); /* graceful exit */
};

/* The blocks of published objects our master freed leave our segments' indexes
 * (holdidx.h), as an owner in a cluster hears through DROP. */
static void local_drops(struct mc_agent *a)
{
    struct mc_master_drop d[256];
    uint64_t now = mc_agent_now_ms();
    size_t n, i;

    while ((n = mc_master_drops_take(a->master, d, 256)) > 0) {
        for (i = 0; i < n; i++) {
            struct mc_seg *s = agent_seg(a, d[i].seg);

            if (d[i].kind == MC_MASTER_DROP_RETIRED) {
                if (s != NULL && s->kind == MC_SEG_DISK)
                    agent_disk_mark_removed(a, d[i].offset, d[i].version);
            } else if (s != NULL && s->kind == MC_SEG_DISK)
                agent_disk_drop(a, d[i].offset, d[i].version); /* erased, too */
            else if (s != NULL && s->held != NULL)
                (void)mc_holdidx_drop(s->held, d[i].offset, d[i].version, now);
        }
    }
    for (i = 0; i < a->ntenants; i++) {
        if (a->ten[i].seg != NULL && a->ten[i].seg->held != NULL)
            mc_holdidx_expire(a->ten[i].seg->held, now);
    }
}

struct local_held {
    struct mc_agent *a;
    struct ml_req *r;
};

static void local_erased(void *ctx, int status)
{
    struct local_held *h = ctx;

    (void)status; /* CANCELED: the agent stops; done sees its client closing */
    ml_req_end(h->a->ml, h->r);
    free(h);
}

/*
 * The in-process master's answers that free disk records (a remove, a put replacing an
 * object) wait until their tombstones are durable: the master dies with us, so a record
 * whose erase a kill -9 cut short would come back at the restart with nothing to refuse
 * it (docs/disk.md, "Frees and erases").
 */
static bool local_hook(void *ctx, struct ml_req *r)
{
    struct mc_agent *a = ctx;
    struct local_held *h;
    uint64_t mark;

    if (a->disk == NULL || (r->kind != ML_REMOVE && r->kind != ML_REMOVE_PREFIX &&
                            r->kind != ML_PUT_END))
        return false;
    local_drops(a);
    /* every erase under way, not only this call's: one the tick started (a record the
     * disk evicted, a lease that ended) may be an older version of this very key (review
     * D4); none running: answered now */
    mark = agent_disk_erase_mark(a);
    h = malloc(sizeof(*h));
    if (h == NULL)
        return false;
    *h = (struct local_held){.a = a, .r = r};
    if (agent_disk_after_erases(a, mark, local_erased, h))
        return true;
    free(h);
    return false;
}

static void local_tick(struct mc_agent *a)
{
    mc_master_node_heartbeat(a->master, a->node);
    mc_master_tick(a->master);
    local_drops(a); /* first: a copy may reuse a freed disk extent, whose erase it waits for */
    agent_disk_local_copies(a);
}

/* With a disk, the copies to it that a put's eviction made start at once, not on the next
 * tick: the DRAM blocks they hold are what the next put needs (drops first, as above). */
static bool local_turn(struct mc_agent *a)
{
    if (a->disk == NULL || !mc_master_copies_pending(a->master))
        return false;
    local_drops(a);
    agent_disk_local_copies(a);
    return true;
}

static bool local_arm(struct mc_agent *a)
{
    (void)a;
    return true;
}

static void local_leave(struct mc_agent *a)
{
    (void)a;
}

static const struct agent_mode standalone_mode = {
    .name = "standalone", .tick = local_tick, .turn = local_turn, .arm = local_arm,
    .leave = local_leave,
};

static const struct agent_mode cluster_mode = {
    .name = "cluster", .tick = cluster_tick, .turn = cluster_turn, .arm = cluster_arm,
    .leave = cluster_leave,
};

/* --- the tick and the signals ----------------------------------------------------------- */

static void on_tick(struct mc_loop_ev *ev, int res, uint32_t flags)
{
    struct mc_agent *a = (struct mc_agent *)((char *)ev - offsetof(struct mc_agent, timer_ev));
    uint64_t now = mc_agent_now_ms();
    uint32_t polling = 0;
    struct client *c;

    (void)res;
    (void)flags;
    a->mode->tick(a);
    agent_disk_tick(a, now);
    put_parked_retry(a, 0); /* their deadlines are put_granted's to check */
    clients_tick(&a->cs, now);
    for (c = a->cs.list; c != NULL; c = c->next) {
        if (c->state != CL_ACTIVE)
            continue;
        put_tick(a, c, now);
        lease_tick(a, c, now);
        polling += atomic_load(&c->r->cq->consumer_spinning) != 0;
        pin_tick(a, c, now);
    }
    agent_spin_repair(&a->spin, polling, a->cs.n);
    if (!a->stopping)
        mc_loop_read(&a->loop, a->timer_fd, &a->timer_buf, sizeof(a->timer_buf), &a->timer_ev);
}

static void on_signal(struct mc_loop_ev *ev, int res, uint32_t flags)
{
    struct mc_agent *a = (struct mc_agent *)((char *)ev - offsetof(struct mc_agent, signal_ev));

    (void)flags;
    if (res > 0 && !a->draining) {
        mc_info("signal received: finishing in-flight operations, then stopping");
        mc_notify_stopping();
        drain_start(a);
    } else if (res > 0) {
        a->stopping = true; /* a second signal: stop now */
    }
    if (!a->stopping)
        mc_loop_read(&a->loop, a->signal_fd, a->signal_buf, sizeof(a->signal_buf),
                     &a->signal_ev);
}

/* --- the loop --------------------------------------------------------------------------- */

static bool client_busy(const struct client *c)
{
    return put_client_busy(c);
}

/* One pass over the clients: take submissions, move bytes, answer. True when any work. */
static bool serve_clients(struct mc_agent *a)
{
    uint64_t now = mc_agent_now_ms();
    bool work = false;

    if (mc_fault_pending(&a->fault)) {
        mc_fault_run_due(&a->fault, now);
        work = true; /* keep polling until they are all out */
    }
    if (clients_take(&a->cs))
        work = true;
    if (put_copy_round(a, a->cfg.copy_slice, now))
        work = true;
    clients_answer(&a->cs);
    return work;
}

int mc_agent_run(struct mc_agent *a)
{
    int err;

    err = clients_start(&a->cs);
    if (err == 0)
        err = mc_loop_read(&a->loop, a->timer_fd, &a->timer_buf, sizeof(a->timer_buf),
                           &a->timer_ev);
    if (err == 0)
        err = mc_loop_read(&a->loop, a->signal_fd, a->signal_buf, sizeof(a->signal_buf),
                           &a->signal_ev);
    if (err != 0)
        return err;
    a->last_active_ns = mc_agent_now_ns();
    if (a->metrics != NULL)
        agent_metrics_publish(a);
    while (!a->stopping) {
        bool work = serve_clients(a);
        uint64_t t;

        if (a->mode->turn(a))
            work = true;
        if (agent_disk_turn(a))
            work = true;
        t = mc_agent_now_ns();
        agent_spin_sample(&a->spin, t, a->cs.st.sqes);
        /* the metrics page reads a copy at most ~10 ms old (and the timer wakes an idle
         * loop every tick_ms) */
        if (a->metrics != NULL && t - a->metrics_pub_ns >= 10000000u) {
            a->metrics_pub_ns = t;
            agent_metrics_publish(a);
        }
        if (a->draining && ((clients_idle(&a->cs, client_busy) && !mc_fault_pending(&a->fault)) ||
                            t / 1000000u >= a->drain_deadline_ms))
            break; /* every op answered (or the grace ran out): now stop */

        if (work)
            a->last_active_ns = t;
        /* a busy host: sleep at once, our polling only delays who we wait for */
        if (work || a->dev_polling ||
            (t - a->last_active_ns < a->cfg.agent_spin_us * 1000u && !agent_spin_busy(&a->spin)) ||
            !clients_arm_doorbells(&a->cs, client_busy) || !a->mode->arm(a)) {
            mc_loop_submit(&a->loop); /* spinning: no waiting */
            /* an idle spin yields the CPU: on a small machine the client we wait for may
             * be queued behind us on this very core (docs/decisions.md) */
            if (!work)
                sched_yield();
        } else {
            /* without the futex ops, poll the rings every millisecond instead */
            mc_loop_wait(&a->loop, mc_loop_has_futex(&a->loop) && !a->draining ? -1 : 1000000);
            clients_clear_doorbells(&a->cs);
        }
        mc_loop_dispatch(&a->loop);
    }
    if (a->metrics != NULL)
        mc_metrics_set_health(a->metrics, "stopping");
    return a->exit_status;
}

void mc_agent_stop(struct mc_agent *a)
{
    a->stopping = true;
}

int mc_agent_test_fault(struct mc_agent *a, const char *spec)
{
    return mc_fault_parse(&a->fault, spec);
}

unsigned mc_agent_listen_port(const struct mc_agent *a)
{
    return cluster_listen_port(a);
}

/* --- start and exit --------------------------------------------------------------------- */

static char *dup_or_null(const char *s)
{
    return s == NULL ? NULL : strdup(s);
}

/* The tenants (the default one at least) and their DRAM segments; the clients' view of them
 * is filled once the landing segments exist. */
static int tenants_create(struct mc_agent *a)
{
    const struct mc_agent_config *cfg = &a->cfg;
    char err[256], name[MC_TENANT_NAME_MAX + 16];
    size_t n;
    int rc;

    rc = tenant_cfg_parse(cfg->tenants, cfg->dram, &a->tcfg, &n, err, sizeof(err));
    if (rc != 0) {
        mc_error("%s", rc == MC_ERR_INVALID ? err : mc_strerror(rc));
        return rc;
    }
    a->ntenants = (uint32_t)n;
    a->ten = calloc(n, sizeof(*a->ten));
    a->cs.tenants = calloc(n, sizeof(*a->cs.tenants));
    if (a->ten == NULL || a->cs.tenants == NULL)
        return MC_ERR_NOMEM;
    a->cs.tcfg = a->tcfg;
    a->cs.ntenants = a->ntenants;
    for (uint32_t t = 0; t < a->ntenants; t++) {
        struct agent_tenant *ten = &a->ten[t];

        ten->seg_id = UINT32_MAX;
        if (a->tcfg[t].dram == 0)
            continue;
        snprintf(name, sizeof(name), "mc-dram%s%s", t > 0 ? "-" : "", a->tcfg[t].name);
        rc = mc_seg_dram_create(name, a->tcfg[t].dram, cfg->hugepages, cfg->prefault,
                                &ten->seg);
        if (rc != 0) {
            mc_error("DRAM segment of %" PRIu64 " bytes: %s", a->tcfg[t].dram,
                     mc_strerror(rc));
            return rc;
        }
        if (cfg->hugepages && !ten->seg->huge)
            mc_warn("no huge pages available: the DRAM segment uses normal pages");
        if (t > 0)
            mc_info("tenant %s: %" PRIu64 " bytes of DRAM here, quota %" PRIu64 " bytes",
                    a->tcfg[t].name, a->tcfg[t].dram, a->tcfg[t].quota);
    }
    return 0;
}

/* Standalone: the master in-process, this node and its segments registered there. */
static int standalone_create(struct mc_agent *a)
{
    const struct mc_agent_config *cfg = &a->cfg;
    struct mc_master_seg_desc d;
    char host[64];
    uint32_t t;
    int err;

    err = mc_master_create(&cfg->master, NULL, NULL, &a->master);
    if (err != 0)
        return err;
    mc_master_drops_enable(a->master, true);
    if (cfg->node_name == NULL && gethostname(host, sizeof(host)) != 0)
        strcpy(host, "local");
    host[sizeof(host) - 1] = '\0';
    err = mc_master_node_register(a->master, cfg->node_name ? cfg->node_name : host, NULL,
                                  &a->node);
    if (err != 0)
        return err;
    a->put_size_max = 0;
    for (t = 0; t < a->ntenants && err == 0; t++) {
        struct mc_seg *s = a->ten[t].seg;

        if (s == NULL)
            continue;
        d = (struct mc_master_seg_desc){.node = a->node, .kind = s->kind,
                                        .base = (uint64_t)(uintptr_t)s->base, .size = s->size,
                                        .quota = a->tcfg[t].quota,
                                        .flags = mc_seg_holds_any(s)
                                                     ? MC_MASTER_SEG_F_RESTORING
                                                     : 0};
        snprintf(d.tenant, sizeof(d.tenant), "%s", a->tcfg[t].name);
        err = mc_master_segment_mount(a->master, &d, &a->ten[t].seg_id);
        if (s->size > a->put_size_max)
            a->put_size_max = s->size; /* one node: every replica is here */
    }
    if (err == 0)
        err = agent_gpus_mount_local(a, a->master);
    if (err == 0)
        err = agent_disk_mount_local(a, a->master);
    if (err == 0)
        err = ml_create_local(a->master, &a->ml);
    if (err == 0) {
        ml_set_local_hook(a->ml, local_hook, a);
        report_held(a);
    }
    a->rio = (struct mc_rio){.ops = &mc_rio_local_ops, .impl = a};
    a->mode = &standalone_mode;
    return err;
}

/* Cluster: reads from peers land in a segment of their own, one per tenant, which its
 * clients map read-only like its DRAM segment; then the join (cluster.c). */
static int cluster_mode_create(struct mc_agent *a)
{
    const struct mc_agent_config *cfg = &a->cfg;
    uint32_t t;
    int err = 0;

    for (t = 0; t < a->ntenants && err == 0; t++) {
        struct agent_tenant *ten = &a->ten[t];

        err = mc_seg_dram_create("mc-landing", cfg->landing, false, cfg->prefault,
                                 &ten->land_seg);
        if (err == 0)
            err = mc_alloc_create(cfg->landing, MC_SHM_CHUNK / 16, &ten->land);
        if (err != 0) {
            mc_error("landing segment of %" PRIu64 " bytes: %s", cfg->landing,
                     mc_strerror(err));
            return err;
        }
        ten->land_idx = ten->seg != NULL ? 1 : 0;
    }
    a->put_size_max = UINT64_MAX; /* the master knows where it fits */
    a->mode = &cluster_mode; /* set first: a join that fails half-way still leaves */
    return cluster_create(a, agent_fatal);
}

int mc_agent_create(const struct mc_agent_config *cfg, const char *socket_path,
                    struct mc_agent **a_p)
{
    struct client_hooks hooks = {.run = ops_run, .attach = hook_attach, .detach = hook_detach,
                                 .closing = hook_closing};
    struct itimerspec its;
    sigset_t sigs;
    struct mc_agent *a;
    int err;

    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return MC_ERR_NOMEM;
    a->cfg = *cfg;
    a->open_put_limit = cfg->open_put_bytes_per_client;
    if (a->open_put_limit == 0)
        a->open_put_limit = cfg->master_addr == NULL && cfg->dram / 4 < (UINT64_C(1) << 30)
                                ? cfg->dram / 4
                                : UINT64_C(1) << 30;
    a->cfg.socket = NULL;
    a->cfg.node_name = dup_or_null(cfg->node_name);
    a->cfg.master_addr = dup_or_null(cfg->master_addr);
    a->cfg.etcd = dup_or_null(cfg->etcd);
    a->cfg.cluster_id = dup_or_null(cfg->cluster_id);
    a->cfg.listen = dup_or_null(cfg->listen);
    a->cfg.domain = dup_or_null(cfg->domain);
    a->cfg.cluster_token = dup_or_null(cfg->cluster_token);
    a->cfg.allow_uids = dup_or_null(cfg->allow_uids);
    a->cfg.allow_gids = dup_or_null(cfg->allow_gids);
    a->cfg.tenants = dup_or_null(cfg->tenants);
    a->cfg.metrics_listen = NULL; /* read in this call only */
    a->socket_path = strdup(socket_path);
    a->timer_fd = a->signal_fd = -1;
    a->cs.listen_fd = -1;
    a->cs.node_fd = -1;
    a->spin.fd = a->spin.stat_fd = -1;
    a->timer_ev.fn = on_tick;
    a->signal_ev.fn = on_signal;
    if (a->socket_path == NULL) {
        err = MC_ERR_NOMEM;
        goto err_destroy;
    }
    /* before the segments: allocating (and prefaulting) gigabytes only to find the socket
     * taken would make a second agent slow to fail and squeeze the live one meanwhile;
     * clients_open checks again, for an agent that started in between */
    if (clients_path_is_live(a->socket_path)) {
        mc_error("another agent is listening on %s", a->socket_path);
        err = MC_ERR_EXISTS;
        goto err_destroy;
    }

    /* the metrics thread starts before the cluster join, so /ready says 503 while the
     * agent joins (main.c blocked the signals first: it inherits the mask) */
    if (cfg->metrics_listen != NULL) {
        err = mc_metrics_create(mc_agent_metrics_table, cfg->metrics_listen, &a->metrics,
                                NULL);
        if (err != 0)
            goto err_destroy;
        a->cs.h_put = mc_metrics_histo(a->metrics, AM_PUT_LATENCY);
        a->cs.h_get = mc_metrics_histo(a->metrics, AM_GET_LATENCY);
    }

    err = tenants_create(a);
    if (err == 0)
        err = agent_gpus_create(a, cfg->gpu);
    a->cfg.gpu = NULL; /* read in this call only */
    if (err == 0)
        err = agent_disk_create(a);
    a->cfg.disk = NULL; /* read in this call only */
    if (err != 0)
        goto err_destroy;
    err = cfg->master_addr != NULL ? cluster_mode_create(a) : standalone_create(a);
    if (err == 0)
        err = agent_gpus_rio_wrap(a);
    if (err == 0)
        err = agent_disk_rio_wrap(a);
    if (err != 0)
        goto err_destroy;
    /* what each tenant's clients map, in the order of the segment index */
    for (uint32_t t = 0; t < a->ntenants; t++) {
        struct client_tenant *ct = &a->cs.tenants[t];

        if (a->ten[t].seg != NULL)
            ct->segs[ct->nsegs++] = (struct client_seg){a->ten[t].seg->ro_fd,
                                                        a->ten[t].seg->size};
        if (a->ten[t].land_seg != NULL) /* at its land_idx */
            ct->segs[ct->nsegs++] = (struct client_seg){a->ten[t].land_seg->ro_fd,
                                                        a->ten[t].land_seg->size};
    }

    err = mc_loop_init(&a->loop, LOOP_ENTRIES, (enum mc_loop_kind)cfg->loop);
    if (err != 0) {
        mc_error("the event loop: %s", mc_strerror(err));
        goto err_destroy;
    }
    err = agent_disk_loop_start(a);
    if (err != 0) {
        mc_error("the event loop: polling the disk's completions: %s", mc_strerror(err));
        goto err_destroy;
    }
    if (a->loop.uring_err != 0)
        mc_warn("io_uring unavailable (%s): the event loop uses epoll",
                strerror(-a->loop.uring_err));
    if (!mc_loop_has_futex(&a->loop))
        mc_warn("no futex waits in the %s loop: polling client rings every 1 ms",
                mc_loop_name(&a->loop));

    err = agent_spin_init(&a->spin, cfg->adaptive_wait); /* this thread: the loop's */
    if (err != 0)
        mc_warn("adaptive waiting off (polling by count only): %s", mc_strerror(err));
    a->cs.node_fd = a->spin.fd;

    a->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    its.it_interval.tv_sec = (time_t)(cfg->master.tick_ms / 1000);
    its.it_interval.tv_nsec = (long)(cfg->master.tick_ms % 1000) * 1000000L;
    its.it_value = its.it_interval;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    a->signal_fd = signalfd(-1, &sigs, SFD_CLOEXEC);
    if (a->timer_fd < 0 || a->signal_fd < 0 || timerfd_settime(a->timer_fd, 0, &its, NULL) != 0) {
        err = MC_ERR_IO;
        goto err_destroy;
    }
    hooks.ctx = a;
    err = clients_open(&a->cs, &a->cfg, &a->loop, &hooks, a->socket_path);
    if (err != 0)
        goto err_destroy;
    mc_info("agent up (%s): socket %s, DRAM %" PRIu64 " bytes%s, loop %s, futex waits %s",
            a->mode->name, a->socket_path, agent_dram_bytes(a),
            agent_huge(a) ? " (huge pages)" : "", mc_loop_name(&a->loop),
            mc_loop_has_futex(&a->loop) ? "yes" : "no");
    /* joined and listening: /ready says so before the ready file is written (main.c), so
     * that whoever saw the file never sees 503 (connections wait in the backlog until the
     * loop runs); the page and /health hold the figures before that, or a scrape between
     * the ready file and the loop's first turn saw no samples and a 503 */
    if (a->metrics != NULL) {
        agent_metrics_publish(a);
        mc_metrics_set_ready(a->metrics, true);
    }
    *a_p = a;
    return 0;

err_destroy:
    mc_agent_destroy(a);
    return err;
}

void mc_agent_destroy(struct mc_agent *a)
{
    if (a == NULL)
        return;
    mc_fault_cleanup(&a->fault);
    clients_close_all(&a->cs);
    /* transfers and master calls under way end now (their callbacks see closing clients),
     * before the clients they hold go; answers waiting for disk erases too */
    put_parked_retry(a, MC_ERR_CANCELED);
    agent_disk_cancel_waiters(a);
    if (a->mode != NULL)
        a->mode->leave(a);
    cluster_destroy(a);
    ml_destroy(a->ml);
    a->ml = NULL;
    clients_cleanup(&a->cs, a->socket_path);
    agent_disk_destroy(a); /* its I/O waited for, before the loop and the segments go */
    mc_loop_cleanup(&a->loop);
    agent_spin_cleanup(&a->spin);
    if (a->timer_fd >= 0)
        close(a->timer_fd);
    if (a->signal_fd >= 0)
        close(a->signal_fd);
    mc_master_destroy(a->master);
    put_images_release(a);
    agent_gpus_destroy(a);
    for (uint32_t t = 0; t < a->ntenants; t++) {
        mc_alloc_destroy(a->ten[t].land);
        mc_seg_destroy(a->ten[t].land_seg);
        mc_seg_destroy(a->ten[t].seg);
    }
    free(a->ten);
    free(a->cs.tenants);
    tenant_cfg_free(a->tcfg, a->ntenants);
    free(a->cfg.tenants);
    mc_metrics_destroy(a->metrics); /* its thread reads nothing of ours: any order */
    free(a->cfg.allow_uids);
    free(a->cfg.allow_gids);
    free(a->cfg.node_name);
    free(a->cfg.master_addr);
    free(a->cfg.etcd);
    free(a->cfg.cluster_id);
    free(a->cfg.listen);
    free(a->cfg.domain);
    if (a->cfg.cluster_token != NULL) {
        memset(a->cfg.cluster_token, 0, strlen(a->cfg.cluster_token));
        free(a->cfg.cluster_token);
    }
    free(a->socket_path);
    free(a);
}
