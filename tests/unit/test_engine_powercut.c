/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_engine_powercut.c - the engine against power cuts.
 *
 * Both pools are mem stores with the power-cut model (tier/store.h,
 * "Durability"): a write no sync covered may be lost, meta may revert, a
 * removed name may come back.  A workload (scripted, or seeded random with
 * several requests in flight) runs in object and in extent granularity with
 * a cache of 4 objects, so promotions, fills, flushes, evictions, trims and
 * zeroes all happen; the process dies after the k-th store op of the two
 * pools together (a crash clock shared by both), then the power goes: each
 * pool keeps a (seeded) subset of what was not durable.  A fresh engine
 * rebuilds from what is left and every 4 KiB block of the image must hold a
 * value it may legally have: the last value made durable by a completed
 * FLUSH or FUA write, or any value written to it after that (acknowledged
 * or not).  Each block written carries its generation number, so a wrong
 * block names the write it came from.  Then the agent flushes everything
 * (a stale cached copy must not go over newer base data) and the image
 * must read the same; then a FLUSH, a second cut, a rebuild: the same again.
 * The script also lowers the target to force partial evictions (extent
 * mode, evict_extents 2 and 1), of a DIRTY copy too, and sends a write
 * while one runs (P_AGENT_START: one tick, its jobs' completions still
 * queued); with evict_extents 2 the agent's flush hand flushes an object's
 * cold dirty extents and keeps its hot ones dirty (a partial flush, with a
 * write racing it).
 *
 * Environment: TIER_POWERCUT_ITERS=N (random workloads per granularity,
 * random cut seeds per cut point; default 3), TIER_POWERCUT_SEED=S (only
 * the random workload of seed S), TIER_POWERCUT_CUT=K (only cut point K;
 * 0 = no crash, the cut after the whole workload; every failure names it),
 * TIER_POWERCUT_VERBOSE=1 (print every failing run, not the first few),
 * TIER_POWERCUT_TRACE=1 (engine counters and unsynced store effects
 * before each op of each run: use it with _SEED and _CUT).
 */
#include "test_engine_harness.h"

#define NOBJ 16
#define ISZ (NOBJ * OS)
#define BS 4096ull
#define NBLK (ISZ / BS)
#define BPO (OS / BS)              /* blocks per object */
#define MAXB (2 * BPO)             /* blocks a write, trim or zero covers at most */
#define MAGIC 0x70637574626c6b00ull
#define PC_TARGET (4 * OS)         /* target_max_bytes: the cache holds 4 objects */

/* ---- block contents: generation g of block b ---- */

static void blk_fill(uint8_t *p, uint64_t blk, uint64_t gen)
{
	uint64_t w[BS / 8], x = gen * 0x9e3779b97f4a7c15ull ^ blk * 0xc2b2ae3d27d4eb4full;

	w[0] = gen;
	w[1] = MAGIC ^ blk;
	for (size_t i = 2; i < BS / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		w[i] = x;
	}
	memcpy(p, w, BS);
}

#define GEN_GARBAGE UINT64_MAX

/* The generation a block holds: 0 all zeros, GEN_GARBAGE neither zeros nor a write. */
static uint64_t blk_decode(const uint8_t *p, uint64_t blk, uint64_t *w0, uint64_t *w1)
{
	uint8_t want[BS];
	size_t i;

	memcpy(w0, p, 8);
	memcpy(w1, p + 8, 8);
	for (i = 0; i < BS && !p[i]; i++)
		;
	if (i == BS)
		return 0;
	if (*w0 == 0 || *w0 == GEN_GARBAGE)
		return GEN_GARBAGE;
	blk_fill(want, blk, *w0);
	return memcmp(want, p, BS) == 0 ? *w0 : GEN_GARBAGE;
}

/* ---- the reference model: per block, the values it may hold ---- */

enum { E_INFLIGHT = 0, E_OK = 1, E_FAILED = 2 };

struct bent {
	uint64_t gen;              /* 0: zeros (never written, trimmed, zeroed) */
	uint64_t done_at;          /* event clock at completion */
	int st;
	bool fua;
};

struct blk {
	struct bent *e;            /* in submission order (writes to a block never overlap) */
	size_t n, cap;
	size_t floor;              /* the last durable entry */
};

struct model {
	struct blk b[NBLK];
	uint64_t evclock, gen;
};

static void model_init(struct model *m)
{
	memset(m, 0, sizeof(*m));
	for (size_t i = 0; i < NBLK; i++) {
		m->b[i].cap = 8;
		m->b[i].e = calloc(m->b[i].cap, sizeof(struct bent));
		assert_non_null(m->b[i].e);
		m->b[i].e[0].st = E_OK;   /* the empty image is durable */
		m->b[i].n = 1;
	}
}

static void model_free(struct model *m)
{
	for (size_t i = 0; i < NBLK; i++)
		free(m->b[i].e);
}

static size_t model_push(struct model *m, uint64_t blk, uint64_t gen, bool fua)
{
	struct blk *b = &m->b[blk];

	if (b->n == b->cap) {
		b->cap *= 2;
		b->e = realloc(b->e, b->cap * sizeof(*b->e));
		assert_non_null(b->e);
	}
	b->e[b->n] = (struct bent){ .gen = gen, .st = E_INFLIGHT, .fua = fua };
	return b->n++;
}

static bool blk_busy(const struct model *m, uint64_t blk)
{
	return m->b[blk].e[m->b[blk].n - 1].st == E_INFLIGHT;
}

