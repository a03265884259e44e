/*
 * mcctl: the command-line client of the local agent, over libmc.
 *
 *   mcctl [--socket PATH] put KEY [FILE|-] [--replicas N] [--upsert] [--pin soft|hard]
 *                                          [--ttl MS]
 *   mcctl [--socket PATH] get KEY [FILE|-]
 *   mcctl [--socket PATH] exist KEY
 *   mcctl [--socket PATH] rm KEY
 *   mcctl [--socket PATH] rm --prefix P          prints how many objects were removed
 *   mcctl [--socket PATH] ls [--prefix P] [--limit N]   one key per line
 *   mcctl [--socket PATH] stat KEY
 *   mcctl [--socket PATH] stats
 *   mcctl [--socket PATH] cluster
 *   mcctl [--socket PATH] drain NODE | undrain NODE
 *
 * Exit status: 0 success (exist: present), 1 not found (exist: absent), 2 usage, 3 any
 * other failure, described in words on stderr. put reads the whole input into memory; get
 * writes the object to FILE (created or truncated only once the object has been read) or
 * stdout. ls pages through the agent's listing until it is done or N keys are printed
 * (keys are printed as they are, one per line: a key holding a newline prints as two
 * lines). `cluster` prints the master's view as JSON (docs/operations.md, "A cluster:
 * mc-master and agents").
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mc/mc.h>

#include "libmc/tool.h"

#define EXIT_NOT_FOUND 1
#define EXIT_USAGE     2
#define EXIT_ERROR     3

static void usage(FILE *f)
{
    fprintf(f, "usage: mcctl [--socket PATH] COMMAND ARGS\n"
               "  put KEY [FILE|-] [--replicas N] [--upsert] [--pin soft|hard] [--ttl MS]\n"
               "                     [--tier dram|gpu]\n"
               "  get KEY [FILE|-]\n"
               "  exist KEY          exit 0 if present, 1 if absent\n"
               "  rm KEY | rm --prefix P   (prints the number removed)\n"
               "  ls [--prefix P] [--limit N]   one key per line\n"
               "  stat KEY           one JSON object\n"
               "  stats              the agent's statistics (JSON)\n"
               "  drain NODE         stop placing on NODE and move its objects to other nodes;\n"
               "                     mcctl cluster shows its progress (draining, drained)\n"
               "  undrain NODE       let placement use NODE again\n"
               "  cluster            the cluster: nodes, domains, segments, capacity, used,\n"
               "                     state (JSON)\n"
               "exit status: 0 success, 1 not found, 2 usage, 3 other failure\n");
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "mcctl: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    return EXIT_USAGE;
}

/* The exit status for a libmc failure, after saying what failed. */
static int fail(const char *what, const char *key, int err)
{
    if (key != NULL)
        fprintf(stderr, "mcctl: %s %s: %s\n", what, key, mc_strerror(err));
    else
        fprintf(stderr, "mcctl: %s: %s\n", what, mc_strerror(err));
    return err == MC_ERR_NOT_FOUND ? EXIT_NOT_FOUND : EXIT_ERROR;
}

static bool parse_u64(const char *s, uint64_t max, uint64_t *v_p)
{
    unsigned long long v;
    char *end;

    if (s == NULL || s[0] == '\0' || s[0] == '-')
        return false;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        return false;
    *v_p = v;
    return true;
}

/* Read all of f into a malloc'ed buffer. */
static int read_all(FILE *f, uint8_t **buf_p, size_t *len_p)
{
    size_t cap = 1 << 20, len = 0, n;
    uint8_t *buf = malloc(cap), *nbuf;

    if (buf == NULL)
        return MC_ERR_NOMEM;
    for (;;) {
        if (len == cap) {
            if (cap > SIZE_MAX / 2) {
                free(buf);
                return MC_ERR_NOMEM;
            }
            nbuf = realloc(buf, cap * 2);
            if (nbuf == NULL) {
                free(buf);
                return MC_ERR_NOMEM;
            }
            buf = nbuf;
            cap *= 2;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f)) {
                free(buf);
                return MC_ERR_IO;
            }
            break;
        }
    }
    *buf_p = buf;
    *len_p = len;
    return 0;
}

static bool write_all(FILE *f, const void *buf, size_t len)
{
    return fwrite(buf, 1, len, f) == len && fflush(f) == 0;
}

