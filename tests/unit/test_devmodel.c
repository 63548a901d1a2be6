/* SPDX-License-Identifier: MIT */
/*
 * test_devmodel.c - the device model's arithmetic: profiles, the null model,
 * queue-depth servers overlapping latency, one shared bandwidth channel,
 * consistency when many threads schedule at once, and the write-ahead journal
 * (the hdd-journal profile): bursts acknowledged at journal speed, sustained
 * writes bounded by the servers, reads sharing the servers with the
 * write-back, and journal_bytes = 0 changing nothing.
 */
#undef NDEBUG
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "tier/store.h"

#define MS 1000000ull

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static void test_profiles_have_documented_values(void **state)
{
	struct tier_devmodel_params p;

	(void)state;
	assert_int_equal(tier_devmodel_profile("hdd", &p), 0);
	assert_int_equal(p.read_latency_us, 5000);
	assert_int_equal(p.write_latency_us, 5000);
	assert_int_equal(p.bandwidth, 150000000);
	assert_int_equal(p.queue_depth, 16);
	assert_int_equal(tier_devmodel_profile("ssd", &p), 0);
	assert_int_equal(p.read_latency_us, 100);
	assert_int_equal(p.write_latency_us, 100);
	assert_int_equal(p.bandwidth, 500000000);
	assert_int_equal(p.queue_depth, 32);
	assert_int_equal(tier_devmodel_profile("none", &p), 0);
	assert_int_equal(p.read_latency_us + p.write_latency_us, 0);
	assert_int_equal(p.bandwidth, 0);
	assert_int_equal(p.queue_depth, 0);
	assert_int_equal(tier_devmodel_profile("tape", &p), -EINVAL);
	assert_int_equal(tier_devmodel_profile(NULL, &p), -EINVAL);
}

static void test_null_model_completes_on_arrival(void **state)
{
	struct tier_devmodel_params p;
	struct tier_devmodel *dm;

	(void)state;
	assert_int_equal(tier_devmodel_profile("none", &p), 0);
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	assert_true(tier_devmodel_is_null(dm));
	for (int i = 0; i < 100; i++)
		assert_int_equal(tier_devmodel_schedule(dm, 12345, i & 1, 1 << 20), 12345);
	tier_devmodel_destroy(dm);
	tier_devmodel_destroy(NULL);
}

static void test_single_op_pays_latency_plus_transfer(void **state)
{
	struct tier_devmodel_params p;
	struct tier_devmodel *dm;
	uint64_t t0 = 1000 * MS;

	(void)state;
	assert_int_equal(tier_devmodel_profile("hdd", &p), 0);
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	assert_false(tier_devmodel_is_null(dm));
	assert_int_equal(tier_devmodel_schedule(dm, t0, false, 4096),
			 t0 + 5 * MS + ceil_div(4096ull * 1000000000ull, 150000000));
	tier_devmodel_destroy(dm);
}

static void test_read_and_write_latency_are_separate(void **state)
{
	struct tier_devmodel_params p = { .read_latency_us = 5000,
					  .write_latency_us = 200 };
	struct tier_devmodel *dm;

	(void)state;
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	/* unlimited queue depth and bandwidth: both start at arrival */
	assert_int_equal(tier_devmodel_schedule(dm, 0, true, 4096), 200000);
	assert_int_equal(tier_devmodel_schedule(dm, 0, false, 4096), 5 * MS);
	tier_devmodel_destroy(dm);
}

static void test_queue_depth_overlaps_latency_then_queues(void **state)
{
	struct tier_devmodel_params p = { .read_latency_us = 5000,
					  .write_latency_us = 5000,
					  .queue_depth = 16 };
	struct tier_devmodel *dm;

	(void)state;
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	for (int i = 0; i < 16; i++)
		assert_int_equal(tier_devmodel_schedule(dm, 0, false, 0), 5 * MS);
	/* the 17th waits for a server, the 33rd for a second round */
	for (int i = 0; i < 16; i++)
		assert_int_equal(tier_devmodel_schedule(dm, 0, false, 0), 10 * MS);
	assert_int_equal(tier_devmodel_schedule(dm, 0, false, 0), 15 * MS);
	/* an op arriving after every server is idle starts on arrival */
	assert_int_equal(tier_devmodel_schedule(dm, 100 * MS, true, 0), 105 * MS);
	tier_devmodel_destroy(dm);
}

