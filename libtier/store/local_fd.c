/* SPDX-License-Identifier: MIT */
/*
 * libtier/store/local_fd.c - the local backend's cache of open object files:
 * a bounded LRU of descriptors keyed by encoded name and O_DIRECT-ness, so a
 * hot object is opened once, not once per op, and the backend never holds
 * more descriptors than its share of RLIMIT_NOFILE.  It decides which idle
 * descriptor to close when the cache is full or the process runs out of
 * descriptors (EMFILE/ENFILE: close the least recently used idle one and
 * retry, so exhaustion elsewhere in the process does not fail an op while
 * the cache holds any).  It must never close a descriptor an op is using
 * (ops on one object are serialised by the stripe lock, so an entry has at
 * most one user) and never hand out a descriptor of an unlinked object
 * (do_remove drops the name first).  An entry may hold a deferred record
 * (an xattr a write left in memory, local_io.c): the cache stores it before
 * it closes the descriptor, and keeps an entry whose record it could not
 * store (closing it would lose the object's newest version).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "store_internal.h"
#include "local.h"

struct fdent {
	struct fdent *hnext;          /* bucket chain */
	struct fdent *prev, *next;    /* LRU: head = most recent */
	int fd;
	bool direct, busy;
	uint8_t tag;                  /* the caller's note on the file (local_io.c) */
	struct tier__fdc_rec rec;     /* a deferred record (len 0: none) */
	char name[];
};

struct tier__fdcache {
	pthread_mutex_t lock;
	struct fdent **bucket;
	size_t nbuckets, n, cap;
	struct fdent *head, *tail;    /* idle and busy entries alike */
	uint64_t hits, misses, evictions;
	tier__fdc_writeback_fn writeback;
	void *wb_arg;
	atomic_uint_fast64_t ndeferred;   /* entries with rec.len > 0 */
};

size_t tier__fdc_default_cap(void)
{
	struct rlimit rl;
	size_t lim = 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		lim = rl.rlim_cur == RLIM_INFINITY ? (size_t)1 << 20 : (size_t)rl.rlim_cur;
	/* two pools share the process with sockets, logs, the admin socket */
	lim = lim > 128 ? (lim - 128) / 4 : 8;
	if (lim < 8)
		lim = 8;
	return lim > 65536 ? 65536 : lim;
}

int tier__fdc_create(size_t cap, struct tier__fdcache **out)
{
	struct tier__fdcache *f;

	*out = NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->cap = cap ? cap : tier__fdc_default_cap();
	f->nbuckets = 64;
	while (f->nbuckets < f->cap * 2)
		f->nbuckets *= 2;
	f->bucket = calloc(f->nbuckets, sizeof(*f->bucket));
	if (!f->bucket) {
		free(f);
		return -ENOMEM;
	}
	pthread_mutex_init(&f->lock, NULL);
	atomic_init(&f->ndeferred, 0);
	*out = f;
	return 0;
}

static struct fdent **slot(struct tier__fdcache *f, const char *name, bool direct)
{
	size_t b = (size_t)(tier__hash_str(name) ^ (direct ? 0x9e3779b9u : 0)) & (f->nbuckets - 1);
	struct fdent **p = &f->bucket[b];

	while (*p && ((*p)->direct != direct || strcmp((*p)->name, name)))
		p = &(*p)->hnext;
	return p;
}

