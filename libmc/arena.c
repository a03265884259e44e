/*
 * Arenas (mc_buf_alloc, mc_buf_free): zero-copy memory shared with the agent. Each arena is
 * a memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING) sealed against shrinking and growing, mapped
 * read-write here and registered with the agent by sending struct mc_shm_arena_msg and the
 * fd on the client socket (docs/protocol.md, "Extensions"). Puts from any address inside
 * an arena name it as (arena id, offset) and the agent copies from its own mapping. Not the
 * ops that use the memory (op.c), nor the public calls (buf.c).
 *
 * The allocator is first fit over an address-ordered list of blocks per arena (free or
 * not), coalescing free neighbours, 64-byte granules: buffers are few and long-lived (an
 * engine allocates its KV pool once), so a list is plenty and simple to check. Arenas grow
 * by whole arenas and are unmapped only by mc_close (an SQE may name any of them).
 *
 * Busy tracking: every op that owns arena memory (a put's source, a get's destination;
 * sync or async) links a [lo, hi) record into as->uses; mc_buf_free fails with MC_ERR_BUSY
 * while a record overlaps the buffer. So an op pays one lock and a list insert, and only
 * the rare free walks the records (at most the ops in flight).
 *
 * Locking: arena.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libmc/arena.h"
#include "shm/fdpass.h"
#include "shm/memfd.h"

struct mc_arena_blk {
    size_t off, len;
    bool used;
    struct mc_arena_blk *prev, *next;
};

bool mc_arena_find(struct mc_arenas *as, const void *p, size_t len, uint32_t *id_p,
                   uint64_t *off_p)
{
    /* acquire pairs with the release in arena_add: the arena's fields are set */
    uint32_t n = atomic_load_explicit(&as->narenas, memory_order_acquire);
    uintptr_t a = (uintptr_t)p;

    if (p == NULL || len == 0)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        uintptr_t base = (uintptr_t)as->arenas[i].base;

        if (a >= base && a - base < as->arenas[i].size &&
            len <= as->arenas[i].size - (a - base)) {
            if (id_p != NULL)
                *id_p = i;
            if (off_p != NULL)
                *off_p = a - base;
            return true;
        }
    }
    return false;
}

void mc_arena_use(struct mc_arenas *as, struct mc_arena_use *u, const void *p, size_t len)
{
    u->linked = false;
    if (!mc_arena_find(as, p, len, NULL, NULL))
        return;
    u->lo = (uintptr_t)p;
    u->hi = (uintptr_t)p + len;
    pthread_mutex_lock(&as->arena_mu);
    u->prev = NULL;
    u->next = as->uses;
    if (as->uses != NULL)
        as->uses->prev = u;
    as->uses = u;
    u->linked = true;
    pthread_mutex_unlock(&as->arena_mu);
}

void mc_arena_unuse(struct mc_arenas *as, struct mc_arena_use *u)
{
    if (!u->linked)
        return;
    pthread_mutex_lock(&as->arena_mu);
    if (u->prev != NULL)
        u->prev->next = u->next;
    else
        as->uses = u->next;
    if (u->next != NULL)
        u->next->prev = u->prev;
    u->linked = false;
    pthread_mutex_unlock(&as->arena_mu);
}

/* Send the arena registration with its fd (SCM_RIGHTS). */
static int arena_register(struct mc_engine *e, uint32_t id, int fd, size_t size)
{
    struct mc_shm_arena_msg m = {.magic = MC_SHM_MAGIC,
                                 .type = MC_SHM_ARENA_ADD,
                                 .arena_id = id,
                                 .size = size,
                                 .reserved = 0};
    int err = mc_shm_fd_send(e->sock, &m, sizeof(m), 0, &fd, 1);

    if (err == MC_ERR_UNAVAILABLE)
        mc_engine_poison(e, MC_ERR_UNAVAILABLE);
    return err;
}

/* Create, map, seal and register a new arena of size bytes; arena_mu held. */
static int arena_add_locked(struct mc_engine *e, struct mc_arenas *as, size_t size)
{
    uint32_t id = atomic_load_explicit(&as->narenas, memory_order_relaxed);
    struct mc_arena *a = &as->arenas[id];
    struct mc_arena_blk *b;
    char name[32];
    void *p;
    int fd, err;

    if (id >= MC_SHM_MAX_ARENAS)
        return MC_ERR_NOMEM;
    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return MC_ERR_NOMEM;
    snprintf(name, sizeof(name), "mc-arena-%u", id);
    err = mc_shm_memfd_create(name, size, false, &fd, NULL);
    if (err != 0)
        goto err_free;
    err = mc_shm_memfd_seal_size(fd);
    if (err != 0)
        goto err_close;
    err = mc_shm_map(fd, size, true, &p);
    if (err != 0)
        goto err_close;
    err = arena_register(e, id, fd, size);
    if (err != 0)
        goto err_unmap;
    close(fd); /* the mapping and the agent's copy keep the memory */

    b->off = 0;
    b->len = size;
    a->base = p;
    a->size = size;
    a->blocks = b;
    /* release pairs with the acquire in mc_arena_find */
    atomic_store_explicit(&as->narenas, id + 1, memory_order_release);
    return 0;

err_unmap:
    munmap(p, size);
err_close:
    close(fd);
err_free:
    free(b);
    return err == MC_ERR_INVALID ? MC_ERR_NOMEM : err;
}

