/*
 * dropmemo.h: an open-addressing table of versions with a count of blocks each (linear
 * probing, deletion by backward shift: no tombstones) sized for twice the bound, and a ring
 * of the adds in the order they came, whose oldest counts its version down when the bound
 * is reached (a version already gone is simply not found then).
 */
#include "daemon/mcmaster/dropmemo.h"

#include <stdlib.h>

#include <mc/mc_status.h>

#include "daemon/master/master.h"

#define SLOTS (2u * DROPMEMO_MAX) /* a power of two */

struct mc_dropmemo {
    uint64_t slot[SLOTS];      /* 0: empty */
    uint32_t cnt[SLOTS];       /* the blocks of that version whose DROP is unanswered */
    uint64_t ring[DROPMEMO_MAX];
    uint32_t head, nring;      /* the oldest, how many in the ring */
    uint64_t n, forgotten;
};

static uint32_t home(uint64_t v)
{
    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdull;
    v ^= v >> 33;
    return (uint32_t)v & (SLOTS - 1);
}

int mc_dropmemo_create(struct mc_dropmemo **m_p)
{
    struct mc_dropmemo *m = calloc(1, sizeof(*m));

    if (m == NULL)
        return MC_ERR_NOMEM;
    *m_p = m;
    return 0;
}

void mc_dropmemo_destroy(struct mc_dropmemo *m)
{
    free(m);
}

/* The slot of v, or SLOTS. */
static uint32_t find(const struct mc_dropmemo *m, uint64_t v)
{
    for (uint32_t i = home(v); v != 0 && m->slot[i] != 0; i = (i + 1) & (SLOTS - 1)) {
        if (m->slot[i] == v)
            return i;
    }
    return SLOTS;
}

bool mc_dropmemo_has(const struct mc_dropmemo *m, uint64_t v)
{
    return find(m, v) != SLOTS;
}

static void slot_remove(struct mc_dropmemo *m, uint32_t i)
{
    uint32_t j;

    m->slot[i] = 0;
    m->cnt[i] = 0;
    m->n--;
    /* backward shift: an entry after the hole that may sit in it moves there */
    for (j = (i + 1) & (SLOTS - 1); m->slot[j] != 0; j = (j + 1) & (SLOTS - 1)) {
        uint32_t h = home(m->slot[j]);

        /* it stays when its home lies cyclically in (i, j] */
        if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
            continue;
        m->slot[i] = m->slot[j];
        m->cnt[i] = m->cnt[j];
        m->slot[j] = 0;
        m->cnt[j] = 0;
        i = j;
    }
}

/* One block of v answered (or forgotten): v leaves when none is left. */
static bool count_down(struct mc_dropmemo *m, uint64_t v)
{
    uint32_t i = find(m, v);

    if (i == SLOTS)
        return false;
    if (--m->cnt[i] == 0) {
        slot_remove(m, i);
        return true;
    }
    return false;
}

void mc_dropmemo_del(struct mc_dropmemo *m, uint64_t v)
{
    (void)count_down(m, v);
}

void mc_dropmemo_add(struct mc_dropmemo *m, uint64_t v)
{
    uint32_t i;

    if (v == 0)
        return;
    if (m->nring == DROPMEMO_MAX) {
        uint64_t old = m->ring[m->head];

        m->head = (m->head + 1) % DROPMEMO_MAX;
        m->nring--;
        if (count_down(m, old))
            m->forgotten++;
    }
    m->ring[(m->head + m->nring) % DROPMEMO_MAX] = v;
    m->nring++;
    i = find(m, v);
    if (i != SLOTS) {
        m->cnt[i]++; /* another block of it (a version with replicas on two disks) */
        return;
    }
    for (i = home(v); m->slot[i] != 0; i = (i + 1) & (SLOTS - 1))
        ;
    m->slot[i] = v;
    m->cnt[i] = 1;
    m->n++;
}

uint64_t mc_dropmemo_count(const struct mc_dropmemo *m)
{
    return m->n;
}

uint64_t mc_dropmemo_forgotten(const struct mc_dropmemo *m)
{
    return m->forgotten;
}

uint32_t mc_dropmemo_filter(const struct mc_dropmemo *m, struct mc_master_restore_req *reqs,
                            uint32_t n, bool (*is_disk)(void *ctx, uint32_t seg), void *ctx,
                            bool *refused)
{
    uint32_t i, k = 0;

    for (i = 0; i < n; i++) {
        refused[i] = m->n > 0 && mc_dropmemo_has(m, reqs[i].version) &&
                     is_disk(ctx, reqs[i].seg);
        if (!refused[i])
            reqs[k++] = reqs[i];
    }
    return k;
}

void mc_dropmemo_merge(int *results, uint32_t n, const bool *refused, int refusal)
{
    uint32_t k = 0, i;

    for (i = 0; i < n; i++)
        k += !refused[i];
    /* backwards: a kept result moves up to its place, never over one not yet moved */
    for (i = n; i-- > 0;)
        results[i] = refused[i] ? refusal : results[--k];
}

bool mc_dropmemo_note(struct mc_dropmemo *m, const struct mc_master_drop *d, bool disk)
{
    bool retired = d->kind == MC_MASTER_DROP_RETIRED;

    if (disk && (retired || !d->after_retire))
        mc_dropmemo_add(m, d->version);
    return !retired || disk;
}
