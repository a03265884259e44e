/* libFuzzer target: every master RPC payload decoder (daemon/proto/master_proto.h), the code
 * that reads what agents and the master send each other. The first input byte selects the
 * message: t_type_at(b % T_NTYPES) (HELLO .. CLUSTER_INFO_REPLY, LIST .. COPY_REPLY), and
 * b / T_NTYPES the item capacity the decoder is given (0: MC_PROTO_BATCH_MAX, else a small
 * one, to exercise the cap check).
 * The rest is the payload, decoded from an allocation of exactly its size. A payload that
 * decodes must re-encode to the same bytes (the decoder checked everything the encoder
 * checks, and every field was carried), and its keys must point into the payload.
 * Seeds: tests/fuzz/corpus/master_proto, written by `test_master_proto --write-corpus`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/proto/t_master_msg.h"

static struct t_msg t_m;
static uint8_t t_out[MC_PROTO_PAYLOAD_MAX];

static void t_check_keys(unsigned int type, const uint8_t *p, size_t len)
{
    const struct mc_proto_key *keys = t_m.keys;
    uint32_t n;

    if (type == MC_WIRE_LIST_REPLY) {
        n = t_m.list_rep.n;
    } else if (type == MC_WIRE_GET_BATCH || type == MC_WIRE_EXIST_BATCH ||
               type == MC_WIRE_REMOVE_BATCH) {
        n = t_m.keys_req.n;
    } else {
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *k = (const uint8_t *)keys[i].key;

        if (keys[i].key_len == 0 || keys[i].key_len > MC_PROTO_KEY_MAX || k < p ||
            k + keys[i].key_len > p + len)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned int type, sel;
    size_t cap, out_len;
    uint8_t *payload = NULL;
    size_t len;

    if (size == 0)
        return 0;
    type = t_type_at(data[0] % T_NTYPES);
    sel = data[0] / T_NTYPES;
    cap = sel == 0 ? MC_PROTO_BATCH_MAX : sel % 5;
    len = size - 1;
    if (len > 0) {
        payload = malloc(len);
        if (payload == NULL)
            return 0;
        memcpy(payload, data + 1, len);
    }
    if (t_decode(type, payload, len, cap, &t_m) == 0) {
        t_check_keys(type, payload, len);
        if (t_encode(type, &t_m, t_out, sizeof(t_out), &out_len) != 0 || out_len != len ||
            (len > 0 && memcmp(t_out, payload, len) != 0))
            abort();
    }
    free(payload);
    return 0;
}
