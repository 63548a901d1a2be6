/* SPDX-License-Identifier: MIT */
/*
 * daemon/prometheus.c - the Prometheus text endpoint.  GET /metrics gets one
 * HTTP/1.0 response in the text exposition format, per its conventions:
 * HELP and TYPE for every family, counters ending _total, base units
 * (_bytes, _seconds), what varies as labels (image, pool, op, result, state),
 * ratios 0..1, latency histograms, tierd_build_info; every image's counters
 * carry image="NAME" (the engine totals are their sum, by PromQL).  Other
 * methods get 405, other paths 404, a malformed request 400; then the
 * connection closes.  It reads stats only; it must never change engine state
 * or block the loop (requests are small and bounded; a scrape not done
 * within the client timeout is cut off, and at most PROM_MAX_CONNS are open
 * at once).
 */
#include <config.h>   /* generated: TIER_VERSION */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/config.h"
#include "daemon/owner.h"
#include "daemon/prometheus.h"
#include "daemon/utf8.h"

#define PROM_REQ_MAX 8192
#define PROM_MAX_CONNS 64                /* scrapes at once; more are closed */
#define PROM_DEFAULT_TIMEOUT_MS 10000u   /* a scrape must be done by then */

struct tierd_prom {
	uv_loop_t *loop;
	uv_tcp_t listener;
	struct tier_engine *(*engine)(void *arg);
	struct tier_store *(*store)(void *arg, int which);
	void *arg;
	tierd_prom_owner_fn owner;
	struct prom_conn *conns;     /* open scrapes, closed at stop */
	size_t n_conns;
	uint64_t timeout_ms;
	int stopping;
	int listener_open;
};

struct prom_conn {
	uv_tcp_t h;
	uv_timer_t timer;            /* request read and response written by then */
	unsigned handles;
	struct tierd_prom *p;
	struct prom_conn *prev, *next;
	uv_write_t wr;
	char *resp;
	size_t got;
	int answered;
	char req[PROM_REQ_MAX];
};

/* ---- the exposition text ---- */

