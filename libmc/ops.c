/*
 * The synchronous object calls of <mc/mc.h>: mc_put, mc_get, mc_exist, mc_remove, mc_stat,
 * and the STATS op for mcctl. Each validates its arguments, builds SQEs, waits through the
 * engine (engine.c) and interprets the CQEs (docs/protocol.md, "Ops"). Not the ring
 * mechanics, not the handshake.
 *
 * Reads copy straight from the read-only segment mapping into the caller's buffer; every
 * location the agent names is checked against the mapping first, since the agent is
 * trusted less than nothing: a bad one poisons the client (MC_ERR_PROTO), it never makes
 * libmc read outside its mappings.
 */
#include <stdlib.h>
#include <string.h>

#include "shm/checksum.h"

#include "libmc/client.h"
#include "libmc/export.h"
#include "shm/sqe_check.h"

/* The key's length if it is valid (1 .. MC_KEY_MAX bytes), else MC_ERR_INVALID. */
int mc_client_key_check(const char *key, size_t *len_p)
{
    size_t n;

    if (key == NULL)
        return MC_ERR_INVALID;
    n = strnlen(key, MC_KEY_MAX + 1);
    if (n == 0 || n > MC_KEY_MAX)
        return MC_ERR_INVALID;
    *len_p = n;
    return 0;
}

/* Put options: MC_ERR_INVALID for unknown flags, both pins or reserved fields set;
 * MC_ERR_NO_SPACE for more replicas than the ring ABI carries (mc.h: they cannot be
 * placed), answered here because the agent counts such an SQE as a protocol violation. */
int mc_client_opts_check(const mc_put_opts_t *o)
{
    if (o == NULL)
        return 0;
    if ((o->flags & ~(uint32_t)MC_PUT_FLAGS_ALL) != 0)
        return MC_ERR_INVALID;
    if ((o->flags & MC_PUT_PIN_SOFT) && (o->flags & MC_PUT_PIN_HARD))
        return MC_ERR_INVALID;
    for (size_t i = 0; i < sizeof(o->reserved) / sizeof(o->reserved[0]); i++) {
        if (o->reserved[i] != 0)
            return MC_ERR_INVALID;
    }
    if (o->ttl_ms > MC_TTL_MAX_MS)
        return MC_ERR_INVALID; /* refused rather than capped: the caller asked for more */
    if (o->replicas > MC_SHM_MAX_REPLICAS)
        return MC_ERR_NO_SPACE;
    return 0;
}

/* A CQE result for an op that answers 0 or an error: a positive one breaks the protocol. */
static int res_status(struct mc_client *c, int32_t res)
{
    if (res > 0) {
        mc_client_poison(c, MC_ERR_PROTO);
        return MC_ERR_PROTO;
    }
    return res;
}

/* Submit one op without staging and wait for it. */
static int run_op(struct mc_client *c, struct mc_sqe *sqe, const char *key, size_t key_len,
                  uint64_t deadline, struct mc_cqe *cqe)
{
    uint32_t op;
    int err;

    err = mc_client_submit(c, sqe, key, key_len, -1, false, deadline, &op);
    if (err != 0)
        return err;
    return mc_client_wait(c, op, deadline, cqe);
}

static void sqe_put_init(struct mc_sqe *sqe, uint8_t opcode, const mc_put_opts_t *o)
{
    memset(sqe, 0, sizeof(*sqe));
    sqe->opcode = opcode;
    if (o != NULL) {
        sqe->put_flags = o->flags;
        sqe->replicas = o->replicas;
        sqe->ttl_ms = o->ttl_ms;
        /* preferred_node has no field in the SQE (ABI 1): a hint, dropped here */
    }
}

/* --- put -------------------------------------------------------------------------------- */

