/* SPDX-License-Identifier: MIT */
/*
 * libtier/fill.c - fills: copying the extents a partly valid cache copy
 * lacks from base, so that a hot partial object (extent bitmaps) becomes
 * whole.  Whether to fill is decide.c's (tier__decide_fill, after a read
 * that needed base; hint.c queues the hint behind that read and takes
 * the promotion throttle's tokens).  A fill reads the copy's invalid
 * extents from base in the promotion's durability order
 * (tier__decide_promote_read: a name barrier first, or FUA reads) while
 * client reads and cache writes go on (writes that would touch base or drop
 * the copy wait: decide.c).  Once its data is in and the object is quiet
 * (no exclusive op, no shared op; FILL_READY holds new ops back meanwhile)
 * it writes the extents that are still invalid into the copy, then a
 * SETMETA, guarded by the version and F_ORDERED, whose valid bits gain them
 * and whose dirty bits are unchanged: they are clean, base holds them.  The
 * copy stays CLEAN or DIRTY as it was.  It must never overwrite an extent a
 * client wrote meanwhile, never let a valid bit be durable before its
 * bytes, and never copy bytes base could still lose in a power cut.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/decide.h"
#include "libtier/engine_int.h"

/* Where a fill job is (j->step). */
enum fill_step {
	FILL_BARRIER = 0,   /* base name barrier (removes not yet covered), then the reads */
	FILL_READ,          /* base reads of the invalid extents */
	FILL_WAIT,          /* data in: waits for the object to be quiet (FILL_READY) */
	FILL_WRITE,         /* cache writes of the extents still invalid (EXCL) */
	FILL_SETMETA,       /* the guarded, ordered SETMETA (EXCL) */
	FILL_CLIENT,        /* read fill: the client's read brings the data from base */
	FILL_CREATE,        /* read fill of an ABSENT object: the new copy's one WRITE */
};

/* Invalid extents closer than this are read from base in one op (fewer seeks). */
#define FILL_READ_GAP (64u * 1024)

static void fill_cb(struct tier_store_op *op);

static uint64_t ext_end(const struct tier_engine *e, const struct tier__obj *o, uint64_t i)
{
	uint64_t end = (i + 1) * e->p.extent_size;

	return end < tier__obj_len(e, o) ? end : tier__obj_len(e, o);
}

/*
 * The base reads of the extents set in `want` (NULL: o's invalid ones),
 * merged across small gaps; fills ops[] if given.  Returns how many, and
 * their bytes in *bytes.
 */
static size_t read_runs(const struct tier_engine *e, const struct tier__obj *o,
			const uint64_t *want, struct tier_store_op *ops, uint64_t *bytes)
{
	uint64_t es = e->p.extent_size, s = 0, t = 0;
	size_t n = 0;

	*bytes = 0;
	for (uint64_t i = 0; i <= e->nbits; i++) {
		bool in = i < e->nbits && i * es < tier__obj_len(e, o) &&
			  (want ? tier__bit(want, i) : !tier__bit(tier__obj_bits(o), i));

		if (in && t && i * es - t <= FILL_READ_GAP) {
			t = ext_end(e, o, i);
			continue;
		}
		if ((in || i == e->nbits) && t) {
			if (ops) {
				ops[n].off = s;
				ops[n].len = t - s;
			}
			*bytes += t - s;
			n++;
			t = 0;
		}
		if (in) {
			s = i * es;
			t = ext_end(e, o, i);
		}
	}
	return n;
}

/*
 * The extents of [off, off + len) the copy lacks (of them, those set in
 * mask, if given) into want (if given), and their bytes: what a fill of
 * that window adds to the copy.  *read: what it reads from base
 * (read_runs: runs merged across small gaps).
 */
