/*
 * The agent's cluster mode, inside: what its files (xfer.c: peers, the segment table and
 * the transfers we start; owner.c, owner_copy.c, owner_gpu.c: the transfers others start
 * with us; cluster.c: the master link, join and rejoin; views.c: ops answered from the
 * master's view) share. Not
 * an API: the rest of the agent uses cluster.h and rio.h.
 */
#ifndef MC_AGENT_CLUSTER_INT_H
#define MC_AGENT_CLUSTER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mc/mc_status.h>

#include "daemon/agent/agent_int.h"
#include "daemon/agent/gpu_cfg.h"
#include "daemon/agent/loop.h"
#include "daemon/agent/rio.h"
#include "daemon/agent/tenant_cfg.h"
#include "daemon/common/bootstrap.h"
#include "daemon/common/resend.h"
#include "daemon/proto/hold_proto.h"
#include "daemon/proto/master_proto.h"
#include "daemon/proto/peer_proto.h"
#include "ucx_backend/ucx.h"

#define PEER_HASH 64u
#define READ_HASH 256u
#define HELLO_TIMEOUT_MS 3000u /* a peer that does not answer HELLO in time is unreachable */
#define INFO_TIMEOUT_MS 3000u
#define PUBLISH_TIMEOUT_MS 3000u /* a PUBLISH to an owner (holdidx.h) */
/* PUBLISHes not answered are tried again (resend.h), 200 ms after the first failed try,
 * doubling to 2 s, and given up 30 s after the first: well inside the owner's memory of a
 * drop that came first (MC_HOLDIDX_TOMB_MS, 60 s, daemon/agent/holdidx.h), so that a late try never indexes an
 * object freed meanwhile. At most PUBLISH_QUEUE_MAX are held. */
#define PUBLISH_BACKOFF_MIN_MS 200u
#define PUBLISH_BACKOFF_MAX_MS 2000u
#define PUBLISH_GIVE_UP_MS 30000u
#define PUBLISH_QUEUE_MAX 65536u
/* After a master change, a writer says it carries PUBLISHes (HELLO, HEARTBEAT: the new
 * master's recovery window stays open for their owners' late RESTOREs) until they are
 * settled or this long has passed; its report goes at once all the same. The master holds
 * its window for it at most restore_window_ms; the data operations of the whole cluster
 * wait meanwhile, so this is short: carried items reach their owners about 1.5 s after the
 * change (docs/decisions.md) */
#define PUBLISH_CARRY_MS 5000u
#define FENCE_RETRY_MS 1000u
#define READ_ATTEMPT_MIN_MS 250u /* the shortest turn a replica gets while others are left */
#define BOOT_BACKLOG 128

/* What a bulk completion's `op` points at: the first field of both. */
enum op_what { OP_READ = 1, OP_INWRITE = 2 };

enum peer_state { PEER_HELLO, PEER_READY };

/* Our link to the master: up, or being rejoined after it was lost (docs/failure-contract.md). */
enum master_state { M_UP, M_DOWN, M_FETCH, M_HELLO, M_MOUNT };

struct xfer;

/* Another agent we send to or read from: one endpoint, authenticated once. */
/* A peer's pending HELLO call: p is cleared when the peer goes first (peer_hello_done). */
struct peer_hello {
    struct peer *p;
};

struct peer {
    struct peer *next;
    struct cluster *cl;
    uint32_t node;             /* as the master last named it (logs) */
    uint8_t *addr;             /* its worker address: what identifies it (node ids do not
                                  survive a master restart) */
    size_t addr_len;
    struct mc_ucx_ep *ep;
    enum peer_state state;
    struct peer_hello *hello;  /* while its HELLO is unanswered */
    struct xfer *waitq, *waitq_tail; /* transfers waiting for HELLO's answer */
    struct xfer *rq, *rq_tail; /* reads ready to go, sent as READ_BATCH at the turn's end */
    struct peer *rq_next;      /* on cl->rq_peers while rq is not empty */
    bool rq_listed;
};

struct rbatch;

/* A segment of the cluster as CLUSTER_INFO showed it. */
struct segrec {
    bool valid;
    uint32_t node;
    uint64_t size;
    size_t addr_len;
    uint8_t *addr; /* the owner's worker address */
};

