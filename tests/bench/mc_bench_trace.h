/*
 * mc-bench --trace: replay a prefix-cache trace (trace.h) through one or more clients of a
 * running agent, bytes verified, against the offline LRU of the same capacity.
 */
#ifndef MC_BENCH_TRACE_RUN_H
#define MC_BENCH_TRACE_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mcb_trace_cfg {
    const char *socket;
    const char *path;       /* the trace, "-" for stdin */
    size_t block_size;      /* bytes per block (64 KiB) */
    size_t batch;           /* items per mc_batch_get / mc_batch_put call (32) */
    uint64_t capacity;      /* LRU capacity in bytes; 0: the agent's pool capacity */
    bool registered;        /* buffers from mc_buf_alloc */
    unsigned clients;       /* client threads, each one request in flight (1) */
    const char *key_prefix; /* NULL: "mct/<pid>.<time>" so that runs do not share keys */
};

struct mc_client;

/* The pool's capacity in bytes, from the agent's statistics JSON; 0 if unknown. */
uint64_t mcb_pool_capacity(struct mc_client *c);

/* Returns the exit status: 0, 1 on errors or wrong bytes, 2 on usage errors. */
int mcb_trace_run(const struct mcb_trace_cfg *cfg);

#endif /* MC_BENCH_TRACE_RUN_H */
