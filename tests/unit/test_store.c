/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_store.c - the store seam (wrapper + completion queue) over
 * the mem backend: every op, version guards, listing, argument validation,
 * counters, fault injection, virtual-time completion order, and the
 * power-cut model (what a cut may keep of unsynced writes, metas and names).
 */
#undef NDEBUG
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tier/store.h"

struct fx {
	struct tier_cq *cq;
	struct tier_store *st;
	int completions;
	int notified;
};

static void on_notify(void *arg)
{
	((struct fx *)arg)->notified++;
}

static void on_done(struct tier_store_op *op)
{
	struct fx *f = op->priv;

	f->completions++;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_int_equal(tier_cq_create(on_notify, f, &f->cq), 0);
	assert_int_equal(tier_store_mem_create("cache", NULL, f->cq, &f->st), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	assert_int_equal(tier_store_in_flight(f->st), 0);
	tier_store_destroy(f->st);
	tier_cq_destroy(f->cq);
	free(f);
	return 0;
}

/* Submit one op and drain until its callback ran; returns op->result. */
static int run(struct fx *f, struct tier_store_op *op)
{
	int before = f->completions;

	op->cb = on_done;
	op->priv = f;
	assert_int_equal(tier_store_submit(f->st, op), 0);
	/* the callback never runs inside submit */
	assert_int_equal(f->completions, before);
	while (f->completions == before)
		tier_cq_drain(f->cq);
	return op->result;
}

static void stat_like_cb(struct tier_store_op *op)
{
	*(int *)op->priv = 1;
}

static void mk(struct tier_store_op *op, enum tier_store_opcode code, const char *oid)
{
	memset(op, 0, sizeof(*op));
	op->opcode = code;
	snprintf(op->oid, sizeof(op->oid), "%s", oid);
}

static void test_write_read_roundtrip_and_sparse_zero_fill(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	char w[100], r[300];

	memset(w, 'x', sizeof(w));
	mk(&op, TIER_STORE_WRITE, "obj.1");
	op.off = 100; op.len = sizeof(w); op.buf = w;
	assert_int_equal(run(f, &op), (int)sizeof(w));

	memset(r, 0x55, sizeof(r));
	mk(&op, TIER_STORE_READ, "obj.1");
	op.off = 0; op.len = sizeof(r); op.buf = r;
	assert_int_equal(run(f, &op), (int)sizeof(r));
	for (int i = 0; i < 300; i++)
		assert_int_equal(r[i], i >= 100 && i < 200 ? 'x' : 0);
}

static void test_read_absent_is_enoent(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	char r[10];

	mk(&op, TIER_STORE_READ, "nope");
	op.len = sizeof(r); op.buf = r;
	assert_int_equal(run(f, &op), -ENOENT);
}

static void test_zero_and_remove(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	char w[64], r[64];

	memset(w, 7, sizeof(w));
	mk(&op, TIER_STORE_WRITE, "z"); op.len = 64; op.buf = w;
	assert_int_equal(run(f, &op), 64);
	mk(&op, TIER_STORE_ZERO, "z"); op.off = 16; op.len = 16;
	assert_int_equal(run(f, &op), 0);
	mk(&op, TIER_STORE_READ, "z"); op.len = 64; op.buf = r;
	assert_int_equal(run(f, &op), 64);
	for (int i = 0; i < 64; i++)
		assert_int_equal(r[i], i >= 16 && i < 32 ? 0 : 7);
	mk(&op, TIER_STORE_REMOVE, "z");
	assert_int_equal(run(f, &op), 0);
	mk(&op, TIER_STORE_REMOVE, "z");
	assert_int_equal(run(f, &op), -ENOENT);
	mk(&op, TIER_STORE_STAT, "z");
	assert_int_equal(run(f, &op), -ENOENT);
}

static void test_meta_and_stat(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	char w[10] = "abcdefghi", mb[32];

	mk(&op, TIER_STORE_WRITE, "m");
	op.len = 10; op.buf = w; op.flags = TIER_STORE_F_META;
	op.meta = "meta-1"; op.meta_len = 6; op.version = 5;
	assert_int_equal(run(f, &op), 10);

	mk(&op, TIER_STORE_STAT, "m");
	op.meta_buf = mb; op.meta_cap = sizeof(mb);
	assert_int_equal(run(f, &op), 0);
	assert_int_equal(op.obj_size, 10);
	assert_int_equal(op.obj_version, 5);
	assert_int_equal(op.meta_len_out, 6);
	assert_memory_equal(mb, "meta-1", 6);
	assert_true(op.obj_mtime_ns > 0);

	/* SETMETA replaces meta and version, data untouched */
	mk(&op, TIER_STORE_SETMETA, "m");
	op.flags = TIER_STORE_F_META; op.meta = "v2"; op.meta_len = 2; op.version = 6;
	assert_int_equal(run(f, &op), 0);
	mk(&op, TIER_STORE_STAT, "m"); op.meta_buf = mb; op.meta_cap = sizeof(mb);
	assert_int_equal(run(f, &op), 0);
	assert_int_equal(op.obj_version, 6);
	assert_int_equal(op.meta_len_out, 2);
	assert_int_equal(op.obj_size, 10);

	/* meta larger than the caller's buffer is -ERANGE, not a silent cut */
	mk(&op, TIER_STORE_STAT, "m"); op.meta_buf = mb; op.meta_cap = 1;
	assert_int_equal(run(f, &op), -ERANGE);

	/* SETMETA on an absent object needs F_CREATE */
	mk(&op, TIER_STORE_SETMETA, "absent");
	op.flags = TIER_STORE_F_META; op.meta = "x"; op.meta_len = 1; op.version = 1;
	assert_int_equal(run(f, &op), -ENOENT);
	op.flags |= TIER_STORE_F_CREATE;
	assert_int_equal(run(f, &op), 0);
}

static void test_version_guards(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	char w[4] = "abc", r[4];

	mk(&op, TIER_STORE_WRITE, "g");
	op.len = 4; op.buf = w; op.flags = TIER_STORE_F_META | TIER_STORE_F_EXCL;
	op.meta = "c"; op.meta_len = 1; op.version = 1;
	assert_int_equal(run(f, &op), 4);
	/* EXCL on an existing object */
	assert_int_equal(run(f, &op), -EEXIST);

	/* guard with the wrong version changes nothing */
	mk(&op, TIER_STORE_WRITE, "g");
	op.len = 4; op.buf = "XYZ"; op.flags = TIER_STORE_F_META | TIER_STORE_F_GUARD;
	op.meta = "d"; op.meta_len = 1; op.version = 3; op.expect_version = 2;
	assert_int_equal(run(f, &op), -ECANCELED);
	mk(&op, TIER_STORE_READ, "g"); op.len = 4; op.buf = r;
	assert_int_equal(run(f, &op), 4);
	assert_memory_equal(r, "abc", 4);

	/* right version passes */
	mk(&op, TIER_STORE_WRITE, "g");
	op.len = 4; op.buf = "XYZ"; op.flags = TIER_STORE_F_META | TIER_STORE_F_GUARD;
	op.meta = "d"; op.meta_len = 1; op.version = 2; op.expect_version = 1;
	assert_int_equal(run(f, &op), 4);

	/* guarded remove */
	mk(&op, TIER_STORE_REMOVE, "g"); op.flags = TIER_STORE_F_GUARD; op.expect_version = 1;
	assert_int_equal(run(f, &op), -ECANCELED);
	op.expect_version = 2;
	assert_int_equal(run(f, &op), 0);
	/* guard on an absent object */
	assert_int_equal(run(f, &op), -ECANCELED);
}

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_list_by_prefix(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	char name[32];

	for (int i = 0; i < 1500; i++) {   /* enough to grow the hash table */
		snprintf(name, sizeof(name), "%s.%04d", i % 3 ? "img_a" : "img_b", i);
		mk(&op, TIER_STORE_WRITE, name); op.len = 1; op.buf = "q";
		assert_int_equal(run(f, &op), 1);
	}
	mk(&op, TIER_STORE_LIST, ""); op.prefix = "img_b.";
	assert_int_equal(run(f, &op), 500);
	assert_int_equal(op.n_names, 500);
	qsort(op.names, op.n_names, sizeof(char *), cmpstr);
	assert_string_equal(op.names[0], "img_b.0000");
	assert_string_equal(op.names[499], "img_b.1497");
	tier_store_list_free(op.names, op.n_names);
	mk(&op, TIER_STORE_LIST, ""); op.prefix = "none.";
	assert_int_equal(run(f, &op), 0);
	tier_store_list_free(op.names, op.n_names);
}

static void test_invalid_ops_rejected_without_callback(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	char b[8];

	mk(&op, TIER_STORE_READ, "x"); op.buf = b; op.len = 0; op.cb = on_done;
	assert_int_equal(tier_store_submit(f->st, &op), -EINVAL);          /* len 0 */
	mk(&op, TIER_STORE_READ, ""); op.buf = b; op.len = 8; op.cb = on_done;
	assert_int_equal(tier_store_submit(f->st, &op), -EINVAL);          /* empty oid */
	mk(&op, TIER_STORE_READ, "x"); op.buf = b; op.len = 8;
	assert_int_equal(tier_store_submit(f->st, &op), -EINVAL);          /* no cb */
	mk(&op, TIER_STORE_WRITE, "x"); op.buf = b; op.len = 8; op.cb = on_done;
	op.meta = b; op.meta_len = TIER_META_MAX + 1;
	assert_int_equal(tier_store_submit(f->st, &op), -EINVAL);          /* meta too big */
	mk(&op, TIER_STORE_SETMETA, "x"); op.cb = on_done;
	assert_int_equal(tier_store_submit(f->st, &op), -EINVAL);          /* no F_META */
	mk(&op, TIER_STORE_WRITE, "x"); op.buf = b; op.len = 8; op.cb = on_done;
	op.flags = TIER_STORE_F_GUARD | TIER_STORE_F_EXCL;
	assert_int_equal(tier_store_submit(f->st, &op), -EINVAL);
	mk(&op, TIER_STORE_WRITE, "x"); op.buf = b; op.len = 8; op.cb = on_done;
	op.off = UINT64_MAX - 2;
	assert_int_equal(tier_store_submit(f->st, &op), -EINVAL);          /* overflow */
	memset(&op, 0, sizeof(op)); op.opcode = TIER_STORE_READ; op.cb = on_done;
	memset(op.oid, 'a', sizeof(op.oid));                                /* unterminated */
	op.buf = b; op.len = 8;
	assert_int_equal(tier_store_submit(f->st, &op), -EINVAL);
	mk(&op, TIER_STORE_LIST, ""); op.cb = on_done;                      /* no prefix */
	assert_int_equal(tier_store_submit(f->st, &op), -EINVAL);
	tier_cq_drain(f->cq);
	assert_int_equal(f->completions, 0);
}

/* A refused op can be failed through the queue: one completion path for callers. */
static void test_fail_completes_through_queue(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	char b[8];

	mk(&op, TIER_STORE_READ, "x"); op.buf = b; op.len = 0; op.cb = on_done; op.priv = f;
	assert_int_equal(tier_store_submit(f->st, &op), -EINVAL);
	assert_int_equal(tier_store_fail(f->st, &op, -EINVAL), 0);
	assert_int_equal(f->completions, 0);            /* never inside the call */
	assert_int_equal(tier_store_in_flight(f->st), 1);
	tier_cq_drain(f->cq);
	assert_int_equal(f->completions, 1);
	assert_int_equal(op.result, -EINVAL);
	assert_int_equal(tier_store_in_flight(f->st), 0);
	/* a malformed opcode is failed as safely */
	memset(&op, 0, sizeof(op)); op.opcode = (enum tier_store_opcode)99; op.cb = on_done;
	op.priv = f;
	assert_int_equal(tier_store_fail(f->st, &op, -EINVAL), 0);
	tier_cq_drain(f->cq);
	assert_int_equal(f->completions, 2);
	/* nothing to complete it through, or no error */
	op.cb = NULL;
	assert_int_equal(tier_store_fail(f->st, &op, -EIO), -EINVAL);
	op.cb = on_done;
	assert_int_equal(tier_store_fail(f->st, &op, 0), -EINVAL);
	tier_cq_drain(f->cq);
	assert_int_equal(f->completions, 2);
}

static void test_counters(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	struct tier_store_stats s;
	char b[512];

	memset(b, 1, sizeof(b));
	for (int i = 0; i < 3; i++) {
		mk(&op, TIER_STORE_WRITE, "c"); op.len = 512; op.buf = b;
		run(f, &op);
	}
	mk(&op, TIER_STORE_READ, "c"); op.len = 100; op.buf = b;
	run(f, &op);
	mk(&op, TIER_STORE_READ, "missing"); op.len = 100; op.buf = b;
	run(f, &op);
	tier_store_get_stats(f->st, &s);
	assert_int_equal(s.ops[TIER_STORE_WRITE], 3);
	assert_int_equal(s.bytes[TIER_STORE_WRITE], 1536);
	assert_int_equal(s.ops[TIER_STORE_READ], 2);
	assert_int_equal(s.bytes[TIER_STORE_READ], 200);
	/* an absent object is a miss, not an error */
	assert_int_equal(s.errors[TIER_STORE_READ], 0);
	assert_int_equal(s.not_found[TIER_STORE_READ], 1);
	assert_int_equal(s.errors[TIER_STORE_WRITE], 0);
	/* a guard that says no is a conflict, not an error */
	mk(&op, TIER_STORE_SETMETA, "c");
	op.flags = TIER_STORE_F_META | TIER_STORE_F_GUARD;
	op.meta = "m"; op.meta_len = 1; op.version = 2; op.expect_version = 999;
	assert_int_equal(run(f, &op), -ECANCELED);
	tier_store_get_stats(f->st, &s);
	assert_int_equal(s.conflicts[TIER_STORE_SETMETA], 1);
	assert_int_equal(s.errors[TIER_STORE_SETMETA], 0);
	assert_string_equal(tier_store_pool_name(f->st), "cache");
	assert_string_equal(tier_store_backend_name(f->st), "mem");
	assert_true(f->notified > 0);
}

static void test_fault_nth_with_errno_and_mask(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	struct tier_store_fault flt = {0};
	char b[8] = "1234567";

	flt.opcode_mask = 1u << TIER_STORE_WRITE;
	flt.fail_nth = 2;
	flt.err = ENOSPC;
	tier_store_set_fault(f->st, &flt);
	mk(&op, TIER_STORE_READ, "n"); op.len = 8; op.buf = b;
	assert_int_equal(run(f, &op), -ENOENT);           /* reads do not count */
	mk(&op, TIER_STORE_WRITE, "n"); op.len = 8; op.buf = b;
	assert_int_equal(run(f, &op), 8);
	mk(&op, TIER_STORE_WRITE, "n2"); op.len = 8; op.buf = b;
	assert_int_equal(run(f, &op), -ENOSPC);            /* the 2nd write */
	mk(&op, TIER_STORE_STAT, "n2");
	assert_int_equal(run(f, &op), -ENOENT);            /* and it did nothing */
	mk(&op, TIER_STORE_WRITE, "n3"); op.len = 8; op.buf = b;
	assert_int_equal(run(f, &op), 8);
	struct tier_store_stats s;
	tier_store_get_stats(f->st, &s);
	assert_int_equal(s.faults_injected, 1);
	tier_store_set_fault(f->st, NULL);
}

static void test_fault_fraction_is_roughly_that_fraction(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	struct tier_store_fault flt = {0};
	char b[8] = "1234567";
	int failed = 0;

	flt.fail_fraction = 0.25;
	flt.seed = 42;
	tier_store_set_fault(f->st, &flt);
	for (int i = 0; i < 2000; i++) {
		mk(&op, TIER_STORE_WRITE, "frac"); op.len = 8; op.buf = b;
		if (run(f, &op) == -EIO)
			failed++;
	}
	assert_in_range(failed, 400, 600);
	tier_store_set_fault(f->st, NULL);
}

static void test_fault_stop_after_models_a_crash(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	struct tier_store_fault flt = {0};
	char b[8] = "1234567";

	flt.stop_after = 2;
	tier_store_set_fault(f->st, &flt);
	mk(&op, TIER_STORE_WRITE, "s1"); op.len = 8; op.buf = b;
	assert_int_equal(run(f, &op), 8);
	mk(&op, TIER_STORE_WRITE, "s2"); op.len = 8; op.buf = b;
	assert_int_equal(run(f, &op), 8);
	mk(&op, TIER_STORE_WRITE, "s3"); op.len = 8; op.buf = b;
	assert_int_equal(run(f, &op), -EIO);
	mk(&op, TIER_STORE_READ, "s1"); op.len = 8; op.buf = b;
	assert_int_equal(run(f, &op), -EIO);      /* dead: every later op fails */
	tier_store_set_fault(f->st, NULL);        /* "restart" */
	mk(&op, TIER_STORE_STAT, "s2");
	assert_int_equal(run(f, &op), 0);
	mk(&op, TIER_STORE_STAT, "s3");
	assert_int_equal(run(f, &op), -ENOENT);
}

static int order[8], norder;

static void on_order(struct tier_store_op *op)
{
	order[norder++] = (int)(intptr_t)op->priv;
}

static void test_virtual_time_device_model(void **state)
{
	struct tier_cq *cq;
	struct tier_store *st;
	struct tier_mem_opts mo = {0};
	struct tier_store_op ops[3];
	static char big[1 << 20];
	(void)state;

	assert_int_equal(tier_devmodel_profile("hdd", &mo.model), 0);
	mo.virtual_time = true;
	assert_int_equal(tier_cq_create(NULL, NULL, &cq), 0);
	assert_int_equal(tier_store_mem_create("base", &mo, cq, &st), 0);
	norder = 0;
	/* a 1 MiB write then two 4 KiB ones: small ones overtake at QD 16 */
	for (int i = 0; i < 3; i++) {
		mk(&ops[i], TIER_STORE_WRITE, "v");
		ops[i].len = i == 0 ? sizeof(big) : 4096;
		ops[i].off = (uint64_t)i << 20;
		ops[i].buf = big;
		ops[i].cb = on_order;
		ops[i].priv = (void *)(intptr_t)i;
		assert_int_equal(tier_store_submit(st, &ops[i]), 0);
	}
	assert_int_equal(tier_store_mem_advance(st, 0), 0);
	assert_int_equal(tier_cq_drain(cq), 0);
	uint64_t due = tier_store_mem_next_due(st);
	/* at least the hdd latency (5 ms) */
	assert_true(due >= 5000000ull);
	assert_int_equal(tier_store_mem_advance(st, UINT64_MAX - 1), 3);
	assert_int_equal(tier_cq_drain(cq), 3);
	assert_int_equal(norder, 3);
	assert_int_equal(tier_store_mem_next_due(st), UINT64_MAX);
	tier_store_destroy(st);
	tier_cq_destroy(cq);
}

/* ---- the power-cut model ---- */

static int pc_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct tier_mem_opts mo = { .powercut_model = true };

	assert_int_equal(tier_cq_create(on_notify, f, &f->cq), 0);
	assert_int_equal(tier_store_mem_create("cache", &mo, f->cq, &f->st), 0);
	*state = f;
	return 0;
}

