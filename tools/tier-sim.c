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
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tier/engine.h"
#include "gen.h"
#include "opt.h"
#include "trace.h"

#define SIM_MAX_POLICIES 16
#define SIM_MAX_SETS     64
#define SIM_T0_NS        1000000000ull   /* virtual time starts at 1 s */
#define SIM_MAX_QD       1024

struct sim_cfg {
	enum gen_dist_type dist;
	double dist_param;
	const char *dist_name;
	uint32_t write_pct;
	const char *rw_name;
	enum gen_pattern pattern;
	const char *pattern_name, *label;
	uint32_t hot_pct, parts;
	uint64_t period, scan_len;
	uint64_t bs, size, cache, ops, warmup, seconds;
	double cache_pct;             /* --cache P%: of the footprint (0: --cache is bytes) */
	uint64_t footprint_blocks;    /* with cache_pct: 4 KiB blocks the requests touch */
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
	char policy[64];                  /* the label */
	struct tier_stats st;          /* counted region only */
	struct tier_store_stats base, cache;
	uint64_t ops, client_bytes, t_ns;
	double lat_mean_us, lat_p99_us;
	struct opt_result opt_obj, opt_blk, lru_obj, lru_blk;
	struct opt_result lru_held;           /* LRU at the engine's granularity: the usable size or
					       * the mean size held, the larger */
	uint64_t cap_objects, cap_blocks;     /* usable: target x cache_target_full_ratio */
	uint64_t cap_held;                    /* its capacity, in pieces of that granularity */
	double held_bytes;                    /* mean cached bytes over the counted requests */
	double usable_bytes;                  /* target_max_bytes x cache_target_full_ratio */
	bool extent;                          /* extent granularity: compare with the block refs */
	double base_busy_s;                   /* device-model service time the base pool spent */
	uint64_t mem_map, mem_policy;         /* engine bytes per cached object: all, policy */
	uint64_t uniq_objects, uniq_blocks;   /* distinct ones touched over the whole run */
	uint64_t peak_full_ppm;               /* highest full ratio seen (sampled) */
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
	uint64_t t0;                          /* virtual time of the first request (SIM_T0_NS or later) */
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
	/* the reference sequence: one access per object piece of a request */
	uint64_t *obj_ids, *blk_ids;   /* object number; first extent_size block of the piece */
	uint32_t *acc_w;               /* bytes of the piece */
	size_t n_acc, cap_acc, warm_acc;
	uint64_t *lat_ns;              /* per request, counted region */
	uint64_t n_lat, lat_sum;
	uint64_t warm_t, object_size;
	struct tier_stats warm_st;
	uint64_t peak_full_ppm;
	double held_sum;                      /* cached bytes, summed over the counted samples */
	uint64_t held_n;
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

/* ---- policies: libtier's presets (tier_params_preset: tierd, ceph, promote-always) ---- */

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

/*
 * A policy spec: [LABEL:]PRESET[+KEY=VALUE...].  PRESET is one of libtier's
 * presets (tier_params_preset) or "default", which is exactly tierd's
 * defaults (the "tierd" preset); each +KEY=VALUE applies over it, then the
 * command line's --set.  The label names the column (the spec if none).
 */
static void build_params(const struct sim_cfg *c, const char *spec, struct tier_params *p,
			 char *desc, size_t desclen)
{
	static const char *show[] = {
		"promote_granularity", "evict_policy", "admission", "min_write_recency_for_promote",
		"min_read_recency_for_promote", "write_miss",
	};
	char v[64], err[256], buf[512], *preset, *save = NULL, *kv;
	const char *colon = strchr(spec, ':');
	size_t off = 0;

	snprintf(buf, sizeof(buf), "%s", colon ? colon + 1 : spec);
	preset = strtok_r(buf, "+", &save);
	if (!preset)
		die("policy '%s': no preset", spec);
	tier_params_default(p);
	p->target_max_bytes = c->cache;
	/* seed 004's cache tier settings */
	set_param(p, "cache_target_dirty_ratio=0.4");
	set_param(p, "cache_target_full_ratio=0.8");
	if (tier_params_preset(p, strcmp(preset, "default") ? preset : "tierd", err,
			       sizeof(err)) < 0)
		die("policy %s: %s (or default)", spec, err);
	while ((kv = strtok_r(NULL, "+", &save)))
		set_param(p, kv);
	for (size_t k = 0; k < c->n_sets; k++)
		set_param(p, c->sets[k]);
	if (tier_params_check(p, err, sizeof(err)) < 0)
		die("policy %s: %s", spec, err);
	desc[0] = '\0';
	for (size_t k = 0; k < sizeof(show) / sizeof(show[0]); k++) {
		if (tier_params_get(p, show[k], v, sizeof(v)) == 0 && off < desclen)
			off += (size_t)snprintf(desc + off, desclen - off, "%s%s=%s",
						k ? " " : "", show[k], v);
	}
}

/* The column label of a spec. */
static void spec_label(const char *spec, char *out, size_t len)
{
	const char *colon = strchr(spec, ':');
	int n = colon ? (int)(colon - spec) : (int)strlen(spec);

	snprintf(out, len, "%.*s", n, spec);
}

/* ---- the loop ---- */

/*
 * The cache may pass its target (extent growth, promotions in flight): watch
 * it.  After the warm-up, also what it holds: the agent keeps the cache at
 * cache_target_full_ratio only if it keeps up (a cache of many small
 * copies whose coldest are dirty sits higher, up to where admission
 * closes), so the LRU at the usable size is not always the same capacity
 * (compute_refs: lru_held).
 */
static void sample_full(struct sim *s)
{
	struct tier_stats st;

	tier_engine_get_stats(s->eng, &st);
	if (st.full_ratio_ppm > s->peak_full_ppm)
		s->peak_full_ppm = st.full_ratio_ppm;
	if (s->warm_taken) {
		s->held_sum += (double)st.cached_bytes;
		s->held_n++;
	}
}

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
	if (s->done % 64 == 0)
		sample_full(s);
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
	return s->t0 + s->cfg->trace.recs[i].time_us * 1000u;
}