/* Arguments after the command: positionals in order, options anywhere. */
struct cmd_args {
    const char *pos[2];
    int npos;
    const char *prefix; /* ls, rm: --prefix */
    uint64_t limit;     /* ls: --limit, 0 = all */
    mc_put_opts_t opts;
    bool put_opts_seen;
};

static int parse_cmd_args(int argc, char **argv, bool put, bool lsrm, bool ls,
                          struct cmd_args *a)
{
    uint64_t v;

    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];

        if (lsrm && strcmp(s, "--prefix") == 0) {
            if (i + 1 >= argc)
                return usage_error("--prefix needs a prefix%s", "");
            a->prefix = argv[++i];
        } else if (ls && strcmp(s, "--limit") == 0) {
            if (i + 1 >= argc || !parse_u64(argv[i + 1], UINT64_MAX, &v) || v == 0)
                return usage_error("--limit needs a count >= 1%s", "");
            a->limit = v;
            i++;
        } else if (put && strcmp(s, "--upsert") == 0) {
            a->opts.flags |= MC_PUT_UPSERT;
        } else if (put && strcmp(s, "--replicas") == 0) {
            if (i + 1 >= argc || !parse_u64(argv[i + 1], UINT32_MAX, &v) || v == 0)
                return usage_error("--replicas needs a count >= 1%s", "");
            a->opts.replicas = (uint32_t)v;
            i++;
        } else if (put && strcmp(s, "--pin") == 0) {
            if (i + 1 < argc && strcmp(argv[i + 1], "soft") == 0)
                a->opts.flags |= MC_PUT_PIN_SOFT;
            else if (i + 1 < argc && strcmp(argv[i + 1], "hard") == 0)
                a->opts.flags |= MC_PUT_PIN_HARD;
            else
                return usage_error("--pin needs soft or hard%s", "");
            i++;
        } else if (put && strcmp(s, "--tier") == 0) {
            if (i + 1 < argc && strcmp(argv[i + 1], "gpu") == 0)
                a->opts.flags |= MC_PUT_TIER_GPU;
            else if (!(i + 1 < argc && strcmp(argv[i + 1], "dram") == 0))
                return usage_error("--tier needs dram or gpu%s", "");
            i++;
        } else if (put && strcmp(s, "--ttl") == 0) {
            if (i + 1 >= argc || !parse_u64(argv[i + 1], MC_TTL_MAX_MS, &v))
                return usage_error("--ttl needs milliseconds, at most MC_TTL_MAX_MS%s", "");
            a->opts.ttl_ms = v;
            i++;
        } else if (s[0] == '-' && s[1] != '\0') {
            return usage_error("unknown option %s", s);
        } else {
            if (a->npos == 2)
                return usage_error("unexpected argument %s", s);
            a->pos[a->npos++] = s;
        }
    }
    if ((a->opts.flags & MC_PUT_PIN_SOFT) && (a->opts.flags & MC_PUT_PIN_HARD))
        return usage_error("--pin given twice%s", "");
    return 0;
}

static int cmd_put(mc_client_t *c, const char *key, const char *file, const mc_put_opts_t *o)
{
    uint8_t *buf;
    size_t len;
    FILE *f = stdin;
    int err;

    if (file != NULL && strcmp(file, "-") != 0) {
        f = fopen(file, "rb");
        if (f == NULL) {
            fprintf(stderr, "mcctl: put %s: %s: %s\n", key, file, strerror(errno));
            return EXIT_ERROR;
        }
    }
    err = read_all(f, &buf, &len);
    if (f != stdin)
        fclose(f);
    if (err != 0)
        return fail("put: reading input for", key, err);
    if (len == 0) {
        free(buf);
        fprintf(stderr, "mcctl: put %s: empty input (objects are at least 1 byte)\n", key);
        return EXIT_ERROR;
    }
    err = mc_put(c, key, buf, len, o);
    free(buf);
    if (err != 0)
        return fail("put", key, err);
    return 0;
}

