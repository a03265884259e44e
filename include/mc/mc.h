/*
 * mcstore client API (libmc): put, get and look up KV-cache objects in the node's store.
 *
 * This header is the whole public contract of libmc. It is not the transfer layer, the
 * master's directory or the agent: libmc talks only to the local mc-agent, through a
 * shared-memory ring, and the agent does everything that leaves the node.
 *
 * Objects
 *   An object is an immutable byte string stored under a key. A key that has a readable
 *   version is not overwritten by a plain put (keys are content addresses); MC_PUT_UPSERT
 *   writes a new version, which readers see only once it is complete. Objects may be
 *   evicted when the pool is full unless pinned; a missing object is the normal case for a
 *   cache: the caller recomputes.
 *
 * Keys
 *   A key is a NUL-terminated string of 1 to MC_KEY_MAX bytes, the NUL not counted. Any
 *   byte other than NUL may appear; keys are compared byte by byte. A NULL key, an empty
 *   key or a key longer than MC_KEY_MAX is MC_ERR_INVALID, detected before anything is
 *   sent. libmc reads a key only during the call that takes it (async calls copy it), so
 *   the caller may free or reuse the string as soon as the call returns.
 *
 * Return values
 *   Every function that returns int returns 0 (or a count, or a boolean, where said) on
 *   success and a negative MC_ERR_* code (<mc/mc_status.h>) on failure. mc_strerror()
 *   describes any code. Output parameters are written only on success, except where a
 *   function says otherwise (mc_get's len_out on MC_ERR_TOO_LARGE). Codes that any call
 *   that talks to the agent may return, in addition to those listed per function:
 *     MC_ERR_NOMEM        out of memory in this process or in the agent;
 *     MC_ERR_UNAVAILABLE  the agent is gone, or the master cannot be reached right now
 *                         (master-bound calls fail fast, they do not hang);
 *     MC_ERR_PROTO        the agent broke the protocol;
 *     MC_ERR_INTERNAL     a bug in mcstore.
 *
 * Poisoned clients
 *   A client whose agent connection was lost (MC_ERR_UNAVAILABLE) or broke the protocol
 *   (MC_ERR_PROTO) stays unusable: every later call on it fails with the same code, and so
 *   do its ops that were not final yet. Call mc_close() and mc_connect() again. An
 *   unreachable master does not poison the client: the agent reconnects to it and later
 *   calls may succeed. So MC_ERR_UNAVAILABLE from a call means one of two things, told
 *   apart by mc_client_status(c): non-zero means reconnect (mc_close(), then
 *   mc_connect()); 0 means the master (or a peer) is out of reach right now: retry later,
 *   or recompute, on the same client.
 *
 * Deadlines
 *   Every operation has a deadline: the client's op_timeout_ms (MC_OP_TIMEOUT_MS_DEFAULT,
 *   5000 ms, by default) after it was submitted, on the monotonic clock. An operation
 *   whose deadline passes ends with MC_ERR_TIMEOUT. Cancellation is cooperative: an
 *   operation that has not started is dropped at once; a transfer already under way runs
 *   to completion (the transport cannot stop it) and the operation becomes final only
 *   then. So a call, or an op's final status, may come later than its deadline by the time
 *   that transfer takes, but the caller's buffer is never touched after the operation has
 *   returned (synchronous call) or has been reported final (mc_wait).
 *   The agent enforces the deadline and answers MC_ERR_TIMEOUT itself. When the agent
 *   stops answering (frozen, stalled), a synchronous call still returns at its deadline,
 *   but libmc gives up an async op (and a synchronous put whose bytes the agent reads from
 *   the caller's memory) only MC_DEADLINE_GRACE_MS (1000 ms) after its deadline: until
 *   then the agent's own answer may still be in flight, and an op given up before it would
 *   leave its lease or its put behind. So such an op may end with MC_ERR_TIMEOUT up to
 *   MC_DEADLINE_GRACE_MS late; one whose SQE names the caller's memory and that the agent
 *   has already taken is not given up at all: it waits for the agent's answer or death.
 *
 * Buffer ownership
 *   The caller owns every buffer it passes. A synchronous call uses the buffer only until
 *   it returns. An asynchronous call (mc_get_async, mc_put_async) owns the buffer from
 *   submission until mc_wait() has returned the op's final status; meanwhile the caller
 *   must not write into it (put) or read or write it (get), and mc_buf_free() of that
 *   buffer fails with MC_ERR_BUSY. An op freed before it was final keeps its buffer until
 *   it becomes final inside libmc. Any buffer works; buffers from mc_buf_alloc() avoid
 *   every extra copy on the node (zero-copy).
 *
 * Threads
 *   An mc_client_t may be shared by any number of threads: every function taking a client
 *   is thread-safe, except mc_close(), which must be the last call on the client.
 *   Submissions are serialised under a lock; completions are reaped by one thread at a
 *   time, for all threads (a thread in mc_wait() may complete other threads' ops). An
 *   mc_op_t is used by one thread at a time, except that mc_cancel() may be called from
 *   any thread while another waits on the op. No function is async-signal-safe. libmc
 *   never prints, never aborts and never raises signals in the caller's process.
 *
 * fork()
 *   A child may use libmc only through a new mc_connect(). It must not call any function
 *   on a client, op or buffer inherited from its parent, mc_close() and mc_op_free()
 *   included: it abandons them. Arena buffers inherited by the child are shared with the
 *   parent's mappings; the child must not write into them.
 */
