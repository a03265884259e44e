/*
 * Unit tests of the region (shm/region.c) and memfd segments (shm/memfd.c): layout
 * arithmetic and its limits, create + attach in a forked child through an fd passed with
 * SCM_RIGHTS, the header checks a client makes (magic, ABI, offsets, size, seals), the seals
 * themselves, and read-only segment fds that cannot be mapped writable.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mc/mc_status.h"
#include "shm/memfd.h"
#include "shm/region.h"
#include "shm/ring.h"

#define T_MIB (UINT64_C(1) << 20)

static struct mc_shm_region *t_region(uint32_t sq, uint32_t cq)
{
    struct mc_shm_layout lay;
    struct mc_shm_region *r = NULL;

    ck_assert_int_eq(mc_shm_layout_init(&lay, sq, cq, MC_SHM_CHUNK, 2, cq), 0);
    ck_assert_int_eq(mc_shm_region_create("t_region", &lay, 42, &r), 0);
    ck_assert_ptr_nonnull(r);
    return r;
}

/* Attach to a duplicate of r's fd (attach takes ownership on success only). */
static int t_attach(struct mc_shm_region *r, uint64_t size)
{
    struct mc_shm_region *c = NULL;
    int fd = dup(r->fd);
    int err;

    ck_assert_int_ge(fd, 0);
    err = mc_shm_region_attach(fd, size, &c);
    if (err == 0) {
        ck_assert_ptr_nonnull(c);
        mc_shm_region_destroy(c); /* closes fd */
    } else {
        ck_assert_ptr_null(c); /* outputs only on success */
        ck_assert_int_ge(fcntl(fd, F_GETFD), 0); /* still open: ours */
        close(fd);
    }
    return err;
}

/* --- layout ----------------------------------------------------------------------------- */

START_TEST(test_region_layout_offsets)
{
    struct mc_shm_layout l;

    ck_assert_int_eq(mc_shm_layout_init(&l, 64, 128, 4 * MC_SHM_CHUNK, 3, 100), 0);
    ck_assert_uint_eq(l.sq_ctrl_off, MC_SHM_HDR_SIZE);
    ck_assert_uint_eq(l.sqes_off % 64, 0);
    ck_assert_uint_ge(l.sqes_off, l.sq_ctrl_off + sizeof(struct mc_shm_ring_ctrl));
    ck_assert_uint_ge(l.keys_off, l.sqes_off + 64 * sizeof(struct mc_sqe));
    ck_assert_uint_ge(l.cq_ctrl_off, l.keys_off + 64 * MC_SHM_KEY_SLOT);
    ck_assert_uint_ge(l.cqes_off, l.cq_ctrl_off + sizeof(struct mc_shm_ring_ctrl));
    ck_assert_uint_eq(l.cq_ctrl_off % 64, 0);
    ck_assert_uint_eq(l.cqes_off % 64, 0);
    ck_assert_uint_ge(l.staging_off, l.cqes_off + 128 * sizeof(struct mc_cqe));
    ck_assert_uint_eq(l.staging_off % 4096, 0);
    ck_assert_uint_eq(l.staging_size, 12 * T_MIB);
    ck_assert_uint_ge(l.region_size, l.staging_off + l.staging_size);
    ck_assert_uint_eq(l.region_size % 4096, 0);
    ck_assert_uint_eq(l.max_inflight, 100);
    ck_assert_int_eq(mc_shm_layout_check(&l), 0);

    /* the largest layout still fits the bounds */
    ck_assert_int_eq(mc_shm_layout_init(&l, 65536, 65536, 1024 * MC_SHM_CHUNK, 1, 65536), 0);
    ck_assert_int_eq(mc_shm_layout_check(&l), 0);
}
END_TEST

