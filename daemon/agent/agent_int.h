/*
 * The agent's internals, shared by its files: agent.c (loop, clients, local ops), mlink.c
 * (the master link) and cluster.c (UCX, peers, remote bytes). Not an API.
 */
#ifndef MC_AGENT_INT_H
#define MC_AGENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <liburing.h>

#include "daemon/agent/agent.h"
#include "daemon/agent/agent_metrics.h"
#include "daemon/agent/mlink.h"
#include "daemon/master/alloc.h"
#include "daemon/master/master.h"
#include "shm/checksum.h"
#include "shm/region.h"
#include "shm/ring.h"

#define UR_ENTRIES 1024
#define OP_FUTEX_WAIT 51 /* IORING_OP_FUTEX_WAIT: liburing 2.3 has neither name nor helper */
#define OP_FUTEX_WAKE 52 /* probed with WAIT: the kernel has both or neither */
#define FUTEX2_U32 0x02 /* FUTEX2_SIZE_U32; not FUTEX2_PRIVATE: the word is shared */
#define HANDSHAKE_MS 5000
#define SQES_PER_TURN 64 /* per client, for fairness */
#define VIOLATIONS_MAX 64

enum ud_tag {
    UD_UCX = 0, /* the UCX worker's event fd (no pointer) */
    UD_ACCEPT = 1,
    UD_SOCK = 2,
    UD_FUTEX = 3,
    UD_EFD = 4,
    UD_TIMER = 5,
    UD_SIGNAL = 6,
    UD_CANCEL = 7,
};

struct client;

struct put {
    struct client *c;
    bool used;
    bool waiting;       /* a master call or a peer transfer is under way: it ends it */
    bool failed;
    bool abort_pending; /* PUT_ABORT arrived while pieces were still being copied */
    bool oneshot;       /* a PUT: its handle is not the client's to name */
    bool csum;
    uint16_t key_len;
    uint32_t busy;       /* copies in progress into it */
    uint64_t version;
    uint64_t size;
    uint64_t received;   /* bytes of distinct chunks copied */
    uint64_t t0_ns;      /* metrics: when its PUT or PUT_START was taken */
    uint8_t *dst;        /* the object's image: a replica in our segment, or `image` */
    uint8_t *image;      /* no replica here (cluster): alloc_len bytes the writes are sent
                            from (agent_image_get) */
    uint64_t image_cap;
    uint8_t *seen;       /* one byte per chunk: copied */
    uint32_t nrep;
    struct mc_master_replica rep[MC_MASTER_MAX_REPLICAS];
    uint32_t nremote;    /* replicas on other nodes: the image goes there */
    uint32_t sends;      /* writes to peers in flight: the image stays until they are final */
    int send_err;
    uint64_t sent_upto;  /* image bytes [0, sent_upto) are sent or being sent */
    bool finishing;      /* put_finish ran: publish once the writes are final */
    bool revoke_pending; /* revoked while writes were in flight: revoke when they end */
    bool answered;       /* its op was answered (MC_ERR_TIMEOUT at the deadline) while
                            writes to a stalled peer still read the image */
    bool expired;        /* revoked for idleness (put_idle_ms): the slot stays reserved
                            until the client names it (MC_ERR_TIMEOUT) or needs it */
    uint64_t open_bytes; /* counted in the client's open_put_bytes until forgotten */
    uint64_t active_ms;  /* granted, or its last piece copied: put_idle_ms counts from it */
    /* the op that answers when the master or the peers are done */
    uint64_t user_data;
    uint64_t deadline_ms;
    const uint8_t *src;  /* a one-shot PUT's source while its grant is awaited */
    uint64_t uaddr;
    char key[MC_SHM_KEY_SLOT];
};

struct lease {
    bool used;
    bool waiting;        /* its GET is still under way (master, or a peer read) */
    struct client *c;
    uint64_t user_data;
    uint64_t op_deadline_ms;
    uint32_t land_id;    /* a remote read landed in this block of the landing segment */
    bool landed;         /* land_id is held until the lease ends */
    struct mc_master_get_result *g; /* while a remote read is under way */
    uint32_t rep_next;   /* the next replica to try */
    uint64_t cap_plus1;  /* the GET's arg1: the reader's capacity + 1, or 0 */
    uint32_t skip;       /* the GET's arg0: replicas that failed the reader's checksum */
    uint32_t rep_used;   /* the replica a remote read landed from */
    uint16_t key_len;
    uint32_t epoch;
    uint64_t version;
    uint64_t deadline_ms;
    char key[MC_SHM_KEY_SLOT];
};

