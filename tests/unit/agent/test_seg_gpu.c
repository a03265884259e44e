/*
 * Unit tests of the agent's GPU segments (seg_gpu.h) on the test device, and of the `gpu`
 * setting's parser (gpu_cfg.h).
 */
#include <check.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/agent/seg_gpu.h"
#include "daemon/master/master.h"

static struct mc_dev *t_dev(uint32_t delay_us, uint32_t fail_nth)
{
    struct mc_dev_test_opts o = {.delay_us = delay_us, .fail_nth = fail_nth};
    struct mc_dev *d;

    ck_assert_int_eq(mc_dev_open(MC_DEV_TEST, 0, &o, &d, NULL, 0), 0);
    return d;
}

START_TEST(test_seg_gpu_write_read)
{
    struct mc_dev *d = t_dev(2000, 0);
    struct mc_seg *s;
    uint8_t in[5000], out[5000] = {0};

    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (uint8_t)(i ^ 0x5c);
    ck_assert_int_eq(mc_seg_gpu_create(d, 1 << 20, &s), 0);
    ck_assert_uint_eq(s->kind, MC_SEG_GPU);
    ck_assert_uint_eq(s->size, 1 << 20);
    ck_assert_int_eq(s->ro_fd, -1);
    /* not addressable: the put and the get must go through write and read */
    ck_assert_ptr_null(mc_seg_span(s, 0, 16));
    ck_assert_int_eq(s->ops->write(s, 12345, in, sizeof(in)), 0);
    ck_assert_int_eq(s->ops->read(s, 12345, out, sizeof(out)), 0); /* waits for the copy */
    ck_assert_mem_eq(in, out, sizeof(in));
    ck_assert_uint_ne(mc_seg_gpu_addr(s, 0, 1 << 20), 0);
    ck_assert_uint_eq(mc_seg_gpu_addr(s, 1, 1 << 20), 0);
    /* out of range: refused, nothing queued */
    ck_assert_int_eq(s->ops->write(s, (1 << 20) - 10, in, 11), MC_ERR_INVALID);
    ck_assert_int_eq(s->ops->read(s, UINT64_MAX, out, 1), MC_ERR_INVALID);
    mc_seg_destroy(s);
    mc_dev_close(d);
}
END_TEST

/* a device copy that fails is an error of the write, never a silent success */
START_TEST(test_seg_gpu_copy_failure)
{
    struct mc_dev *d = t_dev(0, 2);
    struct mc_seg *s;
    uint8_t in[64], out[64];

    memset(in, 1, sizeof(in));
    memset(out, 9, sizeof(out));
    ck_assert_int_eq(mc_seg_gpu_create(d, 1 << 20, &s), 0);
    ck_assert_int_eq(s->ops->write(s, 0, in, sizeof(in)), 0);      /* copy 1 */
    ck_assert_int_eq(s->ops->read(s, 0, out, sizeof(out)), MC_ERR_IO); /* copy 2 */
    for (size_t i = 0; i < sizeof(out); i++)
        ck_assert_uint_eq(out[i], 9);
    ck_assert_int_eq(s->ops->read(s, 0, out, sizeof(out)), 0);     /* copy 3 */
    ck_assert_mem_eq(in, out, sizeof(in));
    mc_seg_destroy(s);
    mc_dev_close(d);
}
END_TEST

START_TEST(test_gpu_spec_parse)
{
    struct mc_gpu_spec sp[MC_AGENT_GPU_MAX];
    char err[256], many[1024] = "";
    size_t n = 99;

    ck_assert_int_eq(mc_gpu_spec_parse(NULL, sp, &n, err, sizeof(err)), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(mc_gpu_spec_parse("", sp, &n, err, sizeof(err)), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(mc_gpu_spec_parse("test:64M,cuda:8G,cuda3:1G", sp, &n, err, sizeof(err)),
                     0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(sp[0].kind, MC_DEV_TEST);
    ck_assert_uint_eq(sp[0].size, 64ull << 20);
    ck_assert_int_eq(sp[1].kind, MC_DEV_CUDA);
    ck_assert_int_eq(sp[1].ordinal, 0);
    ck_assert_uint_eq(sp[1].size, 8ull << 30);
    ck_assert_int_eq(sp[2].ordinal, 3);
    static const char *const bad[] = {
        "test",          /* no size */
        "test:",         /* empty size */
        "test:12Q",      /* bad unit */
        "test:1K",       /* below 1 MiB */
        "test:64T",      /* above 16 TiB */
        "rocm:1G",       /* unknown device */
        "cudax:1G",      /* bad ordinal */
        "cuda-1:1G",
        "cuda256:1G",
        "cuda1:1G,cuda1:2G", /* twice */
        ":1G",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        n = 77;
        ck_assert_msg(mc_gpu_spec_parse(bad[i], sp, &n, err, sizeof(err)) == MC_ERR_INVALID,
                      "%s accepted", bad[i]);
        ck_assert_msg(strncmp(err, "gpu:", 4) == 0, "%s: %s", bad[i], err);
        ck_assert_uint_eq(n, 0);
    }
    for (int i = 0; i <= MC_AGENT_GPU_MAX; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%scuda%d:1G",
                 i > 0 ? "," : "", i);
    ck_assert_int_eq(mc_gpu_spec_parse(many, sp, &n, err, sizeof(err)), MC_ERR_INVALID);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("seg_gpu");
    TCase *tc = tcase_create("seg_gpu");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_seg_gpu_write_read);
    tcase_add_test(tc, test_seg_gpu_copy_failure);
    tcase_add_test(tc, test_gpu_spec_parse);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
