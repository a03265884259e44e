/*
 * mc-agent: the node agent's command line (docs/architecture.md, docs/operations.md).
 *
 *   mc-agent --standalone --socket PATH --dram SIZE [--config FILE] [--set k=v]...
 *            [--ready-file F] [--dump-config]
 *   mc-agent --master HOST:PORT --listen HOST:PORT --node NAME [--domain NAME]
 *            --socket PATH --dram SIZE [--ready-file F] [options]
 *
 * --socket, --dram, --master, --listen, --node, --domain and --metrics-listen are the same
 * as --set socket=, dram=, master_addr=, listen=, node_name=, domain=, metrics_listen=
 * (SIZE takes suffixes: 512M, 4G). The
 * ready file is written (by rename, with our pid; in cluster mode "PID PORT" with the port
 * of --listen) once the socket accepts and, in cluster mode, once the agent is
 * authenticated at the master and its segment is mounted, and removed when the agent
 * stops. At that same moment a service manager is told READY=1 (NOTIFY_SOCKET, systemd's
 * Type=notify), and STOPPING=1 once it begins to stop. SIGTERM or SIGINT stops the agent
 * cleanly. Exit: 0 clean stop, 2 usage or config error, 3 refused by the master (token,
 * name), 1 anything else.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mc/mc.h>
#include <mc/mc_status.h>

#include "daemon/agent/agent.h"
#include "daemon/common/log.h"
#include "daemon/common/notify.h"
#include "daemon/common/ready.h"
#include "shm/sockpath.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mc-agent --standalone --socket PATH --dram SIZE [options]\n"
            "       mc-agent --master HOST:PORT --listen HOST:PORT --node NAME [--domain NAME]\n"
            "                --socket PATH --dram SIZE [options]\n"
            "  --standalone       run the master service in-process (a one-node store)\n"
            "  --master HOST:PORT cluster mode: join mc-master there (= --set master_addr=)\n"
            "  --etcd URL[,URL...] --cluster-id ID  cluster mode: join the leader mc-master\n"
            "                     etcd names, and follow it (= --set etcd= cluster_id=)\n"
            "  --listen HOST:PORT cluster mode: where peers reach this agent (= --set listen=)\n"
            "  --node NAME        this node's name (= --set node_name=NAME)\n"
            "  --domain NAME      its failure domain (= --set domain=NAME)\n"
            "  --socket PATH      unix socket for local clients (= --set socket=PATH)\n"
            "  --dram SIZE        DRAM contributed to the pool, e.g. 512M, 4G (= --set dram=SIZE);\n"
            "                     0 in cluster mode: a client node that holds no data\n"
            "  --gpu DEV:SIZE     a GPU segment, repeatable: DEV cuda, cudaN, or test (the\n"
            "                     test device, for tests), e.g. --gpu cuda0:8G (= --set gpu=)\n"
            "  --disk PATH        the disk tier: a file (created, preallocated) or a block\n"
            "                     device; evicted objects go there and survive restarts\n"
            "                     (= --set disk=PATH; docs/disk.md)\n"
            "  --disk-size SIZE   bytes of the disk file to create, e.g. 64G (= --set disk_size=)\n"
            "  --metrics-listen HOST:PORT  serve /metrics, /health, /ready over HTTP there\n"
            "                     (= --set metrics_listen=; port 0: any free port, logged)\n"
            "  --ready-file F     write our pid to F (atomically) once clients can connect\n"
            "                     (cluster mode: once joined and mounted, \"PID PORT\")\n"
            "%s"
            "  --test-fault SPEC  tests only: hold answers back (get_delay_ms=MS,\n"
            "                     put_end_delay_ms=MS, promote_delay_ms=MS), to act inside\n"
            "                     the window;\n"
            "                     a slow disk (disk_delay_ms=MS: reads and erases start late,\n"
            "                     disk_write_delay_ms=MS: offload writes);\n"
            "                     a failing disk (disk_erase_fail=N: the next N tries of\n"
            "                     tombstones and removed marks fail with an I/O error);\n"
            "                     lose the first N requests (publish_lose=N, drop_lose=N),\n"
            "                     answer the first N MC_ERR_NOMEM (publish_nomem=N),\n"
            "                     every PUBLISH until N master changes (publish_lose_masters=N)\n"
            "  --help             this text\n"
            "Every setting is listed in docs/config.md; MC_<KEY> environment variables apply.\n",
            MC_CONFIG_USAGE);
}

/* The socket path (shm/sockpath.h: one rule for the agent and libmc); NULL when it does
 * not fit. The folder under $XDG_RUNTIME_DIR is made here, private. */
