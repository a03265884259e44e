/*
 * Leader election on etcd (elect.h): the campaign thread.
 */
#include "daemon/mcmaster/elect.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "daemon/common/etcd.h"
#include "daemon/common/log.h"
#include "daemon/common/nap.h"

struct mc_elect {
    struct mc_elect_config cfg;
    char *endpoints, *advertise;
    char key[128];
    struct mc_etcd *etcd;
    int efd;                     /* mc_elect_fd */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    struct mc_elect_view v;      /* under mu */
    _Atomic uint64_t serve_until; /* a copy of v.serve_until_ms for the loop's every request */
    _Atomic uint64_t reign;       /* a copy of v.reign, for the same */
    _Atomic uint64_t vend;        /* a copy of v.version_end, for the loop's puts */
    _Atomic uint64_t vused;       /* the loop's version counter (mc_elect_versions_used) */
    char vkey[128];               /* mc_elect_versions_key */
    char akey[128];               /* mc_elect_agents_prefix */
    /* the agents registered when we last won (under mu): for reign agents_reign, n of
     * them, or -1 when not known */
    struct mc_elect_agent *agents, *agents_scratch;
    int nagents;
    uint64_t agents_reign;
    int64_t lease;
    uint64_t ttl_ms;             /* the lease's TTL as etcd granted it */
    uint32_t rounds;             /* renewals of this reign: the key is read back every 4th */
    bool renew_failed;           /* the last renewal failed: try again soon */
    /* the member key (mc_elect_members_prefix + advertise): its own thread, etcd handle and
     * lease, so that it never delays the leader's renewals */
    char member_key[320];
    struct mc_etcd *member_etcd;
    pthread_t member_thread;
};