/* The reference sequence gets one access per object the request touches, as the engine counts. */
static void push_pieces(struct sim *s, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;

	while (off < end) {
		uint64_t obj = off / s->object_size;
		uint64_t stop = (obj + 1) * s->object_size;

		if (stop > end)
			stop = end;
		if (s->n_acc == s->cap_acc) {
			size_t cap = s->cap_acc ? s->cap_acc * 2 : 1 << 16;

			s->obj_ids = realloc(s->obj_ids, cap * sizeof(*s->obj_ids));
			s->blk_ids = realloc(s->blk_ids, cap * sizeof(*s->blk_ids));
			s->acc_w = realloc(s->acc_w, cap * sizeof(*s->acc_w));
			if (!s->obj_ids || !s->blk_ids || !s->acc_w)
				die("out of memory");
			s->cap_acc = cap;
		}
		s->obj_ids[s->n_acc] = obj;
		s->blk_ids[s->n_acc] = off / s->params.extent_size;
		s->acc_w[s->n_acc] = (uint32_t)(stop - off);
		s->n_acc++;
		off = stop;
	}
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
	if (r->type != TIER_REQ_FLUSH)
		push_pieces(s, r->off, r->len);
}

static void take_warm_snapshot(struct sim *s)
{
	tier_engine_get_stats(s->eng, &s->warm_st);
	tier_store_get_stats(s->base, &s->warm_base);
	tier_store_get_stats(s->cache, &s->warm_cache);
	s->warm_t = s->now;
	s->warm_acc = s->n_acc;
	s->warm_taken = true;
}