static bool blk_legal(const struct blk *b, uint64_t gen)
{
	for (size_t i = b->floor; i < b->n; i++)
		if (b->e[i].gen == gen)
			return true;
	return false;
}

/* "durable gen 12 (FLUSH), later: 17 18(failed) 0" */
static void blk_describe(const struct blk *b, char *out, size_t cap)
{
	size_t o = 0;
	const struct bent *f = &b->e[b->floor];

	o += (size_t)snprintf(out + o, cap - o, "durable %s%llu (%s)", f->gen ? "gen " : "",
			      (unsigned long long)f->gen,
			      b->floor == 0 ? "initial zeros" : f->fua ? "FUA write" : "FLUSH");
	if (b->floor + 1 < b->n && o < cap)
		o += (size_t)snprintf(out + o, cap - o, ", or later:");
	for (size_t i = b->floor + 1; i < b->n && o + 24 < cap; i++)
		o += (size_t)snprintf(out + o, cap - o, " %llu%s", (unsigned long long)b->e[i].gen,
				      b->e[i].st == E_FAILED ? "(failed)" :
				      b->e[i].st == E_INFLIGHT ? "(in flight)" : "");
}

/* ---- workloads ---- */

enum pop_kind { P_WRITE, P_ZERO, P_TRIM, P_READ, P_FLUSH, P_AGENT, P_FLUSH_ALL, P_EVICT_ALL,
		P_AGENT_START, P_TARGET, P_PARTIAL };

struct pop {
	enum pop_kind k;
	uint64_t blk, nblk;        /* image blocks */
	bool fua;
};

struct run;

struct areq {
	struct tier_request r;
	struct run *R;
	const struct pop *op;
	uint64_t first_gen;
	size_t idx[MAXB];
	uint64_t flush_at;
	uint8_t *buf;
	bool active;
};

struct run {
	struct env *v;
	struct model m;
	uint64_t clock, stop_at;
	uint64_t partial_mark;     /* evict_partial at the last P_PARTIAL */
	unsigned inflight;
	uint64_t acked, failed;
};

static void areq_cb(struct tier_request *r, int result)
{
	struct areq *a = (struct areq *)r;
	struct run *R = a->R;
	struct model *m = &R->m;

	R->inflight--;
	a->active = false;
	m->evclock++;
	if (result == 0)
		R->acked++;
	else
		R->failed++;
	if (a->op->k == P_FLUSH) {
		if (result != 0)
			return;
		/* every write completed before the FLUSH was sent is durable */
		for (size_t i = 0; i < NBLK; i++) {
			struct blk *b = &m->b[i];

			for (size_t j = b->n; j-- > b->floor + 1;) {
				if (b->e[j].st == E_OK && b->e[j].done_at < a->flush_at) {
					b->floor = j;
					break;
				}
			}
		}
		return;
	}
	if (a->op->k == P_READ)
		return;
	for (uint64_t i = 0; i < a->op->nblk; i++) {
		struct blk *b = &m->b[a->op->blk + i];
		struct bent *e = &b->e[a->idx[i]];

		e->st = result == 0 ? E_OK : E_FAILED;
		e->done_at = m->evclock;
		if (result == 0 && a->op->fua && a->idx[i] > b->floor)
			b->floor = a->idx[i];
	}
}

static bool dead(const struct run *R)
{
	return R->stop_at && R->clock >= R->stop_at;
}

/* One round of completions and ticks; time moves on when nothing else does. */
static void step(struct run *R)
{
	size_t n = tier_cq_drain(R->v->cq);

	tier_engine_tick(R->v->e);
	n += tier_cq_drain(R->v->cq);
	if (!n)
		env_advance_ms(R->v, 1);
}

static void wait_for(struct run *R, const struct pop *op, unsigned qd)
{
	for (int i = 0; i < 200000; i++) {
		bool busy = R->inflight >= qd;

		if (op && (op->k == P_WRITE || op->k == P_ZERO || op->k == P_TRIM))
			for (uint64_t b = 0; b < op->nblk && !busy; b++)
				busy = blk_busy(&R->m, op->blk + b);
		if (!busy)
			return;
		step(R);
	}
	fail_msg("requests did not complete");
}

static void submit(struct run *R, struct areq *a, const struct pop *op)
{
	static const enum tier_req_type type[] = {
		[P_WRITE] = TIER_REQ_WRITE, [P_ZERO] = TIER_REQ_WRITE_ZEROES,
		[P_TRIM] = TIER_REQ_TRIM, [P_READ] = TIER_REQ_READ, [P_FLUSH] = TIER_REQ_FLUSH,
	};

	memset(a, 0, sizeof(*a));
	a->R = R;
	a->op = op;
	a->r.type = type[op->k];
	a->r.flags = op->fua ? TIER_REQ_F_FUA : 0;
	a->r.cb = areq_cb;
	if (op->k != P_FLUSH) {
		a->r.off = op->blk * BS;
		a->r.len = op->nblk * BS;
	}
	if (op->k == P_WRITE || op->k == P_READ) {
		a->buf = malloc(a->r.len);
		assert_non_null(a->buf);
		a->r.buf = a->buf;
	}
	if (op->k == P_FLUSH)
		a->flush_at = ++R->m.evclock;
	for (uint64_t i = 0; op->k != P_FLUSH && op->k != P_READ && i < op->nblk; i++) {
		uint64_t gen = op->k == P_WRITE ? ++R->m.gen : 0;

		if (op->k == P_WRITE)
			blk_fill(a->buf + i * BS, op->blk + i, gen);
		a->idx[i] = model_push(&R->m, op->blk + i, gen, op->fua);
	}
	a->active = true;
	R->inflight++;
	assert_int_equal(tier_image_submit(R->v->img, &a->r), 0);
}

