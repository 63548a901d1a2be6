/* SPDX-License-Identifier: MIT */
/*
 * libtier/flush.c - the jobs that move data out of the cache: flush (read
 * dirty data from the cache, write it to base durably, then clear the dirty
 * mark with SETMETA guarded by the object version), evict (REMOVE of a
 * clean copy guarded by its version) and sync (make acknowledged writes
 * durable for NBD_CMD_FLUSH).  A cache write that starts during a flush
 * tells the flush which extents it re-dirties: in extent mode the flush then
 * clears only the extents it wrote to base and nobody wrote again (a partial
 * flush, the object stays DIRTY with the rest), in object mode nothing; in
 * both the agent leaves the object alone for a while.  A cold flush (the
 * agent's flush hand, tier__decide_flush_how) snapshots only the dirty
 * extents not referenced since the clock last looked: the same steps, of
 * fewer extents; the rest stays DIRTY as after a partial flush.  These
 * jobs must never mark an extent clean unless base holds exactly the data
 * the cache holds for it at the guarded version, and never remove a copy
 * whose version moved.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/engine_int.h"

#define AGENT_PAUSE_MS 1000   /* the agent rests after a failed flush or evict */

/* ---- flush ---- */

/* Where a flush job is (j->step, an int: keep these values). */
enum flush_step {
	FLUSH_STAT = 0,          /* STAT: learn the store's version after a failed write */
	FLUSH_READ = 1,          /* cache reads of the dirty data */
	FLUSH_WRITE = 2,         /* base writes, all but the last */
	FLUSH_WRITE_LAST = 3,    /* the last base write, with FUA (or none: nothing to write) */
	FLUSH_SETMETA = 4,       /* the guarded SETMETA (clean, or partly clean) runs */
	FLUSH_WAIT_SETMETA = 5,  /* a cache write is in flight: SETMETA once it lands */
	FLUSH_WAIT_SNAPSHOT = 6, /* a cache write is in flight: snapshot once it lands */
};

static void flush_cb(struct tier_store_op *op);

/* End the job; the caller kicks the object's queue. */
static void flush_end(struct tier__job *j, bool failed)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	struct tier__job **pp = &e->flushes;

	while (*pp && *pp != j)
		pp = &(*pp)->fnext;
	if (*pp)
		*pp = j->fnext;
	if (j->redirtied) {
		/* hot: rest at least as long as this flush took, or the min flush age */
		uint64_t now = tier__eng_now_ms(e), d = now - j->t_start_ms;
		tier__agent_cool(e, o, now + (d > e->p.cache_min_flush_age ? d : e->p.cache_min_flush_age));
	}
	if (failed) {
		tier__count(e, j->img, flush_failed, 1);
		e->agent_pause_until_ms = tier__eng_now_ms(e) + AGENT_PAUSE_MS;
		/* the agent rests after a failure; the lines are rate-limited too */
		char oid[TIER_OID_MAX];

		tier__oid(j->img, TIER__KEY_OBJNO(o->key), oid);
		tier__log_fail(e, TIER_LOG_WARN, TIER__EL_FLUSH, j->img, oid, e->base,
			       j->err ? j->err : -EIO, "; it stays dirty and is retried%s",
			       j->err ? "" : " (no base write could start)");
	}
	tier__obj_flush_end(e, o);
	if (o->flags & TIER__OF_EVICT_AFTER_FLUSH) {
		/*
		 * The flush of an eviction: evict the copy now it is clean, unless
		 * its image closed (the copy stays for the next open) or writes
		 * queued meanwhile: then the object is not cold, and the agent
		 * leaves it alone for as long as the flush took.
		 */
		uint64_t now = tier__eng_now_ms(e), d = now - j->t_start_ms;

		tier__obj_evict_dirty_end(e, o);
		if (o->state == TIER__CLEAN && !j->img->closed && !j->img->parked &&
		    tier__evict_start(e, j->img, o) == -EBUSY && o->qhead)
			tier__agent_cool(e, o, now + (d > e->p.cache_min_flush_age ? d :
						      e->p.cache_min_flush_age));
	}
	tier__job_free(j);
}

static void flush_done(struct tier__job *j, bool failed)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;

	flush_end(j, failed);
	tier__obj_kick(e, o);
	tier__agent_run(e);
	tier__deliver(e);
}

