/* SPDX-License-Identifier: MIT */
/*
 * tier/store.h - the object-store seam.
 *
 * Every byte tierd keeps goes through this interface: one store instance is
 * one pool (base or cache) of one backend (mem, local, rados).  The engine
 * fills a struct tier_store_op, calls tier_store_submit(), and later gets the
 * op's callback on the thread that drains the store's completion queue
 * (struct tier_cq).  Backends never call back directly: they finish an op with
 * tier__store_complete(), which pushes it onto the queue and wakes the owner.
 *
 * Objects: a byte array (sparse; reads past the end return zeros) plus an
 * optional opaque metadata blob ("tier.meta", <= TIER_META_MAX bytes) and a
 * 64-bit version stored with it.  Version 0 means "no version set".
 * Guards: TIER_STORE_F_GUARD makes an op fail with -ECANCELED, changing
 * nothing, unless the object exists and its version == expect_version;
 * TIER_STORE_F_EXCL makes it fail with -EEXIST unless the object is absent.
 *
 * Durability (docs/DURABILITY.md; the mem store's power-cut model enforces
 * exactly this, no more):
 *  - Without F_FUA an op's effects are visible at once and survive a crash of
 *    the process, but not a power cut: until a sync covers them, a cut may
 *    keep any subset of them.  Data of separate writes is kept or lost
 *    independently (a lost write leaves what was there before, zeros in a
 *    region the object never held); the meta of an object reverts to any
 *    value it had since it was last synced; a created or removed name may
 *    revert to any existence state since its last sync.
 *  - F_FUA: at completion the op's effects and everything completed earlier
 *    on this object (data, meta, its name) are durable.  A READ with F_FUA
 *    is the sync barrier of one object.  A REMOVE with F_FUA also makes
 *    every earlier completed create and remove of this pool durable, even
 *    when the object does not exist (the pool's name barrier).
 *  - F_ORDERED (WRITE/ZERO with F_META, SETMETA): the object's data (a
 *    write's own included) is durable before the new meta can become
 *    durable; the meta need not be durable at completion.  A cut then shows
 *    the new meta only with the data it vouches for.  Backends whose
 *    data+meta writes are atomic and durable at ack (rados) ignore it.
 *  - pre_meta (below) is durable before a write touches the data.
 *  - F_LAZY_META (WRITE/ZERO with F_META, without F_FUA, F_ORDERED,
 *    pre_meta, F_GUARD or F_EXCL): the caller says the new meta differs
 *    from the object's current one only in its version.  The backend may
 *    keep it in memory and store it later: every later op sees it at once
 *    (guards, STAT, SCAN), a sync barrier (READ with F_FUA) stores it
 *    before it syncs, but a crash of the process may leave the object's
 *    meta and version as they were before the F_LAZY_META writes (which
 *    vouch for the same data).  Backends may ignore it.
 */
#ifndef TIER_STORE_H
#define TIER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIER_OID_MAX  128  /* including the NUL */
#define TIER_META_MAX 4096

enum tier_store_opcode {
	TIER_STORE_READ = 1, /* [off, off+len) -> buf; result = len (zero-filled past EOF) */
	TIER_STORE_WRITE,    /* buf -> [off, off+len); creates; meta with F_META */
	TIER_STORE_ZERO,     /* zero [off, off+len) (may deallocate); meta with F_META */
	TIER_STORE_SETMETA,  /* set meta+version; object must exist unless F_CREATE */
	TIER_STORE_REMOVE,   /* delete object; -ENOENT if absent */
	TIER_STORE_STAT,     /* size, version, mtime; meta into meta_buf if given */
	TIER_STORE_LIST,     /* names starting with prefix -> names/n_names */
	TIER_STORE_SCAN,     /* a page of names with prefix, each with version and meta -> entries */
	TIER_STORE_OPCODE_MAX
};

