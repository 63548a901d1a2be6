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
	assert_true(b <= 64 + 16 + 8);
	env_free(v);

	v = env_small(TIER_GRAN_EXTENT);
	for (int i = 0; i < 4096; i++)
		assert_int_equal(env_write(v, (uint64_t)i * 4096, 512, 1), 0);
	b = tier_engine_bytes_per_object(v->e);
	print_message("bytes per cached object (extent mode, 8 extents): %zu\n", b);
	assert_true(b <= 64 + 16 + 8 + 2 * 8 + 16);
	env_free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_roundtrip),
		cmocka_unit_test(test_flush_evict_keep_data),
		cmocka_unit_test(test_trim_and_zeroes),
		cmocka_unit_test(test_flush_request_and_fua),
		cmocka_unit_test(test_cache_hint_promotes),
		cmocka_unit_test(test_rebuild_after_restart),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_read_only_image),
		cmocka_unit_test(test_bytes_per_object),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
