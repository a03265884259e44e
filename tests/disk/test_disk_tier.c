/*
 * The disk tier through the real mc-agent (standalone; docs/disk.md): objects evicted from
 * DRAM go to the disk file and read back byte for byte, they survive a kill -9 and a
 * restart on the same file, a record damaged on disk reads as MC_ERR_CORRUPT (never bytes),
 * and a full disk evicts its own oldest records, losing nothing a get could still expect.
 *
 * The disk file lives in a directory of the test's own (TMPDIR, else /tmp), outside the
 * agent's, so that it outlives an agent; tmpfs (/dev/shm) where a test says so. Every test
 * removes what it made.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <mc/mc.h>

#include "shm/ring.h"
#include "tests/integration/t_agent.h"
#include "tests/integration/t_util.h"
#include "tests/disk/t_disk.h"

#define KIB 1024u

struct dfile {
    char dir[256];
    char path[300];
};

static void dfile_make(struct dfile *f, const char *base)
{
    const char *tmp = getenv("TMPDIR");

    if (base == NULL)
        base = tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp";
    snprintf(f->dir, sizeof(f->dir), "%s/mc-disk-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/disk.img", f->dir);
}

static void dfile_remove(struct dfile *f)
{
    unlink(f->path);
    rmdir(f->dir);
}

/* The agent's stats, parsed; the caller json_decref's. */
static json_t *stats(mc_client_t *c)
{
    static char buf[1 << 16];
    size_t n = 0;
    json_t *j;

    ck_assert_int_eq(mc_stats(c, buf, sizeof(buf) - 1, &n), 0);
    buf[n] = '\0';
    j = json_loads(buf, 0, NULL);
    ck_assert_ptr_nonnull(j);
    return j;
}

static long long disk_stat(json_t *st, const char *name)
{
    json_t *d = json_object_get(st, "disk");

    ck_assert_ptr_nonnull(d);
    return json_integer_value(json_object_get(d, name));
}

/* Waits until the disk has nothing in flight (offloads of the last puts). */
static void disk_settle(mc_client_t *c);
static void settle_fn(void *c)
{
    disk_settle(c);
}

static void disk_settle(mc_client_t *c)
{
    for (int i = 0; i < 500; i++) {
        json_t *st = stats(c);
        long long p = disk_stat(st, "pending");

        json_decref(st);
        if (p == 0)
            return;
        usleep(10000);
    }
}

static void start(struct t_agent *a, const char *dram, const struct dfile *f, const char *size,
                  const char *const *more)
{
    const char *extra[24] = {"--disk", f->path, "--disk-size", size};
    int n = 4;

    for (int i = 0; more != NULL && more[i] != NULL && n < 23; i++)
        extra[n++] = more[i];
    extra[n] = NULL;
    t_agent_start(a, dram, extra);
}

/* kill -9 of the agent at once (nothing it has not made durable survives), then a fresh
 * agent on the same file (16 MiB of DRAM, 128 MiB of disk) and a client of it. */
static mc_client_t *kill_restart(struct t_agent *a, const struct dfile *f, mc_client_t *c)
{
    t_agent_kill(a);
    mc_close(c);
    t_agent_rmdir(a);
    start(a, "16M", f, "128M", NULL);
    return t_connect(a);
}

/* 4x the DRAM in distinct objects: every one reads back exactly; the stats show the
 * offloads and the reads served from disk. */
