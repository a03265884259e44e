/*
 * Clients' device buffers (devbuf.h).
 */
#include "daemon/agent/devbuf.h"

#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "daemon/common/log.h"

void devbuf_devs_cleanup(struct devbuf_devs *ds)
{
    for (uint32_t i = 0; i < ds->n; i++) {
        mc_dev_stream_destroy(ds->d[i].stream); /* waits for what is queued */
        mc_dev_close(ds->d[i].dev);
    }
    ds->n = 0;
}

/* The device (kind, ordinal) with its stream, opened on first use. */
static int devs_get(struct devbuf_devs *ds, int kind, int ordinal, uint32_t *i_p)
{
    char why[MC_DEV_WHY_LEN] = "";
    uint32_t i;
    int err;

    for (i = 0; i < ds->n; i++) {
        if (ds->d[i].kind == kind && ds->d[i].ordinal == ordinal) {
            *i_p = i;
            return 0;
        }
    }
    if (ds->n == DEVBUF_DEVS_MAX)
        return MC_ERR_NOMEM;
    err = mc_dev_open((enum mc_dev_kind)kind, ordinal, &ds->topts, &ds->d[i].dev, why,
                      sizeof(why));
    if (err != 0) {
        mc_warn("a client's device buffer is on %s%d, which this agent cannot open: %s",
                mc_dev_kind_name((enum mc_dev_kind)kind), ordinal, why[0] ? why : mc_strerror(err));
        return err;
    }
    err = mc_dev_stream_create(ds->d[i].dev, &ds->d[i].stream);
    if (err != 0) {
        mc_dev_close(ds->d[i].dev);
        return err;
    }
    ds->d[i].kind = kind;
    ds->d[i].ordinal = ordinal;
    ds->n++;
    *i_p = i;
    return 0;
}

int devbuf_add(struct devbuf_devs *ds, struct devbuf_tab **tab_p,
               const struct mc_shm_devbuf_msg *m, int fd)
{
    struct mc_dev_export x = {.kind = m->export_kind, .ordinal = m->ordinal, .size = m->size,
                              .buffer_id = m->buffer_id};
    struct devbuf *b;
    uint32_t di;
    int err;

    if (m->magic != MC_SHM_MAGIC || m->type != MC_SHM_DEVBUF_ADD || m->reserved != 0 ||
        m->devbuf_id >= MC_SHM_MAX_DEVBUFS || m->size == 0 || m->ordinal > 255 ||
        (m->dev_kind != MC_DEV_TEST && m->dev_kind != MC_DEV_CUDA) ||
        (m->export_kind == MC_DEV_EXPORT_FD) != (fd >= 0)) {
        if (fd >= 0)
            close(fd);
        return MC_ERR_PROTO;
    }
    if (*tab_p == NULL && (*tab_p = calloc(1, sizeof(**tab_p))) == NULL) {
        if (fd >= 0)
            close(fd);
        return MC_ERR_NOMEM;
    }
    b = &(*tab_p)->b[m->devbuf_id];
    if (b->dev != NULL || b->refused != 0) {
        if (fd >= 0)
            close(fd);
        return MC_ERR_PROTO; /* ids are never reused on a connection */
    }
    for (size_t i = 0; i < sizeof(x.handle); i++)
        x.handle[i] = m->handle[i];
    err = devs_get(ds, (int)m->dev_kind, (int)m->ordinal, &di);
    if (err != 0) {
        if (fd >= 0)
            close(fd);
        goto refuse;
    }
    err = mc_dev_event_create(ds->d[di].dev, &b->ev);
    if (err != 0) {
        if (fd >= 0)
            close(fd);
        goto refuse;
    }
    err = mc_dev_import(ds->d[di].dev, &x, fd, &b->base); /* takes fd */
    if (err != 0) {
        mc_dev_event_destroy(b->ev);
        b->ev = NULL;
        goto refuse;
    }
    b->dev = ds->d[di].dev;
    b->stream = ds->d[di].stream;
    b->size = m->size;
    ds->imports++;
    ds->open++;
    return 0;

refuse:
    b->refused = err == MC_ERR_NOMEM ? MC_ERR_NOMEM : MC_ERR_INVALID;
    ds->refused++;
    mc_warn("device buffer %u of %" PRIu64 " bytes not imported: %s", m->devbuf_id, m->size,
            mc_strerror(err));
    return 0;
}

int devbuf_span(struct devbuf_tab *tab, uint32_t id, uint64_t off, uint64_t len,
                struct devbuf **b_p, uint64_t *dptr_p)
{
    struct devbuf *b;

    if (tab == NULL || id >= MC_SHM_MAX_DEVBUFS)
        return MC_ERR_INVALID;
    b = &tab->b[id];
    if (b->refused != 0)
        return b->refused;
    if (b->dev == NULL || off > b->size || len > b->size - off)
        return MC_ERR_INVALID;
    *b_p = b;
    *dptr_p = b->base + off;
    return 0;
}

void devbuf_tab_destroy(struct devbuf_devs *ds, struct devbuf_tab *tab)
{
    if (tab == NULL)
        return;
    /* every copy that may still read an import is done first */
    for (uint32_t i = 0; i < MC_SHM_MAX_DEVBUFS; i++) {
        if (tab->b[i].dev != NULL)
            mc_dev_stream_sync(tab->b[i].stream);
    }
    for (uint32_t i = 0; i < MC_SHM_MAX_DEVBUFS; i++) {
        struct devbuf *b = &tab->b[i];

        if (b->dev == NULL)
            continue;
        mc_dev_event_destroy(b->ev);
        mc_dev_unimport(b->dev, b->base, b->size);
        ds->open--;
    }
    free(tab);
}
