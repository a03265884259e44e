/*
 * The etcd v3 client (etcd.h): JSON gateway calls through one curl easy handle.
 */
#include "daemon/common/etcd.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mc/mc_status.h>

#include "daemon/common/log.h"

#define REPLY_MAX (1u << 20)

struct mc_etcd {
    CURL *curl;
    uint64_t timeout_ms;
    int nep;
    int cur;                    /* the endpoint that answered last */
    char *ep[MC_ETCD_ENDPOINTS_MAX];
    char *buf;                  /* the reply being read */
    size_t len;
    bool overflow;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static bool curl_ok;

static void curl_init_once(void)
{
    curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

/* --- base64 ------------------------------------------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int mc_etcd_cluster_key(const char *cluster_id, const char *rest, char *buf, size_t cap)
{
    size_t n = cluster_id != NULL ? strlen(cluster_id) : 0;

    if (n == 0 || n > 63 || rest == NULL ||
        strspn(cluster_id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
            n)
        return MC_ERR_INVALID;
    if ((size_t)snprintf(buf, cap, "/mcstore/%s/%s", cluster_id, rest) >= cap)
        return MC_ERR_INVALID;
    return 0;
}

void mc_etcd_b64_encode(const void *in, size_t n, char *out)
{
    const uint8_t *p = in;
    size_t i, o = 0;

    for (i = 0; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = b64[(v >> 6) & 63];
        out[o++] = b64[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);

        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
}

static int b64_val(char c)
{
    const char *p = c != '\0' ? strchr(b64, c) : NULL;

    return p != NULL ? (int)(p - b64) : -1;
}

long mc_etcd_b64_decode(const char *in, void *out, size_t cap)
{
    size_t n = strlen(in), i, o = 0;
    uint8_t *q = out;

    if (n % 4 != 0)
        return -1;
    for (i = 0; i < n; i += 4) {
        int a = b64_val(in[i]), b = b64_val(in[i + 1]), c, d;
        bool last = i + 4 == n;
        uint32_t v;

        c = in[i + 2] == '=' && last ? 0 : b64_val(in[i + 2]);
        d = in[i + 3] == '=' && last ? 0 : b64_val(in[i + 3]);
        if (a < 0 || b < 0 || c < 0 || d < 0 || (in[i + 2] == '=' && in[i + 3] != '='))
            return -1;
        v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        if (o >= cap)
            return -1;
        q[o++] = (uint8_t)(v >> 16);
        if (in[i + 2] != '=') {
            if (o >= cap)
                return -1;
            q[o++] = (uint8_t)(v >> 8);
        }
        if (in[i + 3] != '=') {
            if (o >= cap)
                return -1;
            q[o++] = (uint8_t)v;
        }
    }
    return (long)o;
}

/* --- the handle ---------------------------------------------------------------------------- */

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
    struct mc_etcd *e = ctx;
    size_t add = size * n;

    if (e->len + add > REPLY_MAX) {
        e->overflow = true;
        return 0; /* curl fails the transfer */
    }
    memcpy(e->buf + e->len, p, add);
    e->len += add;
    return add;
}

int mc_etcd_create(const char *endpoints, uint64_t timeout_ms, struct mc_etcd **e_p)
{
    struct mc_etcd *e;
    const char *p = endpoints;

    if (endpoints == NULL || *endpoints == '\0' || timeout_ms == 0)
        return MC_ERR_INVALID;
    pthread_once(&curl_once, curl_init_once);
    if (!curl_ok)
        return MC_ERR_NOMEM;
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return MC_ERR_NOMEM;
    e->timeout_ms = timeout_ms;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");

        if (n == 0 || n > 256 || e->nep == MC_ETCD_ENDPOINTS_MAX ||
            (strncmp(p, "http://", 7) != 0 && strncmp(p, "https://", 8) != 0)) {
            mc_etcd_destroy(e);
            return MC_ERR_INVALID;
        }
        if ((e->ep[e->nep] = strndup(p, n)) == NULL) {
            mc_etcd_destroy(e);
            return MC_ERR_NOMEM;
        }
        /* a trailing slash would make "//v3/..." */
        if (e->ep[e->nep][n - 1] == '/')
            e->ep[e->nep][n - 1] = '\0';
        e->nep++;
        p += n;
        if (*p == ',')
            p++;
    }
    e->curl = curl_easy_init();
    e->buf = malloc(REPLY_MAX + 1);
    if (e->curl == NULL || e->buf == NULL || e->nep == 0) {
        int err = e->nep == 0 ? MC_ERR_INVALID : MC_ERR_NOMEM;

        mc_etcd_destroy(e);
        return err;
    }
    *e_p = e;
    return 0;
}

