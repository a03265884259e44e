/*
 * Unit tests of the device seam (dev/dev.h): the test device's memory, asynchronous copies,
 * events, injected failures, pointer queries and export/import across processes; and the
 * CUDA device where there is no CUDA (it must say "no device", never crash).
 */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "dev/dev.h"
#include "shm/fdpass.h"

static struct mc_dev *t_open(uint32_t delay_us, uint32_t fail_nth)
{
    struct mc_dev_test_opts o = {.delay_us = delay_us, .fail_nth = fail_nth};
    struct mc_dev *d = NULL;
    char why[MC_DEV_WHY_LEN] = "";

    ck_assert_int_eq(mc_dev_open(MC_DEV_TEST, 0, &o, &d, why, sizeof(why)), 0);
    return d;
}

/* poll an event with a deadline of 10 s; returns its final status */
static int t_wait(struct mc_dev_event *e)
{
    struct timespec ts = {0, 1000000};

    for (int i = 0; i < 10000; i++) {
        int st = mc_dev_event_query(e);

        if (st != MC_ERR_BUSY)
            return st;
        nanosleep(&ts, NULL);
    }
    ck_abort_msg("event did not complete in 10 s");
    return MC_ERR_TIMEOUT;
}

START_TEST(test_dev_kind_parse)
{
    ck_assert_int_eq(mc_dev_kind_parse("test"), MC_DEV_TEST);
    ck_assert_int_eq(mc_dev_kind_parse("cuda"), MC_DEV_CUDA);
    ck_assert_int_eq(mc_dev_kind_parse("CUDA"), -1);
    ck_assert_int_eq(mc_dev_kind_parse(""), -1);
    ck_assert_int_eq(mc_dev_kind_parse(NULL), -1);
    ck_assert_str_eq(mc_dev_kind_name(MC_DEV_CUDA), "cuda");
}
END_TEST

START_TEST(test_dev_test_roundtrip)
{
    struct mc_dev *d = t_open(0, 0);
    struct mc_dev_stream *s;
    struct mc_dev_event *e;
    uint64_t a, b;
    size_t n = 3 * 4096 + 17;
    uint8_t *in = malloc(n), *out = calloc(1, n);
    int count = 0;

    ck_assert_int_eq(mc_dev_probe(MC_DEV_TEST, &count, NULL, 0), 0);
    ck_assert_int_eq(count, 1);
    for (size_t i = 0; i < n; i++)
        in[i] = (uint8_t)(i * 7 + 3);
    ck_assert_int_eq(mc_dev_alloc(d, n, &a), 0);
    ck_assert_int_eq(mc_dev_alloc(d, n, &b), 0);
    ck_assert_int_eq(mc_dev_alloc(d, 0, &b), MC_ERR_INVALID);
    ck_assert_int_eq(mc_dev_stream_create(d, &s), 0);
    ck_assert_int_eq(mc_dev_event_create(d, &e), 0);
    ck_assert_int_eq(mc_dev_event_query(e), 0); /* never recorded: complete */
    ck_assert_int_eq(mc_dev_copy_htod(s, a, in, n), 0);
    ck_assert_int_eq(mc_dev_copy_dtod(s, b, a, n), 0);
    ck_assert_int_eq(mc_dev_copy_dtoh(s, out, b, n), 0);
    ck_assert_int_eq(mc_dev_copy_dtoh(s, out, b, 0), MC_ERR_INVALID);
    ck_assert_int_eq(mc_dev_event_record(e, s), 0);
    ck_assert_int_eq(t_wait(e), 0);
    ck_assert_mem_eq(in, out, n);
    ck_assert_int_eq(mc_dev_stream_sync(s), 0);
    mc_dev_event_destroy(e);
    mc_dev_stream_destroy(s);
    mc_dev_free(d, a);
    mc_dev_free(d, b);
    mc_dev_close(d);
    free(in);
    free(out);
}
END_TEST

/* copies are asynchronous: the event is pending while the delayed copy waits, and the
 * destination is untouched until it completes */
