/* SPDX-License-Identifier: MIT */
/*
 * libtier/image.c - images: open (and the start-up rebuild of the object map
 * from the cache pool listing and each object's tier.meta: pages of a SCAN
 * where the store does it, else a LIST and a STAT per object), close, and
 * request submission, which splits a request into per-object pieces and
 * completes it when the last piece is done, with the first error.  The
 * rebuild discards cache objects whose meta is missing, malformed or marked
 * incomplete (none of them can hold an acknowledged write) and keeps dirty
 * ones for the agent to flush.
 *
 * An image serves while it loads (lazily): a request whose objects the
 * map has not decided yet waits while a probe (a STAT of each such object
 * in the cache pool) decides them, the scan going on behind.  Nothing of an
 * object is served, and nothing is done to it, before its entry (or its
 * absence) is decided, because a dirty cache copy would be missed; once
 * decided (`known`), the scan's answer for it, read before, is stale and
 * ignored, and while a probe or a discard decides it (`probing`), the scan
 * leaves it to them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libtier/engine_int.h"

#define REBUILD_WINDOW 128  /* STATs in flight (a store without SCAN) */
/*
 * SCAN: shards read in parallel (each reads the whole directory and keeps
 * its share of the names: more shards cost directory reads) and entries
 * per page (a page holds its names and metas, ~120 bytes an object).
 */
#define REBUILD_SHARDS 2
#define REBUILD_PAGE   4096
/* images of more objects load without probes (requests wait for the scan) */
#define LAZY_MAX_OBJS  (1ull << 26)
#define LAZY_PROBES       32   /* probes in flight (they share REBUILD_WINDOW) */
#define LAZY_REQ_OBJS     16   /* a request over more objects waits for the scan */
#define LAZY_PROBE_TRIES  3    /* probes failed in a row before the load fails */
#define J_PROBE           1    /* a rebuild job's step: a probe, not the scan's STAT */

void tier__image_free(struct tier_image *img)
{
	if (!img)
		return;
	tier_store_list_free(img->names, img->n_names);
	free(img->known);
	free(img->probing);
	free(img->name);
	free(img->prefix);
	free(img);
}

static uint32_t prefix_id(const struct tier_engine *e, const char *prefix)
{
	uint64_t h = 1469598103934665603ull;
	uint32_t id;

	for (const char *p = prefix; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	id = (uint32_t)(h & ((1u << TIER__ID_BITS) - 1));
	while (tier__image_by_id(e, id))
		id = (id + 1) & ((1u << TIER__ID_BITS) - 1);
	return id;
}

static int dispatch_req(struct tier_image *img, struct tier_request *req);
static void drop_entry(struct tier_engine *e, struct tier__obj *o, void *arg);
static void lazy_pump(struct tier_image *img);

/* Loading lazily: may the scan's answer for objno, read before, decide it? */
static bool scan_decides(const struct tier_image *img, uint64_t objno)
{
	return !img->known || (!tier__bit(img->known, objno) && !tier__bit(img->probing, objno));
}

/* objno's entry (or its absence) is decided: requests for it may go. */
static void lazy_decided(struct tier_image *img, uint64_t objno)
{
	if (!img->known)
		return;
	tier__bit_set(img->known, objno);
	tier__bit_clear(img->probing, objno);
}

static void lazy_end(struct tier_image *img)
{
	free(img->known);
	free(img->probing);
	img->known = img->probing = NULL;
}

static void image_loaded(struct tier_image *img, int rc)
{
	struct tier_engine *e = img->e;
	struct tier_request *r;

	tier_store_list_free(img->names, img->n_names);
	img->names = NULL;
	img->n_names = 0;
	lazy_end(img);
	if (img->parked) {      /* handed off while it loaded: what it found goes */
		tier__map_foreach(e, drop_entry, img);
		if (img->stopped)
			img->ready = img->stopped;
		return;
	}
	img->ready = rc < 0 ? rc : 1;
	if (rc < 0)
		tier__log(e, TIER_LOG_ERROR, "image %s: rebuild from the cache pool failed: %s",
			  img->name, strerror(-rc));
	else
		tier__log(e, TIER_LOG_INFO, "image %s: %llu cached objects (%llu dirty), map "
			  "loaded in %.2f s (%llu probed for requests meanwhile)", img->name,
			  (unsigned long long)img->n_cached, (unsigned long long)img->n_dirty,
			  (double)(tier__eng_now_ns(e) - img->t_load_ns) / 1e9,
			  (unsigned long long)img->load_probes);
	while ((r = img->pend_head)) {
		img->pend_head = r->next;
		img->n_pend--;
		r->next = NULL;
		img->reqs++;
		if (rc < 0) {
			r->pending = 1;
			tier__req_put(e, r, -EIO);
		} else {
			dispatch_req(img, r);
		}
	}
	img->pend_tail = NULL;
}

static bool parse_objno(const struct tier_image *img, const char *name, uint64_t *objno)
{
	size_t pl = strlen(img->prefix);
	const char *s = name + pl + 1;
	char *end;

	if (strncmp(name, img->prefix, pl) || name[pl] != '.' || strlen(s) != 16)
		return false;
	*objno = strtoull(s, &end, 16);
	return *end == '\0' && *objno < img->nobjs;
}

static void rebuild_next(struct tier_image *img);

static void rebuild_remove_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_image *img = j->img;

	lazy_decided(img, j->objno);   /* absent now (the REMOVE's error is the agent's) */
	tier__job_free(j);
	img->rb_inflight--;
	lazy_pump(img);
	rebuild_next(img);
	tier__deliver(img->e);
}

