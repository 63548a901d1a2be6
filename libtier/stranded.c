/* SPDX-License-Identifier: MIT */
/*
 * libtier/stranded.c - stranded cache objects: cache-pool objects of an
 * image that is no longer configured, or past the end of a configured image
 * (it shrank).  The engine never sees them (an image's rebuild adopts only
 * objects below its end), so they are never flushed, evicted or counted, and
 * an image opened later under their prefix would adopt them as they are:
 * stale.  Clean ones are only a danger and go; a dirty one is the only copy
 * of acknowledged data, so only an operator may decide: flush it to the base
 * pool, or drop it.
 *
 * Unlike the engine this code blocks: it runs before an engine serves the
 * pools (tierd's start-up check) or in tierd's offline mode, submitting ops
 * and waiting on the completion queue.  It must never remove a dirty copy
 * before base durably holds its dirty data (flush), never write to base
 * data that is not dirty (extent mode: the meta's dirty bitmap only), and
 * never touch an object of a configured image below its end, a "tier.*"
 * object (hitset archives, barriers) or a name tierd does not make.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tier/engine.h"
#include "tier/meta.h"
#include "tier/store.h"

#define SCAN_WINDOW 32
#define META_WORDS  ((TIER_META_MAX - sizeof(struct tier_meta_hdr)) / 16 + 1)
#define INTERNAL_PREFIX "tier."
#define BARRIER_OID "tier.sync-barrier"

struct cand {
	char oid[TIER_OID_MAX];
	size_t plen;          /* prefix length */
	uint64_t objno;
	int img;              /* configured image (past its end) or -1 */
};

/* ---- running ops to completion ---- */

static void count_cb(struct tier_store_op *op)
{
	size_t *pending = op->priv;

	(*pending)--;
}

static void wait_all(struct tier_cq *cq, const size_t *pending)
{
	while (*pending) {
		if (!tier_cq_drain(cq))
			tier_cq_wait(cq, 1000);
	}
}

/* Submit one op and wait for it; returns its result. */
static int run1(struct tier_store *st, struct tier_cq *cq, struct tier_store_op *op)
{
	size_t pending = 1;
	int rc;

	op->cb = count_cb;
	op->priv = &pending;
	rc = tier_store_submit(st, op);
	if (rc < 0)
		return rc;
	wait_all(cq, &pending);
	return op->result;
}

static void slog(tier_log_fn log, void *arg, enum tier_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void slog(tier_log_fn log, void *arg, enum tier_log_level lvl, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (!log)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	log(arg, lvl, buf);
}

/* ---- scan ---- */

static bool hex16(const char *s, uint64_t *v)
{
	uint64_t x = 0;

	if (strlen(s) != 16)
		return false;
	for (int i = 0; i < 16; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return false;
		x = (x << 4) | (uint64_t)d;
	}
	*v = x;
	return true;
}

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	size_t n = x->plen < y->plen ? x->plen : y->plen;
	int c = memcmp(x->oid, y->oid, n);

	if (c)
		return c;
	if (x->plen != y->plen)
		return x->plen < y->plen ? -1 : 1;
	return x->objno < y->objno ? -1 : x->objno > y->objno;
}

static size_t popcount(const uint64_t *w, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += (size_t)__builtin_popcountll(w[i]);
	return c;
}

/* Fill o from a successful STAT (meta in mbuf). -ENOMEM only. */
static int classify(struct tier_stranded_obj *o, const struct tier_store_op *op, const void *mbuf)
{
	uint64_t valid[META_WORDS], dirty[META_WORDS];
	struct tier_meta m = { .valid = valid, .dirty = dirty };
	size_t w;

	o->version = op->obj_version;
	o->size = op->obj_size;
	if (op->result == -ERANGE || !op->meta_len_out ||
	    tier_meta_decode(mbuf, op->meta_len_out, &m, META_WORDS) < 0 ||
	    (m.flags & TIER_META_F_INCOMPLETE)) {
		o->bad_meta = true;
		return 0;
	}
	w = tier_meta_words(m.nbits);
	if ((m.flags & TIER_META_F_EXTENTS) && !popcount(valid, w)) {
		o->bad_meta = true;   /* holds nothing (the rebuild discards these too) */
		return 0;
	}
	if (!o->version)
		o->version = m.version;
	o->object_size = m.object_size;
	if (!(m.flags & TIER_META_F_DIRTY))
		return 0;
	if (!(m.flags & TIER_META_F_EXTENTS)) {
		o->dirty = true;
		o->dirty_bytes = m.object_size;   /* object mode: the whole object */
		return 0;
	}
	o->extent_size = m.extent_size;
	o->nbits = m.nbits;
	for (uint32_t i = 0; i < m.nbits; i++) {
		uint64_t s = (uint64_t)i * m.extent_size, t = s + m.extent_size;

		if ((dirty[i / 64] >> (i % 64)) & 1)
			o->dirty_bytes += (t < m.object_size ? t : m.object_size) - s;
	}
	if (!o->dirty_bytes)
		return 0;   /* the dirty flag alone: nothing only this copy holds */
	o->dirty = true;
	o->dirty_bits = malloc(w * 8);
	if (!o->dirty_bits)
		return -ENOMEM;
	memcpy(o->dirty_bits, dirty, w * 8);
	return 0;
}

