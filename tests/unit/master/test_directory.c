/* Unit tests of the master's key table (daemon/master/directory.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include <mc/mc_status.h>

#include "daemon/master/directory.h"

struct t_rec {
    size_t len;
    char key[32];
};

static const char *t_key_of(const void *rec, size_t *len_p)
{
    const struct t_rec *r = rec;

    *len_p = r->len;
    return r->key;
}

static struct t_rec *t_rec_new(unsigned i)
{
    struct t_rec *r = calloc(1, sizeof(*r));

    r->len = (size_t)snprintf(r->key, sizeof(r->key), "key/%u", i);
    return r;
}

static void *t_find(struct mc_dir *d, const struct t_rec *r)
{
    return mc_dir_find(d, mc_dir_hash(r->key, r->len), r->key, r->len);
}

START_TEST(test_dir_create_rejects_bad_shards)
{
    struct mc_dir *d = NULL;

    ck_assert_int_eq(mc_dir_create(0, t_key_of, &d), MC_ERR_INVALID);
    ck_assert_int_eq(mc_dir_create(3, t_key_of, &d), MC_ERR_INVALID);
    ck_assert_int_eq(mc_dir_create(8192, t_key_of, &d), MC_ERR_INVALID);
    ck_assert_int_eq(mc_dir_create(4, NULL, &d), MC_ERR_INVALID);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(mc_dir_create(1, t_key_of, &d), 0);
    mc_dir_destroy(d);
}
END_TEST

START_TEST(test_dir_insert_find_remove_grow)
{
    enum { N = 100000 };
    struct t_rec **recs = calloc(N, sizeof(*recs));
    struct mc_dir *d;
    unsigned i;

    ck_assert_int_eq(mc_dir_create(8, t_key_of, &d), 0);
    for (i = 0; i < N; i++) {
        recs[i] = t_rec_new(i);
        ck_assert_ptr_null(t_find(d, recs[i]));
        ck_assert_int_eq(mc_dir_insert(d, mc_dir_hash(recs[i]->key, recs[i]->len), recs[i]), 0);
    }
    ck_assert_uint_eq(mc_dir_count(d), N);
    for (i = 0; i < N; i++)
        ck_assert_ptr_eq(t_find(d, recs[i]), recs[i]);
    /* slots at most 1 / 0.4 per record after growth */
    ck_assert_uint_le(mc_dir_meta_bytes(d), (uint64_t)N * 8 * 3 + 4096);
    for (i = 0; i < N; i += 2) {
        ck_assert(mc_dir_remove(d, mc_dir_hash(recs[i]->key, recs[i]->len), recs[i]));
        ck_assert(!mc_dir_remove(d, mc_dir_hash(recs[i]->key, recs[i]->len), recs[i]));
    }
    for (i = 0; i < N; i++)
        ck_assert_ptr_eq(t_find(d, recs[i]), i % 2 ? recs[i] : NULL);
    ck_assert_uint_eq(mc_dir_count(d), N / 2);
    mc_dir_destroy(d);
    for (i = 0; i < N; i++)
        free(recs[i]);
    free(recs);
}
END_TEST

/* Random inserts/removes on a tiny table (long probe runs, wrap-around) against a model. */
START_TEST(test_dir_randomized_against_model)
{
    enum { K = 300 };
    struct t_rec *recs[K];
    bool in[K] = {false};
    struct mc_dir *d;
    uint64_t x = 12345;
    unsigned i, n;

    ck_assert_int_eq(mc_dir_create(1, t_key_of, &d), 0);
    for (i = 0; i < K; i++)
        recs[i] = t_rec_new(i * 7919u);
    for (n = 0; n < 200000; n++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        i = (unsigned)(x % K);
        if (in[i]) {
            ck_assert(mc_dir_remove(d, mc_dir_hash(recs[i]->key, recs[i]->len), recs[i]));
        } else {
            ck_assert_ptr_null(t_find(d, recs[i]));
            ck_assert_int_eq(mc_dir_insert(d, mc_dir_hash(recs[i]->key, recs[i]->len), recs[i]),
                             0);
        }
        in[i] = !in[i];
        if (n % 1000 == 0) {
            for (i = 0; i < K; i++)
                ck_assert_ptr_eq(t_find(d, recs[i]), in[i] ? recs[i] : NULL);
        }
    }
    mc_dir_destroy(d);
    for (i = 0; i < K; i++)
        free(recs[i]);
}
END_TEST

START_TEST(test_dir_cursor_visits_all_and_removes)
{
    enum { N = 5000 };
    struct t_rec *recs[N];
    struct mc_dir *d;
    struct mc_dir_cursor c;
    unsigned i, seen = 0, removed = 0;
    struct t_rec *r;

    ck_assert_int_eq(mc_dir_create(4, t_key_of, &d), 0);
    for (i = 0; i < N; i++) {
        recs[i] = t_rec_new(i);
        mc_dir_insert(d, mc_dir_hash(recs[i]->key, recs[i]->len), recs[i]);
    }
    mc_dir_cursor_init(&c);
    /* remove every record whose number is odd while walking; none may be skipped */
    while ((r = mc_dir_cursor_next(d, &c)) != NULL) {
        unsigned k = (unsigned)atoi(r->key + 4);

        seen++;
        if (k % 2) {
            mc_dir_cursor_remove(d, &c);
            removed++;
        }
    }
    ck_assert_uint_ge(seen, N);
    ck_assert_uint_eq(removed, N / 2);
    ck_assert_uint_eq(mc_dir_count(d), N / 2);
    for (i = 0; i < N; i++)
        ck_assert_ptr_eq(t_find(d, recs[i]), i % 2 ? NULL : recs[i]);
    /* a new pass starts over */
    ck_assert_ptr_nonnull(mc_dir_cursor_next(d, &c));
    mc_dir_destroy(d);
    for (i = 0; i < N; i++)
        free(recs[i]);
}
END_TEST

START_TEST(test_dir_replace_keeps_key_slot)
{
    struct mc_dir *d;
    struct t_rec *a = t_rec_new(1), *b = t_rec_new(1);
    uint64_t h = mc_dir_hash(a->key, a->len);

    ck_assert_int_eq(mc_dir_create(2, t_key_of, &d), 0);
    ck_assert_int_eq(mc_dir_insert(d, h, a), 0);
    ck_assert(mc_dir_replace(d, h, a, b));
    ck_assert_ptr_eq(t_find(d, a), b);
    ck_assert(!mc_dir_replace(d, h, a, b));
    mc_dir_destroy(d);
    free(a);
    free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("directory");
    TCase *tc = tcase_create("directory");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_dir_create_rejects_bad_shards);
    tcase_add_test(tc, test_dir_insert_find_remove_grow);
    tcase_add_test(tc, test_dir_randomized_against_model);
    tcase_add_test(tc, test_dir_cursor_visits_all_and_removes);
    tcase_add_test(tc, test_dir_replace_keeps_key_slot);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
