/* SPDX-License-Identifier: MIT */
/*
 * libtier/store/local.h - internal to the local backend: the backend state
 * shared by local.c (threads, queue, device-model pacing, create/destroy)
 * and local_io.c (names, metadata records, the ops themselves).
 */
#ifndef TIER_STORE_LOCAL_H
#define TIER_STORE_LOCAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tier/store.h"

#define LOCAL_STRIPES      64
#define LOCAL_ALIGN        4096u

struct work {
	struct tier_store_op *op;
	uint64_t due;             /* device model's completion time, ns monotonic */
};

struct delayed {
	uint64_t due, seq;
	struct tier_store_op *op;
	int result;
};

/*
 * Do a directory's offsets (telldir) stay valid across opens while names
 * are removed?  SCAN reads the pool a page per open, seekdir'ing to where
 * the last page stopped; where offsets are positions (tmpfs before Linux
 * 6.6, unknown filesystems) a removal would make it skip names, so the
 * store offers no SCAN there (the engine lists, then STATs).
 */
bool tier__local_dir_offsets_stable(long f_type, const char *release);

/* local_fd.c: the cache of open object files (bounded LRU of descriptors) */
struct tier__fdcache;
struct tier__fdc_stats {
	uint64_t open, cap, hits, misses, evictions;
};
/* A quarter of what RLIMIT_NOFILE leaves after 128 for sockets and the rest. */
size_t tier__fdc_default_cap(void);
int tier__fdc_create(size_t cap, struct tier__fdcache **out);
void tier__fdc_destroy(struct tier__fdcache *f);
/* The cached descriptor of name, now busy until put back; -ENOENT if none. */
int tier__fdc_get(struct tier__fdcache *f, const char *name, bool direct);
/* Done with fd (from get, or newly opened): cache it; may close the LRU idle one. */
void tier__fdc_put(struct tier__fdcache *f, const char *name, bool direct, int fd);
/* The same with a byte the caller keeps with the cached descriptor (0 when
 * it was not cached, or for a descriptor opened anew). */
int tier__fdc_get_tag(struct tier__fdcache *f, const char *name, bool direct, uint8_t *tag);
/*
 * A deferred record (local_io.c): the `tier.meta` xattr a write left in
 * memory instead of storing it, kept with the cached descriptor.  len 0:
 * none.  The cache stores it through its writeback function before it
 * closes the descriptor (an idle one evicted, or at destroy): an entry
 * whose writeback fails is not evicted.
 */
struct tier__fdc_rec {
	uint8_t *buf;
	uint32_t len, cap;
};
/* get_tag, and *rec = the entry's deferred record (NULL when not cached:
 * nothing can be deferred on a descriptor opened anew).  The entry is busy
 * until put back: only the caller touches *rec meanwhile. */
int tier__fdc_get_rec(struct tier__fdcache *f, const char *name, bool direct, uint8_t *tag,
		      struct tier__fdc_rec **rec);
/* Room for a record of len bytes in rec->buf (what it holds is kept); -ENOMEM. */
int tier__fdc_rec_reserve(struct tier__fdc_rec *rec, uint32_t len);
/* The first len bytes of rec->buf are now its deferred record (replacing one). */
void tier__fdc_rec_set(struct tier__fdcache *f, struct tier__fdc_rec *rec, uint32_t len);
/* rec was stored (or superseded): nothing is deferred there any more. */
void tier__fdc_rec_clear(struct tier__fdcache *f, struct tier__fdc_rec *rec);
/* Entries holding a deferred record now (any thread; a hint: 0 = none). */
uint64_t tier__fdc_deferred(struct tier__fdcache *f);
/* How a deferred record is stored: 0 or -errno (local_io.c). */
typedef int (*tier__fdc_writeback_fn)(void *arg, int fd, const uint8_t *rec, uint32_t len);
void tier__fdc_set_writeback(struct tier__fdcache *f, tier__fdc_writeback_fn fn, void *arg);
/* Store name's deferred record now, if its idle cached descriptor has one
 * (SCAN reads records by name): 0 or the writeback's -errno.  The caller
 * holds the object's stripe lock. */
