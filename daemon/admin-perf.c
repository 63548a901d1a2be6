/* SPDX-License-Identifier: MIT */
/*
 * admin-perf.c - `perf dump` and `perf schema` in Ceph's perf-counter
 * layout: one object per logger ("tierd" for the engine's totals,
 * "tierd-image-NAME" per image, "tierd-pool-base" / "tierd-pool-cache" per
 * pool), plain numbers for counters and gauges, {avgcount, sum, avgtime} (in
 * seconds) for latencies, and a schema entry (type bits, metric_type,
 * value_type, description, units) for every value `perf dump` shows.  Both
 * come from the same walk, so they cannot disagree.  It only reads stats.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/admin-internal.h"
#include "daemon/busy-poll.h"
#include "daemon/utf8.h"

/* Ceph's perfcounter_type_d bits (src/common/perf_counters.h) */
enum { PERF_TIME = 0x1, PERF_U64 = 0x2, PERF_LONGRUNAVG = 0x4, PERF_COUNTER = 0x8 };
#define PERF_PRIO_USEFUL 5

struct desc {
	const char *name, *text;
};

static const struct desc descs[] = {
	{"read_ops", "client reads"}, {"read_bytes", "bytes read by clients"},
	{"write_ops", "client writes"}, {"write_bytes", "bytes written by clients"},
	{"trim_ops", "client trims"}, {"trim_bytes", "bytes trimmed by clients"},
	{"zero_ops", "client write-zeroes"}, {"zero_bytes", "bytes zeroed by clients"},
	{"flush_ops", "client flushes"}, {"cache_ops", "client cache hints (NBD_CMD_CACHE)"},
	{"errors", "client requests answered with an error"},
	{"read_hits", "reads served whole from the cache"},
	{"read_misses", "reads that needed the base pool (a miss, not an error)"},
	{"write_hits", "writes to cached objects"},
	{"write_misses", "writes to objects (or extents) the cache lacked"},
	{"read_miss_bytes", "bytes of missed reads"}, {"write_miss_bytes", "bytes of missed writes"},
	{"proxy_reads", "reads sent to the base pool"},
	{"proxy_read_bytes", "bytes of reads sent to the base pool"},
	{"proxy_writes", "writes sent to the base pool"},
	{"proxy_write_bytes", "bytes of writes sent to the base pool"},
	{"promotions", "objects copied from base into the cache"},
	{"promote_bytes", "bytes copied by promotions"},
	{"promote_throttled", "promotions not started: over the promotion rate"},
	{"promote_failed", "promotions that failed"},
	{"fills", "partly valid objects completed from base, and read fills"}, {"fill_bytes", "bytes filled"},
	{"fill_failed", "fills that failed"},
	{"fill_skip_cold", "fills skipped: the object is cold"},
	{"fill_skip_full", "fills skipped: the cache is full"},
	{"fill_skip_degraded", "fills skipped: the cache pool is degraded"},
	{"fill_skip_throttled", "fills skipped: over the fills' budget (or the promotion rate)"},
	{"fill_skip_busy", "read fills refused: another op on the object"},
	{"fill_skip_unsynced", "read fills refused: a base remove not yet synced"},
	{"fill_skip_partial", "read fills refused: the read holds no whole extent to cache"},
	{"flushes", "objects written back to the base pool"},
	{"flush_bytes", "dirty bytes written back"}, {"flush_failed", "flushes that failed"},
	{"flush_partial", "flushes after which the object was still dirty"},
	{"flush_cold", "cold flushes: only dirty extents not referenced since the clock looked"},
	{"evictions", "objects dropped from the cache"}, {"evict_bytes", "bytes dropped"},
	{"evict_failed", "evictions that failed"},
	{"evict_partial", "partial evictions: clean unreferenced extents dropped, the rest kept"},
	{"evict_partial_bytes", "bytes dropped by partial evictions"},
	{"evict_again", "eviction victims given a second chance (every valid extent referenced)"},
	{"evict_pass", "all-dirty copies the clock passed over while flushes clean them"},
	{"load_probes", "objects looked up in the cache pool for a request while the image loaded"},
	{"hitset_archives", "hitsets archived into the cache pool"},
	{"cache_errors", "cache pool failures (the cache degrades for a while)"},
	{"syncs", "durability syncs done"}, {"sync_errors", "durability syncs that failed"},
	{"agent_skip_busy", "agent candidates skipped: busy"},
	{"agent_skip_hot", "agent candidates skipped: written during their last flush"},
	{"agent_skip_young", "agent candidates skipped: younger than the minimum age"},
	{"agent_turnovers", "phase changes after which a full cache turned over faster"},
	{"cached_objects", "objects in the cache"}, {"cached_bytes", "bytes in the cache"},
	{"dirty_objects", "objects not yet flushed"}, {"dirty_bytes", "bytes not yet flushed"},
	{"flush_mode", "agent flush mode (0 idle, 1 low, 2 high)"},
	{"evict_mode", "agent evict mode (0 idle, 1 some, 2 full)"},
	{"evict_effort_pct", "agent eviction effort in percent"},
	{"agent_ops_in_flight", "agent flushes and evictions in flight"},
	{"requests_in_flight", "client requests in flight"},
	{"agent_turnover", "1 while a full cache turns over after a phase change"},
	{"dirty_ratio_ppm", "dirty share of the target, parts per million"},
	{"full_ratio_ppm", "full share of the target, parts per million"},
	{"engine_bytes_per_object", "engine memory per cached object"},
	{"read_latency", "client read latency"}, {"write_latency", "client write latency"},
	{"other_latency", "latency of other client requests"},
	{"in_flight", "store ops in flight"}, {"faults_injected", "faults injected (tests)"},
	{"fs_syncs", "fsync/fdatasync calls (local backend)"},
	{"pending_listed", "ordered-write ranges listed instead of synced"},
	{"pending_settled", "listed ranges settled by an overwrite"},
	{"pending_kept", "listed ranges of an earlier session kept"},
	{"pending_dropped", "listed ranges of an earlier session dropped"},
	{"meta_deferred", "records of overwrites left with the open file"},
	{"meta_stored_late", "records left with the open file, stored later"},
	{"busy_poll_max_ns", "busy_poll_us of this loop, in ns (0: the loop never spins)"},
	{"busy_poll_window_ns", "how long the loop spins now before it sleeps (learned)"},
	{"busy_poll_hits", "spins that found work before the loop slept"},
	{"busy_poll_misses", "spins that found nothing; the loop slept"},
	{"busy_poll_ns", "time the loop spent spinning for work"},
};