enum xfer_kind { X_WRITE, X_READ };

/* One GET's remote read (rio.h read): one transfer at a time, or more while an owner that
 * stalled mid-transfer still holds the first (a second replica is read meanwhile: a stalled
 * owner counts as absent, like a dead one). The first transfer to land answers; the others
 * end on their own and give their landing blocks back. */
struct rget {
    mc_rio_read_fn done;      /* NULL once answered: the transfers still running are orphans */
    mc_rio_wanted_fn wanted;
    void *ctx;
    const struct mc_master_get_result *g; /* the reader's, valid until it is answered */
    uint32_t skip;            /* replicas not to read (a bit each) */
    uint32_t tenant;          /* the reader's: its landing segment takes the bytes */
    uint32_t rep_next;        /* the next replica to try */
    uint32_t running;         /* transfers of it not final yet */
    uint8_t *arena;           /* the reader's arena span (rio.h), or NULL */
    uint64_t arena_room;      /* its bytes */
    bool arena_taken;         /* a transfer was given it: no other may be */
};

/* One transfer we started: a put's image to a replica, or a read into the landing segment. */
struct xfer {
    enum op_what what;         /* OP_READ (reads only: bulk completions name it) */
    enum xfer_kind kind;
    struct xfer *next;         /* a wait queue, or the read hash chain */
    struct cluster *cl;
    struct mc_master_replica r;
    /* X_WRITE: the image's bytes [from, from + len) to the replica */
    const uint8_t *src;
    uint64_t from;
    const uint8_t *tail;       /* X_WRITE: the bytes after [from, from + len), in the header */
    size_t tail_len;
    uint64_t version;          /* X_READ too: the lease's version, copied when queued (the
                                  reader's result may be gone by the flush) */
    const char *key;           /* the writer's, valid until done ran */
    size_t key_len;
    mc_rio_write_fn wdone;
    void *wctx;
    struct rget *rg;           /* X_READ */
    uint32_t land_id;          /* X_READ: its own block of the landing segment */
    uint8_t *arena;            /* X_READ: lands in the reader's arena instead (no block);
                                  never hedged, cut at its deadline (cl_xfer_tick) */
    uint64_t head;             /* X_READ into the arena: only the first head bytes go there,
                                  the rest of the image to the start of block land_id (0:
                                  all of it there, no block) */
    uint32_t ri;               /* X_READ: which replica of the object it reads */
    bool hedged;               /* X_READ: stalled mid-transfer, another replica was started */
    bool retried;              /* read: tried once more on a fresh endpoint */
    bool tail_hdr;             /* X_READ with head: the tail came in the reply's header */
    struct peer *peer;
    uint64_t id;               /* X_READ: the request id the owner's bulk carries */
    uint64_t len;
    uint64_t deadline_ms;
    uint64_t attempt_ms;       /* X_READ: this replica's turn ends (the next one is tried) */
    struct xfer *bnext;        /* X_READ: the peer's queue of reads not sent yet */
    struct rbatch *rb;         /* X_READ: the READ_BATCH call that carries it, while pending */
    uint32_t rbi;              /* its item in rb */
    bool hashed;               /* X_READ: findable by id */
    bool moving;               /* on the in-flight list: UCX has it */
    struct xfer *iprev, *inext;
    bool data_started, data_done, reply_done;
    int status;
};

/* A peer's READ of a record in our disk segment (owner.c, disk_tier.h): answered once the
 * record is read into bytes, which are then sent. */
struct diskread {
    struct diskread *next, *prev;
    struct cluster *cl;        /* NULL: the cluster is gone, the read's end frees it */
    struct mc_ucx_ep *ep;      /* NULL once it failed: nobody to answer */
    uint64_t request_id, xfer, len;
    struct readbatch *batch;   /* the READ_BATCH it is item idx of, or NULL (a READ) */
    uint32_t idx;
    uint64_t deadline_ms;      /* answered MC_ERR_TIMEOUT then (cl_owner_tick), if not read */
    bool answered;             /* ... it was: its end only frees it (bytes held until then) */
    uint64_t offset, version;  /* the record (a queued read starts with them later) */
    uint64_t head;             /* the reader's (peer_proto.h): the tail in the header */
    struct diskread *qnext;    /* queued (cl->diskq): disk_peer_reads under way already;
                                * without bytes until it starts */
    uint8_t *bytes;            /* len bytes, block-aligned: the record's whole blocks land
                                * there from the device (no staging copy); NULL: queued */
    size_t cap;                /* bytes' size (cl->dbuf's size class) */
};

