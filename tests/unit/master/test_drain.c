/* Unit tests of draining a node (daemon/master/drain.c): one test per rule, fake clock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm/ring.h"
#include "tests/unit/master/t_master.h"

/* t_master.h's helpers this file has no use for */
static void t_unused(void) __attribute__((unused));
static void t_unused(void)
{
    (void)t_stats;
    (void)t_put;
    (void)t_master;
}

#define KiB 1024u
#define MiB (1024u * 1024u)

/* three nodes in three domains, one segment each */
struct t_three {
    struct mc_master *m;
    uint32_t node[3];
    uint32_t seg[3];
};

static struct t_three t_three_cfg(const struct mc_master_config *cfg)
{
    static const char *names[3] = {"n0", "n1", "n2"};
    static const char *doms[3] = {"d0", "d1", "d2"};
    struct t_three t;
    int i;

    t.m = t_master_cfg(cfg);
    for (i = 0; i < 3; i++) {
        t.node[i] = t_node(t.m, names[i], doms[i]);
        t.seg[i] = t_seg(t.m, t.node[i], 64 * MiB);
    }
    return t;
}

static struct t_three t_three(void)
{
    struct mc_master_config cfg;

    mc_master_config_defaults(&cfg);
    return t_three_cfg(&cfg);
}

/* a put of `nrep` replicas, the first on node `pref` */
static uint64_t t_put_on(struct mc_master *m, const char *key, uint64_t size, uint32_t nrep,
                         uint32_t pref, struct mc_master_put_grant *g)
{
    struct mc_master_put_req r = {.key = key, .key_len = strlen(key), .size = size,
                                  .replicas = nrep, .writer = pref, .preferred = pref};

    ck_assert_int_eq(mc_master_put_start(m, &r, g), 0);
    ck_assert_int_eq(t_end(m, key, g->version, pref), 0);
    return g->version;
}

static struct mc_master_node_info t_node_info(struct mc_master *m, const char *name)
{
    struct mc_master_node_info info[8];
    uint32_t cursor = 0;
    size_t i, n = mc_master_node_list(m, &cursor, info, 8);

    for (i = 0; i < n; i++) {
        if (strcmp(info[i].name, name) == 0)
            return info[i];
    }
    ck_abort_msg("node %s not listed", name);
    return info[0];
}

static bool t_has_node(const struct mc_master_get_result *g, uint32_t node)
{
    uint32_t i;

    for (i = 0; i < g->nrep; i++) {
        if (g->rep[i].node == node)
            return true;
    }
    return false;
}

