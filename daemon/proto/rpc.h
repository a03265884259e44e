/*
 * The message catalogue: every RPC between agents and mc-master, and between agents,
 * described once. One row per request (its reply is the next type number):
 *
 *     X(NAME, name, TYPE, FLAGS, ITEMS, "request layout", "reply layout")
 *
 *   NAME    the frame types MC_WIRE_<NAME> and MC_WIRE_<NAME>_REPLY (enum mc_wire_type)
 *   name    the handler's name where a front end serves the row (mc-master: h_<name>)
 *   TYPE    the request's frame type, odd; never changes once released
 *   FLAGS   MC_RPC_* below: who sends it to whom, batch or not
 *   ITEMS   the most items (or page entries) a message carries, a bound of proto_base.h;
 *           0 for none
 *   layouts the payload after the 24-byte frame header, all integers little-endian, "blob" =
 *           u32 length + bytes, [..] = only when the reply's status is 0
 *
 * From these rows come the type enum, mc-master's dispatch (daemon/mcmaster/server.c), the
 * descriptor table (rpc.c: names, flags and bounds for logs, tests and fuzzers) and the
 * layout section of docs/protocol.md (gen_protocol_doc.c; a unit test fails when the
 * committed file is stale). The payload codecs themselves are master_proto.h and
 * peer_proto.h. A new master RPC is a row in MC_PROTO_MASTER_RPCS plus its handler in
 * server.c (and its codec here).
 *
 * The composite items the layouts name (replica, stat, segment, node) are MC_PROTO_ITEMS.
 */
#ifndef MC_PROTO_RPC_H
#define MC_PROTO_RPC_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/proto/proto_base.h"
#include "ucx_backend/wire.h"

/* FLAGS */
#define MC_RPC_TO_MASTER   0x1u /* agent -> mc-master: served by server.c */
#define MC_RPC_TO_OWNER    0x2u /* mc-master -> the agent that owns a segment */
#define MC_RPC_PEER        0x4u /* agent -> agent */
#define MC_RPC_BATCH       0x8u /* n items, one status each in the reply */
#define MC_RPC_BULK        0x10u /* a bulk transfer (MC_WIRE_F_BULK) */
#define MC_RPC_NO_SESSION  0x20u /* allowed before HELLO (HELLO itself) */

