/*
 * The TCP bootstrap of a UCX worker address (bootstrap.h).
 */
#include "daemon/common/bootstrap.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "common/clock.h"
#include "daemon/common/log.h"

int mc_boot_split(const char *hostport, char *host, size_t cap, const char **port_p)
{
    const char *colon = hostport != NULL ? strrchr(hostport, ':') : NULL;
    size_t hl;

    if (colon == NULL || colon[1] == '\0')
        return MC_ERR_INVALID;
    hl = (size_t)(colon - hostport);
    if (hl >= 2 && hostport[0] == '[' && hostport[hl - 1] == ']') {
        hostport++; /* [v6 address] */
        hl -= 2;
    }
    if (hl >= cap)
        return MC_ERR_INVALID;
    memcpy(host, hostport, hl);
    host[hl] = '\0';
    *port_p = colon + 1;
    return 0;
}

int mc_boot_listen_ip(const char *hostport, char *ip, size_t cap)
{
    struct in6_addr a6;
    struct in_addr a4;
    const char *port;

    if (mc_boot_split(hostport, ip, cap, &port) != 0)
        return MC_ERR_INVALID;
    if (inet_pton(AF_INET, ip, &a4) == 1)
        return a4.s_addr == htonl(INADDR_ANY) ? MC_ERR_INVALID : 0;
    if (inet_pton(AF_INET6, ip, &a6) == 1)
        return IN6_IS_ADDR_UNSPECIFIED(&a6) ? MC_ERR_INVALID : 0;
    return MC_ERR_INVALID;
}

static int resolve(const char *hostport, bool passive, struct addrinfo **res_p)
{
    struct addrinfo hints = {0};
    const char *port;
    char host[256];
    int rc;

    if (mc_boot_split(hostport, host, sizeof(host), &port) != 0) {
        mc_error("'%s' is not HOST:PORT", hostport != NULL ? hostport : "(null)");
        return MC_ERR_INVALID;
    }
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    rc = getaddrinfo(host[0] != '\0' ? host : NULL, port, &hints, res_p);
    if (rc != 0) {
        mc_error("%s: %s", hostport, gai_strerror(rc));
        return MC_ERR_INVALID;
    }
    return 0;
}

int mc_boot_listen(const char *hostport, int backlog, int *fd_p, uint16_t *port_p)
{
    struct addrinfo *res, *ai;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = -1, one = 1, err = resolve(hostport, true, &res);

    if (err != 0)
        return err;
    err = MC_ERR_IO;
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd < 0)
            continue;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, backlog) == 0)
            break;
        err = errno == ENOMEM ? MC_ERR_NOMEM : MC_ERR_IO;
        mc_error("listen: %s: %s", hostport, strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return err;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        close(fd);
        return MC_ERR_IO;
    }
    *port_p = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                       : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *fd_p = fd;
    return 0;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int mc_boot_msg(const void *addr, size_t len, void **msg_p, size_t *msg_len_p)
{
    uint8_t *m;

    if (len == 0 || len > MC_BOOT_ADDR_MAX)
        return MC_ERR_INVALID;
    m = malloc(MC_BOOT_HDR + len);
    if (m == NULL)
        return MC_ERR_NOMEM;
    put_le32(m, MC_BOOT_MAGIC);
    put_le32(m + 4, (uint32_t)len);
    memcpy(m + MC_BOOT_HDR, addr, len);
    *msg_p = m;
    *msg_len_p = MC_BOOT_HDR + len;
    return 0;
}

/* The message is a few hundred bytes, far below a fresh socket's send buffer, so a short
 * send means a broken peer: it is dropped (it will retry). */
void mc_boot_serve(int fd, const void *msg, size_t msg_len)
{
    for (;;) {
        int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        ssize_t n;

        if (c < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                mc_warn("accept: %s", strerror(errno));
            return;
        }
        n = send(c, msg, msg_len, MSG_NOSIGNAL);
        if (n != (ssize_t)msg_len)
            mc_debug("bootstrap connection: short send");
        close(c);
    }
}

int mc_boot_fetch_start(struct mc_boot_fetch *f, const char *hostport)
{
    struct addrinfo *res, *ai;
    int err = resolve(hostport, false, &res);

    f->fd = -1;
    f->got = 0;
    if (err != 0)
        return err;
    err = MC_ERR_UNAVAILABLE;
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        ai->ai_protocol);

        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
            f->fd = fd;
            err = 0;
            break;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return err;
}

void mc_boot_fetch_cancel(struct mc_boot_fetch *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
}

int mc_boot_fetch_poll(struct mc_boot_fetch *f, void *addr, size_t cap, size_t *len_p)
{
    size_t alen;

    if (f->fd < 0)
        return MC_ERR_INVALID;
    for (;;) {
        ssize_t n = read(f->fd, f->buf + f->got, sizeof(f->buf) - f->got);

        if (n > 0) {
            f->got += (size_t)n;
            if (f->got < sizeof(f->buf))
                continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            return MC_INPROGRESS; /* not connected yet, or the message is on its way */
        } else if (n < 0) {
            mc_boot_fetch_cancel(f);
            return MC_ERR_UNAVAILABLE; /* refused, reset */
        }
        break; /* closed by the daemon after its message (or more than one can be) */
    }
    mc_boot_fetch_cancel(f);
    if (f->got < MC_BOOT_HDR || get_le32(f->buf) != MC_BOOT_MAGIC)
        return f->got == 0 ? MC_ERR_UNAVAILABLE : MC_ERR_PROTO;
    alen = get_le32(f->buf + 4);
    if (alen == 0 || alen > MC_BOOT_ADDR_MAX || f->got != MC_BOOT_HDR + alen)
        return MC_ERR_PROTO;
    if (alen > cap)
        return MC_ERR_TOO_LARGE;
    memcpy(addr, f->buf + MC_BOOT_HDR, alen);
    *len_p = alen;
    return 0;
}

int mc_boot_fetch(const char *hostport, uint64_t timeout_ms, void *addr, size_t cap,
                  size_t *len_p)
{
    uint64_t deadline = mc_clock_ms() + timeout_ms;
    struct mc_boot_fetch f;
    int err = mc_boot_fetch_start(&f, hostport);

    while (err == 0) {
        struct pollfd p = {.fd = f.fd, .events = POLLIN};
        uint64_t now = mc_clock_ms();

        err = mc_boot_fetch_poll(&f, addr, cap, len_p);
        if (err != MC_INPROGRESS)
            return err;
        if (now >= deadline) {
            mc_boot_fetch_cancel(&f);
            return MC_ERR_TIMEOUT;
        }
        err = poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR ? MC_ERR_IO : 0;
    }
    mc_boot_fetch_cancel(&f);
    return err;
}