static bool env_flag(const char *name)
{
	const char *s = getenv(name);

	return s && *s && *s != '0';
}

/* TIER_POWERCUT_TRACE: where the script stands before each op. */
static void trace(const struct run *R, size_t i, const struct pop *op)
{
	static const char *const kname[] = { "write", "zero", "trim", "read", "FLUSH", "agent",
					     "flush_all", "evict_all", "agent_start", "target",
					     "partial" };
	struct tier_stats st = env_stats(R->v);

	print_message("trace: op %zu %s blk %llu+%llu%s at store op %llu: cached %llu dirty %llu "
		      "promotions %llu flushes %llu evictions %llu partial %llu proxy writes %llu, "
		      "unsynced effects base %llu cache %llu\n",
		      i, kname[op->k], (unsigned long long)op->blk, (unsigned long long)op->nblk,
		      op->fua ? " FUA" : "", (unsigned long long)R->clock,
		      (unsigned long long)st.cached_objects, (unsigned long long)st.dirty_objects,
		      (unsigned long long)st.promotions, (unsigned long long)st.flushes,
		      (unsigned long long)st.evictions, (unsigned long long)st.evict_partial,
		      (unsigned long long)st.proxy_writes,
		      (unsigned long long)tier_store_mem_unsynced(R->v->base),
		      (unsigned long long)tier_store_mem_unsynced(R->v->cache));
}

/*
 * The script's partial evictions happened where it says (an engine whose
 * policy changed would otherwise make its steps test nothing, silently).
 */
static void partial_mark(struct run *R, uint64_t want)
{
	uint64_t n = env_stats(R->v).evict_partial;

	if (R->v->p.promote_granularity == TIER_GRAN_EXTENT && !dead(R) &&
	    n - R->partial_mark < want)
		fail_msg("script: %llu partial evictions where it expects %llu at least (store op %llu)",
			 (unsigned long long)(n - R->partial_mark), (unsigned long long)want,
			 (unsigned long long)R->clock);
	R->partial_mark = n;
}

/* Run the ops, up to qd requests in flight; nothing more is sent once the process is dead. */
static void drive(struct run *R, const struct pop *ops, size_t n, unsigned qd)
{
	struct areq *rq = calloc(n, sizeof(*rq));

	assert_non_null(rq);
	for (size_t i = 0; i < n && !dead(R); i++) {
		const struct pop *op = &ops[i];

		wait_for(R, op, qd);
		if (dead(R))
			break;
		if (env_flag("TIER_POWERCUT_TRACE"))
			trace(R, i, op);
		switch (op->k) {
		case P_AGENT:     /* time passes: hitsets rotate, the agent flushes and evicts */
			env_advance_ms(R->v, 300);
			for (int k = 0; k < 20; k++)
				step(R);
			break;
		case P_AGENT_START:   /* time passes, one tick: the agent's jobs are in flight */
			env_advance_ms(R->v, 300);
			tier_engine_tick(R->v->e);
			break;
		case P_TARGET:   /* target_max_bytes = nblk extents (0: the run's own) */
			R->v->p.target_max_bytes = op->nblk ? op->nblk * BS : PC_TARGET;
			env_set_params(R->v, &R->v->p);
			break;
		case P_PARTIAL:   /* extent mode: nblk partial evictions since the last mark, at least */
			partial_mark(R, op->nblk);
			break;
		case P_FLUSH_ALL:
			tier_engine_flush_all(R->v->e, NULL);
			break;
		case P_EVICT_ALL:
			tier_engine_evict_all(R->v->e, NULL);
			break;
		default:
			submit(R, &rq[i], op);
			break;
		}
	}
	wait_for(R, NULL, 1);
	for (size_t i = 0; i < n; i++)
		free(rq[i].buf);
	free(rq);
}

/* ---- one run: workload, crash at op k, cut, rebuild, check ---- */

/* What went wrong, by kind (the summary counts runs per kind). */
enum fail_kind {
	F_REBUILD,     /* the rebuild or the read failed */
	F_ILLEGAL,     /* after the cut: a value the block may not have */
	F_CHANGED,     /* flushing and evicting changed a block nobody wrote */
	F_NOT_DURABLE, /* a completed FLUSH, a second cut: the block changed */
	F_KINDS
};

static const char *const kind_name[F_KINDS] = {
	"rebuild or read failed",
	"illegal value after the cut (older than the last durable write, zeros, garbage)",
	"block changed by the flush+evict after the rebuild (no write in between)",
	"block changed by a second cut after a completed FLUSH",
};

struct verdict {
	uint64_t runs, cuts, blocks;
	uint64_t fills;            /* fills completed before the cuts, over all runs */
	uint64_t partial;          /* partial evictions before the cuts, over all runs */
	uint64_t pflush;           /* partial flushes (cold ones, or raced by a write) */
	uint64_t cold;             /* cold flushes (the flush hand left hot extents out) */
	uint64_t bad_runs, kinds[F_KINDS];
	char first[1024];
	unsigned printed;
};


