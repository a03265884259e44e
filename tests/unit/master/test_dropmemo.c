/*
 * mc-master's memory of disk versions whose DROP is unanswered (daemon/mcmaster/dropmemo.c):
 * a set with deletion by backward shift and a FIFO bound. Checked against a plain model
 * over random adds and deletes (clustered values, so probe chains wrap and collide), and
 * the bound: past DROPMEMO_MAX adds, the oldest leave first.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/master/master.h"
#include "daemon/mcmaster/dropmemo.h"

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

START_TEST(test_dropmemo_matches_a_model)
{
    enum { RANGE = 5000 };
    struct mc_dropmemo *m;
    static uint32_t model[RANGE]; /* blocks of each version */
    uint64_t n = 0;

    memset(model, 0, sizeof(model));
    ck_assert_int_eq(mc_dropmemo_create(&m), 0);
    ck_assert(!mc_dropmemo_has(m, 0));
    mc_dropmemo_add(m, 0); /* not a version: ignored */
    ck_assert_uint_eq(mc_dropmemo_count(m), 0);
    for (int i = 0; i < 20000; i++) { /* adds below the bound: nothing forgotten */
        uint64_t v = 1 + rnd() % (RANGE - 1);

        if (rnd() % 3 != 0) {
            mc_dropmemo_add(m, v);
            n += model[v] == 0;
            model[v]++;
        } else {
            mc_dropmemo_del(m, v);
            if (model[v] > 0 && --model[v] == 0)
                n--;
        }
        if (i % 1000 == 0) {
            for (uint64_t w = 1; w < RANGE; w++)
                ck_assert_msg(mc_dropmemo_has(m, w) == (model[w] > 0), "version %llu",
                              (unsigned long long)w);
        }
        ck_assert_uint_eq(mc_dropmemo_count(m), n);
    }
    ck_assert_uint_eq(mc_dropmemo_forgotten(m), 0); /* far below the bound */
    mc_dropmemo_destroy(m);
}
END_TEST

START_TEST(test_dropmemo_bound_forgets_the_oldest)
{
    struct mc_dropmemo *m;
    const uint64_t extra = 1000;

    ck_assert_int_eq(mc_dropmemo_create(&m), 0);
    for (uint64_t v = 1; v <= DROPMEMO_MAX + extra; v++)
        mc_dropmemo_add(m, v * 7919u);
    ck_assert_uint_eq(mc_dropmemo_count(m), DROPMEMO_MAX);
    ck_assert_uint_eq(mc_dropmemo_forgotten(m), extra);
    for (uint64_t v = 1; v <= extra; v++)
        ck_assert(!mc_dropmemo_has(m, v * 7919u));
    for (uint64_t v = extra + 1; v <= DROPMEMO_MAX + extra; v++)
        ck_assert(mc_dropmemo_has(m, v * 7919u));
    /* a version deleted (its DROP answered) is not counted as forgotten when its turn comes */
    mc_dropmemo_del(m, (extra + 1) * 7919u);
    mc_dropmemo_add(m, 1);
    ck_assert_uint_eq(mc_dropmemo_forgotten(m), extra);
    ck_assert(mc_dropmemo_has(m, 1));
    mc_dropmemo_destroy(m);
}
END_TEST

static bool seg_odd_is_disk(void *ctx, uint32_t seg)
{
    (void)ctx;
    return seg % 2 == 1;
}

/* A RESTORE batch: the remembered versions of disk segments are refused, every other item
 * (a remembered version in a DRAM segment too) goes on, and the results come back in the
 * batch's order. */