static const char *describe(const char *name)
{
	const char *u = strrchr(name, '_');

	for (size_t i = 0; i < sizeof(descs) / sizeof(descs[0]); i++)
		if (!strcmp(descs[i].name, name))
			return descs[i].text;
	/* pool op counters: OP_ops, OP_bytes, ... */
	if (u && !strcmp(u, "_ops"))
		return "store ops submitted";
	if (u && !strcmp(u, "_bytes"))
		return "bytes of store ops";
	if (u && !strcmp(u, "_errors"))
		return "store ops that failed";
	if (u && !strcmp(u, "_found"))
		return "store ops on an absent object (a miss, not an error)";
	if (u && !strcmp(u, "_conflicts"))
		return "store ops a guard or exclusive create refused";
	if (u && !strcmp(u, "_latency"))
		return "store op latency";
	return "";
}

/* The walk: dump fills values, schema fills descriptions, for one logger. */
struct perf {
	bool schema;
	const char *counter;   /* NULL: all */
	json_t *sec;
};

static bool wanted(const struct perf *p, const char *name)
{
	return !p->counter || !strcmp(p->counter, name);
}

static void put_schema(struct perf *p, const char *name, int type, const char *value_type)
{
	json_t *d = json_object();
	const char *u = strrchr(name, '_');

	json_object_set_new(d, "type", json_integer(type));
	json_object_set_new(d, "metric_type",
			    json_string(type & PERF_COUNTER ? "counter" : "gauge"));
	json_object_set_new(d, "value_type", json_string(value_type));
	json_object_set_new(d, "description", json_string(describe(name)));
	json_object_set_new(d, "nick", json_string(""));
	json_object_set_new(d, "priority", json_integer(PERF_PRIO_USEFUL));
	json_object_set_new(d, "units", json_string(u && !strcmp(u, "_bytes") ? "bytes" : "none"));
	json_object_set_new(p->sec, name, d);
}

