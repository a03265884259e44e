/*
 * mc_alloc: the master's per-segment offset allocator (TLSF style, contract in alloc.h).
 *
 * It hands out ranges of a segment it never touches, so all state is metadata: one node per
 * block, free or used. Offsets and lengths are counts of granules (uint32_t). It is not a
 * general memory allocator and it is not thread-safe.
 *
 * Size classes: the first level is floor(log2(units)) and the second level splits each
 * power-of-two range into MC_ALLOC_SL_COUNT equal classes; sizes below MC_ALLOC_SL_COUNT
 * units get exact classes. One bitmap word per level finds a non-empty class in O(1).
 *
 * The used/free flag is the top bit of next_phys. Node ids are therefore capped below
 * 2^31 - 1 (2^31 nodes would be 48 GiB of metadata, far past anything the master holds;
 * hitting the cap reports MC_ERR_NOMEM). The option rejected was the top bit of len: it
 * would cap a block at 2^31 - 1 units, so a segment of more units would have to start as
 * several free blocks that may never merge, which breaks "no two adjacent free blocks" and
 * makes requests over 2^31 - 1 units fail although the whole segment is free.
 */
#include "daemon/master/alloc.h"

#include <assert.h>
#include <stdlib.h>

#include <mc/mc_status.h>

#define MC_ALLOC_SL_LOG2  4
#define MC_ALLOC_SL_COUNT (1u << MC_ALLOC_SL_LOG2)
/* units < 2^32, so log2 <= 31 and the first level tops out at 31 - SL_LOG2 + 1 */
#define MC_ALLOC_FL_COUNT (32 - MC_ALLOC_SL_LOG2 + 1)

#define MC_ALLOC_CHUNK_LOG2  12
#define MC_ALLOC_CHUNK_NODES (1u << MC_ALLOC_CHUNK_LOG2)

#define MC_ALLOC_USED_BIT  0x80000000u
#define MC_ALLOC_ID_MASK   0x7FFFFFFFu /* next_phys without the flag; all ones means none */
#define MC_ALLOC_MAX_NODES MC_ALLOC_ID_MASK /* ids 0 .. 2^31 - 2 */
#define MC_ALLOC_NIL       MC_ALLOC_NONE

struct mc_alloc_node {
    uint32_t off;       /* granules */
    uint32_t len;       /* granules, >= 1 for a live block */
    uint32_t prev_phys; /* MC_ALLOC_NIL at offset 0 */
    uint32_t next_phys; /* bit 31: used; bits 0..30: id, MC_ALLOC_ID_MASK for none */
    union {
        struct {
            uint32_t prev_free; /* free blocks: bin list; unused nodes: next_free only */
            uint32_t next_free;
        } f;
        void *owner; /* used blocks */
    } u;
};

static_assert(sizeof(struct mc_alloc_node) == 24, "one 24-byte node per block");

struct mc_alloc {
    uint64_t granule;
    uint32_t granule_log2;
    uint32_t cap_units;
    uint64_t free_units;
    uint32_t used_blocks;
    uint32_t free_blocks;
    uint32_t first; /* the node at offset 0: merges keep the lower node, so it never changes */
    uint32_t hand;  /* clock hand: a live node (free or used) or MC_ALLOC_NIL */
    uint32_t claim_hint; /* the free block after the last claim (a guess, checked) */

    struct mc_alloc_node **chunks;
    uint32_t nchunks;
    uint32_t chunks_cap;
    uint32_t hwm;       /* ids below it have been initialised */
    uint32_t free_node; /* list of unused node ids, linked by u.f.next_free */

    uint32_t fl_map;
    uint32_t sl_map[MC_ALLOC_FL_COUNT];
    uint32_t heads[MC_ALLOC_FL_COUNT][MC_ALLOC_SL_COUNT];
};

/* ---- nodes ---------------------------------------------------------------------------- */

static inline struct mc_alloc_node *blk(const struct mc_alloc *a, uint32_t id)
{
    assert(id < a->hwm);
    return &a->chunks[id >> MC_ALLOC_CHUNK_LOG2][id & (MC_ALLOC_CHUNK_NODES - 1)];
}

static inline bool node_used(const struct mc_alloc_node *n)
{
    return (n->next_phys & MC_ALLOC_USED_BIT) != 0;
}

static inline uint32_t node_next(const struct mc_alloc_node *n)
{
    uint32_t v = n->next_phys & MC_ALLOC_ID_MASK;

    return v == MC_ALLOC_ID_MASK ? MC_ALLOC_NIL : v;
}

