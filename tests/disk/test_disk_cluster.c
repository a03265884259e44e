/*
 * The disk tier in cluster mode (docs/disk.md): mc-master and real cluster agents on this
 * host (no namespaces). An owner with 16 MiB of DRAM and a disk file; a client node with
 * --dram 0, whose every get is a remote read, of objects in the owner's memory and of
 * objects only on its disk. Then the owner is killed (-9), declared dead, and started again
 * on the same file: mc-master learns its disk records again (the restore seam, MOUNT then
 * RESTORE), and every object that was on disk reads back exactly through the client node.
 * A batch get mixing disk- and memory-resident objects goes as one READ_BATCH to the owner,
 * which answers it once its last disk item is read.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <mc/mc.h>

#include "tests/lib/t_fcluster.h"
#include "tests/disk/t_disk.h"

#define KIB 1024u
#define TTL_MS 3000u /* node_ttl_ms: a loaded host stalls daemons for a second or more */

/* The n items of a batch get of keys[i] (key index idx[i], len bytes each) all read back
 * exactly; frees their buffers. */
static void check_batch(int n, char keys[][64], const int *idx, void **bufs, const size_t *lens,
                        const int *results, size_t len)
{
    for (int i = 0; i < n; i++) {
        uint8_t *want = malloc(len);

        ck_assert_ptr_nonnull(want);
        ck_assert_msg(results[i] == 0, "batch item %s: %s", keys[i], mc_strerror(results[i]));
        ck_assert_uint_eq(lens[i], len);
        t_fill(want, len, t_disk_seed(idx[i], len));
        ck_assert_msg(memcmp(want, bufs[i], len) == 0, "bytes of batch item %s", keys[i]);
        free(want);
        free(bufs[i]);
    }
}

/* One batch get of keys [from, from + half) and [to - half, to) through c: the oldest
 * objects (on disk only, by now) and the newest (still in memory) in the same batch, so
 * that the owner's one READ_BATCH mixes reads of its disk with reads of its DRAM. Every
 * item reads back exactly. */
static void batch_get_mixed(mc_client_t *c, const char *prefix, int from, int to, size_t len)
{
    enum { HALF = 16, N = 2 * HALF };
    char keys[N][64];
    const char *kp[N];
    void *bufs[N];
    size_t caps[N], lens[N];
    int results[N], idx[N], rc;

    for (int i = 0; i < N; i++) {
        idx[i] = i < HALF ? from + i : to - N + i;
        snprintf(keys[i], sizeof(keys[i]), "%s/%d", prefix, idx[i]);
        kp[i] = keys[i];
        bufs[i] = malloc(len);
        ck_assert_ptr_nonnull(bufs[i]);
        caps[i] = len;
    }
    rc = mc_batch_get(c, N, kp, bufs, caps, lens, results);
    ck_assert_msg(rc == N, "batch get: %d of %d", rc, N);
    check_batch(N, keys, idx, bufs, lens, results, len);
}

static void settle_fn(void *sock)
{
    t_disk_settle(sock);
}

/* A2 starts in A's place (node name A) on A's disk (extra: its flags, as A's). */
static void owner_restart(struct t_fc *fc, struct t_proc *a2, const char *const *extra)
{
    memset(a2, 0, sizeof(*a2));
    t_fc_agent_spawn_as(fc, a2, NULL, "127.0.0.1", "A2", "A", NULL, "16M", extra);
    t_fc_agent_wait(a2);
}

/* Waits until key exists through c, asking up to `tries` times 100 ms apart (the caller
 * asserts what it needs). */
static void wait_exist(mc_client_t *c, const char *key, int tries)
{
    for (int i = 0; i < tries; i++) {
        if (mc_exist(c, key) == 1)
            break;
        t_fc_sleep_ms(100);
    }
}

/*
 * Hole D1 in a cluster (docs/disk.md, "Removed while still in use"): objects on the owner's
 * disk pinned by the client node, removed, and the owner killed -9 while the pins still
 * hold them (nothing freed, no DROP made, nothing erased), declared dead, restarted on its
 * disk: mc-master remembered the removed versions from the remove on (RETIRED drops) and
 * refuses their restore. Without that the restore published them again.
 *   pr/N  pinned, removed: NOT_FOUND;  ctl/N  on disk, untouched: back (the restore ran).
 */
