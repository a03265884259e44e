/*
 * The agent's clients (client.h): accept, credentials, handshake, arenas, the submission
 * rings read, completions posted, doorbells.
 *
 * What a client can touch is its own region: the agent reads SQEs, keys and staging data
 * from it and writes CQEs into it, and checks every index, offset and length against its
 * own copy of the layout.
 */
#include "daemon/agent/client.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc.h>
#include <mc/mc_status.h>

#include "common/clock.h"
#include "daemon/common/log.h"
#include "daemon/common/metrics.h"
#include "shm/doorbell.h"
#include "shm/fdpass.h"
#include "shm/sqe_check.h"

uint64_t mc_agent_now_ns(void)
{
    return mc_clock_ns();
}

uint64_t mc_agent_now_ms(void)
{
    return mc_agent_now_ns() / 1000000u;
}

static void arm_sock_poll(struct client *c);
static void client_read_socket(struct client *c);
static void client_handshake(struct client *c);

/* --- op latency (metrics on) -------------------------------------------------------------
 * Each timed op has an entry keyed by its user_data from the moment its SQE is taken to the
 * moment its CQE is posted, in a per-client table sized at connection: no allocation and
 * no syscall beyond the clock read on the data path. Linear probing with backward-shift
 * deletion keeps lookups short without tombstones. */