static void fill_4x(const char *base, const char *const *more)
{
    struct t_agent a;
    struct dfile f;
    mc_client_t *c;
    json_t *st;
    const size_t len = 64 * KIB;
    const int n = 1024; /* 64 MiB into 16 MiB of DRAM */

    dfile_make(&f, base);
    start(&a, "16M", &f, "160M", more);
    c = t_connect(&a);
    put_range(c, "fill", 0, n, len);
    disk_settle(c);
    ck_assert_int_eq(get_range(c, "fill", 0, n, len), n);
    st = stats(c);
    ck_assert_int_gt(disk_stat(st, "offloads"), n / 2);
    ck_assert_int_gt(disk_stat(st, "disk_hits"), n / 2);
    ck_assert_int_gt(disk_stat(st, "objects"), n / 2);
    ck_assert_int_gt(disk_stat(st, "write_bytes"), (long long)(n / 2) * (long long)len);
    ck_assert_int_eq(disk_stat(st, "read_corrupt"), 0);
    /* the hits land in the landing segment straight from the device; with io_uring through
     * its fixed buffers (registered at start), with the threads engine there are none */
    ck_assert_int_gt(disk_stat(st, "read_direct_bytes"), (long long)(n / 2) * (long long)len);
    if (strcmp(json_string_value(json_object_get(json_object_get(st, "disk"), "engine")),
               "io_uring") == 0)
        ck_assert_int_ge(disk_stat(st, "read_direct_fixed"), disk_stat(st, "disk_hits"));
    else
        ck_assert_int_eq(disk_stat(st, "read_direct_fixed"), 0);
    json_decref(st);
    /* exist and prefix_match count the objects on disk */
    {
        const char *keys[3] = {"fill/0", "fill/1", "fill/2"};

        mc_obj_info_t info;

        ck_assert_int_eq(mc_exist(c, "fill/3"), 1);
        ck_assert_int_eq(mc_prefix_match(c, 3, keys), 3);
        /* stat tells each replica's tier: the oldest object is on disk */
        ck_assert_int_eq(mc_stat(c, "fill/0", &info), 0);
        ck_assert_uint_ge(MC_OBJ_DISK_REPLICAS(info.flags), 1);
        ck_assert_uint_le(MC_OBJ_DISK_REPLICAS(info.flags), info.replicas);
        ck_assert_uint_eq(info.flags & 0xFFFFu, 0);
    }
    t_client_and_agent_stop(&a, &c);
    dfile_remove(&f);
}

START_TEST(test_disk_fill_4x_reads_back)
{
    fill_4x(NULL, NULL);
}
END_TEST

/* The same on tmpfs with the threads engine (pread/pwrite workers), as where io_uring is
 * denied or O_DIRECT refused. */
START_TEST(test_disk_fill_4x_tmpfs_threads)
{
    const char *more[] = {"--set", "disk_engine=threads", NULL};

    fill_4x("/dev/shm", more);
}
END_TEST

/* kill -9, then a restart on the same file: every object whose put completed and that was
 * on disk reads back exactly; none reads back wrong. */
START_TEST(test_disk_restart_keeps_objects)
{
    struct t_agent a;
    struct dfile f;
    mc_client_t *c;
    json_t *st;
    const size_t len = 64 * KIB;
    const int n = 768; /* 48 MiB into 16 MiB of DRAM */
    long long on_disk;
    int back;

    dfile_make(&f, NULL);
    start(&a, "16M", &f, "128M", NULL);
    c = t_connect(&a);
    put_range(c, "rs", 0, n, len);
    disk_settle(c);
    st = stats(c);
    on_disk = disk_stat(st, "objects");
    json_decref(st);
    ck_assert_int_gt(on_disk, n / 2);
    /* removed objects must not come back: their records are erased (the oldest keys are on
     * disk only by now) */
    {
        long long erased;

        st = stats(c);
        erased = disk_stat(st, "erases");
        json_decref(st);
        for (int i = 0; i < 16; i++) {
            char key[64];

            snprintf(key, sizeof(key), "rs/%d", i);
            ck_assert_int_eq(mc_remove(c, key), 0);
        }
        for (int i = 0; i < 300; i++) {
            st = stats(c);
            if (disk_stat(st, "erases") >= erased + 16) {
                json_decref(st);
                break;
            }
            json_decref(st);
            usleep(10000);
        }
        st = stats(c);
        ck_assert_int_ge(disk_stat(st, "erases"), erased + 16);
        on_disk = disk_stat(st, "objects");
        json_decref(st);
    }
    mc_close(c);
    t_agent_kill(&a); /* no goodbye: a crash */
    t_agent_rmdir(&a);

    start(&a, "16M", &f, "128M", NULL);
    c = t_connect(&a);
    st = stats(c);
    /* the tick may have offloaded more since `objects` was read: at least those */
    ck_assert_int_ge(disk_stat(st, "found_at_open"), on_disk);
    json_decref(st);
    /* the removed ones stay removed */
    ck_assert_int_eq(get_range(c, "rs", 0, 16, len), 0);
    /* the DRAM objects died with the process; what was on disk is all there, exact */
    back = get_range(c, "rs", 0, n, len);
    ck_assert_int_ge(back, (int)on_disk);
    /* and new puts still go where there is room */
    put_range(c, "rs2", 0, 64, len);
    ck_assert_int_eq(get_range(c, "rs2", 0, 64, len), 64);
    t_client_and_agent_stop(&a, &c);
    dfile_remove(&f);
}
END_TEST

