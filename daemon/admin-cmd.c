/* SPDX-License-Identifier: MIT */
/*
 * admin-cmd.c - the admin socket's commands and their JSON answers.  It
 * decides how counters, parameters and images are shown and how a `config
 * set` is validated before it reaches the daemon (copy the live parameters,
 * set, check, refuse keys that cannot change live).  Flush, evict and promote
 * are only started here: it must never wait for them, and never change engine
 * state except through the engine's API and the daemon's hooks.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/admin-internal.h"

#define MAX_ARGS 16
/* short names inside this file */
#define jb_printf tierd_admin_jb_printf
#define jb_error tierd_admin_jb_error

/* ---- JSON text ---- */

static void jb_vprintf(struct jbuf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	int n;

	if (b->oom)
		return;
	va_copy(ap2, ap);
	n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap2);
	va_end(ap2);
	if (n < 0) {
		b->oom = true;
		return;
	}
	if (!b->p || b->len + (size_t)n + 2 > b->cap) {   /* room for "\n\0" */
		size_t cap = (b->cap ? b->cap : 1024);
		while (cap < b->len + (size_t)n + 2)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (!np) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = cap;
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	}
	b->len += (size_t)n;
}

void tierd_admin_jb_printf(struct jbuf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	jb_vprintf(b, fmt, ap);
	va_end(ap);
}

static void jb_str(struct jbuf *b, const char *s)
{
	jb_printf(b, "\"");
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			jb_printf(b, "\\%c", ch);
		else if (ch == '\n')
			jb_printf(b, "\\n");
		else if (ch < 0x20)
			jb_printf(b, "\\u%04x", ch);
		else
			jb_printf(b, "%c", ch);
	}
	jb_printf(b, "\"");
}

/* "key": value, with a comma unless first */
static void jb_key(struct jbuf *b, bool *first, const char *key)
{
	jb_printf(b, "%s", *first ? "" : ", ");
	*first = false;
	jb_str(b, key);
	jb_printf(b, ": ");
}

static void jb_u64(struct jbuf *b, bool *first, const char *key, uint64_t v)
{
	jb_key(b, first, key);
	jb_printf(b, "%llu", (unsigned long long)v);
}

static void jb_ratio(struct jbuf *b, bool *first, const char *key, uint64_t num, uint64_t den)
{
	jb_key(b, first, key);
	if (den == 0)
		jb_printf(b, "null");
	else
		jb_printf(b, "%.4f", (double)num / (double)den);
}

void tierd_admin_jb_error(struct jbuf *b, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	b->len = 0;
	jb_printf(b, "{\"error\": ");
	jb_str(b, msg);
	jb_printf(b, "}");
}

/* ---- commands ---- */

struct cmd_ctx {
	struct tierd_admin *a;
	struct tier_engine *e;
	int argc;
	char **argv;
	struct jbuf *out;
};

static bool need_engine(struct cmd_ctx *c)
{
	if (!c->e)
		jb_error(c->out, "engine not running");
	return c->e != NULL;
}

static uint64_t now_ms(struct tierd_admin *a)
{
	return uv_now(a->loop);
}

static void rate_take(struct tierd_admin *a, const struct tier_stats *s)
{
	struct rate_sample *r = &a->rate[a->rate_head];

	r->t_ms = now_ms(a);
	r->read_ops = s->read_ops;
	r->write_ops = s->write_ops;
	r->read_bytes = s->read_bytes;
	r->write_bytes = s->write_bytes;
	a->rate_head = (a->rate_head + 1) % RATE_SAMPLES;
	if (a->rate_n < RATE_SAMPLES)
		a->rate_n++;
}

void tierd_admin_sample_rate(struct tierd_admin *a)
{
	struct tier_engine *e = a->hooks.engine ? a->hooks.engine(a->hooks.arg) : NULL;
	struct tier_stats *s;

	if (!e)
		return;
	s = malloc(sizeof(*s));
	if (!s)
		return;
	tier_engine_get_stats(e, s);
	rate_take(a, s);
	free(s);
}

