/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_engine_fill.c - fills of partly valid copies (extent
 * bitmaps): a hot partial object becomes whole after reads (every extent
 * valid, later reads full hits with no base read, dirty bits and state as
 * they were, the agent can still flush and evict it); a cold one is not
 * filled; a full cache or the throttle skips the fill, counted; a client
 * write racing a fill wins (the fill leaves the extents it wrote alone);
 * a fill after an unsynced base remove sends the barrier first.
 */
#include "test_engine_harness.h"

#define ISZ (64 * OS)
#define EXT 4096u
#define NEXT (OS / EXT)

/* Base ops of one kind (TIER_STORE_READ, _WRITE) so far. */
static uint64_t base_ops(struct env *v, int kind)
{
	struct tier_store_stats s;

	tier_store_get_stats(v->base, &s);
	return s.ops[kind];
}

static uint64_t base_reads(struct env *v)
{
	return base_ops(v, TIER_STORE_READ);
}

static uint64_t base_read_bytes(struct env *v)
{
	struct tier_store_stats s;

	tier_store_get_stats(v->base, &s);
	return s.bytes[TIER_STORE_READ];
}

static void ext_params(struct tier_params *p, unsigned read_recency)
{
	env_params(p);
	p->promote_granularity = TIER_GRAN_EXTENT;
	p->min_read_recency_for_promote = read_recency;
	/* the fill mechanics: room alone widens a fill, no budget (tests of those set them) */
	p->fill_budget_pct = 0;
	p->fill_locality_pct = 0;
}

/* Base holds objects 0..n-1 written in proxy mode (seed 5), then p applies. */
static void base_content(struct env *v, const struct tier_params *p, uint8_t *model, unsigned n)
{
	struct tier_params px = *p;

	px.cache_mode = TIER_MODE_PROXY;
	env_set_params(v, &px);
	assert_int_equal(env_write(v, 0, n * OS, 5), 0);
	model_write(model, 0, n * OS, 5);
	env_set_params(v, p);
}

/* The valid and dirty words of object objno's stored meta (one word: 16 extents). */
static void stored_bits(struct env *v, uint64_t objno, uint64_t *valid, uint64_t *dirty,
			int *flags)
{
	uint64_t w[2];
	struct tier_meta m;

	*flags = cache_meta(v, objno, &m, w, 1);
	assert_true(*flags >= 0);
	assert_true(*flags & TIER_META_F_EXTENTS);
	*valid = w[0];
	*dirty = w[1];
}

static void test_hot_partial_becomes_whole(void **state)
{
	struct tier_params p;
	uint8_t *model = calloc(1, ISZ);
	uint64_t valid, dirty;
	int flags;
	(void)state;

	ext_params(&p, 1);   /* the default: a read is admitted on its second access */
	struct env *v = env_new(&p);
	base_content(v, &p, model, 2);
	/* object 0 DIRTY with extent 2; object 1 CLEAN (flushed) with extent 5 */
	assert_int_equal(env_write(v, 2 * EXT, EXT, 6), 0);
	model_write(model, 2 * EXT, EXT, 6);
	assert_int_equal(env_write(v, OS + 5 * EXT, EXT, 7), 0);
	model_write(model, OS + 5 * EXT, EXT, 7);
	tier_engine_flush_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_write(v, 2 * EXT, EXT, 8), 0);   /* object 0 dirty again */
	model_write(model, 2 * EXT, EXT, 8);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.cached_bytes, 2 * EXT);
	assert_int_equal(s.dirty_objects, 1);
	assert_int_equal(s.fills, 0);

	/* the writes were the first accesses: these reads are hot, and need base */
	env_check(v, model, 0, 2 * OS);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.fills, 2);
	assert_int_equal(s.fill_bytes, 2 * (OS - EXT));
	assert_int_equal(s.fill_skip_cold, 0);
	assert_int_equal(s.cached_bytes, 2 * OS);
	assert_int_equal(s.cached_objects, 2);
	/* dirty bits and states as they were: the filled extents are clean */
	assert_int_equal(s.dirty_bytes, EXT);
	assert_int_equal(s.dirty_objects, 1);
	stored_bits(v, 0, &valid, &dirty, &flags);
	assert_int_equal(valid, (1u << NEXT) - 1);
	assert_int_equal(dirty, 1u << 2);
	assert_true(flags & TIER_META_F_DIRTY);
	stored_bits(v, 1, &valid, &dirty, &flags);
	assert_int_equal(valid, (1u << NEXT) - 1);
	assert_int_equal(dirty, 0);
	assert_int_equal(flags & TIER_META_F_DIRTY, 0);

	/* later reads are full hits: no base read at all */
	uint64_t r0 = base_reads(v), h0 = s.read_hits, m0 = s.read_misses;
	env_check(v, model, 0, 2 * OS);
	env_check(v, model, 3 * EXT, 100);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(base_reads(v), r0);
	assert_int_equal(s.read_hits - h0, 3);
	assert_int_equal(s.read_misses, m0);
	assert_int_equal(s.fills, 2);

	/* the agent flushes and evicts the result like any copy */
	tier_engine_flush_all(v->e, NULL);
	env_pump(v);
	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.cached_bytes, 0);
	assert_int_equal(s.cached_objects, 0);
	assert_int_equal(s.evictions, 2);
	assert_int_equal(cache_meta(v, 0, &(struct tier_meta){ 0 }, NULL, 0), -1);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

static void rotate(struct env *v)
{
	env_advance_ms(v, v->p.hit_set_period + 1);
	tier_engine_tick(v->e);
	env_pump(v);
}

static void test_cold_partial_not_filled(void **state)
{
	struct tier_params p;
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	ext_params(&p, 2);   /* needs the current hitset and the newest archived one */
	struct env *v = env_new(&p);
	base_content(v, &p, model, 1);
	assert_int_equal(env_write(v, 2 * EXT, EXT, 6), 0);
	model_write(model, 2 * EXT, EXT, 6);
	for (int i = 0; i < 3; i++)
		env_check(v, model, 0, OS);   /* in the current hitset only: cold */
	env_pump(v);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.fills, 0);
	assert_int_equal(s.fill_skip_cold, 3);
	assert_int_equal(s.cached_bytes, EXT);
	uint64_t r0 = base_reads(v);
	env_check(v, model, 4 * EXT, EXT);   /* still from base */
	assert_int_equal(base_reads(v), r0 + 1);
	/*
	 * After a rotation the object is in the archived set only: the first
	 * read is still cold (recency is checked before it is recorded), the
	 * second finds it in both sets and fills.
	 */
	rotate(v);
	env_check(v, model, 0, OS);
	env_pump(v);
	assert_int_equal(env_stats(v).fills, 0);
	env_check(v, model, 0, OS);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.fills, 1);
	assert_int_equal(s.fill_skip_cold, 5);
	assert_int_equal(s.cached_bytes, OS);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

static void test_full_or_throttled_skips(void **state)
{
	struct tier_params p;
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	/* full: the target is the extents written already, the agent kept out */
	ext_params(&p, 0);
	p.target_max_bytes = 2 * EXT;
	struct env *v = env_new(&p);
	base_content(v, &p, model, 2);
	tier_engine_quiesce(v->e);
	assert_int_equal(env_write(v, 0, EXT, 6), 0);
	model_write(model, 0, EXT, 6);
	assert_int_equal(env_write(v, OS, EXT, 7), 0);
	model_write(model, OS, EXT, 7);
	assert_int_equal(env_stats(v).full_ratio_ppm, 1000000);
	env_check(v, model, 0, 2 * OS);
	env_pump(v);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.fills, 0);
	assert_int_equal(s.fill_skip_full, 2);
	assert_int_equal(s.cached_bytes, 2 * EXT);
	env_free(v);

	/* throttled: the byte bucket starts with one object and never refills here */
	ext_params(&p, 0);
	p.promote_max_bytes_sec = 1;
	p.fill_budget_pct = 0;   /* no cache-write budget: fills take the throttle's tokens */
	v = env_new(&p);
	base_content(v, &p, model, 2);
	assert_int_equal(env_write(v, 0, EXT, 6), 0);
	model_write(model, 0, EXT, 6);
	assert_int_equal(env_write(v, OS, EXT, 7), 0);
	model_write(model, OS, EXT, 7);
	env_check(v, model, 8 * EXT, EXT);   /* its fill reads the rest of object 0 */
	env_pump(v);
	uint64_t r0 = base_read_bytes(v);
	env_check(v, model, OS + 8 * EXT, EXT);
	env_pump(v);
	s = env_stats(v);
	/* the window's fill is throttled; the read's own extent fills from the read */
	assert_int_equal(s.fills, 2);
	assert_int_equal(s.fill_bytes, OS - EXT + EXT);
	assert_int_equal(s.fill_skip_throttled, 1);
	assert_int_equal(s.promote_throttled, 0);   /* fills have their own counter */
	assert_int_equal(s.cached_bytes, OS + 2 * EXT);
	assert_int_equal(base_read_bytes(v) - r0, EXT);   /* the read's, nothing more */
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