static const char *socket_path(const char *arg)
{
    static char buf[4096];
    int in_rundir = 0;
    char *slash;

    if (mc_shm_socket_path(arg, buf, sizeof(buf), &in_rundir) != 0)
        return NULL;
    if (in_rundir && (slash = strrchr(buf, '/')) != NULL) {
        *slash = '\0';
        mkdir(buf, 0700);
        *slash = '/';
    }
    return buf;
}

static int run(const struct mc_agent_config *cfg, const char *ready, char **faults, int nfaults)
{
    struct mc_agent *a = NULL;
    const char *path;
    char port[16];
    sigset_t sigs;
    int rc;

    mc_log_set_ident("mc-agent");
    mc_log_set_level(cfg->daemon.log_level);
    /* the process, before any thread starts (UCX's, the metrics server's): they inherit
     * the mask, so SIGTERM and SIGINT reach only the agent's signalfd; clients of the same
     * uid must not reach our memory through /proc/<pid>/fd or mem */
    prctl(PR_SET_DUMPABLE, 0);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    path = socket_path(cfg->socket);
    if (path == NULL) {
        mc_error("the socket path is empty or too long");
        return 2;
    }
    rc = mc_agent_create(cfg, path, &a);
    if (rc != 0) {
        mc_error("cannot start: %s", mc_strerror(rc));
        return rc == MC_ERR_INVALID ? 2 : rc == MC_ERR_DENIED ? 3 : 1;
    }
    for (int i = 0; i < nfaults; i++) {
        if (mc_agent_test_fault(a, faults[i]) != 0) {
            mc_error("--test-fault %s: expected get_delay_ms=MS, put_end_delay_ms=MS, "
                     "promote_delay_ms=MS, disk_delay_ms=MS, disk_write_delay_ms=MS, "
                     "publish_lose=N, drop_lose=N, publish_nomem=N, disk_erase_fail=N or "
                     "publish_lose_masters=N",
                     faults[i]);
            mc_agent_destroy(a);
            return 2;
        }
    }
    if (cfg->master_addr != NULL)
        snprintf(port, sizeof(port), "%u", (unsigned)mc_agent_listen_port(a));
    if (ready != NULL &&
        (rc = mc_ready_file_write(ready, cfg->master_addr != NULL ? port : NULL)) != 0) {
        mc_error("ready file %s: %s", ready, mc_strerror(rc));
        mc_agent_destroy(a);
        return 1;
    }
    mc_notify_ready(cfg->master_addr != NULL ? "serving (cluster)" : "serving (standalone)");
    rc = mc_agent_run(a);
    mc_notify_stopping(); /* sent already when a signal stopped us */
    mc_info("stopped");
    if (ready != NULL)
        mc_ready_file_remove(ready); /* clients can no longer connect */
    mc_agent_destroy(a);
    /* MC_ERR_DENIED: the master refused us after all (our name is another live agent's) */
    return rc == 0 ? 0 : rc == MC_ERR_DENIED ? 3 : 1;
}

