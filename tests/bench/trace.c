/*
 * Prefix-cache traces for mc-bench --trace (contract and replay semantics in trace.h).
 */
#include "tests/bench/trace.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <jansson.h>

#define NIL UINT32_MAX

static int fail(char *why, size_t whylen, const char *msg)
{
    snprintf(why, whylen, "%s", msg);
    return -1;
}

/* An optional non-negative integer field; false when present and not one. */
static bool opt_count(json_t *obj, const char *name, uint64_t *v_p)
{
    json_t *v = json_object_get(obj, name);

    *v_p = 0;
    if (v == NULL)
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *v_p = (uint64_t)json_integer_value(v);
    return true;
}

int mct_parse_line(const char *line, size_t len, struct mct_req *r, char *why, size_t whylen)
{
    json_error_t jerr;
    json_t *root, *ts, *ids;
    size_t i, n;
    int rc = -1;

    memset(r, 0, sizeof(*r));
    for (i = 0; i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'); i++)
        ;
    if (i == len)
        return 1;
    root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        snprintf(why, whylen, "not JSON: %s (column %d)", jerr.text, jerr.column);
        return -1;
    }
    if (!json_is_object(root)) {
        fail(why, whylen, "not a JSON object");
        goto out;
    }
    ts = json_object_get(root, "timestamp");
    if (ts != NULL && !json_is_number(ts)) {
        fail(why, whylen, "\"timestamp\" is not a number");
        goto out;
    }
    r->timestamp = ts != NULL ? json_number_value(ts) : 0;
    if (!opt_count(root, "input_length", &r->input_length) ||
        !opt_count(root, "output_length", &r->output_length)) {
        fail(why, whylen, "\"input_length\" / \"output_length\" is not a non-negative integer");
        goto out;
    }
    ids = json_object_get(root, "hash_ids");
    if (!json_is_array(ids)) {
        fail(why, whylen, "\"hash_ids\" missing or not an array");
        goto out;
    }
    n = json_array_size(ids);
    if (n > MCT_MAX_BLOCKS) {
        snprintf(why, whylen, "%zu hash ids: more than %u", n, MCT_MAX_BLOCKS);
        goto out;
    }
    r->ids = malloc((n > 0 ? n : 1) * sizeof(*r->ids));
    if (r->ids == NULL) {
        fail(why, whylen, "out of memory");
        goto out;
    }
    for (i = 0; i < n; i++) {
        json_t *v = json_array_get(ids, i);

        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            snprintf(why, whylen, "hash_ids[%zu] is not a non-negative integer", i);
            free(r->ids);
            r->ids = NULL;
            goto out;
        }
        r->ids[i] = (uint64_t)json_integer_value(v);
    }
    r->nblocks = (uint32_t)n;
    rc = 0;
out:
    json_decref(root);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Dense indices: the distinct ids sorted, each block's index found by binary search. */
static int index_blocks(struct mct_trace *t)
{
    uint64_t *all = malloc((t->nblocks > 0 ? t->nblocks : 1) * sizeof(*all));
    uint64_t k = 0, nd = 0;
    size_t i;
    uint32_t j;

    if (all == NULL)
        return -1;
    for (i = 0; i < t->nreqs; i++) {
        memcpy(all + k, t->reqs[i].ids, t->reqs[i].nblocks * sizeof(*all));
        k += t->reqs[i].nblocks;
    }
    qsort(all, k, sizeof(*all), cmp_u64);
    for (i = 0; i < k; i++) {
        if (nd == 0 || all[nd - 1] != all[i])
            all[nd++] = all[i];
    }
    if (nd >= NIL) {
        free(all);
        return -1;
    }
    t->ndistinct = (uint32_t)nd;
    for (i = 0; i < t->nreqs; i++) {
        struct mct_req *r = &t->reqs[i];

        r->idx = malloc((r->nblocks > 0 ? r->nblocks : 1) * sizeof(*r->idx));
        if (r->idx == NULL) {
            free(all);
            return -1;
        }
        for (j = 0; j < r->nblocks; j++) {
            uint64_t *p = bsearch(&r->ids[j], all, nd, sizeof(*all), cmp_u64);

            r->idx[j] = (uint32_t)(p - all);
        }
    }
    free(all);
    return 0;
}