/* A put's bytes moving from staging into the segment, a slice per loop turn. */
struct copy {
    uint64_t user_data;
    uint64_t deadline_ms;
    uint32_t put;         /* handle */
    uint8_t opcode;       /* MC_OP_PUT (ends the put when done) or MC_OP_PUT_DATA */
    const uint8_t *src;   /* staging or arena bytes; NULL: the client's memory at uaddr */
    uint64_t uaddr;
    uint64_t obj_off;
    uint64_t len;
    uint64_t done;
    XXH3_state_t *xs;     /* the chunk being summed */
};

enum client_state { CL_HANDSHAKE, CL_ACTIVE, CL_CLOSING };

/* A timed op (metrics on): its submission's user_data, when it was taken, which histogram.
 * A client-chosen user_data is a key only: a duplicate keeps the first entry's time. */
enum optime_kind { OT_NONE, OT_PUT, OT_GET };
struct optime {
    uint64_t user_data;
    uint64_t t0_ns;
    uint8_t kind;
};

struct client {
    struct mc_agent *a;
    struct client *next;
    enum client_state state;
    int sock;
    uint32_t id;
    uid_t uid;
    pid_t pid;
    uint64_t accepted_ms;
    struct mc_shm_region *r;
    struct mc_shm_layout lay; /* our copy: the region's header is the client's to scribble */
    uint32_t sq_head;
    uint32_t cq_tail;
    uint32_t inflight;        /* SQEs taken whose CQE is not posted */
    bool cq_dirty;            /* CQEs posted this turn: maybe wake */
    bool futex_armed;
    uint32_t refs;            /* io_uring requests naming this client */
    struct put *puts;         /* lay.max_inflight */
    uint32_t nputs;           /* of them in use: the tick scans them only when some are */
    struct lease *leases;     /* nleases: reads outlive their op until RELEASE */
    uint32_t nleases;         /* 2 * lay.max_inflight */
    uint32_t *lease_free;     /* stack of free lease slots: O(1) per GET */
    uint32_t nlease_free;
    struct copy *copies;      /* FIFO ring of lay.max_inflight */
    uint32_t copy_head, copy_count;
    uint32_t violations;
    const char *violation;    /* the last one, for the log */
    uint64_t idle_wakes, idle_window_ms;
    int efd;                  /* the client's eventfd (MC_SHM_HELLO_F_EVENTFD), or -1 */
    bool efd_busy;            /* a write to it is in io_uring: at most one */
    uint64_t efd_one;         /* the 8 bytes that write reads */
    struct arena {
        uint8_t *base;
        uint64_t size;
        int refused;          /* not mapped (over an arena limit): ops naming it get this */
    } *arenas;                /* MC_SHM_MAX_ARENAS, registered over the socket */
    uint64_t arena_bytes;     /* mapped size of its arenas (arena_bytes_per_client) */
    uint64_t open_put_bytes;  /* alloc_len of its puts not forgotten yet */
    /* ops being timed (metrics on): open addressing over a power of two above
     * 2 * max_inflight slots, so it never fills (an entry lives while its op is in flight) */
    struct optime *times;
    uint32_t times_mask;
    uint32_t ntimes;
};

/* An answer held back by the test-only test_get_delay_ms knob, or (p != NULL) a put_end
 * held back by test_put_end_delay_ms. */
struct delayed {
    struct delayed *next;
    struct client *c;
    struct put *p;
    uint64_t due_ms;
    struct mc_cqe cqe;
};

/* Image buffers kept for the next put with no local replica: huge-page backed anonymous
 * memory, faulted in once (a fresh mapping of tens of MiB costs a fault per page per put). */
#define IMAGE_CACHE 8
#define IMAGE_CACHE_BYTES (UINT64_C(1) << 30)

