/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_engine_decide.c - the engine's decisions: each recency
 * level (checked before the access is recorded), each cache mode, the
 * promotion throttles, extent granularity, proxying when over 100% of
 * target, and the races (write during promotion, write during flush, read
 * during evict, trim of a cached object).
 */
#include "test_engine_harness.h"

#define ISZ (64 * OS)

static uint64_t base_reads(struct env *v)
{
	struct tier_store_stats s;

	tier_store_get_stats(v->base, &s);
	return s.ops[TIER_STORE_READ];
}

static uint64_t base_write_bytes(struct env *v)
{
	struct tier_store_stats s;

	tier_store_get_stats(v->base, &s);
	return s.bytes[TIER_STORE_WRITE];
}

static void rotate(struct env *v)
{
	env_advance_ms(v, v->p.hit_set_period + 1);
	tier_engine_tick(v->e);
	env_pump(v);
}

static void test_write_recency_levels(void **state)
{
	(void)state;
	for (unsigned n = 0; n <= 3; n++) {
		struct tier_params p;
		env_params(&p);
		p.min_write_recency_for_promote = n;
		struct env *v = env_new(&p);

		/* access k times, each in a new hitset period; promoted on access n+1 */
		for (unsigned k = 0; k <= n; k++) {
			assert_int_equal(env_write(v, 3 * OS, 4096, k), 0);
			struct tier_stats s = env_stats(v);
			if (k < n) {
				assert_int_equal(s.promotions, 0);
				assert_int_equal(s.proxy_writes, k + 1);
			} else {
				assert_int_equal(s.promotions, 1);
				assert_int_equal(s.dirty_objects, 1);
			}
			if (n >= 2 && k + 1 < n)
				rotate(v);
		}
		env_free(v);
	}
}

/*
 * write_miss = proxy (the default): an admitted write miss goes to base at
 * once and the object is promoted afterwards, in the background, so the
 * client's latency is one base write, not a whole-object copy.  With
 * write_miss = promote the same write waits for the copy (Ceph before proxy
 * write).  Virtual time with the hdd/ssd models makes the difference visible.
 */
static uint64_t timed_write_miss(enum tier_write_miss wm, struct tier_stats *after)
{
	struct tier_params p;
	struct tier_devmodel_params hdd, ssd;
	uint8_t b[4096], want[4096];

	env_params(&p);
	p.write_miss = wm;
	p.object_size = 4ull << 20;          /* the real default: a 4 MiB copy */
	p.target_max_bytes = 64 * p.object_size;
	assert_int_equal(tier_devmodel_profile("hdd", &hdd), 0);
	assert_int_equal(tier_devmodel_profile("ssd", &ssd), 0);
	struct env *v = env_new_vt(&p, &hdd, &ssd, true);
	uint64_t t0 = v->now_ns;

	uint64_t off = 5 * p.object_size + 8192;

	assert_int_equal(env_write(v, off, 4096, 77), 0);
	uint64_t took = v->now_ns - t0;
	env_pump(v);
	*after = env_stats(v);
	/* whichever way it went, the data is there and now served from cache */
	assert_int_equal(env_io(v, TIER_REQ_READ, off, 4096, b, 0), 0);
	fill(want, sizeof(want), 77);
	assert_memory_equal(b, want, sizeof(want));
	assert_int_equal(env_stats(v).read_hits, 1);
	env_free(v);
	return took;
}

static void test_write_miss_proxies_then_promotes(void **state)
{
	struct tier_stats sp, sw;
	(void)state;

	uint64_t t_proxy = timed_write_miss(TIER_WMISS_PROXY, &sp);
	uint64_t t_wait = timed_write_miss(TIER_WMISS_PROMOTE, &sw);

	/* proxy: one base write (5 ms + 4 KiB), promotion afterwards, object clean */
	assert_int_equal(sp.proxy_writes, 1);
	assert_int_equal(sp.promotions, 1);
	assert_int_equal(sp.cached_objects, 1);
	assert_int_equal(sp.dirty_objects, 0);
	assert_true(t_proxy < 6000000ull);
	/* promote: the write waited for read-4MiB-from-hdd + write-to-ssd */
	assert_int_equal(sw.proxy_writes, 0);
	assert_int_equal(sw.promotions, 1);
	assert_int_equal(sw.dirty_objects, 1);
	assert_true(t_wait > 4 * t_proxy);
}

static void test_recency_needs_consecutive_sets(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.min_write_recency_for_promote = 2;
	struct env *v = env_new(&p);
	(void)state;

	assert_int_equal(env_write(v, 0, 512, 1), 0);   /* set A */
	rotate(v);
	rotate(v);                                        /* gap: one empty set */
	assert_int_equal(env_write(v, 0, 512, 2), 0);   /* not in current: proxy */
	assert_int_equal(env_write(v, 0, 512, 3), 0);   /* current yes, newest archived no */
	assert_int_equal(env_stats(v).promotions, 0);
	rotate(v);
	assert_int_equal(env_write(v, 0, 512, 4), 0);   /* current no */
	assert_int_equal(env_write(v, 0, 512, 5), 0);   /* current + newest archived */
	assert_int_equal(env_stats(v).promotions, 1);
	env_free(v);
}

