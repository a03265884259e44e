/*
 * Unit tests of the disk tier at the master (docs/disk.md): a disk segment's granule, no
 * placement there, offload of a DRAM victim through a copy (the DRAM block kept until the
 * copy is answered), admission, re-offload as a no-op, reads ordered memory first, the
 * disk's own eviction, quotas counting memory only. Fake clock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/master/t_master.h"

static void t_unused(void) __attribute__((unused));
static void t_unused(void)
{
    (void)t_stats;
    (void)t_put;
    (void)t_master;
    (void)t_used;
    (void)t_release;
}

#define KiB 1024u
#define MiB (1024u * 1024u)

struct t_node {
    struct mc_master *m;
    uint32_t node, dram, disk;
};

static uint32_t t_mount(struct mc_master *m, uint32_t node, uint32_t kind, uint64_t size,
                        const char *tenant, uint64_t quota)
{
    struct mc_master_seg_desc d = {.node = node, .kind = kind, .base = 0, .size = size,
                                   .quota = quota};
    uint32_t seg;

    snprintf(d.tenant, sizeof(d.tenant), "%s", tenant != NULL ? tenant : "");
    ck_assert_int_eq(mc_master_segment_mount(m, &d, &seg), 0);
    return seg;
}

static struct t_node t_node_cfg(const struct mc_master_config *cfg, uint64_t dram, uint64_t disk)
{
    struct t_node t;

    t.m = t_master_cfg(cfg);
    t.node = t_node(t.m, "n0", NULL);
    t.dram = t_mount(t.m, t.node, MC_SEG_DRAM, dram, NULL, 0);
    t.disk = disk != 0 ? t_mount(t.m, t.node, MC_SEG_DISK, disk, NULL, 0) : UINT32_MAX;
    return t;
}

static struct t_node t_one(uint64_t dram, uint64_t disk)
{
    struct mc_master_config cfg;

    mc_master_config_defaults(&cfg);
    return t_node_cfg(&cfg, dram, disk);
}

static uint64_t t_put_n(struct mc_master *m, uint32_t node, const char *key, uint64_t size)
{
    struct mc_master_put_grant g;

    ck_assert_int_eq(t_start(m, key, size, 0, node, &g), 0);
    ck_assert_int_eq(t_end(m, key, g.version, node), 0);
    return g.version;
}

/* Answer every copy the master made, as an owner whose writes all succeed. */
static size_t t_copies_done(struct mc_master *m, int status)
{
    struct mc_master_copy c[64];
    size_t n, i, total = 0;

    while ((n = mc_master_copies_take(m, c, 64)) > 0) {
        for (i = 0; i < n; i++)
            mc_master_copy_done(m, c[i].id, status);
        total += n;
    }
    return total;
}

static uint32_t t_kinds(struct mc_master *m, const char *key, uint32_t *first_kind)
{
    struct mc_master_get_result r;
    uint32_t mask = 0;

    ck_assert_int_eq(t_get(m, key, &r), 0);
    for (uint32_t i = 0; i < r.nrep; i++)
        mask |= 1u << r.rep[i].kind;
    if (first_kind != NULL)
        *first_kind = r.rep[0].kind;
    t_release(m, key, &r);
    return mask;
}

START_TEST(test_offload_disk_granule_and_no_placement)
{
    struct t_node t = t_one(1 * MiB, 64 * MiB);
    struct mc_master_seg_info si;
    struct mc_master_put_grant g;
    char key[32];

    ck_assert_int_eq(mc_master_segment_info(t.m, t.disk, &si), 0);
    ck_assert_uint_eq(si.kind, MC_SEG_DISK);
    /* puts never land on the disk, even when DRAM must evict for them */
    for (int i = 0; i < 64; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        while (t_start(t.m, key, 100 * KiB, 0, t.node, &g) == MC_ERR_NO_SPACE)
            ck_assert_uint_gt(t_copies_done(t.m, 0), 0); /* room once the copies are done */
        ck_assert_uint_eq(g.rep[0].kind, MC_SEG_DRAM);
        ck_assert_int_eq(t_end(t.m, key, g.version, t.node), 0);
        t_copies_done(t.m, 0);
    }
    /* the disk's extents are whole 4 KiB blocks */
    {
        struct mc_master_get_result r;

        ck_assert_int_eq(t_get(t.m, "k0", &r), 0);
        for (uint32_t i = 0; i < r.nrep; i++) {
            if (r.rep[i].kind != MC_SEG_DISK)
                continue;
            ck_assert_uint_eq(r.rep[i].offset % 4096, 0);
            ck_assert_uint_eq(r.rep[i].len, 4096 + 100 * KiB);
        }
    }
    mc_master_destroy(t.m);
}
END_TEST

/* The victim's DRAM block stays while its copy runs; once answered, the disk replica joins
 * and the next pass frees the DRAM block. Reads list memory first. */
