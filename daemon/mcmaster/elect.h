/*
 * Leader election of mc-master on etcd (docs/master.md, "High availability"). A thread of
 * its own campaigns for /mcstore/<cluster-id>/leader under an etcd lease (etcd.h) and, once
 * it holds the key, keeps the lease alive; the server's loop only reads the outcome:
 *
 *   - serving while this process leads and its own clock says the lease cannot have lapsed
 *     (it was renewed less than TTL - margin ago, counted from before the renewal was
 *     sent): a leader that is stopped, partitioned from etcd or cut from its quorum stops
 *     answering before any other master can be elected;
 *   - the epoch: the etcd revision that created the leader key for this reign (grows with
 *     every election); a new reign starts from an empty directory;
 *   - who leads (address and epoch), for the standbys' and operators' views.
 *
 * Without etcd there is no elect: the master always serves, epoch 0.
 */
#ifndef MC_MCMASTER_ELECT_H
#define MC_MCMASTER_ELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mc_elect;

struct mc_elect_config {
    const char *endpoints;   /* etcd client URLs, comma-separated */
    const char *cluster_id;  /* 1..63 of [A-Za-z0-9_.-] */
    const char *advertise;   /* HOST:PORT agents bootstrap from: the leader key's value */
    uint64_t ttl_ms;         /* lease TTL (>= 1000, whole seconds at etcd) */
    uint64_t poll_ms;        /* how often a standby looks at the key */
};

struct mc_elect_view {
    bool leading;            /* this process leads (and may serve until serve_until_ms) */
    uint64_t epoch;          /* of the reign this process leads, else of the leader seen */
    uint64_t serve_until_ms; /* mc_elect_now_ms (CLOCK_BOOTTIME): lead no longer than this */
    uint64_t reign;          /* counts this process's reigns: a new one, a new directory */
    bool etcd_ok;            /* the last call to etcd succeeded */
    char leader[128];        /* the leader's HOST:PORT ("" unknown) */
};

/* Starts the thread. Errors: MC_ERR_INVALID (config), MC_ERR_NOMEM, MC_ERR_IO (thread). */
int mc_elect_start(const struct mc_elect_config *cfg, struct mc_elect **e_p);
/* Stops the thread; a leader deletes its key and revokes its lease first, so a standby
 * takes over at once. Accepts NULL. */
void mc_elect_stop(struct mc_elect *e);
/* A consistent copy of what the thread knows now. */
void mc_elect_view(struct mc_elect *e, struct mc_elect_view *v);
/* Whether this process may answer as leader at time now_ms (mc_elect_now_ms). */
bool mc_elect_serving(struct mc_elect *e, uint64_t now_ms);
/* The same, and still in reign `reign`: a process that stepped down and won again since
 * must not serve from the directory of the reign before (its front end starts a new one). */
bool mc_elect_serving_reign(struct mc_elect *e, uint64_t now_ms, uint64_t reign);

/* The key of the leader of a cluster: "/mcstore/<id>/leader" into buf. MC_ERR_INVALID
 * when the id is not 1..63 of [A-Za-z0-9_.-]. */
int mc_elect_key(const char *cluster_id, char *buf, size_t cap);
/* "/mcstore/<cluster_id>/members/" into buf: each candidate's key there is the prefix and
 * its advertised HOST:PORT, the value that address, under a lease of its own (it goes
 * when the process does). MC_ERR_INVALID as mc_elect_key. */
int mc_elect_members_prefix(const char *cluster_id, char *buf, size_t cap);

uint64_t mc_elect_now_ms(void);

#endif /* MC_MCMASTER_ELECT_H */
