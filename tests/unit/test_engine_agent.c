/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_engine_agent.c - the flush/evict agent: every flush and
 * evict mode transition with its hysteresis, the evict effort, ops in
 * flight per mode, min flush/evict ages (ignored in full mode), coldest
 * first for both policies, flush back-off when base latency climbs, and the
 * hitset archive (written every period, trimmed, reloaded at start).
 */
#include "test_engine_harness.h"

static struct tier_params agent_params(void)
{
	struct tier_params p;

	env_params(&p);
	p.target_max_bytes = 1ull << 40;       /* objects decide */
	p.target_max_objects = 100;
	p.cache_target_dirty_ratio = 0.4;
	p.cache_target_dirty_high_ratio = 0.6;
	p.cache_target_full_ratio = 0.8;
	p.cache_min_flush_age = 3600000;     /* nothing ages out in these tests */
	p.cache_min_evict_age = 3600000;
	p.agent_max_ops = 4;
	p.agent_max_low_ops = 2;
	return p;
}

static void write_objs(struct env *v, int from, int to)
{
	for (int i = from; i < to; i++)
		assert_int_equal(env_write(v, (uint64_t)i * OS, 512, (uint64_t)i), 0);
}

static void test_flush_modes_and_hysteresis(void **state)
{
	struct tier_params p = agent_params();
	struct env *v = env_new(&p);
	(void)state;

	write_objs(v, 0, 50);                    /* dirty ratio 0.50 */
	tier_engine_tick(v->e);
	assert_int_equal(env_stats(v).flush_mode, TIER_FLUSH_LOW);
	assert_int_equal(env_stats(v).dirty_ratio_ppm, 500000);
	p.cache_target_dirty_high_ratio = 0.49;
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).flush_mode, TIER_FLUSH_HIGH);
	p.cache_target_dirty_high_ratio = 0.51;  /* within the slop: stays high */
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).flush_mode, TIER_FLUSH_HIGH);
	p.cache_target_dirty_high_ratio = 0.53;
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).flush_mode, TIER_FLUSH_LOW);
	p.cache_target_dirty_ratio = 0.51;       /* within the slop: stays low */
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).flush_mode, TIER_FLUSH_LOW);
	p.cache_target_dirty_ratio = 0.53;
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).flush_mode, TIER_FLUSH_IDLE);
	p.cache_target_dirty_ratio = 0.51;       /* from idle the slop does not apply */
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).flush_mode, TIER_FLUSH_IDLE);
	assert_int_equal(env_stats(v).flushes, 0);   /* min age held them all */
	env_free(v);
}

static void test_evict_modes_effort_hysteresis(void **state)
{
	struct tier_params p = agent_params();
	struct env *v = env_new(&p);
	(void)state;

	write_objs(v, 0, 50);
	tier_engine_flush_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_stats(v).dirty_objects, 0);
	assert_int_equal(env_stats(v).evict_mode, TIER_EVICT_IDLE);
	p.cache_target_full_ratio = 0.45;        /* effort (0.5-0.45)/0.55 < 0.1 -> 10% */
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).evict_mode, TIER_EVICT_SOME);
	assert_int_equal(env_stats(v).evict_effort_pct, 10);
	p.cache_target_full_ratio = 0.51;
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).evict_mode, TIER_EVICT_SOME);
	p.cache_target_full_ratio = 0.53;
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).evict_mode, TIER_EVICT_IDLE);
	p.cache_target_full_ratio = 0.3;         /* (0.5-0.3)/0.7 = 28.6% */
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).evict_effort_pct, 29);
	p.target_max_objects = 40;               /* 1.25 -> full */
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).evict_mode, TIER_EVICT_FULL);
	assert_int_equal(env_stats(v).evict_effort_pct, 100);
	assert_int_equal(env_stats(v).evictions, 0);   /* nothing drained yet */
	env_free(v);
}

static void test_full_ignores_min_age_then_settles(void **state)
{
	struct tier_params p = agent_params();
	struct env *v = env_new(&p);
	(void)state;

	write_objs(v, 0, 50);
	p.target_max_objects = 40;               /* 1.25: full, ages ignored */
	env_set_params(v, &p);
	env_pump(v);
	struct tier_stats s = env_stats(v);
	/* full until <= 0.98, then some (ages honoured again): 39 remain, less
	 * the evictions already in flight when the mode changed */
	assert_true(s.cached_objects <= 39 && s.cached_objects >= 39 - 4);
	assert_int_equal(s.evict_mode, TIER_EVICT_SOME);
	assert_true(s.flushes >= 11);
	/* aged: some mode evicts down to the target minus the slop (0.78) */
	env_advance_ms(v, 3600001);
	env_pump(v);
	s = env_stats(v);
	assert_true(s.cached_objects <= 31 && s.cached_objects >= 31 - 4);
	assert_int_equal(s.evict_mode, TIER_EVICT_IDLE);
	env_free(v);
}

