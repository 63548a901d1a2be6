/* SPDX-License-Identifier: MIT */
/*
 * libtier/store/local.c - the embedded backend's machinery: a fixed pool of
 * worker threads takes ops from a queue and runs them (local_io.c), and a
 * delay thread holds each completion back until the device model says the
 * modelled disk would have finished, so the worker count never limits the
 * modelled queue depth.  It decides when an op completes, never what it
 * does.  It must never call an op's callback itself (only
 * tier__store_complete()) and never acknowledge anything once the crash
 * simulation has tripped.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "tier/store.h"
#include "store_internal.h"
#include "heap.h"
#include "local.h"

#define LOCAL_WORKERS      4u

/* ---- completions held back until the modelled disk is done ---- */

TIER__HEAP_DEFINE(dheap, struct delayed)

static void complete(struct local_be *L, struct tier_store_op *op, int rc)
{
	/* a crashed process acknowledges nothing more */
	if (atomic_load(&L->dead))
		rc = -EIO;
	tier__store_complete(op, rc);
}

static void finish(struct local_be *L, struct tier_store_op *op, int rc, uint64_t due)
{
	struct delayed d = { .due = due, .op = op, .result = rc };

	if (due <= tier__now_ns()) {
		complete(L, op, rc);
		return;
	}
	pthread_mutex_lock(&L->dlock);
	d.seq = ++L->dseq;
	if (dheap_push(&L->heap, &L->nheap, &L->capheap, d) < 0) {
		pthread_mutex_unlock(&L->dlock);
		complete(L, op, rc);   /* late is worse than early here */
		return;
	}
	if (L->heap[0].op == op)
		pthread_cond_signal(&L->dcond);
	pthread_mutex_unlock(&L->dlock);
}

static void *delayer_main(void *arg)
{
	struct local_be *L = arg;

	pthread_mutex_lock(&L->dlock);
	for (;;) {
		struct timespec ts;
		uint64_t due;

		if (L->nheap == 0) {
			if (L->dstop)
				break;
			pthread_cond_wait(&L->dcond, &L->dlock);
			continue;
		}
		due = L->heap[0].due;
		if (due <= tier__now_ns()) {
			struct delayed d = dheap_pop(L->heap, &L->nheap);

			pthread_mutex_unlock(&L->dlock);
			complete(L, d.op, d.result);
			pthread_mutex_lock(&L->dlock);
			continue;
		}
		ts.tv_sec = (time_t)(due / 1000000000ull);
		ts.tv_nsec = (long)(due % 1000000000ull);
		pthread_cond_timedwait(&L->dcond, &L->dlock, &ts);
	}
	pthread_mutex_unlock(&L->dlock);
	return NULL;
}

/* ---- worker threads and the submit side ---- */

static void *worker_main(void *arg)
{
	struct local_be *L = arg;

	pthread_mutex_lock(&L->qlock);
	for (;;) {
		struct work w;
		int rc;

		while (!L->qlen && !L->stopping)
			pthread_cond_wait(&L->qcond, &L->qlock);
		if (!L->qlen)
			break;
		w = L->q[L->qhead];
		L->qhead = (L->qhead + 1) % L->qcap;
		L->qlen--;
		pthread_mutex_unlock(&L->qlock);
		rc = atomic_load(&L->dead) ? -EIO : tier__local_run(L, w.op);
		finish(L, w.op, rc, w.due);
		pthread_mutex_lock(&L->qlock);
	}
	pthread_mutex_unlock(&L->qlock);
	return NULL;
}

static int queue_grow(struct local_be *L)
{
	size_t cap = L->qcap ? L->qcap * 2 : 256;
	struct work *nq = malloc(cap * sizeof(*nq));

	if (!nq)
		return -ENOMEM;
	for (size_t i = 0; i < L->qlen; i++)
		nq[i] = L->q[(L->qhead + i) % L->qcap];
	free(L->q);
	L->q = nq;
	L->qcap = cap;
	L->qhead = 0;
	return 0;
}

/* Runs on the owner's thread inside tier_store_submit(). */
static int local_submit(void *be, struct tier_store_op *op)
{
	struct local_be *L = be;
	bool rw = op->opcode == TIER_STORE_READ || op->opcode == TIER_STORE_WRITE;
	struct work w = { .op = op };
	uint64_t now = tier__now_ns();
	int rc = 0;

	if (rw && op->len > INT_MAX)
		return -EINVAL;   /* the result (bytes) must fit an int */
	/*
	 * No device model to pace it and nothing that can block: run it here
	 * and save two thread hops (to a worker and back to the loop).  It still
	 * completes through the queue, never inside this call.
	 */
	if (tier__local_inline_ok(L, op) && !tier__store_added_latency_us(op->store) &&
	    !atomic_load(&L->dead)) {
		bool ran;

		rc = tier__local_run_inline(L, op, &ran);
		if (ran) {
			complete(L, op, rc);
			return 0;
		}
		rc = 0;
	}
	w.due = now;
	if (L->dm)
		w.due = tier_devmodel_schedule(L->dm, now,
					       op->opcode != TIER_STORE_READ &&
					       op->opcode != TIER_STORE_STAT &&
					       op->opcode != TIER_STORE_LIST &&
					       op->opcode != TIER_STORE_SCAN,
					       rw ? op->len : 0);
	w.due += (uint64_t)tier__store_added_latency_us(op->store) * 1000u;
	pthread_mutex_lock(&L->qlock);
	if (L->qlen == L->qcap)
		rc = queue_grow(L);
	if (rc == 0) {
		L->q[(L->qhead + L->qlen) % L->qcap] = w;
		L->qlen++;
		pthread_cond_signal(&L->qcond);
	}
	pthread_mutex_unlock(&L->qlock);
	return rc;
}

