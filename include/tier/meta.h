/* SPDX-License-Identifier: MIT */
/*
 * tier/meta.h - the "tier.meta" record every cache object carries.
 *
 * Wire format (little-endian, packed, format 1):
 *
 *   offset size field
 *        0    4 magic        "TRMT" (0x544d5254)
 *        4    1 format       1
 *        5    1 flags        bit0 dirty, bit1 extent bitmaps present,
 *                            bit2 incomplete (promotion in progress)
 *        6    2 hdr_len      40
 *        8    8 version      object version (bumped on every cache write)
 *       16    4 object_size  bytes
 *       20    4 extent_size  bytes (0 in object mode)
 *       24    4 nbits        extents per object (0 in object mode)
 *       28    4 crc          CRC-32C of the whole record with this field 0
 *       32    8 reserved     0
 *       40      valid bitmap, ceil(nbits/64) LE 64-bit words (bit i = extent i)
 *               dirty bitmap, same size
 *
 * The decoder rejects anything else: bad magic/format/lengths/crc, unknown
 * flags, bits set beyond nbits, dirty bits outside valid ones, dirty bits
 * without the dirty flag.
 */
#ifndef TIER_META_H
#define TIER_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIER_META_MAGIC  0x544d5254u
#define TIER_META_FORMAT 1
#define TIER_META_XATTR  "tier.meta"

enum {
	TIER_META_F_DIRTY      = 1u << 0,
	TIER_META_F_EXTENTS    = 1u << 1,
	TIER_META_F_INCOMPLETE = 1u << 2,
	TIER_META_F_ALL        = 0x7u,
};

struct tier_meta_hdr {
	uint32_t magic;
	uint8_t format;
	uint8_t flags;
	uint16_t hdr_len;
	uint64_t version;
	uint32_t object_size;
	uint32_t extent_size;
	uint32_t nbits;
	uint32_t crc;
	uint64_t reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct tier_meta_hdr) == 40, "tier.meta header is 40 bytes");

/* Decoded form.  valid/dirty point at caller-owned word arrays (NULL when nbits == 0). */
struct tier_meta {
	uint64_t version;
	uint32_t flags;         /* TIER_META_F_* */
	uint32_t object_size;
	uint32_t extent_size;
	uint32_t nbits;
	uint64_t *valid;
	uint64_t *dirty;
};

static inline size_t tier_meta_words(uint32_t nbits) { return ((size_t)nbits + 63) / 64; }
/* Encoded size of a record with nbits extents. */
static inline size_t tier_meta_size(uint32_t nbits)
{
	return sizeof(struct tier_meta_hdr) + 2 * 8 * tier_meta_words(nbits);
}

/*
 * Encode m into buf (cap bytes).  Returns the encoded length, -EINVAL
 * (inconsistent m: flags, nbits without bitmaps, dirty outside valid),
 * -ENOSPC (cap too small).
 */
int tier_meta_encode(const struct tier_meta *m, void *buf, size_t cap);
/*
 * Decode len bytes.  m->valid / m->dirty must point at max_words words each
 * (may be NULL if max_words == 0).  Returns 0 or -EINVAL (any malformed or
 * inconsistent input), -E2BIG (more bits than max_words hold).
 */
int tier_meta_decode(const void *buf, size_t len, struct tier_meta *m, size_t max_words);
/* CRC-32C (Castagnoli), as used by the record. */
uint32_t tier_crc32c(uint32_t crc, const void *buf, size_t len);
/* The same CRC without the CPU instruction (tests compare the two). */
uint32_t tier__crc32c_sw(uint32_t crc, const void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
