/* SPDX-License-Identifier: MIT */
/*
 * libtier/store/mem.c - the in-RAM backend for unit tests and tier-sim.
 * Deterministic and single-threaded: an op takes effect when submitted and
 * completes either at once (pushed on the queue, delivered by the next
 * drain) or, in virtual time, when tier_store_mem_advance() passes the due
 * time the device model gave it.  It must never be used from two threads.
 *
 * The power-cut model (tier_mem_opts.powercut_model, off by default) keeps,
 * beside the visible state every op sees, what a power cut could leave,
 * following the Durability contract of tier/store.h and no more:
 *  - per object (one "incarnation" of a name): its durable bytes, the log of
 *    its WRITE/ZERO effects since its data was last synced (each kept or lost
 *    on its own, kept ones applied in order over the durable bytes; a lost
 *    one leaves the durable bytes there, zeros past the durable size), and
 *    every meta+version value it had since its meta was last synced (mv[0]
 *    is the durable one; a cut keeps any one of them);
 *  - per name whose existence changed since it was last synced: the list of
 *    existence states since then (hist[0] durable, NULL = absent, the last
 *    one current).  A remove keeps the removed incarnation there, so a cut
 *    may bring it back (with its own durable state plus any subset of its
 *    volatile effects); a re-create is a new incarnation.
 * Syncs: F_FUA on a successful op syncs the object's data, meta and name
 * when the op takes effect (READ/STAT with F_FUA: the barrier of one
 * object); a REMOVE with F_FUA that succeeds or finds nothing (-ENOENT) also
 * syncs every name of the pool; WRITE/ZERO with F_META|F_ORDERED and
 * SETMETA with F_ORDERED sync the object's data (a write's own included)
 * before setting the meta, which stays volatile; a pre_meta is set and
 * synced before a write's data is touched.  Ops that fail change and sync nothing.
 * tier_store_mem_power_cut() then replaces the visible state by one such
 * outcome (seeded random, or the keep-all / keep-none extremes), all
 * durable.  The logs are capped per object (MEM_PC_MAX_*): past the cap the
 * oldest entry is folded into the durable state, as a kernel's writeback
 * would; that is always a legal outcome.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tier/store.h"
#include "store_internal.h"
#include "heap.h"

/* Power-cut model: caps of the per-object logs (see the opening comment). */
#define MEM_PC_MAX_WRITES 1024
#define MEM_PC_MAX_METAS  64
#define MEM_PC_MAX_NAMES  64

struct mem_wr {                /* one volatile WRITE/ZERO effect */
	uint64_t off, len;
	uint8_t *buf;              /* NULL: zeros (ZERO, or no_data) */
};

struct mem_mv {                /* one meta+version value */
	uint8_t *meta;
	uint32_t meta_len;
	uint64_t version;
};

struct mem_obj {
	struct mem_obj *next;      /* hash chain */
	char *oid;
	uint8_t *data;
	uint64_t size, cap;
	uint8_t *meta;
	uint32_t meta_len;
	uint64_t version;
	uint64_t mtime_ns;
	/* power-cut model only */
	uint8_t *ddata;            /* durable bytes [0, dsize) */
	uint64_t dsize;
	struct mem_wr *wl;         /* volatile data effects, oldest first */
	size_t nwl, capwl;
	struct mem_mv *mv;         /* mv[0] durable, then every later value */
	size_t nmv, capmv;
};

/* Power-cut model: a name whose existence changed since it was last synced. */
struct mem_name {
	struct mem_name *next;     /* hash chain */
	char *oid;
	struct mem_obj **hist;     /* hist[0] durable ... hist[n-1] current; NULL = absent */
	size_t n, cap;
};

struct pending {
	uint64_t due;
	uint64_t seq;
	struct tier_store_op *op;
	int result;
};

struct mem_be {
	struct tier_store *st;
	struct mem_obj **buckets;
	size_t nbuckets, nobjs;
	uint64_t bytes;
	bool no_data, virtual_time;
	struct tier_devmodel *dm;
	uint64_t now_ns;           /* virtual clock, advanced by tier_store_mem_advance */
	struct pending *heap;
	size_t nheap, capheap;
	uint64_t seq;
	/* power-cut model */
	bool pc;
	struct mem_name **names;   /* MEM_NAME_BUCKETS chains */
	/* shared crash point (tier_store_mem_set_crash_clock) */
	uint64_t *clock;
	uint64_t stop_at;
};

