/*
 * Following the leader through etcd (leader.h).
 */
#include "daemon/agent/leader.h"

#include <errno.h>
#include <pthread.h>
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

struct agent_leader {
    struct mc_etcd *etcd;
    char key[128];
    char members[128]; /* the prefix of the masters' member keys */
    char agent_key[256]; /* ours: /mcstore/<id>/agents/<name> */
    char agent_val[160]; /* "NSEGS NAME": how many segments we mount, our node name */
    int64_t agent_lease; /* 0: none (granted again at the next turn) */
    uint64_t poll_ms;
    int efd;             /* leader_fd */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    /* under mu */
    bool found, etcd_ok;
    uint64_t epoch;
    char addr[128];
    /* the masters' member keys as last read (every MEMBERS_EVERY polls): their HOST:PORT,
     * comma-separated, at most LEADER_MEMBERS_MAX of them; members_ok says it was read */
    bool members_ok;
    char member_list[LEADER_MEMBERS_MAX * 128];
};

#define MEMBERS_EVERY 10u

struct members_walk {
    char list[LEADER_MEMBERS_MAX * 128];
    size_t len;
};

/* one member key: its value is the master's HOST:PORT; anything else is left out */
static void member_seen(void *ctx, const struct mc_etcd_kv *kv)
{
    struct members_walk *w = ctx;

    if (kv->value_len == 0 || kv->value_len >= 128 || strchr(kv->value, ':') == NULL ||
        strpbrk(kv->value, ", \"\\") != NULL || memchr(kv->value, '\0', kv->value_len) != NULL ||
        w->len + kv->value_len + 2 > sizeof(w->list))
        return;
    if (w->len > 0)
        w->list[w->len++] = ',';
    memcpy(w->list + w->len, kv->value, kv->value_len);
    w->len += kv->value_len;
    w->list[w->len] = '\0';
}

static bool nap(struct agent_leader *l, uint64_t ms)
{
    return mc_nap(&l->mu, &l->cv, &l->stop, ms);
}

/* Our agent key under its lease: kept alive, granted and put again when it lapsed. */
static void agent_key_keep(struct agent_leader *l)
{
    int64_t ttl_s;

    if (l->agent_lease != 0 &&
        mc_etcd_lease_keepalive(l->etcd, l->agent_lease, &ttl_s) == MC_ERR_NOT_FOUND)
        l->agent_lease = 0;
    if (l->agent_lease == 0 &&
        mc_etcd_lease_grant(l->etcd, LEADER_AGENT_TTL_S, &l->agent_lease) == 0 &&
        mc_etcd_put(l->etcd, l->agent_key, l->agent_val, l->agent_lease) != 0) {
        (void)mc_etcd_lease_revoke(l->etcd, l->agent_lease);
        l->agent_lease = 0;
    }
}

static void *leader_main(void *arg)
{
    struct agent_leader *l = arg;
    struct mc_etcd_kv *kv = malloc(sizeof(*kv));
    struct members_walk *mw = malloc(sizeof(*mw));
    unsigned polls = 0;

    do {
        if (polls % LEADER_AGENT_EVERY == 0)
            agent_key_keep(l);
        if (mw != NULL && polls % MEMBERS_EVERY == 0) {
            int merr;

            mw->len = 0;
            mw->list[0] = '\0';
            merr = mc_etcd_get_prefix(l->etcd, l->members, LEADER_MEMBERS_MAX, member_seen, mw);
            pthread_mutex_lock(&l->mu);
            l->members_ok = merr == 0;
            if (merr == 0)
                memcpy(l->member_list, mw->list, mw->len + 1);
            pthread_mutex_unlock(&l->mu);
        }
        int err = kv != NULL ? mc_etcd_get(l->etcd, l->key, kv) : MC_ERR_NOMEM;

        pthread_mutex_lock(&l->mu);
        l->etcd_ok = err == 0;
        /* a leader's value is its HOST:PORT; a lower epoch than one seen is stale */
        if (err == 0 && kv->found && kv->value_len > 0 && kv->value_len < sizeof(l->addr) &&
            strchr(kv->value, ':') != NULL && (uint64_t)kv->create_rev > l->epoch) {
            if (l->found)
                mc_info("the leader is %s at epoch %lld now (was epoch %llu)", kv->value,
                        (long long)kv->create_rev, (unsigned long long)l->epoch);
            l->found = true;
            l->epoch = (uint64_t)kv->create_rev;
            memcpy(l->addr, kv->value, kv->value_len + 1);
            (void)!write(l->efd, &(uint64_t){1}, sizeof(uint64_t)); /* the loop follows */
        }
        pthread_mutex_unlock(&l->mu);
        polls++;
    } while (!nap(l, l->poll_ms));
    if (l->agent_lease != 0)
        (void)mc_etcd_lease_revoke(l->etcd, l->agent_lease); /* the key goes with it */
    free(kv);
    free(mw);
    return NULL;
}

int leader_start(const char *endpoints, const char *cluster_id, const char *name,
                 uint32_t nsegs, uint64_t poll_ms, struct agent_leader **l_p)
{
    struct agent_leader *l;
    char rest[160];
    pthread_condattr_t ca;
    int err;

    if (poll_ms == 0 || name == NULL || name[0] == '\0' || strlen(name) > 128 ||
        strpbrk(name, "/ ") != NULL)
        return MC_ERR_INVALID;
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        return MC_ERR_NOMEM;
    snprintf(rest, sizeof(rest), "agents/%s", name);
    if (mc_etcd_cluster_key(cluster_id, "leader", l->key, sizeof(l->key)) != 0 ||
        mc_etcd_cluster_key(cluster_id, "members/", l->members, sizeof(l->members)) != 0 ||
        mc_etcd_cluster_key(cluster_id, rest, l->agent_key, sizeof(l->agent_key)) != 0) {
        free(l);
        return MC_ERR_INVALID;
    }
    snprintf(l->agent_val, sizeof(l->agent_val), "%u %s", nsegs, name);
    l->poll_ms = poll_ms;
    l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->efd < 0) {
        free(l);
        return MC_ERR_IO;
    }
    err = mc_etcd_create(endpoints, poll_ms * 5 < 500 ? 500 : poll_ms * 5, &l->etcd);
    if (err != 0) {
        close(l->efd);
        free(l);
        return err;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&l->thread, NULL, leader_main, l) != 0) {
        mc_etcd_destroy(l->etcd);
        close(l->efd);
        free(l);
        return MC_ERR_IO;
    }
    *l_p = l;
    return 0;
}

void leader_stop(struct agent_leader *l)
{
    if (l == NULL)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    mc_etcd_destroy(l->etcd);
    close(l->efd);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

int leader_fd(const struct agent_leader *l)
{
    return l->efd;
}

bool leader_get(struct agent_leader *l, char *addr, size_t cap, uint64_t *epoch_p)
{
    bool found;

    pthread_mutex_lock(&l->mu);
    found = l->found;
    if (found) {
        snprintf(addr, cap, "%s", l->addr);
        *epoch_p = l->epoch;
    }
    pthread_mutex_unlock(&l->mu);
    return found;
}

bool leader_etcd_ok(struct agent_leader *l)
{
    bool ok;

    pthread_mutex_lock(&l->mu);
    ok = l->etcd_ok;
    pthread_mutex_unlock(&l->mu);
    return ok;
}

bool leader_members(struct agent_leader *l, char *list, size_t cap)
{
    bool ok;

    pthread_mutex_lock(&l->mu);
    ok = l->members_ok;
    snprintf(list, cap, "%s", ok ? l->member_list : "");
    pthread_mutex_unlock(&l->mu);
    return ok;
}
