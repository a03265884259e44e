/*
 * Helpers of the HA tests (test code only): a local etcd cluster of 1..3 members started by
 * the test itself (skipped with 77 when the etcd binary is missing), and mc-masters that
 * stand for leader in it. On top of tests/lib/t_fcluster.h.
 */
#ifndef MC_T_HA_H
#define MC_T_HA_H

#include <netinet/in.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <jansson.h>

#include "daemon/common/etcd.h"
#include "tests/lib/t_fcluster.h"

#define T_HA_ETCD_MAX 3
#define T_HA_MASTERS_MAX 3

static inline const char *t_ha_etcd_bin(void)
{
    const char *b = getenv("MC_ETCD_BIN");

    if (b != NULL && b[0] != '\0')
        return access(b, X_OK) == 0 ? b : NULL;
    return access("/usr/bin/etcd", X_OK) == 0 ? "/usr/bin/etcd" : NULL;
}

/* A free TCP port on 127.0.0.1 (bound and closed: free a moment later as well). */
static inline unsigned t_ha_free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

struct t_ha_etcd {
    int n;
    char dir[256];
    unsigned cport[T_HA_ETCD_MAX], pport[T_HA_ETCD_MAX];
    struct t_proc p[T_HA_ETCD_MAX];
    char urls[256];    /* every member's client URL */
    char initial[512]; /* --initial-cluster */
};

static inline void t_ha_etcd_member_start(struct t_ha_etcd *e, int i)
{
    char name[16], data[300], curl[64], purl[64];
    const char *argv[32];
    int argc = 0;

    snprintf(name, sizeof(name), "etcd%d", i);
    snprintf(data, sizeof(data), "%s/%s.data", e->dir, name);
    snprintf(curl, sizeof(curl), "http://127.0.0.1:%u", e->cport[i]);
    snprintf(purl, sizeof(purl), "http://127.0.0.1:%u", e->pport[i]);
    argv[argc++] = t_ha_etcd_bin();
    argv[argc++] = "--name";
    argv[argc++] = name;
    argv[argc++] = "--data-dir";
    argv[argc++] = data;
    argv[argc++] = "--listen-client-urls";
    argv[argc++] = curl;
    argv[argc++] = "--advertise-client-urls";
    argv[argc++] = curl;
    argv[argc++] = "--listen-peer-urls";
    argv[argc++] = purl;
    argv[argc++] = "--initial-advertise-peer-urls";
    argv[argc++] = purl;
    argv[argc++] = "--initial-cluster";
    argv[argc++] = e->initial;
    argv[argc++] = "--initial-cluster-state";
    argv[argc++] = "new";
    argv[argc++] = "--heartbeat-interval";
    argv[argc++] = "50";
    argv[argc++] = "--election-timeout";
    argv[argc++] = "500";
    argv[argc++] = "--log-level";
    argv[argc++] = "warn";
    argv[argc] = NULL;
    t_proc_spawn(&e->p[i], e->dir, name, NULL, argv);
}

/* Whether the cluster serves a read within ms. */
static inline bool t_ha_etcd_serving(const char *urls, unsigned ms)
{
    uint64_t t0 = t_now_ms();
    struct mc_etcd *c = NULL;
    struct mc_etcd_kv *kv = malloc(sizeof(*kv));
    bool ok = false;

    ck_assert_ptr_nonnull(kv);
    ck_assert_int_eq(mc_etcd_create(urls, 500, &c), 0);
    while (!ok && t_now_ms() - t0 < ms) {
        ok = mc_etcd_get(c, "/mcstore/probe", kv) == 0;
        if (!ok)
            t_fc_sleep_ms(50);
    }
    mc_etcd_destroy(c);
    free(kv);
    return ok;
}