/*
 * Adopt a listed cache object from what a STAT (or a SCAN entry) said of
 * it: its store version and meta.  scratch: 2 * nwords words (extent mode).
 */
static int rebuild_adopt(struct tier_image *img, uint64_t objno, uint64_t version,
			 const void *meta, uint32_t meta_len, uint64_t *scratch)
{
	struct tier_engine *e = img->e;
	uint64_t *valid = scratch, *dirty = scratch ? scratch + e->nwords : NULL;
	struct tier_meta m = { .valid = valid, .dirty = dirty };
	struct tier__obj *o;
	int rc;

	if (e->nwords && !scratch)
		return -ENOMEM;
	rc = tier_meta_decode(meta, meta_len, &m, e->nwords);
	if (rc == -E2BIG)
		return -ENOTSUP;   /* another extent geometry: do not guess, do not drop */
	if (rc < 0 || (m.flags & TIER_META_F_INCOMPLETE))
		return -EINVAL;
	if (m.object_size != e->p.object_size)
		return -ENOTSUP;
	if ((m.flags & TIER_META_F_EXTENTS) &&
	    (m.extent_size != e->p.extent_size || !tier__popcount(valid, e->nwords)))
		/* bitmaps of another extent size cannot be mapped: refuse dirty ones */
		return (m.flags & TIER_META_F_DIRTY) && m.extent_size != e->p.extent_size ?
			-ENOTSUP : -EINVAL;
	o = tier__obj_get(e, img, objno);
	if (!o)
		return -ENOMEM;
	if (o->state != TIER__ABSENT) {
		lazy_decided(img, objno);
		return 0;
	}
	if (m.flags & TIER_META_F_EXTENTS) {
		if (tier__obj_alloc_bits(e, o) < 0) {
			tier__obj_release(e, o);
			return -ENOMEM;
		}
	}
	o->version = version ? version : m.version;
	tier__obj_touch(e, o);
	tier__obj_set_state(e, o, (m.flags & TIER_META_F_DIRTY) ? TIER__DIRTY : TIER__CLEAN,
			    tier__obj_bits(o) ? valid : NULL, tier__obj_bits(o) ? dirty : NULL);
	lazy_decided(img, objno);   /* the entry is whole: requests may use it */
	return 0;
}

/*
 * A STAT's answer: of a listed name (the scan), or of an object a request
 * waits for (a probe, j->step J_PROBE, which holds its `probing` bit).
 */
