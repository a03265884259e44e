/*
 * The agent's disk tier (disk_tier.h).
 */
#include "daemon/agent/disk_tier.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sys/file.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/agent/agent_int.h"
#include "daemon/agent/disk.h"
#include "daemon/agent/disk_fmt.h"
#include "daemon/agent/holdidx.h"
#include "daemon/agent/mlink.h"
#include "daemon/agent/put.h"
#include "daemon/agent/seg_disk.h"
#include "daemon/common/log.h"
#include "shm/checksum.h"
#include "shm/ring.h"

/* the master allocates a record's extent by its own copy of the format's rule */
_Static_assert(MC_MASTER_DISK_BLOCK == MC_DISK_BLOCK, "the master's disk block is the store's");
_Static_assert(MC_SHM_CHUNK % MC_DISK_BLOCK == 0, "checksum chunks are whole disk blocks");

#define LOCAL_COPIES 64 /* copies taken from the in-process master per tick, at most */

struct dk_erase;
struct dk_write;
struct dk_barrier;
struct dk_read;


struct agent_disk {
    struct mc_agent *a;
    struct mc_disk *d;
    int lock_fd;               /* holds flock(LOCK_EX) on the file: one agent per disk */
    struct mc_loop_ev ev;
    bool polling;
    bool closing;              /* callbacks only free their op */
    bool stopping;             /* the agent is being destroyed (agent_disk_cancel_waiters) */
    struct dk_erase *erasing;  /* erases in flight (or waiting for the fault seam) */
    uint64_t erase_seq;        /* erases started so far: the last one's number */
    struct dk_barrier *barriers; /* answers waiting for erases to be durable */
    uint64_t peer_reads;       /* agent_disk_read_image's under way (disk_peer_reads) */
    uint64_t promo_reads;      /* promotions' reads under way (the master caps those) */
    uint64_t drain_reads;      /* drain copies' reads under way (the master caps those too) */
    uint64_t peer_reads_max;   /* ... the most at once (a high-water mark) */
    struct dk_read *local_reads; /* GETs of ours under way (their deadlines) */
    uint64_t writing;          /* offload writes accepted and not ended (fault seam included) */
    struct dk_write *waiting;  /* writes waiting for an erase of an extent they overlap */
    struct dk_write *writes;   /* every write accepted and not ended (wnext) */
    struct agent_disk_stats st;
};

/* --- writes (offload) ------------------------------------------------------------------------ */

struct dk_write {
    struct mc_disk_op op; /* first: the store's callback gets it */
    struct agent_disk *k;
    struct dk_write *next;
    struct dk_write *wnext;  /* k->writes */
    struct dk_erase *mark;   /* its object was removed meanwhile: marked once written */
    agent_disk_copy_fn done;
    void *ctx;
    uint64_t off, len, size, version, ttl_ms;
    uint64_t xxh3;        /* the payload's, taken when agent_disk_copy read the source */
    bool trailer;         /* the record stores the image's trailer (tr), not xxh3 */
    uint8_t tr[MC_DISK_BLOCK]; /* ... as agent_disk_copy checked it against the source */
    uint32_t flags;
    const uint8_t *src;
    size_t key_len;
    char key[MC_DIR_KEY_MAX];
};

/* An erase, or a removed mark (agent_disk_mark_removed): both are numbered alike, answers
 * wait for both (agent_disk_after_erases), writes into their extent wait for both. */
struct dk_erase {
    struct mc_disk_op op;
    struct agent_disk *k;
    struct dk_erase *next;
    uint64_t off, len;
    uint64_t seq;         /* k->erase_seq when it started */
    struct dk_mark *mark; /* NULL: an erase */
    struct dk_write *after; /* a mark waiting for this write of its record to end */
    uint64_t retry_at;    /* failed: tried again then (agent_disk_tick); 0: not failed */
    uint32_t fails;       /* its tries that failed so far */
};

/* the record a mark names (the index's entry, copied: the mark outlives nothing of it) */
struct dk_mark {
    uint64_t version, size;
    size_t key_len;
    char key[MC_DIR_KEY_MAX];
};

/* An answer held until every erase numbered up to `mark` has ended (agent_disk_after_erases) */
struct dk_barrier {
    struct dk_barrier *next;
    uint64_t mark;
    agent_disk_erased_fn fn;
    void *ctx;
};

static bool overlaps(uint64_t a_off, uint64_t a_len, uint64_t b_off, uint64_t b_len)
{
    return a_off < b_off + b_len && b_off < a_off + a_len;
}

static bool erase_blocks(const struct agent_disk *k, const struct dk_write *w)
{
    for (const struct dk_erase *e = k->erasing; e != NULL; e = e->next) {
        /* a mark waiting for a write (its own) blocks nothing: it starts after that write */
        if (e->after == NULL && overlaps(e->off, e->len, w->off, w->len))
            return true;
    }
    return false;
}

static void erase_go(struct agent_disk *k, struct dk_erase *e);
static void erase_forget(struct agent_disk *k, struct dk_erase *e);

static void writes_unlink(struct agent_disk *k, struct dk_write *w)
{
    struct dk_write **pp;

    for (pp = &k->writes; *pp != NULL && *pp != w; pp = &(*pp)->wnext)
        ;
    if (*pp == w)
        *pp = w->wnext;
}

/* w ended (whatever its result): a mark waiting for it starts now -- it reads the header
 * and marks only a committed record of its version, so a failed write leaves it nothing */
static void write_mark_go(struct agent_disk *k, struct dk_write *w)
{
    struct dk_erase *e = w->mark;

    writes_unlink(k, w);
    if (e == NULL)
        return;
    w->mark = NULL;
    e->after = NULL;
    if (k->closing)
        erase_forget(k, e);
    else
        erase_go(k, e);
}

static void write_done(struct mc_disk_op *op, int res)
{
    struct dk_write *w = (struct dk_write *)op;
    struct agent_disk *k = w->k;
    struct mc_agent *a = k->a;

    k->writing--;
    write_mark_go(k, w);
    if (k->closing) {
        free(w);
        return;
    }
    if (res == 0) {
        struct mc_holdidx_entry e = {
            .key = w->key, .key_len = w->key_len, .offset = w->off, .alloc_len = w->len,
            .size = w->size, .version = w->version, .flags = w->flags, .ttl_ms = w->ttl_ms,
        };
        int added = mc_holdidx_add(a->disk_seg->held, &e, mc_agent_now_ms());

        /* the index refused it (another record under the extent, no memory): a copy we
         * cannot read back is a failed one -- answered so, and its record erased, never
         * answered 0 while every read would say NOT_FOUND (review finding H1) */
        if (added != 0) {
            mc_warn("disk: the record at %" PRIu64 " could not be indexed (%d): copy failed",
                    w->off, added);
            res = MC_ERR_IO;
            agent_disk_erase_extent(a, w->off, w->len);
        }
    }
    if (res == 0) {
        k->st.offloads++;
    } else {
        k->st.offload_errors++;
        mc_warn("disk: writing %" PRIu64 " bytes at %" PRIu64 ": %s", w->size, w->off,
                mc_strerror(res));
    }
    w->done(w->ctx, res);
    free(w);
}