static uint32_t optime_slot(uint64_t user_data, uint32_t mask)
{
    return (uint32_t)((user_data * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & mask;
}

static void optime_add(struct client *c, uint64_t user_data, uint64_t t0_ns, uint8_t kind)
{
    uint32_t i;

    if (c->times == NULL || c->ntimes >= c->times_mask)
        return; /* cannot happen while entries <= ops in flight; never loop for ever */
    for (i = optime_slot(user_data, c->times_mask); c->times[i].kind != OT_NONE;
         i = (i + 1) & c->times_mask) {
        if (c->times[i].user_data == user_data)
            return; /* a client reusing a user_data in flight: the first keeps its time */
    }
    c->times[i] = (struct optime){.user_data = user_data, .t0_ns = t0_ns, .kind = kind};
    c->ntimes++;
}

static void optime_end(struct client *c, uint64_t user_data)
{
    uint32_t m = c->times_mask, i = optime_slot(user_data, m), j, k;
    struct optime *t = c->times;
    uint64_t dt;

    while (t[i].kind != OT_NONE && t[i].user_data != user_data)
        i = (i + 1) & m;
    if (t[i].kind == OT_NONE)
        return;
    dt = mc_agent_now_ns() - t[i].t0_ns;
    mc_histo_observe(t[i].kind == OT_PUT ? c->cs->h_put : c->cs->h_get, dt);
    /* close the gap: move up every later entry of the run whose home slot is not in (i, j] */
    for (j = i;;) {
        j = (j + 1) & m;
        if (t[j].kind == OT_NONE)
            break;
        k = optime_slot(t[j].user_data, m);
        if ((i <= j) ? (k <= i || k > j) : (k <= i && k > j)) {
            t[i] = t[j];
            i = j;
        }
    }
    t[i].kind = OT_NONE;
    c->ntimes--;
}


void client_time_start(struct client *c, uint64_t user_data, uint64_t t0_ns, uint8_t kind)
{
    optime_add(c, user_data, t0_ns, kind);
}

/* --- completions ------------------------------------------------------------------------ */

void client_cqe_post(struct client *c, const struct mc_cqe *src)
{
    struct mc_shm_ring_ctrl *cq = c->r->cq;

    if (c->ntimes != 0)
        optime_end(c, src->user_data);
    c->inflight--;
    if (mc_ring_used_at(cq, c->cq_tail) >= c->lay.cq_entries) {
        /* full: it cannot happen while the client keeps to max_inflight <= cq_entries; above
         * full: the client moved its head past our tail */
        client_violation(c, "its completion ring is full (or its head is forged)", true);
        return;
    }
    *mc_shm_cqe_at(c->r, c->cq_tail) = *src;
    c->cq_tail++;
    mc_ring_publish_tail(cq, c->cq_tail);
    c->cq_dirty = true;
}

void client_cqe_res(struct client *c, uint64_t user_data, int res)
{
    struct mc_cqe e;

    memset(&e, 0, sizeof(e));
    e.user_data = user_data;
    e.res = res;
    client_cqe_post(c, &e);
}

void client_op_done_silent(struct client *c)
{
    c->inflight--;
}

void client_violation(struct client *c, const char *what, bool fatal)
{
    if (fatal)
        c->violations = CLIENT_VIOLATIONS_MAX;
    else
        c->violations++;
    c->violation = what;
}

static void efd_written(struct mc_loop_ev *ev, int res, uint32_t flags)
{
    struct client *c = (struct client *)((char *)ev - offsetof(struct client, efd_ev));

    (void)res;
    (void)flags;
    c->efd_busy = false;
    client_put(c);
}

/* Wake a client sleeping on its CQ: one futex syscall, at once. Queuing the wake in the
 * loop would batch it, but it then waits for the next turn's submission, after every other
 * ring was served: worse tails at 8 clients (docs/decisions.md). The client's eventfd is
 * written through the loop: the client owns its blocking mode and its counter, so a
 * synchronous write could block the agent for ever. */
static void client_wake(struct client *c)
{
    struct mc_shm_ring_ctrl *cq = c->r->cq;

    c->cq_dirty = false;
    if (!mc_shm_doorbell_needed(cq)) /* its fence pairs with the client's after it set
                                        need_wakeup and before it re-checks */
        return;
    mc_shm_doorbell_bump(cq);
    mc_shm_doorbell_wake(cq);
    if (c->efd >= 0 && !c->efd_busy) {
        c->efd_one = 1;
        if (mc_loop_write(c->cs->loop, c->efd, &c->efd_one, sizeof(c->efd_one), &c->efd_ev) != 0)
            return;
        c->efd_busy = true;
        c->refs++;
    }
}

/* --- the submission ring ---------------------------------------------------------------- */

/* Take what the client submitted: each SQE and key copied once, then checked. */
static bool client_drain_sq(struct mc_clients *cs, struct client *c)
{
    struct mc_shm_ring_ctrl *sq = c->r->sq;
    uint32_t ready = mc_ring_ready_at(sq, c->sq_head), n; /* our head, not the client's */
    char key[MC_SHM_KEY_SLOT];
    struct mc_sqe s;

    if (ready > c->lay.sq_entries) {
        /* a tail no producer could have written */
        client_violation(c, "its submission tail is out of range", true);
        return false;
    }
    if (ready > CLIENT_SQES_PER_TURN)
        ready = CLIENT_SQES_PER_TURN;
    for (n = 0; n < ready; n++) {
        memcpy(&s, mc_shm_sqe_at(c->r, c->sq_head), sizeof(s));
        if (s.key_len <= MC_SHM_KEY_SLOT)
            memcpy(key, mc_shm_key_slot(c->r, c->sq_head), s.key_len);
        c->sq_head++;
        cs->st.sqes++;
        /* a RELEASE that wants no answer takes no CQ room: it does not count */
        if (c->inflight >= c->lay.max_inflight &&
            !(s.opcode == MC_OP_RELEASE && (s.flags & MC_SQE_F_NO_CQE))) {
            /* more outstanding than the CQ can answer */
            client_violation(c, "more ops in flight than max_inflight", true);
            break;
        }
        c->inflight++;
        if (mc_shm_sqe_check(&c->lay, &s) != 0) {
            client_violation(c, "invalid submissions", false);
            cs->st.violations++;
            if (s.opcode == MC_OP_RELEASE && (s.flags & MC_SQE_F_NO_CQE))
                c->inflight--;
            else
                client_cqe_res(c, s.user_data, MC_ERR_INVALID);
            continue;
        }
        cs->hooks.run(cs->hooks.ctx, c, &s, key);
        if (c->state != CL_ACTIVE)
            return true;
    }
    /* release pairs with the client's acquire of head: it may reuse those slots */
    mc_ring_publish_head(sq, c->sq_head);
    return ready > 0;
}

bool clients_take(struct mc_clients *cs)
{
    struct client *c;
    bool work = false;

    for (c = cs->list; c != NULL; c = c->next) {
        if (c->state == CL_ACTIVE && client_drain_sq(cs, c))
            work = true;
    }
    return work;
}

void clients_answer(struct mc_clients *cs)
{
    struct client *c, *next;

    for (c = cs->list; c != NULL; c = next) {
        next = c->next;
        if (c->state != CL_ACTIVE)
            continue;
        if (c->cq_dirty)
            client_wake(c);
        if (c->violations >= CLIENT_VIOLATIONS_MAX) {
            mc_warn("client %u (pid %d) broke the protocol (%s): disconnected", c->id,
                    (int)c->pid, c->violation != NULL ? c->violation : "?");
            client_close(c, "protocol violations");
        }
    }
}

/* --- life and death --------------------------------------------------------------------- */

void client_close(struct client *c, const char *why)
{
    struct mc_clients *cs = c->cs;

    if (c->state == CL_CLOSING)
        return;
    mc_debug("client %u (pid %d): %s", c->id, (int)c->pid, why);
    if (c->state == CL_ACTIVE)
        cs->hooks.closing(cs->hooks.ctx, c);
    c->state = CL_CLOSING;
    cs->st.disconnects++;
    cs->n--;
    /* cancel what the loop holds on the client; free when every request is back */
    mc_loop_cancel(cs->loop, &c->sock_ev);
    if (c->futex_armed)
        mc_loop_cancel(cs->loop, &c->futex_ev);
    if (c->efd_busy)
        mc_loop_cancel(cs->loop, &c->efd_ev);
    client_put(c);
}

static void client_free(struct client *c)
{
    struct mc_clients *cs = c->cs;
    struct client **pp;

    for (pp = &cs->list; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    if (c->sock >= 0)
        close(c->sock);
    if (c->efd >= 0)
        close(c->efd);
    if (c->arenas != NULL) {
        for (uint32_t i = 0; i < MC_SHM_MAX_ARENAS; i++) {
            if (c->arenas[i].base != NULL) {
                munmap(c->arenas[i].base, c->arenas[i].size);
                cs->arena_bytes -= c->arenas[i].size;
            }
        }
        free(c->arenas);
    }
    devbuf_tab_destroy(&cs->devs, c->devbufs); /* after its copies (put_client_closing synced them) */
    cs->hooks.detach(cs->hooks.ctx, c);
    mc_shm_region_destroy(c->r);
    free(c->times);
    free(c);
}

void client_get(struct client *c)
{
    c->refs++;
}

/* Drop one reference; the creation reference is dropped by client_close. */
void client_put(struct client *c)
{
    if (--c->refs == 0)
        client_free(c);
}

static void sock_ready(struct mc_loop_ev *ev, int res, uint32_t flags)
{
    struct client *c = (struct client *)((char *)ev - offsetof(struct client, sock_ev));

    (void)flags;
    /* the poll's reference keeps c alive through the close */
    if (c->state == CL_HANDSHAKE && res > 0 && (res & POLLIN)) {
        client_handshake(c);
    } else if (c->state == CL_ACTIVE && res > 0 && (res & POLLIN)) {
        client_read_socket(c); /* arenas; a hang-up reads as 0 bytes */
        if (c->state == CL_ACTIVE && (res & (POLLHUP | POLLRDHUP | POLLERR)))
            client_close(c, "socket closed");
        if (c->state == CL_ACTIVE)
            arm_sock_poll(c);
    } else if (c->state != CL_CLOSING) {
        client_close(c, "socket closed");
    }
    client_put(c);
}

static void futex_woken(struct mc_loop_ev *ev, int res, uint32_t flags)
{
    struct client *c = (struct client *)((char *)ev - offsetof(struct client, futex_ev));

    (void)flags;
    c->futex_armed = false;
    if (c->state == CL_ACTIVE && res == 0 && mc_ring_ready(c->r->sq) == 0)
        c->idle_wakes++; /* woken with nothing to do */
    client_put(c);
}

static void arm_sock_poll(struct client *c)
{
    if (mc_loop_poll(c->cs->loop, c->sock, POLLIN | POLLRDHUP | POLLHUP | POLLERR,
                     &c->sock_ev) != 0) {
        client_close(c, "event loop full");
        return;
    }
    c->refs++;
}

/* --- who may connect -------------------------------------------------------------------- */

/* true when `id` is one of the list's comma-separated decimal ids; an entry with anything
 * else in it ("10x", "-1", " ") matches nothing */
static bool uid_listed(const char *list, unsigned long id)
{
    const char *p = list;

    while (p != NULL && *p != '\0') {
        char *end;
        unsigned long v;

        if (*p >= '0' && *p <= '9') {
            v = strtoul(p, &end, 10);
            if (v == id && (*end == ',' || *end == '\0'))
                return true;
        }
        p = strchr(p, ',');
        if (p != NULL)
            p++;
    }
    return false;
}

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59 /* Linux >= 4.13 */
#endif

/* The kernel caps a process's supplementary groups at NGROUPS_MAX (65536): a longer answer
 * is not believed. */
#define MC_AGENT_PEER_GROUPS_MAX 65536u

/* The peer's credentials at connect: uid, primary gid, supplementary groups. */
struct peer {
    struct ucred cr;
    bool have_cred;
    gid_t small[64], *groups; /* small, or a malloc'd buffer for a long list */
    size_t ngroups;
};

/*
 * The peer's supplementary groups (SO_PEERGROUPS, the groups it had at connect). The first
 * try uses a stack buffer that holds the usual few groups; ERANGE says how much is needed,
 * and one larger buffer is tried, bounded. A kernel without SO_PEERGROUPS, or any other
 * failure, leaves none: nobody is admitted or placed in a tenant by this path.
 */
static void peer_groups(struct peer *p, int sock)
{
    socklen_t len = sizeof(p->small), cap = sizeof(p->small);

    p->groups = p->small;
    p->ngroups = 0;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERGROUPS, p->groups, &len) != 0) {
        if (errno != ERANGE || len <= sizeof(p->small) ||
            len > MC_AGENT_PEER_GROUPS_MAX * sizeof(gid_t))
            return;
        cap = len;
        p->groups = malloc(cap);
        if (p->groups == NULL) {
            p->groups = p->small;
            return;
        }
        if (getsockopt(sock, SOL_SOCKET, SO_PEERGROUPS, p->groups, &len) != 0)
            return;
    }
    if (len > cap) /* never read past the buffer, whatever the kernel said */
        len = cap;
    p->ngroups = len / sizeof(gid_t);
}

static void peer_cleanup(struct peer *p)
{
    if (p->groups != p->small)
        free(p->groups);
}

/* The tenant of the peer (0: the default tenant). */
static uint32_t peer_tenant(const struct mc_clients *cs, const struct peer *p)
{
    return (uint32_t)tenant_cfg_match(cs->tcfg, cs->ntenants, p->cr.uid, p->cr.gid, p->groups,
                                      p->ngroups);
}

/*
 * Who may connect: root and the agent's own uid always; then any uid on allow_uids, any
 * peer whose primary or supplementary group is on allow_gids, and anyone a tenant lists.
 * The lists add to the default, they never narrow it.
 */
static bool cred_allowed(const struct mc_clients *cs, const struct peer *p, uint32_t tenant)
{
    if (p->cr.uid == 0 || p->cr.uid == getuid() || tenant != 0)
        return true;
    if (cs->cfg->allow_uids != NULL && uid_listed(cs->cfg->allow_uids, p->cr.uid))
        return true;
    if (cs->cfg->allow_gids == NULL)
        return false;
    if (uid_listed(cs->cfg->allow_gids, p->cr.gid))
        return true;
    for (size_t i = 0; i < p->ngroups; i++) {
        if (uid_listed(cs->cfg->allow_gids, p->groups[i]))
            return true;
    }
    return false;
}

/* The welcome and its descriptors, or a refusal: nonblocking (the loop must not wait on a
 * client); a client whose socket is full gets nothing, and its handshake times out. */
static void send_welcome(int sock, const struct mc_shm_welcome *w, const int *fds, int nfds)
{
    (void)mc_shm_fd_send(sock, w, sizeof(*w), 1, fds, nfds);
}

static void refuse(int sock, int status)
{
    struct mc_shm_welcome w;

    memset(&w, 0, sizeof(w));
    w.magic = MC_SHM_MAGIC;
    w.abi = MC_SHM_ABI;
    w.status = status;
    send_welcome(sock, &w, NULL, 0);
}

static void refused_log_flush(struct mc_clients *cs, uint64_t now)
{
    mc_warn("refused %" PRIu64 " more connections in the last %" PRIu64 " ms (not on the "
            "allow-list), last uid %u", cs->refused_unlogged, now - cs->refused_log_ms,
            cs->refused_last_uid);
    cs->refused_unlogged = 0;
}

/* A refused uid may connect in a loop: one line a second at most, with the count of those
 * not logged (the stats count every one). */
static void refused_log(struct mc_clients *cs, const struct ucred *cr, bool have_cred)
{
    uint64_t now = mc_agent_now_ms();

    cs->refused_last_uid = have_cred ? (unsigned)cr->uid : UINT_MAX;
    if (cs->refused_log_ms != 0 && now - cs->refused_log_ms < 1000) {
        cs->refused_unlogged++;
        return;
    }
    if (cs->refused_unlogged != 0)
        refused_log_flush(cs, now);
    if (have_cred)
        mc_warn("client pid %d uid %u refused: not on the allow-list", (int)cr->pid,
                (unsigned)cr->uid);
    else
        mc_warn("a client refused: its credentials cannot be read");
    cs->refused_log_ms = now;
}

/* Connections of one uid that are not closing. */
static uint64_t uid_clients(const struct mc_clients *cs, uid_t uid)
{
    const struct client *c;
    uint64_t n = 0;

    for (c = cs->list; c != NULL; c = c->next) {
        if (c->uid == uid && c->state != CL_CLOSING)
            n++;
    }
    return n;
}

static void on_accept(struct mc_clients *cs, int fd)
{
    struct peer p = {.cr = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1}};
    socklen_t len = sizeof(p.cr);
    struct ucred cr;
    struct client *c;
    bool have_cred, allowed = false;
    uint32_t tenant = 0;

    have_cred = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &p.cr, &len) == 0;
    if (have_cred) {
        peer_groups(&p, fd);
        tenant = peer_tenant(cs, &p);
        allowed = cred_allowed(cs, &p, tenant);
        peer_cleanup(&p);
    }
    cr = p.cr;
    if (!allowed) {
        refused_log(cs, &cr, have_cred);
        refuse(fd, MC_ERR_DENIED);
        close(fd);
        cs->st.refused++;
        cs->st.refused_denied++;
        return;
    }
    /* the per-uid cap keeps one client (or one user's runaway pool of them) from taking
     * every slot of max_clients; root and the agent's own uid get no exemption, since the
     * default allow-list is exactly those two */
    if (cs->n >= cs->cfg->max_clients || cs->draining ||
        uid_clients(cs, cr.uid) >= cs->max_per_uid) {
        if (!cs->draining && cs->n < cs->cfg->max_clients)
            mc_debug("client pid %d uid %u refused: it holds max_clients_per_uid (%" PRIu64
                     ") connections", (int)cr.pid, (unsigned)cr.uid, cs->max_per_uid);
        refuse(fd, cs->draining ? MC_ERR_UNAVAILABLE : MC_ERR_BUSY);
        close(fd);
        cs->st.refused++;
        if (!cs->draining)
            cs->st.refused_busy++;
        return;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        refuse(fd, MC_ERR_NOMEM);
        close(fd);
        return;
    }
    c->cs = cs;
    c->sock = fd;
    c->tenant = tenant;
    c->uid = cr.uid;
    c->pid = cr.pid;
    c->id = ++cs->next_id;
    c->state = CL_HANDSHAKE;
    c->efd = -1;
    c->accepted_ms = mc_agent_now_ms();
    c->refs = 1;
    c->next = cs->list;
    cs->list = c;
    cs->n++;
    c->sock_ev.fn = sock_ready;
    c->futex_ev.fn = futex_woken;
    c->efd_ev.fn = efd_written;
    arm_sock_poll(c);
}