START_TEST(test_drain_placement_skips_draining_node)
{
    struct t_three t = t_three();
    struct mc_master_put_grant g;
    char key[32];
    int i;

    ck_assert_int_eq(mc_master_node_drain(t.m, "n0", true), 0);
    ck_assert_int_eq(mc_master_node_drain(t.m, "n0", true), 0); /* repeating is no error */
    ck_assert_int_eq(mc_master_node_drain(t.m, "nobody", true), MC_ERR_NOT_FOUND);
    /* n0 is preferred and has room, yet nothing goes there */
    for (i = 0; i < 50; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        t_put_on(t.m, key, 4 * KiB, 1 + (uint32_t)(i % 2), t.node[0], &g);
        ck_assert_uint_ne(g.rep[0].node, t.node[0]);
        if (g.nrep == 2)
            ck_assert_uint_ne(g.rep[1].node, t.node[0]);
    }
    /* three replicas need three domains: only two are open */
    {
        struct mc_master_put_req r = {.key = "three", .key_len = 5, .size = 1, .replicas = 3,
                                      .writer = t.node[1], .preferred = MC_MASTER_NODE_NONE};

        ck_assert_int_eq(mc_master_put_start(t.m, &r, &g), MC_ERR_NO_SPACE);
    }
    /* every node draining: no room anywhere */
    ck_assert_int_eq(mc_master_node_drain(t.m, "n1", true), 0);
    ck_assert_int_eq(mc_master_node_drain(t.m, "n2", true), 0);
    ck_assert_int_eq(t_start(t.m, "none", 1, 0, t.node[1], &g), MC_ERR_NO_SPACE);
    /* undrain: the preferred node takes the first replica again */
    ck_assert_int_eq(mc_master_node_drain(t.m, "n0", false), 0);
    t_put_on(t.m, "back", 4 * KiB, 1, t.node[0], &g);
    ck_assert_uint_eq(g.rep[0].node, t.node[0]);
    ck_assert_uint_eq(t_node_info(t.m, "n0").drain, MC_MASTER_DRAIN_NONE);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_drain_copy_visible_only_when_completed)
{
    struct t_three t = t_three();
    struct mc_master_put_grant g;
    struct mc_master_get_result r;
    struct mc_master_copy c[4];
    struct mc_master_node_info ni;
    uint64_t v = t_put_on(t.m, "obj", 100 * KiB, 1, t.node[0], &g);

    ck_assert_uint_eq(g.rep[0].node, t.node[0]);
    ck_assert_int_eq(mc_master_node_drain(t.m, "n0", true), 0);
    ni = t_node_info(t.m, "n0");
    ck_assert_uint_eq(ni.drain, MC_MASTER_DRAIN_DRAINING);
    ck_assert_uint_eq(ni.drain_blocks, 1);
    ck_assert_uint_ge(ni.drain_bytes, 100 * KiB);
    mc_master_tick(t.m);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c, 4), 1);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c + 1, 3), 0); /* handed out once */
    ck_assert_uint_eq(c[0].version, v);
    ck_assert_uint_gt(c[0].id, v);
    ck_assert_uint_eq(c[0].src.node, t.node[0]);
    ck_assert_uint_eq(c[0].src.seg, g.rep[0].seg);
    ck_assert_uint_eq(c[0].src.alloc, g.rep[0].alloc);
    ck_assert_uint_ne(c[0].dst.node, t.node[0]);
    ck_assert_uint_ge(c[0].dst.len, c[0].len);
    ck_assert_uint_eq(c[0].key_len, 3);
    ck_assert(memcmp(c[0].key, "obj", 3) == 0);

    /* while the copy runs, readers see only the source; the target is used space */
    ck_assert_int_eq(t_get(t.m, "obj", &r), 0);
    ck_assert_uint_eq(r.nrep, 1);
    ck_assert_uint_eq(r.rep[0].node, t.node[0]);
    ck_assert_uint_eq(t_release(t.m, "obj", &r), 1);
    mc_master_tick(t.m);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c + 1, 3), 0); /* not copied twice */

    /* completed: the target joins the version */
    mc_master_copy_done(t.m, c[0].id, 0);
    mc_master_copy_done(t.m, c[0].id, 0); /* a repeat is ignored */
    ck_assert_int_eq(t_get(t.m, "obj", &r), 0);
    ck_assert_uint_eq(r.nrep, 2);
    ck_assert(t_has_node(&r, c[0].dst.node));
    ck_assert_uint_eq(r.version, v);
    ck_assert_uint_eq(t_release(t.m, "obj", &r), 1);

    /* the next pass drops the draining replica: nothing is left on n0 */
    mc_master_tick(t.m);
    ck_assert_int_eq(t_get(t.m, "obj", &r), 0);
    ck_assert_uint_eq(r.nrep, 1);
    ck_assert_uint_eq(r.rep[0].node, c[0].dst.node);
    ck_assert_uint_eq(t_release(t.m, "obj", &r), 1);
    ni = t_node_info(t.m, "n0");
    ck_assert_uint_eq(ni.drain, MC_MASTER_DRAIN_DRAINED);
    ck_assert_uint_eq(ni.drain_blocks, 0);
    ck_assert_uint_eq(ni.drain_bytes, 0);
    mc_master_destroy(t.m);
}
END_TEST

/* A GPU-tier object's copy is placed in another node's GPU segment, never in DRAM (which
 * every node has, with more room); without a GPU segment elsewhere it is not copied. */
