/*
 * Prefix-cache traces for mc-bench --trace: loading (Mooncake's format, one JSON object a
 * line: {"timestamp","input_length","output_length","hash_ids":[...]}), the block contents
 * derived from a hash id, and the offline LRU the replay is measured against.
 *
 * Replay semantics (the same for the store and the LRU): a request's blocks are its
 * hash_ids in order; its hits are the leading blocks present (prefix match); every block of
 * the request is then present and most recently used (hits are read, misses are put). The
 * hit ratio is hits / blocks over the whole trace.
 *
 * Lines are outside input: a malformed one is reported as "NAME:LINE: why" and skipped,
 * never trusted. Pure logic, no libmc: the unit tests drive it directly.
 */
#ifndef MC_BENCH_TRACE_H
#define MC_BENCH_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MCT_MAX_BLOCKS 65536      /* hash ids per request; more is a malformed line */
#define MCT_MAX_LINE   (4u << 20) /* bytes per line; longer is a malformed line */

struct mct_req {
    double timestamp;      /* as given (ms in Mooncake's traces); 0 if absent */
    uint64_t input_length; /* tokens, as given; 0 if absent */
    uint64_t output_length;
    uint32_t nblocks;
    uint64_t *ids; /* nblocks hash ids, in order */
    uint32_t *idx; /* nblocks dense indices (0 .. ndistinct - 1), filled by the loader */
};

struct mct_trace {
    struct mct_req *reqs;
    size_t nreqs;
    uint64_t nblocks;   /* sum over requests */
    uint32_t ndistinct; /* distinct hash ids */
    uint64_t malformed; /* lines skipped */
};

/*
 * Parse one line (no newline needed; it need not be NUL-terminated) into *r, allocating
 * r->ids (r->idx stays NULL). Returns 0, or -1 with a reason in why. A blank line is
 * 1 (nothing, not an error).
 */
int mct_parse_line(const char *line, size_t len, struct mct_req *r, char *why, size_t whylen);

/*
 * Read every line of f. Malformed lines are reported on errs (when not NULL) as
 * "name:LINE: why" and counted in t->malformed. Returns 0, or -1 on a read error or out
 * of memory (reported on errs). The trace may hold no request.
 */
int mct_trace_load(FILE *f, const char *name, FILE *errs, struct mct_trace *t);
void mct_trace_free(struct mct_trace *t);

/*
 * The offline LRU of capacity_blocks blocks over the trace, with the replay's semantics.
 * Returns the hits, or UINT64_MAX when out of memory.
 */
uint64_t mct_lru_hits(const struct mct_trace *t, uint64_t capacity_blocks);

/* A block's content: a function of its hash id and offset only (len any size). */
void mct_fill(void *buf, size_t len, uint64_t hash_id);
/* Whether buf holds mct_fill(.., hash_id)'s bytes. */
bool mct_check(const void *buf, size_t len, uint64_t hash_id);

#endif /* MC_BENCH_TRACE_H */