static void test_min_flush_age(void **state)
{
	struct tier_params p = agent_params();
	p.cache_min_flush_age = 10000;
	p.cache_target_dirty_ratio = 0.0;
	p.cache_target_dirty_high_ratio = 0.0;
	struct env *v = env_new(&p);
	(void)state;

	write_objs(v, 0, 4);
	env_advance_ms(v, 6000);
	write_objs(v, 4, 8);
	env_pump(v);
	assert_int_equal(env_stats(v).flushes, 0);
	env_advance_ms(v, 4001);                 /* the first four are 10 s old */
	env_pump(v);
	assert_int_equal(env_stats(v).flushes, 4);
	assert_int_equal(env_stats(v).dirty_objects, 4);
	struct tier_meta m;
	for (int i = 0; i < 8; i++)
		assert_int_equal(!!(cache_meta(v, (uint64_t)i, &m, NULL, 0) & TIER_META_F_DIRTY),
				 i >= 4);
	env_advance_ms(v, 6000);
	env_pump(v);
	assert_int_equal(env_stats(v).dirty_objects, 0);
	env_free(v);
}

static void test_ops_in_flight_per_mode(void **state)
{
	struct tier_params p = agent_params();
	struct tier_devmodel_params slow = { .read_latency_us = 1000, .write_latency_us = 1000 };
	struct env *v = env_new_vt(&p, &slow, NULL, true);
	(void)state;

	write_objs(v, 0, 50);                    /* low */
	env_pump(v);
	p.cache_min_flush_age = 0;
	env_set_params(v, &p);                   /* runs the agent, nothing completes */
	assert_int_equal(env_stats(v).flush_mode, TIER_FLUSH_LOW);
	assert_int_equal(env_stats(v).agent_ops_in_flight, 2);
	p.cache_target_dirty_high_ratio = 0.45;  /* high */
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).agent_ops_in_flight, 4);
	env_pump(v);
	/* high until <= 0.43, low until <= 0.38 (less what was in flight) */
	assert_true(env_stats(v).dirty_objects <= 38 && env_stats(v).dirty_objects >= 38 - 4);
	assert_int_equal(env_stats(v).flush_mode, TIER_FLUSH_IDLE);
	env_free(v);
}

static void test_evict_effort_bounds_ops(void **state)
{
	struct tier_params p = agent_params();
	p.cache_min_evict_age = 0;
	struct tier_devmodel_params slow = { .read_latency_us = 1000, .write_latency_us = 1000 };
	struct env *v = env_new_vt(&p, NULL, &slow, true);
	(void)state;

	write_objs(v, 0, 50);
	tier_engine_flush_all(v->e, NULL);
	env_pump(v);
	p.cache_target_full_ratio = 0.4;         /* (0.5-0.4)/0.6 = 17% of 4 ops -> 1 */
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).evict_effort_pct, 17);
	assert_int_equal(env_stats(v).agent_ops_in_flight, 1);
	env_pump(v);
	p.cache_target_full_ratio = 0.1;         /* (0.38-0.1)/0.9 = 31% -> 2 */
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).evict_effort_pct, 31);
	assert_int_equal(env_stats(v).agent_ops_in_flight, 2);
	p.target_max_objects = 20;               /* full -> all 4 */
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).evict_mode, TIER_EVICT_FULL);
	assert_int_equal(env_stats(v).agent_ops_in_flight, 4);
	env_free(v);
}

