/* Unit tests of the master service (docs/master.md): one test per rule, fake clock. */
#include <stdio.h>
#include <stdlib.h>

#include "tests/unit/master/t_master.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

/* one node, one DRAM segment */
struct t_one {
    struct mc_master *m;
    uint32_t node;
    uint32_t seg;
};

static struct t_one t_one_seg(uint64_t size)
{
    struct t_one t;

    t.m = t_master();
    t.node = t_node(t.m, "n1", "d1");
    t.seg = t_seg(t.m, t.node, size);
    return t;
}

START_TEST(test_put_invisible_until_end)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;
    struct mc_master_get_result r;
    struct mc_master_stat st;

    ck_assert_int_eq(t_start(t.m, "k", 4 * KiB, 0, t.node, &g), 0);
    ck_assert_uint_eq(g.nrep, 1);
    ck_assert_uint_ge(g.rep[0].len, 4 * KiB);
    ck_assert_int_eq(t_exist(t.m, "k"), 0);
    ck_assert_int_eq(t_get(t.m, "k", &r), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_master_stat(t.m, "k", 1, &st), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_master_remove(t.m, "k", 1), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(t_end(t.m, "k", g.version, t.node), 0);
    ck_assert_int_eq(t_exist(t.m, "k"), 1);
    ck_assert_int_eq(t_get(t.m, "k", &r), 0);
    ck_assert_uint_eq(r.version, g.version);
    ck_assert_uint_eq(r.size, 4 * KiB);
    ck_assert_uint_eq(r.rep[0].offset, g.rep[0].offset);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_put_existing_returns_exists)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;
    struct mc_master_stat st;
    uint64_t v = t_put(t.m, "k", 1000, 0, t.node);
    uint64_t used = t_used(t.m);

    ck_assert_int_eq(t_start(t.m, "k", 2000, 0, t.node, &g), MC_ERR_EXISTS);
    ck_assert_uint_eq(t_used(t.m), used);
    ck_assert_int_eq(mc_master_stat(t.m, "k", 1, &st), 0);
    ck_assert_uint_eq(st.version, v);
    ck_assert_uint_eq(st.size, 1000);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_put_on_young_processing_returns_busy)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g1, g2;

    ck_assert_int_eq(t_start(t.m, "k", 1000, 0, t.node, &g1), 0);
    ck_assert_int_eq(t_start(t.m, "k", 1000, 0, t.node, &g2), MC_ERR_BUSY);
    t_advance(29000);
    ck_assert_int_eq(t_start(t.m, "k", 1000, 0, t.node, &g2), MC_ERR_BUSY);
    /* the first one may still publish */
    ck_assert_int_eq(t_end(t.m, "k", g1.version, t.node), 0);
    ck_assert_int_eq(t_exist(t.m, "k"), 1);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_upsert_old_version_readable_until_new_complete)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;
    struct mc_master_get_result r;
    uint64_t v1 = t_put(t.m, "k", 1000, 0, t.node);

    ck_assert_int_eq(t_start(t.m, "k", 3000, MC_MASTER_PUT_UPSERT, t.node, &g), 0);
    ck_assert_uint_gt(g.version, v1);
    ck_assert_int_eq(t_get(t.m, "k", &r), 0);
    ck_assert_uint_eq(r.version, v1);
    ck_assert_uint_eq(r.size, 1000);
    ck_assert_int_ne(r.rep[0].offset, g.rep[0].offset);
    ck_assert_uint_eq(t_release(t.m, "k", &r), 1);
    ck_assert_int_eq(t_end(t.m, "k", g.version, t.node), 0);
    ck_assert_int_eq(t_get(t.m, "k", &r), 0);
    ck_assert_uint_eq(r.version, g.version);
    ck_assert_uint_eq(r.size, 3000);
    ck_assert_uint_eq(t_release(t.m, "k", &r), 1);
    /* the old, unleased version's space is back: only the 3000-byte block is used */
    ck_assert_uint_eq(t_used(t.m), 3008);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_upsert_supersedes_older_processing)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g1, g2, g3;
    struct mc_master_get_result r;

    ck_assert_int_eq(t_start(t.m, "k", 1000, MC_MASTER_PUT_UPSERT, t.node, &g1), 0);
    ck_assert_int_eq(t_start(t.m, "k", 1000, MC_MASTER_PUT_UPSERT, t.node, &g2), 0);
    ck_assert_uint_gt(g2.version, g1.version);
    ck_assert_int_eq(t_end(t.m, "k", g1.version, t.node), MC_ERR_CANCELED);
    ck_assert_int_eq(t_exist(t.m, "k"), 0);
    ck_assert_int_eq(t_end(t.m, "k", g2.version, t.node), 0);
    ck_assert_int_eq(t_get(t.m, "k", &r), 0);
    ck_assert_uint_eq(r.version, g2.version);
    t_release(t.m, "k", &r);

    /* ends arriving newest first: the older one never publishes over the newer */
    ck_assert_int_eq(t_start(t.m, "k", 500, MC_MASTER_PUT_UPSERT, t.node, &g1), 0);
    ck_assert_int_eq(t_start(t.m, "k", 600, MC_MASTER_PUT_UPSERT, t.node, &g3), 0);
    ck_assert_int_eq(t_end(t.m, "k", g3.version, t.node), 0);
    ck_assert_int_eq(t_end(t.m, "k", g1.version, t.node), MC_ERR_CANCELED);
    ck_assert_int_eq(t_get(t.m, "k", &r), 0);
    ck_assert_uint_eq(r.version, g3.version);
    ck_assert_uint_eq(r.size, 600);
    t_release(t.m, "k", &r);
    ck_assert_uint_eq(t_used(t.m), 640); /* every superseded block came back */
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_remove_unpublishes_now_frees_after_lease)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_get_result r, r2;

    t_put(t.m, "k", 4096, 0, t.node);
    ck_assert_int_eq(t_get(t.m, "k", &r), 0);
    ck_assert_int_eq(t_get(t.m, "k", &r2), 0);
    ck_assert_int_eq(mc_master_remove(t.m, "k", 1), 0);
    ck_assert_int_eq(t_exist(t.m, "k"), 0);
    ck_assert_int_eq(t_get(t.m, "k", &r2), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_master_remove(t.m, "k", 1), MC_ERR_NOT_FOUND);
    ck_assert_uint_eq(t_used(t.m), 4096); /* two readers still hold leases */
    ck_assert_uint_eq(t_release(t.m, "k", &r), 1);
    ck_assert_uint_eq(t_used(t.m), 4096);
    ck_assert_uint_eq(t_release(t.m, "k", &r), 1); /* the second lease */
    ck_assert_uint_eq(t_used(t.m), 0);
    ck_assert_uint_eq(t_release(t.m, "k", &r), 0); /* nothing left to end */
    ck_assert_uint_eq(t_stats(t.m).objects, 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_exist_does_not_extend_lease)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_get_result r;
    struct mc_master_stat st;

    t_put(t.m, "k", 4096, 0, t.node);
    ck_assert_int_eq(t_get(t.m, "k", &r), 0);
    ck_assert_uint_eq(r.lease.expires_ms, t_now_ms + 10000);
    t_advance(9000);
    ck_assert_int_eq(t_exist(t.m, "k"), 1);
    ck_assert_int_eq(mc_master_stat(t.m, "k", 1, &st), 0);
    t_advance(1000); /* 10 s after the get: the lease is over despite the lookups */
    ck_assert_int_eq(mc_master_remove(t.m, "k", 1), 0);
    ck_assert_uint_eq(t_used(t.m), 0);
    ck_assert_uint_eq(t_release(t.m, "k", &r), 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_exist_does_not_change_eviction_order)
{
    struct t_one t = t_one_seg(3 * 64 * KiB);
    struct mc_master_get_result r;
    int i;

    t_put(t.m, "a", 64 * KiB, 0, t.node);
    t_put(t.m, "b", 64 * KiB, 0, t.node);
    t_put(t.m, "c", 64 * KiB, 0, t.node);
    t_put(t.m, "d", 64 * KiB, 0, t.node); /* one full turn of the hand; "a" goes */
    ck_assert_int_eq(t_exist(t.m, "a"), 0);
    for (i = 0; i < 10; i++)
        ck_assert_int_eq(t_exist(t.m, "b"), 1);
    ck_assert_int_eq(t_get(t.m, "c", &r), 0);
    t_release(t.m, "c", &r);
    t_put(t.m, "e", 64 * KiB, 0, t.node);
    ck_assert_int_eq(t_exist(t.m, "b"), 0); /* looked at, never used: it goes */
    ck_assert_int_eq(t_exist(t.m, "c"), 1);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_lease_release_makes_evictable)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;
    struct mc_master_get_result r;

    t_put(t.m, "a", 768 * KiB, 0, t.node);
    ck_assert_int_eq(t_get(t.m, "a", &r), 0);
    ck_assert_int_eq(t_start(t.m, "b", 512 * KiB, 0, t.node, &g), MC_ERR_NO_SPACE);
    ck_assert_uint_eq(t_release(t.m, "a", &r), 1);
    ck_assert_int_eq(t_start(t.m, "b", 512 * KiB, 0, t.node, &g), 0);
    ck_assert_int_eq(t_exist(t.m, "a"), 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_lease_blocks_space_reuse)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;
    struct mc_master_get_result r;

    t_put(t.m, "k", 512 * KiB, 0, t.node);
    ck_assert_int_eq(t_get(t.m, "k", &r), 0);
    /* replace it while the reader reads: the old block stays out of reach */
    ck_assert_int_eq(t_start(t.m, "k", 512 * KiB, MC_MASTER_PUT_UPSERT, t.node, &g), 0);
    ck_assert_int_eq(t_end(t.m, "k", g.version, t.node), 0);
    ck_assert_uint_ne(g.rep[0].offset, r.rep[0].offset);
    ck_assert_uint_eq(t_used(t.m), MiB);
    /* a put that needs room evicts the unleased new version, never the leased old block */
    ck_assert_int_eq(t_start(t.m, "x", 512 * KiB, 0, t.node, &g), 0);
    ck_assert_uint_ne(g.rep[0].offset, r.rep[0].offset);
    ck_assert_int_eq(t_exist(t.m, "k"), 0);
    /* the lease runs out (no release): then the space returns on the tick */
    t_advance(10000);
    mc_master_tick(t.m);
    ck_assert_uint_eq(t_used(t.m), 512 * KiB);
    ck_assert_uint_eq(t_release(t.m, "k", &r), 0); /* too late: ignored */
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_ttl_removes_even_pinned)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;
    struct mc_master_put_req req = {.key = "k", .key_len = 1, .size = 4096, .replicas = 1,
                                    .flags = MC_MASTER_PUT_PIN_HARD, .ttl_ms = 1000,
                                    .writer = t.node, .preferred = MC_MASTER_NODE_NONE};
    struct mc_master_stat st;
    struct mc_master_get_result r;

    ck_assert_int_eq(mc_master_put_start(t.m, &req, &g), 0);
    ck_assert_int_eq(t_end(t.m, "k", g.version, t.node), 0);
    t_advance(990);
    ck_assert_int_eq(mc_master_stat(t.m, "k", 1, &st), 0);
    ck_assert_uint_le(st.ttl_remaining_ms, 10);
    ck_assert_uint_gt(st.ttl_remaining_ms, 0);
    t_advance(10);
    ck_assert_int_eq(t_exist(t.m, "k"), 0);
    ck_assert_int_eq(t_get(t.m, "k", &r), MC_ERR_NOT_FOUND);
    mc_master_tick(t.m);
    ck_assert_uint_eq(t_used(t.m), 0);
    ck_assert_uint_eq(t_stats(t.m).objects, 0);
    /* the key can be written again */
    t_put(t.m, "k", 4096, 0, t.node);
    mc_master_destroy(t.m);
}
END_TEST