static bool fd_is_eventfd(int fd)
{
    char path[64], link[64];
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, link, sizeof(link) - 1);
    if (n <= 0)
        return false;
    link[n] = '\0';
    return strcmp(link, "anon_inode:[eventfd]") == 0;
}

/* Map an arena the client registered: its own sealed memfd, exactly the size it says.
 * Registrations are not answered, so an arena over the client's or the agent's arena limit
 * is remembered as refused (not mapped: a sparse memfd costs the client nothing, but each
 * mapping takes the agent's address space, and enough of them leave it none for new
 * clients) and the ops naming it fail; the connection stays usable. */
static int arena_add(struct client *c, const struct mc_shm_arena_msg *m, int fd)
{
    struct mc_clients *cs = c->cs;
    struct arena *ar;
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    void *p;

    if (m->magic != MC_SHM_MAGIC || m->type != MC_SHM_ARENA_ADD || m->reserved != 0 ||
        m->arena_id >= MC_SHM_MAX_ARENAS || c->arenas[m->arena_id].base != NULL ||
        c->arenas[m->arena_id].refused != 0 || m->size == 0 || seals < 0 ||
        (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW) ||
        fstat(fd, &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size != m->size)
        return MC_ERR_PROTO;
    ar = &c->arenas[m->arena_id];
    /* checked before the mapping, each sum without overflow (m->size is the client's) */
    if (m->size > cs->cfg->arena_bytes_per_client - c->arena_bytes ||
        m->size > cs->cfg->arena_bytes_total - cs->arena_bytes) {
        ar->refused = MC_ERR_NO_SPACE;
        cs->st.arenas_refused++;
        mc_warn("client %u (pid %d uid %u): arena of %" PRIu64 " bytes refused: %s arena "
                "limit (%" PRIu64 " bytes mapped of %" PRIu64 ")", c->id, (int)c->pid,
                (unsigned)c->uid, m->size,
                m->size > cs->cfg->arena_bytes_per_client - c->arena_bytes ? "over the client's"
                                                                          : "over the agent's",
                m->size > cs->cfg->arena_bytes_per_client - c->arena_bytes ? c->arena_bytes
                                                                          : cs->arena_bytes,
                m->size > cs->cfg->arena_bytes_per_client - c->arena_bytes
                    ? cs->cfg->arena_bytes_per_client
                    : cs->cfg->arena_bytes_total);
        return 0;
    }
    p = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        ar->refused = MC_ERR_NOMEM;
        cs->st.arenas_refused++;
        mc_warn("client %u (pid %d): arena of %" PRIu64 " bytes not mapped: %s", c->id,
                (int)c->pid, m->size, strerror(errno));
        return 0;
    }
    ar->base = p;
    ar->size = m->size;
    c->arena_bytes += m->size;
    cs->arena_bytes += m->size;
    return 0;
}

