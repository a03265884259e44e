/*
 * Connecting to the local agent and closing (mc_connect, mc_close): the socket path rule,
 * the hello/welcome handshake with SCM_RIGHTS (docs/protocol.md, "Connecting"), attaching
 * the region and mapping the segments read-only. Not the ring engine (engine.c).
 *
 * Everything the agent sends is checked before use: the welcome's size, magic, ABI and
 * counts, the number of fds against nsegs, the region header (mc_shm_region_attach) and
 * each segment's size and seals. Every fd received is closed on every error path.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/err.h"
#include "libmc/export.h"
#include "libmc/op.h"
#include "shm/fdpass.h"
#include "shm/memfd.h"
#include "shm/node.h"
#include "shm/region.h"
#include "shm/sockpath.h"

#define MC_NFDS_MAX (2 + MC_SHM_MAX_SEGS) /* the region, the segments, the node page */

/* The socket path by the rule of docs/protocol.md (shm/sockpath.h) into addr; 0 or
 * MC_ERR_INVALID. */
static int socket_addr(const char *arg, struct sockaddr_un *addr)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    return mc_shm_socket_path(arg, addr->sun_path, sizeof(addr->sun_path), NULL);
}

/* errno of socket, connect or the handshake's messages: no socket at the path means no
 * agent (MC_ERR_UNAVAILABLE), a full backlog a timeout; the rest as everywhere. */
static int connect_err(int e)
{
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        return MC_ERR_UNAVAILABLE;
    case EAGAIN:
        return MC_ERR_TIMEOUT;
    default:
        return mc_err_from_errno(e);
    }
}

static uint32_t op_timeout_from_env(void)
{
    const char *s = getenv("MC_OP_TIMEOUT_MS");
    unsigned long v;
    char *end;

    if (s == NULL || s[0] == '\0')
        return MC_OP_TIMEOUT_MS_DEFAULT;
    errno = 0;
    v = strtoul(s, &end, 10);
    /* a malformed value is ignored rather than fatal: libmc has no way to report it but
     * a failed connect, which would be out of proportion */
    if (errno != 0 || *end != '\0' || v == 0 || v > INT_MAX)
        return MC_OP_TIMEOUT_MS_DEFAULT;
    return (uint32_t)v;
}

/* MC_CLIENT_SPIN_US: the longest a waiter polls the CQ before it sleeps (0: never polls);
 * whether it polls at all is the node page's call (engine.c, spin_begin). */
static uint64_t spin_ns_from_env(void)
{
    const char *s = getenv("MC_CLIENT_SPIN_US");
    unsigned long v;
    char *end;

    if (s == NULL || s[0] == '\0')
        return MC_CLIENT_SPIN_NS;
    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > 1000000)
        return MC_CLIENT_SPIN_NS; /* malformed: ignored, as for MC_OP_TIMEOUT_MS */
    return (uint64_t)v * 1000u;
}

/* MC_CLIENT_NO_USER_COPY=1 (any value but empty or "0"): never let the agent read the
 * caller's memory with process_vm_readv (MC_SQE_F_USER); large puts go through staging.
 * For hardened hosts, and for tests of the staging fallback. */
static bool user_copy_from_env(void)
{
    const char *s = getenv("MC_CLIENT_NO_USER_COPY");

    return s == NULL || s[0] == '\0' || strcmp(s, "0") == 0;
}

/* Send the hello, with the eventfd when efd >= 0 (MC_SHM_HELLO_F_EVENTFD, SCM_RIGHTS). */
static int send_hello(int sock, int efd)
{
    struct mc_shm_hello hello = {.magic = MC_SHM_MAGIC,
                                 .abi = MC_SHM_ABI,
                                 .flags = efd >= 0 ? MC_SHM_HELLO_F_EVENTFD : 0};

    return mc_shm_fd_send(sock, &hello, sizeof(hello), 0, &efd, efd >= 0 ? 1 : 0);
}

