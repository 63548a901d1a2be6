/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_stranded.c - stranded cache objects (libtier/stranded.c) on
 * mem stores: what the scan counts as stranded (and what it must leave
 * alone: an image's own objects, tier.* objects, foreign names), flush
 * writing only dirty extents and removing only afterwards, drop, the
 * clean-only pass, the version guard, and the round trip through the
 * engine: dirty data of an image that left the config (or shrank) is
 * flushed, and the image re-added reads it back.
 */
#include "test_engine_harness.h"

#define ES 4096u

static void done_cb(struct tier_store_op *op)
{
	*(int *)op->priv = 1;
}

static int run(struct tier_store *st, struct tier_cq *cq, struct tier_store_op *op)
{
	int done = 0;

	op->cb = done_cb;
	op->priv = &done;
	assert_int_equal(tier_store_submit(st, op), 0);
	while (!done)
		tier_cq_drain(cq);
	return op->result;
}

/* Put an object with data byte `fill_byte` over len bytes and the given meta. */
static void put(struct tier_store *st, struct tier_cq *cq, const char *oid, uint64_t len,
		int fill_byte, const struct tier_meta *m, uint64_t version)
{
	struct tier_store_op op;
	uint8_t meta[TIER_META_MAX];
	void *buf = malloc(len);
	int ml = 0;

	memset(buf, fill_byte, len);
	if (m) {
		ml = tier_meta_encode(m, meta, sizeof(meta));
		assert_true(ml > 0);
	}
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_WRITE;
	snprintf(op.oid, sizeof(op.oid), "%s", oid);
	op.len = len;
	op.buf = buf;
	if (m) {
		op.flags = TIER_STORE_F_META;
		op.meta = meta;
		op.meta_len = (uint32_t)ml;
		op.version = version;
	}
	assert_true(run(st, cq, &op) >= 0);
	free(buf);
}

static bool exists(struct tier_store *st, struct tier_cq *cq, const char *oid)
{
	struct tier_store_op op;

	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_STAT;
	snprintf(op.oid, sizeof(op.oid), "%s", oid);
	return run(st, cq, &op) == 0;
}

static void get(struct tier_store *st, struct tier_cq *cq, const char *oid, uint64_t off,
		uint64_t len, void *buf)
{
	struct tier_store_op op;

	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_READ;
	snprintf(op.oid, sizeof(op.oid), "%s", oid);
	op.off = off;
	op.len = len;
	op.buf = buf;
	assert_int_equal(run(st, cq, &op), (int)len);
}

struct pools {
	struct tier_cq *cq;
	struct tier_store *base, *cache;
};

static void pools_new(struct pools *p)
{
	struct tier_mem_opts o = { 0 };

	assert_int_equal(tier_cq_create(NULL, NULL, &p->cq), 0);
	assert_int_equal(tier_store_mem_create("base", &o, p->cq, &p->base), 0);
	assert_int_equal(tier_store_mem_create("cache", &o, p->cq, &p->cache), 0);
}

static void pools_free(struct pools *p)
{
	tier_store_destroy(p->base);
	tier_store_destroy(p->cache);
	tier_cq_destroy(p->cq);
}

/* Extent-mode meta of an OS object: valid and dirty bit lists (-1 ends). */
static struct tier_meta ext_meta(uint64_t *v, uint64_t *d, const int *valid, const int *dirty,
				 uint64_t version)
{
	struct tier_meta m = { .version = version, .flags = TIER_META_F_EXTENTS,
			       .object_size = OS, .extent_size = ES, .nbits = OS / ES,
			       .valid = v, .dirty = d };

	memset(v, 0, 8 * tier_meta_words(m.nbits));
	memset(d, 0, 8 * tier_meta_words(m.nbits));
	for (; *valid >= 0; valid++)
		v[*valid / 64] |= 1ull << (*valid % 64);
	for (; *dirty >= 0; dirty++) {
		d[*dirty / 64] |= 1ull << (*dirty % 64);
		m.flags |= TIER_META_F_DIRTY;
	}
	return m;
}

static const struct tier_stranded_obj *find(const struct tier_stranded_report *r, const char *oid)
{
	for (size_t i = 0; i < r->n_objs; i++)
		if (!strcmp(r->objs[i].oid, oid))
			return &r->objs[i];
	return NULL;
}

static const struct tier_stranded_obj *must(const struct tier_stranded_report *r, const char *oid)
{
	const struct tier_stranded_obj *o = find(r, oid);

	if (!o) {
		fail_msg("%s is not in the report", oid);
		abort();
	}
	return o;
}

/* What is stranded, what is not, and how it is counted. */
static void test_scan(void **state)
{
	struct tier_meta clean = { .version = 3, .object_size = OS };
	struct tier_meta dirty = { .version = 4, .flags = TIER_META_F_DIRTY, .object_size = OS };
	struct tier_meta incomplete = { .version = 1, .flags = TIER_META_F_INCOMPLETE,
					.object_size = OS };
	struct tier_stranded_image imgs[] = {
		{ .name = "keep", .object_prefix = "rbd_data.keep", .size = 2 * OS - 512 },
	};
	struct tier_stranded_report *r;
	const struct tier_stranded_obj *o;
	struct pools p;

	(void)state;
	pools_new(&p);
	put(p.cache, p.cq, "rbd_data.keep.0000000000000000", OS, 1, &dirty, 4);   /* its own */
	put(p.cache, p.cq, "rbd_data.keep.0000000000000001", OS, 1, &dirty, 4);   /* its own (last) */
	put(p.cache, p.cq, "rbd_data.keep.0000000000000002", OS, 1, &clean, 3);   /* past end */
	put(p.cache, p.cq, "rbd_data.keep.0000000000000007", OS, 1, &dirty, 4);   /* past end */
	put(p.cache, p.cq, "rbd_data.gone.0000000000000000", OS, 2, &clean, 3);
	put(p.cache, p.cq, "rbd_data.gone.0000000000000001", OS, 2, &dirty, 4);
	put(p.cache, p.cq, "rbd_data.gone.0000000000000002", OS, 2, NULL, 0);     /* no meta */
	put(p.cache, p.cq, "rbd_data.gone.0000000000000003", OS, 2, &incomplete, 1);
	/* an image named "keep.0000000000000001" is not image keep */
	put(p.cache, p.cq, "rbd_data.keep.0000000000000001.0000000000000000", OS, 3, &clean, 3);
	put(p.cache, p.cq, "tier.hitset.0000000000000001", 100, 4, NULL, 0);
	put(p.cache, p.cq, "tier.sync-barrier", 100, 4, NULL, 0);
	put(p.cache, p.cq, "junk", 100, 4, NULL, 0);
	put(p.cache, p.cq, "rbd_data.gone.00000000000000XY", 100, 4, NULL, 0);

	assert_int_equal(tier_stranded_scan(p.cache, p.cq, OS, imgs, 1, &r), 0);
	assert_int_equal(r->n_ignored, 2);
	assert_int_equal(r->n_objs, 7);
	assert_null(find(r, "rbd_data.keep.0000000000000000"));
	assert_null(find(r, "rbd_data.keep.0000000000000001"));
	assert_null(find(r, "tier.hitset.0000000000000001"));
	assert_int_equal(r->n_dirty, 2);
	assert_int_equal(r->dirty_bytes, 2 * OS);
	assert_int_equal(r->n_groups, 3);
	/* groups sorted by prefix, objects by number */
	assert_string_equal(r->groups[0].prefix, "rbd_data.gone");
	assert_null(r->groups[0].image);
	assert_int_equal(r->groups[0].n, 4);
	assert_int_equal(r->groups[0].n_dirty, 1);
	assert_int_equal(r->groups[0].n_clean, 3);
	assert_string_equal(r->groups[1].prefix, "rbd_data.keep");
	assert_string_equal(r->groups[1].image, "keep");
	assert_int_equal(r->groups[1].image_size, 2 * OS - 512);
	assert_int_equal(r->groups[1].n, 2);
	assert_int_equal(r->groups[1].n_dirty, 1);
	assert_string_equal(r->objs[r->groups[1].first].oid, "rbd_data.keep.0000000000000002");
	assert_string_equal(r->groups[2].prefix, "rbd_data.keep.0000000000000001");
	assert_null(r->groups[2].image);
	o = must(r, "rbd_data.gone.0000000000000002");
	assert_true(o->bad_meta && !o->dirty);
	o = must(r, "rbd_data.gone.0000000000000003");
	assert_true(o->bad_meta && !o->dirty);
	o = must(r, "rbd_data.gone.0000000000000001");
	assert_true(o->dirty && !o->nbits);
	assert_int_equal(o->dirty_bytes, OS);
	assert_int_equal(o->version, 4);
	tier_stranded_free(r);
	pools_free(&p);
}

/* Flush writes only the dirty extents, durably, then removes the copy. */
static void test_flush_extents(void **state)
{
	uint64_t v[4], d[4];
	static const int valid[] = { 0, 1, 2, 5, 15, -1 }, dirty[] = { 1, 5, 15, -1 };
	struct tier_meta m = ext_meta(v, d, valid, dirty, 9);
	struct tier_stranded_report *r;
	struct tier_stranded_result res;
	struct pools p;
	uint8_t *b = malloc(OS);

	(void)state;
	pools_new(&p);
	put(p.base, p.cq, "rbd_data.x.0000000000000004", OS, 0x11, NULL, 0);
	put(p.cache, p.cq, "rbd_data.x.0000000000000004", OS, 0x22, &m, 9);
	assert_int_equal(tier_stranded_scan(p.cache, p.cq, OS, NULL, 0, &r), 0);
	assert_int_equal(r->n_objs, 1);
	assert_int_equal(r->objs[0].nbits, OS / ES);
	assert_int_equal(r->dirty_bytes, 3 * ES);
	assert_int_equal(tier_stranded_resolve(p.base, p.cache, p.cq, r, TIER_STRANDED_FLUSH,
					       NULL, NULL, &res), 0);
	assert_int_equal(res.flushed, 1);
	assert_int_equal(res.flushed_bytes, 3 * ES);
	assert_int_equal(res.removed, 1);
	assert_int_equal(res.failed, 0);
	assert_true(r->objs[0].done);
	assert_false(exists(p.cache, p.cq, "rbd_data.x.0000000000000004"));
	get(p.base, p.cq, "rbd_data.x.0000000000000004", 0, OS, b);
	for (uint64_t i = 0; i < OS / ES; i++) {
		int want = (i == 1 || i == 5 || i == 15) ? 0x22 : 0x11;   /* valid-clean: untouched */
		for (uint64_t k = 0; k < ES; k++)
			assert_int_equal(b[i * ES + k], want);
	}
	tier_stranded_free(r);
	/* nothing left: a second scan is empty */
	assert_int_equal(tier_stranded_scan(p.cache, p.cq, OS, NULL, 0, &r), 0);
	assert_int_equal(r->n_objs, 0);
	tier_stranded_free(r);
	free(b);
	pools_free(&p);
}

/* CLEAN leaves dirty copies; DROP removes them and counts what it discards. */
static void test_clean_then_drop(void **state)
{
	struct tier_meta clean = { .version = 3, .object_size = OS };
	struct tier_meta dirty = { .version = 4, .flags = TIER_META_F_DIRTY, .object_size = OS };
	struct tier_stranded_report *r;
	struct tier_stranded_result res;
	struct pools p;

	(void)state;
	pools_new(&p);
	put(p.cache, p.cq, "rbd_data.g.0000000000000000", OS, 5, &clean, 3);
	put(p.cache, p.cq, "rbd_data.g.0000000000000001", OS, 6, &dirty, 4);
	put(p.cache, p.cq, "rbd_data.g.0000000000000002", OS, 6, NULL, 0);
	assert_int_equal(tier_stranded_scan(p.cache, p.cq, OS, NULL, 0, &r), 0);
	assert_int_equal(tier_stranded_resolve(NULL, p.cache, p.cq, r, TIER_STRANDED_CLEAN,
					       NULL, NULL, &res), 0);
	assert_int_equal(res.removed, 2);
	assert_int_equal(res.dropped_dirty, 0);
	assert_false(exists(p.cache, p.cq, "rbd_data.g.0000000000000000"));
	assert_true(exists(p.cache, p.cq, "rbd_data.g.0000000000000001"));
	assert_false(exists(p.cache, p.cq, "rbd_data.g.0000000000000002"));
	/* DROP on the same report: only the dirty one is left to do */
	assert_int_equal(tier_stranded_resolve(NULL, p.cache, p.cq, r, TIER_STRANDED_DROP,
					       NULL, NULL, &res), 0);
	assert_int_equal(res.removed, 1);
	assert_int_equal(res.dropped_dirty, 1);
	assert_int_equal(res.dropped_dirty_bytes, OS);
	assert_false(exists(p.cache, p.cq, "rbd_data.g.0000000000000001"));
	assert_false(exists(p.base, p.cq, "rbd_data.g.0000000000000001"));
	/* FLUSH needs a base pool */
	assert_int_equal(tier_stranded_resolve(NULL, p.cache, p.cq, r, TIER_STRANDED_FLUSH,
					       NULL, NULL, &res), -EINVAL);
	tier_stranded_free(r);
	pools_free(&p);
}

/* An object rewritten after the scan is not removed (version guard). */
static void test_guard(void **state)
{
	struct tier_meta clean = { .version = 3, .object_size = OS };
	struct tier_stranded_report *r;
	struct tier_stranded_result res;
	struct pools p;

	(void)state;
	pools_new(&p);
	put(p.cache, p.cq, "rbd_data.h.0000000000000000", OS, 5, &clean, 3);
	assert_int_equal(tier_stranded_scan(p.cache, p.cq, OS, NULL, 0, &r), 0);
	clean.version = 8;
	put(p.cache, p.cq, "rbd_data.h.0000000000000000", OS, 5, &clean, 8);
	assert_int_equal(tier_stranded_resolve(NULL, p.cache, p.cq, r, TIER_STRANDED_CLEAN,
					       NULL, NULL, &res), -ECANCELED);
	assert_int_equal(res.failed, 1);
	assert_int_equal(res.removed, 0);
	assert_true(exists(p.cache, p.cq, "rbd_data.h.0000000000000000"));
	tier_stranded_free(r);
	pools_free(&p);
}

/*
 * The engine leaves dirty data in the cache (crash); the image leaves the
 * config (or shrinks): the scan finds exactly the dirty objects, flush
 * writes them to base, and the image opened again reads what was written.
 */
static void round_trip(enum tier_granularity gran, bool shrink)
{
	struct tier_params p;
	struct tier_stranded_image shrunk = { .name = "img", .object_prefix = "rbd_data.test",
					      .size = 4 * OS };
	struct tier_stranded_report *r;
	struct tier_stranded_result res;
	uint64_t isz = 64 * OS;
	uint8_t *model = calloc(1, isz);
	struct env *v;

	env_params(&p);
	p.promote_granularity = gran;
	p.target_max_bytes = 1024 * OS;   /* the agent stays idle: data stays dirty */
	v = env_new(&p);
	assert_int_equal(env_write(v, 0, 4096, 1), 0);
	model_write(model, 0, 4096, 1);
	assert_int_equal(env_write(v, 9 * OS + 8192, 3 * 4096, 2), 0);
	model_write(model, 9 * OS + 8192, 3 * 4096, 2);
	assert_int_equal(env_write(v, 20 * OS - 4096, 8192, 3), 0);   /* two objects */
	model_write(model, 20 * OS - 4096, 8192, 3);
	assert_true(env_stats(v).dirty_objects >= 4);
	env_kill_engine(v);

	assert_int_equal(tier_stranded_scan(v->cache, v->cq, OS, shrink ? &shrunk : NULL,
					    shrink ? 1 : 0, &r), 0);
	assert_int_equal(r->n_objs, shrink ? 3 : 4);   /* objects 0 and 9, 19, 20 */
	assert_int_equal(r->n_dirty, shrink ? 3 : 4);
	if (gran == TIER_GRAN_EXTENT)
		assert_int_equal(r->dirty_bytes, shrink ? 5 * 4096 : 6 * 4096);
	else
		assert_int_equal(r->dirty_bytes, (shrink ? 3 : 4) * OS);
	assert_int_equal(r->n_groups, 1);
	if (shrink)
		assert_string_equal(r->groups[0].image, "img");
	assert_int_equal(tier_stranded_resolve(v->base, v->cache, v->cq, r, TIER_STRANDED_FLUSH,
					       NULL, NULL, &res), 0);
	assert_int_equal(res.flushed, shrink ? 3 : 4);
	assert_int_equal(res.failed, 0);
	tier_stranded_free(r);

	/* open the whole image again: everything reads back */
	assert_int_equal(env_engine(v), 1);
	env_check(v, model, 0, isz);
	env_free(v);
	free(model);
}

static void test_round_trip_object(void **state)
{
	(void)state;
	round_trip(TIER_GRAN_OBJECT, false);
}

static void test_round_trip_extent(void **state)
{
	(void)state;
	round_trip(TIER_GRAN_EXTENT, false);
}

static void test_round_trip_shrunk(void **state)
{
	(void)state;
	round_trip(TIER_GRAN_EXTENT, true);
	round_trip(TIER_GRAN_OBJECT, true);
}

/*
 * Without the clean-up a re-added image adopts a stale clean copy: base
 * changed while the image was away, and the image must read the new base.
 */
static void test_clean_not_adopted(void **state)
{
	struct tier_stranded_report *r;
	struct tier_stranded_result res;
	uint8_t *buf = malloc(OS);
	struct env *v = env_new(NULL);

	(void)state;
	assert_int_equal(env_write(v, 0, 4096, 7), 0);
	assert_int_equal(tier_engine_flush_all(v->e, NULL), 0);
	env_pump(v);
	assert_int_equal(env_stats(v).dirty_objects, 0);
	assert_int_equal(env_stats(v).cached_objects, 1);
	env_kill_engine(v);
	/* image gone from the config: the start-up pass removes its clean copy */
	assert_int_equal(tier_stranded_scan(v->cache, v->cq, OS, NULL, 0, &r), 0);
	assert_int_equal(r->n_objs, 1);
	assert_int_equal(r->n_dirty, 0);
	assert_int_equal(tier_stranded_resolve(v->base, v->cache, v->cq, r, TIER_STRANDED_CLEAN,
					       NULL, NULL, &res), 0);
	assert_int_equal(res.removed, 1);
	tier_stranded_free(r);
	/* base changes behind tierd's back; the image comes back */
	put(v->base, v->cq, "rbd_data.test.0000000000000000", OS, 0x5a, NULL, 0);
	assert_int_equal(env_engine(v), 1);
	assert_int_equal(env_io(v, TIER_REQ_READ, 0, OS, buf, 0), 0);
	for (uint64_t i = 0; i < OS; i++)
		assert_int_equal(buf[i], 0x5a);
	env_free(v);
	free(buf);
}

/*
 * Power cuts (mem power-cut model) at every step of a flush: afterwards
 * either the cache still holds the dirty copy (flush again) or base holds
 * the dirty data; never neither.  After a complete flush a cut that keeps
 * nothing unsynced shows the data in base and the cache copy gone (the
 * pool barrier), so no stale copy can come back.
 */
static void test_flush_power_cut(void **state)
{
	uint64_t v[4], d[4];
	static const int valid[] = { 0, 3, 4, 9, -1 }, dirty[] = { 3, 4, 9, -1 };
	struct tier_meta m = ext_meta(v, d, valid, dirty, 5);
	static const char oid[] = "rbd_data.pc.0000000000000002";
	uint8_t *b = malloc(OS);
	bool completed = false;

	(void)state;
	for (uint64_t stop = 1; !completed && stop < 200; stop++) {
		struct tier_mem_opts o = { .powercut_model = true };
		struct tier_stranded_report *r = NULL;
		struct tier_stranded_result res;
		uint64_t clock = 0;
		struct pools p;

		assert_int_equal(tier_cq_create(NULL, NULL, &p.cq), 0);
		assert_int_equal(tier_store_mem_create("base", &o, p.cq, &p.base), 0);
		assert_int_equal(tier_store_mem_create("cache", &o, p.cq, &p.cache), 0);
		put(p.base, p.cq, oid, OS, 0x33, NULL, 0);
		put(p.cache, p.cq, oid, OS, 0x44, &m, 5);
		assert_int_equal(tier_store_mem_power_cut(p.base, TIER_MEM_CUT_KEEP_ALL, 0), 0);
		assert_int_equal(tier_store_mem_power_cut(p.cache, TIER_MEM_CUT_KEEP_ALL, 0), 0);

		tier_store_mem_set_crash_clock(p.base, &clock, stop);
		tier_store_mem_set_crash_clock(p.cache, &clock, stop);
		if (tier_stranded_scan(p.cache, p.cq, OS, NULL, 0, &r) == 0)
			tier_stranded_resolve(p.base, p.cache, p.cq, r, TIER_STRANDED_FLUSH,
					      NULL, NULL, &res);
		completed = clock < stop;
		tier_stranded_free(r);
		tier_store_mem_set_crash_clock(p.base, NULL, 0);
		tier_store_mem_set_crash_clock(p.cache, NULL, 0);
		assert_int_equal(tier_store_mem_power_cut(p.base, TIER_MEM_CUT_KEEP_NONE, 0), 0);
		assert_int_equal(tier_store_mem_power_cut(p.cache, TIER_MEM_CUT_KEEP_NONE, 0), 0);

		if (exists(p.cache, p.cq, oid)) {
			assert_false(completed);   /* the barrier makes the remove durable */
			/* the copy is whole and still dirty: a later flush finds it */
			assert_int_equal(tier_stranded_scan(p.cache, p.cq, OS, NULL, 0, &r), 0);
			assert_int_equal(r->n_dirty, 1);
			assert_int_equal(r->dirty_bytes, 3 * ES);
			tier_stranded_free(r);
		} else {
			get(p.base, p.cq, oid, 0, OS, b);
			for (uint64_t i = 0; i < OS / ES; i++) {
				int want = (i == 3 || i == 4 || i == 9) ? 0x44 : 0x33;
				for (uint64_t k = 0; k < ES; k += 512)
					assert_int_equal(b[i * ES + k], want);
			}
		}
		pools_free(&p);
	}
	assert_true(completed);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scan),
		cmocka_unit_test(test_flush_extents),
		cmocka_unit_test(test_clean_then_drop),
		cmocka_unit_test(test_guard),
		cmocka_unit_test(test_flush_power_cut),
		cmocka_unit_test(test_round_trip_object),
		cmocka_unit_test(test_round_trip_extent),
		cmocka_unit_test(test_round_trip_shrunk),
		cmocka_unit_test(test_clean_not_adopted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