static void put_throughput(struct tierd_admin *a, const struct tier_stats *s, struct jbuf *b,
			   bool *first)
{
	const struct rate_sample *old;
	double dt;
	bool f = true;

	jb_key(b, first, "throughput");
	jb_printf(b, "{");
	if (a->rate_n == 0) {
		jb_printf(b, "}");
		return;
	}
	old = &a->rate[(a->rate_head + RATE_SAMPLES - a->rate_n) % RATE_SAMPLES];
	dt = (double)(now_ms(a) - old->t_ms) / 1000.0;
	if (dt < 0.5) {
		jb_printf(b, "}");
		return;
	}
	jb_key(b, &f, "window_s");
	jb_printf(b, "%.1f", dt);
	jb_key(b, &f, "read_iops");
	jb_printf(b, "%.1f", (double)(s->read_ops - old->read_ops) / dt);
	jb_key(b, &f, "write_iops");
	jb_printf(b, "%.1f", (double)(s->write_ops - old->write_ops) / dt);
	jb_key(b, &f, "read_bytes_sec");
	jb_printf(b, "%.0f", (double)(s->read_bytes - old->read_bytes) / dt);
	jb_key(b, &f, "write_bytes_sec");
	jb_printf(b, "%.0f", (double)(s->write_bytes - old->write_bytes) / dt);
	jb_printf(b, "}");
}

static const char *const lat_names[TIER_LAT_KINDS] = {"read", "write", "other"};

static void put_latency(const struct tier_stats *s, struct jbuf *b, bool *first, bool full)
{
	bool f = true;

	jb_key(b, first, "latency_us");
	jb_printf(b, "{");
	for (int k = 0; k < TIER_LAT_KINDS; k++) {
		const struct tier_lat_hist *h = &s->lat[k];
		bool g = true;
		jb_key(b, &f, lat_names[k]);
		jb_printf(b, "{");
		if (full) {
			jb_u64(b, &g, "count", h->count);
			jb_u64(b, &g, "avg", h->count ? h->sum_us / h->count : 0);
			jb_u64(b, &g, "max", h->max_us);
		}
		jb_u64(b, &g, "p50", h->count ? tier_lat_quantile(h, 0.50) : 0);
		jb_u64(b, &g, "p99", h->count ? tier_lat_quantile(h, 0.99) : 0);
		jb_u64(b, &g, "p999", h->count ? tier_lat_quantile(h, 0.999) : 0);
		jb_printf(b, "}");
	}
	jb_printf(b, "}");
}

static void put_ops(const struct tier_stats *s, struct jbuf *b, bool *first)
{
	bool f = true;

	jb_key(b, first, "ops");
	jb_printf(b, "{");
	jb_u64(b, &f, "read", s->read_ops);
	jb_u64(b, &f, "write", s->write_ops);
	jb_u64(b, &f, "trim", s->trim_ops);
	jb_u64(b, &f, "write_zeroes", s->zero_ops);
	jb_u64(b, &f, "flush", s->flush_ops);
	jb_u64(b, &f, "cache", s->cache_ops);
	jb_printf(b, "}");
	f = true;
	jb_key(b, first, "bytes");
	jb_printf(b, "{");
	jb_u64(b, &f, "read", s->read_bytes);
	jb_u64(b, &f, "write", s->write_bytes);
	jb_u64(b, &f, "trim", s->trim_bytes);
	jb_u64(b, &f, "write_zeroes", s->zero_bytes);
	jb_printf(b, "}");
}