void tier_stranded_free(struct tier_stranded_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_objs; i++)
		free(r->objs[i].dirty_bits);
	free(r->objs);
	free(r->groups);
	free(r);
}

void tier_stranded_drop_group(struct tier_stranded_report *r, size_t gi)
{
	struct tier_stranded_group g;

	if (!r || gi >= r->n_groups)
		return;
	g = r->groups[gi];
	for (size_t i = g.first; i < g.first + g.n; i++)
		free(r->objs[i].dirty_bits);
	memmove(&r->objs[g.first], &r->objs[g.first + g.n],
		(r->n_objs - g.first - g.n) * sizeof(r->objs[0]));
	r->n_objs -= g.n;
	memmove(&r->groups[gi], &r->groups[gi + 1], (r->n_groups - gi - 1) * sizeof(g));
	r->n_groups--;
	for (size_t i = 0; i < r->n_groups; i++)
		if (r->groups[i].first > g.first)
			r->groups[i].first -= g.n;
	r->n_dirty -= g.n_dirty;
	r->dirty_bytes -= g.dirty_bytes;
	r->n_ignored += g.n;
}

/* Candidates: stranded-looking names, sorted by prefix then objno. */
static int candidates(char **names, size_t n_names, uint64_t object_size,
		      const struct tier_stranded_image *imgs, size_t n_imgs,
		      struct tier_stranded_report *r, struct cand **out, size_t *n_out)
{
	struct cand *c = calloc(n_names ? n_names : 1, sizeof(*c));
	size_t n = 0;

	if (!c)
		return -ENOMEM;
	for (size_t i = 0; i < n_names; i++) {
		const char *name = names[i], *dot = strrchr(name, '.');
		uint64_t objno;
		size_t plen;
		int img = -1;

		if (!strncmp(name, INTERNAL_PREFIX, strlen(INTERNAL_PREFIX)))
			continue;
		if (!dot || dot == name || !hex16(dot + 1, &objno) || strlen(name) >= TIER_OID_MAX) {
			r->n_ignored++;
			continue;
		}
		plen = (size_t)(dot - name);
		for (size_t k = 0; k < n_imgs; k++) {
			if (strlen(imgs[k].object_prefix) == plen &&
			    !memcmp(imgs[k].object_prefix, name, plen)) {
				img = (int)k;
				break;
			}
		}
		if (img >= 0 && objno < (imgs[img].size + object_size - 1) / object_size)
			continue;   /* the image's own: its rebuild adopts it */
		snprintf(c[n].oid, sizeof(c[n].oid), "%s", name);
		c[n].plen = plen;
		c[n].objno = objno;
		c[n].img = img;
		n++;
	}
	qsort(c, n, sizeof(*c), cand_cmp);
	*out = c;
	*n_out = n;
	return 0;
}

static int build_groups(struct tier_stranded_report *r, const int *cimg,
			const struct tier_stranded_image *imgs)
{
	r->groups = calloc(r->n_objs ? r->n_objs : 1, sizeof(*r->groups));
	if (!r->groups)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_objs; i++) {
		const struct tier_stranded_obj *o = &r->objs[i];
		struct tier_stranded_group *g = r->n_groups ? &r->groups[r->n_groups - 1] : NULL;
		size_t plen = strlen(o->oid) - 17;

		if (!g || strlen(g->prefix) != plen || memcmp(g->prefix, o->oid, plen)) {
			g = &r->groups[r->n_groups++];
			memcpy(g->prefix, o->oid, plen);
			g->prefix[plen] = '\0';
			g->first = i;
			if (cimg[i] >= 0) {
				g->image = imgs[cimg[i]].name;
				g->image_size = imgs[cimg[i]].size;
			}
		}
		g->n++;
		if (o->dirty) {
			g->n_dirty++;
			g->dirty_bytes += o->dirty_bytes;
			r->n_dirty++;
			r->dirty_bytes += o->dirty_bytes;
		} else {
			g->n_clean++;
		}
	}
	return 0;
}

