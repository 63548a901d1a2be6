/* SPDX-License-Identifier: MIT */
/*
 * tier-sim - run the real libtier engine in virtual time on two mem stores
 * with device models (base = hdd, cache = ssd by default), fed by an
 * fio-compatible generator (closed loop at a queue depth, like fio) or a
 * trace, and report hit ratios, bytes moved per client byte, agent activity,
 * simulated IOPS and latency, next to Belady's OPT for the same cache size.
 * It decides only when virtual time moves: to the earliest of the next store
 * completion, the engine's next tick and the next trace arrival.  It must
 * never read the wall clock for results or touch engine internals.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tier/engine.h"
#include "gen.h"
#include "opt.h"
#include "trace.h"

#define SIM_MAX_POLICIES 8
#define SIM_MAX_SETS     64
#define SIM_T0_NS        1000000000ull   /* virtual time starts at 1 s */
#define SIM_MAX_QD       1024

struct sim_cfg {
	enum gen_dist_type dist;
	double dist_param;
	const char *dist_name;
	uint32_t write_pct;
	const char *rw_name;
	uint64_t bs, size, cache, ops, warmup, seconds;
	uint32_t qd, seed;
	const char *trace_path;
	struct trace trace;
	bool no_stall;
	const char *csv_path;
	const char *policies[SIM_MAX_POLICIES];
	size_t n_policies;
	const char *sets[SIM_MAX_SETS];
	size_t n_sets;
	const char *base_profile, *cache_profile;
	struct tier_devmodel_params base_model, cache_model;
	int verbose;
};

struct sim_result {
	const char *policy;
	struct tier_stats st;          /* counted region only */
	struct tier_store_stats base, cache;
	uint64_t ops, client_bytes, t_ns;
	double lat_mean_us, lat_p99_us;
	struct opt_result opt_obj, opt_blk;
	uint64_t cap_objects, cap_blocks;
	double wall_s;
	char params[512];
};

struct slot {
	struct tier_request req;
	struct sim *sim;
	uint64_t t_submit;
	uint64_t index;            /* request number */
	bool busy;
};

struct sim {
	const struct sim_cfg *cfg;
	uint64_t now;
	struct tier_cq *cq;
	struct tier_store *base, *cache;
	struct tier_engine *eng;
	struct tier_image *img;
	struct tier_params params;
	struct slot *slots;
	struct gen_workload wl;
	uint64_t issued, done, errors, total;
	uint64_t *obj_ids, *blk_ids;   /* one entry per request (first object/block) */
	uint64_t *lat_ns;              /* per request, counted region */
	uint64_t n_lat, lat_sum;
	uint64_t warm_t, object_size;
	struct tier_stats warm_st;
	struct tier_store_stats warm_base, warm_cache;
	bool warm_taken;
	void *buf;
};

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("tier-sim: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static uint64_t sim_clock(void *arg)
{
	return ((struct sim *)arg)->now;
}

static void sim_log(void *arg, enum tier_log_level lvl, const char *msg)
{
	const struct sim *s = arg;

	if ((int)lvl <= TIER_LOG_WARN + s->cfg->verbose)
		fprintf(stderr, "tier-sim: [engine] %s\n", msg);
}

/* ---- policies ---- */

static const struct {
	const char *name, *what;
	const char *kv[12];
} presets[] = {
	{ "promote-always", "Ceph without proxy write: every miss promotes the whole object",
	  { "min_write_recency_for_promote=0", "min_read_recency_for_promote=0",
	    "promote_granularity=object", "evict_policy=hitset", NULL } },
	{ "ceph", "Ceph today: proxy write, recency 1, hitset temperature eviction",
	  { "min_write_recency_for_promote=1", "min_read_recency_for_promote=1",
	    "promote_granularity=object", "evict_policy=hitset", NULL } },
	{ "tierd", "tierd: extent granularity, S3-FIFO eviction, admit on 2nd touch",
	  { "min_write_recency_for_promote=1", "min_read_recency_for_promote=1",
	    "promote_granularity=extent", "evict_policy=s3fifo", NULL } },
};

static void set_param(struct tier_params *p, const char *kv)
{
	char key[64], err[256];
	const char *eq = strchr(kv, '=');
	int ret;

	if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof(key))
		die("--set wants key=value, got '%s'", kv);
	memcpy(key, kv, (size_t)(eq - kv));
	key[eq - kv] = '\0';
	err[0] = '\0';
	ret = tier_params_set(p, key, eq + 1, err, sizeof(err));
	if (ret < 0)
		die("%s: %s", kv, err[0] ? err : strerror(-ret));
}

