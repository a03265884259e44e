/*
 * Draining a node whose objects are on its disk (docs/operations.md, "Taking a node out:
 * drain"; docs/disk.md, "Draining a node with a disk"): mc-master and real cluster agents on
 * this host (no namespaces). Node A has 16 MiB of DRAM and a disk; objects put through it
 * overflow to its disk until many are there only. Node B, with room in DRAM, joins; A is
 * drained. `mcctl cluster` must say "drained" in time, and then A may stop (SIGTERM) and
 * every object still reads back exactly through B: the disk-only ones were copied from A's
 * records (read and checked there, sent with the remote write) into B's memory.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <mc/mc.h>

#include "tests/lib/t_fcluster.h"
#include "tests/disk/t_disk.h"

#define KIB 1024u
#define TTL_MS 3000u     /* node_ttl_ms: a loaded host stalls daemons for a second or more */
#define DRAIN_MS 90000u  /* 24 MiB from a disk at four copies at once, on a loaded host */

/* mc-master and node A (16 MiB of DRAM, disk: its flags, the file at path) up, and keys
 * prefix/0..n-1 of len bytes put through A until its disk has nothing in flight; returns
 * the client of A. */
static mc_client_t *start_filled(struct t_fc *fc, const char *name, char *path, size_t path_len,
                                 struct t_proc *a, const char *const *disk, const char *prefix,
                                 int n, size_t len)
{
    mc_client_t *ca;

    t_disk_cluster_start(fc, name, TTL_MS, false, path, path_len, a, disk, NULL, NULL);
    ca = t_fc_conn(a);
    put_range(ca, prefix, 0, n, len);
    t_disk_settle(a->sock);
    return ca;
}

/* Node B (64 MiB of DRAM, no disk) joins, with a client of it in *cb unless cb is NULL, and
 * A is drained (`mcctl drain A`). */
static void join_b_drain_a(struct t_fc *fc, struct t_proc *b, mc_client_t **cb)
{
    memset(b, 0, sizeof(*b));
    t_fc_agent_spawn(fc, b, NULL, "127.0.0.1", "B", NULL, "64M", NULL);
    t_fc_agent_wait(b);
    if (cb != NULL)
        *cb = t_fc_conn(b);
    ck_assert_int_eq(t_mcctl(b->sock, NULL, "drain", "A", NULL), 0);
}

/* How many of prefix/0..n-1 have only disk replicas (asked through c); which, in is[]
 * (n entries) unless NULL. */
static int disk_only_which(mc_client_t *c, const char *prefix, int n, bool *is)
{
    int k = 0;

    for (int i = 0; i < n; i++) {
        char key[64];
        mc_obj_info_t info;

        snprintf(key, sizeof(key), "%s/%d", prefix, i);
        ck_assert_int_eq(mc_stat(c, key, &info), 0);
        if (is != NULL)
            is[i] = info.replicas > 0 && MC_OBJ_DISK_REPLICAS(info.flags) == info.replicas;
        if (info.replicas > 0 && MC_OBJ_DISK_REPLICAS(info.flags) == info.replicas)
            k++;
    }
    return k;
}

static int disk_only(mc_client_t *c, const char *prefix, int n)
{
    return disk_only_which(c, prefix, n, NULL);
}

/* Waits until node `name` is "drained" (failing after DRAIN_MS, with what is left);
 * returns how long it took (ms). */
static uint64_t wait_drained(const char *sock, const char *name)
{
    uint64_t t0 = t_now_ms();
    json_int_t left = -1, left_bytes = -1;

    for (;;) {
        json_t *j = t_fc_cluster(sock);
        json_t *node = t_json_find_str(j, "nodes", "name", name);
        const char *st = json_object_get(node, "drain") != NULL ? t_json_str(node, "drain") : "";

        if (json_object_get(node, "drain_left_objects") != NULL) {
            left = t_json_int(node, "drain_left_objects");
            left_bytes = t_json_int(node, "drain_left_bytes");
        }
        if (strcmp(st, "drained") == 0) {
            ck_assert_int_eq(left, 0);
            json_decref(j);
            return t_now_ms() - t0;
        }
        json_decref(j);
        ck_assert_msg(t_now_ms() - t0 < DRAIN_MS,
                      "%s not drained in %u ms: %lld blocks (%lld bytes) left", name, DRAIN_MS,
                      (long long)left, (long long)left_bytes);
        t_fc_sleep_ms(100);
    }
}

