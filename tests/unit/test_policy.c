/* SPDX-License-Identifier: MIT */
/*
 * test_policy.c - eviction orders.  hitset: coldest by Ceph temperature over
 * an LRU window, ties by aged hit count then LRU age, the window bound, want() filtering, live
 * parameters.  s3fifo: one-hit wonders go first, objects hit in the small
 * queue move to main and survive, main is a CLOCK, ghosts admit straight to
 * main and are bounded, coldest() names without removing.  Both: insert and
 * remove are idempotent, and the dispatch picks the named policy.
 */
#undef NDEBUG
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "libtier/hitset.h"
#include "libtier/policy.h"

/*
 * The handles the engine's object map would give: one per key (a registry
 * shared by every policy of a test, as one map), the host names them back.
 */
#define REG_KEYS  (1u << 17)
#define REG_SLOTS (1u << 18)
static uint64_t reg_key[REG_KEYS];
static uint32_t reg_slot[REG_SLOTS];   /* handle + 1, 0 = empty */
static uint32_t reg_n;

static uint32_t H(uint64_t key)
{
	uint32_t s = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 46) & (REG_SLOTS - 1);

	for (; reg_slot[s]; s = (s + 1) & (REG_SLOTS - 1))
		if (reg_key[reg_slot[s] - 1] == key)
			return reg_slot[s] - 1;
	assert_true(reg_n < REG_KEYS);
	reg_key[reg_n] = key;
	reg_slot[s] = ++reg_n;
	return reg_n - 1;
}

static uint64_t reg_key_of(const void *ctx, uint32_t h)
{
	(void)ctx;
	assert_true(h < reg_n);
	return reg_key[h];
}

static const struct tier__policy_host host = { .key_of = reg_key_of };

#define P_INSERT(p, k) (p)->ops->insert((p), (k), H(k), 0)
#define P_ACCESS(p, k) (p)->ops->access((p), (k), H(k), 0)
#define P_REMOVE(p, k) (p)->ops->remove((p), (k), H(k))

struct fix {
	struct tier__hitsets *hs;
	struct tier_params prm;
	struct tier__policy *p;
};

static bool want_odd(void *arg, uint64_t key)
{
	(void)arg;
	return key & 1;
}

static bool want_not_listed(void *arg, uint64_t key)
{
	const uint64_t *no = arg;

	for (; *no; no++)
		if (*no == key)
			return false;
	return true;
}

static size_t coldest(struct tier__policy *p, uint64_t *out, size_t max)
{
	return p->ops->coldest(p, out, max, NULL, NULL);
}

static void assert_keys(const uint64_t *got, size_t n, const uint64_t *exp, size_t en)
{
	assert_int_equal(n, en);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(got[i], exp[i]);
}

/* Hitset fixture; params are plain so tests can change them live. */
static struct fix *hfix(void)
{
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	memset(&f->prm, 0, sizeof(f->prm));
	f->prm.hit_set_grade_decay_rate = 20;
	f->prm.hit_set_search_last_n = 1;
	assert_int_equal(tier__hitsets_create(4, 0.001, 1024, 0, &f->hs), 0);
	assert_int_equal(tier__policy_create(TIER_EVICT_HITSET, &host, f->hs, &f->prm, 0, &f->p), 0);
	assert_string_equal(f->p->ops->name, "hitset");
	return f;
}

static void hfix_free(struct fix *f)
{
	tier__policy_destroy(f->p);
	tier__hitsets_destroy(f->hs);
	free(f);
}

static void test_dispatch_creates_named_policy(void **state)
{
	struct tier__policy *p = (void *)1;
	struct tier_params prm;

	(void)state;
	memset(&prm, 0, sizeof(prm));
	assert_int_equal(tier__policy_create(TIER_EVICT_HITSET, &host, NULL, &prm, 0, &p), -EINVAL);
	assert_null(p);
	assert_int_equal(tier__policy_create((enum tier_evict_policy)99, &host, NULL, NULL, 0, &p), -EINVAL);
	assert_int_equal(tier__policy_create(TIER_EVICT_S3FIFO, &host, NULL, NULL, 100, &p), 0);
	assert_string_equal(p->ops->name, "s3fifo");
	assert_non_null(p->ops->admit);
	tier__policy_destroy(p);
	tier__policy_destroy(NULL);
}

static void test_hitset_cold_keys_come_in_lru_order(void **state)
{
	struct fix *f = hfix();
	uint64_t got[16];
	const uint64_t exp[] = { 1, 2, 4, 5 };

	(void)state;
	for (uint64_t k = 1; k <= 10; k++)
		P_INSERT(f->p, k);
	P_ACCESS(f->p, 3);           /* 3 becomes most recently used */
	assert_keys(got, coldest(f->p, got, 4), exp, 4);
	assert_int_equal(coldest(f->p, got, 16), 10);
	assert_int_equal(got[9], 3);
	hfix_free(f);
}

