/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_engine.c - the engine's data path on mem stores: request
 * splitting, hits/misses/promotion, flush, evict, trim and zeroes, FLUSH,
 * CACHE hints, start-up rebuild, argument checks, memory per object.
 */
#include "test_engine_harness.h"

#define ISZ (64 * OS)

static void test_split_roundtrip(void **state)
{
	struct env *v = env_new(NULL);
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	/* unaligned pieces crossing object boundaries */
	uint64_t offs[][2] = { { 0, 4096 }, { OS - 100, 300 }, { 3 * OS + 17, 2 * OS + 5 },
			       { ISZ - 4096, 4096 }, { 10 * OS, OS } };
	for (size_t i = 0; i < 5; i++) {
		assert_int_equal(env_write(v, offs[i][0], offs[i][1], i + 1), 0);
		model_write(model, offs[i][0], offs[i][1], i + 1);
	}
	env_check(v, model, 0, ISZ);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.write_ops, 5);
	assert_true(s.promotions > 0);
	assert_true(s.dirty_objects > 0);
	assert_int_equal(s.read_ops, 1);
	free(model);
	env_free(v);
}

static void test_flush_evict_keep_data(void **state)
{
	struct env *v = env_new(NULL);
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	for (int i = 0; i < 8; i++) {
		assert_int_equal(env_write(v, (uint64_t)i * OS + 512, 8192, (uint64_t)i), 0);
		model_write(model, (uint64_t)i * OS + 512, 8192, (uint64_t)i);
	}
	assert_int_equal(env_stats(v).dirty_objects, 8);
	assert_int_equal(tier_engine_flush_all(v->e, NULL), 0);
	env_pump(v);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.dirty_objects, 0);
	assert_int_equal(s.cached_objects, 8);
	assert_int_equal(s.flushes, 8);
	/* the cache copy says clean now */
	struct tier_meta m;
	assert_int_equal(cache_meta(v, 0, &m, NULL, 0) & TIER_META_F_DIRTY, 0);
	assert_int_equal(tier_engine_evict_all(v->e, v->img), 0);
	env_pump(v);
	s = env_stats(v);
	assert_int_equal(s.cached_objects, 0);
	assert_int_equal(s.evictions, 8);
	assert_int_equal(cache_meta(v, 0, &m, NULL, 0), -1);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

static void test_trim_and_zeroes(void **state)
{
	struct env *v = env_new(NULL);
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	assert_int_equal(env_write(v, 0, 4 * OS, 9), 0);
	model_write(model, 0, 4 * OS, 9);
	/* partial trim on a cached object, whole-object trim, zeroes on base-only data */
	assert_int_equal(env_io(v, TIER_REQ_TRIM, 100, 1000, NULL, 0), 0);
	memset(model + 100, 0, 1000);
	assert_int_equal(env_io(v, TIER_REQ_TRIM, OS, OS, NULL, 0), 0);
	memset(model + OS, 0, OS);
	assert_int_equal(tier_engine_flush_all(v->e, NULL), 0);
	env_pump(v);
	assert_int_equal(tier_engine_evict_all(v->e, NULL), 0);
	env_pump(v);
	assert_int_equal(env_io(v, TIER_REQ_WRITE_ZEROES, 2 * OS + 4096, OS, NULL, 0), 0);
	memset(model + 2 * OS + 4096, 0, OS);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

static void test_flush_request_and_fua(void **state)
{
	struct env *v = env_new(NULL);
	uint8_t buf[4096];
	(void)state;

	fill(buf, sizeof(buf), 3);
	assert_int_equal(env_io(v, TIER_REQ_WRITE, 0, 4096, buf, TIER_REQ_F_FUA), 0);
	assert_int_equal(env_write(v, OS, 4096, 4), 0);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	assert_int_equal(env_stats(v).flush_ops, 1);
	env_free(v);
}

/* Requests that need no store I/O still complete through the queue, no tick needed. */
static void test_completion_without_tick(void **state)
{
	struct env *v = env_new(NULL);
	struct sreq f = { .r = { .type = TIER_REQ_FLUSH, .cb = sreq_cb } };
	struct sreq c = { .r = { .type = TIER_REQ_CACHE, .off = 0, .len = 512, .cb = sreq_cb } };
	(void)state;

	assert_int_equal(env_write(v, 0, 512, 1), 0);   /* object 0 now cached */
	assert_int_equal(tier_image_submit(v->img, &f.r), 0);
	assert_int_equal(tier_image_submit(v->img, &c.r), 0);
	assert_int_equal(f.done + c.done, 0);
	for (int i = 0; i < 10 && f.done + c.done < 2; i++)
		tier_cq_drain(v->cq);
	assert_int_equal(f.done, 1);
	assert_int_equal(c.done, 1);
	assert_int_equal(f.result, 0);
	env_free(v);
}

static void test_cache_hint_promotes(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.cache_mode = TIER_MODE_PROXY;   /* promotion only on request */
	struct env *v = env_new(&p);
	(void)state;

	assert_int_equal(env_write(v, 5 * OS, 4096, 1), 0);
	assert_int_equal(env_stats(v).cached_objects, 0);
	assert_int_equal(env_stats(v).proxy_writes, 1);
	assert_int_equal(env_io(v, TIER_REQ_CACHE, 5 * OS, 2 * OS, NULL, 0), 0);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.cached_objects, 2);
	assert_int_equal(s.promotions, 2);
	uint8_t b[4096], want[4096];
	fill(want, 4096, 1);
	assert_int_equal(env_io(v, TIER_REQ_READ, 5 * OS, 4096, b, 0), 0);
	assert_memory_equal(b, want, 4096);
	assert_int_equal(env_stats(v).read_hits, 1);
	/* admin promote */
	assert_int_equal(tier_engine_promote(v->e, v->img, 9 * OS, 1), 0);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 3);
	env_free(v);
}