static uint64_t window_lacks(const struct tier_engine *e, const struct tier__obj *o,
			     uint32_t off, uint32_t len, const uint64_t *mask, uint64_t *want,
			     uint64_t *read)
{
	uint64_t es = e->p.extent_size, b = 0, end = (uint64_t)off + len, t = 0;

	*read = 0;
	if (!tier__obj_bits(o) || !len)
		return 0;
	if (end > tier__obj_len(e, o))
		end = tier__obj_len(e, o);
	for (uint64_t i = off / es; i < e->nbits && i * es < end; i++) {
		if (tier__bit(tier__obj_bits(o), i) || (mask && !tier__bit(mask, i)))
			continue;
		if (want)
			tier__bit_set(want, i);
		b += ext_end(e, o, i) - i * es;
		*read += ext_end(e, o, i) - i * es;
		if (t && i * es - t <= FILL_READ_GAP)
			*read += i * es - t;   /* the gap read with the run */
		t = ext_end(e, o, i);
	}
	return b;
}

uint64_t tier__fill_bytes(const struct tier_engine *e, const struct tier__obj *o, uint32_t off,
			  uint32_t len, const uint64_t *mask, uint64_t *read)
{
	uint64_t r;

	return window_lacks(e, o, off, len, mask, NULL, read ? read : &r);
}

/* Where the object's byte off sits in the job's buffer (sized to the fill: tier__job_buf). */
static char *jbuf(const struct tier__job *j, uint64_t off)
{
	return (char *)j->buf + (off - j->boff);
}

/* A buffer from the first to the end of the last extent set in want. */
static int job_span_buf(struct tier__job *j, const uint64_t *want)
{
	const struct tier_engine *e = j->e;
	uint64_t fe = e->nbits, le = 0;

	for (uint64_t i = 0; i < e->nbits; i++) {
		if (!tier__bit(want, i))
			continue;
		if (fe == e->nbits)
			fe = i;
		le = i;
	}
	if (fe == e->nbits)
		return -EINVAL;
	return tier__job_buf(j, (uint32_t)(fe * e->p.extent_size),
			     (uint32_t)(ext_end(e, j->obj, le) - fe * e->p.extent_size));
}

/* End the job (the caller kicks the object's queue, unless it runs it already). */
static void fill_end(struct tier__job *j, bool ok)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	struct tier__job **pp = &e->fills;

	while (*pp && *pp != j)
		pp = &(*pp)->fnext;
	if (*pp)
		*pp = j->fnext;
	if (j->rf_create)
		tier__obj_promote_end(e, o, j->len);
	else
		tier__obj_fill_end(e, o, j->len);
	if (!ok)
		tier__count(e, j->img, fill_failed, 1);
	tier__job_free(j);
}

static void fill_done(struct tier__job *j, bool ok)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;

	if (!ok && j->err && j->err != -ECANCELED) {   /* ECANCELED: a guard, not a fault */
		char oid[TIER_OID_MAX];

		tier__oid(j->img, TIER__KEY_OBJNO(o->key), oid);
		tier__log_fail(e, TIER_LOG_WARN, TIER__EL_FILL, j->img, oid,
			       j->step == FILL_BARRIER || j->step == FILL_READ ||
					       j->step == FILL_CLIENT ? e->base : e->cache,
			       j->err, "; the extents stay invalid in the cache");
	}
	fill_end(j, ok);
	tier__obj_kick(e, o);
	tier__deliver(e);
}

/* The base reads, in the order tier__decide_promote_read asks for. */
static void fill_read(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	enum tier__promote_read how = tier__decide_promote_read(
		j->step == FILL_BARRIER && e->rm_gen[1] != e->rm_synced[1],
		o->flags & TIER__OF_UNSYNC_B, o->nsync != 0);

	if (how == TIER__PR_BARRIER_FIRST) {
		tier__base_barrier(e, &j->op, fill_cb, j, &j->ops_gen[1]);
		return;
	}
	/*
	 * FUA: the copy will say "valid, clean: base holds this", so base's
	 * bytes must be durable (a proxied write not yet synced could be lost
	 * in a cut, and the block would then change at the eviction).
	 */
	j->step = FILL_READ;
	j->npending = j->nops;
	j->t_base = tier__eng_now_ns(e);
	for (size_t i = 0; i < j->nops; i++) {
		uint64_t off = j->ops[i].off, len = j->ops[i].len;

		tier__job_op(j, &j->ops[i], TIER_STORE_READ, fill_cb);
		j->ops[i].off = off;
		j->ops[i].len = len;
		j->ops[i].buf = jbuf(j, off);
		if (how == TIER__PR_FUA)
			j->ops[i].flags = TIER_STORE_F_FUA;
		tier__submit(e, e->base, &j->ops[i]);
	}
}

