/* SPDX-License-Identifier: MIT */
/*
 * daemon/main.c - tierd: wires the config, the stores, the engine, the NBD
 * server and the admin socket onto one libuv loop, and owns the process
 * lifecycle (start-up, sd_notify, SIGHUP reload, SIGTERM drain).  It decides
 * when the daemon is ready, what a reload may change live, and how long a
 * shutdown may wait for in-flight requests.  It must never touch engine state
 * from another thread (store completions arrive through the cq + uv_async),
 * never half-apply a reload that failed to parse, and never exit 0 while an
 * acknowledged request could still be lost.
 */
#include <config.h>   /* generated: HAVE_RADOS, HAVE_SYSTEMD, TIER_VERSION */

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#if HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "daemon/admin.h"
#include "daemon/busy-poll.h"
#include "daemon/check.h"
#include "daemon/prometheus.h"
#include "daemon/config.h"
#include "daemon/layout.h"
#include "daemon/log.h"
#include "daemon/nbd.h"
#if HAVE_RADOS
#include "daemon/owner.h"
#endif
#include "tier/engine.h"
#include "tier/store.h"
#if HAVE_RADOS
#include "tier/rados.h"
#endif

#define TIERD_DRAIN_TIMEOUT_MS 30000

struct tierd {
	uv_loop_t loop;
	struct tierd_config *cfg;
	int log_level;
	bool journal;                 /* stderr goes to journald: use <N> prefixes */
	struct tier_cq *cq;
	uv_async_t cq_async;          /* woken by store threads */
	uv_idle_t cq_idle;            /* started by completions pushed on the loop thread */
	uv_thread_t loop_thread;
	uv_timer_t tick_timer, watchdog_timer, drain_timer;
	uv_signal_t sig_term, sig_int, sig_hup;
	struct tier_store *base, *cache;
	struct tier_engine *engine;
	struct nbd_server *nbd;
	struct tierd_admin *admin;
	struct tierd_prom *prom;
	int lock_fd;
	bool ready_sent, stopping, nbd_drained, finished;
	int exit_code;
	unsigned threads;           /* in use (thread_count) */
	struct tierd_busy_poll busy_poll;   /* the daemon's loop (daemon/busy-poll.h) */
	bool config_error;          /* start-up failed on the configuration (a layout mismatch) */
#if HAVE_RADOS
	struct tier_rados *rados;
	struct tier_rbd_image rbd[TIERD_MAX_IMAGES];
	size_t n_rbd;
	struct tierd_owners *owners;   /* which images this tierd serves (daemon/owner.c) */
#endif
};

/* ---- logging and sd_notify ---- */

static void tierd_log_cb(void *arg, enum tier_log_level lvl, const char *msg)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	static const int prio[] = { 3, 4, 6, 7 };   /* syslog levels for journald */
	const struct tierd *d = arg;
	unsigned l = (unsigned)lvl > TIER_LOG_DEBUG ? TIER_LOG_DEBUG : (unsigned)lvl;

	/* the NBD I/O thread logs too; a reload sets the level (threads > 1) */
	if ((int)lvl > __atomic_load_n(&d->log_level, __ATOMIC_RELAXED))
		return;
	if (d->journal)
		fprintf(stderr, "<%d>%s\n", prio[l], msg);
	else
		fprintf(stderr, "tierd: %s: %s\n", names[l], msg);
}

/* The engine's failure records: journald fields under systemd (daemon/log.c). */
static void tierd_log_rec_cb(void *arg, const struct tier_log_rec *r)
{
	const struct tierd *d = arg;

	if ((int)r->lvl <= __atomic_load_n(&d->log_level, __ATOMIC_RELAXED))
		tierd_log_emit(d->journal, r);
}

static void tlog(struct tierd *d, enum tier_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void tlog(struct tierd *d, enum tier_log_level lvl, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tierd_log_cb(d, lvl, msg);
}

static void notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void notify(const char *fmt, ...)
{
#if HAVE_SYSTEMD
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sd_notify(0, msg);
#else
	(void)fmt;
#endif
}

/* ---- the lock: one tierd per data_dir (local backend) ---- */

static int take_lock(struct tierd *d)
{
	char path[4096], holder[32] = "";
	ssize_t n;
	int fd;

	if (mkdir(d->cfg->data_dir, 0700) < 0 && errno != EEXIST) {
		tlog(d, TIER_LOG_ERROR, "cannot create data_dir %s: %s",
		     d->cfg->data_dir, strerror(errno));
		return -errno;
	}
	snprintf(path, sizeof(path), "%s/tierd.lock", d->cfg->data_dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		tlog(d, TIER_LOG_ERROR, "cannot open %s: %s", path, strerror(errno));
		return -errno;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int err = errno;

		n = pread(fd, holder, sizeof(holder) - 1, 0);
		holder[n > 0 ? n : 0] = 0;
		holder[strcspn(holder, "\n")] = 0;
		tlog(d, TIER_LOG_ERROR, "%s is in use by another tierd (pid %s): %s",
		     d->cfg->data_dir, holder[0] ? holder : "unknown", strerror(err));
		close(fd);
		return -EBUSY;
	}
	n = snprintf(holder, sizeof(holder), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, holder, (size_t)n, 0) != n)
		tlog(d, TIER_LOG_WARN, "cannot record pid in %s", path);
	d->lock_fd = fd;
	return 0;
}

/* ---- stores ---- */

static void on_cq_idle(uv_idle_t *h);

/*
 * A completion is waiting.  From a store thread: wake the loop (sends
 * coalesce).  From the loop thread itself (an op the local backend ran
 * inline): no eventfd round trip, an idle handle drains the queue before the
 * loop next polls, and keeps that poll from blocking.
 */
static void cq_notify(void *arg)
{
	struct tierd *d = arg;
	uv_thread_t self = uv_thread_self();

	if (uv_thread_equal(&self, &d->loop_thread))
		uv_idle_start(&d->cq_idle, on_cq_idle);
	else
		uv_async_send(&d->cq_async);
}

static int create_local_stores(struct tierd *d)
{
	const struct tierd_config *c = d->cfg;
	struct tier_local_opts o = { 0 };
	char dir[4096];
	int rc;

	tierd_config_pool_dir(c, false, dir, sizeof(dir));
	o.dir = dir;
	o.model = c->base_model;
	o.direct_io = c->direct_io;
	rc = tier_store_local_create("base", &o, d->cq, &d->base);
	if (rc < 0) {
		tlog(d, TIER_LOG_ERROR, "base pool %s: %s", dir, strerror(-rc));
		return rc;
	}
	tierd_config_pool_dir(c, true, dir, sizeof(dir));
	o.model = c->cache_model;
	rc = tier_store_local_create("cache", &o, d->cq, &d->cache);
	if (rc < 0)
		tlog(d, TIER_LOG_ERROR, "cache pool %s: %s", dir, strerror(-rc));
	return rc;
}

static int create_rados_stores(struct tierd *d)
{
#if HAVE_RADOS
	const struct tierd_config *c = d->cfg;
	struct tier_rados_opts o = {
		.conf = c->rados_conf,
		.client_name = c->rados_client_name,
		.keyring = c->rados_keyring,
		.op_timeout_ms = c->rados_op_timeout_ms,
	};
	char err[512] = "";
	int rc;

	rc = tier_rados_connect(&o, &d->rados, err, sizeof(err));
	if (rc < 0) {
		tlog(d, TIER_LOG_ERROR, "rados: %s", err[0] ? err : strerror(-rc));
		return rc;
	}
	rc = tier_store_rados_create(d->rados, c->rados_base_pool, c->rados_base_ns,
				     d->cq, &d->base);
	if (rc < 0) {
		tlog(d, TIER_LOG_ERROR, "rados base pool %s: %s", c->rados_base_pool,
		     strerror(-rc));
		return rc;
	}
	rc = tier_store_rados_create(d->rados, c->rados_cache_pool, c->rados_cache_ns,
				     d->cq, &d->cache);
	if (rc < 0)
		tlog(d, TIER_LOG_ERROR, "rados cache pool %s: %s", c->rados_cache_pool,
		     strerror(-rc));
	return rc;
#else
	tlog(d, TIER_LOG_ERROR, "backend = rados, but tierd was built without rados "
	     "(install librados-dev and rebuild)");
	return -ENOTSUP;
#endif
}

