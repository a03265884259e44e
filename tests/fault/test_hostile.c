/*
 * A hostile client against the real mc-agent (docs/protocol.md, "the shared region is hostile
 * input"), from outside every safety libmc would give: a process speaks the socket
 * handshake itself (struct mc_shm_hello / welcome, SCM_RIGHTS), maps its region read-write
 * as the protocol allows, registers arenas as libmc does, and for many rounds (a new seed
 * each) scribbles random bytes over the header, both rings' control words and entries, the
 * key slots, staging and its arenas, punches holes in them, submits random and nearly valid
 * SQEs (random opcodes, offsets, lengths, arena and user-memory sources), floods the SQ,
 * writes bogus heads and tails and rings the doorbell; between rounds it sends hellos and
 * arena registrations the agent must refuse. It also checks that the segment fds it was
 * given cannot be made writable (not even reopened through /proc).
 *
 * Meanwhile a well-behaved libmc client in another process puts (staging, pieces, arena)
 * and gets with verification, and must see no error at all. Every hostile connection ends
 * with the agent cutting it off (its socket reads EOF; `clients_disconnected` counts each
 * once); the agent lives on, and afterwards holds exactly the fds and memfd mappings it held
 * before the measured rounds, its VmRSS within T_HC_RSS_SLACK_KB of the baseline, and it
 * exits 0 on SIGTERM (under ASan: LeakSanitizer found nothing).
 *
 * MC_HOSTILE_SEED=N replays a run (the seed is printed at the start and in every failure
 * message); the rounds run for T_HC_RUN_MS whatever the machine's speed.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <mc/mc.h>
#include <mc/mc_status.h>

#include "libmc/tool.h"
#include "shm/node.h"
#include "shm/ring.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* a shared helper header */
#include "tests/cluster/t_cluster.h"
#pragma GCC diagnostic pop

/* --- common ------------------------------------------------------------------------------- */

#include "tests/lib/t_rng.h"

/* --- /proc views of a daemon ---------------------------------------------------------------
 */

static long t_proc_fds(pid_t pid)
{
    char path[64];
    struct dirent *e;
    long n = 0;
    DIR *d;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    d = opendir(path);
    ck_assert_msg(d != NULL, "%s: %s", path, strerror(errno));
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Mappings of memfds (client regions, arenas, the agent's own segments). */
static long t_proc_memfd_maps(pid_t pid)
{
    char path[64], line[512];
    long n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, "/memfd:") != NULL;
    fclose(f);
    return n;
}

static long t_proc_rss_kb(pid_t pid)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}

static bool t_alive(pid_t pid)
{
    return pid > 0 && kill(pid, 0) == 0;
}

#define T_HC_RUN_MS    9000u  /* hostile rounds, after the warm-up */
#define T_HC_WARMUP    3      /* rounds before the baseline: one-time allocations settle */
#define T_HC_STEPS     80     /* actions per round at most */
#define T_HC_SIZE_MAX  65536u /* sizes a hostile SQE may ask space for (below 1 GiB) */
#define T_HC_ARENAS    3
#define T_HC_USER_LEN  (256u << 10)
#define T_HC_CUT_MS    5000u /* the agent cuts a client off within this (a loaded host) */
#define T_HC_SETTLE_MS 5000u /* ... and has released what it held within this */
/* VmRSS may end this much above the baseline: glibc keeps freed heap (the per-client tables
 * of a few hundred clients churn through it) and the agent's stack and io_uring pages come
 * and go. A leaked client would leave its region (the whole staging area, 8 MiB, counted in
 * the agent's RSS once touched by its copies) or thousands of table pages; the memfd
 * mapping count below catches a leaked region or arena exactly, whatever its RSS. */
#define T_HC_RSS_SLACK_KB 4096
#if defined(__SANITIZE_ADDRESS__)
/* Under ASan freed memory waits in a quarantine (256 MiB by default) before it is reused, so
 * the agent's RSS grows with every client served and says nothing of leaks; LeakSanitizer,
 * when the agent exits on SIGTERM, does (a leak fails that exit). */
#define T_HC_RSS_CHECKED false
#else
#define T_HC_RSS_CHECKED true
#endif
#define T_HC_KEY0       'G' /* the good client's keys start with it; hostile keys never do */
#define T_HC_BAD_HELLOS 9
#define T_AF_CONNS      32   /* connections flooding the agent with huge sparse arenas */
#define T_RF_CONNECTS   5000 /* connections of a refused uid */

/* What the well-behaved client saw. */
struct t_good_report {
    uint64_t ops;
    uint64_t errors;
    int first_err;
    char first_what[120];
};

static void t_good_error(struct t_good_report *r, int err, const char *what, const char *key)
{
    if (r->errors++ == 0) {
        r->first_err = err;
        snprintf(r->first_what, sizeof(r->first_what), "%s %s: %s", what, key,
                 mc_strerror(err));
    }
}

/* The child's body: puts (staging, pieces, arena) and verified gets until stop_fd closes.
 * Never returns; never uses Check (a child must not report for the test). */
static void t_good_run(const char *sock, int stop_fd, int out_fd)
{
    static const size_t sizes[] = {100, 4096, 65536 + 13, (3u << 19) + 7 /* > one slot */};
    const size_t cap = 2u << 20;
    struct t_good_report rep = {0};
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    uint8_t *buf = malloc(cap), *out = malloc(cap);
    void *arena = NULL;
    mc_client_t *c = NULL;
    int err;

    o.flags = MC_PUT_UPSERT | MC_PUT_PIN_HARD; /* never evicted by the hostile's objects */
    err = buf == NULL || out == NULL ? MC_ERR_NOMEM : mc_connect(sock, &c);
    if (err == 0)
        err = mc_buf_alloc(c, cap, &arena);
    if (err != 0)
        t_good_error(&rep, err, "connect", "");
    for (uint64_t i = 0; err == 0; i++) {
        struct pollfd p = {.fd = stop_fd, .events = POLLIN};
        size_t len = sizes[i % 4], got = 0;
        uint8_t *src = i % 3 == 2 ? arena : buf;
        char key[32];
        int e;

        if (poll(&p, 1, 0) != 0)
            break;
        snprintf(key, sizeof(key), "%cgood/%u", T_HC_KEY0, (unsigned)(i % 8));
        t_fill(src, len, i + 1);
        rep.ops++;
        e = mc_put(c, key, src, len, &o);
        if (e != 0) {
            t_good_error(&rep, e, "put", key);
            continue;
        }
        rep.ops++;
        e = mc_get(c, key, out, cap, &got);
        if (e != 0)
            t_good_error(&rep, e, "get", key);
        else if (got != len || memcmp(out, src, len) != 0)
            t_good_error(&rep, MC_ERR_CORRUPT, "get (content)", key);
        if (i % 16 == 0) {
            rep.ops++;
            e = mc_exist(c, key);
            if (e != 1)
                t_good_error(&rep, e < 0 ? e : MC_ERR_NOT_FOUND, "exist", key);
        }
    }
    if (arena != NULL)
        mc_buf_free(c, arena);
    mc_close(c);
    if (write(out_fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
        _exit(3);
    _exit(0);
}

/* What the hostile clients did, for the summary line (so a run shows it went deep). */
static struct {
    uint64_t sqes, cqes, cqes_ok, cut_by_steps, fallbacks;
} t_hc_count;

/* The hostile client: its socket, its region (mapped writable, as the protocol allows) and
 * its arenas, plus some of its own memory for MC_SQE_F_USER. */
struct t_hc {
    int sock, region_fd, efd;
    uint8_t *base;
    uint8_t *node; /* the node page (shm/node.h), shared with every client: writable */
    uint64_t region_size;
    struct mc_shm_hdr hdr; /* copied before the first scribble */
    struct mc_shm_ring_ctrl *sq, *cq;
    uint32_t sq_tail; /* what we published last */
    uint32_t narenas;
    struct {
        int fd;
        uint8_t *p;
        uint64_t size;
    } arena[T_HC_ARENAS];
    uint8_t *user;
    struct t_rng rng;
    uint64_t seed;
};

static void t_doorbell(struct mc_shm_ring_ctrl *c)
{
    atomic_fetch_add(&c->futex, 1);
    syscall(SYS_futex, &c->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* A message with `nfds` fds attached (SCM_RIGHTS); returns what sendmsg returned. */
static ssize_t t_send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * 8)];
    } ctl;
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;

    memset(&ctl, 0, sizeof(ctl));
    if (nfds > 0) {
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    }
    return sendmsg(sock, &msg, MSG_NOSIGNAL);
}

