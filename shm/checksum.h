/*
 * The object checksum (docs/protocol.md, "Ops"): xxh3-64 per MC_SHM_CHUNK chunk, then
 * xxh3-64 over the array of chunk values. Include this instead of <xxhash.h> wherever
 * objects are hashed: on x86-64 it routes XXH3_64bits and XXH3_64bits_update to
 * libxxhash's dispatcher, which picks the AVX2 / AVX-512 kernels at run time (Debian's
 * default entry points are SSE2-only and hash at about half the speed of a copy;
 * docs/performance.md). The values are the same on every path, so writers and readers need
 * not agree on a CPU.
 */
#ifndef MC_SHM_CHECKSUM_H
#define MC_SHM_CHECKSUM_H

#include <xxhash.h>

#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "shm/ring.h"

/* Whether the `size` bytes at buf match their checksum trailer (mc_shm_trailer_off: the
 * chunk values, then the object checksum over them); trailer need not be aligned. */
static inline bool mc_shm_verify(const uint8_t *buf, uint64_t size, const uint8_t *trailer)
{
    uint64_t nchunks = mc_shm_nchunks(size), off = 0, n, v;

    for (uint64_t i = 0; i < nchunks; i++, off += n) {
        n = size - off < MC_SHM_CHUNK ? size - off : MC_SHM_CHUNK;
        memcpy(&v, trailer + 8 * i, sizeof(v));
        if (XXH3_64bits(buf + off, (size_t)n) != v)
            return false;
    }
    memcpy(&v, trailer + 8 * nchunks, sizeof(v));
    return XXH3_64bits(trailer, (size_t)(8 * nchunks)) == v;
}

#endif /* MC_SHM_CHECKSUM_H */