static void rebuild_stat_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_image *img = j->img;
	struct tier_engine *e = img->e;
	uint64_t objno = j->objno;
	bool probe = j->step == J_PROBE;
	int rc = op->result;

	if (!probe && !scan_decides(img, objno)) {
		rc = 0;   /* decided since, or a probe decides it: this answer is stale */
	} else if (rc == -ENOENT) {
		rc = 0;   /* gone since the listing; a probe: not cached */
		lazy_decided(img, objno);
	} else if (rc >= 0 || rc == -ERANGE) {
		rc = rc < 0 ? -EINVAL : rebuild_adopt(img, objno, op->obj_version, j->meta,
						      op->meta_len_out, j->snap);
		if (rc == -EINVAL) {
			/* no acknowledged write can live in it: discard */
			tier__log(e, TIER_LOG_INFO, "image %s: discarding cache object %s (bad or "
				  "incomplete tier.meta)", img->name, op->oid);
			if (img->known)   /* requests for it wait for the REMOVE */
				tier__bit_set(img->probing, objno);
			memset(op, 0, sizeof(*op));
			tier__oid(img, objno, op->oid);
			op->opcode = TIER_STORE_REMOVE;
			op->cb = rebuild_remove_cb;
			op->priv = j;
			if (probe)
				img->n_probes--;   /* a discard now, not counted as a probe */
			tier__submit(e, e->cache, op);
			return;
		}
	} else if (probe && img->ready == 0 && ++img->probe_errs <= LAZY_PROBE_TRIES) {
		/* not decided: the next pump probes it again (the scan may be past it) */
		tier__cache_error(e, rc);
		rc = 0;
	}
	if (rc < 0 && img->ready == 0) {
		tier__log(e, TIER_LOG_ERROR, "image %s: cache object %s: %s", img->name, op->oid,
			  strerror(-rc));
		img->ready = -EIO;   /* remember; reported when the window drains */
	}
	if (probe) {
		img->n_probes--;
		if (tier__bit(img->known, objno))
			img->probe_errs = 0;
		tier__bit_clear(img->probing, objno);
	}
	tier__job_free(j);
	img->rb_inflight--;
	if (probe)   /* (a scan's answer never decides an object a request waits for) */
		lazy_pump(img);
	rebuild_next(img);
	tier__deliver(e);
}

/* Submit j's STAT of objno's cache copy (its record into j->meta), counted in rb_inflight. */
static void stat_submit(struct tier_image *img, struct tier__job *j, uint64_t objno)
{
	j->objno = objno;
	j->op.opcode = TIER_STORE_STAT;
	tier__oid(img, objno, j->op.oid);
	j->op.meta_buf = j->meta;
	j->op.meta_cap = TIER_META_MAX;
	j->op.cb = rebuild_stat_cb;
	j->op.priv = j;
	img->rb_inflight++;
	tier__submit(img->e, img->e->cache, &j->op);
}

static void rebuild_next(struct tier_image *img)
{
	struct tier_engine *e = img->e;

	while (img->rb_inflight < REBUILD_WINDOW && img->next_name < img->n_names &&
	       img->ready == 0 && !img->parked) {
		const char *name = img->names[img->next_name++];
		struct tier__job *j;
		uint64_t objno;

		if (!parse_objno(img, name, &objno) || !scan_decides(img, objno))
			continue;   /* not the image's; or decided already, or a probe decides it */
		j = tier__job_new(e, TIER__J_REBUILD, img, NULL);
		if (!j) {
			img->ready = -ENOMEM;
			break;
		}
		if (e->nwords)
			j->snap = calloc(2 * e->nwords, 8);
		stat_submit(img, j, objno);
	}
	if (img->rb_inflight)
		return;
	if (img->ready < 0) {
		int rc = img->ready;
		img->ready = 0;
		image_loaded(img, rc);
	} else if (img->ready == 0 && (img->next_name >= img->n_names || img->parked)) {
		image_loaded(img, 0);   /* parked meanwhile: the rest is not read */
	}
}

/* A cache object that cannot hold an acknowledged write: remove it (counted in rb_inflight). */
static void rebuild_discard(struct tier_image *img, uint64_t objno)
{
	struct tier_engine *e = img->e;
	struct tier__job *j = tier__job_new(e, TIER__J_REBUILD, img, NULL);

	if (!j) {
		img->ready = -ENOMEM;
		return;
	}
	j->objno = objno;
	if (img->known)   /* requests for it wait for the REMOVE */
		tier__bit_set(img->probing, objno);
	tier__oid(img, objno, j->op.oid);
	tier__log(e, TIER_LOG_INFO, "image %s: discarding cache object %s (bad or incomplete "
		  "tier.meta)", img->name, j->op.oid);
	j->op.opcode = TIER_STORE_REMOVE;
	j->op.cb = rebuild_remove_cb;
	j->op.priv = j;
	img->rb_inflight++;
	tier__submit(e, e->cache, &j->op);
}

