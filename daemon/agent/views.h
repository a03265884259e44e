/*
 * Ops answered from the master's view in cluster mode: STATS, LIST, DRAIN through
 * mc-master (a standalone agent answers them from its in-process master: ops.c).
 */
#ifndef MC_AGENT_VIEWS_H
#define MC_AGENT_VIEWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mc_agent;
struct client;
struct mc_sqe;

/* LIST's staging records: [u16 length][key bytes] each, as many as fit. */
struct list_out {
    uint8_t *p, *end;
    bool full;
    size_t tag_len;    /* the lister's tenant's tag, cut off every key (0: the default's) */
    bool skip_tagged;  /* the default tenant lists no key of a named tenant */
    uint32_t count;    /* keys written */
};
/* Appends one key, as its tenant's client knows it, to o (an mc_master_list_fn); o->full
 * once one did not fit. */
void views_list_one(const char *key, size_t len, void *ctx);

/* STATS (with MC_STATS_F_CLUSTER: the cluster's view): JSON in the client's staging range. */
void views_op_stats(struct mc_agent *a, struct client *c, const struct mc_sqe *s);
/* key: the directory prefix (the client's, tagged with its tenant), key_len bytes */
void views_op_list(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                   const char *key, size_t key_len);
/* key = the node's name (1..MC_MASTER_NAME_MAX bytes), arg0 = 1 drain / 0 undrain */
void views_op_drain(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                    const char *key);

#endif /* MC_AGENT_VIEWS_H */
