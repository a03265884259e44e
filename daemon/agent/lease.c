/*
 * GET and the read lease (lease.h).
 */
#include "daemon/agent/lease.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc.h>
#include <mc/mc_status.h>

#include "daemon/agent/agent_int.h"
#include "daemon/agent/client.h"
#include "daemon/agent/fault.h"
#include "daemon/common/log.h"

bool lease_transition_is_legal(enum lease_state from, enum lease_state to)
{
    static const uint8_t legal[LEASE__STATES] = {
        [LEASE_FREE] = 1u << LEASE_ASKING,
        [LEASE_ASKING] = 1u << LEASE_HELD | 1u << LEASE_READING | 1u << LEASE_FREE,
        [LEASE_READING] = 1u << LEASE_HELD | 1u << LEASE_FREE,
        [LEASE_HELD] = 1u << LEASE_FREE,
    };

    return from < LEASE__STATES && to < LEASE__STATES && (legal[from] >> to & 1) != 0;
}

void lease_set_state(struct lease *l, enum lease_state to)
{
    if (!lease_transition_is_legal(l->state, to)) {
        mc_error("lease of version %" PRIu64 ": illegal transition %d -> %d (a bug: please "
                 "report)", l->version, (int)l->state, (int)to);
        abort();
    }
    l->state = to;
}

int lease_attach(struct client *c)
{
    c->nleases = 2 * c->lay.max_inflight;
    c->leases = calloc(c->nleases, sizeof(*c->leases));
    c->lease_free = calloc(c->nleases, sizeof(*c->lease_free));
    if (c->leases == NULL || c->lease_free == NULL)
        return MC_ERR_NOMEM;
    for (uint32_t k = 0; k < c->nleases; k++)
        c->lease_free[k] = c->nleases - 1 - k;
    c->nlease_free = c->nleases;
    return 0;
}

void lease_detach(struct client *c)
{
    free(c->leases);
    free(c->lease_free);
    c->leases = NULL;
    c->lease_free = NULL;
    c->nlease_free = 0;
}

static void lease_slot_free(struct client *c, struct lease *l)
{
    lease_set_state(l, LEASE_FREE);
    c->lease_free[c->nlease_free++] = (uint32_t)(l - c->leases);
}

/* The read is over: end the lease at the master (fire-and-forget) and free the slot. */
static void lease_end(struct mc_agent *a, struct client *c, struct lease *l)
{
    struct ml_req *r = ml_req_new(a->ml, ML_LEASE_RELEASE, l->key, l->key_len, NULL, NULL);

    if (r != NULL) {
        r->in.ref.version = l->version;
        r->in.ref.epoch = l->epoch;
        ml_submit(a->ml, r); /* else the master's lease TTL ends it */
    }
    if (l->landed) {
        /* its bytes were in place before we answered */
        mc_alloc_free(tenant_of(c)->land, l->land_id);
        l->landed = false;
    }
    lease_slot_free(c, l);
}

/* A GET answer held back by the fault seam. */
struct held_answer {
    struct client *c;
    struct mc_cqe e;
};

static void held_answer_due(void *ctx)
{
    struct held_answer *h = ctx;

    if (h->c->state == CL_ACTIVE) {
        client_cqe_post(h->c, &h->e);
        agent_of(h->c)->st.delayed_answers++;
    }
    client_put(h->c);
    free(h);
}

static void held_answer_drop(void *ctx)
{
    struct held_answer *h = ctx;

    h->c->refs--; /* the client goes at exit anyway */
    free(h);
}

/* Answer a GET whose bytes are readable at segment `seg_idx`, offset `off` (with
 * MC_CQE_F_TAIL_APART in `cqe_flags`: only the image's tail is there, from byte size on;
 * the object's bytes are in the client's arena buffer). */
static void get_answer(struct mc_agent *a, struct client *c, struct lease *l,
                       const struct mc_master_get_result *g, uint32_t rep, uint32_t seg_idx,
                       uint64_t off, uint32_t cqe_flags)
{
    struct held_answer *h;
    struct mc_cqe e;

    lease_set_state(l, LEASE_HELD);
    memset(&e, 0, sizeof(e));
    e.user_data = l->user_data;
    e.size = g->size;
    e.version = g->version;
    e.obj_flags = g->flags | cqe_flags;
    e.loc_seg = seg_idx;
    e.loc_off = off;
    e.replicas = rep + 1; /* which one: the reader skips it if its checksum fails */
    e.lease_id = (uint32_t)(l - c->leases);
    e.deadline_ms = l->deadline_ms;
    a->st.hits++;
    if (a->fault.delay_ms[MC_FAULT_GET_ANSWER] != 0 && (h = malloc(sizeof(*h))) != NULL) {
        h->c = c;
        h->e = e;
        if (mc_fault_defer(&a->fault, MC_FAULT_GET_ANSWER, held_answer_due, held_answer_drop,
                           h)) {
            client_get(c);
            return;
        }
        free(h);
    }
    client_cqe_post(c, &e);
}