START_TEST(test_offload_keeps_dram_until_copied)
{
    struct t_node t = t_one(1 * MiB, 64 * MiB);
    struct mc_master_put_grant g;
    struct mc_master_copy c[64];
    size_t n;
    uint32_t first;
    char key[32];
    int i;

    /* fill the DRAM: 9 x 100 KiB, then one more needs room */
    for (i = 0; i < 9; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        t_put_n(t.m, t.node, key, 100 * KiB);
    }
    /* nothing copied, nothing evicted: the put finds no room but copies are under way */
    ck_assert_int_eq(t_start(t.m, "big", 400 * KiB, 0, t.node, &g), MC_ERR_NO_SPACE);
    n = mc_master_copies_take(t.m, c, 64);
    ck_assert_uint_gt(n, 0);
    for (size_t k = 0; k < n; k++) {
        ck_assert_uint_eq(c[k].src.kind, MC_SEG_DRAM);
        ck_assert_uint_eq(c[k].dst.kind, MC_SEG_DISK);
        ck_assert_uint_eq(c[k].dst.node, t.node);
        ck_assert_uint_eq(c[k].dst.len, 4096 + 100 * KiB);
    }
    /* every object still readable, from DRAM only, while the copies run */
    for (i = 0; i < 9; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        ck_assert_uint_eq(t_kinds(t.m, key, NULL), 1u << MC_SEG_DRAM);
    }
    for (size_t k = 0; k < n; k++)
        mc_master_copy_done(t.m, c[k].id, 0);
    /* now the put makes room by dropping DRAM replicas that have a disk one */
    ck_assert_int_eq(t_start(t.m, "big", 400 * KiB, 0, t.node, &g), 0);
    ck_assert_int_eq(t_end(t.m, "big", g.version, t.node), 0);
    for (i = 0; i < 9; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        ck_assert_int_eq(t_exist(t.m, key), 1); /* nothing lost */
    }
    /* an object on both: memory listed first */
    for (i = 0; i < 9; i++) {
        uint32_t kinds;

        snprintf(key, sizeof(key), "k%d", i);
        kinds = t_kinds(t.m, key, &first);
        if (kinds == ((1u << MC_SEG_DRAM) | (1u << MC_SEG_DISK)))
            ck_assert_uint_eq(first, MC_SEG_DRAM);
    }
    mc_master_destroy(t.m);
}
END_TEST

/* An object already on disk at that version is not copied again: its DRAM replica simply
 * goes (issue #2827 of Mooncake: "already exists" and orphaned files). */
START_TEST(test_offload_again_is_a_no_op)
{
    struct t_node t = t_one(1 * MiB, 64 * MiB);
    char key[32];
    size_t copies = 0;

    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 30; i++) {
            snprintf(key, sizeof(key), "r%d-%d", round, i);
            while (1) {
                struct mc_master_put_grant g;
                int err = t_start(t.m, key, 60 * KiB, 0, t.node, &g);

                if (err == 0) {
                    ck_assert_int_eq(t_end(t.m, key, g.version, t.node), 0);
                    break;
                }
                ck_assert_int_eq(err, MC_ERR_NO_SPACE);
                ck_assert_uint_gt(t_copies_done(t.m, 0), 0); /* progress, or a bug */
            }
            copies += t_copies_done(t.m, 0);
        }
    }
    /* every object was copied at most once, and each one is still there */
    ck_assert_uint_le(copies, 4 * 30);
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 30; i++) {
            snprintf(key, sizeof(key), "r%d-%d", round, i);
            ck_assert_int_eq(t_exist(t.m, key), 1);
        }
    }
    mc_master_destroy(t.m);
}
END_TEST

/* second_hit: only objects read since their put go to disk; the others are dropped. */
START_TEST(test_offload_second_hit_admission)
{
    struct mc_master_config cfg;
    struct t_node t;
    struct mc_master_get_result r;
    char key[32];

    mc_master_config_defaults(&cfg);
    cfg.disk_admission = MC_MASTER_DISK_ADMIT_SECOND_HIT;
    t = t_node_cfg(&cfg, 1 * MiB, 64 * MiB);
    t_put_n(t.m, t.node, "hot", 100 * KiB);
    ck_assert_int_eq(t_get(t.m, "hot", &r), 0);
    t_release(t.m, "hot", &r);
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "cold%d", i);
        for (;;) {
            struct mc_master_put_grant g;
            int err = t_start(t.m, key, 100 * KiB, 0, t.node, &g);

            if (err == 0) {
                ck_assert_int_eq(t_end(t.m, key, g.version, t.node), 0);
                break;
            }
            ck_assert_int_eq(err, MC_ERR_NO_SPACE);
            ck_assert_uint_gt(t_copies_done(t.m, 0), 0);
        }
        t_copies_done(t.m, 0);
    }
    ck_assert_int_eq(t_exist(t.m, "hot"), 1);       /* read once: kept on disk */
    ck_assert_int_eq(t_exist(t.m, "cold0"), 0);     /* never read: dropped */
    mc_master_destroy(t.m);
}
END_TEST

/* A failed copy: the DRAM block is released to eviction (the object is dropped as without
 * a disk, never copied again), the target block fenced. */
