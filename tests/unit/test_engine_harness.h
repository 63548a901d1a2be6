/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_engine_harness.h - shared by the engine's cmocka tests: an
 * engine over two mem stores with a hand-driven clock, and synchronous
 * helpers that submit a request and pump completions until it is done.
 */
#ifndef TEST_ENGINE_HARNESS_H
#define TEST_ENGINE_HARNESS_H

#undef NDEBUG
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "tier/engine.h"
#include "tier/meta.h"

#define MiB (1024ull * 1024)
#define OS (64 * 1024ull)          /* object size used by the tests */

struct env {
	struct tier_cq *cq;
	struct tier_store *base, *cache;
	struct tier_engine *e;
	struct tier_image *img;
	struct tier_params p;
	uint64_t now_ns;
	uint64_t isz;               /* image size, 0 = 64 objects */
	bool vt;
	bool threaded;              /* local backend: completions from workers */
};

static inline uint64_t env_clock(void *arg)
{
	return ((struct env *)arg)->now_ns;
}

static inline void env_params(struct tier_params *p)
{
	tier_params_default(p);
	p->object_size = OS;
	p->extent_size = 4096;
	p->target_max_bytes = 64 * OS;
	p->min_read_recency_for_promote = 0;
	p->min_write_recency_for_promote = 0;
	/* the recency rule as set, room or not (admit_when_room has its own tests) */
	p->admit_when_room = 0;
	p->hit_set_period = 1000;
	/*
	 * Most tests want an admitted write miss to land in the cache at once
	 * (object DIRTY); the default, proxy-then-promote, has its own tests.
	 */
	p->write_miss = TIER_WMISS_PROMOTE;
	/* object granularity unless a test is about extents (the default is extent) */
	p->promote_granularity = TIER_GRAN_OBJECT;
	/* unthrottled unless a test is about the throttles (default: Ceph's 5M/25) */
	p->promote_max_bytes_sec = 0;
	p->promote_max_objects_sec = 0;
}

/* Virtual time: move the clock to the next store completion, if any. */
static inline bool env_vt_step(struct env *v)
{
	uint64_t a, b, t;

	if (!v->vt)
		return false;
	a = tier_store_mem_next_due(v->base);
	b = tier_store_mem_next_due(v->cache);
	t = a < b ? a : b;
	if (t == UINT64_MAX)
		return false;
	if (t > v->now_ns)
		v->now_ns = t;
	tier_store_mem_advance(v->base, v->now_ns);
	tier_store_mem_advance(v->cache, v->now_ns);
	return true;
}

static inline uint64_t env_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A threaded store's engine that has not settled in this long is stuck (a
 * guard refused over and over, say): fail now, not at meson's timeout. */
#define ENV_PUMP_WALL_MS 20000u

/* Pump completions and ticks until nothing moves. */
static inline void env_pump(struct env *v)
{
	uint64_t t0 = v->threaded ? env_wall_ms() : 0;

	for (int i = 0; i < 100000; i++) {
		if (v->threaded && env_wall_ms() - t0 > ENV_PUMP_WALL_MS)
			fail_msg("env_pump: the engine did not settle in %u ms (%d rounds): "
				 "a livelock?", ENV_PUMP_WALL_MS, i);
		size_t n = tier_cq_drain(v->cq);
		tier_engine_tick(v->e);
		n += tier_cq_drain(v->cq);
		if (!n && env_vt_step(v))
			continue;
		if (!n && tier_engine_idle(v->e))
			return;
		if (!n && v->threaded) {
			tier_cq_wait(v->cq, 20);
			continue;
		}
		if (!n) {
			tier_engine_tick(v->e);
			if (!tier_cq_drain(v->cq) && tier_engine_idle(v->e))
				return;
			if (!tier_cq_drain(v->cq) && i > 1000)
				return;
		}
	}
}

/* The engine and its image, the image's map still loading (nothing pumped). */
static inline int env_engine_loading(struct env *v)
{
	struct tier_engine_opts o = {
		.base = v->base, .cache = v->cache, .params = v->p,
		.clock = env_clock, .clock_arg = v,
	};
	struct tier_image_opts io = { .name = "img", .object_prefix = "rbd_data.test",
				      .size = v->isz ? v->isz : 64 * v->p.object_size };
	int rc = tier_engine_create(&o, &v->e);

	return rc < 0 ? rc : tier_image_open(v->e, &io, &v->img);
}

static inline int env_engine(struct env *v)
{
	int rc = env_engine_loading(v);

	if (rc < 0)
		return rc;
	env_pump(v);
	return tier_image_ready(v->img);
}

/* vt: virtual-time mem stores with the given device models (NULL = instant). */
static inline struct env *env_new_vt(const struct tier_params *p,
				     const struct tier_devmodel_params *bm,
				     const struct tier_devmodel_params *cm, bool vt)
{
	struct env *v = calloc(1, sizeof(*v));
	struct tier_mem_opts bo = { .virtual_time = vt }, co = { .virtual_time = vt };

	assert_non_null(v);
	v->now_ns = 1000000000ull;
	v->vt = vt;
	if (bm)
		bo.model = *bm;
	if (cm)
		co.model = *cm;
	if (p)
		v->p = *p;
	else
		env_params(&v->p);
	assert_int_equal(tier_cq_create(NULL, NULL, &v->cq), 0);
	assert_int_equal(tier_store_mem_create("base", &bo, v->cq, &v->base), 0);
	assert_int_equal(tier_store_mem_create("cache", &co, v->cq, &v->cache), 0);
	if (vt) {
		tier_store_mem_advance(v->base, v->now_ns);
		tier_store_mem_advance(v->cache, v->now_ns);
	}
	assert_int_equal(env_engine(v), 1);
	return v;
}

