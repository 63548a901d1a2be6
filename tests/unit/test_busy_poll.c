// SPDX-License-Identifier: MIT
/* daemon/busy-poll.c: the window's rule, and the loop it runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "daemon/busy-poll.h"

#define US 1000u

/* The haltpoll rule: keep a window that caught the gap, grow from a quarter
 * of the maximum when the gap was under the maximum, halve over it. */
static void test_window_rule(void **state)
{
	(void)state;
	/* caught by the spin: unchanged */
	assert_int_equal(tierd_busy_poll_next(100 * US, 40 * US, 100 * US), 100 * US);
	assert_int_equal(tierd_busy_poll_next(25 * US, 25 * US, 100 * US), 25 * US);
	/* slept, but less than the maximum: grow, from a quarter of it */
	assert_int_equal(tierd_busy_poll_next(0, 30 * US, 100 * US), 25 * US);
	assert_int_equal(tierd_busy_poll_next(25 * US, 30 * US, 100 * US), 50 * US);
	assert_int_equal(tierd_busy_poll_next(50 * US, 90 * US, 100 * US), 100 * US);
	assert_int_equal(tierd_busy_poll_next(80 * US, 90 * US, 100 * US), 100 * US);
	/* slept longer than the maximum: halve, to 0 under a microsecond */
	assert_int_equal(tierd_busy_poll_next(100 * US, 5000 * US, 100 * US), 50 * US);
	assert_int_equal(tierd_busy_poll_next(1500, 5000 * US, 100 * US), 0);
	assert_int_equal(tierd_busy_poll_next(0, 5000 * US, 100 * US), 0);
	/* a window that reached 0 comes back once gaps are short again */
	assert_int_equal(tierd_busy_poll_next(0, 10 * US, 100 * US), 25 * US);
}

/*
 * A pipe read by the loop.  Each callback reads one byte and asks for the
 * next: written back at once (the loop finds it ready at its first look) or
 * by a writer thread 100 us later (it comes during the spin).
 */
struct pinger {
	uv_poll_t poll;
	int fd[2];
	int left;
	bool delayed;
	uv_sem_t ask;
	uv_thread_t writer;
};

static void writer_main(void *arg)
{
	struct pinger *p = arg;

	for (;;) {
		uv_sem_wait(&p->ask);
		if (p->left <= 0)
			return;
		usleep(100);
		assert_int_equal(write(p->fd[1], "x", 1), 1);
	}
}

static void ping_cb(uv_poll_t *h, int status, int events)
{
	struct pinger *p = h->data;
	char c;

	(void)events;
	assert_int_equal(status, 0);
	assert_int_equal(read(p->fd[0], &c, 1), 1);
	if (--p->left > 0) {
		if (p->delayed)
			uv_sem_post(&p->ask);
		else
			assert_int_equal(write(p->fd[1], "x", 1), 1);
	} else {
		uv_poll_stop(h);
		uv_close((uv_handle_t *)h, NULL);
		if (p->delayed)
			uv_sem_post(&p->ask);   /* the writer ends */
	}
}

static void run_pinger(struct tierd_busy_poll *bp, int n, bool delayed)
{
	uv_loop_t loop;
	struct pinger p = {.left = n, .delayed = delayed};

	assert_int_equal(uv_loop_init(&loop), 0);
	tierd_busy_poll_loop_init(&loop, bp);
	assert_int_equal(pipe(p.fd), 0);
	assert_int_equal(uv_sem_init(&p.ask, 0), 0);
	if (delayed)
		assert_int_equal(uv_thread_create(&p.writer, writer_main, &p), 0);
	assert_int_equal(uv_poll_init(&loop, &p.poll, p.fd[0]), 0);
	p.poll.data = &p;
	assert_int_equal(uv_poll_start(&p.poll, UV_READABLE, ping_cb), 0);
	assert_int_equal(write(p.fd[1], "x", 1), 1);
	tierd_busy_poll_run(&loop, bp);   /* returns once the handle is closed */
	assert_int_equal(p.left, 0);
	if (delayed)
		assert_int_equal(uv_thread_join(&p.writer), 0);
	uv_sem_destroy(&p.ask);
	assert_int_equal(uv_loop_close(&loop), 0);
	close(p.fd[0]);
	close(p.fd[1]);
}

