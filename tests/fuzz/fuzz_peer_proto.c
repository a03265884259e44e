/* libFuzzer target: the agent-to-agent payload decoders (daemon/proto/peer_proto.h), which
 * an owner runs on what any authenticated peer sends. The first byte picks the decoder (2:
 * READ_BATCH, other even: READ, odd: WRITE; a read's optional head and a write's optional tail included); a
 * payload that decodes is re-encoded and must come out byte-identical, and its fields must
 * be within the documented bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/proto/peer_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t out[MC_PROTO_KEY_MAX + MC_PEER_WRITE_TAIL_MAX + 128];
    struct mc_peer_write_hdr w;
    struct mc_peer_read_req r;
    size_t len;

    if (size == 0)
        return 0;
    if (data[0] == 2) {
        static struct mc_peer_read_req items[MC_PROTO_READ_BATCH_MAX];
        static uint8_t bout[8 + MC_PROTO_READ_BATCH_MAX * 48];
        uint32_t n;

        if (mc_peer_read_batch_decode(data + 1, size - 1, MC_PROTO_READ_BATCH_MAX, items, &n) != 0)
            return 0;
        if (n == 0 || n > MC_PROTO_READ_BATCH_MAX)
            abort();
        for (uint32_t i = 0; i < n; i++) {
            if (items[i].len == 0 || items[i].len > MC_PEER_XFER_MAX ||
                items[i].offset > UINT64_MAX - items[i].len ||
                (items[i].head != 0 && (items[i].head >= items[i].len ||
                                        items[i].len - items[i].head > MC_PEER_READ_TAIL_MAX)))
                abort();
        }
        if (mc_peer_read_batch_encode(items, n, bout, sizeof(bout), &len) != 0 ||
            len != size - 1 || memcmp(bout, data + 1, len) != 0)
            abort();
    } else if (data[0] & 1) {
        if (mc_peer_write_hdr_decode(data + 1, size - 1, &w) != 0)
            return 0;
        if (w.len == 0 || w.len > MC_PEER_XFER_MAX || w.key.len == 0 ||
            w.key.len > MC_PROTO_KEY_MAX || w.key.p < data || w.key.p + w.key.len > data + size ||
            w.tail.len > MC_PEER_WRITE_TAIL_MAX ||
            (w.tail.len != 0 && (w.tail.p < data || w.tail.p + w.tail.len > data + size)) ||
            w.offset > UINT64_MAX - w.len - w.tail.len)
            abort();
        if (mc_peer_write_hdr_encode(&w, out, sizeof(out), &len) != 0 || len != size - 1 ||
            memcmp(out, data + 1, len) != 0)
            abort();
    } else {
        if (mc_peer_read_req_decode(data + 1, size - 1, &r) != 0)
            return 0;
        if (r.len == 0 || r.len > MC_PEER_XFER_MAX || r.offset > UINT64_MAX - r.len ||
            (r.head != 0 && (r.head >= r.len || r.len - r.head > MC_PEER_READ_TAIL_MAX)))
            abort();
        if (mc_peer_read_req_encode(&r, out, sizeof(out), &len) != 0 || len != size - 1 ||
            memcmp(out, data + 1, len) != 0)
            abort();
    }
    return 0;
}