static void test_rebuild_after_restart(void **state)
{
	struct env *v = env_new(NULL);
	uint8_t *model = calloc(1, ISZ);
	(void)state;

	for (int i = 0; i < 6; i++) {
		assert_int_equal(env_write(v, (uint64_t)i * OS * 2, 4096, (uint64_t)i), 0);
		model_write(model, (uint64_t)i * OS * 2, 4096, (uint64_t)i);
	}
	tier_engine_flush_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_write(v, 0, 4096, 77), 0);
	model_write(model, 0, 4096, 77);
	struct tier_stats before = env_stats(v);
	assert_int_equal(before.dirty_objects, 1);
	env_kill_engine(v);
	assert_int_equal(env_engine(v), 1);
	struct tier_stats after = env_stats(v);
	assert_int_equal(after.cached_objects, before.cached_objects);
	assert_int_equal(after.dirty_objects, 1);
	assert_int_equal(after.cached_bytes, before.cached_bytes);
	env_check(v, model, 0, ISZ);
	/* and the dirty one still reaches base */
	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 0);
	env_check(v, model, 0, ISZ);
	free(model);
	env_free(v);
}

/* ---- handoff between two engines on one pair of pools (two tierds) ---- */

static void pump2(struct env *v, struct tier_engine *e2)
{
	for (int i = 0; i < 2000; i++) {
		size_t n = tier_cq_drain(v->cq);

		tier_engine_tick(v->e);
		tier_engine_tick(e2);
		n += tier_cq_drain(v->cq);
		if (!n && tier_engine_idle(v->e) && tier_engine_idle(e2))
			return;
	}
}

/*
 * The owner parks the image (its requests and jobs finish, its map goes, a
 * request submitted meanwhile waits), the next owner loads it from the
 * cache pool and sees every acknowledged write, dirty ones included; then
 * it hands back, and the first serves what waited with the newest data.
 */
static void test_park_handoff_load(void **state)
{
	struct env *v = env_new(NULL);
	struct tier_engine_opts o = { .base = v->base, .cache = v->cache, .params = v->p,
				      .clock = env_clock, .clock_arg = v };
	struct tier_image_opts io = { .name = "img", .object_prefix = "rbd_data.test",
				      .size = ISZ, .standby = true };
	struct tier_engine *e2 = NULL;
	struct tier_image *img2 = NULL, *img1 = v->img;
	uint8_t *model = calloc(1, ISZ), *buf = malloc(4096), *got = malloc(ISZ);
	struct sreq w = { 0 }, r = { 0 };
	(void)state;

	for (int i = 0; i < 6; i++) {
		assert_int_equal(env_write(v, (uint64_t)i * OS, 4096, (uint64_t)i + 1), 0);
		model_write(model, (uint64_t)i * OS, 4096, (uint64_t)i + 1);
	}
	/* a write in flight when the handoff starts finishes before the image is parked */
	fill(buf, 4096, 99);
	model_write(model, 7 * OS, 4096, 99);
	w.r = (struct tier_request){ .type = TIER_REQ_WRITE, .off = 7 * OS, .len = 4096,
				     .buf = buf, .cb = sreq_cb };
	assert_int_equal(tier_image_submit(img1, &w.r), 0);
	assert_int_equal(tier_image_park(img1, 0), 0);
	assert_int_equal(tier_image_parked(img1), 0);     /* the write still runs */
	assert_true(tier_image_is_parked(img1));
	/* a request submitted now waits for the image to come back */
	r.r = (struct tier_request){ .type = TIER_REQ_READ, .off = 0, .len = ISZ, .buf = got,
				     .cb = sreq_cb };
	assert_int_equal(tier_image_submit(img1, &r.r), 0);
	env_pump(v);
	assert_int_equal(w.done, 1);
	assert_int_equal(w.result, 0);
	assert_int_equal(r.done, 0);
	assert_int_equal(tier_image_waiting(img1), 1);
	assert_int_equal(tier_image_parked(img1), 1);
	assert_int_equal(env_stats(v).cached_objects, 0);   /* its map is gone */
	assert_int_equal(env_stats(v).flushes, 0);          /* the dirty data stays in the cache */

	/* the other daemon: standby, then loads and sees all of it */
	assert_int_equal(tier_engine_create(&o, &e2), 0);
	assert_int_equal(tier_image_open(e2, &io, &img2), 0);
	assert_int_equal(tier_image_ready(img2), 0);
	assert_int_equal(tier_image_parked(img2), 1);
	assert_int_equal(tier_image_load(img2), 0);
	pump2(v, e2);
	assert_int_equal(tier_image_ready(img2), 1);
	{
		struct tier_stats s2;

		tier_engine_get_stats(e2, &s2);
		assert_int_equal(s2.dirty_objects, 7);
	}
	{
		struct sreq x = { .r = { .type = TIER_REQ_READ, .off = 0, .len = ISZ, .buf = got,
					 .cb = sreq_cb } };

		assert_int_equal(tier_image_submit(img2, &x.r), 0);
		pump2(v, e2);
		assert_int_equal(x.done, 1);
		assert_memory_equal(got, model, ISZ);
	}
	/* it writes, hands back; the first loads and answers what waited */
	fill(buf, 4096, 55);
	model_write(model, 0, 4096, 55);
	{
		struct sreq x = { .r = { .type = TIER_REQ_WRITE, .off = 0, .len = 4096, .buf = buf,
					 .cb = sreq_cb } };

		assert_int_equal(tier_image_submit(img2, &x.r), 0);
		pump2(v, e2);
		assert_int_equal(x.done, 1);
		assert_int_equal(x.result, 0);
	}
	assert_int_equal(tier_image_park(img2, 0), 0);
	pump2(v, e2);
	assert_int_equal(tier_image_parked(img2), 1);
	assert_int_equal(tier_image_load(img1), 0);
	pump2(v, e2);
	assert_int_equal(r.done, 1);
	assert_int_equal(r.result, 0);
	assert_memory_equal(got, model, ISZ);

	/* fenced: what waits and what comes later fail with ESHUTDOWN */
	assert_int_equal(tier_image_stop(img2, -ESHUTDOWN), 0);
	{
		struct sreq x = { .r = { .type = TIER_REQ_READ, .off = 0, .len = 4096, .buf = buf,
					 .cb = sreq_cb } };

		assert_int_equal(tier_image_submit(img2, &x.r), -ESHUTDOWN);
		assert_int_equal(x.done, 0);
	}
	assert_int_equal(tier_image_load(img2), -EINVAL);
	tier_image_close(img2);
	tier_engine_destroy(e2);
	free(model);
	free(buf);
	free(got);
	env_free(v);
}

