/* SPDX-License-Identifier: MIT */
/*
 * libtier/stats.c - latency histograms (quarter-octave buckets) and the
 * names of agent modes.  It only counts and summarises; it never allocates
 * and never reads a clock (callers pass the latency they measured).
 */
#include <math.h>
#include <stddef.h>

#include "tier/stats.h"

static unsigned lat_bucket(uint64_t us)
{
	unsigned i;

	if (us <= 1)
		return 0;
	i = (unsigned)floor(4.0 * log2((double)us));
	/* guard the floating point at exact powers of two */
	while (i > 0 && pow(2.0, i / 4.0) > (double)us)
		i--;
	while (pow(2.0, (i + 1) / 4.0) <= (double)us)
		i++;
	return i < TIER_LAT_BUCKETS ? i : TIER_LAT_BUCKETS - 1;
}

void tier_lat_record(struct tier_lat_hist *h, uint64_t us)
{
	h->count++;
	h->sum_us += us;
	if (us > h->max_us)
		h->max_us = us;
	h->b[lat_bucket(us)]++;
}

uint64_t tier_lat_quantile(const struct tier_lat_hist *h, double q)
{
	uint64_t want, seen = 0;

	if (!h->count)
		return 0;
	if (q <= 0.0)
		q = 1e-9;
	if (q > 1.0)
		q = 1.0;
	want = (uint64_t)ceil(q * (double)h->count);
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < TIER_LAT_BUCKETS; i++) {
		seen += h->b[i];
		if (seen >= want) {
			uint64_t ub = (uint64_t)ceil(pow(2.0, (i + 1) / 4.0));
			return ub < h->max_us ? ub : h->max_us;
		}
	}
	return h->max_us;
}

const char *tier_flush_mode_name(int m)
{
	switch (m) {
	case TIER_FLUSH_IDLE: return "idle";
	case TIER_FLUSH_LOW: return "low";
	case TIER_FLUSH_HIGH: return "high";
	default: return "unknown";
	}
}

const char *tier_evict_mode_name(int m)
{
	switch (m) {
	case TIER_EVICT_IDLE: return "idle";
	case TIER_EVICT_SOME: return "some";
	case TIER_EVICT_FULL: return "full";
	default: return "unknown";
	}
}
