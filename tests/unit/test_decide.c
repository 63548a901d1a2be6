/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_decide.c - the routing rules of libtier/decide.c as a
 * table, without stores: each row is a request type, the parameters that
 * route (cache_mode, promote_granularity, write_miss), the request's
 * recency, the cache's fullness and health, and the object's state, with
 * the route it must take.  A sweep over the whole cross product then checks
 * the rules no row may break (what none, proxy, degraded and full mean, no
 * cache write in readonly mode, ...).  The agent's choices, modes and
 * budgets and the durability choices are tested below the routes.  The
 * rows' comments name the rules of docs/RULES.md they check.
 */
#undef NDEBUG
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "libtier/decide.h"
#include "libtier/engine_int.h"
#include "libtier/hash.h"
#include "tier/params.h"
#include "tier/store.h"

enum { R = TIER_REQ_READ, W = TIER_REQ_WRITE, T = TIER_REQ_TRIM, Z = TIER_REQ_WRITE_ZEROES,
       C = TIER_REQ_CACHE, F = TIER__REQ_FILL };
enum { A = TIER__ABSENT, CL = TIER__CLEAN, D = TIER__DIRTY };
enum { WB = TIER_MODE_WRITEBACK, RP = TIER_MODE_READPROXY, PX = TIER_MODE_PROXY,
       RO = TIER_MODE_READONLY, NO = TIER_MODE_NONE };
enum { OBJ = TIER_GRAN_OBJECT, EXT = TIER_GRAN_EXTENT };
enum { WPX = TIER_WMISS_PROXY, WPR = TIER_WMISS_PROMOTE };

/* Piece / object details a row can set (bits). */
enum {
	X_WHOLE = 1 << 0,      /* the piece covers the object */
	X_BITS = 1 << 1,       /* the copy has bitmaps */
	X_ALL = 1 << 2,        /* every extent of the piece is valid */
	X_ANY = 1 << 3,        /* some extent of the piece is valid */
	X_DIRTYR = 1 << 4,     /* some byte of the piece is dirty */
	X_CLEANX = 1 << 5,     /* the copy has clean valid extents */
	X_NOCACHE = 1 << 6,    /* the cache path failed before */
	X_TRIED2 = 1 << 7,     /* two flushes started already */
	X_RUN = 1 << 8,        /* a shared op runs */
	X_RUNPROXY = 1 << 9,   /* ...and it is a proxied write of extents no copy holds */
	X_DOWN = 1 << 10,      /* the cache pool timed out lately */
	X_HINT = 1 << 11,      /* the eviction policy would admit it */
	X_TLFU = 1 << 12,      /* admission = tinylfu */
	X_NEAR = 1 << 13,      /* full 0.9: past cache_target_full_ratio (0.8), below 1 */
	X_FREQ = 1 << 14,      /* the sketch: the miss 3, the victim 2 (else the miss 1) */
	X_OBJALL = 1 << 15,    /* fill hints: every extent of the object is valid */
	X_OFFER = 1 << 16,     /* a client's piece at its first decision (admission may admit) */
	X_EDGE = 1 << 17,      /* full 0.79: below the full target, within the room margin */
	X_NOROOM = 1 << 18,    /* admit_when_room = 0 (the ceph presets) */
	X_FADM = 1 << 19,      /* fills in flight or queued bring what the piece lacks */
	X_SEQ = 1 << 20,       /* a read continuing a stream (with a fill hint queued) */
};

struct row {
	int line;
	int type, mode, gran, wmiss;
	bool recent, full, degraded;
	int state;
	unsigned flags;        /* TIER__OF_* */
	unsigned x;            /* X_* */
	enum tier__route want;
	enum tier__count count;
};

#define ROW(...) { __LINE__, __VA_ARGS__ }
#define NONE TIER__C_NONE
#define HIT TIER__C_HIT
#define MISS TIER__C_MISS