static void write_go(struct agent_disk *k, struct dk_write *w);

static void write_due(void *ctx)
{
    struct dk_write *w = ctx;

    write_go(w->k, w);
}

static void write_dropped(void *ctx)
{
    struct dk_write *w = ctx;

    write_done(&w->op, MC_ERR_CANCELED); /* the agent stops before the write started */
}

/* Start w now (nothing erases under it), or late when the fault seam makes the disk slow.
 * Failures go to its callback. */
static void write_start(struct agent_disk *k, struct dk_write *w)
{
    if (!mc_fault_defer(&k->a->fault, MC_FAULT_DISK_WRITE, write_due, write_dropped, w))
        write_go(k, w);
}

static void write_go(struct agent_disk *k, struct dk_write *w)
{
    uint64_t expire = w->ttl_ms != 0 ? mc_seg_disk_wall_ms() + w->ttl_ms : 0;
    int err;

    /* whatever the index had there was freed by the master: its bytes are going */
    (void)mc_holdidx_overwrite(k->a->disk_seg->held, w->off, w->len, w->version);
    w->op.done = write_done;
    if (w->trailer)
        err = mc_disk_write_image(k->d, &w->op, w->off, w->key, (uint32_t)w->key_len,
                                  w->version, w->flags, expire, w->src, w->size, w->tr);
    else
        err = mc_disk_write_hashed(k->d, &w->op, w->off, w->key, (uint32_t)w->key_len,
                                   w->version, w->flags, expire, w->src, w->size, w->xxh3);
    if (err != 0)
        write_done(&w->op, err);
}

static void waiting_retry(struct agent_disk *k)
{
    struct dk_write **pp = &k->waiting;

    while (*pp != NULL) {
        struct dk_write *w = *pp;

        if (erase_blocks(k, w)) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        write_start(k, w);
    }
}

/* The DRAM image's chunk checksums and object checksum (shm/ring.h): an offload must not
 * bless bytes that went bad in memory (the disk record stores that trailer, or an XXH3 taken
 * from the bytes). */
static bool image_ok(const uint8_t *img, uint64_t size)
{
    return mc_disk_trailer_check(img, size, img + mc_shm_trailer_off(size));
}

int agent_disk_copy(struct mc_agent *a, const struct agent_disk_copy *cp,
                    agent_disk_copy_fn done, void *ctx)
{
    struct agent_disk *k = a->disk;
    struct mc_seg *s = agent_seg(a, cp->src_seg);
    struct mc_holdidx_entry e;
    uint64_t now = mc_agent_now_ms(), img, len;
    struct dk_write *w;
    const uint8_t *src;

    if (k == NULL || s == NULL || s->kind != MC_SEG_DRAM || s->held == NULL ||
        cp->key_len == 0 || cp->key_len > MC_DIR_KEY_MAX)
        return MC_ERR_INVALID;
    /* what our index says of the object at the source: the record carries all of it */
    if (!mc_holdidx_find(s->held, cp->src_offset, &e) || e.version != cp->version ||
        e.key_len != cp->key_len || memcmp(e.key, cp->key, cp->key_len) != 0)
        return MC_ERR_INVALID;
    if (e.ttl_ms != 0 && e.ttl_ms <= now)
        return MC_ERR_INVALID; /* expired: the master is about to free it */
    img = mc_shm_alloc_len(e.size, (e.flags & MC_MASTER_PUT_NO_CHECKSUM) == 0);
    src = mc_seg_span(s, cp->src_offset, img);
    len = cp->dst_len != 0 ? cp->dst_len : mc_disk_rec_len(e.size);
    if (src == NULL || len < mc_disk_rec_len(e.size) || cp->dst_offset % MC_DISK_BLOCK != 0 ||
        len % MC_DISK_BLOCK != 0 || cp->dst_offset > a->disk_seg->size ||
        len > a->disk_seg->size - cp->dst_offset)
        return MC_ERR_INVALID;
    if ((e.flags & MC_MASTER_PUT_NO_CHECKSUM) == 0 && !image_ok(src, e.size)) {
        mc_warn("disk: an object's DRAM bytes fail their checksum: not offloaded");
        return MC_ERR_CORRUPT;
    }
    w = calloc(1, sizeof(*w));
    if (w == NULL)
        return MC_ERR_NOMEM;
    w->k = k;
    w->done = done;
    w->ctx = ctx;
    w->off = cp->dst_offset;
    w->len = len;
    w->size = e.size;
    w->version = e.version;
    w->flags = e.flags;
    w->ttl_ms = e.ttl_ms != 0 ? e.ttl_ms - now : 0;
    w->src = src; /* the master keeps the DRAM block allocated until the copy is answered */
    /* the source's check taken now, while the index vouches for it (a write that waits for
     * an erase would otherwise vouch for whatever the block holds after the wait): the
     * image's trailer, just checked, where the record has room for it (format 2: no second
     * pass, and readers get this very trailer back), else the payload's XXH3 */
    w->trailer = (e.flags & MC_MASTER_PUT_NO_CHECKSUM) == 0 &&
                 mc_disk_trailer_fits(e.size, (uint32_t)cp->key_len);
    if (w->trailer)
        memcpy(w->tr, src + mc_shm_trailer_off(e.size), mc_disk_trailer_len(e.size));
    else
        w->xxh3 = mc_disk_payload_hash(src, e.size);
    w->key_len = cp->key_len;
    memcpy(w->key, cp->key, cp->key_len);
    k->writing++; /* from here write_done runs exactly once */
    w->wnext = k->writes;
    k->writes = w;
    if (erase_blocks(k, w)) {
        w->next = k->waiting;
        k->waiting = w;
        return 0;
    }
    write_start(k, w);
    return 0;
}

/* --- erases ----------------------------------------------------------------------------------- */

/* The answers whose erases have all ended run, oldest mark first. */
static void barriers_release(struct agent_disk *k)
{
    uint64_t lowest = UINT64_MAX;
    struct dk_barrier **pp = &k->barriers;

    for (const struct dk_erase *e = k->erasing; e != NULL; e = e->next) {
        if (e->seq < lowest)
            lowest = e->seq;
    }
    while (*pp != NULL) {
        struct dk_barrier *b = *pp;

        if (b->mark >= lowest) {
            pp = &b->next;
            continue;
        }
        *pp = b->next;
        b->fn(b->ctx, 0);
        free(b);
        pp = &k->barriers; /* fn may have added or released others */
    }
}

