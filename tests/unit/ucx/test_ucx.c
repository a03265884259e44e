/*
 * Tests of the transfer layer (ucx_backend/ucx.h) over real UCX between two workers in two
 * processes: each test forks peers, the processes swap worker addresses through pipes, and
 * then talk over whatever transports UCX picks (run again with UCX_TLS=tcp by meson). RPC
 * round trip, 1000 pipelined calls, out-of-order replies, deadlines, late replies, a killed
 * peer, a corrupt frame, bulk transfers into a memfd.
 *
 * Every wait is bounded by a deadline and driven by the worker's event fd (progress, arm,
 * poll): no fixed sleeps. A peer exits when its pipe closes, and its exit status is its
 * verdict. Peers run with PR_SET_PDEATHSIG so none outlives a crashed test.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mc/mc_status.h"

#include "daemon/proto/rpc.h" /* type names: the frames carry any */
#include "ucx_backend/ucx.h"
#include "ucx_backend/saddr.h"
#include "ucx_backend/wire.h"

#define T_WAIT_MS 5000     /* the longest any single wait may take */
#define T_PEER_LIFE_MS 15000
#define T_ADDR_MAX 4096
#define T_BULK_LEN (16u << 20)
#define T_OOO 16           /* calls answered in reverse order */

/*
 * A forked peer's exit status for status code `status`: base + the code's place among the
 * MC_ERR_* codes (an exit status has 8 bits, the codes do not fit them), base + 63 for a
 * value that is no code.
 */
static int t_status_exit(int base, int status)
{
    static const int codes[] = {
        MC_ERR_INVALID,  MC_ERR_NOMEM,         MC_ERR_NOT_FOUND,   MC_ERR_EXISTS,
        MC_ERR_NO_SPACE, MC_ERR_TOO_LARGE,     MC_ERR_BUSY,        MC_ERR_TIMEOUT,
        MC_ERR_CANCELED, MC_ERR_LEASE_EXPIRED, MC_ERR_CORRUPT,     MC_ERR_DENIED,
        MC_ERR_IO,       MC_ERR_PROTO,         MC_ERR_UNAVAILABLE, MC_ERR_INTERNAL,
    };

    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        if (codes[i] == status)
            return base + 1 + (int)i;
    }
    return base + 63;
}

/* --- plumbing ------------------------------------------------------------------------------ */

struct t_peer {
    pid_t pid;
    int wfd; /* to the peer */
    int rfd; /* from the peer */
};

static struct mc_ucx *t_u;        /* this process's worker */
static bool t_pipe_closed;        /* the other side closed our command pipe */
static int t_cmd = -1;            /* last command byte read */
static int t_cmd_fd = -1;         /* child: the pipe from the parent */

static void t_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;

    while (n > 0) {
        ssize_t k = write(fd, b, n);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            abort();
        b += k;
        n -= (size_t)k;
    }
}

static bool t_read_all(int fd, void *p, size_t n)
{
    uint8_t *b = p;

    while (n > 0) {
        ssize_t k = read(fd, b, n);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        b += k;
        n -= (size_t)k;
    }
    return true;
}

static void t_send_addr(int fd, struct mc_ucx *u)
{
    const void *a;
    size_t len;
    uint32_t n;

    mc_ucx_address(u, &a, &len);
    n = (uint32_t)len;
    t_write_all(fd, &n, sizeof(n));
    t_write_all(fd, a, len);
}

static size_t t_recv_addr(int fd, void *buf)
{
    uint32_t n;

    if (!t_read_all(fd, &n, sizeof(n)) || n == 0 || n > T_ADDR_MAX || !t_read_all(fd, buf, n))
        return 0;
    return n;
}

/* One turn of the event loop: progress, and sleep on the efd (and the command pipe, in a
 * child) only when UCX says it is safe, for at most `max_ms`. */
static void t_turn(struct mc_ucx *u, int max_ms)
{
    struct pollfd pfd[2];
    int n = 1;

    if (mc_ucx_progress(u) || !mc_ucx_arm(u)) {
        if (t_cmd_fd < 0)
            return;
        max_ms = 0; /* still look at the pipe */
    }
    pfd[0] = (struct pollfd){.fd = mc_ucx_efd(u), .events = POLLIN};
    if (t_cmd_fd >= 0 && !t_pipe_closed) {
        pfd[1] = (struct pollfd){.fd = t_cmd_fd, .events = POLLIN};
        n = 2;
    }
    if (poll(pfd, (nfds_t)n, max_ms) > 0 && n == 2 && (pfd[1].revents & (POLLIN | POLLHUP))) {
        uint8_t c;

        if (read(t_cmd_fd, &c, 1) == 1)
            t_cmd = c;
        else
            t_pipe_closed = true;
    }
}

/* Runs the loop until *flag becomes true or `ms` pass; returns *flag. */
static bool t_pump_until(struct mc_ucx *u, const volatile bool *flag, uint64_t ms)
{
    uint64_t deadline = mc_ucx_now_ms() + ms;

    while (!*flag && mc_ucx_now_ms() < deadline)
        t_turn(u, 5); /* short sleeps: also the missed-wakeup guard NIXL keeps */
    return *flag;
}

static bool t_pump_count(struct mc_ucx *u, const volatile int *count, int want, uint64_t ms)
{
    uint64_t deadline = mc_ucx_now_ms() + ms;

    while (*count < want && mc_ucx_now_ms() < deadline)
        t_turn(u, 5);
    return *count >= want;
}

static struct mc_ucx *t_create(struct mc_ucx_params *p)
{
    struct mc_ucx *u = NULL;
    int err = mc_ucx_create(p, &u);

    if (err != 0) {
        fprintf(stderr, "mc_ucx_create: %d\n", err);
        return NULL;
    }
    return u;
}

/* Forks a peer running `fn`, which gets its own worker and the parent's address and
 * returns its exit status. Fork before the parent creates its worker (UCX is not fork-safe);
 * then t_peer_hello swaps the addresses. */
typedef int (*t_peer_fn)(struct mc_ucx *u, const void *peer_addr, size_t peer_len);

static struct t_peer t_peer_start(t_peer_fn fn, struct mc_ucx_params *child_params)
{
    int to_child[2], to_parent[2];
    struct t_peer p;
    uint8_t addr[T_ADDR_MAX];
    size_t len;

    ck_assert_int_eq(pipe(to_child), 0);
    ck_assert_int_eq(pipe(to_parent), 0);
    p.pid = fork();
    ck_assert_int_ge(p.pid, 0);
    if (p.pid == 0) {
        struct mc_ucx *u;
        int rc;

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm(T_PEER_LIFE_MS / 1000); /* a wedged peer dies on its own */
        close(to_child[1]);
        close(to_parent[0]);
        u = t_create(child_params);
        if (u == NULL)
            _exit(90);
        t_send_addr(to_parent[1], u);
        len = t_recv_addr(to_child[0], addr);
        if (len == 0)
            _exit(91);
        t_cmd_fd = to_child[0];
        rc = fn(u, addr, len);
        mc_ucx_destroy(u);
        _exit(rc);
    }
    close(to_child[0]);
    close(to_parent[1]);
    p.wfd = to_child[1];
    p.rfd = to_parent[0];
    return p;
}

/* Sends our worker's address to the peer and reads its address into buf. */
static size_t t_peer_hello(struct t_peer *p, void *buf)
{
    size_t n;

    t_send_addr(p->wfd, t_u);
    n = t_recv_addr(p->rfd, buf);

    ck_assert_uint_gt(n, 0);
    return n;
}

static void t_peer_cmd(struct t_peer *p, uint8_t c)
{
    t_write_all(p->wfd, &c, 1);
}

/* Closes the peer's pipe (its signal to finish) and collects its exit status, while
 * serving our worker; kills it after the deadline. Returns the exit status, or -signal. */
