/*
 * PUBLISHes carried over a master change, the owner's side (daemon/agent/carry.c): the
 * segment an item names, by the ids of the reign it was made in -- the master followed now,
 * one of the last REIGNS_KEPT remembered, or none (a reign never followed, or forgotten).
 */
#include <check.h>
#include <stdlib.h>

#include "daemon/agent/cluster_int.h"

struct t_carry {
    struct mc_agent *a;
    struct cluster *cl;
    struct mc_seg s0, s1;
};

static void t_carry_init(struct t_carry *t)
{
    t->a = calloc(1, sizeof(*t->a));
    t->cl = calloc(1, sizeof(*t->cl));
    ck_assert_ptr_nonnull(t->a);
    ck_assert_ptr_nonnull(t->cl);
    t->a->ten = calloc(2, sizeof(*t->a->ten));
    ck_assert_ptr_nonnull(t->a->ten);
    t->a->ntenants = 2;
    t->a->ten[0].seg = &t->s0;
    t->a->ten[0].seg_id = 5;
    t->a->ten[1].seg = &t->s1;
    t->a->ten[1].seg_id = 7;
    t->cl->a = t->a;
    t->cl->m_epoch = 3;
    t->cl->m_incarnation = 11;
}

static struct mc_seg *t_find(struct t_carry *t, uint64_t epoch, uint64_t inc, uint32_t seg,
                             uint32_t *local_p, bool *earlier_p)
{
    struct mc_proto_publish_item it = {.m_epoch = epoch, .m_incarnation = inc, .seg = seg};

    *local_p = UINT32_MAX;
    return cl_publish_seg(t->cl, &it, local_p, earlier_p);
}

/* A new master (new ids): an item of the old reign still finds its segment, one of the new
 * reign by the new ids; ids of one reign never stand for another's. */
START_TEST(test_carry_maps_earlier_reign)
{
    struct t_carry t;
    uint32_t local;
    bool earlier;

    t_carry_init(&t);
    ck_assert_ptr_eq(t_find(&t, 3, 11, 7, &local, &earlier), &t.s1);
    ck_assert_uint_eq(local, 1);
    ck_assert(!earlier);
    ck_assert_ptr_null(t_find(&t, 3, 11, 6, &local, &earlier));
    /* the master changes: its ids are remembered before the MOUNTs give new ones */
    cl_reign_remember(t.cl);
    t.cl->m_epoch = 4;
    t.cl->m_incarnation = 12;
    t.a->ten[0].seg_id = 7; /* the old id of segment 1 names segment 0 now */
    t.a->ten[1].seg_id = 1;
    ck_assert_ptr_eq(t_find(&t, 3, 11, 7, &local, &earlier), &t.s1);
    ck_assert_uint_eq(local, 1);
    ck_assert(earlier);
    ck_assert_ptr_eq(t_find(&t, 3, 11, 5, &local, &earlier), &t.s0);
    ck_assert(earlier);
    ck_assert_ptr_null(t_find(&t, 3, 11, 1, &local, &earlier)); /* a new id, an old reign */
    ck_assert_ptr_eq(t_find(&t, 4, 12, 7, &local, &earlier), &t.s0);
    ck_assert(!earlier);
    ck_assert_ptr_eq(t_find(&t, 4, 12, 1, &local, &earlier), &t.s1);
    /* the same epoch, another process (a master restarted without etcd): not that reign */
    ck_assert_ptr_null(t_find(&t, 3, 99, 7, &local, &earlier));
    /* a reign never followed (we restarted since, or a forged one) */
    ck_assert_ptr_null(t_find(&t, 0, 0, 5, &local, &earlier));
    ck_assert_ptr_null(t_find(&t, 2, 11, 5, &local, &earlier));
    free(t.cl);
    free(t.a->ten);
    free(t.a);
}
END_TEST

/* The last REIGNS_KEPT masters are remembered, older ones forgotten; before any master was
 * followed nothing is. */
START_TEST(test_carry_keeps_last_reigns)
{
    struct t_carry t;
    uint32_t local;
    bool earlier;

    t_carry_init(&t);
    t.cl->m_incarnation = 0; /* none followed yet */
    cl_reign_remember(t.cl);
    t.cl->m_incarnation = 11;
    ck_assert_ptr_null(t_find(&t, 3, 0, 5, &local, &earlier)); /* nothing remembered */
    for (uint32_t k = 0; k < REIGNS_KEPT + 1; k++) {
        cl_reign_remember(t.cl); /* reign (3 + k, 11 + k) with ids 5 + k, 7 + k */
        t.cl->m_epoch++;
        t.cl->m_incarnation++;
        t.a->ten[0].seg_id++;
        t.a->ten[1].seg_id++;
    }
    ck_assert_ptr_null(t_find(&t, 3, 11, 5, &local, &earlier)); /* the oldest: forgotten */
    for (uint32_t k = 1; k < REIGNS_KEPT + 1; k++) {
        ck_assert_ptr_eq(t_find(&t, 3 + k, 11 + k, 7 + k, &local, &earlier), &t.s1);
        ck_assert(earlier);
        ck_assert_ptr_eq(t_find(&t, 3 + k, 11 + k, 5 + k, &local, &earlier), &t.s0);
    }
    free(t.cl);
    free(t.a->ten);
    free(t.a);
}
END_TEST

/* An item of an earlier reign is indexed only when the owner can tell the master it follows
 * now at once: not while it still rejoins it (review H2: indexed then, its own report may be
 * refused and leave a tombstone), nor with LATE_MAX late RESTOREs under way (L2); one
 * already under way or answered goes on to cl_publish_late. */
START_TEST(test_carry_busy_before_indexing)
{
    struct t_carry t;
    struct mc_proto_publish_item it = {.m_epoch = 3, .m_incarnation = 11, .seg = 5,
                                       .offset = 4096, .version = 9};
    struct latepub lp = {.local = 0, .offset = 4096, .version = 9, .pending = true};

    t_carry_init(&t);
    t.a->ml = (struct mlink *)&t; /* a link to the master (never called here) */
    t.cl->mstate = M_UP;
    ck_assert_int_eq(cl_publish_late_busy(t.cl, 0, &it), 0);
    t.cl->mstate = M_MOUNT; /* HELLOed the new master, its MOUNT out */
    ck_assert_int_eq(cl_publish_late_busy(t.cl, 0, &it), MC_ERR_BUSY);
    t.cl->mstate = M_HELLO;
    ck_assert_int_eq(cl_publish_late_busy(t.cl, 0, &it), MC_ERR_BUSY);
    t.cl->mstate = M_UP;
    t.cl->nlatepubs = LATE_MAX;
    ck_assert_int_eq(cl_publish_late_busy(t.cl, 0, &it), MC_ERR_BUSY);
    t.cl->latepubs = &lp; /* this very item: under way, cl_publish_late answers */
    ck_assert_int_eq(cl_publish_late_busy(t.cl, 0, &it), 0);
    t.cl->latepubs = NULL;
    t.cl->nlatepubs = 0;
    t.a->ml = NULL;
    free(t.cl);
    free(t.a->ten);
    free(t.a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("carry");
    TCase *tc = tcase_create("carry");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_carry_maps_earlier_reign);
    tcase_add_test(tc, test_carry_keeps_last_reigns);
    tcase_add_test(tc, test_carry_busy_before_indexing);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
