/*
 * The CUDA device (dev.h, MC_DEV_CUDA): the driver API, loaded at run time with
 * dlopen("libcuda.so.1"), so the build needs no CUDA toolkit and a machine without a GPU
 * runs the same binary (probe and open answer MC_ERR_UNAVAILABLE, "no device: ...").
 *
 * The few types and entry points it needs are declared below with the ABI of cuda.h
 * (CUDA 11 and later: the _v2 symbols where cuda.h maps a name onto one). The primary
 * context of the device is retained at open and made current on every call that needs one,
 * so the device works from whichever thread uses it.
 *
 * Export: engines sub-allocate from big allocations, so a pointer is exported as the IPC
 * handle of its allocation base (cuMemGetAddressRange) plus an offset; the importer opens
 * each base once. Memory that legacy IPC cannot export (CUDA VMM, PyTorch's
 * expandable_segments) is told apart with CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE
 * and refused with MC_ERR_DENIED: the caller stages it and counts it, never silently slow.
 */
#include "dev/dev_int.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mc/mc_status.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct {
    char reserved[MC_DEV_HANDLE_LEN];
} CUipcMemHandle;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_NOT_READY = 600,
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 10,
    CU_MEMORYTYPE_DEVICE = 2,
    CU_STREAM_NON_BLOCKING = 1,
    CU_EVENT_DISABLE_TIMING = 2,
    CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1,
};

/* name in libcuda, the pointer we call it through */
#define CUDA_FNS(X)                                                                          \
    X("cuInit", Init, (unsigned flags))                                                     \
    X("cuDeviceGetCount", DeviceGetCount, (int *count))                                     \
    X("cuDeviceGet", DeviceGet, (CUdevice * dev, int ordinal))                              \
    X("cuDevicePrimaryCtxRetain", PrimaryCtxRetain, (CUcontext * ctx, CUdevice dev))        \
    X("cuDevicePrimaryCtxRelease_v2", PrimaryCtxRelease, (CUdevice dev))                    \
    X("cuCtxSetCurrent", CtxSetCurrent, (CUcontext ctx))                                    \
    X("cuMemAlloc_v2", MemAlloc, (CUdeviceptr * p, size_t size))                            \
    X("cuMemFree_v2", MemFree, (CUdeviceptr p))                                             \
    X("cuStreamCreate", StreamCreate, (CUstream * s, unsigned flags))                       \
    X("cuStreamDestroy_v2", StreamDestroy, (CUstream s))                                    \
    X("cuStreamSynchronize", StreamSynchronize, (CUstream s))                               \
    X("cuMemcpyHtoDAsync_v2", MemcpyHtoDAsync,                                              \
      (CUdeviceptr dst, const void *src, size_t len, CUstream s))                           \
    X("cuMemcpyDtoHAsync_v2", MemcpyDtoHAsync,                                              \
      (void *dst, CUdeviceptr src, size_t len, CUstream s))                                 \
    X("cuMemcpyDtoDAsync_v2", MemcpyDtoDAsync,                                              \
      (CUdeviceptr dst, CUdeviceptr src, size_t len, CUstream s))                           \
    X("cuEventCreate", EventCreate, (CUevent * e, unsigned flags))                          \
    X("cuEventDestroy_v2", EventDestroy, (CUevent e))                                       \
    X("cuEventRecord", EventRecord, (CUevent e, CUstream s))                                \
    X("cuEventQuery", EventQuery, (CUevent e))                                              \
    X("cuMemGetAddressRange_v2", MemGetAddressRange,                                        \
      (CUdeviceptr * base, size_t *size, CUdeviceptr p))                                    \
    X("cuIpcGetMemHandle", IpcGetMemHandle, (CUipcMemHandle * h, CUdeviceptr p))            \
    X("cuIpcOpenMemHandle_v2", IpcOpenMemHandle,                                            \
      (CUdeviceptr * p, CUipcMemHandle h, unsigned flags))                                  \
    X("cuIpcCloseMemHandle", IpcCloseMemHandle, (CUdeviceptr p))                            \
    X("cuPointerGetAttribute", PointerGetAttribute, (void *data, int attr, CUdeviceptr p))

