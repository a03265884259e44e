/*
 * The fault-injection seam (fault.h): a list of deferred calls, newest first.
 */
#include "daemon/agent/fault.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mc/mc_status.h>

#include "common/clock.h"

struct mc_fault_item {
    struct mc_fault_item *next;
    uint64_t due_ms;
    mc_fault_fn run, drop;
    void *ctx;
};

bool mc_fault_defer(struct mc_fault *f, enum mc_fault_kind kind, mc_fault_fn run,
                    mc_fault_fn drop, void *ctx)
{
    struct mc_fault_item *it;

    if (kind >= MC_FAULT__KINDS || f->delay_ms[kind] == 0 || (it = malloc(sizeof(*it))) == NULL)
        return false;
    it->due_ms = mc_clock_ms() + f->delay_ms[kind];
    it->run = run;
    it->drop = drop;
    it->ctx = ctx;
    it->next = f->pending;
    f->pending = it;
    return true;
}

bool mc_fault_run_due(struct mc_fault *f, uint64_t now)
{
    struct mc_fault_item **pp = &f->pending, *it;

    while ((it = *pp) != NULL) {
        if (it->due_ms > now) {
            pp = &it->next;
            continue;
        }
        *pp = it->next; /* unlinked first: run may defer again */
        it->run(it->ctx);
        free(it);
        pp = &f->pending; /* the list may have changed under run: walk it again */
    }
    return f->pending != NULL;
}

bool mc_fault_pending(const struct mc_fault *f)
{
    return f->pending != NULL;
}

void mc_fault_cleanup(struct mc_fault *f)
{
    while (f->pending != NULL) {
        struct mc_fault_item *it = f->pending;

        f->pending = it->next;
        if (it->drop != NULL)
            it->drop(it->ctx);
        free(it);
    }
}

void mc_fault_master_changed(struct mc_fault *f)
{
    if (f->publish_lose_masters > 0)
        f->publish_lose_masters--;
}

bool mc_fault_lose(struct mc_fault *f, enum mc_fault_lose_kind kind)
{
    if (kind == MC_FAULT_LOSE_PUBLISH && f->publish_lose_masters > 0)
        return true;
    if (kind >= MC_FAULT_LOSE__KINDS || f->lose[kind] == 0)
        return false;
    f->lose[kind]--;
    return true;
}

int mc_fault_parse(struct mc_fault *f, const char *spec)
{
    static const char lose_masters[] = "publish_lose_masters=";

    static const char *const names[MC_FAULT__KINDS + MC_FAULT_LOSE__KINDS] = {
        [MC_FAULT_GET_ANSWER] = "get_delay_ms=",
        [MC_FAULT_PUT_END] = "put_end_delay_ms=",
        [MC_FAULT_PROMOTE] = "promote_delay_ms=",
        [MC_FAULT_DISK] = "disk_delay_ms=",
        [MC_FAULT_DISK_WRITE] = "disk_write_delay_ms=",
        [MC_FAULT__KINDS + MC_FAULT_LOSE_PUBLISH] = "publish_lose=",
        [MC_FAULT__KINDS + MC_FAULT_LOSE_DROP] = "drop_lose=",
        [MC_FAULT__KINDS + MC_FAULT_NOMEM_PUBLISH] = "publish_nomem=",
        [MC_FAULT__KINDS + MC_FAULT_FAIL_DISK_ERASE] = "disk_erase_fail=",
    };

    if (strncmp(spec, lose_masters, sizeof(lose_masters) - 1) == 0) {
        const char *v = spec + sizeof(lose_masters) - 1;
        unsigned long long n;
        char *end;

        if (*v < '0' || *v > '9')
            return MC_ERR_INVALID;
        n = strtoull(v, &end, 10);
        if (*end != '\0' || n > 60000)
            return MC_ERR_INVALID;
        f->publish_lose_masters = (uint32_t)n;
        return 0;
    }
    for (int k = 0; k < MC_FAULT__KINDS + MC_FAULT_LOSE__KINDS; k++) {
        size_t n = strlen(names[k]);
        unsigned long long v;
        char *end;

        if (strncmp(spec, names[k], n) != 0)
            continue;
        if (spec[n] < '0' || spec[n] > '9')
            return MC_ERR_INVALID;
        v = strtoull(spec + n, &end, 10);
        if (*end != '\0' || v > 60000)
            return MC_ERR_INVALID;
        if (k < MC_FAULT__KINDS)
            f->delay_ms[k] = v;
        else
            f->lose[k - MC_FAULT__KINDS] = (uint32_t)v;
        return 0;
    }
    return MC_ERR_INVALID;
}
