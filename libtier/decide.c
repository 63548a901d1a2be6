/* SPDX-License-Identifier: MIT */
/*
 * libtier/decide.c - every decision of the engine, as pure functions: where
 * each piece of a request goes (cache, base, a promotion, a drop, a wait),
 * whether a miss is admitted, whether a partly valid copy is filled after a
 * read that needed base, which objects the agent flushes or evicts and
 * how many, and which durability ordering a cache write or a promotion
 * needs.  It reads the parameters (cache_mode, promote_granularity,
 * write_miss, recency, ages, ratios) and a snapshot the caller filled; it
 * never touches a store, a counter or the object.  route.c (with read.c,
 * write.c, hint.c), promote.c, fill.c, agent.c and flush.c carry the
 * answers out.  Each rule has an ID in
 * docs/RULES.md (R-* routing, A-* the agent, D-* durability), cited above
 * the code that decides it; tests/unit/test_decide.c checks the routes as
 * a table whose rows cite the same IDs.
 */
#include <math.h>
#include <stddef.h>

#include "libtier/decide.h"
#include "libtier/engine_int.h"
#include "tier/store.h"

static const char *const route_names[TIER__R_COUNT] = {
	[TIER__R_WAIT] = "wait",
	[TIER__R_DONE] = "done",
	[TIER__R_FAIL] = "fail",
	[TIER__R_HIT] = "hit",
	[TIER__R_HIT_PARTIAL] = "hit-partial",
	[TIER__R_EXTENT_MISS] = "extent-miss",
	[TIER__R_PROXY] = "proxy",
	[TIER__R_PROXY_THEN_PROMOTE] = "proxy-then-promote",
	[TIER__R_PROXY_NEW_EXTENTS] = "proxy-new-extents",
	[TIER__R_CACHE_WRITE] = "cache-write",
	[TIER__R_PROMOTE_WAIT] = "promote-wait",
	[TIER__R_PROMOTE] = "promote",
	[TIER__R_FLUSH_FIRST] = "flush-first",
	[TIER__R_DROP_THEN_PROXY] = "drop-then-proxy",
	[TIER__R_DROP_BASE_THEN_CACHE] = "drop-base-then-cache",
	[TIER__R_FILL] = "fill",
};

const char *tier__route_name(enum tier__route r)
{
	return (unsigned)r < TIER__R_COUNT ? route_names[r] : "?";
}

const char *tier__fill_name(enum tier__fill f)
{
	switch (f) {
	case TIER__FILL_NONE: return "";
	case TIER__FILL_GO: return "go";
	case TIER__FILL_SKIP_COLD: return "skipped, cold";
	case TIER__FILL_SKIP_FULL: return "skipped, cache full";
	case TIER__FILL_SKIP_DEGRADED: return "skipped, cache degraded";
	case TIER__FILL_BEHIND_COPY: return "behind the copy being made";
	}
	return "?";
}

static struct tier__decision go(enum tier__route r, const char *why)
{
	return (struct tier__decision){ .route = r, .why = why };
}

#define AGENT_SLOP 0.02   /* the agent's hysteresis, in ratio units */
/*
 * Evict mode "some" stops this far under cache_target_full_ratio: the cache
 * the agent keeps sits between the two, so the mean room it leaves unused
 * is about half of it.  With AGENT_SLOP (0.02) that was 1% of the target,
 * worth most of what zipf0.9@25%, log@25% and vms@5/10% missed beyond an
 * LRU of blocks at the full usable size; at 0.005 the cache sat at its line
 * and whole-object fills (fill_window: room below the target) found no
 * room, loop@25% +2.8 points (A-MODE-2).
 */
#define EVICT_SLOP 0.01

/*
 * R-ADMIT-4.
 * Room for a miss without pressure: the cache (admitted bytes included) is
 * below its full target by more than the agent's hysteresis, so admitting
 * it evicts nothing now and the agent is not about to start.  The margin
 * (AGENT_SLOP) is wider than the band the agent holds a full cache in (the
 * target and EVICT_SLOP under it), so a full cache does not open its
 * admission after every eviction.
 */
static bool room_for_miss(const struct tier_params *p, const struct tier__dstate *s)
{
	return p->admit_when_room && s->offered &&
	       s->full < p->cache_target_full_ratio - AGENT_SLOP;
}

/*
 * R-ADMIT-1..5.
 * Admission of a miss, in Ceph's order: the cache mode (writeback admits
 * both, readproxy only writes, readonly only reads, proxy and none
 * nothing), a degraded cache pool, the cache at or over 100% of its target
 * (admitted bytes included), then Ceph's recency rule or else the eviction
 * policy's hint.  Admission filters only under pressure (admit_when_room,
 * the default): with room below the full target (room_for_miss) a miss
 * the recency rule would turn away is admitted, as with recency 0, since
 * it pushes nothing out, and every miss not cached there is one an LRU of
 * the same size would not have twice (R-ADMIT-4); as the recency rule, only at a piece's first
 * decision (offered), so a promotion failing on a sick base is not
 * retried for the same request forever.  With admission = tinylfu, once
 * the cache is at its full target (cache_target_full_ratio) a miss must
 * also be more frequent than the object it would push out (TinyLFU:
 * estimate > the victim's), so a one-off does not evict a popular object.
 * The token buckets come after (promote.c, R-ADMIT-6).
 */
