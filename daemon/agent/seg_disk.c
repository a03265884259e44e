/*
 * The disk segment (seg_disk.h): the MC_SEG_DISK kind of the segment seam.
 */
#include "daemon/agent/seg_disk.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mc/mc_status.h>

#include "daemon/agent/holdidx.h"
#include "daemon/common/log.h"
#include "daemon/master/master.h"

#define HOLDINGS_MAX 64

struct disk_seg {
    struct mc_seg s;
    struct mc_disk *d;
    mc_seg_disk_forget_fn on_forget;
    void *on_forget_ctx;
    /* the keys of the last page of holdings, valid until the next call (seg.h) */
    char keys[HOLDINGS_MAX][MC_DIR_KEY_MAX];
};

uint64_t mc_seg_disk_wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t mc_seg_disk_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint8_t *disk_span(struct mc_seg *s, uint64_t off, uint64_t len)
{
    (void)s;
    (void)off;
    (void)len;
    return NULL; /* on the device: never addressable */
}

static int disk_write(struct mc_seg *s, uint64_t off, const void *src, uint64_t len)
{
    (void)s;
    (void)off;
    (void)src;
    (void)len;
    return MC_ERR_INVALID; /* asynchronous only (disk_tier.c) */
}

static int disk_read(struct mc_seg *s, uint64_t off, void *dst, uint64_t len)
{
    (void)s;
    (void)off;
    (void)dst;
    (void)len;
    return MC_ERR_INVALID; /* asynchronous only (disk_tier.c) */
}

static int disk_holdings(struct mc_seg *s, uint64_t *cursor, struct mc_seg_holding *out, int max)
{
    struct disk_seg *g = (struct disk_seg *)s;
    struct mc_holdidx_entry e[HOLDINGS_MAX];
    int n, i;

    if (max > HOLDINGS_MAX)
        max = HOLDINGS_MAX;
    n = mc_holdidx_walk(s->held, cursor, e, max, mc_seg_disk_now_ms());
    for (i = 0; i < n; i++) {
        memcpy(g->keys[i], e[i].key, e[i].key_len);
        out[i] = (struct mc_seg_holding){
            .key = g->keys[i], .key_len = e[i].key_len, .offset = e[i].offset,
            .alloc_len = e[i].alloc_len, .size = e[i].size, .version = e[i].version,
            .flags = e[i].flags, .ttl_ms = e[i].ttl_ms,
        };
    }
    return n;
}

/* The master refused the record (it knows a newer version, or the key was removed): it is
 * neither served nor reported again, and erased (on_forget): a later master may not know
 * better, and must never be offered it. */
static void disk_forget(struct mc_seg *s, uint64_t offset, uint64_t version)
{
    struct disk_seg *g = (struct disk_seg *)s;
    struct mc_holdidx_entry e;

    /* exactly that record (disk_tier.c: (offset, version) identifies one; no tombstone) */
    if (!mc_holdidx_find(s->held, offset, &e) || (version != 0 && e.version != version))
        return;
    if (mc_holdidx_drop(s->held, offset, version, mc_seg_disk_now_ms())) {
        mc_disk_forget(g->d, offset);
        if (g->on_forget != NULL)
            g->on_forget(g->on_forget_ctx, offset, e.alloc_len);
    }
}

void mc_seg_disk_on_forget(struct mc_seg *s, mc_seg_disk_forget_fn fn, void *ctx)
{
    struct disk_seg *g = (struct disk_seg *)s;

    g->on_forget = fn;
    g->on_forget_ctx = ctx;
}

static void disk_destroy(struct mc_seg *s)
{
    mc_holdidx_destroy(s->held);
    free(s);
}

static const struct mc_seg_ops disk_ops = {
    .span = disk_span,
    .write = disk_write,
    .read = disk_read,
    .destroy = disk_destroy,
    .holdings = disk_holdings,
    .forget = disk_forget,
};

/* What the scan kept, into the index. Expired records and those the index refuses are
 * forgotten at once. */
static void seed(struct disk_seg *g)
{
    const struct mc_disk_rec *recs;
    size_t n = mc_disk_found(g->d, &recs);
    uint64_t wall = mc_seg_disk_wall_ms(), now = mc_seg_disk_now_ms();

    for (size_t i = 0; i < n; i++) {
        const struct mc_disk_rec *r = &recs[i];
        struct mc_holdidx_entry e = {
            .key = (const char *)r->key, .key_len = r->h.key_len, .offset = r->off,
            .alloc_len = r->h.alloc_len, .size = r->h.size, .version = r->h.version,
            .flags = r->h.flags,
        };

        if (r->h.expire_ms != 0) {
            if (r->h.expire_ms <= wall) {
                mc_disk_forget(g->d, r->off);
                continue;
            }
            e.ttl_ms = r->h.expire_ms - wall;
        }
        if (r->h.size == 0 || r->h.key_len == 0 || r->h.key_len > MC_DIR_KEY_MAX ||
            mc_holdidx_add(g->s.held, &e, now) != 0) {
            mc_disk_forget(g->d, r->off);
            continue;
        }
    }
}

int mc_seg_disk_create(struct mc_disk *d, struct mc_seg **s_p)
{
    struct disk_seg *g = calloc(1, sizeof(*g));
    int err;

    if (g == NULL)
        return MC_ERR_NOMEM;
    err = mc_holdidx_create(&g->s.held);
    if (err != 0) {
        free(g);
        return err;
    }
    g->d = d;
    g->s.ops = &disk_ops;
    g->s.kind = MC_SEG_DISK;
    g->s.size = mc_disk_region(d);
    g->s.ro_fd = -1;
    g->s.fd = -1;
    seed(g);
    *s_p = &g->s;
    return 0;
}

struct mc_disk *mc_seg_disk_store(struct mc_seg *s)
{
    return ((struct disk_seg *)s)->d;
}
