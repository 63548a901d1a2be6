/* SPDX-License-Identifier: MIT */
/*
 * libtier/hitset.h (internal) - Ceph-style HitSets: a ring of bloom filters,
 * one per hit_set_period, used for the promotion recency rule and for object
 * temperature.  Keys are 64-bit object keys chosen by the engine.
 */
#ifndef TIER_HITSET_H
#define TIER_HITSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tier__hitsets;

/*
 * count = hit_set_count (archived sets kept, besides the current one),
 * fpp = target false-positive rate, first_capacity = expected inserts for the
 * first period (later periods are sized from the previous period's inserts).
 */
int tier__hitsets_create(unsigned count, double fpp, uint64_t first_capacity,
			 uint64_t now_ms, struct tier__hitsets **out);
void tier__hitsets_destroy(struct tier__hitsets *hs);   /* NULL ok */
/* Change count/fpp live (takes effect at the next rotation; count trims at once). */
void tier__hitsets_configure(struct tier__hitsets *hs, unsigned count, double fpp);

void tier__hitsets_insert(struct tier__hitsets *hs, uint64_t key);
/*
 * Ceph's recency rule, checked BEFORE the access is inserted:
 * 0 -> true; 1 -> key in current set; N -> in the current set and in the
 * N-1 newest archived sets, all consecutively.
 */
bool tier__hitsets_recent(const struct tier__hitsets *hs, uint64_t key, unsigned n);
/*
 * Temperature (Ceph's agent_estimate_temp): 1e6 if in the current set, plus
 * 1e6 * (1 - decay/100)^(i+1) for archived set i (0 = newest) holding it, up
 * to search_last_n matches.
 */
uint32_t tier__hitsets_temperature(const struct tier__hitsets *hs, uint64_t key,
				   unsigned decay_rate, unsigned search_last_n);
/*
 * Archive the current set and open a new one if period_ms has passed since
 * the current one opened; returns 1 if it rotated, 0 if not.
 */
int tier__hitsets_maybe_rotate(struct tier__hitsets *hs, uint64_t now_ms, uint64_t period_ms);
unsigned tier__hitsets_archived(const struct tier__hitsets *hs);

/*
 * Persistence: the newest archived set as a zstd-compressed, versioned
 * little-endian blob (malloc'd into *blob; caller frees), and loading blobs
 * back at start-up (oldest first).  Decode rejects bad input with -EINVAL.
 */
int tier__hitsets_encode_newest(const struct tier__hitsets *hs, void **blob, size_t *len,
				uint64_t *start_ms);
int tier__hitsets_load_archived(struct tier__hitsets *hs, const void *blob, size_t len);
/*
 * Describe the sets into out[0..max): the current one, then the archived
 * ones newest first (see tier_engine_hitset_info).  The caller owns out.
 * Returns the number of sets (>= 1); -EINVAL if max > 0 and out is NULL.
 */
struct tier_hitset_info;
int tier__hitsets_info(const struct tier__hitsets *hs, struct tier_hitset_info *out, size_t max);
#endif