static struct env *pc_env(enum tier_granularity g, enum tier_write_miss wm, uint64_t ee)
{
	struct env *v = calloc(1, sizeof(*v));
	struct tier_mem_opts mo = { .powercut_model = true };

	assert_non_null(v);
	v->now_ns = 1000000000ull;
	v->isz = ISZ;
	env_params(&v->p);
	v->p.promote_granularity = g;
	v->p.write_miss = wm;
	v->p.evict_extents = ee;
	v->p.target_max_bytes = PC_TARGET;
	v->p.cache_target_dirty_ratio = 0.25;
	v->p.cache_target_dirty_high_ratio = 0.5;
	v->p.cache_target_full_ratio = 0.5;
	v->p.hit_set_period = 1000;
	assert_int_equal(tier_cq_create(NULL, NULL, &v->cq), 0);
	assert_int_equal(tier_store_mem_create("base", &mo, v->cq, &v->base), 0);
	assert_int_equal(tier_store_mem_create("cache", &mo, v->cq, &v->cache), 0);
	assert_int_equal(env_engine(v), 1);
	return v;
}

static const char *mode_name(enum tier_mem_cut mode)
{
	return mode == TIER_MEM_CUT_KEEP_ALL ? "keep-all" :
	       mode == TIER_MEM_CUT_KEEP_NONE ? "keep-none" : "random";
}

struct case_id {
	const char *name;          /* workload */
	enum tier_granularity g;
	uint64_t ee;               /* evict_extents */
	uint64_t wseed;            /* random workloads; 0 = scripted */
	uint64_t k, total;         /* crash point */
	enum tier_mem_cut mode;
	uint64_t cseed;
};

static void report(struct verdict *vd, const struct case_id *c, enum fail_kind kind,
		   const char *phase, const char *what)
{
	char line[1024];

	snprintf(line, sizeof(line),
		 "%s, %s mode%s%s%.0llu: cut after store op %llu of %llu%s, %s cut seed %llu, %s: %s "
		 "[TIER_POWERCUT_CUT=%llu%s%.0llu]",
		 c->name, c->g == TIER_GRAN_EXTENT ? "extent" : "object",
		 c->g == TIER_GRAN_EXTENT && c->ee == 1 ? ", evict_extents 1" : "",
		 c->wseed ? ", workload seed " : "", (unsigned long long)c->wseed,
		 (unsigned long long)c->k, (unsigned long long)c->total,
		 c->k ? "" : " (no crash: the cut comes at the end)", mode_name(c->mode),
		 (unsigned long long)c->cseed, phase, what, (unsigned long long)c->k,
		 c->wseed ? " TIER_POWERCUT_SEED=" : "", (unsigned long long)c->wseed);
	if (!vd->bad_runs)
		snprintf(vd->first, sizeof(vd->first), "%s", line);
	vd->bad_runs++;
	vd->kinds[kind]++;
	if (vd->printed < 8 || env_flag("TIER_POWERCUT_VERBOSE")) {
		vd->printed++;
		print_message("POWERCUT FAIL %s\n", line);
	}
}

/*
 * Read the whole image; each block must be legal and, when prev is given,
 * hold that generation.  Fills got.  Returns false (and reports) on the
 * first wrong block.
 */
static bool check_image(struct run *R, struct verdict *vd, const struct case_id *c,
			enum fail_kind kind, const char *phase, const uint64_t *prev, uint64_t *got)
{
	uint8_t *img = malloc(ISZ);
	char what[700], legal[400];
	uint64_t nbad = 0, first = NBLK;
	int rc;

	assert_non_null(img);
	memset(img, 0xee, ISZ);
	rc = env_io(R->v, TIER_REQ_READ, 0, ISZ, img, 0);
	if (rc != 0) {
		snprintf(what, sizeof(what), "reading the image failed: %d", rc);
		report(vd, c, F_REBUILD, phase, what);
		free(img);
		return false;
	}
	for (uint64_t b = 0; b < NBLK; b++) {
		uint64_t w0, w1, gen = blk_decode(img + b * BS, b, &w0, &w1);
		bool ok = gen != GEN_GARBAGE && blk_legal(&R->m.b[b], gen) &&
			  (!prev || prev[b] == gen);

		got[b] = gen;
		vd->blocks++;
		if (ok)
			continue;
		if (!nbad++)
			first = b;
	}
	if (nbad) {
		uint64_t b = first, w0, w1, gen = blk_decode(img + b * BS, b, &w0, &w1);
		char g[160];

		if (gen == GEN_GARBAGE && (w1 ^ MAGIC) < NBLK)
			snprintf(g, sizeof(g), "garbage (starts like gen %llu of block %llu)",
				 (unsigned long long)w0, (unsigned long long)(w1 ^ MAGIC));
		else if (gen == GEN_GARBAGE)
			snprintf(g, sizeof(g), "garbage (first word 0x%016llx)",
				 (unsigned long long)w0);
		else if (gen == 0)
			snprintf(g, sizeof(g), "zeros");
		else
			snprintf(g, sizeof(g), "gen %llu", (unsigned long long)gen);
		blk_describe(&R->m.b[b], legal, sizeof(legal));
		if (prev && blk_legal(&R->m.b[b], gen))
			snprintf(what, sizeof(what),
				 "image offset 0x%llx (object %llu, block %llu): read %s, but it read "
				 "gen %llu before (%llu bad blocks)",
				 (unsigned long long)(b * BS), (unsigned long long)(b / BPO),
				 (unsigned long long)(b % BPO), g, (unsigned long long)prev[b],
				 (unsigned long long)nbad);
		else
			snprintf(what, sizeof(what),
				 "image offset 0x%llx (object %llu, block %llu): read %s, legal: %s "
				 "(%llu bad blocks)",
				 (unsigned long long)(b * BS), (unsigned long long)(b / BPO),
				 (unsigned long long)(b % BPO), g, legal, (unsigned long long)nbad);
		report(vd, c, prev && blk_legal(&R->m.b[b], gen) ? kind : F_ILLEGAL, phase, what);
	}
	free(img);
	return nbad == 0;
}

