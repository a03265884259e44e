/*
 * The disk tier's store (disk.h): the file, its superblock, the scan at open, and record
 * writes and reads cut into staging-buffer chunks for the I/O engine.
 */
#include "daemon/agent/disk.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "common/err.h"
#include "daemon/common/log.h"
#include "shm/ring.h" /* the object image's layout (mc_disk_read_image) */

/* a staging buffer and the one request it carries */
struct slot {
    uint8_t *buf;
    struct mc_disk_io_req req;
    struct mc_disk_op *op;
    uint64_t pos;        /* payload offset of the chunk, or HDR_POS */
    uint32_t n;          /* payload bytes in it */
    bool direct;         /* the I/O lands in the op's dst, not in buf */
    struct slot *next_free;
};
#define HDR_POS UINT64_MAX
/* the largest read landing straight in the reader's memory (with a larger chunk: chunk) */
#define DIRECT_MAX (16u << 20)

/* registered memory reads may land in (mc_disk_register_region), in pieces of at most
 * 1 GiB (the kernel's limit per fixed buffer), each its own fixed buffer after the slots' */
#define PIECE_MAX (1u << 30)
#define PIECES_MAX 64u
struct piece {
    uint8_t *base;
    size_t len;
};

/* a write's phases (struct mc_disk_op.phase); W_MARK: mc_disk_mark_removed, a header read
 * then (when it is the record's) written back in state removed from the same slot */
enum { W_PENDING, W_BODY, W_COMMIT, W_ERASE, W_MARK };

struct mc_disk {
    int fd;
    bool direct;
    uint64_t region;
    uint32_t chunk;
    struct mc_disk_sb sb;
    struct mc_disk_io *io;
    int uring_err;
    struct slot *slots;
    unsigned nslots;
    uint8_t *staging;
    size_t staging_len;
    struct slot *free_slots;
    struct piece pieces[PIECES_MAX];          /* fixed buffers nslots.. (registered) */
    unsigned npieces;
    struct mc_disk_op *wait_head, *wait_tail; /* ops with units to issue */
    unsigned ops;                             /* ops not yet completed */
    uint64_t seq;                             /* the last sequence number written */
    struct mc_disk_scan scan;
    struct mc_disk_stats st;
    /* the scan at open */
    uint64_t scan_next, scan_end;
    int scan_err;
};

#define slot_of(r) ((struct slot *)((char *)(r) - offsetof(struct slot, req)))

static uint64_t file_off(uint64_t region_off)
{
    return MC_DISK_BLOCK + region_off;
}

/* ---- staging slots and the op queue ---- */

static struct slot *slot_get(struct mc_disk *d)
{
    struct slot *s = d->free_slots;

    if (s != NULL)
        d->free_slots = s->next_free;
    return s;
}

static void slot_put(struct mc_disk *d, struct slot *s)
{
    s->op = NULL;
    s->next_free = d->free_slots;
    d->free_slots = s;
}

static void wait_push(struct mc_disk *d, struct mc_disk_op *op)
{
    op->next = NULL;
    op->queued = true;
    if (d->wait_tail != NULL)
        d->wait_tail->next = op;
    else
        d->wait_head = op;
    d->wait_tail = op;
}

static void wait_pop(struct mc_disk *d)
{
    struct mc_disk_op *op = d->wait_head;

    d->wait_head = op->next;
    if (d->wait_head == NULL)
        d->wait_tail = NULL;
    op->next = NULL;
    op->queued = false;
}

static void io_done(struct mc_disk_io_req *r, int res);

/* The fixed buffer [p, p + len) lies in, or -1: a registered piece's. */
static int piece_of(const struct mc_disk *d, const uint8_t *p, size_t len)
{
    for (unsigned i = 0; i < d->npieces; i++) {
        const struct piece *pc = &d->pieces[i];

        if (p >= pc->base && len <= pc->len && (size_t)(p - pc->base) <= pc->len - len)
            return (int)(d->nslots + i);
    }
    return -1;
}

/* The staging slots and the pieces registered so far, as the engine's fixed buffers. */
static int register_all(struct mc_disk *d)
{
    struct iovec *iov = calloc(d->nslots + d->npieces, sizeof(*iov));
    int err;

    if (iov == NULL)
        return MC_ERR_NOMEM;
    for (unsigned i = 0; i < d->nslots; i++)
        iov[i] = (struct iovec){.iov_base = d->slots[i].buf, .iov_len = d->chunk};
    for (unsigned i = 0; i < d->npieces; i++)
        iov[d->nslots + i] = (struct iovec){.iov_base = d->pieces[i].base,
                                            .iov_len = d->pieces[i].len};
    err = mc_disk_io_register(d->io, iov, d->nslots + d->npieces);
    free(iov);
    return err;
}