/* Run both engines in virtual time until x is answered (or nothing moves). */
static void run_until(struct env *v, struct tier_engine *e2, struct sreq *x)
{
	for (int i = 0; i < 1000000 && !(x && x->done); i++) {
		size_t n = tier_cq_drain(v->cq);

		tier_engine_tick(v->e);
		tier_engine_tick(e2);
		n += tier_cq_drain(v->cq);
		if (!n && !env_vt_step(v))
			break;
	}
}

static int img_io(struct env *v, struct tier_engine *e2, struct tier_image *img, int type,
		  uint64_t off, uint64_t len, void *buf)
{
	struct sreq x = { .r = { .type = type, .off = off, .len = len, .buf = buf,
				 .cb = sreq_cb } };
	int rc = tier_image_submit(img, &x.r);

	if (rc < 0)
		return rc;
	run_until(v, e2, &x);
	assert_int_equal(x.done, 1);
	return x.result;
}

/* Two engines on one pair of vt stores: the first wrote one 4 KiB block into
 * each of n of the nobj objects of image "big" (all cached, dirty) and
 * parked it; the second has it open in standby, not loaded. */
struct lazy_rig {
	struct env *v;
	struct tier_engine *e2;
	struct tier_image *img1, *img2;
};

static struct lazy_rig lazy_rig(bool extents, uint64_t nobj, uint64_t n)
{
	struct tier_params p;
	struct tier_devmodel_params cm = { .read_latency_us = 100, .write_latency_us = 100,
					   .queue_depth = 4 };
	struct tier_image_opts io = { .name = "big", .object_prefix = "rbd_data.big",
				      .size = nobj * OS };
	struct tier_engine_opts o;
	struct lazy_rig g = { 0 };
	uint8_t buf[4096];

	env_params(&p);
	p.target_max_bytes = 4096 * OS;   /* everything stays cached and dirty */
	if (extents)
		p.promote_granularity = TIER_GRAN_EXTENT;
	g.v = env_new_vt(&p, NULL, &cm, true);
	assert_int_equal(tier_image_open(g.v->e, &io, &g.img1), 0);
	run_until(g.v, g.v->e, NULL);
	assert_int_equal(tier_image_ready(g.img1), 1);
	for (uint64_t i = 0; i < n; i++) {
		fill(buf, 4096, i + 1);
		assert_int_equal(img_io(g.v, g.v->e, g.img1, TIER_REQ_WRITE, i * OS, 4096, buf), 0);
	}
	assert_int_equal(env_stats(g.v).dirty_objects, n);
	assert_int_equal(env_stats(g.v).flushes, 0);   /* the base pool has none of it */
	assert_int_equal(tier_image_park(g.img1, 0), 0);
	run_until(g.v, g.v->e, NULL);
	assert_int_equal(tier_image_parked(g.img1), 1);
	o = (struct tier_engine_opts){ .base = g.v->base, .cache = g.v->cache,
				       .params = g.v->p, .clock = env_clock, .clock_arg = g.v };
	io.standby = true;
	assert_int_equal(tier_engine_create(&o, &g.e2), 0);
	assert_int_equal(tier_image_open(g.e2, &io, &g.img2), 0);
	return g;
}