void mc_etcd_destroy(struct mc_etcd *e)
{
    if (e == NULL)
        return;
    if (e->curl != NULL)
        curl_easy_cleanup(e->curl);
    for (int i = 0; i < e->nep; i++)
        free(e->ep[i]);
    free(e->buf);
    free(e);
}

/* POST body to path at each endpoint in turn until one answers with HTTP 200 and JSON;
 * *reply_p is then the parsed reply (the caller's to json_decref). An HTTP error from etcd
 * (no leader, request timed out in raft) is UNAVAILABLE; a 4xx for our request PROTO. */
static int call(struct mc_etcd *e, const char *path, json_t *body, json_t **reply_p)
{
    char *text = json_dumps(body, JSON_COMPACT);
    char url[320];
    int err = MC_ERR_UNAVAILABLE;

    json_decref(body);
    if (text == NULL)
        return MC_ERR_NOMEM;
    for (int k = 0; k < e->nep; k++) {
        int i = (e->cur + k) % e->nep;
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
        long code = 0;
        CURLcode rc;
        json_error_t jerr;

        snprintf(url, sizeof(url), "%s%s", e->ep[i], path);
        e->len = 0;
        e->overflow = false;
        curl_easy_reset(e->curl);
        curl_easy_setopt(e->curl, CURLOPT_URL, url);
        curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(e->curl, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, (long)e->timeout_ms);
        curl_easy_setopt(e->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)e->timeout_ms);
        curl_easy_setopt(e->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, e);
        curl_easy_setopt(e->curl, CURLOPT_PROTOCOLS_STR, "http,https");
        rc = curl_easy_perform(e->curl);
        curl_slist_free_all(h);
        if (rc == CURLE_OPERATION_TIMEDOUT) {
            err = MC_ERR_TIMEOUT;
            continue;
        }
        if (rc != CURLE_OK) {
            if (e->overflow)
                err = MC_ERR_PROTO;
            continue;
        }
        curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 500 || code == 0) {
            err = MC_ERR_UNAVAILABLE; /* this member cannot serve (no leader, no quorum) */
            continue;
        }
        e->buf[e->len] = '\0';
        *reply_p = json_loadb(e->buf, e->len, 0, &jerr);
        if (code != 200 || *reply_p == NULL || !json_is_object(*reply_p)) {
            json_decref(*reply_p);
            *reply_p = NULL;
            mc_debug("etcd %s: HTTP %ld: %.200s", url, code, e->buf);
            free(text);
            return MC_ERR_PROTO;
        }
        e->cur = i;
        free(text);
        return 0;
    }
    free(text);
    return err;
}

/* A 64-bit number the gateway sends as a string (or, rarely, a number); absent: 0. */
static bool get_i64(const json_t *o, const char *name, int64_t *v_p)
{
    const json_t *v = json_object_get(o, name);
    char *end;

    *v_p = 0;
    if (v == NULL)
        return true;
    if (json_is_integer(v)) {
        *v_p = json_integer_value(v);
        return true;
    }
    if (!json_is_string(v))
        return false;
    errno = 0;
    *v_p = strtoll(json_string_value(v), &end, 10);
    return errno == 0 && *end == '\0' && end != json_string_value(v);
}

static json_t *b64_string(const void *p, size_t n)
{
    char *s = malloc(4 * ((n + 2) / 3) + 1);
    json_t *j;

    if (s == NULL)
        return NULL;
    mc_etcd_b64_encode(p, n, s);
    j = json_string(s);
    free(s);
    return j;
}

static json_t *i64_string(int64_t v)
{
    char s[24];

    snprintf(s, sizeof(s), "%" PRId64, v);
    return json_string(s);
}

int mc_etcd_lease_grant(struct mc_etcd *e, uint64_t ttl_s, int64_t *id_p)
{
    json_t *rep = NULL;
    int64_t id, ttl;
    int err;

    if (ttl_s == 0 || ttl_s > INT32_MAX)
        return MC_ERR_INVALID;
    err = call(e, "/v3/lease/grant", json_pack("{s:I}", "TTL", (json_int_t)ttl_s), &rep);
    if (err != 0)
        return err;
    if (!get_i64(rep, "ID", &id) || !get_i64(rep, "TTL", &ttl) || id == 0 || ttl <= 0)
        err = json_object_get(rep, "error") != NULL ? MC_ERR_UNAVAILABLE : MC_ERR_PROTO;
    else
        *id_p = id;
    json_decref(rep);
    return err;
}