static void cut_stores(struct env *v, enum tier_mem_cut mode, uint64_t seed)
{
	assert_int_equal(tier_store_mem_power_cut(v->base, mode, seed * 2 + 1), 0);
	assert_int_equal(tier_store_mem_power_cut(v->cache, mode, seed * 2 + 2), 0);
}

/*
 * Odd cut seeds check the image while its map still loads (each object a
 * request touches probed first, image.c "serve while loading"), even ones
 * once it has loaded.
 */
static bool rebuild(struct run *R, struct verdict *vd, const struct case_id *c, const char *phase)
{
	int rc = (c->cseed & 1) ? env_engine_loading(R->v) : env_engine(R->v);

	if ((c->cseed & 1) && rc == 0 && tier_image_ready(R->v->img) == 0)
		return true;
	if (rc != 1) {
		char what[64];

		snprintf(what, sizeof(what), "the rebuild failed: %d", rc);
		report(vd, c, F_REBUILD, phase, what);
		return false;
	}
	return true;
}

/* Returns the store ops the workload took (its crash clock). */
static uint64_t one_run(const struct pop *ops, size_t n, unsigned qd, enum tier_write_miss wm,
			struct case_id *c, struct verdict *vd)
{
	struct run R = { .stop_at = c->k };
	uint64_t *got = malloc(NBLK * sizeof(*got)), *got2 = malloc(NBLK * sizeof(*got2));
	uint64_t clock;

	model_init(&R.m);
	R.v = pc_env(c->g, wm, c->ee);
	tier_store_mem_set_crash_clock(R.v->base, &R.clock, R.stop_at);
	tier_store_mem_set_crash_clock(R.v->cache, &R.clock, R.stop_at);
	drive(&R, ops, n, qd);
	vd->fills += env_stats(R.v).fills;
	vd->partial += env_stats(R.v).evict_partial;
	vd->pflush += env_stats(R.v).flush_partial;
	vd->cold += env_stats(R.v).flush_cold;
	clock = R.clock;
	env_kill_engine(R.v);
	R.v->p.target_max_bytes = PC_TARGET;   /* the script may have changed it */
	tier_store_mem_set_crash_clock(R.v->base, NULL, 0);
	tier_store_mem_set_crash_clock(R.v->cache, NULL, 0);
	vd->runs++;
	vd->cuts++;
	cut_stores(R.v, c->mode, c->cseed);
	if (!rebuild(&R, vd, c, "rebuild after the cut") ||
	    !check_image(&R, vd, c, F_ILLEGAL, "after the cut and a rebuild", NULL, got))
		goto out;
	/* the agent flushes everything and drops it: the same image */
	tier_engine_flush_all(R.v->e, NULL);
	env_pump(R.v);
	tier_engine_evict_all(R.v->e, NULL);
	env_pump(R.v);
	if (!check_image(&R, vd, c, F_CHANGED,
			 "after the rebuild, once everything was flushed and evicted", got, got2))
		goto out;
	/* a FLUSH makes that durable: a second cut changes nothing */
	if (env_io(R.v, TIER_REQ_FLUSH, 0, 0, NULL, 0) != 0) {
		report(vd, c, F_REBUILD, "after the rebuild", "FLUSH failed");
		goto out;
	}
	env_kill_engine(R.v);
	vd->cuts++;
	cut_stores(R.v, c->mode, c->cseed + 1000003);
	if (!rebuild(&R, vd, c, "second rebuild"))
		goto out;
	check_image(&R, vd, c, F_NOT_DURABLE, "after a FLUSH, a second cut and a rebuild", got2,
		    got);
out:
	env_free(R.v);
	model_free(&R.m);
	free(got);
	free(got2);
	return clock;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *s = getenv(name);

	return s && *s ? strtoull(s, NULL, 0) : def;
}

/* Crash at each k in cuts (all of 1..total when cuts is NULL), each with several cut modes. */
static void cut_everywhere(const char *name, const struct pop *ops, size_t n, unsigned qd,
			   enum tier_write_miss wm, enum tier_granularity g, uint64_t ee,
			   uint64_t wseed, const uint64_t *cuts, size_t ncuts, struct verdict *vd)
{
	struct case_id c = { .name = name, .g = g, .ee = ee, .wseed = wseed,
			     .mode = TIER_MEM_CUT_KEEP_ALL };
	uint64_t total, only = env_u64("TIER_POWERCUT_CUT", UINT64_MAX);
	uint64_t seeds = env_u64("TIER_POWERCUT_ITERS", 3);

	/* dry run, cut at the very end (keep-all: the crash tests' case) */
	total = one_run(ops, n, qd, wm, &c, vd);
	assert_true(total > 10);
	c.total = total;
	for (size_t i = 0; i < (cuts ? ncuts : total + 1); i++) {
		c.k = cuts ? cuts[i] : i;   /* 0: no crash, the cut comes at the end */
		if (c.k > total || (only != UINT64_MAX && c.k != only))
			continue;
		for (uint64_t s = 0; s < seeds + 2; s++) {
			c.mode = s == 0 ? TIER_MEM_CUT_KEEP_NONE :
				 s == 1 ? TIER_MEM_CUT_KEEP_ALL : TIER_MEM_CUT_RANDOM;
			c.cseed = s < 2 ? 0 : s - 1 + c.k * 1000 + wseed * 1000003;
			one_run(ops, n, qd, wm, &c, vd);
		}
	}
}