/* n members on loopback, in their own directory under dir; waits until they serve. */
static inline void t_ha_etcd_start(struct t_ha_etcd *e, const char *dir, int n)
{
    size_t u = 0, k = 0;

    memset(e, 0, sizeof(*e));
    e->n = n;
    snprintf(e->dir, sizeof(e->dir), "%s", dir);
    for (int i = 0; i < n; i++) {
        e->cport[i] = t_ha_free_port();
        e->pport[i] = t_ha_free_port();
        u += (size_t)snprintf(e->urls + u, sizeof(e->urls) - u, "%shttp://127.0.0.1:%u",
                              i ? "," : "", e->cport[i]);
        k += (size_t)snprintf(e->initial + k, sizeof(e->initial) - k,
                              "%setcd%d=http://127.0.0.1:%u", i ? "," : "", i, e->pport[i]);
    }
    for (int i = 0; i < n; i++)
        t_ha_etcd_member_start(e, i);
    ck_assert_msg(t_ha_etcd_serving(e->urls, 20000), "etcd did not come up");
}

static size_t t_ha_curl_sink(char *p, size_t size, size_t n, void *ctx)
{
    char *buf = ctx;
    size_t have = strlen(buf), add = size * n;

    if (have + add >= 4096)
        add = 4096 - 1 - have;
    memcpy(buf + have, p, add);
    buf[have + add] = '\0';
    return size * n;
}

/* Which member is etcd's raft leader now (its status, through the JSON gateway: member i
 * leads when its own id is the leader it names), or -1 if none says so within ms. */
static inline int t_ha_etcd_raft_leader(const struct t_ha_etcd *e, unsigned ms)
{
    uint64_t t0 = t_now_ms();

    do {
        for (int i = 0; i < e->n; i++) {
            char url[96], *body = calloc(1, 4096);
            CURL *c = curl_easy_init();
            json_t *j = NULL;
            const char *id, *leader;
            bool mine = false;

            ck_assert_ptr_nonnull(body);
            ck_assert_ptr_nonnull(c);
            snprintf(url, sizeof(url), "http://127.0.0.1:%u/v3/maintenance/status", e->cport[i]);
            curl_easy_setopt(c, CURLOPT_URL, url);
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{}");
            curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 500L);
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, t_ha_curl_sink);
            curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
            if (curl_easy_perform(c) == CURLE_OK &&
                (j = json_loads(body, 0, NULL)) != NULL &&
                (id = json_string_value(json_object_get(json_object_get(j, "header"),
                                                        "member_id"))) != NULL &&
                (leader = json_string_value(json_object_get(j, "leader"))) != NULL)
                mine = strcmp(id, leader) == 0;
            json_decref(j);
            curl_easy_cleanup(c);
            free(body);
            if (mine)
                return i;
        }
        t_fc_sleep_ms(50);
    } while (t_now_ms() - t0 < ms);
    return -1;
}

static inline void t_ha_etcd_stop(struct t_ha_etcd *e)
{
    for (int i = 0; i < e->n; i++)
        if (e->p[i].pid > 0)
            t_proc_kill(&e->p[i]);
}

/* mc-master i of a HA test: --etcd, --cluster-id, the test's TTLs. */
struct t_ha_masters {
    int n;
    struct t_proc p[T_HA_MASTERS_MAX];
    char cluster[32];
    char etcd[256];
};