int tier_stranded_scan(struct tier_store *cache, struct tier_cq *cq, uint64_t object_size,
		       const struct tier_stranded_image *imgs, size_t n_imgs,
		       struct tier_stranded_report **out)
{
	struct tier_stranded_report *r = calloc(1, sizeof(*r));
	struct tier_store_op *ops = NULL, lop;
	struct cand *c = NULL;
	uint8_t *mbuf = NULL;
	int *cimg = NULL;
	size_t nc = 0;
	int rc;

	*out = NULL;
	if (!r || !object_size)
		goto nomem;
	memset(&lop, 0, sizeof(lop));
	lop.opcode = TIER_STORE_LIST;
	lop.prefix = "";
	rc = run1(cache, cq, &lop);
	if (rc < 0)
		goto fail;
	rc = candidates(lop.names, lop.n_names, object_size, imgs, n_imgs, r, &c, &nc);
	tier_store_list_free(lop.names, lop.n_names);
	if (rc < 0)
		goto fail;
	r->objs = calloc(nc ? nc : 1, sizeof(*r->objs));
	cimg = calloc(nc ? nc : 1, sizeof(*cimg));
	ops = calloc(SCAN_WINDOW, sizeof(*ops));
	mbuf = malloc((size_t)SCAN_WINDOW * TIER_META_MAX);
	if (!r->objs || !cimg || !ops || !mbuf)
		goto nomem;
	for (size_t base = 0; base < nc; base += SCAN_WINDOW) {
		size_t n = nc - base < SCAN_WINDOW ? nc - base : SCAN_WINDOW, pending = 0;

		for (size_t i = 0; i < n; i++) {
			struct tier_store_op *op = &ops[i];

			memset(op, 0, sizeof(*op));
			op->opcode = TIER_STORE_STAT;
			memcpy(op->oid, c[base + i].oid, sizeof(op->oid));
			op->meta_buf = mbuf + i * TIER_META_MAX;
			op->meta_cap = TIER_META_MAX;
			op->cb = count_cb;
			op->priv = &pending;
			if (tier_store_submit(cache, op) == 0)
				pending++;
			else
				op->result = -EINVAL;
		}
		wait_all(cq, &pending);
		for (size_t i = 0; i < n; i++) {
			struct tier_store_op *op = &ops[i];
			struct tier_stranded_obj *o = &r->objs[r->n_objs];

			if (op->result == -ENOENT)
				continue;   /* gone since the listing */
			if (op->result < 0 && op->result != -ERANGE) {
				rc = op->result;
				goto fail;
			}
			memcpy(o->oid, c[base + i].oid, sizeof(o->oid));
			o->objno = c[base + i].objno;
			cimg[r->n_objs] = c[base + i].img;
			r->n_objs++;
			if (classify(o, op, op->meta_buf) < 0)
				goto nomem;
		}
	}
	rc = build_groups(r, cimg, imgs);
	if (rc < 0)
		goto fail;
	free(c);
	free(cimg);
	free(ops);
	free(mbuf);
	*out = r;
	return 0;
nomem:
	rc = -ENOMEM;
fail:
	free(c);
	free(cimg);
	free(ops);
	free(mbuf);
	tier_stranded_free(r);
	return rc;
}

/* ---- resolve ---- */

/* Copy [off, off+len) of o from cache to base; fua on the base write. */
static int copy_range(struct tier_store *base, struct tier_store *cache, struct tier_cq *cq,
		      const struct tier_stranded_obj *o, void *buf, uint64_t off, uint64_t len,
		      bool fua)
{
	struct tier_store_op op;
	int rc;

	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_READ;
	memcpy(op.oid, o->oid, sizeof(op.oid));
	op.off = off;
	op.len = len;
	op.buf = buf;
	rc = run1(cache, cq, &op);
	if (rc < 0)
		return rc;
	memset(&op, 0, sizeof(op));
	op.opcode = TIER_STORE_WRITE;
	op.flags = fua ? TIER_STORE_F_FUA : 0;
	memcpy(op.oid, o->oid, sizeof(op.oid));
	op.off = off;
	op.len = len;
	op.buf = buf;
	rc = run1(base, cq, &op);
	return rc < 0 ? rc : 0;
}

static bool dbit(const struct tier_stranded_obj *o, uint32_t i)
{
	return (o->dirty_bits[i / 64] >> (i % 64)) & 1;
}

