/*
 * Client pins (pin.h). A client's pins are an array of records, unordered: UNPIN scans it
 * (an engine holds a few hundred pins at a time, one per page of the requests it is
 * loading), and a record leaves by swapping the last one into its place.
 */
#include "daemon/agent/pin.h"

#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/agent/agent_int.h"
#include "daemon/agent/client.h"

struct pin_rec {
    uint64_t id;         /* the client's pin id */
    uint64_t version;    /* the pinned version and its lease epoch, for the release */
    uint32_t epoch;
    uint16_t key_len;
    uint64_t mark;       /* the PIN's arg1: UNPIN may select by it */
    uint64_t expires_ms; /* the agent's pin_ttl_ms after it was granted */
    char *key;
};

struct pin_tab {
    struct pin_rec *v;
    uint32_t n, cap;
};

uint32_t pin_count(const struct client *c)
{
    return c->pins != NULL ? c->pins->n : 0;
}

/* Ends the pin at the master (fire-and-forget: if the request cannot be made, the master's
 * pin_ttl_ms ends it). */
static void pin_release(struct mc_agent *a, const char *key, size_t key_len, uint64_t version,
                        uint32_t epoch)
{
    struct ml_req *r = ml_req_new(a->ml, ML_LEASE_RELEASE, key, key_len, NULL, NULL);

    if (r == NULL)
        return;
    r->in.ref.version = version;
    r->in.ref.epoch = epoch;
    ml_submit(a->ml, r);
}

/* Releases record i and drops it from the table. */
static void rec_end(struct mc_agent *a, struct pin_tab *t, uint32_t i)
{
    struct pin_rec *p = &t->v[i];

    pin_release(a, p->key, p->key_len, p->version, p->epoch);
    free(p->key);
    t->v[i] = t->v[--t->n];
}

static int rec_add(struct client *c, const struct ml_req *r, uint64_t expires_ms)
{
    struct pin_tab *t = c->pins;
    struct pin_rec *p;

    if (t == NULL) {
        t = calloc(1, sizeof(*t));
        if (t == NULL)
            return MC_ERR_NOMEM;
        c->pins = t;
    }
    if (t->n == PIN_MAX_PER_CLIENT)
        return MC_ERR_NO_SPACE;
    if (t->n == t->cap) {
        uint32_t cap = t->cap == 0 ? 64 : 2 * t->cap;
        struct pin_rec *v = realloc(t->v, cap * sizeof(*v));

        if (v == NULL)
            return MC_ERR_NOMEM;
        t->v = v;
        t->cap = cap;
    }
    p = &t->v[t->n];
    p->key = malloc(r->key_len);
    if (p->key == NULL)
        return MC_ERR_NOMEM;
    memcpy(p->key, r->key, r->key_len);
    p->key_len = (uint16_t)r->key_len;
    p->id = r->tag;
    p->mark = r->in.ref.version; /* where pin_op_pin left the PIN's arg1 */
    p->version = r->out.get.lease.version;
    p->epoch = r->out.get.lease.epoch;
    p->expires_ms = expires_ms;
    t->n++;
    return 0;
}

static void pin_answered(void *ctx, struct ml_req *r)
{
    struct client *c = ctx;
    struct mc_agent *a = agent_of(c);
    int res = r->res, err;

    if (res == 0) {
        uint64_t exp = mc_agent_now_ms() + a->cfg.master.pin_ttl_ms;

        /* an in-process master's clock is ours: its expiry is exact (a remote one's is not
         * comparable, and the earlier of the two ends the pin) */
        if (a->master != NULL && r->out.get.lease.expires_ms < exp)
            exp = r->out.get.lease.expires_ms;
        err = c->state == CL_ACTIVE ? rec_add(c, r, exp) : MC_ERR_CANCELED;
        if (err != 0) {
            /* not recorded: nobody could end it, so it ends now */
            pin_release(a, r->key, r->key_len, r->out.get.lease.version,
                        r->out.get.lease.epoch);
            res = err;
        } else {
            res = 1;
        }
    } else if (res == MC_ERR_NOT_FOUND) {
        res = 0;
    }
    if (c->state == CL_ACTIVE)
        client_cqe_res(c, r->user_data, res);
    ml_req_free(a->ml, r);
    client_put(c);
}

void pin_op_pin(struct mc_agent *a, struct client *c, const struct mc_sqe *s, const char *key,
                size_t key_len)
{
    struct ml_req *r;

    if (s->arg0 == 0) {
        client_cqe_res(c, s->user_data, MC_ERR_INVALID);
        return;
    }
    if (pin_count(c) >= PIN_MAX_PER_CLIENT) {
        client_cqe_res(c, s->user_data, MC_ERR_NO_SPACE);
        return;
    }
    r = ml_req_new(a->ml, ML_PIN, key, key_len, pin_answered, c);
    if (r == NULL) {
        client_cqe_res(c, s->user_data, MC_ERR_NOMEM);
        return;
    }
    r->user_data = s->user_data;
    r->tag = s->arg0;
    r->in.ref.version = s->arg1; /* ML_PIN sends only the key: in is free to carry it */
    client_get(c);
    ml_submit(a->ml, r);
}

void pin_op_unpin(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                  const char *key, size_t key_len)
{
    struct pin_tab *t = c->pins;
    uint64_t now = mc_agent_now_ms();
    uint32_t i = 0;
    int n = 0;

    while (t != NULL && i < t->n) {
        const struct pin_rec *p = &t->v[i];

        if (p->id == s->arg0 && (s->arg1 == 0 || p->mark >= s->arg1) &&
            (key_len == 0 ||
             (p->key_len == key_len && memcmp(p->key, key, p->key_len) == 0))) {
            if ((int64_t)(now - p->expires_ms) < 0)
                n++; /* a lapsed one (the tick has not dropped it yet) held nothing */
            rec_end(a, t, i); /* the last record moved into i: look at i again */
        } else {
            i++;
        }
    }
    client_cqe_res(c, s->user_data, n);
}

void pin_tick(struct mc_agent *a, struct client *c, uint64_t now_ms)
{
    struct pin_tab *t = c->pins;
    uint32_t i = 0;

    while (t != NULL && i < t->n) {
        if ((int64_t)(now_ms - t->v[i].expires_ms) >= 0)
            rec_end(a, t, i);
        else
            i++;
    }
}

void pin_client_closing(struct mc_agent *a, struct client *c)
{
    struct pin_tab *t = c->pins;

    while (t != NULL && t->n > 0)
        rec_end(a, t, t->n - 1);
}

void pin_detach(struct client *c)
{
    struct pin_tab *t = c->pins;

    if (t == NULL)
        return;
    for (uint32_t i = 0; i < t->n; i++)
        free(t->v[i].key); /* closing released them at the master already */
    free(t->v);
    free(t);
    c->pins = NULL;
}