uint64_t agent_disk_erase_mark(const struct mc_agent *a)
{
    return a->disk != NULL ? a->disk->erase_seq : 0;
}

bool agent_disk_after_erases(struct mc_agent *a, uint64_t mark, agent_disk_erased_fn fn,
                             void *ctx)
{
    struct agent_disk *k = a->disk;
    struct dk_barrier *b;
    bool any = false;

    if (k == NULL || k->closing)
        return false;
    for (const struct dk_erase *e = k->erasing; e != NULL && !any; e = e->next)
        any = e->seq <= mark;
    if (!any)
        return false;
    b = malloc(sizeof(*b));
    if (b == NULL)
        return false; /* answered now: the window of a crash stays open for this one */
    *b = (struct dk_barrier){.next = k->barriers, .mark = mark, .fn = fn, .ctx = ctx};
    k->barriers = b;
    return true;
}

void agent_disk_cancel_waiters(struct mc_agent *a)
{
    struct agent_disk *k = a->disk;

    if (k != NULL)
        k->stopping = true;
    while (k != NULL && k->barriers != NULL) {
        struct dk_barrier *b = k->barriers;

        k->barriers = b->next;
        b->fn(b->ctx, MC_ERR_CANCELED);
        free(b);
    }
}

/*
 * A tombstone or a removed mark that could not be written (an I/O error): the record would
 * come back at a restart, so the erase is not over. It stays in k->erasing -- the answers
 * waiting for it (a standalone remove, a DROP) keep waiting, writes into its extent too --
 * and is tried again after a back-off of 100 ms doubling to 5 s, for as long as the agent
 * runs. A DROP left unanswered is sent again by the master, which meanwhile refuses a
 * restarted owner's report of that version (docs/disk.md, "Frees and erases").
 */
static void erase_failed(struct agent_disk *k, struct dk_erase *e, int res)
{
    uint64_t backoff = e->fails < 6 ? 100ull << e->fails : 5000;

    if (e->fails == 0 || (e->fails & (e->fails - 1)) == 0) /* 1st, 2nd, 4th, 8th, ... */
        mc_warn("disk: %s the record at %" PRIu64 " failed (%s, try %" PRIu32 "): tried "
                "again in %" PRIu64 " ms; answers that wait for it wait on",
                e->mark != NULL ? "marking removed" : "erasing", e->off, mc_strerror(res),
                e->fails + 1, backoff);
    e->fails++;
    k->st.erase_errors++;
    e->retry_at = mc_agent_now_ms() + backoff;
}

static void erase_done(struct mc_disk_op *op, int res)
{
    struct dk_erase *e = (struct dk_erase *)op;
    struct agent_disk *k = e->k;
    struct dk_erase **pp;

    if (res != 0 && !k->closing && !k->stopping) {
        erase_failed(k, e, res);
        return;
    }
    for (pp = &k->erasing; *pp != e; pp = &(*pp)->next)
        ;
    *pp = e->next;
    if (!k->closing) {
        if (res == 0 && e->mark != NULL)
            k->st.removed_marks++;
        else if (res == 0)
            k->st.erases++;
        waiting_retry(k);
    }
    free(e->mark);
    free(e);
    if (!k->closing)
        barriers_release(k);
}

static void erase_submit(void *ctx)
{
    struct dk_erase *e = ctx;
    const struct dk_mark *m = e->mark;
    int err;

    /* tests: a device that fails writes (disk_erase_fail=N: the next N tries) */
    if (mc_fault_lose(&e->k->a->fault, MC_FAULT_FAIL_DISK_ERASE))
        err = MC_ERR_IO;
    else if (m != NULL)
        err = mc_disk_mark_removed(e->k->d, &e->op, e->off, (const void *)m->key,
                                   (uint32_t)m->key_len, m->version, m->size);
    else
        err = mc_disk_erase(e->k->d, &e->op, e->off, e->len);

    if (err != 0)
        erase_done(&e->op, err);
}

static void erase_dropped(void *ctx)
{
    struct dk_erase *e = ctx;
    struct agent_disk *k = e->k;
    struct dk_erase **pp;

    for (pp = &k->erasing; *pp != e; pp = &(*pp)->next)
        ;
    *pp = e->next;
    free(e->mark);
    free(e);
}

/* e never ran (the agent stops) */
static void erase_forget(struct agent_disk *k, struct dk_erase *e)
{
    (void)k;
    erase_dropped(e);
}

static void erase_go(struct agent_disk *k, struct dk_erase *e)
{
    /* tests: a slow disk (the erase starts late; answers waiting for it wait longer) */
    if (!mc_fault_defer(&k->a->fault, MC_FAULT_DISK, erase_submit, erase_dropped, e))
        erase_submit(e);
}

/* Write a tombstone over [offset, +len) (the index no longer names it), or with mark the
 * record's header marked removed (mark is then the erase's), after `after` (a write of that
 * record still under way) ends when set. */
static struct dk_erase *erase_start(struct agent_disk *k, uint64_t offset, uint64_t len,
                                    struct dk_mark *mark, struct dk_write *after)
{
    struct dk_erase *e = calloc(1, sizeof(*e));

    if (e == NULL) {
        mc_warn("disk: no memory to erase the record at %" PRIu64 ": a restart may report "
                "it again", offset);
        free(mark);
        return NULL;
    }
    e->mark = mark;
    e->after = after;
    e->k = k;
    e->off = offset;
    e->len = len;
    e->seq = ++k->erase_seq;
    e->op.done = erase_done;
    e->next = k->erasing;
    k->erasing = e;
    if (after == NULL)
        erase_go(k, e);
    return e;
}

/* seg_disk.h's on_forget: a record the master refused at a restore */
static void forgotten(void *ctx, uint64_t offset, uint64_t len)
{
    struct agent_disk *k = ctx;

    /* only a refusal the master sent while we run: an agent that stops ends its link's
     * requests unanswered, and must never erase a record on their account (review D2) */
    if (k->stopping || k->closing || k->a->stopping)
        return;
    (void)erase_start(k, offset, len, NULL, NULL);
}

void agent_disk_erase_extent(struct mc_agent *a, uint64_t offset, uint64_t len)
{
    struct mc_holdidx_entry h;

    if (a->disk == NULL)
        return;
    if (mc_holdidx_find(a->disk_seg->held, offset, &h))
        (void)mc_holdidx_drop(a->disk_seg->held, offset, h.version, mc_agent_now_ms());
    (void)erase_start(a->disk, offset, len, NULL, NULL);
}