/* An object that fits one staging slot: one PUT op. */
static int put_small(struct mc_client *c, const char *key, size_t key_len, const void *buf,
                     size_t len, const mc_put_opts_t *o, uint64_t deadline)
{
    struct mc_sqe sqe;
    struct mc_cqe cqe;
    uint32_t slot, op;
    int err;

    err = mc_client_staging_get(c, deadline, &slot);
    if (err != 0)
        return err;
    memcpy(mc_client_staging_ptr(c, slot), buf, len);
    sqe_put_init(&sqe, MC_OP_PUT, o);
    sqe.data_off = mc_client_staging_off(c, slot);
    sqe.data_len = len;
    err = mc_client_submit(c, &sqe, key, key_len, (int32_t)slot, false, deadline, &op);
    if (err != 0) {
        mc_client_staging_put(c, slot);
        return err;
    }
    err = mc_client_wait(c, op, deadline, &cqe);
    if (err != 0)
        return err;
    return res_status(c, cqe.res);
}

/* Abort a started put: wait for the answer while the deadline allows (so a retry does not
 * meet our own PROCESSING version as MC_ERR_BUSY), else send it detached. */
static void put_abort(struct mc_client *c, uint32_t handle, uint64_t deadline)
{
    struct mc_sqe sqe;
    struct mc_cqe cqe;

    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_PUT_ABORT;
    sqe.arg0 = handle;
    if (mc_client_now_ns() < deadline) {
        (void)run_op(c, &sqe, NULL, 0, deadline, &cqe);
        return;
    }
    mc_client_submit_detached(c, &sqe);
}

/*
 * An object larger than a slot: PUT_START, then PUT_DATA pieces of one slot each at
 * offsets that are multiples of the slot size (itself a multiple of MC_SHM_CHUNK), up to
 * MC_CLIENT_PUT_WINDOW of them in flight, each in its own staging slot, then PUT_END.
 * Pieces are collected oldest first: the agent copies in order, so the oldest is the one
 * to wait for, and its slot is the next to come free.
 */