/* A label value, escaped as the text format wants (invalid UTF-8 replaced). */
static void put_label_value(FILE *b, const char *v)
{
	size_t len;
	char *fixed = tierd_utf8_fix(v, strlen(v), &len);

	for (const char *p = fixed ? fixed : ""; *p; p++) {
		if (*p == '\\' || *p == '"')
			fprintf(b, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", b);
		else
			fputc(*p, b);
	}
	free(fixed);
}

static void family(FILE *b, const char *name, const char *type, const char *help)
{
	fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{image="IMG",LABELS} value; img and labels may be NULL */
static void sample(FILE *b, const char *name, const char *img, const char *labels, double v)
{
	fputs(name, b);
	if (img || labels) {
		fputc('{', b);
		if (img) {
			fputs("image=\"", b);
			put_label_value(b, img);
			fputc('"', b);
		}
		if (labels)
			fprintf(b, "%s%s", img ? "," : "", labels);
		fputc('}', b);
	}
	fprintf(b, " %.17g\n", v);
}

/* One sample of a family: its labels and where its value is in tier_stats. */
struct pfield {
	const char *name, *type, *help, *labels;
	size_t off;
};
#define OFF(f) offsetof(struct tier_stats, f)
#define FIELD(s, f) ((double)*(const uint64_t *)((const char *)(s) + (f)))

/* Kept per image: every sample carries image="NAME". */
static const struct pfield image_fields[] = {
	{"tierd_requests_total", "counter", "Client requests, by operation.", "op=\"read\"", OFF(read_ops)},
	{"tierd_requests_total", 0, 0, "op=\"write\"", OFF(write_ops)},
	{"tierd_requests_total", 0, 0, "op=\"trim\"", OFF(trim_ops)},
	{"tierd_requests_total", 0, 0, "op=\"write_zeroes\"", OFF(zero_ops)},
	{"tierd_requests_total", 0, 0, "op=\"flush\"", OFF(flush_ops)},
	{"tierd_requests_total", 0, 0, "op=\"cache\"", OFF(cache_ops)},
	{"tierd_request_bytes_total", "counter", "Bytes of client requests, by operation.", "op=\"read\"", OFF(read_bytes)},
	{"tierd_request_bytes_total", 0, 0, "op=\"write\"", OFF(write_bytes)},
	{"tierd_request_bytes_total", 0, 0, "op=\"trim\"", OFF(trim_bytes)},
	{"tierd_request_bytes_total", 0, 0, "op=\"write_zeroes\"", OFF(zero_bytes)},
	{"tierd_request_errors_total", "counter", "Client requests answered with an error.", NULL, OFF(errors)},
	{"tierd_cache_lookups_total", "counter",
	 "Reads and writes by cache result (a miss needed the base pool; it is not an error).",
	 "op=\"read\",result=\"hit\"", OFF(read_hits)},
	{"tierd_cache_lookups_total", 0, 0, "op=\"read\",result=\"miss\"", OFF(read_misses)},
	{"tierd_cache_lookups_total", 0, 0, "op=\"write\",result=\"hit\"", OFF(write_hits)},
	{"tierd_cache_lookups_total", 0, 0, "op=\"write\",result=\"miss\"", OFF(write_misses)},
	{"tierd_cache_miss_bytes_total", "counter", "Bytes of reads and writes that missed the cache.",
	 "op=\"read\"", OFF(read_miss_bytes)},
	{"tierd_cache_miss_bytes_total", 0, 0, "op=\"write\"", OFF(write_miss_bytes)},
	{"tierd_proxied_requests_total", "counter", "Client requests sent on to the base pool.",
	 "op=\"read\"", OFF(proxy_reads)},
	{"tierd_proxied_requests_total", 0, 0, "op=\"write\"", OFF(proxy_writes)},
	{"tierd_proxied_bytes_total", "counter", "Bytes of client requests sent on to the base pool.",
	 "op=\"read\"", OFF(proxy_read_bytes)},
	{"tierd_proxied_bytes_total", 0, 0, "op=\"write\"", OFF(proxy_write_bytes)},
	{"tierd_promotions_total", "counter",
	 "Promotions (objects copied from base into the cache), by result; throttled: not started.",
	 "result=\"ok\"", OFF(promotions)},
	{"tierd_promotions_total", 0, 0, "result=\"failed\"", OFF(promote_failed)},
	{"tierd_promotions_total", 0, 0, "result=\"throttled\"", OFF(promote_throttled)},
	{"tierd_promoted_bytes_total", "counter", "Bytes copied into the cache by promotions.", NULL, OFF(promote_bytes)},
	{"tierd_fills_total", "counter",
	 "Fills (partly valid objects completed from base) and read fills (an admitted read miss's "
	 "extents cached from its own base read), by result; skipped_*: not started (after "
	 "skipped_throttled a read fill of the read's own extents may still follow; "
	 "skipped_busy, skipped_unsynced, skipped_partial: a read fill refused).",
	 "result=\"ok\"", OFF(fills)},
	{"tierd_fills_total", 0, 0, "result=\"failed\"", OFF(fill_failed)},
	{"tierd_fills_total", 0, 0, "result=\"skipped_cold\"", OFF(fill_skip_cold)},
	{"tierd_fills_total", 0, 0, "result=\"skipped_full\"", OFF(fill_skip_full)},
	{"tierd_fills_total", 0, 0, "result=\"skipped_degraded\"", OFF(fill_skip_degraded)},
	{"tierd_fills_total", 0, 0, "result=\"skipped_throttled\"", OFF(fill_skip_throttled)},
	{"tierd_fills_total", 0, 0, "result=\"skipped_busy\"", OFF(fill_skip_busy)},
	{"tierd_fills_total", 0, 0, "result=\"skipped_unsynced\"", OFF(fill_skip_unsynced)},
	{"tierd_fills_total", 0, 0, "result=\"skipped_partial\"", OFF(fill_skip_partial)},
	{"tierd_filled_bytes_total", "counter", "Bytes copied into the cache by fills.", NULL, OFF(fill_bytes)},
	{"tierd_flushes_total", "counter", "Flushes (dirty objects written back to base), by result.",
	 "result=\"ok\"", OFF(flushes)},
	{"tierd_flushes_total", 0, 0, "result=\"failed\"", OFF(flush_failed)},
	{"tierd_flushes_partial_total", "counter",
	 "Flushes after which the object was still dirty (written during the flush, or a cold flush).",
	 NULL, OFF(flush_partial)},
	{"tierd_flushed_bytes_total", "counter", "Dirty bytes written back to base.", NULL, OFF(flush_bytes)},
	{"tierd_evictions_total", "counter", "Evictions (objects dropped from the cache), by result.",
	 "result=\"ok\"", OFF(evictions)},
	{"tierd_evictions_total", 0, 0, "result=\"failed\"", OFF(evict_failed)},
	{"tierd_evicted_bytes_total", "counter", "Bytes dropped from the cache.", NULL, OFF(evict_bytes)},
	{"tierd_evictions_partial_total", "counter",
	 "Partial evictions (clean unreferenced extents of a victim dropped, the rest kept).", NULL,
	 OFF(evict_partial)},
	{"tierd_evicted_partial_bytes_total", "counter", "Bytes dropped by partial evictions.", NULL,
	 OFF(evict_partial_bytes)},
	{"tierd_evictions_again_total", "counter",
	 "Eviction victims given a second chance (their extents were referenced).", NULL, OFF(evict_again)},
	{"tierd_evictions_passed_total", "counter",
	 "All-dirty copies the clock passed over while flushes clean their cold extents.", NULL,
	 OFF(evict_pass)},
	{"tierd_load_probes_total", "counter",
	 "Objects looked up in the cache pool for a request while the image loaded its map.", NULL,
	 OFF(load_probes)},
	{"tierd_flushes_cold_total", "counter",
	 "Cold flushes (only the dirty extents not referenced since the clock looked).", NULL,
	 OFF(flush_cold)},
	{"tierd_cached_bytes", "gauge", "Bytes in the cache pool.", NULL, OFF(cached_bytes)},
	{"tierd_cached_objects", "gauge", "Objects in the cache pool.", NULL, OFF(cached_objects)},
	{"tierd_dirty_bytes", "gauge", "Bytes in the cache not yet flushed to base.", NULL, OFF(dirty_bytes)},
	{"tierd_dirty_objects", "gauge", "Objects in the cache not yet flushed to base.", NULL, OFF(dirty_objects)},
};

/* Engine-wide only. */
static const struct pfield engine_fields[] = {
	{"tierd_hitset_archives_total", "counter", "Hitsets archived into the cache pool.", NULL, OFF(hitset_archives)},
	{"tierd_cache_pool_failures_total", "counter",
	 "Cache pool failures that degraded the cache for a while.", NULL, OFF(cache_errors)},
	{"tierd_syncs_total", "counter", "Durability syncs, by result.", "result=\"ok\"", OFF(syncs)},
	{"tierd_syncs_total", 0, 0, "result=\"failed\"", OFF(sync_errors)},
	{"tierd_agent_skips_total", "counter", "Agent candidates skipped, by reason.",
	 "reason=\"busy\"", OFF(agent_skip_busy)},
	{"tierd_agent_skips_total", 0, 0, "reason=\"hot\"", OFF(agent_skip_hot)},
	{"tierd_agent_skips_total", 0, 0, "reason=\"young\"", OFF(agent_skip_young)},
	{"tierd_agent_turnovers_total", "counter",
	 "Phase changes after which a full cache turned over faster (more agent jobs).", NULL,
	 OFF(agent_turnovers)},
	{"tierd_agent_ops_in_flight", "gauge", "Agent flushes and evictions in flight.", NULL, OFF(agent_ops_in_flight)},
	{"tierd_requests_in_flight", "gauge", "Client requests in flight.", NULL, OFF(requests_in_flight)},
	{"tierd_agent_turnover", "gauge", "1 while a full cache turns over after a phase change.", NULL,
	 OFF(agent_turnover)},
};

/* Rows [i, end) of one family: all images for each row, grouped. */
static void put_fields(FILE *b, const struct pfield *f, size_t n, const struct tier_stats *st,
		       char *const *names, size_t n_img)
{
	for (size_t i = 0; i < n; i++) {
		if (f[i].type)
			family(b, f[i].name, f[i].type, f[i].help);
		if (!names)
			sample(b, f[i].name, NULL, f[i].labels, FIELD(&st[0], f[i].off));
		for (size_t k = 0; names && k < n_img; k++)
			sample(b, f[i].name, names[k], f[i].labels, FIELD(&st[k], f[i].off));
	}
}

/*
 * Latency histograms from the engine's quarter-octave buckets: bucket i
 * holds [2^(i/4), 2^((i+1)/4)) us, so le = 2^k us is the sum of the buckets
 * below 4k, exactly.  Bounds 16 us .. 16.8 s, every 4x.
 */
#define PROM_LE_MIN 4
#define PROM_LE_MAX 24
static void put_hist(FILE *b, const char *img, const char *op, const struct tier_lat_hist *h)
{
	char labels[64];
	uint64_t cum = 0;
	unsigned i = 0;

	for (unsigned k = PROM_LE_MIN; k <= PROM_LE_MAX; k += 2) {
		for (; i < 4 * k && i < TIER_LAT_BUCKETS; i++)
			cum += h->b[i];
		snprintf(labels, sizeof(labels), "op=\"%s\",le=\"%.6f\"", op, ldexp(1.0, (int)k) / 1e6);
		sample(b, "tierd_request_duration_seconds_bucket", img, labels, (double)cum);
	}
	snprintf(labels, sizeof(labels), "op=\"%s\",le=\"+Inf\"", op);
	sample(b, "tierd_request_duration_seconds_bucket", img, labels, (double)h->count);
	snprintf(labels, sizeof(labels), "op=\"%s\"", op);
	sample(b, "tierd_request_duration_seconds_sum", img, labels, (double)h->sum_us / 1e6);
	sample(b, "tierd_request_duration_seconds_count", img, labels, (double)h->count);
}

static void put_state(FILE *b, const char *name, const char *help, const char *const *states,
		      int n, int cur)
{
	char labels[64];

	family(b, name, "gauge", help);
	for (int i = 0; i < n; i++) {
		snprintf(labels, sizeof(labels), "state=\"%s\"", states[i]);
		sample(b, name, NULL, labels, i == cur);
	}
}

static void put_pools(FILE *b, struct tier_store *const pools[2])
{
	static const char *const roles[2] = {"base", "cache"};
	struct tier_store_stats ss[2];
	char labels[160];

	for (int w = 0; w < 2; w++)
		if (pools[w])
			tier_store_get_stats(pools[w], &ss[w]);
#define EACH_POOL for (int w = 0; w < 2; w++) if (pools[w])
#define EACH_OP for (int op = 1; op < TIER_STORE_OPCODE_MAX; op++)
#define OPNAME tier_store_opcode_name((enum tier_store_opcode)op)
	family(b, "tierd_pool_info", "gauge", "The pools: role (base or cache), name and backend.");
	EACH_POOL {
		FILE *l = fmemopen(labels, sizeof(labels), "w");
		if (!l)
			continue;
		fprintf(l, "pool=\"%s\",name=\"", roles[w]);
		put_label_value(l, tier_store_pool_name(pools[w]));
		fprintf(l, "\",backend=\"%s\"", tier_store_backend_name(pools[w]));
		fputc('\0', l);
		fclose(l);
		labels[sizeof(labels) - 1] = '\0';
		sample(b, "tierd_pool_info", NULL, labels, 1);
	}
	family(b, "tierd_pool_ops_total", "counter", "Store ops submitted to a pool, by op.");
	EACH_POOL EACH_OP {
		snprintf(labels, sizeof(labels), "pool=\"%s\",op=\"%s\"", roles[w], OPNAME);
		sample(b, "tierd_pool_ops_total", NULL, labels, (double)ss[w].ops[op]);
	}
	family(b, "tierd_pool_op_results_total", "counter",
	       "Store ops that did not succeed, by result: error (a failure), not_found (an absent "
	       "object: a miss, not an error), conflict (a guard or exclusive create said no).");
	EACH_POOL EACH_OP {
		static const char *const res[3] = {"error", "not_found", "conflict"};
		const uint64_t v[3] = {ss[w].errors[op], ss[w].not_found[op], ss[w].conflicts[op]};
		for (int r = 0; r < 3; r++) {
			snprintf(labels, sizeof(labels), "pool=\"%s\",op=\"%s\",result=\"%s\"",
				 roles[w], OPNAME, res[r]);
			sample(b, "tierd_pool_op_results_total", NULL, labels, (double)v[r]);
		}
	}
	family(b, "tierd_pool_bytes_total", "counter", "Bytes of store ops (read, write, zero), by op.");
	EACH_POOL EACH_OP {
		if (op != TIER_STORE_READ && op != TIER_STORE_WRITE && op != TIER_STORE_ZERO)
			continue;
		snprintf(labels, sizeof(labels), "pool=\"%s\",op=\"%s\"", roles[w], OPNAME);
		sample(b, "tierd_pool_bytes_total", NULL, labels, (double)ss[w].bytes[op]);
	}
	family(b, "tierd_pool_op_duration_seconds", "summary",
	       "Time from submit to completion of store ops, by op (no quantiles).");
	EACH_POOL EACH_OP {
		snprintf(labels, sizeof(labels), "pool=\"%s\",op=\"%s\"", roles[w], OPNAME);
		sample(b, "tierd_pool_op_duration_seconds_sum", NULL, labels,
		       (double)ss[w].lat_sum_ns[op] / 1e9);
		sample(b, "tierd_pool_op_duration_seconds_count", NULL, labels, (double)ss[w].ops[op]);
	}
	family(b, "tierd_pool_ops_in_flight", "gauge", "Store ops in flight.");
	EACH_POOL {
		snprintf(labels, sizeof(labels), "pool=\"%s\"", roles[w]);
		sample(b, "tierd_pool_ops_in_flight", NULL, labels, (double)tier_store_in_flight(pools[w]));
	}
	family(b, "tierd_pool_fs_syncs_total", "counter", "fsync and fdatasync calls (local backend).");
	EACH_POOL {
		snprintf(labels, sizeof(labels), "pool=\"%s\"", roles[w]);
		sample(b, "tierd_pool_fs_syncs_total", NULL, labels, (double)ss[w].syncs);
	}
	family(b, "tierd_pool_pending_ranges_total", "counter",
	       "Ordered-write ranges listed instead of synced, and what became of them (local backend).");
	EACH_POOL {
		static const char *const res[4] = {"listed", "settled", "kept", "dropped"};
		const uint64_t v[4] = {ss[w].pend_listed, ss[w].pend_settled, ss[w].pend_kept,
				       ss[w].pend_dropped};
		for (int r = 0; r < 4; r++) {
			snprintf(labels, sizeof(labels), "pool=\"%s\",result=\"%s\"", roles[w], res[r]);
			sample(b, "tierd_pool_pending_ranges_total", NULL, labels, (double)v[r]);
		}
	}
#undef EACH_POOL
#undef EACH_OP
#undef OPNAME
}

char *tierd_prom_render(struct tier_engine *e, struct tier_store *const pools[2], size_t *len)
{
	return tierd_prom_render2(e, pools, NULL, NULL, len);
}

char *tierd_prom_render2(struct tier_engine *e, struct tier_store *const pools[2],
			 tierd_prom_owner_fn owner, void *owner_arg, size_t *len)
{
	static const char *const kinds[TIER_LAT_KINDS] = { "read", "write", "other" };
	static const char *const fmodes[] = { "idle", "low", "high" };
	static const char *const emodes[] = { "idle", "some", "full" };
	struct tier_image *imgs[TIERD_MAX_IMAGES];
	struct tier_stats *st = NULL;   /* [0] the engine, [1..n] the images */
	char *names[TIERD_MAX_IMAGES], *out = NULL;
	size_t n = tier_engine_images(e, imgs, TIERD_MAX_IMAGES);
	const struct tier_params *p = tier_engine_params(e);
	FILE *b = NULL;

	if (n > TIERD_MAX_IMAGES)
		n = TIERD_MAX_IMAGES;
	st = calloc(n + 1, sizeof(*st));
	if (!st || !(b = open_memstream(&out, len))) {
		free(st);
		return NULL;
	}
	tier_engine_get_stats(e, &st[0]);
	for (size_t i = 0; i < n; i++) {
		tier_image_get_stats(imgs[i], &st[i + 1]);
		names[i] = (char *)tier_image_name(imgs[i]);
	}

	family(b, "tierd_build_info", "gauge", "tierd's version (the value is always 1).");
	sample(b, "tierd_build_info", NULL, "version=\"" TIER_VERSION "\"", 1);
	family(b, "tierd_image_size_bytes", "gauge", "Size of each image (export).");
	for (size_t i = 0; i < n; i++)
		sample(b, "tierd_image_size_bytes", names[i], NULL, (double)tier_image_size(imgs[i]));
	family(b, "tierd_image_state", "gauge", "Each image's state: 1 for the current one.");
	for (size_t i = 0; i < n; i++) {
		int r = tier_image_ready(imgs[i]);
		sample(b, "tierd_image_state", names[i], "state=\"ready\"", r == 1);
		sample(b, "tierd_image_state", names[i], "state=\"loading\"", r == 0);
		sample(b, "tierd_image_state", names[i], "state=\"failed\"", r < 0);
	}
	family(b, "tierd_image_read_only", "gauge", "1 if the image is served read-only.");
	for (size_t i = 0; i < n; i++)
		sample(b, "tierd_image_read_only", names[i], NULL, tier_image_read_only(imgs[i]));
	if (owner) {
		static const struct {
			const char *name, *type, *help;
		} own[] = {
			{ "tierd_image_owned", "gauge", "1 if this tierd holds the RBD image's lock "
			  "and serves it; 0 in standby, handing over or fenced." },
			{ "tierd_image_fenced", "gauge", "1 if the image is fenced in this tierd (its "
			  "lock is another's, or this client was blocklisted)." },
			{ "tierd_image_handoffs_total", "counter", "Times this tierd handed the image "
			  "over on request." },
			{ "tierd_image_takeovers_total", "counter", "Times this tierd took the image's "
			  "lock after start-up (handoffs asked for and fenced takeovers)." },
		};
		struct tierd_own_info oi;

		for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++) {
			family(b, own[k].name, own[k].type, own[k].help);
			for (size_t i = 0; i < n; i++) {
				double v[4];

				if (owner(owner_arg, names[i], &oi) < 0)
					continue;
				v[0] = oi.state == TIERD_OWN_OWNED;
				v[1] = oi.state == TIERD_OWN_FENCED;
				v[2] = (double)oi.handoffs;
				v[3] = (double)oi.takeovers;
				sample(b, own[k].name, names[i], NULL, v[k]);
			}
		}
	}

	put_fields(b, image_fields, sizeof(image_fields) / sizeof(image_fields[0]), st + 1, names, n);
	family(b, "tierd_request_duration_seconds", "histogram",
	       "Client request latency, from arrival to answer, by operation (other: trim, "
	       "write_zeroes, flush, cache).");
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < TIER_LAT_KINDS; k++)
			put_hist(b, names[i], kinds[k], &st[i + 1].lat[k]);

	put_fields(b, engine_fields, sizeof(engine_fields) / sizeof(engine_fields[0]), st, NULL, 0);
	put_state(b, "tierd_agent_flush_mode", "The agent's flush mode: 1 for the current one.",
		  fmodes, 3, (int)st[0].flush_mode);
	put_state(b, "tierd_agent_evict_mode", "The agent's evict mode: 1 for the current one.",
		  emodes, 3, (int)st[0].evict_mode);
	family(b, "tierd_agent_evict_effort_ratio", "gauge", "The agent's eviction effort, 0 to 1.");
	sample(b, "tierd_agent_evict_effort_ratio", NULL, NULL, (double)st[0].evict_effort_pct / 100);
	family(b, "tierd_dirty_ratio", "gauge",
	       "Dirty data over the cache target (target_max_bytes or objects), 0 to 1 and over.");
	sample(b, "tierd_dirty_ratio", NULL, NULL, (double)st[0].dirty_ratio_ppm / 1e6);
	family(b, "tierd_full_ratio", "gauge",
	       "Cached data over the cache target (target_max_bytes or objects), 0 to 1 and over.");
	sample(b, "tierd_full_ratio", NULL, NULL, (double)st[0].full_ratio_ppm / 1e6);
	family(b, "tierd_target_max_bytes", "gauge", "The cache target in bytes (0: none).");
	sample(b, "tierd_target_max_bytes", NULL, NULL, (double)p->target_max_bytes);
	family(b, "tierd_target_max_objects", "gauge", "The cache target in objects (0: none).");
	sample(b, "tierd_target_max_objects", NULL, NULL, (double)p->target_max_objects);
	put_pools(b, pools);
	free(st);
	if (ferror(b) | fclose(b)) {
		free(out);
		return NULL;
	}
	return out;
}

