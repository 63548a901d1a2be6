/* SPDX-License-Identifier: MIT */
/*
 * admin-cmd.c - the admin socket's commands and their JSON answers, built
 * with jansson (never by hand).  It decides how counters, parameters and
 * images are shown, how a command line or a ceph-style JSON command maps to
 * a command of the table (which checks the arity), and how a `config set` is
 * validated before it reaches the daemon (copy the live parameters, set,
 * check, refuse keys that cannot change live).  Flush, evict and promote are
 * only started here: it must never wait for them, and never change engine
 * state except through the engine's API and the daemon's hooks.  Any bytes a
 * client sends come back only as valid JSON (a command that is not UTF-8 is
 * refused).
 */
#include <config.h>   /* generated: TIER_VERSION */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/admin-internal.h"
#include "daemon/owner.h"
#include "daemon/utf8.h"

#define MAX_ARGS 16

/* ---- JSON values ---- */

json_t *tierd_admin_str(const char *s)
{
	size_t len = strlen(s), flen;
	json_t *v;
	char *fixed;

	if (tierd_utf8_valid(s, len, NULL))
		return json_stringn(s, len);
	fixed = tierd_utf8_fix(s, len, &flen);
	if (!fixed)
		return NULL;
	v = json_stringn(fixed, flen);
	free(fixed);
	return v;
}

