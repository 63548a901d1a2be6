/* SPDX-License-Identifier: MIT */
/*
 * libtier/hash.h (internal) - the one 64-bit integer mixer: the splitmix64
 * finaliser (full avalanche on all 64 bits).  Its values are persisted: the
 * hitset bloom filters archived in the cache pool are indexed by it and
 * reloaded after a restart, so it must never change.  Hash tables (the
 * object map, the ghost queues of policy_ghost.c, tier-sim's OPT id map)
 * use it too.  String keys have their own hash, tier__hash_str
 * (store/store.c).
 */
#ifndef TIER_HASH_H
#define TIER_HASH_H

#include <stdint.h>

static inline uint64_t tier__mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

#endif
