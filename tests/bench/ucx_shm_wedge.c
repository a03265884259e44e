/*
 * ucx-shm-wedge: does a receiver survive a sender killed mid-message? A reproduction on
 * bare UCP, nothing of mcstore in it (docs/decisions.md, "UCX shared memory between
 * daemons").
 *
 * Per trial: a receiver process R (one worker, an active-message handler that takes eager
 * and rendezvous messages alike, progressing in a loop); a sender S that floods R with
 * messages of --size bytes over an endpoint with peer error handling; kill -9 of S after a
 * random 5..50 ms; then a second sender S2 that sends --probe small messages and R must
 * receive all of them within 5 s. A trial where R does not is "wedged" when R is alive,
 * "receiver died" when UCX took R down (an assertion in its error path). The transports
 * are UCX's own configuration (UCX_TLS and friends in the environment), so one binary
 * compares them:
 *
 *   UCX_TLS=posix,self UCX_MM_ERROR_HANDLING=y ucx-shm-wedge --trials 50 --size 1048576
 *   UCX_TLS=tcp,self ucx-shm-wedge --trials 50 --size 1048576
 *
 * Prints "wedged W, receiver died D, of N" and exits 1 when W + D > 0. Segments the killed processes leave in
 * /dev/shm are removed after each trial (and counted).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#define AM_ID 7
#define PROBE_TAG 0x50524f42u /* header of the second sender's messages */
#define PROBE_MS 5000

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct proc {
    ucp_context_h ctx;
    ucp_worker_h w;
};

static int proc_init(struct proc *p)
{
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                           .features = UCP_FEATURE_AM};
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_config_t *cfg;

    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
        return -1;
    if (ucp_init(&params, cfg, &p->ctx) != UCS_OK) {
        ucp_config_release(cfg);
        return -1;
    }
    ucp_config_release(cfg);
    return ucp_worker_create(p->ctx, &wp, &p->w) == UCS_OK ? 0 : -1;
}

/* --- the receiver -------------------------------------------------------------------------- */

struct recv_state {
    ucp_worker_h w;
    int report_fd;       /* one byte per probe message */
    uint64_t messages;
    void *buf;
    size_t cap;
};

static void rndv_done(void *req, ucs_status_t status, size_t length, void *user)
{
    (void)status;
    (void)length;
    (void)user;
    ucp_request_free(req);
}

static ucs_status_t on_am(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    struct recv_state *r = arg;
    uint32_t tag = 0;

    if (header_length == sizeof(tag))
        memcpy(&tag, header, sizeof(tag));
    r->messages++;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                                  UCP_OP_ATTR_FIELD_RECV_INFO,
                                  .cb.recv_am = rndv_done};
        size_t len = length < r->cap ? length : r->cap;
        void *req;

        rp.recv_info.length = NULL;
        req = ucp_am_recv_data_nbx(r->w, data, r->buf, len, &rp);
        if (UCS_PTR_IS_ERR(req))
            return UCS_OK;
    }
    if (tag == PROBE_TAG) {
        char b = 1;

        if (write(r->report_fd, &b, 1) != 1)
            _exit(3);
    }
    return UCS_OK;
}

/* R: sends its worker address on addr_fd, then progresses for ever (its parent kills it). */
static void receiver(int addr_fd, int report_fd, size_t size)
{
    struct proc p;
    struct recv_state r = {.report_fd = report_fd};
    ucp_am_handler_param_t hp = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                                               UCP_AM_HANDLER_PARAM_FIELD_CB |
                                               UCP_AM_HANDLER_PARAM_FIELD_ARG,
                                 .id = AM_ID, .cb = on_am, .arg = &r};
    ucp_address_t *addr;
    size_t alen;
    uint32_t len32;

    if (proc_init(&p) != 0)
        _exit(2);
    r.w = p.w;
    r.cap = size;
    r.buf = malloc(size);
    if (r.buf == NULL || ucp_worker_set_am_recv_handler(p.w, &hp) != UCS_OK ||
        ucp_worker_get_address(p.w, &addr, &alen) != UCS_OK)
        _exit(2);
    len32 = (uint32_t)alen;
    if (write(addr_fd, &len32, 4) != 4 || write(addr_fd, addr, alen) != (ssize_t)alen)
        _exit(2);
    close(addr_fd);
    for (;;)
        ucp_worker_progress(p.w);
}