/* Write o's dirty data to base; durable when this returns 0. */
static int flush_obj(struct tier_store *base, struct tier_store *cache, struct tier_cq *cq,
		     const struct tier_stranded_obj *o)
{
	uint64_t es = o->extent_size, os = o->object_size;
	void *buf = malloc(os);
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	if (!o->nbits) {
		rc = copy_range(base, cache, cq, o, buf, 0, os, true);
		free(buf);
		return rc;
	}
	/* dirty runs, in order; the last one carries FUA (it covers the earlier ones) */
	{
		uint64_t last_s = 0, last_t = 0;
		bool have = false;

		for (uint32_t i = 0; i < o->nbits && rc == 0; i++) {
			uint64_t s, t;

			if (!dbit(o, i) || (i > 0 && dbit(o, i - 1)))
				continue;
			s = (uint64_t)i * es;
			while (i + 1 < o->nbits && dbit(o, i + 1))
				i++;
			t = (uint64_t)(i + 1) * es < os ? (uint64_t)(i + 1) * es : os;
			if (s >= t)
				continue;
			if (have)
				rc = copy_range(base, cache, cq, o, (char *)buf + last_s, last_s,
						last_t - last_s, false);
			last_s = s;
			last_t = t;
			have = true;
		}
		if (rc == 0 && have)
			rc = copy_range(base, cache, cq, o, (char *)buf + last_s, last_s,
					last_t - last_s, true);
	}
	free(buf);
	return rc;
}

int tier_stranded_resolve(struct tier_store *base, struct tier_store *cache, struct tier_cq *cq,
			  struct tier_stranded_report *r, enum tier_stranded_action action,
			  tier_log_fn log, void *log_arg, struct tier_stranded_result *out)
{
	struct tier_store_op op;
	int first = 0, rc;

	memset(out, 0, sizeof(*out));
	if (action == TIER_STRANDED_FLUSH && !base)
		return -EINVAL;
	for (size_t i = 0; i < r->n_objs; i++) {
		struct tier_stranded_obj *o = &r->objs[i];

		if (o->done || (o->dirty && action == TIER_STRANDED_CLEAN))
			continue;
		if (o->dirty && action == TIER_STRANDED_FLUSH) {
			rc = flush_obj(base, cache, cq, o);
			if (rc < 0) {
				slog(log, log_arg, TIER_LOG_ERROR, "stranded %s: flush to the base "
				     "pool failed: %s; the cache copy stays", o->oid, strerror(-rc));
				out->failed++;
				first = first ? first : rc;
				continue;
			}
		}
		memset(&op, 0, sizeof(op));
		op.opcode = TIER_STORE_REMOVE;
		op.flags = TIER_STORE_F_GUARD;
		op.expect_version = o->version;
		memcpy(op.oid, o->oid, sizeof(op.oid));
		rc = run1(cache, cq, &op);
		if (rc < 0 && rc != -ENOENT) {
			slog(log, log_arg, TIER_LOG_ERROR, "stranded %s: remove failed: %s%s",
			     o->oid, strerror(-rc),
			     rc == -ECANCELED ? " (it changed since the scan: is another tierd "
			     "using this cache pool?)" : "");
			out->failed++;
			first = first ? first : rc;
			continue;
		}
		o->done = true;
		out->removed++;
		if (o->dirty && action == TIER_STRANDED_FLUSH) {
			out->flushed++;
			out->flushed_bytes += o->dirty_bytes;
			slog(log, log_arg, TIER_LOG_INFO, "stranded %s: flushed %llu dirty bytes to "
			     "the base pool, removed from the cache", o->oid,
			     (unsigned long long)o->dirty_bytes);
		} else if (o->dirty) {
			out->dropped_dirty++;
			out->dropped_dirty_bytes += o->dirty_bytes;
			slog(log, log_arg, TIER_LOG_WARN, "stranded %s: dropped, %llu dirty bytes "
			     "discarded", o->oid, (unsigned long long)o->dirty_bytes);
		} else {
			slog(log, log_arg, TIER_LOG_INFO, "stranded %s: removed %s cache copy", o->oid,
			     o->bad_meta ? "an incomplete" : "a clean");
		}
	}
	if (out->removed) {
		/* the pool's name barrier: no removed copy comes back after a power cut */
		memset(&op, 0, sizeof(op));
		op.opcode = TIER_STORE_REMOVE;
		op.flags = TIER_STORE_F_FUA;
		snprintf(op.oid, sizeof(op.oid), "%s", BARRIER_OID);
		rc = run1(cache, cq, &op);
		if (rc < 0 && rc != -ENOENT) {
			slog(log, log_arg, TIER_LOG_ERROR, "stranded: cache pool barrier failed: %s",
			     strerror(-rc));
			first = first ? first : rc;
		}
	}
	return first;
}
