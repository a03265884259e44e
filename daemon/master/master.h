/*
 * mc_master: the Store master service (docs/master.md) as a library.
 *
 * It keeps the directory (objects, versions, replicas, leases, pins, TTLs), one offset
 * allocator per mounted segment, and node liveness. It does no I/O and reads time only
 * through the injected clock, so the same code runs inside a standalone agent, behind
 * mc-master's RPC server, and under unit tests with a fake clock. Callers serialise calls
 * (one thread, or a lock); the directory is sharded so that per-shard locks can come later.
 *
 * Keys are byte strings of 1..MC_DIR_KEY_MAX bytes passed with their length (a client's key,
 * tagged with its tenant by the agent: daemon/common/tenant_key.h); every entry point
 * validates what it is given (it is fed from RPC frames and shared-memory rings).
 */
#ifndef MC_MASTER_H
#define MC_MASTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/common/tenant_key.h"
#include "daemon/master/master_config.h"

struct mc_master;

/* Monotonic milliseconds. Must never go backwards. */
typedef uint64_t (*mc_master_clock_fn)(void *ctx);

#define MC_MASTER_MAX_REPLICAS 8
#define MC_MASTER_NAME_MAX 63 /* node and failure-domain names, bytes */
#define MC_MASTER_NODE_NONE UINT32_MAX

enum mc_seg_kind {
    MC_SEG_DRAM = 0,
    MC_SEG_GPU = 1,
    MC_SEG_DISK = 2,
};

/* A disk segment's granule: its extents are whole device blocks (O_DIRECT). */
#define MC_MASTER_DISK_BLOCK 4096u

/* Put flags, the same bits as mc_put_opts_t.flags (include/mc/mc.h). */
#define MC_MASTER_PUT_UPSERT 0x1u
#define MC_MASTER_PUT_PIN_SOFT 0x2u
#define MC_MASTER_PUT_PIN_HARD 0x4u
#define MC_MASTER_PUT_NO_CHECKSUM 0x8u
#define MC_MASTER_PUT_SAME_DOMAIN_OK 0x10u
#define MC_MASTER_PUT_TIER_GPU 0x40u /* place in MC_SEG_GPU segments, not MC_SEG_DRAM */
#define MC_MASTER_PUT_FLAGS_ALL 0x5Fu

/* The highest version a master hands out or takes from a report (2^63 - 1): far above any
 * clock floor (ns since 1970 stay below 2^63 until 2262), far below the end the election
 * stores in etcd could overflow (review finding M1). A report above it is refused as
 * MC_ERR_INVALID (the agent forgets that copy and logs it). */
#define MC_MASTER_VERSION_MAX (UINT64_MAX >> 1)

/* The longest TTL, ms: MC_TTL_MAX_MS of include/mc/mc.h (200 days). Longer is invalid. */
#define MC_MASTER_TTL_MAX_MS (UINT64_C(200) * 24 * 3600 * 1000)

struct mc_master_replica {
    uint32_t seg;     /* segment id (mount handle) */
    uint32_t node;    /* node id of the segment's owner */
    uint32_t alloc;   /* allocation id inside the segment: writes name it */
    uint32_t kind;    /* enum mc_seg_kind */
    uint64_t offset;  /* bytes from the segment's start */
    uint64_t addr;    /* base + offset, in the owner's address space */
    uint64_t len;     /* allocated length (>= object size, granule-rounded) */
};

struct mc_master_put_req {
    const char *key;
    size_t key_len;
    uint64_t size;        /* the object's size, what readers are told (> 0) */
    uint64_t alloc_len;   /* bytes to allocate per replica (0 = size; else >= size): the
                             agent adds room for its checksum trailer */
    uint32_t replicas;    /* 0 = 1 */
    uint32_t flags;       /* MC_MASTER_PUT_* */
    uint64_t ttl_ms;      /* 0 = none; above MC_MASTER_TTL_MAX_MS: MC_ERR_INVALID */
    uint32_t writer;      /* node id of the writing agent */
    uint32_t preferred;   /* node id to place the first replica on, or MC_MASTER_NODE_NONE */
};