START_TEST(test_drain_gpu_tier_copy_stays_in_gpu_tier)
{
    struct t_three t = t_three();
    struct mc_master_seg_desc d = {.node = t.node[0], .kind = MC_SEG_GPU, .base = 0x20000000,
                                   .size = 8 * MiB};
    struct mc_master_put_grant g;
    struct mc_master_get_result r;
    struct mc_master_copy c[4];
    uint32_t gseg0, gseg2;
    uint64_t v;

    ck_assert_int_eq(mc_master_segment_mount(t.m, &d, &gseg0), 0);
    {
        struct mc_master_put_req q = {.key = "g", .key_len = 1, .size = 100 * KiB,
                                      .replicas = 1, .flags = MC_MASTER_PUT_TIER_GPU,
                                      .writer = t.node[0], .preferred = t.node[0]};

        ck_assert_int_eq(mc_master_put_start(t.m, &q, &g), 0);
        ck_assert_int_eq(t_end(t.m, "g", g.version, t.node[0]), 0);
        v = g.version;
    }
    ck_assert_uint_eq(g.rep[0].seg, gseg0);
    ck_assert_int_eq(mc_master_node_drain(t.m, "n0", true), 0);
    mc_master_tick(t.m);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c, 4), 0); /* no GPU room elsewhere */
    ck_assert_uint_eq(t_node_info(t.m, "n0").drain, MC_MASTER_DRAIN_DRAINING);

    d.node = t.node[2];
    d.base = 0x30000000;
    ck_assert_int_eq(mc_master_segment_mount(t.m, &d, &gseg2), 0);
    mc_master_tick(t.m);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c, 4), 1);
    ck_assert_uint_eq(c[0].version, v);
    ck_assert_uint_eq(c[0].src.seg, gseg0);
    ck_assert_uint_eq(c[0].dst.node, t.node[2]);
    ck_assert_uint_eq(c[0].dst.seg, gseg2);
    mc_master_copy_done(t.m, c[0].id, 0);
    mc_master_tick(t.m);
    ck_assert_int_eq(t_get(t.m, "g", &r), 0);
    ck_assert_uint_eq(r.nrep, 1);
    ck_assert_uint_eq(r.rep[0].seg, gseg2);
    ck_assert_uint_eq(t_release(t.m, "g", &r), 1);
    ck_assert_uint_eq(t_node_info(t.m, "n0").drain, MC_MASTER_DRAIN_DRAINED);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_drain_failed_copy_fenced_then_freed_and_retried)
{
    struct t_three t = t_three();
    struct mc_master_put_grant g;
    struct mc_master_get_result r;
    struct mc_master_copy c[2];
    struct mc_master_fence f[4];
    uint64_t used;

    t_put_on(t.m, "obj", 1 * MiB, 1, t.node[0], &g);
    used = t_used(t.m);
    ck_assert_int_eq(mc_master_node_drain(t.m, "n0", true), 0);
    mc_master_tick(t.m);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c, 2), 1);
    ck_assert_uint_gt(t_used(t.m), used); /* the target block is taken */

    /* the owner died or timed out: the target is fenced before its block is reused */
    mc_master_copy_done(t.m, c[0].id, MC_ERR_TIMEOUT);
    ck_assert_uint_eq(mc_master_fences_take(t.m, f, 4), 1);
    ck_assert_uint_eq(f[0].seg, c[0].dst.seg);
    ck_assert_uint_eq(f[0].alloc, c[0].dst.alloc);
    ck_assert_uint_eq(f[0].version, c[0].id);
    ck_assert_uint_gt(t_used(t.m), used);
    ck_assert_int_eq(t_get(t.m, "obj", &r), 0);
    ck_assert_uint_eq(r.nrep, 1); /* never a replica that may lack bytes */
    ck_assert_uint_eq(r.rep[0].node, t.node[0]);
    ck_assert_uint_eq(t_release(t.m, "obj", &r), 1);
    /* a late success answer of the failed copy changes nothing */
    mc_master_copy_done(t.m, c[0].id, 0);
    ck_assert_int_eq(t_get(t.m, "obj", &r), 0);
    ck_assert_uint_eq(r.nrep, 1);
    ck_assert_uint_eq(t_release(t.m, "obj", &r), 1);

    /* the fence is asked again while unanswered; meanwhile the object is tried again */
    t_advance(2500);
    mc_master_tick(t.m);
    ck_assert_uint_ge(mc_master_fences_take(t.m, f, 4), 1);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c + 1, 1), 1);
    ck_assert_uint_ne(c[1].id, c[0].id);
    /* the owner fenced the first target: its block is free */
    ck_assert_int_eq(mc_master_fence_ack(t.m, c[0].dst.seg, c[0].dst.alloc, c[0].id), 0);
    ck_assert_uint_eq(t_used(t.m), used + c[1].dst.len);
    ck_assert_int_eq(mc_master_fence_ack(t.m, c[0].dst.seg, c[0].dst.alloc, c[0].id),
                     MC_ERR_NOT_FOUND);
    mc_master_copy_done(t.m, c[1].id, 0);
    mc_master_tick(t.m);
    ck_assert_uint_eq(t_node_info(t.m, "n0").drain, MC_MASTER_DRAIN_DRAINED);
    ck_assert_int_eq(t_get(t.m, "obj", &r), 0);
    ck_assert_uint_eq(r.rep[0].node, c[1].dst.node);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_drain_copy_of_replaced_version_is_discarded)
{
    struct t_three t = t_three();
    struct mc_master_put_grant g;
    struct mc_master_copy c;
    uint64_t used;

    t_put_on(t.m, "obj", 64 * KiB, 1, t.node[0], &g);
    ck_assert_int_eq(mc_master_node_drain(t.m, "n0", true), 0);
    mc_master_tick(t.m);
    ck_assert_uint_eq(mc_master_copies_take(t.m, &c, 1), 1);
    ck_assert_int_eq(mc_master_remove(t.m, "obj", 3), 0);
    used = t_used(t.m);
    /* the write is answered, so its block may be reused at once */
    mc_master_copy_done(t.m, c.id, 0);
    ck_assert_int_eq(t_exist(t.m, "obj"), 0);
    ck_assert_uint_lt(t_used(t.m), used);
    ck_assert_uint_eq(t_used(t.m), 0);
    ck_assert_uint_eq(t_node_info(t.m, "n0").drain, MC_MASTER_DRAIN_DRAINED);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_drain_drops_replica_with_home_elsewhere_once_unleased)
{
    struct t_three t = t_three();
    struct mc_master_put_grant g;
    struct mc_master_get_result r, r2;
    struct mc_master_copy c;
    struct mc_master_stat st;

    t_put_on(t.m, "two", 8 * KiB, 2, t.node[0], &g);
    ck_assert_int_eq(t_get(t.m, "two", &r), 0); /* a reader holds a lease */
    ck_assert_int_eq(mc_master_node_drain(t.m, "n0", true), 0);
    mc_master_tick(t.m);
    ck_assert_uint_eq(mc_master_copies_take(t.m, &c, 1), 0); /* no copy: it has a home */
    ck_assert_int_eq(mc_master_stat(t.m, "two", 3, &st), 0);
    ck_assert_uint_eq(st.replicas, 2); /* leased: kept */
    ck_assert_uint_eq(t_node_info(t.m, "n0").drain, MC_MASTER_DRAIN_DRAINING);
    ck_assert_uint_eq(t_release(t.m, "two", &r), 1);
    mc_master_tick(t.m);
    ck_assert_int_eq(mc_master_stat(t.m, "two", 3, &st), 0);
    ck_assert_uint_eq(st.replicas, 1);
    ck_assert_int_eq(t_get(t.m, "two", &r2), 0);
    ck_assert(!t_has_node(&r2, t.node[0]));
    ck_assert_uint_eq(t_release(t.m, "two", &r2), 1);
    ck_assert_uint_eq(t_node_info(t.m, "n0").drain, MC_MASTER_DRAIN_DRAINED);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_drain_copies_bounded_and_drained_node_holds_nothing)
{
    struct mc_master_config cfg;
    struct t_three t;
    struct mc_master_put_grant g;
    struct mc_master_copy c[16];
    struct mc_master_seg_info si;
    char key[32];
    size_t n, total = 0;
    int i, rounds = 0;

    mc_master_config_defaults(&cfg);
    cfg.drain_copies_max = 3;
    t = t_three_cfg(&cfg);
    for (i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        t_put_on(t.m, key, (uint64_t)(1 + i) * KiB, 1, t.node[0], &g);
    }
    ck_assert_int_eq(mc_master_node_drain(t.m, "n0", true), 0);
    while (t_node_info(t.m, "n0").drain != MC_MASTER_DRAIN_DRAINED) {
        ck_assert_int_lt(rounds++, 100);
        mc_master_tick(t.m);
        n = mc_master_copies_take(t.m, c, 16);
        ck_assert_uint_le(n, 3);
        for (size_t k = 0; k < n; k++)
            mc_master_copy_done(t.m, c[k].id, 0);
        total += n;
    }
    ck_assert_uint_eq(total, 20);
    ck_assert_int_eq(mc_master_segment_info(t.m, t.seg[0], &si), 0);
    ck_assert_uint_eq(si.blocks, 0);
    for (i = 0; i < 20; i++) {
        struct mc_master_get_result r;

        snprintf(key, sizeof(key), "k%d", i);
        ck_assert_int_eq(t_get(t.m, key, &r), 0);
        ck_assert_uint_eq(r.nrep, 1);
        ck_assert_uint_ne(r.rep[0].node, t.node[0]);
        ck_assert_uint_eq(t_release(t.m, key, &r), 1);
    }
    /* the drained node leaves: nothing is lost */
    ck_assert_int_eq(mc_master_node_unregister(t.m, t.node[0]), 0);
    for (i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        ck_assert_int_eq(t_exist(t.m, key), 1);
    }
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_drain_source_dead_copy_given_up)
{
    struct t_three t = t_three();
    struct mc_master_put_grant g;
    struct mc_master_copy c;
    struct mc_master_fence f[2];

    t_put_on(t.m, "obj", 64 * KiB, 1, t.node[0], &g);
    ck_assert_int_eq(mc_master_node_drain(t.m, "n0", true), 0);
    mc_master_tick(t.m);
    ck_assert_uint_eq(mc_master_copies_take(t.m, &c, 1), 1);
    ck_assert_int_eq(mc_master_node_unregister(t.m, t.node[0]), 0);
    mc_master_copy_done(t.m, c.id, MC_ERR_UNAVAILABLE);
    ck_assert_int_eq(t_exist(t.m, "obj"), 0); /* its only replica went with the node */
    ck_assert_uint_eq(mc_master_fences_take(t.m, f, 2), 1);
    ck_assert_int_eq(mc_master_fence_ack(t.m, f[0].seg, f[0].alloc, f[0].version), 0);
    ck_assert_uint_eq(t_used(t.m), 0);
    mc_master_tick(t.m);
    ck_assert_uint_eq(mc_master_copies_take(t.m, &c, 1), 0);
    mc_master_destroy(t.m);
}
END_TEST