static int t_peer_finish(struct t_peer *p, uint64_t ms)
{
    uint64_t deadline = mc_ucx_now_ms() + ms;
    int status;

    if (p->wfd >= 0)
        close(p->wfd);
    p->wfd = -1;
    for (;;) {
        pid_t r = waitpid(p->pid, &status, WNOHANG);

        if (r == p->pid)
            break;
        if (mc_ucx_now_ms() >= deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            break;
        }
        if (t_u != NULL)
            t_turn(t_u, 2);
        else
            usleep(1000);
    }
    close(p->rfd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

/* --- peers ---------------------------------------------------------------------------------- */

/* Serves until the parent closes the pipe. */
static int t_serve(struct mc_ucx *u)
{
    uint64_t deadline = mc_ucx_now_ms() + T_PEER_LIFE_MS;

    while (!t_pipe_closed && mc_ucx_now_ms() < deadline)
        t_turn(u, 50);
    return 0;
}

static void t_echo_handler(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *h,
                           const void *payload)
{
    (void)ctx;
    (void)mc_ucx_rpc_reply(ep, (uint16_t)(h->type + 1), h->request_id, payload, h->payload_len);
}

static int t_peer_echo(struct mc_ucx *u, const void *a, size_t n)
{
    (void)a;
    (void)n;
    mc_ucx_rpc_register(u, t_echo_handler, NULL);
    return t_serve(u);
}

static int t_peer_silent(struct mc_ucx *u, const void *a, size_t n)
{
    (void)a;
    (void)n;
    return t_serve(u); /* no handler: requests are dropped */
}

/* Replies to T_OOO requests in reverse order of arrival, once all are in. */
struct t_held {
    struct mc_ucx_ep *ep;
    uint16_t type;
    uint64_t id;
    uint32_t val;
};
static struct t_held t_held[T_OOO];
static int t_nheld;

static void t_reverse_handler(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *h,
                              const void *payload)
{
    (void)ctx;
    if (t_nheld >= T_OOO || h->payload_len != sizeof(uint32_t))
        return;
    t_held[t_nheld] = (struct t_held){ep, h->type, h->request_id, 0};
    memcpy(&t_held[t_nheld].val, payload, sizeof(uint32_t));
    if (++t_nheld < T_OOO)
        return;
    for (int i = T_OOO - 1; i >= 0; i--)
        (void)mc_ucx_rpc_reply(t_held[i].ep, (uint16_t)(t_held[i].type + 1), t_held[i].id,
                               &t_held[i].val, sizeof(uint32_t));
}

static int t_peer_reverse(struct mc_ucx *u, const void *a, size_t n)
{
    (void)a;
    (void)n;
    mc_ucx_rpc_register(u, t_reverse_handler, NULL);
    return t_serve(u);
}

/* Holds each request until the next one arrives, then answers both: the first answer is
 * late when the caller's deadline was short. */
static void t_late_handler(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *h,
                           const void *payload)
{
    (void)ctx;
    (void)payload;
    if (t_nheld == 1) {
        (void)mc_ucx_rpc_reply(t_held[0].ep, (uint16_t)(t_held[0].type + 1), t_held[0].id,
                               NULL, 0);
        (void)mc_ucx_rpc_reply(ep, (uint16_t)(h->type + 1), h->request_id, NULL, 0);
        t_nheld = 0;
        return;
    }
    t_held[0] = (struct t_held){ep, h->type, h->request_id, 0};
    t_nheld = 1;
}

static int t_peer_late(struct mc_ucx *u, const void *a, size_t n)
{
    (void)a;
    (void)n;
    mc_ucx_rpc_register(u, t_late_handler, NULL);
    return t_serve(u);
}

/* Counts requests and tells the parent ('r') once `T_OOO` arrived; never answers. */
static int t_sink_count;

static void t_sink_handler(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *h,
                           const void *payload)
{
    (void)ctx;
    (void)ep;
    (void)h;
    (void)payload;
    t_sink_count++;
}

static int t_peer_sink(struct mc_ucx *u, const void *a, size_t n)
{
    static const uint8_t r = 'r';
    int to_parent = *(const int *)a; /* passed through the address slot: see the test */

    (void)n;
    mc_ucx_rpc_register(u, t_sink_handler, NULL);
    if (!t_pump_count(u, &t_sink_count, T_OOO, T_WAIT_MS))
        return 2;
    t_write_all(to_parent, &r, 1);
    return t_serve(u);
}

/* --- callbacks the parent uses --------------------------------------------------------------- */

struct t_call {
    bool done;
    int status;
    uint32_t val; /* payload: our tag, echoed back */
    uint32_t got;
    size_t len;
    uint64_t ended_ms;
};

static int t_calls_done;

static void t_call_done(void *ctx, int status, const struct mc_wire_hdr *h, const void *payload,
                        size_t len)
{
    struct t_call *c = ctx;

    c->done = true;
    c->status = status;
    c->len = len;
    c->ended_ms = mc_ucx_now_ms();
    if (status == 0) {
        ck_assert_ptr_nonnull(h);
        if (len == sizeof(uint32_t))
            memcpy(&c->got, payload, sizeof(uint32_t));
    }
    t_calls_done++;
}

static struct mc_ucx_ep *t_connect(struct mc_ucx *u, const void *addr, size_t len)
{
    struct mc_ucx_ep *ep = NULL;

    ck_assert_int_eq(mc_ucx_ep_connect(u, addr, len, &ep), 0);
    ck_assert_ptr_nonnull(ep);
    return ep;
}

static int t_err_status;
static int t_err_count;
static struct mc_ucx_ep *t_err_ep;

static void t_on_ep_error(void *ctx, struct mc_ucx_ep *ep, int status)
{
    (void)ctx;
    t_err_status = status;
    t_err_count++;
    t_err_ep = ep;
    mc_ucx_ep_close(ep, true); /* the owner's verdict: drop it */
}

static struct mc_ucx_params t_params = {.name = "t", .ep_error = t_on_ep_error};
static const char *const t_ka_config[] = {"KEEPALIVE_INTERVAL=500ms", NULL};
static struct mc_ucx_params t_ka_params = {.name = "t-ka", .config = t_ka_config};

static void t_setup(void)
{
    t_u = t_create(&t_params);
    ck_assert_ptr_nonnull(t_u);
}

/* --- tests ----------------------------------------------------------------------------------- */

START_TEST(test_ucx_rpc_round_trip)
{
    uint8_t addr[T_ADDR_MAX];
    struct t_call c = {.val = 0x12345678};
    struct mc_ucx_stats st;
    struct t_peer p;
    struct mc_ucx_ep *ep;
    uint64_t id = 0;

    p = t_peer_start(t_peer_echo, NULL);
    t_setup();
    ep = t_connect(t_u, addr, t_peer_hello(&p, addr));
    ck_assert_int_eq(mc_ucx_rpc_call(ep, MC_WIRE_HEARTBEAT, &c.val, sizeof(c.val),
                                     mc_ucx_now_ms() + T_WAIT_MS, t_call_done, &c, &id), 0);
    ck_assert_uint_gt(id, 0);
    ck_assert(!c.done); /* callbacks run from progress only */
    ck_assert(t_pump_until(t_u, &c.done, T_WAIT_MS));
    ck_assert_int_eq(c.status, 0);
    ck_assert_uint_eq(c.len, sizeof(uint32_t));
    ck_assert_uint_eq(c.got, c.val);
    ck_assert(!mc_ucx_ep_is_accepted(ep));
    ck_assert_int_eq(mc_ucx_ep_status(ep), 0);

    /* bad arguments fail at once and never call back */
    ck_assert_int_eq(mc_ucx_rpc_call(ep, MC_WIRE_HEARTBEAT_REPLY, NULL, 0, 0, t_call_done, &c,
                                     NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_ucx_rpc_call(ep, 0, NULL, 0, 0, t_call_done, &c, NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_ucx_rpc_call(ep, MC_WIRE_HELLO, NULL, MC_WIRE_PAYLOAD_MAX + 1, 0,
                                     t_call_done, &c, NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_ucx_rpc_reply(ep, MC_WIRE_HELLO, 1, NULL, 0), MC_ERR_INVALID);

    mc_ucx_get_stats(t_u, &st);
    ck_assert_uint_eq(st.calls_sent, 1);
    ck_assert_uint_eq(st.replies_received, 1);
    ck_assert_uint_eq(st.frames_bad, 0);
    mc_ucx_ep_close(ep, false);
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), 0);
    mc_ucx_destroy(t_u);
}
END_TEST

START_TEST(test_ucx_rpc_pipelined_1000)
{
    enum { N = 1000 };
    uint8_t addr[T_ADDR_MAX];
    struct t_call *c = calloc(N, sizeof(*c));
    struct t_peer p;
    struct mc_ucx_ep *ep;
    uint64_t t0;

    ck_assert_ptr_nonnull(c);
    p = t_peer_start(t_peer_echo, NULL);
    t_setup();
    ep = t_connect(t_u, addr, t_peer_hello(&p, addr));
    t0 = mc_ucx_now_ms();
    for (int i = 0; i < N; i++) {
        c[i].val = (uint32_t)i * 2654435761u;
        ck_assert_int_eq(mc_ucx_rpc_call(ep, MC_WIRE_GET_BATCH, &c[i].val, sizeof(c[i].val),
                                         t0 + T_WAIT_MS, t_call_done, &c[i], NULL), 0);
    }
    ck_assert(t_pump_count(t_u, &t_calls_done, N, T_WAIT_MS));
    for (int i = 0; i < N; i++) {
        if (c[i].status != 0 || c[i].got != c[i].val)
            ck_abort_msg("call %d: status %d, got %08x want %08x", i, c[i].status, c[i].got,
                         c[i].val);
    }
    fprintf(stderr, "pipelined: %d calls in %llu ms\n", N,
            (unsigned long long)(mc_ucx_now_ms() - t0));
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), 0);
    mc_ucx_destroy(t_u);
    free(c);
}
END_TEST

START_TEST(test_ucx_rpc_out_of_order_replies)
{
    uint8_t addr[T_ADDR_MAX];
    struct t_call c[T_OOO];
    uint64_t order[T_OOO];
    struct t_peer p;
    struct mc_ucx_ep *ep;

    memset(c, 0, sizeof(c));
    p = t_peer_start(t_peer_reverse, NULL);
    t_setup();
    ep = t_connect(t_u, addr, t_peer_hello(&p, addr));
    for (int i = 0; i < T_OOO; i++) {
        c[i].val = 1000u + (uint32_t)i;
        ck_assert_int_eq(mc_ucx_rpc_call(ep, MC_WIRE_EXIST_BATCH, &c[i].val, sizeof(uint32_t),
                                         mc_ucx_now_ms() + T_WAIT_MS, t_call_done, &c[i], NULL),
                         0);
    }
    ck_assert(t_pump_count(t_u, &t_calls_done, T_OOO, T_WAIT_MS));
    for (int i = 0; i < T_OOO; i++) {
        ck_assert_int_eq(c[i].status, 0);
        ck_assert_uint_eq(c[i].got, c[i].val); /* matched by id, not by arrival */
        order[i] = c[i].ended_ms;
    }
    /* the replies came newest first */
    ck_assert_uint_le(order[T_OOO - 1], order[0]);
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), 0);
    mc_ucx_destroy(t_u);
}
END_TEST