static const struct row rows[] = {
	/* ---- reads (R-READ-2..5; admission R-ADMIT-*) ---- */
	/* type mode gran wmiss recent full degr state flags x -> route */
	ROW(R, WB, OBJ, WPX, 0, 0, 0, CL, 0, 0, TIER__R_HIT, NONE),
	ROW(R, WB, OBJ, WPX, 0, 0, 0, D, 0, 0, TIER__R_HIT, NONE),
	ROW(R, WB, EXT, WPX, 0, 0, 0, D, 0, X_BITS | X_ALL | X_ANY, TIER__R_HIT, NONE),
	ROW(R, WB, EXT, WPX, 0, 0, 0, D, 0, X_BITS | X_ANY, TIER__R_HIT_PARTIAL, NONE),
	ROW(R, WB, EXT, WPX, 0, 0, 0, D, 0, X_BITS, TIER__R_EXTENT_MISS, NONE),
	ROW(R, WB, OBJ, WPX, 1, 0, 0, A, 0, 0, TIER__R_PROXY_THEN_PROMOTE, NONE),
	/* R-READ-5: extent granularity: an admitted miss proxies, its extents fill from it (fill GO) */
	ROW(R, WB, EXT, WPX, 1, 0, 0, A, 0, 0, TIER__R_PROXY, NONE),
	ROW(R, WB, EXT, WPX, 0, 0, 0, A, 0, X_HINT, TIER__R_PROXY, NONE),
	ROW(R, WB, OBJ, WPX, 0, 0, 0, A, 0, 0, TIER__R_PROXY, NONE),           /* not recent */
	ROW(R, WB, OBJ, WPX, 0, 0, 0, A, 0, X_HINT, TIER__R_PROXY_THEN_PROMOTE, NONE),
	/* R-ADMIT-5: tinylfu: past the full target a miss must beat the victim's frequency */
	ROW(R, WB, OBJ, WPX, 1, 0, 0, A, 0, X_TLFU | X_NEAR, TIER__R_PROXY, NONE),
	ROW(R, WB, OBJ, WPX, 1, 0, 0, A, 0, X_TLFU | X_NEAR | X_FREQ, TIER__R_PROXY_THEN_PROMOTE, NONE),
	ROW(R, WB, OBJ, WPX, 1, 0, 0, A, 0, X_TLFU, TIER__R_PROXY_THEN_PROMOTE, NONE), /* room */
	ROW(R, WB, OBJ, WPX, 0, 0, 0, A, 0, X_TLFU | X_NEAR | X_FREQ, TIER__R_PROXY, NONE), /* recency */
	ROW(R, WB, OBJ, WPX, 1, 0, 0, A, 0, X_NEAR, TIER__R_PROXY_THEN_PROMOTE, NONE), /* recency only */
	ROW(W, WB, EXT, WPX, 1, 0, 0, A, 0, X_TLFU | X_NEAR, TIER__R_PROXY, MISS),
	ROW(W, WB, EXT, WPX, 1, 0, 0, A, 0, X_TLFU | X_NEAR | X_FREQ, TIER__R_CACHE_WRITE, MISS),
	/* R-ADMIT-4: admit_when_room: with room below the full target a first decision is admitted */
	ROW(R, WB, OBJ, WPX, 0, 0, 0, A, 0, X_OFFER, TIER__R_PROXY_THEN_PROMOTE, NONE),
	ROW(R, WB, EXT, WPX, 0, 0, 0, A, 0, X_OFFER, TIER__R_PROXY, NONE),    /* fill GO: test_fill_choice */
	ROW(R, WB, OBJ, WPX, 0, 0, 0, A, 0, X_OFFER | X_EDGE, TIER__R_PROXY, NONE), /* the margin */
	ROW(R, WB, OBJ, WPX, 0, 0, 0, A, 0, X_OFFER | X_NEAR, TIER__R_PROXY, NONE), /* pressure */
	ROW(R, WB, OBJ, WPX, 0, 0, 0, A, 0, X_OFFER | X_NOROOM, TIER__R_PROXY, NONE), /* ceph */
	ROW(R, WB, OBJ, WPX, 0, 1, 0, A, 0, X_OFFER, TIER__R_PROXY, NONE),    /* full */
	ROW(R, WB, OBJ, WPX, 0, 0, 1, A, 0, X_OFFER, TIER__R_PROXY, NONE),    /* degraded */
	ROW(R, RP, OBJ, WPX, 0, 0, 0, A, 0, X_OFFER, TIER__R_PROXY, NONE),    /* the mode first */
	ROW(W, WB, EXT, WPX, 0, 0, 0, A, 0, X_OFFER, TIER__R_CACHE_WRITE, MISS),
	ROW(W, WB, EXT, WPX, 0, 0, 0, A, 0, X_OFFER | X_NEAR, TIER__R_PROXY, MISS),
	ROW(R, WB, OBJ, WPX, 1, 1, 0, A, 0, 0, TIER__R_PROXY, NONE),           /* full */
	ROW(R, WB, OBJ, WPX, 1, 0, 1, A, 0, 0, TIER__R_PROXY, NONE),           /* degraded */
	ROW(R, WB, OBJ, WPX, 1, 0, 0, A, TIER__OF_PQUEUED, 0, TIER__R_PROXY, NONE),
	/* R-READ-8: a running promotion brings the object: the read waits, then hits */
	ROW(R, WB, OBJ, WPX, 1, 0, 0, A, TIER__OF_PROMOTING, 0, TIER__R_WAIT, NONE),
	ROW(R, WB, OBJ, WPX, 1, 0, 1, A, TIER__OF_PROMOTING, 0, TIER__R_PROXY, NONE), /* degraded */
	ROW(R, WB, OBJ, WPX, 1, 0, 0, A, TIER__OF_PROMOTING, X_NOCACHE, TIER__R_PROXY, NONE),
	ROW(R, WB, OBJ, WPX, 1, 0, 0, A, TIER__OF_PROMOTING | TIER__OF_STALE, 0, TIER__R_PROXY, NONE),
	ROW(R, RP, OBJ, WPX, 1, 0, 0, A, 0, 0, TIER__R_PROXY, NONE),           /* readproxy */
	ROW(R, RO, OBJ, WPX, 1, 0, 0, A, 0, 0, TIER__R_PROXY_THEN_PROMOTE, NONE),
	ROW(R, PX, OBJ, WPX, 1, 0, 0, A, 0, 0, TIER__R_PROXY, NONE),
	ROW(R, NO, OBJ, WPX, 1, 0, 0, A, 0, 0, TIER__R_PROXY, NONE),
	ROW(R, NO, OBJ, WPX, 0, 0, 0, CL, 0, 0, TIER__R_HIT, NONE),           /* none drains, still serves */
	ROW(R, WB, OBJ, WPX, 0, 0, 0, CL, TIER__OF_EVICTING, 0, TIER__R_PROXY, NONE),
	ROW(R, WB, OBJ, WPX, 0, 0, 0, CL, 0, X_NOCACHE, TIER__R_PROXY, NONE),
	ROW(R, WB, OBJ, WPX, 0, 0, 0, CL, TIER__OF_EXCL, 0, TIER__R_WAIT, NONE),
	/* R-DOWN-1: cache pool down: base serves what it holds, the rest fails at once */
	ROW(R, WB, OBJ, WPX, 0, 0, 1, CL, 0, X_DOWN, TIER__R_PROXY, NONE),
	ROW(R, WB, OBJ, WPX, 0, 0, 1, D, 0, X_DOWN | X_DIRTYR, TIER__R_FAIL, NONE),
	ROW(R, WB, EXT, WPX, 0, 0, 1, D, 0, X_DOWN | X_BITS | X_ANY, TIER__R_PROXY, NONE),
	ROW(R, WB, OBJ, WPX, 0, 0, 1, D, TIER__OF_FLUSHING, X_DOWN | X_DIRTYR, TIER__R_HIT, NONE),
	ROW(R, WB, OBJ, WPX, 1, 0, 1, A, 0, X_DOWN, TIER__R_PROXY, NONE),     /* ABSENT: not its business */

	/* ---- writes: hits (R-WRITE-1, R-WRITE-3, R-WRITE-5) ---- */
	ROW(W, WB, OBJ, WPX, 0, 0, 0, CL, 0, 0, TIER__R_CACHE_WRITE, HIT),
	ROW(W, WB, OBJ, WPX, 0, 0, 0, D, 0, 0, TIER__R_CACHE_WRITE, HIT),
	ROW(W, WB, OBJ, WPX, 0, 1, 1, D, 0, 0, TIER__R_CACHE_WRITE, HIT),     /* full, degraded: still a hit */
	ROW(W, WB, OBJ, WPX, 0, 0, 0, D, 0, X_RUN, TIER__R_WAIT, NONE),
	ROW(W, WB, EXT, WPX, 0, 0, 0, D, 0, X_BITS | X_ALL | X_ANY | X_RUN | X_RUNPROXY,
	    TIER__R_CACHE_WRITE, HIT),
	ROW(W, WB, EXT, WPX, 0, 0, 0, D, 0, X_BITS | X_ANY | X_RUN | X_RUNPROXY, TIER__R_WAIT, NONE),
	ROW(W, WB, OBJ, WPX, 0, 0, 0, D, TIER__OF_PROMOTING, 0, TIER__R_WAIT, NONE),
	ROW(W, WB, OBJ, WPX, 0, 0, 0, CL, TIER__OF_EVICTING, 0, TIER__R_WAIT, NONE),
	ROW(W, WB, OBJ, WPX, 0, 0, 0, D, TIER__OF_EXCL, 0, TIER__R_WAIT, NONE),
	ROW(W, WB, OBJ, WPX, 0, 0, 0, D, TIER__OF_FLUSHING, 0, TIER__R_CACHE_WRITE, HIT),
	ROW(W, NO, OBJ, WPX, 0, 0, 0, D, 0, 0, TIER__R_CACHE_WRITE, HIT),     /* none: drains by flushing */
	ROW(W, PX, OBJ, WPX, 0, 0, 0, CL, 0, 0, TIER__R_CACHE_WRITE, HIT),
	ROW(W, RP, OBJ, WPX, 0, 0, 0, CL, 0, 0, TIER__R_CACHE_WRITE, HIT),
	/* R-WRITE-4: over target, extent mode: extents the copy lacks go to base */
	ROW(W, WB, EXT, WPX, 0, 1, 0, D, 0, X_BITS, TIER__R_PROXY_NEW_EXTENTS, MISS),
	/* R-WRITE-5: extent mode: a write hits only where the copy holds every extent it writes */
	ROW(W, WB, EXT, WPX, 0, 1, 0, D, 0, X_BITS | X_ANY, TIER__R_CACHE_WRITE, MISS),
	ROW(W, WB, EXT, WPX, 0, 1, 0, D, 0, X_BITS | X_WHOLE, TIER__R_CACHE_WRITE, MISS),
	ROW(W, WB, EXT, WPX, 0, 0, 0, D, 0, X_BITS, TIER__R_CACHE_WRITE, MISS),
	ROW(W, WB, EXT, WPX, 0, 0, 0, D, 0, X_BITS | X_ALL | X_ANY, TIER__R_CACHE_WRITE, HIT),
	ROW(W, WB, EXT, WPX, 0, 0, 0, CL, 0, X_BITS | X_ALL | X_ANY, TIER__R_CACHE_WRITE, HIT),

	/* ---- writes: readonly mode, STALE, a failed cache path (R-WRITE-2) ---- */
	ROW(W, RO, OBJ, WPX, 0, 0, 0, CL, 0, 0, TIER__R_DROP_THEN_PROXY, NONE),
	ROW(W, RO, OBJ, WPX, 0, 0, 0, D, 0, 0, TIER__R_CACHE_WRITE, HIT),     /* dirty from before */
	ROW(W, RO, OBJ, WPX, 0, 0, 0, CL, 0, X_RUN, TIER__R_WAIT, NONE),
	ROW(W, WB, OBJ, WPX, 0, 0, 0, A, TIER__OF_STALE, 0, TIER__R_DROP_THEN_PROXY, NONE),
	ROW(W, WB, OBJ, WPX, 0, 0, 0, A, 0, X_NOCACHE, TIER__R_PROXY, NONE),
	ROW(W, WB, OBJ, WPX, 0, 0, 0, CL, 0, X_NOCACHE, TIER__R_DROP_THEN_PROXY, NONE),
	ROW(W, WB, OBJ, WPX, 0, 0, 0, D, 0, X_NOCACHE, TIER__R_FLUSH_FIRST, NONE),
	ROW(W, WB, OBJ, WPX, 0, 0, 0, D, 0, X_NOCACHE | X_TRIED2, TIER__R_FAIL, NONE),
	ROW(W, WB, OBJ, WPX, 0, 0, 0, D, TIER__OF_FLUSHING, X_NOCACHE, TIER__R_WAIT, NONE),
	/* R-DOWN-1: cache pool down: a write to a cached object fails at once */
	ROW(W, WB, OBJ, WPX, 0, 0, 1, CL, 0, X_DOWN, TIER__R_FAIL, NONE),
	ROW(W, WB, OBJ, WPX, 0, 0, 1, A, 0, X_DOWN, TIER__R_PROXY, MISS),
	ROW(W, WB, OBJ, WPX, 0, 0, 1, A, TIER__OF_STALE, X_DOWN, TIER__R_FAIL, NONE),

	/* ---- writes: misses (R-WMISS-1, R-WMISS-2, R-WMISS-4; R-ADMIT-*) ---- */
	ROW(W, WB, OBJ, WPX, 1, 0, 0, A, 0, 0, TIER__R_PROXY_THEN_PROMOTE, MISS),
	ROW(W, WB, OBJ, WPR, 1, 0, 0, A, 0, 0, TIER__R_PROMOTE_WAIT, MISS),
	ROW(W, WB, EXT, WPX, 1, 0, 0, A, 0, 0, TIER__R_CACHE_WRITE, MISS),
	ROW(W, WB, EXT, WPR, 1, 0, 0, A, 0, 0, TIER__R_CACHE_WRITE, MISS),    /* write_miss: object only */
	ROW(W, WB, OBJ, WPX, 0, 0, 0, A, 0, 0, TIER__R_PROXY, MISS),
	ROW(W, WB, OBJ, WPX, 0, 0, 0, A, 0, X_HINT, TIER__R_PROXY_THEN_PROMOTE, MISS),
	ROW(W, WB, EXT, WPX, 1, 1, 0, A, 0, 0, TIER__R_PROXY, MISS),
	ROW(W, WB, EXT, WPX, 1, 0, 1, A, 0, 0, TIER__R_PROXY, MISS),
	ROW(W, WB, OBJ, WPX, 1, 0, 0, A, 0, X_RUN, TIER__R_PROXY, MISS),
	/*
	 * R-WMISS-3: extent mode: an admitted miss waits for reads on base,
	 * one not admitted goes beside them, and so does one beside writes only
	 */
	ROW(W, WB, EXT, WPX, 1, 0, 0, A, 0, X_RUN, TIER__R_WAIT, NONE),
	ROW(W, WB, EXT, WPX, 1, 0, 0, A, 0, X_RUN | X_RUNPROXY, TIER__R_PROXY, MISS),
	ROW(W, WB, EXT, WPX, 1, 0, 1, A, 0, X_RUN, TIER__R_PROXY, MISS),        /* degraded */
	ROW(W, WB, EXT, WPX, 1, 0, 0, A, 0, X_RUN | X_DOWN, TIER__R_PROXY, MISS), /* pool down */
	ROW(W, WB, EXT, WPX, 0, 0, 0, A, 0, X_RUN | X_OFFER, TIER__R_WAIT, NONE),
	ROW(W, WB, EXT, WPX, 1, 1, 0, A, 0, X_RUN, TIER__R_PROXY, MISS),
	ROW(W, WB, EXT, WPX, 0, 0, 0, A, 0, X_RUN | X_OFFER | X_NEAR, TIER__R_PROXY, MISS),
	ROW(W, PX, EXT, WPX, 1, 0, 0, A, 0, X_RUN, TIER__R_PROXY, MISS),
	ROW(W, WB, OBJ, WPX, 1, 0, 0, A, TIER__OF_PQUEUED, 0, TIER__R_PROXY, MISS),
	ROW(W, WB, OBJ, WPX, 1, 0, 0, A, TIER__OF_PROMOTING, 0, TIER__R_WAIT, NONE),
	ROW(W, RP, OBJ, WPX, 1, 0, 0, A, 0, 0, TIER__R_PROXY_THEN_PROMOTE, MISS),
	ROW(W, RO, OBJ, WPX, 1, 0, 0, A, 0, 0, TIER__R_PROXY, MISS),
	ROW(W, PX, EXT, WPX, 1, 0, 0, A, 0, 0, TIER__R_PROXY, MISS),
	ROW(W, NO, EXT, WPX, 1, 0, 0, A, 0, 0, TIER__R_PROXY, MISS),
	ROW(T, WB, OBJ, WPX, 1, 0, 0, A, 0, 0, TIER__R_PROXY, MISS),          /* trims never promote */
	ROW(Z, WB, EXT, WPX, 1, 0, 0, A, 0, X_WHOLE, TIER__R_PROXY, MISS),

	/* ---- trims and zeroes of cached objects (R-DROP-1) ---- */
	ROW(T, WB, OBJ, WPX, 0, 0, 0, D, 0, 0, TIER__R_CACHE_WRITE, HIT),     /* partial: zeroes the copy */
	ROW(T, WB, OBJ, WPX, 0, 0, 0, CL, 0, X_WHOLE, TIER__R_DROP_THEN_PROXY, HIT),
	ROW(T, WB, OBJ, WPX, 0, 0, 0, D, 0, X_WHOLE, TIER__R_DROP_BASE_THEN_CACHE, HIT),
	ROW(Z, WB, EXT, WPX, 0, 0, 0, D, 0, X_WHOLE | X_BITS | X_CLEANX, TIER__R_FLUSH_FIRST, HIT),
	ROW(Z, WB, EXT, WPX, 0, 0, 0, D, 0, X_WHOLE | X_BITS | X_CLEANX | X_TRIED2, TIER__R_FAIL, HIT),
	ROW(T, WB, OBJ, WPX, 0, 0, 0, D, TIER__OF_FLUSHING, X_WHOLE, TIER__R_WAIT, HIT),
	ROW(W, WB, OBJ, WPX, 0, 0, 0, CL, 0, X_WHOLE, TIER__R_CACHE_WRITE, HIT),  /* whole write: no drop */

	/* ---- cache hints (R-HINT-1) ---- */
	ROW(C, WB, OBJ, WPX, 0, 0, 0, A, 0, 0, TIER__R_PROMOTE, NONE),        /* no recency needed */
	ROW(C, PX, OBJ, WPX, 0, 0, 0, A, 0, 0, TIER__R_PROMOTE, NONE),        /* proxy: only on request */
	ROW(C, RP, EXT, WPX, 0, 0, 0, A, 0, 0, TIER__R_PROMOTE, NONE),
	ROW(C, NO, OBJ, WPX, 0, 0, 0, A, 0, 0, TIER__R_DONE, NONE),
	ROW(C, WB, OBJ, WPX, 0, 1, 0, A, 0, 0, TIER__R_DONE, NONE),
	ROW(C, WB, OBJ, WPX, 0, 0, 1, A, 0, 0, TIER__R_DONE, NONE),
	ROW(C, WB, OBJ, WPX, 0, 0, 0, CL, 0, 0, TIER__R_DONE, NONE),
	ROW(C, WB, OBJ, WPX, 0, 0, 0, A, TIER__OF_PROMOTING, 0, TIER__R_DONE, NONE),
	ROW(C, WB, OBJ, WPX, 0, 0, 0, A, TIER__OF_STALE, 0, TIER__R_DONE, NONE),
	ROW(C, WB, OBJ, WPX, 0, 0, 0, A, 0, X_RUN, TIER__R_WAIT, NONE),
	ROW(C, WB, OBJ, WPX, 0, 0, 0, A, TIER__OF_EXCL, 0, TIER__R_WAIT, NONE),
	ROW(C, WB, OBJ, WPX, 0, 0, 1, CL, 0, X_DOWN, TIER__R_DONE, NONE),

	/* ---- fill hints (queued behind a read that needed base: R-FILL-3, R-FILL-4) ---- */
	ROW(F, WB, EXT, WPX, 0, 0, 0, D, 0, X_BITS, TIER__R_FILL, NONE),     /* no recency: decided */
	ROW(F, WB, EXT, WPX, 0, 0, 0, CL, 0, X_BITS, TIER__R_FILL, NONE),
	ROW(F, RO, EXT, WPX, 0, 0, 0, CL, 0, X_BITS, TIER__R_FILL, NONE),
	ROW(F, WB, OBJ, WPX, 0, 0, 0, CL, 0, X_BITS, TIER__R_FILL, NONE),    /* bitmaps from before */
	ROW(F, WB, EXT, WPX, 0, 0, 0, D, TIER__OF_FLUSHING, X_BITS, TIER__R_FILL, NONE),
	ROW(F, WB, EXT, WPX, 0, 0, 0, D, 0, X_BITS | X_OBJALL, TIER__R_DONE, NONE),  /* whole now */
	ROW(F, WB, EXT, WPX, 0, 0, 0, D, 0, 0, TIER__R_DONE, NONE),          /* no bitmaps */
	ROW(F, WB, EXT, WPX, 0, 0, 0, A, 0, 0, TIER__R_DONE, NONE),          /* dropped */
	ROW(F, WB, EXT, WPX, 0, 0, 0, CL, TIER__OF_EVICTING, X_BITS, TIER__R_DONE, NONE),
	ROW(F, WB, EXT, WPX, 0, 0, 0, D, TIER__OF_EVICTING | TIER__OF_EVICT_AFTER_FLUSH, X_BITS,
	    TIER__R_DONE, NONE),
	ROW(F, WB, EXT, WPX, 0, 0, 0, D, TIER__OF_VUNK, X_BITS, TIER__R_DONE, NONE),
	ROW(F, WB, EXT, WPX, 0, 0, 0, D, TIER__OF_FILLING, X_BITS, TIER__R_WAIT, NONE),  /* after it */
	ROW(F, RP, EXT, WPX, 0, 0, 0, D, 0, X_BITS, TIER__R_DONE, NONE),     /* no read admission */
	ROW(F, PX, EXT, WPX, 0, 0, 0, D, 0, X_BITS, TIER__R_DONE, NONE),
	ROW(F, NO, EXT, WPX, 0, 0, 0, D, 0, X_BITS, TIER__R_DONE, NONE),
	ROW(F, WB, EXT, WPX, 0, 1, 0, D, 0, X_BITS, TIER__R_DONE, NONE),     /* full */
	ROW(F, WB, EXT, WPX, 0, 0, 1, D, 0, X_BITS, TIER__R_DONE, NONE),     /* degraded */
	ROW(F, WB, EXT, WPX, 0, 0, 0, D, 0, X_BITS | X_RUN, TIER__R_WAIT, NONE),
	ROW(F, WB, EXT, WPX, 0, 0, 0, D, TIER__OF_EXCL, X_BITS, TIER__R_WAIT, NONE),
	ROW(F, WB, EXT, WPX, 0, 0, 1, D, 0, X_BITS | X_DOWN, TIER__R_DONE, NONE),

	/* ---- while a fill runs: reads and cache writes go on, base and drops wait ---- */
	/* (R-FILLRUN-1; R-FIRST-2: FILL_READY) */
	ROW(R, WB, EXT, WPX, 0, 0, 0, D, TIER__OF_FILLING, X_BITS | X_ANY, TIER__R_HIT_PARTIAL, NONE),
	ROW(R, WB, EXT, WPX, 0, 0, 0, D, TIER__OF_FILLING | TIER__OF_FILL_READY, X_BITS | X_ALL |
	    X_ANY, TIER__R_WAIT, NONE),                                       /* it lands first */
	ROW(W, WB, EXT, WPX, 0, 0, 0, D, TIER__OF_FILLING, X_BITS, TIER__R_CACHE_WRITE, MISS),
	ROW(W, WB, EXT, WPX, 0, 0, 0, D, TIER__OF_FILLING | TIER__OF_FILL_READY, X_BITS,
	    TIER__R_WAIT, NONE),
	ROW(W, WB, EXT, WPX, 0, 1, 0, D, TIER__OF_FILLING, X_BITS, TIER__R_WAIT, NONE),  /* to base */
	ROW(W, WB, EXT, WPX, 0, 1, 0, D, TIER__OF_FILLING, X_BITS | X_ANY, TIER__R_CACHE_WRITE, MISS),
	ROW(T, WB, EXT, WPX, 0, 0, 0, D, TIER__OF_FILLING, X_BITS | X_WHOLE, TIER__R_WAIT, NONE),
	ROW(T, WB, EXT, WPX, 0, 0, 0, CL, TIER__OF_FILLING, X_BITS | X_WHOLE, TIER__R_WAIT, NONE),
	ROW(Z, WB, EXT, WPX, 0, 0, 0, D, TIER__OF_FILLING, X_BITS, TIER__R_CACHE_WRITE, HIT),
	ROW(W, WB, EXT, WPX, 0, 0, 0, D, TIER__OF_FILLING, X_BITS | X_NOCACHE, TIER__R_WAIT, NONE),
	ROW(W, RO, EXT, WPX, 0, 0, 0, CL, TIER__OF_FILLING, X_BITS, TIER__R_WAIT, NONE),
	ROW(C, WB, EXT, WPX, 0, 0, 0, D, TIER__OF_FILLING, X_BITS, TIER__R_DONE, NONE),
};

