/* SPDX-License-Identifier: MIT */
/*
 * libtier/policy_pool.h (internal to the eviction policies) - node storage.
 *
 * tier__hpool: the cached objects' nodes, indexed by the engine's handle of
 * the object (its object map slab index, struct tier__policy_host): chunks
 * of TIER__HCHUNK nodes allocated as handles appear, the way the map's slab
 * grows, no key and no index of its own (the map is the index; the host
 * gives a handle's key back).  Every node type starts with struct
 * tier__hlinks; new chunks are filled with 0xff bytes (links TIER__KNIL).
 * Lists (struct tier__klist) thread through them by 32-bit handle; node
 * pointers stay valid while the pool grows.
 *
 * tier__gq (policy_ghost.c): keys the map no longer holds (ARC's and
 * S3-FIFO's ghosts), an exact FIFO that also deletes from the middle, with
 * no links: a ring of uint64 keys, a bit per entry marking the ones deleted
 * from the middle, one open-addressing index of 32-bit ring positions at
 * load <= 3/4.  A ghost costs its key in the ring (8 bytes) and an index
 * slot (4), times the slack of the power-of-two sizes: ring entries 1 to 4
 * times the keys (deleted entries stay until the oldest end passes them or
 * the ring is compacted), index slots 4/3 to 8/3 times: 13.5 to 43 bytes
 * a ghost while their number holds steady; after it fell (ARC's B1 and B2
 * trade sizes) up to ~130 until it is under an eighth of the ring, which
 * then halves.
 */
#ifndef TIER_POLICY_POOL_H
#define TIER_POLICY_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TIER__KNIL UINT32_MAX

/* A list of handles: head = most recently pushed. */
struct tier__klist {
	uint32_t head, tail;
	uint32_t count;
};

void tier__klist_init(struct tier__klist *l);

/*
 * Handle-indexed nodes.  Chunks of TIER__HCHUNK nodes of node_size bytes:
 * list nodes start with struct tier__hlinks (node_size a multiple of 4);
 * a pool of 1-byte nodes holds a tag per handle beside one of links.
 */
#define TIER__HCHUNK_SHIFT 12
#define TIER__HCHUNK (1u << TIER__HCHUNK_SHIFT)

struct tier__hlinks {
	uint32_t prev, next;      /* toward head / toward tail; TIER__KNIL at the ends */
};

struct tier__hpool {
	unsigned char **chunk;
	uint32_t nchunk, capchunk;
	size_t node_size;
};

void tier__hpool_init(struct tier__hpool *hp, size_t node_size);
void tier__hpool_fini(struct tier__hpool *hp);
/* Make node h exist (its chunk, 0xff-filled when new). -ENOMEM. */
int tier__hpool_reserve(struct tier__hpool *hp, uint32_t h);
/* Bytes held (the chunks and their pointer array). */
size_t tier__hpool_bytes(const struct tier__hpool *hp);

static inline bool tier__hpool_has(const struct tier__hpool *hp, uint32_t h)
{
	return (h >> TIER__HCHUNK_SHIFT) < hp->nchunk;
}

/* Node h; it must exist (tier__hpool_has). */
static inline void *tier__hpool_at(const struct tier__hpool *hp, uint32_t h)
{
	return hp->chunk[h >> TIER__HCHUNK_SHIFT] + (size_t)(h & (TIER__HCHUNK - 1)) * hp->node_size;
}

static inline struct tier__hlinks *tier__hpool_node(const struct tier__hpool *hp, uint32_t h)
{
	return (struct tier__hlinks *)tier__hpool_at(hp, h);
}

/* A 1-byte node's tag; 0xff for a handle never set (or beyond the chunks). */
static inline uint8_t tier__hpool_tag(const struct tier__hpool *hp, uint32_t h)
{
	return tier__hpool_has(hp, h) ? *(uint8_t *)tier__hpool_at(hp, h) : 0xff;
}

/*
 * Packed tags: bits (2 or 4) per handle in a pool of 1-byte nodes, 8 / bits
 * handles a byte; a handle never set reads all ones.
 */
static inline unsigned tier__htag_get(const struct tier__hpool *hp, unsigned bits, uint32_t h)
{
	uint32_t per = 8 / bits;

	return (unsigned)(tier__hpool_tag(hp, h / per) >> ((h % per) * bits)) & ((1u << bits) - 1);
}

/* Set handle h's tag (its byte must exist: tier__htag_reserve). */
static inline void tier__htag_set(struct tier__hpool *hp, unsigned bits, uint32_t h, unsigned v)
{
	uint32_t per = 8 / bits;
	unsigned sh = (h % per) * bits, m = ((1u << bits) - 1) << sh;
	uint8_t *b = (uint8_t *)tier__hpool_at(hp, h / per);

	*b = (uint8_t)((*b & ~m) | ((v << sh) & m));
}

static inline int tier__htag_reserve(struct tier__hpool *hp, unsigned bits, uint32_t h)
{
	return tier__hpool_reserve(hp, h / (8 / bits));
}

void tier__hlist_push_head(struct tier__hpool *hp, struct tier__klist *l, uint32_t h);
void tier__hlist_unlink(struct tier__hpool *hp, struct tier__klist *l, uint32_t h);

/*
 * A ghost queue.  Entries are numbered by free-running sequence numbers,
 * position seq & (cap - 1); [head, tail) holds the keys pushed and not yet
 * popped, those deleted from the middle marked in dead.  The entry at head is
 * live whenever the queue is not empty.
 */
struct tier__gq {
	uint64_t *ring;           /* keys by position */
	uint64_t *dead;           /* a bit per position: deleted from the middle */
	uint32_t *slots;          /* ring position + 1, 0 = empty; power of two */
	uint32_t mask;            /* slots - 1 */
	uint32_t cap;             /* ring entries, power of two */
	uint32_t head, tail;      /* oldest entry, next push; tail - head <= cap */
	uint32_t live;            /* keys held */
};

/* An empty queue. -ENOMEM (q zeroed, tier__gq_fini harmless). */
int tier__gq_init(struct tier__gq *q);
/* Frees what q holds; q may be zeroed or initialised. */
void tier__gq_fini(struct tier__gq *q);
/* Ring position of key, or TIER__KNIL; valid until the next push, delete or pop. */
uint32_t tier__gq_find(const struct tier__gq *q, uint64_t key);
/*
 * Key as the newest entry.  @pre key is not in q.  -ENOMEM: not added, q
 * as it was.
 */
int tier__gq_push(struct tier__gq *q, uint64_t key);
/* Forget the key at position pos (from tier__gq_find). */
void tier__gq_del(struct tier__gq *q, uint32_t pos);
/* Forget the oldest key and return it.  @pre tier__gq_count(q) > 0. */
uint64_t tier__gq_pop(struct tier__gq *q);
/* Bytes q allocated (ring, bitmap, index); q itself lives in its owner. */
size_t tier__gq_bytes(const struct tier__gq *q);

static inline uint32_t tier__gq_count(const struct tier__gq *q)
{
	return q->live;
}
#endif
