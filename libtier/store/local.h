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

struct local_be {
	int dirfd;
	struct tier_devmodel *dm;   /* NULL: real disk speed */
	bool direct_io;
	unsigned guard_hold_us;     /* tests: widen the guard-to-effect window */
	atomic_bool direct_ok;      /* cleared when the fs refuses O_DIRECT */
	atomic_bool sidecar_only;   /* fs refuses user xattrs (or forced by env) */
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

#endif
