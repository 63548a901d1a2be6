/* SPDX-License-Identifier: MIT */
/*
 * libtier/evict_ext.c - extent-aware eviction (extent mode, evict_extents).
 *
 * Whole-object eviction drops an object's hot extents with its cold ones.
 * Each cached copy in extent mode keeps a reference bit per extent (the
 * third bitmap behind its map entry, memory only), set when a client read
 * or write touches the extent while it is valid: a hit.  What a miss
 * brings in (a read fill, a write's new extent) enters unreferenced and
 * goes at the hand's next pass unless hit by then, a CLOCK's probation for
 * one-touch blocks (setting the bit there cost the suite 1.026 -> 1.035
 * gmean miss/OPT: docs/BENCHMARKS.md, "The policy suite").
 * When the eviction order or the clock hand (agent.c) gives the agent a
 * victim, tier__decide_evict_how says what to do with it: the whole object
 * (nothing referenced since the agent last looked), a partial eviction
 * (drop its clean unreferenced extents, keep the rest), a second chance
 * (nothing it could drop) or nothing at all (no clean extent: its bits
 * stay); partial evictions and second chances clear its bits and tell the
 * order it was used.  The same bits choose what the agent flushes of an
 * object with hot extents (tier__decide_flush_how): the flush hand takes
 * its dirty extents not referenced since the clock last looked (a cold
 * flush), so the flushes clean what the clock is about to want dropped
 * and leave the hot extents dirty; it reads the bits, never clears them.
 *
 * A partial eviction, in this order (docs/DURABILITY.md, "Each write
 * path", the partial eviction's row):
 *  1. SETMETA guarded by the copy's version, with FUA: the record no longer
 *     lists the dropped extents, durably, before any of their bytes change;
 *     a crash or power cut at any point leaves a record that vouches only
 *     for bytes still there.
 *  2. The engine's valid bitmap and its counts drop them (the full ratio
 *     falls: the agent stops once under target).
 *  3. ZERO of each run of dropped extents (the local backend punches holes),
 *     guarded by the same version, without FUA: what a cut keeps of them
 *     does not matter, the record already says invalid.
 * The object is exclusive (EXCL) throughout, as under a cache write:
 * decide.c makes every op on it wait (reads too: a DIRTY copy may be partly
 * evicted, its dirty extents stay, and base lacks them), a flush the agent
 * starts meanwhile snapshots once it is done, fills and read fills do not
 * start.  Dirty extents are never dropped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/decide.h"
#include "libtier/engine_int.h"

#define AGENT_PAUSE_MS 1000   /* the agent rests after a failed evict (as flush.c) */

enum { PE_SETMETA = 0, PE_ZERO };

static uint64_t *ref_bits(const struct tier_engine *e, const struct tier__obj *o)
{
	uint64_t *v = tier__obj_bits(o);

	return v && e->refbits ? v + 2 * e->nwords : NULL;
}

void tier__obj_reference(struct tier_engine *e, struct tier__obj *o, uint32_t off, uint32_t len)
{
	uint64_t *v = tier__obj_bits(o), *r = ref_bits(e, o), es = e->p.extent_size;

	if (!r || !len || o->state == TIER__ABSENT)
		return;
	for (uint64_t i = off / es; i <= ((uint64_t)off + len - 1) / es && i < e->nbits; i++)
		r[i / 64] |= v[i / 64] & (1ull << (i % 64));
}

/*
 * Extents to drop: clean, valid and unreferenced (drop NULL: just count),
 * in one pass with the rest of c: n_drop, n_ref (referenced valid),
 * n_clean (clean valid), n_dirty_cold (dirty, unreferenced).
 */
static uint64_t plan(const struct tier_engine *e, const struct tier__obj *o, uint64_t *drop,
		     struct tier__evict_view *c)
{
	const uint64_t *v = tier__obj_bits(o), *d = v + e->nwords, *r = v + 2 * e->nwords;