/*
 * Serve while loading: after a handoff, the new owner answers a request as
 * soon as a probe has read the record of each object it touches, long
 * before its scan of the cache pool ends; what it reads is the cache's
 * dirty copy (never the base pool's older bytes), what it writes while the
 * scan goes on is not undone by the scan's older answers, and the loaded
 * map is the same as a full scan's.
 */
static void lazy_load(bool extents)
{
	enum { N = 600, NOBJ = 640 };
	struct lazy_rig g = lazy_rig(extents, NOBJ, N);
	struct env *v = g.v;
	struct tier_engine *e2 = g.e2;
	struct tier_image *img2 = g.img2;
	struct sreq r = { 0 }, w = { 0 }, w2 = { 0 };
	uint8_t *buf = malloc(OS), *got = malloc(OS), *nb = malloc(4096), *nb2 = malloc(4096);
	struct tier_stats s2;

	/* waits in standby, goes once the load starts */
	r.r = (struct tier_request){ .type = TIER_REQ_READ, .off = 500 * OS, .len = 4096,
				     .buf = got, .cb = sreq_cb };
	assert_int_equal(tier_image_submit(img2, &r.r), 0);
	assert_int_equal(tier_image_load(img2), 0);
	/* a write to a cached object and one to an object the cache lacks */
	fill(nb, 4096, 777);
	w.r = (struct tier_request){ .type = TIER_REQ_WRITE, .off = 3 * OS + 4096, .len = 4096,
				     .buf = nb, .cb = sreq_cb };
	assert_int_equal(tier_image_submit(img2, &w.r), 0);
	fill(nb2, 4096, 888);
	w2.r = (struct tier_request){ .type = TIER_REQ_WRITE, .off = 620 * OS, .len = 4096,
				      .buf = nb2, .cb = sreq_cb };
	assert_int_equal(tier_image_submit(img2, &w2.r), 0);
	run_until(v, e2, &r);
	assert_int_equal(r.done, 1);
	assert_int_equal(r.result, 0);
	fill(buf, 4096, 501);
	assert_memory_equal(got, buf, 4096);          /* the cache's dirty copy */
	assert_int_equal(tier_image_ready(img2), 0);  /* answered while the scan goes on */
	run_until(v, e2, &w);
	run_until(v, e2, &w2);
	assert_int_equal(w.done + w2.done, 2);
	assert_int_equal(w.result | w2.result, 0);
	assert_int_equal(tier_image_ready(img2), 0);
	tier_image_get_stats(img2, &s2);
	assert_int_equal(s2.load_probes, 3);
	{
		/* a request over more objects than a probe round takes waits for the scan */
		uint8_t *big = malloc(32 * OS);
		struct sreq b = { .r = { .type = TIER_REQ_READ, .off = 100 * OS, .len = 32 * OS,
					 .buf = big, .cb = sreq_cb } };

		assert_int_equal(tier_image_submit(img2, &b.r), 0);
		run_until(v, e2, &b);
		assert_int_equal(b.done, 1);
		assert_int_equal(b.result, 0);
		assert_int_equal(tier_image_ready(img2), 1);
		tier_image_get_stats(img2, &s2);
		assert_int_equal(s2.load_probes, 3);   /* no probe for it */
		for (uint64_t i = 0; i < 32; i++) {
			fill(buf, 4096, 100 + i + 1);
			assert_memory_equal(big + i * OS, buf, 4096);
		}
		free(big);
	}

	run_until(v, e2, NULL);
	assert_int_equal(tier_image_ready(img2), 1);
	tier_engine_get_stats(e2, &s2);
	assert_int_equal(s2.dirty_objects, N + 1);
	assert_int_equal(s2.cached_objects, N + 1);
	/* the scan's older answers did not undo what was written meanwhile */
	assert_int_equal(img_io(v, e2, img2, TIER_REQ_READ, 3 * OS, 4096, got), 0);
	fill(buf, 4096, 4);
	assert_memory_equal(got, buf, 4096);
	assert_int_equal(img_io(v, e2, img2, TIER_REQ_READ, 3 * OS + 4096, 4096, got), 0);
	assert_memory_equal(got, nb, 4096);
	assert_int_equal(img_io(v, e2, img2, TIER_REQ_READ, 620 * OS, 4096, got), 0);
	assert_memory_equal(got, nb2, 4096);
	for (uint64_t i = 0; i < N; i += 37) {
		assert_int_equal(img_io(v, e2, img2, TIER_REQ_READ, i * OS, 4096, got), 0);
		fill(buf, 4096, i + 1);
		assert_memory_equal(got, buf, 4096);
	}
	tier_image_close(img2);
	tier_engine_destroy(e2);
	free(buf);
	free(got);
	free(nb);
	free(nb2);
	env_free(v);
}

static void test_lazy_load(void **state)
{
	(void)state;
	lazy_load(false);
}

static void test_lazy_load_extents(void **state)
{
	(void)state;
	lazy_load(true);
}

/*
 * Handed back while it loads lazily: the probes and the scan stop, what
 * waits stays waiting, and the first owner, loaded again, answers it.
 */
