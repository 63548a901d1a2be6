/* SPDX-License-Identifier: MIT */
/*
 * test_hitset.c - HitSets: Ceph's recency rule (0, 1, N consecutive sets),
 * the bloom filters' real false-positive rate against the target, sizing of
 * a new period from the previous one, Ceph's temperature grades, trimming
 * to hit_set_count, and the archived-set blob (round trip, and rejection of
 * truncated, corrupt and malformed blobs).
 */
#undef NDEBUG
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zstd.h>

#include "tier/engine.h"
#include "libtier/hitset.h"

#define PERIOD 1000u

/* Keys the tests use, spread like real object keys. */
static uint64_t key_of(uint64_t i)
{
	return i * 0x9e3779b97f4a7c15ull + 12345;
}

static struct tier__hitsets *mk(unsigned count, double fpp, uint64_t cap)
{
	struct tier__hitsets *hs = NULL;

	assert_int_equal(tier__hitsets_create(count, fpp, cap, 0, &hs), 0);
	assert_non_null(hs);
	return hs;
}

/* Close the current period (period i starts at i*PERIOD). */
static void rotate(struct tier__hitsets *hs, uint64_t *now)
{
	*now += PERIOD;
	assert_int_equal(tier__hitsets_maybe_rotate(hs, *now, PERIOD), 1);
}

/* The set-th hitset as handed out (0 = current, then the archived ones, newest first). */
static struct tier_hitset_info info_of(const struct tier__hitsets *hs, int set)
{
	struct tier_hitset_info v[TIER_HITSET_MAX_SETS];
	int n = tier__hitsets_info(hs, v, TIER_HITSET_MAX_SETS);

	assert_in_range(n, 1, TIER_HITSET_MAX_SETS);
	assert_true(set < n);
	assert_int_equal(v[set].set, set - 1);
	if (set == 0)
		assert_int_equal(v[set].end_ms, 0);   /* the current set is open */
	return v[set];
}

static void test_create_rejects_bad_arguments(void **state)
{
	struct tier__hitsets *hs = (void *)1;

	(void)state;
	assert_int_equal(tier__hitsets_create(65, 0.05, 1000, 0, &hs), -EINVAL);
	assert_null(hs);
	assert_int_equal(tier__hitsets_create(4, 0.0, 1000, 0, &hs), -EINVAL);
	assert_int_equal(tier__hitsets_create(4, 1.0, 1000, 0, &hs), -EINVAL);
	tier__hitsets_destroy(NULL);
}

static void test_recency_zero_is_always_and_one_is_current_set(void **state)
{
	struct tier__hitsets *hs = mk(4, 0.01, 1024);
	uint64_t now = 0;

	(void)state;
	assert_true(tier__hitsets_recent(hs, key_of(1), 0));
	assert_false(tier__hitsets_recent(hs, key_of(1), 1));
	tier__hitsets_insert(hs, key_of(1));
	assert_true(tier__hitsets_recent(hs, key_of(1), 1));
	assert_false(tier__hitsets_recent(hs, key_of(2), 1));
	assert_true(tier__hitsets_recent(hs, key_of(2), 0));
	/* once the period closes, a key only in the archive is not recency-1 */
	rotate(hs, &now);
	assert_false(tier__hitsets_recent(hs, key_of(1), 1));
	assert_false(tier__hitsets_recent(hs, key_of(1), 2));
	assert_true(tier__hitsets_recent(hs, key_of(1), 0));
	tier__hitsets_destroy(hs);
}

static void test_recency_n_needs_current_and_n_minus_1_newest(void **state)
{
	struct tier__hitsets *hs = mk(4, 0.01, 1024);
	uint64_t now = 0, k = key_of(7);

	(void)state;
	/* k seen in three consecutive periods, the last being the current one */
	for (int i = 0; i < 3; i++) {
		tier__hitsets_insert(hs, k);
		if (i < 2)
			rotate(hs, &now);
	}
	assert_int_equal(tier__hitsets_archived(hs), 2);
	assert_true(tier__hitsets_recent(hs, k, 1));
	assert_true(tier__hitsets_recent(hs, k, 2));
	assert_true(tier__hitsets_recent(hs, k, 3));
	assert_false(tier__hitsets_recent(hs, k, 4));   /* only 2 archived exist */
	/* an empty new period: k is in no current set, so nothing above 0 holds */
	rotate(hs, &now);
	for (unsigned n = 1; n <= 4; n++)
		assert_false(tier__hitsets_recent(hs, k, n));
	tier__hitsets_destroy(hs);
}