/* Served by mc-master (FENCE also goes the other way: MC_RPC_TO_OWNER). */
#define MC_PROTO_MASTER_RPCS(X)                                                                    \
    X(HELLO, hello, 1, MC_RPC_TO_MASTER | MC_RPC_PEER | MC_RPC_NO_SESSION, 0,                      \
      "blob token (0..256 bytes), blob name (1..63 graphic ASCII), blob domain (0..63), "          \
      "u64 incarnation (left out when 0), u32 flags (0x1: carrying; left out when 0)",             \
      "i32 status [u32 node, u64 node_ttl_ms, u64 lease_ttl_ms, "                                 \
      "u64 epoch (the leader's, --etcd; left out when 0 and no incarnation follows), "        \
      "u64 incarnation (the master process's, random; left out when 0)]")                    \
    X(MOUNT, mount, 3, MC_RPC_TO_MASTER, 0,                                                        \
      "u32 node, u32 kind, u64 base, u64 size (> 0), blob worker_addr (1..4096), "                 \
      "blob rkey (0..4096), blob tenant (0..32 of [A-Za-z0-9_.-]; 0: the default), u64 quota, "   \
      "u32 flags (0x1: restoring)",                                                                \
      "i32 status [u32 seg]")                                                                      \
    X(HEARTBEAT, heartbeat, 5, MC_RPC_TO_MASTER, 0, "u32 node, u32 flags (0x1: leave, 0x2: carrying)", \
      "i32 status [u32 drain (MC_MASTER_DRAIN_*, left out when 0)]")                               \
    X(PUT_START_BATCH, put_start, 7, MC_RPC_TO_MASTER | MC_RPC_BATCH, MC_PROTO_BATCH_MAX,          \
      "u32 writer, u32 n, n * {blob key (1..512), u64 size, u64 alloc_len, u32 replicas, "         \
      "u32 flags, u64 ttl_ms, u32 preferred}",                                                     \
      "i32 status [u32 n, n * {i32 status (or -1090, MC_PROTO_NO_SPACE_YET) [u64 version, "     \
      "u32 nrep, nrep * replica]}]")                                                              \
    X(PUT_END_BATCH, put_end, 9, MC_RPC_TO_MASTER | MC_RPC_BATCH, MC_PROTO_BATCH_MAX,              \
      "u32 node, u32 n, n * {blob key, u64 version}", "i32 status [u32 n, n * i32 status]")        \
    X(PUT_REVOKE_BATCH, put_revoke, 11, MC_RPC_TO_MASTER | MC_RPC_BATCH, MC_PROTO_BATCH_MAX,       \
      "u32 node, u32 n, n * {blob key, u64 version}", "i32 status [u32 n, n * i32 status]")        \
    X(GET_BATCH, get, 13, MC_RPC_TO_MASTER | MC_RPC_BATCH, MC_PROTO_BATCH_MAX,                     \
      "u32 node, u32 flags (0x1: pin), u32 n, n * blob key",                                       \
      "i32 status [u32 n, n * {i32 status [u64 version, u64 size, u32 flags, u32 nrep, "           \
      "nrep * replica, u32 lease_epoch, u64 lease_expires_ms]}]")                                  \
    X(LEASE_RELEASE_BATCH, lease_release, 15, MC_RPC_TO_MASTER | MC_RPC_BATCH,                     \
      MC_PROTO_BATCH_MAX,                                                                          \
      "u32 node, u32 n, n * {blob key, u64 version, u32 epoch}", "i32 status [u32 released]")      \
    X(EXIST_BATCH, exist, 17, MC_RPC_TO_MASTER | MC_RPC_BATCH, MC_PROTO_BATCH_MAX,                 \
      "u32 node, u32 flags (0x1: stat, 0x2: prefix match, 0x4: touch), u32 n, "                    \
      "n * blob key",                                                                              \
      "i32 status [u32 flags, u32 n, n * {i32 status (1, 0 or an error) [stat, with the "          \
      "stat flag when the status is 1]}]")                                                         \
    X(REMOVE_BATCH, remove, 19, MC_RPC_TO_MASTER | MC_RPC_BATCH, MC_PROTO_BATCH_MAX,               \
      "u32 node, u32 flags (0x1: each key is a prefix), u32 n, n * blob key",                      \
      "i32 status [u32 n, n * {i32 status, u64 count}]")                                           \
    X(FENCE, fence, 21, MC_RPC_TO_MASTER | MC_RPC_TO_OWNER | MC_RPC_BATCH, MC_PROTO_BATCH_MAX,     \
      "u32 n, n * {u32 seg, u32 alloc, u64 version}", "i32 status [u32 n, n * i32 status]")        \
    X(CLUSTER_INFO, info, 23, MC_RPC_TO_MASTER, MC_PROTO_SEG_PAGE_MAX,                             \
      "u32 flags (0x1: stats, 0x2: segments, 0x4: nodes), u32 cursor, u32 max, "                   \
      "u32 node_cursor, u32 node_max",                                                             \
      "i32 status [u32 flags, [26 * u64 stats], [u32 nseg, u32 next_cursor, nseg * segment], "     \
      "[u32 nnode, u32 next_node_cursor, nnode * node]]")                                          \
    X(LIST, list, 29, MC_RPC_TO_MASTER, MC_PROTO_LIST_MAX,                                         \
      "u32 node, u32 max (1..1024), u64 cursor, blob prefix (0..512)",                             \
      "i32 status [u32 n, u64 next_cursor, n * blob key]")                                         \
    X(DRAIN, drain, 31, MC_RPC_TO_MASTER, 0, "u32 on (0/1), blob name (1..63 graphic ASCII)",      \
      "i32 status")                                                                                \
    X(RESTORE_BATCH, restore, 35, MC_RPC_TO_MASTER | MC_RPC_BATCH, MC_PROTO_BATCH_MAX,             \
      "u32 node, u32 n, n * {blob key, u32 seg, u64 offset, u64 alloc_len, u64 size, "             \
      "u64 version, u32 flags (as stored; 0x80000000: late), u64 ttl_ms}",                         \
      "i32 status [u32 n, n * i32 status]")                                                        \
    X(RESTORE_DONE, restore_done, 41, MC_RPC_TO_MASTER | MC_RPC_BATCH, MC_PROTO_BATCH_MAX,         \
      "u32 node, u32 n, n * u32 seg (mounted restoring: its report is complete)",                 \
      "i32 status [u32 n, n * i32 status]")

/* Sent by mc-master to the agent that owns a segment. */
#define MC_PROTO_OWNER_RPCS(X)                                                                     \
    X(COPY, copy, 33, MC_RPC_TO_OWNER, 0,                                                          \
      "u64 id, u64 version, u32 src_seg, u32 src_alloc, u64 src_offset, u64 len (> 0), "           \
      "u32 dst_node, u32 dst_seg, u32 dst_alloc, u64 dst_offset, blob key",                        \
      "i32 status")

