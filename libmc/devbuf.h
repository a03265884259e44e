/*
 * Device buffers (internal; never installed): engines' GPU memory given to mc_put, mc_get,
 * their batch and async forms (docs/gpu.md). A buffer is recognised through the device
 * seam (dev/dev.h): CUDA when the process has already loaded libcuda (an engine has; a
 * process that has not pays nothing), the test device when MC_DEVICE=test (tests only);
 * MC_DEVICE=none turns it off, MC_DEVICE=cuda loads CUDA itself.
 *
 * Puts: the allocation holding the buffer is exported once (base plus an offset: engines
 * sub-allocate) and registered with the agent on the socket (MC_SHM_DEVBUF_ADD); the agent
 * copies straight from it into the segment. Gets: the bytes the agent located are checked
 * against their checksums in place, then copied host to device by libmc itself, before the
 * op is final. A put from memory that cannot be exported (CUDA VMM, expandable segments)
 * is staged: libmc copies it device to host first and puts the host copy; each is counted
 * (mc_stats "dev_staged_puts" of the client), never silently slow.
 *
 * Locking: mu guards the cache and the stream; taken after the engine's mu, nothing under it.
 */
#ifndef MC_LIBMC_DEVBUF_H
#define MC_LIBMC_DEVBUF_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dev/dev.h"
#include "shm/ring.h"

struct mc_devbuf_ent {
    uint32_t kind, ordinal;
    uint64_t base, size, buffer_id;
};

struct mc_devbufs {
    pthread_mutex_t mu;
    int kind;                     /* enum mc_dev_kind, or 0: device buffers are not looked for */
    uint32_t n;                   /* registered: their ids are their indexes */
    struct mc_devbuf_ent ent[MC_SHM_MAX_DEVBUFS];
    struct mc_dev *dev;           /* for gets: opened on first use */
    struct mc_dev_stream *stream;
    _Atomic uint64_t staged;      /* puts staged through host memory: not exportable (VMM) */
};

int mc_devbuf_init(struct mc_devbufs *d);
void mc_devbuf_cleanup(struct mc_devbufs *d);

/* Whether [p, p + len) is device memory (wholly inside one allocation). */
bool mc_devbuf_is_device(struct mc_devbufs *d, const void *p, size_t len);

/*
 * The MC_SQE_F_DEV reference of device buffer p (devbuf id << MC_SHM_ARENA_SHIFT |
 * offset), registering its allocation with the agent over sock first if it is new.
 * Returns 0, MC_ERR_DENIED (not exportable: stage it, mc_devbuf_stage_out), MC_ERR_INVALID
 * (not within one allocation), MC_ERR_NOMEM (no id left on this connection),
 * MC_ERR_UNAVAILABLE (the socket), MC_ERR_IO.
 */
int mc_devbuf_ref(struct mc_devbufs *d, int sock, const void *p, size_t len, uint64_t *ref_p);

/* A host copy of device buffer p (malloc'd, the caller frees it), waited for; counted.
 * Returns 0, MC_ERR_NOMEM, MC_ERR_IO. */
int mc_devbuf_stage_out(struct mc_devbufs *d, const void *p, size_t len, uint8_t **copy_p);

/* Copy len host bytes at src into device buffer dst, waited for. 0 or MC_ERR_IO. */
int mc_devbuf_copy_in(struct mc_devbufs *d, void *dst, const void *src, size_t len);

#endif /* MC_LIBMC_DEVBUF_H */
