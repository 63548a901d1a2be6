/* SPDX-License-Identifier: MIT */
/*
 * libtier/policy_hitset.c - the "hitset" eviction order: Ceph's object
 * temperature (agent_estimate_temp over the HitSets) applied to a window
 * taken from the cold end of an LRU of the cached objects.  It decides which
 * cached objects the agent should flush or evict first: lowest temperature
 * first; among equal temperatures the key with fewer hits while cached
 * (a 4-bit count, halved every 4 hits per cached object) first, then the
 * least recently used.  The hit count matters because hitsets only record
 * membership: with a long hit_set_period every cached object is "in the
 * current set" and temperature ties (tier-sim, docs/BENCHMARKS.md).  Unlike Ceph's
 * agent_maybe_evict it never compares against a histogram of all objects,
 * so the hottest objects can never be chosen ahead of colder ones in the
 * window.  It never removes a key by itself and never touches the store.
 * Storage by handle: links and epoch (12 bytes) and the count (1 byte).
 */
#include <errno.h>
#include <stdlib.h>

#include "libtier/hitset.h"
#include "libtier/policy.h"
#include "libtier/policy_pool.h"

/* Candidates examined per requested key: a wider window finds colder keys. */
#define HP_WINDOW_FACTOR 8u

/* Hits are counted up to this; all counts halve every HP_AGE_EVERY accesses x capacity. */
#define HP_FREQ_MAX 15u
#define HP_AGE_EVERY 4u

struct hp_node {
	struct tier__hlinks n;
	uint32_t epoch;          /* aging epoch the freq tag was last brought up to date in */
};
#define HP_NONE 0xff     /* the freq tag of a handle not cached */

struct hp_cand {
	uint64_t key;
	uint32_t temp;
	uint32_t freq;
	uint32_t age;            /* 0 = least recently used */
};

struct hp_policy {
	struct tier__policy base;
	const struct tier__hitsets *hs;
	const struct tier_params *prm;
	struct tier__hpool pool;     /* nodes are struct hp_node, by handle */
	struct tier__hpool freq;     /* hits while cached, aged (1 byte), or HP_NONE */
	struct tier__klist lru;      /* head = most recently used */
	uint64_t accesses;           /* since the current aging epoch began */
	uint32_t epoch;
	struct hp_cand *scratch;
	size_t scratch_cap;
};

static struct hp_policy *hp_of(struct tier__policy *p)
{
	return (struct hp_policy *)p;
}

static void hp_destroy(struct tier__policy *p)
{
	struct hp_policy *hp = hp_of(p);

	tier__hpool_fini(&hp->pool);
	tier__hpool_fini(&hp->freq);
	free(hp->scratch);
	free(hp);
}

static struct hp_node *hp_node(const struct hp_policy *hp, uint32_t h)
{
	return (struct hp_node *)tier__hpool_at(&hp->pool, h);
}

static uint8_t *hp_ftag(const struct hp_policy *hp, uint32_t h)
{
	return tier__hpool_at(&hp->freq, h);
}

static bool cached(const struct hp_policy *hp, uint32_t h)
{
	return tier__hpool_tag(&hp->freq, h) != HP_NONE;
}

/* The handle's hit count with the halvings of the epochs it missed applied. */
static uint32_t hp_freq(const struct hp_policy *hp, uint32_t h)
{
	struct hp_node *n = hp_node(hp, h);
	uint8_t *f = hp_ftag(hp, h);
	uint32_t gap = hp->epoch - n->epoch;

	*f = gap >= 32 ? 0 : (uint8_t)(*f >> gap);
	n->epoch = hp->epoch;
	return *f;
}

static void hp_insert(struct tier__policy *p, uint64_t key, uint32_t h, uint64_t now_ms)
{
	struct hp_policy *hp = hp_of(p);

	(void)key;
	(void)now_ms;
	if (cached(hp, h)) {
		tier__hlist_unlink(&hp->pool, &hp->lru, h);
	} else if (tier__hpool_reserve(&hp->pool, h) < 0 ||
		   tier__hpool_reserve(&hp->freq, h) < 0) {
		return;   /* out of memory: the key stays untracked */
	} else {
		hp_node(hp, h)->epoch = hp->epoch;
		*hp_ftag(hp, h) = 0;
	}
	tier__hlist_push_head(&hp->pool, &hp->lru, h);
}

