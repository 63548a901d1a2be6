/* SPDX-License-Identifier: MIT */
/*
 * libtier/rbd.c - resolve an existing RBD format-2 image of a pool into what
 * tierd needs (object prefix, order, size) through the `rbd` object class, and
 * hold the one-tierd-per-image lock on its header.  It decides which images
 * tierd may serve: it refuses any feature or layout whose correctness depends
 * on librbd (exclusive-lock, object-map, fast-diff, journaling, non-default
 * striping, a separate data pool, clones, snapshots) with an error that says
 * what to run.  It must never modify an image: the only write is the lock.
 * Blocking calls, for start-up only.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rados/librados.h>

#include "tier/rados.h"
#include "store/rados_internal.h"

/* Feature bits of rbd/features.h (kept here so only librados is needed). */
#define F_LAYERING        (1ull << 0)
#define F_STRIPINGV2      (1ull << 1)
#define F_EXCLUSIVE_LOCK  (1ull << 2)
#define F_OBJECT_MAP      (1ull << 3)
#define F_FAST_DIFF       (1ull << 4)
#define F_DEEP_FLATTEN    (1ull << 5)
#define F_JOURNALING      (1ull << 6)
#define F_DATA_POOL       (1ull << 7)
#define F_OPERATIONS      (1ull << 8)
#define F_MIGRATING       (1ull << 9)
#define F_NON_PRIMARY     (1ull << 10)
#define F_DIRTY_CACHE     (1ull << 11)

#define CEPH_NOSNAP       ((uint64_t)-2)
#define LOCK_NAME         "rbd_lock"   /* librbd's RBD_LOCK_NAME */
#define LEGACY_LOCK_NAME  "tierd"      /* before tierd took rbd_lock */

/* Features that only librbd keeps right, in the order `rbd feature disable` wants. */
static const struct {
	uint64_t bit;
	const char *name;
} disable_order[] = {
	{ F_FAST_DIFF, "fast-diff" },
	{ F_OBJECT_MAP, "object-map" },
	{ F_JOURNALING, "journaling" },
	{ F_EXCLUSIVE_LOCK, "exclusive-lock" },
};

#define FEATURES_KNOWN (F_LAYERING | F_STRIPINGV2 | F_EXCLUSIVE_LOCK | F_OBJECT_MAP | \
			F_FAST_DIFF | F_DEEP_FLATTEN | F_JOURNALING | F_DATA_POOL | \
			F_OPERATIONS | F_MIGRATING | F_NON_PRIMARY | F_DIRTY_CACHE)

/* ---- ceph encoding: little-endian integers, strings as le32 length + bytes ---- */

struct dec {
	const uint8_t *p;
	size_t left;
};

static int dec_u8(struct dec *d, uint8_t *v)
{
	if (d->left < 1)
		return -EIO;
	*v = d->p[0];
	d->p++;
	d->left--;
	return 0;
}

static int dec_u32(struct dec *d, uint32_t *v)
{
	if (d->left < 4)
		return -EIO;
	*v = (uint32_t)d->p[0] | (uint32_t)d->p[1] << 8 | (uint32_t)d->p[2] << 16 |
	     (uint32_t)d->p[3] << 24;
	d->p += 4;
	d->left -= 4;
	return 0;
}

static int dec_u64(struct dec *d, uint64_t *v)
{
	uint32_t lo, hi;

	if (dec_u32(d, &lo) < 0 || dec_u32(d, &hi) < 0)
		return -EIO;
	*v = (uint64_t)hi << 32 | lo;
	return 0;
}

/* A string into out[cap] (NUL-terminated); -ENAMETOOLONG if it does not fit. */
static int dec_str(struct dec *d, char *out, size_t cap)
{
	uint32_t n;

	if (dec_u32(d, &n) < 0 || d->left < n)
		return -EIO;
	if ((size_t)n + 1 > cap)
		return -ENAMETOOLONG;
	memcpy(out, d->p, n);
	out[n] = '\0';
	d->p += n;
	d->left -= n;
	return 0;
}

static void enc_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* rados_exec of class "rbd"; the output is left in d (backed by buf). */
static int cls_call(rados_ioctx_t io, const char *oid, const char *method,
		    const uint8_t *in, size_t in_len, uint8_t *buf, size_t cap, struct dec *d)
{
	int rc = rados_exec(io, oid, "rbd", method, (const char *)in, in_len, (char *)buf, cap);

	if (rc < 0)
		return rc;
	d->p = buf;
	d->left = (size_t)rc;
	return 0;
}

