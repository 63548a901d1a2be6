/* SPDX-License-Identifier: MIT */
/*
 * daemon/admin.h - the admin socket: a unix socket (mode 0600), one command
 * per line, one JSON answer per command.  Runs on the daemon's libuv loop.
 */
#ifndef TIERD_ADMIN_H
#define TIERD_ADMIN_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/config.h"
#include "tier/engine.h"

/* What the admin socket needs from the daemon; all called on the loop thread. */
struct tierd_own_info;

struct tierd_admin_hooks {
	void *arg;
	struct tier_engine *(*engine)(void *arg);
	const struct tierd_config *(*config)(void *arg);
	/* Re-read the config file as SIGHUP does; 0 or -errno with a message. */
	int (*reload)(void *arg, char *err, size_t errlen);
	/* Apply new tier params (after `config set`); 0 or -errno with a message. */
	int (*set_params)(void *arg, const struct tier_params *p, char *err, size_t errlen);
	/* Optional (NULL = none): the base (which 0) or cache (1) store, for the
	 * per-pool counters in `perf dump`. */
	struct tier_store *(*store)(void *arg, int which);
	/* Optional: the busy-poll of the daemon's loop (which 0) or of the NBD
	 * I/O thread's (1; NULL with threads = 1), for `perf dump`. */
	const struct tierd_busy_poll *(*busy_poll)(void *arg, int which);
	/* Optional: where the audit lines of state-changing commands go (daemon/log.c). */
	tier_log_fn log;
	/* Optional (rados): an RBD image's owner state (-ENOENT: none), and
	 * `acquire IMAGE [--force]` / `release IMAGE` (daemon/owner.c). */
	int (*owner)(void *arg, const char *image, struct tierd_own_info *out);
	int (*own_request)(void *arg, const char *image, bool acquire, bool force,
			   char *msg, size_t len);
};

struct tierd_admin;
struct tierd_busy_poll;

/* Listen on path (replacing a stale socket). -errno on failure. */
int tierd_admin_start(uv_loop_t *loop, const char *path,
		      const struct tierd_admin_hooks *hooks, struct tierd_admin **out);
/* A connection idle (no command, no answer read) this long is closed;
 * 0 = the default, 10 s. */
void tierd_admin_set_timeout(struct tierd_admin *a, uint64_t ms);
/* Close the listener and every admin connection; frees after the close callbacks. */
void tierd_admin_stop(struct tierd_admin *a);

#endif