static void maybe_free(struct tierd_prom *p)
{
	if (p->stopping && !p->listener_open && !p->conns)
		free(p);
}

static void conn_closed(uv_handle_t *h)
{
	struct prom_conn *c = h->data;
	struct tierd_prom *p = c->p;

	if (--c->handles)
		return;
	p->n_conns--;
	if (c->prev)
		c->prev->next = c->next;
	else
		p->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c->resp);
	free(c);
	maybe_free(p);
}

static void conn_close(struct prom_conn *c)
{
	if (uv_is_closing((uv_handle_t *)&c->h))
		return;
	if (c->handles == 2)
		uv_close((uv_handle_t *)&c->timer, conn_closed);
	uv_close((uv_handle_t *)&c->h, conn_closed);
}

static void on_deadline(uv_timer_t *t)
{
	conn_close(t->data);
}

static void on_written(uv_write_t *wr, int status)
{
	(void)status;
	conn_close(wr->data);
}

/*
 * The request line: 0 for GET /metrics (a query string allowed), else the
 * HTTP status to answer with.
 */
static int check_request(const char *req)
{
	const char *sp1 = strchr(req, ' '), *sp2, *eol = strpbrk(req, "\r\n");
	size_t plen;

	if (!sp1 || !eol || sp1 > eol || !(sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1))) ||
	    strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || sp1 == req)
		return 400;
	if ((size_t)(sp1 - req) != 3 || memcmp(req, "GET", 3) != 0)
		return 405;
	plen = strcspn(sp1 + 1, "? ");
	if (plen != 8 || memcmp(sp1 + 1, "/metrics", 8) != 0)
		return 404;
	return 0;
}