static void test_read_recency_promotes_after_proxy(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.min_read_recency_for_promote = 1;
	p.evict_policy = TIER_EVICT_LRU;   /* Ceph's rule alone: no ghost hint */
	struct env *v = env_new(&p);
	uint8_t b[4096];
	(void)state;

	assert_int_equal(env_write(v, 2 * OS, 4096, 1), 0);   /* recency 0 for writes */
	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 0);
	rotate(v);   /* the write's access moves to an archived set */
	/* first read: not in the current set before this access -> proxy only */
	assert_int_equal(env_io(v, TIER_REQ_READ, 2 * OS, 4096, b, 0), 0);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 0);
	/* second read: the first one is in the current set now */
	assert_int_equal(env_io(v, TIER_REQ_READ, 2 * OS, 4096, b, 0), 0);
	env_pump(v);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.cached_objects, 1);
	assert_int_equal(s.proxy_reads, 2);
	assert_int_equal(env_io(v, TIER_REQ_READ, 2 * OS, 4096, b, 0), 0);
	assert_int_equal(env_stats(v).read_hits, 1);
	uint8_t want[4096];
	fill(want, 4096, 1);
	assert_memory_equal(b, want, 4096);
	env_free(v);
}

/*
 * R-READ-8: object granularity, a read of an object whose promotion is
 * running waits for it and hits the copy; it does not read base again.
 * (Read from base, a sequential stream's reads after its miss counted as
 * misses an object LRU does not have: 3x at QD 1.)
 */
static void test_read_waits_for_running_promotion(void **state)
{
	struct tier_params p;
	struct tier_devmodel_params hdd, ssd;
	struct env *v;
	uint8_t b[4096];
	struct tier_stats s;
	(void)state;

	env_params(&p);   /* object granularity, recency 0: every read miss promotes */
	assert_int_equal(tier_devmodel_profile("hdd", &hdd), 0);
	assert_int_equal(tier_devmodel_profile("ssd", &ssd), 0);
	v = env_new_vt(&p, &hdd, &ssd, true);
	assert_int_equal(env_write(v, 2 * OS, OS, 7), 0);
	tier_engine_evict_all(v->e, NULL);   /* flushed, dropped: base holds it */
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 0);
	s = env_stats(v);
	/* the first read misses, proxies, and queues the promotion behind it */
	assert_int_equal(env_io(v, TIER_REQ_READ, 2 * OS, 4096, b, 0), 0);
	assert_int_equal(env_stats(v).proxy_reads, s.proxy_reads + 1);
	assert_int_equal(env_stats(v).cached_objects, 0);   /* the promotion runs */
	/* the next one waits for that promotion and is served from the copy */
	assert_int_equal(env_io(v, TIER_REQ_READ, 2 * OS + 4096, 4096, b, 0), 0);
	assert_int_equal(env_stats(v).proxy_reads, s.proxy_reads + 1);
	assert_int_equal(env_stats(v).read_hits, s.read_hits + 1);
	assert_int_equal(env_stats(v).cached_objects, 1);
	{
		uint8_t *all = malloc(OS);

		fill(all, OS, 7);
		assert_memory_equal(b, all + 4096, 4096);
		free(all);
	}
	env_free(v);
}

/*
 * The same script with ARC (the default before LRU): the evicted object is a ghost, so
 * its first read miss is admitted on the policy's hint although the recency
 * rule says no; a never-cached object still waits for its second read.
 */
static void test_arc_ghost_hint_admits_a_read_miss(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.min_read_recency_for_promote = 1;
	p.evict_policy = TIER_EVICT_ARC;
	struct env *v = env_new(&p);
	uint8_t b[4096];
	(void)state;

	assert_int_equal(env_write(v, 2 * OS, 4096, 1), 0);
	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 0);
	rotate(v);
	assert_int_equal(env_io(v, TIER_REQ_READ, 2 * OS, 4096, b, 0), 0);   /* ghost: admitted */
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 1);
	assert_int_equal(env_stats(v).promotions, 2);
	assert_int_equal(env_io(v, TIER_REQ_READ, 5 * OS, 4096, b, 0), 0);   /* never cached */
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 1);
	assert_int_equal(env_stats(v).promotions, 2);
	env_free(v);
}

static struct env *mode_env(enum tier_cache_mode m)
{
	struct tier_params p;
	env_params(&p);
	p.cache_mode = m;
	return env_new(&p);
}

static void test_mode_writeback(void **state)
{
	struct env *v = mode_env(TIER_MODE_WRITEBACK);
	uint8_t b[512];
	(void)state;

	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 512, b, 0), 0);
	env_pump(v);
	assert_int_equal(env_stats(v).promotions, 1);   /* read miss promotes */
	assert_int_equal(env_write(v, OS, 512, 1), 0);
	assert_int_equal(env_stats(v).dirty_objects, 1); /* write miss promotes, dirty */
	assert_int_equal(env_stats(v).proxy_writes, 0);
	env_free(v);
}

