/* SPDX-License-Identifier: MIT */
/* libtier/store/store_internal.h - shared between the wrapper, the queue and backends. */
#ifndef TIER_STORE_INTERNAL_H
#define TIER_STORE_INTERNAL_H

#include <stdint.h>
#include "tier/store.h"

/* Owner thread, from tier_cq_drain, before the op's callback: counters. */
void tier__store_finish(struct tier_store_op *op);
/* Latency the fault settings add to each completion (us); backends in
 * virtual time add it to the due time, threaded ones sleep it. */
uint32_t tier__store_added_latency_us(const struct tier_store *st);
uint64_t tier__now_ns(void);          /* CLOCK_MONOTONIC */
uint64_t tier__realtime_ns(void);     /* CLOCK_REALTIME */
uint64_t tier__hash_str(const char *s);
/* The backend pointer given to tier_store_create (for backend-specific calls). */
void *tier__store_backend(const struct tier_store *st);

#endif
