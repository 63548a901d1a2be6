/* SPDX-License-Identifier: MIT */
/*
 * libtier/hint.c - internal pieces queued behind client pieces: a
 * promotion hint behind a proxied miss (tier__hint_promote), and a fill
 * hint behind a read that needed base for part of a cached copy
 * (tier__hint_maybe_fill: the window fill_window picks, paid from the
 * fills' budget with the throttle guarding base, else a read fill of the
 * read's own extents) or behind a read of a copy being made
 * (tier__hint_behind_copy).  One fill hint per object: a later read's
 * window joins its want set (fill_hint_add).  A hint reserves the bytes it
 * will add against the target until its job takes them over.  Whether to
 * fill is decide.c's; the job is fill.c's.  It must never queue a second
 * fill hint on an object, nor charge the budget or reserve bytes for
 * extents the hint does not add.
 */
#include <string.h>

#include "libtier/decide.h"
#include "libtier/engine_int.h"
#include "libtier/route.h"

/*
 * Queue a background promotion behind the extents already queued on o: it
 * starts once they are done, so it copies base as they left it.  It was
 * admitted, so it holds a reservation against the target until it starts.
 */
void tier__hint_promote(struct tier_engine *e, struct tier__obj *o, struct tier_image *img)
{
	struct tier__ext *h = tier__ext_alloc(e);

	if (!h)
		return;
	h->img = img;
	h->obj = o;
	h->type = TIER_REQ_CACHE;
	tier__resv_take(e, h, tier__obj_len(e, o), true);
	tier__obj_pqueue_begin(e, o);
	e->exts_inflight++;
	tier__q_push_tail(o, h);
}

/*
 * The window a fill copies around the read x.  While every extent the copy
 * lacks fits below cache_target_full_ratio (admitted bytes included), all of
 * them: the room is free, and the rest of a hot object is the likeliest
 * next read.  Under pressure only the aligned fill_window bytes (rounded up
 * to whole extents) holding x, so a fill evicts no more than it must.
 * fill_window 0 (or at least the object): always all of them.
 */
static void fill_window(const struct tier_engine *e, const struct tier__obj *o,
			const struct tier__ext *x, uint32_t *off, uint32_t *len)
{
	uint64_t es = e->p.extent_size, w = (e->p.fill_window + es - 1) / es * es;
	uint64_t s, t;
	double room = e->p.cache_target_full_ratio - tier__full_ratio(e);

	if (w && w < tier__obj_len(e, o) && e->p.target_max_bytes) {
		bool fits = (double)tier__fill_bytes(e, o, 0, tier__obj_len(e, o), NULL, NULL) <
			    room * (double)e->p.target_max_bytes;
		bool seq = tier__read_continues(e, o, x);

		if (tier__decide_fill_whole(&e->p, fits, seq,
					    tier__popcount(tier__obj_bits(o), e->nwords), e->nbits))
			w = 0;
	}
	if (!w || w >= tier__obj_len(e, o)) {
		*off = 0;
		*len = tier__obj_len(e, o);
		return;
	}
	s = x->off / w * w;
	t = ((uint64_t)x->off + x->len + w - 1) / w * w;
	*off = (uint32_t)s;
	*len = (uint32_t)((t < tier__obj_len(e, o) ? t : tier__obj_len(e, o)) - s);
}

/* Mark the extents of [off, off + len) in a fill hint's want set. */
static void want_window(const struct tier_engine *e, uint64_t *want, uint32_t off, uint32_t len)
{
	uint64_t es = e->p.extent_size, end = (uint64_t)off + len;

	for (uint64_t i = off / es; i < e->nbits && i * es < end; i++)
		tier__bit_set(want, i);
}

/*
 * Queue a fill hint behind the read that needed base for part of o's copy
 * (tier__decide_fill said go, the throttle allowed): it starts once the
 * pieces queued before it are done and copies the extents of its want set
 * (h->nbits: [off, off + len) here, more if later reads add theirs,
 * fill_hint_add) the copy lacks.  The bytes it will add are reserved
 * against the target until the fill job takes them over.
 */