bool tier__decide_admit(const struct tier_params *p, const struct tier__dstate *s, bool is_write)
{
	enum tier_cache_mode m = p->cache_mode;

	if (m == TIER_MODE_NONE || m == TIER_MODE_PROXY)
		return false;
	if ((m == TIER_MODE_READPROXY && !is_write) || (m == TIER_MODE_READONLY && is_write))
		return false;
	if (s->degraded || s->full >= 1.0)
		return false;
	if (!s->recent && !s->hint && !room_for_miss(p, s))
		return false;
	if (p->admission == TIER_ADMIT_TINYLFU && s->full >= p->cache_target_full_ratio)
		return s->freq > s->victim_freq;
	return true;
}

/*
 * R-FILL-1 (and R-FILL-2, R-FILL-3).
 * Fills (extent bitmaps): a read that needs base for part of a cached copy
 * is a read miss of those extents, admitted as a read miss of the object
 * would be (tier__decide_admit: the recency rule before this access, or the
 * policy's hint).  Then a fill queues behind the read and copies the
 * extents the copy lacks in its window (fill_window) from base, so a hot
 * partial object becomes whole.
 * Nothing to decide (NONE) if the copy is whole for the piece, is going
 * (evicting, a drop pending on a failed cache path), its store version is
 * unknown, or the mode admits no read miss (readproxy, proxy, none); with
 * a fill hint queued, also if a fill in flight or that hint brings every
 * extent of the piece the copy lacks already (fill_admitted), or the read
 * continues a stream (the stream's next read after the hint gets its own,
 * whole with room: adding streams to the hint made a scan's hint the
 * object's readahead, which on the real daemon cost a zipf load beside the
 * scan 15% of its IOPS and doubled base bytes).  GO with a hint queued adds the read's
 * window to the hint's extents (hint.c fill_hint_add): one fill, one
 * wait.  A fill running (of other extents: a read fill, or a window) does
 * not stop it: its hint waits for that fill to land.  Saying NONE there
 * left the read's extents out of the cache for good, so the next read of
 * them missed again, which an LRU of blocks (or this engine at queue depth
 * 1) would have hit: pareto@25% missed 14.47% at queue depth 16 against
 * 13.99% at depth 1 and 13.96% for the block LRU (R-FILL-3); so did NONE
 * beside a queued hint (shift@25%, R-FILL-2).
 * Otherwise skipped, and counted, when the pool is degraded, the cache
 * full (admitted bytes included) or the read not admitted (cold).  The
 * token buckets come after (promote.c), for the base reads of the fill's
 * window; the read's own whole extents need none (hint.c: a read fill
 * of what it brings, when the window holds no more or the throttle says
 * no).
 */
enum tier__fill tier__decide_fill(const struct tier_params *p, const struct tier__dstate *s)
{
	enum tier_cache_mode m = p->cache_mode;

	if (s->state == TIER__ABSENT || !s->extents || s->all_valid || s->nocache ||
	    (s->flags & (TIER__OF_EVICTING | TIER__OF_EVICT_AFTER_FLUSH | TIER__OF_VUNK)))
		return TIER__FILL_NONE;
	if ((s->flags & TIER__OF_FQUEUED) && (s->fill_admitted || s->seq))
		return TIER__FILL_NONE;
	if (m != TIER_MODE_WRITEBACK && m != TIER_MODE_READONLY)
		return TIER__FILL_NONE;
	if (s->degraded)
		return TIER__FILL_SKIP_DEGRADED;
	if (s->full >= 1.0)
		return TIER__FILL_SKIP_FULL;
	return tier__decide_admit(p, s, false) ? TIER__FILL_GO : TIER__FILL_SKIP_COLD;
}

/*
 * R-FILL-6.
 * The cache-write budget of fills (Baleen's and CacheLib's idea: spend a
 * bounded rate of SSD writes where they save the most HDD time).  A fill
 * that reads base beyond the client's read only starts for a read miss
 * the recency rule admits (the object was touched before: reuse) and, at
 * the default fill_window, only while the copy's missing extents fit below
 * cache_target_full_ratio (then it takes the whole object: spatial
 * locality, room that evicts nothing); one-touch scattered extents never
 * get one.  What it writes into the cache is paid from a budget that grows
 * by fill_budget_pct percent of every byte clients read or write, banked
 * up to four objects: fills add at most that share to the cache's write
 * traffic and to base's reads, however fast or slow the clients are
 * (Ceph's fixed 5 MiB/s promotion throttle let one whole-object fill
 * through every 0.8 s whatever the load; it still guards promotions, and
 * fills when fill_budget_pct is 0).  Read fills (the read's own extents)
 * cost no base read and are not charged.
 */
double tier__decide_fill_budget_rate(const struct tier_params *p)
{
	return p->promote_granularity == TIER_GRAN_EXTENT ? (double)p->fill_budget_pct / 100.0 : 0;
}

double tier__decide_fill_budget_cap(const struct tier_params *p)
{
	return 4.0 * (double)p->object_size;
}

/*
 * R-FILL-5.
 * Where the budget goes: the whole object only with room for all of it
 * (it evicts nothing) and signs of spatial locality, the read continuing a
 * sequential stream (a scan, a file read through) or at least
 * fill_locality_pct percent of the object valid already (read broadly);
 * otherwise fill_window around the read (the default: the read's own
 * extents).  A copy of a few scattered hot extents stays that: filling
 * the rest of its object with room to spare looked free, but it filled
 * the cache with cold extents that whole-object eviction then kept beside
 * the hot ones (pareto@25%: 41.6% misses against 14.0% with the budget
 * alone; even Ceph's 5 MiB/s trickle of such fills cost the small caches,
 * pareto@10% 39.5% against 34.8%).
 * fill_locality_pct 0: room alone (the rule before the budget).
 */
bool tier__decide_fill_whole(const struct tier_params *p, bool fits, bool seq, uint64_t valid,
			     uint64_t nbits)
{
	if (!fits)
		return false;
	return seq || valid * 100 >= p->fill_locality_pct * nbits;
}