/* Adopt one SCAN entry as rebuild_stat_cb adopts a STAT's answer. */
static void rebuild_entry(struct tier_image *img, const struct tier_store_entry *ent,
			  uint64_t *scratch)
{
	struct tier_engine *e = img->e;
	uint64_t objno;
	int rc = ent->result;

	if (!parse_objno(img, ent->name, &objno) || rc == -ENOENT || !scan_decides(img, objno))
		return;   /* not one of this image's objects; gone since; or decided since */
	if (rc >= 0 || rc == -ERANGE)
		rc = rc < 0 ? -EINVAL : rebuild_adopt(img, objno, ent->version, ent->meta,
						      ent->meta_len, scratch);
	if (rc == -EINVAL) {
		rebuild_discard(img, objno);
	} else if (rc < 0 && img->ready == 0) {
		tier__log(e, TIER_LOG_ERROR, "image %s: cache object %s: %s", img->name,
			  ent->name, strerror(-rc));
		img->ready = -EIO;
	}
}

/*
 * A page of one shard of the SCAN: ask for the next one first (the store
 * reads it while this one is adopted), then adopt every entry.
 */
static void rebuild_scan_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_image *img = j->img;
	struct tier_engine *e = img->e;
	struct tier_store_entry *ents = op->entries;
	size_t n = op->n_entries;
	uint64_t *scratch = NULL;
	int rc = op->result;

	op->entries = NULL;
	if (rc < 0) {
		tier__cache_error(e, rc);
		if (img->ready == 0) {
			tier__log(e, TIER_LOG_ERROR, "image %s: scanning the cache pool: %s",
				  img->name, strerror(-rc));
			img->ready = rc;
		}
	} else if (op->cursor_out && img->ready == 0 && !img->parked) {
		op->cursor = op->cursor_out;
		tier__submit(e, e->cache, op);
		j = NULL;
	}
	if (rc >= 0 && n && e->nwords && !(scratch = calloc(2 * e->nwords, 8)))
		img->ready = -ENOMEM;
	for (size_t i = 0; rc >= 0 && i < n && img->ready == 0; i++)
		rebuild_entry(img, &ents[i], scratch);
	free(scratch);
	free(ents);
	if (j) {
		tier__job_free(j);
		img->rb_inflight--;
	}
	rebuild_next(img);
	tier__deliver(e);
}

static void rebuild_list_cb(struct tier_store_op *op)
{
	struct tier__job *j = op->priv;
	struct tier_image *img = j->img;
	struct tier_engine *e = img->e;
	int rc = op->result;

	if (rc < 0) {
		tier__cache_error(e, rc);
		if (img->ready == 0) {
			tier__log(e, TIER_LOG_ERROR, "image %s: listing the cache pool: %s",
				  img->name, strerror(-rc));
			img->ready = rc;
		}
	} else {
		img->names = op->names;
		img->n_names = op->n_names;
		op->names = NULL;
	}
	tier__job_free(j);
	img->rb_inflight--;   /* probes may still be out: rebuild_next ends the load */
	rebuild_next(img);
	tier__deliver(e);
}

/* A probe: STAT objno in the cache pool for the requests waiting for it. */
static void probe_start(struct tier_image *img, uint64_t objno)
{
	struct tier_engine *e = img->e;
	struct tier__job *j = tier__job_new(e, TIER__J_REBUILD, img, NULL);

	if (!j)
		return;   /* the scan, or a later probe, decides it */
	if (e->nwords && !(j->snap = calloc(2 * e->nwords, 8))) {
		tier__job_free(j);
		return;
	}
	j->step = J_PROBE;
	tier__bit_set(img->probing, objno);
	img->n_probes++;
	img->load_probes++;
	tier__count(e, img, load_probes, 1);
	stat_submit(img, j, objno);
}

/*
 * Loading lazily: must req wait (an object of it not decided yet)?  Starts
 * a probe for each such object that none decides yet, LAZY_PROBES at most
 * in flight (the next pump starts the rest); a request over more than
 * LAZY_REQ_OBJS objects waits for the scan.
 */