static void queue_fill(struct tier_engine *e, struct tier__obj *o, struct tier_image *img,
		       uint32_t off, uint32_t len)
{
	struct tier__ext *h = tier__ext_alloc(e);

	if (!h)
		return;
	h->img = img;
	h->obj = o;
	h->type = TIER__REQ_FILL;
	h->off = off;
	h->len = len;
	if (h->nbits) {
		memset(h->nbits, 0, e->nwords * 8);
		want_window(e, h->nbits, off, len);
	}
	tier__resv_take(e, h, tier__fill_bytes(e, o, off, len, NULL, NULL), false);
	tier__obj_fqueue_begin(e, o);
	e->exts_inflight++;
	tier__q_push_tail(o, h);
}

/* The fill hint queued on o (FQUEUED: one). */
static struct tier__ext *queued_fill(const struct tier__obj *o)
{
	for (struct tier__ext *h = o->qhead; h; h = h->next)
		if (h->type == TIER__REQ_FILL)
			return h;
	return NULL;
}

/*
 * A read that needed base while o's fill hint waits in the queue (behind
 * a running fill, or behind pieces ahead of it): its window joins the
 * hint's want set, so the one fill that hint starts brings it too.  A hint
 * per read would queue fills one behind another, and every piece behind
 * them would wait for each to land; none (as before) left the read's
 * extents out of the copy, and their next read missed again where an LRU
 * of blocks hits (shift@25%: docs/BENCHMARKS.md,
 * "The policy suite").  The budget pays, and the hint reserves, only what the
 * window adds to the set.
 */
static void fill_hint_add(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x,
			  struct tier__ext *h, uint32_t off, uint32_t len)
{
	uint64_t end = (uint64_t)off + len, hend = (uint64_t)h->off + h->len, add, r0, r1;
	uint32_t noff = off < h->off ? off : h->off;
	uint32_t nlen = (uint32_t)((end > hend ? end : hend) - noff);
	struct tier__ext *t = tier__ext_alloc(e);   /* its bitmap storage: the new set */

	if (!t)
		return;
	memcpy(t->nbits, h->nbits, e->nwords * 8);
	want_window(e, t->nbits, off, len);
	/* what the copy lacks of the set, and reads from base, before and after */
	add = tier__fill_bytes(e, o, noff, nlen, t->nbits, &r1) -
	      tier__fill_bytes(e, o, h->off, h->len, h->nbits, &r0);
	/* the budget pays what it adds; the throttle guards base: what it reads more */
	if (add && tier__fill_tokens(e, x->img, r1 > r0 ? r1 - r0 : 0, add)) {
		memcpy(h->nbits, t->nbits, e->nwords * 8);
		tier__resv_take(e, h, h->resv + add, false);
		h->off = noff;
		h->len = nlen;
	}
	tier__ext_free(e, t);
}

/*
 * A read of an object whose first copy is being made (decide_read): a fill
 * hint of the read's whole extents, queued behind it, waits for the copy
 * and then reads them from base again; the budget pays for that read.
 */
void tier__hint_behind_copy(struct tier_engine *e, struct tier__obj *o,
			     const struct tier__ext *x)
{
	uint64_t es = e->p.extent_size, s = (x->off + es - 1) / es * es;
	uint64_t t = (uint64_t)x->off + x->len;

	t = t >= tier__obj_len(e, o) ? tier__obj_len(e, o) : t / es * es;
	if (t <= s)
		return;   /* no whole extent */
	if (tier__fill_tokens(e, x->img, t - s, t - s))
		queue_fill(e, o, x->img, (uint32_t)s, (uint32_t)(t - s));
}

/*
 * Bytes of the window [off, off + len) o's copy lacks outside the whole
 * extents the read x brings: what a fill would read from base that x does
 * not read already.
 */
