/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_engine_durability.c - durability corners the main crash
 * script does not reach: trims and zeroes (whole-object drops, partial
 * zeroes of cached objects) with a crash at every store op (mem) and every
 * durable step (local), a flush that waited on a drop, and a FLUSH that
 * must wait for a sync an earlier FLUSH started.
 */
#include <ftw.h>
#include <time.h>
#include <unistd.h>

#include "test_engine_harness.h"

#define ISZ (64 * OS)

static uint64_t script_ops(struct tier_store *st)
{
	struct tier_store_stats s;
	uint64_t n = 0;

	tier_store_get_stats(st, &s);
	for (int i = 0; i < TIER_STORE_OPCODE_MAX; i++)
		n += s.ops[i];
	return n;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void local_stores(struct env *v, const char *dir, uint64_t crash_cache)
{
	char b[512], c[512];
	struct tier_local_opts bo = { .dir = b, .workers = 2 };
	struct tier_local_opts co = { .dir = c, .workers = 2, .crash_after_steps = crash_cache };

	snprintf(b, sizeof(b), "%s/base", dir);
	snprintf(c, sizeof(c), "%s/cache", dir);
	assert_int_equal(tier_store_local_create("base", &bo, v->cq, &v->base), 0);
	assert_int_equal(tier_store_local_create("cache", &co, v->cq, &v->cache), 0);
}

static void mkdtemp_template(char *dir)
{
	strcpy(dir, "/tmp/tier-engine-dur-XXXXXX");
}

/*
 * Trims and zeroes in the crash script: whole-object ones (drops) and
 * partial ones of cached objects, between writes, a flush and an eviction.
 * After a crash at every op of either store and a rebuild, every byte an
 * acknowledged op last set reads back; bytes a failed op touched are free.
 */
static const struct {
	enum tier_req_type t;
	uint64_t off, len;
} tz_ops[] = {
	{ TIER_REQ_WRITE, 0, 4096 },
	{ TIER_REQ_WRITE, 8192, 4096 },
	{ TIER_REQ_FLUSH, 0, 0 },             /* flush_all + evict of nothing dirty */
	{ TIER_REQ_TRIM, 0, OS },             /* whole cached object */
	{ TIER_REQ_WRITE, OS + 4096, 8192 },
	{ TIER_REQ_WRITE_ZEROES, OS + 4096, 4096 },
	{ TIER_REQ_WRITE, 2 * OS, OS },
	{ TIER_REQ_WRITE_ZEROES, 2 * OS, OS },
	{ TIER_REQ_WRITE, 16384, 4096 },
	{ TIER_REQ_TRIM, OS, 2048 },
	{ TIER_REQ_WRITE, 3 * OS + 100, 5000 },
};
#define TZ_N (sizeof(tz_ops) / sizeof(tz_ops[0]))

/* Returns how many ops failed. */
static int tz_script(struct env *v, enum tier_granularity g, uint8_t *model, uint8_t *care)
{
	struct tier_params p = v->p;
	uint8_t *b = malloc(OS);
	int failed = 0;

	p.promote_granularity = g;
	tier_engine_set_params(v->e, &p);
	for (size_t i = 0; i < TZ_N; i++) {
		uint64_t off = tz_ops[i].off, len = tz_ops[i].len;
		int rc;

		if (tz_ops[i].t == TIER_REQ_FLUSH) {
			tier_engine_flush_all(v->e, NULL);
			env_pump(v);
			continue;
		}
		fill(b, len, i + 40);
		rc = env_io(v, tz_ops[i].t, off, len, tz_ops[i].t == TIER_REQ_WRITE ? b : NULL, 0);
		if (rc == 0 && tz_ops[i].t == TIER_REQ_WRITE)
			memcpy(model + off, b, len);
		else if (rc == 0)
			memset(model + off, 0, len);
		memset(care + off, rc == 0, len);
		failed += rc != 0;
		env_pump(v);
	}
	free(b);
	return failed;
}

static void tz_verify(struct env *v, const uint8_t *model, const uint8_t *care)
{
	uint8_t *b = malloc(ISZ);

	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 4 * OS, b, 0), 0);
	for (uint64_t i = 0; i < 4 * OS; i++)
		if (care[i] && b[i] != model[i])
			fail_msg("byte %llu: %u, want %u", (unsigned long long)i, b[i], model[i]);
	free(b);
}