/* direct: the memory the read lands in instead of the slot's buffer (NULL: the buffer) */
static void slot_issue(struct mc_disk *d, struct slot *s, struct mc_disk_op *op, uint64_t pos,
                       uint32_t n, bool write, uint8_t *direct)
{
    s->op = op;
    s->pos = pos;
    s->n = n;
    s->direct = direct != NULL;
    s->req.done = io_done;
    s->req.buf = direct != NULL ? direct : s->buf;
    s->req.write = write;
    if (pos == HDR_POS) {
        s->req.off = file_off(op->off);
        s->req.len = MC_DISK_BLOCK;
    } else {
        s->req.off = file_off(op->off) + MC_DISK_BLOCK + pos;
        s->req.len = (n + MC_DISK_BLOCK - 1) & ~(MC_DISK_BLOCK - 1);
    }
    s->req.buf_index = direct != NULL ? piece_of(d, direct, s->req.len)
                                      : (int)(s - d->slots);
    if (direct != NULL && s->req.buf_index >= 0 && mc_disk_io_fixed(d->io))
        d->st.read_direct_fixed += !write;
    op->inflight++;
    mc_disk_io_submit(d->io, &s->req);
}

/* every unit of op's current phase has been issued (or an error stops it) */
static bool op_issued(const struct mc_disk_op *op)
{
    if (op->err != 0)
        return true;
    if (op->write)
        return op->phase == W_BODY ? op->issued == op->size : op->header_done;
    return op->header_done && op->issued == op->size;
}

/* Issue one unit of the op at the head of the queue into slot s. */
static void issue_one(struct mc_disk *d, struct mc_disk_op *op, struct slot *s)
{
    if (op->write && op->phase != W_BODY) {
        struct mc_disk_hdr h = op->h;

        h.key = op->key;
        h.state = op->phase == W_PENDING  ? MC_DISK_REC_PENDING
                  : op->phase == W_ERASE ? MC_DISK_REC_ERASED
                                         : MC_DISK_REC_COMMITTED;
        /* the encode cannot fail: the op's start checked the key and the lengths */
        (void)mc_disk_hdr_encode(&h, d->sb.secret, s->buf);
        op->header_done = true;
        slot_issue(d, s, op, HDR_POS, 0, true, NULL);
    } else if (!op->write && !op->header_done) {
        op->header_done = true;
        slot_issue(d, s, op, HDR_POS, 0, false, NULL);
    } else {
        uint64_t left = op->size - op->issued;
        uint32_t n = left < d->chunk ? (uint32_t)left : d->chunk;

        if (!op->write && left >= MC_DISK_BLOCK &&
            (uintptr_t)(op->dst + op->issued) % MC_DISK_BLOCK == 0) {
            /* whole blocks into aligned memory: straight there, in I/Os of up to
             * DIRECT_MAX (no buffer bounds them; the device rewards large requests). The
             * slot carries the request and counts against the depth; its buffer stays
             * unused. */
            uint32_t most = d->chunk > DIRECT_MAX ? d->chunk : DIRECT_MAX;

            n = (uint32_t)(left < most ? left : most) & ~(MC_DISK_BLOCK - 1);
            slot_issue(d, s, op, op->issued, n, false, op->dst + op->issued);
            op->issued += n;
            return;
        }
        if (op->write) {
            uint32_t padded = (n + MC_DISK_BLOCK - 1) & ~(MC_DISK_BLOCK - 1);

            memcpy(s->buf, op->src + op->issued, n);
            memset(s->buf + n, 0, padded - n);
        }
        slot_issue(d, s, op, op->issued, n, op->write, NULL);
        op->issued += n;
    }
}

static void op_complete(struct mc_disk *d, struct mc_disk_op *op, int res)
{
    d->ops--;
    if (op->trailer_owned)
        free(op->trailer);
    op->trailer = NULL;
    op->trailer_owned = false;
    if (op->phase == W_MARK) {
        if (res == 0 && op->write)
            d->st.marks++;
        else if (res != 0 && op->write)
            d->st.write_errors++;
        else if (res != 0)
            d->st.read_errors++;
    } else if (op->write && op->phase == W_ERASE) {
        if (res == 0)
            d->st.erases++;
        else
            d->st.write_errors++;
    } else if (op->write) {
        if (res == 0)
            d->st.writes++;
        else
            d->st.write_errors++;
    } else {
        if (res == 0)
            d->st.reads++;
        else if (res == MC_ERR_CORRUPT)
            d->st.read_corrupt++;
        else
            d->st.read_errors++;
    }
    op->done(op, res);
}