static void test_recency_requires_consecutive_sets(void **state)
{
	struct tier__hitsets *hs = mk(4, 0.01, 1024);
	uint64_t now = 0, a = key_of(1), b = key_of(2);

	(void)state;
	/* archived #2: a, b   archived #1: b   archived #0: a   current: a, b */
	tier__hitsets_insert(hs, a);
	tier__hitsets_insert(hs, b);
	rotate(hs, &now);
	tier__hitsets_insert(hs, b);
	rotate(hs, &now);
	tier__hitsets_insert(hs, a);
	rotate(hs, &now);
	tier__hitsets_insert(hs, a);
	tier__hitsets_insert(hs, b);
	/* b: in current and #1 but not #0 -> the run breaks at #0 */
	assert_true(tier__hitsets_recent(hs, b, 1));
	assert_false(tier__hitsets_recent(hs, b, 2));
	assert_false(tier__hitsets_recent(hs, b, 3));
	/* a: current, #0, then a gap at #1 -> 2 holds, 3 and 4 do not */
	assert_true(tier__hitsets_recent(hs, a, 2));
	assert_false(tier__hitsets_recent(hs, a, 3));
	assert_false(tier__hitsets_recent(hs, a, 4));
	tier__hitsets_destroy(hs);
}

static double measure_fpp(double fpp, uint64_t cap)
{
	struct tier__hitsets *hs = mk(1, fpp, cap);
	const uint64_t probes = 400000;
	uint64_t fp = 0;

	for (uint64_t i = 0; i < cap; i++)
		tier__hitsets_insert(hs, key_of(i));
	for (uint64_t i = 0; i < cap; i++)
		assert_true(tier__hitsets_recent(hs, key_of(i), 1));   /* no false negatives */
	for (uint64_t i = 0; i < probes; i++)
		fp += tier__hitsets_recent(hs, key_of(cap + 1000 + i), 1);
	tier__hitsets_destroy(hs);
	return (double)fp / (double)probes;
}

static void test_false_positive_rate_near_target_at_capacity(void **state)
{
	const double targets[] = { 0.05, 0.01, 0.001 };

	(void)state;
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		double got = measure_fpp(targets[i], 20000);

		print_message("fpp target %g: measured %.5f at capacity 20000\n", targets[i], got);
		assert_true(got <= 2 * targets[i]);
		assert_true(got >= targets[i] / 2);
	}
}

/* Bits of a filter sized for cap keys at fpp (the module's formula). */
static uint64_t bits_for(uint64_t cap, double fpp)
{
	return ((uint64_t)ceil(-(double)cap * log(fpp) / (M_LN2 * M_LN2)) + 63) & ~63ull;
}

static void test_new_period_sized_from_previous_unique_inserts(void **state)
{
	struct tier__hitsets *hs = mk(4, 0.05, 0);
	uint64_t now = 0, cap;

	(void)state;
	/* first period: the floor applies to a zero first_capacity */
	assert_int_equal(info_of(hs, 0).capacity, 1024);
	assert_int_equal(info_of(hs, 0).bits, bits_for(1024, 0.05));
	/* 5000 objects, three hits each, in a filter sized for 1024 */
	for (int rep = 0; rep < 3; rep++)
		for (uint64_t i = 0; i < 5000; i++)
			tier__hitsets_insert(hs, key_of(i));
	assert_int_equal(info_of(hs, 0).inserts, 15000);
	assert_in_range(info_of(hs, 0).unique, 4750, 5250);
	rotate(hs, &now);
	cap = info_of(hs, 0).capacity;
	assert_int_equal(cap, info_of(hs, 1).unique);
	assert_int_equal(info_of(hs, 0).bits, bits_for(cap, 0.05));
	/* a late rotation (two periods) scales the count to one period */
	for (uint64_t i = 0; i < 8000; i++)
		tier__hitsets_insert(hs, key_of(100000 + i));
	now += 2 * PERIOD;
	assert_int_equal(tier__hitsets_maybe_rotate(hs, now, PERIOD), 1);
	assert_in_range(info_of(hs, 0).capacity, 3850, 4150);
	/* a quiet period falls back to the floor */
	for (uint64_t i = 0; i < 10; i++)
		tier__hitsets_insert(hs, key_of(i));
	rotate(hs, &now);
	assert_int_equal(info_of(hs, 0).capacity, 1024);
	tier__hitsets_destroy(hs);
}