static json_t *verror(const char *fmt, va_list ap)
{
	char msg[1024];
	json_t *o = json_object();

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (o && json_object_set_new(o, "error", tierd_admin_str(msg)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *tierd_admin_error(const char *fmt, ...)
{
	va_list ap;
	json_t *o;

	va_start(ap, fmt);
	o = verror(fmt, ap);
	va_end(ap);
	return o;
}

/* Setters: a failed allocation leaves the member out; the answer is then
 * replaced by an error before it is sent (cmd_ctx.oom). */
static void set(json_t *o, const char *k, json_t *v)
{
	json_object_set_new(o, k, v);
}

static void set_u64(json_t *o, const char *k, uint64_t v)
{
	set(o, k, json_integer((json_int_t)v));
}

static void set_str(json_t *o, const char *k, const char *s)
{
	set(o, k, tierd_admin_str(s));
}

/* num/den rounded to 4 decimals, or null when den is 0 */
static void set_ratio(json_t *o, const char *k, uint64_t num, uint64_t den)
{
	set(o, k, den ? json_real(round((double)num / (double)den * 1e4) / 1e4) : json_null());
}

/* ---- commands ---- */

struct cmd_ctx {
	struct tierd_admin *a;
	struct tier_engine *e;
	int argc;
	char **argv;
	json_t *out;         /* the answer: an object, or NULL (then {} is sent) */
};

static void fail(struct cmd_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct cmd_ctx *c, const char *fmt, ...)
{
	va_list ap;

	json_decref(c->out);
	va_start(ap, fmt);
	c->out = verror(fmt, ap);
	va_end(ap);
}

/* The answer object, made on first use. */
static json_t *ans(struct cmd_ctx *c)
{
	if (!c->out)
		c->out = json_object();
	return c->out;
}

static bool need_engine(struct cmd_ctx *c)
{
	if (!c->e)
		fail(c, "engine not running");
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

static json_t *throughput(struct tierd_admin *a, const struct tier_stats *s)
{
	const struct rate_sample *old;
	json_t *t = json_object();
	double dt;

	if (!t || a->rate_n == 0)
		return t;
	old = &a->rate[(a->rate_head + RATE_SAMPLES - a->rate_n) % RATE_SAMPLES];
	dt = (double)(now_ms(a) - old->t_ms) / 1000.0;
	if (dt < 0.5)
		return t;
	set(t, "window_s", json_real(round(dt * 10) / 10));
	set(t, "read_iops", json_real(round((double)(s->read_ops - old->read_ops) / dt * 10) / 10));
	set(t, "write_iops", json_real(round((double)(s->write_ops - old->write_ops) / dt * 10) / 10));
	set_u64(t, "read_bytes_sec", (uint64_t)((double)(s->read_bytes - old->read_bytes) / dt));
	set_u64(t, "write_bytes_sec", (uint64_t)((double)(s->write_bytes - old->write_bytes) / dt));
	return t;
}

static const char *const lat_names[TIER_LAT_KINDS] = {"read", "write", "other"};

/* {"read": {p50, p99, p999}, ...} in microseconds */
static json_t *latency(const struct tier_stats *s)
{
	json_t *l = json_object();

	for (int k = 0; l && k < TIER_LAT_KINDS; k++) {
		const struct tier_lat_hist *h = &s->lat[k];
		json_t *o = json_object();
		set_u64(o, "p50", h->count ? tier_lat_quantile(h, 0.50) : 0);
		set_u64(o, "p99", h->count ? tier_lat_quantile(h, 0.99) : 0);
		set_u64(o, "p999", h->count ? tier_lat_quantile(h, 0.999) : 0);
		set(l, lat_names[k], o);
	}
	return l;
}

static void put_ops(const struct tier_stats *s, json_t *out)
{
	json_t *ops = json_object(), *bytes = json_object();

	set_u64(ops, "read", s->read_ops);
	set_u64(ops, "write", s->write_ops);
	set_u64(ops, "trim", s->trim_ops);
	set_u64(ops, "write_zeroes", s->zero_ops);
	set_u64(ops, "flush", s->flush_ops);
	set_u64(ops, "cache", s->cache_ops);
	set(out, "ops", ops);
	set_u64(bytes, "read", s->read_bytes);
	set_u64(bytes, "write", s->write_bytes);
	set_u64(bytes, "trim", s->trim_bytes);
	set_u64(bytes, "write_zeroes", s->zero_bytes);
	set(out, "bytes", bytes);
}

static void cmd_status(struct cmd_ctx *c)
{
	struct tier_image *imgs[TIERD_MAX_IMAGES];
	const struct tier_params *p;
	struct tier_stats *s;
	char mode[32];
	json_t *o;

	if (!need_engine(c))
		return;
	s = malloc(sizeof(*s));
	if (!s || !(o = ans(c))) {
		free(s);
		fail(c, "out of memory");
		return;
	}
	tier_engine_get_stats(c->e, s);
	p = tier_engine_params(c->e);
	tier_params_get(p, "cache_mode", mode, sizeof(mode));
	set_u64(o, "images", tier_engine_images(c->e, imgs, TIERD_MAX_IMAGES));
	set_str(o, "cache_mode", mode);
	set_ratio(o, "read_hit_ratio", s->read_hits, s->read_hits + s->read_misses);
	set_ratio(o, "write_hit_ratio", s->write_hits, s->write_hits + s->write_misses);
	set_ratio(o, "dirty_ratio", s->dirty_ratio_ppm, 1000000);
	set_ratio(o, "full_ratio", s->full_ratio_ppm, 1000000);
	set_str(o, "flush_mode", tier_flush_mode_name((int)s->flush_mode));
	set_str(o, "evict_mode", tier_evict_mode_name((int)s->evict_mode));
	set_u64(o, "evict_effort_pct", s->evict_effort_pct);
	set_u64(o, "target_max_bytes", p->target_max_bytes);
	set_u64(o, "target_max_objects", p->target_max_objects);
#define STATUS_FIELD(n) set_u64(o, #n, s->n);
	STATUS_FIELD(cached_bytes) STATUS_FIELD(cached_objects)
	STATUS_FIELD(dirty_bytes) STATUS_FIELD(dirty_objects)
	STATUS_FIELD(promotions) STATUS_FIELD(promote_bytes)
	STATUS_FIELD(promote_throttled) STATUS_FIELD(promote_failed)
	STATUS_FIELD(proxy_reads) STATUS_FIELD(proxy_read_bytes)
	STATUS_FIELD(proxy_writes) STATUS_FIELD(proxy_write_bytes)
	STATUS_FIELD(flushes) STATUS_FIELD(flush_bytes) STATUS_FIELD(flush_failed)
	STATUS_FIELD(evictions) STATUS_FIELD(evict_bytes) STATUS_FIELD(evict_failed)
	STATUS_FIELD(requests_in_flight) STATUS_FIELD(agent_ops_in_flight) STATUS_FIELD(errors)
	STATUS_FIELD(agent_turnover) STATUS_FIELD(agent_turnovers)
#undef STATUS_FIELD
	put_ops(s, o);
	for (int which = 0; which < 2 && c->a->hooks.store; which++) {
		struct tier_store *st = c->a->hooks.store(c->a->hooks.arg, which);
		json_t *pools = json_object_get(o, "pools"), *po;
		if (!st)
			continue;
		if (!pools)
			set(o, "pools", pools = json_object());
		po = json_object();
		set_str(po, "pool", tier_store_pool_name(st));
		set_str(po, "backend", tier_store_backend_name(st));
		set(pools, which ? "cache" : "base", po);
	}
	set(o, "throughput", throughput(c->a, s));
	set(o, "latency_us", latency(s));
	free(s);
}

/* perf dump|schema [LOGGER [COUNTER]] */
static void cmd_perf(struct cmd_ctx *c)
{
	const char *logger = c->argc > 2 ? c->argv[2] : NULL;
	const char *counter = c->argc > 3 ? c->argv[3] : NULL;

	if (!need_engine(c))
		return;
	json_decref(c->out);
	c->out = strcmp(c->argv[1], "schema") == 0
		? tierd_admin_perf_schema(c->a, c->e, logger, counter)
		: tierd_admin_perf_dump(c->a, c->e, logger, counter);
	if (!c->out)
		fail(c, "out of memory");
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

static void show_one(void *arg, const char *key, const char *value)
{
	set_str(arg, key, value);
}

static void cmd_config_show(struct cmd_ctx *c)
{
	const struct tier_params *p = current_params(c);

	if (!p) {
		fail(c, "no configuration loaded");
		return;
	}
	if (ans(c))
		tier_params_foreach(p, show_one, c->out);
}

static void cmd_config_get(struct cmd_ctx *c)
{
	const struct tier_params *p = current_params(c);
	char v[64];

	if (!p) {
		fail(c, "no configuration loaded");
		return;
	}
	if (tier_params_get(p, c->argv[2], v, sizeof(v)) < 0) {
		fail(c, "unknown tier parameter '%s' (see: config show)", c->argv[2]);
		return;
	}
	if (ans(c))
		set_str(c->out, c->argv[2], v);
}

static void cmd_config_set(struct cmd_ctx *c)
{
	const struct tierd_admin_hooks *h = &c->a->hooks;
	struct tier_params p;
	char msg[1024], v[64];
	const char *key;

	if (!need_engine(c))
		return;
	key = c->argv[2];
	p = *tier_engine_params(c->e);
	if (tier_params_set(&p, key, c->argv[3], msg, sizeof(msg)) < 0) {
		fail(c, "%s: %s", key, msg);
		return;
	}
	if (tier_params_is_live(key) != 1) {
		fail(c, "%s cannot change on a running daemon: set it in the config file and restart",
		     key);
		return;
	}
	if (tier_params_check(&p, msg, sizeof(msg)) < 0) {
		fail(c, "%s", msg);
		return;
	}
	if (!h->set_params) {
		fail(c, "live tuning not supported by this daemon");
		return;
	}
	msg[0] = '\0';
	int r = h->set_params(h->arg, &p, msg, sizeof(msg));
	if (r < 0) {
		fail(c, "%s", msg[0] ? msg : strerror(-r));
		return;
	}
	tier_params_get(tier_engine_params(c->e), key, v, sizeof(v));
	if (!ans(c))
		return;
	set(c->out, "ok", json_true());
	set_str(c->out, key, v);
	set(c->out, "persisted", json_false());
}

static void cmd_reload(struct cmd_ctx *c)
{
	char msg[1024] = "";
	json_t *pending;
	int r;

	if (!c->a->hooks.reload) {
		fail(c, "reload not supported by this daemon");
		return;
	}
	r = c->a->hooks.reload(c->a->hooks.arg, msg, sizeof(msg));
	if (r < 0) {
		fail(c, "%s", msg[0] ? msg : strerror(-r));
		return;
	}
	/* applied, except the keys named here: they wait for a restart */
	if (!ans(c) || !(pending = json_array()))
		return;
	set(c->out, "ok", json_true());
	for (char *p = msg, *q; *p; p = q) {
		q = strchr(p, ',');
		if (q)
			*q++ = '\0';
		else
			q = p + strlen(p);
		json_array_append_new(pending, tierd_admin_str(p));
	}
	set(c->out, "restart_pending", pending);
}

/* "--image NAME" (or none): 0 and *img (NULL = all), or an error answer. */
static int image_opt(struct cmd_ctx *c, int from, struct tier_image **img)
{
	*img = NULL;
	if (c->argc == from)
		return 0;
	if (c->argc != from + 2 || strcmp(c->argv[from], "--image") != 0) {
		fail(c, "usage: %s [--image NAME]", c->argv[0]);
		return -EINVAL;
	}
	*img = tier_engine_find_image(c->e, c->argv[from + 1]);
	if (!*img) {
		fail(c, "no such image '%s'", c->argv[from + 1]);
		return -ENOENT;
	}
	return 0;
}

static void cmd_flush_evict(struct cmd_ctx *c)
{
	bool evict = strcmp(c->argv[0], "evict") == 0;
	struct tier_image *img;
	struct tier_stats *s;
	int r;

	if (!need_engine(c) || image_opt(c, 1, &img) < 0)
		return;
	r = evict ? tier_engine_evict_all(c->e, img) : tier_engine_flush_all(c->e, img);
	if (r < 0) {
		fail(c, "%s failed: %s", c->argv[0], strerror(-r));
		return;
	}
	s = malloc(sizeof(*s));
	if (!s || !ans(c)) {
		free(s);
		fail(c, "out of memory");
		return;
	}
	tier_engine_get_stats(c->e, s);
	set(c->out, "ok", json_true());
	set_str(c->out, "started", c->argv[0]);
	set_u64(c->out, "dirty_bytes", s->dirty_bytes);
	set_u64(c->out, "dirty_objects", s->dirty_objects);
	set_u64(c->out, "cached_bytes", s->cached_bytes);
	set_u64(c->out, "cached_objects", s->cached_objects);
	free(s);
}

static void cmd_promote(struct cmd_ctx *c)
{
	struct tier_image *img;
	uint64_t off, len;
	int r;

	if (!need_engine(c))
		return;
	img = tier_engine_find_image(c->e, c->argv[1]);
	if (!img) {
		fail(c, "no such image '%s'", c->argv[1]);
		return;
	}
	if (tier_parse_bytes(c->argv[2], &off) < 0 || tier_parse_bytes(c->argv[3], &len) < 0 ||
	    len == 0) {
		fail(c, "bad offset or length (allowed: bytes with K/M/G/T, length > 0)");
		return;
	}
	r = tier_engine_promote(c->e, img, off, len);
	if (r < 0) {
		fail(c, "promote failed: %s", strerror(-r));
		return;
	}
	if (!ans(c))
		return;
	set(c->out, "ok", json_true());
	set_u64(c->out, "offset", off);
	set_u64(c->out, "length", len);
}

/* acquire IMAGE [--force] / release IMAGE: the owner state machine (daemon/owner.c). */
static void cmd_own(struct cmd_ctx *c)
{
	bool acquire = !strcmp(c->argv[0], "acquire"), force = false;
	char msg[512] = "";
	int r;

	if (c->argc == 3) {
		if (!acquire || strcmp(c->argv[2], "--force")) {
			fail(c, "usage: acquire IMAGE [--force] | release IMAGE");
			return;
		}
		force = true;
	}
	if (!c->a->hooks.own_request) {
		fail(c, "ownership applies to RBD images (backend = rados)");
		return;
	}
	r = c->a->hooks.own_request(c->a->hooks.arg, c->argv[1], acquire, force, msg,
				    sizeof(msg));
	if (r < 0) {
		fail(c, "%s", msg[0] ? msg : strerror(-r));
		return;
	}
	if (!ans(c))
		return;
	set(c->out, "ok", json_true());
	set_str(c->out, "message", msg);
}

/* A real rounded to n significant digits (the digits are the interface). */
static json_t *real_sig(double v, int n)
{
	char b[64];

	snprintf(b, sizeof(b), "%.*g", n, v);
	return json_real(strtod(b, NULL));
}

/* One hitset as a JSON object; the field order and digits are the interface. */
static json_t *hitset(const struct tier_hitset_info *h)
{
	double fill = (double)h->bits_set / (double)h->bits;
	json_t *o = json_object();

	if (!o)
		return NULL;
	set(o, "set", h->set < 0 ? json_string("current") : json_integer(h->set));
	set_u64(o, "start_ms", h->start_ms);
	set(o, "end_ms", h->set < 0 ? json_null() : json_integer((json_int_t)h->end_ms));
	set_u64(o, "inserts", h->inserts);
	set_u64(o, "unique", h->unique);
	set_u64(o, "capacity", h->capacity);
	set_u64(o, "bits", h->bits);
	set_u64(o, "k", h->k);
	set(o, "fpp", real_sig(h->fpp, 6));
	set(o, "fill", json_real(round(fill * 1e4) / 1e4));
	set(o, "est_fpp", real_sig(pow(fill, (double)h->k), 3));
	return o;
}

static void cmd_hitset_dump(struct cmd_ctx *c)
{
	struct tier_hitset_info sets[TIER_HITSET_MAX_SETS];
	json_t *arr;
	int n;

	if (!need_engine(c))
		return;
	n = tier_engine_hitset_info(c->e, sets, TIER_HITSET_MAX_SETS);
	if (n < 0) {
		fail(c, "hitset summary unavailable");
		return;
	}
	if ((size_t)n > TIER_HITSET_MAX_SETS)
		n = TIER_HITSET_MAX_SETS;
	if (!ans(c) || !(arr = json_array()))
		return;
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, hitset(&sets[i]));
	set(c->out, "hitsets", arr);   /* answers are always objects */
}

static void cmd_images(struct cmd_ctx *c)
{
	const struct tierd_config *cfg = c->a->hooks.config ? c->a->hooks.config(c->a->hooks.arg) : NULL;
	struct tier_image *imgs[TIERD_MAX_IMAGES];
	json_t *arr;
	size_t n;

	if (!need_engine(c))
		return;
	n = tier_engine_images(c->e, imgs, TIERD_MAX_IMAGES);
	if (n > TIERD_MAX_IMAGES)
		n = TIERD_MAX_IMAGES;
	if (!ans(c) || !(arr = json_array()))
		return;
	for (size_t i = 0; i < n; i++) {
		int ready = tier_image_ready(imgs[i]);
		bool in_cfg = !cfg;
		json_t *o = json_object();
		if (cfg)
			for (size_t k = 0; k < cfg->n_images; k++)
				if (!strcmp(cfg->images[k].name, tier_image_name(imgs[i])))
					in_cfg = true;
		set_str(o, "name", tier_image_name(imgs[i]));
		set_u64(o, "size", tier_image_size(imgs[i]));
		set(o, "ready", json_boolean(ready == 1));
		set_str(o, "state", ready == 1 ? "ready" : ready == 0 ? "loading" : strerror(-ready));
		set(o, "read_only", json_boolean(tier_image_read_only(imgs[i])));
		{
			struct tierd_own_info oi;

			if (c->a->hooks.owner &&
			    c->a->hooks.owner(c->a->hooks.arg, tier_image_name(imgs[i]), &oi) == 0) {
				set_str(o, "owner", tierd_own_name(oi.state));
				set_str(o, "lock_holder", oi.holder);
				set_str(o, "lock_handoff", oi.lock_handoff ? "on_request" : "never");
				set_u64(o, "handoffs", oi.handoffs);
				set_u64(o, "takeovers", oi.takeovers);
				set(o, "write_timed_out", json_boolean(oi.write_timed_out));
				if (oi.state != TIERD_OWN_OWNED)
					set_str(o, "state", tierd_own_name(oi.state));
			}
		}
		/* false: removed from the config file, served until the next restart */
		set(o, "in_config", json_boolean(in_cfg));
		json_array_append_new(arr, o);
	}
	set(c->out, "images", arr);
}

static void cmd_version(struct cmd_ctx *c)
{
	if (ans(c))
		set_str(c->out, "version", TIER_VERSION);
}

/* An argument of the ceph form of a command: cmdmap key, and the word
 * placed before its value on the command line (NULL = none). */
struct ceph_arg {
	const char *name, *flag;
	bool req, many;
};

struct command {
	const char *w1, *w2;   /* w2 NULL: one-word command */
	void (*fn)(struct cmd_ctx *c);
	int min_argc, max_argc;   /* words, the command's own included */
	const char *usage, *help;
	struct ceph_arg args[3];
};

static void cmd_help(struct cmd_ctx *c);
static void cmd_descriptions(struct cmd_ctx *c);

static const struct command commands[] = {
	{"status", NULL, cmd_status, 1, 1, "status", "summary: ratios, modes, counts, latency", {{0}}},
	{"perf", "dump", cmd_perf, 2, 4, "perf dump [LOGGER [COUNTER]]",
	 "counters in Ceph's perf-counter layout",
	 {{"logger", NULL, false, false}, {"counter", NULL, false, false}}},
	{"perf", "schema", cmd_perf, 2, 4, "perf schema [LOGGER [COUNTER]]",
	 "types and descriptions of the perf counters",
	 {{"logger", NULL, false, false}, {"counter", NULL, false, false}}},
	{"config", "show", cmd_config_show, 2, 2, "config show", "the live tier parameters", {{0}}},
	{"config", "get", cmd_config_get, 3, 3, "config get KEY", "one tier parameter",
	 {{"var", NULL, true, false}}},
	{"config", "set", cmd_config_set, 4, 4, "config set KEY VALUE",
	 "change a live tier parameter (not persisted)",
	 {{"var", NULL, true, false}, {"val", NULL, true, true}}},
	{"reload", NULL, cmd_reload, 1, 1, "reload", "re-read the config file (as SIGHUP)", {{0}}},
	{"flush", NULL, cmd_flush_evict, 1, 3, "flush [--image NAME]",
	 "start writing dirty objects to the base pool", {{"image", "--image", false, false}}},
	{"evict", NULL, cmd_flush_evict, 1, 3, "evict [--image NAME]",
	 "start flushing and dropping cached objects", {{"image", "--image", false, false}}},
	{"promote", NULL, cmd_promote, 4, 4, "promote IMAGE OFFSET LENGTH",
	 "pull a range into the cache (units K/M/G/T)",
	 {{"image", NULL, true, false}, {"offset", NULL, true, false}, {"length", NULL, true, false}}},
	{"hitset", "dump", cmd_hitset_dump, 2, 2, "hitset dump", "the hitsets", {{0}}},
	{"images", NULL, cmd_images, 1, 1, "images", "the images and their state", {{0}}},
	{"acquire", NULL, cmd_own, 2, 3, "acquire IMAGE [--force]",
	 "take an RBD image from the tierd that owns it (--force: fence it first)",
	 {{"image", NULL, true, false}, {"force", NULL, false, false}}},
	{"release", NULL, cmd_own, 2, 2, "release IMAGE",
	 "hand an RBD image over: finish its requests, unlock, serve it in standby",
	 {{"image", NULL, true, false}}},
	{"version", NULL, cmd_version, 1, 1, "version", "tierd's version", {{0}}},
	{"help", NULL, cmd_help, 1, 1, "help", "list the commands", {{0}}},
	{"get_command_descriptions", NULL, cmd_descriptions, 1, 1, "get_command_descriptions",
	 "", {{0}}},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void cmd_help(struct cmd_ctx *c)
{
	json_t *arr;

	if (!ans(c) || !(arr = json_array()))
		return;
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (commands[i].help[0])
			json_array_append_new(arr, json_string(commands[i].usage));
	set(c->out, "commands", arr);
}

/* What the ceph CLI (ceph_argparse) reads to validate `ceph daemon PATH ...`. */
static void cmd_descriptions(struct cmd_ctx *c)
{
	char tag[16];

	if (!ans(c))
		return;
	for (size_t i = 0, n = 0; i < N_COMMANDS; i++) {
		const struct command *k = &commands[i];
		json_t *d = json_object(), *sig = json_array();
		if (!k->help[0]) {
			json_decref(d);
			json_decref(sig);
			continue;
		}
		json_array_append_new(sig, json_string(k->w1));
		if (k->w2)
			json_array_append_new(sig, json_string(k->w2));
		for (int a = 0; a < 3 && k->args[a].name; a++) {
			json_t *arg = json_object();
			set_str(arg, "name", k->args[a].name);
			set_str(arg, "type", "CephString");
			if (!k->args[a].req)
				set_str(arg, "req", "false");
			if (k->args[a].many)
				set_str(arg, "n", "N");
			json_array_append_new(sig, arg);
		}
		set(d, "sig", sig);
		set_str(d, "help", k->help);
		set_str(d, "module", "tierd");
		set_str(d, "perm", "rw");
		set_u64(d, "flags", 0);
		snprintf(tag, sizeof(tag), "cmd%03zu", n++);
		set(c->out, tag, d);
	}
}

static const struct command *find_command(int argc, char **argv)
{
	for (size_t i = 0; i < N_COMMANDS; i++) {
		const struct command *k = &commands[i];
		if (strcmp(argv[0], k->w1) != 0)
			continue;
		if (k->w2 && (argc < 2 || strcmp(argv[1], k->w2) != 0))
			continue;
		return k;
	}
	return NULL;
}

static json_t *run_argv(struct tierd_admin *a, int argc, char **argv)
{
	struct cmd_ctx c = {.a = a, .argc = argc, .argv = argv};
	const struct command *k;

	if (argc == 0)
		return tierd_admin_error("empty command (try: help)");
	k = find_command(argc, argv);
	if (!k)
		return tierd_admin_error("unknown command '%s' (try: help)", argv[0]);
	if (argc < k->min_argc || argc > k->max_argc)
		return tierd_admin_error("usage: %s", k->usage);
	c.e = a->hooks.engine ? a->hooks.engine(a->hooks.arg) : NULL;
	k->fn(&c);
	if (!c.out)
		c.out = json_object();
	return c.out;
}

json_t *tierd_admin_run_line(struct tierd_admin *a, const char *line, size_t len)
{
	char *argv[MAX_ARGS], *copy, *save = NULL, *tok;
	size_t bad;
	int argc = 0;
	json_t *r;

	if (!tierd_utf8_valid(line, len, &bad))
		return tierd_admin_error("command is not valid UTF-8 (byte %zu)", bad);
	if (memchr(line, '\0', len))
		return tierd_admin_error("command holds a NUL byte");
	copy = strndup(line, len);
	if (!copy)
		return NULL;
	for (tok = strtok_r(copy, " \t\r", &save); tok; tok = strtok_r(NULL, " \t\r", &save)) {
		if (argc == MAX_ARGS) {
			free(copy);
			return tierd_admin_error("too many words (allowed: %d)", MAX_ARGS);
		}
		argv[argc++] = tok;
	}
	r = run_argv(a, argc, argv);
	free(copy);
	return r;
}

/* The value of a ceph argument as command-line words (strings, numbers). */
static int ceph_words(json_t *v, bool many, char **argv, int *argc, char *num, size_t numlen)
{
	if (json_is_array(v) && many) {
		size_t i;
		json_t *e;
		json_array_foreach(v, i, e) {
			if (!json_is_string(e) || *argc == MAX_ARGS)
				return -EINVAL;
			argv[(*argc)++] = (char *)json_string_value(e);
		}
		return 0;
	}
	if (*argc == MAX_ARGS)
		return -EINVAL;
	if (json_is_string(v)) {
		argv[(*argc)++] = (char *)json_string_value(v);
		return 0;
	}
	if (json_is_integer(v)) {
		snprintf(num, numlen, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		argv[(*argc)++] = num;
		return 0;
	}
	return -EINVAL;
}

json_t *tierd_admin_run_ceph(struct tierd_admin *a, const char *cmd, size_t len, bool *pretty)
{
	char *argv[MAX_ARGS], *words = NULL, *save = NULL, *tok, nums[3][32];
	const struct command *k;
	json_error_t jerr;
	json_t *root, *v, *r = NULL;
	const char *prefix;
	int argc = 0;

	*pretty = true;
	root = json_loadb(cmd, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return tierd_admin_error("invalid JSON command: %s", jerr.text);
	v = json_object_get(root, "format");
	if (json_is_string(v) && !strcmp(json_string_value(v), "json"))
		*pretty = false;
	prefix = json_string_value(json_object_get(root, "prefix"));
	if (!json_is_object(root) || !prefix) {
		r = tierd_admin_error("a JSON command is an object with a \"prefix\" string");
		goto out;
	}
	words = strdup(prefix);
	if (!words)
		goto out;
	for (tok = strtok_r(words, " ", &save); tok && argc < 2; tok = strtok_r(NULL, " ", &save))
		argv[argc++] = tok;
	if (tok || argc == 0 || !(k = find_command(argc, argv)) || argc != (k->w2 ? 2 : 1)) {
		r = tierd_admin_error("unknown command '%s' (try: help)", prefix);
		goto out;
	}
	for (int i = 0; i < 3 && k->args[i].name; i++) {
		const struct ceph_arg *ca = &k->args[i];
		v = json_object_get(root, ca->name);
		if (!v) {
			if (ca->req) {
				r = tierd_admin_error("usage: %s (missing \"%s\")", k->usage, ca->name);
				goto out;
			}
			continue;
		}
		if (ca->flag)
			argv[argc++] = (char *)ca->flag;
		if (ceph_words(v, ca->many, argv, &argc, nums[i], sizeof(nums[i])) < 0) {
			r = tierd_admin_error("usage: %s (bad \"%s\")", k->usage, ca->name);
			goto out;
		}
	}
	r = run_argv(a, argc, argv);
out:
	free(words);
	json_decref(root);
	return r;
}