static int t_unix_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

    ck_assert_int_ge(s, 0);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    ck_assert_int_eq(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return s;
}

/* true once the agent closed the socket (it cut us off), within ms */
static bool t_cut_off(int sock, unsigned ms)
{
    uint64_t deadline = t_now_ms() + ms;
    char b[64];

    for (;;) {
        ssize_t n = recv(sock, b, sizeof(b), MSG_DONTWAIT);

        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return true;
        if (t_now_ms() >= deadline)
            return false;
        if (ms > 0)
            t_poll_pause();
    }
}

static int t_memfd_sealed(const char *name, uint64_t size, bool seal)
{
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
    if (seal)
        ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    return fd;
}

/* The segments are the node's pool: readable, never writable, not even by reopening the
 * read-only fd read-write through /proc (the agent seals them F_SEAL_FUTURE_WRITE). */
static void t_hc_check_segment_fd(int fd, uint64_t size, uint64_t seed)
{
    char path[64];
    void *p;
    int rw;

    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_msg(p == MAP_FAILED, "seed %" PRIu64 ": a segment mapped writable", seed);
    p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    ck_assert_msg(p != MAP_FAILED, "seed %" PRIu64 ": a segment not readable", seed);
    ck_assert_msg(mprotect(p, size, PROT_READ | PROT_WRITE) != 0,
                  "seed %" PRIu64 ": a segment mapping made writable", seed);
    munmap(p, size);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    rw = open(path, O_RDWR | O_CLOEXEC);
    if (rw >= 0) {
        char z = 0x5a;

        ck_assert_msg(pwrite(rw, &z, 1, 0) != 1, "seed %" PRIu64 ": wrote into a segment",
                      seed);
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
        ck_assert_msg(p == MAP_FAILED,
                      "seed %" PRIu64 ": a segment reopened read-write and mapped writable",
                      seed);
        close(rw);
    }
}

/*
 * The handshake by hand (optionally with an eventfd), the welcome's fds taken (segments
 * checked, then closed), the region mapped read-write and its header copied, and 0..3
 * arenas registered the way libmc does (sealed memfds, one message each, no answer).
 */
