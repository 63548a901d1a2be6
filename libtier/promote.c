/* SPDX-License-Identifier: MIT */
/*
 * libtier/promote.c - the promotion throttle and the promotion job itself.
 * Whether a miss is admitted is decide.c's (tier__decide_admit: the cache
 * mode, a degraded pool, the cache at or over 100% of target, Ceph's recency rule
 * or the eviction policy's hint); an admitted promotion must then pass the
 * token buckets here (promote_max_bytes_sec / promote_max_objects_sec),
 * which guard the base pool; fills of partly valid copies (fill.c) pass
 * the same buckets.  "Over target" counts cached bytes, promotions in flight and reservations (queued
 * promotions, new extents being written), so admissions racing each other
 * cannot all see the same room: the cache passes its target by at most one
 * admission, i.e. one object (object mode) or one write's extents.  A
 * promotion reads the whole object from base and writes it to the cache as
 * CLEAN, data and meta in one op with F_EXCL and F_ORDERED.  It must never overwrite a
 * cache object it does not know about and never mark a copy CLEAN before
 * the store acknowledged the full data.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/decide.h"
#include "libtier/engine_int.h"

void tier__tokens_refill(struct tier_engine *e)
{
	uint64_t now = tier__eng_now_ns(e);
	double dt = (double)(now - e->tb_last_ns) / 1e9;
	double rb = (double)e->p.promote_max_bytes_sec, ro = (double)e->p.promote_max_objects_sec;
	double capb = rb > (double)e->p.object_size ? rb : (double)e->p.object_size;
	double capo = ro > 1.0 ? ro : 1.0;

	e->tb_last_ns = now;
	e->tb_bytes += rb * dt;
	if (e->tb_bytes > capb)
		e->tb_bytes = capb;
	e->tb_objs += ro * dt;
	if (e->tb_objs > capo)
		e->tb_objs = capo;
}

/* bytes == 0: an admission that copies nothing from base, never throttled */
static bool tokens_take(struct tier_engine *e, uint64_t bytes)
{
	bool lb = e->p.promote_max_bytes_sec > 0, lo = e->p.promote_max_objects_sec > 0;

	if ((!lb && !lo) || bytes == 0)
		return true;
	tier__tokens_refill(e);
	if ((lb && e->tb_bytes < (double)bytes) || (lo && e->tb_objs < 1.0))
		return false;
	if (lb)
		e->tb_bytes -= (double)bytes;
	if (lo)
		e->tb_objs -= 1.0;
	return true;
}

void tier__resv_take(struct tier_engine *e, struct tier__ext *x, uint64_t bytes, bool obj)
{
	tier__resv_put(e, x);
	x->resv = bytes;
	x->resv_obj = obj;
	e->resv_bytes += bytes;
	e->n_resv += obj;
}

void tier__resv_put(struct tier_engine *e, struct tier__ext *x)
{
	e->resv_bytes -= x->resv;
	e->n_resv -= x->resv_obj;
	x->resv = 0;
	x->resv_obj = 0;
}

bool tier__promote_tokens(struct tier_engine *e, struct tier_image *img, uint64_t bytes)
{
	if (tokens_take(e, bytes))
		return true;
	tier__count(e, img, promote_throttled, 1);
	return false;
}

void tier__fill_budget_earn(struct tier_engine *e, uint64_t bytes)
{
	double rate = tier__decide_fill_budget_rate(&e->p), cap = tier__decide_fill_budget_cap(&e->p);

	if (rate <= 0)
		return;
	e->fb_bytes += rate * (double)bytes;
	if (e->fb_bytes > cap)
		e->fb_bytes = cap;
}

/*
 * A fill (fill.c) pays what it writes into the cache from the fills'
 * budget (decide.c), or, with none, copies from base like a promotion:
 * the same buckets.
 */
bool tier__fill_tokens(struct tier_engine *e, struct tier_image *img, uint64_t read,
		       uint64_t add)
{
	if (tier__decide_fill_budget_rate(&e->p) > 0) {
		if (e->fb_bytes >= (double)add) {
			e->fb_bytes -= (double)add;
			return true;
		}
	} else if (tokens_take(e, read)) {
		return true;
	}
	tier__count(e, img, fill_skip_throttled, 1);
	return false;
}

/*
 * A name barrier on base: a FUA REMOVE of an object that never exists makes
 * every base remove before it durable (docs/DURABILITY.md), so a copy that
 * will say "clean: base holds this" cannot come back over a removed object
 * base brings back after a cut.  Promotions and fills send it first.
 */
void tier__base_barrier(struct tier_engine *e, struct tier_store_op *op, tier_store_cb cb,
			void *priv, uint64_t *gen)
{
	memset(op, 0, sizeof(*op));
	op->cb = cb;
	op->priv = priv;
	*gen = e->rm_gen[1];
	op->opcode = TIER_STORE_REMOVE;
	op->flags = TIER_STORE_F_FUA;
	snprintf(op->oid, sizeof(op->oid), "tier.sync-barrier");
	tier__submit(e, e->base, op);
}

int tier__base_barrier_done(struct tier_engine *e, int result, uint64_t gen)
{
	/* the barrier object never exists: ENOENT is the expected answer */
	if (result < 0 && result != -ENOENT)
		return result;
	if (e->rm_synced[1] < gen)
		e->rm_synced[1] = gen;
	return 0;
}