int mc_etcd_lease_keepalive(struct mc_etcd *e, int64_t id, int64_t *ttl_p)
{
    json_t *rep = NULL, *res;
    int64_t ttl;
    int err;

    err = call(e, "/v3/lease/keepalive", json_pack("{s:o}", "ID", i64_string(id)), &rep);
    if (err != 0)
        return err;
    /* a streaming call: the gateway wraps each answer in "result" */
    res = json_object_get(rep, "result");
    if (res == NULL || !json_is_object(res) || !get_i64(res, "TTL", &ttl))
        err = json_object_get(rep, "error") != NULL ? MC_ERR_UNAVAILABLE : MC_ERR_PROTO;
    else if (ttl <= 0)
        err = MC_ERR_NOT_FOUND;
    else
        *ttl_p = ttl;
    json_decref(rep);
    return err;
}

int mc_etcd_lease_revoke(struct mc_etcd *e, int64_t id)
{
    json_t *rep = NULL;
    int err = call(e, "/v3/lease/revoke", json_pack("{s:o}", "ID", i64_string(id)), &rep);

    json_decref(rep);
    return err == MC_ERR_PROTO ? 0 : err; /* "lease not found": gone already */
}

/* kv from one "kvs" entry (or absent). */
static int kv_parse(const json_t *kvs, struct mc_etcd_kv *kv)
{
    const json_t *it, *v;
    long n;

    memset(kv, 0, offsetof(struct mc_etcd_kv, value) + 1);
    if (kvs == NULL || (json_is_array(kvs) && json_array_size(kvs) == 0))
        return 0;
    if (!json_is_array(kvs) || !json_is_object(it = json_array_get(kvs, 0)))
        return MC_ERR_PROTO;
    if (!get_i64(it, "create_revision", &kv->create_rev) ||
        !get_i64(it, "mod_revision", &kv->mod_rev) || !get_i64(it, "lease", &kv->lease) ||
        kv->create_rev <= 0)
        return MC_ERR_PROTO;
    v = json_object_get(it, "value");
    n = 0;
    if (v != NULL && (!json_is_string(v) ||
                      (n = mc_etcd_b64_decode(json_string_value(v), kv->value,
                                              MC_ETCD_VALUE_MAX)) < 0))
        return MC_ERR_PROTO;
    kv->value[n] = '\0';
    kv->value_len = (size_t)n;
    kv->found = true;
    return 0;
}

int mc_etcd_get(struct mc_etcd *e, const char *key, struct mc_etcd_kv *kv)
{
    json_t *rep = NULL;
    int err = call(e, "/v3/kv/range", json_pack("{s:o}", "key", b64_string(key, strlen(key))),
                   &rep);

    if (err != 0)
        return err;
    err = kv_parse(json_object_get(rep, "kvs"), kv);
    json_decref(rep);
    return err;
}

int mc_etcd_put(struct mc_etcd *e, const char *key, const char *value, int64_t lease)
{
    size_t vlen = strlen(value);
    json_t *rep = NULL;
    int err;

    if (vlen > MC_ETCD_VALUE_MAX)
        return MC_ERR_INVALID;
    err = call(e, "/v3/kv/put",
               json_pack("{s:o,s:o,s:o}", "key", b64_string(key, strlen(key)), "value",
                         b64_string(value, vlen), "lease", i64_string(lease)),
               &rep);
    if (err == 0 && json_object_get(rep, "header") == NULL)
        err = MC_ERR_PROTO;
    json_decref(rep);
    return err;
}

int mc_etcd_get_prefix(struct mc_etcd *e, const char *prefix, size_t limit,
                       void (*fn)(void *ctx, const struct mc_etcd_kv *kv), void *ctx)
{
    size_t n = strlen(prefix);
    char end[256];
    json_t *rep = NULL, *kvs;
    struct mc_etcd_kv *kv;
    int err;

    /* the range [prefix, prefix with its last byte + 1): every key that starts with it */
    if (n == 0 || n >= sizeof(end) || (unsigned char)prefix[n - 1] == 0xff || limit == 0 ||
        limit > INT32_MAX)
        return MC_ERR_INVALID;
    memcpy(end, prefix, n);
    end[n - 1] = (char)((unsigned char)end[n - 1] + 1);
    err = call(e, "/v3/kv/range",
               json_pack("{s:o,s:o,s:I}", "key", b64_string(prefix, n), "range_end",
                         b64_string(end, n), "limit", (json_int_t)limit),
               &rep);
    if (err != 0)
        return err;
    kvs = json_object_get(rep, "kvs");
    if (kvs != NULL && !json_is_array(kvs)) {
        json_decref(rep);
        return MC_ERR_PROTO;
    }
    kv = malloc(sizeof(*kv));
    if (kv == NULL) {
        json_decref(rep);
        return MC_ERR_NOMEM;
    }
    for (size_t i = 0; kvs != NULL && i < json_array_size(kvs) && i < limit && err == 0; i++) {
        json_t *one = json_array();

        if (one == NULL || json_array_append(one, json_array_get(kvs, i)) != 0)
            err = MC_ERR_NOMEM;
        else if ((err = kv_parse(one, kv)) == 0)
            fn(ctx, kv);
        json_decref(one);
    }
    free(kv);
    json_decref(rep);
    return err;
}