#ifndef MC_H
#define MC_H

#include <stddef.h>
#include <stdint.h>

#include <mc/mc_limits.h> /* MC_KEY_MAX, MC_TTL_MAX_MS, the MC_PUT_* flags */
#include <mc/mc_status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; mc_version() gives the version of the library in use. */
#define MC_VERSION_MAJOR 0
#define MC_VERSION_MINOR 3
#define MC_VERSION_PATCH 0

/* The default deadline of every operation, in milliseconds (op_timeout_ms). */
#define MC_OP_TIMEOUT_MS_DEFAULT 5000

/* How long after an op's deadline libmc waits for a silent agent's answer before it ends
 * the op with MC_ERR_TIMEOUT itself (see "Deadlines"). */
#define MC_DEADLINE_GRACE_MS 1000

/*
 * A connection to the local agent. Opaque; created by mc_connect(), destroyed by
 * mc_close(). Thread-safe (see "Threads" above).
 */
typedef struct mc_client mc_client_t;

/*
 * One asynchronous operation. Opaque; created by mc_get_async() or mc_put_async(),
 * destroyed by mc_op_free(). Used by one thread at a time.
 */
typedef struct mc_op mc_op_t;

/*
 * Options of a put. A NULL mc_put_opts_t pointer means the defaults, which are what
 * MC_PUT_OPTS_INIT sets (all zero). libmc reads the struct, and preferred_node, only during
 * the call that takes it (async calls copy them).
 */
typedef struct mc_put_opts {
    uint32_t replicas;          /* copies to store, each in its own failure domain; 0 = 1.
                                   More than can be placed is MC_ERR_NO_SPACE (see
                                   MC_PUT_SAME_DOMAIN_OK). */
    uint32_t flags;             /* MC_PUT_* bits; unknown bits are MC_ERR_INVALID */
    uint64_t ttl_ms;            /* the object is absent for every lookup this many ms
                                   after it became readable, pinned or not; 0 = no TTL;
                                   at most MC_TTL_MAX_MS, else MC_ERR_INVALID */
    const char *preferred_node; /* node id to place the first replica on when it has room;
                                   NULL = any (the writer's node when it has room). A hint:
                                   an unknown or full node is not an error. */
    uint64_t reserved[4];       /* must be zero, else MC_ERR_INVALID */
} mc_put_opts_t;

/* Initialiser for mc_put_opts_t with every default: mc_put_opts_t o = MC_PUT_OPTS_INIT; */
/* clang-format off */
#define MC_PUT_OPTS_INIT {0, 0, 0, NULL, {0, 0, 0, 0}}
/* clang-format on */

/*
 * What mc_stat() reports about the readable version of a key: a snapshot, which may be
 * stale as soon as it is returned.
 */
typedef struct mc_obj_info {
    uint64_t size;             /* the object's length in bytes */
    uint32_t replicas;         /* complete replicas on live nodes (>= 1) */
    uint32_t flags;            /* MC_PUT_* state of this version now: MC_PUT_PIN_SOFT (until
                                  the soft pin lapses), MC_PUT_PIN_HARD,
                                  MC_PUT_NO_CHECKSUM, MC_PUT_TIER_GPU (its replicas are in
                                  GPU memory); bits 16..19: how many of the replicas are on a
                                  node's disk (MC_OBJ_DISK_REPLICAS); other bits are 0 */
    uint64_t version;          /* the version number: unique in the store, larger for each newer
                                  version of a key (not consecutive, not from 1) */
    uint64_t ttl_remaining_ms; /* ms until the object expires, rounded up; 0 = no TTL */
    uint64_t reserved[4];      /* set to zero */
} mc_obj_info_t;

/* How many of an object's replicas are on a node's disk (an agent's --disk, docs/disk.md),
 * from mc_obj_info_t.flags; the others are in memory. */
#define MC_OBJ_DISK_REPLICAS(flags) (((flags) >> 16) & 0xFu)