/* A READ_BATCH some of whose items are disk reads under way: answered (one status per
 * item) when the last of them ends. It lives as long as one of its diskreads does (and the
 * handler, while it starts them), so clearing cl or ep goes through those. */
struct readbatch {
    struct cluster *cl;        /* NULL: the cluster is gone */
    struct mc_ucx_ep *ep;      /* NULL once it failed: nobody to answer */
    uint64_t request_id;
    uint32_t n, pending;       /* items; holds (items under way, + 1 while being started) */
    int results[];
};

/* A write landing in our segment now: the owner's index of what may still change. */
struct inwrite {
    enum op_what what;         /* OP_INWRITE */
    struct inwrite *next, *prev;
    struct cluster *cl;
    struct mc_ucx_ep *ep;      /* NULL once it failed: nobody to answer */
    uint64_t request_id;       /* the writer's call, answered when the bytes are in place */
    uint32_t seg, alloc;
    uint64_t version, offset, len;
    uint8_t *staged;           /* into a segment with no window (GPU): the bytes land here
                                  first and are copied in when they are complete */
    bool direct;               /* into a GPU segment, landed there by UCX itself */
};

/* An allocation a failed write touched: the master may reuse it once we say no write can
 * land there any more (FENCE), which is true as soon as the failed transfer is final. */
struct fence {
    struct fence *next;
    struct mc_proto_fence_item item;
    uint64_t first_ms;
};

/* A block the master asked us to fence: no write of that put may land any more. */
struct fenced {
    struct fenced *next;
    uint32_t seg, alloc;
    uint64_t version;
    uint64_t until_ms; /* past any write of it that could still arrive */
};

#define FENCED_HASH 256u

/* An earlier master's ids of our segments (carry.c): a PUBLISH made in its reign and
 * carried over a change of master names our segment by them. */
#define REIGNS_KEPT 4u
#define REIGN_SEGS_MAX (MC_AGENT_TENANTS_MAX + 1u + MC_AGENT_GPU_MAX + 1u)
struct reign_ids {
    uint64_t m_epoch, m_incarnation;
    uint32_t n;                        /* 0: an empty slot */
    uint32_t ids[REIGN_SEGS_MAX];      /* by agent_seg_at's index; UINT32_MAX: none */
};

/* A carried-over PUBLISH: told to the new master on its own (a late RESTORE); the writer
 * is answered once the master answered. Kept
 * LATE_KEEP_MS after that answer (for the writer's next try), at most LATE_MAX at once. */
#define LATE_KEEP_MS PUBLISH_GIVE_UP_MS
#define LATE_MAX 4096u
struct latepub {
    struct latepub *next;
    struct cluster *cl;       /* NULL: orphaned by cl_late_destroy, its RESTORE frees it */
    struct mlink *ml;
    uint32_t local;           /* our segment (agent_seg_at's index) */
    uint64_t offset, version;
    bool pending;             /* the RESTORE is out */
    int result;               /* then: 0 the master took it, 1 it refused (forgotten) */
    uint64_t until_ms;
};

struct agent_leader;