static void t_hc_connect(struct t_hc *h, const char *path, uint64_t seed, bool check_segs)
{
    struct mc_shm_hello hello = {.magic = MC_SHM_MAGIC, .abi = MC_SHM_ABI};
    struct mc_shm_welcome w;
    union {
        struct cmsghdr hdr;
        char buf[CMSG_SPACE(sizeof(int) * (MC_SHM_MAX_SEGS + 1))];
    } ctl;
    struct iovec iov = {.iov_base = &w, .iov_len = sizeof(w)};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *cm;
    int fds[MC_SHM_MAX_SEGS + 1], nfds, i;
    ssize_t n;

    memset(h, 0, sizeof(*h));
    h->seed = seed;
    t_rng_seed(&h->rng, seed);
    h->efd = -1;
    h->sock = t_unix_connect(path);
    if (t_rng_below(&h->rng, 3) == 0) {
        /* blocking or not: the agent writes it through io_uring either way */
        h->efd = eventfd(0, EFD_CLOEXEC | (t_rng_below(&h->rng, 2) ? EFD_NONBLOCK : 0));
        ck_assert_int_ge(h->efd, 0);
        hello.flags = MC_SHM_HELLO_F_EVENTFD;
        ck_assert_int_eq(t_send_fds(h->sock, &hello, sizeof(hello), &h->efd, 1), sizeof(hello));
    } else {
        ck_assert_int_eq(send(h->sock, &hello, sizeof(hello), 0), sizeof(hello));
    }
    do {
        n = recvmsg(h->sock, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    ck_assert_msg(n == (ssize_t)sizeof(w), "seed %" PRIu64 ": welcome: %zd", seed, n);
    ck_assert_msg(w.status == 0, "seed %" PRIu64 ": welcome status %d", seed, w.status);
    cm = CMSG_FIRSTHDR(&msg);
    ck_assert_ptr_nonnull(cm);
    nfds = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    ck_assert_int_eq(nfds, 2 + (int)w.nsegs); /* the region, the segments, the node page */
    memcpy(fds, CMSG_DATA(cm), sizeof(int) * (size_t)nfds);
    for (i = 1; i <= (int)w.nsegs; i++) {
        if (check_segs)
            t_hc_check_segment_fd(fds[i], w.seg_size[i - 1], seed);
        close(fds[i]);
    }
    h->node = mmap(NULL, MC_SHM_NODE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fds[nfds - 1], 0);
    ck_assert_ptr_ne(h->node, MAP_FAILED);
    close(fds[nfds - 1]);
    h->region_fd = fds[0];
    h->region_size = w.region_size;
    h->base = mmap(NULL, h->region_size, PROT_READ | PROT_WRITE, MAP_SHARED, h->region_fd, 0);
    ck_assert_ptr_ne(h->base, MAP_FAILED);
    memcpy(&h->hdr, h->base, sizeof(h->hdr));
    ck_assert_uint_eq(h->hdr.magic, MC_SHM_MAGIC);
    h->sq = (struct mc_shm_ring_ctrl *)(h->base + h->hdr.sq_ctrl_off);
    h->cq = (struct mc_shm_ring_ctrl *)(h->base + h->hdr.cq_ctrl_off);
    h->sq_tail = atomic_load(&h->sq->tail);

    h->narenas = (uint32_t)t_rng_below(&h->rng, T_HC_ARENAS + 1);
    for (uint32_t k = 0; k < h->narenas; k++) {
        struct mc_shm_arena_msg m = {
            .magic = MC_SHM_MAGIC, .type = MC_SHM_ARENA_ADD, .arena_id = k};

        h->arena[k].size = 4096 * (1 + t_rng_below(&h->rng, 64));
        h->arena[k].fd = t_memfd_sealed("t-hostile-arena", h->arena[k].size, true);
        h->arena[k].p =
            mmap(NULL, h->arena[k].size, PROT_READ | PROT_WRITE, MAP_SHARED, h->arena[k].fd, 0);
        ck_assert_ptr_ne(h->arena[k].p, MAP_FAILED);
        t_rng_bytes(&h->rng, h->arena[k].p, h->arena[k].size);
        m.size = h->arena[k].size;
        ck_assert_int_eq(t_send_fds(h->sock, &m, sizeof(m), &h->arena[k].fd, 1), sizeof(m));
    }
    h->user = malloc(T_HC_USER_LEN);
    ck_assert_ptr_nonnull(h->user);
    t_rng_bytes(&h->rng, h->user, T_HC_USER_LEN);
}

static void t_hc_close(struct t_hc *h)
{
    for (uint32_t k = 0; k < h->narenas; k++) {
        munmap(h->arena[k].p, h->arena[k].size);
        close(h->arena[k].fd);
    }
    munmap(h->base, h->region_size);
    munmap(h->node, MC_SHM_NODE_SIZE);
    close(h->region_fd);
    if (h->efd >= 0)
        close(h->efd);
    close(h->sock);
    free(h->user);
}

/* A size a hostile SQE may carry: any value except the band that would reserve real space
 * for long (T_HC_SIZE_MAX .. 1 GiB), so that the good client never meets a full store. Huge
 * values stay: they must be refused, not trusted. */
static uint64_t t_hc_size(uint64_t v)
{
    return v > T_HC_SIZE_MAX && v <= (UINT64_C(1) << 30) ? 1 + v % T_HC_SIZE_MAX : v;
}

static void t_hc_sanitize(struct mc_sqe *s)
{
    s->put_flags &= ~(uint32_t)MC_PUT_PIN_HARD; /* the hard-pin cap is shared */
    s->arg0 = t_hc_size(s->arg0);
    s->data_len = t_hc_size(s->data_len);
}

/* Writes SQE slot idx in 8-byte stores: an agent copying it meanwhile sees each field either
 * old or new, both sanitized. */
static void t_hc_put_sqe(struct t_hc *h, uint32_t idx, struct mc_sqe *s)
{
    volatile uint64_t *dst = (volatile uint64_t *)(h->base + h->hdr.sqes_off) + 8u * idx;
    uint64_t w[8];

    t_hc_sanitize(s);
    memcpy(w, s, sizeof(w));
    for (int k = 0; k < 8; k++)
        dst[k] = w[k];
}

/* Key bytes for slot idx; never starting with the good client's first byte. */
static void t_hc_put_key(struct t_hc *h, uint32_t idx, uint8_t *key, size_t len)
{
    if (len == 0)
        return;
    if (key[0] == T_HC_KEY0)
        key[0] ^= 0x20;
    memcpy(h->base + h->hdr.keys_off + (uint64_t)idx * MC_SHM_KEY_SLOT, key,
           len < MC_SHM_KEY_SLOT ? len : MC_SHM_KEY_SLOT);
}

/* Random bytes over [off, off + len) of the region: whole random SQEs where it covers the
 * SQ entries, key slots filtered, raw bytes everywhere else. */
static void t_hc_scribble(struct t_hc *h, uint64_t off, uint64_t len)
{
    const struct mc_shm_hdr *d = &h->hdr;
    uint64_t end = off + len > h->region_size ? h->region_size : off + len;
    uint64_t s0 = d->sqes_off, s1 = s0 + (uint64_t)d->sq_entries * sizeof(struct mc_sqe);
    uint64_t k0 = d->keys_off, k1 = k0 + (uint64_t)d->sq_entries * MC_SHM_KEY_SLOT;
    uint8_t buf[4096];

    while (off < end) {
        uint64_t q = end, n;

        if (off >= s0 && off < s1) {
            uint32_t idx = (uint32_t)((off - s0) / sizeof(struct mc_sqe));
            struct mc_sqe s;

            t_rng_bytes(&h->rng, &s, sizeof(s));
            t_hc_put_sqe(h, idx, &s);
            off = s0 + (uint64_t)(idx + 1) * sizeof(struct mc_sqe);
            continue;
        }
        if (off < s0 && q > s0)
            q = s0;
        n = q - off < sizeof(buf) ? q - off : sizeof(buf);
        t_rng_bytes(&h->rng, buf, n);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t at = off + i;

            if (at >= k0 && at < k1 && (at - k0) % MC_SHM_KEY_SLOT == 0 && buf[i] == T_HC_KEY0)
                buf[i] ^= 0x20;
        }
        memcpy(h->base + off, buf, n);
        off += n;
    }
}

/* A random SQE, mostly nearly valid (so that it gets past the checks and reaches the ops),
 * sometimes pure noise. Its key goes to key[] (*key_len bytes). */
static void t_hc_make_sqe(struct t_hc *h, struct mc_sqe *s, uint8_t *key, size_t *key_len)
{
    struct t_rng *r = &h->rng;
    const struct mc_shm_hdr *d = &h->hdr;
    uint64_t pick;

    t_rng_bytes(r, s, sizeof(*s));
    *key_len = s->key_len;
    if (t_rng_below(r, 8) == 0) {
        t_rng_bytes(r, key, MC_SHM_KEY_SLOT);
        return; /* noise */
    }
    /* each field right for its op most of the time, wrong now and then */
    s->opcode = (uint8_t)t_rng_below(r, MC_OP__COUNT + 1);
    pick = t_rng_below(r, 32);
    if (s->opcode == MC_OP_PUT || s->opcode == MC_OP_PUT_DATA)
        s->flags = pick < 16   ? 0
                   : pick < 23 ? MC_SQE_F_ARENA
                   : pick < 30 ? MC_SQE_F_USER
                               : (uint8_t)t_rng_next(r);
    else if (s->opcode == MC_OP_RELEASE)
        s->flags = pick < 16 ? MC_SQE_F_NO_CQE : pick < 31 ? 0 : (uint8_t)t_rng_next(r);
    else
        s->flags = pick < 31 ? 0 : (uint8_t)t_rng_next(r);
    switch (s->opcode) {
    case MC_OP_PUT:
    case MC_OP_PUT_START:
    case MC_OP_GET:
    case MC_OP_EXIST:
    case MC_OP_REMOVE:
    case MC_OP_STAT:
    case MC_OP_REMOVE_PREFIX:
    case MC_OP_LIST:
        s->key_len = (uint16_t)(t_rng_below(r, 16) == 0 ? t_rng_next(r) : 1 + t_rng_below(r, 6));
        if (s->opcode == MC_OP_LIST && t_rng_below(r, 3) == 0)
            s->key_len = 0;
        break;
    default:
        s->key_len = (uint16_t)(t_rng_below(r, 16) == 0 ? t_rng_next(r) : 0);
        break;
    }
    s->put_flags = (uint32_t)(t_rng_below(r, 16) == 0 ? t_rng_next(r) : t_rng_below(r, 32));
    s->replicas = (uint32_t)(t_rng_below(r, 10) == 0 ? t_rng_next(r) : t_rng_below(r, 3));
    s->arg0 = t_rng_below(r, 4) == 0 ? t_rng_next(r) : t_rng_below(r, 2u * d->max_inflight + 4);
    if (s->opcode == MC_OP_PUT_START)
        s->arg0 = t_rng_below(r, 8) == 0 ? t_rng_next(r) : 1 + t_rng_below(r, T_HC_SIZE_MAX);
    s->arg1 = t_rng_below(r, 4) == 0 ? t_rng_next(r) : t_rng_below(r, 4) * MC_SHM_CHUNK + t_rng_below(r, 3);
    if (s->opcode == MC_OP_LIST)
        s->arg1 = 1 + t_rng_below(r, 64);
    s->data_len = t_rng_below(r, 8) == 0 ? t_rng_next(r) : 1 + t_rng_below(r, T_HC_SIZE_MAX);
    if (s->flags == MC_SQE_F_ARENA) {
        uint64_t id = t_rng_below(r, h->narenas + 2),
                 size = id < h->narenas ? h->arena[id].size : 4096;

        s->data_off = id << MC_SHM_ARENA_SHIFT | t_rng_below(r, size + 64);
        s->data_len = 1 + t_rng_below(r, size + 64);
    } else if (s->flags == MC_SQE_F_USER) {
        pick = t_rng_below(r, 4);
        s->data_off = pick == 0   ? t_rng_next(r)
                      : pick == 1 ? (uint64_t)(uintptr_t)h->base + t_rng_below(r, h->region_size)
                                  : (uint64_t)(uintptr_t)h->user + t_rng_below(r, T_HC_USER_LEN);
    } else {
        s->data_off = t_rng_below(r, 8) == 0 ? t_rng_next(r) : t_rng_below(r, d->staging_size);
    }
    pick = t_rng_below(r, 10);
    s->deadline_ms = pick < 6 ? 0 : (uint32_t)(t_now_ms() + t_rng_below(r, 4000) - 1000);
    s->ttl_ms = t_rng_below(r, 4) == 0 ? t_rng_next(r) : t_rng_below(r, 2) * t_rng_below(r, 5000);
    *key_len = s->key_len;
    /* few distinct keys, so that ops meet each other's objects, leases and puts */
    for (size_t i = 0; i < MC_SHM_KEY_SLOT; i++)
        key[i] = (uint8_t)(i < 6 ? 'a' + t_rng_below(r, 3) : '!' + t_rng_below(r, 94));
}

/* Publish n new SQEs (ring wrap and all), as a producer would, or with a bogus tail. */
static void t_hc_submit(struct t_hc *h, uint32_t n, bool bogus_tail)
{
    uint8_t key[MC_SHM_KEY_SLOT];

    for (uint32_t i = 0; i < n; i++) {
        uint32_t idx = (h->sq_tail + i) & (h->hdr.sq_entries - 1);
        struct mc_sqe s;
        size_t klen;

        t_hc_make_sqe(h, &s, key, &klen);
        t_hc_put_key(h, idx, key, klen);
        t_hc_put_sqe(h, idx, &s);
    }
    h->sq_tail += n;
    t_hc_count.sqes += n;
    if (bogus_tail)
        h->sq_tail = (uint32_t)t_rng_next(&h->rng);
    atomic_store_explicit(&h->sq->tail, h->sq_tail, memory_order_release);
}

/* One hostile action. */
static void t_hc_step(struct t_hc *h)
{
    struct t_rng *r = &h->rng;
    const struct mc_shm_hdr *d = &h->hdr;
    uint64_t sq_bytes = (uint64_t)d->sq_entries * sizeof(struct mc_sqe);
    uint64_t cq_bytes = (uint64_t)d->cq_entries * sizeof(struct mc_cqe);
    uint32_t head, room;

    switch (t_rng_below(r, 16)) {
    case 0: /* the header: the agent keeps its own copy; or the node page, a hint to all */
        if (t_rng_below(r, 4) == 0)
            t_rng_bytes(r, h->node + t_rng_below(r, 128), 1 + t_rng_below(r, 64));
        else
            t_hc_scribble(h, t_rng_below(r, MC_SHM_HDR_SIZE), 1 + t_rng_below(r, 256));
        break;
    case 1: /* the SQ's control words: head, tail, futex, need_wakeup (rarely: fatal) */
        if (t_rng_below(r, 8) == 0)
            t_hc_scribble(h, d->sq_ctrl_off, sizeof(struct mc_shm_ring_ctrl));
        else
            atomic_store(&h->sq->need_wakeup, (uint32_t)t_rng_next(r));
        break;
    case 2: /* the CQ's control words */
        t_hc_scribble(h, d->cq_ctrl_off + t_rng_below(r, sizeof(struct mc_shm_ring_ctrl)),
                      1 + t_rng_below(r, sizeof(struct mc_shm_ring_ctrl)));
        break;
    case 3: /* the CQEs the agent posted, or is posting */
        t_hc_scribble(h, d->cqes_off + t_rng_below(r, cq_bytes), 1 + t_rng_below(r, cq_bytes));
        break;
    case 4: /* staging, while the agent may be copying out of it */
        t_hc_scribble(h, d->staging_off + t_rng_below(r, d->staging_size),
                      1 + t_rng_below(r, 1u << 20));
        break;
    case 5: /* an arena, likewise */
        if (h->narenas > 0) {
            uint32_t k = (uint32_t)t_rng_below(r, h->narenas);

            t_rng_bytes(r, h->arena[k].p, h->arena[k].size);
        }
        break;
    case 6: /* key slots */
        t_hc_scribble(h, d->keys_off + t_rng_below(r, (uint64_t)d->sq_entries * MC_SHM_KEY_SLOT),
                      1 + t_rng_below(r, 8192));
        break;
    case 7: /* SQ entries, published or not */
        t_hc_scribble(h, d->sqes_off + t_rng_below(r, sq_bytes), 1 + t_rng_below(r, sq_bytes));
        break;
    case 8:
    case 9:
    case 10: /* a batch of submissions within the ring */
        head = atomic_load(&h->sq->head);
        room = h->sq_tail - head <= d->sq_entries ? d->sq_entries - (h->sq_tail - head) : 1;
        t_hc_submit(h, 1 + (uint32_t)t_rng_below(r, room < 32 ? room : 32), false);
        break;
    case 11: /* a flood: the whole ring at once (more than max_inflight: fatal) */
        head = atomic_load(&h->sq->head);
        room = h->sq_tail - head <= d->sq_entries ? d->sq_entries - (h->sq_tail - head) : 1;
        t_hc_submit(h, room == 0 ? 1 : room, t_rng_below(r, 8) == 0);
        break;
    case 12: /* a doorbell storm */
        for (uint64_t i = 1 + t_rng_below(r, 64); i > 0; i--)
            t_doorbell(h->sq);
        break;
    case 13: /* reap: the CQ head where its tail is, or anywhere */
        if (t_rng_below(r, 8) == 0) {
            atomic_store(&h->cq->head, (uint32_t)t_rng_next(r));
        } else {
            uint32_t tail = atomic_load(&h->cq->tail), hd = atomic_load(&h->cq->head);

            for (; hd != tail && tail - hd <= d->cq_entries; hd++) {
                const struct mc_cqe *e =
                    (const struct mc_cqe *)(h->base + d->cqes_off) + (hd & (d->cq_entries - 1));

                t_hc_count.cqes++;
                t_hc_count.cqes_ok += e->res >= 0;
            }
            atomic_store(&h->cq->head, tail);
        }
        if (h->efd >= 0 && t_rng_below(r, 2) == 0) {
            uint64_t v;

            if (fcntl(h->efd, F_GETFL) & O_NONBLOCK)
                (void)read(h->efd, &v, sizeof(v));
        }
        break;
    case 14: /* holes punched in the region or an arena: they read as zeros */
        if (h->narenas > 0 && t_rng_below(r, 2) == 0) {
            uint32_t k = (uint32_t)t_rng_below(r, h->narenas);

            (void)fallocate(h->arena[k].fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                            (off_t)(4096 * t_rng_below(r, h->arena[k].size / 4096)), 4096);
        } else {
            (void)fallocate(h->region_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                            (off_t)(4096 * t_rng_below(r, h->region_size / 4096)), 8192);
        }
        break;
    default: /* anywhere at all */
        t_hc_scribble(h, t_rng_below(r, h->region_size), 1 + t_rng_below(r, 1u << 16));
        break;
    }
    if (t_rng_below(r, 2) == 0)
        t_doorbell(h->sq);
}

/* The last word of a round when the agent still serves us: a violation it cannot let pass,
 * on the socket (returns true) or on the ring (false). */
static bool t_hc_violate(struct t_hc *h)
{
    struct mc_shm_arena_msg m = {
        .magic = MC_SHM_MAGIC, .type = MC_SHM_ARENA_ADD, .arena_id = h->narenas, .size = 8192};
    struct t_rng *r = &h->rng;
    uint8_t junk[64];
    int fds[3], fd;

    switch (t_rng_below(r, 8)) {
    case 0: /* an unsealed arena */
        fd = t_memfd_sealed("t-unsealed", 8192, false);
        (void)t_send_fds(h->sock, &m, sizeof(m), &fd, 1);
        close(fd);
        break;
    case 1: /* a size that is not the memfd's */
        fd = t_memfd_sealed("t-arena", 8192, true);
        m.size = 1u << 20;
        (void)t_send_fds(h->sock, &m, sizeof(m), &fd, 1);
        close(fd);
        break;
    case 2: /* an id used already, or out of range */
        fd = t_memfd_sealed("t-arena", 8192, true);
        m.arena_id = h->narenas > 0 ? 0 : MC_SHM_MAX_ARENAS + (uint32_t)t_rng_below(r, 1000);
        (void)t_send_fds(h->sock, &m, sizeof(m), &fd, 1);
        close(fd);
        break;
    case 3: /* three fds at once */
        for (int i = 0; i < 3; i++)
            fds[i] = t_memfd_sealed("t-arena", 8192, true);
        (void)t_send_fds(h->sock, &m, sizeof(m), fds, 3);
        for (int i = 0; i < 3; i++)
            close(fds[i]);
        break;
    case 4: /* random bytes on the socket */
        t_rng_bytes(r, junk, sizeof(junk));
        (void)send(h->sock, junk, 1 + t_rng_below(r, sizeof(junk)), MSG_NOSIGNAL);
        break;
    default: /* a tail no producer could write */
        h->sq_tail =
            atomic_load(&h->sq->head) + h->hdr.sq_entries + 1 + (uint32_t)t_rng_below(r, 1u << 30);
        atomic_store(&h->sq->tail, h->sq_tail);
        t_doorbell(h->sq);
        return false;
    }
    t_doorbell(h->sq);
    return true;
}

/* One hostile client's life: connect, abuse, be cut off. Returns the connections it made. */
static unsigned t_hc_round(const char *sock, uint64_t seed, bool check_segs)
{
    struct t_hc h;
    bool cut = false;
    int steps;

    t_hc_connect(&h, sock, seed, check_segs);
    /* a third of the rounds end early on one of t_hc_violate's sins */
    steps = t_rng_below(&h.rng, 3) == 0 ? 1 + (int)t_rng_below(&h.rng, 8) : T_HC_STEPS;
    for (int i = 0; i < steps && !cut; i++) {
        t_hc_step(&h);
        if (t_rng_below(&h.rng, 4) == 0)
            t_poll_pause();
        cut = t_cut_off(h.sock, 0);
    }
    if (cut) {
        t_hc_count.cut_by_steps++;
    } else if (!t_hc_violate(&h)) {
        /* a tail beyond the head we read: if our scribbles had left a stale head in the
         * ring's word at that moment, it may have been in range after all; then the socket */
        if (!t_cut_off(h.sock, 1000)) {
            t_hc_count.fallbacks++;
            (void)send(h.sock, "x", 1, MSG_NOSIGNAL);
        }
    }
    ck_assert_msg(t_cut_off(h.sock, T_HC_CUT_MS),
                  "seed %" PRIu64 ": the agent did not cut the hostile client off", seed);
    t_hc_close(&h);
    return 1;
}

/* Hellos the agent must refuse (MC_ERR_PROTO, then close): each on its own connection.
 * Returns the connections made. */
static unsigned t_hc_bad_hellos(const char *sock, uint64_t seed)
{
    unsigned made = 0;

    for (int v = 0; v < T_HC_BAD_HELLOS; v++) {
        struct mc_shm_hello hello = {.magic = MC_SHM_MAGIC, .abi = MC_SHM_ABI};
        struct mc_shm_welcome w;
        int s = t_unix_connect(sock), fds[3] = {-1, -1, -1}, nfds = 0, p[2];
        const void *msg = &hello;
        size_t len = sizeof(hello);
        ssize_t n;

        made++;
        switch (v) {
        case 0: /* gone before saying anything (first: the next ones see it accepted) */
            close(s);
            continue;
        case 8:
            hello.magic ^= 1;
            break;
        case 1:
            hello.abi = MC_SHM_ABI + 1;
            break;
        case 2:
            hello.flags = 0x80;
            break;
        case 3: /* eventfd promised, none sent */
            hello.flags = MC_SHM_HELLO_F_EVENTFD;
            break;
        case 4: /* an fd not promised */
            fds[0] = eventfd(0, EFD_CLOEXEC);
            nfds = 1;
            break;
        case 5: /* a pipe passed off as the eventfd */
            ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
            fds[0] = p[1];
            close(p[0]);
            nfds = 1;
            hello.flags = MC_SHM_HELLO_F_EVENTFD;
            break;
        case 6: /* three fds with the eventfd flag */
            for (int i = 0; i < 3; i++)
                fds[i] = eventfd(0, EFD_CLOEXEC);
            nfds = 3;
            hello.flags = MC_SHM_HELLO_F_EVENTFD;
            break;
        default: /* half a hello */
            len = 8;
            break;
        }
        ck_assert_int_eq(t_send_fds(s, msg, len, fds, nfds), (ssize_t)len);
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        n = recv(s, &w, sizeof(w), 0);
        if (n == (ssize_t)sizeof(w))
            ck_assert_msg(w.status == MC_ERR_PROTO,
                          "seed %" PRIu64 ": bad hello %d answered %d", seed, v, w.status);
        else
            ck_assert_msg(n == 0, "seed %" PRIu64 ": bad hello %d: recv %zd", seed, v, n);
        ck_assert_msg(t_cut_off(s, T_HC_CUT_MS), "seed %" PRIu64 ": bad hello %d not closed",
                      seed, v);
        close(s);
    }
    return made;
}

static uint64_t t_stat_u64(mc_client_t *c, const char *field)
{
    char *js = NULL;
    size_t len = 0;
    json_t *o, *v;
    uint64_t x;

    ck_assert_int_eq(mc_client_stats_json(c, &js, &len), 0);
    o = json_loadb(js, len, 0, NULL);
    ck_assert_ptr_nonnull(o);
    v = json_object_get(o, field);
    ck_assert_msg(json_is_integer(v), "stats have no %s", field);
    x = (uint64_t)json_integer_value(v);
    json_decref(o);
    free(js);
    return x;
}

/* Waits (up to T_HC_SETTLE_MS) until the agent serves `clients` connections and, unless
 * fds < 0, holds `fds` fds and `maps` memfd mappings again. */
static void t_hc_settle(pid_t agent, mc_client_t *c, long fds, long maps, uint64_t clients)
{
    uint64_t deadline = t_now_ms() + T_HC_SETTLE_MS;

    while (t_now_ms() < deadline &&
           ((fds >= 0 && (t_proc_fds(agent) != fds || t_proc_memfd_maps(agent) != maps)) ||
            t_stat_u64(c, "clients") != clients))
        t_poll_pause();
}

/* Start a standalone agent (no t_agent.h: t_cluster.h's process helpers serve both tests),
 * with `extra` (NULL-terminated, may be NULL) appended to its arguments. */
static void t_standalone_start_with(struct t_proc *p, const char *dir, const char *dram,
                                    const char *const *extra)
{
    const char *argv[32];
    char st[48];
    uint64_t deadline;
    int argc = 0;

    snprintf(p->sock, sizeof(p->sock), "%s/agent.sock", dir);
    snprintf(p->ready, sizeof(p->ready), "%s/agent.ready", dir);
    argv[argc++] = t_env_bin("MC_AGENT_BIN");
    argv[argc++] = "--standalone";
    argv[argc++] = "--socket";
    argv[argc++] = p->sock;
    argv[argc++] = "--dram";
    argv[argc++] = dram;
    argv[argc++] = "--ready-file";
    argv[argc++] = p->ready;
    for (int k = 0; extra != NULL && extra[k] != NULL && argc < 31; k++)
        argv[argc++] = extra[k];
    argv[argc] = NULL;
    t_proc_spawn(p, dir, "agent", NULL, argv);
    deadline = t_now_ms() + T_READY_MS;
    while (access(p->ready, F_OK) != 0) {
        if (waitpid(p->pid, &p->status, WNOHANG) == p->pid) {
            p->pid = 0;
            t_proc_dump_log(p, 8192);
            ck_abort_msg("mc-agent exited at start-up (%s)",
                         t_status_str(p->status, st, sizeof(st)));
        }
        ck_assert_msg(t_now_ms() < deadline, "mc-agent not ready");
        t_poll_pause();
    }
}

static void t_standalone_start(struct t_proc *p, const char *dir, const char *dram)
{
    t_standalone_start_with(p, dir, dram, NULL);
}

START_TEST(test_hostile_client_scribbles_everything)
{
    const char *env_seed = getenv("MC_HOSTILE_SEED");
    uint64_t base_seed, disc0, disc1, t0, elapsed;
    struct t_good_report rep;
    struct t_proc agent = {0};
    char dir[256];
    long fds0, maps0, rss0, fds1, maps1, rss1;
    unsigned conns = 0, measured = 0, rounds = 0, r;
    int stop[2], res[2], st;
    mc_client_t *c;
    pid_t good;

    if (env_seed != NULL)
        base_seed = strtoull(env_seed, NULL, 0);
    else
        t_fill_random((uint8_t *)&base_seed, sizeof(base_seed));
    base_seed &= UINT64_C(0xffffffffffff); /* short enough to paste */
    fprintf(stderr, "test_hostile_client: MC_HOSTILE_SEED=%" PRIu64 "\n", base_seed);
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY); /* MC_SQE_F_USER reads our memory */

    t_mkdtemp(dir, sizeof(dir));
    t_standalone_start(&agent, dir, "128M");

    /* the well-behaved client, in its own process, for the whole run */
    ck_assert_int_eq(pipe2(stop, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(res, O_CLOEXEC), 0);
    fflush(NULL);
    good = fork();
    ck_assert_int_ge(good, 0);
    if (good == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(stop[1]);
        close(res[0]);
        t_good_run(agent.sock, stop[0], res[1]);
    }
    close(stop[0]);
    close(res[1]);
    ck_assert_int_eq(mc_connect(agent.sock, &c), 0); /* our own view: stats */

    /* warm-up rounds, then the baseline: 2 clients (the good one and ours) */
    for (r = 0; r < T_HC_WARMUP; r++)
        conns += t_hc_round(agent.sock, base_seed + r, r == 0);
    conns += t_hc_bad_hellos(agent.sock, base_seed);
    t_hc_settle(agent.pid, c, -1, -1, 2);
    ck_assert_uint_eq(t_stat_u64(c, "clients"), 2);
    /* a client cut off is counted out at once, its fds closed once its requests are back:
     * the baseline is the count that stays the same over 100 ms */
    fds0 = maps0 = -1;
    for (uint64_t deadline = t_now_ms() + T_HC_SETTLE_MS, stable = 0; stable < 50;) {
        long f = t_proc_fds(agent.pid), m = t_proc_memfd_maps(agent.pid);

        stable = f == fds0 && m == maps0 ? stable + 1 : 0;
        fds0 = f;
        maps0 = m;
        ck_assert_msg(t_now_ms() < deadline, "the agent's fds never settled");
        t_poll_pause();
    }
    rss0 = t_proc_rss_kb(agent.pid);
    disc0 = t_stat_u64(c, "clients_disconnected");

    t0 = t_now_ms();
    for (r = T_HC_WARMUP; t_now_ms() - t0 < T_HC_RUN_MS; r++) {
        measured += t_hc_round(agent.sock, base_seed + r, false);
        rounds++;
        if (r % 16 == 0)
            measured += t_hc_bad_hellos(agent.sock, base_seed + r);
        ck_assert_msg(t_alive(agent.pid), "seed %" PRIu64 ": mc-agent died", base_seed + r);
    }
    elapsed = t_now_ms() - t0;

    /* everything the hostile clients made the agent hold is released */
    t_hc_settle(agent.pid, c, fds0, maps0, 2);
    fds1 = t_proc_fds(agent.pid);
    maps1 = t_proc_memfd_maps(agent.pid);
    rss1 = t_proc_rss_kb(agent.pid);
    disc1 = t_stat_u64(c, "clients_disconnected");
    fprintf(stderr,
            "test_hostile_client: %u rounds, %u hostile connections in %" PRIu64 " ms; "
            "agent fds %ld -> %ld, memfd maps %ld -> %ld, VmRSS %ld -> %ld kB, "
            "clients_disconnected +%" PRIu64 "\n",
            rounds, conns + measured, elapsed, fds0, fds1, maps0, maps1, rss0, rss1,
            disc1 - disc0);
    ck_assert_msg(fds1 == fds0, "agent fds %ld -> %ld (seed %" PRIu64 ")", fds0, fds1,
                  base_seed);
    ck_assert_msg(maps1 == maps0, "agent memfd mappings %ld -> %ld (seed %" PRIu64 ")", maps0,
                  maps1, base_seed);
    ck_assert_msg(!T_HC_RSS_CHECKED || rss1 <= rss0 + T_HC_RSS_SLACK_KB,
                  "agent VmRSS %ld -> %ld kB (seed %" PRIu64 ")", rss0, rss1, base_seed);
    ck_assert_uint_eq(t_stat_u64(c, "clients"), 2);
    ck_assert_int_ge(rounds, 20);

    /* the good client saw nothing but success the whole time */
    close(stop[1]);
    ck_assert_int_eq(read(res[0], &rep, sizeof(rep)), sizeof(rep));
    close(res[0]);
    ck_assert_int_eq(waitpid(good, &st, 0), good);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    fprintf(stderr,
            "test_hostile_client: hostile SQEs %" PRIu64 ", CQEs reaped %" PRIu64 " (%" PRIu64
            " successful), rounds cut off by their own abuse %" PRIu64 ", final bad tails "
            "that looked plausible %" PRIu64 "; the good client made %" PRIu64 " ops\n",
            t_hc_count.sqes, t_hc_count.cqes, t_hc_count.cqes_ok, t_hc_count.cut_by_steps,
            t_hc_count.fallbacks, rep.ops);
    ck_assert_msg(rep.errors == 0,
                  "the good client saw %" PRIu64 " errors, first: %s (seed %" PRIu64 ")",
                  rep.errors, rep.first_what, base_seed);
    ck_assert_uint_gt(rep.ops, 100);

    /* every hostile connection of the measured part was cut off once, nobody else */
    ck_assert_msg(disc1 - disc0 == measured,
                  "clients_disconnected +%" PRIu64 ", hostile connections %u", disc1 - disc0,
                  measured);

    mc_close(c);
    st = t_proc_stop(&agent);
    if (st != 0)
        t_proc_dump_log(&agent, 8192);
    ck_assert_msg(st == 0, "mc-agent did not exit cleanly on SIGTERM (%d)", st);
    t_rmdir(dir);
}
END_TEST

/* --- limits: one client (or uid) must not take what the others need ----------------------- */

static long t_proc_vmsize_kb(pid_t pid)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}