/*
 * A fill reads base while client writes go on: the writes that land in the
 * meantime (an aligned one, and one needing a base read of its own extent)
 * keep their bytes, and the fill adds only what is still invalid.
 */
static void test_write_racing_fill_wins(void **state)
{
	struct tier_params p;
	struct tier_devmodel_params bm = { .read_latency_us = 10000, .write_latency_us = 10000 };
	struct tier_devmodel_params cm = { .read_latency_us = 100, .write_latency_us = 100 };
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	ext_params(&p, 0);
	struct env *v = env_new_vt(&p, &bm, &cm, true);
	base_content(v, &p, model, 1);
	assert_int_equal(env_write(v, 2 * EXT, EXT, 6), 0);
	model_write(model, 2 * EXT, EXT, 6);
	/* a read of extent 8 only: base serves it, and a fill starts behind it */
	env_check(v, model, 8 * EXT, EXT);
	assert_int_equal(env_stats(v).fills, 0);
	/* lands in the cache at once, while the fill still reads base */
	assert_int_equal(env_write(v, 9 * EXT, EXT, 7), 0);
	model_write(model, 9 * EXT, EXT, 7);
	assert_int_equal(env_stats(v).fills, 0);
	/* partial extent 11: this write reads its extent from base, holding the object */
	assert_int_equal(env_write(v, 11 * EXT + 100, 200, 8), 0);
	model_write(model, 11 * EXT + 100, 200, 8);
	env_pump(v);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.fills, 1);
	assert_int_equal(s.fill_bytes, OS - 3 * EXT);   /* not extents 2, 9 and 11 */
	assert_int_equal(s.cached_bytes, OS);
	assert_int_equal(s.dirty_bytes, 3 * EXT);
	uint64_t r0 = base_reads(v);
	env_check(v, model, 0, OS);
	assert_int_equal(base_reads(v), r0);
	/* and they stay so through a flush and an eviction */
	tier_engine_flush_all(v->e, NULL);
	env_pump(v);
	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_bytes, 0);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

/*
 * Base writes and removes not yet synced: the fill copies base the way a
 * promotion does (tier__decide_promote_read), a name barrier before it reads
 * an object whose remove no barrier covers yet, FUA reads of an object
 * written without FUA.  Local and mem power-cut stores report volatile acks.
 */