static void test_hitset_lower_temperature_first(void **state)
{
	struct fix *f = hfix();
	uint64_t got[16];
	const uint64_t exp[] = { 5, 6, 3, 4, 1, 2 };

	(void)state;
	for (uint64_t k = 1; k <= 6; k++)
		P_INSERT(f->p, k);
	/* 3, 4 hot last period (800000), 1, 2 hot now (1000000), 5, 6 cold */
	tier__hitsets_insert(f->hs, 3);
	tier__hitsets_insert(f->hs, 4);
	assert_int_equal(tier__hitsets_maybe_rotate(f->hs, 1000, 1000), 1);
	tier__hitsets_insert(f->hs, 1);
	tier__hitsets_insert(f->hs, 2);
	assert_keys(got, coldest(f->p, got, 6), exp, 6);
	/* live parameters: decay 100 makes last period's hits worth nothing */
	f->prm.hit_set_grade_decay_rate = 100;
	assert_int_equal(coldest(f->p, got, 6), 6);
	assert_int_equal(got[0], 3);   /* 3, 4 now tie with 5, 6: LRU age decides */
	assert_int_equal(got[1], 4);
	hfix_free(f);
}

static void test_hitset_ties_go_to_the_less_hit_key_and_hits_age(void **state)
{
	struct fix *f = hfix();
	uint64_t got[4];
	const uint64_t fewer_hits_first[] = { 2, 1 }, aged_back_to_lru[] = { 1, 2 };
	uint64_t skip3[] = { 3, 0 };

	(void)state;
	P_INSERT(f->p, 1);
	P_INSERT(f->p, 2);
	for (int i = 0; i < 3; i++)
		P_ACCESS(f->p, 1);
	for (int i = 0; i < 2; i++)
		P_ACCESS(f->p, 2);
	/* same temperature; 1 is least recently used but was hit 3 times, 2 twice */
	assert_keys(got, coldest(f->p, got, 4), fewer_hits_first, 2);
	/* 19 hits on 3 (threshold 4 hits x 3 keys) age every count twice: 3>>2 = 2>>2 = 0 */
	P_INSERT(f->p, 3);
	for (int i = 0; i < 19; i++)
		P_ACCESS(f->p, 3);
	assert_keys(got, f->p->ops->coldest(f->p, got, 4, want_not_listed, skip3),
		    aged_back_to_lru, 2);
	hfix_free(f);
}

static void test_hitset_window_is_bounded(void **state)
{
	struct fix *f = hfix();
	uint64_t got[4];

	(void)state;
	/* the 8 least recently used are hot, the rest cold */
	for (uint64_t k = 1; k <= 100; k++) {
		P_INSERT(f->p, k);
		if (k <= 8)
			tier__hitsets_insert(f->hs, k);
	}
	/* max 1: window of 8 holds only hot keys, the LRU one wins */
	assert_int_equal(coldest(f->p, got, 1), 1);
	assert_int_equal(got[0], 1);
	/* max 2: window of 16 reaches the cold ones */
	assert_int_equal(coldest(f->p, got, 2), 2);
	assert_int_equal(got[0], 9);
	assert_int_equal(got[1], 10);
	hfix_free(f);
}

static void test_hitset_want_filters_and_window_counts_wanted(void **state)
{
	struct fix *f = hfix();
	uint64_t got[8];
	const uint64_t exp[] = { 3, 5, 1 };

	(void)state;
	for (uint64_t k = 1; k <= 40; k++)
		P_INSERT(f->p, k);
	tier__hitsets_insert(f->hs, 1);
	assert_int_equal(f->p->ops->coldest(f->p, got, 3, want_odd, NULL), 3);
	/* only odd keys are candidates; 1 is the oldest but hot, so it is skipped */
	assert_int_equal(got[0], 3);
	assert_int_equal(got[1], 5);
	assert_int_equal(got[2], 7);
	for (uint64_t k = 7; k <= 40; k++)
		P_REMOVE(f->p, k);
	/* fewer wanted keys than asked: all of them, the hot one last */
	assert_keys(got, f->p->ops->coldest(f->p, got, 8, want_odd, NULL), exp, 3);
	hfix_free(f);
}

