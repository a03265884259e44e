/*
 * The client <-> agent shared-memory ABI (docs/protocol.md): one region per client, a memfd
 * created and sealed by the agent, mapped read-write by both. It holds a header, a
 * submission ring (client -> agent), one key slot per SQ entry, a completion ring (agent ->
 * client) and a staging area for put data. Everything is fixed-width and addressed by
 * offsets; every size and offset is checked by static_assert. This header is the ABI: change
 * it only together with MC_SHM_ABI.
 *
 * Rings are single-producer single-consumer, laid out like io_uring's: head and tail on
 * separate cache lines, power-of-two entry counts, free-running 32-bit indices. The producer
 * writes an entry, then publishes the tail with a release store; the consumer reads the tail
 * with an acquire load, reads the entry, then publishes the head with a release store.
 *
 * Doorbells: each ring has a futex word and a need_wakeup flag on the consumer's side. A
 * consumer about to sleep sets need_wakeup, re-checks the ring (full barrier between the two),
 * then waits on the futex word. A producer that published entries checks need_wakeup (after a
 * full barrier) and, if set, bumps the futex word and wakes it. So neither side makes a
 * syscall while the other is awake.
 *
 * The region is hostile input for the agent: it copies each SQE and its key once, then
 * validates the copy (mc_shm_sqe_check) before using any field.
 */
#ifndef MC_SHM_RING_H
#define MC_SHM_RING_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mc/mc_limits.h"

#define MC_SHM_MAGIC UINT64_C(0x3165726f7473636d) /* "mcstore1" as little-endian bytes */
#define MC_SHM_ABI 1u
#define MC_SHM_KEY_SLOT ((uint32_t)MC_KEY_MAX) /* one key slot per SQ entry */
#define MC_SHM_CHUNK (1u << 20)       /* checksum chunk: xxh3-64 per 1 MiB */
#define MC_SHM_HDR_SIZE 4096u

/* --- the socket handshake (SOCK_SEQPACKET, one message each way) ----------------------- */

struct mc_shm_hello { /* client -> agent */
    uint64_t magic;
    uint32_t abi;
    uint32_t flags; /* none defined: 0 */
};

/* hello.flags: an eventfd rides with the hello (SCM_RIGHTS). The agent writes to it
 * whenever it posts CQEs while the client's cq.need_wakeup is set, as well as waking the
 * futex: mc_client_eventfd() hands it to engines' event loops. */
#define MC_SHM_HELLO_F_EVENTFD 0x1u

/* After the welcome the client may send arena registrations on the socket (one message
 * each, the arena's memfd attached, sealed against shrinking and growing). The agent maps
 * the arena and answers nothing; an SQE naming the arena may follow at once. */
#define MC_SHM_ARENA_ADD 1u

struct mc_shm_arena_msg {
    uint64_t magic;    /* MC_SHM_MAGIC */
    uint32_t type;     /* MC_SHM_ARENA_ADD */
    uint32_t arena_id; /* < MC_SHM_MAX_ARENAS, chosen by the client, never reused */
    uint64_t size;     /* bytes, = the memfd's size */
    uint64_t reserved; /* 0 */
};

static_assert(sizeof(struct mc_shm_arena_msg) == 32, "arena message ABI");

/* A device buffer registration (docs/gpu.md), on the socket like an arena's: the client
 * exported the allocation that holds an engine's device buffer (dev/dev.h); the agent
 * imports it once and copies straight between it and its segments for ops that name it
 * (MC_SQE_F_DEV). For the test device the allocation's memfd rides along (SCM_RIGHTS);
 * CUDA's IPC handle is in the message. Ids are the client's, below MC_SHM_MAX_DEVBUFS, never
 * reused on a connection; the agent closes every import when the client goes. Not
 * answered: a registration the agent could not import makes the ops naming it fail. */
#define MC_SHM_DEVBUF_ADD 2u
#define MC_SHM_MAX_DEVBUFS 256u

