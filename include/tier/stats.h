/* SPDX-License-Identifier: MIT */
/*
 * tier/stats.h - engine counters and latency histograms, as plain structs the
 * daemon formats (perf dump, status, Prometheus).  X-macros keep the names in
 * one place.
 */
#ifndef TIER_STATS_H
#define TIER_STATS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * X(name): monotonically increasing counters.  TIER_IMAGE_COUNTERS are kept
 * per image too (tier_image_get_stats); TIER_ENGINE_COUNTERS only engine-wide.
 */
#define TIER_IMAGE_COUNTERS(X)                                                  \
	X(read_ops) X(read_bytes) X(write_ops) X(write_bytes)                   \
	X(trim_ops) X(trim_bytes) X(zero_ops) X(zero_bytes)                     \
	X(flush_ops) X(cache_ops) X(errors)                                     \
	X(read_hits) X(read_misses) X(write_hits) X(write_misses)               \
	X(read_miss_bytes) X(write_miss_bytes)                                  \
	X(proxy_reads) X(proxy_read_bytes) X(proxy_writes) X(proxy_write_bytes) \
	X(promotions) X(promote_bytes) X(promote_throttled) X(promote_failed)   \
	X(fills) X(fill_bytes) X(fill_failed) X(fill_skip_cold)                 \
	X(fill_skip_full) X(fill_skip_degraded) X(fill_skip_throttled)          \
	X(fill_skip_busy) X(fill_skip_unsynced) X(fill_skip_partial)            \
	X(flushes) X(flush_bytes) X(flush_failed) X(flush_partial) X(flush_cold) \
	X(evictions) X(evict_bytes) X(evict_failed)                             \
	X(evict_partial) X(evict_partial_bytes) X(evict_again) X(evict_pass)     \
	X(load_probes)
#define TIER_ENGINE_COUNTERS(X)                                                 \
	X(hitset_archives) X(cache_errors) X(syncs) X(sync_errors)             \
	X(agent_skip_busy) X(agent_skip_hot) X(agent_skip_young) X(agent_turnovers)
#define TIER_COUNTERS(X) TIER_IMAGE_COUNTERS(X) TIER_ENGINE_COUNTERS(X)

/* X(name): current values (gauges); the image ones per image too. */
#define TIER_IMAGE_GAUGES(X)                                                    \
	X(cached_objects) X(cached_bytes) X(dirty_objects) X(dirty_bytes)
#define TIER_ENGINE_GAUGES(X)                                                   \
	X(flush_mode) X(evict_mode) X(evict_effort_pct)                         \
	X(agent_ops_in_flight) X(requests_in_flight) X(agent_turnover)          \
	X(dirty_ratio_ppm) X(full_ratio_ppm)
#define TIER_GAUGES(X) TIER_IMAGE_GAUGES(X) TIER_ENGINE_GAUGES(X)

enum tier_flush_mode { TIER_FLUSH_IDLE = 0, TIER_FLUSH_LOW, TIER_FLUSH_HIGH };
enum tier_evict_mode { TIER_EVICT_IDLE = 0, TIER_EVICT_SOME, TIER_EVICT_FULL };

/*
 * Latency histogram: bucket i counts latencies in [2^(i/4) .. 2^((i+1)/4)) us
 * (quarter-octave), i < TIER_LAT_BUCKETS.
 */
#define TIER_LAT_BUCKETS 112
struct tier_lat_hist {
	uint64_t count;
	uint64_t sum_us;
	uint64_t max_us;
	uint64_t b[TIER_LAT_BUCKETS];
};
void tier_lat_record(struct tier_lat_hist *h, uint64_t us);
/* q in (0,1], e.g. 0.99; returns an upper bound in microseconds. */
uint64_t tier_lat_quantile(const struct tier_lat_hist *h, double q);

enum tier_lat_kind { TIER_LAT_READ = 0, TIER_LAT_WRITE, TIER_LAT_OTHER, TIER_LAT_KINDS };

struct tier_stats {
#define TIER_STAT_FIELD(n) uint64_t n;
	TIER_COUNTERS(TIER_STAT_FIELD)
	TIER_GAUGES(TIER_STAT_FIELD)
#undef TIER_STAT_FIELD
	struct tier_lat_hist lat[TIER_LAT_KINDS];
};

const char *tier_flush_mode_name(int m);
const char *tier_evict_mode_name(int m);

#ifdef __cplusplus
}
#endif
#endif
