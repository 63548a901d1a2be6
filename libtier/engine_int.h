/* SPDX-License-Identifier: MIT */
/*
 * libtier/engine_int.h (internal) - the engine's shared structures: object
 * map entries, per-object extents of client requests, background jobs, and
 * the engine and image instances.  Only the engine's own files include it.
 *
 * Object key: ((uint64_t)image_id << 44) | objno, image_id a 20-bit hash of
 * the image's object prefix (stable across restarts, so archived hitsets
 * still match), made unique among open images by probing.
 */
#ifndef TIER_ENGINE_INT_H
#define TIER_ENGINE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tier/engine.h"
#include "tier/meta.h"
#include "libtier/hitset.h"
#include "libtier/policy.h"

#define TIER__OBJNO_BITS 44
#define TIER__ID_BITS    20
#define TIER__KEY(id, objno) (((uint64_t)(id) << TIER__OBJNO_BITS) | (uint64_t)(objno))
#define TIER__KEY_OBJNO(k)   ((k) & ((1ull << TIER__OBJNO_BITS) - 1))
#define TIER__KEY_ID(k)      ((uint32_t)((k) >> TIER__OBJNO_BITS))

/* Stable state of an object's cache copy. */
enum { TIER__ABSENT = 0, TIER__CLEAN, TIER__DIRTY };

/* Transient flags (the PROMOTING/FLUSHING/EVICTING states and bookkeeping). */
enum {
	TIER__OF_PROMOTING = 1u << 0,
	TIER__OF_FLUSHING  = 1u << 1,
	TIER__OF_EVICTING  = 1u << 2,
	TIER__OF_EXCL      = 1u << 3,  /* an exclusive op (cache write, drop) runs */
	TIER__OF_VUNK      = 1u << 4,  /* store version uncertain (failed write) */
	TIER__OF_PQUEUED   = 1u << 5,  /* a promotion is queued */
	TIER__OF_UNSYNC_C  = 1u << 6,  /* cache copy written without FUA since last sync */
	TIER__OF_UNSYNC_B  = 1u << 7,  /* base object written without FUA since last sync */
	TIER__OF_STALE     = 1u << 8,  /* a cache object may exist while ABSENT */
	TIER__OF_HOT       = 1u << 9,  /* written during its last flush: agent skips it */
	TIER__OF_EVICT_AFTER_FLUSH = 1u << 10,  /* evicting a dirty copy: flush, then evict */
	TIER__OF_FQUEUED   = 1u << 11, /* a fill hint is queued (hint.c queue_fill) */
	TIER__OF_FILLING   = 1u << 12, /* a fill job runs (fill.c) */
	TIER__OF_FILL_READY = 1u << 13, /* its base data is in: it lands once the object is quiet */
	TIER__OF_BITS      = 1u << 14, /* the bitmaps behind the entry hold its extents */
	TIER__OF_SHORT     = 1u << 15, /* the image's last object, cut short (tier__obj_len) */
};

/* The internal piece type of a fill hint (after the public enum tier_req_type). */
#define TIER__REQ_FILL TIER_REQ_TYPE_MAX

struct tier__ext;
struct tier__sync_wait;

/* Failure lines per op (log.c): the rate limit's window. */
enum { TIER__EL_READ = 0, TIER__EL_WRITE, TIER__EL_TRIM, TIER__EL_ZEROES, TIER__EL_FLUSH,
       TIER__EL_CACHE, TIER__EL_PROMOTE, TIER__EL_EVICT, TIER__EL_FILL,
       TIER__EL_BLOCK_STATUS, TIER__EL_N };
struct tier__elog {
	uint64_t start_ms;
	uint32_t lines;
	uint64_t suppressed;
};

/*
 * One object of the map: 40 bytes, in the engine's slab (objmap.c) with its
 * bitmaps right behind it (valid and dirty, nwords words each, and when the
 * engine was created in extent mode the reference bits of evict_ext.c: 24
 * bytes an object at up to 64 extents), chained by 32-bit slab indices.  Entries
 * never move, so pointers to them stay valid until tier__obj_release.  Its
 * length in the image is the object size but for a short last object
 * (TIER__OF_SHORT, tier__obj_len); the eviction policy's node lives in the
 * policy, by the entry's slab index (tier__obj_handle).
 */
struct tier__obj {
	uint64_t key;
	uint64_t version;        /* last version the store acknowledged */
	struct tier__ext *qhead; /* ops waiting, arrival order */
	uint32_t mtime_ms;       /* last write (or promotion): the engine's ms clock, low 32
				    bits (tier__obj_age_ms: exact up to 49 days) */
	uint32_t hnext;          /* hash chain: slab index + 1 of the next entry, 0: none */
	uint16_t flags;
	uint16_t nrun;           /* shared ops running (reads, proxied writes) */
	uint16_t nproxy;         /* of them: writes, trims, zeroes of extents no copy holds
				    (over target on a copy; any while ABSENT): the rest read */
	uint8_t state;
	uint8_t nsync;           /* sync jobs in flight (255: stuck there, see sync_one) */
};