START_TEST(test_ucx_rpc_deadline_timeout)
{
    uint8_t addr[T_ADDR_MAX];
    struct t_call c = {0}, d = {0};
    struct mc_ucx_stats st;
    struct t_peer p;
    struct mc_ucx_ep *ep;
    uint64_t t0, dl;

    p = t_peer_start(t_peer_silent, NULL);
    t_setup();
    ep = t_connect(t_u, addr, t_peer_hello(&p, addr));
    t0 = mc_ucx_now_ms();
    dl = t0 + 200;
    ck_assert_int_eq(mc_ucx_rpc_call(ep, MC_WIRE_HEARTBEAT, NULL, 0, dl, t_call_done, &c, NULL),
                     0);
    ck_assert_int_eq(mc_ucx_rpc_call(ep, MC_WIRE_HEARTBEAT, NULL, 0, dl + 100000, t_call_done,
                                     &d, NULL), 0);
    ck_assert_uint_eq(mc_ucx_next_deadline_ms(t_u), dl);
    ck_assert(t_pump_until(t_u, &c.done, T_WAIT_MS));
    ck_assert_int_eq(c.status, MC_ERR_TIMEOUT);
    ck_assert_uint_ge(c.ended_ms, dl);
    ck_assert_uint_lt(c.ended_ms, dl + 1000);
    ck_assert(!d.done);
    ck_assert_uint_eq(mc_ucx_next_deadline_ms(t_u), dl + 100000);

    /* an injected clock expires the other one, as the agent's tick would */
    ck_assert(mc_ucx_expire(t_u, dl + 100000));
    ck_assert(d.done);
    ck_assert_int_eq(d.status, MC_ERR_TIMEOUT);
    ck_assert_uint_eq(mc_ucx_next_deadline_ms(t_u), UINT64_MAX);
    mc_ucx_get_stats(t_u, &st);
    ck_assert_uint_eq(st.calls_timed_out, 2);
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), 0);
    mc_ucx_destroy(t_u);
}
END_TEST

START_TEST(test_ucx_rpc_late_reply_dropped)
{
    uint8_t addr[T_ADDR_MAX];
    struct t_call c = {0}, d = {0};
    struct mc_ucx_stats st;
    struct t_peer p;
    struct mc_ucx_ep *ep;

    p = t_peer_start(t_peer_late, NULL);
    t_setup();
    ep = t_connect(t_u, addr, t_peer_hello(&p, addr));
    ck_assert_int_eq(mc_ucx_rpc_call(ep, MC_WIRE_HEARTBEAT, NULL, 0, mc_ucx_now_ms() + 100,
                                     t_call_done, &c, NULL), 0);
    ck_assert(t_pump_until(t_u, &c.done, T_WAIT_MS));
    ck_assert_int_eq(c.status, MC_ERR_TIMEOUT);
    /* the second call releases both replies: the first is for an expired id */
    ck_assert_int_eq(mc_ucx_rpc_call(ep, MC_WIRE_HEARTBEAT, NULL, 0, mc_ucx_now_ms() + T_WAIT_MS,
                                     t_call_done, &d, NULL), 0);
    ck_assert(t_pump_until(t_u, &d.done, T_WAIT_MS));
    ck_assert_int_eq(d.status, 0);
    mc_ucx_get_stats(t_u, &st);
    ck_assert_uint_eq(st.replies_dropped, 1);
    ck_assert_uint_eq(st.replies_received, 1);
    ck_assert_uint_eq(st.frames_bad, 0);
    ck_assert_int_eq(mc_ucx_ep_status(ep), 0); /* a late reply is no protocol error */
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), 0);
    mc_ucx_destroy(t_u);
}
END_TEST

static int t_sink_pipe = -1;

static int t_peer_sink_entry(struct mc_ucx *u, const void *a, size_t n)
{
    (void)a;
    (void)n;
    return t_peer_sink(u, &t_sink_pipe, sizeof(int));
}

