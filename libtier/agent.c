/* SPDX-License-Identifier: MIT */
/*
 * libtier/agent.c - the flush/evict agent.  It decides the flush mode
 * (idle/low/high from the dirty ratio) and the evict mode (idle/some/full
 * from the full ratio) with hysteresis, the evict effort, and which objects
 * to act on: the coldest first as the eviction policy ranks them, honouring
 * cache_min_flush_age / cache_min_evict_age except in full mode, and
 * skipping for a while an object written during its last flush.  It bounds
 * its own ops (agent_max_low_ops / agent_max_ops) and backs off flushing
 * when base latency climbs, so it never starves client I/O on the base
 * pool.  It only starts jobs; it must never block or touch the store.
 */
#include <math.h>
#include <stdlib.h>

#include "libtier/engine_int.h"

#define AGENT_SLOP 0.02   /* hysteresis, in ratio units */
#define AGENT_BATCH 64

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
double tier__full_ratio_less(const struct tier_engine *e, uint64_t bytes, uint64_t objs)
{
	uint64_t b = e->cached_bytes + e->promoting_bytes + e->resv_bytes - bytes;
	uint64_t n = e->n_cached + e->n_promoting + e->n_resv - objs;
	double r = 0.0;

	if (e->p.target_max_bytes)
		r = (double)b / (double)e->p.target_max_bytes;
	if (e->p.target_max_objects) {
		double ro = (double)n / (double)e->p.target_max_objects;
		if (ro > r)
			r = ro;
	}
	return r;
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
	o->flags |= TIER__OF_HOT;
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
			o->flags &= (uint16_t)~TIER__OF_HOT;
	}
	e->n_hot = w;
}

void tier__agent_modes(struct tier_engine *e)
{
	const struct tier_params *p = &e->p;
	double dr = tier__dirty_ratio(e), fr = tier__full_ratio(e);
	double hi = p->cache_target_dirty_high_ratio, lo = p->cache_target_dirty_ratio;
	double ft = p->cache_target_full_ratio;
	int fm, em;

	if (dr > hi || (e->flush_mode == TIER_FLUSH_HIGH && dr > hi - AGENT_SLOP && dr > 0))
		fm = TIER_FLUSH_HIGH;
	else if (dr > lo || (e->flush_mode != TIER_FLUSH_IDLE && dr > lo - AGENT_SLOP && dr > 0))
		fm = TIER_FLUSH_LOW;
	else
		fm = TIER_FLUSH_IDLE;

	if (fr > 1.0 || (e->evict_mode == TIER_EVICT_FULL && fr > 1.0 - AGENT_SLOP))
		em = TIER_EVICT_FULL;
	else if (fr > ft || (e->evict_mode != TIER_EVICT_IDLE && fr > ft - AGENT_SLOP && fr > 0))
		em = TIER_EVICT_SOME;
	else
		em = TIER_EVICT_IDLE;

	if (p->cache_mode == TIER_MODE_NONE) {
		/* pass-through: drain whatever the cache still holds */
		fm = e->n_dirty ? TIER_FLUSH_HIGH : TIER_FLUSH_IDLE;
		em = e->n_cached ? TIER_EVICT_FULL : TIER_EVICT_IDLE;
	}
	e->flush_mode = fm;
	e->evict_mode = em;
	if (em == TIER_EVICT_FULL) {
		e->effort_pct = 100;
	} else if (em == TIER_EVICT_SOME) {
		double eff = ft < 1.0 ? (fr - ft) / (1.0 - ft) : 1.0;
		if (eff < 0.1)
			eff = 0.1;
		if (eff > 1.0)
			eff = 1.0;
		e->effort_pct = (unsigned)lround(eff * 100.0);
	} else {
		e->effort_pct = 0;
	}
}

struct want_arg {
	struct tier_engine *e;
	const struct tier_image *img;  /* NULL = any */
	bool ignore_age;
	uint64_t now_ms;
};

static bool want_common(const struct want_arg *a, const struct tier__obj *o)
{
	const struct tier_image *img = tier__image_by_id(a->e, TIER__KEY_ID(o->key));

	if (!img || img->closed)
		return false;
	return !a->img || a->img == img;
}