struct mc_master_put_grant {
    uint64_t version;
    uint32_t nrep;
    struct mc_master_replica rep[MC_MASTER_MAX_REPLICAS];
};

/* A key of a key-only batch (mc_master_exec: GET, EXIST, STAT, REMOVE, REMOVE_PREFIX). */
struct mc_master_key {
    const char *key;
    size_t key_len;
};

/* Names one version of one key: put_end, put_revoke and lease_release take it. */
struct mc_master_ref {
    const char *key;
    size_t key_len;
    uint64_t version;
    uint32_t node;   /* put_end/put_revoke: the writer; lease_release: unused */
    uint32_t epoch;  /* lease_release: the epoch of the lease granted */
};

struct mc_master_lease {
    uint64_t version;
    uint32_t epoch;
    uint64_t expires_ms; /* master clock; the reader's agent keeps its own, shorter, TTL */
};

struct mc_master_get_result {
    uint64_t version;
    uint64_t size;
    uint32_t flags; /* MC_MASTER_PUT_PIN_* and NO_CHECKSUM as stored */
    uint32_t nrep;
    struct mc_master_replica rep[MC_MASTER_MAX_REPLICAS];
    struct mc_master_lease lease;
};

struct mc_master_stat {
    uint64_t size;
    uint64_t version;
    uint32_t replicas;
    uint32_t flags;
    uint64_t ttl_remaining_ms; /* 0 = no TTL */
    uint32_t disk_replicas;    /* of the replicas, those in disk segments */
};

struct mc_master_seg_desc {
    uint32_t node;  /* owner, from mc_master_node_register */
    uint32_t kind;  /* enum mc_seg_kind */
    uint64_t base;  /* address of the segment in the owner */
    uint64_t size;  /* bytes */
    /* the tenant whose objects it holds ("": the default tenant) and that tenant's quota,
     * bytes across the cluster (0: none); a mount naming a quota sets the tenant's */
    char tenant[MC_TENANT_NAME_MAX + 1];
    uint64_t quota;
    uint32_t flags; /* MC_MASTER_SEG_F_* */
};

/* Mount flags. RESTORING: the owner will report what the segment holds (mc_master_restore)
 * and then say so (mc_master_restore_done): until then, or restore_window_ms, placement and
 * eviction leave the segment alone -- its space is not free, only not known yet. */
#define MC_MASTER_SEG_F_RESTORING 0x1u
#define MC_MASTER_SEG_F_ALL 0x1u

struct mc_master_seg_info {
    uint32_t node;
    uint32_t kind;
    uint64_t base;
    uint64_t size;           /* usable bytes */
    uint64_t free_bytes;
    uint64_t largest_free;
    uint64_t hard_pinned_bytes;
    uint64_t blocks;         /* allocated blocks */
    uint64_t evictions;      /* replicas evicted from this segment */
    char tenant[MC_TENANT_NAME_MAX + 1]; /* "": the default tenant */
    uint64_t quota;          /* the tenant's quota (0: none) */
    bool restoring;          /* mounted RESTORING, its owner's report not done yet */
};

struct mc_master_stats {
    uint64_t objects;           /* directory records (visible or lingering) */
    uint64_t nodes_alive;
    uint64_t segments;
    uint64_t capacity_bytes;
    uint64_t used_bytes;
    uint64_t puts_started, puts_completed, puts_revoked, puts_canceled, puts_displaced;
    uint64_t gets, get_misses, lease_grants, lease_releases, lease_expiries;
    uint64_t evictions, evicted_bytes, ttl_expiries, removes;
    uint64_t stale_freed_by_writer, stale_freed_by_fence, stale_freed_by_timeout;
    uint64_t nodes_declared_dead;
    uint64_t meta_bytes;        /* directory + allocator metadata, excluding records */
    uint64_t restores, restores_refused; /* mc_master_restore: known again, refused */
};

/* cfg is copied. clock NULL: CLOCK_MONOTONIC. Errors: MC_ERR_INVALID, MC_ERR_NOMEM. */
int mc_master_create(const struct mc_master_config *cfg, mc_master_clock_fn clock,
                     void *clock_ctx, struct mc_master **m_p);
