/*
 * The master service's insides, shared by the files of daemon/master only: the record,
 * version and replica layouts, the node and segment tables, the small helpers over them
 * (inline here), and the two lower files every upper one uses: record.c (versions, replicas,
 * records, the fence queue) and place.c (placement and eviction). master.c (the service's
 * operations) and drain.c (emptying a node) sit above them and never call each other's
 * insides: master.c calls drain.h, drain.c calls only this file. Nothing outside
 * daemon/master includes this file.
 */
#ifndef MC_MASTER_INT_H
#define MC_MASTER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/master/alloc.h"
#include "daemon/master/directory.h"
#include "daemon/master/master.h"

struct mc_alloc;
struct mc_drain;

#define KEY_MAX MC_DIR_KEY_MAX
#define CT_MS 10u                   /* one coarse tick */
#define TTL_MAX_CT (200u * 86400u * (1000u / CT_MS)) /* longest lease or pin: 200 days */
#define SIZE_MAX_OBJ ((UINT64_C(1) << 40) - 1)
#define SLOT_MAX 0xFFFEu            /* node and segment slots */

enum ver_state {
    VS_EMPTY = 0,      /* no version here */
    VS_PROCESSING = 1, /* being written, invisible */
    VS_COMPLETE = 2,   /* readable (when it is the head) */
    VS_RETIRED = 3,    /* unpublished; freed when its last lease ends */
    VS_STALE = 4,      /* displaced, superseded or revoked put; freed when writes are over */
};

/* object flags */
#define OF_CLOCK 0x01u    /* used since the hand last passed */
#define OF_PIN_SOFT 0x02u
#define OF_PIN_HARD 0x04u
#define OF_NO_CSUM 0x08u
#define OF_TTL 0x10u
#define OF_TIER_GPU 0x20u /* its replicas are in GPU segments */
#define OF_HIT 0x40u      /* read at least once (disk_admission = second_hit) */
#define OF_NO_OFFLOAD 0x80u /* a copy of it to disk failed: evicted as without a disk */

/* The extent a disk segment's record of an object of `size` bytes takes: one header block,
 * then the payload padded to the block (daemon/agent/disk_fmt.h, mc_disk_rec_len; the
 * agent checks that both agree). */
static inline uint64_t mc_master_disk_rec_len(uint64_t size)
{
    return MC_MASTER_DISK_BLOCK + ((size + MC_MASTER_DISK_BLOCK - 1) & ~(uint64_t)(MC_MASTER_DISK_BLOCK - 1));
}

struct rep {
    uint16_t seg; /* segment slot */
    uint16_t gen; /* the slot's generation when the block was allocated */
    uint32_t alloc;
};

struct ver {
    uint64_t id;
    uint64_t size : 40, nrep : 4, state : 3, ext : 1, epoch : 16;
    uint32_t t_start;   /* tick of put_start */
    uint32_t lease_exp; /* tick; meaningful while lease_cnt > 0 */
    uint32_t lease_cnt; /* leases of the current epoch not released yet */
    uint32_t writer;    /* node id */
    union {
        struct rep one;   /* nrep <= 1 */
        struct rep *many; /* nrep >= 2 */
    } r;
};

struct obj {
    struct ver_ext *more; /* chain of further versions, usually NULL */
    struct ver v;         /* the head */
    uint32_t ttl_exp;     /* tick (OF_TTL); while the head is PROCESSING: the TTL length */
    uint32_t pin_exp;     /* tick the soft pin lapses */
    uint16_t key_len;
    uint8_t flags;
    uint8_t ttl_sub;      /* ms past the start of tick ttl_exp: the TTL ends to the ms */
    char key[];
};

struct ver_ext {
    struct ver v; /* first: a struct ver * with ext set points here */
    struct ver_ext *next;
    struct obj *obj;
    uint64_t ttl_ms;
    uint8_t flags; /* OF_PIN_* / OF_NO_CSUM of this version */
};

_Static_assert(sizeof(struct rep) == 8, "replica ref is 8 bytes");
_Static_assert(sizeof(struct ver) == 40, "version is 40 bytes");
_Static_assert(offsetof(struct obj, key) <= 64, "record header within the 64-byte budget");

enum { NODE_FREE = 0, NODE_ALIVE, NODE_DEAD };
enum { SEG_FREE = 0, SEG_MOUNTED };

struct node {
    uint32_t id; /* gen << 16 | slot */
    uint8_t state;
    bool draining;      /* placement skips it; drain.c moves its replicas away */
    uint32_t domain_id;
    uint64_t last_hb_ms;
    char name[MC_MASTER_NAME_MAX + 1];
    char domain[MC_MASTER_NAME_MAX + 1];
};

