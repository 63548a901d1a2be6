/* SPDX-License-Identifier: MIT */
/*
 * tier/engine.h - the libtier engine: images over a base and a cache pool.
 *
 * An engine owns the object map, hitsets, promotion throttles and the
 * flush/evict agent for a pair of stores.  It is a single-threaded state
 * machine: every call below, and every store completion (tier_cq_drain),
 * happens on one thread, the owner's.  It never blocks, never prints (it logs
 * through the callback) and reads time only through opts.clock.
 */
#ifndef TIER_ENGINE_H
#define TIER_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tier/params.h"
#include "tier/stats.h"
#include "tier/store.h"

#ifdef __cplusplus
extern "C" {
#endif

enum tier_log_level { TIER_LOG_ERROR = 0, TIER_LOG_WARN, TIER_LOG_INFO, TIER_LOG_DEBUG };
typedef void (*tier_log_fn)(void *arg, enum tier_log_level lvl, const char *msg);
typedef uint64_t (*tier_clock_fn)(void *arg);   /* monotonic nanoseconds */

/*
 * A failure worth an operator's attention, with its fields apart (libtier/
 * log.c): a client-visible error, a failed flush, promote, evict or fill.
 * msg is the whole line (it names the same fields); the others may be NULL
 * (err 0).  Valid only during the call.  These are rate-limited per op: at
 * most TIER_LOG_BURST lines per op in TIER_LOG_WINDOW_MS, then one line
 * saying how many were suppressed.
 */
struct tier_log_rec {
	enum tier_log_level lvl;
	const char *msg;
	const char *op;        /* "read", "write", "trim", "write_zeroes", "flush",
				  "promote", "evict", "fill", "block_status" */
	const char *image;
	const char *object;    /* the object's name in its pool */
	const char *pool;      /* the pool's name */
	int err;               /* positive errno */
};
typedef void (*tier_log_rec_fn)(void *arg, const struct tier_log_rec *rec);
#define TIER_LOG_BURST      10
#define TIER_LOG_WINDOW_MS  10000
/* "EIO", "ENOSPC"... for err or -err; "E?" for an unknown value. */
const char *tier_errno_name(int err);

struct tier_engine;
struct tier_image;

struct tier_engine_opts {
	struct tier_store *base;     /* not owned */
	struct tier_store *cache;    /* not owned */
	struct tier_params params;
	tier_log_fn log;             /* may be NULL */
	void *log_arg;
	tier_clock_fn clock;         /* NULL = CLOCK_MONOTONIC */
	void *clock_arg;
	/* Failures as records (same log_arg); NULL: their msg goes to log. */
	tier_log_rec_fn log_rec;
	/* The hitset archives are "tier.hitset.<tag>.<seq>" (NULL: "tier.hitset.<seq>"):
	 * each tierd sharing a cache pool keeps its own.  [A-Za-z0-9_-], <= 64. */
	const char *hitset_tag;
};

/* -EINVAL (bad params, missing store), -ENOMEM.  *out NULL on failure. */
int tier_engine_create(const struct tier_engine_opts *o, struct tier_engine **out);
/* @pre no request in flight (see tier_engine_idle). NULL ok. */
void tier_engine_destroy(struct tier_engine *e);

/* Live tuning; object_size/extent_size must not change (-EINVAL). */
int tier_engine_set_params(struct tier_engine *e, const struct tier_params *p);
const struct tier_params *tier_engine_params(const struct tier_engine *e);
/*
 * Whether the engine formats DEBUG messages: why each request took its
 * route, why the agent passed over an object.  Off by default (they cost a
 * format per request); the daemon turns it on with log_level = debug.
 */
void tier_engine_set_debug(struct tier_engine *e, bool on);

/*
 * Run the agent (flush/evict), rotate/archive hitsets, refill throttles.
 * Call it whenever a timer fires and after draining completions.  Returns the
 * number of ms after which it wants to be called again (>= 1).
 */
uint64_t tier_engine_tick(struct tier_engine *e);
/* true when no client request, promotion, flush or evict is in flight. */
bool tier_engine_idle(const struct tier_engine *e);
/*
 * Shutdown: the agent starts no more flushes or evictions (what runs
 * finishes), so that the engine becomes idle even while the cache is over
 * its dirty or full targets.  Dirty data stays in the cache pool, durable,
 * for the next start.  Not undone.
 */
void tier_engine_quiesce(struct tier_engine *e);

/* ---- images ---- */
struct tier_image_opts {
	const char *name;           /* export name */
	const char *object_prefix;  /* object names are "<prefix>.%016llx" */
	uint64_t size;              /* bytes */
	bool read_only;
	bool standby;               /* another daemon owns it: open parked (no rebuild) */
};
/*
 * Open an image; starts the rebuild of its cached objects from the cache
 * pool listing.  Requests submitted before tier_image_ready() are queued.
 * -EINVAL, -EEXIST (name in use), -ENOMEM.
 */
int tier_image_open(struct tier_engine *e, const struct tier_image_opts *o,
		    struct tier_image **out);
/* 1 loaded, 0 loading, -errno if the rebuild failed. */
int tier_image_ready(const struct tier_image *img);
/* @pre no request in flight on it. NULL ok. */
void tier_image_close(struct tier_image *img);
/*
 * Handing an image to another daemon (docs/DURABILITY.md "Handoff, takeover
 * and fencing").  tier_image_park: the image stops: its map entries go (now,
 * or when the job on them ends), the agent leaves it, and requests submitted
 * from now on wait (as while it loads) until tier_image_load.  The requests
 * already waiting fail with `pending_err` (0 keeps them waiting).  Pieces,
 * promotions, fills, flushes and evictions in flight finish: the image is
 * parked once tier_image_parked() says so, and only then may another daemon
 * write its objects.  tier_image_load: rebuild the map from the cache pool
 * and serve what waits.  An image opened with `standby` starts parked.
 * tier_image_fail_pending fails the requests waiting on a parked image.
 * -EINVAL (closed image; load: not parked or still draining).
 */
int tier_image_park(struct tier_image *img, int pending_err);
/* 1 parked and drained (nothing in flight on it), 0 draining or serving. */
int tier_image_parked(const struct tier_image *img);
int tier_image_load(struct tier_image *img);
size_t tier_image_waiting(const struct tier_image *img);
void tier_image_fail_pending(struct tier_image *img, int err);
/* Fenced: parked for good; what waits and every later request fail with err. */
int tier_image_stop(struct tier_image *img, int err);
/* Parked (standby, handed off or fenced): not serving from this daemon. */
bool tier_image_is_parked(const struct tier_image *img);
struct tier_image *tier_engine_find_image(struct tier_engine *e, const char *name);
/* Fill up to max images (open order); returns how many are open. */
size_t tier_engine_images(struct tier_engine *e, struct tier_image **arr, size_t max);
const char *tier_image_name(const struct tier_image *img);
/* Read-only now (opened so, or set since): writes, trims and zeroes fail with EROFS. */
bool tier_image_read_only(const struct tier_image *img);
/* Live: requests already queued are not affected; later writes are refused when ro. */
void tier_image_set_read_only(struct tier_image *img, bool ro);
uint64_t tier_image_size(const struct tier_image *img);

/* ---- requests ---- */
enum tier_req_type {
	TIER_REQ_READ = 0,
	TIER_REQ_WRITE,
	TIER_REQ_TRIM,
	TIER_REQ_WRITE_ZEROES,
	TIER_REQ_FLUSH,   /* make every acknowledged write durable */
	TIER_REQ_CACHE,   /* promote hint */
	TIER_REQ_TYPE_MAX
};
/*
 * FAST_ZERO (WRITE_ZEROES only): fail with -ENOTSUP, touching nothing,
 * rather than zero by writing data (NBD's NBD_CMD_FLAG_FAST_ZERO): in
 * extent mode, a range not on extent boundaries may need its edge extents
 * read from base and written whole.
 */
enum { TIER_REQ_F_FUA = 1u << 0, TIER_REQ_F_FAST_ZERO = 1u << 1 };

struct tier_request;
typedef void (*tier_request_cb)(struct tier_request *req, int result);

/* Owned by the caller from submit until cb returns. */
struct tier_request {
	enum tier_req_type type;
	uint32_t flags;
	uint64_t off, len;
	void *buf;            /* READ: filled; WRITE: source; else NULL */
	tier_request_cb cb;
	void *priv;
	/* engine private */
	uint32_t pending;
	int first_err;
	uint64_t t_start_ns;
	struct tier_image *img;   /* counted on (latency, errors) at completion */
	struct tier_request *next;
};

/*
 * Submit; cb runs later (never inside this call) with 0 or -errno:
 * -EIO (base pool failure), -EROFS, -ENOSPC.  Returns -EINVAL (range past
 * the image end, len 0 for data ops, unknown type) and then cb will NOT run.
 */
int tier_image_submit(struct tier_image *img, struct tier_request *req);

/* ---- block status (libtier/status.c) ---- */
enum {
	TIER_EXTENT_HOLE = 1u << 0,  /* in neither pool: no cache copy, no base object */
	TIER_EXTENT_ZERO = 1u << 1,  /* reads as zeros */
};
struct tier_extent {
	uint64_t len;
	uint32_t flags;              /* TIER_EXTENT_*; 0 = data (or cannot tell) */
};
/* ext[0..n) covers [off, off + sum of lengths), consecutive; valid during the call. */
typedef void (*tier_block_status_cb)(void *arg, int result, const struct tier_extent *ext,
				     size_t n);
#define TIER_BLOCK_STATUS_MAX_OBJS 256   /* objects one call looks at */
/*
 * Which parts of [off, off+len) hold data.  The answer starts at off and
 * may stop short of off+len (at most TIER_BLOCK_STATUS_MAX_OBJS objects);
 * adjacent extents with the same flags are merged.  A hole is reported only
 * for an object the map does not know whose base object is absent (or past
 * the base object's end); everything uncertain is data.  A write
 * acknowledged before this call is never hidden in a hole; one racing with
 * it may or may not be seen.  cb runs later, never inside this call, with
 * result 0.  Returns -EINVAL (len 0, range past the end, closed image, no
 * cb) or -ENOMEM, and then cb will NOT run.
 */
int tier_image_block_status(struct tier_image *img, uint64_t off, uint64_t len,
			    tier_block_status_cb cb, void *arg);

/* ---- admin ---- */
/* Flush (and for evict also drop) every cached object of img (NULL = all images).
 * Progress through tier_engine_get_stats' dirty/cached counts. */
int tier_engine_flush_all(struct tier_engine *e, struct tier_image *img);
int tier_engine_evict_all(struct tier_engine *e, struct tier_image *img);
/* Promote the objects covering [off, off+len) regardless of recency. */
int tier_engine_promote(struct tier_engine *e, struct tier_image *img,
			uint64_t off, uint64_t len);
void tier_engine_get_stats(const struct tier_engine *e, struct tier_stats *out);
/*
 * The counters of one image (requests, hits and misses, errors, latencies,
 * promotions, fills, flushes and evictions of its objects) and its share of
 * the cache (cached/dirty objects and bytes).  The engine-wide gauges (agent
 * modes, ratios, in flight) and the engine's own counters (cache_errors,
 * syncs, sync_errors, hitset_archives, agent_skip_*) are 0 here.
 */
void tier_image_get_stats(const struct tier_image *img, struct tier_stats *out);
/*
 * Close the current hitset and archive it into the cache pool now (for
 * shutdown: call, then wait for tier_engine_idle).  0 once the write is
 * submitted; -EBUSY while the archive is still loading, -ENOMEM.
 */
int tier_engine_archive_hitsets(struct tier_engine *e);
/*
 * One hitset (bloom filter) as the engine sees it; plain data, no pointers.
 * fill = bits_set / bits and the estimated false-positive rate fill^k are
 * the reader's to derive.
 */
#define TIER_HITSET_MAX_SETS 65   /* the current set + hit_set_count <= 64 archived */
struct tier_hitset_info {
	int set;              /* -1 = the current (open) set, else archived, 0 = newest */
	uint64_t start_ms;    /* engine clock, ms */
	uint64_t end_ms;      /* 0 for the current set (still open) */
	uint64_t inserts;     /* every insert, repeats included */
	uint64_t unique;      /* estimated distinct keys (from the bits set) */
	uint64_t capacity;    /* expected inserts the filter was sized for */
	uint64_t bits;        /* filter size */
	uint64_t bits_set;
	unsigned k;           /* hash functions */
	double fpp;           /* target false-positive rate */
};
/*
 * Describe the hitsets: out[0] the current set, then the archived ones,
 * newest first; at most max entries are written.  The caller owns out; the
 * engine keeps no pointer into it and allocates nothing.  Returns how many
 * sets there are (1 to TIER_HITSET_MAX_SETS, possibly more than max);
 * -EINVAL if max > 0 and out is NULL.
 */
int tier_engine_hitset_info(const struct tier_engine *e, struct tier_hitset_info *out,
			    size_t max);
/*
 * Bytes of engine memory per cached object (measured, all of it: the object
 * map's slab and bucket heads, the eviction policy's nodes and ghosts, the
 * admission sketch), for reports.
 */
size_t tier_engine_bytes_per_object(const struct tier_engine *e);
/* Of it, the eviction policy (nodes and ghosts) and the admission sketch. */
size_t tier_engine_policy_bytes_per_object(const struct tier_engine *e);

/* ---- stranded cache objects (libtier/stranded.c) ----
 *
 * Cache-pool objects that belong to no configured image, or lie past the end
 * of one, are "stranded": the engine never flushes, evicts or counts them, and
 * an image opened later under their prefix would adopt them (stale).  These
 * helpers find and resolve them before an engine serves the pool, or from an
 * offline tool.  Unlike the engine they BLOCK: they submit ops and wait on
 * cq (tier_cq_wait/tier_cq_drain) until done, running any other completion
 * queued there too.  Names starting with "tier." (hitset archives, barriers)
 * and names that are not "<prefix>.<16 lowercase hex>" are never stranded.
 */
struct tier_stranded_image {
	const char *name;            /* export name (reports only) */
	const char *object_prefix;
	uint64_t size;               /* bytes */
};

struct tier_stranded_obj {
	char oid[TIER_OID_MAX];
	uint64_t objno;
	uint64_t version;            /* store version at the scan (guards the remove) */
	uint64_t size;               /* bytes of the cache object */
	uint64_t dirty_bytes;        /* data only this copy holds (0 = clean) */
	uint32_t object_size;        /* from tier.meta (0 if bad_meta) */
	uint32_t extent_size, nbits; /* extent mode (from tier.meta), else 0 */
	uint64_t *dirty_bits;        /* extent mode and dirty: the dirty bitmap */
	bool dirty;
	bool bad_meta;               /* missing/malformed/incomplete: holds no acknowledged write */
	bool done;                   /* resolved (removed, or flushed and removed) */
};

struct tier_stranded_group {     /* the objects of one prefix */
	char prefix[TIER_OID_MAX];
	const char *image;           /* configured image it lies past the end of, or NULL */
	uint64_t image_size;         /* that image's size */
	size_t first, n;             /* objs[first .. first+n) */
	uint64_t n_dirty, dirty_bytes, n_clean;   /* n_clean includes bad_meta ones */
};

struct tier_stranded_report {
	struct tier_stranded_obj *objs;
	size_t n_objs;
	struct tier_stranded_group *groups;
	size_t n_groups;
	uint64_t n_dirty, dirty_bytes;
	size_t n_ignored;            /* other names (not image data), left alone */
};

/*
 * List the cache pool and STAT every stranded candidate.  object_size is the
 * configured one (an image's extent).  0, -ENOMEM, or a store error (-EIO...).
 */
int tier_stranded_scan(struct tier_store *cache, struct tier_cq *cq, uint64_t object_size,
		       const struct tier_stranded_image *imgs, size_t n_imgs,
		       struct tier_stranded_report **out);
void tier_stranded_free(struct tier_stranded_report *r);
/* Leave group gi's objects alone (another tierd's image): out of the report,
 * counted in n_ignored. */
void tier_stranded_drop_group(struct tier_stranded_report *r, size_t gi);

enum tier_stranded_action {
	TIER_STRANDED_CLEAN,   /* remove clean (and bad-meta) objects only; dirty ones stay */
	TIER_STRANDED_FLUSH,   /* write dirty data to base (FUA), then remove everything */
	TIER_STRANDED_DROP,    /* remove everything, dirty data included */
};

struct tier_stranded_result {
	uint64_t removed;             /* cache objects removed (all kinds) */
	uint64_t flushed, flushed_bytes;
	uint64_t dropped_dirty, dropped_dirty_bytes;
	uint64_t failed;              /* objects left in place after an error */
};

/*
 * Carry out action on every object of r (base may be NULL unless FLUSH).
 * Flush of a dirty object: read its dirty data (in extent mode only the
 * dirty extents, from its bitmap) from the cache, write it to base with the
 * last write FUA, and only then remove the cache copy, guarded by the version
 * seen at the scan.  The removes end with a FUA barrier on the cache pool, so
 * a power cut cannot bring back a removed stale copy.  Marks objects done,
 * logs each (INFO) and errors (ERROR) through log.  Returns 0, or the first
 * error (-ECANCELED: an object changed since the scan); out is filled anyway.
 */
int tier_stranded_resolve(struct tier_store *base, struct tier_store *cache, struct tier_cq *cq,
			  struct tier_stranded_report *r, enum tier_stranded_action action,
			  tier_log_fn log, void *log_arg, struct tier_stranded_result *out);

#ifdef __cplusplus
}
#endif
#endif
