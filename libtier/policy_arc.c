/* SPDX-License-Identifier: MIT */
/*
 * libtier/policy_arc.c - the "arc" eviction order (Megiddo and Modha,
 * "ARC: a self-tuning, low overhead replacement cache", FAST'03): T1 holds
 * objects cached and seen once since they entered, T2 those hit again; B1
 * and B2 remember the keys that last left T1 and T2 (ghosts, no data).  A
 * key inserted while in B1 means T1 was too small: the target p of T1 grows
 * by max(1, |B2|/|B1|); from B2 it shrinks by max(1, |B1|/|B2|); either way
 * the key goes to T2.  coldest() is ARC's REPLACE: T1's LRU end while |T1|
 * exceeds p, else T2's.  The capacity c is the most objects cached at once
 * (the engine's target moves live; an eviction does not shrink it); ghosts
 * are trimmed to |T1|+|B1| <= c and all four lists to 2c.  admit() is true
 * for a ghost key (B1 or B2): it left the cache recently, so the engine may
 * admit its miss as if recency said so (route.c asks once per piece).
 * coldest() only names victims; a key leaves the cache through remove()
 * (and becomes a ghost).  Never touches the store.
 *
 * Storage: T1 and T2 are lists of handles (two 32-bit links and a 2-bit
 * list tag per handle: 8.25 bytes a cached object, in chunks that follow the
 * object map's slab); B1 and B2 are ghost queues (struct tier__gq,
 * policy_pool.h: keys in a ring and an index of ring positions, no links),
 * at most c ghosts in all while the cache is at c, their bytes counted in
 * bytes().
 */
#include <errno.h>
#include <stdlib.h>

#include "libtier/policy.h"
#include "libtier/policy_pool.h"

enum arc_list { ARC_T1 = 0, ARC_T2 };
enum arc_ghost { ARC_B1 = 0, ARC_B2 };
#define ARC_NONE 3u      /* the tag of a handle in neither T1 nor T2 */
#define ARC_TAG_BITS 2u

struct arc_policy {
	struct tier__policy base;
	struct tier__hpool links;    /* T1 and T2: struct tier__hlinks by handle */
	struct tier__hpool tag;      /* a handle's list, 2 bits: ARC_T1, ARC_T2 or ARC_NONE */
	struct tier__klist l[2];     /* T1 and T2, head = most recent */
	struct tier__gq ghost[2];    /* B1 and B2, oldest first */
	uint64_t p;                  /* target size of T1, in objects */
	uint64_t c;                  /* the most objects cached at once: ARC's c */
};

static struct arc_policy *arc_of(struct tier__policy *p)
{
	return (struct arc_policy *)p;
}

static unsigned tag_of(const struct arc_policy *a, uint32_t h)
{
	return tier__htag_get(&a->tag, ARC_TAG_BITS, h);
}

static void set_tag(struct arc_policy *a, uint32_t h, unsigned t)
{
	tier__htag_set(&a->tag, ARC_TAG_BITS, h, t);
}

static void arc_destroy(struct tier__policy *p)
{
	struct arc_policy *a = arc_of(p);

	tier__hpool_fini(&a->links);
	tier__hpool_fini(&a->tag);
	tier__gq_fini(&a->ghost[ARC_B1]);
	tier__gq_fini(&a->ghost[ARC_B2]);
	free(a);
}

/* c follows the cache up; removals (evictions make room) do not shrink it. */
static uint64_t arc_c(struct arc_policy *a)
{
	uint64_t c = (uint64_t)a->l[ARC_T1].count + a->l[ARC_T2].count;

	if (c > a->c)
		a->c = c;
	return a->c ? a->c : 1;
}

/* A cached handle to the head of T2. */
static void to_t2(struct arc_policy *a, uint32_t h)
{
	tier__hlist_unlink(&a->links, &a->l[tag_of(a, h)], h);
	set_tag(a, h, ARC_T2);
	tier__hlist_push_head(&a->links, &a->l[ARC_T2], h);
}

static uint64_t ghosts(const struct arc_policy *a, enum arc_ghost which)
{
	return tier__gq_count(&a->ghost[which]);
}

/* Each ghost list forgets its least recent keys (the oldest pushed) first. */
static void trim_ghosts(struct arc_policy *a)
{
	uint64_t c = arc_c(a);
	uint64_t t1 = a->l[ARC_T1].count, t2 = a->l[ARC_T2].count;

	while (ghosts(a, ARC_B1) && t1 + ghosts(a, ARC_B1) > c)
		tier__gq_pop(&a->ghost[ARC_B1]);
	while (ghosts(a, ARC_B2) && t1 + t2 + ghosts(a, ARC_B1) + ghosts(a, ARC_B2) > 2 * c)
		tier__gq_pop(&a->ghost[ARC_B2]);
	while (ghosts(a, ARC_B1) && t1 + t2 + ghosts(a, ARC_B1) > 2 * c)
		tier__gq_pop(&a->ghost[ARC_B1]);
	if (a->p > c)
		a->p = c;
}

static bool cached(const struct arc_policy *a, uint32_t h)
{
	return tag_of(a, h) != ARC_NONE;
}

/* The ghost list key is in (ARC_B1, ARC_B2) with its position there, or NO_GHOST. */
#define NO_GHOST (-1)
static int ghost_of(const struct arc_policy *a, uint64_t key, uint32_t *pos)
{
	if ((*pos = tier__gq_find(&a->ghost[ARC_B1], key)) != TIER__KNIL)
		return ARC_B1;
	if ((*pos = tier__gq_find(&a->ghost[ARC_B2], key)) != TIER__KNIL)
		return ARC_B2;
	return NO_GHOST;
}