/*
 * R-READ-6.
 * A delayed hit: a read of extents that a fill in flight on the object
 * already brings (a read fill of another client's read, making the copy or
 * adding to it, or a fill job's window) waits for it to land and is then
 * served from the copy, a hit, where reading base again would miss on a
 * block on its way into the cache (an LRU of blocks, or this engine at
 * queue depth 1, hits it).  Only behind a small fill (at most
 * DELAYED_HIT_MAX bytes: about one seek of base, so the read waits about
 * what its own base read would take): reads that waited behind
 * whole-object fills cut hotscan@10%'s IOPS to 0.18x, and reads of other
 * extents that waited behind every small fill of their copy chained a
 * scan's reads one behind the other (hotscan@5% mean latency 1.5 -> 8.1
 * ms).  Never for a piece whose cache path failed
 * (nocache): base only; nor while the cache pool is down or degraded: the
 * fill's cache write may be waiting out op_timeout, and a read with no
 * dirty byte goes to base at once (docs/DURABILITY.md, "Pool outages").
 */
#define DELAYED_HIT_MAX (64u * 1024)

bool tier__decide_delayed_hit(const struct tier__dstate *s)
{
	return s->type == TIER_REQ_READ && !s->nocache && !s->cache_down && !s->degraded &&
	       s->fill_brings && s->fill_brings <= DELAYED_HIT_MAX;
}

/*
 * R-READ-8.  Object granularity: a read of an object whose first copy a
 * promotion is making right now (running, not queued) waits for it and is
 * served from the copy, a hit: the promotion's base read was issued before
 * this read's would be, so the copy lands no later than a base read of the
 * piece, and the base is spared it (an object LRU counts it a hit; read
 * from base, the reads after a miss of one sequential stream were 3x the
 * LRU's misses at QD 1).
 */
static bool read_waits_for_promotion(const struct tier_params *p, const struct tier__dstate *s)
{
	return s->type == TIER_REQ_READ && s->state == TIER__ABSENT &&
	       (s->flags & TIER__OF_PROMOTING) && !(s->flags & TIER__OF_STALE) &&
	       !(p->promote_granularity == TIER_GRAN_EXTENT && s->bitmaps) &&
	       !s->nocache && !s->cache_down && !s->degraded;
}

/*
 * R-READ-1..8.
 * Reads never wait (but behind an exclusive op, a small fill that brings
 * them, tier__decide_delayed_hit, or, at object granularity, a running
 * promotion of their object: read_waits_for_promotion).  A cached copy that is not
 * being evicted serves what it holds: all of the piece (HIT), some of it
 * and base the rest (HIT_PARTIAL), or none, base reads only (EXTENT_MISS);
 * the last two may fill the copy (tier__decide_fill).
 * Otherwise base serves it (PROXY), and an admitted miss of an ABSENT
 * object with no promotion queued or running either queues one behind it
 * (object granularity) or, at extent granularity, says fill GO: the
 * extents the read brings from base become a new CLEAN copy of them (a
 * read fill, fill.c; not of a STALE object, whose leftover must go first).
 */
static struct tier__decision decide_read(const struct tier_params *p,
					 const struct tier__dstate *s)
{
	bool cached = s->state != TIER__ABSENT && !(s->flags & TIER__OF_EVICTING) && !s->nocache;
	struct tier__decision d;

	if (tier__decide_delayed_hit(s))
		return go(TIER__R_WAIT, "a small fill in flight brings the piece");
	if (read_waits_for_promotion(p, s))
		return go(TIER__R_WAIT, "the promotion in flight brings the object");
	if (cached) {
		if (!s->extents || s->all_valid)
			d = go(TIER__R_HIT, "the copy holds the piece");
		else if (s->any_valid)
			d = go(TIER__R_HIT_PARTIAL, "the copy holds part of the piece");
		else
			d = go(TIER__R_EXTENT_MISS, "the copy holds none of the piece");
		d.fill = tier__decide_fill(p, s);
	} else if (s->state == TIER__ABSENT &&
		   !(s->flags & (TIER__OF_PQUEUED | TIER__OF_PROMOTING)) &&
		   tier__decide_admit(p, s, false)) {
		if (p->promote_granularity == TIER_GRAN_EXTENT && s->bitmaps) {
			/* extent granularity: the extents it reads, not the object */
			d = go(TIER__R_PROXY, "miss admitted: a read fill of its extents");
			d.fill = s->flags & (TIER__OF_STALE | TIER__OF_FQUEUED | TIER__OF_FILLING) ?
					 TIER__FILL_NONE : TIER__FILL_GO;
		} else {
			d = go(TIER__R_PROXY_THEN_PROMOTE, "miss admitted");
			d.admitted = true;
		}
	} else if (s->state == TIER__ABSENT && (s->flags & TIER__OF_PROMOTING) &&
		   !(s->flags & (TIER__OF_FQUEUED | TIER__OF_STALE)) &&
		   p->promote_granularity == TIER_GRAN_EXTENT && s->bitmaps &&
		   room_for_miss(p, s) && tier__decide_admit(p, s, false)) {
		/*
		 * A read fill (or a promotion) is making the first copy and
		 * the cache has room (it evicts nothing): this read goes to
		 * base now, and a fill of its extents waits for the copy, so
		 * that the next read of them hits (an LRU of blocks, with no
		 * time, has them: readmostly@25% missed 3 more than it).  The
		 * read itself does not wait: reads that did cost more than
		 * they saved; under pressure the extra fills made full caches
		 * swing by thousands of misses either way (hotscan@5%: the
		 * scan's own blocks).  R-READ-7.
		 */
		d = go(TIER__R_PROXY, "miss admitted: filled once the copy being made lands");
		d.fill = TIER__FILL_BEHIND_COPY;
	} else {
		d = go(TIER__R_PROXY, s->state == TIER__ABSENT ? "miss not admitted" :
		       s->nocache ? "cache path failed" : "the copy is being evicted");
	}
	d.record = true;
	return d;
}