static void flush_submit(struct tier_store *st, struct tier_store_op *op)
{
	struct tier__job *j = op->priv;

	if (st == j->e->base)
		j->t_base = tier__eng_now_ns(j->e);
	tier__submit(j->e, st, op);
}

/*
 * Cache reads of the dirty runs of the snapshot, runs closer than this
 * merged into one read: reading the whole span of a sparse bitmap would
 * cost the cache device up to an object per flush.
 */
#define FLUSH_READ_GAP (64u * 1024)

static size_t read_runs(const struct tier__job *j, struct tier_store_op *ops)
{
	const struct tier_engine *e = j->e;
	const struct tier__obj *o = j->obj;
	uint64_t es = e->p.extent_size, s = 0, t = 0;
	size_t n = 0;

	for (uint64_t i = 0; i <= e->nbits; i++) {
		bool d = i < e->nbits && tier__bit(j->snap, i);
		uint64_t a = i * es, b = (i + 1) * es < tier__obj_len(e, o) ? (i + 1) * es : tier__obj_len(e, o);

		if (d && t && a - t <= FLUSH_READ_GAP) {
			t = b;             /* extend the current read */
			continue;
		}
		if ((d || i == e->nbits) && t) {
			if (ops) {
				ops[n].off = s;
				ops[n].len = t - s;
			}
			n++;
			t = 0;
		}
		if (d && a < b) {
			s = a;
			t = b;
		}
	}
	return n;
}

static void flush_read(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	size_t n = 1;
	bool reads = tier__obj_len(e, o) != 0;

	j->version = o->version;
	if (tier__obj_bits(o)) {
		memcpy(j->snap, tier__obj_bits(o) + e->nwords, e->nwords * 8);
		/*
		 * An eviction's flush is never cold (evict_dirty starts a whole
		 * one, and an object already flushing cannot start evicting):
		 * the test only guards that, it must flush every dirty extent.
		 */
		if (j->cold && !(o->flags & TIER__OF_EVICT_AFTER_FLUSH) &&
		    tier__flush_cold_snapshot(e, o, j->snap))
			tier__count(e, j->img, flush_cold, 1);
		n = read_runs(j, NULL);
		if (!n)
			reads = false;   /* nothing dirty: only the mark to clear */
	}
	j->step = FLUSH_READ;
	if (!reads) {
		j->step = FLUSH_WRITE_LAST;
		j->op.result = 0;
		j->npending = 0;
		flush_cb(&j->op);
		return;
	}
	j->ops = calloc(n, sizeof(*j->ops));
	if (!j->ops || tier__job_obuf(j) < 0) {
		flush_done(j, true);
		return;
	}
	if (tier__obj_bits(o)) {
		read_runs(j, j->ops);
	} else {
		j->ops[0].off = 0;
		j->ops[0].len = tier__obj_len(e, o);
	}
	j->nops = n;
	j->npending = n;
	for (size_t i = 0; i < n; i++) {
		uint64_t off = j->ops[i].off, len = j->ops[i].len;
		tier__job_op(j, &j->ops[i], TIER_STORE_READ, flush_cb);
		j->ops[i].off = off;
		j->ops[i].len = len;
		j->ops[i].buf = (char *)j->buf + off;
		flush_submit(e->cache, &j->ops[i]);
	}
}

