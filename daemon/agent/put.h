/*
 * The put, in the agent: PUT (one shot) and PUT_START / PUT_DATA / PUT_END / PUT_ABORT,
 * from the master's grant to the publication, and the copies that move a put's bytes from
 * the client (staging, an arena, or its memory) into the object's image a slice per loop
 * turn.
 *
 * A put's life is one state machine (enum put_state); put_set_state is the only place that
 * changes it, and it asserts the legal transitions:
 *
 *   FREE/EXPIRED -> GRANTING      put_begin asked the master for replicas
 *   GRANTING -> OPEN              granted (a one-shot PUT's copy is queued at once)
 *   GRANTING -> FREE              refused; or granted for a client that left (revoked)
 *   OPEN -> FINISHING             every byte is in: checksums, the writes to the other
 *                                 replicas, then PUT_END
 *   FINISHING -> ENDING           the writes are final: PUT_END is at the master
 *   ENDING -> FREE                the master answered PUT_END
 *   OPEN, FINISHING -> REVOKING   revoked while writes to peers still read the image
 *   OPEN, FINISHING -> FREE       revoked (the master frees the blocks at once)
 *   REVOKING -> FREE              the last write is final: the revoke goes out
 *   FREE -> EXPIRED               revoked for idleness (put_idle_ms): the handle stays
 *                                 reserved until the client names it (MC_ERR_TIMEOUT)
 *   EXPIRED -> FREE               named by PUT_END / PUT_ABORT
 *
 * The image is a replica in our own segment when the master placed one here, else a buffer
 * the writes to the replicas are sent from (rio.h); it is given back only once every write
 * is final. A PUT from an arena span with no replica here has no image: its chunks are
 * summed reading the arena in place, the payload is sent from the arena and the trailer
 * from a small buffer of the put's (docs/decisions.md, "Remote puts are sent from the
 * client's arena"); each write that reads the arena holds a reference on the client, whose
 * mapping of the arena lives as long as the client does.
 */
#ifndef MC_AGENT_PUT_H
#define MC_AGENT_PUT_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/master/master.h"
#include "shm/checksum.h"
#include "shm/ring.h"

struct mc_agent;
struct client;

enum put_state {
    PUT_FREE,
    PUT_EXPIRED,
    PUT_GRANTING,
    PUT_OPEN,
    PUT_FINISHING,
    PUT_ENDING,
    PUT_REVOKING,
    PUT__STATES,
};

struct put {
    struct client *c;
    enum put_state state;
    bool failed;         /* a piece failed: END revokes */
    bool abort_pending;  /* PUT_ABORT arrived while pieces were still being copied */
    bool oneshot;        /* a PUT: its handle is not the client's to name */
    bool csum;
    bool expiring;       /* revoked for idleness while writes drain: EXPIRED after */
    bool answered;       /* its op was answered (MC_ERR_TIMEOUT at the deadline) while
                            writes to a stalled peer still read the image */
    bool src_arena;      /* a PUT whose source `src` is a span of one of the client's arenas */
    bool data_arena;     /* a PUT_START's promise: every PUT_DATA names an arena span
                            (MC_SQE_F_ARENA_DATA) */
    bool stream_arena;   /* ... and no replica here: no image; each piece is summed where
                            it lies and sent from there once summed, the checksums from
                            `trailer` */
    uint16_t key_len;
    uint32_t busy;       /* copies in progress into it */
    uint64_t version;
    uint64_t size;
    uint32_t flags;      /* the pin and checksum bits as stored: what owners index */
    uint64_t ttl_ms;
    uint64_t received;   /* bytes of distinct chunks copied */
    uint64_t t0_ns;      /* metrics: when its PUT or PUT_START was taken */
    uint8_t *dst;        /* the object's image: a replica in our segment, or `image` */
    uint8_t *image;      /* no replica here: alloc_len bytes the writes are sent from */
    uint64_t image_cap;
    /* No replica here and the source is an arena span: no image (dst and image are NULL).
     * The payload is summed in place and sent from `arena` (read only: the client's bytes);
     * the checksums go to `trailer`, the alloc_len - mc_shm_trailer_off(size) bytes sent
     * at that offset (NULL for a put without checksums). */
    const uint8_t *arena;
    uint8_t *trailer;
    uint8_t *tailhdr;    /* the padding and `trailer`, sent in the last write's header */
    uint8_t *seen;       /* one byte per chunk: copied */
    uint32_t nrep;
    struct mc_master_replica rep[MC_MASTER_MAX_REPLICAS];
    uint32_t nremote;    /* replicas on other nodes: the image goes there */
    uint32_t sends;      /* writes to peers in flight: the image stays until they are final */
    int send_err;
    uint64_t sent_upto;  /* image bytes [0, sent_upto) are sent or being sent */
    uint64_t open_bytes; /* counted in the client's open_put_bytes until forgotten */
    uint64_t active_ms;  /* granted, or its last piece copied: put_idle_ms counts from it */
    /* the op that answers when the master or the peers are done */
    uint64_t user_data;
    uint64_t deadline_ms;
    const uint8_t *src;  /* a one-shot PUT's source while its grant is awaited */
    uint64_t uaddr;
    struct devbuf *dev;  /* ... or its device buffer (uaddr: the device address) */
    char key[MC_DIR_KEY_MAX];
};