/*
 * Connect to the local agent.
 *
 * The agent checks this process's credentials, maps a shared region for its rings and
 * both sides check each other's magic and ABI version.
 *
 * @param socket_path  The agent's unix socket; NULL for the default: $MC_AGENT_SOCKET if
 *                     set, else the agent's socket under $XDG_RUNTIME_DIR, else under
 *                     /run/mc/ (docs/operations.md). Read only during the call.
 * @param out          On success, the new client, to be destroyed with mc_close().
 *
 * @return 0 on success;
 *         MC_ERR_INVALID      out is NULL, or socket_path is empty or too long for a unix
 *                             socket address;
 *         MC_ERR_UNAVAILABLE  no agent listens at the socket (missing, refused), or it
 *                             closed the connection during the handshake;
 *         MC_ERR_DENIED       the agent refused this process's uid/gid, or the socket's
 *                             permissions did;
 *         MC_ERR_PROTO        the agent's magic or ABI version does not match this libmc;
 *         MC_ERR_BUSY         the agent serves max_clients connections, or this uid holds
 *                             max_clients_per_uid of them (agent config); retry later;
 *         MC_ERR_TIMEOUT      the handshake did not finish within the default deadline;
 *         MC_ERR_IO           the shared region could not be mapped;
 *         MC_ERR_NOMEM.
 */
int mc_connect(const char *socket_path, mc_client_t **out);

/*
 * Close a client and free everything it holds.
 *
 * Returns after every operation of c is final (so no transfer can still touch any caller
 * buffer): operations not started are dropped, transfers under way are waited for. Ops
 * not yet freed with mc_op_free() are freed here and their handles become invalid; buffers
 * from mc_buf_alloc() are unmapped and their pointers become invalid. No other thread may
 * be using c, or any of its ops, when mc_close() is called, and no call may follow it.
 *
 * @param c  The client; NULL does nothing.
 */
void mc_close(mc_client_t *c);

/*
 * Store an object.
 *
 * Allocates the replicas, copies buf into them and publishes the object; readers never
 * see a partial object. On return, whatever the result, libmc no longer uses buf.
 *
 * @param c    The client.
 * @param key  The object's key (see "Keys").
 * @param buf  The bytes to store, len of them. Read only during the call. Host memory, or
 *             GPU memory (any pointer inside an allocation; docs/gpu.md): the agent then
 *             copies from it directly, and the async and batch forms accept it too.
 * @param len  The object's length in bytes; at least 1.
 * @param o    Options; NULL for the defaults.
 *
 * @return 0 when the object is stored and readable;
 *         MC_PRESENT (2)    (with MC_PUT_EXISTS_OK, without MC_PUT_UPSERT) the key has a
 *                           readable version already; nothing changed;
 *         MC_ERR_INVALID    c or buf is NULL, len is 0, the key is invalid, or o has
 *                           unknown flag bits, both pin flags, a ttl_ms above
 *                           MC_TTL_MAX_MS or non-zero reserved words;
 *         MC_ERR_EXISTS     (without MC_PUT_UPSERT) the key has a readable version; nothing
 *                           changed;
 *         MC_ERR_BUSY       (without MC_PUT_UPSERT) the key's only version is another put
 *                           still in flight, which may yet succeed or be revoked;
 *         MC_ERR_TOO_LARGE  len is larger than any segment can hold;
 *         MC_ERR_NO_SPACE   room could not be made (everything leased or pinned), the hard
 *                           pin cap is reached, or replicas cannot go to distinct failure
 *                           domains (see MC_PUT_SAME_DOMAIN_OK); also: this client's other
 *                           unfinished puts already hold open_put_bytes_per_client (agent
 *                           config), or buf is in an arena the agent refused to map
 *                           (mc_buf_alloc);
 *         MC_ERR_CANCELED   an upsert of the key superseded this put while it was still in
 *                           flight (this put an upsert or a plain one);
 *         MC_ERR_TIMEOUT    the deadline passed; the put was revoked, unless the object had
 *                           already been published when the deadline passed, so a retry
 *                           may see MC_ERR_EXISTS;
 *         MC_ERR_UNAVAILABLE (besides a lost agent) the master was unreachable or lost this
 *                           put (it restarted, or declared the agent dead); as with
 *                           MC_ERR_TIMEOUT, a retry may see MC_ERR_EXISTS;
 *         MC_ERR_IO, MC_ERR_NOMEM, MC_ERR_PROTO, MC_ERR_INTERNAL.
 */
int mc_put(mc_client_t *c, const char *key, const void *buf, size_t len,
           const mc_put_opts_t *o);

