/* SPDX-License-Identifier: MIT */
/*
 * libtier/objmap.c - the object map: a chained hash table (32-bit slab
 * indices) from object key to a 40-byte entry (state, version, mtime,
 * queue) with its bitmaps behind it, in a slab of fixed-size entries that
 * never move and are recycled through a free list, plus the
 * cached/dirty byte accounting the agent steers by.  It decides when an
 * entry may be dropped (ABSENT, nothing queued or running, nothing to sync)
 * and must never drop an entry that an op or job still points at.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/engine_int.h"
#include "libtier/hash.h"

_Static_assert(sizeof(struct tier__obj) == 40, "object map entry: 40 bytes");
_Static_assert(sizeof(struct tier__obj) % 8 == 0, "the bitmaps behind an entry stay aligned");

#define GROW_LOAD 2   /* entries per bucket before the table doubles */

static inline struct tier__obj *slot(const struct tier_engine *e, uint32_t idx1)
{
	uint32_t i = idx1 - 1;

	return (struct tier__obj *)(void *)(e->slab[i >> TIER__SLAB_SHIFT] +
					     (size_t)(i & (TIER__SLAB_CHUNK - 1)) * e->obj_size);
}

/* The only raw writes of o->flags: every flag changes through a named helper. */
static inline void flag_on(struct tier__obj *o, uint16_t f)
{
	o->flags |= f;
}

static inline void flag_off(struct tier__obj *o, uint16_t f)
{
	o->flags &= (uint16_t)~f;
}

int tier__map_init(struct tier_engine *e)
{
	e->refbits = e->p.promote_granularity == TIER_GRAN_EXTENT;   /* evict_ext.c */
	e->obj_size = sizeof(struct tier__obj) + (e->refbits ? 3 : 2) * e->nwords * sizeof(uint64_t);
	e->ht_mask = 1023;
	e->ht = calloc(e->ht_mask + 1, sizeof(*e->ht));
	return e->ht ? 0 : -ENOMEM;
}

void tier__map_fini(struct tier_engine *e)
{
	for (size_t i = 0; i < e->n_slab; i++)
		free(e->slab[i]);
	free(e->slab);
	e->slab = NULL;
	e->n_slab = e->cap_slab = 0;
	e->slab_used = 0;
	e->free_obj = 0;
	free(e->ht);
	e->ht = NULL;
}

static void map_grow(struct tier_engine *e)
{
	size_t nmask = e->ht_mask * 2 + 1;
	uint32_t *nt = calloc(nmask + 1, sizeof(*nt));

	if (!nt)
		return;   /* keep the longer chains; still correct */
	for (size_t i = 0; i <= e->ht_mask; i++) {
		uint32_t idx = e->ht[i], next;

		for (; idx; idx = next) {
			struct tier__obj *o = slot(e, idx);
			size_t b = tier__mix64(o->key) & nmask;

			next = o->hnext;
			o->hnext = nt[b];
			nt[b] = idx;
		}
	}
	free(e->ht);
	e->ht = nt;
	e->ht_mask = nmask;
}

struct tier__obj *tier__obj_find(const struct tier_engine *e, uint64_t key)
{
	uint32_t idx = e->ht[tier__mix64(key) & e->ht_mask];

	while (idx) {
		struct tier__obj *o = slot(e, idx);

		if (o->key == key)
			return o;
		idx = o->hnext;
	}
	return NULL;
}

uint32_t tier__obj_short_len(const struct tier_engine *e, const struct tier__obj *o)
{
	const struct tier_image *img = tier__image_by_id(e, TIER__KEY_ID(o->key));

	/* images live as long as the engine (a closed one keeps its id) */
	return img ? (uint32_t)(img->size % e->p.object_size) : (uint32_t)e->p.object_size;
}

uint32_t tier__obj_handle(const struct tier_engine *e, const struct tier__obj *o)
{
	uint32_t idx = e->ht[tier__mix64(o->key) & e->ht_mask];

	while (slot(e, idx) != o)
		idx = slot(e, idx)->hnext;
	return idx - 1;
}

