/*
 * The config table of mc-agent: its own knobs plus the included daemon and master tables.
 */
#include "daemon/agent/agent_config.h"

#include <stddef.h>
#include <stdio.h>

#include <mc/mc_status.h>

#include "daemon/agent/gpu_cfg.h"
#include "daemon/agent/tenant_cfg.h"
#include "shm/ring.h"

#define FIELD(f) offsetof(struct mc_agent_config, f)

/* in the order of enum mc_disk_engine (disk_io.h) */
static const char *const disk_engine_names[] = {"auto", "io_uring", "threads", NULL};

/* in the order of enum mc_loop_kind (loop.h) */
static const char *const loop_names[] = {"io_uring", "epoll", NULL};

const struct mc_config_entry mc_agent_own_config_table[] = {
    {.name = "socket", .type = MC_CFG_STRING, .def = NULL, .offset = FIELD(socket),
     .doc = "Unix socket clients connect to (unset: $MC_AGENT_SOCKET, else "
            "$XDG_RUNTIME_DIR/mc/agent.sock, else /run/mc/agent.sock)."},
    {.name = "node_name", .type = MC_CFG_STRING, .def = NULL, .offset = FIELD(node_name),
     .doc = "This node's name at the master (unset: the host name)."},
    {.name = "dram", .type = MC_CFG_SIZE, .def = "256M", .min = 0, .max = 1ull << 44,
     .offset = FIELD(dram),
     .doc = "Bytes of DRAM the agent contributes to the pool (at least 1 MiB; 0 in cluster "
            "mode makes a node that holds no data, a pure client node)."},
    {.name = "hugepages", .type = MC_CFG_BOOL, .def = "false", .offset = FIELD(hugepages),
     .doc = "Back the DRAM segment with huge pages (MFD_HUGETLB); falls back to normal pages "
            "with a warning when none are reserved."},
    {.name = "prefault", .type = MC_CFG_BOOL, .def = "true", .offset = FIELD(prefault),
     .doc = "Allocate and map every page of the DRAM segment at start-up, so no put pays "
            "for page faults (start-up takes about 0.2 s per GiB)."},
    {.name = "gpu", .type = MC_CFG_STRING, .def = NULL, .offset = FIELD(gpu),
     .doc = "GPU segments: comma-separated DEV:SIZE, DEV cuda (device 0), cudaN or test (the "
            "test device, host memory behaving like a GPU: for tests only); what --gpu adds "
            "to. Unset: none. docs/gpu.md."},
    {.name = "gpu_test_delay_us", .type = MC_CFG_U64, .def = "0", .min = 0, .max = 10000000,
     .offset = FIELD(gpu_test_delay_us),
     .doc = "Tests only: every copy of the test device waits this long before it runs."},
    {.name = "gpu_test_fail_nth", .type = MC_CFG_U64, .def = "0", .min = 0,
     .max = 4294967295.0, .offset = FIELD(gpu_test_fail_nth),
     .doc = "Tests only: the nth copy of the test device fails (0: none)."},
    {.name = "gpu_test_fail_every", .type = MC_CFG_U64, .def = "0", .min = 0,
     .max = 4294967295.0, .offset = FIELD(gpu_test_fail_every),
     .doc = "Tests only: every copy whose number is a multiple of this fails (0: none)."},
    {.name = "gpu_test_ucx_direct", .type = MC_CFG_BOOL, .def = "false",
     .offset = FIELD(gpu_test_ucx_direct),
     .doc = "Tests only: treat the test device's memory (host memory) as memory UCX moves "
            "directly, so peers' reads and writes of its GPU segments skip the staging, as "
            "they do with a UCX that moves CUDA memory."},
    {.name = "disk", .type = MC_CFG_STRING, .def = NULL, .offset = FIELD(disk),
     .doc = "The disk tier (docs/disk.md): a file the agent creates and preallocates (of "
            "disk_size bytes) when absent or empty, or an existing disk file or block device. "
            "Objects evicted from DRAM are written there (disk_admission) and read back on a "
            "GET; its records survive restarts. A non-empty file that is not a disk file is "
            "refused, never overwritten. Unset: none."},
    {.name = "disk_size", .type = MC_CFG_SIZE, .def = "0", .min = 0, .max = 1ull << 50,
     .offset = FIELD(disk_size),
     .doc = "Bytes of the disk file to create (0: use the existing file's or device's size)."},
    {.name = "disk_engine", .type = MC_CFG_ENUM, .def = "auto", .offset = FIELD(disk_engine),
     .choices = disk_engine_names,
     .doc = "The disk tier's I/O engine: auto (io_uring with O_DIRECT; where io_uring is denied "
            "or the file system refuses O_DIRECT, worker threads doing pread/pwrite), "
            "io_uring, or threads. `mcctl stats` shows the one in use."},
    {.name = "disk_depth", .type = MC_CFG_U64, .def = "32", .min = 1, .max = 1024,
     .offset = FIELD(disk_depth),
     .doc = "Disk I/Os in flight at most (the disk tier's staging buffers): the bandwidth knob."},
    {.name = "disk_peer_reads", .type = MC_CFG_U64, .def = "64", .min = 1, .max = 65536,
     .offset = FIELD(disk_peer_reads),
     .doc = "Reads of this node's disk records for other nodes (READ, READ_BATCH items) under "
            "way at most; each holds a buffer of the object's size until its bytes are read. "
            "More wait in a queue (16 per place, without a buffer); beyond it a read is "
            "answered MC_ERR_BUSY, and the reader tries another replica."},
    {.name = "disk_chunk", .type = MC_CFG_SIZE, .def = "1M", .min = 4096, .max = 64 << 20,
     .offset = FIELD(disk_chunk),
     .doc = "Bytes of one staging buffer and of the disk I/Os through it (headers, writes), "
            "a multiple of 4 KiB; disk_depth of them are allocated at start. Reads of disk "
            "hits land in block-aligned memory directly, in I/Os of up to 16 MiB (or "
            "disk_chunk if larger)."},
    {.name = "op_timeout_ms", .type = MC_CFG_MS, .def = "5000", .min = 1, .max = 3600000,
     .offset = FIELD(op_timeout_ms),
     .doc = "Deadline of an operation whose client named none: it then ends with "
            "MC_ERR_TIMEOUT."},
    {.name = "agent_spin_us", .type = MC_CFG_U64, .def = "50", .min = 0, .max = 1000000,
     .offset = FIELD(agent_spin_us),
     .doc = "The agent polls client rings in memory at most this long after the last request "
            "before it sleeps on their doorbells, and only while polling pays (adaptive_wait; "
            "docs/decisions.md); 0 never spins."},
    {.name = "adaptive_wait", .type = MC_CFG_BOOL, .def = "true", .offset = FIELD(adaptive_wait),
     .doc = "Poll only while polling pays on this host: the agent compares the requests it "
            "takes while it and its clients poll and while everyone sleeps on the doorbells, "
            "and keeps the better (docs/decisions.md, \"Adaptive waiting\"). false: poll up "
            "to agent_spin_us and MC_CLIENT_SPIN_US whatever the load (for measurements: "
            "scripts/bench-busy.sh)."},
    {.name = "loop", .type = MC_CFG_ENUM, .def = "io_uring", .offset = FIELD(loop),
     .choices = loop_names,
     .doc = "The event loop's backend: io_uring (the default; where io_uring_setup fails, "
            "as under Docker's default seccomp profile or kernel.io_uring_disabled, the agent "
            "logs it once and uses epoll) or epoll. `mcctl stats` shows the one in use."},
    {.name = "sq_entries", .type = MC_CFG_U64, .def = "256", .min = 8, .max = 4096,
     .offset = FIELD(sq_entries),
     .doc = "Submission ring entries per client (a power of two); the completion ring has as "
            "many."},
    {.name = "staging_slot_size", .type = MC_CFG_SIZE, .def = "1M", .min = MC_SHM_CHUNK,
     .max = 64 << 20, .offset = FIELD(staging_slot_size),
     .doc = "Bytes of one staging slot (a multiple of 1 MiB): puts larger than this go in "
            "pipelined pieces."},
    {.name = "staging_slots", .type = MC_CFG_U64, .def = "8", .min = 2, .max = 256,
     .offset = FIELD(staging_slots), .doc = "Staging slots per client."},
    {.name = "max_inflight", .type = MC_CFG_U64, .def = "128", .min = 1, .max = 4096,
     .offset = FIELD(max_inflight),
     .doc = "Operations one client may have submitted and not reaped; more is a protocol "
            "error and disconnects it."},
    {.name = "max_clients", .type = MC_CFG_U64, .def = "256", .min = 1, .max = 65536,
     .offset = FIELD(max_clients), .doc = "Connected clients at most; more are refused."},
    {.name = "max_clients_per_uid", .type = MC_CFG_U64, .def = "0", .min = 0, .max = 65536,
     .offset = FIELD(max_clients_per_uid),
     .doc = "Connections one uid may hold at once (root and the agent's own uid included); "
            "more are refused with MC_ERR_BUSY, so one client cannot take every slot of "
            "max_clients. 0, the default: three quarters of max_clients (at least 1), so a "
            "node whose clients all run as one user keeps most slots for it and another "
            "user still finds a quarter free."},
    {.name = "arena_bytes_per_client", .type = MC_CFG_SIZE, .def = "256G", .min = 1 << 20,
     .max = 1ull << 50, .offset = FIELD(arena_bytes_per_client),
     .doc = "Bytes of zero-copy arenas (mc_buf_alloc) one connection may have registered, "
            "counted by their mapped size. An arena over it is not mapped: ops naming it "
            "fail with MC_ERR_NO_SPACE, the connection stays usable."},
    {.name = "arena_bytes_total", .type = MC_CFG_SIZE, .def = "1T", .min = 1 << 20,
     .max = 1ull << 50, .offset = FIELD(arena_bytes_total),
     .doc = "Bytes of arenas all connections together may have registered (the agent maps "
            "each one, and its address space is finite); over it as arena_bytes_per_client."},
    {.name = "open_put_bytes_per_client", .type = MC_CFG_SIZE, .def = "0", .min = 0,
     .max = 1ull << 50, .offset = FIELD(open_put_bytes_per_client),
     .doc = "Bytes of puts one client may have started and not finished (PUT, PUT_START); a "
            "put over it fails with MC_ERR_NO_SPACE, unless the client has no other put "
            "open (any object that fits the pool can be put). 0, the default: a quarter of "
            "dram, at most 1 GiB (1 GiB on a node with no DRAM segment)."},
    {.name = "put_idle_ms", .type = MC_CFG_MS, .def = "10000", .min = 10, .max = 3600000,
     .offset = FIELD(put_idle_ms),
     .doc = "A put started with PUT_START that receives no PUT_DATA for this long is "
            "revoked and its space freed; the client's later PUT_DATA, PUT_END or "
            "PUT_ABORT naming it is answered MC_ERR_TIMEOUT."},
    {.name = "copy_slice", .type = MC_CFG_SIZE, .def = "256K", .min = 4096, .max = 64 << 20,
     .offset = FIELD(copy_slice),
     .doc = "Bytes the agent copies per loop turn before it serves other clients, timers "
            "and the network, so one large object never stalls the rest."},
    {.name = "lease_margin_ms", .type = MC_CFG_MS, .def = "500", .min = 0, .max = 60000,
     .offset = FIELD(lease_margin_ms),
     .doc = "Clients are told their lease ends this much before the master's does, so a "
            "reader never trusts a lease the master has dropped."},
    {.name = "allow_uids", .type = MC_CFG_STRING, .def = NULL, .offset = FIELD(allow_uids),
     .doc = "Comma-separated uids allowed to connect in addition to root and the agent's own "
            "uid, which may always connect (unset: only those two)."},
    {.name = "allow_gids", .type = MC_CFG_STRING, .def = NULL, .offset = FIELD(allow_gids),
     .doc = "Comma-separated gids whose members may connect too, as primary or supplementary "
            "group (SO_PEERGROUPS, the groups the client had when it connected); adds to root, "
            "the agent's own uid and allow_uids (unset: no group admits anyone)."},
    {.name = "tenants", .type = MC_CFG_STRING, .def = NULL, .offset = FIELD(tenants),
     .json = true,
     .doc = "Tenants (docs/tenants.md): a JSON object from tenant name to {\"uids\": [...], "
            "\"gids\": [...], \"quota_bytes\": N, \"dram_bytes\": N}. A client whose uid, "
            "primary or supplementary group a tenant lists belongs to it (and is admitted): it "
            "sees only its tenant's keys and maps only its tenant's segments; quota_bytes "
            "bounds what the tenant holds across the cluster, dram_bytes (default: the quota) "
            "is its segment here. Unset: one default tenant, everyone in it."},
    {.name = "idle_wakeups_max", .type = MC_CFG_U64, .def = "100000", .min = 1,
     .max = 100000000, .offset = FIELD(idle_wakeups_max),
     .doc = "Doorbells with nothing submitted one client may ring per second before it is "
            "disconnected."},
    {.name = "master_addr", .type = MC_CFG_STRING, .def = NULL, .offset = FIELD(master_addr),
     .doc = "Cluster mode: HOST:PORT of mc-master (its TCP bootstrap listener). Unset: the "
            "agent runs standalone with the master service in-process."},
    {.name = "etcd", .type = MC_CFG_STRING, .def = NULL, .offset = FIELD(etcd),
     .doc = "Cluster mode with master high availability: etcd client URLs (http://HOST:PORT, "
            "comma-separated); the agent joins whichever mc-master leads cluster_id there, "
            "follows it when another takes over, and needs no master_addr "
            "(docs/master.md)."},
    {.name = "cluster_id", .type = MC_CFG_STRING, .def = NULL, .offset = FIELD(cluster_id),
     .doc = "With etcd: the cluster whose leader to follow (1..63 of [A-Za-z0-9_.-])."},
    {.name = "listen", .type = MC_CFG_STRING, .def = NULL, .offset = FIELD(listen),
     .doc = "Cluster mode: HOST:PORT of this agent's TCP bootstrap listener, which hands "
            "peers its address (port 0: any free port, written to the ready file). HOST is "
            "the address peers reach this node at; a numeric HOST (not 0.0.0.0 or ::) is "
            "also where its UCX worker listens (a free port), and the address handed out "
            "names that listener, else it is the UCX worker address."},
    {.name = "domain", .type = MC_CFG_STRING, .def = NULL, .offset = FIELD(domain),
     .doc = "Cluster mode: the node's failure domain (unset: a domain of its own). Replicas "
            "of one object go to distinct domains."},
    {.name = "cluster_token", .type = MC_CFG_STRING, .def = NULL, .offset = FIELD(cluster_token),
     .secret = true,
     .doc = "Cluster mode: the shared secret presented to the master and to peers; prefer "
            "MC_CLUSTER_TOKEN or the config file to the command line."},
    {.name = "landing", .type = MC_CFG_SIZE, .def = "256M", .min = 16 << 20, .max = 1ull << 40,
     .offset = FIELD(landing),
     .doc = "Cluster mode, or any agent with GPU segments: bytes of the landing segment, where "
            "reads from peers and from GPU segments land before local clients copy them out "
            "(clients map it read-only)."},
    {.name = "heartbeat_ms", .type = MC_CFG_MS, .def = "1000", .min = 10, .max = 600000,
     .offset = FIELD(heartbeat_ms),
     .doc = "Cluster mode: heartbeat period to the master (well within its node_ttl_ms)."},
    {.name = "master_timeout_ms", .type = MC_CFG_MS, .def = "1000", .min = 10, .max = 600000,
     .offset = FIELD(master_timeout_ms),
     .doc = "Cluster mode: a master that has answered none of the agent's calls for this long "
            "(stopped, stalled, cut off) is taken as unreachable: calls that need it fail "
            "with MC_ERR_UNAVAILABLE at once, until it answers again (the heartbeats keep "
            "asking)."},
    {.name = "connect_timeout_ms", .type = MC_CFG_MS, .def = "10000", .min = 100,
     .max = 600000, .offset = FIELD(connect_timeout_ms),
     .doc = "Cluster mode: how long start-up may take to reach the master, authenticate "
            "and mount; past it the agent exits non-zero."},
    {.name = "keepalive_ms", .type = MC_CFG_MS, .def = "1000", .min = 100, .max = 600000,
     .offset = FIELD(keepalive_ms),
     .doc = "Cluster mode: UCX keepalive interval of the agent's endpoints."},
    {.name = "peer_hard_deadline_ms", .type = MC_CFG_MS, .def = "5000", .min = 100,
     .max = 600000, .offset = FIELD(peer_hard_deadline_ms),
     .doc = "Cluster mode: a transfer with a peer still under way this long after its op's "
            "deadline marks the peer unresponsive: its endpoint is closed with force (every "
            "transfer on it ends with an error; their memory is reused only then)."},
    {.name = "ucx_shm", .type = MC_CFG_BOOL, .def = "false", .offset = FIELD(ucx_shm),
     .doc = "Cluster mode: let UCX use its shared-memory transports (posix, sysv) between "
            "daemons on one host: about twice the bandwidth of tcp there, but a peer killed "
            "while it sends can leave the receiver's shared-memory queue blocked for good "
            "(UCX 1.13), and one killed with -9 leaves its segments in /dev/shm (docs/decisions.md). "
            "Off by default; daemons on different hosts never use it. UCX_TLS, when set, wins."},
    {.name = "bulk_eager_max", .type = MC_CFG_SIZE, .def = "128K", .min = 0, .max = 1u << 20,
     .offset = FIELD(bulk_eager_max),
     .doc = "Cluster mode: a transfer between daemons (a put's write to an owner, a read's "
            "reply) of up to this many bytes goes as one message, copied out of UCX's buffers "
            "on arrival; a larger one by rendezvous, the receiver pulling the bytes into place "
            "(a request and an acknowledgement more per object). 0: always rendezvous. 128K: "
            "64 KiB objects moved 1.4-1.5x faster over tcp, 1 MiB ones 0.8x; with ucx_shm, 1M "
            "pays (docs/decisions.md)."},
    {.name = "arena_reads", .type = MC_CFG_BOOL, .def = "true", .offset = FIELD(arena_reads),
     .doc = "Cluster mode: a GET into an arena buffer (mc_buf_alloc) whose object is read from "
            "another node receives the owner's bytes straight into that buffer instead of the "
            "landing segment (one copy less; the client verifies the checksums in place). The "
            "checksum trailer lands there too when the capacity holds it (mc_shm_alloc_len), "
            "else apart in a small landing block: nothing past the buffer is written. "
            "Only the first transfer of a GET may land there; one still moving at the op's "
            "deadline is cut by closing the owner's endpoint with force (docs/decisions.md). "
            "A synchronous GET whose SQE the agent took then waits for its answer, as a put "
            "from the caller's memory does (mc.h, \"Deadlines\"). false: every remote read "
            "lands in the landing segment and is copied."},
    {.name = "metrics_listen", .type = MC_CFG_STRING, .def = NULL,
     .offset = FIELD(metrics_listen),
     .doc = "HOST:PORT of the HTTP listener serving GET /metrics (Prometheus text format), "
            "/health and /ready (docs/metrics.md); port 0: any free port, logged as "
            "\"metrics on HOST:PORT\". Unset, the default: no listener."},
    {.name = NULL},
};