static void answer(struct prom_conn *c)
{
	struct tier_engine *e = c->p->engine(c->p->arg);
	struct tier_store *pools[2] = {NULL, NULL};
	char *body = NULL, head[256];
	size_t blen = 0;
	int hlen, status = check_request(c->req);
	uv_buf_t buf;

	c->answered = 1;
	uv_read_stop((uv_stream_t *)&c->h);
	for (int w = 0; w < 2 && c->p->store; w++)
		pools[w] = c->p->store(c->p->arg, w);
	if (status == 0)
		body = e ? tierd_prom_render2(e, pools, c->p->owner, c->p->arg, &blen) : NULL;
	if (status) {
		static const char *const why[] = {[0] = "Bad Request", [1] = "Not Found",
						  [2] = "Method Not Allowed"};
		const char *msg = why[status == 400 ? 0 : status == 404 ? 1 : 2];
		hlen = snprintf(head, sizeof(head),
				"HTTP/1.0 %d %s\r\n%sContent-Type: text/plain\r\n"
				"Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
				status, msg, status == 405 ? "Allow: GET\r\n" : "",
				strlen(msg) + 1, msg);
		blen = 0;
	} else if (!body) {
		hlen = snprintf(head, sizeof(head),
				"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
		blen = 0;
	} else {
		hlen = snprintf(head, sizeof(head),
				"HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
				"Content-Length: %zu\r\nConnection: close\r\n\r\n", blen);
	}
	c->resp = malloc((size_t)hlen + blen);
	if (!c->resp) {
		free(body);
		conn_close(c);
		return;
	}
	memcpy(c->resp, head, (size_t)hlen);
	if (blen)
		memcpy(c->resp + hlen, body, blen);
	free(body);
	buf = uv_buf_init(c->resp, (unsigned)((size_t)hlen + blen));
	c->wr.data = c;
	if (uv_write(&c->wr, (uv_stream_t *)&c->h, &buf, 1, on_written) < 0)
		conn_close(c);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct prom_conn *c = h->data;
	(void)hint;

	*buf = uv_buf_init(c->req + c->got, (unsigned)(sizeof(c->req) - 1 - c->got));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct prom_conn *c = s->data;
	(void)buf;

	if (n < 0) {
		conn_close(c);
		return;
	}
	c->got += (size_t)n;
	c->req[c->got] = '\0';
	/* the end of the request head, or a head too large to be a scrape */
	if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n"))
		answer(c);
	else if (c->got >= sizeof(c->req) - 1)
		conn_close(c);
}

static void on_connection(uv_stream_t *server, int status)
{
	struct tierd_prom *p = server->data;
	struct prom_conn *c;

	if (status < 0 || p->stopping)
		return;
	c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->p = p;
	uv_tcp_init(p->loop, &c->h);
	c->h.data = c;
	c->handles = 1;
	c->next = p->conns;
	if (p->conns)
		p->conns->prev = c;
	p->conns = c;
	p->n_conns++;
	if (uv_accept(server, (uv_stream_t *)&c->h) < 0 || p->n_conns > PROM_MAX_CONNS) {
		conn_close(c);
		return;
	}
	uv_timer_init(p->loop, &c->timer);
	c->timer.data = c;
	c->handles = 2;
	uv_timer_start(&c->timer, on_deadline, p->timeout_ms, 0);
	if (uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read) < 0)
		conn_close(c);
}