START_TEST(test_offload_failed_copy_not_retried)
{
    struct t_node t = t_one(1 * MiB, 64 * MiB);
    struct mc_master_put_grant g;
    struct mc_master_fence f[64];
    char key[32];
    size_t failed = 0, nf, i;

    for (int k = 0; k < 9; k++) {
        snprintf(key, sizeof(key), "k%d", k);
        t_put_n(t.m, t.node, key, 100 * KiB);
    }
    ck_assert_int_eq(t_start(t.m, "big", 400 * KiB, 0, t.node, &g), MC_ERR_NO_SPACE);
    failed = t_copies_done(t.m, MC_ERR_IO);
    ck_assert_uint_gt(failed, 0);
    nf = mc_master_fences_take(t.m, f, 64);
    ck_assert_uint_eq(nf, failed);
    for (i = 0; i < nf; i++)
        ck_assert_int_eq(mc_master_fence_ack(t.m, f[i].seg, f[i].alloc, f[i].version), 0);
    /* fenced: now the victims go without a copy */
    ck_assert_int_eq(t_start(t.m, "big", 400 * KiB, 0, t.node, &g), 0);
    ck_assert_uint_eq(t_copies_done(t.m, 0), 0);
    mc_master_destroy(t.m);
}
END_TEST

/* A copy that failed at the master (a timeout) while its owner's disk write may still run:
 * neither its DRAM source nor its disk extent is freed before the owner answers the fence,
 * however long that takes (a disk write has no deadline; review finding H2). */
START_TEST(test_offload_failed_copy_waits_for_fence)
{
    struct mc_master_config cfg;
    struct t_node t;
    struct mc_master_put_grant g;
    struct mc_master_fence f[64];
    uint64_t used;
    char key[32];
    size_t failed, nf, i;

    mc_master_config_defaults(&cfg);
    cfg.put_release_ms = 100;
    t = t_node_cfg(&cfg, 1 * MiB, 64 * MiB);
    for (int k = 0; k < 9; k++) {
        snprintf(key, sizeof(key), "k%d", k);
        t_put_n(t.m, t.node, key, 100 * KiB);
    }
    ck_assert_int_eq(t_start(t.m, "big", 400 * KiB, 0, t.node, &g), MC_ERR_NO_SPACE);
    used = t_used(t.m);
    failed = t_copies_done(t.m, MC_ERR_TIMEOUT);
    ck_assert_uint_gt(failed, 0);
    /* long past put_release_ms, fences unanswered: everything stays */
    for (i = 0; i < 5; i++) {
        t_advance(1000);
        mc_master_tick(t.m);
        ck_assert_int_eq(t_start(t.m, "big", 400 * KiB, 0, t.node, &g), MC_ERR_NO_SPACE);
        ck_assert_uint_eq(t_used(t.m), used);
    }
    for (int k = 0; k < 9; k++) {
        snprintf(key, sizeof(key), "k%d", k);
        ck_assert_uint_eq(t_kinds(t.m, key, NULL), 1u << MC_SEG_DRAM);
    }
    /* the owner answers the fences (its writes ended): the blocks go */
    nf = mc_master_fences_take(t.m, f, 64);
    ck_assert_uint_ge(nf, failed);
    for (i = 0; i < nf; i++)
        (void)mc_master_fence_ack(t.m, f[i].seg, f[i].alloc, f[i].version);
    ck_assert_uint_lt(t_used(t.m), used);
    ck_assert_int_eq(t_start(t.m, "big", 400 * KiB, 0, t.node, &g), 0);
    ck_assert_uint_eq(t_copies_done(t.m, 0), 0);
    mc_master_destroy(t.m);
}
END_TEST

/* The disk full: it evicts its own oldest records (a drop each, for the owner to erase);
 * nothing complete and on disk is lost but what its clock chose. */
START_TEST(test_offload_disk_evicts_its_own)
{
    struct t_node t = t_one(1 * MiB, 2 * MiB);
    struct mc_master_seg_info si;
    struct mc_master_drop d[256];
    char key[32];
    int present = 0;

    mc_master_drops_enable(t.m, true);
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        for (;;) {
            struct mc_master_put_grant g;
            int err = t_start(t.m, key, 100 * KiB, 0, t.node, &g);

            if (err == 0) {
                ck_assert_int_eq(t_end(t.m, key, g.version, t.node), 0);
                break;
            }
            ck_assert_int_eq(err, MC_ERR_NO_SPACE);
            ck_assert_uint_gt(t_copies_done(t.m, 0), 0);
        }
        t_copies_done(t.m, 0);
    }
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        present += t_exist(t.m, key);
    }
    ck_assert_int_gt(present, 9 + 10); /* more than the DRAM alone */
    ck_assert_int_lt(present, 60);
    ck_assert_int_eq(t_exist(t.m, "k59"), 1);
    ck_assert_int_eq(mc_master_segment_info(t.m, t.disk, &si), 0);
    ck_assert_uint_le(si.size - si.free_bytes, si.size);
    /* the disk's freed records are told to the owner */
    {
        size_t n = mc_master_drops_take(t.m, d, 256), disk_drops = 0;

        for (size_t i = 0; i < n; i++)
            disk_drops += d[i].seg == t.disk;
        ck_assert_uint_gt(disk_drops, 0);
    }
    mc_master_destroy(t.m);
}
END_TEST