/* The virtual memory management API (CUDA 10.2+), for mc_dev_alloc_vmm only: optional. */
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct {
    int type;
    int id;
} CUmemLocation;
typedef struct {
    int type;                 /* CU_MEM_ALLOCATION_TYPE_PINNED */
    int requestedHandleTypes; /* CU_MEM_HANDLE_TYPE_NONE */
    CUmemLocation location;   /* CU_MEM_LOCATION_TYPE_DEVICE, ordinal */
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;
typedef struct {
    CUmemLocation location;
    int flags; /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE */
} CUmemAccessDesc;
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp is cuda.h's");

#define CUDA_VMM_FNS(X)                                                                      \
    X("cuMemGetAllocationGranularity", MemGetAllocationGranularity,                         \
      (size_t * g, const CUmemAllocationProp *prop, int option))                             \
    X("cuMemCreate", MemCreate,                                                             \
      (CUmemGenericAllocationHandle * h, size_t size, const CUmemAllocationProp *prop,       \
       unsigned long long flags))                                                            \
    X("cuMemRelease", MemRelease, (CUmemGenericAllocationHandle h))                         \
    X("cuMemAddressReserve", MemAddressReserve,                                             \
      (CUdeviceptr * p, size_t size, size_t align, CUdeviceptr addr, unsigned long long f))  \
    X("cuMemAddressFree", MemAddressFree, (CUdeviceptr p, size_t size))                     \
    X("cuMemMap", MemMap,                                                                   \
      (CUdeviceptr p, size_t size, size_t off, CUmemGenericAllocationHandle h,               \
       unsigned long long flags))                                                            \
    X("cuMemUnmap", MemUnmap, (CUdeviceptr p, size_t size))                                 \
    X("cuMemSetAccess", MemSetAccess,                                                       \
      (CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count))

#define CUDA_FIELD(sym, name, args) CUresult (*name) args;
static struct {
    void *lib;
    int load_err;     /* 0, or why the driver is unusable */
    char why[MC_DEV_WHY_LEN];
    bool vmm;         /* the VMM entry points are there */
    CUDA_FNS(CUDA_FIELD)
    CUDA_VMM_FNS(CUDA_FIELD)
} cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

struct cvmm {
    struct cvmm *next;
    CUdeviceptr p;
    size_t size;
    CUmemGenericAllocationHandle h;
};

struct cdev {
    struct mc_dev pub;
    CUdevice dev;
    CUcontext ctx;
    struct cvmm *vmms; /* mc_dev_alloc_vmm's: freed their own way */
};

struct cstream {
    struct mc_dev_stream pub;
    CUstream s;
};

struct cevent {
    struct mc_dev_event pub;
    CUevent e;
};

static void cu_load(void)
{
    const char *lib = getenv("MC_LIBCUDA"); /* tests point it at a library that is not there */
    int count = 0;
    CUresult r;

    cu.lib = dlopen(lib != NULL && lib[0] != '\0' ? lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cu.lib == NULL) {
        const char *e = dlerror();

        mc_dev_why(cu.why, sizeof(cu.why), "no device: cannot load the CUDA driver (%s)",
                   e != NULL ? e : "dlopen failed");
        cu.load_err = MC_ERR_UNAVAILABLE;
        return;
    }
#define CUDA_LOAD(sym, name, args)                                                           \
    *(void **)&cu.name = dlsym(cu.lib, sym);                                                 \
    if (cu.name == NULL) {                                                                   \
        mc_dev_why(cu.why, sizeof(cu.why), "no device: the CUDA driver lacks %s", sym);      \
        cu.load_err = MC_ERR_UNAVAILABLE;                                                    \
        return;                                                                              \
    }
    CUDA_FNS(CUDA_LOAD)
#undef CUDA_LOAD
    cu.vmm = true;
#define CUDA_LOAD_OPT(sym, name, args)                                                       \
    *(void **)&cu.name = dlsym(cu.lib, sym);                                                 \
    cu.vmm = cu.vmm && cu.name != NULL;
    CUDA_VMM_FNS(CUDA_LOAD_OPT)
#undef CUDA_LOAD_OPT
    r = cu.Init(0);
    if (r == CUDA_SUCCESS)
        r = cu.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count == 0) {
        mc_dev_why(cu.why, sizeof(cu.why), "no device: cuInit/cuDeviceGetCount: CUDA error %d",
                   r);
        cu.load_err = MC_ERR_UNAVAILABLE;
    }
}