static void test_mode_readproxy(void **state)
{
	struct env *v = mode_env(TIER_MODE_READPROXY);
	uint8_t b[512];
	(void)state;

	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 512, b, 0), 0);
	env_pump(v);
	assert_int_equal(env_stats(v).promotions, 0);   /* reads proxied */
	assert_int_equal(env_write(v, 0, 512, 1), 0);
	assert_int_equal(env_stats(v).dirty_objects, 1); /* writes as writeback */
	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 512, b, 0), 0);
	assert_int_equal(env_stats(v).read_hits, 1);     /* cached data read from cache */
	env_free(v);
}

static void test_mode_proxy(void **state)
{
	struct env *v = mode_env(TIER_MODE_PROXY);
	uint8_t b[512];
	(void)state;

	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 512, b, 0), 0);
	assert_int_equal(env_write(v, OS, 512, 1), 0);
	env_pump(v);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.promotions, 0);
	assert_int_equal(s.proxy_reads, 1);
	assert_int_equal(s.proxy_writes, 1);
	assert_int_equal(env_io(v, TIER_REQ_CACHE, OS, 1, NULL, 0), 0);
	assert_int_equal(env_stats(v).promotions, 1);    /* on request only */
	env_free(v);
}

static void test_mode_readonly(void **state)
{
	struct env *v = mode_env(TIER_MODE_READONLY);
	uint8_t b[512], want[512];
	(void)state;

	assert_int_equal(env_write(v, 0, 512, 1), 0);
	assert_int_equal(env_stats(v).proxy_writes, 1);  /* writes go to base */
	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 512, b, 0), 0);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 1); /* read miss promotes */
	assert_int_equal(env_write(v, 0, 512, 2), 0);     /* drops the cached copy */
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.cached_objects, 0);
	assert_int_equal(s.dirty_objects, 0);
	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 512, b, 0), 0);
	fill(want, 512, 2);
	assert_memory_equal(b, want, 512);
	env_free(v);
}

static void test_mode_none(void **state)
{
	struct env *v = mode_env(TIER_MODE_NONE);
	uint8_t b[512];
	(void)state;

	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 512, b, 0), 0);
	assert_int_equal(env_write(v, 0, 512, 1), 0);
	assert_int_equal(env_io(v, TIER_REQ_CACHE, 0, 512, NULL, 0), 0);
	env_pump(v);
	assert_int_equal(env_stats(v).promotions, 0);
	assert_int_equal(env_stats(v).cached_objects, 0);
	env_free(v);
}

static void test_mode_switch_to_none_drains(void **state)
{
	struct env *v = mode_env(TIER_MODE_WRITEBACK);
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	for (int i = 0; i < 4; i++) {
		assert_int_equal(env_write(v, (uint64_t)i * OS, 512, (uint64_t)i), 0);
		model_write(model, (uint64_t)i * OS, 512, (uint64_t)i);
	}
	struct tier_params p = v->p;
	p.cache_mode = TIER_MODE_NONE;
	assert_int_equal(tier_engine_set_params(v->e, &p), 0);
	for (int i = 0; i < 10; i++)
		env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 0);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

static void test_throttle_objects(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.promote_max_objects_sec = 2;
	struct env *v = env_new(&p);
	(void)state;

	for (int i = 0; i < 5; i++)
		assert_int_equal(env_write(v, (uint64_t)i * OS, 512, 1), 0);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.promotions, 2);
	assert_int_equal(s.promote_throttled, 3);
	assert_int_equal(s.proxy_writes, 3);
	env_advance_ms(v, 500);   /* one more token */
	for (int i = 5; i < 8; i++)
		assert_int_equal(env_write(v, (uint64_t)i * OS, 512, 1), 0);
	assert_int_equal(env_stats(v).promotions, 3);
	env_free(v);
}

static void test_throttle_bytes(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.promote_max_bytes_sec = 3 * OS;
	struct env *v = env_new(&p);
	(void)state;

	for (int i = 0; i < 6; i++)
		assert_int_equal(env_write(v, (uint64_t)i * OS, 512, 1), 0);
	assert_int_equal(env_stats(v).promotions, 3);
	assert_int_equal(env_stats(v).promote_throttled, 3);
	env_advance_ms(v, 1000);
	for (int i = 6; i < 12; i++)
		assert_int_equal(env_write(v, (uint64_t)i * OS, 512, 1), 0);
	assert_int_equal(env_stats(v).promotions, 6);
	env_free(v);
}

