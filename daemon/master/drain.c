/*
 * Draining a node (drain.h): the master's side of emptying a node before it leaves.
 *
 * A walk of the directory of its own (a cursor beside the sweep's) looks at each readable
 * object that has a replica on a draining node:
 *
 *  - with a replica on some other node too, the draining one is dropped from the version
 *    and its block freed, but only while no lease is out on the version: a reader may be
 *    reading exactly that replica, so it waits for the next pass instead;
 *  - with every replica on draining nodes, a copy is made: a block is placed elsewhere as
 *    put_start would place it, and the front end asks the source's owner to write its bytes
 *    there with the ordinary remote write. The source is a replica in memory when there is
 *    one; a disk-only object's is its disk record, which the owner reads (checked) before
 *    it writes (docs/disk.md, "Draining a node with a disk"), into a block of the image's
 *    length; a record that fails its check, or that its owner no longer holds, is a lost
 *    replica (drain_source_lost). The target block belongs to no version while the copy
 *    runs (eviction and readers cannot see it); it joins the version only when the owner
 *    reports the write answered, so a reader is never handed a replica that lacks a byte.
 *    At most drain_copies_max copies are open at once.
 *
 * A failed copy's block may still be written by a transfer that has not ended, so it is
 * freed only once its owner fenced it (the same FENCE the master sends for dead writers,
 * naming the copy's own id as the version, which no put ever carries), or when the target's
 * segment is gone, or (a drain's copy, not an offload's: a disk write has no deadline) at
 * the latest put_release_ms after the copy began. The object itself is simply met again by
 * a later pass of the walk. A failed offload copy's DRAM source stays too until the fence
 * is answered (the owner answers BUSY while its disk write still reads the block).
 *
 * The same records carry offloads (a DRAM victim to its node's disk, offload_victim) and
 * promotions (a disk-only object's record back to DRAM on its node, on a GET with
 * disk_promote on: mc_drain_promote); neither is released by put_release_ms.
 */
#include "daemon/master/drain.h"

#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/master/alloc.h"
#include "daemon/master/master_int.h"
#include "shm/ring.h"

#define FENCE_RETRY_MS 2000u /* a fence the owner did not acknowledge is asked again */
#define OFFLOAD_OPEN_MAX 256u /* offload copies queued or sent at once */
#define PROMOTE_OPEN_MAX 16u  /* promotions (disk back to DRAM) queued or sent at once */

enum copy_state {
    CS_QUEUED,  /* made by the tick, not handed to the front end yet */
    CS_SENT,    /* the owner was asked; its answer is awaited */
    CS_FENCING, /* failed: the target block waits for its owner's fence */
};

struct copy {
    struct copy *next;
    enum copy_state state;
    uint64_t id;
    uint64_t version;
    uint64_t start_ms;
    uint64_t fence_ms; /* CS_FENCING: when the fence was last queued */
    bool hard;         /* the version is hard-pinned: the target block counts as such */
    bool offload;      /* DRAM to the node's disk segment (an eviction), not a drain's */
    bool promote;      /* a disk record back to DRAM (a GET's promotion): into the disk's
                          node, or (remote) the reader's, by the owner's remote write */
    bool remote;       /* promote: into another node's DRAM (deadlines as a drain's copy) */
    bool told;         /* offload: its version was unpublished, the target told (RETIRED) */
    struct rep src, tgt;
    uint16_t key_len;
    char key[];
};

struct mc_drain {
    struct mc_dir_cursor cur;
    struct copy *copies;
    uint32_t open; /* drain copies QUEUED or SENT */
    uint32_t open_max;
    uint32_t offload_open; /* offload copies QUEUED or SENT */
    uint32_t promote_open; /* promotions QUEUED or SENT */
    uint32_t queued;       /* copies QUEUED (of both kinds) */
    uint64_t kept;         /* evictions that found their block staying for its offload */
    uint64_t lost;         /* disk replicas given up: corrupt or missing at their owner */
};


int mc_drain_create(uint32_t copies_max, struct mc_drain **d_p)
{
    struct mc_drain *d = calloc(1, sizeof(*d));

    if (d == NULL)
        return MC_ERR_NOMEM;
    mc_dir_cursor_init(&d->cur);
    d->open_max = copies_max == 0 ? 1 : copies_max;
    *d_p = d;
    return 0;
}