uint64_t mc_elect_now_ms(void)
{
    struct timespec ts;

    /* BOOTTIME: it also counts a suspend, which MONOTONIC leaves out -- a leader suspended
     * past its lease must not wake up believing it still holds it */
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int mc_elect_key(const char *cluster_id, char *buf, size_t cap)
{
    return mc_etcd_cluster_key(cluster_id, "leader", buf, cap);
}

int mc_elect_members_prefix(const char *cluster_id, char *buf, size_t cap)
{
    return mc_etcd_cluster_key(cluster_id, "members/", buf, cap);
}

int mc_elect_versions_key(const char *cluster_id, char *buf, size_t cap)
{
    return mc_etcd_cluster_key(cluster_id, "versions", buf, cap);
}

int mc_elect_agents_prefix(const char *cluster_id, char *buf, size_t cap)
{
    return mc_etcd_cluster_key(cluster_id, "agents/", buf, cap);
}

int mc_elect_agent_parse(const char *value, struct mc_elect_agent *out)
{
    unsigned long v = 0;
    size_t i, n;

    for (i = 0; value[i] >= '0' && value[i] <= '9'; i++) {
        if (i >= 4)
            return MC_ERR_PROTO;
        v = v * 10 + (unsigned long)(value[i] - '0');
    }
    if (i == 0 || value[i] != ' ' || v > 1024)
        return MC_ERR_PROTO;
    value += i + 1;
    n = strlen(value);
    if (n == 0 || n >= sizeof(out->name) || strpbrk(value, " /") != NULL)
        return MC_ERR_PROTO;
    memcpy(out->name, value, n + 1);
    out->nsegs = (uint32_t)v;
    return 0;
}

struct agents_walk {
    struct mc_elect_agent *out;
    int n;
    bool bad;
};

static void agent_seen(void *ctx, const struct mc_etcd_kv *kv)
{
    struct agents_walk *w = ctx;

    if (w->n >= MC_ELECT_AGENTS_MAX || mc_elect_agent_parse(kv->value, &w->out[w->n]) != 0) {
        w->bad = true; /* a list we cannot trust whole: not used */
        return;
    }
    w->n++;
}

/* The agents registered now, for the reign about to begin (reign: its number). */
static void agents_read(struct mc_elect *e, uint64_t reign)
{
    struct agents_walk w = {.out = e->agents_scratch};
    int err = mc_etcd_get_prefix(e->etcd, e->akey, MC_ELECT_AGENTS_MAX + 1, agent_seen, &w);

    pthread_mutex_lock(&e->mu);
    e->agents_reign = reign;
    e->nagents = err == 0 && !w.bad ? w.n : -1;
    if (e->nagents > 0)
        memcpy(e->agents, e->agents_scratch, (size_t)w.n * sizeof(e->agents[0]));
    pthread_mutex_unlock(&e->mu);
}

int mc_elect_agents(struct mc_elect *e, uint64_t reign, struct mc_elect_agent *out)
{
    int n;

    pthread_mutex_lock(&e->mu);
    n = e->agents_reign == reign ? e->nagents : -1;
    if (n > 0)
        memcpy(out, e->agents, (size_t)n * sizeof(out[0]));
    pthread_mutex_unlock(&e->mu);
    return n;
}

int mc_elect_versions_parse(const char *value, uint64_t *end_p)
{
    const uint64_t max = MC_ELECT_VERSIONS_END_MAX;
    uint64_t v = 0;
    size_t i;

    for (i = 0; value[i] != '\0'; i++) {
        unsigned d = (unsigned)(value[i] - '0');

        if (d > 9 || i >= 20 || v > (max - d) / 10)
            return MC_ERR_PROTO;
        v = v * 10 + d;
    }
    if (i == 0)
        return MC_ERR_PROTO;
    *end_p = v;
    return 0;
}

uint64_t mc_elect_versions_base(uint64_t stored_end, uint64_t clock_ns)
{
    return stored_end > clock_ns ? stored_end : clock_ns;
}

uint64_t mc_elect_versions_next_end(uint64_t last, uint64_t end)
{
    if (last < end && end - last > MC_ELECT_VERSIONS_RESERVE / 2)
        return 0;
    /* never an end versions_parse refuses (no later leader could read it: none would
     * lead, review finding M1); at the cap puts are refused until an operator acts */
    if (last >= MC_ELECT_VERSIONS_END_MAX - MC_ELECT_VERSIONS_RESERVE)
        return end < MC_ELECT_VERSIONS_END_MAX ? MC_ELECT_VERSIONS_END_MAX : 0;
    return last + MC_ELECT_VERSIONS_RESERVE;
}

/* The margin kept below the lease's TTL: renewals are counted from before they were sent,
 * and this covers the rate difference of two clocks and a late wake-up. */
static uint64_t margin_ms(uint64_t ttl_ms)
{
    uint64_t m = ttl_ms / 8;

    return m < 250 ? 250 : m;
}

/* The bound of one etcd call: a local etcd answers a keep-alive in a few ms; a call that
 * has not answered in this is retried (or the next endpoint tried). */
static uint64_t call_ms(uint64_t ttl_ms)
{
    return ttl_ms / 4 < 250 ? ttl_ms / 4 : 250;
}

/* When a leader renews, counted from its last renewal: as late as leaves two whole etcd
 * calls (and the 50 ms between them) before it must stop serving (margin_ms). A later
 * renewal is a shorter failover: etcd lapses the lease TTL after the last renewal it saw,
 * so a leader killed at a random moment leaves on average TTL - every / 2 to wait
 * (docs/decisions.md, "When the leader renews"). */
uint64_t mc_elect_renew_every_ms(uint64_t ttl_ms)
{
    uint64_t keep = margin_ms(ttl_ms) + 2 * call_ms(ttl_ms) + 100;

    return ttl_ms > keep + 100 ? ttl_ms - keep : 100;
}

static void set_view(struct mc_elect *e, bool leading, uint64_t epoch, uint64_t until,
                     const char *leader, bool etcd_ok)
{
    pthread_mutex_lock(&e->mu);
    if (leading != e->v.leading)
        (void)!write(e->efd, &(uint64_t){1}, sizeof(uint64_t)); /* the loop looks now */
    if (leading && !e->v.leading)
        e->v.reign++;
    if (!leading) {
        e->v.version_base = e->v.version_end = 0;
        atomic_store(&e->vend, 0);
    }
    e->v.leading = leading;
    e->v.epoch = epoch;
    e->v.serve_until_ms = leading ? until : 0;
    e->v.etcd_ok = etcd_ok;
    if (leader != NULL)
        snprintf(e->v.leader, sizeof(e->v.leader), "%s", leader);
    atomic_store(&e->reign, e->v.reign);
    atomic_store(&e->serve_until, leading ? until : 0);
    pthread_mutex_unlock(&e->mu);
}

/* Sleep ms unless stopped; returns whether to stop. */
static bool nap(struct mc_elect *e, uint64_t ms)
{
    return mc_nap(&e->mu, &e->cv, &e->stop, ms);
}

/* Store `end` as the end of the versions of the reign of `epoch` (only while it is still
 * the leader key's reign); e->v and e->vend take it. */
static int versions_store(struct mc_elect *e, uint64_t epoch, uint64_t base, uint64_t end)
{
    char val[24];
    bool done = false;
    int err;

    snprintf(val, sizeof(val), "%" PRIu64, end);
    err = mc_etcd_put_if(e->etcd, e->vkey, val, e->key, (int64_t)epoch, &done);
    if (err == 0 && !done)
        err = MC_ERR_CANCELED; /* the leader key is not of this reign any more */
    if (err != 0)
        return err;
    pthread_mutex_lock(&e->mu);
    if (base != 0)
        e->v.version_base = base;
    e->v.version_end = end;
    pthread_mutex_unlock(&e->mu);
    atomic_store(&e->vend, end);
    return 0;
}

/* A reign just won: its versions start at the end the reigns before stored (or the clock,
 * when higher), and a reserve above is stored before it serves. */
static int versions_reserve(struct mc_elect *e, uint64_t epoch)
{
    struct mc_etcd_kv *kv = malloc(sizeof(*kv));
    struct timespec ts;
    uint64_t stored = 0, base;
    int err;

    if (kv == NULL)
        return MC_ERR_NOMEM;
    err = mc_etcd_get(e->etcd, e->vkey, kv);
    if (err == 0 && kv->found && (err = mc_elect_versions_parse(kv->value, &stored)) != 0)
        mc_error("%s holds no version end (\"%.40s\"): not leading", e->vkey, kv->value);
    free(kv);
    if (err != 0)
        return err;
    clock_gettime(CLOCK_REALTIME, &ts);
    base = mc_elect_versions_base(stored, (uint64_t)ts.tv_sec * 1000000000u +
                                              (uint64_t)ts.tv_nsec);
    atomic_store(&e->vused, base);
    return versions_store(e, epoch, base, base + MC_ELECT_VERSIONS_RESERVE);
}

/* One standby round: look at the key; campaign when nobody holds it. */
static void campaign(struct mc_elect *e)
{
    struct mc_etcd_kv *kv = malloc(sizeof(*kv));
    uint64_t t0;
    bool created = false;
    int err;

    if (kv == NULL)
        return;
    err = mc_etcd_get(e->etcd, e->key, kv);
    if (err == 0 && kv->found) {
        set_view(e, false, (uint64_t)kv->create_rev, 0, kv->value, true);
        goto out;
    }
    if (err != 0) {
        set_view(e, false, 0, 0, NULL, false);
        goto out;
    }
    /* nobody leads: a fresh lease, counted from before we asked for it */
    t0 = mc_elect_now_ms();
    err = mc_etcd_lease_grant(e->etcd, (e->cfg.ttl_ms + 999) / 1000, &e->lease);
    if (err == 0) {
        int64_t ttl_s = 0;

        /* the TTL etcd granted (it may raise a short one to its minimum) */
        err = mc_etcd_lease_keepalive(e->etcd, e->lease, &ttl_s);
        e->ttl_ms = (uint64_t)ttl_s * 1000u;
    }
    if (err == 0)
        err = mc_etcd_create_if_absent(e->etcd, e->key, e->advertise, e->lease, &created, kv);
    if (err != 0) {
        mc_debug("campaign: %s", mc_strerror(err));
        set_view(e, false, 0, 0, NULL, false);
        goto out;
    }
    if (!created) {
        (void)mc_etcd_lease_revoke(e->etcd, e->lease);
        e->lease = 0;
        set_view(e, false, (uint64_t)kv->create_rev, 0, kv->value, true);
        goto out;
    }
    /* no serving before the reign's versions are stored */
    if ((err = versions_reserve(e, (uint64_t)kv->create_rev)) != 0) {
        mc_warn("campaign: the version reserve: %s", mc_strerror(err));
        (void)mc_etcd_lease_revoke(e->etcd, e->lease); /* the leader key goes with it */
        e->lease = 0;
        set_view(e, false, 0, 0, NULL, false);
        goto out;
    }
    /* whose reports the new reign waits for */
    agents_read(e, e->v.reign + 1);
    e->rounds = 0;
    e->renew_failed = false;
    mc_info("leading cluster %s at epoch %" PRId64 " (lease %" PRIx64 ", TTL %" PRIu64 " ms)",
            e->cfg.cluster_id, kv->create_rev, (uint64_t)e->lease, e->ttl_ms);
    set_view(e, true, (uint64_t)kv->create_rev, t0 + e->ttl_ms - margin_ms(e->ttl_ms),
             e->advertise, true);
out:
    free(kv);
}

static void step_down(struct mc_elect *e, const char *why)
{
    struct mc_elect_view v;

    mc_elect_view(e, &v);
    mc_warn("stepping down as leader of epoch %" PRIu64 ": %s", v.epoch, why);
    e->lease = 0;
    set_view(e, false, v.epoch, 0, "", false);
}

/* One leader round: renew the lease and check that the key is still ours. */
static void renew(struct mc_elect *e)
{
    struct mc_etcd_kv *kv = malloc(sizeof(*kv));
    struct mc_elect_view v;
    uint64_t t0 = mc_elect_now_ms();
    int64_t ttl_s = 0;
    int err;

    mc_elect_view(e, &v);
    err = mc_etcd_lease_keepalive(e->etcd, e->lease, &ttl_s);
    if (err == MC_ERR_NOT_FOUND) {
        step_down(e, "the lease lapsed at etcd");
        goto out;
    }
    if (err == 0) {
        /* renewed: counted from before the call went out */
        e->ttl_ms = (uint64_t)ttl_s * 1000u;
        set_view(e, true, v.epoch, t0 + e->ttl_ms - margin_ms(e->ttl_ms), NULL, true);
        mc_elect_view(e, &v);
    }
    /* the key goes with the lease; read it back now and then all the same (an operator
     * may have deleted it) */
    if (err == 0 && kv != NULL && e->rounds++ % 4 == 0) {
        err = mc_etcd_get(e->etcd, e->key, kv);
        if (err == 0 && (!kv->found || (uint64_t)kv->create_rev != v.epoch)) {
            step_down(e, "the leader key is not ours any more");
            goto out;
        }
    }
    if (err == 0) {
        uint64_t next = mc_elect_versions_next_end(atomic_load(&e->vused), v.version_end);

        /* half the reserve used: a further end, stored before the counter gets there */
        if (next != 0 && (err = versions_store(e, v.epoch, 0, next)) == MC_ERR_CANCELED) {
            step_down(e, "the leader key is not ours any more");
            goto out;
        }
    }
    e->renew_failed = err != 0;
    if (err == 0) {
        /* done above */
    } else if (mc_elect_now_ms() >= v.serve_until_ms) {
        step_down(e, "etcd did not renew the lease in time");
    } else {
        mc_warn("renewing the leader lease: %s", mc_strerror(err));
        set_view(e, true, v.epoch, v.serve_until_ms, NULL, false);
    }
out:
    free(kv);
}

/* The member thread: our member key, under a lease of our own, kept alive every quarter
 * of the TTL; granted and put again when it lapsed (etcd lost for a while). Leader or
 * standby alike: the agents show the members that do not lead as standbys. */
static void *member_main(void *arg)
{
    struct mc_elect *e = arg;
    int64_t lease = 0, ttl_s;
    int err;

    do {
        if (lease != 0) {
            err = mc_etcd_lease_keepalive(e->member_etcd, lease, &ttl_s);
            if (err == MC_ERR_NOT_FOUND)
                lease = 0;
        }
        if (lease == 0 &&
            mc_etcd_lease_grant(e->member_etcd, (e->cfg.ttl_ms + 999) / 1000, &lease) == 0) {
            err = mc_etcd_put(e->member_etcd, e->member_key, e->advertise, lease);
            if (err != 0) {
                mc_debug("member key %s: %s", e->member_key, mc_strerror(err));
                (void)mc_etcd_lease_revoke(e->member_etcd, lease);
                lease = 0;
            }
        }
    } while (!nap(e, e->cfg.ttl_ms / 4));
    if (lease != 0)
        (void)mc_etcd_lease_revoke(e->member_etcd, lease); /* the key goes with it */
    return NULL;
}

static void *elect_main(void *arg)
{
    struct mc_elect *e = arg;

    for (;;) {
        struct mc_elect_view v;
        uint64_t wait;

        mc_elect_view(e, &v);
        if (!v.leading) {
            campaign(e);
            mc_elect_view(e, &v);
            wait = v.leading ? mc_elect_renew_every_ms(e->ttl_ms) : e->cfg.poll_ms;
        } else {
            renew(e);
            mc_elect_view(e, &v);
            /* a failed renewal is tried again at once (the deadline keeps running) */
            wait = !v.leading       ? 0
                   : e->renew_failed ? 50
                                     : mc_elect_renew_every_ms(e->ttl_ms);
        }
        if (nap(e, wait))
            break;
    }
    return NULL;
}

int mc_elect_start(const struct mc_elect_config *cfg, struct mc_elect **e_p)
{
    struct mc_elect *e;
    int err;

    if (cfg->ttl_ms < 1000 || cfg->poll_ms == 0 || cfg->advertise == NULL ||
        strlen(cfg->advertise) >= sizeof(e->v.leader))
        return MC_ERR_INVALID;
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return MC_ERR_NOMEM;
    e->cfg = *cfg;
    e->ttl_ms = cfg->ttl_ms;
    e->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e->efd < 0) {
        free(e);
        return MC_ERR_IO;
    }
    if ((err = mc_elect_key(cfg->cluster_id, e->key, sizeof(e->key))) != 0 ||
        (err = mc_elect_versions_key(cfg->cluster_id, e->vkey, sizeof(e->vkey))) != 0 ||
        (err = mc_elect_agents_prefix(cfg->cluster_id, e->akey, sizeof(e->akey))) != 0 ||
        (e->agents = calloc(MC_ELECT_AGENTS_MAX, sizeof(e->agents[0]))) == NULL ||
        (e->agents_scratch = calloc(MC_ELECT_AGENTS_MAX, sizeof(e->agents[0]))) == NULL ||
        (err = mc_elect_members_prefix(cfg->cluster_id, e->member_key,
                                       sizeof(e->member_key))) != 0 ||
        strlen(e->member_key) + strlen(cfg->advertise) >= sizeof(e->member_key) ||
        (err = mc_etcd_create(cfg->endpoints, call_ms(cfg->ttl_ms), &e->etcd)) != 0 ||
        (err = mc_etcd_create(cfg->endpoints, call_ms(cfg->ttl_ms), &e->member_etcd)) != 0) {
        bool oom = e->agents == NULL || e->agents_scratch == NULL;

        mc_etcd_destroy(e->etcd);
        free(e->agents);
        free(e->agents_scratch);
        close(e->efd);
        free(e);
        return err != 0 ? err : oom ? MC_ERR_NOMEM : MC_ERR_INVALID;
    }
    strcat(e->member_key, cfg->advertise);
    e->advertise = strdup(cfg->advertise);
    e->cfg.advertise = e->advertise;
    pthread_mutex_init(&e->mu, NULL);
    {
        pthread_condattr_t ca;

        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&e->cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (e->advertise == NULL || pthread_create(&e->thread, NULL, elect_main, e) != 0) {
        mc_etcd_destroy(e->etcd);
        mc_etcd_destroy(e->member_etcd);
        free(e->advertise);
        free(e->agents);
        free(e->agents_scratch);
        close(e->efd);
        free(e);
        return MC_ERR_IO;
    }
    if (pthread_create(&e->member_thread, NULL, member_main, e) != 0) {
        pthread_mutex_lock(&e->mu);
        e->stop = true;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
        mc_etcd_destroy(e->etcd);
        mc_etcd_destroy(e->member_etcd);
        free(e->advertise);
        free(e->agents);
        free(e->agents_scratch);
        close(e->efd);
        free(e);
        return MC_ERR_IO;
    }
    *e_p = e;
    return 0;
}

void mc_elect_stop(struct mc_elect *e)
{
    struct mc_elect_view v;

    if (e == NULL)
        return;
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    pthread_cond_broadcast(&e->cv); /* both threads nap on it */
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    pthread_join(e->member_thread, NULL);
    mc_elect_view(e, &v);
    if (v.leading) {
        bool deleted = false;

        atomic_store(&e->serve_until, 0);
        (void)mc_etcd_delete_if(e->etcd, e->key, (int64_t)v.epoch, &deleted);
        (void)mc_etcd_lease_revoke(e->etcd, e->lease);
        mc_info("left the lead of epoch %" PRIu64, v.epoch);
    }
    mc_etcd_destroy(e->etcd);
    mc_etcd_destroy(e->member_etcd);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e->advertise);
    free(e->agents);
    free(e->agents_scratch);
    close(e->efd);
    free(e);
}

void mc_elect_view(struct mc_elect *e, struct mc_elect_view *v)
{
    pthread_mutex_lock(&e->mu);
    *v = e->v;
    pthread_mutex_unlock(&e->mu);
}

bool mc_elect_serving(struct mc_elect *e, uint64_t now_ms)
{
    return now_ms < atomic_load(&e->serve_until);
}

bool mc_elect_serving_reign(struct mc_elect *e, uint64_t now_ms, uint64_t reign)
{
    return now_ms < atomic_load(&e->serve_until) && atomic_load(&e->reign) == reign;
}

void mc_elect_versions_used(struct mc_elect *e, uint64_t last)
{
    atomic_store(&e->vused, last);
}

uint64_t mc_elect_versions_end(struct mc_elect *e)
{
    return atomic_load(&e->vend);
}

int mc_elect_fd(const struct mc_elect *e)
{
    return e->efd;
}
