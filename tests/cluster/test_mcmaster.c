/*
 * Tests of mc-master (suite 'cluster'): the real daemon ($MC_MASTER_BIN) started on
 * 127.0.0.1:0 with a ready file, its worker address fetched over the TCP bootstrap, and
 * every RPC driven from this process's own UCX worker with the daemon/proto codecs.
 * mc-master gets PR_SET_PDEATHSIG, so a failing test never leaves it behind; passing tests
 * stop it themselves.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "daemon/mcmaster/bootstrap.h"
#include "daemon/proto/master_proto.h"
#include "ucx_backend/ucx.h"

#define T_TOKEN     "t0ken-for-tests"
#define T_WAIT_MS   10000u
#define T_REPLY_MAX (256u << 10)

struct t_master {
    pid_t pid;
    char dir[64];
    uint16_t port;
    struct mc_ucx *u;
    struct mc_ucx_ep *ep;
    uint32_t node;
    uint8_t addr[MC_MCMASTER_BOOT_ADDR_MAX]; /* the master's worker address */
    size_t addr_len;
    /* a second client (another agent), made by t_connect_other; t_swap_client swaps it
     * with the first so that t_call and the helpers speak for it */
    struct mc_ucx *u2;
    struct mc_ucx_ep *ep2;
};

static struct t_master t_m = {.pid = -1};

/* the last reply */
static bool t_done;
static int t_status;
static uint8_t t_reply[T_REPLY_MAX];
static size_t t_reply_len;

static void t_on_done(void *ctx, int status, const struct mc_wire_hdr *h, const void *payload,
                      size_t len)
{
    (void)ctx;
    (void)h;
    t_status = status;
    if (status == 0 && len <= sizeof(t_reply)) {
        memcpy(t_reply, payload, len);
        t_reply_len = len;
    } else if (status == 0) {
        t_status = MC_ERR_TOO_LARGE;
    }
    t_done = true;
}

static void t_turn(struct mc_ucx *u, int max_ms)
{
    struct pollfd pfd = {.fd = mc_ucx_efd(u), .events = POLLIN};

    if (mc_ucx_progress(u) || !mc_ucx_arm(u))
        return;
    poll(&pfd, 1, max_ms);
}

/* One RPC: returns the transport status; the reply payload is in t_reply. */
static int t_call(uint16_t type, const void *payload, size_t len)
{
    uint64_t deadline = mc_ucx_now_ms() + T_WAIT_MS;
    int rc;

    t_done = false;
    rc = mc_ucx_rpc_call(t_m.ep, type, payload, len, deadline, t_on_done, NULL, NULL);
    if (rc != 0)
        return rc;
    while (!t_done)
        t_turn(t_m.u, 5);
    return t_status;
}

/* The status that starts every reply. */
static int t_reply_status(void)
{
    struct mc_wire_reader r;

    mc_wire_reader_init(&r, t_reply, t_reply_len);
    return (int32_t)mc_wire_get_u32(&r);
}

static void t_sleep_ms(unsigned ms)
{
    uint64_t end = mc_ucx_now_ms() + ms;

    while (mc_ucx_now_ms() < end)
        t_turn(t_m.u, 5); /* keep progressing our worker meanwhile */
}

/* Starts mc-master with extra --set arguments (NULL-terminated), waits for its ready file,
 * fetches its worker address and connects to it. */
