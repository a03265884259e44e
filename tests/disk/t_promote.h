/*
 * The promotion scenario (disk_promote, docs/disk.md) shared by test_disk_promote.c
 * (standalone) and test_disk_promote_cluster.c: a GET of an object whose replicas are all on
 * disk is answered from disk, and the master has the owner copy the record back into its
 * DRAM; the next GET reads memory (disk_hits unchanged), `promotions` counts it, and the
 * object then has both tiers. A promotion whose object is removed or replaced while it runs
 * (held open by the owner's test seam, --test-fault promote_delay_ms) never brings the old
 * bytes back. With the knob off (the default), a disk hit stays a disk hit. The includer
 * provides t_fill.
 */
#ifndef MC_TEST_T_PROMOTE_H
#define MC_TEST_T_PROMOTE_H

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <mc/mc.h>

#define KIB 1024u
#define LEN (64 * KIB)
#define N 512 /* 32 MiB through 16 MiB of DRAM */

static uint64_t seed_of(int i, int gen)
{
    return (uint64_t)i * 104729u + (uint64_t)gen * 7u + LEN;
}

static void put_one(mc_client_t *c, const char *prefix, int i, int gen)
{
    uint8_t *buf = malloc(LEN);
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    char key[64];
    int err, tries = 0;

    ck_assert_ptr_nonnull(buf);
    o.flags = MC_PUT_UPSERT;
    snprintf(key, sizeof(key), "%s/%d", prefix, i);
    t_fill(buf, LEN, seed_of(i, gen));
    /* a pool momentarily full of objects on their way to disk: MC_ERR_NO_SPACE */
    while ((err = mc_put(c, key, buf, LEN, &o)) == MC_ERR_NO_SPACE && tries++ < 2000)
        usleep(2000);
    ck_assert_msg(err == 0, "put %s: %s", key, mc_strerror(err));
    free(buf);
}

/* 0 with the bytes of generation gen checked, or the get's error. */
static int get_one(mc_client_t *c, const char *prefix, int i, int gen)
{
    uint8_t *buf = malloc(LEN), *want = malloc(LEN);
    char key[64];
    size_t got = 0;
    int err;

    ck_assert_ptr_nonnull(buf);
    ck_assert_ptr_nonnull(want);
    snprintf(key, sizeof(key), "%s/%d", prefix, i);
    err = mc_get(c, key, buf, LEN, &got);
    if (err == 0) {
        ck_assert_uint_eq(got, LEN);
        t_fill(want, LEN, seed_of(i, gen));
        ck_assert_msg(memcmp(want, buf, LEN) == 0, "bytes of %s (generation %d)", key, gen);
    }
    free(buf);
    free(want);
    return err;
}

/* A field of the owner's `disk` stats object, through a client connection of the owner. */
static json_int_t disk_stat(mc_client_t *own, const char *name)
{
    static char buf[1 << 16];
    size_t n = 0;
    json_t *j, *d;
    json_int_t v;

    ck_assert_int_eq(mc_stats(own, buf, sizeof(buf) - 1, &n), 0);
    buf[n] = '\0';
    j = json_loads(buf, 0, NULL);
    ck_assert_ptr_nonnull(j);
    d = json_object_get(j, "disk");
    ck_assert_msg(d != NULL, "no disk object in the owner's stats");
    v = json_integer_value(json_object_get(d, name));
    json_decref(j);
    return v;
}

static void disk_settle(mc_client_t *own)
{
    for (int i = 0; i < 500 && disk_stat(own, "pending") != 0; i++)
        usleep(10000);
}

/* Replicas of key, and how many of them are on disk (mc_stat, what mcctl stat prints). */
static void tiers(mc_client_t *c, const char *prefix, int i, uint32_t *reps, uint32_t *disk)
{
    mc_obj_info_t info;
    char key[64];

    snprintf(key, sizeof(key), "%s/%d", prefix, i);
    ck_assert_int_eq(mc_stat(c, key, &info), 0);
    *reps = info.replicas;
    *disk = MC_OBJ_DISK_REPLICAS(info.flags);
}

/* The first key of prefix (of N) that is on disk only. */
static int disk_only(mc_client_t *c, const char *prefix, int from)
{
    for (int i = from; i < N; i++) {
        uint32_t r, d;

        tiers(c, prefix, i, &r, &d);
        if (r == 1 && d == 1)
            return i;
    }
    ck_abort_msg("no object of %s on disk only", prefix);
    return -1;
}

/* Room in the owner's DRAM for a few promotions: a promotion takes a free block or evicts
 * one that may go at once; a DRAM full of objects whose only replica it holds has none
 * until their offloads end (a loaded host), and the master then skips the promotion. So
 * remove `n` objects that have a memory replica (the last keys first; never one the
 * scenario reads). */
static void make_room(mc_client_t *w, mc_client_t *r, const char *prefix, int n)
{
    char key[64];

    for (int i = N - 1; i >= 0 && n > 0; i--) {
        uint32_t reps, disk;

        tiers(r, prefix, i, &reps, &disk);
        if (reps > disk) {
            snprintf(key, sizeof(key), "%s/%d", prefix, i);
            ck_assert_int_eq(mc_remove(w, key), 0);
            n--;
        }
    }
    ck_assert_int_eq(n, 0);
}

