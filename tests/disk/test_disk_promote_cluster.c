/*
 * Promotion (disk_promote, docs/disk.md) in cluster mode: mc-master with MC_DISK_PROMOTE=true,
 * an owner with 16 MiB of DRAM and a disk, a --dram 0 client node whose every get is a
 * remote read. The scenario of t_promote.h; mcctl stat names both tiers after a promotion;
 * a promotion held open by the owner while its key is removed or replaced.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mc/mc.h>

#include "tests/lib/t_fcluster.h"
#include "tests/disk/t_disk.h"
#include "tests/disk/t_promote.h"

#define TTL_MS 3000u

static void cluster(bool delayed)
{
    struct t_fc fc;
    struct t_proc a, c;
    char path[300];
    const char *extra[8] = {"--disk", path, "--disk-size", "64M"};
    mc_client_t *ca, *cc;

    if (delayed) {
        extra[4] = "--test-fault";
        extra[5] = "promote_delay_ms=1500";
    }
    t_disk_cluster_start(&fc, delayed ? "disk_promote_cluster_rm" : "disk_promote_cluster",
                         TTL_MS, true, path, sizeof(path), &a, extra, &c, NULL);
    ca = t_fc_conn(&a);
    cc = t_fc_conn(&c);
    t_promote_scenario(ca, cc, true, delayed);
    if (!delayed) {
        /* mcctl stat names both tiers of a promoted object. Each mcctl run is a stat of
         * its own: a promotion still running may evict an object promoted before it, so
         * the object shown is looked for among all of them, not fixed beforehand */
        char cmd[600], out[4096] = "";
        bool seen = false;

        for (int k = 0; k < N && !seen; k++) {
            size_t got;
            FILE *p;

            snprintf(cmd, sizeof(cmd), "%s --socket %s stat p/%d", t_env_bin("MCCTL"), c.sock,
                     k);
            p = popen(cmd, "r");
            ck_assert_ptr_nonnull(p);
            got = fread(out, 1, sizeof(out) - 1, p);
            out[got] = '\0';
            ck_assert_int_eq(pclose(p), 0);
            seen = strstr(out, "\"tiers\": [\"dram\", \"disk\"]") != NULL ||
                   strstr(out, "\"tiers\":[\"dram\",\"disk\"]") != NULL;
        }
        ck_assert_msg(seen, "no mcctl stat of p/0..p/%d shows both tiers; the last: %s", N - 1,
                      out);
    }
    mc_close(ca);
    mc_close(cc);
    t_fc_finish(&fc);
}

START_TEST(test_disk_promote_cluster)
{
    cluster(false);
}
END_TEST

START_TEST(test_disk_promote_cluster_removed_meanwhile)
{
    cluster(true);
}
END_TEST

/*
 * A reader node with DRAM of its own (B, 64 MiB, joined after the puts so that it holds
 * none of them): a GET through B of an object on A's disk only is answered from that disk,
 * and the promotion goes into B's DRAM (A reads the record and sends it with the remote
 * write), so the next GETs through B are local: B's reads_from_peers does not move and A's
 * disk_hits neither, the bytes exact; A's own `promotions` (into its DRAM) stays 0. Without
 * the reader's node the promotion went into A's DRAM and every later get through B was a
 * remote read.
 */
START_TEST(test_disk_promote_cluster_into_reader)
{
    struct t_fc fc;
    struct t_proc a, b;
    char path[300];
    const char *extra[] = {"--disk", path, "--disk-size", "64M", NULL};
    mc_client_t *ca, *cb;
    json_int_t hits, peer_reads;
    uint32_t reps = 0, disk = 0;
    int k;

    t_disk_cluster_start(&fc, "disk_promote_cluster_reader", TTL_MS, true, path, sizeof(path),
                         &a, extra, NULL, NULL);
    ca = t_fc_conn(&a);
    for (int i = 0; i < N; i++)
        put_one(ca, "p", i, 0);
    disk_settle(ca);
    memset(&b, 0, sizeof(b));
    t_fc_agent_spawn(&fc, &b, NULL, "127.0.0.1", "B", NULL, "64M", NULL);
    t_fc_agent_wait(&b);
    cb = t_fc_conn(&b);
    k = disk_only(cb, "p", 0);
    hits = disk_stat(ca, "disk_hits");

    ck_assert_int_eq(get_one(cb, "p", k, 0), 0); /* from A's disk */
    ck_assert_int_eq(disk_stat(ca, "disk_hits"), hits + 1);
    for (int t = 0; t < 200; t++) {
        tiers(cb, "p", k, &reps, &disk);
        if (reps == 2)
            break;
        usleep(10000);
    }
    ck_assert_uint_eq(reps, 2);
    ck_assert_uint_eq(disk, 1);
    ck_assert_int_eq(disk_stat(ca, "promotions"), 0); /* not into A's DRAM */
    ck_assert_int_ge(disk_stat(ca, "drain_records_read"), 1);
    peer_reads = t_fc_stat(b.sock, "reads_from_peers");
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(get_one(cb, "p", k, 0), 0);
    ck_assert_int_eq(t_fc_stat(b.sock, "reads_from_peers"), peer_reads); /* local hits */
    ck_assert_int_eq(disk_stat(ca, "disk_hits"), hits + 1);
    ck_assert_int_eq(disk_stat(ca, "read_corrupt"), 0);
    mc_close(ca);
    mc_close(cb);
    t_fc_finish(&fc);
}
END_TEST