static struct tier_params params_of(int mode, int gran, int wmiss)
{
	struct tier_params p;

	tier_params_default(&p);
	p.cache_mode = mode;
	p.promote_granularity = gran;
	p.write_miss = wmiss;
	return p;
}

static struct tier__dstate state_of(int type, bool recent, bool full, bool degraded, int state,
				    unsigned flags, unsigned x, int gran)
{
	struct tier__dstate s;

	memset(&s, 0, sizeof(s));
	s.type = type;
	s.whole = x & X_WHOLE;
	s.nocache = x & X_NOCACHE;
	s.tries = (x & X_TRIED2) ? 2 : 0;
	s.state = (uint8_t)state;
	s.flags = (uint16_t)flags;
	s.nrun = (x & X_RUN) ? 1 : 0;
	s.nproxy = (x & X_RUNPROXY) ? 1 : 0;
	s.extents = x & X_BITS;
	s.all_valid = x & X_ALL;
	s.any_valid = x & X_ANY;
	s.any_dirty = x & X_DIRTYR;
	s.clean_extents = x & X_CLEANX;
	s.bitmaps = gran == EXT;
	s.degraded = degraded;
	s.cache_down = x & X_DOWN;
	s.full = full ? 1.0 : 0.5;
	s.full_less_own = s.full;
	s.recent = recent;
	s.hint = x & X_HINT;
	if (x & X_NEAR)
		s.full = 0.9;
	if ((x & X_EDGE) && !full)
		s.full = 0.79;
	s.offered = x & X_OFFER;
	s.freq = (x & X_FREQ) ? 3 : 1;
	s.victim_freq = 2;
	s.obj_all_valid = x & X_OBJALL;
	s.fill_admitted = x & X_FADM;
	s.seq = x & X_SEQ;
	return s;
}

