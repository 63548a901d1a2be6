/* SPDX-License-Identifier: MIT */
/*
 * libtier/agent.c - the flush/evict agent.  Each run it takes the modes
 * (flush idle/low/high, evict idle/some/full, the effort) and its budgets
 * from decide.c, asks the eviction policy for the coldest objects, keeps
 * those decide.c says are worth flushing or evicting (tier__decide_flush /
 * _evict: state, image, busy, hot, age), counts why it passed over the
 * others, and starts the jobs.  With the clock on (extent mode,
 * evict_extents = 2) two hands walk the object map besides: the evict
 * hand (partial evictions) and the flush hand, which flushes the cold
 * dirty extents of objects the order would have flushed whole with their
 * hot ones (tier__decide_flush_how).  It keeps the list of hot objects
 * (written during their last flush) that it leaves alone for a while.  It
 * only starts jobs; it must never block or touch the store.
 */
#include <math.h>
#include <stdlib.h>

#include "libtier/decide.h"
#include "libtier/engine_int.h"

#define AGENT_BATCH 64
#define HAND_MAX 4096u   /* objects a hand looks at per run at most */

double tier__dirty_ratio(const struct tier_engine *e)
{
	double r = 0.0;

	if (e->p.target_max_bytes)
		r = (double)e->dirty_bytes / (double)e->p.target_max_bytes;
	if (e->p.target_max_objects) {
		double ro = (double)e->n_dirty / (double)e->p.target_max_objects;
		if (ro > r)
			r = ro;
	}
	return r;
}

/*
 * Promotions in flight and reservations (queued promotions, new extents
 * being written) count as cached: they are admitted already.
 */
static void full_ratios(const struct tier_engine *e, uint64_t bytes, uint64_t objs, double *rb,
			double *ro)
{
	uint64_t b = e->cached_bytes + e->promoting_bytes + e->resv_bytes - bytes;
	uint64_t n = e->n_cached + e->n_promoting + e->n_resv - objs;

	*rb = e->p.target_max_bytes ? (double)b / (double)e->p.target_max_bytes : 0.0;
	*ro = e->p.target_max_objects ? (double)n / (double)e->p.target_max_objects : 0.0;
}

double tier__full_ratio_less(const struct tier_engine *e, uint64_t bytes, uint64_t objs)
{
	double rb, ro;

	full_ratios(e, bytes, objs, &rb, &ro);
	return ro > rb ? ro : rb;
}

bool tier__full_by_objects(const struct tier_engine *e)
{
	double rb, ro;

	full_ratios(e, 0, 0, &rb, &ro);
	return e->p.target_max_objects && ro >= rb;
}

double tier__full_ratio(const struct tier_engine *e)
{
	return tier__full_ratio_less(e, 0, 0);
}

/*
 * A flush that a cache write overlapped cleaned only what was not written
 * again (extent mode) or nothing (object mode).  The object is hot: flushing
 * it again at once would mostly repeat the overlap, so the agent leaves it
 * until until_ms has passed and a tick came, and flushes the next coldest.
 */
void tier__agent_cool(struct tier_engine *e, struct tier__obj *o, uint64_t until_ms)
{
	if (o->flags & TIER__OF_HOT) {
		for (size_t i = 0; i < e->n_hot; i++)
			if (e->hot[i].key == o->key && e->hot[i].until_ms < until_ms)
				e->hot[i].until_ms = until_ms;
		return;
	}
	if (e->n_hot == e->cap_hot) {
		size_t nc = e->cap_hot ? 2 * e->cap_hot : 16;
		struct tier__hot *n = realloc(e->hot, nc * sizeof(*n));
		if (!n)
			return;   /* untracked: the agent may pick it again, as before */
		e->hot = n;
		e->cap_hot = nc;
	}
	e->hot[e->n_hot].key = o->key;
	e->hot[e->n_hot].until_ms = until_ms;
	e->n_hot++;
	tier__obj_hot_begin(e, o);
}

void tier__agent_hot_expire(struct tier_engine *e)
{
	uint64_t now = tier__eng_now_ms(e);
	size_t w = 0;

	for (size_t i = 0; i < e->n_hot; i++) {
		struct tier__obj *o;

		if (e->hot[i].until_ms > now) {
			e->hot[w++] = e->hot[i];
			continue;
		}
		o = tier__obj_find(e, e->hot[i].key);
		if (o)
			tier__obj_hot_end(e, o);
	}
	e->n_hot = w;
}