static void cmd_status(struct cmd_ctx *c)
{
	struct tier_image *imgs[TIERD_MAX_IMAGES];
	const struct tier_params *p;
	struct tier_stats *s;
	struct jbuf *b = c->out;
	char mode[32];
	bool first = true;

	if (!need_engine(c))
		return;
	s = malloc(sizeof(*s));
	if (!s) {
		jb_error(b, "out of memory");
		return;
	}
	tier_engine_get_stats(c->e, s);
	p = tier_engine_params(c->e);
	tier_params_get(p, "cache_mode", mode, sizeof(mode));
	jb_printf(b, "{");
	jb_u64(b, &first, "images", tier_engine_images(c->e, imgs, TIERD_MAX_IMAGES));
	jb_key(b, &first, "cache_mode");
	jb_str(b, mode);
	jb_ratio(b, &first, "read_hit_ratio", s->read_hits, s->read_hits + s->read_misses);
	jb_ratio(b, &first, "write_hit_ratio", s->write_hits, s->write_hits + s->write_misses);
	jb_ratio(b, &first, "dirty_ratio", s->dirty_ratio_ppm, 1000000);
	jb_ratio(b, &first, "full_ratio", s->full_ratio_ppm, 1000000);
	jb_key(b, &first, "flush_mode");
	jb_str(b, tier_flush_mode_name((int)s->flush_mode));
	jb_key(b, &first, "evict_mode");
	jb_str(b, tier_evict_mode_name((int)s->evict_mode));
	jb_u64(b, &first, "evict_effort_pct", s->evict_effort_pct);
	jb_u64(b, &first, "target_max_bytes", p->target_max_bytes);
	jb_u64(b, &first, "target_max_objects", p->target_max_objects);
#define STATUS_FIELD(n) jb_u64(b, &first, #n, s->n);
	STATUS_FIELD(cached_bytes) STATUS_FIELD(cached_objects)
	STATUS_FIELD(dirty_bytes) STATUS_FIELD(dirty_objects)
	STATUS_FIELD(promotions) STATUS_FIELD(promote_bytes)
	STATUS_FIELD(promote_throttled) STATUS_FIELD(promote_failed)
	STATUS_FIELD(proxy_reads) STATUS_FIELD(proxy_read_bytes)
	STATUS_FIELD(proxy_writes) STATUS_FIELD(proxy_write_bytes)
	STATUS_FIELD(flushes) STATUS_FIELD(flush_bytes) STATUS_FIELD(flush_failed)
	STATUS_FIELD(evictions) STATUS_FIELD(evict_bytes) STATUS_FIELD(evict_failed)
	STATUS_FIELD(requests_in_flight) STATUS_FIELD(agent_ops_in_flight) STATUS_FIELD(errors)
#undef STATUS_FIELD
	put_ops(s, b, &first);
	put_throughput(c->a, s, b, &first);
	put_latency(s, b, &first, false);
	jb_printf(b, "}");
	free(s);
}

static void put_pool(struct tier_store *st, const char *role, struct jbuf *b, bool *first)
{
	struct tier_store_stats ss;
	bool f = true;

	tier_store_get_stats(st, &ss);
	jb_key(b, first, role);
	jb_printf(b, "{");
	jb_key(b, &f, "pool");
	jb_str(b, tier_store_pool_name(st));
	jb_key(b, &f, "backend");
	jb_str(b, tier_store_backend_name(st));
	jb_u64(b, &f, "in_flight", tier_store_in_flight(st));
	jb_u64(b, &f, "faults_injected", ss.faults_injected);
	jb_u64(b, &f, "syncs", ss.syncs);
	jb_u64(b, &f, "pending_listed", ss.pend_listed);
	jb_u64(b, &f, "pending_settled", ss.pend_settled);
	jb_u64(b, &f, "pending_kept", ss.pend_kept);
	jb_u64(b, &f, "pending_dropped", ss.pend_dropped);
	for (int op = 0; op < TIER_STORE_OPCODE_MAX; op++) {
		bool g = true;
		jb_key(b, &f, tier_store_opcode_name((enum tier_store_opcode)op));
		jb_printf(b, "{");
		jb_u64(b, &g, "ops", ss.ops[op]);
		jb_u64(b, &g, "bytes", ss.bytes[op]);
		jb_u64(b, &g, "errors", ss.errors[op]);
		jb_u64(b, &g, "not_found", ss.not_found[op]);
		jb_u64(b, &g, "conflicts", ss.conflicts[op]);
		jb_u64(b, &g, "avg_latency_us", ss.ops[op] ? ss.lat_sum_ns[op] / ss.ops[op] / 1000 : 0);
		jb_printf(b, "}");
	}
	jb_printf(b, "}");
}

