/*
 * master-rpc-bench: the master's RPC rate, mc-master driven over UCX active-message RPC by
 * several client processes at once (the issue's goal: batches of 128 from two agents,
 * >= 300 k keys/s).
 *
 * The bench starts mc-master itself (127.0.0.1:0, a ready file, a token through
 * MC_CLUSTER_TOKEN), fetches its worker address over the TCP bootstrap, and forks --clients
 * processes. Each one HELLOs under its own node name, MOUNTs a segment of --seg-size (the
 * master only keeps metadata: no memory behind it), then runs three phases of --seconds
 * each, all clients in the same time windows, with --depth batches of --batch keys in
 * flight:
 *   put   PUT_START batch, then PUT_END batch of the same keys (a key counts once)
 *   get   GET batch + LEASE_RELEASE batch over the keys it wrote
 *   exist EXIST batch over the keys it wrote
 * Keys are "rb/<client>/<i>" padded to --key-bytes (40). Results go to the parent through a
 * pipe; the parent sums the clients' rates per phase. The reference in the same run is the
 * master library in-process on one core (single calls, as master_bench does) over the same
 * number of keys, measured after mc-master has stopped; the ratio RPC/in-process is printed.
 *
 * usage: master-rpc-bench [--master-bin PATH] [--clients N] [--batch B] [--depth D]
 *                         [--seconds S] [--seg-size BYTES] [--obj-size BYTES]
 *                         [--key-bytes K] [--max-keys N] [--etcd URLS]
 * --etcd: mc-master runs with --etcd URLS (an etcd the caller runs): the same bench with
 * the leader's lease renewals and the per-request lease check (docs/master.md, HA).
 * The last line is one JSON object.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "daemon/common/config.h"
#include "daemon/master/master.h"
#include "daemon/master/master_config.h"
#include "daemon/mcmaster/bootstrap.h"
#include "daemon/proto/master_proto.h"
#include "ucx_backend/ucx.h"

#define RB_TOKEN     "master-rpc-bench-token"
#define RB_WAIT_MS   10000u
#define RB_CLIENTS   64
#define RB_DEPTH_MAX 64
#define RB_GAP_S     0.3 /* between phases: every client drains before the next starts */

enum { PH_PUT, PH_GET, PH_EXIST, PH_N };
static const char *const ph_name[PH_N] = {"put", "get", "exist"};

struct opts {
    const char *master_bin;
    unsigned clients, batch, depth;
    double seconds;
    uint64_t seg_size, obj_size, max_keys;
    size_t key_bytes;
};