void tier__agent_modes(struct tier_engine *e)
{
	struct tier__modes cur = { e->flush_mode, e->evict_mode, e->effort_pct };
	struct tier__modes m = tier__decide_modes(&e->p, cur, tier__dirty_ratio(e),
						  tier__full_ratio(e), e->n_dirty != 0,
						  e->n_cached != 0);

	e->flush_mode = m.flush;
	e->evict_mode = m.evict;
	e->effort_pct = m.effort_pct;
	if (m.evict == TIER_EVICT_IDLE)
		e->turnover_until = 0;   /* room again: whatever was turning over is gone */
}

struct want_arg {
	struct tier_engine *e;
	const struct tier_image *img;  /* NULL = any */
	bool ignore_age;
	bool quiet;                    /* the clock hand: its visits are not offers, not counted */
	uint64_t now_ms;
};

static bool view(const struct want_arg *a, uint64_t key, struct tier__agent_view *v)
{
	const struct tier__obj *o = tier__obj_find(a->e, key);
	const struct tier_image *img;

	if (!o)
		return false;
	img = tier__image_by_id(a->e, TIER__KEY_ID(o->key));
	v->state = o->state;
	v->flags = o->flags;
	v->busy = tier__obj_busy(o);
	v->image_ok = img && !img->closed && !img->parked && (!a->img || a->img == img);
	v->ignore_age = a->ignore_age;
	v->age_ms = tier__obj_age_ms(a->now_ms, o);
	return true;
}

/* Count (and at debug level tell) why the agent passed over key. */
static bool skipped(const struct want_arg *a, uint64_t key, const char *what, enum tier__skip r)
{
	struct tier_stats *st = &a->e->st;

	if (r == TIER__SKIP_NONE)
		return false;
	if (a->quiet)
		return true;
	switch (r) {
	case TIER__SKIP_BUSY: st->agent_skip_busy++; break;
	case TIER__SKIP_HOT: st->agent_skip_hot++; break;
	case TIER__SKIP_YOUNG: st->agent_skip_young++; break;
	default: break;
	}
	if (r != TIER__SKIP_STATE)
		tier__debug(a->e, "agent: no %s of object %016llx: %s", what,
			    (unsigned long long)key, tier__skip_name(r));
	return true;
}

static bool want_flush(void *arg, uint64_t key)
{
	const struct want_arg *a = arg;
	struct tier__agent_view v;

	return view(a, key, &v) && !skipped(a, key, "flush", tier__decide_flush(&a->e->p, &v));
}

static bool want_evict(void *arg, uint64_t key)
{
	const struct want_arg *a = arg;
	struct tier__agent_view v;

	return view(a, key, &v) && !skipped(a, key, "evict", tier__decide_evict(&a->e->p, &v));
}

#define HIT_FAST_N 1024.0
#define HIT_SLOW_N 32768.0

static uint64_t evicted_bytes(const struct tier_engine *e)
{
	return e->st.evict_bytes + e->st.evict_partial_bytes;
}

/*
 * Each counted request moves the two averages; a phase change (the last
 * ~1000 requests hit far less often than the last ~30000) seen while the
 * agent evicts gives it its hurry until it has evicted as many bytes as
 * the cache holds now, or the cache has room again (tier__agent_modes):
 * one turnover of what the old phase left (docs/BENCHMARKS.md,
 * "The policy suite").
 */
void tier__agent_note_hit(struct tier_engine *e, bool hit)
{
	e->hit_fast += ((hit ? 1.0 : 0.0) - e->hit_fast) / HIT_FAST_N;
	e->hit_slow += ((hit ? 1.0 : 0.0) - e->hit_slow) / HIT_SLOW_N;
	if (e->evict_mode != TIER_EVICT_IDLE && tier__decide_phase_change(e->hit_fast, e->hit_slow)) {
		if (evicted_bytes(e) >= e->turnover_until)
			tier__count(e, NULL, agent_turnovers, 1);
		e->turnover_until = evicted_bytes(e) + e->cached_bytes;
	}
}

bool tier__agent_turnover(const struct tier_engine *e)
{
	return evicted_bytes(e) < e->turnover_until;
}

static struct tier__budget_in budget_in(const struct tier_engine *e)
{
	return (struct tier__budget_in){
		.m = { e->flush_mode, e->evict_mode, e->effort_pct },
		.drain_flush = e->drain_flush, .drain_evict = e->drain_evict,
		.any_dirty = e->n_dirty != 0,
		.base_lat_ewma = e->base_lat_ewma, .base_lat_floor = e->base_lat_floor,
		.turnover = tier__agent_turnover(e),
		.reqs_inflight = e->reqs_inflight,
	};
}

