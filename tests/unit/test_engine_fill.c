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

static uint64_t base_reads(struct env *v)
{
	struct tier_store_stats s;

	tier_store_get_stats(v->base, &s);
	return s.ops[TIER_STORE_READ];
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

	/* full: the target is the extents written already */
	ext_params(&p, 0);
	p.target_max_bytes = 2 * EXT;
	p.cache_min_evict_age = 1000000;   /* keep the agent from making room */
	struct env *v = env_new(&p);
	base_content(v, &p, model, 2);
	assert_int_equal(env_write(v, 0, EXT, 6), 0);
	model_write(model, 0, EXT, 6);
	assert_int_equal(env_write(v, OS, EXT, 7), 0);
	model_write(model, OS, EXT, 7);
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
	v = env_new(&p);
	base_content(v, &p, model, 2);
	assert_int_equal(env_write(v, 0, EXT, 6), 0);
	model_write(model, 0, EXT, 6);
	assert_int_equal(env_write(v, OS, EXT, 7), 0);
	model_write(model, OS, EXT, 7);
	env_check(v, model, 0, OS);
	env_pump(v);
	env_check(v, model, OS, OS);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.fills, 1);
	assert_int_equal(s.fill_skip_throttled, 1);
	assert_int_equal(s.promote_throttled, 0);   /* fills have their own counter */
	assert_int_equal(s.cached_bytes, OS + EXT);
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
	p.fill_window = EXT;
	p.target_max_bytes = OS;   /* no room for the whole object: the window */
	struct env *v = env_new_vt(&p, &bm, &cm, true);
	base_content(v, &p, model, 1);
	assert_int_equal(env_write(v, 2 * EXT, EXT, 6), 0);
	model_write(model, 2 * EXT, EXT, 6);
	env_check(v, model, 8 * EXT, EXT);   /* base serves it, a fill of extent 8 behind it */
	assert_int_equal(env_write(v, 8 * EXT, EXT, 7), 0);   /* lands while the fill reads */
	model_write(model, 8 * EXT, EXT, 7);
	env_pump(v);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.fills, 0);
	assert_int_equal(s.fill_failed, 0);
	assert_int_equal(s.cached_bytes, 2 * EXT);
	assert_int_equal(s.dirty_bytes, 2 * EXT);
	env_check(v, model, 0, ISZ);
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