static void put_u64(struct perf *p, const char *name, uint64_t v, bool counter)
{
	if (!wanted(p, name))
		return;
	if (p->schema)
		put_schema(p, name, PERF_U64 | (counter ? PERF_COUNTER : 0), "integer");
	else
		json_object_set_new(p->sec, name, json_integer((json_int_t)v));
}

/* A long-running average as Ceph shows a time counter: seconds. */
static void put_avg(struct perf *p, const char *name, uint64_t count, double sum_s)
{
	json_t *o;

	if (!wanted(p, name))
		return;
	if (p->schema) {
		put_schema(p, name, PERF_TIME | PERF_LONGRUNAVG, "real-integer-pair");
		return;
	}
	o = json_object();
	json_object_set_new(o, "avgcount", json_integer((json_int_t)count));
	json_object_set_new(o, "sum", json_real(sum_s));
	json_object_set_new(o, "avgtime", json_real(count ? sum_s / (double)count : 0.0));
	json_object_set_new(p->sec, name, o);
}

static void put_lat(struct perf *p, const struct tier_stats *s)
{
	static const char *const names[TIER_LAT_KINDS] = {
		"read_latency", "write_latency", "other_latency"};

	for (int k = 0; k < TIER_LAT_KINDS; k++)
		put_avg(p, names[k], s->lat[k].count, (double)s->lat[k].sum_us / 1e6);
}

static void engine_section(struct perf *p, struct tier_engine *e)
{
	struct tier_stats *s = malloc(sizeof(*s));

	if (!s)
		return;
	tier_engine_get_stats(e, s);
#define C(n) put_u64(p, #n, s->n, true);
#define G(n) put_u64(p, #n, s->n, false);
	TIER_COUNTERS(C)
	TIER_GAUGES(G)
	put_u64(p, "engine_bytes_per_object", tier_engine_bytes_per_object(e), false);
	put_lat(p, s);
	free(s);
}

static void image_section(struct perf *p, const struct tier_image *img)
{
	struct tier_stats *s = malloc(sizeof(*s));

	if (!s)
		return;
	tier_image_get_stats(img, s);
	TIER_IMAGE_COUNTERS(C)
	TIER_IMAGE_GAUGES(G)
#undef C
#undef G
	put_lat(p, s);
	free(s);
}

static void pool_section(struct perf *p, struct tier_store *st)
{
	struct tier_store_stats ss;
	char n[64];

	tier_store_get_stats(st, &ss);
	put_u64(p, "in_flight", tier_store_in_flight(st), false);
	put_u64(p, "faults_injected", ss.faults_injected, true);
	put_u64(p, "fs_syncs", ss.syncs, true);
	put_u64(p, "pending_listed", ss.pend_listed, true);
	put_u64(p, "pending_settled", ss.pend_settled, true);
	put_u64(p, "pending_kept", ss.pend_kept, true);
	put_u64(p, "pending_dropped", ss.pend_dropped, true);
	put_u64(p, "meta_deferred", ss.meta_deferred, true);
	put_u64(p, "meta_stored_late", ss.meta_stored_late, true);
	for (int op = 1; op < TIER_STORE_OPCODE_MAX; op++) {
		const char *on = tier_store_opcode_name((enum tier_store_opcode)op);
#define P(suffix, v) snprintf(n, sizeof(n), "%s_" suffix, on), put_u64(p, n, v, true)
		P("ops", ss.ops[op]);
		P("bytes", ss.bytes[op]);
		P("errors", ss.errors[op]);
		P("not_found", ss.not_found[op]);
		P("conflicts", ss.conflicts[op]);
#undef P
		snprintf(n, sizeof(n), "%s_latency", on);
		put_avg(p, n, ss.ops[op], (double)ss.lat_sum_ns[op] / 1e9);
	}
}