START_TEST(test_disk_cluster_removed_while_pinned_stays_removed)
{
    struct t_fc fc;
    struct t_proc a, a2, c;
    char path[300];
    const char *extra[] = {"--disk", path, "--disk-size", "128M", NULL};
    mc_client_t *ca, *cc;
    const size_t len = 64 * KIB;
    const int n = 8;
    const uint64_t old = 1000;
    uint64_t removed = 0;

    t_disk_cluster_start(&fc, "disk_cluster_pinned", TTL_MS, false, path, sizeof(path), &a,
                         extra, &c, NULL);
    ca = t_fc_conn(&a);
    cc = t_fc_conn(&c);
    batch_put_seeded(ca, "pr", n, len, old);
    batch_put_seeded(ca, "ctl", n, len, old);
    put_range(ca, "fill", 0, 384, len); /* 24 MiB more through 16 MiB: the above to disk */
    t_disk_settle(a.sock);
    assert_on_disk(cc, "pr", n);
    assert_on_disk(cc, "ctl", n);
    (void)pin_range(cc, "pr", n); /* the client node's: held past the owner's death */
    ck_assert_int_eq(mc_remove_prefix(ca, "pr/", &removed), 0);
    ck_assert_uint_eq(removed, (uint64_t)n);
    t_fc_sleep_ms(300); /* mc-master's own calls to A end (the known gap of ucx.c) */
    t_proc_kill(&a);
    mc_close(ca);
    t_fc_sleep_ms(TTL_MS + 1500);
    owner_restart(&fc, &a2, extra);
    /* the restore has run once ctl/N are back */
    wait_exist(cc, "ctl/7", 100);
    ck_assert_int_eq(mc_exist(cc, "ctl/7"), 1);
    for (int i = 0; i < n; i++) {
        char key[64];

        snprintf(key, sizeof(key), "pr/%d", i);
        ck_assert_msg(get_seeded(cc, key, len, old + (uint64_t)i, old + (uint64_t)i) == 0,
                      "%s was removed while pinned, and came back after the restart", key);
    }
    mc_close(cc);
    t_fc_finish(&fc);
}
END_TEST

/* mc-master started afresh on listen (no memo, no directory), the owner started again on
 * its disk (extra): returns once the restore has run, i.e. `ctl` (a key put before and
 * untouched) exists again through cc. */
static void fresh_master_and_owner(struct t_fc *fc, const char *listen, struct t_proc *a2,
                                   const char *const *extra, mc_client_t *cc, const char *ctl)
{
    t_fc_master_start(fc, NULL, listen, "master2");
    owner_restart(fc, a2, extra);
    wait_exist(cc, ctl, 200); /* C rejoined the new master meanwhile */
    ck_assert_int_eq(mc_exist(cc, ctl), 1);
}

/* n objects under each of the prefixes (seed seeds[k] + i for prefixes[k]/i) put through
 * ca, then 24 MiB more through A's 16 MiB: all of them on A's disk (asked through cc). */
static void put_to_disk(mc_client_t *ca, mc_client_t *cc, const char *a_sock,
                        const char *const *prefixes, const uint64_t *seeds, int n, size_t len)
{
    for (int k = 0; prefixes[k] != NULL; k++)
        batch_put_seeded(ca, prefixes[k], n, len, seeds[k]);
    put_range(ca, "fill", 0, 384, len);
    t_disk_settle(a_sock);
    for (int k = 0; prefixes[k] != NULL; k++)
        assert_on_disk(cc, prefixes[k], n);
}

/*
 * The same hole with mc-master restarted too (docs/disk.md, "Removed while still in use"):
 * its memo of removed versions dies with it, so only the owner's disk can keep the removal.
 * mc-master tells the owner at the remove (a retired DROP), the owner marks the records
 * removed and answers once the marks are durable; then the owner is killed -9, mc-master
 * killed and started afresh on its port, and the owner started on the same disk: the
 * removed keys are NOT_FOUND, the others read exact. Without the retired DROP nothing is
 * marked (removed_marks stays 0) and the fresh master publishes the removed keys again.
 */
