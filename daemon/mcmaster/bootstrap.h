/*
 * The TCP bootstrap of mc-master: a peer cannot reach a UCX worker whose address it does
 * not know, so mc-master listens on TCP HOST:PORT and answers every connection with one
 * message, then closes it:
 *
 *     0  uint32 magic  MC_MCMASTER_BOOT_MAGIC (little-endian)
 *     4  uint32 len    bytes of the worker address, 1..MC_MCMASTER_BOOT_ADDR_MAX
 *     8  len bytes     the master's packed UCX worker address
 *
 * The peer then creates a UCX endpoint to that address and starts with HELLO. The listener
 * reads nothing from the peer; nothing secret is sent (the token is checked by HELLO).
 */
#ifndef MC_MCMASTER_BOOTSTRAP_H
#define MC_MCMASTER_BOOTSTRAP_H

#include <stdint.h>

#define MC_MCMASTER_BOOT_MAGIC    UINT32_C(0x3162636d) /* "mcb1" as little-endian bytes */
#define MC_MCMASTER_BOOT_HDR      8u
#define MC_MCMASTER_BOOT_ADDR_MAX 4096u /* = MC_PROTO_ADDR_MAX */

#endif /* MC_MCMASTER_BOOTSTRAP_H */
