/*
 * The agent's one fault-injection seam, for tests: hold an answer or a publication back
 * for a while, so that a test can kill or stop a process inside the window; or lose the
 * first requests of a kind that come in (never answered, as if lost on the wire). It is armed
 * only by mc-agent's test-only --test-fault flag (not a configuration setting); unarmed,
 * nothing is deferred and nothing is allocated.
 */
#ifndef MC_AGENT_FAULT_H
#define MC_AGENT_FAULT_H

#include <stdbool.h>
#include <stdint.h>

enum mc_fault_kind {
    MC_FAULT_GET_ANSWER, /* a GET's answer (its bytes are readable already) */
    MC_FAULT_PUT_END,    /* a put's publication (its bytes are in place already) */
    MC_FAULT_PROMOTE,    /* a promotion's end (its record read into the DRAM block already) */
    MC_FAULT_DISK,       /* the start of each disk read and erase of the tier (a slow
                          * disk): it waits that long before it goes to the store, its
                          * memory held all along */
    MC_FAULT_DISK_WRITE, /* the same for each offload write */
    MC_FAULT__KINDS,
};

/* Requests an owner receives that can be lost, or disk writes that can fail (mc_fault_lose). */
enum mc_fault_lose_kind {
    MC_FAULT_LOSE_PUBLISH, /* PUBLISH from a writer */
    MC_FAULT_LOSE_DROP,    /* DROP from the master */
    MC_FAULT_NOMEM_PUBLISH, /* PUBLISH answered MC_ERR_NOMEM whole (not lost: refused) */
    MC_FAULT_FAIL_DISK_ERASE, /* a try of a disk tombstone or removed mark: MC_ERR_IO */
    MC_FAULT_LOSE__KINDS,
};

struct mc_fault_item;

struct mc_fault {
    uint64_t delay_ms[MC_FAULT__KINDS];
    uint32_t lose[MC_FAULT_LOSE__KINDS]; /* how many more of each kind to lose */
    uint32_t publish_lose_masters; /* every PUBLISH is lost until this many more changes
                                      of master were followed (mc_fault_master_changed) */
    struct mc_fault_item *pending;
};

typedef void (*mc_fault_fn)(void *ctx);

/* Arms one fault: "get_delay_ms=MS", "put_end_delay_ms=MS", "promote_delay_ms=MS",
 * "disk_delay_ms=MS" or "disk_write_delay_ms=MS" (MS at most 60000), or
 * "publish_lose=N", "drop_lose=N", "publish_nomem=N" or "disk_erase_fail=N" (N at most
 * 60000), or
 * "publish_lose_masters=N" (every PUBLISH lost until N changes of master were followed, N at
 * most 60000). 0, or MC_ERR_INVALID. */
int mc_fault_parse(struct mc_fault *f, const char *spec);

/* Whether this request of `kind` is to be lost (counted down): the caller drops it
 * unanswered. */
bool mc_fault_lose(struct mc_fault *f, enum mc_fault_lose_kind kind);
/* The agent follows another master now (publish_lose_masters counts down). */
void mc_fault_master_changed(struct mc_fault *f);

/* run(ctx) later, once the delay of `kind` passed; drop(ctx) instead if the seam is
 * cleaned up first (drop may be NULL). Returns false (run nothing, keep nothing) when that
 * kind has no delay or no memory is left: the caller goes on at once. */
bool mc_fault_defer(struct mc_fault *f, enum mc_fault_kind kind, mc_fault_fn run,
                    mc_fault_fn drop, void *ctx);
/* Runs what is due; returns whether anything is still pending (keep the loop polling). */
bool mc_fault_run_due(struct mc_fault *f, uint64_t now_ms);
bool mc_fault_pending(const struct mc_fault *f);
/* drop() for everything pending. */
void mc_fault_cleanup(struct mc_fault *f);

#endif /* MC_AGENT_FAULT_H */