static int cu_ready(char *why, size_t why_len)
{
    pthread_once(&cu_once, cu_load);
    if (cu.load_err != 0)
        mc_dev_why(why, why_len, "%s", cu.why);
    return cu.load_err;
}

static int cu_err(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS:
        return 0;
    case CUDA_ERROR_INVALID_VALUE:
        return MC_ERR_INVALID;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return MC_ERR_NOMEM;
    case CUDA_ERROR_NOT_READY:
        return MC_ERR_BUSY;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
        return MC_ERR_UNAVAILABLE;
    default:
        return MC_ERR_IO;
    }
}

/* Unmap and release a VMM allocation, its context current. */
static void cvmm_release(struct cvmm *v)
{
    cu.MemUnmap(v->p, v->size);
    cu.MemAddressFree(v->p, v->size);
    cu.MemRelease(v->h);
    free(v);
}

static int cu_current(struct mc_dev *d)
{
    return cu_err(cu.CtxSetCurrent(((struct cdev *)d)->ctx));
}

static int cdev_probe(int *count_p, char *why, size_t why_len)
{
    int err = cu_ready(why, why_len), count = 0;

    if (err != 0)
        return err;
    err = cu_err(cu.DeviceGetCount(&count));
    if (err != 0 || count == 0) {
        mc_dev_why(why, why_len, "no device: cuDeviceGetCount");
        return MC_ERR_UNAVAILABLE;
    }
    *count_p = count;
    return 0;
}

static int cdev_open(int ordinal, const struct mc_dev_test_opts *opts, struct mc_dev **d_p,
                     char *why, size_t why_len)
{
    struct cdev *c;
    CUresult r;
    int err = cu_ready(why, why_len);

    (void)opts;
    if (err != 0)
        return err;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return MC_ERR_NOMEM;
    r = cu.DeviceGet(&c->dev, ordinal);
    if (r == CUDA_SUCCESS)
        r = cu.PrimaryCtxRetain(&c->ctx, c->dev);
    if (r != CUDA_SUCCESS) {
        mc_dev_why(why, why_len, "no device: CUDA device %d: CUDA error %d", ordinal, r);
        free(c);
        return MC_ERR_UNAVAILABLE;
    }
    *d_p = &c->pub;
    return 0;
}

static void cdev_close(struct mc_dev *d)
{
    struct cdev *c = (struct cdev *)d;

    if (c->vmms != NULL && cu_current(d) == 0) {
        while (c->vmms != NULL) {
            struct cvmm *v = c->vmms;

            c->vmms = v->next;
            cvmm_release(v);
        }
    }
    cu.PrimaryCtxRelease(c->dev);
    free(c);
}

static int cdev_alloc(struct mc_dev *d, uint64_t size, uint64_t *ptr_p)
{
    CUdeviceptr p;
    int err = cu_current(d);

    if (err == 0)
        err = cu_err(cu.MemAlloc(&p, size));
    if (err != 0)
        return err == MC_ERR_INVALID ? MC_ERR_NOMEM : err;
    *ptr_p = p;
    return 0;
}

static int cdev_alloc_vmm(struct mc_dev *d, uint64_t size, uint64_t *ptr_p)
{
    struct cdev *c = (struct cdev *)d;
    CUmemAllocationProp prop = {.type = 1 /* PINNED */, .requestedHandleTypes = 0,
                                .location = {.type = 1 /* DEVICE */, .id = d->ordinal}};
    CUmemAccessDesc acc = {.location = prop.location, .flags = 3 /* PROT_READWRITE */};
    struct cvmm *v;
    size_t g = 0;
    int err;

    if (!cu.vmm)
        return MC_ERR_UNAVAILABLE;
    err = cu_current(d);
    if (err == 0)
        err = cu_err(cu.MemGetAllocationGranularity(&g, &prop, 0 /* MINIMUM */));
    if (err != 0 || g == 0)
        return MC_ERR_IO;
    v = calloc(1, sizeof(*v));
    if (v == NULL)
        return MC_ERR_NOMEM;
    v->size = (size + g - 1) / g * g;
    err = cu_err(cu.MemCreate(&v->h, v->size, &prop, 0));
    if (err != 0)
        goto err_free;
    err = cu_err(cu.MemAddressReserve(&v->p, v->size, 0, 0, 0));
    if (err != 0)
        goto err_release;
    err = cu_err(cu.MemMap(v->p, v->size, 0, v->h, 0));
    if (err != 0)
        goto err_address;
    err = cu_err(cu.MemSetAccess(v->p, v->size, &acc, 1));
    if (err != 0)
        goto err_unmap;
    v->next = c->vmms;
    c->vmms = v;
    *ptr_p = v->p;
    return 0;

err_unmap:
    cu.MemUnmap(v->p, v->size);
err_address:
    cu.MemAddressFree(v->p, v->size);
err_release:
    cu.MemRelease(v->h);
err_free:
    free(v);
    return err == MC_ERR_NOMEM ? err : MC_ERR_IO;
}