static void cmd_perf_dump(struct cmd_ctx *c)
{
	struct tier_stats *s;
	struct jbuf *b = c->out;
	bool first = true, f = true;

	if (!need_engine(c))
		return;
	s = malloc(sizeof(*s));
	if (!s) {
		jb_error(b, "out of memory");
		return;
	}
	tier_engine_get_stats(c->e, s);
	jb_printf(b, "{");
	jb_key(b, &first, "counters");
	jb_printf(b, "{");
#define PERF_FIELD(n) jb_u64(b, &f, #n, s->n);
	TIER_COUNTERS(PERF_FIELD)
	jb_printf(b, "}");
	f = true;
	jb_key(b, &first, "gauges");
	jb_printf(b, "{");
	TIER_GAUGES(PERF_FIELD)
#undef PERF_FIELD
	jb_printf(b, "}");
	put_latency(s, b, &first, true);
	jb_u64(b, &first, "engine_bytes_per_object", tier_engine_bytes_per_object(c->e));
	if (c->a->hooks.store) {
		struct tier_store *base = c->a->hooks.store(c->a->hooks.arg, 0);
		struct tier_store *cache = c->a->hooks.store(c->a->hooks.arg, 1);
		f = true;
		jb_key(b, &first, "pools");
		jb_printf(b, "{");
		if (base)
			put_pool(base, "base", b, &f);
		if (cache)
			put_pool(cache, "cache", b, &f);
		jb_printf(b, "}");
	}
	jb_printf(b, "}");
	free(s);
}

/* Live parameters: the engine's, else the loaded config's. */
static const struct tier_params *current_params(struct cmd_ctx *c)
{
	const struct tierd_config *cfg;

	if (c->e)
		return tier_engine_params(c->e);
	cfg = c->a->hooks.config ? c->a->hooks.config(c->a->hooks.arg) : NULL;
	return cfg ? &cfg->tier : NULL;
}

struct show_ctx {
	struct jbuf *b;
	bool first;
};

static void show_one(void *arg, const char *key, const char *value)
{
	struct show_ctx *s = arg;

	jb_key(s->b, &s->first, key);
	jb_str(s->b, value);
}

static void cmd_config_show(struct cmd_ctx *c)
{
	const struct tier_params *p = current_params(c);
	struct show_ctx s = {c->out, true};

	if (!p) {
		jb_error(c->out, "no configuration loaded");
		return;
	}
	jb_printf(c->out, "{");
	tier_params_foreach(p, show_one, &s);
	jb_printf(c->out, "}");
}

static void cmd_config_get(struct cmd_ctx *c)
{
	const struct tier_params *p = current_params(c);
	char v[64];

	if (c->argc != 3) {
		jb_error(c->out, "usage: config get KEY");
		return;
	}
	if (!p) {
		jb_error(c->out, "no configuration loaded");
		return;
	}
	if (tier_params_get(p, c->argv[2], v, sizeof(v)) < 0) {
		jb_error(c->out, "unknown tier parameter '%s' (see: config show)", c->argv[2]);
		return;
	}
	jb_printf(c->out, "{");
	jb_str(c->out, c->argv[2]);
	jb_printf(c->out, ": ");
	jb_str(c->out, v);
	jb_printf(c->out, "}");
}