static bool lazy_wait(struct tier_image *img, const struct tier_request *req)
{
	uint64_t os = img->e->p.object_size;
	uint64_t first = req->off / os, last = (req->off + req->len - 1) / os;
	bool wait = false;

	if (req->type == TIER_REQ_FLUSH)
		return false;   /* covers what was acknowledged; nothing waiting is */
	if (img->ro && req->type != TIER_REQ_READ && req->type != TIER_REQ_CACHE)
		return false;   /* refused (EROFS) at once */
	if (last - first >= LAZY_REQ_OBJS)
		return true;
	for (uint64_t ob = first; ob <= last; ob++) {
		if (tier__bit(img->known, ob))
			continue;
		wait = true;
		if (!tier__bit(img->probing, ob) && img->n_probes < LAZY_PROBES)
			probe_start(img, ob);
	}
	return wait;
}

/*
 * Loading lazily: dispatch the waiting requests whose objects are decided,
 * in the order they came (a request that overtakes another one waiting is
 * one whose objects were known when it came: neither was answered yet).
 */
static void lazy_pump(struct tier_image *img)
{
	struct tier_engine *e = img->e;
	struct tier_request **pp = &img->pend_head, *r;
	bool sent = false;

	if (!img->known || img->parked || img->closed || img->ready != 0)
		return;
	e->in_submit++;
	img->pend_tail = NULL;
	while ((r = *pp)) {
		if (lazy_wait(img, r)) {
			img->pend_tail = r;
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		img->n_pend--;
		r->next = NULL;
		img->reqs++;
		dispatch_req(img, r);
		sent = true;
	}
	e->in_submit--;
	if (sent)
		tier__kick(e);
}

/* Start the rebuild of img's map: one job per shard, or a LIST. */
static int start_rebuild(struct tier_image *img)
{
	struct tier_engine *e = img->e;
	struct tier__job *js[REBUILD_SHARDS] = { NULL };
	unsigned nj = tier_store_can_scan(e->cache) ? REBUILD_SHARDS : 1;

	/* a store that scans pages of names with their meta (local): one job per shard */
	for (unsigned i = 0; i < nj; i++) {
		if (!(js[i] = tier__job_new(e, TIER__J_REBUILD, img, NULL))) {
			for (unsigned k = 0; k < i; k++)
				tier__job_free(js[k]);
			return -ENOMEM;
		}
	}
	img->ready = 0;
	img->rb_inflight = 0;
	img->next_name = 0;
	img->t_load_ns = tier__eng_now_ns(e);
	img->n_probes = img->probe_errs = 0;
	img->load_probes = 0;
	lazy_end(img);
	if (img->nobjs <= LAZY_MAX_OBJS) {   /* without them, requests wait for the whole scan */
		img->known = calloc((img->nobjs + 63) / 64, 8);
		img->probing = calloc((img->nobjs + 63) / 64, 8);
		if (!img->known || !img->probing)
			lazy_end(img);
	}
	for (unsigned i = 0; i < nj; i++) {
		struct tier__job *j = js[i];

		snprintf((char *)j->meta, TIER_META_MAX, "%s.", img->prefix);
		j->op.prefix = (const char *)j->meta;
		snprintf(j->op.oid, sizeof(j->op.oid), "%s", img->prefix);
		j->op.priv = j;
		if (tier_store_can_scan(e->cache)) {
			j->op.opcode = TIER_STORE_SCAN;
			j->op.len = REBUILD_PAGE;
			j->op.shard = i;
			j->op.nshards = nj;
			j->op.cb = rebuild_scan_cb;
		} else {
			j->op.opcode = TIER_STORE_LIST;
			j->op.cb = rebuild_list_cb;
		}
		img->rb_inflight++;
		tier__submit(e, e->cache, &j->op);
	}
	lazy_pump(img);   /* requests that waited in standby */
	return 0;
}

int tier_image_open(struct tier_engine *e, const struct tier_image_opts *o,
		    struct tier_image **out)
{
	struct tier_image *img = NULL, **na;
	int rc = -ENOMEM;

	*out = NULL;
	if (!o || !o->name || !*o->name || !o->object_prefix || !*o->object_prefix || !o->size ||
	    strlen(o->object_prefix) + 18 >= TIER_OID_MAX ||
	    (o->size - 1) / e->p.object_size >= (1ull << TIER__OBJNO_BITS))
		return -EINVAL;
	if (tier_engine_find_image(e, o->name))
		return -EEXIST;
	img = calloc(1, sizeof(*img));
	if (!img)
		goto out;
	img->e = e;
	img->name = strdup(o->name);
	img->prefix = strdup(o->object_prefix);
	if (!img->name || !img->prefix)
		goto out;
	img->size = o->size;
	img->nobjs = (o->size + e->p.object_size - 1) / e->p.object_size;
	img->ro = o->read_only;
	img->id = prefix_id(e, o->object_prefix);
	if (e->n_imgs == e->cap_imgs) {
		size_t nc = e->cap_imgs ? 2 * e->cap_imgs : 8;
		na = realloc(e->imgs, nc * sizeof(*na));
		if (!na)
			goto out;
		e->imgs = na;
		e->cap_imgs = nc;
	}
	img->parked = o->standby;
	if (!o->standby && (rc = start_rebuild(img)) < 0)
		goto out;
	e->imgs[e->n_imgs++] = img;
	*out = img;
	return 0;
out:
	tier__image_free(img);
	return rc;
}

int tier_image_park(struct tier_image *img, int pending_err)
{
	if (!img || img->closed)
		return -EINVAL;
	if (!img->parked) {
		img->parked = true;
		if (img->ready > 0)
			img->ready = 0;     /* requests from now on wait */
		tier__map_foreach(img->e, drop_entry, img);
		if (img->e->drain_img == img)
			img->e->drain_img = NULL;
		tier__log(img->e, TIER_LOG_INFO, "image %s: parked (%llu requests and %llu jobs "
			  "finishing)", img->name, (unsigned long long)img->reqs,
			  (unsigned long long)img->jobs);
	}
	if (pending_err)
		tier_image_fail_pending(img, pending_err);
	return 0;
}

int tier_image_parked(const struct tier_image *img)
{
	return img && img->parked && !img->reqs && !img->jobs && !img->n_entries;
}

int tier_image_load(struct tier_image *img)
{
	int rc;

	if (!img || img->closed || !tier_image_parked(img) || img->stopped)
		return -EINVAL;
	img->parked = false;
	img->n_cached = img->n_dirty = img->cached_bytes = img->dirty_bytes = 0;
	rc = start_rebuild(img);
	if (rc < 0)
		img->parked = true;
	return rc;
}

int tier_image_stop(struct tier_image *img, int err)
{
	int rc = tier_image_park(img, 0);

	if (rc < 0)
		return rc;
	img->stopped = err < 0 ? err : -EIO;
	img->ready = img->stopped;
	tier_image_fail_pending(img, img->ready);
	return 0;
}

bool tier_image_is_parked(const struct tier_image *img)
{
	return img && img->parked;
}

size_t tier_image_waiting(const struct tier_image *img)
{
	return img ? img->n_pend : 0;
}

void tier_image_fail_pending(struct tier_image *img, int err)
{
	struct tier_engine *e = img->e;
	struct tier_request *r;

	if (err >= 0)
		err = -EIO;
	while ((r = img->pend_head)) {
		img->pend_head = r->next;
		img->n_pend--;
		r->next = NULL;
		r->pending = 1;
		img->reqs++;
		tier__req_put(e, r, err);
	}
	img->pend_tail = NULL;
	tier__kick(e);
}

int tier_image_ready(const struct tier_image *img)
{
	return img->ready;
}

static void drop_entry(struct tier_engine *e, struct tier__obj *o, void *arg)
{
	if (TIER__KEY_ID(o->key) != ((struct tier_image *)arg)->id)
		return;
	tier__obj_release(e, o);
}

void tier_image_close(struct tier_image *img)
{
	if (!img || img->closed)
		return;
	img->closed = true;
	/* entries go now, or when their running job ends (tier__obj_release) */
	tier__map_foreach(img->e, drop_entry, img);
	if (img->e->drain_img == img)
		img->e->drain_img = NULL;
}

struct tier_image *tier_engine_find_image(struct tier_engine *e, const char *name)
{
	for (size_t i = 0; i < e->n_imgs; i++)
		if (!e->imgs[i]->closed && !strcmp(e->imgs[i]->name, name))
			return e->imgs[i];
	return NULL;
}

size_t tier_engine_images(struct tier_engine *e, struct tier_image **arr, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < e->n_imgs; i++) {
		if (e->imgs[i]->closed)
			continue;
		if (n < max)
			arr[n] = e->imgs[i];
		n++;
	}
	return n;
}