/* Dirty runs as base writes; all but the last go out together, the last with FUA. */
static int flush_plan(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	uint64_t es = e->p.extent_size, n = 0;
	uint64_t *plan = j->snap ? j->snap + 2 * e->nwords : NULL;

	if (!tier__obj_bits(o)) {
		j->ops = calloc(1, sizeof(*j->ops));
		if (!j->ops)
			return -ENOMEM;
		tier__job_op(j, &j->ops[0], TIER_STORE_WRITE, flush_cb);
		j->ops[0].off = 0;
		j->ops[0].len = tier__obj_len(e, o);
		j->ops[0].buf = j->buf;
		j->nops = 1;
		return 0;
	}
	/* extents written again since the snapshot stay dirty: do not write them */
	for (size_t w = 0; w < e->nwords; w++)
		plan[w] = j->snap[w] & ~j->snap[e->nwords + w];
	for (uint64_t i = 0; i < e->nbits; i++)
		if (tier__bit(plan, i) && (i == 0 || !tier__bit(plan, i - 1)))
			n++;
	j->ops = calloc(n ? n : 1, sizeof(*j->ops));
	if (!j->ops)
		return -ENOMEM;
	for (uint64_t i = 0; i < e->nbits; i++) {
		uint64_t s, t;
		if (!tier__bit(plan, i) || (i > 0 && tier__bit(plan, i - 1)))
			continue;
		s = i;
		while (i + 1 < e->nbits && tier__bit(plan, i + 1))
			i++;
		t = (i + 1) * es < tier__obj_len(e, o) ? (i + 1) * es : tier__obj_len(e, o);
		if (s * es >= t)
			continue;
		tier__job_op(j, &j->ops[j->nops], TIER_STORE_WRITE, flush_cb);
		j->ops[j->nops].off = s * es;
		j->ops[j->nops].len = t - s * es;
		j->ops[j->nops].buf = (char *)j->buf + s * es;
		j->nops++;
	}
	return 0;
}

/* Would the SETMETA clear anything: a snapshot extent nobody wrote again? */
static bool flush_cleans(const struct tier__job *j)
{
	const struct tier_engine *e = j->e;

	if (!tier__obj_bits(j->obj))
		return !j->redirtied;
	for (size_t w = 0; w < e->nwords; w++)
		if (j->snap[w] & ~j->snap[e->nwords + w])
			return true;
	return !j->redirtied;   /* an empty snapshot: only the dirty flag to clear */
}

/*
 * New dirty bitmap = dirty now, less the snapshot extents base now holds and
 * nobody wrote again.  Cache writes on an object run alone: the SETMETA
 * waits for one in flight to land and then runs exclusive itself (a write
 * arriving meanwhile queues behind it for one cache op), so o->version is
 * the store's version and the bitmaps a later write computes start from the
 * new dirty state.  The version guard still protects against anything else.
 */
static void flush_setmeta(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	int ml;

	if (o->flags & TIER__OF_EXCL) {
		/* a cache write is in flight: its version would fail the guard */
		j->step = FLUSH_WAIT_SETMETA;
		return;
	}
	j->step = FLUSH_SETMETA;
	if ((o->flags & TIER__OF_VUNK) || !flush_cleans(j)) {
		flush_done(j, false);   /* nothing base surely holds to mark: stays dirty */
		return;
	}
	j->version = o->version;
	if (tier__obj_bits(o)) {
		const uint64_t *od = tier__obj_bits(o) + e->nwords, *snap = j->snap, *rd = snap + e->nwords;
		uint64_t *nd = j->snap + 2 * e->nwords;
		bool any = false;

		for (size_t w = 0; w < e->nwords; w++) {
			nd[w] = od[w] & ~(snap[w] & ~rd[w]);
			any |= nd[w] != 0;
		}
		ml = tier__meta_encode_obj(e, any ? TIER_META_F_DIRTY : 0, j->version, tier__obj_bits(o), nd,
					   j->meta);
	} else {
		ml = tier__meta_encode_obj(e, 0, j->version, NULL, NULL, j->meta);
	}
	/*
	 * F_ORDERED: base now holds what the cache held, but a power cut could
	 * still take the cache's unsynced bytes back; "clean" may only become
	 * durable with them, or a clean copy would differ from base.
	 */
	tier__job_op(j, &j->op, TIER_STORE_SETMETA, flush_cb);
	j->op.flags = TIER_STORE_F_META | TIER_STORE_F_GUARD | TIER_STORE_F_ORDERED;
	j->op.meta = j->meta;
	j->op.meta_len = ml > 0 ? (uint32_t)ml : 0;
	j->op.version = j->version;
	j->op.expect_version = j->version;
	if (ml < 0) {
		flush_done(j, true);
		return;
	}
	tier__obj_excl_begin(e, o);
	flush_submit(e->cache, &j->op);
}