static void cmd_config_set(struct cmd_ctx *c)
{
	const struct tierd_admin_hooks *h = &c->a->hooks;
	struct tier_params p;
	char msg[1024], v[64];
	const char *key;

	if (c->argc != 4) {
		jb_error(c->out, "usage: config set KEY VALUE");
		return;
	}
	if (!need_engine(c))
		return;
	key = c->argv[2];
	p = *tier_engine_params(c->e);
	if (tier_params_set(&p, key, c->argv[3], msg, sizeof(msg)) < 0) {
		jb_error(c->out, "%s: %s", key, msg);
		return;
	}
	if (tier_params_is_live(key) != 1) {
		jb_error(c->out, "%s cannot change on a running daemon: set it in the config file and restart",
			 key);
		return;
	}
	if (tier_params_check(&p, msg, sizeof(msg)) < 0) {
		jb_error(c->out, "%s", msg);
		return;
	}
	if (!h->set_params) {
		jb_error(c->out, "live tuning not supported by this daemon");
		return;
	}
	msg[0] = '\0';
	int r = h->set_params(h->arg, &p, msg, sizeof(msg));
	if (r < 0) {
		jb_error(c->out, "%s", msg[0] ? msg : strerror(-r));
		return;
	}
	tier_params_get(tier_engine_params(c->e), key, v, sizeof(v));
	jb_printf(c->out, "{\"ok\": true, ");
	jb_str(c->out, key);
	jb_printf(c->out, ": ");
	jb_str(c->out, v);
	jb_printf(c->out, ", \"persisted\": false}");
}

static void cmd_reload(struct cmd_ctx *c)
{
	char msg[1024] = "";
	int r;

	if (!c->a->hooks.reload) {
		jb_error(c->out, "reload not supported by this daemon");
		return;
	}
	r = c->a->hooks.reload(c->a->hooks.arg, msg, sizeof(msg));
	if (r < 0) {
		jb_error(c->out, "%s", msg[0] ? msg : strerror(-r));
		return;
	}
	/* applied, except the keys named here: they wait for a restart */
	jb_printf(c->out, "{\"ok\": true, \"restart_pending\": [");
	for (char *p = msg, *q; *p; p = q) {
		q = strchr(p, ',');
		if (q)
			*q++ = '\0';
		else
			q = p + strlen(p);
		jb_printf(c->out, "%s", p == msg ? "" : ", ");
		jb_str(c->out, p);
	}
	jb_printf(c->out, "]}");
}

/* "--image NAME" (or none): 0 and *img (NULL = all), or an error written. */
static int image_opt(struct cmd_ctx *c, int from, struct tier_image **img)
{
	*img = NULL;
	if (c->argc == from)
		return 0;
	if (c->argc != from + 2 || strcmp(c->argv[from], "--image") != 0) {
		jb_error(c->out, "usage: %s [--image NAME]", c->argv[0]);
		return -EINVAL;
	}
	*img = tier_engine_find_image(c->e, c->argv[from + 1]);
	if (!*img) {
		jb_error(c->out, "no such image '%s'", c->argv[from + 1]);
		return -ENOENT;
	}
	return 0;
}

static void cmd_flush_evict(struct cmd_ctx *c)
{
	bool evict = strcmp(c->argv[0], "evict") == 0;
	struct tier_image *img;
	struct tier_stats *s;
	bool first = true;
	int r;

	if (!need_engine(c) || image_opt(c, 1, &img) < 0)
		return;
	r = evict ? tier_engine_evict_all(c->e, img) : tier_engine_flush_all(c->e, img);
	if (r < 0) {
		jb_error(c->out, "%s failed: %s", c->argv[0], strerror(-r));
		return;
	}
	s = malloc(sizeof(*s));
	if (!s) {
		jb_error(c->out, "out of memory");
		return;
	}
	tier_engine_get_stats(c->e, s);
	jb_printf(c->out, "{\"ok\": true, \"started\": ");
	jb_str(c->out, c->argv[0]);
	first = false;
	jb_u64(c->out, &first, "dirty_bytes", s->dirty_bytes);
	jb_u64(c->out, &first, "dirty_objects", s->dirty_objects);
	jb_u64(c->out, &first, "cached_bytes", s->cached_bytes);
	jb_u64(c->out, &first, "cached_objects", s->cached_objects);
	jb_printf(c->out, "}");
	free(s);
}

