/*
 * A listener's address as the opaque blob mc_ucx_address hands out (ucx.h): when a worker
 * listens (mc_ucx_params.listen_ip), peers connect to it by socket address, through UCX's
 * connection manager, and each endpoint it accepts is one it created itself (owned: UCX
 * reports its failure and never frees it behind our back). The blob:
 *
 *     0  4 bytes  "MCSA"
 *     4  uint8    4 (IPv4) or 6 (IPv6)
 *     5  uint16   port, big-endian (1..65535)
 *     7  4 or 16  the address, network order
 *
 * 11 or 23 bytes in all; anything else is a worker address (UCX's own, far longer).
 * Pure functions: no UCX, no I/O.
 */
#ifndef MC_UCX_SADDR_H
#define MC_UCX_SADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define MC_SADDR_MAGIC "MCSA"
#define MC_SADDR_V4_LEN 11u
#define MC_SADDR_V6_LEN 23u
#define MC_SADDR_MAX MC_SADDR_V6_LEN

/* Whether blob (len bytes) has the shape of a listener address (magic and length). */
bool mc_saddr_is(const void *blob, size_t len);

/* sa (AF_INET or AF_INET6, a port > 0) as a blob in out (cap >= MC_SADDR_MAX). Returns
 * its length, or 0 when sa is of another family, has port 0, or cap is short. */
size_t mc_saddr_pack(const struct sockaddr *sa, void *out, size_t cap);

/* A blob back into *ss and *sslen. Returns 0, or MC_ERR_INVALID (not a listener address:
 * wrong magic, length, family byte, or port 0). */
int mc_saddr_unpack(const void *blob, size_t len, struct sockaddr_storage *ss,
                    socklen_t *sslen);

/* The port a listener's blob names, or 0 when blob is not one. */
uint16_t mc_saddr_port(const void *blob, size_t len);

/* ip (a numeric IPv4 or IPv6 address) and port into *ss. Returns 0, or MC_ERR_INVALID
 * (not numeric: a host name or a wildcard address is the caller's to refuse). */
int mc_saddr_from_ip(const char *ip, uint16_t port, struct sockaddr_storage *ss,
                     socklen_t *sslen);

#endif /* MC_UCX_SADDR_H */
