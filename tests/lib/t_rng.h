/*
 * The tests' one seeded random stream (splitmix64): every random choice of a run follows
 * from its seed, and t_seed prints the seed, so a failing run is replayed by setting the
 * environment variable it names.
 */
#ifndef MC_T_RNG_H
#define MC_T_RNG_H

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct t_rng {
    uint64_t s;
};

static inline uint64_t t_splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline void t_rng_seed(struct t_rng *r, uint64_t seed)
{
    r->s = seed;
}

static inline uint64_t t_rng_next(struct t_rng *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    return t_splitmix(r->s);
}

/* Uniform in [0, n); 0 when n is 0. */
static inline uint64_t t_rng_below(struct t_rng *r, uint64_t n)
{
    return n == 0 ? 0 : t_rng_next(r) % n;
}

static inline void t_rng_bytes(struct t_rng *r, void *p, size_t n)
{
    uint8_t *b = p;
    uint64_t x = 0;

    for (size_t i = 0; i < n; i++) {
        if (i % 8 == 0)
            x = t_rng_next(r);
        b[i] = (uint8_t)(x >> (8 * (i % 8)));
    }
}

/* Log-uniform in [lo, hi]: as many sizes in 1-2 KiB as in 32-64 MiB. */
static inline size_t t_rng_log_size(struct t_rng *r, size_t lo, size_t hi)
{
    double u = (double)(t_rng_next(r) >> 11) / (double)(1ull << 53);
    double v = exp(log((double)lo) + u * (log((double)hi) - log((double)lo)));
    size_t n = (size_t)v;

    return n < lo ? lo : n > hi ? hi : n;
}

/* The run's seed: $env when set, else from the clock and pid; printed either way (with
 * the name of the test) so a failure can be replayed. */
static inline uint64_t t_seed(const char *test, const char *env)
{
    const char *s = getenv(env);
    struct timespec ts;
    uint64_t seed;

    if (s != NULL && s[0] != '\0') {
        seed = strtoull(s, NULL, 0);
    } else {
        clock_gettime(CLOCK_REALTIME, &ts);
        seed =
            t_splitmix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)getpid());
    }
    fprintf(stderr, "%s: seed %" PRIu64 " (%s=%" PRIu64 " replays it)\n", test, seed, env, seed);
    return seed;
}

#endif /* MC_T_RNG_H */
