/* SPDX-License-Identifier: MIT */
/*
 * libtier/decide.h (internal) - every routing and agent decision of the
 * engine as a pure function of what it may look at: the parameters, a
 * snapshot of the object and the request piece, the engine's fullness and
 * health.  No store calls, no counters, no side effects: route.c fills a
 * struct tier__dstate, asks, and carries out the named route; the agent
 * asks whether an object is worth flushing or evicting.  The routing rules
 * are documented once, in decide.c, and tested as a table
 * (tests/unit/test_decide.c).
 */
#ifndef TIER_DECIDE_H
#define TIER_DECIDE_H

#include <stdbool.h>
#include <stdint.h>

#include "tier/params.h"

/* What happens to one per-object piece of a request when it reaches the head of its queue. */
enum tier__route {
	TIER__R_WAIT = 0,             /* stays at the head until an op it must follow ends */
	TIER__R_DONE,                 /* nothing to do: complete with success */
	TIER__R_FAIL,                 /* complete with EIO, changing nothing */
	TIER__R_HIT,                  /* read the piece from the cache copy */
	TIER__R_HIT_PARTIAL,          /* read the cache copy, then base for extents it lacks */
	TIER__R_EXTENT_MISS,          /* cached object, none of the piece: base reads only */
	TIER__R_PROXY,                /* the op goes to base; the cache is untouched */
	TIER__R_PROXY_THEN_PROMOTE,   /* the op goes to base; a promotion queues behind it */
	TIER__R_PROXY_NEW_EXTENTS,    /* over target, extent mode: write extents the cache lacks to base */
	TIER__R_CACHE_WRITE,          /* write or zero the cache copy (extent mode: may create it) */
	TIER__R_PROMOTE_WAIT,         /* promote the object; the write waits for it, then hits */
	TIER__R_PROMOTE,              /* cache hint: promote the object now */
	TIER__R_FLUSH_FIRST,          /* flush the dirty copy, then decide again */
	TIER__R_DROP_THEN_PROXY,      /* remove the cache copy durably, then the op goes to base */
	TIER__R_DROP_BASE_THEN_CACHE, /* whole-object trim of a dirty copy: base, then the copy */
	TIER__R_FILL,                 /* fill hint: copy the extents the copy lacks from base */
	TIER__R_COUNT
};

/*
 * After a read that needed base for part of a cached copy (HIT_PARTIAL,
 * EXTENT_MISS): whether to fill the copy's invalid extents, or why not.
 * NONE is no event (nothing to fill, a fill in flight or the fill hint
 * queued brings it already, a stream's next read beside a queued hint, or
 * the cache mode admits no read); the SKIP_* reasons are counted.
 */
enum tier__fill {
	TIER__FILL_NONE = 0,
	TIER__FILL_GO,            /* queue a fill behind the read (the throttle may still veto) */
	TIER__FILL_SKIP_COLD,     /* the read admission says no: recency / policy hint */
	TIER__FILL_SKIP_FULL,     /* the cache is at or over its target */
	TIER__FILL_SKIP_DEGRADED, /* a cache pool error lately */
	TIER__FILL_BEHIND_COPY,   /* a proxied read: a fill of its extents waits for the copy
				     a read fill is making (decide_read) */
};

/* Which hit/miss counter a write's route counts for (once per piece). */
enum tier__count { TIER__C_NONE = 0, TIER__C_HIT, TIER__C_MISS };