/* --- the senders --------------------------------------------------------------------------- */

static void send_done(void *req, ucs_status_t status, void *user)
{
    (void)status;
    (*(int *)user)--;
    ucp_request_free(req);
}

static ucs_status_t ep_error_status;

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)arg;
    (void)ep;
    ep_error_status = status;
}

/* Sends `count` messages of `size` (0 = for ever), at most 16 in flight, then keeps the
 * endpoint up until killed; exits 4 when the endpoint fails. */
static void sender(const void *raddr, size_t size, uint32_t tag, long count)
{
    struct proc p;
    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = raddr, .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = ep_error}};
    ucp_ep_h ep;
    void *buf = malloc(size);
    int inflight = 0;
    long sent = 0;

    if (buf == NULL || proc_init(&p) != 0 || ucp_ep_create(p.w, &ep_params, &ep) != UCS_OK)
        _exit(2);
    memset(buf, 0x5a, size);
    while (count == 0 || sent < count || inflight > 0) {
        if (ep_error_status != UCS_OK)
            _exit(4);
        if ((count == 0 || sent < count) && inflight < 16) {
            ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                                      UCP_OP_ATTR_FIELD_USER_DATA,
                                      .cb.send = send_done, .user_data = &inflight};
            void *req = ucp_am_send_nbx(ep, AM_ID, &tag, sizeof(tag), buf, size, &rp);

            if (UCS_PTR_IS_ERR(req))
                _exit(4);
            if (req != NULL)
                inflight++;
            sent++;
            continue;
        }
        ucp_worker_progress(p.w);
    }
    /* stay: a sender that leaves may take undelivered bytes with it; the parent kills us */
    for (;;) {
        if (ep_error_status != UCS_OK)
            _exit(4);
        ucp_worker_progress(p.w);
        usleep(1000);
    }
}

static pid_t spawn_sender(const void *raddr, size_t size, uint32_t tag, long count)
{
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        sender(raddr, size, tag, count);
    }
    return pid;
}

/* --- the trials ---------------------------------------------------------------------------- */

/*
 * The posix transport names its segments in /dev/shm (UCX_POSIX_USE_PROC_LINK=n, as the
 * daemons run it): a process killed with -9 never unlinks them, and each leaves a few MiB
 * of RAM behind for good. A trial deletes the ones that appeared while it ran.
 */
#define SHM_DIR "/dev/shm"
#define SHM_PREFIX "ucx_shm_posix_"

struct shm_names {
    char (*name)[64];
    size_t n, cap;
};

static void shm_list(struct shm_names *l)
{
    DIR *d = opendir(SHM_DIR);
    struct dirent *e;

    l->n = 0;
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, SHM_PREFIX, strlen(SHM_PREFIX)) != 0 ||
            strlen(e->d_name) >= sizeof(l->name[0]))
            continue;
        if (l->n == l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 64;
            void *p = realloc(l->name, cap * sizeof(l->name[0]));

            if (p == NULL)
                break;
            l->name = p;
            l->cap = cap;
        }
        strcpy(l->name[l->n++], e->d_name);
    }
    closedir(d);
}

/* Deletes the segments not in `before`; returns how many. */
static size_t shm_sweep(const struct shm_names *before)
{
    struct shm_names now = {0};
    size_t gone = 0;
    char path[128];

    shm_list(&now);
    for (size_t i = 0; i < now.n; i++) {
        bool old = false;

        for (size_t k = 0; k < before->n && !old; k++)
            old = strcmp(now.name[i], before->name[k]) == 0;
        if (old)
            continue;
        snprintf(path, sizeof(path), SHM_DIR "/%s", now.name[i]);
        gone += unlink(path) == 0;
    }
    free(now.name);
    return gone;
}

static bool read_full(int fd, void *p, size_t len)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n = read(fd, (char *)p + got, len - got);

        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    return true;
}

enum outcome { HEALTHY, WEDGED, RECEIVER_DIED };

/* One trial: HEALTHY when R received every probe after the kill; WEDGED when R is alive
 * but silent; RECEIVER_DIED when R itself went down (UCX aborted it). */
static enum outcome trial(size_t size, long probes, unsigned seed, uint64_t *probe_ms_p)
{
    int addr_pipe[2], report_pipe[2];
    uint32_t alen;
    void *raddr;
    pid_t r, s, s2;
    long got = 0;
    uint64_t t0, deadline;
    bool ok;