/* ---- the lock and the watch ---- */
/*
 * As librbd's exclusive lock looks (librbd/ManagedLock, cls_lock): lock
 * "rbd_lock" on rbd_header.<id>, exclusive, cookie "auto <watch handle>",
 * held by the client that also watches the header.  The cookie goes on with
 * " tierd:<host>:<boot id>:<pid namespace>:<pid>", which librbd ignores when it parses the
 * handle and which lets a restarted tierd on the same host recognise a lock
 * of a killed predecessor.  The tag is empty (rados_lock_exclusive), not
 * librbd's "internal": a librbd client that finds the lock (exclusive-lock
 * enabled behind tierd's back) then says "locked by external tool" and
 * fails, instead of asking tierd, which cannot hand an image over, to
 * release it.  The description says "tierd serving this image (pid N)".
 */
struct tier_rbd_watch {
	rados_ioctx_t io;
	rados_t cluster;
	char oid[96];
	uint64_t handle;
	atomic_int werr;           /* the same, for tier_rbd_take_watch_error */
	atomic_bool owner;         /* the lock is ours: answer release requests */
	atomic_bool handoff;       /* answer them "releasing" (else "never") */
	atomic_bool unsafe;        /* answer them "fence-me" (tier_rbd_set_unsafe) */
	atomic_int requests;       /* release requests not yet taken */
	_Atomic(void (*)(void *, int)) event;   /* set and cleared while the watch runs */
	_Atomic(void *) event_arg;
};


/* The inode of this process's PID namespace (0 if unknown). */
static unsigned long pid_ns(void)
{
	char link[64];
	ssize_t n = readlink("/proc/self/ns/pid", link, sizeof(link) - 1);
	const char *b;

	if (n <= 0)
		return 0;
	link[n] = '\0';
	b = strchr(link, '[');
	return b ? strtoul(b + 1, NULL, 10) : 0;
}

static void make_ident(char *out, size_t cap)
{
	char host[64] = "unknown", boot[64] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	if (f) {
		if (!fgets(boot, sizeof(boot), f))
			boot[0] = '\0';
		fclose(f);
	}
	boot[8] = '\0';
	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = '\0';
	snprintf(out, cap, "tierd:%s:%s:%lu:%ld", host, boot, pid_ns(), (long)getpid());
}

/*
 * A lock of a tierd of this host, boot and PID namespace that no longer
 * exists: the cookie is "auto <handle> tierd:host:boot:pidns:pid".  Only
 * there does kill(pid, 0) say anything about the holder (a tierd in
 * another container of the host has a pid of its own namespace); other
 * cookies, older ones ("tierd:host:boot:pid") included, are never stale:
 * their holder's watch has to time out.
 */
