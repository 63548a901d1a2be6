/* SPDX-License-Identifier: MIT */
/*
 * libtier/policy_s3fifo.c - S3-FIFO eviction order (Yang et al., "FIFO
 * queues are all you need for cache eviction", SOSP'23): a small FIFO S of
 * about 10% of the capacity where new objects land, a main FIFO M, and a
 * ghost FIFO G remembering keys recently evicted from S.  Objects hit while
 * in S are promoted to M when they reach S's tail; the rest are the victims
 * (one-hit wonders go first).  M is a 2-bit CLOCK: a hit object is
 * reinserted with its counter decremented.  A key found in G on insert goes
 * straight to M.  coldest() only names victims (the agent may not be able
 * to evict them all); it moves objects between queues as the algorithm
 * would, but a key leaves the policy only through remove(), and only a key
 * removed from S is remembered in G.  Never touches the store.
 */
#include <errno.h>
#include <stdlib.h>

#include "libtier/policy.h"
#include "libtier/policy_pool.h"

#define S3_FREQ_MAX        3u
/*
 * Hits needed while in S to move to M.  The insertion (a promotion, itself
 * caused by an access) does not count; one further hit means the object
 * was accessed more than once, as libCacheSim's S3FIFO (threshold 1).
 */
#define S3_MOVE_THRESHOLD  1u
#define S3_MIN_GHOST       1024u

enum s3_queue { S3_SMALL = 0, S3_MAIN, S3_GHOST };

struct s3_node {
	struct tier__knode n;
	uint8_t queue;
	uint8_t freq;
};

struct s3_policy {
	struct tier__policy base;
	uint64_t capacity;           /* objects; 0 = follow the tracked count */
	struct tier__kpool pool;
	struct tier__klist q[3];     /* head = newest */
};

static struct s3_policy *s3_of(struct tier__policy *p)
{
	return (struct s3_policy *)p;
}

static struct s3_node *s3_node(const struct s3_policy *s, uint32_t idx)
{
	return (struct s3_node *)(void *)tier__kpool_node(&s->pool, idx);
}

static void s3_destroy(struct tier__policy *p)
{
	struct s3_policy *s = s3_of(p);

	tier__kpool_fini(&s->pool);
	free(s);
}

static uint64_t small_target(const struct s3_policy *s)
{
	uint64_t total = s->capacity ? s->capacity
				     : (uint64_t)s->q[S3_SMALL].count + s->q[S3_MAIN].count;
	uint64_t t = total / 10;

	return t ? t : 1;
}

static uint64_t ghost_max(const struct s3_policy *s)
{
	uint64_t g;

	if (s->capacity)
		return s->capacity - s->capacity / 10;
	g = (uint64_t)s->q[S3_SMALL].count + s->q[S3_MAIN].count;
	return g < S3_MIN_GHOST ? S3_MIN_GHOST : g;
}

static void move_to(struct s3_policy *s, uint32_t idx, enum s3_queue to)
{
	struct s3_node *n = s3_node(s, idx);

	tier__klist_unlink(&s->pool, &s->q[n->queue], idx);
	n->queue = (uint8_t)to;
	tier__klist_push_head(&s->pool, &s->q[to], idx);
}

static void s3_insert(struct tier__policy *p, uint64_t key, uint64_t now_ms)
{
	struct s3_policy *s = s3_of(p);
	uint32_t idx = tier__kpool_find(&s->pool, key);

	(void)now_ms;
	if (idx != TIER__KNIL) {
		struct s3_node *n = s3_node(s, idx);

		if (n->queue != S3_GHOST)
			return;   /* already cached: inserting again changes nothing */
		n->freq = 0;
		move_to(s, idx, S3_MAIN);
		return;
	}
	if (tier__kpool_add(&s->pool, key, &idx) < 0)
		return;   /* out of memory: the key stays untracked */
	s3_node(s, idx)->queue = S3_SMALL;
	tier__klist_push_head(&s->pool, &s->q[S3_SMALL], idx);
}

static void s3_access(struct tier__policy *p, uint64_t key, uint64_t now_ms)
{
	struct s3_policy *s = s3_of(p);
	uint32_t idx = tier__kpool_find(&s->pool, key);
	struct s3_node *n;

	(void)now_ms;
	if (idx == TIER__KNIL)
		return;
	n = s3_node(s, idx);
	if (n->queue != S3_GHOST && n->freq < S3_FREQ_MAX)
		n->freq++;
}

static void s3_remove(struct tier__policy *p, uint64_t key)
{
	struct s3_policy *s = s3_of(p);
	uint32_t idx = tier__kpool_find(&s->pool, key);
	struct s3_node *n;
	uint64_t gmax;

	if (idx == TIER__KNIL)
		return;
	n = s3_node(s, idx);
	if (n->queue == S3_GHOST)
		return;   /* not cached: nothing leaves */
	if (n->queue == S3_MAIN) {
		tier__klist_unlink(&s->pool, &s->q[S3_MAIN], idx);
		tier__kpool_del(&s->pool, idx);
		return;
	}
	n->freq = 0;
	move_to(s, idx, S3_GHOST);
	gmax = ghost_max(s);
	while (s->q[S3_GHOST].count > gmax) {
		uint32_t t = s->q[S3_GHOST].tail;

		tier__klist_unlink(&s->pool, &s->q[S3_GHOST], t);
		tier__kpool_del(&s->pool, t);
	}
}

