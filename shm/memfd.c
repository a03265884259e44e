/*
 * memfd segments: the system calls behind memfd.h (errno -> MC_ERR_*: common/err.h).
 * Not the region layout (region.c) and not a pool: callers decide sizes and lifetimes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mc/mc_status.h"

#include "common/err.h"
#include "shm/memfd.h"

/* memfd_create + ftruncate with the given flags; 0 or an MC_ERR_*. */
static int memfd_open(const char *name, uint64_t size, unsigned int flags, int *fd_p)
{
    int fd;
    int err;

    fd = memfd_create(name, flags);
    if (fd < 0)
        return mc_err_from_errno(errno);
    if (ftruncate(fd, (off_t)size) < 0) {
        err = mc_err_from_errno(errno);
        goto err_close_fd;
    }
    *fd_p = fd;
    return 0;

err_close_fd:
    close(fd);
    return err;
}

/* Reserve the huge pages of a hugetlb memfd: a shared mapping reserves them in the inode
 * (they stay reserved after munmap), so mmap fails here, cleanly, on an empty pool instead
 * of a SIGBUS at first touch later. */
static int hugetlb_reserve(int fd, uint64_t size)
{
    void *p;

    p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return mc_err_from_errno(errno);
    munmap(p, (size_t)size);
    return 0;
}

int mc_shm_memfd_create(const char *name, uint64_t size, bool hugetlb, int *fd_p,
                        bool *huge_p)
{
    const unsigned int flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
    int fd;
    int err;

    if (name == NULL || size == 0 || size > (uint64_t)INT64_MAX || size > SIZE_MAX)
        return MC_ERR_INVALID;

    /* Huge pages are an optimisation: any failure (no pool, size not a multiple of the huge
     * page size, old kernel without hugetlb sealing) falls back to normal pages. */
    if (hugetlb && memfd_open(name, size, flags | MFD_HUGETLB, &fd) == 0) {
        if (hugetlb_reserve(fd, size) == 0) {
            *fd_p = fd;
            if (huge_p != NULL)
                *huge_p = true;
            return 0;
        }
        close(fd);
    }
    err = memfd_open(name, size, flags, &fd);
    if (err != 0)
        return err;
    *fd_p = fd;
    if (huge_p != NULL)
        *huge_p = false;
    return 0;
}

int mc_shm_memfd_seal_size(int fd)
{
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
        return mc_err_from_errno(errno);
    return 0;
}

int mc_shm_memfd_seal_future_write(int fd)
{
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) < 0)
        return errno == EPERM ? MC_ERR_INVALID : mc_err_from_errno(errno);
    return 0;
}

int mc_shm_memfd_seal_seals(int fd)
{
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL) < 0)
        return errno == EPERM ? MC_ERR_INVALID : mc_err_from_errno(errno);
    return 0;
}

int mc_shm_fd_reopen_ro(int fd, int *ro_fd_p)
{
    char path[32];
    int ro_fd;

    if (fd < 0)
        return MC_ERR_INVALID;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ro_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (ro_fd < 0)
        return errno == ENOENT ? MC_ERR_INVALID : mc_err_from_errno(errno);
    *ro_fd_p = ro_fd;
    return 0;
}

int mc_shm_map(int fd, uint64_t size, bool writable, void **p_p)
{
    int prot = PROT_READ | (writable ? PROT_WRITE : 0);
    void *p;

    if (size == 0 || size > SIZE_MAX)
        return MC_ERR_INVALID;
    p = mmap(NULL, (size_t)size, prot, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return mc_err_from_errno(errno);
    *p_p = p;
    return 0;
}