static void test_rotate_only_after_a_period(void **state)
{
	struct tier__hitsets *hs = NULL;

	(void)state;
	assert_int_equal(tier__hitsets_create(2, 0.05, 1024, 5000, &hs), 0);
	assert_int_equal(tier__hitsets_maybe_rotate(hs, 5000 + PERIOD - 1, PERIOD), 0);
	assert_int_equal(tier__hitsets_maybe_rotate(hs, 100, PERIOD), 0);   /* clock went back */
	assert_int_equal(tier__hitsets_archived(hs), 0);
	assert_int_equal(tier__hitsets_maybe_rotate(hs, 5000 + PERIOD, PERIOD), 1);
	assert_int_equal(tier__hitsets_archived(hs), 1);
	assert_int_equal(info_of(hs, 1).start_ms, 5000);
	assert_int_equal(info_of(hs, 1).end_ms, 5000 + PERIOD);
	assert_int_equal(info_of(hs, 0).start_ms, 5000 + PERIOD);
	tier__hitsets_destroy(hs);
}

static void test_temperature_follows_ceph_grades(void **state)
{
	struct tier__hitsets *hs = mk(8, 0.001, 1024);
	uint64_t now = 0, k = key_of(3), only1 = key_of(4), deep = key_of(5);

	(void)state;
	/* oldest first: #6 deep, #5..#3 empty, #2 k, #1 only1, #0 k, current k */
	tier__hitsets_insert(hs, deep);
	rotate(hs, &now);
	for (int i = 0; i < 3; i++)
		rotate(hs, &now);
	tier__hitsets_insert(hs, k);
	rotate(hs, &now);
	tier__hitsets_insert(hs, only1);
	rotate(hs, &now);
	tier__hitsets_insert(hs, k);
	rotate(hs, &now);
	tier__hitsets_insert(hs, k);
	assert_int_equal(tier__hitsets_archived(hs), 7);

	assert_int_equal(tier__hitsets_temperature(hs, k, 20, 0), 1000000);
	assert_int_equal(tier__hitsets_temperature(hs, k, 20, 1), 1000000 + 800000);
	assert_int_equal(tier__hitsets_temperature(hs, k, 20, 2), 1000000 + 800000 + 512000);
	assert_int_equal(tier__hitsets_temperature(hs, k, 20, 64), 1000000 + 800000 + 512000);
	assert_int_equal(tier__hitsets_temperature(hs, only1, 20, 1), 640000);
	assert_int_equal(tier__hitsets_temperature(hs, only1, 50, 1), 250000);
	/* Ceph's grade table truncates at every step: 1e6 * 0.5^7 -> 7812 */
	assert_int_equal(tier__hitsets_temperature(hs, deep, 50, 1), 7812);
	assert_int_equal(tier__hitsets_temperature(hs, deep, 0, 1), 1000000);
	assert_int_equal(tier__hitsets_temperature(hs, k, 100, 5), 1000000);
	assert_int_equal(tier__hitsets_temperature(hs, key_of(999), 20, 8), 0);
	tier__hitsets_destroy(hs);
}