static void build_params(const struct sim_cfg *c, const char *policy, struct tier_params *p,
			 char *desc, size_t desclen)
{
	char v[64], err[256];
	size_t i, off = 0;

	tier_params_default(p);
	p->target_max_bytes = c->cache;
	/* seed 004's cache tier settings */
	set_param(p, "cache_target_dirty_ratio=0.4");
	set_param(p, "cache_target_full_ratio=0.8");
	for (i = 0; i < sizeof(presets) / sizeof(presets[0]); i++) {
		if (!strcmp(presets[i].name, policy))
			break;
	}
	if (i == sizeof(presets) / sizeof(presets[0]))
		die("unknown policy '%s' (promote-always, ceph, tierd)", policy);
	for (const char *const *kv = presets[i].kv; *kv; kv++)
		set_param(p, *kv);
	for (size_t k = 0; k < c->n_sets; k++)
		set_param(p, c->sets[k]);
	if (tier_params_check(p, err, sizeof(err)) < 0)
		die("policy %s: %s", policy, err);
	desc[0] = '\0';
	static const char *show[] = {
		"promote_granularity", "evict_policy", "min_write_recency_for_promote",
		"min_read_recency_for_promote", "hit_set_count", "hit_set_period",
	};
	for (size_t k = 0; k < sizeof(show) / sizeof(show[0]); k++) {
		if (tier_params_get(p, show[k], v, sizeof(v)) == 0 && off < desclen)
			off += (size_t)snprintf(desc + off, desclen - off, "%s%s=%s",
						k ? " " : "", show[k], v);
	}
}

/* ---- the loop ---- */

static void req_done(struct tier_request *req, int result)
{
	struct slot *sl = req->priv;
	struct sim *s = sl->sim;
	uint64_t lat = s->now - sl->t_submit;

	sl->busy = false;
	s->done++;
	if (result < 0)
		s->errors++;
	if (sl->index >= s->cfg->warmup) {
		s->lat_ns[s->n_lat++] = lat;
		s->lat_sum += lat;
	}
}

static bool trace_mode(const struct sim *s)
{
	return s->cfg->trace_path != NULL;
}

/* Arrival time of request i (trace mode honours timestamps unless --no-stall). */
static uint64_t arrival(const struct sim *s, uint64_t i)
{
	if (!trace_mode(s) || s->cfg->no_stall)
		return 0;
	return SIM_T0_NS + s->cfg->trace.recs[i].time_us * 1000u;
}

static void next_request(struct sim *s, struct tier_request *r)
{
	static const enum tier_req_type map[] = {
		[TRACE_OP_READ] = TIER_REQ_READ, [TRACE_OP_WRITE] = TIER_REQ_WRITE,
		[TRACE_OP_TRIM] = TIER_REQ_TRIM, [TRACE_OP_FLUSH] = TIER_REQ_FLUSH,
	};

	if (trace_mode(s)) {
		const struct trace_rec *t = &s->cfg->trace.recs[s->issued];

		r->type = map[t->op];
		r->off = t->off;
		r->len = t->len;
	} else {
		struct gen_req g;

		gen_workload_next(&s->wl, &g);
		r->type = g.is_write ? TIER_REQ_WRITE : TIER_REQ_READ;
		r->off = g.off;
		r->len = g.len;
	}
	r->buf = (r->type == TIER_REQ_READ || r->type == TIER_REQ_WRITE) ? s->buf : NULL;
	s->obj_ids[s->issued] = r->type == TIER_REQ_FLUSH ? UINT64_MAX : r->off / s->object_size;
	s->blk_ids[s->issued] = r->type == TIER_REQ_FLUSH ? UINT64_MAX : r->off / s->cfg->bs;
}

static void take_warm_snapshot(struct sim *s)
{
	tier_engine_get_stats(s->eng, &s->warm_st);
	tier_store_get_stats(s->base, &s->warm_base);
	tier_store_get_stats(s->cache, &s->warm_cache);
	s->warm_t = s->now;
	s->warm_taken = true;
}

static bool out_of_time(const struct sim *s)
{
	return s->cfg->seconds && s->now - SIM_T0_NS >= s->cfg->seconds * 1000000000ull;
}

