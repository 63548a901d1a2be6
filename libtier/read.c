/* SPDX-License-Identifier: MIT */
/*
 * libtier/read.c - client reads, once routed (route.c): from the cache
 * copy (a hit), from base (a proxied miss), or both (a partly valid copy
 * in extent mode: the runs it lacks from base, after the copy's part).  A
 * failed cache read of a CLEAN copy is served from base.  It counts read
 * hits and misses, and keeps the last reads' ends (a read starting at one
 * continues a sequential stream: tier__read_continues).  A read that feeds
 * a read fill hands it its data (fill.c) before completing.  It must never
 * serve from the cache bytes the copy does not hold as valid, and never
 * complete a read before its last store op answered.
 */
#include <errno.h>
#include <string.h>

#include "libtier/decide.h"
#include "libtier/engine_int.h"
#include "libtier/route.h"

static void read_cb(struct tier_store_op *op);

static bool ext_valid(const struct tier_engine *e, const struct tier__obj *o, uint64_t i)
{
	(void)e;
	return !tier__obj_bits(o) || tier__bit(tier__obj_bits(o), i);
}

/* Next run of invalid extents at or after x->pos, clipped to the piece. */
static bool next_invalid_run(const struct tier_engine *e, const struct tier__obj *o,
			     const struct tier__ext *x, uint32_t *ro, uint32_t *rl)
{
	uint64_t es = e->p.extent_size, end = (uint64_t)x->off + x->len, p = x->pos;

	while (p < end && ext_valid(e, o, p / es))
		p = (p / es + 1) * es;
	if (p >= end)
		return false;
	*ro = (uint32_t)p;
	while (p < end && !ext_valid(e, o, p / es))
		p = (p / es + 1) * es;
	*rl = (uint32_t)((p < end ? p : end) - *ro);
	return true;
}

static void read_issue(struct tier_engine *e, struct tier__ext *x, bool from_cache,
		       uint32_t off, uint32_t len)
{
	tier__x_op(x, TIER_STORE_READ, read_cb);
	x->op.off = off;
	x->op.len = len;
	x->op.buf = x->buf + (off - x->off);
	if (!from_cache && x->rfill == 2)
		x->op.flags = TIER_STORE_F_FUA;   /* it feeds a read fill: as a promotion reads */
	tier__x_submit(e, from_cache ? e->cache : e->base, x);
}

/* The read is over: a read fill it fed takes its data, then the piece completes. */
static void read_end(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x, int err)
{
	o->nrun--;
	if (x->rfill)   /* 3: base answered ENOENT, a hole: nothing to cache */
		tier__rfill_read_done(e, o, x, err ? err : x->rfill == 3 ? -ENOENT : 0);
	tier__ext_finish(e, x, err);
	tier__obj_kick(e, o);
}

/* After a read: the next base run it lacks (XS_READ_RUNS), or done. */
static void read_next(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x)
{
	uint32_t ro, rl;

	if (x->step == XS_READ_CACHE && tier__obj_bits(o)) {
		x->step = XS_READ_RUNS;
		x->pos = x->off;
	}
	if (x->step == XS_READ_RUNS && next_invalid_run(e, o, x, &ro, &rl)) {
		x->pos = ro + rl;
		read_issue(e, x, false, ro, rl);
		return;
	}
	read_end(e, o, x, 0);
}

static void read_cb(struct tier_store_op *op)
{
	struct tier__ext *x = op->priv;
	struct tier_engine *e = x->e;
	struct tier__obj *o = x->obj;
	bool base = x->step != XS_READ_CACHE;
	int r = op->result;

	if (base) {
		tier__base_latency(e, tier__eng_now_ns(e) - x->t_base);
		if (r == -ENOENT) {
			memset(op->buf, 0, op->len);
			r = 0;
			if (x->rfill)
				x->rfill = 3;
		}
	}
	if (r < 0 && !base) {
		tier__cache_error(e, r);
		if (o->state == TIER__CLEAN) {
			/* the base copy is identical: serve from it */
			x->step = XS_READ_BASE;
			read_issue(e, x, false, x->off, x->len);
			goto out;
		}
		read_end(e, o, x, -EIO);
		goto out;
	}
	if (r < 0) {
		read_end(e, o, x, r);
		goto out;
	}
	read_next(e, o, x);
out:
	tier__deliver(e);
}

/*
 * A sequential stream: the read x starts where one of the last 16 client
 * reads ended (Linux's readahead asks the same).  A random read lands there
 * by chance about never; a valid extent just before it would not do (at a
 * copy's density d a random read finds one with probability d).
 */
bool tier__read_continues(const struct tier_engine *e, const struct tier__obj *o,
			   const struct tier__ext *x)
{
	for (size_t i = 0; i < sizeof(e->streams) / sizeof(e->streams[0]); i++)
		if (e->streams[i].key == o->key && e->streams[i].end == x->off && x->off)
			return true;
	return false;
}

static void read_remember(struct tier_engine *e, const struct tier__obj *o,
			  const struct tier__ext *x)
{
	struct tier__stream *s = &e->streams[e->stream_next++ % (sizeof(e->streams) /
								 sizeof(e->streams[0]))];

	s->key = o->key;
	s->end = x->off + x->len;
}

/*
 * The agent's phase-change signal (tier__agent_note_hit) leaves out the
 * reads of a sequential stream: a scan hits less than the working set,
 * and its reads are not a move of the working set (hotscan: the turnover
 * it set off cost misses and p99; docs/BENCHMARKS.md, "The policy suite").
 */
static void note_read(struct tier_engine *e, bool stream, bool hit)
{
	if (!stream)
		tier__agent_note_hit(e, hit);
}

void tier__read_start(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x,
		       enum tier__route route)
{
	bool stream = false;

	tier__q_pop(o, x);
	o->nrun++;
	x->pos = x->off;
	if (x->req) {
		stream = tier__read_continues(e, o, x);
		read_remember(e, o, x);
	}
	switch (route) {
	case TIER__R_HIT:
		tier__count(e, x->img, read_hits, 1);
		note_read(e, stream, true);
		x->step = XS_READ_CACHE;
		read_issue(e, x, true, x->off, x->len);
		return;
	case TIER__R_HIT_PARTIAL:
		note_read(e, stream, false);
		tier__count(e, x->img, read_misses, 1);
		tier__count(e, x->img, read_miss_bytes, x->len);
		x->step = XS_READ_CACHE;
		read_issue(e, x, true, x->off, x->len);
		return;
	case TIER__R_EXTENT_MISS:
		note_read(e, stream, false);
		tier__count(e, x->img, read_misses, 1);
		tier__count(e, x->img, read_miss_bytes, x->len);
		x->step = XS_READ_RUNS;
		read_next(e, o, x);
		return;
	default:   /* PROXY, PROXY_THEN_PROMOTE */
		note_read(e, stream, false);
		tier__count(e, x->img, read_misses, 1);
		tier__count(e, x->img, read_miss_bytes, x->len);
		tier__count(e, x->img, proxy_reads, 1);
		tier__count(e, x->img, proxy_read_bytes, x->len);
		if (route == TIER__R_PROXY_THEN_PROMOTE)
			tier__hint_promote(e, o, x->img);
		x->step = XS_READ_BASE;
		read_issue(e, x, false, x->off, x->len);
	}
}