/*
 * A removed or replaced object never comes back after a kill -9 (review of issue 12: the
 * answer of a remove, or of a put replacing an object, waits until the old record's
 * tombstone is durable). The disk is slow (each erase starts 2 s late: --test-fault
 * disk_delay_ms), and the agent is killed right after the answers: without the wait, the
 * erases had not happened and the restart's scan found the records again.
 *   rm/N  on disk, removed: NOT_FOUND after the restart;
 *   rpa/N on disk, replaced, the new versions pushed to disk too: the new bytes;
 *   rpb/N on disk, replaced just before the kill (the new versions in DRAM only, lost
 *         with it): NOT_FOUND, never the old bytes.
 */
START_TEST(test_disk_removed_stays_removed_after_kill)
{
    const char *slow[] = {"--test-fault", "disk_delay_ms=2000", NULL};
    struct t_agent a;
    struct dfile f;
    mc_client_t *c;
    const size_t len = 64 * KIB;
    const int n = 16;
    const uint64_t old = 1000, new = 5000;
    uint64_t removed = 0;

    dfile_make(&f, NULL);
    start(&a, "16M", &f, "128M", slow);
    c = t_connect(&a);
    batch_put_seeded(c, "rm", n, len, old);
    batch_put_seeded(c, "rpa", n, len, old);
    batch_put_seeded(c, "rpb", n, len, old);
    put_range(c, "fill", 0, 384, len); /* 24 MiB more through 16 MiB: the above go to disk */
    disk_settle(c);
    assert_on_disk(c, "rm", n);
    assert_on_disk(c, "rpa", n);
    assert_on_disk(c, "rpb", n);

    batch_put_seeded(c, "rpa", n, len, new);
    put_range(c, "fill2", 0, 384, len); /* the new versions of rpa/N go to disk */
    disk_settle(c);
    assert_on_disk(c, "rpa", n);

    batch_put_seeded(c, "rpb", n, len, new);
    ck_assert_int_eq(mc_remove_prefix(c, "rm/", &removed), 0);
    ck_assert_uint_eq(removed, (uint64_t)n);
    c = kill_restart(&a, &f, c); /* at once: no time for an erase that was not waited for */
    for (int i = 0; i < n; i++) {
        char key[64];

        snprintf(key, sizeof(key), "rm/%d", i);
        ck_assert_msg(get_seeded(c, key, len, old + (uint64_t)i, old + (uint64_t)i) == 0,
                      "%s was removed, and came back after the restart", key);
        snprintf(key, sizeof(key), "rpa/%d", i);
        ck_assert_msg(get_seeded(c, key, len, new + (uint64_t)i, old + (uint64_t)i) == 1,
                      "%s: not the bytes of its last put after the restart", key);
        snprintf(key, sizeof(key), "rpb/%d", i);
        ck_assert_msg(get_seeded(c, key, len, new + (uint64_t)i, old + (uint64_t)i) != 2,
                      "%s: the bytes it had before it was replaced came back", key);
    }
    t_client_and_agent_stop(&a, &c);
    dfile_remove(&f);
}
END_TEST