START_TEST(test_dropmemo_filters_a_restore_batch)
{
    struct mc_dropmemo *m;
    struct mc_master_restore_req reqs[6];
    bool refused[6];
    int results[6];
    uint32_t k;

    ck_assert_int_eq(mc_dropmemo_create(&m), 0);
    mc_dropmemo_add(m, 11);
    mc_dropmemo_add(m, 13);
    for (uint32_t i = 0; i < 6; i++)
        reqs[i] = (struct mc_master_restore_req){.seg = i, .version = 10 + i};
    /* versions 10..15 in segments 0..5: 11 (seg 1, disk) refused; 13 (seg 3, disk)
     * refused; 12 in seg 2 (DRAM) is not remembered anyway */
    k = mc_dropmemo_filter(m, reqs, 6, seg_odd_is_disk, NULL, refused);
    ck_assert_uint_eq(k, 4);
    ck_assert_uint_eq(reqs[0].version, 10);
    ck_assert_uint_eq(reqs[1].version, 12);
    ck_assert_uint_eq(reqs[2].version, 14);
    ck_assert_uint_eq(reqs[3].version, 15);
    for (uint32_t i = 0; i < k; i++)
        results[i] = (int)reqs[i].version; /* what the executor said of each */
    mc_dropmemo_merge(results, 6, refused, -99);
    ck_assert_int_eq(results[0], 10);
    ck_assert_int_eq(results[1], -99);
    ck_assert_int_eq(results[2], 12);
    ck_assert_int_eq(results[3], -99);
    ck_assert_int_eq(results[4], 14);
    ck_assert_int_eq(results[5], 15);
    /* a remembered version in a DRAM segment is not refused */
    reqs[0] = (struct mc_master_restore_req){.seg = 2, .version = 11};
    ck_assert_uint_eq(mc_dropmemo_filter(m, reqs, 1, seg_odd_is_disk, NULL, refused), 1);
    mc_dropmemo_destroy(m);
}
END_TEST

/* A version freed from two disks: one owner's answer leaves the other's block remembered
 * (review D3: a restore of it from the other disk is still refused). */
START_TEST(test_dropmemo_counts_blocks_of_a_version)
{
    struct mc_dropmemo *m;

    ck_assert_int_eq(mc_dropmemo_create(&m), 0);
    mc_dropmemo_add(m, 42); /* its block on disk A */
    mc_dropmemo_add(m, 42); /* and on disk B */
    ck_assert_uint_eq(mc_dropmemo_count(m), 1);
    mc_dropmemo_del(m, 42); /* A answered */
    ck_assert(mc_dropmemo_has(m, 42));
    mc_dropmemo_del(m, 42); /* B answered */
    ck_assert(!mc_dropmemo_has(m, 42));
    mc_dropmemo_del(m, 42); /* a repeat: nothing */
    ck_assert_uint_eq(mc_dropmemo_count(m), 0);
    mc_dropmemo_destroy(m);
}
END_TEST

/* What a drop taken from the directory does to the memo (issue 12, holes D1 and D5): a
 * disk block RETIRED is remembered and sent (as a retired DROP: its owner marks the record
 * removed, diskdrops.c); its later FREED drop (after_retire) is sent and not remembered
 * again, so its answer forgets the version; a plain disk FREED drop is remembered and sent;
 * a memory block is never remembered, and a RETIRED one of it never sent. Fails when a
 * RETIRED disk drop is not sent (nothing marked on the owner's disk: a restart of both
 * brings the record back) or counted twice (never forgotten). */
START_TEST(test_dropmemo_notes_retired_then_freed)
{
    struct mc_dropmemo *m;
    struct mc_master_drop d = {.seg = 1, .offset = 4096, .version = 7,
                               .kind = MC_MASTER_DROP_RETIRED};

    ck_assert_int_eq(mc_dropmemo_create(&m), 0);
    ck_assert(mc_dropmemo_note(m, &d, true));
    ck_assert(mc_dropmemo_has(m, 7));
    d.kind = MC_MASTER_DROP_FREED;
    d.after_retire = true;
    ck_assert(mc_dropmemo_note(m, &d, true));
    mc_dropmemo_del(m, 7); /* the owner answered the DROP */
    ck_assert(!mc_dropmemo_has(m, 7));
    d.after_retire = false;
    d.version = 8;
    ck_assert(mc_dropmemo_note(m, &d, true));
    ck_assert(mc_dropmemo_has(m, 8));
    d.version = 9;
    ck_assert(mc_dropmemo_note(m, &d, false));
    d.kind = MC_MASTER_DROP_RETIRED;
    ck_assert(!mc_dropmemo_note(m, &d, false));
    ck_assert(!mc_dropmemo_has(m, 9));
    mc_dropmemo_destroy(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dropmemo");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_dropmemo_matches_a_model);
    tcase_add_test(tc, test_dropmemo_bound_forgets_the_oldest);
    tcase_add_test(tc, test_dropmemo_filters_a_restore_batch);
    tcase_add_test(tc, test_dropmemo_counts_blocks_of_a_version);
    tcase_add_test(tc, test_dropmemo_notes_retired_then_freed);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