/* A TTL ends to the ms, not at the next 10 ms tick: published at a tick's start, ttl 5 ms
 * is visible 4 ms later and gone 5 ms later (the tick clock alone kept it 10 ms). */
START_TEST(test_ttl_precise_to_the_ms)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;
    struct mc_master_put_req req = {.key = "k", .key_len = 1, .size = 4096, .replicas = 1,
                                    .ttl_ms = 5, .writer = t.node,
                                    .preferred = MC_MASTER_NODE_NONE};
    struct mc_master_stat st;
    struct mc_master_get_result r;

    t_advance(10); /* the start of a tick */
    ck_assert_int_eq(mc_master_put_start(t.m, &req, &g), 0);
    ck_assert_int_eq(t_end(t.m, "k", g.version, t.node), 0);
    ck_assert_int_eq(t_exist(t.m, "k"), 1);
    ck_assert_int_eq(mc_master_stat(t.m, "k", 1, &st), 0);
    ck_assert_uint_eq(st.ttl_remaining_ms, 5);
    t_advance(4);
    ck_assert_int_eq(mc_master_stat(t.m, "k", 1, &st), 0);
    ck_assert_uint_eq(st.ttl_remaining_ms, 1);
    t_advance(1);
    ck_assert_int_eq(t_exist(t.m, "k"), 0);
    ck_assert_int_eq(t_get(t.m, "k", &r), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_master_stat(t.m, "k", 1, &st), MC_ERR_NOT_FOUND);
    /* a 1 ms TTL, published mid-tick, is gone 7 ms later (the tick count alone kept it) */
    t_advance(13);
    req.key = "k1";
    req.key_len = 2;
    req.ttl_ms = 1;
    ck_assert_int_eq(mc_master_put_start(t.m, &req, &g), 0);
    ck_assert_int_eq(t_end(t.m, "k1", g.version, t.node), 0);
    ck_assert_int_eq(t_exist(t.m, "k1"), 1);
    t_advance(7);
    ck_assert_int_eq(t_exist(t.m, "k1"), 0);
    ck_assert_int_eq(t_get(t.m, "k1", &r), MC_ERR_NOT_FOUND);
    /* reclaimed on the tick */
    mc_master_tick(t.m);
    ck_assert_uint_eq(t_used(t.m), 0);
    mc_master_destroy(t.m);
}
END_TEST

