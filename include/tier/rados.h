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
	char cookie[200];          /* "auto <watch handle> tierd:<host>:<boot>:<pid>" */
	uint64_t client_id;        /* the lock holder and watcher: client.<client_id> */
	struct tier_rbd_watch *watch;
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
 * Re-establish a header watch that librados reported lost (call now and
 * then from the owning thread; cheap when nothing was lost).  1 if it
 * re-watched, 0 if nothing to do, -errno if re-watching failed (retried at
 * the next call).
 */
int tier_rbd_keep_watch(struct tier_rbd_image *img);
/* Release the lock and the watch taken by tier_rbd_open. */
void tier_rbd_close(struct tier_rados *r, const char *pool, struct tier_rbd_image *img);

#ifdef __cplusplus
}
#endif
#endif