static void pump(struct mc_disk *d)
{
    while (d->wait_head != NULL) {
        struct mc_disk_op *op = d->wait_head;
        struct slot *s;

        if (op_issued(op)) {
            wait_pop(d);
            if (op->inflight == 0)
                op_complete(d, op, op->err);
            continue;
        }
        s = slot_get(d);
        if (s == NULL)
            break;
        issue_one(d, op, s);
        if (op_issued(op))
            wait_pop(d);
    }
    mc_disk_io_flush(d->io);
}

/* A read's bytes are all in: check them against the record's trailer (format 2) or its
 * XXH3 (format 1); an image gets its padding, and its trailer where the record had none. */
static int read_check(struct mc_disk_op *op)
{
    if (op->trailer != NULL) {
        if (!mc_disk_trailer_check(op->dst, op->size, op->trailer))
            return MC_ERR_CORRUPT;
    } else if (mc_disk_payload_hash(op->dst, op->size) != op->h.payload_xxh3) {
        return MC_ERR_CORRUPT;
    } else if (op->image) {
        mc_disk_trailer_make(op->dst, op->size, op->dst + mc_shm_trailer_off(op->size));
    }
    if (op->image)
        memset(op->dst + op->size, 0, mc_shm_trailer_off(op->size) - op->size);
    return 0;
}

/* the last unit of op finished: the next phase, or the end */
static void op_settle(struct mc_disk *d, struct mc_disk_op *op)
{
    if (op->inflight > 0 || !op_issued(op) || op->queued)
        return; /* more to come, or still queued */
    if (op->err == 0 && op->write && op->phase != W_COMMIT && op->phase != W_ERASE &&
        op->phase != W_MARK) {
        /* the pending header is durable (O_DSYNC): the payload may overwrite what an older
         * record left; the payload is durable: the committed header makes it visible */
        op->phase = op->phase == W_PENDING && op->size > 0 ? W_BODY : W_COMMIT;
        op->header_done = false;
        wait_push(d, op);
        return;
    }
    if (op->err == 0 && !op->write && op->phase != W_MARK)
        op->err = read_check(op);
    op_complete(d, op, op->err);
}

/* a format-2 header read: its trailer kept for the check (an image's goes where the image
 * has it, past the payload: no read lands there) */
static bool trailer_keep(struct mc_disk_op *op, const struct mc_disk_hdr *h)
{
    uint64_t len = mc_disk_trailer_len(op->size);

    if (op->image) {
        op->trailer = op->dst + mc_shm_trailer_off(op->size);
    } else {
        op->trailer = malloc(len);
        if (op->trailer == NULL)
            return false;
        op->trailer_owned = true;
    }
    memcpy(op->trailer, h->trailer, len);
    return true;
}

/* A mark's header read (mc_disk_mark_removed) ended well: true when the block is the
 * record's, committed, and now goes back in state removed from the same slot. */
static bool mark_rewrite(struct mc_disk *d, struct slot *s, struct mc_disk_op *op)
{
    struct mc_disk_hdr h;

    if (mc_disk_hdr_decode(s->buf, MC_DISK_BLOCK, d->sb.secret, &h) != 0 ||
        h.state != MC_DISK_REC_COMMITTED || h.key_len != op->h.key_len ||
        memcmp(h.key, op->key, h.key_len) != 0 || h.version != op->version ||
        h.size != op->h.size)
        return false; /* erased, marked or reused already: nothing of it to mark */
    if (mc_disk_hdr_restate(s->buf, d->sb.secret, MC_DISK_REC_REMOVED) != 0)
        return false;
    op->write = true;
    slot_issue(d, s, op, HDR_POS, 0, true, NULL);
    mc_disk_io_flush(d->io);
    return true;
}

static void io_done(struct mc_disk_io_req *r, int res)
{
    struct slot *s = slot_of(r);
    struct mc_disk_op *op = s->op;
    struct mc_disk *d = op->d;

    op->inflight--;
    if (res == 0 && op->phase == W_MARK && !r->write) {
        d->st.read_bytes += r->len;
        if (mark_rewrite(d, s, op))
            return; /* the slot goes on with the write */
        slot_put(d, s);
        op_settle(d, op);
        return;
    }
    if (res != 0) {
        if (op->err == 0)
            op->err = res;
    } else if (r->write) {
        d->st.write_bytes += r->len;
    } else {
        d->st.read_bytes += r->len;
        if (s->direct)
            d->st.read_direct_bytes += r->len;
        if (s->pos == HDR_POS) {
            struct mc_disk_hdr h;

            if (mc_disk_hdr_decode(s->buf, MC_DISK_BLOCK, d->sb.secret, &h) != 0 ||
                (h.state != MC_DISK_REC_COMMITTED && h.state != MC_DISK_REC_REMOVED) ||
                h.key_len != op->h.key_len || memcmp(h.key, op->key, h.key_len) != 0 ||
                h.version != op->version || h.size != op->size) {
                if (op->err == 0)
                    op->err = MC_ERR_CORRUPT;
            } else {
                op->h.payload_xxh3 = h.payload_xxh3;
                if (h.trailer != NULL && !trailer_keep(op, &h) && op->err == 0)
                    op->err = MC_ERR_NOMEM;
            }
        } else if (op->err == 0 && !s->direct) {
            memcpy(op->dst + s->pos, s->buf, s->n);
        }
    }
    slot_put(d, s);
    op_settle(d, op);
}