struct cluster {
    struct mc_agent *a;
    struct agent_leader *leader; /* --etcd: who leads (leader.h); NULL: master_addr only */
    uint64_t epoch;              /* the leader's epoch we follow (0: none, or no etcd) */
    void (*fatal)(struct mc_agent *a, int status); /* the agent cannot go on */
    struct mc_ucx *u;
    struct mc_ucx_ep *master;
    enum master_state mstate;
    uint32_t mount_next;        /* rejoining: the tenant whose segment is being mounted */
    uint64_t rejoin_ms, backoff_ms, fetch_deadline_ms;
    struct mc_boot_fetch bf;
    uint32_t node;
    uint64_t node_ttl_ms, lease_ttl_ms;
    char *token;
    size_t token_len;
    char name[MC_MASTER_NAME_MAX + 1];
    int listen_fd;
    uint16_t port;
    void *boot;
    size_t boot_len;
    bool efd_polled, listen_polled;
    struct mc_loop_ev efd_ev, listen_ev; /* the worker's event fd, the bootstrap listener */
    /* --etcd: the leader thread's eventfd, and the bootstrap fetch of a rejoin, polled by
     * the loop so that a new leader is followed and joined at once, not tick by tick */
    struct mc_loop_ev leader_ev, fetch_ev;
    bool leader_polled, fetch_polled, fetch_cancelling;
    int fetch_armed_fd;
    uint64_t leader_buf;
    int accepted_marker;          /* the user pointer of authenticated accepted endpoints */
    struct segrec *segs;
    uint32_t nsegtab;
    bool info_busy;
    struct xfer *info_wait, *info_wait_tail; /* transfers waiting for a segment's owner */
    struct peer *peers[PEER_HASH];
    struct xfer *reads[READ_HASH];
    struct peer *rq_peers;        /* peers with reads queued for the next READ_BATCH */
    uint64_t next_id;
    struct inwrite *inwrites;
    struct diskread *diskreads;   /* peers' reads of our disk records under way */
    struct diskread *diskq, *diskq_tail; /* ... and waiting for one of them to end */
    uint32_t ndiskq;
    /* block-aligned buffers of ended peer disk reads, kept for the next ones: a fresh one
     * costs page faults and zeroing at every read (docs/decisions.md) */
#define CL_DBUF_KEEP 64u
#define CL_DBUF_KEEP_BYTES (64u << 20)
    void *dbuf[CL_DBUF_KEEP];
    size_t dbuf_cap[CL_DBUF_KEEP];
    uint32_t ndbuf;
    size_t dbuf_bytes;
    struct diskcopy *diskcopies;  /* the master's COPYs into our disk segment under way */
    struct copyjob *diskdrains;   /* drain COPYs reading their disk source (owner_copy.c) */
    struct xfer *moving;          /* transfers UCX holds, for the peer hard deadline */
    struct fence *fences;
    bool fence_busy;
    struct mc_resend pubq;        /* PUBLISHes out or to be tried again (xfer.c) */
    uint64_t seg_gen;             /* bumped when the segment ids change (a new master) */
    uint64_t m_epoch, m_incarnation; /* the master joined last (HELLO): a rejoin to the same
                                        one (both equal, incarnation told) keeps the ids */
    struct reign_ids reigns[REIGNS_KEPT]; /* the masters followed before (carry.c) */
    uint32_t reign_next;
    struct latepub *latepubs;     /* late RESTOREs of carried-over PUBLISHes (carry.c) */
    uint32_t nlatepubs;
    /* a writer with PUBLISHes carried over a master change: its heartbeats say so until
     * they are settled, or until carry_until_ms (0: none carried), so that the new
     * master's recovery window stays open for their late RESTOREs (docs/master.md, "High
     * availability") */
    uint64_t carry_until_ms;
    struct fenced *fenced[FENCED_HASH];
    uint64_t next_hb_ms, next_fence_ms;
    bool hb_busy;
    uint32_t drain;               /* our node's drain state, as the last heartbeat said */
    uint64_t incarnation;         /* this process, in every HELLO (the master tells a
                                     reconnect of ours from another agent by it) */
    uint64_t m_silent_since;      /* the first call the master owes since its last answer
                                     was sent then (0: it owes none) */
    bool m_unresp;                /* it owed one past master_timeout_ms: ops fail fast */
    bool m_refused;               /* it refused a batch of ours: join again */
    bool leaving;
    bool destroying;              /* cluster_destroy runs: start no transfer, no endpoint */
    struct {
        uint64_t writes_out, write_bytes_out, reads_out, read_bytes_in;
        uint64_t read_batches_out;  /* READ_BATCH requests: reads_out / this = reads per request */
        uint64_t master_requests;   /* batches sent to mc-master (mlink.h), every kind */
        uint64_t writes_in, write_bytes_in, reads_in, refused, peer_errors, failovers;
        uint64_t hedged, copies_out;
        uint64_t copies_late; /* drain copies from our disk not sent: read past the deadline */
        uint64_t arena_reads;      /* reads answered from a client's arena (arena_reads) */
        uint64_t arena_cuts;       /* transfers into an arena cut at their deadline */
        uint64_t arena_tails_hdr;  /* ... whose image's tail came in the reply's header */
        uint64_t write_tails_hdr;  /* WRITEs that carried the image's tail in their header */
        uint64_t published_out, published_in, drops_in; /* the owners' indexes (holdidx.h) */
        uint64_t disk_read_timeouts; /* peers' reads of our disk answered MC_ERR_TIMEOUT */
        uint64_t late_restored, late_refused; /* carried-over PUBLISHes told the master */
        uint64_t staged_out, staged_in; /* reads and writes of GPU segments, via host memory */
        uint64_t direct_out, direct_in; /* the same, UCX moving the segment's memory itself */
    } st;
    /* per a->gpu[i]: whether UCX moves that GPU segment's memory directly (cl_gpu_direct),
     * its memory type, and its registration; not direct: staged through host memory */
    struct {
        bool direct;
        enum mc_ucx_mem_type mt;
        struct mc_ucx_mem *mem;
    } gpu[MC_AGENT_GPU_MAX];
};