struct mc_shm_devbuf_msg {
    uint64_t magic;       /* MC_SHM_MAGIC */
    uint32_t type;        /* MC_SHM_DEVBUF_ADD */
    uint32_t devbuf_id;   /* < MC_SHM_MAX_DEVBUFS */
    uint32_t dev_kind;    /* enum mc_dev_kind (dev/dev.h): 1 test, 2 CUDA */
    uint32_t export_kind; /* enum mc_dev_export_kind: 1 fd attached, 2 CUDA IPC handle */
    uint32_t ordinal;
    uint32_t reserved;    /* 0 */
    uint64_t size;        /* of the allocation */
    uint64_t buffer_id;
    uint8_t handle[64];
};

static_assert(sizeof(struct mc_shm_devbuf_msg) == 112, "device buffer message ABI");

#define MC_SHM_MAX_SEGS 16

struct mc_shm_welcome { /* agent -> client; fds: [region, seg 0, seg 1, ...] on success */
    uint64_t magic;
    uint32_t abi;
    int32_t status;       /* 0, or MC_ERR_DENIED / MC_ERR_PROTO / MC_ERR_NOMEM ... */
    uint32_t client_id;
    uint32_t nsegs;       /* read-only segment fds that follow the region fd */
    uint64_t region_size;
    uint64_t seg_size[MC_SHM_MAX_SEGS];
};

static_assert(MC_SHM_KEY_SLOT == 512, "ABI 1: a key slot is 512 bytes (MC_KEY_MAX)");
static_assert(sizeof(struct mc_shm_hello) == 16, "hello ABI");
static_assert(sizeof(struct mc_shm_welcome) == 32 + 8 * MC_SHM_MAX_SEGS, "welcome ABI");

/* --- the region ------------------------------------------------------------------------- */

struct mc_shm_ring_ctrl {
    _Alignas(64) _Atomic uint32_t head;   /* consumer writes */
    _Alignas(64) _Atomic uint32_t tail;   /* producer writes */
    _Alignas(64) _Atomic uint32_t futex;  /* doorbell word: producer bumps, consumer waits */
    _Atomic uint32_t need_wakeup;         /* consumer sets before sleeping */
    _Atomic uint32_t consumer_spinning;   /* informational: consumer is polling */
};

static_assert(sizeof(struct mc_shm_ring_ctrl) == 192, "ring ctrl ABI");
static_assert(offsetof(struct mc_shm_ring_ctrl, tail) == 64, "ring ctrl ABI");
static_assert(offsetof(struct mc_shm_ring_ctrl, futex) == 128, "ring ctrl ABI");

/* Written by the agent before the region is passed; the client checks it, never writes it. */
struct mc_shm_hdr {
    uint64_t magic;
    uint32_t abi;
    uint32_t hdr_size;       /* MC_SHM_HDR_SIZE */
    uint64_t region_size;
    uint32_t sq_entries;     /* power of two */
    uint32_t cq_entries;     /* power of two, >= sq_entries */
    uint64_t sq_ctrl_off;
    uint64_t sqes_off;
    uint64_t keys_off;       /* sq_entries * MC_SHM_KEY_SLOT bytes */
    uint64_t cq_ctrl_off;
    uint64_t cqes_off;
    uint64_t staging_off;
    uint64_t staging_size;   /* staging_slots * staging_slot_size */
    uint32_t staging_slot_size; /* a multiple of MC_SHM_CHUNK */
    uint32_t staging_slots;
    uint32_t client_id;
    uint32_t max_inflight;   /* ops a client may have submitted and not reaped */
    uint64_t chunk_size;     /* MC_SHM_CHUNK */
    _Atomic uint32_t agent_state; /* 0 running, 1 closing: the client should fail new ops */
    uint32_t features;       /* MC_SHM_F_*: what this agent does beyond ABI 1 (an older
                                agent wrote 0 here) */
};

