/*
 * A seeded random stream for the hostile tests (test_hostile.c, test_hostile_peer.c): every
 * random choice of a run follows from its seed, so a printed seed replays the run.
 */
#ifndef MC_T_RNG_H
#define MC_T_RNG_H

#include <stddef.h>
#include <stdint.h>

/* xorshift64*: every random choice of a run follows from its seed */
struct t_rng {
    uint64_t s;
};

static inline uint64_t t_rnd(struct t_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * UINT64_C(0x2545F4914F6CDD1D);
}

static inline uint64_t t_below(struct t_rng *r, uint64_t n)
{
    return n == 0 ? 0 : t_rnd(r) % n;
}

static inline void t_rnd_bytes(struct t_rng *r, void *p, size_t n)
{
    uint8_t *b = p;
    uint64_t x = 0;

    for (size_t i = 0; i < n; i++) {
        if (i % 8 == 0)
            x = t_rnd(r);
        b[i] = (uint8_t)(x >> (8 * (i % 8)));
    }
}

static inline void t_rng_seed(struct t_rng *r, uint64_t seed)
{
    r->s = seed * UINT64_C(0x9E3779B97F4A7C15) + 0x1234567;
    if (r->s == 0)
        r->s = 1;
}

#endif /* MC_T_RNG_H */
