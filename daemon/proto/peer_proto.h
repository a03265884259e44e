/*
 * Payloads of the agent-to-agent messages (docs/protocol.md "Agent to agent"), framed by
 * ucx_backend/wire.h:
 *
 *   HELLO        as the master's (mc_proto_hello_req): the cluster token and the asking
 *                node's name; an owner answers nothing but HELLO on an endpoint until it
 *                has carried the right token. Reply: mc_proto_status_rep.
 *   WRITE        a bulk transfer (MC_WIRE_F_BULK) whose header payload is
 *                  u32 seg, u32 alloc, u64 version, u64 offset, u64 len, blob key
 *                  [blob tail: 1..MC_PEER_WRITE_TAIL_MAX bytes landing at offset + len]
 *                and whose data (len bytes) the owner lands at offset in segment seg,
 *                only inside the allocation the master granted. The sender learns the
 *                outcome from the transfer itself (refused = an error).
 *   READ         u64 xfer, u32 seg, u32 alloc, u64 version, u64 offset, u64 len: the owner
 *                sends the bytes as a bulk READ_REPLY frame (MC_WIRE_F_BULK|F_REPLY) with
 *                request id `xfer`, then answers the call with mc_proto_status_rep.
 *   READ_BATCH   u32 n (1..MC_PROTO_READ_BATCH_MAX), n * the READ fields: every read of one
 *                reader from one owner that is ready at once, in one request. The owner
 *                starts each item's bulk READ_REPLY (request id its `xfer`) and answers the
 *                call once with mc_proto_results_rep: one status per item, 0 for each item
 *                whose bytes are on their way.
 *                Optional, after the n items: n * u64 head (present only when some item's
 *                head is not 0).
 *   head (READ: an optional u64 after len): 0, or 1..len-1 with len - head <=
 *                MC_PEER_READ_TAIL_MAX: the reader takes the image's bytes [0, head) as the
 *                READ_REPLY's data and [head, len) in its header payload (a buffer of
 *                exactly the object's size receives the data contiguously; docs/protocol.md).
 *                The owner may still send the whole image as data (GPU memory it cannot
 *                read): the reader takes both.
 *
 * Lengths are bounded by MC_PEER_XFER_MAX; keys by MC_PROTO_KEY_MAX. Decoders return
 * MC_ERR_PROTO on any malformed payload; pointers point into the buffer.
 */
#ifndef MC_PROTO_PEER_PROTO_H
#define MC_PROTO_PEER_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/proto/master_proto.h"

#define MC_PEER_XFER_MAX (UINT64_C(1) << 40)
#define MC_PEER_READ_TAIL_MAX 1024u /* bytes of an image's tail a READ_REPLY header carries */
#define MC_PEER_WRITE_TAIL_MAX 1024u /* ... and a WRITE header, after its key */

struct mc_peer_write_hdr {
    uint32_t seg;
    uint32_t alloc;
    uint64_t version;
    uint64_t offset; /* bytes from the segment's start */
    uint64_t len;    /* 1..MC_PEER_XFER_MAX: the bulk's size */
    struct mc_proto_bytes key;
    /* optional (a blob after the key, written only when not empty): up to
     * MC_PEER_WRITE_TAIL_MAX bytes that land right after the bulk's, at offset + len (the
     * image's padding and checksum trailer: one WRITE per put from an arena) */
    struct mc_proto_bytes tail;
};

struct mc_peer_read_req {
    uint64_t xfer;
    uint32_t seg;
    uint32_t alloc;
    uint64_t version;
    uint64_t offset;
    uint64_t len; /* 1..MC_PEER_XFER_MAX */
    uint64_t head; /* 0: all len bytes as data; else [head, len) in the reply's header */
};

int mc_peer_write_hdr_encode(const struct mc_peer_write_hdr *m, void *buf, size_t cap,
                             size_t *len_p);
int mc_peer_write_hdr_decode(const void *buf, size_t len, struct mc_peer_write_hdr *m_p);
int mc_peer_read_req_encode(const struct mc_peer_read_req *m, void *buf, size_t cap,
                            size_t *len_p);
int mc_peer_read_req_decode(const void *buf, size_t len, struct mc_peer_read_req *m_p);
/* READ_BATCH: n items (1..MC_PROTO_READ_BATCH_MAX). Encode errors: MC_ERR_INVALID (n or an
 * item's span), MC_ERR_TOO_LARGE (buf). Decode: at most `cap` items into `items`. */
int mc_peer_read_batch_encode(const struct mc_peer_read_req *items, uint32_t n, void *buf,
                              size_t cap, size_t *len_p);
int mc_peer_read_batch_decode(const void *buf, size_t len, uint32_t cap,
                              struct mc_peer_read_req *items, uint32_t *n_p);

#endif /* MC_PROTO_PEER_PROTO_H */