static bool out_of_time(const struct sim *s)
{
	return s->cfg->seconds && s->now - s->t0 >= s->cfg->seconds * 1000000000ull;
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

/* Move virtual time to t, completing due store ops; returns how many ran. */
static size_t advance_to(struct sim *s, uint64_t t)
{
	if (t > s->now)
		s->now = t;
	tier_store_mem_advance(s->base, s->now);
	tier_store_mem_advance(s->cache, s->now);
	return tier_cq_drain(s->cq);
}

/*
 * The engine is ticked when its timer is due and after completions (as the
 * daemon does "after draining"), so agent work continues as ops finish.
 */
static void run_loop(struct sim *s)
{
	uint64_t next_tick = s->now;
	size_t drained = 0;

	for (;;) {
		bool more = s->issued < s->total && !out_of_time(s);
		uint64_t t;

		fill_slots(s);
		drained += tier_cq_drain(s->cq);
		if (s->now >= next_tick || drained) {
			next_tick = s->now + tier_engine_tick(s->eng) * 1000000ull;
			drained = 0;
		}
		if (!more && !any_busy(s))
			break;
		t = min_u64(tier_store_mem_next_due(s->base), tier_store_mem_next_due(s->cache));
		if (more && s->issued - s->done < s->cfg->qd)
			t = min_u64(t, arrival(s, s->issued));
		t = min_u64(t, next_tick);
		drained += advance_to(s, t);
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

/* Distinct values among ids[0..n) (sorts a copy). */
static uint64_t count_distinct(const uint64_t *ids, uint64_t n)
{
	uint64_t *c, d = 0;

	if (!n)
		return 0;
	c = malloc(n * sizeof(*c));
	if (!c)
		die("out of memory");
	memcpy(c, ids, n * sizeof(*c));
	qsort(c, n, sizeof(*c), cmp_u64);
	for (uint64_t i = 0; i < n; i++)
		d += i == 0 || c[i] != c[i - 1];
	free(c);
	return d;
}

/*
 * OPT (bypass) and LRU on the pieces the run issued, at object and at
 * extent_size granularity, with the usable capacity: target_max_bytes x
 * cache_target_full_ratio (where the agent keeps the cache).  And an LRU
 * at the engine's granularity (blocks in extent mode, objects else) of
 * the size the cache held on average over the counted requests
 * (held_bytes, sampled every 64 completions) where that is more than the
 * usable size: the capacity the engine used on average, when the agent did
 * not keep the cache at its line (a mean: it counts the time the cache was
 * still filling after the warm-up, so it is a little under the cache at
 * its fullest).  (Where it held less, a cache still
 * filling or the agent's band under the line, the usable size stays: an
 * average over a filling cache would be smaller than the cache it ended.)
 */
static void compute_refs(struct sim *s, struct sim_result *r)
{
	size_t k = s->n_acc, warm = s->warm_taken ? s->warm_acc : k;
	double usable = (double)s->params.target_max_bytes * s->params.cache_target_full_ratio;
	int ret;

	r->uniq_objects = count_distinct(s->obj_ids, k);
	r->uniq_blocks = count_distinct(s->blk_ids, k);
	r->cap_objects = (uint64_t)(usable / (double)s->object_size);
	r->cap_blocks = (uint64_t)(usable / (double)s->params.extent_size);
	r->extent = s->params.promote_granularity == TIER_GRAN_EXTENT;
	ret = opt_simulate_w(s->obj_ids, s->acc_w, k, r->cap_objects, true, warm, &r->opt_obj);
	if (ret == 0)
		ret = opt_simulate_w(s->blk_ids, s->acc_w, k, r->cap_blocks, true, warm, &r->opt_blk);
	if (ret == 0)
		ret = lru_simulate(s->obj_ids, s->acc_w, k, r->cap_objects, warm, &r->lru_obj);
	if (ret == 0)
		ret = lru_simulate(s->blk_ids, s->acc_w, k, r->cap_blocks, warm, &r->lru_blk);
	r->usable_bytes = usable;
	r->held_bytes = s->held_n ? s->held_sum / (double)s->held_n : 0.0;
	r->cap_held = (uint64_t)((r->held_bytes > usable ? r->held_bytes : usable) /
				 (double)(r->extent ? s->params.extent_size : s->object_size));
	if (ret == 0)
		ret = lru_simulate(r->extent ? s->blk_ids : s->obj_ids, s->acc_w, k, r->cap_held, warm,
				   &r->lru_held);
	if (ret < 0)
		die("OPT/LRU: %s", strerror(-ret));
}

/* Device-model time the base pool's servers spent: latency per op plus bytes / bandwidth. */
static double busy_seconds(const struct tier_store_stats *st, const struct tier_devmodel_params *m)
{
	double ns = 0;
	uint64_t bytes = st->bytes[TIER_STORE_READ] + st->bytes[TIER_STORE_WRITE];

	for (int i = 1; i < TIER_STORE_OPCODE_MAX; i++)
		ns += (double)st->ops[i] * 1000.0 *
		      (i == TIER_STORE_READ ? m->read_latency_us : m->write_latency_us);
	if (m->bandwidth)
		ns += (double)bytes * 1e9 / (double)m->bandwidth;
	return ns / 1e9;
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

/*
 * The base pool holds the image: every object of it exists (no bytes are
 * kept: no_data), as a written RBD image's would.  A read of a block the
 * workload never wrote is then a read of data in base, not of a hole (whose
 * zeros a read fill does not cache).  Laid out before the engine starts,
 * in virtual time before the first request (at SIM_T0_NS, or once the
 * layout is done for a large image): the counted run never sees it.
 */
#define SIM_PREFIX "rbd_data.sim"

static void base_cb(struct tier_store_op *op)
{
	(*(size_t *)op->priv)--;
}

static void populate_base(struct sim *s)
{
	uint64_t os = s->params.object_size, n = (s->cfg->size + os - 1) / os;
	struct tier_store_op *ops = calloc(n ? n : 1, sizeof(*ops));
	static char byte;
	size_t left = n;

	if (!ops)
		die("out of memory");
	for (uint64_t i = 0; i < n; i++) {
		uint64_t len = s->cfg->size - i * os < os ? s->cfg->size - i * os : os;

		ops[i].opcode = TIER_STORE_WRITE;
		snprintf(ops[i].oid, sizeof(ops[i].oid), "%s.%016llx", SIM_PREFIX,
			 (unsigned long long)i);
		ops[i].off = len - 1;
		ops[i].len = 1;
		ops[i].buf = &byte;
		ops[i].cb = base_cb;
		ops[i].priv = &left;
		if (tier_store_submit(s->base, &ops[i]) < 0)
			die("base layout: submit failed");
	}
	while (left) {
		uint64_t t = tier_store_mem_next_due(s->base);

		if (t == UINT64_MAX && !tier_cq_drain(s->cq))
			die("base layout: %zu writes lost", left);
		if (t != UINT64_MAX)
			advance_to(s, t);
	}
	for (uint64_t i = 0; i < n; i++)
		if (ops[i].result < 0)
			die("base layout: %s", strerror(-ops[i].result));
	free(ops);
}

static void open_engine(struct sim *s)
{
	struct tier_engine_opts eo = {
		.base = s->base, .cache = s->cache, .params = s->params,
		.log = sim_log, .log_arg = s, .clock = sim_clock, .clock_arg = s,
	};
	struct tier_image_opts io = {
		.name = "sim", .object_prefix = SIM_PREFIX, .size = s->cfg->size,
	};
	int ret;

	ret = tier_engine_create(&eo, &s->eng);
	if (ret == 0)
		tier_engine_set_debug(s->eng, s->cfg->verbose >= 2);
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
	s->lat_ns = malloc((s->total + 1) * sizeof(*s->lat_ns));
	s->buf = calloc(1, maxlen ? maxlen : 1);
	if (!s->slots || !s->lat_ns || !s->buf)
		die("out of memory");
	for (uint32_t q = 0; q < s->cfg->qd; q++)
		s->slots[q].sim = s;
}

/* The generator's options from the command line. */
static struct gen_workload_opts gen_opts(const struct sim_cfg *c)
{
	return (struct gen_workload_opts){
		.type = c->dist, .param = c->dist_param, .write_pct = c->write_pct,
		.bs = c->bs, .size = c->size, .seed = c->seed, .pattern = c->pattern,
		.hot_pct = c->hot_pct, .period = c->period, .scan_len = c->scan_len,
		.parts = c->parts,
	};
}

static void run_one(const struct sim_cfg *c, const char *policy, struct sim_result *r)
{
	struct sim s = { .cfg = c, .now = SIM_T0_NS };
	uint64_t maxlen = c->bs;
	struct timespec w0, w1;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &w0);
	memset(r, 0, sizeof(*r));
	spec_label(policy, r->policy, sizeof(r->policy));
	build_params(c, policy, &s.params, r->params, sizeof(r->params));
	s.object_size = s.params.object_size;
	s.total = c->trace_path ? c->trace.n : c->ops;
	if (c->trace_path) {
		for (size_t i = 0; i < c->trace.n; i++)
			if (c->trace.recs[i].len > maxlen)
				maxlen = c->trace.recs[i].len;
	} else {
		struct gen_workload_opts wo = gen_opts(c);

		ret = gen_workload_init(&s.wl, &wo);
		if (ret < 0)
			die("workload: %s", strerror(-ret));
	}
	alloc_sim(&s, maxlen);
	make_stores(&s);
	populate_base(&s);
	open_engine(&s);
	s.t0 = s.now > SIM_T0_NS ? s.now : SIM_T0_NS;
	s.now = s.t0;
	advance_to(&s, s.now);
	run_loop(&s);
	if (!s.warm_taken)
		take_warm_snapshot(&s);

	sample_full(&s);
	r->peak_full_ppm = s.peak_full_ppm;
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
	r->mem_map = tier_engine_bytes_per_object(s.eng);
	r->mem_policy = tier_engine_policy_bytes_per_object(s.eng);
	r->base_busy_s = busy_seconds(&r->base, &c->base_model);
	compute_refs(&s, r);

	settle(&s);
	tier_image_close(s.img);
	tier_engine_destroy(s.eng);
	tier_store_destroy(s.base);
	tier_store_destroy(s.cache);
	tier_cq_destroy(s.cq);
	free(s.slots);
	free(s.obj_ids);
	free(s.blk_ids);
	free(s.acc_w);
	gen_workload_free(&s.wl);
	free(s.lat_ns);
	free(s.buf);
	clock_gettime(CLOCK_MONOTONIC, &w1);
	r->wall_s = (double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) / 1e9;
}

/* ---- output ---- */

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

enum fmt { F_U64, F_PCT, F_X, F_D1, F_D3 };

/* Misses over hits + misses, per object piece (the engine's counters). */
static double miss_ratio(const struct sim_result *r)
{
	uint64_t m = r->st.read_misses + r->st.write_misses;

	return ratio(m, m + r->st.read_hits + r->st.write_hits);
}

/* Bytes of the missed pieces over the client's bytes. */
static double byte_miss_ratio(const struct sim_result *r)
{
	return ratio(r->st.read_miss_bytes + r->st.write_miss_bytes,
		     r->st.read_bytes + r->st.write_bytes + r->st.trim_bytes + r->st.zero_bytes);
}

static double ref_byte_miss(const struct opt_result *o)
{
	return ratio(o->miss_bytes, o->bytes);
}

/* a / b, with 0 / 0 = 1 (both perfect) and x / 0 shown as 99. */
static double over(double a, double b)
{
	if (b > 0)
		return a / b;
	return a > 0 ? 99.0 : 1.0;
}

struct row {
	const char *name, *csv;
	enum fmt fmt;
	double (*get)(const struct sim_result *r);
};

#define GETTER(n, expr) \
	static double get_##n(const struct sim_result *r) { return (double)(expr); }
GETTER(ops, r->ops)
GETTER(vsec, (double)r->t_ns / 1e9)
GETTER(iops, r->t_ns ? (double)r->ops / ((double)r->t_ns / 1e9) : 0.0)
GETTER(lat_mean, r->lat_mean_us / 1000.0)
GETTER(lat_p99, r->lat_p99_us / 1000.0)
GETTER(rhit, ratio(r->st.read_hits, r->st.read_hits + r->st.read_misses))
GETTER(whit, ratio(r->st.write_hits, r->st.write_hits + r->st.write_misses))
GETTER(hit, ratio(r->st.read_hits + r->st.write_hits,
		  r->st.read_hits + r->st.write_hits + r->st.read_misses + r->st.write_misses))
GETTER(miss, miss_ratio(r))
GETTER(bmiss, byte_miss_ratio(r))
GETTER(opt_miss_obj, r->opt_obj.miss_ratio)
GETTER(lru_miss_obj, r->lru_obj.miss_ratio)
GETTER(opt_miss_blk, r->opt_blk.miss_ratio)
GETTER(lru_miss_blk, r->lru_blk.miss_ratio)
GETTER(over_opt, over(miss_ratio(r), (r->extent ? &r->opt_blk : &r->opt_obj)->miss_ratio))
GETTER(over_lru, over(miss_ratio(r), (r->extent ? &r->lru_blk : &r->lru_obj)->miss_ratio))
GETTER(bover_lru, over(byte_miss_ratio(r), ref_byte_miss(r->extent ? &r->lru_blk : &r->lru_obj)))
GETTER(lru_miss_held, r->lru_held.miss_ratio)
GETTER(over_lru_held, over(miss_ratio(r), r->lru_held.miss_ratio))
GETTER(held, r->usable_bytes > 0 ? r->held_bytes / r->usable_bytes : 0.0)
GETTER(busy, r->base_busy_s)
GETTER(busy_req, r->ops ? r->base_busy_s * 1000.0 / (double)r->ops : 0.0)
GETTER(cache_w, ratio(r->cache.bytes[TIER_STORE_WRITE], r->client_bytes))
GETTER(mem_obj, r->mem_map)
GETTER(mem_pol, r->mem_policy)
GETTER(cap_obj, r->cap_objects)
GETTER(uniq_obj, r->uniq_objects)
GETTER(uniq_blk, r->uniq_blocks)
GETTER(touched, ratio(r->uniq_blocks, r->cap_blocks))
GETTER(promo_b, ratio(r->st.promote_bytes, r->client_bytes))
GETTER(flush_b, ratio(r->st.flush_bytes, r->client_bytes))
GETTER(proxy_b, ratio(r->st.proxy_read_bytes + r->st.proxy_write_bytes, r->client_bytes))
GETTER(base_b, ratio(r->base.bytes[TIER_STORE_READ] + r->base.bytes[TIER_STORE_WRITE],
		     r->client_bytes))
GETTER(cache_b, ratio(r->cache.bytes[TIER_STORE_READ] + r->cache.bytes[TIER_STORE_WRITE],
		      r->client_bytes))
GETTER(promotions, r->st.promotions)
GETTER(throttled, r->st.promote_throttled)
GETTER(fills, r->st.fills)
GETTER(fill_b, ratio(r->st.fill_bytes, r->client_bytes))
GETTER(fskip_thr, r->st.fill_skip_throttled)
GETTER(rf_busy, r->st.fill_skip_busy)
GETTER(rf_unsynced, r->st.fill_skip_unsynced)
GETTER(rf_partial, r->st.fill_skip_partial)
GETTER(flushes, r->st.flushes)
GETTER(evictions, r->st.evictions)
GETTER(evict_partial, r->st.evict_partial)
GETTER(evict_again, r->st.evict_again)
GETTER(cached_obj, r->st.cached_objects)
GETTER(dirty_obj, r->st.dirty_objects)
GETTER(full_end, (double)r->st.full_ratio_ppm / 1e6)
GETTER(full_peak, (double)r->peak_full_ppm / 1e6)
GETTER(base_iops, r->t_ns ? (double)(r->base.ops[TIER_STORE_READ] + r->base.ops[TIER_STORE_WRITE]) /
	((double)r->t_ns / 1e9) : 0.0)
GETTER(wall, r->wall_s)
#undef GETTER

static const struct row rows[] = {
	{ "requests (counted)", "ops", F_U64, get_ops },
	{ "miss ratio", "miss", F_PCT, get_miss },
	{ "byte miss ratio", "byte_miss", F_PCT, get_bmiss },
	{ "OPT miss, objects", "opt_miss_object", F_PCT, get_opt_miss_obj },
	{ "LRU miss, objects", "lru_miss_object", F_PCT, get_lru_miss_obj },
	{ "OPT miss, blocks", "opt_miss_block", F_PCT, get_opt_miss_blk },
	{ "LRU miss, blocks", "lru_miss_block", F_PCT, get_lru_miss_blk },
	{ "miss / OPT", "miss_over_opt", F_X, get_over_opt },
	{ "miss / LRU", "miss_over_lru", F_X, get_over_lru },
	{ "byte miss / LRU", "byte_miss_over_lru", F_X, get_bover_lru },
	{ "LRU miss, >= mean held", "lru_miss_held", F_PCT, get_lru_miss_held },
	{ "miss / LRU >= mean held", "miss_over_lru_held", F_X, get_over_lru_held },
	{ "base busy s", "base_busy_s", F_D3, get_busy },
	{ "base busy ms/request", "base_busy_ms_per_req", F_D3, get_busy_req },
	{ "cache written B/client B", "cache_write_per_byte", F_X, get_cache_w },
	{ "engine B/cached object", "mem_per_object", F_U64, get_mem_obj },
	{ "  of it policy+sketch", "policy_mem_per_object", F_U64, get_mem_pol },
	{ "virtual seconds", "virtual_s", F_D3, get_vsec },
	{ "IOPS (virtual)", "iops", F_D1, get_iops },
	{ "latency mean ms", "lat_mean_ms", F_D3, get_lat_mean },
	{ "latency p99 ms", "lat_p99_ms", F_D3, get_lat_p99 },
	{ "read hit ratio", "read_hit", F_PCT, get_rhit },
	{ "write hit ratio", "write_hit", F_PCT, get_whit },
	{ "hit ratio", "hit", F_PCT, get_hit },

	{ "usable cache, objects", "cache_objects", F_U64, get_cap_obj },
	{ "objects touched", "objects_touched", F_U64, get_uniq_obj },
	{ "blocks touched", "blocks_touched", F_U64, get_uniq_blk },
	{ "touched blocks/cache", "touched_per_cache", F_X, get_touched },
	{ "promoted B/client B", "promote_per_byte", F_X, get_promo_b },
	{ "flushed B/client B", "flush_per_byte", F_X, get_flush_b },
	{ "proxied B/client B", "proxy_per_byte", F_X, get_proxy_b },
	{ "base I/O B/client B", "base_per_byte", F_X, get_base_b },
	{ "cache I/O B/client B", "cache_per_byte", F_X, get_cache_b },
	{ "base ops/s", "base_iops", F_D1, get_base_iops },
	{ "promotions", "promotions", F_U64, get_promotions },
	{ "promote throttled", "promote_throttled", F_U64, get_throttled },
	{ "fills", "fills", F_U64, get_fills },
	{ "filled B/client B", "fill_per_byte", F_X, get_fill_b },
	{ "fill throttled", "fill_skip_throttled", F_U64, get_fskip_thr },
	{ "rfill refused busy", "fill_skip_busy", F_U64, get_rf_busy },
	{ "rfill refused unsync", "fill_skip_unsynced", F_U64, get_rf_unsynced },
	{ "rfill refused partial", "fill_skip_partial", F_U64, get_rf_partial },
	{ "flushes", "flushes", F_U64, get_flushes },
	{ "evictions", "evictions", F_U64, get_evictions },
	{ "partial evictions", "evict_partial", F_U64, get_evict_partial },
	{ "second chances", "evict_again", F_U64, get_evict_again },
	{ "cached objects (end)", "cached_objects_end", F_U64, get_cached_obj },
	{ "dirty objects (end)", "dirty_objects_end", F_U64, get_dirty_obj },
	{ "full ratio (end)", "full_ratio_end", F_X, get_full_end },
	{ "full ratio (peak)", "full_ratio_peak", F_X, get_full_peak },
	{ "held / usable", "held_over_usable", F_X, get_held },
	{ "wall seconds", "wall_s", F_D3, get_wall },
};

static void fmt_val(char *out, size_t len, enum fmt f, double v)
{
	switch (f) {
	case F_U64: snprintf(out, len, "%.0f", v); break;
	case F_PCT: snprintf(out, len, "%.2f%%", v * 100.0); break;
	case F_X:   snprintf(out, len, "%.3f", v); break;
	case F_D1:  snprintf(out, len, "%.1f", v); break;
	case F_D3:  snprintf(out, len, "%.3f", v); break;
	}
}

static void print_table(const struct sim_cfg *c, const struct sim_result *r, size_t n)
{
	char v[64];

	if (c->trace_path)
		printf("tier-sim: trace=%s (%s, %zu requests) qd=%u cache=%" PRIu64
		       " warmup=%" PRIu64 "\n", c->trace_path, trace_format_name(c->trace.format),
		       c->trace.n, c->qd, c->cache, c->warmup);
	else
		printf("tier-sim: dist=%s rw=%s pattern=%s bs=%" PRIu64 " size=%" PRIu64 " cache=%"
		       PRIu64 " qd=%u ops=%" PRIu64 " warmup=%" PRIu64 " seed=%u\n", c->dist_name,
		       c->rw_name, c->pattern_name, c->bs, c->size, c->cache, c->qd, c->ops,
		       c->warmup, c->seed);
	if (c->cache_pct > 0)
		printf("cache: %g%% of the footprint, %" PRIu64 " blocks of 4 KiB\n", c->cache_pct,
		       c->footprint_blocks);
	printf("base=%s (r %uus w %uus %" PRIu64 " B/s qd %u)  cache=%s (r %uus w %uus %"
	       PRIu64 " B/s qd %u)\n", c->base_profile, c->base_model.read_latency_us,
	       c->base_model.write_latency_us, c->base_model.bandwidth, c->base_model.queue_depth,
	       c->cache_profile, c->cache_model.read_latency_us, c->cache_model.write_latency_us,
	       c->cache_model.bandwidth, c->cache_model.queue_depth);
	for (size_t i = 0; i < n; i++)
		printf("  %-15s %s\n", r[i].policy, r[i].params);
	printf("\n%-22s", "");
	for (size_t i = 0; i < n; i++)
		printf(" %15s", r[i].policy);
	printf("\n");
	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		printf("%-22s", rows[k].name);
		for (size_t i = 0; i < n; i++) {
			fmt_val(v, sizeof(v), rows[k].fmt, rows[k].get(&r[i]));
			printf(" %15s", v);
		}
		printf("\n");
	}
}

static void write_csv(const struct sim_cfg *c, const struct sim_result *r, size_t n)
{
	FILE *f = fopen(c->csv_path, "w");
	char v[64];

	if (!f)
		die("%s: %s", c->csv_path, strerror(errno));
	fprintf(f, "policy,workload,qd,cache_bytes");
	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++)
		fprintf(f, ",%s", rows[k].csv);
	fprintf(f, "\n");
	for (size_t i = 0; i < n; i++) {
		if (c->label)
			fprintf(f, "%s,%s,%u,%" PRIu64, r[i].policy, c->label, c->qd, c->cache);
		else if (c->trace_path)
			fprintf(f, "%s,trace:%s,%u,%" PRIu64, r[i].policy, c->trace_path, c->qd, c->cache);
		else
			fprintf(f, "%s,%s/%s/bs%" PRIu64 "/size%" PRIu64 ",%u,%" PRIu64, r[i].policy,
				c->dist_name, c->rw_name, c->bs, c->size, c->qd, c->cache);
		for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
			double x = rows[k].get(&r[i]);

			if (rows[k].fmt == F_PCT)
				snprintf(v, sizeof(v), "%.6f", x);
			else
				fmt_val(v, sizeof(v), rows[k].fmt, x);
			fprintf(f, ",%s", v);
		}
		fprintf(f, "\n");
	}
	if (fclose(f) != 0)
		die("%s: %s", c->csv_path, strerror(errno));
}