static uint64_t flush_budget(const struct tier_engine *e)
{
	struct tier__budget_in b = budget_in(e);

	return tier__decide_flush_budget(&e->p, &b);
}

static uint64_t evict_budget(const struct tier_engine *e)
{
	struct tier__budget_in b = budget_in(e);

	return tier__decide_evict_budget(&e->p, &b);
}

/* This run's share of a budget: what is left after the jobs in flight, one batch at most. */
static size_t slice(uint64_t budget, uint64_t in_flight)
{
	uint64_t left = budget > in_flight ? budget - in_flight : 0;

	return (size_t)(left < AGENT_BATCH ? left : AGENT_BATCH);
}

/*
 * The flush hand (the clock on, tier__decide_flush_how): it walks the
 * object map in slab order while flush jobs may start, at most HAND_MAX
 * objects and two revolutions a run.  A DIRTY object the agent may flush
 * loses its dirty extents not referenced since the clock last looked to
 * base (a cold flush); one with none is passed over.  Once the hand has
 * gone a whole revolution without starting a cold flush (every dirty
 * extent hot; counted across runs, e->flush_hand_idle, so that a map
 * larger than HAND_MAX gets there too), it flushes whole objects, until a
 * cold flush starts again.
 * Returns the jobs it started.
 */
static size_t run_flush_hand(struct tier_engine *e, const struct want_arg *order,
			     uint64_t budget)
{
	struct want_arg a = *order;
	uint32_t n = e->slab_used;
	size_t started = 0;

	a.quiet = true;
	for (uint32_t k = 0; k < 2 * n && k < HAND_MAX && e->agent_flushing < budget; k++) {
		struct tier__obj *o;
		struct tier_image *img;
		bool round2 = e->flush_hand_idle >= n;
		int r = -1;

		e->flush_hand = e->flush_hand % n + 1;
		e->flush_hand_idle++;
		o = tier__obj_at(e, e->flush_hand);
		if (!o || o->state != TIER__DIRTY || !want_flush(&a, o->key))
			continue;
		img = tier__image_by_id(e, TIER__KEY_ID(o->key));
		if (!img)
			continue;
		switch (tier__flush_how(e, o, true, round2)) {
		case TIER__FLH_PASS:
			break;
		case TIER__FLH_COLD:
			r = tier__flush_start_cold(e, img, o);
			if (r == 0)
				e->flush_hand_idle = 0;   /* something cold again */
			break;
		default:
			r = tier__flush_start(e, img, o);
		}
		if (r == 0)
			started++;
	}
	return started;
}

/*
 * The order's coldest DIRTY objects, flushed whole; those with hot dirty
 * extents (tier__decide_flush_how: HAND) are left to the flush hand,
 * which then takes the rest of this run's budget.
 */
static size_t run_flushes(struct tier_engine *e, struct want_arg *a)
{
	uint64_t budget = flush_budget(e), keys[AGENT_BATCH];
	size_t n, started = 0, to_hand = 0;

	if (e->agent_flushing >= budget || !e->n_dirty)
		return 0;
	n = e->pol->ops->coldest(e->pol, keys, slice(budget, e->agent_flushing), want_flush, a);
	for (size_t i = 0; i < n; i++) {
		struct tier__obj *o = tier__obj_find(e, keys[i]);
		struct tier_image *img;
		if (!o)
			continue;
		if (tier__flush_how(e, o, false, false) == TIER__FLH_HAND) {
			to_hand++;
			continue;
		}
		img = tier__image_by_id(e, TIER__KEY_ID(o->key));
		if (img && tier__flush_start(e, img, o) == 0)
			started++;
	}
	if (to_hand && e->agent_flushing < budget)
		started += run_flush_hand(e, a, budget);
	return started + n;
}

/*
 * evict_extents = 2, extent mode: a CLOCK over extents.  The hand walks the
 * object map (slab order, whatever the eviction order says) while eviction
 * jobs may start: a cached object with referenced extents loses its clean
 * unreferenced ones (or, with none, just its bits: a second chance), one
 * with none referenced since the hand last passed goes whole.  It visits
 * every object in turn, so the cold extents of an object that is always
 * touched somewhere (and so never at the order's cold end) go too, as they
 * would from an LRU of blocks.  Returns the jobs it started.
 */