static int put_pieces(struct mc_client *c, const char *key, size_t key_len, const void *buf,
                      size_t len, const mc_put_opts_t *o, uint64_t deadline)
{
    uint32_t window[MC_CLIENT_PUT_WINDOW];
    uint32_t first = 0, npending = 0;
    size_t off = 0, piece;
    struct mc_sqe sqe;
    struct mc_cqe cqe;
    uint32_t handle, slot, op;
    bool have_slot;
    int err;

    sqe_put_init(&sqe, MC_OP_PUT_START, o);
    sqe.arg0 = len;
    err = run_op(c, &sqe, key, key_len, deadline, &cqe);
    if (err != 0)
        return err;
    err = res_status(c, cqe.res);
    if (err != 0)
        return err;
    handle = cqe.lease_id;

    while (off < len || npending > 0) {
        if (off < len && npending < MC_CLIENT_PUT_WINDOW) {
            /* with pieces in flight, never wait for a slot: wait for our oldest piece */
            have_slot = mc_client_staging_try_get(c, &slot);
            if (!have_slot && npending == 0) {
                err = mc_client_staging_get(c, deadline, &slot);
                if (err != 0)
                    break;
                have_slot = true;
            }
            if (have_slot) {
                piece = len - off < c->slot_size ? len - off : c->slot_size;
                memcpy(mc_client_staging_ptr(c, slot), (const uint8_t *)buf + off, piece);
                memset(&sqe, 0, sizeof(sqe));
                sqe.opcode = MC_OP_PUT_DATA;
                sqe.arg0 = handle;
                sqe.arg1 = off;
                sqe.data_off = mc_client_staging_off(c, slot);
                sqe.data_len = piece;
                /* likewise for op slots: with pieces in flight, our own uncollected pieces
                 * may hold the last ones, so take one only if it is free now */
                if (npending == 0)
                    err =
                        mc_client_submit(c, &sqe, NULL, 0, (int32_t)slot, false, deadline, &op);
                else
                    err = mc_client_try_submit(c, &sqe, NULL, 0, (int32_t)slot, deadline, &op);
                if (err != 0)
                    mc_client_staging_put(c, slot);
                if (err == 0) {
                    window[(first + npending) % MC_CLIENT_PUT_WINDOW] = op;
                    npending++;
                    off += piece;
                    continue;
                }
                if (err != MC_ERR_BUSY)
                    break;
                /* no op slot free now: collect our oldest piece below, then retry */
            }
        }
        op = window[first];
        first = (first + 1) % MC_CLIENT_PUT_WINDOW;
        npending--;
        err = mc_client_wait(c, op, deadline, &cqe);
        if (err == 0)
            err = res_status(c, cqe.res);
        if (err != 0)
            break;
    }
    if (err != 0) {
        /* The agent refuses PUT_ABORT (MC_ERR_BUSY) while pieces of the put are still being
         * copied: collect them first while the deadline allows. Past it, they are
         * abandoned (their staging slots stay taken until their CQEs arrive) and the abort
         * is best effort. */
        /* an agent that answered, even MC_ERR_UNAVAILABLE (its master is unreachable for
         * now), is still there to collect from and to abort at; only a lost one (the
         * client is poisoned) is not */
        bool agent_lost = atomic_load(&c->poison) != 0;
        bool collect = !agent_lost;

        while (npending > 0) {
            op = window[first];
            first = (first + 1) % MC_CLIENT_PUT_WINDOW;
            npending--;
            if (collect)
                collect = mc_client_wait(c, op, deadline, &cqe) == 0;
            else
                mc_client_abandon(c, op);
        }
        if (!agent_lost)
            put_abort(c, handle, deadline);
        return err;
    }

    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_PUT_END;
    sqe.arg0 = handle;
    err = run_op(c, &sqe, NULL, 0, deadline, &cqe);
    if (err != 0)
        return err; /* a timed-out PUT_END may have published: the caller's retry tells */
    return res_status(c, cqe.res);
}

MC_EXPORT int mc_put(mc_client_t *c, const char *key, const void *buf, size_t len,
                     const mc_put_opts_t *o)
{
    uint64_t deadline;
    size_t key_len;
    int err;

    if (c == NULL || buf == NULL || len == 0)
        return MC_ERR_INVALID;
    err = mc_client_key_check(key, &key_len);
    if (err != 0)
        return err;
    err = mc_client_opts_check(o);
    if (err != 0)
        return err;
    err = mc_client_enter(c);
    if (err != 0)
        return err;
    deadline = mc_client_deadline(c);
    /* arena memory (any size) and large buffers the agent may read itself: no copy here */
    if (mc_client_put_is_direct(c, buf, len))
        return mc_client_put_direct(c, key, key_len, buf, len, o, deadline);
    if (len <= c->slot_size)
        return put_small(c, key, key_len, buf, len, o, deadline);
    return put_pieces(c, key, key_len, buf, len, o, deadline);
}

/* --- get -------------------------------------------------------------------------------- */

static uint64_t load_u64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v)); /* the trailer need not be 8-aligned in the segment */
    return v;
}

#define COPY_SLICE (256u << 10)
#define MC_MASTER_NODE_NAME_MAX 63 /* a node name, bytes: as the master checks it */

/*
 * Copy an object from its segment into buf, verifying each MC_SHM_CHUNK chunk right after
 * copying it (hashing our copy, hot in cache, rather than the segment twice), then the
 * object checksum over the stored chunk values. On a mismatch the bytes written so far are
 * zeroed, so the caller's buffer never holds bytes that failed verification.
 */