START_TEST(test_region_layout_rejects)
{
    struct mc_shm_layout l, keep;

    memset(&l, 0xa5, sizeof(l));
    keep = l;
    ck_assert_int_eq(mc_shm_layout_init(&l, 3, 8, MC_SHM_CHUNK, 1, 1), MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_layout_init(&l, 0, 8, MC_SHM_CHUNK, 1, 1), MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_layout_init(&l, 8, 12, MC_SHM_CHUNK, 1, 1), MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_layout_init(&l, 16, 8, MC_SHM_CHUNK, 1, 1), MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_layout_init(&l, 8, 131072, MC_SHM_CHUNK, 1, 1), MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_layout_init(&l, 8, 8, MC_SHM_CHUNK + 4096, 1, 1), MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_layout_init(&l, 8, 8, 0, 1, 1), MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_layout_init(&l, 8, 8, MC_SHM_CHUNK, 0, 1), MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_layout_init(&l, 8, 8, MC_SHM_CHUNK, 1025, 1), MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_layout_init(&l, 8, 8, 2048 * MC_SHM_CHUNK, 1, 1),
                     MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_layout_init(&l, 8, 8, MC_SHM_CHUNK, 1, 0), MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_layout_init(&l, 8, 8, MC_SHM_CHUNK, 1, 9), MC_ERR_INVALID);
    ck_assert_mem_eq(&l, &keep, sizeof(l)); /* untouched on failure */
}
END_TEST

/* --- create and attach ------------------------------------------------------------------ */

static void t_send_fd(int sock, int fd)
{
    char cbuf[CMSG_SPACE(sizeof(int))] = {0};
    char byte = 'r';
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                         .msg_controllen = sizeof(cbuf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    ck_assert_int_eq(sendmsg(sock, &msg, 0), 1);
}

static int t_recv_fd(int sock)
{
    char cbuf[CMSG_SPACE(sizeof(int))];
    char byte;
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                         .msg_controllen = sizeof(cbuf)};
    struct cmsghdr *cm;
    int fd;

    if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
        return -1;
    cm = CMSG_FIRSTHDR(&msg);
    if (cm == NULL || cm->cmsg_type != SCM_RIGHTS)
        return -1;
    memcpy(&fd, CMSG_DATA(cm), sizeof(int));
    return fd;
}

/* Child: receive the region fd, attach, check the layout against the agent's, write into
 * staging and a key slot. Exit codes name the failed step. */
static int t_child_attach(int sock, const struct mc_shm_layout *want, uint64_t size)
{
    struct mc_shm_region *c;
    int fd = t_recv_fd(sock);

    if (fd < 0)
        return 2;
    if (mc_shm_region_attach(fd, size, &c) != 0)
        return 3;
    if (memcmp(&c->lay, want, sizeof(*want)) != 0 || c->fd != fd)
        return 4;
    if (c->lay.client_id != 42 || c->hdr->client_id != 42)
        return 5;
    memcpy(c->staging + c->lay.staging_size - 5, "hello", 5);
    memcpy(mc_shm_key_slot(c, 3), "key3", 4);
    atomic_store(&c->sq->tail, 77);
    mc_shm_region_destroy(c);
    return 0;
}

START_TEST(test_region_create_attach_fork)
{
    struct mc_shm_region *r = t_region(8, 16);
    int sv[2], status;
    pid_t pid;

    ck_assert_uint_eq(r->size, r->lay.region_size);
    ck_assert_uint_eq(r->hdr->magic, MC_SHM_MAGIC);
    ck_assert_mem_eq(&r->hdr->magic, "mcstore1", 8);
    ck_assert_uint_eq(r->hdr->abi, MC_SHM_ABI);
    ck_assert_uint_eq(r->hdr->chunk_size, MC_SHM_CHUNK);
    ck_assert_uint_eq(r->hdr->client_id, 42);
    ck_assert_uint_eq(atomic_load(&r->sq->tail), 0);
    ck_assert_int_eq(fcntl(r->fd, F_GETFD), FD_CLOEXEC);

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(sv[0]);
        _exit(t_child_attach(sv[1], &r->lay, r->lay.region_size));
    }
    close(sv[1]);
    t_send_fd(sv[0], r->fd);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    ck_assert_mem_eq(r->staging + r->lay.staging_size - 5, "hello", 5);
    ck_assert_mem_eq(r->keys + 3 * MC_SHM_KEY_SLOT, "key3", 4);
    ck_assert_uint_eq(atomic_load(&r->sq->tail), 77);
    close(sv[0]);
    mc_shm_region_destroy(r);
    mc_shm_region_destroy(NULL);
}
END_TEST