/*
 * Hole D1 of docs/disk.md: a remove (or a replacing put) of a disk object that a reader
 * holds (a pin here; a lease is the same to the master) only unpublishes the version: its
 * space is freed and erased when the pin ends, after the answer. A kill -9 before then must
 * not bring the object back: its record is marked removed before the answer (the marks
 * start 2 s late: --test-fault disk_delay_ms). Without the mark the restart's scan found
 * the records and the embedded master published them again.
 *   pr/N  on disk, pinned, removed: NOT_FOUND after the restart;
 *   pq/N  on disk, pinned, replaced (the new versions pushed to disk too): the new bytes.
 */
START_TEST(test_disk_removed_while_pinned_stays_removed_after_kill)
{
    const char *slow[] = {"--test-fault", "disk_delay_ms=2000", NULL};
    struct t_agent a;
    struct dfile f;
    mc_client_t *c;
    const size_t len = 64 * KIB;
    const int n = 8;
    const uint64_t old = 1000, new = 5000;
    json_t *st;

    dfile_make(&f, NULL);
    start(&a, "16M", &f, "128M", slow);
    c = t_connect(&a);
    batch_put_seeded(c, "pr", n, len, old);
    batch_put_seeded(c, "pq", n, len, old);
    put_range(c, "fill", 0, 384, len); /* 24 MiB more through 16 MiB: the above go to disk */
    disk_settle(c);
    assert_on_disk(c, "pr", n);
    assert_on_disk(c, "pq", n);
    (void)pin_range(c, "pr", n); /* held until the kill */
    (void)pin_range(c, "pq", n);

    batch_put_seeded(c, "pq", n, len, new);
    put_range(c, "fill2", 0, 384, len); /* the new versions of pq/N go to disk */
    disk_settle(c);
    assert_on_disk(c, "pq", n);
    for (int i = 0; i < n; i++) {
        char key[64];

        snprintf(key, sizeof(key), "pr/%d", i);
        ck_assert_int_eq(mc_remove(c, key), 0);
    }
    /* the answers waited for the marks: each pinned disk record (both sets) is marked */
    st = stats(c);
    ck_assert_int_ge(disk_stat(st, "removed_marks"), 2 * n);
    json_decref(st);
    c = kill_restart(&a, &f, c); /* the pins still held: nothing was freed, nothing erased */
    for (int i = 0; i < n; i++) {
        char key[64];

        snprintf(key, sizeof(key), "pr/%d", i);
        ck_assert_msg(get_seeded(c, key, len, old + (uint64_t)i, old + (uint64_t)i) == 0,
                      "%s was removed while pinned, and came back after the restart", key);
        snprintf(key, sizeof(key), "pq/%d", i);
        ck_assert_msg(get_seeded(c, key, len, new + (uint64_t)i, old + (uint64_t)i) == 1,
                      "%s: not the bytes of its last put after the restart", key);
    }
    t_client_and_agent_stop(&a, &c);
    dfile_remove(&f);
}
END_TEST

/*
 * Hole D5 of docs/disk.md: an object removed while its offload copy is still being written
 * (each write starts 1.5 s late: --test-fault disk_write_delay_ms). The copy's record is
 * committed after the remove; the erase of it the master then asks for starts 3 s late
 * (disk_delay_ms). The agent is killed 2.5 s after the remove's answer: without the fix
 * the answer came at once, the record was committed and not yet erased, and the restart
 * published the removed objects again. With it the answer waits until each such record,
 * once written, is marked removed (here about 4 s: the client's deadline is raised). Low
 * watermarks make the tick copy the oldest objects (rc/N first) while the DRAM has room,
 * so no put waits for those copies.
 */
