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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>
#include <mc/mc.h>

#include "tests/lib/t_fcluster.h"
#include "tests/disk/t_disk.h"

#define KIB 1024u
#define TTL_MS 3000u     /* node_ttl_ms: a loaded host stalls daemons for a second or more */
#define DRAIN_MS 90000u  /* 24 MiB from a disk at four copies at once, on a loaded host */

static json_int_t disk_stat(const char *sock, const char *name)
{
    json_t *j = t_fc_stats(sock);
    json_t *d = json_object_get(j, "disk");
    json_int_t v;

    ck_assert_msg(d != NULL, "no disk object in the stats of %s", sock);
    v = json_integer_value(json_object_get(d, name));
    json_decref(j);
    return v;
}

static void disk_settle(const char *sock)
{
    for (int i = 0; i < 500 && disk_stat(sock, "pending") != 0; i++)
        usleep(10000);
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

/* Waits until node `name` is "drained" (failing after DRAIN_MS, with what is left). */
static void wait_drained(const char *sock, const char *name)
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
            return;
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
    int only;

    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    t_fc_init(&fc, "disk_drain", TTL_MS);
    snprintf(path, sizeof(path), "%s/A.disk", fc.dir);
    t_fc_master_start(&fc, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn(&fc, &a, NULL, "127.0.0.1", "A", NULL, "16M", disk);
    t_fc_agent_wait(&a);
    ca = t_fc_conn(&a);
    put_range(ca, "dr", 0, n, len);
    disk_settle(a.sock);
    only = disk_only(ca, "dr", n);
    ck_assert_msg(only >= n / 4, "only %d of %d objects on disk only: the test would test "
                  "little", only, n);

    /* B joins only now: placement would have put the overflow there instead */
    t_fc_agent_spawn(&fc, &b, NULL, "127.0.0.1", "B", NULL, "64M", NULL);
    t_fc_agent_wait(&b);
    cb = t_fc_conn(&b);
    ck_assert_int_eq(t_mcctl(b.sock, NULL, "drain", "A", NULL), 0);
    wait_drained(b.sock, "A");
    /* the disk-only objects went from A's records (read and checked there), none too late */
    ck_assert_int_ge(disk_stat(a.sock, "drain_records_read"), only);
    ck_assert_int_eq(disk_stat(a.sock, "drain_reads"), 0);
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

    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    t_fc_init(&fc, "disk_drain_slow", TTL_MS);
    snprintf(path, sizeof(path), "%s/A.disk", fc.dir);
    t_fc_master_start(&fc, NULL, "127.0.0.1:0", "master");
    t_fc_agent_spawn(&fc, &a, NULL, "127.0.0.1", "A", NULL, "16M", disk);
    t_fc_agent_wait(&a);
    ca = t_fc_conn(&a);
    put_range(ca, "sl", 0, n, len);
    disk_settle(a.sock);
    only = disk_only_which(ca, "sl", n, was);
    ck_assert_int_ge(only, n / 4);
    t_fc_agent_spawn(&fc, &b, NULL, "127.0.0.1", "B", NULL, "64M", NULL);
    t_fc_agent_wait(&b);
    ck_assert_int_eq(t_mcctl(b.sock, NULL, "drain", "A", NULL), 0);
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
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_disk_drain_moves_disk_records);
    tcase_add_test(tc, test_disk_drain_slow_disk_never_writes_late);
    suite_add_tcase(s, tc);
    t_fc_records = mmap(NULL, T_FC_MAX_TESTS * sizeof(*t_fc_records), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (t_fc_records == MAP_FAILED)
        t_fc_records = NULL;
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    t_fc_dump_failed();
    return failed == 0 ? 0 : 1;
}