/* --- a node with a disk (docs/disk.md, "Draining a node with a disk") --------------------- */

/* n0: 1 MiB of DRAM and a disk; 40 objects of 100 KiB put there, every offload copy
 * answered 0, until some are on its disk only (their keys in only[], *nonly of them);
 * then n1 joins with 64 MiB of DRAM. */
struct t_disknode {
    struct mc_master *m;
    uint32_t node[2], dram0, disk0, dram1;
    char only[40][8];
    int nonly;
};

#define T_DN_KEYS 40
#define T_DN_SIZE (100 * KiB)

static bool t_disk_only(struct mc_master *m, const char *key)
{
    struct mc_master_get_result r;
    bool only = true;

    ck_assert_int_eq(t_get(m, key, &r), 0);
    for (uint32_t i = 0; i < r.nrep; i++)
        only &= r.rep[i].kind == MC_SEG_DISK;
    t_release(m, key, &r);
    return only;
}

static void t_offloads_done(struct mc_master *m)
{
    struct mc_master_copy c[64];
    size_t n;

    while ((n = mc_master_copies_take(m, c, 64)) > 0) {
        for (size_t i = 0; i < n; i++) {
            ck_assert_uint_eq(c[i].dst.kind, MC_SEG_DISK);
            mc_master_copy_done(m, c[i].id, 0);
        }
    }
}