/* ---- images ---- */

/*
 * Where an image's objects live: "<prefix>.%016llx" with the local prefix
 * rbd_data.NAME, or the RBD image's own (opened, locked, kept in d->rbd).
 */
static int resolve_image(struct tierd *d, const struct tierd_image_cfg *ic,
			 char prefix[TIER_OID_MAX], uint64_t *size)
{
	if (d->cfg->backend == TIERD_BACKEND_LOCAL) {
		snprintf(prefix, TIER_OID_MAX, "rbd_data.%s", ic->name);
		*size = ic->size;
		return 0;
	}
#if HAVE_RADOS
	{
		struct tier_rbd_image *rb = &d->rbd[d->n_rbd];
		const char *rname = ic->rbd_image ? ic->rbd_image : ic->name;
		uint64_t osz = d->cfg->tier.object_size;
		char err[512] = "";
		int rc;

		if (d->n_rbd >= TIERD_MAX_IMAGES)
			return -ENOSPC;
		rc = tier_rbd_open2(d->rados, d->cfg->rados_base_pool, rname, TIER_RBD_STANDBY, rb,
				    err, sizeof(err));
		if (rc < 0) {
			tlog(d, TIER_LOG_ERROR, "image %s (rbd %s): %s", ic->name, rname,
			     err[0] ? err : strerror(-rc));
			return rc;
		}
		if ((1ull << rb->order) != osz) {
			tlog(d, TIER_LOG_ERROR, "image %s: rbd object size %llu (order %u) differs "
			     "from [tier] object_size %llu", ic->name,
			     1ull << rb->order, rb->order, (unsigned long long)osz);
			tier_rbd_close(d->rados, d->cfg->rados_base_pool, rb);
			return -EINVAL;
		}
		d->n_rbd++;
		if (rb->owned)
			tlog(d, TIER_LOG_INFO, "image %s: rbd %s/%s header rbd_header.%s locked "
			     "(rbd_lock, cookie '%s') and watched by client.%llu",
			     ic->name, d->cfg->rados_base_pool, rname, rb->id, rb->cookie,
			     (unsigned long long)rb->client_id);
		else
			tlog(d, TIER_LOG_INFO, "image %s: rbd %s/%s is locked by %s: serving it in "
			     "standby (its first request asks for it; lock_handoff = %s)", ic->name,
			     d->cfg->rados_base_pool, rname, rb->holder,
			     ic->lock_handoff ? "never" : "on_request");
		snprintf(prefix, TIER_OID_MAX, "%s", rb->object_prefix);
		*size = rb->size;
		return 0;
	}
#else
	return -ENOTSUP;
#endif
}

/* rbd_idx: the image's entry in d->rbd (rados), or -1. */
static int serve_image(struct tierd *d, const struct tierd_image_cfg *ic, const char *prefix,
		       uint64_t size, long rbd_idx)
{
	struct tier_image_opts o = { .name = ic->name, .read_only = ic->read_only,
				     .object_prefix = prefix, .size = size };
	struct tier_image *img = NULL;
	int rc;

#if HAVE_RADOS
	if (rbd_idx >= 0)
		o.standby = !d->rbd[rbd_idx].owned;
#else
	(void)rbd_idx;
#endif
	rc = tier_image_open(d->engine, &o, &img);
	if (rc < 0) {
		tlog(d, TIER_LOG_ERROR, "image %s: open: %s", ic->name, strerror(-rc));
		return rc;
	}
#if HAVE_RADOS
	if (d->owners && rbd_idx >= 0 &&
	    (rc = tierd_owners_add(d->owners, &d->rbd[rbd_idx], img, ic->lock_handoff == 0)) < 0) {
		tlog(d, TIER_LOG_ERROR, "image %s: ownership: %s", ic->name, strerror(-rc));
		return rc;
	}
#endif
	rc = nbd_server_add_export(d->nbd, img, ic->read_only);
	if (rc < 0) {
		tlog(d, TIER_LOG_ERROR, "image %s: export: %s", ic->name, strerror(-rc));
		return rc;
	}
	tlog(d, TIER_LOG_INFO, "image %s: %llu bytes%s, objects %s.*", ic->name,
	     (unsigned long long)o.size, ic->read_only ? ", read-only" : "", o.object_prefix);
	return 0;
}

static int open_image(struct tierd *d, const struct tierd_image_cfg *ic)
{
	char prefix[TIER_OID_MAX];
	uint64_t size = 0;
	int rc = resolve_image(d, ic, prefix, &size);
	long rbd_idx = -1;

#if HAVE_RADOS
	if (d->cfg->backend == TIERD_BACKEND_RADOS)
		rbd_idx = (long)d->n_rbd - 1;
#endif
	return rc < 0 ? rc : serve_image(d, ic, prefix, size, rbd_idx);
}

/* ---- stranded cache objects (libtier/stranded.c, docs/OPERATIONS.md) ---- */

struct resolved {
	char prefix[TIERD_MAX_IMAGES][TIER_OID_MAX];
	uint64_t size[TIERD_MAX_IMAGES];
	struct tier_stranded_image si[TIERD_MAX_IMAGES];
	size_t n;
};

static int resolve_all(struct tierd *d, struct resolved *rv)
{
	const struct tierd_config *c = d->cfg;
	int rc;

	for (rv->n = 0; rv->n < c->n_images; rv->n++) {
		size_t i = rv->n;

		rc = resolve_image(d, &c->images[i], rv->prefix[i], &rv->size[i]);
		if (rc < 0)
			return rc;
		rv->si[i].name = c->images[i].name;
		rv->si[i].object_prefix = rv->prefix[i];
		rv->si[i].size = rv->size[i];
	}
	return 0;
}

/*
 * The layout record of each pool (daemon/layout.c): local keeps one in both
 * pools (base objects are laid out by object_size too), rados in the cache
 * pool only (the RBD image says how base is laid out).  A mismatch is a
 * configuration error: exit TIERD_EXIT_CONFIG.
 */
static int layout_check(struct tierd *d, const struct resolved *rv)
{
	const struct tierd_config *c = d->cfg;
	static struct tierd_layout want;
	char err[768] = "", note[256];
	int rc;

	memset(&want, 0, sizeof(want));
	want.format = TIERD_LAYOUT_FORMAT;
	want.object_size = c->tier.object_size;
	for (size_t i = 0; i < rv->n && i < TIERD_LAYOUT_MAX_IMG; i++) {
		struct tierd_layout_image *im = &want.img[want.n++];

		snprintf(im->name, sizeof(im->name), "%s", c->images[i].name);
		snprintf(im->prefix, sizeof(im->prefix), "%s", rv->prefix[i]);
		im->size = rv->size[i];
	}
	for (int k = c->backend == TIERD_BACKEND_LOCAL ? 0 : 1; k < 2; k++) {
		want.extent_size = k ? c->tier.extent_size : 0;
		rc = tierd_layout_apply(k ? d->cache : d->base, d->cq, k ? "cache" : "base", &want,
					err, sizeof(err), note, sizeof(note));
		if (rc < 0) {
			tlog(d, TIER_LOG_ERROR, "layout: %s", err);
			if (rc == -EINVAL)
				d->config_error = true;
			return rc;
		}
		if (note[0])
			tlog(d, TIER_LOG_INFO, "layout: %s", note);
	}
	return 0;
}

