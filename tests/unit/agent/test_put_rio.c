/*
 * The put and the GET of the agent against a loopback replica I/O (daemon/agent/rio.h):
 * a real in-process master and master link, a real client region, and a replica I/O whose
 * "peer" is a buffer of this process, completing only when the test pumps it. This holds
 * the transfer contract of the agent's rooms without UCX:
 *   - a put is neither answered nor published while a write to a replica is not final;
 *   - a failed write revokes the put and answers MC_ERR_UNAVAILABLE, nothing published;
 *   - a GET with no replica here lands one through the replica I/O, answers where it
 *     landed, and RELEASE gives the landing block back.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mc/mc.h>
#include <mc/mc_status.h>

#include "daemon/agent/agent_int.h"
#include "daemon/agent/lease.h"
#include "daemon/agent/put.h"
#include "shm/checksum.h"

#define T_REMOTE (8u << 20)
#define T_OBJ (300u * 1024u + 17u) /* several chunks and a tail */

/* --- the loopback replica I/O -------------------------------------------------------- */

struct t_pending {
    struct mc_rio_write w;
    struct mc_master_replica r;
    mc_rio_write_fn done;
    void *ctx;
};

static struct {
    uint8_t *remote;            /* the owner's segment */
    uint64_t remote_base;       /* its address as mounted */
    struct t_pending q[64];
    int nq;
    int writes, reads;
    struct mc_agent *a;
} T;

static int t_write(void *impl, const struct mc_rio_write *w, mc_rio_write_fn done, void *ctx)
{
    (void)impl;
    ck_assert_int_lt(T.nq, 64);
    T.q[T.nq].w = *w;
    T.q[T.nq].r = *w->r;
    T.q[T.nq].done = done;
    T.q[T.nq].ctx = ctx;
    T.nq++;
    T.writes++;
    return 0; /* final later: t_pump */
}

/* Completes every queued write: its bytes land in the owner's buffer unless status fails. */
static void t_pump(int status)
{
    int n = T.nq;

    T.nq = 0;
    for (int i = 0; i < n; i++) {
        struct t_pending *p = &T.q[i];

        if (status == 0)
            memcpy(T.remote + p->r.offset + p->w.from, p->w.src, p->w.len);
        p->done(p->ctx, status);
    }
}

static int t_read(void *impl, const struct mc_master_get_result *g, uint32_t skip,
                  uint32_t tenant, uint64_t deadline_ms, uint8_t *arena, uint64_t arena_room,
                  mc_rio_read_fn done, mc_rio_wanted_fn wanted, void *ctx)
{
    struct mc_agent *a = impl;
    uint64_t len = mc_shm_alloc_len(g->size, (g->flags & MC_MASTER_PUT_NO_CHECKSUM) == 0);
    uint32_t id;
    int err;

    (void)skip;
    (void)deadline_ms;
    (void)arena;
    (void)arena_room;
    ck_assert(wanted(ctx));
    ck_assert_uint_eq(tenant, 0);
    T.reads++;
    err = mc_alloc_alloc(a->ten[0].land, len, &id);
    if (err != 0)
        return err;
    memcpy(a->ten[0].land_seg->base + mc_alloc_offset(a->ten[0].land, id),
           T.remote + g->rep[0].offset, len);
    done(ctx, 0, id, 0);
    return 0;
}

static uint64_t t_ttl(void *impl)
{
    (void)impl;
    return 5000;
}

static const struct mc_rio_ops t_rio_ops = {.write = t_write, .read = t_read,
                                            .lease_ttl_ms = t_ttl};

/* --- an agent of rooms, without a loop --------------------------------------------------- */