/* After the handshake the socket carries arena and device buffer registrations only;
 * anything else, or a closed socket, ends the client. */
static void client_read_socket(struct client *c)
{
    union {
        struct mc_shm_arena_msg a;
        struct mc_shm_devbuf_msg d;
    } m;

    while (c->state == CL_ACTIVE) {
        int fd = -1, nfds = 0, err;
        size_t n = 0;

        /* one message and one descriptor: more descriptors, or a truncated message, is a
         * protocol error (mc_shm_fd_recv closes what came) */
        err = mc_shm_fd_recv(c->sock, &m, sizeof(m), 1, &fd, 1, &n, &nfds);
        if (err == MC_ERR_TIMEOUT)
            return; /* nothing more queued */
        if ((err == 0 && n == 0) || err == MC_ERR_UNAVAILABLE) {
            client_close(c, "socket closed");
            return;
        }
        if (err == 0 && n == sizeof(m.d) && m.d.type == MC_SHM_DEVBUF_ADD) {
            err = devbuf_add(&c->cs->devs, &c->devbufs, &m.d, nfds == 1 ? fd : -1); /* takes fd */
            nfds = 0;
        } else if (err == 0) {
            err = n == sizeof(m.a) && nfds == 1 ? arena_add(c, &m.a, fd) : MC_ERR_PROTO;
        }
        if (nfds == 1)
            close(fd); /* the mapping keeps the arena */
        if (err != 0) {
            mc_warn("client %u (pid %d): bad arena registration: %s", c->id, (int)c->pid,
                    mc_strerror(err));
            client_close(c, "bad socket message");
            return;
        }
    }
}