struct mc_agent {
    struct mc_agent_config cfg;
    char *socket_path;
    struct mc_master *master;     /* standalone: in-process; cluster: NULL */
    struct mlink *ml;             /* the way to the master, either kind */
    struct cluster *cl;           /* cluster mode: UCX, peers, the owner's side */
    struct mc_alloc *land;        /* cluster: allocator of the landing segment */
    int land_fd, land_ro_fd;
    uint8_t *land_base;
    uint64_t land_size;
    uint32_t nsegs;               /* segments passed to clients: [DRAM if any, landing] */
    uint32_t land_idx;            /* the landing segment's index for clients */
    uint32_t node;
    uint32_t seg_id;
    int seg_fd, seg_ro_fd;
    uint8_t *seg;
    uint64_t seg_size;          /* 0: a pure client node (cluster, --dram 0) */
    bool seg_huge;
    int listen_fd, timer_fd, signal_fd;
    struct io_uring ring;
    bool futex_ops;
    bool draining;            /* SIGTERM: no new clients, finish what is under way */
    uint64_t drain_deadline_ms;
    bool stopping;
    int exit_status;          /* what mc_agent_run returns: 0, or why it had to stop */
    struct client *clients;
    uint32_t nclients;
    uint32_t next_client_id;
    uint64_t last_active_ns;
    uint64_t timer_buf, signal_buf[16];
    struct delayed *delayed;
    struct image_buf {
        uint8_t *p;
        uint64_t cap;
    } images[IMAGE_CACHE];
    uint64_t image_cache_bytes;
    uint64_t arena_bytes;         /* mapped size of every client's arenas */
    uint64_t open_put_limit;      /* open_put_bytes_per_client, its default resolved */
    uint64_t max_per_uid;         /* max_clients_per_uid, its default resolved */
    /* refused connections not on the allow-list, logged at most once a second */
    uint64_t refused_log_ms;
    uint64_t refused_unlogged;
    unsigned refused_last_uid;
    struct stats {
        uint64_t ops, puts, gets, hits, bytes_in, disconnects, refused, violations;
        uint64_t refused_denied, refused_busy; /* of refused: not allowed, over a limit */
        uint64_t arenas_refused, puts_refused, puts_idle_revoked;
        uint64_t delayed_answers;
        uint64_t corrupt_reads, checksum_retries;
    } st;
    /* metrics (NULL: metrics_listen unset, and nothing is timed) */
    struct mc_metrics *metrics;
    struct mc_histo *h_put, *h_get;
    uint64_t metrics_pub_ns;      /* the last publication */
    uint64_t op_t0_ns;            /* when the op being run was taken */
    uint64_t mvals[AM__COUNT];
    uint8_t mpresent[AM__COUNT];
};


struct cluster;

uint64_t agent_now_ms(void);
struct io_uring_sqe *agent_get_sqe(struct mc_agent *a);
void agent_cqe_post(struct client *c, const struct mc_cqe *src);
void agent_cqe_res(struct client *c, uint64_t user_data, int res);
void agent_client_put_ref(struct mc_agent *a, struct client *c);
/* The agent cannot go on (status says why, e.g. MC_ERR_DENIED): it drains as on SIGTERM
 * and mc_agent_run then returns status. */
void agent_fatal(struct mc_agent *a, int status);
struct mc_proto_seg_entry;
struct mc_proto_node_entry;
struct mc_master_stats;
/* info.c: the figures of the metrics page, published from the loop (about every 10 ms) */
void agent_metrics_publish(struct mc_agent *a);
/* cluster.c: why the agent cannot serve master-bound ops now (rejoining, the master silent),
 * or NULL */
const char *cluster_health(const struct mc_agent *a);
/* cluster.c: the peer figures into the metrics arrays (indexed by enum mc_agent_metric) */
void cluster_metrics_fill(const struct mc_agent *a, uint64_t *vals, uint8_t *present);
/* info.c: the JSON of STATS (the agent and the master's figures) and of the cluster view
 * (mcctl cluster); agent_answer_json writes one into the client's staging range and
 * answers (it frees js; NULL: out of memory). */
char *agent_stats_json(struct mc_agent *a, const struct mc_master_stats *ms);
char *agent_cluster_json(const struct mc_master_stats *ms, const struct mc_proto_seg_entry *segs,
                         size_t nseg, const struct mc_proto_node_entry *nodes, size_t nnode);
char *agent_local_cluster_json(struct mc_agent *a);
void agent_answer_json(struct client *c, uint64_t user_data, uint64_t data_off,
                       uint64_t data_len, char *js);
/* agent.c: LIST's staging records, shared with cluster.c */
struct list_out {
    uint8_t *p, *end;
    bool full;
};
void agent_list_one(const char *key, size_t len, void *ctx);

/* A put's writes to peers are all final (cluster.c calls it when the count drops to 0):
 * publish (after put_finish) or revoke (revoked meanwhile). */
void agent_put_writes_final(struct mc_agent *a, struct put *p);
/* A GET's remote read is over: 0 (the bytes are at l->land_off) or an error. */
void agent_get_landed(struct mc_agent *a, struct lease *l, int res);

#endif /* MC_AGENT_INT_H */