START_TEST(test_disk_cluster_removed_while_pinned_survives_master_restart)
{
    struct t_fc fc;
    struct t_proc a, a2, c;
    char path[300], listen[64];
    const char *extra[] = {"--disk", path, "--disk-size", "128M", NULL};
    mc_client_t *ca, *cc;
    const size_t len = 64 * KIB;
    const int n = 8;
    const uint64_t old = 3000;
    uint64_t removed = 0;
    json_int_t marks = 0;

    t_disk_cluster_start(&fc, "disk_cluster_pinned_mrestart", TTL_MS, false, path,
                         sizeof(path), &a, extra, &c, NULL);
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", fc.master.port);
    ca = t_fc_conn(&a);
    cc = t_fc_conn(&c);
    put_to_disk(ca, cc, a.sock, (const char *const[]){"pm", "ctl", NULL},
                (const uint64_t[]){old, old + 100}, n, len);
    (void)pin_range(cc, "pm", n); /* held: the remove only retires the versions */
    ck_assert_int_eq(mc_remove_prefix(ca, "pm/", &removed), 0);
    ck_assert_uint_eq(removed, (uint64_t)n);
    /* the remove's answer waits for the owner's marks (mc-master holds it until the
     * retired DROPs are answered: test_disk_cluster_removed_survives_both_killed) */
    marks = t_disk_stat(a.sock, "removed_marks");
    fprintf(stderr, "removed_while_pinned_survives_master_restart: %lld marks before the kill\n",
            (long long)marks);
    t_proc_kill(&a);
    mc_close(ca);
    t_proc_kill(&fc.master);
    fresh_master_and_owner(&fc, listen, &a2, extra, cc, "ctl/7");
    for (int i = 0; i < n; i++) {
        char key[64];

        snprintf(key, sizeof(key), "pm/%d", i);
        ck_assert_msg(get_seeded(cc, key, len, old + (uint64_t)i, old + (uint64_t)i) == 0,
                      "%s was removed while pinned, and came back after the owner and "
                      "mc-master restarted (%lld marks before the kill)",
                      key, (long long)marks);
        snprintf(key, sizeof(key), "ctl/%d", i);
        ck_assert_int_eq(get_seeded(cc, key, len, old + 100 + (uint64_t)i,
                                    old + 100 + (uint64_t)i), 1);
    }
    ck_assert_int_ge(marks, n);
    mc_close(cc);
    t_fc_finish(&fc);
}
END_TEST

/*
 * The remove's answer waits for the owner's disk (docs/disk.md, "Frees and erases"): the
 * owner's erases and marks start 200 ms late; objects on its disk are removed, some pinned
 * by the client node (the remove retires them: the owner marks their records) and some not
 * (freed: tombstones). Each remove returns only after its owner's answer (>= 150 ms), and
 * right then the owner and mc-master are both killed -9: mc-master's memory of the removal
 * dies with it, so only the owner's disk can keep it. A fresh mc-master and the owner on the
 * same disk: every removed key is NOT_FOUND, the untouched ones read back exact. Before
 * mc-master held the answer, the removes returned in a few ms and the records came back.
 */
