/* SPDX-License-Identifier: MIT */
/*
 * libtier/write.c - writes, trims and zeroes, once routed (route.c):
 * proxied to base (a miss; over target in extent mode, a write touching
 * only extents the cache lacks), into the cache copy (a cache write: new
 * bitmaps and meta, the durability flags of tier__decide_cw_flags, a base
 * read first for partly written edge extents), and drops (REMOVE of the
 * cache copy, and for whole-object trims of a cached object the base
 * object first).  New extents are reserved against the target until they
 * land; a cache write on an object being flushed tells the flush which
 * extents it dirties again.  It must never acknowledge a write before the
 * store acknowledged it, and never let a cache copy diverge from base
 * while it is marked CLEAN.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/decide.h"
#include "libtier/engine_int.h"
#include "libtier/route.h"

/* ---- proxied writes, trims and zeroes ---- */

static void proxy_cb(struct tier_store_op *op)
{
	struct tier__ext *x = op->priv;
	struct tier_engine *e = x->e;
	struct tier__obj *o = x->obj;
	int r = op->result;

	tier__base_latency(e, tier__eng_now_ns(e) - x->t_base);
	if (r == -ENOENT && op->opcode == TIER_STORE_REMOVE)
		r = 0;
	/* counted once it happened: a barrier sent earlier cannot cover it */
	if (r >= 0 && op->opcode == TIER_STORE_REMOVE)
		tier__note_remove(e, e->base, op->flags);
	else if (r >= 0 && !(op->flags & TIER_STORE_F_FUA))
		tier__obj_unsync_begin(e, o, TIER__OF_UNSYNC_B);
	if (x->step == XS_PROXY_NEW)
		o->nproxy--;
	o->nrun--;
	tier__ext_finish(e, x, r < 0 ? r : 0);
	tier__obj_kick(e, o);
	tier__deliver(e);
}

/*
 * A write, trim or zero to base.  On extents no copy holds (over target,
 * XS_PROXY_NEW already; or the object has no copy) it counts in nproxy too,
 * so that the rest of nrun are the reads: decide_write_route lets an
 * admitted write miss wait for reads on base, not for other writes.
 */
void tier__proxy_start(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x)
{
	bool whole = x->off == 0 && x->len == tier__obj_len(e, o);

	o->nrun++;
	if (x->step == XS_PROXY_NEW || o->state == TIER__ABSENT) {
		x->step = XS_PROXY_NEW;
		o->nproxy++;
	}
	if (x->type == TIER_REQ_WRITE) {
		tier__x_op(x, TIER_STORE_WRITE, proxy_cb);
		x->op.buf = x->buf;
		tier__count(e, x->img, proxy_writes, 1);
		tier__count(e, x->img, proxy_write_bytes, x->len);
	} else {
		tier__x_op(x, whole ? TIER_STORE_REMOVE : TIER_STORE_ZERO, proxy_cb);
	}
	x->op.flags = tier__x_fua(x);
	if (x->op.opcode != TIER_STORE_REMOVE) {
		x->op.off = x->off;
		x->op.len = x->len;
	}
	tier__x_submit(e, e->base, x);
}

/* ---- cache writes ---- */

static void cw_cb(struct tier_store_op *op);
static void cw_fill_cb(struct tier_store_op *op);