/* The throttles guard base: extent-mode admissions read nothing and pass. */
static void test_throttle_spares_extent_admissions(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.promote_granularity = TIER_GRAN_EXTENT;
	p.promote_max_objects_sec = 1;
	p.promote_max_bytes_sec = 4096;
	struct env *v = env_new(&p);
	(void)state;

	for (int i = 0; i < 6; i++)
		assert_int_equal(env_write(v, (uint64_t)i * OS, 4096, 1), 0);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.promote_throttled, 0);
	assert_int_equal(s.proxy_writes, 0);
	assert_int_equal(s.cached_objects, 6);
	/*
	 * A read miss is a read fill of the whole extents it brought from base:
	 * no base read of its own, so no throttle either (whole-object
	 * promotions of object mode are throttled: test_throttle_*).  Base
	 * holds objects 10-12 (written in proxy mode).
	 */
	struct tier_params px = p;
	px.cache_mode = TIER_MODE_PROXY;
	env_set_params(v, &px);
	for (int i = 10; i < 13; i++)
		assert_int_equal(env_write(v, (uint64_t)i * OS, 8192, 2), 0);
	env_set_params(v, &p);
	uint8_t b[4096];
	for (int i = 10; i < 13; i++)
		assert_int_equal(env_io(v, TIER_REQ_READ, (uint64_t)i * OS, 4096, b, 0), 0);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.promote_throttled, 0);
	assert_int_equal(s.fill_skip_throttled, 0);
	assert_int_equal(s.promotions, 0);
	assert_int_equal(s.fills, 3);
	assert_int_equal(s.cached_objects, 9);
	/* 512 bytes hold no whole extent: nothing to fill, nothing cached */
	assert_int_equal(env_io(v, TIER_REQ_READ, 20 * OS, 512, b, 0), 0);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.fills, 3);
	assert_int_equal(s.cached_objects, 9);
	env_free(v);
}

static void test_extent_write_miss_never_reads_base(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.promote_granularity = TIER_GRAN_EXTENT;
	/* reads stay cold (no archived hitset): no fill copies the rest of the object */
	p.min_read_recency_for_promote = 2;
	struct env *v = env_new(&p);
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	/* base content first (proxy mode), then switch to extent writeback */
	struct tier_params px = p;
	px.cache_mode = TIER_MODE_PROXY;
	assert_int_equal(tier_engine_set_params(v->e, &px), 0);
	assert_int_equal(env_write(v, 0, 2 * OS, 5), 0);
	model_write(model, 0, 2 * OS, 5);
	assert_int_equal(tier_engine_set_params(v->e, &p), 0);
	uint64_t r0 = base_reads(v);
	assert_int_equal(env_write(v, 8192, 4096, 6), 0);       /* aligned: no base read */
	model_write(model, 8192, 4096, 6);
	assert_int_equal(base_reads(v), r0);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.cached_bytes, 4096);
	assert_int_equal(s.dirty_bytes, 4096);
	assert_int_equal(s.promote_bytes, 0);
	/* reads of invalid extents come from base, valid from cache */
	env_check(v, model, 0, OS);
	/* unaligned write on an invalid extent fills from base (one extent read) */
	assert_int_equal(env_write(v, OS + 100, 200, 7), 0);
	model_write(model, OS + 100, 200, 7);
	env_check(v, model, 0, 2 * OS);
	assert_int_equal(env_stats(v).dirty_bytes, 8192);
	/* flush writes only dirty extents */
	uint64_t w0 = base_write_bytes(v);
	tier_engine_flush_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(base_write_bytes(v) - w0, 8192);
	assert_int_equal(env_stats(v).dirty_bytes, 0);
	/* the meta carries the bitmaps */
	uint64_t words[2 * 1];
	struct tier_meta m;
	int f = cache_meta(v, 0, &m, words, 1);
	assert_true(f & TIER_META_F_EXTENTS);
	assert_int_equal(f & TIER_META_F_DIRTY, 0);
	assert_int_equal(words[0], 1u << 2);
	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

static void test_over_target_proxies_writes(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.target_max_objects = 4;
	struct env *v = env_new(&p);
	uint8_t b[512];
	(void)state;

	tier_engine_quiesce(v->e);   /* the agent makes no room here (full mode at 100% would) */

	for (int i = 0; i < 4; i++)
		assert_int_equal(env_write(v, (uint64_t)i * OS, 512, 1), 0);
	assert_int_equal(env_stats(v).cached_objects, 4);
	assert_int_equal(env_write(v, 10 * OS, 512, 2), 0);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.cached_objects, 4);
	assert_int_equal(s.proxy_writes, 1);
	/* reads of cached objects still hit, writes to them still land in cache */
	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 512, b, 0), 0);
	assert_int_equal(env_stats(v).read_hits, 1);
	assert_int_equal(env_write(v, 0, 512, 3), 0);
	assert_int_equal(env_stats(v).write_hits, 1);
	env_free(v);
}

/*
 * The byte accounting of extent bitmaps (objmap.c bits_bytes): whole extents
 * on both sides of a 64-bit word boundary, and the last object of an image
 * cut inside an extent counts only the bytes up to the image's end.
 */