static long t_file_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    long n = 0;
    int ch;

    if (f == NULL)
        return -1;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

/* The hello by hand; returns the welcome's status (fds it carries are closed), or 1 when
 * the agent closed without a welcome. The socket is closed unless sock_p takes it. */
static int t_hello_status(const char *path, int *sock_p)
{
    struct mc_shm_hello hello = {.magic = MC_SHM_MAGIC, .abi = MC_SHM_ABI};
    struct mc_shm_welcome w;
    union {
        struct cmsghdr hdr;
        char buf[CMSG_SPACE(sizeof(int) * (MC_SHM_MAX_SEGS + 1))];
    } ctl;
    struct iovec iov = {.iov_base = &w, .iov_len = sizeof(w)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *cm;
    int s = t_unix_connect(path);
    ssize_t n;

    /* an agent refusing us answers at accept, before our hello, and closes: the send
     * may fail then, the welcome is still there to read */
    (void)send(s, &hello, sizeof(hello), MSG_NOSIGNAL);
    do {
        n = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    for (cm = CMSG_FIRSTHDR(&msg); n > 0 && cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
        int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int)), fds[MC_SHM_MAX_SEGS + 1];

        memcpy(fds, CMSG_DATA(cm), sizeof(int) * (size_t)k);
        for (int i = 0; i < k; i++)
            close(fds[i]);
    }
    if (sock_p != NULL && n == (ssize_t)sizeof(w) && w.status == 0)
        *sock_p = s;
    else
        close(s);
    return n == (ssize_t)sizeof(w) ? w.status : 1;
}

