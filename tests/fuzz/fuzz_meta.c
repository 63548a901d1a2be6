/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_meta.c - fuzz target for the tier.meta decoder
 * (tier_meta_decode), which reads xattrs from the cache pool at start-up.
 * Besides "no crash, no overread", it checks that whatever the decoder
 * accepts is self-consistent and encodes back to exactly the same bytes, and
 * that a too-small word buffer is refused with -E2BIG rather than overrun.
 * It must never accept a record the encoder would refuse.  Each input is
 * decoded twice: as given, and with its CRC field recomputed, so that the
 * checks behind the checksum get fuzzed too.
 */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tier/meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SMALL_WORDS 4

static void check_one(const uint8_t *data, size_t size)
{
	uint64_t sv[SMALL_WORDS], sd[SMALL_WORDS];
	struct tier_meta m = {.valid = sv, .dirty = sd};
	uint64_t *v = NULL, *d = NULL;
	uint8_t *out = NULL;
	size_t words;
	int rc, n;

	rc = tier_meta_decode(data, size, &m, SMALL_WORDS);
	if (rc == -E2BIG) {
		/* the header told nbits; a buffer that big must decode it */
		words = tier_meta_words(m.nbits);
		if (words <= SMALL_WORDS)
			abort();
		v = calloc(words, 8);
		d = calloc(words, 8);
		if (!v || !d)
			goto out;
		m.valid = v;
		m.dirty = d;
		rc = tier_meta_decode(data, size, &m, words);
		if (rc == -E2BIG)
			abort();
	}
	if (rc < 0) {
		if (rc != -EINVAL && rc != -E2BIG)
			abort();
		goto out;
	}
	if (size != tier_meta_size(m.nbits) || (m.flags & ~TIER_META_F_ALL))
		abort();
	out = malloc(size);
	if (!out)
		goto out;
	n = tier_meta_encode(&m, out, size);
	if (n < 0 || (size_t)n != size || memcmp(out, data, size) != 0)
		abort();   /* accepted but does not round-trip */
	if (tier_meta_encode(&m, out, size - 1) != -ENOSPC)
		abort();
out:
	free(out);
	free(v);
	free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const size_t crc_at = offsetof(struct tier_meta_hdr, crc);
	uint8_t *fixed;
	uint32_t crc;

	check_one(data, size);
	if (size < sizeof(struct tier_meta_hdr))
		return 0;
	fixed = malloc(size);
	if (!fixed)
		return 0;
	memcpy(fixed, data, size);
	memset(fixed + crc_at, 0, 4);
	crc = htole32(tier_crc32c(0, fixed, size));
	memcpy(fixed + crc_at, &crc, 4);
	check_one(fixed, size);
	free(fixed);
	return 0;
}