static struct t_disknode t_disknode(void)
{
    struct mc_master_seg_desc d = {.kind = MC_SEG_DISK, .base = 0, .size = 64 * MiB};
    struct mc_master_put_grant g;
    struct t_disknode t = {0};
    char key[8];

    t.m = t_master();
    t.node[0] = t_node(t.m, "n0", "d0");
    t.dram0 = t_seg(t.m, t.node[0], 1 * MiB);
    d.node = t.node[0];
    ck_assert_int_eq(mc_master_segment_mount(t.m, &d, &t.disk0), 0);
    for (int i = 0; i < T_DN_KEYS; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        while (t_start(t.m, key, T_DN_SIZE, 0, t.node[0], &g) == MC_ERR_NO_SPACE)
            t_offloads_done(t.m); /* room once the copies are answered */
        ck_assert_int_eq(t_end(t.m, key, g.version, t.node[0]), 0);
        t_offloads_done(t.m);
    }
    for (int i = 0; i < T_DN_KEYS; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        if (t_disk_only(t.m, key))
            memcpy(t.only[t.nonly++], key, sizeof(key));
    }
    ck_assert_int_ge(t.nonly, 10);
    t.node[1] = t_node(t.m, "n1", "d1");
    t.dram1 = t_seg(t.m, t.node[1], 64 * MiB);
    return t;
}