/* TTLs above the maximum are refused, not capped; the maximum itself lasts. */
START_TEST(test_ttl_max_enforced)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;
    struct mc_master_put_req req = {.key = "k", .key_len = 1, .size = 4096, .replicas = 1,
                                    .ttl_ms = MC_MASTER_TTL_MAX_MS + 1, .writer = t.node,
                                    .preferred = MC_MASTER_NODE_NONE};
    struct mc_master_stat st;

    ck_assert_int_eq(mc_master_put_start(t.m, &req, &g), MC_ERR_INVALID);
    req.ttl_ms = UINT64_MAX; /* used to wrap to "no TTL" */
    ck_assert_int_eq(mc_master_put_start(t.m, &req, &g), MC_ERR_INVALID);
    req.ttl_ms = UINT64_MAX - 5;
    ck_assert_int_eq(mc_master_put_start(t.m, &req, &g), MC_ERR_INVALID);
    ck_assert_uint_eq(t_used(t.m), 0);
    req.ttl_ms = MC_MASTER_TTL_MAX_MS;
    ck_assert_int_eq(mc_master_put_start(t.m, &req, &g), 0);
    ck_assert_int_eq(t_end(t.m, "k", g.version, t.node), 0);
    ck_assert_int_eq(mc_master_stat(t.m, "k", 1, &st), 0);
    ck_assert_uint_eq(st.ttl_remaining_ms, MC_MASTER_TTL_MAX_MS);
    t_advance(MC_MASTER_TTL_MAX_MS - 1); /* no tick: the node is not declared dead */
    ck_assert_int_eq(mc_master_stat(t.m, "k", 1, &st), 0);
    ck_assert_uint_eq(st.ttl_remaining_ms, 1);
    t_advance(1);
    ck_assert_int_eq(t_exist(t.m, "k"), 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_hard_pin_never_evicted)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;
    char key[16];
    int i;

    t_put(t.m, "pinned", 256 * KiB, MC_MASTER_PUT_PIN_HARD, t.node);
    for (i = 0; i < 12; i++) {
        snprintf(key, sizeof(key), "u%d", i);
        t_put(t.m, key, 64 * KiB, 0, t.node);
    }
    /* every unpinned object goes before the pinned one is even considered */
    for (i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "big%d", i);
        ck_assert_int_eq(t_start(t.m, key, 256 * KiB, 0, t.node, &g), 0);
        ck_assert_int_eq(t_end(t.m, key, g.version, t.node), 0);
    }
    ck_assert_int_eq(t_exist(t.m, "pinned"), 1);
    /* the tick keeps to the watermarks without touching it either */
    mc_master_tick(t.m);
    ck_assert_int_eq(t_exist(t.m, "pinned"), 1);
    ck_assert_int_eq(t_start(t.m, "huge", 900 * KiB, 0, t.node, &g), MC_ERR_NO_SPACE);
    ck_assert_int_eq(t_exist(t.m, "pinned"), 1);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_hard_pin_cap)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;
    struct mc_master_seg_info info;

    t_put(t.m, "h1", 400 * KiB, MC_MASTER_PUT_PIN_HARD, t.node);
    ck_assert_int_eq(t_start(t.m, "h2", 200 * KiB, MC_MASTER_PUT_PIN_HARD, t.node, &g),
                     MC_ERR_NO_SPACE);
    ck_assert_int_eq(t_start(t.m, "h2", 100 * KiB, MC_MASTER_PUT_PIN_HARD, t.node, &g), 0);
    ck_assert_int_eq(t_end(t.m, "h2", g.version, t.node), 0);
    ck_assert_int_eq(mc_master_segment_info(t.m, t.seg, &info), 0);
    ck_assert_uint_eq(info.hard_pinned_bytes, 500 * KiB);
    /* unpinned data still fits beside them */
    t_put(t.m, "plain", 400 * KiB, 0, t.node);
    ck_assert_int_eq(mc_master_remove(t.m, "h1", 2), 0);
    ck_assert_int_eq(mc_master_segment_info(t.m, t.seg, &info), 0);
    ck_assert_uint_eq(info.hard_pinned_bytes, 100 * KiB);
    t_put(t.m, "h3", 200 * KiB, MC_MASTER_PUT_PIN_HARD, t.node);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_soft_pin_evicted_last_and_lapses)
{
    struct t_one t = t_one_seg(4 * 64 * KiB);
    struct mc_master_stat st;
    char key[16];
    int i;

    t_put(t.m, "soft", 64 * KiB, MC_MASTER_PUT_PIN_SOFT, t.node); /* oldest */
    t_put(t.m, "u1", 64 * KiB, 0, t.node);
    t_put(t.m, "u2", 64 * KiB, 0, t.node);
    t_put(t.m, "u3", 64 * KiB, 0, t.node);
    t_put(t.m, "x1", 128 * KiB, 0, t.node);
    ck_assert_int_eq(t_exist(t.m, "soft"), 1);
    t_put(t.m, "x2", 128 * KiB, 0, t.node);
    ck_assert_int_eq(t_exist(t.m, "soft"), 1);
    /* only the soft-pinned one and the (now unpinned-but-big) x's: x's go first */
    ck_assert_int_eq(mc_master_stat(t.m, "soft", 4, &st), 0);
    ck_assert_uint_eq(st.flags & MC_MASTER_PUT_PIN_SOFT, MC_MASTER_PUT_PIN_SOFT);
    /* when nothing unpinned is left, the soft pin yields */
    mc_master_remove(t.m, "x1", 2);
    mc_master_remove(t.m, "x2", 2);
    mc_master_remove(t.m, "u3", 2);
    t_put(t.m, "y", 4 * 64 * KiB, 0, t.node);
    ck_assert_int_eq(t_exist(t.m, "soft"), 0);
    ck_assert_int_eq(mc_master_remove(t.m, "y", 1), 0);

    /* the pin lapses after its TTL (30 min): then it is an ordinary object */
    t_put(t.m, "soft2", 64 * KiB, MC_MASTER_PUT_PIN_SOFT, t.node);
    t_advance(30 * 60 * 1000);
    ck_assert_int_eq(mc_master_stat(t.m, "soft2", 5, &st), 0);
    ck_assert_uint_eq(st.flags & MC_MASTER_PUT_PIN_SOFT, 0);
    /* two segments' worth of unpinned puts: with the pin in force it would survive them
     * all (unpinned objects are always there to go first); lapsed, its turn comes */
    for (i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "v%d", i);
        t_put(t.m, key, 64 * KiB, 0, t.node);
    }
    ck_assert_int_eq(t_exist(t.m, "soft2"), 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_evict_inline_until_largest_block_fits)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_seg_info info;
    char key[16];
    int i, left = 0;

    for (i = 0; i < 16; i++) {
        snprintf(key, sizeof(key), "o%d", i);
        t_put(t.m, key, 64 * KiB, 0, t.node);
    }
    t_put(t.m, "big", 256 * KiB, 0, t.node);
    ck_assert_int_eq(mc_master_segment_info(t.m, t.seg, &info), 0);
    for (i = 0; i < 16; i++) {
        snprintf(key, sizeof(key), "o%d", i);
        left += t_exist(t.m, key);
    }
    /* exactly enough neighbours went to make one 256 KiB hole: no more */
    ck_assert_int_eq(left, 12);
    ck_assert_uint_eq(info.evictions, 4);
    ck_assert_uint_eq(info.free_bytes, 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_evict_by_bytes_to_low_watermark)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_seg_info info;
    char key[16];
    int i;

    for (i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "o%d", i);
        t_put(t.m, key, 10000, 0, t.node);
    }
    ck_assert_int_eq(mc_master_segment_info(t.m, t.seg, &info), 0);
    ck_assert_double_gt((double)(info.size - info.free_bytes), 0.95 * (double)info.size);
    ck_assert_uint_eq(info.evictions, 0);
    mc_master_tick(t.m);
    ck_assert_int_eq(mc_master_segment_info(t.m, t.seg, &info), 0);
    ck_assert_double_le((double)(info.size - info.free_bytes), 0.90 * (double)info.size);
    /* by bytes, not wholesale: it stops just under the low watermark */
    ck_assert_double_gt((double)(info.size - info.free_bytes), 0.88 * (double)info.size);
    ck_assert_uint_eq(info.evictions, 100 - info.blocks);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_stale_put_displaced_after_discard_timeout)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g1, g2;

    ck_assert_int_eq(t_start(t.m, "k", 100 * KiB, 0, t.node, &g1), 0);
    t_advance(29990);
    ck_assert_int_eq(t_start(t.m, "k", 100 * KiB, 0, t.node, &g2), MC_ERR_BUSY);
    t_advance(10);
    ck_assert_int_eq(t_start(t.m, "k", 100 * KiB, 0, t.node, &g2), 0);
    ck_assert_uint_ne(g1.rep[0].offset, g2.rep[0].offset); /* the old block is not reused */
    ck_assert_uint_eq(t_used(t.m), 200 * KiB);
    ck_assert_int_eq(t_end(t.m, "k", g2.version, t.node), 0);
    /* the displaced writer reports in: canceled, and its block comes back at once */
    ck_assert_int_eq(t_end(t.m, "k", g1.version, t.node), MC_ERR_CANCELED);
    ck_assert_uint_eq(t_used(t.m), 100 * KiB);
    ck_assert_uint_eq(t_stats(t.m).stale_freed_by_writer, 1);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_stale_put_space_freed_after_release_timeout)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g1, g2;

    ck_assert_int_eq(t_start(t.m, "k", 100 * KiB, 0, t.node, &g1), 0);
    t_advance(31000);
    ck_assert_int_eq(t_start(t.m, "k", 100 * KiB, 0, t.node, &g2), 0);
    ck_assert_int_eq(t_end(t.m, "k", g2.version, t.node), 0);
    /* the old writer never reports: its block waits out the release timeout */
    t_advance(600000 - 31000 - 10);
    ck_assert_int_eq(mc_master_node_heartbeat(t.m, t.node), 0);
    mc_master_tick(t.m);
    ck_assert_uint_eq(t_used(t.m), 200 * KiB);
    t_advance(10);
    ck_assert_int_eq(mc_master_node_heartbeat(t.m, t.node), 0);
    mc_master_tick(t.m);
    ck_assert_uint_eq(t_used(t.m), 100 * KiB);
    ck_assert_uint_eq(t_stats(t.m).stale_freed_by_timeout, 1);
    ck_assert_int_eq(t_exist(t.m, "k"), 1);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_stale_put_space_freed_by_fence)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g1, g2;

    ck_assert_int_eq(t_start(t.m, "k", 100 * KiB, 0, t.node, &g1), 0);
    ck_assert_int_eq(mc_master_fence_ack(t.m, g1.rep[0].seg, g1.rep[0].alloc, g1.version), MC_ERR_BUSY);
    t_advance(30000);
    ck_assert_int_eq(t_start(t.m, "k", 100 * KiB, 0, t.node, &g2), 0);
    ck_assert_uint_eq(t_used(t.m), 200 * KiB);
    ck_assert_int_eq(mc_master_fence_ack(t.m, g1.rep[0].seg, g1.rep[0].alloc, g1.version), 0);
    ck_assert_uint_eq(t_used(t.m), 100 * KiB);
    ck_assert_int_eq(mc_master_fence_ack(t.m, g1.rep[0].seg, g1.rep[0].alloc, g1.version),
                     MC_ERR_NOT_FOUND);
    ck_assert_int_eq(t_end(t.m, "k", g1.version, t.node), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(t_end(t.m, "k", g2.version, t.node), 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_dead_node_replicas_dropped_and_puts_revoked)
{
    struct mc_master *m = t_master();
    uint32_t n1 = t_node(m, "n1", "d1"), n2 = t_node(m, "n2", "d2"), n3 = t_node(m, "n3", "d3");
    uint32_t s1 = t_seg(m, n1, MiB);
    struct mc_master_put_req req = {.key = "x", .key_len = 1, .size = 4096, .replicas = 2,
                                    .writer = n1, .preferred = MC_MASTER_NODE_NONE};
    struct mc_master_put_grant g;
    struct mc_master_stat st;
    struct mc_master_get_result r;
    uint64_t used_before;

    t_seg(m, n2, MiB);
    ck_assert_int_eq(mc_master_put_start(m, &req, &g), 0);
    ck_assert_int_eq(t_end(m, "x", g.version, n1), 0);
    req.key = "y";
    req.replicas = 1;
    req.preferred = n2;
    ck_assert_int_eq(mc_master_put_start(m, &req, &g), 0);
    ck_assert_uint_eq(g.rep[0].node, n2);
    ck_assert_int_eq(t_end(m, "y", g.version, n1), 0);
    /* n3 writes z into n1's segment, then dies mid-put */
    req.key = "z";
    req.writer = n3;
    req.preferred = n1;
    ck_assert_int_eq(mc_master_put_start(m, &req, &g), 0);
    ck_assert_uint_eq(g.rep[0].seg, s1);
    used_before = t_used(m);

    /* n2 and n3 go silent; n1 keeps beating */
    t_advance(5000);
    ck_assert_int_eq(mc_master_node_heartbeat(m, n1), 0);
    mc_master_tick(m);
    ck_assert(mc_master_node_is_alive(m, n2));
    t_advance(5001);
    ck_assert_int_eq(mc_master_node_heartbeat(m, n1), 0);
    mc_master_tick(m);
    ck_assert(!mc_master_node_is_alive(m, n2));
    ck_assert(!mc_master_node_is_alive(m, n3));
    ck_assert(mc_master_node_is_alive(m, n1));
    ck_assert_int_eq(mc_master_node_heartbeat(m, n2), MC_ERR_NOT_FOUND);

    /* x keeps its replica on n1; y had none elsewhere */
    ck_assert_int_eq(mc_master_stat(m, "x", 1, &st), 0);
    ck_assert_uint_eq(st.replicas, 1);
    ck_assert_int_eq(t_get(m, "x", &r), 0);
    ck_assert_uint_eq(r.nrep, 1);
    ck_assert_uint_eq(r.rep[0].node, n1);
    ck_assert_int_eq(t_exist(m, "y"), 0);
    ck_assert_uint_eq(t_stats(m).objects, 2); /* y was swept away, z lingers as a stale put */
    /* z: absent, its put revoked; the block on n1 waits for n1 to fence it */
    ck_assert_int_eq(t_exist(m, "z"), 0);
    ck_assert_uint_eq(used_before, 4 * 4096);
    ck_assert_uint_eq(t_used(m), 2 * 4096); /* n2's segment left with n2; z waits */
    ck_assert_int_eq(t_end(m, "z", g.version, n3), MC_ERR_CANCELED);
    ck_assert_uint_eq(t_used(m), 4096);
    ck_assert_int_eq(mc_master_fence_ack(m, g.rep[0].seg, g.rep[0].alloc, g.version), MC_ERR_NOT_FOUND);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_dead_writer_put_displaced_at_once_then_fenced)
{
    struct mc_master *m = t_master();
    uint32_t n1 = t_node(m, "n1", "d1"), n3 = t_node(m, "n3", "d3");
    struct mc_master_put_grant g, g2;

    t_seg(m, n1, MiB);
    ck_assert_int_eq(t_start(m, "z", 4096, 0, n3, &g), 0);
    t_advance(10001);
    ck_assert_int_eq(mc_master_node_heartbeat(m, n1), 0);
    mc_master_tick(m);
    /* a later put succeeds at once: the writer is dead, not merely slow */
    ck_assert_int_eq(t_start(m, "z", 4096, 0, n1, &g2), 0);
    ck_assert_int_eq(t_end(m, "z", g2.version, n1), 0);
    ck_assert_uint_eq(t_used(m), 8192);
    ck_assert_int_eq(mc_master_fence_ack(m, g.rep[0].seg, g.rep[0].alloc, g.version), 0);
    ck_assert_uint_eq(t_used(m), 4096);
    ck_assert_uint_eq(t_stats(m).stale_freed_by_fence, 1);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_dead_writer_blocks_queued_for_owner_fence)
{
    struct mc_master *m = t_master();
    uint32_t n1 = t_node(m, "n1", "d1"), n3 = t_node(m, "n3", "d3");
    struct mc_master_fence f[4];
    struct mc_master_put_grant g, g2;

    t_seg(m, n1, MiB);
    ck_assert_int_eq(t_start(m, "z", 4096, 0, n3, &g), 0);
    ck_assert_int_eq(t_start(m, "live", 4096, 0, n1, &g2), 0);
    ck_assert_uint_eq(mc_master_fences_take(m, f, 4), 0); /* nothing to fence yet */
    t_advance(10001);
    ck_assert_int_eq(mc_master_node_heartbeat(m, n1), 0);
    mc_master_tick(m);
    /* the dead writer's block, named as the owner knows it; not the live writer's */
    ck_assert_uint_eq(mc_master_fences_take(m, f, 4), 1);
    ck_assert_uint_eq(f[0].seg, g.rep[0].seg);
    ck_assert_uint_eq(f[0].alloc, g.rep[0].alloc);
    ck_assert_uint_eq(f[0].version, g.version);
    ck_assert_uint_eq(mc_master_fences_take(m, f, 4), 0); /* taken once */
    ck_assert_uint_eq(t_used(m), 8192);
    ck_assert_int_eq(mc_master_fence_ack(m, f[0].seg, f[0].alloc, f[0].version), 0);
    ck_assert_uint_eq(t_used(m), 4096);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_replicas_on_distinct_domains)
{
    struct mc_master *m = t_master();
    uint32_t a = t_node(m, "a", "rack1"), b = t_node(m, "b", "rack1"), c = t_node(m, "c", "rack2");
    struct mc_master_put_req req = {.key = "k", .key_len = 1, .size = 4096, .replicas = 2,
                                    .writer = a, .preferred = MC_MASTER_NODE_NONE};
    struct mc_master_put_grant g;
    int i;

    t_seg(m, a, MiB);
    t_seg(m, b, MiB);
    t_seg(m, c, MiB);
    for (i = 0; i < 20; i++) {
        char key[16];

        snprintf(key, sizeof(key), "k%d", i);
        req.key = key;
        req.key_len = strlen(key);
        ck_assert_int_eq(mc_master_put_start(m, &req, &g), 0);
        ck_assert_uint_eq(g.nrep, 2);
        /* one replica in each rack: c holds one of them every time */
        ck_assert(g.rep[0].node == c || g.rep[1].node == c);
        ck_assert_uint_ne(g.rep[0].node, g.rep[1].node);
    }
    req.key = "three";
    req.key_len = 5;
    req.replicas = 3;
    ck_assert_int_eq(mc_master_put_start(m, &req, &g), MC_ERR_NO_SPACE);
    req.flags = MC_MASTER_PUT_SAME_DOMAIN_OK;
    ck_assert_int_eq(mc_master_put_start(m, &req, &g), 0);
    ck_assert_uint_eq(g.nrep, 3);
    ck_assert_uint_ne(g.rep[0].seg, g.rep[1].seg);
    ck_assert_uint_ne(g.rep[1].seg, g.rep[2].seg);
    ck_assert_uint_ne(g.rep[0].seg, g.rep[2].seg);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_preferred_node_first_then_by_free_capacity)
{
    struct mc_master *m = t_master();
    uint32_t a = t_node(m, "a", NULL), b = t_node(m, "b", NULL);
    struct mc_master_put_grant g;
    int i, on_b = 0;

    t_seg(m, a, MiB);
    t_seg(m, b, 16 * MiB);
    for (i = 0; i < 10; i++) {
        char key[16];

        snprintf(key, sizeof(key), "w%d", i);
        ck_assert_int_eq(t_start(m, key, 4096, 0, a, &g), 0); /* the writer's node first */
        ck_assert_uint_eq(g.rep[0].node, a);
    }
    /* a is full for 1 MiB objects: they go elsewhere instead of evicting */
    for (i = 0; i < 12; i++) {
        char key[16];

        snprintf(key, sizeof(key), "big%d", i);
        ck_assert_int_eq(t_start(m, key, MiB, 0, a, &g), 0);
        on_b += g.rep[0].node == b;
    }
    ck_assert_int_eq(on_b, 12);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_prefix_match_counts_leading_hits)
{
    struct t_one t = t_one_seg(MiB);
    const char *keys[] = {"p0", "p1", "p2", "p3", "p4"};
    size_t lens[] = {2, 2, 2, 2, 2};
    struct mc_master_put_grant g;

    ck_assert_uint_eq(mc_master_prefix_match(t.m, 5, keys, lens), 0);
    t_put(t.m, "p0", 100, 0, t.node);
    t_put(t.m, "p1", 100, 0, t.node);
    t_put(t.m, "p3", 100, 0, t.node);
    ck_assert_int_eq(t_start(t.m, "p2", 100, 0, t.node, &g), 0); /* in flight: not a hit */
    ck_assert_uint_eq(mc_master_prefix_match(t.m, 5, keys, lens), 2);
    ck_assert_int_eq(t_end(t.m, "p2", g.version, t.node), 0);
    ck_assert_uint_eq(mc_master_prefix_match(t.m, 5, keys, lens), 4);
    t_put(t.m, "p4", 100, 0, t.node);
    ck_assert_uint_eq(mc_master_prefix_match(t.m, 5, keys, lens), 5);
    ck_assert_uint_eq(mc_master_prefix_match(t.m, 0, keys, lens), 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_put_end_by_other_writer_denied)
{
    struct mc_master *m = t_master();
    uint32_t a = t_node(m, "a", NULL), b = t_node(m, "b", NULL);
    struct mc_master_put_grant g;
    struct mc_master_ref ref = {.key = "k", .key_len = 1, .node = b};

    t_seg(m, a, MiB);
    ck_assert_int_eq(t_start(m, "k", 100, 0, a, &g), 0);
    ck_assert_int_eq(t_end(m, "k", g.version, b), MC_ERR_DENIED);
    ref.version = g.version;
    ck_assert_int_eq(mc_master_put_revoke(m, &ref), MC_ERR_DENIED);
    ck_assert_int_eq(t_end(m, "k", g.version + 7, a), MC_ERR_NOT_FOUND);
    ref.node = a;
    ck_assert_int_eq(mc_master_put_revoke(m, &ref), 0);
    ck_assert_uint_eq(t_used(m), 0);
    ck_assert_int_eq(t_exist(m, "k"), 0);
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_invalid_input_rejected)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;
    char big[MC_DIR_KEY_MAX + 1];
    struct mc_master_put_req req = {.key = "k", .key_len = 1, .size = 100, .writer = t.node,
                                    .preferred = MC_MASTER_NODE_NONE};

    memset(big, 'a', sizeof(big));
    ck_assert_int_eq(mc_master_exist(t.m, NULL, 0), MC_ERR_INVALID);
    ck_assert_int_eq(mc_master_exist(t.m, "k", 0), MC_ERR_INVALID);
    ck_assert_int_eq(mc_master_exist(t.m, big, MC_DIR_KEY_MAX + 1), MC_ERR_INVALID);
    ck_assert_int_eq(mc_master_exist(t.m, big, MC_DIR_KEY_MAX), 0);
    req.size = 0;
    ck_assert_int_eq(mc_master_put_start(t.m, &req, &g), MC_ERR_INVALID);
    req.size = 100;
    req.flags = 0x100;
    ck_assert_int_eq(mc_master_put_start(t.m, &req, &g), MC_ERR_INVALID);
    req.flags = MC_MASTER_PUT_PIN_SOFT | MC_MASTER_PUT_PIN_HARD;
    ck_assert_int_eq(mc_master_put_start(t.m, &req, &g), MC_ERR_INVALID);
    req.flags = 0;
    req.replicas = MC_MASTER_MAX_REPLICAS + 1;
    ck_assert_int_eq(mc_master_put_start(t.m, &req, &g), MC_ERR_INVALID);
    req.replicas = 1;
    req.size = 2 * MiB;
    ck_assert_int_eq(mc_master_put_start(t.m, &req, &g), MC_ERR_TOO_LARGE);
    req.size = 100;
    req.writer = 12345;
    ck_assert_int_eq(mc_master_put_start(t.m, &req, &g), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_master_fence_ack(t.m, 999, 3, 1), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(mc_master_fence_ack(t.m, t.seg, 12345, 1), MC_ERR_NOT_FOUND);
    ck_assert_uint_eq(t_used(t.m), 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_batch_put_per_item_results)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_req reqs[3] = {
        {.key = "a", .key_len = 1, .size = 100, .writer = t.node, .preferred = MC_MASTER_NODE_NONE},
        {.key = "b", .key_len = 1, .size = 0, .writer = t.node, .preferred = MC_MASTER_NODE_NONE},
        {.key = "c", .key_len = 1, .size = 100, .writer = t.node, .preferred = MC_MASTER_NODE_NONE},
    };
    struct mc_master_put_grant g[3];
    struct mc_master_ref refs[3];
    int res[3], i;

    ck_assert_uint_eq(mc_master_put_start_batch(t.m, 3, reqs, g, res), 2);
    ck_assert_int_eq(res[0], 0);
    ck_assert_int_eq(res[1], MC_ERR_INVALID);
    ck_assert_int_eq(res[2], 0);
    for (i = 0; i < 3; i++) {
        refs[i].key = reqs[i].key;
        refs[i].key_len = 1;
        refs[i].version = res[i] == 0 ? g[i].version : 0;
        refs[i].node = t.node;
    }
    ck_assert_uint_eq(mc_master_put_end_batch(t.m, 3, refs, res), 2);
    ck_assert_int_eq(res[1], MC_ERR_NOT_FOUND);
    ck_assert_int_eq(t_exist(t.m, "a"), 1);
    ck_assert_int_eq(t_exist(t.m, "c"), 1);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_node_reregister_before_ttl_keeps_everything)
{
    struct mc_master *m = t_master();
    uint32_t a = t_node(m, "a", NULL), again;

    t_seg(m, a, MiB);
    t_put(m, "k", 100, 0, a);
    t_advance(9000);
    ck_assert_int_eq(mc_master_node_register(m, "a", NULL, &again), 0);
    ck_assert_uint_eq(again, a);
    t_advance(9000);
    mc_master_tick(m);
    ck_assert_int_eq(t_exist(m, "k"), 1);
    /* after the TTL, the old id is dead and a new registration is a new incarnation */
    t_advance(1001);
    mc_master_tick(m);
    ck_assert_int_eq(t_exist(m, "k"), 0);
    ck_assert_int_eq(mc_master_node_register(m, "a", NULL, &again), 0);
    ck_assert_uint_ne(again, a);
    ck_assert(!mc_master_node_is_alive(m, a));
    mc_master_destroy(m);
}
END_TEST

START_TEST(test_lease_survives_other_reader_late_release)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_get_result r1, r2;

    t_put(t.m, "k", 4096, 0, t.node);
    ck_assert_int_eq(t_get(t.m, "k", &r1), 0);
    t_advance(10000); /* r1's lease expired */
    ck_assert_int_eq(t_get(t.m, "k", &r2), 0);
    ck_assert_uint_ne(r1.lease.epoch, r2.lease.epoch);
    /* r1's late release must not end r2's lease */
    ck_assert_uint_eq(t_release(t.m, "k", &r1), 0);
    ck_assert_int_eq(mc_master_remove(t.m, "k", 1), 0);
    ck_assert_uint_eq(t_used(t.m), 4096);
    ck_assert_uint_eq(t_release(t.m, "k", &r2), 1);
    ck_assert_uint_eq(t_used(t.m), 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_unmount_drops_replicas)
{
    struct mc_master *m = t_master();
    uint32_t a = t_node(m, "a", NULL);
    uint32_t s = t_seg(m, a, MiB);
    struct mc_master_seg_info info;
    int i;

    for (i = 0; i < 50; i++) {
        char key[16];

        snprintf(key, sizeof(key), "k%d", i);
        t_put(m, key, 100, 0, a);
    }
    ck_assert_int_eq(mc_master_segment_unmount(m, s), 0);
    ck_assert_int_eq(mc_master_segment_info(m, s, &info), MC_ERR_NOT_FOUND);
    ck_assert_int_eq(t_exist(m, "k7"), 0);
    mc_master_tick(m);
    ck_assert_uint_eq(t_stats(m).objects, 0);
    /* the slot is reused by a new segment with a new id; old refs do not reach it */
    ck_assert_uint_ne(t_seg(m, a, MiB), s);
    ck_assert_int_eq(t_exist(m, "k7"), 0);
    mc_master_destroy(m);
}
END_TEST

/* A random mix of every operation with invariants checked after each tick: space
 * accounting matches the objects, and every block is returned once everything ends. */
START_TEST(test_master_randomized_invariants)
{
    struct mc_master *m = t_master();
    uint32_t n[3] = {t_node(m, "a", "d1"), t_node(m, "b", "d2"), t_node(m, "c", "d3")};
    struct mc_master_get_result leases[64];
    char lease_keys[64][16];
    int nleases = 0, i;
    uint64_t rng = 42;

    for (i = 0; i < 3; i++)
        t_seg(m, n[i], 4 * MiB);
    for (i = 0; i < 200000; i++) {
        char key[16];
        uint64_t x;
        struct mc_master_put_grant g;
        struct mc_master_put_req req;
        int op;

        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        x = rng;
        snprintf(key, sizeof(key), "k%u", (unsigned)(x % 500));
        op = (int)((x >> 20) % 100);
        memset(&req, 0, sizeof(req));
        req.key = key;
        req.key_len = strlen(key);
        req.size = 1 + (x >> 32) % (256 * KiB);
        req.replicas = 1 + (uint32_t)((x >> 40) % 2);
        req.writer = n[(x >> 44) % 3];
        req.preferred = MC_MASTER_NODE_NONE;
        req.flags = (x >> 48) % 4 == 0 ? MC_MASTER_PUT_UPSERT : 0;
        if ((x >> 50) % 16 == 0)
            req.flags |= MC_MASTER_PUT_PIN_SOFT;
        if (op < 40) {
            if (mc_master_put_start(m, &req, &g) == 0 && (x >> 52) % 8 != 0) {
                struct mc_master_ref ref = {.key = key, .key_len = req.key_len,
                                            .version = g.version, .node = req.writer};

                if ((x >> 55) % 10 == 0)
                    mc_master_put_revoke(m, &ref);
                else
                    mc_master_put_end(m, &ref);
            }
        } else if (op < 75) {
            if (nleases < 64 && t_get(m, key, &leases[nleases]) == 0) {
                strcpy(lease_keys[nleases], key);
                nleases++;
            }
        } else if (op < 85) {
            if (nleases > 0) {
                nleases--;
                t_release(m, lease_keys[nleases], &leases[nleases]);
            }
        } else if (op < 92) {
            mc_master_remove(m, key, strlen(key));
        } else if (op < 97) {
            t_exist(m, key);
        } else {
            t_advance(x % 3000);
            for (int k = 0; k < 3; k++)
                mc_master_node_heartbeat(m, n[k]);
            mc_master_tick(m);
        }
    }
    /* end everything: leases, stale puts, objects */
    while (nleases > 0) {
        nleases--;
        t_release(m, lease_keys[nleases], &leases[nleases]);
    }
    for (i = 0; i < 500; i++) {
        char key[16];

        snprintf(key, sizeof(key), "k%d", i);
        mc_master_remove(m, key, strlen(key));
    }
    t_advance(700000);
    for (i = 0; i < 3; i++)
        mc_master_node_heartbeat(m, n[i]);
    mc_master_tick(m);
    mc_master_tick(m);
    ck_assert_uint_eq(t_used(m), 0);
    ck_assert_uint_eq(t_stats(m).objects, 0);
    mc_master_destroy(m);
}
END_TEST


/* review findings: each fails without its fix */

START_TEST(test_soft_pin_survives_tick_during_put)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;
    struct mc_master_stat st;

    ck_assert_int_eq(t_start(t.m, "k", 100, MC_MASTER_PUT_PIN_SOFT, t.node, &g), 0);
    t_advance(100);
    mc_master_tick(t.m);
    ck_assert_int_eq(t_end(t.m, "k", g.version, t.node), 0);
    ck_assert_int_eq(mc_master_stat(t.m, "k", 1, &st), 0);
    ck_assert_uint_eq(st.flags & MC_MASTER_PUT_PIN_SOFT, MC_MASTER_PUT_PIN_SOFT);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_lease_expiry_right_after_tick_counter_wraps)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_get_result r;

    t_put(t.m, "k", 100, 0, t.node);
    t_advance((UINT64_C(1) << 32) * 10 + 5000); /* the 10 ms tick counter wrapped */
    ck_assert_int_eq(t_get(t.m, "k", &r), 0);
    ck_assert_uint_ge(r.lease.expires_ms, t_now_ms + 10000);
    ck_assert_uint_le(r.lease.expires_ms, t_now_ms + 10010);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_put_with_no_mounted_segment_is_no_space)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;

    ck_assert_int_eq(mc_master_segment_unmount(t.m, t.seg), 0);
    ck_assert_int_eq(t_start(t.m, "k", 100, 0, t.node, &g), MC_ERR_NO_SPACE);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_soft_pinned_evicted_on_segment_larger_than_scan_budget)
{
    struct t_one t = t_one_seg(2100 * 64);
    struct mc_master_put_grant g;
    char key[16];
    int i;

    for (i = 0; i < 2100; i++) {
        snprintf(key, sizeof(key), "s%d", i);
        t_put(t.m, key, 64, MC_MASTER_PUT_PIN_SOFT, t.node);
    }
    /* nothing unpinned is left: soft pins yield even beyond the per-step scan budget */
    ck_assert_int_eq(t_start(t.m, "plain", 64, 0, t.node, &g), 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_late_fence_ack_does_not_free_newer_put)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant a1, a2, b1, b2;
    struct mc_master_ref ref = {.key = "b", .key_len = 1, .node = t.node};

    ck_assert_int_eq(t_start(t.m, "a", 4096, MC_MASTER_PUT_UPSERT, t.node, &a1), 0);
    ck_assert_int_eq(t_start(t.m, "a", 4096, MC_MASTER_PUT_UPSERT, t.node, &a2), 0);
    ck_assert_int_eq(t_end(t.m, "a", a1.version, t.node), MC_ERR_CANCELED); /* a1's block freed */
    ck_assert_int_eq(t_start(t.m, "b", 4096, MC_MASTER_PUT_UPSERT, t.node, &b1), 0);
    ck_assert_uint_eq(b1.rep[0].alloc, a1.rep[0].alloc); /* the block id is reused */
    ck_assert_int_eq(t_start(t.m, "b", 4096, MC_MASTER_PUT_UPSERT, t.node, &b2), 0);
    /* the owner's ack for a1 arrives late: b1's block must stay */
    ck_assert_int_eq(mc_master_fence_ack(t.m, a1.rep[0].seg, a1.rep[0].alloc, a1.version),
                     MC_ERR_NOT_FOUND);
    ref.version = b1.version;
    ck_assert_int_eq(mc_master_put_revoke(t.m, &ref), 0);
    mc_master_destroy(t.m);
}
END_TEST