/* ---- ops ---- */

static int op_start(struct mc_disk *d, struct mc_disk_op *op, uint64_t off, uint64_t size,
                    uint32_t key_len)
{
    uint64_t len = mc_disk_rec_len(size);

    if (len == 0 || off % MC_DISK_BLOCK != 0 || off > d->region || len > d->region - off ||
        key_len == 0 || key_len > MC_DISK_KEY_MAX)
        return MC_ERR_INVALID;
    op->d = d;
    op->next = NULL;
    op->queued = false;
    op->off = off;
    op->size = size;
    op->issued = 0;
    op->inflight = 0;
    op->err = 0;
    op->header_done = false;
    op->phase = W_PENDING;
    op->image = false;
    op->trailer = NULL;
    op->trailer_owned = false;
    d->ops++;
    return 0;
}

static int write_op(struct mc_disk *d, struct mc_disk_op *op, uint64_t off, const void *key,
                    uint32_t key_len, uint64_t version, uint32_t flags, uint64_t expire_ms,
                    const void *src, uint64_t size, uint64_t payload_xxh3,
                    const uint8_t *trailer);

int mc_disk_write(struct mc_disk *d, struct mc_disk_op *op, uint64_t off, const void *key,
                  uint32_t key_len, uint64_t version, uint32_t flags, uint64_t expire_ms,
                  const void *src, uint64_t size)
{
    return mc_disk_write_hashed(d, op, off, key, key_len, version, flags, expire_ms, src, size,
                                mc_disk_payload_hash(src, size));
}

int mc_disk_write_hashed(struct mc_disk *d, struct mc_disk_op *op, uint64_t off,
                         const void *key, uint32_t key_len, uint64_t version, uint32_t flags,
                         uint64_t expire_ms, const void *src, uint64_t size,
                         uint64_t payload_xxh3)
{
    return write_op(d, op, off, key, key_len, version, flags, expire_ms, src, size,
                    payload_xxh3, NULL);
}

static int write_op(struct mc_disk *d, struct mc_disk_op *op, uint64_t off, const void *key,
                    uint32_t key_len, uint64_t version, uint32_t flags, uint64_t expire_ms,
                    const void *src, uint64_t size, uint64_t payload_xxh3,
                    const uint8_t *trailer)
{
    int err = op_start(d, op, off, size, key_len);

    if (err != 0)
        return err;
    op->write = true;
    op->key = key;
    op->src = src;
    op->dst = NULL;
    op->version = version;
    op->h = (struct mc_disk_hdr){
        .seq = ++d->seq,
        .version = version,
        .size = size,
        .alloc_len = mc_disk_rec_len(size),
        .flags = flags,
        .expire_ms = expire_ms,
        .payload_xxh3 = payload_xxh3,
        .key_len = key_len,
        .trailer = trailer,
    };
    wait_push(d, op);
    pump(d);
    return 0;
}

int mc_disk_write_image(struct mc_disk *d, struct mc_disk_op *op, uint64_t off,
                        const void *key, uint32_t key_len, uint64_t version, uint32_t flags,
                        uint64_t expire_ms, const void *src, uint64_t size,
                        const uint8_t *trailer)
{
    uint64_t last;

    /* checked here: the header's encode, later, cannot fail */
    if (trailer == NULL || !mc_disk_trailer_fits(size, key_len) ||
        !mc_disk_trailer_whole(trailer, size))
        return MC_ERR_INVALID;
    memcpy(&last, trailer + mc_disk_trailer_len(size) - 8, 8);
    return write_op(d, op, off, key, key_len, version, flags, expire_ms, src, size, last,
                    trailer);
}

