/* SPDX-License-Identifier: MIT */
/*
 * libtier/dispatch.c - per-object queues and the client data path: for each
 * per-object piece of a request at the moment it reaches the head of its
 * object's queue, it asks decide.c for the route (tier__decide: hit, proxy,
 * promotion, cache write, drop, wait...) and runs the store ops of that
 * route.  No routing rule lives here.  Shared ops (reads,
 * proxied writes) of one object overlap; exclusive ones (cache writes,
 * drops) run alone; a write never waits on a promotion it could proxy
 * around, but one queued behind a running promotion or eviction waits.  Over
 * target, extent mode, a write touching only extents the cache lacks goes to
 * base; admitted bytes not yet in the cache are reserved against the target
 * until they land.  A cache write on an object being flushed tells the flush
 * which extents it dirties again.  A read that needed base for part of a
 * cached copy may queue a fill behind it (fill.c), as a proxied miss queues
 * a promotion.  It must never acknowledge a write before
 * the store acknowledged it, and never let a cache copy diverge from base
 * while it is marked CLEAN.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/decide.h"
#include "libtier/engine_int.h"

/* Steps of a piece (x->step), per route. */
enum xstep {
	XS_NONE = 0,
	XS_READ_CACHE = 1,        /* read of the piece from the cache copy */
	XS_READ_RUNS = 2,         /* base reads of the runs the copy lacks (extent mode) */
	XS_READ_BASE = 3,         /* one base read of the whole piece */
	XS_DROP_BASE = 10,        /* REMOVE of the base object, then XS_DROP_CACHE */
	XS_DROP_CACHE = 11,       /* REMOVE of the cache copy, then done */
	XS_DROP_THEN_PROXY = 12,  /* REMOVE of the cache copy, then the proxied op */
	XS_PROXY_NEW = 20,        /* proxied op on extents no copy holds (o->nproxy) */
};

/* ---- ext pool: no per-request malloc on the hot path ---- */

struct tier__ext *tier__ext_alloc(struct tier_engine *e)
{
	struct tier__ext *x = e->free_ext;

	if (!x) {
		enum { N = 32 };
		void **nc = realloc(e->chunks, (e->n_chunks + 1) * sizeof(*nc));
		char *c;

		if (!nc)
			return NULL;
		e->chunks = nc;
		c = malloc(N * e->ext_size);
		if (!c)
			return NULL;
		e->chunks[e->n_chunks++] = c;
		for (int i = N - 1; i >= 0; i--) {
			x = (struct tier__ext *)(void *)(c + (size_t)i * e->ext_size);
			x->next = e->free_ext;
			e->free_ext = x;
		}
		x = e->free_ext;
	}
	e->free_ext = x->next;
	memset(x, 0, sizeof(*x));
	x->e = e;
	x->nbits = e->nwords ? (uint64_t *)(void *)(x->mem + 2 * e->meta_cap) : NULL;
	return x;
}

void tier__ext_free(struct tier_engine *e, struct tier__ext *x)
{
	tier__resv_put(e, x);
	if (x->bounce) {   /* rare: the common path calls no allocator at all */
		free(x->bounce);
		x->bounce = NULL;
	}
	x->next = e->free_ext;
	e->free_ext = x;
}

void tier__ext_pool_fini(struct tier_engine *e)
{
	for (size_t i = 0; i < e->n_chunks; i++)
		free(e->chunks[i]);
	free(e->chunks);
	e->chunks = NULL;
	e->n_chunks = 0;
	e->free_ext = NULL;
}

void tier__ext_finish(struct tier_engine *e, struct tier__ext *x, int err)
{
	if (x->req && err < 0 && err != -EROFS && err != -EINVAL &&
	    (e->o.log || e->o.log_rec)) {
		/* what the client will see: the pool of the piece's last store op */
		char oid[TIER_OID_MAX];

		tier__oid(x->img, TIER__KEY_OBJNO(x->obj->key), oid);
		tier__log_fail(e, TIER_LOG_ERROR, tier__el_of_req(x->type), x->img, oid,
			       tier_store_op_store(&x->op), err,
			       "; returned to the client (offset %llu, %u bytes)",
			       (unsigned long long)(TIER__KEY_OBJNO(x->obj->key) *
						    e->p.object_size + x->off), x->len);
	}
	if (x->req)
		tier__req_put(e, x->req, err);
	e->exts_inflight--;
	tier__ext_free(e, x);
}