static inline void node_set_next(struct mc_alloc_node *n, uint32_t id)
{
    uint32_t v = id == MC_ALLOC_NIL ? MC_ALLOC_ID_MASK : id;

    n->next_phys = (n->next_phys & MC_ALLOC_USED_BIT) | v;
}

static inline void node_set_used(struct mc_alloc_node *n, bool used)
{
    if (used)
        n->next_phys |= MC_ALLOC_USED_BIT;
    else
        n->next_phys &= ~MC_ALLOC_USED_BIT;
}

/* Hands out an unused node id, growing the chunk table when needed. The node's fields are
 * the caller's to set. */
static int blk_new(struct mc_alloc *a, uint32_t *id_p)
{
    uint32_t id;

    if (a->free_node != MC_ALLOC_NIL) {
        id = a->free_node;
        a->free_node = blk(a, id)->u.f.next_free;
        *id_p = id;
        return 0;
    }
    if (a->hwm >= MC_ALLOC_MAX_NODES)
        return MC_ERR_NOMEM;
    if ((a->hwm >> MC_ALLOC_CHUNK_LOG2) == a->nchunks) {
        if (a->nchunks == a->chunks_cap) {
            uint32_t cap = a->chunks_cap == 0 ? 8 : a->chunks_cap * 2;
            struct mc_alloc_node **chunks = realloc(a->chunks, cap * sizeof(*chunks));

            if (chunks == NULL)
                return MC_ERR_NOMEM;
            a->chunks = chunks;
            a->chunks_cap = cap;
        }
        a->chunks[a->nchunks] = malloc(MC_ALLOC_CHUNK_NODES * sizeof(**a->chunks));
        if (a->chunks[a->nchunks] == NULL)
            return MC_ERR_NOMEM;
        a->nchunks++;
    }
    id = a->hwm++;
    *id_p = id;
    return 0;
}

static void node_put(struct mc_alloc *a, uint32_t id)
{
    struct mc_alloc_node *n = blk(a, id);

    /* len 0 and the flag clear mark it unused for mc_alloc_is_used and the checker */
    n->off = 0;
    n->len = 0;
    n->prev_phys = MC_ALLOC_NIL;
    n->next_phys = MC_ALLOC_ID_MASK;
    n->u.f.prev_free = MC_ALLOC_NIL;
    n->u.f.next_free = a->free_node;
    a->free_node = id;
}

/* ---- size classes --------------------------------------------------------------------- */

static inline uint32_t log2_u32(uint32_t v)
{
    return 31 - (uint32_t)__builtin_clz(v);
}

/* The class holding blocks of exactly `units` (units >= 1). */
static inline void class_of(uint32_t units, uint32_t *fl_p, uint32_t *sl_p)
{
    uint32_t l;

    if (units < MC_ALLOC_SL_COUNT) {
        *fl_p = 0;
        *sl_p = units;
        return;
    }
    l = log2_u32(units);
    *fl_p = l - MC_ALLOC_SL_LOG2 + 1;
    *sl_p = (units >> (l - MC_ALLOC_SL_LOG2)) - MC_ALLOC_SL_COUNT;
}

/*
 * The lowest class whose every block holds `units`: round up to the next class boundary.
 * Returns false when that class would lie past the largest one (only the request's own
 * class can then hold a fit).
 */
static inline bool class_of_fit(uint32_t units, uint32_t *fl_p, uint32_t *sl_p)
{
    uint64_t r = units;

    if (units >= MC_ALLOC_SL_COUNT)
        r += (1ull << (log2_u32(units) - MC_ALLOC_SL_LOG2)) - 1;
    if (r > UINT32_MAX)
        return false;
    class_of((uint32_t)r, fl_p, sl_p);
    return true;
}

static void bin_insert(struct mc_alloc *a, uint32_t id)
{
    struct mc_alloc_node *n = blk(a, id);
    uint32_t fl, sl, head;

    class_of(n->len, &fl, &sl);
    head = a->heads[fl][sl];
    n->u.f.prev_free = MC_ALLOC_NIL;
    n->u.f.next_free = head;
    if (head != MC_ALLOC_NIL)
        blk(a, head)->u.f.prev_free = id;
    a->heads[fl][sl] = id;
    a->sl_map[fl] |= 1u << sl;
    a->fl_map |= 1u << fl;
    a->free_units += n->len;
    a->free_blocks++;
}

