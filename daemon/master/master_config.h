/*
 * The master service's knobs: one struct, filled from the config table in
 * master_config.c (defaults, JSON file, --set, MC_* environment), shared by every front
 * end of the service (the standalone agent, mc-master, the benchmark).
 */
#ifndef MC_MASTER_CONFIG_H
#define MC_MASTER_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/common/config.h" /* struct mc_config_entry */

struct mc_master_config {
    uint64_t lease_ttl_ms;      /* read lease lifetime (10 s) */
    uint64_t put_discard_ms;    /* a PROCESSING version older than this may be displaced (30 s) */
    uint64_t put_release_ms;    /* a displaced put's space is freed after this at the latest (600 s) */
    uint64_t node_ttl_ms;       /* a node silent this long is declared dead (10 s) */
    double high_watermark;      /* tick evicts a segment above this used fraction (0.95) */
    double low_watermark;       /* ... down to this one (0.90) */
    uint64_t soft_pin_ttl_ms;   /* a soft pin lapses after this (30 min) */
    double hard_pin_max_ratio;  /* hard-pinned bytes per segment <= ratio * size (0.5) */
    uint64_t evict_max_scan;    /* blocks one clock pass may examine (4096) */
    uint64_t sweep_max_scan;    /* directory records one tick's sweep may examine (65536) */
    uint64_t alloc_granule;     /* allocation alignment in bytes, power of two (64) */
    uint64_t directory_shards;  /* key-hash shards of the directory, power of two (64) */
    uint64_t drain_copies_max;  /* copies of a drain in flight at once (4) */
    uint64_t tick_ms;           /* how often front ends call the service tick (100 ms) */
    uint64_t pin_ttl_ms;        /* a client's pin (mc_prefix_pin) lapses after this (60 s) */
    uint64_t restore_window_ms; /* a segment mounted as restoring takes no new data until
                                   its owner reported it, or this long (30 s) */
    int disk_admission;         /* MC_MASTER_DISK_ADMIT_*: which DRAM victims go to disk */
    bool disk_promote;          /* a GET of a disk-only object copies it back to DRAM */
};

/* disk_admission: a DRAM victim with no other replica goes to its node's disk segment ... */
#define MC_MASTER_DISK_ADMIT_ALL 0        /* ... always */
#define MC_MASTER_DISK_ADMIT_SECOND_HIT 1 /* ... when it was read at least once, or pinned */

/* The table behind the struct (terminated by an entry whose name is NULL). */
extern const struct mc_config_entry mc_master_config_table[];

/* Fill `cfg` with the table's defaults. */
void mc_master_config_defaults(struct mc_master_config *cfg);

/*
 * Check a whole struct: every field within its table bounds (values set through the
 * config engine already are; a struct filled by code may not be), then the rules no
 * single entry can express: low_watermark <= high_watermark, alloc_granule and
 * directory_shards powers of two. Returns 0, or MC_ERR_INVALID with a message naming the
 * key(s) in `err` (which may be NULL when errlen is 0).
 */
int mc_master_config_validate(const struct mc_master_config *cfg, char *err, size_t errlen);

#endif /* MC_MASTER_CONFIG_H */