int mc_etcd_create_if_absent(struct mc_etcd *e, const char *key, const char *value,
                             int64_t lease, bool *created, struct mc_etcd_kv *kv)
{
    size_t klen = strlen(key), vlen = strlen(value);
    json_t *rep = NULL, *body, *resp, *r;
    int64_t rev;
    int err;

    if (vlen > MC_ETCD_VALUE_MAX)
        return MC_ERR_INVALID;
    body = json_pack("{s:[{s:o,s:s,s:s,s:s}],s:[{s:{s:o,s:o,s:o}}],s:[{s:{s:o}}]}",
                     "compare", "key", b64_string(key, klen), "result", "EQUAL", "target",
                     "CREATE", "create_revision", "0",
                     "success", "request_put", "key", b64_string(key, klen), "value",
                     b64_string(value, vlen), "lease", i64_string(lease),
                     "failure", "request_range", "key", b64_string(key, klen));
    if (body == NULL)
        return MC_ERR_NOMEM;
    err = call(e, "/v3/kv/txn", body, &rep);
    if (err != 0)
        return err;
    *created = json_is_true(json_object_get(rep, "succeeded"));
    if (*created) {
        /* ours: created at this transaction's revision */
        if (!get_i64(json_object_get(rep, "header"), "revision", &rev) || rev <= 0) {
            err = MC_ERR_PROTO;
        } else {
            memset(kv, 0, offsetof(struct mc_etcd_kv, value) + 1);
            kv->found = true;
            kv->create_rev = kv->mod_rev = rev;
            kv->lease = lease;
            memcpy(kv->value, value, vlen + 1);
            kv->value_len = vlen;
        }
    } else {
        resp = json_object_get(rep, "responses");
        r = json_object_get(json_object_get(json_array_get(resp, 0), "response_range"), "kvs");
        err = kv_parse(r, kv);
    }
    json_decref(rep);
    return err;
}

int mc_etcd_put_if(struct mc_etcd *e, const char *key, const char *value, const char *guard,
                   int64_t guard_rev, bool *done)
{
    size_t klen = strlen(key), vlen = strlen(value), glen = strlen(guard);
    json_t *rep = NULL, *body;
    int err;

    if (vlen > MC_ETCD_VALUE_MAX || guard_rev <= 0)
        return MC_ERR_INVALID;
    body = json_pack("{s:[{s:o,s:s,s:s,s:o}],s:[{s:{s:o,s:o}}]}",
                     "compare", "key", b64_string(guard, glen), "result", "EQUAL", "target",
                     "CREATE", "create_revision", i64_string(guard_rev),
                     "success", "request_put", "key", b64_string(key, klen), "value",
                     b64_string(value, vlen));
    if (body == NULL)
        return MC_ERR_NOMEM;
    err = call(e, "/v3/kv/txn", body, &rep);
    if (err == 0)
        *done = json_is_true(json_object_get(rep, "succeeded"));
    json_decref(rep);
    return err;
}

int mc_etcd_delete_if(struct mc_etcd *e, const char *key, int64_t create_rev, bool *deleted)
{
    size_t klen = strlen(key);
    json_t *rep = NULL, *body;
    int err;

    body = json_pack("{s:[{s:o,s:s,s:s,s:o}],s:[{s:{s:o}}]}",
                     "compare", "key", b64_string(key, klen), "result", "EQUAL", "target",
                     "CREATE", "create_revision", i64_string(create_rev),
                     "success", "request_delete_range", "key", b64_string(key, klen));
    if (body == NULL)
        return MC_ERR_NOMEM;
    err = call(e, "/v3/kv/txn", body, &rep);
    if (err == 0)
        *deleted = json_is_true(json_object_get(rep, "succeeded"));
    json_decref(rep);
    return err;
}