static void bin_remove(struct mc_alloc *a, uint32_t id)
{
    struct mc_alloc_node *n = blk(a, id);
    uint32_t fl, sl;

    class_of(n->len, &fl, &sl);
    if (n->u.f.prev_free != MC_ALLOC_NIL)
        blk(a, n->u.f.prev_free)->u.f.next_free = n->u.f.next_free;
    else
        a->heads[fl][sl] = n->u.f.next_free;
    if (n->u.f.next_free != MC_ALLOC_NIL)
        blk(a, n->u.f.next_free)->u.f.prev_free = n->u.f.prev_free;
    if (a->heads[fl][sl] == MC_ALLOC_NIL) {
        a->sl_map[fl] &= ~(1u << sl);
        if (a->sl_map[fl] == 0)
            a->fl_map &= ~(1u << fl);
    }
    a->free_units -= n->len;
    a->free_blocks--;
}

/* A free block of at least `units`, or MC_ALLOC_NIL. */
static uint32_t find_free(const struct mc_alloc *a, uint32_t units)
{
    uint32_t fl, sl, map, id;

    if (class_of_fit(units, &fl, &sl)) {
        map = a->sl_map[fl] & (~0u << sl);
        if (map == 0) {
            /* fl + 1 <= MC_ALLOC_FL_COUNT <= 31: the shift stays defined */
            map = a->fl_map & (~0u << (fl + 1));
            if (map != 0) {
                fl = (uint32_t)__builtin_ctz(map);
                map = a->sl_map[fl];
            }
        }
        if (map != 0)
            return a->heads[fl][__builtin_ctz(map)];
    }
    /*
     * Good fit missed: every class above the request's own is empty, so the only blocks
     * that can still fit are the larger members of its own class. Scanning that one list
     * keeps the promise "never fails while a fitting block exists"; its length is the only
     * bound, which is the accepted trade-off against rounding every block up.
     */
    class_of(units, &fl, &sl);
    for (id = a->heads[fl][sl]; id != MC_ALLOC_NIL; id = blk(a, id)->u.f.next_free) {
        if (blk(a, id)->len >= units)
            return id;
    }
    return MC_ALLOC_NIL;
}

/* ---- API ------------------------------------------------------------------------------ */

int mc_alloc_create(uint64_t size, uint64_t granule, struct mc_alloc **a_p)
{
    struct mc_alloc *a;
    struct mc_alloc_node *n;
    uint32_t id;
    uint32_t fl, sl;
    uint64_t units;
    int err;

    if (granule < 8 || (granule & (granule - 1)) != 0 || size < granule)
        return MC_ERR_INVALID;
    units = size / granule;
    if (units > MC_ALLOC_MAX_UNITS)
        return MC_ERR_INVALID;

    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return MC_ERR_NOMEM;
    a->granule = granule;
    a->granule_log2 = (uint32_t)__builtin_ctzll(granule);
    a->cap_units = (uint32_t)units;
    a->hand = MC_ALLOC_NIL;
    a->claim_hint = MC_ALLOC_NIL;
    a->free_node = MC_ALLOC_NIL;
    for (fl = 0; fl < MC_ALLOC_FL_COUNT; fl++) {
        for (sl = 0; sl < MC_ALLOC_SL_COUNT; sl++)
            a->heads[fl][sl] = MC_ALLOC_NIL;
    }

    err = blk_new(a, &id);
    if (err != 0)
        goto err_destroy;
    n = blk(a, id);
    n->off = 0;
    n->len = a->cap_units;
    n->prev_phys = MC_ALLOC_NIL;
    n->next_phys = MC_ALLOC_ID_MASK; /* no successor, free */
    bin_insert(a, id);
    a->first = id;
    *a_p = a;
    return 0;

err_destroy:
    mc_alloc_destroy(a);
    return err;
}

void mc_alloc_destroy(struct mc_alloc *a)
{
    uint32_t i;

    if (a == NULL)
        return;
    for (i = 0; i < a->nchunks; i++)
        free(a->chunks[i]);
    free(a->chunks);
    free(a);
}