START_TEST(test_disk_removed_while_offloading_stays_removed_after_kill)
{
    const char *slow[] = {"--test-fault", "disk_write_delay_ms=1500", "--test-fault",
                          "disk_delay_ms=3000", "--set", "high_watermark=0.5", "--set",
                          "low_watermark=0.3", NULL};
    struct t_agent a;
    struct dfile f;
    mc_client_t *c;
    const size_t len = 64 * KIB;
    const int n = 16;
    const uint64_t old = 1000;
    uint64_t removed = 0;
    json_t *st;

    dfile_make(&f, NULL);
    start(&a, "16M", &f, "128M", slow);
    setenv("MC_OP_TIMEOUT_MS", "20000", 1); /* the remove waits for a write and a mark */
    c = t_connect(&a);
    unsetenv("MC_OP_TIMEOUT_MS");
    batch_put_seeded(c, "rc", n, len, old);
    put_range(c, "fill", 0, 160, len); /* 11 MiB of 16: above the high watermark */
    usleep(300 * 1000); /* the tick has started the copies of the oldest; none written */
    ck_assert_int_eq(mc_remove_prefix(c, "rc/", &removed), 0);
    ck_assert_uint_eq(removed, (uint64_t)n);
    st = stats(c);
    ck_assert_int_ge(disk_stat(st, "removed_marks"), 1); /* copies were under way */
    json_decref(st);
    usleep(2500 * 1000); /* past any write, before the erases of the copies' records */
    c = kill_restart(&a, &f, c);
    for (int i = 0; i < n; i++) {
        char key[64];

        snprintf(key, sizeof(key), "rc/%d", i);
        ck_assert_msg(get_seeded(c, key, len, old + (uint64_t)i, old + (uint64_t)i) == 0,
                      "%s was removed while its copy was written, and came back", key);
    }
    t_client_and_agent_stop(&a, &c);
    dfile_remove(&f);
}
END_TEST

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/*
 * A slow disk (each read starts 3 s late) and a get with a 1 s deadline (the client's):
 * the get of a disk-resident object is answered MC_ERR_TIMEOUT at its deadline, not when
 * the disk is done; the read goes on, its landing block held until it ends (then freed:
 * the agent has nothing pending, and serves on). libmc ends the caller's call at its
 * deadline by itself; what fails without the agent's deadline is its own answer
 * (read_timeouts stays 0: the GET waited the 3 s).
 */
START_TEST(test_disk_slow_read_times_out)
{
    const char *slow[] = {"--set", "op_timeout_ms=1000", "--test-fault", "disk_delay_ms=3000",
                          NULL};
    struct t_agent a;
    struct dfile f;
    mc_client_t *c, *c1;
    const size_t len = 64 * KIB;
    uint8_t *buf = malloc(len);
    size_t got = 0;
    uint64_t t0, ms;
    json_t *st;
    int err, filler = 0;

    ck_assert_ptr_nonnull(buf);
    dfile_make(&f, NULL);
    start(&a, "16M", &f, "128M", slow);
    c = t_connect(&a);
    put_range(c, "slow", 0, 384, len);
    disk_settle(c);
    until_disk_only(c, c, "slow/0", "slowx", &filler, len, settle_fn, c);
    /* a client whose ops have 1 s (its deadline travels with each op) */
    setenv("MC_OP_TIMEOUT_MS", "1000", 1);
    c1 = t_connect(&a);
    unsetenv("MC_OP_TIMEOUT_MS");
    t0 = now_ms();
    err = mc_get(c1, "slow/0", buf, len, &got);
    ms = now_ms() - t0;
    mc_close(c1);
    ck_assert_msg(err == MC_ERR_TIMEOUT, "get of a record on a slow disk: %s after %llu ms",
                  mc_strerror(err), (unsigned long long)ms);
    ck_assert_msg(ms < 2500, "answered after %llu ms, past its deadline",
                  (unsigned long long)ms);
    /* libmc ends the call at its deadline on its own; the agent answers the GET too, on
     * its next tick, and lets go of everything but the read's landing block */
    for (int i = 0; i < 100; i++) {
        long long t;

        st = stats(c);
        t = disk_stat(st, "read_timeouts");
        json_decref(st);
        if (t >= 1)
            break;
        usleep(20000);
    }
    st = stats(c);
    ck_assert_int_ge(disk_stat(st, "read_timeouts"), 1);
    json_decref(st);
    /* the read ends later; the agent lets go of it then and goes on serving */
    usleep(3500 * 1000);
    disk_settle(c);
    ck_assert_int_eq(get_range(c, "slow", 383, 384, len), 1); /* in DRAM still */
    free(buf);
    t_client_and_agent_stop(&a, &c);
    dfile_remove(&f);
}
END_TEST

