/* SPDX-License-Identifier: MIT */
/*
 * Running a libuv loop with an adaptive busy-poll before it sleeps.
 *
 * A loop that goes to sleep in epoll_wait between two requests of a client
 * at queue depth 1 lets its vCPU halt, and the next request then pays for
 * waking it (25-30 us on the VMs this was measured on, where the guest's
 * own halt-polling is off: docs/BENCHMARKS.md, "The data path against
 * nbdkit").  After each turn the loop checks its epoll set without
 * blocking for up to a learned window before it sleeps.  The window
 * follows the cpuidle haltpoll governor's rule: it grows (from a quarter of the maximum, doubling) when
 * the loop slept for less than the maximum and more than the window, and
 * halves when it slept longer than the maximum; so a loop whose events come
 * further apart than the maximum stops spinning within a few turns.  It
 * does not spin while may_spin says no: the daemon's loop spins only while
 * no store op is in flight, since a loop waiting for its own worker or
 * device-model threads would take the CPU they need (the quickstart's
 * QD 16 lost 15-26% of its IOPS to that on 2 cores).
 */
#ifndef TIERD_BUSY_POLL_H
#define TIERD_BUSY_POLL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

struct tierd_busy_poll {
	uint64_t max_ns;                /* busy_poll_us * 1000; 0 = never spin */
	uint64_t window_ns;             /* what the loop spins now (learned) */
	/* Optional: false = do not spin now (the loop waits for threads of its
	 * own, which need the CPU the spin would take); called on the loop. */
	bool (*may_spin)(void *arg);
	void *may_spin_arg;
	/* counters, read by the admin socket from another thread */
	_Atomic uint64_t hits;          /* spins that found an event */
	_Atomic uint64_t misses;        /* spins that ended with nothing and slept */
	_Atomic uint64_t spin_ns;       /* time spent spinning */
	_Atomic uint64_t window_now_ns; /* window_ns, for the admin socket */
};

/* The next window after an idle gap of idle_ns (spin and sleep together)
 * with window w and maximum max (all ns).  Pure; unit-tested. */
uint64_t tierd_busy_poll_next(uint64_t w, uint64_t idle_ns, uint64_t max);

/* Set up p for a maximum of us microseconds (0 = off). */
void tierd_busy_poll_init(struct tierd_busy_poll *p, uint32_t us);

/* uv_run(loop, UV_RUN_DEFAULT) with the busy-poll of p (NULL or max 0:
 * exactly uv_run).  The loop must have been configured with
 * UV_METRICS_IDLE_TIME for the window to learn (tierd_busy_poll_loop_init). */
void tierd_busy_poll_run(uv_loop_t *loop, struct tierd_busy_poll *p);

/* uv_loop_configure(loop, UV_METRICS_IDLE_TIME) when p spins. */
void tierd_busy_poll_loop_init(uv_loop_t *loop, const struct tierd_busy_poll *p);

#endif
