/*
 * The owner's index of a segment (holdidx.h): a treap ordered by offset.
 */
#include "daemon/agent/holdidx.h"

#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/common/tenant_key.h"
#include "daemon/master/master.h"

struct hnode {
    struct hnode *l, *r;
    uint32_t prio;
    uint32_t flags;
    uint64_t offset, alloc_len, size, version;
    uint64_t expires_ms; /* 0: no TTL */
    bool dead;           /* a tombstone: a drop of `version` (key_len 0) */
    size_t key_len;
    char key[];
};

struct tomb {
    uint64_t offset, version, until_ms;
};

struct mc_holdidx {
    struct hnode *root;
    size_t count;      /* live entries (tombstones not counted) */
    uint64_t bytes;
    uint32_t rng;
    struct tomb *tombs; /* a ring, oldest first: when each tombstone goes */
    size_t tcap, thead, tlen;
    uint64_t added;     /* entries added (a repeat refreshes: not counted) */
};

static uint32_t next_prio(struct mc_holdidx *h)
{
    /* xorshift32: a treap needs priorities independent of the keys, not good randomness */
    uint32_t x = h->rng;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    h->rng = x;
    return x;
}

/* t split into those below k (*lo) and those at or above (*hi). */
static void split(struct hnode *t, uint64_t k, struct hnode **lo, struct hnode **hi)
{
    if (t == NULL) {
        *lo = *hi = NULL;
    } else if (t->offset < k) {
        split(t->r, k, &t->r, hi);
        *lo = t;
    } else {
        split(t->l, k, lo, &t->l);
        *hi = t;
    }
}

/* Every key of a below every key of b. */
static struct hnode *merge(struct hnode *a, struct hnode *b)
{
    if (a == NULL)
        return b;
    if (b == NULL)
        return a;
    if (a->prio > b->prio) {
        a->r = merge(a->r, b);
        return a;
    }
    b->l = merge(a, b->l);
    return b;
}

static struct hnode *find(struct hnode *t, uint64_t k)
{
    while (t != NULL && t->offset != k)
        t = k < t->offset ? t->l : t->r;
    return t;
}

/* The first node at or above k, or NULL. */
static struct hnode *lower_bound(struct hnode *t, uint64_t k)
{
    struct hnode *best = NULL;

    while (t != NULL) {
        if (t->offset >= k) {
            best = t;
            t = t->l;
        } else {
            t = t->r;
        }
    }
    return best;
}

/* The last node below k, or NULL. */
static struct hnode *predecessor(struct hnode *t, uint64_t k)
{
    struct hnode *best = NULL;

    while (t != NULL) {
        if (t->offset < k) {
            best = t;
            t = t->r;
        } else {
            t = t->l;
        }
    }
    return best;
}

static void remove_at(struct mc_holdidx *h, uint64_t k)
{
    struct hnode *lo, *mid, *hi;

    split(h->root, k, &lo, &mid);
    split(mid, k + 1, &mid, &hi);
    if (mid != NULL) {
        if (!mid->dead) {
            h->count--;
            h->bytes -= mid->alloc_len;
        }
        free(mid);
    }
    h->root = merge(lo, hi);
}

int mc_holdidx_create(struct mc_holdidx **h_p)
{
    struct mc_holdidx *h = calloc(1, sizeof(*h));

    if (h == NULL)
        return MC_ERR_NOMEM;
    h->rng = 0x9e3779b9u;
    *h_p = h;
    return 0;
}

static void free_tree(struct hnode *t)
{
    while (t != NULL) {
        struct hnode *r = t->r;

        free_tree(t->l);
        free(t);
        t = r;
    }
}

void mc_holdidx_destroy(struct mc_holdidx *h)
{
    if (h == NULL)
        return;
    free_tree(h->root);
    free(h->tombs);
    free(h);
}

/* Entries touching [off, end) go, except one at exactly off holding `keep` (0: none kept).
 * Returns how many went. */
