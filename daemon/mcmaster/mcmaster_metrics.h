/*
 * The metrics of mc-master: one row per sample (metrics.h), named once here. The server's
 * loop fills an array indexed by enum mc_mcmaster_metric; the same rows print
 * docs/metrics.md (mc-metrics-doc).
 */
#ifndef MC_MCMASTER_METRICS_H
#define MC_MCMASTER_METRICS_H

#include "daemon/common/metrics.h"

#define MM_RPC_HELP "RPCs handled, by kind (a batch is one RPC; refused ones count too)."
#define MM_RPC(X, id, kind) X(RPC_##id, "mcstore_master_rpcs_total", COUNTER, "kind=\"" kind "\"", \
                           MM_RPC_HELP, NULL, NULL)

/* X(id, name, type, labels, help, when, mcctl stats field) */
#define MC_MCMASTER_METRICS(X)                                                                 \
    X(OBJECTS, "mcstore_master_objects", GAUGE, NULL,                                          \
      "Objects in the directory (visible or lingering).", NULL, "objects")                    \
    X(NODES_ALIVE, "mcstore_master_nodes_alive", GAUGE, NULL, "Nodes alive.", NULL, NULL)      \
    X(SEGMENTS, "mcstore_master_segments", GAUGE, NULL, "Segments mounted.", NULL, NULL)       \
    X(PEERS, "mcstore_master_peers", GAUGE, NULL,                                              \
      "UCX endpoints accepted (authenticated or not).", NULL, NULL)                           \
    X(CAPACITY_DRAM, "mcstore_master_capacity_bytes", GAUGE, "tier=\"dram\"",                  \
      "Bytes of the mounted segments, per tier.", NULL, "capacity_bytes")                     \
    X(USED_DRAM, "mcstore_master_used_bytes", GAUGE, "tier=\"dram\"",                          \
      "Bytes allocated in the mounted segments, per tier.", NULL, "used_bytes")               \
    X(META_BYTES, "mcstore_master_meta_bytes", GAUGE, NULL,                                    \
      "Bytes of directory and allocator metadata (records excluded).", NULL, NULL)            \
    X(PUTS_STARTED, "mcstore_master_puts_started_total", COUNTER, NULL,                        \
      "Puts granted space.", NULL, NULL)                                                      \
    X(PUTS_COMPLETED, "mcstore_master_puts_completed_total", COUNTER, NULL,                    \
      "Puts published.", NULL, "puts")                                                        \
    X(PUTS_REVOKED, "mcstore_master_puts_revoked_total", COUNTER, NULL,                        \
      "Puts revoked before they were published.", NULL, "puts_revoked")                       \
    X(PUTS_CANCELED, "mcstore_master_puts_canceled_total", COUNTER, NULL,                      \
      "Puts canceled by their writers.", NULL, NULL)                                          \
    X(PUTS_DISPLACED, "mcstore_master_puts_displaced_total", COUNTER, NULL,                    \
      "Published versions displaced by a newer put of the same key.", NULL, NULL)             \
    X(GETS, "mcstore_master_gets_total", COUNTER, NULL, "GET lookups.", NULL, "gets")          \
    X(GET_MISSES, "mcstore_master_get_misses_total", COUNTER, NULL,                            \
      "GET lookups that found no object.", NULL, "get_misses")                                \
    X(LEASE_GRANTS, "mcstore_master_lease_grants_total", COUNTER, NULL,                        \
      "Read leases granted.", NULL, NULL)                                                     \
    X(LEASE_RELEASES, "mcstore_master_lease_releases_total", COUNTER, NULL,                    \
      "Read leases released by their readers.", NULL, NULL)                                   \
    X(LEASE_EXPIRIES, "mcstore_master_lease_expiries_total", COUNTER, NULL,                    \
      "Read leases that expired unreleased.", NULL, "lease_expiries")                         \
    X(EVICTIONS, "mcstore_master_evictions_total", COUNTER, NULL,                              \
      "Objects evicted to make room.", NULL, "evictions")                                     \
    X(EVICTED_BYTES, "mcstore_master_evicted_bytes_total", COUNTER, NULL,                      \
      "Bytes evicted to make room.", NULL, NULL)                                              \
    X(TTL_EXPIRIES, "mcstore_master_ttl_expiries_total", COUNTER, NULL,                        \
      "Objects dropped when their TTL ran out.", NULL, "ttl_expiries")                        \
    X(REMOVES, "mcstore_master_removes_total", COUNTER, NULL, "Objects removed.", NULL,        \
      "removes")                                                                               \
    X(STALE_WRITER, "mcstore_master_stale_freed_by_writer_total", COUNTER, NULL,               \
      "Stale allocations freed by their writer.", NULL, NULL)                                 \
    X(STALE_FENCE, "mcstore_master_stale_freed_by_fence_total", COUNTER, NULL,                 \
      "Stale allocations freed once fenced.", NULL, "stale_freed_by_fence")                   \
    X(STALE_TIMEOUT, "mcstore_master_stale_freed_by_timeout_total", COUNTER, NULL,             \
      "Stale allocations freed after their timeout.", NULL, "stale_freed_by_timeout")         \
    X(NODES_DEAD, "mcstore_master_nodes_declared_dead_total", COUNTER, NULL,                   \
      "Nodes declared dead (no heartbeat within node_ttl_ms).", NULL, "nodes_declared_dead")  \
    MM_RPC(X, HELLO, "hello")                                                                     \
    MM_RPC(X, MOUNT, "mount")                                                                     \
    MM_RPC(X, HEARTBEAT, "heartbeat")                                                             \
    MM_RPC(X, PUT_START, "put_start")                                                             \
    MM_RPC(X, PUT_END, "put_end")                                                                 \
    MM_RPC(X, PUT_REVOKE, "put_revoke")                                                           \
    MM_RPC(X, GET, "get")                                                                         \
    MM_RPC(X, LEASE_RELEASE, "lease_release")                                                     \
    MM_RPC(X, EXIST, "exist")                                                                     \
    MM_RPC(X, REMOVE, "remove")                                                                   \
    MM_RPC(X, FENCE, "fence")                                                                     \
    MM_RPC(X, CLUSTER_INFO, "cluster_info")                                                       \
    MM_RPC(X, LIST, "list")                                                                       \
    MM_RPC(X, OTHER, "other")                                                                     \
    X(RPCS_FAILED, "mcstore_master_rpcs_failed_total", COUNTER, NULL,                          \
      "RPCs answered with an error status (refused, malformed, failed).", NULL, NULL)         \
    X(DROPS_SENT, "mcstore_master_drops_sent_total", COUNTER, NULL,                            \
      "DROP batches sent to owners (every try).", NULL, NULL)                                 \
    X(DROPS_RETRIED, "mcstore_master_drops_retried_total", COUNTER, NULL,                      \
      "DROP tries after the first (the owner did not answer in time).", NULL, NULL)           \
    X(DROPS_GIVEN_UP, "mcstore_master_drops_given_up_total", COUNTER, NULL,                    \
      "DROP batches given up on (120 s unanswered, or the queue full).", NULL, NULL)          \
    X(DROPS_LOST, "mcstore_master_drops_lost_total", COUNTER, NULL,                            \
      "Freed blocks whose DROP could not be queued (sent once or not at all): the owner may " \
      "still report them at a failover.", NULL, NULL)                                         \
    X(DROPS_QUEUED, "mcstore_master_drops_queued", GAUGE, NULL,                                \
      "DROP batches held until their owners answer.", NULL, NULL)                             \
    X(DISK_LOST, "mcstore_master_disk_replicas_lost_total", COUNTER, NULL,                     \
      "Disk replicas given up as lost: a drain found the record corrupt or missing at its "    \
      "owner.", NULL, NULL)                                                                   \
    X(REMOVES_HELD, "mcstore_master_removes_held_total", COUNTER, NULL,                        \
      "REMOVE answers (and PUT_END answers that replaced a disk-resident version) sent "      \
      "once the owners of the disk records they freed or retired said the erase or mark is "  \
      "durable.", NULL, NULL)                                                                 \
    X(REMOVES_HELD_EXPIRED, "mcstore_master_removes_held_expired_total", COUNTER, NULL,        \
      "REMOVE (or replacing PUT_END) answers sent after waiting 1 s for those owners "        \
      "without all their answers.",                                                           \
      NULL, NULL)

enum mc_mcmaster_metric {
#define MC_MCMASTER_METRIC_ENUM(id, name, type, labels, help, when, stats) MM_##id,
    MC_MCMASTER_METRICS(MC_MCMASTER_METRIC_ENUM)
#undef MC_MCMASTER_METRIC_ENUM
    MM__COUNT
};

extern const struct mc_metric_def mc_mcmaster_metrics_table[];

#endif /* MC_MCMASTER_METRICS_H */
