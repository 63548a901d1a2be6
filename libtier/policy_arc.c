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
 * admit its miss as if recency said so (dispatch.c asks once per piece).
 * coldest() only names victims; a key leaves the cache through remove()
 * (and becomes a ghost).  Never touches the store.
 */
#include <errno.h>
#include <stdlib.h>

#include "libtier/policy.h"
#include "libtier/policy_pool.h"

enum arc_list { ARC_T1 = 0, ARC_T2, ARC_B1, ARC_B2 };

struct arc_node {
	struct tier__knode n;
	uint8_t list;
};

struct arc_policy {
	struct tier__policy base;
	struct tier__kpool pool;
	struct tier__klist l[4];     /* head = most recent */
	uint64_t p;                  /* target size of T1, in objects */
	uint64_t c;                  /* the most objects cached at once: ARC's c */
};

static struct arc_policy *arc_of(struct tier__policy *p)
{
	return (struct arc_policy *)p;
}

static struct arc_node *arc_node(const struct arc_policy *a, uint32_t idx)
{
	return (struct arc_node *)(void *)tier__kpool_node(&a->pool, idx);
}

static void arc_destroy(struct tier__policy *p)
{
	struct arc_policy *a = arc_of(p);

	tier__kpool_fini(&a->pool);
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

static void move_to(struct arc_policy *a, uint32_t idx, enum arc_list to)
{
	struct arc_node *n = arc_node(a, idx);

	tier__klist_unlink(&a->pool, &a->l[n->list], idx);
	n->list = (uint8_t)to;
	tier__klist_push_head(&a->pool, &a->l[to], idx);
}

static void drop_tail(struct arc_policy *a, enum arc_list which)
{
	uint32_t t = a->l[which].tail;

	tier__klist_unlink(&a->pool, &a->l[which], t);
	tier__kpool_del(&a->pool, t);
}

static void trim_ghosts(struct arc_policy *a)
{
	uint64_t c = arc_c(a);

	while (a->l[ARC_B1].count && (uint64_t)a->l[ARC_T1].count + a->l[ARC_B1].count > c)
		drop_tail(a, ARC_B1);
	while (a->l[ARC_B2].count &&
	       (uint64_t)a->l[ARC_T1].count + a->l[ARC_T2].count + a->l[ARC_B1].count +
	       a->l[ARC_B2].count > 2 * c)
		drop_tail(a, ARC_B2);
	while (a->l[ARC_B1].count &&
	       (uint64_t)a->l[ARC_T1].count + a->l[ARC_T2].count + a->l[ARC_B1].count > 2 * c)
		drop_tail(a, ARC_B1);
	if (a->p > c)
		a->p = c;
}

static void arc_insert(struct tier__policy *p, uint64_t key, uint64_t now_ms)
{
	struct arc_policy *a = arc_of(p);
	uint32_t idx = tier__kpool_find(&a->pool, key);
	uint64_t b1, b2, d;

	(void)now_ms;
	if (idx == TIER__KNIL) {
		if (tier__kpool_add(&a->pool, key, &idx) < 0)
			return;   /* out of memory: the key stays untracked */
		arc_node(a, idx)->list = ARC_T1;
		tier__klist_push_head(&a->pool, &a->l[ARC_T1], idx);
		trim_ghosts(a);
		return;
	}
	b1 = a->l[ARC_B1].count;
	b2 = a->l[ARC_B2].count;
	switch (arc_node(a, idx)->list) {
	case ARC_B1:
		d = b1 && b2 > b1 ? b2 / b1 : 1;
		a->p = a->p + d;
		break;
	case ARC_B2:
		d = b2 && b1 > b2 ? b1 / b2 : 1;
		a->p = a->p > d ? a->p - d : 0;
		break;
	default:
		return;   /* already cached: inserting again changes nothing */
	}
	move_to(a, idx, ARC_T2);
	trim_ghosts(a);
}

static void arc_access(struct tier__policy *p, uint64_t key, uint64_t now_ms)
{
	struct arc_policy *a = arc_of(p);
	uint32_t idx = tier__kpool_find(&a->pool, key);

	(void)now_ms;
	if (idx == TIER__KNIL || arc_node(a, idx)->list >= ARC_B1)
		return;
	move_to(a, idx, ARC_T2);
}

static void arc_remove(struct tier__policy *p, uint64_t key)
{
	struct arc_policy *a = arc_of(p);
	uint32_t idx = tier__kpool_find(&a->pool, key);
	uint8_t list;

	if (idx == TIER__KNIL)
		return;
	list = arc_node(a, idx)->list;
	if (list >= ARC_B1)
		return;   /* not cached: nothing leaves */
	move_to(a, idx, list == ARC_T1 ? ARC_B1 : ARC_B2);
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
		uint32_t idx = from_t1 ? c1 : c2;
		struct arc_node *node = arc_node(a, idx);

		if (from_t1) {
			c1 = node->n.prev;
			t1--;
		} else {
			c2 = node->n.prev;
		}
		if (!want || want(arg, node->n.key))
			keys[n++] = node->n.key;
	}
	return n;
}

bool tier__policy_arc_is_ghost(struct tier__policy *p, uint64_t key)
{
	struct arc_policy *a = arc_of(p);
	uint32_t idx = tier__kpool_find(&a->pool, key);

	return idx != TIER__KNIL && arc_node(a, idx)->list >= ARC_B1;
}

static bool arc_admit(struct tier__policy *p, uint64_t key)
{
	return tier__policy_arc_is_ghost(p, key);
}

static size_t arc_bytes(const struct tier__policy *p)
{
	const struct arc_policy *a = (const struct arc_policy *)p;

	return sizeof(*a) + tier__kpool_bytes(&a->pool);
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

int tier__policy_arc_create(struct tier__policy **out)
{
	struct arc_policy *a = calloc(1, sizeof(*a));

	*out = NULL;
	if (!a)
		return -ENOMEM;
	if (tier__kpool_init(&a->pool, sizeof(struct arc_node), 1024) < 0) {
		free(a);
		return -ENOMEM;
	}
	a->base.ops = &arc_ops;
	for (int i = 0; i < 4; i++)
		tier__klist_init(&a->l[i]);
	*out = &a->base;
	return 0;
}