START_TEST(test_disk_cluster_removed_survives_both_killed)
{
    struct t_fc fc;
    struct t_proc a, a2, c;
    char path[300], listen[64];
    const char *slow[] = {"--disk", path, "--disk-size", "128M", "--test-fault",
                          "disk_delay_ms=200", NULL};
    const char *extra[] = {"--disk", path, "--disk-size", "128M", NULL};
    mc_client_t *ca, *cc;
    const size_t len = 64 * KIB;
    const int n = 4;
    const uint64_t old = 7000;
    uint64_t removed = 0, t0, took_pinned, took_free;

    t_disk_cluster_start(&fc, "disk_cluster_both_killed", TTL_MS, false, path, sizeof(path),
                         &a, slow, &c, NULL);
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", fc.master.port);
    ca = t_fc_conn(&a);
    cc = t_fc_conn(&c);
    put_to_disk(ca, cc, a.sock, (const char *const[]){"bp", "bf", "ctl", NULL},
                (const uint64_t[]){old, old + 100, old + 200}, n, len);
    (void)pin_range(cc, "bp", n); /* held: the remove only retires the versions */
    t0 = t_now_ms();
    ck_assert_int_eq(mc_remove_prefix(ca, "bp/", &removed), 0);
    took_pinned = t_now_ms() - t0;
    ck_assert_uint_eq(removed, (uint64_t)n);
    t0 = t_now_ms();
    ck_assert_int_eq(mc_remove_prefix(ca, "bf/", &removed), 0);
    took_free = t_now_ms() - t0;
    ck_assert_uint_eq(removed, (uint64_t)n);
    /* at once: no moment for anything to become durable after the answers */
    t_proc_kill(&fc.master);
    t_proc_kill(&a);
    fprintf(stderr, "removed_survives_both_killed: removes answered in %llu ms (pinned) and "
                    "%llu ms (free)\n",
            (unsigned long long)took_pinned, (unsigned long long)took_free);
    mc_close(ca);
    fresh_master_and_owner(&fc, listen, &a2, extra, cc, "ctl/3");
    for (int i = 0; i < n; i++) {
        char key[64];

        snprintf(key, sizeof(key), "bp/%d", i);
        ck_assert_msg(get_seeded(cc, key, len, old + (uint64_t)i, old + (uint64_t)i) == 0,
                      "%s was removed while pinned, and came back", key);
        snprintf(key, sizeof(key), "bf/%d", i);
        ck_assert_msg(get_seeded(cc, key, len, old + 100 + (uint64_t)i,
                                 old + 100 + (uint64_t)i) == 0,
                      "%s was removed, and came back", key);
        snprintf(key, sizeof(key), "ctl/%d", i);
        ck_assert_int_eq(get_seeded(cc, key, len, old + 200 + (uint64_t)i,
                                    old + 200 + (uint64_t)i), 1);
    }
    /* and it was so because the answers waited */
    ck_assert_msg(took_pinned >= 150 && took_free >= 150,
                  "a remove was answered before the owner's disk could hold it (%llu ms, "
                  "%llu ms; erases start 200 ms late)",
                  (unsigned long long)took_pinned, (unsigned long long)took_free);
    mc_close(cc);
    t_fc_finish(&fc);
}
END_TEST

/*
 * A put that replaces a version held on a disk waits for the owner's tombstone, as a
 * remove does: the owner's erases start 200 ms late; objects on its disk get new versions
 * (MC_PUT_UPSERT), which land in its DRAM only. Right when the puts return, the owner and
 * mc-master are both killed -9. A fresh mc-master and the owner on the same disk: each
 * replaced key is NOT_FOUND (its new version was in the dead owner's DRAM), never the old
 * bytes; the untouched keys read back exact. Before mc-master held a PUT_END's answer for
 * its disk DROPs, the puts returned in a few ms and the old versions came back.
 */
START_TEST(test_disk_cluster_replaced_survives_both_killed)
{
    struct t_fc fc;
    struct t_proc a, a2, c;
    char path[300], listen[64];
    const char *slow[] = {"--disk", path, "--disk-size", "128M", "--test-fault",
                          "disk_delay_ms=200", NULL};
    const char *extra[] = {"--disk", path, "--disk-size", "128M", NULL};
    mc_client_t *ca, *cc;
    const size_t len = 64 * KIB;
    const int n = 4;
    const uint64_t old = 9000, fresh = 9500;
    uint64_t t0, took;
    int back_old = 0;

    t_disk_cluster_start(&fc, "disk_cluster_replaced_killed", TTL_MS, false, path,
                         sizeof(path), &a, slow, &c, NULL);
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", fc.master.port);
    ca = t_fc_conn(&a);
    cc = t_fc_conn(&c);
    put_to_disk(ca, cc, a.sock, (const char *const[]){"rp", "ctl", NULL},
                (const uint64_t[]){old, old + 200}, n, len);
    t0 = t_now_ms();
    batch_put_seeded(ca, "rp", n, len, fresh); /* new versions: the old records freed */
    took = t_now_ms() - t0;
    /* at once: no moment for anything to become durable after the answer */
    t_proc_kill(&fc.master);
    t_proc_kill(&a);
    fprintf(stderr, "replaced_survives_both_killed: the replacing puts answered in %llu ms\n",
            (unsigned long long)took);
    mc_close(ca);
    fresh_master_and_owner(&fc, listen, &a2, extra, cc, "ctl/3");
    for (int i = 0; i < n; i++) {
        char key[64];
        int r;

        snprintf(key, sizeof(key), "rp/%d", i);
        r = get_seeded(cc, key, len, fresh + (uint64_t)i, old + (uint64_t)i);
        back_old += r == 2;
        ck_assert_msg(r != 2, "%s was replaced, and its old bytes came back", key);
        snprintf(key, sizeof(key), "ctl/%d", i);
        ck_assert_int_eq(get_seeded(cc, key, len, old + 200 + (uint64_t)i,
                                    old + 200 + (uint64_t)i), 1);
    }
    ck_assert_int_eq(back_old, 0);
    /* and it was so because the answer waited */
    ck_assert_msg(took >= 150,
                  "a replacing put was answered before the owner's disk could hold the "
                  "erase (%llu ms; erases start 200 ms late)",
                  (unsigned long long)took);
    mc_close(cc);
    t_fc_finish(&fc);
}
END_TEST