START_TEST(test_put_end_after_writer_unregistered_is_canceled)
{
    struct mc_master *m = t_master();
    uint32_t o = t_node(m, "owner", NULL), w = t_node(m, "writer", NULL);
    struct mc_master_put_req req = {.key = "k", .key_len = 1, .size = 100, .replicas = 1,
                                    .writer = w, .preferred = o};
    struct mc_master_put_grant g;

    t_seg(m, o, MiB);
    ck_assert_int_eq(mc_master_put_start(m, &req, &g), 0);
    ck_assert_int_eq(mc_master_node_unregister(m, w), 0);
    ck_assert_int_eq(t_end(m, "k", g.version, w), MC_ERR_CANCELED);
    ck_assert_int_eq(t_exist(m, "k"), 0);
    ck_assert_uint_eq(t_used(m), 0);
    mc_master_destroy(m);
}
END_TEST

struct t_list {
    int n;
    char seen[64][32];
};

static void t_list_cb(const char *key, size_t len, void *ctx)
{
    struct t_list *l = ctx;

    ck_assert_uint_lt(len, 32);
    memcpy(l->seen[l->n], key, len);
    l->seen[l->n][len] = '\0';
    l->n++;
}

START_TEST(test_list_by_prefix_pages_and_remove_prefix)
{
    struct t_one t = t_one_seg(MiB);
    struct mc_master_put_grant g;
    struct t_list l = {0};
    uint64_t cursor = 0;
    char key[32];
    int i, n, pages = 0;

    for (i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "model-a/%02d", i);
        t_put(t.m, key, 100, 0, t.node);
        snprintf(key, sizeof(key), "model-b/%02d", i);
        t_put(t.m, key, 100, 0, t.node);
    }
    ck_assert_int_eq(t_start(t.m, "model-a/inflight", 100, 0, t.node, &g), 0); /* not listed */
    do {
        n = mc_master_list(t.m, "model-a/", 8, &cursor, 7, t_list_cb, &l);
        ck_assert_int_ge(n, 0);
        ck_assert_int_le(n, 7);
        pages++;
    } while (cursor != 0);
    ck_assert_int_eq(l.n, 20);
    ck_assert_int_ge(pages, 3);
    for (i = 0; i < l.n; i++)
        ck_assert_int_eq(strncmp(l.seen[i], "model-a/", 8), 0);
    /* an empty prefix lists everything readable */
    l.n = 0;
    cursor = 0;
    ck_assert_int_eq(mc_master_list(t.m, "", 0, &cursor, 64, t_list_cb, &l), 40);
    ck_assert_uint_eq(mc_master_prefix_match(t.m, 0, NULL, NULL), 0);

    ck_assert_int_eq(mc_master_remove_prefix(t.m, "model-a/", 8), 20);
    ck_assert_int_eq(t_exist(t.m, "model-a/03"), 0);
    ck_assert_int_eq(t_exist(t.m, "model-b/03"), 1);
    ck_assert_int_eq(mc_master_remove_prefix(t.m, "model-a/", 8), 0);
    ck_assert_int_eq(mc_master_remove_prefix(t.m, "", 0), MC_ERR_INVALID);
    /* the in-flight put was not touched */
    ck_assert_int_eq(t_end(t.m, "model-a/inflight", g.version, t.node), 0);
    mc_master_destroy(t.m);
}
END_TEST