int mc_client_copy_verified(uint8_t *buf, const uint8_t *obj, uint64_t size, bool checksum)
{
    const uint8_t *trailer = obj + mc_shm_trailer_off(size);
    uint64_t nchunks = mc_shm_nchunks(size);
    XXH3_state_t *xs = NULL;
    uint64_t off = 0, n;

    if (!checksum) {
        memcpy(buf, obj, (size_t)size);
        return 0;
    }
    if (nchunks > 1) {
        xs = XXH3_createState();
        if (xs == NULL)
            return MC_ERR_NOMEM;
    }
    for (uint64_t i = 0; i < nchunks; i++, off += n) {
        uint64_t h;

        n = size - off < MC_SHM_CHUNK ? size - off : MC_SHM_CHUNK;
        if (xs == NULL) {
            memcpy(buf + off, obj + off, (size_t)n);
            h = XXH3_64bits(buf + off, (size_t)n);
        } else {
            /* copy and hash a slice at a time, while the slice is still in L2: hashing a
             * whole 1 MiB chunk after copying it reads it back from L3 (docs/performance.md) */
            XXH3_64bits_reset(xs);
            for (uint64_t s = 0; s < n; s += COPY_SLICE) {
                size_t k = (size_t)(n - s < COPY_SLICE ? n - s : COPY_SLICE);

                memcpy(buf + off + s, obj + off + s, k);
                XXH3_64bits_update(xs, buf + off + s, k);
            }
            h = XXH3_64bits_digest(xs);
        }
        if (h != load_u64(trailer + 8 * i)) {
            XXH3_freeState(xs);
            memset(buf, 0, (size_t)(off + n));
            return MC_ERR_CORRUPT;
        }
    }
    XXH3_freeState(xs);
    if (XXH3_64bits(trailer, (size_t)(8 * nchunks)) != load_u64(trailer + 8 * nchunks)) {
        memset(buf, 0, (size_t)size);
        return MC_ERR_CORRUPT;
    }
    return 0;
}

/* The object of a GET CQE inside our mapping of its segment, or NULL if the agent named a
 * place outside it. */
const uint8_t *mc_client_get_location(struct mc_client *c, const struct mc_cqe *cqe,
                                      bool checksum)
{
    uint64_t seg_size, alloc;

    if (cqe->loc_seg >= c->nsegs)
        return NULL;
    seg_size = c->seg_size[cqe->loc_seg];
    /* size <= seg_size first, so that mc_shm_alloc_len cannot overflow */
    if (cqe->size == 0 || cqe->size > seg_size || cqe->loc_off > seg_size)
        return NULL;
    alloc = mc_shm_alloc_len(cqe->size, checksum);
    if (alloc > seg_size - cqe->loc_off)
        return NULL;
    return c->seg[cqe->loc_seg] + cqe->loc_off;
}

static int get_sync(mc_client_t *c, const char *key, size_t key_len, void *buf, size_t cap,
                    size_t *len_out);

MC_EXPORT int mc_get(mc_client_t *c, const char *key, void *buf, size_t cap, size_t *len_out)
{
    struct mc_arena_use use;
    size_t key_len;
    int err;

    if (c == NULL || (buf == NULL && cap > 0))
        return MC_ERR_INVALID;
    err = mc_client_key_check(key, &key_len);
    if (err != 0)
        return err;
    err = mc_client_enter(c);
    if (err != 0)
        return err;
    /* an arena buffer is busy for mc_buf_free while this call may write it */
    mc_arena_use(c, &use, buf, cap);
    err = get_sync(c, key, key_len, buf, cap, len_out);
    mc_arena_unuse(c, &use);
    return err;
}

