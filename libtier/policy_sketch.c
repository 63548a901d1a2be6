/* SPDX-License-Identifier: MIT */
/*
 * libtier/policy_sketch.c - TinyLFU's frequency sketch (Einziger, Friedman
 * and Manes, "TinyLFU: a highly efficient cache admission policy", 2017):
 * a count-min sketch of 4 rows of 4-bit counters over every access the
 * engine records, cached or not.  After 10 x width additions every counter
 * is halved (the "reset" that ages old popularity away), so an estimate is
 * a recent frequency in 0..15.  It only counts: tier__decide_admit compares
 * a miss's estimate with the eviction victim's.  Never touches the store.
 */
#include <errno.h>
#include <stdlib.h>

#include "libtier/policy.h"

#define SK_ROWS 4
#define SK_MAX  15u

struct tier__sketch {
	uint64_t *w;        /* SK_ROWS rows of width/16 words, 16 counters a word */
	uint64_t mask;      /* width - 1 (width a power of two >= 16) */
	uint64_t adds, reset_at;
	uint64_t resets;
};

static const uint64_t seeds[SK_ROWS] = {
	0xc3a5c85c97cb3127ull, 0xb492b66fbe98f273ull, 0x9ae16a3b2f90404full, 0xcbf29ce484222325ull,
};

static uint64_t sk_hash(uint64_t key, int row)
{
	key = (key ^ seeds[row]) * 0xff51afd7ed558ccdull;
	key ^= key >> 32;
	key *= 0xc4ceb9fe1a85ec53ull;
	key ^= key >> 29;
	return key;
}

int tier__sketch_create(uint64_t objects, struct tier__sketch **out)
{
	struct tier__sketch *s = calloc(1, sizeof(*s));
	uint64_t width = 16;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	if (objects > (1ull << 26))
		objects = 1ull << 26;
	while (width < objects)
		width <<= 1;
	s->w = calloc(SK_ROWS * (width / 16), sizeof(*s->w));
	if (!s->w) {
		free(s);
		return -ENOMEM;
	}
	s->mask = width - 1;
	s->reset_at = 10 * width;
	*out = s;
	return 0;
}

void tier__sketch_destroy(struct tier__sketch *s)
{
	if (!s)
		return;
	free(s->w);
	free(s);
}

static unsigned get(const struct tier__sketch *s, int row, uint64_t i)
{
	uint64_t word = s->w[(uint64_t)row * ((s->mask + 1) / 16) + i / 16];

	return (unsigned)(word >> (4 * (i % 16))) & SK_MAX;
}

static void halve(struct tier__sketch *s)
{
	size_t n = SK_ROWS * ((s->mask + 1) / 16);

	/* every 4-bit counter shifted right by one: drop each nibble's low bit */
	for (size_t i = 0; i < n; i++)
		s->w[i] = (s->w[i] >> 1) & 0x7777777777777777ull;
	s->adds /= 2;
	s->resets++;
}

void tier__sketch_add(struct tier__sketch *s, uint64_t key)
{
	unsigned min = SK_MAX;
	uint64_t idx[SK_ROWS];

	for (int r = 0; r < SK_ROWS; r++) {
		unsigned v;

		idx[r] = sk_hash(key, r) & s->mask;
		v = get(s, r, idx[r]);
		if (v < min)
			min = v;
	}
	if (min == SK_MAX)
		return;
	/* conservative update: raise only the counters at the minimum */
	for (int r = 0; r < SK_ROWS; r++) {
		if (get(s, r, idx[r]) == min) {
			uint64_t *word = &s->w[(uint64_t)r * ((s->mask + 1) / 16) + idx[r] / 16];

			*word += 1ull << (4 * (idx[r] % 16));
		}
	}
	if (++s->adds >= s->reset_at)
		halve(s);
}

unsigned tier__sketch_estimate(const struct tier__sketch *s, uint64_t key)
{
	unsigned min = SK_MAX;

	for (int r = 0; r < SK_ROWS; r++) {
		unsigned v = get(s, r, sk_hash(key, r) & s->mask);

		if (v < min)
			min = v;
	}
	return min;
}

size_t tier__sketch_bytes(const struct tier__sketch *s)
{
	return sizeof(*s) + SK_ROWS * ((s->mask + 1) / 16) * sizeof(uint64_t);
}

uint64_t tier__sketch_resets(const struct tier__sketch *s)
{
	return s->resets;
}
