/* SPDX-License-Identifier: MIT */
/*
 * libtier/policy_lru.c - the "lru" eviction order: one list of the cached
 * objects, most recently used at the head; insert and every hit move a key
 * to the head, coldest() names keys from the tail.  The baseline every
 * other policy is measured against (tier-sim's miss/LRU).  It keeps no
 * history of keys that left, admits no hint and never touches the store.
 * A node is the two 32-bit links, indexed by the object's handle (8 bytes
 * an object); a handle is in the list if it has a predecessor or is the head.
 */
#include <errno.h>
#include <stdlib.h>

#include "libtier/policy.h"
#include "libtier/policy_pool.h"

struct lru_policy {
	struct tier__policy base;
	struct tier__hpool pool;     /* nodes are plain struct tier__hlinks */
	struct tier__klist lru;      /* head = most recently used */
};

static struct lru_policy *lru_of(struct tier__policy *p)
{
	return (struct lru_policy *)p;
}

static void lru_destroy(struct tier__policy *p)
{
	struct lru_policy *l = lru_of(p);

	tier__hpool_fini(&l->pool);
	free(l);
}

static bool tracked(const struct lru_policy *l, uint32_t h)
{
	return tier__hpool_has(&l->pool, h) &&
	       (tier__hpool_node(&l->pool, h)->prev != TIER__KNIL || l->lru.head == h);
}

static void lru_touch(struct tier__policy *p, uint32_t h, bool add)
{
	struct lru_policy *l = lru_of(p);

	if (tracked(l, h))
		tier__hlist_unlink(&l->pool, &l->lru, h);
	else if (!add || tier__hpool_reserve(&l->pool, h) < 0)
		return;   /* a hit on an untracked key, or out of memory */
	tier__hlist_push_head(&l->pool, &l->lru, h);
}

static void lru_insert(struct tier__policy *p, uint64_t key, uint32_t h, uint64_t now_ms)
{
	(void)key;
	(void)now_ms;
	lru_touch(p, h, true);
}

static void lru_access(struct tier__policy *p, uint64_t key, uint32_t h, uint64_t now_ms)
{
	(void)key;
	(void)now_ms;
	lru_touch(p, h, false);
}

static void lru_remove(struct tier__policy *p, uint64_t key, uint32_t h)
{
	struct lru_policy *l = lru_of(p);

	(void)key;
	if (tracked(l, h))
		tier__hlist_unlink(&l->pool, &l->lru, h);
}

static size_t lru_coldest(struct tier__policy *p, uint64_t *keys, size_t max,
			  bool (*want)(void *arg, uint64_t key), void *arg)
{
	struct lru_policy *l = lru_of(p);
	size_t n = 0;

	for (uint32_t h = l->lru.tail; h != TIER__KNIL && n < max;) {
		uint64_t key = tier__policy_key(p, h);

		h = tier__hpool_node(&l->pool, h)->prev;
		if (!want || want(arg, key))
			keys[n++] = key;
	}
	return n;
}

static size_t lru_bytes(const struct tier__policy *p)
{
	const struct lru_policy *l = (const struct lru_policy *)p;

	return sizeof(*l) + tier__hpool_bytes(&l->pool);
}

static const struct tier__policy_ops lru_ops = {
	.name = "lru",
	.destroy = lru_destroy,
	.insert = lru_insert,
	.access = lru_access,
	.remove = lru_remove,
	.coldest = lru_coldest,
	.admit = NULL,
	.bytes = lru_bytes,
};

int tier__policy_lru_create(const struct tier__policy_host *host, struct tier__policy **out)
{
	struct lru_policy *l = calloc(1, sizeof(*l));

	*out = NULL;
	if (!l)
		return -ENOMEM;
	tier__hpool_init(&l->pool, sizeof(struct tier__hlinks));
	l->base.ops = &lru_ops;
	l->base.host = *host;
	tier__klist_init(&l->lru);
	*out = &l->base;
	return 0;
}
