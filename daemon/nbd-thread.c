/* SPDX-License-Identifier: MIT */
/*
 * daemon/nbd-thread.c - the NBD I/O thread (threads > 1).  The whole NBD
 * server (listeners, handshakes, TLS, request parsing, reply writes) runs on
 * a loop of its own, on its own thread; the engine keeps the daemon's loop.
 * This file decides how work crosses between the two: a request parsed on
 * the I/O thread is queued to the engine thread and submitted there; its
 * completion is queued back and answered on the I/O thread.  Each side
 * drains its queue in one wake-up (an eventfd), so at queue depth the hand-off
 * is paid once per batch, not per request.  Calls from the daemon's thread
 * into the server (reload, shutdown, counters) run on the I/O thread while
 * the caller waits (nbd_server_exec).  It must never let the engine thread
 * touch connection state, nor the I/O thread touch the engine: everything
 * that crosses is a request struct on a locked list (STYLE.md rule 4).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "daemon/busy-poll.h"
#include "daemon/nbd.h"
#include "daemon/nbd-internal.h"

/*
 * A wake-up across threads: an eventfd the receiving loop polls.  Not
 * uv_async_t: libuv's sender marks the handle busy around its eventfd write,
 * and a receiver woken in between spins (sched_yield) until the sender runs
 * again; on the loaded 2-CPU machine that spin took ~15% of tierd's CPU at
 * QD 1.  Here the sender writes once per wake-up (pending coalesces), and
 * the receiver clears pending (after reading the eventfd) before it takes
 * the lists, so a push after its take always writes again.
 */
struct nbd_wake {
	uv_poll_t poll;
	int fd;
	atomic_bool pending;
	bool inited, closed;
};

static int wake_init(uv_loop_t *loop, struct nbd_wake *w, uv_poll_cb cb, void *data)
{
	int rc;

	atomic_init(&w->pending, false);
	w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->fd < 0)
		return -errno;
	rc = uv_poll_init(loop, &w->poll, w->fd);
	if (rc < 0)
		return rc;
	w->inited = true;
	w->poll.data = data;
	return uv_poll_start(&w->poll, UV_READABLE, cb);
}