/*
 * valid[nwords], dirty[nwords], then (e->refbits) ref[nwords]: extents read
 * or written while valid since the agent last looked (evict_ext.c, memory
 * only); or NULL (whole object, or none yet).
 */
static inline uint64_t *tier__obj_bits(const struct tier__obj *o)
{
	return (o->flags & TIER__OF_BITS) ? (uint64_t *)(void *)(uintptr_t)(o + 1) : NULL;
}

/* One per-object piece of a request (or an internal promotion hint). */
struct tier__ext {
	struct tier__ext *next;
	struct tier_engine *e;
	struct tier_image *img;
	struct tier__obj *obj;
	struct tier_request *req;  /* NULL: internal */
	char *buf;                 /* request data for this piece */
	uint32_t off, len;         /* within the object */
	uint8_t type;              /* enum tier_req_type */
	uint8_t nocache;           /* cache failed: route to base */
	uint8_t step;
	uint8_t tries;
	uint8_t seen;              /* hitset access recorded */
	uint8_t fill;              /* extent write needs a base fill */
	uint8_t rfill;             /* read: its base data feeds a read fill (2: FUA reads, 3: ENOENT) */
	uint32_t pos;              /* progress in multi-op reads */
	uint32_t s, t;             /* cache write span (extent fills) */
	uint64_t new_version;
	uint64_t t_base;           /* engine clock at the last base submit */
	uint64_t resv;             /* bytes reserved against the target (admitted, not cached) */
	uint8_t resv_obj;          /* and one object of target_max_objects */
	void *bounce;
	uint64_t *nbits;           /* new bitmaps (extent mode), in ext storage */
	struct tier_store_op op;
	uint8_t mem[];             /* meta, pre_meta, new bitmaps */
};

enum tier__job_kind { TIER__J_PROMOTE = 1, TIER__J_FLUSH, TIER__J_EVICT, TIER__J_SYNC,
		      TIER__J_REBUILD, TIER__J_HITSET, TIER__J_FILL };

/* A background operation: promotion, flush, evict, sync, rebuild stat, hitsets. */
struct tier__job {
	struct tier_engine *e;
	struct tier_image *img;
	struct tier__obj *obj;
	struct tier__ext *waiter;       /* promotion: the hint waiting for it */
	struct tier_request *req;       /* sync: the FLUSH request */
	int kind, step, err;
	uint64_t version;               /* flush: the version its SETMETA guards */
	uint64_t objno;                 /* rebuild: the object being looked at */
	uint64_t t_base;                /* engine clock at the last base submit */
	void *buf;
	bool obuf;                      /* buf came from tier__obuf_get */
	uint32_t boff;                  /* fill: the object offset buf[0] holds (a buffer
					   sized to the fill: tier__job_buf) */
	uint64_t len;                   /* promote: bytes copied; hitset load: archive size */
	struct tier_store_op *ops;      /* fan-out (flush runs, syncs) */
	size_t nops, npending;
	size_t hs_next;                 /* hitset load: index in e->hs_names being read */
	uint64_t *snap;                 /* flush: dirty snapshot, re-dirtied, new dirty;
					   rebuild: the decoded valid, then dirty bitmaps;
					   fill: extents read from base, to write, new valid */
	bool redirtied;                 /* flush: a cache write started during it */
	bool cold;                      /* flush: only dirty extents not referenced (evict_ext.c) */
	bool rf_create;                 /* read fill of an ABSENT object: a new copy (PROMOTING) */
	uint64_t t_start_ms;
	struct tier__job *fnext;        /* flush/sync: the engine's list of those in flight */
	struct tier__job *fprev;        /* sync: the list is doubly linked (O(1) removal) */
	uint64_t seq;                   /* sync: its number, in start order */
	uint64_t sync_key;              /* sync: the object synced (0 flags: a barrier) */
	uint16_t sync_flags;            /* sync: the UNSYNC flags it covers */
	uint64_t ops_gen[2];            /* remove barrier: rm_gen covered, per pool */
	struct tier_store_op op;
	uint8_t meta[];                 /* TIER_META_MAX: meta; rebuild: the LIST prefix;
					   sync: the bytes of its FUA reads */
};