/* Steps of a promotion job. */
enum { PROMOTE_BARRIER = 0, PROMOTE_READ, PROMOTE_WRITE };

static void promote_read(struct tier__job *j);

static void promote_done(struct tier__job *j, bool ok)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;

	tier__obj_promote_end(e, o, tier__obj_len(e, o));
	if (!ok) {
		char oid[TIER_OID_MAX];

		tier__count(e, j->img, promote_failed, 1);
		tier__oid(j->img, TIER__KEY_OBJNO(o->key), oid);
		tier__log_fail(e, TIER_LOG_WARN, TIER__EL_PROMOTE, j->img, oid,
			       j->step == PROMOTE_WRITE ? e->cache : e->base,
			       j->err ? j->err : -EIO, "; the object stays uncached");
	}
	if (j->waiter)
		tier__ext_finish(e, j->waiter, 0);
	tier__job_free(j);
	tier__obj_kick(e, o);
	tier__deliver(e);
}

static void promote_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	int r = op->result;
	int ml;

	if (j->step == PROMOTE_BARRIER) {
		r = tier__base_barrier_done(e, r, j->ops_gen[1]);
		if (r < 0) {
			j->err = r;
			promote_done(j, false);
			return;
		}
		j->step = PROMOTE_READ;
		promote_read(j);
		return;
	}
	if (j->step == PROMOTE_READ) {
		tier__base_latency(e, tier__eng_now_ns(e) - j->t_base);
		if (r == -ENOENT) {
			memset(j->buf, 0, j->len);
			r = 0;
		}
		if (r < 0) {
			j->err = r;
			promote_done(j, false);
			return;
		}
		/*
		 * F_ORDERED: a CLEAN meta must never be durable before the data it
		 * vouches for, or a power cut leaves a "clean" copy of zeros over
		 * base's good bytes.  A new object needs no pre_meta: a crash before
		 * the meta leaves a file without one, which rebuild discards.
		 */
		j->step = PROMOTE_WRITE;
		ml = tier__meta_encode_obj(e, 0, 1, NULL, NULL, j->meta);
		memset(op, 0, sizeof(*op));
		op->opcode = TIER_STORE_WRITE;
		op->flags = TIER_STORE_F_EXCL | TIER_STORE_F_META | TIER_STORE_F_ORDERED;
		tier__oid(j->img, TIER__KEY_OBJNO(o->key), op->oid);
		op->buf = j->buf;
		op->len = j->len;
		op->meta = j->meta;
		op->meta_len = (uint32_t)ml;
		op->version = 1;
		op->cb = promote_cb;
		op->priv = j;
		if (ml < 0) {
			promote_done(j, false);
			return;
		}
		tier__submit(e, e->cache, op);
		return;
	}
	if (r < 0) {
		/*
		 * EEXIST: a leftover object; EINVAL: an op the store refused (an
		 * engine bug, logged), not a pool problem; anything else may have
		 * left a partial object.  STALE either way: a drop goes first.
		 */
		if (r != -EEXIST && r != -EINVAL)
			tier__cache_error(e, r);
		tier__obj_stale_begin(e, o);
		j->err = r;
		promote_done(j, false);
		return;
	}
	tier__obj_free_bits(e, o);   /* ABSENT: leftovers of a failed write; now all valid */
	o->version = 1;
	tier__obj_touch(e, o);
	tier__obj_copy_known(e, o);
	tier__obj_set_state(e, o, TIER__CLEAN, NULL, NULL);
	tier__count(e, j->img, promotions, 1);
	tier__count(e, j->img, promote_bytes, j->len);
	promote_done(j, true);
}

/* The base read of a promotion, in the order tier__decide_promote_read asks for. */
static void promote_read(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	enum tier__promote_read how = tier__decide_promote_read(
		j->step == PROMOTE_BARRIER && e->rm_gen[1] != e->rm_synced[1],
		o->flags & TIER__OF_UNSYNC_B, o->nsync != 0);

	if (how == TIER__PR_BARRIER_FIRST) {
		tier__base_barrier(e, &j->op, promote_cb, j, &j->ops_gen[1]);
		return;
	}
	memset(&j->op, 0, sizeof(j->op));
	j->op.cb = promote_cb;
	j->op.priv = j;
	j->step = PROMOTE_READ;
	j->op.opcode = TIER_STORE_READ;
	if (how == TIER__PR_FUA)
		j->op.flags = TIER_STORE_F_FUA;
	tier__oid(j->img, TIER__KEY_OBJNO(o->key), j->op.oid);
	j->op.buf = j->buf;
	j->op.len = j->len;
	j->t_base = tier__eng_now_ns(e);
	tier__submit(e, e->base, &j->op);
}

void tier__promote_start(struct tier_engine *e, struct tier_image *img, struct tier__obj *o,
			 struct tier__ext *waiter)
{
	struct tier__job *j = tier__job_new(e, TIER__J_PROMOTE, img, o);

	if (!j || tier__job_obuf(j) < 0) {
		tier__job_free(j);
		tier__count(e, img, promote_failed, 1);
		if (waiter)
			tier__ext_finish(e, waiter, 0);
		return;
	}
	tier__obj_promote_begin(e, o, tier__obj_len(e, o));
	j->waiter = waiter;
	j->len = tier__obj_len(e, o);
	j->step = PROMOTE_BARRIER;
	promote_read(j);
}
