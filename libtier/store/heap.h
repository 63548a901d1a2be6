/* SPDX-License-Identifier: MIT */
/*
 * libtier/store/heap.h (internal) - the one binary min-heap of the backends:
 * completions held back until their due time (mem in virtual time, local in
 * real time).  TIER__HEAP_DEFINE(name, type) generates, for a type with
 * uint64_t `due` and `seq` fields, two static functions over a caller-owned
 * array (*heap, *n, *cap):
 *
 *   int  name_push(type **heap, size_t *n, size_t *cap, type v);
 *        0, or -ENOMEM (the heap is unchanged); the array grows by doubling
 *        from 64 entries and is the caller's to free().
 *   type name_pop(type *heap, size_t *n);
 *        @pre *n > 0; removes and returns the earliest entry.
 *
 * Order is (due, seq) ascending: equal due times pop in submission order.
 * It decides order only; it never locks (the caller holds its own lock).
 */
#ifndef TIER_STORE_HEAP_H
#define TIER_STORE_HEAP_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#define TIER__HEAP_DEFINE(name, type)                                              \
static inline int name##_less(const type *a, const type *b)                        \
{                                                                                  \
	return a->due < b->due || (a->due == b->due && a->seq < b->seq);           \
}                                                                                  \
                                                                                   \
static inline void name##_swap(type *a, type *b)                                   \
{                                                                                  \
	type t = *a;                                                               \
                                                                                   \
	*a = *b;                                                                   \
	*b = t;                                                                    \
}                                                                                  \
                                                                                   \
static inline int name##_push(type **heap, size_t *n, size_t *cap, type v)         \
{                                                                                  \
	type *h = *heap;                                                           \
	size_t i;                                                                  \
                                                                                   \
	if (*n == *cap) {                                                          \
		size_t nc = *cap ? *cap * 2 : 64;                                  \
                                                                                   \
		h = realloc(h, nc * sizeof(*h));                                   \
		if (!h)                                                            \
			return -ENOMEM;                                            \
		*heap = h;                                                         \
		*cap = nc;                                                         \
	}                                                                          \
	i = (*n)++;                                                                \
	h[i] = v;                                                                  \
	while (i > 0 && name##_less(&h[i], &h[(i - 1) / 2])) {                     \
		name##_swap(&h[i], &h[(i - 1) / 2]);                               \
		i = (i - 1) / 2;                                                   \
	}                                                                          \
	return 0;                                                                  \
}                                                                                  \
                                                                                   \
static inline type name##_pop(type *h, size_t *n)                                  \
{                                                                                  \
	type top = h[0];                                                           \
	size_t i = 0;                                                              \
                                                                                   \
	h[0] = h[--(*n)];                                                          \
	for (;;) {                                                                 \
		size_t l = 2 * i + 1, r = l + 1, s = i;                            \
                                                                                   \
		if (l < *n && name##_less(&h[l], &h[s]))                           \
			s = l;                                                     \
		if (r < *n && name##_less(&h[r], &h[s]))                           \
			s = r;                                                     \
		if (s == i)                                                        \
			break;                                                     \
		name##_swap(&h[i], &h[s]);                                         \
		i = s;                                                             \
	}                                                                          \
	return top;                                                                \
}

#endif