/*
 * A slow disk (each offload write starts 100 ms late) under a writer that outruns it: the
 * DRAM fills with objects waiting for their copies, and a put then waits (within its
 * deadline) for room instead of failing at once with MC_ERR_NO_SPACE. Every plain put,
 * never retried, succeeds; the stats show puts that waited; every object reads back.
 * Without the wait, puts failed with MC_ERR_NO_SPACE.
 */
/*
 * A device that fails writes (docs/disk.md, "A tombstone that cannot be written"): the next
 * 20 tries of tombstones fail with an I/O error (--test-fault disk_erase_fail=20). 16 disk
 * records removed: each first try fails, 4 second tries fail too, the rest are tried again
 * 100 ms and 200 ms later. The remove is answered only once all 16 tombstones are written
 * (at least 300 ms: two back-offs), and a kill -9 at once after it brings none back. Before,
 * a failed erase was logged and the answer went out at once: the restart's scan found the
 * records and the removed objects came back.
 */
START_TEST(test_disk_erase_failure_retried)
{
    const char *failing[] = {"--test-fault", "disk_erase_fail=20", NULL};
    struct t_agent a;
    struct dfile f;
    mc_client_t *c;
    json_t *st;
    const size_t len = 64 * KIB;
    const int n = 16;
    const uint64_t seed = 3000;
    uint64_t removed = 0, t0, took;

    dfile_make(&f, NULL);
    start(&a, "16M", &f, "128M", failing);
    c = t_connect(&a);
    batch_put_seeded(c, "ef", n, len, seed);
    put_range(c, "fill", 0, 384, len); /* 24 MiB more through 16 MiB: the above go to disk */
    disk_settle(c);
    assert_on_disk(c, "ef", n);
    st = stats(c);
    ck_assert_int_eq(disk_stat(st, "erase_errors"), 0);
    json_decref(st);

    t0 = now_ms();
    ck_assert_int_eq(mc_remove_prefix(c, "ef/", &removed), 0);
    took = now_ms() - t0;
    ck_assert_uint_eq(removed, (uint64_t)n);
    st = stats(c);
    ck_assert_int_eq(disk_stat(st, "erase_errors"), 20);
    ck_assert_int_ge(disk_stat(st, "erases"), n);
    json_decref(st);
    ck_assert_msg(took >= 300, "the remove was answered after %llu ms, before the failed "
                  "tombstones were written again", (unsigned long long)took);
    c = kill_restart(&a, &f, c); /* at once: nothing was left to write */
    for (int i = 0; i < n; i++) {
        char key[64];

        snprintf(key, sizeof(key), "ef/%d", i);
        ck_assert_msg(get_seeded(c, key, len, seed + (uint64_t)i, seed + (uint64_t)i) == 0,
                      "%s was removed, and came back after the restart", key);
    }
    t_client_and_agent_stop(&a, &c);
    dfile_remove(&f);
}
END_TEST

START_TEST(test_disk_put_waits_for_offload)
{
    const char *slow[] = {"--test-fault", "disk_write_delay_ms=100", NULL};
    struct t_agent a;
    struct dfile f;
    mc_client_t *c;
    const size_t len = 64 * KIB;
    const int n = 768; /* 48 MiB through 16 MiB of DRAM */
    uint8_t *buf = malloc(len);
    json_t *st;

    ck_assert_ptr_nonnull(buf);
    dfile_make(&f, NULL);
    start(&a, "16M", &f, "128M", slow);
    c = t_connect(&a);
    for (int i = 0; i < n; i++) {
        char key[64];
        int err;

        snprintf(key, sizeof(key), "pw/%d", i);
        t_fill(buf, len, t_disk_seed(i, len));
        err = mc_put(c, key, buf, len, NULL);
        ck_assert_msg(err == 0, "put %s: %s", key, mc_strerror(err));
    }
    st = stats(c);
    ck_assert_int_gt(disk_stat(st, "put_waits"), 0);
    json_decref(st);
    disk_settle(c);
    ck_assert_int_eq(get_range(c, "pw", 0, n, len), n);
    free(buf);
    t_client_and_agent_stop(&a, &c);
    dfile_remove(&f);
}
END_TEST

