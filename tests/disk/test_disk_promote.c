/*
 * Promotion (disk_promote, docs/disk.md) on a standalone agent (its embedded master, `--set
 * disk_promote=true`): the scenario of t_promote.h with the knob on, with a promotion held
 * open while its key is removed or replaced, and with the knob off.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mc/mc.h>

#include "tests/integration/t_agent.h"
#include "tests/integration/t_util.h"
#include "tests/disk/t_promote.h"

static void standalone(bool promote, bool delayed)
{
    struct t_agent a;
    char dir[256], path[300];
    const char *extra[12] = {"--disk", path, "--disk-size", "64M", "--set"};
    const char *tmp = getenv("TMPDIR");
    mc_client_t *c;
    int n = 5;

    snprintf(dir, sizeof(dir), "%s/mc-promote-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/S.disk", dir);
    extra[n++] = promote ? "disk_promote=true" : "disk_promote=false";
    if (delayed) {
        extra[n++] = "--test-fault";
        extra[n++] = "promote_delay_ms=1500";
    }
    extra[n] = NULL;
    t_agent_start(&a, "16M", extra);
    c = t_connect(&a);
    t_promote_scenario(c, c, promote, delayed);
    t_client_and_agent_stop(&a, &c);
    unlink(path);
    rmdir(dir);
}

START_TEST(test_disk_promote_standalone)
{
    standalone(true, false);
}
END_TEST

START_TEST(test_disk_promote_standalone_removed_meanwhile)
{
    standalone(true, true);
}
END_TEST

START_TEST(test_disk_promote_off_standalone)
{
    standalone(false, false);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("disk_promote");
    TCase *tc = tcase_create("standalone");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_disk_promote_standalone);
    tcase_add_test(tc, test_disk_promote_standalone_removed_meanwhile);
    tcase_add_test(tc, test_disk_promote_off_standalone);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