const struct mc_config_entry mc_agent_config_table[] = {
    MC_CONFIG_INCLUDE(struct mc_agent_config, daemon, mc_config_daemon_table),
    {.name = "agent", .type = MC_CFG_TABLE, .offset = 0, .sub = mc_agent_own_config_table, .doc = ""},
    MC_CONFIG_INCLUDE(struct mc_agent_config, master, mc_master_config_table),
    {.name = NULL},
};

int mc_agent_config_validate(const void *base, char *err, size_t errlen)
{
    const struct mc_agent_config *cfg = base;

    if ((cfg->sq_entries & (cfg->sq_entries - 1)) != 0) {
        snprintf(err, errlen, "sq_entries: %llu is not a power of two",
                 (unsigned long long)cfg->sq_entries);
        return MC_ERR_INVALID;
    }
    if (cfg->staging_slot_size % MC_SHM_CHUNK != 0) {
        snprintf(err, errlen, "staging_slot_size: %llu is not a multiple of 1 MiB",
                 (unsigned long long)cfg->staging_slot_size);
        return MC_ERR_INVALID;
    }
    if (cfg->max_inflight > cfg->sq_entries) {
        snprintf(err, errlen, "max_inflight (%llu) must not exceed sq_entries (%llu)",
                 (unsigned long long)cfg->max_inflight, (unsigned long long)cfg->sq_entries);
        return MC_ERR_INVALID;
    }
    if ((cfg->etcd != NULL) != (cfg->cluster_id != NULL)) {
        snprintf(err, errlen, "etcd and cluster_id: give both or neither");
        return MC_ERR_INVALID;
    }
    if (cfg->master_addr == NULL && cfg->etcd == NULL && cfg->dram < (1u << 20)) {
        snprintf(err, errlen, "dram: a standalone agent needs at least 1 MiB (0 is for "
                              "client nodes of a cluster)");
        return MC_ERR_INVALID;
    }
    if (cfg->dram != 0 && cfg->dram < (1u << 20)) {
        snprintf(err, errlen, "dram: at least 1 MiB, or 0 for a client node");
        return MC_ERR_INVALID;
    }
    if (cfg->gpu != NULL) {
        struct mc_gpu_spec specs[MC_AGENT_GPU_MAX];
        size_t n;
        int rc = mc_gpu_spec_parse(cfg->gpu, specs, &n, err, errlen);

        if (rc != 0)
            return rc;
    }
    if (cfg->disk_chunk % 4096 != 0) {
        snprintf(err, errlen, "disk_chunk: %llu is not a multiple of 4096",
                 (unsigned long long)cfg->disk_chunk);
        return MC_ERR_INVALID;
    }
    if (cfg->disk != NULL && cfg->disk[0] == '\0') {
        snprintf(err, errlen, "disk: an empty path");
        return MC_ERR_INVALID;
    }
    if (cfg->tenants != NULL) {
        struct tenant_cfg *t;
        size_t n;
        int rc = tenant_cfg_parse(cfg->tenants, cfg->dram, &t, &n, err, errlen);

        if (rc != 0)
            return rc;
        tenant_cfg_free(t, n);
    }
    return mc_master_config_validate(&cfg->master, err, errlen);
}