/*
 * The data is in and the object quiet: write the extents read that are
 * still invalid (a client may have written some meanwhile: those stay as
 * they are), each run a plain WRITE; the SETMETA follows.  Returns true if
 * the job ended here (nothing left to write, or no memory).
 */
static bool fill_write(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	uint64_t *plan = j->snap + e->nwords;
	struct tier_store_op *ops;
	size_t n = 0;
	bool any = false;

	tier__obj_fill_ready_end(e, o);
	if (o->state == TIER__ABSENT || !tier__obj_bits(o) || (o->flags & TIER__OF_VUNK)) {
		fill_end(j, false);   /* its version is unknown now: a SETMETA would guess */
		return true;
	}
	for (size_t w = 0; w < e->nwords; w++) {
		plan[w] = j->snap[w] & ~tier__obj_bits(o)[w];
		any |= plan[w] != 0;
	}
	if (any) {
		/* runs of the plan exactly: never merged over a valid extent */
		for (uint64_t i = 0; i < e->nbits; i++)
			n += tier__bit(plan, i) && (i == 0 || !tier__bit(plan, i - 1));
	}
	if (!n) {
		fill_end(j, true);   /* the client wrote all of it meanwhile */
		return true;
	}
	ops = calloc(n, sizeof(*ops));
	if (!ops) {
		fill_end(j, false);
		return true;
	}
	free(j->ops);
	j->ops = ops;
	j->nops = 0;
	for (uint64_t i = 0; i < e->nbits; i++) {
		uint64_t s;

		if (!tier__bit(plan, i) || (i > 0 && tier__bit(plan, i - 1)))
			continue;
		s = i;
		while (i + 1 < e->nbits && tier__bit(plan, i + 1))
			i++;
		tier__job_op(j, &ops[j->nops], TIER_STORE_WRITE, fill_cb);
		ops[j->nops].off = s * e->p.extent_size;
		ops[j->nops].len = ext_end(e, o, i) - s * e->p.extent_size;
		ops[j->nops].buf = jbuf(j, ops[j->nops].off);
		j->nops++;
	}
	tier__obj_excl_begin(e, o);
	j->step = FILL_WRITE;
	j->npending = j->nops;
	for (size_t i = 0; i < j->nops; i++)
		tier__submit(e, e->cache, &ops[i]);
	return false;
}

/*
 * Valid bits gain the plan, dirty bits as they are, the state's dirty flag
 * as it is, the version one up.  F_ORDERED: the filled bytes are durable
 * before a meta that calls them valid can be (else a cut leaves valid
 * extents of garbage over base's good bytes).  Guarded: the copy is the one
 * the engine knows.
 */
static void fill_setmeta(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	uint64_t *nv = j->snap + 2 * e->nwords;
	int ml;

	for (size_t w = 0; w < e->nwords; w++)
		nv[w] = tier__obj_bits(o)[w] | j->snap[e->nwords + w];
	j->version = o->version + 1;
	ml = tier__meta_encode_obj(e, o->state == TIER__DIRTY ? TIER_META_F_DIRTY : 0, j->version,
				   nv, tier__obj_bits(o) + e->nwords, j->meta);
	tier__job_op(j, &j->op, TIER_STORE_SETMETA, fill_cb);
	j->op.flags = TIER_STORE_F_META | TIER_STORE_F_GUARD | TIER_STORE_F_ORDERED;
	j->op.meta = j->meta;
	j->op.meta_len = ml > 0 ? (uint32_t)ml : 0;
	j->op.version = j->version;
	j->op.expect_version = o->version;
	j->step = FILL_SETMETA;
	if (ml < 0) {
		tier__obj_excl_end(e, o);
		fill_done(j, false);
		return;
	}
	tier__submit(e, e->cache, &j->op);
}

/* Data in: land now if the object is quiet, else hold new ops back until it is. */
static void fill_land(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;

	if ((o->flags & TIER__OF_EXCL) || o->nrun) {
		j->step = FILL_WAIT;
		tier__obj_fill_ready_begin(e, o);
		return;
	}
	if (fill_write(j)) {   /* it ended: j is gone */
		tier__obj_kick(e, o);
		tier__deliver(e);
	}
}