/* Walk state of one coldest() call over the S and M tails. */
struct s3_walk {
	uint32_t cur_s, cur_m;
	uint64_t s_eff;              /* S's size once the named victims are gone */
};

/* Put idx at M's head; an exhausted M walk resumes there (CLOCK wrap). */
static void walk_to_main(struct s3_policy *s, struct s3_walk *w, uint32_t idx)
{
	move_to(s, idx, S3_MAIN);
	if (w->cur_m == TIER__KNIL)
		w->cur_m = idx;
}

/* One step of evictS at the S cursor; returns 1 if it named a victim. */
static int step_small(struct s3_policy *s, struct s3_walk *w, uint64_t *key,
		      bool (*want)(void *arg, uint64_t key), void *arg)
{
	uint32_t idx = w->cur_s;
	struct s3_node *n = s3_node(s, idx);

	w->cur_s = n->n.prev;
	if (n->freq >= S3_MOVE_THRESHOLD) {
		n->freq = 0;
		walk_to_main(s, w, idx);
		w->s_eff--;
		return 0;
	}
	if (want && !want(arg, n->n.key))
		return 0;
	*key = n->n.key;
	w->s_eff--;
	return 1;
}

/* One step of evictM at the M cursor; returns 1 if it named a victim. */
static int step_main(struct s3_policy *s, struct s3_walk *w, uint64_t *key,
		     bool (*want)(void *arg, uint64_t key), void *arg)
{
	uint32_t idx = w->cur_m;
	struct s3_node *n = s3_node(s, idx);

	w->cur_m = n->n.prev;
	if (n->freq > 0) {
		n->freq--;
		walk_to_main(s, w, idx);
		return 0;
	}
	if (want && !want(arg, n->n.key))
		return 0;
	*key = n->n.key;
	return 1;
}

static size_t s3_coldest(struct tier__policy *p, uint64_t *keys, size_t max,
			 bool (*want)(void *arg, uint64_t key), void *arg)
{
	struct s3_policy *s = s3_of(p);
	struct s3_walk w = {
		.cur_s = s->q[S3_SMALL].tail,
		.cur_m = s->q[S3_MAIN].tail,
		.s_eff = s->q[S3_SMALL].count,
	};
	uint64_t target = small_target(s);
	/* every node is visited at most FREQ_MAX + 2 times: a safe bound */
	uint64_t budget = ((uint64_t)s->q[S3_SMALL].count + s->q[S3_MAIN].count) *
			  (S3_FREQ_MAX + 2) + 1;
	size_t n = 0;

	while (n < max && budget-- > 0) {
		bool small = w.cur_s != TIER__KNIL &&
			     (w.s_eff >= target || w.cur_m == TIER__KNIL);

		if (small)
			n += (size_t)step_small(s, &w, &keys[n], want, arg);
		else if (w.cur_m != TIER__KNIL)
			n += (size_t)step_main(s, &w, &keys[n], want, arg);
		else
			break;
	}
	return n;
}

static bool s3_admit(struct tier__policy *p, uint64_t key)
{
	struct s3_policy *s = s3_of(p);
	uint32_t idx = tier__kpool_find(&s->pool, key);

	return idx != TIER__KNIL && s3_node(s, idx)->queue == S3_GHOST;
}

static size_t s3_bytes(const struct tier__policy *p)
{
	const struct s3_policy *s = (const struct s3_policy *)p;

	return sizeof(*s) + tier__kpool_bytes(&s->pool);
}

static const struct tier__policy_ops s3_ops = {
	.name = "s3fifo",
	.destroy = s3_destroy,
	.insert = s3_insert,
	.access = s3_access,
	.remove = s3_remove,
	.coldest = s3_coldest,
	.admit = s3_admit,
	.bytes = s3_bytes,
};

int tier__policy_s3fifo_create(uint64_t capacity_objects, struct tier__policy **out)
{
	struct s3_policy *s = NULL;
	uint64_t initial;
	int rc = 0;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s) {
		rc = -ENOMEM;
		goto out;
	}
	/* room for the cache and its ghosts up front; the pool still grows */
	initial = capacity_objects ? capacity_objects * 2 : 1024;
	if (initial > (1u << 20))
		initial = 1u << 20;
	rc = tier__kpool_init(&s->pool, sizeof(struct s3_node), (uint32_t)initial);
	if (rc < 0)
		goto out;
	s->base.ops = &s3_ops;
	s->capacity = capacity_objects;
	for (int i = 0; i < 3; i++)
		tier__klist_init(&s->q[i]);
	*out = &s->base;
	s = NULL;
out:
	if (s) {
		tier__kpool_fini(&s->pool);
		free(s);
	}
	return rc;
}