static void tz_crash(bool cache_store, enum tier_granularity g)
{
	uint8_t *model = calloc(1, ISZ), *care = calloc(1, ISZ);
	struct env *v = env_new(NULL);
	uint64_t total, before = script_ops(cache_store ? v->cache : v->base);
	int failed = 0;

	memset(care, 1, ISZ);
	assert_int_equal(tz_script(v, g, model, care), 0);
	total = script_ops(cache_store ? v->cache : v->base) - before;
	tz_verify(v, model, care);
	env_free(v);
	for (uint64_t k = 1; k <= total; k++) {
		struct tier_store_fault f = { .stop_after = k };

		memset(model, 0, ISZ);
		memset(care, 1, ISZ);
		v = env_new(NULL);
		tier_store_set_fault(cache_store ? v->cache : v->base, &f);
		failed += tz_script(v, g, model, care);
		env_kill_engine(v);
		tier_store_set_fault(v->cache, NULL);
		tier_store_set_fault(v->base, NULL);
		assert_int_equal(env_engine(v), 1);
		tz_verify(v, model, care);
		tier_engine_flush_all(v->e, NULL);
		env_pump(v);
		tier_engine_evict_all(v->e, NULL);
		env_pump(v);
		assert_int_equal(env_stats(v).cached_objects, 0);
		assert_int_equal(env_stats(v).dirty_bytes, 0);
		tz_verify(v, model, care);
		env_free(v);
	}
	assert_true(failed > 0);   /* the crashes did fail ops: the test can fail */
	free(model);
	free(care);
}

/* The same on the local backend, stopping after each durable step of the cache pool. */
static void test_crash_local_trim_zero(void **state)
{
	uint8_t *model = calloc(1, ISZ), *care = calloc(1, ISZ);
	int failed = 0;
	uint64_t k;
	char dir[64];
	(void)state;

	/* the script takes well under 120 durable steps of the cache pool */
	for (k = 1; k <= 120; k++) {
		struct env *v = calloc(1, sizeof(*v));
		mkdtemp_template(dir);
		assert_non_null(mkdtemp(dir));
		v->now_ns = 1000000000ull;
		v->threaded = true;
		env_params(&v->p);
		assert_int_equal(tier_cq_create(NULL, NULL, &v->cq), 0);
		local_stores(v, dir, k);
		assert_int_equal(env_engine(v), 1);
		memset(model, 0, ISZ);
		memset(care, 1, ISZ);
		failed += tz_script(v, k % 2 ? TIER_GRAN_OBJECT : TIER_GRAN_EXTENT, model, care);
		env_kill_engine(v);
		tier_store_destroy(v->base);
		tier_store_destroy(v->cache);
		local_stores(v, dir, 0);
		assert_int_equal(env_engine(v), 1);
		tz_verify(v, model, care);
		tier_engine_flush_all(v->e, NULL);
		env_pump(v);
		tier_engine_evict_all(v->e, NULL);
		env_pump(v);
		assert_int_equal(env_stats(v).cached_objects, 0);
		tz_verify(v, model, care);
		env_free(v);
		assert_int_equal(nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS), 0);
	}
	assert_true(failed > 0);
	free(model);
	free(care);
}

