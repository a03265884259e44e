/*
 * libmc calls for its own tools (mcctl, the tests and benchmarks): not exported from
 * libmc.so, reached through the static mc_internal library. Internal header; never
 * installed. Each call is synchronous, as those of <mc/mc.h> (sync.c).
 */
#ifndef MC_LIBMC_TOOL_H
#define MC_LIBMC_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mc/mc.h>

/*
 * One page of LIST (mcctl ls): up to max keys starting with prefix (prefix_len 0..512
 * bytes), from *cursor_p (0 = the start). Calls fn(arg, key, key_len) for each key in
 * order; *cursor_p becomes the next cursor (0 = done). Returns the number of keys listed,
 * or an MC_ERR_* code (fn's non-zero return stops the page and is returned as is).
 */
int mc_client_list(mc_client_t *c, const char *prefix, size_t prefix_len, uint64_t *cursor_p,
                   uint32_t max, int (*fn)(void *arg, const char *key, size_t key_len),
                   void *arg);

/* The longest node name, bytes, as the master checks it (bound to its own copy in
 * tests/unit/limits). */
#define MC_CLIENT_NODE_NAME_MAX 63

/* DRAIN (mcctl drain / undrain): the master drains (on) or undrains the node named `node`
 * (1..63 graphic ASCII bytes). Returns 0 or an MC_ERR_* code (MC_ERR_NOT_FOUND: no live node
 * of that name). */
int mc_client_drain(mc_client_t *c, const char *node, bool on);

/* REMOVE_PREFIX (mcctl rm --prefix): the number of objects removed, or an MC_ERR_* code.
 * prefix: 1 .. 512 bytes. */
int mc_client_remove_prefix(mc_client_t *c, const char *prefix, uint64_t *removed_p);

/*
 * The agent's statistics as JSON (the STATS op), for mcctl: *json_p is a malloc'ed,
 * NUL-terminated string the caller frees; *len_p its length. Internal to libmc and its
 * tools (not exported from libmc.so). Returns 0 or an MC_ERR_* code.
 */
int mc_client_stats_json(mc_client_t *c, char **json_p, size_t *len_p);
/* The same with MC_STATS_F_CLUSTER: the cluster's nodes, domains and segments (mcctl
 * cluster). */
int mc_client_cluster_json(mc_client_t *c, char **json_p, size_t *len_p);

#endif /* MC_LIBMC_TOOL_H */