/* A put's bytes moving from the client into the image, a slice per loop turn. */
struct copy {
    uint64_t user_data;
    uint64_t deadline_ms;
    uint32_t put;         /* handle */
    uint8_t opcode;       /* MC_OP_PUT (ends the put when done) or MC_OP_PUT_DATA */
    const uint8_t *src;   /* staging or arena bytes; NULL: the client's memory at uaddr, or
                             its device buffer dev at device address uaddr */
    uint64_t uaddr;
    struct devbuf *dev;   /* MC_SQE_F_DEV: the import copied from (devbuf.h) */
    bool dev_inflight;    /* a device copy of dev_n bytes runs: wait for dev->ev */
    uint64_t dev_n;
    uint64_t dev_avail;   /* bytes from done on that a device copy put in place */
    uint64_t obj_off;
    uint64_t len;
    uint64_t done;
    XXH3_state_t *xs;     /* the chunk being summed */
};

/* The only state setter: aborts on a transition the table above does not have. */
void put_set_state(struct put *p, enum put_state to);
bool put_transition_is_legal(enum put_state from, enum put_state to);
const char *put_state_name(enum put_state s);

/* c's put and copy tables (client hooks): 0 or MC_ERR_NOMEM; put_detach accepts partial. */
int put_attach(struct client *c);
void put_detach(struct client *c);
/* c leaves: queued copies are dropped (memcpy is synchronous: none is in flight) and the
 * puts nobody else waits for are revoked. */
void put_client_closing(struct mc_agent *a, struct client *c);

/* The ops: PUT, PUT_START, PUT_DATA, PUT_END, PUT_ABORT (s checked by sqe_check). Each
 * answers (now or later). */
/* key: the directory key (the client's, tagged with its tenant), key_len bytes. */
void put_op(struct mc_agent *a, struct client *c, const struct mc_sqe *s, const char *key,
            size_t key_len, uint64_t deadline_ms);
/* Metrics: the start time of the put a PUT_END names (0: none). */
uint64_t put_t0_ns(const struct client *c, uint64_t handle);

/* One round of copies over the clients, budget bytes in all; true when any was moved. */
bool put_copy_round(struct mc_agent *a, uint64_t budget, uint64_t now_ms);
/* Copies queued for c (it must not sleep). */
bool put_client_busy(const struct client *c);
/* The tick: answers puts whose writes outlive their deadline, revokes idle ones. */
void put_tick(struct mc_agent *a, struct client *c, uint64_t now_ms);
/* A publication held back by the fault seam is due. */
void put_end_due(void *ctx);

/* The image cache's buffers go (agent exit). */
void put_images_release(struct mc_agent *a);
/* A put the master found no room for while offload copies to a disk are under way (mc-master
 * answers MC_PROTO_NO_SPACE_YET; a standalone agent asks its master the same question,
 * mc_master_offloads_open) waits for the room their ends free, within its deadline: its
 * PUT_START is parked and submitted again by put_parked_retry(a, 0), on every tick and when
 * a local copy ends; the put checks its deadline each time (past it: MC_ERR_NO_SPACE, room
 * could not be made). An error ends every parked request with it (the agent stops:
 * MC_ERR_CANCELED). docs/disk.md, "Back-pressure". */
void put_parked_retry(struct mc_agent *a, int res);

#endif /* MC_AGENT_PUT_H */