static void test_fill_reads_base_durably(void **state)
{
	struct tier_params p;
	struct tier_mem_opts mo = { .powercut_model = true };
	struct env *v = calloc(1, sizeof(*v));
	uint8_t *model = calloc(1, ISZ);
	struct tier_store_stats b0, b1;
	(void)state;

	assert_non_null(v);
	v->now_ns = 1000000000ull;
	ext_params(&p, 0);
	v->p = p;
	assert_int_equal(tier_cq_create(NULL, NULL, &v->cq), 0);
	assert_int_equal(tier_store_mem_create("base", &mo, v->cq, &v->base), 0);
	assert_int_equal(tier_store_mem_create("cache", &mo, v->cq, &v->cache), 0);
	assert_int_equal(env_engine(v), 1);
	/* object 0: base written without FUA (proxy mode), then a partial copy */
	base_content(v, &p, model, 1);
	assert_int_equal(env_write(v, 2 * EXT, EXT, 6), 0);
	model_write(model, 2 * EXT, EXT, 6);
	tier_store_get_stats(v->base, &b0);
	env_check(v, model, 8 * EXT, EXT);
	env_pump(v);
	tier_store_get_stats(v->base, &b1);
	assert_int_equal(env_stats(v).fills, 1);
	/* the read of extent 8 is plain; the fill's reads are FUA */
	assert_true(b1.fua_ops[TIER_STORE_READ] - b0.fua_ops[TIER_STORE_READ] >= 1);
	assert_int_equal(b1.fua_ops[TIER_STORE_READ] - b0.fua_ops[TIER_STORE_READ],
			 b1.ops[TIER_STORE_READ] - b0.ops[TIER_STORE_READ] - 1);
	/* object 1: its base object removed (uncached trim), then a partial copy */
	assert_int_equal(env_io(v, TIER_REQ_TRIM, OS, OS, NULL, 0), 0);
	assert_int_equal(env_write(v, OS + 3 * EXT, EXT, 9), 0);
	model_write(model, OS + 3 * EXT, EXT, 9);
	tier_store_get_stats(v->base, &b0);
	env_check(v, model, OS, OS);
	env_pump(v);
	tier_store_get_stats(v->base, &b1);
	assert_int_equal(env_stats(v).fills, 2);
	assert_int_equal(b1.fua_ops[TIER_STORE_REMOVE] - b0.fua_ops[TIER_STORE_REMOVE], 1);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

/* Reads only count base bytes they need; a fill reads each invalid run once. */
static void test_fill_reads_only_invalid_extents(void **state)
{
	struct tier_params p;
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	ext_params(&p, 0);
	struct env *v = env_new(&p);
	base_content(v, &p, model, 1);
	assert_int_equal(env_write(v, 0, 8 * EXT, 6), 0);   /* first half valid */
	model_write(model, 0, 8 * EXT, 6);
	uint64_t b0 = base_read_bytes(v);
	env_check(v, model, 0, EXT);   /* a full hit: no fill */
	env_pump(v);
	assert_int_equal(env_stats(v).fills, 0);
	assert_int_equal(base_read_bytes(v), b0);
	env_check(v, model, 7 * EXT, 2 * EXT);   /* needs extent 8 from base */
	env_pump(v);
	/* the read's extent, then the fill's run: extents 8..15 */
	assert_int_equal(base_read_bytes(v) - b0, EXT + 8 * EXT);
	assert_int_equal(env_stats(v).fills, 1);
	assert_int_equal(env_stats(v).fill_bytes, 8 * EXT);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

/*
 * fill_window: under pressure (the object's missing extents do not fit
 * below cache_target_full_ratio: a target of one object here) a fill copies
 * the lacking extents of the aligned window around the read (2 extents),
 * not the whole object; the throttle and the reservation count those bytes
 * only.  With room (a larger target) it copies all of them again.
 */
static void test_fill_window_copies_only_the_window(void **state)
{
	struct tier_params p;
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	ext_params(&p, 0);
	p.fill_window = 2 * EXT;
	p.target_max_bytes = OS;
	struct env *v = env_new(&p);
	base_content(v, &p, model, 1);
	assert_int_equal(env_write(v, 2 * EXT, EXT, 6), 0);
	model_write(model, 2 * EXT, EXT, 6);
	uint64_t b0 = base_read_bytes(v);
	env_check(v, model, 9 * EXT, EXT);   /* window [8, 10) */
	env_pump(v);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.fills, 1);
	assert_int_equal(s.fill_bytes, 2 * EXT);
	assert_int_equal(s.cached_bytes, 3 * EXT);
	assert_int_equal(base_read_bytes(v) - b0, EXT + 2 * EXT);
	/* extents 8 and 9 hit now; 3 (in the window [2, 4) with valid 2) fills just 3 */
	b0 = base_read_bytes(v);
	env_check(v, model, 8 * EXT, 2 * EXT);
	assert_int_equal(base_read_bytes(v), b0);
	env_check(v, model, 3 * EXT, EXT);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.fills, 2);
	assert_int_equal(s.fill_bytes, 3 * EXT);
	assert_int_equal(s.cached_bytes, 4 * EXT);
	/* room for the rest (12 extents) below 0.8 of a larger target: all of it */
	p.target_max_bytes = 64 * OS;
	env_set_params(v, &p);
	env_check(v, model, 12 * EXT, EXT);
	env_pump(v);
	assert_int_equal(env_stats(v).fills, 3);
	assert_int_equal(env_stats(v).cached_bytes, OS);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

/*
 * A client writes every extent of a fill's window while the fill reads base:
 * the fill has nothing left to write and ends as it lands (it used to touch
 * its freed job there: ASan's heap-use-after-free in fill_land).
 */
static void test_fill_overtaken_by_writes_ends(void **state)
{
	struct tier_params p;
	struct tier_devmodel_params bm = { .read_latency_us = 10000, .write_latency_us = 10000 };
	struct tier_devmodel_params cm = { .read_latency_us = 100, .write_latency_us = 100 };
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	ext_params(&p, 0);
	p.fill_window = 2 * EXT;   /* more than the read brings: a fill reading base */
	p.target_max_bytes = OS;   /* no room for the whole object: the window */
	struct env *v = env_new_vt(&p, &bm, &cm, true);
	base_content(v, &p, model, 1);
	assert_int_equal(env_write(v, 2 * EXT, EXT, 6), 0);
	model_write(model, 2 * EXT, EXT, 6);
	env_check(v, model, 8 * EXT, EXT);   /* base serves it, a fill of extents 8-9 behind it */
	assert_int_equal(env_write(v, 8 * EXT, 2 * EXT, 7), 0);   /* lands while the fill reads */
	model_write(model, 8 * EXT, 2 * EXT, 7);
	env_pump(v);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.fills, 0);
	assert_int_equal(s.fill_failed, 0);
	assert_int_equal(s.cached_bytes, 3 * EXT);
	assert_int_equal(s.dirty_bytes, 3 * EXT);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

/* ---- read fills: the extents a proxied read brought, cached with no base read of their own ---- */

/*
 * Extent mode, the default admission (a read on its object's second
 * access): a read miss of an object with no copy makes a CLEAN copy of the
 * whole extents it read, a read needing base for part of a copy adds its
 * own extents (fill_window = one extent: the window is what it brings),
 * with no base read beyond the read's; later reads of them are hits.
 */
static void test_read_miss_fills_its_extents(void **state)
{
	struct tier_params p;
	uint8_t *model = calloc(1, ISZ);
	uint64_t valid, dirty;
	int flags;
	(void)state;

	ext_params(&p, 1);
	p.fill_window = EXT;
	p.target_max_bytes = OS;   /* little room: a fill copies its window, not the object */
	struct env *v = env_new(&p);
	base_content(v, &p, model, 2);
	/* age base_content's writes out of the hitsets */
	for (uint64_t i = 0; i <= p.hit_set_count; i++)
		rotate(v);
	/* the first access of object 0: cold, base serves it, nothing cached */
	env_check(v, model, 3 * EXT, EXT);
	env_pump(v);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.fills, 0);
	assert_int_equal(s.cached_objects, 0);
	/* the second: the two extents it reads become a CLEAN copy */
	uint64_t r0 = base_reads(v), b0 = base_read_bytes(v);
	env_check(v, model, 3 * EXT, 2 * EXT);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(base_reads(v) - r0, 1);
	assert_int_equal(base_read_bytes(v) - b0, 2 * EXT);
	assert_int_equal(s.fills, 1);
	assert_int_equal(s.fill_bytes, 2 * EXT);
	assert_int_equal(s.promotions, 0);
	assert_int_equal(s.cached_objects, 1);
	assert_int_equal(s.cached_bytes, 2 * EXT);
	assert_int_equal(s.dirty_objects, 0);
	stored_bits(v, 0, &valid, &dirty, &flags);
	assert_int_equal(valid, 3u << 3);
	assert_int_equal(dirty, 0);
	assert_int_equal(flags & TIER_META_F_DIRTY, 0);
	/* a hit now: no base read */
	r0 = base_reads(v);
	env_check(v, model, 3 * EXT, 2 * EXT);
	assert_int_equal(base_reads(v), r0);
	assert_int_equal(env_stats(v).read_hits, s.read_hits + 1);
	/* a partly valid copy: a read of extents 4-6 adds 5 and 6, reading just those */
	b0 = base_read_bytes(v);
	env_check(v, model, 4 * EXT, 3 * EXT);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(base_read_bytes(v) - b0, 2 * EXT);
	assert_int_equal(s.fills, 2);
	assert_int_equal(s.fill_bytes, 4 * EXT);
	assert_int_equal(s.cached_bytes, 4 * EXT);
	stored_bits(v, 0, &valid, &dirty, &flags);
	assert_int_equal(valid, 0xfu << 3);
	assert_int_equal(dirty, 0);
	/* object 40, which base does not hold: a hole, its zeros are not cached */
	env_check(v, model, 40 * OS, 2 * EXT);
	env_check(v, model, 40 * OS, 2 * EXT);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.fills, 2);
	assert_int_equal(s.fill_failed, 0);
	assert_int_equal(s.cached_objects, 1);
	/* object 1, twice (admitted the second time): no whole extent in it, nothing to fill */
	assert_int_equal(s.fill_skip_partial, 0);
	env_check(v, model, OS + 9 * EXT + 100, 1000);
	env_check(v, model, OS + 9 * EXT + 100, 1000);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.fills, 2);
	assert_int_equal(s.cached_objects, 1);
	assert_int_equal(s.fill_skip_partial, 1);   /* the refusal is counted */
	assert_int_equal(s.fill_skip_busy + s.fill_skip_unsynced, 0);
	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 0);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

/*
 * admit_when_room: a first read of a cold object (the recency rule, 1,
 * turns it away) is cached by its read fill while the cache is below its
 * full target less the margin (0.78 of target), and proxied with nothing
 * cached once it is within the margin; admit_when_room = 0 proxies it
 * with room too (Ceph's rule as set).
 */
static void test_first_read_cached_with_room(void **state)
{
	struct tier_params p;
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	ext_params(&p, 1);
	p.fill_window = EXT;
	p.target_max_bytes = 4 * OS;   /* 64 extents: the margin's line is 49.92 */
	p.admit_when_room = 0;
	struct env *v = env_new(&p);
	base_content(v, &p, model, 6);
	for (uint64_t i = 0; i <= p.hit_set_count; i++)
		rotate(v);
	/* off: the first read of object 5 is proxied, nothing cached */
	env_check(v, model, 5 * OS + 3 * EXT, EXT);
	env_pump(v);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.fills, 0);
	assert_int_equal(s.cached_objects, 0);

	/* on, with room: the first read of object 0 becomes a CLEAN copy of its extent */
	p.admit_when_room = 1;
	env_set_params(v, &p);
	env_check(v, model, 3 * EXT, EXT);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.fills, 1);
	assert_int_equal(s.cached_objects, 1);
	assert_int_equal(s.cached_bytes, EXT);
	uint64_t r0 = base_reads(v);
	env_check(v, model, 3 * EXT, EXT);   /* a hit: no base read */
	assert_int_equal(base_reads(v), r0);
	assert_int_equal(env_stats(v).read_hits, s.read_hits + 1);

	/* within the margin (50 of 64 extents: 0.781): the rule as set again */
	assert_int_equal(env_write(v, OS, 3 * OS, 9), 0);
	model_write(model, OS, 3 * OS, 9);
	assert_int_equal(env_write(v, 8 * EXT, EXT, 10), 0);
	model_write(model, 8 * EXT, EXT, 10);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.cached_bytes, 50 * EXT);
	env_check(v, model, 4 * OS, EXT);   /* object 4: cold, not cached */
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.fills, 1);
	assert_int_equal(s.cached_objects, 4);
	assert_int_equal(s.cached_bytes, 50 * EXT);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

/*
 * The read a read fill takes its data from reads base the way a promotion
 * would: FUA where base was written without FUA since its last sync, and no
 * read fill at all while a base remove no barrier covers is pending.
 */