static void test_lazy_load_parked(void **state)
{
	enum { N = 300, NOBJ = 320 };
	struct lazy_rig g = lazy_rig(false, NOBJ, N);
	struct env *v = g.v;
	struct tier_engine *e2 = g.e2;
	struct tier_image *img1 = g.img1, *img2 = g.img2;
	struct sreq r[8];
	uint8_t *buf = malloc(4096), *got = malloc(8 * 4096);
	(void)state;

	assert_int_equal(tier_image_load(img2), 0);
	for (int i = 0; i < 8; i++) {
		r[i] = (struct sreq){ .r = { .type = TIER_REQ_READ, .off = (uint64_t)(40 * i) * OS,
					     .len = 4096, .buf = got + i * 4096, .cb = sreq_cb } };
		assert_int_equal(tier_image_submit(img2, &r[i].r), 0);
		if (i == 0) {
			run_until(v, e2, &r[0]);
			assert_int_equal(r[0].done, 1);
			assert_int_equal(tier_image_ready(img2), 0);
		}
	}
	/* handed back now, their probes out: they wait; the scan stops */
	assert_int_equal(tier_image_park(img2, 0), 0);
	run_until(v, e2, NULL);
	assert_int_equal(tier_image_parked(img2), 1);
	assert_true(tier_image_waiting(img2) > 0);
	{
		struct tier_stats s2;

		tier_engine_get_stats(e2, &s2);
		assert_int_equal(s2.cached_objects, 0);   /* its map is gone */
	}
	assert_int_equal(tier_image_load(img1), 0);
	run_until(v, v->e, NULL);
	assert_int_equal(tier_image_ready(img1), 1);
	assert_int_equal(env_stats(v).dirty_objects, N);
	/* and back to e2, which answers what waited */
	assert_int_equal(tier_image_park(img1, 0), 0);
	run_until(v, v->e, NULL);
	assert_int_equal(tier_image_load(img2), 0);
	run_until(v, e2, NULL);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(r[i].done, 1);
		assert_int_equal(r[i].result, 0);
		fill(buf, 4096, (uint64_t)(40 * i) + 1);
		assert_memory_equal(got + i * 4096, buf, 4096);
	}
	tier_image_close(img2);
	tier_engine_destroy(e2);
	free(buf);
	free(got);
	env_free(v);
}

static void test_bad_args(void **state)
{
	struct env *v = env_new(NULL);
	uint8_t b[16];
	(void)state;

	assert_int_equal(env_io(v, TIER_REQ_READ, ISZ - 8, 16, b, 0), -EINVAL);
	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 0, b, 0), -EINVAL);
	assert_int_equal(env_io(v, TIER_REQ_WRITE, 0, 16, NULL, 0), -EINVAL);
	assert_int_equal(env_io(v, (enum tier_req_type)42, 0, 16, b, 0), -EINVAL);
	assert_int_equal(env_io(v, TIER_REQ_READ, UINT64_MAX - 4, 16, b, 0), -EINVAL);
	struct tier_image_opts io = { .name = "img", .object_prefix = "x", .size = 4096 };
	struct tier_image *img2;
	assert_int_equal(tier_image_open(v->e, &io, &img2), -EEXIST);
	assert_ptr_equal(tier_engine_find_image(v->e, "img"), v->img);
	assert_string_equal(tier_image_name(v->img), "img");
	assert_int_equal(tier_image_size(v->img), ISZ);
	struct tier_image *arr[4];
	assert_int_equal(tier_engine_images(v->e, arr, 4), 1);
	env_free(v);
}

static void test_read_only_image(void **state)
{
	struct env *v = env_new(NULL);
	struct tier_image *ro;
	struct tier_image_opts io = { .name = "ro", .object_prefix = "rbd_data.ro",
				      .size = 4 * OS, .read_only = true };
	uint8_t b[512] = { 0 };
	(void)state;

	assert_int_equal(tier_image_open(v->e, &io, &ro), 0);
	env_pump(v);
	struct tier_image *save = v->img;
	v->img = ro;
	assert_int_equal(env_io(v, TIER_REQ_WRITE, 0, 512, b, 0), -EROFS);
	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 512, b, 0), 0);
	v->img = save;
	tier_image_close(ro);
	env_free(v);
}

static struct env *env_small(enum tier_granularity g)
{
	struct env *v = calloc(1, sizeof(*v));

	v->now_ns = 1000000000ull;
	env_params(&v->p);
	v->p.object_size = 4096;
	v->p.extent_size = 512;
	v->p.target_max_bytes = 1ull << 30;
	v->p.promote_granularity = g;
	v->isz = 4096 * 4096ull;
	assert_int_equal(tier_cq_create(NULL, NULL, &v->cq), 0);
	assert_int_equal(tier_store_mem_create("base", NULL, v->cq, &v->base), 0);
	assert_int_equal(tier_store_mem_create("cache", NULL, v->cq, &v->cache), 0);
	assert_int_equal(env_engine(v), 1);
	return v;
}