/* ---- command line ---- */

static void usage(FILE *f)
{
	fprintf(f,
"usage: tier-sim [options]\n"
"  --dist zipf:T|pareto:H|uniform|seq   offsets, fio-compatible (default zipf:1.1)\n"
"  --rw write|read|randrw:W             W = write percent (default write)\n"
"  --pattern plain|hotscan|shift|log|vms|loop  over the distribution (tools/gen.h):\n"
"                   hotscan: hot part + a scan every --period; shift: the hot spot\n"
"                   moves every --period; log: half the requests append to a\n"
"                   write-once log past the hot part; vms: --parts images side by side;\n"
"                   loop: a cycle over --period positions spread over the image\n"
"  --hot-pct P (10) --period N (50000) --scan-len N (period/5) --parts N (20)\n"
"  --label NAME     the workload's name in the CSV\n"
"  --bs SIZE        request size (default 4k)     --size SIZE  image (default 4G)\n"
"  --cache SIZE     target_max_bytes (default 1G), or P%%: of the footprint (the\n"
"                   4 KiB blocks the requests touch)   --qd N  closed-loop depth (16)\n"
"  --ops N          requests (default 200000)     --seconds S  stop after S virtual s\n"
"  --warmup N       first N requests not counted  --seed N     generator seed (1)\n"
"  --trace FILE     CSV or fio iolog v2/v3 instead of the generator\n"
"  --no-stall       trace: ignore timestamps, keep qd requests in flight\n"
"  --policy LIST    comma list of specs [LABEL:]PRESET[+KEY=VALUE...], PRESET one of\n"
"                   default (= tierd's defaults, the tierd preset), ceph, promote-always\n"
"                   (default promote-always,ceph,default); e.g. lru:default+evict_policy=lru\n"
"  --set KEY=VALUE  any [tier] parameter, after the policy preset (repeatable)\n"
"  --base-profile hdd|hdd-journal|ssd|none   --cache-profile (the same)  device models\n"
"  --dev POOL.FIELD=V  base.write_latency_us=500, cache.bandwidth=..., queue_depth\n"
"  --csv FILE       also write one CSV row per policy\n"
"  -v               engine log at info (-vv debug)\n");
}