/*
 * Read an object into the caller's buffer.
 *
 * Reads the key's readable version (an upsert in flight is not seen until it completes),
 * verifies its checksum, and marks it recently used for eviction. If a replica turns out
 * to be unusable during the read (node lost, lease ended, checksum mismatch), another is
 * tried before the call fails.
 *
 * @param c        The client.
 * @param key      The object's key (see "Keys").
 * @param buf      Where to write the object; cap bytes. NULL only with cap == 0, which
 *                 asks for the size (the call then returns MC_ERR_TOO_LARGE with
 *                 *len_out set). Written only during the call, never after it returns.
 *                 Host or GPU memory (docs/gpu.md), here and in the async and batch forms.
 *                 A buffer inside an arena (mc_buf_alloc) may receive the bytes straight
 *                 from another node when the agent runs with arena_reads (docs/config.md);
 *                 if cap also holds the object's checksum trailer (mc_shm_alloc_len), the
 *                 bytes of buf past the object, up to the trailer's end, are written too,
 *                 else nothing past the object is.
 * @param cap      The size of buf in bytes.
 * @param len_out  If not NULL, receives the object's size on success (the bytes written)
 *                 and on MC_ERR_TOO_LARGE (the size buf would need). Untouched otherwise.
 *
 * @return 0 on success;
 *         MC_ERR_INVALID        c is NULL, the key is invalid, or buf is NULL and cap > 0;
 *         MC_ERR_NOT_FOUND      no readable version: never stored, removed, evicted,
 *                               expired, or every replica is on an unreachable node;
 *         MC_ERR_TOO_LARGE      the object is larger than cap; buf is not written;
 *         MC_ERR_LEASE_EXPIRED  the only usable replica's read finished after its lease
 *                               ended, so its space may have been reused;
 *         MC_ERR_CORRUPT        every replica tried failed its checksum;
 *         MC_ERR_TIMEOUT        the deadline passed;
 *         MC_ERR_BUSY           the object is on another node and the agent had no room
 *                               left to receive it (its landing segment is full of other
 *                               reads): transient, retry;
 *         MC_ERR_IO, MC_ERR_NOMEM, MC_ERR_UNAVAILABLE, MC_ERR_PROTO, MC_ERR_INTERNAL.
 *         On every failure but MC_ERR_TOO_LARGE, the contents of buf are unspecified
 *         (discarded bytes may have landed there): never use them.
 */
int mc_get(mc_client_t *c, const char *key, void *buf, size_t cap, size_t *len_out);

/*
 * Ask whether a key has a readable version.
 *
 * Grants no lease and does not change the eviction order (monitoring must not change
 * eviction). The answer may be stale as soon as it is returned: a later mc_get() may
 * still return MC_ERR_NOT_FOUND.
 *
 * @param c    The client.
 * @param key  The key (see "Keys").
 *
 * @return 1 if present, 0 if absent (never stored, removed, evicted, expired or with no
 *         reachable replica);
 *         MC_ERR_INVALID  c is NULL or the key is invalid;
 *         MC_ERR_TIMEOUT  the deadline passed;
 *         MC_ERR_NOMEM, MC_ERR_UNAVAILABLE, MC_ERR_PROTO, MC_ERR_INTERNAL.
 */
int mc_exist(mc_client_t *c, const char *key);

/*
 * Remove an object.
 *
 * Unpublishes the key's readable version at once, pinned or not: later lookups do not
 * find it. Its space is freed once the last reader's lease has ended; reads already under
 * way complete.
 *
 * @param c    The client.
 * @param key  The key (see "Keys").
 *
 * @return 0 when the object was removed;
 *         MC_ERR_INVALID    c is NULL or the key is invalid;
 *         MC_ERR_NOT_FOUND  the key has no readable version;
 *         MC_ERR_TIMEOUT    the deadline passed; the object may or may not be removed;
 *         MC_ERR_NOMEM, MC_ERR_UNAVAILABLE, MC_ERR_PROTO, MC_ERR_INTERNAL.
 */
int mc_remove(mc_client_t *c, const char *key);

/*
 * Remove every object whose key starts with prefix (as mc_remove() each).
 *
 * @param c        The client.
 * @param prefix   The prefix: a key (see "Keys"), so at least one byte.
 * @param removed  Receives the number of objects removed, on success.
 *
 * @return 0 on success (also when nothing matched: *removed is then 0);
 *         MC_ERR_INVALID  c or removed is NULL, or the prefix is invalid;
 *         MC_ERR_TIMEOUT  the deadline passed; some objects may be removed;
 *         MC_ERR_NOMEM, MC_ERR_UNAVAILABLE, MC_ERR_PROTO, MC_ERR_INTERNAL.
 */
int mc_remove_prefix(mc_client_t *c, const char *prefix, uint64_t *removed);

/*
 * List the keys of readable objects that start with prefix, a page at a time: what fits
 * cap bytes, each key followed by its NUL (keys hold no NUL). Not a snapshot: objects added
 * or removed meanwhile may be missed or listed twice. Grants no lease, changes no order.
 *
 * @param c       The client.
 * @param prefix  The prefix, NUL-terminated, 0 to MC_KEY_MAX bytes; NULL or "" for every key.
 * @param cursor  In: where to resume, 0 for the start. Out, on success: where the next page
 *                starts, 0 once the listing is complete.
 * @param buf     Receives the keys; cap bytes, room for at least one key of MC_KEY_MAX
 *                bytes and its NUL.
 * @param cap     The size of buf; at most MC_LIST_MAX keys are returned per call.
 *
 * @return the number of keys written (0 with *cursor 0: nothing left);
 *         MC_ERR_INVALID  c, cursor or buf is NULL, cap < MC_KEY_MAX + 1, or prefix is
 *                         longer than MC_KEY_MAX;
 *         MC_ERR_TIMEOUT  the deadline passed;
 *         MC_ERR_NOMEM, MC_ERR_UNAVAILABLE, MC_ERR_PROTO, MC_ERR_INTERNAL.
 */