static uint64_t map_key_of(const void *ctx, uint32_t h)
{
	return slot(ctx, h + 1)->key;
}

const struct tier__policy_host *tier__map_policy_host(struct tier_engine *e)
{
	e->pol_host.key_of = map_key_of;
	e->pol_host.ctx = e;
	return &e->pol_host;
}

void tier__obj_policy_access(struct tier_engine *e, struct tier__obj *o)
{
	e->pol->ops->access(e->pol, o->key, tier__obj_handle(e, o), tier__eng_now_ms(e));
}

/* A free entry's index + 1 (a new chunk when none is free), 0 if out of memory. */
static uint32_t slab_take(struct tier_engine *e)
{
	uint32_t idx = e->free_obj;

	if (idx) {
		e->free_obj = slot(e, idx)->hnext;
		return idx;
	}
	if (e->slab_used == (uint32_t)(e->n_slab << TIER__SLAB_SHIFT)) {
		char *c;

		if (e->n_slab >= (UINT32_MAX >> TIER__SLAB_SHIFT))
			return 0;
		if (e->n_slab == e->cap_slab) {
			size_t nc = e->cap_slab ? 2 * e->cap_slab : 16;
			char **ns = realloc(e->slab, nc * sizeof(*ns));

			if (!ns)
				return 0;
			e->slab = ns;
			e->cap_slab = nc;
		}
		c = malloc(TIER__SLAB_CHUNK * e->obj_size);
		if (!c)
			return 0;
		e->slab[e->n_slab++] = c;
		e->obj_mem += TIER__SLAB_CHUNK * e->obj_size;
	}
	return ++e->slab_used;
}

struct tier__obj *tier__obj_get(struct tier_engine *e, struct tier_image *img, uint64_t objno)
{
	uint64_t key = TIER__KEY(img->id, objno);
	struct tier__obj *o = tier__obj_find(e, key);
	uint32_t idx;
	size_t b;

	if (o)
		return o;
	idx = slab_take(e);
	if (!idx)
		return NULL;
	o = slot(e, idx);
	memset(o, 0, sizeof(*o));
	o->key = key;
	if (objno == img->nobjs - 1 && img->size % e->p.object_size)
		flag_on(o, TIER__OF_SHORT);
	b = tier__mix64(key) & e->ht_mask;
	o->hnext = e->ht[b];
	e->ht[b] = idx;
	e->n_objs++;
	img->n_entries++;
	if (e->n_objs > GROW_LOAD * (e->ht_mask + 1))
		map_grow(e);
	return o;
}

bool tier__obj_busy(const struct tier__obj *o)
{
	return o->qhead || o->nrun || o->nsync ||
	       (o->flags & (TIER__OF_PROMOTING | TIER__OF_FLUSHING | TIER__OF_EVICTING |
			    TIER__OF_EXCL | TIER__OF_PQUEUED | TIER__OF_FQUEUED |
			    TIER__OF_FILLING));
}

void tier__obj_release(struct tier_engine *e, struct tier__obj *o)
{
	struct tier_image *img = tier__image_by_id(e, TIER__KEY_ID(o->key));
	uint32_t *pp, idx;

	if (tier__obj_busy(o))
		return;
	if (img && (img->closed || img->parked)) {
		/* image closed or handed off: forget the entry (the cache copy stays) */
		tier__obj_set_state(e, o, TIER__ABSENT, NULL, NULL);
		tier__obj_copy_gone(e, o);
		tier__obj_unsync_end(e, o, TIER__OF_UNSYNC_B);
	}
	if (o->state != TIER__ABSENT ||
	    (o->flags & (TIER__OF_UNSYNC_B | TIER__OF_UNSYNC_C | TIER__OF_STALE)))
		return;
	pp = &e->ht[tier__mix64(o->key) & e->ht_mask];
	while (slot(e, *pp) != o)
		pp = &slot(e, *pp)->hnext;
	idx = *pp;
	*pp = o->hnext;
	e->n_objs--;
	if (img && img->n_entries)
		img->n_entries--;
	tier__obj_free_bits(e, o);
	o->key = 0;
	o->hnext = e->free_obj;
	e->free_obj = idx;
}