static int pc_write(struct fx *f, const char *oid, uint64_t off, const char *data,
		    uint32_t flags)
{
	struct tier_store_op op;

	mk(&op, TIER_STORE_WRITE, oid);
	op.off = off;
	op.len = strlen(data);
	op.buf = (void *)data;
	op.flags = flags;
	return run(f, &op);
}

/* Write with meta+version (meta is a string). */
static int pc_write_meta(struct fx *f, const char *oid, const char *data, const char *meta,
			 uint64_t version, uint32_t flags)
{
	struct tier_store_op op;

	mk(&op, TIER_STORE_WRITE, oid);
	op.len = strlen(data);
	op.buf = (void *)data;
	op.flags = flags | TIER_STORE_F_META;
	op.meta = meta;
	op.meta_len = (uint32_t)strlen(meta);
	op.version = version;
	return run(f, &op);
}

/* Read len bytes at 0 into out (NUL-terminated); returns the result. */
static int pc_read(struct fx *f, const char *oid, char *out, uint64_t len, uint32_t flags)
{
	struct tier_store_op op;
	int rc;

	mk(&op, TIER_STORE_READ, oid);
	op.len = len;
	op.buf = out;
	op.flags = flags;
	rc = run(f, &op);
	out[len] = '\0';
	return rc;
}

