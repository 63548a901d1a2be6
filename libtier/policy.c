/* SPDX-License-Identifier: MIT */
/*
 * libtier/policy.c - picks the eviction policy named by evict_policy and
 * hosts the node storage the policies share for the cached objects
 * (policy_pool.h): the handle-indexed chunks of their nodes and the
 * intrusive lists through them, so every policy operation is O(1) and
 * allocates only when a chunk is added (the ghosts' queue is
 * policy_ghost.c).  It decides nothing about which object is cold and must
 * never touch the store.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/policy.h"
#include "libtier/policy_pool.h"

int tier__policy_create(enum tier_evict_policy which, const struct tier__policy_host *host,
			const struct tier__hitsets *hs, const struct tier_params *prm,
			uint64_t capacity_objects, struct tier__policy **out)
{
	*out = NULL;
	if (!host || !host->key_of)
		return -EINVAL;
	switch (which) {
	case TIER_EVICT_HITSET:
		if (!hs || !prm)
			return -EINVAL;
		return tier__policy_hitset_create(host, hs, prm, out);
	case TIER_EVICT_S3FIFO:
		return tier__policy_s3fifo_create(host, capacity_objects, out);
	case TIER_EVICT_LRU:
		return tier__policy_lru_create(host, out);
	case TIER_EVICT_ARC:
		return tier__policy_arc_create(host, out);
	}
	return -EINVAL;
}

void tier__policy_destroy(struct tier__policy *p)
{
	if (p)
		p->ops->destroy(p);
}

size_t tier__policy_bytes(const struct tier__policy *p)
{
	return p && p->ops->bytes ? p->ops->bytes(p) : 0;
}

void tier__klist_init(struct tier__klist *l)
{
	l->head = l->tail = TIER__KNIL;
	l->count = 0;
}

void tier__hpool_init(struct tier__hpool *hp, size_t node_size)
{
	memset(hp, 0, sizeof(*hp));
	hp->node_size = node_size;
}

void tier__hpool_fini(struct tier__hpool *hp)
{
	for (uint32_t i = 0; i < hp->nchunk; i++)
		free(hp->chunk[i]);
	free(hp->chunk);
	memset(hp, 0, sizeof(*hp));
}

int tier__hpool_reserve(struct tier__hpool *hp, uint32_t h)
{
	uint32_t want = (h >> TIER__HCHUNK_SHIFT) + 1;

	while (hp->nchunk < want) {
		unsigned char *c;

		if (hp->nchunk == hp->capchunk) {
			uint32_t nc = hp->capchunk ? 2 * hp->capchunk : 16;
			unsigned char **n = realloc(hp->chunk, (size_t)nc * sizeof(*n));

			if (!n)
				return -ENOMEM;
			hp->chunk = n;
			hp->capchunk = nc;
		}
		c = malloc((size_t)TIER__HCHUNK * hp->node_size);
		if (!c)
			return -ENOMEM;
		memset(c, 0xff, (size_t)TIER__HCHUNK * hp->node_size);
		hp->chunk[hp->nchunk++] = c;
	}
	return 0;
}

size_t tier__hpool_bytes(const struct tier__hpool *hp)
{
	return (size_t)hp->nchunk * TIER__HCHUNK * hp->node_size +
	       (size_t)hp->capchunk * sizeof(*hp->chunk);
}

void tier__hlist_push_head(struct tier__hpool *hp, struct tier__klist *l, uint32_t h)
{
	struct tier__hlinks *n = tier__hpool_node(hp, h);

	n->prev = TIER__KNIL;
	n->next = l->head;
	if (l->head != TIER__KNIL)
		tier__hpool_node(hp, l->head)->prev = h;
	else
		l->tail = h;
	l->head = h;
	l->count++;
}

void tier__hlist_unlink(struct tier__hpool *hp, struct tier__klist *l, uint32_t h)
{
	struct tier__hlinks *n = tier__hpool_node(hp, h);

	if (n->prev != TIER__KNIL)
		tier__hpool_node(hp, n->prev)->next = n->next;
	else
		l->head = n->next;
	if (n->next != TIER__KNIL)
		tier__hpool_node(hp, n->next)->prev = n->prev;
	else
		l->tail = n->prev;
	n->prev = n->next = TIER__KNIL;
	l->count--;
}
