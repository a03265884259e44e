/*
 * Clients' device buffers in the agent (docs/gpu.md): the imports of the allocations a
 * client registered on its socket (MC_SHM_DEVBUF_ADD), and the devices they are on, opened
 * once per agent with one stream each for the copies out of them. A put that names a
 * device buffer (MC_SQE_F_DEV) is copied by put.c straight from the import into the image
 * or the segment, asynchronously, its completion polled on the buffer's event.
 *
 * An import lives as long as its client: devbuf_tab_destroy waits for every copy queued on
 * the streams, then closes the imports, so a freed engine buffer is never touched after
 * its client went. One thread, like the agent.
 */
#ifndef MC_AGENT_DEVBUF_H
#define MC_AGENT_DEVBUF_H

#include <stdbool.h>
#include <stdint.h>

#include "dev/dev.h"
#include "shm/ring.h"

#define DEVBUF_DEVS_MAX 16

struct devbuf_devs {
    struct mc_dev_test_opts topts; /* the test device's (gpu_test_* settings) */
    struct {
        int kind, ordinal;
        struct mc_dev *dev;
        struct mc_dev_stream *stream;
    } d[DEVBUF_DEVS_MAX];
    uint32_t n;
    uint64_t imports, refused; /* registrations taken and refused, ever */
    uint64_t open;             /* imports not closed yet */
};

struct devbuf {
    struct mc_dev *dev;           /* NULL: not registered (or refused: see refused) */
    struct mc_dev_stream *stream; /* its device's */
    struct mc_dev_event *ev;      /* the put copy in flight from it (one at a time) */
    uint64_t base, size;          /* the import, in our address space */
    int refused;                  /* the registration failed: ops naming it get this */
};

/* A client's table: MC_SHM_MAX_DEVBUFS entries, NULL until its first registration. */
struct devbuf_tab {
    struct devbuf b[MC_SHM_MAX_DEVBUFS];
};

/* Every stream synced, every device closed. Accepts NULL members. */
void devbuf_devs_cleanup(struct devbuf_devs *ds);

/*
 * Take a registration (fd: the received one or -1; taken over, closed on every path).
 * *tab_p is allocated on first use. A registration that cannot be imported (no such
 * device, a lying export) is remembered as refused; MC_ERR_PROTO only for a malformed
 * message (the caller drops the client). Returns 0, MC_ERR_PROTO or MC_ERR_NOMEM.
 */
int devbuf_add(struct devbuf_devs *ds, struct devbuf_tab **tab_p,
               const struct mc_shm_devbuf_msg *m, int fd);

/* Buffer id's [off, off + len): 0 with *b_p and the device address, or the registration's
 * refusal, or MC_ERR_INVALID (unknown id, out of range). */
int devbuf_span(struct devbuf_tab *tab, uint32_t id, uint64_t off, uint64_t len,
                struct devbuf **b_p, uint64_t *dptr_p);

/* A client goes: wait for what its buffers' streams hold, then close its imports. */
void devbuf_tab_destroy(struct devbuf_devs *ds, struct devbuf_tab *tab);

#endif /* MC_AGENT_DEVBUF_H */