/* "image a (objects rbd_data.a.*), not in the config" and the like. */
static void group_label(const struct tierd *d, const struct tier_stranded_group *g,
			char *out, size_t cap)
{
	static const char lp[] = "rbd_data.";

	if (g->image)
		snprintf(out, cap, "image %s (objects %s.*), past its end (size %llu)", g->image,
			 g->prefix, (unsigned long long)g->image_size);
	else if (d->cfg->backend == TIERD_BACKEND_LOCAL && !strncmp(g->prefix, lp, strlen(lp)))
		snprintf(out, cap, "image %s (objects %s.*), not in the config",
			 g->prefix + strlen(lp), g->prefix);
	else
		snprintf(out, cap, "objects %s.* (an RBD image whose id is %s), not in the config",
			 g->prefix, !strncmp(g->prefix, lp, strlen(lp)) ?
			 g->prefix + strlen(lp) : "unknown");
}

static const char *config_path_abs(const struct tierd *d, char *buf)
{
	return realpath(d->cfg->path, buf) ? buf : d->cfg->path;
}

/*
 * Start-up: before any image is served, find the cache objects of images no
 * longer configured or past an image's end.  Dirty ones refuse the start
 * (-EUCLEAN) with the command that resolves them; clean ones are removed.
 */
static int stranded_check(struct tierd *d, const struct resolved *rv)
{
	struct tier_stranded_report *r = NULL;
	struct tier_stranded_result res;
	char label[TIER_OID_MAX * 2 + 128], path[4096];
	int rc;

	rc = tier_stranded_scan(d->cache, d->cq, d->cfg->tier.object_size, rv->si, rv->n, &r);
	if (rc < 0) {
		tlog(d, TIER_LOG_ERROR, "scanning the cache pool for stranded objects: %s",
		     strerror(-rc));
		return rc;
	}
#if HAVE_RADOS
	/* several tierds share the cache pool: another's images are not stranded */
	for (size_t i = 0; d->rados && i < r->n_groups;) {
		char who[480] = "";
		const struct tier_stranded_group *g = &r->groups[i];

		if (!g->image && tier_rbd_prefix_owner(d->rados, d->cfg->rados_base_pool,
						       g->prefix, who, sizeof(who)) == 1) {
			tlog(d, TIER_LOG_INFO, "cache objects %s.*: %zu, of an RBD image in use "
			     "elsewhere (lock holder: %s): left alone", g->prefix, g->n, who);
			tier_stranded_drop_group(r, i);
			continue;
		}
		i++;
	}
#endif
	if (r->n_dirty) {
		for (size_t i = 0; i < r->n_groups; i++) {
			const struct tier_stranded_group *g = &r->groups[i];

			if (!g->n_dirty)
				continue;
			group_label(d, g, label, sizeof(label));
			tlog(d, TIER_LOG_ERROR, "stranded cache objects of %s: %llu dirty object(s), "
			     "%llu dirty bytes (the only copy of that data), %llu clean", label,
			     (unsigned long long)g->n_dirty, (unsigned long long)g->dirty_bytes,
			     (unsigned long long)g->n_clean);
		}
		config_path_abs(d, path);
		tlog(d, TIER_LOG_ERROR, "start refused: %llu dirty stranded object(s), %llu dirty "
		     "bytes in the cache pool that no configured image covers. Either put the "
		     "image back in the config (with its old size), or stop tierd and run "
		     "`tierd --config %s --stranded flush` to write that data to the base pool "
		     "(`--stranded list` shows it, `--stranded drop --force` discards it)",
		     (unsigned long long)r->n_dirty, (unsigned long long)r->dirty_bytes, path);
		tier_stranded_free(r);
		return -EUCLEAN;
	}
	for (size_t i = 0; i < r->n_groups; i++) {
		group_label(d, &r->groups[i], label, sizeof(label));
		tlog(d, TIER_LOG_WARN, "stranded cache objects of %s: removing %llu clean "
		     "copy(ies) (base holds their data; kept, they would be adopted stale)", label,
		     (unsigned long long)r->groups[i].n_clean);
	}
	rc = tier_stranded_resolve(d->base, d->cache, d->cq, r, TIER_STRANDED_CLEAN,
				   tierd_log_cb, d, &res);
	tier_stranded_free(r);
	if (rc < 0) {
		tlog(d, TIER_LOG_ERROR, "removing stranded clean cache objects: %s "
		     "(%llu left in place)", strerror(-rc), (unsigned long long)res.failed);
		return rc;
	}
	return 0;
}

/* READY=1 once the listeners are up and every image has loaded its map. */
static void maybe_ready(struct tierd *d)
{
	struct tier_image *imgs[TIERD_MAX_IMAGES];
	size_t i, n;

	if (d->ready_sent || d->stopping)
		return;
	n = tier_engine_images(d->engine, imgs, TIERD_MAX_IMAGES);
	for (i = 0; i < n; i++)   /* a standby image waits for its first request */
		if (tier_image_ready(imgs[i]) == 0 && !tier_image_is_parked(imgs[i]))
			return;
	for (i = 0; i < n; i++)
		if (tier_image_ready(imgs[i]) < 0)
			tlog(d, TIER_LOG_ERROR, "image %s: rebuilding the cache map failed: %s",
			     tier_image_name(imgs[i]), strerror(-tier_image_ready(imgs[i])));
	d->ready_sent = true;
	tlog(d, TIER_LOG_INFO, "ready: %zu image(s)", n);
	notify("READY=1\nSTATUS=serving %zu image(s)", n);
}

/* ---- the loop: completions, ticks, shutdown ---- */

static void finish(struct tierd *d);

static void on_tick(uv_timer_t *t);

static void schedule_tick(struct tierd *d)
{
	uint64_t ms;

	if (d->finished)
		return;
	/*
	 * Stopping: finish the moment the engine has nothing in flight; until
	 * then keep ticking, as queued work may wait for throttle refills.
	 */
	if (d->stopping && d->nbd_drained && tier_engine_idle(d->engine)
#if HAVE_RADOS
	    && !tierd_owners_busy(d->owners)
#endif
	    ) {
		finish(d);
		return;
	}
	ms = tier_engine_tick(d->engine);
#if HAVE_RADOS
	tierd_owners_tick(d->owners);
#endif
	uv_timer_start(&d->tick_timer, on_tick, ms ? ms : 1, 0);
	maybe_ready(d);
}

static void on_tick(uv_timer_t *t)
{
	schedule_tick(t->data);
}

/* Run the completions; the replies they make go out gathered, one write per connection. */
static void drain_cq(struct tierd *d)
{
	nbd_server_batch_begin(d->nbd);
	tier_cq_drain(d->cq);
	nbd_server_batch_end(d->nbd);
	schedule_tick(d);
}

static void on_cq(uv_async_t *a)
{
	struct tierd *d = a->data;

	if (d->finished)
		return;
	drain_cq(d);
}

static void on_cq_idle(uv_idle_t *h)
{
	struct tierd *d = h->data;

	uv_idle_stop(h);
	if (d->finished)
		return;
	drain_cq(d);
}

static void on_watchdog(uv_timer_t *t)
{
	(void)t;
	notify("WATCHDOG=1");
}

static void close_handle(uv_handle_t *h)
{
	if (h->loop && !uv_is_closing(h))
		uv_close(h, NULL);
}

/* Everything drained and idle: release the engine and stop the loop. */
static void finish(struct tierd *d)
{
	struct tier_image *imgs[TIERD_MAX_IMAGES];
	size_t i, n;

	if (d->finished)
		return;
	d->finished = true;
#if HAVE_RADOS
	tierd_owners_stop(d->owners);
#endif
	if (d->engine) {
		n = tier_engine_images(d->engine, imgs, TIERD_MAX_IMAGES);
		for (i = 0; i < n; i++)
			tier_image_close(imgs[i]);
		tier_engine_destroy(d->engine);
		d->engine = NULL;
	}
	tier_store_destroy(d->base);
	tier_store_destroy(d->cache);
	d->base = d->cache = NULL;
	if (d->cq)
		tier_cq_drain(d->cq);
	tier_cq_destroy(d->cq);
	d->cq = NULL;
	if (d->admin)
		tierd_admin_stop(d->admin);
	d->admin = NULL;
	tierd_prom_stop(d->prom);
	d->prom = NULL;
	close_handle((uv_handle_t *)&d->cq_async);
	close_handle((uv_handle_t *)&d->cq_idle);
	close_handle((uv_handle_t *)&d->tick_timer);
	close_handle((uv_handle_t *)&d->watchdog_timer);
	close_handle((uv_handle_t *)&d->drain_timer);
	close_handle((uv_handle_t *)&d->sig_term);
	close_handle((uv_handle_t *)&d->sig_int);
	close_handle((uv_handle_t *)&d->sig_hup);
	tlog(d, TIER_LOG_INFO, "stopped");
}