/* Frees every record and allocator; accepts NULL. */
void mc_master_destroy(struct mc_master *m);

/* --- nodes ----------------------------------------------------------------------------- */

/* Register a node by name (1..MC_MASTER_NAME_MAX bytes) in a failure domain (NULL or ""
 * = a domain of its own, named after the node). A live node registering again under the
 * same name keeps its id and everything it had (a reconnect before the TTL loses nothing);
 * a dead one gets a new id. Errors: MC_ERR_INVALID, MC_ERR_NO_SPACE (node table full). */
int mc_master_node_register(struct mc_master *m, const char *name, const char *domain,
                            uint32_t *node_p);
/* The id of the live node registered as `name` in *node_p; MC_ERR_NOT_FOUND when none is.
 * Changes nothing (unlike mc_master_node_register, it does not count as a heartbeat). */
int mc_master_node_find(const struct mc_master *m, const char *name, uint32_t *node_p);
/* Errors: MC_ERR_NOT_FOUND when the node is unknown or was declared dead. */
int mc_master_node_heartbeat(struct mc_master *m, uint32_t node);
/* Every live node counts as heard from now: for a front end that finds it did not run for
 * a while (the process was stopped, the machine stalled), so that the clock that moved on
 * meanwhile is not read as silence of the nodes. Returns how many nodes it refreshed. */
uint32_t mc_master_nodes_refresh(struct mc_master *m);
/* A graceful exit: unmounts the node's segments now; its puts are revoked (a put_end of
 * one is MC_ERR_CANCELED, a new put of the key displaces it at once, the sweep marks the
 * rest for fencing). */
int mc_master_node_unregister(struct mc_master *m, uint32_t node);
bool mc_master_node_is_alive(const struct mc_master *m, uint32_t node);

struct mc_master_node_info {
    uint32_t id;       /* node id as handed out by mc_master_node_register */
    bool alive;        /* false once declared dead or unregistered (its slot is kept
                          until a new node reuses it) */
    uint32_t segments; /* segments it has mounted (0 when not alive) */
    uint64_t idle_ms;  /* ms since its last heartbeat or registration (master clock) */
    char name[MC_MASTER_NAME_MAX + 1];   /* NUL-terminated */
    char domain[MC_MASTER_NAME_MAX + 1]; /* NUL-terminated; the node's name when it gave none */
    uint32_t drain;         /* MC_MASTER_DRAIN_*: none, draining, drained */
    uint64_t drain_blocks;  /* allocated blocks left in its segments (while draining) */
    uint64_t drain_bytes;   /* bytes of them */
};

/* Up to `max` registered nodes from *cursor_p on (0: from the start), in slot order, dead
 * ones included (alive = false) until their slot is reused; *cursor_p is left where the next
 * page starts (0: done). Returns how many were written to out[]. Not a snapshot: nodes that
 * register between pages may be missed. max 0 writes nothing and leaves *cursor_p as it is. */
size_t mc_master_node_list(const struct mc_master *m, uint32_t *cursor_p,
                           struct mc_master_node_info *out, size_t max);

/* --- draining a node ------------------------------------------------------------------- */

#define MC_MASTER_DRAIN_NONE 0u
#define MC_MASTER_DRAIN_DRAINING 1u
#define MC_MASTER_DRAIN_DRAINED 2u /* draining, and no block is left in its segments */
#define MC_MASTER_DRAIN_COPIES_MAX 64u /* the most copies in flight at once (config bound) */

/* Drain (on) or undrain (off) the live node named `name`. A draining node gets no new
 * replica; on each tick the master walks the directory: a readable object with a replica
 * there and another elsewhere loses the one there (once no lease holds it), an object whose
 * replicas are all there is copied to another node (mc_master_copies_take), at most
 * cfg->drain_copies_max at once. Undrain stops the walk and lets placement use the node
 * again; copies in flight finish. Repeating either is no error. Errors: MC_ERR_INVALID,
 * MC_ERR_NOT_FOUND (no live node of that name). */