/* The object's version, -1 if absent (meta copied into meta, NUL-terminated). */
static int64_t pc_version(struct fx *f, const char *oid, char *meta)
{
	struct tier_store_op op;
	char mb[64];

	mk(&op, TIER_STORE_STAT, oid);
	op.meta_buf = mb;
	op.meta_cap = sizeof(mb) - 1;
	if (run(f, &op) == -ENOENT)
		return -1;
	assert_int_equal(op.result, 0);
	if (meta) {
		memcpy(meta, mb, op.meta_len_out);
		meta[op.meta_len_out] = '\0';
	}
	return (int64_t)op.obj_version;
}

static int pc_remove(struct fx *f, const char *oid, uint32_t flags)
{
	struct tier_store_op op;

	mk(&op, TIER_STORE_REMOVE, oid);
	op.flags = flags;
	return run(f, &op);
}

static void pc_cut(struct fx *f, enum tier_mem_cut mode, uint64_t seed)
{
	assert_int_equal(tier_store_mem_power_cut(f->st, mode, seed), 0);
	assert_int_equal(tier_store_mem_unsynced(f->st), 0);
}

/* A write without FUA is lost by a cut that keeps nothing, kept by one that keeps all. */
static void test_pc_unsynced_write_may_be_lost(void **state)
{
	struct fx *f = *state;
	char b[8];
	int saw[2] = { 0, 0 };

	assert_int_equal(pc_write(f, "o", 0, "AAAA", TIER_STORE_F_FUA), 4);
	assert_int_equal(pc_write(f, "o", 0, "BBBB", 0), 4);
	assert_int_equal(tier_store_mem_unsynced(f->st), 1);
	pc_cut(f, TIER_MEM_CUT_KEEP_NONE, 0);
	assert_int_equal(pc_read(f, "o", b, 4, 0), 4);
	assert_string_equal(b, "AAAA");
	assert_int_equal(pc_write(f, "o", 0, "BBBB", 0), 4);
	pc_cut(f, TIER_MEM_CUT_KEEP_ALL, 0);
	assert_int_equal(pc_read(f, "o", b, 4, 0), 4);
	assert_string_equal(b, "BBBB");
	/* random: either, both seen over the seeds; a cut is durable */
	for (uint64_t seed = 1; seed <= 32; seed++) {
		assert_int_equal(pc_write(f, "o", 0, "CCCC", 0), 4);
		pc_cut(f, TIER_MEM_CUT_RANDOM, seed);
		assert_int_equal(pc_read(f, "o", b, 4, 0), 4);
		assert_true(strcmp(b, "CCCC") == 0 || strcmp(b, "BBBB") == 0);
		saw[strcmp(b, "CCCC") == 0]++;
		/* what the cut left is durable: a cut keeping nothing keeps it */
		pc_cut(f, TIER_MEM_CUT_KEEP_NONE, 0);
		assert_int_equal(pc_read(f, "o", b, 4, 0), 4);
		assert_true(strcmp(b, "CCCC") == 0 || strcmp(b, "BBBB") == 0);
		assert_int_equal(pc_write(f, "o", 0, "BBBB", TIER_STORE_F_FUA), 4);
	}
	assert_true(saw[0] > 0 && saw[1] > 0);
}

