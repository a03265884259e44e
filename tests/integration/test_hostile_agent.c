/*
 * libmc against a scripted fake agent (a thread of the test) that breaks the rules on
 * purpose: bad welcomes, wrong fd counts, corrupt object bytes, expired leases, locations
 * outside the segment, CQEs for no op, a closing agent, silence. What the real agent never
 * does, so test_api cannot reach it. The fake agent uses the shm layer as the real one does
 * (mc_shm_region_create, sealed memfd segments) and polls the SQ instead of sleeping.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include <mc/mc.h>

#include "shm/doorbell.h"
#include "shm/memfd.h"
#include "shm/region.h"
#include "shm/ring.h"

#define MIB      (1024u * 1024u)
#define SEG_SIZE (4 * MIB)
#define OBJ_OFF  4096u
#define OBJ_LEN  (MIB + 5000) /* two checksum chunks */
#define LEASE_ID 7u

enum fake_mode {
    FAKE_OK,            /* a well-behaved agent with one object, "obj" */
    FAKE_BAD_MAGIC,     /* welcome with the wrong magic */
    FAKE_DENIED,        /* welcome status MC_ERR_DENIED, no fds */
    FAKE_DENIED_UNREAD, /* the same, closing with our hello unread (ECONNRESET first) */
    FAKE_MISSING_FD,    /* nsegs 1 but only the region fd */
    FAKE_HANGUP,        /* closes without a welcome */
    FAKE_SILENT,        /* never answers the hello */
    FAKE_CORRUPT,       /* the object's second chunk has a flipped byte */
    FAKE_BAD_TRAILER,   /* chunk sums right, object checksum wrong */
    FAKE_EXPIRED,       /* GET answers a lease deadline already past */
    FAKE_BAD_LOCATION,  /* GET answers an offset past the segment */
    FAKE_BAD_USER_DATA, /* every CQE carries a user_data no op has */
    FAKE_NO_ANSWER,     /* takes SQEs, never completes them */
};

struct fake {
    enum fake_mode mode;
    char dir[128];
    char path[200];
    int lfd;
    pthread_t th;
    atomic_bool stop;
    atomic_int releases; /* RELEASE SQEs seen with the right lease id */
    atomic_int sqes;     /* SQEs taken */
    struct mc_shm_region *r;
    int seg_fd, seg_ro;
    uint8_t *seg;
};

static struct fake g_fake;

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void pause_short(void)
{
    struct timespec ts = {0, 100 * 1000};

    nanosleep(&ts, NULL);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the DIR's own fd */
}

/* Write the object (pattern bytes) and its checksum trailer into the segment. */
static void fake_store_object(struct fake *f)
{
    uint8_t *obj = f->seg + OBJ_OFF;
    uint64_t n = mc_shm_nchunks(OBJ_LEN), sums[8];
    uint8_t *tr = obj + mc_shm_trailer_off(OBJ_LEN);

    for (uint32_t i = 0; i < OBJ_LEN; i++)
        obj[i] = (uint8_t)(i * 7 + 3);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = OBJ_LEN - i * MC_SHM_CHUNK < MC_SHM_CHUNK ? OBJ_LEN - i * MC_SHM_CHUNK
                                                                 : MC_SHM_CHUNK;
        sums[i] = XXH3_64bits(obj + i * MC_SHM_CHUNK, len);
    }
    sums[n] = XXH3_64bits(sums, n * 8);
    if (f->mode == FAKE_BAD_TRAILER)
        sums[n] ^= 1;
    memcpy(tr, sums, (n + 1) * 8);
    if (f->mode == FAKE_CORRUPT)
        obj[MC_SHM_CHUNK + 10] ^= 0x40;
}