static void loop_section(struct perf *p, const struct tierd_busy_poll *bp)
{
	put_u64(p, "busy_poll_max_ns", bp->max_ns, false);
	put_u64(p, "busy_poll_window_ns",
		atomic_load_explicit(&bp->window_now_ns, memory_order_relaxed), false);
	put_u64(p, "busy_poll_hits", atomic_load_explicit(&bp->hits, memory_order_relaxed), true);
	put_u64(p, "busy_poll_misses",
		atomic_load_explicit(&bp->misses, memory_order_relaxed), true);
	put_u64(p, "busy_poll_ns", atomic_load_explicit(&bp->spin_ns, memory_order_relaxed), true);
}

/* "tierd-image-" + the image's name (invalid UTF-8 replaced). */
static char *image_logger(const struct tier_image *img)
{
	const char *name = tier_image_name(img);
	size_t len;
	char *fixed = tierd_utf8_fix(name, strlen(name), &len), *out = NULL;

	if (fixed && (out = malloc(len + sizeof("tierd-image-"))))
		sprintf(out, "tierd-image-%s", fixed);
	free(fixed);
	return out;
}

static json_t *perf(struct tierd_admin *a, struct tier_engine *e, const char *logger,
		    const char *counter, bool schema)
{
	struct tier_image *imgs[TIERD_MAX_IMAGES];
	struct perf p = {.schema = schema, .counter = counter};
	json_t *out = json_object();
	size_t n = tier_engine_images(e, imgs, TIERD_MAX_IMAGES);
	bool found = false;

	if (!out)
		return NULL;
	if (n > TIERD_MAX_IMAGES)
		n = TIERD_MAX_IMAGES;
#define SECTION(name, fill)                                                    \
	do {                                                                   \
		if (logger && strcmp(logger, (name)) != 0)                     \
			break;                                                 \
		found = true;                                                  \
		p.sec = json_object();                                         \
		fill;                                                          \
		json_object_set_new(out, (name), p.sec);                       \
	} while (0)
	SECTION("tierd", engine_section(&p, e));
	for (size_t i = 0; i < n; i++) {
		char *lg = image_logger(imgs[i]);
		if (lg)
			SECTION(lg, image_section(&p, imgs[i]));
		free(lg);
	}
	for (int which = 0; which < 2 && a->hooks.store; which++) {
		struct tier_store *st = a->hooks.store(a->hooks.arg, which);
		if (st)
			SECTION(which ? "tierd-pool-cache" : "tierd-pool-base", pool_section(&p, st));
	}
	for (int which = 0; which < 2 && a->hooks.busy_poll; which++) {
		const struct tierd_busy_poll *bp = a->hooks.busy_poll(a->hooks.arg, which);
		if (bp)
			SECTION(which ? "tierd-loop-nbd" : "tierd-loop", loop_section(&p, bp));
	}
#undef SECTION
	if (logger && !found) {
		json_decref(out);
		return tierd_admin_error("no logger '%s' (see: perf schema)", logger);
	}
	return out;
}

json_t *tierd_admin_perf_dump(struct tierd_admin *a, struct tier_engine *e,
			      const char *logger, const char *counter)
{
	return perf(a, e, logger, counter, false);
}

json_t *tierd_admin_perf_schema(struct tierd_admin *a, struct tier_engine *e,
				const char *logger, const char *counter)
{
	return perf(a, e, logger, counter, true);
}
