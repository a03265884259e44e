/*
 * The master service's insides, shared by master.c and drain.c only: the record, version and
 * replica layouts, the node and segment tables, and the few helpers drain.c needs to move
 * replicas. Nothing outside daemon/master includes this file.
 */
#ifndef MC_MASTER_INT_H
#define MC_MASTER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/master/directory.h"
#include "daemon/master/master.h"

struct mc_alloc;
struct mc_drain;

#define KEY_MAX 512
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
    struct mc_master_stats st;
    /* blocks of puts whose writer died: the owners are asked to fence them (a ring; when
     * it is full the release timeout frees the rest) */
    struct mc_master_fence fences[MC_MASTER_FENCE_QUEUE];
    uint32_t fence_head, fence_count;
    struct mc_drain *drain; /* drain.c: copies in flight, its directory walk */
};

/* Helpers master.c lends to drain.c (same meaning as the static functions they wrap). */
uint64_t mc_master__now_ms(const struct mc_master *m);
uint32_t mc_master__now_ct(const struct mc_master *m);
struct node *mc_master__node_get(const struct mc_master *m, uint32_t id);
struct seg *mc_master__seg_of_rep(const struct mc_master *m, const struct rep *r);
uint32_t mc_master__seg_id(const struct mc_master *m, const struct seg *s);
struct rep *mc_master__ver_reps(struct ver *v);
uint8_t mc_master__ver_flags(struct ver *v);
bool mc_master__ver_is_leased(struct mc_master *m, struct ver *v, uint32_t now);
bool mc_master__obj_is_visible(const struct mc_master *m, struct obj *o);
struct obj *mc_master__lookup(const struct mc_master *m, const char *key, size_t len);
struct ver *mc_master__obj_find_ver(struct obj *o, uint64_t id);
void mc_master__rep_release(struct mc_master *m, const struct rep *r, bool hard);
void mc_master__ver_drop_rep(struct ver *v, uint32_t i);
/* Appends r to v's replicas and makes v the owner of its block. MC_ERR_NOMEM, or
 * MC_ERR_NO_SPACE when v has MC_MASTER_MAX_REPLICAS already. */
int mc_master__ver_add_rep(struct mc_master *m, struct ver *v, const struct rep *r);
/* Placement as put_start does it (draining nodes skipped): nrep blocks into reps. */
int mc_master__place(struct mc_master *m, const struct mc_master_put_req *req, uint32_t nrep,
                     uint32_t now, struct rep *reps);
void mc_master__fill_replica(const struct mc_master *m, const struct rep *r,
                             struct mc_master_replica *out);
/* Queues one block for its owner to fence (mc_master_fences_take); false when the queue is
 * full. */
bool mc_master__fence_push(struct mc_master *m, uint32_t seg, uint32_t alloc, uint64_t version);

#endif /* MC_MASTER_INT_H */