/* Separate writes are kept or lost independently; kept ones in order; zeros past the durable size. */
static void test_pc_writes_independent(void **state)
{
	struct fx *f = *state;
	char b[8];
	int seen[16] = { 0 };

	for (uint64_t seed = 1; seed <= 200; seed++) {
		int mask = 0;

		assert_int_equal(pc_write(f, "w", 0, "aa", TIER_STORE_F_FUA), 2);
		assert_int_equal(pc_write(f, "w", 0, "b", 0), 1);
		assert_int_equal(pc_write(f, "w", 1, "c", 0), 1);
		assert_int_equal(pc_write(f, "w", 0, "dd", 0), 2);   /* over both */
		assert_int_equal(pc_write(f, "w", 4, "e", 0), 1);    /* past the durable size */
		pc_cut(f, TIER_MEM_CUT_RANDOM, seed);
		assert_int_equal(pc_read(f, "w", b, 5, 0), 5);
		if (b[0] == 'd' && b[1] == 'd')
			mask |= 4;
		else {
			assert_true(b[0] == 'a' || b[0] == 'b');
			assert_true(b[1] == 'a' || b[1] == 'c');
			mask |= (b[0] == 'b') | (b[1] == 'c') << 1;
		}
		assert_int_equal(b[2], 0);
		assert_int_equal(b[3], 0);
		assert_true(b[4] == 'e' || b[4] == 0);
		mask |= (b[4] == 'e') << 3;
		seen[mask]++;
		assert_int_equal(pc_remove(f, "w", TIER_STORE_F_FUA), 0);
	}
	/* every combination of the last three and of the first two */
	for (int mk2 = 0; mk2 < 4; mk2++)
		assert_true(seen[mk2] + seen[mk2 | 8] > 0);
	assert_true(seen[4] + seen[12] > 0);
}