int mc_disk_erase(struct mc_disk *d, struct mc_disk_op *op, uint64_t off, uint64_t alloc_len)
{
    static const uint8_t tomb_key[1] = {'-'};
    uint64_t size = alloc_len - MC_DISK_BLOCK;
    int err;

    if (alloc_len < MC_DISK_BLOCK || alloc_len % MC_DISK_BLOCK != 0)
        return MC_ERR_INVALID;
    err = op_start(d, op, off, size, 1);
    if (err != 0)
        return err;
    op->write = true;
    op->phase = W_ERASE;
    op->key = tomb_key;
    op->src = NULL;
    op->dst = NULL;
    op->version = 0;
    op->h = (struct mc_disk_hdr){
        .seq = ++d->seq,
        .size = size,
        .alloc_len = alloc_len,
        .key_len = 1,
    };
    wait_push(d, op);
    pump(d);
    return 0;
}

int mc_disk_mark_removed(struct mc_disk *d, struct mc_disk_op *op, uint64_t off,
                         const void *key, uint32_t key_len, uint64_t version, uint64_t size)
{
    int err = op_start(d, op, off, size, key_len);

    if (err != 0)
        return err;
    /* a read of the header alone (size 0 issues no payload), then the write from its slot */
    op->size = 0;
    op->write = false;
    op->phase = W_MARK;
    op->key = key;
    op->src = NULL;
    op->dst = NULL;
    op->version = version;
    op->h = (struct mc_disk_hdr){.key_len = key_len, .size = size};
    wait_push(d, op);
    pump(d);
    return 0;
}

static int read_op(struct mc_disk *d, struct mc_disk_op *op, uint64_t off, const void *key,
                   uint32_t key_len, uint64_t version, void *dst, uint64_t size, bool image)
{
    int err = op_start(d, op, off, size, key_len);

    if (err != 0)
        return err;
    op->write = false;
    op->image = image;
    op->key = key;
    op->src = NULL;
    op->dst = dst;
    op->version = version;
    op->h = (struct mc_disk_hdr){.key_len = key_len};
    wait_push(d, op);
    pump(d);
    return 0;
}

int mc_disk_read(struct mc_disk *d, struct mc_disk_op *op, uint64_t off, const void *key,
                 uint32_t key_len, uint64_t version, void *dst, uint64_t size)
{
    return read_op(d, op, off, key, key_len, version, dst, size, false);
}

int mc_disk_read_image(struct mc_disk *d, struct mc_disk_op *op, uint64_t off,
                       const void *key, uint32_t key_len, uint64_t version, void *dst,
                       uint64_t size)
{
    return read_op(d, op, off, key, key_len, version, dst, size, true);
}

int mc_disk_fd(const struct mc_disk *d)
{
    return mc_disk_io_fd(d->io);
}

unsigned mc_disk_reap(struct mc_disk *d)
{
    unsigned n = mc_disk_io_reap(d->io);

    pump(d);
    return n;
}

void mc_disk_wait(struct mc_disk *d)
{
    pump(d);
    if (mc_disk_io_pending(d->io) > 0)
        mc_disk_io_wait(d->io);
    mc_disk_reap(d);
}

void mc_disk_drain(struct mc_disk *d)
{
    while (d->ops > 0 || mc_disk_io_pending(d->io) > 0) {
        pump(d);
        if (mc_disk_io_pending(d->io) == 0 && d->wait_head == NULL)
            break; /* nothing can move: an op without units (cannot happen) */
        mc_disk_io_wait(d->io);
        mc_disk_reap(d);
    }
}

unsigned mc_disk_pending(const struct mc_disk *d)
{
    return d->ops;
}

/* ---- the scan at open ---- */

static void scan_done(struct mc_disk_io_req *r, int res)
{
    struct slot *s = slot_of(r);
    struct mc_disk *d = (struct mc_disk *)s->op; /* the scan's slots carry the store */
    uint64_t base = r->off - MC_DISK_BLOCK;

    if (res != 0 && d->scan_err == 0)
        d->scan_err = res;
    if (res == 0) {
        d->st.read_bytes += r->len;
        for (uint32_t o = 0; o < r->len && d->scan_err == 0; o += MC_DISK_BLOCK)
            d->scan_err = mc_disk_scan_block(&d->scan, base + o, s->buf + o);
    }
    s->op = NULL;
    s->next_free = d->free_slots;
    d->free_slots = s;
}