void mc_drain_destroy(struct mc_drain *d)
{
    struct copy *c, *next;

    if (d == NULL)
        return;
    for (c = d->copies; c != NULL; c = next) {
        next = c->next;
        free(c);
    }
    free(d);
}

static bool node_draining(const struct mc_master *m, uint32_t node)
{
    const struct node *n = node_get(m, node);

    return n != NULL && n->draining;
}

static bool any_draining(const struct mc_master *m)
{
    uint32_t i;

    for (i = 0; i < m->nnodes; i++) {
        if (m->nodes[i].state == NODE_ALIVE && m->nodes[i].draining)
            return true;
    }
    return false;
}

static bool rep_equal(const struct rep *a, const struct rep *b)
{
    return a->seg == b->seg && a->gen == b->gen && a->alloc == b->alloc;
}

static uint32_t rep_seg_id(const struct rep *r)
{
    return (uint32_t)r->gen << 16 | r->seg;
}

static struct copy *copy_of_version(const struct mc_drain *d, uint64_t version)
{
    struct copy *c;

    for (c = d->copies; c != NULL; c = c->next) {
        if (c->version == version && c->state != CS_FENCING)
            return c;
    }
    return NULL;
}

/* A failed offload copy of version whose disk write its owner has not yet fenced: the
 * write may still be reading the DRAM block (review finding H2). */
static bool offload_fencing(const struct mc_drain *d, uint64_t version)
{
    const struct copy *c;

    for (c = d->copies; c != NULL; c = c->next) {
        if (c->offload && c->version == version && c->state == CS_FENCING)
            return true;
    }
    return false;
}

static void copy_closed(struct mc_drain *d, const struct copy *c)
{
    if (c->state == CS_QUEUED)
        d->queued--;
    if (c->offload)
        d->offload_open--;
    else if (c->promote)
        d->promote_open--;
    else
        d->open--;
}

/* Unlink and free c; its target block is freed by the caller when that is safe. */
static void copy_remove(struct mc_drain *d, struct copy *c)
{
    struct copy **pp;

    for (pp = &d->copies; *pp != c; pp = &(*pp)->next)
        ;
    *pp = c->next;
    if (c->state != CS_FENCING)
        copy_closed(d, c);
    free(c);
}

/* The copy failed while its write may still land: fence the target before reuse. */
static void copy_fence(struct mc_master *m, struct copy *c)
{
    struct mc_drain *d = m->drain;

    if (seg_of_rep(m, &c->tgt) == NULL) {
        copy_remove(d, c); /* the segment is gone, and the block with it */
        return;
    }
    if (c->state != CS_FENCING)
        copy_closed(d, c);
    c->state = CS_FENCING;
    c->fence_ms = now_ms(m);
    (void)mc_master__fence_push(m, rep_seg_id(&c->tgt), c->tgt.alloc, c->id);
}

/* Drop v's replicas on draining nodes (v has a replica elsewhere and no lease). */
static void drop_draining(struct mc_master *m, struct ver *v)
{
    bool hard = (ver_flags(v) & OF_PIN_HARD) != 0;
    uint32_t i = 0;

    while (i < v->nrep) {
        struct rep *reps = ver_reps(v); /* moves when nrep drops to 1 */
        struct seg *s = seg_of_rep(m, &reps[i]);

        if (s != NULL && node_draining(m, s->node)) {
            mc_master__rep_release(m, &reps[i], hard);
            mc_master__ver_drop_rep(v, i);
        } else {
            i++;
        }
    }
}

/* Fill c (allocated for o's key) as a QUEUED copy of v from src to tgt, with a fresh id, and
 * put it on the list. The caller counts it as open in its own kind. */
static void copy_queue(struct mc_master *m, struct copy *c, const struct obj *o,
                       const struct ver *v, const struct rep *src, const struct rep *tgt,
                       bool offload)
{
    struct mc_drain *d = m->drain;

    memset(c, 0, sizeof(*c));
    c->state = CS_QUEUED;
    d->queued++;
    c->id = ++m->next_version;
    c->version = v->id;
    c->start_ms = now_ms(m);
    c->offload = offload;
    c->src = *src;
    c->tgt = *tgt;
    c->key_len = o->key_len;
    memcpy(c->key, o->key, o->key_len);
    c->next = d->copies;
    d->copies = c;
}

/* Place a block for a copy of v (whose live replicas all sit on draining nodes) and queue
 * the copy. Nothing happens when no other node has room: a later pass tries again. */