static bool want_flush(void *arg, uint64_t key)
{
	const struct want_arg *a = arg;
	const struct tier__obj *o = tier__obj_find(a->e, key);

	if (!o || o->state != TIER__DIRTY || !want_common(a, o))
		return false;
	/* a cache write in flight (EXCL) is fine: the flush snapshots once it lands */
	if (o->flags & (TIER__OF_FLUSHING | TIER__OF_PROMOTING | TIER__OF_EVICTING | TIER__OF_HOT))
		return false;
	return a->ignore_age || a->now_ms - o->mtime_ms >= a->e->p.cache_min_flush_age;
}

static bool want_evict(void *arg, uint64_t key)
{
	const struct want_arg *a = arg;
	const struct tier__obj *o = tier__obj_find(a->e, key);

	if (!o || o->state != TIER__CLEAN || !want_common(a, o))
		return false;
	if (tier__obj_busy(o) || (o->flags & TIER__OF_VUNK))
		return false;
	return a->ignore_age || a->now_ms - o->mtime_ms >= a->e->p.cache_min_evict_age;
}

static uint64_t flush_budget(const struct tier_engine *e)
{
	uint64_t b;

	if (e->drain_flush || e->drain_evict)
		return e->p.agent_max_ops;
	switch (e->flush_mode) {
	case TIER_FLUSH_LOW: b = e->p.agent_max_low_ops; break;
	case TIER_FLUSH_HIGH: b = e->p.agent_max_ops; break;
	default: b = 0;
	}
	/* full cache of dirty objects: flushing is what makes room */
	if (e->evict_mode == TIER_EVICT_FULL && b < e->p.agent_max_ops && e->n_dirty)
		b = e->p.agent_max_ops;
	/* base latency well above its floor: client I/O is queueing behind us */
	if (b > 1 && e->evict_mode != TIER_EVICT_FULL && e->base_lat_floor > 0 &&
	    e->base_lat_ewma > 2.0 * e->base_lat_floor)
		b = e->flush_mode == TIER_FLUSH_HIGH ? b / 2 : 1;
	return b;
}

static uint64_t evict_budget(const struct tier_engine *e)
{
	if (e->drain_evict || e->evict_mode == TIER_EVICT_FULL)
		return e->p.agent_max_ops;
	if (e->evict_mode == TIER_EVICT_SOME) {
		uint64_t b = (uint64_t)ceil((double)e->p.agent_max_ops * e->effort_pct / 100.0);
		return b ? b : 1;
	}
	return 0;
}

/* This run's share of a budget: what is left after the jobs in flight, one batch at most. */
static size_t slice(uint64_t budget, uint64_t in_flight)
{
	uint64_t left = budget > in_flight ? budget - in_flight : 0;

	return (size_t)(left < AGENT_BATCH ? left : AGENT_BATCH);
}

static size_t run_flushes(struct tier_engine *e, struct want_arg *a)
{
	uint64_t budget = flush_budget(e), keys[AGENT_BATCH];
	size_t n, started = 0;

	if (e->agent_flushing >= budget || !e->n_dirty)
		return 0;
	n = e->pol->ops->coldest(e->pol, keys, slice(budget, e->agent_flushing), want_flush, a);
	for (size_t i = 0; i < n; i++) {
		struct tier__obj *o = tier__obj_find(e, keys[i]);
		struct tier_image *img;
		if (!o)
			continue;
		img = tier__image_by_id(e, TIER__KEY_ID(o->key));
		if (img && tier__flush_start(e, img, o) == 0)
			started++;
	}
	return started + n;
}

static size_t run_evictions(struct tier_engine *e, struct want_arg *a)
{
	uint64_t budget = evict_budget(e), keys[AGENT_BATCH];
	size_t n;

	if (e->agent_evicting >= budget)
		return e->agent_evicting ? 1 : 0;
	if (e->n_cached <= e->n_dirty)
		return 0;   /* nothing clean to evict */
	n = e->pol->ops->coldest(e->pol, keys, slice(budget, e->agent_evicting), want_evict, a);
	for (size_t i = 0; i < n; i++) {
		struct tier__obj *o = tier__obj_find(e, keys[i]);
		struct tier_image *img;
		if (!o)
			continue;
		img = tier__image_by_id(e, TIER__KEY_ID(o->key));
		if (img)
			tier__evict_start(e, img, o);
	}
	return n;
}

void tier__agent_run(struct tier_engine *e)
{
	struct want_arg a = { .e = e, .now_ms = tier__eng_now_ms(e) };
	size_t nf, ne = 0;

	tier__agent_modes(e);
	if (a.now_ms < e->agent_pause_until_ms)
		return;
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