/* FUA makes the op and everything earlier on that object durable; other objects not. */
static void test_pc_fua_write_kept(void **state)
{
	struct fx *f = *state;
	char b[8];

	assert_int_equal(pc_write(f, "x", 0, "1111", 0), 4);
	assert_int_equal(pc_write(f, "y", 0, "2222", 0), 4);
	assert_int_equal(pc_write_meta(f, "x", "33", "m1", 7, 0), 2);
	assert_int_equal(pc_write(f, "x", 2, "44", TIER_STORE_F_FUA), 2);
	pc_cut(f, TIER_MEM_CUT_KEEP_NONE, 0);
	assert_int_equal(pc_read(f, "x", b, 4, 0), 4);
	assert_string_equal(b, "3344");
	assert_int_equal(pc_version(f, "x", b), 7);
	assert_string_equal(b, "m1");
	assert_int_equal(pc_version(f, "y", NULL), -1);   /* its creation was lost */
}

/* READ with F_FUA is the sync barrier of one object, of its data, meta and name. */
static void test_pc_read_fua_syncs(void **state)
{
	struct fx *f = *state;
	char b[8];
	struct tier_store_op op;

	assert_int_equal(pc_write(f, "r", 0, "ab", 0), 2);
	mk(&op, TIER_STORE_SETMETA, "r");
	op.flags = TIER_STORE_F_META;
	op.meta = "mm";
	op.meta_len = 2;
	op.version = 3;
	assert_int_equal(run(f, &op), 0);
	assert_int_equal(pc_write(f, "s", 0, "cd", 0), 2);
	assert_int_equal(pc_read(f, "r", b, 1, TIER_STORE_F_FUA), 1);
	assert_int_equal(pc_read(f, "absent", b, 1, TIER_STORE_F_FUA), -ENOENT);
	pc_cut(f, TIER_MEM_CUT_KEEP_NONE, 0);
	assert_int_equal(pc_read(f, "r", b, 2, 0), 2);
	assert_string_equal(b, "ab");
	assert_int_equal(pc_version(f, "r", b), 3);
	assert_string_equal(b, "mm");
	assert_int_equal(pc_version(f, "s", NULL), -1);
}

/* Meta reverts to any value since its last sync; SETMETA alone is volatile. */
static void test_pc_meta_any_value_since_sync(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	int seen[4] = { 0 };

	for (uint64_t seed = 1; seed <= 100; seed++) {
		assert_int_equal(pc_write_meta(f, "m", "d", "v1", 1, TIER_STORE_F_FUA), 1);
		for (uint64_t v = 2; v <= 3; v++) {
			mk(&op, TIER_STORE_SETMETA, "m");
			op.flags = TIER_STORE_F_META;
			op.meta = v == 2 ? "v2" : "v3";
			op.meta_len = 2;
			op.version = v;
			assert_int_equal(run(f, &op), 0);
		}
		pc_cut(f, seed == 1 ? TIER_MEM_CUT_KEEP_NONE : TIER_MEM_CUT_RANDOM, seed);
		int64_t v = pc_version(f, "m", NULL);
		assert_true(v >= 1 && v <= 3);
		seen[v]++;
	}
	assert_true(seen[1] > 0 && seen[2] > 0 && seen[3] > 0);
}