int tier__obj_alloc_bits(struct tier_engine *e, struct tier__obj *o)
{
	if (o->flags & TIER__OF_BITS)
		return 0;
	if (!e->nwords)
		return -EINVAL;
	memset(o + 1, 0, (e->refbits ? 3 : 2) * e->nwords * sizeof(uint64_t));   /* valid, dirty, ref */
	flag_on(o, TIER__OF_BITS);
	return 0;
}

void tier__obj_free_bits(struct tier_engine *e, struct tier__obj *o)
{
	(void)e;
	flag_off(o, TIER__OF_BITS);
}

size_t tier__popcount(const uint64_t *w, size_t nwords)
{
	size_t n = 0;

	for (size_t i = 0; i < nwords; i++)
		n += (size_t)__builtin_popcountll(w[i]);
	return n;
}

/*
 * Bytes of o's extents set in w: whole extents below its length, plus the part
 * of a last extent the length cuts.  A popcount per word: this runs four times per
 * state change, i.e. per cache write (a loop per set bit cost a quarter of a
 * write's CPU with 1024 extents).
 */
static uint64_t bits_bytes(const struct tier_engine *e, const struct tier__obj *o,
			   const uint64_t *w)
{
	uint64_t es = e->p.extent_size, n = 0, len = tier__obj_len(e, o), tail = len % es;
	size_t nfull = (size_t)(len / es), i;

	for (i = 0; i < nfull / 64; i++)
		n += (uint64_t)__builtin_popcountll(w[i]);
	if (nfull % 64)
		n += (uint64_t)__builtin_popcountll(w[i] & ((1ull << (nfull % 64)) - 1));
	n *= es;
	if (tail && ((w[nfull / 64] >> (nfull % 64)) & 1))
		n += tail;
	return n;
}

uint64_t tier__obj_cached_bytes(const struct tier_engine *e, const struct tier__obj *o)
{
	if (o->state == TIER__ABSENT)
		return 0;
	return tier__obj_bits(o) ? bits_bytes(e, o, tier__obj_bits(o)) : tier__obj_len(e, o);
}

uint64_t tier__obj_dirty_bytes(const struct tier_engine *e, const struct tier__obj *o)
{
	if (o->state != TIER__DIRTY)
		return 0;
	return tier__obj_bits(o) ? bits_bytes(e, o, tier__obj_bits(o) + e->nwords) : tier__obj_len(e, o);
}

static void img_acct(struct tier_engine *e, const struct tier__obj *o, int d)
{
	struct tier_image *img = tier__image_by_id(e, TIER__KEY_ID(o->key));

	if (!img)
		return;
	img->n_cached += (uint64_t)(int64_t)d;
	img->cached_bytes += (uint64_t)((int64_t)d * (int64_t)tier__obj_cached_bytes(e, o));
	if (o->state == TIER__DIRTY) {
		img->n_dirty += (uint64_t)(int64_t)d;
		img->dirty_bytes += (uint64_t)((int64_t)d * (int64_t)tier__obj_dirty_bytes(e, o));
	}
}

static void acct_sub(struct tier_engine *e, const struct tier__obj *o)
{
	if (o->state == TIER__ABSENT)
		return;
	img_acct(e, o, -1);
	e->n_cached--;
	e->cached_bytes -= tier__obj_cached_bytes(e, o);
	if (o->state == TIER__DIRTY) {
		e->n_dirty--;
		e->dirty_bytes -= tier__obj_dirty_bytes(e, o);
	}
}

static void acct_add(struct tier_engine *e, const struct tier__obj *o)
{
	if (o->state == TIER__ABSENT)
		return;
	img_acct(e, o, 1);
	e->n_cached++;
	e->cached_bytes += tier__obj_cached_bytes(e, o);
	if (o->state == TIER__DIRTY) {
		e->n_dirty++;
		e->dirty_bytes += tier__obj_dirty_bytes(e, o);
	}
}