static void q_push_tail(struct tier__obj *o, struct tier__ext *x)
{
	struct tier__ext **pp = &o->qhead;

	while (*pp)
		pp = &(*pp)->next;
	x->next = NULL;
	*pp = x;
}

static void q_push_head(struct tier__obj *o, struct tier__ext *x)
{
	x->next = o->qhead;
	o->qhead = x;
}

static void q_pop(struct tier__obj *o, struct tier__ext *x)
{
	o->qhead = x->next;
	x->next = NULL;
}

static void op_init(struct tier__ext *x, enum tier_store_opcode opc, tier_store_cb cb)
{
	struct tier_store_op *op = &x->op;

	memset(op, 0, sizeof(*op));
	op->opcode = opc;
	op->cb = cb;
	op->priv = x;
	tier__oid(x->img, TIER__KEY_OBJNO(x->obj->key), op->oid);
}

static uint32_t fua(const struct tier__ext *x)
{
	return x->req && (x->req->flags & TIER_REQ_F_FUA) ? TIER_STORE_F_FUA : 0;
}

static void ext_submit(struct tier_engine *e, struct tier_store *st, struct tier__ext *x)
{
	if (st == e->base)
		x->t_base = tier__eng_now_ns(e);
	tier__submit(e, st, &x->op);
}

/* ---- reads ---- */

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
	op_init(x, TIER_STORE_READ, read_cb);
	x->op.off = off;
	x->op.len = len;
	x->op.buf = x->buf + (off - x->off);
	if (!from_cache && x->rfill == 2)
		x->op.flags = TIER_STORE_F_FUA;   /* it feeds a read fill: as a promotion reads */
	ext_submit(e, from_cache ? e->cache : e->base, x);
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

/* The piece's access counts (once): hitsets, and the policy if cached. */
static void record_access(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x)
{
	if ((x->seen & 1) || !x->req)
		return;
	x->seen |= 1;
	tier__hitsets_insert(e->hs, o->key);
	if (e->p.admission == TIER_ADMIT_TINYLFU)
		tier__sketch_add(e->sk, o->key);
	if (o->state != TIER__ABSENT)
		tier__obj_policy_access(e, o);
	if (x->type == TIER_REQ_READ || x->type == TIER_REQ_WRITE)
		tier__obj_reference(e, o, x->off, x->len);   /* extent-aware eviction */
}

static bool range_all_valid(const struct tier_engine *e, const struct tier__obj *o,
			    uint32_t off, uint32_t len)
{
	uint64_t es = e->p.extent_size;

	if (!tier__obj_bits(o))
		return true;
	for (uint64_t i = off / es; i <= ((uint64_t)off + len - 1) / es; i++)
		if (!tier__bit(tier__obj_bits(o), i))
			return false;
	return true;
}

static bool range_any_valid(const struct tier_engine *e, const struct tier__obj *o,
			    uint32_t off, uint32_t len)
{
	uint64_t es = e->p.extent_size;

	if (!tier__obj_bits(o))
		return true;
	for (uint64_t i = off / es; i <= ((uint64_t)off + len - 1) / es; i++)
		if (tier__bit(tier__obj_bits(o), i))
			return true;
	return false;
}

/*
 * Queue a background promotion behind the extents already queued on o: it
 * starts once they are done, so it copies base as they left it.  It was
 * admitted, so it holds a reservation against the target until it starts.
 */
static void queue_promotion(struct tier_engine *e, struct tier__obj *o, struct tier_image *img)
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
	q_push_tail(o, h);
}

/*
 * A sequential stream: the read x starts where one of the last 16 client
 * reads ended (Linux's readahead asks the same).  A random read lands there
 * by chance about never; a valid extent just before it would not do (at a
 * copy's density d a random read finds one with probability d).
 */
