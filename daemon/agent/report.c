/*
 * The walk of report.h: a cursor over the segment's holdings, at most REPORT_INFLIGHT
 * RESTOREs out at once (a million holdings must not become a million queued requests),
 * refilled from each answer. In-process, answers come inside ml_submit: the refill loop
 * is guarded so it never recurses.
 */
#include "daemon/agent/report.h"

#include <stdbool.h>
#include <stdlib.h>

#include <mc/mc_status.h>

#include "daemon/agent/agent_int.h"
#include "daemon/agent/mlink.h"
#include "daemon/agent/seg.h"
#include "daemon/common/log.h"

#define REPORT_INFLIGHT 4096u
#define REPORT_CHUNK 64

struct walk {
    struct mlink *ml;
    struct mc_seg *s;
    uint32_t seg_id;
    struct report_stats *st;
    uint64_t cursor;
    uint32_t inflight;
    bool done;     /* no more holdings, or the link was lost */
    bool lost;     /* ... the link was lost: the master is not told the walk ended */
    bool filling;  /* inside fill(): answers only count */
    struct mc_seg_holding buf[REPORT_CHUNK];
    int nbuf, ibuf;
};

static void fill(struct walk *w);

/* What the master would refuse anyway, and the wire refuses to encode (a bad item would
 * fail its whole batch): checked here, forgotten at once. */
static bool holding_ok(const struct mc_seg_holding *h)
{
    return h->key != NULL && h->key_len > 0 && h->key_len <= MC_DIR_KEY_MAX && h->size > 0 &&
           h->alloc_len >= h->size && h->version > 0 &&
           (h->flags & ~(uint32_t)(MC_MASTER_PUT_PIN_SOFT | MC_MASTER_PUT_PIN_HARD |
                                   MC_MASTER_PUT_NO_CHECKSUM)) == 0 &&
           !((h->flags & MC_MASTER_PUT_PIN_SOFT) && (h->flags & MC_MASTER_PUT_PIN_HARD));
}

static void finish_if_done(struct walk *w)
{
    if (w->done && w->inflight == 0 && !w->filling) {
        struct ml_req *r = w->lost ? NULL : ml_req_new(w->ml, ML_RESTORE_DONE, NULL, 0, NULL,
                                                       NULL);

        /* every holding answered: the master may place data in the segment again (a
         * segment it mounted RESTORING waits for this, or for restore_window_ms) */
        if (r != NULL) {
            r->in.seg = w->seg_id;
            ml_submit(w->ml, r);
        }
        mc_debug("segment %u reported: %llu restored, %llu forgotten so far", w->seg_id,
                 (unsigned long long)w->st->restored, (unsigned long long)w->st->forgotten);
        free(w);
    }
}

static void answered(void *ctx, struct ml_req *r)
{
    struct walk *w = ctx;
    int res = r->res;
    uint64_t offset = r->in.restore.offset, version = r->in.restore.version;

    ml_req_free(w->ml, r);
    w->inflight--;
    if (res == 0) {
        w->st->restored++;
    } else if (res == MC_ERR_CANCELED || res == MC_ERR_EXISTS || res == MC_ERR_INVALID) {
        /* the master knows better: the copy must never be served or told again */
        if (res == MC_ERR_INVALID)
            mc_warn("report of the block at offset %llu, version %llu refused as invalid "
                    "(a version above %llu, or a bad extent): forgotten",
                    (unsigned long long)offset, (unsigned long long)version,
                    (unsigned long long)MC_MASTER_VERSION_MAX);
        w->st->forgotten++;
        if (w->s->ops->forget != NULL)
            w->s->ops->forget(w->s, offset, version);
    } else {
        w->st->failed++;
        w->done = true; /* the master went away: the next MOUNT walks again */
        w->lost = true;
    }
    if (!w->filling)
        fill(w);
    finish_if_done(w);
}

static void fill(struct walk *w)
{
    w->filling = true;
    while (!w->done && w->inflight < REPORT_INFLIGHT) {
        const struct mc_seg_holding *h;
        struct ml_req *r;

        if (w->ibuf == w->nbuf) {
            w->nbuf = w->s->ops->holdings(w->s, &w->cursor, w->buf, REPORT_CHUNK);
            w->ibuf = 0;
            if (w->nbuf <= 0) {
                w->nbuf = 0;
                w->done = true;
                break;
            }
        }
        h = &w->buf[w->ibuf++];
        if (!holding_ok(h)) {
            w->st->forgotten++;
            if (w->s->ops->forget != NULL)
                w->s->ops->forget(w->s, h->offset, h->version);
            continue;
        }
        r = ml_req_new(w->ml, ML_RESTORE, h->key, h->key_len, answered, w);
        if (r == NULL) {
            w->st->failed++;
            w->done = true;
            w->lost = true; /* the window ends it at the master */
            break;
        }
        r->in.restore = (struct mc_master_restore_req){
            .seg = w->seg_id, .offset = h->offset, .alloc_len = h->alloc_len,
            .size = h->size, .version = h->version, .flags = h->flags, .ttl_ms = h->ttl_ms};
        w->inflight++;
        ml_submit(w->ml, r);
    }
    w->filling = false;
}

int report_seg(struct mlink *ml, struct mc_seg *s, uint32_t seg_id, struct report_stats *st)
{
    struct walk *w;

    if (s == NULL || s->ops->holdings == NULL)
        return 0;
    w = calloc(1, sizeof(*w));
    if (w == NULL)
        return MC_ERR_NOMEM;
    w->ml = ml;
    w->s = s;
    w->seg_id = seg_id;
    w->st = st;
    st->walks++;
    fill(w);
    finish_if_done(w);
    return 0;
}

void report_held(struct mc_agent *a)
{
    for (uint32_t t = 0; t < a->ntenants; t++) {
        if (a->ten[t].seg != NULL &&
            report_seg(a->ml, a->ten[t].seg, a->ten[t].seg_id, &a->reports) != 0)
            mc_warn("segment %u: cannot tell the master what it holds (no memory)",
                    a->ten[t].seg_id);
    }
    if (a->disk_seg != NULL && a->disk_seg_id != UINT32_MAX &&
        report_seg(a->ml, a->disk_seg, a->disk_seg_id, &a->reports) != 0)
        mc_warn("the disk segment: cannot tell the master what it holds (no memory)");
}