void tier__obj_set_state(struct tier_engine *e, struct tier__obj *o, uint8_t state,
			 const uint64_t *valid, const uint64_t *dirty)
{
	uint8_t old = o->state;

	acct_sub(e, o);
	if (state == TIER__ABSENT) {
		tier__obj_free_bits(e, o);
	} else if (tier__obj_bits(o)) {
		if (valid && valid != tier__obj_bits(o))
			memcpy(tier__obj_bits(o), valid, e->nwords * 8);
		if (dirty && dirty != tier__obj_bits(o) + e->nwords)
			memcpy(tier__obj_bits(o) + e->nwords, dirty, e->nwords * 8);
	}
	o->state = state;
	acct_add(e, o);
	if (!e->pol)
		return;   /* engine teardown */
	if (old == TIER__ABSENT && state != TIER__ABSENT)
		e->pol->ops->insert(e->pol, o->key, tier__obj_handle(e, o), o->mtime_ms);
	else if (old != TIER__ABSENT && state == TIER__ABSENT)
		e->pol->ops->remove(e->pol, o->key, tier__obj_handle(e, o));
}

/*
 * Every transient flag has one owner: the helpers below are the only code
 * that sets or clears it (grep "flags |=" and "flags &=": flag_on and
 * flag_off only), each with the count tied to it.  The table: the flag, its
 * setter and clearer (and who calls them), and what tier__obj_check holds
 * between transitions (tier__obj_kick checks it after every completion and
 * every queue run).
 *
 *  flag          set by (caller)                 cleared by (caller)               invariant
 *  PROMOTING     promote_begin (promote.c        promote_end (promote_done,        ABSENT; no FLUSHING,
 *                tier__promote_start, fill.c     fill_end); n_promoting,           EVICTING or EXCL
 *                tier__rfill_start: no copy);    promoting_bytes back
 *                n_promoting, promoting_bytes
 *  FLUSHING      flush_begin (flush.c            flush_end (flush_end);            DIRTY; no PROMOTING
 *                flush_start); agent_flushing    agent_flushing                    or EVICTING
 *  EVICTING      evict_begin (flush.c            evict_end (evict_cb);             CLEAN; no FLUSHING
 *                tier__evict_start);             agent_evicting                    or EXCL
 *                agent_evicting
 *  EVICT_AFTER_  evict_dirty_begin (flush.c      evict_dirty_end (flush_end, or    with FLUSHING
 *  FLUSH         evict_dirty); agent_evicting    evict_dirty if the flush cannot
 *                                                start); agent_evicting
 *  EXCL          excl_begin (write.c cache       excl_end (their callbacks and     not with PROMOTING or
 *                writes and drops, fill.c        failure paths); pevict_end        EVICTING; bitmaps on an
 *                fill_write, flush.c             (evict_ext.c pe_end);             ABSENT copy only with it
 *                flush_setmeta); pevict_begin    agent_evicting
 *                (evict_ext.c: a partial
 *                eviction, agent_evicting)
 *  VUNK          vunk_begin (write.c cw_cb,      vunk_end (flush.c FLUSH_STAT),    not ABSENT
 *                fill.c a failed SETMETA)        copy_known, copy_gone
 *  STALE         stale_begin (write.c cw_cb      copy_known (a write of the copy   ABSENT
 *                creating, promote.c, fill.c     landed: write.c cw_cb, promote.c,
 *                FILL_CREATE: failed writes)     fill.c), copy_gone, release
 *  UNSYNC_C,     unsync_begin (write.c, fill.c,  unsync_end (flush.c sync_keys),   -
 *  UNSYNC_B      flush.c sync_failed): the       copy_gone (UNSYNC_C: write.c
 *                e->unsync list                  drop_cb, flush.c evict_cb),
 *                                                release of a closed image's entry
 *  PQUEUED       pqueue_begin (hint.c            pqueue_end (route.c finish_now,   its promotion hint is
 *                tier__hint_promote)             try_start PROMOTE)                queued
 *  FQUEUED       fqueue_begin (hint.c            fqueue_end (route.c finish_now,   exactly one fill hint
 *                queue_fill)                     try_start FILL)                   is queued
 *  FILLING       fill_begin (fill.c              fill_end (fill.c fill_end);       cached with bitmaps; no
 *                tier__fill_start,               promoting_bytes back              PROMOTING or EVICTING
 *                tier__rfill_start: a copy);
 *                promoting_bytes
 *  FILL_READY    fill_ready_begin (fill.c        fill_ready_end (fill_write),      with FILLING
 *                fill_land, rfill_read_done)     fill_end
 *  HOT           hot_begin (agent.c              hot_end (agent.c                  - (the agent skips it)
 *                tier__agent_cool: e->hot)       tier__agent_hot_expire)
 *  BITS          tier__obj_alloc_bits            tier__obj_free_bits (set_state    bitmaps only in extent
 *                                                ABSENT, failed creations)         mode
 *  SHORT         tier__obj_get (the image's      never (the entry is freed)        -
 *                last object, cut short)
 *
 * And beside the flags: state is ABSENT, CLEAN or DIRTY; nproxy <= nrun;
 * dirty extents are valid, a CLEAN copy has none, a DIRTY copy with
 * bitmaps has at least one; none on an ABSENT copy unless a cache write
 * creating it runs (EXCL).
 */
