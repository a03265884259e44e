/*
 * The message catalogue as data (rpc.h): one descriptor per row, and lookups by type.
 */
#include "daemon/proto/rpc.h"

#define MC_PROTO_RPC_ROW(NAME, name, type, flags, items, req, rep)                             \
    {#NAME, (type), (flags), (items), (req), (rep)},
const struct mc_proto_rpc mc_proto_rpcs[] = {MC_PROTO_RPCS(MC_PROTO_RPC_ROW)};
#undef MC_PROTO_RPC_ROW
const size_t mc_proto_rpcs_count = sizeof(mc_proto_rpcs) / sizeof(mc_proto_rpcs[0]);

/* every request type 1, 3, .. MC_WIRE__COUNT - 2 has exactly one row */
static_assert(sizeof(mc_proto_rpcs) / sizeof(mc_proto_rpcs[0]) == (MC_WIRE__COUNT - 1) / 2,
              "a row per request type");

const struct mc_proto_rpc *mc_proto_rpc_of(unsigned int type)
{
    unsigned int req = type % 2 == 0 ? type - 1 : type;
    size_t i;

    for (i = 0; i < mc_proto_rpcs_count; i++) {
        if (mc_proto_rpcs[i].type == req)
            return &mc_proto_rpcs[i];
    }
    return NULL;
}

const char *mc_proto_type_name(unsigned int type)
{
    static const char *const names[MC_WIRE__COUNT] = {
#define MC_PROTO_RPC_NAME(NAME, name, type, flags, items, req, rep)                            \
    [MC_WIRE_##NAME] = #NAME, [MC_WIRE_##NAME##_REPLY] = #NAME "_REPLY",
        MC_PROTO_RPCS(MC_PROTO_RPC_NAME)
#undef MC_PROTO_RPC_NAME
    };

    return type < MC_WIRE__COUNT && names[type] != NULL ? names[type] : "?";
}