static struct mc_agent *t_agent(void)
{
    struct mc_agent *a = calloc(1, sizeof(*a));
    struct mc_master_seg_desc d;
    uint32_t owner, seg;

    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(mc_config_set_defaults(mc_agent_config_table, &a->cfg), 0);
    ck_assert_int_eq(mc_master_create(&a->cfg.master, NULL, NULL, &a->master), 0);
    ck_assert_int_eq(mc_master_node_register(a->master, "writer", NULL, &a->node), 0);
    ck_assert_int_eq(mc_master_node_register(a->master, "owner", NULL, &owner), 0);
    T.remote = aligned_alloc(4096, T_REMOTE);
    ck_assert_ptr_nonnull(T.remote);
    memset(T.remote, 0xEE, T_REMOTE);
    d = (struct mc_master_seg_desc){.node = owner, .kind = MC_SEG_DRAM,
                                    .base = (uint64_t)(uintptr_t)T.remote, .size = T_REMOTE};
    ck_assert_int_eq(mc_master_segment_mount(a->master, &d, &seg), 0);
    ck_assert_int_eq(ml_create_local(a->master, &a->ml), 0);
    /* one tenant, the default; a client node: no replica is ever ours */
    a->ntenants = 1;
    a->ten = calloc(1, sizeof(*a->ten));
    a->tcfg = calloc(1, sizeof(*a->tcfg));
    ck_assert_ptr_nonnull(a->ten);
    ck_assert_ptr_nonnull(a->tcfg);
    a->ten[0].seg = NULL;
    a->ten[0].seg_id = UINT32_MAX;
    ck_assert_int_eq(mc_seg_dram_create("t-landing", 4u << 20, false, false,
                                        &a->ten[0].land_seg), 0);
    ck_assert_int_eq(mc_alloc_create(4u << 20, MC_SHM_CHUNK / 16, &a->ten[0].land), 0);
    a->ten[0].land_idx = 0;
    a->put_size_max = UINT64_MAX;
    a->open_put_limit = UINT64_C(1) << 30;
    a->rio = (struct mc_rio){.ops = &t_rio_ops, .impl = a};
    T.a = a;
    return a;
}

static struct client *t_client(struct mc_agent *a)
{
    struct client *c = calloc(1, sizeof(*c));
    struct mc_shm_layout lay;

    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(mc_shm_layout_init(&lay, 64, 64, 1u << 20, 4, 16), 0);
    ck_assert_int_eq(mc_shm_region_create("t-put-rio", &lay, 1, &c->r), 0);
    c->lay = c->r->lay;
    c->cs = &a->cs;
    c->state = CL_ACTIVE;
    c->efd = -1;
    c->refs = 1;
    c->pid = getpid();
    c->uid = getuid();
    ck_assert_int_eq(put_attach(c), 0);
    ck_assert_int_eq(lease_attach(c), 0);
    a->cs.list = c;
    a->cs.n = 1;
    return c;
}

/* Submits one op as the client ring would hand it over (inflight counted). */
static void t_op(struct mc_agent *a, struct client *c, struct mc_sqe *s, const char *key)
{
    c->inflight++;
    if (s->opcode == MC_OP_GET)
        lease_op_get(a, c, s, key, s->key_len, mc_agent_now_ms() + 5000);
    else if (s->opcode == MC_OP_RELEASE)
        lease_op_release(a, c, s);
    else
        put_op(a, c, s, key, s->key_len, mc_agent_now_ms() + 5000);
}

static const struct mc_cqe *t_cqe(const struct client *c, uint32_t i)
{
    return i < c->cq_tail ? mc_shm_cqe_at(c->r, i) : NULL;
}

/* The object's trailer holds each chunk's xxh3 and the xxh3 over them (shm/ring.h). */
static int t_verify(const uint8_t *obj, uint64_t size)
{
    uint64_t n = mc_shm_nchunks(size), tr[64], want;

    ck_assert_uint_le(n, 63);
    memcpy(tr, obj + mc_shm_trailer_off(size), 8 * (n + 1));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = i + 1 < n ? MC_SHM_CHUNK : size - i * MC_SHM_CHUNK;

        if (XXH3_64bits(obj + i * MC_SHM_CHUNK, len) != tr[i])
            return -1;
    }
    want = XXH3_64bits(tr, 8 * n);
    return want == tr[n] ? 0 : -1;
}

static void t_fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 31u + seed);
}

/* A one-shot PUT from staging, its copy run to the end. */
static void t_put(struct mc_agent *a, struct client *c, const char *key, uint64_t user_data)
{
    struct mc_sqe s;

    memset(&s, 0, sizeof(s));
    s.opcode = MC_OP_PUT;
    s.user_data = user_data;
    s.key_len = (uint16_t)strlen(key);
    s.data_off = 0;
    s.data_len = T_OBJ;
    s.replicas = 1;
    t_fill(c->r->staging, T_OBJ, 7);
    t_op(a, c, &s, key);
    while (put_copy_round(a, 64u << 10, mc_agent_now_ms()))
        ;
}

