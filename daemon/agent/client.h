/*
 * The agent's clients: the listening socket, who may connect (SO_PEERCRED, allow-lists,
 * per-uid and total caps), the handshake that hands a client its region and the segments,
 * arena registrations, reading each client's submission ring (every SQE copied once and
 * checked), posting completions, and waking a client that sleeps on its completion ring.
 *
 * What an op means is not known here: each checked submission goes to hooks.run, and the
 * per-client tables of the op layer (puts, leases, copies) are made and freed through
 * hooks.attach / hooks.detach. So the arrows point one way: the op rooms call into this
 * one, never the reverse.
 *
 * A client is reference-counted: every loop request and every op under way that names it
 * holds a reference (client_get / client_put), and it is freed at the last one. One thread.
 */
#ifndef MC_AGENT_CLIENT_H
#define MC_AGENT_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/agent/agent_config.h"
#include "daemon/agent/devbuf.h"
#include "daemon/agent/loop.h"
#include "daemon/agent/tenant_cfg.h"
#include "shm/region.h"
#include "shm/ring.h"

#define CLIENT_HANDSHAKE_MS 5000
#define CLIENT_SQES_PER_TURN 64 /* per client, for fairness */
#define CLIENT_VIOLATIONS_MAX 64

struct mc_clients;
struct mc_histo;
struct put;
struct lease;
struct copy;
struct pin_tab;

enum client_state { CL_HANDSHAKE, CL_ACTIVE, CL_CLOSING };

/* A timed op (metrics on): its submission's user_data, when it was taken, which histogram.
 * A client-chosen user_data is a key only: a duplicate keeps the first entry's time. */
enum optime_kind { OT_NONE, OT_PUT, OT_GET };
struct optime {
    uint64_t user_data;
    uint64_t t0_ns;
    uint8_t kind;
};

struct arena {
    uint8_t *base;
    uint64_t size;
    int refused; /* not mapped (over an arena limit): ops naming it get this */
};

struct client {
    struct mc_clients *cs;
    struct client *next;
    enum client_state state;
    int sock;
    uint32_t id;
    uint32_t tenant;          /* index in cs->tenants, fixed at connect (0: the default) */
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
    uint32_t refs;            /* loop requests and ops naming this client */
    struct mc_loop_ev sock_ev, futex_ev, efd_ev;
    uint32_t violations;
    const char *violation;    /* the last one, for the log */
    uint64_t idle_wakes, idle_window_ms;
    int efd;                  /* the client's eventfd (MC_SHM_HELLO_F_EVENTFD), or -1 */
    bool efd_busy;            /* a write to it is in the loop: at most one */
    uint64_t efd_one;         /* the 8 bytes that write reads */
    struct arena *arenas;     /* MC_SHM_MAX_ARENAS, registered over the socket */
    struct devbuf_tab *devbufs; /* its device buffers (devbuf.h), NULL until the first */
    uint64_t arena_bytes;     /* mapped size of its arenas (arena_bytes_per_client) */
    /* ops being timed (metrics on): open addressing over a power of two above
     * 2 * max_inflight slots, so it never fills (an entry lives while its op is in flight) */
    struct optime *times;
    uint32_t times_mask;
    uint32_t ntimes;
    /* the op layer's tables (hooks.attach), opaque here */
    struct put *puts;         /* lay.max_inflight */
    uint32_t nputs;           /* of them in use */
    uint64_t open_put_bytes;  /* alloc_len of its puts not forgotten yet */
    struct lease *leases;     /* nleases: reads outlive their op until RELEASE */
    uint32_t nleases;
    uint32_t *lease_free;     /* stack of free lease slots: O(1) per GET */
    uint32_t nlease_free;
    struct pin_tab *pins;     /* its pins (pin.c), NULL until the first */
    struct copy *copies;      /* FIFO ring of lay.max_inflight */
    uint32_t copy_head, copy_count;
};

/* What the op layer does for the clients. */
struct client_hooks {
    void *ctx;
    /* a checked submission; key holds s->key_len bytes */
    void (*run)(void *ctx, struct client *c, const struct mc_sqe *s, const char *key);
    /* c's tables, once its layout is known: 0 or MC_ERR_NOMEM; detach frees them (also
     * after a failed attach) */
    int (*attach)(void *ctx, struct client *c);
    void (*detach)(void *ctx, struct client *c);
    /* c closes: end what nobody else waits for (the rest ends on its answer) */
    void (*closing)(void *ctx, struct client *c);
};

/* A segment a tenant's clients map read-only. */
struct client_seg {
    int ro_fd;
    uint64_t size;
};

#define CLIENT_SEGS_MAX 4

/* What a tenant's clients map, in the order of the segment index (nothing of any other
 * tenant's: docs/tenants.md). */