START_TEST(test_region_attach_rejects_magic_abi)
{
    struct mc_shm_region *r = t_region(4, 4);
    uint64_t size = r->lay.region_size;

    ck_assert_int_eq(t_attach(r, size), 0);
    r->hdr->magic ^= 1;
    ck_assert_int_eq(t_attach(r, size), MC_ERR_PROTO);
    r->hdr->magic ^= 1;
    r->hdr->abi = MC_SHM_ABI + 1;
    ck_assert_int_eq(t_attach(r, size), MC_ERR_PROTO);
    r->hdr->abi = MC_SHM_ABI;
    r->hdr->hdr_size = 128;
    ck_assert_int_eq(t_attach(r, size), MC_ERR_PROTO);
    r->hdr->hdr_size = MC_SHM_HDR_SIZE;
    r->hdr->chunk_size = 4096;
    ck_assert_int_eq(t_attach(r, size), MC_ERR_PROTO);
    r->hdr->chunk_size = MC_SHM_CHUNK;
    ck_assert_int_eq(t_attach(r, size), 0);
    mc_shm_region_destroy(r);
}
END_TEST

/* Each corruption of one header field must be refused; restoring it must be accepted. */
#define T_REJECT(field, value)                                                              \
    do {                                                                                    \
        __typeof__(r->hdr->field) saved_ = r->hdr->field;                                   \
        r->hdr->field = (value);                                                            \
        ck_assert_msg(t_attach(r, size) == MC_ERR_PROTO, "accepted " #field " = " #value); \
        r->hdr->field = saved_;                                                             \
    } while (0)

START_TEST(test_region_attach_rejects_offsets)
{
    struct mc_shm_region *r = t_region(8, 16);
    const struct mc_shm_layout *l = &r->lay;
    uint64_t size = l->region_size;

    T_REJECT(sqes_off, size);                         /* past the end */
    T_REJECT(sqes_off, size - 64);                    /* runs past the end */
    T_REJECT(sqes_off, UINT64_MAX - 63);              /* off + len wraps */
    T_REJECT(keys_off, l->sqes_off + 64);             /* overlaps the SQEs */
    T_REJECT(cq_ctrl_off, 0);                         /* inside the header page */
    T_REJECT(cq_ctrl_off, l->cq_ctrl_off + 8);        /* misaligned */
    T_REJECT(cqes_off, l->sq_ctrl_off);               /* overlaps the SQ ctrl */
    T_REJECT(staging_off, l->staging_off + 64);       /* not page aligned, and runs over */
    T_REJECT(staging_off, l->cqes_off);               /* overlaps the CQEs */
    T_REJECT(staging_size, l->staging_size + 4096);   /* not slots * slot size */
    T_REJECT(staging_slots, 3);                       /* staging_size mismatch */
    T_REJECT(staging_slot_size, 4096);                /* not a chunk multiple */
    T_REJECT(sq_entries, 6);                          /* not a power of two */
    T_REJECT(sq_entries, 32);                         /* > cq_entries, and SQEs overflow */
    T_REJECT(cq_entries, 1u << 20);                   /* too many */
    T_REJECT(cq_entries, 0);
    T_REJECT(max_inflight, 0);
    T_REJECT(max_inflight, 17);                       /* > cq_entries */
    T_REJECT(region_size, size - 4096);               /* not the file's size */
    ck_assert_int_eq(t_attach(r, size), 0);
    mc_shm_region_destroy(r);
}
END_TEST

START_TEST(test_region_attach_rejects_size_mismatch)
{
    struct mc_shm_region *r = t_region(4, 4);
    uint64_t size = r->lay.region_size;

    ck_assert_int_eq(t_attach(r, size + 4096), MC_ERR_PROTO);
    ck_assert_int_eq(t_attach(r, size - 4096), MC_ERR_PROTO);
    ck_assert_int_eq(t_attach(r, 0), MC_ERR_PROTO);
    ck_assert_int_eq(t_attach(r, UINT64_MAX), MC_ERR_PROTO);
    ck_assert_int_eq(mc_shm_region_attach(-1, size, &(struct mc_shm_region *){NULL}),
                     MC_ERR_INVALID);
    mc_shm_region_destroy(r);
}
END_TEST

/* A valid header in a memfd without seals, then with only one of the two, then both. */
START_TEST(test_region_attach_rejects_missing_seals)
{
    struct mc_shm_region *r = t_region(4, 4), *c = NULL;
    uint64_t size = r->lay.region_size;
    FILE *tmp;
    void *p;
    int fd;

    ck_assert_int_eq(mc_shm_memfd_create("t_unsealed", size, false, &fd, NULL), 0);
    ck_assert_int_eq(mc_shm_map(fd, size, true, &p), 0);
    memcpy(p, r->base, size);
    munmap(p, size);
    ck_assert_int_eq(mc_shm_region_attach(fd, size, &c), MC_ERR_PROTO);
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_GROW), 0);
    ck_assert_int_eq(mc_shm_region_attach(fd, size, &c), MC_ERR_PROTO);
    ck_assert_int_eq(mc_shm_memfd_seal_size(fd), 0);
    ck_assert_int_eq(mc_shm_region_attach(fd, size, &c), 0);
    ck_assert_uint_eq(c->lay.client_id, 42);
    mc_shm_region_destroy(c);

    /* a file that cannot be sealed at all */
    tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    ck_assert_int_eq(ftruncate(fileno(tmp), (off_t)size), 0);
    ck_assert_int_eq(mc_shm_region_attach(fileno(tmp), size, &c), MC_ERR_PROTO);
    fclose(tmp);
    mc_shm_region_destroy(r);
}
END_TEST