static int scan(struct mc_disk *d, uint64_t scan_len)
{
    long kept;

    mc_disk_scan_init(&d->scan, d->sb.secret, scan_len);
    d->scan_next = 0;
    d->scan_end = scan_len;
    while (d->scan_err == 0 && (d->scan_next < d->scan_end || mc_disk_io_pending(d->io) > 0)) {
        struct slot *s;

        while (d->scan_next < d->scan_end && (s = slot_get(d)) != NULL) {
            uint64_t left = d->scan_end - d->scan_next;

            s->op = (struct mc_disk_op *)(void *)d;
            s->req.done = scan_done;
            s->req.buf = s->buf;
            s->req.buf_index = (int)(s - d->slots);
            s->req.write = false;
            s->req.off = file_off(d->scan_next);
            s->req.len = left < d->chunk ? (uint32_t)left : d->chunk;
            d->scan_next += s->req.len;
            mc_disk_io_submit(d->io, &s->req);
        }
        mc_disk_io_wait(d->io);
        mc_disk_io_reap(d->io);
    }
    /* what an error left in flight finishes before the slots are used again */
    while (mc_disk_io_pending(d->io) > 0) {
        mc_disk_io_wait(d->io);
        mc_disk_io_reap(d->io);
    }
    if (d->scan_err != 0) {
        mc_error("disk: scan: %s", mc_strerror(d->scan_err));
        return d->scan_err;
    }
    kept = mc_disk_scan_resolve(&d->scan);
    if (kept < 0)
        return (int)kept;
    d->seq = d->scan.max_seq;
    d->st.scan_found = (uint64_t)kept;
    d->st.scan_dropped = d->scan.n - (uint64_t)kept + d->scan.bad_headers + d->scan.out_of_range;
    /* the kept records first, by offset: mc_disk_found hands out that prefix */
    {
        size_t w = 0;

        for (size_t i = 0; i < d->scan.n; i++)
            if (!d->scan.recs[i].dropped)
                d->scan.recs[w++] = d->scan.recs[i];
        d->scan.n = w;
    }
    if (d->st.scan_found > 0 || d->st.scan_dropped > 0)
        mc_info("disk: scan kept %" PRIu64 " records, dropped %" PRIu64,
                d->st.scan_found, d->st.scan_dropped);
    return 0;
}

size_t mc_disk_found(const struct mc_disk *d, const struct mc_disk_rec **recs_p)
{
    *recs_p = d->scan.recs;
    return d->scan.n;
}

void mc_disk_forget(struct mc_disk *d, uint64_t off)
{
    size_t lo = 0, hi = d->scan.n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (d->scan.recs[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < d->scan.n && d->scan.recs[lo].off == off)
        d->scan.recs[lo].dropped = true;
}

/* ---- open and close ---- */

static int open_file(const struct mc_disk_cfg *cfg, struct mc_disk *d, bool *created_p)
{
    int flags = O_RDWR | O_CLOEXEC | O_DSYNC;
    int fd = -1, err;

    *created_p = false;
    if (!cfg->no_direct) {
        fd = open(cfg->path, flags | O_DIRECT);
        if (fd < 0 && errno == ENOENT) {
            fd = open(cfg->path, flags | O_DIRECT | O_CREAT | O_EXCL, 0600);
            *created_p = fd >= 0;
        }
        if (fd >= 0) {
            d->direct = true;
        } else if (errno != EINVAL) {
            err = mc_err_from_errno(errno);
            mc_error("disk: open %s: %s", cfg->path, strerror(errno));
            return err;
        } else {
            /* EINVAL: the file system refuses O_DIRECT (tmpfs); a file O_CREAT made before
             * the refusal stays, and is opened again below */
            mc_info("disk: %s: no O_DIRECT on this file system: buffered I/O", cfg->path);
        }
    }
    if (fd < 0) {
        fd = open(cfg->path, flags);
        if (fd < 0 && errno == ENOENT) {
            fd = open(cfg->path, flags | O_CREAT | O_EXCL, 0600);
            *created_p = fd >= 0;
        }
        if (fd < 0) {
            err = mc_err_from_errno(errno);
            mc_error("disk: open %s: %s", cfg->path, strerror(errno));
            return err;
        }
    }
    d->fd = fd;
    return 0;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

/* a fresh superblock over [0, bytes) */
static int init_file(struct mc_disk *d, uint64_t bytes, bool is_blk, uint8_t *block)
{
    ssize_t n;
    size_t got = 0;

    if (!is_blk) {
        int rc = fallocate(d->fd, 0, 0, (off_t)bytes);

        if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS))
            rc = ftruncate(d->fd, (off_t)bytes);
        if (rc != 0) {
            int err = errno == ENOSPC ? MC_ERR_NO_SPACE : mc_err_from_errno(errno);

            mc_error("disk: preallocating %" PRIu64 " bytes: %s", bytes, strerror(errno));
            return err;
        }
    }
    d->sb.region = (bytes - MC_DISK_BLOCK) & ~(uint64_t)(MC_DISK_BLOCK - 1);
    while (got < MC_DISK_SECRET_LEN) {
        n = getrandom(d->sb.secret + got, MC_DISK_SECRET_LEN - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return mc_err_from_errno(errno);
        }
        got += (size_t)n;
    }
    mc_disk_sb_encode(&d->sb, block);
    if (pwrite(d->fd, block, MC_DISK_BLOCK, 0) != (ssize_t)MC_DISK_BLOCK) {
        mc_error("disk: writing the superblock: %s", strerror(errno));
        return MC_ERR_IO;
    }
    mc_info("disk: new disk file, %" PRIu64 " bytes of records", d->sb.region);
    return 0;
}