static void test_extent_bytes_across_words_and_partial_tail(void **state)
{
	struct tier_params p;
	const uint64_t os = 1024 * 1024, tail_len = 70 * 4096 + 123;
	env_params(&p);
	p.object_size = os;   /* 256 extents: four bitmap words */
	p.target_max_bytes = 64 * os;
	p.promote_granularity = TIER_GRAN_EXTENT;
	p.cache_min_evict_age = 1000000;
	p.cache_min_flush_age = 1000000;
	struct env *v = calloc(1, sizeof(*v));
	(void)state;

	assert_non_null(v);
	v->now_ns = 1000000000ull;
	v->p = p;
	v->isz = 3 * os + tail_len;   /* the fourth object ends inside extent 70 */
	assert_int_equal(tier_cq_create(NULL, NULL, &v->cq), 0);
	assert_int_equal(tier_store_mem_create("base", &(struct tier_mem_opts){ 0 }, v->cq,
					       &v->base), 0);
	assert_int_equal(tier_store_mem_create("cache", &(struct tier_mem_opts){ 0 }, v->cq,
					       &v->cache), 0);
	assert_int_equal(env_engine(v), 1);

	/* extents 62..65 of object 0: across the boundary of words 0 and 1 */
	assert_int_equal(env_write(v, 62 * 4096, 4 * 4096, 1), 0);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.cached_bytes, 4 * 4096);
	assert_int_equal(s.dirty_bytes, 4 * 4096);
	/* the whole last object: 70 extents and 123 bytes of the 71st */
	assert_int_equal(env_write(v, 3 * os, tail_len, 2), 0);
	s = env_stats(v);
	assert_int_equal(s.cached_bytes, 4 * 4096 + tail_len);
	assert_int_equal(s.dirty_bytes, 4 * 4096 + tail_len);
	/* rewriting the tail extent alone changes nothing */
	assert_int_equal(env_write(v, 3 * os + 70 * 4096, 123, 3), 0);
	s = env_stats(v);
	assert_int_equal(s.cached_bytes, 4 * 4096 + tail_len);
	env_free(v);
}

/*
 * Extent mode over target: a write to a cached object that only touches
 * extents the cache does not hold goes to base (the cache would otherwise
 * grow without bound); one mixing held and new extents lands in the cache.
 */
static void test_over_target_extent_new_extents_proxied(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.promote_granularity = TIER_GRAN_EXTENT;
	p.target_max_bytes = 8 * 4096;
	/*
	 * the agent never runs before the flush_all below (no tick: env_io
	 * completes in the first drain), so it makes no room here; at 100% it
	 * would, in full mode, min ages or not (evictions checked 0 below)
	 */
	struct env *v = env_new(&p);
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	for (int i = 0; i < 8; i++) {
		assert_int_equal(env_write(v, (uint64_t)i * 4096, 4096, (uint64_t)i + 1), 0);
		model_write(model, (uint64_t)i * 4096, 4096, (uint64_t)i + 1);
	}
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.cached_bytes, 8 * 4096);
	assert_int_equal(s.full_ratio_ppm, 1000000);
	assert_int_equal(s.proxy_writes, 0);
	uint64_t misses = s.write_misses;
	/* all new extents: straight to base, also an unaligned piece and zeroes */
	assert_int_equal(env_write(v, 10 * 4096, 4096, 20), 0);
	model_write(model, 10 * 4096, 4096, 20);
	assert_int_equal(env_write(v, 12 * 4096 + 100, 300, 21), 0);
	model_write(model, 12 * 4096 + 100, 300, 21);
	assert_int_equal(env_io(v, TIER_REQ_WRITE_ZEROES, 13 * 4096 + 10, 50, NULL, 0), 0);
	memset(model + 13 * 4096 + 10, 0, 50);
	s = env_stats(v);
	assert_int_equal(s.cached_bytes, 8 * 4096);
	assert_int_equal(s.proxy_writes, 2);
	assert_int_equal(s.write_misses - misses, 3);
	env_check(v, model, 0, 2 * OS);
	/* a held extent still takes writes in the cache */
	assert_int_equal(env_write(v, 4096, 4096, 23), 0);
	model_write(model, 4096, 4096, 23);
	assert_int_equal(env_stats(v).cached_bytes, 8 * 4096);
	assert_int_equal(env_stats(v).proxy_writes, 2);
	/* mixed (extents 7 and 8): lands in the cache, adding its new extent */
	assert_int_equal(env_write(v, 7 * 4096 + 2048, 4096, 24), 0);
	model_write(model, 7 * 4096 + 2048, 4096, 24);
	assert_int_equal(env_stats(v).cached_bytes, 9 * 4096);
	assert_int_equal(env_stats(v).proxy_writes, 2);
	env_check(v, model, 0, 2 * OS);
	assert_int_equal(env_stats(v).evictions + env_stats(v).evict_partial, 0);
	/* base got everything once flushed and evicted */
	tier_engine_flush_all(v->e, NULL);
	env_pump(v);
	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 0);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

struct cnt {
	struct tier_request r;
	int *order, *n;
	int id, result;
};

static void cnt_cb(struct tier_request *r, int result)
{
	struct cnt *c = (struct cnt *)r;

	c->result = result;
	c->order[(*c->n)++] = c->id;
}

struct peak {
	struct tier_request r;
	struct env *v;
	uint64_t *peak;
	int result, done;
};