/* k0..k8 (100 KiB each) put, copied to disk, and the DRAM made to drop some (a put of
 * 400 KiB): returns a key whose version has a disk replica. */
static const char *t_on_disk(struct t_node *t)
{
    static char key[32];
    struct mc_master_put_grant g;

    for (int i = 0; i < 9; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        t_put_n(t->m, t->node, key, 100 * KiB);
    }
    ck_assert_int_eq(t_start(t->m, "big", 400 * KiB, 0, t->node, &g), MC_ERR_NO_SPACE);
    ck_assert_uint_gt(t_copies_done(t->m, 0), 0);
    ck_assert_int_eq(t_start(t->m, "big", 400 * KiB, 0, t->node, &g), 0);
    ck_assert_int_eq(t_end(t->m, "big", g.version, t->node), 0);
    for (int i = 0; i < 9; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        if (t_kinds(t->m, key, NULL) & (1u << MC_SEG_DISK))
            return key;
    }
    ck_abort_msg("nothing on disk");
    return NULL;
}

/* Hole D1 (docs/disk.md): a disk object removed while a reader holds it (a lease; a pin is
 * one) is only retired: its disk blocks are told at once (RETIRED drops: the owner marks
 * the record removed, mc-master remembers the version), freed later when the lease ends
 * (FREED drops, after_retire). An unleased one is freed at once, nothing RETIRED. */
START_TEST(test_offload_removed_while_leased_tells_disk_blocks)
{
    struct t_node t = t_one(1 * MiB, 64 * MiB);
    struct mc_master_get_result r;
    struct mc_master_drop d[256];
    char key[32];
    size_t n, retired = 0, freed = 0;

    mc_master_drops_enable(t.m, true);
    snprintf(key, sizeof(key), "%s", t_on_disk(&t));
    while (mc_master_drops_take(t.m, d, 256) > 0)
        ;
    ck_assert_int_eq(t_get(t.m, key, &r), 0);
    ck_assert_int_eq(mc_master_remove(t.m, key, strlen(key)), 0);
    n = mc_master_drops_take(t.m, d, 256);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(d[i].kind, MC_MASTER_DROP_RETIRED);
        ck_assert_uint_eq(d[i].seg, t.disk);
        ck_assert_uint_eq(d[i].version, r.lease.version);
        retired++;
    }
    ck_assert_uint_eq(retired, 1);
    ck_assert_int_eq(t_exist(t.m, key), 0);
    /* the lease ends: every block freed, each drop saying its version was retired */
    ck_assert_uint_eq(t_release(t.m, key, &r), 1);
    n = mc_master_drops_take(t.m, d, 256);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(d[i].kind, MC_MASTER_DROP_FREED);
        ck_assert(d[i].after_retire);
        ck_assert_uint_eq(d[i].version, r.lease.version);
        freed += d[i].seg == t.disk;
    }
    ck_assert_uint_eq(freed, 1);
    /* unleased: freed at once, nothing retired */
    ck_assert_int_eq(mc_master_remove(t.m, "big", 3), 0);
    n = mc_master_drops_take(t.m, d, 256);
    ck_assert_uint_gt(n, 0);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(d[i].kind, MC_MASTER_DROP_FREED);
        ck_assert(!d[i].after_retire);
    }
    mc_master_destroy(t.m);
}
END_TEST

/* Hole D5 (docs/disk.md): an object removed while its offload copy is being written. The
 * copy's target is told at the remove (a RETIRED drop: the owner marks the record once
 * written, mc-master remembers the version); the copy's answer frees it (FREED,
 * after_retire: remembered already). A copy whose object stays is told nothing. */