static json_int_t wait_stat(mc_client_t *own, const char *name, json_int_t want)
{
    json_int_t v = 0;

    for (int i = 0; i < 500 && (v = disk_stat(own, name)) < want; i++)
        usleep(10000);
    return v;
}

/*
 * The scenario: w writes and reads the owner's stats (a client of the owner), r reads (the
 * same in standalone, a --dram 0 node's client in cluster); `promote` says whether the knob
 * is on, `delayed` whether the owner holds each promotion's end back 1500 ms.
 */
static void t_promote_scenario(mc_client_t *w, mc_client_t *r, bool promote, bool delayed)
{
    json_int_t hits, retried = 0;
    uint32_t reps, disk;
    int k;

    for (int i = 0; i < N; i++)
        put_one(w, "p", i, 0);
    disk_settle(w);
    k = disk_only(r, "p", 0);
    hits = disk_stat(w, "disk_hits");
    ck_assert_int_eq(disk_stat(w, "promotions"), 0);

    if (!delayed) {
        /* the first get is answered from disk, exact */
        ck_assert_int_eq(get_one(r, "p", k, 0), 0);
        ck_assert_int_eq(disk_stat(w, "disk_hits"), hits + 1);
        if (!promote) {
            ck_assert_int_eq(get_one(r, "p", k, 0), 0);
            ck_assert_int_eq(disk_stat(w, "disk_hits"), hits + 2); /* from disk again */
            usleep(300000);
            ck_assert_int_eq(disk_stat(w, "promotions"), 0);
            tiers(r, "p", k, &reps, &disk);
            ck_assert_uint_eq(reps, 1);
            ck_assert_uint_eq(disk, 1);
            return;
        }
        /* a promotion takes room in the node's DRAM; while none can be made (every block
         * there waiting for its offload on a loaded host) the GET is served from disk
         * alone, and the next GET of the object tries again */
        for (int t = 0; t < 100 && disk_stat(w, "promotions") < 1; t++) {
            if (t % 10 == 9) {
                ck_assert_int_eq(get_one(r, "p", k, 0), 0);
                retried++; /* from disk: a disk hit */
            }
            usleep(50000);
        }
        ck_assert_int_ge(disk_stat(w, "promotions"), 1);
        /* both tiers now; the next gets read memory */
        for (int tries = 0; tries < 100; tries++) {
            tiers(r, "p", k, &reps, &disk);
            if (reps == 2)
                break;
            usleep(10000);
        }
        ck_assert_uint_eq(reps, 2);
        ck_assert_uint_eq(disk, 1);
        ck_assert_int_eq(get_one(r, "p", k, 0), 0);
        ck_assert_int_eq(get_one(r, "p", k, 0), 0);
        ck_assert_int_eq(disk_stat(w, "disk_hits"), hits + 1 + retried);
        ck_assert_int_eq(disk_stat(w, "promotions"), 1);
        ck_assert_int_eq(disk_stat(w, "read_corrupt"), 0);
        return;
    }
    /* removed, and another key replaced, while their promotions are held open */
    {
        int k2 = disk_only(r, "p", k + 1);
        char key[64];

        make_room(w, r, "p", 8);
        ck_assert_int_eq(get_one(r, "p", k, 0), 0);
        ck_assert_int_eq(get_one(r, "p", k2, 0), 0);
        /* both promotions' reads are over (held 1500 ms before they are answered): the
         * DRAM blocks hold the old bytes now (in a cluster, the COPY reaches the owner
         * first: mc-master sends it at once) */
        usleep(300000);
        disk_settle(w);
        ck_assert_int_eq(disk_stat(w, "promotions"), 0);
        snprintf(key, sizeof(key), "p/%d", k);
        ck_assert_int_eq(mc_remove(w, key), 0);
        put_one(w, "p", k2, 1);
        /* the promotions end (the agent read both records into DRAM blocks) */
        ck_assert_int_eq(wait_stat(w, "promotions", 2), 2);
        usleep(300000); /* their answers reach the master */
        ck_assert_int_eq(get_one(r, "p", k, 0), MC_ERR_NOT_FOUND);
        /* the new bytes, never the old (the new version may have gone to disk since) */
        ck_assert_int_eq(get_one(r, "p", k2, 1), 0);
        ck_assert_int_eq(get_one(r, "p", k2, 1), 0);
        /* the old version's promoted block never joined the new one: one memory replica
         * at most (the put's; a disk one may have come by offload since) */
        tiers(r, "p", k2, &reps, &disk);
        ck_assert_uint_le(reps - disk, 1);
        /* and the store keeps working: a later get of a disk-only key still promotes */
        {
            int k3 = disk_only(r, "p", k2 + 1);

            ck_assert_int_eq(get_one(r, "p", k3, 0), 0);
            ck_assert_int_eq(wait_stat(w, "promotions", 3), 3);
            ck_assert_int_eq(get_one(r, "p", k3, 0), 0);
        }
    }
}

#endif /* MC_TEST_T_PROMOTE_H */