static void test_crash_trim_zero(void **state)
{
	(void)state;
	tz_crash(true, TIER_GRAN_OBJECT);
	tz_crash(true, TIER_GRAN_EXTENT);
	tz_crash(false, TIER_GRAN_OBJECT);
	tz_crash(false, TIER_GRAN_EXTENT);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * A FLUSH that arrives while an earlier FLUSH's sync of an acknowledged
 * write is still in flight must not answer before that write is durable:
 * it may not take "no UNSYNC flag left" for "nothing to sync".
 */
static void test_local_flush_waits_for_sync_in_flight(void **state)
{
	char dir[64];
	struct env *v = calloc(1, sizeof(*v));
	struct tier_store_fault slow = { .add_latency_us = 300000 };
	struct sreq f1 = { .r = { .type = TIER_REQ_FLUSH, .cb = sreq_cb } };
	struct sreq f2 = { .r = { .type = TIER_REQ_FLUSH, .cb = sreq_cb } };
	uint64_t t0, t2 = 0;
	(void)state;

	mkdtemp_template(dir);
	assert_non_null(mkdtemp(dir));
	v->now_ns = 1000000000ull;
	v->threaded = true;
	env_params(&v->p);
	v->p.min_write_recency_for_promote = 1;   /* the write proxies to base */
	assert_int_equal(tier_cq_create(NULL, NULL, &v->cq), 0);
	local_stores(v, dir, 0);
	assert_int_equal(env_engine(v), 1);
	assert_int_equal(env_write(v, 0, 4096, 1), 0);   /* acknowledged, not yet synced */
	tier_store_set_fault(v->base, &slow);              /* base syncs take 300 ms */
	assert_int_equal(tier_image_submit(v->img, &f1.r), 0);
	t0 = mono_ms();
	assert_int_equal(tier_image_submit(v->img, &f2.r), 0);
	for (int i = 0; i < 1000 && (!f1.done || !f2.done); i++) {
		if (!tier_cq_drain(v->cq))
			tier_cq_wait(v->cq, 20);
		tier_engine_tick(v->e);
		if (f2.done && !t2)
			t2 = mono_ms();
	}
	assert_int_equal(f1.done, 1);
	assert_int_equal(f2.done, 1);
	assert_int_equal(f1.result, 0);
	assert_int_equal(f2.result, 0);
	/* the second FLUSH waited for a durable base op, not just the kick */
	assert_true(t2 - t0 >= 250);
	tier_store_set_fault(v->base, NULL);
	env_free(v);
	assert_int_equal(nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS), 0);
}

/* Mem stores whose acks need syncs, as local's do (the engine then syncs them). */
static struct env *env_volatile_model(const struct tier_params *p, bool vt, const char *profile)
{
	struct tier_devmodel_params ssd;
	struct env *v = calloc(1, sizeof(*v));
	struct tier_mem_opts mo = { .virtual_time = vt };

	assert_non_null(v);
	assert_int_equal(tier_devmodel_profile(profile, &ssd), 0);
	if (vt)
		mo.model = ssd;
	v->now_ns = 1000000000ull;
	v->vt = vt;
	v->p = *p;
	assert_int_equal(tier_cq_create(NULL, NULL, &v->cq), 0);
	assert_int_equal(tier_store_mem_create("base", &mo, v->cq, &v->base), 0);
	assert_int_equal(tier_store_mem_create("cache", &mo, v->cq, &v->cache), 0);
	tier_store_set_volatile_acks(v->base, true);
	tier_store_set_volatile_acks(v->cache, true);
	if (vt) {
		tier_store_mem_advance(v->base, v->now_ns);
		tier_store_mem_advance(v->cache, v->now_ns);
	}
	assert_int_equal(env_engine(v), 1);
	return v;
}

static struct env *env_volatile(const struct tier_params *p, bool vt)
{
	return env_volatile_model(p, vt, "ssd");
}

/*
 * Power loss and removes.  An evict or drop of a cache copy is durable at
 * once (FUA): base is authoritative from then on, and a copy coming back
 * after a power cut would serve old bytes over newer base data.  A FLUSH
 * then has no cache barrier to send.  Base removes (whole-object trims of
 * uncached objects) are covered by the next FLUSH with one FUA REMOVE
 * barrier, counted when the remove has happened, not when it was sent.
 */