START_TEST(test_dev_test_copy_is_async)
{
    struct mc_dev *d = t_open(300000, 0);
    struct mc_dev_stream *s;
    struct mc_dev_event *e;
    uint64_t a;
    uint8_t in[64], out[64];

    memset(in, 0xab, sizeof(in));
    memset(out, 0, sizeof(out));
    ck_assert_int_eq(mc_dev_alloc(d, sizeof(in), &a), 0);
    ck_assert_int_eq(mc_dev_stream_create(d, &s), 0);
    ck_assert_int_eq(mc_dev_event_create(d, &e), 0);
    ck_assert_int_eq(mc_dev_copy_htod(s, a, in, sizeof(in)), 0);
    ck_assert_int_eq(mc_dev_copy_dtoh(s, out, a, sizeof(out)), 0);
    ck_assert_int_eq(mc_dev_event_record(e, s), 0);
    ck_assert_int_eq(mc_dev_event_query(e), MC_ERR_BUSY);
    ck_assert_int_eq(mc_dev_event_record(e, s), MC_ERR_BUSY); /* still pending */
    ck_assert_uint_eq(out[0], 0);
    ck_assert_int_eq(t_wait(e), 0);
    ck_assert_mem_eq(in, out, sizeof(in));
    mc_dev_event_destroy(e);
    mc_dev_stream_destroy(s);
    mc_dev_close(d); /* frees what is still allocated */
}
END_TEST

/* the second copy fails: it writes nothing, the event after it says MC_ERR_IO, the next
 * event (after good copies only) says 0 again, and a sync reports the failure once */
START_TEST(test_dev_test_injected_failure)
{
    struct mc_dev *d = t_open(0, 2);
    struct mc_dev_stream *s;
    struct mc_dev_event *e;
    uint64_t a;
    uint8_t in[32], out[32];

    memset(in, 0x5a, sizeof(in));
    memset(out, 0x11, sizeof(out));
    ck_assert_int_eq(mc_dev_alloc(d, sizeof(in), &a), 0);
    ck_assert_int_eq(mc_dev_stream_create(d, &s), 0);
    ck_assert_int_eq(mc_dev_event_create(d, &e), 0);
    ck_assert_int_eq(mc_dev_copy_htod(s, a, in, sizeof(in)), 0);   /* copy 1 */
    ck_assert_int_eq(mc_dev_copy_dtoh(s, out, a, sizeof(out)), 0); /* copy 2 fails */
    ck_assert_int_eq(mc_dev_event_record(e, s), 0);
    ck_assert_int_eq(t_wait(e), MC_ERR_IO);
    for (size_t i = 0; i < sizeof(out); i++)
        ck_assert_uint_eq(out[i], 0x11);
    ck_assert_int_eq(mc_dev_copy_dtoh(s, out, a, sizeof(out)), 0); /* copy 3 */
    ck_assert_int_eq(mc_dev_event_record(e, s), 0);
    ck_assert_int_eq(t_wait(e), 0);
    ck_assert_mem_eq(in, out, sizeof(in));
    ck_assert_int_eq(mc_dev_stream_sync(s), MC_ERR_IO);
    ck_assert_int_eq(mc_dev_stream_sync(s), 0);
    mc_dev_event_destroy(e);
    mc_dev_stream_destroy(s);
    mc_dev_close(d);
}
END_TEST

/* destroying a stream waits for what it had queued: nothing runs after it returns */
START_TEST(test_dev_test_stream_destroy_drains)
{
    struct mc_dev *d = t_open(100000, 0);
    struct mc_dev_stream *s;
    uint64_t a;
    uint8_t in[16], out[16] = {0};

    memset(in, 7, sizeof(in));
    ck_assert_int_eq(mc_dev_alloc(d, sizeof(in), &a), 0);
    ck_assert_int_eq(mc_dev_stream_create(d, &s), 0);
    ck_assert_int_eq(mc_dev_copy_htod(s, a, in, sizeof(in)), 0);
    ck_assert_int_eq(mc_dev_copy_dtoh(s, out, a, sizeof(out)), 0);
    mc_dev_stream_destroy(s);
    ck_assert_mem_eq(in, out, sizeof(in));
    mc_dev_close(d);
}
END_TEST