static void on_nbd_drained(void *arg)
{
	struct tierd *d = arg;

	d->nbd_drained = true;
	/*
	 * No new flushes or evictions: a cache over its dirty target kept the
	 * agent starting flushes, the engine never idle, and tierd exited 1 at
	 * shutdown_timeout (seed 004's load on an hdd base: 30 s and more of
	 * flushing left).  Dirty data stays in the cache pool, durable.
	 */
	tier_engine_quiesce(d->engine);
	{
		struct tier_stats st;

		tier_engine_get_stats(d->engine, &st);
		tlog(d, TIER_LOG_INFO, "all connections closed; letting the engine settle "
		     "(%llu dirty bytes stay in the cache)", (unsigned long long)st.dirty_bytes);
	}
	notify("STATUS=connections closed, archiving hitsets");
	/* archive the open hitset now (not at the period's end); finish once idle */
	uv_timer_stop(&d->tick_timer);
	if (tier_engine_archive_hitsets(d->engine) < 0)
		tlog(d, TIER_LOG_WARN, "shutdown: could not archive the current hitset");
	tier_engine_tick(d->engine);
	schedule_tick(d);
}

static uint64_t shutdown_ms(const struct tierd *d)
{
	return d->cfg && d->cfg->shutdown_timeout_ms ? d->cfg->shutdown_timeout_ms :
	       TIERD_DRAIN_TIMEOUT_MS;
}

static void on_drain_timeout(uv_timer_t *t)
{
	struct tierd *d = t->data;

	tlog(d, TIER_LOG_ERROR, "shutdown: still %zu NBD request(s) in flight and engine %s "
	     "after %llu ms (shutdown_timeout); exiting without a clean shutdown",
	     d->nbd ? nbd_server_in_flight(d->nbd) : 0,
	     !d->engine || tier_engine_idle(d->engine) ? "idle" : "busy",
	     (unsigned long long)shutdown_ms(d));
	exit(1);
}

/*
 * Half the shutdown deadline gone and connections still open: their clients
 * stopped reading replies.  Cut them; what the engine still holds finishes
 * (and is as safe as any acknowledged write), then the exit is clean.
 */
static void cut_nbd(void *arg)
{
	nbd_server_cut(arg);
}

static void on_drain_cut(uv_timer_t *t)
{
	struct tierd *d = t->data;
	uint64_t ms = shutdown_ms(d);

	if (d->nbd && !d->nbd_drained) {
		tlog(d, TIER_LOG_WARN, "shutdown: %zu connection(s) still open after %llu ms: "
		     "closing them", nbd_server_connections(d->nbd),
		     (unsigned long long)(ms / 2));
		nbd_server_exec(d->nbd, cut_nbd, d->nbd);
	}
	uv_timer_start(&d->drain_timer, on_drain_timeout, ms - ms / 2, 0);
}

static void begin_shutdown(struct tierd *d, const char *why)
{
	if (d->stopping) {
		tlog(d, TIER_LOG_WARN, "%s again: exiting now", why);
		exit(1);
	}
	d->stopping = true;
	tlog(d, TIER_LOG_INFO, "%s: draining %zu request(s) on %zu connection(s)", why,
	     nbd_server_in_flight(d->nbd), nbd_server_connections(d->nbd));
	notify("STOPPING=1\nSTATUS=draining %zu request(s)", nbd_server_in_flight(d->nbd));
	uv_timer_start(&d->drain_timer, on_drain_cut, shutdown_ms(d) / 2, 0);
	nbd_server_shutdown(d->nbd, on_nbd_drained, d);
}

/* ---- reload and live tuning ---- */

static int apply_params(struct tierd *d, const struct tier_params *p, char *err, size_t errlen)
{
	int rc = tier_engine_set_params(d->engine, p);

	if (rc < 0) {
		snprintf(err, errlen, "engine refused the tier parameters: %s", strerror(-rc));
		return rc;
	}
	return 0;
}

/* Append key to the comma-separated list of settings that wait for a restart. */
static void pending_key(char *pend, size_t cap, const char *key)
{
	size_t n = strlen(pend);

	if (n < cap)
		snprintf(pend + n, cap - n, "%s%s", n ? "," : "", key);
}

static bool str_differs(const char *a, const char *b)
{
	return (a || b) && (!a || !b || strcmp(a, b) != 0);
}

/*
 * Settings a reload cannot apply: warned, and named in pend (the admin
 * socket's reload answer lists them as restart_pending).
 */
static void warn_restart_only(struct tierd *d, const struct tierd_config *o,
			      const struct tierd_config *n, char *pend, size_t cap)
{
	static const struct {
		const char *key;
		size_t off;
	} strs[] = {
		{ "admin_socket", offsetof(struct tierd_config, admin_socket) },
		{ "prometheus", offsetof(struct tierd_config, prometheus) },
		{ "rados.conf", offsetof(struct tierd_config, rados_conf) },
		{ "rados.client_name", offsetof(struct tierd_config, rados_client_name) },
		{ "rados.keyring", offsetof(struct tierd_config, rados_keyring) },
		{ "rados.base_pool", offsetof(struct tierd_config, rados_base_pool) },
		{ "rados.cache_pool", offsetof(struct tierd_config, rados_cache_pool) },
		{ "rados.base_namespace", offsetof(struct tierd_config, rados_base_ns) },
		{ "rados.cache_namespace", offsetof(struct tierd_config, rados_cache_ns) },
	};
	size_t i;
	bool listen_changed = o->n_listen != n->n_listen;

	for (i = 0; !listen_changed && i < n->n_listen; i++)
		listen_changed = strcmp(o->listen[i], n->listen[i]) != 0;
	if (listen_changed) {
		tlog(d, TIER_LOG_WARN, "reload: listen addresses change at the next restart");
		pending_key(pend, cap, "listen");
	}
	if (o->backend != n->backend) {
		tlog(d, TIER_LOG_WARN, "reload: backend changes at the next restart");
		pending_key(pend, cap, "backend");
	}
	if (o->data_dir && n->data_dir && strcmp(o->data_dir, n->data_dir)) {
		tlog(d, TIER_LOG_WARN, "reload: data_dir changes at the next restart");
		pending_key(pend, cap, "data_dir");
	}
	if (str_differs(o->base_dir, n->base_dir) || str_differs(o->cache_dir, n->cache_dir)) {
		tlog(d, TIER_LOG_WARN, "reload: base_dir and cache_dir change at the next restart");
		pending_key(pend, cap, "local.base_dir/cache_dir");
	}
	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		const char *a = *(char *const *)(const void *)((const char *)o + strs[i].off);
		const char *b = *(char *const *)(const void *)((const char *)n + strs[i].off);

		if (str_differs(a, b)) {
			tlog(d, TIER_LOG_WARN, "reload: %s changes at the next restart", strs[i].key);
			pending_key(pend, cap, strs[i].key);
		}
	}
	if (memcmp(&o->base_model, &n->base_model, sizeof(o->base_model)) ||
	    memcmp(&o->cache_model, &n->cache_model, sizeof(o->cache_model)) ||
	    o->direct_io != n->direct_io || o->rados_op_timeout_ms != n->rados_op_timeout_ms) {
		tlog(d, TIER_LOG_WARN, "reload: device profiles, direct_io and op_timeout change "
		     "at the next restart");
		pending_key(pend, cap, "local.profiles/direct_io/op_timeout");
	}
	for (i = 0; i < o->n_images; i++) {
		size_t j;

		for (j = 0; j < n->n_images; j++)
			if (!strcmp(o->images[i].name, n->images[j].name))
				break;
		char key[160];

		if (j == n->n_images) {
			tlog(d, TIER_LOG_WARN, "reload: image %s was removed from the config; "
			     "it is served until the next restart, which refuses to start while "
			     "its cache objects are dirty (flush first: tierctl flush --image %s "
			     "--wait)", o->images[i].name, o->images[i].name);
			snprintf(key, sizeof(key), "image.%s (removed)", o->images[i].name);
			pending_key(pend, cap, key);
		} else if (n->images[j].size != o->images[i].size ||
			   str_differs(n->images[j].rbd_image, o->images[i].rbd_image)) {
			tlog(d, TIER_LOG_WARN, "reload: image %s changes size or RBD image at the "
			     "next restart (a shrink that leaves dirty cache objects past the new "
			     "end refuses to start: flush first)", o->images[i].name);
			snprintf(key, sizeof(key), "image.%s.size", o->images[i].name);
			pending_key(pend, cap, key);
		}
	}
}

