/* SPDX-License-Identifier: MIT */
/*
 * libtier/policy.h (internal) - pluggable eviction order.  A policy tracks
 * the cached objects and hands the agent candidates (64-bit keys), coldest
 * first.  A cached object is named by its key and by the host's handle of it
 * (the engine's object map slab index): the policy keeps its node in an
 * array indexed by the handle and asks the host for a handle's key, so it
 * holds no key and no index of its own for them; keys that left the cache
 * (ghosts) it keeps by key.  A handle stays the object's from insert to
 * remove.  It never touches the store; the engine calls it on the loop
 * thread.
 */
#ifndef TIER_POLICY_H
#define TIER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tier/params.h"

struct tier__hitsets;
struct tier__policy;

/* The handles' owner: the key of a handle the policy holds. */
struct tier__policy_host {
	uint64_t (*key_of)(const void *ctx, uint32_t h);
	const void *ctx;
};

struct tier__policy_ops {
	const char *name;
	void (*destroy)(struct tier__policy *p);
	/* entered the cache */
	void (*insert)(struct tier__policy *p, uint64_t key, uint32_t h, uint64_t now_ms);
	/* read/write hit */
	void (*access)(struct tier__policy *p, uint64_t key, uint32_t h, uint64_t now_ms);
	/* left the cache */
	void (*remove)(struct tier__policy *p, uint64_t key, uint32_t h);
	/*
	 * Up to max candidate keys, coldest first, skipping keys for which
	 * want(arg, key) is false (e.g. dirty objects when evicting, clean
	 * when flushing, objects too young).  May reorder internal queues.
	 */
	size_t (*coldest)(struct tier__policy *p, uint64_t *keys, size_t max,
			  bool (*want)(void *arg, uint64_t key), void *arg);
	/* Whether the policy would admit a new object now (ghost/frequency hints);
	 * may be NULL = always. */
	bool (*admit)(struct tier__policy *p, uint64_t key);
	/* Bytes the policy holds (nodes, index, ghosts): tier-sim's memory per object. */
	size_t (*bytes)(const struct tier__policy *p);
};

struct tier__policy {
	const struct tier__policy_ops *ops;
	struct tier__policy_host host;
};

static inline uint64_t tier__policy_key(const struct tier__policy *p, uint32_t h)
{
	return p->host.key_of(p->host.ctx, h);
}

/* hitset: Ceph's temperature over an LRU; hs is borrowed (owned by the engine). */
int tier__policy_hitset_create(const struct tier__policy_host *host,
			       const struct tier__hitsets *hs, const struct tier_params *prm,
			       struct tier__policy **out);
/* S3-FIFO (small FIFO 10%, main FIFO, ghost queue); capacity in objects. */
int tier__policy_s3fifo_create(const struct tier__policy_host *host, uint64_t capacity_objects,
			       struct tier__policy **out);
/* LRU: one recency list, the baseline. */
int tier__policy_lru_create(const struct tier__policy_host *host, struct tier__policy **out);
/* ARC: T1/T2 and their ghosts B1/B2; capacity = the cached objects it tracks. */
int tier__policy_arc_create(const struct tier__policy_host *host, struct tier__policy **out);
/* Whether key is one of ARC's ghosts (B1 or B2): its admit() hint. */
bool tier__policy_arc_is_ghost(struct tier__policy *p, uint64_t key);
/* ARC's current target size of T1 (tests). */
uint64_t tier__policy_arc_target(const struct tier__policy *p);
int tier__policy_create(enum tier_evict_policy which, const struct tier__policy_host *host,
			const struct tier__hitsets *hs, const struct tier_params *prm,
			uint64_t capacity_objects, struct tier__policy **out);
void tier__policy_destroy(struct tier__policy *p);   /* NULL ok */
size_t tier__policy_bytes(const struct tier__policy *p);

/*
 * TinyLFU's frequency sketch (policy_sketch.c): a count-min sketch of 4-bit
 * counters, width >= objects, halved every 10 x width additions.
 */
struct tier__sketch;
int tier__sketch_create(uint64_t objects, struct tier__sketch **out);
void tier__sketch_destroy(struct tier__sketch *s);   /* NULL ok */
void tier__sketch_add(struct tier__sketch *s, uint64_t key);
unsigned tier__sketch_estimate(const struct tier__sketch *s, uint64_t key);   /* 0..15 */
size_t tier__sketch_bytes(const struct tier__sketch *s);
uint64_t tier__sketch_resets(const struct tier__sketch *s);
#endif