static void copy_start(struct mc_master *m, struct obj *o, struct ver *v, uint32_t now)
{
    struct mc_drain *d = m->drain;
    struct rep *reps = ver_reps(v);
    struct mc_master_put_req req = {0};
    struct seg *src_seg = NULL;
    struct rep src = {0}, tgt;
    struct copy *c;
    uint32_t i;
    bool hard = (ver_flags(v) & OF_PIN_HARD) != 0;

    /* a replica in memory is the cheaper source; a disk record is copied only when the
     * object has nothing else (its owner reads and checks it, then writes it) */
    for (i = 0; i < v->nrep; i++) {
        struct seg *s = seg_of_rep(m, &reps[i]);

        if (s != NULL && (src_seg == NULL ||
                          (src_seg->kind == MC_SEG_DISK && s->kind != MC_SEG_DISK))) {
            src_seg = s;
            src = reps[i];
        }
    }
    if (src_seg == NULL)
        return;
    c = malloc(sizeof(*c) + o->key_len);
    if (c == NULL)
        return;
    req.key = o->key;
    req.key_len = o->key_len;
    req.size = v->size;
    /* a disk extent holds a header block and the payload padded to 4 KiB: the target in
     * memory takes the object's image (bytes and checksum trailer), as a promotion's does */
    req.alloc_len = src_seg->kind == MC_SEG_DISK
                        ? mc_shm_alloc_len(v->size, (o->flags & OF_NO_CSUM) == 0)
                        : mc_alloc_len(src_seg->alloc, src.alloc);
    req.replicas = 1;
    req.flags = hard ? MC_MASTER_PUT_PIN_HARD : 0;
    if (ver_flags(v) & OF_TIER_GPU)
        req.flags |= MC_MASTER_PUT_TIER_GPU; /* a GPU-tier object moves to GPU memory */
    req.writer = MC_MASTER_NODE_NONE;
    req.preferred = MC_MASTER_NODE_NONE;
    /* placement never evicts from draining segments (it skips them), so v keeps its source */
    if (mc_master__place(m, &req, 1, now, &tgt) != 0) {
        free(c);
        return;
    }
    copy_queue(m, c, o, v, &src, &tgt, false);
    c->hard = hard;
    d->open++;
}

/* One record of the walk. */
static void drain_obj(struct mc_master *m, struct obj *o, uint32_t now)
{
    struct ver *v = &o->v;
    struct rep *reps;
    uint32_t i, here = 0, elsewhere = 0;

    if (!obj_is_visible(m, o))
        return; /* being written, expired or lost: the sweep and later passes see to it */
    reps = ver_reps(v);
    for (i = 0; i < v->nrep; i++) {
        struct seg *s = seg_of_rep(m, &reps[i]);

        if (s == NULL)
            continue;
        if (node_draining(m, s->node))
            here++;
        else
            elsewhere++;
    }
    if (here == 0)
        return;
    if (elsewhere > 0) {
        /* a leased version may be read from the replica we would drop: wait */
        if (!ver_is_leased(m, v, now) && copy_of_version(m->drain, v->id) == NULL)
            drop_draining(m, v);
        return;
    }
    if (copy_of_version(m->drain, v->id) == NULL)
        copy_start(m, o, v, now);
}

void mc_drain_tick(struct mc_master *m)
{
    struct mc_drain *d = m->drain;
    uint64_t ms = now_ms(m);
    uint32_t now = now_ct(m);
    struct copy *c, *next;
    uint64_t n;

    for (c = d->copies; c != NULL; c = next) {
        next = c->next;
        if (seg_of_rep(m, &c->tgt) == NULL) {
            copy_remove(d, c); /* the target's segment is gone: nothing to fence or free */
        } else if (!c->offload && (!c->promote || c->remote) &&
                   ms - c->start_ms >= m->cfg.put_release_ms) {
            /* no write of it can still be in flight this long after it began (a disk
             * write or read has no such deadline: an offload copy or a promotion into the
             * disk's node ends by its answer, its fence's answer, or its segment's
             * unmount; a remote write starts by the COPY's arrival + op_timeout_ms) */
            mc_master__rep_release(m, &c->tgt, c->hard);
            copy_remove(d, c);
        } else if (c->state == CS_FENCING && ms - c->fence_ms >= FENCE_RETRY_MS) {
            c->fence_ms = ms;
            (void)mc_master__fence_push(m, rep_seg_id(&c->tgt), c->tgt.alloc, c->id);
        }
    }
    if (!any_draining(m)) {
        mc_dir_cursor_init(&d->cur);
        return;
    }
    for (n = 0; n < m->cfg.sweep_max_scan && d->open < d->open_max; n++) {
        struct obj *o = mc_dir_cursor_next(m->dir, &d->cur);

        if (o == NULL)
            break; /* a pass is done; the next tick starts another */
        drain_obj(m, o, now);
    }
}

