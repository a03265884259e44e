/*
 * Shared-memory segments as memfds: create (optionally on huge pages), seal their size,
 * reopen read-only for a client, map. This module only wraps the system calls and converts
 * their errno into MC_ERR_* codes; it knows nothing of the region layout (region.h) or of
 * what lives in a segment, and it never logs (libmc links it).
 *
 * Thread-safety: every function is safe to call from any thread; they share no state.
 */
#ifndef MC_SHM_MEMFD_H
#define MC_SHM_MEMFD_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Create a memfd of `size` bytes (MFD_CLOEXEC | MFD_ALLOW_SEALING), zero-filled.
 *
 * With `hugetlb`, try MFD_HUGETLB first (size rounded up to the default huge page size is
 * the caller's business: a size the huge page size does not divide falls back). The huge
 * pages are reserved here (a shared mapping reserves them for the file's life), so a later
 * mapping does not fault on an empty pool. When huge pages are unavailable for any reason,
 * fall back to normal pages; *huge_p says which one was used (huge_p may be NULL).
 *
 * name:   memfd name (shown in /proc/PID/fd and maps), not NULL.
 * size:   1 .. INT64_MAX bytes.
 * fd_p:   on success, the new fd; the caller owns it (close it).
 * huge_p: on success, true when the memfd is backed by huge pages.
 * Returns 0, MC_ERR_INVALID (size, name), MC_ERR_NOMEM (no memory, fd limits), MC_ERR_IO.
 */
int mc_shm_memfd_create(const char *name, uint64_t size, bool hugetlb, int *fd_p,
                        bool *huge_p);

/* Seal the size of a memfd (F_SEAL_SHRINK | F_SEAL_GROW), so a peer mapping it can never
 * get SIGBUS from a truncation. Returns 0, MC_ERR_INVALID (not a sealable fd), MC_ERR_IO. */
int mc_shm_memfd_seal_size(int fd);

/*
 * Seal against new writes (F_SEAL_FUTURE_WRITE, Linux >= 5.1): mappings that are writable
 * now stay writable, but no new writable mapping or write(2) is allowed through any fd, even
 * one reopened read-write through /proc/PID/fd. A read-only fd alone does not stop a process
 * of the same uid from reopening the memfd read-write (its inode is mode 0777), so a segment
 * handed to clients should be mapped by the agent first, then sealed here.
 * Returns 0, MC_ERR_INVALID (not a sealable fd, or sealing is sealed), MC_ERR_IO.
 */
int mc_shm_memfd_seal_future_write(int fd);

/*
 * Seal the seals (F_SEAL_SEAL): no seal can be added or removed afterwards, by anyone
 * holding any fd of the memfd. Call it last, once every seal the owner relies on is in
 * place (F_SEAL_FUTURE_WRITE after it fails), and before the fd is handed to a peer, so the
 * peer cannot add seals of its own (F_SEAL_WRITE, F_SEAL_FUTURE_WRITE) under the owner.
 * Returns 0, MC_ERR_INVALID (not a sealable fd), MC_ERR_IO.
 */
int mc_shm_memfd_seal_seals(int fd);

/*
 * Open a new read-only description of the file behind `fd` (open("/proc/self/fd/N",
 * O_RDONLY | O_CLOEXEC)): a PROT_WRITE MAP_SHARED mapping of the result fails with EACCES.
 * ro_fd_p: on success the new fd, owned by the caller; `fd` is untouched.
 * Returns 0, MC_ERR_INVALID (fd < 0 or not open), MC_ERR_NOMEM (fd limits), MC_ERR_IO.
 */
int mc_shm_fd_reopen_ro(int fd, int *ro_fd_p);

/*
 * Map `size` bytes of `fd` from offset 0, MAP_SHARED, PROT_READ (| PROT_WRITE when
 * `writable`). p_p: on success the mapping; the caller unmaps it with munmap(p, size).
 * Returns 0, MC_ERR_INVALID (size 0 or too large), MC_ERR_DENIED (the fd or a seal forbids
 * that access), MC_ERR_NOMEM, MC_ERR_IO.
 */
int mc_shm_map(int fd, uint64_t size, bool writable, void **p_p);

#endif /* MC_SHM_MEMFD_H */