START_TEST(test_ucx_peer_killed_fails_pending)
{
    uint8_t addr[T_ADDR_MAX];
    struct t_call c[T_OOO];
    struct t_peer p;
    struct mc_ucx_ep *ep;
    int ready[2];
    uint64_t killed;
    uint8_t r;

    memset(c, 0, sizeof(c));
    ck_assert_int_eq(pipe(ready), 0);
    t_sink_pipe = ready[1];
    p = t_peer_start(t_peer_sink_entry, NULL);
    t_setup();
    close(ready[1]);
    ep = t_connect(t_u, addr, t_peer_hello(&p, addr));
    for (int i = 0; i < T_OOO; i++)
        ck_assert_int_eq(mc_ucx_rpc_call(ep, MC_WIRE_PUT_START_BATCH, NULL, 0,
                                         mc_ucx_now_ms() + 60000, t_call_done, &c[i], NULL), 0);
    /* serve until the peer has them all, so the endpoint is fully wired up */
    {
        uint64_t deadline = mc_ucx_now_ms() + T_WAIT_MS;
        struct pollfd pfd = {.fd = ready[0], .events = POLLIN};

        while (poll(&pfd, 1, 0) == 0 && mc_ucx_now_ms() < deadline)
            t_turn(t_u, 2);
        ck_assert_int_eq(read(ready[0], &r, 1), 1);
    }
    ck_assert_int_eq(kill(p.pid, SIGKILL), 0);
    killed = mc_ucx_now_ms();
    ck_assert(t_pump_count(t_u, &t_calls_done, T_OOO, T_WAIT_MS));
    for (int i = 0; i < T_OOO; i++)
        ck_assert_int_eq(c[i].status, MC_ERR_UNAVAILABLE);
    fprintf(stderr, "peer killed: calls failed after %llu ms\n",
            (unsigned long long)(mc_ucx_now_ms() - killed));
    ck_assert_int_eq(t_err_count, 1);
    ck_assert_int_eq(t_err_status, MC_ERR_UNAVAILABLE);
    ck_assert_ptr_eq(t_err_ep, ep);
    /* the owner closed it in the callback: new calls on it would be invalid; the worker
     * itself is fine and destroys cleanly */
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), -SIGKILL);
    close(ready[0]);
    mc_ucx_destroy(t_u);
}
END_TEST

/* --- a listening worker (listen_ip): accepted endpoints that are ours -------------------- */

static struct mc_ucx_ep *t_last_ep; /* the endpoint t_record_handler last answered on */
static int t_probe_rc;              /* a call on the failed endpoint, from its ep_error */

/* ep_error of the listening worker: a call on the failed endpoint is refused at once (it is
 * still ours: UCX did not free it), then the owner closes it as t_on_ep_error does. */
static void t_on_ep_error_probe(void *ctx, struct mc_ucx_ep *ep, int status)
{
    static struct t_call late;

    t_probe_rc = mc_ucx_rpc_call(ep, MC_WIRE_FENCE, NULL, 0, mc_ucx_now_ms() + T_WAIT_MS,
                                 t_call_done, &late, NULL);
    t_on_ep_error(ctx, ep, status);
}

static void t_record_handler(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *h,
                             const void *payload)
{
    (void)ctx;
    t_last_ep = ep;
    (void)mc_ucx_rpc_reply(ep, (uint16_t)(h->type + 1), h->request_id, payload, h->payload_len);
}

/* Connects to the parent's listener, makes one call, says so on the pipe, then waits to be
 * killed. */
static int t_peer_call_then_wait(struct mc_ucx *u, const void *a, size_t n)
{
    struct t_call c = {0};
    struct mc_ucx_ep *ep = NULL;
    uint8_t one = 1;

    if (!mc_saddr_is(a, n))
        return 2; /* the parent listens: its address must say so */
    if (mc_ucx_ep_connect(u, a, n, &ep) != 0)
        return 3;
    if (mc_ucx_rpc_call(ep, MC_WIRE_HEARTBEAT, NULL, 0, mc_ucx_now_ms() + T_WAIT_MS,
                        t_call_done, &c, NULL) != 0 ||
        !t_pump_until(u, &c.done, T_WAIT_MS) || c.status != 0)
        return 4;
    t_write_all(t_sink_pipe, &one, 1);
    return t_serve(u);
}

/*
 * A worker that listens (listen_ip) accepts a peer's endpoint as its own: when the peer is
 * killed -9, the endpoint's failure is reported (ep_error, once, MC_ERR_UNAVAILABLE) and a
 * call made on it after that fails at once, with the endpoint still ours to close. An
 * accepted worker-address endpoint is destroyed by UCX on its own and never reported: a
 * call on it then touched freed memory (mc-master died of it: docs/decisions.md).
 */
START_TEST(test_ucx_listener_peer_killed_reported)
{
    struct mc_ucx_params lp = {.name = "t-listen", .ep_error = t_on_ep_error_probe,
                               .listen_ip = "127.0.0.1"};
    uint8_t addr[T_ADDR_MAX], r;
    struct mc_ucx_stats st;
    struct t_peer p;
    int ready[2];

    ck_assert_int_eq(pipe(ready), 0);
    t_sink_pipe = ready[1];
    p = t_peer_start(t_peer_call_then_wait, NULL);
    t_u = t_create(&lp);
    ck_assert_ptr_nonnull(t_u);
    close(ready[1]);
    mc_ucx_rpc_register(t_u, t_record_handler, NULL);
    (void)t_peer_hello(&p, addr); /* the child gets our listener's address */
    {
        uint64_t deadline = mc_ucx_now_ms() + T_WAIT_MS;
        struct pollfd pfd = {.fd = ready[0], .events = POLLIN};

        while (poll(&pfd, 1, 0) == 0 && mc_ucx_now_ms() < deadline)
            t_turn(t_u, 2);
        ck_assert_int_eq(read(ready[0], &r, 1), 1);
    }
    ck_assert_ptr_nonnull(t_last_ep);
    ck_assert(mc_ucx_ep_is_accepted(t_last_ep));
    mc_ucx_get_stats(t_u, &st);
    ck_assert_uint_eq(st.eps_accepted, 1);
    t_err_count = 0;
    ck_assert_int_eq(kill(p.pid, SIGKILL), 0);
    {
        uint64_t deadline = mc_ucx_now_ms() + T_WAIT_MS;

        while (t_err_count == 0 && mc_ucx_now_ms() < deadline)
            t_turn(t_u, 5);
    }
    ck_assert_int_eq(t_err_count, 1);
    ck_assert_ptr_eq(t_err_ep, t_last_ep);
    ck_assert_int_eq(t_err_status, MC_ERR_UNAVAILABLE);
    /* at the report a call on it was refused at once (MC_ERR_UNAVAILABLE), without
     * touching UCX; the owner closed it then */
    ck_assert_int_eq(t_probe_rc, MC_ERR_UNAVAILABLE);
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), -SIGKILL);
    close(ready[0]);
    mc_ucx_destroy(t_u);
    t_last_ep = NULL;
}
END_TEST

/* Connects to the parent, makes one good call, sends garbage, and expects the endpoint to
 * be dropped by the parent (its calls then fail). */
static void t_noop_done(void *ctx, int status, const struct mc_wire_hdr *h, const void *payload,
                        size_t len)
{
    (void)h;
    (void)payload;
    (void)len;
    ((struct t_call *)ctx)->status = status;
    ((struct t_call *)ctx)->done = true;
}