/* What a routing decision may look at: filled by route.c (fill_state). */
struct tier__dstate {
	/* the piece */
	int type;              /* enum tier_req_type */
	bool whole;            /* covers the whole object */
	bool nocache;          /* its cache path failed before: base only */
	uint8_t tries;         /* flushes it started already */
	/* the object */
	uint8_t state;         /* TIER__ABSENT / CLEAN / DIRTY */
	uint16_t flags;        /* TIER__OF_* */
	uint16_t nrun, nproxy; /* shared ops running; of them, proxied writes of extents no
				  copy holds (the rest are reads) */
	bool extents;          /* the copy has bitmaps (extent mode) */
	bool all_valid;        /* every extent of the piece is in the copy */
	bool any_valid;        /* some extent of the piece is */
	bool any_dirty;        /* some byte of the piece is dirty in the copy */
	bool obj_all_valid;    /* fill hints: every extent of the object is in the copy */
	bool clean_extents;    /* the copy holds valid extents that are clean */
	uint64_t fill_brings;  /* reads: bytes of the fill in flight on the object that
				  brings every extent of the piece the copy lacks (0: none) */
	bool fill_admitted;    /* writes, and reads with a fill hint queued: every extent
				  of the piece the copy lacks is on its way in (a fill
				  in flight brings it or the queued hint wants it) */
	bool seq;              /* reads with a fill hint queued: it continues a stream */
	/* the engine */
	bool bitmaps;          /* the engine keeps extent bitmaps (extent_size set) */
	bool degraded;         /* a cache pool error lately: no new admissions */
	bool cache_down;       /* cache ops timed out lately: fail fast */
	double full;           /* full ratio, admitted bytes included */
	double full_less_own;  /* hints: the full ratio less their own reservation */
	/* admission (misses, and reads of a partly valid copy: fills) */
	bool offered;          /* a client's piece at its first decision: it may be admitted */
	bool recent;           /* Ceph's recency rule held before this access */
	bool hint;             /* the eviction policy would admit it (S3-FIFO, ARC ghost) */
	uint8_t freq;          /* admission = tinylfu: the sketch's estimate, this access included */
	uint8_t victim_freq;   /* and the estimate of the policy's coldest cached object */
};

struct tier__decision {
	enum tier__route route;
	bool record;           /* the access counts now (hitsets, eviction policy) */
	bool nocache;          /* from now on the piece goes to base only (sticky) */
	bool admitted;         /* the route promotes: promote.c's throttle may veto it */
	enum tier__count count;
	enum tier__fill fill;  /* reads of a partly valid copy: fill it afterwards? */
	const char *why;       /* one phrase, for the debug trace */
};

const char *tier__route_name(enum tier__route r);
const char *tier__fill_name(enum tier__fill f);   /* "" for NONE */

/* Route one piece (any request type).  @p the engine's parameters. */
struct tier__decision tier__decide(const struct tier_params *p, const struct tier__dstate *s);

/* Would a miss be admitted (before the throttle)?  Part of tier__decide. */
bool tier__decide_admit(const struct tier_params *p, const struct tier__dstate *s, bool is_write);

/* Does a read wait for the small fill in flight that brings it?  Part of tier__decide. */
bool tier__decide_delayed_hit(const struct tier__dstate *s);

/* Fill a partly valid copy after a read that needed base?  Part of tier__decide. */
enum tier__fill tier__decide_fill(const struct tier_params *p, const struct tier__dstate *s);

/*
 * The fills' cache-write budget (extent mode, fill_budget_pct > 0): bytes
 * it gains per client byte, and the most it banks.  0: fills take the
 * promotion throttle's tokens instead.
 */
double tier__decide_fill_budget_rate(const struct tier_params *p);
double tier__decide_fill_budget_cap(const struct tier_params *p);

/*
 * Does a fill take the whole object (the rest of it) rather than its
 * fill_window?  fits: every extent the copy lacks fits in the room below
 * the full target; seq: the read continues a sequential stream; valid,
 * nbits: the copy's valid extents and the object's.
 */
bool tier__decide_fill_whole(const struct tier_params *p, bool fits, bool seq, uint64_t valid,
			     uint64_t nbits);

/* ---- the agent ---- */

/* Why the agent passes over an object it was offered (coldest first). */
enum tier__skip {
	TIER__SKIP_NONE = 0,   /* take it */
	TIER__SKIP_STATE,      /* not DIRTY (flush) / not CLEAN (evict), or gone */
	TIER__SKIP_IMAGE,      /* its image is closed, or not the one being drained */
	TIER__SKIP_BUSY,       /* flush: a job runs on it; evict: a job or an op, or its version is unknown */
	TIER__SKIP_HOT,        /* written during its last flush: cooling off */
	TIER__SKIP_YOUNG,      /* younger than cache_min_flush_age / cache_min_evict_age */
	TIER__SKIP_COUNT
};

struct tier__agent_view {
	uint8_t state;
	uint16_t flags;
	bool busy;             /* tier__obj_busy: queued or running ops, jobs */
	bool image_ok;         /* open, and the drain target if there is one */
	bool ignore_age;       /* full mode or an admin drain */
	uint64_t age_ms;       /* since the last write or promotion */
};

const char *tier__skip_name(enum tier__skip s);
enum tier__skip tier__decide_flush(const struct tier_params *p, const struct tier__agent_view *v);
enum tier__skip tier__decide_evict(const struct tier_params *p, const struct tier__agent_view *v);