static void test_bytes_per_object(void **state)
{
	struct env *v = env_small(TIER_GRAN_OBJECT);
	(void)state;

	for (int i = 0; i < 4096; i++)
		assert_int_equal(env_write(v, (uint64_t)i * 4096, 512, 1), 0);
	assert_int_equal(env_stats(v).cached_objects, 4096);
	size_t b = tier_engine_bytes_per_object(v->e);
	print_message("bytes per cached object (object mode, 4096 objects): %zu\n", b);
	/* a 40-byte entry, its bitmaps behind it (one word each; object mode
	   tracks written extents too), its share of the bucket heads, and the
	   policy's node by the entry's handle (arc: 2 links and a 2-bit tag) */
	assert_true(b <= 40 + 2 * 8 + 4 + 9);
	assert_true(tier_engine_policy_bytes_per_object(v->e) <= 9);
	env_free(v);

	v = env_small(TIER_GRAN_EXTENT);
	for (int i = 0; i < 4096; i++)
		assert_int_equal(env_write(v, (uint64_t)i * 4096, 512, 1), 0);
	b = tier_engine_bytes_per_object(v->e);
	print_message("bytes per cached object (extent mode, 8 extents): %zu\n", b);
	/* and a third bitmap word: the reference bits of extent-aware eviction */
	assert_true(b <= 40 + 3 * 8 + 4 + 9);
	env_free(v);
}

static void test_latency_histogram(void **state)
{
	struct tier_lat_hist h;
	(void)state;

	memset(&h, 0, sizeof(h));
	assert_int_equal(tier_lat_quantile(&h, 0.5), 0);
	for (uint64_t us = 1; us <= 1000; us++)
		tier_lat_record(&h, us);
	assert_int_equal(h.count, 1000);
	assert_int_equal(h.max_us, 1000);
	assert_int_equal(h.sum_us, 500500);
	/* quarter-octave buckets: an upper bound within 2^(1/4) of the truth */
	uint64_t p50 = tier_lat_quantile(&h, 0.5), p99 = tier_lat_quantile(&h, 0.99);
	assert_true(p50 >= 500 && p50 <= 500 * 1.19 + 1);
	assert_true(p99 >= 990 && p99 <= 1000);
	assert_int_equal(tier_lat_quantile(&h, 1.0), 1000);
	/* bucket edges: 2^(i/4) */
	memset(&h, 0, sizeof(h));
	tier_lat_record(&h, 16);   /* 2^4: bucket 16 */
	assert_int_equal(h.b[16], 1);
	tier_lat_record(&h, 15);   /* just below: bucket 15 */
	assert_int_equal(h.b[15], 1);
	tier_lat_record(&h, UINT64_MAX / 2);
	assert_int_equal(h.b[TIER_LAT_BUCKETS - 1], 1);
	assert_string_equal(tier_flush_mode_name(TIER_FLUSH_HIGH), "high");
	assert_string_equal(tier_evict_mode_name(TIER_EVICT_SOME), "some");
	assert_string_equal(tier_evict_mode_name(99), "unknown");
}

static void test_request_latency_recorded(void **state)
{
	struct env *v = env_new(NULL);
	uint8_t b[512];
	(void)state;

	assert_int_equal(env_write(v, 0, 512, 1), 0);
	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 512, b, 0), 0);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	struct tier_stats s = env_stats(v);
	assert_int_equal(s.lat[TIER_LAT_WRITE].count, 1);
	assert_int_equal(s.lat[TIER_LAT_READ].count, 1);
	assert_int_equal(s.lat[TIER_LAT_OTHER].count, 1);
	assert_int_equal(s.requests_in_flight, 0);
	env_free(v);
}

/*
 * Each image keeps its own counters: requests, bytes, hits and misses,
 * errors, latencies, cached and dirty shares, flushes; the engine's totals
 * are their sum, and a read of data in neither pool is a miss, not an error.
 */
static void test_per_image_counters(void **state)
{
	struct env *v = env_new(NULL);
	struct tier_image *two, *one = v->img;
	struct tier_image_opts io = { .name = "two", .object_prefix = "rbd_data.two",
				      .size = 4 * OS, .read_only = true };
	struct tier_stats a, b, t;
	uint8_t buf[512];
	(void)state;

	assert_int_equal(tier_image_open(v->e, &io, &two), 0);
	env_pump(v);
	assert_int_equal(env_write(v, 0, 512, 1), 0);
	assert_int_equal(env_write(v, OS, 512, 2), 0);
	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 512, buf, 0), 0);
	v->img = two;
	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 512, buf, 0), 0);   /* nothing there: a miss */
	assert_int_equal(env_io(v, TIER_REQ_WRITE, 0, 512, buf, 0), -EROFS);
	v->img = one;
	tier_image_get_stats(one, &a);
	tier_image_get_stats(two, &b);
	t = env_stats(v);
	assert_int_equal(a.write_ops, 2);
	assert_int_equal(a.write_bytes, 1024);
	assert_int_equal(a.read_ops, 1);
	assert_int_equal(a.read_hits, 1);
	assert_int_equal(a.errors, 0);
	assert_int_equal(a.lat[TIER_LAT_WRITE].count, 2);
	assert_int_equal(a.cached_objects, 2);
	assert_int_equal(a.dirty_objects, 2);
	assert_int_equal(a.dirty_bytes, t.dirty_bytes);
	assert_int_equal(a.dirty_bytes, 2 * OS);
	assert_int_equal(b.read_ops, 1);
	assert_int_equal(b.read_misses, 1);
	assert_int_equal(b.read_hits, 0);
	assert_int_equal(b.write_ops, 1);
	assert_int_equal(b.errors, 1);   /* the refused write; the miss is not one */
	assert_int_equal(b.dirty_objects, 0);
	assert_int_equal(b.lat[TIER_LAT_READ].count, 1);
