/* SPDX-License-Identifier: MIT */
/*
 * tests/integration/test_rados_store.c - the store contract against a real
 * Ceph cluster (suite 'ceph'): every op, version guards, exclusive create,
 * listing by prefix, namespaces, the on-disk `tier.meta` record, many ops in
 * flight at once, and connection errors that name the monitors and the cephx
 * id.  Uses the cluster named by $CEPH_CONF (deploy/ceph-dev-cluster env DIR)
 * and its pools `cache` and `base`; exits 77 (skip) only when CEPH_CONF is
 * unset.  Objects get a per-run prefix and are removed at the end.
 */
#undef NDEBUG
#include <errno.h>
#include <libgen.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <rados/librados.h>

#include "tier/rados.h"
#include "tier/store.h"

#define POOL "cache"

static struct tier_rados *g_r;
static char g_prefix[64];
/*
 * One queue for the whole run, destroyed only after tier_rados_disconnect()
 * has joined librados's threads: a callback thread may still be inside
 * tier__cq_push() just after the owner has drained its op.
 */
static struct tier_cq *g_cq;

struct fx {
	struct tier_cq *cq;
	struct tier_store *st;
	int completions;
};

static void on_done(struct tier_store_op *op)
{
	((struct fx *)op->priv)->completions++;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->cq = g_cq;
	assert_int_equal(tier_store_rados_create(g_r, POOL, NULL, f->cq, &f->st), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	assert_int_equal(tier_store_in_flight(f->st), 0);
	tier_store_destroy(f->st);
	free(f);
	return 0;
}

/* Drain until `want` completions happened, failing after 30 s. */
static void wait_for(struct fx *f, int want)
{
	time_t deadline = time(NULL) + 30;

	while (f->completions < want) {
		assert_true(time(NULL) < deadline);
		tier_cq_wait(f->cq, 1000);
		tier_cq_drain(f->cq);
	}
}

static int run(struct fx *f, struct tier_store_op *op)
{
	int before = f->completions;

	op->cb = on_done;
	op->priv = f;
	assert_int_equal(tier_store_submit(f->st, op), 0);
	wait_for(f, before + 1);
	return op->result;
}

static void mk(struct tier_store_op *op, enum tier_store_opcode code, const char *name)
{
	memset(op, 0, sizeof(*op));
	op->opcode = code;
	snprintf(op->oid, sizeof(op->oid), "%s%s", g_prefix, name);
}

static void test_write_read_roundtrip_and_zero_fill_past_eof(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	char w[100], r[300];

	memset(w, 'x', sizeof(w));
	mk(&op, TIER_STORE_WRITE, "rw");
	op.off = 100; op.len = sizeof(w); op.buf = w;
	assert_int_equal(run(f, &op), (int)sizeof(w));
	memset(r, 0x55, sizeof(r));
	mk(&op, TIER_STORE_READ, "rw");
	op.len = sizeof(r); op.buf = r;
	assert_int_equal(run(f, &op), (int)sizeof(r));
	for (int i = 0; i < 300; i++)
		assert_int_equal(r[i], i >= 100 && i < 200 ? 'x' : 0);
	/* a read entirely past EOF is all zeros, not an error */
	memset(r, 0x55, sizeof(r));
	mk(&op, TIER_STORE_READ, "rw");
	op.off = 4096; op.len = 64; op.buf = r;
	assert_int_equal(run(f, &op), 64);
	for (int i = 0; i < 64; i++)
		assert_int_equal(r[i], 0);
}

static void test_read_and_stat_absent_are_enoent(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	char r[10];

	mk(&op, TIER_STORE_READ, "absent");
	op.len = sizeof(r); op.buf = r;
	assert_int_equal(run(f, &op), -ENOENT);
	mk(&op, TIER_STORE_STAT, "absent");
	assert_int_equal(run(f, &op), -ENOENT);
	mk(&op, TIER_STORE_REMOVE, "absent");
	assert_int_equal(run(f, &op), -ENOENT);
}

static void test_zero_creates_extends_and_zeroes(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	char w[64], r[128];

	memset(w, 7, sizeof(w));
	mk(&op, TIER_STORE_WRITE, "z"); op.len = 64; op.buf = w;
	assert_int_equal(run(f, &op), 64);
	mk(&op, TIER_STORE_ZERO, "z"); op.off = 16; op.len = 16;
	assert_int_equal(run(f, &op), 0);
	mk(&op, TIER_STORE_READ, "z"); op.len = 64; op.buf = r;
	assert_int_equal(run(f, &op), 64);
	for (int i = 0; i < 64; i++)
		assert_int_equal(r[i], i >= 16 && i < 32 ? 0 : 7);
	/* zero past EOF extends the object like the other backends */
	mk(&op, TIER_STORE_ZERO, "z"); op.off = 100; op.len = 28;
	assert_int_equal(run(f, &op), 0);
	mk(&op, TIER_STORE_STAT, "z");
	assert_int_equal(run(f, &op), 0);
	assert_int_equal(op.obj_size, 128);
	/* zero of an absent object creates it */
	mk(&op, TIER_STORE_ZERO, "z2"); op.off = 0; op.len = 4096;
	assert_int_equal(run(f, &op), 0);
	mk(&op, TIER_STORE_STAT, "z2");
	assert_int_equal(run(f, &op), 0);
	assert_int_equal(op.obj_size, 4096);
	mk(&op, TIER_STORE_REMOVE, "z");
	assert_int_equal(run(f, &op), 0);
	mk(&op, TIER_STORE_REMOVE, "z");
	assert_int_equal(run(f, &op), -ENOENT);
	mk(&op, TIER_STORE_STAT, "z");
	assert_int_equal(run(f, &op), -ENOENT);
}

static void test_meta_stat_and_setmeta(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	char w[10] = "abcdefghi", mb[TIER_META_MAX], big[1000];

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

	/* SETMETA replaces meta and version, data untouched; a big blob works */
	memset(big, 0xab, sizeof(big));
	mk(&op, TIER_STORE_SETMETA, "m");
	op.flags = TIER_STORE_F_META; op.meta = big; op.meta_len = sizeof(big); op.version = 6;
	assert_int_equal(run(f, &op), 0);
	mk(&op, TIER_STORE_STAT, "m"); op.meta_buf = mb; op.meta_cap = sizeof(mb);
	assert_int_equal(run(f, &op), 0);
	assert_int_equal(op.obj_version, 6);
	assert_int_equal(op.meta_len_out, sizeof(big));
	assert_memory_equal(mb, big, sizeof(big));
	assert_int_equal(op.obj_size, 10);

	/* a plain write keeps meta and version */
	mk(&op, TIER_STORE_WRITE, "m"); op.len = 3; op.buf = "XYZ";
	assert_int_equal(run(f, &op), 3);
	mk(&op, TIER_STORE_STAT, "m");
	assert_int_equal(run(f, &op), 0);
	assert_int_equal(op.obj_version, 6);

	/* meta larger than the caller's buffer is -ERANGE */
	mk(&op, TIER_STORE_STAT, "m"); op.meta_buf = mb; op.meta_cap = 1;
	assert_int_equal(run(f, &op), -ERANGE);

	/* SETMETA on an absent object needs F_CREATE */
	mk(&op, TIER_STORE_SETMETA, "m-absent");
	op.flags = TIER_STORE_F_META; op.meta = "x"; op.meta_len = 1; op.version = 1;
	assert_int_equal(run(f, &op), -ENOENT);
	op.flags |= TIER_STORE_F_CREATE;
	assert_int_equal(run(f, &op), 0);
	/* create-only-if-absent for a promotion's first meta */
	op.flags |= TIER_STORE_F_EXCL;
	assert_int_equal(run(f, &op), -EEXIST);
	mk(&op, TIER_STORE_STAT, "m-absent");
	assert_int_equal(run(f, &op), 0);
	assert_int_equal(op.obj_size, 0);
	assert_int_equal(op.obj_version, 1);

	/* an object written without meta has version 0 and no meta */
	mk(&op, TIER_STORE_WRITE, "m-plain"); op.len = 1; op.buf = "p";
	assert_int_equal(run(f, &op), 1);
	mk(&op, TIER_STORE_STAT, "m-plain");
	assert_int_equal(run(f, &op), 0);
	assert_int_equal(op.obj_version, 0);
	assert_int_equal(op.meta_len_out, 0);
}

static void test_version_guards_and_exclusive_create(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	char w[4] = "abc", r[4];

	mk(&op, TIER_STORE_WRITE, "g");
	op.len = 4; op.buf = w; op.flags = TIER_STORE_F_META | TIER_STORE_F_EXCL;
	op.meta = "c"; op.meta_len = 1; op.version = 1;
	assert_int_equal(run(f, &op), 4);
	assert_int_equal(run(f, &op), -EEXIST);

	/* a wrong version changes nothing: neither data nor meta */
	mk(&op, TIER_STORE_WRITE, "g");
	op.len = 4; op.buf = "XYZ"; op.flags = TIER_STORE_F_META | TIER_STORE_F_GUARD;
	op.meta = "d"; op.meta_len = 1; op.version = 3; op.expect_version = 2;
	assert_int_equal(run(f, &op), -ECANCELED);
	mk(&op, TIER_STORE_READ, "g"); op.len = 4; op.buf = r;
	assert_int_equal(run(f, &op), 4);
	assert_memory_equal(r, "abc", 4);
	mk(&op, TIER_STORE_STAT, "g");
	assert_int_equal(run(f, &op), 0);
	assert_int_equal(op.obj_version, 1);

	/* the right version passes */
	mk(&op, TIER_STORE_WRITE, "g");
	op.len = 4; op.buf = "XYZ"; op.flags = TIER_STORE_F_META | TIER_STORE_F_GUARD;
	op.meta = "d"; op.meta_len = 1; op.version = 2; op.expect_version = 1;
	assert_int_equal(run(f, &op), 4);

	/* guarded SETMETA (the flush's "clear dirty") and guarded READ/STAT */
	mk(&op, TIER_STORE_SETMETA, "g");
	op.flags = TIER_STORE_F_META | TIER_STORE_F_GUARD;
	op.meta = "e"; op.meta_len = 1; op.version = 2; op.expect_version = 7;
	assert_int_equal(run(f, &op), -ECANCELED);
	op.expect_version = 2;
	assert_int_equal(run(f, &op), 0);
	mk(&op, TIER_STORE_READ, "g"); op.len = 4; op.buf = r;
	op.flags = TIER_STORE_F_GUARD; op.expect_version = 9;
	assert_int_equal(run(f, &op), -ECANCELED);
	op.expect_version = 2;
	assert_int_equal(run(f, &op), 4);
	assert_memory_equal(r, "XYZ", 4);

	/* guarded remove (evict) */
	mk(&op, TIER_STORE_REMOVE, "g"); op.flags = TIER_STORE_F_GUARD; op.expect_version = 1;
	assert_int_equal(run(f, &op), -ECANCELED);
	op.expect_version = 2;
	assert_int_equal(run(f, &op), 0);
	/* a guard on an absent object fails with -ECANCELED, not -ENOENT */
	assert_int_equal(run(f, &op), -ECANCELED);

	/* version 0 = "no version": an object without meta passes a guard on 0 */
	mk(&op, TIER_STORE_WRITE, "g0"); op.len = 1; op.buf = "a";
	assert_int_equal(run(f, &op), 1);
	mk(&op, TIER_STORE_WRITE, "g0"); op.len = 1; op.buf = "b";
	op.flags = TIER_STORE_F_GUARD | TIER_STORE_F_META; op.expect_version = 0;
	op.meta = "m"; op.meta_len = 1; op.version = 4;
	assert_int_equal(run(f, &op), 1);
	/* and setting version 0 again makes a guard on 0 pass, on 4 fail */
	mk(&op, TIER_STORE_SETMETA, "g0");
	op.flags = TIER_STORE_F_META; op.meta = "m"; op.meta_len = 1; op.version = 0;
	assert_int_equal(run(f, &op), 0);
	mk(&op, TIER_STORE_REMOVE, "g0"); op.flags = TIER_STORE_F_GUARD; op.expect_version = 4;
	assert_int_equal(run(f, &op), -ECANCELED);
	op.expect_version = 0;
	assert_int_equal(run(f, &op), 0);
}

/* The record on disk is what DESIGN says: data and meta are one object. */
static void test_meta_record_layout_in_rados(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	rados_t c = NULL;
	rados_ioctx_t io = NULL;
	unsigned char rec[64];
	char ver[32];
	int n;

	mk(&op, TIER_STORE_WRITE, "layout");
	op.len = 1; op.buf = "q"; op.flags = TIER_STORE_F_META;
	op.meta = "hello"; op.meta_len = 5; op.version = 0x0102030405ull;
	assert_int_equal(run(f, &op), 1);

	assert_int_equal(rados_create(&c, NULL), 0);
	assert_int_equal(rados_conf_read_file(c, NULL), 0);
	assert_int_equal(rados_connect(c), 0);
	assert_int_equal(rados_ioctx_create(c, POOL, &io), 0);
	n = rados_getxattr(io, op.oid, "tier.meta", (char *)rec, sizeof(rec));
	assert_int_equal(n, 16 + 5);
	assert_int_equal(rec[0], 1);        /* format, LE */
	assert_int_equal(rec[1], 0);
	assert_int_equal(rec[4], 5);        /* meta_len */
	assert_int_equal(rec[8], 0x05);     /* version, LE */
	assert_int_equal(rec[12], 0x01);
	assert_memory_equal(rec + 16, "hello", 5);
	n = rados_getxattr(io, op.oid, "tier.version", ver, sizeof(ver) - 1);
	assert_true(n > 0);
	ver[n] = '\0';
	assert_string_equal(ver, "4328719365");
	rados_ioctx_destroy(io);
	rados_shutdown(c);
}

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_list_by_prefix(void **state)
{
	struct fx *f = *state;
	struct tier_store_op ops[60], op;
	char want[TIER_OID_MAX + 16];
	int base = f->completions;

	for (int i = 0; i < 60; i++) {
		char name[32];

		snprintf(name, sizeof(name), "%s.%04d", i % 3 ? "la" : "lb", i);
		mk(&ops[i], TIER_STORE_WRITE, name);
		ops[i].len = 1; ops[i].buf = "q"; ops[i].cb = on_done; ops[i].priv = f;
		assert_int_equal(tier_store_submit(f->st, &ops[i]), 0);
	}
	wait_for(f, base + 60);
	for (int i = 0; i < 60; i++)
		assert_int_equal(ops[i].result, 1);
	mk(&op, TIER_STORE_LIST, "");
	snprintf(want, sizeof(want), "%slb.", g_prefix);
	op.prefix = want;
	assert_int_equal(run(f, &op), 20);
	assert_int_equal(op.n_names, 20);
	qsort(op.names, op.n_names, sizeof(char *), cmpstr);
	snprintf(want, sizeof(want), "%slb.0000", g_prefix);
	assert_string_equal(op.names[0], want);
	snprintf(want, sizeof(want), "%slb.0057", g_prefix);
	assert_string_equal(op.names[19], want);
	tier_store_list_free(op.names, op.n_names);
	mk(&op, TIER_STORE_LIST, "");
	snprintf(want, sizeof(want), "%snone.", g_prefix);
	op.prefix = want;
	assert_int_equal(run(f, &op), 0);
	assert_int_equal(op.n_names, 0);
	tier_store_list_free(op.names, op.n_names);
}

static void test_namespace_isolates_objects(void **state)
{
	struct fx *f = *state;
	struct tier_store *ns = NULL;
	struct tier_store_op op;
	char r[4];
	int before;

	assert_int_equal(tier_store_rados_create(g_r, POOL, "tier-test-ns", f->cq, &ns), 0);
	assert_string_equal(tier_store_pool_name(ns), POOL "/tier-test-ns");
	assert_string_equal(tier_store_backend_name(ns), "rados");
	mk(&op, TIER_STORE_WRITE, "ns"); op.len = 3; op.buf = "ns1";
	op.cb = on_done; op.priv = f;
	before = f->completions;
	assert_int_equal(tier_store_submit(ns, &op), 0);
	wait_for(f, before + 1);
	assert_int_equal(op.result, 3);
	/* not visible in the default namespace */
	mk(&op, TIER_STORE_READ, "ns"); op.len = 3; op.buf = r;
	assert_int_equal(run(f, &op), -ENOENT);
	mk(&op, TIER_STORE_REMOVE, "ns"); op.cb = on_done; op.priv = f;
	before = f->completions;
	assert_int_equal(tier_store_submit(ns, &op), 0);
	wait_for(f, before + 1);
	assert_int_equal(op.result, 0);
	tier_store_destroy(ns);
}

static void test_missing_pool_is_enoent(void **state)
{
	struct fx *f = *state;
	struct tier_store *st = NULL;

	assert_int_equal(tier_store_rados_create(g_r, "no-such-pool-xyz", NULL, f->cq, &st),
			 -ENOENT);
	assert_null(st);
}

/* Many ops in flight at once, several on one object, complete exactly once. */
#define NCONC 128
static void test_concurrent_ops_complete_once(void **state)
{
	struct fx *f = *state;
	static struct tier_store_op ops[NCONC];
	static char bufs[NCONC][4096];
	struct tier_store_op op;
	char r[4096];
	int base = f->completions;

	for (int i = 0; i < NCONC; i++) {
		char name[32];

		memset(bufs[i], 'A' + i % 26, sizeof(bufs[i]));
		snprintf(name, sizeof(name), "conc.%d", i % 16);
		mk(&ops[i], TIER_STORE_WRITE, name);
		ops[i].off = (uint64_t)(i / 16) * 4096;
		ops[i].len = 4096; ops[i].buf = bufs[i];
		ops[i].cb = on_done; ops[i].priv = f;
		assert_int_equal(tier_store_submit(f->st, &ops[i]), 0);
	}
	assert_true(tier_store_in_flight(f->st) > 0);
	wait_for(f, base + NCONC);
	assert_int_equal(f->completions, base + NCONC);
	assert_int_equal(tier_store_in_flight(f->st), 0);
	for (int i = 0; i < NCONC; i++) {
		char name[32];

		assert_int_equal(ops[i].result, 4096);
		snprintf(name, sizeof(name), "conc.%d", i % 16);
		mk(&op, TIER_STORE_READ, name);
		op.off = (uint64_t)(i / 16) * 4096; op.len = 4096; op.buf = r;
		assert_int_equal(run(f, &op), 4096);
		assert_memory_equal(r, bufs[i], 4096);
	}
}

static void test_counters_count_rados_ops(void **state)
{
	struct fx *f = *state;
	struct tier_store_op op;
	struct tier_store_stats s;
	char b[512];

	memset(b, 1, sizeof(b));
	mk(&op, TIER_STORE_WRITE, "cnt"); op.len = 512; op.buf = b;
	assert_int_equal(run(f, &op), 512);
	mk(&op, TIER_STORE_READ, "cnt-missing"); op.len = 100; op.buf = b;
	assert_int_equal(run(f, &op), -ENOENT);
	tier_store_get_stats(f->st, &s);
	assert_int_equal(s.ops[TIER_STORE_WRITE], 1);
	assert_int_equal(s.bytes[TIER_STORE_WRITE], 512);
	/* an absent object is a miss (not_found), not an error */
	assert_int_equal(s.errors[TIER_STORE_READ], 0);
	assert_int_equal(s.not_found[TIER_STORE_READ], 1);
}

/* Connection errors name the monitors and the cephx id, within the timeout. */
static void test_connect_errors_name_monitor_and_id(void **state)
{
	char path[] = "/tmp/tier-rados-conf-XXXXXX", err[1024];
	struct tier_rados_opts o = {0};
	struct tier_rados *r = NULL;
	time_t t0;
	FILE *fp;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	assert_non_null(fp);
	/* nothing listens on port 9 of 127.0.0.1 */
	fprintf(fp, "[global]\nmon host = 127.0.0.1:9\nauth client required = none\n");
	fclose(fp);
	o.conf = path;
	o.client_name = "tier-test";
	o.op_timeout_ms = 2000;
	t0 = time(NULL);
	assert_true(tier_rados_connect(&o, &r, err, sizeof(err)) < 0);
	assert_null(r);
	assert_true(time(NULL) - t0 < 15);
	assert_non_null(strstr(err, "127.0.0.1:9"));
	assert_non_null(strstr(err, "client.tier-test"));
	unlink(path);

	/* a keyring that does not hold our key: refused, naming the id */
	o.conf = getenv("CEPH_CONF");
	o.client_name = "client.nobody";
	assert_true(tier_rados_connect(&o, &r, err, sizeof(err)) < 0);
	assert_null(r);
	assert_non_null(strstr(err, "client.nobody"));
	assert_non_null(strstr(err, "127.0.0.1"));

	/* a missing config file is its own clear error */
	o.conf = "/nonexistent/ceph.conf";
	assert_true(tier_rados_connect(&o, &r, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "/nonexistent/ceph.conf"));
}

/*
 * The cluster going away: with the cache pool's OSD frozen (SIGSTOP, dev
 * cluster only: DIR/run/osd.1.pid next to $CEPH_CONF), an op waits about
 * op_timeout and fails with -ETIMEDOUT; once the OSD is back the same store
 * works again without reconnecting.
 */
static pid_t g_frozen;

static int thaw(void **state)
{
	if (g_frozen > 0)
		kill(g_frozen, SIGCONT);
	g_frozen = 0;
	(void)state;
	return 0;
}

static void test_osd_gone_times_out_then_recovers(void **state)
{
	char conf[512], pidfile[600], err[512];
	struct tier_rados_opts o = {0};
	struct tier_rados *r = NULL;
	struct tier_store *st = NULL;
	struct tier_store_op op;
	struct fx f = { .cq = g_cq };
	long pid = 0;
	time_t t0, took;
	FILE *fp;

	(void)state;
	snprintf(conf, sizeof(conf), "%s", getenv("CEPH_CONF"));
	snprintf(pidfile, sizeof(pidfile), "%s/run/osd.1.pid", dirname(conf));
	fp = fopen(pidfile, "r");
	if (!fp || fscanf(fp, "%ld", &pid) != 1 || pid <= 0) {
		if (fp)
			fclose(fp);
		skip();    /* not a deploy/ceph-dev-cluster cluster */
	}
	fclose(fp);
	o.conf = getenv("CEPH_CONF");
	o.client_name = "client.admin";
	o.op_timeout_ms = 2000;
	assert_int_equal(tier_rados_connect(&o, &r, err, sizeof(err)), 0);
	assert_int_equal(tier_store_rados_create(r, POOL, NULL, g_cq, &st), 0);
	f.st = st;
	mk(&op, TIER_STORE_WRITE, "gone"); op.len = 4; op.buf = "live";
	assert_int_equal(run(&f, &op), 4);

	g_frozen = (pid_t)pid;
	assert_int_equal(kill(g_frozen, SIGSTOP), 0);
	mk(&op, TIER_STORE_WRITE, "gone"); op.len = 4; op.buf = "dead";
	t0 = time(NULL);
	assert_int_equal(run(&f, &op), -ETIMEDOUT);
	took = time(NULL) - t0;
	assert_true(took >= 1 && took <= 10);
	thaw(NULL);

	mk(&op, TIER_STORE_WRITE, "gone"); op.len = 4; op.buf = "back";
	assert_int_equal(run(&f, &op), 4);
	tier_store_destroy(st);
	tier_rados_disconnect(r);
}

/* Remove every object this run created (both namespaces are checked above). */
static void cleanup_objects(void)
{
	rados_t c = NULL;
	rados_ioctx_t io = NULL;
	rados_list_ctx_t lc = NULL;
	const char *e;
	char **names = NULL;
	size_t n = 0, cap = 0;

	if (rados_create(&c, NULL) < 0 || rados_conf_read_file(c, NULL) < 0 ||
	    rados_connect(c) < 0 || rados_ioctx_create(c, POOL, &io) < 0)
		goto out;
	if (rados_nobjects_list_open(io, &lc) == 0) {
		while (rados_nobjects_list_next(lc, &e, NULL, NULL) == 0) {
			if (strncmp(e, g_prefix, strlen(g_prefix)) != 0)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				names = realloc(names, cap * sizeof(*names));
			}
			names[n++] = strdup(e);
		}
		rados_nobjects_list_close(lc);
	}
	for (size_t i = 0; i < n; i++) {
		rados_remove(io, names[i]);
		free(names[i]);
	}
	free(names);
out:
	if (io)
		rados_ioctx_destroy(io);
	if (c)
		rados_shutdown(c);
}

