/*
 * Unit tests of the owner's index (daemon/agent/holdidx.h): what a segment reports to a new
 * master must be exact. Nothing freed comes back (drops, overwrites, TTLs, a DROP that
 * overtakes its PUBLISH), and an older version never displaces a newer one.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/agent/holdidx.h"
#include "daemon/master/master.h"

static struct mc_holdidx_entry ent(const char *key, uint64_t off, uint64_t len, uint64_t ver)
{
    return (struct mc_holdidx_entry){.key = key, .key_len = strlen(key), .offset = off,
                                     .alloc_len = len, .size = len, .version = ver};
}

/* Every listed entry, as "key@off/v" joined by spaces. */
static void listing(struct mc_holdidx *h, char *out, size_t cap, uint64_t now)
{
    struct mc_holdidx_entry e[3];
    uint64_t cursor = 0;
    size_t used = 0;
    int n;

    out[0] = '\0';
    while ((n = mc_holdidx_walk(h, &cursor, e, 3, now)) > 0) {
        for (int i = 0; i < n; i++)
            used += (size_t)snprintf(out + used, cap - used, "%s%.*s@%llu/%llu",
                                     used ? " " : "", (int)e[i].key_len, e[i].key,
                                     (unsigned long long)e[i].offset,
                                     (unsigned long long)e[i].version);
    }
}

START_TEST(test_holdidx_add_walk_drop)
{
    struct mc_holdidx *h;
    char s[512];

    ck_assert_int_eq(mc_holdidx_create(&h), 0);
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("b", 4096, 4096, 7)}[0], 0), 0);
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("a", 0, 4096, 5)}[0], 0), 0);
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("c", 65536, 8192, 9)}[0], 0), 0);
    for (uint64_t i = 0; i < 5; i++) /* more than a page of the walk */
        ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("d", 100000 + i * 10, 10, 10 + i)}[0], 0), 0);
    ck_assert_uint_eq(mc_holdidx_count(h), 8);
    ck_assert_uint_eq(mc_holdidx_bytes(h), 4096 + 4096 + 8192 + 50);
    listing(h, s, sizeof(s), 0);
    ck_assert_str_eq(s, "a@0/5 b@4096/7 c@65536/9 d@100000/10 d@100010/11 d@100020/12 "
                        "d@100030/13 d@100040/14");
    /* a drop of another version changes nothing; of this one, the entry goes */
    ck_assert(!mc_holdidx_drop(h, 4096, 6, 0));
    ck_assert(mc_holdidx_drop(h, 4096, 7, 0));
    ck_assert(mc_holdidx_drop(h, 0, 0, 0)); /* 0: whatever version */
    ck_assert_uint_eq(mc_holdidx_count(h), 6);
    /* invalid entries are refused */
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("", 0, 10, 1)}[0], 0), MC_ERR_INVALID);
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("x", 0, 0, 1)}[0], 0), MC_ERR_INVALID);
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("x", 0, 10, 0)}[0], 0), MC_ERR_INVALID);
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("x", UINT64_MAX - 5, 10, 1)}[0], 0), MC_ERR_INVALID);
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("x", 0, 10, MC_MASTER_VERSION_MAX + 1)}[0], 0), MC_ERR_INVALID);
    {
        struct mc_holdidx_entry e = ent("x", 0, 10, 1);

        e.size = 11;
        ck_assert_int_eq(mc_holdidx_add(h, &e, 0), MC_ERR_INVALID);
    }
    mc_holdidx_destroy(h);
}
END_TEST

START_TEST(test_holdidx_overlap_newer_wins)
{
    struct mc_holdidx *h;
    char s[512];

    ck_assert_int_eq(mc_holdidx_create(&h), 0);
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("old", 4096, 8192, 5)}[0], 0), 0);
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("nb", 16384, 4096, 6)}[0], 0), 0);
    /* the block was freed and reused: a newer put across both displaces them */
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("new", 8192, 12288, 20)}[0], 0), 0);
    listing(h, s, sizeof(s), 0);
    ck_assert_str_eq(s, "new@8192/20");
    /* a late PUBLISH of an older put on any byte of it is ignored */
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("old", 4096, 8192, 5)}[0], 0), 1);
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("late", 8192, 4096, 19)}[0], 0), 1);
    listing(h, s, sizeof(s), 0);
    ck_assert_str_eq(s, "new@8192/20");
    /* a write landing on its bytes (a put we have not heard publish yet) ends it; its own
     * version's write (a repeat) does not */
    ck_assert_uint_eq(mc_holdidx_overwrite(h, 8192, 100, 20), 0);
    ck_assert_uint_eq(mc_holdidx_overwrite(h, 20000, 100, 21), 1);
    ck_assert_uint_eq(mc_holdidx_count(h), 0);
    mc_holdidx_destroy(h);
}
END_TEST