struct tier_image {
	struct tier_engine *e;
	char *name;
	char *prefix;
	uint64_t size;
	uint64_t nobjs;
	uint64_t n_cached, n_dirty;     /* this image's share of the engine's counts */
	uint64_t cached_bytes, dirty_bytes;
	struct tier_stats st;           /* this image's counters (tier__count) */
	uint32_t id;
	bool ro;
	bool closed;
	bool parked;                    /* handed off or standby: no map, requests wait */
	int stopped;                    /* fenced (tier_image_stop): every request fails so */
	int ready;                      /* 1 loaded, 0 loading or parked, -errno */
	uint64_t reqs;                  /* requests dispatched and not yet delivered */
	uint64_t jobs;                  /* jobs in flight on it (tier__job_new) */
	size_t n_pend;                  /* requests waiting in pend_head */
	uint64_t n_entries;             /* map entries of its objects */
	struct tier_request *pend_head, *pend_tail;
	char **names;                   /* rebuild listing */
	size_t n_names, next_name, rb_inflight;  /* rb_inflight: LIST, SCAN pages, STATs,
						    probes and discards in flight */
	uint64_t *known;                /* loading (lazily): objects whose map entry, or its
					   absence, is decided; NULL: loaded, or not lazy */
	uint64_t *probing;              /* loading: a probe or a discard in flight decides */
	uint32_t n_probes;              /* probes in flight */
	uint32_t probe_errs;            /* probes failed in a row (LAZY_PROBE_TRIES) */
	uint64_t load_probes;           /* probes of this load */
	uint64_t t_load_ns;             /* engine clock when the load started */
};

struct tier_engine {
	struct tier_engine_opts o;
	struct tier_params p;
	struct tier_store *base, *cache;
	struct tier_image **imgs;       /* every image ever opened (closed ones kept) */
	size_t n_imgs, cap_imgs;

	uint32_t *ht;                   /* bucket heads: slab index + 1, 0: empty */
	size_t ht_mask, n_objs;
	uint64_t obj_mem;               /* bytes of the slab's chunks (entries and bitmaps) */
	char **slab;                    /* chunks of TIER__SLAB_CHUNK entries of obj_size bytes */
	size_t n_slab, cap_slab;
	size_t obj_size;                /* an entry and its bitmaps */
	uint32_t slab_used;             /* entries ever handed out */
	uint32_t free_obj;              /* free entries, chained by hnext: index + 1 */
	bool sync_cache, sync_base;     /* pools whose acks are not durable (local) */
	void *obufs[16];                /* free object-size buffers (promote, flush) */
	size_t n_obufs;
	uint32_t nbits;                 /* extents per object */
	size_t nwords;
	bool refbits;                   /* entries carry reference bits (extent mode at create) */
	uint32_t evict_hand;            /* evict_extents = 2: the clock hand, a slab index + 1 */
	uint32_t flush_hand;            /* evict_extents = 2: the flush hand, the same */
	uint32_t flush_hand_idle;       /* its visits since it last started a cold flush */
	bool quiesced;                  /* tier_engine_quiesce: the agent starts nothing */
	size_t meta_cap;                /* encoded meta size (extent mode) */

	uint64_t n_cached, cached_bytes, n_dirty, dirty_bytes;
	uint64_t n_promoting, promoting_bytes;   /* admitted, not yet cached */
	uint64_t n_resv, resv_bytes;    /* admitted: queued promotions, new extents in flight */
	struct tier__job *flushes;      /* flush jobs in flight */
	struct tier__job *fills;        /* fill jobs in flight (fnext) */
	struct tier__job *syncs, *syncs_tail;   /* sync jobs in flight, by seq */
	uint64_t sync_seq;              /* number of the last sync job started */
	struct tier__sync_wait *sync_waits, *sync_waits_tail;   /* FLUSHes, by seq */
	/*
	 * Non-FUA removes (evict, drops, whole-object trims) per pool [cache,
	 * base] and how many of them a completed directory barrier covers:
	 * a FLUSH issues a barrier on every pool where the two differ.
	 */
	uint64_t rm_gen[2], rm_synced[2];
	struct tier__hot { uint64_t key, until_ms; } *hot;   /* TIER__OF_HOT objects */
	size_t n_hot, cap_hot;
	struct tier__hitsets *hs;
	struct tier__policy *pol;
	struct tier__policy_host pol_host;   /* the object map, for the policy (objmap.c) */
	struct tier__sketch *sk;        /* admission = tinylfu: access frequencies (NULL before) */
	uint64_t sk_objects;            /* the sketch's width in objects (fixed at create) */
	struct tier_stats st;

