/* SPDX-License-Identifier: MIT */
/*
 * libtier/policy_ghost.c - the ghost queue of the eviction policies
 * (struct tier__gq, policy_pool.h): keys that left the cache, oldest first,
 * with a ghost hit taking its key out of the middle.  Keys sit in a ring in
 * push order; a bitmap marks the ones deleted from the middle until the
 * oldest end passes them or the ring is compacted; one open-addressing
 * index (linear probing, backward-shift deletion) maps a key to its ring
 * position.  Every operation is O(1) amortised and memory follows the live
 * keys, however many were deleted: a full ring at most half live is
 * compacted rather than grown, so it grows only to under 4 times the live
 * keys, and one less than an eighth live is halved.  It decides nothing
 * about which key to forget and must never hold a key twice.
 *
 * The price of no links: a compaction or a resize re-indexes every live
 * key in the call that triggers it, O(ghosts) at once (review measured
 * ~20 ms at 10^6 ghosts, ~130 ms at 4 x 10^6, once per ~cap/2 ghost hits
 * with a steady count), where the keyed pools paid that only when they
 * grew.  Rewriting positions without rehashing, or spreading the work,
 * would shorten it; not done.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/hash.h"
#include "libtier/policy_pool.h"

/* The smallest ring and index: a queue that empties shrinks no further. */
#define GQ_MIN 16u
#define GQ_MAX (1u << 31)   /* ring entries or index slots: positions + 1 fit 32 bits */

static uint32_t slot_of(uint64_t key, uint32_t mask)
{
	return (uint32_t)tier__mix64(key) & mask;
}

static size_t dead_words(uint32_t cap)
{
	return ((size_t)cap + 63) / 64;
}

static bool is_dead(const struct tier__gq *q, uint32_t pos)
{
	return q->dead[pos / 64] >> (pos % 64) & 1;
}

static void set_dead(struct tier__gq *q, uint32_t pos, bool d)
{
	uint64_t bit = 1ull << (pos % 64);

	q->dead[pos / 64] = d ? q->dead[pos / 64] | bit : q->dead[pos / 64] & ~bit;
}

/* Index every live entry of the ring into the (cleared) slots. */
static void index_fill(struct tier__gq *q)
{
	memset(q->slots, 0, ((size_t)q->mask + 1) * sizeof(*q->slots));
	for (uint32_t seq = q->head; seq != q->tail; seq++) {
		uint32_t pos = seq & (q->cap - 1), s;

		if (is_dead(q, pos))
			continue;
		s = slot_of(q->ring[pos], q->mask);
		while (q->slots[s])
			s = (s + 1) & q->mask;
		q->slots[s] = pos + 1;
	}
}

/*
 * Rewrite the ring without its deleted entries, oldest first, into ncap
 * entries, and the index into nslots; in place what keeps its size.  The
 * survivors keep the head's numbering, so positions change and the caller's
 * are stale.  -ENOMEM before anything changed.
 */
static int relayout(struct tier__gq *q, uint32_t ncap, uint32_t nslots)
{
	uint64_t *ring = q->ring, *dead = q->dead;
	uint32_t *slots = q->slots;
	uint32_t w = q->head;

	if (ncap != q->cap) {
		ring = malloc((size_t)ncap * sizeof(*ring));
		dead = malloc(dead_words(ncap) * sizeof(*dead));
	}
	if (nslots != q->mask + 1)
		slots = malloc((size_t)nslots * sizeof(*slots));
	if (!ring || !dead || !slots) {
		if (ring != q->ring)
			free(ring);
		if (dead != q->dead)
			free(dead);
		if (slots != q->slots)
			free(slots);
		return -ENOMEM;
	}
	/* in place an entry only moves toward the head, over entries already read */
	for (uint32_t seq = q->head; seq != q->tail; seq++) {
		uint32_t pos = seq & (q->cap - 1);

		if (!is_dead(q, pos))
			ring[w++ & (ncap - 1)] = q->ring[pos];
	}
	if (ring != q->ring) {
		free(q->ring);
		free(q->dead);
	}
	memset(dead, 0, dead_words(ncap) * sizeof(*dead));
	q->ring = ring;
	q->dead = dead;
	q->cap = ncap;
	q->tail = w;
	if (slots != q->slots)
		free(q->slots);
	q->slots = slots;
	q->mask = nslots - 1;
	index_fill(q);
	return 0;
}