/* Let the agent read our memory (process_vm_readv, MC_SQE_F_USER) under Yama's
 * ptrace_scope 1: PR_SET_PTRACER names the agent's pid from SO_PEERCRED. Process-wide:
 * the last client connected names its agent. Without Yama (EINVAL) the classic same-uid
 * rule applies and nothing is needed; any refusal shows later as MC_ERR_DENIED from the
 * agent, and libmc falls back to staging. */
static void allow_agent_ptrace(int sock)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);

    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.pid > 0)
        (void)prctl(PR_SET_PTRACER, (unsigned long)cr.pid, 0, 0, 0);
}

static void close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

/* Wait until the socket is readable or timeout_ms passes; 0, MC_ERR_TIMEOUT, MC_ERR_IO. */
static int wait_readable(int sock, int timeout_ms)
{
    struct pollfd p = {.fd = sock, .events = POLLIN};
    uint64_t deadline = mc_engine_now_ms() + (uint64_t)timeout_ms;
    uint64_t now;
    int rc;

    for (;;) {
        now = mc_engine_now_ms();
        if (now >= deadline)
            return MC_ERR_TIMEOUT;
        rc = poll(&p, 1, (int)(deadline - now));
        if (rc > 0)
            return 0;
        if (rc == 0)
            return MC_ERR_TIMEOUT;
        if (errno != EINTR)
            return MC_ERR_IO;
    }
}

/*
 * Receive the welcome and its fds. On success *nfds_p fds are in fds (the caller owns
 * them); on failure none is left open. Returns 0 or an MC_ERR_* code; a welcome with a
 * non-zero status returns that status (MC_ERR_DENIED ...).
 */
static int recv_welcome(int sock, int timeout_ms, struct mc_shm_welcome *w, int *fds,
                        int *nfds_p)
{
    size_t n;
    int nfds = 0;
    int err;

    err = wait_readable(sock, timeout_ms);
    if (err != 0)
        return err;
    memset(w, 0, sizeof(*w));
    /* A refusing agent sends its welcome and closes without reading our hello; closing
     * with unread data makes the kernel report ECONNRESET on our socket once, before the
     * welcome still queued for us: read again after it. */
    for (int resets = 0;;) {
        err = mc_shm_fd_recv(sock, w, sizeof(*w), 1, fds, MC_NFDS_MAX, &n, &nfds);
        if (err != MC_ERR_UNAVAILABLE || resets++ > 0)
            break;
    }
    if (err != 0)
        return err; /* no descriptor is left open */

    if (n == 0)
        err = MC_ERR_UNAVAILABLE; /* the agent hung up during the handshake */
    else if (n < offsetof(struct mc_shm_welcome, client_id))
        err = MC_ERR_PROTO;
    else if (w->magic != MC_SHM_MAGIC || w->abi != MC_SHM_ABI)
        err = MC_ERR_PROTO;
    else if (w->status > 0)
        err = MC_ERR_PROTO;
    else if (w->status < 0)
        err = w->status; /* the agent's verdict, as is (MC_ERR_DENIED, MC_ERR_NOMEM ...) */
    else if (n != sizeof(*w) || w->nsegs > MC_SHM_MAX_SEGS ||
             ((uint32_t)nfds != 1 + w->nsegs && (uint32_t)nfds != 2 + w->nsegs))
        err = MC_ERR_PROTO;
    if (err != 0) {
        close_fds(fds, nfds);
        return err;
    }
    *nfds_p = nfds;
    return 0;
}

/* Map segment fd read-only; the segment must be at least size bytes and sealed against
 * shrinking, or a truncation by the agent would SIGBUS us. Does not close fd. */
static int map_segment(int fd, uint64_t size, const uint8_t **p_p)
{
    struct stat st;
    void *p;
    int seals;
    int err;

    if (size == 0 || fstat(fd, &st) < 0 || st.st_size < 0 || (uint64_t)st.st_size < size)
        return MC_ERR_PROTO;
    seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK))
        return MC_ERR_PROTO;
    err = mc_shm_map(fd, size, false, &p);
    if (err != 0)
        return err == MC_ERR_NOMEM ? MC_ERR_NOMEM : MC_ERR_IO;
    *p_p = p;
    return 0;
}