static void test_read_fill_reads_base_durably(void **state)
{
	struct tier_params p;
	struct tier_mem_opts mo = { .powercut_model = true };
	struct env *v = calloc(1, sizeof(*v));
	uint8_t *model = calloc(1, ISZ);
	struct tier_store_stats b0, b1;
	(void)state;

	assert_non_null(v);
	v->now_ns = 1000000000ull;
	ext_params(&p, 0);
	v->p = p;
	assert_int_equal(tier_cq_create(NULL, NULL, &v->cq), 0);
	assert_int_equal(tier_store_mem_create("base", &mo, v->cq, &v->base), 0);
	assert_int_equal(tier_store_mem_create("cache", &mo, v->cq, &v->cache), 0);
	assert_int_equal(env_engine(v), 1);
	base_content(v, &p, model, 2);   /* proxied writes: base not synced */
	tier_store_get_stats(v->base, &b0);
	env_check(v, model, 3 * EXT, 2 * EXT);
	env_pump(v);
	tier_store_get_stats(v->base, &b1);
	assert_int_equal(env_stats(v).fills, 1);
	assert_int_equal(b1.ops[TIER_STORE_READ] - b0.ops[TIER_STORE_READ], 1);
	assert_int_equal(b1.fua_ops[TIER_STORE_READ] - b0.fua_ops[TIER_STORE_READ], 1);
	/* object 1's base object removed (an uncached trim): no barrier, so no read fill */
	assert_int_equal(env_io(v, TIER_REQ_TRIM, OS, OS, NULL, 0), 0);
	memset(model + OS, 0, OS);
	assert_int_equal(env_stats(v).fill_skip_unsynced, 0);
	env_check(v, model, OS + 3 * EXT, EXT);
	env_pump(v);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.fills, 1);
	assert_int_equal(s.cached_objects, 1);
	assert_int_equal(s.fill_skip_unsynced, 1);   /* counted */
	assert_int_equal(s.fill_skip_busy + s.fill_skip_partial, 0);
	/* and everything survives a cut after a FLUSH */
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	env_kill_engine(v);
	assert_int_equal(tier_store_mem_power_cut(v->base, TIER_MEM_CUT_KEEP_NONE, 1), 0);
	assert_int_equal(tier_store_mem_power_cut(v->cache, TIER_MEM_CUT_KEEP_NONE, 1), 0);
	assert_int_equal(env_engine(v), 1);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

/*
 * Why the read of a read fill is FUA: object 2 durable in base, then a zero
 * proxied to base (not synced) and a read fill of that extent; the power
 * goes, base loses the zero, the cache keeps its copy.  The block must read
 * the same before and after the copy is evicted (old or new, but it stays
 * put: docs/DURABILITY.md).
 */
static void test_read_fill_vouches_only_durable_bytes(void **state)
{
	struct tier_params p, px;
	struct tier_mem_opts mo = { .powercut_model = true };
	struct env *v = calloc(1, sizeof(*v));
	uint8_t got[EXT], after[EXT];
	(void)state;

	assert_non_null(v);
	v->now_ns = 1000000000ull;
	ext_params(&p, 0);
	v->p = p;
	assert_int_equal(tier_cq_create(NULL, NULL, &v->cq), 0);
	assert_int_equal(tier_store_mem_create("base", &mo, v->cq, &v->base), 0);
	assert_int_equal(tier_store_mem_create("cache", &mo, v->cq, &v->cache), 0);
	assert_int_equal(env_engine(v), 1);
	px = p;
	px.cache_mode = TIER_MODE_PROXY;
	env_set_params(v, &px);
	assert_int_equal(env_write(v, 2 * OS, OS, 11), 0);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	assert_int_equal(env_io(v, TIER_REQ_WRITE_ZEROES, 2 * OS + 3 * EXT, EXT, NULL, 0), 0);
	env_set_params(v, &p);
	assert_int_equal(env_io(v, TIER_REQ_READ, 2 * OS + 3 * EXT, EXT, got, 0), 0);
	env_pump(v);
	assert_int_equal(env_stats(v).fills, 1);
	env_kill_engine(v);
	assert_int_equal(tier_store_mem_power_cut(v->base, TIER_MEM_CUT_KEEP_NONE, 1), 0);
	assert_int_equal(tier_store_mem_power_cut(v->cache, TIER_MEM_CUT_KEEP_ALL, 1), 0);
	assert_int_equal(env_engine(v), 1);
	assert_int_equal(env_io(v, TIER_REQ_READ, 2 * OS + 3 * EXT, EXT, got, 0), 0);
	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 0);
	assert_int_equal(env_io(v, TIER_REQ_READ, 2 * OS + 3 * EXT, EXT, after, 0), 0);
	assert_memory_equal(got, after, EXT);
	env_free(v);
}

static void submit(struct env *v, struct sreq *r, enum tier_req_type t, uint64_t off,
		   uint64_t len, void *buf)
{
	*r = (struct sreq){ .r = { .type = t, .off = off, .len = len, .buf = buf, .cb = sreq_cb } };
	assert_int_equal(tier_image_submit(v->img, &r->r), 0);
}

/*
 * A client write of the extent a read fill is about to cache, sent while
 * the read is still reading base (it saw the old bytes): the write wins,
 * in the cache and after a crash (kill -9) and after a power cut following
 * a FLUSH, never the stale clean extent.  No copy first (the read fill
 * makes one; the write waits for it), then a partly valid copy (the
 * write waits for the read, then for the fill to land).
 */
static void test_write_racing_read_fill_wins(void **state)
{
	struct tier_params p;
	struct tier_mem_opts mo = { .powercut_model = true, .virtual_time = true };
	struct tier_devmodel_params bm = { .read_latency_us = 10000, .write_latency_us = 10000 };
	struct tier_devmodel_params cm = { .read_latency_us = 100, .write_latency_us = 100 };
	struct env *v = calloc(1, sizeof(*v));
	uint8_t *model = calloc(1, ISZ), rb[2 * EXT], wb[EXT];
	struct sreq r, w;
	(void)state;

	assert_non_null(v);
	v->now_ns = 1000000000ull;
	v->vt = true;
	ext_params(&p, 0);
	p.fill_window = EXT;
	/*
	 * Little room below the target: the window never widens to the whole
	 * object, so a read on a partly valid copy takes a read fill too.
	 */
	p.target_max_bytes = OS;
	v->p = p;
	assert_int_equal(tier_cq_create(NULL, NULL, &v->cq), 0);
	mo.model = bm;
	assert_int_equal(tier_store_mem_create("base", &mo, v->cq, &v->base), 0);
	mo.model = cm;
	assert_int_equal(tier_store_mem_create("cache", &mo, v->cq, &v->cache), 0);
	tier_store_mem_advance(v->base, v->now_ns);
	tier_store_mem_advance(v->cache, v->now_ns);
	assert_int_equal(env_engine(v), 1);
	base_content(v, &p, model, 2);

	for (int round = 0; round < 2; round++) {
		uint64_t off = round == 0 ? 8 * EXT : OS + 8 * EXT;

		if (round == 1) {
			/* object 1: a partly valid copy (extent 2) */
			assert_int_equal(env_write(v, OS + 2 * EXT, EXT, 20), 0);
			model_write(model, OS + 2 * EXT, EXT, 20);
		}
		uint64_t r0 = base_reads(v), f0 = env_stats(v).fills;

		submit(v, &r, TIER_REQ_READ, off, 2 * EXT, rb);
		fill(wb, EXT, 30 + (uint64_t)round);
		submit(v, &w, TIER_REQ_WRITE, off, EXT, wb);
		for (int i = 0; i < 100000 && (!r.done || !w.done); i++) {
			size_t n = tier_cq_drain(v->cq);
			tier_engine_tick(v->e);
			if (!n)
				env_vt_step(v);
		}
		assert_int_equal(r.done, 1);
		assert_int_equal(w.done, 1);
		assert_int_equal(r.result, 0);
		assert_int_equal(w.result, 0);
		/* the read came first: base's old bytes */
		assert_memory_equal(rb, model + off, 2 * EXT);
		/* a read fill raced the write: one fill, no base read of its own */
		assert_int_equal(env_stats(v).fills - f0, 1);
		assert_int_equal(base_reads(v) - r0, 1);
		model_write(model, off, EXT, 30 + (uint64_t)round);
		env_pump(v);
		/* object 1 untouched before round 1, which needs it partly valid */
		env_check(v, model, 0, (round + 1) * OS);
		env_pump(v);   /* the fills its reads started have landed */
	}
	/*
	 * kill -9: what was acknowledged is there.  (A cut keeping everything:
	 * the local store's open syncs what a killed process left, the mem
	 * store does not.)
	 */
	env_kill_engine(v);
	assert_int_equal(tier_store_mem_power_cut(v->base, TIER_MEM_CUT_KEEP_ALL, 1), 0);
	assert_int_equal(tier_store_mem_power_cut(v->cache, TIER_MEM_CUT_KEEP_ALL, 1), 0);
	assert_int_equal(env_engine(v), 1);
	env_check(v, model, 0, 2 * OS);
	/* again, FLUSHed, then the power goes (base holds objects 5 and 6) */
	struct tier_params px = p;
	px.cache_mode = TIER_MODE_PROXY;
	env_set_params(v, &px);
	assert_int_equal(env_write(v, 5 * OS, 2 * OS, 12), 0);
	model_write(model, 5 * OS, 2 * OS, 12);
	env_set_params(v, &p);
	for (int round = 0; round < 2; round++) {
		uint64_t off = round == 0 ? 5 * OS + 8 * EXT : 6 * OS + 8 * EXT;

		if (round == 1) {
			assert_int_equal(env_write(v, 6 * OS + 2 * EXT, EXT, 21), 0);
			model_write(model, 6 * OS + 2 * EXT, EXT, 21);
		}
		uint64_t r0 = base_reads(v), f0 = env_stats(v).fills;

		submit(v, &r, TIER_REQ_READ, off, 2 * EXT, rb);
		fill(wb, EXT, 40 + (uint64_t)round);
		submit(v, &w, TIER_REQ_WRITE, off, EXT, wb);
		env_pump(v);
		assert_int_equal(r.done + w.done, 2);
		assert_memory_equal(rb, model + off, 2 * EXT);
		assert_int_equal(env_stats(v).fills - f0, 1);   /* a read fill */
		assert_int_equal(base_reads(v) - r0, 1);
		model_write(model, off, EXT, 40 + (uint64_t)round);
	}
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	env_kill_engine(v);
	assert_int_equal(tier_store_mem_power_cut(v->base, TIER_MEM_CUT_RANDOM, 7), 0);
	assert_int_equal(tier_store_mem_power_cut(v->cache, TIER_MEM_CUT_RANDOM, 7), 0);
	assert_int_equal(env_engine(v), 1);
	env_check(v, model, 0, 8 * OS);
	free(model);
	env_free(v);
}