int mc_master_node_drain(struct mc_master *m, const char *name, bool on);

/* The drain state of live node `node` (MC_MASTER_DRAIN_*; NONE for an unknown node): what
 * its heartbeat's answer tells the agent, which shows it on its health page. */
uint32_t mc_master_node_drain_state(const struct mc_master *m, uint32_t node);

/* A copy the master wants made: the owner of `src` (src.node) sends its bytes to `dst`
 * with its usual remote write, which names `dst.alloc` and carries `id` as its version;
 * the owner answers once the target owner said the bytes are in place. Only then does the
 * copy count (mc_master_copy_done with 0): dst becomes a replica of the version. `key`
 * points into the master's copy record, valid until mc_master_copy_done or the next tick. */
struct mc_master_copy {
    uint64_t id;      /* fresh from the version counter: fences name it */
    uint64_t version; /* the object's version being copied */
    const char *key;
    size_t key_len;
    uint64_t len;     /* bytes to copy: the whole source block (a disk source, whose
                         extent is a header and padded payload: the target's block, which
                         bounds the object's image) */
    struct mc_master_replica src, dst;
};
/* Copies made by the tick and not handed out yet; each is handed out once. */
size_t mc_master_copies_take(struct mc_master *m, struct mc_master_copy *out, size_t max);
/* Whether copies_take would hand out any (O(1): for a front end that polls). */
bool mc_master_copies_pending(const struct mc_master *m);
/* The owner's answer to copy `id` (or the call's failure). On 0 the target becomes a replica
 * of the version when that is still the readable one and still holds the source replica,
 * else its block is freed (the write is over). On failure the target is fenced at its owner
 * before its block is reused (mc_master_fences_take); the object is tried again later. An
 * unknown or repeated id is ignored. */
void mc_master_copy_done(struct mc_master *m, uint64_t id, int status);

/* --- segments -------------------------------------------------------------------------- */

/* Errors: MC_ERR_INVALID (unknown node, bad kind, size below one granule or above what the
 * allocator can address), MC_ERR_NO_SPACE (segment table full), MC_ERR_NOMEM. */
int mc_master_segment_mount(struct mc_master *m, const struct mc_master_seg_desc *d,
                            uint32_t *seg_p);
/* Drops every replica held there (objects left with none disappear) and revokes puts
 * writing there. Errors: MC_ERR_NOT_FOUND. */
int mc_master_segment_unmount(struct mc_master *m, uint32_t seg);
int mc_master_segment_info(const struct mc_master *m, uint32_t seg,
                           struct mc_master_seg_info *info_p);

/* --- tenants (docs/tenants.md) ------------------------------------------------------------
 *
 * A put is placed only on segments of its key's tenant (the tag of the directory key), so
 * no tenant's bytes sit in another's segments and no put evicts another tenant's objects.
 * A tenant with a quota holds at most that many allocated bytes across the cluster, puts in
 * flight included: a put over it first evicts the tenant's own objects (as a full segment
 * does) and fails with MC_ERR_NO_SPACE when that cannot make room. */

#define MC_MASTER_TENANTS_MAX 64u /* tenants the master knows at once, the default included */

struct mc_master_tenant_info {
    char name[MC_TENANT_NAME_MAX + 1]; /* "": the default tenant */
    uint64_t quota_bytes;    /* 0: none */
    uint64_t capacity_bytes; /* of its mounted segments */
    uint64_t used_bytes;     /* allocated there: readable, in flight or lingering */
    uint32_t segments;
    uint64_t quota_refusals; /* puts refused with MC_ERR_NO_SPACE for the quota */
};

/* Every tenant that has a segment mounted or had one, the default first. Returns how many
 * were written (at most max). */
size_t mc_master_tenant_list(const struct mc_master *m, struct mc_master_tenant_info *out,
                             size_t max);

/* --- objects --------------------------------------------------------------------------- */