/* Fork a child that switches to uid/gid 65534 and runs fn(path, arg); returns its exit
 * status (fn's return value). */
static int t_as_nobody(int (*fn)(const char *, long), const char *path, long arg)
{
    pid_t pid;
    int st;

    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
            setresuid(65534, 65534, 65534) != 0)
            _exit(90);
        _exit(fn(path, arg));
    }
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st), "the uid-65534 child died");
    return WEXITSTATUS(st);
}

static void t_open_to_all(const struct t_proc *p, const char *dir)
{
    ck_assert_int_eq(chmod(dir, 0755), 0);
    ck_assert_int_eq(chmod(p->sock, 0777), 0);
}

static bool t_need_root(void)
{
    if (geteuid() == 0)
        return true;
    fprintf(stderr, "not root: the second uid cannot be made; this test checks nothing\n");
    return false;
}

/* 1. Sparse arenas cost their client nothing but the agent's address space: a flood of
 * them from several connections must not leave the agent unable to map the next client. */
START_TEST(test_hostile_client_arena_flood)
{
    struct t_proc agent = {0};
    char dir[256], buf[64];
    int socks[T_AF_CONNS];
    long vm0, vm1;
    mc_client_t *c, *c2;
    size_t len;

    t_mkdtemp(dir, sizeof(dir));
    t_standalone_start(&agent, dir, "32M");
    ck_assert_int_eq(mc_connect(agent.sock, &c), 0);
    vm0 = t_proc_vmsize_kb(agent.pid);
    for (int k = 0; k < T_AF_CONNS; k++) {
        ck_assert_int_eq(t_hello_status(agent.sock, &socks[k]), 0);
        for (uint32_t id = 0; id <= 46 - 20; id++) {
            struct mc_shm_arena_msg m = {.magic = MC_SHM_MAGIC, .type = MC_SHM_ARENA_ADD,
                                         .arena_id = id, .size = UINT64_C(1) << (46 - id)};
            int fd = t_memfd_sealed("t-arena-flood", m.size, true);

            ck_assert_int_eq(t_send_fds(socks[k], &m, sizeof(m), &fd, 1), sizeof(m));
            close(fd);
        }
    }
    /* the registrations are read in order with the next ones: a fresh client after them
     * is served, as is an op of ours */
    ck_assert_int_eq(mc_connect(agent.sock, &c2), 0);
    ck_assert_int_eq(mc_put(c2, "after-the-flood", "x", 1, NULL), 0);
    ck_assert_int_eq(mc_get(c, "after-the-flood", buf, sizeof(buf), &len), 0);
    ck_assert_uint_eq(len, 1);
    vm1 = t_proc_vmsize_kb(agent.pid);
    fprintf(stderr, "test_hostile_client_arena_flood: agent VmSize %ld -> %ld kB, "
            "arena_bytes %" PRIu64 ", arenas_refused %" PRIu64 "\n", vm0, vm1,
            t_stat_u64(c, "arena_bytes"), t_stat_u64(c, "arenas_refused"));
    /* the default arena_bytes_total: 1 TiB of mappings, plus what the agent had */
    ck_assert_int_le(vm1, vm0 + (1L << 30) + (1L << 20));
    ck_assert_uint_le(t_stat_u64(c, "arena_bytes"), UINT64_C(1) << 40);
    ck_assert_uint_gt(t_stat_u64(c, "arenas_refused"), 0);
    /* refusing an arena does not cut its client off */
    for (int k = 0; k < T_AF_CONNS; k++) {
        ck_assert_msg(!t_cut_off(socks[k], 0), "flooding connection %d cut off", k);
        close(socks[k]);
    }
    t_hc_settle(agent.pid, c, -1, -1, 2);
    ck_assert_uint_eq(t_stat_u64(c, "arena_bytes"), 0);
    mc_close(c2);
    mc_close(c);
    ck_assert_int_eq(t_proc_stop(&agent), 0);
    t_rmdir(dir);
}
END_TEST