static void local_destroy(void *be)
{
	struct local_be *L = be;

	if (!L)
		return;
	pthread_mutex_lock(&L->qlock);
	L->stopping = true;
	pthread_cond_broadcast(&L->qcond);
	pthread_mutex_unlock(&L->qlock);
	for (unsigned i = 0; i < L->nstarted; i++)
		pthread_join(L->workers[i], NULL);
	if (L->dstarted) {
		pthread_mutex_lock(&L->dlock);
		L->dstop = true;
		pthread_cond_signal(&L->dcond);
		pthread_mutex_unlock(&L->dlock);
		pthread_join(L->delayer, NULL);
	}
	/* before the locks go: it stores deferred records (crash simulation: not once dead) */
	tier__fdc_destroy(L->fdc);
	for (int i = 0; i < LOCAL_STRIPES; i++)
		pthread_mutex_destroy(&L->stripes[i]);
	pthread_mutex_destroy(&L->crash_lock);
	pthread_mutex_destroy(&L->qlock);
	pthread_cond_destroy(&L->qcond);
	pthread_mutex_destroy(&L->dlock);
	pthread_cond_destroy(&L->dcond);
	if (L->dirfd >= 0)
		close(L->dirfd);
	tier_devmodel_destroy(L->dm);
	free(L->workers);
	free(L->q);
	free(L->heap);
	free(L);
}

static void local_get_stats(void *be, struct tier_store_stats *out)
{
	struct local_be *L = be;

	out->syncs = atomic_load(&L->syncs);
	out->pend_listed = atomic_load(&L->pend_writes);
	out->pend_settled = atomic_load(&L->pend_settles);
	out->pend_kept = atomic_load(&L->pend_kept);
	out->pend_dropped = atomic_load(&L->pend_dropped);
	out->meta_deferred = atomic_load(&L->meta_deferred);
	out->meta_stored_late = atomic_load(&L->meta_stored_late);
}

static const struct tier_store_ops local_ops = {
	.size = sizeof(struct tier_store_ops),
	.name = "local",
	.read = local_submit,
	.write = local_submit,
	.zero = local_submit,
	.setmeta = local_submit,
	.remove = local_submit,
	.stat = local_submit,
	.list = local_submit,
	.destroy = local_destroy,
	.get_stats = local_get_stats,
	.scan = local_submit,
};

bool tier__local_dir_offsets_stable(long f_type, const char *release)
{
	unsigned maj = 0, mnr = 0;

	switch (f_type) {
	case EXT4_SUPER_MAGIC:   /* hash (htree) or block-offset cookies */
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:  /* dir index numbers */
		return true;
	case TMPFS_MAGIC:        /* stable offsets since 6.6 (simple_offset) */
		return release && sscanf(release, "%u.%u", &maj, &mnr) == 2 &&
		       (maj > 6 || (maj == 6 && mnr >= 6));
	default:
		return false;
	}
}

static int sync_parent(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash && slash != path ? strndup(path, (size_t)(slash - path)) :
					     strdup(slash ? "/" : ".");
	int fd, rc = 0;

	if (!dir)
		return -ENOMEM;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	free(dir);
	return rc;
}

static int mkdir_p(const char *path)
{
	char *p = strdup(path);
	int rc = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; ; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;

		*s = '\0';
		if (mkdir(p, 0700) == 0) {
			rc = sync_parent(p);   /* a new directory's name is durable too */
			if (rc < 0)
				break;
		} else if (errno != EEXIST) {
			rc = -errno;
			break;
		}
		*s = c;
		if (c == '\0')
			break;
	}
	free(p);
	return rc;
}

/*
 * Test hooks, read once at create: TIER_LOCAL_FORCE_SIDECAR=1 takes the
 * no-xattr path; TIER_LOCAL_TEST_GUARD_HOLD_US=N sleeps N us between a
 * passed guard and the op's effect, so races on the guard show up reliably.
 */
static unsigned env_guard_hold_us(void)
{
	const char *v = getenv("TIER_LOCAL_TEST_GUARD_HOLD_US");
	unsigned long n = v ? strtoul(v, NULL, 10) : 0;

	return n > 1000000 ? 1000000 : (unsigned)n;
}

