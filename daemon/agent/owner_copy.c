/*
 * The owner's COPY executor (cluster_int.h): the master's COPY calls, which move one replica's
 * bytes. From our DRAM or GPU segment to another node's block (our node drains), from our
 * disk segment to another node's block (a drained disk record) or to our own memory (a
 * promotion), and from our memory to our disk segment (an offload). Each is answered to the
 * master once its bytes are in place; none writes after the deadline the master gave it.
 */
#include "daemon/agent/cluster_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/agent/disk_tier.h"
#include "daemon/agent/holdidx.h"
#include "daemon/common/log.h"

/* A copy the master asked of us (a node being drained): our segment's bytes written to a
 * block of another node, answered to the master once that owner answered the write. */
struct copyjob {
    struct cluster *cl;       /* NULL: orphaned by cl_owner_destroy (a disk read goes on) */
    struct copyjob *next;     /* cl->diskdrains, while its disk source is read */
    struct mc_ucx_ep *master; /* the endpoint it came on: answered only if still ours */
    uint64_t request_id;
    struct mc_master_replica dst;
    uint8_t *staged;          /* a GPU segment's bytes copied out for the write, or a disk
                                 record's image read for it (copy_from_disk), or NULL */
    uint64_t id, len;         /* copy_from_disk: the write's version, and the image's bytes */
    uint64_t deadline_ms;     /* copy_from_disk: the write starts by then, or never */
    uint32_t src_seg;
    uint64_t src_offset, version;
    size_t key_len;
    char key[MC_PROTO_KEY_MAX];
};

/* The copy is written: its target owner indexes it as it indexes a put's replica (PUBLISH),
 * with what our own index says of the object -- else a new master, rebuilding from the
 * owners, would not learn the drained copy (review finding H4). Only an object our index
 * holds at the source block, of the version the master copied, whose TTL has not passed. */
static void copy_publish(struct cluster *cl, const struct copyjob *cj)
{
    struct mc_agent *a = cl->a;
    struct mc_seg *s = agent_seg(a, cj->src_seg);
    struct mc_holdidx_entry e;
    uint64_t now = mc_agent_now_ms(), ttl = 0;

    if (s == NULL || s->held == NULL || a->rio.ops->publish == NULL ||
        !mc_holdidx_find(s->held, cj->src_offset, &e) || e.version != cj->version ||
        e.key_len != cj->key_len || memcmp(e.key, cj->key, cj->key_len) != 0 ||
        e.size > cj->dst.len)
        return;
    if (e.ttl_ms != 0) { /* find gives the absolute expiry */
        if (e.ttl_ms <= now)
            return;
        ttl = e.ttl_ms - now;
    }
    a->rio.ops->publish(a->rio.impl,
                        &(struct mc_rio_publish){.r = &cj->dst, .key = cj->key,
                                                 .key_len = cj->key_len, .version = e.version,
                                                 .size = e.size, .flags = e.flags,
                                                 .ttl_ms = ttl});
}

static void copy_written(void *ctx, int status)
{
    struct copyjob *cj = ctx;
    struct cluster *cl = cj->cl;

    if (status != 0)
        mc_debug("copy to node %u (segment %u): %s", cj->dst.node, cj->dst.seg,
                 mc_strerror(status));
    else {
        cl->st.copies_out++;
        copy_publish(cl, cj);
    }
    /* the master that asked is still ours: tell it (a new one knows nothing of it) */
    if (!cl->destroying && cj->master == cl->master && cl->master != NULL)
        cl_reply_status(cj->master,
                     &(struct mc_wire_hdr){.request_id = cj->request_id, .type = MC_WIRE_COPY},
                     status);
    free(cj->staged); /* the write is final: UCX reads it no more */
    free(cj);
}

/* A COPY into our own disk segment (the master offloads an object it evicts from our DRAM,
 * disk_tier.h): answered once the record is durable. Listed from the COPY until its write
 * ended -- queued, waiting for an erase or in flight -- so that a FENCE of its target
 * (the master gave the copy up: a timeout) is answered BUSY meanwhile: the master frees the
 * DRAM source and the disk extent on the fence's 0 (review finding H2). */