static int cmd_get(mc_client_t *c, const char *key, const char *file)
{
    uint8_t *buf = NULL, *nbuf;
    size_t len = 0, cap = 0;
    FILE *f;
    int err;

    /* ask for the size, then read; an upsert in between may change it: ask again */
    for (int tries = 0; tries < 8; tries++) {
        err = mc_get(c, key, buf, cap, &len);
        if (err != MC_ERR_TOO_LARGE)
            break;
        nbuf = realloc(buf, len);
        if (nbuf == NULL) {
            err = MC_ERR_NOMEM;
            break;
        }
        buf = nbuf;
        cap = len;
    }
    if (err != 0) {
        free(buf);
        return fail("get", key, err);
    }
    if (file == NULL || strcmp(file, "-") == 0) {
        f = stdout;
    } else {
        f = fopen(file, "wb");
        if (f == NULL) {
            fprintf(stderr, "mcctl: get %s: %s: %s\n", key, file, strerror(errno));
            free(buf);
            return EXIT_ERROR;
        }
    }
    if (!write_all(f, buf, len)) {
        fprintf(stderr, "mcctl: get %s: writing output: %s\n", key, strerror(errno));
        err = MC_ERR_IO;
    }
    if (f != stdout && fclose(f) != 0 && err == 0) {
        fprintf(stderr, "mcctl: get %s: writing output: %s\n", key, strerror(errno));
        err = MC_ERR_IO;
    }
    free(buf);
    return err != 0 ? EXIT_ERROR : 0;
}

static int cmd_stat(mc_client_t *c, const char *key)
{
    mc_obj_info_t info;
    int err;

    err = mc_stat(c, key, &info);
    if (err != 0)
        return fail("stat", key, err);
    printf("{\"size\": %" PRIu64 ", \"replicas\": %" PRIu32 ", \"version\": %" PRIu64
           ", \"flags\": %" PRIu32 ", \"ttl_remaining_ms\": %" PRIu64 ", \"tier\": \"%s\""
           ", \"disk_replicas\": %" PRIu32 ", \"tiers\": [",
           info.size, info.replicas, info.version, info.flags & 0xFFFFu, info.ttl_remaining_ms,
           MC_OBJ_DISK_REPLICAS(info.flags) == info.replicas ? "disk"
           : (info.flags & MC_PUT_TIER_GPU)    ? "gpu"
                                               : "dram",
           MC_OBJ_DISK_REPLICAS(info.flags));
    /* each replica's tier, memory first (as readers try them) */
    for (uint32_t i = 0; i < info.replicas; i++)
        printf("%s\"%s\"", i > 0 ? ", " : "",
               i >= info.replicas - MC_OBJ_DISK_REPLICAS(info.flags) ? "disk"
               : (info.flags & MC_PUT_TIER_GPU)        ? "gpu"
                                                       : "dram");
    printf("]}\n");
    return fflush(stdout) == 0 ? 0 : EXIT_ERROR;
}

static int print_key(void *arg, const char *key, size_t key_len)
{
    (void)arg;
    if (fwrite(key, 1, key_len, stdout) != key_len || putchar('\n') == EOF)
        return MC_ERR_IO;
    return 0;
}

static int cmd_ls(mc_client_t *c, const char *prefix, uint64_t limit)
{
    size_t plen = prefix != NULL ? strlen(prefix) : 0;
    uint64_t cursor = 0, printed = 0;
    uint32_t page;
    int n;

    do {
        page = 1000;
        if (limit != 0 && limit - printed < page)
            page = (uint32_t)(limit - printed);
        n = mc_client_list(c, prefix, plen, &cursor, page, print_key, NULL);
        if (n < 0)
            return n == MC_ERR_IO ? EXIT_ERROR : fail("ls", prefix, n);
        printed += (uint64_t)n;
    } while (cursor != 0 && (limit == 0 || printed < limit));
    return fflush(stdout) == 0 ? 0 : EXIT_ERROR;
}

static int cmd_rm_prefix(mc_client_t *c, const char *prefix)
{
    uint64_t removed;
    int err;

    err = mc_client_remove_prefix(c, prefix, &removed);
    if (err != 0)
        return fail("rm --prefix", prefix, err);
    printf("%" PRIu64 "\n", removed);
    return fflush(stdout) == 0 ? 0 : EXIT_ERROR;
}

static int cmd_stats(mc_client_t *c, bool cluster)
{
    char *json;
    size_t len;
    int err;

    err = cluster ? mc_client_cluster_json(c, &json, &len) : mc_client_stats_json(c, &json, &len);
    if (err != 0)
        return fail(cluster ? "cluster" : "stats", NULL, err);
    fputs(json, stdout);
    if (len == 0 || json[len - 1] != '\n')
        putchar('\n');
    free(json);
    return fflush(stdout) == 0 ? 0 : EXIT_ERROR;
}