int mc_alloc_alloc(struct mc_alloc *a, uint64_t len, uint32_t *id_p)
{
    struct mc_alloc_node *n, *r;
    uint32_t id, rid, next;
    uint64_t units;
    int err;

    if (len == 0)
        return MC_ERR_INVALID;
    units = ((len - 1) >> a->granule_log2) + 1; /* (len - 1): no overflow at UINT64_MAX */
    if (units > a->cap_units)
        return MC_ERR_TOO_LARGE;

    id = find_free(a, (uint32_t)units);
    if (id == MC_ALLOC_NIL)
        return MC_ERR_NO_SPACE;
    n = blk(a, id);

    /* take the remainder's node before changing anything, so NOMEM leaves no trace */
    rid = MC_ALLOC_NIL;
    if (n->len > units) {
        err = blk_new(a, &rid);
        if (err != 0)
            return err;
        /* n stays valid: growing moves the chunk table, never a chunk */
    }

    bin_remove(a, id);
    if (rid != MC_ALLOC_NIL) {
        /* the block keeps the front, so the node at offset 0 is always a->first */
        r = blk(a, rid);
        r->off = n->off + (uint32_t)units;
        r->len = n->len - (uint32_t)units;
        r->prev_phys = id;
        r->next_phys = MC_ALLOC_ID_MASK;
        next = node_next(n);
        node_set_next(r, next);
        if (next != MC_ALLOC_NIL)
            blk(a, next)->prev_phys = rid;
        node_set_next(n, rid);
        n->len = (uint32_t)units;
        bin_insert(a, rid);
    }
    node_set_used(n, true);
    n->u.owner = NULL;
    a->used_blocks++;
    *id_p = id;
    return 0;
}

/* The free block holding units [uoff, uoff + units), or MC_ALLOC_NIL. Tries the block
 * after the last claim first: restores come in offset order, so it is O(1) for them. */
static uint32_t find_holding(const struct mc_alloc *a, uint32_t uoff, uint32_t units)
{
    uint32_t id = a->claim_hint;
    const struct mc_alloc_node *n;

    if (id != MC_ALLOC_NIL && id < a->hwm) {
        n = blk(a, id);
        if (n->len > 0 && !node_used(n) && n->off <= uoff && n->off + n->len > uoff)
            return (uint64_t)uoff + units <= (uint64_t)n->off + n->len ? id : MC_ALLOC_NIL;
    }
    for (id = a->first; id != MC_ALLOC_NIL; id = node_next(n)) {
        n = blk(a, id);
        if (n->off + (uint64_t)n->len <= uoff)
            continue;
        if (node_used(n) || (uint64_t)uoff + units > (uint64_t)n->off + n->len)
            return MC_ALLOC_NIL;
        return id;
    }
    return MC_ALLOC_NIL;
}

int mc_alloc_claim(struct mc_alloc *a, uint64_t off, uint64_t len, uint32_t *id_p)
{
    struct mc_alloc_node *n, *m, *r;
    uint32_t id, mid, rid, next, uoff;
    uint64_t units;
    int err;

    if (len == 0 || (off & (a->granule - 1)) != 0)
        return MC_ERR_INVALID;
    units = ((len - 1) >> a->granule_log2) + 1;
    if ((off >> a->granule_log2) >= a->cap_units ||
        units > a->cap_units - (off >> a->granule_log2))
        return MC_ERR_INVALID;
    uoff = (uint32_t)(off >> a->granule_log2);
    id = find_holding(a, uoff, (uint32_t)units);
    if (id == MC_ALLOC_NIL)
        return MC_ERR_EXISTS;
    n = blk(a, id);

    /* the nodes for the front and back remainders first, so NOMEM leaves no trace */
    mid = id;
    rid = MC_ALLOC_NIL;
    if (n->off < uoff) {
        err = blk_new(a, &mid);
        if (err != 0)
            return err;
    }
    if (uoff + units < (uint64_t)n->off + n->len) {
        err = blk_new(a, &rid);
        if (err != 0) {
            if (mid != id)
                node_put(a, mid);
            return err;
        }
    }
    n = blk(a, id);
    bin_remove(a, id);
    next = node_next(n);
    if (rid != MC_ALLOC_NIL) {
        r = blk(a, rid);
        r->off = uoff + (uint32_t)units;
        r->len = n->off + n->len - r->off;
        r->prev_phys = mid;
        r->next_phys = MC_ALLOC_ID_MASK;
        node_set_next(r, next);
        if (next != MC_ALLOC_NIL)
            blk(a, next)->prev_phys = rid;
        next = rid;
    }
    if (mid != id) {
        /* the front stays free in the old node, so the node at offset 0 stays a->first */
        m = blk(a, mid);
        m->off = uoff;
        m->prev_phys = id;
        m->next_phys = MC_ALLOC_ID_MASK;
        node_set_next(m, next);
        if (next != MC_ALLOC_NIL)
            blk(a, next)->prev_phys = mid;
        n->len = uoff - n->off;
        node_set_next(n, mid);
        bin_insert(a, id);
    } else {
        node_set_next(n, next);
    }
    m = blk(a, mid);
    m->len = (uint32_t)units;
    node_set_used(m, true);
    m->u.owner = NULL;
    if (rid != MC_ALLOC_NIL)
        bin_insert(a, rid);
    a->used_blocks++;
    a->claim_hint = rid;
    *id_p = mid;
    return 0;
}