/* One GET skipping the replicas in `skip`; *rep_p: the replica the answer named (0: none). */
static int get_once(mc_client_t *c, const char *key, size_t key_len, void *buf, size_t cap,
                    size_t *len_out, uint64_t skip, uint32_t *rep_p)
{
    struct mc_sqe sqe;
    struct mc_cqe cqe;
    const uint8_t *obj;
    bool checksum;
    int err;

    *rep_p = 0;
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_GET;
    sqe.arg0 = skip;              /* replicas that failed our checksum before */
    sqe.arg1 = (uint64_t)cap + 1; /* a remote object that cannot fit is not moved */
    err = run_op(c, &sqe, key, key_len, mc_client_deadline(c), &cqe);
    if (err != 0)
        return err;
    err = res_status(c, cqe.res);
    if (err == MC_ERR_TOO_LARGE && cqe.size > cap) {
        if (len_out != NULL)
            *len_out = (size_t)cqe.size;
        return err;
    }
    if (err != 0)
        return err;

    checksum = !(cqe.obj_flags & MC_PUT_NO_CHECKSUM);
    obj = mc_client_get_location(c, &cqe, checksum);
    if (obj == NULL) {
        mc_client_poison(c, MC_ERR_PROTO);
        return MC_ERR_PROTO;
    }
    *rep_p = cqe.replicas;
    if (cqe.size > cap) {
        mc_client_release(c, cqe.lease_id);
        if (len_out != NULL)
            *len_out = (size_t)cqe.size;
        return MC_ERR_TOO_LARGE;
    }
    /* an expired lease is not released: the agent ended it, and its id may be reused */
    if (mc_client_now_ms() > cqe.deadline_ms)
        return MC_ERR_LEASE_EXPIRED;
    err = mc_client_copy_verified(buf, obj, cqe.size, checksum);
    if (err == 0 && mc_client_now_ms() > cqe.deadline_ms) {
        /* the space may have been reused while we copied: discard */
        memset(buf, 0, (size_t)cqe.size);
        return MC_ERR_LEASE_EXPIRED;
    }
    mc_client_release(c, cqe.lease_id);
    if (err != 0)
        return err;
    if (len_out != NULL)
        *len_out = (size_t)cqe.size;
    return 0;
}

/* A replica whose bytes fail the checksum is skipped and the next one read (DESIGN.md §6):
 * MC_ERR_CORRUPT only when none is intact. */
static int get_sync(mc_client_t *c, const char *key, size_t key_len, void *buf, size_t cap,
                    size_t *len_out)
{
    uint64_t skip = 0;
    uint32_t rep, tries;
    int err;

    for (tries = 0; tries < MC_SHM_MAX_REPLICAS; tries++) {
        err = get_once(c, key, key_len, buf, cap, len_out, skip, &rep);
        if (err != MC_ERR_CORRUPT || rep == 0 || rep > MC_SHM_MAX_REPLICAS ||
            (skip >> (rep - 1) & 1))
            return err;
        skip |= UINT64_C(1) << (rep - 1);
    }
    return MC_ERR_CORRUPT;
}


/* --- lookups ---------------------------------------------------------------------------- */

/* A keyed op with no data: validation, submission, the CQE. */
static int key_op(mc_client_t *c, uint8_t opcode, const char *key, struct mc_cqe *cqe)
{
    struct mc_sqe sqe;
    size_t key_len;
    int err;

    if (c == NULL)
        return MC_ERR_INVALID;
    err = mc_client_key_check(key, &key_len);
    if (err != 0)
        return err;
    err = mc_client_enter(c);
    if (err != 0)
        return err;
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = opcode;
    return run_op(c, &sqe, key, key_len, mc_client_deadline(c), cqe);
}

MC_EXPORT int mc_exist(mc_client_t *c, const char *key)
{
    struct mc_cqe cqe;
    int err;

    err = key_op(c, MC_OP_EXIST, key, &cqe);
    if (err != 0)
        return err;
    if (cqe.res > 1) {
        mc_client_poison(c, MC_ERR_PROTO);
        return MC_ERR_PROTO;
    }
    return cqe.res;
}

MC_EXPORT int mc_remove(mc_client_t *c, const char *key)
{
    struct mc_cqe cqe;
    int err;

    err = key_op(c, MC_OP_REMOVE, key, &cqe);
    if (err != 0)
        return err;
    return res_status(c, cqe.res);
}

