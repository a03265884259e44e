/* libFuzzer target: the shared-memory defences (shm/), where a client region is hostile.
 *   - mc_shm_sqe_check, the SQE validator: an accepted SQE keeps its promises (key length
 *     within the key slot, [data_off, +data_len) inside staging and so inside the region,
 *     flags, put options), and an SQE made legal by the documented rules is accepted.
 *   - the SQ consumer's index arithmetic: client_drain_sq (daemon/agent/agent.c) is not
 *     callable alone, so this replays its reads with the helpers it uses (mc_ring_ready,
 *     mc_shm_sqe_at, mc_shm_key_slot) on rings of exactly the layout's size (ASan sees any
 *     stray byte), under hostile head/tail values; and the CQ producer's (mc_ring_space,
 *     mc_shm_cqe_at).
 *   - mc_shm_layout_init and mc_shm_layout_check (a client checks the header an agent
 *     sends): what they accept is a layout whose sections lie in the region, aligned and
 *     apart, checked here with 128-bit arithmetic.
 * Input: byte 0 picks the mode (% 4): 0 and 1 ring + SQEs, 2 layout_init, 3 layout_check.
 * Ring mode: bytes 1..8 a legal layout (t_layout_from), 9..28 five u32 (SQ head, SQ tail,
 * the agent's head, CQ head, the agent's CQ tail), then 64-byte SQEs (zeroes past the end).
 * Layout_check mode: bytes 1..8 a legal layout, then 9-byte records that change a field. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mc/mc.h"
#include "mc/mc_status.h"
#include "shm/region.h"
#include "shm/sqe_check.h"

#define T_MIB      (1u << 20)
#define T_PER_TURN 64 /* = CLIENT_SQES_PER_TURN of daemon/agent/client.h */

typedef unsigned __int128 t_u128;

struct t_bytes {
    const uint8_t *p;
    size_t left;
};

/* The next n bytes (n <= 8) as a little-endian number; missing bytes read as 0. */
static uint64_t t_take(struct t_bytes *b, size_t n)
{
    uint64_t v = 0;

    for (size_t i = 0; i < n; i++) {
        if (b->left > 0) {
            v |= (uint64_t)b->p[0] << (8 * i);
            b->p++;
            b->left--;
        }
    }
    return v;
}

static bool t_is_pow2(uint64_t v)
{
    return v != 0 && (v & (v - 1)) == 0;
}

/* The limits mc_shm_layout_init documents for its parameters. */
static bool t_params_legal(uint64_t sq, uint64_t cq, uint64_t slot, uint64_t slots,
                           uint64_t inflight)
{
    return t_is_pow2(sq) && t_is_pow2(cq) && sq <= MC_SHM_ENTRIES_MAX &&
           cq <= MC_SHM_ENTRIES_MAX && cq >= sq && slot != 0 && slot % MC_SHM_CHUNK == 0 &&
           slots >= 1 && (t_u128)slot * slots <= MC_SHM_STAGING_MAX && inflight >= 1 &&
           inflight <= cq;
}

/* What mc_shm_layout_check promises of a layout it accepts (region.h), computed apart. */
static bool t_layout_sound(const struct mc_shm_layout *l)
{
    const t_u128 size = l->region_size;
    struct {
        uint64_t off;
        t_u128 len;
        uint64_t align;
    } s[6] = {
        {l->sq_ctrl_off, sizeof(struct mc_shm_ring_ctrl), 64},
        {l->sqes_off, (t_u128)l->sq_entries * sizeof(struct mc_sqe), 64},
        {l->keys_off, (t_u128)l->sq_entries * MC_SHM_KEY_SLOT, 64},
        {l->cq_ctrl_off, sizeof(struct mc_shm_ring_ctrl), 64},
        {l->cqes_off, (t_u128)l->cq_entries * sizeof(struct mc_cqe), 64},
        {l->staging_off, l->staging_size, 4096},
    };

    if (!t_params_legal(l->sq_entries, l->cq_entries, l->staging_slot_size, l->staging_slots,
                        l->max_inflight) ||
        l->staging_size != (uint64_t)l->staging_slot_size * l->staging_slots ||
        l->region_size % 4096 != 0)
        return false;
    for (int i = 0; i < 6; i++) {
        if (s[i].off < MC_SHM_HDR_SIZE || s[i].off % s[i].align != 0 ||
            s[i].off + s[i].len > size)
            return false;
        for (int j = 0; j < i; j++) {
            if (s[i].off < s[j].off + s[j].len && s[j].off < s[i].off + s[i].len)
                return false;
        }
    }
    return true;
}