    if (pipe(addr_pipe) != 0 || pipe(report_pipe) != 0)
        exit(2);
    fflush(NULL);
    r = fork();
    if (r == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(addr_pipe[0]);
        close(report_pipe[0]);
        receiver(addr_pipe[1], report_pipe[1], size);
    }
    close(addr_pipe[1]);
    close(report_pipe[1]);
    if (!read_full(addr_pipe[0], &alen, 4) || (raddr = malloc(alen)) == NULL ||
        !read_full(addr_pipe[0], raddr, alen)) {
        fprintf(stderr, "receiver failed to start\n");
        exit(2);
    }
    close(addr_pipe[0]);

    s = spawn_sender(raddr, size, 0, 0);
    usleep(5000 + (seed % 46) * 1000);
    kill(s, SIGKILL);
    waitpid(s, NULL, 0);

    s2 = spawn_sender(raddr, 64, PROBE_TAG, probes);
    t0 = now_ms();
    deadline = t0 + PROBE_MS;
    while (got < probes && now_ms() < deadline) {
        struct pollfd pfd = {.fd = report_pipe[0], .events = POLLIN};
        char b[256];
        ssize_t n;

        if (poll(&pfd, 1, 100) <= 0)
            continue;
        n = read(report_pipe[0], b, sizeof(b));
        if (n <= 0)
            break;
        got += n;
    }
    *probe_ms_p = now_ms() - t0;
    ok = got >= probes;
    if (!ok) {
        int st;

        /* who failed: the receiver (the second sender still waits) or the sender */
        if (waitpid(s2, &st, WNOHANG) == s2)
            printf("  second sender ended (%s %d) after %ld of %ld probes\n",
                   WIFEXITED(st) ? "exit" : "signal",
                   WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), got, probes);
        else
            printf("  second sender still waiting after %ld of %ld probes\n", got, probes);
        s2 = -s2;
    }
    if (s2 > 0) {
        kill(s2, SIGKILL);
        waitpid(s2, NULL, 0);
    } else if (waitpid(-s2, NULL, WNOHANG) == 0) {
        kill(-s2, SIGKILL);
        waitpid(-s2, NULL, 0);
    }
    if (!ok) {
        int st;

        if (waitpid(r, &st, WNOHANG) == r) {
            printf("  the receiver died (%s %d)\n", WIFEXITED(st) ? "exit" : "signal",
                   WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            r = -1;
        }
    }
    if (r > 0) {
        kill(r, SIGKILL);
        waitpid(r, NULL, 0);
    }
    close(report_pipe[0]);
    free(raddr);
    return ok ? HEALTHY : r > 0 ? WEDGED : RECEIVER_DIED;
}

int main(int argc, char **argv)
{
    long trials = 20, probes = 100;
    size_t size = 1u << 20;
    long wedged = 0, died = 0;
    size_t leaked = 0;
    uint64_t worst = 0;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--trials") == 0)
            trials = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--size") == 0)
            size = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--probes") == 0)
            probes = strtol(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--trials N] [--size BYTES] [--probes N]\n", argv[0]);
            return 2;
        }
    }
    if (trials < 1 || probes < 1 || size < 1) {
        fprintf(stderr, "trials, probes and size must be positive\n");
        return 2;
    }
    for (long t = 0; t < trials; t++) {
        struct shm_names before = {0};
        enum outcome o;
        uint64_t ms;

        shm_list(&before);
        o = trial(size, probes, (unsigned)(t * 2654435761u), &ms);
        leaked += shm_sweep(&before);
        free(before.name);
        if (o == WEDGED) {
            wedged++;
            printf("trial %ld: wedged (alive, probes not received within %d ms)\n", t,
                   PROBE_MS);
        } else if (o == RECEIVER_DIED) {
            died++;
            printf("trial %ld: the receiver died\n", t);
        } else if (ms > worst) {
            worst = ms;
        }
        fflush(stdout);
    }
    printf("UCX_TLS=%s size=%zu: wedged %ld, receiver died %ld, of %ld (slowest healthy "
           "probe %llu ms); %zu shared-memory files left by killed processes, removed\n",
           getenv("UCX_TLS") ? getenv("UCX_TLS") : "(default)", size, wedged, died, trials,
           (unsigned long long)worst, leaked);
    return wedged + died > 0 ? 1 : 0;
}