/*
 * The fills' cache-write budget (fill_budget_pct, extent mode): it banks
 * four objects at most and grows by its share of client bytes.  With room,
 * a read of a partly valid copy fills the whole object, paid from it: four
 * such fills drain the bank, the fifth is refused (fill_skip_throttled; the
 * read's own extent still fills from the read), and once clients have read
 * two more objects' worth the next one goes.  The promotion throttle is off
 * here: only the budget can refuse.
 */
static void test_fill_budget_pays_fills(void **state)
{
	struct tier_params p;
	uint8_t *model = calloc(1, ISZ);
	struct tier_stats s;
	(void)state;

	ext_params(&p, 0);
	p.fill_budget_pct = 100;
	struct env *v = env_new(&p);
	base_content(v, &p, model, 8);   /* 8 objects of client writes: the bank is full */
	for (uint64_t o = 0; o < 5; o++) {
		/* one extent written: a partly valid copy; a read of another fills it */
		assert_int_equal(env_write(v, o * OS, EXT, 6 + o), 0);
		model_write(model, o * OS, EXT, 6 + o);
		env_check(v, model, o * OS + 8 * EXT, EXT);
		env_pump(v);
		s = env_stats(v);
		assert_int_equal(s.fill_skip_throttled, o < 4 ? 0 : 1);
		assert_int_equal(s.cached_bytes, o < 4 ? (o + 1) * OS : 4 * OS + 2 * EXT);
	}
	assert_int_equal(s.fills, 5);   /* four whole-object fills and one read fill */
	/* clients read two objects (hits): the budget earns them */
	env_check(v, model, 0, 2 * OS);
	env_check(v, model, 4 * OS + 12 * EXT, EXT);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.fill_skip_throttled, 1);
	assert_int_equal(s.cached_bytes, 5 * OS);
	env_check(v, model, 0, ISZ);
	env_free(v);

	/* 0: no budget, the promotion throttle (off here) lets every fill through */
	p.fill_budget_pct = 0;
	v = env_new(&p);
	memset(model, 0, ISZ);
	base_content(v, &p, model, 8);
	for (uint64_t o = 0; o < 6; o++) {
		assert_int_equal(env_write(v, o * OS, EXT, 6 + o), 0);
		model_write(model, o * OS, EXT, 6 + o);
		env_check(v, model, o * OS + 8 * EXT, EXT);
		env_pump(v);
	}
	s = env_stats(v);
	assert_int_equal(s.fill_skip_throttled, 0);
	assert_int_equal(s.cached_bytes, 6 * OS);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

/*
 * Where the budget goes (fill_locality_pct, default 25): with room below
 * the target, a read of a partly valid copy takes the rest of the object
 * only if it continues a sequential stream (it starts where a recent read
 * ended) or a quarter of the object is valid already; a scattered read
 * caches just its own extent (a read fill, no base read of its own), even
 * with the promotion throttle's tokens to spare.
 */
static void test_fill_goes_where_locality_is(void **state)
{
	struct tier_params p;
	uint8_t *model = calloc(1, ISZ);
	struct tier_stats s;
	(void)state;

	ext_params(&p, 0);
	p.fill_budget_pct = 100;
	p.fill_locality_pct = 25;
	struct env *v = env_new(&p);
	base_content(v, &p, model, 8);
	/* scattered: extents 0 then 9 of object 0: two extents cached, no more */
	env_check(v, model, 0, EXT);
	env_check(v, model, 9 * EXT, EXT);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.cached_bytes, 2 * EXT);
	assert_int_equal(s.fill_bytes, 2 * EXT);
	/* sequential: object 1's extent 0, then 1 (where the read ended): the whole object */
	env_check(v, model, OS, EXT);
	env_check(v, model, OS + EXT, EXT);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.cached_bytes, 2 * EXT + OS);
	/* dense: a quarter of object 2 written, then a scattered read fills the rest */
	assert_int_equal(env_write(v, 2 * OS, OS / 4, 9), 0);
	model_write(model, 2 * OS, OS / 4, 9);
	env_check(v, model, 2 * OS + OS / 2 + 5 * EXT, EXT);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.cached_bytes, 2 * EXT + 2 * OS);
	/* just below a quarter: object 3 keeps its extents and the read's */
	assert_int_equal(env_write(v, 3 * OS, OS / 4 - EXT, 10), 0);
	model_write(model, 3 * OS, OS / 4 - EXT, 10);
	env_check(v, model, 3 * OS + OS / 2 + 5 * EXT, EXT);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.cached_bytes, 2 * EXT + 2 * OS + OS / 4);
	assert_int_equal(s.fill_skip_throttled, 0);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

/*
 * A read fill refused because another op runs on the object is counted
 * (fill_skip_busy): two reads of an uncached object sent together, read
 * recency 1.  The first is cold (not admitted) and reads base; the second
 * is admitted (the first put the object in the hitset), but a read fill
 * beside a running op could cache bytes an earlier op changes, so it is
 * refused.  Both reads return base's bytes and nothing is cached.
 */
static void test_read_fill_refused_busy_counted(void **state)
{
	struct tier_params p;
	struct tier_devmodel_params bm = { .read_latency_us = 10000, .write_latency_us = 10000 };
	uint8_t *model = calloc(1, ISZ), b1[EXT], b2[EXT];
	struct sreq r1, r2;
	(void)state;

	ext_params(&p, 1);
	struct env *v = env_new_vt(&p, &bm, NULL, true);
	base_content(v, &p, model, 4);
	for (uint64_t i = 0; i <= p.hit_set_count; i++)
		rotate(v);
	struct tier_stats s0 = env_stats(v);
	submit(v, &r1, TIER_REQ_READ, 3 * OS + 5 * EXT, EXT, b1);
	submit(v, &r2, TIER_REQ_READ, 3 * OS + 6 * EXT, EXT, b2);
	env_pump(v);
	assert_int_equal(r1.done + r2.done, 2);
	assert_int_equal(r1.result, 0);
	assert_int_equal(r2.result, 0);
	assert_memory_equal(b1, model + 3 * OS + 5 * EXT, EXT);
	assert_memory_equal(b2, model + 3 * OS + 6 * EXT, EXT);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.fills, s0.fills);
	assert_int_equal(s.cached_objects, 0);
	assert_int_equal(s.fill_skip_busy - s0.fill_skip_busy, 1);
	assert_int_equal(s.fill_skip_unsynced + s.fill_skip_partial, 0);
	/* alone, the same read is cached */
	env_check(v, model, 3 * OS + 6 * EXT, EXT);
	env_pump(v);
	assert_int_equal(env_stats(v).fills, s0.fills + 1);
	assert_int_equal(env_stats(v).cached_objects, 1);
	free(model);
	env_free(v);
}

