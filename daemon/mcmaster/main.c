/*
 * mc-master: the cluster master daemon's command line (docs/operations.md).
 *
 *   mc-master --listen HOST:PORT [--config FILE] [--set k=v]... [--ready-file F]
 *             [--dump-config]
 *
 * --listen is the same as --set listen=HOST:PORT (port 0: any free port), --metrics-listen
 * the same as --set metrics_listen=HOST:PORT. The cluster token
 * comes from the config (cluster_token; MC_CLUSTER_TOKEN in the environment). The ready file
 * is written (by rename) once the listener and the UCX worker are up: "PID PORT\n"; a service
 * manager is told READY=1 then (NOTIFY_SOCKET, systemd's Type=notify) and STOPPING=1 once
 * the master begins to stop. SIGTERM or SIGINT stops the master cleanly. Exit: 0 clean stop,
 * 2 usage or config error, 1 anything else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "daemon/common/log.h"
#include "daemon/common/notify.h"
#include "daemon/common/ready.h"
#include "daemon/mcmaster/mcmaster_config.h"
#include "daemon/mcmaster/server.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mc-master --listen HOST:PORT [options]\n"
            "  --listen HOST:PORT TCP address peers fetch the UCX worker address from\n"
            "                     (= --set listen=HOST:PORT)\n"
            "  --metrics-listen HOST:PORT  serve /metrics, /health, /ready over HTTP there\n"
            "                     (= --set metrics_listen=; port 0: any free port, logged)\n"
            "  --etcd URL[,URL...] high availability: elect a leader in etcd there (= --set etcd=)\n"
            "  --cluster-id ID    with --etcd: the cluster's name (= --set cluster_id=)\n"
            "  --ready-file F     write \"PID PORT\" to F (atomically) once peers can connect\n"
            "%s"
            "  --help             this text\n"
            "The cluster token is the setting cluster_token (MC_CLUSTER_TOKEN); MC_<KEY> "
            "environment variables apply.\n",
            MC_CONFIG_USAGE);
}

static int run(const struct mc_mcmaster_config *cfg, const char *ready)
{
    struct mc_mcmaster_server *s = NULL;
    char port[16];
    int rc;

    mc_log_set_ident("mc-master");
    mc_log_set_level(cfg->daemon.log_level);
    rc = mc_mcmaster_server_create(cfg, &s);
    if (rc != 0) {
        mc_error("cannot start: %s", mc_strerror(rc));
        return rc == MC_ERR_INVALID ? 2 : 1;
    }
    snprintf(port, sizeof(port), "%u", mc_mcmaster_server_port(s));
    if (ready != NULL && (rc = mc_ready_file_write(ready, port)) != 0) {
        mc_error("ready file %s: %s", ready, mc_strerror(rc));
        mc_mcmaster_server_destroy(s);
        return 1;
    }
    mc_notify_ready("serving");
    rc = mc_mcmaster_server_run(s);
    mc_notify_stopping(); /* sent already when a signal stopped us */
    mc_info("stopped");
    if (ready != NULL)
        mc_ready_file_remove(ready);
    mc_mcmaster_server_destroy(s);
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    struct mc_mcmaster_config cfg;
    const char *ready = NULL;
    char **args, *listen_kv = NULL, *metrics_kv = NULL, *kv[2] = {NULL, NULL}, err[512];
    int i, n = 1, rc = 2, nkv = 0;

    /* --listen is a --set spelling: rewritten so the config engine sees one ordered list
     * of overrides (and --dump-config shows it) */
    args = calloc((size_t)argc * 2 + 1, sizeof(*args));
    if (args == NULL)
        return 1;
    args[0] = argv[0];
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--listen") == 0) {
            if (i + 1 >= argc || listen_kv != NULL) {
                fprintf(stderr, "mc-master: --listen needs one value\n");
                goto out_args;
            }
            listen_kv = malloc(strlen(argv[i + 1]) + sizeof("listen="));
            if (listen_kv == NULL) {
                rc = 1;
                goto out_args;
            }
            sprintf(listen_kv, "listen=%s", argv[++i]);
            args[n++] = "--set";
            args[n++] = listen_kv;
        } else if (strcmp(argv[i], "--metrics-listen") == 0) {
            if (i + 1 >= argc || metrics_kv != NULL) {
                fprintf(stderr, "mc-master: --metrics-listen needs one value\n");
                goto out_args;
            }
            metrics_kv = malloc(strlen(argv[i + 1]) + sizeof("metrics_listen="));
            if (metrics_kv == NULL) {
                rc = 1;
                goto out_args;
            }
            sprintf(metrics_kv, "metrics_listen=%s", argv[++i]);
            args[n++] = "--set";
            args[n++] = metrics_kv;
        } else if ((strcmp(argv[i], "--etcd") == 0 || strcmp(argv[i], "--cluster-id") == 0) &&
                   i + 1 < argc && nkv < 2) {
            /* spellings of --set etcd= and --set cluster_id= */
            const char *k = argv[i][2] == 'e' ? "etcd=" : "cluster_id=";

            if ((kv[nkv] = malloc(strlen(k) + strlen(argv[i + 1]) + 1)) == NULL) {
                rc = 1;
                goto out_args;
            }
            sprintf(kv[nkv], "%s%s", k, argv[++i]);
            args[n++] = "--set";
            args[n++] = kv[nkv++];
        } else if (strcmp(argv[i], "--ready-file") == 0 && i + 1 < argc) {
            ready = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            rc = 0;
            goto out_args;
        } else {
            args[n++] = argv[i];
        }
    }
    rc = mc_config_parse_args(mc_mcmaster_config_table, &cfg, MC_CONFIG_ENV_PREFIX,
                              mc_mcmaster_config_validate, &n, args, stdout, err, sizeof(err));
    if (rc == MC_CONFIG_EXIT) {
        rc = 0;
    } else if (rc != 0) {
        fprintf(stderr, "mc-master: %s\n", err);
        usage(stderr);
        rc = 2;
    } else if (n > 1) {
        fprintf(stderr, "mc-master: unexpected argument '%s'\n", args[1]);
        usage(stderr);
        rc = 2;
    } else {
        rc = run(&cfg, ready);
    }
    mc_config_cleanup(mc_mcmaster_config_table, &cfg);
out_args:
    free(listen_kv);
    free(metrics_kv);
    free(kv[0]);
    free(kv[1]);
    free(args);
    return rc;
}