struct seg {
    uint16_t gen;
    uint8_t state;
    uint32_t kind;
    uint32_t node;
    uint64_t base;
    struct mc_alloc *alloc;
    uint64_t hard_pinned;
    uint64_t evictions;
    uint32_t tenant; /* index in mc_master.tenants */
    bool restoring;  /* MC_MASTER_SEG_F_RESTORING: no placement, no eviction until ... */
    uint64_t restore_until_ms; /* ... the owner's restore_done or this (master clock) */
};

/* A tenant (master.h, "tenants"): index 0 is the default tenant, named "". */
struct tenant {
    char name[MC_TENANT_NAME_MAX + 1];
    uint64_t quota;
    uint64_t refusals;
};

struct mc_master {
    struct mc_master_config cfg;
    mc_master_clock_fn clock;
    void *clock_ctx;
    uint64_t t0_ms;
    struct mc_dir *dir;
    struct mc_dir_cursor sweep;
    uint64_t next_version;
    uint64_t rng;
    uint32_t next_domain_id;
    struct node *nodes;
    uint32_t nnodes; /* slots in use (high-water) */
    uint32_t cap_nodes;
    struct seg *segs;
    uint32_t nsegs;
    uint32_t cap_segs;
    uint32_t lease_ct, discard_ct, release_ct, soft_pin_ct;
    uint32_t pin_ct; /* a client's pin (mc_master_pin) */
    struct mc_master_stats st;
    /* blocks of puts whose writer died: the owners are asked to fence them (a ring; when
     * it is full the release timeout frees the rest) */
    struct mc_master_fence fences[MC_MASTER_FENCE_QUEUE];
    uint32_t fence_head, fence_count;
    /* published blocks freed, for their owners' indexes (mc_master_drops_take): a ring
     * that grows to MC_MASTER_DROP_QUEUE_MAX; kept only while drops_on */
    struct mc_master_drop *drops;
    size_t drop_head, drop_count, drop_cap;
    bool drops_on;
    bool recovering; /* mc_master_recovering_set: late restores taken (restore.c) */
    struct mc_drain *drain; /* drain.c: copies in flight, its directory walk */
    /* place.c asks this (drain.c sets it) before evicting the last replica of a version
     * from a DRAM segment: true keeps the block, whose bytes are being copied to the
     * node's disk segment (or are about to be); false lets the eviction go on */
    bool (*offload)(struct mc_master *m, struct seg *s, struct ver *v, uint32_t now);
    /* record.c calls this (master.c sets it to drain.c's) when a version is unpublished: an
     * offload copy of it still being written tells its disk target (a RETIRED drop) */
    void (*unpublished)(struct mc_master *m, const struct ver *v);
    struct tenant tenants[MC_MASTER_TENANTS_MAX];
    uint32_t ntenants;      /* >= 1: the default tenant is always there */
};

/* --- small helpers (inline: on every lookup, put and read) --------------------------------- */

static inline uint64_t now_ms(const struct mc_master *m)
{
    return m->clock(m->clock_ctx);
}

static inline uint32_t now_ct(const struct mc_master *m)
{
    return (uint32_t)((now_ms(m) - m->t0_ms) / CT_MS);
}

static inline uint32_t ms_to_ct(uint64_t ms)
{
    uint64_t ct = (ms + CT_MS - 1) / CT_MS; /* round up: a lease never ends early */

    return ct > TTL_MAX_CT ? TTL_MAX_CT : (uint32_t)ct;
}

/* a at or after b, in serial arithmetic */
static inline bool ct_reached(uint32_t now, uint32_t t)
{
    return (int32_t)(now - t) >= 0;
}

/* The current tick, and in *sub_p the ms elapsed since it began. */
static inline uint32_t now_ct_sub(const struct mc_master *m, uint32_t *sub_p)
{
    uint64_t rel = now_ms(m) - m->t0_ms;

    *sub_p = (uint32_t)(rel % CT_MS);
    return (uint32_t)(rel / CT_MS);
}

static inline struct node *node_get(const struct mc_master *m, uint32_t id)
{
    uint32_t slot = id & 0xFFFFu;

    if (slot >= m->nnodes || m->nodes[slot].id != id)
        return NULL;
    return &m->nodes[slot];
}

static inline struct seg *seg_of_rep(const struct mc_master *m, const struct rep *r)
{
    struct seg *s;

    if (r->seg >= m->nsegs)
        return NULL;
    s = &m->segs[r->seg];
    return s->state == SEG_MOUNTED && s->gen == r->gen ? s : NULL;
}

static inline struct seg *seg_get(const struct mc_master *m, uint32_t id)
{
    struct rep r = {.seg = (uint16_t)(id & 0xFFFFu), .gen = (uint16_t)(id >> 16)};

    if ((id & 0xFFFFu) > SLOT_MAX)
        return NULL;
    return seg_of_rep(m, &r);
}