static int reserve(struct arc_policy *a, uint32_t h)
{
	return tier__hpool_reserve(&a->links, h) < 0 ||
	       tier__htag_reserve(&a->tag, ARC_TAG_BITS, h) < 0 ?
	       -ENOMEM : 0;
}

static void arc_insert(struct tier__policy *p, uint64_t key, uint32_t h, uint64_t now_ms)
{
	struct arc_policy *a = arc_of(p);
	uint64_t b1, b2, d;
	uint32_t gi;
	int g;

	(void)now_ms;
	if (cached(a, h))
		return;   /* already cached: inserting again changes nothing */
	g = ghost_of(a, key, &gi);
	if (reserve(a, h) < 0)
		return;   /* out of memory: the key stays untracked */
	if (g == NO_GHOST) {
		set_tag(a, h, ARC_T1);
		tier__hlist_push_head(&a->links, &a->l[ARC_T1], h);
		trim_ghosts(a);
		return;
	}
	b1 = ghosts(a, ARC_B1);
	b2 = ghosts(a, ARC_B2);
	if (g == ARC_B1) {
		d = b1 && b2 > b1 ? b2 / b1 : 1;
		a->p = a->p + d;
	} else {
		d = b2 && b1 > b2 ? b1 / b2 : 1;
		a->p = a->p > d ? a->p - d : 0;
	}
	tier__gq_del(&a->ghost[g], gi);
	set_tag(a, h, ARC_T2);
	tier__hlist_push_head(&a->links, &a->l[ARC_T2], h);
	trim_ghosts(a);
}

static void arc_access(struct tier__policy *p, uint64_t key, uint32_t h, uint64_t now_ms)
{
	struct arc_policy *a = arc_of(p);

	(void)key;
	(void)now_ms;
	if (cached(a, h))
		to_t2(a, h);
}

static void arc_remove(struct tier__policy *p, uint64_t key, uint32_t h)
{
	struct arc_policy *a = arc_of(p);
	unsigned t = tag_of(a, h);

	if (t == ARC_NONE)
		return;   /* not cached: nothing leaves */
	tier__hlist_unlink(&a->links, &a->l[t], h);
	set_tag(a, h, ARC_NONE);
	/* out of memory: not remembered */
	(void)tier__gq_push(&a->ghost[t == ARC_T1 ? ARC_B1 : ARC_B2], key);
	trim_ghosts(a);
}

static size_t arc_coldest(struct tier__policy *p, uint64_t *keys, size_t max,
			  bool (*want)(void *arg, uint64_t key), void *arg)
{
	struct arc_policy *a = arc_of(p);
	uint32_t c1 = a->l[ARC_T1].tail, c2 = a->l[ARC_T2].tail;
	uint64_t t1 = a->l[ARC_T1].count;   /* T1's size once the named victims are gone */
	size_t n = 0;

	while (n < max && (c1 != TIER__KNIL || c2 != TIER__KNIL)) {
		bool from_t1 = c1 != TIER__KNIL && (t1 > a->p || c2 == TIER__KNIL);
		uint32_t h = from_t1 ? c1 : c2;
		uint64_t key = tier__policy_key(p, h);

		if (from_t1) {
			c1 = tier__hpool_node(&a->links, h)->prev;
			t1--;
		} else {
			c2 = tier__hpool_node(&a->links, h)->prev;
		}
		if (!want || want(arg, key))
			keys[n++] = key;
	}
	return n;
}

bool tier__policy_arc_is_ghost(struct tier__policy *p, uint64_t key)
{
	uint32_t gi;

	return ghost_of(arc_of(p), key, &gi) != NO_GHOST;
}

static bool arc_admit(struct tier__policy *p, uint64_t key)
{
	return tier__policy_arc_is_ghost(p, key);
}

static size_t arc_bytes(const struct tier__policy *p)
{
	const struct arc_policy *a = (const struct arc_policy *)p;

	return sizeof(*a) + tier__hpool_bytes(&a->links) + tier__hpool_bytes(&a->tag) +
	       tier__gq_bytes(&a->ghost[ARC_B1]) + tier__gq_bytes(&a->ghost[ARC_B2]);
}

static const struct tier__policy_ops arc_ops = {
	.name = "arc",
	.destroy = arc_destroy,
	.insert = arc_insert,
	.access = arc_access,
	.remove = arc_remove,
	.coldest = arc_coldest,
	.admit = arc_admit,
	.bytes = arc_bytes,
};

uint64_t tier__policy_arc_target(const struct tier__policy *p)
{
	return ((const struct arc_policy *)p)->p;
}

int tier__policy_arc_create(const struct tier__policy_host *host, struct tier__policy **out)
{
	struct arc_policy *a = calloc(1, sizeof(*a));

	*out = NULL;
	if (!a)
		return -ENOMEM;
	tier__hpool_init(&a->links, sizeof(struct tier__hlinks));
	tier__hpool_init(&a->tag, 1);   /* 4 handles a byte */
	if (tier__gq_init(&a->ghost[ARC_B1]) < 0 || tier__gq_init(&a->ghost[ARC_B2]) < 0) {
		tier__gq_fini(&a->ghost[ARC_B1]);
		free(a);
		return -ENOMEM;
	}
	a->base.ops = &arc_ops;
	a->base.host = *host;
	tier__klist_init(&a->l[ARC_T1]);
	tier__klist_init(&a->l[ARC_T2]);
	*out = &a->base;
	return 0;
}