enum {
	TIER_STORE_F_FUA    = 1u << 0, /* durable (fdatasync) before completion */
	TIER_STORE_F_GUARD  = 1u << 1, /* require version == expect_version */
	TIER_STORE_F_EXCL   = 1u << 2, /* require object absent */
	TIER_STORE_F_META   = 1u << 3, /* also store meta/meta_len and version */
	TIER_STORE_F_CREATE = 1u << 4, /* SETMETA: create an empty object if absent */
	TIER_STORE_F_ORDERED = 1u << 5, /* data durable before the new meta (see above) */
	TIER_STORE_F_LAZY_META = 1u << 6, /* the meta changes only its version: may be stored later */
};

struct tier_store;
struct tier_store_op;
struct tier_cq;

typedef void (*tier_store_cb)(struct tier_store_op *op);

/*
 * One object of a SCAN page: what a STAT with a meta_buf of TIER_META_MAX
 * bytes would have answered (result 0, or -errno: -ENOENT when it went away
 * meanwhile), its version and meta; name and meta point into the page's
 * block (op->entries).
 */
struct tier_store_entry {
	const char *name;
	const void *meta;
	uint64_t version;
	uint32_t meta_len;
	int result;
};

/*
 * One operation.  Owned by the caller from submit until its callback returns;
 * the store never frees it.  Fill the "in" part, zero the rest.
 */
struct tier_store_op {
	/* in */
	enum tier_store_opcode opcode;
	uint32_t flags;
	char oid[TIER_OID_MAX];
	uint64_t off, len;
	void *buf;                  /* READ: destination; WRITE: source */
	const void *meta;           /* with F_META: new metadata blob */
	uint32_t meta_len;
	/*
	 * Optional, WRITE/ZERO with F_META: metadata a backend without atomic
	 * data+xattr writes (local) makes durable *before* touching data (a
	 * sync of its own, FUA or not), so a crash or power cut between the
	 * two leaves pre_meta, never the old meta, with the new data.  Atomic
	 * backends ignore it.  It costs a sync: give it only when the old meta
	 * under new data would lie (a CLEAN copy about to be overwritten).
	 */
	const void *pre_meta;
	uint32_t pre_meta_len;
	uint64_t version;           /* with F_META: version to store */
	uint64_t expect_version;    /* with F_GUARD */
	void *meta_buf;             /* STAT: where to copy meta, may be NULL */
	uint32_t meta_cap;
	const char *prefix;         /* LIST, SCAN */
	/*
	 * SCAN: resume at cursor (0: the start; else a cursor_out of the
	 * previous page), at most len entries, only shard `shard` of the
	 * backend's partition of the names into nshards (0: every name).  Every
	 * name the pool holds with the prefix from the first page to the last
	 * comes in exactly one page of its shard (names created or removed
	 * meanwhile may or may not).
	 */
	uint64_t cursor;
	uint32_t shard, nshards;
	tier_store_cb cb;
	void *priv;

	/* out, valid in the callback */
	int result;                 /* >= 0 success (READ/WRITE: bytes), -errno */
	uint64_t obj_size;          /* STAT */
	uint64_t obj_version;       /* STAT */
	uint64_t obj_mtime_ns;      /* STAT: CLOCK_REALTIME ns */
	uint32_t meta_len_out;      /* STAT: bytes of meta (0 = none) */
	char **names;               /* LIST: free with tier_store_list_free() */
	size_t n_names;
	struct tier_store_entry *entries;   /* SCAN: one block; free() it, also after a failure */
	size_t n_entries;
	uint64_t cursor_out;        /* SCAN: where the next page starts; 0: this was the last */

	/* private to the store layer */
	struct tier_store_op *q_next;
	struct tier_store *store;
	uint64_t t_submit_ns;
	uint64_t seq;
};

/* ---- completion queue: the hand-off from backend threads to the owner ---- */

/*
 * notify(arg) is called from any thread when the queue goes from empty to
 * non-empty (uv_async_send in the daemon).  It may be NULL: then the owner
 * polls with tier_cq_wait().
 */
