/*
 * The metrics of mc-agent: one row per sample (metrics.h), named once here. The loop fills
 * an array indexed by enum mc_agent_metric (agent_metrics_publish in agent.c); the same
 * rows print docs/metrics.md (mc-metrics-doc).
 */
#ifndef MC_AGENT_METRICS_H
#define MC_AGENT_METRICS_H

#include "daemon/common/metrics.h"

#define AM_STANDALONE "standalone agent (in cluster mode mc-master reports it)"
#define AM_CLUSTER    "cluster mode"

/* X(id, name, type, labels, help, when, mcctl stats field) */
#define MC_AGENT_METRICS(X)                                                                    \
    X(OPS, "mcstore_agent_ops_total", COUNTER, NULL,                                           \
      "Operations taken from the client rings (every opcode).", NULL, NULL)                   \
    X(PUTS, "mcstore_agent_puts_total", COUNTER, NULL,                                         \
      "Puts through this agent that were published.", NULL, "puts (standalone)")              \
    X(GETS, "mcstore_agent_gets_total", COUNTER, NULL,                                         \
      "GET operations taken from the client rings.", NULL, NULL)                              \
    X(GET_HITS, "mcstore_agent_get_hits_total", COUNTER, NULL,                                 \
      "GETs answered with an object.", NULL, NULL)                                            \
    X(CORRUPT_READS, "mcstore_agent_corrupt_reads_total", COUNTER, NULL,                       \
      "GETs answered MC_ERR_CORRUPT: every replica failed the reader's checksum.", NULL,      \
      NULL)                                                                                    \
    X(CHECKSUM_RETRIES, "mcstore_agent_checksum_retries_total", COUNTER, NULL,                 \
      "GETs retried by a reader because a replica failed its checksum.", NULL, NULL)          \
    X(BYTES_WRITTEN, "mcstore_agent_bytes_written_total", COUNTER, NULL,                       \
      "Bytes of put data copied in from clients.", NULL, "bytes_written")                     \
    X(CLIENTS, "mcstore_agent_clients", GAUGE, NULL, "Connected clients.", NULL, "clients")    \
    X(CLIENTS_DISCONNECTED, "mcstore_agent_clients_disconnected_total", COUNTER, NULL,         \
      "Clients gone (closed, crashed or cut off).", NULL, "clients_disconnected")             \
    X(CLIENTS_REFUSED, "mcstore_agent_clients_refused_total", COUNTER, NULL,                   \
      "Connections refused (not allowed, too many clients, draining).", NULL,                \
      "clients_refused")                                                                       \
    X(CLIENTS_REFUSED_DENIED, "mcstore_agent_clients_refused_denied_total", COUNTER, NULL,     \
      "Connections refused because their uid and gid are not on the allow-list (logged at "  \
      "most once a second).", NULL, "clients_refused_denied")                                \
    X(CLIENTS_REFUSED_BUSY, "mcstore_agent_clients_refused_busy_total", COUNTER, NULL,         \
      "Connections refused MC_ERR_BUSY: max_clients, or max_clients_per_uid of their uid.",   \
      NULL, "clients_refused_busy")                                                            \
    X(ARENA_BYTES, "mcstore_agent_arena_bytes", GAUGE, NULL,                                   \
      "Bytes of client arenas the agent has mapped (arena_bytes_total bounds it).", NULL,     \
      "arena_bytes")                                                                           \
    X(ARENAS_REFUSED, "mcstore_agent_arenas_refused_total", COUNTER, NULL,                     \
      "Arena registrations not mapped: over arena_bytes_per_client or arena_bytes_total.",    \
      NULL, "arenas_refused")                                                                  \
    X(PUTS_REFUSED_OPEN, "mcstore_agent_puts_refused_open_bytes_total", COUNTER, NULL,         \
      "Puts refused MC_ERR_NO_SPACE: over the client's open_put_bytes_per_client.", NULL,     \
      "puts_refused_open_bytes")                                                               \
    X(PUTS_IDLE_REVOKED, "mcstore_agent_puts_idle_revoked_total", COUNTER, NULL,               \
      "Started puts revoked after put_idle_ms with no data from their client.", NULL,         \
      "puts_idle_revoked")                                                                     \
    X(PUT_WAITS, "mcstore_agent_put_waits_total", COUNTER, NULL,                               \
      "Tries of puts that waited for room: the master had none, but offloads to a disk "      \
      "were under way (docs/disk.md, Back-pressure).", NULL, "put_waits")                     \
    X(PUTS_FROM_ARENA, "mcstore_agent_puts_from_arena_total", COUNTER, NULL,                   \
      "Puts with no replica on this node sent to their owners straight from the client's "    \
      "arena buffer (no image copy).", NULL, "puts_from_arena")                               \
    X(VIOLATIONS, "mcstore_agent_protocol_violations_total", COUNTER, NULL,                    \
      "Invalid submissions from clients.", NULL, NULL)                                        \
    X(DELAYED, "mcstore_agent_test_delayed_answers_total", COUNTER, NULL,                     \
      "Answers held back by the test-only delay knobs (0 in production).", NULL,              \
      "test_delayed_answers")                                                                  \
    X(HUGEPAGES, "mcstore_agent_hugepages", GAUGE, NULL,                                       \
      "1 when the DRAM segment is backed by huge pages.", NULL, "hugepages")                  \
    X(DRAINING, "mcstore_agent_draining", GAUGE, NULL,                                         \
      "1 once the agent drains (SIGTERM, or a fatal error): no new clients or ops.", NULL,    \
      NULL)                                                                                    \
    X(CAPACITY_DRAM, "mcstore_agent_capacity_bytes", GAUGE, "tier=\"dram\"",                   \
      "Bytes this node contributes to the pool, per tier.", NULL, "dram_bytes")               \
    X(USED_DRAM, "mcstore_agent_used_bytes", GAUGE, "tier=\"dram\"",                           \
      "Bytes allocated in this node's segments, per tier.", AM_STANDALONE, "used_bytes")      \
    X(PINNED_DRAM, "mcstore_agent_pinned_bytes", GAUGE, "tier=\"dram\"",                       \
      "Bytes hard-pinned in this node's segments, per tier.", AM_STANDALONE, NULL)            \
    X(OBJECTS, "mcstore_agent_objects", GAUGE, NULL,                                           \
      "Objects in the directory (visible or lingering).", AM_STANDALONE, "objects")           \
    X(STORE_CAPACITY, "mcstore_agent_store_capacity_bytes", GAUGE, NULL,                       \
      "Bytes of every mounted segment of the store.", AM_STANDALONE, "capacity_bytes")        \
    X(PUTS_STARTED, "mcstore_agent_puts_started_total", COUNTER, NULL,                         \
      "Puts granted space by the master service.", AM_STANDALONE, NULL)                       \
    X(PUTS_REVOKED, "mcstore_agent_puts_revoked_total", COUNTER, NULL,                         \
      "Puts revoked before they were published.", AM_STANDALONE, "puts_revoked")              \
    X(GET_MISSES, "mcstore_agent_get_misses_total", COUNTER, NULL,                             \
      "GET lookups that found no object.", AM_STANDALONE, "get_misses")                       \
    X(LEASE_GRANTS, "mcstore_agent_lease_grants_total", COUNTER, NULL,                         \
      "Read leases granted.", AM_STANDALONE, NULL)                                            \
    X(LEASE_RELEASES, "mcstore_agent_lease_releases_total", COUNTER, NULL,                     \
      "Read leases released by their readers.", AM_STANDALONE, NULL)                          \
    X(LEASE_EXPIRIES, "mcstore_agent_lease_expiries_total", COUNTER, NULL,                     \
      "Read leases that expired unreleased.", AM_STANDALONE, "lease_expiries")                \
    X(EVICTIONS, "mcstore_agent_evictions_total", COUNTER, NULL,                               \
      "Objects evicted to make room.", AM_STANDALONE, "evictions")                            \
    X(EVICTED_BYTES, "mcstore_agent_evicted_bytes_total", COUNTER, NULL,                       \
      "Bytes evicted to make room.", AM_STANDALONE, NULL)                                     \
    X(TTL_EXPIRIES, "mcstore_agent_ttl_expiries_total", COUNTER, NULL,                         \
      "Objects dropped when their TTL ran out.", AM_STANDALONE, "ttl_expiries")               \
    X(REMOVES, "mcstore_agent_removes_total", COUNTER, NULL, "Objects removed.",               \
      AM_STANDALONE, "removes")                                                                \
    X(STALE_FENCE, "mcstore_agent_stale_freed_by_fence_total", COUNTER, NULL,                  \
      "Stale allocations freed once fenced.", AM_STANDALONE, "stale_freed_by_fence")          \
    X(STALE_TIMEOUT, "mcstore_agent_stale_freed_by_timeout_total", COUNTER, NULL,              \
      "Stale allocations freed after their timeout.", AM_STANDALONE,                         \
      "stale_freed_by_timeout")                                                                \
    X(NODES_DEAD, "mcstore_agent_nodes_declared_dead_total", COUNTER, NULL,                    \
      "Nodes declared dead (no heartbeat within node_ttl_ms).", AM_STANDALONE,               \
      "nodes_declared_dead")                                                                   \
    X(MASTER_REACHABLE, "mcstore_agent_master_reachable", GAUGE, NULL,                         \
      "1 while the master is joined and answering, 0 while rejoining or silent.", AM_CLUSTER, \
      NULL)                                                                                    \
    X(LANDING, "mcstore_agent_landing_bytes", GAUGE, NULL,                                     \
      "Bytes of the landing segment (reads from peers land there).", AM_CLUSTER,             \
      "landing_bytes")                                                                         \
    X(LANDING_USED, "mcstore_agent_landing_used_bytes", GAUGE, NULL,                           \
      "Bytes of the landing segment in use.", AM_CLUSTER, "landing_used_bytes")               \
    X(WRITES_TO_PEERS, "mcstore_agent_peer_writes_total", COUNTER, NULL,                       \
      "Replica writes sent to peers.", AM_CLUSTER, "writes_to_peers")                         \
    X(BYTES_TO_PEERS, "mcstore_agent_peer_write_bytes_total", COUNTER, NULL,                   \
      "Bytes written to peers.", AM_CLUSTER, "bytes_to_peers")                                \
    X(READS_FROM_PEERS, "mcstore_agent_peer_reads_total", COUNTER, NULL,                       \
      "Reads of replicas held by peers.", AM_CLUSTER, "reads_from_peers")                     \
    X(BYTES_FROM_PEERS, "mcstore_agent_peer_read_bytes_total", COUNTER, NULL,                  \
      "Bytes read from peers.", AM_CLUSTER, "bytes_from_peers")                               \
    X(WRITES_SERVED, "mcstore_agent_peer_writes_served_total", COUNTER, NULL,                  \
      "Writes from peers landed in this node's segment.", AM_CLUSTER, "writes_served")        \
    X(WRITE_BYTES_SERVED, "mcstore_agent_peer_write_bytes_served_total", COUNTER, NULL,        \
      "Bytes written by peers into this node's segment.", AM_CLUSTER, NULL)                   \
    X(READS_SERVED, "mcstore_agent_peer_reads_served_total", COUNTER, NULL,                    \
      "Reads by peers served from this node's segment.", AM_CLUSTER, "reads_served")          \
    X(PEER_REFUSED, "mcstore_agent_peer_refused_total", COUNTER, NULL,                         \
      "Requests from peers refused (token, stale, out of range).", AM_CLUSTER,               \
      "peer_refused")                                                                          \
    X(PEER_ERRORS, "mcstore_agent_peer_errors_total", COUNTER, NULL,                           \
      "Transfers with peers that failed.", AM_CLUSTER, "peer_errors")                         \
    X(READ_FAILOVERS, "mcstore_agent_read_failovers_total", COUNTER, NULL,                     \
      "Reads that moved on to another replica.", AM_CLUSTER, "read_failovers")                \
    X(READS_HEDGED, "mcstore_agent_reads_hedged_total", COUNTER, NULL,                         \
      "Reads that started a second replica beside a slow one.", AM_CLUSTER, "reads_hedged")   \
    X(READS_INTO_ARENA, "mcstore_agent_reads_into_arena_total", COUNTER, NULL,                 \
      "Remote reads received straight into a client's arena buffer (arena_reads).",           \
      AM_CLUSTER, "reads_into_arena")                                                          \
    X(ARENA_READS_CUT, "mcstore_agent_arena_reads_cut_total", COUNTER, NULL,                   \
      "Transfers into a client's arena still moving at their op's deadline: the owner's "     \
      "endpoint was closed with force.", AM_CLUSTER, "arena_reads_cut")                        \
    X(ARENA_TAILS_IN_HEADER, "mcstore_agent_arena_tails_in_header_total", COUNTER, NULL,       \
      "Reads into a client's buffer of exactly the object's size whose checksum trailer came " \
      "in the owner's reply header (the object's bytes received whole).", AM_CLUSTER,        \
      "arena_tails_in_header")                                                                 \
    X(WRITE_TAILS_IN_HEADER, "mcstore_agent_write_tails_in_header_total", COUNTER, NULL,       \
      "Writes to peers of a put sent from a client's arena that carried the checksum "        \
      "trailer in their header (one write per replica instead of two).", AM_CLUSTER,         \
      "write_tails_in_header")                                                                 \
    X(PUT_LATENCY, "mcstore_agent_put_latency_seconds", HISTOGRAM, NULL,                       \
      "Put latency: a PUT's submission taken to its completion posted (a pieced put: "        \
      "PUT_START taken to PUT_END answered), every outcome.", NULL, NULL)                     \
    X(GET_LATENCY, "mcstore_agent_get_latency_seconds", HISTOGRAM, NULL,                       \
      "GET latency: its submission taken to its completion posted, every outcome.", NULL,     \
      NULL)

enum mc_agent_metric {
#define MC_AGENT_METRIC_ENUM(id, name, type, labels, help, when, stats) AM_##id,
    MC_AGENT_METRICS(MC_AGENT_METRIC_ENUM)
#undef MC_AGENT_METRIC_ENUM
    AM__COUNT
};

extern const struct mc_metric_def mc_agent_metrics_table[];

#endif /* MC_AGENT_METRICS_H */
