/*
 * The monotonic clock every component times with: deadlines, ages, rates. Internal
 * header; never installed. CLOCK_MONOTONIC stops during a suspend; the one place that
 * must count a suspend (a master's lease, daemon/mcmaster/elect.c) reads CLOCK_BOOTTIME
 * itself.
 */
#ifndef MC_COMMON_CLOCK_H
#define MC_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t mc_clock_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t mc_clock_ms(void)
{
    return mc_clock_ns() / 1000000u;
}

#endif /* MC_COMMON_CLOCK_H */
