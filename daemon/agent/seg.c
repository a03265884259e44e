/*
 * Segments (seg.h): the DRAM kind.
 */
#include "daemon/agent/seg.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "common/clock.h"
#include "daemon/agent/holdidx.h"
#include "daemon/common/log.h"
#include "daemon/common/tenant_key.h"
#include "daemon/master/master.h"
#include "shm/memfd.h"

static uint8_t *dram_span(struct mc_seg *s, uint64_t off, uint64_t len)
{
    return off <= s->size && len <= s->size - off ? s->base + off : NULL;
}

static int dram_write(struct mc_seg *s, uint64_t off, const void *src, uint64_t len)
{
    uint8_t *p = dram_span(s, off, len);

    if (p == NULL)
        return MC_ERR_INVALID;
    memcpy(p, src, len);
    return 0;
}

static int dram_read(struct mc_seg *s, uint64_t off, void *dst, uint64_t len)
{
    uint8_t *p = dram_span(s, off, len);

    if (p == NULL)
        return MC_ERR_INVALID;
    memcpy(dst, p, len);
    return 0;
}

#define HOLDINGS_MAX 64

/* A DRAM segment: the keys of the last page of holdings are copied here, so that they stay
 * valid until the next call (seg.h) whatever the index does meanwhile (a DROP, a PUBLISH). */
struct dram_seg {
    struct mc_seg s;
    char keys[HOLDINGS_MAX][MC_DIR_KEY_MAX];
};

/* The index's entries, in offset order (holdidx.h). */
static int dram_holdings(struct mc_seg *s, uint64_t *cursor, struct mc_seg_holding *out, int max)
{
    struct dram_seg *d = (struct dram_seg *)s;
    struct mc_holdidx_entry e[HOLDINGS_MAX];
    int n, i;

    if (max > HOLDINGS_MAX)
        max = HOLDINGS_MAX;
    n = mc_holdidx_walk(s->held, cursor, e, max, mc_clock_ms());
    for (i = 0; i < n; i++) {
        memcpy(d->keys[i], e[i].key, e[i].key_len);
        out[i] = (struct mc_seg_holding){
            .key = d->keys[i], .key_len = e[i].key_len, .offset = e[i].offset,
            .alloc_len = e[i].alloc_len, .size = e[i].size, .version = e[i].version,
            .flags = e[i].flags, .ttl_ms = e[i].ttl_ms,
        };
    }
    return n;
}

/* The master refused that report: the entry goes, not a newer one that took the offset. */
static void dram_forget(struct mc_seg *s, uint64_t offset, uint64_t version)
{
    (void)mc_holdidx_drop(s->held, offset, version, mc_clock_ms());
}

static void dram_destroy(struct mc_seg *s)
{
    mc_holdidx_destroy(s->held);
    if (s->base != NULL)
        munmap(s->base, s->size);
    if (s->ro_fd >= 0)
        close(s->ro_fd);
    if (s->fd >= 0)
        close(s->fd);
    free(s);
}

static const struct mc_seg_ops dram_ops = {
    .span = dram_span,
    .write = dram_write,
    .read = dram_read,
    .destroy = dram_destroy,
    .holdings = dram_holdings,
    .forget = dram_forget,
};

/* Fault the whole segment in now: a first write to a shmem page costs an allocation, a
 * zeroing and a fault, which would otherwise land on the put that touches it. */
static void prefault(uint8_t *base, uint64_t size)
{
    struct timespec t0, t1;
    long page = sysconf(_SC_PAGESIZE);
    uint64_t off;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (madvise(base, size, MADV_POPULATE_WRITE) != 0) {
        /* kernels before 5.14: touch each page ourselves */
        for (off = 0; off < size; off += (uint64_t)page)
            ((volatile uint8_t *)base)[off] = 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    mc_info("prefaulted %" PRIu64 " bytes in %lld ms", size,
            (long long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
}

int mc_seg_dram_create(const char *name, uint64_t size, bool hugepages, bool want_prefault,
                       struct mc_seg **s_p)
{
    struct dram_seg *d = calloc(1, sizeof(*d));
    struct mc_seg *s = &d->s;
    int err;

    if (d == NULL)
        return MC_ERR_NOMEM;
    s->ops = &dram_ops;
    s->kind = MC_SEG_DRAM;
    s->size = size;
    s->fd = s->ro_fd = -1;
    err = mc_holdidx_create(&s->held);
    if (err == 0)
        err = mc_shm_memfd_create(name, size, hugepages, &s->fd, &s->huge);
    if (err == 0)
        err = mc_shm_memfd_seal_size(s->fd);
    if (err == 0)
        err = mc_shm_map(s->fd, size, true, (void **)&s->base);
    /* after our writable mapping exists, no one may map it writable again: clients get a
     * read-only fd, but could reopen it read-write through /proc/self/fd */
    if (err == 0)
        err = mc_shm_memfd_seal_future_write(s->fd);
    /* last: a client holding the read-only fd could otherwise add seals of its own */
    if (err == 0)
        err = mc_shm_memfd_seal_seals(s->fd);
    if (err == 0)
        err = mc_shm_fd_reopen_ro(s->fd, &s->ro_fd);
    if (err != 0) {
        dram_destroy(s);
        return err;
    }
    if (want_prefault)
        prefault(s->base, size);
    *s_p = s;
    return 0;
}

void mc_seg_destroy(struct mc_seg *s)
{
    if (s != NULL)
        s->ops->destroy(s);
}