START_TEST(test_region_seals_stop_ftruncate)
{
    struct mc_shm_region *r = t_region(4, 4);
    off_t size = (off_t)r->lay.region_size;
    struct stat st;

    ck_assert_int_eq(ftruncate(r->fd, size * 2), -1);
    ck_assert_int_eq(errno, EPERM);
    ck_assert_int_eq(ftruncate(r->fd, size / 2), -1);
    ck_assert_int_eq(errno, EPERM);
    ck_assert_int_eq(fcntl(r->fd, F_ADD_SEALS, F_SEAL_WRITE), -1); /* F_SEAL_SEAL */
    ck_assert_int_eq(errno, EPERM);
    ck_assert_int_eq(fstat(r->fd, &st), 0);
    ck_assert_int_eq(st.st_size, size);
    mc_shm_region_destroy(r);
}
END_TEST

START_TEST(test_region_key_slot_wraps)
{
    struct mc_shm_region *r = t_region(8, 8);

    ck_assert_ptr_eq(mc_shm_key_slot(r, 0), r->base + r->lay.keys_off);
    ck_assert_ptr_eq(mc_shm_key_slot(r, 7), r->base + r->lay.keys_off + 7 * MC_SHM_KEY_SLOT);
    ck_assert_ptr_eq(mc_shm_key_slot(r, 8), mc_shm_key_slot(r, 0));
    ck_assert_ptr_eq(mc_shm_key_slot(r, UINT32_MAX), mc_shm_key_slot(r, 7));
    ck_assert_ptr_eq(mc_shm_sqe_at(r, UINT32_MAX), &r->sqes[7]);
    ck_assert_ptr_eq(mc_shm_cqe_at(r, 9), &r->cqes[1]);
    mc_shm_region_destroy(r);
}
END_TEST

/* --- memfd segments --------------------------------------------------------------------- */

START_TEST(test_memfd_reopen_ro_cannot_map_writable)
{
    int fd, ro;
    uint8_t *rw, *rd;
    void *p;

    ck_assert_int_eq(mc_shm_memfd_create("t_seg", T_MIB, false, &fd, NULL), 0);
    ck_assert_int_eq(mc_shm_memfd_seal_size(fd), 0);
    ck_assert_int_eq(mc_shm_map(fd, T_MIB, true, &p), 0);
    rw = p;
    ck_assert_int_eq(mc_shm_fd_reopen_ro(fd, &ro), 0);
    ck_assert_int_eq(fcntl(ro, F_GETFD), FD_CLOEXEC);
    ck_assert_int_eq(fcntl(ro, F_GETFL) & O_ACCMODE, O_RDONLY);

    ck_assert_int_eq(mc_shm_map(ro, T_MIB, true, &p), MC_ERR_DENIED);
    ck_assert_ptr_eq(mmap(NULL, T_MIB, PROT_READ | PROT_WRITE, MAP_SHARED, ro, 0), MAP_FAILED);
    ck_assert_int_eq(errno, EACCES);
    ck_assert_int_eq(mc_shm_map(ro, T_MIB, false, &p), 0);
    rd = p;
    rw[12345] = 0x5a;
    ck_assert_uint_eq(rd[12345], 0x5a);
    ck_assert_int_eq(mprotect(rd, T_MIB, PROT_READ | PROT_WRITE), -1);
    ck_assert_int_eq(errno, EACCES);

    ck_assert_int_eq(mc_shm_fd_reopen_ro(-1, &ro), MC_ERR_INVALID);
    munmap(rd, T_MIB);
    munmap(rw, T_MIB);
    close(ro);
    close(fd);
}
END_TEST