static void cw_issue(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x)
{
	bool creating = o->state == TIER__ABSENT;
	uint8_t *meta = x->mem, *pre = x->mem + e->meta_cap;
	int ml, pl;

	if (x->bounce) {
		tier__x_op(x, TIER_STORE_WRITE, cw_cb);
		x->op.buf = x->bounce;
		x->op.off = x->s;
		x->op.len = x->t - x->s;
	} else {
		tier__x_op(x, x->type == TIER_REQ_WRITE ? TIER_STORE_WRITE : TIER_STORE_ZERO, cw_cb);
		x->op.buf = x->type == TIER_REQ_WRITE ? x->buf : NULL;
		x->op.off = x->off;
		x->op.len = x->len;
	}
	/*
	 * What a power cut may leave must never lie (docs/DURABILITY.md):
	 *  - overwriting extents the store holds as clean: base has the old
	 *    bytes, so the dirty mark (pre_meta) is made durable first, or a
	 *    "clean" copy could come back holding bytes base never had;
	 *  - making extents valid (a new object, new extents, fills): their
	 *    data must be durable before a meta that calls them valid
	 *    (F_ORDERED), or they come back as zeros over base's good bytes.
	 * Overwrites of dirty extents need neither.
	 */
	bool clean_over = false, new_valid = false;

	pl = 0;
	if (tier__obj_bits(o)) {
		uint64_t *ov = tier__obj_bits(o), *od = tier__obj_bits(o) + e->nwords;
		uint64_t *nv = x->nbits, *nd = x->nbits + e->nwords;
		/* pre_meta: old valid bits; overwritten valid extents count as dirty */
		uint64_t *tmp = x->nbits + 2 * e->nwords;

		for (size_t i = 0; i < e->nwords; i++) {
			tmp[i] = od[i] | (nd[i] & ov[i]);
			clean_over |= (nd[i] & ov[i] & ~od[i]) != 0;
			new_valid |= (nv[i] & ~ov[i]) != 0;
		}
		ml = tier__meta_encode_obj(e, TIER_META_F_DIRTY, x->new_version, nv, nd, meta);
		if (clean_over)
			pl = tier__meta_encode_obj(e, TIER_META_F_DIRTY, x->new_version, ov, tmp, pre);
	} else {
		ml = tier__meta_encode_obj(e, TIER_META_F_DIRTY, x->new_version, NULL, NULL, meta);
		clean_over = o->state == TIER__CLEAN;
		new_valid = creating;
		if (clean_over && ml > 0) {
			pl = ml;
			memcpy(pre, meta, (size_t)ml);
		}
	}
	if (ml < 0 || pl < 0) {
		x->op.result = -EINVAL;
		cw_cb(&x->op);
		return;
	}
	x->op.flags = tier__decide_cw_flags(creating, new_valid, clean_over,
					    o->state == TIER__DIRTY &&
					    !(o->flags & (TIER__OF_VUNK | TIER__OF_STALE)),
					    tier__x_fua(x) != 0);
#ifndef NDEBUG
	/* lazy: the new meta is the stored one but for its version */
	if ((x->op.flags & TIER_STORE_F_LAZY_META) && tier__obj_bits(o))
		assert(!memcmp(x->nbits, tier__obj_bits(o), 2 * e->nwords * 8));
#endif
	x->op.meta = meta;
	x->op.meta_len = (uint32_t)ml;
	x->op.pre_meta = clean_over ? pre : NULL;
	x->op.pre_meta_len = clean_over ? (uint32_t)pl : 0;
	x->op.version = x->new_version;
	tier__x_submit(e, e->cache, x);
}

/* Bytes of the extents fe..le not yet valid in o: what a cache write adds. */
static uint64_t new_extent_bytes(const struct tier_engine *e, const struct tier__obj *o,
				 uint64_t fe, uint64_t le)
{
	uint64_t es = e->p.extent_size, b = 0;

	for (uint64_t i = fe; i <= le; i++) {
		uint64_t end = (i + 1) * es < tier__obj_len(e, o) ? (i + 1) * es : tier__obj_len(e, o);
		if (!tier__bit(tier__obj_bits(o), i) && i * es < end)
			b += end - i * es;
	}
	return b;
}

void tier__cw_start(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x)
{
	uint64_t es = e->p.extent_size;

	tier__q_pop(o, x);
	tier__obj_excl_begin(e, o);
	x->new_version = o->version + 1;
	x->s = x->off;
	x->t = x->off + x->len;
	if (o->flags & TIER__OF_FLUSHING)
		tier__flush_redirty(e, o, x->off, x->len);
	if (tier__obj_bits(o)) {
		uint64_t fe = x->off / es, le = ((uint64_t)x->off + x->len - 1) / es;
		bool ff = (x->off % es) && !tier__bit(tier__obj_bits(o), fe);
		bool fl = (x->t % es) && x->t < tier__obj_len(e, o) && !tier__bit(tier__obj_bits(o), le);

		/* new extents count against the target until the write lands */
		tier__resv_take(e, x, new_extent_bytes(e, o, fe, le), o->state == TIER__ABSENT);
		memcpy(x->nbits, tier__obj_bits(o), 2 * e->nwords * 8);
		for (uint64_t i = fe; i <= le; i++) {
			tier__bit_set(x->nbits, i);
			tier__bit_set(x->nbits + e->nwords, i);
		}
		if (ff)
			x->s = (uint32_t)(fe * es);
		if (fl)
			x->t = (uint32_t)((le + 1) * es < tier__obj_len(e, o) ? (le + 1) * es : tier__obj_len(e, o));
		if (ff || fl) {
			x->bounce = calloc(1, x->t - x->s);
			if (!x->bounce) {
				tier__obj_excl_end(e, o);
				if (o->state == TIER__ABSENT)
					tier__obj_free_bits(e, o);   /* the copy was never made */
				tier__ext_finish(e, x, -ENOMEM);
				return;
			}
			x->fill = 1;
			tier__x_op(x, TIER_STORE_READ, cw_fill_cb);
			x->op.off = x->s;
			x->op.len = x->t - x->s;
			x->op.buf = x->bounce;
			tier__x_submit(e, e->base, x);
			return;
		}
	}
	cw_issue(e, o, x);
}

