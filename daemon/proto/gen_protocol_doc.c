/*
 * mc-protocol-doc: writes docs/protocol.md with its message layout section generated from
 * the catalogue (daemon/proto/rpc.h). It reads the committed file (argv[1]), replaces what
 * lies between the two marker lines, and prints the result: docs/meson.build compares it with
 * the committed file (a unit test) and `ninja -C build protocol-doc` rewrites it.
 *
 * usage: mc-protocol-doc docs/protocol.md > out
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/proto/rpc.h"

#define BEGIN "<!-- rpc-layouts: generated from daemon/proto/rpc.h by mc-protocol-doc -->"
#define END   "<!-- rpc-layouts end -->"

static const char *direction(uint32_t flags)
{
    if ((flags & MC_RPC_TO_MASTER) && (flags & MC_RPC_PEER))
        return "agent → master, agent → agent";
    if ((flags & MC_RPC_TO_MASTER) && (flags & MC_RPC_TO_OWNER))
        return "agent → master, master → owner";
    if (flags & MC_RPC_TO_MASTER)
        return "agent → master";
    if (flags & MC_RPC_TO_OWNER)
        return "master → owner";
    return "agent → agent";
}

static void print_section(FILE *out)
{
    size_t i;

    fprintf(out, "%s\n\n", BEGIN);
    fprintf(out, "| type | message | from → to | batch, items | request | reply |\n");
    fprintf(out, "|---|---|---|---|---|---|\n");
    for (i = 0; i < mc_proto_rpcs_count; i++) {
        const struct mc_proto_rpc *r = &mc_proto_rpcs[i];
        char items[32] = "";

        if (r->items > 0)
            snprintf(items, sizeof(items), "%s≤ %u", (r->flags & MC_RPC_BATCH) ? "batch, " : "",
                     r->items);
        fprintf(out, "| %u / %u | `%s`%s | %s | %s | %s | %s |\n", r->type, r->type + 1u,
                r->name, (r->flags & MC_RPC_BULK) ? " (bulk)" : "", direction(r->flags), items,
                r->request, r->reply);
    }
    fprintf(out, "\nItems named in the layouts:\n\n");
#define GEN_ITEM(name, layout) fprintf(out, "* `%s`: %s\n", #name, layout);
    MC_PROTO_ITEMS(GEN_ITEM)
#undef GEN_ITEM
    fprintf(out, "\n%s\n", END);
}

int main(int argc, char **argv)
{
    char line[4096];
    FILE *in;
    int state = 0; /* 0 before the section, 1 inside it, 2 after it */

    if (argc != 2) {
        fprintf(stderr, "usage: mc-protocol-doc docs/protocol.md\n");
        return 2;
    }
    in = fopen(argv[1], "r");
    if (in == NULL) {
        perror(argv[1]);
        return 1;
    }
    while (fgets(line, sizeof(line), in) != NULL) {
        if (state == 0 && strncmp(line, BEGIN, strlen(BEGIN)) == 0) {
            print_section(stdout);
            state = 1;
        } else if (state == 1) {
            if (strncmp(line, END, strlen(END)) == 0)
                state = 2;
        } else {
            fputs(line, stdout);
        }
    }
    fclose(in);
    if (state != 2) {
        fprintf(stderr, "%s: the marker lines of the generated section are missing\n", argv[1]);
        return 1;
    }
    return 0;
}