const char *tier__obj_check(const struct tier_engine *e, const struct tier__obj *o)
{
	uint16_t f = o->flags;
	bool hint = false, dirty = false;
	unsigned fills = 0;

	if (o->state > TIER__DIRTY)
		return "state out of range";
	if ((f & TIER__OF_PROMOTING) &&
	    (o->state != TIER__ABSENT ||
	     (f & (TIER__OF_FLUSHING | TIER__OF_EVICTING | TIER__OF_EXCL))))
		return "PROMOTING: not ABSENT, or with another job or an exclusive op";
	if ((f & TIER__OF_FLUSHING) &&
	    (o->state != TIER__DIRTY || (f & (TIER__OF_PROMOTING | TIER__OF_EVICTING))))
		return "FLUSHING: not DIRTY, or with a promotion or an eviction";
	if ((f & TIER__OF_EVICTING) &&
	    (o->state != TIER__CLEAN || (f & (TIER__OF_FLUSHING | TIER__OF_EXCL))))
		return "EVICTING: not CLEAN, or with a flush or an exclusive op";
	if ((f & TIER__OF_EVICT_AFTER_FLUSH) && !(f & TIER__OF_FLUSHING))
		return "EVICT_AFTER_FLUSH without a flush";
	if ((f & TIER__OF_STALE) && o->state != TIER__ABSENT)
		return "STALE on a cached object";
	if ((f & TIER__OF_VUNK) && o->state == TIER__ABSENT)
		return "VUNK on an ABSENT object";
	if ((f & TIER__OF_FILLING) &&
	    (o->state == TIER__ABSENT || !tier__obj_bits(o) ||
	     (f & (TIER__OF_PROMOTING | TIER__OF_EVICTING))))
		return "FILLING: not cached with bitmaps, or with a promotion or an eviction";
	if ((f & TIER__OF_FILL_READY) && !(f & TIER__OF_FILLING))
		return "FILL_READY without a fill";
	for (const struct tier__ext *x = o->qhead; x; x = x->next) {
		hint |= x->type == TIER_REQ_CACHE && !x->req;
		fills += x->type == TIER__REQ_FILL;
	}
	if ((f & TIER__OF_PQUEUED) && !hint)
		return "PQUEUED without a queued promotion hint";
	if (!(f & TIER__OF_FQUEUED) != !fills || fills > 1)
		return "FQUEUED and the queued fill hints disagree";
	if (o->nproxy > o->nrun)
		return "more proxied new-extent writes than shared ops";
	if (!tier__obj_bits(o))
		return NULL;
	if (!e->nwords)
		return "bitmaps in object mode";
	if (o->state == TIER__ABSENT)
		return (f & TIER__OF_EXCL) ? NULL : "bitmaps on an ABSENT object";
	for (size_t w = 0; w < e->nwords; w++) {
		if (tier__obj_bits(o)[e->nwords + w] & ~tier__obj_bits(o)[w])
			return "a dirty extent that is not valid";
		dirty |= tier__obj_bits(o)[e->nwords + w] != 0;
	}
	if (o->state == TIER__CLEAN && dirty)
		return "CLEAN with dirty extents";
	if (o->state == TIER__DIRTY && !dirty)
		return "DIRTY with no dirty extent";
	return NULL;
}