static void cmd_promote(struct cmd_ctx *c)
{
	struct tier_image *img;
	uint64_t off, len;
	int r;

	if (c->argc != 4) {
		jb_error(c->out, "usage: promote IMAGE OFFSET LENGTH (units K/M/G/T)");
		return;
	}
	if (!need_engine(c))
		return;
	img = tier_engine_find_image(c->e, c->argv[1]);
	if (!img) {
		jb_error(c->out, "no such image '%s'", c->argv[1]);
		return;
	}
	if (tier_parse_bytes(c->argv[2], &off) < 0 || tier_parse_bytes(c->argv[3], &len) < 0 ||
	    len == 0) {
		jb_error(c->out, "bad offset or length (allowed: bytes with K/M/G/T, length > 0)");
		return;
	}
	r = tier_engine_promote(c->e, img, off, len);
	if (r < 0) {
		jb_error(c->out, "promote failed: %s", strerror(-r));
		return;
	}
	jb_printf(c->out, "{\"ok\": true, \"offset\": %llu, \"length\": %llu}",
		  (unsigned long long)off, (unsigned long long)len);
}

/* One hitset as a JSON object; the field order and number formats are the interface. */
static void jb_hitset(struct jbuf *b, const struct tier_hitset_info *h, bool first)
{
	double fill = (double)h->bits_set / (double)h->bits;

	jb_printf(b, "%s{\"set\":", first ? "" : ",");
	if (h->set < 0)
		jb_printf(b, "\"current\",\"start_ms\":%llu,\"end_ms\":null",
			  (unsigned long long)h->start_ms);
	else
		jb_printf(b, "%d,\"start_ms\":%llu,\"end_ms\":%llu", h->set,
			  (unsigned long long)h->start_ms, (unsigned long long)h->end_ms);
	jb_printf(b, ",\"inserts\":%llu,\"unique\":%llu,\"capacity\":%llu,\"bits\":%llu,"
		  "\"k\":%u,\"fpp\":%g,\"fill\":%.4f,\"est_fpp\":%.3g}",
		  (unsigned long long)h->inserts, (unsigned long long)h->unique,
		  (unsigned long long)h->capacity, (unsigned long long)h->bits, h->k,
		  h->fpp, fill, pow(fill, (double)h->k));
}

static void cmd_hitset_dump(struct cmd_ctx *c)
{
	struct tier_hitset_info sets[TIER_HITSET_MAX_SETS];
	int n;

	if (!need_engine(c))
		return;
	n = tier_engine_hitset_info(c->e, sets, TIER_HITSET_MAX_SETS);
	if (n < 0) {
		jb_error(c->out, "hitset summary unavailable");
		return;
	}
	if ((size_t)n > TIER_HITSET_MAX_SETS)
		n = TIER_HITSET_MAX_SETS;
	jb_printf(c->out, "{\"hitsets\": [");   /* answers are always objects */
	for (int i = 0; i < n; i++)
		jb_hitset(c->out, &sets[i], i == 0);
	jb_printf(c->out, "]}");
}