START_TEST(test_dev_test_ptr_query)
{
    struct mc_dev *d = t_open(0, 0);
    struct mc_dev_ptr_info info, info2;
    uint64_t a, b;
    int local = 0;
    void *heap = malloc(100);

    ck_assert_int_eq(mc_dev_alloc(d, 10000, &a), 0);
    ck_assert_int_eq(mc_dev_alloc(d, 5000, &b), 0);
    /* a sub-allocated pointer: the base and size of the allocation that holds it */
    ck_assert_int_eq(mc_dev_ptr_query(MC_DEV_TEST, a + 4321, &info), 0);
    ck_assert(info.is_device);
    ck_assert(info.exportable);
    ck_assert_uint_eq(info.kind, MC_DEV_TEST);
    ck_assert_uint_eq(info.base, a);
    ck_assert_uint_ge(info.size, 10000);
    ck_assert_uint_ne(info.buffer_id, 0);
    ck_assert_int_eq(mc_dev_ptr_query(MC_DEV_TEST, b, &info2), 0);
    ck_assert(info2.is_device);
    ck_assert_uint_ne(info2.buffer_id, info.buffer_id);
    /* host memory is not an error */
    ck_assert_int_eq(mc_dev_ptr_query(MC_DEV_TEST, (uint64_t)(uintptr_t)heap, &info), 0);
    ck_assert(!info.is_device);
    ck_assert_int_eq(mc_dev_ptr_query(MC_DEV_TEST, (uint64_t)(uintptr_t)&local, &info), 0);
    ck_assert(!info.is_device);
    ck_assert_int_eq(mc_dev_ptr_query(MC_DEV_TEST, 0, &info), 0);
    ck_assert(!info.is_device);
    /* a freed buffer is no longer a device pointer */
    mc_dev_free(d, a);
    ck_assert_int_eq(mc_dev_ptr_query(MC_DEV_TEST, a + 1, &info), 0);
    ck_assert(!info.is_device);
    free(heap);
    mc_dev_close(d);
}
END_TEST

/* a child allocates and fills a buffer and exports it over a socket; the parent imports the
 * allocation once, reads through base + offset, writes back, and the child sees it */
START_TEST(test_dev_test_export_import_across_processes)
{
    int sv[2];
    pid_t pid;

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    pid = fork();
    ck_assert_int_ne(pid, -1);
    if (pid == 0) {
        struct mc_dev *d = t_open(0, 0);
        struct mc_dev_export x;
        uint64_t a;
        int fd, ok = 0;
        size_t n;
        int nfds;
        uint8_t *p;

        close(sv[0]);
        if (mc_dev_alloc(d, 1 << 16, &a) != 0)
            _exit(2);
        p = (uint8_t *)(uintptr_t)a;
        for (int i = 0; i < 1 << 16; i++)
            p[i] = (uint8_t)i;
        if (mc_dev_export(MC_DEV_TEST, a + 1000, &x, &fd) != 0 || fd < 0)
            _exit(3);
        if (mc_shm_fd_send(sv[1], &x, sizeof(x), 0, &fd, 1) != 0)
            _exit(4);
        close(fd);
        if (mc_shm_fd_recv(sv[1], &ok, sizeof(ok), 0, NULL, 0, &n, &nfds) != 0)
            _exit(5);
        _exit(p[1000] == 0xee ? 0 : 6);
    }
    close(sv[1]);
    {
        struct mc_dev *d = t_open(0, 0);
        struct mc_dev_stream *s;
        struct mc_dev_event *e;
        struct mc_dev_export x, bad;
        uint64_t base;
        int fd = -1, nfds = 0, st, one = 1;
        size_t n;
        uint8_t out[16], ee = 0xee;

        ck_assert_int_eq(mc_shm_fd_recv(sv[0], &x, sizeof(x), 0, &fd, 1, &n, &nfds), 0);
        ck_assert_uint_eq(n, sizeof(x));
        ck_assert_int_eq(nfds, 1);
        ck_assert_uint_eq(x.kind, MC_DEV_EXPORT_FD);
        ck_assert_uint_ge(x.size, 1 << 16);
        /* a lying export: wrong buffer id, or larger than the memfd, is refused and the fd
         * is closed either way */
        bad = x;
        bad.buffer_id++;
        ck_assert_int_eq(mc_dev_import(d, &bad, dup(fd), &base), MC_ERR_INVALID);
        bad = x;
        bad.size *= 2;
        ck_assert_int_eq(mc_dev_import(d, &bad, dup(fd), &base), MC_ERR_INVALID);
        bad = x;
        bad.kind = MC_DEV_EXPORT_CUDA_IPC;
        ck_assert_int_eq(mc_dev_import(d, &bad, dup(fd), &base), MC_ERR_INVALID);
        ck_assert_int_eq(mc_dev_import(d, &x, fd, &base), 0);
        ck_assert_int_eq(mc_dev_stream_create(d, &s), 0);
        ck_assert_int_eq(mc_dev_event_create(d, &e), 0);
        ck_assert_int_eq(mc_dev_copy_dtoh(s, out, base + 1000, sizeof(out)), 0);
        ck_assert_int_eq(mc_dev_copy_htod(s, base + 1000, &ee, 1), 0);
        ck_assert_int_eq(mc_dev_event_record(e, s), 0);
        ck_assert_int_eq(t_wait(e), 0);
        for (int i = 0; i < 16; i++)
            ck_assert_uint_eq(out[i], (uint8_t)(1000 + i));
        ck_assert_int_eq(mc_shm_fd_send(sv[0], &one, sizeof(one), 0, NULL, 0), 0);
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert(WIFEXITED(st));
        ck_assert_int_eq(WEXITSTATUS(st), 0);
        mc_dev_event_destroy(e);
        mc_dev_stream_destroy(s);
        mc_dev_unimport(d, base, x.size);
        mc_dev_close(d);
    }
}
END_TEST