static void test_route_table(void **state)
{
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		struct tier_params p = params_of(r->mode, r->gran, r->wmiss);
		struct tier__dstate s = state_of(r->type, r->recent, r->full, r->degraded, r->state,
						 r->flags, r->x, r->gran);
		struct tier__decision d;

		if (r->x & X_TLFU)
			p.admission = TIER_ADMIT_TINYLFU;
		if (r->x & X_NOROOM)
			p.admit_when_room = 0;
		d = tier__decide(&p, &s);
		if (d.route != r->want || d.count != r->count) {
			fprintf(stderr, "test_decide.c:%d: route %s count %d, want %s count %d (%s)\n",
				r->line, tier__route_name(d.route), d.count,
				tier__route_name(r->want), r->count, d.why);
			bad++;
		}
		assert_non_null(d.why);
	}
	assert_int_equal(bad, 0);
}

static bool admits(enum tier__route r)
{
	return r == TIER__R_PROXY_THEN_PROMOTE || r == TIER__R_PROMOTE_WAIT ||
	       r == TIER__R_PROMOTE;
}

/* Every combination: the rules that hold whatever the row. */
static void test_route_sweep(void **state)
{
	static const int types[] = { R, W, T, Z, C, F };
	static const unsigned flag_sets[] = {
		0, TIER__OF_PROMOTING, TIER__OF_FLUSHING, TIER__OF_EVICTING, TIER__OF_EXCL,
		TIER__OF_STALE, TIER__OF_PQUEUED, TIER__OF_VUNK, TIER__OF_HOT,
		TIER__OF_FQUEUED, TIER__OF_FILLING, TIER__OF_FILLING | TIER__OF_FILL_READY,
	};
	static const unsigned x_sets[] = {
		0, X_WHOLE, X_BITS, X_BITS | X_ANY, X_BITS | X_ALL | X_ANY, X_BITS | X_WHOLE,
		X_BITS | X_CLEANX | X_WHOLE, X_BITS | X_CLEANX | X_WHOLE | X_TRIED2, X_NOCACHE,
		X_NOCACHE | X_TRIED2, X_RUN, X_RUN | X_RUNPROXY | X_BITS | X_ALL | X_ANY,
		X_RUN | X_RUNPROXY | X_BITS | X_ANY, X_DOWN, X_DOWN | X_DIRTYR,
		X_DOWN | X_WHOLE, X_HINT, X_HINT | X_BITS, X_BITS | X_OBJALL, X_OFFER,
		X_OFFER | X_BITS, X_OFFER | X_BITS | X_ANY, X_OFFER | X_EDGE | X_BITS,
		X_BITS | X_FADM, X_BITS | X_SEQ, X_BITS | X_ANY | X_FADM, X_BITS | X_ANY | X_SEQ,
	};
	uint64_t n = 0;

	(void)state;
	for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++)
	for (int mode = 0; mode <= TIER_MODE_NONE; mode++)
	for (int gran = 0; gran < 2; gran++)
	for (int wm = 0; wm < 2; wm++)
	for (int rf = 0; rf < 8; rf++)
	for (int st = A; st <= D; st++)
	for (size_t fi = 0; fi < sizeof(flag_sets) / sizeof(flag_sets[0]); fi++)
	for (size_t xi = 0; xi < sizeof(x_sets) / sizeof(x_sets[0]) + 64; xi++) {
		/* the meaningful piece/object details, then 64 arbitrary mixes of them */
		unsigned x = xi < sizeof(x_sets) / sizeof(x_sets[0]) ? x_sets[xi] :
			     (unsigned)(tier__mix64(n) & ((1u << 12) - 1));
		bool recent = rf & 1, full = rf & 2, degraded = rf & 4;
		struct tier_params p = params_of(mode, gran, wm);
		struct tier__dstate s = state_of(types[ti], recent, full, degraded, st,
						 flag_sets[fi], x, gran);
		struct tier__decision d = tier__decide(&p, &s);
		enum tier__route r = d.route;
		/* admit_when_room: a first decision with room below the full target, less the margin */
		bool room = s.offered && p.admit_when_room && s.full < p.cache_target_full_ratio - 0.02;

		n++;
		assert_true((unsigned)r < TIER__R_COUNT);
		assert_string_not_equal(tier__route_name(r), "?");
		/* admission: only a miss, never with none/proxy, degraded or full */
		if (d.admitted) {
			assert_int_equal(s.state, A);
			assert_true(mode != NO && mode != PX && !degraded && !full);
			assert_true(recent || s.hint || room);
			assert_true(types[ti] == R || types[ti] == W);
		}
		if (admits(r) && r != TIER__R_PROMOTE)
			assert_true(d.admitted);
		/* nothing starts beside an exclusive op */
		if (flag_sets[fi] == TIER__OF_EXCL)
			assert_int_equal(r, TIER__R_WAIT);
		/* readonly mode never writes a clean copy */
		if (mode == RO && st == CL && types[ti] != R && types[ti] != C)
			assert_true(r != TIER__R_CACHE_WRITE);
		/* a whole-object trim of a cached object goes through a drop, never a cache write */
		if ((types[ti] == T || types[ti] == Z) && (x & X_WHOLE) && st != A)
			assert_true(r != TIER__R_CACHE_WRITE);
		/* FAIL: the cache pool is down, or two flushes failed */
		if (r == TIER__R_FAIL)
			assert_true((x & X_DOWN) || (x & X_TRIED2));
		/* a read never waits but behind an exclusive op, a landing fill, or
		 * the running promotion of a copyless object (object granularity) */
		if (types[ti] == R) {
			assert_true(r != TIER__R_WAIT || (flag_sets[fi] & (TIER__OF_EXCL |
								    TIER__OF_FILL_READY)) ||
				    (st == A && (flag_sets[fi] & TIER__OF_PROMOTING) &&
				     !(gran && (x & X_BITS)) && !degraded && !(x & (X_NOCACHE | X_DOWN))));
			assert_true(r == TIER__R_WAIT || r == TIER__R_FAIL || r == TIER__R_HIT ||
				    r == TIER__R_HIT_PARTIAL || r == TIER__R_EXTENT_MISS ||
				    r == TIER__R_PROXY || r == TIER__R_PROXY_THEN_PROMOTE);
			assert_true(d.record || r == TIER__R_WAIT || r == TIER__R_FAIL);
		}
		/*
		 * a write miss of a copyless object, nothing exclusive or on its
		 * way in, waits only for reads on base, in extent mode, admitted;
		 * with nothing counted or recorded, so it is offered again after
		 */
		if (types[ti] == W && st == A && r == TIER__R_WAIT && !(x & X_NOCACHE) &&
		    !(flag_sets[fi] & (TIER__OF_EXCL | TIER__OF_FILL_READY | TIER__OF_PROMOTING |
				       TIER__OF_EVICTING | TIER__OF_EVICT_AFTER_FLUSH |
				       TIER__OF_FILLING | TIER__OF_STALE))) {
			assert_true(gran == EXT && s.nrun > s.nproxy && !(x & X_DOWN));
			assert_true(mode == WB || mode == RP);
			assert_true(!degraded && !full && (recent || s.hint || room));
			assert_true(d.count == TIER__C_NONE && !d.record);
		}
		/* a STALE object's leftover copy is removed before base changes */
		if ((flag_sets[fi] & TIER__OF_STALE) && st == A && types[ti] != R &&
		    types[ti] != C && types[ti] != F)
			assert_true(r == TIER__R_DROP_THEN_PROXY || r == TIER__R_WAIT ||
				    r == TIER__R_FAIL);
		/* only hints complete without I/O as done */
		if (r == TIER__R_DONE)
			assert_true(types[ti] == C || types[ti] == F);
		/* write hit/miss counting: writes only */
		if (types[ti] == R || types[ti] == C || types[ti] == F)
			assert_int_equal(d.count, TIER__C_NONE);
		/* fills: only a fill hint fills, only a read that needs base asks for one */
		if (r == TIER__R_FILL) {
			assert_int_equal(types[ti], F);
			assert_true(st != A && s.extents && !s.obj_all_valid && !s.nrun);
			assert_true(mode == WB || mode == RO);
		}
		if (d.fill != TIER__FILL_NONE) {
			assert_int_equal(types[ti], R);
			/* a miss of no copy at extent granularity: a read fill, never a promotion */
			assert_true(r == TIER__R_HIT_PARTIAL || r == TIER__R_EXTENT_MISS ||
				    (r == TIER__R_PROXY && st == A && d.fill == TIER__FILL_GO &&
				     p.promote_granularity == TIER_GRAN_EXTENT && s.bitmaps &&
				     !(flag_sets[fi] & TIER__OF_STALE)) ||
				    (r == TIER__R_PROXY && st == A && d.fill == TIER__FILL_BEHIND_COPY &&
				     p.promote_granularity == TIER_GRAN_EXTENT && s.bitmaps &&
				     (flag_sets[fi] & TIER__OF_PROMOTING) &&
				     !(flag_sets[fi] & (TIER__OF_STALE | TIER__OF_FQUEUED))));
		}
		/* a fill behind the copy being made: only with room (it evicts nothing) */
		if (d.fill == TIER__FILL_BEHIND_COPY)
			assert_true(p.admit_when_room && s.offered &&
				    s.full < p.cache_target_full_ratio - 0.02);
		if (r == TIER__R_PROXY_THEN_PROMOTE && types[ti] == R)
			assert_true(p.promote_granularity != TIER_GRAN_EXTENT || !s.bitmaps);
		if (d.fill == TIER__FILL_GO) {
			assert_true(mode == WB || mode == RO);
			assert_true(!degraded && !full && (recent || s.hint || room));
			/* beside a queued hint only for what it does not bring, not a stream */
			assert_true(!(flag_sets[fi] & TIER__OF_FQUEUED) ||
				    (!s.fill_admitted && !s.seq));
		}
		assert_true(d.fill != TIER__FILL_SKIP_DEGRADED || degraded);
		assert_true(d.fill != TIER__FILL_SKIP_FULL || full);
		assert_true(d.fill != TIER__FILL_SKIP_COLD || (!recent && !s.hint && !room));
		/* while a fill runs, nothing goes to base or drops the copy but reads */
		if ((flag_sets[fi] & TIER__OF_FILLING) && types[ti] != R && types[ti] != C &&
		    types[ti] != F)
			assert_true(r == TIER__R_CACHE_WRITE || r == TIER__R_WAIT ||
				    r == TIER__R_FAIL);
		if (flag_sets[fi] & TIER__OF_FILL_READY)
			assert_int_equal(r, TIER__R_WAIT);
	}
	assert_true(n > 2000000);   /* 6 x 5 x 2 x 2 x 8 x 3 x 12 x 87 */
}