#ifndef NDEBUG
void tier__obj_assert(const struct tier_engine *e, const struct tier__obj *o, const char *where)
{
	const char *bad = tier__obj_check(e, o);

	if (!bad)
		return;
	tier__log(e, TIER_LOG_ERROR, "object %016llx (%s): illegal state %u flags %#x nrun %u "
		  "nproxy %u: %s", (unsigned long long)o->key, where, o->state, o->flags, o->nrun,
		  o->nproxy, bad);
	fprintf(stderr, "tier: object %016llx (%s): %s\n", (unsigned long long)o->key, where, bad);
	abort();
}
#endif

/* ---- flags with owners (the table above tier__obj_check) ---- */

#ifndef NDEBUG
/* A helper's precondition failed: an engine bug.  Debug builds (the tests) stop here. */
static void flag_pre_failed(const struct tier_engine *e, const struct tier__obj *o,
			    const char *helper, const char *pre)
{
	tier__log(e, TIER_LOG_ERROR, "object %016llx: %s: state %u flags %#x nrun %u: "
		  "precondition %s does not hold", (unsigned long long)o->key, helper, o->state,
		  o->flags, o->nrun, pre);
	fprintf(stderr, "tier: object %016llx: %s: precondition %s does not hold\n",
		(unsigned long long)o->key, helper, pre);
	abort();
}
#define FLAG_PRE(e, o, cond) \
	do { if (!(cond)) flag_pre_failed((e), (o), __func__, #cond); } while (0)
#else
#define FLAG_PRE(e, o, cond) do { (void)(e); (void)(o); } while (0)
#endif

#define HAS(o, f)  (((o)->flags & (f)) != 0)

void tier__obj_promote_begin(struct tier_engine *e, struct tier__obj *o, uint64_t bytes)
{
	FLAG_PRE(e, o, o->state == TIER__ABSENT);
	FLAG_PRE(e, o, !HAS(o, TIER__OF_PROMOTING | TIER__OF_FLUSHING | TIER__OF_EVICTING |
			       TIER__OF_EXCL));
	flag_on(o, TIER__OF_PROMOTING);
	e->n_promoting++;
	e->promoting_bytes += bytes;
}

void tier__obj_promote_end(struct tier_engine *e, struct tier__obj *o, uint64_t bytes)
{
	FLAG_PRE(e, o, HAS(o, TIER__OF_PROMOTING));
	FLAG_PRE(e, o, e->n_promoting > 0 && e->promoting_bytes >= bytes);
	flag_off(o, TIER__OF_PROMOTING);
	e->n_promoting--;
	e->promoting_bytes -= bytes;
}

void tier__obj_fill_begin(struct tier_engine *e, struct tier__obj *o, uint64_t bytes)
{
	FLAG_PRE(e, o, o->state != TIER__ABSENT && tier__obj_bits(o));
	FLAG_PRE(e, o, !HAS(o, TIER__OF_FILLING | TIER__OF_PROMOTING | TIER__OF_EVICTING));
	flag_on(o, TIER__OF_FILLING);
	e->promoting_bytes += bytes;
}

void tier__obj_fill_end(struct tier_engine *e, struct tier__obj *o, uint64_t bytes)
{
	FLAG_PRE(e, o, HAS(o, TIER__OF_FILLING));
	FLAG_PRE(e, o, e->promoting_bytes >= bytes);
	flag_off(o, TIER__OF_FILLING | TIER__OF_FILL_READY);
	e->promoting_bytes -= bytes;
}

void tier__obj_fill_ready_begin(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, HAS(o, TIER__OF_FILLING) && !HAS(o, TIER__OF_FILL_READY));
	flag_on(o, TIER__OF_FILL_READY);
}

void tier__obj_fill_ready_end(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, HAS(o, TIER__OF_FILLING));
	flag_off(o, TIER__OF_FILL_READY);
}