START_TEST(test_disk_cluster_restart_keeps_objects)
{
    struct t_fc fc;
    struct t_proc a, a2, c;
    char path[300];
    const char *extra[] = {"--disk", path, "--disk-size", "128M", NULL};
    mc_client_t *ca, *cc;
    const size_t len = 64 * KIB;
    const int n = 768; /* 48 MiB through a 16 MiB pool */
    json_int_t on_disk, hits;

    t_disk_cluster_start(&fc, "disk_cluster_restart", TTL_MS, false, path, sizeof(path), &a,
                         extra, &c, NULL);

    ca = t_fc_conn(&a);
    put_range(ca, "dc", 0, n, len);
    t_disk_settle(a.sock);
    on_disk = t_disk_stat(a.sock, "objects");
    ck_assert_int_gt(on_disk, n / 2);

    /* the client node holds nothing: every get is a remote read, most from A's disk */
    cc = t_fc_conn(&c);
    ck_assert_int_eq(get_range(cc, "dc", 0, n, len), n);
    /* objects also in memory are read from there: the others (most) from the disk */
    hits = t_disk_stat(a.sock, "disk_hits");
    ck_assert_int_gt(hits, n / 2);
    /* A read those records straight into its block-aligned send buffers (no staging copy):
     * every peer read's whole blocks count (A's own client only put) */
    ck_assert_int_ge(t_disk_stat(a.sock, "read_direct_bytes"), hits * (json_int_t)len);
    /* a batch whose items live on A's disk and in A's memory: one READ_BATCH, all exact */
    batch_get_mixed(cc, "dc", 0, n, len);
    ck_assert_int_gt(t_disk_stat(a.sock, "disk_hits"), hits);
    mc_close(ca);

    /* a crash, a verdict, and the same file again */
    t_proc_kill(&a);
    t_fc_sleep_ms(TTL_MS + 1500);
    owner_restart(&fc, &a2, extra);
    /* the tick may have offloaded more since `objects` was read: at least those */
    ck_assert_int_ge(t_disk_stat(a2.sock, "found_at_open"), on_disk);
    /* the restore seam: what the disk held is known again, exact, through the client node */
    {
        int back = 0;

        for (int tries = 0; tries < 100 && back < on_disk; tries++) {
            back = get_range(cc, "dc", 0, n, len);
            if (back < on_disk)
                t_fc_sleep_ms(100);
        }
        ck_assert_int_ge(back, (int)on_disk);
    }
    mc_close(cc);
    t_fc_finish(&fc);
}
END_TEST

/* The owner's disk full (the steady state of a cache): disk extents are reused for DRAM
 * victims of any age while the master evicts the disk's own records. A few early keys are
 * read again and again, so that old versions stay in DRAM and are offloaded late, into
 * extents freed from newer records (a DROP of a newer version, a COPY of an older one into
 * the same extent: review finding H1). Every key the master says is present reads back
 * exactly through the client node, never NOT_FOUND. */
