/* SPDX-License-Identifier: MIT */
/*
 * daemon/owner.h - each RBD image's owner state across several tierds
 * (daemon/owner.c; docs/OPERATIONS.md "Several daemons" and "Failover").
 * Loop thread only.
 */
#ifndef TIERD_OWNER_H
#define TIERD_OWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "tier/engine.h"

#define TIERD_OWNERS_MAX 64

struct nbd_server;
struct tier_image;
struct tier_rados;
struct tier_rbd_image;
struct tier_store;

enum tierd_own {
	TIERD_OWN_OWNED, TIERD_OWN_STANDBY, TIERD_OWN_ACQUIRING, TIERD_OWN_RELEASING,
	TIERD_OWN_CHECKING, TIERD_OWN_FENCED,
};

struct tierd_owner_ctx {
	uv_loop_t *loop;
	struct tier_rados *rados;
	struct tier_store *base, *cache;
	struct nbd_server *nbd;
	tier_log_fn log;
	void *log_arg;
	bool no_blocklist;     /* tests' negative control only (TIERD_TEST_NO_BLOCKLIST=1) */
	bool no_self_fence;    /* tests only (TIERD_TEST_NO_SELF_FENCE=1): no watch-error
				* hold, no lease: the blocklist alone fences */
};

struct tierd_own_info {
	enum tierd_own state;
	bool lock_handoff;         /* on_request */
	uint64_t handoffs, takeovers;
	bool write_timed_out;      /* never unlocked: only a fence takes it (tier_rbd_set_unsafe) */
	char holder[480];          /* owned: our cookie; else who holds the lock */
};

struct tierd_owners;

int tierd_owners_create(const struct tierd_owner_ctx *c, struct tierd_owners **out);
/* After the image is served (standby when rb->owned is false). */
int tierd_owners_add(struct tierd_owners *os, struct tier_rbd_image *rb, struct tier_image *img,
		     bool handoff);
/* Each tick, and on every event: the state machine. NULL ok. */
void tierd_owners_tick(struct tierd_owners *os);
/* tierctl acquire IMAGE [--force] / tierctl release IMAGE: 0 or -errno, msg set. */
int tierd_owners_request(struct tierd_owners *os, const char *name, bool acquire, bool force,
			 char *msg, size_t len);
/* -ENOENT: not an RBD image of this tierd. */
int tierd_owners_state(struct tierd_owners *os, const char *name, struct tierd_own_info *out);
size_t tierd_owners_count(const struct tierd_owners *os, enum tierd_own s);
static inline const char *tierd_own_name(enum tierd_own s)
{
	static const char *const names[] = {
		"owned", "standby", "acquiring", "releasing", "checking", "fenced",
	};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}
/* A worker job in flight (shutdown waits for it). */
bool tierd_owners_busy(const struct tierd_owners *os);
/* Before the stores go: no watch event reaches the owners after; closes the wake handle. */
void tierd_owners_stop(struct tierd_owners *os);
void tierd_owners_destroy(struct tierd_owners *os);    /* after the loop ended; NULL ok */

#endif