/* Whether s still waits for its owner's report (MC_MASTER_SEG_F_RESTORING); the wait ends
 * here once restore_window_ms has passed. Placement and eviction leave such a segment alone. */
static inline bool seg_restoring(struct mc_master *m, struct seg *s)
{
    if (s->restoring && now_ms(m) >= s->restore_until_ms)
        s->restoring = false;
    return s->restoring;
}

static inline uint32_t seg_id(const struct mc_master *m, const struct seg *s)
{
    return (uint32_t)s->gen << 16 | (uint32_t)(s - m->segs);
}

static inline struct rep *ver_reps(struct ver *v)
{
    return v->nrep <= 1 ? &v->r.one : v->r.many;
}

static inline struct obj *ver_obj(struct ver *v)
{
    if (v->ext)
        return ((struct ver_ext *)v)->obj;
    return (struct obj *)((char *)v - offsetof(struct obj, v));
}

static inline uint8_t ver_flags(struct ver *v)
{
    return v->ext ? ((struct ver_ext *)v)->flags : ver_obj(v)->flags;
}

static inline bool ver_has_live_rep(const struct mc_master *m, struct ver *v)
{
    struct rep *reps = ver_reps(v);
    uint32_t i;

    for (i = 0; i < v->nrep; i++) {
        if (seg_of_rep(m, &reps[i]) != NULL)
            return true;
    }
    return false;
}

/* Leased now? Ends the epoch when its leases have all expired. */
static inline bool ver_is_leased(struct mc_master *m, struct ver *v, uint32_t now)
{
    if (v->lease_cnt == 0)
        return false;
    if (!ct_reached(now, v->lease_exp))
        return true;
    m->st.lease_expiries += v->lease_cnt;
    v->lease_cnt = 0;
    v->epoch++; /* releases of the expired leases must not touch later ones */
    return false;
}

/* Whether o's TTL (OF_TTL) has ended, to the ms: a TTL shorter than a tick must not last
 * until the tick ends, since callers are promised absence that many ms after publication.
 * The tick count alone would keep an object up to CT_MS - 1 ms too long. */
static inline bool obj_ttl_passed(const struct mc_master *m, const struct obj *o)
{
    uint32_t sub, now;
    int32_t d;

    if (!(o->flags & OF_TTL))
        return false; /* most objects: no clock read on the lookup and eviction paths */
    now = now_ct_sub(m, &sub);
    d = (int32_t)(now - o->ttl_exp);
    return d > 0 || (d == 0 && sub >= o->ttl_sub);
}

/* Readable: a COMPLETE head, TTL not passed, at least one replica on a mounted segment. */
static inline bool obj_is_visible(const struct mc_master *m, struct obj *o)
{
    if (o->v.state != VS_COMPLETE)
        return false;
    if (obj_ttl_passed(m, o))
        return false;
    return ver_has_live_rep(m, &o->v);
}

static inline int check_key(const char *key, size_t len)
{
    if (key == NULL || len == 0 || len > KEY_MAX)
        return MC_ERR_INVALID;
    return 0;
}

static inline struct obj *lookup(const struct mc_master *m, const char *key, size_t len)
{
    return mc_dir_find(m->dir, mc_dir_hash(key, len), key, len);
}

/* The version `id` of o (head or chain), or NULL. */
static inline struct ver *mc_master__obj_find_ver(struct obj *o, uint64_t id)
{
    struct ver_ext *e;

    if (o->v.state != VS_EMPTY && o->v.id == id)
        return &o->v;
    for (e = o->more; e != NULL; e = e->next) {
        if (e->v.state != VS_EMPTY && e->v.id == id)
            return &e->v;
    }
    return NULL;
}

/* The version of o being written (PROCESSING), or NULL. */
static inline struct ver *mc_master__obj_pending(struct obj *o)
{
    struct ver_ext *e;

    if (o->v.state == VS_PROCESSING)
        return &o->v;
    for (e = o->more; e != NULL; e = e->next) {
        if (e->v.state == VS_PROCESSING)
            return &e->v;
    }
    return NULL;
}

/* A replica as the API hands it out (the segment must be mounted). */
static inline void mc_master__fill_replica(const struct mc_master *m, const struct rep *r,
                                           struct mc_master_replica *out)
{
    const struct seg *s = seg_of_rep(m, r);

    out->seg = seg_id(m, s);
    out->node = s->node;
    out->alloc = r->alloc;
    out->kind = s->kind;
    out->offset = mc_alloc_offset(s->alloc, r->alloc);
    out->addr = s->base + out->offset;
    out->len = mc_alloc_len(s->alloc, r->alloc);
}

/* --- record.c: versions, replicas, records, the fence queue --------------------------------- */