/* A disk-only object of a draining node is copied from its record into another node's
 * memory, a block of the image's length (not the extent's); an object still in memory is
 * copied from memory. "drained" only once the disk holds nothing; every object is then in
 * n1's memory. Fails if the drain copies only memory sources: n0 is never drained. */
START_TEST(test_drain_disk_record_copied_to_memory_elsewhere)
{
    struct t_disknode t = t_disknode();
    struct mc_master_copy c[16];
    struct mc_master_seg_info si;
    struct mc_master_node_info ni;
    size_t n, from_disk = 0;
    int rounds = 0;
    char key[8];

    ck_assert_int_eq(mc_master_node_drain(t.m, "n0", true), 0);
    while ((ni = t_node_info(t.m, "n0")).drain != MC_MASTER_DRAIN_DRAINED) {
        ck_assert_int_lt(rounds++, 200);
        mc_master_tick(t.m);
        n = mc_master_copies_take(t.m, c, 16);
        for (size_t k = 0; k < n; k++) {
            char ck[8] = {0};

            if (c[k].dst.kind == MC_SEG_DISK) {
                mc_master_copy_done(t.m, c[k].id, 0); /* the tick's offload on n0 */
                continue;
            }
            memcpy(ck, c[k].key, c[k].key_len);
            ck_assert_uint_eq(c[k].src.node, t.node[0]);
            ck_assert_uint_eq(c[k].dst.node, t.node[1]);
            ck_assert_uint_eq(c[k].dst.kind, MC_SEG_DRAM);
            /* a disk source only when the object has nothing in memory */
            ck_assert_uint_eq(c[k].src.kind == MC_SEG_DISK, t_disk_only(t.m, ck));
            if (c[k].src.kind == MC_SEG_DISK) {
                from_disk++;
                ck_assert_uint_ge(c[k].len, mc_shm_alloc_len(T_DN_SIZE, true));
                ck_assert_uint_lt(c[k].len, c[k].src.len); /* not the extent's length */
                ck_assert_uint_le(c[k].len, c[k].dst.len);
            } else {
                ck_assert_uint_eq(c[k].len, c[k].src.len);
            }
            /* not drained while a copy is open: its source is still there */
            ck_assert_uint_eq(t_node_info(t.m, "n0").drain, MC_MASTER_DRAIN_DRAINING);
            mc_master_copy_done(t.m, c[k].id, 0);
        }
    }
    ck_assert_uint_ge(from_disk, (size_t)t.nonly);
    ck_assert_uint_eq(ni.drain_blocks, 0);
    ck_assert_int_eq(mc_master_segment_info(t.m, t.disk0, &si), 0);
    ck_assert_uint_eq(si.blocks, 0);
    for (int i = 0; i < T_DN_KEYS; i++) {
        struct mc_master_get_result r;

        snprintf(key, sizeof(key), "k%d", i);
        ck_assert_int_eq(t_get(t.m, key, &r), 0);
        ck_assert_uint_eq(r.nrep, 1);
        ck_assert_uint_eq(r.rep[0].node, t.node[1]);
        ck_assert_uint_eq(r.rep[0].kind, MC_SEG_DRAM);
        ck_assert_uint_eq(t_release(t.m, key, &r), 1);
    }
    mc_master_destroy(t.m);
}
END_TEST

/* The draining owner answered a disk-only object's copy with `status` (nothing sent): the
 * record is a lost replica, and with it the object (NOT_FOUND), its extent freed; the target
 * is fenced before reuse. One leased meanwhile stays (a reader may be on that very record)
 * and is copied again on a later pass. Without it the drain retries the record for ever and
 * n0 is never drained. */
