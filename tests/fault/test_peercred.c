/*
 * test_peercred_disallowed_uid_refused: a client running under a uid that is not on the
 * agent's allow-list is refused at connect (MC_ERR_DENIED), and the agent goes on serving
 * allowed clients. test_peercred_allow_uids_adds_to_default: allow_uids widens the default
 * (root and the agent's own uid still connect). test_peercred_allow_gids_supplementary:
 * allow_gids admits through a supplementary group (SO_PEERGROUPS). The other uids and groups
 * come from setpriv (util-linux); the tests need root to switch uid and exit 77 (SKIP)
 * without it.
 */
#include <check.h>
#include <sys/wait.h>

#include <mc/mc.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* a shared helper header */
#include "tests/integration/t_agent.h"
#pragma GCC diagnostic pop

/* Run `mcctl exist some-key` as uid/gid with the supplementary groups `groups` (setpriv's
 * comma list; NULL: none); returns its exit status, stderr in `err`. The binary is copied
 * next to the socket first: the build tree may not be readable by another uid. */
static int t_run_as(const char *mcctl_src, const char *sock, unsigned uid, unsigned gid,
                    const char *groups, char *err, size_t errlen)
{
    char mcctl[512], cmd[1200], ruid[32], rgid[32], grp[64];
    int pipefd[2], status;
    ssize_t n, got = 0;
    pid_t pid;

    snprintf(mcctl, sizeof(mcctl), "%.*s/mcctl", (int)(strrchr(sock, '/') - sock), sock);
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod 0755 '%s'", mcctl_src, mcctl, mcctl);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(ruid, sizeof(ruid), "--reuid=%u", uid);
    snprintf(rgid, sizeof(rgid), "--regid=%u", gid);
    snprintf(grp, sizeof(grp), "--groups=%s", groups != NULL ? groups : "");

    ck_assert_int_eq(pipe(pipefd), 0);
    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(pipefd[1], STDERR_FILENO);
        close(pipefd[0]);
        execlp("setpriv", "setpriv", ruid, rgid, groups != NULL ? grp : "--clear-groups",
               mcctl, "--socket", sock, "exist", "some-key", (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    while ((n = read(pipefd[0], err + got, errlen - 1 - (size_t)got)) > 0)
        got += n;
    err[got] = '\0';
    close(pipefd[0]);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int t_run_as_nobody(const char *mcctl_src, const char *sock, char *err, size_t errlen)
{
    return t_run_as(mcctl_src, sock, 65534, 65534, NULL, err, errlen);
}

/* mcctl exits 1 for "not found" (it connected and asked), 3 when refused at connect */
#define T_ADMITTED 1
#define T_REFUSED  3

static void t_need_setpriv(const char *mcctl)
{
    if (geteuid() != 0 || mcctl == NULL || system("command -v setpriv >/dev/null") != 0) {
        fprintf(stderr, "needs root, setpriv and MC_MCCTL_BIN: skipping\n");
        exit(77);
    }
}

START_TEST(test_peercred_disallowed_uid_refused)
{
    const char *mcctl = getenv("MC_MCCTL_BIN");
    struct t_agent a;
    mc_client_t *c;
    char err[1024];
    int rc;

    t_need_setpriv(mcctl);
    t_agent_start(&a, "64M", NULL);
    /* let nobody reach the socket: only the credential check may stop it */
    ck_assert_int_eq(chmod(a.dir, 0755), 0);
    rc = t_run_as_nobody(mcctl, a.sock, err, sizeof(err));
    ck_assert_msg(rc == T_REFUSED, "mcctl as nobody exited %d: %s", rc, err);
    ck_assert_msg(strstr(err, "permission denied") != NULL, "stderr: %s", err);
    /* allowed clients are still served */
    ck_assert_int_eq(mc_connect(a.sock, &c), 0);
    ck_assert_int_eq(mc_exist(c, "some-key"), 0);
    mc_close(c);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

START_TEST(test_peercred_allow_list_admits_listed_uid)
{
    const char *mcctl = getenv("MC_MCCTL_BIN");
    const char *extra[] = {"--set", "allow_uids=0,65534", NULL};
    struct t_agent a;
    char err[1024];
    int rc;

    t_need_setpriv(mcctl);
    t_agent_start(&a, "64M", extra);
    ck_assert_int_eq(chmod(a.dir, 0755), 0);
    rc = t_run_as_nobody(mcctl, a.sock, err, sizeof(err));
    ck_assert_msg(rc == T_ADMITTED, "mcctl as a listed uid exited %d: %s", rc, err);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

/* allow_uids adds to the default: with another uid listed, root (here also the agent's own
 * uid) still connects, the listed uid connects, and an unlisted one is refused. */
START_TEST(test_peercred_allow_uids_adds_to_default)
{
    const char *mcctl = getenv("MC_MCCTL_BIN");
    const char *extra[] = {"--set", "allow_uids=65533", NULL};
    struct t_agent a;
    mc_client_t *c;
    char err[1024];
    int rc;

    t_need_setpriv(mcctl);
    t_agent_start(&a, "64M", extra);
    ck_assert_int_eq(chmod(a.dir, 0755), 0);
    ck_assert_int_eq(mc_connect(a.sock, &c), 0);
    ck_assert_int_eq(mc_exist(c, "some-key"), 0);
    mc_close(c);
    rc = t_run_as(mcctl, a.sock, 65533, 65533, NULL, err, sizeof(err));
    ck_assert_msg(rc == T_ADMITTED, "mcctl as a listed uid exited %d: %s", rc, err);
    rc = t_run_as(mcctl, a.sock, 65532, 65532, NULL, err, sizeof(err));
    ck_assert_msg(rc == T_REFUSED, "mcctl as an unlisted uid exited %d: %s", rc, err);
    ck_assert_msg(strstr(err, "permission denied") != NULL, "stderr: %s", err);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

/* allow_gids admits a client through a supplementary group, not only its primary gid; a
 * client in none of the listed groups is refused. */
START_TEST(test_peercred_allow_gids_supplementary)
{
    const char *mcctl = getenv("MC_MCCTL_BIN");
    const char *extra[] = {"--set", "allow_gids=65531", NULL};
    struct t_agent a;
    char err[1024];
    int rc;

    t_need_setpriv(mcctl);
    t_agent_start(&a, "64M", extra);
    ck_assert_int_eq(chmod(a.dir, 0755), 0);
    rc = t_run_as(mcctl, a.sock, 65530, 65530, "65529,65531", err, sizeof(err));
    ck_assert_msg(rc == T_ADMITTED, "mcctl with a listed supplementary group exited %d: %s",
                  rc, err);
    rc = t_run_as(mcctl, a.sock, 65530, 65530, "65529", err, sizeof(err));
    ck_assert_msg(rc == T_REFUSED, "mcctl in no listed group exited %d: %s", rc, err);
    ck_assert_msg(strstr(err, "permission denied") != NULL, "stderr: %s", err);
    /* the primary gid still counts */
    rc = t_run_as(mcctl, a.sock, 65530, 65531, NULL, err, sizeof(err));
    ck_assert_msg(rc == T_ADMITTED, "mcctl with a listed primary gid exited %d: %s", rc, err);
    ck_assert_int_eq(t_agent_stop(&a), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("peercred");
    TCase *tc = tcase_create("peercred");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_peercred_disallowed_uid_refused);
    tcase_add_test(tc, test_peercred_allow_list_admits_listed_uid);
    tcase_add_test(tc, test_peercred_allow_uids_adds_to_default);
    tcase_add_test(tc, test_peercred_allow_gids_supplementary);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