static void test_hitset_insert_remove_idempotent(void **state)
{
	struct fix *f = hfix();
	uint64_t got[8];
	const uint64_t exp[] = { 2, 1 };

	(void)state;
	P_INSERT(f->p, 1);
	P_INSERT(f->p, 2);
	P_INSERT(f->p, 1);         /* counted once */
	assert_keys(got, coldest(f->p, got, 8), exp, 2);
	P_REMOVE(f->p, 2);
	P_REMOVE(f->p, 2);
	P_REMOVE(f->p, 77);
	P_ACCESS(f->p, 77);        /* untracked: ignored, not added */
	assert_int_equal(coldest(f->p, got, 8), 1);
	assert_int_equal(got[0], 1);
	P_REMOVE(f->p, 1);
	assert_int_equal(coldest(f->p, got, 8), 0);
	hfix_free(f);
}

static void test_hitset_many_keys_survive_pool_growth(void **state)
{
	struct fix *f = hfix();
	uint64_t got[4];
	const uint64_t n = 50000;

	(void)state;
	for (uint64_t k = 1; k <= n; k++)
		P_INSERT(f->p, k * 7919);
	for (uint64_t k = 1; k <= n; k += 2)
		P_REMOVE(f->p, k * 7919);
	for (uint64_t k = 2; k <= n; k += 2)
		P_ACCESS(f->p, k * 7919);  /* every survivor found, in order */
	assert_int_equal(coldest(f->p, got, 2), 2);
	assert_int_equal(got[0], 2 * 7919);
	assert_int_equal(got[1], 4 * 7919);
	hfix_free(f);
}

static struct tier__policy *s3(uint64_t cap)
{
	struct tier__policy *p = NULL;

	assert_int_equal(tier__policy_s3fifo_create(&host, cap, &p), 0);
	return p;
}

static void test_s3fifo_one_hit_wonders_go_first(void **state)
{
	struct tier__policy *p = s3(100);
	uint64_t got[100];

	(void)state;
	for (uint64_t k = 1; k <= 100; k++)
		P_INSERT(p, k);
	for (uint64_t k = 1; k <= 20; k++)
		P_ACCESS(p, k);
	/* S holds all 100; the 20 hit ones move to M, the rest are victims in order */
	assert_int_equal(coldest(p, got, 50), 50);
	for (size_t i = 0; i < 50; i++)
		assert_int_equal(got[i], 21 + i);
	p->ops->destroy(p);
}

static void test_s3fifo_frequent_keys_survive_churn(void **state)
{
	struct tier__policy *p = s3(10);
	uint64_t got[1];

	(void)state;
	for (uint64_t k = 1; k <= 10; k++)
		P_INSERT(p, k);
	for (uint64_t r = 0; r < 200; r++) {
		for (uint64_t k = 1; k <= 5; k++)
			P_ACCESS(p, k);
		assert_int_equal(coldest(p, got, 1), 1);
		assert_true(got[0] > 5);   /* a hot key is never the victim */
		P_REMOVE(p, got[0]);
		P_INSERT(p, 1000 + r);     /* a scan of one-hit wonders */
	}
	p->ops->destroy(p);
}

static void test_s3fifo_ghost_admits_to_main(void **state)
{
	struct tier__policy *p = s3(10);
	uint64_t got[8];
	const uint64_t exp[] = { 2, 3, 1 };

	(void)state;
	P_INSERT(p, 1);
	assert_int_equal(coldest(p, got, 1), 1);
	assert_int_equal(got[0], 1);
	assert_false(p->ops->admit(p, 1));
	P_REMOVE(p, 1);            /* evicted from S: remembered as a ghost */
	assert_true(p->ops->admit(p, 1));
	assert_false(p->ops->admit(p, 2));
	assert_int_equal(coldest(p, got, 8), 0);   /* ghosts are not cached */
	P_REMOVE(p, 1);            /* removing a ghost changes nothing */
	assert_true(p->ops->admit(p, 1));
	P_INSERT(p, 1);            /* back from the ghost: straight into M */
	assert_false(p->ops->admit(p, 1));
	P_INSERT(p, 2);
	P_INSERT(p, 3);
	/* 1 is older than 2 and 3 but in M: S's one-hit wonders go first */
	assert_keys(got, coldest(p, got, 8), exp, 3);
	/* leaving M forgets the key entirely */
	P_REMOVE(p, 1);
	assert_false(p->ops->admit(p, 1));
	p->ops->destroy(p);
}