static int t_peer_corrupt(struct mc_ucx *u, const void *a, size_t n)
{
    static const uint8_t junk[40] = "this is not an mcstore frame at all....";
    struct t_call c = {0}, d = {0};
    struct mc_ucx_ep *ep = NULL;

    if (mc_ucx_ep_connect(u, a, n, &ep) != 0)
        return 2;
    if (mc_ucx_rpc_call(ep, MC_WIRE_HELLO, NULL, 0, mc_ucx_now_ms() + T_WAIT_MS, t_noop_done, &c,
                        NULL) != 0 || !t_pump_until(u, &c.done, T_WAIT_MS) || c.status != 0)
        return 3;
    if (mc_ucx_send_raw_frame(ep, junk, sizeof(junk)) != 0)
        return 4;
    /* the parent force-closes our endpoint: this call must fail, and not by its deadline.
     * Nothing flows back after a force close, so we notice through UCX's keepalive (20 s
     * by default in 1.13; t_ka_config makes it 500 ms) */
    if (mc_ucx_rpc_call(ep, MC_WIRE_HELLO, NULL, 0, mc_ucx_now_ms() + T_WAIT_MS, t_noop_done, &d,
                        NULL) != 0)
        return 5;
    if (!t_pump_until(u, &d.done, T_WAIT_MS + 1000))
        return 6;
    if (d.status != MC_ERR_UNAVAILABLE)
        return t_status_exit(20, d.status); /* TIMEOUT: the force-close went unnoticed */
    return 0;
}

/* Connects to the parent, makes one call, waits for 'g', then 100 more calls. */
static int t_peer_good(struct mc_ucx *u, const void *a, size_t n)
{
    enum { M = 100 };
    struct t_call c[M + 1];
    struct mc_ucx_ep *ep = NULL;
    uint64_t deadline;

    memset(c, 0, sizeof(c));
    t_calls_done = 0;
    if (mc_ucx_ep_connect(u, a, n, &ep) != 0)
        return 2;
    if (mc_ucx_rpc_call(ep, MC_WIRE_HELLO, NULL, 0, mc_ucx_now_ms() + T_WAIT_MS, t_call_done,
                        &c[M], NULL) != 0 || !t_pump_until(u, &c[M].done, T_WAIT_MS) ||
        c[M].status != 0)
        return 3;
    deadline = mc_ucx_now_ms() + T_WAIT_MS;
    while (t_cmd != 'g' && !t_pipe_closed && mc_ucx_now_ms() < deadline)
        t_turn(u, 50);
    if (t_cmd != 'g')
        return 4;
    t_calls_done = 0;
    for (int i = 0; i < M; i++) {
        c[i].val = (uint32_t)i;
        if (mc_ucx_rpc_call(ep, MC_WIRE_CLUSTER_INFO, &c[i].val, sizeof(uint32_t),
                            mc_ucx_now_ms() + T_WAIT_MS, t_call_done, &c[i], NULL) != 0)
            return 5;
    }
    if (!t_pump_count(u, &t_calls_done, M, T_WAIT_MS))
        return 6;
    for (int i = 0; i < M; i++) {
        if (c[i].status != 0 || c[i].got != c[i].val)
            return 7;
    }
    return 0;
}

START_TEST(test_ucx_corrupt_frame_fails_only_that_ep)
{
    uint8_t addr[T_ADDR_MAX];
    struct t_peer good, bad;
    struct mc_ucx_stats st;
    bool err_seen = false;
    uint64_t deadline;

    good = t_peer_start(t_peer_good, NULL);
    bad = t_peer_start(t_peer_corrupt, &t_ka_params);
    t_setup();
    mc_ucx_rpc_register(t_u, t_echo_handler, NULL);
    (void)t_peer_hello(&good, addr);
    (void)t_peer_hello(&bad, addr);

    deadline = mc_ucx_now_ms() + T_WAIT_MS;
    while (t_err_count == 0 && mc_ucx_now_ms() < deadline)
        t_turn(t_u, 5);
    err_seen = t_err_count == 1;
    ck_assert_msg(err_seen, "no endpoint error reported");
    ck_assert_int_eq(t_err_status, MC_ERR_PROTO);
    ck_assert_int_eq(t_peer_finish(&bad, T_WAIT_MS + 2000), 0);

    t_peer_cmd(&good, 'g');
    ck_assert_int_eq(t_peer_finish(&good, T_WAIT_MS), 0);
    mc_ucx_get_stats(t_u, &st);
    ck_assert_uint_eq(st.frames_bad, 1);
    ck_assert_uint_eq(st.eps_accepted, 2);
    ck_assert_uint_ge(st.requests_received, 102);
    ck_assert_int_eq(t_err_count, 1);
    mc_ucx_destroy(t_u);
}
END_TEST

/* A peer that answers every request with a malformed reply (wrong reply type). */
static void t_wrong_reply_handler(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *h,
                                  const void *payload)
{
    (void)ctx;
    (void)payload;
    (void)mc_ucx_rpc_reply(ep, MC_WIRE_HELLO_REPLY, h->request_id, NULL, 0);
}

static int t_peer_wrong_reply(struct mc_ucx *u, const void *a, size_t n)
{
    (void)a;
    (void)n;
    mc_ucx_rpc_register(u, t_wrong_reply_handler, NULL);
    return t_serve(u);
}

START_TEST(test_ucx_bad_reply_fails_call_proto)
{
    uint8_t addr[T_ADDR_MAX];
    struct t_call c = {0};
    struct t_peer p;
    struct mc_ucx_ep *ep;

    p = t_peer_start(t_peer_wrong_reply, NULL);
    t_setup();
    ep = t_connect(t_u, addr, t_peer_hello(&p, addr));
    ck_assert_int_eq(mc_ucx_rpc_call(ep, MC_WIRE_MOUNT, NULL, 0, mc_ucx_now_ms() + T_WAIT_MS,
                                     t_call_done, &c, NULL), 0);
    ck_assert(t_pump_until(t_u, &c.done, T_WAIT_MS));
    ck_assert_int_eq(c.status, MC_ERR_PROTO);
    ck_assert(t_pump_count(t_u, &t_err_count, 1, T_WAIT_MS));
    ck_assert_int_eq(t_err_status, MC_ERR_PROTO);
    ck_assert_ptr_eq(t_err_ep, ep);
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), 0);
    mc_ucx_destroy(t_u);
}
END_TEST

/* --- bulk ------------------------------------------------------------------------------------ */

static uint8_t t_pattern(size_t i)
{
    return (uint8_t)((i * 131u) ^ (i >> 13));
}

struct t_bulk_rx {
    uint8_t *buf;
    size_t cap;
    bool refuse;
    bool done;
    int status;
    size_t len;
    uint16_t type;
    uint64_t id;
    char hdr[32];
};

static struct t_bulk_rx t_rx;

static void *t_bulk_dest(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *h,
                         const void *hdr_payload, size_t len, void **op_p)
{
    struct t_bulk_rx *rx = ctx;

    (void)ep;
    if (rx->refuse || len > rx->cap || h->payload_len >= sizeof(rx->hdr))
        return NULL;
    rx->len = len;
    rx->type = h->type;
    rx->id = h->request_id;
    memcpy(rx->hdr, hdr_payload, h->payload_len);
    *op_p = rx;
    return rx->buf;
}

static void t_bulk_done(void *ctx, void *op, int status)
{
    struct t_bulk_rx *rx = ctx;

    ck_assert_ptr_eq(op, rx);
    rx->status = status;
    rx->done = true;
}

struct t_sent {
    bool done;
    int status;
};

static void t_send_done(void *ctx, int status)
{
    struct t_sent *s = ctx;

    s->status = status;
    s->done = true;
}

/* What t_peer_bulk_sender sends (set before the fork). */
static size_t t_bulk_len = T_BULK_LEN;

/* Sends t_bulk_len pattern bytes to the parent; exit status 0 if UCX reported success,
 * 10 + n for a failed send with status -n. */