uint64_t tier__fill_brings(const struct tier_engine *e, const struct tier__obj *o, uint32_t off,
			   uint32_t len)
{
	uint64_t es = e->p.extent_size, end = (uint64_t)off + len;

	if (!e->nwords || !len || !(o->flags & (TIER__OF_FILLING | TIER__OF_PROMOTING)))
		return 0;
	for (const struct tier__job *j = e->fills; j; j = j->fnext) {
		bool all = true;

		if (j->obj != o)
			continue;
		for (uint64_t i = off / es; all && i < e->nbits && i * es < end; i++)
			all = (tier__obj_bits(o) && tier__bit(tier__obj_bits(o), i)) ||
			      tier__bit(j->snap, i);
		return all ? j->len : 0;   /* one fill job per object */
	}
	return 0;
}

void tier__fill_resume(struct tier_engine *e, struct tier__obj *o)
{
	for (struct tier__job *j = e->fills; j; j = j->fnext) {
		if (j->obj != o || j->step != FILL_WAIT)
			continue;
		fill_write(j);   /* the caller runs the queue next */
		return;
	}
}

static void fill_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	int r = op->result;

	switch (j->step) {
	case FILL_BARRIER:
		r = tier__base_barrier_done(e, r, j->ops_gen[1]);
		if (r < 0) {
			j->err = r;
			fill_done(j, false);
			return;
		}
		j->step = FILL_READ;
		fill_read(j);
		return;
	case FILL_READ:
		tier__base_latency(e, tier__eng_now_ns(e) - j->t_base);
		if (r == -ENOENT) {
			memset(op->buf, 0, op->len);   /* no base object: zeros */
			r = 0;
		}
		if (r < 0 && !j->err)
			j->err = r;
		if (--j->npending)
			return;
		if (j->err) {
			fill_done(j, false);
			return;
		}
		fill_land(j);
		return;
	case FILL_WRITE:
		if (r < 0 && !j->err)
			j->err = r;
		if (--j->npending)
			return;
		if (j->err) {
			/* only extents the meta calls invalid were touched: nothing to undo */
			tier__cache_error(e, j->err);
			tier__obj_excl_end(e, o);
			fill_done(j, false);
			return;
		}
		fill_setmeta(j);
		return;
	case FILL_CREATE:
		if (r < 0) {
			/* as a promotion's: EEXIST a leftover, EINVAL refused; STALE either way */
			if (r != -EEXIST && r != -EINVAL)
				tier__cache_error(e, r);
			tier__obj_stale_begin(e, o);
			j->err = r;
			fill_done(j, false);
			return;
		}
		if (tier__obj_alloc_bits(e, o) < 0) {   /* extent mode: it cannot fail */
			fill_done(j, false);
			return;
		}
		o->version = j->version;
		o->mtime_ms = tier__eng_now_ms(e);
		tier__obj_copy_known(e, o);
		tier__obj_set_state(e, o, TIER__CLEAN, j->snap, NULL);
		tier__count(e, j->img, fills, 1);
		tier__count(e, j->img, fill_bytes, j->len);
		fill_done(j, true);
		return;
	case FILL_SETMETA:
	default: {
		uint64_t before = tier__obj_cached_bytes(e, o);

		tier__obj_excl_end(e, o);
		if (r < 0) {
			/* not ECANCELED (nothing changed): the stored meta is uncertain */
			if (r != -ECANCELED) {
				tier__cache_error(e, r);
				tier__obj_vunk_begin(e, o);
			}
			j->err = r;
			fill_done(j, false);
			return;
		}
		o->version = j->version;
		tier__obj_set_state(e, o, o->state, j->snap + 2 * e->nwords, NULL);
		tier__obj_unsync_begin(e, o, TIER__OF_UNSYNC_C);
		tier__count(e, j->img, fills, 1);
		tier__count(e, j->img, fill_bytes, tier__obj_cached_bytes(e, o) - before);
		fill_done(j, true);
		return;
	}
	}
}