static uint64_t removes(struct tier_store *st)
{
	struct tier_store_stats s;

	tier_store_get_stats(st, &s);
	return s.ops[TIER_STORE_REMOVE];
}

static uint64_t fua_ops(struct tier_store *st, enum tier_store_opcode opc)
{
	struct tier_store_stats s;

	tier_store_get_stats(st, &s);
	return s.fua_ops[opc];
}

static void test_flush_covers_unsynced_removes(void **state)
{
	struct tier_params p;
	env_params(&p);
	struct env *v = env_volatile(&p, false);
	(void)state;

	assert_int_equal(env_write(v, 0, 4096, 1), 0);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	uint64_t c0 = removes(v->cache), b0 = removes(v->base);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	assert_int_equal(removes(v->cache), c0);          /* nothing removed: no barrier */

	tier_engine_evict_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_stats(v).cached_objects, 0);
	uint64_t c1 = removes(v->cache);
	assert_true(c1 > c0);                              /* the evict itself */
	assert_int_equal(fua_ops(v->cache, TIER_STORE_REMOVE), c1 - c0);   /* durable */
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	assert_int_equal(removes(v->cache), c1);          /* nothing left to cover */
	assert_int_equal(removes(v->base), b0);           /* none on base */

	/* a whole-object trim of an uncached object removes the base object */
	assert_int_equal(env_io(v, TIER_REQ_TRIM, 5 * OS, OS, NULL, 0), 0);
	assert_int_equal(removes(v->base), b0 + 1);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	assert_int_equal(removes(v->base), b0 + 2);       /* one barrier on base */
	assert_int_equal(fua_ops(v->base, TIER_STORE_REMOVE), 1);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	assert_int_equal(removes(v->base), b0 + 2);       /* covered: not again */
	env_free(v);
}

/* Pools whose acks are durable (rados): no barriers, no syncs at all. */
static void test_durable_acks_need_no_syncs(void **state)
{
	struct env *v = env_new(NULL);
	(void)state;

	assert_int_equal(env_write(v, 0, 4096, 1), 0);
	assert_int_equal(env_io(v, TIER_REQ_TRIM, 5 * OS, OS, NULL, 0), 0);
	uint64_t b0 = removes(v->base), r0 = fua_ops(v->cache, TIER_STORE_READ);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	assert_int_equal(removes(v->base), b0);
	assert_int_equal(fua_ops(v->cache, TIER_STORE_READ), r0);
	env_free(v);
}

/*
 * A FLUSH sent while a base remove is still in flight may not count that
 * remove as covered: its barrier can run before the remove does.  The
 * remove, once acknowledged, is covered by the next FLUSH's barrier.
 */
static void test_barrier_does_not_pass_remove_in_flight(void **state)
{
	struct tier_devmodel_params hdd;
	struct tier_params p;
	struct sreq t = { .r = { .type = TIER_REQ_TRIM, .off = 3 * OS, .len = OS, .cb = sreq_cb } };
	struct sreq f1 = { .r = { .type = TIER_REQ_FLUSH, .cb = sreq_cb } };
	(void)state;

	env_params(&p);
	assert_int_equal(tier_devmodel_profile("hdd", &hdd), 0);
	struct env *v = env_volatile_model(&p, true, "hdd");
	uint64_t b0 = removes(v->base);

	assert_int_equal(tier_image_submit(v->img, &t.r), 0);    /* base REMOVE in flight */
	assert_int_equal(tier_image_submit(v->img, &f1.r), 0);   /* FLUSH meanwhile */
	env_pump(v);
	assert_int_equal(t.done, 1);
	assert_int_equal(f1.done, 1);
	assert_int_equal(t.result, 0);
	uint64_t b1 = removes(v->base);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	/* the acknowledged remove is covered now, by a barrier sent after it */
	assert_int_equal(removes(v->base), b1 + 1);
	assert_true(b1 >= b0 + 1);
	env_free(v);
}