static size_t clear_range(struct mc_holdidx *h, uint64_t off, uint64_t end, uint64_t keep)
{
    struct hnode *n;
    size_t gone = 0;
    uint64_t from = off;

    n = predecessor(h->root, off);
    if (n != NULL && n->offset + n->alloc_len > off) {
        remove_at(h, n->offset);
        gone++;
    }
    while ((n = lower_bound(h->root, from)) != NULL && n->offset < end) {
        if (keep != 0 && n->offset == off && n->version == keep) {
            from = n->offset + 1;
            continue;
        }
        remove_at(h, n->offset);
        gone++;
    }
    return gone;
}

/* Whether a node touching [off, end) holds a version newer than v (an entry or a drop's
 * tombstone), or is the drop tombstone of exactly (off, v). */
static bool shadowed(const struct mc_holdidx *h, uint64_t off, uint64_t end, uint64_t v)
{
    const struct hnode *n = predecessor(h->root, off);

    if (n != NULL && n->offset + n->alloc_len > off && n->version > v)
        return true;
    for (n = lower_bound(h->root, off); n != NULL && n->offset < end;
         n = lower_bound(h->root, n->offset + 1)) {
        if (n->version > v || (n->dead && n->offset == off && n->version == v))
            return true;
    }
    return false;
}

static struct hnode *node_new(struct mc_holdidx *h, size_t key_len)
{
    struct hnode *n = calloc(1, sizeof(*n) + key_len);

    if (n != NULL)
        n->prio = next_prio(h);
    return n;
}

static void insert(struct mc_holdidx *h, struct hnode *n)
{
    struct hnode *lo, *hi;

    split(h->root, n->offset, &lo, &hi);
    h->root = merge(merge(lo, n), hi);
    if (!n->dead) {
        h->count++;
        h->bytes += n->alloc_len;
    }
}

int mc_holdidx_add(struct mc_holdidx *h, const struct mc_holdidx_entry *e, uint64_t now_ms)
{
    struct hnode *n;

    if (e->key == NULL || e->key_len == 0 || e->key_len > MC_DIR_KEY_MAX ||
        e->alloc_len == 0 || e->size == 0 || e->size > e->alloc_len || e->version == 0 ||
        e->version > MC_MASTER_VERSION_MAX ||
        e->offset > UINT64_MAX - e->alloc_len || (e->flags & ~MC_MASTER_PUT_FLAGS_ALL) != 0 ||
        e->ttl_ms > MC_MASTER_TTL_MAX_MS)
        return MC_ERR_INVALID;
    n = find(h->root, e->offset);
    if (n != NULL && !n->dead && n->version == e->version && n->alloc_len == e->alloc_len &&
        n->key_len == e->key_len && memcmp(n->key, e->key, e->key_len) == 0) {
        /* a repeat (the writer tells again): refresh what may have changed */
        n->size = e->size;
        n->flags = e->flags;
        n->expires_ms = e->ttl_ms != 0 ? now_ms + e->ttl_ms : 0;
        return 0;
    }
    /* versions grow master-wide: a newer put on any byte of the extent means this block was
     * freed and handed out again; a tombstone of this very version: it was freed already */
    if (shadowed(h, e->offset, e->offset + e->alloc_len, e->version))
        return 1;
    if ((n = node_new(h, e->key_len)) == NULL)
        return MC_ERR_NOMEM;
    clear_range(h, e->offset, e->offset + e->alloc_len, 0);
    n->flags = e->flags;
    n->offset = e->offset;
    n->alloc_len = e->alloc_len;
    n->size = e->size;
    n->version = e->version;
    n->expires_ms = e->ttl_ms != 0 ? now_ms + e->ttl_ms : 0;
    n->key_len = e->key_len;
    memcpy(n->key, e->key, e->key_len);
    insert(h, n);
    h->added++;
    return 0;
}

uint64_t mc_holdidx_added(const struct mc_holdidx *h)
{
    return h->added;
}

static void tomb_push(struct mc_holdidx *h, uint64_t offset, uint64_t version, uint64_t until)
{
    if (h->tlen == h->tcap) {
        size_t cap = h->tcap != 0 ? 2 * h->tcap : 64, i;
        struct tomb *t = malloc(cap * sizeof(*t));

        if (t == NULL)
            return; /* the tombstone then lives until a write or an add clears it */
        for (i = 0; i < h->tlen; i++)
            t[i] = h->tombs[(h->thead + i) % h->tcap];
        free(h->tombs);
        h->tombs = t;
        h->tcap = cap;
        h->thead = 0;
    }
    h->tombs[(h->thead + h->tlen++) % h->tcap] =
        (struct tomb){.offset = offset, .version = version, .until_ms = until};
}