int client_arena_span(struct client *c, uint32_t id, uint64_t off, uint64_t len,
                      const uint8_t **p)
{
    struct arena *ar = &c->arenas[id];

    if (ar->base == NULL)
        client_read_socket(c); /* its registration may still be in the socket */
    if (c->state == CL_ACTIVE && ar->refused != 0)
        return ar->refused; /* over an arena limit: it was never mapped */
    if (c->state != CL_ACTIVE || ar->base == NULL || off > ar->size || len > ar->size - off)
        return MC_ERR_INVALID;
    *p = ar->base + off;
    return 0;
}

int client_devbuf_span(struct client *c, uint32_t id, uint64_t off, uint64_t len,
                       struct devbuf **b_p, uint64_t *dptr_p)
{
    int err = devbuf_span(c->devbufs, id, off, len, b_p, dptr_p);

    if (err == MC_ERR_INVALID && c->state == CL_ACTIVE) {
        client_read_socket(c); /* its registration may still be in the socket */
        err = devbuf_span(c->devbufs, id, off, len, b_p, dptr_p);
    }
    return err;
}

/* The hello arrived (or the socket closed): answer with the region and the segment. */
static void client_handshake(struct client *c)
{
    struct mc_clients *cs = c->cs;
    struct mc_shm_hello h;
    struct mc_shm_welcome w;
    struct mc_shm_layout lay;
    char name[32];
    int err, fds[2 + MC_SHM_MAX_SEGS], rfd = -1, nfds = 0;
    size_t n = 0;

    /* the hello, and the client's eventfd when it sends one; nothing else */
    err = mc_shm_fd_recv(c->sock, &h, sizeof(h), 1, &rfd, 1, &n, &nfds);
    if (err == MC_ERR_PROTO)
        n = 1; /* something came, and it is not a hello */
    else if (err != 0)
        n = 0; /* gone */
    if (nfds == 0)
        rfd = -1;
    if (err != 0 || n != sizeof(h) || h.magic != MC_SHM_MAGIC || h.abi != MC_SHM_ABI ||
        (h.flags & ~MC_SHM_HELLO_F_EVENTFD) != 0 ||
        ((h.flags & MC_SHM_HELLO_F_EVENTFD) != 0) != (rfd >= 0) ||
        (rfd >= 0 && !fd_is_eventfd(rfd))) {
        if (rfd >= 0)
            close(rfd);
        if (n > 0)
            refuse(c->sock, MC_ERR_PROTO);
        client_close(c, n == 0 ? "closed before hello" : "bad hello");
        return;
    }
    c->efd = rfd;
    err = mc_shm_layout_init(&lay, (uint32_t)cs->cfg->sq_entries, (uint32_t)cs->cfg->sq_entries,
                             (uint32_t)cs->cfg->staging_slot_size, (uint32_t)cs->cfg->staging_slots,
                             (uint32_t)cs->cfg->max_inflight);
    snprintf(name, sizeof(name), "mc-client-%u", c->id);
    if (err == 0)
        err = mc_shm_region_create(name, &lay, c->id, &c->r);
    if (err == 0) {
        c->lay = c->r->lay;
        if (cs->cfg->arena_reads)
            c->r->hdr->features |= MC_SHM_F_ARENA_GETS; /* before the welcome: read once */
        c->arenas = calloc(MC_SHM_MAX_ARENAS, sizeof(*c->arenas));
        if (cs->h_put != NULL) {
            c->times_mask = 1;
            while (c->times_mask + 1 < 2 * c->lay.max_inflight + 2)
                c->times_mask = c->times_mask * 2 + 1;
            c->times = calloc((size_t)c->times_mask + 1, sizeof(*c->times));
            if (c->times == NULL)
                err = MC_ERR_NOMEM;
        }
        if (c->arenas == NULL)
            err = MC_ERR_NOMEM;
        if (err == 0)
            err = cs->hooks.attach(cs->hooks.ctx, c);
    }
    if (err != 0) {
        mc_warn("client %u: cannot set up its region: %s", c->id, mc_strerror(err));
        refuse(c->sock, err);
        client_close(c, "no region");
        return;
    }
    memset(&w, 0, sizeof(w));
    w.magic = MC_SHM_MAGIC;
    w.abi = MC_SHM_ABI;
    w.client_id = c->id;
    w.region_size = c->lay.region_size;
    fds[0] = c->r->fd;
    /* its tenant's segments only, in the order of the segment index */
    for (uint32_t k = 0; k < cs->tenants[c->tenant].nsegs; k++) {
        w.seg_size[w.nsegs] = cs->tenants[c->tenant].segs[k].size;
        fds[1 + w.nsegs++] = cs->tenants[c->tenant].segs[k].ro_fd;
    }
    nfds = 1 + (int)w.nsegs;
    if (cs->node_fd >= 0) /* the node page last: libmc knows it by the count */
        fds[nfds++] = cs->node_fd;
    send_welcome(c->sock, &w, fds, nfds);
    c->state = CL_ACTIVE;
    mc_debug("client %u: pid %d uid %u connected", c->id, (int)c->pid, (unsigned)c->uid);
    arm_sock_poll(c); /* from now on the socket only tells life */
}