/* the device's or file's size, the superblock read or made; *scan_len_p: how much of the
 * region exists in the file (a truncated file scans what is left, then grows back) */
static int setup(const struct mc_disk_cfg *cfg, struct mc_disk *d, bool created,
                 uint64_t *scan_len_p)
{
    struct stat st;
    uint64_t bytes;
    uint8_t *block;
    bool is_blk;
    int err = 0;

    if (fstat(d->fd, &st) != 0)
        return mc_err_from_errno(errno);
    is_blk = S_ISBLK(st.st_mode);
    if (is_blk) {
        if (ioctl(d->fd, BLKGETSIZE64, &bytes) != 0)
            return mc_err_from_errno(errno);
    } else if (S_ISREG(st.st_mode)) {
        bytes = (uint64_t)st.st_size;
    } else {
        mc_error("disk: %s is neither a file nor a block device", cfg->path);
        return MC_ERR_INVALID;
    }
    if (posix_memalign((void **)&block, MC_DISK_BLOCK, MC_DISK_BLOCK) != 0)
        return MC_ERR_NOMEM;
    memset(block, 0, MC_DISK_BLOCK);
    if (!created && bytes >= MC_DISK_BLOCK &&
        pread(d->fd, block, MC_DISK_BLOCK, 0) != (ssize_t)MC_DISK_BLOCK) {
        mc_error("disk: reading the superblock of %s: %s", cfg->path, strerror(errno));
        err = MC_ERR_IO;
        goto out;
    }
    if (!created && bytes > 0 && mc_disk_sb_decode(block, MC_DISK_BLOCK, &d->sb) == 0) {
        if (cfg->size != 0 && cfg->size != MC_DISK_BLOCK + d->sb.region)
            mc_info("disk: %s keeps its size of %" PRIu64 " bytes (disk_size ignored)",
                    cfg->path, MC_DISK_BLOCK + d->sb.region);
        if (is_blk && bytes < MC_DISK_BLOCK + d->sb.region) {
            /* a device cannot grow back: its superblock came from a larger one */
            mc_error("disk: %s holds %" PRIu64 " bytes, its superblock says %" PRIu64,
                     cfg->path, bytes, MC_DISK_BLOCK + d->sb.region);
            err = MC_ERR_INVALID;
            goto out;
        }
        *scan_len_p = bytes >= MC_DISK_BLOCK + d->sb.region
                          ? d->sb.region
                          : (bytes - MC_DISK_BLOCK) & ~(uint64_t)(MC_DISK_BLOCK - 1);
        if (!is_blk && bytes < MC_DISK_BLOCK + d->sb.region &&
            ftruncate(d->fd, (off_t)(MC_DISK_BLOCK + d->sb.region)) != 0) {
            err = mc_err_from_errno(errno);
            goto out;
        }
        goto out;
    }
    if (!created && bytes >= MC_DISK_BLOCK && !all_zero(block, MC_DISK_BLOCK)) {
        mc_error("disk: %s is not an mcstore disk file; it is left alone (remove it, or "
                 "give another path)", cfg->path);
        err = MC_ERR_INVALID;
        goto out;
    }
    if (!is_blk)
        bytes = bytes > cfg->size ? bytes : cfg->size;
    if (bytes < 2 * MC_DISK_BLOCK || bytes > UINT64_MAX / 4) {
        mc_error("disk: %s: size %" PRIu64 " out of range (at least %u bytes)", cfg->path,
                 bytes, 2 * MC_DISK_BLOCK);
        err = MC_ERR_INVALID;
        goto out;
    }
    err = init_file(d, bytes, is_blk, block);
    *scan_len_p = 0; /* a new file holds nothing */
out:
    free(block);
    return err;
}