/*
 * F_ORDERED: never the new meta without the new data, over many seeds;
 * without it the model does show the new meta over the old data.
 */
static void test_pc_ordered_meta_only_with_data(void **state)
{
	struct fx *f = *state;
	char b[8];
	int new_meta = 0, torn = 0;

	for (int ordered = 1; ordered >= 0; ordered--) {
		for (uint64_t seed = 1; seed <= 200; seed++) {
			int64_t v;

			assert_int_equal(pc_write_meta(f, "o", "old", "m1", 1, TIER_STORE_F_FUA), 3);
			assert_int_equal(pc_write(f, "o", 0, "mid", 0), 3);
			assert_int_equal(pc_write_meta(f, "o", "new", "m2", 2,
						       ordered ? TIER_STORE_F_ORDERED : 0), 3);
			pc_cut(f, TIER_MEM_CUT_RANDOM, seed);
			v = pc_version(f, "o", NULL);
			assert_int_equal(pc_read(f, "o", b, 3, 0), 3);
			if (ordered) {
				assert_string_equal(b, "new");   /* the data is durable */
				new_meta += v == 2;
			} else {
				torn += v == 2 && strcmp(b, "new") != 0;
			}
		}
	}
	assert_true(new_meta > 0 && new_meta < 200);
	assert_true(torn > 0);
}

/* A remove without a barrier can come back (with its durable data); a new incarnation is separate. */
static void test_pc_remove_can_come_back(void **state)
{
	struct fx *f = *state;
	char b[8];
	int seen[4] = { 0 };

	assert_int_equal(pc_write_meta(f, "d", "XXXX", "mX", 5, TIER_STORE_F_FUA), 4);
	assert_int_equal(pc_remove(f, "d", 0), 0);
	pc_cut(f, TIER_MEM_CUT_KEEP_NONE, 0);
	assert_int_equal(pc_read(f, "d", b, 4, 0), 4);
	assert_string_equal(b, "XXXX");
	assert_int_equal(pc_version(f, "d", NULL), 5);
	for (uint64_t seed = 1; seed <= 100; seed++) {
		/* durable "XXXX"; removed; re-created as "YYYY" without any sync */
		assert_int_equal(pc_remove(f, "d", 0), 0);
		assert_int_equal(pc_write_meta(f, "d", "YYYY", "mY", 9, 0), 4);
		pc_cut(f, TIER_MEM_CUT_RANDOM, seed);
		int64_t v = pc_version(f, "d", NULL);
		if (v < 0) {
			seen[0]++;
		} else {
			assert_int_equal(pc_read(f, "d", b, 4, 0), 4);
			if (strcmp(b, "XXXX") == 0) {
				assert_int_equal(v, 5);      /* the old incarnation, whole */
				seen[1]++;
			} else {
				/* the new one: its data and meta each kept or not, never X's */
				assert_true(strcmp(b, "YYYY") == 0 || memcmp(b, "\0\0\0\0", 4) == 0);
				assert_true(v == 9 || v == 0);
				seen[2 + (b[0] == 'Y')]++;
			}
		}
		/* back to the durable "XXXX" for the next round */
		if (v >= 0)
			assert_int_equal(pc_remove(f, "d", 0), 0);
		assert_int_equal(pc_write_meta(f, "d", "XXXX", "mX", 5, TIER_STORE_F_FUA), 4);
		assert_int_equal(pc_remove(f, "d", TIER_STORE_F_FUA), 0);
		assert_int_equal(pc_write_meta(f, "d", "XXXX", "mX", 5, TIER_STORE_F_FUA), 4);
	}
	assert_true(seen[0] > 0 && seen[1] > 0 && seen[2] > 0 && seen[3] > 0);
}

/* A FUA REMOVE, even of an absent object, makes every earlier create/remove of the pool durable. */
static void test_pc_fua_remove_barrier(void **state)
{
	struct fx *f = *state;
	char b[8];

	assert_int_equal(pc_write(f, "a", 0, "aa", TIER_STORE_F_FUA), 2);
	assert_int_equal(pc_write(f, "b", 0, "bb", TIER_STORE_F_FUA), 2);
	assert_int_equal(pc_remove(f, "a", 0), 0);
	assert_int_equal(pc_write(f, "c", 0, "cc", 0), 2);   /* created, data volatile */
	assert_int_equal(pc_remove(f, "nothing", TIER_STORE_F_FUA), -ENOENT);
	assert_int_equal(pc_remove(f, "b", 0), 0);           /* after the barrier */
	pc_cut(f, TIER_MEM_CUT_KEEP_NONE, 0);
	assert_int_equal(pc_version(f, "a", NULL), -1);      /* stays removed */
	assert_int_equal(pc_version(f, "b", NULL), 0);       /* came back */
	assert_int_equal(pc_read(f, "b", b, 2, 0), 2);
	assert_string_equal(b, "bb");
	assert_int_equal(pc_read(f, "c", b, 2, 0), 2);       /* the name, not the data */
	assert_int_equal(b[0], 0);
}

