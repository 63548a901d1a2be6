/* SPDX-License-Identifier: MIT */
/*
 * libtier/route.c - per-object queues and the router: each per-object
 * piece of a request (or an internal hint) waits in its object's queue;
 * when it reaches the head, fill_state gathers what decide.c may look at,
 * tier__decide names the route, and try_start hands the piece to the file
 * that carries it out (read.c, write.c, hint.c; promote.c, fill.c,
 * flush.c for jobs) and counts write hits and misses.  Shared ops (reads,
 * proxied writes) of one object overlap; exclusive ones run alone; a
 * queue run ends at the first piece told to wait, so pieces start in
 * arrival order.  tier__obj_kick runs the queue after every completion
 * and checks the object (tier__obj_check) around it.  Also the pool of
 * pieces (no per-request malloc).  No routing rule lives here (decide.c),
 * and it must never submit a store op itself nor start a piece out of its
 * queue's order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/decide.h"
#include "libtier/engine_int.h"
#include "libtier/route.h"

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
		s->fill_admitted = tier__hint_fill_admitted(e, o, x);
	if (partial_read && x->req && !x->nocache && (o->flags & TIER__OF_FQUEUED)) {
		s->fill_admitted = tier__hint_fill_admitted(e, o, x);
		s->seq = tier__read_continues(e, o, x);
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
	tier__q_pop(o, x);
	if (x->type == TIER_REQ_CACHE && !x->req)
		tier__obj_pqueue_end(e, o);
	if (x->type == TIER__REQ_FILL)
		tier__obj_fqueue_end(e, o);
	tier__ext_finish(e, x, err);
}

static void proxy_now(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x)
{
	tier__q_pop(o, x);
	tier__proxy_start(e, o, x);
}

/*
 * The route of the piece x at the head of o's queue: decide.c's, or a proxy
 * where the throttle vetoes an admission.  The access is recorded and a
 * write hit or miss counted (once per piece) as the decision says.
 */
static struct tier__decision route_of(struct tier_engine *e, struct tier__obj *o,
				      struct tier__ext *x)
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
	return d;
}

/* Proxied: a read from base (its extents may fill from it), or a write to base. */
static void route_proxy(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x,
			const struct tier__decision *d)
{
	if (x->type == TIER_REQ_READ) {
		if (d->fill == TIER__FILL_GO)   /* extent mode: its extents fill from it */
			tier__rfill_count(e, x->img, tier__rfill_start(e, x->img, o, x));
		else if (d->fill == TIER__FILL_BEHIND_COPY)
			tier__hint_behind_copy(e, o, x);
		tier__read_start(e, o, x, d->route);
		return;
	}
	tier__q_pop(o, x);
	if (d->route == TIER__R_PROXY_THEN_PROMOTE)
		/* never make the client wait on a 4 MiB copy: proxy now, promote after */
		tier__hint_promote(e, o, x->img);
	tier__proxy_start(e, o, x);
}

/*
 * Decide the route of the piece at the head of o's queue and start it.
 * Returns false if it stays queued (WAIT), true if it left the queue.
 */
static bool try_start(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x)
{
	struct tier__decision d = route_of(e, o, x);

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
		tier__hint_maybe_fill(e, o, x, d.fill);   /* behind the read: it copies base after it */
		tier__read_start(e, o, x, d.route);
		return true;
	case TIER__R_PROXY:
	case TIER__R_PROXY_THEN_PROMOTE:
		route_proxy(e, o, x, &d);
		return true;
	case TIER__R_PROXY_NEW_EXTENTS:
		tier__q_pop(o, x);
		x->step = XS_PROXY_NEW;
		tier__proxy_start(e, o, x);
		return true;
	case TIER__R_CACHE_WRITE:
		if (o->state == TIER__ABSENT && tier__obj_alloc_bits(e, o) < 0) {
			proxy_now(e, o, x);   /* no memory for the bitmaps: base takes it */
			return true;
		}
		tier__cw_start(e, o, x);
		return true;
	case TIER__R_PROMOTE_WAIT:
		tier__promote_start(e, x->img, o, NULL);
		if (o->flags & TIER__OF_PROMOTING)
			return false;
		proxy_now(e, o, x);   /* it could not start */
		return true;
	case TIER__R_PROMOTE:
		tier__q_pop(o, x);
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
		tier__drop_start(e, o, x, false);
		return true;
	case TIER__R_DROP_BASE_THEN_CACHE:
		tier__drop_start(e, o, x, true);
		return true;
	case TIER__R_FILL:
		tier__q_pop(o, x);
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
	tier__q_push_tail(o, x);
	tier__obj_kick(e, o);
	return 0;
}