/* The guarded SETMETA landed: apply the new dirty state (clean, or partial). */
static void flush_clean(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	uint64_t before = tier__obj_dirty_bytes(e, o);
	bool any = false;

	if (tier__obj_bits(o)) {
		const uint64_t *nd = j->snap + 2 * e->nwords;
		for (size_t w = 0; w < e->nwords; w++)
			any |= nd[w] != 0;
	}
	tier__obj_set_state(e, o, any ? TIER__DIRTY : TIER__CLEAN, NULL,
			    tier__obj_bits(o) ? j->snap + 2 * e->nwords : NULL);
	tier__count(e, j->img, flushes, 1);
	tier__count(e, j->img, flush_partial, any);
	tier__count(e, j->img, flush_bytes, before - tier__obj_dirty_bytes(e, o));
}

static void flush_base_writes(struct tier__job *j, bool last)
{
	struct tier_engine *e = j->e;

	if (!last) {
		j->step = FLUSH_WRITE;
		j->npending = j->nops - 1;
		for (size_t i = 0; i + 1 < j->nops; i++)
			flush_submit(e->base, &j->ops[i]);
		if (j->nops > 1)
			return;
	}
	j->step = FLUSH_WRITE_LAST;
	j->npending = 1;
	j->ops[j->nops - 1].flags = TIER_STORE_F_FUA;
	flush_submit(e->base, &j->ops[j->nops - 1]);
}

static void flush_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	int r = op->result;

	switch (j->step) {
	case FLUSH_STAT:   /* learn the store's version after a failed write */
		if (r < 0) {
			tier__cache_error(e, r);
			flush_done(j, true);
			return;
		}
		o->version = op->obj_version;
		tier__obj_vunk_end(e, o);
		flush_read(j);
		return;
	case FLUSH_READ:
		if (r < 0 && !j->err)
			j->err = r;
		if (j->npending && --j->npending)
			return;
		if (j->err) {
			tier__cache_error(e, j->err);
			flush_done(j, true);
			return;
		}
		free(j->ops);
		j->ops = NULL;
		j->nops = 0;
		if (!tier__obj_bits(o) && j->redirtied) {
			flush_done(j, false);   /* object mode: all of it was written again */
			return;
		}
		if (flush_plan(j) < 0) {
			flush_done(j, true);   /* base got nothing: nothing may be marked clean */
			return;
		}
		if (!j->nops) {
			flush_setmeta(j);
			return;
		}
		flush_base_writes(j, false);
		return;
	case FLUSH_WRITE:
	case FLUSH_WRITE_LAST:
		if (op != &j->op) {
			tier__base_latency(e, tier__eng_now_ns(e) - j->t_base);
			if (r < 0 && !j->err)
				j->err = r;
		}
		if (j->npending && --j->npending)
			return;
		if (j->err) {
			flush_done(j, true);
			return;
		}
		if (j->step == FLUSH_WRITE) {
			flush_base_writes(j, true);
			return;
		}
		flush_setmeta(j);
		return;
	case FLUSH_SETMETA:
	default:  /* SETMETA clean (or partly clean), run exclusive */
		tier__obj_excl_end(e, o);
		if (r == 0 && o->version == j->version && !(o->flags & TIER__OF_VUNK)) {
			flush_clean(j);
		} else if (r < 0 && r != -ECANCELED) {
			tier__cache_error(e, r);
			flush_done(j, true);
			return;
		}
		flush_done(j, false);
	}
}

void tier__flush_redirty(struct tier_engine *e, struct tier__obj *o, uint32_t off, uint32_t len)
{
	uint64_t es = e->p.extent_size;

	for (struct tier__job *j = e->flushes; j; j = j->fnext) {
		if (j->obj != o)
			continue;
		j->redirtied = true;
		if (!j->snap || !len)
			continue;
		for (uint64_t i = off / es; i <= ((uint64_t)off + len - 1) / es; i++)
			tier__bit_set(j->snap + e->nwords, i);
	}
}

/* Snapshot now, or first learn the store's version after a failed write. */
static void flush_begin(struct tier__job *j)
{
	if (j->obj->flags & TIER__OF_VUNK) {
		j->step = FLUSH_STAT;
		tier__job_op(j, &j->op, TIER_STORE_STAT, flush_cb);
		flush_submit(j->e->cache, &j->op);
		return;
	}
	flush_read(j);
}