	double tb_bytes, tb_objs;       /* promotion token buckets */
	double fb_bytes;                /* extent mode: the fills' cache-write budget (promote.c) */
	struct tier__stream { uint64_t key; uint32_t end; } streams[16];   /* the last reads'
					   ends: a read starting at one continues it (read.c) */
	unsigned stream_next;
	uint64_t tb_last_ns;
	uint64_t degraded_until_ms;
	uint64_t cache_down_until_ms;   /* cache ops timed out: fail fast (engine.c; route.c) */
	uint64_t probe_next_ms;         /* while down: when to ask the pool again */
	bool probe_busy;
	struct tier_store_op probe_op;  /* a STAT that tells when the pool answers again */

	int flush_mode, evict_mode;
	unsigned effort_pct;
	uint64_t agent_flushing, agent_evicting;
	uint64_t agent_pause_until_ms;  /* after a failed flush/evict */
	double base_lat_ewma, base_lat_floor;
	struct tier_image *drain_img;   /* admin flush/evict target */
	bool drain_flush, drain_evict, drain_all;

	struct tier_request *done_head, *done_tail;
	bool delivering;
	bool kick_busy;
	struct tier_store_op kick_op;   /* wakes the owner for completions without I/O */
	int in_submit;                  /* no callbacks while > 0 */
	bool debug;                     /* format DEBUG messages (route traces) */
	uint64_t reqs_inflight, jobs_inflight, exts_inflight;
	/*
	 * The hit ratio of the counted requests, averaged over about 1024 and
	 * 32768 of them (tier__agent_note_hit); after a phase change the agent
	 * hurries until the evictions reach turnover_until (evicted bytes) or
	 * the cache has room again (evict mode idle).
	 */
	double hit_fast, hit_slow;
	uint64_t turnover_until;

	struct tier__ext *free_ext;
	void **chunks;
	size_t n_chunks;
	size_t ext_size;

	uint64_t *unsync;               /* keys with an UNSYNC flag */
	size_t n_unsync, cap_unsync;
	bool unsync_lost;               /* a key could not be listed: rebuild from the map */
	uint64_t sync_bg_pause_until_ms; /* background syncs rest after a failure */

	uint64_t hs_seq;
	char hs_prefix[96];             /* "tier.hitset." [tag "."] */
	char **hs_names;                /* archived hitset objects, oldest first */
	size_t n_hs_names;
	bool hs_loading;
	struct tier__elog elog[TIER__EL_N];   /* log.c */
};

/*
 * Count n on the engine's totals and on img's own block (img NULL: the
 * engine's only).  Every per-request and per-object counter goes through it,
 * so an image's counters add up to the totals of the images still known.
 */
#define tier__count(e, img, field, n)                                           \
	do {                                                                    \
		struct tier_image *img_ = (img);                                \
		(e)->st.field += (n);                                           \
		if (img_)                                                       \
			img_->st.field += (n);                                  \
	} while (0)

/* engine.c */
uint64_t tier__eng_now_ns(const struct tier_engine *e);
static inline uint64_t tier__eng_now_ms(const struct tier_engine *e) { return tier__eng_now_ns(e) / 1000000; }

/* Bytes of o inside its image: the object size, or the image's short tail. */
uint32_t tier__obj_short_len(const struct tier_engine *e, const struct tier__obj *o);
static inline uint32_t tier__obj_len(const struct tier_engine *e, const struct tier__obj *o)
{
	return (o->flags & TIER__OF_SHORT) ? tier__obj_short_len(e, o) : (uint32_t)e->p.object_size;
}

/* o was written (or promoted) now. */
static inline void tier__obj_touch(const struct tier_engine *e, struct tier__obj *o)
{
	o->mtime_ms = (uint32_t)tier__eng_now_ms(e);
}

