/* SPDX-License-Identifier: MIT */
/*
 * libtier/store/store.c - the one seam between the engine and every object
 * store.  It validates ops, counts ops and bytes per pool, and hosts fault
 * injection, so backends stay small and faults can be injected under any of
 * them.  It never interprets metadata and never completes an op on a foreign
 * thread: completions always travel through the store's tier_cq.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tier/store.h"
#include "store_internal.h"

struct tier_store {
	const struct tier_store_ops *ops;
	void *be;
	char *pool;
	struct tier_cq *cq;
	struct tier_store_stats stats;
	uint64_t in_flight;
	uint64_t seq;
	struct tier_store_fault fault;
	uint64_t fault_matched;    /* matching ops seen since the fault was set */
	uint64_t fault_taken;      /* matching ops let through, for stop_after */
	int stopped;               /* crash model tripped */
	uint64_t rng;
	bool volatile_acks;        /* acked effects need a sync to survive a power cut */
	/* ownership gates: prefixes fixed once added, states any thread may close */
	struct store_gate {
		char prefix[TIER_OID_MAX];
		size_t len;
		atomic_int state;          /* enum tier_store_gate */
		atomic_bool timed_out;     /* a write to its objects timed out: it may still land */
		uint64_t lease_ns;         /* OPEN until then (tier__now_ns), 0: no lease */
		struct tier_store_op *held_head, *held_tail;
	} gates[TIER_STORE_GATES];
	unsigned n_gates;
	unsigned n_leased;              /* gates with a lease: looked at on every op */
	atomic_uint gates_closed;       /* gates not OPEN: 0 skips the look */
	uint64_t fenced_ops;
	atomic_bool blocklisted;        /* the backend answered -ESHUTDOWN */
};

uint64_t tier__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t tier_now_ns(void)
{
	return tier__now_ns();
}

uint64_t tier__realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t tier__hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;   /* FNV-1a */

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 1099511628211ull;
	}
	return h;
}

static const char *const opcode_names[TIER_STORE_OPCODE_MAX] = {
	[TIER_STORE_READ] = "read",       [TIER_STORE_WRITE] = "write",
	[TIER_STORE_ZERO] = "zero",       [TIER_STORE_SETMETA] = "setmeta",
	[TIER_STORE_REMOVE] = "remove",   [TIER_STORE_STAT] = "stat",
	[TIER_STORE_LIST] = "list",       [TIER_STORE_SCAN] = "scan",
};

const char *tier_store_opcode_name(enum tier_store_opcode op)
{
	if ((int)op <= 0 || op >= TIER_STORE_OPCODE_MAX)
		return "invalid";
	return opcode_names[op];
}

int tier_store_create(const struct tier_store_ops *ops, void *be,
		      const char *pool_name, struct tier_cq *cq,
		      struct tier_store **out)
{
	struct tier_store *st = NULL;

	*out = NULL;
	if (!ops || ops->size < sizeof(size_t) || !cq || !pool_name)
		return -EINVAL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->pool = strdup(pool_name);
	if (!st->pool) {
		free(st);
		return -ENOMEM;
	}
	st->ops = ops;
	st->be = be;
	st->cq = cq;
	st->rng = 0x9e3779b97f4a7c15ull;
	*out = st;
	return 0;
}

void tier_store_destroy(struct tier_store *st)
{
	if (!st)
		return;
	if (st->ops->destroy)
		st->ops->destroy(st->be);
	free(st->pool);
	free(st);
}

const struct tier_store *tier_store_op_store(const struct tier_store_op *op)
{
	return op->store;
}

const char *tier_store_pool_name(const struct tier_store *st)
{
	return st->pool;
}

const char *tier_store_backend_name(const struct tier_store *st)
{
	return st->ops->name ? st->ops->name : "unknown";
}

bool tier_store_volatile_acks(const struct tier_store *st)
{
	return st->volatile_acks;
}

void tier_store_set_volatile_acks(struct tier_store *st, bool v)
{
	st->volatile_acks = v;
}

uint64_t tier_store_in_flight(const struct tier_store *st)
{
	return st->in_flight;
}

void tier_store_get_stats(const struct tier_store *st, struct tier_store_stats *out)
{
	*out = st->stats;
	if (st->ops->size >= offsetof(struct tier_store_ops, get_stats) + sizeof(st->ops->get_stats) &&
	    st->ops->get_stats)
		st->ops->get_stats(st->be, out);
}

bool tier_store_can_scan(const struct tier_store *st)
{
	return st->ops->size >= offsetof(struct tier_store_ops, scan) + sizeof(st->ops->scan) &&
	       st->ops->scan;
}

