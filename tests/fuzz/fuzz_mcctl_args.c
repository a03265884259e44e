/* libFuzzer target: mcctl's command line (libmc/mcctl.c), compiled into this target with
 * main renamed mcctl_main and its mc_connect call routed through t_mcctl_connect (see
 * meson.build); mcctl.c itself is unchanged.
 *
 * Input: NUL-separated arguments (at most T_ARGS_MAX), run as
 *     mcctl --socket <private dir>/no-agent.sock ARGS...
 * No agent listens there, so a command line that parses reaches mc_connect, which must fail,
 * and mcctl must exit 3; one that does not parse must exit 2 (or 0 for --help) without
 * trying to connect. Exit 1 (not found) cannot happen without an agent.
 *
 * Safety: mcctl opens FILE (put, get) only after connecting, which never succeeds here; on
 * top of that an input with a '/' in any argument is not run, and t_mcctl_connect looks a
 * relative --socket up in a fresh empty directory (never the working directory), and aborts
 * should a connection ever succeed. mcctl's stdout and stderr go to /dev/null
 * (FUZZ_MCCTL_VERBOSE=1 keeps them). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mc/mc.h>
#include <mc/mc_status.h>

#define T_ARGS_MAX 32

int mcctl_main(int argc, char **argv);
int t_mcctl_connect(const char *socket_path, mc_client_t **out);

static char t_dir[] = "/tmp/fuzz_mcctl.XXXXXX";
static char t_sock[sizeof(t_dir) + 32];
static char t_arg0[] = "mcctl", t_arg1[] = "--socket";
static bool t_reached;

/* What mcctl.c calls as mc_connect. A --socket from the input (no '/' in it) is looked up
 * in the private directory, not in the working directory, where a socket could exist. */
int t_mcctl_connect(const char *socket_path, mc_client_t **out)
{
    char path[sizeof(t_dir) + 128];
    int err, n;

    t_reached = true;
    if (socket_path == NULL)
        abort();
    if (strcmp(socket_path, t_sock) != 0 && socket_path[0] != '\0') {
        if (strchr(socket_path, '/') != NULL)
            abort();
        n = snprintf(path, sizeof(path), "%s/%s", t_dir, socket_path);
        if (n < 0 || (size_t)n >= sizeof(path))
            return MC_ERR_INVALID; /* too long for a socket address anyway */
        socket_path = path;
    }
    err = mc_connect(socket_path, out);
    if (err == 0) {
        mc_close(*out); /* something answered: this run is not sealed off */
        abort();
    }
    return err;
}

static void t_cleanup(void)
{
    (void)rmdir(t_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (mkdtemp(t_dir) == NULL)
        abort();
    atexit(t_cleanup);
    snprintf(t_sock, sizeof(t_sock), "%s/no-agent.sock", t_dir);
    setenv("MC_AGENT_SOCKET", t_sock, 1);
    if (getenv("FUZZ_MCCTL_VERBOSE") == NULL) {
        /* libFuzzer writes its reports to the stderr it captured at start-up, and the
         * sanitizers to fd 2: neither goes through the FILE replaced here */
        if (freopen("/dev/null", "w", stdout) == NULL ||
            (stderr = fopen("/dev/null", "w")) == NULL)
            abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *args[3 + T_ARGS_MAX + 1] = {t_arg0, t_arg1, t_sock};
    char *text;
    int argc = 3, rc;
    bool help = false;

    if (size > 0 && memchr(data, '/', size) != NULL)
        return -1; /* not run, and kept out of the corpus */
    text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    /* each argument ends at a NUL or at the end of the input */
    for (size_t i = 0; i < size && argc < 3 + T_ARGS_MAX; i += strlen(text + i) + 1) {
        args[argc++] = text + i;
        if (strcmp(text + i, "--help") == 0 || strcmp(text + i, "-h") == 0)
            help = true;
    }
    args[argc] = NULL;

    t_reached = false;
    rc = mcctl_main(argc, args);
    if (rc < 0 || rc > 3 || rc == 1 || (t_reached && rc != 3) || (!t_reached && rc == 3) ||
        (rc == 0 && !help))
        abort();
    free(text);
    return 0;
}