/*
 * FLUSH storms: 24 FLUSHes pipelined over 16 dirty objects cost 16 syncs,
 * not one set per FLUSH in flight (it was N * 2^(k-1) jobs), and all answer.
 */
static void test_flush_storm_syncs_each_object_once(void **state)
{
	enum { NOBJ = 16, NFL = 24 };
	struct tier_params p;
	struct sreq f[NFL];
	(void)state;

	env_params(&p);
	struct env *v = env_volatile(&p, true);
	for (int i = 0; i < NOBJ; i++)
		assert_int_equal(env_write(v, (uint64_t)i * OS, 4096, (uint64_t)i + 1), 0);
	assert_int_equal(env_stats(v).dirty_objects, NOBJ);
	uint64_t r0 = fua_ops(v->cache, TIER_STORE_READ);
	memset(f, 0, sizeof(f));
	for (int i = 0; i < NFL; i++) {
		f[i].r.type = TIER_REQ_FLUSH;
		f[i].r.cb = sreq_cb;
		assert_int_equal(tier_image_submit(v->img, &f[i].r), 0);
	}
	env_pump(v);
	for (int i = 0; i < NFL; i++) {
		assert_int_equal(f[i].done, 1);
		assert_int_equal(f[i].result, 0);
	}
	assert_int_equal(fua_ops(v->cache, TIER_STORE_READ) - r0, NOBJ);
	assert_int_equal(env_stats(v).syncs, NOBJ);
	/* a later FLUSH has nothing to sync */
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	assert_int_equal(fua_ops(v->cache, TIER_STORE_READ) - r0, NOBJ);
	env_free(v);
}

/*
 * A sync error sticks: a FLUSH whose sync failed fails, and so does every
 * FLUSH retried while the store keeps failing (a guest with werror=stop
 * retries exactly like that): a retry syncs the object again instead of
 * answering 0 with nothing synced.  The first retry after the store heals
 * syncs it and succeeds.  Two FLUSHes waiting on one failed sync both fail.
 */
static void test_sync_error_sticks_until_synced(void **state)
{
	struct tier_params p;
	struct tier_store_fault ff = { .opcode_mask = 1u << TIER_STORE_READ, .fail_fraction = 1.0 };
	struct sreq f1 = { .r = { .type = TIER_REQ_FLUSH, .cb = sreq_cb } };
	struct sreq f2 = { .r = { .type = TIER_REQ_FLUSH, .cb = sreq_cb } };
	(void)state;

	env_params(&p);
	struct env *v = env_volatile(&p, true);
	assert_int_equal(env_write(v, 0, 4096, 7), 0);
	uint64_t r0 = fua_ops(v->cache, TIER_STORE_READ);
	tier_store_set_fault(v->cache, &ff);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), -EIO);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), -EIO);   /* retried */
	assert_int_equal(fua_ops(v->cache, TIER_STORE_READ) - r0, 2);
	assert_int_equal(env_stats(v).sync_errors, 2);
	assert_int_equal(tier_image_submit(v->img, &f1.r), 0);
	assert_int_equal(tier_image_submit(v->img, &f2.r), 0);
	env_pump(v);
	assert_int_equal(f1.result, -EIO);
	assert_int_equal(f2.result, -EIO);     /* it waited on the same failed sync */
	assert_int_equal(fua_ops(v->cache, TIER_STORE_READ) - r0, 3);
	tier_store_set_fault(v->cache, NULL);
	/* healed: the retry syncs again and only then succeeds */
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	assert_int_equal(fua_ops(v->cache, TIER_STORE_READ) - r0, 4);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	assert_int_equal(fua_ops(v->cache, TIER_STORE_READ) - r0, 4);
	env_free(v);
}

/*
 * The same for a write proxied to base (no cache copy holds the object in
 * the map): the failed sync keeps the object flagged, a retry syncs again.
 */