/* A read-only fd alone can be reopened read-write through /proc (the memfd inode is 0777);
 * F_SEAL_FUTURE_WRITE closes that, and the owner's existing mapping stays writable. */
START_TEST(test_memfd_future_write_seal_stops_reopen_rw)
{
    char path[32];
    int fd, ro, rw_again;
    uint8_t *rw;
    void *p;

    ck_assert_int_eq(mc_shm_memfd_create("t_seg", T_MIB, false, &fd, NULL), 0);
    ck_assert_int_eq(mc_shm_map(fd, T_MIB, true, &p), 0);
    rw = p;
    ck_assert_int_eq(mc_shm_memfd_seal_future_write(fd), 0);
    ck_assert_int_eq(mc_shm_fd_reopen_ro(fd, &ro), 0);
    close(fd);

    snprintf(path, sizeof(path), "/proc/self/fd/%d", ro);
    rw_again = open(path, O_RDWR | O_CLOEXEC);
    if (rw_again >= 0) {
        ck_assert_ptr_eq(mmap(NULL, T_MIB, PROT_READ | PROT_WRITE, MAP_SHARED, rw_again, 0),
                         MAP_FAILED);
        ck_assert_int_eq(write(rw_again, "x", 1), -1);
        close(rw_again);
    }
    rw[0] = 1; /* the mapping made before the seal still writes */
    ck_assert_int_eq(mc_shm_map(ro, T_MIB, false, &p), 0);
    ck_assert_uint_eq(((uint8_t *)p)[0], 1);
    munmap(p, T_MIB);
    munmap(rw, T_MIB);
    close(ro);
}
END_TEST

START_TEST(test_memfd_hugetlb_falls_back)
{
    struct stat st;
    bool huge = true;
    int fd;

    /* not a multiple of any huge page size: always falls back */
    ck_assert_int_eq(mc_shm_memfd_create("t_huge", 12288, true, &fd, &huge), 0);
    ck_assert(!huge);
    ck_assert_int_eq(fstat(fd, &st), 0);
    ck_assert_int_eq(st.st_size, 12288);
    ck_assert_int_eq(mc_shm_memfd_seal_size(fd), 0);
    close(fd);

    /* 2 MiB: huge pages when the pool has them, else normal ones; either way usable */
    ck_assert_int_eq(mc_shm_memfd_create("t_huge", 2 * T_MIB, true, &fd, &huge), 0);
    ck_assert_int_eq(fstat(fd, &st), 0);
    ck_assert_int_eq(st.st_size, 2 * T_MIB);
    close(fd);
    ck_assert_int_eq(mc_shm_memfd_create("t_huge", 2 * T_MIB, true, &fd, NULL), 0);
    close(fd);

    ck_assert_int_eq(mc_shm_memfd_create("t_bad", 0, false, &fd, NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_shm_memfd_create(NULL, 4096, false, &fd, NULL), MC_ERR_INVALID);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("region");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_region_layout_offsets);
    tcase_add_test(tc, test_region_layout_rejects);
    tcase_add_test(tc, test_region_create_attach_fork);
    tcase_add_test(tc, test_region_attach_rejects_magic_abi);
    tcase_add_test(tc, test_region_attach_rejects_offsets);
    tcase_add_test(tc, test_region_attach_rejects_size_mismatch);
    tcase_add_test(tc, test_region_attach_rejects_missing_seals);
    tcase_add_test(tc, test_region_seals_stop_ftruncate);
    tcase_add_test(tc, test_region_key_slot_wraps);
    tcase_add_test(tc, test_memfd_reopen_ro_cannot_map_writable);
    tcase_add_test(tc, test_memfd_future_write_seal_stops_reopen_rw);
    tcase_add_test(tc, test_memfd_hugetlb_falls_back);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(t_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