/* hdr.features: a GET may name an arena destination (MC_SQE_F_ARENA) that the agent may
 * receive a peer's bytes into (arena_reads): without it libmc never names one */
#define MC_SHM_F_ARENA_GETS 0x1u

static_assert(sizeof(struct mc_shm_hdr) == 120, "hdr ABI");
static_assert(sizeof(struct mc_shm_hdr) <= MC_SHM_HDR_SIZE, "hdr fits its page");
static_assert(offsetof(struct mc_shm_hdr, region_size) == 16, "hdr ABI");
static_assert(offsetof(struct mc_shm_hdr, sq_ctrl_off) == 32, "hdr ABI");
static_assert(offsetof(struct mc_shm_hdr, staging_size) == 80, "hdr ABI");
static_assert(offsetof(struct mc_shm_hdr, staging_slot_size) == 88, "hdr ABI");
static_assert(offsetof(struct mc_shm_hdr, chunk_size) == 104, "hdr ABI");
static_assert(offsetof(struct mc_shm_hdr, agent_state) == 112, "hdr ABI");

enum mc_shm_op {
    MC_OP_NOP = 0,
    MC_OP_PUT = 1,       /* key, data in staging [data_off, +data_len): start + copy + end */
    MC_OP_PUT_START = 2, /* key, arg0 = total size: answers cqe.lease_id = put handle */
    MC_OP_PUT_DATA = 3,  /* arg0 = put handle, arg1 = object offset, staging data */
    MC_OP_PUT_END = 4,   /* arg0 = put handle */
    MC_OP_PUT_ABORT = 5, /* arg0 = put handle */
    MC_OP_GET = 6,       /* key: answers location + lease; arg1 = the caller's capacity + 1
                            (0: not told): an object held by a peer and larger than that is
                            not moved, the answer is res MC_ERR_TOO_LARGE with its size;
                            arg0 = replicas to skip (bit i: the i-th, as a CQE's `replicas`
                            named it, failed its checksum): none left is MC_ERR_CORRUPT.
                            The answer's `replicas` = index + 1 of the replica served.
                            With MC_SQE_F_ARENA, data_off names the caller's buffer in an
                            arena and data_len its capacity: an object read from a peer may
                            be received straight into [data_off, +data_len) (bytes and
                            checksum trailer, mc_shm_alloc_len); the answer then says
                            loc_seg = MC_SHM_LOC_IN_PLACE and holds no lease.
                            With MC_SQE_F_TAIL_APART too, data_len need only hold the
                            object: then the rest of the image (from byte size on:
                            padding and checksum trailer) may land apart, and the answer
                            has MC_CQE_F_TAIL_APART in obj_flags, loc_seg/loc_off naming
                            that tail, under a lease released as any other */
    MC_OP_RELEASE = 7,   /* arg0 = lease id from a GET */
    MC_OP_EXIST = 8,     /* key: res 1 / 0 */
    MC_OP_REMOVE = 9,    /* key */
    MC_OP_STAT = 10,     /* key */
    MC_OP_STATS = 11,    /* JSON of the agent's stats written into staging [data_off, +data_len);
                            res = bytes written; arg0 MC_STATS_F_CLUSTER: the cluster's
                            nodes, domains and segments instead (mcctl cluster) */
    MC_OP_LIST = 12,     /* key = prefix (0..512 bytes), arg0 = cursor (0: from the start),
                            arg1 = most keys; the keys go to staging [data_off, +data_len) as
                            (uint16_t length, bytes) records; res = keys written,
                            cqe.version = the next cursor (0: done) */
    MC_OP_REMOVE_PREFIX = 13, /* key = prefix (1..512 bytes): res = objects removed */
    MC_OP_DRAIN = 14,    /* key = a node's name (1..63 bytes), arg0 = 1 drain / 0 undrain:
                            the agent asks the master; res = status */
    MC_OP_PIN = 15,      /* key, arg0 = pin id (chosen by the client, not 0), arg1 = a mark
                            UNPIN may select by (the key's place in a prefix): a pin of the
                            key's readable version is kept under that id until UNPIN, its
                            TTL (pin_ttl_ms) or the client's end; res 1 pinned / 0 absent */
    MC_OP_UNPIN = 16,    /* arg0 = pin id; key (0..512 bytes): only that key's pin under the
                            id, or every one with no key; arg1 > 0: only those whose PIN's
                            arg1 >= it; res = pins still held and released */
    MC_OP_TOUCH = 17,    /* key: marked recently used without a read; res 1 / 0 */
    MC_OP__COUNT = 18,
};