void tier__flush_resume(struct tier_engine *e, struct tier__obj *o)
{
	for (struct tier__job *j = e->flushes; j; j = j->fnext) {
		if (j->obj != o)
			continue;
		if (j->step == FLUSH_WAIT_SETMETA)
			flush_setmeta(j);
		else if (j->step == FLUSH_WAIT_SNAPSHOT && o->state != TIER__DIRTY)
			flush_end(j, false);   /* a drop it waited for removed the copy */
		else if (j->step == FLUSH_WAIT_SNAPSHOT)
			flush_begin(j);
		return;
	}
}

static int flush_start(struct tier_engine *e, struct tier_image *img, struct tier__obj *o,
		       bool cold)
{
	struct tier__job *j;

	if (o->state != TIER__DIRTY ||
	    (o->flags & (TIER__OF_FLUSHING | TIER__OF_PROMOTING | TIER__OF_EVICTING)))
		return -EBUSY;
	j = tier__job_new(e, TIER__J_FLUSH, img, o);
	if (!j)
		return -ENOMEM;
	if (e->nwords) {
		/* snapshot, re-dirtied since the start, plan / new dirty */
		j->snap = calloc(3 * e->nwords, 8);
		if (!j->snap) {
			tier__job_free(j);
			return -ENOMEM;
		}
	}
	j->cold = cold;
	tier__obj_flush_begin(e, o);
	j->t_start_ms = tier__eng_now_ms(e);
	j->fnext = e->flushes;
	e->flushes = j;
	if (o->flags & TIER__OF_EXCL) {
		/* a hot object: snapshot between its cache writes, once this one lands */
		j->step = FLUSH_WAIT_SNAPSHOT;
		return 0;
	}
	flush_begin(j);
	return 0;
}

int tier__flush_start(struct tier_engine *e, struct tier_image *img, struct tier__obj *o)
{
	return flush_start(e, img, o, false);
}

int tier__flush_start_cold(struct tier_engine *e, struct tier_image *img, struct tier__obj *o)
{
	return flush_start(e, img, o, true);
}

/* ---- evict ---- */

static void evict_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_engine *e = j->e;
	struct tier__obj *o = j->obj;
	int r = op->result;

	if (r == 0 || r == -ENOENT) {
		uint64_t bytes = tier__obj_cached_bytes(e, o);
		tier__obj_set_state(e, o, TIER__ABSENT, NULL, NULL);
		tier__obj_copy_gone(e, o);
		tier__count(e, j->img, evictions, 1);
		tier__count(e, j->img, evict_bytes, bytes);
	} else {
		tier__count(e, j->img, evict_failed, 1);
		if (r != -ECANCELED) {
			tier__log_fail(e, TIER_LOG_WARN, TIER__EL_EVICT, j->img, op->oid, e->cache,
				       r, "; the copy stays cached");
			tier__cache_error(e, r);
			e->agent_pause_until_ms = tier__eng_now_ms(e) + AGENT_PAUSE_MS;
		}
	}
	tier__obj_evict_end(e, o);
	tier__job_free(j);
	tier__obj_kick(e, o);
	tier__agent_run(e);
	tier__deliver(e);
}

/*
 * A dirty copy (a victim only with agent_evict_dirty: tier__decide_evict) is
 * flushed first, writes to it waiting
 * (EVICT_AFTER_FLUSH), and evicted when the flush ends (flush_end), if it
 * is clean then and nothing is queued on it.
 */
static int evict_dirty(struct tier_engine *e, struct tier_image *img, struct tier__obj *o)
{
	int rc;

	/* set first: a flush with nothing to write can end inside tier__flush_start */
	tier__obj_evict_dirty_begin(e, o);
	rc = tier__flush_start(e, img, o);
	if (rc < 0) {
		tier__obj_evict_dirty_end(e, o);
	}
	return rc;
}

int tier__evict_start(struct tier_engine *e, struct tier_image *img, struct tier__obj *o)
{
	struct tier__job *j;

	if (tier__obj_busy(o) || (o->flags & TIER__OF_VUNK))
		return -EBUSY;
	if (o->state == TIER__DIRTY)   /* a dirty victim: tier__decide_evict allowed it */
		return evict_dirty(e, img, o);
	if (o->state != TIER__CLEAN)
		return -EBUSY;
	j = tier__job_new(e, TIER__J_EVICT, img, o);
	if (!j)
		return -ENOMEM;
	tier__obj_evict_begin(e, o);
	/*
	 * FUA: once the engine calls the object ABSENT, base is authoritative
	 * and may change; a copy that came back after a power cut would serve
	 * its old bytes over them.
	 */
	j->op.opcode = TIER_STORE_REMOVE;
	j->op.flags = TIER_STORE_F_GUARD | TIER_STORE_F_FUA;
	j->op.expect_version = o->version;
	j->op.cb = evict_cb;
	j->op.priv = j;
	tier__oid(img, TIER__KEY_OBJNO(o->key), j->op.oid);
	tier__submit(e, e->cache, &j->op);
	return 0;
}