/* Points every block of v back at v (the allocator's owner of each replica block). */
void mc_master__ver_repoint(struct mc_master *m, struct ver *v);
/* Returns one replica's block to its segment (if the segment is still there). */
void mc_master__rep_release(struct mc_master *m, const struct rep *r, bool hard);
/* Removes replica i from v (without freeing its block). */
void mc_master__ver_drop_rep(struct ver *v, uint32_t i);
/* Drops the replicas whose segment is gone. */
void mc_master__ver_drop_dead_reps(struct mc_master *m, struct ver *v);
/* Frees every block of v now: the caller knows nothing reads or writes them any more. */
void mc_master__ver_free_space(struct mc_master *m, struct ver *v);
/* Unpublishes v: freed now when unleased, else when its last lease ends. */
void mc_master__ver_retire(struct mc_master *m, struct ver *v, uint32_t now);
/* Asks the owners of a stale v's blocks to fence them (mc_master_fences_take). */
void mc_master__fence_queue(struct mc_master *m, struct ver *v);
/* A put whose writes may still land: keeps its blocks until the writer reports its transfers
 * final, the owners fence the blocks, or the release timeout passes. */
void mc_master__ver_make_stale(struct mc_master *m, struct ver *v);
/* The directory's key callback: a record's key. */
const char *mc_master__obj_key(const void *rec, size_t *len_p);
/* Unlinks empty chain entries; true when the record holds nothing and must go. */
bool mc_master__obj_is_empty(struct obj *o);
/* Frees a record and its chain (the directory no longer holds it). */
void mc_master__obj_free(struct obj *o);
/* Deletes the record when nothing is left in it. */
void mc_master__obj_gc(struct mc_master *m, struct obj *o);
/* Swaps the head with chain entry e (publishing e); fixes owners and flags of both. */
void mc_master__obj_swap_head(struct mc_master *m, struct obj *o, struct ver_ext *e);
/* Queues one block for its owner to fence (mc_master_fences_take); false when the queue is
 * full. */
bool mc_master__fence_push(struct mc_master *m, uint32_t seg, uint32_t alloc, uint64_t version);
/* Tells the owner of [offset, ...) in segment seg that the block of `version` there is
 * freed (mc_master_drops_take), when drops are on. */
void mc_master__drop_push(struct mc_master *m, uint32_t seg, uint64_t offset, uint64_t version);
void mc_master__drop_push_kind(struct mc_master *m, const struct mc_master_drop *d);
/* Appends r to v's replicas and makes v the owner of its block. MC_ERR_NOMEM, or
 * MC_ERR_NO_SPACE when v has MC_MASTER_MAX_REPLICAS already. */
int mc_master__ver_add_rep(struct mc_master *m, struct ver *v, const struct rep *r);

/* Makes v (PROCESSING, all replicas live) the readable head of o: the version it replaces is
 * retired, the TTL starts now, a soft pin starts. */
void mc_master__publish(struct mc_master *m, struct obj *o, struct ver *v, uint32_t now);

/* --- tenant.c: the tenant table ------------------------------------------------------------- */

/* The index of tenant `name` ("": the default), added when new; a quota other than 0 becomes
 * the tenant's. MC_ERR_INVALID (a bad name), MC_ERR_NO_SPACE (table full). */
int mc_master__tenant_mount(struct mc_master *m, const char *name, uint64_t quota,
                            uint32_t *idx_p);
/* The tenant of a directory key; false when it names none the master knows. */
bool mc_master__tenant_of_key(const struct mc_master *m, const char *key, size_t len,
                              uint32_t *idx_p);
/* Bytes allocated in the tenant's mounted segments. */
uint64_t mc_master__tenant_used(const struct mc_master *m, uint32_t idx);

/* --- place.c: placement and eviction ---------------------------------------------------------- */

/* Placement as put_start does it (draining nodes skipped): nrep blocks into reps, evicting
 * inline where no segment has room. MC_ERR_NO_SPACE, MC_ERR_TOO_LARGE, MC_ERR_NOMEM. */
int mc_master__place(struct mc_master *m, const struct mc_master_put_req *req, uint32_t nrep,
                     uint32_t now, struct rep *reps);
/* Allocates need bytes in s (no quota), evicting inline from s as a put would (its own
 * clock: bounded by two laps of its blocks). MC_ERR_NO_SPACE, MC_ERR_NOMEM. */
int mc_master__seg_alloc(struct mc_master *m, struct seg *s, uint64_t need, uint32_t now,
                         uint32_t *alloc_p);
/* Evicts from s down to the low watermark, within the scan budget (the tick, above the high
 * watermark). */
void mc_master__seg_trim(struct mc_master *m, struct seg *s, uint32_t now);

#endif /* MC_MASTER_INT_H */