static void fill_slots(struct sim *s)
{
	for (uint32_t q = 0; q < s->cfg->qd && s->issued < s->total && !out_of_time(s); q++) {
		struct slot *sl = &s->slots[q];
		int ret;

		if (sl->busy || arrival(s, s->issued) > s->now)
			continue;
		if (s->issued == s->cfg->warmup && !s->warm_taken)
			take_warm_snapshot(s);
		memset(&sl->req, 0, sizeof(sl->req));
		next_request(s, &sl->req);
		sl->req.cb = req_done;
		sl->req.priv = sl;
		sl->t_submit = s->now;
		sl->index = s->issued;
		ret = tier_image_submit(s->img, &sl->req);
		if (ret < 0)
			die("request %" PRIu64 " (off %" PRIu64 " len %" PRIu64 ") refused: %s",
			    s->issued, sl->req.off, sl->req.len, strerror(-ret));
		sl->busy = true;
		s->issued++;
	}
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static bool any_busy(const struct sim *s)
{
	return s->issued != s->done;
}

/* Move virtual time to t, completing due store ops. */
static void advance_to(struct sim *s, uint64_t t)
{
	if (t > s->now)
		s->now = t;
	tier_store_mem_advance(s->base, s->now);
	tier_store_mem_advance(s->cache, s->now);
	tier_cq_drain(s->cq);
}

static void run_loop(struct sim *s)
{
	uint64_t next_tick = s->now;

	for (;;) {
		bool more = s->issued < s->total && !out_of_time(s);
		uint64_t t;

		fill_slots(s);
		if (s->now >= next_tick || tier_cq_drain(s->cq))
			next_tick = s->now + tier_engine_tick(s->eng) * 1000000ull;
		if (!more && !any_busy(s))
			break;
		t = min_u64(tier_store_mem_next_due(s->base), tier_store_mem_next_due(s->cache));
		if (more && s->issued - s->done < s->cfg->qd)
			t = min_u64(t, arrival(s, s->issued));
		t = min_u64(t, next_tick);
		advance_to(s, t);
	}
}

/* After the last request: let in-flight agent ops finish, without new ticks. */
static void settle(struct sim *s)
{
	for (int guard = 0; guard < 1000000 && !tier_engine_idle(s->eng); guard++) {
		uint64_t t = min_u64(tier_store_mem_next_due(s->base),
				     tier_store_mem_next_due(s->cache));

		if (t == UINT64_MAX) {
			tier_cq_drain(s->cq);
			if (tier_engine_idle(s->eng))
				break;
			t = s->now + 1000000;   /* nothing queued: give the engine a tick */
			tier_engine_tick(s->eng);
		}
		advance_to(s, t);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void sub_stats(struct tier_stats *a, const struct tier_stats *b)
{
#define SIM_SUB(n) a->n -= b->n;
	TIER_COUNTERS(SIM_SUB)
#undef SIM_SUB
}

static void sub_store(struct tier_store_stats *a, const struct tier_store_stats *b)
{
	for (int i = 0; i < TIER_STORE_OPCODE_MAX; i++) {
		a->ops[i] -= b->ops[i];
		a->bytes[i] -= b->bytes[i];
	}
}

static void compute_opt(struct sim *s, struct sim_result *r)
{
	uint64_t n = s->issued, k = 0;
	size_t warm = s->cfg->warmup < n ? (size_t)s->cfg->warmup : (size_t)n;
	int ret;

	/* drop flushes (no object); keep the warm-up boundary where it was */
	for (uint64_t i = 0; i < n; i++) {
		if (s->obj_ids[i] == UINT64_MAX) {
			if (i < s->cfg->warmup)
				warm--;
			continue;
		}
		s->obj_ids[k] = s->obj_ids[i];
		s->blk_ids[k] = s->blk_ids[i];
		k++;
	}
	r->cap_objects = s->params.target_max_bytes / s->object_size;
	r->cap_blocks = s->params.target_max_bytes / s->cfg->bs;
	ret = opt_simulate(s->obj_ids, k, r->cap_objects, true, warm, &r->opt_obj);
	if (ret == 0)
		ret = opt_simulate(s->blk_ids, k, r->cap_blocks, true, warm, &r->opt_blk);
	if (ret < 0)
		die("OPT: %s", strerror(-ret));
}

static void make_stores(struct sim *s)
{
	struct tier_mem_opts mo = { .no_data = true, .virtual_time = true };
	int ret;

	ret = tier_cq_create(NULL, NULL, &s->cq);
	if (ret == 0) {
		mo.model = s->cfg->base_model;
		ret = tier_store_mem_create("base", &mo, s->cq, &s->base);
	}
	if (ret == 0) {
		mo.model = s->cfg->cache_model;
		ret = tier_store_mem_create("cache", &mo, s->cq, &s->cache);
	}
	if (ret < 0)
		die("stores: %s", strerror(-ret));
}

static void open_engine(struct sim *s)
{
	struct tier_engine_opts eo = {
		.base = s->base, .cache = s->cache, .params = s->params,
		.log = sim_log, .log_arg = s, .clock = sim_clock, .clock_arg = s,
	};
	struct tier_image_opts io = {
		.name = "sim", .object_prefix = "rbd_data.sim", .size = s->cfg->size,
	};
	int ret;

	ret = tier_engine_create(&eo, &s->eng);
	if (ret == 0)
		ret = tier_image_open(s->eng, &io, &s->img);
	if (ret < 0)
		die("engine: %s", strerror(-ret));
	/* the (empty) rebuild listing goes through the stores in virtual time */
	while ((ret = tier_image_ready(s->img)) == 0) {
		uint64_t t = min_u64(tier_store_mem_next_due(s->base),
				     tier_store_mem_next_due(s->cache));

		tier_engine_tick(s->eng);
		advance_to(s, t == UINT64_MAX ? s->now + 1000000 : t);
	}
	if (ret < 0)
		die("image rebuild: %s", strerror(-ret));
}

static void alloc_sim(struct sim *s, uint64_t maxlen)
{
	s->slots = calloc(s->cfg->qd, sizeof(*s->slots));
	s->obj_ids = malloc((s->total + 1) * sizeof(*s->obj_ids));
	s->blk_ids = malloc((s->total + 1) * sizeof(*s->blk_ids));
	s->lat_ns = malloc((s->total + 1) * sizeof(*s->lat_ns));
	s->buf = calloc(1, maxlen ? maxlen : 1);
	if (!s->slots || !s->obj_ids || !s->blk_ids || !s->lat_ns || !s->buf)
		die("out of memory");
	for (uint32_t q = 0; q < s->cfg->qd; q++)
		s->slots[q].sim = s;
}

static void run_one(const struct sim_cfg *c, const char *policy, struct sim_result *r)
{
	struct sim s = { .cfg = c, .now = SIM_T0_NS };
	uint64_t maxlen = c->bs;
	struct timespec w0, w1;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &w0);
	memset(r, 0, sizeof(*r));
	r->policy = policy;
	build_params(c, policy, &s.params, r->params, sizeof(r->params));
	s.object_size = s.params.object_size;
	s.total = c->trace_path ? c->trace.n : c->ops;
	if (c->trace_path) {
		for (size_t i = 0; i < c->trace.n; i++)
			if (c->trace.recs[i].len > maxlen)
				maxlen = c->trace.recs[i].len;
	} else {
		struct gen_workload_opts wo = {
			.type = c->dist, .param = c->dist_param, .write_pct = c->write_pct,
			.bs = c->bs, .size = c->size, .seed = c->seed,
		};
		ret = gen_workload_init(&s.wl, &wo);
		if (ret < 0)
			die("workload: %s", strerror(-ret));
	}
	alloc_sim(&s, maxlen);
	make_stores(&s);
	open_engine(&s);
	s.now = SIM_T0_NS;
	advance_to(&s, s.now);
	run_loop(&s);
	if (!s.warm_taken)
		take_warm_snapshot(&s);

	tier_engine_get_stats(s.eng, &r->st);
	tier_store_get_stats(s.base, &r->base);
	tier_store_get_stats(s.cache, &r->cache);
	sub_stats(&r->st, &s.warm_st);
	sub_store(&r->base, &s.warm_base);
	sub_store(&r->cache, &s.warm_cache);
	r->ops = s.n_lat;
	r->t_ns = s.now - s.warm_t;
	r->client_bytes = r->st.read_bytes + r->st.write_bytes;
	if (s.n_lat) {
		qsort(s.lat_ns, s.n_lat, sizeof(*s.lat_ns), cmp_u64);
		r->lat_mean_us = (double)s.lat_sum / (double)s.n_lat / 1000.0;
		r->lat_p99_us = (double)s.lat_ns[(s.n_lat * 99 + 99) / 100 - 1] / 1000.0;
	}
	if (s.errors)
		fprintf(stderr, "tier-sim: %s: %" PRIu64 " requests failed\n", policy, s.errors);
	compute_opt(&s, r);

	settle(&s);
	tier_image_close(s.img);
	tier_engine_destroy(s.eng);
	tier_store_destroy(s.base);
	tier_store_destroy(s.cache);
	tier_cq_destroy(s.cq);
	free(s.slots);
	free(s.obj_ids);
	free(s.blk_ids);
	free(s.lat_ns);
	free(s.buf);
	clock_gettime(CLOCK_MONOTONIC, &w1);
	r->wall_s = (double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) / 1e9;
}