static void listener_closed(uv_handle_t *h);

static int parse_addr(const char *addr, struct sockaddr_storage *ss)
{
	char host[256];
	const char *colon = strrchr(addr, ':');
	char *end;
	long port;
	size_t hl;

	if (!colon)
		return -EINVAL;
	port = strtol(colon + 1, &end, 10);
	if (*end || port <= 0 || port > 65535)
		return -EINVAL;
	hl = (size_t)(colon - addr);
	if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
		addr++;
		hl -= 2;
	}
	if (hl == 0 || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, addr, hl);
	host[hl] = '\0';
	if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0 ||
	    uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) == 0)
		return 0;
	return -EINVAL;
}

int tierd_prom_start(uv_loop_t *loop, const char *addr,
		     struct tier_engine *(*engine)(void *arg),
		     struct tier_store *(*store)(void *arg, int which), void *arg,
		     struct tierd_prom **out)
{
	struct sockaddr_storage ss;
	struct tierd_prom *p = NULL;
	int rc;

	*out = NULL;
	memset(&ss, 0, sizeof(ss));
	rc = parse_addr(addr, &ss);
	if (rc < 0)
		return rc;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->loop = loop;
	p->timeout_ms = PROM_DEFAULT_TIMEOUT_MS;
	p->engine = engine;
	p->store = store;
	p->arg = arg;
	uv_tcp_init(loop, &p->listener);
	p->listener.data = p;
	p->listener_open = 1;
	rc = uv_tcp_bind(&p->listener, (const struct sockaddr *)&ss, 0);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&p->listener, 16, on_connection);
	if (rc < 0) {
		tierd_prom_stop(p);
		return rc;
	}
	*out = p;
	return 0;
}

static void listener_closed(uv_handle_t *h)
{
	struct tierd_prom *p = h->data;

	p->listener_open = 0;
	maybe_free(p);
}

void tierd_prom_set_owner(struct tierd_prom *p, tierd_prom_owner_fn owner)
{
	if (p)
		p->owner = owner;
}

void tierd_prom_set_timeout(struct tierd_prom *p, uint64_t ms)
{
	if (p)
		p->timeout_ms = ms ? ms : PROM_DEFAULT_TIMEOUT_MS;
}

void tierd_prom_stop(struct tierd_prom *p)
{
	if (!p)
		return;
	p->stopping = 1;
	for (struct prom_conn *c = p->conns; c; c = c->next)
		conn_close(c);
	uv_close((uv_handle_t *)&p->listener, listener_closed);
}