void tier__fill_start(struct tier_engine *e, struct tier_image *img, struct tier__obj *o,
		      uint32_t off, uint32_t len, const uint64_t *mask)
{
	struct tier__job *j;
	uint64_t bytes, lacks;
	size_t n;

	if (!tier__obj_bits(o) || o->state == TIER__ABSENT ||
	    (o->flags & (TIER__OF_FILLING | TIER__OF_VUNK | TIER__OF_EVICTING)))
		return;
	lacks = window_lacks(e, o, off, len, mask, NULL, &bytes);
	if (!lacks)
		return;
	j = tier__job_new(e, TIER__J_FILL, img, o);
	if (!j)
		goto nomem;
	j->snap = calloc(3 * e->nwords, 8);   /* extents read, to write, new valid */
	if (!j->snap)
		goto nomem;
	window_lacks(e, o, off, len, mask, j->snap, &bytes);
	if (job_span_buf(j, j->snap) < 0)
		goto nomem;
	n = read_runs(e, o, j->snap, NULL, &bytes);
	j->ops = calloc(n, sizeof(*j->ops));
	if (!j->ops)
		goto nomem;
	j->nops = read_runs(e, o, j->snap, j->ops, &bytes);
	/* the bytes it adds are admitted, not yet cached: they count as full */
	j->len = lacks;
	tier__obj_fill_begin(e, o, j->len);
	j->fnext = e->fills;
	e->fills = j;
	j->step = FILL_BARRIER;
	fill_read(j);
	return;
nomem:
	tier__job_free(j);
	tier__count(e, img, fill_failed, 1);
}

/* ---- read fills: the data a proxied read brought from base ---- */

/*
 * The whole extents of [off, off + len) (the object's last one counts whole
 * if the range reaches the object's end) that o's copy lacks (every one if
 * there is no copy), into want if given; returns their bytes.
 */
static uint64_t read_blocks(const struct tier_engine *e, const struct tier__obj *o,
			    uint32_t off, uint32_t len, uint64_t *want)
{
	uint64_t es = e->p.extent_size, end = (uint64_t)off + len, b = 0, olen = tier__obj_len(e, o);
	uint64_t fe = (off + es - 1) / es, le = end >= olen ? (olen + es - 1) / es : end / es;

	for (uint64_t i = fe; i < le && i < e->nbits; i++) {
		if (tier__obj_bits(o) && tier__bit(tier__obj_bits(o), i))
			continue;
		if (want)
			tier__bit_set(want, i);
		b += ext_end(e, o, i) - i * es;
	}
	return b;
}

/*
 * Safe only if nothing can change base under the read: no other shared op
 * on o now (a proxied write started earlier could land after the read saw
 * base, and a clean extent of the old bytes would then shadow it), and
 * from now on FILLING (a copy) or PROMOTING (no copy) holds back every op
 * that would change base or drop the copy, as for any fill or promotion.
 * Base's bytes must be durable before the copy can call them clean: the
 * read is FUA where a promotion's would be (tier__decide_promote_read), and
 * an unsynced base remove (a promotion would send a barrier first) means
 * no read fill now.  A copy of ABSENT o is created by one WRITE, as a
 * promotion's (F_EXCL, F_ORDERED, a CLEAN meta whose valid bits are the
 * read's extents); a partly valid copy takes the fill's landing (the
 * object quiet, the extents still invalid, a guarded ordered SETMETA).
 */
enum tier__rfill tier__rfill_start(struct tier_engine *e, struct tier_image *img,
				   struct tier__obj *o, struct tier__ext *x)
{
	bool absent = o->state == TIER__ABSENT;
	enum tier__promote_read how;
	struct tier__job *j;
	uint64_t lacks;