/* --- the loop's view -------------------------------------------------------------------- */

bool clients_arm_doorbells(struct mc_clients *cs, bool (*busy)(const struct client *c))
{
    struct client *c;

    for (c = cs->list; c != NULL; c = c->next) {
        if (c->state == CL_ACTIVE)
            atomic_store_explicit(&c->r->sq->need_wakeup, 1, memory_order_seq_cst);
    }
    atomic_thread_fence(memory_order_seq_cst); /* pairs with the client's fence between
                                                  publishing its tail and reading the flag */
    for (c = cs->list; c != NULL; c = c->next) {
        uint32_t val;

        if (c->state != CL_ACTIVE)
            continue;
        val = atomic_load_explicit(&c->r->sq->futex, memory_order_seq_cst);
        if (mc_ring_ready(c->r->sq) != 0 || busy(c))
            return false; /* work arrived: do not sleep */
        if (!mc_loop_has_futex(cs->loop) || c->futex_armed)
            continue;
        /* a bump after `val` was read makes the wait return at once: nothing is lost */
        if (mc_loop_futex_wait(cs->loop, (uint32_t *)&c->r->sq->futex, val, &c->futex_ev) != 0)
            continue;
        c->futex_armed = true;
        c->refs++;
    }
    return true;
}

void clients_clear_doorbells(struct mc_clients *cs)
{
    struct client *c;

    for (c = cs->list; c != NULL; c = c->next) {
        if (c->state == CL_ACTIVE)
            atomic_store_explicit(&c->r->sq->need_wakeup, 0, memory_order_relaxed);
    }
}