static size_t run_hand(struct tier_engine *e, const struct want_arg *order, uint64_t budget)
{
	struct want_arg a = *order;
	uint32_t n = e->slab_used;
	size_t started = 0;

	a.quiet = true;
	for (uint32_t k = 0; k < n && k < HAND_MAX && e->agent_evicting < budget; k++) {
		struct tier__obj *o;
		struct tier_image *img;

		e->evict_hand = e->evict_hand % n + 1;
		o = tier__obj_at(e, e->evict_hand);
		if (!o || o->state == TIER__ABSENT || !want_evict(&a, o->key))
			continue;
		img = tier__image_by_id(e, TIER__KEY_ID(o->key));
		if (!img)
			continue;
		switch (tier__evict_how(e, o, false, false)) {
		case TIER__EVH_PARTIAL:
			if (tier__evict_partial_start(e, img, o) == 0)
				started++;   /* else (no memory) the hand just goes on */
			break;
		case TIER__EVH_AGAIN:
			tier__evict_again(e, o);
			break;
		case TIER__EVH_PASS:
			tier__count(e, img, evict_pass, 1);
			break;   /* all dirty, cold ones for the flushes: its bits stay */
		default:
			if (tier__evict_start(e, img, o) == 0)
				started++;
		}
	}
	return started;
}

/*
 * Take the victims the order hands out: whole, partly (their unreferenced
 * clean extents) or not at all this time (a second chance, or a pass for a
 * copy with no clean extent while the agent flushes), as
 * tier__decide_evict_how says (evict_ext.c).  Second chances start
 * nothing: ask again, a few rounds at most, so that a batch of them does
 * not leave the cache over target until the next tick; in full mode (from
 * 100%) there are none.  The hand does not run while the object count
 * binds: only whole objects free room then, and the order knows which are
 * coldest.
 */
static size_t run_evictions(struct tier_engine *e, struct want_arg *a)
{
	uint64_t budget = evict_budget(e), keys[AGENT_BATCH];
	bool now = e->evict_mode == TIER_EVICT_FULL;
	size_t n, total = 0;

	if (e->p.evict_extents == 2 && e->refbits && !e->drain_evict &&
	    e->p.promote_granularity == TIER_GRAN_EXTENT && e->agent_evicting < budget &&
	    (e->n_cached > e->n_dirty || e->p.agent_evict_dirty) && !tier__full_by_objects(e) &&
	    run_hand(e, a, budget))
		return 1;   /* the hand started jobs; else the order's cold end, below */
	for (int round = 0; round < 4; round++) {
		size_t again = 0;

		if (e->agent_evicting >= budget)
			return total ? total : e->agent_evicting ? 1 : 0;
		if (e->n_cached <= e->n_dirty && !e->p.agent_evict_dirty)
			return total;   /* nothing clean to evict */
		n = e->pol->ops->coldest(e->pol, keys, slice(budget, e->agent_evicting), want_evict, a);
		for (size_t i = 0; i < n; i++) {
			struct tier__obj *o = tier__obj_find(e, keys[i]);
			struct tier_image *img;
			if (!o)
				continue;
			img = tier__image_by_id(e, TIER__KEY_ID(o->key));
			if (!img)
				continue;
			switch (tier__evict_how(e, o, e->drain_evict, now)) {
			case TIER__EVH_PARTIAL:
				tier__evict_partial_start(e, img, o);   /* fails only without memory */
				break;
			case TIER__EVH_AGAIN:
				tier__evict_again(e, o);
				again++;
				break;
			case TIER__EVH_PASS:
				tier__count(e, img, evict_pass, 1);
				break;   /* all dirty, cold ones for the flushes: its bits stay */
			default:
				tier__evict_start(e, img, o);
			}
		}
		total += n;
		if (!n || again < n)
			break;   /* jobs started (or nothing left): they run the agent again */
	}
	return total;
}

void tier__agent_run(struct tier_engine *e)
{
	struct want_arg a = { .e = e, .now_ms = tier__eng_now_ms(e) };
	size_t nf, ne = 0;

	tier__agent_modes(e);
	if (a.now_ms < e->agent_pause_until_ms || e->quiesced)
		return;   /* resting after a failure, or shutting down */
	a.img = e->drain_all ? NULL : e->drain_img;
	a.ignore_age = e->evict_mode == TIER_EVICT_FULL || e->drain_flush || e->drain_evict;
	nf = run_flushes(e, &a);
	if (e->evict_mode != TIER_EVICT_IDLE || e->drain_evict)
		ne = run_evictions(e, &a);
	(void)nf;
	(void)ne;
	if (e->drain_flush && !(a.img ? a.img->n_dirty : e->n_dirty))
		e->drain_flush = false;
	if (e->drain_evict && !(a.img ? a.img->n_cached : e->n_cached))
		e->drain_evict = false;
	tier__agent_modes(e);
}
