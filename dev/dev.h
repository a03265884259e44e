/*
 * The device seam: GPU memory behind one ops table. A device is opened by kind and ordinal;
 * it allocates and frees device memory, queues asynchronous copies (host to device, device
 * to host, device to device) on a stream, records events on a stream and polls them for
 * completion, tells a device pointer from a host one, and exports a device buffer for
 * another process (allocation base plus an offset) which that process imports once.
 *
 * Two implementations:
 *   - MC_DEV_CUDA (dev_cuda.c): the CUDA driver API, loaded at run time with
 *     dlopen("libcuda.so.1"); the entry points are declared here, not taken from a toolkit.
 *     Where there is no libcuda or no GPU, probe and open answer MC_ERR_UNAVAILABLE with a
 *     reason ("no device: ...").
 *   - MC_DEV_TEST (dev_test.c): device memory is a memfd mapped in the allocating process;
 *     copies run on a worker thread per stream after a configurable delay and can be made to
 *     fail; export passes the memfd (over a socket, like an arena). For tests only: it is
 *     selected by configuration, never by detection alone.
 *
 * Device pointers are uint64_t (CUdeviceptr). For the test device a device pointer is the
 * address of its mapping in this process; an imported buffer has its own address here.
 *
 * This module never logs (libmc links it): failures come back as MC_ERR_* codes, and the
 * calls that can fail for a reason worth telling fill `why` (may be NULL).
 *
 * Threading: a device, its streams and events may be used from one thread at a time; the
 * test device's worker threads are its own. mc_dev_ptr_query may be called from any thread.
 */
#ifndef MC_DEV_DEV_H
#define MC_DEV_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum mc_dev_kind {
    MC_DEV_TEST = 1,
    MC_DEV_CUDA = 2,
};

/* How an exported buffer travels to another process. */
enum mc_dev_export_kind {
    MC_DEV_EXPORT_NONE = 0,     /* cannot be exported (CUDA VMM, expandable segments): stage */
    MC_DEV_EXPORT_FD = 1,       /* the test device: a memfd passed alongside */
    MC_DEV_EXPORT_CUDA_IPC = 2, /* a legacy CUDA IPC handle (cuIpcGetMemHandle) */
};

#define MC_DEV_HANDLE_LEN 64 /* sizeof(CUipcMemHandle) */
#define MC_DEV_WHY_LEN 160

struct mc_dev;
struct mc_dev_stream;
struct mc_dev_event;

/* What a pointer is (mc_dev_ptr_query). */
struct mc_dev_ptr_info {
    bool is_device;     /* false: host memory, every other field is 0 */
    bool exportable;    /* legacy IPC (or the test device's memfd) can export its allocation */
    uint32_t kind;      /* enum mc_dev_kind */
    uint32_t ordinal;   /* the device that owns it */
    uint64_t base;      /* the allocation that contains it: engines sub-allocate */
    uint64_t size;
    uint64_t buffer_id; /* unique per allocation while it lives: a cache key with base */
};

/* An exported allocation: fixed width, so it can go on a wire as it is. */
struct mc_dev_export {
    uint32_t kind;      /* enum mc_dev_export_kind */
    uint32_t ordinal;
    uint64_t size;      /* of the allocation */
    uint64_t buffer_id;
    uint8_t handle[MC_DEV_HANDLE_LEN];
};
_Static_assert(sizeof(struct mc_dev_export) == 88, "mc_dev_export is a wire layout");

/* Options of the test device (ignored by CUDA). */
struct mc_dev_test_opts {
    uint32_t delay_us;   /* every copy waits this long on the worker before it runs */
    uint32_t fail_nth;   /* the nth copy of the device (1-based) fails; 0: none */
    uint32_t fail_every; /* every copy whose number is a multiple fails; 0: none */
};

/*
 * How many devices of `kind` there are. count_p: on success (>= 1).
 * Returns 0, MC_ERR_UNAVAILABLE (no driver, no device: why says which), MC_ERR_INVALID.
 */
int mc_dev_probe(enum mc_dev_kind kind, int *count_p, char *why, size_t why_len);

/*
 * Open device `ordinal` of `kind`. opts: test device only (NULL: no delay, no failures).
 * d_p: on success; close it with mc_dev_close once every stream, event, allocation and
 * import made through it is gone.
 * Returns 0, MC_ERR_UNAVAILABLE (no such device: why), MC_ERR_INVALID, MC_ERR_NOMEM.
 */
int mc_dev_open(enum mc_dev_kind kind, int ordinal, const struct mc_dev_test_opts *opts,
                struct mc_dev **d_p, char *why, size_t why_len);
/* Accepts NULL. */
void mc_dev_close(struct mc_dev *d);
enum mc_dev_kind mc_dev_kind_of(const struct mc_dev *d);
const char *mc_dev_kind_name(enum mc_dev_kind kind);
/* "test" or "cuda" (case-sensitive) to a kind; -1 otherwise. */
int mc_dev_kind_parse(const char *name);