static void coldest_first(enum tier_evict_policy pol)
{
	struct tier_params p = agent_params();
	p.evict_policy = pol;
	p.cache_min_evict_age = 0;
	p.hit_set_count = 4;
	struct env *v = env_new(&p);
	uint8_t b[512];

	write_objs(v, 0, 8);
	tier_engine_flush_all(v->e, NULL);
	env_pump(v);
	/* objects 0..3 age out of every hitset; 4..7 are read again and again */
	for (int r = 0; r < 6; r++) {
		env_advance_ms(v, p.hit_set_period + 1);
		tier_engine_tick(v->e);
		env_pump(v);
	}
	for (int r = 0; r < 3; r++) {
		for (int i = 4; i < 8; i++)
			assert_int_equal(env_io(v, TIER_REQ_READ, (uint64_t)i * OS, 512, b, 0), 0);
		env_advance_ms(v, p.hit_set_period + 1);
		tier_engine_tick(v->e);
		env_pump(v);
	}
	for (int i = 4; i < 8; i++)
		assert_int_equal(env_io(v, TIER_REQ_READ, (uint64_t)i * OS, 512, b, 0), 0);
	assert_int_equal(env_stats(v).read_hits, 16);
	/* 8 cached, target 10 -> some mode down to 0.78 * 10 -> 4 evictions */
	p.target_max_objects = 10;
	p.cache_target_full_ratio = 0.5;
	env_set_params(v, &p);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 4);
	struct tier_meta m;
	for (int i = 0; i < 8; i++)
		assert_int_equal(cache_meta(v, (uint64_t)i, &m, NULL, 0) == -1, i < 4);
	env_free(v);
}

static void test_coldest_first_hitset(void **state)
{
	(void)state;
	coldest_first(TIER_EVICT_HITSET);
}

static void test_coldest_first_s3fifo(void **state)
{
	(void)state;
	coldest_first(TIER_EVICT_S3FIFO);
}

static void test_flush_coldest_first(void **state)
{
	struct tier_params p = agent_params();
	p.target_max_objects = 10;
	p.cache_target_full_ratio = 0.95;
	struct env *v = env_new(&p);
	uint8_t b[512];
	(void)state;

	write_objs(v, 0, 8);                     /* 0.8 dirty: high */
	for (int r = 0; r < 6; r++) {
		env_advance_ms(v, p.hit_set_period + 1);
		tier_engine_tick(v->e);
		env_pump(v);
	}
	for (int i = 4; i < 8; i++)
		assert_int_equal(env_io(v, TIER_REQ_READ, (uint64_t)i * OS, 512, b, 0), 0);
	p.cache_min_flush_age = 0;
	p.agent_max_ops = 1;
	p.agent_max_low_ops = 1;
	env_set_params(v, &p);
	env_pump(v);
	/* high until <= 0.58, low until <= 0.38: 5 flushed, the 4 cold ones first */
	assert_int_equal(env_stats(v).flushes, 5);
	struct tier_meta m;
	for (int i = 0; i < 4; i++)
		assert_int_equal(cache_meta(v, (uint64_t)i, &m, NULL, 0) & TIER_META_F_DIRTY, 0);
	env_free(v);
}

static void test_flush_backs_off_when_base_slows(void **state)
{
	struct tier_params p = agent_params();
	p.cache_mode = TIER_MODE_WRITEBACK;
	p.min_read_recency_for_promote = 5;      /* reads stay proxied */
	struct tier_devmodel_params hdd = { .read_latency_us = 1000, .write_latency_us = 1000,
					    .queue_depth = 1 };
	struct env *v = env_new_vt(&p, &hdd, NULL, true);
	uint8_t b[512];
	(void)state;

	write_objs(v, 0, 50);
	/* a quiet base: latency floor about 1 ms */
	for (int i = 50; i < 60; i++)
		assert_int_equal(env_io(v, TIER_REQ_READ, (uint64_t)i * OS, 512, b, 0), 0);
	p.cache_target_dirty_high_ratio = 0.45;
	p.cache_min_flush_age = 0;
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).agent_ops_in_flight, 4);
	env_pump(v);
	/* now a queue of client reads on a one-deep base: latency climbs */
	struct sreq rs[16];
	uint8_t bufs[16][512];
	for (int i = 0; i < 16; i++) {
		memset(&rs[i], 0, sizeof(rs[i]));
		rs[i].r = (struct tier_request){ .type = TIER_REQ_READ, .off = (uint64_t)(50 + i % 10) * OS,
						 .len = 512, .buf = bufs[i], .cb = sreq_cb };
		assert_int_equal(tier_image_submit(v->img, &rs[i].r), 0);
	}
	for (int k = 0; k < 200; k++) {
		tier_cq_drain(v->cq);
		env_vt_step(v);
	}
	for (int i = 0; i < 16; i++)
		assert_int_equal(rs[i].done, 1);
	write_objs(v, 0, 10);                    /* dirty again */
	p.cache_target_dirty_ratio = 0.04;
	p.cache_target_dirty_high_ratio = 0.05;
	env_set_params(v, &p);
	assert_int_equal(env_stats(v).flush_mode, TIER_FLUSH_HIGH);
	assert_int_equal(env_stats(v).agent_ops_in_flight, 2);   /* halved */
	env_free(v);
}