#define SUM(n) assert_int_equal(t.n, a.n + b.n);
	TIER_IMAGE_COUNTERS(SUM)
	TIER_IMAGE_GAUGES(SUM)
#undef SUM
	for (int k = 0; k < TIER_LAT_KINDS; k++)
		assert_int_equal(t.lat[k].count, a.lat[k].count + b.lat[k].count);
	/* a flush of the image's dirty objects is counted on it */
	assert_int_equal(tier_engine_flush_all(v->e, one), 0);
	for (int i = 0; i < 1000 && env_stats(v).dirty_objects; i++)
		env_pump(v);
	tier_image_get_stats(one, &a);
	assert_int_equal(a.flushes, 2);
	assert_int_equal(a.dirty_objects, 0);
	assert_int_equal(a.dirty_bytes, 0);
	assert_int_equal(a.cached_objects, 2);
	tier_image_get_stats(two, &b);
	assert_int_equal(b.flushes, 0);
	tier_image_close(two);
	env_free(v);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * Random reads, writes, trims and zeroes against a byte model, with a small
 * cache (the agent flushes and evicts all the time, in virtual time so its
 * ops overlap the client's), modes and granularity switched live, then a
 * restart: every read must match the model.
 */
static void random_against_model(enum tier_granularity g, uint64_t seed)
{
	struct tier_params p;
	struct tier_devmodel_params bm = { .read_latency_us = 300, .write_latency_us = 200 };
	struct tier_devmodel_params cm = { .read_latency_us = 50, .write_latency_us = 40 };
	uint8_t *model = calloc(1, ISZ), *b = malloc(2 * OS + 8192);
	static const enum tier_cache_mode modes[] = { TIER_MODE_WRITEBACK, TIER_MODE_READPROXY,
		TIER_MODE_READONLY, TIER_MODE_PROXY, TIER_MODE_WRITEBACK };

	env_params(&p);
	p.promote_granularity = g;
	p.target_max_bytes = 8 * OS;
	p.cache_target_dirty_ratio = 0.2;
	p.cache_target_dirty_high_ratio = 0.5;
	p.min_read_recency_for_promote = 1;
	struct env *v = env_new_vt(&p, &bm, &cm, true);

	for (int i = 0; i < 2500; i++) {
		uint64_t r = rnd(&seed), op = r % 10;
		uint64_t off = rnd(&seed) % ISZ, len = 1 + rnd(&seed) % (op < 5 ? 3 * 4096 : 2 * OS);

		if (rnd(&seed) % 4 == 0)
			off &= ~4095ull;
		if (off + len > ISZ)
			len = ISZ - off;
		if (op < 4) {
			assert_int_equal(env_write(v, off, len, (uint64_t)i), 0);
			model_write(model, off, len, (uint64_t)i);
		} else if (op < 8) {
			assert_int_equal(env_io(v, TIER_REQ_READ, off, len, b, 0), 0);
			assert_memory_equal(b, model + off, len);
		} else {
			enum tier_req_type t = op == 8 ? TIER_REQ_TRIM : TIER_REQ_WRITE_ZEROES;
			assert_int_equal(env_io(v, t, off, len, NULL, 0), 0);
			memset(model + off, 0, len);
		}
		if (i % 500 == 499) {
			p.cache_mode = modes[(i / 500) % 5];
			env_set_params(v, &p);
		}
		if (i % 97 == 0)
			env_advance_ms(v, 700);
	}
	env_pump(v);
	env_check(v, model, 0, ISZ);
	struct tier_stats s = env_stats(v);
	print_message("%s: promotions %llu fills %llu flushes %llu evictions %llu proxy w %llu "
		      "hits r/w %llu/%llu\n", g == TIER_GRAN_EXTENT ? "extent" : "object",
		      (unsigned long long)s.promotions, (unsigned long long)s.fills,
		      (unsigned long long)s.flushes, (unsigned long long)s.evictions,
		      (unsigned long long)s.proxy_writes, (unsigned long long)s.read_hits,
		      (unsigned long long)s.write_hits);
	/* the run must have exercised the agent and both paths (and fills, extent mode) */
	assert_true(s.flushes > 10 && s.evictions > 10 && s.proxy_writes > 10 && s.write_hits > 10);
	assert_true(g != TIER_GRAN_EXTENT || s.fills > 10);
	env_kill_engine(v);
	assert_int_equal(env_engine(v), 1);
	env_check(v, model, 0, ISZ);
	env_pump(v);
	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 0);
	env_check(v, model, 0, ISZ);
	free(model);
	free(b);
	env_free(v);
}

