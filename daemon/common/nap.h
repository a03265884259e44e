/*
 * A background thread's sleep that a stop request cuts short: wait on cv (created with
 * CLOCK_MONOTONIC) under mu for ms, or until *stop is set and cv signalled. Returns *stop.
 * Shared by the master's election thread and the agent's leader follower.
 */
#ifndef MC_COMMON_NAP_H
#define MC_COMMON_NAP_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

static inline bool mc_nap(pthread_mutex_t *mu, pthread_cond_t *cv, const bool *stop, uint64_t ms)
{
    struct timespec ts;
    bool stopped;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(mu);
    while (!*stop && pthread_cond_timedwait(cv, mu, &ts) != ETIMEDOUT)
        ;
    stopped = *stop;
    pthread_mutex_unlock(mu);
    return stopped;
}

#endif /* MC_COMMON_NAP_H */