static uint64_t window_beyond_read(const struct tier_engine *e, const struct tier__obj *o,
				   const struct tier__ext *x, uint32_t off, uint32_t len)
{
	uint64_t es = e->p.extent_size, end = (uint64_t)off + len;
	uint64_t rs = (x->off + es - 1) / es * es, rt = (uint64_t)x->off + x->len;
	uint64_t b = 0;

	rt = rt >= tier__obj_len(e, o) ? tier__obj_len(e, o) : rt / es * es;
	if (rt <= rs)
		return tier__fill_bytes(e, o, off, len, NULL, NULL);
	if (off < rs)
		b += tier__fill_bytes(e, o, off, (uint32_t)((rs < end ? rs : end) - off), NULL, NULL);
	if (end > rt)
		b += tier__fill_bytes(e, o, (uint32_t)(rt > off ? rt : off),
				      (uint32_t)(end - (rt > off ? rt : off)), NULL, NULL);
	return b;
}

/*
 * After a read that needed base for part of a cached copy (admitted:
 * GO): the fill of its window, or if that window holds nothing beyond what
 * the read brings itself, or the throttle refuses the base reads, a read
 * fill of the read's own extents (no base read of its own).  Otherwise
 * count why not.
 */
void tier__hint_maybe_fill(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x,
		       enum tier__fill f)
{
	uint32_t off, len;
	uint64_t read;

	switch (f) {
	case TIER__FILL_GO:
		fill_window(e, o, x, &off, &len);
		if (o->flags & TIER__OF_FQUEUED) {
			struct tier__ext *h = queued_fill(o);

			if (h && h->nbits)
				fill_hint_add(e, o, x, h, off, len);
			break;
		}
		tier__fill_bytes(e, o, off, len, NULL, &read);
		if (!window_beyond_read(e, o, x, off, len) &&
		    tier__rfill_start(e, x->img, o, x) == TIER__RF_STARTED)
			break;   /* the read brings all the window lacks */
		/* the budget pays what it adds; the throttle guards base: what it reads */
		if (tier__fill_tokens(e, x->img, read, tier__fill_bytes(e, o, off, len, NULL, NULL)))
			queue_fill(e, o, x->img, off, len);
		else   /* throttled: the read's own extents */
			tier__rfill_count(e, x->img, tier__rfill_start(e, x->img, o, x));
		break;
	case TIER__FILL_SKIP_COLD: tier__count(e, x->img, fill_skip_cold, 1); break;
	case TIER__FILL_SKIP_FULL: tier__count(e, x->img, fill_skip_full, 1); break;
	case TIER__FILL_SKIP_DEGRADED: tier__count(e, x->img, fill_skip_degraded, 1); break;
	case TIER__FILL_NONE:
	case TIER__FILL_BEHIND_COPY: break;   /* proxied reads only (try_start) */
	}
}

/*
 * A piece's extents the copy lacks are all on their way in: a fill in
 * flight brings them, or the fill hint queued on the object (a read
 * miss's, admitted before this piece) wants them.  A write goes ahead of
 * that fill into the copy either way (a fill leaves extents made valid
 * meanwhile alone); this only says how it counts.  A read adds nothing to
 * the hint then (decide.c).
 */
bool tier__hint_fill_admitted(const struct tier_engine *e, const struct tier__obj *o,
			  const struct tier__ext *x)
{
	uint64_t es = e->p.extent_size, end = (uint64_t)x->off + x->len;
	const struct tier__ext *h;

	if (!tier__obj_bits(o) || !(o->flags & (TIER__OF_FILLING | TIER__OF_PROMOTING |
						 TIER__OF_FQUEUED)))
		return false;
	if (tier__fill_brings(e, o, x->off, x->len))
		return true;
	if (!(o->flags & TIER__OF_FQUEUED) || !(h = queued_fill(o)) || !h->nbits)
		return false;
	for (uint64_t i = x->off / es; i < e->nbits && i * es < end; i++)
		if (!tier__bit(tier__obj_bits(o), i) && !tier__bit(h->nbits, i))
			return false;
	return true;
}