#define MC_LIST_MAX 4096
int mc_list(mc_client_t *c, const char *prefix, uint64_t *cursor, char *buf, size_t cap);

/*
 * The agent's statistics (and, in a cluster, the master's), as one JSON object: what
 * `mcctl stats` prints (docs/operations.md). A snapshot.
 *
 * @param c        The client.
 * @param buf      Receives the JSON text, NUL-terminated; cap bytes. NULL only with cap 0,
 *                 which asks for the length.
 * @param cap      The size of buf.
 * @param len_out  If not NULL, receives the text's length (the NUL not counted) on success
 *                 and on MC_ERR_TOO_LARGE (buf then needs len_out + 1 bytes).
 *
 * @return 0 on success;
 *         MC_ERR_INVALID    c is NULL, or buf is NULL and cap > 0;
 *         MC_ERR_TOO_LARGE  the text and its NUL do not fit cap; buf is not written;
 *         MC_ERR_TIMEOUT    the deadline passed;
 *         MC_ERR_NOMEM, MC_ERR_UNAVAILABLE, MC_ERR_PROTO, MC_ERR_INTERNAL.
 */
int mc_stats(mc_client_t *c, char *buf, size_t cap, size_t *len_out);

/*
 * Describe the readable version of a key.
 *
 * Like mc_exist(), grants no lease and does not change the eviction order.
 *
 * @param c     The client.
 * @param key   The key (see "Keys").
 * @param info  Receives the description on success; untouched otherwise.
 *
 * @return 0 on success;
 *         MC_ERR_INVALID    c or info is NULL, or the key is invalid;
 *         MC_ERR_NOT_FOUND  the key has no readable version;
 *         MC_ERR_TIMEOUT    the deadline passed;
 *         MC_ERR_NOMEM, MC_ERR_UNAVAILABLE, MC_ERR_PROTO, MC_ERR_INTERNAL.
 */
int mc_stat(mc_client_t *c, const char *key, mc_obj_info_t *info);

/*
 * Batches
 *
 * A batch does what n single calls would do, with far fewer round trips. Items are
 * independent and may complete in any order; each gets its own status in results[i],
 * exactly as the single call would return it (an invalid key fails its item with
 * MC_ERR_INVALID, not the batch). The whole batch has one deadline, counted from the
 * call; items not final by then end with MC_ERR_TIMEOUT. n == 0 returns 0 and touches
 * nothing. Arrays are read, and buffers used, only during the call.
 *
 * The return is the number of items whose status is not negative, or a negative code when
 * the whole call failed, in which case results[] is unspecified:
 *   MC_ERR_INVALID  c or a required array is NULL, or n > INT_MAX;
 *   MC_ERR_NOMEM, MC_ERR_UNAVAILABLE, MC_ERR_PROTO, MC_ERR_INTERNAL.
 */

/*
 * Store n objects: item i is mc_put(c, keys[i], bufs[i], lens[i], o). The same options
 * apply to every item. Two items with the same key race as two puts would: with a plain
 * put at most one succeeds.
 *
 * Each item says what became of its key: 0 stored now; MC_ERR_EXISTS already present (the
 * key is write-once), or MC_PRESENT (2) instead when o has MC_PUT_EXISTS_OK, which then
 * counts as stored; MC_ERR_NO_SPACE no room; MC_ERR_INVALID an invalid item; or any other
 * status mc_put() returns.
 *
 * @param results  n statuses, written by the call.
 * @return the number of items stored or, with MC_PUT_EXISTS_OK, present (results[i] >= 0),
 *         or a negative code (see "Batches").
 */
int mc_batch_put(mc_client_t *c, size_t n, const char *const keys[], const void *const bufs[],
                 const size_t lens[], const mc_put_opts_t *o, int results[]);

/*
 * Read n objects: item i is mc_get(c, keys[i], bufs[i], caps[i], &lens[i]).
 *
 * @param lens     n sizes, written as mc_get() writes len_out (on success and on
 *                 MC_ERR_TOO_LARGE); NULL if not wanted.
 * @param results  n statuses, written by the call.
 * @return the number of items read, or a negative code (see "Batches").
 */
int mc_batch_get(mc_client_t *c, size_t n, const char *const keys[], void *const bufs[],
                 const size_t caps[], size_t lens[], int results[]);

/*
 * Ask whether n keys are present: results[i] is mc_exist(c, keys[i]), that is 1, 0 or a
 * negative code. Grants no lease and does not change the eviction order.
 *
 * @param results  n answers, written by the call.
 * @return the number of items answered (results[i] >= 0; count the 1s for the number
 *         present), or a negative code (see "Batches").
 */
int mc_batch_exist(mc_client_t *c, size_t n, const char *const keys[], int results[]);

