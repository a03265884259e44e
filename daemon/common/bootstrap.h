/*
 * The TCP bootstrap of a daemon's UCX worker address (mc-master and, in cluster mode,
 * mc-agent): a peer cannot reach a UCX worker whose address it does not know, so the
 * daemon listens on TCP HOST:PORT and answers every connection with one message, then
 * closes it:
 *
 *     0  uint32 magic  MC_BOOT_MAGIC (little-endian)
 *     4  uint32 len    bytes of the worker address, 1..MC_BOOT_ADDR_MAX
 *     8  len bytes     the packed UCX worker address
 *
 * The peer then creates a UCX endpoint to that address and starts with HELLO. The listener
 * reads nothing from the peer; nothing secret is sent (the token is checked by HELLO).
 */
#ifndef MC_COMMON_BOOTSTRAP_H
#define MC_COMMON_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#define MC_BOOT_MAGIC    UINT32_C(0x3162636d) /* "mcb1" as little-endian bytes */
#define MC_BOOT_HDR      8u
#define MC_BOOT_ADDR_MAX 4096u /* = MC_PROTO_ADDR_MAX */

/* Splits "HOST:PORT" ("[v6]:PORT" too; an empty HOST is any address). Returns 0, or
 * MC_ERR_INVALID when it is not of that shape or HOST does not fit `cap` bytes. */
int mc_boot_split(const char *hostport, char *host, size_t cap, const char **port_p);

/* The HOST of "HOST:PORT" into ip (cap bytes) when it is one numeric IPv4 or IPv6 address
 * that is not a wildcard (0.0.0.0, ::): where a daemon's UCX worker may listen for its
 * peers (mc_ucx_params.listen_ip). Returns 0, or MC_ERR_INVALID (a name, a wildcard, an
 * empty host: the worker is then reached by its worker address). */
int mc_boot_listen_ip(const char *hostport, char *ip, size_t cap);

/* A non-blocking listening socket on HOST:PORT (port 0: any free one, *port_p tells).
 * Returns 0, MC_ERR_INVALID (address), MC_ERR_IO (bind/listen; logged). */
int mc_boot_listen(const char *hostport, int backlog, int *fd_p, uint16_t *port_p);

/* The message for `addr` in a malloc'd buffer. Returns 0, MC_ERR_INVALID or MC_ERR_NOMEM. */
int mc_boot_msg(const void *addr, size_t len, void **msg_p, size_t *msg_len_p);

/* Answers every pending connection on the listening `fd` with `msg` and closes it. */
void mc_boot_serve(int fd, const void *msg, size_t msg_len);

/* The same without blocking: start (0, or MC_ERR_INVALID / MC_ERR_UNAVAILABLE), then poll
 * whenever convenient (0 and the address: done; MC_INPROGRESS: not yet; an error as below:
 * over), or cancel. */
struct mc_boot_fetch {
    int fd;
    size_t got;
    uint8_t buf[MC_BOOT_HDR + MC_BOOT_ADDR_MAX + 1];
};
int mc_boot_fetch_start(struct mc_boot_fetch *f, const char *hostport);
int mc_boot_fetch_poll(struct mc_boot_fetch *f, void *addr, size_t cap, size_t *len_p);
void mc_boot_fetch_cancel(struct mc_boot_fetch *f);

/* Connects to HOST:PORT and reads the worker address into addr (cap bytes), within
 * timeout_ms. Returns 0 and *len_p, MC_ERR_INVALID (address), MC_ERR_UNAVAILABLE (no
 * answer, refused), MC_ERR_TIMEOUT, MC_ERR_PROTO (not a bootstrap message). */
int mc_boot_fetch(const char *hostport, uint64_t timeout_ms, void *addr, size_t cap,
                  size_t *len_p);

#endif /* MC_COMMON_BOOTSTRAP_H */