static bool reader_wanted(void *ctx)
{
    struct lease *l = ctx;

    return l->c->state == CL_ACTIVE;
}

/* The bytes (and their trailer) are in the client's arena buffer: the answer says so and
 * holds no lease (the owner's replica is not read any more: the master's lease ends now);
 * the client verifies the trailer in place. */
static void get_in_place(struct mc_agent *a, struct client *c, struct lease *l, uint32_t rep)
{
    struct mc_cqe e;

    memset(&e, 0, sizeof(e));
    e.user_data = l->user_data;
    e.size = l->g.size;
    e.version = l->g.version;
    e.obj_flags = l->g.flags;
    e.loc_seg = MC_SHM_LOC_IN_PLACE;
    e.replicas = rep + 1; /* which one: the reader skips it if its checksum fails */
    e.deadline_ms = l->deadline_ms;
    a->st.hits++;
    lease_end(a, c, l);
    client_cqe_post(c, &e);
}

/* A GET's remote read is over: 0 (the bytes are in landing block land_id, or in the
 * client's arena: MC_RIO_IN_ARENA) or an error. Called only once every transfer into the
 * arena is final: the client's mapping is held by our reference until here. */
static void get_landed(void *ctx, int res, uint32_t land_id, uint32_t rep)
{
    struct lease *l = ctx;
    struct client *c = l->c;
    struct mc_agent *a = agent_of(c);

    if (res == 0 && land_id == MC_RIO_IN_ARENA) {
        if (c->state == CL_ACTIVE)
            get_in_place(a, c, l, rep);
        else
            lease_end(a, c, l);
        client_put(c);
        return;
    }
    if (res == 0) {
        l->land_id = land_id & ~MC_RIO_ARENA_TAIL;
        l->landed = true;
    }
    if (res == 0 && c->state == CL_ACTIVE) {
        /* in a landing block; or the object in the client's arena and its image's tail in
         * that block, which the client verifies it with, then releases */
        get_answer(a, c, l, &l->g, rep, tenant_of(c)->land_idx,
                   mc_alloc_offset(tenant_of(c)->land, l->land_id),
                   (land_id & MC_RIO_ARENA_TAIL) != 0 ? MC_CQE_F_TAIL_APART : 0);
    } else {
        lease_end(a, c, l); /* landed for a client that left, or failed */
        if (c->state == CL_ACTIVE)
            client_cqe_res(c, l->user_data, res);
    }
    client_put(c);
}

static void get_answered(void *ctx, struct ml_req *r)
{
    struct lease *l = ctx;
    struct client *c = l->c;
    struct mc_agent *a = agent_of(c);
    struct mc_master_get_result *g = &r->out.get;
    uint8_t *arena;
    uint64_t ttl;
    uint32_t j;
    int err = r->res;

    if (err != 0) {
        lease_slot_free(c, l);
        if (c->state == CL_ACTIVE)
            client_cqe_res(c, l->user_data, err);
        goto out;
    }
    l->version = g->lease.version;
    l->epoch = g->lease.epoch;
    ttl = a->rio.ops->lease_ttl_ms(a->rio.impl);
    if (ttl == 0) {
        /* the master's clock is ours: its expiry is exact */
        l->deadline_ms = g->lease.expires_ms;
    } else {
        /* the master's clock is not ours: its lease began after we asked */
        l->deadline_ms = l->asked_ms + ttl;
    }
    l->deadline_ms = l->deadline_ms > a->cfg.lease_margin_ms
                         ? l->deadline_ms - a->cfg.lease_margin_ms
                         : 0;
    if (c->state != CL_ACTIVE) {
        lease_end(a, c, l); /* granted for a client that left */
        goto out;
    }
    for (j = 0; j < g->nrep; j++) {
        /* in the segment of the reader's tenant, the one its client maps */
        if (tenant_of(c)->seg != NULL && g->rep[j].seg == tenant_of(c)->seg_id &&
            !(l->skip >> j & 1) && mc_seg_span(tenant_of(c)->seg, g->rep[j].offset, 0) != NULL) {
            get_answer(a, c, l, g, j, 0, g->rep[j].offset, 0); /* the reader maps it */
            goto out;
        }
    }
    for (j = 0; j < g->nrep && (l->skip >> j & 1); j++)
        ;
    /* no replica at all is not a checksum verdict: every segment that held one is gone
     * (its node was declared dead; the sweep has not dropped the version yet) */
    if (g->nrep == 0) {
        lease_end(a, c, l);
        client_cqe_res(c, l->user_data, MC_ERR_NOT_FOUND);
        goto out;
    }
    if (j == g->nrep) {
        /* every replica failed the reader's checksum: nothing intact is left */
        lease_end(a, c, l);
        a->st.corrupt_reads++;
        client_cqe_res(c, l->user_data, MC_ERR_CORRUPT);
        goto out;
    }
    if (l->cap_plus1 != 0 && g->size > l->cap_plus1 - 1) {
        struct mc_cqe e;

        /* it cannot fit the reader's buffer: tell its size, move nothing */
        lease_end(a, c, l);
        memset(&e, 0, sizeof(e));
        e.user_data = l->user_data;
        e.res = MC_ERR_TOO_LARGE;
        e.size = g->size;
        e.version = g->version;
        client_cqe_post(c, &e);
        goto out;
    }
    l->g = *g;
    lease_set_state(l, LEASE_READING);
    /* into the caller's arena if the object and its trailer fit its capacity (the trailer
     * is verified by the client, in place), or the object alone when the client takes the
     * rest of the image apart (MC_SQE_F_TAIL_APART: in a landing block, under the lease) */
    arena = l->arena != NULL && a->cfg.arena_reads &&
                    (mc_shm_alloc_len(g->size, (g->flags & MC_MASTER_PUT_NO_CHECKSUM) == 0) <=
                         l->arena_cap ||
                     (l->tail_apart && g->size <= l->arena_cap))
                ? l->arena
                : NULL;
    /* get_landed puts it, maybe from inside the read call; until then it keeps the
     * client, and with it the mapping of its arena, alive */
    client_get(c);
    err = a->rio.ops->read(a->rio.impl, &l->g, l->skip, c->tenant, l->op_deadline_ms, arena,
                           l->arena_cap,
                           get_landed, reader_wanted, l);
    if (err == 0)
        goto out;
    c->refs--; /* nothing started: we still hold our own */
    lease_end(a, c, l);
    client_cqe_res(c, l->user_data, err);
out:
    ml_req_free(a->ml, r);
    client_put(c);
}