bool mc_holdidx_drop(struct mc_holdidx *h, uint64_t offset, uint64_t version, uint64_t now_ms)
{
    struct hnode *n = find(h->root, offset);
    uint64_t alloc_len = 1;
    bool gone = false;

    if (n != NULL && !n->dead && (version == 0 || n->version == version)) {
        version = n->version;
        alloc_len = n->alloc_len;
        gone = true;
        remove_at(h, offset);
        n = NULL;
    }
    if (version == 0 || (n != NULL && n->version >= version))
        return gone; /* an old drop: a newer put holds the block now */
    if (n != NULL) {
        gone = !n->dead;
        if (!n->dead)
            alloc_len = n->alloc_len;
        remove_at(h, offset); /* an older entry, or an older tombstone: superseded */
    }
    /* remembered in every case: a PUBLISH of this version may still come, dropped before
     * we heard of it (the writer and the master are not ordered) or a late repeat of one
     * we had (a try that timed out at its writer is still delivered): it adds nothing */
    if ((n = node_new(h, 0)) != NULL) {
        n->dead = true;
        n->offset = offset;
        n->alloc_len = alloc_len;
        n->version = version;
        insert(h, n);
        tomb_push(h, offset, version, now_ms + MC_HOLDIDX_TOMB_MS);
    }
    return gone;
}

void mc_holdidx_expire(struct mc_holdidx *h, uint64_t now_ms)
{
    while (h->tlen > 0 && h->tombs[h->thead].until_ms <= now_ms) {
        struct tomb t = h->tombs[h->thead];
        struct hnode *n = find(h->root, t.offset);

        h->thead = (h->thead + 1) % h->tcap;
        h->tlen--;
        if (n != NULL && n->dead && n->version == t.version)
            remove_at(h, t.offset);
    }
}

size_t mc_holdidx_overwrite(struct mc_holdidx *h, uint64_t offset, uint64_t len,
                            uint64_t version)
{
    if (len == 0 || offset > UINT64_MAX - len)
        return 0;
    /* tombstones go too: a drained copy lands an older version's bytes here, and its
     * PUBLISH (of that older version, after the write) must be indexed */
    return clear_range(h, offset, offset + len, version);
}

static void fill(const struct hnode *n, struct mc_holdidx_entry *out, uint64_t now_ms)
{
    *out = (struct mc_holdidx_entry){
        .key = n->key, .key_len = n->key_len, .offset = n->offset,
        .alloc_len = n->alloc_len, .size = n->size, .version = n->version, .flags = n->flags,
        .ttl_ms = n->expires_ms != 0 ? n->expires_ms - now_ms : 0,
    };
}

int mc_holdidx_walk(struct mc_holdidx *h, uint64_t *cursor_p, struct mc_holdidx_entry *out,
                    int max, uint64_t now_ms)
{
    uint64_t from = *cursor_p;
    struct hnode *n;
    int k = 0;

    while (k < max && (n = lower_bound(h->root, from)) != NULL) {
        from = n->offset + 1;
        if (n->dead)
            continue;
        if (n->expires_ms != 0 && n->expires_ms <= now_ms) {
            remove_at(h, n->offset); /* its TTL passed: the master would have freed it */
            continue;
        }
        fill(n, &out[k++], now_ms);
    }
    *cursor_p = from;
    return k;
}

bool mc_holdidx_find(const struct mc_holdidx *h, uint64_t offset, struct mc_holdidx_entry *out)
{
    const struct hnode *n = find(h->root, offset);

    if (n == NULL || n->dead)
        return false;
    fill(n, out, 0);
    if (n->expires_ms != 0)
        out->ttl_ms = n->expires_ms; /* absolute: no clock here */
    return true;
}

size_t mc_holdidx_count(const struct mc_holdidx *h)
{
    return h->count;
}

uint64_t mc_holdidx_bytes(const struct mc_holdidx *h)
{
    return h->bytes;
}