/* After a read that needed base for part of a cached copy: fill it, or why not. */
static void test_fill_choice(void **state)
{
	static const struct {
		int line, mode, state;
		bool recent, full, degraded;
		unsigned flags, x;
		enum tier__fill want;
	} t[] = {
#define FROW(...) { __LINE__, __VA_ARGS__ }
		FROW(WB, D, 1, 0, 0, 0, X_BITS | X_ANY, TIER__FILL_GO),       /* hit-partial */
		FROW(WB, CL, 1, 0, 0, 0, X_BITS, TIER__FILL_GO),              /* extent-miss */
		FROW(RO, CL, 1, 0, 0, 0, X_BITS, TIER__FILL_GO),
		FROW(WB, CL, 0, 0, 0, 0, X_BITS, TIER__FILL_SKIP_COLD),
		FROW(WB, CL, 0, 0, 0, 0, X_BITS | X_HINT, TIER__FILL_GO),     /* the policy's hint */
		FROW(WB, CL, 1, 1, 0, 0, X_BITS, TIER__FILL_SKIP_FULL),
		FROW(WB, CL, 0, 1, 0, 0, X_BITS, TIER__FILL_SKIP_FULL),       /* full before cold */
		FROW(WB, CL, 1, 1, 1, 0, X_BITS, TIER__FILL_SKIP_DEGRADED),
		FROW(RP, CL, 1, 0, 0, 0, X_BITS, TIER__FILL_NONE),            /* reads not admitted */
		FROW(PX, CL, 1, 0, 0, 0, X_BITS, TIER__FILL_NONE),
		FROW(NO, CL, 1, 0, 0, 0, X_BITS, TIER__FILL_NONE),
		FROW(WB, CL, 1, 0, 0, 0, X_BITS | X_ALL | X_ANY, TIER__FILL_NONE),   /* a hit */
		FROW(WB, CL, 1, 0, 0, 0, 0, TIER__FILL_NONE),                 /* whole copy */
		FROW(WB, A, 1, 0, 0, 0, 0, TIER__FILL_GO),                    /* a miss: read fill */
		FROW(WB, A, 0, 0, 0, 0, 0, TIER__FILL_NONE),                  /* cold: proxied */
		FROW(WB, A, 1, 0, 0, TIER__OF_STALE, 0, TIER__FILL_NONE),     /* a leftover first */
		FROW(WB, A, 1, 0, 0, TIER__OF_PROMOTING, 0, TIER__FILL_NONE),
		FROW(WB, A, 1, 1, 0, 0, 0, TIER__FILL_NONE),                  /* full */
		FROW(RP, A, 1, 0, 0, 0, 0, TIER__FILL_NONE),                  /* reads not admitted */
		/* a hint queued: GO adds the read's window to it, unless it brings that */
		FROW(WB, CL, 1, 0, 0, TIER__OF_FQUEUED, X_BITS, TIER__FILL_GO),
		FROW(WB, CL, 1, 0, 0, TIER__OF_FQUEUED, X_BITS | X_FADM, TIER__FILL_NONE),
		FROW(WB, CL, 1, 0, 0, TIER__OF_FQUEUED, X_BITS | X_SEQ, TIER__FILL_NONE),
		FROW(WB, CL, 0, 0, 0, TIER__OF_FQUEUED, X_BITS, TIER__FILL_SKIP_COLD),
		FROW(WB, CL, 1, 1, 0, TIER__OF_FQUEUED, X_BITS, TIER__FILL_SKIP_FULL),
		FROW(WB, CL, 1, 0, 0, TIER__OF_FQUEUED | TIER__OF_FILLING, X_BITS, TIER__FILL_GO),
		FROW(WB, CL, 1, 0, 0, 0, X_BITS | X_SEQ, TIER__FILL_GO),       /* none queued */
		FROW(WB, CL, 1, 0, 0, TIER__OF_FILLING, X_BITS, TIER__FILL_GO),   /* its hint waits */
		FROW(WB, CL, 1, 0, 0, TIER__OF_EVICTING, X_BITS, TIER__FILL_NONE),
		FROW(WB, D, 1, 0, 0, TIER__OF_VUNK, X_BITS, TIER__FILL_NONE),
		FROW(WB, CL, 1, 0, 0, 0, X_BITS | X_NOCACHE, TIER__FILL_NONE),
		FROW(WB, CL, 1, 0, 1, 0, X_BITS | X_DOWN, TIER__FILL_NONE),   /* base serves it */
		FROW(WB, D, 1, 0, 0, TIER__OF_FLUSHING, X_BITS, TIER__FILL_GO),
		/* admit_when_room: a cold read with room is a read fill, or fills its copy */
		FROW(WB, A, 0, 0, 0, 0, X_OFFER, TIER__FILL_GO),
		FROW(WB, A, 0, 0, 0, 0, X_OFFER | X_EDGE, TIER__FILL_NONE),
		FROW(WB, A, 0, 0, 0, 0, X_OFFER | X_NOROOM, TIER__FILL_NONE),
		FROW(WB, CL, 0, 0, 0, 0, X_BITS | X_OFFER, TIER__FILL_GO),
		FROW(WB, CL, 0, 0, 0, 0, X_BITS | X_OFFER | X_NEAR, TIER__FILL_SKIP_COLD),
		FROW(WB, CL, 0, 0, 0, 0, X_BITS | X_OFFER | X_NOROOM, TIER__FILL_SKIP_COLD),
		FROW(WB, CL, 0, 0, 0, 0, X_BITS | X_EDGE, TIER__FILL_SKIP_COLD),  /* decided before */
#undef FROW
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct tier_params p = params_of(t[i].mode, EXT, WPX);
		struct tier__dstate s = state_of(R, t[i].recent, t[i].full, t[i].degraded,
						 t[i].state, t[i].flags, t[i].x, EXT);
		struct tier__decision d;

		if (t[i].x & X_NOROOM)
			p.admit_when_room = 0;
		d = tier__decide(&p, &s);

		if (d.fill != t[i].want) {
			fprintf(stderr, "test_decide.c:%d: fill %d (%s), want %d (route %s)\n",
				t[i].line, d.fill, tier__fill_name(d.fill), t[i].want,
				tier__route_name(d.route));
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	assert_string_equal(tier__fill_name(TIER__FILL_SKIP_COLD), "skipped, cold");
}

/*
 * admit_when_room (default on, off in the ceph presets): the recency rule
 * filters only under pressure.  Below the full target less the margin
 * (0.8 - 0.02) a miss it turns away is admitted, at its first decision
 * only; from the margin up the rule applies as set.
 */
static void test_admit_when_room(void **state)
{
	struct tier_params p;
	struct tier__dstate s;
	char err[128];
	(void)state;

	tier_params_default(&p);
	assert_int_equal(p.admit_when_room, 1);
	assert_int_equal(p.min_read_recency_for_promote, 1);
	memset(&s, 0, sizeof(s));
	s.offered = true;
	for (int i = 0; i <= 100; i++) {
		s.full = i / 100.0;
		assert_int_equal(tier__decide_admit(&p, &s, false), s.full < 0.78 - 1e-9);
		assert_int_equal(tier__decide_admit(&p, &s, true), s.full < 0.78 - 1e-9);
	}
	s.full = 0.5;
	s.offered = false;   /* decided again after its access was recorded */
	assert_false(tier__decide_admit(&p, &s, false));
	s.offered = true;
	p.cache_target_full_ratio = 0.5;   /* the target moves the line */
	assert_false(tier__decide_admit(&p, &s, false));
	s.full = 0.47;
	assert_true(tier__decide_admit(&p, &s, false));
	s.recent = true;   /* under pressure the rule as set still admits */
	s.full = 0.9;
	assert_true(tier__decide_admit(&p, &s, false));
	s.recent = false;
	assert_false(tier__decide_admit(&p, &s, false));

	assert_int_equal(tier_params_preset(&p, "ceph", err, sizeof(err)), 0);
	assert_int_equal(p.admit_when_room, 0);
	s.full = 0;
	assert_false(tier__decide_admit(&p, &s, false));
	tier_params_default(&p);
	assert_int_equal(tier_params_preset(&p, "promote-always", err, sizeof(err)), 0);
	assert_int_equal(p.admit_when_room, 0);
}

/*
 * A read of extents a small fill in flight brings waits for it (a delayed
 * hit), but not while the cache pool is down or degraded: the fill's cache
 * write may be waiting out op_timeout, and the read goes to base at once.
 */
static void test_delayed_hit(void **state)
{
	struct tier_params p = params_of(WB, EXT, WPX);
	struct tier__dstate s;
	struct tier__decision d;

	(void)state;
	/* a read fill is making the copy (ABSENT, PROMOTING) and brings the piece */
	s = state_of(R, false, false, false, A, TIER__OF_PROMOTING, 0, EXT);
	s.fill_brings = 4096;
	assert_int_equal(tier__decide(&p, &s).route, TIER__R_WAIT);
	s.fill_brings = 1u << 20;   /* a large fill: not waited for */
	assert_int_not_equal(tier__decide(&p, &s).route, TIER__R_WAIT);
	s.fill_brings = 4096;
	s.cache_down = true;
	d = tier__decide(&p, &s);
	assert_int_not_equal(d.route, TIER__R_WAIT);
	assert_int_equal(d.route, TIER__R_PROXY);
	s.cache_down = false;
	s.degraded = true;
	d = tier__decide(&p, &s);
	assert_int_not_equal(d.route, TIER__R_WAIT);
	assert_int_equal(d.route, TIER__R_PROXY);
	/* a copy with some extents, a window fill bringing the rest */
	s = state_of(R, false, false, false, CL, TIER__OF_FILLING, X_BITS | X_ANY, EXT);
	s.fill_brings = 65536;
	assert_int_equal(tier__decide(&p, &s).route, TIER__R_WAIT);
	s.nocache = true;
	assert_int_not_equal(tier__decide(&p, &s).route, TIER__R_WAIT);
}

static struct tier__agent_view av(int state, unsigned flags, bool busy, bool img, bool ign,
				  uint64_t age)
{
	return (struct tier__agent_view){ .state = (uint8_t)state, .flags = (uint16_t)flags,
					  .busy = busy, .image_ok = img, .ignore_age = ign,
					  .age_ms = age };
}

/* The fills' cache-write budget: a share of client bytes in extent mode, none in object mode. */
static void test_fill_budget(void **state)
{
	struct tier_params p;
	(void)state;

	tier_params_default(&p);
	assert_int_equal(p.fill_budget_pct, 100);
	assert_true(tier__decide_fill_budget_rate(&p) == 1.0);
	assert_true(tier__decide_fill_budget_cap(&p) == 4.0 * (double)p.object_size);
	p.fill_budget_pct = 250;
	assert_true(tier__decide_fill_budget_rate(&p) == 2.5);
	p.fill_budget_pct = 0;   /* fills take the promotion throttle's tokens */
	assert_true(tier__decide_fill_budget_rate(&p) == 0);
	p.fill_budget_pct = 100;
	p.promote_granularity = TIER_GRAN_OBJECT;   /* promotions: the throttle */
	assert_true(tier__decide_fill_budget_rate(&p) == 0);

	/* the whole object: room for it, and a stream or a quarter of it valid */
	tier_params_default(&p);
	assert_int_equal(p.fill_locality_pct, 25);
	assert_false(tier__decide_fill_whole(&p, false, true, 1024, 1024));   /* no room */
	assert_true(tier__decide_fill_whole(&p, true, true, 1, 1024));        /* a stream */
	assert_false(tier__decide_fill_whole(&p, true, false, 255, 1024));    /* scattered */
	assert_true(tier__decide_fill_whole(&p, true, false, 256, 1024));     /* dense */
	p.fill_locality_pct = 100;   /* streams only */
	assert_false(tier__decide_fill_whole(&p, true, false, 1023, 1024));
	assert_true(tier__decide_fill_whole(&p, true, true, 0, 1024));
	p.fill_locality_pct = 0;     /* room alone (the rule before) */
	assert_true(tier__decide_fill_whole(&p, true, false, 0, 1024));
}

static void test_agent_choice(void **state)
{
	struct tier_params p;
	struct tier__agent_view v;

	(void)state;
	tier_params_default(&p);
	p.cache_min_flush_age = 1000;
	p.cache_min_evict_age = 2000;
	v = av(D, 0, false, true, false, 1000);
	assert_int_equal(tier__decide_flush(&p, &v), TIER__SKIP_NONE);
	v = av(D, 0, true, true, false, 1000);   /* a cache write in flight: fine */
	assert_int_equal(tier__decide_flush(&p, &v), TIER__SKIP_NONE);
	v = av(D, 0, false, true, false, 999);
	assert_int_equal(tier__decide_flush(&p, &v), TIER__SKIP_YOUNG);
	v = av(D, 0, false, true, true, 0);
	assert_int_equal(tier__decide_flush(&p, &v), TIER__SKIP_NONE);
	v = av(D, TIER__OF_HOT, false, true, true, 5000);
	assert_int_equal(tier__decide_flush(&p, &v), TIER__SKIP_HOT);
	v = av(D, TIER__OF_FLUSHING, false, true, true, 5000);
	assert_int_equal(tier__decide_flush(&p, &v), TIER__SKIP_BUSY);
	v = av(CL, 0, false, true, true, 5000);
	assert_int_equal(tier__decide_flush(&p, &v), TIER__SKIP_STATE);
	v = av(D, 0, false, false, true, 5000);
	assert_int_equal(tier__decide_flush(&p, &v), TIER__SKIP_IMAGE);

	v = av(CL, 0, false, true, false, 2000);
	assert_int_equal(tier__decide_evict(&p, &v), TIER__SKIP_NONE);
	v = av(CL, 0, false, true, false, 1999);
	assert_int_equal(tier__decide_evict(&p, &v), TIER__SKIP_YOUNG);
	v = av(CL, 0, true, true, true, 5000);
	assert_int_equal(tier__decide_evict(&p, &v), TIER__SKIP_BUSY);
	v = av(CL, TIER__OF_VUNK, false, true, true, 5000);
	assert_int_equal(tier__decide_evict(&p, &v), TIER__SKIP_BUSY);
	/* a dirty copy is a victim too (flushed first), unless hot; not with Ceph's agent */
	v = av(D, 0, false, true, true, 5000);
	assert_int_equal(tier__decide_evict(&p, &v), TIER__SKIP_NONE);
	v = av(D, TIER__OF_HOT, false, true, true, 5000);
	assert_int_equal(tier__decide_evict(&p, &v), TIER__SKIP_HOT);
	v = av(D, 0, false, true, false, 1999);
	assert_int_equal(tier__decide_evict(&p, &v), TIER__SKIP_YOUNG);
	p.agent_evict_dirty = 0;
	v = av(D, 0, false, true, true, 5000);
	assert_int_equal(tier__decide_evict(&p, &v), TIER__SKIP_STATE);
	p.agent_evict_dirty = 1;
	p.cache_mode = TIER_MODE_NONE;   /* draining: dirty copies are flushed, not evicted */
	assert_int_equal(tier__decide_evict(&p, &v), TIER__SKIP_STATE);
	p.cache_mode = TIER_MODE_WRITEBACK;
	v = av(A, 0, false, true, true, 5000);
	assert_int_equal(tier__decide_evict(&p, &v), TIER__SKIP_STATE);
	assert_string_equal(tier__skip_name(TIER__SKIP_HOT), "hot");
}

/* Extent-aware eviction: whole, partial (clean only) or a second chance. */
static void test_evict_how(void **state)
{
	struct tier_params p;
	struct tier__evict_view v = { .extents = true, .n_ref = 3, .n_drop = 5, .n_clean = 8 };

	(void)state;
	tier_params_default(&p);
	assert_int_equal(p.evict_extents, 2);   /* the clock hand (the agent's choice, not decide.c's) */
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_PARTIAL);
	v.n_drop = 0;                           /* every valid extent referenced */
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_AGAIN);
	v.n_clean = 0;                          /* no clean extent: the flush idle, as before */
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_AGAIN);
	v.flushing = true;                      /* every dirty extent referenced: no flush */
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_AGAIN);   /* takes them */
	v.n_dirty_cold = 4;                     /* the flush hand will clean these: left as it is */
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_PASS);
	p.evict_extents = 1;                    /* no flush hand: a second chance, as before */
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_AGAIN);
	p.evict_extents = 2;
	v.now = true;                           /* over 100%: the order's victim goes whole */
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_WHOLE);
	v.now = false;
	v.flushing = false;
	v.n_dirty_cold = 0;
	v.n_clean = 8;
	v.n_drop = 5;
	v.n_ref = 0;                            /* nothing referenced since the last look */
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_WHOLE);
	v.n_ref = 3;
	v.drain = true;                         /* an admin evict */
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_WHOLE);
	v.drain = false;
	v.extents = false;                      /* object mode */
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_WHOLE);
	v.extents = true;
	v.objects_bind = true;                  /* target_max_objects binds: only objects free room */
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_WHOLE);
	v.objects_bind = false;
	v.n_drop = 0;
	v.now = true;                           /* over 100%: no second chance */
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_WHOLE);
	v.n_drop = 5;                           /* but dropping cold extents still comes first */
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_PARTIAL);
	v.now = false;
	p.evict_extents = 0;
	assert_int_equal(tier__decide_evict_how(&p, &v), TIER__EVH_WHOLE);
}