static int t_peer_bulk_sender(struct mc_ucx *u, const void *a, size_t n)
{
    static const char hdr[] = "alloc 42 v7";
    struct mc_ucx_ep *ep = NULL;
    struct t_sent s = {0};
    uint8_t *data = malloc(t_bulk_len);
    int err;

    if (data == NULL || mc_ucx_ep_connect(u, a, n, &ep) != 0)
        return 2;
    for (size_t i = 0; i < t_bulk_len; i++)
        data[i] = t_pattern(i);
    err = mc_ucx_send_bulk(ep, MC_WIRE_WRITE, 77, hdr, sizeof(hdr), data, t_bulk_len,
                           t_send_done, &s);
    if (err != 0)
        return 3;
    if (!t_pump_until(u, &s.done, T_WAIT_MS))
        return 4;
    free(data); /* only now: UCX no longer reads it */
    if (s.status != 0)
        return t_status_exit(10, s.status);
    return t_serve(u);
}

START_TEST(test_ucx_bulk_16mib_into_memfd)
{
    uint8_t addr[T_ADDR_MAX];
    struct t_peer p;
    struct mc_ucx_stats st;
    uint64_t t0;
    int fd;

    fd = memfd_create("t_bulk", MFD_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, T_BULK_LEN), 0);
    t_rx.buf = mmap(NULL, T_BULK_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert(t_rx.buf != MAP_FAILED);
    t_rx.cap = T_BULK_LEN;

    p = t_peer_start(t_peer_bulk_sender, NULL);
    t_setup();
    mc_ucx_bulk_register(t_u, t_bulk_dest, t_bulk_done, &t_rx);
    t0 = mc_ucx_now_ms();
    (void)t_peer_hello(&p, addr);
    ck_assert(t_pump_until(t_u, &t_rx.done, T_WAIT_MS));
    ck_assert_int_eq(t_rx.status, 0);
    fprintf(stderr, "bulk: 16 MiB in %llu ms (including the peer's start)\n",
            (unsigned long long)(mc_ucx_now_ms() - t0));
    ck_assert_uint_eq(t_rx.len, T_BULK_LEN);
    ck_assert_uint_eq(t_rx.type, MC_WIRE_WRITE);
    ck_assert_uint_eq(t_rx.id, 77);
    ck_assert_str_eq(t_rx.hdr, "alloc 42 v7");
    for (size_t i = 0; i < T_BULK_LEN; i++) {
        if (t_rx.buf[i] != t_pattern(i))
            ck_abort_msg("byte %zu: %02x want %02x", i, t_rx.buf[i], t_pattern(i));
    }
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), 0); /* the sender saw success */
    mc_ucx_get_stats(t_u, &st);
    ck_assert_uint_eq(st.bulk_received, 1);
    ck_assert_uint_eq(st.bulk_received_eager, 0); /* bulk_eager_max 0: a rendezvous */
    mc_ucx_destroy(t_u);
    munmap(t_rx.buf, T_BULK_LEN);
    close(fd);
}
END_TEST

/* The typed forms (GPU segments UCX moves directly): a send that names its memory type,
 * landed where the dest fn named the buffer's type. */
static int t_peer_bulk_sender_mem(struct mc_ucx *u, const void *a, size_t n)
{
    static const char hdr[] = "alloc 42 v7";
    struct mc_ucx_ep *ep = NULL;
    struct t_sent s = {0};
    uint8_t *data = malloc(T_BULK_LEN);

    if (data == NULL || mc_ucx_ep_connect(u, a, n, &ep) != 0)
        return 2;
    for (size_t i = 0; i < T_BULK_LEN; i++)
        data[i] = t_pattern(i);
    if (mc_ucx_send_bulk_mem(ep, MC_WIRE_WRITE, 77, hdr, sizeof(hdr), data, T_BULK_LEN,
                             MC_UCX_MEM_HOST, t_send_done, &s) != 0)
        return 3;
    if (!t_pump_until(u, &s.done, T_WAIT_MS))
        return 4;
    free(data);
    if (s.status != 0)
        return t_status_exit(10, s.status);
    return t_serve(u);
}

static void *t_bulk_dest_typed(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *h,
                               const void *hdr_payload, size_t len, void **op_p)
{
    void *dst = t_bulk_dest(ctx, ep, h, hdr_payload, len, op_p);

    ck_assert(!mc_ucx_bulk_eager(t_u)); /* 16 MiB: rendezvous */
    mc_ucx_bulk_dest_mem(t_u, MC_UCX_MEM_HOST);
    return dst;
}

START_TEST(test_ucx_bulk_typed_memory)
{
    uint8_t addr[T_ADDR_MAX];
    struct t_peer p;

    t_rx = (struct t_bulk_rx){0};
    t_rx.buf = malloc(T_BULK_LEN);
    t_rx.cap = T_BULK_LEN;
    ck_assert_ptr_nonnull(t_rx.buf);
    p = t_peer_start(t_peer_bulk_sender_mem, NULL);
    t_setup();
    ck_assert(mc_ucx_moves(t_u, MC_UCX_MEM_HOST));
    ck_assert(mc_ucx_has_cuda(t_u) == mc_ucx_moves(t_u, MC_UCX_MEM_CUDA));
    mc_ucx_bulk_register(t_u, t_bulk_dest_typed, t_bulk_done, &t_rx);
    (void)t_peer_hello(&p, addr);
    ck_assert(t_pump_until(t_u, &t_rx.done, T_WAIT_MS));
    ck_assert_int_eq(t_rx.status, 0);
    ck_assert_uint_eq(t_rx.len, T_BULK_LEN);
    for (size_t i = 0; i < T_BULK_LEN; i++) {
        if (t_rx.buf[i] != t_pattern(i))
            ck_abort_msg("byte %zu: %02x want %02x", i, t_rx.buf[i], t_pattern(i));
    }
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), 0);
    mc_ucx_destroy(t_u);
    free(t_rx.buf);
}
END_TEST

/* A split destination (mc_ucx_bulk_dest_split): the first bytes into one buffer, the rest
 * into another, by rendezvous; not one byte past either. */
#define T_SPLIT_TAIL 136u
static uint8_t t_split_tail[T_SPLIT_TAIL + 64];

static void *t_bulk_dest_split(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *h,
                               const void *hdr_payload, size_t len, void **op_p)
{
    void *dst = t_bulk_dest(ctx, ep, h, hdr_payload, len, op_p);

    if (dst != NULL)
        mc_ucx_bulk_dest_split(t_u, len - T_SPLIT_TAIL, t_split_tail);
    return dst;
}

/* A bulk of `len` bytes from a peer created with `child` lands split in two buffers, each
 * byte where it belongs; returns how many bulk messages came eagerly. */
static uint64_t t_bulk_split_run(size_t len, struct mc_ucx_params *child)
{
    uint8_t addr[T_ADDR_MAX];
    struct mc_ucx_stats st;
    struct t_peer p;
    size_t head = len - T_SPLIT_TAIL;

    t_rx = (struct t_bulk_rx){0};
    t_rx.buf = malloc(len);
    t_rx.cap = len;
    ck_assert_ptr_nonnull(t_rx.buf);
    memset(t_rx.buf, 0xee, len);
    memset(t_split_tail, 0xee, sizeof(t_split_tail));
    t_bulk_len = len;
    p = t_peer_start(t_peer_bulk_sender, child);
    t_bulk_len = T_BULK_LEN;
    t_setup();
    mc_ucx_bulk_register(t_u, t_bulk_dest_split, t_bulk_done, &t_rx);
    (void)t_peer_hello(&p, addr);
    ck_assert(t_pump_until(t_u, &t_rx.done, T_WAIT_MS));
    ck_assert_int_eq(t_rx.status, 0);
    ck_assert_uint_eq(t_rx.len, len);
    for (size_t i = 0; i < head; i++) {
        if (t_rx.buf[i] != t_pattern(i))
            ck_abort_msg("byte %zu: %02x want %02x", i, t_rx.buf[i], t_pattern(i));
    }
    for (size_t i = head; i < len; i++)
        ck_assert_msg(t_rx.buf[i] == 0xee, "byte %zu of the head buffer written past its end",
                      i);
    for (size_t i = 0; i < T_SPLIT_TAIL; i++)
        ck_assert_msg(t_split_tail[i] == t_pattern(head + i), "tail byte %zu wrong", i);
    for (size_t i = T_SPLIT_TAIL; i < sizeof(t_split_tail); i++)
        ck_assert_msg(t_split_tail[i] == 0xee, "tail written past its end at %zu", i);
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), 0);
    mc_ucx_get_stats(t_u, &st);
    ck_assert_uint_eq(st.bulk_received, 1);
    mc_ucx_destroy(t_u);
    free(t_rx.buf);
    return st.bulk_received_eager;
}

