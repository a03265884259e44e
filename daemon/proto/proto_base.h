/*
 * The ground floor of daemon/proto: the bounds every payload codec checks against, the byte
 * string a decoder hands back, and the two checks every codec file and front end shares (the
 * cluster token, the status codes a reply may carry). master_proto.h and peer_proto.h build
 * on it; it builds on nothing of theirs.
 *
 * Thread-safety: pure functions.
 */
#ifndef MC_PROTO_PROTO_BASE_H
#define MC_PROTO_PROTO_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/common/tenant_key.h"
#include "ucx_backend/wire.h"

#define MC_PROTO_BATCH_MAX     1024u /* items in one batch request or reply */
#define MC_PROTO_KEY_MAX       MC_DIR_KEY_MAX /* a client key with its tenant's tag */
#define MC_PROTO_NAME_MAX      63u   /* = MC_MASTER_NAME_MAX: node and failure-domain names */
#define MC_PROTO_TOKEN_MAX     256u  /* cluster token */
#define MC_PROTO_ADDR_MAX      4096u /* packed UCX worker address */
#define MC_PROTO_RKEY_MAX      4096u /* packed UCX rkey */
#define MC_PROTO_SEG_PAGE_MAX  256u  /* segments in one CLUSTER_INFO reply */
#define MC_PROTO_NODE_PAGE_MAX 256u  /* nodes in one CLUSTER_INFO reply */
#define MC_PROTO_LIST_MAX      1024u /* keys in one LIST reply */
#define MC_PROTO_READ_BATCH_MAX 256u /* items in one READ_BATCH (agent to agent) */
#define MC_PROTO_PAYLOAD_MAX   MC_WIRE_PAYLOAD_MAX

/* A byte string inside a decoded buffer (or the caller's, to encode). Not NUL-terminated. */
struct mc_proto_bytes {
    const uint8_t *p;
    size_t len;
};

/* Whether a HELLO's token `t` is `token` (token_len bytes), in time that depends on
 * token_len only (mc-master and agents check every HELLO with it). token NULL: a cluster
 * without a token (allow_no_token), every token passes. */
bool mc_proto_token_equal(const char *token, size_t token_len, const struct mc_proto_bytes *t);

/* 0, a known MC_ERR_* code (include/mc/mc_status.h), or 1 when `allow_one`. */
bool mc_proto_status_is_valid(int64_t status, bool allow_one);

#endif /* MC_PROTO_PROTO_BASE_H */
