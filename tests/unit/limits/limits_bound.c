/*
 * One home per fact: every copy of a limit or a put flag outside include/mc/mc_limits.h is
 * bound to it here, at compile time, so that a change in one place that misses another
 * fails the build. The copies live in headers of their own components (the master's service
 * API, its wire protocol, the ring ABI, libmc's tool calls), which do not include
 * <mc/mc.h>; they may switch to mc_limits.h, and then their line here goes.
 */
#include <assert.h>
#include <stdlib.h>

#include "daemon/master/master.h"
#include "daemon/proto/master_proto.h"
#include "libmc/tool.h"
#include "mc/mc_limits.h"
#include "shm/ring.h"
#include "shm/sqe_check.h"

/* the key */
static_assert(MC_SHM_KEY_SLOT == MC_KEY_MAX, "ring ABI: key slot");
/* the directory, the master link and the wire carry a client key with its tenant's tag */
static_assert(MC_DIR_KEY_MAX == MC_KEY_MAX + MC_TENANT_TAG_MAX, "directory key");
static_assert(MC_PROTO_KEY_MAX == MC_DIR_KEY_MAX, "master protocol: key");

/* replicas */
static_assert(MC_SHM_MAX_REPLICAS == MC_REPLICAS_MAX, "ring ABI: replicas");
static_assert(MC_MASTER_MAX_REPLICAS == MC_REPLICAS_MAX, "master: replicas");

/* node names */
static_assert(MC_CLIENT_NODE_NAME_MAX == MC_MASTER_NAME_MAX, "libmc: node name");

/* TTL */
static_assert(MC_MASTER_TTL_MAX_MS == MC_TTL_MAX_MS, "master: TTL");

/* put flags: the same bits everywhere */
static_assert(MC_MASTER_PUT_UPSERT == MC_PUT_UPSERT, "master: MC_PUT_UPSERT");
static_assert(MC_MASTER_PUT_PIN_SOFT == MC_PUT_PIN_SOFT, "master: MC_PUT_PIN_SOFT");
static_assert(MC_MASTER_PUT_PIN_HARD == MC_PUT_PIN_HARD, "master: MC_PUT_PIN_HARD");
static_assert(MC_MASTER_PUT_NO_CHECKSUM == MC_PUT_NO_CHECKSUM, "master: MC_PUT_NO_CHECKSUM");
static_assert(MC_MASTER_PUT_SAME_DOMAIN_OK == MC_PUT_SAME_DOMAIN_OK,
              "master: MC_PUT_SAME_DOMAIN_OK");
static_assert(MC_MASTER_PUT_FLAGS_ALL == MC_PUT_FLAGS_ALL, "master: MC_PUT_FLAGS_ALL");

int main(void)
{
    return EXIT_SUCCESS; /* the checks above are the test */
}