static void test_sync_error_sticks_for_proxied_write(void **state)
{
	struct tier_params p;
	struct tier_store_fault ff = { .opcode_mask = 1u << TIER_STORE_READ, .fail_fraction = 1.0 };
	(void)state;

	env_params(&p);
	p.cache_mode = TIER_MODE_PROXY;
	struct env *v = env_volatile(&p, false);
	assert_int_equal(env_write(v, 3 * OS, 4096, 9), 0);
	assert_int_equal(env_stats(v).proxy_writes, 1);
	uint64_t r0 = fua_ops(v->base, TIER_STORE_READ);
	tier_store_set_fault(v->base, &ff);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), -EIO);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), -EIO);
	tier_store_set_fault(v->base, NULL);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	assert_int_equal(fua_ops(v->base, TIER_STORE_READ) - r0, 3);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	assert_int_equal(fua_ops(v->base, TIER_STORE_READ) - r0, 3);
	env_free(v);
}

/*
 * A cache pool that times out (an OSD down): one request pays op_timeout,
 * the next ones do not queue behind another timeout each.  Reads of clean
 * data are served from base; writes to cached objects fail at once with
 * EIO and change nothing; once a probe of the pool answers (tried once a
 * second), requests use it again.
 */
static uint64_t cache_ops(struct tier_store *st)
{
	struct tier_store_stats s;

	/* what a write to a cached object issues (the agent may read meanwhile) */
	tier_store_get_stats(st, &s);
	return s.ops[TIER_STORE_WRITE] + s.ops[TIER_STORE_ZERO] + s.ops[TIER_STORE_REMOVE];
}

static void test_cache_timeout_fails_fast(void **state)
{
	struct tier_params p;
	struct tier_store_fault down = { .fail_fraction = 1.0, .err = ETIMEDOUT };
	uint8_t *model = calloc(1, 64 * OS), *b = malloc(4096);
	(void)state;

	env_params(&p);
	struct env *v = env_new(&p);
	assert_int_equal(env_write(v, 0, 4096, 1), 0);            /* obj 0 dirty */
	model_write(model, 0, 4096, 1);
	assert_int_equal(env_write(v, OS, 4096, 2), 0);           /* obj 1 ... */
	model_write(model, OS, 4096, 2);
	tier_engine_flush_all(v->e, NULL);
	env_pump(v);
	assert_int_equal(env_write(v, 0, 4096, 3), 0);            /* obj 0 dirty again */
	model_write(model, 0, 4096, 3);
	assert_int_equal(env_stats(v).dirty_objects, 1);          /* obj 1 clean */

	tier_store_set_fault(v->cache, &down);
	assert_int_equal(env_write(v, OS + 8192, 4096, 4), -EIO);   /* pays the timeout */
	uint64_t c0 = cache_ops(v->cache);
	assert_int_equal(env_write(v, OS + 8192, 4096, 5), -EIO);   /* at once */
	assert_int_equal(env_io(v, TIER_REQ_READ, 0, 4096, b, 0), -EIO);   /* dirty copy */
	assert_int_equal(cache_ops(v->cache), c0);                   /* no cache write tried */
	env_check(v, model, OS, OS);                                 /* clean: from base */
	tier_store_set_fault(v->cache, NULL);
	assert_int_equal(env_write(v, OS + 8192, 4096, 5), -EIO);   /* still in the window */
	env_advance_ms(v, 1000);      /* a probe answers: the window ends early */
	env_pump(v);
	assert_int_equal(env_write(v, OS + 8192, 4096, 6), 0);
	model_write(model, OS + 8192, 4096, 6);
	env_check(v, model, 0, 2 * OS);
	free(model);
	free(b);
	env_free(v);
}

/*
 * Background syncs (more than 4096 unsynced objects) that fail are not
 * forgotten: their objects are synced again by the next FLUSH, which
 * answers only once that succeeds.
 */