START_TEST(test_offload_removed_while_copying_tells_target)
{
    struct t_node t = t_one(1 * MiB, 64 * MiB);
    struct mc_master_put_grant g;
    struct mc_master_copy c[64];
    struct mc_master_drop d[256];
    char key[32], gone[32];
    size_t n, nd, retired = 0, freed = 0;

    mc_master_drops_enable(t.m, true);
    for (int i = 0; i < 9; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        t_put_n(t.m, t.node, key, 100 * KiB);
    }
    ck_assert_int_eq(t_start(t.m, "big", 400 * KiB, 0, t.node, &g), MC_ERR_NO_SPACE);
    n = mc_master_copies_take(t.m, c, 64);
    ck_assert_uint_ge(n, 2);
    while (mc_master_drops_take(t.m, d, 256) > 0)
        ;
    snprintf(gone, sizeof(gone), "%.*s", (int)c[0].key_len, c[0].key);
    ck_assert_int_eq(mc_master_remove(t.m, gone, strlen(gone)), 0);
    nd = mc_master_drops_take(t.m, d, 256);
    for (size_t i = 0; i < nd; i++) {
        if (d[i].kind != MC_MASTER_DROP_RETIRED)
            continue;
        ck_assert_uint_eq(d[i].seg, t.disk);
        ck_assert_uint_eq(d[i].offset, c[0].dst.offset);
        ck_assert_uint_eq(d[i].version, c[0].version);
        retired++;
    }
    ck_assert_uint_eq(retired, 1);
    /* the copies end: the removed one's target freed, told as retired before */
    for (size_t k = 0; k < n; k++)
        mc_master_copy_done(t.m, c[k].id, 0);
    nd = mc_master_drops_take(t.m, d, 256);
    for (size_t i = 0; i < nd; i++) {
        ck_assert_uint_eq(d[i].kind, MC_MASTER_DROP_FREED);
        if (d[i].seg != t.disk)
            continue;
        ck_assert_uint_eq(d[i].version, c[0].version);
        ck_assert(d[i].after_retire);
        freed++;
    }
    ck_assert_uint_eq(freed, 1);
    ck_assert_int_eq(t_exist(t.m, gone), 0);
    snprintf(key, sizeof(key), "%.*s", (int)c[1].key_len, c[1].key);
    ck_assert_int_eq(t_exist(t.m, key), 1);
    ck_assert(t_kinds(t.m, key, NULL) & (1u << MC_SEG_DISK));
    mc_master_destroy(t.m);
}
END_TEST

/* A tenant's quota bounds its memory: its disk does not count. */
START_TEST(test_offload_quota_counts_memory_only)
{
    struct mc_master *m = t_master();
    uint32_t node = t_node(m, "n0", NULL);
    struct mc_master_tenant_info ti[4];
    size_t n;

    (void)t_mount(m, node, MC_SEG_DRAM, 4 * MiB, "t1", 2 * MiB);
    (void)t_mount(m, node, MC_SEG_DISK, 64 * MiB, "t1", 0);
    n = mc_master_tenant_list(m, ti, 4);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(ti[i].name, "t1") == 0)
            ck_assert_uint_eq(ti[i].quota_bytes, 2 * MiB);
    }
    mc_master_destroy(m);
}
END_TEST

/* --- promotion (disk_promote): a GET of a disk-only object copies it back to DRAM ------ */

/* Whether key is present with every replica on disk (mc_master_stat: no lease, no GET). */
static bool t_disk_only(struct mc_master *m, const char *key)
{
    struct mc_master_stat st;

    if (mc_master_stat(m, key, strlen(key), &st) != 0)
        return false;
    return st.replicas > 0 && st.replicas == st.disk_replicas;
}

#define PROMO_SZ (30 * KiB)
#define PROMO_N 80

static uint64_t t_dram_used(struct mc_master *m, uint32_t seg)
{
    struct mc_master_seg_info si;

    ck_assert_int_eq(mc_master_segment_info(m, seg, &si), 0);
    return si.size - si.free_bytes;
}

/* PROMO_N x 30 KiB into 1 MiB of DRAM, every offload answered: the early ones end on disk
 * only. */
static struct t_node t_promote_setup(bool promote)
{
    struct mc_master_config cfg;
    struct t_node t;
    char key[32];

    mc_master_config_defaults(&cfg);
    cfg.disk_promote = promote;
    t = t_node_cfg(&cfg, 1 * MiB, 64 * MiB);
    for (int i = 0; i < PROMO_N; i++) {
        struct mc_master_put_grant g;

        snprintf(key, sizeof(key), "k%d", i);
        while (t_start(t.m, key, PROMO_SZ, 0, t.node, &g) == MC_ERR_NO_SPACE)
            ck_assert_uint_gt(t_copies_done(t.m, 0), 0);
        ck_assert_int_eq(t_end(t.m, key, g.version, t.node), 0);
        t_copies_done(t.m, 0);
    }
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        ck_assert(t_disk_only(t.m, key));
    }
    return t;
}

/* The GET is answered from disk as before and queues one copy, disk record to a DRAM block
 * of the same node; a second GET meanwhile queues none; once answered, the object has both
 * tiers and reads list DRAM first; evicted from DRAM again, it is not offloaded again (its
 * record is there) and simply goes back to disk only. */