static inline struct env *env_new(const struct tier_params *p)
{
	return env_new_vt(p, NULL, NULL, false);
}

/* Crash: drop the engine (its in-flight ops fail through the stopped store) */
static inline void env_kill_engine(struct env *v)
{
	env_pump(v);
	tier_image_close(v->img);
	tier_engine_destroy(v->e);
	v->e = NULL;
	v->img = NULL;
}

static inline void env_free(struct env *v)
{
	if (v->e) {
		env_pump(v);
		tier_image_close(v->img);
		tier_engine_destroy(v->e);
	}
	tier_store_destroy(v->base);
	tier_store_destroy(v->cache);
	tier_cq_destroy(v->cq);
	free(v);
}

struct sreq {
	struct tier_request r;
	int done, result;
};

static inline void sreq_cb(struct tier_request *r, int result)
{
	struct sreq *s = (struct sreq *)r;

	s->done++;
	s->result = result;
}

/* Submit and pump until the callback ran; returns its result. */
static inline int env_io(struct env *v, enum tier_req_type t, uint64_t off, uint64_t len,
			 void *buf, uint32_t flags)
{
	struct sreq s = { .r = { .type = t, .flags = flags, .off = off, .len = len, .buf = buf,
				 .cb = sreq_cb } };
	int rc = tier_image_submit(v->img, &s.r);

	if (rc < 0)
		return rc;
	assert_int_equal(s.done, 0);   /* never called back inside submit */
	for (int i = 0; i < 100000 && !s.done; i++) {
		size_t n = tier_cq_drain(v->cq);
		if (!s.done)
			tier_engine_tick(v->e);
		if (!n && !s.done && !env_vt_step(v) && v->threaded)
			tier_cq_wait(v->cq, 20);
	}
	assert_int_equal(s.done, 1);
	return s.result;
}

static inline void fill(void *buf, uint64_t len, uint64_t seed)
{
	uint8_t *p = buf;

	for (uint64_t i = 0; i < len; i++)
		p[i] = (uint8_t)((seed * 131 + i * 7 + (i >> 9)) & 0xff);
}

static inline int env_write(struct env *v, uint64_t off, uint64_t len, uint64_t seed)
{
	void *b = malloc(len);
	int rc;

	fill(b, len, seed);
	rc = env_io(v, TIER_REQ_WRITE, off, len, b, 0);
	free(b);
	return rc;
}

/* Read [off, len) and compare with the expected model. */
static inline void env_check(struct env *v, const uint8_t *model, uint64_t off, uint64_t len)
{
	uint8_t *b = malloc(len);

	memset(b, 0xee, len);
	assert_int_equal(env_io(v, TIER_REQ_READ, off, len, b, 0), 0);
	assert_memory_equal(b, model + off, len);
	free(b);
}

static inline void model_write(uint8_t *model, uint64_t off, uint64_t len, uint64_t seed)
{
	fill(model + off, len, seed);
}

static inline struct tier_stats env_stats(struct env *v)
{
	struct tier_stats s;

	tier_engine_get_stats(v->e, &s);
	return s;
}

static inline void env_advance_ms(struct env *v, uint64_t ms)
{
	v->now_ns += ms * 1000000ull;
}

/* Change parameters live (and keep v->p in step). */
static inline void env_set_params(struct env *v, const struct tier_params *p)
{
	v->p = *p;
	assert_int_equal(tier_engine_set_params(v->e, p), 0);
}

static inline void stat_cb(struct tier_store_op *op)
{
	*(int *)op->priv = 1;
}

/* Cache object's tier.meta straight from the store: -1 absent, else its flags. */
static inline int cache_meta(struct env *v, uint64_t objno, struct tier_meta *m,
			     uint64_t *words, size_t nw)
{
	struct tier_store_op op;
	uint8_t buf[TIER_META_MAX];
	int done = 0;

	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_STAT;
	snprintf(op.oid, sizeof(op.oid), "rbd_data.test.%016llx", (unsigned long long)objno);
	op.meta_buf = buf;
	op.meta_cap = sizeof(buf);
	op.priv = &done;
	op.cb = stat_cb;
	assert_int_equal(tier_store_submit(v->cache, &op), 0);
	while (!done)
		if (!tier_cq_drain(v->cq) && !env_vt_step(v) && v->threaded)
			tier_cq_wait(v->cq, 20);
	if (op.result == -ENOENT)
		return -1;
	assert_true(op.result >= 0);
	m->valid = words;
	m->dirty = words ? words + nw : NULL;
	assert_int_equal(tier_meta_decode(buf, op.meta_len_out, m, nw), 0);
	return (int)m->flags;
}

#endif