/* ---- sync (NBD_CMD_FLUSH) ---- */

/*
 * A sync job makes one object durable on each pool it was written in
 * without FUA since its last sync (a one-byte READ with F_FUA: the store's
 * sync barrier of that object), or is a name barrier for the base pool's
 * removes (a FUA REMOVE of an object that never exists).  Each job takes a
 * sequence number when it starts; the jobs in flight form a list in that
 * order.  A FLUSH starts jobs for what is unsynced now, then waits for
 * every job numbered up to the last one started: jobs an earlier FLUSH or
 * the background started cover the writes completed before they started,
 * so nothing is issued twice and a FLUSH costs the objects it must sync,
 * however many FLUSHes are in flight.  A failed job puts its object's
 * UNSYNC flags back and fails every FLUSH waiting for it; later FLUSHes
 * sync the object again, so the error sticks until a sync succeeds.
 */
struct tier__sync_wait {
	struct tier__sync_wait *next;
	struct tier_request *req;
	struct tier_image *img;
	uint64_t seq;   /* done when every job numbered <= seq is */
	int err;
};

#define SYNC_BG_PAUSE_MS 1000   /* background syncs rest after a failed sync */

static void sync_wake(struct tier_engine *e)
{
	uint64_t low = e->syncs ? e->syncs->seq : UINT64_MAX;
	struct tier__sync_wait *w;

	while ((w = e->sync_waits) && w->seq < low) {
		e->sync_waits = w->next;
		if (!e->sync_waits)
			e->sync_waits_tail = NULL;
		tier__req_put(e, w->req, w->err);
		free(w);
	}
}

/*
 * A failed sync: the data is still not known durable.  Flag the object
 * again (errseq: the next FLUSH syncs it again), fail the FLUSHes of its
 * image waiting for it (all of them for a barrier), and let the
 * background rest, or a failing disk would be asked again every tick.
 */
static void sync_failed(struct tier__job *j, struct tier__obj *o)
{
	struct tier_engine *e = j->e;
	uint64_t now = tier__eng_now_ms(e);

	e->st.sync_errors++;
	if (now >= e->sync_bg_pause_until_ms)
		tier__log(e, TIER_LOG_WARN, "sync of %s failed: %s; FLUSHes covering it fail "
			  "until it is synced again", j->ops[0].oid[0] ? j->ops[0].oid : j->ops[1].oid,
			  strerror(-j->err));
	e->sync_bg_pause_until_ms = now + SYNC_BG_PAUSE_MS;
	if (o && (j->sync_flags & TIER__OF_UNSYNC_C))
		tier__obj_unsync_begin(e, o, TIER__OF_UNSYNC_C);
	if (o && (j->sync_flags & TIER__OF_UNSYNC_B))
		tier__obj_unsync_begin(e, o, TIER__OF_UNSYNC_B);
	for (struct tier__sync_wait *w = e->sync_waits; w; w = w->next)
		if (w->seq >= j->seq && !w->err && (!j->sync_flags || w->img == j->img))
			w->err = -EIO;
}

static void sync_end(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier__obj *o = NULL;

	if (j->fprev)
		j->fprev->fnext = j->fnext;
	else
		e->syncs = j->fnext;
	if (j->fnext)
		j->fnext->fprev = j->fprev;
	else
		e->syncs_tail = j->fprev;
	if (j->sync_flags) {
		/* held in the map while its sync runs (nsync), so it is there */
		o = tier__obj_find(e, j->sync_key);
		if (o && o->nsync && o->nsync < UINT8_MAX)
			o->nsync--;
	}
	if (j->err)
		sync_failed(j, o);
	else if (j->sync_flags)
		e->st.syncs++;
	if (o)
		tier__obj_release(e, o);
	tier__job_free(j);
	sync_wake(e);
}