START_TEST(test_promote_queues_one_copy_to_dram)
{
    struct t_node t = t_promote_setup(true);
    struct mc_master_get_result r;
    struct mc_master_copy c[64];
    uint64_t version;
    uint32_t first;
    size_t n;

    ck_assert_int_eq(t_get(t.m, "k0", &r), 0);
    ck_assert_uint_eq(r.nrep, 1);
    ck_assert_uint_eq(r.rep[0].kind, MC_SEG_DISK);
    version = r.version;
    t_release(t.m, "k0", &r);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c, 64), 1);
    ck_assert_uint_eq(c[0].version, version);
    ck_assert_uint_eq(c[0].src.kind, MC_SEG_DISK);
    ck_assert_uint_eq(c[0].src.offset, r.rep[0].offset);
    ck_assert_uint_eq(c[0].dst.kind, MC_SEG_DRAM);
    ck_assert_uint_eq(c[0].dst.node, t.node);
    ck_assert_uint_ge(c[0].len, PROMO_SZ + 8 * 2);
    ck_assert_uint_eq(c[0].len, c[0].dst.len);
    /* a second GET while the copy runs: still disk only, no second copy */
    ck_assert_uint_eq(t_kinds(t.m, "k0", NULL), 1u << MC_SEG_DISK);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c + 1, 63), 0);
    mc_master_copy_done(t.m, c[0].id, 0);
    ck_assert_uint_eq(t_kinds(t.m, "k0", &first), (1u << MC_SEG_DRAM) | (1u << MC_SEG_DISK));
    ck_assert_uint_eq(first, MC_SEG_DRAM);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c, 64), 0); /* in memory now: no copy */
    /* new puts evict k0's DRAM block: never copied to disk again */
    for (int i = 100; i < 100 + PROMO_N; i++) {
        struct mc_master_put_grant g;
        char key[32];

        snprintf(key, sizeof(key), "n%d", i);
        while (t_start(t.m, key, PROMO_SZ, 0, t.node, &g) == MC_ERR_NO_SPACE) {
            n = mc_master_copies_take(t.m, c, 64);
            ck_assert_uint_gt(n, 0);
            for (size_t k = 0; k < n; k++) {
                ck_assert_uint_ne(c[k].version, version);
                mc_master_copy_done(t.m, c[k].id, 0);
            }
        }
        ck_assert_int_eq(t_end(t.m, key, g.version, t.node), 0);
        n = mc_master_copies_take(t.m, c, 64);
        for (size_t k = 0; k < n; k++) {
            ck_assert_uint_ne(c[k].version, version);
            mc_master_copy_done(t.m, c[k].id, 0);
        }
    }
    ck_assert(t_disk_only(t.m, "k0"));
    mc_master_destroy(t.m);
}
END_TEST

/* The one copy a GET for a reader on node `reader` queues: its target's node and kind. */
static struct mc_master_copy t_promote_for(struct t_node *t, uint32_t reader, const char *key)
{
    struct mc_master_get_result r;
    struct mc_master_copy c[4];

    ck_assert_int_eq(mc_master_get_for(t->m, reader, key, strlen(key), &r), 0);
    ck_assert_uint_eq(r.nrep, 1);
    ck_assert_uint_eq(r.rep[0].kind, MC_SEG_DISK);
    t_release(t->m, key, &r);
    ck_assert_uint_eq(mc_master_copies_take(t->m, c, 4), 1);
    ck_assert_uint_eq(c[0].src.kind, MC_SEG_DISK);
    ck_assert_uint_eq(c[0].src.node, t->node);
    ck_assert_uint_eq(c[0].dst.kind, MC_SEG_DRAM);
    return c[0];
}

/* A promotion goes into the reader's node when it has DRAM of the tenant with room (its
 * next read is local), else into the disk's own node: a reader with no DRAM segment, a
 * reader unknown (MC_MASTER_NODE_NONE), the disk's node itself. Answered, the object reads
 * the reader's DRAM replica first. Fails without the reader's node: every copy targets n0.
 * A disk node with no DRAM of its own (--dram 0) and a reader with none: the node with DRAM
 * (n1; before, nothing was promoted at all). */
START_TEST(test_promote_into_reader_node)
{
    struct t_node t = t_promote_setup(true);
    uint32_t n1 = t_node(t.m, "n1", "d1"), n2 = t_node(t.m, "n2", "d2");
    struct mc_master_get_result r;
    struct mc_master_copy c;

    (void)t_seg(t.m, n1, 4 * MiB); /* n2: no segment, as a --dram 0 node */
    c = t_promote_for(&t, n1, "k0");
    ck_assert_uint_eq(c.dst.node, n1);
    mc_master_copy_done(t.m, c.id, 0);
    ck_assert_int_eq(t_get(t.m, "k0", &r), 0);
    ck_assert_uint_eq(r.nrep, 2);
    ck_assert_uint_eq(r.rep[0].kind, MC_SEG_DRAM);
    ck_assert_uint_eq(r.rep[0].node, n1);
    ck_assert_uint_eq(r.rep[1].kind, MC_SEG_DISK);
    t_release(t.m, "k0", &r);

    c = t_promote_for(&t, n2, "k1");
    ck_assert_uint_eq(c.dst.node, t.node);
    mc_master_copy_done(t.m, c.id, 0);
    c = t_promote_for(&t, MC_MASTER_NODE_NONE, "k2");
    ck_assert_uint_eq(c.dst.node, t.node);
    mc_master_copy_done(t.m, c.id, 0);
    c = t_promote_for(&t, t.node, "k3");
    ck_assert_uint_eq(c.dst.node, t.node);
    mc_master_copy_done(t.m, c.id, 0);
    ck_assert_uint_eq(t_kinds(t.m, "k1", NULL), (1u << MC_SEG_DRAM) | (1u << MC_SEG_DISK));

    ck_assert_int_eq(mc_master_segment_unmount(t.m, t.dram), 0); /* n0: its disk only */
    c = t_promote_for(&t, n2, "k4");
    ck_assert_uint_eq(c.dst.node, n1);
    mc_master_copy_done(t.m, c.id, 0);
    ck_assert_int_eq(t_get(t.m, "k4", &r), 0);
    ck_assert_uint_eq(r.nrep, 2);
    ck_assert_uint_eq(r.rep[0].kind, MC_SEG_DRAM);
    ck_assert_uint_eq(r.rep[0].node, n1);
    t_release(t.m, "k4", &r);
    c = t_promote_for(&t, MC_MASTER_NODE_NONE, "k5");
    ck_assert_uint_eq(c.dst.node, n1);
    mc_master_copy_done(t.m, c.id, 0);
    mc_master_destroy(t.m);
}
END_TEST