/*
 * A record of a disk segment is identified by (offset, version) exactly, never by version
 * order: the master fills a disk extent with any DRAM victim, of any age, so a newer
 * version at an offset does not mean the older was freed, nor an older one that it is
 * stale (review finding H1). A DROP that does not name the record the index holds there
 * is ignored (no remembered tombstone: a disk record is written by us, never published
 * late); version 0 names whatever is there.
 */
void agent_disk_drop(struct mc_agent *a, uint64_t offset, uint64_t version)
{
    struct agent_disk *k = a->disk;
    struct mc_holdidx_entry h;

    if (k == NULL)
        return;
    if (!mc_holdidx_find(a->disk_seg->held, offset, &h) ||
        (version != 0 && h.version != version))
        return;
    if (!mc_holdidx_drop(a->disk_seg->held, offset, h.version, mc_agent_now_ms()))
        return;
    (void)erase_start(k, offset, h.alloc_len, NULL, NULL);
}

/*
 * The master unpublished the version of our record at `offset` while a reader held it
 * (MC_MASTER_DROP_RETIRED: a remove or a replacing put of a leased or pinned object): the
 * block stays allocated, and readable, until the reader lets go (then a drop frees it and
 * we erase it). Meanwhile a kill -9 would let the restart's scan find the record and the
 * master publish it again, so its header is marked removed now (docs/disk.md, "Frees and
 * erases"): numbered like an erase, so the answer of the remove waits for it. The index
 * keeps the record (the reader's read goes through it).
 */
void agent_disk_mark_removed(struct mc_agent *a, uint64_t offset, uint64_t version)
{
    struct agent_disk *k = a->disk;
    struct mc_holdidx_entry h;
    struct dk_write *w = NULL;
    struct dk_mark *m;

    if (k == NULL)
        return;
    if (!mc_holdidx_find(a->disk_seg->held, offset, &h) || h.version != version) {
        /* hole D5: an offload copy of the version still being written there (the copy
         * holds the extent): its record is marked once the write ends, and the answers
         * wait for that too */
        for (w = k->writes; w != NULL; w = w->wnext) {
            if (w->off == offset && w->version == version && w->mark == NULL)
                break;
        }
        if (w == NULL)
            return;
        h = (struct mc_holdidx_entry){.key = w->key, .key_len = w->key_len,
                                      .alloc_len = w->len, .size = w->size,
                                      .version = w->version};
    }
    m = malloc(sizeof(*m));
    if (m == NULL) {
        mc_warn("disk: no memory to mark the record at %" PRIu64 " removed: a restart may "
                "report it again", offset);
        return;
    }
    m->version = h.version;
    m->size = h.size;
    m->key_len = h.key_len;
    memcpy(m->key, h.key, h.key_len);
    if (w != NULL)
        w->mark = erase_start(k, offset, h.alloc_len, m, w);
    else
        (void)erase_start(k, offset, h.alloc_len, m, NULL);
}

/* --- reads ------------------------------------------------------------------------------------ */

/* What a read of read_image is for: counted apart, and only a peer's read is a disk hit */
enum rd_kind { RD_PEER, RD_PROMO, RD_DRAIN };

struct dk_read {
    struct mc_disk_op op;
    struct agent_disk *k;
    mc_rio_read_fn done;      /* a GET of ours: into a landing block */
    agent_disk_read_fn rdone; /* a peer's READ: into the owner's buffer */
    void *ctx;
    struct mc_alloc *land;
    uint32_t land_id, rep;
    uint64_t off, version;    /* what read_record is given (read_submit) */
    /* a GET of ours: answered MC_ERR_TIMEOUT at its deadline (agent_disk_tick) while the
     * read goes on; its landing block is freed only by read_done, the op's final end */
    uint64_t deadline_ms;
    bool answered;
    struct dk_read *lnext, *lprev;
    uint8_t *dst;
    uint64_t size;
    bool csum;
    enum rd_kind kind;        /* whose read (a peer's or a GET's: a disk hit) */
    size_t key_len;
    char key[MC_DIR_KEY_MAX];
};

/* A read into dst of the record's image (with its checksum trailer) or its bytes alone. */
static int read_record(struct agent_disk *k, struct dk_read *r, uint64_t offset,
                       uint64_t version)
{
    if (r->csum)
        return mc_disk_read_image(k->d, &r->op, offset, r->key, (uint32_t)r->key_len, version,
                                  r->dst, r->size);
    return mc_disk_read(k->d, &r->op, offset, r->key, (uint32_t)r->key_len, version, r->dst,
                        r->size);
}

static void read_done(struct mc_disk_op *op, int res)
{
    struct dk_read *r = (struct dk_read *)op;
    struct agent_disk *k = r->k;

    if (r->kind == RD_PROMO) {
        k->promo_reads--;
    } else if (r->kind == RD_DRAIN) {
        k->drain_reads--;
    } else if (r->rdone != NULL) {
        k->peer_reads--;
    } else {
        if (r->lprev != NULL)
            r->lprev->lnext = r->lnext;
        else
            k->local_reads = r->lnext;
        if (r->lnext != NULL)
            r->lnext->lprev = r->lprev;
        if (r->answered) {
            /* its GET was answered MC_ERR_TIMEOUT: the landing block is free only now */
            mc_alloc_free(r->land, r->land_id);
            free(r);
            return;
        }
    }
    if (k->closing) {
        if (r->rdone != NULL)
            r->rdone(r->ctx, MC_ERR_CANCELED); /* its owner frees what it holds */
        free(r);
        return;
    }
    if (res == 0) {
        if (r->kind == RD_PEER)
            k->st.disk_hits++;
        else if (r->kind == RD_DRAIN)
            k->st.drain_records_read++;
    } else {
        if (res == MC_ERR_CORRUPT)
            k->st.read_corrupt++;
        mc_warn("disk: reading a record of %" PRIu64 " bytes: %s", r->size, mc_strerror(res));
    }
    if (r->rdone != NULL) {
        r->rdone(r->ctx, res);
    } else if (res == 0) {
        r->done(r->ctx, 0, r->land_id, r->rep);
    } else {
        mc_alloc_free(r->land, r->land_id);
        r->done(r->ctx, res, 0, r->rep);
    }
    free(r);
}

static void read_submit(void *ctx)
{
    struct dk_read *r = ctx;
    int err = read_record(r->k, r, r->off, r->version);

    if (err != 0)
        read_done(&r->op, err);
}