	c->n_drop = c->n_ref = c->n_clean = c->n_dirty_cold = 0;
	for (size_t w = 0; w < e->nwords; w++) {
		uint64_t x = v[w] & ~d[w] & ~r[w];   /* clean, valid, unreferenced */

		if (drop)
			drop[w] = x;
		c->n_drop += (uint64_t)__builtin_popcountll(x);
		c->n_ref += (uint64_t)__builtin_popcountll(v[w] & r[w]);
		c->n_clean += (uint64_t)__builtin_popcountll(v[w] & ~d[w]);
		c->n_dirty_cold += (uint64_t)__builtin_popcountll(d[w] & ~r[w]);
	}
	return c->n_drop;
}

int tier__evict_how(struct tier_engine *e, const struct tier__obj *o, bool drain, bool now)
{
	struct tier__evict_view v = { .extents = ref_bits(e, o) &&
					 e->p.promote_granularity == TIER_GRAN_EXTENT,
				      .drain = drain, .now = now,
				      .flushing = e->flush_mode != TIER_FLUSH_IDLE };

	if (v.extents && e->p.evict_extents) {
		v.objects_bind = tier__full_by_objects(e);
		plan(e, o, NULL, &v);
	}
	return tier__decide_evict_how(&e->p, &v);
}

int tier__flush_how(struct tier_engine *e, const struct tier__obj *o, bool hand, bool round2)
{
	const uint64_t *v = tier__obj_bits(o), *r = ref_bits(e, o);
	struct tier__flush_view fv = { .extents = r != NULL, .hand = hand, .round2 = round2,
				       .drain = e->drain_flush || e->drain_evict ||
						e->p.cache_mode == TIER_MODE_NONE };

	for (size_t w = 0; r && w < e->nwords; w++) {
		fv.n_dirty_ref += (uint64_t)__builtin_popcountll(v[e->nwords + w] & r[w]);
		fv.n_dirty_cold += (uint64_t)__builtin_popcountll(v[e->nwords + w] & ~r[w]);
	}
	return tier__decide_flush_how(&e->p, &fv);
}

bool tier__flush_cold_snapshot(const struct tier_engine *e, const struct tier__obj *o,
			       uint64_t *dirty)
{
	const uint64_t *r = ref_bits(e, o);
	uint64_t any = 0, hot = 0;

	for (size_t w = 0; r && w < e->nwords; w++) {
		any |= dirty[w] & ~r[w];
		hot |= dirty[w] & r[w];
	}
	if (!any || !hot)
		return false;   /* nothing cold, or nothing hot: all of it */
	for (size_t w = 0; w < e->nwords; w++)
		dirty[w] &= ~r[w];
	return true;
}

static void clear_refs(struct tier_engine *e, struct tier__obj *o)
{
	uint64_t *r = ref_bits(e, o);

	if (r)
		memset(r, 0, e->nwords * sizeof(*r));
	tier__obj_policy_access(e, o);
}

void tier__evict_again(struct tier_engine *e, struct tier__obj *o)
{
	struct tier_image *img = tier__image_by_id(e, TIER__KEY_ID(o->key));

	clear_refs(e, o);
	tier__count(e, img, evict_again, 1);
}

static void pe_cb(struct tier_store_op *op);

static void pe_end(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;

	tier__obj_pevict_end(e, o);
	tier__job_free(j);
	tier__obj_kick(e, o);   /* a flush waiting to snapshot, then the queue */
	tier__agent_run(e);
	tier__deliver(e);
}

/* The record no longer lists the extents: drop them from the map, then free their space. */
static void pe_zero(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	const uint64_t *drop = j->snap, *nv = j->snap + e->nwords;
	uint64_t es = e->p.extent_size, len = tier__obj_len(e, o), before;
	size_t n = 0, i = 0;

	before = tier__obj_cached_bytes(e, o);
	tier__obj_set_state(e, o, o->state, nv, NULL);
	tier__count(e, j->img, evict_partial, 1);
	tier__count(e, j->img, evict_partial_bytes, before - tier__obj_cached_bytes(e, o));
	for (size_t k = 0; k < e->nbits; k++)
		if (tier__bit(drop, k) && (k == 0 || !tier__bit(drop, k - 1)))
			n++;
	j->ops = n ? calloc(n, sizeof(*j->ops)) : NULL;
	if (!j->ops) {
		pe_end(j);   /* the space stays allocated until overwritten: harmless */
		return;
	}
	j->step = PE_ZERO;
	j->nops = n;
	j->npending = n;
	for (size_t k = 0; k < e->nbits && i < n; k++) {
		struct tier_store_op *z;
		uint64_t s;

		if (!tier__bit(drop, k))
			continue;
		s = k;
		while (k + 1 < e->nbits && tier__bit(drop, k + 1))
			k++;
		z = &j->ops[i++];
		z->opcode = TIER_STORE_ZERO;
		z->flags = TIER_STORE_F_GUARD;
		z->expect_version = o->version;
		z->off = s * es;
		z->len = ((k + 1) * es < len ? (k + 1) * es : len) - z->off;
		z->cb = pe_cb;
		z->priv = j;
		memcpy(z->oid, j->op.oid, sizeof(z->oid));
	}
	for (i = 0; i < n; i++)
		tier__submit(e, e->cache, &j->ops[i]);
}