static void peak_cb(struct tier_request *r, int result)
{
	struct peak *k = (struct peak *)r;
	uint64_t c = env_stats(k->v).cached_bytes;

	k->result = result;
	k->done = 1;
	if (c > *k->peak)
		*k->peak = c;
}

/*
 * Admissions racing each other see each other's reservations: 16 write
 * misses in flight at once on 16 objects, in extent mode, with room for 8
 * extents: 8 land in the cache, 8 are proxied, the cache never passes the
 * target.
 */
static void test_admission_reserves_in_flight(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.promote_granularity = TIER_GRAN_EXTENT;
	p.target_max_bytes = 8 * 4096;
	struct env *v = env_new(&p);
	struct peak k[16];
	uint8_t bufs[16][4096];
	uint64_t peak = 0;
	(void)state;

	tier_engine_quiesce(v->e);   /* the agent makes no room here (full mode at 100% would) */

	for (int i = 0; i < 16; i++) {
		fill(bufs[i], 4096, (uint64_t)i);
		k[i] = (struct peak){ .r = { .type = TIER_REQ_WRITE, .off = (uint64_t)i * OS,
					     .len = 4096, .buf = bufs[i], .cb = peak_cb },
				      .v = v, .peak = &peak };
		assert_int_equal(tier_image_submit(v->img, &k[i].r), 0);
	}
	/* admitted, not landed: they count against the target already */
	assert_int_equal(env_stats(v).full_ratio_ppm, 1000000);
	env_pump(v);
	for (int i = 0; i < 16; i++) {
		assert_int_equal(k[i].done, 1);
		assert_int_equal(k[i].result, 0);
	}
	struct tier_stats s = env_stats(v);
	assert_true(peak <= 8 * 4096);
	assert_int_equal(s.cached_bytes, 8 * 4096);
	assert_int_equal(s.proxy_writes, 8);
	for (int i = 0; i < 16; i++) {
		uint8_t b[4096];
		assert_int_equal(env_io(v, TIER_REQ_READ, (uint64_t)i * OS, 4096, b, 0), 0);
		assert_memory_equal(b, bufs[i], 4096);
	}
	env_free(v);
}

/* Object mode: queued background promotions (write_miss = proxy) are reserved. */
static void test_admission_reserves_queued_promotions(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.write_miss = TIER_WMISS_PROXY;
	p.target_max_objects = 4;
	struct env *v = env_new(&p);
	struct peak k[8];
	uint8_t bufs[8][512];
	uint64_t peak = 0;
	(void)state;

	tier_engine_quiesce(v->e);   /* the agent makes no room here */

	for (int i = 0; i < 8; i++) {
		fill(bufs[i], 512, (uint64_t)i);
		k[i] = (struct peak){ .r = { .type = TIER_REQ_WRITE, .off = (uint64_t)i * OS,
					     .len = 512, .buf = bufs[i], .cb = peak_cb },
				      .v = v, .peak = &peak };
		assert_int_equal(tier_image_submit(v->img, &k[i].r), 0);
	}
	/* four admitted (queued behind their proxied writes), four not */
	assert_int_equal(env_stats(v).full_ratio_ppm, 1000000);
	env_pump(v);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.proxy_writes, 8);
	assert_int_equal(s.promotions, 4);
	assert_int_equal(s.cached_objects, 4);
	for (int i = 0; i < 8; i++) {
		uint8_t b[512];
		assert_int_equal(env_io(v, TIER_REQ_READ, (uint64_t)i * OS, 512, b, 0), 0);
		assert_memory_equal(b, bufs[i], 512);
	}
	env_free(v);
}

static void test_race_write_during_promotion(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.cache_mode = TIER_MODE_PROXY;
	struct env *v = env_new(&p);
	uint8_t *model = calloc(1, ISZ), w1[4096], w2[4096];
	int order[4], n = 0;
	(void)state;

	assert_int_equal(env_write(v, 0, OS, 1), 0);    /* base content */
	model_write(model, 0, OS, 1);
	fill(w1, 4096, 2);
	fill(w2, 4096, 3);
	struct cnt c0 = { .r = { .type = TIER_REQ_CACHE, .off = 0, .len = 1, .cb = cnt_cb },
			  .order = order, .n = &n, .id = 0 };
	struct cnt c1 = { .r = { .type = TIER_REQ_WRITE, .off = 0, .len = 4096, .buf = w1,
				 .cb = cnt_cb }, .order = order, .n = &n, .id = 1 };
	struct cnt c2 = { .r = { .type = TIER_REQ_WRITE, .off = 2048, .len = 4096, .buf = w2,
				 .cb = cnt_cb }, .order = order, .n = &n, .id = 2 };
	assert_int_equal(tier_image_submit(v->img, &c0.r), 0);   /* promotion starts */
	assert_int_equal(tier_image_submit(v->img, &c1.r), 0);   /* wait for it */
	assert_int_equal(tier_image_submit(v->img, &c2.r), 0);
	env_pump(v);
	assert_int_equal(n, 3);
	assert_int_equal(order[0], 0);
	assert_int_equal(order[1], 1);
	assert_int_equal(order[2], 2);
	assert_int_equal(c1.result, 0);
	assert_int_equal(c2.result, 0);
	memcpy(model, w1, 4096);
	memcpy(model + 2048, w2, 4096);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.promotions, 1);
	assert_int_equal(s.write_hits, 2);   /* both landed in the promoted copy */
	assert_int_equal(s.dirty_objects, 1);
	env_check(v, model, 0, 2 * OS);
	free(model);
	env_free(v);
}

