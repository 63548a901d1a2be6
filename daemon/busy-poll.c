// SPDX-License-Identifier: MIT
/* Adaptive busy-poll around uv_run (daemon/busy-poll.h). */
#include <poll.h>
#include <stdbool.h>

#include "daemon/busy-poll.h"

uint64_t tierd_busy_poll_next(uint64_t w, uint64_t idle_ns, uint64_t max)
{
	if (idle_ns <= w)
		return w;               /* the spin caught it */
	if (idle_ns <= max) {
		uint64_t start = max / 4 ? max / 4 : max;

		w = w * 2 < start ? start : w * 2;
		return w > max ? max : w;
	}
	w /= 2;
	return w < 1000 ? 0 : w;        /* under a microsecond is not worth a poll */
}

void tierd_busy_poll_init(struct tierd_busy_poll *p, uint32_t us)
{
	p->max_ns = (uint64_t)us * 1000u;
	p->may_spin = NULL;
	p->may_spin_arg = NULL;
	p->window_ns = p->max_ns;
	atomic_store_explicit(&p->hits, 0, memory_order_relaxed);
	atomic_store_explicit(&p->misses, 0, memory_order_relaxed);
	atomic_store_explicit(&p->spin_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&p->window_now_ns, p->window_ns, memory_order_relaxed);
}

void tierd_busy_poll_loop_init(uv_loop_t *loop, const struct tierd_busy_poll *p)
{
	if (p && p->max_ns)
		(void)uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
}

static void add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/*
 * A client's work for the next turn: a ready fd in the epoll set (uv_async
 * and the signal pipe are fds in it too).  A timer that comes due during the
 * spin runs when the spin ends (the spin stops at the next timer's due
 * time by the loop's clock, which does not move while it spins).
 */
static bool fd_ready(struct pollfd *pfd)
{
	return poll(pfd, 1, 0) > 0;
}

/*
 * A turn whose epoll_wait slept less than this found its work ready: the
 * loop is busy (QD 16 and up), and the next turn goes to epoll_wait without
 * the spin's extra poll(2) (one syscall a turn, about 1 us a request at
 * QD 16).  A sleep and wake-up costs more than this on any machine.
 */
#define BUSY_POLL_NO_SLEEP_NS 5000u

void tierd_busy_poll_run(uv_loop_t *loop, struct tierd_busy_poll *p)
{
	struct pollfd pfd = {.fd = uv_backend_fd(loop), .events = POLLIN};
	bool busy = false;

	if (!p || !p->max_ns) {
		uv_run(loop, UV_RUN_DEFAULT);
		return;
	}
	if (!uv_run(loop, UV_RUN_ONCE))
		return;
	for (;;) {
		uint64_t spun = 0, slept0, slept;
		int next_ms = uv_backend_timeout(loop);   /* -1: no timer */
		bool allowed;

		/* work libuv does without waiting (pending callbacks, closing
		 * handles, active idle handles such as the completion queue's, a
		 * due timer): run it first; it is no reason to spin or to sleep */
		if (next_ms == 0) {
			if (!uv_run(loop, UV_RUN_ONCE))
				return;
			continue;
		}
		/* a loop waiting for threads of its own neither spins nor learns
		 * from that wait (it is no gap between a client's requests) */
		allowed = !p->may_spin || p->may_spin(p->may_spin_arg);
		if (p->window_ns && !busy && allowed) {
			uint64_t t0 = uv_hrtime(), t = t0, w = p->window_ns;
			bool hit;

			if (next_ms >= 0 && (uint64_t)next_ms * 1000000u < w)
				w = (uint64_t)next_ms * 1000000u;   /* a timer due sooner */
			while (!(hit = fd_ready(&pfd)) && (t = uv_hrtime()) - t0 < w)
				;
			spun = t - t0;
			add(&p->spin_ns, spun);
			if (hit) {
				add(&p->hits, 1);
				busy = t == t0;   /* ready at the first look: clients keep the loop busy */
				if (!uv_run(loop, UV_RUN_ONCE))   /* does not block: work is ready */
					return;
				continue;
			}
			add(&p->misses, 1);
		}
		/* nothing came (or the loop is busy, or may not spin): epoll_wait,
		 * then learn from how long the whole gap was */
		slept0 = uv_metrics_idle_time(loop);
		if (!uv_run(loop, UV_RUN_ONCE))
			return;
		slept = uv_metrics_idle_time(loop) - slept0;
		busy = slept < BUSY_POLL_NO_SLEEP_NS;
		if (allowed && (!busy || spun)) {
			p->window_ns = tierd_busy_poll_next(p->window_ns, spun + slept, p->max_ns);
			atomic_store_explicit(&p->window_now_ns, p->window_ns,
					      memory_order_relaxed);
		}
	}
}