/* Allocate the replicas of a new version. Errors: MC_ERR_INVALID, MC_ERR_EXISTS (a plain
 * put on a COMPLETE key), MC_ERR_BUSY (a plain put on a young PROCESSING key),
 * MC_ERR_TOO_LARGE (no segment could ever hold it), MC_ERR_NO_SPACE (room could not be made,
 * too few failure domains, hard-pin cap), MC_ERR_NOT_FOUND (writer node unknown/dead),
 * MC_ERR_NOMEM. */
int mc_master_put_start(struct mc_master *m, const struct mc_master_put_req *req,
                        struct mc_master_put_grant *grant_p);
/* Publish. Errors: MC_ERR_NOT_FOUND (no such put), MC_ERR_DENIED (another writer),
 * MC_ERR_CANCELED (superseded, displaced or revoked meanwhile -- also when the writer was
 * declared dead or unregistered; its space is freed now, since the writer says its
 * transfers are final). */
int mc_master_put_end(struct mc_master *m, const struct mc_master_ref *ref);
/* Abandon; the writer's transfers are final, so the space is freed now. */
int mc_master_put_revoke(struct mc_master *m, const struct mc_master_ref *ref);

/* Batch forms: one result per item; the return is how many items succeeded. */
/*
 * Restores: a replica an agent reports holding (a disk scan after its restart, or what it
 * re-reports to a new master). The master claims exactly [offset, offset + alloc_len) in
 * the segment and makes the replica known again: a new readable record, or one more replica
 * of the version it knows, or the new head when the reported version is newer than the
 * one it knows (the old one is retired). TTL and soft pin start again from now.
 * Only a segment mounted MC_MASTER_SEG_F_RESTORING, within its window, takes replicas the
 * master did not know; in any other segment only the replicas it knows answer 0.
 * 0: known (also when the master knew that very replica already: reporting is idempotent);
 * MC_ERR_CANCELED: the master knows a version of the key at least as new in another
 * state (removed since, being re-put, retired), or a newer one: the agent forgets its copy;
 * MC_ERR_EXISTS: the extent overlaps allocated space, or the segment already holds a
 * replica of that version; MC_ERR_INVALID: bad key, flags, sizes, extent, or a segment
 * that is not mounted or not of the key's tenant; MC_ERR_NOMEM. A restored version raises
 * the master's version counter, so later puts get higher versions.
 */
struct mc_master_restore_req {
    const char *key;     /* the stored (tenant-tagged) key */
    size_t key_len;
    uint32_t seg;        /* a mounted segment (restore requests from a node: its own) */
    uint64_t offset;     /* the extent, granule-aligned */
    uint64_t alloc_len;  /* >= size */
    uint64_t size;       /* the object's size (> 0) */
    uint64_t version;    /* > 0 */
    uint32_t flags;      /* MC_MASTER_PUT_PIN_* | MC_MASTER_PUT_NO_CHECKSUM as stored */
    uint64_t ttl_ms;     /* TTL left (0: none) */
};
int mc_master_restore(struct mc_master *m, const struct mc_master_restore_req *r);
/* A restore's flag (beside the stored ones): a replica published in an earlier reign that
 * its owner learnt of only after its report to this master began (a PUBLISH carried over
 * the change of master). Taken also into a segment whose report is over, but only while
 * the master recovers (mc_master_recovering_set); else MC_ERR_CANCELED like any report
 * there. Not stored. */
#define MC_MASTER_RESTORE_LATE 0x80000000u
/* Whether the master is in the recovery window of a new reign: mc-master with --etcd serves
 * no data operation then (no put, remove or drain), so nothing was placed in or freed from
 * any segment since the reign began, and a late restore cannot bring back what it freed. */
void mc_master_recovering_set(struct mc_master *m, bool on);
/* The owner has reported everything segment `seg` holds: placement may use it. 0 (also when
 * it was not restoring), MC_ERR_NOT_FOUND. */
int mc_master_restore_done(struct mc_master *m, uint32_t seg);

/* An item status of mc_master_put_start_batch that never reaches a client: no room now,
 * but the put's eviction met blocks that stay only until their offload copies to a disk
 * end (docs/disk.md, "Back-pressure"): the writer may ask again within its deadline. */