void lease_op_get(struct mc_agent *a, struct client *c, const struct mc_sqe *s, const char *key,
                  size_t key_len, uint64_t deadline_ms)
{
    const uint8_t *span = NULL;
    struct ml_req *r;
    struct lease *l;
    int err;

    a->st.gets++;
    if (s->arg0 != 0)
        a->st.checksum_retries++; /* the reader found a replica corrupt and asks again */
    if (c->nlease_free == 0) {
        client_cqe_res(c, s->user_data, MC_ERR_NOMEM); /* reads holding leases: docs/protocol.md */
        return;
    }
    if (s->flags & MC_SQE_F_ARENA) {
        /* the destination the client names: inside an arena it registered, or refused. An
         * arena over the limits (never mapped) only loses the direct path */
        err = client_arena_span(c, (uint32_t)(s->data_off >> MC_SHM_ARENA_SHIFT),
                                s->data_off & ((UINT64_C(1) << MC_SHM_ARENA_SHIFT) - 1),
                                s->data_len, &span);
        if (err == MC_ERR_INVALID) {
            client_cqe_res(c, s->user_data, MC_ERR_INVALID);
            return;
        }
        if (err != 0)
            span = NULL;
    }
    l = &c->leases[c->lease_free[c->nlease_free - 1]];
    r = ml_req_new(a->ml, ML_GET, key, key_len, get_answered, l);
    if (r == NULL) {
        client_cqe_res(c, s->user_data, MC_ERR_NOMEM);
        return;
    }
    c->nlease_free--;
    memset(l, 0, sizeof(*l));
    lease_set_state(l, LEASE_ASKING);
    l->c = c;
    l->user_data = s->user_data;
    l->op_deadline_ms = deadline_ms;
    l->cap_plus1 = s->arg1;
    /* writable: arenas are mapped read-write (client.c); the span is this client's */
    l->arena = span != NULL ? (uint8_t *)(uintptr_t)span : NULL;
    l->arena_cap = span != NULL ? s->data_len : 0;
    l->tail_apart = span != NULL && (s->flags & MC_SQE_F_TAIL_APART) != 0;
    l->skip = (uint32_t)(s->arg0 & ((1u << MC_MASTER_MAX_REPLICAS) - 1));
    l->key_len = (uint16_t)key_len;
    memcpy(l->key, key, key_len);
    l->asked_ms = mc_agent_now_ms();
    client_get(c);
    ml_submit(a->ml, r);
}

void lease_op_release(struct mc_agent *a, struct client *c, const struct mc_sqe *s)
{
    int err = MC_ERR_NOT_FOUND;

    if (s->arg0 < c->nleases && c->leases[s->arg0].state == LEASE_HELD) {
        lease_end(a, c, &c->leases[s->arg0]);
        err = 0;
    }
    if (s->flags & MC_SQE_F_NO_CQE)
        client_op_done_silent(c);
    else
        client_cqe_res(c, s->user_data, err);
}

void lease_tick(struct mc_agent *a, struct client *c, uint64_t now)
{
    uint32_t i;

    /* the master ends them too, at its own, later deadline */
    for (i = 0; i < c->nleases; i++) {
        if (c->leases[i].state == LEASE_HELD &&
            now > c->leases[i].deadline_ms + a->cfg.lease_margin_ms)
            lease_end(a, c, &c->leases[i]);
    }
}

void lease_client_closing(struct mc_agent *a, struct client *c)
{
    uint32_t i;

    for (i = 0; i < c->nleases; i++) {
        if (c->leases[i].state == LEASE_HELD)
            lease_end(a, c, &c->leases[i]);
    }
}