/* Batches of up to 8 concurrent requests on disjoint ranges, often in one object. */
static void random_concurrent(enum tier_granularity g, uint64_t seed)
{
	struct tier_params p;
	struct tier_devmodel_params bm = { .read_latency_us = 300, .write_latency_us = 200,
					   .queue_depth = 4 };
	struct tier_devmodel_params cm = { .read_latency_us = 50, .write_latency_us = 40 };
	uint8_t *model = calloc(1, ISZ);
	struct sreq rq[8];
	uint8_t *bufs[8];

	env_params(&p);
	p.promote_granularity = g;
	p.target_max_bytes = 8 * OS;
	p.cache_target_dirty_ratio = 0.2;
	p.cache_target_dirty_high_ratio = 0.5;
	struct env *v = env_new_vt(&p, &bm, &cm, true);
	for (int i = 0; i < 8; i++)
		bufs[i] = malloc(3 * 4096);
	for (int batch = 0; batch < 400; batch++) {
		uint64_t offs[8], lens[8];
		int n = 0;
		uint64_t hot = rnd(&seed) % 8 * OS;

		for (int t = 0; t < 8; t++) {
			uint64_t off = (rnd(&seed) % 2 ? hot + rnd(&seed) % OS : rnd(&seed) % ISZ);
			uint64_t len = 1 + rnd(&seed) % (3 * 4096);
			bool clash = false;

			if (off + len > ISZ)
				len = ISZ - off;
			for (int k = 0; k < n; k++)
				clash |= off < offs[k] + lens[k] && offs[k] < off + len;
			if (clash)
				continue;
			offs[n] = off;
			lens[n] = len;
			memset(&rq[n], 0, sizeof(rq[n]));
			rq[n].r.off = off;
			rq[n].r.len = len;
			rq[n].r.cb = sreq_cb;
			switch (rnd(&seed) % 5) {
			case 0: case 1:
				rq[n].r.type = TIER_REQ_WRITE;
				fill(bufs[n], len, (uint64_t)batch * 8 + (uint64_t)n);
				rq[n].r.buf = bufs[n];
				break;
			case 4:
				rq[n].r.type = TIER_REQ_WRITE_ZEROES;
				break;
			default:
				rq[n].r.type = TIER_REQ_READ;
				rq[n].r.buf = bufs[n];
			}
			assert_int_equal(tier_image_submit(v->img, &rq[n].r), 0);
			n++;
		}
		for (int k = 0; k < 100000; k++) {
			int done = 0;
			for (int t = 0; t < n; t++)
				done += rq[t].done;
			if (done == n)
				break;
			if (!tier_cq_drain(v->cq))
				env_vt_step(v);
			tier_engine_tick(v->e);
		}
		for (int t = 0; t < n; t++) {
			assert_int_equal(rq[t].done, 1);
			assert_int_equal(rq[t].result, 0);
			if (rq[t].r.type == TIER_REQ_READ)
				assert_memory_equal(bufs[t], model + offs[t], lens[t]);
			else if (rq[t].r.type == TIER_REQ_WRITE)
				memcpy(model + offs[t], bufs[t], lens[t]);
			else
				memset(model + offs[t], 0, lens[t]);
		}
		if (batch % 50 == 49)
			env_advance_ms(v, 1500);
	}
	env_pump(v);
	env_check(v, model, 0, ISZ);
	struct tier_stats s = env_stats(v);
	print_message("%s, concurrent: promotions %llu fills %llu (skipped: cold %llu full %llu)\n",
		      g == TIER_GRAN_EXTENT ? "extent" : "object", (unsigned long long)s.promotions,
		      (unsigned long long)s.fills, (unsigned long long)s.fill_skip_cold,
		      (unsigned long long)s.fill_skip_full);
	assert_true(g != TIER_GRAN_EXTENT || s.fills > 10);   /* fills raced the batches */
	env_kill_engine(v);
	assert_int_equal(env_engine(v), 1);
	env_check(v, model, 0, ISZ);
	for (int i = 0; i < 8; i++)
		free(bufs[i]);
	free(model);
	env_free(v);
}

static void test_concurrent_object_mode(void **state)
{
	(void)state;
	random_concurrent(TIER_GRAN_OBJECT, 0xabcdef);
}

static void test_concurrent_extent_mode(void **state)
{
	(void)state;
	random_concurrent(TIER_GRAN_EXTENT, 0xfedcba);
}

static void test_random_object_mode(void **state)
{
	(void)state;
	random_against_model(TIER_GRAN_OBJECT, 0x1234567);
}

static void test_random_extent_mode(void **state)
{
	(void)state;
	random_against_model(TIER_GRAN_EXTENT, 0x7654321);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_roundtrip),
		cmocka_unit_test(test_flush_evict_keep_data),
		cmocka_unit_test(test_trim_and_zeroes),
		cmocka_unit_test(test_flush_request_and_fua),
		cmocka_unit_test(test_completion_without_tick),
		cmocka_unit_test(test_cache_hint_promotes),
		cmocka_unit_test(test_rebuild_after_restart),
		cmocka_unit_test(test_park_handoff_load),
		cmocka_unit_test(test_lazy_load),
		cmocka_unit_test(test_lazy_load_extents),
		cmocka_unit_test(test_lazy_load_parked),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_read_only_image),
		cmocka_unit_test(test_bytes_per_object),
		cmocka_unit_test(test_latency_histogram),
		cmocka_unit_test(test_request_latency_recorded),
		cmocka_unit_test(test_per_image_counters),
		cmocka_unit_test(test_random_object_mode),
		cmocka_unit_test(test_random_extent_mode),
		cmocka_unit_test(test_concurrent_object_mode),
		cmocka_unit_test(test_concurrent_extent_mode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