static void pe_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	int r = op->result;

	if (j->step == PE_SETMETA) {
		if (r == 0 && o->version == j->version && !(o->flags & TIER__OF_VUNK)) {
			pe_zero(j);
			return;
		}
		/*
		 * Nothing was dropped.  A SETMETA that failed either way leaves a
		 * record listing the extents or not: both are true, their bytes
		 * are all still there.
		 */
		tier__count(e, j->img, evict_failed, 1);
		if (r < 0 && r != -ECANCELED) {
			tier__log_fail(e, TIER_LOG_WARN, TIER__EL_EVICT, j->img, op->oid, e->cache,
				       r, "; the extents stay cached");
			tier__cache_error(e, r);
			e->agent_pause_until_ms = tier__eng_now_ms(e) + AGENT_PAUSE_MS;
		}
		pe_end(j);
		return;
	}
	/* a failed ZERO leaves bytes the record disowns: space, not data */
	if (r < 0 && !j->err)
		j->err = r;
	if (--j->npending)
		return;
	if (j->err && j->err != -ECANCELED)
		tier__debug(e, "partial eviction of %s: a ZERO failed (%d); the space stays allocated",
			    op->oid, j->err);
	pe_end(j);
}

int tier__evict_partial_start(struct tier_engine *e, struct tier_image *img, struct tier__obj *o)
{
	struct tier__job *j;
	struct tier__evict_view c;
	uint64_t *drop, *nv;
	const uint64_t *v = tier__obj_bits(o);
	int ml;

	if (tier__obj_busy(o) || (o->flags & TIER__OF_VUNK) || o->state == TIER__ABSENT ||
	    !ref_bits(e, o))
		return -EBUSY;
	j = tier__job_new(e, TIER__J_EVICT, img, o);
	if (!j)
		return -ENOMEM;
	j->snap = calloc(2 * e->nwords, sizeof(uint64_t));   /* dropped, new valid */
	if (!j->snap) {
		tier__job_free(j);
		return -ENOMEM;
	}
	drop = j->snap;
	nv = j->snap + e->nwords;
	if (!plan(e, o, drop, &c) || !c.n_ref) {
		tier__job_free(j);
		return -EAGAIN;   /* nothing to drop, or nothing to keep */
	}
	for (size_t w = 0; w < e->nwords; w++)
		nv[w] = v[w] & ~drop[w];
	j->version = o->version;
	ml = tier__meta_encode_obj(e, o->state == TIER__DIRTY ? TIER_META_F_DIRTY : 0, j->version,
				   nv, v + e->nwords, j->meta);
	if (ml < 0) {
		tier__job_free(j);
		return ml;
	}
	clear_refs(e, o);
	tier__obj_pevict_begin(e, o);
	j->step = PE_SETMETA;
	j->op.opcode = TIER_STORE_SETMETA;
	j->op.flags = TIER_STORE_F_META | TIER_STORE_F_GUARD | TIER_STORE_F_FUA;
	j->op.meta = j->meta;
	j->op.meta_len = (uint32_t)ml;
	j->op.version = j->version;
	j->op.expect_version = j->version;
	j->op.cb = pe_cb;
	j->op.priv = j;
	tier__oid(img, TIER__KEY_OBJNO(o->key), j->op.oid);
	tier__submit(e, e->cache, &j->op);
	return 0;
}