static void test_s3fifo_main_gives_hit_keys_another_round(void **state)
{
	struct tier__policy *p = s3(10);
	uint64_t got[8];
	const uint64_t exp[] = { 2, 1, 3 };

	(void)state;
	/* put 1, 2, 3 into M (via the ghost), oldest first */
	for (uint64_t k = 1; k <= 3; k++) {
		P_INSERT(p, k);
		P_REMOVE(p, k);
		P_INSERT(p, k);
	}
	P_ACCESS(p, 1);
	P_ACCESS(p, 3);
	P_ACCESS(p, 3);
	/* 1 is reinserted once, 3 twice: 2 first, then 1, then 3 */
	assert_keys(got, coldest(p, got, 8), exp, 3);
	p->ops->destroy(p);
}

static void test_s3fifo_coldest_names_without_removing(void **state)
{
	struct tier__policy *p = s3(100);
	uint64_t a[8], b[8];
	const uint64_t busy[] = { 2, 4, 0 };

	(void)state;
	for (uint64_t k = 1; k <= 8; k++)
		P_INSERT(p, k);
	assert_int_equal(coldest(p, a, 3), 3);
	assert_int_equal(coldest(p, b, 3), 3);
	assert_memory_equal(a, b, sizeof(a[0]) * 3);
	/* the engine could not evict 2 and 4: they are skipped, the walk goes on */
	assert_int_equal(p->ops->coldest(p, a, 3, want_not_listed, (void *)busy), 3);
	assert_int_equal(a[0], 1);
	assert_int_equal(a[1], 3);
	assert_int_equal(a[2], 5);
	assert_int_equal(p->ops->coldest(p, a, 8, want_odd, NULL), 4);
	assert_int_equal(coldest(p, a, 8), 8);
	p->ops->destroy(p);
}

static void test_s3fifo_insert_remove_idempotent(void **state)
{
	struct tier__policy *p = s3(100);
	uint64_t got[8];

	(void)state;
	P_INSERT(p, 5);
	P_INSERT(p, 5);
	P_ACCESS(p, 6);            /* untracked: ignored */
	assert_int_equal(coldest(p, got, 8), 1);
	assert_int_equal(got[0], 5);
	P_REMOVE(p, 5);
	P_REMOVE(p, 5);
	P_REMOVE(p, 6);
	assert_int_equal(coldest(p, got, 8), 0);
	assert_true(p->ops->admit(p, 5));
	p->ops->destroy(p);
}

static void test_s3fifo_ghost_is_bounded(void **state)
{
	struct tier__policy *p = s3(10);   /* ghost holds 9 = the size of M */

	(void)state;
	for (uint64_t k = 1; k <= 50; k++) {
		P_INSERT(p, k);
		P_REMOVE(p, k);
	}
	for (uint64_t k = 1; k <= 41; k++)
		assert_false(p->ops->admit(p, k));
	for (uint64_t k = 42; k <= 50; k++)
		assert_true(p->ops->admit(p, k));
	p->ops->destroy(p);
}

static void test_s3fifo_hit_in_main_outlives_scan(void **state)
{
	struct tier__policy *p = s3(20);
	uint64_t got[1], evicted_hot = 0;

	(void)state;
	/* a full cache: a working set of 10 hit in S, 10 others, then a long scan */
	for (uint64_t k = 1; k <= 10; k++) {
		P_INSERT(p, k);
		P_ACCESS(p, k);
	}
	for (uint64_t k = 11; k <= 20; k++)
		P_INSERT(p, k);
	for (uint64_t r = 0; r < 1000; r++) {
		if (r % 4 == 0)
			for (uint64_t k = 1; k <= 10; k++)
				P_ACCESS(p, k);
		P_INSERT(p, 100 + r);
		assert_int_equal(coldest(p, got, 1), 1);
		evicted_hot += got[0] <= 10;
		P_REMOVE(p, got[0]);
	}
	assert_int_equal(evicted_hot, 0);
	p->ops->destroy(p);
}

/* Key k into M by way of the ghost queue. */
static void into_main(struct tier__policy *p, uint64_t k)
{
	P_INSERT(p, k);
	P_REMOVE(p, k);
	P_INSERT(p, k);
}

/* Churn through M only; returns how often a key <= 5 was the victim. */
static unsigned main_churn(bool hit_hot)
{
	struct tier__policy *p = s3(20);
	uint64_t got[1];
	unsigned hot_victims = 0;

	for (uint64_t k = 1; k <= 20; k++)
		into_main(p, k);
	for (uint64_t r = 0; r < 500; r++) {
		if (hit_hot)
			for (uint64_t k = 1; k <= 5; k++)
				P_ACCESS(p, k);
		into_main(p, 1000 + r);
		assert_int_equal(coldest(p, got, 1), 1);
		hot_victims += got[0] <= 5;
		P_REMOVE(p, got[0]);
	}
	p->ops->destroy(p);
	return hot_victims;
}