int tier_cq_create(void (*notify)(void *arg), void *arg, struct tier_cq **out);
/* NULL ok. @pre the queue is empty and no backend can push any more
 * (stores destroyed, rados disconnected). */
void tier_cq_destroy(struct tier_cq *cq);
/* Run the callbacks of every queued op on the calling thread; returns how many. */
size_t tier_cq_drain(struct tier_cq *cq);
/* Block until the queue is non-empty or timeout_ms passes (-1 = forever).
 * Returns 1 if non-empty, 0 on timeout. */
int tier_cq_wait(struct tier_cq *cq, int timeout_ms);
/* Push from any thread.  Backends use tier__store_complete() instead. */
void tier__cq_push(struct tier_cq *cq, struct tier_store_op *op);

/* ---- backends ---- */

/*
 * The table every backend implements.  Opens with its size, grows only at the
 * end; ops may be NULL (then the wrapper fails them with -ENOTSUP).  Each op returns 0 once it
 * has taken the op (and will call tier__store_complete exactly once, from any
 * thread) or -errno if it refuses it synchronously (then it must not complete
 * it).  The wrapper has already validated the op.
 */
struct tier_store_stats;
struct tier_store_ops {
	size_t size;
	const char *name;
	int (*read)(void *be, struct tier_store_op *op);
	int (*write)(void *be, struct tier_store_op *op);
	int (*zero)(void *be, struct tier_store_op *op);
	int (*setmeta)(void *be, struct tier_store_op *op);
	int (*remove)(void *be, struct tier_store_op *op);
	int (*stat)(void *be, struct tier_store_op *op);
	int (*list)(void *be, struct tier_store_op *op);
	void (*destroy)(void *be);   /* after all ops completed */
	void (*get_stats)(void *be, struct tier_store_stats *out);   /* optional: backend fields */
	int (*scan)(void *be, struct tier_store_op *op);   /* optional: SCAN */
};

/* Wrap a backend; takes ownership of be (ops->destroy frees it). */
int tier_store_create(const struct tier_store_ops *ops, void *be,
		      const char *pool_name, struct tier_cq *cq,
		      struct tier_store **out);
/* @pre no op in flight.  NULL ok. */
void tier_store_destroy(struct tier_store *st);

/*
 * Ownership gates (docs/DURABILITY.md "Handoff, takeover and fencing"): the
 * objects whose names start with "<prefix>." belong to one image, and the
 * daemon that serves it may lose it.  A gate says what happens to the ops on
 * them:
 *  - OPEN: they go to the backend.
 *  - HOLD: they wait in the store, in order, until the gate opens (they go
 *    then) or is fenced.  Set while the daemon checks that it still holds
 *    the image's lock (after a watch error): nothing reaches the pool before
 *    the answer.
 *  - FENCED: they fail with -ESHUTDOWN without reaching the backend, and so
 *    do the held ones; a fenced gate never opens again.
 * tier_store_gate_add returns the gate's id (>= 0) or -ENOSPC (at most
 * TIER_STORE_GATES) / -EINVAL; the prefix is copied.  An empty prefix gates
 * every object of the store.  Owner thread, except tier_store_gate_hold,
 * which any thread may call (a watch error callback): it only ever closes.
 */
#define TIER_STORE_GATES 64
enum tier_store_gate { TIER_STORE_GATE_OPEN, TIER_STORE_GATE_HOLD, TIER_STORE_GATE_FENCED };
int tier_store_gate_add(struct tier_store *st, const char *prefix);
void tier_store_gate_set(struct tier_store *st, int gate, enum tier_store_gate g);
void tier_store_gate_hold(struct tier_store *st, int gate);
enum tier_store_gate tier_store_gate_get(const struct tier_store *st, int gate);
/*
 * A lease on an OPEN gate: an op submitted at or after until_ns (the
 * monotonic clock, tier_now_ns) closes the gate to HOLD and waits, until the
 * owner, who renews the lease while the OSDs confirm its watch, checks that
 * the image is still its own.  A daemon that was stopped (SIGSTOP, a VM
 * paused) longer than the lease writes nothing before that check, even
 * after its blocklist expired.  0 removes the lease.  Owner thread.
 */
