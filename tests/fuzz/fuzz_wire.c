/* libFuzzer target: the RPC frame decoder and the bounded reader (ucx_backend/wire.h), the
 * first code that touches bytes from a UCX peer. A frame that decodes is re-encoded and must
 * come out byte-identical; its payload is walked with every reader call until the reader
 * goes bad, which must be sticky. The input is also read as a listener's address blob
 * (saddr.h): accepted only with its shape, and packed back to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ucx_backend/saddr.h"
#include "ucx_backend/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mc_wire_hdr h;
    struct mc_wire_reader r;
    uint8_t hdr[MC_WIRE_HDR_SIZE];
    size_t len;

    if (mc_wire_hdr_decode(data, size, &h) == 0) {
        if (mc_wire_hdr_encode(&h, hdr, sizeof(hdr)) != 0 ||
            memcmp(hdr, data, sizeof(hdr)) != 0 || h.payload_len != size - MC_WIRE_HDR_SIZE)
            abort();
    }
    /* the whole input as a payload, read by a program taken from its first byte */
    mc_wire_reader_init(&r, data, size);
    for (unsigned int step = 0; !r.bad && step < 4096; step++) {
        size_t left = mc_wire_reader_left(&r);

        switch (step % 6) {
        case 0: (void)mc_wire_get_u8(&r); break;
        case 1: (void)mc_wire_get_u16(&r); break;
        case 2: (void)mc_wire_get_u32(&r); break;
        case 3: (void)mc_wire_get_u64(&r); break;
        case 4: (void)mc_wire_get_blob(&r, 512, &len); break;
        default: (void)mc_wire_get_bytes(&r, size > 0 ? data[0] : 0); break;
        }
        if (!r.bad && mc_wire_reader_left(&r) > left)
            abort();
    }
    if (r.bad && (mc_wire_get_u8(&r) != 0 || !r.bad || mc_wire_reader_done(&r)))
        abort();
    /* the input as a listener's address (saddr.h: peers hand these out): accepted only
     * with the blob's shape, and then packed back to the same bytes */
    {
        struct sockaddr_storage ss;
        socklen_t sslen;
        uint8_t back[MC_SADDR_MAX];

        if (mc_saddr_unpack(data, size, &ss, &sslen) == 0 &&
            (!mc_saddr_is(data, size) ||
             mc_saddr_pack((const struct sockaddr *)&ss, back, sizeof(back)) != size ||
             memcmp(back, data, size) != 0 || mc_saddr_port(data, size) == 0))
            abort();
    }
    return 0;
}
