/* SPDX-License-Identifier: MIT */
/*
 * libtier/status.c - block status: which ranges of an image hold data in
 * either pool and which are holes (no cache copy, no base object) that read
 * as zeros.  It answers from the object map (any entry, whatever its state,
 * counts as data) and, for objects the map does not know, from a STAT of the
 * base object: absent is a hole, present is data up to its size and a hole
 * past it (reads past an object's end return zeros).  It must never call a
 * range a hole when a read could return anything but zeros: every doubt
 * (image still loading, a STAT error, an entry that appeared while the STAT
 * ran) is answered "data".  It changes no object state.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/engine_int.h"

struct bs_obj {
	uint64_t data;        /* bytes from the object's start that hold data */
};

struct bs_job {
	struct tier_engine *e;
	struct tier_image *img;
	uint64_t off, end;            /* the range answered (clipped to whole objects' count) */
	uint64_t first;               /* objno of objs[0] */
	size_t nobj, pending;
	tier_block_status_cb cb;
	void *arg;
	struct bs_obj *objs;
	struct tier_store_op *ops;    /* one per STAT (or one on the cache pool: nop) */
	size_t *opi;                  /* ops[k] asks about objs[opi[k]] */
	bool nop;
	struct tier_extent *ext;
};

static uint64_t obj_len(const struct tier_image *img, uint64_t objno, uint64_t os)
{
	uint64_t start = objno * os;

	return img->size - start < os ? img->size - start : os;
}

static bool in_map(const struct bs_job *j, uint64_t objno)
{
	return tier__obj_find(j->e, TIER__KEY(j->img->id, objno)) != NULL;
}

static void bs_add(struct bs_job *j, size_t *n, uint64_t len, uint32_t flags)
{
	if (!len)
		return;
	if (*n && j->ext[*n - 1].flags == flags) {
		j->ext[*n - 1].len += len;
		return;
	}
	j->ext[*n].len = len;
	j->ext[*n].flags = flags;
	(*n)++;
}

static void bs_finish(struct bs_job *j)
{
	struct tier_engine *e = j->e;
	uint64_t os = e->p.object_size;
	size_t n = 0;

	for (size_t i = 0; i < j->nobj; i++) {
		uint64_t objno = j->first + i, start = objno * os;
		uint64_t len = obj_len(j->img, objno, os);
		uint64_t s = j->off > start ? j->off - start : 0;
		uint64_t t = j->end - start < len ? j->end - start : len;
		uint64_t d = j->objs[i].data;

		/* a write that landed while the STAT ran made an entry: data */
		if (d < len && in_map(j, objno))
			d = len;
		if (d > t)
			d = t;
		if (d > s)
			bs_add(j, &n, d - s, 0);
		bs_add(j, &n, t - (d > s ? d : s), TIER_EXTENT_HOLE | TIER_EXTENT_ZERO);
	}
	j->cb(j->arg, 0, j->ext, n);
	e->jobs_inflight--;
	free(j->objs);
	free(j->ops);
	free(j->opi);
	free(j->ext);
	free(j);
	tier__deliver(e);
}

static void bs_stat_cb(struct tier_store_op *op)
{
	struct bs_job *j = op->priv;

	if (!j->nop) {
		size_t i = j->opi[op - j->ops];
		struct bs_obj *b = &j->objs[i];
		uint64_t len = obj_len(j->img, j->first + i, j->e->p.object_size);

		if (op->result == -ENOENT)
			b->data = 0;
		else if (op->result < 0)
			b->data = len;     /* cannot tell: data */
		else
			b->data = op->obj_size < len ? op->obj_size : len;
		if (op->result < 0 && op->result != -ENOENT)
			tier__log(j->e, TIER_LOG_WARN, "block status: STAT of %s in the base "
				  "pool failed (%s): reported as data", op->oid,
				  tier_errno_name(op->result));
	}
	if (--j->pending == 0)
		bs_finish(j);
}

int tier_image_block_status(struct tier_image *img, uint64_t off, uint64_t len,
			    tier_block_status_cb cb, void *arg)
{
	struct tier_engine *e;
	struct bs_job *j;
	uint64_t os, last;
	size_t k = 0;

	if (!img || !cb || img->closed || !len || off + len < off || off + len > img->size)
		return -EINVAL;
	e = img->e;
	os = e->p.object_size;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->e = e;
	j->img = img;
	j->cb = cb;
	j->arg = arg;
	j->off = off;
	j->first = off / os;
	last = (off + len - 1) / os;
	if (last - j->first >= TIER_BLOCK_STATUS_MAX_OBJS)
		last = j->first + TIER_BLOCK_STATUS_MAX_OBJS - 1;
	j->nobj = (size_t)(last - j->first + 1);
	j->end = off + len < (last + 1) * os ? off + len : (last + 1) * os;
	j->objs = calloc(j->nobj, sizeof(*j->objs));
	j->ops = calloc(j->nobj, sizeof(*j->ops));
	j->opi = calloc(j->nobj, sizeof(*j->opi));
	j->ext = calloc(j->nobj * 2, sizeof(*j->ext));
	if (!j->objs || !j->ops || !j->opi || !j->ext) {
		free(j->objs);
		free(j->ops);
		free(j->opi);
		free(j->ext);
		free(j);
		return -ENOMEM;
	}
	for (size_t i = 0; i < j->nobj; i++) {
		uint64_t objno = j->first + i;
		struct tier_store_op *op;

		/* loading (the map is not known yet) or known to the map: data */
		j->objs[i].data = obj_len(img, objno, os);
		if (img->ready != 1 || in_map(j, objno))
			continue;
		j->opi[k] = i;
		op = &j->ops[k++];
		op->opcode = TIER_STORE_STAT;
		tier__oid(img, objno, op->oid);
		op->cb = bs_stat_cb;
		op->priv = j;
	}
	if (!k) {
		/* nothing to ask: one STAT of a name that never exists brings the
		 * callback through the completion queue (never inside this call) */
		struct tier_store_op *op = &j->ops[k++];

		op->opcode = TIER_STORE_STAT;
		strcpy(op->oid, "tier.bs");
		op->cb = bs_stat_cb;
		op->priv = j;
		j->nop = true;
		j->pending = 1;
		e->jobs_inflight++;
		tier__submit(e, e->cache, op);
		return 0;
	}
	j->pending = k;
	e->jobs_inflight++;
	for (size_t i = 0; i < k; i++)
		tier__submit(e, e->base, &j->ops[i]);
	return 0;
}
