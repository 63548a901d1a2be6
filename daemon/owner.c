/* SPDX-License-Identifier: MIT */
/*
 * daemon/owner.c - who serves each RBD image when several tierds name it:
 * the image's RBD lock says (libtier/rbd.c), and this module keeps each
 * image's engine state, store gates and NBD connections in step with it.
 * An image is OWNED (lock ours, served), STANDBY (another holds the lock:
 * requests wait, and the first one asks for the image), ACQUIRING (asking,
 * or fencing a holder that is gone), RELEASING (asked by another: parked,
 * draining, then unlocked), CHECKING (a watch error or a lapsed lease: every
 * op of the image waits at its gates until the lock is shown to be ours) or
 * FENCED (the lock is another's, or this client was blocklisted: no op of
 * the image ever reaches a pool again from this process).
 * The blocking librados calls run on libuv's worker threads, one at a time
 * per image; every state change happens on the loop thread.  It must never
 * let an op reach a pool for an image whose lock it has not shown to be its
 * own since its watch last failed, and never break a lock without a
 * blocklist (libtier/rbd.c does the breaking).  An image with a write that
 * timed out (op_timeout: it may still land) is never unlocked: the asker
 * is told to fence this tierd instead (tier_rbd_set_unsafe).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "daemon/owner.h"
#include "daemon/nbd.h"
#include "tier/engine.h"
#include "tier/rados.h"
#include "tier/store.h"

#define LEASE_MS        15000   /* from the watch's last confirmation by the OSDs */
#define NOTIFY_MS       5000    /* a release request's answer */
#define RETRY_MS        500     /* asking again while the holder lets go */
#define RETRY_SLOW_MS   2000    /* after an error, or a holder that says never */
#define BLOCKLIST_S     86400   /* far longer than any op, and than the lease */

enum job { JOB_NONE, JOB_ACQUIRE, JOB_RELEASE, JOB_CHECK };

struct owner {
	struct tierd_owners *os;
	struct tier_rbd_image *rb;
	struct tier_image *img;
	const char *name;
	enum tierd_own state;
	bool handoff;
	int gate[2];               /* base, cache */
	/* a worker job: the loop thread fills, the worker runs, after_work reads */
	uv_work_t work;
	enum job job;
	bool busy, force, want, rewatch;
	bool check_then_release;   /* a check while RELEASING goes back to it */
	bool unsafe;               /* a write timed out: never unlocked, only fenced */
	int rc;
	char err[768];
	uint64_t next_try_ms;
	uint64_t handoffs, takeovers;
};

struct tierd_owners {
	struct tierd_owner_ctx c;
	uv_async_t wake;
	bool wake_inited, fenced_all;
	struct owner o[TIERD_OWNERS_MAX];
	size_t n;
};