static void test_race_write_during_flush(void **state)
{
	struct env *v = env_new(NULL);
	uint8_t *model = calloc(1, ISZ), w[4096];
	int order[2], n = 0;
	(void)state;

	assert_int_equal(env_write(v, 0, 4096, 1), 0);
	model_write(model, 0, 4096, 1);
	tier_engine_flush_all(v->e, NULL);   /* flush's cache READ is now queued */
	fill(w, 4096, 2);
	struct cnt c = { .r = { .type = TIER_REQ_WRITE, .off = 8192, .len = 4096, .buf = w,
				.cb = cnt_cb }, .order = order, .n = &n, .id = 1 };
	assert_int_equal(tier_image_submit(v->img, &c.r), 0);
	env_pump(v);
	assert_int_equal(n, 1);
	assert_int_equal(c.result, 0);
	model_write(model, 8192, 4096, 2);
	assert_int_equal(env_stats(v).write_hits, 1);
	/*
	 * Object mode: the write re-dirtied the whole object before the flush
	 * wrote base, so the first flush wrote nothing and marked nothing; the
	 * second (after a tick) cleaned it.
	 */
	struct tier_store_stats cs, bs;
	tier_store_get_stats(v->cache, &cs);
	tier_store_get_stats(v->base, &bs);
	assert_int_equal(cs.errors[TIER_STORE_SETMETA], 0);
	assert_int_equal(cs.ops[TIER_STORE_SETMETA], 1);
	assert_int_equal(bs.ops[TIER_STORE_WRITE], 1);
	assert_int_equal(env_stats(v).flushes, 1);
	assert_int_equal(env_stats(v).flush_partial, 0);
	assert_int_equal(env_stats(v).dirty_objects, 0);
	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	env_check(v, model, 0, 2 * OS);
	free(model);
	env_free(v);
}

/* Run completions without engine ticks until nothing is left to drain. */
static void drain_no_tick(struct env *v)
{
	while (tier_cq_drain(v->cq))
		;
}

static void base_read(struct env *v, uint64_t off, uint64_t len, void *buf)
{
	struct tier_store_op op;
	int done = 0;

	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_READ;
	snprintf(op.oid, sizeof(op.oid), "rbd_data.test.%016llx", (unsigned long long)(off / OS));
	op.off = off % OS;
	op.len = len;
	op.buf = buf;
	op.cb = stat_cb;
	op.priv = &done;
	assert_int_equal(tier_store_submit(v->base, &op), 0);
	while (!done)
		tier_cq_drain(v->cq);
	assert_true(op.result >= 0 || op.result == -ENOENT);
	if (op.result == -ENOENT)
		memset(buf, 0, len);
}

/*
 * Extent mode: writes landing during a flush keep only their own extents
 * dirty; the flush cleans the rest (a partial flush), persists that with a
 * guarded SETMETA, and the agent does not start on the same object again
 * before a tick.
 */
static void test_race_write_during_flush_extent(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.promote_granularity = TIER_GRAN_EXTENT;
	struct env *v = env_new(&p);
	uint8_t *model = calloc(1, ISZ), w0[4096], w8[4096], b[4096];
	int order[2], n = 0;
	(void)state;

	assert_int_equal(env_write(v, 0, 4096, 1), 0);          /* extents 0 and 4 dirty */
	assert_int_equal(env_write(v, 4 * 4096, 4096, 2), 0);
	model_write(model, 0, 4096, 1);
	model_write(model, 4 * 4096, 4096, 2);
	uint64_t bw0 = base_write_bytes(v);
	tier_engine_flush_all(v->e, NULL);   /* the flush's cache READ is queued */
	fill(w0, 4096, 3);
	fill(w8, 4096, 4);
	struct cnt c0 = { .r = { .type = TIER_REQ_WRITE, .off = 0, .len = 4096, .buf = w0,
				 .cb = cnt_cb }, .order = order, .n = &n, .id = 0 };
	struct cnt c8 = { .r = { .type = TIER_REQ_WRITE, .off = 8 * 4096, .len = 4096, .buf = w8,
				 .cb = cnt_cb }, .order = order, .n = &n, .id = 1 };
	assert_int_equal(tier_image_submit(v->img, &c0.r), 0);   /* re-dirties extent 0 */
	assert_int_equal(tier_image_submit(v->img, &c8.r), 0);   /* a new extent */
	drain_no_tick(v);
	assert_int_equal(n, 2);
	assert_int_equal(c0.result, 0);
	assert_int_equal(c8.result, 0);
	model_write(model, 0, 4096, 3);
	model_write(model, 8 * 4096, 4096, 4);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.flushes, 1);
	assert_int_equal(s.flush_partial, 1);
	assert_int_equal(s.flush_bytes, 4096);
	assert_int_equal(s.dirty_objects, 1);
	assert_int_equal(s.dirty_bytes, 2 * 4096);     /* extents 0 and 8 */
	assert_int_equal(s.cached_bytes, 3 * 4096);
	/* only extent 4 went to base: extent 0 was written again before the plan */
	assert_int_equal(base_write_bytes(v) - bw0, 4096);
	base_read(v, 4 * 4096, 4096, b);
	assert_memory_equal(b, model + 4 * 4096, 4096);
	/* persisted: the meta says dirty {0, 8}, valid {0, 4, 8} */
	uint64_t words[2];
	struct tier_meta m;
	int f = cache_meta(v, 0, &m, words, 1);
	assert_true(f & TIER_META_F_DIRTY);
	assert_int_equal(words[0], (1u << 0) | (1u << 4) | (1u << 8));
	assert_int_equal(words[1], (1u << 0) | (1u << 8));
	/* the agent rests on the hot object until a tick */
	assert_int_equal(s.agent_ops_in_flight, 0);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.dirty_objects, 0);
	assert_int_equal(s.flushes, 2);
	assert_int_equal(s.flush_partial, 1);
	env_check(v, model, 0, ISZ);
	/* and after a restart and an eviction, base has it all */
	env_kill_engine(v);
	assert_int_equal(env_engine(v), 1);
	env_check(v, model, 0, ISZ);
	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 0);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