static void cdev_free(struct mc_dev *d, uint64_t ptr)
{
    struct cdev *c = (struct cdev *)d;
    struct cvmm **pp, *v;

    if (cu_current(d) != 0)
        return;
    for (pp = &c->vmms; (v = *pp) != NULL; pp = &v->next) {
        if (v->p == ptr) {
            *pp = v->next;
            cvmm_release(v);
            return;
        }
    }
    cu.MemFree(ptr);
}

static int cstream_create(struct mc_dev *d, struct mc_dev_stream **s_p)
{
    struct cstream *s = calloc(1, sizeof(*s));
    int err;

    if (s == NULL)
        return MC_ERR_NOMEM;
    err = cu_current(d);
    if (err == 0)
        err = cu_err(cu.StreamCreate(&s->s, CU_STREAM_NON_BLOCKING));
    if (err != 0) {
        free(s);
        return err == MC_ERR_INVALID ? MC_ERR_IO : err;
    }
    s->pub.dev = d;
    *s_p = &s->pub;
    return 0;
}

static int cstream_sync(struct mc_dev_stream *ps)
{
    struct cstream *s = (struct cstream *)ps;
    int err = cu_current(ps->dev);

    if (err == 0)
        err = cu_err(cu.StreamSynchronize(s->s));
    return err == 0 ? 0 : MC_ERR_IO;
}

static void cstream_destroy(struct mc_dev_stream *ps)
{
    struct cstream *s = (struct cstream *)ps;

    cstream_sync(ps); /* nothing queued outlives the stream's owner */
    cu.StreamDestroy(s->s);
    free(s);
}

static int ccopy_htod(struct mc_dev_stream *ps, uint64_t dst, const void *src, uint64_t len)
{
    int err = cu_current(ps->dev);

    if (err == 0)
        err = cu_err(cu.MemcpyHtoDAsync(dst, src, len, ((struct cstream *)ps)->s));
    return err;
}

static int ccopy_dtoh(struct mc_dev_stream *ps, void *dst, uint64_t src, uint64_t len)
{
    int err = cu_current(ps->dev);

    if (err == 0)
        err = cu_err(cu.MemcpyDtoHAsync(dst, src, len, ((struct cstream *)ps)->s));
    return err;
}

static int ccopy_dtod(struct mc_dev_stream *ps, uint64_t dst, uint64_t src, uint64_t len)
{
    int err = cu_current(ps->dev);

    if (err == 0)
        err = cu_err(cu.MemcpyDtoDAsync(dst, src, len, ((struct cstream *)ps)->s));
    return err;
}

static int cevent_create(struct mc_dev *d, struct mc_dev_event **e_p)
{
    struct cevent *e = calloc(1, sizeof(*e));
    int err;

    if (e == NULL)
        return MC_ERR_NOMEM;
    err = cu_current(d);
    if (err == 0)
        err = cu_err(cu.EventCreate(&e->e, CU_EVENT_DISABLE_TIMING));
    if (err != 0) {
        free(e);
        return err;
    }
    e->pub.dev = d;
    *e_p = &e->pub;
    return 0;
}

static void cevent_destroy(struct mc_dev_event *pe)
{
    struct cevent *e = (struct cevent *)pe;

    if (cu_current(pe->dev) == 0)
        cu.EventDestroy(e->e);
    free(e);
}

static int cevent_record(struct mc_dev_event *pe, struct mc_dev_stream *ps)
{
    int err = cu_current(pe->dev);

    if (err == 0)
        err = cu_err(cu.EventRecord(((struct cevent *)pe)->e, ((struct cstream *)ps)->s));
    return err;
}