static void lru_unlink(struct tier__fdcache *f, struct fdent *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		f->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		f->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push(struct tier__fdcache *f, struct fdent *e)
{
	e->prev = NULL;
	e->next = f->head;
	if (f->head)
		f->head->prev = e;
	else
		f->tail = e;
	f->head = e;
}

/* Take e out of the table and the LRU; returns its descriptor. */
static int remove_ent(struct tier__fdcache *f, struct fdent *e)
{
	struct fdent **p = slot(f, e->name, e->direct);
	int fd = e->fd;

	*p = e->hnext;
	lru_unlink(f, e);
	f->n--;
	if (e->rec.len)
		atomic_fetch_sub(&f->ndeferred, 1);
	free(e->rec.buf);
	free(e);
	return fd;
}

/* Store e's deferred record, if any: 0, or the writeback's -errno (kept). */
static int store_rec(struct tier__fdcache *f, struct fdent *e)
{
	int rc;

	if (!e->rec.len)
		return 0;
	rc = f->writeback ? f->writeback(f->wb_arg, e->fd, e->rec.buf, e->rec.len) : -ENOTSUP;
	if (rc == 0)
		tier__fdc_rec_clear(f, &e->rec);
	return rc;
}

/*
 * The least recently used idle entry's descriptor, taken out; -1 if none.
 * Its deferred record is stored first (under the lock: no op can take the
 * entry, or open the file anew and read the older record, meanwhile); an
 * entry whose record cannot be stored stays.
 */
static int evict_one(struct tier__fdcache *f)
{
	struct fdent *e;

	for (e = f->tail; e; e = e->prev)
		if (!e->busy && store_rec(f, e) == 0) {
			f->evictions++;
			return remove_ent(f, e);
		}
	return -1;
}

int tier__fdc_get_rec(struct tier__fdcache *f, const char *name, bool direct, uint8_t *tag,
		      struct tier__fdc_rec **rec)
{
	struct fdent *e;
	int fd = -ENOENT;

	*tag = 0;
	*rec = NULL;
	pthread_mutex_lock(&f->lock);
	e = *slot(f, name, direct);
	if (e && !e->busy) {
		e->busy = true;
		lru_unlink(f, e);
		lru_push(f, e);
		fd = e->fd;
		*tag = e->tag;
		*rec = &e->rec;
		f->hits++;
	} else {
		f->misses++;
	}
	pthread_mutex_unlock(&f->lock);
	return fd;
}

int tier__fdc_get_tag(struct tier__fdcache *f, const char *name, bool direct, uint8_t *tag)
{
	struct tier__fdc_rec *rec;

	return tier__fdc_get_rec(f, name, direct, tag, &rec);
}

int tier__fdc_rec_reserve(struct tier__fdc_rec *rec, uint32_t len)
{
	uint8_t *nb;

	if (len <= rec->cap)
		return 0;
	if (!(nb = realloc(rec->buf, len)))
		return -ENOMEM;
	rec->buf = nb;
	rec->cap = len;
	return 0;
}

void tier__fdc_rec_set(struct tier__fdcache *f, struct tier__fdc_rec *rec, uint32_t len)
{
	if (!rec->len)
		atomic_fetch_add(&f->ndeferred, 1);
	rec->len = len;
}

void tier__fdc_rec_clear(struct tier__fdcache *f, struct tier__fdc_rec *rec)
{
	if (rec->len)
		atomic_fetch_sub(&f->ndeferred, 1);
	rec->len = 0;
}

uint64_t tier__fdc_deferred(struct tier__fdcache *f)
{
	return atomic_load(&f->ndeferred);
}

void tier__fdc_set_writeback(struct tier__fdcache *f, tier__fdc_writeback_fn fn, void *arg)
{
	f->writeback = fn;
	f->wb_arg = arg;
}

int tier__fdc_writeback_name(struct tier__fdcache *f, const char *name)
{
	struct fdent *e;
	int rc = 0;

	if (!atomic_load(&f->ndeferred))
		return 0;
	pthread_mutex_lock(&f->lock);
	e = *slot(f, name, false);
	if (e && !e->busy)
		rc = store_rec(f, e);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

int tier__fdc_get(struct tier__fdcache *f, const char *name, bool direct)
{
	uint8_t tag;

	return tier__fdc_get_tag(f, name, direct, &tag);
}

void tier__fdc_put(struct tier__fdcache *f, const char *name, bool direct, int fd)
{
	tier__fdc_put_tag(f, name, direct, fd, 0);
}

void tier__fdc_put_tag(struct tier__fdcache *f, const char *name, bool direct, int fd,
		       uint8_t tag)
{
	struct fdent **p, *e;
	int victim = -1;

	pthread_mutex_lock(&f->lock);
	p = slot(f, name, direct);
	if (*p) {
		e = *p;
		if (e->fd == fd) {          /* the entry we got: idle again */
			e->busy = false;
			e->tag = tag;
			pthread_mutex_unlock(&f->lock);
			return;
		}
		/* cannot happen under the stripe lock; keep the cached one */
		e->tag = 0;
		pthread_mutex_unlock(&f->lock);
		close(fd);
		return;
	}
	if (f->n >= f->cap) {
		victim = evict_one(f);
		/* p may point into the entry just freed (its bucket chain link) */
		p = slot(f, name, direct);
	}
	if (f->n >= f->cap || !(e = calloc(1, sizeof(*e) + strlen(name) + 1))) {
		pthread_mutex_unlock(&f->lock);
		if (victim >= 0)
			close(victim);
		close(fd);                  /* full of busy entries: do not cache */
		return;
	}
	strcpy(e->name, name);
	e->fd = fd;
	e->direct = direct;
	e->busy = false;
	e->tag = tag;
	e->hnext = NULL;
	*p = e;
	lru_push(f, e);
	f->n++;
	pthread_mutex_unlock(&f->lock);
	if (victim >= 0)
		close(victim);
}

void tier__fdc_forget(struct tier__fdcache *f, const char *name, int fd)
{
	int close_fds[2], n = 0;

	pthread_mutex_lock(&f->lock);
	for (int d = 0; d < 2; d++) {
		struct fdent *e = *slot(f, name, d);

		if (e) {
			if (e->fd == fd)
				fd = -1;    /* closed below with the entry */
			store_rec(f, e);   /* none (a REMOVE stores it first); harmless on an unlinked file */
			close_fds[n++] = remove_ent(f, e);
		}
	}
	pthread_mutex_unlock(&f->lock);
	for (int i = 0; i < n; i++)
		close(close_fds[i]);
	if (fd >= 0)
		close(fd);
}

bool tier__fdc_shrink(struct tier__fdcache *f)
{
	int fd;

	pthread_mutex_lock(&f->lock);
	fd = evict_one(f);
	pthread_mutex_unlock(&f->lock);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

void tier__fdc_stats(struct tier__fdcache *f, struct tier__fdc_stats *st)
{
	pthread_mutex_lock(&f->lock);
	st->open = f->n;
	st->cap = f->cap;
	st->hits = f->hits;
	st->misses = f->misses;
	st->evictions = f->evictions;
	pthread_mutex_unlock(&f->lock);
}

void tier__fdc_destroy(struct tier__fdcache *f)
{
	if (!f)
		return;
	/* a clean shutdown leaves every record as the ops saw it (a failure: the older one, same extents) */
	while (f->head) {
		store_rec(f, f->head);
		close(remove_ent(f, f->head));
	}
	pthread_mutex_destroy(&f->lock);
	free(f->bucket);
	free(f);
}