/*
 * A read miss beside a running fill of other extents of the same copy is
 * still cached: its fill hint waits for that fill to land, then fills its
 * extent (before, the miss got no fill at all and the next read of the
 * extent missed again; at queue depth 16 that was most of what the suite's
 * 25% caches missed beyond an LRU of blocks).  Object 3's copy holds
 * extent 0; reads of extents 5 and 9 go out together (base reads take 10
 * ms): 5 takes a read fill, 9's hint waits for it.  Then 9 is a hit.
 */
static void test_read_miss_beside_running_fill_cached(void **state)
{
	struct tier_params p;
	struct tier_devmodel_params bm = { .read_latency_us = 10000, .write_latency_us = 10000 };
	uint8_t *model = calloc(1, ISZ), b1[EXT], b2[EXT];
	struct sreq r1, r2;
	uint64_t hits;
	(void)state;

	ext_params(&p, 0);
	p.fill_budget_pct = 100;                 /* the defaults: a window is the read's extent */
	p.fill_locality_pct = 25;
	struct env *v = env_new_vt(&p, &bm, NULL, true);
	base_content(v, &p, model, 4);
	env_check(v, model, 3 * OS, EXT);        /* a read fill: the copy holds extent 0 */
	env_pump(v);
	assert_int_equal(env_stats(v).cached_bytes, EXT);
	struct tier_stats s0 = env_stats(v);
	submit(v, &r1, TIER_REQ_READ, 3 * OS + 5 * EXT, EXT, b1);
	submit(v, &r2, TIER_REQ_READ, 3 * OS + 9 * EXT, EXT, b2);
	env_pump(v);
	assert_int_equal(r1.done + r2.done, 2);
	assert_int_equal(r1.result, 0);
	assert_int_equal(r2.result, 0);
	assert_memory_equal(b1, model + 3 * OS + 5 * EXT, EXT);
	assert_memory_equal(b2, model + 3 * OS + 9 * EXT, EXT);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.read_misses - s0.read_misses, 2);
	assert_int_equal(s.fills - s0.fills, 2);
	assert_int_equal(s.cached_bytes, 3 * EXT);
	hits = s.read_hits;
	env_check(v, model, 3 * OS + 9 * EXT, EXT);
	assert_int_equal(env_stats(v).read_hits, hits + 1);
	free(model);
	env_free(v);
}

/*
 * A delayed hit: a read of an extent that a small fill in flight already
 * brings waits for it to land and is served from the copy (a hit, no base
 * read of its own), where it used to read base again and miss on a block
 * on its way into the cache.  Object 3 is ABSENT: two reads of its extent
 * 5 go out together (base reads take 10 ms); the first makes the copy by a
 * read fill, the second waits for it.  Then, on the copy, two reads of
 * extent 9: the same.  Reads of an extent a large fill brings (more than
 * 64 KiB: a whole 256 KiB object with room) do not wait: base serves them.
 */
static void test_read_waits_for_small_fill_bringing_it(void **state)
{
	struct tier_params p;
	struct tier_devmodel_params bm = { .read_latency_us = 10000, .write_latency_us = 10000 };
	uint8_t *model = calloc(1, ISZ), b1[EXT], b2[EXT];
	struct sreq r1, r2;
	(void)state;

	ext_params(&p, 0);
	p.fill_budget_pct = 100;                 /* the defaults: a window is the read's extent */
	p.fill_locality_pct = 25;
	struct env *v = env_new_vt(&p, &bm, NULL, true);
	base_content(v, &p, model, 4);
	for (int k = 0; k < 2; k++) {
		uint64_t off = 3 * OS + (k ? 9 : 5) * EXT;
		struct tier_stats s0 = env_stats(v);
		uint64_t r0 = base_reads(v);

		memset(&r1, 0, sizeof(r1));
		memset(&r2, 0, sizeof(r2));
		submit(v, &r1, TIER_REQ_READ, off, EXT, b1);
		submit(v, &r2, TIER_REQ_READ, off, EXT, b2);
		env_pump(v);
		assert_int_equal(r1.done + r2.done, 2);
		assert_int_equal(r1.result, 0);
		assert_int_equal(r2.result, 0);
		assert_memory_equal(b1, model + off, EXT);
		assert_memory_equal(b2, model + off, EXT);
		struct tier_stats s = env_stats(v);
		assert_int_equal(base_reads(v) - r0, 1);
		assert_int_equal(s.read_misses - s0.read_misses, 1);
		assert_int_equal(s.read_hits - s0.read_hits, 1);
		assert_int_equal(s.fills - s0.fills, 1);
		assert_int_equal(s.cached_bytes, (uint64_t)(k + 1) * EXT);
	}
	env_free(v);

	/* a large fill: 256 KiB objects, room, no budget: a read fill then the whole rest */
	ext_params(&p, 0);
	p.object_size = 4 * OS;
	p.target_max_bytes = 64 * OS;
	v = env_new_vt(&p, &bm, NULL, true);
	memset(model, 0, ISZ);
	base_content(v, &p, model, 8);                    /* objects 0 and 1 */
	env_check(v, model, 1 * p.object_size, EXT);      /* the copy: extent 0 */
	env_pump(v);
	env_check(v, model, 1 * p.object_size + 2 * EXT, EXT);   /* its fill: the rest, 252 KiB */
	struct tier_stats s0 = env_stats(v);
	uint64_t r0 = base_reads(v);
	memset(&r1, 0, sizeof(r1));
	submit(v, &r1, TIER_REQ_READ, 1 * p.object_size + 40 * EXT, EXT, b1);
	env_pump(v);
	assert_int_equal(r1.result, 0);
	assert_memory_equal(b1, model + 1 * p.object_size + 40 * EXT, EXT);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.read_misses - s0.read_misses, 1);   /* base served it */
	assert_int_equal(base_reads(v) - r0, 1);                /* its own */
	assert_int_equal(s.cached_bytes, 4 * OS);
	free(model);
	env_free(v);
}

/*
 * A write of an extent that a fill admitted before it brings counts as a
 * write hit (an LRU of blocks, with no time, has the block since the read
 * that missed), where it counted as a miss of new extents.  Object 3's
 * copy holds extent 0 (base reads take 10 ms).  A read of extent 5 misses
 * and its read fill adds it; a read of extent 9 right behind misses too,
 * and its fill hint queues behind that running fill; a write of extent 9
 * goes into the copy ahead of the hint, which then has nothing to do.
 */
static void test_write_of_extent_being_filled_hits(void **state)
{
	struct tier_params p;
	struct tier_devmodel_params bm = { .read_latency_us = 10000, .write_latency_us = 10000 };
	uint8_t *model = calloc(1, ISZ), b1[EXT], b2[EXT], wb[EXT];
	struct sreq r1, r2, w1;
	uint64_t off = 3 * OS + 9 * EXT;
	(void)state;

	ext_params(&p, 0);
	p.fill_budget_pct = 100;                 /* the defaults: a window is the read's extent */
	p.fill_locality_pct = 25;
	struct env *v = env_new_vt(&p, &bm, NULL, true);
	base_content(v, &p, model, 4);
	env_check(v, model, 3 * OS, EXT);        /* a read fill: the copy holds extent 0 */
	env_pump(v);
	assert_int_equal(env_stats(v).cached_bytes, EXT);
	struct tier_stats s0 = env_stats(v);
	memset(&r1, 0, sizeof(r1));
	memset(&r2, 0, sizeof(r2));
	memset(&w1, 0, sizeof(w1));
	memset(wb, 0x5a, sizeof(wb));
	submit(v, &r1, TIER_REQ_READ, 3 * OS + 5 * EXT, EXT, b1);
	submit(v, &r2, TIER_REQ_READ, off, EXT, b2);
	submit(v, &w1, TIER_REQ_WRITE, off, EXT, wb);
	env_pump(v);
	assert_int_equal(r1.done + r2.done + w1.done, 3);
	assert_int_equal(r1.result, 0);
	assert_int_equal(r2.result, 0);
	assert_int_equal(w1.result, 0);
	assert_memory_equal(b1, model + 3 * OS + 5 * EXT, EXT);
	assert_memory_equal(b2, model + off, EXT);   /* the read went out first */
	memcpy(model + off, wb, EXT);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.read_misses - s0.read_misses, 2);
	assert_int_equal(s.write_misses - s0.write_misses, 0);
	assert_int_equal(s.write_hits - s0.write_hits, 1);
	assert_int_equal(s.cached_bytes, 3 * EXT);
	env_check(v, model, off, EXT);               /* the write's bytes, from the copy */
	assert_int_equal(env_stats(v).read_hits, s.read_hits + 1);
	free(model);
	env_free(v);
}