static inline void t_ha_master_spawn(struct t_fc *fc, struct t_ha_masters *ms, int i)
{
    char ttl[48], name[16], lvl[64], ettl[64];
    const char *argv[32];
    int argc = 0;
    struct t_proc *p = &ms->p[i];

    snprintf(name, sizeof(name), "master%d", i);
    snprintf(p->ready, sizeof(p->ready), "%s/%s.ready", fc->dir, name);
    unlink(p->ready);
    snprintf(ttl, sizeof(ttl), "node_ttl_ms=%u", fc->ttl_ms);
    argv[argc++] = t_env_bin("MC_MASTER_BIN");
    argv[argc++] = "--listen";
    argv[argc++] = "127.0.0.1:0";
    argv[argc++] = "--ready-file";
    argv[argc++] = p->ready;
    argv[argc++] = "--set";
    argv[argc++] = ttl;
    argv[argc++] = "--etcd";
    argv[argc++] = ms->etcd;
    argv[argc++] = "--cluster-id";
    argv[argc++] = ms->cluster;
    argv[argc++] = "--set";
    argv[argc++] = "recovery_ms=1000";
    if (getenv("T_HA_ETCD_TTL_MS") != NULL) { /* figures: a shorter lease */
        snprintf(ettl, sizeof(ettl), "etcd_ttl_ms=%s", getenv("T_HA_ETCD_TTL_MS"));
        argv[argc++] = "--set";
        argv[argc++] = ettl;
    }
    argc = t_fc_argv_log_level(argv, argc, lvl, sizeof(lvl));
    argv[argc] = NULL;
    t_proc_spawn(p, fc->dir, name, fc->token, argv);
    t_fc_note_log(fc, p);
    ck_assert_msg(t_proc_wait_ready(p, T_READY_MS) == 0, "%s not ready", name);
}

static inline void t_ha_masters_start(struct t_fc *fc, struct t_ha_masters *ms, int n,
                                      const char *etcd_urls)
{
    ms->n = n;
    snprintf(ms->cluster, sizeof(ms->cluster), "t%u", (unsigned)(t_fc_salt() % 100000));
    snprintf(ms->etcd, sizeof(ms->etcd), "%s", etcd_urls);
    for (int i = 0; i < n; i++)
        t_ha_master_spawn(fc, ms, i);
    /* the agents' --master (they follow etcd's leader anyway) */
    snprintf(fc->master_host, sizeof(fc->master_host), "127.0.0.1");
    fc->master.port = ms->p[0].port;
}

/* Which master leads per etcd (index), -1 when none does. *epoch_p its epoch. */
static inline int t_ha_leader(const struct t_ha_masters *ms, uint64_t *epoch_p)
{
    struct mc_etcd *c = NULL;
    struct mc_etcd_kv *kv = malloc(sizeof(*kv));
    char key[128];
    int who = -1;

    ck_assert_ptr_nonnull(kv);
    snprintf(key, sizeof(key), "/mcstore/%s/leader", ms->cluster);
    ck_assert_int_eq(mc_etcd_create(ms->etcd, 1000, &c), 0);
    if (mc_etcd_get(c, key, kv) == 0 && kv->found) {
        const char *colon = strrchr(kv->value, ':');

        for (int i = 0; i < ms->n; i++)
            if (colon != NULL && ms->p[i].pid > 0 && (unsigned)atoi(colon + 1) == ms->p[i].port)
                who = i;
        if (epoch_p != NULL)
            *epoch_p = (uint64_t)kv->create_rev;
    }
    mc_etcd_destroy(c);
    free(kv);
    return who;
}

/* Wait for a leader other than `not` (-1: any); its index, or -1 at the deadline. */
static inline int t_ha_wait_leader(const struct t_ha_masters *ms, int not, unsigned ms_max)
{
    uint64_t t0 = t_now_ms();
    int who;

    while ((who = t_ha_leader(ms, NULL)) < 0 || who == not) {
        if (t_now_ms() - t0 > ms_max)
            return -1;
        t_fc_sleep_ms(20);
    }
    return who;
}

static inline void t_ha_masters_stop(struct t_ha_masters *ms)
{
    char st[48];

    for (int i = 0; i < ms->n; i++)
        if (ms->p[i].pid > 0 && t_proc_stop(&ms->p[i]) != 0)
            ck_abort_msg("mc-master %d did not exit cleanly on SIGTERM (%s)", i,
                         t_status_str(ms->p[i].status, st, sizeof(st)));
}

#endif /* MC_T_HA_H */