static void read_dropped(void *ctx)
{
    struct dk_read *r = ctx;

    read_done(&r->op, MC_ERR_CANCELED); /* the agent stops before the read started */
}

/* Start r (its op filled): at once (0, or read_record's refusal: read_done will not
 * run), or late when the fault seam makes the disk slow (0; a late refusal goes to
 * read_done). */
static int read_go(struct dk_read *r)
{
    if (mc_fault_defer(&r->k->a->fault, MC_FAULT_DISK, read_submit, read_dropped, r))
        return 0;
    return read_record(r->k, r, r->off, r->version);
}

/* Read replica j of g (in our disk segment) into a landing block of the tenant. 0 (done
 * runs later), MC_ERR_NOT_FOUND (our index does not hold that record), MC_ERR_BUSY (the
 * landing segment is full), MC_ERR_NOMEM. */
static int read_start(struct mc_agent *a, const struct mc_master_get_result *g, uint32_t j,
                      uint32_t tenant, uint64_t deadline_ms, mc_rio_read_fn done, void *ctx)
{
    struct agent_disk *k = a->disk;
    struct agent_tenant *t = &a->ten[tenant];
    bool csum = (g->flags & MC_MASTER_PUT_NO_CHECKSUM) == 0;
    uint64_t len = mc_shm_alloc_len(g->size, csum);
    struct mc_holdidx_entry e;
    struct dk_read *r;
    int err;

    if (!mc_holdidx_find(a->disk_seg->held, g->rep[j].offset, &e) || e.version != g->version ||
        e.size != g->size)
        return MC_ERR_NOT_FOUND;
    if (t->land == NULL || len > t->land_seg->size)
        return MC_ERR_TOO_LARGE;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return MC_ERR_NOMEM;
    if (mc_alloc_alloc(t->land, len, &r->land_id) != 0) {
        free(r);
        return MC_ERR_BUSY; /* the landing segment is full of reads not yet released */
    }
    r->k = k;
    r->done = done;
    r->ctx = ctx;
    r->land = t->land;
    r->rep = j;
    r->dst = t->land_seg->base + mc_alloc_offset(t->land, r->land_id);
    r->size = g->size;
    r->csum = csum;
    r->key_len = e.key_len;
    memcpy(r->key, e.key, e.key_len);
    r->op.done = read_done;
    r->off = g->rep[j].offset;
    r->version = g->version;
    r->deadline_ms = deadline_ms;
    err = read_go(r);
    if (err != 0) {
        mc_alloc_free(t->land, r->land_id);
        free(r);
        return err;
    }
    r->lnext = k->local_reads;
    if (r->lnext != NULL)
        r->lnext->lprev = r;
    k->local_reads = r;
    return 0;
}

void agent_disk_tick(struct mc_agent *a, uint64_t now)
{
    struct agent_disk *k = a->disk;

    if (k == NULL || k->closing)
        return;
    for (struct dk_erase *e = k->erasing; e != NULL; e = e->next) {
        if (e->retry_at != 0 && now >= e->retry_at) {
            e->retry_at = 0;
            erase_go(k, e);
        }
    }
    for (struct dk_read *r = k->local_reads; r != NULL; r = r->lnext) {
        if (r->answered || r->deadline_ms == 0 || now < r->deadline_ms)
            continue;
        r->answered = true;
        k->st.read_timeouts++;
        r->done(r->ctx, MC_ERR_TIMEOUT, 0, r->rep);
    }
}

/* Start reading the image of our record (offset, version) into dst (len bytes: the object
 * with its trailer); done(ctx, status) at the final end. The caller counted the read (in
 * peer_reads, promo_reads or drain_reads, by kind) and uncounts it when this fails. */
static int read_image(struct mc_agent *a, uint64_t offset, uint64_t version, void *dst,
                      uint64_t len, enum rd_kind kind, agent_disk_read_fn done, void *ctx)
{
    struct agent_disk *k = a->disk;
    struct mc_holdidx_entry e;
    struct dk_read *r;
    int err;

    if (!mc_holdidx_find(a->disk_seg->held, offset, &e) || e.version != version)
        return MC_ERR_NOT_FOUND;
    if (len != mc_shm_alloc_len(e.size, (e.flags & MC_MASTER_PUT_NO_CHECKSUM) == 0))
        return MC_ERR_INVALID;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return MC_ERR_NOMEM;
    r->k = k;
    r->rdone = done;
    r->ctx = ctx;
    r->kind = kind;
    r->dst = dst;
    r->size = e.size;
    r->csum = (e.flags & MC_MASTER_PUT_NO_CHECKSUM) == 0;
    r->key_len = e.key_len;
    memcpy(r->key, e.key, e.key_len);
    r->op.done = read_done;
    r->off = offset;
    r->version = version;
    err = read_go(r);
    if (err != 0)
        free(r);
    return err;
}

int agent_disk_read_image(struct mc_agent *a, uint64_t offset, uint64_t version, void *dst,
                          uint64_t len, agent_disk_read_fn done, void *ctx)
{
    struct agent_disk *k = a->disk;
    int err;

    if (k == NULL)
        return MC_ERR_NOT_FOUND;
    /* bounded: each holds the object's bytes, and a slow disk must not let peers pile up
     * reads without end (promotions are capped by the master, and counted apart) */
    if (k->peer_reads >= a->cfg.disk_peer_reads) {
        k->st.peer_reads_busy++;
        return MC_ERR_BUSY;
    }
    if (++k->peer_reads > k->peer_reads_max)
        k->peer_reads_max = k->peer_reads;
    err = read_image(a, offset, version, dst, len, RD_PEER, done, ctx);
    if (err != 0)
        k->peer_reads--;
    return err;
}

int agent_disk_drain_read(struct mc_agent *a, const struct agent_disk_drain *dr,
                          uint8_t **buf_p, uint64_t *len_p, agent_disk_read_fn done, void *ctx)
{
    struct agent_disk *k = a->disk;
    struct mc_holdidx_entry e;
    uint64_t len;
    void *buf;
    int err;

    if (k == NULL || !mc_holdidx_find(a->disk_seg->held, dr->offset, &e) ||
        e.version != dr->version || e.key_len != dr->key_len ||
        memcmp(e.key, dr->key, dr->key_len) != 0 ||
        (e.ttl_ms != 0 && e.ttl_ms <= mc_agent_now_ms()))
        return MC_ERR_NOT_FOUND; /* expired: the master frees it */
    len = mc_shm_alloc_len(e.size, (e.flags & MC_MASTER_PUT_NO_CHECKSUM) == 0);
    if (len > dr->max_len)
        return MC_ERR_TOO_LARGE;
    /* block-aligned, so that the record's whole blocks land in it straight from the device */
    if (posix_memalign(&buf, MC_DISK_BLOCK, len != 0 ? len : 1) != 0)
        return MC_ERR_NOMEM;
    *buf_p = buf;
    *len_p = len;
    k->drain_reads++;
    err = read_image(a, dr->offset, dr->version, buf, len, RD_DRAIN, done, ctx);
    if (err != 0) {
        k->drain_reads--;
        free(buf);
        *buf_p = NULL;
    }
    return err;
}

