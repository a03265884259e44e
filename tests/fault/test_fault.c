/*
 * Fault tests (docs/failure-contract.md) against a real mc-agent: a writer killed mid-put, and a
 * client that truncates or scribbles over its own region.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include <mc/mc.h>

#include "libmc/tool.h"
#include "shm/ring.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* a shared helper header */
#include "tests/integration/t_agent.h"
#pragma GCC diagnostic pop

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
    ck_assert_ptr_nonnull(v);
    x = (uint64_t)json_integer_value(v);
    json_decref(o);
    free(js);
    return x;
}

/* The client's process is SIGKILLed while its 48 MiB put is being copied (several times,
 * at different moments): nobody ever reads the partial object, and its space is back within
 * a second of each kill. */
START_TEST(test_fault_writer_crash_mid_put)
{
    struct t_agent a;
    mc_client_t *c;
    size_t big = 48u << 20, len;
    int round, kills = 0;

    t_agent_start(&a, "128M", NULL);
    ck_assert_int_eq(mc_connect(a.sock, &c), 0);
    for (round = 0; round < 8; round++) {
        uint64_t deadline, wait_until;
        int status;
        pid_t pid;

        fflush(NULL);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            mc_client_t *w;
            char *buf = malloc(big);

            if (buf == NULL || mc_connect(a.sock, &w) != 0)
                _exit(2);
            memset(buf, 0x5a, big);
            mc_put(w, "victim", buf, big, NULL);
            _exit(0); /* a put that finished before the kill: the round is retried */
        }
        /* kill it once the put holds space: a little later each round */
        deadline = t_now_ms() + 10000;
        while (t_stat_u64(c, "used_bytes") == 0 && t_now_ms() < deadline)
            t_poll_pause();
        wait_until = t_now_ms() + (uint64_t)round;
        while (t_now_ms() < wait_until)
            t_poll_pause();
        kill(pid, SIGKILL);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status) || mc_exist(c, "victim") == 1) {
            /* the put was published before the kill: then it must be whole */
            char *out = malloc(big);

            ck_assert_ptr_nonnull(out);
            ck_assert_int_eq(mc_get(c, "victim", out, big, &len), 0);
            ck_assert_uint_eq(len, big);
            for (size_t i = 0; i < big; i++)
                if (out[i] != 0x5a)
                    ck_abort_msg("byte %zu of a published object is wrong", i);
            free(out);
            ck_assert_int_eq(mc_remove(c, "victim"), 0);
            continue;
        }
        kills++;
        deadline = t_now_ms() + 1000;
        while (t_stat_u64(c, "used_bytes") != 0 && t_now_ms() < deadline)
            t_poll_pause();
        ck_assert_uint_eq(t_stat_u64(c, "used_bytes"), 0);
        ck_assert_int_eq(mc_exist(c, "victim"), 0);
        ck_assert_int_eq(mc_get(c, "victim", NULL, 0, &len), MC_ERR_NOT_FOUND);
    }
    ck_assert_int_gt(kills, 0); /* else nothing was tested */
    mc_close(c);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

/* A raw client: the handshake by hand, then its region is ours to abuse. */
struct t_raw {
    int sock;
    int region_fd;
    uint64_t region_size;
    uint8_t *base;
};