START_TEST(test_disk_cluster_full_exist_agrees)
{
    struct t_fc fc;
    struct t_proc a, c;
    char path[300];
    const char *extra[] = {"--disk", path, "--disk-size", "32M", NULL};
    mc_client_t *ca, *cc;
    const size_t len = 64 * KIB;
    const int n = 1536, hot = 32; /* 96 MiB through 16 MiB of DRAM and 32 MiB of disk */
    uint8_t *buf = malloc(len), *want = malloc(len);
    int present = 0;

    ck_assert_ptr_nonnull(buf);
    ck_assert_ptr_nonnull(want);
    t_disk_cluster_start(&fc, "disk_cluster_full", TTL_MS, false, path, sizeof(path), &a,
                         extra, &c, NULL);
    ca = t_fc_conn(&a);
    cc = t_fc_conn(&c);
    put_range(ca, "df", 0, hot, len);
    for (int from = hot; from < n; from += 64) {
        put_range(ca, "df", from, from + 64 < n ? from + 64 : n, len);
        (void)get_range(ca, "df", 0, hot, len); /* hits: the old versions stay hot */
    }
    t_disk_settle(a.sock);
    for (int i = 0; i < n; i++) {
        char key[64];
        size_t got = 0;
        int ex, err;

        snprintf(key, sizeof(key), "df/%d", i);
        ex = mc_exist(cc, key);
        ck_assert_msg(ex == 0 || ex == 1, "exist %s: %s", key, mc_strerror(ex));
        if (ex == 0)
            continue;
        err = mc_get(cc, key, buf, len, &got);
        ck_assert_msg(err == 0, "get %s (the master lists it): %s", key, mc_strerror(err));
        ck_assert_uint_eq(got, len);
        t_fill(want, len, t_disk_seed(i, len));
        ck_assert_msg(memcmp(want, buf, len) == 0, "bytes of %s", key);
        present++;
    }
    /* 16 MiB of DRAM and 32 MiB of disk hold most of 48 MiB of records */
    ck_assert_int_gt(present, 256);
    ck_assert_int_gt(t_disk_stat(a.sock, "erases"), 0); /* the disk did evict its own */
    free(buf);
    free(want);
    mc_close(ca);
    mc_close(cc);
    t_fc_finish(&fc);
}
END_TEST

/*
 * Cluster: a removed or replaced object never comes back when its owner is killed -9 and
 * restarted on its disk (docs/disk.md, "Frees and erases"). The owner's disk is slow (each
 * erase starts 2 s late) and it is killed right after the removes and the replacing puts:
 * their DROPs cannot have been answered, since an owner answers a DROP of a disk record
 * only once its tombstone is durable, so mc-master still holds those versions
 * (dropmemo.h) and refuses their restore when the owner comes back; the owner erases them.
 *   rm/N  removed: NOT_FOUND;  rpa/N replaced, the new versions on disk too: the new bytes;
 *   rpb/N replaced just before the kill (new versions lost with the DRAM): never the old.
 */
START_TEST(test_disk_cluster_removed_stays_removed)
{
    struct t_fc fc;
    struct t_proc a, a2, c;
    char path[300];
    const char *slow[] = {"--disk", path, "--disk-size", "128M", "--test-fault",
                          "disk_delay_ms=2000", NULL};
    const char *extra[] = {"--disk", path, "--disk-size", "128M", NULL};
    mc_client_t *ca, *cc;
    const size_t len = 64 * KIB;
    const int n = 16;
    const uint64_t old = 1000, new = 5000;
    uint64_t removed = 0;

    t_disk_cluster_start(&fc, "disk_cluster_removed", TTL_MS, false, path, sizeof(path), &a,
                         slow, &c, NULL);
    ca = t_fc_conn(&a);
    cc = t_fc_conn(&c);
    batch_put_seeded(ca, "rm", n, len, old);
    batch_put_seeded(ca, "rpa", n, len, old);
    batch_put_seeded(ca, "rpb", n, len, old);
    put_range(ca, "fill", 0, 384, len);
    t_disk_settle(a.sock);
    assert_on_disk(cc, "rm", n);
    assert_on_disk(cc, "rpa", n);
    assert_on_disk(cc, "rpb", n);
    batch_put_seeded(ca, "rpa", n, len, new);
    put_range(ca, "fill2", 0, 384, len);
    t_disk_settle(a.sock);
    assert_on_disk(cc, "rpa", n);
    batch_put_seeded(ca, "rpb", n, len, new);
    ck_assert_int_eq(mc_remove_prefix(ca, "rm/", &removed), 0);
    ck_assert_uint_eq(removed, (uint64_t)n);
    /* a moment for mc-master's own calls to A to end (a call made to an agent in the
     * instant it dies can touch an endpoint UCX freed: the known gap of ucx.c), far
     * within the 2 s the DROPs' erases wait: they have not started when A dies */
    t_fc_sleep_ms(300);
    t_proc_kill(&a);
    mc_close(ca);
    t_fc_sleep_ms(TTL_MS + 1500);
    owner_restart(&fc, &a2, extra);
    /* the restore has run once rpa/N are back */
    wait_exist(cc, "rpa/15", 100);
    for (int i = 0; i < n; i++) {
        char key[64];

        snprintf(key, sizeof(key), "rm/%d", i);
        ck_assert_msg(get_seeded(cc, key, len, old + (uint64_t)i, old + (uint64_t)i) == 0,
                      "%s was removed, and came back after the restart", key);
        snprintf(key, sizeof(key), "rpa/%d", i);
        ck_assert_msg(get_seeded(cc, key, len, new + (uint64_t)i, old + (uint64_t)i) == 1,
                      "%s: not the bytes of its last put after the restart", key);
        snprintf(key, sizeof(key), "rpb/%d", i);
        ck_assert_msg(get_seeded(cc, key, len, new + (uint64_t)i, old + (uint64_t)i) != 2,
                      "%s: the bytes it had before it was replaced came back", key);
    }
    mc_close(cc);
    t_fc_finish(&fc);
}
END_TEST

