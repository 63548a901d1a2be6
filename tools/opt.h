/* SPDX-License-Identifier: MIT */
/*
 * tools/opt.h - Belady's OPT (MIN) miss ratio: the lower bound on misses of
 * any cache of `capacity` objects that knows the whole future.
 *
 * Two variants: demand (every miss is inserted, evicting the resident
 * object used farthest in the future: Belady's MIN), and bypass (a miss
 * may also be left out of the cache, as tierd's proxy path does: the victim
 * is chosen among the residents *and* the missing object).  Bypass is the
 * honest bound for a cache that can proxy; demand is the classic one.
 * O(n log n) time, O(n) memory.
 */
#ifndef TIER_TOOLS_OPT_H
#define TIER_TOOLS_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct opt_result {
	uint64_t accesses;
	uint64_t misses;       /* including the compulsory ones */
	uint64_t compulsory;   /* first accesses (distinct objects) */
	double miss_ratio;     /* misses / accesses (0 for an empty sequence) */
	uint64_t bytes;        /* sum of the counted accesses' weights (1 each without weights) */
	uint64_t miss_bytes;   /* of them, the misses' */
};

/*
 * ids: object ids in access order (any 64-bit values).  capacity 0 means
 * every access misses.  The first `warm` accesses run through the cache
 * but are not counted (a warm-up, as tier-sim's --warmup).  0 or -ENOMEM.
 */
int opt_simulate(const uint64_t *ids, size_t n, uint64_t capacity, bool bypass,
		 size_t warm, struct opt_result *out);
/* The same with a weight (bytes) per access for the byte miss ratio; w may be NULL. */
int opt_simulate_w(const uint64_t *ids, const uint32_t *w, size_t n, uint64_t capacity,
		   bool bypass, size_t warm, struct opt_result *out);

/*
 * LRU of `capacity` objects on the same sequence, every miss inserted (the
 * baseline of tier-sim's miss/LRU).  w may be NULL.  0 or -ENOMEM.
 */
int lru_simulate(const uint64_t *ids, const uint32_t *w, size_t n, uint64_t capacity,
		 size_t warm, struct opt_result *out);

#endif
