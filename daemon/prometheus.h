/* SPDX-License-Identifier: MIT */
/*
 * daemon/prometheus.h - an optional Prometheus text endpoint ([global]
 * prometheus = HOST:PORT): GET /metrics gets the engine's, the images' and
 * the pools' counters in the text exposition format.  Runs on the daemon's
 * libuv loop.
 */
#ifndef TIERD_PROMETHEUS_H
#define TIERD_PROMETHEUS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "tier/engine.h"

struct tierd_prom;
struct tierd_own_info;
/* An RBD image's owner state (daemon/owner.h); -ENOENT: not an RBD image. */
typedef int (*tierd_prom_owner_fn)(void *arg, const char *image, struct tierd_own_info *out);

/* Listen on "HOST:PORT" (IPv4 or [IPv6]:PORT). -errno on failure.
 * store (NULL = no pool metrics) gives the base (0) or cache (1) store. */
int tierd_prom_start(uv_loop_t *loop, const char *addr,
		     struct tier_engine *(*engine)(void *arg),
		     struct tier_store *(*store)(void *arg, int which), void *arg,
		     struct tierd_prom **out);
/* A scrape not read and answered within ms is closed (0 = 10 s). NULL ok. */
void tierd_prom_set_timeout(struct tierd_prom *p, uint64_t ms);
/* Close the listener and connections; frees after the close callbacks. NULL ok. */
void tierd_prom_stop(struct tierd_prom *p);
/* The exposition text for e and its pools (either NULL: none) (malloc'd;
 * caller frees). NULL on ENOMEM. */
char *tierd_prom_render(struct tier_engine *e, struct tier_store *const pools[2], size_t *len);
/* The same with the owner metrics (tierd_image_owned, _fenced, ...) when owner is set. */
char *tierd_prom_render2(struct tier_engine *e, struct tier_store *const pools[2],
			 tierd_prom_owner_fn owner, void *owner_arg, size_t *len);
/* Scrapes show the owner metrics from now on (the arg is tierd_prom_start's). */
void tierd_prom_set_owner(struct tierd_prom *p, tierd_prom_owner_fn owner);

#endif