static void wake_send(struct nbd_wake *w)
{
	uint64_t one = 1;

	if (atomic_exchange(&w->pending, true))
		return;
	while (write(w->fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

/*
 * In the poll callback, before the lists are taken.  Read, then clear: the
 * other order let a sender's write land between the two, be read here, and
 * leave pending set with nothing left to read, so every later wake-up was
 * dropped (a hang found by nbd_fio_verify_threads2).
 */
static void wake_ack(struct nbd_wake *w)
{
	uint64_t n;

	while (read(w->fd, &n, sizeof(n)) < 0 && errno == EINTR)
		;
	atomic_store(&w->pending, false);
}

/* On the loop's own thread; the descriptor is closed by wake_free. */
static void wake_close(struct nbd_wake *w)
{
	if (w->inited && !w->closed) {
		w->closed = true;
		uv_close((uv_handle_t *)&w->poll, NULL);
	}
}

static void wake_free(struct nbd_wake *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

struct nbd_call {
	void (*fn)(void *arg);
	void *arg;
	bool done;
	struct nbd_call *next;
};

struct nbd_xt {
	uv_loop_t loop;             /* the server's own loop (s->loop) */
	uv_loop_t *eloop;           /* the engine's */
	uv_thread_t thread;
	bool started, loop_inited;
	struct nbd_wake n_wake;     /* on loop: completions and calls arrived */
	struct nbd_wake e_wake;     /* on eloop: submissions (or the shutdown) arrived */
	uv_idle_t n_idle;          /* on loop: once this iteration's reads are parsed, wake the engine */
	bool i_inited;
	uv_mutex_t mu;
	uv_cond_t cv;               /* a call is done */
	/* under mu */
	struct nbd_req *sub_head, *sub_tail;     /* to the engine */
	struct nbd_req *done_head, *done_tail;   /* back to the I/O thread */
	struct nbd_call *calls, *calls_tail;
	bool drained;               /* shutdown done: tell the engine side */
	/* engine thread only */
	unsigned e_depth;           /* nbd_server_batch_begin nesting */
	bool e_pushed;              /* completions queued during the batch */
	void (*done)(void *arg);    /* nbd_server_shutdown's */
	void *done_arg;
	struct tierd_busy_poll bp;  /* the I/O loop's (daemon/busy-poll.h) */
};

static bool on_io_thread(const struct nbd_xt *x)
{
	uv_thread_t self = uv_thread_self();

	return x->started && uv_thread_equal(&self, &x->thread);
}

/* ---- the engine side ---- */

static void e_wake_cb(uv_poll_t *h, int status, int events)
{
	struct nbd_server *s = h->data;
	struct nbd_xt *x = s->xt;
	struct nbd_req *r, *next;
	bool drained;

	(void)status;
	(void)events;
	wake_ack(&x->e_wake);
	uv_mutex_lock(&x->mu);
	r = x->sub_head;
	x->sub_head = x->sub_tail = NULL;
	drained = x->drained;
	uv_mutex_unlock(&x->mu);
	nbd_server_batch_begin(s);
	for (; r; r = next) {
		int rc;

		next = r->x_next;
		r->x_next = NULL;
		if (r->cmd == NBD_CMD_BLOCK_STATUS) {
			nbd__status_engine(r);   /* answers through nbd__xt_done */
			continue;
		}
		if (r->gen != r->c->exp->gen) {
			/* its connection was closed (the image handed over): never sent */
			nbd__xt_done(r, -ESHUTDOWN);
			continue;
		}
		rc = tier_image_submit(r->c->exp->img, &r->t);
		if (rc < 0)
			nbd__xt_done(r, rc);   /* refused: the callback will not run */
	}
	nbd_server_batch_end(s);
	if (drained && !x->e_wake.closed) {
		void (*done)(void *) = x->done;

		/* no connection is left, so no request can come any more */
		wake_close(&x->e_wake);
		x->done = NULL;
		if (done)
			done(x->done_arg);
	}
}

void nbd__xt_done(struct nbd_req *r, int result)
{
	struct nbd_xt *x = r->c->s->xt;
	bool was_empty;

	r->x_result = result;
	r->x_next = NULL;
	uv_mutex_lock(&x->mu);
	was_empty = !x->done_head;
	if (x->done_tail)
		x->done_tail->x_next = r;
	else
		x->done_head = r;
	x->done_tail = r;
	uv_mutex_unlock(&x->mu);
	if (x->e_depth)
		x->e_pushed = true;    /* one wake-up at the batch's end */
	else if (was_empty)
		wake_send(&x->n_wake);
}

bool nbd__xt_batch_begin(struct nbd_server *s)
{
	if (!s->xt)
		return false;
	s->xt->e_depth++;
	return true;
}

bool nbd__xt_batch_end(struct nbd_server *s)
{
	struct nbd_xt *x = s->xt;

	if (!x)
		return false;
	if (!--x->e_depth && x->e_pushed) {
		x->e_pushed = false;
		wake_send(&x->n_wake);
	}
	return true;
}

/* ---- the I/O side ---- */

/*
 * After the read callbacks of this loop iteration (an idle handle runs before
 * the next poll, and keeps that poll from blocking): one wake-up for all.
 */
static void n_idle_cb(uv_idle_t *h)
{
	struct nbd_server *s = h->data;

	uv_idle_stop(h);
	wake_send(&s->xt->e_wake);
}

void nbd__xt_submit(struct nbd_req *r)
{
	struct nbd_xt *x = r->c->s->xt;
	bool was_empty;

	r->x_next = NULL;
	uv_mutex_lock(&x->mu);
	was_empty = !x->sub_head;
	if (x->sub_tail)
		x->sub_tail->x_next = r;
	else
		x->sub_head = r;
	x->sub_tail = r;
	uv_mutex_unlock(&x->mu);
	if (was_empty && x->started)
		uv_idle_start(&x->n_idle, n_idle_cb);
	else if (was_empty)
		wake_send(&x->e_wake);
}

static void n_wake_cb(uv_poll_t *h, int status, int events)
{
	struct nbd_server *s = h->data;
	struct nbd_xt *x = s->xt;
	struct nbd_req *r, *next;
	struct nbd_call *call, *cnext;

	(void)status;
	(void)events;
	wake_ack(&x->n_wake);
	uv_mutex_lock(&x->mu);
	r = x->done_head;
	x->done_head = x->done_tail = NULL;
	call = x->calls;
	x->calls = x->calls_tail = NULL;
	uv_mutex_unlock(&x->mu);
	nbd__batch_begin(s);
	for (; r; r = next) {
		next = r->x_next;
		r->x_next = NULL;
		nbd__req_finish(r, r->x_result);
	}
	nbd__batch_end(s);
	for (; call; call = cnext) {
		cnext = call->next;
		call->fn(call->arg);
		uv_mutex_lock(&x->mu);
		call->done = true;     /* the caller's stack frame: do not touch it after */
		uv_cond_broadcast(&x->cv);
		uv_mutex_unlock(&x->mu);
	}
}

/* nbd_server_shutdown's done, on the I/O thread: hand it to the engine's. */
static void xt_drained(void *arg)
{
	struct nbd_server *s = arg;
	struct nbd_xt *x = s->xt;

	uv_mutex_lock(&x->mu);
	x->drained = true;
	uv_mutex_unlock(&x->mu);
	wake_send(&x->e_wake);
}

void nbd__xt_shutdown_done(struct nbd_server *s, void (*done)(void *), void *arg,
			   void (**io_done)(void *), void **io_arg)
{
	s->xt->done = done;
	s->xt->done_arg = arg;
	*io_done = xt_drained;
	*io_arg = s;
}

void nbd_server_exec(struct nbd_server *s, void (*fn)(void *arg), void *arg)
{
	struct nbd_xt *x = s ? s->xt : NULL;
	struct nbd_call call = { .fn = fn, .arg = arg };

	if (!x || !x->started || on_io_thread(x)) {
		fn(arg);
		return;
	}
	uv_mutex_lock(&x->mu);
	if (x->calls_tail)
		x->calls_tail->next = &call;
	else
		x->calls = &call;
	x->calls_tail = &call;
	uv_mutex_unlock(&x->mu);
	wake_send(&x->n_wake);
	uv_mutex_lock(&x->mu);
	while (!call.done)
		uv_cond_wait(&x->cv, &x->mu);
	uv_mutex_unlock(&x->mu);
}

/* ---- lifetime ---- */

int nbd__xt_create(struct nbd_server *s, uv_loop_t *engine_loop, uint32_t busy_poll_us)
{
	struct nbd_xt *x = calloc(1, sizeof(*x));
	int rc;

	if (!x)
		return -ENOMEM;
	s->xt = x;
	x->eloop = engine_loop;
	if ((rc = uv_mutex_init(&x->mu)) < 0)
		goto fail_mu;
	if ((rc = uv_cond_init(&x->cv)) < 0)
		goto fail_cv;
	if ((rc = uv_loop_init(&x->loop)) < 0)
		goto fail_loop;
	x->loop_inited = true;
	tierd_busy_poll_init(&x->bp, busy_poll_us);
	tierd_busy_poll_loop_init(&x->loop, &x->bp);
	x->n_idle.data = s;
	x->n_wake.fd = x->e_wake.fd = -1;
	/* on failure nbd__xt_destroy cleans up */
	if ((rc = wake_init(&x->loop, &x->n_wake, n_wake_cb, s)) < 0)
		return rc;
	if ((rc = uv_idle_init(&x->loop, &x->n_idle)) < 0)
		return rc;
	x->i_inited = true;
	if ((rc = wake_init(x->eloop, &x->e_wake, e_wake_cb, s)) < 0)
		return rc;
	s->loop = &x->loop;
	return 0;
fail_loop:
	uv_cond_destroy(&x->cv);
fail_cv:
	uv_mutex_destroy(&x->mu);
fail_mu:
	free(x);
	s->xt = NULL;
	return rc;
}

static void io_main(void *arg)
{
	struct nbd_xt *x = arg;

	tierd_busy_poll_run(&x->loop, &x->bp);
}

int nbd_server_start(struct nbd_server *s)
{
	struct nbd_xt *x = s->xt;
	int rc;

	if (!x || x->started)
		return 0;
	x->started = true;    /* before the thread runs: exec must queue from now on */
	rc = uv_thread_create(&x->thread, io_main, x);
	if (rc < 0)
		x->started = false;
	return rc;
}

bool nbd__xt_started(const struct nbd_server *s)
{
	return s->xt && s->xt->started;
}

const struct tierd_busy_poll *nbd_server_busy_poll(const struct nbd_server *s)
{
	return s && s->xt ? &s->xt->bp : NULL;
}

bool nbd_server_threaded(const struct nbd_server *s)
{
	return s && s->xt;
}

/* On the I/O thread, once the server is done: let its loop end. */
static void xt_stop(void *arg)
{
	struct nbd_xt *x = arg;

	wake_close(&x->n_wake);
	uv_close((uv_handle_t *)&x->n_idle, NULL);
}

void nbd__xt_destroy(struct nbd_server *s)
{
	struct nbd_xt *x = s->xt;

	if (!x)
		return;
	if (x->started) {
		nbd_server_exec(s, xt_stop, x);
		uv_thread_join(&x->thread);
		x->started = false;
	} else {
		wake_close(&x->n_wake);
		if (x->i_inited)
			uv_close((uv_handle_t *)&x->n_idle, NULL);
	}
	if (x->loop_inited) {
		uv_run(&x->loop, UV_RUN_DEFAULT);   /* close callbacks left */
		if (uv_loop_close(&x->loop) < 0)
			nbd__log(s, TIER_LOG_WARN, "nbd: I/O loop closed with handles still open");
	}
	/* the engine loop has ended (the daemon's thread, here): close what is left on it */
	if (x->e_wake.inited && !x->e_wake.closed) {
		wake_close(&x->e_wake);
		uv_run(x->eloop, UV_RUN_NOWAIT);
	}
	wake_free(&x->n_wake);
	wake_free(&x->e_wake);
	uv_cond_destroy(&x->cv);
	uv_mutex_destroy(&x->mu);
	free(x);
	s->xt = NULL;
	s->loop = NULL;
}