/*
 * A read of another extent of an object whose first copy a read fill is
 * making goes to base at once, and a fill of its extent waits for the copy
 * and adds it, so that its next read hits (it used to be "miss not
 * admitted": proxied, never cached; readmostly@25% missed 3 more than an
 * LRU of blocks).  Object 3 is ABSENT: reads of its extents 5 and 9 go out
 * together (base reads take 10 ms).
 */
static void test_read_beside_copy_being_made_filled_after(void **state)
{
	struct tier_params p;
	struct tier_devmodel_params bm = { .read_latency_us = 10000, .write_latency_us = 10000 };
	uint8_t *model = calloc(1, ISZ), b1[EXT], b2[EXT];
	struct sreq r1, r2;
	(void)state;

	ext_params(&p, 0);
	p.fill_budget_pct = 100;                 /* the defaults: a window is the read's extent */
	p.fill_locality_pct = 25;
	p.admit_when_room = 1;                   /* the default: the cache has room */
	struct env *v = env_new_vt(&p, &bm, NULL, true);
	base_content(v, &p, model, 4);
	struct tier_stats s0 = env_stats(v);
	uint64_t r0 = base_reads(v);
	memset(&r1, 0, sizeof(r1));
	memset(&r2, 0, sizeof(r2));
	submit(v, &r1, TIER_REQ_READ, 3 * OS + 5 * EXT, EXT, b1);
	submit(v, &r2, TIER_REQ_READ, 3 * OS + 9 * EXT, EXT, b2);
	env_pump(v);
	assert_int_equal(r1.done + r2.done, 2);
	assert_int_equal(r1.result, 0);
	assert_int_equal(r2.result, 0);
	assert_memory_equal(b1, model + 3 * OS + 5 * EXT, EXT);
	assert_memory_equal(b2, model + 3 * OS + 9 * EXT, EXT);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.read_misses - s0.read_misses, 2);
	assert_int_equal(base_reads(v) - r0, 3);      /* both reads, and the fill's */
	assert_int_equal(s.cached_bytes, 2 * EXT);
	env_check(v, model, 3 * OS + 9 * EXT, EXT);
	s0 = s;
	s = env_stats(v);
	assert_int_equal(s.read_hits - s0.read_hits, 1);
	assert_int_equal(base_reads(v) - r0, 3);
	free(model);
	env_free(v);
}

/* An op (type, off, one extent, buf) and a write of one extent right behind it, both done. */
static void op_then_write(struct env *v, int type, uint64_t off, uint8_t *buf, uint64_t woff,
			  uint8_t *wbuf)
{
	struct sreq a, w;

	memset(&a, 0, sizeof(a));
	memset(&w, 0, sizeof(w));
	submit(v, &a, type, off, EXT, buf);
	submit(v, &w, TIER_REQ_WRITE, woff, EXT, wbuf);
	env_pump(v);
	assert_int_equal(a.done + w.done, 2);
	assert_int_equal(a.result, 0);
	assert_int_equal(w.result, 0);
}

/*
 * A write miss on an object with a read on base waits for it and goes into
 * a new copy, where it went to base beside the read: a hot block under a
 * busy base then never got a copy, since a read fill starts only on a quiet
 * object and each write sent to base kept the next read and write company
 * there (docs/BENCHMARKS.md, "The policy suite").  Object 3 is ABSENT (base ops
 * take 10 ms; reads are not admitted, so the first one goes to base
 * alone): a read of extent 5, then writes of extent 9 and of
 * extent 5 itself at once.  Base is never written; both writes are in a
 * new copy, and reads of both then hit with the writes' bytes.  Beside a
 * zero on base (object 5: no read runs) and with the cache over its target
 * (not admitted) a write miss goes to base beside the op, as before.
 */
static void test_write_miss_waits_for_read_on_base(void **state)
{
	struct tier_params p;
	struct tier_devmodel_params bm = { .read_latency_us = 10000, .write_latency_us = 10000 };
	uint8_t *model = calloc(1, ISZ), b1[EXT], w9[EXT], w5[EXT];
	struct sreq r1, wa, wb;
	(void)state;

	ext_params(&p, 8);                       /* reads: never here (8 hitsets, none archived) */
	p.admit_when_room = 0;
	struct env *v = env_new_vt(&p, &bm, NULL, true);
	base_content(v, &p, model, 6);
	struct tier_stats s0 = env_stats(v);
	uint64_t bw0 = base_ops(v, TIER_STORE_WRITE);
	memset(&r1, 0, sizeof(r1));
	memset(&wa, 0, sizeof(wa));
	memset(&wb, 0, sizeof(wb));
	memset(w9, 0x5a, sizeof(w9));
	memset(w5, 0xa5, sizeof(w5));
	submit(v, &r1, TIER_REQ_READ, 3 * OS + 5 * EXT, EXT, b1);
	submit(v, &wa, TIER_REQ_WRITE, 3 * OS + 9 * EXT, EXT, w9);
	submit(v, &wb, TIER_REQ_WRITE, 3 * OS + 5 * EXT, EXT, w5);
	env_pump(v);
	assert_int_equal(r1.done + wa.done + wb.done, 3);
	assert_int_equal(r1.result, 0);
	assert_int_equal(wa.result, 0);
	assert_int_equal(wb.result, 0);
	assert_memory_equal(b1, model + 3 * OS + 5 * EXT, EXT);   /* the read went out first */
	memcpy(model + 3 * OS + 9 * EXT, w9, EXT);
	memcpy(model + 3 * OS + 5 * EXT, w5, EXT);
	struct tier_stats s = env_stats(v);
	assert_int_equal(base_ops(v, TIER_STORE_WRITE) - bw0, 0);                 /* no write went to base */
	assert_int_equal(s.proxy_writes - s0.proxy_writes, 0);
	assert_int_equal(s.read_misses - s0.read_misses, 1);
	assert_int_equal(s.write_misses - s0.write_misses + s.write_hits - s0.write_hits, 2);
	assert_int_equal(s.dirty_objects, 1);
	assert_int_equal(s.cached_bytes, 2 * EXT);
	env_check(v, model, 3 * OS + 9 * EXT, EXT);               /* the writes' bytes, from the copy */
	env_check(v, model, 3 * OS + 5 * EXT, EXT);
	s0 = s;
	s = env_stats(v);
	assert_int_equal(s.read_hits - s0.read_hits, 2);
	env_check(v, model, 0, 6 * OS);

	/* beside a zero on base (no read runs) the write goes to base, as before */
	s0 = env_stats(v);
	bw0 = base_ops(v, TIER_STORE_WRITE);
	op_then_write(v, TIER_REQ_WRITE_ZEROES, 5 * OS + 2 * EXT, NULL, 5 * OS + 9 * EXT, w9);
	memset(model + 5 * OS + 2 * EXT, 0, EXT);
	memcpy(model + 5 * OS + 9 * EXT, w9, EXT);
	s = env_stats(v);
	assert_int_equal(s.proxy_writes - s0.proxy_writes, 1);
	assert_int_equal(base_ops(v, TIER_STORE_WRITE) - bw0, 1);
	env_check(v, model, 0, 6 * OS);

	/* over the target: the write miss is not admitted, it goes to base beside the read */
	p.target_max_bytes = 2 * EXT;
	env_set_params(v, &p);
	s0 = env_stats(v);
	bw0 = base_ops(v, TIER_STORE_WRITE);
	op_then_write(v, TIER_REQ_READ, 4 * OS + 5 * EXT, b1, 4 * OS + 9 * EXT, w9);
	memcpy(model + 4 * OS + 9 * EXT, w9, EXT);
	s = env_stats(v);
	assert_int_equal(s.proxy_writes - s0.proxy_writes, 1);
	assert_true(base_ops(v, TIER_STORE_WRITE) - bw0 >= 1);
	env_check(v, model, 0, 6 * OS);
	free(model);
	env_free(v);
}