/*
 * Peers' reads of a node's disk are bounded (disk_peer_reads): on a slow disk (each read
 * starts 300 ms late), a batch of 8 disk-resident objects read through a --dram 0 node
 * meets an owner that reads 2 at a time: the others wait in its queue (without a buffer)
 * and start as places free. Every item reads back exact, within the deadline; the owner
 * counted the reads it had to hold back and never had more than 2 under way.
 */
START_TEST(test_disk_cluster_peer_reads_capped)
{
    enum { N = 8 };
    struct t_fc fc;
    struct t_proc a, c;
    char path[300];
    const char *extra[] = {"--disk", path, "--disk-size", "128M", "--set", "disk_peer_reads=2",
                           "--test-fault", "disk_delay_ms=300", NULL};
    mc_client_t *ca, *cc;
    const size_t len = 64 * KIB;
    char keys[N][64];
    const char *kp[N];
    void *bufs[N];
    size_t caps[N], lens[N];
    int results[N], idx[N], rc, extra_keys = 0;

    t_disk_cluster_start(&fc, "disk_cluster_capped", TTL_MS, false, path, sizeof(path), &a,
                         extra, &c, NULL);
    ca = t_fc_conn(&a);
    cc = t_fc_conn(&c);
    put_range(ca, "cap", 0, 384, len); /* 24 MiB through 16 MiB: the first ones on disk */
    t_disk_settle(a.sock);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "cap/%d", i);
        /* fresh filler keys each time, across every i (a key put again is EXISTS) */
        until_disk_only(cc, ca, keys[i], "capx", &extra_keys, len, settle_fn, a.sock);
        idx[i] = i;
        kp[i] = keys[i];
        bufs[i] = malloc(len);
        ck_assert_ptr_nonnull(bufs[i]);
        caps[i] = len;
    }
    rc = mc_batch_get(cc, N, kp, bufs, caps, lens, results);
    check_batch(N, keys, idx, bufs, lens, results, len);
    ck_assert_int_eq(rc, N);
    ck_assert_int_gt(t_disk_stat(a.sock, "peer_reads_busy"), 0); /* the cap was met */
    ck_assert_int_eq(t_disk_stat(a.sock, "peer_reads_max"), 2); /* the cap, reached, kept */
    ck_assert_int_eq(t_disk_stat(a.sock, "peer_reads"), 0);
    mc_close(ca);
    mc_close(cc);
    t_fc_finish(&fc);
}
END_TEST

/*
 * A peer's read of a slow disk (each read starts 3 s late) is answered MC_ERR_TIMEOUT by
 * the owner after half its op_timeout_ms (1 s here), so the reader ends its get well
 * before the disk is done and well within its own 5 s deadline (with no other replica,
 * as MC_ERR_TIMEOUT). The read goes on at the owner, its buffer held; once the disk is
 * done the owner has nothing under way any more. Without the owner's deadline the get
 * waited the 3 s and succeeded.
 */