void tier__obj_flush_begin(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, o->state == TIER__DIRTY);
	FLAG_PRE(e, o, !HAS(o, TIER__OF_FLUSHING | TIER__OF_PROMOTING | TIER__OF_EVICTING));
	flag_on(o, TIER__OF_FLUSHING);
	e->agent_flushing++;
}

void tier__obj_flush_end(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, HAS(o, TIER__OF_FLUSHING) && e->agent_flushing > 0);
	flag_off(o, TIER__OF_FLUSHING);
	e->agent_flushing--;
}

void tier__obj_evict_begin(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, o->state == TIER__CLEAN);
	FLAG_PRE(e, o, !HAS(o, TIER__OF_EVICTING | TIER__OF_FLUSHING | TIER__OF_EXCL |
			       TIER__OF_PROMOTING | TIER__OF_VUNK));
	flag_on(o, TIER__OF_EVICTING);
	e->agent_evicting++;
}

void tier__obj_evict_end(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, HAS(o, TIER__OF_EVICTING) && e->agent_evicting > 0);
	flag_off(o, TIER__OF_EVICTING);
	e->agent_evicting--;
}

void tier__obj_evict_dirty_begin(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, o->state == TIER__DIRTY);
	FLAG_PRE(e, o, !HAS(o, TIER__OF_EVICT_AFTER_FLUSH | TIER__OF_FLUSHING |
			       TIER__OF_EVICTING));
	flag_on(o, TIER__OF_EVICT_AFTER_FLUSH);
	e->agent_evicting++;
}

void tier__obj_evict_dirty_end(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, HAS(o, TIER__OF_EVICT_AFTER_FLUSH) && e->agent_evicting > 0);
	flag_off(o, TIER__OF_EVICT_AFTER_FLUSH);
	e->agent_evicting--;
}

void tier__obj_excl_begin(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, !HAS(o, TIER__OF_EXCL | TIER__OF_PROMOTING | TIER__OF_EVICTING));
	flag_on(o, TIER__OF_EXCL);
}

void tier__obj_excl_end(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, HAS(o, TIER__OF_EXCL));
	flag_off(o, TIER__OF_EXCL);
}

void tier__obj_pevict_begin(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, o->state != TIER__ABSENT && !tier__obj_busy(o));
	tier__obj_excl_begin(e, o);
	e->agent_evicting++;
}

void tier__obj_pevict_end(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, e->agent_evicting > 0);
	tier__obj_excl_end(e, o);
	e->agent_evicting--;
}

void tier__obj_vunk_begin(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, o->state != TIER__ABSENT);
	flag_on(o, TIER__OF_VUNK);
}

void tier__obj_vunk_end(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, o->state != TIER__ABSENT);
	flag_off(o, TIER__OF_VUNK);
}

void tier__obj_stale_begin(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, o->state == TIER__ABSENT);
	flag_on(o, TIER__OF_STALE);
}

void tier__obj_copy_known(struct tier_engine *e, struct tier__obj *o)
{
	(void)e;
	flag_off(o, TIER__OF_STALE | TIER__OF_VUNK);
}

void tier__obj_copy_gone(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, o->state == TIER__ABSENT);
	flag_off(o, TIER__OF_STALE | TIER__OF_VUNK | TIER__OF_UNSYNC_C);
}

