/*
 * The device seam's ops table (dev.h): one per implementation, chosen once by kind.
 * Internal to dev/: dev.c dispatches, dev_test.c and dev_cuda.c implement.
 */
#ifndef MC_DEV_DEV_INT_H
#define MC_DEV_DEV_INT_H

#include "dev/dev.h"

struct mc_dev_ops {
    int (*probe)(int *count_p, char *why, size_t why_len);
    int (*open)(int ordinal, const struct mc_dev_test_opts *opts, struct mc_dev **d_p,
                char *why, size_t why_len);
    void (*close)(struct mc_dev *d);
    int (*alloc)(struct mc_dev *d, uint64_t size, uint64_t *ptr_p);
    int (*alloc_vmm)(struct mc_dev *d, uint64_t size, uint64_t *ptr_p);
    void (*free)(struct mc_dev *d, uint64_t ptr);
    int (*stream_create)(struct mc_dev *d, struct mc_dev_stream **s_p);
    void (*stream_destroy)(struct mc_dev_stream *s);
    int (*stream_sync)(struct mc_dev_stream *s);
    int (*copy_htod)(struct mc_dev_stream *s, uint64_t dst, const void *src, uint64_t len);
    int (*copy_dtoh)(struct mc_dev_stream *s, void *dst, uint64_t src, uint64_t len);
    int (*copy_dtod)(struct mc_dev_stream *s, uint64_t dst, uint64_t src, uint64_t len);
    int (*event_create)(struct mc_dev *d, struct mc_dev_event **e_p);
    void (*event_destroy)(struct mc_dev_event *e);
    int (*event_record)(struct mc_dev_event *e, struct mc_dev_stream *s);
    int (*event_query)(struct mc_dev_event *e);
    int (*ptr_query)(uint64_t ptr, struct mc_dev_ptr_info *info);
    int (*export_buf)(uint64_t ptr, struct mc_dev_export *x, int *fd_p);
    int (*import)(struct mc_dev *d, const struct mc_dev_export *x, int fd, uint64_t *base_p);
    void (*unimport)(struct mc_dev *d, uint64_t base, uint64_t size);
};

/* Every implementation's device, stream and event start with these. */
struct mc_dev {
    const struct mc_dev_ops *ops;
    enum mc_dev_kind kind;
    int ordinal;
};
struct mc_dev_stream {
    struct mc_dev *dev;
};
struct mc_dev_event {
    struct mc_dev *dev;
};

extern const struct mc_dev_ops mc_dev_test_ops;
extern const struct mc_dev_ops mc_dev_cuda_ops;

/* snprintf into why when it is not NULL */
void mc_dev_why(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* MC_DEV_DEV_INT_H */