static void drain_source_lost_case(int status)
{
    struct t_disknode t = t_disknode();
    const char *bad = t.only[0], *leased = t.only[1];
    struct mc_master_get_result lease;
    struct mc_master_copy c[64];
    struct mc_master_fence f[64];
    struct mc_master_seg_info si;
    size_t n, nf;
    int rounds = 0, bad_seen = 0, leased_seen = 0;

    ck_assert_int_eq(t_get(t.m, leased, &lease), 0);
    ck_assert_int_eq(mc_master_node_drain(t.m, "n0", true), 0);
    while (t_node_info(t.m, "n0").drain != MC_MASTER_DRAIN_DRAINED) {
        ck_assert_int_lt(rounds++, 200);
        mc_master_tick(t.m);
        n = mc_master_copies_take(t.m, c, 64);
        for (size_t k = 0; k < n; k++) {
            bool is_bad = c[k].key_len == strlen(bad) && memcmp(c[k].key, bad, c[k].key_len) == 0;
            bool is_leased = c[k].key_len == strlen(leased) &&
                             memcmp(c[k].key, leased, c[k].key_len) == 0;

            if (is_bad) {
                ck_assert_int_eq(bad_seen++, 0); /* never copied again */
                mc_master_copy_done(t.m, c[k].id, status);
                ck_assert_int_eq(t_exist(t.m, bad), 0);
            } else if (is_leased && leased_seen++ == 0) {
                mc_master_copy_done(t.m, c[k].id, status);
                ck_assert_int_eq(t_exist(t.m, leased), 1); /* held by a reader: kept */
                ck_assert_uint_eq(t_release(t.m, leased, &lease), 1);
            } else {
                mc_master_copy_done(t.m, c[k].id, 0);
            }
        }
        /* the failed copies' targets: fenced, then free */
        nf = mc_master_fences_take(t.m, f, 64);
        for (size_t k = 0; k < nf; k++)
            ck_assert_int_eq(mc_master_fence_ack(t.m, f[k].seg, f[k].alloc, f[k].version), 0);
    }
    ck_assert_int_eq(bad_seen, 1);
    ck_assert_int_eq(leased_seen, 2); /* the second copy, once unleased, answered 0 */
    ck_assert_int_eq(t_exist(t.m, bad), 0);
    for (int i = 0; i < T_DN_KEYS; i++) {
        char key[8];

        snprintf(key, sizeof(key), "k%d", i);
        if (strcmp(key, bad) != 0)
            ck_assert_int_eq(t_exist(t.m, key), 1);
    }
    ck_assert_int_eq(mc_master_segment_info(t.m, t.disk0, &si), 0);
    ck_assert_uint_eq(si.blocks, 0); /* the lost record's extent too */
    ck_assert_uint_eq(mc_master_disk_replicas_lost(t.m), 1); /* not the leased one */
    mc_master_destroy(t.m);
}

/* The record failed its check at the owner (MC_ERR_CORRUPT). */
START_TEST(test_drain_corrupt_disk_record_is_lost)
{
    drain_source_lost_case(MC_ERR_CORRUPT);
}
END_TEST

/* The owner's index has no such record (MC_ERR_NOT_FOUND: a restart's scan dropped it as
 * torn, say). Before, the copy was retried for ever and n0 was never drained. */
START_TEST(test_drain_missing_disk_record_is_lost)
{
    drain_source_lost_case(MC_ERR_NOT_FOUND);
}
END_TEST

static Suite *drain_suite(void)
{
    Suite *s = suite_create("drain");
    TCase *tc = tcase_create("rules");

    tcase_add_test(tc, test_drain_placement_skips_draining_node);
    tcase_add_test(tc, test_drain_copy_visible_only_when_completed);
    tcase_add_test(tc, test_drain_gpu_tier_copy_stays_in_gpu_tier);
    tcase_add_test(tc, test_drain_failed_copy_fenced_then_freed_and_retried);
    tcase_add_test(tc, test_drain_copy_of_replaced_version_is_discarded);
    tcase_add_test(tc, test_drain_drops_replica_with_home_elsewhere_once_unleased);
    tcase_add_test(tc, test_drain_copies_bounded_and_drained_node_holds_nothing);
    tcase_add_test(tc, test_drain_source_dead_copy_given_up);
    tcase_add_test(tc, test_drain_disk_record_copied_to_memory_elsewhere);
    tcase_add_test(tc, test_drain_corrupt_disk_record_is_lost);
    tcase_add_test(tc, test_drain_missing_disk_record_is_lost);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(drain_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