int main(int argc, char **argv)
{
    struct mc_agent_config cfg;
    const char *ready = NULL;
    bool standalone = false;
    char **args, **owned, **faults, err[512], *gpus = NULL;
    int i, n = 1, nowned = 0, nfaults = 0, rc = 2;

    /* --socket/--dram are --set spellings: rewrite them so the config engine sees one
     * ordered list of overrides (and --dump-config shows them) */
    args = calloc((size_t)argc * 2 + 1, sizeof(*args));
    owned = calloc((size_t)argc + 1, sizeof(*owned));
    faults = calloc((size_t)argc + 1, sizeof(*faults));
    if (args == NULL || owned == NULL || faults == NULL)
        return 1;
    args[0] = argv[0];
    for (i = 1; i < argc; i++) {
        const char *key = NULL;

        if (strcmp(argv[i], "--socket") == 0) {
            key = "socket";
        } else if (strcmp(argv[i], "--dram") == 0) {
            key = "dram";
        } else if (strcmp(argv[i], "--master") == 0) {
            key = "master_addr";
        } else if (strcmp(argv[i], "--listen") == 0) {
            key = "listen";
        } else if (strcmp(argv[i], "--etcd") == 0) {
            key = "etcd";
        } else if (strcmp(argv[i], "--cluster-id") == 0) {
            key = "cluster_id";
        } else if (strcmp(argv[i], "--node") == 0) {
            key = "node_name";
        } else if (strcmp(argv[i], "--domain") == 0) {
            key = "domain";
        } else if (strcmp(argv[i], "--disk") == 0) {
            key = "disk";
        } else if (strcmp(argv[i], "--disk-size") == 0) {
            key = "disk_size";
        } else if (strcmp(argv[i], "--metrics-listen") == 0) {
            key = "metrics_listen";
        } else if (strcmp(argv[i], "--gpu") == 0 && i + 1 < argc) {
            /* repeatable: the values join into one gpu= setting, set after the others */
            size_t have = gpus != NULL ? strlen(gpus) : 0;
            char *g = realloc(gpus, have + strlen(argv[i + 1]) + 6);

            if (g == NULL) {
                rc = 1;
                goto out_args;
            }
            if (have == 0)
                strcpy(g, "gpu=");
            else
                strcat(g, ",");
            strcat(g, argv[++i]);
            gpus = g;
            continue;
        } else if (strcmp(argv[i], "--standalone") == 0) {
            standalone = true;
            continue;
        } else if (strcmp(argv[i], "--ready-file") == 0 && i + 1 < argc) {
            ready = argv[++i];
            continue;
        } else if (strcmp(argv[i], "--test-fault") == 0 && i + 1 < argc) {
            faults[nfaults++] = argv[++i]; /* test only: not a setting */
            continue;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            rc = 0;
            goto out_args;
        }
        if (key != NULL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "mc-agent: %s needs a value\n", argv[i]);
                goto out_args;
            }
            owned[nowned] = malloc(strlen(key) + strlen(argv[i + 1]) + 2);
            if (owned[nowned] == NULL) {
                rc = 1;
                goto out_args;
            }
            sprintf(owned[nowned], "%s=%s", key, argv[i + 1]);
            args[n] = "--set";
            args[n + 1] = owned[nowned++];
            n += 2;
            i++;
            continue;
        }
        args[n++] = argv[i];
    }
    if (gpus != NULL) {
        args[n] = "--set";
        args[n + 1] = gpus;
        n += 2;
    }
    rc = mc_config_parse_args(mc_agent_config_table, &cfg, MC_CONFIG_ENV_PREFIX,
                              mc_agent_config_validate, &n, args, stdout, err, sizeof(err));
    if (rc == MC_CONFIG_EXIT) {
        rc = 0;
    } else if (rc != 0) {
        /* a setting's complaint alone, last on stderr (what a launcher shows of the log),
         * not drowned in the whole usage */
        fprintf(stderr, "mc-agent: %s\n(mc-agent --help lists the options; docs/config.md "
                        "every setting)\n",
                err);
        rc = 2;
    } else if (n > 1) {
        fprintf(stderr, "mc-agent: unexpected argument '%s'\n", args[1]);
        usage(stderr);
        rc = 2;
    } else if (cfg.etcd != NULL && cfg.master_addr == NULL &&
               (cfg.master_addr = strdup("")) == NULL) {
        rc = 1; /* the leader etcd names is filled in at start-up (cluster.c) */
    } else if (standalone == (cfg.master_addr != NULL)) {
        fprintf(stderr, "mc-agent: give either --standalone or --master HOST:PORT\n");
        usage(stderr);
        rc = 2;
    } else if (!standalone && cfg.listen == NULL) {
        fprintf(stderr, "mc-agent: cluster mode needs --listen HOST:PORT\n");
        rc = 2;
    } else {
        rc = run(&cfg, ready, faults, nfaults);
    }
    mc_config_cleanup(mc_agent_config_table, &cfg);
out_args:
    for (i = 0; i < nowned; i++)
        free(owned[i]);
    free(owned);
    free(gpus);
    free(args);
    free(faults);
    return rc;
}