/* Submit one SQE by hand (no sanitizing: sizes are meant) and ring the doorbell. */
static void t_hc_submit_one(struct t_hc *h, const struct mc_sqe *s, const char *key)
{
    uint32_t idx = h->sq_tail & (h->hdr.sq_entries - 1);

    memcpy(h->base + h->hdr.sqes_off + (uint64_t)idx * sizeof(*s), s, sizeof(*s));
    if (key != NULL)
        memcpy(h->base + h->hdr.keys_off + (uint64_t)idx * MC_SHM_KEY_SLOT, key, s->key_len);
    h->sq_tail++;
    atomic_store_explicit(&h->sq->tail, h->sq_tail, memory_order_release);
    t_doorbell(h->sq);
}

static struct mc_cqe t_hc_reap_one(struct t_hc *h)
{
    uint64_t deadline = t_now_ms() + T_HC_CUT_MS;
    uint32_t head = atomic_load(&h->cq->head);
    struct mc_cqe e;

    while (atomic_load_explicit(&h->cq->tail, memory_order_acquire) == head) {
        ck_assert_msg(t_now_ms() < deadline, "no CQE from the agent");
        t_poll_pause();
    }
    memcpy(&e, h->base + h->hdr.cqes_off + (uint64_t)(head & (h->hdr.cq_entries - 1)) *
                                               sizeof(e), sizeof(e));
    atomic_store_explicit(&h->cq->head, head + 1, memory_order_release);
    return e;
}