int main(int argc, char **argv)
{
    struct cmd_args a = {.opts = MC_PUT_OPTS_INIT};
    const char *socket_path = NULL;
    const char *cmd, *key;
    mc_client_t *c;
    size_t key_len;
    int i = 1, rc, err;
    bool put, ls, rm, drain;

    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "--socket") == 0) {
            if (i + 1 >= argc || argv[i + 1][0] == '\0')
                return usage_error("--socket needs a path%s", "");
            socket_path = argv[i + 1];
            i += 2;
        } else if (strncmp(argv[i], "--socket=", 9) == 0) {
            if (argv[i][9] == '\0')
                return usage_error("--socket needs a path%s", "");
            socket_path = argv[i] + 9;
            i++;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            return usage_error("unknown option %s", argv[i]);
        }
    }
    if (i >= argc)
        return usage_error("no command%s", "");
    cmd = argv[i++];
    put = strcmp(cmd, "put") == 0;
    ls = strcmp(cmd, "ls") == 0;
    rm = strcmp(cmd, "rm") == 0;
    drain = strcmp(cmd, "drain") == 0 || strcmp(cmd, "undrain") == 0;
    if (!put && !ls && !rm && !drain && strcmp(cmd, "get") != 0 &&
        strcmp(cmd, "exist") != 0 && strcmp(cmd, "stat") != 0 && strcmp(cmd, "stats") != 0 &&
        strcmp(cmd, "cluster") != 0)
        return usage_error("unknown command %s", cmd);
    rc = parse_cmd_args(argc - i, argv + i, put, ls || rm, ls, &a);
    if (rc != 0)
        return rc;

    if (ls || (rm && a.prefix != NULL)) {
        if (a.npos != 0)
            return usage_error("unexpected argument %s", a.pos[0]);
        key_len = a.prefix != NULL ? strlen(a.prefix) : 0;
        if (key_len > MC_KEY_MAX || (rm && key_len == 0))
            return usage_error("a prefix has %s bytes", rm ? "1 to 512" : "0 to 512");
        key = NULL;
    } else if (strcmp(cmd, "stats") == 0 || strcmp(cmd, "cluster") == 0) {
        if (a.npos != 0)
            return usage_error("%s takes no argument", cmd);
        key = NULL;
    } else if (drain) {
        if (a.npos != 1)
            return usage_error("%s needs one NODE", cmd);
        key = a.pos[0];
        key_len = strnlen(key, 64);
        if (key_len == 0 || key_len > 63)
            return usage_error("a NODE name has 1 to 63 bytes%s", "");
    } else {
        if (a.npos == 0)
            return usage_error("%s needs a KEY", cmd);
        if (a.npos == 2 && !put && strcmp(cmd, "get") != 0)
            return usage_error("unexpected argument %s", a.pos[1]);
        key = a.pos[0];
        key_len = strnlen(key, MC_KEY_MAX + 1);
        if (key_len == 0 || key_len > MC_KEY_MAX)
            return usage_error("a KEY has 1 to 512 bytes%s", "");
    }

    err = mc_connect(socket_path, &c);
    if (err != 0)
        return fail("connecting to the agent", NULL, err);

    if (ls) {
        rc = cmd_ls(c, a.prefix, a.limit);
    } else if (rm && a.prefix != NULL) {
        rc = cmd_rm_prefix(c, a.prefix);
    } else if (put) {
        rc = cmd_put(c, key, a.npos == 2 ? a.pos[1] : NULL, &a.opts);
    } else if (strcmp(cmd, "get") == 0) {
        rc = cmd_get(c, key, a.npos == 2 ? a.pos[1] : NULL);
    } else if (strcmp(cmd, "exist") == 0) {
        err = mc_exist(c, key);
        rc = err == 1 ? 0 : err == 0 ? EXIT_NOT_FOUND : fail("exist", key, err);
    } else if (strcmp(cmd, "rm") == 0) {
        err = mc_remove(c, key);
        rc = err == 0 ? 0 : fail("rm", key, err);
    } else if (strcmp(cmd, "stat") == 0) {
        rc = cmd_stat(c, key);
    } else if (drain) {
        err = mc_client_drain(c, key, strcmp(cmd, "drain") == 0);
        rc = err == 0 ? 0 : fail(cmd, key, err);
    } else {
        rc = cmd_stats(c, strcmp(cmd, "cluster") == 0);
    }
    mc_close(c);
    return rc;
}
