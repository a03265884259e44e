/*
 * Test clocks: the monotonic time in ms, and the pause between two polls of a condition
 * that has its own deadline (tests poll with deadlines; they never sleep a fixed time to
 * let something happen).
 */
#ifndef MC_T_TIME_H
#define MC_T_TIME_H

#include <stdint.h>
#include <time.h>

static inline uint64_t t_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void t_poll_pause(void)
{
    struct timespec ts = {0, 2 * 1000 * 1000};

    nanosleep(&ts, NULL);
}

#endif /* MC_T_TIME_H */