/* Every registered node is listed, also one that mounted nothing and one declared dead
 * (until its slot is reused), with its name, domain, segment count and idle time; pages
 * resume at the cursor. */
START_TEST(test_node_list_pages_live_and_dead_nodes)
{
    struct mc_master *m = t_master();
    struct mc_master_node_info info[8];
    const struct mc_master_config *cfg = mc_master_config(m);
    uint32_t a = t_node(m, "node-a", "rack1");
    uint32_t b = t_node(m, "node-b", NULL); /* a client node: no segment */
    uint32_t c = t_node(m, "node-c", "rack2"), cursor = 0, seen = 0, d;
    size_t n;

    t_seg(m, a, MiB);
    t_seg(m, a, MiB);
    t_seg(m, c, MiB);
    t_advance(250);
    ck_assert_int_eq(mc_master_node_heartbeat(m, a), 0);

    ck_assert_uint_eq(mc_master_node_list(m, &cursor, info, 8), 3);
    ck_assert_uint_eq(cursor, 0);
    ck_assert_uint_eq(info[0].id, a);
    ck_assert(info[0].alive);
    ck_assert_uint_eq(info[0].segments, 2);
    ck_assert_uint_eq(info[0].idle_ms, 0);
    ck_assert_str_eq(info[0].name, "node-a");
    ck_assert_str_eq(info[0].domain, "rack1");
    ck_assert_uint_eq(info[1].id, b);
    ck_assert_uint_eq(info[1].segments, 0);
    ck_assert_uint_eq(info[1].idle_ms, 250);
    ck_assert_str_eq(info[1].name, "node-b");
    ck_assert_str_eq(info[1].domain, "node-b"); /* a domain of its own */
    ck_assert_uint_eq(info[2].id, c);
    ck_assert_uint_eq(info[2].segments, 1);

    /* pages of one: the cursor walks the three and ends at 0 */
    cursor = 0;
    do {
        n = mc_master_node_list(m, &cursor, info, 1);
        ck_assert_uint_eq(n, 1);
        seen |= 1u << (info[0].id & 0xFFFFu);
    } while (cursor != 0);
    ck_assert_uint_eq(seen,
                      (1u << (a & 0xFFFFu)) | (1u << (b & 0xFFFFu)) | (1u << (c & 0xFFFFu)));
    /* max 0 writes nothing and leaves the cursor alone */
    cursor = 2;
    ck_assert_uint_eq(mc_master_node_list(m, &cursor, info, 0), 0);
    ck_assert_uint_eq(cursor, 2);
    /* a cursor past the table is the end */
    cursor = 1000;
    ck_assert_uint_eq(mc_master_node_list(m, &cursor, info, 8), 0);
    ck_assert_uint_eq(cursor, 0);

    /* c goes silent past the TTL, b leaves: both stay listed, dead, without segments */
    t_advance(cfg->node_ttl_ms + 1);
    ck_assert_int_eq(mc_master_node_heartbeat(m, a), 0);
    ck_assert_int_eq(mc_master_node_unregister(m, b), 0);
    mc_master_tick(m);
    ck_assert(!mc_master_node_is_alive(m, c));
    cursor = 0;
    ck_assert_uint_eq(mc_master_node_list(m, &cursor, info, 8), 3);
    ck_assert(info[0].alive);
    ck_assert(!info[1].alive);
    ck_assert(!info[2].alive);
    ck_assert_uint_eq(info[2].segments, 0);
    ck_assert_str_eq(info[2].name, "node-c");
    ck_assert_uint_eq(info[2].idle_ms, 250 + cfg->node_ttl_ms + 1);

    /* a new node takes the first dead slot: listed once, alive, under its new id */
    d = t_node(m, "node-d", "rack3");
    cursor = 0;
    ck_assert_uint_eq(mc_master_node_list(m, &cursor, info, 8), 3);
    ck_assert_uint_eq(info[1].id, d);
    ck_assert(info[1].alive);
    ck_assert_str_eq(info[1].domain, "rack3");
    mc_master_destroy(m);
}
END_TEST