/*
 * R-WRITE-2.
 * A write whose cache path failed, of a STALE object, or of a CLEAN copy in
 * readonly mode: base takes it, after the copy is made harmless.  With no
 * copy, straight to base; a DIRTY copy is flushed first (twice at most,
 * then EIO: no safe order is left); a CLEAN one (or a STALE leftover) is
 * removed durably before base changes.
 */
static struct tier__decision decide_nocache_write(const struct tier__dstate *s)
{
	struct tier__decision d;

	if (s->state == TIER__ABSENT && !(s->flags & TIER__OF_STALE))
		d = go(TIER__R_PROXY, "no copy: base only");
	else if (s->nrun || (s->flags & TIER__OF_FLUSHING))
		d = go(TIER__R_WAIT, "base only: waits for ops on the copy");
	else if (s->state == TIER__DIRTY)
		d = s->tries >= 2 ? go(TIER__R_FAIL, "base only: two flushes failed") :
				    go(TIER__R_FLUSH_FIRST, "base only: the copy is dirty");
	else
		d = go(TIER__R_DROP_THEN_PROXY, "base only: drop the copy first");
	d.nocache = true;
	d.record = true;
	return d;
}

/*
 * R-DROP-1.
 * A whole-object TRIM or WRITE_ZEROES of a cached copy, in an order no power
 * cut can turn into a block changing without a write (docs/DURABILITY.md):
 * CLEAN drops the copy, then base; DIRTY drops base, then the copy; DIRTY
 * with clean extents is flushed first (EIO after two failures).
 */
static struct tier__decision decide_whole_drop(const struct tier__dstate *s)
{
	if (s->flags & TIER__OF_FLUSHING)
		return go(TIER__R_WAIT, "whole-object drop: waits for the flush");
	if (s->state == TIER__CLEAN)
		return go(TIER__R_DROP_THEN_PROXY, "whole-object drop of a clean copy");
	if (s->clean_extents)
		return s->tries >= 2 ? go(TIER__R_FAIL, "whole-object drop: two flushes failed") :
				       go(TIER__R_FLUSH_FIRST, "whole-object drop: clean extents");
	return go(TIER__R_DROP_BASE_THEN_CACHE, "whole-object drop of a dirty copy");
}

/*
 * R-WRITE-1, R-WRITE-3..5, R-WMISS-1..4.
 * Writes, trims and zeroes.  They wait behind a promotion or an eviction.
 * A write counts as a hit when the copy holds what it overwrites: a cached
 * object, and in extent mode every extent of the piece, or every one it
 * lacks on its way in (a fill in flight or a fill hint queued, admitted
 * for an earlier read: an LRU of blocks, with no time, holds them since
 * that read; the write goes into the copy ahead of the fill either way).
 * A write of other new extents into a cached copy is a miss that reads
 * nothing from base, as a write miss admitted in extent mode.
 * Over target in extent mode, a write touching only extents the copy lacks
 * goes to base (base is authoritative for those).  A cached copy takes the
 * write once shared ops are done (an overwrite of extents it holds need not
 * wait for proxied new-extent writes).  A miss that is admitted: extent
 * granularity writes just the client's extents into a new copy; object
 * granularity with write_miss = proxy proxies now and promotes after,
 * with write_miss = promote copies the object first and then hits.
 * A miss while ops on base run for the object goes to base beside them,
 * unless a read is among them and extent granularity would admit it (and
 * the cache pool answers): then it waits for them and goes into a new
 * copy.  A read fill starts only on a quiet object, so a block read and
 * written at once under a busy base never got a copy while its writes went
 * to base beside its reads: each kept the next one company there.  On shift over a 16G image the engine
 * settled, phase by phase, in states up to 30% apart in misses
 * (R-WMISS-3).  Beside other writes only (nproxy:
 * no read runs) it still goes to base: waiting there delays the write and
 * admits it where the cache is at its edge, for nothing a fill needs (vms
 * at 5%: +0.1-0.5% misses, p99 +6%).
 */