MC_EXPORT int mc_stat(mc_client_t *c, const char *key, mc_obj_info_t *info)
{
    struct mc_cqe cqe;
    int err;

    if (info == NULL)
        return MC_ERR_INVALID;
    err = key_op(c, MC_OP_STAT, key, &cqe);
    if (err != 0)
        return err;
    err = res_status(c, cqe.res);
    if (err != 0)
        return err;
    memset(info, 0, sizeof(*info));
    info->size = cqe.size;
    info->replicas = cqe.replicas;
    /* the header promises only these bits */
    info->flags = cqe.obj_flags & (MC_PUT_PIN_SOFT | MC_PUT_PIN_HARD | MC_PUT_NO_CHECKSUM);
    info->version = cqe.version;
    info->ttl_remaining_ms = cqe.deadline_ms;
    return 0;
}

/* --- agent statistics (mcctl) ---------------------------------------------------------- */

/*
 * Run an op whose answer the agent writes into a staging slot (STATS, LIST): the slot is
 * held past the CQE (hold_staging) until the caller has read it. On 0, *slot_p is the
 * caller's to give back with mc_client_staging_put; on an error nothing is left to undo
 * (an abandoned op's slot goes back when its CQE arrives).
 */
static int staging_answer_op(struct mc_client *c, struct mc_sqe *sqe, const char *key,
                             size_t key_len, uint32_t *slot_p, struct mc_cqe *cqe_p)
{
    uint64_t deadline = mc_client_deadline(c);
    uint32_t slot, op;
    int err;

    err = mc_client_staging_get(c, deadline, &slot);
    if (err != 0)
        return err;
    sqe->data_off = mc_client_staging_off(c, slot);
    sqe->data_len = c->slot_size;
    err = mc_client_submit(c, sqe, key, key_len, (int32_t)slot, true, deadline, &op);
    if (err != 0) {
        mc_client_staging_put(c, slot);
        return err;
    }
    err = mc_client_wait(c, op, deadline, cqe_p);
    if (err != 0)
        return err;
    *slot_p = slot;
    return 0;
}

static int stats_json(mc_client_t *c, uint64_t flags, char **json_p, size_t *len_p)
{
    struct mc_sqe sqe;
    struct mc_cqe cqe;
    uint32_t slot;
    char *json;
    int err;

    if (c == NULL || json_p == NULL || len_p == NULL)
        return MC_ERR_INVALID;
    err = mc_client_enter(c);
    if (err != 0)
        return err;
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_STATS;
    sqe.arg0 = flags;
    err = staging_answer_op(c, &sqe, NULL, 0, &slot, &cqe);
    if (err != 0)
        return err;
    if (cqe.res < 0) {
        err = cqe.res;
        goto out_put;
    }
    if ((uint64_t)cqe.res > c->slot_size) {
        mc_client_poison(c, MC_ERR_PROTO);
        err = MC_ERR_PROTO;
        goto out_put;
    }
    json = malloc((size_t)cqe.res + 1);
    if (json == NULL) {
        err = MC_ERR_NOMEM;
        goto out_put;
    }
    memcpy(json, mc_client_staging_ptr(c, slot), (size_t)cqe.res);
    json[cqe.res] = '\0';
    *json_p = json;
    *len_p = (size_t)cqe.res;
    err = 0;
out_put:
    mc_client_staging_put(c, slot);
    return err;
}

int mc_client_stats_json(mc_client_t *c, char **json_p, size_t *len_p)
{
    return stats_json(c, 0, json_p, len_p);
}

int mc_client_cluster_json(mc_client_t *c, char **json_p, size_t *len_p)
{
    return stats_json(c, MC_STATS_F_CLUSTER, json_p, len_p);
}

/* --- listing and removal by prefix (mcctl) ---------------------------------------------- */

