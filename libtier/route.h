/* SPDX-License-Identifier: MIT */
/*
 * libtier/route.h (internal) - what the client data path's files share:
 * route.c (the queues and the router), read.c, write.c and hint.c.  A
 * piece's steps, its queue, its store op, and the entry points the router
 * calls once tier__decide named a route.  Only those four files include it.
 */
#ifndef TIER_ROUTE_H
#define TIER_ROUTE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "libtier/decide.h"
#include "libtier/engine_int.h"

/* Steps of a piece (x->step), per route. */
enum xstep {
	XS_NONE = 0,
	XS_READ_CACHE = 1,        /* read of the piece from the cache copy */
	XS_READ_RUNS = 2,         /* base reads of the runs the copy lacks (extent mode) */
	XS_READ_BASE = 3,         /* one base read of the whole piece */
	XS_DROP_BASE = 10,        /* REMOVE of the base object, then XS_DROP_CACHE */
	XS_DROP_CACHE = 11,       /* REMOVE of the cache copy, then done */
	XS_DROP_THEN_PROXY = 12,  /* REMOVE of the cache copy, then the proxied op */
	XS_PROXY_NEW = 20,        /* proxied op on extents no copy holds (o->nproxy) */
};

/* ---- an object's queue: arrival order ---- */

static inline void tier__q_push_tail(struct tier__obj *o, struct tier__ext *x)
{
	struct tier__ext **pp = &o->qhead;

	while (*pp)
		pp = &(*pp)->next;
	x->next = NULL;
	*pp = x;
}

static inline void tier__q_push_head(struct tier__obj *o, struct tier__ext *x)
{
	x->next = o->qhead;
	o->qhead = x;
}

static inline void tier__q_pop(struct tier__obj *o, struct tier__ext *x)
{
	o->qhead = x->next;
	x->next = NULL;
}

/* ---- a piece's store op ---- */

static inline void tier__x_op(struct tier__ext *x, enum tier_store_opcode opc, tier_store_cb cb)
{
	struct tier_store_op *op = &x->op;

	memset(op, 0, sizeof(*op));
	op->opcode = opc;
	op->cb = cb;
	op->priv = x;
	tier__oid(x->img, TIER__KEY_OBJNO(x->obj->key), op->oid);
}

/* The client asked for FUA. */
static inline uint32_t tier__x_fua(const struct tier__ext *x)
{
	return x->req && (x->req->flags & TIER_REQ_F_FUA) ? TIER_STORE_F_FUA : 0;
}

static inline void tier__x_submit(struct tier_engine *e, struct tier_store *st, struct tier__ext *x)
{
	if (st == e->base)
		x->t_base = tier__eng_now_ns(e);
	tier__submit(e, st, &x->op);
}

/* ---- read.c ---- */
/* Pop the read x off o's queue and run it as route says (HIT, HIT_PARTIAL, EXTENT_MISS, PROXY*). */
void tier__read_start(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x,
		      enum tier__route route);
/* The read x starts where one of the last 16 client reads ended: a sequential stream. */
bool tier__read_continues(const struct tier_engine *e, const struct tier__obj *o,
			  const struct tier__ext *x);

/* ---- write.c ---- */
/* A write, trim or zero to base (x already off the queue). */
void tier__proxy_start(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x);
/* Pop x and write it into the cache copy, exclusive (o has bitmaps if it has a copy to make). */
void tier__cw_start(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x);
/* Pop x and remove the cache copy (with_base: the base object first), exclusive. */
void tier__drop_start(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x,
		      bool with_base);

/* ---- hint.c ---- */
/* Queue an admitted promotion behind what is queued on o (PQUEUED). */
void tier__hint_promote(struct tier_engine *e, struct tier__obj *o, struct tier_image *img);
/* A read of o's copy that needed base (decide's fill: f): a fill hint behind it, or not. */
void tier__hint_maybe_fill(struct tier_engine *e, struct tier__obj *o, struct tier__ext *x,
			   enum tier__fill f);
/* A read of o whose first copy is being made: a fill hint of its extents behind it. */
void tier__hint_behind_copy(struct tier_engine *e, struct tier__obj *o,
			    const struct tier__ext *x);
/* Every extent of x the copy lacks is on its way in (a fill in flight, or the queued hint's). */
bool tier__hint_fill_admitted(const struct tier_engine *e, const struct tier__obj *o,
			      const struct tier__ext *x);

#endif