/* read_only applies live, to the engine and to the NBD export (connected clients too). */
static void apply_read_only(struct tierd *d, const struct tierd_config *n)
{
	for (size_t i = 0; i < n->n_images; i++) {
		struct tier_image *img = tier_engine_find_image(d->engine, n->images[i].name);

		if (!img || tier_image_read_only(img) == n->images[i].read_only)
			continue;
		tier_image_set_read_only(img, n->images[i].read_only);
		nbd_server_set_read_only(d->nbd, n->images[i].name, n->images[i].read_only);
		tlog(d, TIER_LOG_INFO, "reload: image %s is now %s", n->images[i].name,
		     n->images[i].read_only ? "read-only (writes fail with EPERM)" : "writable");
	}
}

/*
 * Reload the config file.  0 and, in pend, the keys that wait for a restart
 * (comma-separated, "" if none); or -errno and err.
 */
static int do_reload(struct tierd *d, char *err, size_t errlen, char *pend, size_t pendcap)
{
	struct tierd_config *nc = NULL;
	const struct tier_params *cur = tier_engine_params(d->engine);
	size_t i;
	int rc;

	pend[0] = '\0';
	rc = tierd_config_load(d->cfg->path, &nc, err, errlen);
	if (rc < 0)
		return rc;
	if (nc->tier.object_size != cur->object_size || nc->tier.extent_size != cur->extent_size) {
		tlog(d, TIER_LOG_WARN, "reload: object_size/extent_size change at the next "
		     "restart, which refuses a pool laid out otherwise; keeping %llu/%llu",
		     (unsigned long long)cur->object_size, (unsigned long long)cur->extent_size);
		nc->tier.object_size = cur->object_size;
		nc->tier.extent_size = cur->extent_size;
		pending_key(pend, pendcap, "object_size/extent_size");
	}
	rc = apply_params(d, &nc->tier, err, errlen);
	if (rc < 0) {
		tierd_config_free(nc);
		return rc;
	}
	warn_restart_only(d, d->cfg, nc, pend, pendcap);
	apply_read_only(d, nc);
	/* restart-only settings keep their running values */
	nc->backend = d->cfg->backend;
	__atomic_store_n(&d->log_level, nc->log_level, __ATOMIC_RELAXED);
	tier_engine_set_debug(d->engine, d->log_level >= TIER_LOG_DEBUG);
	nbd_server_set_limits(d->nbd, nc->max_requests_per_conn, nc->max_bytes_per_conn);
	nbd_server_set_handshake_timeout(d->nbd, nc->handshake_timeout_ms);
	if (nc->tls != d->cfg->tls || nc->max_connections != d->cfg->max_connections)
		tlog(d, TIER_LOG_WARN, "reload: tls and max_connections change at the next restart");
	if (nc->busy_poll_us != d->cfg->busy_poll_us)
		tlog(d, TIER_LOG_WARN, "reload: busy_poll_us changes at the next restart");
	if (nc->threads != d->cfg->threads)
		tlog(d, TIER_LOG_WARN, "reload: threads changes at the next restart");
	{
		struct tierd_config *old = d->cfg;

		d->cfg = nc;
		for (i = 0; i < nc->n_images; i++)
			if (!tier_engine_find_image(d->engine, nc->images[i].name) &&
			    open_image(d, &nc->images[i]) < 0)
				tlog(d, TIER_LOG_ERROR, "reload: image %s not served",
				     nc->images[i].name);
		/* the data directory in use stays the locked one */
		if (old->data_dir && (!nc->data_dir || strcmp(old->data_dir, nc->data_dir))) {
			free(nc->data_dir);
			nc->data_dir = old->data_dir;
			old->data_dir = NULL;
		}
		/* and so do the pools' directories */
		free(nc->base_dir);
		free(nc->cache_dir);
		nc->base_dir = old->base_dir;
		nc->cache_dir = old->cache_dir;
		old->base_dir = old->cache_dir = NULL;
		tierd_config_free(old);
	}
	return 0;
}

/*
 * Around a reload (SIGHUP or the admin socket): RELOADING=1 with the
 * CLOCK_MONOTONIC time systemd's Type=notify-reload wants, then READY=1.
 */
static void notify_reloading(struct tierd *d)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	notify("RELOADING=1\nSTATUS=reloading %s\nMONOTONIC_USEC=%llu", d->cfg->path,
	       (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000);
}

static void notify_reloaded(struct tierd *d, const char *failure)
{
	size_t n = tier_engine_images(d->engine, NULL, 0);

	if (failure)
		notify("READY=1\nSTATUS=serving %zu image(s); reload failed, running config "
		       "kept: %s", n, failure);
	else
		notify("READY=1\nSTATUS=serving %zu image(s)", n);
}

static void on_sighup(uv_signal_t *s, int signum)
{
	struct tierd *d = s->data;
	char err[1024] = "", pend[1024];

	(void)signum;
	if (d->stopping)
		return;
	notify_reloading(d);
	if (do_reload(d, err, sizeof(err), pend, sizeof(pend)) < 0) {
		tlog(d, TIER_LOG_ERROR, "reload failed, keeping the running config: %s", err);
		notify_reloaded(d, err);
	} else {
		tlog(d, TIER_LOG_INFO, "reloaded %s%s%s", d->cfg->path,
		     pend[0] ? "; waiting for a restart: " : "", pend);
		notify_reloaded(d, NULL);
	}
}