/* Removed, or replaced by a newer put, while its promotion runs: the copy's answer 0 adds
 * nothing (the target is freed), the key stays removed, the new version is untouched. A
 * failed promotion frees its block only once fenced. Hard-pinned objects are not promoted. */
START_TEST(test_promote_removed_or_replaced_meanwhile)
{
    struct t_node t = t_promote_setup(true);
    struct mc_master_get_result r;
    struct mc_master_copy c[4];
    struct mc_master_fence f[8];
    struct mc_master_put_grant g;
    uint64_t used;
    size_t nf;

    used = t_used(t.m);
    ck_assert_uint_eq(t_kinds(t.m, "k1", NULL), 1u << MC_SEG_DISK);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c, 4), 1);
    ck_assert_int_eq(mc_master_remove(t.m, "k1", 2), 0);
    mc_master_copy_done(t.m, c[0].id, 0);
    ck_assert_int_eq(t_exist(t.m, "k1"), 0);
    ck_assert_int_eq(t_get(t.m, "k1", &r), MC_ERR_NOT_FOUND);
    ck_assert_uint_le(t_used(t.m), used); /* the promotion's block went back */

    /* replaced: the new version keeps its own replica, the copy adds nothing */
    ck_assert_uint_eq(t_kinds(t.m, "k2", NULL), 1u << MC_SEG_DISK);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c, 4), 1);
    while (t_start(t.m, "k2", 50 * KiB, MC_MASTER_PUT_UPSERT, t.node, &g) == MC_ERR_NO_SPACE)
        ck_assert_uint_gt(t_copies_done(t.m, 0), 0);
    ck_assert_int_eq(t_end(t.m, "k2", g.version, t.node), 0);
    mc_master_copy_done(t.m, c[0].id, 0);
    ck_assert_int_eq(t_get(t.m, "k2", &r), 0);
    ck_assert_uint_eq(r.version, g.version);
    ck_assert_uint_eq(r.nrep, 1);
    ck_assert_uint_eq(r.size, 50 * KiB);
    t_release(t.m, "k2", &r);

    /* failed (a corrupt record, say): its block waits for the fence's answer */
    ck_assert_uint_eq(t_kinds(t.m, "k3", NULL), 1u << MC_SEG_DISK);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c, 4), 1);
    used = t_used(t.m);
    mc_master_copy_done(t.m, c[0].id, MC_ERR_CORRUPT);
    ck_assert_uint_eq(t_used(t.m), used);
    nf = mc_master_fences_take(t.m, f, 8);
    ck_assert_uint_eq(nf, 1);
    ck_assert_uint_eq(f[0].version, c[0].id);
    ck_assert(t_disk_only(t.m, "k3"));
    ck_assert_int_eq(mc_master_fence_ack(t.m, f[0].seg, f[0].alloc, f[0].version), 0);
    ck_assert_uint_lt(t_used(t.m), used);
    mc_master_destroy(t.m);
}
END_TEST

/* At most PROMOTE_OPEN_MAX (16) promotions are open at once; none takes a tenant past its
 * quota; with disk_promote off (the default), a GET of a disk-only object queues nothing. */