START_TEST(test_disk_drain_moves_disk_records)
{
    struct t_fc fc;
    struct t_proc a, b;
    char path[300];
    const char *disk[] = {"--disk", path, "--disk-size", "128M", NULL};
    mc_client_t *ca, *cb;
    const size_t len = 64 * KIB;
    const int n = 384; /* 24 MiB through 16 MiB of DRAM: a third or more to disk only */
    uint64_t ms;
    int only;

    ca = start_filled(&fc, "disk_drain", path, sizeof(path), &a, disk, "dr", n, len);
    only = disk_only(ca, "dr", n);
    ck_assert_msg(only >= n / 4, "only %d of %d objects on disk only: the test would test "
                  "little", only, n);

    /* B joins only now: placement would have put the overflow there instead */
    join_b_drain_a(&fc, &b, &cb);
    ms = wait_drained(b.sock, "A");
    fprintf(stderr, "test_disk_drain: A drained in %llu ms (%d of %d objects of 64 KiB on "
            "its disk only)\n", (unsigned long long)ms, only, n);
    /* the disk-only objects went from A's records (read and checked there), none too late */
    ck_assert_int_ge(t_disk_stat(a.sock, "drain_records_read"), only);
    ck_assert_int_eq(t_disk_stat(a.sock, "drain_reads"), 0);
    ck_assert_int_eq(t_fc_stat(a.sock, "drain_copies_late"), 0);
    mc_close(ca);

    /* drained: A may go, and nothing may go with it */
    ck_assert_int_eq(t_proc_stop(&a), 0);
    ck_assert_int_eq(get_range(cb, "dr", 0, n, len), n);
    ck_assert_int_eq(disk_only(cb, "dr", n), 0);
    mc_close(cb);
    t_fc_finish(&fc);
}
END_TEST

/* Flip one payload byte of the record of each key of keys[0..k) in the disk file at path:
 * the record whose header (at a block-aligned offset, with the header's magic) names that
 * key (a key that is no other key's prefix). Returns how many were found. */
static int flip_records(const char *path, char keys[][16], int k)
{
    uint8_t blk[4096];
    struct stat sb;
    int fd = open(path, O_RDWR), flipped = 0;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fstat(fd, &sb), 0);
    for (off_t off = 4096; off + 8192 <= sb.st_size; off += 4096) {
        ck_assert_int_eq(pread(fd, blk, sizeof(blk), off), (ssize_t)sizeof(blk));
        if (memcmp(blk, "MCDISKRC", 8) != 0)
            continue;
        for (int i = 0; i < k; i++) {
            if (memmem(blk, sizeof(blk), keys[i], strlen(keys[i])) == NULL)
                continue;
            ck_assert_int_eq(pread(fd, blk, 1, off + 4096 + 100), 1);
            blk[0] ^= 0x5a;
            ck_assert_int_eq(pwrite(fd, blk, 1, off + 4096 + 100), 1);
            flipped++;
            break;
        }
    }
    ck_assert_int_eq(fsync(fd), 0);
    close(fd);
    return flipped;
}

/*
 * A record that fails its check on the draining owner is not copied: the owner answers
 * MC_ERR_CORRUPT, the master drops it as a lost replica (its object is gone when that was
 * its last), and the drain ends. A payload byte of four disk-only objects' records is
 * flipped in the file under the running agent (its O_DIRECT reads see it): after
 * "drained" and A's stop, those four are NOT_FOUND through B and every other key reads back
 * exactly, never wrong bytes. Without it the drain retried the corrupt records for ever.
 */