void tier_store_gate_lease(struct tier_store *st, int gate, uint64_t until_ns);
/*
 * A write to the gate's objects failed with -ETIMEDOUT (op_timeout): it was
 * given up on here but may still reach the pool later, so the image cannot
 * be handed to another client safely; that one must blocklist this one
 * first.  Sticky.  Any thread.
 */
bool tier_store_gate_timed_out(const struct tier_store *st, int gate);
uint64_t tier_now_ns(void);
/* Ops failed by a fenced gate, and ops the backend failed with -ESHUTDOWN
 * (librados' -EBLOCKLISTED: this client was fenced by another). */
uint64_t tier_store_fenced_ops(const struct tier_store *st);
bool tier_store_blocklisted(const struct tier_store *st);

/*
 * Submit an op.  Returns 0: the callback will run (from tier_cq_drain), also
 * for errors found later.  Returns -EINVAL (bad op: no cb, empty/too long oid,
 * len 0 for READ/WRITE/ZERO, meta_len > TIER_META_MAX, F_META without meta
 * on SETMETA, ...): the callback will NOT run.  Injected faults and backend
 * refusals are delivered through the callback, never as a return value.
 */
int tier_store_submit(struct tier_store *st, struct tier_store_op *op);
/*
 * Complete op (which needs a cb) with err < 0 through st's completion
 * queue, as if st had failed it: the callback runs from tier_cq_drain, never
 * inside this call.  For callers that want a refused op (tier_store_submit
 * returned -EINVAL) to take the same path as every failed one.  -EINVAL if
 * op has no cb or err >= 0 (nothing queued).
 */
int tier_store_fail(struct tier_store *st, struct tier_store_op *op, int err);

/* Backend side: finish an op (any thread). */
void tier__store_complete(struct tier_store_op *op, int result);

const char *tier_store_pool_name(const struct tier_store *st);
/* The store op was last submitted to (NULL if never): for failure reports. */
const struct tier_store *tier_store_op_store(const struct tier_store_op *op);
const char *tier_store_backend_name(const struct tier_store *st);
void tier_store_list_free(char **names, size_t n);
/* Does the backend do SCAN (else it fails it with -ENOTSUP: LIST and STAT each name)? */
bool tier_store_can_scan(const struct tier_store *st);
/*
 * Whether acknowledged effects need a sync (F_FUA) to survive a power cut:
 * true for local (page cache) and for mem with its power-cut model, false
 * for rados (an ack is durable) and plain mem.  Backends set it at create.
 */
bool tier_store_volatile_acks(const struct tier_store *st);
void tier_store_set_volatile_acks(struct tier_store *st, bool v);
/* Number of ops submitted and not yet completed (owner thread only). */
uint64_t tier_store_in_flight(const struct tier_store *st);

/* ---- per-pool counters ---- */
struct tier_store_stats {
	uint64_t ops[TIER_STORE_OPCODE_MAX];
	uint64_t bytes[TIER_STORE_OPCODE_MAX]; /* READ/WRITE/ZERO lengths */
	uint64_t errors[TIER_STORE_OPCODE_MAX];    /* failures: not the outcomes below */
	uint64_t not_found[TIER_STORE_OPCODE_MAX]; /* -ENOENT: an absent object (a miss, not an error) */
	uint64_t conflicts[TIER_STORE_OPCODE_MAX]; /* -ECANCELED / -EEXIST: a guard or F_EXCL said no */
	uint64_t faults_injected;
	uint64_t lat_sum_ns[TIER_STORE_OPCODE_MAX];
	uint64_t fua_ops[TIER_STORE_OPCODE_MAX];   /* of ops[]: those with F_FUA */
	/*
	 * Backend counters (local; 0 elsewhere): fsync/fdatasync calls, and
	 * the pending ranges of F_ORDERED writes (libtier/store/local_io.c):
	 * listed instead of synced, settled by an overwrite, and, in records
	 * another session left, checked and kept or dropped for the fallback.
	 */
	uint64_t syncs, pend_listed, pend_settled, pend_kept, pend_dropped;
	/* F_LAZY_META writes whose record was left in memory, and such records stored later */
	uint64_t meta_deferred, meta_stored_late;
};
void tier_store_get_stats(const struct tier_store *st, struct tier_store_stats *out);
const char *tier_store_opcode_name(enum tier_store_opcode op);

