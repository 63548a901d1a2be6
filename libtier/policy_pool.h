/* SPDX-License-Identifier: MIT */
/*
 * libtier/policy_pool.h (internal to the eviction policies) - a pool of
 * fixed-size nodes keyed by uint64 with an open-addressing index, and
 * intrusive doubly linked lists threaded through the nodes by 32-bit index.
 * Every node type starts with struct tier__knode.  Node indices stay valid
 * while the pool grows; node pointers do not (re-fetch after an add).
 */
#ifndef TIER_POLICY_POOL_H
#define TIER_POLICY_POOL_H

#include <stddef.h>
#include <stdint.h>

#define TIER__KNIL UINT32_MAX

struct tier__knode {
	uint64_t key;
	uint32_t prev, next;      /* toward head / toward tail; TIER__KNIL at the ends */
};

struct tier__kpool {
	unsigned char *nodes;
	size_t node_size;
	uint32_t cap;             /* nodes allocated */
	uint32_t used;            /* high-water mark of node indices */
	uint32_t free_head;       /* free nodes chained through .next */
	uint32_t live;
	uint32_t *slots;          /* node index + 1, 0 = empty; power of two */
	uint32_t mask;
};

/* A list: head = most recently pushed. */
struct tier__klist {
	uint32_t head, tail;
	uint32_t count;
};

int tier__kpool_init(struct tier__kpool *kp, size_t node_size, uint32_t initial);
void tier__kpool_fini(struct tier__kpool *kp);
/* Node index of key, or TIER__KNIL. */
uint32_t tier__kpool_find(const struct tier__kpool *kp, uint64_t key);
/* New node for key (must not be present), links set to TIER__KNIL, the rest zeroed. -ENOMEM. */
int tier__kpool_add(struct tier__kpool *kp, uint64_t key, uint32_t *idx);
/* Drop node idx from the index and free it (unlink it from its list first). */
void tier__kpool_del(struct tier__kpool *kp, uint32_t idx);
/* Bytes held by the pool (nodes + index). */
size_t tier__kpool_bytes(const struct tier__kpool *kp);

static inline struct tier__knode *tier__kpool_node(const struct tier__kpool *kp, uint32_t idx)
{
	return (struct tier__knode *)(void *)(kp->nodes + (size_t)idx * kp->node_size);
}

void tier__klist_init(struct tier__klist *l);
void tier__klist_push_head(struct tier__kpool *kp, struct tier__klist *l, uint32_t idx);
void tier__klist_unlink(struct tier__kpool *kp, struct tier__klist *l, uint32_t idx);
#endif