/* The shared crash point: the process dies after N ops across two pools. */
static void test_pc_crash_clock(void **state)
{
	struct fx *f = *state;
	struct tier_store *other;
	uint64_t clock = 0;
	struct tier_store_op op;
	int done = 0;

	assert_int_equal(tier_store_mem_create("base", NULL, f->cq, &other), 0);
	tier_store_mem_set_crash_clock(f->st, &clock, 3);
	tier_store_mem_set_crash_clock(other, &clock, 3);
	assert_int_equal(pc_write(f, "k", 0, "1", 0), 1);
	mk(&op, TIER_STORE_WRITE, "k");
	op.len = 1;
	op.buf = "2";
	op.cb = stat_like_cb;
	op.priv = &done;
	assert_int_equal(tier_store_submit(other, &op), 0);
	while (!done)
		tier_cq_drain(f->cq);
	assert_int_equal(op.result, 1);
	assert_int_equal(pc_write(f, "k", 0, "3", 0), 1);
	assert_int_equal(clock, 3);
	assert_int_equal(pc_write(f, "k", 0, "4", 0), -EIO);   /* dead */
	char b[4];
	tier_store_mem_set_crash_clock(f->st, NULL, 0);
	assert_int_equal(pc_read(f, "k", b, 1, 0), 1);
	assert_string_equal(b, "3");
	tier_store_mem_set_crash_clock(other, NULL, 0);
	tier_store_destroy(other);
	/* without the model there is nothing to cut */
	assert_int_equal(tier_store_mem_create("plain", NULL, f->cq, &other), 0);
	assert_int_equal(tier_store_mem_power_cut(other, TIER_MEM_CUT_RANDOM, 1), -EINVAL);
	tier_store_destroy(other);
}

/* ---- ownership gates (docs/DURABILITY.md "Handoff, takeover and fencing") ---- */

static void submit_only(struct fx *f, struct tier_store_op *op)
{
	op->cb = on_done;
	op->priv = f;
	assert_int_equal(tier_store_submit(f->st, op), 0);
}

static int drain_n(struct fx *f)
{
	int before = f->completions;

	tier_cq_drain(f->cq);
	return f->completions - before;
}

/* HOLD keeps an image's ops (only its own) out of the pool, in order, until OPEN. */
static void test_gate_hold_then_open(void **state)
{
	struct fx *f = *state;
	struct tier_store_op w1, w2, other, r;
	char a[8] = "AAAAAAA", b[8] = "BBBBBBB", x[8] = "XXXXXXX", got[8];
	int g = tier_store_gate_add(f->st, "rbd_data.img1");

	assert_true(g >= 0);
	assert_int_equal(tier_store_gate_get(f->st, g), TIER_STORE_GATE_OPEN);
	tier_store_gate_hold(f->st, g);
	assert_int_equal(tier_store_gate_get(f->st, g), TIER_STORE_GATE_HOLD);
	mk(&w1, TIER_STORE_WRITE, "rbd_data.img1.0000000000000000");
	w1.len = sizeof(a); w1.buf = a;
	mk(&w2, TIER_STORE_WRITE, "rbd_data.img1.0000000000000000");
	w2.len = sizeof(b); w2.buf = b;
	/* a prefix of the name is not the image: rbd_data.img10 passes */
	mk(&other, TIER_STORE_WRITE, "rbd_data.img10.0000000000000000");
	other.len = sizeof(x); other.buf = x;
	submit_only(f, &w1);
	submit_only(f, &w2);
	submit_only(f, &other);
	assert_int_equal(drain_n(f), 1);          /* only the other image's write */
	assert_int_equal(other.result, (int)sizeof(x));
	assert_int_equal(tier_store_in_flight(f->st), 2);
	mk(&r, TIER_STORE_READ, "rbd_data.img1.0000000000000000");
	r.len = sizeof(got); r.buf = got;
	submit_only(f, &r);                        /* reads wait too */
	assert_int_equal(drain_n(f), 0);
	tier_store_gate_set(f->st, g, TIER_STORE_GATE_OPEN);
	while (f->completions < 4)
		tier_cq_drain(f->cq);
	assert_int_equal(w1.result, (int)sizeof(a));
	assert_int_equal(w2.result, (int)sizeof(b));
	assert_int_equal(r.result, (int)sizeof(got));
	assert_memory_equal(got, b, sizeof(b));    /* in submission order */
	assert_int_equal(tier_store_fenced_ops(f->st), 0);
}

/* FENCED fails the held ops and every later one with -ESHUTDOWN, for good. */
static void test_gate_fence(void **state)
{
	struct fx *f = *state;
	struct tier_store_op w, held, r;
	char a[8] = "AAAAAAA", got[8];
	int g = tier_store_gate_add(f->st, "rbd_data.img2");

	mk(&w, TIER_STORE_WRITE, "rbd_data.img2.0000000000000001");
	w.len = sizeof(a); w.buf = a;
	assert_int_equal(run(f, &w), (int)sizeof(a));
	tier_store_gate_set(f->st, g, TIER_STORE_GATE_HOLD);
	mk(&held, TIER_STORE_REMOVE, "rbd_data.img2.0000000000000001");
	submit_only(f, &held);
	assert_int_equal(drain_n(f), 0);
	tier_store_gate_set(f->st, g, TIER_STORE_GATE_FENCED);
	assert_int_equal(drain_n(f), 1);
	assert_int_equal(held.result, -ESHUTDOWN);
	mk(&w, TIER_STORE_WRITE, "rbd_data.img2.0000000000000001");
	w.len = sizeof(a); w.buf = a;
	assert_int_equal(run(f, &w), -ESHUTDOWN);
	tier_store_gate_set(f->st, g, TIER_STORE_GATE_OPEN);   /* never opens again */
	assert_int_equal(tier_store_gate_get(f->st, g), TIER_STORE_GATE_FENCED);
	mk(&r, TIER_STORE_READ, "rbd_data.img2.0000000000000001");
	r.len = sizeof(got); r.buf = got;
	assert_int_equal(run(f, &r), -ESHUTDOWN);
	assert_int_equal(tier_store_fenced_ops(f->st), 3);
	/* the object is still there: the fenced remove never reached the pool */
	tier_store_gate_add(f->st, "rbd_data.other");
	assert_false(tier_store_blocklisted(f->st));
}