/* `keep` absorbs its free physical successor `gone` (already out of its bin). */
static void absorb_next(struct mc_alloc *a, uint32_t keep, uint32_t gone)
{
    struct mc_alloc_node *k = blk(a, keep);
    struct mc_alloc_node *g = blk(a, gone);
    uint32_t next = node_next(g);

    k->len += g->len;
    node_set_next(k, next);
    if (next != MC_ALLOC_NIL)
        blk(a, next)->prev_phys = keep;
    /* the survivor starts below the lost node and covers it: the walk goes on from there */
    if (a->hand == gone)
        a->hand = keep;
    node_put(a, gone);
}

void mc_alloc_free(struct mc_alloc *a, uint32_t id)
{
    struct mc_alloc_node *n;
    uint32_t prev, next;

    assert(mc_alloc_is_used(a, id));
    n = blk(a, id);
    node_set_used(n, false);
    a->used_blocks--;

    prev = n->prev_phys;
    if (prev != MC_ALLOC_NIL && !node_used(blk(a, prev))) {
        bin_remove(a, prev);
        absorb_next(a, prev, id);
        id = prev;
        n = blk(a, id);
    }
    next = node_next(n);
    if (next != MC_ALLOC_NIL && !node_used(blk(a, next))) {
        bin_remove(a, next);
        absorb_next(a, id, next);
    }
    bin_insert(a, id);
}

bool mc_alloc_is_used(const struct mc_alloc *a, uint32_t id)
{
    return id < a->hwm && node_used(blk(a, id));
}

uint64_t mc_alloc_offset(const struct mc_alloc *a, uint32_t id)
{
    assert(mc_alloc_is_used(a, id));
    return (uint64_t)blk(a, id)->off << a->granule_log2;
}

uint64_t mc_alloc_len(const struct mc_alloc *a, uint32_t id)
{
    assert(mc_alloc_is_used(a, id));
    return (uint64_t)blk(a, id)->len << a->granule_log2;
}

void *mc_alloc_owner(const struct mc_alloc *a, uint32_t id)
{
    assert(mc_alloc_is_used(a, id));
    return blk(a, id)->u.owner;
}

void mc_alloc_set_owner(struct mc_alloc *a, uint32_t id, void *owner)
{
    assert(mc_alloc_is_used(a, id));
    blk(a, id)->u.owner = owner;
}

uint64_t mc_alloc_capacity(const struct mc_alloc *a)
{
    return (uint64_t)a->cap_units << a->granule_log2;
}

uint64_t mc_alloc_free_bytes(const struct mc_alloc *a)
{
    return a->free_units << a->granule_log2;
}

uint64_t mc_alloc_used_bytes(const struct mc_alloc *a)
{
    return ((uint64_t)a->cap_units - a->free_units) << a->granule_log2;
}

uint64_t mc_alloc_largest_free(const struct mc_alloc *a)
{
    uint32_t fl, id, best = 0;

    if (a->fl_map == 0)
        return 0;
    /* the highest non-empty class holds the largest block, but its members differ in size */
    fl = log2_u32(a->fl_map);
    id = a->heads[fl][log2_u32(a->sl_map[fl])];
    for (; id != MC_ALLOC_NIL; id = blk(a, id)->u.f.next_free) {
        if (blk(a, id)->len > best)
            best = blk(a, id)->len;
    }
    return (uint64_t)best << a->granule_log2;
}

uint64_t mc_alloc_granule(const struct mc_alloc *a)
{
    return a->granule;
}

uint32_t mc_alloc_used_blocks(const struct mc_alloc *a)
{
    return a->used_blocks;
}

uint32_t mc_alloc_clock_next(struct mc_alloc *a)
{
    uint32_t id;

    if (a->used_blocks == 0)
        return MC_ALLOC_NONE;
    /* no two free blocks are adjacent, so this skips at most one free block per used one */
    id = a->hand == MC_ALLOC_NIL ? a->first : node_next(blk(a, a->hand));
    for (;;) {
        if (id == MC_ALLOC_NIL)
            id = a->first;
        if (node_used(blk(a, id)))
            break;
        id = node_next(blk(a, id));
    }
    a->hand = id;
    return id;
}