bool clients_idle(const struct mc_clients *cs, bool (*busy)(const struct client *c))
{
    const struct client *c;

    for (c = cs->list; c != NULL; c = c->next) {
        if (c->state == CL_ACTIVE && (c->inflight != 0 || busy(c)))
            return false;
    }
    return true;
}

void clients_tick(struct mc_clients *cs, uint64_t now)
{
    struct client *c, *next;

    if (cs->refused_unlogged != 0 && now - cs->refused_log_ms >= 1000) {
        refused_log_flush(cs, now);
        cs->refused_log_ms = now;
    }
    for (c = cs->list; c != NULL; c = next) {
        next = c->next;
        if (c->state == CL_HANDSHAKE && now - c->accepted_ms > CLIENT_HANDSHAKE_MS) {
            client_close(c, "no hello in time");
            continue;
        }
        if (c->state != CL_ACTIVE)
            continue;
        if (now - c->idle_window_ms >= 1000) {
            if (c->idle_wakes > cs->cfg->idle_wakeups_max)
                client_violation(c, "too many empty doorbells", true);
            c->idle_wakes = 0;
            c->idle_window_ms = now;
        }
    }
}

void clients_drain(struct mc_clients *cs)
{
    struct client *c;

    cs->draining = true;
    for (c = cs->list; c != NULL; c = c->next) {
        if (c->state == CL_ACTIVE) /* libmc fails new calls with UNAVAILABLE */
            atomic_store_explicit(&c->r->hdr->agent_state, 1, memory_order_release);
    }
}

