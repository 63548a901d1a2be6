/* SPDX-License-Identifier: MIT */
/*
 * test_policy_ghost.c - the ghost queue (struct tier__gq, policy_ghost.c)
 * against a reference FIFO: every find, pop and count agrees through a long
 * random run of pushes, finds, deletes from the middle and pops that grows,
 * compacts and shrinks the ring and crosses the wrap of the sequence
 * numbers, the layout's invariants hold after every step, and memory stays
 * proportional to the live keys however many keys are pushed and deleted
 * from the middle.
 */
#undef NDEBUG
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "libtier/policy_pool.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Distinct keys, spread over all 64 bits, 0 and UINT64_MAX among them. */
static uint64_t key_n(uint64_t n)
{
	if (n == 0)
		return 0;
	if (n == 1)
		return UINT64_MAX;
	return n * 0x9e3779b97f4a7c15ull;
}

/* The reference: the keys held, oldest first, ref(0) .. ref(ref_n - 1). */
#define REF_MAX 32768
static uint64_t ref_buf[REF_MAX];
static uint32_t ref_off, ref_n;
#define ref(i) ref_buf[ref_off + (i)]

static void ref_push(uint64_t key)
{
	assert_true(ref_n < REF_MAX);
	if (ref_off + ref_n == REF_MAX) {
		memmove(ref_buf, &ref(0), ref_n * sizeof(ref_buf[0]));
		ref_off = 0;
	}
	ref(ref_n++) = key;
}

/* Drop ref(i), moving the shorter side. */
static void ref_del(uint32_t i)
{
	if (i < ref_n / 2) {
		memmove(&ref(1), &ref(0), i * sizeof(ref_buf[0]));
		ref_off++;
	} else {
		memmove(&ref(i), &ref(i + 1), (ref_n - i - 1) * sizeof(ref_buf[0]));
	}
	ref_n--;
}

static void ref_clear(void)
{
	ref_off = ref_n = 0;
}

static bool dead_at(const struct tier__gq *q, uint32_t pos)
{
	return q->dead[pos / 64] >> (pos % 64) & 1;
}

/* The layout's invariants, and the live entries in ring order are the reference. */
static void check(const struct tier__gq *q)
{
	uint32_t live = 0, used = 0;

	assert_true(q->cap >= 16 && (q->cap & (q->cap - 1)) == 0);
	assert_true(((q->mask + 1) & q->mask) == 0 && q->mask >= 15);
	assert_true(q->tail - q->head <= q->cap);
	assert_int_equal(q->live, ref_n);
	assert_int_equal(tier__gq_count(q), ref_n);
	assert_true((uint64_t)q->live * 4 <= ((uint64_t)q->mask + 1) * 3);
	if (q->live)
		assert_false(dead_at(q, q->head & (q->cap - 1)));
	else
		assert_int_equal(q->head, q->tail);
	for (uint32_t seq = q->head; seq != q->tail; seq++) {
		uint32_t pos = seq & (q->cap - 1);

		if (dead_at(q, pos))
			continue;
		assert_true(live < ref_n);
		assert_int_equal(q->ring[pos], ref(live));
		assert_int_equal(tier__gq_find(q, ref(live)), pos);
		live++;
	}
	assert_int_equal(live, ref_n);
	/* no dead bit outside the window */
	for (uint32_t seq = q->tail; seq != q->head + q->cap; seq++)
		assert_false(dead_at(q, seq & (q->cap - 1)));
	for (uint32_t s = 0; s <= q->mask; s++)
		used += q->slots[s] != 0;
	assert_int_equal(used, q->live);
	assert_int_equal(tier__gq_bytes(q), (size_t)q->cap * 8 + (q->cap + 63) / 64 * 8 +
					    ((size_t)q->mask + 1) * 4);
}

/*
 * Phases of different target sizes: pushes while below the target, deletes
 * (from the middle or the oldest end) while above.  With no pops the oldest
 * keys stay, the ring fills with keys deleted from the middle and compacts.
 */