static void cmd_images(struct cmd_ctx *c)
{
	const struct tierd_config *cfg = c->a->hooks.config ? c->a->hooks.config(c->a->hooks.arg) : NULL;
	struct tier_image *imgs[TIERD_MAX_IMAGES];
	size_t n;
	bool first_img = true;

	if (!need_engine(c))
		return;
	n = tier_engine_images(c->e, imgs, TIERD_MAX_IMAGES);
	if (n > TIERD_MAX_IMAGES)
		n = TIERD_MAX_IMAGES;
	jb_printf(c->out, "{\"images\": [");
	for (size_t i = 0; i < n; i++) {
		int ready = tier_image_ready(imgs[i]);
		bool f = true, ro = tier_image_read_only(imgs[i]), in_cfg = !cfg;
		if (cfg)
			for (size_t k = 0; k < cfg->n_images; k++)
				if (!strcmp(cfg->images[k].name, tier_image_name(imgs[i])))
					in_cfg = true;
		jb_printf(c->out, "%s{", first_img ? "" : ", ");
		first_img = false;
		jb_key(c->out, &f, "name");
		jb_str(c->out, tier_image_name(imgs[i]));
		jb_u64(c->out, &f, "size", tier_image_size(imgs[i]));
		jb_key(c->out, &f, "ready");
		jb_printf(c->out, "%s", ready == 1 ? "true" : "false");
		jb_key(c->out, &f, "state");
		jb_str(c->out, ready == 1 ? "ready" : ready == 0 ? "loading" : strerror(-ready));
		jb_key(c->out, &f, "read_only");
		jb_printf(c->out, "%s", ro ? "true" : "false");
		/* false: removed from the config file, served until the next restart */
		jb_key(c->out, &f, "in_config");
		jb_printf(c->out, "%s", in_cfg ? "true" : "false");
		jb_printf(c->out, "}");
	}
	jb_printf(c->out, "]}");
}

struct command {
	const char *w1, *w2;   /* w2 NULL: one-word command */
	void (*fn)(struct cmd_ctx *c);
	const char *usage;
};

static void cmd_help(struct cmd_ctx *c);

static const struct command commands[] = {
	{"status", NULL, cmd_status, "status"},
	{"perf", "dump", cmd_perf_dump, "perf dump"},
	{"config", "show", cmd_config_show, "config show"},
	{"config", "get", cmd_config_get, "config get KEY"},
	{"config", "set", cmd_config_set, "config set KEY VALUE"},
	{"reload", NULL, cmd_reload, "reload"},
	{"flush", NULL, cmd_flush_evict, "flush [--image NAME]"},
	{"evict", NULL, cmd_flush_evict, "evict [--image NAME]"},
	{"promote", NULL, cmd_promote, "promote IMAGE OFFSET LENGTH"},
	{"hitset", "dump", cmd_hitset_dump, "hitset dump"},
	{"images", NULL, cmd_images, "images"},
	{"help", NULL, cmd_help, "help"},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void cmd_help(struct cmd_ctx *c)
{
	jb_printf(c->out, "{\"commands\": [");
	for (size_t i = 0; i < N_COMMANDS; i++) {
		jb_printf(c->out, "%s", i ? ", " : "");
		jb_str(c->out, commands[i].usage);
	}
	jb_printf(c->out, "]}");
}

void tierd_admin_run_line(struct tierd_admin *a, char *line, struct jbuf *out)
{
	char *argv[MAX_ARGS], *save = NULL, *tok;
	struct cmd_ctx c = {.a = a, .argv = argv, .out = out};

	for (tok = strtok_r(line, " \t\r", &save); tok && c.argc < MAX_ARGS;
	     tok = strtok_r(NULL, " \t\r", &save))
		argv[c.argc++] = tok;
	if (c.argc == 0) {
		jb_error(out, "empty command (try: help)");
		return;
	}
	c.e = a->hooks.engine ? a->hooks.engine(a->hooks.arg) : NULL;
	for (size_t i = 0; i < N_COMMANDS; i++) {
		const struct command *k = &commands[i];
		if (strcmp(argv[0], k->w1) != 0)
			continue;
		if (k->w2 && (c.argc < 2 || strcmp(argv[1], k->w2) != 0))
			continue;
		if (!k->w2 && (k->fn == cmd_status || k->fn == cmd_reload ||
			       k->fn == cmd_images || k->fn == cmd_help) && c.argc != 1) {
			jb_error(out, "usage: %s", k->usage);
			return;
		}
		if (k->w2 && k->fn != cmd_config_get && k->fn != cmd_config_set && c.argc != 2) {
			jb_error(out, "usage: %s", k->usage);
			return;
		}
		k->fn(&c);
		return;
	}
	jb_error(out, "unknown command '%s' (try: help)", argv[0]);
}
