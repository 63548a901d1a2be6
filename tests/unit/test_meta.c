/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_meta.c - the tier.meta record: round trip in both modes,
 * exact little-endian layout, and the decoder refusing every kind of bad
 * input (truncation, bit flips, unknown flags, inconsistent bitmaps).
 */
#undef NDEBUG
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "tier/meta.h"

static void test_roundtrip_object_mode(void **state)
{
	struct tier_meta m = { .version = 0x0102030405060708ull, .flags = TIER_META_F_DIRTY,
			       .object_size = 4u << 20 }, d;
	uint8_t buf[256];
	(void)state;

	int n = tier_meta_encode(&m, buf, sizeof(buf));
	assert_int_equal(n, 40);
	/* layout: magic "TRMT" LE, format, flags, hdr_len, version LE */
	assert_int_equal(buf[0], 0x54);
	assert_int_equal(buf[1], 0x52);
	assert_int_equal(buf[2], 0x4d);
	assert_int_equal(buf[3], 0x54);
	assert_int_equal(buf[4], 1);
	assert_int_equal(buf[5], TIER_META_F_DIRTY);
	assert_int_equal(buf[6], 40);
	assert_int_equal(buf[8], 0x08);
	assert_int_equal(buf[15], 0x01);
	memset(&d, 0, sizeof(d));
	assert_int_equal(tier_meta_decode(buf, (size_t)n, &d, 0), 0);
	assert_int_equal(d.version, m.version);
	assert_int_equal(d.flags, TIER_META_F_DIRTY);
	assert_int_equal(d.object_size, 4u << 20);
	assert_int_equal(d.nbits, 0);
}

static void test_roundtrip_extent_mode(void **state)
{
	uint64_t v[2] = { 0xf0f0ull, 0x1ull }, dt[2] = { 0x00f0ull, 0 };
	uint64_t ov[2], od[2];
	struct tier_meta m = { .version = 7, .flags = TIER_META_F_DIRTY | TIER_META_F_EXTENTS,
			       .object_size = 65 * 4096, .extent_size = 4096, .nbits = 65,
			       .valid = v, .dirty = dt };
	struct tier_meta d = { .valid = ov, .dirty = od };
	uint8_t buf[256];
	(void)state;

	int n = tier_meta_encode(&m, buf, sizeof(buf));
	assert_int_equal(n, (int)tier_meta_size(65));
	assert_int_equal(n, 40 + 32);
	assert_int_equal(tier_meta_decode(buf, (size_t)n, &d, 2), 0);
	assert_memory_equal(ov, v, sizeof(v));
	assert_memory_equal(od, dt, sizeof(dt));
	/* too small an output */
	assert_int_equal(tier_meta_decode(buf, (size_t)n, &d, 1), -E2BIG);
	assert_int_equal(tier_meta_encode(&m, buf, 50), -ENOSPC);
}

static void test_encoder_rejects_inconsistent(void **state)
{
	uint64_t v[1] = { 0x1 }, dt[1] = { 0x3 };
	struct tier_meta m = { .version = 1, .flags = TIER_META_F_DIRTY | TIER_META_F_EXTENTS,
			       .object_size = 8 * 512, .extent_size = 512, .nbits = 8,
			       .valid = v, .dirty = dt };
	uint8_t buf[128];
	(void)state;

	assert_int_equal(tier_meta_encode(&m, buf, sizeof(buf)), -EINVAL); /* dirty outside valid */
	dt[0] = 1;
	m.flags = TIER_META_F_EXTENTS;
	assert_int_equal(tier_meta_encode(&m, buf, sizeof(buf)), -EINVAL); /* dirty bits, no flag */
	m.flags = TIER_META_F_EXTENTS | TIER_META_F_DIRTY;
	v[0] = 0x101;
	assert_int_equal(tier_meta_encode(&m, buf, sizeof(buf)), -EINVAL); /* bit past nbits */
	v[0] = 1;
	m.nbits = 9;
	assert_int_equal(tier_meta_encode(&m, buf, sizeof(buf)), -EINVAL); /* nbits vs sizes */
	m.nbits = 8;
	m.flags |= 0x80;
	assert_int_equal(tier_meta_encode(&m, buf, sizeof(buf)), -EINVAL); /* unknown flag */
}

static void test_decoder_rejects_garbage(void **state)
{
	uint64_t v[1] = { 0xff }, dt[1] = { 0x0f }, ov[1], od[1];
	struct tier_meta m = { .version = 3, .flags = TIER_META_F_DIRTY | TIER_META_F_EXTENTS,
			       .object_size = 8 * 512, .extent_size = 512, .nbits = 8,
			       .valid = v, .dirty = dt };
	struct tier_meta d = { .valid = ov, .dirty = od };
	uint8_t buf[128], bad[128];
	(void)state;

	int n = tier_meta_encode(&m, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(tier_meta_decode(buf, (size_t)n, &d, 1), 0);
	/* every truncation */
	for (int l = 0; l < n; l++)
		assert_int_equal(tier_meta_decode(buf, (size_t)l, &d, 1), -EINVAL);
	/* trailing bytes */
	assert_int_equal(tier_meta_decode(buf, (size_t)n + 1, &d, 1), -EINVAL);
	/* every single-bit flip is caught (crc or structure) */
	for (int i = 0; i < n * 8; i++) {
		memcpy(bad, buf, (size_t)n);
		bad[i / 8] ^= (uint8_t)(1u << (i % 8));
		assert_int_not_equal(tier_meta_decode(bad, (size_t)n, &d, 1), 0);
	}
	assert_int_equal(tier_meta_decode(NULL, 40, &d, 1), -EINVAL);
}

/* CRC-32C: the known check value, and the CPU path agrees with the tables at every length and alignment */
static void test_crc32c_paths_agree(void **state)
{
	static uint8_t buf[1100];
	(void)state;

	assert_int_equal(tier_crc32c(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(tier__crc32c_sw(0, "123456789", 9), 0xe3069283u);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	for (size_t a = 0; a < 9; a++)
		for (size_t n = 0; n + a <= sizeof(buf); n += 37)
			assert_int_equal(tier_crc32c(5, buf + a, n), tier__crc32c_sw(5, buf + a, n));
	/* chaining: two halves give the whole */
	assert_int_equal(tier_crc32c(tier_crc32c(0, buf, 500), buf + 500, 600),
			 tier_crc32c(0, buf, 1100));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_object_mode),
		cmocka_unit_test(test_roundtrip_extent_mode),
		cmocka_unit_test(test_encoder_rejects_inconsistent),
		cmocka_unit_test(test_decoder_rejects_garbage),
		cmocka_unit_test(test_crc32c_paths_agree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