static void test_background_sync_error_not_forgotten(void **state)
{
	enum { N = 4200 };
	struct tier_params p;
	struct tier_store_fault ff = { .opcode_mask = 1u << TIER_STORE_READ, .fail_fraction = 1.0 };
	(void)state;

	env_params(&p);
	p.promote_granularity = TIER_GRAN_EXTENT;
	p.target_max_bytes = (uint64_t)N * 2 * OS;
	struct env *v = calloc(1, sizeof(*v));
	struct tier_mem_opts mo = { 0 };

	assert_non_null(v);
	v->now_ns = 1000000000ull;
	v->p = p;
	v->isz = (uint64_t)N * OS;
	assert_int_equal(tier_cq_create(NULL, NULL, &v->cq), 0);
	assert_int_equal(tier_store_mem_create("base", &mo, v->cq, &v->base), 0);
	assert_int_equal(tier_store_mem_create("cache", &mo, v->cq, &v->cache), 0);
	tier_store_set_volatile_acks(v->base, true);
	tier_store_set_volatile_acks(v->cache, true);
	assert_int_equal(env_engine(v), 1);
	for (int i = 0; i < N; i++)
		assert_int_equal(env_write(v, (uint64_t)i * OS, 4096, (uint64_t)i), 0);
	assert_int_equal(env_stats(v).dirty_objects, N);
	tier_store_set_fault(v->cache, &ff);
	tier_engine_tick(v->e);        /* starts the background syncs */
	env_pump(v);
	uint64_t failed = env_stats(v).sync_errors;
	assert_true(failed >= 4096);
	tier_store_set_fault(v->cache, NULL);
	uint64_t r0 = fua_ops(v->cache, TIER_STORE_READ);
	assert_int_equal(env_io(v, TIER_REQ_FLUSH, 0, 0, NULL, 0), 0);
	/* every object the background failed to sync is synced now */
	assert_int_equal(fua_ops(v->cache, TIER_STORE_READ) - r0, N);
	env_free(v);
}

/*
 * A flush that starts while a whole-object TRIM's drop runs (it waits for
 * the exclusive op) finds the object gone when it resumes: it ends quietly,
 * it does not read a removed object and call that a cache pool failure.
 */
static void test_flush_waiting_on_drop(void **state)
{
	struct env *v = env_new(NULL);
	struct sreq t = { .r = { .type = TIER_REQ_TRIM, .off = OS, .len = OS, .cb = sreq_cb } };
	uint8_t *b = malloc(OS), *zero = calloc(1, OS);
	struct tier_stats s;
	(void)state;

	assert_int_equal(env_write(v, OS + 4096, 4096, 3), 0);
	env_pump(v);
	assert_int_equal(env_stats(v).dirty_objects, 1);
	assert_int_equal(tier_image_submit(v->img, &t.r), 0);   /* drop in flight */
	tier_engine_flush_all(v->e, NULL);                      /* flush waits for it */
	env_pump(v);
	assert_int_equal(t.done, 1);
	assert_int_equal(t.result, 0);
	s = env_stats(v);
	assert_int_equal(s.cache_errors, 0);
	assert_int_equal(s.flush_failed, 0);
	assert_int_equal(s.cached_objects, 0);
	assert_int_equal(s.dirty_bytes, 0);
	assert_int_equal(env_io(v, TIER_REQ_READ, OS, OS, b, 0), 0);
	assert_memory_equal(b, zero, OS);
	free(b);
	free(zero);
	env_free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crash_trim_zero),
		cmocka_unit_test(test_crash_local_trim_zero),
		cmocka_unit_test(test_flush_waiting_on_drop),
		cmocka_unit_test(test_flush_covers_unsynced_removes),
		cmocka_unit_test(test_barrier_does_not_pass_remove_in_flight),
		cmocka_unit_test(test_durable_acks_need_no_syncs),
		cmocka_unit_test(test_flush_storm_syncs_each_object_once),
		cmocka_unit_test(test_sync_error_sticks_until_synced),
		cmocka_unit_test(test_sync_error_sticks_for_proxied_write),
		cmocka_unit_test(test_background_sync_error_not_forgotten),
		cmocka_unit_test(test_cache_timeout_fails_fast),
		cmocka_unit_test(test_local_flush_waits_for_sync_in_flight),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