/*
 * Count the leading keys that are present: the largest k such that keys[0] .. keys[k-1]
 * all have a readable version (an engine looks up a prompt's pages in order). Lookups
 * stop at the first absent key. Grants no lease and does not change the eviction order,
 * so a later mc_get() of a counted key may still return MC_ERR_NOT_FOUND.
 *
 * @param c     The client.
 * @param n     The number of keys; 0 returns 0.
 * @param keys  n keys (see "Keys"); read only during the call.
 *
 * @return k, 0 <= k <= n, on success;
 *         MC_ERR_INVALID  c or keys is NULL, any of the n keys is invalid, or n > INT_MAX;
 *         MC_ERR_TIMEOUT  the deadline passed;
 *         MC_ERR_NOMEM, MC_ERR_UNAVAILABLE, MC_ERR_PROTO, MC_ERR_INTERNAL.
 */
int mc_prefix_match(mc_client_t *c, size_t n, const char *const keys[]);

/*
 * A pin: what mc_prefix_pin() holds, named by an id unique within the client. 0 is never a
 * pin. Plain data: copying it copies the name, not the pin.
 */
typedef uint64_t mc_pin_t;

/*
 * Count the leading keys that are present, as mc_prefix_match(), and pin them: until
 * mc_unpin(c, *pin), the readable version of each counted key is neither evicted nor freed
 * (this is the lookup-and-lock of an engine that will load those objects next). The keys
 * past the first absent one are not pinned.
 *
 * A pin belongs to the client connection: it ends with mc_unpin(), with mc_close(), when
 * this process dies (the agent sees the connection end), and at the latest pin_ttl_ms
 * after it was taken (agent and master configuration, 60 s by default), so a stuck engine
 * cannot hold memory forever. A pin does not stop mc_remove() or an upsert from
 * unpublishing the version (later lookups no longer find it), only its space from being
 * reused while pinned. It grants no read: an mc_get() of a pinned key reads whatever
 * version is readable then, and marks nothing.
 *
 * @param c     The client.
 * @param n     The number of keys; 0 pins nothing and returns 0 (with a pin to unpin).
 * @param keys  n keys (see "Keys"); read only during the call.
 * @param pin   On success (the return >= 0), the pin, to be given to mc_unpin() (also when
 *              the return is 0). Untouched on failure, when nothing stays pinned (the pins
 *              taken are given back, or end with the connection or their TTL).
 *
 * @return k, 0 <= k <= n: the leading keys present and now pinned;
 *         MC_ERR_INVALID   c, pin or keys (n > 0) is NULL, any of the n keys is invalid, or
 *                          n > INT_MAX;
 *         MC_ERR_NO_SPACE  this connection holds 65536 pinned objects already (the agent's
 *                          cap per client);
 *         MC_ERR_TIMEOUT   the deadline passed;
 *         MC_ERR_NOMEM, MC_ERR_UNAVAILABLE, MC_ERR_PROTO, MC_ERR_INTERNAL.
 */
int mc_prefix_pin(mc_client_t *c, size_t n, const char *const keys[], mc_pin_t *pin);

/*
 * Release a pin from mc_prefix_pin(): its objects may be evicted again. Releasing a pin
 * that was released already, lapsed at its TTL or held nothing releases nothing.
 *
 * @param c    The client that took the pin.
 * @param pin  The pin.
 *
 * @return the number of objects the pin still held and released now (>= 0);
 *         MC_ERR_INVALID  c is NULL or pin is 0;
 *         MC_ERR_TIMEOUT  the deadline passed (the pin ends with the connection or its TTL);
 *         MC_ERR_NOMEM, MC_ERR_UNAVAILABLE, MC_ERR_PROTO, MC_ERR_INTERNAL.
 */
int mc_unpin(mc_client_t *c, mc_pin_t pin);

/*
 * Mark n objects recently used, as a read would, without reading them: an engine that keeps
 * using its own copy of a page keeps the stored one from being evicted first. Absent keys
 * are skipped. Grants no lease and no pin.
 *
 * @param c     The client.
 * @param n     The number of keys; 0 returns 0.
 * @param keys  n keys (see "Keys"); read only during the call.
 *
 * @return the number of keys present (and touched), 0 <= count <= n;
 *         MC_ERR_INVALID  c or keys (n > 0) is NULL, any of the n keys is invalid, or
 *                         n > INT_MAX;
 *         MC_ERR_TIMEOUT  the deadline passed (some keys may have been touched);
 *         MC_ERR_NOMEM, MC_ERR_UNAVAILABLE, MC_ERR_PROTO, MC_ERR_INTERNAL.
 */
int mc_touch(mc_client_t *c, size_t n, const char *const keys[]);