bool mc_drain_fence_ack(struct mc_master *m, uint32_t seg, uint32_t alloc, uint64_t version)
{
    struct mc_drain *d = m->drain;
    struct copy *c;

    for (c = d->copies; c != NULL; c = c->next) {
        if (c->id != version || rep_seg_id(&c->tgt) != seg || c->tgt.alloc != alloc)
            continue;
        /* the target's owner says no byte of this copy can land any more: also when the
         * write failed there before the source's owner answered us */
        mc_master__rep_release(m, &c->tgt, c->hard);
        copy_remove(d, c);
        return true;
    }
    return false;
}

/* --- offload: DRAM victims to their node's disk segment ---------------------------------- */

/* The disk segment of s's node for s's tenant, ready for data, or NULL. */
static struct seg *disk_of(struct mc_master *m, const struct seg *s)
{
    uint32_t i;

    for (i = 0; i < m->nsegs; i++) {
        struct seg *t = &m->segs[i];

        if (t->state == SEG_MOUNTED && t->kind == MC_SEG_DISK && t->node == s->node &&
            t->tenant == s->tenant && !seg_restoring(m, t))
            return t;
    }
    return NULL;
}

/*
 * place.c's question before it evicts v's replica in DRAM segment s (v complete, neither
 * leased nor hard-pinned, its turn come): when that replica is v's last and s's node has a
 * disk segment, the replica's bytes go there first. The disk extent is allocated now
 * (evicting from the disk by its own clock when it is full) and a copy queued for the
 * owner (mc_master_copies_take, as a drain's); the DRAM block stays allocated until the
 * owner answers, and goes on the hand's next pass, when the disk replica has joined the
 * version (mc_master_copy_done). Returns whether the block stays.
 */
static bool offload_victim(struct mc_master *m, struct seg *s, struct ver *v, uint32_t now)
{
    struct mc_drain *d = m->drain;
    struct obj *o = ver_obj(v);
    struct rep *reps = ver_reps(v);
    struct rep src = {0}, tgt = {0};
    struct seg *disk;
    struct copy *c;
    uint32_t i, live = 0;
    uint64_t need;

    if (offload_fencing(d, v->id))
        return true; /* its failed copy's write may still read the block: kept until fenced */
    if (v != &o->v || (o->flags & OF_NO_OFFLOAD))
        return false;
    for (i = 0; i < v->nrep; i++) {
        struct seg *rs = seg_of_rep(m, &reps[i]);

        if (rs == NULL)
            continue;
        live++;
        if (rs == s)
            src = reps[i];
    }
    if (live != 1)
        return false; /* another replica stays (in memory elsewhere, or on disk already) */
    if (copy_of_version(d, v->id) != NULL)
        return true; /* on its way to disk */
    if (m->cfg.disk_admission == MC_MASTER_DISK_ADMIT_SECOND_HIT &&
        !(o->flags & (OF_HIT | OF_PIN_SOFT | OF_PIN_HARD)))
        return false;
    disk = disk_of(m, s);
    if (disk == NULL)
        return false;
    need = mc_master_disk_rec_len(v->size);
    if (need > mc_alloc_capacity(disk->alloc))
        return false;
    if (d->offload_open >= OFFLOAD_OPEN_MAX)
        return true; /* the disk is behind: the block waits its turn */
    c = malloc(sizeof(*c) + o->key_len);
    if (c == NULL)
        return false;
    if (mc_master__seg_alloc(m, disk, need, now, &tgt.alloc) != 0) {
        free(c); /* the disk holds only what may not go: dropped as without a disk */
        return false;
    }
    tgt.seg = (uint16_t)(disk - m->segs);
    tgt.gen = disk->gen;
    copy_queue(m, c, o, v, &src, &tgt, true);
    d->offload_open++;
    return true;
}