static void test_gq_matches_a_reference_fifo(void **state)
{
	static const struct { uint32_t target, pop_pct; } phase[] = {
		{ 40, 50 }, { 3000, 50 }, { 3000, 0 }, { 20, 50 }, { 0, 50 }, { 8000, 10 },
		{ 200, 0 }, { 5000, 50 }, { 5000, 0 }, { 1, 90 }, { 6000, 0 }, { 0, 0 },
	};
	struct tier__gq q;
	uint64_t nkeys = 0, gone = UINT64_MAX - 1;
	unsigned grew = 0, compacted = 0, shrank = 0;

	(void)state;
	ref_clear();
	assert_int_equal(tier__gq_init(&q), 0);
	/* sequence numbers are free-running: start the run just below their wrap */
	q.head = q.tail = UINT32_MAX - 5000;
	check(&q);
	for (size_t ph = 0; ph < sizeof(phase) / sizeof(phase[0]); ph++) {
		for (uint32_t step = 0; step < 50000; step++) {
			uint64_t r = next_rand();
			uint32_t cap = q.cap;
			bool full = q.tail - q.head == q.cap;
			bool push = ref_n < phase[ph].target ? r % 10 < 7 : r % 10 < 3;

			if (push) {
				uint64_t k = key_n(nkeys++);

				assert_int_equal(tier__gq_find(&q, k), TIER__KNIL);
				assert_int_equal(tier__gq_push(&q, k), 0);
				ref_push(k);
				grew += q.cap > cap;
				compacted += full && q.cap == cap;
			} else if (ref_n && (r >> 32) % 100 >= phase[ph].pop_pct) {
				uint32_t i = (uint32_t)((r >> 40) % ref_n), pos;

				pos = tier__gq_find(&q, ref(i));
				assert_int_not_equal(pos, TIER__KNIL);
				assert_int_equal(q.ring[pos], ref(i));
				tier__gq_del(&q, pos);
				gone = ref(i);
				ref_del(i);
			} else if (ref_n) {
				assert_int_equal(tier__gq_pop(&q), ref(0));
				gone = ref(0);
				ref_del(0);
			}
			shrank += q.cap < cap;
			assert_int_equal(tier__gq_count(&q), ref_n);
			/* the key deleted or popped last, and one never pushed */
			assert_int_equal(tier__gq_find(&q, gone), TIER__KNIL);
			assert_int_equal(tier__gq_find(&q, key_n(nkeys + 1)), TIER__KNIL);
			if (step % 997 == 0 || ref_n < 64)
				check(&q);
		}
		check(&q);
	}
	print_message("%llu keys pushed: grew %u, compacted %u, shrank %u times\n",
		      (unsigned long long)nkeys, grew, compacted, shrank);
	assert_true(grew >= 10 && compacted >= 10 && shrank >= 10);
	while (ref_n) {
		assert_int_equal(tier__gq_pop(&q), ref(0));
		ref_del(0);
	}
	check(&q);
	assert_int_equal(q.cap, 16);   /* emptied, it gave everything back */
	tier__gq_fini(&q);
	tier__gq_fini(&q);   /* a zeroed queue: harmless */
}

/*
 * A constant number of live keys while keys come and go from the middle
 * (ghost hits): the ring never grows past 4 times the keys however many
 * pass, whether the deleted ones are scattered or always the newest.
 */
static void churn(bool newest)
{
	enum { LIVE = 1000, ROUNDS = 200 * LIVE };
	struct tier__gq q;
	uint64_t nkeys = 0;
	size_t most = 0;

	ref_clear();
	assert_int_equal(tier__gq_init(&q), 0);
	for (; ref_n < LIVE; nkeys++) {
		assert_int_equal(tier__gq_push(&q, key_n(nkeys)), 0);
		ref_push(key_n(nkeys));
	}
	for (uint32_t i = 0; i < ROUNDS; i++) {
		uint32_t j = newest ? ref_n - 1 : (uint32_t)(next_rand() % ref_n);

		tier__gq_del(&q, tier__gq_find(&q, ref(j)));
		ref_del(j);
		assert_int_equal(tier__gq_push(&q, key_n(nkeys)), 0);
		ref_push(key_n(nkeys++));
		if (tier__gq_bytes(&q) > most)
			most = tier__gq_bytes(&q);
	}
	check(&q);
	print_message("%s: %u live keys, at most %zu bytes (%.1f a key)\n",
		      newest ? "newest deleted" : "scattered deletes", LIVE, most,
		      (double)most / LIVE);
	/* ring < 4 x 1000 (2048 entries), index 2048 slots, bitmap 256 bytes */
	assert_true(q.cap <= 2048);
	assert_true(most <= 2048 * 8 + 256 + 2048 * 4);
	tier__gq_fini(&q);
}

static void test_gq_memory_follows_the_live_keys(void **state)
{
	(void)state;
	churn(false);
	churn(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gq_matches_a_reference_fifo),
		cmocka_unit_test(test_gq_memory_follows_the_live_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