static void accepted(struct mc_loop_ev *ev, int res, uint32_t flags)
{
    struct mc_clients *cs = (struct mc_clients *)((char *)ev - offsetof(struct mc_clients,
                                                                         accept_ev));

    if (res >= 0)
        on_accept(cs, res);
    if (!(flags & MC_LOOP_F_MORE) && cs->accepting &&
        mc_loop_accept(cs->loop, cs->listen_fd, &cs->accept_ev) != 0)
        mc_error("cannot accept clients any more: the event loop is full");
}

/* Whether a live agent accepts connections at path (a socket file left by an agent that
 * died refuses them). */
bool clients_path_is_live(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    bool live;
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path))
        return false; /* listen_on reports it */
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return live;
}

static int listen_on(const char *path, int *fd_p)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd, err;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        mc_error("socket path too long: %s", path);
        return MC_ERR_INVALID;
    }
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return MC_ERR_IO;
    /* a socket file left by an agent that died is replaced; a live agent is not */
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        mc_error("another agent is listening on %s", path);
        close(fd);
        return MC_ERR_EXISTS;
    }
    unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 128) != 0) {
        err = errno;
        mc_error("cannot listen on %s: %s", path, strerror(err));
        close(fd);
        return err == EACCES ? MC_ERR_DENIED : MC_ERR_IO;
    }
    chmod(path, 0666); /* access is decided by SO_PEERCRED and the allow-list */
    *fd_p = fd;
    return 0;
}


int clients_open(struct mc_clients *cs, const struct mc_agent_config *cfg, struct mc_loop *loop,
                 const struct client_hooks *hooks, const char *path)
{
    cs->cfg = cfg;
    cs->loop = loop;
    cs->hooks = *hooks;
    cs->accept_ev.fn = accepted;
    cs->max_per_uid = cfg->max_clients_per_uid;
    if (cs->max_per_uid == 0)
        cs->max_per_uid = cfg->max_clients - cfg->max_clients / 4; /* >= 1: max_clients >= 1 */
    cs->listen_fd = -1;
    cs->devs.topts = (struct mc_dev_test_opts){.delay_us = (uint32_t)cfg->gpu_test_delay_us,
                                               .fail_nth = (uint32_t)cfg->gpu_test_fail_nth,
                                               .fail_every = (uint32_t)cfg->gpu_test_fail_every};
    return listen_on(path, &cs->listen_fd);
}

int clients_start(struct mc_clients *cs)
{
    int err = mc_loop_accept(cs->loop, cs->listen_fd, &cs->accept_ev);

    cs->accepting = err == 0;
    return err;
}

void clients_close_all(struct mc_clients *cs)
{
    struct client *c, *next;

    cs->accepting = false;
    for (c = cs->list; c != NULL; c = next) {
        next = c->next;
        if (c->state != CL_CLOSING)
            client_close(c, "agent stopping"); /* may free it */
    }
}

void clients_cleanup(struct mc_clients *cs, const char *path)
{
    struct client *c;

    while ((c = cs->list) != NULL) {
        cs->list = c->next; /* the loop is torn down: drop the rest now */
        c->next = NULL;
        c->refs = 1;
        client_put(c);
    }
    devbuf_devs_cleanup(&cs->devs); /* no client is left to copy from */
    if (cs->listen_fd >= 0) {
        close(cs->listen_fd);
        unlink(path);
        cs->listen_fd = -1;
    }
}