static void test_flush_how(void **state)
{
	struct tier_params p;
	struct tier__flush_view v = { .extents = true, .n_dirty_ref = 4, .n_dirty_cold = 12 };

	(void)state;
	tier_params_default(&p);
	assert_int_equal(tier__decide_flush_how(&p, &v), TIER__FLH_HAND);  /* hot dirty extents */
	v.n_dirty_ref = 0;                      /* nothing hot: the order's, whole */
	assert_int_equal(tier__decide_flush_how(&p, &v), TIER__FLH_WHOLE);
	v.hand = true;                          /* the hand: its cold extents */
	assert_int_equal(tier__decide_flush_how(&p, &v), TIER__FLH_COLD);
	v.n_dirty_ref = 4;
	assert_int_equal(tier__decide_flush_how(&p, &v), TIER__FLH_COLD);
	v.n_dirty_cold = 0;                     /* nothing cold: passed over */
	assert_int_equal(tier__decide_flush_how(&p, &v), TIER__FLH_PASS);
	v.round2 = true;                        /* nothing cold anywhere: whole */
	assert_int_equal(tier__decide_flush_how(&p, &v), TIER__FLH_WHOLE);
	v.round2 = false;
	v.drain = true;                         /* an admin flush or evict, cache_mode none */
	assert_int_equal(tier__decide_flush_how(&p, &v), TIER__FLH_WHOLE);
	v.drain = false;
	v.hand = false;
	v.extents = false;                      /* no reference bits */
	assert_int_equal(tier__decide_flush_how(&p, &v), TIER__FLH_WHOLE);
	v.extents = true;
	p.evict_extents = 1;                    /* no clock */
	assert_int_equal(tier__decide_flush_how(&p, &v), TIER__FLH_WHOLE);
	p.evict_extents = 2;
	p.promote_granularity = TIER_GRAN_OBJECT;
	assert_int_equal(tier__decide_flush_how(&p, &v), TIER__FLH_WHOLE);
}