/* --- small shared helpers ------------------------------------------------------------- */

/* A call to the master, or MC_ERR_UNAVAILABLE while we have none (it is being rejoined) or
 * it does not answer (only heartbeats ask it then). */
static inline int cl_master_call(struct cluster *cl, uint16_t type, const void *pl, size_t len,
                                 uint64_t deadline_ms, mc_ucx_rpc_done_fn done, void *ctx)
{
    if (cl->master == NULL || cl->mstate != M_UP || cl->m_unresp)
        return MC_ERR_UNAVAILABLE;
    return mc_ucx_rpc_call(cl->master, type, pl, len, deadline_ms, done, ctx, NULL);
}

/* Writes landing from ep end through their bulk completions, unanswered: ep goes. */
static inline void cl_inwrites_forget_ep(struct cluster *cl, const struct mc_ucx_ep *ep)
{
    for (struct inwrite *w = cl->inwrites; w != NULL; w = w->next) {
        if (w->ep == ep)
            w->ep = NULL;
    }
    for (struct diskread *r = cl->diskreads; r != NULL; r = r->next) {
        if (r->ep == ep)
            r->ep = NULL; /* reads of the disk from ep, likewise */
        if (r->batch != NULL && r->batch->ep == ep)
            r->batch->ep = NULL;
    }
    for (struct diskread *r = cl->diskq; r != NULL; r = r->qnext) {
        if (r->ep == ep)
            r->ep = NULL;
        if (r->batch != NULL && r->batch->ep == ep)
            r->batch->ep = NULL;
    }
}

/* --- xfer.c: peers, the segment table, transfers we start ------------------------------ */

extern const struct mc_rio_ops mc_rio_ucx_ops;

int cl_hello_encode(const struct cluster *cl, void *buf, size_t cap, size_t *len_p);
/* Forget a peer: its waiting transfers fail with status; its endpoint is closed. */
void cl_peer_drop(struct cluster *cl, struct peer *p, int status);
/* A write of ours (rio.h), for puts and for the master's COPY. */
int cl_write(struct cluster *cl, const struct mc_rio_write *w, mc_rio_write_fn done, void *ctx);
/* A READ_REPLY bulk for request id, len bytes of data after hpl_len header bytes: where
 * its bytes land (NULL: not a read of ours), and its end (op: what cl_read_landing gave). */
void *cl_read_landing(struct cluster *cl, struct mc_ucx_ep *ep, uint64_t id, const void *hpl,
                      size_t hpl_len, size_t len, void **op_p);
void cl_read_landed(struct cluster *cl, void *op, int status);
/* Sends the reads queued this turn: one READ_BATCH per owner (per MC_PROTO_READ_BATCH_MAX
 * reads). Returns whether it sent any. cl_reads_queued: whether any wait for it. */
bool cl_reads_flush(struct cluster *cl);
static inline bool cl_reads_queued(const struct cluster *cl)
{
    return cl->rq_peers != NULL;
}
/* The tick: peers past the hard deadline, reads that never started or stalled. */
void cl_xfer_tick(struct cluster *cl, uint64_t now);
/* After a master restart the segment ids name other segments: learn them again. The
 * PUBLISHes still due are carried over to the owners (they name the reign they were made
 * in); cl_pubs_carried: how many of those are not settled yet. */