/* Map the node page (shm/node.h) read-write: sealed against shrinking, at least a page.
 * Every client may write it, so a wrong magic (another client scribbled it: the agent
 * restores it at its next tick) only means *p_p = NULL: this process counts alone. Does not
 * close fd. */
static int map_node(int fd, struct mc_shm_node **p_p)
{
    struct stat st;
    struct mc_shm_node *n;
    void *p;
    int seals;
    int err;

    if (fstat(fd, &st) < 0 || st.st_size < (off_t)MC_SHM_NODE_SIZE)
        return MC_ERR_PROTO;
    seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK))
        return MC_ERR_PROTO;
    err = mc_shm_map(fd, MC_SHM_NODE_SIZE, true, &p);
    if (err != 0)
        return err == MC_ERR_NOMEM ? MC_ERR_NOMEM : MC_ERR_IO;
    n = p;
    if (n->magic != MC_SHM_NODE_MAGIC) {
        munmap(p, MC_SHM_NODE_SIZE);
        n = NULL;
    }
    *p_p = n;
    return 0;
}

static void unmap_segments(struct mc_client *c)
{
    for (uint32_t i = 0; i < c->e.nsegs; i++)
        munmap((void *)c->e.seg[i], (size_t)c->e.seg_size[i]);
    c->e.nsegs = 0;
    if (c->e.node != NULL)
        munmap(c->e.node, MC_SHM_NODE_SIZE);
    c->e.node = NULL;
}

/* Connect the socket and do the hello / welcome exchange; with_efd: offer c->e.efd. */
static int handshake(struct mc_client *c, const struct sockaddr_un *addr, bool with_efd,
                     struct mc_shm_welcome *w, int *fds, int *nfds_p)
{
    int err;

    c->e.sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (c->e.sock < 0)
        return connect_err(errno);
    while (connect(c->e.sock, (const struct sockaddr *)addr, sizeof(*addr)) < 0) {
        if (errno != EINTR) {
            err = connect_err(errno);
            goto err_close_sock;
        }
    }
    /* A refused peer gets its welcome (MC_ERR_DENIED) and a closed socket, maybe before our
     * hello: so even when the send fails, the welcome decides. */
    (void)send_hello(c->e.sock, with_efd ? c->e.efd : -1);
    err = recv_welcome(c->e.sock, (int)c->e.op_timeout_ms, w, fds, nfds_p);
    if (err != 0)
        goto err_close_sock;
    return 0;

err_close_sock:
    close(c->e.sock);
    c->e.sock = -1;
    return err;
}