#define MEM_NAME_BUCKETS 1024

static struct mem_obj **find_slot(struct mem_be *m, const char *oid)
{
	struct mem_obj **pp = &m->buckets[tier__hash_str(oid) & (m->nbuckets - 1)];

	while (*pp && strcmp((*pp)->oid, oid) != 0)
		pp = &(*pp)->next;
	return pp;
}

static int grow_table(struct mem_be *m)
{
	size_t n = m->nbuckets * 2;
	struct mem_obj **nb = calloc(n, sizeof(*nb));

	if (!nb)
		return -ENOMEM;
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct mem_obj *o = m->buckets[i], *next;

		for (; o; o = next) {
			size_t b = tier__hash_str(o->oid) & (n - 1);

			next = o->next;
			o->next = nb[b];
			nb[b] = o;
		}
	}
	free(m->buckets);
	m->buckets = nb;
	m->nbuckets = n;
	return 0;
}

static void pc_name_change(struct mem_be *m, const char *oid, struct mem_obj *prev,
			   struct mem_obj *cur);

static struct mem_obj *get_obj(struct mem_be *m, const char *oid, int create, int *err)
{
	struct mem_obj **pp = find_slot(m, oid), *o;

	*err = 0;
	if (*pp || !create)
		return *pp;
	if (m->nobjs >= m->nbuckets && grow_table(m) == 0)
		pp = find_slot(m, oid);
	o = calloc(1, sizeof(*o));
	if (!o || !(o->oid = strdup(oid))) {
		free(o);
		*err = -ENOMEM;
		return NULL;
	}
	*pp = o;
	m->nobjs++;
	if (m->pc)
		pc_name_change(m, oid, NULL, o);
	return o;
}

static void free_wl(struct mem_obj *o)
{
	for (size_t i = 0; i < o->nwl; i++)
		free(o->wl[i].buf);
	o->nwl = 0;
}

static void free_mv(struct mem_obj *o)
{
	for (size_t i = 0; i < o->nmv; i++)
		free(o->mv[i].meta);
	o->nmv = 0;
}

static void free_obj(struct mem_obj *o)
{
	free(o->oid);
	free(o->data);
	free(o->meta);
	free(o->ddata);
	free_wl(o);
	free(o->wl);
	free_mv(o);
	free(o->mv);
	free(o);
}

/* Insert an object that is in no chain (its name absent from the table). */
static void table_insert(struct mem_be *m, struct mem_obj *o)
{
	struct mem_obj **pp;

	if (m->nobjs >= m->nbuckets)
		(void)grow_table(m);   /* on ENOMEM the chains just get longer */
	pp = find_slot(m, o->oid);
	o->next = NULL;
	*pp = o;
	m->nobjs++;
}

static void table_unlink(struct mem_be *m, struct mem_obj *o)
{
	struct mem_obj **pp = find_slot(m, o->oid);

	*pp = o->next;
	o->next = NULL;
	m->nobjs--;
}

static int ensure_size(struct mem_be *m, struct mem_obj *o, uint64_t end)
{
	if (end > o->size) {
		m->bytes += end - o->size;
		if (!m->no_data && end > o->cap) {
			uint64_t cap = o->cap ? o->cap : 4096;
			uint8_t *d;

			while (cap < end)
				cap *= 2;
			d = realloc(o->data, cap);
			if (!d)
				return -ENOMEM;
			memset(d + o->cap, 0, cap - o->cap);
			o->data = d;
			o->cap = cap;
		}
		o->size = end;
	}
	return 0;
}

static int set_meta(struct mem_obj *o, const struct tier_store_op *op)
{
	uint8_t *mb = NULL;

	if (op->meta_len) {
		mb = malloc(op->meta_len);
		if (!mb)
			return -ENOMEM;
		memcpy(mb, op->meta, op->meta_len);
	}
	free(o->meta);
	o->meta = mb;
	o->meta_len = op->meta_len;
	o->version = op->version;
	return 0;
}

