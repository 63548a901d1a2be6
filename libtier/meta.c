/* SPDX-License-Identifier: MIT */
/*
 * libtier/meta.c - encoder and decoder of the tier.meta record (layout in
 * include/tier/meta.h).  It decides nothing about objects; it only turns a
 * struct tier_meta into little-endian bytes and back, and must never accept
 * a record that is malformed or self-inconsistent: a bad record read at
 * start-up makes the engine discard the object, so the decoder is the last
 * line of defence against trusting garbage as cached data.
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "tier/meta.h"

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[0][i] = c;
	}
	for (int t = 1; t < 8; t++)
		for (uint32_t i = 0; i < 256; i++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
					  crc_table[0][crc_table[t - 1][i] & 0xff];
}

/* Slicing-by-8: eight table lookups per 8 bytes. */
static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		len--;
	}
	for (; len >= 8; p += 8, len -= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		v = le64toh(v) ^ crc;
		crc = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^
		      crc_table[5][(v >> 16) & 0xff] ^ crc_table[4][(v >> 24) & 0xff] ^
		      crc_table[3][(v >> 32) & 0xff] ^ crc_table[2][(v >> 40) & 0xff] ^
		      crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
	}
	while (len--)
		crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* SSE4.2's crc32 instruction computes exactly CRC-32C. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p,
							  size_t len)
{
	uint64_t c = crc;

	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	for (; len >= 8; p += 8, len -= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

uint32_t tier_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

#if defined(__x86_64__) && defined(__GNUC__)
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc_hw(~crc, p, len);
#endif
	pthread_once(&crc_once, crc_init);
	return ~crc_sw(~crc, p, len);
}

/* The portable path, for the unit test that checks both agree. */
uint32_t tier__crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return ~crc_sw(~crc, buf, len);
}

static bool bits_ok(const struct tier_meta *m)
{
	size_t w = tier_meta_words(m->nbits);

	for (size_t i = 0; i < w; i++) {
		uint64_t extra = 0;
		if (i == w - 1 && (m->nbits % 64))
			extra = ~((1ull << (m->nbits % 64)) - 1);
		if ((m->valid[i] & extra) || (m->dirty[i] & extra))
			return false;
		if (m->dirty[i] & ~m->valid[i])
			return false;
		if (m->dirty[i] && !(m->flags & TIER_META_F_DIRTY))
			return false;
	}
	return true;
}

static bool meta_consistent(const struct tier_meta *m)
{
	if (m->flags & ~TIER_META_F_ALL)
		return false;
	if (!m->object_size)
		return false;
	if (m->flags & TIER_META_F_EXTENTS) {
		if (!m->nbits || !m->extent_size || !m->valid || !m->dirty)
			return false;
		if (((uint64_t)m->object_size + m->extent_size - 1) / m->extent_size != m->nbits)
			return false;
		return bits_ok(m);
	}
	return m->nbits == 0 && m->extent_size == 0;
}

int tier_meta_encode(const struct tier_meta *m, void *buf, size_t cap)
{
	struct tier_meta_hdr h;
	size_t w = tier_meta_words(m->nbits), len = tier_meta_size(m->nbits);
	uint8_t *p = buf;

	if (!meta_consistent(m))
		return -EINVAL;
	if (cap < len)
		return -ENOSPC;
	memset(&h, 0, sizeof(h));
	h.magic = htole32(TIER_META_MAGIC);
	h.format = TIER_META_FORMAT;
	h.flags = (uint8_t)m->flags;
	h.hdr_len = htole16(sizeof(h));
	h.version = htole64(m->version);
	h.object_size = htole32(m->object_size);
	h.extent_size = htole32(m->extent_size);
	h.nbits = htole32(m->nbits);
	memcpy(p, &h, sizeof(h));
	for (size_t i = 0; i < w; i++) {
		uint64_t v = htole64(m->valid[i]), d = htole64(m->dirty[i]);
		memcpy(p + sizeof(h) + 8 * i, &v, 8);
		memcpy(p + sizeof(h) + 8 * (w + i), &d, 8);
	}
	h.crc = htole32(tier_crc32c(0, p, len));
	memcpy(p + offsetof(struct tier_meta_hdr, crc), &h.crc, 4);
	return (int)len;
}

int tier_meta_decode(const void *buf, size_t len, struct tier_meta *m, size_t max_words)
{
	struct tier_meta_hdr h;
	const uint8_t *p = buf;
	uint32_t crc, zero = 0, c;
	size_t w;

	if (!buf || len < sizeof(h))
		return -EINVAL;
	memcpy(&h, p, sizeof(h));
	if (le32toh(h.magic) != TIER_META_MAGIC || h.format != TIER_META_FORMAT ||
	    le16toh(h.hdr_len) != sizeof(h) || h.reserved != 0)
		return -EINVAL;
	m->version = le64toh(h.version);
	m->flags = h.flags;
	m->object_size = le32toh(h.object_size);
	m->extent_size = le32toh(h.extent_size);
	m->nbits = le32toh(h.nbits);
	if (m->nbits > (1u << 24))
		return -EINVAL;
	w = tier_meta_words(m->nbits);
	if (len != tier_meta_size(m->nbits))
		return -EINVAL;
	crc = le32toh(h.crc);
	c = tier_crc32c(0, p, offsetof(struct tier_meta_hdr, crc));
	c = tier_crc32c(c, &zero, 4);
	c = tier_crc32c(c, p + offsetof(struct tier_meta_hdr, reserved), len - offsetof(struct tier_meta_hdr, reserved));
	if (c != crc)
		return -EINVAL;
	if (w > max_words)
		return -E2BIG;
	for (size_t i = 0; i < w; i++) {
		uint64_t v, d;
		memcpy(&v, p + sizeof(h) + 8 * i, 8);
		memcpy(&d, p + sizeof(h) + 8 * (w + i), 8);
		m->valid[i] = le64toh(v);
		m->dirty[i] = le64toh(d);
	}
	if (!meta_consistent(m))
		return -EINVAL;
	return 0;
}
