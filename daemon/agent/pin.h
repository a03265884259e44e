/*
 * Client pins (MC_OP_PIN / UNPIN, mc_prefix_pin): each is a lease at the master of the pin
 * kind (pin_ttl_ms), which keeps the pinned version from being evicted or freed, recorded
 * here under the client's pin id so that the pin ends with UNPIN, at its TTL, or when the
 * client's connection ends (closed, or its process died): a pin never outlives its client
 * connection by more than the fire-and-forget release to the master.
 *
 * Not the lease of a read (lease.c): a pin names no replica and maps nothing for the client.
 */
#ifndef MC_AGENT_PIN_H
#define MC_AGENT_PIN_H

#include <stdint.h>

#include "shm/ring.h"

struct mc_agent;
struct client;

/* The most pins one client may hold at once; a PIN past it answers MC_ERR_NO_SPACE. */
#define PIN_MAX_PER_CLIENT 65536u

/* c's pin table (client hooks): attach never fails (the table grows on demand); detach
 * frees it; closing releases every pin c holds. */
void pin_detach(struct client *c);
void pin_client_closing(struct mc_agent *a, struct client *c);

/* PIN, UNPIN (s checked by sqe_check). */
/* key: the directory key (the client's, tagged with its tenant), key_len bytes; for UNPIN
 * key_len 0 names every pin of the client. */
void pin_op_pin(struct mc_agent *a, struct client *c, const struct mc_sqe *s, const char *key,
                size_t key_len);
void pin_op_unpin(struct mc_agent *a, struct client *c, const struct mc_sqe *s,
                  const char *key, size_t key_len);
/* The tick: pins past the agent's pin_ttl_ms end (the master ends them at its own). */
void pin_tick(struct mc_agent *a, struct client *c, uint64_t now_ms);
/* Pins c holds now. */
uint32_t pin_count(const struct client *c);

#endif /* MC_AGENT_PIN_H */