int mc_disk_open(const struct mc_disk_cfg *cfg, struct mc_disk **d_p)
{
    struct mc_disk_io_cfg icfg;
    struct iovec *iov = NULL;
    struct mc_disk *d;
    uint64_t scan_len = 0;
    bool created;
    int err;

    if (cfg->path == NULL || cfg->depth == 0 || cfg->threads == 0 || cfg->chunk == 0 ||
        cfg->chunk % MC_DISK_BLOCK != 0 || cfg->depth > 4096)
        return MC_ERR_INVALID;
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        return MC_ERR_NOMEM;
    d->fd = -1;
    d->chunk = cfg->chunk;
    err = open_file(cfg, d, &created);
    if (err != 0)
        goto err_free;
    err = setup(cfg, d, created, &scan_len);
    if (err != 0)
        goto err_close;
    d->region = d->sb.region;
    d->st.region = d->region;

    d->nslots = cfg->depth;
    d->staging_len = (size_t)d->nslots * d->chunk;
    d->slots = calloc(d->nslots, sizeof(*d->slots));
    iov = calloc(d->nslots, sizeof(*iov));
    if (d->slots == NULL || iov == NULL ||
        posix_memalign((void **)&d->staging, MC_DISK_BLOCK, d->staging_len) != 0) {
        d->staging = NULL;
        err = MC_ERR_NOMEM;
        goto err_close;
    }
    /* faulted in now: the first I/O into each page would pay for it otherwise */
    memset(d->staging, 0, d->staging_len);
    for (unsigned i = d->nslots; i-- > 0;) {
        d->slots[i].buf = d->staging + (size_t)i * d->chunk;
        iov[i] = (struct iovec){.iov_base = d->slots[i].buf, .iov_len = d->chunk};
        slot_put(d, &d->slots[i]);
    }
    icfg = (struct mc_disk_io_cfg){
        .fd = d->fd,
        .direct = d->direct,
        .want = cfg->engine,
        .depth = cfg->depth,
        .threads = cfg->threads,
        .bufs = iov,
        .nbufs = d->nslots,
    };
    if (cfg->engine == MC_DISK_ENGINE_URING && !d->direct) {
        mc_error("disk: the io_uring engine needs O_DIRECT, which %s refuses", cfg->path);
        err = MC_ERR_INVALID;
        goto err_close;
    }
    err = mc_disk_io_create(&icfg, &d->io, &d->uring_err);
    free(iov);
    iov = NULL;
    if (err != 0)
        goto err_close;
    err = scan(d, scan_len);
    if (err != 0)
        goto err_close;
    mc_info("disk: %s: %" PRIu64 " bytes, engine %s%s", cfg->path, d->region,
            mc_disk_io_engine(d->io), d->direct ? ", O_DIRECT" : "");
    *d_p = d;
    return 0;

err_close:
    free(iov);
    mc_disk_close(d);
    if (created)
        unlink(cfg->path);
    return err;
err_free:
    free(d);
    return err;
}

int mc_disk_register_region(struct mc_disk *d, void *base, size_t len)
{
    unsigned n0 = d->npieces;
    uint8_t *p = base;
    int err;

    if (strcmp(mc_disk_io_engine(d->io), "io_uring") != 0)
        return 0; /* the threads engine reads with pread: nothing to register */
    if (base == NULL || len == 0 || ((uintptr_t)base | len) % MC_DISK_BLOCK != 0)
        return MC_ERR_INVALID;
    if (mc_disk_io_pending(d->io) > 0)
        return MC_ERR_BUSY;
    while (len > 0) {
        size_t n = len < PIECE_MAX ? len : PIECE_MAX;

        if (d->npieces == PIECES_MAX) {
            d->npieces = n0;
            return MC_ERR_TOO_LARGE;
        }
        d->pieces[d->npieces++] = (struct piece){p, n};
        p += n;
        len -= n;
    }
    err = register_all(d);
    if (err != 0) {
        /* the kernel would not pin them: back to the set that worked (the staging slots
         * alone were registered at open) */
        d->npieces = n0;
        if (register_all(d) != 0)
            mc_warn("disk: the staging buffers are no longer registered: every I/O pins "
                    "its pages");
    }
    return err;
}

void mc_disk_close(struct mc_disk *d)
{
    if (d == NULL)
        return;
    mc_disk_io_destroy(d->io); /* before the staging buffers it may still fill */
    mc_disk_scan_cleanup(&d->scan);
    free(d->staging);
    free(d->slots);
    if (d->fd >= 0)
        close(d->fd);
    free(d);
}

uint64_t mc_disk_region(const struct mc_disk *d)
{
    return d->region;
}

const char *mc_disk_engine(const struct mc_disk *d)
{
    return mc_disk_io_engine(d->io);
}

bool mc_disk_is_direct(const struct mc_disk *d)
{
    return d->direct;
}

int mc_disk_uring_err(const struct mc_disk *d)
{
    return d->uring_err;
}

void mc_disk_get_stats(const struct mc_disk *d, struct mc_disk_stats *st_p)
{
    *st_p = d->st;
}
