/*
 * Unit tests of mc-bench's trace support (tests/bench/trace.h): hostile lines are reported
 * with their line numbers and skipped, the offline LRU follows the replay's prefix-hit
 * semantics, block contents are a function of the hash id.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/bench/trace.h"

static int parse(const char *line, struct mct_req *r, char *why)
{
    return mct_parse_line(line, strlen(line), r, why, 256);
}

START_TEST(test_parse_good_line)
{
    struct mct_req r;
    char why[256];

    ck_assert_int_eq(parse("{\"timestamp\":27482,\"input_length\":6955,\"output_length\":52,"
                           "\"hash_ids\":[46,47,48,49]}",
                           &r, why),
                     0);
    ck_assert_uint_eq(r.nblocks, 4);
    ck_assert_uint_eq(r.ids[0], 46);
    ck_assert_uint_eq(r.ids[3], 49);
    ck_assert_uint_eq(r.input_length, 6955);
    ck_assert_uint_eq(r.output_length, 52);
    ck_assert(r.timestamp == 27482.0);
    free(r.ids);
    /* only hash_ids is required; an empty list is a request of no blocks */
    ck_assert_int_eq(parse("{\"hash_ids\":[]}", &r, why), 0);
    ck_assert_uint_eq(r.nblocks, 0);
    free(r.ids);
    ck_assert_int_eq(parse("  \r", &r, why), 1);
}
END_TEST

START_TEST(test_parse_hostile_lines)
{
    static const char *const bad[] = {
        "not json",
        "[1,2,3]",
        "{\"hash_ids\":\"1,2\"}",
        "{\"hash_ids\":[1,-2]}",
        "{\"hash_ids\":[1,2.5]}",
        "{\"hash_ids\":[1,null]}",
        "{\"hash_ids\":[184467440737095516150]}",
        "{\"timestamp\":\"now\",\"hash_ids\":[1]}",
        "{\"input_length\":-1,\"hash_ids\":[1]}",
        "{\"hash_ids\":[1],\"hash_ids\":[2]}",
        "{\"hash_ids\":[1]",
        "{}",
    };
    struct mct_req r;
    char why[256];
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        ck_assert_msg(parse(bad[i], &r, why) == -1, "accepted: %s", bad[i]);
        ck_assert_msg(why[0] != '\0', "no reason for: %s", bad[i]);
        ck_assert_ptr_null(r.ids);
    }
}
END_TEST

START_TEST(test_parse_too_many_blocks)
{
    size_t n = MCT_MAX_BLOCKS + 1, i, at = 0;
    char *line = malloc(n * 8 + 32), why[256];
    struct mct_req r;

    at += (size_t)sprintf(line, "{\"hash_ids\":[");
    for (i = 0; i < n; i++)
        at += (size_t)sprintf(line + at, "%s%zu", i > 0 ? "," : "", i);
    sprintf(line + at, "]}");
    ck_assert_int_eq(parse(line, &r, why), -1);
    ck_assert_ptr_nonnull(strstr(why, "more than"));
    free(line);
}
END_TEST

START_TEST(test_load_skips_and_numbers_malformed_lines)
{
    static const char text[] = "{\"hash_ids\":[10,11]}\n"
                               "garbage\n"
                               "\n"
                               "{\"hash_ids\":[10,11,12]}\n"
                               "{\"hash_ids\":[1,\"x\"]}\n"
                               "{\"hash_ids\":[7]}"; /* no newline at the end */
    FILE *in = fmemopen((void *)text, sizeof(text) - 1, "r");
    char *errs = NULL;
    size_t errlen = 0;
    FILE *err = open_memstream(&errs, &errlen);
    struct mct_trace t;

    ck_assert_ptr_nonnull(in);
    ck_assert_int_eq(mct_trace_load(in, "t.jsonl", err, &t), 0);
    fclose(in);
    fclose(err);
    ck_assert_uint_eq(t.nreqs, 3);
    ck_assert_uint_eq(t.malformed, 2);
    ck_assert_uint_eq(t.nblocks, 6);
    ck_assert_uint_eq(t.ndistinct, 4);
    ck_assert_ptr_nonnull(strstr(errs, "t.jsonl:2: "));
    ck_assert_ptr_nonnull(strstr(errs, "t.jsonl:5: "));
    ck_assert_ptr_null(strstr(errs, "t.jsonl:3: "));
    /* dense indices in id order: 7 -> 0, 10 -> 1, 11 -> 2, 12 -> 3 */
    ck_assert_uint_eq(t.reqs[1].idx[0], 1);
    ck_assert_uint_eq(t.reqs[1].idx[2], 3);
    ck_assert_uint_eq(t.reqs[2].idx[0], 0);
    free(errs);
    mct_trace_free(&t);
}
END_TEST

static void load_text(const char *text, struct mct_trace *t)
{
    FILE *in = fmemopen((void *)text, strlen(text), "r");

    ck_assert_ptr_nonnull(in);
    ck_assert_int_eq(mct_trace_load(in, "t", NULL, t), 0);
    fclose(in);
}

START_TEST(test_lru_prefix_semantics)
{
    struct mct_trace t;

    /* capacity 2: [1,2] miss miss; [1,2] hit hit; [3] miss, evicts 1 (least recent);
     * [1,2] 1 misses, so 2 is no hit either (prefix); [5,2]: 5 misses first: 0 */
    load_text("{\"hash_ids\":[1,2]}\n{\"hash_ids\":[1,2]}\n{\"hash_ids\":[3]}\n"
              "{\"hash_ids\":[1,2]}\n{\"hash_ids\":[5,2]}\n",
              &t);
    ck_assert_uint_eq(mct_lru_hits(&t, 2), 2);
    /* capacity 3 holds everything but the last request's 5 */
    ck_assert_uint_eq(mct_lru_hits(&t, 3), 4);
    ck_assert_uint_eq(mct_lru_hits(&t, 1000), 4);
    ck_assert_uint_eq(mct_lru_hits(&t, 0), 0);
    mct_trace_free(&t);

    /* a hit refreshes recency: [1],[2],[1],[3] at capacity 2 evicts 2, not 1 */
    load_text("{\"hash_ids\":[1]}\n{\"hash_ids\":[2]}\n{\"hash_ids\":[1]}\n{\"hash_ids\":[3]}\n"
              "{\"hash_ids\":[1]}\n{\"hash_ids\":[2]}\n",
              &t);
    ck_assert_uint_eq(mct_lru_hits(&t, 2), 2);
    mct_trace_free(&t);
}
END_TEST

START_TEST(test_fill_and_check)
{
    unsigned char a[1003], b[1003];

    mct_fill(a, sizeof(a), 42);
    ck_assert(mct_check(a, sizeof(a), 42));
    ck_assert(!mct_check(a, sizeof(a), 43));
    mct_fill(b, sizeof(b), 43);
    ck_assert(memcmp(a, b, sizeof(a)) != 0);
    a[1002] ^= 1; /* the tail past the last whole word counts too */
    ck_assert(!mct_check(a, sizeof(a), 42));
    a[1002] ^= 1;
    a[8] ^= 0x80;
    ck_assert(!mct_check(a, sizeof(a), 42));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bench_trace");
    TCase *tc = tcase_create("trace");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_parse_good_line);
    tcase_add_test(tc, test_parse_hostile_lines);
    tcase_add_test(tc, test_parse_too_many_blocks);
    tcase_add_test(tc, test_load_skips_and_numbers_malformed_lines);
    tcase_add_test(tc, test_lru_prefix_semantics);
    tcase_add_test(tc, test_fill_and_check);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