bool mc_drain_offload(struct mc_master *m, struct seg *s, struct ver *v, uint32_t now)
{
    bool keep = offload_victim(m, s, v, now);

    m->drain->kept += keep;
    return keep;
}

uint64_t mc_drain_kept(const struct mc_drain *d)
{
    return d->kept;
}

uint64_t mc_master_disk_replicas_lost(const struct mc_master *m)
{
    return m->drain->lost;
}

/* --- promotion: a disk hit copied back into DRAM, on the reader's node or the disk's ------- */

/* The DRAM segment of `node` for `tenant`, taking data, or NULL. */
static struct seg *dram_on(struct mc_master *m, uint32_t node, uint32_t tenant)
{
    uint32_t i;

    for (i = 0; i < m->nsegs; i++) {
        struct seg *t = &m->segs[i];

        if (t->state == SEG_MOUNTED && t->kind == MC_SEG_DRAM && t->node == node &&
            t->tenant == tenant && !seg_restoring(m, t) && !node_draining(m, t->node))
            return t;
    }
    return NULL;
}

/* Of the tenant's DRAM segments on nodes other than a and b, the one with the largest free
 * block (a promotion for a reader on a --dram 0 node of a disk on a --dram 0 node), or
 * NULL. */
static struct seg *dram_elsewhere(struct mc_master *m, uint32_t a, uint32_t b, uint32_t tenant)
{
    struct seg *best = NULL;
    uint64_t best_free = 0;
    uint32_t i;

    for (i = 0; i < m->nsegs; i++) {
        struct seg *t = &m->segs[i];
        uint64_t f;

        if (t->state != SEG_MOUNTED || t->kind != MC_SEG_DRAM || t->node == a ||
            t->node == b || t->tenant != tenant || seg_restoring(m, t) ||
            node_draining(m, t->node))
            continue;
        f = mc_alloc_largest_free(t->alloc);
        if (best == NULL || f > best_free) {
            best = t;
            best_free = f;
        }
    }
    return best;
}

/* A block of `need` bytes in dram (evicting there as a put would) for a promotion: 0 with
 * *tgt set, or an error when it has no room under its tenant's quota or even after evicting. */
static int promote_block(struct mc_master *m, struct seg *dram, uint64_t need, uint32_t now,
                         struct rep *tgt)
{
    if (dram == NULL || need > mc_alloc_capacity(dram->alloc))
        return MC_ERR_NO_SPACE;
    /* a quota bounds the tenant's memory: a promotion takes only room under it (it evicts
     * within the segment, not down to the quota) */
    if (m->tenants[dram->tenant].quota != 0 &&
        mc_master__tenant_used(m, dram->tenant) + need > m->tenants[dram->tenant].quota)
        return MC_ERR_NO_SPACE;
    /* evicts other objects of that segment if it must (their last replicas may go to a
     * disk): v has no block there, and the new one is no version's until the copy is
     * answered, so this cannot evict what it promotes */
    if (mc_master__seg_alloc(m, dram, need, now, &tgt->alloc) != 0)
        return MC_ERR_NO_SPACE;
    tgt->seg = (uint16_t)(dram - m->segs);
    tgt->gen = dram->gen;
    return 0;
}

/*
 * A GET was granted on v (o's readable version) to a reader on node `reader`. With
 * disk_promote on and every live replica of v on disk, a DRAM block is allocated on the
 * reader's node (its next read is then local) or, when that node has no DRAM segment of the
 * tenant or no room in it, on the node of v's (first) disk replica, or, when that one has
 * none either, on the other node whose DRAM segment of the tenant has the largest free
 * block (a read from memory, if not a local one), evicting there as a put would, and a copy
 * queued from the disk record to it. The disk's owner reads the record
 * (checked) into the block and answers; into another node's block it sends it with the
 * remote write, which starts by the COPY's arrival + op_timeout_ms or never, as a drain's
 * copy of a disk record (docs/disk.md). The block belongs to no version
 * while the copy runs (the clock cannot pick it, readers cannot see it); it joins v on the
 * answer 0 when the disk replica still belongs to v (mc_master_copy_done), else it is freed
 * and dropped. The disk replica stays. Nothing happens when a copy of v is open already,
 * PROMOTE_OPEN_MAX are, v is hard-pinned (its blocks are counted as such), the block would
 * take the tenant past its quota, or the node has no DRAM room even after evicting: the GET
 * reads the disk as before.
 */