/* Flip one payload byte of one record in the file: the get of that object says
 * MC_ERR_CORRUPT, never bytes; its neighbours read back exactly. Every record the restart
 * found reads back exact or CORRUPT; the objects that were only in DRAM at the stop (at most
 * what 16 MiB holds) are NOT_FOUND, so at least n minus that many records are found. */
START_TEST(test_disk_torn_record_dropped)
{
    struct t_agent a;
    struct dfile f;
    mc_client_t *c;
    const size_t len = 64 * KIB;
    const int n = 512;
    uint8_t *buf = malloc(len);
    int fd, corrupt = 0, ok = 0, flipped = 0;
    const int in_dram = (int)((16u << 20) / mc_shm_alloc_len(len, true));
    long long found;
    struct stat sb;

    ck_assert_ptr_nonnull(buf);
    dfile_make(&f, NULL);
    start(&a, "16M", &f, "128M", NULL);
    c = t_connect(&a);
    put_range(c, "torn", 0, n, len);
    disk_settle(c);
    mc_close(c);
    ck_assert_int_eq(t_agent_stop(&a), 0);

    /* flip a byte in the payload of every record header we find at block 1 past a header:
     * records start at block-aligned offsets with the header's magic */
    fd = open(f.path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fstat(fd, &sb), 0);
    {
        uint8_t blk[4096];

        for (off_t off = 4096; off + 8192 <= sb.st_size && flipped < 8; off += 4096) {
            ck_assert_int_eq(pread(fd, blk, sizeof(blk), off), (ssize_t)sizeof(blk));
            if (memcmp(blk, "MCDISKRC", 8) != 0)
                continue;
            ck_assert_int_eq(pread(fd, blk, 1, off + 4096 + 100), 1);
            blk[0] ^= 0x5a;
            ck_assert_int_eq(pwrite(fd, blk, 1, off + 4096 + 100), 1);
            flipped++;
            off += 4096 + len - 4096; /* past this record's payload */
        }
        ck_assert_int_gt(flipped, 0);
    }
    fsync(fd);
    close(fd);

    start(&a, "16M", &f, "128M", NULL);
    c = t_connect(&a);
    {
        json_t *st = stats(c);

        found = disk_stat(st, "found_at_open");
        json_decref(st);
    }
    ck_assert_msg(found >= n - in_dram, "%lld records found at open, of %d objects (at most "
                  "%d only in DRAM)", found, n, in_dram);
    for (int i = 0; i < n; i++) {
        char key[64];
        size_t got = 0;
        int err;

        snprintf(key, sizeof(key), "torn/%d", i);
        err = mc_get(c, key, buf, len, &got);
        if (err == MC_ERR_CORRUPT) {
            corrupt++;
            continue;
        }
        if (err == MC_ERR_NOT_FOUND)
            continue;
        ck_assert_msg(err == 0, "get %s: %s", key, mc_strerror(err));
        ck_assert_uint_eq(got, len);
        ck_assert_msg(t_check_fill(buf, len, t_disk_seed(i, len)), "wrong bytes of %s",
                      key);
        ok++;
    }
    ck_assert_int_gt(corrupt, 0);
    ck_assert_int_le(corrupt, flipped);
    ck_assert_int_eq(ok + corrupt, found); /* every record found: exact, or CORRUPT */
    {
        json_t *st = stats(c);

        ck_assert_int_eq(disk_stat(st, "read_corrupt"), corrupt);
        json_decref(st);
    }
    free(buf);
    t_client_and_agent_stop(&a, &c);
    dfile_remove(&f);
}
END_TEST

/* A disk smaller than what is put: the disk evicts its own oldest records (its clock, its
 * watermarks); every get answers either the exact bytes or MC_ERR_NOT_FOUND, the newest
 * objects are all there, and the disk's used bytes stay within its capacity. */
