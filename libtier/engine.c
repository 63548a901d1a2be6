/* SPDX-License-Identifier: MIT */
/*
 * libtier/engine.c - the engine instance: creation over two stores,
 * parameters, the periodic tick (throttle refill, hitset rotation and
 * archiving, agent, background sync), request completion delivery, the
 * admin entry points and the statistics snapshot.  It decides when client
 * callbacks run (never inside tier_image_submit) and when the cache pool
 * counts as degraded.  It must never block, print, or read time except
 * through opts.clock.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libtier/decide.h"
#include "libtier/engine_int.h"

#define DEGRADE_MS 10000   /* cache pool errors: no admissions for this long */

static uint64_t mono_ns(void *arg)
{
	struct timespec ts;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t tier__eng_now_ns(const struct tier_engine *e)
{
	return e->o.clock(e->o.clock_arg);
}

void tier__log(const struct tier_engine *e, enum tier_log_level lvl, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (!e->o.log)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	e->o.log(e->o.log_arg, lvl, buf);
}

void tier__submit(struct tier_engine *e, struct tier_store *st, struct tier_store_op *op)
{
	int rc = tier_store_submit(st, op);

	if (rc == 0)
		return;
	tier__log(e, TIER_LOG_ERROR, "store refused %s on %s: %s (an engine bug)",
		  tier_store_opcode_name(op->opcode), op->oid, strerror(-rc));
	if (tier_store_fail(st, op, rc) < 0)
		abort();   /* no callback to complete it through: cannot happen */
}

struct tier_image *tier__image_by_id(const struct tier_engine *e, uint32_t id)
{
	for (size_t i = 0; i < e->n_imgs; i++)
		if (e->imgs[i]->id == id)
			return e->imgs[i];
	return NULL;
}

void tier__oid(const struct tier_image *img, uint64_t objno, char *out)
{
	snprintf(out, TIER_OID_MAX, "%s.%016llx", img->prefix, (unsigned long long)objno);
}

void tier__req_put(struct tier_engine *e, struct tier_request *req, int err)
{
	if (err < 0 && !req->first_err)
		req->first_err = err;
	if (--req->pending)
		return;
	req->next = NULL;
	if (e->done_tail)
		e->done_tail->next = req;
	else
		e->done_head = req;
	e->done_tail = req;
}

void tier__deliver(struct tier_engine *e)
{
	struct tier_request *req;

	if (e->delivering || e->in_submit)
		return;
	e->delivering = true;
	while ((req = e->done_head)) {
		enum tier_lat_kind k = req->type == TIER_REQ_READ ? TIER_LAT_READ :
				       req->type == TIER_REQ_WRITE ? TIER_LAT_WRITE : TIER_LAT_OTHER;
		uint64_t now = tier__eng_now_ns(e);

		e->done_head = req->next;
		if (!e->done_head)
			e->done_tail = NULL;
		req->next = NULL;
		tier_lat_record(&e->st.lat[k], (now - req->t_start_ns) / 1000);
		if (req->img)
			tier_lat_record(&req->img->st.lat[k], (now - req->t_start_ns) / 1000);
		e->reqs_inflight--;
		if (req->img && req->img->reqs)
			req->img->reqs--;
		if (req->first_err)
			tier__count(e, req->img, errors, 1);
		req->cb(req, req->first_err);
	}
	e->delivering = false;
}

/* A STAT of a never-existing object on the cache pool; cb always runs. */
static void stat_nothing(struct tier_engine *e, struct tier_store_op *op, const char *oid,
			 tier_store_cb cb)
{
	memset(op, 0, sizeof(*op));
	op->opcode = TIER_STORE_STAT;
	snprintf(op->oid, sizeof(op->oid), "%s", oid);
	op->cb = cb;
	op->priv = e;
	e->jobs_inflight++;
	tier__submit(e, e->cache, op);
}

static void kick_cb(struct tier_store_op *op)
{
	struct tier_engine *e = op->priv;

	e->kick_busy = false;
	e->jobs_inflight--;
	tier__deliver(e);
}

/*
 * Requests that finish without touching a store (EROFS, a FLUSH with
 * nothing to sync, a CACHE hint on cached objects) must not wait for the
 * next tick: a cheap STAT on the cache pool brings a completion, and with it
 * the delivery, through the owner's completion queue.
 */
void tier__kick(struct tier_engine *e)
{
	if (!e->done_head || e->kick_busy)
		return;
	e->kick_busy = true;
	stat_nothing(e, &e->kick_op, "tier.kick", kick_cb);
}

struct tier__job *tier__job_new(struct tier_engine *e, int kind, struct tier_image *img,
				struct tier__obj *obj)
{
	struct tier__job *j = calloc(1, sizeof(*j) + TIER_META_MAX);

	if (!j)
		return NULL;
	j->e = e;
	j->kind = kind;
	j->img = img;
	j->obj = obj;
	e->jobs_inflight++;
	if (img)
		img->jobs++;
	return j;
}

void tier__job_free(struct tier__job *j)
{
	if (!j)
		return;
	j->e->jobs_inflight--;
	if (j->img)
		j->img->jobs--;
	if (j->obuf && j->e->n_obufs < sizeof(j->e->obufs) / sizeof(j->e->obufs[0]))
		j->e->obufs[j->e->n_obufs++] = j->buf;
	else
		free(j->buf);
	free(j->ops);
	free(j->snap);
	free(j);
}

int tier__job_obuf(struct tier__job *j)
{
	struct tier_engine *e = j->e;

	j->buf = e->n_obufs ? e->obufs[--e->n_obufs] : malloc(e->p.object_size);
	j->obuf = j->buf != NULL;
	return j->buf ? 0 : -ENOMEM;
}

int tier__job_buf(struct tier__job *j, uint32_t off, uint32_t len)
{
	if (len >= j->e->p.object_size)
		return tier__job_obuf(j);
	/* a 4 KiB read fill need not hold 4 MiB (nor take one of the pooled ones) */
	j->buf = malloc(len ? len : 1);
	j->obuf = false;
	j->boff = off;
	return j->buf ? 0 : -ENOMEM;
}

void tier__job_op(struct tier__job *j, struct tier_store_op *op, enum tier_store_opcode opc,
		  tier_store_cb cb)
{
	memset(op, 0, sizeof(*op));
	op->opcode = opc;
	op->cb = cb;
	op->priv = j;
	tier__oid(j->img, TIER__KEY_OBJNO(j->obj->key), op->oid);
}

void tier__cache_error(struct tier_engine *e, int err)
{
	bool was = tier__degraded(e);

	e->st.cache_errors++;
	/* fenced (a gate, or this client blocklisted): not the pool's health */
	if (err == -ESHUTDOWN)
		return;
	e->degraded_until_ms = tier__eng_now_ms(e) + DEGRADE_MS;
	if (err == -ETIMEDOUT)
		e->cache_down_until_ms = e->degraded_until_ms;   /* until a probe answers */
	if (!was)
		tier__log(e, TIER_LOG_WARN, "cache pool error (%s): proxying new misses for %d s",
			  strerror(-err), DEGRADE_MS / 1000);
}

static void probe_cb(struct tier_store_op *op)
{
	struct tier_engine *e = op->priv;

	e->probe_busy = false;
	e->jobs_inflight--;
	if (op->result == -ETIMEDOUT)
		e->cache_down_until_ms = tier__eng_now_ms(e) + DEGRADE_MS;
	else
		e->cache_down_until_ms = 0;   /* it answers again: stop failing fast */
	tier__deliver(e);
}

/*
 * While the cache pool is down, ask it once a second (a STAT of an object
 * that never exists): the fail-fast window ends as soon as it answers, not
 * DEGRADE_MS after the last timeout.
 */
static void cache_probe(struct tier_engine *e)
{
	uint64_t now = tier__eng_now_ms(e);

	if (!tier__cache_down(e) || e->probe_busy || now < e->probe_next_ms)
		return;
	e->probe_next_ms = now + 1000;
	e->probe_busy = true;
	stat_nothing(e, &e->probe_op, "tier.probe", probe_cb);
}

bool tier__cache_down(const struct tier_engine *e)
{
	return e->cache_down_until_ms && tier__eng_now_ms(e) < e->cache_down_until_ms;
}

bool tier__degraded(const struct tier_engine *e)
{
	return e->degraded_until_ms && tier__eng_now_ms(e) < e->degraded_until_ms;
}

void tier__base_latency(struct tier_engine *e, uint64_t ns)
{
	double us = (double)ns / 1000.0;

	if (e->base_lat_ewma == 0.0)
		e->base_lat_ewma = us;
	else
		e->base_lat_ewma = 0.9 * e->base_lat_ewma + 0.1 * us;
	/* the floor follows the ewma down at once and creeps up slowly */
	if (e->base_lat_floor == 0.0 || e->base_lat_ewma < e->base_lat_floor)
		e->base_lat_floor = e->base_lat_ewma;
	else
		e->base_lat_floor *= 1.0005;
}

/*
 * Capacity handed to the eviction policy: 0 = follow the number of objects it
 * tracks (the cached ones), so live target changes need no new policy.
 */
uint64_t tier__policy_capacity(const struct tier_engine *e)
{
	(void)e;
	return 0;
}

/* Expected inserts in the first period: the objects the cache can hold, x4. */
static uint64_t hitset_capacity(const struct tier_params *p)
{
	uint64_t c = p->target_max_bytes / p->object_size;

	if (p->target_max_objects && (!c || p->target_max_objects < c))
		c = p->target_max_objects;
	c *= 4;
	return c < 1024 ? 1024 : c > (1ull << 26) ? (1ull << 26) : c;
}

static int check_params(const struct tier_params *p, uint32_t *nbits)
{
	if (!p->object_size || !p->extent_size || p->object_size > (64ull << 20) ||
	    p->extent_size > p->object_size)
		return -EINVAL;
	if (p->cache_target_dirty_ratio > p->cache_target_dirty_high_ratio)
		return -EINVAL;
	if ((int)p->cache_mode < 0 || p->cache_mode > TIER_MODE_NONE ||
	    (int)p->promote_granularity < 0 || p->promote_granularity > TIER_GRAN_EXTENT ||
	    (int)p->evict_policy < 0 || p->evict_policy > TIER_EVICT_ARC ||
	    (int)p->admission < 0 || p->admission > TIER_ADMIT_TINYLFU)
		return -EINVAL;
	if (!p->hit_set_count || !p->hit_set_period || !p->agent_max_ops || !p->agent_max_low_ops)
		return -EINVAL;
	*nbits = (uint32_t)((p->object_size + p->extent_size - 1) / p->extent_size);
	if (tier_meta_size(*nbits) > TIER_META_MAX) {
		if (p->promote_granularity == TIER_GRAN_EXTENT)
			return -EINVAL;
		*nbits = 0;   /* extent bitmaps impossible: object mode only */
	}
	return 0;
}

int tier_engine_create(const struct tier_engine_opts *o, struct tier_engine **out)
{
	struct tier_engine *e = NULL;
	uint32_t nbits;
	int rc;

	*out = NULL;
	if (!o || !o->base || !o->cache || check_params(&o->params, &nbits) < 0)
		return -EINVAL;
	if (o->hitset_tag && (!o->hitset_tag[0] || strlen(o->hitset_tag) > 64 ||
			      strspn(o->hitset_tag, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				     "0123456789_-") != strlen(o->hitset_tag)))
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->o = *o;
	e->o.hitset_tag = NULL;     /* not kept: the prefix is */
	snprintf(e->hs_prefix, sizeof(e->hs_prefix), "tier.hitset.%s%s",
		 o->hitset_tag ? o->hitset_tag : "", o->hitset_tag ? "." : "");
	if (!e->o.clock)
		e->o.clock = mono_ns;
	e->p = o->params;
	e->base = o->base;
	e->cache = o->cache;
	e->sync_base = tier_store_volatile_acks(o->base);
	e->sync_cache = tier_store_volatile_acks(o->cache);
	e->nbits = nbits;
	e->nwords = tier_meta_words(nbits);
	e->meta_cap = (tier_meta_size(nbits) + 15) & ~(size_t)15;
	e->ext_size = (sizeof(struct tier__ext) + 2 * e->meta_cap + 3 * e->nwords * 8 + 15) &
		      ~(size_t)15;
	rc = tier__map_init(e);
	if (rc < 0)
		goto out;
	rc = tier__hitsets_create((unsigned)e->p.hit_set_count, e->p.hit_set_fpp,
				  hitset_capacity(&e->p), tier__eng_now_ms(e), &e->hs);
	if (rc < 0)
		goto out;
	rc = tier__policy_create(e->p.evict_policy, tier__map_policy_host(e), e->hs, &e->p,
				 tier__policy_capacity(e), &e->pol);
	if (rc < 0)
		goto out;
	/* the sketch only counts under tinylfu: made when that admission is first set */
	e->sk_objects = hitset_capacity(&e->p);
	if (e->p.admission == TIER_ADMIT_TINYLFU &&
	    (rc = tier__sketch_create(e->sk_objects, &e->sk)) < 0)
		goto out;
	e->tb_last_ns = tier__eng_now_ns(e);
	e->tb_bytes = (double)(e->p.promote_max_bytes_sec > e->p.object_size ?
			       e->p.promote_max_bytes_sec : e->p.object_size);
	e->tb_objs = e->p.promote_max_objects_sec > 1 ? (double)e->p.promote_max_objects_sec : 1.0;
	e->fb_bytes = tier__decide_fill_budget_cap(&e->p);
	tier__hitsets_start_load(e);
	*out = e;
	return 0;
out:
	tier_engine_destroy(e);
	return rc;
}

void tier_engine_destroy(struct tier_engine *e)
{
	if (!e)
		return;
	tier__policy_destroy(e->pol);
	tier__sketch_destroy(e->sk);
	tier__hitsets_destroy(e->hs);
	tier__map_fini(e);
	tier__ext_pool_fini(e);
	while (e->n_obufs)
		free(e->obufs[--e->n_obufs]);
	for (size_t i = 0; i < e->n_imgs; i++)
		tier__image_free(e->imgs[i]);
	free(e->imgs);
	free(e->unsync);
	free(e->hot);
	for (size_t i = 0; i < e->n_hs_names; i++)
		free(e->hs_names[i]);
	free(e->hs_names);
	free(e);
}

static void reinsert(struct tier_engine *e, struct tier__obj *o, void *arg)
{
	(void)arg;
	if (o->state != TIER__ABSENT)
		e->pol->ops->insert(e->pol, o->key, tier__obj_handle(e, o), o->mtime_ms);
}

void tier_engine_set_debug(struct tier_engine *e, bool on)
{
	e->debug = on;
}

int tier_engine_set_params(struct tier_engine *e, const struct tier_params *p)
{
	struct tier__policy *np = NULL;
	uint32_t nbits;
	int rc;

	if (check_params(p, &nbits) < 0 || p->object_size != e->p.object_size ||
	    p->extent_size != e->p.extent_size)
		return -EINVAL;
	if (p->admission == TIER_ADMIT_TINYLFU && !e->sk &&
	    (rc = tier__sketch_create(e->sk_objects, &e->sk)) < 0)
		return rc;
	if (p->evict_policy != e->p.evict_policy) {
		rc = tier__policy_create(p->evict_policy, tier__map_policy_host(e), e->hs, &e->p,
					 tier__policy_capacity(e), &np);
		if (rc < 0)
			return rc;
	}
	e->p = *p;
	tier__hitsets_configure(e->hs, (unsigned)p->hit_set_count, p->hit_set_fpp);
	if (np) {
		tier__policy_destroy(e->pol);
		e->pol = np;
		tier__map_foreach(e, reinsert, NULL);
	}
	tier__agent_run(e);
	return 0;
}

const struct tier_params *tier_engine_params(const struct tier_engine *e)
{
	return &e->p;
}

uint64_t tier_engine_tick(struct tier_engine *e)
{
	tier__deliver(e);
	tier__tokens_refill(e);
	tier__hitsets_tick(e);
	tier__agent_hot_expire(e);
	cache_probe(e);
	tier__agent_run(e);
	tier__log_flush_suppressed(e);
	if (e->n_unsync > 4096 && tier__eng_now_ms(e) >= e->sync_bg_pause_until_ms)
		tier__sync_background(e);
	tier__deliver(e);
	if (e->done_head)
		return 1;
	if (e->flush_mode != TIER_FLUSH_IDLE || e->evict_mode != TIER_EVICT_IDLE ||
	    e->drain_flush || e->drain_evict)
		return 10;
	return e->p.hit_set_period < 100 ? e->p.hit_set_period : 100;
}

bool tier_engine_idle(const struct tier_engine *e)
{
	return !e->reqs_inflight && !e->jobs_inflight && !e->exts_inflight && !e->done_head;
}

void tier_engine_quiesce(struct tier_engine *e)
{
	e->quiesced = true;
}

/* ---- admin ---- */

int tier_engine_flush_all(struct tier_engine *e, struct tier_image *img)
{
	e->drain_img = img;
	e->drain_all = img == NULL;
	e->drain_flush = true;
	tier__agent_run(e);
	return 0;
}

int tier_engine_evict_all(struct tier_engine *e, struct tier_image *img)
{
	e->drain_img = img;
	e->drain_all = img == NULL;
	e->drain_evict = true;
	tier__agent_run(e);
	return 0;
}

int tier_engine_promote(struct tier_engine *e, struct tier_image *img, uint64_t off, uint64_t len)
{
	uint64_t os = e->p.object_size;
	int rc = 0;

	if (!img || img->closed || !len || off + len < off || off + len > img->size)
		return -EINVAL;
	if (img->ready != 1)
		return -EAGAIN;
	for (uint64_t ob = off / os; ob <= (off + len - 1) / os && rc == 0; ob++)
		rc = tier__ext_enqueue(e, img, NULL, TIER_REQ_CACHE, ob, 0, 0, NULL);
	return rc;
}

void tier_engine_get_stats(const struct tier_engine *e, struct tier_stats *out)
{
	*out = e->st;
	out->cached_objects = e->n_cached;
	out->cached_bytes = e->cached_bytes;
	out->dirty_objects = e->n_dirty;
	out->dirty_bytes = e->dirty_bytes;
	out->flush_mode = (uint64_t)e->flush_mode;
	out->evict_mode = (uint64_t)e->evict_mode;
	out->evict_effort_pct = e->effort_pct;
	out->agent_ops_in_flight = e->agent_flushing + e->agent_evicting;
	out->requests_in_flight = e->reqs_inflight;
	out->agent_turnover = tier__agent_turnover(e);
	out->dirty_ratio_ppm = (uint64_t)(tier__dirty_ratio(e) * 1e6);
	out->full_ratio_ppm = (uint64_t)(tier__full_ratio(e) * 1e6);
}

void tier_image_get_stats(const struct tier_image *img, struct tier_stats *out)
{
	*out = img->st;
	out->cached_objects = img->n_cached;
	out->cached_bytes = img->cached_bytes;
	out->dirty_objects = img->n_dirty;
	out->dirty_bytes = img->dirty_bytes;
}

int tier_engine_archive_hitsets(struct tier_engine *e)
{
	return tier__hitsets_archive_now(e);
}

int tier_engine_hitset_info(const struct tier_engine *e, struct tier_hitset_info *out,
			    size_t max)
{
	return tier__hitsets_info(e->hs, out, max);
}

/* The policy's nodes and ghosts, and the admission sketch (tinylfu only). */
static size_t policy_bytes(const struct tier_engine *e)
{
	return tier__policy_bytes(e->pol) + (e->sk ? tier__sketch_bytes(e->sk) : 0);
}

size_t tier_engine_policy_bytes_per_object(const struct tier_engine *e)
{
	size_t b = policy_bytes(e);

	return e->n_cached ? b / e->n_cached : b;
}

/*
 * All of it over the cached objects: the slab's chunks as allocated
 * (entries with their bitmaps, free ones included), the bucket heads, the
 * policy's nodes and ghosts, the sketch.
 */
size_t tier_engine_bytes_per_object(const struct tier_engine *e)
{
	size_t table = (e->ht_mask + 1) * sizeof(*e->ht);

	if (!e->n_cached)
		return e->obj_size + sizeof(*e->ht);
	return (size_t)((e->obj_mem + table + policy_bytes(e)) / e->n_cached);
}