/* ---- fault injection (tests, chaos drills) ---- */
struct tier_store_fault {
	uint32_t opcode_mask;   /* bit (1 << opcode); 0 = every opcode */
	uint64_t fail_nth;      /* fail the Nth matching op from now (1-based), 0 = off */
	double fail_fraction;   /* fail this fraction of matching ops, 0 = off */
	int err;                /* positive errno to fail with (default EIO) */
	/*
	 * Crash model: after stop_after more matching ops have been taken,
	 * every later op of this store fails with -EIO without reaching the
	 * backend, as if the process had died at that point.  0 = off.
	 */
	uint64_t stop_after;
	uint32_t add_latency_us; /* delay each completion: local sleeps it, mem adds it in virtual time */
	uint64_t seed;          /* for fail_fraction */
};
/* Replace the store's fault settings (NULL clears them). */
void tier_store_set_fault(struct tier_store *st, const struct tier_store_fault *f);

/* ---- the device model (local backend in real time, mem backend in virtual time) ---- */
struct tier_devmodel_params {
	uint32_t read_latency_us;
	uint32_t write_latency_us;
	uint64_t bandwidth;     /* bytes per second, shared by all ops; 0 = unlimited */
	uint32_t queue_depth;   /* ops served at once; 0 = unlimited */
	/*
	 * Write-ahead journal in front of the servers (an HDD pool with SSD
	 * journals).  0 = no journal: writes are served like reads, and the
	 * two fields below are ignored.  Otherwise every write is acknowledged
	 * once it is in the journal and is written back to the servers in the
	 * background (write latency + bytes / bandwidth, as a foreground write
	 * would cost); a write that finds the journal full waits for the
	 * write-back to free room.
	 */
	uint64_t journal_bytes;       /* capacity; entries take bytes rounded up to 4 KiB + 4 KiB */
	uint32_t journal_latency_us;  /* acknowledgement latency of a journaled write */
	uint64_t journal_bandwidth;   /* bytes/s of the journal's own channel; 0 = unlimited */
};
/* "hdd", "hdd-journal", "ssd" or "none" -> params; -EINVAL for anything else. */
int tier_devmodel_profile(const char *name, struct tier_devmodel_params *out);

struct tier_devmodel;   /* thread-safe */
int tier_devmodel_create(const struct tier_devmodel_params *p, struct tier_devmodel **out);
void tier_devmodel_destroy(struct tier_devmodel *dm);
bool tier_devmodel_is_null(const struct tier_devmodel *dm);
/*
 * An op of `bytes` arriving at arrive_ns: returns when it completes.
 * Service = latency + bytes / bandwidth; queue_depth ops overlap their
 * latency, the bandwidth is one shared channel.  With a journal, writes
 * complete at journal speed while it has room and reads share the servers
 * with the journal's write-back.  A pure function of the sequence of calls
 * (no clock).  Documented in docs/DEVICE-MODEL.md.
 */
uint64_t tier_devmodel_schedule(struct tier_devmodel *dm, uint64_t arrive_ns,
				bool is_write, uint64_t bytes);

/* ---- backends' constructors ---- */