START_TEST(test_promote_bounded_and_off_by_default)
{
    struct t_node t = t_promote_setup(true);
    struct mc_master_copy c[64];
    char key[32];
    int ndisk = 0;

    /* room for more than 16 promotions: the objects still in DRAM go */
    for (int i = 0; i < PROMO_N; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        if (!t_disk_only(t.m, key))
            ck_assert_int_eq(mc_master_remove(t.m, key, strlen(key)), 0);
    }
    for (int i = 0; i < PROMO_N; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        if (!t_disk_only(t.m, key))
            continue;
        ndisk++;
        (void)t_kinds(t.m, key, NULL);
    }
    ck_assert_int_gt(ndisk, 16);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c, 64), 16);
    mc_master_destroy(t.m);

    /* a tenant at its quota: no promotion takes it past (the segment has room) */
    {
        struct mc_master_config cfg;
        int i;

        mc_master_config_defaults(&cfg);
        cfg.disk_promote = true;
        t.m = t_master_cfg(&cfg);
        t.node = t_node(t.m, "n0", NULL);
        t.dram = t_mount(t.m, t.node, MC_SEG_DRAM, 2 * MiB, NULL, 512 * KiB);
        t.disk = t_mount(t.m, t.node, MC_SEG_DISK, 64 * MiB, NULL, 0);
        for (i = 0; i < 40; i++) {
            struct mc_master_put_grant g;

            snprintf(key, sizeof(key), "q%d", i);
            while (t_start(t.m, key, PROMO_SZ, 0, t.node, &g) == MC_ERR_NO_SPACE)
                ck_assert_uint_gt(t_copies_done(t.m, 0), 0);
            ck_assert_int_eq(t_end(t.m, key, g.version, t.node), 0);
            t_copies_done(t.m, 0);
        }
        ck_assert(t_disk_only(t.m, "q0"));
        ck_assert_uint_le(t_dram_used(t.m, t.dram), 512 * KiB);
        ck_assert_uint_gt(t_dram_used(t.m, t.dram) + PROMO_SZ + 64, 512 * KiB); /* at it */
        ck_assert_uint_eq(t_kinds(t.m, "q0", NULL), 1u << MC_SEG_DISK);
        ck_assert_uint_eq(mc_master_copies_take(t.m, c, 64), 0);
        ck_assert_uint_le(t_dram_used(t.m, t.dram), 512 * KiB);
        mc_master_destroy(t.m);
    }

    t = t_promote_setup(false);
    ck_assert_uint_eq(t_kinds(t.m, "k0", NULL), 1u << MC_SEG_DISK);
    ck_assert_uint_eq(mc_master_copies_take(t.m, c, 64), 0);
    ck_assert(t_disk_only(t.m, "k0"));
    mc_master_destroy(t.m);
}
END_TEST


/* The batch entry point tells "no room until the offloads end" (MC_MASTER_NO_SPACE_YET) from
 * a refusal that waiting cannot cure: a DRAM full of objects on their way to disk answers
 * YET, and room comes once the copies are answered; a put of more replicas than nodes in
 * the same state is plain MC_ERR_NO_SPACE; so is a full DRAM on a node without a disk. */
START_TEST(test_offload_put_batch_no_space_yet)
{
    struct t_node t = t_one(1 * MiB, 64 * MiB);
    struct t_node nd = t_one(1 * MiB, 0);
    struct mc_master_put_req r = {.key = "yet", .key_len = 3, .size = 600 * KiB,
                                  .replicas = 1, .writer = t.node,
                                  .preferred = MC_MASTER_NODE_NONE};
    struct mc_master_put_grant g;
    int res;

    t_put_n(t.m, t.node, "a", 600 * KiB); /* DRAM holds it; the next put must evict it */
    ck_assert_uint_eq(mc_master_put_start_batch(t.m, 1, &r, &g, &res), 0);
    ck_assert_int_eq(res, MC_MASTER_NO_SPACE_YET); /* "a" stays until its copy is done */
    r.replicas = 2; /* one node: never, whatever the offloads do */
    r.key = "two";
    ck_assert_uint_eq(mc_master_put_start_batch(t.m, 1, &r, &g, &res), 0);
    ck_assert_int_eq(res, MC_ERR_NO_SPACE);
    ck_assert_uint_gt(t_copies_done(t.m, 0), 0);
    r.replicas = 1;
    r.key = "yet";
    ck_assert_uint_eq(mc_master_put_start_batch(t.m, 1, &r, &g, &res), 1);
    ck_assert_int_eq(res, 0);

    /* without a disk the victim is dropped: room at once, never YET */
    r.writer = nd.node;
    t_put_n(nd.m, nd.node, "a", 600 * KiB);
    ck_assert_uint_eq(mc_master_put_start_batch(nd.m, 1, &r, &g, &res), 1);
    ck_assert_int_eq(res, 0);
    mc_master_destroy(t.m);
    mc_master_destroy(nd.m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("offload");
    TCase *tc = tcase_create("rules");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_offload_disk_granule_and_no_placement);
    tcase_add_test(tc, test_offload_keeps_dram_until_copied);
    tcase_add_test(tc, test_offload_again_is_a_no_op);
    tcase_add_test(tc, test_offload_second_hit_admission);
    tcase_add_test(tc, test_offload_failed_copy_not_retried);
    tcase_add_test(tc, test_offload_failed_copy_waits_for_fence);
    tcase_add_test(tc, test_offload_disk_evicts_its_own);
    tcase_add_test(tc, test_offload_removed_while_leased_tells_disk_blocks);
    tcase_add_test(tc, test_offload_removed_while_copying_tells_target);
    tcase_add_test(tc, test_offload_quota_counts_memory_only);
    tcase_add_test(tc, test_promote_queues_one_copy_to_dram);
    tcase_add_test(tc, test_promote_into_reader_node);
    tcase_add_test(tc, test_promote_removed_or_replaced_meanwhile);
    tcase_add_test(tc, test_promote_bounded_and_off_by_default);
    tcase_add_test(tc, test_offload_put_batch_no_space_yet);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