struct diskcopy {
    struct cluster *cl;       /* NULL: orphaned by cl_owner_destroy */
    struct diskcopy *next;
    struct mc_ucx_ep *master;
    uint64_t request_id;
    uint32_t seg, alloc;      /* the target, as the master names it in a FENCE */
    uint64_t id;              /* the copy: a FENCE's version */
    uint64_t offset;          /* the extent's (a promotion: the DRAM block's) */
    uint64_t version;         /* a promotion: the object's */
    bool promote;             /* our disk record into our DRAM block (disk_promote) */
    bool fenced;              /* a FENCE came meanwhile: the record must not stand */
};

static void diskcopy_unlink(struct cluster *cl, struct diskcopy *dc)
{
    struct diskcopy **pp;

    for (pp = &cl->diskcopies; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == dc) {
            *pp = dc->next;
            return;
        }
    }
}

/* A COPY of that target under way: marked fenced (its record will be erased). */
bool cl_copy_disk_busy(struct cluster *cl, const struct mc_proto_fence_item *it)
{
    bool busy = false;

    for (struct diskcopy *dc = cl->diskcopies; dc != NULL; dc = dc->next) {
        if (dc->seg == it->seg && dc->alloc == it->alloc && dc->id == it->version) {
            dc->fenced = true;
            busy = true;
        }
    }
    return busy;
}

static void disk_copied(void *ctx, int status)
{
    struct diskcopy *dc = ctx;
    struct cluster *cl = dc->cl;

    if (cl == NULL) {
        free(dc);
        return;
    }
    diskcopy_unlink(cl, dc);
    if (dc->fenced && status == 0) {
        /* the master gave this copy up (its extent may be handed out again once the
         * fence is answered): the record goes, and the copy failed */
        if (dc->promote)
            agent_disk_unpromote(cl->a, dc->seg, dc->offset, dc->version);
        else
            agent_disk_drop(cl->a, dc->offset, 0);
        status = MC_ERR_CANCELED;
    }
    if (!cl->destroying && dc->master == cl->master && cl->master != NULL)
        cl_reply_status(dc->master,
                     &(struct mc_wire_hdr){.request_id = dc->request_id, .type = MC_WIRE_COPY},
                     status);
    free(dc);
}

static void copy_to_disk(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                         const struct mc_proto_copy_req *req)
{
    struct agent_disk_copy cp = {
        .src_seg = req->src_seg, .src_offset = req->src_offset, .dst_offset = req->dst_offset,
        .version = req->version, .key = (const char *)req->key.p,
        .key_len = req->key.len,
    };
    struct diskcopy *dc = malloc(sizeof(*dc));
    int err;

    if (dc == NULL) {
        cl_reply_status(ep, hdr, MC_ERR_NOMEM);
        return;
    }
    *dc = (struct diskcopy){.cl = cl, .master = ep, .request_id = hdr->request_id,
                            .seg = req->dst_seg, .alloc = req->dst_alloc, .id = req->id,
                            .offset = req->dst_offset};
    /* the length the master names is the source block's: the extent is the record's */
    cp.dst_len = 0;
    /* listed before the call: done may run inside it */
    dc->next = cl->diskcopies;
    cl->diskcopies = dc;
    err = agent_disk_copy(cl->a, &cp, disk_copied, dc);
    if (err != 0) {
        diskcopy_unlink(cl, dc);
        free(dc);
        cl_reply_status(ep, hdr, err);
    }
}

/* A COPY from our disk segment into our own DRAM segment: a promotion (disk_promote). Listed
 * until the read ended, so that a FENCE of the DRAM block meanwhile is answered BUSY (the
 * read may still write it) and the promotion then fails instead of standing. */
static void promote_local(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                          const struct mc_proto_copy_req *req)
{
    struct agent_disk_promote p = {
        .src_offset = req->src_offset, .dst_seg = req->dst_seg, .dst_offset = req->dst_offset,
        .dst_len = req->len, .version = req->version, .key = (const char *)req->key.p,
        .key_len = req->key.len,
    };
    struct diskcopy *dc;
    int err;

    if (cl->destroying || cl->leaving) {
        cl_reply_status(ep, hdr, MC_ERR_INVALID);
        return;
    }
    dc = malloc(sizeof(*dc));
    if (dc == NULL) {
        cl_reply_status(ep, hdr, MC_ERR_NOMEM);
        return;
    }
    *dc = (struct diskcopy){.cl = cl, .master = ep, .request_id = hdr->request_id,
                            .seg = req->dst_seg, .alloc = req->dst_alloc, .id = req->id,
                            .offset = req->dst_offset, .version = req->version,
                            .promote = true};
    dc->next = cl->diskcopies;
    cl->diskcopies = dc;
    err = agent_disk_promote(cl->a, &p, disk_copied, dc);
    if (err != 0) {
        diskcopy_unlink(cl, dc);
        free(dc);
        cl_reply_status(ep, hdr, err);
    }
}