static void sync_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_engine *e = j->e;
	int r = op->result;

	if (r < 0 && r != -ENOENT && !j->err)
		j->err = r;
	if (!--j->npending)
		sync_end(j);
	tier__deliver(e);
}

static void barrier_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_engine *e = j->e;
	int pool = (int)(op - j->ops);

	/* the barrier object never exists: ENOENT is the expected answer */
	if ((op->result >= 0 || op->result == -ENOENT) && e->rm_synced[pool] < j->ops_gen[pool])
		e->rm_synced[pool] = j->ops_gen[pool];
	sync_cb(op);
}

/* A new job, numbered and at the tail of the list; NULL on ENOMEM. */
static struct tier__job *sync_job_new(struct tier_engine *e, struct tier_image *img)
{
	struct tier__job *j = tier__job_new(e, TIER__J_SYNC, img, NULL);

	if (!j || !(j->ops = calloc(2, sizeof(*j->ops)))) {
		tier__job_free(j);
		return NULL;
	}
	j->seq = ++e->sync_seq;
	j->npending = 1;   /* held while submitting */
	j->fprev = e->syncs_tail;
	if (e->syncs_tail)
		e->syncs_tail->fnext = j;
	else
		e->syncs = j;
	e->syncs_tail = j;
	return j;
}

static void sync_job_submit(struct tier__job *j, int pool, struct tier_store_op *op)
{
	struct tier_store *st = pool ? j->e->base : j->e->cache;

	op->priv = j;
	j->npending++;
	tier__submit(j->e, st, op);
}

/* Drop the submit hold: the job may end here (its callbacks all ran). */
static void sync_job_go(struct tier__job *j)
{
	if (!--j->npending)
		sync_end(j);
}

/*
 * Once the job exists it takes over the object's UNSYNC flags `flags`
 * (cleared before its ops go out; a failed sync sets them again, from its
 * callback); on -ENOMEM they stay.  The object stays in the map until the
 * job ends; a promotion meanwhile knows base may not be durable.
 */
static int sync_one(struct tier_engine *e, struct tier_image *img, struct tier__obj *o,
		    uint16_t flags)
{
	static const uint16_t fl[2] = { TIER__OF_UNSYNC_C, TIER__OF_UNSYNC_B };
	struct tier__job *j = sync_job_new(e, img);

	if (!j)
		return -ENOMEM;
	tier__obj_unsync_end(e, o, flags);
	j->sync_key = o->key;
	j->sync_flags = flags;
	if (o->nsync < UINT8_MAX)
		o->nsync++;   /* at 255 it stays: the entry is kept for good, harmless */
	for (int i = 0; i < 2; i++) {
		struct tier_store_op *op = &j->ops[i];

		if (!(flags & fl[i]))
			continue;
		op->opcode = TIER_STORE_READ;
		op->flags = TIER_STORE_F_FUA;
		op->off = 0;
		op->len = 1;
		op->buf = j->meta + i;
		op->cb = sync_cb;
		tier__oid(img, TIER__KEY_OBJNO(o->key), op->oid);
		sync_job_submit(j, i, op);
	}
	sync_job_go(j);
	return 0;
}

static void list_flagged(struct tier_engine *e, struct tier__obj *o, void *arg)
{
	uint64_t **keys = arg;
	size_t n = e->n_unsync;

	if (!(o->flags & (TIER__OF_UNSYNC_C | TIER__OF_UNSYNC_B)) || !*keys)
		return;
	if (n == e->cap_unsync) {
		uint64_t *nk = realloc(*keys, (n ? 2 * n : 256) * sizeof(*nk));

		if (!nk) {
			free(*keys);
			*keys = NULL;
			return;
		}
		*keys = nk;
		e->cap_unsync = n ? 2 * n : 256;
	}
	(*keys)[e->n_unsync++] = o->key;
}

/* After an ENOMEM lost a key: list every flagged object again from the map. */
static int unsync_rebuild(struct tier_engine *e)
{
	uint64_t *keys = malloc(256 * sizeof(*keys));

	if (!keys)
		return -ENOMEM;
	free(e->unsync);
	e->unsync = NULL;
	e->n_unsync = 0;
	e->cap_unsync = 256;
	tier__map_foreach(e, list_flagged, &keys);
	e->unsync = keys;
	if (!keys) {
		e->n_unsync = e->cap_unsync = 0;
		return -ENOMEM;
	}
	e->unsync_lost = false;
	return 0;
}