/* an export of host memory is refused */
START_TEST(test_dev_test_export_host_refused)
{
    struct mc_dev_export x;
    int fd = 5;
    char buf[64];

    ck_assert_int_eq(mc_dev_export(MC_DEV_TEST, (uint64_t)(uintptr_t)buf, &x, &fd),
                     MC_ERR_INVALID);
    ck_assert_int_eq(fd, -1);
}
END_TEST

/* memory legacy IPC cannot export (mc_dev_alloc_vmm, as PyTorch's expandable segments):
 * a device pointer all the same, copies work, but it says so and export is refused */
START_TEST(test_dev_test_vmm_not_exportable)
{
    struct mc_dev *d = t_open(0, 0);
    struct mc_dev_ptr_info info;
    struct mc_dev_stream *s;
    struct mc_dev_export x;
    uint8_t in[512], out[512] = {0};
    uint64_t v, a;
    int fd = 7;

    ck_assert_int_eq(mc_dev_alloc_vmm(d, 0, &v), MC_ERR_INVALID);
    ck_assert_int_eq(mc_dev_alloc_vmm(d, 1 << 16, NULL), MC_ERR_INVALID);
    ck_assert_int_eq(mc_dev_alloc_vmm(d, 1 << 16, &v), 0);
    ck_assert_int_eq(mc_dev_alloc(d, 1 << 16, &a), 0);
    ck_assert_int_eq(mc_dev_ptr_query(MC_DEV_TEST, v + 100, &info), 0);
    ck_assert(info.is_device);
    ck_assert(!info.exportable);
    ck_assert_uint_eq(info.base, v);
    ck_assert_int_eq(mc_dev_export(MC_DEV_TEST, v + 100, &x, &fd), MC_ERR_DENIED);
    ck_assert_int_eq(fd, -1);
    /* the ordinary allocation next to it still exports */
    ck_assert_int_eq(mc_dev_ptr_query(MC_DEV_TEST, a, &info), 0);
    ck_assert(info.exportable);
    ck_assert_int_eq(mc_dev_export(MC_DEV_TEST, a, &x, &fd), 0);
    ck_assert_int_ge(fd, 0);
    close(fd);
    memset(in, 0x5a, sizeof(in));
    ck_assert_int_eq(mc_dev_stream_create(d, &s), 0);
    ck_assert_int_eq(mc_dev_copy_htod(s, v + 100, in, sizeof(in)), 0);
    ck_assert_int_eq(mc_dev_copy_dtoh(s, out, v + 100, sizeof(out)), 0);
    ck_assert_int_eq(mc_dev_stream_sync(s), 0);
    ck_assert_mem_eq(in, out, sizeof(in));
    mc_dev_stream_destroy(s);
    mc_dev_free(d, v);
    ck_assert_int_eq(mc_dev_ptr_query(MC_DEV_TEST, v + 100, &info), 0);
    ck_assert(!info.is_device);
    mc_dev_free(d, a);
    mc_dev_close(d);
}
END_TEST

/* no libcuda (or no GPU): every entry that needs the driver answers "no device" */
START_TEST(test_dev_cuda_no_device)
{
    char why[MC_DEV_WHY_LEN] = "";
    struct mc_dev *d = NULL;
    struct mc_dev_ptr_info info;
    struct mc_dev_export x;
    int count = -1, fd;
    char host[8];

    setenv("MC_LIBCUDA", "libcuda-that-is-not-there.so.1", 1);
    ck_assert_int_eq(mc_dev_probe(MC_DEV_CUDA, &count, why, sizeof(why)), MC_ERR_UNAVAILABLE);
    ck_assert_int_eq(count, -1);
    ck_assert_msg(strncmp(why, "no device", 9) == 0, "why: %s", why);
    why[0] = '\0';
    ck_assert_int_eq(mc_dev_open(MC_DEV_CUDA, 0, NULL, &d, why, sizeof(why)),
                     MC_ERR_UNAVAILABLE);
    ck_assert_ptr_null(d);
    ck_assert_msg(strncmp(why, "no device", 9) == 0, "why: %s", why);
    ck_assert_int_eq(mc_dev_ptr_query(MC_DEV_CUDA, (uint64_t)(uintptr_t)host, &info),
                     MC_ERR_UNAVAILABLE);
    ck_assert_int_eq(mc_dev_export(MC_DEV_CUDA, (uint64_t)(uintptr_t)host, &x, &fd),
                     MC_ERR_UNAVAILABLE);
}
END_TEST