/* What a client sends back through its pipe. */
struct client_result {
    uint32_t client, ok;
    uint64_t keys[PH_N];   /* keys done with a good per-item result */
    uint64_t errors[PH_N]; /* keys with a per-item error */
    uint64_t rpcs[PH_N];
    double secs[PH_N];
    uint64_t written; /* keys of the put phase: the in-process reference redoes these */
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void make_key(char *out, size_t key_bytes, unsigned client, uint64_t i)
{
    int w = snprintf(out, key_bytes + 1, "rb/%u/%llu/", client, (unsigned long long)i);
    size_t j;

    for (j = (size_t)w; j < key_bytes; j++)
        out[j] = (char)('a' + (i + j) % 26);
    out[key_bytes] = '\0';
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = read(fd, p, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* --- the client -------------------------------------------------------------------------- */

struct slot;

struct client {
    const struct opts *o;
    unsigned id;
    struct mc_ucx *u;
    struct mc_ucx_ep *ep;
    uint32_t node;
    int fatal;
    uint8_t *enc; /* encode buffer (the call copies it) */
    struct slot *slots;
};

struct slot {
    struct client *c;
    int busy;  /* an RPC is in flight */
    int stage; /* 0: the first RPC of the pair is next; 1: the second */
    uint32_t n;
    char *keys; /* n keys of key_bytes + 1 */
    int *results;
    struct mc_master_put_grant *grants;
    struct mc_master_get_result *res;
    uint64_t done_keys, err_keys;
};

/* A single synchronous call (setup only). */
struct sync_call {
    int done, status;
    uint8_t *reply;
    size_t len;
};

static void sync_done(void *ctx, int status, const struct mc_wire_hdr *h, const void *payload,
                      size_t len)
{
    struct sync_call *sc = ctx;

    (void)h;
    sc->status = status;
    if (status == 0) {
        sc->reply = malloc(len ? len : 1);
        if (sc->reply == NULL)
            sc->status = MC_ERR_NOMEM;
        else
            memcpy(sc->reply, payload, len);
        sc->len = len;
    }
    sc->done = 1;
}

static void turn(struct mc_ucx *u, int max_ms)
{
    struct pollfd pfd = {.fd = mc_ucx_efd(u), .events = POLLIN};

    if (mc_ucx_progress(u) || !mc_ucx_arm(u))
        return;
    poll(&pfd, 1, max_ms);
}

static int sync_call(struct client *c, uint16_t type, const void *pl, size_t len,
                     struct sync_call *sc)
{
    int rc;

    memset(sc, 0, sizeof(*sc));
    rc = mc_ucx_rpc_call(c->ep, type, pl, len, mc_ucx_now_ms() + RB_WAIT_MS, sync_done, sc,
                         NULL);
    if (rc != 0)
        return rc;
    while (!sc->done)
        turn(c->u, 5);
    return sc->status;
}

static uint16_t slot_type(int phase, int stage)
{
    switch (phase) {
    case PH_PUT:
        return stage == 0 ? MC_WIRE_PUT_START_BATCH : MC_WIRE_PUT_END_BATCH;
    case PH_GET:
        return stage == 0 ? MC_WIRE_GET_BATCH : MC_WIRE_LEASE_RELEASE_BATCH;
    default:
        return MC_WIRE_EXIST_BATCH;
    }
}

static int g_phase; /* the running phase, for the callbacks */

static void slot_done(void *ctx, int status, const struct mc_wire_hdr *h, const void *payload,
                      size_t len)
{
    struct slot *s = ctx;
    struct client *c = s->c;
    struct mc_proto_batch_rep rep = {0};
    uint32_t i;
    int rc = 0;

    (void)h;
    s->busy = 0;
    if (status != 0) {
        fprintf(stderr, "master-rpc-bench: client %u: %s call: %s\n", c->id, ph_name[g_phase],
                mc_strerror(status));
        c->fatal = status;
        return;
    }
    switch (g_phase) {
    case PH_PUT:
        if (s->stage == 0) {
            rc = mc_proto_put_start_rep_decode(payload, len, s->n, &rep, s->results, s->grants);
        } else {
            rc = mc_proto_results_rep_decode(payload, len, s->n, &rep, s->results);
        }
        break;
    case PH_GET:
        if (s->stage == 0) {
            rc = mc_proto_get_rep_decode(payload, len, s->n, &rep, s->results, s->res);
        } else {
            struct mc_proto_lease_release_rep lr;

            rc = mc_proto_lease_release_rep_decode(payload, len, &lr);
            rep.status = lr.status;
            rep.n = s->n;
        }
        break;
    default:
        rc = mc_proto_exist_rep_decode(payload, len, s->n, &rep, s->results, NULL);
        break;
    }
    if (rc != 0 || rep.status != 0 || rep.n != s->n) {
        fprintf(stderr, "master-rpc-bench: client %u: %s reply: decode %s, status %s\n", c->id,
                ph_name[g_phase], mc_strerror(rc), mc_strerror(rep.status));
        c->fatal = rc != 0 ? rc : rep.status != 0 ? rep.status : MC_ERR_PROTO;
        return;
    }
    /* the pair's second RPC, or the end of the unit of work */
    if (g_phase == PH_EXIST) {
        for (i = 0; i < s->n; i++) {
            if (s->results[i] == 1)
                s->done_keys++;
            else
                s->err_keys++;
        }
        s->stage = 0;
    } else if (s->stage == 0) {
        s->stage = 1;
    } else {
        if (g_phase == PH_PUT) {
            for (i = 0; i < s->n; i++) {
                if (s->results[i] == 0)
                    s->done_keys++;
                else
                    s->err_keys++;
            }
        }
        s->stage = 0;
    }
}

/* Encodes and sends the slot's next RPC. stage 0 takes keys [first, first + n). */
static int slot_issue(struct client *c, struct slot *s, int phase, uint64_t first)
{
    const struct opts *o = c->o;
    size_t stride = o->key_bytes + 1, len = 0;
    struct mc_master_put_req pr[MC_PROTO_BATCH_MAX];
    struct mc_master_ref refs[MC_PROTO_BATCH_MAX];
    struct mc_proto_key keys[MC_PROTO_BATCH_MAX];
    uint32_t i, ok = 0;
    int rc;

    if (s->stage == 0) {
        for (i = 0; i < s->n; i++)
            make_key(s->keys + i * stride, o->key_bytes, c->id, first + i);
    }
    if (phase == PH_PUT && s->stage == 0) {
        struct mc_proto_put_start_req req = {c->node, s->n};

        for (i = 0; i < s->n; i++)
            pr[i] = (struct mc_master_put_req){.key = s->keys + i * stride,
                                               .key_len = o->key_bytes,
                                               .size = o->obj_size,
                                               .replicas = 1,
                                               .preferred = MC_MASTER_NODE_NONE};
        rc = mc_proto_put_start_req_encode(&req, pr, c->enc, MC_PROTO_PAYLOAD_MAX, &len);
    } else if (phase == PH_PUT) {
        struct mc_proto_ref_req req = {c->node, 0};

        /* only the items PUT_START granted; the others count as errors now */
        for (i = 0; i < s->n; i++) {
            if (s->results[i] != 0) {
                s->err_keys++;
                continue;
            }
            refs[ok++] = (struct mc_master_ref){.key = s->keys + i * stride,
                                                .key_len = o->key_bytes,
                                                .version = s->grants[i].version};
        }
        if (ok == 0) {
            s->stage = 0;
            return 0;
        }
        /* compact the keys so that the reply's items line up with s->n */
        req.n = ok;
        rc = mc_proto_put_end_req_encode(&req, refs, c->enc, MC_PROTO_PAYLOAD_MAX, &len);
        s->n = ok;
    } else if (phase == PH_GET && s->stage == 1) {
        struct mc_proto_ref_req req = {c->node, 0};

        for (i = 0; i < s->n; i++) {
            if (s->results[i] != 0) {
                s->err_keys++;
                continue;
            }
            s->done_keys++;
            refs[ok++] = (struct mc_master_ref){.key = s->keys + i * stride,
                                                .key_len = o->key_bytes,
                                                .version = s->res[i].lease.version,
                                                .epoch = s->res[i].lease.epoch};
        }
        if (ok == 0) {
            s->stage = 0;
            return 0;
        }
        req.n = ok;
        rc = mc_proto_lease_release_req_encode(&req, refs, c->enc, MC_PROTO_PAYLOAD_MAX, &len);
        s->n = ok;
    } else {
        struct mc_proto_keys_req req = {c->node, 0, s->n};

        for (i = 0; i < s->n; i++)
            keys[i] = (struct mc_proto_key){s->keys + i * stride, o->key_bytes};
        if (phase == PH_GET)
            rc = mc_proto_get_req_encode(&req, keys, c->enc, MC_PROTO_PAYLOAD_MAX, &len);
        else
            rc = mc_proto_exist_req_encode(&req, keys, c->enc, MC_PROTO_PAYLOAD_MAX, &len);
    }
    if (rc != 0)
        return rc;
    rc = mc_ucx_rpc_call(c->ep, slot_type(phase, s->stage), c->enc, len,
                         mc_ucx_now_ms() + RB_WAIT_MS, slot_done, s, NULL);
    if (rc == 0)
        s->busy = 1;
    return rc;
}

/* A heartbeat, fire and forget: the node must stay alive over the whole run. */
static int hb_pending;

static void hb_done(void *ctx, int status, const struct mc_wire_hdr *h, const void *payload,
                    size_t len)
{
    (void)ctx;
    (void)status;
    (void)h;
    (void)payload;
    (void)len;
    hb_pending = 0;
}

/* One phase between t_start and t_end; returns 0 or an error. */
static int run_phase(struct client *c, int phase, double t_start, double t_end,
                     uint64_t *written, uint64_t hb_every_ms, struct client_result *out)
{
    const struct opts *o = c->o;
    uint64_t next = 0, rpcs = 0, next_hb = mc_ucx_now_ms() + hb_every_ms;
    double t0, t1;
    unsigned d;
    int rc;

    g_phase = phase;
    while (now_s() < t_start)
        turn(c->u, 1);
    for (d = 0; d < o->depth; d++) {
        c->slots[d].stage = 0;
        c->slots[d].done_keys = c->slots[d].err_keys = 0;
    }
    t0 = now_s();
    for (;;) {
        int stop = now_s() >= t_end, active = 0;

        if (c->fatal != 0)
            return c->fatal;
        for (d = 0; d < o->depth; d++) {
            struct slot *s = &c->slots[d];

            if (s->busy) {
                active = 1;
                continue;
            }
            if (s->stage == 0) {
                uint64_t limit = phase == PH_PUT ? o->max_keys : *written;

                if (stop || limit == 0)
                    continue;
                if (phase == PH_PUT) {
                    if (next >= limit)
                        continue;
                    s->n = (uint32_t)(limit - next < o->batch ? limit - next : o->batch);
                    rc = slot_issue(c, s, phase, next);
                    next += s->n;
                } else {
                    /* cycle over the keys written, in batches */
                    uint64_t first = next % limit;

                    s->n = (uint32_t)(limit - first < o->batch ? limit - first : o->batch);
                    rc = slot_issue(c, s, phase, first);
                    next = first + s->n;
                }
            } else {
                rc = slot_issue(c, s, phase, 0);
            }
            if (rc != 0)
                return rc;
            rpcs++;
            if (s->busy)
                active = 1;
        }
        if (!active && stop)
            break;
        if (!active && !stop && phase == PH_PUT && next >= o->max_keys)
            break;
        if (!hb_pending && mc_ucx_now_ms() >= next_hb) {
            struct mc_proto_heartbeat_req hr = {c->node, 0};
            size_t len;

            if (mc_proto_heartbeat_req_encode(&hr, c->enc, MC_PROTO_PAYLOAD_MAX, &len) == 0 &&
                mc_ucx_rpc_call(c->ep, MC_WIRE_HEARTBEAT, c->enc, len,
                                mc_ucx_now_ms() + RB_WAIT_MS, hb_done, NULL, NULL) == 0)
                hb_pending = 1;
            next_hb = mc_ucx_now_ms() + hb_every_ms;
        }
        turn(c->u, 1);
    }
    t1 = now_s();
    out->secs[phase] = t1 - t0;
    out->rpcs[phase] = rpcs;
    for (d = 0; d < o->depth; d++) {
        out->keys[phase] += c->slots[d].done_keys;
        out->errors[phase] += c->slots[d].err_keys;
    }
    if (phase == PH_PUT)
        *written = next;
    return 0;
}

static int client_main(const struct opts *o, unsigned id, const uint8_t *maddr, size_t malen,
                       int ctl_fd, int res_fd)
{
    const char *cfgs[] = {"MM_ERROR_HANDLING=y", NULL};
    char name[32];
    struct mc_ucx_params up = {.name = name, .config = cfgs};
    struct client c = {.o = o, .id = id};
    struct client_result out = {.client = id};
    struct sync_call sc;
    struct mc_proto_hello_rep hrep;
    struct mc_proto_mount_rep mrep;
    uint64_t written = 0, hb_every_ms;
    double t_base;
    size_t len;
    unsigned d;
    int rc, p;

    snprintf(name, sizeof(name), "rb-client-%u", id);
    c.enc = malloc(MC_PROTO_PAYLOAD_MAX);
    c.slots = calloc(o->depth, sizeof(*c.slots));
    if (c.enc == NULL || c.slots == NULL)
        goto fail;
    for (d = 0; d < o->depth; d++) {
        struct slot *s = &c.slots[d];

        s->c = &c;
        s->keys = malloc(o->batch * (o->key_bytes + 1));
        s->results = calloc(o->batch, sizeof(*s->results));
        s->grants = calloc(o->batch, sizeof(*s->grants));
        s->res = calloc(o->batch, sizeof(*s->res));
        if (s->keys == NULL || s->results == NULL || s->grants == NULL || s->res == NULL)
            goto fail;
    }
    rc = mc_ucx_create(&up, &c.u);
    if (rc == 0)
        rc = mc_ucx_ep_connect(c.u, maddr, malen, &c.ep);
    if (rc != 0) {
        fprintf(stderr, "master-rpc-bench: client %u: ucx: %s\n", id, mc_strerror(rc));
        goto fail;
    }

    /* HELLO */
    {
        struct mc_proto_hello_req req = {
            {(const uint8_t *)RB_TOKEN, strlen(RB_TOKEN)},
            {(const uint8_t *)name, strlen(name)},
            {(const uint8_t *)"", 0}, 0, 0};

        rc = mc_proto_hello_req_encode(&req, c.enc, MC_PROTO_PAYLOAD_MAX, &len);
        if (rc == 0)
            rc = sync_call(&c, MC_WIRE_HELLO, c.enc, len, &sc);
        if (rc == 0) {
            rc = mc_proto_hello_rep_decode(sc.reply, sc.len, &hrep);
            if (rc == 0)
                rc = hrep.status;
        }
        free(sc.reply);
        if (rc != 0) {
            fprintf(stderr, "master-rpc-bench: client %u: HELLO: %s\n", id, mc_strerror(rc));
            goto fail;
        }
        c.node = hrep.node;
        hb_every_ms = hrep.node_ttl_ms / 4 > 0 ? hrep.node_ttl_ms / 4 : 1;
    }
    /* MOUNT: metadata only, nothing behind the range */
    {
        const void *addr;
        size_t alen;
        struct mc_proto_mount_req req = {
            .seg = {.node = c.node,
                    .kind = MC_SEG_DRAM,
                    .base = 0x100000000ull * (id + 1),
                    .size = o->seg_size}};

        mc_ucx_address(c.u, &addr, &alen);
        req.worker_addr = (struct mc_proto_bytes){addr, alen};
        req.rkey = (struct mc_proto_bytes){(const uint8_t *)"rk", 2};
        rc = mc_proto_mount_req_encode(&req, c.enc, MC_PROTO_PAYLOAD_MAX, &len);
        if (rc == 0)
            rc = sync_call(&c, MC_WIRE_MOUNT, c.enc, len, &sc);
        if (rc == 0) {
            rc = mc_proto_mount_rep_decode(sc.reply, sc.len, &mrep);
            if (rc == 0)
                rc = mrep.status;
        }
        free(sc.reply);
        if (rc != 0) {
            fprintf(stderr, "master-rpc-bench: client %u: MOUNT: %s\n", id, mc_strerror(rc));
            goto fail;
        }
    }
    /* ready; the parent answers with the common start time */
    if (write_all(res_fd, "R", 1) != 0 || read_all(ctl_fd, &t_base, sizeof(t_base)) != 0)
        goto fail;
    for (p = 0; p < PH_N; p++) {
        double ts = t_base + p * (o->seconds + RB_GAP_S);

        rc = run_phase(&c, p, ts, ts + o->seconds, &written, hb_every_ms, &out);
        if (rc != 0) {
            fprintf(stderr, "master-rpc-bench: client %u: phase %s: %s\n", id, ph_name[p],
                    mc_strerror(rc));
            goto fail;
        }
    }
    out.written = written;
    out.ok = 1;
    mc_ucx_ep_close(c.ep, false);
    for (d = 0; d < 20; d++)
        turn(c.u, 1);
    mc_ucx_destroy(c.u);
    return write_all(res_fd, &out, sizeof(out)) == 0 ? 0 : 1;
fail:
    out.ok = 0;
    (void)write_all(res_fd, "R", 1);
    (void)write_all(res_fd, &out, sizeof(out));
    if (c.ep != NULL)
        mc_ucx_ep_close(c.ep, true);
    mc_ucx_destroy(c.u);
    return 1;
}

/* --- mc-master --------------------------------------------------------------------------- */

static pid_t master_pid = -1;
static char master_dir[64];

/* --etcd URLS: mc-master stands for leader there (HA's steady-state cost) */
static const char *rb_etcd;

static int master_start(const char *bin, uint8_t *addr, size_t *alen_p)
{
    char ready[128], cluster[32];
    uint8_t boot[MC_MCMASTER_BOOT_HDR + MC_MCMASTER_BOOT_ADDR_MAX];
    size_t got = 0;
    uint32_t magic, alen;
    struct sockaddr_in sa = {0};
    unsigned port = 0;
    int fd, pid_in_file = 0, st;
    double deadline;
    FILE *f;

    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "master-rpc-bench: %s: not an executable (--master-bin)\n", bin);
        return -1;
    }
    strcpy(master_dir, "/tmp/mc-rpc-bench-XXXXXX");
    if (mkdtemp(master_dir) == NULL)
        return -1;
    snprintf(ready, sizeof(ready), "%s/ready", master_dir);
    /* a cluster of this run's own: a master of an earlier run that did not leave cleanly
     * holds its cluster's leader key until its lease lapses */
    snprintf(cluster, sizeof(cluster), "rpcbench-%ld", (long)getpid());
    master_pid = fork();
    if (master_pid < 0)
        return -1;
    if (master_pid == 0) {
        const char *argv[] = {bin, "--listen", "127.0.0.1:0", "--ready-file", ready,
                              "--etcd", rb_etcd, "--cluster-id", cluster, "--set",
                              "recovery_ms=0", NULL};

        if (rb_etcd == NULL)
            argv[5] = NULL;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        setenv("MC_CLUSTER_TOKEN", RB_TOKEN, 1);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    deadline = now_s() + RB_WAIT_MS / 1000.0;
    while ((f = fopen(ready, "r")) == NULL) {
        if (waitpid(master_pid, &st, WNOHANG) == master_pid) {
            fprintf(stderr, "master-rpc-bench: mc-master exited at start-up\n");
            master_pid = -1;
            return -1;
        }
        if (now_s() > deadline) {
            fprintf(stderr, "master-rpc-bench: no ready file from mc-master\n");
            return -1;
        }
        poll(NULL, 0, 10);
    }
    if (fscanf(f, "%d %u", &pid_in_file, &port) != 2 || port == 0 || port > 65535) {
        fclose(f);
        fprintf(stderr, "master-rpc-bench: bad ready file\n");
        return -1;
    }
    fclose(f);
    if (rb_etcd != NULL)
        poll(NULL, 0, 1000); /* the election: a lone candidate wins in a few ms */

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    for (;;) {
        ssize_t n = read(fd, boot + got, sizeof(boot) - got);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (got < MC_MCMASTER_BOOT_HDR)
        return -1;
    magic = (uint32_t)boot[0] | (uint32_t)boot[1] << 8 | (uint32_t)boot[2] << 16 |
            (uint32_t)boot[3] << 24;
    alen = (uint32_t)boot[4] | (uint32_t)boot[5] << 8 | (uint32_t)boot[6] << 16 |
           (uint32_t)boot[7] << 24;
    if (magic != MC_MCMASTER_BOOT_MAGIC || got != MC_MCMASTER_BOOT_HDR + alen) {
        fprintf(stderr, "master-rpc-bench: bad bootstrap message\n");
        return -1;
    }
    memcpy(addr, boot + MC_MCMASTER_BOOT_HDR, alen);
    *alen_p = alen;
    return 0;
}

/* SIGTERM, then SIGKILL after 10 s. Returns the wait status, or -1. */
static int master_stop(void)
{
    char path[128];
    int st = -1;

    if (master_pid > 0) {
        double deadline = now_s() + 10.0;

        kill(master_pid, SIGTERM);
        for (;;) {
            pid_t r = waitpid(master_pid, &st, WNOHANG);

            if (r == master_pid)
                break;
            if (now_s() > deadline) {
                kill(master_pid, SIGKILL);
                waitpid(master_pid, &st, 0);
                st = -1;
                break;
            }
            poll(NULL, 0, 5);
        }
        master_pid = -1;
    }
    snprintf(path, sizeof(path), "%s/ready", master_dir);
    unlink(path);
    rmdir(master_dir);
    return st;
}

/* --- the in-process reference ------------------------------------------------------------ */

/* put, get (+ lease release) and exist over the keys each client wrote, one core. */
static int inproc_ref(const struct opts *o, const uint64_t *written, unsigned nclients,
                      double rate[PH_N])
{
    struct mc_master_config cfg;
    struct mc_master *m = NULL;
    struct mc_master_seg_desc d;
    size_t stride = o->key_bytes + 1;
    uint64_t total = 0, i, k, need;
    char *keys;
    uint32_t node, seg;
    unsigned cl;
    double t;
    int err;

    for (cl = 0; cl < nclients; cl++)
        total += written[cl];
    if (total == 0)
        return MC_ERR_INVALID;
    keys = malloc(total * stride);
    if (keys == NULL)
        return MC_ERR_NOMEM;
    for (cl = 0, k = 0; cl < nclients; cl++)
        for (i = 0; i < written[cl]; i++, k++)
            make_key(keys + k * stride, o->key_bytes, cl, i);
    err = mc_config_set_defaults(mc_master_config_table, &cfg);
    if (err == 0)
        err = mc_master_create(&cfg, NULL, NULL, &m);
    if (err == 0)
        err = mc_master_node_register(m, "rb-inproc", "d1", &node);
    if (err != 0)
        goto out;
    need = (total + total / 8 + 1024) * ((o->obj_size + 63) & ~63ull);
    d = (struct mc_master_seg_desc){.node = node,
                                    .kind = MC_SEG_DRAM,
                                    .base = 0,
                                    .size = need > o->seg_size ? need : o->seg_size};
    err = mc_master_segment_mount(m, &d, &seg);
    if (err != 0)
        goto out;

    t = now_s();
    for (i = 0; i < total; i++) {
        struct mc_master_put_req r = {.key = keys + i * stride,
                                      .key_len = o->key_bytes,
                                      .size = o->obj_size,
                                      .replicas = 1,
                                      .writer = node,
                                      .preferred = MC_MASTER_NODE_NONE};
        struct mc_master_put_grant g;
        struct mc_master_ref ref = {.key = r.key, .key_len = o->key_bytes, .node = node};

        err = mc_master_put_start(m, &r, &g);
        if (err != 0)
            goto out;
        ref.version = g.version;
        err = mc_master_put_end(m, &ref);
        if (err != 0)
            goto out;
    }
    rate[PH_PUT] = (double)total / (now_s() - t);

    t = now_s();
    for (i = 0; i < total; i++) {
        const char *key = keys + i * stride;
        struct mc_master_get_result g;
        struct mc_master_ref ref = {.key = key, .key_len = o->key_bytes};

        err = mc_master_get_replicas(m, key, o->key_bytes, &g);
        if (err != 0)
            goto out;
        ref.version = g.lease.version;
        ref.epoch = g.lease.epoch;
        if (mc_master_lease_release(m, 1, &ref) != 1) {
            err = MC_ERR_INTERNAL;
            goto out;
        }
    }
    rate[PH_GET] = (double)total / (now_s() - t);

    t = now_s();
    for (i = 0; i < total; i++) {
        if (mc_master_exist(m, keys + i * stride, o->key_bytes) != 1) {
            err = MC_ERR_INTERNAL;
            goto out;
        }
    }
    rate[PH_EXIST] = (double)total / (now_s() - t);
out:
    if (m != NULL)
        mc_master_destroy(m);
    free(keys);
    return err;
}

/* --- main ------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: master-rpc-bench [options]\n"
            "  --master-bin PATH  mc-master (default build/daemon/mcmaster/mc-master)\n"
            "  --clients N        client processes, 1..%d (default 2)\n"
            "  --batch B          keys per batch RPC, 1..%u (default 128)\n"
            "  --depth D          batches in flight per client, 1..%d (default 4)\n"
            "  --seconds S        seconds per phase (default 3)\n"
            "  --seg-size BYTES   segment each client mounts (default 4294967296)\n"
            "  --obj-size BYTES   object size the master places (default 1024)\n"
            "  --key-bytes K      key length, 24..512 (default 40)\n"
            "  --max-keys N       keys a client writes at most (default 4000000)\n",
            RB_CLIENTS, MC_PROTO_BATCH_MAX, RB_DEPTH_MAX);
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *v_p)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *v_p = v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option lopts[] = {
        {"master-bin", required_argument, NULL, 'm'},
        {"clients", required_argument, NULL, 'c'},
        {"batch", required_argument, NULL, 'b'},
        {"depth", required_argument, NULL, 'd'},
        {"seconds", required_argument, NULL, 't'},
        {"seg-size", required_argument, NULL, 'g'},
        {"obj-size", required_argument, NULL, 'o'},
        {"key-bytes", required_argument, NULL, 'k'},
        {"etcd", required_argument, NULL, 'e'},
        {"max-keys", required_argument, NULL, 'x'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct opts o = {.master_bin = "build/daemon/mcmaster/mc-master",
                     .clients = 2,
                     .batch = 128,
                     .depth = 4,
                     .seconds = 3.0,
                     .seg_size = 4ull << 30,
                     .obj_size = 1024,
                     .max_keys = 4000000,
                     .key_bytes = 40};
    struct client_result res[RB_CLIENTS];
    pid_t pids[RB_CLIENTS];
    int ctl[RB_CLIENTS], rfd[RB_CLIENTS];
    uint8_t maddr[MC_MCMASTER_BOOT_ADDR_MAX];
    uint64_t written[RB_CLIENTS], total_written = 0, v;
    double rpc_rate[PH_N] = {0}, ref_rate[PH_N] = {0}, t_base;
    size_t malen = 0;
    unsigned i, p;
    int c, failed = 0, st, rc;

    while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            o.master_bin = optarg;
            break;
        case 'e':
            rb_etcd = optarg;
            break;
        case 'c':
            if (parse_u64(optarg, 1, RB_CLIENTS, &v) != 0)
                goto bad;
            o.clients = (unsigned)v;
            break;
        case 'b':
            if (parse_u64(optarg, 1, MC_PROTO_BATCH_MAX, &v) != 0)
                goto bad;
            o.batch = (unsigned)v;
            break;
        case 'd':
            if (parse_u64(optarg, 1, RB_DEPTH_MAX, &v) != 0)
                goto bad;
            o.depth = (unsigned)v;
            break;
        case 't': {
            char *end;

            o.seconds = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(o.seconds > 0.0 && o.seconds <= 3600.0))
                goto bad;
            break;
        }
        case 'g':
            if (parse_u64(optarg, 1u << 20, 1ull << 50, &o.seg_size) != 0)
                goto bad;
            break;
        case 'o':
            if (parse_u64(optarg, 1, 1ull << 30, &o.obj_size) != 0)
                goto bad;
            break;
        case 'k':
            if (parse_u64(optarg, 24, MC_PROTO_KEY_MAX, &v) != 0)
                goto bad;
            o.key_bytes = (size_t)v;
            break;
        case 'x':
            if (parse_u64(optarg, 1, 1000000000ull, &o.max_keys) != 0)
                goto bad;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            goto bad;
        }
    }
    if (optind != argc)
        goto bad;

    signal(SIGPIPE, SIG_IGN);
    if (master_start(o.master_bin, maddr, &malen) != 0) {
        master_stop();
        return 1;
    }
    printf("master-rpc-bench: mc-master pid %d; %u clients, batch %u, depth %u, %.1f s per "
           "phase, keys of %zu bytes, objects of %llu bytes, segments of %llu bytes\n",
           (int)master_pid, o.clients, o.batch, o.depth, o.seconds, o.key_bytes,
           (unsigned long long)o.obj_size, (unsigned long long)o.seg_size);
    fflush(stdout);

    for (i = 0; i < o.clients; i++) {
        int cp[2], rp[2];

        if (pipe(cp) != 0 || pipe(rp) != 0) {
            perror("pipe");
            failed = 1;
            break;
        }
        pids[i] = fork();
        if (pids[i] < 0) {
            perror("fork");
            failed = 1;
            break;
        }
        if (pids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            close(cp[1]);
            close(rp[0]);
            _exit(client_main(&o, i, maddr, malen, cp[0], rp[1]));
        }
        close(cp[0]);
        close(rp[1]);
        ctl[i] = cp[1];
        rfd[i] = rp[0];
    }
    if (failed) {
        o.clients = i;
        for (i = 0; i < o.clients; i++)
            kill(pids[i], SIGKILL);
        goto reap;
    }
    /* every client ready (or failed), then one start time for all */
    for (i = 0; i < o.clients; i++) {
        char r;

        if (read_all(rfd[i], &r, 1) != 0)
            failed = 1;
    }
    t_base = now_s() + 0.2;
    for (i = 0; i < o.clients; i++)
        if (write_all(ctl[i], &t_base, sizeof(t_base)) != 0)
            failed = 1;
    for (i = 0; i < o.clients; i++) {
        memset(&res[i], 0, sizeof(res[i]));
        if (read_all(rfd[i], &res[i], sizeof(res[i])) != 0 || !res[i].ok)
            failed = 1;
    }
reap:
    for (i = 0; i < o.clients; i++) {
        if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed = 1;
        close(ctl[i]);
        close(rfd[i]);
    }
    st = master_stop();
    if (failed) {
        fprintf(stderr, "master-rpc-bench: a client failed\n");
        return 1;
    }
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fprintf(stderr, "master-rpc-bench: warning: mc-master did not exit cleanly on "
                        "SIGTERM\n");

    printf("%8s %6s %12s %12s %10s %8s %14s\n", "client", "phase", "keys", "errors", "rpcs",
           "secs", "keys/s");
    for (i = 0; i < o.clients; i++) {
        for (p = 0; p < PH_N; p++) {
            double r = res[i].secs[p] > 0 ? (double)res[i].keys[p] / res[i].secs[p] : 0;

            printf("%8u %6s %12llu %12llu %10llu %8.2f %14.0f\n", i, ph_name[p],
                   (unsigned long long)res[i].keys[p], (unsigned long long)res[i].errors[p],
                   (unsigned long long)res[i].rpcs[p], res[i].secs[p], r);
            rpc_rate[p] += r;
        }
        written[i] = res[i].written;
        total_written += written[i];
    }
    rc = inproc_ref(&o, written, o.clients, ref_rate);
    if (rc != 0) {
        fprintf(stderr, "master-rpc-bench: in-process reference: %s\n", mc_strerror(rc));
        return 1;
    }
    printf("\n%6s %16s %16s %10s %10s\n", "phase", "RPC keys/s", "in-proc keys/s",
           "RPC/inproc", "vs goal");
    for (p = 0; p < PH_N; p++)
        printf("%6s %16.0f %16.0f %10.3f %10.2f\n", ph_name[p], rpc_rate[p], ref_rate[p],
               rpc_rate[p] / ref_rate[p], rpc_rate[p] / 300000.0);
    printf("(RPC: sum over %u clients; in-process: one core, single calls, same %llu keys; "
           "this machine has %ld CPUs)\n",
           o.clients, (unsigned long long)total_written,
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("{\"clients\":%u,\"batch\":%u,\"depth\":%u,\"put_keys_per_s\":%.0f,"
           "\"get_keys_per_s\":%.0f,\"exist_keys_per_s\":%.0f,"
           "\"inproc_put_keys_per_s\":%.0f,\"inproc_get_keys_per_s\":%.0f,"
           "\"inproc_exist_keys_per_s\":%.0f,\"goal_keys_per_s\":300000}\n",
           o.clients, o.batch, o.depth, rpc_rate[PH_PUT], rpc_rate[PH_GET], rpc_rate[PH_EXIST],
           ref_rate[PH_PUT], ref_rate[PH_GET], ref_rate[PH_EXIST]);
    return 0;
bad:
    usage(stderr);
    return 2;
}
