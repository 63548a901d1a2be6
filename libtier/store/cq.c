/* SPDX-License-Identifier: MIT */
/*
 * libtier/store/cq.c - the completion queue between store backends and the
 * thread that owns the engine.  Backend threads only push finished ops and
 * wake the owner; the owner runs every callback in tier_cq_drain().  It must
 * never run a callback on a foreign thread or hold its lock while calling out.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "tier/store.h"
#include "store_internal.h"

struct tier_cq {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct tier_store_op *head, *tail;
	void (*notify)(void *arg);
	void *notify_arg;
};

int tier_cq_create(void (*notify)(void *arg), void *arg, struct tier_cq **out)
{
	struct tier_cq *cq = NULL;
	pthread_condattr_t ca;

	*out = NULL;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	pthread_mutex_init(&cq->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cq->cond, &ca);
	pthread_condattr_destroy(&ca);
	cq->notify = notify;
	cq->notify_arg = arg;
	*out = cq;
	return 0;
}

void tier_cq_destroy(struct tier_cq *cq)
{
	if (!cq)
		return;
	/* wait out a producer still inside tier__cq_push */
	pthread_mutex_lock(&cq->lock);
	pthread_mutex_unlock(&cq->lock);
	pthread_mutex_destroy(&cq->lock);
	pthread_cond_destroy(&cq->cond);
	free(cq);
}

void tier__cq_push(struct tier_cq *cq, struct tier_store_op *op)
{
	int was_empty;

	op->q_next = NULL;
	pthread_mutex_lock(&cq->lock);
	was_empty = cq->head == NULL;
	if (cq->tail)
		cq->tail->q_next = op;
	else
		cq->head = op;
	cq->tail = op;
	if (was_empty) {
		pthread_cond_broadcast(&cq->cond);
		/*
		 * uv_async_send coalesces, so one wake per empty->non-empty edge
		 * is enough.  Called under the lock: once we unlock, the owner may
		 * drain this op and destroy the queue.
		 */
		if (cq->notify)
			cq->notify(cq->notify_arg);
	}
	pthread_mutex_unlock(&cq->lock);
}

/* Callbacks may submit ops that complete at once (mem store); keep draining,
 * but give the caller's loop a chance to run after a bounded number of rounds. */
#define DRAIN_MAX_ROUNDS 64

size_t tier_cq_drain(struct tier_cq *cq)
{
	size_t n = 0;

	for (int round = 0; round < DRAIN_MAX_ROUNDS; round++) {
		struct tier_store_op *op;

		pthread_mutex_lock(&cq->lock);
		op = cq->head;
		cq->head = cq->tail = NULL;
		pthread_mutex_unlock(&cq->lock);
		if (!op)
			break;
		while (op) {
			struct tier_store_op *next = op->q_next;

			op->q_next = NULL;
			tier__store_finish(op);
			op->cb(op);
			n++;
			op = next;
		}
	}
	return n;
}

int tier_cq_wait(struct tier_cq *cq, int timeout_ms)
{
	struct timespec ts;
	int ready;

	pthread_mutex_lock(&cq->lock);
	if (timeout_ms >= 0) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
	}
	while (!cq->head) {
		int rc = timeout_ms < 0 ? pthread_cond_wait(&cq->cond, &cq->lock)
					: pthread_cond_timedwait(&cq->cond, &cq->lock, &ts);
		if (rc == ETIMEDOUT)
			break;
	}
	ready = cq->head != NULL;
	pthread_mutex_unlock(&cq->lock);
	return ready;
}
