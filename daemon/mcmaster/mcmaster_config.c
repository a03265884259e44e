/*
 * The config table of mc-master: its own knobs plus the included daemon and master tables.
 */
#include "daemon/mcmaster/mcmaster_config.h"

#include <stdio.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/proto/master_proto.h"

#define FIELD(f) offsetof(struct mc_mcmaster_config, f)

const struct mc_config_entry mc_mcmaster_own_config_table[] = {
    {.name = "listen",
     .type = MC_CFG_STRING,
     .def = NULL,
     .offset = FIELD(listen),
     .doc = "HOST:PORT of the TCP bootstrap listener that hands peers the master's address "
            "(port 0: any free port, written to the ready file). A numeric HOST (not "
            "0.0.0.0 or ::) is also where its UCX worker listens (a free port), and the "
            "address handed out names that listener; else it is the UCX worker address."},
    {.name = "cluster_token",
     .type = MC_CFG_STRING,
     .def = NULL,
     .offset = FIELD(cluster_token),
     .secret = true,
     .doc = "Shared secret every node's HELLO must carry (compared in constant time); prefer "
            "MC_CLUSTER_TOKEN or the config file to the command line."},
    {.name = "allow_no_token",
     .type = MC_CFG_BOOL,
     .def = "false",
     .offset = FIELD(allow_no_token),
     .doc = "With no cluster_token set, accept every HELLO (tests and trusted networks only)."},
    {.name = "keepalive_ms",
     .type = MC_CFG_MS,
     .def = "1000",
     .min = 100,
     .max = 600000,
     .offset = FIELD(keepalive_ms),
     .doc = "UCX keepalive interval of the master's endpoints (UCX_KEEPALIVE_INTERVAL)."},
    {.name = "ucx_shm",
     .type = MC_CFG_BOOL,
     .def = "false",
     .offset = FIELD(ucx_shm),
     .doc = "Let UCX use its shared-memory transports (posix, sysv) between daemons on one "
            "host: about twice the bandwidth of tcp there, but a peer killed while it sends "
            "can leave the receiver's shared-memory queue blocked for good (UCX 1.13), and one "
            "killed with -9 leaves its segments in /dev/shm (docs/decisions.md). Off by "
            "default; daemons on different hosts never use it. UCX_TLS, when set, wins."},
    {.name = "max_peers",
     .type = MC_CFG_U64,
     .def = "4096",
     .min = 1,
     .max = 1000000,
     .offset = FIELD(max_peers),
     .doc = "Accepted UCX endpoints at most; requests from more are dropped."},
    {.name = "metrics_listen",
     .type = MC_CFG_STRING,
     .def = NULL,
     .offset = FIELD(metrics_listen),
     .doc = "HOST:PORT of the HTTP listener serving GET /metrics (Prometheus text format), "
            "/health and /ready (docs/metrics.md); port 0: any free port, logged as "
            "\"metrics on HOST:PORT\". Unset, the default: no listener."},
    {.name = "etcd",
     .type = MC_CFG_STRING,
     .def = NULL,
     .offset = FIELD(etcd),
     .doc = "etcd client URLs (http://HOST:PORT, comma-separated) for high availability: "
            "masters of one cluster_id elect a leader there, the others stand by "
            "(docs/master.md). Unset, the default: this master serves alone."},
    {.name = "cluster_id",
     .type = MC_CFG_STRING,
     .def = NULL,
     .offset = FIELD(cluster_id),
     .doc = "With etcd: the cluster's name (1..63 of [A-Za-z0-9_.-]); the leader holds the "
            "key /mcstore/<cluster_id>/leader."},
    {.name = "advertise",
     .type = MC_CFG_STRING,
     .def = NULL,
     .offset = FIELD(advertise),
     .doc = "With etcd: the HOST:PORT agents fetch this master's address from, published "
            "while it leads. Unset: the listen address (with the host name when it listens "
            "on any address) and the port it got."},
    {.name = "etcd_ttl_ms",
     .type = MC_CFG_MS,
     .def = "2000",
     .min = 1000,
     .max = 60000,
     .offset = FIELD(etcd_ttl_ms),
     .doc = "With etcd: the leader's lease (whole seconds at etcd, which may raise it to its "
            "minimum). The leader renews it as late as leaves two etcd calls of room and stops "
            "answering an eighth of it (at least 250 ms) before it could lapse, by its own "
            "clock."},
    {.name = "etcd_poll_ms",
     .type = MC_CFG_MS,
     .def = "100",
     .min = 10,
     .max = 10000,
     .offset = FIELD(etcd_poll_ms),
     .doc = "With etcd: how often a standby looks at the leader key."},
    {.name = "recovery_ms",
     .type = MC_CFG_MS,
     .def = "1000",
     .min = 0,
     .max = 600000,
     .offset = FIELD(recovery_ms),
     .doc = "With etcd: a new leader answers data operations MC_ERR_UNAVAILABLE at most "
            "this long after it won, while the agents rejoin and report what they hold; the "
            "window ends as soon as every agent registered in etcd when it won has reported "
            "(all its segments mounted, none restoring). Membership, restores and the ends "
            "of puts are served at once. Agents following etcd rejoin within a poll (100 ms) "
            "of the new epoch; a read in the window of a key whose owner has not reported "
            "yet would miss, a put in it wins over the older reported version."},
    {.name = NULL},
};

const struct mc_config_entry mc_mcmaster_config_table[] = {
    MC_CONFIG_INCLUDE(struct mc_mcmaster_config, daemon, mc_config_daemon_table),
    {.name = "mcmaster",
     .type = MC_CFG_TABLE,
     .offset = 0,
     .sub = mc_mcmaster_own_config_table,
     .doc = ""},
    MC_CONFIG_INCLUDE(struct mc_mcmaster_config, master, mc_master_config_table),
    {.name = NULL},
};

int mc_mcmaster_config_validate(const void *base, char *err, size_t errlen)
{
    const struct mc_mcmaster_config *cfg = base;
    bool has_token = cfg->cluster_token != NULL && cfg->cluster_token[0] != '\0';

    if (cfg->listen == NULL || cfg->listen[0] == '\0') {
        snprintf(err, errlen, "listen: no HOST:PORT given (--listen)");
        return MC_ERR_INVALID;
    }
    if (!has_token && !cfg->allow_no_token) {
        snprintf(err, errlen,
                 "cluster_token: not set (set it, e.g. MC_CLUSTER_TOKEN, or "
                 "allow_no_token=true)");
        return MC_ERR_INVALID;
    }
    if (has_token && strlen(cfg->cluster_token) > MC_PROTO_TOKEN_MAX) {
        snprintf(err, errlen, "cluster_token: longer than %u bytes", MC_PROTO_TOKEN_MAX);
        return MC_ERR_INVALID;
    }
    if ((cfg->etcd != NULL) != (cfg->cluster_id != NULL)) {
        snprintf(err, errlen, "etcd and cluster_id: give both or neither");
        return MC_ERR_INVALID;
    }
    if (cfg->cluster_id != NULL) {
        size_t n = strlen(cfg->cluster_id);

        if (n == 0 || n > 63 ||
            strspn(cfg->cluster_id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                    "0123456789_.-") != n) {
            snprintf(err, errlen, "cluster_id: 1..63 of [A-Za-z0-9_.-]");
            return MC_ERR_INVALID;
        }
    }
    return mc_master_config_validate(&cfg->master, err, errlen);
}