static uint64_t parse_size(const char *opt, const char *v)
{
	uint64_t x;

	if (tier_parse_bytes(v, &x) < 0 || x == 0)
		die("%s: bad size '%s'", opt, v);
	return x;
}

/* --cache SIZE, or P% of the footprint (set_footprint_cache) */
static void parse_cache(struct sim_cfg *c, const char *v)
{
	size_t n = strlen(v);
	char *end;

	c->cache_pct = 0;
	if (n && v[n - 1] == '%') {
		c->cache_pct = strtod(v, &end);
		if (end != v + n - 1 || !(c->cache_pct > 0 && c->cache_pct <= 1000))
			die("--cache: bad percentage '%s' (0 < P <= 1000)", v);
		return;
	}
	c->cache = parse_size("--cache", v);
}

static uint64_t parse_num(const char *opt, const char *v)
{
	uint64_t x;

	if (tier_parse_u64(v, &x) < 0)
		die("%s: bad number '%s'", opt, v);
	return x;
}

static void parse_dev(struct sim_cfg *c, const char *arg)
{
	char pool[16], field[32];
	struct tier_devmodel_params *m;
	const char *dot = strchr(arg, '.'), *eq = strchr(arg, '=');
	uint64_t v;

	if (!dot || !eq || eq < dot || (size_t)(dot - arg) >= sizeof(pool) ||
	    (size_t)(eq - dot - 1) >= sizeof(field))
		die("--dev wants POOL.FIELD=VALUE, got '%s'", arg);
	snprintf(pool, sizeof(pool), "%.*s", (int)(dot - arg), arg);
	snprintf(field, sizeof(field), "%.*s", (int)(eq - dot - 1), dot + 1);
	m = !strcmp(pool, "base") ? &c->base_model : !strcmp(pool, "cache") ? &c->cache_model : NULL;
	if (!m)
		die("--dev: pool must be base or cache, got '%s'", pool);
	if (!strcmp(field, "bandwidth"))
		v = parse_size("--dev", eq + 1);
	else
		v = parse_num("--dev", eq + 1);
	if (!strcmp(field, "read_latency_us"))
		m->read_latency_us = (uint32_t)v;
	else if (!strcmp(field, "write_latency_us"))
		m->write_latency_us = (uint32_t)v;
	else if (!strcmp(field, "latency_us"))
		m->read_latency_us = m->write_latency_us = (uint32_t)v;
	else if (!strcmp(field, "bandwidth"))
		m->bandwidth = v;
	else if (!strcmp(field, "queue_depth"))
		m->queue_depth = (uint32_t)v;
	else
		die("--dev: unknown field '%s'", field);
}

