/*
 * The RPC frame codec of the transfer layer (docs/protocol.md): a versioned, length-checked
 * binary header in front of every control message between agents and the master, and a
 * bounded reader/writer for the fixed-width little-endian fields and length-prefixed byte
 * strings that payloads are made of. No UCX here: the codec is pure, so it is fuzzed
 * (tests/fuzz/fuzz_wire.c) and unit-tested without a network.
 *
 * This module checks frames; it does not know what a payload means. The per-message payload
 * codecs (MOUNT, PUT_START_BATCH, ...) live with their users and are built on the reader and
 * writer below.
 *
 * The header on the wire is 24 bytes, all fields little-endian, in this order:
 *
 *     0  uint32 magic        MC_WIRE_MAGIC
 *     4  uint16 version      MC_WIRE_VERSION
 *     6  uint16 type         1 .. MC_WIRE_TYPE_END - 1 (daemon/proto/rpc.h names them)
 *     8  uint64 request_id   chosen by the caller; a reply echoes its request's id
 *    16  uint32 payload_len  bytes that follow the header, <= MC_WIRE_PAYLOAD_MAX
 *    20  uint32 flags        MC_WIRE_F_*; unknown bits are refused
 *
 * Everything read from a peer is hostile input: mc_wire_hdr_decode checks every field
 * before any of it is used, and the reader fails (stickily) rather than read past its end.
 *
 * Thread-safety: every function is pure or touches only the caller's structs.
 */
#ifndef MC_UCX_WIRE_H
#define MC_UCX_WIRE_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MC_WIRE_MAGIC UINT32_C(0x3177636d) /* "mcw1" as little-endian bytes */
#define MC_WIRE_VERSION 1u
#define MC_WIRE_HDR_SIZE 24u
#define MC_WIRE_PAYLOAD_MAX (4u << 20) /* one RPC frame; bulk data travels beside it */

/* flags */
#define MC_WIRE_F_REPLY 0x1u /* a reply: the type is a reply type, the id names a request */
#define MC_WIRE_F_BULK 0x2u  /* a bulk transfer's header: bytes follow out of band */
#define MC_WIRE_F_KNOWN (MC_WIRE_F_REPLY | MC_WIRE_F_BULK)

/*
 * Frame types are 1 .. MC_WIRE_TYPE_END - 1; a request is odd and its reply the next, even,
 * number. Which type means what is not this module's: the catalogue is daemon/proto/rpc.h
 * (enum mc_wire_type, MC_WIRE_HELLO ...), which asserts that it fills exactly this range.
 * The frame check needs the bound only, to refuse a type no one would answer.
 */
#define MC_WIRE_TYPE_END 45u

/* The decoded header, in host byte order. Not the wire layout: see the table above. */
struct mc_wire_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint64_t request_id;
    uint32_t payload_len;
    uint32_t flags;
};

static_assert(sizeof(struct mc_wire_hdr) == MC_WIRE_HDR_SIZE, "wire header size");
static_assert(offsetof(struct mc_wire_hdr, version) == 4, "wire header layout");
static_assert(offsetof(struct mc_wire_hdr, type) == 6, "wire header layout");
static_assert(offsetof(struct mc_wire_hdr, request_id) == 8, "wire header layout");
static_assert(offsetof(struct mc_wire_hdr, payload_len) == 16, "wire header layout");
static_assert(offsetof(struct mc_wire_hdr, flags) == 20, "wire header layout");
static_assert(MC_WIRE_PAYLOAD_MAX <= UINT32_MAX - MC_WIRE_HDR_SIZE, "frame length fits u32");

/* A type in the catalogue's range (request or reply). */
bool mc_wire_type_is_valid(unsigned int type);

/* A reply type (valid and even). */
bool mc_wire_type_is_reply(unsigned int type);

/*
 * Writes the header `h` (magic and version are taken from h: set them with
 * mc_wire_hdr_init) as the first MC_WIRE_HDR_SIZE bytes of `buf`, which has `cap` bytes.
 *
 * Returns 0, or MC_ERR_INVALID (nothing written) when cap < MC_WIRE_HDR_SIZE or a field
 * would not pass mc_wire_hdr_decode: an encoder never produces a frame the decoder refuses.
 */