/*
 * Reads of other extents while a fill hint is queued add their extents to
 * it, so every extent read is in the copy after and its next read hits,
 * with one fill per wait.  Object 3's copy holds extent 0; reads of its
 * extents 5, 9, 13 and 2 go out together (base reads take 10 ms): 5 starts
 * a read fill, 9 queues a hint that waits for it, 13 and 2 queue behind
 * that hint; once it starts, 13 queues a second hint behind 2, and 2 finds
 * it queued and adds extent 2 to it.  With a hint's window fixed, 2 got
 * no fill: its extent stayed out of the cache and its next read missed
 * again, where an LRU of blocks hits (shift@25%, docs/BENCHMARKS.md,
 * "The policy suite").  Then the same on object 5 with
 * the last read continuing the one before it (extents 13, 14: a stream):
 * it adds nothing to the hint (a scan's reads would make it the object's
 * readahead, which cost a zipf load beside a scan 15% of its IOPS).
 */
static void test_reads_beside_queued_fill_hint_filled(void **state)
{
	static const uint64_t ext[2][4] = { { 5, 9, 13, 2 }, { 5, 9, 13, 14 } };
	struct tier_params p;
	struct tier_devmodel_params bm = { .read_latency_us = 10000, .write_latency_us = 10000 };
	uint8_t *model = calloc(1, ISZ), b[4][EXT];
	struct sreq r[4];
	(void)state;

	ext_params(&p, 0);
	p.fill_budget_pct = 100;                 /* the defaults: a window is the read's extent */
	p.fill_locality_pct = 25;
	struct env *v = env_new_vt(&p, &bm, NULL, true);
	base_content(v, &p, model, 6);
	for (int k = 0; k < 2; k++) {
		uint64_t obj = k ? 5 : 3, hits;

		env_check(v, model, obj * OS, EXT);   /* a read fill: the copy holds extent 0 */
		env_pump(v);
		struct tier_stats s0 = env_stats(v);
		memset(r, 0, sizeof(r));
		for (int i = 0; i < 4; i++)
			submit(v, &r[i], TIER_REQ_READ, obj * OS + ext[k][i] * EXT, EXT, b[i]);
		env_pump(v);
		for (int i = 0; i < 4; i++) {
			assert_int_equal(r[i].done, 1);
			assert_int_equal(r[i].result, 0);
			assert_memory_equal(b[i], model + obj * OS + ext[k][i] * EXT, EXT);
		}
		struct tier_stats s = env_stats(v);
		assert_int_equal(s.read_misses - s0.read_misses, 4);
		/* a read fill, a hint for 9, one for 13 and 2 (none for 14 after 13) */
		assert_int_equal(s.fills - s0.fills, 3);
		assert_int_equal(s.cached_bytes - s0.cached_bytes, (k ? 3 : 4) * EXT);
		hits = s.read_hits;
		env_check(v, model, obj * OS + ext[k][3] * EXT, EXT);
		assert_int_equal(env_stats(v).read_hits, hits + (k ? 0 : 1));
	}
	free(model);
	env_free(v);
}

/*
 * A read the copy holds, behind a fill hint that reads beside it added
 * their extents to, waits for one fill at most (from review): object 3's
 * copy holds extent 0; reads of extents 5, 9, 13, 2 and 7 go out together
 * (base reads take 10 ms, cache ops 0.1 ms): 5 starts a read fill, 9
 * queues a hint behind it, the rest wait behind that hint; once it starts,
 * 13 queues a second one, which 2 and 7 add to.  15 ms later a read of
 * extent 0 arrives.  With a hint per read (13, 2 and 7 each) the hints
 * queued one behind another, each waiting for the fill before it, and that
 * hit waited 20.7 ms; it waits for the one fill ahead of it.
 */
static void test_hit_behind_queued_hint_waits_one_fill(void **state)
{
	static const uint64_t ext[] = { 5, 9, 13, 2, 7 };
	enum { N = sizeof(ext) / sizeof(ext[0]) };
	struct tier_params p;
	struct tier_devmodel_params bm = { .read_latency_us = 10000, .write_latency_us = 10000 };
	struct tier_devmodel_params cm = { .read_latency_us = 100, .write_latency_us = 100 };
	uint8_t *model = calloc(1, ISZ), b[N + 1][EXT];
	struct sreq r[N], h;
	uint64_t t0, t1;
	(void)state;

	ext_params(&p, 0);
	p.fill_budget_pct = 100;                 /* the defaults: a window is the read's extent */
	p.fill_locality_pct = 25;
	struct env *v = env_new_vt(&p, &bm, &cm, true);
	base_content(v, &p, model, 4);
	env_check(v, model, 3 * OS, EXT);        /* a read fill: the copy holds extent 0 */
	env_pump(v);
	t0 = v->now_ns;
	memset(r, 0, sizeof(r));
	memset(&h, 0, sizeof(h));
	for (int i = 0; i < N; i++)
		submit(v, &r[i], TIER_REQ_READ, 3 * OS + ext[i] * EXT, EXT, b[i]);
	for (int i = 0; i < 100000 && v->now_ns < t0 + 15000000ull; i++) {
		size_t n = tier_cq_drain(v->cq);

		tier_engine_tick(v->e);
		if (!n && !env_vt_step(v))
			break;
	}
	t1 = v->now_ns;
	submit(v, &h, TIER_REQ_READ, 3 * OS, EXT, b[N]);
	for (int i = 0; i < 100000 && !h.done; i++) {
		size_t n = tier_cq_drain(v->cq);

		if (!h.done)
			tier_engine_tick(v->e);
		if (!n && !h.done)
			env_vt_step(v);
	}
	assert_int_equal(h.done, 1);
	assert_int_equal(h.result, 0);
	assert_memory_equal(b[N], model + 3 * OS, EXT);
	assert_true(v->now_ns - t1 < 12000000ull);   /* one 10 ms fill, not two or three */
	env_pump(v);
	for (int i = 0; i < N; i++) {
		assert_int_equal(r[i].result, 0);
		assert_memory_equal(b[i], model + 3 * OS + ext[i] * EXT, EXT);
	}
	assert_int_equal(env_stats(v).cached_bytes, (N + 1) * EXT);
	free(model);
	env_free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hot_partial_becomes_whole),
		cmocka_unit_test(test_cold_partial_not_filled),
		cmocka_unit_test(test_full_or_throttled_skips),
		cmocka_unit_test(test_write_racing_fill_wins),
		cmocka_unit_test(test_fill_reads_base_durably),
		cmocka_unit_test(test_fill_reads_only_invalid_extents),
		cmocka_unit_test(test_fill_window_copies_only_the_window),
		cmocka_unit_test(test_fill_overtaken_by_writes_ends),
		cmocka_unit_test(test_read_miss_fills_its_extents),
		cmocka_unit_test(test_first_read_cached_with_room),
		cmocka_unit_test(test_read_fill_reads_base_durably),
		cmocka_unit_test(test_read_fill_vouches_only_durable_bytes),
		cmocka_unit_test(test_write_racing_read_fill_wins),
		cmocka_unit_test(test_read_fill_refused_busy_counted),
		cmocka_unit_test(test_fill_budget_pays_fills),
		cmocka_unit_test(test_fill_goes_where_locality_is),
		cmocka_unit_test(test_read_miss_beside_running_fill_cached),
		cmocka_unit_test(test_read_waits_for_small_fill_bringing_it),
		cmocka_unit_test(test_write_of_extent_being_filled_hits),
		cmocka_unit_test(test_read_beside_copy_being_made_filled_after),
		cmocka_unit_test(test_write_miss_waits_for_read_on_base),
		cmocka_unit_test(test_reads_beside_queued_fill_hint_filled),
		cmocka_unit_test(test_hit_behind_queued_hint_waits_one_fill),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