#define MC_STATS_F_CLUSTER 0x1u /* MC_OP_STATS arg0 */

#define MC_SQE_F_NO_CQE 0x1u /* RELEASE only: no completion wanted */
/* Where PUT / PUT_DATA take their bytes from (default: staging [data_off, +data_len)): */
#define MC_SQE_F_ARENA 0x2u /* an arena: data_off = arena id << MC_SHM_ARENA_SHIFT | offset */
#define MC_SQE_F_USER 0x4u  /* the client's own memory at address data_off, read by the agent
                               with process_vm_readv (the client allows it: PR_SET_PTRACER) */
#define MC_SQE_F_DEV 0x8u   /* a registered device buffer: data_off = devbuf id <<
                               MC_SHM_ARENA_SHIFT | offset (PUT, PUT_DATA) */
#define MC_SQE_F_ARENA_DATA 0x20u /* PUT_START only: every PUT_DATA of this put names an
                                     arena span (MC_SQE_F_ARENA); a put with no replica on
                                     the agent's node is then sent from those spans */
#define MC_SQE_F_TAIL_APART 0x10u /* GET with MC_SQE_F_ARENA only: the client takes an
                                     answer with MC_CQE_F_TAIL_APART (MC_OP_GET) */
#define MC_SHM_ARENA_SHIFT 48
/* A GET answer's obj_flags bit (never a stored MC_PUT_* flag): the object's bytes are in
 * the caller's arena buffer; loc_seg/loc_off name the rest of its image, from byte `size`
 * on (its checksum trailer at mc_shm_trailer_off(size) - size there), under lease_id */
#define MC_CQE_F_TAIL_APART 0x80000000u
/* A GET answer's loc_seg: the bytes (and the checksum trailer after them, at
 * mc_shm_trailer_off(size)) are in the caller's arena buffer already; no lease to release */
#define MC_SHM_LOC_IN_PLACE UINT32_MAX
#define MC_SHM_MAX_ARENAS 256u

struct mc_sqe {
    uint8_t opcode;
    uint8_t flags;      /* MC_SQE_F_* */
    uint16_t key_len;   /* the key is in the key slot of this SQE's ring index */
    uint32_t put_flags; /* MC_PUT_* of include/mc/mc_limits.h */
    uint64_t user_data; /* returned in the CQE */
    uint64_t arg0;
    uint64_t arg1;
    uint64_t data_off;  /* staging-relative */
    uint64_t data_len;
    uint32_t replicas;
    uint32_t deadline_ms; /* the op's deadline: the low 32 bits of CLOCK_MONOTONIC in ms
                             (client and agent share the host's clock; compared in serial
                             arithmetic); 0: op_timeout_ms from when the agent takes it */
    uint64_t ttl_ms;
};

static_assert(sizeof(struct mc_sqe) == 64, "SQE ABI");
static_assert(offsetof(struct mc_sqe, user_data) == 8, "SQE ABI");
static_assert(offsetof(struct mc_sqe, data_off) == 32, "SQE ABI");
static_assert(offsetof(struct mc_sqe, replicas) == 48, "SQE ABI");
static_assert(offsetof(struct mc_sqe, ttl_ms) == 56, "SQE ABI");

