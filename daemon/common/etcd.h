/*
 * A small etcd v3 client for master election (docs/master.md, "High availability"): leases,
 * a create-if-absent transaction, reads and a guarded delete, spoken to etcd's v3 JSON
 * gateway (/v3/...: JSON bodies, keys and values in base64, 64-bit numbers as strings) with
 * libcurl and jansson. Why not gRPC: docs/decisions.md.
 *
 * Blocking calls, each bounded by the handle's timeout; one handle per thread. Endpoints are
 * tried in turn, starting with the last that answered, so that losing one member of an etcd
 * cluster costs one timeout at most once. Everything etcd answers is checked (it is another
 * process): a reply that does not parse is MC_ERR_PROTO.
 *
 * Errors: MC_ERR_UNAVAILABLE (no endpoint answered, or etcd could not serve: no quorum),
 * MC_ERR_TIMEOUT, MC_ERR_PROTO, MC_ERR_NOMEM, MC_ERR_INVALID (arguments); per call below.
 */
#ifndef MC_COMMON_ETCD_H
#define MC_COMMON_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MC_ETCD_ENDPOINTS_MAX 8
#define MC_ETCD_VALUE_MAX 4096 /* what we store and accept */

struct mc_etcd;

/* endpoints: "http://host:port[,http://host:port...]" (1..MC_ETCD_ENDPOINTS_MAX). */
int mc_etcd_create(const char *endpoints, uint64_t timeout_ms, struct mc_etcd **e_p);
/* Accepts NULL. */
void mc_etcd_destroy(struct mc_etcd *e);

/* A lease of ttl_s seconds (>= 1). */
int mc_etcd_lease_grant(struct mc_etcd *e, uint64_t ttl_s, int64_t *id_p);
/* One keep-alive: the TTL it has again in *ttl_p; MC_ERR_NOT_FOUND when the lease is gone
 * (expired or revoked). */
int mc_etcd_lease_keepalive(struct mc_etcd *e, int64_t id, int64_t *ttl_p);
/* Revoke (its keys go with it). A lease already gone is no error. */
int mc_etcd_lease_revoke(struct mc_etcd *e, int64_t id);

struct mc_etcd_kv {
    bool found;
    int64_t create_rev;  /* the revision that created the key (0: absent) */
    int64_t mod_rev;
    int64_t lease;
    size_t value_len;
    char value[MC_ETCD_VALUE_MAX + 1]; /* NUL-terminated */
};

/* Put key = value under `lease` (0: none) only if the key does not exist. *created says
 * whether it did; either way *kv is the key as it is now (ours: create_rev is the
 * transaction's revision). */
int mc_etcd_create_if_absent(struct mc_etcd *e, const char *key, const char *value,
                             int64_t lease, bool *created, struct mc_etcd_kv *kv);
/* Read key: kv->found false when absent. */
int mc_etcd_get(struct mc_etcd *e, const char *key, struct mc_etcd_kv *kv);
/* Put key = value under `lease` (0: none), whatever was there. */
int mc_etcd_put(struct mc_etcd *e, const char *key, const char *value, int64_t lease);
/* The keys under `prefix` (at most `limit`, >= 1, in key order): fn once for each, with
 * the key's value in kv (kv->found true). Returns 0 or the call's error; a malformed entry
 * is MC_ERR_PROTO and stops the walk. */
int mc_etcd_get_prefix(struct mc_etcd *e, const char *prefix, size_t limit,
                       void (*fn)(void *ctx, const struct mc_etcd_kv *kv), void *ctx);
/* Put key = value (no lease) only while guard is still the key created at guard_rev
 * (e.g. the leader key of this reign); *done says whether. */
int mc_etcd_put_if(struct mc_etcd *e, const char *key, const char *value, const char *guard,
                   int64_t guard_rev, bool *done);
/* Delete key only if it is still the one created at create_rev; *deleted says whether. */
int mc_etcd_delete_if(struct mc_etcd *e, const char *key, int64_t create_rev, bool *deleted);

/* The one home of a cluster's key layout in etcd: "/mcstore/<cluster_id>/<rest>" into buf
 * (rest: "leader", "versions", "members/", "agents/<name>", ...). MC_ERR_INVALID when
 * cluster_id is not 1..63 of [A-Za-z0-9_.-] or the key does not fit cap. */
int mc_etcd_cluster_key(const char *cluster_id, const char *rest, char *buf, size_t cap);

/* base64 (RFC 4648, padded) of n bytes into out (cap >= 4 * ((n + 2) / 3) + 1), NUL-ended. */
void mc_etcd_b64_encode(const void *in, size_t n, char *out);
/* Decodes; returns the length, or -1 when it is not padded base64 or does not fit cap. */
long mc_etcd_b64_decode(const char *in, void *out, size_t cap);

#endif /* MC_COMMON_ETCD_H */