int mct_trace_load(FILE *f, const char *name, FILE *errs, struct mct_trace *t)
{
    char *line = NULL, why[256];
    size_t cap = 0, reqcap = 0;
    ssize_t len;
    uint64_t lineno = 0;
    struct mct_req r;
    int rc;

    memset(t, 0, sizeof(*t));
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n')
            len--;
        if ((size_t)len > MCT_MAX_LINE) {
            snprintf(why, sizeof(why), "line of %zd bytes: more than %u", len, MCT_MAX_LINE);
            rc = -1;
        } else if (memchr(line, '\0', (size_t)len) != NULL) {
            snprintf(why, sizeof(why), "NUL byte in the line");
            rc = -1;
        } else {
            rc = mct_parse_line(line, (size_t)len, &r, why, sizeof(why));
        }
        if (rc == 1)
            continue;
        if (rc != 0) {
            if (errs != NULL)
                fprintf(errs, "%s:%" PRIu64 ": %s: line skipped\n", name, lineno, why);
            t->malformed++;
            continue;
        }
        if (t->nreqs == reqcap) {
            size_t nc = reqcap == 0 ? 1024 : reqcap * 2;
            struct mct_req *g = realloc(t->reqs, nc * sizeof(*g));

            if (g == NULL) {
                free(r.ids);
                goto nomem;
            }
            t->reqs = g;
            reqcap = nc;
        }
        t->reqs[t->nreqs++] = r;
        t->nblocks += r.nblocks;
    }
    if (ferror(f)) {
        if (errs != NULL)
            fprintf(errs, "%s: read error after line %" PRIu64 "\n", name, lineno);
        free(line);
        mct_trace_free(t);
        return -1;
    }
    free(line);
    if (index_blocks(t) != 0) {
        line = NULL;
        goto nomem;
    }
    return 0;
nomem:
    free(line);
    if (errs != NULL)
        fprintf(errs, "%s: out of memory at line %" PRIu64 "\n", name, lineno);
    mct_trace_free(t);
    return -1;
}

void mct_trace_free(struct mct_trace *t)
{
    size_t i;

    for (i = 0; i < t->nreqs; i++) {
        free(t->reqs[i].ids);
        free(t->reqs[i].idx);
    }
    free(t->reqs);
    memset(t, 0, sizeof(*t));
}

/* ---- the offline LRU: a doubly linked list over dense indices, head = most recent ---- */

struct lru {
    uint32_t *prev, *next;
    bool *in;
    uint32_t head, tail;
    uint64_t count;
};

static void lru_unlink(struct lru *l, uint32_t i)
{
    if (l->prev[i] != NIL)
        l->next[l->prev[i]] = l->next[i];
    else
        l->head = l->next[i];
    if (l->next[i] != NIL)
        l->prev[l->next[i]] = l->prev[i];
    else
        l->tail = l->prev[i];
}

static void lru_push_front(struct lru *l, uint32_t i)
{
    l->prev[i] = NIL;
    l->next[i] = l->head;
    if (l->head != NIL)
        l->prev[l->head] = i;
    l->head = i;
    if (l->tail == NIL)
        l->tail = i;
}

uint64_t mct_lru_hits(const struct mct_trace *t, uint64_t capacity_blocks)
{
    struct lru l = {.head = NIL, .tail = NIL};
    size_t n = t->ndistinct > 0 ? t->ndistinct : 1, i;
    uint64_t hits = 0;
    uint32_t j;

    l.prev = malloc(n * sizeof(*l.prev));
    l.next = malloc(n * sizeof(*l.next));
    l.in = calloc(n, sizeof(*l.in));
    if (l.prev == NULL || l.next == NULL || l.in == NULL) {
        hits = UINT64_MAX;
        goto out;
    }
    for (i = 0; i < t->nreqs; i++) {
        const struct mct_req *r = &t->reqs[i];

        for (j = 0; j < r->nblocks && l.in[r->idx[j]]; j++)
            hits++;
        for (j = 0; j < r->nblocks; j++) {
            uint32_t b = r->idx[j];

            if (l.in[b]) {
                lru_unlink(&l, b);
            } else {
                l.in[b] = true;
                l.count++;
            }
            lru_push_front(&l, b);
            while (l.count > capacity_blocks) {
                uint32_t v = l.tail;

                lru_unlink(&l, v);
                l.in[v] = false;
                l.count--;
            }
        }
    }
out:
    free(l.prev);
    free(l.next);
    free(l.in);
    return hits;
}

/* ---- block contents ---------------------------------------------------------------- */

static inline uint64_t word_at(uint64_t id, uint64_t w)
{
    uint64_t x = (id + 1) * 0x9e3779b97f4a7c15ull ^ (w + 1) * 0xc2b2ae3d27d4eb4full;

    return x ^ (x >> 29);
}

void mct_fill(void *buf, size_t len, uint64_t hash_id)
{
    unsigned char *b = buf;
    size_t w, nw = len / 8;
    uint64_t x;

    for (w = 0; w < nw; w++) {
        x = word_at(hash_id, w);
        memcpy(b + 8 * w, &x, 8);
    }
    if (len % 8 != 0) {
        x = word_at(hash_id, nw);
        memcpy(b + 8 * nw, &x, len % 8);
    }
}

bool mct_check(const void *buf, size_t len, uint64_t hash_id)
{
    const unsigned char *b = buf;
    size_t w, nw = len / 8;
    uint64_t x;

    for (w = 0; w < nw; w++) {
        x = word_at(hash_id, w);
        if (memcmp(b + 8 * w, &x, 8) != 0)
            return false;
    }
    if (len % 8 != 0) {
        x = word_at(hash_id, nw);
        if (memcmp(b + 8 * nw, &x, len % 8) != 0)
            return false;
    }
    return true;
}