static struct tier__decision decide_write_route(const struct tier_params *p,
						const struct tier__dstate *s)
{
	struct tier__decision d;

	if (s->flags & (TIER__OF_PROMOTING | TIER__OF_EVICTING | TIER__OF_EVICT_AFTER_FLUSH))
		return go(TIER__R_WAIT, "waits for a promotion or an eviction");
	if (s->nocache || (s->flags & TIER__OF_STALE) ||
	    (s->state == TIER__CLEAN && p->cache_mode == TIER_MODE_READONLY))
		return decide_nocache_write(s);
	if (s->state != TIER__ABSENT && s->extents && !s->whole && s->full >= 1.0 &&
	    !s->any_valid) {
		d = go(TIER__R_PROXY_NEW_EXTENTS, "over target: only extents the copy lacks");
		d.count = TIER__C_MISS;
	} else if (s->state != TIER__ABSENT) {
		if (s->nrun && !(s->nrun == s->nproxy && !s->whole && s->all_valid)) {
			d = go(TIER__R_WAIT, "cache write waits for shared ops");
		} else {
			d = s->type != TIER_REQ_WRITE && s->whole ? decide_whole_drop(s) :
				go(TIER__R_CACHE_WRITE, "the object is cached");
			/* extent mode: new extents of a cached copy are a miss (nothing was cached) */
			d.count = s->type != TIER_REQ_WRITE || !s->extents || s->all_valid ||
					  s->fill_admitted ?
				  TIER__C_HIT : TIER__C_MISS;
		}
	} else {
		bool extent = p->promote_granularity == TIER_GRAN_EXTENT && s->bitmaps;

		d = go(TIER__R_PROXY, "miss not admitted");
		d.count = TIER__C_MISS;
		if (s->type != TIER_REQ_WRITE)
			d.why = "trim or zero miss";
		else if (s->nrun > s->nproxy && extent && !s->cache_down &&
			 tier__decide_admit(p, s, true))
			return go(TIER__R_WAIT, "admitted write miss waits for reads on base");
		else if (s->nrun)
			d.why = "miss: ops on base run";
		else if (!extent && p->write_miss == TIER_WMISS_PROXY &&
			 (s->flags & TIER__OF_PQUEUED))
			d.why = "miss: a promotion is queued";
		else if (tier__decide_admit(p, s, true)) {
			d.admitted = true;
			if (extent) {
				d.route = TIER__R_CACHE_WRITE;
				d.why = "miss admitted: new extents";
			} else if (p->write_miss == TIER_WMISS_PROXY) {
				d.route = TIER__R_PROXY_THEN_PROMOTE;
				d.why = "miss admitted: proxy now, promote after";
			} else {
				d.route = TIER__R_PROMOTE_WAIT;
				d.why = "miss admitted: promote first";
			}
		}
	}
	d.record = true;
	return d;
}

/*
 * R-FILLRUN-1.
 * While a fill runs, base and the copy's existence must hold still for it
 * (it copies base into extents the copy lacks): a write that would go to
 * base or drop the copy waits for it.  Cache writes go ahead; the fill
 * leaves the extents they make valid alone.
 */
static struct tier__decision decide_write(const struct tier_params *p,
					  const struct tier__dstate *s)
{
	struct tier__decision d = decide_write_route(p, s);

	if ((s->flags & TIER__OF_FILLING) && d.route != TIER__R_CACHE_WRITE &&
	    d.route != TIER__R_WAIT)
		return go(TIER__R_WAIT, "waits for a fill: base and the copy hold still");
	return d;
}

/*
 * R-FILL-4.
 * Fill hints (queued behind a read by hint.c): done if there is nothing
 * left to fill (the copy is whole, gone or going, its version unknown), if
 * the mode admits no read miss (changed since the hint was queued), the
 * pool is degraded or the cache full (less the hint's own reservation);
 * otherwise they wait for shared ops (a read still reading base for those
 * extents) and for a fill already running (one fill job per object), then
 * fill.
 */
static struct tier__decision decide_fill_hint(const struct tier_params *p,
					      const struct tier__dstate *s)
{
	if (s->state == TIER__ABSENT && (s->flags & TIER__OF_PROMOTING))
		return go(TIER__R_WAIT, "fill waits for the copy being made");
	if (s->state == TIER__ABSENT || !s->extents || s->obj_all_valid ||
	    (s->flags & (TIER__OF_EVICTING | TIER__OF_EVICT_AFTER_FLUSH | TIER__OF_VUNK)))
		return go(TIER__R_DONE, "fill: nothing to fill, or the copy is going");
	if ((p->cache_mode != TIER_MODE_WRITEBACK && p->cache_mode != TIER_MODE_READONLY) ||
	    s->degraded || s->full_less_own >= 1.0)
		return go(TIER__R_DONE, "fill: the mode admits no read, degraded or full");
	if (s->nrun || (s->flags & TIER__OF_FILLING))
		return go(TIER__R_WAIT, "fill waits for shared ops or the running fill");
	return go(TIER__R_FILL, "fill the extents the copy lacks");
}

/*
 * R-HINT-1.
 * CACHE hints (NBD_CMD_CACHE, admin promote, queued promotions): done if
 * the object is cached, being promoted or STALE, if the mode is none, the
 * pool degraded or the cache full (less the hint's own reservation);
 * otherwise they wait for shared ops and evictions, then promote.
 */
static struct tier__decision decide_hint(const struct tier_params *p,
					 const struct tier__dstate *s)
{
	if (s->state != TIER__ABSENT || (s->flags & (TIER__OF_PROMOTING | TIER__OF_STALE)))
		return go(TIER__R_DONE, "cached or being promoted");
	if (p->cache_mode == TIER_MODE_NONE || s->degraded || s->full_less_own >= 1.0)
		return go(TIER__R_DONE, "mode none, degraded or full");
	if (s->nrun || (s->flags & TIER__OF_EVICTING))
		return go(TIER__R_WAIT, "promotion waits for shared ops");
	return go(TIER__R_PROMOTE, "hint");
}

/*
 * R-FIRST-1, R-FIRST-2, R-DOWN-1.
 * First, for every type: nothing starts beside an exclusive op, nor before
 * a fill whose base data is in lands (FILL_READY: it waits for the running
 * ops only, so a busy object cannot starve it).  While the
 * cache pool is down (ops timed out lately), a piece that would need the
 * copy (the object is cached or STALE, no job runs on it) does not queue
 * behind op_timeout: a read with no dirty byte goes to base, which holds
 * the same; a hint is done; anything else fails with EIO at once.
 */
struct tier__decision tier__decide(const struct tier_params *p, const struct tier__dstate *s)
{
	struct tier__decision d;