void tier__obj_unsync_end(struct tier_engine *e, struct tier__obj *o, uint16_t flags)
{
	FLAG_PRE(e, o, !(flags & ~(TIER__OF_UNSYNC_B | TIER__OF_UNSYNC_C)));
	flag_off(o, flags);
}

void tier__obj_pqueue_begin(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, !HAS(o, TIER__OF_PQUEUED));
	flag_on(o, TIER__OF_PQUEUED);
}

void tier__obj_pqueue_end(struct tier_engine *e, struct tier__obj *o)
{
	/* no precondition: an admin promote's hint leaves the queue without the flag too */
	(void)e;
	flag_off(o, TIER__OF_PQUEUED);
}

void tier__obj_fqueue_begin(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, !HAS(o, TIER__OF_FQUEUED));
	flag_on(o, TIER__OF_FQUEUED);
}

void tier__obj_fqueue_end(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, HAS(o, TIER__OF_FQUEUED));
	flag_off(o, TIER__OF_FQUEUED);
}

void tier__obj_hot_begin(struct tier_engine *e, struct tier__obj *o)
{
	FLAG_PRE(e, o, !HAS(o, TIER__OF_HOT));
	flag_on(o, TIER__OF_HOT);
}

void tier__obj_hot_end(struct tier_engine *e, struct tier__obj *o)
{
	(void)e;
	flag_off(o, TIER__OF_HOT);
}

void tier__obj_unsync_begin(struct tier_engine *e, struct tier__obj *o, uint16_t flag)
{
	bool had = o->flags & (TIER__OF_UNSYNC_B | TIER__OF_UNSYNC_C);

	/* rados and mem acks are already as durable as they get */
	if ((flag == TIER__OF_UNSYNC_B && !e->sync_base) ||
	    (flag == TIER__OF_UNSYNC_C && !e->sync_cache))
		return;
	flag_on(o, flag);
	if (had)
		return;
	if (e->n_unsync == e->cap_unsync) {
		size_t nc = e->cap_unsync ? e->cap_unsync * 2 : 256;
		uint64_t *n = realloc(e->unsync, nc * sizeof(*n));
		if (!n) {
			/* keep the flag: the next FLUSH lists flagged objects from the map */
			e->unsync_lost = true;
			tier__log(e, TIER_LOG_WARN, "out of memory tracking unsynced objects");
			return;
		}
		e->unsync = n;
		e->cap_unsync = nc;
	}
	e->unsync[e->n_unsync++] = o->key;
}

int tier__meta_encode_obj(const struct tier_engine *e, uint32_t flags, uint64_t version,
			  const uint64_t *valid, const uint64_t *dirty, void *buf)
{
	struct tier_meta m = {
		.version = version,
		.flags = flags,
		.object_size = (uint32_t)e->p.object_size,
	};

	if (valid) {
		m.flags |= TIER_META_F_EXTENTS;
		m.extent_size = (uint32_t)e->p.extent_size;
		m.nbits = e->nbits;
		m.valid = (uint64_t *)valid;
		m.dirty = (uint64_t *)dirty;
	}
	return tier_meta_encode(&m, buf, TIER_META_MAX);
}

struct tier__obj *tier__obj_at(const struct tier_engine *e, uint32_t idx1)
{
	struct tier__obj *o;

	if (!idx1 || idx1 > e->slab_used)
		return NULL;
	o = slot(e, idx1);
	/*
	 * A free entry has key 0 (tier__obj_release), and so has object 0 of
	 * the image whose id is 0 (prefix_id: one image in 2^20): the map tells.
	 */
	return o->key || tier__obj_find(e, 0) == o ? o : NULL;
}

void tier__map_foreach(struct tier_engine *e,
		       void (*fn)(struct tier_engine *e, struct tier__obj *o, void *arg), void *arg)
{
	for (size_t i = 0; i <= e->ht_mask; i++) {
		uint32_t idx = e->ht[i], next;

		for (; idx; idx = next) {
			struct tier__obj *o = slot(e, idx);

			next = o->hnext;   /* fn may release o */
			fn(e, o, arg);
		}
	}
}
