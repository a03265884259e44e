/*
 * The CUDA device when the build leaves it out (-Dcuda=disabled): every call says so.
 * No device can be opened, so only the calls that need no device are here.
 */
#include "dev/dev_int.h"

#include <mc/mc_status.h>

#define OFF_WHY "no device: built without the CUDA device (-Dcuda=disabled)"

static int off_probe(int *count_p, char *why, size_t why_len)
{
    (void)count_p;
    mc_dev_why(why, why_len, OFF_WHY);
    return MC_ERR_UNAVAILABLE;
}

static int off_open(int ordinal, const struct mc_dev_test_opts *opts, struct mc_dev **d_p,
                    char *why, size_t why_len)
{
    (void)ordinal;
    (void)opts;
    (void)d_p;
    mc_dev_why(why, why_len, OFF_WHY);
    return MC_ERR_UNAVAILABLE;
}

static int off_ptr_query(uint64_t ptr, struct mc_dev_ptr_info *info)
{
    (void)ptr;
    (void)info;
    return MC_ERR_UNAVAILABLE;
}

static int off_export(uint64_t ptr, struct mc_dev_export *x, int *fd_p)
{
    (void)ptr;
    (void)x;
    (void)fd_p;
    return MC_ERR_UNAVAILABLE;
}

const struct mc_dev_ops mc_dev_cuda_ops = {
    .probe = off_probe,
    .open = off_open,
    .ptr_query = off_ptr_query,
    .export_buf = off_export,
};
