/* SPDX-License-Identifier: MIT */
/*
 * libtier/hsarch.c - persistence of the hitsets in the cache pool: every
 * rotation (hit_set_period) archives the newest set as an object
 * "tier.hitset.[<tag>.]<seq as %016llx>" (the tag: one tierd of several
 * sharing the pool, tier_engine_opts.hitset_tag), trims the archive to hit_set_count, and at
 * engine creation the archived sets are read back oldest first.  Hitsets are
 * hints: a failure here is logged and counted, never fails a request, and
 * it must never touch image data objects.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/engine_int.h"

#define HS_PREFIX "tier.hitset."

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void hs_remove_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_engine *e = j->e;

	tier__job_free(j);
	tier__deliver(e);
}

static void hs_remove(struct tier_engine *e, const char *name)
{
	struct tier__job *j = tier__job_new(e, TIER__J_HITSET, NULL, NULL);

	if (!j)
		return;
	j->op.opcode = TIER_STORE_REMOVE;
	snprintf(j->op.oid, sizeof(j->op.oid), "%s", name);
	j->op.cb = hs_remove_cb;
	j->op.priv = j;
	tier__submit(e, e->cache, &j->op);
}

static void hs_trim(struct tier_engine *e)
{
	while (e->n_hs_names > e->p.hit_set_count) {
		hs_remove(e, e->hs_names[0]);
		free(e->hs_names[0]);
		memmove(e->hs_names, e->hs_names + 1, (e->n_hs_names - 1) * sizeof(char *));
		e->n_hs_names--;
	}
}

static void load_next(struct tier__job *j);

static void load_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_engine *e = j->e;

	if (op->result < 0) {
		tier__log(e, TIER_LOG_WARN, "hitset %s: %s failed: %s", op->oid,
			  tier_store_opcode_name(op->opcode), strerror(-op->result));
	} else if (op->opcode == TIER_STORE_STAT && op->obj_size > 0 && op->obj_size < (64u << 20)) {
		free(j->buf);
		j->buf = malloc(op->obj_size);
		if (j->buf) {
			j->len = op->obj_size;
			memset(op, 0, sizeof(*op));
			op->opcode = TIER_STORE_READ;
			snprintf(op->oid, sizeof(op->oid), "%s", e->hs_names[j->hs_next]);
			op->len = j->len;
			op->buf = j->buf;
			op->cb = load_cb;
			op->priv = j;
			tier__submit(e, e->cache, op);
			return;
		}
	} else if (op->opcode == TIER_STORE_READ) {
		if (tier__hitsets_load_archived(e->hs, j->buf, j->len) < 0)
			tier__log(e, TIER_LOG_WARN, "hitset %s: bad archive, ignored", op->oid);
	}
	j->hs_next++;
	load_next(j);
	tier__deliver(e);
}

static void load_next(struct tier__job *j)
{
	struct tier_engine *e = j->e;
	struct tier_store_op *op = &j->op;

	if (j->hs_next >= e->n_hs_names) {
		e->hs_loading = false;
		tier__job_free(j);
		return;
	}
	memset(op, 0, sizeof(*op));
	op->opcode = TIER_STORE_STAT;
	snprintf(op->oid, sizeof(op->oid), "%s", e->hs_names[j->hs_next]);
	op->cb = load_cb;
	op->priv = j;
	tier__submit(e, e->cache, op);
}

static void list_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_engine *e = j->e;

	if (op->result < 0 || !op->n_names) {
		tier_store_list_free(op->names, op->n_names);
		op->names = NULL;
		e->hs_loading = false;
		tier__job_free(j);
		tier__deliver(e);
		return;
	}
	/* ours only: the prefix, then 16 hex digits (another tierd's have its tag) */
	{
		size_t pl = strlen(e->hs_prefix), k = 0;

		for (size_t i = 0; i < op->n_names; i++) {
			const char *nm = op->names[i];
			bool mine = strlen(nm) == pl + 16 && !strncmp(nm, e->hs_prefix, pl) &&
				    strspn(nm + pl, "0123456789abcdef") == 16;

			if (mine)
				op->names[k++] = op->names[i];
			else
				free(op->names[i]);
		}
		op->n_names = k;
	}
	if (!op->n_names) {
		tier_store_list_free(op->names, 0);
		op->names = NULL;
		e->hs_loading = false;
		tier__job_free(j);
		tier__deliver(e);
		return;
	}
	qsort(op->names, op->n_names, sizeof(char *), cmp_names);
	e->hs_names = op->names;
	e->n_hs_names = op->n_names;
	op->names = NULL;
	e->hs_seq = strtoull(e->hs_names[e->n_hs_names - 1] + strlen(e->hs_prefix), NULL, 16) + 1;
	hs_trim(e);
	j->hs_next = 0;
	load_next(j);
	tier__deliver(e);
}

void tier__hitsets_start_load(struct tier_engine *e)
{
	struct tier__job *j = tier__job_new(e, TIER__J_HITSET, NULL, NULL);

	if (!j)
		return;
	e->hs_loading = true;
	j->op.opcode = TIER_STORE_LIST;
	j->op.prefix = e->hs_prefix;
	snprintf(j->op.oid, sizeof(j->op.oid), "%s", e->hs_prefix);
	j->op.cb = list_cb;
	j->op.priv = j;
	tier__submit(e, e->cache, &j->op);
}

static void archive_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_engine *e = j->e;
	char **nn;

	if (op->result < 0) {
		tier__log(e, TIER_LOG_WARN, "hitset archive %s failed: %s", op->oid,
			  strerror(-op->result));
	} else {
		e->st.hitset_archives++;
		nn = realloc(e->hs_names, (e->n_hs_names + 1) * sizeof(char *));
		if (nn) {
			e->hs_names = nn;
			nn[e->n_hs_names] = strdup(op->oid);
			if (nn[e->n_hs_names])
				e->n_hs_names++;
		}
		hs_trim(e);
	}
	tier__job_free(j);
	tier__deliver(e);
}

static int archive_newest(struct tier_engine *e)
{
	struct tier__job *j;
	uint64_t start_ms;
	void *blob = NULL;
	size_t len = 0;
	int rc;

	rc = tier__hitsets_encode_newest(e->hs, &blob, &len, &start_ms);
	if (rc < 0 || !len) {
		free(blob);
		return rc < 0 ? rc : -ENOENT;
	}
	j = tier__job_new(e, TIER__J_HITSET, NULL, NULL);
	if (!j) {
		free(blob);
		return -ENOMEM;
	}
	j->buf = blob;
	j->op.opcode = TIER_STORE_WRITE;
	snprintf(j->op.oid, sizeof(j->op.oid), "%s%016llx", e->hs_prefix,
		 (unsigned long long)e->hs_seq++);
	j->op.buf = blob;
	j->op.len = len;
	j->op.cb = archive_cb;
	j->op.priv = j;
	tier__submit(e, e->cache, &j->op);
	return 0;
}

void tier__hitsets_tick(struct tier_engine *e)
{
	if (e->hs_loading)
		return;
	if (tier__hitsets_maybe_rotate(e->hs, tier__eng_now_ms(e), e->p.hit_set_period) == 1)
		archive_newest(e);
}

int tier__hitsets_archive_now(struct tier_engine *e)
{
	if (e->hs_loading)
		return -EBUSY;
	if (tier__hitsets_maybe_rotate(e->hs, tier__eng_now_ms(e), 0) != 1)
		return -ENOMEM;
	return archive_newest(e);
}
