/* SPDX-License-Identifier: MIT */
/*
 * libtier/policy_lru.c - the "lru" eviction order: one list of the cached
 * objects, most recently used at the head; insert and every hit move a key
 * to the head, coldest() names keys from the tail.  The baseline every
 * other policy is measured against (tier-sim's miss/LRU).  It keeps no
 * history of keys that left, admits no hint and never touches the store.
 */
#include <errno.h>
#include <stdlib.h>

#include "libtier/policy.h"
#include "libtier/policy_pool.h"

struct lru_policy {
	struct tier__policy base;
	struct tier__kpool pool;     /* nodes are plain struct tier__knode */
	struct tier__klist lru;      /* head = most recently used */
};

static struct lru_policy *lru_of(struct tier__policy *p)
{
	return (struct lru_policy *)p;
}

static void lru_destroy(struct tier__policy *p)
{
	struct lru_policy *l = lru_of(p);

	tier__kpool_fini(&l->pool);
	free(l);
}

static void lru_touch(struct tier__policy *p, uint64_t key, bool add)
{
	struct lru_policy *l = lru_of(p);
	uint32_t idx = tier__kpool_find(&l->pool, key);

	if (idx != TIER__KNIL)
		tier__klist_unlink(&l->pool, &l->lru, idx);
	else if (!add || tier__kpool_add(&l->pool, key, &idx) < 0)
		return;   /* a hit on an untracked key, or out of memory */
	tier__klist_push_head(&l->pool, &l->lru, idx);
}

static void lru_insert(struct tier__policy *p, uint64_t key, uint64_t now_ms)
{
	(void)now_ms;
	lru_touch(p, key, true);
}

static void lru_access(struct tier__policy *p, uint64_t key, uint64_t now_ms)
{
	(void)now_ms;
	lru_touch(p, key, false);
}

static void lru_remove(struct tier__policy *p, uint64_t key)
{
	struct lru_policy *l = lru_of(p);
	uint32_t idx = tier__kpool_find(&l->pool, key);

	if (idx == TIER__KNIL)
		return;
	tier__klist_unlink(&l->pool, &l->lru, idx);
	tier__kpool_del(&l->pool, idx);
}

static size_t lru_coldest(struct tier__policy *p, uint64_t *keys, size_t max,
			  bool (*want)(void *arg, uint64_t key), void *arg)
{
	struct lru_policy *l = lru_of(p);
	size_t n = 0;

	for (uint32_t idx = l->lru.tail; idx != TIER__KNIL && n < max;) {
		struct tier__knode *node = tier__kpool_node(&l->pool, idx);

		idx = node->prev;
		if (!want || want(arg, node->key))
			keys[n++] = node->key;
	}
	return n;
}

static size_t lru_bytes(const struct tier__policy *p)
{
	const struct lru_policy *l = (const struct lru_policy *)p;

	return sizeof(*l) + tier__kpool_bytes(&l->pool);
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

int tier__policy_lru_create(struct tier__policy **out)
{
	struct lru_policy *l = calloc(1, sizeof(*l));

	*out = NULL;
	if (!l)
		return -ENOMEM;
	if (tier__kpool_init(&l->pool, sizeof(struct tier__knode), 1024) < 0) {
		free(l);
		return -ENOMEM;
	}
	l->base.ops = &lru_ops;
	tier__klist_init(&l->lru);
	*out = &l->base;
	return 0;
}