int main(void)
{
	const char *conf = getenv("CEPH_CONF");
	struct tier_rados_opts o = {0};
	char err[1024];
	int rc;

	if (!conf || !*conf) {
		fprintf(stderr, "SKIP: CEPH_CONF is not set (start a cluster with "
			"deploy/ceph-dev-cluster start DIR; eval \"$(deploy/ceph-dev-cluster env DIR)\")\n");
		return 77;
	}
	snprintf(g_prefix, sizeof(g_prefix), "tier-test.%ld.%ld.", (long)getpid(), (long)time(NULL));
	o.conf = conf;
	o.client_name = "client.admin";
	o.op_timeout_ms = 30000;
	rc = tier_rados_connect(&o, &g_r, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "FAIL: %s\n", err);
		return 1;
	}
	if (tier_cq_create(NULL, NULL, &g_cq) < 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_read_roundtrip_and_zero_fill_past_eof, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_and_stat_absent_are_enoent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zero_creates_extends_and_zeroes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_meta_stat_and_setmeta, setup, teardown),
		cmocka_unit_test_setup_teardown(test_version_guards_and_exclusive_create, setup, teardown),
		cmocka_unit_test_setup_teardown(test_meta_record_layout_in_rados, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_by_prefix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_namespace_isolates_objects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_pool_is_enoent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_ops_complete_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counters_count_rados_ops, setup, teardown),
		cmocka_unit_test(test_connect_errors_name_monitor_and_id),
		cmocka_unit_test_teardown(test_osd_gone_times_out_then_recovers, thaw),
	};
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	cleanup_objects();
	tier_rados_disconnect(g_r);
	tier_cq_destroy(g_cq);
	return rc;
}