static void verdict_end(const char *what, struct verdict *vd)
{
	print_message("%s: %llu runs, %llu power cuts, %llu blocks verified, %llu fills, "
		      "%llu partial evictions, %llu partial flushes (%llu cold), %llu failing runs\n", what,
		      (unsigned long long)vd->runs, (unsigned long long)vd->cuts,
		      (unsigned long long)vd->blocks, (unsigned long long)vd->fills,
		      (unsigned long long)vd->partial, (unsigned long long)vd->pflush,
		      (unsigned long long)vd->cold, (unsigned long long)vd->bad_runs);
	for (int k = 0; k < F_KINDS; k++)
		if (vd->kinds[k])
			print_message("  %llu runs: %s\n", (unsigned long long)vd->kinds[k],
				      kind_name[k]);
	if (vd->bad_runs)
		fail_msg("%llu of %llu runs broke the durability contract; first: %s",
			 (unsigned long long)vd->bad_runs, (unsigned long long)vd->runs, vd->first);
}

/* ---- the scripted sequence ---- */

#define B(obj, blk) ((uint64_t)(obj) * BPO + (blk))
static const struct pop script_ops[] = {
	{ P_WRITE, B(0, 0), 1, false },      /* miss: promotion (object) / fill (extent) */
	{ P_WRITE, B(0, 2), 1, true },       /* hit, FUA */
	{ P_READ, B(1, 0), BPO, false },     /* read miss: promotes */
	{ P_AGENT, 0, 0, false },
	{ P_WRITE, B(1, 1), 2, false },      /* hit on a promoted copy */
	{ P_FLUSH, 0, 0, false },
	{ P_WRITE, B(2, 0), 4, false },
	{ P_TRIM, B(0, 0), BPO, false },     /* whole cached object */
	{ P_ZERO, B(2, 1), 1, false },
	{ P_FLUSH_ALL, 0, 0, false },
	{ P_AGENT, 0, 0, false },
	{ P_WRITE, B(3, 0), 1, false },      /* more objects than the cache holds */
	{ P_WRITE, B(4, 3), 1, false },
	{ P_WRITE, B(5, 5), 1, true },
	{ P_WRITE, B(6, 0), 2, false },
	{ P_READ, B(7, 0), BPO, false },
	{ P_READ, B(8, 0), BPO, false },
	{ P_AGENT, 0, 0, false },
	{ P_WRITE, B(1, 1), 1, false },
	{ P_FLUSH, 0, 0, false },
	{ P_WRITE, B(2, BPO - 1), 2, false }, /* across objects 2|3 */
	{ P_EVICT_ALL, 0, 0, false },
	{ P_WRITE, B(0, 5), 1, true },
	{ P_READ, B(2, 0), BPO, false },
	{ P_WRITE, B(2, 1), 1, false },
	{ P_AGENT, 0, 0, false },
	{ P_FLUSH, 0, 0, false },
	{ P_WRITE, B(3, 0), 1, false },
	/* a base remove not yet synced under a promotion (needs a barrier first) */
	{ P_WRITE, B(9, 3), 1, false },
	{ P_EVICT_ALL, 0, 0, false },
	{ P_TRIM, B(9, 0), BPO, false },     /* uncached: removes the base object */
	{ P_READ, B(9, 0), BPO, false },     /* promotes what base holds now */
	/*
	 * Extent mode: fills of partly valid copies.  Base holds objects 10
	 * and 11 durably (flushed, evicted); then base changes without a sync
	 * (a proxied zero, a base remove), a partial copy appears, and a read
	 * fills it: the fill must copy only what base holds durably (FUA
	 * reads, a barrier first), or the block changes at the eviction.
	 */
	{ P_EVICT_ALL, 0, 0, false },
	{ P_WRITE, B(10, 0), BPO, false },
	{ P_WRITE, B(11, 0), BPO, false },
	{ P_FLUSH_ALL, 0, 0, false },
	{ P_EVICT_ALL, 0, 0, false },
	{ P_ZERO, B(10, 6), 1, false },      /* uncached: a base zero, not synced */
	{ P_WRITE, B(10, 2), 1, false },     /* a partial copy */
	{ P_READ, B(10, 0), BPO, false },    /* needs base for the rest: a fill (FUA reads) */
	{ P_WRITE, B(10, 7), 1, false },     /* races the fill, or lands over a filled extent */
	{ P_READ, B(10, 0), BPO, false },
	{ P_TRIM, B(11, 0), BPO, false },    /* uncached: a base remove no barrier covers */
	{ P_WRITE, B(11, 4), 1, false },
	{ P_READ, B(11, 3), 2, false },      /* a fill behind a barrier */
	{ P_WRITE, B(11, 9), 1, true },
	{ P_AGENT, 0, 0, false },
	{ P_TRIM, B(11, 0), BPO, false },    /* whole-object drop after (or waiting for) the fill */
	/*
	 * Extent mode: read fills (a read miss caches the extents it brought
	 * as clean ones).  Base changed without a sync (a proxied zero), then a
	 * read of an object with no copy: its read must be FUA, or the clean
	 * copy vouches for bytes a cut takes back.  Then a write over a filled
	 * extent, and a read adding extents to that copy.
	 */
	{ P_WRITE, B(12, 0), BPO, false },
	{ P_FLUSH_ALL, 0, 0, false },
	{ P_EVICT_ALL, 0, 0, false },        /* base holds object 12 durably */
	{ P_FLUSH, 0, 0, false },            /* object 11's removes synced: read fills may start */
	{ P_ZERO, B(12, 3), 1, false },      /* uncached: a base zero, not synced */
	{ P_READ, B(12, 2), 3, false },      /* a new copy of extents 2-4 */
	{ P_WRITE, B(12, 4), 1, false },     /* over a clean filled extent */
	{ P_READ, B(12, 1), 5, false },      /* adds extents 1, 5 */
	/*
	 * Extent mode: partial evictions (evict_extents).  Objects 13 and 14
	 * whole and clean, blocks 0-2 of each read since (referenced); objects
	 * 15 and 12 push the cache over target: the agent evicts those (never
	 * read since they came) whole, then drops 13's clean extents nobody
	 * read (a guarded FUA SETMETA, then ZEROs of them) and keeps 0-2.  Then
	 * a write on a dropped extent, reads over kept and dropped ones.
	 */
	{ P_EVICT_ALL, 0, 0, false },
	{ P_WRITE, B(13, 0), BPO, false },
	{ P_WRITE, B(14, 0), BPO, false },
	{ P_FLUSH_ALL, 0, 0, false },
	{ P_AGENT, 0, 0, false },
	{ P_READ, B(13, 0), 3, false },      /* hits: referenced */
	{ P_READ, B(14, 0), 3, false },
	{ P_WRITE, B(15, 0), BPO, false },
	{ P_WRITE, B(12, 0), BPO, false },
	{ P_FLUSH_ALL, 0, 0, false },
	{ P_AGENT, 0, 0, false },            /* over target: partial evictions */
	{ P_WRITE, B(13, 6), 1, false },     /* a dropped extent */
	{ P_READ, B(13, 0), BPO, false },
	{ P_WRITE, B(14, 1), 2, false },     /* a kept and a dropped one */
	{ P_AGENT, 0, 0, false },
	/*
	 * Extent mode: a partial eviction of a DIRTY copy, and a write to an
	 * extent it drops sent while it runs.  Object 4 alone in the cache,
	 * whole, clean and durable; 0-2 read (referenced).  The target drops
	 * to 7 extents: 3-15 go.  Then 0-1 read, 9 written with FUA (a new
	 * extent: dirty, not referenced, durable) and the target drops again:
	 * the agent's SETMETA is in flight when a write to 2 (clean,
	 * unreferenced: being dropped) arrives; it must wait until the ZEROs
	 * are done (or the ZERO of 2 wipes it) and 9 must stay (dropping it
	 * loses a FUA write: base has the older bytes).
	 */
	{ P_EVICT_ALL, 0, 0, false },
	{ P_AGENT, 0, 0, false },
	{ P_WRITE, B(4, 0), BPO, false },
	{ P_FLUSH_ALL, 0, 0, false },
	{ P_FLUSH, 0, 0, false },
	{ P_READ, B(4, 0), 3, false },
	{ P_PARTIAL, 0, 0, false },
	{ P_TARGET, 0, 7, false },           /* 16 of 7 extents: 3-15 go, 3 of 7 stay */
	{ P_AGENT, 0, 0, false },
	{ P_PARTIAL, 0, 1, false },
	{ P_TARGET, 0, 0, false },
	{ P_READ, B(4, 0), 2, false },
	{ P_WRITE, B(4, 9), 1, true },
	{ P_TARGET, 0, 7, false },           /* 4 of 7: the SETMETA dropping 2 goes out */
	{ P_AGENT_START, 0, 0, false },
	{ P_WRITE, B(4, 2), 1, false },      /* waits for the eviction */
	{ P_AGENT, 0, 0, false },
	{ P_PARTIAL, 0, 1, false },
	{ P_TARGET, 0, 0, false },
	{ P_READ, B(4, 0), BPO, false },
	{ P_AGENT, 0, 0, false },
	/*
	 * Extent mode, evict_extents 2: a cold flush (the agent's flush hand).
	 * Object 5 written whole (new extents: dirty, unreferenced), then 0-2
	 * written again (hits: referenced), and 2 extents of object 6: the
	 * dirty ratio is over its target.  The order offers 5, whose dirty
	 * extents 0-2 are hot: the flush hand flushes only 3-15 (cache reads,
	 * base writes the last FUA, the guarded SETMETA clearing what it
	 * wrote), 0-2 stay dirty; a write to 7 arrives while it runs (it stays
	 * dirty too).  Then the whole object is read.
	 */
	{ P_EVICT_ALL, 0, 0, false },
	{ P_WRITE, B(5, 0), BPO, false },
	{ P_WRITE, B(5, 0), 3, false },
	{ P_WRITE, B(6, 4), 2, false },
	{ P_AGENT_START, 0, 0, false },
	{ P_WRITE, B(5, 7), 1, false },
	{ P_AGENT, 0, 0, false },
	{ P_READ, B(5, 0), BPO, false },
};
#define SCRIPT_N (sizeof(script_ops) / sizeof(script_ops[0]))