/* Guards: checked before any change, so a failed guard changes nothing. */
static int check_guard(const struct mem_obj *o, const struct tier_store_op *op)
{
	if ((op->flags & TIER_STORE_F_GUARD) && (!o || o->version != op->expect_version))
		return -ECANCELED;
	if ((op->flags & TIER_STORE_F_EXCL) && o)
		return -EEXIST;
	return 0;
}

/* ---- the power-cut model (see the opening comment) ---- */

static uint64_t pc_rand(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Which of n states (0 = durable, n-1 = current) a cut keeps. */
static size_t pc_pick(enum tier_mem_cut mode, uint64_t *rng, size_t n)
{
	if (mode == TIER_MEM_CUT_KEEP_ALL)
		return n - 1;
	if (mode == TIER_MEM_CUT_KEEP_NONE)
		return 0;
	return (size_t)(pc_rand(rng) % n);
}

/* The object's data is durable: nwl == 0 means "durable == visible". */
static void pc_sync_data(struct mem_obj *o)
{
	free_wl(o);
	free(o->ddata);
	o->ddata = NULL;
	o->dsize = 0;
}

static void pc_sync_meta(struct mem_obj *o)
{
	free_mv(o);
}

/* Log a WRITE/ZERO before the visible bytes change. */
static int pc_log_data(struct mem_be *m, struct mem_obj *o, const struct tier_store_op *op)
{
	struct mem_wr w = { .off = op->off, .len = op->len };

	if (o->nwl >= MEM_PC_MAX_WRITES)
		pc_sync_data(o);             /* writeback caught up */
	if (o->nwl == o->capwl) {
		size_t cap = o->capwl ? o->capwl * 2 : 8;
		struct mem_wr *wl = realloc(o->wl, cap * sizeof(*wl));

		if (!wl)
			return -ENOMEM;
		o->wl = wl;
		o->capwl = cap;
	}
	if (o->nwl == 0 && !m->no_data && o->size) {
		o->ddata = malloc(o->size);
		if (!o->ddata)
			return -ENOMEM;
		memcpy(o->ddata, o->data, o->size);
	}
	if (op->opcode == TIER_STORE_WRITE && !m->no_data) {
		w.buf = malloc(op->len);
		if (!w.buf) {
			if (o->nwl == 0)
				pc_sync_data(o);
			return -ENOMEM;
		}
		memcpy(w.buf, op->buf, op->len);
	}
	if (o->nwl == 0)
		o->dsize = o->size;
	o->wl[o->nwl++] = w;
	return 0;
}

/* Undo pc_log_data (the op failed before changing anything). */
static void pc_unlog_data(struct mem_obj *o)
{
	free(o->wl[--o->nwl].buf);
	if (o->nwl == 0)
		pc_sync_data(o);
}

static int mv_copy(struct mem_mv *v, const void *meta, uint32_t len, uint64_t version)
{
	v->meta = NULL;
	v->meta_len = len;
	v->version = version;
	if (len) {
		v->meta = malloc(len);
		if (!v->meta)
			return -ENOMEM;
		memcpy(v->meta, meta, len);
	}
	return 0;
}

/* Log a new meta+version before the visible one changes. */
static int pc_log_meta(struct mem_obj *o, const struct tier_store_op *op)
{
	if (o->nmv >= MEM_PC_MAX_METAS) {
		/* writeback caught up: the current value is durable */
		for (size_t i = 0; i + 1 < o->nmv; i++)
			free(o->mv[i].meta);
		o->mv[0] = o->mv[o->nmv - 1];
		o->nmv = 1;
	}
	if (o->nmv + 2 > o->capmv) {
		size_t cap = o->capmv ? o->capmv * 2 : 4;
		struct mem_mv *mv = realloc(o->mv, cap * sizeof(*mv));

		if (!mv)
			return -ENOMEM;
		o->mv = mv;
		o->capmv = cap;
	}
	if (o->nmv == 0) {   /* the durable value: the current one */
		if (mv_copy(&o->mv[0], o->meta, o->meta_len, o->version) < 0)
			return -ENOMEM;
		o->nmv = 1;
	}
	if (mv_copy(&o->mv[o->nmv], op->meta, op->meta_len, op->version) < 0) {
		if (o->nmv == 1)
			pc_sync_meta(o);
		return -ENOMEM;
	}
	o->nmv++;
	return 0;
}

static void pc_unlog_meta(struct mem_obj *o)
{
	free(o->mv[--o->nmv].meta);
	if (o->nmv == 1)
		pc_sync_meta(o);
}

static struct mem_name **name_slot(struct mem_be *m, const char *oid)
{
	struct mem_name **pp = &m->names[tier__hash_str(oid) & (MEM_NAME_BUCKETS - 1)];

	while (*pp && strcmp((*pp)->oid, oid) != 0)
		pp = &(*pp)->next;
	return pp;
}

/* Forget a name's history, freeing every incarnation in it but keep. */
static void pc_name_drop(struct mem_name **pp, const struct mem_obj *keep)
{
	struct mem_name *nm = *pp;

	for (size_t i = 0; i < nm->n; i++)
		if (nm->hist[i] && nm->hist[i] != keep)
			free_obj(nm->hist[i]);
	*pp = nm->next;
	free(nm->hist);
	free(nm->oid);
	free(nm);
}

/* The name's existence is durable (its current state). */
static void pc_name_sync(struct mem_be *m, const char *oid)
{
	struct mem_name **pp = name_slot(m, oid);

	if (*pp)
		pc_name_drop(pp, (*pp)->hist[(*pp)->n - 1]);
}

/* Every name of the pool is durable: the FUA REMOVE barrier. */
static void pc_names_sync_all(struct mem_be *m)
{
	for (size_t b = 0; b < MEM_NAME_BUCKETS; b++)
		while (m->names[b])
			pc_name_drop(&m->names[b], m->names[b]->hist[m->names[b]->n - 1]);
}

/*
 * The name went from prev to cur (a create: prev NULL; a remove: cur NULL,
 * and prev, out of the table, now belongs to the history).  When memory
 * runs out the change is simply durable at once (legal, only stronger).
 */
static void pc_name_change(struct mem_be *m, const char *oid, struct mem_obj *prev,
			   struct mem_obj *cur)
{
	struct mem_name **pp = name_slot(m, oid), *nm = *pp;

	if (!nm) {
		nm = calloc(1, sizeof(*nm));
		if (nm)
			nm->oid = strdup(oid);
		if (nm && nm->oid)
			nm->hist = malloc(4 * sizeof(*nm->hist));
		if (!nm || !nm->hist) {
			if (nm)
				free(nm->oid);
			free(nm);
			if (prev)
				free_obj(prev);
			return;
		}
		nm->cap = 4;
		nm->hist[nm->n++] = prev;
		*pp = nm;
	} else if (nm->n >= MEM_PC_MAX_NAMES) {
		/* writeback caught up: the state before this change is durable */
		for (size_t i = 0; i + 1 < nm->n; i++)
			if (nm->hist[i])
				free_obj(nm->hist[i]);
		nm->hist[0] = nm->hist[nm->n - 1];
		nm->n = 1;
	}
	if (nm->n == nm->cap) {
		struct mem_obj **h = realloc(nm->hist, 2 * nm->cap * sizeof(*h));

		if (!h) {
			pc_name_drop(pp, cur);
			return;
		}
		nm->hist = h;
		nm->cap *= 2;
	}
	nm->hist[nm->n++] = cur;
}

/* After an op took effect: the syncs its flags ask for. */
static void pc_after(struct mem_be *m, const struct tier_store_op *op, int result)
{
	struct mem_obj *o;

	if (!(op->flags & TIER_STORE_F_FUA) || op->opcode == TIER_STORE_LIST)
		return;
	if (op->opcode == TIER_STORE_REMOVE) {
		if (result >= 0 || result == -ENOENT)
			pc_names_sync_all(m);
		return;
	}
	if (result < 0)
		return;
	o = *find_slot(m, op->oid);
	if (!o)
		return;
	pc_sync_data(o);
	pc_sync_meta(o);
	pc_name_sync(m, op->oid);
}

/*
 * A cut: the object keeps a subset of its logged writes over its durable
 * bytes and one of its meta values, and all of that is durable now.  Out of
 * memory it keeps everything (the visible state), a legal outcome too.
 */
static void pc_materialize(struct mem_be *m, struct mem_obj *o, enum tier_mem_cut mode,
			   uint64_t *rng)
{
	if (o->nwl) {
		uint8_t *kept = malloc(o->nwl), *d = NULL;
		uint64_t size = o->dsize;

		for (size_t i = 0; kept && i < o->nwl; i++) {
			const struct mem_wr *w = &o->wl[i];

			kept[i] = mode == TIER_MEM_CUT_KEEP_ALL ||
				  (mode == TIER_MEM_CUT_RANDOM && (pc_rand(rng) & 1));
			if (kept[i] && w->off + w->len > size)
				size = w->off + w->len;
		}
		if (kept && !m->no_data && size) {
			d = calloc(1, size);
			if (d) {
				if (o->dsize)
					memcpy(d, o->ddata, o->dsize);
				for (size_t i = 0; i < o->nwl; i++) {
					const struct mem_wr *w = &o->wl[i];

					if (!kept[i])
						continue;
					if (w->buf)
						memcpy(d + w->off, w->buf, w->len);
					else
						memset(d + w->off, 0, w->len);
				}
			}
		}
		if (kept && (d || m->no_data || !size)) {
			free(o->data);
			o->data = d;
			o->cap = m->no_data ? 0 : size;
			o->size = size;
		}
		free(kept);
		pc_sync_data(o);
	}
	if (o->nmv) {
		struct mem_mv *v = &o->mv[pc_pick(mode, rng, o->nmv)];

		free(o->meta);
		o->meta = v->meta;
		o->meta_len = v->meta_len;
		o->version = v->version;
		v->meta = NULL;
		pc_sync_meta(o);
	}
}

static int do_list(struct mem_be *m, struct tier_store_op *op)
{
	size_t plen = strlen(op->prefix), n = 0;
	char **names = calloc(m->nobjs + 1, sizeof(*names));

	if (!names)
		return -ENOMEM;
	for (size_t i = 0; i < m->nbuckets; i++) {
		for (struct mem_obj *o = m->buckets[i]; o; o = o->next) {
			if (strncmp(o->oid, op->prefix, plen) != 0)
				continue;
			names[n] = strdup(o->oid);
			if (!names[n]) {
				tier_store_list_free(names, n);
				return -ENOMEM;
			}
			n++;
		}
	}
	op->names = names;
	op->n_names = n;
	return (int)n;
}

/* Apply the op to the in-RAM state; returns the op's result. */
static int apply(struct mem_be *m, struct tier_store_op *op)
{
	int create = op->opcode == TIER_STORE_WRITE || op->opcode == TIER_STORE_ZERO ||
		     (op->opcode == TIER_STORE_SETMETA && (op->flags & TIER_STORE_F_CREATE));
	struct mem_obj *o;
	int rc;

	if (op->opcode == TIER_STORE_LIST)
		return do_list(m, op);
	o = *find_slot(m, op->oid);
	rc = check_guard(o, op);
	if (rc < 0)
		return rc;
	switch (op->opcode) {
	case TIER_STORE_READ:
		if (!o)
			return -ENOENT;
		if (m->no_data)
			return (int)op->len;   /* no bytes kept: the buffer is left as it is */
		memset(op->buf, 0, op->len);
		if (op->off < o->size) {
			uint64_t n = o->size - op->off;

			memcpy(op->buf, o->data + op->off, n < op->len ? n : op->len);
		}
		return (int)op->len;
	case TIER_STORE_STAT:
		if (!o)
			return -ENOENT;
		op->obj_size = o->size;
		op->obj_version = o->version;
		op->obj_mtime_ns = o->mtime_ns;
		op->meta_len_out = o->meta_len;
		if (op->meta_buf && o->meta_len) {
			if (o->meta_len > op->meta_cap)
				return -ERANGE;
			memcpy(op->meta_buf, o->meta, o->meta_len);
		}
		return 0;
	case TIER_STORE_REMOVE:
		if (!o)
			return -ENOENT;
		table_unlink(m, o);
		m->bytes -= o->size;
		if (m->pc)
			pc_name_change(m, op->oid, o, NULL);   /* it may come back */
		else
			free_obj(o);
		return 0;
	default:
		break;
	}
	if (!o && !create)
		return -ENOENT;
	o = get_obj(m, op->oid, 1, &rc);
	if (!o)
		return rc;
	if (m->pc && (op->flags & TIER_STORE_F_META) && op->pre_meta &&
	    (op->opcode == TIER_STORE_WRITE || op->opcode == TIER_STORE_ZERO)) {
		/* pre_meta is durable before the data is touched (tier/store.h) */
		struct tier_store_op pre = *op;

		pre.meta = op->pre_meta;
		pre.meta_len = op->pre_meta_len;
		rc = set_meta(o, &pre);
		if (rc < 0)
			return rc;
		pc_sync_meta(o);
	}
	if (op->opcode == TIER_STORE_WRITE || op->opcode == TIER_STORE_ZERO) {
		if (m->pc) {
			rc = pc_log_data(m, o, op);
			if (rc < 0)
				return rc;
		}
		rc = ensure_size(m, o, op->off + op->len);
		if (rc < 0) {
			if (m->pc)
				pc_unlog_data(o);
			return rc;
		}
		if (!m->no_data) {
			if (op->opcode == TIER_STORE_WRITE)
				memcpy(o->data + op->off, op->buf, op->len);
			else
				memset(o->data + op->off, 0, op->len);
		}
	}
	if (op->flags & TIER_STORE_F_META) {
		/* F_ORDERED: the data (this write's included) is durable before the meta */
		if (m->pc && (op->flags & TIER_STORE_F_ORDERED))
			pc_sync_data(o);
		if (m->pc) {
			rc = pc_log_meta(o, op);
			if (rc < 0)
				return rc;
		}
		rc = set_meta(o, op);
		if (rc < 0) {
			if (m->pc)
				pc_unlog_meta(o);
			return rc;
		}
	}
	o->mtime_ns = tier__realtime_ns();
	return op->opcode == TIER_STORE_WRITE ? (int)op->len : 0;
}

/* completions held back until the virtual clock reaches their due time */
TIER__HEAP_DEFINE(pheap, struct pending)

static int mem_submit(void *be, struct tier_store_op *op)
{
	struct mem_be *m = be;
	uint64_t bytes = 0, due;
	struct pending p;
	int result;

	if (m->clock) {   /* the shared crash point: dead, nothing changes */
		if (m->stop_at && *m->clock >= m->stop_at) {
			tier__store_complete(op, -EIO);
			return 0;
		}
		(*m->clock)++;
	}
	result = apply(m, op);
	if (m->pc)
		pc_after(m, op, result);
	if (!m->virtual_time) {
		tier__store_complete(op, result);
		return 0;
	}
	if (op->opcode == TIER_STORE_READ || op->opcode == TIER_STORE_WRITE)
		bytes = op->len;
	due = tier_devmodel_schedule(m->dm, m->now_ns, op->opcode != TIER_STORE_READ &&
				     op->opcode != TIER_STORE_STAT &&
				     op->opcode != TIER_STORE_LIST, bytes);
	due += (uint64_t)tier__store_added_latency_us(m->st) * 1000u;
	p.due = due;
	p.seq = ++m->seq;
	p.op = op;
	p.result = result;
	if (pheap_push(&m->heap, &m->nheap, &m->capheap, p) < 0)
		tier__store_complete(op, -ENOMEM);
	return 0;
}

static void mem_destroy(void *be)
{
	struct mem_be *m = be;

	if (m->names) {
		pc_names_sync_all(m);   /* frees the removed incarnations */
		free(m->names);
	}
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct mem_obj *o = m->buckets[i], *next;

		for (; o; o = next) {
			next = o->next;
			free_obj(o);
		}
	}
	free(m->buckets);
	free(m->heap);
	tier_devmodel_destroy(m->dm);
	free(m);
}

