/*
 * mc-agent's knobs: the daemon table (log_level), the embedded master service's table, and
 * the agent's own, all in one flat key space (docs/config.md).
 */
#ifndef MC_AGENT_CONFIG_H
#define MC_AGENT_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/common/config.h"
#include "daemon/master/master_config.h"

struct mc_agent_config {
    struct mc_config_daemon daemon;
    struct mc_master_config master;
    char *socket;              /* unix socket path (NULL: the default path) */
    char *node_name;           /* NULL: the host name */
    uint64_t dram;             /* DRAM segment bytes */
    bool hugepages;            /* back the segment with huge pages when available */
    bool prefault;             /* allocate and map every segment page at start-up */
    char *gpu;                 /* GPU segments: "DEV:SIZE[,DEV:SIZE]..." (seg_gpu.h) */
    uint64_t gpu_test_delay_us; /* the test device: each copy waits this long */
    uint64_t gpu_test_fail_nth; /* the test device: the nth copy fails (0: none) */
    uint64_t gpu_test_fail_every; /* the test device: every nth copy fails (0: none) */
    bool gpu_test_ucx_direct;  /* the test device: UCX moves its memory directly (as host) */
    char *disk;                /* the disk tier's file or block device (NULL: none) */
    uint64_t disk_size;        /* bytes of a disk file to create (0: the file's size) */
    int disk_engine;           /* enum mc_disk_engine: auto, io_uring, threads */
    uint64_t disk_depth;       /* disk I/Os in flight at most (staging buffers) */
    uint64_t disk_chunk;       /* bytes of one staging buffer */
    uint64_t disk_peer_reads;  /* peers' reads of our disk records under way at most */
    uint64_t op_timeout_ms;    /* deadline of an op that names none */
    uint64_t agent_spin_us;    /* poll SQs in memory this long after the last activity */
    bool adaptive_wait;        /* poll only while the host is quiet (spin.h) */
    int loop;                  /* enum mc_loop_kind: io_uring (falls back to epoll) or epoll */
    uint64_t sq_entries;       /* per client */
    uint64_t staging_slot_size;
    uint64_t staging_slots;
    uint64_t max_inflight;     /* ops one client may have outstanding */
    uint64_t max_clients;
    uint64_t max_clients_per_uid; /* connections one uid may hold (0: 3/4 of max_clients) */
    uint64_t arena_bytes_per_client; /* arena bytes one connection may have mapped */
    uint64_t arena_bytes_total;  /* arena bytes all clients together may have mapped */
    uint64_t open_put_bytes_per_client; /* bytes of unfinished puts per client (0: auto) */
    uint64_t put_idle_ms;      /* a started put with no data for this long is revoked */
    uint64_t copy_slice;       /* bytes copied per loop turn before other work runs */
    uint64_t lease_margin_ms;  /* a client's copy must finish this long before the lease ends */
    char *allow_uids;          /* uids that may connect besides own + root */
    char *allow_gids;          /* gids whose members (any group) may too */
    char *tenants;             /* JSON: tenant name -> {uids, gids, quota_bytes, dram_bytes} */
    uint64_t idle_wakeups_max; /* empty doorbells per second before a client is cut off */
    /* cluster mode (a master address is set) */
    char *master_addr;         /* HOST:PORT of mc-master's bootstrap listener (NULL: standalone) */
    char *etcd;                /* etcd URLs: follow the leader master there (docs/master.md) */
    char *cluster_id;          /* with etcd: whose leader (/mcstore/<cluster_id>/leader) */
    char *listen;              /* HOST:PORT: this agent's bootstrap listener for peers */
    char *domain;              /* failure domain (NULL: the node's own) */
    char *cluster_token;       /* shared secret (MC_CLUSTER_TOKEN) */
    uint64_t landing;          /* bytes of the landing segment for reads from peers */
    uint64_t heartbeat_ms;     /* heartbeat period to the master */
    uint64_t master_timeout_ms; /* no answer from the master this long: it is unreachable */
    uint64_t connect_timeout_ms; /* start-up: reaching and joining the master */
    uint64_t keepalive_ms;     /* UCX KEEPALIVE_INTERVAL */
    uint64_t peer_hard_deadline_ms; /* a transfer this far past its deadline: peer closed */
    bool ucx_shm;              /* let UCX use shared memory between daemons of one host */
    uint64_t bulk_eager_max;   /* peer transfers up to this size go eagerly (mc_ucx_params) */
    bool arena_reads;          /* a peer's bytes received straight into a GET's arena buffer */
    char *metrics_listen;      /* HOST:PORT of the metrics and health pages (NULL: none) */
};

/* The whole key space of mc-agent: daemon + agent + master tables. */
extern const struct mc_config_entry mc_agent_config_table[];
/* The agent's own knobs only (for docs/config.md). */
extern const struct mc_config_entry mc_agent_own_config_table[];

int mc_agent_config_validate(const void *cfg, char *err, size_t errlen);

#endif /* MC_AGENT_CONFIG_H */
