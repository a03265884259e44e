/*
 * A memory segment of the agent: the seam where memory tiers plug in. A segment has a kind
 * (MC_SEG_DRAM today; the disk tier and GPU memory come as other kinds) and an ops table
 * that says how bytes get in and out and what a local reader maps. The put, the GET and the
 * owner's side of transfers reach a segment's bytes only through mc_seg_span (a writable
 * window the agent fills or reads in place), so a kind whose bytes are not addressable
 * (disk) answers NULL there and moves bytes with read/write instead. Space inside a
 * segment is allocated by the master (alloc.c), whatever the kind.
 *
 * One thread, like the agent.
 */
#ifndef MC_AGENT_SEG_H
#define MC_AGENT_SEG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mc_seg;
struct mc_holdidx;

/* A complete object a segment holds, as the master is told of it again (report.h). */
struct mc_seg_holding {
    const char *key;      /* the stored (tenant-tagged) key; valid until the next call */
    size_t key_len;
    uint64_t offset;      /* its extent in the segment, granule-aligned */
    uint64_t alloc_len;
    uint64_t size;        /* the object's */
    uint64_t version;
    uint32_t flags;       /* MC_MASTER_PUT_PIN_* | MC_MASTER_PUT_NO_CHECKSUM as stored */
    uint64_t ttl_ms;      /* TTL left, 0: none */
};

struct mc_seg_ops {
    /* [off, off + len) in place, or NULL (out of range, or not addressable) */
    uint8_t *(*span)(struct mc_seg *s, uint64_t off, uint64_t len);
    /* bytes in and out by copy: 0, MC_ERR_INVALID (out of range) or MC_ERR_IO */
    int (*write)(struct mc_seg *s, uint64_t off, const void *src, uint64_t len);
    int (*read)(struct mc_seg *s, uint64_t off, void *dst, uint64_t len);
    void (*destroy)(struct mc_seg *s);
    /* Optional (NULL: the kind holds nothing the master must be told of again). What the
     * segment holds, for a master that lost it: up to max holdings from *cursor on (0: the
     * start), in ascending offset order; returns how many (0: done) and advances *cursor. */
    int (*holdings)(struct mc_seg *s, uint64_t *cursor, struct mc_seg_holding *out, int max);
    /* Optional: the master refused the holding at `offset` of `version` (it knows better):
     * drop it -- that one only: another object may hold the offset by now, and stays. */
    void (*forget)(struct mc_seg *s, uint64_t offset, uint64_t version);
};

struct mc_seg {
    const struct mc_seg_ops *ops;
    uint32_t kind;  /* MC_SEG_DRAM, ... (master.h) */
    uint64_t size;
    int ro_fd;      /* what local readers map read-only (-1: they cannot map it) */
    bool huge;      /* backed by huge pages */
    uint8_t *base;  /* addressable kinds: the agent's writable mapping */
    int fd;
    /* DRAM: the complete objects it holds (holdidx.h), kept by the agent from what the
     * writers publish and the master frees; NULL for kinds that keep their own */
    struct mc_holdidx *held;
};

/*
 * A DRAM segment: a memfd sealed for size, future writes and seals, mapped writable here
 * once; clients get a read-only fd. hugepages: try huge pages (huge says whether it got
 * them); prefault: allocate every page now. Errors: MC_ERR_NOMEM, MC_ERR_IO.
 */
int mc_seg_dram_create(const char *name, uint64_t size, bool hugepages, bool prefault,
                       struct mc_seg **s_p);
/* Accepts NULL. */
void mc_seg_destroy(struct mc_seg *s);

/* Whether s has anything to report (holdings): a segment that does is mounted RESTORING. */
static inline bool mc_seg_holds_any(struct mc_seg *s)
{
    struct mc_seg_holding h;
    uint64_t cursor = 0;

    return s != NULL && s->ops->holdings != NULL && s->ops->holdings(s, &cursor, &h, 1) > 0;
}

static inline uint8_t *mc_seg_span(struct mc_seg *s, uint64_t off, uint64_t len)
{
    return s != NULL ? s->ops->span(s, off, len) : NULL;
}

#endif /* MC_AGENT_SEG_H */