/* Start a sync of every unsynced object (of `only`, or all). */
static int sync_keys(struct tier_engine *e, struct tier_image *only)
{
	size_t w = 0, i, n0;
	int rc = 0;

	if (e->unsync_lost && unsync_rebuild(e) < 0)
		return -ENOMEM;
	/*
	 * keys appended during the loop are kept after it (none today: a failed
	 * sync appends from its callback, never inside sync_one)
	 */
	n0 = e->n_unsync;
	for (i = 0; i < n0; i++) {
		uint64_t key = e->unsync[i];
		struct tier__obj *o = tier__obj_find(e, key);
		struct tier_image *img = tier__image_by_id(e, TIER__KEY_ID(key));
		uint16_t f;

		if (!o || !img)
			continue;
		f = o->flags & (TIER__OF_UNSYNC_C | TIER__OF_UNSYNC_B);
		if (!f)
			continue;
		if ((only && img != only) || rc < 0) {
			e->unsync[w++] = key;
			continue;
		}
		rc = sync_one(e, img, o, f);
		if (rc < 0)
			e->unsync[w++] = key;   /* flags kept: a later FLUSH tries again */
	}
	if (e->n_unsync > n0)
		memmove(e->unsync + w, e->unsync + n0, (e->n_unsync - n0) * sizeof(*e->unsync));
	e->n_unsync = w + (e->n_unsync - n0);
	return rc;
}

void tier__note_remove(struct tier_engine *e, struct tier_store *st, uint32_t flags)
{
	bool base = st == e->base;

	/* rados: a remove is durable when acknowledged, no barrier needed */
	if (!(flags & TIER_STORE_F_FUA) && (base ? e->sync_base : e->sync_cache))
		e->rm_gen[base]++;
}

/*
 * Removes are made durable by the directory (local) or the OSD (rados), not
 * by syncing an object: a FUA REMOVE of an object that never exists is the
 * barrier that covers every remove completed before it on that pool.
 */
static int sync_removes(struct tier_engine *e, struct tier_image *img)
{
	struct tier__job *j;

	if (e->rm_gen[0] == e->rm_synced[0] && e->rm_gen[1] == e->rm_synced[1])
		return 0;
	j = sync_job_new(e, img);
	if (!j)
		return -ENOMEM;
	for (int i = 0; i < 2; i++) {
		struct tier_store_op *op = &j->ops[i];

		if (e->rm_gen[i] == e->rm_synced[i])
			continue;
		j->ops_gen[i] = e->rm_gen[i];
		op->opcode = TIER_STORE_REMOVE;
		op->flags = TIER_STORE_F_FUA;
		op->cb = barrier_cb;
		snprintf(op->oid, sizeof(op->oid), "tier.sync-barrier");
		sync_job_submit(j, i, op);
	}
	sync_job_go(j);
	return 0;
}

/*
 * A FLUSH covers every write acknowledged before it: sync what is unsynced
 * now, then wait for every sync in flight (they cover what was unsynced
 * before; their UNSYNC flags are gone).
 */
void tier__sync_start(struct tier_engine *e, struct tier_image *img, struct tier_request *req)
{
	struct tier__sync_wait *w = calloc(1, sizeof(*w));
	int rc;

	req->pending++;   /* held while starting */
	if (!w) {
		tier__req_put(e, req, -ENOMEM);
		return;
	}
	/* waiting from the start: a job failing while we start it fails us too */
	w->req = req;
	w->img = img;
	w->seq = UINT64_MAX;
	req->pending++;
	if (e->sync_waits_tail)
		e->sync_waits_tail->next = w;
	else
		e->sync_waits = w;
	e->sync_waits_tail = w;
	rc = sync_keys(e, img);
	if (rc == 0)
		rc = sync_removes(e, img);
	if (rc < 0 && !w->err)
		w->err = rc;
	w->seq = e->sync_seq;
	sync_wake(e);
	tier__req_put(e, req, 0);
}

void tier__sync_background(struct tier_engine *e)
{
	(void)sync_keys(e, NULL);
}