static void test_bandwidth_is_one_shared_channel(void **state)
{
	struct tier_devmodel_params p;
	struct tier_devmodel *dm;
	uint64_t x = ceil_div((1ull << 20) * 1000000000ull, 150000000);

	(void)state;
	assert_int_equal(tier_devmodel_profile("hdd", &p), 0);
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	/* 8 x 1 MiB at once: latencies overlap, transfers serialise */
	for (uint64_t i = 0; i < 8; i++)
		assert_int_equal(tier_devmodel_schedule(dm, 0, true, 1 << 20),
				 5 * MS + (i + 1) * x);
	tier_devmodel_destroy(dm);
}

#define N_THREADS 4
#define N_PER_THREAD 2000

struct thr_arg {
	struct tier_devmodel *dm;
	uint64_t *done;
};

static void *sched_thread(void *arg)
{
	struct thr_arg *a = arg;

	for (int i = 0; i < N_PER_THREAD; i++)
		a->done[i] = tier_devmodel_schedule(a->dm, 0, i & 1, 1000);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_concurrent_schedules_share_the_channel_exactly(void **state)
{
	/* 1 byte/ns: each 1000-byte op holds the channel exactly 1000 ns */
	struct tier_devmodel_params p = { .bandwidth = 1000000000, .queue_depth = 8 };
	struct tier_devmodel *dm;
	pthread_t th[N_THREADS];
	struct thr_arg args[N_THREADS];
	uint64_t *all = calloc(N_THREADS * N_PER_THREAD, sizeof(uint64_t));

	(void)state;
	assert_non_null(all);
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	for (int t = 0; t < N_THREADS; t++) {
		args[t].dm = dm;
		args[t].done = all + t * N_PER_THREAD;
		assert_int_equal(pthread_create(&th[t], NULL, sched_thread, &args[t]), 0);
	}
	for (int t = 0; t < N_THREADS; t++)
		pthread_join(th[t], NULL);
	qsort(all, N_THREADS * N_PER_THREAD, sizeof(uint64_t), cmp_u64);
	/* no two ops shared a slot of the channel and none was lost */
	for (uint64_t i = 0; i < N_THREADS * N_PER_THREAD; i++)
		assert_int_equal(all[i], (i + 1) * 1000);
	tier_devmodel_destroy(dm);
	free(all);
}

/* ---- the journal ---- */

#define US 1000ull

static void test_hdd_journal_profile_has_documented_values(void **state)
{
	struct tier_devmodel_params p, hdd;
	struct tier_devmodel *dm;

	(void)state;
	assert_int_equal(tier_devmodel_profile("hdd-journal", &p), 0);
	assert_int_equal(tier_devmodel_profile("hdd", &hdd), 0);
	/* the spindles are the hdd profile's ... */
	assert_int_equal(p.read_latency_us, hdd.read_latency_us);
	assert_int_equal(p.write_latency_us, hdd.write_latency_us);
	assert_int_equal(p.bandwidth, hdd.bandwidth);
	assert_int_equal(p.queue_depth, hdd.queue_depth);
	/* ... behind a 1 GiB journal at 150 us, 500 MB/s */
	assert_int_equal(p.journal_bytes, 1ull << 30);
	assert_int_equal(p.journal_latency_us, 150);
	assert_int_equal(p.journal_bandwidth, 500000000);
	/* the other profiles have no journal */
	assert_int_equal(hdd.journal_bytes, 0);
	assert_int_equal(tier_devmodel_profile("ssd", &hdd), 0);
	assert_int_equal(hdd.journal_bytes, 0);
	assert_int_equal(tier_devmodel_profile("none", &hdd), 0);
	assert_int_equal(hdd.journal_bytes, 0);
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	assert_false(tier_devmodel_is_null(dm));
	tier_devmodel_destroy(dm);
}

static void test_journal_burst_completes_at_journal_latency(void **state)
{
	struct tier_devmodel_params p;
	struct tier_devmodel *dm;
	uint64_t jx = ceil_div(4096ull * 1000000000ull, 500000000);

	(void)state;
	assert_int_equal(tier_devmodel_profile("hdd-journal", &p), 0);
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	/* 256 x 4 KiB at once (2 MiB of journal, far below capacity): the
	 * journal latency overlaps, the journal channel serialises the bytes;
	 * no write pays the 5 ms seek */
	for (uint64_t i = 0; i < 256; i++) {
		uint64_t done = tier_devmodel_schedule(dm, 0, true, 4096);

		assert_int_equal(done, 150 * US + (i + 1) * jx);
		assert_true(done < 5 * MS);
	}
	/* a zero-byte write (ZERO, SETMETA, REMOVE) is journaled too */
	assert_int_equal(tier_devmodel_schedule(dm, 100 * MS, true, 0), 100 * MS + 150 * US);
	tier_devmodel_destroy(dm);
}

static void test_journal_full_write_waits_for_the_write_back(void **state)
{
	/* 1 server, 1 ms write-back, 100 us journal, room for 4 entries of
	 * 4 KiB (each takes 8 KiB: the data block and the header block) */
	struct tier_devmodel_params p = { .read_latency_us = 1000, .write_latency_us = 1000,
					  .queue_depth = 1, .journal_bytes = 32768,
					  .journal_latency_us = 100 };
	struct tier_devmodel *dm;

	(void)state;
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(tier_devmodel_schedule(dm, 0, true, 4096), 100 * US);
	/* write-backs: entry k (all ready at 100 us) is done at 100 us + (k+1) ms;
	 * the 5th write waits for entry 0, the 6th for entry 1, ... */
	for (uint64_t k = 0; k < 4; k++)
		assert_int_equal(tier_devmodel_schedule(dm, 0, true, 4096),
				 100 * US + (k + 1) * MS + 100 * US);
	/* a write arriving once the journal has drained goes straight in */
	assert_int_equal(tier_devmodel_schedule(dm, 100 * MS, true, 4096), 100 * MS + 100 * US);
	/* a write larger than the whole journal is taken when it is empty */
	assert_int_equal(tier_devmodel_schedule(dm, 200 * MS, true, 1 << 20), 200 * MS + 100 * US);
	assert_int_equal(tier_devmodel_schedule(dm, 200 * MS, true, 4096),
			 200 * MS + 100 * US + MS + 100 * US);
	tier_devmodel_destroy(dm);
}

/*
 * Closed loop: qd writes of `bytes` always in flight, each reissued when one
 * completes.  Returns the completion time of op i in done[i].
 */
static void closed_loop(struct tier_devmodel *dm, unsigned qd, uint64_t n,
			uint64_t bytes, uint64_t *done)
{
	uint64_t slot[64] = { 0 };

	assert_true(qd <= 64);
	for (uint64_t i = 0; i < n; i++) {
		unsigned m = 0;

		for (unsigned j = 1; j < qd; j++)
			if (slot[j] < slot[m])
				m = j;
		done[i] = tier_devmodel_schedule(dm, slot[m], true, bytes);
		assert_true(done[i] >= slot[m]);
		slot[m] = done[i];
	}
}

/* ops per second over done[a..b) */
static double rate(const uint64_t *done, uint64_t a, uint64_t b)
{
	return (double)(b - a) * 1e9 / (double)(done[b - 1] - done[a]);
}

static void sustained_case(uint64_t bytes, uint64_t n, uint64_t fill)
{
	struct tier_devmodel_params pj, ph;
	struct tier_devmodel *dj, *dh;
	uint64_t *doj = calloc(n, sizeof(uint64_t)), *doh = calloc(n, sizeof(uint64_t));
	double rj, rh, burst;

	assert_non_null(doj);
	assert_non_null(doh);
	assert_int_equal(tier_devmodel_profile("hdd-journal", &pj), 0);
	assert_int_equal(tier_devmodel_profile("hdd", &ph), 0);
	assert_int_equal(tier_devmodel_create(&pj, &dj), 0);
	assert_int_equal(tier_devmodel_create(&ph, &dh), 0);
	closed_loop(dj, 16, n, bytes, doj);
	closed_loop(dh, 16, n, bytes, doh);
	/* while the journal has room the writes go far faster than the hdd ... */
	burst = rate(doj, 0, fill / 2);
	rh = rate(doh, n / 2, n);
	assert_true(burst > 2.5 * rh);
	/* ... once it is full they go at the spindles' rate, within 2 % */
	rj = rate(doj, n - n / 4, n);
	assert_true(rj < 1.02 * rh && rj > 0.98 * rh);
	/* and a write then waits about as long as on the hdd */
	assert_true(doj[n - 1] - doj[n - 17] > 0.9 * (double)(doh[n - 1] - doh[n - 17]));
	tier_devmodel_destroy(dj);
	tier_devmodel_destroy(dh);
	free(doj);
	free(doh);
}

static void test_journal_sustained_writes_converge_to_the_hdd_rate(void **state)
{
	(void)state;
	/* 4 KiB writes take 8 KiB of journal: 131072 fill 1 GiB */
	sustained_case(4096, 300000, 131072);
	/* 1 MiB writes: about 1020 fill it, the channel bounds the hdd */
	sustained_case(1 << 20, 6000, 1020);
}

static void test_reads_share_the_servers_with_the_write_back(void **state)
{
	struct tier_devmodel_params p;
	struct tier_devmodel *dm, *idle;
	uint64_t rx = ceil_div(4096ull * 1000000000ull, 150000000);
	uint64_t read_idle, read_busy, last_ack = 0;

	(void)state;
	assert_int_equal(tier_devmodel_profile("hdd-journal", &p), 0);
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	assert_int_equal(tier_devmodel_create(&p, &idle), 0);
	/* reads are not helped by the journal: an idle read pays the seek */
	read_idle = tier_devmodel_schedule(idle, 1 * MS, false, 4096);
	assert_int_equal(read_idle, 1 * MS + 5 * MS + rx);
	/* 64 writes at 0 are in the journal within 0.7 ms; their write-back
	 * then keeps all 16 servers busy for 4 rounds of ~5 ms */
	for (int i = 0; i < 64; i++)
		last_ack = tier_devmodel_schedule(dm, 0, true, 4096);
	assert_true(last_ack < 1 * MS);
	/* a read at 1 ms waits for a server: one write-back (~5 ms) more */
	read_busy = tier_devmodel_schedule(dm, 1 * MS, false, 4096);
	assert_true(read_busy >= read_idle + 4 * MS);
	/* but it goes before the write-back still queued: not after all of it */
	assert_true(read_busy < 1 * MS + 2 * (5 * MS + rx) + 1 * MS);
	tier_devmodel_destroy(dm);
	tier_devmodel_destroy(idle);
}

/* The documented formula without a journal, as it was before the journal. */
struct ref_model {
	struct tier_devmodel_params p;
	uint64_t channel_free, server_free[64];
};

static uint64_t ref_schedule(struct ref_model *r, uint64_t t, bool w, uint64_t bytes)
{
	uint64_t lat = 1000ull * (w ? r->p.write_latency_us : r->p.read_latency_us), start = t, done;
	uint64_t *s = NULL;

	if (r->p.queue_depth) {
		s = &r->server_free[0];
		for (uint32_t i = 1; i < r->p.queue_depth; i++)
			if (r->server_free[i] < *s)
				s = &r->server_free[i];
		if (*s > start)
			start = *s;
	}
	done = start + lat;
	if (r->p.bandwidth && bytes) {
		if (r->channel_free > done)
			done = r->channel_free;
		done += ceil_div(bytes * 1000000000ull, r->p.bandwidth);
		r->channel_free = done;
	}
	if (s)
		*s = done;
	return done;
}

static void test_no_journal_is_exactly_the_plain_model(void **state)
{
	/* journal_bytes = 0: the other journal fields are ignored */
	struct tier_devmodel_params p = { .read_latency_us = 5000, .write_latency_us = 700,
					  .bandwidth = 150000000, .queue_depth = 16,
					  .journal_latency_us = 150,
					  .journal_bandwidth = 500000000 };
	struct ref_model ref = { .p = p };
	struct tier_devmodel *dm;
	uint64_t t = 0, x = 12345;

	(void)state;
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	for (int i = 0; i < 20000; i++) {
		bool w;
		uint64_t bytes;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		/* arrivals 0..12 ms apart, one in four with the one before (so
		 * servers and channel queue); up to 64 KiB, one in 64 of 4 MiB */
		if ((x >> 60) & 3)
			t += (x >> 33) % (12 * MS);
		w = (x >> 20) & 1;
		bytes = ((x >> 40) & 63) == 0 ? 4ull << 20 : ((x >> 24) & 0xffff);
		assert_int_equal(tier_devmodel_schedule(dm, t, w, bytes),
				 ref_schedule(&ref, t, w, bytes));
	}
	tier_devmodel_destroy(dm);
	/* only journal fields set but journal_bytes = 0: still the null model */
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	tier_devmodel_destroy(dm);
	p = (struct tier_devmodel_params){ .journal_latency_us = 150 };
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	assert_true(tier_devmodel_is_null(dm));
	assert_int_equal(tier_devmodel_schedule(dm, 7, true, 4096), 7);
	tier_devmodel_destroy(dm);
}

static void *jsched_thread(void *arg)
{
	struct thr_arg *a = arg;

	for (int i = 0; i < N_PER_THREAD; i++)
		a->done[i] = tier_devmodel_schedule(a->dm, 0, true, 1000);
	return NULL;
}

static void test_concurrent_journal_writes_are_one_log(void **state)
{
	/* 1 us journal latency, 1 byte/ns journal channel, room for 64 entries,
	 * 4 servers at 10 us per write-back: the acknowledgements of writes all
	 * arriving at 0 depend only on their order, not on which thread */
	struct tier_devmodel_params p = { .write_latency_us = 10, .queue_depth = 4,
					  .journal_bytes = 64 * 8192, .journal_latency_us = 1,
					  .journal_bandwidth = 1000000000 };
	struct tier_devmodel *dm, *one;
	pthread_t th[N_THREADS];
	struct thr_arg args[N_THREADS];
	uint64_t *all = calloc(N_THREADS * N_PER_THREAD, sizeof(uint64_t));

	(void)state;
	assert_non_null(all);
	assert_int_equal(tier_devmodel_create(&p, &dm), 0);
	assert_int_equal(tier_devmodel_create(&p, &one), 0);
	for (int t = 0; t < N_THREADS; t++) {
		args[t].dm = dm;
		args[t].done = all + t * N_PER_THREAD;
		assert_int_equal(pthread_create(&th[t], NULL, jsched_thread, &args[t]), 0);
	}
	for (int t = 0; t < N_THREADS; t++)
		pthread_join(th[t], NULL);
	qsort(all, N_THREADS * N_PER_THREAD, sizeof(uint64_t), cmp_u64);
	for (uint64_t i = 0; i < N_THREADS * N_PER_THREAD; i++)
		assert_int_equal(all[i], tier_devmodel_schedule(one, 0, true, 1000));
	/* and in steady state the 4 servers bound it: 4 write-backs per 10 us */
	assert_true(all[N_THREADS * N_PER_THREAD - 1] - all[N_THREADS * N_PER_THREAD - 1001]
		    >= 1000 / 4 * 10 * US - 20 * US);
	tier_devmodel_destroy(dm);
	tier_devmodel_destroy(one);
	free(all);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_profiles_have_documented_values),
		cmocka_unit_test(test_null_model_completes_on_arrival),
		cmocka_unit_test(test_single_op_pays_latency_plus_transfer),
		cmocka_unit_test(test_read_and_write_latency_are_separate),
		cmocka_unit_test(test_queue_depth_overlaps_latency_then_queues),
		cmocka_unit_test(test_bandwidth_is_one_shared_channel),
		cmocka_unit_test(test_concurrent_schedules_share_the_channel_exactly),
		cmocka_unit_test(test_hdd_journal_profile_has_documented_values),
		cmocka_unit_test(test_journal_burst_completes_at_journal_latency),
		cmocka_unit_test(test_journal_full_write_waits_for_the_write_back),
		cmocka_unit_test(test_journal_sustained_writes_converge_to_the_hdd_rate),
		cmocka_unit_test(test_reads_share_the_servers_with_the_write_back),
		cmocka_unit_test(test_no_journal_is_exactly_the_plain_model),
		cmocka_unit_test(test_concurrent_journal_writes_are_one_log),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
