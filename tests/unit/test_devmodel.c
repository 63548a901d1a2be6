/* SPDX-License-Identifier: MIT */
/*
 * test_devmodel.c - the device model's arithmetic: profiles, the null model,
 * queue-depth servers overlapping latency, one shared bandwidth channel, and
 * consistency when many threads schedule at once.
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