/*
 * A drain's COPY from a record of our disk segment to another node's block (docs/disk.md,
 * "Draining a node with a disk"): the record read and checked as a disk hit is (a corrupt
 * one answered MC_ERR_CORRUPT, nothing sent), then sent with the remote write and answered
 * as a memory source's copy (copy_written). The write starts only after the read, and the
 * master may free the target once it gave the copy up: like a memory source's, it starts
 * by the COPY's arrival + op_timeout_ms or never (MC_ERR_TIMEOUT unsent, copies_late), then
 * has its own op_timeout_ms (a large record may need it).
 */
static void copy_from_disk_read(void *ctx, int status)
{
    struct copyjob *cj = ctx, **pp;
    struct cluster *cl = cj->cl;
    struct mc_rio_write w;

    if (cl == NULL) {
        free(cj->staged); /* the cluster went meanwhile: nobody to answer */
        free(cj);
        return;
    }
    for (pp = &cl->diskdrains; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == cj) {
            *pp = cj->next;
            break;
        }
    }
    if (status == 0 && (cl->destroying || cl->leaving))
        status = MC_ERR_CANCELED;
    if (status == 0 && mc_agent_now_ms() >= cj->deadline_ms) {
        cl->st.copies_late++;
        status = MC_ERR_TIMEOUT;
    }
    if (status != 0) {
        copy_written(cj, status);
        return;
    }
    w = (struct mc_rio_write){.r = &cj->dst, .version = cj->id, .key = cj->key,
                              .key_len = cj->key_len, .src = cj->staged, .from = 0,
                              .len = cj->len,
                              .deadline_ms = mc_agent_now_ms() + cl->a->cfg.op_timeout_ms};
    status = cl_write(cl, &w, copy_written, cj);
    if (status != 0)
        copy_written(cj, status);
}

static void copy_from_disk(struct cluster *cl, struct mc_ucx_ep *ep,
                           const struct mc_wire_hdr *hdr, const struct mc_proto_copy_req *req)
{
    struct mc_agent *a = cl->a;
    struct copyjob *cj;
    int err;

    if (cl->destroying || cl->leaving || req->key.len > MC_PROTO_KEY_MAX) {
        cl_reply_status(ep, hdr, MC_ERR_INVALID);
        return;
    }
    cj = calloc(1, sizeof(*cj));
    if (cj == NULL) {
        cl_reply_status(ep, hdr, MC_ERR_NOMEM);
        return;
    }
    cj->cl = cl;
    cj->master = ep;
    cj->request_id = hdr->request_id;
    cj->src_seg = req->src_seg;
    cj->src_offset = req->src_offset;
    cj->version = req->version;
    cj->id = req->id;
    cj->deadline_ms = mc_agent_now_ms() + a->cfg.op_timeout_ms;
    cj->key_len = req->key.len;
    memcpy(cj->key, req->key.p, req->key.len);
    cj->dst = (struct mc_master_replica){.seg = req->dst_seg, .node = req->dst_node,
                                         .alloc = req->dst_alloc, .offset = req->dst_offset,
                                         .len = req->len};
    err = agent_disk_drain_read(a,
                                &(struct agent_disk_drain){.offset = req->src_offset,
                                                           .version = req->version,
                                                           .key = cj->key,
                                                           .key_len = cj->key_len,
                                                           .max_len = req->len},
                                &cj->staged, &cj->len, copy_from_disk_read, cj);
    if (err != 0) {
        free(cj);
        cl_reply_status(ep, hdr, err);
        return;
    }
    cj->next = cl->diskdrains;
    cl->diskdrains = cj;
}

/* COPY from the master (our node drains): write [src_offset, +len) of our segment into
 * another node's block with the ordinary remote write; answered when that write is. */
