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
 *
 * Storage: S and M are lists of handles (two 32-bit links and a 4-bit tag,
 * queue and 2-bit frequency, per handle: 8.5 bytes a cached object); G is a
 * ghost queue (struct tier__gq, policy_pool.h: keys in a ring and an index
 * of ring positions, no links, sized to the ghosts it holds), at most 90%
 * of the capacity (or the tracked count, at least 1024), its bytes counted
 * in bytes().
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

enum s3_queue { S3_SMALL = 0, S3_MAIN };

/* A cached handle's 4-bit tag: its queue (S3_SMALL or S3_MAIN) | its frequency << 1. */
#define S3_NONE 15u
#define S3_TAG_BITS 4u

struct s3_policy {
	struct tier__policy base;
	uint64_t capacity;           /* objects; 0 = follow the tracked count */
	struct tier__hpool links;    /* S and M: struct tier__hlinks by handle */
	struct tier__hpool tag;      /* a handle's queue and frequency (4 bits), or S3_NONE */
	struct tier__klist q[2];     /* S and M, head = newest */
	struct tier__gq ghost;       /* G, oldest first */
};

static struct s3_policy *s3_of(struct tier__policy *p)
{
	return (struct s3_policy *)p;
}

static unsigned tag_of(const struct s3_policy *s, uint32_t h)
{
	return tier__htag_get(&s->tag, S3_TAG_BITS, h);
}

static void set_tag(struct s3_policy *s, uint32_t h, unsigned queue, unsigned freq)
{
	tier__htag_set(&s->tag, S3_TAG_BITS, h, queue | (freq << 1));
}

static unsigned queue_of(unsigned t)
{
	return t & 1u;
}

static unsigned freq_of(unsigned t)
{
	return t >> 1;
}