static void on_stop_signal(uv_signal_t *s, int signum)
{
	begin_shutdown(s->data, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

/* admin hooks */
static struct tier_engine *hook_engine(void *arg)
{
	return ((struct tierd *)arg)->engine;
}

static struct tier_store *hook_store(void *arg, int which)
{
	struct tierd *d = arg;

	return which ? d->cache : d->base;
}

#if HAVE_RADOS
static int hook_owner(void *arg, const char *image, struct tierd_own_info *out)
{
	struct tierd *d = arg;

	return d->owners ? tierd_owners_state(d->owners, image, out) : -ENOENT;
}

static int hook_own_request(void *arg, const char *image, bool acquire, bool force, char *msg,
			    size_t len)
{
	struct tierd *d = arg;

	return tierd_owners_request(d->owners, image, acquire, force, msg, len);
}
#endif

static const struct tierd_busy_poll *hook_busy_poll(void *arg, int which)
{
	struct tierd *d = arg;

	return which ? nbd_server_busy_poll(d->nbd) : &d->busy_poll;
}

static const struct tierd_config *hook_config(void *arg)
{
	return ((struct tierd *)arg)->cfg;
}

/* On success, err holds the keys waiting for a restart (comma-separated). */
static int hook_reload(void *arg, char *err, size_t errlen)
{
	struct tierd *d = arg;
	char pend[1024];
	int rc;

	notify_reloading(d);
	rc = do_reload(d, err, errlen, pend, sizeof(pend));
	if (rc < 0)
		tlog(d, TIER_LOG_ERROR, "reload failed, keeping the running config: %s", err);
	notify_reloaded(d, rc < 0 ? err : NULL);
	if (rc >= 0)
		snprintf(err, errlen, "%s", pend);
	return rc;
}

static int hook_set_params(void *arg, const struct tier_params *p, char *err, size_t errlen)
{
	struct tierd *d = arg;
	int rc = apply_params(d, p, err, errlen);

	if (rc == 0)
		d->cfg->tier = *p;
	return rc;
}

/* ---- start-up ---- */

static int init_handles(struct tierd *d)
{
	int rc;

	d->cq_async.data = d->cq_idle.data = d;
	d->loop_thread = uv_thread_self();
	d->tick_timer.data = d->watchdog_timer.data = d->drain_timer.data = d;
	d->sig_term.data = d->sig_int.data = d->sig_hup.data = d;
	if ((rc = uv_async_init(&d->loop, &d->cq_async, on_cq)) < 0 ||
	    (rc = uv_idle_init(&d->loop, &d->cq_idle)) < 0 ||
	    (rc = uv_timer_init(&d->loop, &d->tick_timer)) < 0 ||
	    (rc = uv_timer_init(&d->loop, &d->watchdog_timer)) < 0 ||
	    (rc = uv_timer_init(&d->loop, &d->drain_timer)) < 0 ||
	    (rc = uv_signal_init(&d->loop, &d->sig_term)) < 0 ||
	    (rc = uv_signal_init(&d->loop, &d->sig_int)) < 0 ||
	    (rc = uv_signal_init(&d->loop, &d->sig_hup)) < 0)
		return rc;
	return 0;
}

/* Signals and the watchdog go live only once everything else is up. */
static void start_handles(struct tierd *d)
{
	uint64_t wd_usec = 0;

	uv_signal_start(&d->sig_term, on_stop_signal, SIGTERM);
	uv_signal_start(&d->sig_int, on_stop_signal, SIGINT);
	uv_signal_start(&d->sig_hup, on_sighup, SIGHUP);
#if HAVE_SYSTEMD
	if (sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec >= 2000)
		uv_timer_start(&d->watchdog_timer, on_watchdog, wd_usec / 2000, wd_usec / 2000);
#else
	(void)on_watchdog;
	(void)wd_usec;
#endif
}

/* socket_group = NAME or GID: the group that may connect to unix listeners. */
static int socket_group(struct tierd *d, struct nbd_server_opts *no)
{
	const char *g = d->cfg->socket_group;
	struct group *gr;
	uint64_t id;

	if (!g || !g[0])
		return 0;
	gr = getgrnam(g);
	if (gr) {
		id = gr->gr_gid;
	} else if (tier_parse_u64(g, &id) < 0 || id >= (uint64_t)(gid_t)-1) {
		tlog(d, TIER_LOG_ERROR, "socket_group '%s': no such group", g);
		return -ENOENT;
	}
	no->socket_gid_set = true;
	no->socket_gid = (gid_t)id;
	return 0;
}

/* allow_plaintext is a choice to say out loud, at every start. */
static void warn_plaintext(struct tierd *d)
{
	const struct tierd_config *c = d->cfg;

	if (c->tls == NBD_TLS_REQUIRE)
		return;
	for (size_t i = 0; i < c->n_listen; i++)
		if (strncmp(c->listen[i], "unix:", 5) && !tierd_addr_is_loopback(c->listen[i]))
			tlog(d, TIER_LOG_WARN, "nbd: %s serves plaintext NBD without "
			     "authentication to the network (allow_plaintext = true): anyone "
			     "who reaches it can read and write every image", c->listen[i]);
}

/*
 * threads: 1 = the NBD server and the engine share the loop; more = the NBD
 * server gets a loop and thread of its own (daemon/nbd-thread.c).  0 = the
 * number of cores.  The default is 1: it costs half the CPU per request of
 * 2 and was faster in most cases on a 2-core machine (docs/BENCHMARKS.md,
 * "The data path against nbdkit").  TIERD_THREADS in the environment
 * overrides the file (the test matrix runs the suites with 1 and 2).
 */
static unsigned thread_count(struct tierd *d)
{
	const char *env = getenv("TIERD_THREADS");
	uint64_t n = d->cfg->threads;

	if (env && env[0] && (tier_parse_u64(env, &n) < 0 || n > 1024)) {
		tlog(d, TIER_LOG_WARN, "TIERD_THREADS=%s: not a count of threads, ignored", env);
		n = d->cfg->threads;
	}
	if (n == 0)
		n = uv_available_parallelism();
	return n ? (unsigned)n : 1;
}

/*
 * busy_poll_us, as the loops use it: 0 when the loops that would spin (the
 * engine's, and the NBD I/O thread's with threads > 1) would leave no core
 * to the clients and the rest of the machine.  Two spinning loops on the
 * 2-core test VM halved the IOPS at QD 1 and QD 16 against no busy-poll
 * (docs/BENCHMARKS.md, "The data path against nbdkit").
 */
static uint32_t busy_poll_us(struct tierd *d)
{
	unsigned loops = d->threads > 1 ? 2 : 1, cores = uv_available_parallelism();

	if (!d->cfg->busy_poll_us)
		return 0;
	if (loops + 1 > cores) {
		tlog(d, TIER_LOG_INFO, "busy_poll_us %u: off, %u spinning loop%s on %u core%s "
		     "would leave no core to the clients", d->cfg->busy_poll_us, loops,
		     loops > 1 ? "s" : "", cores, cores > 1 ? "s" : "");
		return 0;
	}
	return d->cfg->busy_poll_us;
}

/* The busy-poll's may_spin: only while the loop waits for clients alone (no
 * store op on a worker, device-model or librados thread). */
static bool stores_idle(void *arg)
{
	const struct tierd *d = arg;

	return (!d->base || !tier_store_in_flight(d->base)) &&
	       (!d->cache || !tier_store_in_flight(d->cache));
}

/*
 * Several tierds share a cache pool: each archives its hitsets under a tag
 * of its own, "<host>-<hash of its config path>", stable across restarts.
 */
static const char *hitset_tag(struct tierd *d)
{
	static char tag[72];
	char host[48] = "host", path[4096];
	uint32_t h = 2166136261u;
	size_t n;

	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = '\0';
	config_path_abs(d, path);
	for (const char *p = path; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	n = (size_t)snprintf(tag, sizeof(tag), "%s-%08x", host, h);
	for (size_t i = 0; i < n && i < sizeof(tag); i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", tag[i]))
			tag[i] = '_';
	return tag;
}

static int start(struct tierd *d)
{
	char nbd_err[512] = "";
	struct nbd_server_opts no = {
		.loop = &d->loop,
		.max_requests_per_conn = d->cfg->max_requests_per_conn,
		.max_bytes_per_conn = d->cfg->max_bytes_per_conn,
		.handshake_timeout_ms = d->cfg->handshake_timeout_ms,
		.max_connections = d->cfg->max_connections,
		.max_bytes_in_flight = d->cfg->max_bytes_in_flight,
		.transmission_timeout_ms = d->cfg->transmission_timeout_ms,
		.socket_mode = d->cfg->socket_mode,
		.log = tierd_log_cb,
		.log_arg = d,
		.tls = (enum nbd_tls_mode)d->cfg->tls,
		.tls_certificates = d->cfg->tls_certificates,
		.tls_psk_file = d->cfg->tls_psk_file,
		.tls_priority = d->cfg->tls_priority,
		.tls_verify_peer = d->cfg->tls_verify_peer,
		.err = nbd_err,
		.errlen = sizeof(nbd_err),
	};
	struct tier_engine_opts eo = { .log = tierd_log_cb, .log_arg = d,
				       .log_rec = tierd_log_rec_cb };
	struct tierd_admin_hooks hooks = {
		.arg = d, .engine = hook_engine, .config = hook_config,
		.reload = hook_reload, .set_params = hook_set_params,
		.store = hook_store,
		.busy_poll = hook_busy_poll,
#if HAVE_RADOS
		.owner = hook_owner,
		.own_request = hook_own_request,
#endif
		.log = tierd_log_cb,
	};
	const struct tierd_config *c = d->cfg;
	static struct resolved rv;
	size_t i;
	int rc;

	if ((rc = init_handles(d)) < 0)
		return rc;
	if (c->backend == TIERD_BACKEND_LOCAL && (rc = take_lock(d)) < 0)
		return rc;
	if ((rc = tier_cq_create(cq_notify, d, &d->cq)) < 0)
		return rc;
	notify("STATUS=opening the %s pools", c->backend == TIERD_BACKEND_LOCAL ? "local" :
	       "rados");
	rc = c->backend == TIERD_BACKEND_LOCAL ? create_local_stores(d) : create_rados_stores(d);
	if (rc < 0)
		return rc;
	notify("STATUS=checking the images, layout records and stranded cache objects");
	if ((rc = resolve_all(d, &rv)) < 0 || (rc = layout_check(d, &rv)) < 0 ||
	    (rc = stranded_check(d, &rv)) < 0)
		return rc;
	eo.base = d->base;
	eo.cache = d->cache;
	eo.params = c->tier;
	if (c->backend == TIERD_BACKEND_RADOS)
		eo.hitset_tag = hitset_tag(d);
	if ((rc = tier_engine_create(&eo, &d->engine)) < 0) {
		tlog(d, TIER_LOG_ERROR, "engine: %s", strerror(-rc));
		return rc;
	}
	tier_engine_set_debug(d->engine, d->log_level >= TIER_LOG_DEBUG);
	if ((rc = socket_group(d, &no)) < 0)
		return rc;
	warn_plaintext(d);
	d->threads = thread_count(d);
	no.io_thread = d->threads > 1;
	no.busy_poll_us = busy_poll_us(d);
	tierd_busy_poll_init(&d->busy_poll, no.busy_poll_us);
	d->busy_poll.may_spin = stores_idle;
	d->busy_poll.may_spin_arg = d;
	tierd_busy_poll_loop_init(&d->loop, &d->busy_poll);
	if ((rc = nbd_server_create(&no, &d->nbd)) < 0) {
		tlog(d, TIER_LOG_ERROR, "nbd: %s", nbd_err[0] ? nbd_err : strerror(-rc));
		return rc;
	}
#if HAVE_RADOS
	if (c->backend == TIERD_BACKEND_RADOS) {
		struct tierd_owner_ctx oc = {
			.loop = &d->loop, .rados = d->rados, .base = d->base, .cache = d->cache,
			.nbd = d->nbd, .log = tierd_log_cb, .log_arg = d,
		};
		const char *nb = getenv("TIERD_TEST_NO_BLOCKLIST");
		const char *ns = getenv("TIERD_TEST_NO_SELF_FENCE");

		oc.no_blocklist = nb && !strcmp(nb, "1");
		oc.no_self_fence = ns && !strcmp(ns, "1");
		if (!TIERD_TEST_SWITCHES && (oc.no_blocklist || oc.no_self_fence)) {
			tlog(d, TIER_LOG_ERROR, "TIERD_TEST_NO_BLOCKLIST/TIERD_TEST_NO_SELF_FENCE "
			     "ignored: this build has no test switches (-Dtest_switches=false)");
			oc.no_blocklist = oc.no_self_fence = false;
		}
		if (oc.no_self_fence)
			tlog(d, TIER_LOG_ERROR, "TIERD_TEST_NO_SELF_FENCE=1: a watch error does not "
			     "stop this tierd's writes and no lease bounds them (a test's control; "
			     "never in production)");
		if (oc.no_blocklist)
			tlog(d, TIER_LOG_ERROR, "TIERD_TEST_NO_BLOCKLIST=1: locks of dead holders "
			     "are broken WITHOUT blocklisting them (a test's negative control; "
			     "never in production)");
		if ((rc = tierd_owners_create(&oc, &d->owners)) < 0) {
			tlog(d, TIER_LOG_ERROR, "ownership: %s", uv_strerror(rc));
			return rc;
		}
	}
#endif
	tlog(d, TIER_LOG_INFO, "nbd: at most %zu connections, tls %s",
	     nbd_server_max_connections(d->nbd),
	     c->tls == NBD_TLS_REQUIRE ? "required" : c->tls == NBD_TLS_ON ? "offered" : "off");
	for (i = 0; i < rv.n; i++)
		if ((rc = serve_image(d, &c->images[i], rv.prefix[i], rv.size[i],
				      c->backend == TIERD_BACKEND_RADOS ? (long)i : -1)) < 0)
			return rc;
	for (i = 0; rc == 0 && i < c->n_listen; i++)
		rc = nbd_server_listen(d->nbd, c->listen[i]);
	if (rc < 0)
		return rc;
	if ((rc = nbd_server_start(d->nbd)) < 0) {
		tlog(d, TIER_LOG_ERROR, "nbd: starting the I/O thread: %s", uv_strerror(rc));
		return rc;
	}
	/* more than two: one NBD I/O thread still (engine shards were not built) */
	tlog(d, TIER_LOG_INFO, "threads %u: %s", d->threads,
	     d->threads > 2 ? "2 in use, the engine's loop and one NBD I/O thread" :
	     d->threads > 1 ? "the engine's loop and an NBD I/O thread" :
			      "one loop for the NBD server and the engine");
	if (c->admin_socket && c->admin_socket[0]) {
		rc = tierd_admin_start(&d->loop, c->admin_socket, &hooks, &d->admin);
		if (rc < 0) {
			tlog(d, TIER_LOG_ERROR, "admin socket %s: %s", c->admin_socket,
			     strerror(-rc));
			return rc;
		}
		tierd_admin_set_timeout(d->admin, c->client_timeout_ms);
	}
	if (c->prometheus && c->prometheus[0]) {
		rc = tierd_prom_start(&d->loop, c->prometheus, hook_engine, hook_store, d, &d->prom);
		if (rc < 0) {
			tlog(d, TIER_LOG_ERROR, "prometheus endpoint %s: %s", c->prometheus,
			     strerror(-rc));
			return rc;
		}
		tierd_prom_set_timeout(d->prom, c->client_timeout_ms);
#if HAVE_RADOS
		if (d->owners)
			tierd_prom_set_owner(d->prom, hook_owner);
#endif
		tlog(d, TIER_LOG_INFO, "prometheus metrics on http://%s/metrics", c->prometheus);
	}
	notify("STATUS=listening; loading the cache maps of %zu image(s)", rv.n);
	start_handles(d);
	schedule_tick(d);
	return 0;
}

/* ---- offline mode: tierd --config FILE --stranded list|flush|drop [--force] ---- */

static void print_report(const struct tierd *d, const struct tier_stranded_report *r)
{
	char label[TIER_OID_MAX * 2 + 128];

	if (!r->n_objs) {
		printf("no stranded cache objects in the cache pool\n");
		return;
	}
	for (size_t i = 0; i < r->n_groups; i++) {
		const struct tier_stranded_group *g = &r->groups[i];

		group_label(d, g, label, sizeof(label));
		printf("%s: %zu object(s), %llu dirty (%llu bytes), %llu clean\n", label, g->n,
		       (unsigned long long)g->n_dirty, (unsigned long long)g->dirty_bytes,
		       (unsigned long long)g->n_clean);
		for (size_t k = g->first; k < g->first + g->n; k++) {
			const struct tier_stranded_obj *o = &r->objs[k];

			printf("  %s  %s", o->oid, o->dirty ? "dirty" : o->bad_meta ? "incomplete" :
			       "clean");
			if (o->dirty)
				printf("  %llu dirty bytes%s", (unsigned long long)o->dirty_bytes,
				       o->nbits ? " (extents)" : "");
			printf("\n");
		}
	}
	printf("total: %zu stranded object(s), %llu dirty, %llu dirty bytes\n", r->n_objs,
	       (unsigned long long)r->n_dirty, (unsigned long long)r->dirty_bytes);
}

static int run_stranded(struct tierd *d, const char *action, bool force)
{
	const struct tierd_config *c = d->cfg;
	struct tier_stranded_report *r = NULL;
	struct tier_stranded_result res;
	enum tier_stranded_action act = TIER_STRANDED_CLEAN;
	static struct resolved rv;
	bool list = !strcmp(action, "list");
	int rc, ret = 1;

	if (!strcmp(action, "flush"))
		act = TIER_STRANDED_FLUSH;
	else if (!strcmp(action, "drop"))
		act = TIER_STRANDED_DROP;
	else if (!list) {
		fprintf(stderr, "tierd: --stranded takes list, flush or drop, not '%s'\n", action);
		return 2;
	}
	if (c->backend == TIERD_BACKEND_LOCAL && take_lock(d) < 0)
		goto out;
	if (tier_cq_create(NULL, NULL, &d->cq) < 0)
		goto out;
	rc = c->backend == TIERD_BACKEND_LOCAL ? create_local_stores(d) : create_rados_stores(d);
	if (rc < 0 || resolve_all(d, &rv) < 0)
		goto out;
	rc = tier_stranded_scan(d->cache, d->cq, c->tier.object_size, rv.si, rv.n, &r);
	if (rc < 0) {
		tlog(d, TIER_LOG_ERROR, "scanning the cache pool: %s", strerror(-rc));
		goto out;
	}
	print_report(d, r);
	if (list || !r->n_objs) {
		ret = 0;
		goto out;
	}
	if (act == TIER_STRANDED_DROP && r->n_dirty && !force) {
		fprintf(stderr, "tierd: drop would discard %llu dirty object(s), %llu bytes that "
			"exist nowhere else; nothing done. Add --force to discard them, or use "
			"--stranded flush to keep them\n", (unsigned long long)r->n_dirty,
			(unsigned long long)r->dirty_bytes);
		goto out;
	}
	rc = tier_stranded_resolve(d->base, d->cache, d->cq, r, act, tierd_log_cb, d, &res);
	if (act == TIER_STRANDED_FLUSH)
		printf("flushed %llu dirty object(s), %llu bytes, to the base pool (durably); ",
		       (unsigned long long)res.flushed, (unsigned long long)res.flushed_bytes);
	else
		printf("discarded %llu dirty object(s), %llu dirty bytes; ",
		       (unsigned long long)res.dropped_dirty,
		       (unsigned long long)res.dropped_dirty_bytes);
	printf("removed %llu cache object(s)", (unsigned long long)res.removed);
	if (res.failed)
		printf("; %llu FAILED and left in place (see the errors above)",
		       (unsigned long long)res.failed);
	printf("\n");
	ret = rc < 0 ? 1 : 0;
out:
	tier_stranded_free(r);
	tier_store_destroy(d->base);
	tier_store_destroy(d->cache);
	if (d->cq)
		tier_cq_drain(d->cq);
	tier_cq_destroy(d->cq);
#if HAVE_RADOS
	for (size_t i = 0; i < d->n_rbd; i++)
		tier_rbd_close(d->rados, d->cfg->rados_base_pool, &d->rbd[i]);
	tier_rados_disconnect(d->rados);
#endif
	if (d->lock_fd >= 0)
		close(d->lock_fd);
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tierd --config FILE [--foreground] [--check]\n"
		"       tierd --config FILE --stranded list|flush|drop [--force]\n"
		"  -c, --config FILE   configuration file (INI; see tierd.conf.example)\n"
		"  -f, --foreground    run in the foreground (always; for systemd)\n"
		"  -n, --check         parse the configuration, probe its paths, sockets,\n"
		"                      addresses, TLS and Ceph files, report and exit\n"
		"                      (0 fine, 78 a problem)\n"
		"  --stranded ACTION   offline (tierd not running): cache objects of images\n"
		"                      not in the config or past their end: list them, flush\n"
		"                      their dirty data to the base pool and remove them, or\n"
		"                      drop them (dirty data too: needs --force); then exit\n"
		"  --force             with --stranded drop: discard dirty data\n"
		"  -V, --version       print the version\n"
		"  -h, --help          this text\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "check", no_argument, NULL, 'n' },
		{ "stranded", required_argument, NULL, 's' },
		{ "force", no_argument, NULL, 'F' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct tierd d = { .lock_fd = -1, .log_level = TIER_LOG_INFO };
	const char *path = NULL, *stranded = NULL;
	char err[1024] = "";
	bool check = false, force = false;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "c:fnVh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 'f': break;
		case 'n': check = true; break;
		case 's': stranded = optarg; break;
		case 'F': force = true; break;
		case 'V': printf("tierd %s\n", TIER_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!path || optind != argc || (force && !stranded) || (check && stranded)) {
		usage(stderr);
		return 2;
	}
	d.journal = tierd_log_under_journal();
	rc = tierd_config_load(path, &d.cfg, err, sizeof(err));
	if (rc < 0) {
		tlog(&d, TIER_LOG_ERROR, "%s", err[0] ? err : strerror(-rc));
		/* a bad or missing file: Restart= would only fail the same way */
		return TIERD_EXIT_CONFIG;
	}
	d.log_level = d.cfg->log_level;
	if (check) {
		/* the file parses; now what the start needs from this machine */
		rc = tierd_check_probe(d.cfg, stdout, stderr);
		tierd_config_free(d.cfg);
		if (rc) {
			fprintf(stderr, "tierd: %s: %d problem(s): a start would fail\n", path, rc);
			return TIERD_EXIT_CONFIG;
		}
		printf("%s: OK\n", path);
		return 0;
	}
	if (stranded) {
		rc = run_stranded(&d, stranded, force);
		tierd_config_free(d.cfg);
		return rc;
	}
	signal(SIGPIPE, SIG_IGN);
	if ((rc = uv_loop_init(&d.loop)) < 0) {
		tlog(&d, TIER_LOG_ERROR, "uv_loop_init: %s", uv_strerror(rc));
		return 1;
	}
	tlog(&d, TIER_LOG_INFO, "tierd %s starting (backend %s, config %s)", TIER_VERSION,
	     d.cfg->backend == TIERD_BACKEND_LOCAL ? "local" : "rados", path);
	rc = start(&d);
	if (rc < 0) {
		tlog(&d, TIER_LOG_ERROR, "start-up failed: %s", strerror(-rc));
		notify("STATUS=start-up failed: %s\nERRNO=%d", strerror(-rc), -rc);
		/* nothing was served: wait only for engine work already started */
		d.exit_code = d.config_error ? TIERD_EXIT_CONFIG : 1;
		d.stopping = true;
		d.nbd_drained = true;
		if (d.nbd)
			nbd_server_shutdown(d.nbd, NULL, NULL);
		if (!d.engine || tier_engine_idle(d.engine))
			finish(&d);
		else
			uv_timer_start(&d.drain_timer, on_drain_timeout, shutdown_ms(&d), 0);
	}
	tierd_busy_poll_run(&d.loop, &d.busy_poll);
	nbd_server_destroy(d.nbd);
#if HAVE_RADOS
	tierd_owners_destroy(d.owners);
	for (size_t i = 0; i < d.n_rbd; i++)
		tier_rbd_close(d.rados, d.cfg->rados_base_pool, &d.rbd[i]);
	tier_rados_disconnect(d.rados);
#endif
	if (uv_loop_close(&d.loop) < 0)
		tlog(&d, TIER_LOG_WARN, "event loop closed with handles still open");
	tierd_config_free(d.cfg);
	if (d.lock_fd >= 0)
		close(d.lock_fd);
	return d.exit_code;
}
