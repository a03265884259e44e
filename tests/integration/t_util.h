/*
 * Integration-test helpers shared by the batch, async and arena tests: deterministic
 * fills, a client connected to a fresh agent per test (t_agent.h). Header-only.
 */
#ifndef MC_T_UTIL_H
#define MC_T_UTIL_H

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc.h>

#include "t_agent.h"

#define MIB (1024u * 1024u)

/* Deterministic bytes: a seeded xorshift, so any byte tells which object it belongs to. */
static inline void t_fill(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

    for (size_t i = 0; i < len; i++) {
        if (i % 8 == 0) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        buf[i] = (uint8_t)(x >> (8 * (i % 8)));
    }
}

static inline uint8_t *t_alloc_filled(size_t len, uint64_t seed)
{
    uint8_t *p = malloc(len);

    ck_assert_ptr_nonnull(p);
    t_fill(p, len, seed);
    return p;
}

/* Whether buf holds the fill of seed. */
static inline int t_check_fill(const uint8_t *buf, size_t len, uint64_t seed)
{
    uint8_t *want = t_alloc_filled(len, seed);
    int same = memcmp(want, buf, len) == 0;

    free(want);
    return same;
}

static inline mc_client_t *t_connect(struct t_agent *a)
{
    mc_client_t *c = NULL;
    int err = mc_connect(a->sock, &c);

    if (err != 0)
        t_agent_dump_log(a);
    ck_assert_msg(err == 0, "mc_connect: %s", mc_strerror(err));
    return c;
}

/* The end of a fixture: close the client, then stop the agent and insist it exited
 * cleanly on SIGTERM (status 0: no leak under LeakSanitizer, no crash) and logged no
 * error. */
static inline void t_client_and_agent_stop(struct t_agent *a, mc_client_t **c)
{
    int rc;

    mc_close(*c);
    *c = NULL;
    rc = t_agent_stop(a);
    ck_assert_msg(rc == 0, "mc-agent did not exit cleanly on SIGTERM (%d)", rc);
    /* the expected-log guard: nothing these tests do makes the agent log an error */
    ck_assert_msg(a->log_unexpected == 0, "mc-agent logged %d unexpected error line(s)",
                  a->log_unexpected);
}

#endif /* MC_T_UTIL_H */