START_TEST(test_ucx_bulk_split)
{
    ck_assert_uint_eq(t_bulk_split_run(T_BULK_LEN, NULL), 0);
}
END_TEST

/* A sender with bulk_eager_max sends what fits in one eager message: it lands the same,
 * split included; one past the limit goes by rendezvous */
START_TEST(test_ucx_bulk_eager_split)
{
    struct mc_ucx_params child = {.bulk_eager_max = 128u << 10};

    ck_assert_uint_eq(t_bulk_split_run(64u << 10, &child), 1);
    ck_assert_uint_eq(t_bulk_split_run((128u << 10) + 1, &child), 0);
}
END_TEST

START_TEST(test_ucx_bulk_refused)
{
    uint8_t addr[T_ADDR_MAX];
    struct t_peer p;
    struct mc_ucx_stats st;
    int rc;

    t_rx.buf = malloc(16);
    t_rx.cap = 16;
    t_rx.refuse = true;
    p = t_peer_start(t_peer_bulk_sender, NULL);
    t_setup();
    mc_ucx_bulk_register(t_u, t_bulk_dest, t_bulk_done, &t_rx);
    (void)t_peer_hello(&p, addr);
    {
        uint64_t deadline = mc_ucx_now_ms() + T_WAIT_MS;

        do {
            t_turn(t_u, 5);
            mc_ucx_get_stats(t_u, &st);
        } while (st.bulk_refused == 0 && mc_ucx_now_ms() < deadline);
    }
    ck_assert_uint_eq(st.bulk_refused, 1);
    ck_assert(!t_rx.done);
    rc = t_peer_finish(&p, T_WAIT_MS);
    /* the sender learned it was refused */
    ck_assert_int_eq(rc, t_status_exit(10, MC_ERR_CANCELED));
    mc_ucx_destroy(t_u);
    free(t_rx.buf);
}
END_TEST

/* --- bulk calls: the receiver answers once the bytes are in place ---------------------------- */

/* What the sender of a bulk call saw: the answer (or its error) and the data release. */
struct t_bcall {
    bool replied, released;
    int reply_status, data_status;
    uint64_t replied_ms, released_ms;
    char answer[8];
};

static void t_bcall_replied(void *ctx, int status, const struct mc_wire_hdr *h, const void *pl,
                            size_t len)
{
    struct t_bcall *b = ctx;

    (void)h;
    b->replied = true;
    b->replied_ms = mc_ucx_now_ms();
    b->reply_status = status;
    if (status == 0 && len > 0 && len < sizeof(b->answer))
        memcpy(b->answer, pl, len);
}

static void t_bcall_released(void *ctx, int status)
{
    struct t_bcall *b = ctx;

    b->released = true;
    b->released_ms = mc_ucx_now_ms();
    b->data_status = status;
}

/* Sends T_BULK_LEN pattern bytes as a bulk call with a 2 s deadline. Exit status: 0 answered
 * "ok" after the data was released by UCX or before it (either order), 20 + n: the answer
 * failed with -n (the data release came too); 2-5: setup or a callback missing. */
static int t_peer_bulk_caller(struct mc_ucx *u, const void *a, size_t n)
{
    static const char hdr[] = "alloc 43 v8";
    struct mc_ucx_ep *ep = NULL;
    struct t_bcall b = {0};
    uint8_t *data = malloc(T_BULK_LEN);

    if (data == NULL || mc_ucx_ep_connect(u, a, n, &ep) != 0)
        return 2;
    for (size_t i = 0; i < T_BULK_LEN; i++)
        data[i] = t_pattern(i);
    if (mc_ucx_send_bulk_call(ep, MC_WIRE_WRITE, hdr, sizeof(hdr), data, T_BULK_LEN,
                              mc_ucx_now_ms() + 2000, t_bcall_replied, t_bcall_released,
                              &b) != 0)
        return 3;
    if (!t_pump_until(u, &b.replied, T_WAIT_MS) || !t_pump_until(u, &b.released, T_WAIT_MS))
        return 4;
    free(data); /* only now: UCX no longer reads it */
    if (b.reply_status != 0)
        return t_status_exit(20, b.reply_status);
    if (b.data_status != 0 || strcmp(b.answer, "ok") != 0)
        return 5;
    return t_serve(u);
}

static struct mc_ucx_ep *t_rx_ep;
static bool t_rx_answer; /* the receiver answers in its bulk done callback */

static void *t_bulk_dest_ep(void *ctx, struct mc_ucx_ep *ep, const struct mc_wire_hdr *h,
                            const void *hdr_payload, size_t len, void **op_p)
{
    t_rx_ep = ep;
    return t_bulk_dest(ctx, ep, h, hdr_payload, len, op_p);
}

static void t_bulk_done_answer(void *ctx, void *op, int status)
{
    struct t_bulk_rx *rx = ctx;

    t_bulk_done(ctx, op, status);
    if (t_rx_answer && status == 0)
        ck_assert_int_eq(mc_ucx_rpc_reply(t_rx_ep, MC_WIRE_WRITE_REPLY, rx->id, "ok", 2), 0);
}

/* The sender's call ends with the receiver's answer, sent after its bulk done callback: the
 * bytes were in place when the sender heard "ok" (the send's own completion only says they
 * left). */
START_TEST(test_ucx_bulk_call_answered_once_landed)
{
    uint8_t addr[T_ADDR_MAX];
    struct t_peer p;

    t_rx.buf = malloc(T_BULK_LEN);
    t_rx.cap = T_BULK_LEN;
    t_rx_answer = true;
    p = t_peer_start(t_peer_bulk_caller, NULL);
    t_setup();
    mc_ucx_bulk_register(t_u, t_bulk_dest_ep, t_bulk_done_answer, &t_rx);
    (void)t_peer_hello(&p, addr);
    ck_assert(t_pump_until(t_u, &t_rx.done, T_WAIT_MS));
    ck_assert_int_eq(t_rx.status, 0);
    ck_assert_uint_eq(t_rx.len, T_BULK_LEN);
    ck_assert_str_eq(t_rx.hdr, "alloc 43 v8");
    ck_assert_uint_ne(t_rx.id >> MC_UCX_SESSION_SHIFT, 0); /* the id carries a session */
    for (size_t i = 0; i < T_BULK_LEN; i++) {
        if (t_rx.buf[i] != t_pattern(i))
            ck_abort_msg("byte %zu: %02x want %02x", i, t_rx.buf[i], t_pattern(i));
    }
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), 0);
    mc_ucx_destroy(t_u);
    free(t_rx.buf);
}
END_TEST

/* A receiver that takes the bytes but never answers: the call times out at its deadline,
 * and the data release still comes (exactly once). */