static void test_agent_modes(void **state)
{
	struct tier_params p;
	struct tier__modes idle = { 0 }, m;

	(void)state;
	tier_params_default(&p);
	p.cache_target_dirty_ratio = 0.4;
	p.cache_target_dirty_high_ratio = 0.6;
	p.cache_target_full_ratio = 0.8;
	m = tier__decide_modes(&p, idle, 0.3, 0.5, true, true);
	assert_int_equal(m.flush, TIER_FLUSH_IDLE);
	assert_int_equal(m.evict, TIER_EVICT_IDLE);
	assert_int_equal(m.effort_pct, 0);
	m = tier__decide_modes(&p, idle, 0.41, 0.81, true, true);
	assert_int_equal(m.flush, TIER_FLUSH_LOW);
	assert_int_equal(m.evict, TIER_EVICT_SOME);
	assert_int_equal(m.effort_pct, 10);   /* at least 10% */
	m = tier__decide_modes(&p, idle, 0.61, 0.9, true, true);
	assert_int_equal(m.flush, TIER_FLUSH_HIGH);
	assert_int_equal(m.effort_pct, 50);
	/* hysteresis: high stays high just under its threshold, idle does not jump */
	m = tier__decide_modes(&p, m, 0.59, 0.795, true, true);
	assert_int_equal(m.flush, TIER_FLUSH_HIGH);
	assert_int_equal(m.evict, TIER_EVICT_SOME);
	m = tier__decide_modes(&p, idle, 0.39, 0.795, true, true);
	assert_int_equal(m.flush, TIER_FLUSH_IDLE);
	assert_int_equal(m.evict, TIER_EVICT_IDLE);
	/*
	 * evict "some" stops 0.01 under the target (EVICT_SLOP), not the
	 * flush modes' 0.02: the cache it keeps sits between 0.79 and 0.80,
	 * closer to the usable size an LRU of the same target would fill
	 */
	struct tier__modes some = { .evict = TIER_EVICT_SOME };
	assert_int_equal(tier__decide_modes(&p, some, 0.0, 0.792, true, true).evict,
			 TIER_EVICT_SOME);
	assert_int_equal(tier__decide_modes(&p, some, 0.0, 0.785, true, true).evict,
			 TIER_EVICT_IDLE);
	struct tier__modes low = { .flush = TIER_FLUSH_LOW };
	assert_int_equal(tier__decide_modes(&p, low, 0.385, 0.0, true, true).flush,
			 TIER_FLUSH_LOW);   /* the flush modes keep 0.02 */
	m = tier__decide_modes(&p, idle, 0.1, 1.01, true, true);
	assert_int_equal(m.evict, TIER_EVICT_FULL);
	assert_int_equal(m.effort_pct, 100);
	/* at exactly 100%, where admission closes, full too (it stayed "some") */
	{
		struct tier_params p1 = p;
		p1.cache_target_full_ratio = 1.0;   /* allowed: idle at its target forever before */
		assert_int_equal(tier__decide_modes(&p1, idle, 0.0, 1.0, false, true).evict,
				 TIER_EVICT_FULL);
	}
	assert_int_equal(tier__decide_modes(&p, some, 0.5, 1.0, true, true).evict, TIER_EVICT_FULL);
	assert_int_equal(tier__decide_modes(&p, some, 0.5, 0.999, true, true).evict, TIER_EVICT_SOME);
	{
		struct tier__dstate ds = { .type = TIER_REQ_WRITE, .full = 1.0, .recent = true };
		assert_false(tier__decide_admit(&p, &ds, true));   /* the line admission keeps */
	}
	/* none drains whatever is cached */
	p.cache_mode = TIER_MODE_NONE;
	m = tier__decide_modes(&p, idle, 0.0, 0.0, true, true);
	assert_int_equal(m.flush, TIER_FLUSH_HIGH);
	assert_int_equal(m.evict, TIER_EVICT_FULL);
	m = tier__decide_modes(&p, idle, 0.0, 0.0, false, false);
	assert_int_equal(m.flush, TIER_FLUSH_IDLE);
	assert_int_equal(m.evict, TIER_EVICT_IDLE);
}

static void test_agent_budgets(void **state)
{
	struct tier_params p;
	struct tier__budget_in b = { 0 };

	(void)state;
	tier_params_default(&p);
	p.agent_max_ops = 8;
	p.agent_max_low_ops = 2;
	assert_int_equal(tier__decide_flush_budget(&p, &b), 0);
	b.m.flush = TIER_FLUSH_LOW;
	assert_int_equal(tier__decide_flush_budget(&p, &b), 2);
	b.m.flush = TIER_FLUSH_HIGH;
	assert_int_equal(tier__decide_flush_budget(&p, &b), 8);
	b.base_lat_floor = 1.0;
	b.base_lat_ewma = 3.0;   /* base slow: half in high mode */
	assert_int_equal(tier__decide_flush_budget(&p, &b), 4);
	b.m.flush = TIER_FLUSH_LOW;
	assert_int_equal(tier__decide_flush_budget(&p, &b), 1);
	b.m.evict = TIER_EVICT_FULL;
	b.any_dirty = true;      /* full of dirty objects: flushing makes room */
	assert_int_equal(tier__decide_flush_budget(&p, &b), 8);
	assert_int_equal(tier__decide_evict_budget(&p, &b), 8);
	b.m.evict = TIER_EVICT_SOME;
	b.m.effort_pct = 30;
	assert_int_equal(tier__decide_evict_budget(&p, &b), 3);
	b.m.effort_pct = 1;
	assert_int_equal(tier__decide_evict_budget(&p, &b), 1);
	b.m.evict = TIER_EVICT_IDLE;
	assert_int_equal(tier__decide_evict_budget(&p, &b), 0);
	b.drain_evict = true;
	assert_int_equal(tier__decide_evict_budget(&p, &b), 8);
	assert_int_equal(tier__decide_flush_budget(&p, &b), 8);
}

/*
 * A full cache turning over after a phase change: the agent keeps a
 * quarter of the client requests in flight (at most 4x agent_max_ops);
 * without the phase change, under full, or at queue depths where a quarter
 * is no more than agent_max_ops, the budgets are as before.
 */
