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

#endif /* MC_SHM_CHECKSUM_H */