/*
 * Neither the disk's node nor the reader's node has DRAM: A put its objects with 16 MiB of
 * DRAM and a disk, then is killed -9 and started again on the same disk with --dram 0 (its
 * records restored, disk only); C reads with --dram 0; B (64 MiB) holds nothing of them.
 * A GET through C of an object on A's disk is answered from that disk, and the promotion
 * goes into the DRAM of B, the one node that has any (the largest free block elsewhere):
 * the next GETs through C read B's copy, A's disk_hits does not move, the bytes exact.
 * Before, a promotion had no DRAM to go to and every get was a disk read.
 */
START_TEST(test_disk_promote_cluster_into_third_node)
{
    struct t_fc fc;
    struct t_proc a, a2, b, c;
    char path[300], key[64];
    const char *extra[] = {"--disk", path, "--disk-size", "64M", NULL};
    mc_client_t *ca, *cc;
    json_int_t hits;
    uint32_t reps = 0, disk = 0;
    int k;

    t_disk_cluster_start(&fc, "disk_promote_cluster_third", TTL_MS, true, path, sizeof(path),
                         &a, extra, NULL, NULL);
    ca = t_fc_conn(&a);
    for (int i = 0; i < N; i++)
        put_one(ca, "p", i, 0);
    disk_settle(ca);
    k = disk_only(ca, "p", 0);
    mc_close(ca);
    t_proc_kill(&a);
    t_fc_sleep_ms(TTL_MS + 1500); /* declared dead: its DRAM copies are gone */
    memset(&a2, 0, sizeof(a2));
    t_fc_agent_spawn_as(&fc, &a2, NULL, "127.0.0.1", "A2", "A", NULL, "0", extra);
    memset(&c, 0, sizeof(c));
    t_fc_agent_spawn(&fc, &c, NULL, "127.0.0.1", "C", NULL, "0", NULL);
    memset(&b, 0, sizeof(b));
    t_fc_agent_spawn(&fc, &b, NULL, "127.0.0.1", "B", NULL, "64M", NULL);
    t_fc_agent_wait(&a2);
    t_fc_agent_wait(&c);
    t_fc_agent_wait(&b);
    ca = t_fc_conn(&a2);
    cc = t_fc_conn(&c);
    snprintf(key, sizeof(key), "p/%d", k);
    for (int t = 0; t < 100 && mc_exist(cc, key) != 1; t++)
        t_fc_sleep_ms(100); /* the restore of A's records */
    tiers(cc, "p", k, &reps, &disk);
    ck_assert_msg(reps == 1 && disk == 1, "p/%d after A's restart: %u replicas, %u on disk", k,
                  reps, disk);
    hits = disk_stat(ca, "disk_hits");

    ck_assert_int_eq(get_one(cc, "p", k, 0), 0); /* from A's disk */
    ck_assert_int_eq(disk_stat(ca, "disk_hits"), hits + 1);
    for (int t = 0; t < 200; t++) {
        tiers(cc, "p", k, &reps, &disk);
        if (reps == 2)
            break;
        usleep(10000);
    }
    ck_assert_msg(reps == 2, "p/%d was not promoted into B's DRAM (%u replicas)", k, reps);
    ck_assert_uint_eq(disk, 1);
    ck_assert_int_ge(disk_stat(ca, "drain_records_read"), 1);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(get_one(cc, "p", k, 0), 0);
    ck_assert_int_eq(disk_stat(ca, "disk_hits"), hits + 1); /* B's copy read, not A's disk */
    ck_assert_int_eq(disk_stat(ca, "read_corrupt"), 0);
    mc_close(ca);
    mc_close(cc);
    t_fc_finish(&fc);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("disk_promote_cluster");
    TCase *tc = tcase_create("cluster");

    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_disk_promote_cluster);
    tcase_add_test(tc, test_disk_promote_cluster_removed_meanwhile);
    tcase_add_test(tc, test_disk_promote_cluster_into_reader);
    tcase_add_test(tc, test_disk_promote_cluster_into_third_node);
    suite_add_tcase(s, tc);
    return t_fc_run(s, NULL);
}