bool tier_image_read_only(const struct tier_image *img)
{
	return img->ro;
}

void tier_image_set_read_only(struct tier_image *img, bool ro)
{
	img->ro = ro;
}

const char *tier_image_name(const struct tier_image *img)
{
	return img->name;
}

uint64_t tier_image_size(const struct tier_image *img)
{
	return img->size;
}

static void count_req(struct tier_engine *e, struct tier_image *img,
		      const struct tier_request *req)
{
	switch (req->type) {
	case TIER_REQ_READ:
		tier__count(e, img, read_ops, 1);
		tier__count(e, img, read_bytes, req->len);
		break;
	case TIER_REQ_WRITE:
		tier__count(e, img, write_ops, 1);
		tier__count(e, img, write_bytes, req->len);
		break;
	case TIER_REQ_TRIM:
		tier__count(e, img, trim_ops, 1);
		tier__count(e, img, trim_bytes, req->len);
		break;
	case TIER_REQ_WRITE_ZEROES:
		tier__count(e, img, zero_ops, 1);
		tier__count(e, img, zero_bytes, req->len);
		break;
	case TIER_REQ_FLUSH: tier__count(e, img, flush_ops, 1); break;
	default: tier__count(e, img, cache_ops, 1); break;
	}
}

static int dispatch_req(struct tier_image *img, struct tier_request *req)
{
	struct tier_engine *e = img->e;
	uint64_t os = e->p.object_size, off = req->off, end = req->off + req->len;
	bool writes = req->type == TIER_REQ_WRITE || req->type == TIER_REQ_TRIM ||
		      req->type == TIER_REQ_WRITE_ZEROES;
	int rc;

	req->pending = 1;   /* held while splitting */
	if (img->ro && writes) {
		tier__req_put(e, req, -EROFS);
		return 0;
	}
	if (req->type == TIER_REQ_FLUSH) {
		req->pending = 0;
		tier__sync_start(e, img, req);
		return 0;
	}
	if (req->type == TIER_REQ_WRITE_ZEROES && (req->flags & TIER_REQ_F_FAST_ZERO) &&
	    e->nwords && (off % e->p.extent_size || (end % e->p.extent_size && end != img->size))) {
		tier__req_put(e, req, -ENOTSUP);   /* its edges may be written as data */
		return 0;
	}
	while (off < end) {
		uint64_t ob = off / os, oo = off % os;
		uint64_t n = os - oo < end - off ? os - oo : end - off;

		rc = tier__ext_enqueue(e, img, req, req->type, ob, (uint32_t)oo, (uint32_t)n,
				       req->buf ? (char *)req->buf + (off - req->off) : NULL);
		if (rc < 0) {
			if (!req->first_err)
				req->first_err = rc;
			break;
		}
		off += n;
	}
	tier__req_put(e, req, 0);
	return 0;
}