struct mc_cqe {
    uint64_t user_data;
    int32_t res;        /* 0 / count / 1-0 for EXIST, or a negative MC_ERR_* */
    uint32_t obj_flags; /* GET/STAT: MC_PUT_* flags stored with the object */
    uint64_t size;      /* GET/STAT: object size */
    uint64_t version;   /* GET/STAT */
    uint64_t loc_off;   /* GET: offset of the object in segment loc_seg */
    uint32_t loc_seg;   /* GET: index into the welcome's segment list */
    uint32_t lease_id;  /* GET: lease to RELEASE; PUT_START: put handle */
    uint64_t deadline_ms; /* GET: CLOCK_MONOTONIC ms after which the copy must be discarded;
                             STAT: ttl_remaining_ms (0 = none) */
    uint32_t replicas;  /* STAT */
    uint32_t disk_replicas; /* STAT: of them, on disk (docs/disk.md) */
};

static_assert(sizeof(struct mc_cqe) == 64, "CQE ABI");
static_assert(offsetof(struct mc_cqe, res) == 8, "CQE ABI");
static_assert(offsetof(struct mc_cqe, loc_seg) == 40, "CQE ABI");
static_assert(offsetof(struct mc_cqe, deadline_ms) == 48, "CQE ABI");

/* The checksum trailer of an object stored with checksums: right after the data, at
 * mc_shm_trailer_off(size), one xxh3-64 per MC_SHM_CHUNK chunk, then the object checksum
 * (xxh3-64 over the chunk values). The allocation is mc_shm_alloc_len(size) bytes. */
static inline uint64_t mc_shm_nchunks(uint64_t size)
{
    return (size + MC_SHM_CHUNK - 1) / MC_SHM_CHUNK;
}

static inline uint64_t mc_shm_trailer_off(uint64_t size)
{
    return (size + 7) & ~UINT64_C(7);
}

static inline uint64_t mc_shm_alloc_len(uint64_t size, bool checksum)
{
    return checksum ? mc_shm_trailer_off(size) + 8 * (mc_shm_nchunks(size) + 1) : size;
}

/* --- ring access -------------------------------------------------------------------------- */

/* Entries the producer may still write. */
static inline uint32_t mc_ring_space(struct mc_shm_ring_ctrl *c, uint32_t entries)
{
    /* acquire pairs with the consumer's release of head: the slots are free to reuse */
    uint32_t head = atomic_load_explicit(&c->head, memory_order_acquire);
    uint32_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed);

    return entries - (tail - head);
}

/* Entries the consumer may read. */
static inline uint32_t mc_ring_ready(struct mc_shm_ring_ctrl *c)
{
    /* acquire pairs with the producer's release of tail: the entries are written */
    uint32_t tail = atomic_load_explicit(&c->tail, memory_order_acquire);
    uint32_t head = atomic_load_explicit(&c->head, memory_order_relaxed);

    return tail - head;
}

/* The agent's views, with its own copy of its index (the shared one is the client's to
 * scribble): entries ready past the consumer's own head, and entries in flight up to the
 * producer's own tail. A result above the ring size means the other side forged its index. */
static inline uint32_t mc_ring_ready_at(struct mc_shm_ring_ctrl *c, uint32_t head)
{
    return atomic_load_explicit(&c->tail, memory_order_acquire) - head;
}

static inline uint32_t mc_ring_used_at(struct mc_shm_ring_ctrl *c, uint32_t tail)
{
    return tail - atomic_load_explicit(&c->head, memory_order_acquire);
}

static inline void mc_ring_publish_tail(struct mc_shm_ring_ctrl *c, uint32_t tail)
{
    /* release pairs with mc_ring_ready's acquire: entries before tail are visible */
    atomic_store_explicit(&c->tail, tail, memory_order_release);
}

static inline void mc_ring_publish_head(struct mc_shm_ring_ctrl *c, uint32_t head)
{
    /* release pairs with mc_ring_space's acquire: we are done reading those slots */
    atomic_store_explicit(&c->head, head, memory_order_release);
}

#endif /* MC_SHM_RING_H */