void mc_drain_promote(struct mc_master *m, struct obj *o, struct ver *v, uint32_t now,
                      uint32_t reader)
{
    struct mc_drain *d = m->drain;
    struct rep *reps = ver_reps(v);
    struct rep src = {0}, tgt = {0};
    struct seg *disk = NULL;
    struct copy *c;
    uint64_t need;
    uint32_t i;
    bool remote = false;

    if (!m->cfg.disk_promote || d->promote_open >= PROMOTE_OPEN_MAX ||
        (o->flags & OF_PIN_HARD) || v != &o->v)
        return;
    for (i = 0; i < v->nrep; i++) {
        struct seg *s = seg_of_rep(m, &reps[i]);

        if (s == NULL)
            continue;
        if (s->kind != MC_SEG_DISK)
            return; /* a replica in memory: reads use it */
        if (disk == NULL) {
            disk = s;
            src = reps[i];
        }
    }
    if (disk == NULL || copy_of_version(d, v->id) != NULL)
        return;
    need = mc_shm_alloc_len(v->size, (o->flags & OF_NO_CSUM) == 0);
    c = malloc(sizeof(*c) + o->key_len);
    if (c == NULL)
        return;
    if (reader != MC_MASTER_NODE_NONE && reader != disk->node &&
        promote_block(m, dram_on(m, reader, disk->tenant), need, now, &tgt) == 0) {
        remote = true;
    } else if (promote_block(m, dram_on(m, disk->node, disk->tenant), need, now, &tgt) == 0) {
        /* the disk's own node */
    } else if (dram_on(m, disk->node, disk->tenant) == NULL &&
               promote_block(m, dram_elsewhere(m, reader, disk->node, disk->tenant), need, now,
                             &tgt) == 0) {
        remote = true;
    } else {
        free(c);
        return;
    }
    copy_queue(m, c, o, v, &src, &tgt, false);
    c->promote = true;
    c->remote = remote;
    d->promote_open++;
}

/* --- the public part (master.h) ---------------------------------------------------------- */

size_t mc_master_copies_take(struct mc_master *m, struct mc_master_copy *out, size_t max)
{
    struct copy *c, *next;
    size_t k = 0;

    for (c = m->drain->copies; c != NULL && k < max; c = next) {
        struct mc_master_copy *o = &out[k];
        struct seg *s;

        next = c->next;
        if (c->state != CS_QUEUED)
            continue;
        s = seg_of_rep(m, &c->src);
        if (s == NULL || seg_of_rep(m, &c->tgt) == NULL) {
            copy_fence(m, c); /* the source left meanwhile: no write was sent */
            continue;
        }
        c->state = CS_SENT;
        m->drain->queued--;
        o->id = c->id;
        o->version = c->version;
        o->key = c->key;
        o->key_len = c->key_len;
        /* a disk extent (a promotion's source, or a drain's of a disk-only object) is not
         * the image's length: the target's block bounds the image */
        o->len = s->kind == MC_SEG_DISK ? mc_alloc_len(seg_of_rep(m, &c->tgt)->alloc, c->tgt.alloc)
                                        : mc_alloc_len(s->alloc, c->src.alloc);
        mc_master__fill_replica(m, &c->src, &o->src);
        mc_master__fill_replica(m, &c->tgt, &o->dst);
        k++;
    }
    return k;
}

bool mc_master_copies_pending(const struct mc_master *m)
{
    return m->drain->queued > 0;
}

void mc_drain_unpublished(struct mc_master *m, const struct ver *v)
{
    struct mc_drain *d = m->drain;

    if (d->offload_open == 0 || !m->drops_on)
        return;
    for (struct copy *c = d->copies; c != NULL; c = c->next) {
        struct seg *ts;
        struct mc_master_drop dr;

        if (!c->offload || c->told || c->version != v->id || c->state == CS_FENCING ||
            (ts = seg_of_rep(m, &c->tgt)) == NULL)
            continue;
        c->told = true;
        dr = (struct mc_master_drop){.seg = rep_seg_id(&c->tgt),
                                     .offset = mc_alloc_offset(ts->alloc, c->tgt.alloc),
                                     .version = c->version,
                                     .kind = MC_MASTER_DROP_RETIRED};
        mc_master__drop_push_kind(m, &dr);
    }
}