/* First fit in arena a for len bytes (a multiple of the granule); NULL if none. */
static void *arena_take_locked(struct mc_arena *a, size_t len)
{
    struct mc_arena_blk *b, *rest;

    for (b = a->blocks; b != NULL; b = b->next) {
        if (b->used || b->len < len)
            continue;
        if (b->len > len) {
            rest = calloc(1, sizeof(*rest));
            if (rest == NULL)
                return NULL;
            rest->off = b->off + len;
            rest->len = b->len - len;
            rest->prev = b;
            rest->next = b->next;
            if (b->next != NULL)
                b->next->prev = rest;
            b->next = rest;
            b->len = len;
        }
        b->used = true;
        return a->base + b->off;
    }
    return NULL;
}

int mc_arena_init(struct mc_arenas *as)
{
    return pthread_mutex_init(&as->arena_mu, NULL) == 0 ? 0 : MC_ERR_NOMEM;
}

int mc_arena_alloc(struct mc_engine *e, struct mc_arenas *as, size_t len, void **ptr_p)
{
    size_t need, asize;
    uint32_t n;
    void *p = NULL;
    int err = 0;

    if (len > SIZE_MAX - MC_CLIENT_ARENA_ROUND)
        return MC_ERR_NOMEM;
    need = (len + MC_CLIENT_ARENA_ALIGN - 1) & ~(size_t)(MC_CLIENT_ARENA_ALIGN - 1);
    pthread_mutex_lock(&as->arena_mu);
    n = atomic_load_explicit(&as->narenas, memory_order_relaxed);
    for (uint32_t i = 0; i < n && p == NULL; i++)
        p = arena_take_locked(&as->arenas[i], need);
    if (p == NULL) {
        asize = need < MC_CLIENT_ARENA_SIZE ? MC_CLIENT_ARENA_SIZE : need;
        asize = (asize + MC_CLIENT_ARENA_ROUND - 1) & ~(size_t)(MC_CLIENT_ARENA_ROUND - 1);
        err = arena_add_locked(e, as, asize);
        if (err == 0) {
            p = arena_take_locked(&as->arenas[n], need);
            if (p == NULL)
                err = MC_ERR_NOMEM;
        }
    }
    pthread_mutex_unlock(&as->arena_mu);
    if (err != 0)
        return err;
    *ptr_p = p;
    return 0;
}

static bool range_busy_locked(struct mc_arenas *as, uintptr_t lo, uintptr_t hi)
{
    for (struct mc_arena_use *u = as->uses; u != NULL; u = u->next) {
        if (u->lo < hi && lo < u->hi)
            return true;
    }
    return false;
}

/* Free the block at off in arena a unless an op owns part of it; arena_mu held. */
static int buf_free_locked(struct mc_arenas *as, struct mc_arena *a, void *ptr, uint64_t off)
{
    struct mc_arena_blk *b, *nb;

    for (b = a->blocks; b != NULL && b->off < off; b = b->next)
        ;
    if (b == NULL || b->off != off || !b->used)
        return MC_ERR_INVALID; /* not a pointer mc_buf_alloc returned, or freed already */
    if (range_busy_locked(as, (uintptr_t)ptr, (uintptr_t)ptr + b->len))
        return MC_ERR_BUSY;
    b->used = false;
    /* coalesce with the free neighbours */
    nb = b->next;
    if (nb != NULL && !nb->used) {
        b->len += nb->len;
        b->next = nb->next;
        if (nb->next != NULL)
            nb->next->prev = b;
        free(nb);
    }
    nb = b->prev;
    if (nb != NULL && !nb->used) {
        nb->len += b->len;
        nb->next = b->next;
        if (b->next != NULL)
            b->next->prev = nb;
        free(b);
    }
    return 0;
}

int mc_arena_free(struct mc_arenas *as, void *ptr)
{
    uint32_t id;
    uint64_t off;
    int err;

    if (!mc_arena_find(as, ptr, 1, &id, &off))
        return MC_ERR_INVALID;
    pthread_mutex_lock(&as->arena_mu);
    err = buf_free_locked(as, &as->arenas[id], ptr, off);
    pthread_mutex_unlock(&as->arena_mu);
    return err;
}

void mc_arena_cleanup(struct mc_arenas *as)
{
    uint32_t n = atomic_load(&as->narenas);
    struct mc_arena_blk *b, *next;

    for (uint32_t i = 0; i < n; i++) {
        for (b = as->arenas[i].blocks; b != NULL; b = next) {
            next = b->next;
            free(b);
        }
        munmap(as->arenas[i].base, as->arenas[i].size);
        as->arenas[i].blocks = NULL;
    }
    atomic_store(&as->narenas, 0);
    pthread_mutex_destroy(&as->arena_mu);
}