static void scripted(enum tier_granularity g, uint64_t ee)
{
	struct verdict vd = { 0 };

	cut_everywhere("script", script_ops, SCRIPT_N, 1, TIER_WMISS_PROMOTE, g, ee, 0, NULL, 0,
		       &vd);
	verdict_end(g == TIER_GRAN_OBJECT ? "scripted, object mode" :
		    ee == 1 ? "scripted, extent mode, evict_extents 1" : "scripted, extent mode",
		    &vd);
	/* extent mode: fills happened before the cuts (the runs prove nothing otherwise) */
	if (g == TIER_GRAN_EXTENT)
		assert_true(vd.fills > 0);
	/* and with the clock, the flush hand's cold flushes */
	if (g == TIER_GRAN_EXTENT && ee == 2)
		assert_true(vd.cold > 0);
	if (g == TIER_GRAN_EXTENT)   /* and partial evictions */
		assert_true(vd.partial > 0);
}

static void test_powercut_script_object(void **state)
{
	(void)state;
	scripted(TIER_GRAN_OBJECT, 2);
}

static void test_powercut_script_extent(void **state)
{
	(void)state;
	scripted(TIER_GRAN_EXTENT, 2);
}

/* evict_extents = 1: the eviction order's victims lose their cold extents (no clock hand) */
static void test_powercut_script_extent_order(void **state)
{
	(void)state;
	scripted(TIER_GRAN_EXTENT, 1);
}