/*
 * Extent-aware eviction (extent mode, evict_extents): how the agent takes a
 * victim the eviction order or the clock hand picked.  n_ref: its valid
 * extents read or written since the agent last looked at it; n_drop: its
 * clean valid extents not among them; n_clean: its clean valid extents.
 * PASS: leave it as it is (nothing cleared, the order not told).
 */
enum tier__evict_how { TIER__EVH_WHOLE = 0, TIER__EVH_PARTIAL, TIER__EVH_AGAIN, TIER__EVH_PASS };
struct tier__evict_view {
	bool extents;          /* the copy has bitmaps (extent mode) */
	bool drain;            /* an admin evict: everything goes */
	bool objects_bind;     /* target_max_objects gives the full ratio: only objects free room */
	bool now;              /* full mode (from 100%), the order's victim: no second chance */
	bool flushing;         /* the agent flushes (flush mode low or high) */
	uint64_t n_ref, n_drop, n_clean;
	uint64_t n_dirty_cold; /* its dirty extents not referenced: what a cold flush takes */
};
enum tier__evict_how tier__decide_evict_how(const struct tier_params *p,
					    const struct tier__evict_view *v);

/*
 * Which dirty extents the agent flushes of an object the order offered
 * (hand false) or the flush hand visits (hand true), with the clock on
 * (extent mode, evict_extents = 2): WHOLE every dirty extent, COLD only
 * those not referenced since the clock last looked, HAND leave it to the
 * flush hand, PASS nothing now.  n_dirty_ref / n_dirty_cold: its dirty
 * extents referenced / not since the clock last looked.
 */
enum tier__flush_how { TIER__FLH_WHOLE = 0, TIER__FLH_COLD, TIER__FLH_HAND, TIER__FLH_PASS };
struct tier__flush_view {
	bool extents;          /* the copy has reference bits (extent mode) */
	bool drain;            /* an admin flush or evict, or cache_mode none: everything goes */
	bool hand;             /* the flush hand's visit, not the order's offer */
	bool round2;           /* the hand's second round: its first this run started nothing */
	uint64_t n_dirty_ref, n_dirty_cold;
};
enum tier__flush_how tier__decide_flush_how(const struct tier_params *p,
					    const struct tier__flush_view *v);

/*
 * The agent's modes from the ratios, with hysteresis against the current
 * ones: flush idle/low/high from the dirty ratio, evict idle/some/full from
 * the full ratio, and the evict effort in percent.  cache_mode none drains.
 */
struct tier__modes { int flush, evict; unsigned effort_pct; };
struct tier__modes tier__decide_modes(const struct tier_params *p, struct tier__modes cur,
				      double dirty_ratio, double full_ratio, bool any_dirty,
				      bool any_cached);

/* How many flushes / evictions the agent may have in flight. */
struct tier__budget_in {
	struct tier__modes m;
	bool drain_flush, drain_evict;  /* an admin flush / evict runs */
	bool any_dirty;
	double base_lat_ewma, base_lat_floor;
	bool turnover;                  /* a phase change: the cache turns over */
	uint64_t reqs_inflight;         /* client requests in the engine */
};
/*
 * A phase change: the hit ratio over the last ~1000 counted requests is
 * more than PHASE_DROP (10 points) under the one over the last ~30000.
 */
bool tier__decide_phase_change(double hit_fast, double hit_slow);
uint64_t tier__decide_flush_budget(const struct tier_params *p, const struct tier__budget_in *b);
uint64_t tier__decide_evict_budget(const struct tier_params *p, const struct tier__budget_in *b);

/* ---- durability ordering (docs/DURABILITY.md) ---- */

/*
 * The store flags of a cache write: creating (the copy is ABSENT: F_EXCL),
 * new_valid (it makes extents valid: F_ORDERED), clean_over (it overwrites
 * extents the store holds as clean: write.c's cw_issue gives the dirty
 * mark as pre_meta), rec_dirty (the store's record is known to be the
 * object's DIRTY meta: no failed write left it uncertain), fua (the client
 * asked).  Without the first three and fua, over a known dirty record, the
 * new meta differs from the stored one only in its version: F_LAZY_META.
 */
uint32_t tier__decide_cw_flags(bool creating, bool new_valid, bool clean_over, bool rec_dirty,
			       bool fua);

/* How a promotion reads base, given what base may not hold durably yet. */
enum tier__promote_read { TIER__PR_PLAIN = 0, TIER__PR_FUA, TIER__PR_BARRIER_FIRST };
enum tier__promote_read tier__decide_promote_read(bool base_removes_unsynced,
						  bool base_unsynced, bool sync_running);

#endif