int tier_image_submit(struct tier_image *img, struct tier_request *req)
{
	struct tier_engine *e;
	bool data;
	int rc;

	if (!img || !req || !req->cb || img->closed || (unsigned)req->type >= TIER_REQ_TYPE_MAX)
		return -EINVAL;
	e = img->e;
	if (img->stopped)       /* fenced: nothing waits for a lock that never comes back */
		return img->stopped;
	data = req->type != TIER_REQ_FLUSH;
	if (data && (!req->len || req->off + req->len < req->off || req->off + req->len > img->size))
		return -EINVAL;
	if ((req->type == TIER_REQ_READ || req->type == TIER_REQ_WRITE) && !req->buf)
		return -EINVAL;
	req->pending = 0;
	req->first_err = 0;
	req->next = NULL;
	req->t_start_ns = tier__eng_now_ns(e);
	req->img = img;
	e->reqs_inflight++;
	count_req(e, img, req);
	if (img->ready == 0 && (!img->known || img->parked || lazy_wait(img, req))) {
		if (img->pend_tail)
			img->pend_tail->next = req;
		else
			img->pend_head = req;
		img->pend_tail = req;
		img->n_pend++;
		return 0;
	}
	img->reqs++;
	e->in_submit++;
	if (img->ready < 0) {
		req->pending = 1;
		tier__req_put(e, req, img->ready == -ESHUTDOWN ? -ESHUTDOWN : -EIO);
		rc = 0;
	} else {
		rc = dispatch_req(img, req);
	}
	e->in_submit--;
	tier__kick(e);
	return rc;
}