/* --- promotion: a record back into a DRAM block of ours --------------------------------------- */

struct dk_promo {
    struct mc_agent *a;
    agent_disk_copy_fn done;
    void *ctx;
    struct mc_seg *dst;
    struct mc_holdidx_entry e; /* what the DRAM block will hold; e.key points at key */
    char key[MC_DIR_KEY_MAX];
};

/* The record is in the block: indexed there (as a put's replica is), then answered. */
static void promo_finish(void *ctx)
{
    struct dk_promo *pr = ctx;
    struct agent_disk *k = pr->a->disk;

    pr->e.key = pr->key;
    (void)mc_holdidx_add(pr->dst->held, &pr->e, mc_agent_now_ms());
    if (k != NULL)
        k->st.promotions++;
    pr->done(pr->ctx, 0);
    free(pr);
}

static void promo_cancel(void *ctx)
{
    struct dk_promo *pr = ctx;

    pr->done(pr->ctx, MC_ERR_CANCELED);
    free(pr);
}

static void promo_read(void *ctx, int status)
{
    struct dk_promo *pr = ctx;

    if (status != 0) {
        pr->done(pr->ctx, status); /* the block holds nothing the master will list */
        free(pr);
        return;
    }
    /* the test seam: a window between the read and the answer (remove the key there) */
    if (!mc_fault_defer(&pr->a->fault, MC_FAULT_PROMOTE, promo_finish, promo_cancel, pr))
        promo_finish(pr);
}

int agent_disk_promote(struct mc_agent *a, const struct agent_disk_promote *p,
                       agent_disk_copy_fn done, void *ctx)
{
    struct mc_seg *dst = agent_seg(a, p->dst_seg);
    struct mc_holdidx_entry e;
    struct dk_promo *pr;
    uint64_t now = mc_agent_now_ms(), len;
    int err;

    if (a->disk == NULL || !mc_holdidx_find(a->disk_seg->held, p->src_offset, &e) ||
        e.version != p->version || e.key_len != p->key_len ||
        memcmp(e.key, p->key, p->key_len) != 0)
        return MC_ERR_NOT_FOUND;
    len = mc_shm_alloc_len(e.size, (e.flags & MC_MASTER_PUT_NO_CHECKSUM) == 0);
    if (dst == NULL || dst->kind != MC_SEG_DRAM || dst->base == NULL || dst->held == NULL ||
        p->dst_offset > dst->size || p->dst_len > dst->size - p->dst_offset ||
        len > p->dst_len)
        return MC_ERR_INVALID;
    if (e.ttl_ms != 0 && e.ttl_ms <= now)
        return MC_ERR_NOT_FOUND; /* expired: the master frees it */
    pr = calloc(1, sizeof(*pr));
    if (pr == NULL)
        return MC_ERR_NOMEM;
    *pr = (struct dk_promo){.a = a, .done = done, .ctx = ctx, .dst = dst};
    memcpy(pr->key, e.key, e.key_len);
    pr->e = (struct mc_holdidx_entry){.key_len = e.key_len, .offset = p->dst_offset,
                                      .alloc_len = p->dst_len, .size = e.size,
                                      .version = e.version, .flags = e.flags,
                                      .ttl_ms = e.ttl_ms != 0 ? e.ttl_ms - now : 0};
    /* straight into the block: it is no version's until the master hears our answer */
    a->disk->promo_reads++;
    err = read_image(a, p->src_offset, p->version, dst->base + p->dst_offset, len, RD_PROMO,
                     promo_read, pr);
    if (err != 0) {
        a->disk->promo_reads--;
        free(pr);
    }
    return err;
}

void agent_disk_unpromote(struct mc_agent *a, uint32_t dst_seg, uint64_t dst_offset,
                          uint64_t version)
{
    struct mc_seg *dst = agent_seg(a, dst_seg);

    if (dst != NULL && dst->held != NULL)
        (void)mc_holdidx_drop(dst->held, dst_offset, version, mc_agent_now_ms());
}

static int tier_write(void *impl, const struct mc_rio_write *w, mc_rio_write_fn done, void *ctx)
{
    struct mc_agent *a = impl;

    /* placement never puts a replica in a disk segment */
    return a->disk_below.ops->write(a->disk_below.impl, w, done, ctx);
}

/* Memory first: replicas elsewhere (in memory, anywhere) are read as before; ours on disk
 * when none of those could be started. */
static int tier_read(void *impl, const struct mc_master_get_result *g, uint32_t skip,
                     uint32_t tenant, uint64_t deadline_ms, uint8_t *arena, uint64_t arena_room,
                     mc_rio_read_fn done, mc_rio_wanted_fn wanted, void *ctx)
{
    struct mc_agent *a = impl;
    uint32_t mine = 0, others = 0, j;
    int err = MC_ERR_NOT_FOUND;

    for (j = 0; j < g->nrep; j++) {
        if (skip >> j & 1)
            continue;
        if (g->rep[j].seg == a->disk_seg_id)
            mine |= 1u << j;
        else if (g->rep[j].kind != MC_SEG_DISK)
            others |= 1u << j;
    }
    if (others != 0) {
        err = a->disk_below.ops->read(a->disk_below.impl, g, skip | mine, tenant, deadline_ms,
                                      arena, arena_room, done, wanted, ctx);
        if (err != MC_ERR_NOT_FOUND || mine == 0)
            return err;
    }
    for (j = 0; j < g->nrep; j++) {
        if (!(mine >> j & 1))
            continue;
        err = read_start(a, g, j, tenant, deadline_ms, done, ctx);
        if (err != MC_ERR_NOT_FOUND && err != MC_ERR_INVALID)
            return err;
    }
    /* replicas on other nodes' disks, or nothing: as before */
    return a->disk_below.ops->read(a->disk_below.impl, g, skip | mine, tenant, deadline_ms,
                                   arena, arena_room, done, wanted, ctx);
}

static uint64_t tier_lease_ttl_ms(void *impl)
{
    struct mc_agent *a = impl;

    return a->disk_below.ops->lease_ttl_ms(a->disk_below.impl);
}

