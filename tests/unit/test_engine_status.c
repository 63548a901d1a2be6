/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_engine_status.c - tier_image_block_status: holes only for
 * objects in neither pool (and past a base object's end), data for anything
 * the map knows, everything uncertain (loading, STAT errors, a write that
 * arrived while the STAT ran) data; the answer is asynchronous, bounded and
 * merged; bad ranges are refused.
 */
#include "test_engine_harness.h"

#define HZ (TIER_EXTENT_HOLE | TIER_EXTENT_ZERO)

struct bs {
	int done, result;
	size_t n;
	struct tier_extent ext[2 * TIER_BLOCK_STATUS_MAX_OBJS];
};

static void bs_cb(void *arg, int result, const struct tier_extent *ext, size_t n)
{
	struct bs *b = arg;

	b->done++;
	b->result = result;
	b->n = n;
	memcpy(b->ext, ext, n * sizeof(*ext));
}

static void bs_wait(struct env *v, struct bs *b)
{
	for (int i = 0; i < 100000 && !b->done; i++) {
		tier_cq_drain(v->cq);
		tier_engine_tick(v->e);
	}
	assert_int_equal(b->done, 1);
	assert_int_equal(b->result, 0);
}

static void bs_run(struct env *v, struct tier_image *img, uint64_t off, uint64_t len,
		   struct bs *b)
{
	memset(b, 0, sizeof(*b));
	assert_int_equal(tier_image_block_status(img, off, len, bs_cb, b), 0);
	assert_int_equal(b->done, 0);    /* never inside the call */
	bs_wait(v, b);
}

static void expect(const struct bs *b, size_t n, const uint64_t *lens, const uint32_t *flags)
{
	assert_int_equal(b->n, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(b->ext[i].len, lens[i]);
		assert_int_equal(b->ext[i].flags, flags[i]);
	}
}

/* A base object written behind the engine's back (as an existing RBD image's). */
static void base_put(struct env *v, uint64_t objno, uint64_t len)
{
	struct tier_store_op op = { .opcode = TIER_STORE_WRITE, .len = len, .cb = stat_cb };
	void *buf = calloc(1, len);
	int done = 0;

	op.buf = buf;
	op.priv = &done;
	snprintf(op.oid, sizeof(op.oid), "rbd_data.test.%016llx", (unsigned long long)objno);
	assert_int_equal(tier_store_submit(v->base, &op), 0);
	while (!done)
		tier_cq_drain(v->cq);
	assert_true(op.result >= 0);
	free(buf);
}

static void test_empty_is_one_hole(void **state)
{
	struct env *v = env_new(NULL);
	struct bs b;

	(void)state;
	bs_run(v, v->img, 0, 64 * OS, &b);
	expect(&b, 1, (uint64_t[]){ 64 * OS }, (uint32_t[]){ HZ });
	/* a sub-range: clipped to the request */
	bs_run(v, v->img, OS + 100, 1000, &b);
	expect(&b, 1, (uint64_t[]){ 1000 }, (uint32_t[]){ HZ });
	env_free(v);
}

static void test_cached_and_base_objects(void **state)
{
	struct env *v = env_new(NULL);
	struct bs b;

	(void)state;
	assert_int_equal(env_write(v, 3 * OS + 10, 100, 1), 0);   /* cached (DIRTY) */
	base_put(v, 10, 1000);                                     /* base only, short */
	base_put(v, 11, OS);                                       /* base only, full */
	env_pump(v);
	bs_run(v, v->img, 0, 64 * OS, &b);
	expect(&b, 7,
	       (uint64_t[]){ 3 * OS, OS, 6 * OS, 1000, OS - 1000, OS, 52 * OS },
	       (uint32_t[]){ HZ, 0, HZ, 0, HZ, 0, HZ });
	env_free(v);
}

static void test_loading_image_is_data(void **state)
{
	struct env *v = env_new(NULL);
	struct tier_image_opts io = { .name = "img2", .object_prefix = "rbd_data.two",
				      .size = 8 * OS };
	struct tier_image *img2;
	struct bs b;

	(void)state;
	assert_int_equal(tier_image_open(v->e, &io, &img2), 0);
	assert_int_equal(tier_image_ready(img2), 0);    /* its LIST not drained yet */
	memset(&b, 0, sizeof(b));
	assert_int_equal(tier_image_block_status(img2, 0, 8 * OS, bs_cb, &b), 0);
	bs_wait(v, &b);
	expect(&b, 1, (uint64_t[]){ 8 * OS }, (uint32_t[]){ 0 });
	env_pump(v);
	assert_int_equal(tier_image_ready(img2), 1);
	bs_run(v, img2, 0, 8 * OS, &b);
	expect(&b, 1, (uint64_t[]){ 8 * OS }, (uint32_t[]){ HZ });
	tier_image_close(img2);
	env_free(v);
}

static void test_stat_error_is_data(void **state)
{
	struct env *v = env_new(NULL);
	struct tier_store_fault f = { .opcode_mask = 1u << TIER_STORE_STAT, .fail_nth = 2 };
	struct bs b;

	(void)state;
	tier_store_set_fault(v->base, &f);
	bs_run(v, v->img, 0, 4 * OS, &b);     /* the second object's STAT fails */
	expect(&b, 3, (uint64_t[]){ OS, OS, 2 * OS }, (uint32_t[]){ HZ, 0, HZ });
	tier_store_set_fault(v->base, NULL);
	env_free(v);
}

static void test_write_during_stat_is_data(void **state)
{
	struct env *v = env_new(NULL);
	struct sreq w = { .r = { .type = TIER_REQ_WRITE, .off = 2 * OS, .len = 4096,
				 .cb = sreq_cb } };
	char buf[4096] = { 1 };
	struct bs b = { 0 };

	(void)state;
	w.r.buf = buf;
	/* the STATs are queued; the write arrives before they complete */
	assert_int_equal(tier_image_block_status(v->img, 0, 4 * OS, bs_cb, &b), 0);
	assert_int_equal(tier_image_submit(v->img, &w.r), 0);
	bs_wait(v, &b);
	expect(&b, 3, (uint64_t[]){ 2 * OS, OS, OS }, (uint32_t[]){ HZ, 0, HZ });
	env_pump(v);
	assert_int_equal(w.done, 1);
	assert_int_equal(w.result, 0);
	env_free(v);
}

static void test_bounded_and_refused(void **state)
{
	struct env *v = env_new(NULL);
	struct bs b;

	(void)state;
	/* refused: cb never runs */
	memset(&b, 0, sizeof(b));
	assert_int_equal(tier_image_block_status(v->img, 0, 0, bs_cb, &b), -EINVAL);
	assert_int_equal(tier_image_block_status(v->img, 64 * OS, 1, bs_cb, &b), -EINVAL);
	assert_int_equal(tier_image_block_status(v->img, 63 * OS, 2 * OS, bs_cb, &b), -EINVAL);
	assert_int_equal(tier_image_block_status(v->img, UINT64_MAX - 10, 100, bs_cb, &b),
			 -EINVAL);
	assert_int_equal(tier_image_block_status(v->img, 0, 10, NULL, &b), -EINVAL);
	env_pump(v);
	assert_int_equal(b.done, 0);
	env_free(v);
}

static void test_at_most_max_objs(void **state)
{
	struct env *v = calloc(1, sizeof(*v));
	struct tier_mem_opts mo = { 0 };
	struct bs b;

	(void)state;
	/* an image of 300 objects (env_new's is 64) */
	v->now_ns = 1000000000ull;
	env_params(&v->p);
	v->isz = 300 * OS;
	assert_int_equal(tier_cq_create(NULL, NULL, &v->cq), 0);
	assert_int_equal(tier_store_mem_create("base", &mo, v->cq, &v->base), 0);
	assert_int_equal(tier_store_mem_create("cache", &mo, v->cq, &v->cache), 0);
	assert_int_equal(env_engine(v), 1);
	bs_run(v, v->img, 100, 300 * OS - 100, &b);
	expect(&b, 1, (uint64_t[]){ TIER_BLOCK_STATUS_MAX_OBJS * OS - 100 },
	       (uint32_t[]){ HZ });
	env_free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_is_one_hole),
		cmocka_unit_test(test_cached_and_base_objects),
		cmocka_unit_test(test_loading_image_is_data),
		cmocka_unit_test(test_stat_error_is_data),
		cmocka_unit_test(test_write_during_stat_is_data),
		cmocka_unit_test(test_bounded_and_refused),
		cmocka_unit_test(test_at_most_max_objs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