START_TEST(test_disk_full_evicts_oldest)
{
    struct t_agent a;
    struct dfile f;
    mc_client_t *c;
    json_t *st;
    const size_t len = 64 * KIB;
    const int n = 1536; /* 96 MiB into 16 MiB of DRAM + 32 MiB of disk */
    int present;

    dfile_make(&f, NULL);
    start(&a, "16M", &f, "32M", NULL);
    c = t_connect(&a);
    put_range(c, "full", 0, n, len);
    disk_settle(c);
    present = get_range(c, "full", 0, n, len);
    ck_assert_int_gt(present, 256); /* more than DRAM alone holds */
    ck_assert_int_lt(present, n);
    ck_assert_int_eq(get_range(c, "full", n - 64, n, len), 64); /* the newest are there */
    st = stats(c);
    ck_assert_int_le(disk_stat(st, "used"), disk_stat(st, "capacity"));
    ck_assert_int_gt(disk_stat(st, "erases"), 0);
    json_decref(st);
    t_client_and_agent_stop(&a, &c);
    dfile_remove(&f);
}
END_TEST

/* A file that is not a disk file is never overwritten: the agent refuses to start. */
START_TEST(test_disk_refuses_foreign_file)
{
    struct dfile f;
    const char *bin = getenv("MC_AGENT_BIN");
    char cmd[1024];
    FILE *fp;
    int st;

    if (bin == NULL)
        return;
    dfile_make(&f, NULL);
    fp = fopen(f.path, "w");
    ck_assert_ptr_nonnull(fp);
    fputs("precious data\n", fp);
    fclose(fp);
    snprintf(cmd, sizeof(cmd),
             "%s --standalone --socket %s/a.sock --dram 16M --disk %s >/dev/null 2>&1", bin,
             f.dir, f.path);
    st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    fp = fopen(f.path, "r");
    ck_assert_ptr_nonnull(fp);
    {
        char line[64] = {0};

        ck_assert_ptr_nonnull(fgets(line, sizeof(line), fp));
        ck_assert_str_eq(line, "precious data\n");
    }
    fclose(fp);
    unlink(f.path);
    snprintf(cmd, sizeof(cmd), "%s/a.sock", f.dir);
    unlink(cmd);
    dfile_remove(&f);
}
END_TEST

/* Two agents on one disk file would overwrite each other's records: the second one is
 * refused (flock) and the first goes on serving. */
START_TEST(test_disk_one_agent_per_file)
{
    struct t_agent a;
    struct dfile f;
    mc_client_t *c;
    const char *bin = getenv("MC_AGENT_BIN");
    char cmd[1024];
    int st;

    dfile_make(&f, NULL);
    start(&a, "16M", &f, "32M", NULL);
    snprintf(cmd, sizeof(cmd),
             "%s --standalone --socket %s/b.sock --dram 16M --disk %s >/dev/null 2>&1", bin,
             f.dir, f.path);
    st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    c = t_connect(&a);
    put_range(c, "one", 0, 8, 4096);
    ck_assert_int_eq(get_range(c, "one", 0, 8, 4096), 8);
    t_client_and_agent_stop(&a, &c);
    snprintf(cmd, sizeof(cmd), "%s/b.sock", f.dir);
    unlink(cmd);
    dfile_remove(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("disk_tier");
    TCase *tc = tcase_create("standalone");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_disk_fill_4x_reads_back);
    tcase_add_test(tc, test_disk_fill_4x_tmpfs_threads);
    tcase_add_test(tc, test_disk_restart_keeps_objects);
    tcase_add_test(tc, test_disk_removed_stays_removed_after_kill);
    tcase_add_test(tc, test_disk_removed_while_pinned_stays_removed_after_kill);
    tcase_add_test(tc, test_disk_removed_while_offloading_stays_removed_after_kill);
    tcase_add_test(tc, test_disk_slow_read_times_out);
    tcase_add_test(tc, test_disk_put_waits_for_offload);
    tcase_add_test(tc, test_disk_erase_failure_retried);
    tcase_add_test(tc, test_disk_torn_record_dropped);
    tcase_add_test(tc, test_disk_full_evicts_oldest);
    tcase_add_test(tc, test_disk_refuses_foreign_file);
    tcase_add_test(tc, test_disk_one_agent_per_file);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