/* Work that comes 100 us after a turn, within a 10 ms window: the spin
 * finds it and the loop does not sleep. */
static void test_spin_catches_work_during_it(void **state)
{
	struct tierd_busy_poll bp;

	(void)state;
	tierd_busy_poll_init(&bp, 10000);
	run_pinger(&bp, 20, true);
	/* of 19: a loaded machine may stall the loop or the writer, and a
	 * turn whose byte came before it looked counts as busy and does not spin */
	assert_true(atomic_load(&bp.hits) >= 10);
	assert_true(atomic_load(&bp.spin_ns) >= 10 * 50 * US);
}

/* Work ready at the first look every turn: after the first look the loop
 * counts itself busy and goes straight to epoll_wait (no poll(2) a turn). */
static void test_busy_loop_does_not_spin(void **state)
{
	struct tierd_busy_poll bp;

	(void)state;
	tierd_busy_poll_init(&bp, 1000);
	run_pinger(&bp, 20, false);
	assert_int_equal(atomic_load(&bp.hits), 1);
	assert_int_equal(atomic_load(&bp.misses), 0);
	assert_int_equal(bp.window_ns, 1000 * US);
}

static bool never(void *arg)
{
	int *calls = arg;

	++*calls;
	return false;
}

/* may_spin says no (the loop waits for threads of its own): no spin. */
static void test_may_spin_no(void **state)
{
	struct tierd_busy_poll bp;
	int calls = 0;

	(void)state;
	tierd_busy_poll_init(&bp, 10000);
	bp.may_spin = never;
	bp.may_spin_arg = &calls;
	run_pinger(&bp, 20, true);
	assert_true(calls >= 10);   /* of 19 turns (busy turns do not ask) */
	assert_int_equal(atomic_load(&bp.hits), 0);
	assert_int_equal(atomic_load(&bp.misses), 0);
	assert_int_equal(atomic_load(&bp.spin_ns), 0);
}

static void test_off_never_spins(void **state)
{
	struct tierd_busy_poll bp;

	(void)state;
	tierd_busy_poll_init(&bp, 0);
	run_pinger(&bp, 20, true);
	assert_int_equal(atomic_load(&bp.hits), 0);
	assert_int_equal(atomic_load(&bp.misses), 0);
	assert_int_equal(atomic_load(&bp.spin_ns), 0);
}

/* Events further apart than the maximum: the spins miss, the window
 * shrinks, and the timers still fire on time. */
struct ticker {
	uv_timer_t t;
	int left;
	uint64_t start_ms;
};

static void tick_cb(uv_timer_t *t)
{
	struct ticker *k = t->data;

	if (--k->left == 0) {
		uv_timer_stop(t);
		uv_close((uv_handle_t *)t, NULL);
	}
}

static void test_sparse_events_shrink_the_window(void **state)
{
	struct tierd_busy_poll bp;
	struct ticker k = {.left = 6};
	uv_loop_t loop;

	(void)state;
	tierd_busy_poll_init(&bp, 100);
	assert_int_equal(uv_loop_init(&loop), 0);
	tierd_busy_poll_loop_init(&loop, &bp);
	assert_int_equal(uv_timer_init(&loop, &k.t), 0);
	k.t.data = &k;
	k.start_ms = uv_now(&loop);
	assert_int_equal(uv_timer_start(&k.t, tick_cb, 5, 5), 0);
	tierd_busy_poll_run(&loop, &bp);
	assert_int_equal(k.left, 0);
	assert_true(uv_now(&loop) - k.start_ms >= 30);
	assert_true(atomic_load(&bp.misses) >= 3);
	/* gaps of 5 ms against a maximum of 100 us: halved at each sleep */
	assert_true(bp.window_ns <= 25 * US);
	assert_int_equal(atomic_load(&bp.window_now_ns), bp.window_ns);
	assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window_rule),
		cmocka_unit_test(test_spin_catches_work_during_it),
		cmocka_unit_test(test_busy_loop_does_not_spin),
		cmocka_unit_test(test_may_spin_no),
		cmocka_unit_test(test_off_never_spins),
		cmocka_unit_test(test_sparse_events_shrink_the_window),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