void cl_segments_forget(struct cluster *cl);
size_t cl_pubs_carried(const struct cluster *cl);
/* Exit: every transfer ends (CANCELED), every peer goes. */
void cl_xfer_destroy(struct cluster *cl);

/* --- carry.c: PUBLISHes carried over a master change, the owner's side ------------------ */

/* Before a new master's MOUNTs: remember the ids the master we followed gave our segments. */
void cl_reign_remember(struct cluster *cl);
/* The segment of ours a PUBLISH item names (NULL: none), by the ids of the reign it was made
 * in: *local_p its agent_seg_at index; *earlier_p: that reign is not the master we follow. */
struct mc_seg *cl_publish_seg(struct cluster *cl, const struct mc_proto_publish_item *it,
                              uint32_t *local_p, bool *earlier_p);
/* A carried-over item just indexed: tell the master we follow (a late RESTORE, once we are
 * joined). 0: it took it; 1: it refused (the entry is forgotten); MC_ERR_BUSY: not yet, or
 * under way: ask again. */
int cl_publish_late(struct cluster *cl, uint32_t local, const struct mc_proto_publish_item *it);
/* Whether a carried-over item may be indexed now (0), or must be answered MC_ERR_BUSY
 * without being indexed: we are not joined to the master we follow (our report, which
 * may be refused, would carry it, and a refusal leaves a tombstone that hides it from a
 * later late RESTORE), or too many late RESTOREs are under way. Called before indexing. */
int cl_publish_late_busy(const struct cluster *cl, uint32_t local,
                         const struct mc_proto_publish_item *it);
void cl_late_tick(struct cluster *cl, uint64_t now);
void cl_late_destroy(struct cluster *cl);

/* --- owner_gpu.c: GPU segments that UCX moves directly ------------------------------------ */

/* Decides, per GPU segment, whether UCX moves its memory directly (a UCX that moves CUDA
 * memory and a CUDA segment, or gpu_test_ucx_direct and the test device) and registers
 * those with UCX; the others are staged. Logs what it chose. cl_owner_gpu_release undoes
 * the registrations (before mc_ucx_destroy). */
void cl_owner_gpu_setup(struct cluster *cl);
void cl_owner_gpu_release(struct cluster *cl);
/* [off, off + len) of our GPU segment seg where UCX moves that segment's memory directly,
 * with its memory type in *mt_p; NULL when seg is not such a segment or the range is
 * outside it (the caller stages, or refuses). */
void *cl_gpu_direct_span(struct cluster *cl, uint32_t seg, uint64_t off, uint64_t len,
                         enum mc_ucx_mem_type *mt_p);

/* --- owner_copy.c: the master's COPY calls ------------------------------------------------ */

/* COPY from the master: answered (hdr's type + 1) once the copy's bytes are in place, or
 * with the error that stopped it. */
void cl_copy_handle(struct cluster *cl, struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                    const void *pl);
/* Whether a COPY into our disk segment of the block a FENCE item names is under way; such a
 * copy is marked fenced (its record is erased when it ends) and the FENCE is answered BUSY. */
bool cl_copy_disk_busy(struct cluster *cl, const struct mc_proto_fence_item *it);
/* Orphans the copies still reading or writing the disk: they end later, unanswered. */
void cl_copy_destroy(struct cluster *cl);

/* --- owner.c: what others ask of us ------------------------------------------------------ */

void cl_owner_register(struct cluster *cl);
void cl_owner_tick(struct cluster *cl, uint64_t now);
void cl_fences_forget(struct cluster *cl);
void cl_owner_destroy(struct cluster *cl);

/* The status answer to the request hdr (type + 1). */
static inline void cl_reply_status(struct mc_ucx_ep *ep, const struct mc_wire_hdr *hdr,
                                   int status)
{
    struct mc_proto_status_rep rep = {.status = status};
    uint8_t buf[8];
    size_t len;

    if (mc_proto_status_rep_encode(&rep, buf, sizeof(buf), &len) == 0)
        mc_ucx_rpc_reply(ep, (uint16_t)(hdr->type + 1), hdr->request_id, buf, len);
}

#endif /* MC_AGENT_CLUSTER_INT_H */
