/*
 * The early end of a recovery window (recovery.h): the node table and the segments'
 * RESTORING flags, read through the request executor.
 */
#include "daemon/mcmaster/recovery.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/master/exec.h"

#define PAGE 256u

bool mc_recovery_all_reported(struct mc_master *m, uint32_t nsegs_max,
                              const struct mc_elect_agent *expect, size_t n,
                              const uint32_t *carrying, size_t ncarrying, bool *joined_p)
{
    bool reported = true;

    struct mc_master_node_info *page = malloc(PAGE * sizeof(*page));
    struct mc_master_node_info *alive = NULL;
    uint32_t *restoring = NULL;
    size_t nalive = 0, cap = 0, nrest = 0, i, j;
    bool ok = page != NULL;
    struct mc_master_req x = {.op = MC_MASTER_OP_NODE_LIST};

    /* the live nodes */
    while (ok) {
        x.u.nodes.out = page;
        x.u.nodes.max = PAGE;
        (void)mc_master_exec(m, &x);
        for (i = 0; ok && i < x.u.nodes.n; i++) {
            if (!page[i].alive)
                continue;
            if (nalive == cap) {
                struct mc_master_node_info *t;

                cap = cap != 0 ? 2 * cap : PAGE;
                if ((t = realloc(alive, cap * sizeof(*t))) == NULL) {
                    ok = false;
                    break;
                }
                alive = t;
            }
            alive[nalive++] = page[i];
        }
        if (x.u.nodes.cursor == 0)
            break;
    }
    /* the nodes whose reports are not done: a segment of theirs is RESTORING */
    if (ok && nsegs_max > 0 && (restoring = malloc(nsegs_max * sizeof(*restoring))) == NULL)
        ok = false;
    for (uint32_t seg = 0; ok && seg < nsegs_max; seg++) {
        struct mc_master_req s = {.op = MC_MASTER_OP_SEG_INFO, .u.seg_info.seg = seg};

        if (mc_master_exec(m, &s) == 0 && s.u.seg_info.info.restoring)
            restoring[nrest++] = s.u.seg_info.info.node;
    }
    /* no live node may still be reporting, listed or not: an agent missing from the list
     * (its key lapsed, started with --master only, registered after the read) that has
     * rejoined would otherwise have its objects answered NOT_FOUND, its removes answered
     * before its report brings them back (review finding M2) */
    for (i = 0; ok && reported && i < nrest; i++)
        for (j = 0; reported && j < nalive; j++)
            reported = alive[j].id != restoring[i];
    /* nor carry PUBLISHes not settled yet: the late restores of their owners are to come
     * (a node with no segment at all, dram 0, holds the window this way too: review H1) */
    for (i = 0; ok && reported && i < ncarrying; i++)
        for (j = 0; reported && j < nalive; j++)
            reported = alive[j].id != carrying[i];
    for (i = 0; ok && i < n; i++) {
        const struct mc_master_node_info *nd = NULL;

        for (j = 0; j < nalive && nd == NULL; j++)
            if (strcmp(alive[j].name, expect[i].name) == 0)
                nd = &alive[j];
        ok = nd != NULL && nd->segments >= expect[i].nsegs;
    }
    free(page);
    free(alive);
    free(restoring);
    if (joined_p != NULL)
        *joined_p = ok;
    return ok && reported;
}
