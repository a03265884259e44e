/* Helpers shared by the master's unit tests: a fake clock and one-line put/get. */
#ifndef MC_TEST_T_MASTER_H
#define MC_TEST_T_MASTER_H

#include <string.h>

#include <check.h>

#include <mc/mc_status.h>

#include "daemon/master/master.h"

static uint64_t t_now_ms = 1000000;

static inline uint64_t t_clock(void *ctx)
{
    (void)ctx;
    return t_now_ms;
}

static inline void t_advance(uint64_t ms)
{
    t_now_ms += ms;
}

static inline struct mc_master *t_master_cfg(const struct mc_master_config *cfg)
{
    struct mc_master *m = NULL;

    ck_assert_int_eq(mc_master_create(cfg, t_clock, NULL, &m), 0);
    return m;
}

static inline struct mc_master *t_master(void)
{
    struct mc_master_config cfg;

    mc_master_config_defaults(&cfg);
    return t_master_cfg(&cfg);
}

static inline uint32_t t_node(struct mc_master *m, const char *name, const char *domain)
{
    uint32_t id;

    ck_assert_int_eq(mc_master_node_register(m, name, domain, &id), 0);
    return id;
}

static inline uint32_t t_seg(struct mc_master *m, uint32_t node, uint64_t size)
{
    struct mc_master_seg_desc d = {.node = node, .kind = MC_SEG_DRAM, .base = 0x10000000,
                                   .size = size};
    uint32_t seg;

    ck_assert_int_eq(mc_master_segment_mount(m, &d, &seg), 0);
    return seg;
}

static inline int t_start(struct mc_master *m, const char *key, uint64_t size, uint32_t flags,
                   uint32_t writer, struct mc_master_put_grant *g)
{
    struct mc_master_put_req r = {.key = key, .key_len = strlen(key), .size = size,
                                  .replicas = 1, .flags = flags, .writer = writer,
                                  .preferred = MC_MASTER_NODE_NONE};

    return mc_master_put_start(m, &r, g);
}

static inline int t_end(struct mc_master *m, const char *key, uint64_t version, uint32_t writer)
{
    struct mc_master_ref ref = {.key = key, .key_len = strlen(key), .version = version,
                                .node = writer};

    return mc_master_put_end(m, &ref);
}

/* put_start + put_end; returns the version, asserts success */
static inline uint64_t t_put(struct mc_master *m, const char *key, uint64_t size, uint32_t flags,
                      uint32_t writer)
{
    struct mc_master_put_grant g;

    ck_assert_int_eq(t_start(m, key, size, flags, writer, &g), 0);
    ck_assert_int_eq(t_end(m, key, g.version, writer), 0);
    return g.version;
}

static inline int t_get(struct mc_master *m, const char *key, struct mc_master_get_result *res)
{
    return mc_master_get_replicas(m, key, strlen(key), res);
}

static inline size_t t_release(struct mc_master *m, const char *key,
                        const struct mc_master_get_result *res)
{
    struct mc_master_ref ref = {.key = key, .key_len = strlen(key),
                                .version = res->lease.version, .epoch = res->lease.epoch};

    return mc_master_lease_release(m, 1, &ref);
}

static inline int t_exist(struct mc_master *m, const char *key)
{
    return mc_master_exist(m, key, strlen(key));
}

static inline uint64_t t_used(struct mc_master *m)
{
    struct mc_master_stats st;

    mc_master_get_stats(m, &st);
    return st.used_bytes;
}

static inline struct mc_master_stats t_stats(struct mc_master *m)
{
    struct mc_master_stats st;

    mc_master_get_stats(m, &st);
    return st;
}

#endif /* MC_TEST_T_MASTER_H */