static int send_welcome(int s, const struct mc_shm_welcome *w, const int *fds, int nfds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = (void *)w, .iov_len = sizeof(*w)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;

    if (nfds > 0) {
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    }
    return sendmsg(s, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof(*w) ? 0 : -1;
}

static void fake_answer(struct fake *f, const struct mc_sqe *s, const char *key)
{
    struct mc_shm_region *r = f->r;
    uint32_t tail = atomic_load(&r->cq->tail);
    struct mc_cqe e;

    memset(&e, 0, sizeof(e));
    e.user_data = s->user_data;
    switch (s->opcode) {
    case MC_OP_RELEASE:
        if (s->arg0 == LEASE_ID)
            atomic_fetch_add(&f->releases, 1);
        if (s->flags & MC_SQE_F_NO_CQE)
            return;
        break;
    case MC_OP_GET:
        if (strcmp(key, "obj") != 0) {
            e.res = MC_ERR_NOT_FOUND;
            break;
        }
        e.size = OBJ_LEN;
        e.version = 1;
        e.loc_seg = 0;
        e.loc_off = f->mode == FAKE_BAD_LOCATION ? SEG_SIZE - 100 : OBJ_OFF;
        e.lease_id = LEASE_ID;
        e.deadline_ms = f->mode == FAKE_EXPIRED ? now_ms() - 1 : now_ms() + 10000;
        break;
    case MC_OP_EXIST:
        e.res = 1;
        break;
    default:
        e.res = 0;
        break;
    }
    if (f->mode == FAKE_BAD_USER_DATA)
        e.user_data ^= UINT64_C(0x5555) << 32;
    *mc_shm_cqe_at(r, tail) = e;
    mc_ring_publish_tail(r->cq, tail + 1);
    mc_shm_doorbell_ring(r->cq);
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    struct mc_shm_welcome w;
    struct mc_shm_hello h;
    struct mc_shm_layout l;
    char key[MC_SHM_KEY_SLOT + 1];
    struct mc_sqe sqe;
    int s, fds[2];
    uint32_t head;

    s = accept(f->lfd, NULL, NULL);
    if (s < 0)
        return NULL;
    if (f->mode == FAKE_HANGUP) {
        close(s);
        return NULL;
    }
    if (f->mode == FAKE_DENIED_UNREAD) {
        struct pollfd p = {.fd = s, .events = POLLIN};

        /* the hello is queued, unread, when we answer and close: as the real agent does
         * when SO_PEERCRED refuses a peer */
        (void)poll(&p, 1, 5000);
        memset(&w, 0, sizeof(w));
        w.magic = MC_SHM_MAGIC;
        w.abi = MC_SHM_ABI;
        w.status = MC_ERR_DENIED;
        send_welcome(s, &w, NULL, 0);
        goto out;
    }
    if (recv(s, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
        goto out;
    if (f->mode == FAKE_SILENT) {
        while (!atomic_load(&f->stop))
            pause_short();
        goto out;
    }
    memset(&w, 0, sizeof(w));
    w.magic = f->mode == FAKE_BAD_MAGIC ? MC_SHM_MAGIC + 1 : MC_SHM_MAGIC;
    w.abi = MC_SHM_ABI;
    if (f->mode == FAKE_DENIED) {
        w.status = MC_ERR_DENIED;
        send_welcome(s, &w, NULL, 0);
        goto out;
    }
    if (mc_shm_layout_init(&l, 8, 8, MIB, 2, 8) != 0 ||
        mc_shm_region_create("fake-region", &l, 42, &f->r) != 0 ||
        mc_shm_memfd_create("fake-seg", SEG_SIZE, false, &f->seg_fd, NULL) != 0 ||
        mc_shm_map(f->seg_fd, SEG_SIZE, true, (void **)&f->seg) != 0 ||
        mc_shm_memfd_seal_size(f->seg_fd) != 0 ||
        mc_shm_fd_reopen_ro(f->seg_fd, &f->seg_ro) != 0)
        goto out;
    fake_store_object(f);
    w.client_id = 42;
    w.nsegs = 1;
    w.region_size = f->r->lay.region_size;
    w.seg_size[0] = SEG_SIZE;
    fds[0] = f->r->fd;
    fds[1] = f->seg_ro;
    if (send_welcome(s, &w, fds, f->mode == FAKE_MISSING_FD ? 1 : 2) != 0)
        goto out;
    if (f->mode == FAKE_BAD_MAGIC || f->mode == FAKE_MISSING_FD)
        goto out;

    /* serve the SQ by polling */
    head = 0;
    while (!atomic_load(&f->stop)) {
        uint32_t tail = atomic_load_explicit(&f->r->sq->tail, memory_order_acquire);

        if (tail == head) {
            pause_short();
            continue;
        }
        /* copy the SQE and its key before publishing the head frees their slots */
        sqe = *mc_shm_sqe_at(f->r, head);
        memset(key, 0, sizeof(key));
        if (sqe.key_len <= MC_SHM_KEY_SLOT)
            memcpy(key, mc_shm_key_slot(f->r, head), sqe.key_len);
        head++;
        mc_ring_publish_head(f->r->sq, head);
        atomic_fetch_add(&f->sqes, 1);
        if (f->mode != FAKE_NO_ANSWER)
            fake_answer(f, &sqe, key);
    }
out:
    close(s);
    return NULL;
}

static void fake_start(enum fake_mode mode)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    struct fake *f = &g_fake;

    memset(f, 0, sizeof(*f));
    f->mode = mode;
    f->seg_fd = f->seg_ro = -1;
    snprintf(f->dir, sizeof(f->dir), "/tmp/mc-fake-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    ck_assert_int_lt(snprintf(f->path, sizeof(f->path), "%s/a.sock", f->dir),
                     (int)sizeof(f->path));
    ck_assert_int_lt(snprintf(a.sun_path, sizeof(a.sun_path), "%s", f->path),
                     (int)sizeof(a.sun_path));
    f->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(f->lfd, 0);
    ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(f->lfd, 4), 0);
    ck_assert_int_eq(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(void)
{
    struct fake *f = &g_fake;

    atomic_store(&f->stop, true);
    shutdown(f->lfd, SHUT_RDWR);
    pthread_join(f->th, NULL);
    close(f->lfd);
    unlink(f->path);
    rmdir(f->dir);
    mc_shm_region_destroy(f->r);
    if (f->seg != NULL)
        munmap(f->seg, SEG_SIZE);
    if (f->seg_fd >= 0)
        close(f->seg_fd);
    if (f->seg_ro >= 0)
        close(f->seg_ro);
}

static void connect_fails(enum fake_mode mode, int want)
{
    mc_client_t *c = NULL;
    int before, after;

    fake_start(mode);
    before = count_fds();
    ck_assert_int_eq(mc_connect(g_fake.path, &c), want);
    ck_assert_ptr_null(c);
    fake_stop();
    after = count_fds();
    /* the fake's own fds (listener, region, segment) are in `before` or closed by now;
     * what libmc received must all be closed: no more fds than before */
    ck_assert_int_le(after, before);
}

START_TEST(test_hostile_welcome_bad_magic_proto)
{
    connect_fails(FAKE_BAD_MAGIC, MC_ERR_PROTO);
}
END_TEST

START_TEST(test_hostile_welcome_denied)
{
    connect_fails(FAKE_DENIED, MC_ERR_DENIED);
}
END_TEST

START_TEST(test_hostile_welcome_denied_hello_unread)
{
    connect_fails(FAKE_DENIED_UNREAD, MC_ERR_DENIED);
}
END_TEST

START_TEST(test_hostile_welcome_missing_fd_proto)
{
    connect_fails(FAKE_MISSING_FD, MC_ERR_PROTO);
}
END_TEST

START_TEST(test_hostile_hangup_unavailable)
{
    connect_fails(FAKE_HANGUP, MC_ERR_UNAVAILABLE);
}
END_TEST

START_TEST(test_hostile_silent_handshake_timeout)
{
    setenv("MC_OP_TIMEOUT_MS", "200", 1);
    connect_fails(FAKE_SILENT, MC_ERR_TIMEOUT);
}
END_TEST

static mc_client_t *fake_connect(enum fake_mode mode)
{
    mc_client_t *c = NULL;
    int err;

    fake_start(mode);
    err = mc_connect(g_fake.path, &c);
    ck_assert_msg(err == 0, "connect to the fake agent: %s", mc_strerror(err));
    return c;
}

START_TEST(test_hostile_ok_get_and_release)
{
    mc_client_t *c = fake_connect(FAKE_OK);
    uint8_t *buf = malloc(OBJ_LEN);
    uint64_t deadline;
    size_t len = 0;

    ck_assert_int_eq(mc_get(c, "obj", buf, OBJ_LEN, &len), 0);
    ck_assert_uint_eq(len, OBJ_LEN);
    for (uint32_t i = 0; i < OBJ_LEN; i++)
        ck_assert_uint_eq(buf[i], (uint8_t)(i * 7 + 3));
    ck_assert_int_eq(mc_get(c, "missing", buf, OBJ_LEN, &len), MC_ERR_NOT_FOUND);
    deadline = now_ms() + 2000;
    while (atomic_load(&g_fake.releases) < 1 && now_ms() < deadline)
        pause_short();
    ck_assert_int_eq(atomic_load(&g_fake.releases), 1);
    mc_close(c);
    fake_stop();
    free(buf);
}
END_TEST

/* a checksum mismatch: MC_ERR_CORRUPT, and the caller's buffer keeps no verified-bad byte */
static void corrupt_case(enum fake_mode mode)
{
    mc_client_t *c = fake_connect(mode);
    uint8_t *buf = malloc(OBJ_LEN);
    size_t len = 99;

    memset(buf, 0xee, OBJ_LEN);
    ck_assert_int_eq(mc_get(c, "obj", buf, OBJ_LEN, &len), MC_ERR_CORRUPT);
    ck_assert_uint_eq(len, 99);
    for (uint32_t i = 0; i < OBJ_LEN; i++) {
        if (buf[i] != 0 && buf[i] != 0xee)
            ck_abort_msg("byte %u of a corrupt object left in the buffer", i);
    }
    /* not poisoned: the next call goes through */
    ck_assert_int_eq(mc_exist(c, "obj"), 1);
    mc_close(c);
    fake_stop();
    free(buf);
}

START_TEST(test_hostile_corrupt_chunk)
{
    corrupt_case(FAKE_CORRUPT);
}
END_TEST

START_TEST(test_hostile_corrupt_object_checksum)
{
    corrupt_case(FAKE_BAD_TRAILER);
}
END_TEST

START_TEST(test_hostile_lease_expired)
{
    mc_client_t *c = fake_connect(FAKE_EXPIRED);
    uint8_t *buf = malloc(OBJ_LEN);

    ck_assert_int_eq(mc_get(c, "obj", buf, OBJ_LEN, NULL), MC_ERR_LEASE_EXPIRED);
    ck_assert_int_eq(mc_exist(c, "obj"), 1);
    /* an expired lease is not released: the agent may have reused its id */
    ck_assert_int_eq(atomic_load(&g_fake.releases), 0);
    mc_close(c);
    fake_stop();
    free(buf);
}
END_TEST

START_TEST(test_hostile_bad_location_poisons)
{
    mc_client_t *c = fake_connect(FAKE_BAD_LOCATION);
    uint8_t *buf = malloc(OBJ_LEN);

    ck_assert_int_eq(mc_get(c, "obj", buf, OBJ_LEN, NULL), MC_ERR_PROTO);
    ck_assert_int_eq(mc_exist(c, "obj"), MC_ERR_PROTO);
    ck_assert_int_eq(mc_put(c, "x", buf, 10, NULL), MC_ERR_PROTO);
    mc_close(c);
    fake_stop();
    free(buf);
}
END_TEST

START_TEST(test_hostile_bad_user_data_poisons)
{
    mc_client_t *c = fake_connect(FAKE_BAD_USER_DATA);

    ck_assert_int_eq(mc_exist(c, "obj"), MC_ERR_PROTO);
    ck_assert_int_eq(mc_exist(c, "obj"), MC_ERR_PROTO);
    mc_close(c);
    fake_stop();
}
END_TEST

START_TEST(test_hostile_agent_closing_unavailable)
{
    mc_client_t *c = fake_connect(FAKE_OK);

    ck_assert_int_eq(mc_exist(c, "obj"), 1);
    atomic_store(&g_fake.r->hdr->agent_state, 1);
    ck_assert_int_eq(mc_exist(c, "obj"), MC_ERR_UNAVAILABLE);
    atomic_store(&g_fake.r->hdr->agent_state, 0);
    ck_assert_int_eq(mc_exist(c, "obj"), MC_ERR_UNAVAILABLE); /* poisoned for good */
    mc_close(c);
    fake_stop();
}
END_TEST

START_TEST(test_hostile_no_answer_timeout_keeps_slots)
{
    mc_client_t *c;
    uint8_t buf[100] = {0};
    int sqes;

    setenv("MC_OP_TIMEOUT_MS", "150", 1);
    c = fake_connect(FAKE_NO_ANSWER);
    /* two staging slots: two timed-out puts hold both (the agent may still read them) */
    ck_assert_int_eq(mc_put(c, "a", buf, sizeof(buf), NULL), MC_ERR_TIMEOUT);
    ck_assert_int_eq(mc_put(c, "b", buf, sizeof(buf), NULL), MC_ERR_TIMEOUT);
    sqes = atomic_load(&g_fake.sqes);
    ck_assert_int_eq(sqes, 2);
    /* so a third put finds no free slot and times out without submitting anything */
    ck_assert_int_eq(mc_put(c, "c", buf, sizeof(buf), NULL), MC_ERR_TIMEOUT);
    ck_assert_int_eq(atomic_load(&g_fake.sqes), 2);
    /* ops that need no staging still go */
    ck_assert_int_eq(mc_exist(c, "obj"), MC_ERR_TIMEOUT);
    ck_assert_int_eq(atomic_load(&g_fake.sqes), 3);
    mc_close(c);
    fake_stop();
}
END_TEST

static Suite *hostile_suite(void)
{
    Suite *s = suite_create("integration");
    TCase *tc = tcase_create("hostile_agent");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_hostile_welcome_bad_magic_proto);
    tcase_add_test(tc, test_hostile_welcome_denied);
    tcase_add_test(tc, test_hostile_welcome_denied_hello_unread);
    tcase_add_test(tc, test_hostile_welcome_missing_fd_proto);
    tcase_add_test(tc, test_hostile_hangup_unavailable);
    tcase_add_test(tc, test_hostile_silent_handshake_timeout);
    tcase_add_test(tc, test_hostile_ok_get_and_release);
    tcase_add_test(tc, test_hostile_corrupt_chunk);
    tcase_add_test(tc, test_hostile_corrupt_object_checksum);
    tcase_add_test(tc, test_hostile_lease_expired);
    tcase_add_test(tc, test_hostile_bad_location_poisons);
    tcase_add_test(tc, test_hostile_bad_user_data_poisons);
    tcase_add_test(tc, test_hostile_agent_closing_unavailable);
    tcase_add_test(tc, test_hostile_no_answer_timeout_keeps_slots);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(hostile_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