int tier__fdc_writeback_name(struct tier__fdcache *f, const char *name);
void tier__fdc_put_tag(struct tier__fdcache *f, const char *name, bool direct, int fd,
		       uint8_t tag);
/* The object was unlinked: close fd and every cached descriptor of name. */
void tier__fdc_forget(struct tier__fdcache *f, const char *name, int fd);
/* Close the least recently used idle descriptor: false if there is none. */
bool tier__fdc_shrink(struct tier__fdcache *f);
void tier__fdc_stats(struct tier__fdcache *f, struct tier__fdc_stats *st);

struct local_be {
	int dirfd;
	struct tier__fdcache *fdc;  /* open object files */
	struct tier_devmodel *dm;   /* NULL: real disk speed */
	bool direct_io;
	bool mem_fs;                /* the pool is on tmpfs/ramfs: I/O never blocks */
	bool scan_ok;               /* tier__local_dir_offsets_stable: SCAN offered */
	struct tier_store_ops ops;  /* the store's (local_ops, less SCAN without scan_ok) */
	bool inline_io;             /* cheap ops may run on the submitting thread */
	unsigned guard_hold_us;     /* tests: widen the guard-to-effect window */
	atomic_bool direct_ok;      /* cleared when the fs refuses O_DIRECT */
	atomic_bool sidecar_only;   /* fs refuses user xattrs (or forced by env) */
	atomic_bool scan_xattrat;   /* SCAN may read records by name (getxattrat(2)) */
	/*
	 * Pending ranges (local_io.c): this session's nonce in the records it
	 * writes; ordered_sync (TIER_LOCAL_ORDERED_SYNC=1) syncs data before
	 * every meta that vouches for it instead, as before pending ranges.
	 */
	uint64_t nonce;
	bool ordered_sync;
	atomic_uint_fast64_t syncs, pend_writes, pend_settles, pend_kept, pend_dropped;
	/* records left in memory by F_LAZY_META writes (local_io.c), and stored later */
	atomic_uint_fast64_t meta_deferred, meta_stored_late;
	/*
	 * Name changes (creates, unlinks, sidecar renames) counted after they
	 * happen, and how many a completed directory fsync covers: a FUA op
	 * syncs the directory only when the two differ.
	 */
	atomic_uint_fast64_t ns_gen, ns_synced;
	pthread_mutex_t stripes[LOCAL_STRIPES];

	pthread_mutex_t crash_lock;
	uint64_t crash_after, steps;
	atomic_bool dead;

	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct work *q;
	size_t qcap, qhead, qlen;
	bool stopping;
	pthread_t *workers;
	unsigned nworkers, nstarted;

	pthread_mutex_t dlock;
	pthread_cond_t dcond;
	struct delayed *heap;
	size_t nheap, capheap;
	uint64_t dseq;
	bool dstop, dstarted;
	pthread_t delayer;
};

/*
 * Run one op (any opcode) on the calling worker thread: the real I/O, guards
 * and durable steps.  Returns the op's result (>= 0 or -errno).
 */
int tier__local_run(struct local_be *L, struct tier_store_op *op);
/*
 * May op run on the submitting thread (no device model, no sync, no guard,
 * a read, or a write to a pool in memory)?  Then tier__local_run_inline
 * tries it without blocking on the disk: *ran false means nothing was done
 * (object not open, stripe busy, data not in the page cache) and a worker
 * must run it; *ran true gives the op's result.
 */
bool tier__local_inline_ok(const struct local_be *L, const struct tier_store_op *op);
int tier__local_run_inline(struct local_be *L, struct tier_store_op *op, bool *ran);
/* The descriptor cache's writeback of a deferred record (arg: the local_be). */
int tier__local_rec_writeback(void *arg, int fd, const uint8_t *rec, uint32_t len);

#endif
