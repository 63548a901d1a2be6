/* SPDX-License-Identifier: MIT */
/*
 * libtier/policy_hitset.c - the "hitset" eviction order: Ceph's object
 * temperature (agent_estimate_temp over the HitSets) applied to a window
 * taken from the cold end of an LRU of the cached objects.  It decides which
 * cached objects the agent should flush or evict first: lowest temperature
 * first, the least recently used first among equals.  Unlike Ceph's
 * agent_maybe_evict it never compares against a histogram of all objects,
 * so the hottest objects can never be chosen ahead of colder ones in the
 * window.  It never removes a key by itself and never touches the store.
 */
#include <errno.h>
#include <stdlib.h>

#include "libtier/hitset.h"
#include "libtier/policy.h"
#include "libtier/policy_pool.h"

/* Candidates examined per requested key: a wider window finds colder keys. */
#define HP_WINDOW_FACTOR 8u

struct hp_cand {
	uint64_t key;
	uint32_t temp;
	uint32_t age;            /* 0 = least recently used */
};

struct hp_policy {
	struct tier__policy base;
	const struct tier__hitsets *hs;
	const struct tier_params *prm;
	struct tier__kpool pool;     /* nodes are bare tier__knode */
	struct tier__klist lru;      /* head = most recently used */
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

	tier__kpool_fini(&hp->pool);
	free(hp->scratch);
	free(hp);
}

static void hp_insert(struct tier__policy *p, uint64_t key, uint64_t now_ms)
{
	struct hp_policy *hp = hp_of(p);
	uint32_t idx = tier__kpool_find(&hp->pool, key);

	(void)now_ms;
	if (idx != TIER__KNIL) {
		tier__klist_unlink(&hp->pool, &hp->lru, idx);
	} else if (tier__kpool_add(&hp->pool, key, &idx) < 0) {
		return;   /* out of memory: the key stays untracked */
	}
	tier__klist_push_head(&hp->pool, &hp->lru, idx);
}

static void hp_access(struct tier__policy *p, uint64_t key, uint64_t now_ms)
{
	struct hp_policy *hp = hp_of(p);
	uint32_t idx = tier__kpool_find(&hp->pool, key);

	(void)now_ms;
	if (idx == TIER__KNIL)
		return;
	tier__klist_unlink(&hp->pool, &hp->lru, idx);
	tier__klist_push_head(&hp->pool, &hp->lru, idx);
}

static void hp_remove(struct tier__policy *p, uint64_t key)
{
	struct hp_policy *hp = hp_of(p);
	uint32_t idx = tier__kpool_find(&hp->pool, key);

	if (idx == TIER__KNIL)
		return;
	tier__klist_unlink(&hp->pool, &hp->lru, idx);
	tier__kpool_del(&hp->pool, idx);
}

static int cand_cmp(const void *a, const void *b)
{
	const struct hp_cand *x = a, *y = b;

	if (x->temp != y->temp)
		return x->temp < y->temp ? -1 : 1;
	return x->age < y->age ? -1 : x->age > y->age;
}

static size_t hp_coldest(struct tier__policy *p, uint64_t *keys, size_t max,
			 bool (*want)(void *arg, uint64_t key), void *arg)
{
	struct hp_policy *hp = hp_of(p);
	size_t window, n = 0;
	unsigned decay, last_n;
	uint32_t idx;

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
	for (idx = hp->lru.tail; idx != TIER__KNIL && n < window;) {
		const struct tier__knode *node = tier__kpool_node(&hp->pool, idx);
		uint64_t key = node->key;

		idx = node->prev;
		if (want && !want(arg, key))
			continue;
		hp->scratch[n].key = key;
		hp->scratch[n].temp = tier__hitsets_temperature(hp->hs, key, decay, last_n);
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

static const struct tier__policy_ops hp_ops = {
	.name = "hitset",
	.destroy = hp_destroy,
	.insert = hp_insert,
	.access = hp_access,
	.remove = hp_remove,
	.coldest = hp_coldest,
	.admit = NULL,
};

int tier__policy_hitset_create(const struct tier__hitsets *hs, const struct tier_params *prm,
			       struct tier__policy **out)
{
	struct hp_policy *hp = NULL;
	int rc = 0;

	*out = NULL;
	if (!hs || !prm)
		return -EINVAL;
	hp = calloc(1, sizeof(*hp));
	if (!hp) {
		rc = -ENOMEM;
		goto out;
	}
	rc = tier__kpool_init(&hp->pool, sizeof(struct tier__knode), 1024);
	if (rc < 0)
		goto out;
	hp->base.ops = &hp_ops;
	hp->hs = hs;
	hp->prm = prm;
	tier__klist_init(&hp->lru);
	*out = &hp->base;
	hp = NULL;
out:
	if (hp) {
		tier__kpool_fini(&hp->pool);
		free(hp);
	}
	return rc;
}