/*
 * Device memory. ptr_p: on success, a device pointer the caller frees with mc_dev_free
 * after the last copy that touches it completed. Returns 0, MC_ERR_INVALID (size 0),
 * MC_ERR_NOMEM (out of device memory), MC_ERR_IO.
 */
int mc_dev_alloc(struct mc_dev *d, uint64_t size, uint64_t *ptr_p);
/*
 * Device memory that legacy IPC cannot export, as PyTorch's expandable segments make it
 * (CUDA: cuMemCreate + cuMemAddressReserve + cuMemMap; the test device marks its memfd so):
 * mc_dev_ptr_query says exportable = false, mc_dev_export MC_ERR_DENIED. For tests and
 * scripts/gpu-check.sh. Freed with mc_dev_free. Errors as mc_dev_alloc.
 */
int mc_dev_alloc_vmm(struct mc_dev *d, uint64_t size, uint64_t *ptr_p);
void mc_dev_free(struct mc_dev *d, uint64_t ptr);

/*
 * A stream: copies queued on it run in order, asynchronously. mc_dev_stream_destroy waits
 * for what is queued first (so nothing queued outlives it). Returns 0, MC_ERR_NOMEM, MC_ERR_IO.
 */
int mc_dev_stream_create(struct mc_dev *d, struct mc_dev_stream **s_p);
void mc_dev_stream_destroy(struct mc_dev_stream *s);
/* Wait until every copy queued on s ran. 0, or MC_ERR_IO when one of them failed. */
int mc_dev_stream_sync(struct mc_dev_stream *s);

/*
 * Queue a copy of len bytes on s. Host pointers must stay valid (and, for a copy to the
 * host, untouched by anyone else) until an event recorded after the copy completes.
 * Returns 0 (queued), MC_ERR_INVALID (len 0, NULL), MC_ERR_NOMEM, MC_ERR_IO (the copy could
 * not be queued). A copy that fails while it runs shows on the next event recorded after it.
 */
int mc_dev_copy_htod(struct mc_dev_stream *s, uint64_t dst, const void *src, uint64_t len);
int mc_dev_copy_dtoh(struct mc_dev_stream *s, void *dst, uint64_t src, uint64_t len);
int mc_dev_copy_dtod(struct mc_dev_stream *s, uint64_t dst, uint64_t src, uint64_t len);

/*
 * Events: record one on a stream after copies; it completes when they have.
 * mc_dev_event_query: 0 (complete, every copy since the previous event on that stream ran),
 * MC_ERR_BUSY (not yet), MC_ERR_IO (complete, and one of those copies failed).
 * An event may be recorded again once it completed. Destroy only a completed event or one
 * never recorded (mc_dev_stream_sync first, else).
 */
int mc_dev_event_create(struct mc_dev *d, struct mc_dev_event **e_p);
void mc_dev_event_destroy(struct mc_dev_event *e);
int mc_dev_event_record(struct mc_dev_event *e, struct mc_dev_stream *s);
int mc_dev_event_query(struct mc_dev_event *e);

/*
 * What `ptr` is, as seen by device kind `kind` (no device need be open). Host memory is not
 * an error: info->is_device is false. Returns 0, MC_ERR_UNAVAILABLE (no driver to ask).
 */
int mc_dev_ptr_query(enum mc_dev_kind kind, uint64_t ptr, struct mc_dev_ptr_info *info);

/*
 * Export the allocation that contains device pointer `ptr` (its base: the offset of ptr
 * is base + (ptr - info.base), the caller's to send). x: on success. fd_p: for
 * MC_DEV_EXPORT_FD a new fd the caller owns (sends and closes it); -1 otherwise.
 * Returns 0, MC_ERR_INVALID (not a device pointer), MC_ERR_DENIED (not exportable: a VMM
 * buffer; the caller stages and counts it), MC_ERR_UNAVAILABLE, MC_ERR_IO.
 */
int mc_dev_export(enum mc_dev_kind kind, uint64_t ptr, struct mc_dev_export *x, int *fd_p);

/*
 * Import an exported allocation into d. fd: for MC_DEV_EXPORT_FD, the received fd, which
 * the import takes over (closed on failure too); -1 otherwise. Import once per allocation
 * and cache it: opening a CUDA IPC handle costs milliseconds. base_p: on success, the
 * allocation's address in this process, valid until mc_dev_unimport.
 * Returns 0, MC_ERR_INVALID (bad export, wrong kind, size mismatch), MC_ERR_NOMEM,
 * MC_ERR_IO.
 */
int mc_dev_import(struct mc_dev *d, const struct mc_dev_export *x, int fd, uint64_t *base_p);
/* Unmap an import once no queued copy touches it. */
void mc_dev_unimport(struct mc_dev *d, uint64_t base, uint64_t size);

#endif /* MC_DEV_DEV_H */
