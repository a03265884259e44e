/*
 * The disk tier's I/O engines: positional reads and writes of one file, submitted by the
 * agent's thread and completed on it, never blocking it. Two engines keep one contract,
 * chosen once at creation:
 *   - io_uring: a ring of its own (not the agent's event loop ring: its queue depth is the
 *     disk's bandwidth knob and its completions must not wait behind the loop's), for a file
 *     opened with O_DIRECT; staging buffers registered as fixed buffers;
 *   - threads: a few worker threads doing pread/pwrite, used where io_uring is denied or
 *     the file system refuses O_DIRECT (tmpfs), or when asked for.
 * Completions are announced on an eventfd (mc_disk_io_fd) that the agent's loop polls; the
 * owner thread then calls mc_disk_io_reap, which runs each finished request's callback.
 *
 * What it is not: it knows nothing of records, keys or checksums (disk.c), and it does not
 * align anything: with O_DIRECT every buffer, offset and length must be aligned to the
 * file's block (the caller's job; MC_DISK_BLOCK).
 *
 * Not thread-safe: one owner thread calls everything; the workers are internal.
 */
#ifndef MC_AGENT_DISK_IO_H
#define MC_AGENT_DISK_IO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

enum mc_disk_engine {
    MC_DISK_ENGINE_AUTO = 0, /* io_uring when the file is O_DIRECT and io_uring works */
    MC_DISK_ENGINE_URING,
    MC_DISK_ENGINE_THREADS,
};

struct mc_disk_io_req;
/* res: 0 (every byte moved) or an MC_ERR_* code: MC_ERR_NO_SPACE (ENOSPC), MC_ERR_IO (a
 * device error, or the file ended before len bytes). Runs from mc_disk_io_reap only. */
typedef void (*mc_disk_io_fn)(struct mc_disk_io_req *r, int res);

struct mc_disk_io_req {
    mc_disk_io_fn done;
    uint64_t off;      /* file offset */
    uint8_t *buf;
    uint32_t len;
    int buf_index;     /* the registered buffer buf lies in, or -1 */
    bool write;
    /* the engine's, while the request is in flight */
    struct mc_disk_io_req *next;
    uint32_t moved;
    int res;
};

struct mc_disk_io_cfg {
    int fd;                     /* stays the caller's; open until destroy */
    bool direct;                /* fd was opened with O_DIRECT */
    enum mc_disk_engine want;
    unsigned depth;             /* io_uring: requests in flight at most (>= 1) */
    unsigned threads;           /* threads engine: workers (>= 1) */
    const struct iovec *bufs;   /* io_uring: buffers to register (may be NULL) */
    unsigned nbufs;
};

struct mc_disk_io;

/*
 * Errors: MC_ERR_INVALID (depth or threads 0, URING asked for a file without O_DIRECT),
 * MC_ERR_IO (URING asked for and io_uring cannot be set up; *uring_err_p says why),
 * MC_ERR_NOMEM. uring_err_p (may be NULL) receives the negative errno of a failed
 * io_uring set-up on AUTO's fall back to threads, else 0.
 */
int mc_disk_io_create(const struct mc_disk_io_cfg *cfg, struct mc_disk_io **io_p,
                      int *uring_err_p);
/* Waits for the requests in flight to finish (their callbacks do not run; queued ones are
 * dropped), then frees. Accepts NULL. */
void mc_disk_io_destroy(struct mc_disk_io *io);

/* "io_uring" or "threads" */
const char *mc_disk_io_engine(const struct mc_disk_io *io);

/* Queue r (its done, off, buf, len, buf_index and write set); it starts at the next flush
 * (or reap). r must stay valid until its callback ran. */
void mc_disk_io_submit(struct mc_disk_io *io, struct mc_disk_io_req *r);
/* Hand what is queued to the kernel or the workers. */
void mc_disk_io_flush(struct mc_disk_io *io);
/* Readable (POLLIN) when completions wait for mc_disk_io_reap. */
int mc_disk_io_fd(const struct mc_disk_io *io);
/* Run the callbacks of every finished request (which may submit more), then flush.
 * Returns how many callbacks ran. */
unsigned mc_disk_io_reap(struct mc_disk_io *io);
/* Block until a completion waits (start-up, tests; never on the agent's loop). */
void mc_disk_io_wait(struct mc_disk_io *io);
/* Requests queued or in flight. */
unsigned mc_disk_io_pending(const struct mc_disk_io *io);
/*
 * Registers bufs (each at most 1 GiB) as the fixed buffers in place of the set given at
 * creation: a request's buf_index then counts in this set. Nothing may be queued or in
 * flight. The threads engine has none: 0, nothing done. Returns 0, or MC_ERR_NOMEM (the
 * kernel refused: RLIMIT_MEMLOCK, memory it cannot pin) or MC_ERR_INVALID, with no fixed
 * buffers left registered (mc_disk_io_fixed false: call again with a smaller set).
 */
int mc_disk_io_register(struct mc_disk_io *io, const struct iovec *bufs, unsigned nbufs);
/* Whether requests with a buf_index use registered buffers (io_uring, registration done). */
bool mc_disk_io_fixed(const struct mc_disk_io *io);

#endif /* MC_AGENT_DISK_IO_H */