struct tier_mem_opts {
	struct tier_devmodel_params model;   /* used in virtual time only */
	/* Keep sizes and metadata but not the bytes (a read leaves its buffer as it is): tier-sim. */
	bool no_data;
	/* Virtual time: when set, ops complete only through tier_store_mem_advance(). */
	bool virtual_time;
	/* Tests: keep the power-cut model (see tier_store_mem_power_cut).  Off:
	 * every effect is durable at once, as before, and no slower. */
	bool powercut_model;
};
/* A fresh empty in-RAM pool.  Single-threaded: submit and drain on one thread. */
int tier_store_mem_create(const char *pool_name, const struct tier_mem_opts *o,
			  struct tier_cq *cq, struct tier_store **out);
/* Virtual time: complete every op due at or before now_ns.  Returns how many. */
size_t tier_store_mem_advance(struct tier_store *st, uint64_t now_ns);
/* Virtual time: due time of the earliest pending op, UINT64_MAX if none. */
uint64_t tier_store_mem_next_due(const struct tier_store *st);
/* Tests: number of objects and total bytes held. */
void tier_store_mem_usage(const struct tier_store *st, uint64_t *objects, uint64_t *bytes);

/*
 * Tests, the power-cut model (opts.powercut_model; exactly the Durability
 * contract above, described in libtier/store/mem.c): replace the pool's
 * state by what a power cut could leave, then everything is durable, as
 * after a reboot.  Per object, each WRITE/ZERO not yet synced is kept or
 * lost on its own (kept ones in order), the meta+version is any value it
 * had since its last sync, and a name is in any existence state it had
 * since its last sync (a removed incarnation comes back with its own
 * durable state, plus a subset of its unsynced writes).  RANDOM draws all
 * that from seed; KEEP_ALL keeps the visible state; KEEP_NONE only what was
 * durable.  -EINVAL without the model, -EBUSY with ops in flight.
 */
enum tier_mem_cut {
	TIER_MEM_CUT_RANDOM = 0,
	TIER_MEM_CUT_KEEP_ALL,
	TIER_MEM_CUT_KEEP_NONE,
};
int tier_store_mem_power_cut(struct tier_store *st, enum tier_mem_cut mode, uint64_t seed);
/*
 * Tests: a crash point shared by several mem stores.  Every op a store takes
 * adds one to *clock; once *clock has reached stop_at (0 = never), each
 * later op fails with -EIO and changes nothing, as if the process had died
 * there (tier_store_fault.stop_after, counted across pools).  NULL: off.
 */
void tier_store_mem_set_crash_clock(struct tier_store *st, uint64_t *clock, uint64_t stop_at);
/* Tests: volatile effects a cut could lose (writes, meta values, name changes). */
uint64_t tier_store_mem_unsynced(const struct tier_store *st);

struct tier_local_opts {
	const char *dir;                     /* the pool's directory; created if missing */
	struct tier_devmodel_params model;   /* all zero = real disk speed */
	bool direct_io;                      /* O_DIRECT where aligned, else buffered */
	unsigned workers;                    /* I/O threads, 0 = default (4) */
	/* object files kept open (an LRU), 0 = a quarter of RLIMIT_NOFILE less 128 */
	unsigned max_open_files;
	/*
	 * Run every op on a worker thread.  By default, without a device model
	 * or direct_io, reads the page cache holds and writes to a pool in
	 * memory (tmpfs) run on the submitting thread.
	 */
	bool no_inline;
	/*
	 * Tests only: crash simulation.  When > 0, the store performs that many
	 * durable steps (meta write, data write, ...) and then stops dead: the
	 * op in progress and every later one fail with -EIO with nothing more
	 * written.
	 */
	uint64_t crash_after_steps;
};
int tier_store_local_create(const char *pool_name, const struct tier_local_opts *o,
			    struct tier_cq *cq, struct tier_store **out);

#ifdef __cplusplus
}
#endif
#endif /* TIER_STORE_H */