static void hp_access(struct tier__policy *p, uint64_t key, uint32_t h, uint64_t now_ms)
{
	struct hp_policy *hp = hp_of(p);

	(void)key;
	(void)now_ms;
	if (!cached(hp, h))
		return;
	if (hp_freq(hp, h) < HP_FREQ_MAX)
		(*hp_ftag(hp, h))++;
	/* age: halve every count once the cache saw HP_AGE_EVERY hits per object */
	if (++hp->accesses >= (uint64_t)HP_AGE_EVERY * (hp->lru.count ? hp->lru.count : 1)) {
		hp->epoch++;
		hp->accesses = 0;
	}
	tier__hlist_unlink(&hp->pool, &hp->lru, h);
	tier__hlist_push_head(&hp->pool, &hp->lru, h);
}

static void hp_remove(struct tier__policy *p, uint64_t key, uint32_t h)
{
	struct hp_policy *hp = hp_of(p);

	(void)key;
	if (!cached(hp, h))
		return;
	tier__hlist_unlink(&hp->pool, &hp->lru, h);
	*hp_ftag(hp, h) = HP_NONE;
}

static int cand_cmp(const void *a, const void *b)
{
	const struct hp_cand *x = a, *y = b;

	if (x->temp != y->temp)
		return x->temp < y->temp ? -1 : 1;
	if (x->freq != y->freq)
		return x->freq < y->freq ? -1 : 1;
	return x->age < y->age ? -1 : x->age > y->age;
}

static size_t hp_coldest(struct tier__policy *p, uint64_t *keys, size_t max,
			 bool (*want)(void *arg, uint64_t key), void *arg)
{
	struct hp_policy *hp = hp_of(p);
	size_t window, n = 0;
	unsigned decay, last_n;
	uint32_t h;

	if (max == 0)
		return 0;
	window = max > SIZE_MAX / HP_WINDOW_FACTOR ? SIZE_MAX : max * HP_WINDOW_FACTOR;
	if (window > hp->lru.count)
		window = hp->lru.count;
	if (window > hp->scratch_cap) {
		struct hp_cand *s = realloc(hp->scratch, window * sizeof(*s));

		if (!s) {
			window = hp->scratch_cap;   /* degrade to the window we have */
		} else {
			hp->scratch = s;
			hp->scratch_cap = window;
		}
	}
	/* read the live parameters on every call: config set applies at once */
	decay = (unsigned)hp->prm->hit_set_grade_decay_rate;
	last_n = (unsigned)hp->prm->hit_set_search_last_n;
	for (h = hp->lru.tail; h != TIER__KNIL && n < window;) {
		uint32_t cur = h;
		uint64_t key = tier__policy_key(p, cur);

		h = hp_node(hp, cur)->n.prev;
		if (want && !want(arg, key))
			continue;
		hp->scratch[n].key = key;
		hp->scratch[n].temp = tier__hitsets_temperature(hp->hs, key, decay, last_n);
		hp->scratch[n].freq = hp_freq(hp, cur);
		hp->scratch[n].age = (uint32_t)n;
		n++;
	}
	if (n > 1)   /* scratch may be NULL when nothing was ever cached */
		qsort(hp->scratch, n, sizeof(*hp->scratch), cand_cmp);
	if (n > max)
		n = max;
	for (size_t i = 0; i < n; i++)
		keys[i] = hp->scratch[i].key;
	return n;
}

static size_t hp_bytes(const struct tier__policy *p)
{
	const struct hp_policy *hp = (const struct hp_policy *)p;

	return sizeof(*hp) + tier__hpool_bytes(&hp->pool) + tier__hpool_bytes(&hp->freq) +
	       hp->scratch_cap * sizeof(*hp->scratch);
}

static const struct tier__policy_ops hp_ops = {
	.name = "hitset",
	.destroy = hp_destroy,
	.insert = hp_insert,
	.access = hp_access,
	.remove = hp_remove,
	.coldest = hp_coldest,
	.admit = NULL,
	.bytes = hp_bytes,
};

int tier__policy_hitset_create(const struct tier__policy_host *host,
			       const struct tier__hitsets *hs, const struct tier_params *prm,
			       struct tier__policy **out)
{
	struct hp_policy *hp;

	*out = NULL;
	if (!hs || !prm)
		return -EINVAL;
	hp = calloc(1, sizeof(*hp));
	if (!hp)
		return -ENOMEM;
	tier__hpool_init(&hp->pool, sizeof(struct hp_node));
	tier__hpool_init(&hp->freq, 1);
	hp->base.ops = &hp_ops;
	hp->base.host = *host;
	hp->hs = hs;
	hp->prm = prm;
	tier__klist_init(&hp->lru);
	*out = &hp->base;
	return 0;
}