static Suite *master_suite(void)
{
    Suite *s = suite_create("master");
    TCase *tc = tcase_create("rules");

    tcase_set_timeout(tc, 240); /* the randomized test takes ~80 s under ASan alone */
    tcase_add_test(tc, test_put_invisible_until_end);
    tcase_add_test(tc, test_put_existing_returns_exists);
    tcase_add_test(tc, test_put_on_young_processing_returns_busy);
    tcase_add_test(tc, test_upsert_old_version_readable_until_new_complete);
    tcase_add_test(tc, test_upsert_supersedes_older_processing);
    tcase_add_test(tc, test_remove_unpublishes_now_frees_after_lease);
    tcase_add_test(tc, test_exist_does_not_extend_lease);
    tcase_add_test(tc, test_exist_does_not_change_eviction_order);
    tcase_add_test(tc, test_lease_release_makes_evictable);
    tcase_add_test(tc, test_lease_blocks_space_reuse);
    tcase_add_test(tc, test_ttl_removes_even_pinned);
    tcase_add_test(tc, test_ttl_precise_to_the_ms);
    tcase_add_test(tc, test_ttl_max_enforced);
    tcase_add_test(tc, test_hard_pin_never_evicted);
    tcase_add_test(tc, test_hard_pin_cap);
    tcase_add_test(tc, test_soft_pin_evicted_last_and_lapses);
    tcase_add_test(tc, test_evict_inline_until_largest_block_fits);
    tcase_add_test(tc, test_evict_by_bytes_to_low_watermark);
    tcase_add_test(tc, test_stale_put_displaced_after_discard_timeout);
    tcase_add_test(tc, test_stale_put_space_freed_after_release_timeout);
    tcase_add_test(tc, test_stale_put_space_freed_by_fence);
    tcase_add_test(tc, test_dead_node_replicas_dropped_and_puts_revoked);
    tcase_add_test(tc, test_dead_writer_put_displaced_at_once_then_fenced);
    tcase_add_test(tc, test_dead_writer_blocks_queued_for_owner_fence);
    tcase_add_test(tc, test_replicas_on_distinct_domains);
    tcase_add_test(tc, test_preferred_node_first_then_by_free_capacity);
    tcase_add_test(tc, test_prefix_match_counts_leading_hits);
    tcase_add_test(tc, test_put_end_by_other_writer_denied);
    tcase_add_test(tc, test_invalid_input_rejected);
    tcase_add_test(tc, test_batch_put_per_item_results);
    tcase_add_test(tc, test_node_reregister_before_ttl_keeps_everything);
    tcase_add_test(tc, test_lease_survives_other_reader_late_release);
    tcase_add_test(tc, test_unmount_drops_replicas);
    tcase_add_test(tc, test_master_randomized_invariants);
    tcase_add_test(tc, test_soft_pin_survives_tick_during_put);
    tcase_add_test(tc, test_lease_expiry_right_after_tick_counter_wraps);
    tcase_add_test(tc, test_put_with_no_mounted_segment_is_no_space);
    tcase_add_test(tc, test_soft_pinned_evicted_on_segment_larger_than_scan_budget);
    tcase_add_test(tc, test_late_fence_ack_does_not_free_newer_put);
    tcase_add_test(tc, test_put_end_after_writer_unregistered_is_canceled);
    tcase_add_test(tc, test_list_by_prefix_pages_and_remove_prefix);
    tcase_add_test(tc, test_node_list_pages_live_and_dead_nodes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(master_suite());
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