/* The largest region mc_shm_layout_init makes: a bound mc_shm_layout_check may apply. */
static uint64_t t_region_largest(void)
{
    static uint64_t largest;
    struct mc_shm_layout l;

    if (largest == 0) {
        if (mc_shm_layout_init(&l, MC_SHM_ENTRIES_MAX, MC_SHM_ENTRIES_MAX,
                               (uint32_t)MC_SHM_STAGING_MAX, 1, MC_SHM_ENTRIES_MAX) != 0)
            abort();
        largest = l.region_size;
    }
    return largest;
}

/* A layout mc_shm_layout_init must accept, from 8 input bytes. */
static void t_layout_from(struct t_bytes *b, struct mc_shm_layout *l)
{
    uint32_t sq_log = (uint32_t)t_take(b, 1) % 17;
    uint32_t cq_log = sq_log + (uint32_t)t_take(b, 1) % (17 - sq_log);
    uint32_t slot_mib = 1 + (uint32_t)t_take(b, 2) % 1024;
    uint32_t slots = 1 + (uint32_t)t_take(b, 2) % (1024 / slot_mib);
    uint32_t inflight = 1 + (uint32_t)(t_take(b, 2) % (1u << cq_log));

    if (mc_shm_layout_init(l, 1u << sq_log, 1u << cq_log, slot_mib * T_MIB, slots, inflight) !=
            0 ||
        mc_shm_layout_check(l) != 0 || !t_layout_sound(l) || l->client_id != 0)
        abort();
}

/* --- SQEs ------------------------------------------------------------------------------- */

static bool t_op_uses_key(unsigned int op)
{
    return op == MC_OP_PUT || op == MC_OP_PUT_START || op == MC_OP_GET || op == MC_OP_EXIST ||
           op == MC_OP_REMOVE || op == MC_OP_STAT || op == MC_OP_REMOVE_PREFIX ||
           op == MC_OP_DRAIN || op == MC_OP_PIN || op == MC_OP_TOUCH;
}

static bool t_op_uses_staging(unsigned int op)
{
    return op == MC_OP_PUT || op == MC_OP_PUT_DATA || op == MC_OP_STATS || op == MC_OP_LIST;
}

static bool t_op_takes_source(unsigned int op)
{
    return op == MC_OP_PUT || op == MC_OP_PUT_DATA;
}

/* The promises of an accepted SQE (sqe_check.h, and the arena / user-memory sources). */
static void t_sqe_promises(const struct mc_shm_layout *l, const struct mc_sqe *s)
{
    const uint8_t src = s->flags & (MC_SQE_F_ARENA | MC_SQE_F_USER);

    if (s->opcode >= MC_OP__COUNT)
        abort();
    if (s->flags & MC_SQE_F_DEV) {
        /* a device buffer (its import checked by the agent): the op's only source flag, a
         * put's, with bytes, in a device-buffer slot that exists */
        if (s->flags != MC_SQE_F_DEV || !t_op_takes_source(s->opcode) || s->data_len == 0 ||
            (s->data_off >> MC_SHM_ARENA_SHIFT) >= MC_SHM_MAX_DEVBUFS)
            abort();
    } else if ((s->flags & ~(MC_SQE_F_NO_CQE | MC_SQE_F_ARENA | MC_SQE_F_USER |
                             MC_SQE_F_TAIL_APART | MC_SQE_F_ARENA_DATA)) != 0 ||
        ((s->flags & MC_SQE_F_NO_CQE) && s->opcode != MC_OP_RELEASE) ||
        /* a streamed arena put: named on its PUT_START, alone */
        ((s->flags & MC_SQE_F_ARENA_DATA) &&
         (s->opcode != MC_OP_PUT_START || s->flags != MC_SQE_F_ARENA_DATA)) ||
        /* the trailer apart: a GET into an arena only */
        ((s->flags & MC_SQE_F_TAIL_APART) &&
         (s->opcode != MC_OP_GET || src != MC_SQE_F_ARENA)) ||
        (src != 0 && !(s->opcode == MC_OP_GET && src == MC_SQE_F_ARENA) &&
         (!t_op_takes_source(s->opcode) || src == (MC_SQE_F_ARENA | MC_SQE_F_USER))))
        abort(); /* a GET may name an arena destination: the agent checks its span */
    if (t_op_uses_key(s->opcode)) {
        if (s->key_len == 0 || s->key_len > MC_SHM_KEY_SLOT)
            abort();
    } else if (s->opcode == MC_OP_LIST || s->opcode == MC_OP_UNPIN) {
        if (s->key_len > MC_SHM_KEY_SLOT)
            abort();
    } else if (s->key_len != 0) {
        abort();
    }
    if (src == MC_SQE_F_ARENA && s->opcode != MC_OP_GET) {
        if (s->data_len == 0 || (s->data_off >> MC_SHM_ARENA_SHIFT) >= MC_SHM_MAX_ARENAS)
            abort();
    } else if (src == MC_SQE_F_USER) {
        if (s->data_len == 0 || (t_u128)s->data_off + s->data_len > UINT64_MAX)
            abort();
    } else if (!(s->flags & MC_SQE_F_DEV) && t_op_uses_staging(s->opcode)) {
        /* inside staging, so inside the region: the agent writes and reads it there */
        if (s->data_len == 0 || (t_u128)s->data_off + s->data_len > l->staging_size ||
            (t_u128)l->staging_off + s->data_off + s->data_len > l->region_size)
            abort();
        if (s->opcode == MC_OP_PUT_DATA && s->data_len > l->staging_slot_size)
            abort();
    }
    if (s->opcode == MC_OP_PUT || s->opcode == MC_OP_PUT_START) {
        if ((s->put_flags & ~(uint32_t)MC_PUT_FLAGS_ALL) != 0 ||
            (s->put_flags & (MC_PUT_PIN_SOFT | MC_PUT_PIN_HARD)) ==
                (MC_PUT_PIN_SOFT | MC_PUT_PIN_HARD) ||
            s->replicas > MC_SHM_MAX_REPLICAS)
            abort();
    }
}