/* the real libcuda.so.1 name: on this host either it is absent or has no GPU ("no
 * device"), or a GPU answers and a round trip must work */
START_TEST(test_dev_cuda_probe_real)
{
    char why[MC_DEV_WHY_LEN] = "";
    int count = 0, err;

    unsetenv("MC_LIBCUDA");
    err = mc_dev_probe(MC_DEV_CUDA, &count, why, sizeof(why));
    if (err == MC_ERR_UNAVAILABLE) {
        ck_assert_msg(strncmp(why, "no device", 9) == 0, "why: %s", why);
        return;
    }
    ck_assert_int_eq(err, 0);
    ck_assert_int_ge(count, 1);
    {
        struct mc_dev *d;
        struct mc_dev_stream *s;
        struct mc_dev_event *e;
        struct mc_dev_ptr_info info;
        uint64_t a;
        uint8_t in[256], out[256] = {0};

        memset(in, 0x3c, sizeof(in));
        ck_assert_int_eq(mc_dev_open(MC_DEV_CUDA, 0, NULL, &d, why, sizeof(why)), 0);
        ck_assert_int_eq(mc_dev_alloc(d, 1 << 20, &a), 0);
        ck_assert_int_eq(mc_dev_ptr_query(MC_DEV_CUDA, a + 4096, &info), 0);
        ck_assert(info.is_device);
        ck_assert_uint_eq(info.base, a);
        ck_assert_int_eq(mc_dev_ptr_query(MC_DEV_CUDA, (uint64_t)(uintptr_t)in, &info), 0);
        ck_assert(!info.is_device);
        ck_assert_int_eq(mc_dev_stream_create(d, &s), 0);
        ck_assert_int_eq(mc_dev_event_create(d, &e), 0);
        ck_assert_int_eq(mc_dev_copy_htod(s, a + 4096, in, sizeof(in)), 0);
        ck_assert_int_eq(mc_dev_copy_dtoh(s, out, a + 4096, sizeof(out)), 0);
        ck_assert_int_eq(mc_dev_event_record(e, s), 0);
        ck_assert_int_eq(t_wait(e), 0);
        ck_assert_mem_eq(in, out, sizeof(in));
        /* a VMM allocation: a device pointer legacy IPC cannot export */
        {
            struct mc_dev_export x;
            uint64_t v;
            int fd;

            ck_assert_int_eq(mc_dev_alloc_vmm(d, 1 << 20, &v), 0);
            ck_assert_int_eq(mc_dev_ptr_query(MC_DEV_CUDA, v + 4096, &info), 0);
            ck_assert(info.is_device);
            ck_assert(!info.exportable);
            ck_assert_int_eq(mc_dev_export(MC_DEV_CUDA, v + 4096, &x, &fd), MC_ERR_DENIED);
            ck_assert_int_eq(mc_dev_copy_htod(s, v + 4096, in, sizeof(in)), 0);
            memset(out, 0, sizeof(out));
            ck_assert_int_eq(mc_dev_copy_dtoh(s, out, v + 4096, sizeof(out)), 0);
            ck_assert_int_eq(mc_dev_stream_sync(s), 0);
            ck_assert_mem_eq(in, out, sizeof(in));
            mc_dev_free(d, v);
        }
        mc_dev_event_destroy(e);
        mc_dev_stream_destroy(s);
        mc_dev_free(d, a);
        mc_dev_close(d);
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("dev");
    TCase *tc = tcase_create("dev");
    SRunner *sr;
    int failed;

    signal(SIGPIPE, SIG_IGN);
    tcase_add_test(tc, test_dev_kind_parse);
    tcase_add_test(tc, test_dev_test_roundtrip);
    tcase_add_test(tc, test_dev_test_copy_is_async);
    tcase_add_test(tc, test_dev_test_injected_failure);
    tcase_add_test(tc, test_dev_test_stream_destroy_drains);
    tcase_add_test(tc, test_dev_test_ptr_query);
    tcase_add_test(tc, test_dev_test_export_import_across_processes);
    tcase_add_test(tc, test_dev_test_export_host_refused);
    tcase_add_test(tc, test_dev_test_vmm_not_exportable);
    tcase_add_test(tc, test_dev_cuda_no_device);
    tcase_add_test(tc, test_dev_cuda_probe_real);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