/* Milliseconds since o was written (or promoted), modulo 2^32 ms (49.7 days). */
static inline uint64_t tier__obj_age_ms(uint64_t now_ms, const struct tier__obj *o)
{
	return (uint32_t)((uint32_t)now_ms - o->mtime_ms);
}
void tier__log(const struct tier_engine *e, enum tier_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* DEBUG messages are formatted only when asked for (tier_engine_set_debug). */
#define tier__debug(e, ...) \
	do { if ((e)->debug) tier__log((e), TIER_LOG_DEBUG, __VA_ARGS__); } while (0)
/*
 * The one way the engine submits a store op.  The store refuses only
 * malformed ops (an engine bug): the refusal is logged and the op completes
 * with the error through the pool's completion queue like any failed op, so
 * every caller has one completion path, its callback, which never runs
 * inside this call.
 */
void tier__submit(struct tier_engine *e, struct tier_store *st, struct tier_store_op *op);
struct tier_image *tier__image_by_id(const struct tier_engine *e, uint32_t id);
void tier__oid(const struct tier_image *img, uint64_t objno, char *out);
void tier__req_put(struct tier_engine *e, struct tier_request *req, int err);
void tier__deliver(struct tier_engine *e);
/* After a submit that completed requests without store I/O: get a callback soon. */
void tier__kick(struct tier_engine *e);
struct tier__job *tier__job_new(struct tier_engine *e, int kind, struct tier_image *img,
				struct tier__obj *obj);
void tier__job_free(struct tier__job *j);
/* An object_size buffer for a job (recycled: no page faults per promotion). */
int tier__job_obuf(struct tier__job *j);
/*
 * A buffer for [off, off + len) of the job's object: the recycled
 * object-size one for a whole object, else just len bytes (j->boff = off).
 */
int tier__job_buf(struct tier__job *j, uint32_t off, uint32_t len);
/* A cleared op of the job on its object: opcode opc, completing in cb with priv = j. */
void tier__job_op(struct tier__job *j, struct tier_store_op *op, enum tier_store_opcode opc,
		  tier_store_cb cb);
void tier__cache_error(struct tier_engine *e, int err);
bool tier__degraded(const struct tier_engine *e);
/* A cache op timed out lately (-ETIMEDOUT): the pool is unreachable. */
bool tier__cache_down(const struct tier_engine *e);
void tier__base_latency(struct tier_engine *e, uint64_t ns);
uint64_t tier__policy_capacity(const struct tier_engine *e);

/* objmap.c */
#define TIER__SLAB_SHIFT 12
#define TIER__SLAB_CHUNK (1u << TIER__SLAB_SHIFT)
int tier__map_init(struct tier_engine *e);
void tier__map_fini(struct tier_engine *e);
struct tier__obj *tier__obj_find(const struct tier_engine *e, uint64_t key);
/* The entry at slab index idx1 - 1 if it is in the map, else NULL (the clock hand). */
struct tier__obj *tier__obj_at(const struct tier_engine *e, uint32_t idx1);
/* The policy's handle of o (its slab index) and the host that names handles' keys. */
uint32_t tier__obj_handle(const struct tier_engine *e, const struct tier__obj *o);
const struct tier__policy_host *tier__map_policy_host(struct tier_engine *e);
/* A read/write hit on the cached o, for the eviction policy. */
void tier__obj_policy_access(struct tier_engine *e, struct tier__obj *o);
struct tier__obj *tier__obj_get(struct tier_engine *e, struct tier_image *img, uint64_t objno);
void tier__obj_release(struct tier_engine *e, struct tier__obj *o);
int tier__obj_alloc_bits(struct tier_engine *e, struct tier__obj *o);
void tier__obj_free_bits(struct tier_engine *e, struct tier__obj *o);
uint64_t tier__obj_cached_bytes(const struct tier_engine *e, const struct tier__obj *o);
uint64_t tier__obj_dirty_bytes(const struct tier_engine *e, const struct tier__obj *o);
/*
 * The one way an object's cache state changes; the engine's and the image's
 * counts and the eviction policy follow it.  ABSENT frees the bitmaps; any
 * other state copies valid and dirty (nwords each; NULL keeps that half)
 * into the bitmaps, which must then be allocated.  ABSENT -> cached inserts
 * the key into the policy at o->mtime_ms, cached -> ABSENT removes it.
 */
void tier__obj_set_state(struct tier_engine *e, struct tier__obj *o, uint8_t state,
			 const uint64_t *valid, const uint64_t *dirty);
/*
 * NULL if o's state, flags and counts are a legal combination (the list is
 * in objmap.c), else what is wrong.  tier__obj_assert aborts on an illegal
 * one in debug builds (the tests); tier__obj_kick runs it after every
 * transition.
 */
const char *tier__obj_check(const struct tier_engine *e, const struct tier__obj *o);
#ifndef NDEBUG
void tier__obj_assert(const struct tier_engine *e, const struct tier__obj *o, const char *where);
#else
static inline void tier__obj_assert(const struct tier_engine *e, const struct tier__obj *o,
				    const char *where) { (void)e; (void)o; (void)where; }
#endif
/*
 * Flags with owners: each transient flag changes only through its pair of
 * helpers below, which change the count tied to it in the same step (as
 * libuv's uv__handle_start/stop) and assert their preconditions in debug
 * builds.  objmap.c's table (above tier__obj_check) names each flag's
 * setter, clearer and invariant.  BITS is tier__obj_alloc_bits/free_bits's,
 * SHORT tier__obj_get's.
 */
/* PROMOTING (a promotion, or a read fill creating the copy); n_promoting, promoting_bytes. */
void tier__obj_promote_begin(struct tier_engine *e, struct tier__obj *o, uint64_t bytes);
void tier__obj_promote_end(struct tier_engine *e, struct tier__obj *o, uint64_t bytes);
/* FILLING (a fill job on a copy); promoting_bytes.  The end clears FILL_READY too. */
void tier__obj_fill_begin(struct tier_engine *e, struct tier__obj *o, uint64_t bytes);
void tier__obj_fill_end(struct tier_engine *e, struct tier__obj *o, uint64_t bytes);
/* FILL_READY: the fill's data is in, it lands once the object is quiet. */
void tier__obj_fill_ready_begin(struct tier_engine *e, struct tier__obj *o);
void tier__obj_fill_ready_end(struct tier_engine *e, struct tier__obj *o);
/* FLUSHING; agent_flushing. */
void tier__obj_flush_begin(struct tier_engine *e, struct tier__obj *o);
void tier__obj_flush_end(struct tier_engine *e, struct tier__obj *o);
/* EVICTING (a whole clean copy's REMOVE); agent_evicting. */
void tier__obj_evict_begin(struct tier_engine *e, struct tier__obj *o);
void tier__obj_evict_end(struct tier_engine *e, struct tier__obj *o);
/* EVICT_AFTER_FLUSH (a dirty victim: flush, then evict); agent_evicting. */
void tier__obj_evict_dirty_begin(struct tier_engine *e, struct tier__obj *o);
void tier__obj_evict_dirty_end(struct tier_engine *e, struct tier__obj *o);
/* EXCL: an exclusive op runs (cache write, drop, a fill's writes, a flush's SETMETA). */
void tier__obj_excl_begin(struct tier_engine *e, struct tier__obj *o);
void tier__obj_excl_end(struct tier_engine *e, struct tier__obj *o);
/* EXCL for a partial eviction (evict_ext.c); agent_evicting. */
void tier__obj_pevict_begin(struct tier_engine *e, struct tier__obj *o);
void tier__obj_pevict_end(struct tier_engine *e, struct tier__obj *o);
/* VUNK: a write of the cached copy failed, the store's version is uncertain. */
void tier__obj_vunk_begin(struct tier_engine *e, struct tier__obj *o);
/* The store's version is learnt again (a flush's STAT). */
void tier__obj_vunk_end(struct tier_engine *e, struct tier__obj *o);
/* STALE: a write creating a copy failed; a cache object may exist while ABSENT. */
void tier__obj_stale_begin(struct tier_engine *e, struct tier__obj *o);
/* A write of the copy landed: its store version is known (STALE, VUNK cleared). */
void tier__obj_copy_known(struct tier_engine *e, struct tier__obj *o);
/* @pre ABSENT: the copy was removed; STALE, VUNK and UNSYNC_C go with it. */
void tier__obj_copy_gone(struct tier_engine *e, struct tier__obj *o);
/*
 * UNSYNC_C/UNSYNC_B: written without FUA since the last sync (flag one of
 * them; a no-op for a pool whose acks are durable); the key joins e->unsync.
 */
void tier__obj_unsync_begin(struct tier_engine *e, struct tier__obj *o, uint16_t flag);
/* A sync job covers them from here (flags: UNSYNC_C and/or UNSYNC_B). */
void tier__obj_unsync_end(struct tier_engine *e, struct tier__obj *o, uint16_t flags);
/* PQUEUED, FQUEUED: an internal promotion hint, a fill hint, is queued on o. */
void tier__obj_pqueue_begin(struct tier_engine *e, struct tier__obj *o);
void tier__obj_pqueue_end(struct tier_engine *e, struct tier__obj *o);
void tier__obj_fqueue_begin(struct tier_engine *e, struct tier__obj *o);
void tier__obj_fqueue_end(struct tier_engine *e, struct tier__obj *o);
/* HOT: written during its last flush, in e->hot (agent.c): the agent leaves it alone. */
void tier__obj_hot_begin(struct tier_engine *e, struct tier__obj *o);
void tier__obj_hot_end(struct tier_engine *e, struct tier__obj *o);
int tier__meta_encode_obj(const struct tier_engine *e, uint32_t flags, uint64_t version,
			  const uint64_t *valid, const uint64_t *dirty, void *buf);
void tier__map_foreach(struct tier_engine *e, void (*fn)(struct tier_engine *e,
		       struct tier__obj *o, void *arg), void *arg);
static inline bool tier__bit(const uint64_t *w, size_t i) { return (w[i / 64] >> (i % 64)) & 1; }
static inline void tier__bit_set(uint64_t *w, size_t i) { w[i / 64] |= 1ull << (i % 64); }
static inline void tier__bit_clear(uint64_t *w, size_t i) { w[i / 64] &= ~(1ull << (i % 64)); }
size_t tier__popcount(const uint64_t *w, size_t nwords);
bool tier__obj_busy(const struct tier__obj *o);

/* route.c (the queues, the router: libtier/route.h shares the rest of the data path) */
int tier__ext_enqueue(struct tier_engine *e, struct tier_image *img, struct tier_request *req,
		      int type, uint64_t objno, uint32_t off, uint32_t len, char *buf);
void tier__obj_kick(struct tier_engine *e, struct tier__obj *o);
void tier__ext_finish(struct tier_engine *e, struct tier__ext *x, int err);
struct tier__ext *tier__ext_alloc(struct tier_engine *e);
void tier__ext_free(struct tier_engine *e, struct tier__ext *x);
void tier__ext_pool_fini(struct tier_engine *e);

/* promote.c */
/* The throttle: take an admitted promotion's tokens (bytes 0: copies nothing, free). */
bool tier__promote_tokens(struct tier_engine *e, struct tier_image *img, uint64_t bytes);
void tier__promote_start(struct tier_engine *e, struct tier_image *img, struct tier__obj *o,
			 struct tier__ext *waiter);
void tier__tokens_refill(struct tier_engine *e);
/* Reserve bytes (and objects) admitted but not yet cached against the target. */
void tier__resv_take(struct tier_engine *e, struct tier__ext *x, uint64_t bytes, bool obj);
void tier__resv_put(struct tier_engine *e, struct tier__ext *x);
/*
 * May a fill that reads `read` bytes from base and adds `add` bytes to the
 * cache start?  The cache-write budget (fill_budget_pct, extent mode) or
 * else the promotion throttle; counts fill_skip_throttled when not.
 */
bool tier__fill_tokens(struct tier_engine *e, struct tier_image *img, uint64_t read,
		       uint64_t add);
/* A client read or write of `bytes`: the fills' budget grows by its share. */
void tier__fill_budget_earn(struct tier_engine *e, uint64_t bytes);
/*
 * The base name barrier of a promotion or a fill (removes not yet covered
 * by one): submit it on op (gen: where the rm_gen it covers is kept), and
 * once it answered take its result (ENOENT expected; 0 or the error).
 */
void tier__base_barrier(struct tier_engine *e, struct tier_store_op *op, tier_store_cb cb,
			void *priv, uint64_t *gen);
int tier__base_barrier_done(struct tier_engine *e, int result, uint64_t gen);

/* fill.c */
/*
 * Bytes a fill of [off, off + len) adds to o's copy (of the extents set in
 * mask, if given); *read (if given): what it reads from base.
 */
uint64_t tier__fill_bytes(const struct tier_engine *e, const struct tier__obj *o, uint32_t off,
			  uint32_t len, const uint64_t *mask, uint64_t *read);
/*
 * Start filling o's invalid extents of [off, off + len) (those set in mask,
 * if given: a fill hint's) from base (route FILL); no-op if it cannot start.
 */
void tier__fill_start(struct tier_engine *e, struct tier_image *img, struct tier__obj *o,
		      uint32_t off, uint32_t len, const uint64_t *mask);
/* o went quiet (no exclusive op, no shared op): a fill waiting to land goes on. */
void tier__fill_resume(struct tier_engine *e, struct tier__obj *o);
/*
 * Bytes of the fill in flight on o (a read fill or a fill job) that brings
 * every extent of [off, off + len) the copy lacks (all of them if o is
 * ABSENT and a read fill is making its copy); 0 if none does.
 */
uint64_t tier__fill_brings(const struct tier_engine *e, const struct tier__obj *o, uint32_t off,
			   uint32_t len);
/*
 * Read fills: the read x (at the head of o's queue, an admitted read miss
 * in extent mode) is about to read from base; the whole extents it brings
 * that the copy lacks (all of them if o is ABSENT) go into the cache as
 * clean extents once it is done, with no base read of their own.  Returns
 * false (nothing started) if it cannot be done safely now.
 */
enum tier__rfill {
	TIER__RF_STARTED = 0,
	TIER__RF_NONE,       /* nothing to do, or no memory (counted in fill_failed) */
	TIER__RF_BUSY,       /* another op runs or waits on o, or its copy is in doubt */
	TIER__RF_UNSYNCED,   /* a base remove is not yet synced (it would need a barrier) */
	TIER__RF_PARTIAL,    /* the read holds no whole extent the copy lacks */
};
enum tier__rfill tier__rfill_start(struct tier_engine *e, struct tier_image *img,
				   struct tier__obj *o, struct tier__ext *x);
/* Count a read fill refused for good (fill_skip_busy, _unsynced, _partial). */
void tier__rfill_count(struct tier_engine *e, struct tier_image *img, enum tier__rfill r);
/*
 * The read x that fed a read fill is done: result 0, its data is in x->buf;
 * -ENOENT, base holds no object (a hole: nothing is cached); else it failed.
 */
void tier__rfill_read_done(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x,
			   int result);

/* flush.c */
int tier__flush_start(struct tier_engine *e, struct tier_image *img, struct tier__obj *o);
/* The same, of the dirty extents not referenced when it snapshots (all if none): TIER__FLH_COLD. */
int tier__flush_start_cold(struct tier_engine *e, struct tier_image *img, struct tier__obj *o);
int tier__evict_start(struct tier_engine *e, struct tier_image *img, struct tier__obj *o);
void tier__sync_start(struct tier_engine *e, struct tier_image *img, struct tier_request *req);
void tier__sync_background(struct tier_engine *e);
/* Record that a REMOVE without FUA went to st (see rm_gen). */
void tier__note_remove(struct tier_engine *e, struct tier_store *st, uint32_t flags);
/* A cache write of [off, off+len) starts on an object being flushed. */
void tier__flush_redirty(struct tier_engine *e, struct tier__obj *o, uint32_t off, uint32_t len);
/* The object's cache write finished: a flush waiting to mark it goes on. */
void tier__flush_resume(struct tier_engine *e, struct tier__obj *o);

/* evict_ext.c: extent-aware eviction (extent mode, evict_extents) */
/* A client read or write touched [off, off + len) of the cached o: its valid extents are referenced. */
void tier__obj_reference(struct tier_engine *e, struct tier__obj *o, uint32_t off, uint32_t len);
/*
 * How the agent takes its victim o (tier__decide_evict_how): the whole
 * object, only its unreferenced clean extents (a partial eviction), a
 * second chance (nothing to drop: its reference bits are cleared, the
 * policy sees it as used) or a pass (no clean extent: left as it is).
 * drain: an admin evict; now: the order's victim in full mode (from 100% of
 * target: no second chance).
 */
int tier__evict_how(struct tier_engine *e, const struct tier__obj *o, bool drain, bool now);
int tier__evict_partial_start(struct tier_engine *e, struct tier_image *img, struct tier__obj *o);
void tier__evict_again(struct tier_engine *e, struct tier__obj *o);
/*
 * What the agent flushes of o (tier__decide_flush_how); hand: the flush
 * hand's visit, round2: in its second round.
 */
int tier__flush_how(struct tier_engine *e, const struct tier__obj *o, bool hand, bool round2);
/*
 * A cold flush's snapshot: drop the referenced extents from dirty[], unless
 * none would be left; true if it left some out.
 */
bool tier__flush_cold_snapshot(const struct tier_engine *e, const struct tier__obj *o,
			       uint64_t *dirty);

/* agent.c */
void tier__agent_run(struct tier_engine *e);
void tier__agent_modes(struct tier_engine *e);
double tier__full_ratio(const struct tier_engine *e);
/* target_max_objects gives the full ratio (the object ratio is at least the byte ratio). */
bool tier__full_by_objects(const struct tier_engine *e);
/* The full ratio less `bytes` and `objs` of it (an op's own reservation). */
double tier__full_ratio_less(const struct tier_engine *e, uint64_t bytes, uint64_t objs);
/* Keep the agent off o (written during its flush) until until_ms and a tick. */
void tier__agent_cool(struct tier_engine *e, struct tier__obj *o, uint64_t until_ms);
void tier__agent_hot_expire(struct tier_engine *e);
double tier__dirty_ratio(const struct tier_engine *e);
/*
 * A counted request hit (true) or missed the cache: the agent's phase-change
 * signal (tier__decide_phase_change).
 */
void tier__agent_note_hit(struct tier_engine *e, bool hit);
/* A full cache turns over after a phase change (until a cache's worth is evicted). */
bool tier__agent_turnover(const struct tier_engine *e);

/* hsarch.c */
void tier__hitsets_start_load(struct tier_engine *e);
void tier__hitsets_tick(struct tier_engine *e);
int tier__hitsets_archive_now(struct tier_engine *e);

/* image.c */
void tier__image_free(struct tier_image *img);

/* log.c */
/*
 * One failure line (rate-limited per op, see tier_log_rec): "<op> of <oid>
 * failed: <ENAME> (<text>) [image I, pool P]" and fmt appended.  img, oid
 * and pool may be NULL.
 */
void tier__log_fail(struct tier_engine *e, enum tier_log_level lvl, int op,
		    const struct tier_image *img, const char *oid,
		    const struct tier_store *pool, int err, const char *fmt, ...)
	__attribute__((format(printf, 8, 9)));
/* Ops whose window ended with lines suppressed: say how many (from the tick). */
void tier__log_flush_suppressed(struct tier_engine *e);
/* TIER__EL_* of a tier_req_type (or TIER__REQ_FILL). */
int tier__el_of_req(int type);

#endif
