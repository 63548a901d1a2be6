/* SPDX-License-Identifier: MIT */
/*
 * tests/unit/test_store.c - the store seam (wrapper + completion queue) over
 * the mem backend: every op, version guards, listing, argument validation,
 * counters, fault injection, and virtual-time completion order.
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
	assert_int_equal(s.errors[TIER_STORE_READ], 1);
	assert_int_equal(s.errors[TIER_STORE_WRITE], 0);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_read_roundtrip_and_sparse_zero_fill, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_absent_is_enoent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zero_and_remove, setup, teardown),
		cmocka_unit_test_setup_teardown(test_meta_and_stat, setup, teardown),
		cmocka_unit_test_setup_teardown(test_version_guards, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_by_prefix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalid_ops_rejected_without_callback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counters, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_nth_with_errno_and_mask, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_fraction_is_roughly_that_fraction, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_stop_after_models_a_crash, setup, teardown),
		cmocka_unit_test(test_virtual_time_device_model),
	};
	return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