static void t_start(const char *const *sets)
{
    char ready[128];
    const char *bin = getenv("MC_MASTER_BIN");
    uint64_t deadline;
    uint8_t boot[MC_MCMASTER_BOOT_HDR + MC_MCMASTER_BOOT_ADDR_MAX];
    size_t got = 0;
    uint32_t magic, alen;
    struct sockaddr_in sa = {0};
    const char *mm_cfg[] = {"MM_ERROR_HANDLING=y", NULL};
    struct mc_ucx_params up = {.name = "t-cluster", .config = mm_cfg};
    unsigned port = 0;
    int fd, pid_in_file = 0;
    FILE *f = NULL;

    ck_assert_msg(bin != NULL, "MC_MASTER_BIN is not set");
    strcpy(t_m.dir, "/tmp/mc-cluster-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(t_m.dir));
    snprintf(ready, sizeof(ready), "%s/ready", t_m.dir);
    t_m.pid = fork();
    ck_assert_int_ge(t_m.pid, 0);
    if (t_m.pid == 0) {
        const char *argv[64] = {bin,   "--listen", "127.0.0.1:0", "--ready-file",
                                ready, "--set",    "tick_ms=50"};
        int n = 7, i;

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (i = 0; sets != NULL && sets[i] != NULL && n < 60; i++) {
            argv[n++] = "--set";
            argv[n++] = sets[i];
        }
        argv[n] = NULL;
        setenv("MC_CLUSTER_TOKEN", T_TOKEN, 1); /* through the config engine's env prefix */
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    /* the ready file appears by rename: poll for it with a deadline */
    deadline = mc_ucx_now_ms() + T_WAIT_MS;
    while ((f = fopen(ready, "r")) == NULL) {
        int st;

        ck_assert_msg(waitpid(t_m.pid, &st, WNOHANG) == 0, "mc-master exited at start-up");
        ck_assert_msg(mc_ucx_now_ms() < deadline, "no ready file");
        poll(NULL, 0, 10);
    }
    ck_assert_int_eq(fscanf(f, "%d %u", &pid_in_file, &port), 2);
    fclose(f);
    ck_assert_int_eq(pid_in_file, t_m.pid);
    ck_assert(port > 0 && port < 65536);
    t_m.port = (uint16_t)port;

    /* bootstrap: read the whole message until the master closes */
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(t_m.port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    for (;;) {
        ssize_t n = read(fd, boot + got, sizeof(boot) - got);

        if (n < 0 && errno == EINTR)
            continue;
        ck_assert_int_ge(n, 0);
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    ck_assert_uint_ge(got, MC_MCMASTER_BOOT_HDR);
    magic = (uint32_t)boot[0] | (uint32_t)boot[1] << 8 | (uint32_t)boot[2] << 16 |
            (uint32_t)boot[3] << 24;
    alen = (uint32_t)boot[4] | (uint32_t)boot[5] << 8 | (uint32_t)boot[6] << 16 |
           (uint32_t)boot[7] << 24;
    ck_assert_uint_eq(magic, MC_MCMASTER_BOOT_MAGIC);
    ck_assert_uint_eq(got, MC_MCMASTER_BOOT_HDR + alen);

    memcpy(t_m.addr, boot + MC_MCMASTER_BOOT_HDR, alen);
    t_m.addr_len = alen;
    ck_assert_int_eq(mc_ucx_create(&up, &t_m.u), 0);
    ck_assert_int_eq(mc_ucx_ep_connect(t_m.u, t_m.addr, t_m.addr_len, &t_m.ep), 0);
}

/* A new endpoint from our worker: mc-master closes the one it refused (a wrong token, a
 * request before HELLO), so a client tries again on a new one. */
static void t_reconnect(void)
{
    mc_ucx_ep_close(t_m.ep, true);
    ck_assert_int_eq(mc_ucx_ep_connect(t_m.u, t_m.addr, t_m.addr_len, &t_m.ep), 0);
}

/* A refused request closes its endpoint: the next call on it fails (it never succeeds). */
static void t_assert_closed(void)
{
    uint64_t deadline = mc_ucx_now_ms() + T_WAIT_MS;
    int rc;

    do { /* the close reaches us a moment after the answer */
        rc = t_call(MC_WIRE_HEARTBEAT, "", 0);
        if (rc == 0)
            ck_assert_int_ne(t_reply_status(), 0);
    } while (rc == 0 && mc_ucx_now_ms() < deadline);
    ck_assert_msg(rc != 0, "a refused endpoint stayed open");
}

/* A second client with its own worker and endpoint to the master. */
static void t_connect_other(void)
{
    const char *mm_cfg[] = {"MM_ERROR_HANDLING=y", NULL};
    struct mc_ucx_params up = {.name = "t-cluster-2", .config = mm_cfg};

    ck_assert_int_eq(mc_ucx_create(&up, &t_m.u2), 0);
    ck_assert_int_eq(mc_ucx_ep_connect(t_m.u2, t_m.addr, t_m.addr_len, &t_m.ep2), 0);
}

static void t_swap_client(void)
{
    struct mc_ucx *u = t_m.u;
    struct mc_ucx_ep *ep = t_m.ep;

    t_m.u = t_m.u2;
    t_m.ep = t_m.ep2;
    t_m.u2 = u;
    t_m.ep2 = ep;
}

/* Waits up to `ms` for mc-master to exit; its wait status, or -1 if it did not. */
static int t_wait_exit(unsigned ms)
{
    uint64_t deadline = mc_ucx_now_ms() + ms;
    int st;

    for (;;) {
        pid_t r = waitpid(t_m.pid, &st, WNOHANG);

        if (r == t_m.pid) {
            t_m.pid = -1;
            return st;
        }
        if (mc_ucx_now_ms() >= deadline)
            return -1;
        if (t_m.u != NULL)
            t_turn(t_m.u, 5);
        else
            poll(NULL, 0, 5);
    }
}

static void t_stop(void)
{
    char path[128];

    if (t_m.ep != NULL)
        mc_ucx_ep_close(t_m.ep, true);
    t_m.ep = NULL;
    mc_ucx_destroy(t_m.u);
    t_m.u = NULL;
    if (t_m.ep2 != NULL)
        mc_ucx_ep_close(t_m.ep2, true);
    t_m.ep2 = NULL;
    mc_ucx_destroy(t_m.u2);
    t_m.u2 = NULL;
    if (t_m.pid > 0) {
        kill(t_m.pid, SIGKILL);
        waitpid(t_m.pid, NULL, 0);
        t_m.pid = -1;
    }
    snprintf(path, sizeof(path), "%s/ready", t_m.dir);
    unlink(path);
    rmdir(t_m.dir);
}

/* --- message helpers ---------------------------------------------------------------------- */

static uint8_t t_buf[T_REPLY_MAX];

#define T_BYTES(s) ((struct mc_proto_bytes){(const uint8_t *)(s), strlen(s)})

static int t_hello_in(const char *token, const char *name, const char *domain, uint32_t *node_p)
{
    struct mc_proto_hello_req req = {T_BYTES(token), T_BYTES(name), T_BYTES(domain), 0, 0};
    struct mc_proto_hello_rep rep;
    size_t len;
    int rc;

    ck_assert_int_eq(mc_proto_hello_req_encode(&req, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_call(MC_WIRE_HELLO, t_buf, len), 0);
    ck_assert_int_eq(mc_proto_hello_rep_decode(t_reply, t_reply_len, &rep), 0);
    rc = rep.status;
    if (rc == 0) {
        ck_assert_uint_gt(rep.node_ttl_ms, 0);
        ck_assert_uint_gt(rep.lease_ttl_ms, 0);
        *node_p = rep.node;
    }
    return rc;
}

static int t_hello(const char *token, const char *name, uint32_t *node_p)
{
    return t_hello_in(token, name, "", node_p);
}

static int t_heartbeat(uint32_t node, uint32_t flags)
{
    struct mc_proto_heartbeat_req req = {node, flags};
    struct mc_proto_status_rep rep;
    size_t len;

    ck_assert_int_eq(mc_proto_heartbeat_req_encode(&req, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_call(MC_WIRE_HEARTBEAT, t_buf, len), 0);
    ck_assert_int_eq(mc_proto_status_rep_decode(t_reply, t_reply_len, &rep), 0);
    return rep.status;
}

static int t_mount(uint32_t node, uint32_t *seg_p)
{
    const void *addr;
    size_t alen, len;
    struct mc_proto_mount_req req = {
        .seg = {.node = node, .kind = MC_SEG_DRAM, .base = 0x10000000, .size = 64u << 20}};
    struct mc_proto_mount_rep rep;

    mc_ucx_address(t_m.u, &addr, &alen);
    req.worker_addr = (struct mc_proto_bytes){addr, alen};
    req.rkey = T_BYTES("rk");
    ck_assert_int_eq(mc_proto_mount_req_encode(&req, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_call(MC_WIRE_MOUNT, t_buf, len), 0);
    ck_assert_int_eq(mc_proto_mount_rep_decode(t_reply, t_reply_len, &rep), 0);
    if (rep.status == 0)
        *seg_p = rep.seg;
    return rep.status;
}

static struct mc_master_put_req t_put_item(const char *key, uint64_t size)
{
    return (struct mc_master_put_req){.key = key,
                                      .key_len = strlen(key),
                                      .size = size,
                                      .replicas = 1,
                                      .preferred = MC_MASTER_NODE_NONE};
}

/* PUT_START_BATCH: the call status; per-item results and grants. */
static int t_put_start(uint32_t node, uint32_t n, const struct mc_master_put_req *items,
                       int *results, struct mc_master_put_grant *grants)
{
    struct mc_proto_put_start_req req = {node, n};
    struct mc_proto_batch_rep rep;
    size_t len;

    ck_assert_int_eq(mc_proto_put_start_req_encode(&req, items, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_call(MC_WIRE_PUT_START_BATCH, t_buf, len), 0);
    ck_assert_int_eq(
        mc_proto_put_start_rep_decode(t_reply, t_reply_len, n, &rep, results, grants), 0);
    if (rep.status == 0)
        ck_assert_uint_eq(rep.n, n);
    return rep.status;
}

static int t_put_end(uint32_t node, uint32_t n, const struct mc_master_ref *refs, int *results)
{
    struct mc_proto_ref_req req = {node, n};
    struct mc_proto_batch_rep rep;
    size_t len;

    ck_assert_int_eq(mc_proto_put_end_req_encode(&req, refs, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_call(MC_WIRE_PUT_END_BATCH, t_buf, len), 0);
    ck_assert_int_eq(mc_proto_results_rep_decode(t_reply, t_reply_len, n, &rep, results), 0);
    if (rep.status == 0)
        ck_assert_uint_eq(rep.n, n);
    return rep.status;
}

static void t_keys(uint32_t n, const char *const *keys, struct mc_proto_key *out)
{
    uint32_t i;

    for (i = 0; i < n; i++)
        out[i] = (struct mc_proto_key){keys[i], strlen(keys[i])};
}

static int t_get(uint32_t node, uint32_t n, const char *const *keys, int *results,
                 struct mc_master_get_result *res)
{
    struct mc_proto_keys_req req = {node, 0, n};
    struct mc_proto_key k[8];
    struct mc_proto_batch_rep rep;
    size_t len;

    t_keys(n, keys, k);
    ck_assert_int_eq(mc_proto_get_req_encode(&req, k, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_call(MC_WIRE_GET_BATCH, t_buf, len), 0);
    ck_assert_int_eq(mc_proto_get_rep_decode(t_reply, t_reply_len, n, &rep, results, res), 0);
    return rep.status;
}

static int t_exist(uint32_t node, uint32_t flags, uint32_t n, const char *const *keys,
                   int *results, struct mc_master_stat *stats)
{
    struct mc_proto_keys_req req = {node, flags, n};
    struct mc_proto_key k[8];
    struct mc_proto_batch_rep rep;
    size_t len;

    t_keys(n, keys, k);
    ck_assert_int_eq(mc_proto_exist_req_encode(&req, k, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_call(MC_WIRE_EXIST_BATCH, t_buf, len), 0);
    ck_assert_int_eq(mc_proto_exist_rep_decode(t_reply, t_reply_len, n, &rep, results, stats),
                     0);
    if (rep.status == 0)
        ck_assert_uint_eq(rep.flags, flags);
    return rep.status;
}

static int t_remove(uint32_t node, uint32_t flags, uint32_t n, const char *const *keys,
                    int *results, uint64_t *counts)
{
    struct mc_proto_keys_req req = {node, flags, n};
    struct mc_proto_key k[8];
    struct mc_proto_batch_rep rep;
    size_t len;

    t_keys(n, keys, k);
    ck_assert_int_eq(mc_proto_remove_req_encode(&req, k, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_call(MC_WIRE_REMOVE_BATCH, t_buf, len), 0);
    ck_assert_int_eq(mc_proto_remove_rep_decode(t_reply, t_reply_len, n, &rep, results, counts),
                     0);
    return rep.status;
}

static struct mc_proto_seg_entry t_segs[16];

static int t_info(struct mc_proto_info_rep *rep)
{
    struct mc_proto_info_req req = {MC_PROTO_INFO_F_STATS | MC_PROTO_INFO_F_SEGMENTS, 0, 16, 0,
                                    0};
    size_t len;

    ck_assert_int_eq(mc_proto_info_req_encode(&req, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_call(MC_WIRE_CLUSTER_INFO, t_buf, len), 0);
    ck_assert_int_eq(mc_proto_info_rep_decode(t_reply, t_reply_len, 16, rep, t_segs, 0, NULL),
                     0);
    return rep->status;
}

static struct mc_proto_node_entry t_nodes[16];

/* CLUSTER_INFO with only the node page: up to node_max nodes from *cursor_p on. */
static int t_info_nodes(uint32_t *cursor_p, uint32_t node_max, struct mc_proto_info_rep *rep)
{
    struct mc_proto_info_req req = {
        .flags = MC_PROTO_INFO_F_NODES, .node_cursor = *cursor_p, .node_max = node_max};
    size_t len;

    ck_assert_uint_le(node_max, 16);
    ck_assert_int_eq(mc_proto_info_req_encode(&req, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_call(MC_WIRE_CLUSTER_INFO, t_buf, len), 0);
    ck_assert_int_eq(mc_proto_info_rep_decode(t_reply, t_reply_len, 0, rep, NULL, 16, t_nodes),
                     0);
    if (rep->status == 0) {
        ck_assert_uint_eq(rep->flags, MC_PROTO_INFO_F_NODES);
        ck_assert_uint_le(rep->nnode, node_max);
        *cursor_p = rep->next_node_cursor;
    }
    return rep->status;
}

/* The node named `name` in the last node page, or NULL. */
static const struct mc_proto_node_entry *t_node_named(const struct mc_proto_info_rep *rep,
                                                      const char *name)
{
    for (uint32_t i = 0; i < rep->nnode; i++) {
        if (t_nodes[i].name.len == strlen(name) &&
            memcmp(t_nodes[i].name.p, name, t_nodes[i].name.len) == 0)
            return &t_nodes[i];
    }
    return NULL;
}

static struct mc_proto_key t_list_keys[16];

/* LIST: a page of at most `max` keys; *cursor_p in and out. The keys (t_list_keys) point
 * into t_reply: valid until the next call. */
static int t_list(uint32_t node, const char *prefix, uint64_t *cursor_p, uint32_t max,
                  struct mc_proto_list_rep *rep)
{
    struct mc_proto_list_req req = {node, max, *cursor_p, T_BYTES(prefix)};
    size_t len;

    ck_assert_uint_le(max, 16);
    ck_assert_int_eq(mc_proto_list_req_encode(&req, t_buf, sizeof(t_buf), &len), 0);
    ck_assert_int_eq(t_call(MC_WIRE_LIST, t_buf, len), 0);
    ck_assert_int_eq(mc_proto_list_rep_decode(t_reply, t_reply_len, max, rep, t_list_keys), 0);
    if (rep->status == 0)
        *cursor_p = rep->next_cursor;
    return rep->status;
}

/* One object "key" of `size` bytes, put and published. */
static void t_put_one(uint32_t node, const char *key)
{
    struct mc_master_put_req it = t_put_item(key, 4096);
    struct mc_master_put_grant g;
    struct mc_master_ref ref;
    int r;

    ck_assert_int_eq(t_put_start(node, 1, &it, &r, &g), 0);
    ck_assert_int_eq(r, 0);
    ref = (struct mc_master_ref){.key = key, .key_len = strlen(key), .version = g.version};
    ck_assert_int_eq(t_put_end(node, 1, &ref, &r), 0);
    ck_assert_int_eq(r, 0);
}

/* --- tests -------------------------------------------------------------------------------- */

START_TEST(test_cluster_token_required)
{
    struct mc_proto_info_rep info;
    const char *k[] = {"k"};
    int r;
    uint32_t node = 0;

    t_start(NULL);
    /* nothing but HELLO is served before HELLO; each refusal is answered, then the
     * endpoint closed (nothing is kept for a peer without the token) */
    ck_assert_int_eq(t_heartbeat(0, 0), MC_ERR_DENIED);
    t_assert_closed();
    t_reconnect();
    ck_assert_int_eq(t_hello("wrong-token", "n1", &node), MC_ERR_DENIED);
    t_assert_closed();
    t_reconnect();
    ck_assert_int_eq(t_hello("", "n1", &node), MC_ERR_DENIED);
    t_reconnect();
    ck_assert_int_eq(t_heartbeat(0, 0), MC_ERR_DENIED);
    t_reconnect();
    ck_assert_int_eq(t_info(&info), MC_ERR_DENIED);
    t_reconnect();
    ck_assert_int_eq(t_exist(0, 0, 1, k, &r, NULL), MC_ERR_DENIED);
    t_reconnect();
    ck_assert_int_eq(t_mount(0, &node), MC_ERR_DENIED);
    {
        struct mc_proto_list_rep lr;
        uint64_t lc = 0;
        uint32_t nc = 0;

        t_reconnect();
        ck_assert_int_eq(t_list(0, "", &lc, 4, &lr), MC_ERR_DENIED);
        t_reconnect();
        ck_assert_int_eq(t_info_nodes(&nc, 4, &info), MC_ERR_DENIED);
    }
    /* the right token opens an endpoint */
    t_reconnect();
    ck_assert_int_eq(t_hello(T_TOKEN, "n1", &node), 0);
    ck_assert_int_eq(t_heartbeat(node, 0), 0);
    /* a wrong one on it closes it */
    ck_assert_int_eq(t_hello(T_TOKEN "x", "n1", &node), MC_ERR_DENIED);
    t_assert_closed();
    t_stop();
}
END_TEST

START_TEST(test_cluster_rpc_roundtrip)
{
    uint32_t node, seg;
    struct mc_master_put_req items[3];
    struct mc_master_put_grant grants[3];
    struct mc_master_ref refs[3];
    struct mc_master_get_result res[3];
    struct mc_master_stat stats[3];
    struct mc_proto_info_rep info;
    uint64_t counts[3];
    int results[3];
    const char *gk[] = {"k/a", "k/none", "k/b"};
    const void *addr;
    size_t alen;
    uint32_t i;

    t_start(NULL);
    ck_assert_int_eq(t_hello(T_TOKEN, "n1", &node), 0);
    ck_assert_int_eq(t_mount(node + 1, &seg), MC_ERR_DENIED); /* not our node */
    ck_assert_int_eq(t_mount(node, &seg), 0);
    ck_assert_int_eq(t_heartbeat(node + 1, 0), MC_ERR_DENIED);

    /* PUT_START: the middle item can never fit (per-item MC_ERR_TOO_LARGE) */
    items[0] = t_put_item("k/a", 4096);
    items[1] = t_put_item("k/big", 1ull << 40);
    items[2] = t_put_item("k/b", 8192);
    ck_assert_int_eq(t_put_start(node, 3, items, results, grants), 0);
    ck_assert_int_eq(results[0], 0);
    ck_assert_int_eq(results[1], MC_ERR_TOO_LARGE);
    ck_assert_int_eq(results[2], 0);
    for (i = 0; i < 3; i += 2) {
        ck_assert_uint_eq(grants[i].nrep, 1);
        ck_assert_uint_eq(grants[i].rep[0].node, node);
        ck_assert_uint_eq(grants[i].rep[0].seg, seg);
        ck_assert_uint_ge(grants[i].rep[0].len, items[i].size);
    }
    /* PUT_END: the middle item names no put */
    refs[0] = (struct mc_master_ref){.key = "k/a", .key_len = 3, .version = grants[0].version};
    refs[1] = (struct mc_master_ref){.key = "k/big", .key_len = 5, .version = 1};
    refs[2] = (struct mc_master_ref){.key = "k/b", .key_len = 3, .version = grants[2].version};
    ck_assert_int_eq(t_put_end(node, 3, refs, results), 0);
    ck_assert_int_eq(results[0], 0);
    ck_assert_int_eq(results[1], MC_ERR_NOT_FOUND);
    ck_assert_int_eq(results[2], 0);

    /* GET: replicas (node, offset) and a lease */
    ck_assert_int_eq(t_get(node, 3, gk, results, res), 0);
    ck_assert_int_eq(results[0], 0);
    ck_assert_int_eq(results[1], MC_ERR_NOT_FOUND);
    ck_assert_int_eq(results[2], 0);
    ck_assert_uint_eq(res[0].size, 4096);
    ck_assert_uint_eq(res[0].nrep, 1);
    ck_assert_uint_eq(res[0].rep[0].node, node);
    ck_assert_uint_eq(res[0].rep[0].offset, grants[0].rep[0].offset);
    ck_assert_uint_eq(res[0].lease.version, grants[0].version);
    ck_assert_uint_gt(res[0].lease.expires_ms, 0);
    ck_assert_uint_eq(res[2].rep[0].offset, grants[2].rep[0].offset);

    /* LEASE_RELEASE of both leases */
    {
        struct mc_proto_ref_req req = {node, 2};
        struct mc_master_ref lr[2] = {
            {.key = "k/a",
             .key_len = 3,
             .version = res[0].version,
             .epoch = res[0].lease.epoch},
            {.key = "k/b",
             .key_len = 3,
             .version = res[2].version,
             .epoch = res[2].lease.epoch},
        };
        struct mc_proto_lease_release_rep rep;
        size_t len;

        ck_assert_int_eq(
            mc_proto_lease_release_req_encode(&req, lr, t_buf, sizeof(t_buf), &len), 0);
        ck_assert_int_eq(t_call(MC_WIRE_LEASE_RELEASE_BATCH, t_buf, len), 0);
        ck_assert_int_eq(mc_proto_lease_release_rep_decode(t_reply, t_reply_len, &rep), 0);
        ck_assert_int_eq(rep.status, 0);
        ck_assert_uint_eq(rep.released, 2);
    }

    /* EXIST with STAT, then as a prefix match */
    ck_assert_int_eq(t_exist(node, MC_PROTO_EXIST_F_STAT, 3, gk, results, stats), 0);
    ck_assert_int_eq(results[0], 1);
    ck_assert_int_eq(results[1], 0);
    ck_assert_int_eq(results[2], 1);
    ck_assert_uint_eq(stats[0].size, 4096);
    ck_assert_uint_eq(stats[2].size, 8192);
    ck_assert_int_eq(t_exist(node, MC_PROTO_EXIST_F_PREFIX, 3, gk, results, NULL), 0);
    ck_assert_int_eq(results[0], 1);
    ck_assert_int_eq(results[1], 0);
    ck_assert_int_eq(results[2], 0); /* after the first absent key */

    /* CLUSTER_INFO: our node's segment with our worker address and rkey */
    ck_assert_int_eq(t_info(&info), 0);
    ck_assert_uint_eq(info.stats.nodes_alive, 1);
    ck_assert_uint_eq(info.stats.segments, 1);
    ck_assert_uint_eq(info.stats.objects, 2);
    ck_assert_uint_eq(info.nseg, 1);
    ck_assert_uint_eq(info.next_cursor, 0);
    ck_assert_uint_eq(t_segs[0].seg, seg);
    ck_assert_uint_eq(t_segs[0].info.node, node);
    ck_assert_uint_eq(t_segs[0].info.size, 64u << 20);
    mc_ucx_address(t_m.u, &addr, &alen);
    ck_assert_uint_eq(t_segs[0].worker_addr.len, alen);
    ck_assert_int_eq(memcmp(t_segs[0].worker_addr.p, addr, alen), 0);
    ck_assert_uint_eq(t_segs[0].rkey.len, 2);

    /* REMOVE one key, then by prefix */
    ck_assert_int_eq(t_remove(node, 0, 2, gk, results, counts), 0);
    ck_assert_int_eq(results[0], 0);
    ck_assert_uint_eq(counts[0], 1);
    ck_assert_int_eq(results[1], MC_ERR_NOT_FOUND);
    ck_assert_int_eq(t_exist(node, 0, 1, gk, results, NULL), 0);
    ck_assert_int_eq(results[0], 0);
    {
        const char *pk[] = {"k/"};

        ck_assert_int_eq(t_remove(node, MC_PROTO_REMOVE_F_PREFIX, 1, pk, results, counts), 0);
        ck_assert_int_eq(results[0], 0);
        ck_assert_uint_eq(counts[0], 1);
    }
    ck_assert_int_eq(t_exist(node, 0, 3, gk, results, NULL), 0);
    ck_assert_int_eq(results[2], 0);

    /* a graceful LEAVE: the endpoint must HELLO again */
    ck_assert_int_eq(t_heartbeat(node, MC_PROTO_HEARTBEAT_F_LEAVE), 0);
    ck_assert_int_eq(t_heartbeat(node, 0), MC_ERR_DENIED);
    t_stop();
}
END_TEST

/* LIST over the RPC: keys by prefix, in pages of two, each key once; only our own node. */
START_TEST(test_cluster_list_by_prefix_pages)
{
    static const char *const keys[] = {"ls/a/1", "ls/a/2", "ls/a/3", "ls/a/4",
                                       "ls/a/5", "ls/b/1", "other"};
    struct mc_proto_list_rep rep;
    uint32_t node, seg, i, k, pages = 0, seen = 0;
    uint64_t cursor = 0;
    uint8_t bad[16] = {0};

    t_start(NULL);
    ck_assert_int_eq(t_hello(T_TOKEN, "n1", &node), 0);
    ck_assert_int_eq(t_mount(node, &seg), 0);
    for (i = 0; i < 7; i++)
        t_put_one(node, keys[i]);
    do {
        ck_assert_int_eq(t_list(node, "ls/a/", &cursor, 2, &rep), 0);
        ck_assert_uint_le(rep.n, 2);
        for (k = 0; k < rep.n; k++) {
            for (i = 0; i < 7; i++) {
                if (t_list_keys[k].key_len == strlen(keys[i]) &&
                    memcmp(t_list_keys[k].key, keys[i], t_list_keys[k].key_len) == 0)
                    break;
            }
            ck_assert_uint_lt(i, 5);                /* a key of the prefix */
            ck_assert_uint_eq(seen & (1u << i), 0); /* listed once */
            seen |= 1u << i;
        }
        ck_assert_uint_lt(++pages, 20);
    } while (cursor != 0);
    ck_assert_uint_eq(seen, 0x1f);
    ck_assert_uint_ge(pages, 3);
    /* an empty prefix: every key */
    ck_assert_int_eq(t_list(node, "", &cursor, 16, &rep), 0);
    ck_assert_uint_eq(rep.n, 7);
    ck_assert_uint_eq(rep.next_cursor, 0);
    /* nothing under another prefix */
    ck_assert_int_eq(t_list(node, "none/", &cursor, 16, &rep), 0);
    ck_assert_uint_eq(rep.n, 0);
    /* another node's listing is refused, a malformed one too */
    ck_assert_int_eq(t_list(node + 1, "ls/", &cursor, 16, &rep), MC_ERR_DENIED);
    bad[0] = (uint8_t)node; /* node, then max 0 */
    ck_assert_int_eq(t_call(MC_WIRE_LIST, bad, sizeof(bad)), 0);
    ck_assert_int_eq(t_reply_status(), MC_ERR_PROTO);
    t_stop();
}
END_TEST

/* CLUSTER_INFO's node page lists a node that mounted nothing (a client node), with its name
 * and domain, and keeps one that left, as not alive. */
START_TEST(test_cluster_info_lists_every_node)
{
    struct mc_proto_info_rep rep;
    const struct mc_proto_node_entry *e;
    uint32_t n1, n2, seg, cursor = 0, first;

    t_start(NULL);
    ck_assert_int_eq(t_hello_in(T_TOKEN, "n1", "rack1", &n1), 0);
    ck_assert_int_eq(t_mount(n1, &seg), 0);
    t_connect_other();
    t_swap_client();
    ck_assert_int_eq(t_hello_in(T_TOKEN, "client-b", "rackB", &n2), 0);
    t_swap_client();

    ck_assert_int_eq(t_info_nodes(&cursor, 16, &rep), 0);
    ck_assert_uint_eq(rep.nnode, 2);
    ck_assert_uint_eq(cursor, 0);
    e = t_node_named(&rep, "n1");
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->id, n1);
    ck_assert_uint_eq(e->alive, 1);
    ck_assert_uint_eq(e->segments, 1);
    ck_assert_uint_eq(e->domain.len, 5);
    ck_assert_mem_eq(e->domain.p, "rack1", 5);
    e = t_node_named(&rep, "client-b");
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->id, n2);
    ck_assert_uint_eq(e->alive, 1);
    ck_assert_uint_eq(e->segments, 0);
    ck_assert_mem_eq(e->domain.p, "rackB", 5);
    ck_assert_uint_lt(e->idle_ms, T_WAIT_MS);

    /* pages of one */
    ck_assert_int_eq(t_info_nodes(&cursor, 1, &rep), 0);
    ck_assert_uint_eq(rep.nnode, 1);
    ck_assert_uint_ne(cursor, 0);
    first = t_nodes[0].id;
    ck_assert_int_eq(t_info_nodes(&cursor, 1, &rep), 0);
    ck_assert_uint_eq(rep.nnode, 1);
    ck_assert_uint_ne(t_nodes[0].id, first);
    if (cursor != 0) { /* the last page may come back empty */
        ck_assert_int_eq(t_info_nodes(&cursor, 1, &rep), 0);
        ck_assert_uint_eq(rep.nnode, 0);
        ck_assert_uint_eq(cursor, 0);
    }

    /* the client node leaves: still listed, not alive */
    t_swap_client();
    ck_assert_int_eq(t_heartbeat(n2, MC_PROTO_HEARTBEAT_F_LEAVE), 0);
    t_swap_client();
    ck_assert_int_eq(t_info_nodes(&cursor, 16, &rep), 0);
    ck_assert_uint_eq(rep.nnode, 2);
    e = t_node_named(&rep, "client-b");
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->alive, 0);
    ck_assert_uint_eq(t_node_named(&rep, "n1")->alive, 1);
    t_stop();
}
END_TEST

START_TEST(test_cluster_bad_payload)
{
    uint32_t node;
    static const uint8_t junk[3] = {1, 2, 3};

    t_start(NULL);
    ck_assert_int_eq(t_hello(T_TOKEN, "n1", &node), 0);
    ck_assert_int_eq(t_call(MC_WIRE_HEARTBEAT, junk, sizeof(junk)), 0);
    ck_assert_int_eq(t_reply_status(), MC_ERR_PROTO);
    ck_assert_int_eq(t_call(MC_WIRE_HELLO, junk, sizeof(junk)), 0);
    ck_assert_int_eq(t_reply_status(), MC_ERR_PROTO);
    /* the endpoint still works */
    ck_assert_int_eq(t_heartbeat(node, 0), 0);
    t_stop();
}
END_TEST

START_TEST(test_cluster_heartbeat_liveness)
{
    static const char *const sets[] = {"node_ttl_ms=500", NULL};
    const char *k[] = {"live/key"};
    struct mc_proto_info_rep info;
    uint32_t node, seg;
    uint64_t end, deadline;
    int r = 1;

    t_start(sets);
    ck_assert_int_eq(t_hello(T_TOKEN, "n1", &node), 0);
    ck_assert_int_eq(t_mount(node, &seg), 0);
    t_put_one(node, k[0]);
    /* heartbeats keep the node alive for three times its TTL */
    end = mc_ucx_now_ms() + 1500;
    while (mc_ucx_now_ms() < end) {
        ck_assert_int_eq(t_heartbeat(node, 0), 0);
        t_sleep_ms(100);
    }
    ck_assert_int_eq(t_exist(node, 0, 1, k, &r, NULL), 0);
    ck_assert_int_eq(r, 1);
    /* silence: the node is declared dead and its objects vanish */
    deadline = mc_ucx_now_ms() + T_WAIT_MS;
    while (r == 1 && mc_ucx_now_ms() < deadline) {
        t_sleep_ms(50);
        ck_assert_int_eq(t_exist(node, 0, 1, k, &r, NULL), 0);
    }
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(t_heartbeat(node, 0), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(t_info(&info), 0);
    ck_assert_uint_eq(info.stats.nodes_alive, 0);
    ck_assert_uint_eq(info.stats.nodes_declared_dead, 1);
    ck_assert_uint_eq(info.nseg, 0);
    /* a new HELLO brings the node back under a new id */
    ck_assert_int_eq(t_hello(T_TOKEN, "n1", &seg), 0);
    ck_assert_uint_ne(seg, node);
    t_stop();
}
END_TEST

START_TEST(test_cluster_sigterm)
{
    uint32_t node;
    int st;

    t_start(NULL);
    ck_assert_int_eq(t_hello(T_TOKEN, "n1", &node), 0);
    ck_assert_int_eq(kill(t_m.pid, SIGTERM), 0);
    st = t_wait_exit(T_WAIT_MS);
    ck_assert_int_ne(st, -1);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    t_stop();
}
END_TEST

/* Regression: UCX destroys an accepted endpoint by itself once its keepalive finds the peer
 * gone; mc-master used to close it again when it stopped (an assertion in UCX, abort). A
 * peer that joined and then vanished must leave mc-master able to stop with status 0. */
START_TEST(test_cluster_sigterm_after_peer_vanished)
{
    const char *sets[] = {"keepalive_ms=200", NULL};
    uint32_t node, node2;
    pid_t child;
    int st;

    t_start(sets);
    ck_assert_int_eq(t_hello(T_TOKEN, "n1", &node), 0);
    /* a second peer, in a process of its own, joins and exits without a word (a new
     * program: UCX's connection manager does not survive a fork of its process) */
    (void)node2;
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        char hex[2 * sizeof(t_m.addr) + 1];

        for (size_t i = 0; i < t_m.addr_len; i++)
            snprintf(hex + 2 * i, 3, "%02x", t_m.addr[i]);
        execl("/proc/self/exe", "test_mcmaster", "--vanishing-peer", hex, (char *)NULL);
        _exit(127);
    }
    ck_assert_int_eq(waitpid(child, &st, 0), child);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* long enough for mc-master's keepalive to notice and UCX to drop the endpoint */
    for (int i = 0; i < 300; i++)
        t_turn(t_m.u, 5);
    ck_assert_int_eq(kill(t_m.pid, SIGTERM), 0);
    st = t_wait_exit(T_WAIT_MS);
    ck_assert_int_ne(st, -1);
    ck_assert_msg(WIFEXITED(st), "mc-master died of signal %d",
                  WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    t_stop();
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("cluster");
    TCase *tc = tcase_create("mcmaster");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_cluster_token_required);
    tcase_add_test(tc, test_cluster_rpc_roundtrip);
    tcase_add_test(tc, test_cluster_list_by_prefix_pages);
    tcase_add_test(tc, test_cluster_info_lists_every_node);
    tcase_add_test(tc, test_cluster_bad_payload);
    tcase_add_test(tc, test_cluster_heartbeat_liveness);
    tcase_add_test(tc, test_cluster_sigterm);
    tcase_add_test(tc, test_cluster_sigterm_after_peer_vanished);
    suite_add_tcase(s, tc);
    return s;
}

/* test_cluster_sigterm_after_peer_vanished's second peer: joins the master at the address
 * given in hex as n2, then exits without a word. */
static int t_vanishing_peer(const char *hex)
{
    uint32_t node2;
    size_t n = strlen(hex) / 2;

    if (n == 0 || n > sizeof(t_m.addr))
        return 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;

        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return 2;
        t_m.addr[i] = (uint8_t)v;
    }
    t_m.addr_len = n;
    /* no ck_assert here: this process runs no test */
    {
        const char *mm_cfg[] = {"MM_ERROR_HANDLING=y", NULL};
        struct mc_ucx_params up = {.name = "t-cluster-2", .config = mm_cfg};
        struct mc_proto_hello_req req = {T_BYTES(T_TOKEN), T_BYTES("n2"), T_BYTES(""), 0, 0};
        struct mc_proto_hello_rep rep;
        size_t len;

        if (mc_ucx_create(&up, &t_m.u) != 0 ||
            mc_ucx_ep_connect(t_m.u, t_m.addr, t_m.addr_len, &t_m.ep) != 0 ||
            mc_proto_hello_req_encode(&req, t_buf, sizeof(t_buf), &len) != 0 ||
            t_call(MC_WIRE_HELLO, t_buf, len) != 0 ||
            mc_proto_hello_rep_decode(t_reply, t_reply_len, &rep) != 0 || rep.status != 0)
            return 1;
        node2 = rep.node;
    }
    return node2 != 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    SRunner *sr;
    int failed;

    if (argc == 3 && strcmp(argv[1], "--vanishing-peer") == 0)
        _exit(t_vanishing_peer(argv[2])); /* without a word: nothing torn down, no exit
                                            handlers (LeakSanitizer's would fail it) */
    sr = srunner_create(t_suite());

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
