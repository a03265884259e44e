/*
 * mc-master's knobs: the daemon table (log_level), the master service's table, and the
 * server's own (listen address, cluster token, UCX keepalive), in one flat key space.
 */
#ifndef MC_MCMASTER_CONFIG_H
#define MC_MCMASTER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/common/config.h"
#include "daemon/master/master_config.h"

struct mc_mcmaster_config {
    struct mc_config_daemon daemon;
    struct mc_master_config master;
    char *listen;          /* HOST:PORT of the TCP bootstrap listener */
    char *cluster_token;   /* shared secret every HELLO must carry (NULL: unset) */
    bool allow_no_token;   /* with no token set, accept every HELLO */
    uint64_t keepalive_ms; /* UCX KEEPALIVE_INTERVAL */
    bool ucx_shm;          /* let UCX use shared memory between daemons of one host */
    uint64_t max_peers;    /* accepted endpoints at most */
    char *metrics_listen;  /* HOST:PORT of the metrics and health pages (NULL: none) */
    /* high availability (docs/master.md): NULL etcd, a master alone as before */
    char *etcd;            /* etcd client URLs, comma-separated */
    char *cluster_id;      /* the leader key is /mcstore/<cluster_id>/leader */
    char *advertise;       /* HOST:PORT agents bootstrap from (NULL: the listen address) */
    uint64_t etcd_ttl_ms;  /* the leader's lease */
    uint64_t etcd_poll_ms; /* a standby's look at the leader key */
    uint64_t recovery_ms;  /* a new leader answers data ops UNAVAILABLE this long */
};

/* The whole key space of mc-master: daemon + own + master tables. */
extern const struct mc_config_entry mc_mcmaster_config_table[];
/* mc-master's own knobs only. */
extern const struct mc_config_entry mc_mcmaster_own_config_table[];

/* Cross-field rules: a listen address is set, a token is set unless allow_no_token, and
 * the master service's own rules. Returns 0 or MC_ERR_INVALID with a message in `err`. */
int mc_mcmaster_config_validate(const void *cfg, char *err, size_t errlen);

#endif /* MC_MCMASTER_CONFIG_H */
