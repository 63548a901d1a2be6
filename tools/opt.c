/* SPDX-License-Identifier: MIT */
/*
 * opt.c - Belady's OPT miss count for an object access sequence: a
 * next-use precomputation (one backward pass with a hash of last sightings)
 * and a max-heap of resident objects keyed by next use, with lazy deletion.
 * It decides nothing for the engine; it only bounds how well any cache of
 * the same size could do, and must never depend on anything but its input.
 */
#include "opt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/hash.h"

/* open-addressing map: object id -> dense index */
struct idmap {
	uint64_t *keys;
	uint32_t *vals;     /* dense index + 1, 0 = empty */
	size_t mask;
};

static int idmap_init(struct idmap *m, size_t n)
{
	size_t cap = 16;

	while (cap < 2 * n + 16)
		cap <<= 1;
	m->keys = calloc(cap, sizeof(*m->keys));
	m->vals = calloc(cap, sizeof(*m->vals));
	m->mask = cap - 1;
	return m->keys && m->vals ? 0 : -ENOMEM;
}

static void idmap_free(struct idmap *m)
{
	free(m->keys);
	free(m->vals);
}

/* dense index of id, assigning next_dense if new (then *is_new = true) */
static uint32_t idmap_get(struct idmap *m, uint64_t id, uint32_t next_dense, bool *is_new)
{
	size_t i = tier__mix64(id) & m->mask;

	while (m->vals[i]) {
		if (m->keys[i] == id) {
			*is_new = false;
			return m->vals[i] - 1;
		}
		i = (i + 1) & m->mask;
	}
	m->keys[i] = id;
	m->vals[i] = next_dense + 1;
	*is_new = true;
	return next_dense;
}

struct heap_ent {
	uint64_t next;      /* position of the next use; >= n means never */
	uint32_t obj;
};

struct heap {
	struct heap_ent *a;
	size_t n;
};

static void heap_push(struct heap *h, struct heap_ent e)
{
	size_t i = h->n++;

	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (h->a[parent].next >= e.next)
			break;
		h->a[i] = h->a[parent];
		i = parent;
	}
	h->a[i] = e;
}

static struct heap_ent heap_pop(struct heap *h)
{
	struct heap_ent top = h->a[0], last = h->a[--h->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->a[c + 1].next > h->a[c].next)
			c++;
		if (h->a[c].next <= last.next)
			break;
		h->a[i] = h->a[c];
		i = c;
	}
	if (h->n)
		h->a[i] = last;
	return top;
}

/*
 * next[i] = position of the next access to ids[i], or n + i when there is
 * none (distinct values keep the heap's lazy-deletion check exact).
 */
static int next_uses(const uint64_t *ids, size_t n, uint32_t *dense, uint64_t *next,
		     uint64_t **first_out, uint32_t *n_objs)
{
	struct idmap m = { 0 };
	uint64_t *last = NULL;
	uint32_t nd = 0;
	int ret;

	ret = idmap_init(&m, n);
	if (ret < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		bool is_new;

		dense[i] = idmap_get(&m, ids[i], nd, &is_new);
		if (is_new)
			nd++;
	}
	last = malloc((nd ? nd : 1) * sizeof(*last));
	if (!last) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t o = 0; o < nd; o++)
		last[o] = UINT64_MAX;
	for (size_t i = n; i-- > 0;) {
		next[i] = last[dense[i]] == UINT64_MAX ? n + i : last[dense[i]];
		last[dense[i]] = i;
	}
	/* after the backward pass, last[o] is the first access of o */
	*first_out = last;
	last = NULL;
	*n_objs = nd;
out:
	free(last);
	idmap_free(&m);
	return ret;
}

int opt_simulate(const uint64_t *ids, size_t n, uint64_t capacity, bool bypass,
		 size_t warm, struct opt_result *out)
{
	return opt_simulate_w(ids, NULL, n, capacity, bypass, warm, out);
}

