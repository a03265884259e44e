/* A listener's address blob (saddr.h). */
#include "ucx_backend/saddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "mc/mc_status.h"

bool mc_saddr_is(const void *blob, size_t len)
{
    return blob != NULL && (len == MC_SADDR_V4_LEN || len == MC_SADDR_V6_LEN) &&
           memcmp(blob, MC_SADDR_MAGIC, 4) == 0;
}

size_t mc_saddr_pack(const struct sockaddr *sa, void *out, size_t cap)
{
    uint8_t *b = out;
    uint16_t port;

    if (sa == NULL || out == NULL || cap < MC_SADDR_MAX)
        return 0;
    memcpy(b, MC_SADDR_MAGIC, 4);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;

        port = ntohs(in->sin_port);
        b[4] = 4;
        memcpy(b + 7, &in->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;

        port = ntohs(in6->sin6_port);
        b[4] = 6;
        memcpy(b + 7, &in6->sin6_addr, 16);
    } else {
        return 0;
    }
    if (port == 0)
        return 0;
    b[5] = (uint8_t)(port >> 8);
    b[6] = (uint8_t)port;
    return b[4] == 4 ? MC_SADDR_V4_LEN : MC_SADDR_V6_LEN;
}

int mc_saddr_unpack(const void *blob, size_t len, struct sockaddr_storage *ss,
                    socklen_t *sslen)
{
    const uint8_t *b = blob;
    uint16_t port;

    if (!mc_saddr_is(blob, len) || ss == NULL || sslen == NULL)
        return MC_ERR_INVALID;
    port = (uint16_t)(b[5] << 8 | b[6]);
    if (port == 0)
        return MC_ERR_INVALID;
    memset(ss, 0, sizeof(*ss));
    if (b[4] == 4 && len == MC_SADDR_V4_LEN) {
        struct sockaddr_in *in = (struct sockaddr_in *)(void *)ss;

        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        memcpy(&in->sin_addr, b + 7, 4);
        *sslen = sizeof(*in);
        return 0;
    }
    if (b[4] == 6 && len == MC_SADDR_V6_LEN) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)ss;

        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        memcpy(&in6->sin6_addr, b + 7, 16);
        *sslen = sizeof(*in6);
        return 0;
    }
    return MC_ERR_INVALID;
}

uint16_t mc_saddr_port(const void *blob, size_t len)
{
    const uint8_t *b = blob;

    return mc_saddr_is(blob, len) ? (uint16_t)(b[5] << 8 | b[6]) : 0;
}

int mc_saddr_from_ip(const char *ip, uint16_t port, struct sockaddr_storage *ss,
                     socklen_t *sslen)
{
    struct sockaddr_in *in = (struct sockaddr_in *)(void *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)ss;

    if (ip == NULL || ss == NULL || sslen == NULL)
        return MC_ERR_INVALID;
    memset(ss, 0, sizeof(*ss));
    if (inet_pton(AF_INET, ip, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        *sslen = sizeof(*in);
        return 0;
    }
    if (inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        *sslen = sizeof(*in6);
        return 0;
    }
    return MC_ERR_INVALID;
}