static void t_raw_connect(const char *path, struct t_raw *r)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct mc_shm_hello h = {.magic = MC_SHM_MAGIC, .abi = MC_SHM_ABI};
    struct mc_shm_welcome w;
    union {
        struct cmsghdr hdr;
        char buf[CMSG_SPACE(sizeof(int) * (MC_SHM_MAX_SEGS + 1))];
    } ctl;
    struct iovec iov = {.iov_base = &w, .iov_len = sizeof(w)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *cm;
    int fds[MC_SHM_MAX_SEGS + 1], nfds, i;

    strcpy(sa.sun_path, path);
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY); /* as libmc does for its agent */
    r->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(r->sock, 0);
    ck_assert_int_eq(connect(r->sock, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(send(r->sock, &h, sizeof(h), 0), sizeof(h));
    ck_assert_int_eq(recvmsg(r->sock, &msg, MSG_CMSG_CLOEXEC), sizeof(w));
    ck_assert_int_eq(w.status, 0);
    cm = CMSG_FIRSTHDR(&msg);
    ck_assert_ptr_nonnull(cm);
    nfds = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    ck_assert_int_ge(nfds, 2);
    memcpy(fds, CMSG_DATA(cm), sizeof(int) * (size_t)nfds);
    for (i = 1; i < nfds; i++)
        close(fds[i]);
    r->region_fd = fds[0];
    r->region_size = w.region_size;
    r->base = mmap(NULL, r->region_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->region_fd, 0);
    ck_assert_ptr_ne(r->base, MAP_FAILED);
}

/* true once the agent closed our socket (it cut us off) */
static bool t_raw_cut_off(struct t_raw *r, uint64_t deadline)
{
    char b;

    while (t_now_ms() < deadline) {
        ssize_t n = recv(r->sock, &b, 1, MSG_DONTWAIT);

        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return true;
        t_poll_pause();
    }
    return false;
}

static void t_ring_doorbell(struct mc_shm_ring_ctrl *c)
{
    atomic_fetch_add(&c->futex, 1);
    syscall(SYS_futex, &c->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void t_store_still_serves(const char *sock)
{
    mc_client_t *c;
    char out[16];
    size_t len;

    ck_assert_int_eq(mc_connect(sock, &c), 0);
    ck_assert_int_eq(mc_put(c, "alive", "still here", 10, NULL), 0);
    ck_assert_int_eq(mc_get(c, "alive", out, sizeof(out), &len), 0);
    ck_assert_uint_eq(len, 10);
    ck_assert_int_eq(memcmp(out, "still here", 10), 0);
    ck_assert_int_eq(mc_remove(c, "alive"), 0);
    mc_close(c);
}

START_TEST(test_fault_client_truncates_region)
{
    struct t_agent a;
    struct t_raw r;
    struct mc_shm_hdr *hdr;
    struct mc_shm_ring_ctrl *sq;
    uint64_t x = 0x243F6A8885A308D3ull, i;

    t_agent_start(&a, "64M", NULL);

    /* 1: the region is sealed: it cannot be shrunk or grown under the agent */
    t_raw_connect(a.sock, &r);
    ck_assert_int_ne(ftruncate(r.region_fd, 0), 0);
    ck_assert_int_ne(ftruncate(r.region_fd, (off_t)r.region_size * 2), 0);

    /* 2: garbage SQEs and keys, a tail no producer could write, a scribbled header */
    hdr = (struct mc_shm_hdr *)r.base;
    sq = (struct mc_shm_ring_ctrl *)(r.base + hdr->sq_ctrl_off);
    for (i = hdr->sqes_off; i < hdr->cq_ctrl_off; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(r.base + i, &x, 8);
    }
    atomic_store(&sq->tail, atomic_load(&sq->head) + 100000u);
    memset(r.base, 0xff, 256); /* the header: the agent must not read it back */
    t_ring_doorbell(sq);
    ck_assert(t_raw_cut_off(&r, t_now_ms() + 5000));
    t_store_still_serves(a.sock);
    munmap(r.base, r.region_size);
    close(r.region_fd);
    close(r.sock);

    /* 3: in-range garbage: every SQE a random op with random fields */
    t_raw_connect(a.sock, &r);
    hdr = (struct mc_shm_hdr *)r.base;
    sq = (struct mc_shm_ring_ctrl *)(r.base + hdr->sq_ctrl_off);
    for (i = 0; i < hdr->sq_entries; i++) {
        struct mc_sqe *s = (struct mc_sqe *)(r.base + hdr->sqes_off) + i;
        uint64_t *w = (uint64_t *)s;

        for (int k = 0; k < 8; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w[k] = x;
        }
        s->opcode = (uint8_t)(x % (MC_OP__COUNT + 2));
    }
    atomic_store(&sq->tail, atomic_load(&sq->head) + hdr->max_inflight);
    t_ring_doorbell(sq);
    /* it is answered (errors) or cut off; either way the agent lives */
    (void)t_raw_cut_off(&r, t_now_ms() + 300);
    ck_assert_int_eq(kill(a.pid, 0), 0);
    t_store_still_serves(a.sock);
    munmap(r.base, r.region_size);
    close(r.region_fd);
    close(r.sock);

    /* 4: the client unmaps and closes everything, then goes: the agent cleans up */
    t_raw_connect(a.sock, &r);
    munmap(r.base, r.region_size);
    close(r.region_fd);
    close(r.sock);
    t_store_still_serves(a.sock);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

/* A client that keeps ringing with nothing submitted is cut off. */
START_TEST(test_fault_client_idle_doorbell_storm_disconnected)
{
    const char *extra[] = {"--set", "idle_wakeups_max=1000", "--set", "agent_spin_us=0", NULL};
    struct t_agent a;
    struct t_raw r;
    struct mc_shm_hdr *hdr;
    struct mc_shm_ring_ctrl *sq;
    uint64_t deadline;
    bool cut = false;

    t_agent_start(&a, "64M", extra);
    t_raw_connect(a.sock, &r);
    hdr = (struct mc_shm_hdr *)r.base;
    sq = (struct mc_shm_ring_ctrl *)(r.base + hdr->sq_ctrl_off);
    deadline = t_now_ms() + 10000;
    while (!cut && t_now_ms() < deadline) {
        for (int i = 0; i < 200; i++)
            t_ring_doorbell(sq);
        cut = t_raw_cut_off(&r, t_now_ms() + 1);
    }
    ck_assert(cut);
    t_store_still_serves(a.sock);
    close(r.sock);
    munmap(r.base, r.region_size);
    close(r.region_fd);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST


/* Submit one SQE (with its key) on a raw client and wait for its CQE. */
static struct mc_cqe t_raw_op(struct t_raw *r, const struct mc_sqe *sqe, const char *key)
{
    struct mc_shm_hdr *hdr = (struct mc_shm_hdr *)r->base;
    struct mc_shm_ring_ctrl *sq = (struct mc_shm_ring_ctrl *)(r->base + hdr->sq_ctrl_off);
    struct mc_shm_ring_ctrl *cq = (struct mc_shm_ring_ctrl *)(r->base + hdr->cq_ctrl_off);
    uint32_t tail = atomic_load(&sq->tail), head = atomic_load(&cq->head);
    uint32_t idx = tail & (hdr->sq_entries - 1);
    uint64_t deadline = t_now_ms() + 5000;
    struct mc_cqe e;

    memcpy((struct mc_sqe *)(r->base + hdr->sqes_off) + idx, sqe, sizeof(*sqe));
    memcpy(r->base + hdr->keys_off + (uint64_t)idx * MC_SHM_KEY_SLOT, key, sqe->key_len);
    atomic_store(&sq->tail, tail + 1);
    t_ring_doorbell(sq);
    while (atomic_load(&cq->tail) == head) {
        ck_assert_msg(t_now_ms() < deadline, "no answer from the agent");
        t_poll_pause();
    }
    e = ((struct mc_cqe *)(r->base + hdr->cqes_off))[head & (hdr->cq_entries - 1)];
    atomic_store(&cq->head, head + 1);
    return e;
}

/* A put of a key another client is writing is MC_ERR_BUSY; once that writer is gone (its
 * put revoked by the agent), the same put succeeds at once. */
START_TEST(test_fault_put_on_key_being_written_busy_until_writer_gone)
{
    struct t_agent a;
    struct t_raw r;
    struct mc_sqe sqe;
    struct mc_cqe e;
    mc_client_t *c;
    char val[100], out[100];
    size_t len;
    uint64_t deadline;
    int err;

    t_agent_start(&a, "64M", NULL);
    t_raw_connect(a.sock, &r);
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_PUT_START;
    sqe.key_len = 4;
    sqe.user_data = 7;
    sqe.arg0 = 3u << 20;
    e = t_raw_op(&r, &sqe, "hold");
    ck_assert_int_eq(e.res, 0);
    ck_assert_uint_eq(e.user_data, 7);

    memset(val, 'v', sizeof(val));
    ck_assert_int_eq(mc_connect(a.sock, &c), 0);
    ck_assert_int_eq(mc_put(c, "hold", val, sizeof(val), NULL), MC_ERR_BUSY);
    ck_assert_int_eq(mc_exist(c, "hold"), 0);

    /* the writer dies with its put open */
    munmap(r.base, r.region_size);
    close(r.region_fd);
    close(r.sock);
    deadline = t_now_ms() + 1000;
    while ((err = mc_put(c, "hold", val, sizeof(val), NULL)) == MC_ERR_BUSY &&
           t_now_ms() < deadline)
        t_poll_pause();
    ck_assert_int_eq(err, 0);
    ck_assert_int_eq(mc_get(c, "hold", out, sizeof(out), &len), 0);
    ck_assert_uint_eq(len, sizeof(val));
    ck_assert_int_eq(memcmp(out, val, sizeof(val)), 0);
    mc_close(c);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

/* A read whose answer comes after its deadline ends with MC_ERR_TIMEOUT, and the caller's
 * buffer is never written afterwards: the late answer is discarded (test-only agent knob
 * --test-fault get_delay_ms holds every GET answer back). */
START_TEST(test_fault_read_timeout_buffer_not_written_after_final)
{
    const char *extra[] = {"--test-fault", "get_delay_ms=400", NULL};
    struct t_agent a;
    mc_client_t *c;
    char val[4096], buf[4096], canary[4096];
    size_t len = 12345;
    uint64_t deadline;
    char *js = NULL;
    size_t jlen;

    t_agent_start(&a, "64M", extra);
    setenv("MC_OP_TIMEOUT_MS", "100", 1);
    ck_assert_int_eq(mc_connect(a.sock, &c), 0);
    unsetenv("MC_OP_TIMEOUT_MS");
    memset(val, 'v', sizeof(val));
    memset(canary, 0xc5, sizeof(canary));
    memcpy(buf, canary, sizeof(buf));
    ck_assert_int_eq(mc_put(c, "slow", val, sizeof(val), NULL), 0);
    ck_assert_int_eq(mc_get(c, "slow", buf, sizeof(buf), &len), MC_ERR_TIMEOUT);
    ck_assert_int_eq(memcmp(buf, canary, sizeof(buf)), 0);
    /* wait until the agent has sent the late answer, and this client has reaped it */
    deadline = t_now_ms() + 5000;
    for (;;) {
        ck_assert_int_eq(mc_client_stats_json(c, &js, &jlen), 0);
        if (strstr(js, "\"test_delayed_answers\"") != NULL)
            break;
        free(js);
        js = NULL;
        ck_assert_msg(t_now_ms() < deadline, "the delayed answer never came");
        t_poll_pause();
    }
    free(js);
    ck_assert_int_eq(mc_exist(c, "slow"), 1);
    ck_assert_int_eq(memcmp(buf, canary, sizeof(buf)), 0);
    mc_close(c);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

static void t_send_arena(struct t_raw *r, uint32_t id, int fd, uint64_t size)
{
    struct mc_shm_arena_msg m = {.magic = MC_SHM_MAGIC, .type = MC_SHM_ARENA_ADD,
                                 .arena_id = id, .size = size};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    ck_assert_int_eq(sendmsg(r->sock, &msg, 0), sizeof(m));
}

/* PUT from a registered arena and from the client's own memory (process_vm_readv), read
 * back through libmc; an arena that is not sealed gets its client cut off. */
START_TEST(test_fault_arena_and_user_memory_sources_checked)
{
    struct t_agent a;
    struct t_raw r, bad;
    struct mc_sqe sqe;
    struct mc_cqe e;
    mc_client_t *c;
    uint8_t *arena, *user, out[8192];
    size_t len;
    int fd, i;

    t_agent_start(&a, "64M", NULL);
    t_raw_connect(a.sock, &r);
    fd = memfd_create("t-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    arena = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(arena, MAP_FAILED);
    for (i = 0; i < (1 << 20); i++)
        arena[i] = (uint8_t)(i * 13 + 1);
    t_send_arena(&r, 3, fd, 1 << 20);

    /* sent right after the registration: the agent reads the socket first */
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_PUT;
    sqe.key_len = 2;
    sqe.user_data = 1;
    sqe.flags = MC_SQE_F_ARENA;
    sqe.data_off = (UINT64_C(3) << MC_SHM_ARENA_SHIFT) | 101; /* an odd offset */
    sqe.data_len = 5000;
    e = t_raw_op(&r, &sqe, "ar");
    ck_assert_int_eq(e.res, 0);
    /* past the arena's end: refused, the client stays */
    sqe.data_off = (UINT64_C(3) << MC_SHM_ARENA_SHIFT) | ((1 << 20) - 10);
    e = t_raw_op(&r, &sqe, "a2");
    ck_assert_int_eq(e.res, MC_ERR_INVALID);
    /* an arena never registered */
    sqe.data_off = UINT64_C(9) << MC_SHM_ARENA_SHIFT;
    e = t_raw_op(&r, &sqe, "a3");
    ck_assert_int_eq(e.res, MC_ERR_INVALID);

    user = malloc(3 << 20);
    for (i = 0; i < (3 << 20); i++)
        user[i] = (uint8_t)(i * 7 + 3);
    sqe.flags = MC_SQE_F_USER;
    sqe.data_off = (uint64_t)(uintptr_t)(user + 1);
    sqe.data_len = (3 << 20) - 1;
    e = t_raw_op(&r, &sqe, "us");
    ck_assert_int_eq(e.res, 0);
    sqe.data_off = 16; /* not mapped in this process */
    sqe.data_len = 100;
    e = t_raw_op(&r, &sqe, "u2");
    ck_assert_int_eq(e.res, MC_ERR_INVALID);

    ck_assert_int_eq(mc_connect(a.sock, &c), 0);
    ck_assert_int_eq(mc_get(c, "ar", out, sizeof(out), &len), 0);
    ck_assert_uint_eq(len, 5000);
    ck_assert_int_eq(memcmp(out, arena + 101, 5000), 0);
    {
        uint8_t *big = malloc(3 << 20);

        ck_assert_int_eq(mc_get(c, "us", big, 3 << 20, &len), 0);
        ck_assert_uint_eq(len, (3 << 20) - 1);
        ck_assert_int_eq(memcmp(big, user + 1, len), 0);
        free(big);
    }
    ck_assert_int_eq(mc_exist(c, "a2"), 0);
    free(user);

    /* an SQE whose deadline passed while it waited in the ring: dropped unread */
    sqe.flags = MC_SQE_F_USER;
    sqe.key_len = 4;
    sqe.data_off = (uint64_t)(uintptr_t)out;
    sqe.data_len = 100;
    sqe.deadline_ms = (uint32_t)(t_now_ms() - 5);
    e = t_raw_op(&r, &sqe, "late");
    ck_assert_int_eq(e.res, MC_ERR_TIMEOUT);
    ck_assert_int_eq(mc_exist(c, "late"), 0);
    sqe.deadline_ms = (uint32_t)(t_now_ms() + 5000);
    e = t_raw_op(&r, &sqe, "late");
    ck_assert_int_eq(e.res, 0);
    ck_assert_int_eq(mc_exist(c, "late"), 1);

    /* an unsealed arena: the client is cut off, the agent lives on */
    t_raw_connect(a.sock, &bad);
    {
        int ufd = memfd_create("t-unsealed", MFD_CLOEXEC);

        ck_assert_int_eq(ftruncate(ufd, 4096), 0);
        t_send_arena(&bad, 0, ufd, 4096);
        close(ufd);
    }
    ck_assert(t_raw_cut_off(&bad, t_now_ms() + 5000));
    t_store_still_serves(a.sock);

    mc_close(c);
    munmap(arena, 1 << 20);
    close(fd);
    close(r.sock);
    close(bad.sock);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

/* Put SQEs on a raw client's ring without waiting (one doorbell for all). */
static void t_raw_submit(struct t_raw *r, const struct mc_sqe *sqes, const char *const *keys,
                         int n)
{
    struct mc_shm_hdr *hdr = (struct mc_shm_hdr *)r->base;
    struct mc_shm_ring_ctrl *sq = (struct mc_shm_ring_ctrl *)(r->base + hdr->sq_ctrl_off);
    uint32_t tail = atomic_load(&sq->tail);

    for (int i = 0; i < n; i++) {
        uint32_t idx = (tail + (uint32_t)i) & (hdr->sq_entries - 1);

        memcpy((struct mc_sqe *)(r->base + hdr->sqes_off) + idx, &sqes[i], sizeof(sqes[i]));
        if (sqes[i].key_len > 0)
            memcpy(r->base + hdr->keys_off + (uint64_t)idx * MC_SHM_KEY_SLOT, keys[i],
                   sqes[i].key_len);
    }
    atomic_store(&sq->tail, tail + (uint32_t)n);
    t_ring_doorbell(sq);
}

/* Wait for n CQEs on a raw client; returns them in order of arrival. */
static void t_raw_reap(struct t_raw *r, struct mc_cqe *out, int n, uint64_t deadline)
{
    struct mc_shm_hdr *hdr = (struct mc_shm_hdr *)r->base;
    struct mc_shm_ring_ctrl *cq = (struct mc_shm_ring_ctrl *)(r->base + hdr->cq_ctrl_off);

    for (int i = 0; i < n; i++) {
        uint32_t head = atomic_load(&cq->head);

        while (atomic_load(&cq->tail) == head) {
            ck_assert_msg(t_now_ms() < deadline, "only %d of %d answers came", i, n);
            t_poll_pause();
        }
        out[i] = ((struct mc_cqe *)(r->base + hdr->cqes_off))[head & (hdr->cq_entries - 1)];
        atomic_store(&cq->head, head + 1);
    }
}

/* A one-shot PUT's internal handle cannot be named by PUT_DATA/END/ABORT (the agent used
 * to crash, or write into a published object, when a PUT_DATA raced the PUT's copy). */
START_TEST(test_fault_oneshot_put_handle_not_nameable)
{
    struct t_agent a;
    struct t_raw r;
    struct mc_sqe sqe[4];
    struct mc_cqe e[4];
    const char *keys[4] = {"victim", NULL, NULL, NULL};
    mc_client_t *c;
    char out[4096];
    size_t len;
    int i;

    t_agent_start(&a, "64M", NULL);
    t_raw_connect(a.sock, &r);
    memset(sqe, 0, sizeof(sqe));
    sqe[0].opcode = MC_OP_PUT;
    sqe[0].key_len = 6;
    sqe[0].data_len = 4096;
    sqe[0].user_data = 1;
    for (i = 1; i < 4; i++) {
        sqe[i].arg0 = 0; /* the slot index the PUT took */
        sqe[i].user_data = (uint64_t)i + 1;
    }
    sqe[1].opcode = MC_OP_PUT_DATA;
    sqe[1].data_len = 4096;
    sqe[2].opcode = MC_OP_PUT_END;
    sqe[3].opcode = MC_OP_PUT_ABORT;
    t_raw_submit(&r, sqe, keys, 4);
    t_raw_reap(&r, e, 4, t_now_ms() + 5000);
    for (i = 0; i < 4; i++) {
        if (e[i].user_data == 1)
            ck_assert_int_eq(e[i].res, 0);
        else if (e[i].user_data == 2) /* PUT_DATA: no such open put */
            ck_assert_int_eq(e[i].res, MC_ERR_INVALID);
        else
            ck_assert_int_eq(e[i].res, MC_ERR_NOT_FOUND);
    }
    ck_assert_int_eq(kill(a.pid, 0), 0);
    ck_assert_int_eq(mc_connect(a.sock, &c), 0);
    ck_assert_int_eq(mc_get(c, "victim", out, sizeof(out), &len), 0);
    ck_assert_uint_eq(len, 4096);
    mc_close(c);
    close(r.sock);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

/* SIGTERM: the agent tells its clients it is closing, finishes the copies under way (every
 * piece answered), then exits 0 (docs/failure-contract.md). */
START_TEST(test_fault_sigterm_finishes_inflight_ops)
{
    const char *extra[] = {"--set", "copy_slice=4096", NULL};
    struct t_agent a;
    struct t_raw r;
    struct mc_sqe sqe[8];
    struct mc_cqe e[8], st;
    const char *keys[8] = {NULL};
    struct mc_shm_hdr *hdr;
    int i, status;

    t_agent_start(&a, "64M", extra);
    t_raw_connect(a.sock, &r);
    hdr = (struct mc_shm_hdr *)r.base;
    memset(sqe, 0, sizeof(sqe));
    sqe[0].opcode = MC_OP_PUT_START;
    sqe[0].key_len = 4;
    sqe[0].arg0 = 4u << 20;
    sqe[0].user_data = 100;
    st = t_raw_op(&r, &sqe[0], "big!");
    ck_assert_int_eq(st.res, 0);
    for (i = 0; i < 4; i++) {
        memset(&sqe[i], 0, sizeof(sqe[i]));
        sqe[i].opcode = MC_OP_PUT_DATA;
        sqe[i].arg0 = st.lease_id;
        sqe[i].arg1 = (uint64_t)i << 20;
        sqe[i].data_off = (uint64_t)i << 20;
        sqe[i].data_len = 1u << 20;
        sqe[i].user_data = (uint64_t)i + 1;
    }
    t_raw_submit(&r, sqe, keys, 4);
    kill(a.pid, SIGTERM);
    t_raw_reap(&r, e, 4, t_now_ms() + 5000);
    for (i = 0; i < 4; i++)
        ck_assert_int_eq(e[i].res, 0);
    ck_assert_uint_eq(atomic_load(&hdr->agent_state), 1);
    ck_assert(t_agent_reap(&a, t_now_ms() + 5000, &status));
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    a.pid = 0;
    close(r.sock);
    t_agent_stop(&a);
}
END_TEST

/* A client whose eventfd would block (counter at its maximum, blocking mode: the client
 * owns both) must not stall the agent: the write goes through io_uring. */
START_TEST(test_fault_blocking_eventfd_does_not_stall_agent)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct mc_shm_hello h = {.magic = MC_SHM_MAGIC, .abi = MC_SHM_ABI,
                             .flags = MC_SHM_HELLO_F_EVENTFD};
    struct mc_shm_welcome w;
    union {
        struct cmsghdr hdr;
        char buf[CMSG_SPACE(sizeof(int) * (MC_SHM_MAX_SEGS + 1))];
    } ctl;
    struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                         .msg_controllen = CMSG_SPACE(sizeof(int))};
    struct cmsghdr *cm;
    struct t_agent a;
    struct t_raw r;
    struct mc_sqe sqe;
    struct mc_shm_hdr *hdr;
    struct mc_shm_ring_ctrl *cq;
    uint64_t full = UINT64_C(0xfffffffffffffffe);
    int efd, fds[MC_SHM_MAX_SEGS + 1], nfds, status;

    t_agent_start(&a, "64M", NULL);
    efd = eventfd(0, EFD_CLOEXEC); /* blocking */
    ck_assert_int_ge(efd, 0);
    ck_assert_int_eq(write(efd, &full, sizeof(full)), sizeof(full));
    strcpy(sa.sun_path, a.sock);
    r.sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    ck_assert_int_eq(connect(r.sock, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &efd, sizeof(int));
    ck_assert_int_eq(sendmsg(r.sock, &msg, 0), sizeof(h));
    iov.iov_base = &w;
    iov.iov_len = sizeof(w);
    msg.msg_controllen = sizeof(ctl.buf);
    ck_assert_int_eq(recvmsg(r.sock, &msg, MSG_CMSG_CLOEXEC), sizeof(w));
    ck_assert_int_eq(w.status, 0);
    cm = CMSG_FIRSTHDR(&msg);
    nfds = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    memcpy(fds, CMSG_DATA(cm), sizeof(int) * (size_t)nfds);
    for (int i = 1; i < nfds; i++)
        close(fds[i]);
    r.region_fd = fds[0];
    r.region_size = w.region_size;
    r.base = mmap(NULL, r.region_size, PROT_READ | PROT_WRITE, MAP_SHARED, r.region_fd, 0);
    ck_assert_ptr_ne(r.base, MAP_FAILED);
    hdr = (struct mc_shm_hdr *)r.base;
    cq = (struct mc_shm_ring_ctrl *)(r.base + hdr->cq_ctrl_off);
    atomic_store(&cq->need_wakeup, 1); /* ask for wake-ups: the agent writes the eventfd */
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_NOP;
    sqe.user_data = 9;
    ck_assert_int_eq(t_raw_op(&r, &sqe, "").res, 0);
    /* another client is still served, and the agent still stops on SIGTERM */
    t_store_still_serves(a.sock);
    kill(a.pid, SIGTERM);
    ck_assert(t_agent_reap(&a, t_now_ms() + 5000, &status));
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    a.pid = 0;
    t_agent_stop(&a);
    close(efd);
    close(r.sock);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fault");
    TCase *tc = tcase_create("fault");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fault_writer_crash_mid_put);
    tcase_add_test(tc, test_fault_client_truncates_region);
    tcase_add_test(tc, test_fault_client_idle_doorbell_storm_disconnected);
    tcase_add_test(tc, test_fault_put_on_key_being_written_busy_until_writer_gone);
    tcase_add_test(tc, test_fault_read_timeout_buffer_not_written_after_final);
    tcase_add_test(tc, test_fault_arena_and_user_memory_sources_checked);
    tcase_add_test(tc, test_fault_oneshot_put_handle_not_nameable);
    tcase_add_test(tc, test_fault_sigterm_finishes_inflight_ops);
    tcase_add_test(tc, test_fault_blocking_eventfd_does_not_stall_agent);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