void cl_copy_handle(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                    const void *pl)
{
    struct mc_agent *a = cl->a;
    struct mc_proto_copy_req req;
    struct mc_rio_write w;
    struct copyjob *cj;
    const uint8_t *src;
    uint8_t *staged = NULL;
    int err;

    if (mc_proto_copy_req_decode(pl, hdr->payload_len, &req) != 0) {
        cl_reply_status(ep, hdr, MC_ERR_PROTO);
        return;
    }
    if (a->disk_seg != NULL && req.dst_seg == a->disk_seg_id) {
        copy_to_disk(cl, ep, hdr, &req);
        return;
    }
    if (a->disk_seg != NULL && req.src_seg == a->disk_seg_id) {
        /* into our own memory: a promotion; into another node's: our node drains */
        if (agent_seg(a, req.dst_seg) != NULL)
            promote_local(cl, ep, hdr, &req);
        else
            copy_from_disk(cl, ep, hdr, &req);
        return;
    }
    src = mc_seg_span(agent_seg(a, req.src_seg), req.src_offset, req.len);
    if (src == NULL) {
        struct mc_seg *s = agent_seg(a, req.src_seg);
        enum mc_ucx_mem_type mt;

        /* a GPU segment: its bytes go from where UCX moves them (the write path sends
         * host memory), else copied out to host memory first */
        if (s == NULL) {
            cl_reply_status(ep, hdr, MC_ERR_NOT_FOUND); /* not ours */
            return;
        }
        if (s->kind != MC_SEG_GPU || req.src_offset > s->size ||
            req.len > s->size - req.src_offset) {
            cl_reply_status(ep, hdr, MC_ERR_INVALID);
            return;
        }
        src = cl_gpu_direct_span(cl, req.src_seg, req.src_offset, req.len, &mt);
        if (src != NULL && mt != MC_UCX_MEM_HOST)
            src = NULL;
        if (src == NULL) {
            staged = malloc(req.len != 0 ? req.len : 1);
            if (staged == NULL) {
                cl_reply_status(ep, hdr, MC_ERR_NOMEM);
                return;
            }
            if (s->ops->read(s, req.src_offset, staged, req.len) != 0) {
                free(staged);
                cl_reply_status(ep, hdr, MC_ERR_IO);
                return;
            }
            src = staged;
            cl->st.staged_out++;
        } else {
            cl->st.direct_out++;
        }
    }
    if (agent_seg(a, req.dst_seg) != NULL || cl->destroying || cl->leaving) {
        free(staged);
        cl_reply_status(ep, hdr, MC_ERR_INVALID);
        return;
    }
    cj = malloc(sizeof(*cj));
    if (cj == NULL) {
        free(staged);
        cl_reply_status(ep, hdr, MC_ERR_NOMEM);
        return;
    }
    memset(cj, 0, sizeof(*cj));
    cj->cl = cl;
    cj->staged = staged;
    cj->master = ep;
    cj->request_id = hdr->request_id;
    cj->src_seg = req.src_seg;
    cj->src_offset = req.src_offset;
    cj->version = req.version;
    cj->key_len = req.key.len;
    memcpy(cj->key, req.key.p, req.key.len);
    cj->dst = (struct mc_master_replica){.seg = req.dst_seg, .node = req.dst_node,
                                         .alloc = req.dst_alloc, .offset = req.dst_offset,
                                         .len = req.len};
    /* the master keeps the source block allocated while the copy runs; the write's version
     * is the copy's id: the target's fences name it */
    w = (struct mc_rio_write){.r = &cj->dst, .version = req.id, .key = cj->key,
                              .key_len = cj->key_len, .src = src, .from = 0, .len = req.len,
                              .deadline_ms = mc_agent_now_ms() + a->cfg.op_timeout_ms};
    err = cl_write(cl, &w, copy_written, cj);
    if (err != 0) {
        free(cj->staged);
        free(cj);
        cl_reply_status(ep, hdr, err);
    }
}

void cl_copy_destroy(struct cluster *cl)
{
    /* drain copies reading their disk source end later (agent_disk_destroy): orphaned */
    while (cl->diskdrains != NULL) {
        struct copyjob *cj = cl->diskdrains;

        cl->diskdrains = cj->next;
        cj->cl = NULL;
    }
    /* disk copies under way end later (or never, agent_disk_destroy): orphaned here */
    while (cl->diskcopies != NULL) {
        struct diskcopy *dc = cl->diskcopies;

        cl->diskcopies = dc->next;
        dc->cl = NULL;
    }
}