/* s made legal by the documented rules, keeping as much of it as possible. */
static void t_sqe_legalise(const struct mc_shm_layout *l, struct mc_sqe *s)
{
    const uint8_t op = s->opcode % MC_OP__COUNT;
    uint8_t src = s->flags & (MC_SQE_F_ARENA | MC_SQE_F_USER);

    s->opcode = op;
    if (!t_op_takes_source(op) || src == (MC_SQE_F_ARENA | MC_SQE_F_USER))
        src = 0;
    s->flags = src | (op == MC_OP_RELEASE ? s->flags & MC_SQE_F_NO_CQE : 0) |
               (op == MC_OP_PUT_START && s->flags == MC_SQE_F_ARENA_DATA ? MC_SQE_F_ARENA_DATA
                                                                         : 0);
    if (t_op_uses_key(op))
        s->key_len = 1 + s->key_len % MC_SHM_KEY_SLOT;
    else if (op == MC_OP_LIST)
        s->key_len %= MC_SHM_KEY_SLOT + 1;
    else
        s->key_len = 0;
    if (src == MC_SQE_F_ARENA) {
        s->data_len = s->data_len == 0 ? 1 : s->data_len;
        s->data_off &= (UINT64_C(1) << (MC_SHM_ARENA_SHIFT + 8)) - 1;
    } else if (src == MC_SQE_F_USER) {
        s->data_len = s->data_len == 0 ? 1 : s->data_len;
        if (s->data_off > UINT64_MAX - s->data_len)
            s->data_off = UINT64_MAX - s->data_len;
    } else if (t_op_uses_staging(op)) {
        uint64_t max = op == MC_OP_PUT_DATA ? l->staging_slot_size : l->staging_size;

        s->data_len = 1 + s->data_len % max;
        s->data_off %= l->staging_size - s->data_len + 1;
    }
    if (op == MC_OP_PUT || op == MC_OP_PUT_START) {
        s->put_flags &= MC_PUT_FLAGS_ALL;
        if (s->put_flags & MC_PUT_PIN_SOFT)
            s->put_flags &= ~(uint32_t)MC_PUT_PIN_HARD;
        s->replicas %= MC_SHM_MAX_REPLICAS + 1;
    }
}

static void t_sqe_one(const struct mc_shm_layout *l, const struct mc_sqe *sqe)
{
    struct mc_sqe s = *sqe;

    if (mc_shm_sqe_check(l, &s) == 0)
        t_sqe_promises(l, &s);
    t_sqe_legalise(l, &s);
    if (mc_shm_sqe_check(l, &s) != 0)
        abort();
}

/* --- the rings -------------------------------------------------------------------------- */

static bool t_in(const void *p, size_t len, const void *base, size_t size)
{
    const uint8_t *q = p, *b = base;

    return q >= b && len <= size && (size_t)(q - b) <= size - len;
}