START_TEST(test_ucx_bulk_call_unanswered_times_out)
{
    uint8_t addr[T_ADDR_MAX];
    struct t_peer p;

    t_rx.buf = malloc(T_BULK_LEN);
    t_rx.cap = T_BULK_LEN;
    t_rx_answer = false;
    p = t_peer_start(t_peer_bulk_caller, NULL);
    t_setup();
    mc_ucx_bulk_register(t_u, t_bulk_dest_ep, t_bulk_done_answer, &t_rx);
    (void)t_peer_hello(&p, addr);
    ck_assert(t_pump_until(t_u, &t_rx.done, T_WAIT_MS));
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), t_status_exit(20, MC_ERR_TIMEOUT));
    mc_ucx_destroy(t_u);
    free(t_rx.buf);
}
END_TEST

/* A refused bulk call fails its call (no answer will come) and releases the data. */
START_TEST(test_ucx_bulk_call_refused)
{
    uint8_t addr[T_ADDR_MAX];
    struct t_peer p;
    int rc;

    t_rx.buf = malloc(16);
    t_rx.cap = 16;
    t_rx.refuse = true;
    t_rx_answer = true;
    p = t_peer_start(t_peer_bulk_caller, NULL);
    t_setup();
    mc_ucx_bulk_register(t_u, t_bulk_dest_ep, t_bulk_done_answer, &t_rx);
    (void)t_peer_hello(&p, addr);
    rc = t_peer_finish(&p, T_WAIT_MS);
    ck_assert_msg(rc == t_status_exit(20, MC_ERR_UNAVAILABLE) ||
                      rc == t_status_exit(20, MC_ERR_CANCELED),
                  "the caller's exit status %d", rc);
    ck_assert(!t_rx.done);
    mc_ucx_destroy(t_u);
    free(t_rx.buf);
}
END_TEST

/* --- one-sided ---------------------------------------------------------------------------------- */

static int t_peer_rma_target(struct mc_ucx *u, const void *a, size_t n)
{
    enum { LEN = 1 << 20 };
    uint8_t *mem = calloc(1, LEN);
    struct mc_ucx_mem *m = NULL;
    void *rkey;
    size_t rkey_len;
    uint64_t base = (uint64_t)(uintptr_t)mem;
    uint32_t rl;
    uint64_t deadline;

    (void)a;
    (void)n;
    if (mem == NULL || mc_ucx_mem_map(u, mem, LEN, &m) != 0 ||
        mc_ucx_mem_pack_rkey(m, &rkey, &rkey_len) != 0)
        return 2;
    for (size_t i = 0; i < LEN; i++)
        mem[i] = (uint8_t)i;
    /* the rkey and base address go to the parent on the address pipe's sibling: reuse the
     * sink pipe fd */
    rl = (uint32_t)rkey_len;
    t_write_all(t_sink_pipe, &base, sizeof(base));
    t_write_all(t_sink_pipe, &rl, sizeof(rl));
    t_write_all(t_sink_pipe, rkey, rkey_len);
    free(rkey);
    /* serve (software RMA needs our progress) until the parent says 'c' */
    deadline = mc_ucx_now_ms() + T_PEER_LIFE_MS;
    while (t_cmd != 'c' && !t_pipe_closed && mc_ucx_now_ms() < deadline)
        t_turn(u, 5);
    /* the parent put 0xa5 over [4096, 8192) */
    for (size_t i = 4096; i < 8192; i++) {
        if (mem[i] != 0xa5)
            return 3;
    }
    t_serve(u);
    mc_ucx_mem_unmap(m);
    free(mem);
    return 0;
}

START_TEST(test_ucx_rma_put_get)
{
    uint8_t addr[T_ADDR_MAX], rkey[T_ADDR_MAX];
    uint8_t buf[4096], out[4096];
    struct mc_ucx_rkey *rk = NULL;
    struct t_sent s1 = {0}, s2 = {0}, s3 = {0};
    struct t_peer p;
    struct mc_ucx_ep *ep;
    uint64_t base;
    uint32_t rl;
    int pfd[2];

    ck_assert_int_eq(pipe(pfd), 0);
    t_sink_pipe = pfd[1];
    p = t_peer_start(t_peer_rma_target, NULL);
    t_setup();
    close(pfd[1]);
    ep = t_connect(t_u, addr, t_peer_hello(&p, addr));
    ck_assert(t_read_all(pfd[0], &base, sizeof(base)));
    ck_assert(t_read_all(pfd[0], &rl, sizeof(rl)));
    ck_assert_uint_le(rl, sizeof(rkey));
    ck_assert(t_read_all(pfd[0], rkey, rl));
    ck_assert_int_eq(mc_ucx_rkey_unpack(ep, rkey, rl, &rk), 0);

    ck_assert_int_eq(mc_ucx_get(ep, buf, sizeof(buf), base + 256, rk, t_send_done, &s1), 0);
    ck_assert(t_pump_until(t_u, &s1.done, T_WAIT_MS));
    ck_assert_int_eq(s1.status, 0);
    for (size_t i = 0; i < sizeof(buf); i++)
        ck_assert_uint_eq(buf[i], (uint8_t)(i + 256));

    memset(out, 0xa5, sizeof(out));
    ck_assert_int_eq(mc_ucx_put(ep, out, sizeof(out), base + 4096, rk, t_send_done, &s2), 0);
    ck_assert_int_eq(mc_ucx_ep_flush(ep, t_send_done, &s3), 0);
    ck_assert(t_pump_until(t_u, &s3.done, T_WAIT_MS));
    ck_assert(s2.done);
    ck_assert_int_eq(s2.status, 0);
    ck_assert_int_eq(s3.status, 0);
    mc_ucx_rkey_destroy(rk);
    t_peer_cmd(&p, 'c');
    ck_assert_int_eq(t_peer_finish(&p, T_WAIT_MS), 0);
    close(pfd[0]);
    mc_ucx_destroy(t_u);
}
END_TEST

START_TEST(test_ucx_create_bad_config)
{
    static const char *const bad[] = {"RNDV_THRESH=not-a-size", NULL};
    static const char *const noeq[] = {"TLS", NULL};
    struct mc_ucx_params p = {.config = bad};
    struct mc_ucx *u = NULL;

    ck_assert_int_eq(mc_ucx_create(&p, &u), MC_ERR_INVALID);
    p.config = noeq;
    ck_assert_int_eq(mc_ucx_create(&p, &u), MC_ERR_INVALID);
    ck_assert_ptr_null(u);
    mc_ucx_destroy(NULL);
}
END_TEST

static Suite *ucx_suite(void)
{
    Suite *s = suite_create("ucx");
    TCase *tc = tcase_create("ucx");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_ucx_rpc_round_trip);
    tcase_add_test(tc, test_ucx_rpc_pipelined_1000);
    tcase_add_test(tc, test_ucx_rpc_out_of_order_replies);
    tcase_add_test(tc, test_ucx_rpc_deadline_timeout);
    tcase_add_test(tc, test_ucx_rpc_late_reply_dropped);
    tcase_add_test(tc, test_ucx_peer_killed_fails_pending);
    tcase_add_test(tc, test_ucx_listener_peer_killed_reported);
    tcase_add_test(tc, test_ucx_corrupt_frame_fails_only_that_ep);
    tcase_add_test(tc, test_ucx_bad_reply_fails_call_proto);
    tcase_add_test(tc, test_ucx_bulk_16mib_into_memfd);
    tcase_add_test(tc, test_ucx_bulk_refused);
    tcase_add_test(tc, test_ucx_bulk_typed_memory);
    tcase_add_test(tc, test_ucx_bulk_split);
    tcase_add_test(tc, test_ucx_bulk_eager_split);
    tcase_add_test(tc, test_ucx_bulk_call_answered_once_landed);
    tcase_add_test(tc, test_ucx_bulk_call_unanswered_times_out);
    tcase_add_test(tc, test_ucx_bulk_call_refused);
    tcase_add_test(tc, test_ucx_rma_put_get);
    tcase_add_test(tc, test_ucx_create_bad_config);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ucx_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