static void test_race_read_during_evict(void **state)
{
	struct env *v = env_new(NULL);
	uint8_t b[4096], want[4096];
	int order[2], n = 0;
	(void)state;

	assert_int_equal(env_write(v, 0, 4096, 1), 0);
	tier_engine_flush_all(v->e, NULL);
	env_pump(v);
	tier_engine_evict_all(v->e, NULL);   /* REMOVE queued */
	struct cnt c = { .r = { .type = TIER_REQ_READ, .off = 0, .len = 4096, .buf = b,
				.cb = cnt_cb }, .order = order, .n = &n, .id = 1 };
	assert_int_equal(tier_image_submit(v->img, &c.r), 0);
	env_pump(v);
	assert_int_equal(c.result, 0);
	fill(want, 4096, 1);
	assert_memory_equal(b, want, 4096);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.evictions, 1);
	assert_int_equal(s.proxy_reads, 1);   /* served from base while evicting */
	env_free(v);
}

static void test_race_trim_of_cached_object(void **state)
{
	struct env *v = env_new(NULL);
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	assert_int_equal(env_write(v, 0, 2 * OS, 1), 0);
	tier_engine_flush_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_write(v, 0, 4096, 2), 0);          /* dirty again */
	assert_int_equal(env_io(v, TIER_REQ_TRIM, 0, OS, NULL, 0), 0);
	assert_int_equal(env_io(v, TIER_REQ_WRITE_ZEROES, OS, OS, NULL, 0), 0);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.cached_objects, 0);
	struct tier_meta m;
	assert_int_equal(cache_meta(v, 0, &m, NULL, 0), -1);
	env_check(v, model, 0, 2 * OS);
	/* a restart must not resurrect anything */
	env_kill_engine(v);
	assert_int_equal(env_engine(v), 1);
	env_check(v, model, 0, 2 * OS);
	free(model);
	env_free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_recency_levels),
		cmocka_unit_test(test_write_miss_proxies_then_promotes),
		cmocka_unit_test(test_recency_needs_consecutive_sets),
		cmocka_unit_test(test_read_recency_promotes_after_proxy),
		cmocka_unit_test(test_read_waits_for_running_promotion),
		cmocka_unit_test(test_arc_ghost_hint_admits_a_read_miss),
		cmocka_unit_test(test_mode_writeback),
		cmocka_unit_test(test_mode_readproxy),
		cmocka_unit_test(test_mode_proxy),
		cmocka_unit_test(test_mode_readonly),
		cmocka_unit_test(test_mode_none),
		cmocka_unit_test(test_mode_switch_to_none_drains),
		cmocka_unit_test(test_throttle_objects),
		cmocka_unit_test(test_throttle_bytes),
		cmocka_unit_test(test_throttle_spares_extent_admissions),
		cmocka_unit_test(test_extent_write_miss_never_reads_base),
		cmocka_unit_test(test_over_target_proxies_writes),
		cmocka_unit_test(test_over_target_extent_new_extents_proxied),
		cmocka_unit_test(test_extent_bytes_across_words_and_partial_tail),
		cmocka_unit_test(test_admission_reserves_in_flight),
		cmocka_unit_test(test_admission_reserves_queued_promotions),
		cmocka_unit_test(test_race_write_during_promotion),
		cmocka_unit_test(test_race_write_during_flush),
		cmocka_unit_test(test_race_write_during_flush_extent),
		cmocka_unit_test(test_race_read_during_evict),
		cmocka_unit_test(test_race_trim_of_cached_object),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