	if (s->flags & TIER__OF_EXCL)
		return go(TIER__R_WAIT, "an exclusive op runs");
	if (s->flags & TIER__OF_FILL_READY)
		return go(TIER__R_WAIT, "a fill is about to land");
	if ((s->state != TIER__ABSENT || (s->flags & TIER__OF_STALE)) && s->cache_down &&
	    !(s->flags & (TIER__OF_PROMOTING | TIER__OF_FLUSHING | TIER__OF_EVICTING))) {
		if (s->type == TIER_REQ_READ && !s->any_dirty) {
			struct tier__dstate b = *s;

			b.nocache = true;
			d = decide_read(p, &b);
			d.nocache = true;
			d.why = "cache pool down: base holds the piece";
			return d;
		}
		return s->type == TIER_REQ_CACHE || s->type == TIER__REQ_FILL ?
			       go(TIER__R_DONE, "cache pool down") :
			       go(TIER__R_FAIL, "cache pool down");
	}
	switch (s->type) {
	case TIER_REQ_READ:
		return decide_read(p, s);
	case TIER_REQ_CACHE:
		return decide_hint(p, s);
	case TIER__REQ_FILL:
		return decide_fill_hint(p, s);
	default:
		return decide_write(p, s);
	}
}

/* ---- the agent ---- */

static const char *const skip_names[TIER__SKIP_COUNT] = {
	[TIER__SKIP_NONE] = "taken",
	[TIER__SKIP_STATE] = "state",
	[TIER__SKIP_IMAGE] = "image",
	[TIER__SKIP_BUSY] = "busy",
	[TIER__SKIP_HOT] = "hot",
	[TIER__SKIP_YOUNG] = "young",
};

const char *tier__skip_name(enum tier__skip s)
{
	return (unsigned)s < TIER__SKIP_COUNT ? skip_names[s] : "?";
}

/*
 * A-FLUSH-1.
 * Flush a DIRTY object of an open image with no other job on it, not
 * cooling off after a flush it overlapped, older than cache_min_flush_age
 * (unless full or draining).  A cache write in flight is fine: the flush
 * snapshots once it lands.
 */
enum tier__skip tier__decide_flush(const struct tier_params *p, const struct tier__agent_view *v)
{
	if (v->state != TIER__DIRTY)
		return TIER__SKIP_STATE;
	if (!v->image_ok)
		return TIER__SKIP_IMAGE;
	if (v->flags & (TIER__OF_FLUSHING | TIER__OF_PROMOTING | TIER__OF_EVICTING))
		return TIER__SKIP_BUSY;
	if (v->flags & TIER__OF_HOT)
		return TIER__SKIP_HOT;
	if (!v->ignore_age && v->age_ms < p->cache_min_flush_age)
		return TIER__SKIP_YOUNG;
	return TIER__SKIP_NONE;
}

/*
 * A-EVICT-1.
 * Evict a CLEAN object of an open image with nothing queued or running on
 * it and a known store version (the REMOVE is guarded by it), older than
 * cache_min_evict_age (unless full or draining).  With agent_evict_dirty
 * (the default; Ceph's agent evicts only clean objects) a DIRTY one is as
 * good a victim, coldest first: it is flushed, writes to it waiting, and
 * then evicted, so a partly dirty object that keeps being written a little
 * cannot pin its space.  Not one written during its last flush (hot), and
 * not while the cache only drains dirty bytes (cache_mode none flushes).
 */
enum tier__skip tier__decide_evict(const struct tier_params *p, const struct tier__agent_view *v)
{
	bool dirty = v->state == TIER__DIRTY && p->agent_evict_dirty &&
		     p->cache_mode != TIER_MODE_NONE;

	if (v->state != TIER__CLEAN && !dirty)
		return TIER__SKIP_STATE;
	if (!v->image_ok)
		return TIER__SKIP_IMAGE;
	if (v->busy || (v->flags & TIER__OF_VUNK))
		return TIER__SKIP_BUSY;
	if (dirty && (v->flags & TIER__OF_HOT))
		return TIER__SKIP_HOT;
	if (!v->ignore_age && v->age_ms < p->cache_min_evict_age)
		return TIER__SKIP_YOUNG;
	return TIER__SKIP_NONE;
}

/*
 * A-EVICT-2.
 * Extent-aware eviction: a victim of the eviction order goes whole unless
 * something in it was referenced since the agent last looked (then its hot
 * extents would go with its cold ones).  Then the copy loses only its clean
 * unreferenced extents (a partial eviction: base holds them; dirty extents
 * stay); a copy with nothing to drop (every valid extent referenced, or the
 * rest dirty) gets a second chance.  Either way its reference bits are
 * cleared and the order sees it as used (CLOCK within the object): it goes
 * whole the next time unless touched again.  But with the clock
 * (evict_extents = 2, whose flush hand cleans cold dirty extents) and while
 * the agent flushes, a copy with no clean extent at all and some dirty
 * extents not referenced is passed over as it is (PASS): the flushes clean
 * those and the hand drops them then; clearing its bits only made the next
 * look take it whole (a flush and a REMOVE of its hot extents with its cold
 * ones) unless it was hit between two looks, and with most of the cache
 * dirty the hand finds little to drop and comes round every few thousand
 * requests: vms@5% (100% writes, flushes bound by base) evicted 254 objects
 * whole and missed 29967 against 29869 for the block LRU, 29691 with the
 * pass.  A copy whose dirty
 * extents are all referenced gets the second chance: passing it would keep
 * its bits, and so its extents hot and dirty, for as long as the agent
 * flushes (found in review).  With the flush idle (dirty ratios at or over
 * the full ratio) nothing else would clean it: the second chance, and then
 * the whole object, stay.  Admin evicts, object mode and evict_extents = 0
 * take the whole object; so does the agent when the object count binds (the
 * object ratio is at least the byte ratio: dropping extents frees no
 * object, the cache would stay over target).  In full mode (now: from 100%,
 * until 2% under) the order's victim gets no second chance: writes are
 * proxied while the cache is at 100%, so room is made at once from the
 * order's cold end, as whole-object eviction would.
 */