START_TEST(test_disk_drain_corrupt_record_lost)
{
    struct t_fc fc;
    struct t_proc a, b;
    char path[300];
    const char *disk[] = {"--disk", path, "--disk-size", "128M", NULL};
    mc_client_t *ca, *cb;
    const size_t len = 64 * KIB;
    const int n = 384;
    int flipped, present, k = 0;
    bool only[384];
    char bad[4][16];

    ca = start_filled(&fc, "disk_drain_corrupt", path, sizeof(path), &a, disk, "co", n, len);
    ck_assert_int_ge(disk_only_which(ca, "co", n, only), n / 4);
    /* four objects on disk only (one with a memory replica is copied from memory), of
     * three-digit keys: no key is a prefix of theirs */
    for (int i = 100; i < n && k < 4; i++) {
        if (only[i])
            snprintf(bad[k++], sizeof(bad[0]), "co/%d", i);
    }
    ck_assert_int_eq(k, 4);
    flipped = flip_records(path, bad, k);
    ck_assert_int_eq(flipped, 4);

    join_b_drain_a(&fc, &b, &cb);
    wait_drained(b.sock, "A");
    ck_assert_int_ge(t_disk_stat(a.sock, "read_corrupt"), flipped);
    mc_close(ca);
    ck_assert_int_eq(t_proc_stop(&a), 0);
    present = get_range(cb, "co", 0, n, len); /* exact bytes, or NOT_FOUND */
    ck_assert_int_eq(present, n - flipped);
    for (int i = 0; i < k; i++)
        ck_assert_int_eq(mc_exist(cb, bad[i]), 0);
    mc_close(cb);
    t_fc_finish(&fc);
}
END_TEST

/*
 * The subtle point of a disk source (owner.c, copy_from_disk): its remote write starts only
 * after the disk read, and the master may have given the copy up and freed its target by
 * then. The owner starts the write by the COPY's arrival + op_timeout_ms or never. Here A's
 * every disk read starts 1.5 s late and its op_timeout_ms is 1 s: its drain copies of
 * disk-only objects are all answered MC_ERR_TIMEOUT unsent (drain_copies_late), none of
 * those objects gains a replica on B, and "drained" is never said while they are on A.
 * Without the rule the copies were sent late (and joined the objects).
 */
START_TEST(test_disk_drain_slow_disk_never_writes_late)
{
    struct t_fc fc;
    struct t_proc a, b;
    char path[300];
    const char *disk[] = {"--disk", path, "--disk-size", "128M", "--set", "op_timeout_ms=1000",
                          "--test-fault", "disk_delay_ms=1500", NULL};
    mc_client_t *ca;
    const size_t len = 64 * KIB;
    const int n = 384;
    int only;
    bool was[384], now[384];
    json_t *j, *node;

    ca = start_filled(&fc, "disk_drain_slow", path, sizeof(path), &a, disk, "sl", n, len);
    only = disk_only_which(ca, "sl", n, was);
    ck_assert_int_ge(only, n / 4);
    join_b_drain_a(&fc, &b, NULL);
    /* four copies at a time, each read 1.5 s: several rounds of them */
    for (int i = 0; i < 100 && t_fc_stat(a.sock, "drain_copies_late") < 8; i++)
        t_fc_sleep_ms(100);
    /* none of them copied (the tick may offload more of A's memory to its disk meanwhile) */
    (void)disk_only_which(ca, "sl", n, now);
    for (int i = 0; i < n; i++)
        ck_assert_msg(!was[i] || now[i], "sl/%d was copied from A's slow disk", i);
    ck_assert_int_ge(t_fc_stat(a.sock, "drain_copies_late"), 8);
    j = t_fc_cluster(b.sock);
    node = t_json_find_str(j, "nodes", "name", "A");
    ck_assert_str_eq(t_json_str(node, "drain"), "draining");
    ck_assert_int_gt(t_json_int(node, "drain_left_objects"), 0);
    json_decref(j);
    mc_close(ca);
    t_fc_finish(&fc);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("disk_drain");
    TCase *tc = tcase_create("drain");

    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_disk_drain_moves_disk_records);
    tcase_add_test(tc, test_disk_drain_slow_disk_never_writes_late);
    tcase_add_test(tc, test_disk_drain_corrupt_record_lost);
    suite_add_tcase(s, tc);
    return t_fc_run(s, NULL);
}