static void olog(struct tierd_owners *os, enum tier_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void olog(struct tierd_owners *os, enum tier_log_level lvl, const char *fmt, ...)
{
	char msg[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	os->c.log(os->c.log_arg, lvl, msg);
}

static uint64_t now_ms(void)
{
	return tier_now_ns() / 1000000;
}

static void gates(struct owner *o, enum tier_store_gate g)
{
	tier_store_gate_set(o->os->c.base, o->gate[0], g);
	tier_store_gate_set(o->os->c.cache, o->gate[1], g);
}

static bool gate_held(const struct owner *o)
{
	return tier_store_gate_get(o->os->c.base, o->gate[0]) != TIER_STORE_GATE_OPEN ||
	       tier_store_gate_get(o->os->c.cache, o->gate[1]) != TIER_STORE_GATE_OPEN;
}

/* While the OSDs confirm the watch, the gates stay open LEASE_MS past that. */
static void renew_lease(struct owner *o)
{
	int age = tier_rbd_watch_age_ms(o->rb);
	uint64_t until;

	if (o->os->c.no_self_fence)
		return;
	if (age < 0)
		return;      /* the watch is in error: the lease runs out, ops wait */
	until = tier_now_ns() - (uint64_t)age * 1000000ull + (uint64_t)LEASE_MS * 1000000ull;
	tier_store_gate_lease(o->os->c.base, o->gate[0], until);
	tier_store_gate_lease(o->os->c.cache, o->gate[1], until);
}

/* From librados' watch thread: record (gates close at once) and wake the loop. */
static void rbd_event(void *arg, int ev)
{
	struct owner *o = arg;

	if (ev == TIER_RBD_EV_WATCH_ERR && !o->os->c.no_self_fence) {
		tier_store_gate_hold(o->os->c.base, o->gate[0]);
		tier_store_gate_hold(o->os->c.cache, o->gate[1]);
	}
	uv_async_send(&o->os->wake);
}

static void fence(struct owner *o, const char *why)
{
	size_t n;

	if (o->state == TIERD_OWN_FENCED)
		return;
	gates(o, TIER_STORE_GATE_FENCED);
	tier_store_gate_lease(o->os->c.base, o->gate[0], 0);
	tier_store_gate_lease(o->os->c.cache, o->gate[1], 0);
	o->state = TIERD_OWN_FENCED;
	n = nbd_server_close_export(o->os->c.nbd, o->name, "image fenced");
	tier_image_stop(o->img, -ESHUTDOWN);
	olog(o->os, TIER_LOG_ERROR, "image %s: fenced, serving it no more (%s); %zu "
	     "connection(s) closed; no op of it reaches a pool from this process again "
	     "(restart tierd to serve it in standby)", o->name, why, n);
}

/* ---- worker jobs ---- */

static void work_cb(uv_work_t *w)
{
	struct owner *o = w->data;
	struct tierd_owners *os = o->os;

	o->err[0] = '\0';
	switch (o->job) {
	case JOB_ACQUIRE:
		o->rc = tier_rbd_acquire(os->c.rados, o->rb,
					 (o->force ? TIER_RBD_FORCE : 0) |
					 (os->c.no_blocklist ? TIER_RBD_NO_BLOCKLIST : 0),
					 NOTIFY_MS, BLOCKLIST_S, o->err, sizeof(o->err));
		break;
	case JOB_RELEASE:
		o->rc = tier_rbd_release(o->rb);
		break;
	case JOB_CHECK:
		o->rc = o->rewatch ? tier_rbd_rewatch(o->rb) : 0;
		if (o->rc < 0)
			snprintf(o->err, sizeof(o->err), "watching the header again: %s",
				 strerror(-o->rc));
		else
			o->rc = tier_rbd_check_lock(o->rb, o->err, sizeof(o->err));
		break;
	default:
		break;
	}
}

static void after_work(uv_work_t *w, int status);

static void run_job(struct owner *o, enum job j)
{
	o->job = j;
	o->busy = true;
	o->work.data = o;
	if (uv_queue_work(o->os->c.loop, &o->work, work_cb, after_work) < 0) {
		o->busy = false;
		o->job = JOB_NONE;
	}
}

static void acquired(struct owner *o)
{
	int rc;

	gates(o, TIER_STORE_GATE_OPEN);
	renew_lease(o);
	rc = tier_image_load(o->img);
	if (rc < 0) {
		/* not served: let the lock go again rather than hold it unused */
		olog(o->os, TIER_LOG_ERROR, "image %s: loading after taking the lock: %s; "
		     "releasing it", o->name, strerror(-rc));
		o->state = TIERD_OWN_RELEASING;
		return;
	}
	o->state = TIERD_OWN_OWNED;
	o->want = o->force = false;
	o->takeovers++;
	olog(o->os, TIER_LOG_INFO, "image %s: lock taken (the holder was %s); loading its "
	     "map from the cache pool, %zu request(s) waiting", o->name,
	     o->err[0] ? o->err : "nobody", tier_image_waiting(o->img));
}

static void after_work(uv_work_t *w, int status)
{
	struct owner *o = w->data;
	struct tierd_owners *os = o->os;
	enum job j = o->job;

	(void)status;
	o->busy = false;
	o->job = JOB_NONE;
	switch (j) {
	case JOB_ACQUIRE:
		if (o->state != TIERD_OWN_ACQUIRING)
			break;
		if (o->rc == 0) {
			snprintf(o->err, sizeof(o->err), "%s", o->rb->holder[0] ? o->rb->holder : "");
			acquired(o);
			break;
		}
		if (o->rc == -ESHUTDOWN) {
			o->state = TIERD_OWN_STANDBY;   /* fence() leaves a state it knows */
			fence(o, "this tierd's RADOS client was blocklisted");
			break;
		}
		o->state = TIERD_OWN_STANDBY;
		o->next_try_ms = now_ms() + (o->rc == -EAGAIN ? RETRY_MS : RETRY_SLOW_MS);
		if (o->rc == -EPERM) {
			tier_image_fail_pending(o->img, -EPERM);
			o->want = false;
		}
		olog(os, o->rc == -EAGAIN ? TIER_LOG_INFO : TIER_LOG_WARN,
		     "image %s: not taken yet: %s", o->name, o->err[0] ? o->err : strerror(-o->rc));
		break;
	case JOB_RELEASE:
		if (o->state != TIERD_OWN_RELEASING)
			break;
		if (o->rc == -ESHUTDOWN) {      /* blocklisted meanwhile: taken, not handed */
			fence(o, "this tierd's RADOS client was blocklisted (the lock was "
			      "taken from it)");
			break;
		}
		if (o->rc < 0) {                /* still ours: peers hear "releasing"; again */
			olog(os, TIER_LOG_WARN, "image %s: unlocking after the handoff: %s; "
			     "trying again", o->name, strerror(-o->rc));
			o->next_try_ms = now_ms() + RETRY_SLOW_MS;
			break;
		}
		o->state = TIERD_OWN_STANDBY;
		o->handoffs++;
		o->next_try_ms = 0;
		olog(os, TIER_LOG_INFO, "image %s: handed over (lock released); in standby",
		     o->name);
		break;
	case JOB_CHECK:
		if (o->state != TIERD_OWN_CHECKING)
			break;
		if (o->rc == 1) {
			gates(o, TIER_STORE_GATE_OPEN);
			renew_lease(o);
			o->state = o->check_then_release ? TIERD_OWN_RELEASING : TIERD_OWN_OWNED;
			o->check_then_release = false;
			olog(os, TIER_LOG_INFO, "image %s: the lock is still ours; %s", o->name,
			     o->state == TIERD_OWN_OWNED ? "serving again" : "handing over");
		} else if (o->rc == 0 || o->rc == -ESHUTDOWN || o->rc == -ENOTCONN) {
			fence(o, o->err[0] ? o->err : "the lock is not ours");
		} else {
			o->rewatch = true;    /* cannot tell yet: ops keep waiting, ask again */
			o->next_try_ms = now_ms() + RETRY_SLOW_MS;
			olog(os, TIER_LOG_WARN, "image %s: cannot check the lock: %s; its ops wait",
			     o->name, o->err[0] ? o->err : strerror(-o->rc));
		}
		break;
	default:
		break;
	}
	tierd_owners_tick(os);
}

/* ---- the loop thread ---- */

/*
 * The owner's checks (OWNED, and RELEASING until the image is parked, when
 * its gates are held on purpose): after a watch error or a lapsed lease,
 * hold the gates and read the lock again (JOB_CHECK).  true: started.
 */
static bool need_check(struct owner *o, bool releasing)
{
	int werr = tier_rbd_take_watch_error(o->rb);

	if (o->os->c.no_self_fence)
		werr = 0;
	if (!werr && (!gate_held(o) || (releasing && tier_image_parked(o->img))))
		return false;
	o->state = TIERD_OWN_CHECKING;
	o->check_then_release = releasing;
	o->rewatch = werr != 0 || tier_rbd_watch_age_ms(o->rb) < 0;
	gates(o, TIER_STORE_GATE_HOLD);
	olog(o->os, TIER_LOG_WARN, "image %s: %s; its ops wait until the lock is shown to be "
	     "ours", o->name, werr ? "the watch on the header failed" :
	     "the watch was not confirmed within the lease");
	run_job(o, JOB_CHECK);
	return true;
}

/*
 * A write to the image timed out (op_timeout): given up on here, it may
 * still reach the pool, after another client's writes if the lock were
 * handed over.  From then on requests for the image are answered
 * "fence-me" and it is never unlocked: only a blocklist takes it.
 */
static bool is_unsafe(struct owner *o)
{
	if (o->unsafe)
		return true;
	if (!tier_store_gate_timed_out(o->os->c.base, o->gate[0]) &&
	    !tier_store_gate_timed_out(o->os->c.cache, o->gate[1]))
		return false;
	o->unsafe = true;
	tier_rbd_set_unsafe(o->rb);
	olog(o->os, TIER_LOG_ERROR, "image %s: a write to it timed out (op_timeout) and may "
	     "still reach the pool; it is never handed over from now on: a tierd that asks for "
	     "it blocklists this one first (`tierctl acquire %s --force` there, if nobody asks)",
	     o->name, o->name);
	return true;
}

static void step(struct owner *o)
{
	struct tierd_owners *os = o->os;
	uint64_t now = now_ms();

	if (o->busy)
		return;
	switch (o->state) {
	case TIERD_OWN_OWNED:
		if (need_check(o, false))
			return;
		is_unsafe(o);   /* answers "fence-me" from now on */
		if (tier_rbd_take_request(o->rb) || o->want) {
			size_t n;

			o->want = false;
			o->state = TIERD_OWN_RELEASING;
			n = nbd_server_close_export(os->c.nbd, o->name, "image handed over to "
						    "another tierd");
			tier_image_park(o->img, -ESHUTDOWN);
			olog(os, TIER_LOG_INFO, "image %s: another tierd asks for it: handing over "
			     "(%zu connection(s) closed, finishing what is in flight)", o->name, n);
			return;
		}
		renew_lease(o);
		break;
	case TIERD_OWN_RELEASING:
		/* the lock is still ours while the image drains: the same checks */
		if (need_check(o, true))
			return;
		if (!tier_image_parked(o->img)) {
			renew_lease(o);
			return;
		}
		if (now < o->next_try_ms)
			return;
		gates(o, TIER_STORE_GATE_HOLD);
		if (!is_unsafe(o))
			run_job(o, JOB_RELEASE);
		break;
	case TIERD_OWN_STANDBY:
		tier_rbd_take_request(o->rb);
		if (tier_rbd_take_watch_error(o->rb)) {   /* watch again; the lock is not ours */
			o->rewatch = true;
			run_job(o, JOB_CHECK);
			return;
		}
		if ((o->want || tier_image_waiting(o->img)) && now >= o->next_try_ms) {
			o->state = TIERD_OWN_ACQUIRING;
			run_job(o, JOB_ACQUIRE);
		}
		break;
	case TIERD_OWN_CHECKING:
		if (now >= o->next_try_ms)
			run_job(o, JOB_CHECK);
		break;
	default:
		break;
	}
}

void tierd_owners_tick(struct tierd_owners *os)
{
	if (!os)
		return;
	/* -EBLOCKLISTED seen on a pool: the whole client is fenced, every image */
	if (!os->fenced_all && (tier_store_blocklisted(os->c.base) ||
				tier_store_blocklisted(os->c.cache))) {
		os->fenced_all = true;
		for (size_t i = 0; i < os->n; i++)
			fence(&os->o[i], "this tierd's RADOS client was blocklisted: another tierd "
			      "took its images over");
	}
	for (size_t i = 0; i < os->n; i++)
		step(&os->o[i]);
}

static void on_wake(uv_async_t *a)
{
	tierd_owners_tick(a->data);
}

int tierd_owners_create(const struct tierd_owner_ctx *c, struct tierd_owners **out)
{
	struct tierd_owners *os = calloc(1, sizeof(*os));
	int rc;

	*out = NULL;
	if (!os)
		return -ENOMEM;
	os->c = *c;
	rc = uv_async_init(c->loop, &os->wake, on_wake);
	if (rc < 0) {
		free(os);
		return rc;
	}
	os->wake.data = os;
	os->wake_inited = true;
	*out = os;
	return 0;
}

int tierd_owners_add(struct tierd_owners *os, struct tier_rbd_image *rb, struct tier_image *img,
		     bool handoff)
{
	struct owner *o;

	if (os->n == TIERD_OWNERS_MAX)
		return -ENOSPC;
	o = &os->o[os->n];
	memset(o, 0, sizeof(*o));
	o->os = os;
	o->rb = rb;
	o->img = img;
	o->name = tier_image_name(img);
	o->handoff = handoff;
	o->gate[0] = tier_store_gate_add(os->c.base, rb->object_prefix);
	o->gate[1] = tier_store_gate_add(os->c.cache, rb->object_prefix);
	if (o->gate[0] < 0 || o->gate[1] < 0)
		return -ENOSPC;
	o->state = rb->owned ? TIERD_OWN_OWNED : TIERD_OWN_STANDBY;
	if (rb->owned)
		renew_lease(o);
	else
		gates(o, TIER_STORE_GATE_HOLD);
	os->n++;
	tier_rbd_set_events(rb, handoff, rbd_event, o);
	return 0;
}

static struct owner *find(struct tierd_owners *os, const char *name)
{
	for (size_t i = 0; os && i < os->n; i++)
		if (!strcmp(os->o[i].name, name))
			return &os->o[i];
	return NULL;
}

int tierd_owners_state(struct tierd_owners *os, const char *name, struct tierd_own_info *out)
{
	struct owner *o = find(os, name);

	if (!o)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	out->state = o->state;
	out->handoffs = o->handoffs;
	out->takeovers = o->takeovers;
	out->lock_handoff = o->handoff;
	out->write_timed_out = o->unsafe;
	snprintf(out->holder, sizeof(out->holder), "%s",
		 o->state == TIERD_OWN_OWNED ? o->rb->cookie : o->rb->holder);
	return 0;
}

int tierd_owners_request(struct tierd_owners *os, const char *name, bool acquire, bool force,
			 char *msg, size_t len)
{
	struct owner *o = find(os, name);

	if (!os) {
		snprintf(msg, len, "ownership applies to RBD images (backend = rados)");
		return -ENOTSUP;
	}
	if (!o) {
		snprintf(msg, len, "no RBD image %s in this tierd", name);
		return -ENOENT;
	}
	if (o->state == TIERD_OWN_FENCED) {
		snprintf(msg, len, "image %s is fenced in this tierd; restart it to serve the "
			 "image again", name);
		return -ESHUTDOWN;
	}
	if (acquire) {
		if (o->state == TIERD_OWN_OWNED) {
			snprintf(msg, len, "image %s is already owned here", name);
			return 0;
		}
		o->want = true;
		o->force = force;
		o->next_try_ms = 0;
		snprintf(msg, len, "acquiring image %s%s (tierctl images shows the state)", name,
			 force ? ": fencing its holder (blocklist) first" : "");
	} else {
		if (o->state != TIERD_OWN_OWNED) {
			snprintf(msg, len, "image %s is not owned here (%s)", name,
				 tierd_own_name(o->state));
			return -EINVAL;
		}
		o->want = true;
		snprintf(msg, len, "releasing image %s (tierctl images shows the state)", name);
	}
	uv_async_send(&os->wake);
	return 0;
}

bool tierd_owners_busy(const struct tierd_owners *os)
{
	for (size_t i = 0; os && i < os->n; i++)
		if (os->o[i].busy)
			return true;
	return false;
}

size_t tierd_owners_count(const struct tierd_owners *os, enum tierd_own s)
{
	size_t n = 0;

	for (size_t i = 0; os && i < os->n; i++)
		n += os->o[i].state == s;
	return n;
}

void tierd_owners_stop(struct tierd_owners *os)
{
	if (!os)
		return;
	/* no watch callback may touch the owners, the stores or the handle after */
	for (size_t i = 0; i < os->n; i++)
		tier_rbd_set_events(os->o[i].rb, os->o[i].handoff, NULL, NULL);
	tier_rbd_flush_events(os->c.rados);
	if (os->wake_inited && !uv_is_closing((uv_handle_t *)&os->wake))
		uv_close((uv_handle_t *)&os->wake, NULL);
}

void tierd_owners_destroy(struct tierd_owners *os)
{
	free(os);
}