int tier__gq_init(struct tier__gq *q)
{
	memset(q, 0, sizeof(*q));
	q->ring = malloc(GQ_MIN * sizeof(*q->ring));
	q->dead = calloc(dead_words(GQ_MIN), sizeof(*q->dead));
	q->slots = calloc(GQ_MIN, sizeof(*q->slots));
	if (!q->ring || !q->dead || !q->slots) {
		tier__gq_fini(q);
		return -ENOMEM;
	}
	q->cap = GQ_MIN;
	q->mask = GQ_MIN - 1;
	return 0;
}

void tier__gq_fini(struct tier__gq *q)
{
	free(q->ring);
	free(q->dead);
	free(q->slots);
	memset(q, 0, sizeof(*q));
}

uint32_t tier__gq_find(const struct tier__gq *q, uint64_t key)
{
	for (uint32_t s = slot_of(key, q->mask);; s = (s + 1) & q->mask) {
		uint32_t v = q->slots[s];

		if (!v)
			return TIER__KNIL;
		if (q->ring[v - 1] == key)
			return v - 1;
	}
}

int tier__gq_push(struct tier__gq *q, uint64_t key)
{
	uint32_t ncap = q->cap, nslots = q->mask + 1, pos, s;

	/* keep the index's load at or below 3/4 so probes stay short */
	if ((uint64_t)(q->live + 1) * 4 > (uint64_t)nslots * 3) {
		if (nslots == GQ_MAX)
			return -ENOMEM;
		nslots *= 2;
	}
	/* full: dropping the deleted entries frees at least half, or double */
	if (q->tail - q->head == q->cap && q->live > q->cap / 2) {
		if (q->cap == GQ_MAX)
			return -ENOMEM;
		ncap *= 2;
	}
	if (q->tail - q->head == q->cap || nslots != q->mask + 1) {
		int rc = relayout(q, ncap, nslots);

		if (rc < 0)
			return rc;
	}
	pos = q->tail++ & (q->cap - 1);
	q->ring[pos] = key;
	s = slot_of(key, q->mask);
	while (q->slots[s])
		s = (s + 1) & q->mask;
	q->slots[s] = pos + 1;
	q->live++;
	return 0;
}

/* Backward-shift deletion of index slot hole: no tombstones, probe chains stay intact. */
static void index_del(struct tier__gq *q, uint32_t hole)
{
	for (uint32_t j = hole;;) {
		uint32_t home;

		j = (j + 1) & q->mask;
		if (!q->slots[j])
			break;
		home = slot_of(q->ring[q->slots[j] - 1], q->mask);
		/* move j back into the hole unless its home lies in (hole, j] */
		if (((j - home) & q->mask) >= ((j - hole) & q->mask)) {
			q->slots[hole] = q->slots[j];
			hole = j;
		}
	}
	q->slots[hole] = 0;
}

void tier__gq_del(struct tier__gq *q, uint32_t pos)
{
	uint32_t s;

	/* a position from tier__gq_find before any push, pop or delete since */
	assert(pos < q->cap && !is_dead(q, pos) && q->live);
	s = slot_of(q->ring[pos], q->mask);

	while (q->slots[s] != pos + 1)
		s = (s + 1) & q->mask;
	index_del(q, s);
	set_dead(q, pos, true);
	q->live--;
	/* the oldest entry stays live, so a pop takes it without a search */
	while (q->head != q->tail && is_dead(q, q->head & (q->cap - 1))) {
		set_dead(q, q->head & (q->cap - 1), false);
		q->head++;
	}
	/*
	 * A queue that shrank far gives memory back: half the ring, and an
	 * index left between 3/16 and 3/8 full, so it takes twice the keys
	 * before it grows again.
	 */
	if (q->cap > GQ_MIN && q->live < q->cap / 8) {
		uint32_t nslots = q->mask + 1;

		while (nslots > GQ_MIN && (uint64_t)q->live * 16 < (uint64_t)nslots * 3)
			nslots /= 2;
		(void)relayout(q, q->cap / 2, nslots);   /* out of memory: keep the room */
	}
}

uint64_t tier__gq_pop(struct tier__gq *q)
{
	uint32_t pos = q->head & (q->cap - 1);
	uint64_t key;

	assert(q->live);   /* the callers check the count: an empty ring holds no key */
	key = q->ring[pos];

	tier__gq_del(q, pos);
	return key;
}

size_t tier__gq_bytes(const struct tier__gq *q)
{
	return (size_t)q->cap * sizeof(*q->ring) + dead_words(q->cap) * sizeof(*q->dead) +
	       ((size_t)q->mask + 1) * sizeof(*q->slots);
}
