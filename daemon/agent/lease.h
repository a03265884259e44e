/*
 * The GET in the agent, and the read lease it leaves with the client until RELEASE.
 *
 * A lease's life is one state machine; lease_set_state is its only setter and asserts the
 * legal transitions:
 *
 *   FREE -> ASKING       GET: the master is asked for a readable version and its replicas
 *   ASKING -> HELD       answered: a replica in our own segment, which the reader maps
 *   ASKING -> READING    no replica here: one is read from a peer into the landing segment
 *   ASKING -> FREE       refused (not found, ...), or its client left
 *   READING -> HELD      the bytes landed
 *   READING -> FREE      every replica failed, or its client left
 *   HELD -> FREE         RELEASE, the lease's deadline, or the client left
 *
 * Leaving HELD releases the lease at the master (fire-and-forget) and gives the landing
 * block back.
 */
#ifndef MC_AGENT_LEASE_H
#define MC_AGENT_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/master/master.h"
#include "shm/ring.h"

struct mc_agent;
struct client;

enum lease_state { LEASE_FREE, LEASE_ASKING, LEASE_READING, LEASE_HELD, LEASE__STATES };

struct lease {
    struct client *c;
    enum lease_state state;
    uint64_t user_data;
    uint64_t op_deadline_ms;
    uint32_t land_id;    /* a remote read landed in this block of the landing segment */
    bool landed;         /* land_id is held until the lease ends */
    struct mc_master_get_result g; /* while a remote read is under way */
    uint64_t cap_plus1;  /* the GET's arg1: the reader's capacity + 1, or 0 */
    uint8_t *arena;      /* the GET's arena destination (MC_SQE_F_ARENA), checked; or NULL */
    uint64_t arena_cap;  /* its bytes */
    bool tail_apart;     /* the client takes the image's tail apart (MC_SQE_F_TAIL_APART) */
    uint32_t skip;       /* the GET's arg0: replicas that failed the reader's checksum */
    uint16_t key_len;
    uint32_t epoch;
    uint64_t version;
    uint64_t asked_ms;   /* when the master was asked: a remote lease counts from it */
    uint64_t deadline_ms;
    char key[MC_DIR_KEY_MAX];
};

void lease_set_state(struct lease *l, enum lease_state to);
bool lease_transition_is_legal(enum lease_state from, enum lease_state to);

/* c's lease table (client hooks): 0 or MC_ERR_NOMEM; lease_detach accepts partial. */
int lease_attach(struct client *c);
void lease_detach(struct client *c);
/* c leaves: held leases end; those under way end on their answer. */
void lease_client_closing(struct mc_agent *a, struct client *c);

/* GET and RELEASE (s checked by sqe_check). */
/* key: the directory key (the client's, tagged with its tenant), key_len bytes. */
void lease_op_get(struct mc_agent *a, struct client *c, const struct mc_sqe *s, const char *key,
                  size_t key_len, uint64_t deadline_ms);
void lease_op_release(struct mc_agent *a, struct client *c, const struct mc_sqe *s);
/* The tick: leases the client never released end at their deadline. */
void lease_tick(struct mc_agent *a, struct client *c, uint64_t now_ms);

#endif /* MC_AGENT_LEASE_H */