/* Ring arrays of each size, each an allocation of exactly its size (so ASan sees a byte
 * past the end), kept from one input to the next: allocating megabytes per input costs
 * most of the time. Whatever an input reads it writes first, so runs stay reproducible. */
static struct mc_sqe *t_sqes[17];
static uint8_t *t_keys[17];
static struct mc_cqe *t_cqes[17];
static struct mc_shm_ring_ctrl t_sq, t_cq;

static unsigned int t_log2(uint32_t v)
{
    return (unsigned int)__builtin_ctz(v);
}

static bool t_rings_get(struct mc_shm_region *r)
{
    const unsigned int sq = t_log2(r->lay.sq_entries), cq = t_log2(r->lay.cq_entries);

    if (t_sqes[sq] == NULL) {
        t_sqes[sq] = malloc((size_t)r->lay.sq_entries * sizeof(struct mc_sqe));
        t_keys[sq] = malloc((size_t)r->lay.sq_entries * MC_SHM_KEY_SLOT);
    }
    if (t_cqes[cq] == NULL)
        t_cqes[cq] = malloc((size_t)r->lay.cq_entries * sizeof(struct mc_cqe));
    r->sq = &t_sq;
    r->cq = &t_cq;
    r->sqes = t_sqes[sq];
    r->keys = t_keys[sq];
    r->cqes = t_cqes[cq];
    return r->sqes != NULL && r->keys != NULL && r->cqes != NULL;
}

/* A region of a legal layout with hostile ring indices, read as client_drain_sq does. */
static int t_ring_mode(struct t_bytes *b)
{
    struct mc_shm_region r = {.fd = -1};
    uint32_t sq_head, sq_tail, head, cq_head, cq_tail, ready, space;
    char key[MC_SHM_KEY_SLOT];
    size_t sqes_size, keys_size, cqes_size;

    t_layout_from(b, &r.lay);
    sq_head = (uint32_t)t_take(b, 4);
    sq_tail = (uint32_t)t_take(b, 4);
    head = (uint32_t)t_take(b, 4);
    cq_head = (uint32_t)t_take(b, 4);
    cq_tail = (uint32_t)t_take(b, 4);
    if (!t_rings_get(&r))
        return 0;
    sqes_size = (size_t)r.lay.sq_entries * sizeof(struct mc_sqe);
    keys_size = (size_t)r.lay.sq_entries * MC_SHM_KEY_SLOT;
    cqes_size = (size_t)r.lay.cq_entries * sizeof(struct mc_cqe);
    atomic_store(&r.sq->head, sq_head);
    atomic_store(&r.sq->tail, sq_tail);
    atomic_store(&r.cq->head, cq_head);
    atomic_store(&r.cq->tail, cq_tail);

    /* mc_ring_ready / mc_ring_space are the index difference, mod 2^32, and a count past the
     * ring (a tail no producer could write) shows on both sides */
    ready = mc_ring_ready(r.sq);
    space = mc_ring_space(r.sq, r.lay.sq_entries);
    if (ready != sq_tail - sq_head || space != r.lay.sq_entries - ready ||
        (ready <= r.lay.sq_entries) != (space <= r.lay.sq_entries))
        abort();
    if (ready > r.lay.sq_entries)
        return 0; /* client_drain_sq: a violation, the client is cut off */
    if (ready > T_PER_TURN)
        ready = T_PER_TURN;

    /* the client's SQEs (the rest of the input, then zeroes) at the agent's own head, which
     * need not be the head in the region; key slots hold a pattern */
    for (uint32_t n = 0; n < ready; n++) {
        struct mc_sqe *e = mc_shm_sqe_at(&r, head + n);
        const size_t k = b->left < sizeof(*e) ? b->left : sizeof(*e);

        memset(e, 0, sizeof(*e));
        memcpy(e, b->p, k);
        b->p += k;
        b->left -= k;
        memset(mc_shm_key_slot(&r, head + n), 'k', MC_SHM_KEY_SLOT);
    }

    /* client_drain_sq's reads: the SQE and its key slot at the agent's head */
    for (uint32_t n = 0; n < ready; n++, head++) {
        struct mc_sqe *e = mc_shm_sqe_at(&r, head);
        uint8_t *slot = mc_shm_key_slot(&r, head);
        struct mc_cqe *c;
        struct mc_sqe s;

        if (!t_in(e, sizeof(*e), r.sqes, sqes_size) || e != &r.sqes[head % r.lay.sq_entries] ||
            !t_in(slot, MC_SHM_KEY_SLOT, r.keys, keys_size) ||
            slot != r.keys + (size_t)(head % r.lay.sq_entries) * MC_SHM_KEY_SLOT)
            abort();
        memcpy(&s, e, sizeof(s));
        if (s.key_len <= MC_SHM_KEY_SLOT)
            memcpy(key, slot, s.key_len);
        t_sqe_one(&r.lay, &s);

        /* agent_cqe_post: its own tail, masked; only space == 0 is refused */
        if (mc_ring_space(r.cq, r.lay.cq_entries) == 0)
            continue;
        c = mc_shm_cqe_at(&r, cq_tail);
        if (!t_in(c, sizeof(*c), r.cqes, cqes_size) || c != &r.cqes[cq_tail % r.lay.cq_entries])
            abort();
        memset(c, 0, sizeof(*c));
        c->user_data = s.user_data;
        cq_tail++;
        mc_ring_publish_tail(r.cq, cq_tail);
    }
    mc_ring_publish_head(r.sq, head);
    if (atomic_load(&r.sq->head) != head || atomic_load(&r.cq->tail) != cq_tail)
        abort();
    return 0;
}