/* Agent to agent (peer_proto.h); HELLO is the master's row. */
#define MC_PROTO_PEER_RPCS(X)                                                                      \
    X(WRITE, write, 25, MC_RPC_PEER | MC_RPC_BULK, 0,                                              \
      "u32 seg, u32 alloc, u64 version, u64 offset, u64 len, blob key [blob tail, 1..1024 "       \
      "bytes]; then len bytes",                                                                    \
      "i32 status")                                                                                \
    X(READ, read, 27, MC_RPC_PEER, 0,                                                              \
      "u64 xfer, u32 seg, u32 alloc, u64 version, u64 offset, u64 len [u64 head, not 0]",          \
      "bulk READ_REPLY frame (id xfer, len bytes; with a head: head bytes of data, the other "    \
      "len - head in its header), then i32 status")                                               \
    X(READ_BATCH, read_batch, 43, MC_RPC_PEER | MC_RPC_BATCH, MC_PROTO_READ_BATCH_MAX,             \
      "u32 n (1..256), n * {u64 xfer, u32 seg, u32 alloc, u64 version, u64 offset, u64 len} "     \
      "[n * u64 head, when one is not 0]",                                                         \
      "a bulk READ_REPLY frame (id xfer) per item whose status is 0, and i32 status "              \
      "[u32 n, n * i32 status]")

/* What keeps an owner's index of complete objects exact (hold_proto.h, docs/master.md "What
 * an owner holds"): the writer tells the owners of its replicas that a put was published,
 * the master tells an owner that a block it held was freed. */
#define MC_PROTO_HOLD_RPCS(X)                                                                      \
    X(PUBLISH, publish, 37, MC_RPC_PEER | MC_RPC_BATCH, MC_PROTO_BATCH_MAX,                        \
      "u32 n (1..1024), n * {u64 m_epoch, u64 m_incarnation, u32 seg, u32 flags, u64 offset, "     \
      "u64 alloc_len, u64 size, u64 version, u64 ttl_ms, blob key}",                                                        \
      "i32 status [u32 n, n * i32 status]")                                                        \
    X(DROP, drop, 39, MC_RPC_TO_OWNER | MC_RPC_BATCH, MC_PROTO_BATCH_MAX,                          \
      "u32 n (1..1024), n * {u32 seg, u64 offset, u64 version (> 0)}, u32 flags (0x1: retired: "    \
      "mark, do not free; left out when 0)",                                                       \
      "i32 status [u32 n, n * i32 status]")

#define MC_PROTO_RPCS(X)                                                                           \
    MC_PROTO_MASTER_RPCS(X) MC_PROTO_OWNER_RPCS(X) MC_PROTO_PEER_RPCS(X) MC_PROTO_HOLD_RPCS(X)

/* The composite items of the layouts: X(name, "layout"). */
#define MC_PROTO_ITEMS(X)                                                                          \
    X(replica, "u32 seg, u32 node, u32 alloc, u32 kind, u64 offset, u64 addr, u64 len")            \
    X(stat, "u64 size, u64 version, u32 replicas, u32 flags, u64 ttl_remaining_ms, u32 disk_replicas") \
    X(segment, "u32 seg, u32 node, u32 kind, u64 base, u64 size, u64 free_bytes, "                 \
               "u64 largest_free, u64 hard_pinned_bytes, u64 blocks, u64 evictions, "              \
               "blob worker_addr, blob rkey, blob tenant, u64 quota")                              \
    X(node, "u32 id, u32 alive, u32 segments, u64 idle_ms, blob name, blob domain, "               \
            "u32 drain (0 none, 1 draining, 2 drained), u64 drain_blocks, u64 drain_bytes")

/*
 * Frame types. Each request has its reply at request + 1, so requests are odd and replies
 * even. Values never change once released; a new row takes the next free odd number and
 * MC_WIRE__COUNT grows with it (and ucx_backend/wire.h's MC_WIRE_TYPE_END with it).
 */
#define MC_PROTO_RPC_ENUM(NAME, name, type, flags, items, req, rep)                                \
    MC_WIRE_##NAME = (type), MC_WIRE_##NAME##_REPLY = (type) + 1,
enum mc_wire_type {
    MC_PROTO_RPCS(MC_PROTO_RPC_ENUM)
    MC_WIRE__COUNT = 45, /* valid types are 1 .. MC_WIRE__COUNT - 1 */
};
#undef MC_PROTO_RPC_ENUM

static_assert(MC_WIRE__COUNT == MC_WIRE_TYPE_END, "the frame check knows every type");

/* One row, as data. */
struct mc_proto_rpc {
    const char *name;      /* "PUT_START_BATCH" */
    uint16_t type;         /* the request's; the reply's is type + 1 */
    uint32_t flags;        /* MC_RPC_* */
    uint32_t items;        /* ITEMS */
    const char *request;   /* layouts, as above */
    const char *reply;
};

/* Every row, in catalogue order (master, owner, peer). */
extern const struct mc_proto_rpc mc_proto_rpcs[];
extern const size_t mc_proto_rpcs_count;

/* The row of a request or reply type, or NULL. */
const struct mc_proto_rpc *mc_proto_rpc_of(unsigned int type);

/* "HELLO", "HELLO_REPLY", ...; "?" for an unknown type. For logs. */
const char *mc_proto_type_name(unsigned int type);

#endif /* MC_PROTO_RPC_H */