static void tier_publish(void *impl, const struct mc_rio_publish *p)
{
    struct mc_agent *a = impl;

    if (a->disk_below.ops->publish != NULL)
        a->disk_below.ops->publish(a->disk_below.impl, p);
}

static const struct mc_rio_ops tier_ops = {
    .write = tier_write,
    .read = tier_read,
    .lease_ttl_ms = tier_lease_ttl_ms,
    .publish = tier_publish,
};

static const struct mc_rio_ops tier_ops_nopub = {
    .write = tier_write,
    .read = tier_read,
    .lease_ttl_ms = tier_lease_ttl_ms,
};

int agent_disk_rio_wrap(struct mc_agent *a)
{
    if (a->disk == NULL)
        return 0;
    for (uint32_t t = 0; t < a->ntenants; t++) {
        struct agent_tenant *ten = &a->ten[t];
        int err;

        if (ten->land_seg != NULL)
            continue;
        /* standalone: GETs of disk-resident objects land here, as a cluster's remote reads */
        err = mc_seg_dram_create("mc-landing", a->cfg.landing, false, a->cfg.prefault,
                                 &ten->land_seg);
        if (err == 0)
            err = mc_alloc_create(a->cfg.landing, MC_SHM_CHUNK / 16, &ten->land);
        if (err != 0) {
            mc_error("landing segment of %" PRIu64 " bytes: %s", a->cfg.landing,
                     mc_strerror(err));
            return err;
        }
        ten->land_idx = ten->seg != NULL ? 1 : 0;
    }
    a->disk_below = a->rio;
    a->rio = (struct mc_rio){.ops = a->rio.ops->publish != NULL ? &tier_ops : &tier_ops_nopub,
                             .impl = a};
    return 0;
}

/* --- the loop --------------------------------------------------------------------------------- */

static void on_disk_event(struct mc_loop_ev *ev, int res, uint32_t flags)
{
    struct agent_disk *k = (struct agent_disk *)((char *)ev - offsetof(struct agent_disk, ev));

    (void)res;
    (void)flags;
    k->polling = false;
    mc_disk_reap(k->d);
    if (!k->a->stopping && mc_loop_poll(&k->a->loop, mc_disk_fd(k->d), POLLIN, &k->ev) == 0)
        k->polling = true;
}

int agent_disk_loop_start(struct mc_agent *a)
{
    struct agent_disk *k = a->disk;
    int err;

    if (k == NULL)
        return 0;
    /* GETs' disk hits land in the landing segments: registered with the disk's ring, the
     * kernel pins their pages once, not at every read (docs/decisions.md) */
    for (uint32_t t = 0; t < a->ntenants; t++) {
        const struct mc_seg *ls = a->ten[t].land_seg;

        if (ls == NULL || ls->base == NULL)
            continue;
        err = mc_disk_register_region(k->d, ls->base, ls->size & ~(uint64_t)(MC_DISK_BLOCK - 1));
        if (err != 0)
            mc_warn("disk: registering the landing segment (%" PRIu64 " bytes) with io_uring: "
                    "%s (RLIMIT_MEMLOCK?); reads into it pin its pages each time",
                    ls->size, mc_strerror(err));
    }
    k->ev.fn = on_disk_event;
    err = mc_loop_poll(&a->loop, mc_disk_fd(k->d), POLLIN, &k->ev);
    if (err == 0)
        k->polling = true;
    return err;
}

bool agent_disk_turn(struct mc_agent *a)
{
    struct agent_disk *k = a->disk;

    if (k == NULL || mc_disk_pending(k->d) == 0)
        return false;
    return mc_disk_reap(k->d) > 0;
}

/* --- standalone: the in-process master's copies ------------------------------------------------ */

struct local_copy {
    struct mc_agent *a;
    uint64_t id;
    uint32_t dst_seg, dst_alloc;
};

static void local_copy_done(void *ctx, int status)
{
    struct local_copy *lc = ctx;
    struct mc_master *m = lc->a->master;

    if (m != NULL && !lc->a->disk->closing) {
        mc_master_copy_done(m, lc->id, status);
        /* the write is over (it completed, or never started): nothing lands any more */
        if (status != 0)
            (void)mc_master_fence_ack(m, lc->dst_seg, lc->dst_alloc, lc->id);
    }
    if (m != NULL && !lc->a->disk->closing)
        put_parked_retry(lc->a, 0); /* a DRAM block may be free now */
    free(lc);
}

void agent_disk_local_copies(struct mc_agent *a)
{
    struct mc_master_copy c[LOCAL_COPIES];
    size_t n, i;

    if (a->master == NULL)
        return;
    n = mc_master_copies_take(a->master, c, LOCAL_COPIES);
    for (i = 0; i < n; i++) {
        struct local_copy *lc = malloc(sizeof(*lc));
        struct agent_disk_copy cp = {
            .src_seg = c[i].src.seg, .src_offset = c[i].src.offset,
            .dst_offset = c[i].dst.offset, .dst_len = c[i].dst.len, .version = c[i].version,
            .key = c[i].key, .key_len = c[i].key_len,
        };
        int err = MC_ERR_NOMEM;

        if (lc != NULL) {
            *lc = (struct local_copy){.a = a, .id = c[i].id, .dst_seg = c[i].dst.seg,
                                      .dst_alloc = c[i].dst.alloc};
            if (c[i].dst.seg == a->disk_seg_id)
                err = agent_disk_copy(a, &cp, local_copy_done, lc);
            else if (c[i].src.seg == a->disk_seg_id)
                err = agent_disk_promote(a,
                                         &(struct agent_disk_promote){
                                             .src_offset = c[i].src.offset,
                                             .dst_seg = c[i].dst.seg,
                                             .dst_offset = c[i].dst.offset,
                                             .dst_len = c[i].dst.len,
                                             .version = c[i].version, .key = c[i].key,
                                             .key_len = c[i].key_len},
                                         local_copy_done, lc);
            else
                err = MC_ERR_INVALID;
        }
        if (err != 0) {
            if (a->disk != NULL && c[i].dst.seg == a->disk_seg_id)
                a->disk->st.offload_errors++;
            free(lc);
            mc_master_copy_done(a->master, c[i].id, err);
            (void)mc_master_fence_ack(a->master, c[i].dst.seg, c[i].dst.alloc, c[i].id);
        }
    }
}

/* --- start, stats, exit ------------------------------------------------------------------------ */