/* --- layouts ---------------------------------------------------------------------------- */

/* A parameter either raw (32 bits) or shaped like a legal one, by a selector bit. */
static uint32_t t_param(struct t_bytes *b, bool shaped, uint32_t unit)
{
    uint32_t v = (uint32_t)t_take(b, 4);

    if (!shaped)
        return v;
    return unit == 0 ? 1u << (v % 32) : unit * (v % 2048);
}

static int t_init_mode(struct t_bytes *b)
{
    const uint32_t shape = (uint32_t)t_take(b, 1);
    const uint32_t sq = t_param(b, shape & 1, 0), cq = t_param(b, shape & 2, 0);
    const uint32_t slot = t_param(b, shape & 4, T_MIB), slots = t_param(b, shape & 8, 1);
    const uint32_t inflight = t_param(b, shape & 16, 1);
    struct mc_shm_layout l;
    int err;

    memset(&l, 0xa5, sizeof(l));
    err = mc_shm_layout_init(&l, sq, cq, slot, slots, inflight);
    if ((err == 0) != t_params_legal(sq, cq, slot, slots, inflight) ||
        (err != 0 && err != MC_ERR_INVALID))
        abort();
    if (err == 0 &&
        (mc_shm_layout_check(&l) != 0 || !t_layout_sound(&l) || l.sq_entries != sq ||
         l.cq_entries != cq || l.staging_slot_size != slot || l.staging_slots != slots ||
         l.max_inflight != inflight || l.region_size > t_region_largest()))
        abort();
    return 0;
}

/* A legal layout, then fields replaced, moved or flipped by 9-byte records. */
static int t_check_mode(struct t_bytes *b)
{
    struct mc_shm_layout l;
    int err;

    t_layout_from(b, &l);
    while (b->left > 0) {
        const uint32_t what = (uint32_t)t_take(b, 1);
        const uint64_t v = t_take(b, 8);
        uint64_t *f64[] = {&l.region_size, &l.sq_ctrl_off, &l.sqes_off,    &l.keys_off,
                           &l.cq_ctrl_off, &l.cqes_off,    &l.staging_off, &l.staging_size};
        uint32_t *f32[] = {&l.sq_entries,    &l.cq_entries,   &l.staging_slot_size,
                           &l.staging_slots, &l.max_inflight, &l.client_id};
        const uint32_t nf = sizeof(f64) / sizeof(f64[0]) + sizeof(f32) / sizeof(f32[0]);
        const uint32_t f = what % nf, op = what / nf % 3;

        if (f < sizeof(f64) / sizeof(f64[0])) {
            uint64_t *p = f64[f];

            *p = op == 0 ? v : op == 1 ? *p + v : *p ^ v;
        } else {
            uint32_t *p = f32[f - sizeof(f64) / sizeof(f64[0])];

            *p = op == 0 ? (uint32_t)v : op == 1 ? *p + (uint32_t)v : *p ^ (uint32_t)v;
        }
    }
    err = mc_shm_layout_check(&l);
    if (err != 0 && err != MC_ERR_INVALID)
        abort();
    if (err == 0 && !t_layout_sound(&l))
        abort();
    /* and nothing sound within init's largest region is refused */
    if (err != 0 && t_layout_sound(&l) && l.region_size <= t_region_largest())
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct t_bytes b = {data, size};

    switch (t_take(&b, 1) % 4) {
    case 2:
        return t_init_mode(&b);
    case 3:
        return t_check_mode(&b);
    default:
        return t_ring_mode(&b);
    }
}