static void test_trim_to_count_on_rotate_and_configure(void **state)
{
	struct tier__hitsets *hs = mk(2, 0.05, 1024);
	uint64_t now = 0, old = key_of(1);

	(void)state;
	tier__hitsets_insert(hs, old);
	for (int i = 0; i < 5; i++)
		rotate(hs, &now);
	assert_int_equal(tier__hitsets_archived(hs), 2);
	tier__hitsets_configure(hs, 4, 0.05);
	assert_int_equal(tier__hitsets_archived(hs), 2);   /* growth waits for periods */
	for (int i = 0; i < 5; i++)
		rotate(hs, &now);
	assert_int_equal(tier__hitsets_archived(hs), 4);
	tier__hitsets_configure(hs, 1, 0.05);
	assert_int_equal(tier__hitsets_archived(hs), 1);   /* shrinking is immediate */
	/* the one kept is the newest: the oldest start times were dropped */
	assert_int_equal(info_of(hs, 1).start_ms, now - PERIOD);
	tier__hitsets_configure(hs, 0, 0.05);
	assert_int_equal(tier__hitsets_archived(hs), 0);
	rotate(hs, &now);
	assert_int_equal(tier__hitsets_archived(hs), 0);
	tier__hitsets_destroy(hs);
}

static void test_configure_fpp_applies_at_next_rotation(void **state)
{
	struct tier__hitsets *hs = mk(2, 0.05, 4000);
	uint64_t now = 0, bits_before;

	(void)state;
	for (uint64_t i = 0; i < 4000; i++)
		tier__hitsets_insert(hs, key_of(i));
	bits_before = info_of(hs, 0).bits;
	tier__hitsets_configure(hs, 2, 0.001);
	assert_int_equal(info_of(hs, 0).bits, bits_before);
	rotate(hs, &now);
	/* same ~4000 keys, ln(0.001)/ln(0.05) ~ 2.3x the bits */
	assert_true(info_of(hs, 0).bits > 2 * bits_before);
	tier__hitsets_destroy(hs);
}

/* A hitset whose newest archived set holds keys 0..n-1; returns its blob. */
static struct tier__hitsets *with_blob(uint64_t n, void **blob, size_t *len)
{
	struct tier__hitsets *hs = mk(3, 0.02, n);
	uint64_t now = 0, start = 0;

	for (uint64_t i = 0; i < n; i++)
		tier__hitsets_insert(hs, key_of(i));
	rotate(hs, &now);
	assert_int_equal(tier__hitsets_encode_newest(hs, blob, len, &start), 0);
	assert_int_equal(start, 0);
	assert_true(*len > 72);
	return hs;
}

static void test_encode_decode_round_trip(void **state)
{
	struct tier__hitsets *hs, *back = mk(3, 0.02, 1024), *empty = mk(3, 0.02, 1024);
	void *blob = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(tier__hitsets_encode_newest(empty, &blob, &len, NULL), -ENOENT);
	assert_null(blob);
	hs = with_blob(3000, &blob, &len);
	assert_int_equal(tier__hitsets_load_archived(back, blob, len), 0);
	assert_int_equal(tier__hitsets_archived(back), 1);
	/* same bits, same seed: membership agrees for members and strangers */
	for (uint64_t i = 0; i < 20000; i++) {
		uint32_t a = tier__hitsets_temperature(hs, key_of(i), 20, 1);
		uint32_t b = tier__hitsets_temperature(back, key_of(i), 20, 1);

		assert_int_equal(a, b);
		if (i < 3000)
			assert_int_equal(b, 800000);
	}
	struct tier_hitset_info ia = info_of(hs, 1), ib = info_of(back, 1);
	assert_int_equal(ia.start_ms, ib.start_ms);
	assert_int_equal(ia.end_ms, ib.end_ms);
	assert_int_equal(ia.inserts, ib.inserts);
	assert_int_equal(ia.unique, ib.unique);
	assert_int_equal(ia.capacity, ib.capacity);
	assert_int_equal(ia.bits, ib.bits);
	assert_int_equal(ia.bits_set, ib.bits_set);
	assert_int_equal(ia.k, ib.k);
	assert_true(ia.fpp == ib.fpp);
	/* loading more than count keeps the newest count (loaded oldest first) */
	for (int i = 0; i < 4; i++)
		assert_int_equal(tier__hitsets_load_archived(back, blob, len), 0);
	assert_int_equal(tier__hitsets_archived(back), 3);
	free(blob);
	tier__hitsets_destroy(hs);
	tier__hitsets_destroy(back);
	tier__hitsets_destroy(empty);
}

