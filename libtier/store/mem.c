/* SPDX-License-Identifier: MIT */
/*
 * libtier/store/mem.c - the in-RAM backend for unit tests and tier-sim.
 * Deterministic and single-threaded: an op takes effect when submitted and
 * completes either at once (pushed on the queue, delivered by the next
 * drain) or, in virtual time, when tier_store_mem_advance() passes the due
 * time the device model gave it.  It must never be used from two threads.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tier/store.h"
#include "store_internal.h"

struct mem_obj {
	struct mem_obj *next;      /* hash chain */
	char *oid;
	uint8_t *data;
	uint64_t size, cap;
	uint8_t *meta;
	uint32_t meta_len;
	uint64_t version;
	uint64_t mtime_ns;
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
};

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
	return o;
}

static void free_obj(struct mem_obj *o)
{
	free(o->oid);
	free(o->data);
	free(o->meta);
	free(o);
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
	struct mem_obj **pp, *o;
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
		memset(op->buf, 0, op->len);
		if (!m->no_data && op->off < o->size) {
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
		pp = find_slot(m, op->oid);
		*pp = o->next;
		m->nobjs--;
		m->bytes -= o->size;
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
	if (op->opcode == TIER_STORE_WRITE || op->opcode == TIER_STORE_ZERO) {
		rc = ensure_size(m, o, op->off + op->len);
		if (rc < 0)
			return rc;
		if (!m->no_data) {
			if (op->opcode == TIER_STORE_WRITE)
				memcpy(o->data + op->off, op->buf, op->len);
			else
				memset(o->data + op->off, 0, op->len);
		}
	}
	if (op->flags & TIER_STORE_F_META) {
		rc = set_meta(o, op);
		if (rc < 0)
			return rc;
	}
	o->mtime_ns = tier__realtime_ns();
	return op->opcode == TIER_STORE_WRITE ? (int)op->len : 0;
}

static void heap_swap(struct pending *a, struct pending *b)
{
	struct pending t = *a;

	*a = *b;
	*b = t;
}

static int heap_less(const struct pending *a, const struct pending *b)
{
	return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static int heap_push(struct mem_be *m, struct pending p)
{
	size_t i;

	if (m->nheap == m->capheap) {
		size_t cap = m->capheap ? m->capheap * 2 : 64;
		struct pending *h = realloc(m->heap, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		m->heap = h;
		m->capheap = cap;
	}
	i = m->nheap++;
	m->heap[i] = p;
	while (i > 0 && heap_less(&m->heap[i], &m->heap[(i - 1) / 2])) {
		heap_swap(&m->heap[i], &m->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	return 0;
}

static struct pending heap_pop(struct mem_be *m)
{
	struct pending top = m->heap[0];
	size_t i = 0;

	m->heap[0] = m->heap[--m->nheap];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, s = i;

		if (l < m->nheap && heap_less(&m->heap[l], &m->heap[s]))
			s = l;
		if (r < m->nheap && heap_less(&m->heap[r], &m->heap[s]))
			s = r;
		if (s == i)
			break;
		heap_swap(&m->heap[i], &m->heap[s]);
		i = s;
	}
	return top;
}

static int mem_submit(void *be, struct tier_store_op *op)
{
	struct mem_be *m = be;
	int result = apply(m, op);
	uint64_t bytes = 0, due;
	struct pending p;

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
	if (heap_push(m, p) < 0)
		tier__store_complete(op, -ENOMEM);
	return 0;
}

static void mem_destroy(void *be)
{
	struct mem_be *m = be;

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
		struct pending p = heap_pop(m);

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