#define MC_MASTER_NO_SPACE_YET (-1090)

/* mc_master_put_start per item; an item refused MC_ERR_NO_SPACE whose eviction met blocks
 * waiting for their offload is MC_MASTER_NO_SPACE_YET instead. Returns the items granted. */
size_t mc_master_put_start_batch(struct mc_master *m, size_t n,
                                 const struct mc_master_put_req reqs[],
                                 struct mc_master_put_grant grants[], int results[]);
size_t mc_master_put_end_batch(struct mc_master *m, size_t n, const struct mc_master_ref refs[],
                               int results[]);
size_t mc_master_put_revoke_batch(struct mc_master *m, size_t n,
                                  const struct mc_master_ref refs[], int results[]);

/* The readable version's replicas with a read lease (marks the object recently used).
 * Errors: MC_ERR_INVALID, MC_ERR_NOT_FOUND, MC_ERR_BUSY (lease counter saturated). */
int mc_master_get_replicas(struct mc_master *m, const char *key, size_t key_len,
                           struct mc_master_get_result *res_p);
/* mc_master_get_replicas for a reader on node `reader` (MC_MASTER_NODE_NONE: not known): a
 * promotion the GET queues (disk_promote) goes into a DRAM block of the reader's node when it
 * has one with room, so that its next read is local; else into the disk's own node. */
int mc_master_get_for(struct mc_master *m, uint32_t reader, const char *key, size_t key_len,
                      struct mc_master_get_result *res_p);
/* A client's pin (mc_prefix_pin): a lease like a read's on the readable version, which lasts
 * cfg->pin_ttl_ms unless released earlier with mc_master_lease_release (res_p->lease names
 * it). While it lasts the version is neither evicted nor freed (a remove or an upsert
 * unpublishes it, and its space waits for the pin). Marks the object recently used. Not
 * counted as a get. Errors: as mc_master_get_replicas. */
#define MC_MASTER_PIN_TTL_DEFAULT_MS 60000u
int mc_master_pin(struct mc_master *m, const char *key, size_t key_len,
                  struct mc_master_get_result *res_p);
/* Marks the readable version recently used, as a read would (mc_touch). 1 present, 0 absent,
 * MC_ERR_INVALID. */
int mc_master_touch(struct mc_master *m, const char *key, size_t key_len);
/* End leases (the reader's transfers are final). Unknown or outdated leases are ignored.
 * Returns how many leases were ended. */
size_t mc_master_lease_release(struct mc_master *m, size_t n, const struct mc_master_ref refs[]);

/* 1 present, 0 absent, <0 error. No lease, no change to eviction order. */
int mc_master_exist(struct mc_master *m, const char *key, size_t key_len);
int mc_master_stat(struct mc_master *m, const char *key, size_t key_len,
                   struct mc_master_stat *st_p);
/* How many of the leading keys are present (stops at the first absent one). */
size_t mc_master_prefix_match(struct mc_master *m, size_t n, const char *const keys[],
                              const size_t lens[]);
/* Unpublish now; the space is freed once the last lease ends. Errors: MC_ERR_NOT_FOUND. */
int mc_master_remove(struct mc_master *m, const char *key, size_t key_len);

/* Listing: calls fn(key, key_len, ctx) for up to `max` readable objects whose key starts
 * with `prefix` (prefix_len 0: every key), resuming at *cursor_p (0: from the start) and
 * leaving there where to resume (0: done). Not a snapshot: objects added or removed
 * meanwhile may be missed or listed twice. Returns how many keys fn got, or
 * MC_ERR_INVALID. No lease, no change to eviction order. */
typedef void (*mc_master_list_fn)(const char *key, size_t key_len, void *ctx);
int mc_master_list(struct mc_master *m, const char *prefix, size_t prefix_len,
                   uint64_t *cursor_p, size_t max, mc_master_list_fn fn, void *ctx);
/* Remove (as mc_master_remove) every readable object whose key starts with `prefix`
 * (1..MC_DIR_KEY_MAX bytes). Returns how many, or MC_ERR_INVALID / MC_ERR_NOMEM. */