/*
 * A drain's copy whose source, a disk record, failed its check at the owner (MC_ERR_CORRUPT:
 * nothing was written), or that its owner does not hold (MC_ERR_NOT_FOUND: its index has no
 * such record of that version: lost to a restart's scan, say). The record is a lost
 * replica: it leaves the version and its extent is freed (its owner erases it on the DROP);
 * when it was the version's last live replica, the object is gone, as when its only node
 * dies. Not while the version is leased (a reader may be reading that very extent: the next
 * pass copies again and comes back here), nor when the record no longer belongs to the
 * version the copy was of.
 */
static void drain_source_lost(struct mc_master *m, const struct copy *c)
{
    uint32_t now = now_ct(m), i, live = 0, at = UINT32_MAX;
    struct seg *ss = seg_of_rep(m, &c->src);
    struct obj *o;
    struct ver *v;
    struct rep *reps;

    if (ss == NULL || ss->kind != MC_SEG_DISK || check_key(c->key, c->key_len) != 0 ||
        (o = lookup(m, c->key, c->key_len)) == NULL || !obj_is_visible(m, o) ||
        o->v.id != c->version)
        return;
    v = &o->v;
    if (ver_is_leased(m, v, now))
        return;
    reps = ver_reps(v);
    for (i = 0; i < v->nrep; i++) {
        if (seg_of_rep(m, &reps[i]) == NULL)
            continue;
        live++;
        if (rep_equal(&reps[i], &c->src))
            at = i;
    }
    if (at == UINT32_MAX)
        return;
    m->drain->lost++;
    if (live == 1) {
        mc_master__ver_retire(m, v, now); /* unleased: its blocks are freed now */
        return;
    }
    mc_master__rep_release(m, &reps[at], (ver_flags(v) & OF_PIN_HARD) != 0);
    mc_master__ver_drop_rep(v, at);
}

void mc_master_copy_done(struct mc_master *m, uint64_t id, int status)
{
    struct mc_drain *d = m->drain;
    struct obj *o;
    struct ver *v = NULL;
    struct copy *c;
    uint32_t i;
    bool has_src = false;

    for (c = d->copies; c != NULL; c = c->next) {
        if (c->id == id && c->state == CS_SENT)
            break;
    }
    if (c == NULL)
        return;
    if (status != 0) {
        if (c->offload) {
            o = check_key(c->key, c->key_len) == 0 ? lookup(m, c->key, c->key_len) : NULL;
            if (o != NULL)
                o->flags |= OF_NO_OFFLOAD; /* not again: its DRAM block would wait forever */
        } else if (!c->promote &&
                   (status == MC_ERR_CORRUPT || status == MC_ERR_NOT_FOUND)) {
            drain_source_lost(m, c);
        }
        copy_fence(m, c);
        return;
    }
    if (seg_of_rep(m, &c->tgt) == NULL) {
        copy_remove(d, c);
        return;
    }
    o = check_key(c->key, c->key_len) == 0 ? lookup(m, c->key, c->key_len) : NULL;
    if (o != NULL && obj_is_visible(m, o) && o->v.id == c->version)
        v = &o->v;
    /* hard-pinned meanwhile: its blocks are counted as such, the target was not */
    if (c->promote && v != NULL && (ver_flags(v) & OF_PIN_HARD))
        v = NULL;
    /* the bytes were read from the source block: they are the version's only while that
     * block still belongs to it (not evicted, not dropped, not reused meanwhile) */
    for (i = 0; v != NULL && i < v->nrep; i++)
        has_src |= rep_equal(&ver_reps(v)[i], &c->src);
    if (v == NULL || !has_src || mc_master__ver_add_rep(m, v, &c->tgt) != 0) {
        struct seg *ts = seg_of_rep(m, &c->tgt);

        /* a record written to disk for nothing: its owner erases it (a DROP), or a restart
         * would find it; a promotion's owner indexed its DRAM block: it forgets it */
        if ((c->offload || c->promote) && m->drops_on) {
            struct mc_master_drop dr = {.seg = rep_seg_id(&c->tgt),
                                        .offset = mc_alloc_offset(ts->alloc, c->tgt.alloc),
                                        .version = c->version,
                                        .kind = MC_MASTER_DROP_FREED,
                                        .after_retire = c->told};

            mc_master__drop_push_kind(m, &dr);
        }
        mc_master__rep_release(m, &c->tgt, c->hard); /* the write is over: safe to reuse */
    }
    copy_remove(d, c);
}