static bool env_flag(const char *name)
{
	const char *v = getenv(name);

	return v && v[0] && strcmp(v, "0") != 0;
}

/* Does this filesystem take user xattrs?  TIER_LOCAL_FORCE_SIDECAR=1 says no (tests). */
static bool xattrs_usable(int dirfd)
{
	const char *force = getenv("TIER_LOCAL_FORCE_SIDECAR");
	const char *probe = ".xattr-probe";
	bool ok;
	int fd;

	if (force && strcmp(force, "1") == 0)
		return false;
	fd = openat(dirfd, probe, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	ok = fsetxattr(fd, "user.tier.probe", "1", 1, 0) == 0;
	close(fd);
	unlinkat(dirfd, probe, 0);
	return ok;
}

static int start_threads(struct local_be *L)
{
	int rc;

	rc = -pthread_create(&L->delayer, NULL, delayer_main, L);
	if (rc < 0)
		return rc;
	L->dstarted = true;
	for (; L->nstarted < L->nworkers; L->nstarted++) {
		rc = -pthread_create(&L->workers[L->nstarted], NULL, worker_main, L);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int tier_store_local_create(const char *pool_name, const struct tier_local_opts *o,
			    struct tier_cq *cq, struct tier_store **out)
{
	struct local_be *L = NULL;
	pthread_condattr_t ca;
	struct statfs sfs;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!o || !o->dir || !o->dir[0] || !pool_name || !cq)
		return -EINVAL;
	L = calloc(1, sizeof(*L));
	if (!L)
		return -ENOMEM;
	L->dirfd = -1;
	for (int i = 0; i < LOCAL_STRIPES; i++)
		pthread_mutex_init(&L->stripes[i], NULL);
	pthread_mutex_init(&L->crash_lock, NULL);
	pthread_mutex_init(&L->qlock, NULL);
	pthread_cond_init(&L->qcond, NULL);
	pthread_mutex_init(&L->dlock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&L->dcond, &ca);
	pthread_condattr_destroy(&ca);
	L->direct_io = o->direct_io;
	L->guard_hold_us = env_guard_hold_us();
	L->ordered_sync = env_flag("TIER_LOCAL_ORDERED_SYNC");
	while (!L->nonce && getrandom(&L->nonce, sizeof(L->nonce), 0) != (ssize_t)sizeof(L->nonce))
		if (errno != EINTR)
			L->nonce = ((uint64_t)getpid() << 32) ^ tier__realtime_ns();
	atomic_init(&L->direct_ok, true);
	atomic_init(&L->dead, false);
	atomic_init(&L->scan_xattrat, !env_flag("TIER_LOCAL_NO_XATTRAT"));
	L->crash_after = o->crash_after_steps;
	L->nworkers = o->workers ? o->workers : LOCAL_WORKERS;

	rc = tier__fdc_create(o->max_open_files, &L->fdc);
	if (rc < 0)
		goto out;
	tier__fdc_set_writeback(L->fdc, tier__local_rec_writeback, L);
	rc = mkdir_p(o->dir);
	if (rc < 0)
		goto out;
	L->dirfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (L->dirfd < 0) {
		rc = -errno;
		goto out;
	}
	/*
	 * What an earlier process left in the page cache (it may have been
	 * killed) was acknowledged to clients: make it durable before serving,
	 * or a FLUSH of ours would answer for writes no sync of ours covers.
	 */
	if (syncfs(L->dirfd) < 0) {
		rc = -errno;
		goto out;
	}
	atomic_init(&L->sidecar_only, !xattrs_usable(L->dirfd));
	if (fstatfs(L->dirfd, &sfs) == 0) {
		struct utsname u;

		L->mem_fs = sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC;
		L->scan_ok = tier__local_dir_offsets_stable((long)sfs.f_type,
							    uname(&u) == 0 ? u.release : NULL);
	}
	if (o->model.read_latency_us || o->model.write_latency_us ||
	    o->model.bandwidth || o->model.queue_depth || o->model.journal_bytes) {
		rc = tier_devmodel_create(&o->model, &L->dm);
		if (rc < 0)
			goto out;
	}
	L->inline_io = !L->dm && !L->direct_io && !o->no_inline && !L->crash_after &&
		       !L->guard_hold_us;
	L->workers = calloc(L->nworkers, sizeof(*L->workers));
	if (!L->workers) {
		rc = -ENOMEM;
		goto out;
	}
	rc = start_threads(L);
	if (rc < 0)
		goto out;
	L->ops = local_ops;   /* without SCAN where directory offsets may shift */
	if (!L->scan_ok)
		L->ops.scan = NULL;
	rc = tier_store_create(&L->ops, L, pool_name, cq, out);
	if (rc == 0) {
		tier_store_set_volatile_acks(*out, true);   /* the page cache */
		L = NULL;
	}
out:
	local_destroy(L);
	return rc;
}