int64_t mc_master_remove_prefix(struct mc_master *m, const char *prefix, size_t prefix_len);

/* The owner of a segment says no write of put `version` can land in `alloc` any more
 * (docs/failure-contract.md). Frees it when it belongs to that revoked or displaced put.
 * Block ids are reused, so the version is checked: a late ack never frees a newer put's
 * block.
 * Errors: MC_ERR_NOT_FOUND (no such allocation of that version), MC_ERR_BUSY (the put is
 * still live: nothing to fence). */
int mc_master_fence_ack(struct mc_master *m, uint32_t seg, uint32_t alloc, uint64_t version);

/* Blocks of puts whose writer was declared dead: each must be fenced by its segment's owner
 * (docs/failure-contract.md) before it is reused. The master queues them (at most
 * MC_MASTER_FENCE_QUEUE; beyond that the release timeout frees them); the RPC server takes
 * them, asks the owners (FENCE) and reports each answer with mc_master_fence_ack. */
#define MC_MASTER_FENCE_QUEUE 4096u
struct mc_master_fence {
    uint32_t seg;
    uint32_t alloc;
    uint64_t version;
};
size_t mc_master_fences_take(struct mc_master *m, struct mc_master_fence *out, size_t max);

/* Blocks of published versions that were freed (removed, evicted, retired, TTL-expired,
 * dropped by a drain): each owner's index of complete objects forgets them (docs/master.md,
 * "What an owner holds"), so that a new master rebuilding from the owners never gets them
 * back. Queued only once enabled (mc-master and the standalone agent do; nobody else takes
 * them); the queue grows to MC_MASTER_DROP_QUEUE_MAX, beyond which drops are lost (their
 * owners keep those objects: a new master may know them again). Off drops what is queued. */
#define MC_MASTER_DROP_QUEUE_MAX (UINT64_C(1) << 22)
#define MC_MASTER_DROP_FREED 0u   /* the block was freed */
#define MC_MASTER_DROP_RETIRED 1u /* a disk block of a version unpublished while leased or
                                   * pinned: still allocated (readable by those readers),
                                   * freed later (a FREED drop, after_retire set). Its owner
                                   * marks the record removed (a restart must not find it);
                                   * mc-master remembers the version until that later drop
                                   * is answered (docs/disk.md, "Frees and erases") */
struct mc_master_drop {
    uint32_t seg;
    uint64_t offset;
    uint64_t version;
    uint8_t kind;      /* MC_MASTER_DROP_* */
    bool after_retire; /* FREED: the block's version was retired, its disk blocks told
                        * (RETIRED) then */
};
void mc_master_drops_enable(struct mc_master *m, bool on);
size_t mc_master_drops_take(struct mc_master *m, struct mc_master_drop *out, size_t max);

/* Timers: node liveness, lease and pin expiry, TTL reclaim, stale-put release, watermark
 * eviction. Bounded work per call; call it every cfg->tick_ms. */
void mc_master_tick(struct mc_master *m);

/* Versions handed out from now on are above `floor` (a master that starts after another
 * must not hand out versions the agents already hold: mc-master passes the end of the
 * versions the leaders before it reserved in etcd, or without etcd the wall clock in ns;
 * every restore raises it too). Never lowers the counter. */
void mc_master_version_floor(struct mc_master *m, uint64_t floor);
/* The last version handed out (or the floor): the next one is above it. */
uint64_t mc_master_version_last(const struct mc_master *m);

void mc_master_get_stats(const struct mc_master *m, struct mc_master_stats *st_p);
/* Disk replicas given up as lost so far: a drain's copy whose source record was corrupt or
 * missing at its owner (MC_ERR_CORRUPT, MC_ERR_NOT_FOUND). Not in struct mc_master_stats,
 * whose fields travel on the wire in a fixed order. */
uint64_t mc_master_disk_replicas_lost(const struct mc_master *m);
const struct mc_master_config *mc_master_config(const struct mc_master *m);

#endif /* MC_MASTER_H */