enum tier__evict_how tier__decide_evict_how(const struct tier_params *p,
					    const struct tier__evict_view *v)
{
	if (!p->evict_extents || !v->extents || v->drain || v->objects_bind || !v->n_ref)
		return TIER__EVH_WHOLE;
	if (v->n_drop)
		return TIER__EVH_PARTIAL;
	if (v->now)
		return TIER__EVH_WHOLE;
	return p->evict_extents == 2 && !v->n_clean && v->n_dirty_cold && v->flushing ?
		       TIER__EVH_PASS : TIER__EVH_AGAIN;
}

/*
 * A-FLUSH-2.
 * What a flush takes, with the clock on (extent mode, evict_extents = 2):
 * a WSClock's flushes.  The order offers objects coldest first, but with
 * hot extents spread over every object (a VM image's blocks; the
 * generator's hashed zipf) no object is cold as a whole: flushing the
 * order's victim whole wrote its hot extents to base with its cold ones
 * (written again at once: base time spent for nothing) and, on a cache
 * most of which is dirty (flushes bound by base), only the cold extents
 * of the objects the order offered ever became clean, so the hand dropped
 * what those objects held whatever its age and kept the rest's cold
 * extents dirty for good (vms@10%: 97 of 256 objects never flushed; 402
 * misses an LRU of blocks hits).  So an offered object with dirty extents
 * referenced since the clock last looked is left to the flush hand
 * (HAND), which walks the object map as the evict hand does and flushes
 * what each object holds dirty and unreferenced (COLD), and passes over
 * an object with none (PASS); only if a whole round found nothing cold
 * anywhere does it go round again flushing whole objects (every dirty
 * extent hot: flushing is still what the dirty targets ask for).  The
 * flush hand never clears a bit: the evict hand's looks age them, as
 * before.  (Clearing the dirty extents' bits where nothing was cold, so
 * that what was not written again went at the next visit, turned the
 * flush hand into a second, faster clock where base had time to spare:
 * vms@10% at queue depth 1 missed 16624 against 16524 before and 16544
 * without it; the same at every visit, 16710.)  What the flushes clean is
 * unreferenced: the evict hand drops it at its next visit unless it is
 * read or written again.  An offered object with nothing referenced (the
 * order's truly cold ones: a log written once) is flushed whole, coldest
 * first, as before; so are all when the clock is off or the agent drains.
 * vms@5% 29967 -> 26211 misses (block LRU 29869), vms@10% 16681 -> 16551
 * (16510), the suite's gmean miss/OPT 1.0080 -> 1.0000 and base busy time
 * down 1.7% (seed 1; seeds 2-4 alike).
 */
enum tier__flush_how tier__decide_flush_how(const struct tier_params *p,
					    const struct tier__flush_view *v)
{
	if (p->evict_extents != 2 || p->promote_granularity != TIER_GRAN_EXTENT || !v->extents ||
	    v->drain)
		return TIER__FLH_WHOLE;
	if (!v->hand)
		return v->n_dirty_ref ? TIER__FLH_HAND : TIER__FLH_WHOLE;
	if (v->n_dirty_cold)
		return TIER__FLH_COLD;
	return v->round2 ? TIER__FLH_WHOLE : TIER__FLH_PASS;
}

/* A-MODE-1..3: the flush and evict modes from the dirty and full ratios, with hysteresis. */
struct tier__modes tier__decide_modes(const struct tier_params *p, struct tier__modes cur,
				      double dr, double fr, bool any_dirty, bool any_cached)
{
	double hi = p->cache_target_dirty_high_ratio, lo = p->cache_target_dirty_ratio;
	double ft = p->cache_target_full_ratio;
	struct tier__modes m = { 0 };

	if (dr > hi || (cur.flush == TIER_FLUSH_HIGH && dr > hi - AGENT_SLOP && dr > 0))
		m.flush = TIER_FLUSH_HIGH;
	else if (dr > lo || (cur.flush != TIER_FLUSH_IDLE && dr > lo - AGENT_SLOP && dr > 0))
		m.flush = TIER_FLUSH_LOW;
	else
		m.flush = TIER_FLUSH_IDLE;

	/*
	 * Full from 100% on, as admission closes (tier__decide_admit: full >=
	 * 1.0, R-ADMIT-2): a cache held at exactly 100% by closed admission
	 * stayed in "some", its flushes in low mode (A-MODE-2).
	 */
	if (fr >= 1.0 || (cur.evict == TIER_EVICT_FULL && fr > 1.0 - AGENT_SLOP))
		m.evict = TIER_EVICT_FULL;
	else if (fr > ft || (cur.evict != TIER_EVICT_IDLE && fr > ft - EVICT_SLOP && fr > 0))
		m.evict = TIER_EVICT_SOME;
	else
		m.evict = TIER_EVICT_IDLE;

	if (p->cache_mode == TIER_MODE_NONE) {
		/* pass-through: drain whatever the cache still holds */
		m.flush = any_dirty ? TIER_FLUSH_HIGH : TIER_FLUSH_IDLE;
		m.evict = any_cached ? TIER_EVICT_FULL : TIER_EVICT_IDLE;
	}
	if (m.evict == TIER_EVICT_FULL) {
		m.effort_pct = 100;
	} else if (m.evict == TIER_EVICT_SOME) {
		double eff = ft < 1.0 ? (fr - ft) / (1.0 - ft) : 1.0;
		if (eff < 0.1)
			eff = 0.1;
		if (eff > 1.0)
			eff = 1.0;
		m.effort_pct = (unsigned)lround(eff * 100.0);
	}
	return m;
}