void mc_alloc_clock_rewind(struct mc_alloc *a, uint32_t id)
{
    assert(mc_alloc_is_used(a, id));
    /* the hand sits on the physical predecessor (free or used), or before the first block;
     * frees keep it on a surviving node that starts at or below it (absorb_next) */
    a->hand = blk(a, id)->prev_phys;
}

uint64_t mc_alloc_meta_bytes(const struct mc_alloc *a)
{
    return sizeof(*a) + (uint64_t)a->chunks_cap * sizeof(*a->chunks) +
           (uint64_t)a->nchunks * MC_ALLOC_CHUNK_NODES * sizeof(**a->chunks);
}

/* ---- consistency check ---------------------------------------------------------------- */

/* Every loop is bounded by hwm so a corrupted link reports false instead of spinning. */
static bool check_chain(const struct mc_alloc *a, uint32_t *live_p, uint32_t *free_blocks_p)
{
    const struct mc_alloc_node *n;
    uint32_t id, prev = MC_ALLOC_NIL, steps = 0, used = 0, nfree = 0;
    uint64_t off = 0, free_units = 0;
    bool prev_free = false, hand_seen = a->hand == MC_ALLOC_NIL;

    if (a->first >= a->hwm || blk(a, a->first)->off != 0)
        return false;
    for (id = a->first; id != MC_ALLOC_NIL; id = node_next(n)) {
        if (id >= a->hwm || ++steps > a->hwm)
            return false;
        n = blk(a, id);
        if (n->len == 0 || n->off != off || n->prev_phys != prev)
            return false;
        if (node_used(n)) {
            used++;
        } else {
            if (prev_free)
                return false; /* two adjacent free blocks: a merge was missed */
            nfree++;
            free_units += n->len;
        }
        if (id == a->hand)
            hand_seen = true;
        prev_free = !node_used(n);
        off += n->len;
        prev = id;
    }
    if (off != a->cap_units || !hand_seen)
        return false;
    if (used != a->used_blocks || nfree != a->free_blocks || free_units != a->free_units)
        return false;
    *live_p = steps;
    *free_blocks_p = nfree;
    return true;
}

static bool check_bins(const struct mc_alloc *a, uint32_t *listed_p)
{
    const struct mc_alloc_node *n;
    uint32_t fl, sl, nfl, nsl, id, prev, listed = 0;

    for (fl = 0; fl < MC_ALLOC_FL_COUNT; fl++) {
        for (sl = 0; sl < MC_ALLOC_SL_COUNT; sl++) {
            bool empty = a->heads[fl][sl] == MC_ALLOC_NIL;

            if (empty != ((a->sl_map[fl] & (1u << sl)) == 0))
                return false;
            prev = MC_ALLOC_NIL;
            for (id = a->heads[fl][sl]; id != MC_ALLOC_NIL; id = n->u.f.next_free) {
                if (id >= a->hwm || ++listed > a->hwm)
                    return false;
                n = blk(a, id);
                if (node_used(n) || n->len == 0 || n->u.f.prev_free != prev)
                    return false;
                class_of(n->len, &nfl, &nsl);
                if (nfl != fl || nsl != sl)
                    return false;
                prev = id;
            }
        }
        if ((a->sl_map[fl] != 0) != ((a->fl_map & (1u << fl)) != 0))
            return false;
    }
    if ((a->fl_map >> MC_ALLOC_FL_COUNT) != 0)
        return false;
    *listed_p = listed;
    return true;
}

bool mc_alloc_check(const struct mc_alloc *a)
{
    uint32_t live, nfree, listed, unused = 0, id;

    if (a->hwm > (uint64_t)a->nchunks * MC_ALLOC_CHUNK_NODES)
        return false;
    if (!check_chain(a, &live, &nfree) || !check_bins(a, &listed))
        return false;
    if (listed != nfree)
        return false;
    for (id = a->free_node; id != MC_ALLOC_NIL; id = blk(a, id)->u.f.next_free) {
        if (id >= a->hwm || ++unused > a->hwm)
            return false;
        if (node_used(blk(a, id)) || blk(a, id)->len != 0)
            return false;
    }
    /* every initialised node is either in the chain or on the unused list */
    return live + unused == a->hwm;
}