static void s3_destroy(struct tier__policy *p)
{
	struct s3_policy *s = s3_of(p);

	tier__hpool_fini(&s->links);
	tier__hpool_fini(&s->tag);
	tier__gq_fini(&s->ghost);
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

/* A cached handle to the head of M, its frequency kept. */
static void to_main(struct s3_policy *s, uint32_t h)
{
	unsigned t = tag_of(s, h);

	tier__hlist_unlink(&s->links, &s->q[queue_of(t)], h);
	set_tag(s, h, S3_MAIN, freq_of(t));
	tier__hlist_push_head(&s->links, &s->q[S3_MAIN], h);
}

static bool cached(const struct s3_policy *s, uint32_t h)
{
	return tag_of(s, h) != S3_NONE;
}

static void s3_insert(struct tier__policy *p, uint64_t key, uint32_t h, uint64_t now_ms)
{
	struct s3_policy *s = s3_of(p);
	uint32_t gi;
	enum s3_queue q;

	(void)now_ms;
	if (cached(s, h))
		return;   /* already cached: inserting again changes nothing */
	gi = tier__gq_find(&s->ghost, key);
	if (tier__hpool_reserve(&s->links, h) < 0 ||
	    tier__htag_reserve(&s->tag, S3_TAG_BITS, h) < 0)
		return;   /* out of memory: the key stays untracked */
	q = S3_SMALL;
	if (gi != TIER__KNIL) {
		/* a ghost goes straight to M, its frequency 0 */
		tier__gq_del(&s->ghost, gi);
		q = S3_MAIN;
	}
	set_tag(s, h, q, 0);
	tier__hlist_push_head(&s->links, &s->q[q], h);
}

static void s3_access(struct tier__policy *p, uint64_t key, uint32_t h, uint64_t now_ms)
{
	struct s3_policy *s = s3_of(p);
	unsigned t = tag_of(s, h);

	(void)key;
	(void)now_ms;
	if (t != S3_NONE && freq_of(t) < S3_FREQ_MAX)
		set_tag(s, h, queue_of(t), freq_of(t) + 1);
}

static void s3_remove(struct tier__policy *p, uint64_t key, uint32_t h)
{
	struct s3_policy *s = s3_of(p);
	uint64_t gmax;
	unsigned t = tag_of(s, h), q;

	if (t == S3_NONE)
		return;   /* not cached: nothing leaves */
	q = queue_of(t);
	tier__hlist_unlink(&s->links, &s->q[q], h);
	tier__htag_set(&s->tag, S3_TAG_BITS, h, S3_NONE);
	if (q == S3_MAIN)
		return;
	(void)tier__gq_push(&s->ghost, key);   /* out of memory: not remembered */
	gmax = ghost_max(s);
	while (tier__gq_count(&s->ghost) > gmax)
		tier__gq_pop(&s->ghost);
}

/* Walk state of one coldest() call over the S and M tails. */
struct s3_walk {
	uint32_t cur_s, cur_m;
	uint64_t s_eff;              /* S's size once the named victims are gone */
};

/* Put h at M's head; an exhausted M walk resumes there (CLOCK wrap). */
static void walk_to_main(struct s3_policy *s, struct s3_walk *w, uint32_t h)
{
	to_main(s, h);
	if (w->cur_m == TIER__KNIL)
		w->cur_m = h;
}

/* One step of evictS at the S cursor; returns 1 if it named a victim. */
static int step_small(struct s3_policy *s, struct s3_walk *w, uint64_t *key,
		      bool (*want)(void *arg, uint64_t key), void *arg)
{
	uint32_t h = w->cur_s;
	uint64_t k;

	w->cur_s = tier__hpool_node(&s->links, h)->prev;
	if (freq_of(tag_of(s, h)) >= S3_MOVE_THRESHOLD) {
		set_tag(s, h, S3_SMALL, 0);
		walk_to_main(s, w, h);
		w->s_eff--;
		return 0;
	}
	k = tier__policy_key(&s->base, h);
	if (want && !want(arg, k))
		return 0;
	*key = k;
	w->s_eff--;
	return 1;
}

/* One step of evictM at the M cursor; returns 1 if it named a victim. */
static int step_main(struct s3_policy *s, struct s3_walk *w, uint64_t *key,
		     bool (*want)(void *arg, uint64_t key), void *arg)
{
	uint32_t h = w->cur_m;
	unsigned t = tag_of(s, h);
	uint64_t k;

	w->cur_m = tier__hpool_node(&s->links, h)->prev;
	if (freq_of(t) > 0) {
		set_tag(s, h, S3_MAIN, freq_of(t) - 1);
		walk_to_main(s, w, h);
		return 0;
	}
	k = tier__policy_key(&s->base, h);
	if (want && !want(arg, k))
		return 0;
	*key = k;
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
	return tier__gq_find(&s3_of(p)->ghost, key) != TIER__KNIL;
}

static size_t s3_bytes(const struct tier__policy *p)
{
	const struct s3_policy *s = (const struct s3_policy *)p;

	return sizeof(*s) + tier__hpool_bytes(&s->links) + tier__hpool_bytes(&s->tag) +
	       tier__gq_bytes(&s->ghost);
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

int tier__policy_s3fifo_create(const struct tier__policy_host *host, uint64_t capacity_objects,
			       struct tier__policy **out)
{
	struct s3_policy *s = NULL;
	int rc = 0;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s) {
		rc = -ENOMEM;
		goto out;
	}
	tier__hpool_init(&s->links, sizeof(struct tier__hlinks));
	tier__hpool_init(&s->tag, 1);   /* 2 handles a byte */
	rc = tier__gq_init(&s->ghost);
	if (rc < 0)
		goto out;
	s->base.ops = &s3_ops;
	s->base.host = *host;
	s->capacity = capacity_objects;
	tier__klist_init(&s->q[S3_SMALL]);
	tier__klist_init(&s->q[S3_MAIN]);
	*out = &s->base;
	s = NULL;
out:
	if (s) {
		tier__gq_fini(&s->ghost);
		free(s);
	}
	return rc;
}
