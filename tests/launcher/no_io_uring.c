/*
 * mc-no-io-uring: run a command the way Docker's default seccomp profile (since Docker 25)
 * and containerd 2's RuntimeDefault run it, as far as io_uring goes: io_uring_setup,
 * io_uring_enter and io_uring_register fail with EPERM. The filter is inherited by every
 * process the command starts, so a test run under it has its agents, clients and tools
 * denied io_uring too.
 *
 *   mc-no-io-uring COMMAND [ARGS...]    exec COMMAND under the filter
 *   mc-no-io-uring --check              exit 0 when io_uring_setup is denied with EPERM
 *
 * As root the filter goes in without no_new_privs (as Docker does), so set-uid tools the
 * tests run keep working; otherwise no_new_privs is required by the kernel.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int deny_io_uring(void)
{
    static const int calls[] = {SCMP_SYS(io_uring_setup), SCMP_SYS(io_uring_enter),
                                SCMP_SYS(io_uring_register)};
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int err = ctx == NULL ? -ENOMEM : 0;

    for (size_t i = 0; err == 0 && i < sizeof(calls) / sizeof(calls[0]); i++)
        err = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), calls[i], 0);
    if (err == 0 && geteuid() == 0)
        err = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
    if (err == 0)
        err = seccomp_load(ctx);
    seccomp_release(ctx);
    return err;
}

int main(int argc, char **argv)
{
    int err;

    if (argc < 2) {
        fprintf(stderr, "usage: mc-no-io-uring COMMAND [ARGS...] | --check\n");
        return 2;
    }
    err = deny_io_uring();
    if (err != 0) {
        fprintf(stderr, "mc-no-io-uring: installing the seccomp filter: %s\n", strerror(-err));
        return 1;
    }
    if (strcmp(argv[1], "--check") == 0) {
        long rc = syscall(SYS_io_uring_setup, 1, NULL);

        if (rc < 0 && errno == EPERM)
            return 0;
        fprintf(stderr, "mc-no-io-uring: io_uring_setup was not denied (%ld, %s)\n", rc,
                strerror(errno));
        return 1;
    }
    execvp(argv[1], argv + 1);
    fprintf(stderr, "mc-no-io-uring: exec %s: %s\n", argv[1], strerror(errno));
    return 127;
}