int opt_simulate_w(const uint64_t *ids, const uint32_t *w, size_t n, uint64_t capacity,
		   bool bypass, size_t warm, struct opt_result *out)
{
	uint32_t *dense = NULL, n_objs = 0;
	uint64_t *next = NULL, *first = NULL;
	uint64_t *cur = NULL;   /* cur[obj]: next use + 1 if resident, else 0 */
	struct heap h = { 0 };
	uint64_t resident = 0;
	int ret = -ENOMEM;

	memset(out, 0, sizeof(*out));
	if (warm > n)
		warm = n;
	out->accesses = n - warm;
	if (n == warm)
		return 0;
	dense = malloc(n * sizeof(*dense));
	next = malloc(n * sizeof(*next));
	h.a = malloc((n + 1) * sizeof(*h.a));
	if (!dense || !next || !h.a)
		goto out;
	ret = next_uses(ids, n, dense, next, &first, &n_objs);
	if (ret < 0)
		goto out;
	ret = -ENOMEM;
	cur = calloc(n_objs, sizeof(*cur));
	if (!cur)
		goto out;

	for (size_t i = 0; i < n; i++) {
		uint32_t o = dense[i];
		/* positions are stored +1 so that 0 means "not resident" */
		uint64_t key = next[i] + 1;

		if (i >= warm)
			out->bytes += w ? w[i] : 1;
		if (cur[o]) {
			cur[o] = key;
			heap_push(&h, (struct heap_ent){ key, o });
			continue;
		}
		if (i >= warm) {
			out->misses++;
			out->miss_bytes += w ? w[i] : 1;
			out->compulsory += first[o] == i;
		}
		if (capacity == 0)
			continue;
		if (resident == capacity) {
			struct heap_ent v;

			do {
				v = heap_pop(&h);
			} while (cur[v.obj] != v.next);
			if (bypass && v.next < key) {
				/* the newcomer is needed last: leave it out */
				heap_push(&h, v);
				continue;
			}
			cur[v.obj] = 0;
			resident--;
		}
		cur[o] = key;
		resident++;
		heap_push(&h, (struct heap_ent){ key, o });
	}
	out->miss_ratio = (double)out->misses / (double)out->accesses;
	ret = 0;
out:
	free(dense);
	free(next);
	free(first);
	free(cur);
	free(h.a);
	return ret;
}

/* ---- LRU: a list threaded through dense object indexes ---- */

#define LRU_NIL UINT32_MAX

int lru_simulate(const uint64_t *ids, const uint32_t *w, size_t n, uint64_t capacity,
		 size_t warm, struct opt_result *out)
{
	struct idmap m = { 0 };
	uint32_t *prev = NULL, *next = NULL, head = LRU_NIL, tail = LRU_NIL, nd = 0;
	uint8_t *in = NULL, *seen = NULL;
	uint64_t resident = 0;
	int ret = -ENOMEM;

	memset(out, 0, sizeof(*out));
	if (warm > n)
		warm = n;
	out->accesses = n - warm;
	if (n == warm)
		return 0;
	if (idmap_init(&m, n) < 0)
		goto out;
	prev = malloc(n * sizeof(*prev));
	next = malloc(n * sizeof(*next));
	in = calloc(n, 1);
	seen = calloc(n, 1);
	if (!prev || !next || !in || !seen)
		goto out;
	for (size_t i = 0; i < n; i++) {
		bool is_new;
		uint32_t o = idmap_get(&m, ids[i], nd, &is_new);
		bool counted = i >= warm;

		if (is_new)
			nd++;
		if (counted)
			out->bytes += w ? w[i] : 1;
		if (in[o]) {
			/* hit: move to the head */
			if (head == o)
				continue;
			next[prev[o]] = next[o];
			if (next[o] != LRU_NIL)
				prev[next[o]] = prev[o];
			else
				tail = prev[o];
		} else {
			if (counted) {
				out->misses++;
				out->miss_bytes += w ? w[i] : 1;
				out->compulsory += !seen[o];
			}
			seen[o] = 1;
			if (capacity == 0)
				continue;
			if (resident == capacity) {
				uint32_t v = tail;

				tail = prev[v];
				if (tail != LRU_NIL)
					next[tail] = LRU_NIL;
				else
					head = LRU_NIL;
				in[v] = 0;
				resident--;
			}
			in[o] = 1;
			resident++;
		}
		prev[o] = LRU_NIL;
		next[o] = head;
		if (head != LRU_NIL)
			prev[head] = o;
		head = o;
		if (tail == LRU_NIL)
			tail = o;
	}
	out->miss_ratio = (double)out->misses / (double)out->accesses;
	ret = 0;
out:
	idmap_free(&m);
	free(prev);
	free(next);
	free(in);
	free(seen);
	return ret;
}