static int cevent_query(struct mc_dev_event *pe)
{
    int err = cu_current(pe->dev);

    if (err == 0)
        err = cu_err(cu.EventQuery(((struct cevent *)pe)->e));
    /* anything but done or not-ready: a copy failed (CUDA errors are sticky) */
    return err == 0 || err == MC_ERR_BUSY ? err : MC_ERR_IO;
}

static int cdev_ptr_query(uint64_t ptr, struct mc_dev_ptr_info *info)
{
    unsigned memtype = 0, legacy = 0;
    int ordinal = 0;
    unsigned long long id = 0;
    CUdeviceptr base = 0;
    size_t size = 0;
    int err = cu_ready(NULL, 0);

    if (err != 0)
        return err;
    /* host memory the driver never saw answers CUDA_ERROR_INVALID_VALUE: not an error */
    if (cu.PointerGetAttribute(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr) !=
            CUDA_SUCCESS ||
        memtype != CU_MEMORYTYPE_DEVICE)
        return 0;
    if (cu.PointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr) !=
            CUDA_SUCCESS ||
        cu.PointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, ptr) != CUDA_SUCCESS ||
        cu.MemGetAddressRange(&base, &size, ptr) != CUDA_SUCCESS)
        return MC_ERR_IO;
    /* drivers before 11.3 do not know the attribute: treat those as exportable */
    if (cu.PointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                               ptr) != CUDA_SUCCESS)
        legacy = 1;
    info->is_device = true;
    info->exportable = legacy != 0;
    info->kind = MC_DEV_CUDA;
    info->ordinal = (uint32_t)ordinal;
    info->base = base;
    info->size = size;
    info->buffer_id = id;
    return 0;
}

static int cdev_export(uint64_t ptr, struct mc_dev_export *x, int *fd_p)
{
    struct mc_dev_ptr_info info = {0};
    CUipcMemHandle h;
    int err = cdev_ptr_query(ptr, &info);

    if (err != 0)
        return err;
    if (!info.is_device)
        return MC_ERR_INVALID;
    if (!info.exportable)
        return MC_ERR_DENIED;
    err = cu_err(cu.IpcGetMemHandle(&h, info.base));
    if (err != 0)
        return err == MC_ERR_INVALID ? MC_ERR_DENIED : MC_ERR_IO;
    x->kind = MC_DEV_EXPORT_CUDA_IPC;
    x->ordinal = info.ordinal;
    x->size = info.size;
    x->buffer_id = info.buffer_id;
    memcpy(x->handle, h.reserved, sizeof(x->handle));
    *fd_p = -1;
    return 0;
}

static int cdev_import(struct mc_dev *d, const struct mc_dev_export *x, int fd,
                       uint64_t *base_p)
{
    CUipcMemHandle h;
    CUdeviceptr p;
    int err;

    if (fd >= 0)
        close(fd);
    if (x == NULL || x->kind != MC_DEV_EXPORT_CUDA_IPC || x->size == 0)
        return MC_ERR_INVALID;
    memcpy(h.reserved, x->handle, sizeof(h.reserved));
    err = cu_current(d);
    if (err == 0)
        err = cu_err(cu.IpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    if (err != 0)
        return err == MC_ERR_NOMEM ? err : MC_ERR_INVALID;
    *base_p = p;
    return 0;
}

static void cdev_unimport(struct mc_dev *d, uint64_t base, uint64_t size)
{
    (void)size;
    if (cu_current(d) == 0)
        cu.IpcCloseMemHandle(base);
}

const struct mc_dev_ops mc_dev_cuda_ops = {
    .probe = cdev_probe,
    .open = cdev_open,
    .close = cdev_close,
    .alloc = cdev_alloc,
    .alloc_vmm = cdev_alloc_vmm,
    .free = cdev_free,
    .stream_create = cstream_create,
    .stream_destroy = cstream_destroy,
    .stream_sync = cstream_sync,
    .copy_htod = ccopy_htod,
    .copy_dtoh = ccopy_dtoh,
    .copy_dtod = ccopy_dtod,
    .event_create = cevent_create,
    .event_destroy = cevent_destroy,
    .event_record = cevent_record,
    .event_query = cevent_query,
    .ptr_query = cdev_ptr_query,
    .export_buf = cdev_export,
    .import = cdev_import,
    .unimport = cdev_unimport,
};