int mc_wire_hdr_encode(const struct mc_wire_hdr *h, void *buf, size_t cap);

/* Fills `h` for a new frame: MC_WIRE_MAGIC, MC_WIRE_VERSION, the given fields. */
void mc_wire_hdr_init(struct mc_wire_hdr *h, uint16_t type, uint64_t request_id,
                      uint32_t payload_len, uint32_t flags);

/*
 * Decodes and checks the frame in `buf`: `len` is the number of bytes actually received
 * (header and payload). Checks, in order: len >= MC_WIRE_HDR_SIZE, magic, version, the type
 * is known, no unknown flag, MC_WIRE_F_REPLY set exactly on reply types, payload_len <=
 * MC_WIRE_PAYLOAD_MAX, and payload_len == len - MC_WIRE_HDR_SIZE. The payload is then at
 * buf + MC_WIRE_HDR_SIZE.
 *
 * Returns 0 and fills *hdr_p, or MC_ERR_PROTO (*hdr_p untouched).
 */
int mc_wire_hdr_decode(const void *buf, size_t len, struct mc_wire_hdr *hdr_p);

/* --- bounded reader ----------------------------------------------------------------------
 *
 * A cursor over [p, end). Any read that does not fit sets `bad`, returns 0 / NULL, and
 * every later read fails too (sticky), so a decoder reads all its fields and checks once:
 *
 *     mc_wire_reader_init(&r, payload, len);
 *     n = mc_wire_get_u32(&r);
 *     key = mc_wire_get_blob(&r, MC_KEY_MAX, &key_len);
 *     if (!mc_wire_reader_done(&r))
 *         return MC_ERR_PROTO;
 *
 * Returned pointers point into the reader's buffer and live as long as it does.
 */
struct mc_wire_reader {
    const uint8_t *p, *end;
    bool bad;
};

void mc_wire_reader_init(struct mc_wire_reader *r, const void *buf, size_t len);
uint8_t mc_wire_get_u8(struct mc_wire_reader *r);
uint16_t mc_wire_get_u16(struct mc_wire_reader *r);
uint32_t mc_wire_get_u32(struct mc_wire_reader *r);
uint64_t mc_wire_get_u64(struct mc_wire_reader *r);
/* `len` raw bytes: a pointer into the buffer, or NULL (bad). Check `bad`, not NULL, when
 * len may be 0: 0 bytes of an empty buffer is NULL and fine. */
const uint8_t *mc_wire_get_bytes(struct mc_wire_reader *r, size_t len);
/* A byte string with a uint32 length prefix, at most `max` bytes: a pointer into the
 * buffer and *len_p, or NULL (bad; *len_p set to 0). */
const uint8_t *mc_wire_get_blob(struct mc_wire_reader *r, size_t max, size_t *len_p);
/* Bytes not read yet (0 once bad). */
size_t mc_wire_reader_left(const struct mc_wire_reader *r);
/* No read failed and every byte was consumed: the payload had exactly the expected shape. */
bool mc_wire_reader_done(const struct mc_wire_reader *r);

/* --- bounded writer ----------------------------------------------------------------------
 *
 * The same discipline for building a payload in a caller's buffer: a write that does not
 * fit sets `bad` and writes nothing, and every later write fails. The length written is
 * w.p - buf, meaningful only while !w.bad.
 */
struct mc_wire_writer {
    uint8_t *p, *end;
    bool bad;
};

void mc_wire_writer_init(struct mc_wire_writer *w, void *buf, size_t cap);
void mc_wire_put_u8(struct mc_wire_writer *w, uint8_t v);
void mc_wire_put_u16(struct mc_wire_writer *w, uint16_t v);
void mc_wire_put_u32(struct mc_wire_writer *w, uint32_t v);
void mc_wire_put_u64(struct mc_wire_writer *w, uint64_t v);
void mc_wire_put_bytes(struct mc_wire_writer *w, const void *src, size_t len);
/* A uint32 length prefix and the bytes; len > UINT32_MAX sets bad. */
void mc_wire_put_blob(struct mc_wire_writer *w, const void *src, size_t len);

#endif /* MC_UCX_WIRE_H */