static void parse_policies(struct sim_cfg *c, char *list)
{
	for (char *save = NULL, *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (c->n_policies == SIM_MAX_POLICIES)
			die("too many policies");
		c->policies[c->n_policies++] = p;
	}
}

static void profiles(struct sim_cfg *c)
{
	if (tier_devmodel_profile(c->base_profile, &c->base_model) < 0)
		die("unknown base profile '%s'", c->base_profile);
	if (tier_devmodel_profile(c->cache_profile, &c->cache_model) < 0)
		die("unknown cache profile '%s'", c->cache_profile);
}

static void parse_args(struct sim_cfg *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "dist", 1, NULL, 'd' }, { "rw", 1, NULL, 'r' }, { "bs", 1, NULL, 'b' },
		{ "size", 1, NULL, 'S' }, { "cache", 1, NULL, 'c' }, { "ops", 1, NULL, 'n' },
		{ "seconds", 1, NULL, 't' }, { "qd", 1, NULL, 'q' }, { "warmup", 1, NULL, 'w' },
		{ "seed", 1, NULL, 'e' }, { "trace", 1, NULL, 'T' }, { "no-stall", 0, NULL, 'N' },
		{ "policy", 1, NULL, 'p' }, { "set", 1, NULL, 's' }, { "csv", 1, NULL, 'C' },
		{ "base-profile", 1, NULL, 'B' }, { "cache-profile", 1, NULL, 'K' },
		{ "dev", 1, NULL, 'D' }, { "help", 0, NULL, 'h' },
		{ "pattern", 1, NULL, 'P' }, { "hot-pct", 1, NULL, 'H' }, { "period", 1, NULL, 'R' },
		{ "scan-len", 1, NULL, 'L' }, { "parts", 1, NULL, 'A' }, { "label", 1, NULL, 'l' },
		{ NULL, 0, NULL, 0 },
	};
	char *devs[16];
	size_t n_devs = 0;
	int o;

	while ((o = getopt_long(argc, argv, "vh", lo, NULL)) != -1) {
		switch (o) {
		case 'd':
			c->dist_name = optarg;
			if (gen_dist_parse(optarg, &c->dist, &c->dist_param) < 0)
				die("--dist: bad distribution '%s'", optarg);
			break;
		case 'r':
			c->rw_name = optarg;
			if (gen_parse_rw(optarg, &c->write_pct) < 0)
				die("--rw: bad mode '%s'", optarg);
			break;
		case 'b': c->bs = parse_size("--bs", optarg); break;
		case 'S': c->size = parse_size("--size", optarg); break;
		case 'c': parse_cache(c, optarg); break;
		case 'n': c->ops = parse_num("--ops", optarg); break;
		case 't': c->seconds = parse_num("--seconds", optarg); break;
		case 'q': c->qd = (uint32_t)parse_num("--qd", optarg); break;
		case 'w': c->warmup = parse_num("--warmup", optarg); break;
		case 'e': c->seed = (uint32_t)parse_num("--seed", optarg); break;
		case 'T': c->trace_path = optarg; break;
		case 'N': c->no_stall = true; break;
		case 'p': parse_policies(c, optarg); break;
		case 's':
			if (c->n_sets == SIM_MAX_SETS)
				die("too many --set");
			c->sets[c->n_sets++] = optarg;
			break;
		case 'C': c->csv_path = optarg; break;
		case 'B': c->base_profile = optarg; break;
		case 'K': c->cache_profile = optarg; break;
		case 'D':
			if (n_devs == sizeof(devs) / sizeof(devs[0]))
				die("too many --dev");
			devs[n_devs++] = optarg;
			break;
		case 'P':
			c->pattern_name = optarg;
			if (gen_parse_pattern(optarg, &c->pattern) < 0)
				die("--pattern: plain, hotscan, shift, log, vms or loop, got '%s'", optarg);
			break;
		case 'H': c->hot_pct = (uint32_t)parse_num("--hot-pct", optarg); break;
		case 'R': c->period = parse_num("--period", optarg); break;
		case 'L': c->scan_len = parse_num("--scan-len", optarg); break;
		case 'A': c->parts = (uint32_t)parse_num("--parts", optarg); break;
		case 'l': c->label = optarg; break;
		case 'v': c->verbose++; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind != argc)
		die("unexpected argument '%s'", argv[optind]);
	profiles(c);
	for (size_t i = 0; i < n_devs; i++)
		parse_dev(c, devs[i]);
	if (c->qd == 0 || c->qd > SIM_MAX_QD)
		die("--qd must be 1..%d", SIM_MAX_QD);
	if (c->hot_pct > 99 || c->parts > GEN_MAX_PARTS)
		die("--hot-pct must be 1..99, --parts 1..%d", GEN_MAX_PARTS);
}