MC_EXPORT int mc_connect(const char *socket_path, mc_client_t **out)
{
    struct sockaddr_un addr;
    struct mc_shm_welcome w;
    int fds[MC_NFDS_MAX];
    struct mc_client *c;
    int nfds = 0;
    int err;

    if (out == NULL)
        return MC_ERR_INVALID;
    err = socket_addr(socket_path, &addr);
    if (err != 0)
        return err;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return MC_ERR_NOMEM;
    c->e.op_timeout_ms = op_timeout_from_env();
    c->e.spin_ns = spin_ns_from_env();
    atomic_store(&c->user_ok, user_copy_from_env());

    /* the eventfd of mc_client_eventfd: created now, so it never changes for the client */
    c->e.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->e.efd < 0) {
        err = connect_err(errno);
        goto err_free;
    }
    memset(&w, 0, sizeof(w)); /* read below even when no welcome came */
    err = handshake(c, &addr, true, &w, fds, &nfds);
    if (err == MC_ERR_PROTO && w.magic == MC_SHM_MAGIC && w.abi == MC_SHM_ABI &&
        w.status == MC_ERR_PROTO) {
        /* An agent from before the eventfd extension refuses a hello with flags: connect
         * again without; mc_client_eventfd then says MC_ERR_IO (nothing would write it). */
        err = handshake(c, &addr, false, &w, fds, &nfds);
        if (err == 0)
            c->e.efd_agent = false;
    } else if (err == 0) {
        c->e.efd_agent = true;
    }
    if (err != 0)
        goto err_close_efd;
    allow_agent_ptrace(c->e.sock);

    err = mc_shm_region_attach(fds[0], w.region_size, &c->e.region);
    if (err != 0) {
        if (err == MC_ERR_INVALID || err == MC_ERR_DENIED)
            err = MC_ERR_IO;
        goto err_close_fds;
    }
    fds[0] = -1; /* the region owns it now */
    if (c->e.region->lay.client_id != w.client_id) {
        err = MC_ERR_PROTO;
        goto err_close_fds;
    }
    for (uint32_t i = 0; i < w.nsegs; i++) {
        err = map_segment(fds[1 + i], w.seg_size[i], &c->e.seg[i]);
        if (err != 0)
            goto err_unmap;
        c->e.seg_size[i] = w.seg_size[i];
        c->e.nsegs = i + 1;
    }
    /* an agent from before the node page sends none: then this process counts alone */
    if ((uint32_t)nfds == 2 + w.nsegs) {
        err = map_node(fds[1 + w.nsegs], &c->e.node);
        if (err != 0)
            goto err_unmap;
    }
    /* the mappings keep the segments; their fds are of no further use */
    close_fds(fds + 1, nfds - 1);
    nfds = 0;

    err = mc_arena_init(&c->a);
    if (err != 0)
        goto err_unmap;
    err = mc_devbuf_init(&c->d);
    if (err != 0)
        goto err_arenas;
    err = mc_engine_init(&c->e, &mc_op_hooks);
    if (err != 0)
        goto err_devbufs;
    *out = c;
    return 0;

err_devbufs:
    mc_devbuf_cleanup(&c->d);
err_arenas:
    mc_arena_cleanup(&c->a);
err_unmap:
    unmap_segments(c);
err_close_fds:
    if (nfds > 0)
        close_fds(fds + 1, nfds - 1);
    if (nfds > 0 && fds[0] >= 0)
        close(fds[0]);
    mc_shm_region_destroy(c->e.region);
    close(c->e.sock);
err_close_efd:
    close(c->e.efd);
err_free:
    free(c);
    return err;
}

MC_EXPORT int mc_client_status(const mc_client_t *c)
{
    int err;

    if (c == NULL)
        return MC_ERR_INVALID;
    err = atomic_load_explicit(&c->e.poison, memory_order_acquire);
    if (err != 0)
        return err;
    /* not poisoned yet, but the next call would be: say so now, so that a caller deciding
     * between a retry and a reconnect after MC_ERR_UNAVAILABLE does not retry in vain */
    if (atomic_load_explicit(&c->e.region->hdr->agent_state, memory_order_acquire) == 1)
        return MC_ERR_UNAVAILABLE;
    return mc_engine_liveness(&c->e);
}

MC_EXPORT void mc_close(mc_client_t *c)
{
    if (c == NULL)
        return;
    /*
     * No other thread uses c (the contract). Async ops (freed or not) may still be in
     * flight: they are canceled and waited for until final, since a put from an arena or
     * user memory may still be read by the agent. What is left then are abandoned ops,
     * whose only buffers are our staging slots. Closing the socket tells the agent to end
     * their leases and revoke their puts; it keeps its own mapping of the region (and of
     * the arenas), so nothing it still copies depends on ours.
     */
    mc_op_close_all(c);
    close(c->e.sock);
    unmap_segments(c);
    mc_arena_cleanup(&c->a);
    mc_devbuf_cleanup(&c->d);
    mc_engine_cleanup(&c->e);
    mc_shm_region_destroy(c->e.region);
    close(c->e.efd);
    free(c);
}