struct client_tenant {
    struct client_seg segs[CLIENT_SEGS_MAX];
    uint32_t nsegs;
};

struct mc_clients {
    const struct mc_agent_config *cfg;
    struct mc_loop *loop;
    struct client_hooks hooks;
    struct mc_histo *h_put, *h_get; /* NULL: no op is timed */
    const struct tenant_cfg *tcfg;  /* ntenants: who belongs to which (0: the default) */
    struct client_tenant *tenants;  /* ntenants: what each one's clients map */
    uint32_t ntenants;
    int listen_fd;
    int node_fd; /* the node page (shm/node.h), sent after the segments' fds; -1: none */
    struct mc_loop_ev accept_ev;
    bool accepting;
    bool draining;                /* no new clients; libmc fails new calls */
    struct client *list;
    uint32_t n;
    uint32_t next_id;
    uint64_t arena_bytes;         /* mapped size of every client's arenas */
    struct devbuf_devs devs;      /* the devices clients' device buffers are on */
    uint64_t max_per_uid;         /* max_clients_per_uid, its default resolved */
    /* refused connections not on the allow-list, logged at most once a second */
    uint64_t refused_log_ms;
    uint64_t refused_unlogged;
    unsigned refused_last_uid;
    struct {
        uint64_t disconnects, refused, refused_denied, refused_busy, violations;
        uint64_t sqes; /* taken from every client: the rate adaptive waiting compares */
        uint64_t arenas_refused;
    } st;
};

uint64_t mc_agent_now_ns(void);
uint64_t mc_agent_now_ms(void);

/* Binds the listening socket at path (a stale socket file is replaced; a live agent's is
 * not: MC_ERR_EXISTS). cs is zeroed by the caller and cfg outlives it. */
int clients_open(struct mc_clients *cs, const struct mc_agent_config *cfg, struct mc_loop *loop,
                 const struct client_hooks *hooks, const char *path);
/* Whether a live agent accepts connections at path. */
bool clients_path_is_live(const char *path);
/* Start accepting (arms the loop). */
int clients_start(struct mc_clients *cs);
/* Every client closes; the listening socket goes (its file is unlinked: path). */
void clients_close_all(struct mc_clients *cs);
/* After the loop is gone: whatever still holds references is freed. */
void clients_cleanup(struct mc_clients *cs, const char *path);

/* Drain every client's ring (ops run through hooks.run); true when any was taken. */
bool clients_take(struct mc_clients *cs);
/* Wake clients that were answered, drop those that broke the protocol. */
void clients_answer(struct mc_clients *cs);
/* Going to sleep: ask every client to ring, re-check, arm the waits. false: work arrived
 * (or a client has copies queued: busy), do not sleep. */
bool clients_arm_doorbells(struct mc_clients *cs, bool (*busy)(const struct client *c));
void clients_clear_doorbells(struct mc_clients *cs);
/* No op under way for any client (a CQE owed, or busy(c)). */
bool clients_idle(const struct mc_clients *cs, bool (*busy)(const struct client *c));
/* The periodic checks: handshakes that take too long, empty doorbells, the refused log. */
void clients_tick(struct mc_clients *cs, uint64_t now_ms);
/* No new clients; those connected are told that the agent stops (libmc fails new calls). */
void clients_drain(struct mc_clients *cs);

void client_close(struct client *c, const char *why);
void client_get(struct client *c);
void client_put(struct client *c);

/* Completions: the op ends (c->inflight drops) and the client may be woken this turn. */
void client_cqe_post(struct client *c, const struct mc_cqe *e);
void client_cqe_res(struct client *c, uint64_t user_data, int res);
/* An op that wants no answer (RELEASE with MC_SQE_F_NO_CQE) ended. */
void client_op_done_silent(struct client *c);
/* Start timing op user_data (metrics on; kind OT_PUT or OT_GET). */
void client_time_start(struct client *c, uint64_t user_data, uint64_t t0_ns, uint8_t kind);
/* The client broke the protocol in a way that ends it at the end of this turn. */
void client_violation(struct client *c, const char *what, bool fatal);

/* The bytes of arena `id` at [off, off + len): 0 and *p, ar->refused, or MC_ERR_INVALID. A
 * registration still in the socket is read first. */
int client_arena_span(struct client *c, uint32_t id, uint64_t off, uint64_t len,
                      const uint8_t **p);
/* Device buffer `id`'s [off, off + len) (devbuf_span). As for an arena, a registration still
 * in the socket is read first: the client sends it and may name the buffer in an SQE at once
 * (ring.h, MC_SHM_DEVBUF_ADD), and the ring can be read before the socket. */
int client_devbuf_span(struct client *c, uint32_t id, uint64_t off, uint64_t len,
                       struct devbuf **b_p, uint64_t *dptr_p);

#endif /* MC_AGENT_CLIENT_H */
