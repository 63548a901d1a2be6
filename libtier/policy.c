/* SPDX-License-Identifier: MIT */
/*
 * libtier/policy.c - picks the eviction policy named by evict_policy and
 * hosts the node storage the policies share (policy_pool.h): the
 * handle-indexed chunks of the cached objects' nodes, the keyed pool of
 * ghosts (an open-addressing index over uint64 keys) and the intrusive lists
 * by node index, so every policy operation is O(1) and allocates only when a
 * chunk is added or the ghost pool doubles.  It decides
 * nothing about which object is cold and must never touch the store.
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

static uint32_t slot_of(uint64_t key, uint32_t mask)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	key *= 0xc4ceb9fe1a85ec53ull;
	key ^= key >> 33;
	return (uint32_t)key & mask;
}

static int index_resize(struct tier__kpool *kp, uint32_t nslots)
{
	uint32_t *slots = calloc(nslots, sizeof(*slots));
	uint32_t mask = nslots - 1;

	if (!slots)
		return -ENOMEM;
	for (uint32_t i = 0; kp->slots && i <= kp->mask; i++) {
		uint32_t v = kp->slots[i], s;

		if (!v)
			continue;
		s = slot_of(tier__kpool_node(kp, v - 1)->key, mask);
		while (slots[s])
			s = (s + 1) & mask;
		slots[s] = v;
	}
	free(kp->slots);
	kp->slots = slots;
	kp->mask = mask;
	return 0;
}

int tier__kpool_init(struct tier__kpool *kp, size_t node_size, uint32_t initial)
{
	uint32_t nslots = 16;

	memset(kp, 0, sizeof(*kp));
	kp->node_size = node_size;
	kp->free_head = TIER__KNIL;
	if (initial < 16)
		initial = 16;
	while (nslots < initial + initial / 2 && nslots < (1u << 31))
		nslots <<= 1;
	kp->nodes = malloc((size_t)initial * node_size);
	if (!kp->nodes || index_resize(kp, nslots) < 0) {
		tier__kpool_fini(kp);
		return -ENOMEM;
	}
	kp->cap = initial;
	return 0;
}

void tier__kpool_fini(struct tier__kpool *kp)
{
	free(kp->nodes);
	free(kp->slots);
	memset(kp, 0, sizeof(*kp));
}

uint32_t tier__kpool_find(const struct tier__kpool *kp, uint64_t key)
{
	uint32_t s = slot_of(key, kp->mask);

	for (;;) {
		uint32_t v = kp->slots[s];

		if (!v)
			return TIER__KNIL;
		if (tier__kpool_node(kp, v - 1)->key == key)
			return v - 1;
		s = (s + 1) & kp->mask;
	}
}

static int node_alloc(struct tier__kpool *kp, uint32_t *idx)
{
	if (kp->free_head != TIER__KNIL) {
		*idx = kp->free_head;
		kp->free_head = tier__kpool_node(kp, *idx)->next;
		return 0;
	}
	if (kp->used == kp->cap) {
		uint32_t ncap = kp->cap * 2;
		unsigned char *n;

		if (kp->cap >= (1u << 30))
			return -ENOMEM;
		n = realloc(kp->nodes, (size_t)ncap * kp->node_size);
		if (!n)
			return -ENOMEM;
		kp->nodes = n;
		kp->cap = ncap;
	}
	*idx = kp->used++;
	return 0;
}

int tier__kpool_add(struct tier__kpool *kp, uint64_t key, uint32_t *idx)
{
	struct tier__knode *n;
	uint32_t s;
	int rc;

	/* keep the load factor at or below 3/4 so probes stay short */
	if ((uint64_t)(kp->live + 1) * 4 > (uint64_t)(kp->mask + 1) * 3) {
		rc = index_resize(kp, (kp->mask + 1) * 2);
		if (rc < 0)
			return rc;
	}
	rc = node_alloc(kp, idx);
	if (rc < 0)
		return rc;
	n = tier__kpool_node(kp, *idx);
	memset(n, 0, kp->node_size);
	n->key = key;
	n->prev = n->next = TIER__KNIL;
	s = slot_of(key, kp->mask);
	while (kp->slots[s])
		s = (s + 1) & kp->mask;
	kp->slots[s] = *idx + 1;
	kp->live++;
	return 0;
}

void tier__kpool_del(struct tier__kpool *kp, uint32_t idx)
{
	uint32_t s = slot_of(tier__kpool_node(kp, idx)->key, kp->mask);
	uint32_t hole, j;

	while (kp->slots[s] != idx + 1)
		s = (s + 1) & kp->mask;
	/* backward-shift deletion: no tombstones, probe chains stay intact */
	hole = s;
	j = s;
	for (;;) {
		uint32_t home;

		j = (j + 1) & kp->mask;
		if (!kp->slots[j])
			break;
		home = slot_of(tier__kpool_node(kp, kp->slots[j] - 1)->key, kp->mask);
		/* move j back into the hole unless its home lies in (hole, j] */
		if (((j - home) & kp->mask) >= ((j - hole) & kp->mask)) {
			kp->slots[hole] = kp->slots[j];
			hole = j;
		}
	}
	kp->slots[hole] = 0;
	tier__kpool_node(kp, idx)->next = kp->free_head;
	kp->free_head = idx;
	kp->live--;
}

size_t tier__kpool_bytes(const struct tier__kpool *kp)
{
	return (size_t)kp->cap * kp->node_size + ((size_t)kp->mask + 1) * sizeof(uint32_t);
}

void tier__klist_init(struct tier__klist *l)
{
	l->head = l->tail = TIER__KNIL;
	l->count = 0;
}

void tier__klist_push_head(struct tier__kpool *kp, struct tier__klist *l, uint32_t idx)
{
	struct tier__knode *n = tier__kpool_node(kp, idx);

	n->prev = TIER__KNIL;
	n->next = l->head;
	if (l->head != TIER__KNIL)
		tier__kpool_node(kp, l->head)->prev = idx;
	else
		l->tail = idx;
	l->head = idx;
	l->count++;
}

void tier__klist_unlink(struct tier__kpool *kp, struct tier__klist *l, uint32_t idx)
{
	struct tier__knode *n = tier__kpool_node(kp, idx);

	if (n->prev != TIER__KNIL)
		tier__kpool_node(kp, n->prev)->next = n->next;
	else
		l->head = n->next;
	if (n->next != TIER__KNIL)
		tier__kpool_node(kp, n->next)->prev = n->prev;
	else
		l->tail = n->prev;
	n->prev = n->next = TIER__KNIL;
	l->count--;
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