static void test_decode_rejects_truncated_and_corrupt_blobs(void **state)
{
	struct tier__hitsets *hs, *back = mk(3, 0.02, 1024);
	unsigned char *bad;
	void *blob = NULL;
	size_t len = 0;

	(void)state;
	hs = with_blob(2000, &blob, &len);
	bad = malloc(len + 16);
	assert_non_null(bad);
	assert_int_equal(tier__hitsets_load_archived(back, NULL, 0), -EINVAL);
	for (size_t cut = 0; cut < len; cut += (cut < 64 ? 1 : 97))
		assert_int_equal(tier__hitsets_load_archived(back, blob, cut), -EINVAL);
	/* a flipped byte anywhere in the frame (the checksum catches the payload) */
	for (size_t at = 0; at < len; at += 37) {
		memcpy(bad, blob, len);
		bad[at] ^= 0x5a;
		assert_int_equal(tier__hitsets_load_archived(back, bad, len), -EINVAL);
	}
	/* trailing garbage after the frame */
	memcpy(bad, blob, len);
	memset(bad + len, 0xab, 16);
	assert_int_equal(tier__hitsets_load_archived(back, bad, len + 16), -EINVAL);
	memset(bad, 0, len);
	assert_int_equal(tier__hitsets_load_archived(back, bad, len), -EINVAL);
	assert_int_equal(tier__hitsets_archived(back), 0);
	free(bad);
	free(blob);
	tier__hitsets_destroy(hs);
	tier__hitsets_destroy(back);
}

/* Decompress, patch the record, recompress: a well-formed frame, bad content. */
static int load_patched(struct tier__hitsets *into, const void *blob, size_t len,
			size_t off, const void *val, size_t vlen, long resize)
{
	unsigned long long rawlen = ZSTD_getFrameContentSize(blob, len);
	size_t newlen = (size_t)((long)rawlen + resize);
	unsigned char *raw = calloc(1, rawlen + 64);
	void *z = malloc(ZSTD_compressBound(newlen));
	size_t zlen;
	int rc;

	assert_non_null(raw);
	assert_non_null(z);
	assert_int_equal(ZSTD_decompress(raw, rawlen, blob, len), rawlen);
	if (val)
		memcpy(raw + off, val, vlen);
	zlen = ZSTD_compress(z, ZSTD_compressBound(newlen), raw, newlen, 1);
	assert_false(ZSTD_isError(zlen));
	rc = tier__hitsets_load_archived(into, z, zlen);
	free(raw);
	free(z);
	return rc;
}