/*
 * Allocate zero-copy memory from the client's arenas.
 *
 * Arenas are shared-memory regions mapped by this process and the agent and registered
 * with the transport once, so puts from and gets into any address inside them move the
 * bytes with no intermediate copy. An engine may allocate its whole host KV pool here.
 *
 * @param c    The client.
 * @param len  Bytes wanted; at least 1.
 * @param ptr  On success, the buffer: len bytes, aligned to at least 64 bytes, contents
 *             unspecified. It belongs to the caller until mc_buf_free() or mc_close().
 *
 * @return 0 on success;
 *         MC_ERR_INVALID  c or ptr is NULL, or len is 0;
 *         MC_ERR_NOMEM    no arena has room and no new one can be made (process or agent
 *                         limits);
 *
 * The agent answers arena registrations with nothing: an arena over its limits
 * (arena_bytes_per_client, arena_bytes_total: mapped size) still yields a buffer here, and
 * every put from that buffer then fails with MC_ERR_NO_SPACE; the client stays usable
 * (puts from other memory work).
 *         MC_ERR_IO, MC_ERR_UNAVAILABLE, MC_ERR_PROTO, MC_ERR_INTERNAL.
 */
int mc_buf_alloc(mc_client_t *c, size_t len, void **ptr);

/*
 * Free a buffer from mc_buf_alloc().
 *
 * Fails, leaving the buffer allocated, while an operation owns any part of it: a
 * synchronous call in progress in another thread, an async op not yet reported final by
 * mc_wait(), or an op freed unfinished that is not final yet. Free it again once that op is
 * final. mc_buf_free() itself reaps the completions that have arrived (as mc_client_poll()
 * does), so the buffer of an op freed unfinished comes free by calling mc_buf_free() again
 * once that op's answer arrived or its deadline and MC_DEADLINE_GRACE_MS passed; no other
 * call is needed.
 *
 * @param c    The client that allocated ptr.
 * @param ptr  The pointer mc_buf_alloc() returned (not one inside the buffer); NULL does
 *             nothing and returns 0.
 *
 * @return 0 when the buffer is freed (ptr is then invalid);
 *         MC_ERR_INVALID  c is NULL, or ptr was not returned by mc_buf_alloc() on c or was
 *                         already freed;
 *         MC_ERR_BUSY     an operation still owns the buffer.
 */
int mc_buf_free(mc_client_t *c, void *ptr);

/*
 * Asynchronous operations
 *
 * mc_get_async() and mc_put_async() validate their arguments and submit the operation;
 * every other outcome is the op's final status, reported by mc_wait(). The buffer belongs
 * to the store from submission until mc_wait() has returned the op's final status (see
 * "Buffer ownership"); the key and options are copied at submission. Whatever the final
 * status, the op must be freed with mc_op_free().
 */

/*
 * Submit an asynchronous mc_get().
 *
 * @param c    The client.
 * @param key  The key (see "Keys"); copied.
 * @param buf  Where to write the object, cap bytes; owned by the op until it is final.
 *             NULL only with cap == 0 (then the op asks for the size, as in mc_get()).
 * @param cap  The size of buf in bytes.
 * @param op   On success, the new op.
 *
 * @return 0 when submitted; the final status, as mc_get() would return it, comes from
 *         mc_wait(), with len_out as mc_get() sets it;
 *         MC_ERR_INVALID  c or op is NULL, the key is invalid, or buf is NULL and cap > 0;
 *         MC_ERR_NOMEM    no op could be allocated (too many in flight);
 *         MC_ERR_UNAVAILABLE, MC_ERR_PROTO (poisoned client).
 */
int mc_get_async(mc_client_t *c, const char *key, void *buf, size_t cap, mc_op_t **op);

/*
 * Submit an asynchronous mc_put().
 *
 * @param c    The client.
 * @param key  The key (see "Keys"); copied.
 * @param buf  The bytes to store, len of them; owned by the op until it is final: do not
 *             change them meanwhile.
 * @param len  The object's length in bytes; at least 1.
 * @param o    Options, NULL for the defaults; copied, preferred_node included.
 * @param op   On success, the new op.
 *
 * @return 0 when submitted; the final status, as mc_put() would return it, comes from
 *         mc_wait();
 *         MC_ERR_INVALID  c, buf or op is NULL, len is 0, the key is invalid, or o is
 *                         invalid (as for mc_put());
 *         MC_ERR_NOMEM    no op could be allocated (too many in flight);
 *         MC_ERR_UNAVAILABLE, MC_ERR_PROTO (poisoned client).
 */
int mc_put_async(mc_client_t *c, const char *key, const void *buf, size_t len,
                 const mc_put_opts_t *o, mc_op_t **op);

/*
 * Wait for an op to become final.
 *
 * Final means that the op has its outcome and that no transfer can touch its buffer any
 * more: the buffer is the caller's again. Once final, every later mc_wait() on the op
 * returns the same status at once (and sets len_out again). While waiting, the calling
 * thread may reap completions of other ops of the same client, for all threads.
 *
 * @param op          The op.
 * @param timeout_ms  How long to wait: 0 only checks, < 0 waits until the op is final
 *                    (bounded by the op's own deadline and the time to finish a transfer
 *                    under way). This is not the op's deadline: returning MC_INPROGRESS
 *                    leaves the op running.
 * @param len_out     If not NULL, written when the op is final: for a get as by mc_get()
 *                    (the object's size on success and on MC_ERR_TOO_LARGE), for a put
 *                    the stored length on success. Untouched otherwise.
 *
 * @return MC_INPROGRESS (1)  the op is not final yet; the store still owns its buffer;
 *                            call again (or mc_cancel(), or mc_op_free());
 *         otherwise the op's final status: 0 (MC_PRESENT for a put with MC_PUT_EXISTS_OK
 *         that found its key) or a negative code as the synchronous call would return it, MC_ERR_CANCELED after a successful mc_cancel(), MC_ERR_TIMEOUT
 *         when its deadline passed;
 *         MC_ERR_INVALID  op is NULL.
 */