/* A lease that ran out closes the gate before the op reaches the pool. */
static void test_gate_lease(void **state)
{
	struct fx *f = *state;
	struct tier_store_op w;
	char a[8] = "AAAAAAA";
	int g = tier_store_gate_add(f->st, "rbd_data.img3");

	tier_store_gate_lease(f->st, g, tier_now_ns() + 60ull * 1000000000ull);
	mk(&w, TIER_STORE_WRITE, "rbd_data.img3.0000000000000000");
	w.len = sizeof(a); w.buf = a;
	assert_int_equal(run(f, &w), (int)sizeof(a));      /* within the lease */
	tier_store_gate_lease(f->st, g, tier_now_ns() - 1);  /* lapsed (a stop) */
	mk(&w, TIER_STORE_WRITE, "rbd_data.img3.0000000000000000");
	w.len = sizeof(a); w.buf = a;
	submit_only(f, &w);
	assert_int_equal(drain_n(f), 0);
	assert_int_equal(tier_store_gate_get(f->st, g), TIER_STORE_GATE_HOLD);
	/* the owner showed the lock is its own: renew and open */
	tier_store_gate_lease(f->st, g, tier_now_ns() + 60ull * 1000000000ull);
	tier_store_gate_set(f->st, g, TIER_STORE_GATE_OPEN);
	while (drain_n(f) == 0)
		;
	assert_int_equal(w.result, (int)sizeof(a));
	tier_store_gate_lease(f->st, g, 0);
}

/* A backend's -ESHUTDOWN (librados' EBLOCKLISTED) marks the store blocklisted. */
static void test_blocklisted_seen(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	struct tier_store_fault fault = { .err = ESHUTDOWN, .fail_nth = 1 };

	assert_false(tier_store_blocklisted(f->st));
	tier_store_set_fault(f->st, &fault);
	mk(&op, TIER_STORE_STAT, "x");
	assert_int_equal(run(f, &op), -ESHUTDOWN);
	assert_true(tier_store_blocklisted(f->st));
}

/*
 * A write that timed out taints its image's gate (it may still land: the
 * owner must never unlock the image, only be fenced); a read, or another
 * image's write, that timed out does not.
 */
static void test_gate_timed_out(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	struct tier_store_fault fault = { .err = ETIMEDOUT, .fail_nth = 1 };
	char a[8] = "AAAAAAA", got[8];
	int g = tier_store_gate_add(f->st, "rbd_data.img4");
	int g2 = tier_store_gate_add(f->st, "rbd_data.img5");

	tier_store_set_fault(f->st, &fault);
	mk(&op, TIER_STORE_READ, "rbd_data.img4.0000000000000000");
	op.len = sizeof(got); op.buf = got;
	assert_int_equal(run(f, &op), -ETIMEDOUT);
	assert_false(tier_store_gate_timed_out(f->st, g));
	tier_store_set_fault(f->st, &fault);
	mk(&op, TIER_STORE_WRITE, "rbd_data.img4.0000000000000000");
	op.len = sizeof(a); op.buf = a;
	assert_int_equal(run(f, &op), -ETIMEDOUT);
	assert_true(tier_store_gate_timed_out(f->st, g));
	assert_false(tier_store_gate_timed_out(f->st, g2));
	tier_store_set_fault(f->st, &fault);
	mk(&op, TIER_STORE_REMOVE, "rbd_data.img5.0000000000000000");
	assert_int_equal(run(f, &op), -ETIMEDOUT);
	assert_true(tier_store_gate_timed_out(f->st, g2));
	tier_store_set_fault(f->st, NULL);
	tier_store_gate_set(f->st, g, TIER_STORE_GATE_HOLD);
	tier_store_gate_set(f->st, g, TIER_STORE_GATE_OPEN);
	assert_true(tier_store_gate_timed_out(f->st, g));   /* sticky */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_read_roundtrip_and_sparse_zero_fill, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gate_hold_then_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gate_fence, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gate_lease, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gate_timed_out, setup, teardown),
		cmocka_unit_test_setup_teardown(test_blocklisted_seen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_absent_is_enoent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zero_and_remove, setup, teardown),
		cmocka_unit_test_setup_teardown(test_meta_and_stat, setup, teardown),
		cmocka_unit_test_setup_teardown(test_version_guards, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_by_prefix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalid_ops_rejected_without_callback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fail_completes_through_queue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counters, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_nth_with_errno_and_mask, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_fraction_is_roughly_that_fraction, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_stop_after_models_a_crash, setup, teardown),
		cmocka_unit_test(test_virtual_time_device_model),
		cmocka_unit_test_setup_teardown(test_pc_unsynced_write_may_be_lost, pc_setup, teardown),
		cmocka_unit_test_setup_teardown(test_pc_writes_independent, pc_setup, teardown),
		cmocka_unit_test_setup_teardown(test_pc_fua_write_kept, pc_setup, teardown),
		cmocka_unit_test_setup_teardown(test_pc_read_fua_syncs, pc_setup, teardown),
		cmocka_unit_test_setup_teardown(test_pc_meta_any_value_since_sync, pc_setup, teardown),
		cmocka_unit_test_setup_teardown(test_pc_ordered_meta_only_with_data, pc_setup, teardown),
		cmocka_unit_test_setup_teardown(test_pc_remove_can_come_back, pc_setup, teardown),
		cmocka_unit_test_setup_teardown(test_pc_fua_remove_barrier, pc_setup, teardown),
		cmocka_unit_test_setup_teardown(test_pc_crash_clock, pc_setup, teardown),
	};
	return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