START_TEST(test_put_answers_only_after_the_write_is_final)
{
    struct mc_agent *a = t_agent();
    struct client *c = t_client(a);
    uint8_t want[T_OBJ];
    const struct mc_cqe *e;
    struct mc_master_stat st;

    t_put(a, c, "k1", 11);
    ck_assert_int_ge(T.writes, 1);
    ck_assert_int_eq(c->cq_tail, 0); /* the write is not final: no answer */
    ck_assert_int_eq(mc_master_exist(a->master, "k1", 2), 0); /* and nothing published */
    t_pump(0);
    e = t_cqe(c, 0);
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->user_data, 11);
    ck_assert_int_eq(e->res, 0);
    ck_assert_int_eq(mc_master_exist(a->master, "k1", 2), 1);
    ck_assert_int_eq(mc_master_stat(a->master, "k1", 2, &st), 0);
    ck_assert_uint_eq(st.size, T_OBJ);
    ck_assert_int_eq(c->nputs, 0);
    ck_assert_uint_eq(c->open_put_bytes, 0);
    t_fill(want, T_OBJ, 7);
    {
        struct mc_master_get_result g;

        ck_assert_int_eq(mc_master_get_replicas(a->master, "k1", 2, &g), 0);
        ck_assert_uint_eq(g.nrep, 1);
        /* the owner holds the bytes and the chunk checksums the agent computed */
        ck_assert_mem_eq(T.remote + g.rep[0].offset, want, T_OBJ);
        ck_assert_int_eq(t_verify(T.remote + g.rep[0].offset, T_OBJ), 0);
        struct mc_master_ref ref = {.key = "k1", .key_len = 2, .version = g.lease.version,
                                    .epoch = g.lease.epoch};

        mc_master_lease_release(a->master, 1, &ref);
    }
}
END_TEST

START_TEST(test_put_failed_write_revokes)
{
    struct mc_agent *a = t_agent();
    struct client *c = t_client(a);
    struct mc_master_stats ms;
    const struct mc_cqe *e;

    t_put(a, c, "k2", 12);
    ck_assert_int_eq(c->cq_tail, 0);
    t_pump(MC_ERR_CANCELED); /* the peer's endpoint went: read as unavailable */
    e = t_cqe(c, 0);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->res, MC_ERR_UNAVAILABLE);
    ck_assert_int_eq(mc_master_exist(a->master, "k2", 2), 0);
    mc_master_get_stats(a->master, &ms);
    ck_assert_uint_eq(ms.puts_revoked, 1);
    ck_assert_int_eq(c->nputs, 0);
    ck_assert_uint_eq(c->open_put_bytes, 0);
}
END_TEST

START_TEST(test_get_lands_through_replica_io)
{
    struct mc_agent *a = t_agent();
    struct client *c = t_client(a);
    uint8_t want[T_OBJ];
    const struct mc_cqe *e;
    struct mc_sqe s;

    t_put(a, c, "k3", 13);
    t_pump(0);
    ck_assert_int_eq(t_cqe(c, 0)->res, 0);
    memset(&s, 0, sizeof(s));
    s.opcode = MC_OP_GET;
    s.user_data = 14;
    s.key_len = 2;
    t_op(a, c, &s, "k3");
    ck_assert_int_eq(T.reads, 1);
    e = t_cqe(c, 1);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->res, 0);
    ck_assert_uint_eq(e->size, T_OBJ);
    ck_assert_uint_eq(e->loc_seg, a->ten[0].land_idx);
    t_fill(want, T_OBJ, 7);
    ck_assert_mem_eq(a->ten[0].land_seg->base + e->loc_off, want, T_OBJ);
    ck_assert_uint_gt(mc_alloc_used_bytes(a->ten[0].land), 0);
    ck_assert_int_eq(c->leases[e->lease_id].state, LEASE_HELD);
    memset(&s, 0, sizeof(s));
    s.opcode = MC_OP_RELEASE;
    s.user_data = 15;
    s.arg0 = e->lease_id;
    t_op(a, c, &s, "");
    ck_assert_int_eq(t_cqe(c, 2)->res, 0);
    ck_assert_uint_eq(mc_alloc_used_bytes(a->ten[0].land), 0); /* the landing block is back */
    ck_assert_int_eq(c->leases[s.arg0].state, LEASE_FREE);
}
END_TEST

static Suite *t_suite(void)
{
    Suite *s = suite_create("agent_put_rio");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_put_answers_only_after_the_write_is_final);
    tcase_add_test(tc, test_put_failed_write_revokes);
    tcase_add_test(tc, test_get_lands_through_replica_io);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(t_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