static void test_s3fifo_main_clock_spares_keys_hit_between_sweeps(void **state)
{
	(void)state;
	assert_int_equal(main_churn(true), 0);
	assert_int_equal(main_churn(false), 5);   /* the control: unhit, they go */
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Random inserts and removes against a reference: the index never loses a key. */
static void test_policies_track_exactly_the_inserted_set(void **state)
{
	enum { RANGE = 3000, OPS = 60000 };
	struct fix *f = hfix();
	struct tier__policy *pol[4] = { f->p, s3(0), NULL, NULL };
	static bool in[RANGE];
	static uint64_t got[RANGE];
	uint64_t rng = 88172645463325252ull;
	size_t expect = 0, n;

	(void)state;
	assert_int_equal(tier__policy_create(TIER_EVICT_LRU, &host, NULL, NULL, 0, &pol[2]), 0);
	assert_int_equal(tier__policy_create(TIER_EVICT_ARC, &host, NULL, NULL, 0, &pol[3]), 0);
	memset(in, 0, sizeof(in));
	for (int i = 0; i < OPS; i++) {
		uint64_t k;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		k = rng % RANGE;
		if (rng >> 63) {
			expect += !in[k];
			in[k] = true;
			for (int j = 0; j < 4; j++)
				P_INSERT(pol[j], k << 20);
		} else {
			expect -= in[k];
			in[k] = false;
			for (int j = 0; j < 4; j++)
				P_REMOVE(pol[j], k << 20);
		}
		if (i % 7 == 0)
			for (int j = 0; j < 4; j++)
				P_ACCESS(pol[j], k << 20);
	}
	for (int pj = 0; pj < 4; pj++) {
		n = coldest(pol[pj], got, RANGE);
		assert_int_equal(n, expect);
		qsort(got, n, sizeof(got[0]), cmp_u64);
		for (size_t i = 0, j = 0; i < RANGE; i++)
			if (in[i])
				assert_int_equal(got[j++], (uint64_t)i << 20);
	}
	for (int j = 1; j < 4; j++)
		tier__policy_destroy(pol[j]);
	hfix_free(f);
}

/* ---- lru ---- */

static void test_lru_coldest_is_least_recently_used(void **state)
{
	struct tier__policy *p;
	uint64_t got[8];
	(void)state;

	assert_int_equal(tier__policy_create(TIER_EVICT_LRU, &host, NULL, NULL, 0, &p), 0);
	assert_string_equal(p->ops->name, "lru");
	for (uint64_t k = 1; k <= 5; k++)
		P_INSERT(p, k);
	P_ACCESS(p, 2);
	P_ACCESS(p, 1);
	P_ACCESS(p, 99);   /* not tracked: ignored */
	assert_keys(got, coldest(p, got, 8), (uint64_t[]){ 3, 4, 5, 2, 1 }, 5);
	assert_keys(got, p->ops->coldest(p, got, 2, want_odd, NULL), (uint64_t[]){ 3, 5 }, 2);
	P_REMOVE(p, 3);
	P_REMOVE(p, 3);
	P_INSERT(p, 4);    /* a re-insert is a use */
	assert_keys(got, coldest(p, got, 8), (uint64_t[]){ 5, 2, 1, 4 }, 4);
	assert_null(p->ops->admit);
	assert_true(tier__policy_bytes(p) > 0);
	tier__policy_destroy(p);
}

/* ---- arc ---- */

static void test_arc_scan_does_not_flush_frequent_keys(void **state)
{
	struct tier__policy *p;
	uint64_t got[4];
	(void)state;

	assert_int_equal(tier__policy_create(TIER_EVICT_ARC, &host, NULL, NULL, 0, &p), 0);
	assert_string_equal(p->ops->name, "arc");
	/* 1..4 hit twice (T2), then a scan of one-touch keys through a cache of 8 */
	for (uint64_t k = 1; k <= 4; k++) {
		P_INSERT(p, k);
		P_ACCESS(p, k);
	}
	for (uint64_t k = 100; k < 200; k++) {
		size_t n;

		P_INSERT(p, k);
		if (k < 104)
			continue;   /* the cache fills to 8 */
		n = coldest(p, got, 1);
		assert_int_equal(n, 1);
		assert_true(got[0] >= 100);   /* the victim is always a scanned key */
		P_REMOVE(p, got[0]);
	}
	tier__policy_destroy(p);
}

static void test_arc_ghost_hits_adapt_the_target(void **state)
{
	struct tier__policy *p;
	uint64_t got[8];
	(void)state;

	assert_int_equal(tier__policy_create(TIER_EVICT_ARC, &host, NULL, NULL, 0, &p), 0);
	for (uint64_t k = 1; k <= 4; k++)
		P_INSERT(p, k);                           /* T1 = 4 3 2 1 */
	assert_int_equal(tier__policy_arc_target(p), 0);
	assert_keys(got, coldest(p, got, 1), (uint64_t[]){ 1 }, 1);
	P_REMOVE(p, 1);                                   /* 1 -> B1 */
	assert_false(tier__policy_arc_is_ghost(p, 2));                /* cached, not a ghost */
	assert_true(tier__policy_arc_is_ghost(p, 1));                 /* a ghost: a hint */
	assert_false(tier__policy_arc_is_ghost(p, 77));
	/* the admission hint is exactly "a ghost" */
	assert_false(p->ops->admit(p, 2));
	assert_true(p->ops->admit(p, 1));
	assert_false(p->ops->admit(p, 77));
	P_INSERT(p, 1);                                   /* B1 hit: T1 was too small */
	assert_int_equal(tier__policy_arc_target(p), 1);
	assert_false(tier__policy_arc_is_ghost(p, 1));
	/* 1 is in T2 now; T1's 3 keys go while T1 exceeds p = 1, then T2, then T1 */
	assert_keys(got, coldest(p, got, 4), (uint64_t[]){ 2, 3, 1, 4 }, 4);
	/* a key of T2 that leaves goes to B2; its return lowers the target */
	P_REMOVE(p, 1);
	assert_true(tier__policy_arc_is_ghost(p, 1));
	P_INSERT(p, 1);
	assert_int_equal(tier__policy_arc_target(p), 0);
	tier__policy_destroy(p);
}

/*
 * Handles as the object map recycles them: a key holds one while cached and
 * gives it back when it leaves (RH_INSERT / RH_REMOVE), the next key takes it.
 */
#define RH_MAX 64
static uint64_t rh_key[RH_MAX];
static bool rh_used[RH_MAX];

static uint32_t rh_take(uint64_t key)
{
	for (uint32_t h = 0; h < RH_MAX; h++)
		if (rh_used[h] && rh_key[h] == key)
			return h;
	for (uint32_t h = 0; h < RH_MAX; h++)
		if (!rh_used[h]) {
			rh_used[h] = true;
			rh_key[h] = key;
			return h;
		}
	fail();
	return 0;
}

static uint64_t rh_key_of(const void *ctx, uint32_t h)
{
	(void)ctx;
	assert_true(h < RH_MAX && rh_used[h]);
	return rh_key[h];
}

static const struct tier__policy_host rh_host = { .key_of = rh_key_of };

static void RH_INSERT(struct tier__policy *p, uint64_t key)
{
	p->ops->insert(p, key, rh_take(key), 0);
}

static void RH_REMOVE(struct tier__policy *p, uint64_t key)
{
	uint32_t h = rh_take(key);

	p->ops->remove(p, key, h);
	rh_used[h] = false;
}

static void test_arc_ghosts_are_bounded_by_the_cache(void **state)
{
	struct tier__policy *p;
	uint64_t got[1];
	(void)state;

	memset(rh_used, 0, sizeof(rh_used));
	assert_int_equal(tier__policy_create(TIER_EVICT_ARC, &rh_host, NULL, NULL, 0, &p), 0);
	for (uint64_t k = 1; k <= 10; k++)
		RH_INSERT(p, k);
	for (uint64_t k = 11; k <= 5000; k++) {
		RH_INSERT(p, k);
		assert_int_equal(coldest(p, got, 1), 1);
		RH_REMOVE(p, got[0]);
	}
	/* c = 11 (10 cached plus one coming in): |T1| + |B1| <= 11 keeps one ghost */
	assert_false(tier__policy_arc_is_ghost(p, 4000));
	assert_false(tier__policy_arc_is_ghost(p, 4989));
	assert_true(tier__policy_arc_is_ghost(p, 4990));
	assert_false(tier__policy_arc_is_ghost(p, 4999));   /* cached */
	assert_true(tier__policy_bytes(p) < 64 * 1024);
	tier__policy_destroy(p);
}

/*
 * Node storage by handle: handles the map recycles carry no state of the key
 * that held them before (a new key starts cold, the old one is a ghost where
 * the policy keeps ghosts), and a cached object costs the policy its links
 * and tag: 13 bytes (hitset), 8.5 (s3fifo), 8.25 (arc), 8 (lru), plus the
 * ghosts (empty here: their queues start at a few hundred bytes; full in
 * test_policies_ghost_bytes).
 */
static void test_policies_recycled_handles_and_bytes(void **state)
{
	enum { N = 8 * 4096 };
	static const struct { enum tier_evict_policy which; double per_obj; bool ghosts; } pol[] = {
		{ TIER_EVICT_LRU, 8, false },
		{ TIER_EVICT_ARC, 8.25, true },
		{ TIER_EVICT_S3FIFO, 8.5, true },
		{ TIER_EVICT_HITSET, 13, false },
	};
	struct fix *f = hfix();
	uint64_t got[4];

	(void)state;
	for (size_t i = 0; i < sizeof(pol) / sizeof(pol[0]); i++) {
		struct tier__policy *p;
		size_t b;

		memset(rh_used, 0, sizeof(rh_used));
		assert_int_equal(tier__policy_create(pol[i].which, &rh_host, f->hs, &f->prm, 0, &p), 0);
		/* key 1 takes handle 0, leaves; key 2 takes handle 0 and must be the only one cached */
		RH_INSERT(p, 1);
		p->ops->access(p, 1, 0, 0);
		RH_REMOVE(p, 1);
		RH_INSERT(p, 2);
		assert_int_equal(rh_take(2), 0);
		assert_int_equal(coldest(p, got, 4), 1);
		assert_int_equal(got[0], 2);
		if (pol[i].ghosts) {
			assert_true(p->ops->admit(p, 1));    /* 1 is remembered, by key */
			assert_false(p->ops->admit(p, 2));
		}
		RH_REMOVE(p, 2);
		assert_int_equal(coldest(p, got, 4), 0);
		tier__policy_destroy(p);

		/* N cached objects under handles 0..N-1 */
		assert_int_equal(tier__policy_create(pol[i].which, &host, f->hs, &f->prm, 0, &p), 0);
		for (uint64_t k = 0; k < N; k++)
			p->ops->insert(p, (k + 1) << 8, (uint32_t)k, 0);
		b = tier__policy_bytes(p);
		print_message("%s: %zu bytes for %d cached objects (%.2f each)\n", p->ops->name, b, N,
			      (double)b / N);
		assert_true((double)b <= N * pol[i].per_obj + 4096);
		assert_true((double)b >= N * pol[i].per_obj);
		tier__policy_destroy(p);
	}
	hfix_free(f);
}

/*
 * Handles 0 .. GN - 1 of the ghost test: key (serial << 20) | handle, so a
 * victim's key names its handle.
 */
#define GN (4 * 4096)
static uint64_t gn_key[GN];

static uint64_t gn_key_of(const void *ctx, uint32_t h)
{
	(void)ctx;
	assert_true(h < GN);
	return gn_key[h];
}

/*
 * A full cache that churns one new key through at a time until it holds
 * as many ghosts as cached objects (ARC's B1, S3-FIFO's G): each ghost costs
 * its 8-byte key in the ring and, at this count, two 4-byte index slots
 * (load 1/2), a bit of bitmap; no links.
 */
static void test_policies_ghost_bytes(void **state)
{
	/* ARC's victims leave T1 for B1 once the rest were hit (T2); S3-FIFO's leave S for G unhit */
	static const struct { enum tier_evict_policy which; double per_obj; bool hit; } pol[] = {
		{ TIER_EVICT_ARC, 8.25, true },
		{ TIER_EVICT_S3FIFO, 8.5, false },
	};
	static const struct tier__policy_host gn_host = { .key_of = gn_key_of };

	(void)state;
	for (size_t i = 0; i < sizeof(pol) / sizeof(pol[0]); i++) {
		struct tier__policy *p;
		uint32_t spare = GN - 1;
		uint64_t v;
		double b;

		assert_int_equal(tier__policy_create(pol[i].which, &gn_host, NULL, NULL, 0, &p), 0);
		/* GN - 1 cached, the last handle spare */
		for (uint32_t h = 0; h < spare; h++) {
			gn_key[h] = (uint64_t)(h + 1) << 20 | h;
			p->ops->insert(p, gn_key[h], h, 0);
			if (pol[i].hit)
				p->ops->access(p, gn_key[h], h, 0);
		}
		for (uint64_t n = GN; n < 2 * GN; n++) {
			gn_key[spare] = n << 20 | spare;
			p->ops->insert(p, gn_key[spare], spare, 0);
			assert_int_equal(p->ops->coldest(p, &v, 1, NULL, NULL), 1);
			spare = (uint32_t)(v & ((1u << 20) - 1));
			p->ops->remove(p, v, spare);
			assert_true(p->ops->admit(p, v));   /* remembered */
		}
		b = (double)tier__policy_bytes(p);
		print_message("%s: %.0f bytes for %d cached objects and as many ghosts (%.2f each)\n",
			      p->ops->name, b, GN - 1, b / GN);
		assert_true(b <= GN * (pol[i].per_obj + 8 + 8 + 0.125) + 4096);
		assert_true(b >= GN * (pol[i].per_obj + 8));
		tier__policy_destroy(p);
	}
}

/* ---- the TinyLFU sketch ---- */

static void test_sketch_counts_ages_and_saturates(void **state)
{
	struct tier__sketch *sk;
	uint64_t resets;
	(void)state;

	assert_int_equal(tier__sketch_create(1000, &sk), 0);
	assert_int_equal(tier__sketch_estimate(sk, 42), 0);
	for (int i = 0; i < 5; i++)
		tier__sketch_add(sk, 42);
	tier__sketch_add(sk, 43);
	assert_int_equal(tier__sketch_estimate(sk, 42), 5);
	assert_int_equal(tier__sketch_estimate(sk, 43), 1);
	for (int i = 0; i < 100; i++)
		tier__sketch_add(sk, 7);
	assert_int_equal(tier__sketch_estimate(sk, 7), 15);   /* 4-bit counters */
	/* 10 x width additions halve every counter */
	resets = tier__sketch_resets(sk);
	for (uint64_t k = 1000; tier__sketch_resets(sk) == resets; k++)
		tier__sketch_add(sk, k);
	assert_true(tier__sketch_estimate(sk, 7) <= 8);
	assert_true(tier__sketch_estimate(sk, 7) >= 7);
	assert_true(tier__sketch_estimate(sk, 42) <= 3);
	/* width 1024 counters x 4 rows x 4 bits */
	assert_true(tier__sketch_bytes(sk) >= 2048 && tier__sketch_bytes(sk) < 4096);
	tier__sketch_destroy(sk);
	tier__sketch_destroy(NULL);
}

static void test_sketch_separates_hot_from_cold(void **state)
{
	struct tier__sketch *sk;
	unsigned wrong = 0;
	(void)state;

	assert_int_equal(tier__sketch_create(4096, &sk), 0);
	/* 100 hot keys seen 8 times, 4000 cold keys once */
	for (int r = 0; r < 8; r++)
		for (uint64_t k = 0; k < 100; k++)
			tier__sketch_add(sk, k * 7919);
	for (uint64_t k = 0; k < 4000; k++)
		tier__sketch_add(sk, 1000003 + k);
	for (uint64_t k = 0; k < 4000; k++)
		wrong += tier__sketch_estimate(sk, 1000003 + k) >= 8;
	for (uint64_t k = 0; k < 100; k++)
		assert_true(tier__sketch_estimate(sk, k * 7919) >= 8);   /* never under */
	assert_true(wrong < 40);   /* < 1% of cold keys look hot */
	tier__sketch_destroy(sk);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dispatch_creates_named_policy),
		cmocka_unit_test(test_hitset_cold_keys_come_in_lru_order),
		cmocka_unit_test(test_hitset_lower_temperature_first),
		cmocka_unit_test(test_hitset_ties_go_to_the_less_hit_key_and_hits_age),
		cmocka_unit_test(test_hitset_window_is_bounded),
		cmocka_unit_test(test_hitset_want_filters_and_window_counts_wanted),
		cmocka_unit_test(test_hitset_insert_remove_idempotent),
		cmocka_unit_test(test_hitset_many_keys_survive_pool_growth),
		cmocka_unit_test(test_s3fifo_one_hit_wonders_go_first),
		cmocka_unit_test(test_s3fifo_frequent_keys_survive_churn),
		cmocka_unit_test(test_s3fifo_ghost_admits_to_main),
		cmocka_unit_test(test_s3fifo_main_gives_hit_keys_another_round),
		cmocka_unit_test(test_s3fifo_coldest_names_without_removing),
		cmocka_unit_test(test_s3fifo_insert_remove_idempotent),
		cmocka_unit_test(test_s3fifo_ghost_is_bounded),
		cmocka_unit_test(test_s3fifo_hit_in_main_outlives_scan),
		cmocka_unit_test(test_s3fifo_main_clock_spares_keys_hit_between_sweeps),
		cmocka_unit_test(test_policies_track_exactly_the_inserted_set),
		cmocka_unit_test(test_lru_coldest_is_least_recently_used),
		cmocka_unit_test(test_arc_scan_does_not_flush_frequent_keys),
		cmocka_unit_test(test_arc_ghost_hits_adapt_the_target),
		cmocka_unit_test(test_arc_ghosts_are_bounded_by_the_cache),
		cmocka_unit_test(test_policies_recycled_handles_and_bytes),
		cmocka_unit_test(test_policies_ghost_bytes),
		cmocka_unit_test(test_sketch_counts_ages_and_saturates),
		cmocka_unit_test(test_sketch_separates_hot_from_cold),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