/*
 * A hot object written all the time while the agent flushes it: every flush
 * overlaps a write.  The flushes still clean what was not written again
 * (extents 8..15 here), and the agent rests on the object between tries.
 */
static void test_hot_object_flush_progresses(void **state)
{
	struct tier_params p = agent_params();
	p.promote_granularity = TIER_GRAN_EXTENT;
	p.cache_min_flush_age = 0;
	p.cache_target_dirty_ratio = 0.0;        /* anything dirty: flush, high */
	p.cache_target_dirty_high_ratio = 0.0;
	struct tier_devmodel_params hdd = { .read_latency_us = 5000, .write_latency_us = 5000 };
	struct tier_devmodel_params ssd = { .read_latency_us = 100, .write_latency_us = 100 };
	struct env *v = env_new_vt(&p, &hdd, &ssd, true);
	uint8_t *model = calloc(1, OS);
	struct tier_store_stats b0, b1;
	(void)state;

	for (int i = 8; i < 16; i++) {
		assert_int_equal(env_write(v, (uint64_t)i * 4096, 4096, (uint64_t)i), 0);
		model_write(model, (uint64_t)i * 4096, 4096, (uint64_t)i);
	}
	tier_store_get_stats(v->base, &b0);
	uint64_t t0 = v->now_ns;
	for (int i = 0; i < 2000; i++) {
		assert_int_equal(env_write(v, (uint64_t)(i % 4) * 4096, 4096, (uint64_t)i + 100), 0);
		model_write(model, (uint64_t)(i % 4) * 4096, 4096, (uint64_t)i + 100);
	}
	tier_store_get_stats(v->base, &b1);
	struct tier_stats s = env_stats(v);
	print_message("%.0f virtual ms: flushes %llu (partial %llu), base writes %llu, dirty %llu B\n",
		      (double)(v->now_ns - t0) / 1e6, (unsigned long long)s.flushes,
		      (unsigned long long)s.flush_partial,
		      (unsigned long long)(b1.ops[TIER_STORE_WRITE] - b0.ops[TIER_STORE_WRITE]),
		      (unsigned long long)s.dirty_bytes);
	assert_true(v->now_ns - t0 >= 100000000ull);   /* writes went on for > 100 ms */
	assert_true(s.flush_partial >= 1);
	assert_true(s.dirty_bytes <= 4 * 4096);        /* extents 8..15 are clean */
	env_advance_ms(v, 100);                        /* the agent's rest on it ends */
	env_pump(v);
	assert_int_equal(env_stats(v).dirty_objects, 0);
	env_check(v, model, 0, OS);
	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 0);
	env_check(v, model, 0, OS);
	free(model);
	env_free(v);
}

static size_t count_hitset_objects(struct env *v)
{
	struct tier_store_op op;
	int done = 0;
	size_t n;

	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_LIST;
	op.prefix = "tier.hitset.";
	op.cb = stat_cb;
	op.priv = &done;
	assert_int_equal(tier_store_submit(v->cache, &op), 0);
	while (!done)
		tier_cq_drain(v->cq);
	n = op.n_names;
	tier_store_list_free(op.names, op.n_names);
	return n;
}

/*
 * A cache full of dirty objects and a flush mode that does not flush
 * (dirty ratios at 1.0): with agent_evict_dirty the agent flushes its
 * coldest victims and evicts them, back under the full ratio, every byte
 * still reading back; with Ceph's agent (agent_evict_dirty = 0) nothing is
 * evicted.  Both granularities.
 */