int mc_wait(mc_op_t *op, int timeout_ms, size_t *len_out);

/*
 * Ask an op to stop. Does not wait.
 *
 * Cancellation is cooperative: an op not yet started is dropped; one whose transfer is
 * under way runs to completion, and is discarded (get: the bytes in buf are unspecified;
 * put: the object is revoked, unless already published). The op's final status, from
 * mc_wait(), is MC_ERR_CANCELED unless it finished first, in which case it keeps its own
 * status. Canceling a final or already canceled op changes nothing. May be called from
 * any thread, also while another thread waits on the op.
 *
 * @param op  The op.
 *
 * @return 0 (the request was taken, or the op was already final);
 *         MC_ERR_INVALID  op is NULL.
 */
int mc_cancel(mc_op_t *op);

/*
 * Free an op. The handle is invalid afterwards.
 *
 * An op that is not final yet is canceled (as by mc_cancel()) and detached: libmc frees it
 * once final, and its buffer stays busy until then (mc_buf_free() returns MC_ERR_BUSY).
 * It becomes final when some call reaps its completion (mc_client_poll(), mc_wait(),
 * mc_buf_free(), any synchronous call) or gives it up at its deadline. No other thread may
 * be using the op.
 *
 * @param op  The op; NULL does nothing.
 */
void mc_op_free(mc_op_t *op);

/*
 * A file descriptor that is readable when async completions are waiting to be reaped,
 * for poll()/epoll (level-triggered) in the caller's event loop.
 *
 * When it is readable, call mc_client_poll(c), or mc_wait(op, 0, ...) on a pending op (one
 * such call is enough; mc_wait with timeout 0 reaps for every op, also when op is final
 * already), then mc_wait(op, 0, ...) on the ops you wait for. Each of these reaps what
 * arrived, ops freed unfinished (mc_op_free) included, and empties the descriptor; it
 * stays readable until one of them is made, so an event loop that does not make one spins.
 * libmc drains the descriptor itself: the caller must not read, write or close it.
 * Wake-ups may be spurious. The descriptor belongs to c, is close-on-exec and stays the
 * same until mc_close().
 *
 * @param c  The client.
 *
 * @return the descriptor (>= 0);
 *         MC_ERR_INVALID  c is NULL;
 *         MC_ERR_IO       the descriptor could not be created;
 *         MC_ERR_NOMEM, MC_ERR_UNAVAILABLE, MC_ERR_PROTO (poisoned client).
 */
int mc_client_eventfd(mc_client_t *c);

/*
 * Reap the completions that have arrived, without waiting: ops whose outcome arrived
 * become final (ops freed with mc_op_free() are freed), ops whose deadline and
 * MC_DEADLINE_GRACE_MS passed with a silent agent end with MC_ERR_TIMEOUT, and the eventfd
 * (mc_client_eventfd()) is emptied. The call for an event loop whose eventfd is readable
 * (an op freed unfinished can make it so with no op left to mc_wait() on). Another thread
 * that is reaping meanwhile does the reaping instead. Thread-safe.
 *
 * @param c  The client.
 *
 * @return 0;
 *         MC_ERR_INVALID  c is NULL;
 *         MC_ERR_UNAVAILABLE, MC_ERR_PROTO (poisoned client: see mc_client_status()).
 */
int mc_client_poll(mc_client_t *c);

/*
 * Whether the client is still usable: tells "reconnect" from "retry" after a call failed
 * with MC_ERR_UNAVAILABLE (see "Poisoned clients"). Sends nothing and does not wait.
 * Thread-safe.
 *
 * @param c  The client.
 *
 * @return 0 while the client is usable (a master or peer out of reach does not count:
 *         retry later or recompute);
 *         otherwise the code that poisoned it, or that poisons it at its next call:
 *         MC_ERR_UNAVAILABLE  the agent connection was lost, or the agent is shutting down;
 *         MC_ERR_PROTO        the agent broke the protocol;
 *         then reconnect: mc_close(), then mc_connect();
 *         MC_ERR_INVALID      c is NULL.
 */
int mc_client_status(const mc_client_t *c);

/* mc_strerror(int err), the description of any status code, is in <mc/mc_status.h>. */

/*
 * The version of the libmc in use, "MAJOR.MINOR.PATCH" (e.g. "0.1.0"). Never NULL; the
 * string is static: do not free it. Thread-safe; needs no client.
 */
const char *mc_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MC_H */