int agent_disk_create(struct mc_agent *a)
{
    const struct mc_agent_config *cfg = &a->cfg;
    struct mc_disk_cfg dc = {
        .path = cfg->disk, .size = cfg->disk_size, .engine = (enum mc_disk_engine)cfg->disk_engine,
        .depth = (unsigned)cfg->disk_depth, .chunk = (uint32_t)cfg->disk_chunk,
        .threads = (unsigned)(cfg->disk_depth < 8 ? cfg->disk_depth : 8),
    };
    struct agent_disk *k;
    int err;

    a->disk_seg_id = UINT32_MAX;
    if (cfg->disk == NULL)
        return 0;
    k = calloc(1, sizeof(*k));
    if (k == NULL)
        return MC_ERR_NOMEM;
    k->a = a;
    /* two agents on one file would each overwrite the other's records */
    k->lock_fd = open(cfg->disk, O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
    if (k->lock_fd < 0 || flock(k->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        err = k->lock_fd >= 0 && errno == EWOULDBLOCK ? MC_ERR_EXISTS : MC_ERR_IO;
        mc_error("disk %s: %s", cfg->disk,
                 err == MC_ERR_EXISTS ? "in use by another agent" : strerror(errno));
        if (k->lock_fd >= 0)
            close(k->lock_fd);
        free(k);
        return err;
    }
    err = mc_disk_open(&dc, &k->d);
    if (err != 0) {
        mc_error("disk %s: %s", cfg->disk, mc_strerror(err));
        close(k->lock_fd);
        free(k);
        return err;
    }
    err = mc_seg_disk_create(k->d, &a->disk_seg);
    if (err != 0) {
        mc_disk_close(k->d);
        close(k->lock_fd);
        free(k);
        return err;
    }
    a->disk = k;
    mc_seg_disk_on_forget(a->disk_seg, forgotten, k);
    mc_info("disk %s: %zu records found", cfg->disk, mc_holdidx_count(a->disk_seg->held));
    return 0;
}

int agent_disk_mount_local(struct mc_agent *a, struct mc_master *m)
{
    struct mc_seg *s = a->disk_seg;
    struct mc_master_seg_desc d;
    int err;

    if (s == NULL)
        return 0;
    d = (struct mc_master_seg_desc){.node = a->node, .kind = MC_SEG_DISK, .base = 0,
                                    .size = s->size,
                                    .flags = mc_seg_holds_any(s) ? MC_MASTER_SEG_F_RESTORING : 0};
    snprintf(d.tenant, sizeof(d.tenant), "%s", a->tcfg[0].name);
    err = mc_master_segment_mount(m, &d, &a->disk_seg_id);
    if (err != 0)
        mc_error("mounting the disk segment: %s", mc_strerror(err));
    return err;
}

json_t *agent_disk_stats_json(struct mc_agent *a)
{
    struct agent_disk *k = a->disk;
    struct mc_disk_stats ds;
    json_t *o;

    if (k == NULL)
        return NULL;
    mc_disk_get_stats(k->d, &ds);
    o = json_object();
    if (o == NULL)
        return NULL;
    json_object_set_new(o, "engine", json_string(mc_disk_engine(k->d)));
    json_object_set_new(o, "direct", json_boolean(mc_disk_is_direct(k->d)));
    json_object_set_new(o, "capacity", json_integer((json_int_t)ds.region));
    json_object_set_new(o, "used", json_integer((json_int_t)mc_holdidx_bytes(a->disk_seg->held)));
    json_object_set_new(o, "objects", json_integer((json_int_t)mc_holdidx_count(a->disk_seg->held)));
    json_object_set_new(o, "offloads", json_integer((json_int_t)k->st.offloads));
    json_object_set_new(o, "offload_errors", json_integer((json_int_t)k->st.offload_errors));
    json_object_set_new(o, "disk_hits", json_integer((json_int_t)k->st.disk_hits));
    json_object_set_new(o, "promotions", json_integer((json_int_t)k->st.promotions));
    json_object_set_new(o, "read_bytes", json_integer((json_int_t)ds.read_bytes));
    json_object_set_new(o, "write_bytes", json_integer((json_int_t)ds.write_bytes));
    json_object_set_new(o, "read_direct_bytes", json_integer((json_int_t)ds.read_direct_bytes));
    json_object_set_new(o, "read_direct_fixed", json_integer((json_int_t)ds.read_direct_fixed));
    json_object_set_new(o, "read_corrupt", json_integer((json_int_t)k->st.read_corrupt));
    json_object_set_new(o, "corrupt_dropped", json_integer((json_int_t)ds.scan_dropped));
    json_object_set_new(o, "found_at_open", json_integer((json_int_t)ds.scan_found));
    json_object_set_new(o, "erases", json_integer((json_int_t)k->st.erases));
    json_object_set_new(o, "removed_marks", json_integer((json_int_t)k->st.removed_marks));
    json_object_set_new(o, "erase_errors", json_integer((json_int_t)k->st.erase_errors));
    json_object_set_new(o, "peer_reads", json_integer((json_int_t)k->peer_reads));
    json_object_set_new(o, "peer_reads_max", json_integer((json_int_t)k->peer_reads_max));
    json_object_set_new(o, "promotion_reads", json_integer((json_int_t)k->promo_reads));
    json_object_set_new(o, "drain_reads", json_integer((json_int_t)k->drain_reads));
    json_object_set_new(o, "drain_records_read",
                        json_integer((json_int_t)k->st.drain_records_read));
    json_object_set_new(o, "read_timeouts", json_integer((json_int_t)k->st.read_timeouts));
    json_object_set_new(o, "put_waits", json_integer((json_int_t)a->st.put_waits));
    json_object_set_new(o, "peer_reads_busy", json_integer((json_int_t)k->st.peer_reads_busy));
    json_object_set_new(o, "pending", json_integer((json_int_t)mc_disk_pending(k->d)));
    return o;
}

void agent_disk_destroy(struct mc_agent *a)
{
    struct agent_disk *k = a->disk;

    if (k == NULL)
        return;
    k->closing = true;
    if (k->polling)
        (void)mc_loop_cancel(&a->loop, &k->ev);
    mc_disk_drain(k->d); /* every op's callback runs (and frees it) */
    /* failed erases waiting for their next try: not with the store, never tried again */
    for (struct dk_erase **pp = &k->erasing; *pp != NULL;) {
        struct dk_erase *e = *pp;

        if (e->retry_at == 0) {
            pp = &e->next; /* deferred by the fault seam: its cleanup drops it */
            continue;
        }
        *pp = e->next;
        free(e->mark);
        free(e);
    }
    while (k->waiting != NULL) {
        struct dk_write *w = k->waiting;

        k->waiting = w->next;
        write_mark_go(k, w); /* closing: its mark is forgotten */
        free(w);
    }
    mc_seg_destroy(a->disk_seg);
    a->disk_seg = NULL;
    mc_disk_close(k->d);
    close(k->lock_fd);
    free(k);
    a->disk = NULL;
}