static void dirty_victims(bool evict_dirty, bool extent)
{
	struct tier_params p = agent_params();
	struct env *v;
	uint8_t b[512], want[512];

	p.cache_target_dirty_ratio = 1.0;
	p.cache_target_dirty_high_ratio = 1.0;
	p.cache_min_evict_age = 0;
	p.target_max_objects = 50;
	p.agent_evict_dirty = evict_dirty;
	if (extent)
		p.promote_granularity = TIER_GRAN_EXTENT;
	v = env_new(&p);
	write_objs(v, 0, 45);                    /* full ratio 0.9, all dirty */
	assert_int_equal(env_stats(v).dirty_objects, 45);
	for (int t = 0; t < 50; t++) {
		tier_engine_tick(v->e);
		env_pump(v);
	}
	if (evict_dirty) {
		assert_true(env_stats(v).full_ratio_ppm <= 800000);
		assert_true(env_stats(v).evictions >= 5);
		assert_true(env_stats(v).flushes >= 5);
		assert_int_equal(env_stats(v).flush_mode, TIER_FLUSH_IDLE);
	} else {
		assert_int_equal(env_stats(v).evictions, 0);
		assert_int_equal(env_stats(v).cached_objects, 45);
	}
	for (int i = 0; i < 45; i++) {
		assert_int_equal(env_io(v, TIER_REQ_READ, (uint64_t)i * OS, 512, b, 0), 0);
		fill(want, 512, (uint64_t)i);
		assert_memory_equal(b, want, 512);
	}
	env_free(v);
}

static void test_dirty_victims_flushed_then_evicted(void **state)
{
	(void)state;
	dirty_victims(true, false);
	dirty_victims(true, true);
	dirty_victims(false, false);
	dirty_victims(false, true);
}

static void test_hitset_archive_trim_reload(void **state)
{
	struct tier_params p;
	env_params(&p);
	p.hit_set_count = 3;
	p.min_write_recency_for_promote = 2;
	struct env *v = env_new(&p);
	(void)state;

	for (int r = 0; r < 5; r++) {
		env_advance_ms(v, p.hit_set_period + 1);
		tier_engine_tick(v->e);
		env_pump(v);
	}
	assert_int_equal(env_stats(v).hitset_archives, 5);
	assert_int_equal(count_hitset_objects(v), 3);
	struct tier_hitset_info hi[TIER_HITSET_MAX_SETS];
	assert_int_equal(tier_engine_hitset_info(v->e, hi, TIER_HITSET_MAX_SETS), 4);
	assert_int_equal(hi[0].set, -1);   /* the current set, then the 3 kept archives */
	for (int i = 1; i < 4; i++) {
		assert_int_equal(hi[i].set, i - 1);
		assert_true(hi[i].end_ms <= hi[i - 1].start_ms);   /* newest first */
	}
	/* an access, archived, survives a restart */
	assert_int_equal(env_write(v, 7 * OS, 512, 1), 0);
	env_advance_ms(v, p.hit_set_period + 1);
	tier_engine_tick(v->e);
	env_pump(v);
	assert_int_equal(count_hitset_objects(v), 3);
	/* shutdown archives the current set at once, still trimmed to the count */
	assert_int_equal(env_write(v, 9 * OS, 512, 1), 0);
	assert_int_equal(tier_engine_archive_hitsets(v->e), 0);
	env_pump(v);
	assert_int_equal(env_stats(v).hitset_archives, 7);
	assert_int_equal(count_hitset_objects(v), 3);
	env_kill_engine(v);
	assert_int_equal(env_engine(v), 1);
	/* object 9, accessed just before shutdown, is in the newest reloaded set */
	assert_int_equal(env_write(v, 9 * OS, 512, 2), 0);   /* current: no */
	assert_int_equal(env_stats(v).promotions, 0);
	assert_int_equal(env_write(v, 9 * OS, 512, 3), 0);   /* current + newest archive */
	assert_int_equal(env_stats(v).promotions, 1);
	/* object 7's set is older: not consecutive from the newest, no promotion */
	assert_int_equal(env_write(v, 7 * OS, 512, 4), 0);
	assert_int_equal(env_write(v, 7 * OS, 512, 5), 0);
	assert_int_equal(env_stats(v).promotions, 1);
	env_free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flush_modes_and_hysteresis),
		cmocka_unit_test(test_evict_modes_effort_hysteresis),
		cmocka_unit_test(test_full_ignores_min_age_then_settles),
		cmocka_unit_test(test_min_flush_age),
		cmocka_unit_test(test_ops_in_flight_per_mode),
		cmocka_unit_test(test_evict_effort_bounds_ops),
		cmocka_unit_test(test_coldest_first_hitset),
		cmocka_unit_test(test_coldest_first_s3fifo),
		cmocka_unit_test(test_flush_coldest_first),
		cmocka_unit_test(test_flush_backs_off_when_base_slows),
		cmocka_unit_test(test_hot_object_flush_progresses),
		cmocka_unit_test(test_dirty_victims_flushed_then_evicted),
		cmocka_unit_test(test_hitset_archive_trim_reload),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