/* A GET naming an arena destination (MC_SQE_F_ARENA, arena_reads): the span must lie in an
 * arena the client registered, else the GET is answered MC_ERR_INVALID and nothing is
 * written; inside one, the GET is served (here: the key is absent). The client stays. */
START_TEST(test_hostile_client_get_arena_span)
{
    struct t_proc agent = {0};
    char dir[256];
    const char *key = "no-such-key";
    uint64_t seed = 1;
    struct t_hc h;

    t_mkdtemp(dir, sizeof(dir));
    t_standalone_start(&agent, dir, "32M");
    for (;;) {
        t_hc_connect(&h, agent.sock, seed++, false);
        if (h.narenas > 0)
            break;
        t_hc_close(&h);
    }
    {
        const uint64_t size = h.arena[0].size;
        const struct {
            uint64_t off, len;
            int32_t want;
        } cases[] = {
            {(uint64_t)h.narenas << MC_SHM_ARENA_SHIFT, 4096, MC_ERR_INVALID}, /* unregistered */
            {size - 64, 128, MC_ERR_INVALID},             /* past its end */
            {size + 4096, 1, MC_ERR_INVALID},             /* beyond it */
            {64, UINT64_C(1) << 47, MC_ERR_INVALID},      /* wraps */
            {0, size, MC_ERR_NOT_FOUND},                  /* the whole arena: served */
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            struct mc_sqe s = {.opcode = MC_OP_GET, .flags = MC_SQE_F_ARENA,
                               .user_data = 500 + i, .data_off = cases[i].off,
                               .data_len = cases[i].len, .arg1 = cases[i].len + 1};
            struct mc_cqe e;

            s.key_len = (uint16_t)strlen(key);
            t_hc_submit_one(&h, &s, key);
            e = t_hc_reap_one(&h);
            ck_assert_uint_eq(e.user_data, 500 + i);
            ck_assert_msg(e.res == cases[i].want, "case %zu: %d, not %d", i, e.res,
                          cases[i].want);
        }
    }
    ck_assert(!t_cut_off(h.sock, 0));
    t_hc_close(&h);
    ck_assert_int_eq(t_proc_stop(&agent), 0);
    t_rmdir(dir);
}
END_TEST