	if (!e->nwords || (!absent && !tier__obj_bits(o)))
		return TIER__RF_NONE;
	if (o->nrun ||
	    (o->flags & (TIER__OF_FILLING | TIER__OF_FQUEUED | TIER__OF_PROMOTING |
			 TIER__OF_PQUEUED | TIER__OF_EVICTING | TIER__OF_EVICT_AFTER_FLUSH |
			 TIER__OF_VUNK | TIER__OF_STALE | TIER__OF_EXCL)))
		return TIER__RF_BUSY;
	how = tier__decide_promote_read(e->rm_gen[1] != e->rm_synced[1],
					o->flags & TIER__OF_UNSYNC_B, o->nsync != 0);
	if (how == TIER__PR_BARRIER_FIRST)
		return TIER__RF_UNSYNCED;
	lacks = read_blocks(e, o, x->off, x->len, NULL);
	if (!lacks)
		return TIER__RF_PARTIAL;
	j = tier__job_new(e, TIER__J_FILL, img, o);
	if (!j)
		goto nomem;
	j->snap = calloc(3 * e->nwords, 8);   /* extents read, to write, new valid */
	if (!j->snap)
		goto nomem;
	read_blocks(e, o, x->off, x->len, j->snap);
	if (job_span_buf(j, j->snap) < 0)
		goto nomem;
	/* the bytes it adds are admitted, not yet cached: they count as full */
	j->len = lacks;
	j->rf_create = absent;
	if (absent)
		tier__obj_promote_begin(e, o, j->len);
	else
		tier__obj_fill_begin(e, o, j->len);
	j->fnext = e->fills;
	e->fills = j;
	j->step = FILL_CLIENT;
	x->rfill = how == TIER__PR_FUA ? 2 : 1;
	return TIER__RF_STARTED;
nomem:
	tier__job_free(j);
	tier__count(e, img, fill_failed, 1);
	return TIER__RF_NONE;
}

void tier__rfill_count(struct tier_engine *e, struct tier_image *img, enum tier__rfill r)
{
	switch (r) {
	case TIER__RF_BUSY: tier__count(e, img, fill_skip_busy, 1); break;
	case TIER__RF_UNSYNCED: tier__count(e, img, fill_skip_unsynced, 1); break;
	case TIER__RF_PARTIAL: tier__count(e, img, fill_skip_partial, 1); break;
	case TIER__RF_STARTED:
	case TIER__RF_NONE: break;
	}
}

/* The new copy of a read fill: one WRITE of the read's extents, data and meta. */
static void rfill_create(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	uint64_t es = e->p.extent_size, fe = e->nbits, le = 0;
	int ml;

	for (uint64_t i = 0; i < e->nbits; i++) {
		if (!tier__bit(j->snap, i))
			continue;
		if (fe == e->nbits)
			fe = i;
		le = i;
	}
	j->version = 1;
	/* valid: the read's extents (one run), dirty: none (snap's third part is zero) */
	ml = tier__meta_encode_obj(e, 0, j->version, j->snap, j->snap + 2 * e->nwords, j->meta);
	tier__job_op(j, &j->op, TIER_STORE_WRITE, fill_cb);
	j->op.flags = TIER_STORE_F_EXCL | TIER_STORE_F_META | TIER_STORE_F_ORDERED;
	j->op.off = fe * es;
	j->op.len = ext_end(e, o, le) - fe * es;
	j->op.buf = jbuf(j, j->op.off);
	j->op.meta = j->meta;
	j->op.meta_len = ml > 0 ? (uint32_t)ml : 0;
	j->op.version = j->version;
	j->step = FILL_CREATE;
	if (ml < 0) {
		fill_end(j, false);
		return;
	}
	tier__submit(e, e->cache, &j->op);
}

void tier__rfill_read_done(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x,
			   int result)
{
	uint64_t es = e->p.extent_size;
	struct tier__job *j = e->fills;

	x->rfill = 0;
	while (j && (j->obj != o || j->step != FILL_CLIENT))
		j = j->fnext;
	if (!j)
		return;
	if (result == -ENOENT) {
		/* no base object: caching its zeros would turn a hole into data */
		fill_end(j, true);   /* the caller runs o's queue */
		return;
	}
	if (result < 0) {
		fill_end(j, false);
		return;
	}
	for (uint64_t i = 0; i < e->nbits; i++)
		if (tier__bit(j->snap, i))
			memcpy(jbuf(j, i * es), x->buf + (i * es - x->off),
			       ext_end(e, o, i) - i * es);
	if (j->rf_create) {
		rfill_create(j);
		return;
	}
	if ((o->flags & TIER__OF_EXCL) || o->nrun) {
		j->step = FILL_WAIT;
		tier__obj_fill_ready_begin(e, o);
		return;
	}
	fill_write(j);   /* ended or not, the caller runs o's queue */
}