static bool cookie_is_stale(const char *cookie)
{
	char prefix[160];
	const char *id = strstr(cookie, "tierd:"), *pidpart;
	long pid;

	if (!id || (id != cookie && id[-1] != ' '))
		return false;
	make_ident(prefix, sizeof(prefix));
	/* same "tierd:host:boot:pidns:" prefix as ours, so the pid is meaningful here */
	*strrchr(prefix, ':') = '\0';
	if (strncmp(id, prefix, strlen(prefix)) != 0 || id[strlen(prefix)] != ':')
		return false;
	pidpart = id + strlen(prefix) + 1;
	pid = strtol(pidpart, NULL, 10);
	if (pid <= 0 || pid == (long)getpid())
		return false;
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* The payloads of a release request and of its answers (tierd to tierd). */
#define REQ_PAYLOAD   "tierd-request-lock v1"
#define ANS_RELEASING "releasing"
#define ANS_NEVER     "never"
#define ANS_STANDBY   "standby"
#define ANS_FENCE     "fence-me"   /* the owner's writes may still land: blocklist it */

static void watch_cb(void *arg, uint64_t notify_id, uint64_t handle, uint64_t notifier_id,
		     void *data, size_t len)
{
	struct tier_rbd_watch *w = arg;
	const char *ans = NULL;
	bool asked = false;

	(void)notifier_id;
	/*
	 * A release request: the owner answers at once and hands over behind it
	 * (the asker waits for the lock); a standby says so.  Anything else
	 * (librbd's header updates: resize, features) is acknowledged with
	 * nothing, so the notifier does not wait for its timeout.
	 */
	if (len == strlen(REQ_PAYLOAD) && !memcmp(data, REQ_PAYLOAD, len)) {
		if (!atomic_load(&w->owner)) {
			ans = ANS_STANDBY;
		} else if (atomic_load(&w->unsafe)) {
			ans = ANS_FENCE;
		} else if (!atomic_load(&w->handoff)) {
			ans = ANS_NEVER;
		} else {
			ans = ANS_RELEASING;
			asked = true;
			atomic_fetch_add(&w->requests, 1);
		}
	}
	rados_notify_ack(w->io, w->oid, notify_id, handle, ans, ans ? (int)strlen(ans) : 0);
	if (asked) {
		void (*ev)(void *, int) = atomic_load(&w->event);

		if (ev)
			ev(atomic_load(&w->event_arg), TIER_RBD_EV_REQUEST);
	}
}

static void watch_err_cb(void *arg, uint64_t handle, int err)
{
	struct tier_rbd_watch *w = arg;

	(void)handle;
	atomic_store(&w->werr, err ? err : -ENOTCONN);
	{
		void (*ev)(void *, int) = atomic_load(&w->event);

		if (ev)
			ev(atomic_load(&w->event_arg), TIER_RBD_EV_WATCH_ERR);
	}
}

/* ---- who holds the lock ---- */

struct holder {
	char client[64];     /* "client.4235" */
	char cookie[256];
	char addr[128];      /* what `ceph osd blocklist add` takes */
	uint64_t gid;        /* 4235: the watcher id a notify reply names */
};

/* 1 held (h filled), 0 nobody holds it, -errno. */
static int read_holder(rados_ioctx_t io, const char *oid, const char *name, struct holder *h)
{
	char tag[128];
	size_t tl = sizeof(tag), cl = sizeof(h->client), kl = sizeof(h->cookie),
	       al = sizeof(h->addr);
	int exclusive = 0;
	ssize_t n;

	memset(h, 0, sizeof(*h));
	n = rados_list_lockers(io, oid, name, &exclusive, tag, &tl, h->client, &cl, h->cookie,
			       &kl, h->addr, &al);
	if (n == -ENOENT || n == 0)
		return 0;
	if (n < 0)
		return (int)n;
	if (!strncmp(h->client, "client.", 7))
		h->gid = strtoull(h->client + 7, NULL, 10);
	return 1;
}

static void describe_holder(const struct holder *h, char *out, size_t cap)
{
	snprintf(out, cap, "%s at %s (cookie '%s')", h->client, h->addr, h->cookie);
}

/*
 * Fence the holder: blocklist its address, wait for the OSD map that
 * carries it (every OSD then refuses its ops), and break its lock only if
 * the locker is still the one we fenced.
 */
static int fence_and_break(rados_t cluster, rados_ioctx_t io, const char *oid, const char *name,
			   const struct holder *h, unsigned flags, uint32_t blocklist_s,
			   char *err, size_t errlen)
{
	struct holder now;
	char addr[sizeof(h->addr)];
	int rc;

	if (!(flags & TIER_RBD_NO_BLOCKLIST)) {
		snprintf(addr, sizeof(addr), "%s", h->addr);
		rc = rados_blocklist_add(cluster, addr, blocklist_s);
		if (rc < 0) {
			snprintf(err, errlen, "cannot blocklist the holder %s of %s: %s (the client "
				 "needs the mon capability 'osd blocklist', which profile rbd "
				 "grants); its lock is left alone", h->addr, oid, strerror(-rc));
			return rc;
		}
		rc = rados_wait_for_latest_osdmap(cluster);
		if (rc < 0) {
			snprintf(err, errlen, "blocklisted %s but cannot get the OSD map: %s",
				 h->addr, strerror(-rc));
			return rc;
		}
	}
	rc = read_holder(io, oid, name, &now);
	if (rc < 0) {
		snprintf(err, errlen, "reading the locker of %s: %s", oid, strerror(-rc));
		return rc;
	}
	if (rc == 0 || strcmp(now.cookie, h->cookie) || strcmp(now.client, h->client))
		return 0;    /* released, or another breaker won: look again */
	rc = rados_break_lock(io, oid, name, h->client, h->cookie);
	if (rc < 0 && rc != -ENOENT) {
		snprintf(err, errlen, "breaking the lock of %s on %s: %s", h->client, oid,
			 strerror(-rc));
		return rc;
	}
	return 0;
}

/*
 * Describe who holds lock `name`; if it is a dead tierd of this host, fence
 * it (blocklist, then break: 1); nobody holds it (1); else -EBUSY with the
 * holder in err and *h filled.
 */
static int inspect_holder(rados_t cluster, rados_ioctx_t io, const char *oid, const char *pool,
			  const char *image, const char *name, struct holder *h,
			  char *err, size_t errlen)
{
	char mine[160];
	int n;

	n = read_holder(io, oid, name, h);
	if (n < 0) {
		snprintf(err, errlen, "lock on %s/%s is busy and its holder cannot be listed: %s",
			 pool, oid, strerror(-n));
		return n;
	}
	if (n == 0)
		return 1;     /* released meanwhile: try again */
	if (cookie_is_stale(h->cookie)) {
		int rc = fence_and_break(cluster, io, oid, name, h, 0, 0, err, errlen);

		if (rc == 0)
			return 1;
		return rc;
	}
	make_ident(mine, sizeof(mine));
	if (strstr(h->cookie, " tierd:") && strcmp(strstr(h->cookie, " tierd:") + 1, mine) == 0)
		snprintf(err, errlen, "image header %s/%s is already open in this process "
			 "(two images name RBD image %s)", pool, oid, image);
	else if (strcmp(name, LOCK_NAME) == 0)
		snprintf(err, errlen,
			 "image is in use: header %s/%s is locked by %s at %s (cookie '%s'); "
			 "one owner per image (rbd lock ls %s/%s; rbd status %s/%s). A tierd "
			 "that names the image serves it in standby and takes it over on its "
			 "first request; to take it from a holder that is gone: tierctl acquire "
			 "IMAGE --force, or by hand: ceph osd blocklist add %s, then "
			 "rbd lock rm %s/%s '%s' %s",
			 pool, oid, h->client, h->addr, h->cookie, pool, image, pool, image,
			 h->addr, pool, image, h->cookie, h->client);
	else
		snprintf(err, errlen,
			 "image is in use: header %s/%s is locked by %s at %s (cookie %s, an "
			 "older tierd's lock '%s'); one tierd per image. If that process is gone, "
			 "run: ceph osd blocklist add %s, then rados -p %s lock break %s %s %s "
			 "--lock-cookie %s",
			 pool, oid, h->client, h->addr, h->cookie, name, h->addr, pool, oid, name,
			 h->client, h->cookie);
	return -EBUSY;
}

static void make_cookie(struct tier_rbd_image *img)
{
	char ident[160];

	make_ident(ident, sizeof(ident));
	snprintf(img->cookie, sizeof(img->cookie), "auto %" PRIu64 " %s",
		 img->watch->handle, ident);
}

/* rados_lock_exclusive of rbd_lock with img's cookie: its result as is. */
static int lock_call(struct tier_rbd_image *img)
{
	char desc[200];

	snprintf(desc, sizeof(desc), "tierd serving this image (pid %ld)", (long)getpid());
	return rados_lock_exclusive(img->watch->io, img->watch->oid, LOCK_NAME, img->cookie, desc,
				    NULL, 0);
}

static int lock_once(struct tier_rbd_image *img)
{
	int rc = lock_call(img);

	return rc == -EEXIST ? 0 : rc;   /* -EEXIST: ours already, with this cookie */
}

static void set_owned(struct tier_rbd_image *img, bool owned)
{
	img->owned = owned;
	atomic_store(&img->watch->owner, owned);
}

static int take_lock(rados_t cluster, rados_ioctx_t io, const char *oid, const char *pool,
		     const char *image, struct tier_rbd_image *img, unsigned flags,
		     char *err, size_t errlen)
{
	struct holder h;
	int rc = -EBUSY;

	make_cookie(img);
	for (int attempt = 0; attempt < 3; attempt++) {
		rc = lock_call(img);
		if (rc == 0)
			break;
		if (rc == -EEXIST) {
			snprintf(err, errlen, "image header %s/%s is already open in this process",
				 pool, oid);
			return -EBUSY;
		}
		if (rc != -EBUSY) {
			snprintf(err, errlen, "cannot lock %s/%s: %s", pool, oid, strerror(-rc));
			return rc;
		}
		rc = inspect_holder(cluster, io, oid, pool, image, LOCK_NAME, &h, err, errlen);
		if (rc == -EBUSY && (flags & TIER_RBD_STANDBY) && !strstr(err, "in this process")) {
			describe_holder(&h, img->holder, sizeof(img->holder));
			err[0] = '\0';
			return 1;     /* standby */
		}
		if (rc < 0)
			return rc;
		rc = -EBUSY;
	}
	if (rc < 0)
		return rc;
	/* an older tierd (lock "tierd") may serve it still */
	rc = inspect_holder(cluster, io, oid, pool, image, LEGACY_LOCK_NAME, &h, err, errlen);
	if (rc < 0) {
		rados_unlock(io, oid, LOCK_NAME, img->cookie);
		return rc;
	}
	return 0;
}

static int watch_header(rados_ioctx_t io, const char *oid, struct tier_rbd_watch *w)
{
	return rados_watch2(io, oid, &w->handle, watch_cb, watch_err_cb, w);
}

/* ---- feature and layout checks ---- */

static int check_features(rados_ioctx_t io, const char *hdr, const char *spec,
			  struct tier_rbd_image *img, char *err, size_t errlen)
{
	uint8_t in[9], buf[64];
	char names[128] = "";
	uint64_t incompat, unit, count;
	struct dec d;
	size_t used = 0;
	int rc;

	enc_u64(in, CEPH_NOSNAP);
	in[8] = 0;      /* read_only = false: we write */
	rc = cls_call(io, hdr, "get_features", in, sizeof(in), buf, sizeof(buf), &d);
	if (rc < 0 || (rc = dec_u64(&d, &img->features)) < 0 || (rc = dec_u64(&d, &incompat)) < 0) {
		snprintf(err, errlen, "%s: get_features: %s", spec, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < sizeof(disable_order) / sizeof(disable_order[0]); i++) {
		if (img->features & disable_order[i].bit)
			used += (size_t)snprintf(names + used, sizeof(names) - used, " %s",
						 disable_order[i].name);
	}
	if (names[0]) {
		snprintf(err, errlen,
			 "image %s has features tierd cannot keep right (only librbd maintains "
			 "them):%s; run: rbd feature disable %s%s",
			 spec, names, spec, names);
		return -ENOTSUP;
	}
	if (img->features & F_DATA_POOL) {
		snprintf(err, errlen, "image %s keeps its data in a separate data pool; tierd "
			 "serves images whose data objects are in the image's pool "
			 "(copy it: rbd cp %s NEWNAME)", spec, spec);
		return -ENOTSUP;
	}
	if (img->features & (F_MIGRATING | F_NON_PRIMARY | F_DIRTY_CACHE | ~FEATURES_KNOWN)) {
		snprintf(err, errlen, "image %s has features tierd cannot serve (0x%" PRIx64
			 ": migrating, non-primary, dirty-cache or unknown)", spec,
			 (uint64_t)(img->features & (F_MIGRATING | F_NON_PRIMARY |
						     F_DIRTY_CACHE | ~FEATURES_KNOWN)));
		return -ENOTSUP;
	}
	if (img->features & F_STRIPINGV2) {
		rc = cls_call(io, hdr, "get_stripe_unit_count", NULL, 0, buf, sizeof(buf), &d);
		if (rc < 0 || (rc = dec_u64(&d, &unit)) < 0 || (rc = dec_u64(&d, &count)) < 0) {
			snprintf(err, errlen, "%s: get_stripe_unit_count: %s", spec, strerror(-rc));
			return rc;
		}
		if (unit != 1ull << img->order || count != 1) {
			snprintf(err, errlen, "image %s uses non-default striping (stripe unit %"
				 PRIu64 ", count %" PRIu64 "); tierd needs stripe unit = object "
				 "size and count 1 (copy it: rbd cp %s NEWNAME)",
				 spec, unit, count, spec);
			return -ENOTSUP;
		}
	}
	return 0;
}

/* Clones read through to their parent and snapshots need a snap context on
 * every write: both are librbd's business, so refuse them. */
static int check_layout(rados_ioctx_t io, const char *hdr, const char *spec,
			char *err, size_t errlen)
{
	uint8_t in[8], buf[512];
	uint64_t seq, parent_pool;
	uint32_t nsnaps;
	struct dec d;
	int rc;

	enc_u64(in, CEPH_NOSNAP);
	rc = cls_call(io, hdr, "get_parent", in, sizeof(in), buf, sizeof(buf), &d);
	if (rc == -EXDEV || (rc == 0 && dec_u64(&d, &parent_pool) == 0 &&
			     parent_pool != (uint64_t)-1)) {
		snprintf(err, errlen, "image %s is a clone; run: rbd flatten %s", spec, spec);
		return -ENOTSUP;
	}
	if (rc < 0 && rc != -ENOEXEC && rc != -EOPNOTSUPP) {
		snprintf(err, errlen, "%s: get_parent: %s", spec, strerror(-rc));
		return rc;
	}
	rc = cls_call(io, hdr, "get_snapcontext", NULL, 0, buf, sizeof(buf), &d);
	if (rc < 0 || (rc = dec_u64(&d, &seq)) < 0 || (rc = dec_u32(&d, &nsnaps)) < 0) {
		if (rc == -ERANGE)
			nsnaps = UINT32_MAX;   /* more snapshots than fit in buf */
		else {
			snprintf(err, errlen, "%s: get_snapcontext: %s", spec, strerror(-rc));
			return rc;
		}
	}
	if (nsnaps) {
		snprintf(err, errlen, "image %s has snapshots, which tierd's writes would "
			 "corrupt; remove them: rbd snap purge %s", spec, spec);
		return -ENOTSUP;
	}
	return 0;
}

static int resolve(rados_ioctx_t io, const char *pool, const char *image,
		   struct tier_rbd_image *img, char *hdr, size_t hdrlen, char *err, size_t errlen)
{
	char oid[160], spec[300];
	uint8_t in[8], buf[512];
	struct dec d;
	uint8_t order;
	int rc;

	snprintf(spec, sizeof(spec), "%s/%s", pool, image);
	snprintf(oid, sizeof(oid), "rbd_id.%s", image);
	rc = rados_read(io, oid, (char *)buf, sizeof(buf), 0);
	if (rc == -ENOENT) {
		snprintf(err, errlen, "no RBD format-2 image %s (object %s not found)", spec, oid);
		return -ENOENT;
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s: reading %s: %s", spec, oid, strerror(-rc));
		return rc;
	}
	d.p = buf;
	d.left = (size_t)rc;
	rc = dec_str(&d, img->id, sizeof(img->id));
	if (rc < 0 || !img->id[0]) {
		snprintf(err, errlen, "%s: %s does not hold an image id", spec, oid);
		return -EIO;
	}
	snprintf(hdr, hdrlen, "rbd_header.%s", img->id);

	enc_u64(in, CEPH_NOSNAP);
	rc = cls_call(io, hdr, "get_size", in, sizeof(in), buf, sizeof(buf), &d);
	if (rc < 0 || (rc = dec_u8(&d, &order)) < 0 || (rc = dec_u64(&d, &img->size)) < 0) {
		snprintf(err, errlen, "%s: get_size on %s: %s", spec, hdr, strerror(-rc));
		return rc;
	}
	if (order < 12 || order > 26) {
		snprintf(err, errlen, "%s: object order %u outside 12..26", spec, order);
		return -ENOTSUP;
	}
	img->order = order;
	rc = cls_call(io, hdr, "get_object_prefix", NULL, 0, buf, sizeof(buf), &d);
	if (rc == 0)
		rc = dec_str(&d, img->object_prefix, sizeof(img->object_prefix));
	if (rc < 0) {
		snprintf(err, errlen, "%s: get_object_prefix: %s", spec, strerror(-rc));
		return rc;
	}
	rc = check_features(io, hdr, spec, img, err, errlen);
	if (rc < 0)
		return rc;
	return check_layout(io, hdr, spec, err, errlen);
}

int tier_rbd_open(struct tier_rados *r, const char *pool, const char *image,
		  struct tier_rbd_image *out, char *err, size_t errlen)
{
	return tier_rbd_open2(r, pool, image, 0, out, err, errlen);
}

int tier_rbd_open2(struct tier_rados *r, const char *pool, const char *image, unsigned flags,
		   struct tier_rbd_image *out, char *err, size_t errlen)
{
	struct tier_rbd_image img;
	struct tier_rbd_watch *w = NULL;
	rados_ioctx_t io = NULL;
	char hdr[96];
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (!r || !pool || !image || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	memset(&img, 0, sizeof(img));
	if (strlen(image) >= sizeof(img.name)) {
		snprintf(err, errlen, "image name too long: %s", image);
		return -ENAMETOOLONG;
	}
	snprintf(img.name, sizeof(img.name), "%s", image);
	rc = rados_ioctx_create(tier__rados_cluster(r), pool, &io);
	if (rc < 0) {
		io = NULL;
		snprintf(err, errlen, "pool %s: %s", pool, strerror(-rc));
		goto out;
	}
	rc = resolve(io, pool, image, &img, hdr, sizeof(hdr), err, errlen);
	if (rc < 0)
		goto out;
	w = calloc(1, sizeof(*w));
	if (!w) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s/%s: out of memory", pool, image);
		goto out;
	}
	w->io = io;
	w->cluster = tier__rados_cluster(r);
	snprintf(w->oid, sizeof(w->oid), "%s", hdr);
	rc = watch_header(io, hdr, w);
	if (rc < 0) {
		snprintf(err, errlen, "cannot watch %s/%s: %s", pool, hdr, strerror(-rc));
		free(w);
		w = NULL;
		goto out;
	}
	img.watch = w;
	img.client_id = rados_get_instance_id(tier__rados_cluster(r));
	rc = take_lock(w->cluster, io, hdr, pool, image, &img, flags, err, errlen);
	if (rc < 0)
		goto out;
	set_owned(&img, rc == 0);
	*out = img;
	return 0;
out:
	if (w) {
		rados_unwatch2(io, w->handle);
		rados_watch_flush(tier__rados_cluster(r));
		free(w);
	}
	if (io)
		rados_ioctx_destroy(io);
	return rc;
}

void tier_rbd_close(struct tier_rados *r, const char *pool, struct tier_rbd_image *img)
{
	struct tier_rbd_watch *w;

	(void)pool;
	if (!r || !img || !img->watch)
		return;
	w = img->watch;
	if (img->owned)
		rados_unlock(w->io, w->oid, LOCK_NAME, img->cookie);
	rados_unwatch2(w->io, w->handle);
	rados_watch_flush(tier__rados_cluster(r));
	rados_ioctx_destroy(w->io);
	free(w);
	img->watch = NULL;
}

/* ---- handoff and takeover (blocking: a worker thread's) ---- */

void tier_rbd_set_events(struct tier_rbd_image *img, bool handoff,
			 void (*event)(void *arg, int ev), void *arg)
{
	if (!img || !img->watch)
		return;
	atomic_store(&img->watch->event, NULL);
	atomic_store(&img->watch->event_arg, arg);
	atomic_store(&img->watch->event, event);
	atomic_store(&img->watch->handoff, handoff);
}

void tier_rbd_set_unsafe(struct tier_rbd_image *img)
{
	if (img && img->watch)
		atomic_store(&img->watch->unsafe, true);
}

void tier_rbd_flush_events(struct tier_rados *r)
{
	if (r)
		rados_watch_flush(tier__rados_cluster(r));
}

int tier_rbd_take_request(struct tier_rbd_image *img)
{
	return img && img->watch && atomic_exchange(&img->watch->requests, 0) > 0;
}

int tier_rbd_take_watch_error(struct tier_rbd_image *img)
{
	return img && img->watch ? atomic_exchange(&img->watch->werr, 0) : 0;
}

int tier_rbd_watch_age_ms(struct tier_rbd_image *img)
{
	if (!img || !img->watch)
		return -EINVAL;
	return rados_watch_check(img->watch->io, img->watch->handle);
}

int tier_rbd_rewatch(struct tier_rbd_image *img)
{
	struct tier_rbd_watch *w = img ? img->watch : NULL;
	uint64_t h;
	int rc;

	if (!w)
		return -EINVAL;
	rados_unwatch2(w->io, w->handle);
	rc = rados_watch2(w->io, w->oid, &h, watch_cb, watch_err_cb, w);
	if (rc < 0)
		return rc;
	/* the lock keeps the first handle in its cookie: rbd status shows the new one */
	w->handle = h;
	return 0;
}

int tier_rbd_check_lock(struct tier_rbd_image *img, char *err, size_t errlen)
{
	struct holder h;
	int rc;

	if (!img || !img->watch)
		return -EINVAL;
	rc = read_holder(img->watch->io, img->watch->oid, LOCK_NAME, &h);
	if (rc < 0) {
		snprintf(err, errlen, "reading the locker of %s: %s", img->watch->oid,
			 strerror(-rc));
		return rc;
	}
	if (rc == 1 && !strcmp(h.cookie, img->cookie) &&
	    h.gid == rados_get_instance_id(img->watch->cluster))
		return 1;
	if (rc == 1)
		describe_holder(&h, img->holder, sizeof(img->holder));
	snprintf(err, errlen, "the lock on %s is %s%s", img->watch->oid, rc ? "held by " : "free",
		 rc ? img->holder : "");
	return 0;
}

int tier_rbd_release(struct tier_rbd_image *img)
{
	int rc;

	if (!img || !img->watch)
		return -EINVAL;
	if (!img->owned)
		return 0;
	rc = rados_unlock(img->watch->io, img->watch->oid, LOCK_NAME, img->cookie);
	if (rc == 0 || rc == -ENOENT)
		set_owned(img, false);    /* until then peers are told "releasing" */
	return rc == -ENOENT ? 0 : rc;
}

enum ask { ASK_RELEASING, ASK_NEVER, ASK_SILENT, ASK_GONE, ASK_FENCE };

/* Ask the holder (gid) to release: what its watch answered, if it has one. */
static enum ask ask_holder(struct tier_rbd_watch *w, uint64_t gid, uint32_t notify_ms)
{
	struct notify_ack_t *acks = NULL;
	struct notify_timeout_t *tos = NULL;
	size_t n_acks = 0, n_tos = 0, len = 0;
	char *reply = NULL;
	enum ask a = ASK_GONE;

	rados_notify2(w->io, w->oid, REQ_PAYLOAD, (int)strlen(REQ_PAYLOAD), notify_ms, &reply,
		      &len);
	if (!reply)
		return ASK_SILENT;    /* no answer at all: not proof that it is gone */
	if (rados_decode_notify_response(reply, len, &acks, &n_acks, &tos, &n_tos) < 0) {
		rados_buffer_free(reply);
		return ASK_SILENT;
	}
	for (size_t i = 0; i < n_acks; i++) {
		if (acks[i].notifier_id != gid)
			continue;
		if (acks[i].payload_len == strlen(ANS_NEVER) &&
		    !memcmp(acks[i].payload, ANS_NEVER, acks[i].payload_len))
			a = ASK_NEVER;
		else if (acks[i].payload_len == strlen(ANS_FENCE) &&
			 !memcmp(acks[i].payload, ANS_FENCE, acks[i].payload_len))
			a = ASK_FENCE;
		else if (acks[i].payload_len == strlen(ANS_RELEASING) &&
			 !memcmp(acks[i].payload, ANS_RELEASING, acks[i].payload_len))
			a = ASK_RELEASING;
		else if (a == ASK_GONE)
			a = ASK_SILENT;   /* a watcher of that client, not a tierd owner */
	}
	for (size_t i = 0; i < n_tos; i++)
		if (tos[i].notifier_id == gid && a == ASK_GONE)
			a = ASK_SILENT;    /* its watch is there, it does not answer (hung?) */
	rados_free_notify_response(acks, n_acks, tos);
	rados_buffer_free(reply);
	return a;
}

#define RELEASE_WAIT_MS 10000   /* a holder that said "releasing" gets this long */

int tier_rbd_acquire(struct tier_rados *r, struct tier_rbd_image *img, unsigned flags,
		     uint32_t notify_ms, uint32_t blocklist_s, char *err, size_t errlen)
{
	struct tier_rbd_watch *w = img ? img->watch : NULL;
	struct holder h;
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (!r || !w)
		return -EINVAL;
	if (img->owned)
		return 0;
	for (int round = 0; round < 4; round++) {
		bool fence = (flags & TIER_RBD_FORCE) != 0;

		rc = lock_once(img);
		if (rc == 0) {
			set_owned(img, true);
			return 0;
		}
		if (rc != -EBUSY) {
			snprintf(err, errlen, "cannot lock %s: %s", w->oid, strerror(-rc));
			return rc;
		}
		rc = read_holder(w->io, w->oid, LOCK_NAME, &h);
		if (rc < 0) {
			snprintf(err, errlen, "reading the locker of %s: %s", w->oid, strerror(-rc));
			return rc;
		}
		if (rc == 0)
			continue;       /* let go meanwhile */
		describe_holder(&h, img->holder, sizeof(img->holder));
		if (cookie_is_stale(h.cookie))
			fence = true;   /* a tierd of this host that no longer runs */
		if (!fence) {
			enum ask a = ask_holder(w, h.gid, notify_ms);

			if (a == ASK_NEVER) {
				snprintf(err, errlen, "%s holds %s and does not hand it over "
					 "(lock_handoff = never there)", img->holder, w->oid);
				return -EPERM;
			}
			if (a == ASK_SILENT) {
				snprintf(err, errlen, "%s holds %s and does not answer; its watch "
					 "is still there (it takes over once the watch times out, "
					 "osd_client_watch_timeout)", img->holder, w->oid);
				return -EAGAIN;
			}
			if (a == ASK_RELEASING) {
				for (int t = 0; t < RELEASE_WAIT_MS / 20; t++) {
					rc = lock_once(img);
					if (rc == 0) {
						set_owned(img, true);
						return 0;
					}
					if (rc != -EBUSY) {
						snprintf(err, errlen, "cannot lock %s: %s", w->oid,
							 strerror(-rc));
						return rc;
					}
					usleep(20000);
				}
				snprintf(err, errlen, "%s said it releases %s but still holds it "
					 "after %d ms", img->holder, w->oid, RELEASE_WAIT_MS);
				return -EAGAIN;
			}
			/*
			 * ASK_GONE: the holder has no watch on the header: dead, cut
			 * off, or re-registering it (an OSD restart, a remap): ask
			 * once more a second later before fencing a whole client.
			 * ASK_FENCE: it says its writes may still land: fence it.
			 */
			if (a == ASK_GONE) {
				usleep(1000000);
				a = ask_holder(w, h.gid, notify_ms);
			}
			if (a != ASK_GONE && a != ASK_FENCE) {
				snprintf(err, errlen, "%s holds %s; its watch came back", img->holder,
					 w->oid);
				return -EAGAIN;
			}
		}
		rc = fence_and_break(w->cluster, w->io, w->oid, LOCK_NAME, &h, flags, blocklist_s,
				     err, errlen);
		if (rc < 0)
			return rc;
	}
	snprintf(err, errlen, "the lock on %s changed hands too often; try again", w->oid);
	return -EAGAIN;
}

/*
 * Does any client watch the header?  A notify nobody acts on ("tierd-who
 * v1": tierds and librbd acknowledge what they do not know): its answers
 * and timeouts name every watcher.
 */
#define WHO_PAYLOAD "tierd-who v1"
static bool header_watched(rados_ioctx_t io, const char *oid)
{
	struct notify_ack_t *acks = NULL;
	struct notify_timeout_t *tos = NULL;
	size_t n_acks = 0, n_tos = 0, len = 0;
	char *reply = NULL;
	int rc;

	rc = rados_notify2(io, oid, WHO_PAYLOAD, (int)strlen(WHO_PAYLOAD), 3000, &reply, &len);
	if (rc == -ENOENT)
		return false;   /* no such image */
	if (!reply)
		return rc != 0;   /* cannot tell: say watched (what is left alone is safe) */
	if (rados_decode_notify_response(reply, len, &acks, &n_acks, &tos, &n_tos) < 0) {
		rados_buffer_free(reply);
		return true;
	}
	rados_free_notify_response(acks, n_acks, tos);
	rados_buffer_free(reply);
	return n_acks + n_tos > 0;
}

int tier_rbd_prefix_owner(struct tier_rados *r, const char *pool, const char *prefix,
			  char *who, size_t wholen)
{
	rados_ioctx_t io = NULL;
	struct holder h;
	char oid[160];
	int rc;

	if (!r || !pool || !prefix || strncmp(prefix, "rbd_data.", 9))
		return 0;
	snprintf(oid, sizeof(oid), "rbd_header.%s", prefix + 9);
	rc = rados_ioctx_create(tier__rados_cluster(r), pool, &io);
	if (rc < 0)
		return rc;
	rc = read_holder(io, oid, LOCK_NAME, &h);
	if (rc == 1 && h.gid == rados_get_instance_id(tier__rados_cluster(r)))
		rc = 0;
	else if (rc == 1 && who)
		describe_holder(&h, who, wholen);
	else if (rc == 0 && header_watched(io, oid)) {
		/* unlocked between two tierds' handoff (or an RBD client has it open) */
		if (who)
			snprintf(who, wholen, "nobody (its header is watched: a handoff between "
				 "tierds, or an RBD client)");
		rc = 1;
	}
	rados_ioctx_destroy(io);
	return rc;
}
