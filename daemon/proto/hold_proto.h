/*
 * The codecs of what keeps an owner's index exact (daemon/agent/holdidx.h,
 * docs/master.md "What an owner holds"):
 *
 *   PUBLISH  writer agent -> each owner of a replica, once its put_end was answered 0: the
 *            object at [offset, offset + alloc_len) of segment seg is complete (key,
 *            version, size, flags, TTL left); also the source owner of a drain's copy ->
 *            the copy's target owner, once the copy's write was answered
 *   DROP     mc-master -> the owner of a segment: the block at offset that held version
 *            is freed (removed, evicted, retired, TTL); or, with MC_PROTO_DROP_F_RETIRED,
 *            a disk block whose version was unpublished while still read or written: the
 *            owner marks the record removed on its disk (kept, readable) and answers once
 *            the mark is durable (docs/disk.md, "Removed while still in use")
 *
 * Both are batches with one status per item. Every field is checked here as far as the
 * codec can (lengths, ranges, flags); which segment is ours is the agent's check.
 */
#ifndef MC_PROTO_HOLD_PROTO_H
#define MC_PROTO_HOLD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mc/mc_status.h>

#include "daemon/proto/proto_base.h"

struct mc_proto_publish_item {
    /* the master reign the writer published in: seg is that master's id of the segment
     * (ids change with each reign; the owner maps an earlier reign's to its own segment) */
    uint64_t m_epoch, m_incarnation;
    uint32_t seg;
    uint32_t flags;     /* MC_MASTER_PUT_FLAGS_ALL bits */
    uint64_t offset, alloc_len, size, version;
    uint64_t ttl_ms;    /* left when sent; 0 none; <= MC_MASTER_TTL_MAX_MS */
    struct mc_proto_bytes key;
};

/* A DROP's kind, one per message: after the items, as a u32 left out when 0 (a plain DROP
 * is the bytes it always was). An owner that predates it finds bytes after the items and
 * answers MC_ERR_PROTO: it never takes a mark for an erase (docs/protocol.md). */
#define MC_PROTO_DROP_F_RETIRED 0x1u /* mark the disk record removed, do not free it */
#define MC_PROTO_DROP_F_KNOWN MC_PROTO_DROP_F_RETIRED

struct mc_proto_drop_item {
    uint32_t seg;
    uint32_t flags;  /* MC_PROTO_DROP_F_*: the message's, the same in every item of it */
    uint64_t offset;
    uint64_t version;
};

/* n items (1..MC_PROTO_BATCH_MAX). Errors: MC_ERR_INVALID, MC_ERR_TOO_LARGE (buf). */
int mc_proto_publish_req_encode(uint32_t n, const struct mc_proto_publish_item *items,
                                void *buf, size_t cap, size_t *len_p);
/* Up to cap items; keys point into buf. Errors: MC_ERR_PROTO. */
int mc_proto_publish_req_decode(const void *buf, size_t len, size_t cap, uint32_t *n_p,
                                struct mc_proto_publish_item *items);
/* A PUBLISH item's result as the owner sends it. The owner's index answers 1 when it
 * already knew better (a newer object, or its drop; or the master refused a carried item),
 * which a results reply cannot carry (statuses only, mc_proto_results_rep_encode): it goes
 * as MC_ERR_EXISTS, which the writer takes as settled, like 0. */
static inline int mc_proto_publish_result_wire(int result)
{
    return result == 1 ? MC_ERR_EXISTS : result;
}
static inline bool mc_proto_publish_result_settled(int wire_result)
{
    return wire_result == 0 || wire_result == MC_ERR_EXISTS;
}

/* Errors: MC_ERR_INVALID (items of different flags, an unknown flag, a version 0). The
 * decoder gives every item the message's flags. */
int mc_proto_drop_req_encode(uint32_t n, const struct mc_proto_drop_item *items, void *buf,
                             size_t cap, size_t *len_p);
int mc_proto_drop_req_decode(const void *buf, size_t len, size_t cap, uint32_t *n_p,
                             struct mc_proto_drop_item *items);

#endif /* MC_PROTO_HOLD_PROTO_H */
