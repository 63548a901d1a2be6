/* SPDX-License-Identifier: MIT */
/*
 * tier/rados.h - the RADOS backend (librados) and RBD image resolution.
 * Only libtier/store/rados.c and libtier/rbd.c include librados.h.
 * Available when config.h has HAVE_RADOS=1.
 */
#ifndef TIER_RADOS_H
#define TIER_RADOS_H

#include <stdint.h>
#include <stddef.h>

#include "tier/store.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tier_rados_opts {
	const char *conf;          /* ceph.conf path, NULL = librados default */
	const char *client_name;   /* "client.admin" */
	const char *keyring;       /* NULL = from conf */
	uint64_t op_timeout_ms;    /* 0 = librados default */
};

struct tier_rados;   /* one cluster connection, shared by the pools */

/* Connect; on failure -errno and a message naming the monitors and the cephx id. */
int tier_rados_connect(const struct tier_rados_opts *o, struct tier_rados **out,
		       char *err, size_t errlen);
void tier_rados_disconnect(struct tier_rados *r);   /* NULL ok; pools closed first */

/* A pool (optionally a namespace) as a store.  -ENOENT if the pool does not exist. */
int tier_store_rados_create(struct tier_rados *r, const char *pool, const char *ns,
			    struct tier_cq *cq, struct tier_store **out);

/* An RBD format-2 image of a pool, resolved through the rbd object class. */
struct tier_rbd_watch;
struct tier_rbd_image {
	char name[128];
	char id[64];
	char object_prefix[128];   /* "rbd_data.<id>" */
	uint64_t size;
	unsigned order;            /* object size = 1 << order */
	uint64_t features;
	/* while open: the header lock and watch, as `rbd lock ls` / `rbd status` show them */
	char cookie[200];          /* "auto <watch handle> tierd:<host>:<boot>:<pidns>:<pid>" */
	uint64_t client_id;        /* the lock holder and watcher: client.<client_id> */
	struct tier_rbd_watch *watch;
	bool owned;                /* the lock is ours (tier_rbd_open2 may leave it to another) */
	char holder[480];          /* not owned: who holds it, for logs and `tierctl images` */
};
/*
 * Resolve image in pool, watch its header (rados_watch2, so `rbd status`
 * lists tierd as a watcher) and take the exclusive lock "rbd_lock" on it
 * with an "auto <watch handle> ..." cookie (so `rbd lock ls` shows who
 * serves it, as it shows librbd's exclusive lock).  -ENOENT (no
 * such image), -ENOTSUP (a feature tierd cannot keep right; err says which
 * `rbd feature disable` to run), -EBUSY (locked; err names the holder).
 * Blocking: call at start-up only.
 */
int tier_rbd_open(struct tier_rados *r, const char *pool, const char *image,
		  struct tier_rbd_image *out, char *err, size_t errlen);
/*
 * Handoff and takeover (docs/DURABILITY.md "Handoff, takeover and fencing").
 * tier_rbd_open2 with TIER_RBD_STANDBY: an image whose lock a live holder
 * keeps opens all the same, watched but not owned (img->owned false,
 * img->holder names it).  The rest block (a worker thread's, or start-up).
 *
 * tier_rbd_acquire asks the holder to hand the image over (a notify on the
 * header that a tierd owner answers "releasing", "never" or "fence-me"), and takes the
 * lock once it is free.  A holder whose watch is gone (dead, or hung past
 * osd_client_watch_timeout), one that answers "fence-me", a dead tierd of this host, or any holder with
 * TIER_RBD_FORCE, is fenced first: its address blocklisted for
 * `blocklist_s`, the OSD map that carries it awaited, the locker read again
 * (another breaker may have won), and only then its lock broken.  Never a
 * break without the blocklist, but with TIER_RBD_NO_BLOCKLIST (tests' negative
 * control only).  0: owned; -EAGAIN: the holder lives and has not let go yet
 * (asked, or its watch still there): ask again later; -EPERM: its
 * lock_handoff is never; other -errno with err set.
 */
#define TIER_RBD_STANDBY      1u
#define TIER_RBD_FORCE        2u
#define TIER_RBD_NO_BLOCKLIST 4u
int tier_rbd_open2(struct tier_rados *r, const char *pool, const char *image, unsigned flags,
		   struct tier_rbd_image *out, char *err, size_t errlen);
int tier_rbd_acquire(struct tier_rados *r, struct tier_rbd_image *img, unsigned flags,
		     uint32_t notify_ms, uint32_t blocklist_s, char *err, size_t errlen);
/* Unlock (the owner's handoff); the watch stays.  0 or -errno. */
int tier_rbd_release(struct tier_rbd_image *img);
/* 1 the lock is ours, 0 another's or nobody's, -errno (-ESHUTDOWN: blocklisted). */
int tier_rbd_check_lock(struct tier_rbd_image *img, char *err, size_t errlen);
/* Watch the header again after a watch error (blocking).  0 or -errno. */
int tier_rbd_rewatch(struct tier_rbd_image *img);
/*
 * The owner's side, from the watch's own thread: `event` runs there (any
 * thread: record and wake, nothing else) on a release request
 * (TIER_RBD_EV_REQUEST) and on a watch error (TIER_RBD_EV_WATCH_ERR).
 * `handoff` false answers requests "never" (lock_handoff = never).
 */
enum { TIER_RBD_EV_REQUEST = 1, TIER_RBD_EV_WATCH_ERR = 2 };
void tier_rbd_set_events(struct tier_rbd_image *img, bool handoff,
			 void (*event)(void *arg, int ev), void *arg);
/*
 * The owner cannot hand the image over safely (a write of it timed out and
 * may still reach the pool): release requests are answered "fence-me", and
 * the asker blocklists this client before it breaks the lock.  Sticky.
 */
void tier_rbd_set_unsafe(struct tier_rbd_image *img);
/* Wait until no watch callback runs (after tier_rbd_set_events(.., NULL, ..)). */
void tier_rbd_flush_events(struct tier_rados *r);
/* 1 once per release request since the last call (the owner's), else 0. */
int tier_rbd_take_request(struct tier_rbd_image *img);
/* The error of a watch error since the last call (0: none). */
int tier_rbd_take_watch_error(struct tier_rbd_image *img);
/* Milliseconds since the OSD last confirmed the watch, or -errno. */
int tier_rbd_watch_age_ms(struct tier_rbd_image *img);
/*
 * Whose are the objects "<prefix>.*" of pool's RBD image with that object
 * prefix ("rbd_data.<id>")?  1: the image's header is locked by another
 * client (who names it), or unlocked but watched (a handoff between tierds
 * at that instant, or an RBD client): another serves it, or will take it
 * over; 0: no such image, or nobody locks or watches it; -errno.
 */
int tier_rbd_prefix_owner(struct tier_rados *r, const char *pool, const char *prefix,
			  char *who, size_t wholen);
/* Release the lock and the watch taken by tier_rbd_open. */
void tier_rbd_close(struct tier_rados *r, const char *pool, struct tier_rbd_image *img);

#ifdef __cplusplus
}
#endif
#endif
