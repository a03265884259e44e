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
 *   - the versions this reign may hand out: [version_base, version_end), where version_end
 *     was stored at /mcstore/<cluster-id>/versions (guarded by the leader key) before the
 *     reign served, and version_base is the end the reigns before stored (or the wall
 *     clock in ns when that is higher: agents may hold versions of a master that ran
 *     without etcd). So a new leader's versions are above every version any earlier leader
 *     handed out whatever the masters' clocks say; the thread stores a further end before
 *     the counter reaches it (mc_elect_versions_used), and the server hands out none at or
 *     past the end.
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
    uint64_t version_base;   /* leading: this reign's versions start above this */
    uint64_t version_end;    /* leading: ... and stay below this (stored in etcd) */
    char leader[128];        /* the leader's HOST:PORT ("" unknown) */
};

/* Starts the thread. Errors: MC_ERR_INVALID (config), MC_ERR_NOMEM, MC_ERR_IO (thread). */
int mc_elect_start(const struct mc_elect_config *cfg, struct mc_elect **e_p);
/* Stops the thread; a leader deletes its key and revokes its lease first, so a standby
 * takes over at once. Accepts NULL. */
void mc_elect_stop(struct mc_elect *e);
/* An eventfd (nonblocking) that becomes readable when this process starts or stops
 * leading: the server's loop polls it to start a reign at once, not at its next tick. Read
 * it (8 bytes) to clear it. */
int mc_elect_fd(const struct mc_elect *e);
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
/* How long a leader waits after a renewal of a lease of ttl_ms before the next: as late as
 * leaves two whole etcd calls (each bounded by min(ttl_ms / 4, 250 ms)) and 100 ms before
 * it stops serving, ttl_ms - max(250, ttl_ms / 8) after the last renewal was sent. */
uint64_t mc_elect_renew_every_ms(uint64_t ttl_ms);

/* The agents registered (/mcstore/<cluster-id>/agents/<name>, value "NSEGS NAME": how
 * many segments it mounts, and its node name; daemon/agent/leader.h) when this process
 * last won: whose reports a new reign waits for. */
#define MC_ELECT_AGENTS_MAX 1024
struct mc_elect_agent {
    char name[64];
    uint32_t nsegs;
};
/* Copies them into out (cap >= MC_ELECT_AGENTS_MAX) for reign `reign`; the count, or -1
 * when not known (another reign, the read failed, or more than MC_ELECT_AGENTS_MAX). */
int mc_elect_agents(struct mc_elect *e, uint64_t reign, struct mc_elect_agent *out);
/* "/mcstore/<cluster_id>/agents/" into buf. MC_ERR_INVALID as mc_elect_key. */
int mc_elect_agents_prefix(const char *cluster_id, char *buf, size_t cap);
/* One agent key's value: "NSEGS NAME", NSEGS at most 1024, NAME 1..63 bytes, no space.
 * MC_ERR_PROTO otherwise (etcd is another process). */
int mc_elect_agent_parse(const char *value, struct mc_elect_agent *out);

/* What one store of /mcstore/<id>/versions reserves: 2^40 versions (18 minutes at 10^9
 * puts/s); a further end is stored once less than half of it is left. */
#define MC_ELECT_VERSIONS_RESERVE (UINT64_C(1) << 40)
/* The highest end stored or read. */
#define MC_ELECT_VERSIONS_END_MAX (UINT64_MAX - 4 * MC_ELECT_VERSIONS_RESERVE)
/* The loop's version counter (mc_master_version_last), told every tick. */
void mc_elect_versions_used(struct mc_elect *e, uint64_t last);
/* This reign's end: no version at or past it may be handed out (0: not leading). */
uint64_t mc_elect_versions_end(struct mc_elect *e);
/* "/mcstore/<cluster_id>/versions" into buf. MC_ERR_INVALID as mc_elect_key. */
int mc_elect_versions_key(const char *cluster_id, char *buf, size_t cap);
/* The stored end: decimal digits only, at most MC_ELECT_VERSIONS_END_MAX (etcd is another
 * process: anything else is MC_ERR_PROTO). */
int mc_elect_versions_parse(const char *value, uint64_t *end_p);
/* A new reign's base: the stored end, or the clock when that is higher. */
uint64_t mc_elect_versions_base(uint64_t stored_end, uint64_t clock_ns);
/* The end to store next, once fewer than half a reserve is left above `last` (else 0):
 * last + MC_ELECT_VERSIONS_RESERVE, never above MC_ELECT_VERSIONS_END_MAX (at that cap the
 * put gate refuses puts: the end is one every later leader can still read). */
uint64_t mc_elect_versions_next_end(uint64_t last, uint64_t end);
/* Whether `want` more versions fit above `last` below the stored `end` (no overflow, even
 * with a last at or past the end: a restore may raise it there). */
static inline bool mc_elect_versions_room(uint64_t last, uint64_t end, uint64_t want)
{
    return last < end && end - last > want;
}

#endif /* MC_MCMASTER_ELECT_H */