START_TEST(test_holdidx_drop_before_publish)
{
    struct mc_holdidx *h;

    ck_assert_int_eq(mc_holdidx_create(&h), 0);
    /* the master's DROP overtook the writer's PUBLISH */
    ck_assert(!mc_holdidx_drop(h, 4096, 12, 1000));
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("k", 4096, 4096, 12)}[0], 1001), 1);
    ck_assert_uint_eq(mc_holdidx_count(h), 0);
    /* a newer put of that block later is indexed */
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("k", 4096, 4096, 13)}[0], 1002), 0);
    ck_assert_uint_eq(mc_holdidx_count(h), 1);
    /* an old drop does not end a newer entry */
    ck_assert(!mc_holdidx_drop(h, 4096, 12, 1003));
    ck_assert_uint_eq(mc_holdidx_count(h), 1);
    /* tombstones are forgotten after MC_HOLDIDX_TOMB_MS */
    ck_assert(!mc_holdidx_drop(h, 0, 3, 2000));
    mc_holdidx_expire(h, 2000 + MC_HOLDIDX_TOMB_MS);
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("z", 0, 4096, 3)}[0], 2000 + MC_HOLDIDX_TOMB_MS), 0);
    ck_assert_uint_eq(mc_holdidx_count(h), 2);
    mc_holdidx_destroy(h);
}
END_TEST

/* Review finding H1: a PUBLISH try that timed out at its writer is still delivered, maybe
 * after the DROP of its object: it must never index the removed object again. */
START_TEST(test_holdidx_late_repeat_after_drop)
{
    struct mc_holdidx *h;
    char s[512];

    ck_assert_int_eq(mc_holdidx_create(&h), 0);
    /* try 1 indexed, the DROP removes it, try 2 comes late: nothing comes back */
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("k", 4096, 4096, 7)}[0], 100), 0);
    ck_assert(mc_holdidx_drop(h, 4096, 7, 200));
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("k", 4096, 4096, 7)}[0], 300), 1);
    ck_assert_uint_eq(mc_holdidx_count(h), 0);
    /* also when the drop named no version (whatever was there) */
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("j", 65536, 4096, 8)}[0], 300), 0);
    ck_assert(mc_holdidx_drop(h, 65536, 0, 300));
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("j", 65536, 4096, 8)}[0], 300), 1);
    /* a drained copy: the write of copy id 9 lands on a block that had a tombstone of 12,
     * then the copy's PUBLISH comes with the object's version (7): it is indexed */
    ck_assert(!mc_holdidx_drop(h, 131072, 12, 300));
    ck_assert_uint_eq(mc_holdidx_overwrite(h, 131072, 4096, 9), 1); /* the tombstone */
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("k", 131072, 4096, 7)}[0], 400), 0);
    listing(h, s, sizeof(s), 400);
    ck_assert_str_eq(s, "k@131072/7");
    /* tombstones are forgotten after MC_HOLDIDX_TOMB_MS */
    mc_holdidx_expire(h, 300 + MC_HOLDIDX_TOMB_MS);
    ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent("j", 65536, 4096, 8)}[0], 300 + MC_HOLDIDX_TOMB_MS), 0);
    ck_assert_uint_eq(mc_holdidx_count(h), 2);
    mc_holdidx_destroy(h);
}
END_TEST

START_TEST(test_holdidx_ttl)
{
    struct mc_holdidx *h;
    struct mc_holdidx_entry e = ent("t", 0, 4096, 4), out[4];
    uint64_t cursor = 0;

    ck_assert_int_eq(mc_holdidx_create(&h), 0);
    e.ttl_ms = 500;
    e.flags = 0x2; /* soft pin */
    e.size = 4000;
    ck_assert_int_eq(mc_holdidx_add(h, &e, 1000), 0);
    ck_assert_int_eq(mc_holdidx_walk(h, &cursor, out, 4, 1200), 1);
    ck_assert_uint_eq(out[0].ttl_ms, 300);
    ck_assert_uint_eq(out[0].flags, 0x2);
    ck_assert_uint_eq(out[0].size, 4000);
    cursor = 0;
    ck_assert_int_eq(mc_holdidx_walk(h, &cursor, out, 4, 1500), 0); /* expired: gone */
    ck_assert_uint_eq(mc_holdidx_count(h), 0);
    mc_holdidx_destroy(h);
}
END_TEST

START_TEST(test_holdidx_many)
{
    struct mc_holdidx *h;
    struct mc_holdidx_entry out[256];
    uint64_t cursor = 0, prev = 0, n = 0;
    char key[32];
    int k;

    ck_assert_int_eq(mc_holdidx_create(&h), 0);
    /* in a scrambled order */
    for (uint64_t i = 0; i < 100000; i++) {
        uint64_t j = (i * 7919) % 100000;

        snprintf(key, sizeof(key), "key-%llu", (unsigned long long)j);
        ck_assert_int_eq(mc_holdidx_add(h, &(struct mc_holdidx_entry[]){ent(key, j * 4096, 4096, j + 1)}[0], 0), 0);
    }
    ck_assert_uint_eq(mc_holdidx_count(h), 100000);
    while ((k = mc_holdidx_walk(h, &cursor, out, 256, 0)) > 0) {
        for (int i = 0; i < k; i++) {
            ck_assert(n == 0 || out[i].offset > prev);
            prev = out[i].offset;
            n++;
        }
    }
    ck_assert_uint_eq(n, 100000);
    for (uint64_t j = 0; j < 100000; j += 2)
        ck_assert(mc_holdidx_drop(h, j * 4096, j + 1, 0));
    ck_assert_uint_eq(mc_holdidx_count(h), 50000);
    mc_holdidx_destroy(h);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("agent_holdidx");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_holdidx_add_walk_drop);
    tcase_add_test(tc, test_holdidx_overlap_newer_wins);
    tcase_add_test(tc, test_holdidx_drop_before_publish);
    tcase_add_test(tc, test_holdidx_late_repeat_after_drop);
    tcase_add_test(tc, test_holdidx_ttl);
    tcase_add_test(tc, test_holdidx_many);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(t_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