/* ---- seeded random workloads ---- */

static uint64_t rnd(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#define RW_N 60

static void gen_workload(uint64_t seed, struct pop *ops)
{
	uint64_t x = seed;

	for (size_t i = 0; i < RW_N; i++) {
		uint64_t r = rnd(&x) % 100;
		/* skewed: objects 0-3 hot, up to 11 in all (the cache holds 4) */
		uint64_t obj = rnd(&x) % 2 ? rnd(&x) % 4 : rnd(&x) % 12;
		uint64_t nb = 1 + rnd(&x) % 4, blk = obj * BPO + rnd(&x) % BPO;
		struct pop *p = &ops[i];

		if (blk + nb > NBLK)
			nb = NBLK - blk;
		*p = (struct pop){ .k = P_WRITE, .blk = blk, .nblk = nb };
		if (r < 40) {
			p->fua = rnd(&x) % 5 == 0;
		} else if (r < 60) {
			p->k = P_READ;
			if (rnd(&x) % 2) {   /* a whole object */
				p->blk = obj * BPO;
				p->nblk = BPO;
			}
		} else if (r < 68) {
			p->k = P_FLUSH;
		} else if (r < 74) {
			p->k = P_TRIM;
		} else if (r < 80) {
			p->k = P_ZERO;
		} else if (r < 92) {
			p->k = P_AGENT;
		} else if (r < 96) {
			p->k = P_FLUSH_ALL;
		} else {
			p->k = P_EVICT_ALL;
		}
		if (p->k == P_TRIM && rnd(&x) % 2) {   /* whole-object trims drop the copy */
			p->blk = obj * BPO;
			p->nblk = BPO;
		}
		if (p->nblk > MAXB && p->k != P_READ)
			p->nblk = MAXB;
	}
}

static void random_workloads(enum tier_granularity g)
{
	struct verdict vd = { 0 };
	uint64_t iters = env_u64("TIER_POWERCUT_ITERS", 3), only = env_u64("TIER_POWERCUT_SEED", 0);
	struct pop ops[RW_N];

	for (uint64_t seed = 1; seed <= iters || (only && seed == only); seed++) {
		uint64_t cuts[12], x = seed * 7919, total;
		struct case_id c = { .name = "random", .g = g, .wseed = seed,
				     .mode = TIER_MEM_CUT_KEEP_ALL };
		enum tier_write_miss wm = seed % 2 ? TIER_WMISS_PROMOTE : TIER_WMISS_PROXY;
		struct verdict dry = { 0 };

		if (only && seed != only)
			continue;
		gen_workload(seed, ops);
		c.ee = 2;
		total = one_run(ops, RW_N, 4, wm, &c, &dry);   /* how long it is */
		for (size_t i = 0; i < 12; i++)
			cuts[i] = 1 + rnd(&x) % total;
		cut_everywhere("random", ops, RW_N, 4, wm, g, 2, seed, cuts, 12, &vd);
	}
	verdict_end(g == TIER_GRAN_EXTENT ? "random, extent mode" : "random, object mode", &vd);
	if (g == TIER_GRAN_EXTENT)
		assert_true(vd.fills > 0);
	if (g == TIER_GRAN_EXTENT)   /* and partial evictions */
		assert_true(vd.partial > 0);
}

static void test_powercut_random_object(void **state)
{
	(void)state;
	random_workloads(TIER_GRAN_OBJECT);
}

static void test_powercut_random_extent(void **state)
{
	(void)state;
	random_workloads(TIER_GRAN_EXTENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_powercut_script_object),
		cmocka_unit_test(test_powercut_script_extent),
		cmocka_unit_test(test_powercut_script_extent_order),
		cmocka_unit_test(test_powercut_random_object),
		cmocka_unit_test(test_powercut_random_extent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