static void test_agent_turnover_budgets(void **state)
{
	struct tier_params p;
	struct tier__budget_in b = { 0 };

	(void)state;
	tier_params_default(&p);
	p.agent_max_ops = 4;
	b.m.evict = TIER_EVICT_FULL;
	b.m.effort_pct = 100;
	b.any_dirty = true;
	b.reqs_inflight = 64;
	assert_int_equal(tier__decide_flush_budget(&p, &b), 4);   /* no phase change */
	assert_int_equal(tier__decide_evict_budget(&p, &b), 4);
	b.turnover = true;
	assert_int_equal(tier__decide_flush_budget(&p, &b), 16);
	assert_int_equal(tier__decide_evict_budget(&p, &b), 16);
	b.reqs_inflight = 1000;                                    /* capped at 4x */
	assert_int_equal(tier__decide_flush_budget(&p, &b), 16);
	assert_int_equal(tier__decide_evict_budget(&p, &b), 16);
	b.reqs_inflight = 16;                                      /* QD 16: as before */
	assert_int_equal(tier__decide_flush_budget(&p, &b), 4);
	assert_int_equal(tier__decide_evict_budget(&p, &b), 4);
	b.reqs_inflight = 40;
	assert_int_equal(tier__decide_evict_budget(&p, &b), 10);
	b.any_dirty = false;                                       /* nothing to flush */
	assert_int_equal(tier__decide_flush_budget(&p, &b), 0);
	assert_int_equal(tier__decide_evict_budget(&p, &b), 10);
	b.any_dirty = true;
	b.m.evict = TIER_EVICT_SOME;                               /* only when full */
	b.m.effort_pct = 50;
	assert_int_equal(tier__decide_evict_budget(&p, &b), 2);
	assert_int_equal(tier__decide_flush_budget(&p, &b), 0);
	b.m.flush = TIER_FLUSH_HIGH;
	assert_int_equal(tier__decide_flush_budget(&p, &b), 4);
	b.m.evict = TIER_EVICT_FULL;
	b.m.effort_pct = 100;
	b.reqs_inflight = 64;
	b.drain_evict = true;                                      /* an admin drain: as before */
	assert_int_equal(tier__decide_flush_budget(&p, &b), 4);
	assert_int_equal(tier__decide_evict_budget(&p, &b), 4);
	b.drain_evict = false;
	b.drain_flush = true;
	assert_int_equal(tier__decide_evict_budget(&p, &b), 4);
	b.drain_flush = false;
	p.cache_mode = TIER_MODE_NONE;                             /* draining for none: as before */
	assert_int_equal(tier__decide_evict_budget(&p, &b), 4);
	p.cache_mode = TIER_MODE_WRITEBACK;
	assert_int_equal(tier__decide_evict_budget(&p, &b), 16);
	p.agent_max_ops = 100;                                     /* at most agent_max_ops + 64 */
	b.reqs_inflight = 10000;
	assert_int_equal(tier__decide_flush_budget(&p, &b), 164);
	assert_int_equal(tier__decide_evict_budget(&p, &b), 164);
	p.agent_max_ops = 4;

	/* the phase change: 10 points fewer hits lately than over the long run */
	assert_false(tier__decide_phase_change(0.0, 0.0));
	assert_false(tier__decide_phase_change(0.75, 0.80));
	assert_false(tier__decide_phase_change(0.71, 0.80));
	assert_true(tier__decide_phase_change(0.69, 0.80));
	assert_true(tier__decide_phase_change(0.20, 0.80));
	assert_false(tier__decide_phase_change(0.90, 0.80));       /* hitting more */
	assert_false(tier__decide_phase_change(0.02, 0.05));       /* a load that never hits */
}

static void test_durability_choices(void **state)
{
	(void)state;
	/* creating, new_valid, clean_over, rec_dirty, fua */
	assert_int_equal(tier__decide_cw_flags(false, false, false, false, false), TIER_STORE_F_META);
	assert_int_equal(tier__decide_cw_flags(true, true, false, false, false),
			 TIER_STORE_F_META | TIER_STORE_F_EXCL | TIER_STORE_F_ORDERED);
	assert_int_equal(tier__decide_cw_flags(false, true, false, true, true),
			 TIER_STORE_F_META | TIER_STORE_F_ORDERED | TIER_STORE_F_FUA);
	/* the record may wait only for an overwrite of dirty extents over a known dirty record */
	assert_int_equal(tier__decide_cw_flags(false, false, false, true, false),
			 TIER_STORE_F_META | TIER_STORE_F_LAZY_META);
	for (unsigned m = 0; m < 32; m++) {
		bool cr = m & 1, nv = m & 2, co = m & 4, rd = m & 8, fua = m & 16;
		uint32_t f = tier__decide_cw_flags(cr, nv, co, rd, fua);

		assert_int_equal((f & TIER_STORE_F_LAZY_META) != 0, !cr && !nv && !co && rd && !fua);
		assert_true(f & TIER_STORE_F_META);
	}
	assert_int_equal(tier__decide_promote_read(true, true, true), TIER__PR_BARRIER_FIRST);
	assert_int_equal(tier__decide_promote_read(false, true, false), TIER__PR_FUA);
	assert_int_equal(tier__decide_promote_read(false, false, true), TIER__PR_FUA);
	assert_int_equal(tier__decide_promote_read(false, false, false), TIER__PR_PLAIN);
}

/* The checker tier__obj_kick asserts: each illegal combination is named. */
static void test_obj_check(void **state)
{
	struct tier_engine *e = calloc(1, sizeof(*e));
	struct { struct tier__obj o; uint64_t bits[2]; } ob;   /* an entry, its bitmaps behind it */
	struct tier__obj *op = &ob.o;
	struct tier__ext hint;
	uint64_t *bits = ob.bits;

	(void)state;
	assert_non_null(e);
	memset(&ob, 0, sizeof(ob));
	assert_null(tier__obj_check(e, op));
	op->state = TIER__CLEAN;
	op->flags = TIER__OF_EVICTING;
	assert_null(tier__obj_check(e, op));
	op->flags |= TIER__OF_FLUSHING;
	assert_non_null(tier__obj_check(e, op));
	op->state = TIER__CLEAN;
	op->flags = TIER__OF_PROMOTING;
	assert_non_null(tier__obj_check(e, op));
	op->flags = TIER__OF_FLUSHING;
	assert_non_null(tier__obj_check(e, op));     /* FLUSHING a CLEAN copy */
	op->state = TIER__DIRTY;
	assert_null(tier__obj_check(e, op));
	op->flags = TIER__OF_STALE;
	assert_non_null(tier__obj_check(e, op));
	op->state = TIER__ABSENT;
	assert_null(tier__obj_check(e, op));
	op->flags = TIER__OF_VUNK;
	assert_non_null(tier__obj_check(e, op));
	op->flags = TIER__OF_PQUEUED;
	assert_non_null(tier__obj_check(e, op));     /* no hint queued */
	memset(&hint, 0, sizeof(hint));
	hint.type = TIER_REQ_CACHE;
	op->qhead = &hint;
	assert_null(tier__obj_check(e, op));
	op->qhead = NULL;
	op->flags = 0;
	op->nproxy = 1;
	assert_non_null(tier__obj_check(e, op));
	op->nrun = 1;
	assert_null(tier__obj_check(e, op));
	op->nrun = op->nproxy = 0;
	op->state = 7;
	assert_non_null(tier__obj_check(e, op));
	/* bitmaps */
	op->state = TIER__DIRTY;
	op->flags |= TIER__OF_BITS;   /* bitmaps present */
	assert_non_null(tier__obj_check(e, op));     /* object mode */
	e->nwords = 1;
	bits[0] = 1;
	bits[1] = 2;                                 /* dirty, not valid */
	assert_non_null(tier__obj_check(e, op));
	bits[1] = 1;
	assert_null(tier__obj_check(e, op));
	op->state = TIER__CLEAN;
	assert_non_null(tier__obj_check(e, op));
	bits[1] = 0;
	assert_null(tier__obj_check(e, op));
	op->state = TIER__DIRTY;
	assert_non_null(tier__obj_check(e, op));     /* DIRTY, nothing dirty */
	op->state = TIER__ABSENT;
	assert_non_null(tier__obj_check(e, op));
	op->flags = TIER__OF_BITS | TIER__OF_EXCL;                     /* a write creating it */
	assert_null(tier__obj_check(e, op));
	op->flags = TIER__OF_BITS | TIER__OF_FILLING;                  /* a fill of an ABSENT object */
	assert_non_null(tier__obj_check(e, op));
	op->state = TIER__DIRTY;
	bits[1] = 1;
	assert_null(tier__obj_check(e, op));
	op->flags = TIER__OF_BITS | TIER__OF_FILLING | TIER__OF_FLUSHING | TIER__OF_FILL_READY;
	assert_null(tier__obj_check(e, op));
	op->flags = TIER__OF_BITS | TIER__OF_FILLING | TIER__OF_EVICTING;
	assert_non_null(tier__obj_check(e, op));
	op->flags = TIER__OF_BITS | TIER__OF_FILL_READY;               /* without a fill */
	assert_non_null(tier__obj_check(e, op));
	op->flags = TIER__OF_BITS | TIER__OF_FQUEUED;                  /* no fill hint queued */
	assert_non_null(tier__obj_check(e, op));
	hint.type = TIER__REQ_FILL;
	op->qhead = &hint;
	assert_null(tier__obj_check(e, op));
	op->flags = TIER__OF_BITS;                                     /* a fill hint without the flag */
	assert_non_null(tier__obj_check(e, op));
	op->flags = TIER__OF_FILLING;                                  /* no bitmaps */
	op->qhead = NULL;
	assert_non_null(tier__obj_check(e, op));
	free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_route_table),
		cmocka_unit_test(test_route_sweep),
		cmocka_unit_test(test_fill_choice),
		cmocka_unit_test(test_admit_when_room),
		cmocka_unit_test(test_delayed_hit),
		cmocka_unit_test(test_fill_budget),
		cmocka_unit_test(test_agent_choice),
		cmocka_unit_test(test_agent_modes),
		cmocka_unit_test(test_flush_how),
		cmocka_unit_test(test_evict_how),
		cmocka_unit_test(test_agent_budgets),
		cmocka_unit_test(test_agent_turnover_budgets),
		cmocka_unit_test(test_durability_choices),
		cmocka_unit_test(test_obj_check),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