static const struct tier_store_ops mem_ops = {
	.size = sizeof(struct tier_store_ops),
	.name = "mem",
	.read = mem_submit,
	.write = mem_submit,
	.zero = mem_submit,
	.setmeta = mem_submit,
	.remove = mem_submit,
	.stat = mem_submit,
	.list = mem_submit,
	.destroy = mem_destroy,
};

int tier_store_mem_create(const char *pool_name, const struct tier_mem_opts *o,
			  struct tier_cq *cq, struct tier_store **out)
{
	struct mem_be *m = NULL;
	int rc;

	*out = NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->nbuckets = 1024;
	m->buckets = calloc(m->nbuckets, sizeof(*m->buckets));
	if (!m->buckets) {
		free(m);
		return -ENOMEM;
	}
	if (o) {
		m->no_data = o->no_data;
		m->virtual_time = o->virtual_time;
		m->pc = o->powercut_model;
	}
	if (m->pc) {
		m->names = calloc(MEM_NAME_BUCKETS, sizeof(*m->names));
		if (!m->names) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	if (m->virtual_time) {
		struct tier_devmodel_params none = {0};

		rc = tier_devmodel_create(o ? &o->model : &none, &m->dm);
		if (rc < 0)
			goto fail;
	}
	rc = tier_store_create(&mem_ops, m, pool_name, cq, out);
	if (rc < 0)
		goto fail;
	m->st = *out;
	/* with the power-cut model, acknowledged effects need syncs, as local's do */
	tier_store_set_volatile_acks(*out, m->pc);
	return 0;
fail:
	mem_destroy(m);
	return rc;
}

static struct mem_be *mem_of(const struct tier_store *st)
{
	/* only valid for mem stores: the tests and tier-sim know what they made */
	return (struct mem_be *)tier__store_backend(st);
}

size_t tier_store_mem_advance(struct tier_store *st, uint64_t now_ns)
{
	struct mem_be *m = mem_of(st);
	size_t n = 0;

	if (now_ns > m->now_ns)
		m->now_ns = now_ns;
	while (m->nheap && m->heap[0].due <= m->now_ns) {
		struct pending p = pheap_pop(m->heap, &m->nheap);

		tier__store_complete(p.op, p.result);
		n++;
	}
	return n;
}

uint64_t tier_store_mem_next_due(const struct tier_store *st)
{
	const struct mem_be *m = mem_of(st);

	return m->nheap ? m->heap[0].due : UINT64_MAX;
}

void tier_store_mem_usage(const struct tier_store *st, uint64_t *objects, uint64_t *bytes)
{
	const struct mem_be *m = mem_of(st);

	if (objects)
		*objects = m->nobjs;
	if (bytes)
		*bytes = m->bytes;
}

int tier_store_mem_power_cut(struct tier_store *st, enum tier_mem_cut mode, uint64_t seed)
{
	struct mem_be *m = mem_of(st);
	uint64_t rng = seed;

	if (!m->pc)
		return -EINVAL;
	if (m->nheap || tier_store_in_flight(st))
		return -EBUSY;
	/* names first: which incarnation, if any, each one comes back as */
	for (size_t b = 0; b < MEM_NAME_BUCKETS; b++) {
		while (m->names[b]) {
			struct mem_name *nm = m->names[b];
			struct mem_obj *cur = nm->hist[nm->n - 1];
			struct mem_obj *keep = nm->hist[pc_pick(mode, &rng, nm->n)];

			if (cur && cur != keep)
				table_unlink(m, cur);
			if (keep && keep != cur)
				table_insert(m, keep);
			pc_name_drop(&m->names[b], keep);
		}
	}
	m->bytes = 0;
	for (size_t i = 0; i < m->nbuckets; i++) {
		for (struct mem_obj *o = m->buckets[i]; o; o = o->next) {
			pc_materialize(m, o, mode, &rng);
			m->bytes += o->size;
		}
	}
	return 0;
}

void tier_store_mem_set_crash_clock(struct tier_store *st, uint64_t *clock, uint64_t stop_at)
{
	struct mem_be *m = mem_of(st);

	m->clock = clock;
	m->stop_at = clock ? stop_at : 0;
}

uint64_t tier_store_mem_unsynced(const struct tier_store *st)
{
	const struct mem_be *m = mem_of(st);
	uint64_t n = 0;

	if (!m->pc)
		return 0;
	for (size_t i = 0; i < m->nbuckets; i++)
		for (const struct mem_obj *o = m->buckets[i]; o; o = o->next)
			n += o->nwl + (o->nmv ? o->nmv - 1 : 0);
	for (size_t b = 0; b < MEM_NAME_BUCKETS; b++)
		for (const struct mem_name *nm = m->names[b]; nm; nm = nm->next)
			n += nm->n - 1;
	return n;
}