/* 2. Puts started and never fed hold the pool: the client's open puts are bounded, and a
 * started put with no data is revoked after put_idle_ms. */
START_TEST(test_hostile_client_silent_puts)
{
    const char *extra[] = {"--set", "put_idle_ms=500", NULL};
    struct t_proc agent = {0};
    char dir[256], key[32];
    static uint8_t obj[1 << 20];
    uint64_t used0, deadline;
    uint32_t handle = UINT32_MAX;
    int ok = 0, nospace = 0;
    struct t_hc h;
    mc_client_t *c;

    t_mkdtemp(dir, sizeof(dir));
    t_standalone_start_with(&agent, dir, "32M", extra);
    ck_assert_int_eq(mc_connect(agent.sock, &c), 0);
    memset(obj, 0x47, sizeof(obj));
    for (int k = 0; k < 6; k++) {
        snprintf(key, sizeof(key), "Gkeep-%d", k);
        ck_assert_int_eq(mc_put(c, key, obj, sizeof(obj), NULL), 0);
    }
    used0 = t_stat_u64(c, "used_bytes");

    t_hc_connect(&h, agent.sock, 1, false);
    for (int k = 0; k < 8; k++) {
        struct mc_sqe s = {.opcode = MC_OP_PUT_START, .user_data = 100 + (uint64_t)k,
                           .arg0 = 4000000};

        snprintf(key, sizeof(key), "silent-%d", k);
        s.key_len = (uint16_t)strlen(key);
        t_hc_submit_one(&h, &s, key);
    }
    for (int k = 0; k < 8; k++) {
        struct mc_cqe e = t_hc_reap_one(&h);

        if (e.res == 0) {
            ok++;
            handle = e.lease_id;
        } else {
            ck_assert_int_eq(e.res, MC_ERR_NO_SPACE);
            nospace++;
        }
    }
    /* the default open_put_bytes_per_client: a quarter of the 32 MiB pool */
    ck_assert_msg(ok >= 1 && ok <= 2 && nospace == 8 - ok, "%d started, %d refused", ok,
                  nospace);
    ck_assert_uint_eq(t_stat_u64(c, "puts_refused_open_bytes"), (uint64_t)nospace);
    for (int k = 0; k < 6; k++) {
        snprintf(key, sizeof(key), "Gkeep-%d", k);
        ck_assert_msg(mc_exist(c, key) == 1, "%s was evicted", key);
    }
    /* the silent puts go back to the pool after put_idle_ms (and a tick) */
    deadline = t_now_ms() + 500 + 2000;
    while (t_stat_u64(c, "used_bytes") != used0) {
        ck_assert_msg(t_now_ms() < deadline, "used_bytes %" PRIu64 ", %" PRIu64 " before",
                      t_stat_u64(c, "used_bytes"), used0);
        t_poll_pause();
    }
    ck_assert_uint_eq(t_stat_u64(c, "puts_idle_revoked"), (uint64_t)ok);
    {
        struct mc_sqe s = {.opcode = MC_OP_PUT_END, .user_data = 200, .arg0 = handle};
        struct mc_cqe e;

        t_hc_submit_one(&h, &s, NULL);
        e = t_hc_reap_one(&h);
        ck_assert_uint_eq(e.user_data, 200);
        ck_assert_int_eq(e.res, MC_ERR_TIMEOUT);
    }
    ck_assert_msg(!t_cut_off(h.sock, 0), "the silent client was cut off");
    t_hc_close(&h);
    mc_close(c);
    ck_assert_int_eq(t_proc_stop(&agent), 0);
    t_rmdir(dir);
}
END_TEST

static int t_connect_many(const char *path, long n)
{
    for (long i = 0; i < n; i++) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0)
            return 91;
        close(s);
    }
    return 0;
}

/* 3. A refused uid connecting in a loop must not fill the agent's log; the stats count
 * every refusal. */
START_TEST(test_hostile_client_refused_flood)
{
    struct t_proc agent = {0};
    char dir[256];
    long lines0, lines1;
    uint64_t t0, deadline, secs;
    mc_client_t *c;

    if (!t_need_root())
        return;
    t_mkdtemp(dir, sizeof(dir));
    t_standalone_start(&agent, dir, "32M");
    t_open_to_all(&agent, dir);
    ck_assert_int_eq(mc_connect(agent.sock, &c), 0);
    lines0 = t_file_lines(agent.log);
    t0 = t_now_ms();
    ck_assert_int_eq(t_as_nobody(t_connect_many, agent.sock, T_RF_CONNECTS), 0);
    deadline = t_now_ms() + T_HC_SETTLE_MS;
    while (t_stat_u64(c, "clients_refused_denied") != T_RF_CONNECTS) {
        ck_assert_msg(t_now_ms() < deadline, "clients_refused_denied %" PRIu64,
                      t_stat_u64(c, "clients_refused_denied"));
        t_poll_pause();
    }
    secs = (t_now_ms() - t0) / 1000;
    ck_assert_uint_eq(t_stat_u64(c, "clients_refused"), T_RF_CONNECTS);
    lines1 = t_file_lines(agent.log);
    fprintf(stderr, "test_hostile_client_refused_flood: %d refusals in %" PRIu64 " s, "
            "%ld log lines\n", T_RF_CONNECTS, secs, lines1 - lines0);
    /* a line a second, and the count of those not logged (the tick's flush) */
    ck_assert_int_le(lines1 - lines0, 2 * (long)secs + 4);
    mc_close(c);
    ck_assert_int_eq(t_proc_stop(&agent), 0);
    t_rmdir(dir);
}
END_TEST

static int t_hello_ok(const char *path, long unused)
{
    (void)unused;
    return t_hello_status(path, NULL) == 0 ? 0 : 92;
}

/* 4. max_clients is shared by everyone: one uid may hold max_clients_per_uid of it. */
START_TEST(test_hostile_client_per_uid_cap)
{
    const char *extra[] = {"--set", "max_clients=8", "--set", "max_clients_per_uid=3",
                           "--set", "allow_uids=0,65534", NULL};
    struct t_proc agent = {0};
    char dir[256];
    mc_client_t *c[3], *more = NULL;

    if (!t_need_root())
        return;
    t_mkdtemp(dir, sizeof(dir));
    t_standalone_start_with(&agent, dir, "32M", extra);
    t_open_to_all(&agent, dir);
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(mc_connect(agent.sock, &c[k]), 0);
    ck_assert_int_eq(mc_connect(agent.sock, &more), MC_ERR_BUSY);
    /* refused at accept, before its hello is read: the welcome may be lost to the reset */
    ck_assert_int_ne(t_hello_status(agent.sock, NULL), 0);
    /* another uid is not locked out */
    ck_assert_int_eq(t_as_nobody(t_hello_ok, agent.sock, 0), 0);
    ck_assert_uint_eq(t_stat_u64(c[0], "clients_refused_busy"), 2);
    /* a slot given back is the uid's again */
    mc_close(c[2]);
    t_hc_settle(agent.pid, c[0], -1, -1, 2);
    ck_assert_int_eq(mc_connect(agent.sock, &c[2]), 0);
    for (int k = 0; k < 3; k++)
        mc_close(c[k]);
    ck_assert_int_eq(t_proc_stop(&agent), 0);
    t_rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hostile_client");
    TCase *tc = tcase_create("client");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_hostile_client_scribbles_everything);
    tcase_add_test(tc, test_hostile_client_arena_flood);
    tcase_add_test(tc, test_hostile_client_silent_puts);
    tcase_add_test(tc, test_hostile_client_get_arena_span);
    tcase_add_test(tc, test_hostile_client_refused_flood);
    tcase_add_test(tc, test_hostile_client_per_uid_cap);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