/* A-TURN-1: a phase change is the recent hit ratio 10 points under the long one. */
#define PHASE_DROP 0.10

bool tier__decide_phase_change(double hit_fast, double hit_slow)
{
	return hit_slow - hit_fast > PHASE_DROP;
}

/*
 * A-TURN-1.
 * A full cache turning over after a phase change: the agent keeps a
 * quarter of the client requests in flight, as agent_max_ops (4) is of a
 * queue depth of 16, at most 4x agent_max_ops and agent_max_ops + 64 (a
 * flush job holds a buffer; not for an admin drain or cache_mode none,
 * which keep agent_max_ops).  Deeper clients otherwise
 * keep the agent's few jobs at the back of the base's queue and the cache
 * full of the last phase's data, admitting nothing; a stationary load keeps the
 * full cache it has, which is what suits it.
 */
static uint64_t turnover_ops(const struct tier_params *p, const struct tier__budget_in *b)
{
	uint64_t n = b->reqs_inflight / 4, cap = 4 * p->agent_max_ops;

	if (b->m.evict != TIER_EVICT_FULL || !b->turnover || b->drain_flush || b->drain_evict ||
	    p->cache_mode == TIER_MODE_NONE)
		return 0;
	if (cap > p->agent_max_ops + 64)
		cap = p->agent_max_ops + 64;
	return n < cap ? n : cap;
}

/*
 * A-BUDGET-1.
 * Flushes in flight: agent_max_low_ops in low mode, agent_max_ops in high
 * mode, a drain or a full cache of dirty objects (flushing is what makes
 * room), more while a full cache turns over (turnover_ops); halved (high)
 * or one (low) while base latency is over twice its floor, so client I/O
 * on base is not starved.
 */
uint64_t tier__decide_flush_budget(const struct tier_params *p, const struct tier__budget_in *b)
{
	uint64_t n, t = turnover_ops(p, b);

	if (b->drain_flush || b->drain_evict)
		return p->agent_max_ops;
	switch (b->m.flush) {
	case TIER_FLUSH_LOW: n = p->agent_max_low_ops; break;
	case TIER_FLUSH_HIGH: n = p->agent_max_ops; break;
	default: n = 0;
	}
	if (b->m.evict == TIER_EVICT_FULL && n < p->agent_max_ops && b->any_dirty)
		n = p->agent_max_ops;
	if (b->any_dirty && t > n)
		n = t;
	if (n > 1 && b->m.evict != TIER_EVICT_FULL && b->base_lat_floor > 0 &&
	    b->base_lat_ewma > 2.0 * b->base_lat_floor)
		n = b->m.flush == TIER_FLUSH_HIGH ? n / 2 : 1;
	return n;
}

/*
 * A-BUDGET-2.
 * Evictions in flight: all of agent_max_ops when full or draining (more
 * while a full cache turns over), its effort share when some.
 */
uint64_t tier__decide_evict_budget(const struct tier_params *p, const struct tier__budget_in *b)
{
	uint64_t t = turnover_ops(p, b);

	if (b->drain_evict || b->m.evict == TIER_EVICT_FULL)
		return t > p->agent_max_ops ? t : p->agent_max_ops;
	if (b->m.evict == TIER_EVICT_SOME) {
		uint64_t n = (uint64_t)ceil((double)p->agent_max_ops * b->m.effort_pct / 100.0);
		return n ? n : 1;
	}
	return 0;
}

/* ---- durability ordering ---- */

/*
 * D-CW-1, D-CW-2.
 * A cache write always carries its meta.  A new copy is created with
 * F_EXCL (never over an object the engine does not know).  Making extents
 * valid (a new copy, new extents, fills) needs F_ORDERED: their data must
 * be durable before a meta that calls them valid.  (Overwriting extents
 * the store holds as clean also needs the dirty mark durable first: the
 * caller passes it as pre_meta, which the store always makes durable.)
 */
uint32_t tier__decide_cw_flags(bool creating, bool new_valid, bool clean_over, bool rec_dirty,
			       bool fua)
{
	/*
	 * An overwrite of extents the record already calls valid and dirty
	 * changes nothing a cut or a kill could get wrong: the record may be
	 * stored later (F_LAZY_META), docs/DURABILITY.md "Records left in
	 * memory".  Anything that makes extents valid or dirty, or asks for
	 * durability, stores it with the write.
	 */
	bool lazy = !creating && !new_valid && !clean_over && rec_dirty && !fua;

	return TIER_STORE_F_META | (fua ? TIER_STORE_F_FUA : 0) |
	       (creating ? TIER_STORE_F_EXCL : 0) | (new_valid ? TIER_STORE_F_ORDERED : 0) |
	       (lazy ? TIER_STORE_F_LAZY_META : 0);
}

/*
 * D-READ-1.
 * A promotion's copy will say "clean: base holds this", so what it reads
 * must be durable in base: removes of base objects not yet covered by a
 * barrier get one first (a cut could bring a removed object back under a
 * clean copy of zeros), and base writes not yet synced (or a sync still
 * running) make the read a FUA read, which syncs the object.
 */
enum tier__promote_read tier__decide_promote_read(bool base_removes_unsynced,
						  bool base_unsynced, bool sync_running)
{
	if (base_removes_unsynced)
		return TIER__PR_BARRIER_FIRST;
	return base_unsynced || sync_running ? TIER__PR_FUA : TIER__PR_PLAIN;
}