static bool read_continues(const struct tier_engine *e, const struct tier__obj *o,
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
		bool seq = read_continues(e, o, x);

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
	q_push_tail(o, h);
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
static void fill_behind_copy(struct tier_engine *e, struct tier__obj *o,
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
static void maybe_fill(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x,
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

static void start_read(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x,
		       enum tier__route route)
{
	bool stream = false;

	q_pop(o, x);
	o->nrun++;
	x->pos = x->off;
	if (x->req) {
		stream = read_continues(e, o, x);
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
			queue_promotion(e, o, x->img);
		x->step = XS_READ_BASE;
		read_issue(e, x, false, x->off, x->len);
	}
}

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
static void start_proxy_write(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x)
{
	bool whole = x->off == 0 && x->len == tier__obj_len(e, o);

	o->nrun++;
	if (x->step == XS_PROXY_NEW || o->state == TIER__ABSENT) {
		x->step = XS_PROXY_NEW;
		o->nproxy++;
	}
	if (x->type == TIER_REQ_WRITE) {
		op_init(x, TIER_STORE_WRITE, proxy_cb);
		x->op.buf = x->buf;
		tier__count(e, x->img, proxy_writes, 1);
		tier__count(e, x->img, proxy_write_bytes, x->len);
	} else {
		op_init(x, whole ? TIER_STORE_REMOVE : TIER_STORE_ZERO, proxy_cb);
	}
	x->op.flags = fua(x);
	if (x->op.opcode != TIER_STORE_REMOVE) {
		x->op.off = x->off;
		x->op.len = x->len;
	}
	ext_submit(e, e->base, x);
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
		op_init(x, TIER_STORE_WRITE, cw_cb);
		x->op.buf = x->bounce;
		x->op.off = x->s;
		x->op.len = x->t - x->s;
	} else {
		op_init(x, x->type == TIER_REQ_WRITE ? TIER_STORE_WRITE : TIER_STORE_ZERO, cw_cb);
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
					    fua(x) != 0);
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
	ext_submit(e, e->cache, x);
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

static void start_cache_write(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x)
{
	uint64_t es = e->p.extent_size;

	q_pop(o, x);
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
			op_init(x, TIER_STORE_READ, cw_fill_cb);
			x->op.off = x->s;
			x->op.len = x->t - x->s;
			x->op.buf = x->bounce;
			ext_submit(e, e->base, x);
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
		q_push_head(o, x);
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
		op_init(x, TIER_STORE_REMOVE, drop_cb);
		x->op.flags = TIER_STORE_F_FUA;   /* see start_drop */
		ext_submit(e, e->cache, x);
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
		start_proxy_write(e, o, x);
	}
	tier__obj_kick(e, o);
out:
	tier__deliver(e);
}

static void start_drop(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x,
		       bool with_base)
{
	q_pop(o, x);
	tier__obj_excl_begin(e, o);
	x->step = with_base ? XS_DROP_BASE : XS_DROP_THEN_PROXY;
	op_init(x, TIER_STORE_REMOVE, drop_cb);
	/*
	 * Both removes are durable at once, FUA or not.  The cache copy: once
	 * it is gone base is authoritative, and a copy coming back after a
	 * power cut would serve old bytes over whatever base gets next.  The
	 * base object (whole-object trim of a cached object): the cache copy
	 * may be the only holder of flushed data, so base must not come back
	 * with older bytes once that copy is gone.
	 */
	x->op.flags = TIER_STORE_F_FUA;
	ext_submit(e, with_base ? e->base : e->cache, x);
}

static bool any_clean_valid(const struct tier_engine *e, const struct tier__obj *o)
{
	for (size_t w = 0; tier__obj_bits(o) && w < e->nwords; w++)
		if (tier__obj_bits(o)[w] & ~tier__obj_bits(o)[e->nwords + w])
			return true;
	return false;
}

static bool range_any_dirty(const struct tier_engine *e, const struct tier__obj *o,
			    uint32_t off, uint32_t len)
{
	uint64_t es = e->p.extent_size;

	if (o->state != TIER__DIRTY)
		return false;
	if (!tier__obj_bits(o))
		return true;
	for (uint64_t i = off / es; i <= ((uint64_t)off + len - 1) / es; i++)
		if (tier__bit(tier__obj_bits(o) + e->nwords, i))
			return true;
	return false;
}

/* TinyLFU: the miss's estimated frequency (this access included) and the victim's. */
static void tinylfu_state(struct tier_engine *e, const struct tier__obj *o,
			  const struct tier__ext *x, struct tier__dstate *s)
{
	unsigned f = tier__sketch_estimate(e->sk, o->key);
	uint64_t victim;

	if (!(x->seen & 1))
		f++;
	s->freq = (uint8_t)(f > 15 ? 15 : f);
	if (e->pol->ops->coldest(e->pol, &victim, 1, NULL, NULL) == 1)
		s->victim_freq = (uint8_t)tier__sketch_estimate(e->sk, victim);
}

/*
 * A piece's extents the copy lacks are all on their way in: a fill in
 * flight brings them, or the fill hint queued on the object (a read
 * miss's, admitted before this piece) wants them.  A write goes ahead of
 * that fill into the copy either way (a fill leaves extents made valid
 * meanwhile alone); this only says how it counts.  A read adds nothing to
 * the hint then (decide.c).
 */
static bool fill_admitted(const struct tier_engine *e, const struct tier__obj *o,
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

/* What tier__decide may look at, for the piece x at the head of o's queue. */
static void fill_state(struct tier_engine *e, const struct tier__obj *o,
		       const struct tier__ext *x, struct tier__dstate *s)
{
	bool cache_hint = x->type == TIER_REQ_CACHE || x->type == TIER__REQ_FILL;
	bool partial_read = false;

	memset(s, 0, sizeof(*s));
	s->type = x->type;
	s->whole = x->off == 0 && x->len == tier__obj_len(e, o);
	s->nocache = x->nocache;
	s->tries = x->tries;
	s->state = o->state;
	s->flags = o->flags;
	s->nrun = o->nrun;
	s->nproxy = o->nproxy;
	s->extents = tier__obj_bits(o) != NULL;
	if (tier__obj_bits(o) && !cache_hint) {
		s->all_valid = range_all_valid(e, o, x->off, x->len);
		s->any_valid = range_any_valid(e, o, x->off, x->len);
		partial_read = x->type == TIER_REQ_READ && o->state != TIER__ABSENT && !s->all_valid;
	}
	if (tier__obj_bits(o) && x->type == TIER__REQ_FILL)   /* its want set */
		s->obj_all_valid = !tier__fill_bytes(e, o, x->off, x->len, x->nbits, NULL);
	s->bitmaps = e->nwords != 0;
	s->degraded = tier__degraded(e);
	s->cache_down = tier__cache_down(e);
	if (s->cache_down && !cache_hint)
		s->any_dirty = range_any_dirty(e, o, x->off, x->len);
	if (s->whole && o->state == TIER__DIRTY)
		s->clean_extents = any_clean_valid(e, o);
	if (x->type == TIER_REQ_READ && x->req && !x->nocache && !s->all_valid &&
	    (o->flags & (TIER__OF_FILLING | TIER__OF_PROMOTING)))
		s->fill_brings = tier__fill_brings(e, o, x->off, x->len);
	if (x->type == TIER_REQ_WRITE && x->req && !x->nocache && !s->all_valid)
		s->fill_admitted = fill_admitted(e, o, x);
	if (partial_read && x->req && !x->nocache && (o->flags & TIER__OF_FQUEUED)) {
		s->fill_admitted = fill_admitted(e, o, x);
		s->seq = read_continues(e, o, x);
	}
	if (cache_hint)
		s->full_less_own = tier__full_ratio_less(e, x->resv, x->resv_obj);
	else
		s->full = tier__full_ratio(e);
	/*
	 * admission looks at these for misses only, and a fill for reads of
	 * extents the copy lacks (before the access is recorded).  A piece is
	 * offered for admission until its access is recorded (a decision to
	 * wait records nothing: a write miss waiting for reads on base is
	 * offered again when they are done); one decided again after that (its
	 * promotion failed, or it waited and the copy went meanwhile) is not
	 * admitted, or a promotion failing on a sick base would be retried for
	 * the same write forever.
	 */
	if (((o->state == TIER__ABSENT && !cache_hint) || partial_read) && !(x->seen & 1) &&
	    x->req) {
		unsigned n = (unsigned)(x->type == TIER_REQ_READ ? e->p.min_read_recency_for_promote :
						      e->p.min_write_recency_for_promote);

		s->offered = true;
		s->recent = tier__hitsets_recent(e->hs, o->key, n);
		s->hint = !s->recent && e->pol->ops->admit && e->pol->ops->admit(e->pol, o->key);
		if (e->p.admission == TIER_ADMIT_TINYLFU && (s->recent || s->hint) &&
		    s->full >= e->p.cache_target_full_ratio)
			tinylfu_state(e, o, x, s);
	}
}

static const char *const type_names[] = { "read", "write", "trim", "zero", "flush", "cache",
					  "fill" };

static void trace_route(struct tier_engine *e, const struct tier__obj *o,
			const struct tier__ext *x, const struct tier__decision *d)
{
	char oid[TIER_OID_MAX];

	tier__oid(x->img, TIER__KEY_OBJNO(o->key), oid);
	tier__log(e, TIER_LOG_DEBUG, "%s %s +%u len %u: %s (%s)%s%s%s",
		  x->type < sizeof(type_names) / sizeof(type_names[0]) ? type_names[x->type] : "?",
		  oid, x->off, x->len, tier__route_name(d->route), d->why,
		  d->fill != TIER__FILL_NONE ? "; fill: " : "", tier__fill_name(d->fill),
		  d->count == TIER__C_MISS && !(x->seen & 2) ? "; a write miss" : "");
}

/* Complete the piece at the head without store I/O (DONE, FAIL, a failed flush-first). */
static void finish_now(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x, int err)
{
	q_pop(o, x);
	if (x->type == TIER_REQ_CACHE && !x->req)
		tier__obj_pqueue_end(e, o);
	if (x->type == TIER__REQ_FILL)
		tier__obj_fqueue_end(e, o);
	tier__ext_finish(e, x, err);
}

static void proxy_now(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x)
{
	q_pop(o, x);
	start_proxy_write(e, o, x);
}

/*
 * Decide the route of the piece at the head of o's queue and start it.
 * Returns false if it stays queued (WAIT), true if it left the queue.
 */
static bool try_start(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x)
{
	struct tier__dstate s;
	struct tier__decision d;

	fill_state(e, o, x, &s);
	d = tier__decide(&e->p, &s);
	/* promote.c's throttle guards base: an extent-mode admission copies nothing */
	if (d.admitted &&
	    !tier__promote_tokens(e, x->img, d.route == TIER__R_CACHE_WRITE ? 0 : tier__obj_len(e, o))) {
		d.route = TIER__R_PROXY;
		d.why = "miss admitted, promotion throttled";
	}
	if (e->debug)
		trace_route(e, o, x, &d);
	if (d.record)
		record_access(e, o, x);
	if (d.nocache)
		x->nocache = 1;
	if (d.count != TIER__C_NONE && !(x->seen & 2)) {
		tier__agent_note_hit(e, d.count == TIER__C_HIT);
		if (d.count == TIER__C_HIT) {
			tier__count(e, x->img, write_hits, 1);
		} else {
			tier__count(e, x->img, write_misses, 1);
			tier__count(e, x->img, write_miss_bytes, x->len);
		}
	}
	if (d.count != TIER__C_NONE)
		x->seen |= 2;

	switch (d.route) {
	case TIER__R_WAIT:
		return false;
	case TIER__R_DONE:
		finish_now(e, o, x, 0);
		return true;
	case TIER__R_FAIL:
		finish_now(e, o, x, -EIO);
		return true;
	case TIER__R_HIT:
	case TIER__R_HIT_PARTIAL:
	case TIER__R_EXTENT_MISS:
		maybe_fill(e, o, x, d.fill);   /* behind the read: it copies base after it */
		start_read(e, o, x, d.route);
		return true;
	case TIER__R_PROXY:
	case TIER__R_PROXY_THEN_PROMOTE:
		if (x->type == TIER_REQ_READ) {
			if (d.fill == TIER__FILL_GO)   /* extent mode: its extents fill from it */
				tier__rfill_count(e, x->img, tier__rfill_start(e, x->img, o, x));
			else if (d.fill == TIER__FILL_BEHIND_COPY)
				fill_behind_copy(e, o, x);
			start_read(e, o, x, d.route);
			return true;
		}
		q_pop(o, x);
		if (d.route == TIER__R_PROXY_THEN_PROMOTE)
			/* never make the client wait on a 4 MiB copy: proxy now, promote after */
			queue_promotion(e, o, x->img);
		start_proxy_write(e, o, x);
		return true;
	case TIER__R_PROXY_NEW_EXTENTS:
		q_pop(o, x);
		x->step = XS_PROXY_NEW;
		start_proxy_write(e, o, x);
		return true;
	case TIER__R_CACHE_WRITE:
		if (o->state == TIER__ABSENT && tier__obj_alloc_bits(e, o) < 0) {
			proxy_now(e, o, x);   /* no memory for the bitmaps: base takes it */
			return true;
		}
		start_cache_write(e, o, x);
		return true;
	case TIER__R_PROMOTE_WAIT:
		tier__promote_start(e, x->img, o, NULL);
		if (o->flags & TIER__OF_PROMOTING)
			return false;
		proxy_now(e, o, x);   /* it could not start */
		return true;
	case TIER__R_PROMOTE:
		q_pop(o, x);
		if (!x->req)
			tier__obj_pqueue_end(e, o);
		tier__resv_put(e, x);   /* promoting_bytes holds it from here */
		tier__promote_start(e, x->img, o, x);
		return true;
	case TIER__R_FLUSH_FIRST:
		/*
		 * Counted first: a flush that fails inside tier__flush_start (ENOMEM)
		 * kicks this queue again, and that run may finish x; x is not
		 * touched after a successful start.
		 */
		x->tries++;
		if (tier__flush_start(e, x->img, o) < 0) {
			finish_now(e, o, x, -EIO);   /* no safe order left */
			return true;
		}
		return false;
	case TIER__R_DROP_THEN_PROXY:
		start_drop(e, o, x, false);
		return true;
	case TIER__R_DROP_BASE_THEN_CACHE:
		start_drop(e, o, x, true);
		return true;
	case TIER__R_FILL:
		q_pop(o, x);
		tier__obj_fqueue_end(e, o);
		tier__resv_put(e, x);   /* the fill job holds the bytes from here */
		tier__fill_start(e, x->img, o, x->off, x->len, x->nbits);
		tier__ext_finish(e, x, 0);
		return true;
	case TIER__R_COUNT:
		break;
	}
	abort();   /* every route is handled above */
}

void tier__obj_kick(struct tier_engine *e, struct tier__obj *o)
{
	struct tier__ext *x;

	/* a flush waiting for a cache write to land marks first, then the queue runs */
	if ((o->flags & (TIER__OF_FLUSHING | TIER__OF_EXCL)) == TIER__OF_FLUSHING)
		tier__flush_resume(e, o);
	/* a fill whose data is in lands once the object is quiet, before the queue runs */
	if ((o->flags & (TIER__OF_FILL_READY | TIER__OF_EXCL)) == TIER__OF_FILL_READY && !o->nrun)
		tier__fill_resume(e, o);
	tier__obj_assert(e, o, "kick");
	while ((x = o->qhead) && try_start(e, o, x))
		;
	tier__obj_assert(e, o, "queue run");
	tier__obj_release(e, o);
}

int tier__ext_enqueue(struct tier_engine *e, struct tier_image *img, struct tier_request *req,
		      int type, uint64_t objno, uint32_t off, uint32_t len, char *buf)
{
	struct tier__obj *o = tier__obj_get(e, img, objno);
	struct tier__ext *x;

	if (!o)
		return -ENOMEM;
	x = tier__ext_alloc(e);
	if (!x) {
		tier__obj_release(e, o);
		return -ENOMEM;
	}
	x->img = img;
	x->obj = o;
	x->req = req;
	x->type = (uint8_t)type;
	x->off = off;
	x->len = len;
	x->buf = buf;
	if (req)
		req->pending++;
	if (req && (type == TIER_REQ_READ || type == TIER_REQ_WRITE))
		tier__fill_budget_earn(e, len);
	e->exts_inflight++;
	q_push_tail(o, x);
	tier__obj_kick(e, o);
	return 0;
}