/*
 * --cache P%: target_max_bytes = P% of the footprint, the distinct 4 KiB
 * blocks the requests cover (every block of each; the trace's requests, or
 * the generator's first --ops, whatever --seconds stops at: the sequence
 * does not depend on the policy or on time), as the suite sizes a cache
 * for an image larger than what a run touches.  With 4 KiB requests it is
 * the run's "blocks touched".
 */
static void set_footprint_cache(struct sim_cfg *c)
{
	uint64_t n = c->trace_path ? c->trace.n : c->ops, cap = 0, k = 0, *ids = NULL;
	struct gen_workload wl;

	memset(&wl, 0, sizeof(wl));
	if (!c->trace_path) {
		struct gen_workload_opts wo = gen_opts(c);
		int ret = gen_workload_init(&wl, &wo);

		if (ret < 0)
			die("workload: %s", strerror(-ret));
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t off, len;

		if (c->trace_path) {
			if (c->trace.recs[i].op == TRACE_OP_FLUSH)
				continue;
			off = c->trace.recs[i].off;
			len = c->trace.recs[i].len;
		} else {
			struct gen_req g;

			gen_workload_next(&wl, &g);
			off = g.off;
			len = g.len;
		}
		for (uint64_t b = off >> 12; len && b <= (off + len - 1) >> 12; b++) {
			if (k == cap) {
				uint64_t *m = realloc(ids, (cap = cap ? 2 * cap : 4096) * sizeof(*ids));

				if (!m)
					die("out of memory");
				ids = m;
			}
			ids[k++] = b;
		}
	}
	if (!c->trace_path)
		gen_workload_free(&wl);
	c->footprint_blocks = count_distinct(ids, k);
	free(ids);
	c->cache = (uint64_t)((double)c->footprint_blocks * 4096.0 * c->cache_pct / 100.0);
	if (c->cache < 4096)
		c->cache = 4096;
}