static void test_decode_rejects_malformed_records(void **state)
{
	struct tier__hitsets *hs, *back = mk(3, 0.02, 1024);
	const uint32_t magic = 0x12345678;
	const uint16_t ver = 2, k0 = 0, k99 = 99;
	const uint64_t nbits_odd = 1000, nbits_big = 1ull << 40, zero = 0;
	const uint64_t bitsset_wrong = 1, start_late = UINT64_MAX;
	void *blob = NULL;
	size_t len = 0;

	(void)state;
	hs = with_blob(2000, &blob, &len);
	/* untouched re-compression (no checksum) is accepted: the patch is the fault */
	assert_int_equal(load_patched(back, blob, len, 0, NULL, 0, 0), 0);
	assert_int_equal(load_patched(back, blob, len, 0, &magic, 4, 0), -EINVAL);
	assert_int_equal(load_patched(back, blob, len, 4, &ver, 2, 0), -EINVAL);
	assert_int_equal(load_patched(back, blob, len, 6, &k0, 2, 0), -EINVAL);
	assert_int_equal(load_patched(back, blob, len, 6, &k99, 2, 0), -EINVAL);
	assert_int_equal(load_patched(back, blob, len, 48, &nbits_odd, 8, 0), -EINVAL);
	assert_int_equal(load_patched(back, blob, len, 48, &nbits_big, 8, 0), -EINVAL);
	assert_int_equal(load_patched(back, blob, len, 48, &zero, 8, 0), -EINVAL);
	assert_int_equal(load_patched(back, blob, len, 56, &bitsset_wrong, 8, 0), -EINVAL);
	assert_int_equal(load_patched(back, blob, len, 8, &start_late, 8, 0), -EINVAL); /* start > end */
	assert_int_equal(load_patched(back, blob, len, 64, &zero, 8, 0), -EINVAL);  /* fpp 0 */
	assert_int_equal(load_patched(back, blob, len, 0, NULL, 0, -8), -EINVAL);   /* short bits */
	assert_int_equal(load_patched(back, blob, len, 0, NULL, 0, 8), -EINVAL);    /* extra bytes */
	/* a record shorter than its own header */
	assert_int_equal(load_patched(back, blob, len, 0, NULL, 0,
				      60 - (long)ZSTD_getFrameContentSize(blob, len)), -EINVAL);
	assert_int_equal(tier__hitsets_archived(back), 1);
	free(blob);
	tier__hitsets_destroy(hs);
	tier__hitsets_destroy(back);
}

static void test_info_lists_current_then_archived(void **state)
{
	struct tier__hitsets *hs = mk(3, 0.05, 1024);
	struct tier_hitset_info v[TIER_HITSET_MAX_SETS];
	uint64_t now = 0;

	(void)state;
	tier__hitsets_insert(hs, key_of(1));
	rotate(hs, &now);
	rotate(hs, &now);
	assert_int_equal(tier__hitsets_info(hs, v, TIER_HITSET_MAX_SETS), 3);
	assert_int_equal(v[0].set, -1);
	assert_int_equal(v[0].end_ms, 0);
	assert_int_equal(v[1].set, 0);
	assert_int_equal(v[2].set, 1);
	assert_int_equal(v[2].end_ms, v[1].start_ms);   /* newest first, back to back */
	assert_int_equal(v[1].end_ms, v[0].start_ms);
	assert_int_equal(info_of(hs, 2).inserts, 1);
	assert_int_equal(info_of(hs, 1).inserts, 0);
	/* a short array gets the newest sets and the full count; nothing past max is written */
	memset(v, 0xa5, sizeof(v));
	assert_int_equal(tier__hitsets_info(hs, v, 2), 3);
	assert_int_equal(v[0].set, -1);
	assert_int_equal(v[1].set, 0);
	assert_int_equal(v[2].set, (int)0xa5a5a5a5);
	/* count only, and a missing array */
	assert_int_equal(tier__hitsets_info(hs, NULL, 0), 3);
	assert_int_equal(tier__hitsets_info(hs, NULL, 1), -EINVAL);
	tier__hitsets_destroy(hs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_rejects_bad_arguments),
		cmocka_unit_test(test_recency_zero_is_always_and_one_is_current_set),
		cmocka_unit_test(test_recency_n_needs_current_and_n_minus_1_newest),
		cmocka_unit_test(test_recency_requires_consecutive_sets),
		cmocka_unit_test(test_false_positive_rate_near_target_at_capacity),
		cmocka_unit_test(test_new_period_sized_from_previous_unique_inserts),
		cmocka_unit_test(test_rotate_only_after_a_period),
		cmocka_unit_test(test_temperature_follows_ceph_grades),
		cmocka_unit_test(test_trim_to_count_on_rotate_and_configure),
		cmocka_unit_test(test_configure_fpp_applies_at_next_rotation),
		cmocka_unit_test(test_encode_decode_round_trip),
		cmocka_unit_test(test_decode_rejects_truncated_and_corrupt_blobs),
		cmocka_unit_test(test_decode_rejects_malformed_records),
		cmocka_unit_test(test_info_lists_current_then_archived),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
