/*
 * The master service's config table: every knob of struct mc_master_config, its default,
 * bounds and doc (docs/config.md is generated from here), plus the cross-field checks.
 *
 * It holds only the service's knobs, shared by every front end that hosts the service.
 * Daemon-level knobs (log_level, listen addresses, the config file itself) belong to the
 * daemon main, which includes this table in its own with MC_CONFIG_INCLUDE next to
 * mc_config_daemon_table.
 */
#include "daemon/master/master_config.h"

#include <assert.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

#include "daemon/common/config.h"
#include "mc/mc_status.h"

#define MS_PER_S   1000.0
#define MS_PER_H   (3600.0 * MS_PER_S)
#define MS_PER_DAY (24.0 * MS_PER_H)

/* in the order of MC_MASTER_DISK_ADMIT_* */
static const char *const disk_admission_names[] = {"all", "second_hit", NULL};

#define FIELD(f) offsetof(struct mc_master_config, f)

const struct mc_config_entry mc_master_config_table[] = {
    {
        .name = "lease_ttl_ms",
        .type = MC_CFG_MS,
        .def = "10000",
        .min = 1,
        .max = MS_PER_DAY,
        .offset = FIELD(lease_ttl_ms),
        .doc = "Lifetime of a read lease: the replica a get returned stays allocated until "
               "the reader's transfer is final or this long after the get, whichever comes "
               "first. Longer leases hold space longer when readers die.",
    },
    {
        .name = "put_discard_ms",
        .type = MC_CFG_MS,
        .def = "30000",
        .min = 1,
        .max = MS_PER_DAY,
        .offset = FIELD(put_discard_ms),
        .doc = "A put still PROCESSING after this long may be displaced by a new PutStart of "
               "the same key; the old put's PutEnd then fails with MC_ERR_CANCELED.",
    },
    {
        .name = "put_release_ms",
        .type = MC_CFG_MS,
        .def = "600000",
        .min = 1,
        .max = 7 * MS_PER_DAY,
        .offset = FIELD(put_release_ms),
        .doc = "The space of a displaced put is freed after this at the latest, when neither "
               "the writer's agent reports its transfers final nor the owner fences the "
               "allocation.",
    },
    {
        .name = "node_ttl_ms",
        .type = MC_CFG_MS,
        .def = "10000",
        .min = 1,
        .max = MS_PER_DAY,
        .offset = FIELD(node_ttl_ms),
        .doc = "A node silent this long is declared dead: its PROCESSING puts are revoked "
               "and its replicas dropped.",
    },
    {
        .name = "high_watermark",
        .type = MC_CFG_DOUBLE,
        .def = "0.95",
        .min = 0,
        .max = 1,
        .offset = FIELD(high_watermark),
        .doc = "Used fraction of a segment above which the tick starts evicting from it.",
    },
    {
        .name = "low_watermark",
        .type = MC_CFG_DOUBLE,
        .def = "0.90",
        .min = 0,
        .max = 1,
        .offset = FIELD(low_watermark),
        .doc = "Used fraction the tick evicts a segment down to once it crossed "
               "high_watermark; at most high_watermark.",
    },
    {
        .name = "soft_pin_ttl_ms",
        .type = MC_CFG_MS,
        .def = "1800000",
        .min = 1,
        .max = 30 * MS_PER_DAY,
        .offset = FIELD(soft_pin_ttl_ms),
        .doc = "A soft pin lapses this long after it was set. Soft-pinned objects are "
               "evicted only when nothing unpinned is left.",
    },
    {
        .name = "pin_ttl_ms",
        .type = MC_CFG_MS,
        .def = "60000",
        .min = 1,
        .max = MS_PER_DAY,
        .offset = FIELD(pin_ttl_ms),
        .doc = "A client's pin (mc_prefix_pin) lapses this long after it was taken, if the "
               "client neither released it nor closed its connection: a stuck engine cannot "
               "hold memory forever. A pinned object is neither evicted nor freed.",
    },
    {
        .name = "restore_window_ms",
        .type = MC_CFG_MS,
        .def = "30000",
        .min = 1,
        .max = MS_PER_DAY,
        .offset = FIELD(restore_window_ms),
        .doc = "A segment its agent mounts while it still holds objects the master must learn "
               "again (a master restarted or newly elected, an agent back with its disk) takes "
               "no new data until the agent has reported all of it, or this long: a put never "
               "lands on an object that is only not reported yet (docs/master.md, Restores).",
    },
    {
        .name = "disk_admission",
        .type = MC_CFG_ENUM,
        .def = "all",
        .choices = disk_admission_names,
        .offset = FIELD(disk_admission),
        .doc = "Which objects evicted from DRAM are written to their node's disk segment "
               "(an agent's --disk) instead of dropped: all, or second_hit (only objects read "
               "at least once since they were put, the endurance rule inference engines use; "
               "pinned objects always). docs/disk.md.",
    },
    {
        .name = "disk_promote",
        .type = MC_CFG_BOOL,
        .def = "false",
        .offset = FIELD(disk_promote),
        .doc = "A GET of an object whose replicas are all on disk also copies it back into "
               "DRAM on the reader's node, or the disk's own node when the reader has no DRAM "
               "room, or another node when neither has DRAM (evicting there as a put would), "
               "so later GETs read memory; the disk "
               "record stays. Off by default: a promotion takes DRAM a "
               "one-off read never uses again. docs/disk.md.",
    },
    {
        .name = "hard_pin_max_ratio",
        .type = MC_CFG_DOUBLE,
        .def = "0.5",
        .min = 0,
        .max = 1,
        .offset = FIELD(hard_pin_max_ratio),
        .doc = "Hard-pinned bytes in a segment are capped at this fraction of its size, so "
               "no client can make the pool unwritable; 0 refuses every hard pin.",
    },
    {
        .name = "evict_max_scan",
        .type = MC_CFG_U64,
        .def = "4096",
        .min = 1,
        .max = 16777216,
        .offset = FIELD(evict_max_scan),
        .doc = "Blocks one clock pass may examine: bounds the work a tick spends trimming a "
               "segment, and how long a PutStart honours reference bits before it takes the "
               "oldest blocks it saw regardless of them (a put never fails while room can be "
               "made; docs/master.md).",
    },
    {
        .name = "sweep_max_scan",
        .type = MC_CFG_U64,
        .def = "65536",
        .min = 1,
        .max = 268435456,
        .offset = FIELD(sweep_max_scan),
        .doc = "Directory records one tick's sweep (expired TTLs, lapsed pins, stale puts) "
               "may examine: bounds the work of one tick.",
    },
    {
        .name = "alloc_granule",
        .type = MC_CFG_SIZE,
        .def = "64",
        .min = 8,
        .max = 1048576,
        .offset = FIELD(alloc_granule),
        .doc = "Allocation alignment in bytes, a power of two: every offset and length in a "
               "segment is a multiple of it, and a segment holds at most granule * "
               "(2^32 - 1) bytes.",
    },
    {
        .name = "directory_shards",
        .type = MC_CFG_U64,
        .def = "64",
        .min = 1,
        .max = 4096,
        .offset = FIELD(directory_shards),
        .doc = "Key-hash shards of the object directory, a power of two; more shards mean "
               "less contention between the service's threads.",
    },
    {
        .name = "drain_copies_max",
        .type = MC_CFG_U64,
        .def = "4",
        .min = 1,
        .max = 64,
        .offset = FIELD(drain_copies_max),
        .doc = "While a node drains (mcctl drain): how many objects are copied off it at "
               "once. Each copy is one remote write of the object; a few keep the drain "
               "from crowding out normal traffic.",
    },
    {
        .name = "tick_ms",
        .type = MC_CFG_MS,
        .def = "100",
        .min = 1,
        .max = 60 * MS_PER_S,
        .offset = FIELD(tick_ms),
        .doc = "How often the front ends call the service tick (eviction down to the "
               "watermarks, sweeps, node liveness).",
    },
    {.name = NULL},
};

void mc_master_config_defaults(struct mc_master_config *cfg)
{
    int rc = mc_config_set_defaults(mc_master_config_table, cfg);

    /* the table has no strings (no allocation) and its defaults are unit-tested */
    assert(rc == 0);
    (void)rc;
}

static int mc_master_config_check_pow2(const char *key, uint64_t v, char *err, size_t errlen)
{
    if (v != 0 && (v & (v - 1)) == 0)
        return 0;
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s: %" PRIu64 " is not a power of two", key, v);
    return MC_ERR_INVALID;
}

int mc_master_config_validate(const struct mc_master_config *cfg, char *err, size_t errlen)
{
    int rc;

    rc = mc_config_check_values(mc_master_config_table, cfg, err, errlen);
    if (rc != 0)
        return rc;
    if (cfg->low_watermark > cfg->high_watermark) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "low_watermark (%g) must not exceed high_watermark (%g)",
                     cfg->low_watermark, cfg->high_watermark);
        return MC_ERR_INVALID;
    }
    rc = mc_master_config_check_pow2("alloc_granule", cfg->alloc_granule, err, errlen);
    if (rc != 0)
        return rc;
    return mc_master_config_check_pow2("directory_shards", cfg->directory_shards, err, errlen);
}