void tier_store_list_free(char **names, size_t n)
{
	if (!names)
		return;
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

void tier_store_set_fault(struct tier_store *st, const struct tier_store_fault *f)
{
	memset(&st->fault, 0, sizeof(st->fault));
	if (f)
		st->fault = *f;
	st->fault_matched = 0;
	st->fault_taken = 0;
	st->stopped = 0;
	st->rng = f && f->seed ? f->seed : 0x9e3779b97f4a7c15ull;
}

void *tier__store_backend(const struct tier_store *st)
{
	return st->be;
}

uint32_t tier__store_added_latency_us(const struct tier_store *st)
{
	return st->fault.add_latency_us;
}

static int op_valid(const struct tier_store_op *op)
{
	size_t oidlen;

	if (!op->cb || (int)op->opcode <= 0 || op->opcode >= TIER_STORE_OPCODE_MAX)
		return 0;
	if (op->opcode != TIER_STORE_LIST && op->opcode != TIER_STORE_SCAN) {
		oidlen = strnlen(op->oid, TIER_OID_MAX);
		if (oidlen == 0 || oidlen == TIER_OID_MAX)
			return 0;
	} else if (!op->prefix) {
		return 0;
	}
	if ((op->flags & TIER_STORE_F_GUARD) && (op->flags & TIER_STORE_F_EXCL))
		return 0;
	/* a meta left in memory must not be one anything is ordered or synced by */
	if ((op->flags & TIER_STORE_F_LAZY_META) &&
	    ((op->opcode != TIER_STORE_WRITE && op->opcode != TIER_STORE_ZERO) ||
	     !(op->flags & TIER_STORE_F_META) || op->pre_meta ||
	     (op->flags & (TIER_STORE_F_FUA | TIER_STORE_F_ORDERED | TIER_STORE_F_GUARD |
			   TIER_STORE_F_EXCL))))
		return 0;
	if (op->meta_len > TIER_META_MAX || op->pre_meta_len > TIER_META_MAX)
		return 0;
	if ((op->meta_len && !op->meta) || (op->pre_meta_len && !op->pre_meta))
		return 0;
	switch (op->opcode) {
	case TIER_STORE_READ:
	case TIER_STORE_WRITE:
		if (!op->buf)
			return 0;
		/* fall through */
	case TIER_STORE_ZERO:
		if (op->len == 0 || op->off + op->len < op->off)
			return 0;
		break;
	case TIER_STORE_SETMETA:
		if (!(op->flags & TIER_STORE_F_META))
			return 0;
		break;
	case TIER_STORE_SCAN:
		if (op->len == 0 || op->len > (1u << 20) || (op->nshards && op->shard >= op->nshards))
			return 0;
		break;
	default:
		break;
	}
	return 1;
}

/* xorshift64*: deterministic per seed, good enough for "fail 1% of ops" */
static double fault_rand(struct tier_store *st)
{
	st->rng ^= st->rng >> 12;
	st->rng ^= st->rng << 25;
	st->rng ^= st->rng >> 27;
	return (double)((st->rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* 0 to let the op through, or the -errno to fail it with. */
static int fault_check(struct tier_store *st, const struct tier_store_op *op)
{
	const struct tier_store_fault *f = &st->fault;
	int err = f->err > 0 ? f->err : EIO;

	if (st->stopped)
		return -EIO;
	if (f->opcode_mask && !(f->opcode_mask & (1u << op->opcode)))
		return 0;
	st->fault_matched++;
	if (f->stop_after) {
		if (st->fault_taken >= f->stop_after) {
			st->stopped = 1;
			return -EIO;
		}
		st->fault_taken++;
	}
	if (f->fail_nth && st->fault_matched == f->fail_nth)
		return -err;
	if (f->fail_fraction > 0 && fault_rand(st) < f->fail_fraction)
		return -err;
	return 0;
}

/* The op is st's from here until its callback: clear its outputs, count it in flight. */
static void op_take(struct tier_store *st, struct tier_store_op *op)
{
	op->store = st;
	op->result = 0;
	op->obj_size = op->obj_version = op->obj_mtime_ns = 0;
	op->meta_len_out = 0;
	op->names = NULL;
	op->n_names = 0;
	op->entries = NULL;
	op->n_entries = 0;
	op->cursor_out = 0;
	op->q_next = NULL;
	op->seq = ++st->seq;
	op->t_submit_ns = tier__now_ns();
	st->in_flight++;
}

/* ---- ownership gates ---- */

static void store_dispatch(struct tier_store *st, struct tier_store_op *op);

/* The closed gate op must wait at or fail by; an OPEN gate whose lease ran out closes. */
static struct store_gate *gate_of(struct tier_store *st, const struct tier_store_op *op)
{
	const char *name = op->opcode == TIER_STORE_LIST || op->opcode == TIER_STORE_SCAN ?
			   op->prefix : op->oid;

	for (unsigned i = 0; i < st->n_gates; i++) {
		struct store_gate *g = &st->gates[i];

		if (g->len && (strncmp(name, g->prefix, g->len) ||
			       (name[g->len] != '.' && name[g->len] != '\0')))
			continue;
		if (atomic_load(&g->state) == TIER_STORE_GATE_OPEN) {
			if (!g->lease_ns || op->t_submit_ns < g->lease_ns)
				continue;
			tier_store_gate_hold(st, (int)i);   /* the owner renews it, or checks */
		}
		return g;
	}
	return NULL;
}

void tier_store_gate_lease(struct tier_store *st, int gate, uint64_t until_ns)
{
	struct store_gate *g;

	if (!st || gate < 0 || (unsigned)gate >= st->n_gates)
		return;
	g = &st->gates[gate];
	if (!g->lease_ns && until_ns)
		st->n_leased++;
	else if (g->lease_ns && !until_ns)
		st->n_leased--;
	g->lease_ns = until_ns;
}

static void gate_fail(struct tier_store *st, struct tier_store_op *op)
{
	st->fenced_ops++;
	op->result = -ESHUTDOWN;
	tier__cq_push(st->cq, op);
}

int tier_store_gate_add(struct tier_store *st, const char *prefix)
{
	struct store_gate *g;

	if (!st || !prefix || strlen(prefix) >= TIER_OID_MAX)
		return -EINVAL;
	if (st->n_gates == TIER_STORE_GATES)
		return -ENOSPC;
	g = &st->gates[st->n_gates];
	snprintf(g->prefix, sizeof(g->prefix), "%s", prefix);
	g->len = strlen(prefix);
	atomic_store(&g->state, TIER_STORE_GATE_OPEN);
	atomic_store(&g->timed_out, false);
	g->held_head = g->held_tail = NULL;
	return (int)st->n_gates++;
}

void tier_store_gate_hold(struct tier_store *st, int gate)
{
	int want = TIER_STORE_GATE_OPEN;

	if (!st || gate < 0 || (unsigned)gate >= st->n_gates)
		return;
	if (atomic_compare_exchange_strong(&st->gates[gate].state, &want, TIER_STORE_GATE_HOLD))
		atomic_fetch_add(&st->gates_closed, 1);
}

enum tier_store_gate tier_store_gate_get(const struct tier_store *st, int gate)
{
	if (!st || gate < 0 || (unsigned)gate >= st->n_gates)
		return TIER_STORE_GATE_OPEN;
	return (enum tier_store_gate)atomic_load(&((struct tier_store *)st)->gates[gate].state);
}

void tier_store_gate_set(struct tier_store *st, int gate, enum tier_store_gate want)
{
	struct store_gate *g;
	struct tier_store_op *op;
	int was;

	if (!st || gate < 0 || (unsigned)gate >= st->n_gates)
		return;
	if (want == TIER_STORE_GATE_HOLD) {
		tier_store_gate_hold(st, gate);
		return;
	}
	g = &st->gates[gate];
	/* a hold from another thread between the load and the swap retries: never lost */
	do {
		was = atomic_load(&g->state);
		if (was == TIER_STORE_GATE_FENCED || was == (int)want)
			return;
	} while (!atomic_compare_exchange_weak(&g->state, &was, (int)want));
	if (want == TIER_STORE_GATE_OPEN)
		atomic_fetch_sub(&st->gates_closed, 1);
	else if (was == TIER_STORE_GATE_OPEN)
		atomic_fetch_add(&st->gates_closed, 1);
	while ((op = g->held_head)) {
		/* a hold from the watch's thread meanwhile keeps the rest waiting */
		if (want == TIER_STORE_GATE_OPEN &&
		    atomic_load(&g->state) != TIER_STORE_GATE_OPEN)
			break;
		g->held_head = op->q_next;
		op->q_next = NULL;
		if (!g->held_head)
			g->held_tail = NULL;
		if (want == TIER_STORE_GATE_FENCED)
			gate_fail(st, op);
		else
			store_dispatch(st, op);
	}
}

bool tier_store_gate_timed_out(const struct tier_store *st, int gate)
{
	if (!st || gate < 0 || (unsigned)gate >= st->n_gates)
		return false;
	return atomic_load(&((struct tier_store *)st)->gates[gate].timed_out);
}

uint64_t tier_store_fenced_ops(const struct tier_store *st)
{
	return st ? st->fenced_ops : 0;
}

bool tier_store_blocklisted(const struct tier_store *st)
{
	return st && atomic_load(&((struct tier_store *)st)->blocklisted);
}

/* Past the gates: fault injection, then the backend. */
static void store_dispatch(struct tier_store *st, struct tier_store_op *op)
{
	int (*fn)(void *, struct tier_store_op *) = NULL;
	int rc;

	rc = fault_check(st, op);
	if (rc < 0) {
		st->stats.faults_injected++;
		tier__store_complete(op, rc);
		return;
	}
	switch (op->opcode) {
	case TIER_STORE_READ:    fn = st->ops->read; break;
	case TIER_STORE_WRITE:   fn = st->ops->write; break;
	case TIER_STORE_ZERO:    fn = st->ops->zero; break;
	case TIER_STORE_SETMETA: fn = st->ops->setmeta; break;
	case TIER_STORE_REMOVE:  fn = st->ops->remove; break;
	case TIER_STORE_STAT:    fn = st->ops->stat; break;
	case TIER_STORE_LIST:    fn = st->ops->list; break;
	case TIER_STORE_SCAN:
		if (tier_store_can_scan(st))
			fn = st->ops->scan;
		break;
	default: break;
	}
	if (!fn) {
		tier__store_complete(op, -ENOTSUP);
		return;
	}
	rc = fn(st->be, op);
	if (rc < 0)
		tier__store_complete(op, rc);
}

int tier_store_submit(struct tier_store *st, struct tier_store_op *op)
{
	if (!st || !op || !op_valid(op))
		return -EINVAL;
	op_take(st, op);
	st->stats.ops[op->opcode]++;
	if (op->flags & TIER_STORE_F_FUA)
		st->stats.fua_ops[op->opcode]++;
	if (op->opcode == TIER_STORE_READ || op->opcode == TIER_STORE_WRITE ||
	    op->opcode == TIER_STORE_ZERO)
		st->stats.bytes[op->opcode] += op->len;
	if (atomic_load(&st->gates_closed) || st->n_leased) {
		struct store_gate *g = gate_of(st, op);

		if (g && atomic_load(&g->state) == TIER_STORE_GATE_FENCED) {
			gate_fail(st, op);
			return 0;
		}
		if (g) {            /* HOLD: counted in flight, submitted when it opens */
			if (g->held_tail)
				g->held_tail->q_next = op;
			else
				g->held_head = op;
			g->held_tail = op;
			return 0;
		}
	}
	store_dispatch(st, op);
	return 0;
}

int tier_store_fail(struct tier_store *st, struct tier_store_op *op, int err)
{
	if (!st || !op || !op->cb || err >= 0)
		return -EINVAL;
	op_take(st, op);
	tier__store_complete(op, err);
	return 0;
}

/* A write (anything but READ, STAT, LIST, SCAN) whose result is unknown taints its gate. */
static void gate_taint(struct tier_store *st, const struct tier_store_op *op)
{
	if (op->opcode == TIER_STORE_READ || op->opcode == TIER_STORE_STAT ||
	    op->opcode == TIER_STORE_LIST || op->opcode == TIER_STORE_SCAN)
		return;
	for (unsigned i = 0; i < st->n_gates; i++) {
		struct store_gate *g = &st->gates[i];

		if (!g->len || (!strncmp(op->oid, g->prefix, g->len) && op->oid[g->len] == '.'))
			atomic_store(&g->timed_out, true);
	}
}

void tier__store_complete(struct tier_store_op *op, int result)
{
	if (result == -ESHUTDOWN)   /* librados' EBLOCKLISTED: fenced by another client */
		atomic_store(&op->store->blocklisted, true);
	else if (result == -ETIMEDOUT && op->store)
		gate_taint(op->store, op);
	op->result = result;
	tier__cq_push(op->store->cq, op);
}

void tier__store_finish(struct tier_store_op *op)
{
	struct tier_store *st = op->store;

	if (!st)
		return;
	st->in_flight--;
	if ((int)op->opcode <= 0 || op->opcode >= TIER_STORE_OPCODE_MAX)
		return;   /* a malformed op failed by tier_store_fail */
	if (op->result == -ENOENT)
		st->stats.not_found[op->opcode]++;
	else if (op->result == -ECANCELED || op->result == -EEXIST)
		st->stats.conflicts[op->opcode]++;
	else if (op->result < 0)
		st->stats.errors[op->opcode]++;
	st->stats.lat_sum_ns[op->opcode] += tier__now_ns() - op->t_submit_ns;
}