START_TEST(test_disk_cluster_slow_peer_read_times_out)
{
    struct t_fc fc;
    struct t_proc a, c;
    char path[300];
    const char *extra[] = {"--disk", path, "--disk-size", "128M", "--set", "op_timeout_ms=1000",
                           "--test-fault", "disk_delay_ms=3000", NULL};
    mc_client_t *ca, *cc;
    const size_t len = 64 * KIB;
    uint8_t *buf = malloc(len);
    struct timespec t0, t1;
    size_t got = 0;
    long ms;
    int err, filler = 0;

    ck_assert_ptr_nonnull(buf);
    t_disk_cluster_start(&fc, "disk_cluster_slowread", TTL_MS, false, path, sizeof(path), &a,
                         extra, &c, NULL);
    ca = t_fc_conn(&a);
    cc = t_fc_conn(&c);
    put_range(ca, "sr", 0, 384, len);
    t_disk_settle(a.sock);
    until_disk_only(cc, ca, "sr/0", "srx", &filler, len, settle_fn, a.sock);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    err = mc_get(cc, "sr/0", buf, len, &got);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    ck_assert_msg(err == MC_ERR_TIMEOUT, "get through a slow owner's disk: %s after %ld ms",
                  mc_strerror(err), ms);
    ck_assert_msg(ms < 2500, "answered after %ld ms: the owner waited for its disk", ms);
    {
        json_t *j = t_fc_stats(a.sock);

        ck_assert_int_ge(json_integer_value(json_object_get(j, "disk_read_timeouts")), 1);
        json_decref(j);
    }
    /* the read ends at the owner later, and lets go of its buffer then */
    t_fc_sleep_ms(3500);
    for (int i = 0; i < 100 && t_disk_stat(a.sock, "peer_reads") != 0; i++)
        t_fc_sleep_ms(50);
    ck_assert_int_eq(t_disk_stat(a.sock, "peer_reads"), 0);
    free(buf);
    mc_close(ca);
    mc_close(cc);
    t_fc_finish(&fc);
}
END_TEST

/*
 * Back-pressure in a cluster (docs/disk.md): an owner with 16 MiB of DRAM and a slow disk
 * (each offload write starts 100 ms late) under a writer that outruns it, the writer a
 * --dram 0 node without a disk. The DRAM fills with objects waiting for their copies; then
 * mc-master answers a PUT_START "no room yet" (offloads are under way) and the writer's
 * agent asks again within the put's deadline instead of failing it. Every plain put, never
 * retried by the test, succeeds; the writer counted puts that waited; every object reads
 * back exactly. Without it, puts failed at once with MC_ERR_NO_SPACE.
 */
START_TEST(test_disk_cluster_put_waits_for_offload)
{
    struct t_fc fc;
    struct t_proc a, c;
    char path[300];
    const char *slow[] = {"--disk", path, "--disk-size", "128M", "--test-fault",
                          "disk_write_delay_ms=100", NULL};
    mc_client_t *cc;
    const size_t len = 64 * KIB;
    const int n = 768; /* 48 MiB through 16 MiB of DRAM */
    uint8_t *buf = malloc(len);
    json_t *j;

    ck_assert_ptr_nonnull(buf);
    t_disk_cluster_start(&fc, "disk_cluster_put_waits", TTL_MS, false, path, sizeof(path), &a,
                         slow, &c, NULL);
    cc = t_fc_conn(&c);
    for (int i = 0; i < n; i++) {
        char key[64];
        int err;

        snprintf(key, sizeof(key), "pw/%d", i);
        t_fill(buf, len, t_disk_seed(i, len));
        err = mc_put(cc, key, buf, len, NULL); /* no retry: the agent waits */
        ck_assert_msg(err == 0, "put %s: %s", key, mc_strerror(err));
    }
    j = t_fc_stats(c.sock);
    ck_assert_int_gt(json_integer_value(json_object_get(j, "put_waits")), 0);
    json_decref(j);
    t_disk_settle(a.sock);
    ck_assert_int_eq(get_range(cc, "pw", 0, n, len), n);
    free(buf);
    mc_close(cc);
    t_fc_finish(&fc);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("disk_cluster");
    TCase *tc = tcase_create("cluster");

    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_disk_cluster_restart_keeps_objects);
    tcase_add_test(tc, test_disk_cluster_full_exist_agrees);
    tcase_add_test(tc, test_disk_cluster_removed_stays_removed);
    tcase_add_test(tc, test_disk_cluster_removed_while_pinned_stays_removed);
    tcase_add_test(tc, test_disk_cluster_removed_while_pinned_survives_master_restart);
    tcase_add_test(tc, test_disk_cluster_removed_survives_both_killed);
    tcase_add_test(tc, test_disk_cluster_replaced_survives_both_killed);
    tcase_add_test(tc, test_disk_cluster_peer_reads_capped);
    tcase_add_test(tc, test_disk_cluster_slow_peer_read_times_out);
    tcase_add_test(tc, test_disk_cluster_put_waits_for_offload);
    suite_add_tcase(s, tc);
    return t_fc_run(s, NULL);
}