static void load_trace(struct sim_cfg *c)
{
	char err[256];
	int ret = trace_load(c->trace_path, &c->trace, err, sizeof(err));

	if (ret < 0)
		die("%s: %s", c->trace_path, err[0] ? err : strerror(-ret));
	if (c->trace.n_files > 1)
		fprintf(stderr, "tier-sim: %s names %u files; all are replayed on one image\n",
			c->trace_path, c->trace.n_files);
	if (c->trace.max_end > c->size) {
		c->size = c->trace.max_end;
		fprintf(stderr, "tier-sim: image size raised to %" PRIu64 " to fit the trace\n",
			c->size);
	}
}

int main(int argc, char **argv)
{
	static char all[] = "promote-always,ceph,default";
	struct sim_cfg c = {
		.dist = GEN_DIST_ZIPF, .dist_param = 1.1, .dist_name = "zipf:1.1",
		.write_pct = 100, .rw_name = "write", .pattern_name = "plain", .bs = 4096, .size = 4ull << 30,
		.cache = 1ull << 30, .ops = 200000, .qd = 16, .seed = 1,
		.base_profile = "hdd", .cache_profile = "ssd",
	};
	struct sim_result res[SIM_MAX_POLICIES];

	/*
	 * Promotions and flushes allocate object-sized buffers; keep them on
	 * the heap instead of an mmap/munmap (and page faults) per buffer.
	 */
	mallopt(M_MMAP_THRESHOLD, 256 << 20);
	mallopt(M_TRIM_THRESHOLD, 512 << 20);
	parse_args(&c, argc, argv);
	if (!c.n_policies)
		parse_policies(&c, all);
	if (c.trace_path)
		load_trace(&c);
	else if (c.size < c.bs)
		die("--size must be at least --bs");
	if (c.cache_pct > 0)
		set_footprint_cache(&c);
	for (size_t i = 0; i < c.n_policies; i++)
		run_one(&c, c.policies[i], &res[i]);
	print_table(&c, res, c.n_policies);
	if (c.csv_path)
		write_csv(&c, res, c.n_policies);
	trace_free(&c.trace);
	return 0;
}