static void cw_fill_cb(struct tier_store_op *op)
{
	struct tier__ext *x = op->priv;
	struct tier_engine *e = x->e;
	struct tier__obj *o = x->obj;
	int r = op->result;

	if (r == -ENOENT) {
		memset(x->bounce, 0, x->t - x->s);
		r = 0;
	}
	if (r < 0) {
		tier__obj_excl_end(e, o);
		if (o->state == TIER__ABSENT)
			tier__obj_free_bits(e, o);   /* the copy was never made */
		tier__ext_finish(e, x, r);
		tier__obj_kick(e, o);
		goto out;
	}
	if (x->type == TIER_REQ_WRITE)
		memcpy((char *)x->bounce + (x->off - x->s), x->buf, x->len);
	else
		memset((char *)x->bounce + (x->off - x->s), 0, x->len);
	cw_issue(e, o, x);
out:
	tier__deliver(e);
}

static void cw_cb(struct tier_store_op *op)
{
	struct tier__ext *x = op->priv;
	struct tier_engine *e = x->e;
	struct tier__obj *o = x->obj;
	bool creating = o->state == TIER__ABSENT;
	int r = op->result;

	tier__obj_excl_end(e, o);
	tier__resv_put(e, x);   /* landed in the accounting below, or not at all */
	if (r < 0) {
		tier__cache_error(e, r);
		if (creating) {
			tier__obj_stale_begin(e, o);
			tier__obj_free_bits(e, o);
		} else {
			tier__obj_vunk_begin(e, o);
		}
		free(x->bounce);
		x->bounce = NULL;
		x->nocache = 1;
		x->step = XS_NONE;
		tier__q_push_head(o, x);
		tier__obj_kick(e, o);
		goto out;
	}
	o->version = x->new_version;
	tier__obj_touch(e, o);
	tier__obj_copy_known(e, o);
	tier__obj_set_state(e, o, TIER__DIRTY, tier__obj_bits(o) ? x->nbits : NULL,
			    tier__obj_bits(o) ? x->nbits + e->nwords : NULL);
	if (!(op->flags & TIER_STORE_F_FUA))
		tier__obj_unsync_begin(e, o, TIER__OF_UNSYNC_C);
	tier__ext_finish(e, x, 0);
	tier__obj_kick(e, o);
out:
	tier__deliver(e);
}

/* ---- drops: remove the cache copy (and for whole-object trims the base object) ---- */

static void drop_cb(struct tier_store_op *op)
{
	struct tier__ext *x = op->priv;
	struct tier_engine *e = x->e;
	struct tier__obj *o = x->obj;
	bool base_step = x->step == XS_DROP_BASE;
	int r = op->result == -ENOENT ? 0 : op->result;

	if (base_step) {
		tier__base_latency(e, tier__eng_now_ns(e) - x->t_base);
		if (r < 0) {
			tier__obj_excl_end(e, o);
			tier__ext_finish(e, x, r);
			tier__obj_kick(e, o);
			goto out;
		}
		x->step = XS_DROP_CACHE;
		tier__x_op(x, TIER_STORE_REMOVE, drop_cb);
		x->op.flags = TIER_STORE_F_FUA;   /* see tier__drop_start */
		tier__x_submit(e, e->cache, x);
		goto out;
	}
	tier__obj_excl_end(e, o);
	if (r < 0) {
		tier__cache_error(e, r);
		tier__ext_finish(e, x, -EIO);
		tier__obj_kick(e, o);
		goto out;
	}
	tier__obj_set_state(e, o, TIER__ABSENT, NULL, NULL);
	tier__obj_copy_gone(e, o);
	if (x->step == XS_DROP_CACHE) {
		tier__ext_finish(e, x, 0);
	} else {
		/* drop before a proxied write (readonly mode, cache failure) */
		x->step = XS_NONE;
		tier__proxy_start(e, o, x);
	}
	tier__obj_kick(e, o);
out:
	tier__deliver(e);
}

void tier__drop_start(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x,
		       bool with_base)
{
	tier__q_pop(o, x);
	tier__obj_excl_begin(e, o);
	x->step = with_base ? XS_DROP_BASE : XS_DROP_THEN_PROXY;
	tier__x_op(x, TIER_STORE_REMOVE, drop_cb);
	/*
	 * Both removes are durable at once, FUA or not.  The cache copy: once
	 * it is gone base is authoritative, and a copy coming back after a
	 * power cut would serve old bytes over whatever base gets next.  The
	 * base object (whole-object trim of a cached object): the cache copy
	 * may be the only holder of flushed data, so base must not come back
	 * with older bytes once that copy is gone.
	 */
	x->op.flags = TIER_STORE_F_FUA;
	tier__x_submit(e, with_base ? e->base : e->cache, x);
}