int mc_client_list(mc_client_t *c, const char *prefix, size_t prefix_len, uint64_t *cursor_p,
                   uint32_t max, int (*fn)(void *arg, const char *key, size_t key_len),
                   void *arg)
{
    char key[MC_KEY_MAX + 1];
    struct mc_sqe sqe;
    struct mc_cqe cqe;
    uint32_t slot;
    const uint8_t *p, *end;
    uint16_t klen;
    int err, n = 0;

    if (c == NULL || cursor_p == NULL || fn == NULL || prefix_len > MC_KEY_MAX ||
        (prefix == NULL && prefix_len > 0) || max == 0)
        return MC_ERR_INVALID;
    err = mc_client_enter(c);
    if (err != 0)
        return err;
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_LIST;
    sqe.arg0 = *cursor_p;
    sqe.arg1 = max;
    err = staging_answer_op(c, &sqe, prefix, prefix_len, &slot, &cqe);
    if (err != 0)
        return err;
    if (cqe.res < 0) {
        err = cqe.res;
        goto out_put;
    }
    if ((uint32_t)cqe.res > max) {
        err = MC_ERR_PROTO;
        goto out_proto;
    }
    /* the records are the agent's: check each against the slot and the key rules */
    p = mc_client_staging_ptr(c, slot);
    end = p + c->slot_size;
    for (int32_t i = 0; i < cqe.res; i++) {
        if ((size_t)(end - p) < sizeof(klen)) {
            err = MC_ERR_PROTO;
            goto out_proto;
        }
        memcpy(&klen, p, sizeof(klen));
        p += sizeof(klen);
        if (klen == 0 || klen > MC_KEY_MAX || (size_t)(end - p) < klen ||
            klen < prefix_len || (prefix_len > 0 && memcmp(p, prefix, prefix_len) != 0)) {
            err = MC_ERR_PROTO;
            goto out_proto;
        }
        memcpy(key, p, klen);
        key[klen] = '\0';
        p += klen;
        err = fn(arg, key, klen);
        if (err != 0)
            goto out_put;
        n++;
    }
    *cursor_p = cqe.version;
    err = n;
    goto out_put;

out_proto:
    mc_client_poison(c, MC_ERR_PROTO);
out_put:
    mc_client_staging_put(c, slot);
    return err;
}

int mc_client_drain(mc_client_t *c, const char *node, bool on)
{
    struct mc_sqe sqe;
    struct mc_cqe cqe;
    size_t len;
    int err;

    if (c == NULL || node == NULL)
        return MC_ERR_INVALID;
    len = strnlen(node, MC_MASTER_NODE_NAME_MAX + 1);
    if (len == 0 || len > MC_MASTER_NODE_NAME_MAX)
        return MC_ERR_INVALID;
    err = mc_client_enter(c);
    if (err != 0)
        return err;
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_DRAIN;
    sqe.arg0 = on ? 1 : 0;
    err = run_op(c, &sqe, node, len, mc_client_deadline(c), &cqe);
    if (err != 0)
        return err;
    return cqe.res < 0 ? cqe.res : 0;
}

int mc_client_remove_prefix(mc_client_t *c, const char *prefix, uint64_t *removed_p)
{
    struct mc_sqe sqe;
    struct mc_cqe cqe;
    size_t len;
    int err;

    if (c == NULL || removed_p == NULL)
        return MC_ERR_INVALID;
    err = mc_client_key_check(prefix, &len);
    if (err != 0)
        return err;
    err = mc_client_enter(c);
    if (err != 0)
        return err;
    memset(&sqe, 0, sizeof(sqe));
    sqe.opcode = MC_OP_REMOVE_PREFIX;
    err = run_op(c, &sqe, prefix, len, mc_client_deadline(c), &cqe);
    if (err != 0)
        return err;
    if (cqe.res < 0)
        return cqe.res;
    *removed_p = (uint64_t)cqe.res;
    return 0;
}
